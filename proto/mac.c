// SPDX-License-Identifier: LGPL-2.1-or-later
/* MAC address parsing; see mac.h. */
#include "mac.h"

#include <errno.h>
#include <string.h>

/* Not isxdigit() or strtoul(): those follow the locale, and strtoul also
 * takes a sign, leading blanks and "0x", which is how "+2" and "-1" once
 * passed for address bytes. */
static int hex_digit(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int nbp_mac_parse_n(const char *s, size_t len, uint8_t ret[6])
{
        uint8_t b[6];

        if (len != 17)
                return -EINVAL;
        for (int i = 0; i < 6; i++) {
                const char *p = s + 3 * i;
                int hi = hex_digit(p[0]), lo = hex_digit(p[1]);

                if (hi < 0 || lo < 0 || (i < 5 && p[2] != ':'))
                        return -EINVAL;
                b[i] = (uint8_t)(hi << 4 | lo);
        }
        memcpy(ret, b, sizeof(b));
        return 0;
}

int nbp_mac_parse(const char *s, uint8_t ret[6])
{
        return nbp_mac_parse_n(s, strlen(s), ret);
}
