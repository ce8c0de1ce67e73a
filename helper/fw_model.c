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

int nbd_fw_parse_ip(const char *s, struct nbd_fw_ip *ret)
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

static bool port_proto(uint8_t p)
{
        return p == IPPROTO_TCP || p == IPPROTO_UDP || p == IPPROTO_SCTP || p == IPPROTO_UDPLITE;
}

int nbd_fw_rule_check(const struct nbd_fw_rule *r, bool reversed, struct nbd_err *e)
{
        bool arp = r->arp_op.set || r->arp_sha.set || r->arp_spa.set || r->arp_tpa.set;
        bool ip = r->ip_src.set || r->ip_dst.set;
        int family = r->ip_src.set ? r->ip_src.family : r->ip_dst.family;

        if (r->ip_src.set && r->ip_dst.set && r->ip_src.family != r->ip_dst.family) {
                return nbd_err_set(e, -EINVAL,
                                   "source and destination are of different IP families");
        }
        if (arp && (ip || r->l4proto.set)) {
                return nbd_err_set(e, -EINVAL,
                                   "ARP and IP matches in one rule can never both hold");
        }
        if ((r->arp_spa.set && r->arp_spa.family != 4) ||
            (r->arp_tpa.set && r->arp_tpa.family != 4)) {
                return nbd_err_set(e, -EINVAL, "ARP addresses are IPv4");
        }
        if (r->ether_type.set && !r->ether_type.neg && (arp || ip)) {
                uint32_t want = arp ? 0x0806 : family == 4 ? 0x0800 : 0x86dd;
                if (r->ether_type.v != want) {
                        return nbd_err_set(e, -EINVAL,
                                           "ether type 0x%04x contradicts the rule's %s matches",
                                           r->ether_type.v, arp ? "ARP" : "IP");
                }
        }
        if (r->ether_type.set && r->ether_type.v > 0xffff) {
                return nbd_err_set(e, -EINVAL, "ether type 0x%x is over 0xffff", r->ether_type.v);
        }
        if (r->vlan_id.set && r->vlan_id.v > 4095) {
                return nbd_err_set(e, -EINVAL, "VLAN id %u is over 4095", r->vlan_id.v);
        }
        if (r->arp_op.set && (r->arp_op.v == 0 || r->arp_op.v > 0xffff)) {
                return nbd_err_set(e, -EINVAL, "ARP operation %u is out of range", r->arp_op.v);
        }
        if ((r->sport[0] || r->dport[0]) && !port_proto((uint8_t)r->l4proto.v)) {
                return nbd_err_set(e, -EINVAL, "ports need the protocol tcp, udp, sctp or udplite");
        }
        if ((r->sport[0] && r->sport[1] < r->sport[0]) ||
            (r->dport[0] && r->dport[1] < r->dport[0])) {
                return nbd_err_set(e, -EINVAL, "a port range is reversed");
        }
        if (r->has_icmp_type && r->l4proto.v != IPPROTO_ICMP && r->l4proto.v != IPPROTO_ICMPV6) {
                return nbd_err_set(e, -EINVAL,
                                   "an ICMP type needs the protocol icmp (1) or icmpv6 (58)");
        }
        if (r->has_icmp_type && r->l4proto.v == IPPROTO_ICMP && ip && family == 6) {
                return nbd_err_set(e, -EINVAL, "icmp (1) with IPv6 addresses: use icmpv6 (58)");
        }
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
        hash_u32(f, (uint32_t)ip->set << 1 | ip->neg);
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
        hash_mac(f, &r->ether_src);
        hash_mac(f, &r->ether_dst);
        hash_mac(f, &r->arp_sha);
        hash_num(f, &r->ether_type);
        hash_num(f, &r->vlan_id);
        hash_num(f, &r->arp_op);
        hash_ip(f, &r->arp_spa);
        hash_ip(f, &r->arp_tpa);
        hash_ip(f, &r->ip_src);
        hash_ip(f, &r->ip_dst);
        hash_num(f, &r->l4proto);
        hash_u32(f, (uint32_t)r->sport[0] << 16 | (r->sport[0] ? r->sport[1] : 0));
        hash_u32(f, (uint32_t)r->dport[0] << 16 | (r->dport[0] ? r->dport[1] : 0));
        hash_u32(f, (uint32_t)r->has_icmp_type << 8 | (r->has_icmp_type ? r->icmp_type : 0));
}

void nbd_fw_model_hash(const struct nbd_fw_owner_spec *s, char out[NBD_FW_HASH_HEX],
                       unsigned *ret_rules)
{
        struct fnv128 f;
        unsigned rules = 0;

        fnv_init(&f);
        fnv_add(&f, "netbroker-fw-2", 15);
        fnv_add(&f, s->ifname, strlen(s->ifname) + 1);
        hash_u32(&f, s->reversed);
        for (size_t g = 0; g < s->n_groups; g++) {
                fnv_add(&f, s->groups[g].name, strlen(s->groups[g].name) + 1);
                hash_u32(&f, (uint32_t)s->groups[g].n_rules);
                for (size_t i = 0; i < s->groups[g].n_rules; i++)
                        hash_rule(&f, &s->groups[g].rules[i]);
                rules += (unsigned)s->groups[g].n_rules;
        }
        fnv_hex(&f, out);
        *ret_rules = rules;
}
