// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall's model: parsing, checking and hashing; see fw_model.h. */
#include "fw_model.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mac.h"

/* ---- parsing and checking the model ---- */

bool nbd_fw_owner_valid(const char *o)
{
        size_t n = strlen(o);

        if (n == 0 || n > NBD_FW_OWNER_MAX)
                return false;
        for (; *o; o++)
                if (!isalnum((unsigned char)*o) && !strchr("_.:@-", *o))
                        return false;
        return true;
}

bool nbd_fw_group_valid(const char *g)
{
        size_t n = strlen(g);

        if (n == 0 || n > NBD_FW_GROUP_MAX)
                return false;
        for (; *g; g++)
                if (!isalnum((unsigned char)*g) && *g != '_' && *g != '-')
                        return false;
        return true;
}

int nbd_fw_parse_mac(const char *s, struct nbd_fw_mac *ret)
{
        const char *slash = strchr(s, '/');
        struct nbd_fw_mac m = {.set = true};

        if (nbp_mac_parse_n(s, slash ? (size_t)(slash - s) : strlen(s), m.addr) < 0)
                return -EINVAL;
        if (slash) {
                if (nbp_mac_parse_n(slash + 1, strlen(slash + 1), m.mask) < 0)
                        return -EINVAL;
        } else {
                memset(m.mask, 0xff, 6);
        }
        for (int i = 0; i < 6; i++)
                m.addr[i] &= m.mask[i];
        *ret = m;
        return 0;
}

static int parse_prefix(const char *s, struct nbd_fw_ip *ret)
{
        struct nbd_fw_ip ip = {.set = true};
        char buf[INET6_ADDRSTRLEN + 8];
        char *slash;
        int bits, max;

        if (strlen(s) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, s);
        slash = strchr(buf, '/');
        if (slash)
                *slash = '\0';
        if (inet_pton(AF_INET, buf, ip.addr) == 1)
                ip.family = 4;
        else if (inet_pton(AF_INET6, buf, ip.addr) == 1)
                ip.family = 6;
        else
                return -EINVAL;
        max = ip.family == 4 ? 32 : 128;
        bits = max;
        if (slash) {
                char *end;
                long v = strtol(slash + 1, &end, 10);
                if (!isdigit((unsigned char)slash[1]) || *end || v < 0 || v > max)
                        return -EINVAL;
                bits = (int)v;
        }
        for (int i = 0; i < max / 8; i++) {
                int take = bits - i * 8;
                ip.mask[i] = take >= 8 ? 0xff : take <= 0 ? 0 : (uint8_t)(0xff << (8 - take));
                ip.addr[i] &= ip.mask[i];
        }
        *ret = ip;
        return 0;
}

/* "A-B": two plain addresses of one family, A <= B; mask holds B. */
static int parse_range(const char *s, const char *dash, struct nbd_fw_ip *ret)
{
        char lo_s[INET6_ADDRSTRLEN + 8];
        struct nbd_fw_ip lo, hi;
        size_t n = (size_t)(dash - s);

        if (n >= sizeof(lo_s) || strchr(s, '/'))
                return -EINVAL;
        memcpy(lo_s, s, n);
        lo_s[n] = '\0';
        if (parse_prefix(lo_s, &lo) < 0 || parse_prefix(dash + 1, &hi) < 0 ||
            lo.family != hi.family || memcmp(lo.addr, hi.addr, lo.family == 4 ? 4 : 16) > 0)
                return -EINVAL;
        memcpy(lo.mask, hi.addr, sizeof(lo.mask));
        lo.is_range = true;
        *ret = lo;
        return 0;
}

int nbd_fw_parse_ip(const char *s, struct nbd_fw_ip *ret)
{
        const char *dash = strchr(s, '-');

        return dash ? parse_range(s, dash, ret) : parse_prefix(s, ret);
}

bool nbd_fw_rule_is_arp(const struct nbd_fw_rule *r)
{
        return r->arp_op.set || r->arp_sha.set || r->arp_tha.set || r->arp_spa.set ||
               r->arp_tpa.set || r->arp_htype.set || r->arp_ptype.set || r->arp_gratuitous.set;
}

bool nbd_fw_rule_is_ip(const struct nbd_fw_rule *r)
{
        return r->ip_src.set || r->ip_dst.set || r->l4proto.set || r->dscp.set || r->sport[0] ||
               r->dport[0] || r->has_icmp_type || r->tcp_flags_mask;
}

int nbd_fw_rule_family(const struct nbd_fw_rule *r)
{
        if (r->ip_src.set || r->ip_dst.set)
                return r->ip_src.set ? r->ip_src.family : r->ip_dst.family;
        if (r->ether_type.set && !r->ether_type.neg && r->ether_type.v == 0x0800)
                return 4;
        if (r->ether_type.set && !r->ether_type.neg && r->ether_type.v == 0x86dd)
                return 6;
        return r->dscp.set ? 4 : 0;
}

bool nbd_fw_ipv6_ext_hdr(unsigned p)
{
        return p == 0 || p == 43 || p == 44 || p == 51 || p == 59 || p == 60;
}

bool nbd_fw_arp_odd_hlen_alt(const struct nbd_fw_rule *r)
{
        return r->arp_gratuitous.set && r->arp_gratuitous.neg && !r->arp_sha.set &&
               !r->arp_tha.set && !r->arp_spa.set && !r->arp_tpa.set;
}

unsigned nbd_fw_rule_alts(const struct nbd_fw_rule *r)
{
        bool v6 = r->l4proto.set && nbd_fw_rule_family(r) == 6;

        bool l4 = r->sport[0] || r->dport[0] || r->has_icmp_type || r->tcp_flags_mask;

        /* Not gratuitous: the two IPs differ in their last byte, or are
         * equal there and differ in the third, ... (4); and, unless
         * another field needs 6-byte hardware addresses, an ARP whose are
         * not 6 bytes long (fw_compile.c). An ARP rule has no IP matches:
         * nothing else to multiply. */
        if (r->arp_gratuitous.set && r->arp_gratuitous.neg)
                return nbd_fw_arp_odd_hlen_alt(r) ? 5 : 4;
        /* IPv4 ports, ICMP and TCP flags: a 20-byte header, read behind
         * it, or another, read where the kernel puts the transport header. */
        if (l4 && nbd_fw_rule_family(r) == 4)
                return 2;
        if (!v6 || (r->l4proto.v == 44 && !r->l4proto.neg))
                return 1;
        /* A next header that ebt_ip6 skips is never the protocol: no
         * "next header P" alternative for it. */
        if (!r->l4proto.neg && nbd_fw_ipv6_ext_hdr(r->l4proto.v))
                return 2;
        return r->l4proto.v != 44 ? 3 : 2;
}

static bool group_has_dir(const struct nbd_fw_group *g, enum nbd_fw_dir d)
{
        for (size_t i = 0; i < g->n_rules; i++)
                if (g->rules[i].dir == d)
                        return true;
        return false;
}

size_t nbd_fw_installed_rules(const struct nbd_fw_group *groups, size_t n_groups)
{
        size_t n = 0;

        for (size_t g = 0; g < n_groups; g++) {
                const struct nbd_fw_group *grp = &groups[g];
                for (size_t i = 0; i < grp->n_rules; i++)
                        n += nbd_fw_rule_alts(&grp->rules[i]);
                if (grp->root)
                        continue;
                /* A jump (behind its guard) per direction it has rules in. */
                for (int d = NBD_FW_DIR_FROM; d <= NBD_FW_DIR_TO; d++)
                        if (group_has_dir(grp, (enum nbd_fw_dir)d))
                                n += grp->has_guard ? nbd_fw_rule_alts(&grp->guard) : 1;
        }
        return n;
}

static int check_ranges(const struct nbd_fw_rule *r, struct nbd_err *e)
{
        if (r->ether_type.set && r->ether_type.v > 0xffff)
                return nbd_err_set(e, -EINVAL, "ether type 0x%x is over 0xffff", r->ether_type.v);
        if (r->vlan_id.set && r->vlan_id.v > 4095)
                return nbd_err_set(e, -EINVAL, "VLAN id %u is over 4095", r->vlan_id.v);
        if (r->vlan_encap.set && r->vlan_encap.v > 0xffff)
                return nbd_err_set(e, -EINVAL, "VLAN encapsulated type 0x%x is over 0xffff",
                                   r->vlan_encap.v);
        if (r->arp_op.set && (r->arp_op.v == 0 || r->arp_op.v > 0xffff))
                return nbd_err_set(e, -EINVAL, "ARP operation %u is out of range", r->arp_op.v);
        if (r->arp_htype.set && r->arp_htype.v > 0xffff)
                return nbd_err_set(e, -EINVAL, "ARP hardware type %u is over 65535",
                                   r->arp_htype.v);
        if (r->arp_ptype.set && r->arp_ptype.v > 0xffff)
                return nbd_err_set(e, -EINVAL, "ARP protocol type 0x%x is over 0xffff",
                                   r->arp_ptype.v);
        if (r->l4proto.set && r->l4proto.v > 255)
                return nbd_err_set(e, -EINVAL, "protocol %u is over 255", r->l4proto.v);
        if (r->dscp.set && r->dscp.v > 63)
                return nbd_err_set(e, -EINVAL, "DSCP %u is over 63", r->dscp.v);
        if (r->priority < -1000 || r->priority > 1000)
                return nbd_err_set(e, -EINVAL, "priority %d is outside -1000..1000", r->priority);
        if ((r->sport[0] && r->sport[1] < r->sport[0]) ||
            (r->dport[0] && r->dport[1] < r->dport[0]))
                return nbd_err_set(e, -EINVAL, "a port range is reversed");
        return 0;
}

/* The outer ether type a rule's other matches need (0: none), and which. */
static uint32_t implied_type(const struct nbd_fw_rule *r, const char **what)
{
        bool rarp = r->ether_type.set && !r->ether_type.neg && r->ether_type.v == 0x8035;
        int family = nbd_fw_rule_family(r);

        if (nbd_fw_rule_is_arp(r)) {
                *what = "ARP";
                return rarp ? 0x8035 : 0x0806;
        }
        if (r->vlan_id.set || r->vlan_encap.set) {
                *what = "VLAN";
                return 0x8100;
        }
        *what = "IP";
        return family == 4 ? 0x0800 : family == 6 ? 0x86dd : 0;
}

static int check_layers(const struct nbd_fw_rule *r, struct nbd_err *e)
{
        bool arp = nbd_fw_rule_is_arp(r), ip = nbd_fw_rule_is_ip(r);
        bool vlan = r->vlan_id.set || r->vlan_encap.set;
        const char *what = "";
        uint32_t want = implied_type(r, &what);

        if (r->ip_src.set && r->ip_dst.set && r->ip_src.family != r->ip_dst.family)
                return nbd_err_set(e, -EINVAL,
                                   "source and destination are of different IP families");
        if (arp && ip)
                return nbd_err_set(e, -EINVAL,
                                   "ARP and IP matches in one rule can never both hold");
        if (vlan && (arp || ip))
                return nbd_err_set(e, -EINVAL,
                                   "a tagged frame's ether type is 0x8100: VLAN and %s matches "
                                   "in one rule can never both hold",
                                   arp ? "ARP" : "IP");
        if ((r->arp_spa.set && r->arp_spa.family != 4) ||
            (r->arp_tpa.set && r->arp_tpa.family != 4))
                return nbd_err_set(e, -EINVAL, "ARP addresses are IPv4");
        if (r->ether_type.set && want && !r->ether_type.neg && r->ether_type.v != want &&
            !(arp && r->ether_type.v == 0x8035))
                return nbd_err_set(e, -EINVAL,
                                   "ether type 0x%04x contradicts the rule's %s matches "
                                   "(they need 0x%04x%s)",
                                   r->ether_type.v, what, want, arp ? " or 0x8035" : "");
        if (r->ether_type.set && want && r->ether_type.neg && r->ether_type.v == want)
                return nbd_err_set(e, -EINVAL,
                                   "ether type not 0x%04x contradicts the rule's %s matches", want,
                                   what);
        if (ip && !want && r->ether_type.set && !r->ether_type.neg)
                return nbd_err_set(e, -EINVAL,
                                   "ether type 0x%04x contradicts the rule's IP matches (they "
                                   "need 0x0800 or 0x86dd)",
                                   r->ether_type.v);
        if (r->dscp.set && nbd_fw_rule_family(r) == 6)
                return nbd_err_set(e, -EINVAL, "DSCP is matched for IPv4 only");
        return 0;
}

static bool port_proto(uint32_t p)
{
        return p == IPPROTO_TCP || p == IPPROTO_UDP || p == IPPROTO_SCTP || p == IPPROTO_UDPLITE;
}

static int check_l4(const struct nbd_fw_rule *r, struct nbd_err *e)
{
        bool proto = r->l4proto.set && !r->l4proto.neg;
        int family = nbd_fw_rule_family(r);

        if ((r->sport[0] || r->dport[0]) && !(proto && port_proto(r->l4proto.v)))
                return nbd_err_set(
                        e, -EINVAL,
                        "ports need the protocol tcp, udp, sctp or udplite (not negated)");
        if (r->has_icmp_type &&
            !(proto && (r->l4proto.v == IPPROTO_ICMP || r->l4proto.v == IPPROTO_ICMPV6)))
                return nbd_err_set(e, -EINVAL,
                                   "an ICMP type needs the protocol icmp (1) or icmpv6 (58), not "
                                   "negated");
        if ((r->has_icmp_code || r->icmp_neg) && !r->has_icmp_type)
                return nbd_err_set(e, -EINVAL, "an ICMP code or its negation needs an ICMP type");
        if (r->has_icmp_type && r->l4proto.v == IPPROTO_ICMP && family == 6)
                return nbd_err_set(e, -EINVAL, "icmp (1) with IPv6 addresses: use icmpv6 (58)");
        if ((r->tcp_flags_mask || r->tcp_flags_neg) && !(proto && r->l4proto.v == IPPROTO_TCP))
                return nbd_err_set(e, -EINVAL, "TCP flags need the protocol tcp (6), not negated");
        if (r->tcp_flags & ~r->tcp_flags_mask)
                return nbd_err_set(e, -EINVAL,
                                   "TCP flags 0x%02x are outside their mask 0x%02x: they can "
                                   "never match",
                                   r->tcp_flags, r->tcp_flags_mask);
        if (proto && family == 6 && r->l4proto.v == 59)
                return nbd_err_set(e, -EINVAL,
                                   "IPv6 protocol 59 (no next header) never matches, as in "
                                   "ebtables' ip6 match");
        return 0;
}

int nbd_fw_rule_check(const struct nbd_fw_rule *r, bool reversed, struct nbd_err *e)
{
        int ret;

        if ((ret = check_ranges(r, e)) || (ret = check_layers(r, e)) || (ret = check_l4(r, e)))
                return ret;
        /* The kernel rejects only at an ingress hook. */
        if (r->verdict == NBD_FW_V_REJECT && (r->dir == NBD_FW_DIR_FROM) == reversed) {
                return nbd_err_set(
                        e, -EINVAL,
                        "reject works only on traffic entering the interface: from the guest on a "
                        "tap, to the guest on a macvtap");
        }
        return 0;
}

/* 128-bit FNV-1a. The hash tells "these are the rules we installed" from
 * "something else is there"; it is not a security boundary (only allowed
 * peers reach the helper, and the kernel's rules are the truth), so a
 * non-cryptographic hash over the compiled bytes is enough. */
struct fnv128 {
        unsigned __int128 h;
};

static void fnv_init(struct fnv128 *f)
{
        f->h = ((unsigned __int128)0x6c62272e07bb0142ULL << 64) | 0x62b821756295c58dULL;
}

static void fnv_add(struct fnv128 *f, const void *data, size_t len)
{
        const unsigned __int128 prime = ((unsigned __int128)1 << 88) | 0x13b;
        const uint8_t *p = data;

        for (size_t i = 0; i < len; i++) {
                f->h ^= p[i];
                f->h *= prime;
        }
}

static void fnv_hex(const struct fnv128 *f, char out[NBD_FW_HASH_HEX])
{
        snprintf(out, NBD_FW_HASH_HEX, "%016llx%016llx", (unsigned long long)(f->h >> 64),
                 (unsigned long long)f->h);
}

/* The canonical encoding the hash is taken over: every field of every
 * rule, and which hook is which. Bump the tag below whenever the compiler
 * changes what it makes of the same rules, so installs of the old compiler
 * are not taken as unchanged. Every field of every
 * rule, in a fixed order, as parsed (addresses already masked, so
 * "10.0.0.5" and "10.0.0.5/32" are the same rule), with the groups' names
 * and the interface. Hashing the model, not the compiled bytes, lets ensure
 * skip compiling altogether when nothing changed. */
static void hash_u32(struct fnv128 *f, uint32_t v)
{
        uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};

        fnv_add(f, b, 4);
}

static void hash_mac(struct fnv128 *f, const struct nbd_fw_mac *m)
{
        hash_u32(f, (uint32_t)m->set << 1 | m->neg);
        if (m->set) {
                fnv_add(f, m->addr, 6);
                fnv_add(f, m->mask, 6);
        }
}

static void hash_ip(struct fnv128 *f, const struct nbd_fw_ip *ip)
{
        hash_u32(f, (uint32_t)ip->is_range << 2 | (uint32_t)ip->set << 1 | ip->neg);
        if (ip->set) {
                hash_u32(f, (uint32_t)ip->family);
                fnv_add(f, ip->addr, 16);
                fnv_add(f, ip->mask, 16);
        }
}

static void hash_num(struct fnv128 *f, const struct nbd_fw_num *n)
{
        hash_u32(f, (uint32_t)n->set << 1 | n->neg);
        hash_u32(f, n->set ? n->v : 0);
}

static void hash_rule(struct fnv128 *f, const struct nbd_fw_rule *r)
{
        hash_u32(f, (uint32_t)r->dir);
        hash_u32(f, (uint32_t)r->verdict);
        hash_u32(f, (uint32_t)(int32_t)r->priority);
        hash_mac(f, &r->ether_src);
        hash_mac(f, &r->ether_dst);
        hash_mac(f, &r->arp_sha);
        hash_mac(f, &r->arp_tha);
        hash_num(f, &r->ether_type);
        hash_num(f, &r->vlan_id);
        hash_num(f, &r->vlan_encap);
        hash_num(f, &r->arp_op);
        hash_num(f, &r->arp_htype);
        hash_num(f, &r->arp_ptype);
        hash_num(f, &r->arp_gratuitous);
        hash_ip(f, &r->arp_spa);
        hash_ip(f, &r->arp_tpa);
        hash_ip(f, &r->ip_src);
        hash_ip(f, &r->ip_dst);
        hash_num(f, &r->l4proto);
        hash_num(f, &r->dscp);
        hash_u32(f, (uint32_t)r->sport[0] << 16 | (r->sport[0] ? r->sport[1] : 0));
        hash_u32(f, (uint32_t)r->dport[0] << 16 | (r->dport[0] ? r->dport[1] : 0));
        hash_u32(f, (uint32_t)r->sport_neg << 1 | r->dport_neg);
        hash_u32(f, (uint32_t)r->has_icmp_type << 8 | (r->has_icmp_type ? r->icmp_type : 0));
        hash_u32(f, (uint32_t)r->has_icmp_code << 8 | (r->has_icmp_code ? r->icmp_code : 0));
        hash_u32(f, r->icmp_neg);
        hash_u32(f, (uint32_t)r->tcp_flags_neg << 16 | (uint32_t)r->tcp_flags_mask << 8 |
                            r->tcp_flags);
        /* The comment is kept with the rule (its text): a new one is a change. */
        fnv_add(f, r->comment, strnlen(r->comment, sizeof(r->comment)) + 1);
}

static void hash_group(struct fnv128 *f, const struct nbd_fw_group *g)
{
        fnv_add(f, g->name, strlen(g->name) + 1);
        hash_u32(f, (uint32_t)(int32_t)g->priority);
        hash_u32(f, (uint32_t)g->root << 1 | g->has_guard);
        if (g->has_guard)
                hash_rule(f, &g->guard);
        hash_u32(f, (uint32_t)g->n_rules);
        for (size_t i = 0; i < g->n_rules; i++)
                hash_rule(f, &g->rules[i]);
}

void nbd_fw_model_hash(const struct nbd_fw_owner_spec *s, char out[NBD_FW_HASH_HEX],
                       unsigned *ret_rules)
{
        struct fnv128 f;
        unsigned rules = 0;

        fnv_init(&f);
        fnv_add(&f, "netbroker-fw-4", 15);
        fnv_add(&f, s->ifname, strlen(s->ifname) + 1);
        hash_u32(&f, s->reversed);
        for (size_t g = 0; g < s->n_groups; g++) {
                hash_group(&f, &s->groups[g]);
                for (size_t i = 0; i < s->groups[g].n_rules; i++)
                        rules += nbd_fw_rule_alts(&s->groups[g].rules[i]);
        }
        fnv_hex(&f, out);
        *ret_rules = rules;
}
