// SPDX-License-Identifier: LGPL-2.1-or-later
/* The nftnl expressions both firewall compilers build: guests' (fw_compile.c,
 * netdev family) and networks' (fw_net_compile.c, inet family). Each
 * appends one expression to a rule and returns 0 or -ENOMEM; the rule owns
 * what was appended, and on failure nothing was. Loads and compares use
 * register 1 unless a register is given. */
#ifndef NBD_NFT_EXPR_H
#define NBD_NFT_EXPR_H

#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <stdint.h>

/* Append e (NULL: -ENOMEM, for the allocation just made). */
int nbd_nft_add(struct nftnl_rule *r, struct nftnl_expr *e);
/* payload load: len bytes at off from base (NFT_PAYLOAD_*) into reg. */
int nbd_nft_payload(struct nftnl_rule *r, uint32_t reg, uint32_t base, uint32_t off, uint32_t len);
/* meta load of key (NFT_META_*). */
int nbd_nft_meta(struct nftnl_rule *r, uint32_t key);
/* bitwise: register 1 &= mask (len <= 16). */
int nbd_nft_mask(struct nftnl_rule *r, const void *mask, uint32_t len);
/* cmp: register 1 op (NFT_CMP_*) data. */
int nbd_nft_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len);
int nbd_nft_counter(struct nftnl_rule *r);
/* immediate verdict (NF_ACCEPT, NFT_JUMP...), to chain when it has one. */
int nbd_nft_verdict(struct nftnl_rule *r, int verdict, const char *chain);
/* reject with ICMP or ICMPv6 port unreachable, as the packet's family
 * needs (icmpx): libvirt's `reject` in its ip and ip6 tables alike; in the
 * netdev family it drops what is not IP. */
int nbd_nft_reject(struct nftnl_rule *r);
/* A chain's comment, as nft itself stores it (udata type 0): `nft list`
 * shows it. -E2BIG when it does not fit NFT_USERDATA_MAXLEN. */
int nbd_nft_chain_comment(struct nftnl_chain *c, const char *text);

#endif
