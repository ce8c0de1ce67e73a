// SPDX-License-Identifier: LGPL-2.1-or-later
/* What a bridge already knows, for a port of someone else's bridge
 * (op_link.c, a LinkSet of a caller other than root): whether an address
 * is in the bridge's forwarding database, and pinning the bridge's own
 * address so that no port's becomes it. Over rtnetlink (an AF_BRIDGE
 * RTM_GETNEIGH dump, an RTM_NEWLINK with IFLA_ADDRESS); knows nothing of
 * the wire format or of policy. 0 or -errno, err filled on every
 * failure. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct nbd_links;

/* Is mac in the forwarding database of bridge br_ifindex on any device
 * other than except_ifindex (a port's, learned or local, or the bridge's
 * own address)? *ret: true or false. */
int nbd_bridge_fdb_has(struct nbd_links *l, int br_ifindex, int except_ifindex,
                       const uint8_t mac[6], bool *ret, struct nbd_err *err);

/* Give bridge br_ifindex the address mac (the one it has) as if set by
 * hand: the kernel then keeps it (br_stp_recalculate_bridge_id leaves an
 * address of NET_ADDR_SET alone) instead of taking its lowest port's.
 * The kernel flushes the bridge's neighbour entries on any address set,
 * the same one too: call it on a bridge without ports only. */
int nbd_bridge_pin_addr(struct nbd_links *l, int br_ifindex, const uint8_t mac[6],
                        struct nbd_err *err);
