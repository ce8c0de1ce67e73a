/* Bandwidth: libvirt's <bandwidth> limits as tc objects, built over
 * rtnetlink with libnl-route-3 (no tc binary), and the redirect to an IFB
 * as an nftables chain (bw_nft.h). Knows nothing of the wire format. Every
 * function returns 0 or -errno; one that takes a struct nbd_err fills it on
 * every failure path, out of memory included (err may be NULL: only the
 * errno is wanted).
 *
 * Directions: inbound is toward the guest, outbound from it. On a tap (and
 * anything that is not a macvtap) inbound is IF's egress and outbound its
 * ingress; on a macvtap it is the other way round: its guest's frames leave
 * through its egress, and frames for the guest arrive at its ingress (as
 * libvirt has it for direct interfaces; the firewall reverses its hooks the
 * same way). The kind is read from the kernel with each request.
 *
 * What netbroker makes on an interface IF (ifindex N), and nothing else:
 *   IF's egress
 *     root qdisc htb 1: default 1, class 1:1 (rate = average, ceil = peak or
 *     average, burst), and a fair leaf qdisc 2: under it where the kernel
 *     has one (fq_codel, sfq; else HTB's own fifo)
 *   IF's ingress, mechanism "ifb+htb"
 *     an IFB device "nbifbN" (up, alias NBD_BW_IFB_MARK), with the same
 *     HTB tree on its egress; and chain "nbifbN" of table netdev
 *     NBD_BW_NFT_TABLE on IF's ingress hook, after the firewall's chains,
 *     whose one rule forwards to the IFB (bw_nft.h: a tc mirred redirect
 *     would run before the firewall, and what the IFB hands back skips
 *     it). The IFB shapes (queues) rather than drops, so TCP keeps its
 *     rate.
 * A change of rates changes class 1:1 in place (NLM_F_REPLACE), and a
 * chain in place is kept: there is no instant without a limit. Clear
 * deletes the root qdisc if it is htb 1:, the chain, the tc redirect of a
 * helper from before (the u32 filter of priority NBD_BW_PRIO, and the
 * ingress qdisc when no other filter is left on it), and the IFB. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define NBD_BW_PRIO 0x4e42 /* "NB": the old tc redirect's priority (removed when met) */
#define NBD_BW_IFB_PREFIX "nbifb"
/* 100 Gbit/s in kB/s (1024 bytes): anything above is a mistake. */
#define NBD_BW_MAX_RATE (100000000000ull / 8 / 1024)
#define NBD_BW_MAX_BURST (1u << 20) /* kB: 1 GiB */
/* The link group IFBs wait in to be deleted together (nbd_bw_flush). Only
 * members that carry NBD_BW_IFB_MARK are ever deleted. */
#define NBD_BW_DOOMED_GROUP 0x4e424446u /* "NBDF" */
/* The alias of every IFB netbroker makes: the sweep at start-up and the
 * flush delete nothing without it. */
#define NBD_BW_IFB_MARK "netbroker:ifb"
/* The link group every IFB is created in. The kernel takes a group with
 * the create (it drops an alias), so an IFB whose helper was killed before
 * the alias was set is still known as netbroker's: only root can put a
 * device in a group, and no caller of the helper can. */
#define NBD_BW_MADE_GROUP 0x4e424649u /* "NBFI" */
#define NBD_BW_MIN_BURST 2u /* kB: the least burst HTB gets (one full frame fits) */

struct nbd_bw;
struct nbd_netlink;
struct nbd_link_entry;

/* kB/s and kB, as libvirt; average 0: no limit this way. */
struct nbd_bw_rate {
        uint32_t average, peak, burst, floor;
};

struct nbd_bw_limits {
        struct nbd_bw_rate in, out;
};

/* What is in place each way after a set: "htb", "ifb+htb", ..., "" for
 * no limit (a macvtap's inbound is "ifb+htb"). */
struct nbd_bw_applied {
        char in[96], out[96];
};

/* Uses nl (borrowed: it must outlive bw; link.c's request socket), opens
 * an nfnetlink socket of its own, and finds out without changing anything
 * whether the kernel has nftables' fwd (bw_nft.h) and act_police (a read
 * of a tc action). */
int nbd_bw_open(struct nbd_netlink *nl, struct nbd_bw **ret);
void nbd_bw_close(struct nbd_bw *bw);

/* The mechanisms each way for a tap, for Stats ("htb", "ifb+htb", or
 * "none: why"); a macvtap's are the other way round. */
void nbd_bw_mechanisms(const struct nbd_bw *bw, const char **ret_in, const char **ret_out);
/* Limits on what enters an interface (through an IFB: a tap's outbound, a
 * macvtap's inbound) can be made: false without nftables' fwd expression
 * (found out at open) or when the kernel showed it has no ifb driver. */
bool nbd_bw_outbound_available(const struct nbd_bw *bw);

/* Check limits without the kernel: rates in range, peak not below
 * average, burst in range (0: 10 ms of the average, at least
 * NBD_BW_MIN_BURST kB), floor only inbound. 0 or -EINVAL. */
int nbd_bw_check(const struct nbd_bw_limits *l, struct nbd_err *err);

/* Put these limits on ifname (a direction with average 0 is cleared). */
int nbd_bw_set(struct nbd_bw *bw, const char *ifname, const struct nbd_bw_limits *l,
               struct nbd_bw_applied *ret, struct nbd_err *err);
/* Remove everything netbroker made on ifname; nothing there is success.
 * The IFB (set and clear may remove one) is deleted by the next flush. */
int nbd_bw_clear(struct nbd_bw *bw, const char *ifname, struct nbd_err *err);
/* Delete the IFBs clears left for it, in one request. The dispatcher calls
 * it when a job ends, before its reply (NULL bw: nothing). 0 or -errno. */
int nbd_bw_flush(struct nbd_bw *bw);
/* An interface went away (link.c's nbd_links_on_gone; data is the nbd_bw):
 * remove the IFB and the chain netbroker made for it, which nothing else
 * would; e NULL ends a list of them (the chains go then, in one
 * transaction, and the IFBs together). */
void nbd_bw_link_gone(void *data, const struct nbd_link_entry *e);
/* At start-up: remove IFBs (marked ones only) and chains whose interface
 * went while no helper ran (a chain also when its ifindex is now another
 * device's), and the marked IFBs a killed helper left in the group. */
void nbd_bw_sweep(struct nbd_bw *bw, const struct nbd_link_entry *links, size_t n);

/* The limits netbroker has in place on ifname, read back from the kernel
 * (burst rounded to kB; floor is not kept by the kernel and reads 0). */
int nbd_bw_get(struct nbd_bw *bw, const char *ifname, struct nbd_bw_limits *ret);

/* Layout facts a reader of the kernel's state needs (bandwidth_show.c):
 * the root HTB's handle 1:, its one class 1:1, the leaf qdisc's handle 2:
 * under it, and the IFB's name for an interface of ifindex N. */
#define NBD_BW_HTB_ROOT 0x00010000u
#define NBD_BW_HTB_CLASS 0x00010001u
#define NBD_BW_LEAF_HANDLE 0x00020000u
#define NBD_BW_IFB_NAME_FMT NBD_BW_IFB_PREFIX "%u"
