// SPDX-License-Identifier: LGPL-2.1-or-later
/* The nftables compiler; see fw_compile.h for the layout it makes. */
#include "fw_compile.h"
#include "fw_text.h"
#include "nft_expr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- compiling to nftnl expressions ---- */

/* The hash ensure compares is in the base chains' comments: a chain
 * without it would be rebuilt by every ensure. */
_Static_assert(NBD_FW_UDATA_CHAIN_COMMENT == 0, "nbd_nft_chain_comment() writes udata type 0");

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
        int ret = nbd_nft_payload(r, NFT_REG_1, base, off, len);

        if (ret == 0 && mask && !all_ones(mask, len))
                ret = nbd_nft_mask(r, mask, len);
        if (ret == 0)
                ret = nbd_nft_cmp(r, neg ? NFT_CMP_NEQ : NFT_CMP_EQ, val, len);
        return ret;
}

/* The outer ether type: the frame's bytes 12-13 as on the wire. The kernel
 * puts a tag it took off (vlan_tci) back for link-layer loads, so a tagged
 * frame is 0x8100 (0x88a8) here, as ebtables' -p sees it, and never the
 * type it carries (meta protocol would be that inner type). */
static int load_outer_type(struct nftnl_rule *r)
{
        return nbd_nft_payload(r, NFT_REG_1, NFT_PAYLOAD_LL_HEADER, 12, 2);
}

static int cmp_u16(struct nftnl_rule *r, uint16_t v, bool neg)
{
        uint16_t be = htons(v);

        return nbd_nft_cmp(r, neg ? NFT_CMP_NEQ : NFT_CMP_EQ, &be, 2);
}

static int cmp_u8(struct nftnl_rule *r, uint8_t v, bool neg)
{
        return nbd_nft_cmp(r, neg ? NFT_CMP_NEQ : NFT_CMP_EQ, &v, 1);
}

/* reg1 in [lo, hi] (big-endian bytes compare in numeric order). */
static int range_reg(struct nftnl_rule *r, const void *lo, const void *hi, uint32_t len, bool neg)
{
        struct nftnl_expr *e = nftnl_expr_alloc("range");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_RANGE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_RANGE_OP, neg ? NFT_RANGE_NEQ : NFT_RANGE_EQ);
        nftnl_expr_set_data(e, NFTNL_EXPR_RANGE_FROM_DATA, lo, len);
        nftnl_expr_set_data(e, NFTNL_EXPR_RANGE_TO_DATA, hi, len);
        return nbd_nft_add(r, e);
}

static int match_u16(struct nftnl_rule *r, uint32_t base, uint32_t off, uint16_t v, bool neg)
{
        int ret = nbd_nft_payload(r, NFT_REG_1, base, off, 2);

        return ret ? ret : cmp_u16(r, v, neg);
}

static int match_port(struct nftnl_rule *r, uint32_t base, uint32_t off, const uint16_t range[2],
                      bool neg)
{
        uint16_t lo = htons(range[0]), hi = htons(range[1] ? range[1] : range[0]);
        int ret = nbd_nft_payload(r, NFT_REG_1, base, off, 2);

        if (ret == 0 && lo == hi)
                return nbd_nft_cmp(r, neg ? NFT_CMP_NEQ : NFT_CMP_EQ, &lo, 2);
        if (ret == 0 && neg)
                return range_reg(r, &lo, &hi, 2, true);
        if (ret == 0)
                ret = nbd_nft_cmp(r, NFT_CMP_GTE, &lo, 2);
        return ret ? ret : nbd_nft_cmp(r, NFT_CMP_LTE, &hi, 2);
}

/* An address: a prefix (masked compare) or a range. */
static int match_ip(struct nftnl_rule *r, uint32_t off, const struct nbd_fw_ip *ip)
{
        uint32_t len = ip->family == 4 ? 4 : 16;
        int ret;

        if (!ip->is_range)
                return match_bytes(r, NFT_PAYLOAD_NETWORK_HEADER, off, len, ip->addr, ip->mask,
                                   ip->neg);
        ret = nbd_nft_payload(r, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, off, len);
        return ret ? ret : range_reg(r, ip->addr, ip->mask, len, ip->neg);
}

/* ---- one model rule's matches ----
 *
 * Each match is ebtables' (the kernel's ebt_*.c, as ebtables-nft runs
 * them): see netbroker-protocol(7) for the few places this differs. */

/* The outer type the rule needs (0: none), as nbd_fw_rule_check knows it. */
static uint16_t implied_type(const struct nbd_fw_rule *r)
{
        int family = nbd_fw_rule_family(r);

        if (nbd_fw_rule_is_arp(r))
                return r->ether_type.set && !r->ether_type.neg && r->ether_type.v == 0x8035
                               ? 0x8035
                               : 0x0806;
        if (r->vlan_id.set || r->vlan_encap.set)
                return 0x8100;
        return family == 4 ? 0x0800 : family == 6 ? 0x86dd : 0;
}

static int match_l2(struct nftnl_rule *nr, const struct nbd_fw_rule *r)
{
        uint16_t want = implied_type(r);
        bool any_ip = !want && nbd_fw_rule_is_ip(r);
        int ret = 0;

        /* The type first: the later loads of the network header depend on it. */
        if (r->ether_type.set || want || any_ip)
                ret = load_outer_type(nr);
        if (ret == 0 && r->ether_type.set)
                ret = cmp_u16(nr, (uint16_t)r->ether_type.v, r->ether_type.neg);
        if (ret == 0 && want && !(r->ether_type.set && !r->ether_type.neg))
                ret = cmp_u16(nr, want, false);
        /* IP of either family (a protocol without an address or type, which
         * ebtables cannot say): any untagged frame; meta l4proto below
         * needs IPv4 or IPv6. */
        if (ret == 0 && any_ip)
                ret = cmp_u16(nr, 0x8100, true);
        if (ret == 0 && any_ip)
                ret = cmp_u16(nr, 0x88a8, true);
        if (ret == 0 && r->ether_src.set)
                ret = match_bytes(nr, NFT_PAYLOAD_LL_HEADER, 6, 6, r->ether_src.addr,
                                  r->ether_src.mask, r->ether_src.neg);
        if (ret == 0 && r->ether_dst.set)
                ret = match_bytes(nr, NFT_PAYLOAD_LL_HEADER, 0, 6, r->ether_dst.addr,
                                  r->ether_dst.mask, r->ether_dst.neg);
        /* ebt_vlan: the tag as on the wire (put back for LL loads). */
        if (ret == 0 && r->vlan_id.set) {
                uint16_t vid = htons((uint16_t)r->vlan_id.v);
                const uint8_t vmask[2] = {0x0f, 0xff};
                ret = match_bytes(nr, NFT_PAYLOAD_LL_HEADER, 14, 2, (uint8_t *)&vid, vmask,
                                  r->vlan_id.neg);
        }
        if (ret == 0 && r->vlan_encap.set)
                ret = match_u16(nr, NFT_PAYLOAD_LL_HEADER, 16, (uint16_t)r->vlan_encap.v,
                                r->vlan_encap.neg);
        return ret;
}

/* ebt_arp: operation and types compared as they are; IP fields only for
 * protocol type IPv4 with 4-byte addresses, MAC fields only for hardware
 * type Ethernet with 6-byte ones (both fail even when negated). The
 * addresses are read at fixed offsets, so the IP fields (and the target
 * MAC) need the other length to be 6 (4) too: ebt_arp reads them behind
 * addresses of any length. */
/* ebt_arp's gratuitous: the sender's IP is the target's (its header
 * checks are match_arp's, as for the IP fields). nft compares a field with
 * constants only, so byte by byte: the pair (sender byte i . target byte
 * i), each padded to a register, is looked up in NBD_FW_SET_SAME_BYTE.
 * Equal: all four pairs found. Not equal: some pair not found, which is 4
 * disjoint alternatives (nbd_fw_rule_alts): alternative k has the last k
 * bytes equal and the one before them differing (match_arp makes the 5th,
 * nbd_fw_arp_odd_hlen_alt's). The last byte first:
 * every alternative reads the target's last byte, so a packet too short
 * to hold both addresses never matches, as in ebt_arp, negated or not. */
static int match_gratuitous(struct nftnl_rule *nr, bool neg, unsigned alt)
{
        unsigned equal = neg ? alt : 4; /* pairs found before the one that is not */
        int ret = 0;

        for (unsigned k = 0; ret == 0 && k < 4 && k <= equal; k++) {
                struct nftnl_expr *e;
                ret = nbd_nft_payload(nr, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, 17 - k, 1);
                if (ret == 0)
                        ret = nbd_nft_payload(nr, NFT_REG32_01, NFT_PAYLOAD_NETWORK_HEADER, 27 - k,
                                              1);
                if (ret < 0)
                        break;
                if (!(e = nftnl_expr_alloc("lookup")))
                        return -ENOMEM;
                nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
                if (k == equal)
                        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
                if (nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, NBD_FW_SET_SAME_BYTE) < 0) {
                        nftnl_expr_free(e);
                        return -ENOMEM;
                }
                ret = nbd_nft_add(nr, e);
        }
        return ret;
}

static int match_arp(struct nftnl_rule *nr, const struct nbd_fw_rule *r, unsigned alt)
{
        uint32_t nh = NFT_PAYLOAD_NETWORK_HEADER;
        const uint8_t eth_ip4[2] = {6, 4};
        bool ipf = r->arp_spa.set || r->arp_tpa.set || r->arp_gratuitous.set;
        bool macf = r->arp_sha.set || r->arp_tha.set;
        bool odd_hlen = nbd_fw_arp_odd_hlen_alt(r) && alt == 4;
        int ret = 0;

        if (r->arp_htype.set)
                ret = match_u16(nr, nh, 0, (uint16_t)r->arp_htype.v, r->arp_htype.neg);
        if (ret == 0 && r->arp_ptype.set)
                ret = match_u16(nr, nh, 2, (uint16_t)r->arp_ptype.v, r->arp_ptype.neg);
        if (ret == 0 && r->arp_op.set)
                ret = match_u16(nr, nh, 6, (uint16_t)r->arp_op.v, r->arp_op.neg);
        if (ret == 0 && macf)
                ret = match_u16(nr, nh, 0, 1, false);
        if (ret == 0 && ipf)
                ret = match_u16(nr, nh, 2, 0x0800, false);
        if (ret == 0 && odd_hlen) {
                /* nbd_fw_arp_odd_hlen_alt: IPv4 addresses behind hardware
                 * addresses that are not 6 bytes long */
                ret = match_bytes(nr, nh, 4, 1, &eth_ip4[0], NULL, true);
                if (ret == 0)
                        ret = match_bytes(nr, nh, 5, 1, &eth_ip4[1], NULL, false);
                return ret;
        }
        if (ret == 0 && (ipf || r->arp_tha.set))
                ret = match_bytes(nr, nh, 4, 2, eth_ip4, NULL, false);
        else if (ret == 0 && macf)
                ret = match_bytes(nr, nh, 4, 1, eth_ip4, NULL, false);
        if (ret == 0 && r->arp_sha.set)
                ret = match_bytes(nr, nh, 8, 6, r->arp_sha.addr, r->arp_sha.mask, r->arp_sha.neg);
        if (ret == 0 && r->arp_spa.set)
                ret = match_ip(nr, 14, &r->arp_spa);
        if (ret == 0 && r->arp_tha.set)
                ret = match_bytes(nr, nh, 18, 6, r->arp_tha.addr, r->arp_tha.mask, r->arp_tha.neg);
        if (ret == 0 && r->arp_tpa.set)
                ret = match_ip(nr, 24, &r->arp_tpa);
        if (ret == 0 && r->arp_gratuitous.set)
                ret = match_gratuitous(nr, r->arp_gratuitous.neg, alt);
        return ret;
}

static int match_l3(struct nftnl_rule *nr, const struct nbd_fw_rule *r)
{
        int ret = 0;

        if (r->ip_src.set)
                ret = match_ip(nr, r->ip_src.family == 4 ? 12 : 8, &r->ip_src);
        if (ret == 0 && r->ip_dst.set)
                ret = match_ip(nr, r->ip_dst.family == 4 ? 16 : 24, &r->ip_dst);
        if (ret == 0 && r->dscp.set) {
                uint8_t tos = (uint8_t)(r->dscp.v << 2);
                const uint8_t dmask = 0xfc;
                ret = match_bytes(nr, NFT_PAYLOAD_NETWORK_HEADER, 1, 1, &tos, &dmask, r->dscp.neg);
        }
        return ret;
}

/* The IPv6 fragment header's offset field: present, or 0 (first), or not. */
static int load_frag(struct nftnl_rule *r, bool present_only)
{
        struct nftnl_expr *e = nftnl_expr_alloc("exthdr");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_EXTHDR_DREG, NFT_REG_1);
        nftnl_expr_set_u8(e, NFTNL_EXPR_EXTHDR_TYPE, 44);
        nftnl_expr_set_u32(e, NFTNL_EXPR_EXTHDR_OP, NFT_EXTHDR_OP_IPV6);
        nftnl_expr_set_u32(e, NFTNL_EXPR_EXTHDR_OFFSET, present_only ? 0 : 2);
        nftnl_expr_set_u32(e, NFTNL_EXPR_EXTHDR_LEN, present_only ? 1 : 2);
        if (present_only)
                nftnl_expr_set_u32(e, NFTNL_EXPR_EXTHDR_FLAGS, NFT_EXTHDR_F_PRESENT);
        return nbd_nft_add(r, e);
}

enum frag_test { FRAG_NONE, FRAG_ABSENT, FRAG_FIRST, FRAG_LATER };

static int match_frag(struct nftnl_rule *r, enum frag_test t)
{
        const uint8_t off_mask[2] = {0xff, 0xf8}, zero[2] = {0, 0};
        int ret;

        if (t == FRAG_NONE)
                return 0;
        ret = load_frag(r, t == FRAG_ABSENT);
        if (ret == 0 && t == FRAG_ABSENT)
                return cmp_u8(r, 0, false);
        if (ret == 0)
                ret = nbd_nft_mask(r, off_mask, 2);
        return ret ? ret : nbd_nft_cmp(r, t == FRAG_FIRST ? NFT_CMP_EQ : NFT_CMP_NEQ, zero, 2);
}

/* ebt_ip6's protocol is the header after the extension headers, and 44 for
 * a fragment other than the first; meta l4proto looks through that
 * fragment header. So an IPv6 protocol match is one of a few alternatives
 * (nft rules with the same verdict, one after the other):
 *   P      : next header P | next header not P, l4proto P, no fragment
 *            header | l4proto P, fragment offset 0
 *   not P  : fragment offset not 0 | l4proto neither P nor 59, no fragment
 *            header | l4proto neither P nor 59, fragment offset 0
 *   44     : fragment offset not 0
 *   not 44 : no fragment header           | fragment offset 0
 * (59, no next header, makes ebt_ip6 fail even when negated.) meta l4proto
 * and the transport header exist only for a packet whose payload length
 * passes the kernel's validation; ebt_ip6 does not look at it, so "next
 * header P" (no extension header) reads the ports behind the 40-byte
 * header without either (v6_direct).
 * No frame matches two alternatives of one rule: a rule's counter counts
 * it once, and a guard's jump runs its group once (meta l4proto of a later
 * fragment is its fragment header's next header, so "l4proto neither P nor
 * 59" alone would also match later fragments).
 * nbd_fw_rule_alts() counts them. */
static bool v6_direct(const struct nbd_fw_rule *r, unsigned alt)
{
        return alt == 0 && r->l4proto.set && !r->l4proto.neg &&
               !nbd_fw_ipv6_ext_hdr(r->l4proto.v) && nbd_fw_rule_family(r) == 6;
}

static int match_v6_proto(struct nftnl_rule *nr, const struct nbd_fw_rule *r, unsigned alt)
{
        bool neg = r->l4proto.neg, frag = r->l4proto.v == 44;
        enum frag_test t;
        bool l4;
        int ret = 0;

        if (frag) {
                t = !neg ? FRAG_LATER : alt == 0 ? FRAG_ABSENT : FRAG_FIRST;
                l4 = false;
        } else if (!neg) {
                /* alt 0: the next header is P (v6_direct), unless P is one
                 * that ebt_ip6 skips (no such alternative then) */
                if (nbd_fw_ipv6_ext_hdr(r->l4proto.v))
                        alt++;
                ret = nbd_nft_payload(nr, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, 6, 1);
                if (ret == 0)
                        ret = cmp_u8(nr, (uint8_t)r->l4proto.v, alt != 0);
                if (ret < 0 || alt == 0)
                        return ret;
                t = alt == 1 ? FRAG_ABSENT : FRAG_FIRST;
                l4 = true;
        } else {
                t = alt == 0 ? FRAG_LATER : alt == 1 ? FRAG_ABSENT : FRAG_FIRST;
                l4 = alt != 0;
        }
        if (l4 || (frag && neg && alt == 0)) {
                /* Also where nothing else is loaded: the header chain parses. */
                ret = nbd_nft_meta(nr, NFT_META_L4PROTO);
                if (ret == 0 && l4)
                        ret = cmp_u8(nr, (uint8_t)r->l4proto.v, neg);
                if (ret == 0 && neg)
                        ret = cmp_u8(nr, 59, true);
        }
        return ret ? ret : match_frag(nr, t);
}

static int match_proto(struct nftnl_rule *nr, const struct nbd_fw_rule *r, unsigned alt)
{
        int family = nbd_fw_rule_family(r);
        int ret;

        if (!r->l4proto.set)
                return 0;
        if (family == 6)
                return match_v6_proto(nr, r, alt);
        if (family == 4) {
                /* ebt_ip: the header's protocol field, whatever the fragment. */
                ret = nbd_nft_payload(nr, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, 9, 1);
                return ret ? ret : cmp_u8(nr, (uint8_t)r->l4proto.v, r->l4proto.neg);
        }
        ret = nbd_nft_meta(nr, NFT_META_L4PROTO);
        return ret ? ret : cmp_u8(nr, (uint8_t)r->l4proto.v, r->l4proto.neg);
}

static bool has_l4_fields(const struct nbd_fw_rule *r)
{
        return r->sport[0] || r->dport[0] || r->has_icmp_type || r->tcp_flags_mask;
}

/* Ports, ICMP and TCP flags never match a fragment other than the first,
 * as in ebt_ip (negated or not). The kernel's fast path for short
 * transport header loads reads such a fragment's bytes as if they were
 * the header, so IPv4 says so itself: the fragment offset is 0. IPv6's
 * protocol match has already excluded later fragments.
 * The kernel has a transport header only for a packet whose lengths pass
 * its validation; ebt_ip reads behind the header whatever the total
 * length says. So IPv4 is two alternatives (nbd_fw_rule_alts), disjoint
 * by the first byte: 0x45 (version 4, a 20-byte header), read at network
 * header + 20 as ebt_ip does; anything else, read at the kernel's
 * transport header. */
static int match_l4(struct nftnl_rule *nr, const struct nbd_fw_rule *r, unsigned alt)
{
        const uint8_t off_mask[2] = {0x1f, 0xff}, zero[2] = {0, 0}, v4_20 = 0x45;
        bool v4 = has_l4_fields(r) && nbd_fw_rule_family(r) == 4;
        uint32_t th = NFT_PAYLOAD_TRANSPORT_HEADER, at = 0;
        int ret = 0;

        if (v4)
                ret = match_bytes(nr, NFT_PAYLOAD_NETWORK_HEADER, 6, 2, zero, off_mask, false);
        if (ret == 0 && v4)
                ret = match_bytes(nr, NFT_PAYLOAD_NETWORK_HEADER, 0, 1, &v4_20, NULL, alt != 0);
        if (v4 && alt == 0) {
                th = NFT_PAYLOAD_NETWORK_HEADER;
                at = 20;
        }
        if (v6_direct(r, alt)) {
                th = NFT_PAYLOAD_NETWORK_HEADER;
                at = 40;
        }
        if (ret == 0 && r->sport[0])
                ret = match_port(nr, th, at + 0, r->sport, r->sport_neg);
        if (ret == 0 && r->dport[0])
                ret = match_port(nr, th, at + 2, r->dport, r->dport_neg);
        if (ret == 0 && r->has_icmp_type) {
                const uint8_t tc[2] = {r->icmp_type, r->icmp_code};
                ret = match_bytes(nr, th, at + 0, r->has_icmp_code ? 2 : 1, tc, NULL, r->icmp_neg);
        }
        if (ret == 0 && r->tcp_flags_mask)
                ret = match_bytes(nr, th, at + 13, 1, &r->tcp_flags, &r->tcp_flags_mask,
                                  r->tcp_flags_neg);
        return ret;
}

static int compile_matches(struct nftnl_rule *nr, const struct nbd_fw_rule *r, unsigned alt)
{
        int ret = match_l2(nr, r);

        if (ret == 0)
                ret = match_arp(nr, r, alt);
        if (ret == 0)
                ret = match_l3(nr, r);
        if (ret == 0)
                ret = match_proto(nr, r, alt);
        return ret ? ret : match_l4(nr, r, alt);
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

/* Alternative `alt` (nbd_fw_rule_alts) of one model rule: its matches, a
 * counter, its verdict. -ENOMEM, or -E2BIG when its text does not fit the
 * rule's comment (a bug in the sizes). */
static int compile_rule(const char *chain, const struct nbd_fw_rule *r, unsigned alt,
                        struct nftnl_rule **ret_rule)
{
        static const int verdicts[] = {[NBD_FW_V_ACCEPT] = NF_ACCEPT,
                                       [NBD_FW_V_DROP] = NF_DROP,
                                       [NBD_FW_V_RETURN] = NFT_RETURN};
        struct nftnl_rule *nr = nbd_fw_new_rule(chain);
        int ret;

        if (!nr)
                return -ENOMEM;
        ret = compile_matches(nr, r, alt);
        if (ret == 0)
                ret = nbd_nft_counter(nr);
        if (ret == 0)
                ret = r->verdict == NBD_FW_V_REJECT
                              ? nbd_nft_reject(nr)
                              : nbd_nft_verdict(nr, verdicts[r->verdict], NULL);
        ret = ret ?: nbd_fw_rule_udata(nr, r);
        if (ret < 0) {
                nftnl_rule_free(nr);
                return ret;
        }
        *ret_rule = nr;
        return 0;
}

/* A group's jump, behind its guard's matches. */
static int compile_jump(const char *chain, const struct nbd_fw_group *g, const char *to,
                        unsigned alt, struct nftnl_rule **ret_rule)
{
        struct nftnl_rule *nr = nbd_fw_new_rule(chain);
        int ret;

        if (!nr)
                return -ENOMEM;
        ret = g->has_guard ? compile_matches(nr, &g->guard, alt) : 0;
        if (ret == 0)
                ret = nbd_nft_verdict(nr, NFT_JUMP, to);
        if (ret < 0) {
                nftnl_rule_free(nr);
                return ret;
        }
        *ret_rule = nr;
        return 0;
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
            nftnl_chain_set_str(c, NFTNL_CHAIN_DEV, ifname) < 0 ||
            nbd_nft_chain_comment(c, comment) < 0) {
                nftnl_chain_free(c);
                return NULL;
        }
        return c;
}

const char *const nbd_fw_dir_names[2] = {"from", "to"};

/* ---- the set gratuitous ARP looks up ---- */

/* The set's key as nft(8) describes one it makes itself (its udata: key
 * byte order, and "typeof @nh,112,8 . @nh,192,8", sender IP byte . target
 * IP byte), so `nft list ruleset` prints it and the rules that look it up,
 * and `nft -f` reads that back. nft's udata numbering (src/rule.h,
 * src/expression.h): key type typeof 3, a typeof's expression 0 and data
 * 1; concat 13, payload 7; a raw payload's desc, type, base, offset, len
 * 0-4; bases are nft's (network header 2, where the kernel's is 1). */
static int same_byte_udata(struct nftnl_set *set)
{
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        struct nftnl_udata *typeof_nest = NULL, *data = NULL, *sub = NULL, *payload = NULL;
        bool ok;
        int r = -ENOMEM;

        if (!u)
                return -ENOMEM;
        ok = nftnl_udata_put_u32(u, 0, 0) && (typeof_nest = nftnl_udata_nest_start(u, 3)) &&
             nftnl_udata_put_u32(u, 0, 13) && (data = nftnl_udata_nest_start(u, 1));
        for (uint32_t i = 0; ok && i < 2; i++) {
                ok = (sub = nftnl_udata_nest_start(u, (uint8_t)i)) &&
                     nftnl_udata_put_u32(u, 0, 7) && (payload = nftnl_udata_nest_start(u, 1)) &&
                     nftnl_udata_put_u32(u, 0, 0) && nftnl_udata_put_u32(u, 1, 0) &&
                     nftnl_udata_put_u32(u, 2, 2 /* nft's network header */) &&
                     nftnl_udata_put_u32(u, 3, i ? 192 : 112) && nftnl_udata_put_u32(u, 4, 8);
                if (ok) {
                        nftnl_udata_nest_end(u, payload);
                        nftnl_udata_nest_end(u, sub);
                }
        }
        if (ok) {
                nftnl_udata_nest_end(u, data);
                nftnl_udata_nest_end(u, typeof_nest);
                if (nftnl_set_set_data(set, NFTNL_SET_USERDATA, nftnl_udata_buf_data(u),
                                       nftnl_udata_buf_len(u)) == 0)
                        r = 0;
        }
        nftnl_udata_buf_free(u);
        return r;
}

/* The set (elems false) or a copy carrying its 256 elements (elems true);
 * NULL when out of memory. Not constant: a second owner adding the same
 * elements finds them there (a constant set refuses elements once a rule
 * uses it). */
static struct nftnl_set *new_same_byte(bool elems)
{
        struct nftnl_set *set = nftnl_set_alloc();
        /* Two 1-byte integers, each padded to a 4-byte register. */
        uint8_t key[8] = {0};

        if (!set)
                return NULL;
        if (nftnl_set_set_str(set, NFTNL_SET_TABLE, NBD_FW_TABLE) < 0 ||
            nftnl_set_set_str(set, NFTNL_SET_NAME, NBD_FW_SET_SAME_BYTE) < 0)
                goto fail;
        nftnl_set_set_u32(set, NFTNL_SET_FAMILY, NFPROTO_NETDEV);
        if (!elems) {
                /* The kernel wants an id for a set, to be named by in its
                 * transaction; our references are by name. */
                nftnl_set_set_u32(set, NFTNL_SET_ID, 1);
                nftnl_set_set_u32(set, NFTNL_SET_FLAGS, 0);
                /* nft's concat of two "integer" (type 4): (4 << 6) | 4 */
                nftnl_set_set_u32(set, NFTNL_SET_KEY_TYPE, (4u << 6) | 4u);
                nftnl_set_set_u32(set, NFTNL_SET_KEY_LEN, sizeof(key));
                if (same_byte_udata(set) < 0)
                        goto fail;
                return set;
        }
        for (unsigned b = 0; b < 256; b++) {
                struct nftnl_set_elem *el = nftnl_set_elem_alloc();
                if (!el)
                        goto fail;
                key[0] = key[4] = (uint8_t)b;
                if (nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, key, sizeof(key)) < 0) {
                        nftnl_set_elem_free(el);
                        goto fail;
                }
                nftnl_set_elem_add(set, el);
        }
        return set;
fail:
        nftnl_set_free(set);
        return NULL;
}

static bool uses_same_byte(const struct nbd_fw_owner_spec *s)
{
        for (size_t g = 0; g < s->n_groups; g++) {
                if (s->groups[g].has_guard && s->groups[g].guard.arp_gratuitous.set)
                        return true;
                for (size_t i = 0; i < s->groups[g].n_rules; i++)
                        if (s->groups[g].rules[i].arp_gratuitous.set)
                                return true;
        }
        return false;
}

bool nbd_fw_uses_same_byte(const struct nbd_fw_owner_spec *s)
{
        return uses_same_byte(s);
}

static int push_same_byte(struct nbd_fw_items *it, size_t owner_idx)
{
        int ret =
                nbd_fw_items_push(it, (struct nbd_fw_item){NBD_FW_ITEM_SET, NULL, NULL, owner_idx});

        return ret ? ret
                   : nbd_fw_items_push(
                             it, (struct nbd_fw_item){NBD_FW_ITEM_SETELEMS, NULL, NULL, owner_idx});
}

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

/* ---- an owner's layout ----
 *
 * A group's rules run in priority order (equal priorities keep the order
 * given). A base chain holds, in priority order, the jump to each group
 * that has rules in its direction (at the group's priority) and the rules
 * of the root groups (at their own); equal priorities keep the order of
 * the groups, and within a root group of its rules, except that a jump
 * goes before a root rule of the same priority, as libvirt puts it. With
 * every priority 0
 * and no root group, that is the groups' jumps in the order given. */

struct entry {
        int prio;
        size_t seq; /* order given: the tie-break */
        const struct nbd_fw_group *g;
        const struct nbd_fw_rule *r; /* NULL: the jump to g */
};

static int entry_cmp(const void *a, const void *b)
{
        const struct entry *x = a, *y = b;

        if (x->prio != y->prio)
                return x->prio < y->prio ? -1 : 1;
        /* libvirt's root chain: a jump before a rule of the same priority. */
        if (!x->r != !y->r)
                return x->r ? 1 : -1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool group_has(const struct nbd_fw_group *g, int d)
{
        for (size_t i = 0; i < g->n_rules; i++)
                if (g->rules[i].dir == (enum nbd_fw_dir)d)
                        return true;
        return false;
}

/* The entries of group g's chain (root: false) or of the base chain (root:
 * true, g NULL) in direction d, sorted; *ret NULL when there are none. */
static int entries(const struct nbd_fw_owner_spec *s, const struct nbd_fw_group *g, int d,
                   struct entry **ret, size_t *ret_n)
{
        size_t n = 0, cap = 0;
        struct entry *v;

        for (size_t k = 0; k < (g ? 1 : s->n_groups); k++)
                cap += g ? g->n_rules : s->groups[k].n_rules + 1;
        v = calloc(cap ? cap : 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t k = 0; k < (g ? 1 : s->n_groups); k++) {
                const struct nbd_fw_group *grp = g ? g : &s->groups[k];
                if (!g && !grp->root) {
                        if (group_has(grp, d)) {
                                v[n] = (struct entry){grp->priority, n, grp, NULL};
                                n++;
                        }
                        continue;
                }
                for (size_t i = 0; i < grp->n_rules; i++) {
                        if (grp->rules[i].dir != (enum nbd_fw_dir)d)
                                continue;
                        v[n] = (struct entry){grp->rules[i].priority, n, grp, &grp->rules[i]};
                        n++;
                }
        }
        qsort(v, n, sizeof(*v), entry_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}

static size_t entry_alts(const struct entry *x)
{
        if (x->r)
                return nbd_fw_rule_alts(x->r);
        return x->g->has_guard ? nbd_fw_rule_alts(&x->g->guard) : 1;
}

int nbd_fw_layout(const struct nbd_fw_owner_spec *s,
                  int (*chain)(const char *name, size_t rules, void *data), void *data)
{
        char name[256];
        struct entry *v;
        size_t n, rules;
        int ret = 0;

        for (size_t g = 0; ret == 0 && g < s->n_groups; g++)
                for (int d = 0; ret == 0 && d < 2; d++) {
                        if (s->groups[g].root || !group_has(&s->groups[g], d))
                                continue;
                        if ((ret = entries(s, &s->groups[g], d, &v, &n)) < 0)
                                return ret;
                        rules = 0;
                        for (size_t i = 0; i < n; i++)
                                rules += entry_alts(&v[i]);
                        free(v);
                        snprintf(name, sizeof(name), "%s/%s/%s", s->owner, nbd_fw_dir_names[d],
                                 s->groups[g].name);
                        ret = chain(name, rules, data);
                }
        for (int d = 0; ret == 0 && d < 2; d++) {
                if ((ret = entries(s, NULL, d, &v, &n)) < 0)
                        return ret;
                rules = 0;
                for (size_t i = 0; i < n; i++)
                        rules += entry_alts(&v[i]);
                free(v);
                snprintf(name, sizeof(name), "%s/%s", s->owner, nbd_fw_dir_names[d]);
                ret = chain(name, rules, data);
        }
        return ret;
}

static int push_rule(struct nbd_fw_items *it, struct nftnl_rule *r, size_t owner_idx)
{
        if (r &&
            nbd_fw_items_push(it, (struct nbd_fw_item){NBD_FW_ITEM_RULE, NULL, r, owner_idx}) == 0)
                return 0;
        if (r)
                nftnl_rule_free(r);
        return -ENOMEM;
}

/* Push the rules of sorted entries into chain `name`. */
static int push_entries(const struct nbd_fw_owner_spec *s, const struct entry *v, size_t n, int d,
                        const char *name, size_t owner_idx, struct nbd_fw_items *it)
{
        char to[256];

        for (size_t i = 0; i < n; i++)
                for (unsigned alt = 0; alt < entry_alts(&v[i]); alt++) {
                        struct nftnl_rule *r = NULL;
                        int ret;
                        if (v[i].r) {
                                ret = compile_rule(name, v[i].r, alt, &r);
                        } else {
                                snprintf(to, sizeof(to), "%s/%s/%s", s->owner, nbd_fw_dir_names[d],
                                         v[i].g->name);
                                ret = compile_jump(name, v[i].g, to, alt, &r);
                        }
                        if (ret < 0)
                                return ret;
                        if (push_rule(it, r, owner_idx) < 0)
                                return -ENOMEM;
                }
        return 0;
}

/* One chain and its rules: group g's (non-root), or the base chain (g NULL). */
static int push_chain_of(const struct nbd_fw_owner_spec *s, const struct nbd_fw_group *g, int d,
                         const char *comment, size_t owner_idx, struct nbd_fw_items *it)
{
        char name[256];
        struct entry *v = NULL;
        size_t n = 0;
        struct nftnl_chain *c;
        int ret;

        if (g)
                snprintf(name, sizeof(name), "%s/%s/%s", s->owner, nbd_fw_dir_names[d], g->name);
        else
                snprintf(name, sizeof(name), "%s/%s", s->owner, nbd_fw_dir_names[d]);
        c = g ? nbd_fw_new_chain(name)
              : new_base_chain(name, s->ifname, (d == 0) != s->reversed, comment);
        ret = push_chain(it, c, owner_idx);
        if (ret == 0)
                ret = entries(s, g, d, &v, &n);
        if (ret == 0)
                ret = push_entries(s, v, n, d, name, owner_idx, it);
        free(v);
        return ret;
}

/* Compile one owner into items (group chains and their rules first, then
 * the base chains and their rules) and its hash. The base chains' comment
 * carries the hash, so it is built last. */
int nbd_fw_compile_owner(const struct nbd_fw_owner_spec *s, size_t owner_idx,
                         struct nbd_fw_items *it, const char *hash, unsigned rules,
                         struct nbd_err *e)
{
        size_t start = it->n;
        char comment[128];
        int ret = 0;

        if (s->n_groups > 64) {
                return nbd_err_set(e, -E2BIG, "owner %s: %zu groups; at most 64", s->owner,
                                   s->n_groups);
        }
        snprintf(comment, sizeof(comment), "netbroker %s %s %u uid=%u", hash, s->ifname, rules,
                 (unsigned)s->uid);
        if (uses_same_byte(s))
                ret = push_same_byte(it, owner_idx);
        for (size_t g = 0; ret == 0 && g < s->n_groups; g++)
                for (int d = 0; ret == 0 && d < 2; d++)
                        if (!s->groups[g].root && group_has(&s->groups[g], d))
                                ret = push_chain_of(s, &s->groups[g], d, NULL, owner_idx, it);
        for (int d = 0; ret == 0 && d < 2; d++)
                ret = push_chain_of(s, NULL, d, comment, owner_idx, it);
        if (ret == 0)
                return 0;
        nbd_fw_items_clear(it, start);
        if (ret == -ENOMEM)
                return nbd_err_set(e, ret, "out of memory compiling the rules of owner %s",
                                   s->owner);
        return nbd_err_set(e, ret, "owner %s: a rule cannot be compiled: %s", s->owner,
                           ret == -E2BIG ? "its text does not fit the nftables comment"
                                         : strerror(-ret));
}

int nbd_fw_hash(const struct nbd_fw_owner_spec *s, char hash[NBD_FW_HASH_HEX], unsigned *ret_rules,
                struct nbd_err *e)
{
        struct nbd_fw_items it = {0};
        char h[NBD_FW_HASH_HEX];
        unsigned rules;
        int r;

        nbd_fw_model_hash(s, h, &rules);
        /* Compile too: what cannot be compiled has no hash. */
        r = nbd_fw_compile_owner(s, 0, &it, h, rules, e);
        nbd_fw_items_clear(&it, 0);
        free(it.v);
        if (r < 0)
                return r;
        memcpy(hash, h, sizeof(h));
        *ret_rules = rules;
        return 0;
}

/* The set's flush: a DELSETELEM naming the set and no element. The set
 * is not constant, so rules may keep using it (fw_same_byte.h). */
static int put_same_byte_flush(void *buf, uint16_t flags, uint32_t seq)
{
        struct nftnl_set *set = nftnl_set_alloc();
        struct nlmsghdr *nlh;

        if (!set || nftnl_set_set_str(set, NFTNL_SET_TABLE, NBD_FW_TABLE) < 0 ||
            nftnl_set_set_str(set, NFTNL_SET_NAME, NBD_FW_SET_SAME_BYTE) < 0) {
                if (set)
                        nftnl_set_free(set);
                return -ENOMEM;
        }
        nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_DELSETELEM, NFPROTO_NETDEV, flags, seq);
        nftnl_set_elems_nlmsg_build_payload(nlh, set);
        nftnl_set_free(set);
        return 0;
}

int nbd_fw_item_build(void *buf, const struct nbd_fw_item *it, uint32_t seq, bool ack)
{
        uint16_t flags = ack ? NLM_F_ACK : 0;
        struct nftnl_set *set;
        struct nlmsghdr *nlh;

        switch (it->kind) {
        case NBD_FW_ITEM_DELCHAIN:
                nlh = nftnl_chain_nlmsg_build_hdr(buf, NFT_MSG_DELCHAIN, NFPROTO_NETDEV, flags,
                                                  seq);
                nftnl_chain_nlmsg_build_payload(nlh, it->chain);
                break;
        case NBD_FW_ITEM_SET:
        case NBD_FW_ITEM_SETELEMS:
                if (!(set = new_same_byte(it->kind == NBD_FW_ITEM_SETELEMS)))
                        return -ENOMEM;
                nlh = nftnl_nlmsg_build_hdr(
                        buf, it->kind == NBD_FW_ITEM_SET ? NFT_MSG_NEWSET : NFT_MSG_NEWSETELEM,
                        NFPROTO_NETDEV, flags | NLM_F_CREATE, seq);
                if (it->kind == NBD_FW_ITEM_SET)
                        nftnl_set_nlmsg_build_payload(nlh, set);
                else
                        nftnl_set_elems_nlmsg_build_payload(nlh, set);
                nftnl_set_free(set);
                break;
        case NBD_FW_ITEM_SETFLUSH:
                if (put_same_byte_flush(buf, flags, seq) < 0)
                        return -ENOMEM;
                break;
        case NBD_FW_ITEM_CHAIN:
                nlh = nftnl_chain_nlmsg_build_hdr(buf, NFT_MSG_NEWCHAIN, NFPROTO_NETDEV,
                                                  flags | NLM_F_CREATE | NLM_F_EXCL, seq);
                nftnl_chain_nlmsg_build_payload(nlh, it->chain);
                break;
        default:
                nlh = nftnl_rule_nlmsg_build_hdr(buf, NFT_MSG_NEWRULE, NFPROTO_NETDEV,
                                                 flags | NLM_F_CREATE | NLM_F_APPEND, seq);
                nftnl_rule_nlmsg_build_payload(nlh, it->rule);
        }
        return 0;
}
