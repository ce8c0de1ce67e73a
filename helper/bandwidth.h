/* Bandwidth: libvirt's <bandwidth> limits as tc objects, built over
 * rtnetlink with libnl-route-3 (no tc binary). Knows nothing of the wire
 * format. Every function returns 0 or -errno; one that takes a struct
 * nbd_err fills it on every failure path, out of memory included (err may
 * be NULL: only the errno is wanted).
 *
 * What netbroker makes on an interface IF (ifindex N), and nothing else:
 *   inbound (toward the guest: IF's egress)
 *     root qdisc htb 1: default 1, class 1:1 (rate = average, ceil = peak or
 *     average, burst), and a fair leaf qdisc 2: under it where the kernel
 *     has one (fq_codel, sfq; else HTB's own fifo)
 *   outbound (from the guest: IF's ingress), mechanism "ifb+htb"
 *     an IFB device "nbifbN" (up, alias NBD_BW_IFB_MARK), with the same HTB tree at the outbound
 *     rates on its egress; an ingress qdisc ffff: on IF, and on it a u32
 *     filter of priority NBD_BW_PRIO matching everything, whose mirred
 *     action redirects to the IFB. The IFB shapes (queues) rather than
 *     drops, so TCP keeps its rate.
 * A change of rates changes class 1:1 in place (NLM_F_REPLACE): there is no
 * instant without a limit. Clear deletes the root qdisc if it is htb 1:,
 * the filter of priority NBD_BW_PRIO, the ingress qdisc when no other filter
 * is left on it, and the IFB. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define NBD_BW_PRIO 0x4e42 /* "NB": the ingress filter's priority */
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
 * no limit. */
struct nbd_bw_applied {
        char in[96], out[96];
};

/* Uses nl (borrowed: it must outlive bw; link.c's request socket) and
 * finds out, without changing anything, which actions the kernel has (a
 * read of a tc action of each kind). */
int nbd_bw_open(struct nbd_netlink *nl, struct nbd_bw **ret);
void nbd_bw_close(struct nbd_bw *bw);

/* The mechanisms each way, for Stats ("htb", "ifb+htb", or "none: why"). */
void nbd_bw_mechanisms(const struct nbd_bw *bw, const char **ret_in, const char **ret_out);
/* Outbound limits can be made: false when an attempt showed they cannot. */
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
 * remove the IFB netbroker made for it, which nothing else would; e NULL
 * ends a list of them (the IFBs go then, together). */
void nbd_bw_link_gone(void *data, const struct nbd_link_entry *e);
/* At start-up: remove IFBs (marked ones only) whose interface went while
 * no helper ran, and the marked IFBs a killed helper left in the group. */
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
