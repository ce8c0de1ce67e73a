// SPDX-License-Identifier: LGPL-2.1-or-later
/* A network owner's spec (fw_net.h) made into its base chains and their
 * rules (libnftnl objects), in the order they are sent. Pure: builds
 * objects, sends nothing (fw_net_kernel.c does). */
#pragma once

#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fw_net.h"

enum nbd_net_chain_kind {
        NBD_NET_FORWARD,
        NBD_NET_POSTROUTING,
        NBD_NET_PREROUTING,
        NBD_NET_OUTPUT
};
#define NBD_NET_CHAINS 4
/* The chain names' suffixes ("NAME/forward", ...), by enum nbd_net_chain_kind. */
extern const char *const nbd_net_chain_names[NBD_NET_CHAINS];

struct nbd_net_compiled {
        struct nftnl_chain *chains[NBD_NET_CHAINS]; /* NULL: the owner has no such chain */
        struct nftnl_rule **rules[NBD_NET_CHAINS];
        size_t n_rules[NBD_NET_CHAINS];
        unsigned total; /* rules in every chain */
};

/* The chain kind whose hook array a base chain of hook hooknum and type
 * (nat or not) takes a place in, or -1: the kernel keeps a nat chain in
 * the nat hook's own array, apart from the hook's other functions. */
int nbd_net_hook_kind(uint32_t hooknum, bool nat);

/* The chain name of owner's chain kind k into out (0, or -ENAMETOOLONG). */
int nbd_net_chain_name(const char *owner, unsigned k, char *out, size_t size);

/* Compile s, whose hash is hash: 0, or -ENOMEM with nothing in ret. Each
 * base chain's comment carries the hash and the total. */
int nbd_net_compile(const struct nbd_net_spec *s, const char *hash, struct nbd_net_compiled *ret);
void nbd_net_compiled_free(struct nbd_net_compiled *c);

/* "netbroker-net HASH BRIDGE MODE RULES uid=UID" read back: 0, or -EINVAL
 * when text is not one. */
struct nbd_net_comment {
        char hash[NBD_FW_HASH_HEX];
        char bridge[IFNAMSIZ];
        char mode[16];
        unsigned rules;
        unsigned uid;
};
int nbd_net_parse_comment(const char *text, struct nbd_net_comment *ret);
