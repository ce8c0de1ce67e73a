/* The nftables compiler; see fw_compile.h for the layout it makes. */
#include "fw_compile.h"
#include "fw_text.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libnftnl/expr.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (ret == 0 && r->l4proto.set) {
                uint8_t proto = (uint8_t)r->l4proto.v;
                ret = load_meta(nr, NFT_META_L4PROTO);
                if (ret == 0)
                        ret = cmp_reg(nr, NFT_CMP_EQ, &proto, 1);
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
struct nftnl_rule *nbd_fw_new_rule(const char *chain)
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
        struct nftnl_rule *nr = nbd_fw_new_rule(chain);
        int ret;

        if (!nr)
                return NULL;
        ret = compile_matches(nr, r);
        if (ret == 0)
                ret = r->verdict == NBD_FW_V_REJECT ? add_reject(nr)
                                                    : add_verdict(nr, verdicts[r->verdict], NULL);
        ret = ret ?: nbd_fw_rule_udata(nr, r);
        if (ret < 0) {
                nftnl_rule_free(nr);
                return NULL;
        }
        return nr;
}

/* ---- an owner's chains and rules, in the order they are sent ---- */

int nbd_fw_items_push(struct nbd_fw_items *it, struct nbd_fw_item x)
{
        if (it->n == it->cap) {
                size_t ncap = it->cap ? it->cap * 2 : 64;
                struct nbd_fw_item *p = realloc(it->v, ncap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                it->v = p;
                it->cap = ncap;
        }
        it->v[it->n++] = x;
        return 0;
}

void nbd_fw_items_clear(struct nbd_fw_items *it, size_t from)
{
        for (size_t i = from; i < it->n; i++) {
                if (it->v[i].chain)
                        nftnl_chain_free(it->v[i].chain);
                if (it->v[i].rule)
                        nftnl_rule_free(it->v[i].rule);
        }
        it->n = from;
}

int nbd_fw_items_append(struct nbd_fw_items *to, struct nbd_fw_items *from)
{
        for (size_t i = 0; i < from->n; i++) {
                if (nbd_fw_items_push(to, from->v[i]) < 0) {
                        /* What was moved is to's; free the rest. */
                        memmove(from->v, from->v + i, (from->n - i) * sizeof(*from->v));
                        from->n -= i;
                        return -ENOMEM;
                }
        }
        from->n = 0;
        return 0;
}

/* NULL when out of memory, as nbd_fw_new_rule(). */
struct nftnl_chain *nbd_fw_new_chain(const char *name)
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
        if (!nftnl_udata_put_strz(u, NBD_FW_UDATA_CHAIN_COMMENT, text))
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
        struct nftnl_chain *c = nbd_fw_new_chain(name);

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

const char *const nbd_fw_dir_names[2] = {"from", "to"};

/* Push a chain just made; it is freed if it was not made whole or cannot
 * be pushed. */
static int push_chain(struct nbd_fw_items *it, struct nftnl_chain *c, size_t owner_idx)
{
        if (c &&
            nbd_fw_items_push(it, (struct nbd_fw_item){NBD_FW_ITEM_CHAIN, c, NULL, owner_idx}) == 0)
                return 0;
        if (c)
                nftnl_chain_free(c);
        return -ENOMEM;
}

/* Compile one owner into items (group chains and their rules first, then
 * the base chains and their jumps) and its hash. The base chains' comment
 * carries the hash, so it is built last. */
int nbd_fw_compile_owner(const struct nbd_fw_owner_spec *s, size_t owner_idx,
                         struct nbd_fw_items *it, const char *hash, unsigned rules,
                         struct nbd_err *e)
{
        size_t start = it->n;
        char name[256], comment[128];
        struct nftnl_rule *jumps[2][64];
        size_t n_jumps[2] = {0, 0};
        int ret = -ENOMEM;

        if (s->n_groups > 64) {
                return nbd_err_set(e, -E2BIG, "owner %s: %zu groups; at most 64", s->owner,
                                   s->n_groups);
        }
        for (size_t g = 0; g < s->n_groups; g++) {
                const struct nbd_fw_group *grp = &s->groups[g];
                for (int d = 0; d < 2; d++) {
                        bool any = false;
                        for (size_t i = 0; i < grp->n_rules; i++)
                                any |= grp->rules[i].dir == (enum nbd_fw_dir)d;
                        if (!any)
                                continue;
                        snprintf(name, sizeof(name), "%s/%s/%s", s->owner, nbd_fw_dir_names[d],
                                 grp->name);
                        if (push_chain(it, nbd_fw_new_chain(name), owner_idx) < 0)
                                goto fail_jumps;
                        for (size_t i = 0; i < grp->n_rules; i++) {
                                struct nftnl_rule *r;
                                if (grp->rules[i].dir != (enum nbd_fw_dir)d)
                                        continue;
                                r = compile_rule(name, &grp->rules[i]);
                                if (!r || nbd_fw_items_push(
                                                  it, (struct nbd_fw_item){NBD_FW_ITEM_RULE, NULL,
                                                                           r, owner_idx}) < 0) {
                                        if (r)
                                                nftnl_rule_free(r);
                                        goto fail_jumps;
                                }
                        }
                        /* Counted at once, so that fail_jumps frees it. */
                        jumps[d][n_jumps[d]++] = nbd_fw_new_rule("");
                        if (!jumps[d][n_jumps[d] - 1] ||
                            add_verdict(jumps[d][n_jumps[d] - 1], NFT_JUMP, name) < 0)
                                goto fail_jumps;
                }
        }
        for (int d = 0; d < 2; d++) {
                snprintf(name, sizeof(name), "%s/%s", s->owner, nbd_fw_dir_names[d]);
                snprintf(comment, sizeof(comment), "netbroker %s %s %u uid=%u", hash, s->ifname,
                         rules, (unsigned)s->uid);
                if (push_chain(it,
                               new_base_chain(name, s->ifname, (d == 0) != s->reversed, comment),
                               owner_idx) < 0)
                        goto fail_jumps;
                for (size_t j = 0; j < n_jumps[d]; j++) {
                        if (nftnl_rule_set_str(jumps[d][j], NFTNL_RULE_CHAIN, name) < 0 ||
                            nbd_fw_items_push(it, (struct nbd_fw_item){NBD_FW_ITEM_RULE, NULL,
                                                                       jumps[d][j], owner_idx}) < 0)
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
        nbd_fw_items_clear(it, start);
        return nbd_err_set(e, ret, "out of memory compiling the rules of owner %s", s->owner);
}

int nbd_fw_hash(const struct nbd_fw_owner_spec *s, char hash[NBD_FW_HASH_HEX], unsigned *ret_rules,
                struct nbd_err *e)
{
        struct nbd_fw_items it = {0};
        int r;

        nbd_fw_model_hash(s, hash, ret_rules);
        /* Compile too: what cannot be compiled has no hash. */
        r = nbd_fw_compile_owner(s, 0, &it, hash, *ret_rules, e);
        nbd_fw_items_clear(&it, 0);
        free(it.v);
        return r;
}

/* 0, or -ENOMEM when the batch needed a page it could not have (the
 * message would be overwritten by the next: a transaction short of it). */
int nbd_fw_item_put(struct nftnl_batch *b, const struct nbd_fw_item *it, uint32_t seq, bool ack)
{
        uint16_t flags = ack ? NLM_F_ACK : 0;
        struct nlmsghdr *nlh;

        switch (it->kind) {
        case NBD_FW_ITEM_DELCHAIN:
                nlh = nftnl_chain_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_DELCHAIN,
                                                  NFPROTO_NETDEV, flags, seq);
                nftnl_chain_nlmsg_build_payload(nlh, it->chain);
                break;
        case NBD_FW_ITEM_CHAIN:
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
