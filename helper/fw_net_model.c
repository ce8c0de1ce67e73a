// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners' model: parsing, checks and the content hash; see fw_net.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_net.h"
#include "names.h"

const char *const nbd_net_mode_names[4] = {"nat", "route", "open", "isolated"};

/* An address of either family: 4 or 6, or 0 when it is neither. */
static int parse_addr(const char *s, uint8_t out[16])
{
        memset(out, 0, 16);
        if (inet_pton(AF_INET, s, out) == 1)
                return 4;
        if (inet_pton(AF_INET6, s, out) == 1)
                return 6;
        return 0;
}

int nbd_net_parse_subnet(const char *s, struct nbd_net_subnet *ret, struct nbd_err *e)
{
        struct nbd_net_subnet n = {0};
        char buf[INET6_ADDRSTRLEN + 8];
        const char *slash = strchr(s, '/');
        char *end;
        unsigned long bits;
        unsigned max;

        if (!slash || (size_t)(slash - s) >= INET6_ADDRSTRLEN || !slash[1])
                return nbd_err_set(e, -EINVAL, "subnet '%.64s': not ADDRESS/PREFIX", s);
        memcpy(buf, s, (size_t)(slash - s));
        buf[slash - s] = 0;
        n.family = parse_addr(buf, n.addr);
        errno = 0;
        bits = strtoul(slash + 1, &end, 10);
        max = n.family == 4 ? 32 : 128;
        if (!n.family || *end || errno || slash[1] == '-' || slash[1] == '+' || bits > max ||
            bits == 0)
                return nbd_err_set(e, -EINVAL,
                                   "subnet '%.64s': not ADDRESS/PREFIX (IPv4 /1-32, IPv6 /1-128)",
                                   s);
        n.prefix = (unsigned)bits;
        for (unsigned i = 0; i < max / 8; i++) {
                unsigned b = n.prefix > i * 8 ? n.prefix - i * 8 : 0;
                n.mask[i] = b >= 8 ? 0xff : (uint8_t)(0xff00 >> b);
                /* The network, as libvirt's rules name it (a host address
                 * with its prefix, as an interface has it, is one). */
                n.addr[i] &= n.mask[i];
        }
        *ret = n;
        return 0;
}

static bool in_subnet(const struct nbd_net_subnet *n, int family, const uint8_t a[16])
{
        if (n->family != family)
                return false;
        for (unsigned i = 0; i < 16; i++)
                if ((a[i] & n->mask[i]) != n->addr[i])
                        return false;
        return true;
}

int nbd_net_parse_forward(const struct nbd_net_spec *s, const char *proto, const char *outside,
                          uint32_t outside_port, const char *guest, uint32_t guest_port,
                          struct nbd_net_forward *ret, struct nbd_err *e)
{
        struct nbd_net_forward f = {0};
        bool inside = false;

        if (strcmp(proto, "tcp") == 0)
                f.proto = IPPROTO_TCP;
        else if (strcmp(proto, "udp") == 0)
                f.proto = IPPROTO_UDP;
        else
                return nbd_err_set(e, -EINVAL, "protocol '%.16s': tcp or udp", proto);
        if (!outside_port || outside_port > 65535 || guest_port > 65535)
                return nbd_err_set(e, -EINVAL, "ports are 1-65535 (guest port 0: the outside's)");
        f.outside_port = (uint16_t)outside_port;
        f.guest_port = (uint16_t)(guest_port ? guest_port : outside_port);
        f.family = parse_addr(guest, f.guest);
        if (!f.family)
                return nbd_err_set(e, -EINVAL, "guest address '%.64s' is not an address", guest);
        for (size_t i = 0; i < s->n_subnets; i++)
                inside |= in_subnet(&s->subnets[i], f.family, f.guest);
        /* The forward filter lets DNATed connections in to the network's
         * subnets only, as its other rules name them. */
        if (!inside)
                return nbd_err_set(e, -EINVAL, "guest address %.64s is in none of the subnets",
                                   guest);
        if (outside[0]) {
                if (parse_addr(outside, f.outside) != f.family)
                        return nbd_err_set(e, -EINVAL,
                                           "outside address '%.64s' is not an address of the "
                                           "guest address's family",
                                           outside);
                f.has_outside = true;
        }
        *ret = f;
        return 0;
}

int nbd_net_spec_check(const struct nbd_net_spec *s, struct nbd_err *e)
{
        if (!nbd_fw_owner_valid(s->owner))
                return nbd_err_set(e, -EINVAL, "bad owner '%s' ([A-Za-z0-9_.:@-], 1-%d bytes)",
                                   s->owner, NBD_FW_OWNER_MAX);
        if (!nbd_ifname_valid(s->bridge))
                return nbd_err_set(e, -EINVAL, "bad bridge name '%s'", s->bridge);
        if (s->forward_dev[0] && !nbd_ifname_valid(s->forward_dev))
                return nbd_err_set(e, -EINVAL, "bad forward device name '%s'", s->forward_dev);
        if (s->nat_port_min > s->nat_port_max ||
            (s->nat_port_min && s->nat_port_min >= s->nat_port_max))
                return nbd_err_set(e, -EINVAL, "NAT port range %u-%u: min < max, or both 0",
                                   s->nat_port_min, s->nat_port_max);
        if (s->nat_ipv6 && s->mode != NBD_NET_NAT)
                return nbd_err_set(e, -EINVAL, "nat_ipv6 is for nat mode, not %s",
                                   nbd_net_mode_names[s->mode]);
        if ((s->mode == NBD_NET_NAT || s->mode == NBD_NET_ROUTE) && !s->n_subnets)
                return nbd_err_set(e, -EINVAL, "%s mode needs a subnet",
                                   nbd_net_mode_names[s->mode]);
        if (s->mode == NBD_NET_ISOLATED && s->n_forwards)
                return nbd_err_set(e, -EINVAL,
                                   "an isolated network has no port forwards (nothing reaches "
                                   "it from outside)");
        for (size_t i = 0; i < s->n_forwards; i++)
                for (size_t k = 0; k < i; k++)
                        if (s->forwards[k].proto == s->forwards[i].proto &&
                            s->forwards[k].family == s->forwards[i].family &&
                            s->forwards[k].outside_port == s->forwards[i].outside_port &&
                            s->forwards[k].has_outside == s->forwards[i].has_outside &&
                            memcmp(s->forwards[k].outside, s->forwards[i].outside, 16) == 0)
                                return nbd_err_set(e, -EINVAL,
                                                   "port forwards %zu and %zu take the same "
                                                   "outside port",
                                                   k, i);
        return 0;
}

/* ---- the content hash ---- */

/* 128-bit FNV-1a, as the guests' owners have it (fw_model.c): it tells
 * "the rules we installed" from others, nobody chooses it against us. */
struct fnv128 {
        unsigned __int128 h;
};

static void fnv_add(struct fnv128 *f, const void *data, size_t len)
{
        const unsigned __int128 prime = ((unsigned __int128)0x1000000ull << 64) | 0x13bull;
        const uint8_t *p = data;

        for (size_t i = 0; i < len; i++) {
                f->h ^= p[i];
                f->h *= prime;
        }
}

static void fnv_u32(struct fnv128 *f, uint32_t v)
{
        uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};

        fnv_add(f, b, 4);
}

/* A string with its length, so that "ab"+"c" is not "a"+"bc". */
static void fnv_str(struct fnv128 *f, const char *s)
{
        size_t n = strlen(s);

        fnv_u32(f, (uint32_t)n);
        fnv_add(f, s, n);
}

void nbd_net_hash(const struct nbd_net_spec *s, char out[NBD_FW_HASH_HEX])
{
        struct fnv128 f = {((unsigned __int128)0x6c62272e07bb0142ull << 64) |
                           0x62b821756295c58dull};

        fnv_str(&f, "netbroker-net 1"); /* the encoding's version */
        fnv_str(&f, s->bridge);
        fnv_u32(&f, (uint32_t)s->mode);
        fnv_str(&f, s->forward_dev);
        fnv_u32(&f, (uint32_t)s->nat_port_min << 16 | s->nat_port_max);
        fnv_u32(&f, (uint32_t)s->n_subnets);
        for (size_t i = 0; i < s->n_subnets; i++) {
                fnv_u32(&f, (uint32_t)s->subnets[i].family << 8 | s->subnets[i].prefix);
                fnv_add(&f, s->subnets[i].addr, 16);
        }
        /* Only when set: the hashes of networks without it stay as they
         * were, and an ensure after an upgrade finds them unchanged. */
        if (s->nat_ipv6)
                fnv_str(&f, "nat_ipv6");
        if (s->ipv6_nogw)
                fnv_str(&f, "ipv6_nogw");
        fnv_u32(&f, (uint32_t)s->n_forwards);
        for (size_t i = 0; i < s->n_forwards; i++) {
                const struct nbd_net_forward *x = &s->forwards[i];
                fnv_u32(&f, (uint32_t)x->proto << 16 | (uint32_t)x->family << 8 | x->has_outside);
                fnv_u32(&f, (uint32_t)x->outside_port << 16 | x->guest_port);
                fnv_add(&f, x->outside, 16);
                fnv_add(&f, x->guest, 16);
        }
        snprintf(out, NBD_FW_HASH_HEX, "%016llx%016llx", (unsigned long long)(f.h >> 64),
                 (unsigned long long)f.h);
}
