/* Bandwidth's redirect to an IFB, made with nftables (libnftnl + libmnl),
 * not with tc.
 *
 * Why: tc's ingress runs before the netfilter netdev ingress hook, and a
 * frame an IFB hands back skips both. A tc mirred redirect on a tap's
 * ingress therefore took every frame the guest sent past the firewall's
 * chains (clean-traffic and the rest): an outbound limit switched the
 * guest's filter off. Here the redirect is a netdev base chain on the
 * interface's ingress hook at priority NBD_BW_NFT_PRIO, after the
 * firewall's (priority 0, table "netbroker"), whose one rule is `fwd to`
 * the IFB: what the filter drops never reaches it, what it accepts is
 * shaped on the IFB, and the IFB hands it back to the interface as it did
 * for tc (nft_fwd_netdev sets skb_iif and the redirected bit).
 *
 * Layout, in the netdev table NBD_BW_NFT_TABLE (bandwidth's own; the
 * firewall never reads it):
 *   chain "nbifbN"  hook ingress device IFNAME priority NBD_BW_NFT_PRIO,
 *                   policy accept, comment "netbroker bandwidth IFNAME";
 *                   one rule: fwd to "nbifbN"
 * N is the ifindex of the interface IFNAME, so chain and IFB share a name
 * and a chain hooked on a device of another ifindex is known as stale.
 *
 * Every function taking a struct nbd_err fills it on every failure path. */
#pragma once

#include <stdbool.h>

#include "err.h"

#define NBD_BW_NFT_TABLE "netbroker_bw"
#define NBD_BW_NFT_PRIO 100 /* after the firewall's base chains (priority 0) */

struct nbd_bw_nft;

/* Find out, without changing anything, whether the kernel takes the fwd
 * expression (a batch that ends in a deliberate error is aborted whole).
 * Fails only when out of memory: a kernel without nftables or fwd is a
 * missing mechanism (nbd_bw_nft_missing), not an error. Holds no fd: each
 * operation below opens an nfnetlink socket and closes it. */
int nbd_bw_nft_open(struct nbd_bw_nft **ret);
void nbd_bw_nft_close(struct nbd_bw_nft *n);

/* NULL when the redirect can be made; else why not, as a sentence. */
const char *nbd_bw_nft_missing(const struct nbd_bw_nft *n);

/* Ensure chain nbifb<ifindex> hooks ifname's ingress and forwards to the
 * device of index ifb; left as it is when it does already, else replaced
 * in one transaction (no instant without the redirect). */
int nbd_bw_nft_set(struct nbd_bw_nft *n, int ifindex, const char *ifname, int ifb,
                   struct nbd_err *e);
/* Delete chain nbifb<ifindex>; none there is success. */
int nbd_bw_nft_clear(struct nbd_bw_nft *n, int ifindex, struct nbd_err *e);

/* Where the chain of ifindex forwards to: *ret_ifb is the ifindex of the
 * target, or 0 when there is no such chain of ours hooked on ifname. Needs
 * no nbd_bw_nft (BandwidthShow has none). */
int nbd_bw_nft_peek(int ifindex, const char *ifname, int *ret_ifb, struct nbd_err *e);

/* Delete, in one transaction, every chain of ours for which stale(ifindex
 * its name gives, the device it hooks, data) says true. *ret_n: how many. */
typedef bool (*nbd_bw_nft_stale_fn)(int ifindex, const char *dev, void *data);
int nbd_bw_nft_prune(struct nbd_bw_nft *n, nbd_bw_nft_stale_fn stale, void *data, unsigned *ret_n,
                     struct nbd_err *e);
