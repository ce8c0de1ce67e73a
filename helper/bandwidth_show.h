// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading back the limits netbroker has on an interface, from the kernel's
 * tc objects (the layout bandwidth.h describes), for BandwidthShow. Only
 * reads: nothing here changes the kernel. Knows nothing of the wire. */
#pragma once

#include <stdbool.h>

#include "bandwidth.h"
#include "err.h"

struct nbd_netlink;

/* What is in force each way. A direction without netbroker's limit has
 * has_* false, a zero rate and an empty mechanism. Rates in bandwidth.h's
 * units: peak 0 when it equals the average (as BandwidthSet takes it),
 * burst in kB rounded up, floor 0 (the kernel does not keep it). */
struct nbd_bw_shown {
        bool has_in, has_out;
        struct nbd_bw_rate in, out;
        char in_mech[48], out_mech[48]; /* "htb+fq_codel", "ifb+htb", ... */
};

/* Read the limits on ifname over nl (an rtnetlink request socket; NULL: a
 * socket of the call's own, opened and closed here, for the firewall's
 * lane, where BandwidthShow runs: the policer is read with nftables, over
 * the lane's socket, bw_nft.h). 0, or -errno with e set (-ENODEV: no such
 * interface). */
int nbd_bw_show(struct nbd_netlink *nl, const char *ifname, struct nbd_bw_shown *ret,
                struct nbd_err *e);
