// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bandwidth: libvirt's <bandwidth> limits as tc objects, built over
 * rtnetlink with libnl-route-3 (no tc binary), and a policer as an
 * nftables chain (bw_nft.h). Knows nothing of the wire format. Every
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
 *   IF's egress, mechanism "htb" (shapes: queues what is over the limit)
 *     root qdisc htb 4e42: default 1, class 4e42:1 (rate = average, ceil =
 *     peak or average, burst), and a fair leaf qdisc 4e43: under it where
 *     the kernel has one (fq_codel, sfq; else HTB's own fifo). The handle
 *     4e42: is the mark: a root qdisc with another handle (an
 *     administrator's htb 1:) is not netbroker's; a set that would need
 *     to replace it fails with EBUSY and changes nothing. The one
 *     exception is an older helper's htb 1: tree on an interface
 *     netbroker made (bw_old_tree.h says exactly when): it is ours, a set
 *     replaces it with 4e42:, a clear deletes it.
 *   IF's ingress, mechanism "nft-limit" (polices: drops what is over it)
 *     chain "nbbwN" of table netdev NBD_BW_NFT_TABLE on IF's ingress hook,
 *     after the firewall's chains, whose one rule is a limit in bytes and
 *     a drop (bw_nft.h). As libvirt's tc police there: rate = average,
 *     bucket = burst (without one: a second of the average), peak
 *     ignored; the bucket is never below 64 kB (a GSO frame) nor one
 *     second of the average (nft's limit holds that much). No IFB: an IFB
 *     hands frames back marked to skip the netfilter egress hooks, so
 *     what a bridge forwarded to another port skipped that port's
 *     to-guest chains; a tc redirect or police runs before the firewall.
 * A change of rates changes class 4e42:1 in place (NLM_F_REPLACE), and
 * replaces the chain in one transaction: there is no instant without a
 * limit. Clear deletes the root qdisc if it is htb 4e42: and the chain.
 *
 * What an older helper left is removed by a set or a clear of IF, when IF
 * goes, and at start-up (where an IFB's limit becomes a policer): its IFB
 * "nbifbN" (alias NBD_BW_IFB_MARK, or link group NBD_BW_MADE_GROUP), its
 * nft chain "nbifbN" forwarding there, and its tc redirect (the u32
 * filter of priority NBD_BW_PRIO, and the ingress qdisc when no other
 * filter is left on it). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define NBD_BW_PRIO 0x4e42 /* "NB": the old tc redirect's priority (removed when met) */
#define NBD_BW_IFB_PREFIX "nbifb" /* an older helper's IFBs (none is made now) */
/* 100 Gbit/s in kB/s (1024 bytes): anything above is a mistake. */
#define NBD_BW_MAX_RATE (100000000000ull / 8 / 1024)
#define NBD_BW_MAX_BURST (1u << 20) /* kB: 1 GiB */
/* The link group IFBs wait in to be deleted together (nbd_bw_flush). Only
 * members that carry NBD_BW_IFB_MARK are ever deleted. */
#define NBD_BW_DOOMED_GROUP 0x4e424446u /* "NBDF" */
/* The alias of every IFB older helpers made: the sweep at start-up and
 * the flush delete nothing without it. */
#define NBD_BW_IFB_MARK "netbroker:ifb"
/* The link group older helpers created every IFB in. The kernel took a
 * group with the create (it drops an alias), so an IFB whose helper was
 * killed before the alias was set is still known as netbroker's: only
 * root can put a device in a group, and no caller of the helper can. */
#define NBD_BW_MADE_GROUP 0x4e424649u /* "NBFI" */
#define NBD_BW_MIN_BURST 2u /* kB: the least burst HTB gets (one full frame fits) */

struct nbd_bw;
struct nbd_netlink;
struct nbd_link_entry;
struct nbd_links;

/* kB/s and kB, as libvirt; average 0: no limit this way. */
struct nbd_bw_rate {
        uint32_t average, peak, burst, floor;
};

struct nbd_bw_limits {
        struct nbd_bw_rate in, out;
};

/* What is in place each way after a set: "htb", "nft-limit", ..., "" for
 * no limit (a macvtap's inbound is "nft-limit"). */
struct nbd_bw_applied {
        char in[96], out[96];
};

/* Uses nl (borrowed: it must outlive bw; link.c's request socket), and
 * finds out without changing anything whether the kernel has nftables'
 * limit in bytes (bw_nft.h). */
int nbd_bw_open(struct nbd_netlink *nl, struct nbd_bw **ret);
void nbd_bw_close(struct nbd_bw *bw);

/* The mechanisms each way for a tap, for Stats ("htb", "nft-limit", or
 * "none: why"); a macvtap's are the other way round. */
void nbd_bw_mechanisms(const struct nbd_bw *bw, const char **ret_in, const char **ret_out);
/* Limits on what enters an interface (policed: a tap's outbound, a
 * macvtap's inbound) can be made: false without nftables' limit
 * expression in bytes (found out at open). */
bool nbd_bw_outbound_available(const struct nbd_bw *bw);

/* Check limits without the kernel: rates in range, peak not below
 * average (a policer ignores it), burst in range (0: for HTB 10 ms of the
 * average, at least NBD_BW_MIN_BURST kB; for a policer a second), floor
 * only inbound. 0 or -EINVAL. */
int nbd_bw_check(const struct nbd_bw_limits *l, struct nbd_err *err);

/* Put these limits on ifname (a direction with average 0 is cleared). */
int nbd_bw_set(struct nbd_bw *bw, const char *ifname, const struct nbd_bw_limits *l,
               struct nbd_bw_applied *ret, struct nbd_err *err);
/* Remove everything netbroker made on ifname; nothing there is success.
 * An older helper's IFB (set and clear remove one) is deleted by the next
 * flush. No interface ifname: the chains hooking its name are deleted and
 * -ENODEV says it was gone already (err has the sentence; BandwidthClear
 * reports that as a success). */
int nbd_bw_clear(struct nbd_bw *bw, const char *ifname, struct nbd_err *err);
/* Delete the older helpers' IFBs sets and clears left for it, in one
 * request. The dispatcher calls it when a job ends, before its reply (NULL
 * bw: nothing). 0 or -errno. */
int nbd_bw_flush(struct nbd_bw *bw);
/* An interface went away (link.c's nbd_links_on_gone; data is the nbd_bw):
 * remove its chains (since Linux 6.16 they outlive it) and an older
 * helper's IFB, which nothing else would; e NULL ends a list of them (the
 * chains go then, in one transaction, and the IFBs together). */
/* Lend bw the name map of links, so that an interface going costs no
 * kernel lookup of an IFB that is not there. */
void nbd_bw_watch_links(struct nbd_bw *bw, struct nbd_links *links);
void nbd_bw_link_gone(void *data, const struct nbd_link_entry *e);
/* At start-up: replace an older helper's IFB whose interface is there by
 * a policer of its rate; remove its other IFBs (marked ones only) and its
 * fwd chains, our chains whose interface went while no helper ran (also
 * when its ifindex is now another device's), and the marked IFBs a killed
 * helper left in the group. */
void nbd_bw_sweep(struct nbd_bw *bw, const struct nbd_link_entry *links, size_t n);

/* A set (l) or a clear (l NULL) of ifname in steps, so that its nftables
 * part, the policer's read and its transaction, runs on the firewall's
 * lane: serialized with the firewall's transactions and dumps, the loop
 * never waits for the nftables commit mutex, and a commit of ours never
 * interrupts a dump of the firewall's (issue 14: a BandwidthSet beside a
 * 4,096-guest replace held the loop 4.9-7.1 s, and back to back they made
 * the replace's table read give up, EAGAIN). The tc part stays on the
 * loop: a few rtnetlink requests over the links' socket and its state
 * (the leaf kind found, the IFBs to flush).
 *   nbd_bw_change_begin()  on the loop: l checked, ifname looked up, its
 *       egress as it is read, then set as l says, and what an older helper
 *       left for what enters it removed (a failure puts the egress back);
 *       an interface that is not there is no error for a clear;
 *   nbd_bw_change_nft()    on the lane, touching c alone: the policer as
 *       it is read, then made or deleted in one transaction;
 *   nbd_bw_change_end()    on the loop: the outcome as nbd_bw_set's and
 *       nbd_bw_clear's (-ENODEV and err for a clear of a gone interface);
 *       if the policer failed, the egress was put back. *ret_before: the
 *       limits in place before begin (burst rounded to kB, a policer's
 *       bucket; a policer's peak and floor, which the kernel does not
 *       keep, read 0), for an undo (nbd_bw_set);
 *   nbd_bw_change_free()   on the loop, NULL accepted.
 * 0 or -errno with err set. */
struct nbd_bw_change;
int nbd_bw_change_begin(struct nbd_bw *bw, const char *ifname, const struct nbd_bw_limits *l,
                        struct nbd_bw_change **ret, struct nbd_err *err);
void nbd_bw_change_nft(struct nbd_bw_change *c);
int nbd_bw_change_end(struct nbd_bw *bw, struct nbd_bw_change *c, struct nbd_bw_applied *ret,
                      struct nbd_bw_limits *ret_before, struct nbd_err *err);
void nbd_bw_change_free(struct nbd_bw_change *c);

/* Layout facts a reader of the kernel's state needs (bandwidth_show.c):
 * the root HTB's handle 4e42: ("NB"), the helper's mark: a root qdisc
 * without it is someone else's, never shown, replaced or deleted; its one
 * class 4e42:1; the leaf qdisc's handle 4e43: under it; the tree older
 * helpers made, on their IFB (which itself carries the mark) and on an
 * interface's egress (bw_old_tree.h says when that one is netbroker's):
 * htb 1:, class 1:1, leaf 2:; and an older helper's IFB's name for an
 * interface of ifindex N. */
#define NBD_BW_HTB_ROOT 0x4e420000u
#define NBD_BW_HTB_CLASS 0x4e420001u
#define NBD_BW_LEAF_HANDLE 0x4e430000u
#define NBD_BW_OLD_ROOT 0x00010000u
#define NBD_BW_OLD_CLASS 0x00010001u
#define NBD_BW_OLD_LEAF 0x00020000u
#define NBD_BW_IFB_NAME_FMT NBD_BW_IFB_PREFIX "%u"
