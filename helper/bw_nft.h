// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bandwidth's policer on what enters an interface, made with nftables
 * (libnftnl + libmnl), not with tc and not through an IFB.
 *
 * Why: tc's ingress runs before the netfilter netdev ingress hook, so a
 * tc mirred redirect took every frame a guest sent past the firewall's
 * chains. An nft `fwd` to an IFB after them (what the helper did next)
 * is no better: the IFB hands every frame back with nf_skip_egress set,
 * the bridge forwards it to the other ports, and their netfilter egress
 * hooks, where the other guests' to-guest chains are, are skipped. So
 * nothing that enters an interface goes through an IFB any more: it is
 * policed in place, in a netdev base chain on the interface's ingress
 * hook at priority NBD_BW_NFT_PRIO, after the firewall's (priority 0,
 * table "netbroker"), as libvirt polices that direction with tc police.
 *
 * Layout, in the netdev table NBD_BW_NFT_TABLE (bandwidth's own; the
 * firewall never reads it):
 *   chain "nbbwN"  hook ingress device IFNAME priority NBD_BW_NFT_PRIO,
 *                  policy accept, comment "netbroker bandwidth IFNAME";
 *                  one rule: limit rate over RATE bytes/second
 *                  burst BURST bytes drop
 * N is the ifindex of IFNAME, so a chain hooked on a device of another
 * ifindex is known as stale. Chains "nbifbN" (one rule: fwd to the IFB
 * nbifbN) are an older helper's: every change of ifindex's limits, and
 * the start-up sweep, remove them.
 *
 * Every function taking a struct nbd_err fills it on every failure path. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define NBD_BW_NFT_TABLE "netbroker_bw"
#define NBD_BW_NFT_PRIO 100 /* after the firewall's base chains (priority 0) */
#define NBD_BW_NFT_PREFIX "nbbw" /* chain nbbwN: the policer of ifindex N */

struct nbd_bw_nft;
struct nbd_bw_rate;

/* The policer, as the kernel's nft limit in bytes takes it: a bucket of
 * one second of rate plus burst bytes, refilled at rate bytes/s; a frame
 * that finds too few tokens is dropped. */
struct nbd_bw_police {
        uint64_t rate; /* bytes/s; 0: none */
        uint32_t burst; /* bytes beyond the one second of rate */
};

/* A policer in bandwidth.h's units: its average, and its bucket (one
 * second of rate plus burst) as the burst, in kB rounded up; peak and
 * floor 0 (rate 0: all 0). */
void nbd_bw_nft_rate(const struct nbd_bw_police *p, struct nbd_bw_rate *ret);

/* Find out, without changing anything, whether the kernel takes the limit
 * expression in bytes (a batch that ends in a deliberate error is aborted
 * whole). Fails only when out of memory: a kernel without nftables or its
 * limit is a missing mechanism (nbd_bw_nft_missing), not an error. Holds
 * no fd: each operation below opens an nfnetlink socket and closes it. */
int nbd_bw_nft_open(struct nbd_bw_nft **ret);
void nbd_bw_nft_close(struct nbd_bw_nft *n);
/* A copy of n for one call on the firewall's lane (made and closed on the
 * loop): its operations go through the lane's socket (nfsock.h), so that
 * they are serialized with the firewall's commits and dumps, and the loop
 * never waits for the nftables commit mutex (issue 14). 0 or -ENOMEM. */
int nbd_bw_nft_lane_copy(const struct nbd_bw_nft *n, struct nbd_bw_nft **ret);

/* NULL when the policer can be made; else why not, as a sentence. */
const char *nbd_bw_nft_missing(const struct nbd_bw_nft *n);

/* Ensure chain nbbw<ifindex> hooks ifname's ingress and polices at p; left
 * as it is when it does already, else replaced in one transaction with any
 * older chain of ifindex (no instant without a limit). */
int nbd_bw_nft_set(struct nbd_bw_nft *n, int ifindex, const char *ifname,
                   const struct nbd_bw_police *p, struct nbd_err *e);
/* Delete every chain of ifindex (ours and an older helper's); none there
 * is success. */
int nbd_bw_nft_clear(struct nbd_bw_nft *n, int ifindex, struct nbd_err *e);

/* What the chains of ifindex hooked on ifname do: *ret_police the policer
 * of chain nbbwN (rate 0: none), *ret_fwd the target of an older helper's
 * fwd chain nbifbN (0: none). Needs no nbd_bw_nft (BandwidthShow has
 * none). On the firewall's lane (its socket), or on the loop when there
 * is none. */
int nbd_bw_nft_peek(int ifindex, const char *ifname, struct nbd_bw_police *ret_police, int *ret_fwd,
                    struct nbd_err *e);

/* Delete, in one transaction, every chain of ours for which stale(ifindex
 * its name gives, the device it hooks, whether it is an older helper's
 * fwd chain, data) says true. *ret_n: how many. */
typedef bool (*nbd_bw_nft_stale_fn)(int ifindex, const char *dev, bool old, void *data);
int nbd_bw_nft_prune(struct nbd_bw_nft *n, nbd_bw_nft_stale_fn stale, void *data, unsigned *ret_n,
                     struct nbd_err *e);
/* The same for the chains of ifindexes[count] (interfaces that went), read
 * by name: the cost follows count, not the size of the netdev family. */
int nbd_bw_nft_prune_ifindexes(struct nbd_bw_nft *n, const int *ifindexes, size_t count,
                               unsigned *ret_n, struct nbd_err *e);

/* Reading the answers to a batch (each of its messages asks for an ack):
 * its messages have sequence numbers [first, end), its begin first - 1. */
struct nbd_bw_nft_acks {
        uint32_t portid, first, end;
        unsigned got; /* answers to the batch's messages taken so far */
        int err; /* the first error among them (-errno), 0 if none */
        uint32_t err_seq; /* its message's sequence number */
};
/* Take in one datagram of answers, skipping what is not for portid or not
 * for the batch. Returns the error of a batch refused whole (an error for
 * its begin), else 0. Pure: a caller counts a->got against the messages it
 * sent, for an answer missing might have been the error. */
int nbd_bw_nft_take_acks(struct nbd_bw_nft_acks *a, const void *buf, size_t len);
