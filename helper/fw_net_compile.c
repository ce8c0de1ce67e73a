// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners' compiler; see fw_net_compile.h and fw_net.h.
 *
 * Which rules, and in which order (libvirt: network_nftables.c; netavark:
 * src/firewall/nft.rs), every rule with a counter before its verdict:
 *
 * forward (nat, route, isolated; open has none), for IPv4 always and for
 * IPv6 when the network has an IPv6 subnet or ipv6_nogw (libvirt's
 * <network ipv6='yes'>), as libvirt's ip and ip6 tables
 * (nftablesAddGeneralIPv6FirewallRules):
 *   1. guest_cross:  iifname BR oifname BR accept
 *   2. port forwards: oifname BR, daddr GUEST, proto, dport GPORT, ct
 *      status dnat: accept (netavark lets DNATed connections in; libvirt
 *      has no forwards, and its guest_input would reject them)
 *   3. guest_input:  per subnet [iifname DEV] oifname BR daddr NET accept,
 *      with ct state related,established for a masqueraded subnet (nat
 *      mode: IPv4, and IPv6 with nat_ipv6); then oifname BR reject
 *   4. guest_output: per subnet iifname BR saddr NET [oifname DEV] accept;
 *      then iifname BR reject
 *   Isolated keeps 1 and the two rejects only.
 * postrouting (nat, per IPv4 subnet, and per IPv6 subnet with nat_ipv6,
 * libvirt's <nat ipv6='yes'/>; without it IPv6 is routed, as libvirt's
 * default, nftablesAddIPSpecificFirewallRules):
 *   saddr NET daddr 224.0.0.0/24 (IPv6: ff02::/16) return; IPv4 only:
 *   daddr 255.255.255.255 return; tcp, then udp: daddr != NET masquerade
 *   to :MIN-MAX (1024-65535); any other: daddr != NET masquerade.
 *   [oifname DEV] on each.
 * prerouting and output (port forwards, as netavark's HOSTPORT-DNAT):
 *   [daddr OUTSIDE | fib daddr type local] proto dport PORT dnat to
 *   GUEST:GPORT. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "fw_net_compile.h"
#include "nft_expr.h"

#include <errno.h>
#include <libnftnl/expr.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const nbd_net_chain_names[NBD_NET_CHAINS] = {"forward", "postrouting", "prerouting",
                                                         "output"};

/* ---- expressions ---- */

/* iifname/oifname: the whole IFNAMSIZ, as nft compares a name without '*'. */
static int ifname(struct nftnl_rule *r, uint32_t key, const char *name)
{
        char buf[IFNAMSIZ] = {0};
        int ret = nbd_nft_meta(r, key);

        snprintf(buf, sizeof(buf), "%s", name);
        return ret ? ret : nbd_nft_cmp(r, NFT_CMP_EQ, buf, IFNAMSIZ);
}

/* The inet family sees both: a header field needs its family first. */
static int nfproto(struct nftnl_rule *r, int family)
{
        uint8_t v = family == 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
        int ret = nbd_nft_meta(r, NFT_META_NFPROTO);

        return ret ? ret : nbd_nft_cmp(r, NFT_CMP_EQ, &v, 1);
}

static int l4proto(struct nftnl_rule *r, uint8_t proto)
{
        int ret = nbd_nft_meta(r, NFT_META_L4PROTO);

        return ret ? ret : nbd_nft_cmp(r, NFT_CMP_EQ, &proto, 1);
}

/* saddr or daddr against addr/m (m NULL: exact), == or != */
static int addr(struct nftnl_rule *r, int family, bool dst, const uint8_t *a, const uint8_t *m,
                bool neq)
{
        uint32_t len = family == 4 ? 4 : 16;
        uint32_t off = family == 4 ? (dst ? 16 : 12) : (dst ? 24 : 8);
        bool full = true;
        int ret = nbd_nft_payload(r, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, off, len);

        for (uint32_t i = 0; m && i < len; i++)
                full &= m[i] == 0xff;
        if (ret == 0 && !full)
                ret = nbd_nft_mask(r, m, len);
        return ret ? ret : nbd_nft_cmp(r, neq ? NFT_CMP_NEQ : NFT_CMP_EQ, a, len);
}

static int subnet(struct nftnl_rule *r, const struct nbd_net_subnet *n, bool dst, bool neq)
{
        return addr(r, n->family, dst, n->addr, n->mask, neq);
}

static int dport(struct nftnl_rule *r, uint16_t port)
{
        uint16_t be = htons(port);
        int ret = nbd_nft_payload(r, NFT_REG_1, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);

        return ret ? ret : nbd_nft_cmp(r, NFT_CMP_EQ, &be, 2);
}

/* ct KEY & bits != 0 */
static int ct_bits(struct nftnl_rule *r, uint32_t key, uint32_t bits)
{
        struct nftnl_expr *e = nftnl_expr_alloc("ct");
        uint32_t zero = 0;
        int ret;

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
        if ((ret = nbd_nft_add(r, e)) || (ret = nbd_nft_mask(r, &bits, 4)))
                return ret;
        return nbd_nft_cmp(r, NFT_CMP_NEQ, &zero, 4);
}

/* fib daddr type local: any address of the host's own. */
static int fib_local(struct nftnl_rule *r)
{
        struct nftnl_expr *e = nftnl_expr_alloc("fib");
        uint32_t local = RTN_LOCAL;
        int ret;

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
        nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
        nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
        if ((ret = nbd_nft_add(r, e)))
                return ret;
        return nbd_nft_cmp(r, NFT_CMP_EQ, &local, 4);
}

static int imm_data(struct nftnl_rule *r, uint32_t reg, const void *data, uint32_t len)
{
        struct nftnl_expr *e = nftnl_expr_alloc("immediate");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, reg);
        nftnl_expr_set_data(e, NFTNL_EXPR_IMM_DATA, data, len);
        return nbd_nft_add(r, e);
}

/* masquerade [to :MIN-MAX] */
static int masquerade(struct nftnl_rule *r, uint16_t min, uint16_t max)
{
        uint16_t lo = htons(min), hi = htons(max);
        struct nftnl_expr *e;
        int ret;

        if (min &&
            ((ret = imm_data(r, NFT_REG_1, &lo, 2)) || (ret = imm_data(r, NFT_REG_2, &hi, 2))))
                return ret;
        if (!(e = nftnl_expr_alloc("masq")))
                return -ENOMEM;
        if (min) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_MASQ_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
                nftnl_expr_set_u32(e, NFTNL_EXPR_MASQ_REG_PROTO_MIN, NFT_REG_1);
                nftnl_expr_set_u32(e, NFTNL_EXPR_MASQ_REG_PROTO_MAX, NFT_REG_2);
        }
        return nbd_nft_add(r, e);
}

/* dnat ip (ip6) to GUEST:PORT */
static int dnat(struct nftnl_rule *r, const struct nbd_net_forward *f)
{
        uint16_t port = htons(f->guest_port);
        struct nftnl_expr *e;
        int ret;

        if ((ret = imm_data(r, NFT_REG_1, f->guest, f->family == 4 ? 4 : 16)) ||
            (ret = imm_data(r, NFT_REG_2, &port, 2)))
                return ret;
        if (!(e = nftnl_expr_alloc("nat")))
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, f->family == 4 ? NFPROTO_IPV4 : NFPROTO_IPV6);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, NFT_REG_2);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
        return nbd_nft_add(r, e);
}

/* ---- rules ---- */

struct build {
        const struct nbd_net_spec *s;
        struct nbd_net_compiled *c;
        char names[NBD_NET_CHAINS][NBD_FW_OWNER_MAX + 16];
};

/* A new rule at the end of chain k (into *ret, pushed already). */
static int rule(struct build *b, unsigned k, struct nftnl_rule **ret)
{
        struct nbd_net_compiled *c = b->c;
        struct nftnl_rule **grown, *r = nftnl_rule_alloc();

        if (!r)
                return -ENOMEM;
        grown = realloc(c->rules[k], (c->n_rules[k] + 1) * sizeof(*grown));
        if (!grown || nftnl_rule_set_str(r, NFTNL_RULE_TABLE, NBD_NET_TABLE) < 0 ||
            nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, b->names[k]) < 0) {
                c->rules[k] = grown ? grown : c->rules[k];
                nftnl_rule_free(r);
                return -ENOMEM;
        }
        nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
        c->rules[k] = grown;
        c->rules[k][c->n_rules[k]++] = r;
        c->total++;
        *ret = r;
        return 0;
}

/* Whether subnet n is masqueraded (libvirt's masquerading rules, not its
 * routing ones: nftablesAddIPSpecificFirewallRules). */
static bool masqueraded(const struct nbd_net_spec *s, const struct nbd_net_subnet *n)
{
        return s->mode == NBD_NET_NAT && (n->family == 4 || s->nat_ipv6);
}

static bool has_family(const struct nbd_net_spec *s, int family)
{
        for (size_t i = 0; i < s->n_subnets; i++)
                if (s->subnets[i].family == family)
                        return true;
        return false;
}

/* guest_cross, and the catch-all rejects (ifkey: which end is the bridge). */
static int bridge_rule(struct build *b, int family, bool cross, uint32_t key)
{
        struct nftnl_rule *r;
        int ret;

        if ((ret = rule(b, NBD_NET_FORWARD, &r)) || (ret = nfproto(r, family)))
                return ret;
        if (cross) {
                if ((ret = ifname(r, NFT_META_IIFNAME, b->s->bridge)) ||
                    (ret = ifname(r, NFT_META_OIFNAME, b->s->bridge)))
                        return ret;
        } else if ((ret = ifname(r, key, b->s->bridge))) {
                return ret;
        }
        if ((ret = nbd_nft_counter(r)))
                return ret;
        return cross ? nbd_nft_verdict(r, NF_ACCEPT, NULL) : nbd_nft_reject(r);
}

static int forward_in(struct build *b, const struct nbd_net_subnet *n)
{
        const struct nbd_net_spec *s = b->s;
        struct nftnl_rule *r;
        int ret;

        if ((ret = rule(b, NBD_NET_FORWARD, &r)) || (ret = nfproto(r, n->family)))
                return ret;
        if (s->forward_dev[0] && (ret = ifname(r, NFT_META_IIFNAME, s->forward_dev)))
                return ret;
        if ((ret = ifname(r, NFT_META_OIFNAME, s->bridge)) || (ret = subnet(r, n, true, false)))
                return ret;
        /* nat: replies only; route (and IPv6 of a nat network without
         * nat_ipv6): anything. */
        if (masqueraded(s, n) &&
            (ret = ct_bits(r, NFT_CT_STATE,
                           NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED))))
                return ret;
        return (ret = nbd_nft_counter(r)) ? ret : nbd_nft_verdict(r, NF_ACCEPT, NULL);
}

static int forward_out(struct build *b, const struct nbd_net_subnet *n)
{
        const struct nbd_net_spec *s = b->s;
        struct nftnl_rule *r;
        int ret;

        if ((ret = rule(b, NBD_NET_FORWARD, &r)) || (ret = nfproto(r, n->family)) ||
            (ret = ifname(r, NFT_META_IIFNAME, s->bridge)) || (ret = subnet(r, n, false, false)))
                return ret;
        if (s->forward_dev[0] && (ret = ifname(r, NFT_META_OIFNAME, s->forward_dev)))
                return ret;
        return (ret = nbd_nft_counter(r)) ? ret : nbd_nft_verdict(r, NF_ACCEPT, NULL);
}

static int forward_dnat_in(struct build *b, const struct nbd_net_forward *f)
{
        struct nftnl_rule *r;
        int ret;

        if ((ret = rule(b, NBD_NET_FORWARD, &r)) || (ret = nfproto(r, f->family)) ||
            (ret = ifname(r, NFT_META_OIFNAME, b->s->bridge)) ||
            (ret = addr(r, f->family, true, f->guest, NULL, false)) ||
            (ret = l4proto(r, f->proto)) || (ret = dport(r, f->guest_port)) ||
            (ret = ct_bits(r, NFT_CT_STATUS, IPS_DST_NAT)) || (ret = nbd_nft_counter(r)))
                return ret;
        return nbd_nft_verdict(r, NF_ACCEPT, NULL);
}

static int compile_forward(struct build *b)
{
        const struct nbd_net_spec *s = b->s;
        int fams[2] = {4, 6}, ret = 0;
        size_t nf = has_family(s, 6) || s->ipv6_nogw ? 2 : 1;

        if (s->mode == NBD_NET_OPEN)
                return 0;
        for (size_t i = 0; ret == 0 && i < nf; i++)
                ret = bridge_rule(b, fams[i], true, 0);
        for (size_t i = 0; ret == 0 && i < s->n_forwards; i++)
                ret = forward_dnat_in(b, &s->forwards[i]);
        for (size_t i = 0; ret == 0 && s->mode != NBD_NET_ISOLATED && i < s->n_subnets; i++)
                ret = forward_in(b, &s->subnets[i]);
        for (size_t i = 0; ret == 0 && i < nf; i++)
                ret = bridge_rule(b, fams[i], false, NFT_META_OIFNAME);
        for (size_t i = 0; ret == 0 && s->mode != NBD_NET_ISOLATED && i < s->n_subnets; i++)
                ret = forward_out(b, &s->subnets[i]);
        for (size_t i = 0; ret == 0 && i < nf; i++)
                ret = bridge_rule(b, fams[i], false, NFT_META_IIFNAME);
        return ret;
}

/* One of guest_nat's rules for subnet n: proto 0 any; dst NULL: != NET
 * and masquerade, else == dst and return. */
static int nat_rule(struct build *b, const struct nbd_net_subnet *n, uint8_t proto,
                    const struct nbd_net_subnet *dst)
{
        const struct nbd_net_spec *s = b->s;
        uint16_t min = s->nat_port_min ? s->nat_port_min : 1024;
        uint16_t max = s->nat_port_min ? s->nat_port_max : 65535;
        struct nftnl_rule *r;
        int ret;

        if ((ret = rule(b, NBD_NET_POSTROUTING, &r)) || (ret = nfproto(r, n->family)))
                return ret;
        if (proto && (ret = l4proto(r, proto)))
                return ret;
        if ((ret = subnet(r, n, false, false)) ||
            (ret = dst ? subnet(r, dst, true, false) : subnet(r, n, true, true)))
                return ret;
        if (s->forward_dev[0] && (ret = ifname(r, NFT_META_OIFNAME, s->forward_dev)))
                return ret;
        if ((ret = nbd_nft_counter(r)))
                return ret;
        if (dst)
                return nbd_nft_verdict(r, NFT_RETURN, NULL);
        return proto ? masquerade(r, min, max) : masquerade(r, 0, 0);
}

static int compile_nat(struct build *b)
{
        static const struct nbd_net_subnet mcast = {4, {224, 0, 0, 0}, {255, 255, 255, 0}, 24};
        static const struct nbd_net_subnet mcast6 = {6, {0xff, 0x02}, {0xff, 0xff}, 16};
        static const struct nbd_net_subnet bcast = {
                4, {255, 255, 255, 255}, {255, 255, 255, 255}, 32};
        const struct nbd_net_spec *s = b->s;
        int ret = 0;

        for (size_t i = 0; ret == 0 && i < s->n_subnets; i++) {
                const struct nbd_net_subnet *n = &s->subnets[i];
                bool v4 = n->family == 4;
                if (!masqueraded(s, n))
                        continue;
                if ((ret = nat_rule(b, n, 0, v4 ? &mcast : &mcast6)) ||
                    (v4 && (ret = nat_rule(b, n, 0, &bcast))) ||
                    (ret = nat_rule(b, n, IPPROTO_TCP, NULL)) ||
                    (ret = nat_rule(b, n, IPPROTO_UDP, NULL)))
                        return ret;
                ret = nat_rule(b, n, 0, NULL);
        }
        return ret;
}

static int compile_dnat(struct build *b, unsigned k)
{
        const struct nbd_net_spec *s = b->s;
        struct nftnl_rule *r;
        int ret = 0;

        for (size_t i = 0; ret == 0 && i < s->n_forwards; i++) {
                const struct nbd_net_forward *f = &s->forwards[i];
                if ((ret = rule(b, k, &r)) || (ret = nfproto(r, f->family)))
                        return ret;
                ret = f->has_outside ? addr(r, f->family, true, f->outside, NULL, false)
                                     : fib_local(r);
                if (ret || (ret = l4proto(r, f->proto)) || (ret = dport(r, f->outside_port)) ||
                    (ret = nbd_nft_counter(r)))
                        return ret;
                ret = dnat(r, f);
        }
        return ret;
}

/* ---- chains ---- */

int nbd_net_chain_name(const char *owner, unsigned k, char *out, size_t size)
{
        int n = snprintf(out, size, "%s/%s", owner, nbd_net_chain_names[k]);

        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static const struct {
        const char *type;
        uint32_t hook;
        int32_t prio;
} hooks[NBD_NET_CHAINS] = {
        {"filter", NF_INET_FORWARD, 0}, /* libvirt's forward chain */
        {"nat", NF_INET_POST_ROUTING, 100}, /* srcnat, libvirt's guest_nat */
        {"nat", NF_INET_PRE_ROUTING, -100}, /* dstnat, netavark's */
        {"nat", NF_INET_LOCAL_OUT, -100},
};

int nbd_net_hook_kind(uint32_t hooknum, bool nat)
{
        for (unsigned k = 0; k < NBD_NET_CHAINS; k++)
                if (hooks[k].hook == hooknum && (strcmp(hooks[k].type, "nat") == 0) == nat)
                        return (int)k;
        return -1;
}

static int make_chain(struct build *b, unsigned k, const char *comment)
{
        struct nftnl_chain *c = nftnl_chain_alloc();

        if (!c)
                return -ENOMEM;
        b->c->chains[k] = c;
        nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hooks[k].hook);
        nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, hooks[k].prio);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
        if (nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NBD_NET_TABLE) < 0 ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, b->names[k]) < 0 ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, hooks[k].type) < 0)
                return -ENOMEM;
        return nbd_nft_chain_comment(c, comment);
}

void nbd_net_compiled_free(struct nbd_net_compiled *c)
{
        for (unsigned k = 0; k < NBD_NET_CHAINS; k++) {
                if (c->chains[k])
                        nftnl_chain_free(c->chains[k]);
                for (size_t i = 0; i < c->n_rules[k]; i++)
                        nftnl_rule_free(c->rules[k][i]);
                free(c->rules[k]);
        }
        memset(c, 0, sizeof(*c));
}

int nbd_net_compile(const struct nbd_net_spec *s, const char *hash, struct nbd_net_compiled *ret)
{
        struct nbd_net_compiled c = {0};
        struct build b = {s, &c, {{0}}};
        char comment[256];
        int r = 0;

        for (unsigned k = 0; r == 0 && k < NBD_NET_CHAINS; k++)
                r = nbd_net_chain_name(s->owner, k, b.names[k], sizeof(b.names[k]));
        if (r == 0 && !(r = compile_forward(&b)) && !(r = compile_nat(&b)) &&
            !(r = compile_dnat(&b, NBD_NET_PREROUTING)))
                r = compile_dnat(&b, NBD_NET_OUTPUT);
        snprintf(comment, sizeof(comment), NBD_NET_COMMENT_TAG " %s %s %s %u uid=%u", hash,
                 s->bridge, nbd_net_mode_names[s->mode], c.total, (unsigned)s->uid);
        /* The forward chain is the owner even when it has no rule (open). */
        for (unsigned k = 0; r == 0 && k < NBD_NET_CHAINS; k++)
                if (k == NBD_NET_FORWARD || c.n_rules[k])
                        r = make_chain(&b, k, comment);
        if (r < 0) {
                nbd_net_compiled_free(&c);
                return r;
        }
        *ret = c;
        return 0;
}

int nbd_net_parse_comment(const char *text, struct nbd_net_comment *ret)
{
        struct nbd_net_comment c = {0};
        char tag[16];

        if (sscanf(text, "%15s %32s %15s %15s %u uid=%u", tag, c.hash, c.bridge, c.mode, &c.rules,
                   &c.uid) != 6 ||
            strcmp(tag, NBD_NET_COMMENT_TAG) != 0 || strlen(c.hash) != NBD_FW_HASH_HEX - 1)
                return -EINVAL;
        *ret = c;
        return 0;
}
