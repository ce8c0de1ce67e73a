/* The firewall over nftables; see firewall.h for the layout. */
#include "firewall.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mac.h"
#include "netlink.h"
#include "stats.h"

NBD_LOG_CATEGORY(firewall);

/* nft's own udata type for a chain's comment: `nft list` shows ours. */
#define UDATA_CHAIN_COMMENT 0

struct nbd_fw {
        struct mnl_socket *nl; /* requests and dumps */
        struct mnl_socket *mon; /* NFNLGRP_NFTABLES: our table being deleted */
        struct nbd_loop *loop;
        struct nbd_watch monw;
        uint32_t seq;
};

static void errf(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void errf(char *err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(err, NBD_FW_ERRLEN, fmt, ap);
        va_end(ap);
}

/* The sentence for -errno r; "out of memory" as everywhere else here. */
static const char *why(int r)
{
        return r == -ENOMEM ? "out of memory" : strerror(-r);
}

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

        if (nbd_mac_parse_n(s, slash ? (size_t)(slash - s) : strlen(s), m.addr) < 0)
                return -EINVAL;
        if (slash) {
                if (nbd_mac_parse_n(slash + 1, strlen(slash + 1), m.mask) < 0)
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

int nbd_fw_rule_check(const struct nbd_fw_rule *r, bool reversed, char *err)
{
        bool arp = r->arp_op.set || r->arp_sha.set || r->arp_spa.set || r->arp_tpa.set;
        bool ip = r->ip_src.set || r->ip_dst.set;
        int family = r->ip_src.set ? r->ip_src.family : r->ip_dst.family;

        if (r->ip_src.set && r->ip_dst.set && r->ip_src.family != r->ip_dst.family) {
                errf(err, "source and destination are of different IP families");
                return -EINVAL;
        }
        if (arp && (ip || r->l4proto)) {
                errf(err, "ARP and IP matches in one rule can never both hold");
                return -EINVAL;
        }
        if ((r->arp_spa.set && r->arp_spa.family != 4) ||
            (r->arp_tpa.set && r->arp_tpa.family != 4)) {
                errf(err, "ARP addresses are IPv4");
                return -EINVAL;
        }
        if (r->ether_type.set && !r->ether_type.neg && (arp || ip)) {
                uint32_t want = arp ? 0x0806 : family == 4 ? 0x0800 : 0x86dd;
                if (r->ether_type.v != want) {
                        errf(err, "ether type 0x%04x contradicts the rule's %s matches",
                             r->ether_type.v, arp ? "ARP" : "IP");
                        return -EINVAL;
                }
        }
        if (r->ether_type.set && r->ether_type.v > 0xffff) {
                errf(err, "ether type 0x%x is over 0xffff", r->ether_type.v);
                return -EINVAL;
        }
        if (r->vlan_id.set && r->vlan_id.v > 4095) {
                errf(err, "VLAN id %u is over 4095", r->vlan_id.v);
                return -EINVAL;
        }
        if (r->arp_op.set && (r->arp_op.v == 0 || r->arp_op.v > 0xffff)) {
                errf(err, "ARP operation %u is out of range", r->arp_op.v);
                return -EINVAL;
        }
        if ((r->sport[0] || r->dport[0]) && !port_proto(r->l4proto)) {
                errf(err, "ports need the protocol tcp, udp, sctp or udplite");
                return -EINVAL;
        }
        if ((r->sport[0] && r->sport[1] < r->sport[0]) ||
            (r->dport[0] && r->dport[1] < r->dport[0])) {
                errf(err, "a port range is reversed");
                return -EINVAL;
        }
        if (r->has_icmp_type && r->l4proto != IPPROTO_ICMP && r->l4proto != IPPROTO_ICMPV6) {
                errf(err, "an ICMP type needs the protocol icmp (1) or icmpv6 (58)");
                return -EINVAL;
        }
        if (r->has_icmp_type && r->l4proto == IPPROTO_ICMP && ip && family == 6) {
                errf(err, "icmp (1) with IPv6 addresses: use icmpv6 (58)");
                return -EINVAL;
        }
        /* The kernel rejects only at an ingress hook. */
        if (r->verdict == NBD_FW_V_REJECT && (r->dir == NBD_FW_DIR_FROM) == reversed) {
                errf(err,
                     "reject works only on traffic entering the interface: from the guest on a "
                     "tap, to the guest on a macvtap");
                return -EINVAL;
        }
        return 0;
}

/* ---- compiling to nftnl expressions ---- */

static int add_expr(struct nftnl_rule *r, struct nftnl_expr *e)
{
        if (!e)
                return -ENOMEM;
        nftnl_rule_add_expr(r, e);
        return 0;
}

static int load_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len)
{
        struct nftnl_expr *e = nftnl_expr_alloc("payload");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
        return add_expr(r, e);
}

static int load_meta(struct nftnl_rule *r, uint32_t key)
{
        struct nftnl_expr *e = nftnl_expr_alloc("meta");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
        return add_expr(r, e);
}

static int mask_reg(struct nftnl_rule *r, const uint8_t *mask, uint32_t len)
{
        struct nftnl_expr *e = nftnl_expr_alloc("bitwise");
        uint8_t zero[16] = {0};

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
        nftnl_expr_set_data(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
        nftnl_expr_set_data(e, NFTNL_EXPR_BITWISE_XOR, zero, len);
        return add_expr(r, e);
}

static int cmp_reg(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
        struct nftnl_expr *e = nftnl_expr_alloc("cmp");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        nftnl_expr_set_data(e, NFTNL_EXPR_CMP_DATA, data, len);
        return add_expr(r, e);
}

static bool all_ones(const uint8_t *m, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (m[i] != 0xff)
                        return false;
        return true;
}

/* Load bytes, mask them unless the mask is all ones, compare. */
static int match_bytes(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len,
                       const uint8_t *val, const uint8_t *mask, bool neg)
{
        int ret = load_payload(r, base, off, len);

        if (ret == 0 && mask && !all_ones(mask, len))
                ret = mask_reg(r, mask, len);
        if (ret == 0)
                ret = cmp_reg(r, neg ? NFT_CMP_NEQ : NFT_CMP_EQ, val, len);
        return ret;
}

static int match_proto(struct nftnl_rule *r, uint16_t ethertype, bool neg)
{
        uint16_t be = htons(ethertype);
        int ret = load_meta(r, NFT_META_PROTOCOL);

        return ret ? ret : cmp_reg(r, neg ? NFT_CMP_NEQ : NFT_CMP_EQ, &be, 2);
}

static int match_port(struct nftnl_rule *r, uint32_t off, const uint16_t range[2])
{
        uint16_t lo = htons(range[0]), hi = htons(range[1] ? range[1] : range[0]);
        int ret = load_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, off, 2);

        /* Big-endian bytes compare in numeric order. */
        if (ret == 0 && lo == hi)
                return cmp_reg(r, NFT_CMP_EQ, &lo, 2);
        if (ret == 0)
                ret = cmp_reg(r, NFT_CMP_GTE, &lo, 2);
        return ret ? ret : cmp_reg(r, NFT_CMP_LTE, &hi, 2);
}

static int add_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
        struct nftnl_expr *e = nftnl_expr_alloc("immediate");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
        /* A jump whose chain was not copied would go to no chain. */
        if (chain && nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain) < 0) {
                nftnl_expr_free(e);
                return -ENOMEM;
        }
        return add_expr(r, e);
}

static int add_reject(struct nftnl_rule *r)
{
        struct nftnl_expr *e = nftnl_expr_alloc("reject");

        if (!e)
                return -ENOMEM;
        /* ICMP or ICMPv6 unreachable as the packet's family needs; the
         * netdev reject drops what is not IP. */
        nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
        nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, NFT_REJECT_ICMPX_PORT_UNREACH);
        return add_expr(r, e);
}

static int compile_matches(struct nftnl_rule *nr, const struct nbd_fw_rule *r)
{
        bool arp = r->arp_op.set || r->arp_sha.set || r->arp_spa.set || r->arp_tpa.set;
        const struct nbd_fw_ip *any_ip = r->ip_src.set   ? &r->ip_src
                                         : r->ip_dst.set ? &r->ip_dst
                                                         : NULL;
        uint32_t nh = NFT_PAYLOAD_NETWORK_HEADER;
        int ret = 0;

        /* Protocol first: the later loads of the network header depend on it. */
        if (r->ether_type.set)
                ret = match_proto(nr, (uint16_t)r->ether_type.v, r->ether_type.neg);
        if (ret == 0 && arp && !(r->ether_type.set && !r->ether_type.neg))
                ret = match_proto(nr, 0x0806, false);
        if (ret == 0 && any_ip && !(r->ether_type.set && !r->ether_type.neg))
                ret = match_proto(nr, any_ip->family == 4 ? 0x0800 : 0x86dd, false);
        if (ret == 0 && r->ether_src.set)
                ret = match_bytes(nr, NFT_PAYLOAD_LL_HEADER, 6, 6, r->ether_src.addr,
                                  r->ether_src.mask, r->ether_src.neg);
        if (ret == 0 && r->ether_dst.set)
                ret = match_bytes(nr, NFT_PAYLOAD_LL_HEADER, 0, 6, r->ether_dst.addr,
                                  r->ether_dst.mask, r->ether_dst.neg);
        if (ret == 0 && r->vlan_id.set) {
                /* The tag as it is on the wire; the kernel puts an offloaded
                 * tag back for LL-header loads. */
                uint16_t tpid = htons(0x8100), vid = htons((uint16_t)r->vlan_id.v);
                const uint8_t vmask[2] = {0x0f, 0xff};
                ret = match_bytes(nr, NFT_PAYLOAD_LL_HEADER, 12, 2, (uint8_t *)&tpid, NULL, false);
                if (ret == 0)
                        ret = match_bytes(nr, NFT_PAYLOAD_LL_HEADER, 14, 2, (uint8_t *)&vid, vmask,
                                          r->vlan_id.neg);
        }
        if (ret == 0 && r->arp_op.set) {
                uint16_t op = htons((uint16_t)r->arp_op.v);
                ret = match_bytes(nr, nh, 6, 2, (uint8_t *)&op, NULL, r->arp_op.neg);
        }
        if (ret == 0 && r->arp_sha.set)
                ret = match_bytes(nr, nh, 8, 6, r->arp_sha.addr, r->arp_sha.mask, r->arp_sha.neg);
        if (ret == 0 && r->arp_spa.set)
                ret = match_bytes(nr, nh, 14, 4, r->arp_spa.addr, r->arp_spa.mask, r->arp_spa.neg);
        if (ret == 0 && r->arp_tpa.set)
                ret = match_bytes(nr, nh, 24, 4, r->arp_tpa.addr, r->arp_tpa.mask, r->arp_tpa.neg);
        if (ret == 0 && r->ip_src.set)
                ret = r->ip_src.family == 4 ? match_bytes(nr, nh, 12, 4, r->ip_src.addr,
                                                          r->ip_src.mask, r->ip_src.neg)
                                            : match_bytes(nr, nh, 8, 16, r->ip_src.addr,
                                                          r->ip_src.mask, r->ip_src.neg);
        if (ret == 0 && r->ip_dst.set)
                ret = r->ip_dst.family == 4 ? match_bytes(nr, nh, 16, 4, r->ip_dst.addr,
                                                          r->ip_dst.mask, r->ip_dst.neg)
                                            : match_bytes(nr, nh, 24, 16, r->ip_dst.addr,
                                                          r->ip_dst.mask, r->ip_dst.neg);
        if (ret == 0 && r->l4proto) {
                ret = load_meta(nr, NFT_META_L4PROTO);
                if (ret == 0)
                        ret = cmp_reg(nr, NFT_CMP_EQ, &r->l4proto, 1);
        }
        if (ret == 0 && r->sport[0])
                ret = match_port(nr, 0, r->sport);
        if (ret == 0 && r->dport[0])
                ret = match_port(nr, 2, r->dport);
        if (ret == 0 && r->has_icmp_type)
                ret = match_bytes(nr, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, &r->icmp_type, NULL,
                                  false);
        return ret;
}

/* NULL when out of memory. The names are copies (libnftnl strdup()s
 * them): a failed copy must not leave a rule without its table. */
static struct nftnl_rule *new_rule(const char *chain)
{
        struct nftnl_rule *r = nftnl_rule_alloc();

        if (!r)
                return NULL;
        if (nftnl_rule_set_str(r, NFTNL_RULE_TABLE, NBD_FW_TABLE) < 0 ||
            nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain) < 0) {
                nftnl_rule_free(r);
                return NULL;
        }
        nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_NETDEV);
        return r;
}

static struct nftnl_rule *compile_rule(const char *chain, const struct nbd_fw_rule *r)
{
        static const int verdicts[] = {[NBD_FW_V_ACCEPT] = NF_ACCEPT,
                                       [NBD_FW_V_DROP] = NF_DROP,
                                       [NBD_FW_V_RETURN] = NFT_RETURN};
        struct nftnl_rule *nr = new_rule(chain);
        int ret;

        if (!nr)
                return NULL;
        ret = compile_matches(nr, r);
        if (ret == 0)
                ret = r->verdict == NBD_FW_V_REJECT ? add_reject(nr)
                                                    : add_verdict(nr, verdicts[r->verdict], NULL);
        if (ret < 0) {
                nftnl_rule_free(nr);
                return NULL;
        }
        return nr;
}

/* ---- an owner's chains and rules, in the order they are sent ---- */

enum item_kind { ITEM_CHAIN, ITEM_RULE, ITEM_DELCHAIN };

struct item {
        enum item_kind kind;
        struct nftnl_chain *chain; /* ITEM_CHAIN, ITEM_DELCHAIN */
        struct nftnl_rule *rule;
        size_t owner; /* index of the owner op, for error messages */
};

struct items {
        struct item *v;
        size_t n, cap;
};

static int items_push(struct items *it, struct item x)
{
        if (it->n == it->cap) {
                size_t ncap = it->cap ? it->cap * 2 : 64;
                struct item *p = realloc(it->v, ncap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                it->v = p;
                it->cap = ncap;
        }
        it->v[it->n++] = x;
        return 0;
}

static void items_clear(struct items *it, size_t from)
{
        for (size_t i = from; i < it->n; i++) {
                if (it->v[i].chain)
                        nftnl_chain_free(it->v[i].chain);
                if (it->v[i].rule)
                        nftnl_rule_free(it->v[i].rule);
        }
        it->n = from;
}

/* NULL when out of memory, as new_rule(). */
static struct nftnl_chain *new_chain(const char *name)
{
        struct nftnl_chain *c = nftnl_chain_alloc();

        if (!c)
                return NULL;
        if (nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NBD_FW_TABLE) < 0 ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name) < 0) {
                nftnl_chain_free(c);
                return NULL;
        }
        nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_NETDEV);
        return c;
}

static int set_comment(struct nftnl_chain *c, const char *text)
{
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        int r = 0;

        if (!u)
                return -ENOMEM;
        if (!nftnl_udata_put_strz(u, UDATA_CHAIN_COMMENT, text))
                r = -E2BIG;
        /* The comment carries the hash ensure compares: a chain without it
         * would be rebuilt by every ensure. */
        else if (nftnl_chain_set_data(c, NFTNL_CHAIN_USERDATA, nftnl_udata_buf_data(u),
                                      nftnl_udata_buf_len(u)) < 0)
                r = -ENOMEM;
        nftnl_udata_buf_free(u);
        return r;
}

static struct nftnl_chain *new_base_chain(const char *name, const char *ifname, bool ingress,
                                          const char *comment)
{
        struct nftnl_chain *c = new_chain(name);

        if (!c)
                return NULL;
        nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, ingress ? NF_NETDEV_INGRESS : NF_NETDEV_EGRESS);
        nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, 0);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
        /* Without its type and device the kernel would take it for a
         * regular chain, hooked nowhere: the guest unfiltered. */
        if (nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter") < 0 ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_DEV, ifname) < 0 || set_comment(c, comment) < 0) {
                nftnl_chain_free(c);
                return NULL;
        }
        return c;
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
        hash_u32(f, r->l4proto);
        hash_u32(f, (uint32_t)r->sport[0] << 16 | (r->sport[0] ? r->sport[1] : 0));
        hash_u32(f, (uint32_t)r->dport[0] << 16 | (r->dport[0] ? r->dport[1] : 0));
        hash_u32(f, (uint32_t)r->has_icmp_type << 8 | (r->has_icmp_type ? r->icmp_type : 0));
}

static void hash_owner(const struct nbd_fw_owner_spec *s, char out[NBD_FW_HASH_HEX],
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

static const char *const dir_names[] = {"from", "to"};

/* Push a chain just made; it is freed if it was not made whole or cannot
 * be pushed. */
static int push_chain(struct items *it, struct nftnl_chain *c, size_t owner_idx)
{
        if (c && items_push(it, (struct item){ITEM_CHAIN, c, NULL, owner_idx}) == 0)
                return 0;
        if (c)
                nftnl_chain_free(c);
        return -ENOMEM;
}

/* Compile one owner into items (group chains and their rules first, then
 * the base chains and their jumps) and its hash. The base chains' comment
 * carries the hash, so it is built last. */
static int compile_owner(const struct nbd_fw_owner_spec *s, size_t owner_idx, struct items *it,
                         const char *hash, unsigned rules, char *err)
{
        size_t start = it->n;
        char name[256], comment[128];
        struct nftnl_rule *jumps[2][64];
        size_t n_jumps[2] = {0, 0};
        int ret = -ENOMEM;

        if (s->n_groups > 64) {
                errf(err, "owner %s: %zu groups; at most 64", s->owner, s->n_groups);
                return -E2BIG;
        }
        for (size_t g = 0; g < s->n_groups; g++) {
                const struct nbd_fw_group *grp = &s->groups[g];
                for (int d = 0; d < 2; d++) {
                        bool any = false;
                        for (size_t i = 0; i < grp->n_rules; i++)
                                any |= grp->rules[i].dir == (enum nbd_fw_dir)d;
                        if (!any)
                                continue;
                        snprintf(name, sizeof(name), "%s/%s/%s", s->owner, dir_names[d], grp->name);
                        if (push_chain(it, new_chain(name), owner_idx) < 0)
                                goto fail_jumps;
                        for (size_t i = 0; i < grp->n_rules; i++) {
                                struct nftnl_rule *r;
                                if (grp->rules[i].dir != (enum nbd_fw_dir)d)
                                        continue;
                                r = compile_rule(name, &grp->rules[i]);
                                if (!r || items_push(it, (struct item){ITEM_RULE, NULL, r,
                                                                       owner_idx}) < 0) {
                                        if (r)
                                                nftnl_rule_free(r);
                                        goto fail_jumps;
                                }
                        }
                        /* Counted at once, so that fail_jumps frees it. */
                        jumps[d][n_jumps[d]++] = new_rule("");
                        if (!jumps[d][n_jumps[d] - 1] ||
                            add_verdict(jumps[d][n_jumps[d] - 1], NFT_JUMP, name) < 0)
                                goto fail_jumps;
                }
        }
        for (int d = 0; d < 2; d++) {
                snprintf(name, sizeof(name), "%s/%s", s->owner, dir_names[d]);
                snprintf(comment, sizeof(comment), "netbroker %s %s %u uid=%u", hash, s->ifname,
                         rules, (unsigned)s->uid);
                if (push_chain(it,
                               new_base_chain(name, s->ifname, (d == 0) != s->reversed, comment),
                               owner_idx) < 0)
                        goto fail_jumps;
                for (size_t j = 0; j < n_jumps[d]; j++) {
                        if (nftnl_rule_set_str(jumps[d][j], NFTNL_RULE_CHAIN, name) < 0 ||
                            items_push(it, (struct item){ITEM_RULE, NULL, jumps[d][j], owner_idx}) <
                                    0)
                                goto fail_jumps;
                        jumps[d][j] = NULL;
                }
                n_jumps[d] = 0;
        }
        return 0;
fail_jumps:
        for (int d = 0; d < 2; d++)
                for (size_t j = 0; j < n_jumps[d]; j++)
                        if (jumps[d][j])
                                nftnl_rule_free(jumps[d][j]);
        items_clear(it, start);
        errf(err, "owner %s: out of memory compiling its rules", s->owner);
        return ret;
}

int nbd_fw_render(const struct nbd_fw_owner_spec *s, char **ret_text, char *err)
{
        char hash[NBD_FW_HASH_HEX], buf[MNL_SOCKET_BUFFER_SIZE], line[4096];
        struct items it = {0};
        unsigned rules;
        size_t len = 0;
        char *text = NULL;
        FILE *f = open_memstream(&text, &len);
        int r = -ENOMEM;

        if (f) {
                hash_owner(s, hash, &rules);
                r = compile_owner(s, 0, &it, hash, rules, err);
        } else {
                errf(err, "out of memory");
        }

        for (size_t i = 0; r == 0 && i < it.n; i++) {
                struct nftnl_rule *back;
                struct nlmsghdr *nlh;

                if (it.v[i].kind == ITEM_CHAIN) {
                        fprintf(f, "chain %s\n",
                                nftnl_chain_get_str(it.v[i].chain, NFTNL_CHAIN_NAME));
                        continue;
                }
                /* Through the netlink encoding and back, as the kernel gets it. */
                nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWRULE, NFPROTO_NETDEV, 0, 0);
                nftnl_rule_nlmsg_build_payload(nlh, it.v[i].rule);
                back = nftnl_rule_alloc();
                if (!back) {
                        errf(err, "out of memory");
                        r = -ENOMEM;
                } else if ((errno = 0, nftnl_rule_nlmsg_parse(nlh, back) < 0)) {
                        r = errno == ENOMEM ? -ENOMEM : -EINVAL;
                        errf(err, "%s",
                             r == -ENOMEM ? "out of memory"
                                          : "libnftnl cannot parse back a compiled rule");
                } else {
                        /* One line per rule: the expressions, without the
                         * "family table chain" line libnftnl starts with. */
                        char *p = line, *nl;
                        nftnl_rule_snprintf(line, sizeof(line), back, NFTNL_OUTPUT_DEFAULT, 0);
                        if ((nl = strchr(p, '\n')))
                                p = nl + 1;
                        fputs("  ", f);
                        for (bool space = true; *p; p++) {
                                bool ws = *p == ' ' || *p == '\n';
                                if (!ws || !space)
                                        fputc(ws ? ' ' : *p, f);
                                space = ws;
                        }
                        fputc('\n', f);
                }
                if (back) /* libnftnl's free functions do not take NULL */
                        nftnl_rule_free(back);
        }
        items_clear(&it, 0);
        free(it.v);
        /* A memstream that could not grow has lost what was written. */
        if (f) {
                bool lost = ferror(f);
                if (fclose(f) != 0)
                        lost = true;
                if (lost && r == 0) {
                        errf(err, "out of memory");
                        r = -ENOMEM;
                }
        }
        if (r < 0) {
                free(text);
                return r;
        }
        *ret_text = text;
        return 0;
}

int nbd_fw_hash(const struct nbd_fw_owner_spec *s, char hash[NBD_FW_HASH_HEX], unsigned *ret_rules,
                char *err)
{
        struct items it = {0};
        int r;

        hash_owner(s, hash, ret_rules);
        /* Compile too: what cannot be compiled has no hash. */
        r = compile_owner(s, 0, &it, hash, *ret_rules, err);
        items_clear(&it, 0);
        free(it.v);
        return r;
}

/* ---- reading the table back ---- */

struct owner_state {
        char owner[NBD_FW_OWNER_MAX + 1];
        char ifname[IFNAMSIZ];
        char hash[NBD_FW_HASH_HEX];
        unsigned rules;
        unsigned uid; /* its creator, from the comment (0 when it names none) */
        bool has_base;
        char **chains; /* base chains first, then group chains */
        unsigned *chain_rules; /* rules in each chain, when counted */
        size_t n_chains;
        unsigned kernel_rules; /* rules in its group chains, when counted */
        bool touched; /* an op of this transaction queued a change */
        struct owner_state *next;
};

static void owners_free(struct owner_state *o)
{
        while (o) {
                struct owner_state *next = o->next;
                for (size_t i = 0; i < o->n_chains; i++)
                        free(o->chains[i]);
                free(o->chains);
                free(o->chain_rules);
                free(o);
                o = next;
        }
}

static struct owner_state *owner_find(struct owner_state *list, const char *owner)
{
        for (; list; list = list->next)
                if (strcmp(list->owner, owner) == 0)
                        return list;
        return NULL;
}

static int comment_cb(const struct nftnl_udata *attr, void *data)
{
        const char **out = data;

        if (nftnl_udata_type(attr) == UDATA_CHAIN_COMMENT && nftnl_udata_len(attr) > 0)
                *out = nftnl_udata_get(attr);
        return MNL_CB_OK;
}

struct chain_dump {
        struct owner_state *owners;
        int err;
};

static int on_chain(const struct nlmsghdr *nlh, void *data)
{
        struct chain_dump *d = data;
        struct nftnl_chain *c = nftnl_chain_alloc();
        const char *name, *slash, *comment = NULL;
        struct owner_state *o;
        char owner[NBD_FW_OWNER_MAX + 1];
        uint32_t len = 0;
        const void *ud;
        char **chains, *copy;

        /* A chain of ours left out of the list would be left behind when
         * its owner is replaced or removed: out of memory fails the dump. */
        if (!c) {
                d->err = -ENOMEM;
                goto out;
        }
        errno = 0;
        if (nftnl_chain_nlmsg_parse(nlh, c) < 0) {
                if (errno == ENOMEM)
                        d->err = -ENOMEM;
                goto out;
        }
        name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
        slash = name ? strchr(name, '/') : NULL;
        if (!slash || (size_t)(slash - name) > NBD_FW_OWNER_MAX)
                goto out; /* not one of ours: never touched */
        memcpy(owner, name, (size_t)(slash - name));
        owner[slash - name] = '\0';
        o = owner_find(d->owners, owner);
        if (!o) {
                o = calloc(1, sizeof(*o));
                if (!o) {
                        d->err = -ENOMEM;
                        goto out;
                }
                strcpy(o->owner, owner);
                o->next = d->owners;
                d->owners = o;
        }
        chains = realloc(o->chains, (o->n_chains + 1) * sizeof(*chains));
        if (chains)
                o->chains = chains;
        copy = chains ? strdup(name) : NULL;
        if (!copy) {
                d->err = -ENOMEM;
                goto out;
        }
        if (!strchr(slash + 1, '/')) {
                /* A base chain: first in the list (deleted before the group
                 * chains its rules jump to), and it has the comment. */
                memmove(o->chains + 1, o->chains, o->n_chains * sizeof(*chains));
                o->chains[0] = copy;
                o->has_base = true;
                ud = nftnl_chain_get_data(c, NFTNL_CHAIN_USERDATA, &len);
                /* "uid=N" came later: a comment without it was written
                 * for root, when only root could ask. */
                if (ud && nftnl_udata_parse(ud, len, comment_cb, &comment) >= 0 && comment)
                        sscanf(comment, "netbroker %32s %15s %u uid=%u", o->hash, o->ifname,
                               &o->rules, &o->uid);
        } else {
                o->chains[o->n_chains] = copy;
        }
        o->n_chains++;
out:
        if (c)
                nftnl_chain_free(c);
        return MNL_CB_OK;
}

struct rule_count {
        struct owner_state *owners;
};

static int dump(struct nbd_fw *fw, uint16_t type, mnl_cb_t cb, void *data);

static int rule_attr_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **tb = data;

        if (mnl_attr_get_type(attr) == NFTA_RULE_CHAIN &&
            mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
                tb[NFTA_RULE_CHAIN] = attr;
        return MNL_CB_OK;
}

/* Count rules per chain from a rule dump. Only the chain's name is read:
 * parsing every expression of thousands of rules is what ensure must not
 * pay for. */
static int on_rule(const struct nlmsghdr *nlh, void *data)
{
        struct rule_count *d = data;
        const struct nlattr *tb[NFTA_RULE_MAX + 1] = {0};
        const char *chain, *slash;

        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), rule_attr_cb, tb) < 0 ||
            !tb[NFTA_RULE_CHAIN])
                return MNL_CB_OK;
        chain = mnl_attr_get_str(tb[NFTA_RULE_CHAIN]);
        slash = strchr(chain, '/');
        if (!slash)
                return MNL_CB_OK;
        for (struct owner_state *o = d->owners; o; o = o->next) {
                if (strlen(o->owner) != (size_t)(slash - chain) ||
                    strncmp(o->owner, chain, (size_t)(slash - chain)))
                        continue;
                for (size_t i = 0; i < o->n_chains; i++)
                        if (strcmp(o->chains[i], chain) == 0 && o->chain_rules)
                                o->chain_rules[i]++;
                /* Rules in group chains are the owner's; the base chains
                 * hold only the jumps to them. */
                if (strchr(slash + 1, '/'))
                        o->kernel_rules++;
                break;
        }
        return MNL_CB_OK;
}

static int count_rules(struct nbd_fw *fw, struct owner_state *owners)
{
        struct rule_count rc = {owners};

        for (struct owner_state *o = owners; o; o = o->next) {
                o->kernel_rules = 0;
                free(o->chain_rules);
                o->chain_rules = calloc(o->n_chains ? o->n_chains : 1, sizeof(*o->chain_rules));
                if (!o->chain_rules)
                        return -ENOMEM;
        }
        return dump(fw, NFT_MSG_GETRULE, on_rule, &rc);
}

/* One dump of chains or rules of our table. A missing table is empty. */
static int dump(struct nbd_fw *fw, uint16_t type, mnl_cb_t cb, void *data)
{
        static char buf[65536];
        uint32_t portid = mnl_socket_get_portid(fw->nl);
        int r = -EINTR;

        for (int attempt = 0; attempt < 5 && r == -EINTR; attempt++) {
                uint32_t seq = ++fw->seq;
                struct nlmsghdr *nlh =
                        nftnl_nlmsg_build_hdr(buf, type, NFPROTO_NETDEV, NLM_F_DUMP, seq);
                ssize_t n;

                if (type == NFT_MSG_GETCHAIN) {
                        struct nftnl_chain *c = new_chain("");
                        if (!c)
                                return -ENOMEM;
                        nftnl_chain_unset(c, NFTNL_CHAIN_NAME);
                        nftnl_chain_nlmsg_build_payload(nlh, c);
                        nftnl_chain_free(c);
                } else {
                        struct nftnl_rule *rl = new_rule("");
                        if (!rl)
                                return -ENOMEM;
                        nftnl_rule_unset(rl, NFTNL_RULE_CHAIN);
                        nftnl_rule_nlmsg_build_payload(nlh, rl);
                        nftnl_rule_free(rl);
                }
                if (mnl_socket_sendto(fw->nl, nlh, nlh->nlmsg_len) < 0)
                        return -errno;
                nbd_netlink_sent_nf(1);
                do {
                        n = mnl_socket_recvfrom(fw->nl, buf, sizeof(buf));
                        if (n < 0) {
                                r = -errno;
                                break;
                        }
                        r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
                        if (r < 0)
                                r = -errno;
                } while (r > 0);
                if (r == -ENOENT)
                        r = 0; /* no table: no owners */
        }
        return r < 0 ? r : 0;
}

static int read_owners(struct nbd_fw *fw, struct owner_state **ret)
{
        struct chain_dump d = {0};
        int r = dump(fw, NFT_MSG_GETCHAIN, on_chain, &d);

        if (r == 0)
                r = d.err;
        if (r < 0) {
                owners_free(d.owners);
                return r;
        }
        *ret = d.owners;
        return 0;
}

int nbd_fw_list(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, char *err)
{
        struct owner_state *owners = NULL;
        int r = read_owners(fw, &owners);

        if (r < 0) {
                errf(err, "cannot read table %s: %s", NBD_FW_TABLE, why(r));
                return r;
        }
        /* Count what is really there, not what the comment says. */
        r = count_rules(fw, owners);
        if (r < 0)
                errf(err, "cannot read the rules of table %s: %s", NBD_FW_TABLE, why(r));
        for (struct owner_state *o = owners; o && r == 0; o = o->next) {
                struct nbd_fw_owner_info info = {.rules = o->kernel_rules};
                if (!o->has_base)
                        continue;
                snprintf(info.owner, sizeof(info.owner), "%s", o->owner);
                snprintf(info.ifname, sizeof(info.ifname), "%s", o->ifname);
                snprintf(info.hash, sizeof(info.hash), "%s", o->hash);
                info.uid = o->uid;
                r = fn(&info, data);
        }
        owners_free(owners);
        return r;
}

/* ---- transactions ---- */

struct nbd_fw_txn {
        struct nbd_fw *fw;
        struct owner_state *owners; /* as read at the start */
        struct items items;
        char **op_owner; /* owner of each queued op, for error messages */
        size_t n_ops;
        struct {
                char owner[NBD_FW_OWNER_MAX + 1];
                char hash[NBD_FW_HASH_HEX];
        } * expect; /* what must be in the kernel after commit */
        size_t n_expect;
        unsigned rules_queued;
        bool rules_counted; /* the rule dump ensure needs, done once */
};

int nbd_fw_txn_begin(struct nbd_fw *fw, struct nbd_fw_txn **ret, char *err)
{
        struct nbd_fw_txn *t = calloc(1, sizeof(*t));
        int r;

        if (!t) {
                errf(err, "out of memory");
                return -ENOMEM;
        }
        t->fw = fw;
        r = read_owners(fw, &t->owners);
        if (r < 0) {
                errf(err, "cannot read table %s: %s", NBD_FW_TABLE, why(r));
                free(t);
                return r;
        }
        *ret = t;
        return 0;
}

void nbd_fw_txn_free(struct nbd_fw_txn *t)
{
        if (!t)
                return;
        items_clear(&t->items, 0);
        free(t->items.v);
        for (size_t i = 0; i < t->n_ops; i++)
                free(t->op_owner[i]);
        free(t->op_owner);
        free(t->expect);
        owners_free(t->owners);
        free(t);
}

static int note_op(struct nbd_fw_txn *t, const char *owner, size_t *ret_idx)
{
        char **p = realloc(t->op_owner, (t->n_ops + 1) * sizeof(*p));

        if (!p)
                return -ENOMEM;
        t->op_owner = p;
        p[t->n_ops] = strdup(owner);
        if (!p[t->n_ops])
                return -ENOMEM;
        *ret_idx = t->n_ops++;
        return 0;
}

static int queue_delete(struct nbd_fw_txn *t, struct owner_state *o, size_t idx)
{
        for (size_t i = 0; i < o->n_chains; i++) {
                struct nftnl_chain *c = new_chain(o->chains[i]);
                if (!c || items_push(&t->items, (struct item){ITEM_DELCHAIN, c, NULL, idx}) < 0) {
                        if (c)
                                nftnl_chain_free(c);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int items_append(struct items *to, struct items *from)
{
        for (size_t i = 0; i < from->n; i++) {
                if (items_push(to, from->v[i]) < 0) {
                        /* What was moved is to's; free the rest. */
                        memmove(from->v, from->v + i, (from->n - i) * sizeof(*from->v));
                        from->n -= i;
                        return -ENOMEM;
                }
        }
        from->n = 0;
        return 0;
}

static long chain_rules(const struct owner_state *o, const char *name)
{
        for (size_t i = 0; i < o->n_chains; i++)
                if (strcmp(o->chains[i], name) == 0)
                        return o->chain_rules ? (long)o->chain_rules[i] : -1;
        return -1;
}

/* Ensure's test: the hash in the comment is only a claim; the kernel must
 * also hold exactly the chains the spec makes, each with its number of
 * rules, and the jumps to them (a chain flushed or deleted by hand makes
 * the owner changed, and ensure rebuilds it). */
static bool in_place(const struct owner_state *o, const struct nbd_fw_owner_spec *s,
                     const char *hash)
{
        size_t chains = 2;
        long jumps[2] = {0, 0};
        char name[256];

        if (!o || !o->has_base || strcmp(o->hash, hash) != 0 || strcmp(o->ifname, s->ifname) != 0)
                return false;
        for (size_t g = 0; g < s->n_groups; g++)
                for (int d = 0; d < 2; d++) {
                        long n = 0;
                        for (size_t i = 0; i < s->groups[g].n_rules; i++)
                                n += s->groups[g].rules[i].dir == (enum nbd_fw_dir)d;
                        if (!n)
                                continue;
                        snprintf(name, sizeof(name), "%s/%s/%s", s->owner, dir_names[d],
                                 s->groups[g].name);
                        if (chain_rules(o, name) != n)
                                return false;
                        jumps[d]++;
                        chains++;
                }
        for (int d = 0; d < 2; d++) {
                snprintf(name, sizeof(name), "%s/%s", s->owner, dir_names[d]);
                if (chain_rules(o, name) != jumps[d])
                        return false;
        }
        return o->n_chains == chains;
}

int nbd_fw_txn_apply(struct nbd_fw_txn *t, const struct nbd_fw_owner_spec *s,
                     struct nbd_fw_applied *ret, char *err)
{
        struct owner_state *o = owner_find(t->owners, s->owner);
        struct items fresh = {0};
        size_t idx, mark = t->items.n;
        void *grown;
        int r;

        memset(ret, 0, sizeof(*ret));
        if (o && o->touched) {
                errf(err, "owner %s is changed twice in one transaction", s->owner);
                return -EINVAL;
        }
        if (o && s->own_only && o->uid != s->uid) {
                errf(err, "owner %s is another caller's", s->owner);
                return -EPERM;
        }
        r = note_op(t, s->owner, &idx);
        if (r < 0) {
                errf(err, "owner %s: out of memory", s->owner);
                goto out;
        }
        /* The hash of the model decides whether anything is written. */
        hash_owner(s, ret->hash, &ret->rules);
        if (s->ensure && o && !t->rules_counted) {
                r = count_rules(t->fw, t->owners);
                if (r < 0) {
                        errf(err, "cannot read the rules of table %s: %s", NBD_FW_TABLE, why(r));
                        goto out;
                }
                t->rules_counted = true;
        }
        /* Nothing to write: no need to compile. */
        if (s->ensure && in_place(o, s, ret->hash)) {
                ret->unchanged = true;
                nbd_stat_inc(NBD_STAT_FW_OWNERS_UNCHANGED);
                goto out;
        }
        r = compile_owner(s, idx, &fresh, ret->hash, ret->rules, err);
        if (r < 0)
                goto out;
        /* The old chains go, and the new come, in the same transaction. */
        if (o) {
                r = queue_delete(t, o, idx);
                o->touched = true;
        }
        if (r == 0)
                r = items_append(&t->items, &fresh);
        grown = r == 0 ? realloc(t->expect, (t->n_expect + 1) * sizeof(*t->expect)) : NULL;
        if (r == 0 && !grown)
                r = -ENOMEM;
        if (r < 0) {
                /* Nothing of a failed op stays queued: with CONTINUE_ON_ERROR
                 * the transaction is still committed (a delete of the old
                 * chains without the new would leave the guest unfiltered). */
                items_clear(&t->items, mark);
                if (o)
                        o->touched = false;
                errf(err, "owner %s: out of memory", s->owner);
                goto out;
        }
        t->expect = grown;
        snprintf(t->expect[t->n_expect].owner, sizeof(t->expect[0].owner), "%s", s->owner);
        snprintf(t->expect[t->n_expect].hash, sizeof(t->expect[0].hash), "%s", ret->hash);
        t->n_expect++;
        t->rules_queued += ret->rules;
out:
        items_clear(&fresh, 0);
        free(fresh.v);
        return r;
}

int nbd_fw_txn_remove(struct nbd_fw_txn *t, const char *owner, const uid_t *only_for, char *err)
{
        struct owner_state *o = owner_find(t->owners, owner);
        size_t idx, mark = t->items.n;
        void *grown = NULL;
        int r;

        if (!o) {
                errf(err, "owner %s has no rules", owner);
                return -ENOENT;
        }
        if (only_for && o->uid != *only_for) {
                errf(err, "owner %s is another caller's", owner);
                return -EPERM;
        }
        if (o->touched) {
                errf(err, "owner %s is changed twice in one transaction", owner);
                return -EINVAL;
        }
        r = note_op(t, owner, &idx);
        if (r == 0)
                r = queue_delete(t, o, idx);
        if (r == 0 && !(grown = realloc(t->expect, (t->n_expect + 1) * sizeof(*t->expect))))
                r = -ENOMEM;
        if (r < 0) {
                /* As in nbd_fw_txn_apply: nothing of a failed op stays queued. */
                items_clear(&t->items, mark);
                errf(err, "owner %s: out of memory", owner);
                return r;
        }
        o->touched = true;
        t->expect = grown;
        snprintf(t->expect[t->n_expect].owner, sizeof(t->expect[0].owner), "%s", owner);
        t->expect[t->n_expect].hash[0] = '\0';
        t->n_expect++;
        return 0;
}

/* 0, or -ENOMEM when the batch needed a page it could not have (the
 * message would be overwritten by the next: a transaction short of it). */
static int put_item(struct nftnl_batch *b, const struct item *it, uint32_t seq, bool ack)
{
        uint16_t flags = ack ? NLM_F_ACK : 0;
        struct nlmsghdr *nlh;

        switch (it->kind) {
        case ITEM_DELCHAIN:
                nlh = nftnl_chain_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_DELCHAIN,
                                                  NFPROTO_NETDEV, flags, seq);
                nftnl_chain_nlmsg_build_payload(nlh, it->chain);
                break;
        case ITEM_CHAIN:
                nlh = nftnl_chain_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWCHAIN,
                                                  NFPROTO_NETDEV, flags | NLM_F_CREATE | NLM_F_EXCL,
                                                  seq);
                nftnl_chain_nlmsg_build_payload(nlh, it->chain);
                break;
        default:
                nlh = nftnl_rule_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWRULE,
                                                 NFPROTO_NETDEV,
                                                 flags | NLM_F_CREATE | NLM_F_APPEND, seq);
                nftnl_rule_nlmsg_build_payload(nlh, it->rule);
        }
        return nftnl_batch_update(b) < 0 ? -ENOMEM : 0;
}

/* NULL when out of memory. */
static struct nftnl_batch *build_batch(struct nbd_fw_txn *t, uint32_t *ret_first,
                                       uint32_t *ret_last)
{
        struct nftnl_batch *b = nftnl_batch_alloc(32 * 4096, 64 * 1024);
        struct nftnl_table *tb = nftnl_table_alloc();
        struct nlmsghdr *nlh;
        uint32_t seq = t->fw->seq + 1, first;
        int r = -ENOMEM;

        if (!b || !tb)
                goto out;
        nftnl_batch_begin(nftnl_batch_buffer(b), seq++);
        if (nftnl_batch_update(b) < 0)
                goto out;
        /* The table is created if missing (never exclusive: it is ours). */
        if (nftnl_table_set_str(tb, NFTNL_TABLE_NAME, NBD_FW_TABLE) < 0)
                goto out;
        nlh = nftnl_table_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWTABLE, NFPROTO_NETDEV,
                                          NLM_F_CREATE, seq++);
        nftnl_table_nlmsg_build_payload(nlh, tb);
        if (nftnl_batch_update(b) < 0)
                goto out;
        first = seq;
        for (size_t i = 0; i < t->items.n; i++)
                if (put_item(b, &t->items.v[i], seq++, i + 1 == t->items.n) < 0)
                        goto out;
        nftnl_batch_end(nftnl_batch_buffer(b), seq++);
        if (nftnl_batch_update(b) < 0)
                goto out;
        *ret_first = first;
        *ret_last = seq - 2;
        t->fw->seq = seq;
        r = 0;
out:
        if (tb)
                nftnl_table_free(tb);
        if (r < 0 && b) {
                nftnl_batch_free(b);
                b = NULL;
        }
        return b;
}

/* Does the kernel have what the transaction was to leave? (After acks were
 * lost to ENOBUFS, the state itself is the answer.) */
static int verify(struct nbd_fw_txn *t)
{
        struct owner_state *now = NULL;
        int r = read_owners(t->fw, &now);

        for (size_t i = 0; r == 0 && i < t->n_expect; i++) {
                struct owner_state *o = owner_find(now, t->expect[i].owner);
                /* An empty hash stands for a removed owner. */
                if (t->expect[i].hash[0] ? !o || strcmp(o->hash, t->expect[i].hash) != 0
                                         : o != NULL)
                        r = -EIO;
        }
        owners_free(now);
        return r;
}

static int read_acks(struct nbd_fw_txn *t, uint32_t first, uint32_t last, char *err)
{
        static char buf[65536];
        bool acked = false, lost = false;
        int first_err = 0;
        uint32_t err_seq = 0;

        /* The kernel handles the whole batch inside sendmsg(): every ack and
         * error is queued by now, so read until the socket is empty. */
        for (;;) {
                ssize_t n = recv(mnl_socket_get_fd(t->fw->nl), buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == ENOBUFS) {
                        lost = true;
                        continue;
                }
                if (n < 0)
                        break;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, (int)n);
                     h = mnl_nlmsg_next(h, (int *)&n)) {
                        const struct nlmsgerr *e;
                        if (h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        e = mnl_nlmsg_get_payload(h);
                        if (e->error && !first_err) {
                                first_err = e->error;
                                err_seq = h->nlmsg_seq;
                        } else if (!e->error && h->nlmsg_seq == last) {
                                acked = true;
                        }
                }
        }
        if (first_err) {
                size_t item = err_seq >= first && err_seq <= last ? err_seq - first : SIZE_MAX;
                const char *owner = item != SIZE_MAX ? t->op_owner[t->items.v[item].owner] : NULL;
                errf(err, "the kernel refused the transaction%s%s%s: %s", owner ? " (owner " : "",
                     owner ? owner : "", owner ? ")" : "", strerror(-first_err));
                return first_err;
        }
        if (acked)
                return 0;
        if (lost && verify(t) == 0)
                return 0;
        errf(err, lost ? "acknowledgements were lost and the table does not show the new rules"
                       : "no acknowledgement for the transaction");
        return -EIO;
}

int nbd_fw_txn_commit(struct nbd_fw_txn *t, char *err)
{
        struct nftnl_batch *b;
        uint32_t first = 0, last = 0;
        struct iovec *iov;
        struct msghdr msg = {0};
        struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
        int n_iov, r, total = 0;

        if (t->items.n == 0)
                return 0; /* nothing changes: nothing is written */
        b = build_batch(t, &first, &last);
        if (!b) {
                errf(err, "out of memory building the transaction");
                return -ENOMEM;
        }
        n_iov = nftnl_batch_iovec_len(b);
        iov = calloc((size_t)n_iov, sizeof(*iov));
        if (!iov) {
                nftnl_batch_free(b);
                errf(err, "out of memory building the transaction");
                return -ENOMEM;
        }
        nftnl_batch_iovec(b, iov, (uint32_t)n_iov);
        for (int i = 0; i < n_iov; i++)
                total += (int)iov[i].iov_len;
        /* A large batch must fit the socket's send buffer whole. */
        total += 65536;
        setsockopt(mnl_socket_get_fd(t->fw->nl), SOL_SOCKET, SO_SNDBUFFORCE, &total, sizeof(total));
        msg.msg_name = &snl;
        msg.msg_namelen = sizeof(snl);
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)n_iov;
        r = sendmsg(mnl_socket_get_fd(t->fw->nl), &msg, 0) < 0 ? -errno : 0;
        free(iov);
        nftnl_batch_free(b);
        if (r < 0) {
                errf(err, "cannot send the transaction: %s", strerror(-r));
                return r;
        }
        nbd_netlink_sent_nf((unsigned)(t->items.n + 3));
        r = read_acks(t, first, last, err);
        if (r == 0) {
                nbd_stat_inc(NBD_STAT_FW_TRANSACTIONS);
                nbd_stats[NBD_STAT_FW_OWNERS_WRITTEN] += t->n_expect;
                nbd_stats[NBD_STAT_FW_RULES_WRITTEN] += t->rules_queued;
        }
        return r;
}

/* ---- the table being deleted behind our back ---- */

static int on_nft_event(const struct nlmsghdr *nlh, void *data)
{
        struct nftnl_table *t;

        (void)data;
        if (NFNL_MSG_TYPE(nlh->nlmsg_type) != NFT_MSG_DELTABLE)
                return MNL_CB_OK;
        t = nftnl_table_alloc();
        if (t && nftnl_table_nlmsg_parse(nlh, t) == 0 &&
            nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY) == NFPROTO_NETDEV &&
            strcmp(nftnl_table_get_str(t, NFTNL_TABLE_NAME), NBD_FW_TABLE) == 0) {
                /* The daemon owns the policy: it learns from Stats and its
                 * next ensure rebuilds; the helper does not on its own. */
                nbd_notice("table %s was deleted (nft flush ruleset, a firewall reload?)",
                           NBD_FW_TABLE);
                nbd_stat_inc(NBD_STAT_FW_TABLE_DELETED);
        }
        if (t)
                nftnl_table_free(t);
        return MNL_CB_OK;
}

static void on_monitor(struct nbd_watch *w, uint32_t events)
{
        struct nbd_fw *fw = w->data;
        static char buf[65536];

        (void)events;
        for (;;) {
                ssize_t n = recv(w->fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && errno == ENOBUFS) {
                        /* Our own big transactions make one event per rule;
                         * losing some of those is harmless. */
                        continue;
                }
                if (n <= 0)
                        return;
                mnl_cb_run(buf, (size_t)n, 0, 0, on_nft_event, fw);
        }
}

int nbd_fw_open(struct nbd_loop *loop, struct nbd_fw **ret)
{
        struct nbd_fw *fw = calloc(1, sizeof(*fw));
        int r, big = 4 << 20;

        if (!fw)
                return -ENOMEM;
        fw->monw.fd = -1;
        fw->seq = (uint32_t)time(NULL);
        fw->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        fw->mon = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (!fw->nl || !fw->mon || mnl_socket_bind(fw->nl, 0, MNL_SOCKET_AUTOPID) < 0 ||
            mnl_socket_bind(fw->mon, 1 << (NFNLGRP_NFTABLES - 1), MNL_SOCKET_AUTOPID) < 0) {
                r = -errno;
                goto fail;
        }
        setsockopt(mnl_socket_get_fd(fw->nl), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
        setsockopt(mnl_socket_get_fd(fw->mon), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
        fw->loop = loop;
        if (loop) {
                r = nbd_loop_add(loop, &fw->monw, mnl_socket_get_fd(fw->mon), EPOLLIN, on_monitor,
                                 fw);
                if (r < 0)
                        goto fail;
        }
        *ret = fw;
        return 0;
fail:
        nbd_fw_close(fw);
        return r ? r : -EIO;
}

void nbd_fw_close(struct nbd_fw *fw)
{
        if (!fw)
                return;
        if (fw->loop && fw->monw.fd >= 0)
                nbd_loop_remove(fw->loop, &fw->monw);
        if (fw->nl)
                mnl_socket_close(fw->nl);
        if (fw->mon)
                mnl_socket_close(fw->mon);
        free(fw);
}
