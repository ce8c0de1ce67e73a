// SPDX-License-Identifier: LGPL-2.1-or-later
/* See config_load.h. */
#include "config_load.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

int tu_config_load(const char *body, struct nbd_config *c, char *err, size_t errlen)
{
        struct nbd_err e = {0};
        char *path = tu_config(body);
        int r;

        nbd_config_defaults(c);
        r = nbd_config_load(c, path, true, &e);
        /* Every failure fills e: its code, and a sentence. */
        if (r < 0) {
                ck_assert_int_eq(e.code, r);
                ck_assert(e.msg[0] != '\0');
        }
        snprintf(err, errlen, "%s", e.msg);
        /* test_limits.c loads over a hundred: remove each at once. */
        unlink(path);
        free(path);
        return r;
}
