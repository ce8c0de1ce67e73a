// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall's model: an owner's groups of rules as parsed from a
 * request, the checks a rule must pass before it is compiled, and the
 * canonical hash of an owner's rules. Pure: no sockets, no libnftnl; what
 * the rules become in nftables is fw_compile.h's, the kernel fw_kernel.h's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define NBD_FW_TABLE "netbroker"
#define NBD_FW_OWNER_MAX 64
#define NBD_FW_GROUP_MAX 32
#define NBD_FW_HASH_HEX 33 /* 128 bits in hex, and a NUL */

enum nbd_fw_dir { NBD_FW_DIR_FROM, NBD_FW_DIR_TO };
enum nbd_fw_verdict { NBD_FW_V_ACCEPT, NBD_FW_V_DROP, NBD_FW_V_REJECT, NBD_FW_V_RETURN };

struct nbd_fw_mac {
        bool set, neg;
        uint8_t addr[6], mask[6];
};

struct nbd_fw_ip {
        bool set, neg;
        int family; /* 4 or 6 */
        bool is_range; /* addr..mask (the last address) instead of addr/mask */
        uint8_t addr[16], mask[16];
};

struct nbd_fw_num {
        bool set, neg;
        uint32_t v;
};

#define NBD_FW_COMMENT_MAX 256

/* One rule, parsed and checked (nbd_fw_rule_check) before compiling. The
 * wire's FwRule says what each field means (proto/netbroker.proto). */
struct nbd_fw_rule {
        enum nbd_fw_dir dir;
        enum nbd_fw_verdict verdict;
        int16_t priority; /* -1000..1000; equal ones keep their order */
        struct nbd_fw_mac ether_src, ether_dst, arp_sha, arp_tha;
        /* ether_type: the outer type, the tag's when the frame has one. */
        struct nbd_fw_num ether_type, vlan_id, vlan_encap, arp_op, arp_htype, arp_ptype;
        struct nbd_fw_num arp_gratuitous; /* v unused: set/neg only */
        /* ip_src/ip_dst: a prefix (addr/mask), or a range when is_range. */
        struct nbd_fw_ip arp_spa, arp_tpa, ip_src, ip_dst;
        struct nbd_fw_num l4proto; /* v 0..255 */
        struct nbd_fw_num dscp; /* v 0..63 */
        uint16_t sport[2], dport[2]; /* [0] = 0: any */
        bool sport_neg, dport_neg;
        bool has_icmp_type, has_icmp_code, icmp_neg;
        uint8_t icmp_type, icmp_code;
        uint8_t tcp_flags_mask, tcp_flags; /* mask 0: any */
        bool tcp_flags_neg;
        char comment[NBD_FW_COMMENT_MAX + 1];
};

/* One of libvirt's chains: entered through a jump at `priority` in the
 * base chain when the guard's matches hold (no guard: always), or, for a
 * root group, its rules placed in the base chain itself by their own
 * priorities. */
struct nbd_fw_group {
        char name[NBD_FW_GROUP_MAX + 1];
        struct nbd_fw_rule *rules;
        size_t n_rules;
        int16_t priority;
        bool root;
        bool has_guard;
        struct nbd_fw_rule guard; /* matches only */
};

struct nbd_fw_owner_spec {
        const char *owner;
        const char *ifname;
        /* The guest's traffic leaves through the interface's egress (a
         * macvtap); on a tap it enters through its ingress. */
        bool reversed;
        const struct nbd_fw_group *groups;
        size_t n_groups;
        bool ensure;
        uid_t uid; /* whose request: recorded as the creator */
        bool own_only; /* -EPERM when the owner exists for another uid */
        /* A non-root caller's bounds on what all of uid's owners hold once
         * the transaction is committed (max_fw_owners_per_uid,
         * max_fw_rules_per_uid): -EDQUOT beyond; 0, no bound (root's). */
        unsigned max_uid_owners, max_uid_rules;
};

/* Parse helpers for the model (0 or -EINVAL). An IP is "ADDR", "ADDR/BITS"
 * or "LO-HI" (one family, LO <= HI: is_range, HI in mask). */
int nbd_fw_parse_mac(const char *s, struct nbd_fw_mac *ret);
int nbd_fw_parse_ip(const char *s, struct nbd_fw_ip *ret);
bool nbd_fw_owner_valid(const char *owner);
bool nbd_fw_group_valid(const char *name);
/* Rules that are well-formed but cannot work (a port without tcp/udp, an
 * ARP match on IPv6, reject on egress, ...): 0, or -EINVAL with a sentence. */
int nbd_fw_rule_check(const struct nbd_fw_rule *r, bool reversed, struct nbd_err *e);
/* What a rule matches on: ARP/RARP header fields; IP (addresses, protocol,
 * DSCP, ports, ICMP, TCP flags); the IP family its matches need (4, 6, or 0
 * when nothing says, as for a bare l4proto). */
bool nbd_fw_rule_is_arp(const struct nbd_fw_rule *r);
bool nbd_fw_rule_is_ip(const struct nbd_fw_rule *r);
int nbd_fw_rule_family(const struct nbd_fw_rule *r);
/* How many nftables rules the compiler makes of a rule: 1, or 2 or 3 one
 * after the other, matching disjoint sets of frames, where one cannot say
 * it (an IPv6 protocol, which ebtables sees as 44 in a fragment other than
 * the first; IPv4 ports, ICMP and TCP flags, which ebtables reads behind
 * the header whatever the total length says; not gratuitous, which is
 * "some byte of the two IPs differs", in 4 alternatives, and a 5th when
 * nbd_fw_arp_odd_hlen_alt()). */
unsigned nbd_fw_rule_alts(const struct nbd_fw_rule *r);
/* Not gratuitous, and no other field that reads ARP at the offsets of
 * 6-byte hardware addresses: an ARP whose hardware addresses are not 6
 * bytes long is taken for not gratuitous (ebt_arp compares its IPs where
 * nft cannot read them; they differ but in a gratuitous ARP, which no
 * Ethernet receiver takes with such addresses). */
bool nbd_fw_arp_odd_hlen_alt(const struct nbd_fw_rule *r);
/* An IPv6 next header that ebt_ip6 (ipv6_skip_exthdr) skips or stops at:
 * hop-by-hop, routing, fragment, AH, no next header, destination options. */
bool nbd_fw_ipv6_ext_hdr(unsigned p);

/* How many nftables rules the groups become in the kernel: every rule's
 * alternatives, and the jumps to each non-root group (one per direction it
 * has rules in, times its guard's alternatives), as nbd_fw_layout() lays
 * them out. */
size_t nbd_fw_installed_rules(const struct nbd_fw_group *groups, size_t n_groups);

/* The hash of an owner's model (its interface, hooks, groups and every
 * field of every rule) in hex, and the number of rules it has in the
 * kernel (nftables rules with a counter: nbd_fw_rule_alts() of each). The base
 * chains' comment carries it: ensure compares it without compiling. */
void nbd_fw_model_hash(const struct nbd_fw_owner_spec *s, char out[NBD_FW_HASH_HEX],
                       unsigned *ret_rules);
