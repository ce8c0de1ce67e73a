// SPDX-License-Identifier: LGPL-2.1-or-later
/* A bridge's options (STP, forward delay) and a bridge port's flags
 * (isolated, learning, unicast/multicast/broadcast flooding) over
 * rtnetlink: RTM_NEWLINK on the existing device with IFLA_INFO_DATA
 * (IFLA_BR_*) or IFLA_INFO_SLAVE_DATA (IFLA_BRPORT_*), as `ip link set
 * type bridge|bridge_slave` sends them. Knows nothing of the wire format
 * or of policy. 0 or -errno, err (may be NULL) filled on every failure. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct nbd_links;

enum nbd_bropt {
        NBD_BROPT_STP, /* bridge */
        NBD_BROPT_FORWARD_DELAY, /* bridge, centiseconds */
        NBD_BROPT_ISOLATED, /* the rest: port */
        NBD_BROPT_LEARNING,
        NBD_BROPT_UNICAST_FLOOD,
        NBD_BROPT_MULTICAST_FLOOD,
        NBD_BROPT_BROADCAST_FLOOD,
        NBD_BROPT_N,
};

struct nbd_bropts {
        char ifname[IFNAMSIZ];
        bool has[NBD_BROPT_N];
        uint32_t val[NBD_BROPT_N];
};

/* The values the device has now of every option o->has names (into
 * ret->val; ret->has as o->has). -EOPNOTSUPP (err says which) when the
 * device does not report one: not a bridge, not a port, or a kernel
 * without it. */
int nbd_bropt_get(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_bropts *ret,
                  struct nbd_err *err);
int nbd_bropt_set(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_err *err);
