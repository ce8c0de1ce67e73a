// SPDX-License-Identifier: LGPL-2.1-or-later
/* The nftables compiler: an owner's model (fw_model.h) made into libnftnl
 * chains and rules, and those into nfnetlink batch messages. Pure: it builds
 * objects and messages, and sends nothing (fw_kernel.h does).
 *
 * Layout, in the table "netbroker" (netdev family, so it works the same for
 * taps on a bridge, macvtaps and routed taps):
 *   chain "OWNER/from"  what the guest sends: the ingress hook of its tap,
 *                       the egress hook of its macvtap
 *   chain "OWNER/to"    what the guest receives: the other hook
 *   chain "OWNER/from/GROUP", "OWNER/to/GROUP"  one regular chain per group
 *                       and direction (none for a root group); the base chain
 *                       holds the jumps to them (behind the group's guard)
 *                       and the root groups' rules, in priority order, so
 *                       RETURN leaves a group as in libvirt's filters.
 * Every model rule has a counter before its verdict. A model rule is one
 * nft rule, or a few consecutive, disjoint ones with the same verdict where one nft
 * rule cannot say it (nbd_fw_rule_alts() in fw_model.h: an IPv6 protocol,
 * as ebtables sees it around fragments; not gratuitous).
 *   set "same_byte"     the pairs (b . b) of every byte, which gratuitous
 *                       ARP looks up; sent with each owner that uses it
 *                       (created if missing), never removed
 *                       (NBD_FW_ITEM_SET below); ensure makes its
 *                       content again when it changed (fw_same_byte.h).
 * Both base chains carry the comment "netbroker <hash> <ifname> <rules>
 * uid=<uid>": the hash lives and dies with the rules (nft flush ruleset
 * removes both), and so does the uid whose request made them, the owner's
 * creator (a comment without one, from before, counts as uid 0).
 * A replace deletes the owner's chains and adds the new ones in the same
 * transaction: the old hook filters until the new rules take over at
 * commit, so there is no instant without filtering. */
#pragma once

#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "fw_model.h"

/* nft's own udata type for a chain's comment: `nft list` shows ours. */
#define NBD_FW_UDATA_CHAIN_COMMENT 0

/* The chain names' direction parts, by enum nbd_fw_dir. */
extern const char *const nbd_fw_dir_names[2];

/* ---- an owner's chains and rules, in the order they are sent ---- */

/* NBD_FW_ITEM_SET, NBD_FW_ITEM_SETELEMS: the set NBD_FW_SET_SAME_BYTE and
 * its elements, ahead of the chains of an owner whose rules look it up
 * (gratuitous ARP). Constant, so they carry no object: nbd_fw_item_build
 * builds their messages. Created if missing, never exclusive: owners share
 * the set, and it stays in the table when they are gone. */
enum nbd_fw_item_kind {
        NBD_FW_ITEM_CHAIN,
        NBD_FW_ITEM_RULE,
        NBD_FW_ITEM_DELCHAIN,
        NBD_FW_ITEM_SET,
        NBD_FW_ITEM_SETELEMS,
        NBD_FW_ITEM_SETFLUSH /* every element of the set out (fw_same_byte.h) */
};

/* The pairs (b . b) for every byte b: a lookup of (x . y) finds x == y. */
#define NBD_FW_SET_SAME_BYTE "same_byte"
/* Whether s's rules look the set up (gratuitous ARP). */
bool nbd_fw_uses_same_byte(const struct nbd_fw_owner_spec *s);

struct nbd_fw_item {
        enum nbd_fw_item_kind kind;
        struct nftnl_chain *chain; /* NBD_FW_ITEM_CHAIN, NBD_FW_ITEM_DELCHAIN */
        struct nftnl_rule *rule;
        size_t owner; /* index of the owner op, for error messages */
};

struct nbd_fw_items {
        struct nbd_fw_item *v;
        size_t n, cap;
};

int nbd_fw_items_push(struct nbd_fw_items *it, struct nbd_fw_item x);
/* Free the items from index `from` on; the array stays. */
void nbd_fw_items_clear(struct nbd_fw_items *it, size_t from);

/* A chain or rule of our table, named (the rule: of its chain); NULL when
 * out of memory. */
struct nftnl_chain *nbd_fw_new_chain(const char *name);
struct nftnl_rule *nbd_fw_new_rule(const char *chain);

/* The chains one owner's spec makes, each with the number of nft rules it
 * has: group chains, then the two base chains. Stops at the first
 * callback that returns non-zero, and returns that (or -ENOMEM). */
int nbd_fw_layout(const struct nbd_fw_owner_spec *s,
                  int (*chain)(const char *name, size_t rules, void *data), void *data);

/* Compile one owner into items (group chains and their rules first, then
 * the base chains and their jumps), owner_idx naming the op in each; hash
 * and rules are nbd_fw_model_hash()'s, for the base chains' comment.
 * 0, or -errno with e filled and nothing added to it. */
int nbd_fw_compile_owner(const struct nbd_fw_owner_spec *s, size_t owner_idx,
                         struct nbd_fw_items *it, const char *hash, unsigned rules,
                         struct nbd_err *e);

/* The most bytes one item's message takes (the same_byte set's 256
 * elements are the largest, about 10 KB): room a caller leaves at buf. */
#define NBD_FW_ITEM_MSG_MAX (64u << 10)
/* Write one item's nfnetlink message at buf (NBD_FW_ITEM_MSG_MAX bytes of
 * room); its length is its nlmsg_len. 0, or -ENOMEM (the set's message
 * could not be built). */
int nbd_fw_item_build(void *buf, const struct nbd_fw_item *it, uint32_t seq, bool ack);

/* Compile one owner and hash it, without the kernel (unit tests, the fake
 * kernel): the hash, and the number of rules it makes; both untouched on
 * failure. */
int nbd_fw_hash(const struct nbd_fw_owner_spec *s, char hash[NBD_FW_HASH_HEX], unsigned *ret_rules,
                struct nbd_err *e);
