// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners: the firewall of one virtual network (forward filter,
 * masquerade, port forwards), as libvirt's network driver
 * (network_nftables.c) and netavark (port forwarding) install it, in the
 * helper's own table "inet netbroker_net": a table apart from the guests'
 * netdev table, since these hooks (forward, nat) exist in the inet family
 * only, and conntrack with them.
 *
 * Layout, per owner NAME, base chains that hold the owner's rules only
 * (each matches its bridge or its subnets, so owners never see each
 * other's traffic):
 *   "NAME/forward"     filter, forward, priority 0: libvirt's guest_cross,
 *                      guest_input and guest_output in that order (libvirt
 *                      jumps to them in that order), and a port forward's
 *                      DNATed connection let in ahead of guest_input's
 *                      reject. Always there, empty for open: the owner.
 *   "NAME/postrouting" nat, postrouting, 100: libvirt's guest_nat.
 *   "NAME/prerouting"  nat, prerouting, -100: port forwards (DNAT).
 *   "NAME/output"      nat, output, -100: the same for connections the
 *                      host itself makes to its own address (netavark's
 *                      OUTPUT jump).
 * Each base chain's comment is "netbroker-net HASH BRIDGE MODE RULES
 * uid=UID": the hash of the spec and the owner's rule count live and die
 * with the rules, as the guests' do (fw_compile.h).
 *
 * Interfaces are matched by name (iifname/oifname), where libvirt matches
 * its bridge by index (iif/oif): a bridge made again under the same name
 * keeps its network's rules, and the hash stays a function of the spec. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "fw_model.h"

#define NBD_NET_TABLE "netbroker_net"
#define NBD_NET_SUBNETS_MAX 8
#define NBD_NET_FORWARDS_MAX 64
#define NBD_NET_COMMENT_TAG "netbroker-net"

enum nbd_net_mode { NBD_NET_NAT, NBD_NET_ROUTE, NBD_NET_OPEN, NBD_NET_ISOLATED };
extern const char *const nbd_net_mode_names[4];

struct nbd_net_subnet {
        int family; /* 4 or 6 */
        uint8_t addr[16]; /* the network address: host bits cleared */
        uint8_t mask[16];
        unsigned prefix;
};

struct nbd_net_forward {
        uint8_t proto; /* IPPROTO_TCP or IPPROTO_UDP */
        int family; /* the guest address's: 4 or 6 */
        bool has_outside;
        uint8_t outside[16];
        uint16_t outside_port, guest_port;
        uint8_t guest[16];
};

struct nbd_net_spec {
        char owner[NBD_FW_OWNER_MAX + 1];
        char bridge[IFNAMSIZ];
        enum nbd_net_mode mode;
        char forward_dev[IFNAMSIZ]; /* "" any */
        uint16_t nat_port_min, nat_port_max;
        struct nbd_net_subnet subnets[NBD_NET_SUBNETS_MAX];
        size_t n_subnets;
        struct nbd_net_forward forwards[NBD_NET_FORWARDS_MAX];
        size_t n_forwards;
        uid_t uid; /* whose request: recorded as the creator */
        bool nat_ipv6; /* nat: IPv6 subnets masqueraded too (libvirt's <nat ipv6='yes'/>) */
        bool ipv6_nogw; /* IPv6 cross and rejects without an IPv6 subnet (ipv6='yes') */
};

/* Parsing and checks (0, or -EINVAL with e's sentence). */
int nbd_net_parse_subnet(const char *s, struct nbd_net_subnet *ret, struct nbd_err *e);
/* A forward's fields checked against the spec's subnets and mode. */
int nbd_net_parse_forward(const struct nbd_net_spec *s, const char *proto, const char *outside,
                          uint32_t outside_port, const char *guest, uint32_t guest_port,
                          struct nbd_net_forward *ret, struct nbd_err *e);
/* The whole spec (names, ports, mode against forwards). */
int nbd_net_spec_check(const struct nbd_net_spec *s, struct nbd_err *e);

/* The spec's content hash in hex (128-bit FNV-1a over a canonical
 * encoding of every field but uid). */
void nbd_net_hash(const struct nbd_net_spec *s, char out[NBD_FW_HASH_HEX]);
