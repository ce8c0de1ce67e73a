// SPDX-License-Identifier: LGPL-2.1-or-later
/* Device-name allocator; see names.h. */
#include "names.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct prefix {
        char name[IFNAMSIZ];
        uint64_t *bits;
        unsigned nwords;
        unsigned cursor;
        unsigned max;
        struct prefix *next;
};

struct nbd_names {
        struct prefix *prefixes;
};

int nbd_names_new(struct nbd_names **ret)
{
        struct nbd_names *n = calloc(1, sizeof(*n));

        if (!n)
                return -ENOMEM;
        *ret = n;
        return 0;
}

void nbd_names_free(struct nbd_names *n)
{
        if (!n)
                return;
        while (n->prefixes) {
                struct prefix *p = n->prefixes;
                n->prefixes = p->next;
                free(p->bits);
                free(p);
        }
        free(n);
}

void nbd_names_clear(struct nbd_names *n)
{
        for (struct prefix *p = n->prefixes; p; p = p->next)
                memset(p->bits, 0, p->nwords * sizeof(*p->bits));
}

bool nbd_ifname_valid(const char *name)
{
        size_t len = strnlen(name, IFNAMSIZ);

        if (len == 0 || len >= IFNAMSIZ)
                return false;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return false;
        /* Printable ASCII only: names go into logs, the audit trail and
         * terminals (an ESC, or a C1 CSI byte, would be a terminal
         * sequence), and into protobuf strings, which other decoders
         * refuse when not UTF-8. No glob characters nor commas: programs
         * the helper starts read "vnet*" as every vnet, and "a,b" as two
         * interfaces (dnsmasq's --interface), so a caller's own "vnet*"
         * would have its dnsmasq, run as root, serve everyone's. */
        for (const unsigned char *c = (const unsigned char *)name; *c; c++)
                if (*c <= ' ' || *c >= 0x7f || strchr("/:*?[],", *c))
                        return false;
        return true;
}

bool nbd_is_template(const char *s)
{
        return strchr(s, '%') != NULL;
}

unsigned nbd_names_max_suffix(const char *prefix)
{
        size_t room = IFNAMSIZ - 1 - strlen(prefix);
        unsigned max = 0;

        if (strlen(prefix) >= IFNAMSIZ - 1)
                return 0;
        for (size_t i = 0; i < room && max <= NBD_NAMES_MAX_SUFFIX; i++)
                max = max * 10 + 9;
        return max > NBD_NAMES_MAX_SUFFIX ? NBD_NAMES_MAX_SUFFIX : max;
}

int nbd_template_parse(const char *tmpl, char ret_prefix[IFNAMSIZ])
{
        size_t len = strlen(tmpl);
        char prefix[IFNAMSIZ];

        if (len < 3 || strcmp(tmpl + len - 2, "%d") != 0 || len - 2 >= IFNAMSIZ - 1)
                return -EINVAL;
        memcpy(prefix, tmpl, len - 2);
        prefix[len - 2] = '\0';
        /* Exactly one conversion, and no other '%' anywhere: the caller never
         * supplies a printf format. */
        if (strchr(prefix, '%') || !nbd_ifname_valid(prefix) ||
            isdigit((unsigned char)prefix[len - 3]))
                return -EINVAL;
        strcpy(ret_prefix, prefix);
        return 0;
}

/* Split "vnet12" into "vnet" and 12. */
static bool split(const char *ifname, char prefix[IFNAMSIZ], unsigned *ret)
{
        size_t len = strnlen(ifname, IFNAMSIZ), i = len;
        unsigned long v;

        if (len == 0 || len >= IFNAMSIZ)
                return false;
        while (i > 0 && isdigit((unsigned char)ifname[i - 1]))
                i--;
        if (i == 0 || i == len)
                return false;
        if (ifname[i] == '0' && i + 1 < len) /* leading zero: not ours */
                return false;
        v = strtoul(ifname + i, NULL, 10);
        if (v > NBD_NAMES_MAX_SUFFIX)
                return false;
        memcpy(prefix, ifname, i);
        prefix[i] = '\0';
        *ret = (unsigned)v;
        return true;
}

static struct prefix *find(struct nbd_names *n, const char *name, bool create)
{
        struct prefix *p;

        for (p = n->prefixes; p; p = p->next)
                if (strcmp(p->name, name) == 0)
                        return p;
        if (!create)
                return NULL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        strcpy(p->name, name);
        p->max = nbd_names_max_suffix(name);
        p->next = n->prefixes;
        n->prefixes = p;
        return p;
}

static int set_bit(struct prefix *p, unsigned v, bool used)
{
        unsigned word = v / 64;

        if (v > p->max)
                return -ERANGE;
        if (word >= p->nwords) {
                unsigned nw;
                uint64_t *bits;
                if (!used)
                        return 0;
                nw = word + 1 > p->nwords * 2 ? word + 1 : p->nwords * 2;
                bits = realloc(p->bits, nw * sizeof(*bits));
                if (!bits)
                        return -ENOMEM;
                memset(bits + p->nwords, 0, (nw - p->nwords) * sizeof(*bits));
                p->bits = bits;
                p->nwords = nw;
        }
        if (used)
                p->bits[word] |= UINT64_C(1) << (v % 64);
        else
                p->bits[word] &= ~(UINT64_C(1) << (v % 64));
        return 0;
}

static bool test_bit(const struct prefix *p, unsigned v)
{
        unsigned word = v / 64;

        return word < p->nwords && (p->bits[word] >> (v % 64)) & 1;
}

void nbd_names_mark(struct nbd_names *n, const char *ifname, bool used)
{
        char name[IFNAMSIZ];
        unsigned v;
        struct prefix *p;

        if (!split(ifname, name, &v))
                return;
        p = find(n, name, used);
        if (p)
                set_bit(p, v, used);
}

/* First clear bit in [from, to], or UINT32_MAX. Whole words at a time. */
static unsigned first_clear(const struct prefix *p, unsigned from, unsigned to)
{
        for (unsigned v = from; v <= to;) {
                unsigned word = v / 64;
                if (word >= p->nwords)
                        return v;
                uint64_t free_bits = ~p->bits[word] & (~UINT64_C(0) << (v % 64));
                if (free_bits) {
                        unsigned hit = word * 64 + (unsigned)__builtin_ctzll(free_bits);
                        return hit <= to ? hit : UINT32_MAX;
                }
                v = (word + 1) * 64;
        }
        return UINT32_MAX;
}

int nbd_names_allocate(struct nbd_names *n, const char *prefix, char ret_name[IFNAMSIZ])
{
        struct prefix *p = find(n, prefix, true);
        unsigned v;
        int r;

        if (!p)
                return -ENOMEM;
        if (p->max == 0 && strlen(prefix) >= IFNAMSIZ - 1)
                return -ENOSPC;
        if (p->cursor > p->max)
                p->cursor = 0;
        v = first_clear(p, p->cursor, p->max);
        if (v == UINT32_MAX && p->cursor > 0)
                v = first_clear(p, 0, p->cursor - 1);
        if (v == UINT32_MAX)
                return -ENOSPC;
        r = set_bit(p, v, true);
        if (r < 0)
                return r;
        p->cursor = v + 1;
        snprintf(ret_name, IFNAMSIZ, "%s%u", prefix, v);
        return 0;
}

int nbd_names_foreach(struct nbd_names *n, nbd_names_fn fn, void *data)
{
        for (struct prefix *p = n->prefixes; p; p = p->next) {
                unsigned *used = NULL;
                size_t count = 0;
                int r;
                for (unsigned w = 0; w < p->nwords; w++)
                        count += (size_t)__builtin_popcountll(p->bits[w]);
                if (count) {
                        used = malloc(count * sizeof(*used));
                        if (!used)
                                return -ENOMEM;
                        count = 0;
                        for (unsigned v = 0; v / 64 < p->nwords; v++)
                                if (test_bit(p, v))
                                        used[count++] = v;
                }
                r = fn(p->name, used, count, p->cursor, data);
                free(used);
                if (r < 0)
                        return r;
        }
        return 0;
}
