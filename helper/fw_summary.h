// SPDX-License-Identifier: LGPL-2.1-or-later
/* The summary: what ensure reads instead of the table's 41,000 chains.
 *
 * Set "owners" in the generation mark's table (NBD_FW_GEN_TABLE), one
 * element per owner of our table, keyed by a number, with a comment that
 * names the owner and says what its base chains' comment says ("netbroker
 * OWNER HASH IFNAME RULES uid=UID"). It is written whole in the same
 * commit as the mark, and only then (fw_kernel.c's put_mark): while the
 * kernel's ruleset generation is still the one the mark names, nobody has
 * committed since, and the summary is the table. Reading it is one GETCHAIN
 * of the mark's chain and one dump of 4,096 elements, where the chains are
 * a dump the kernel walks again from the start for every message.
 *
 * When the mark does not hold (someone else committed: `nft`, a firewall
 * reload, another helper), the summary is not used: the chains are read,
 * as before it. */
#pragma once

#include <libnftnl/batch.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fw_table.h"

struct mnl_socket;
struct nlmsghdr;

#define NBD_FW_SUMMARY_SET "owners"

/* Our owners as the summary says, when the mark holds: *ret_trusted true,
 * *ret the owners (has_base set, no chain names) and *ret_gen the
 * generation. When it does not hold (no mark, no set, an older mark),
 * *ret_trusted false and *ret untouched. 0, or -errno with nothing
 * changed. */
int nbd_fw_read_summary(struct nbd_fw *fw, struct nbd_fw_owners *ret, uint32_t *ret_gen,
                        bool *ret_trusted);

/* One owner as the summary records it. */
struct nbd_fw_summary_entry {
        const char *owner, *ifname, *hash;
        unsigned rules;
        uid_t uid;
};

/* The mark carried across a commit of the helper's own that leaves the
 * firewall's table as it is (a bandwidth policer's, a network's): without
 * it, every such commit would make the next ensure count the whole table.
 * Read just before the commit, on its socket: whether the mark holds now
 * (a GETCHAIN of the mark, then a GETGEN), and the generation. 0 or
 * -errno. */
int nbd_fw_mark_holds(struct mnl_socket *nl, uint32_t *seq, bool *ret_holds, uint32_t *ret_gen);
/* When it held at gen, the commit carries message i (0 to
 * NBD_FW_MARK_CARRY_MSGS - 1) of those that make the mark say gen + 1,
 * the generation the commit makes: built at buf (NBD_FW_MARK_CARRY_ROOM
 * bytes free) with sequence number seq; NULL when out of memory. The
 * summary is left as it is: the commit does not change the table. Anyone
 * committing between the read and the commit moves the generation past
 * gen + 1, and the next reader counts, as it must. They make nothing that
 * is missing: when the mark's chain went meanwhile (the guests' last owner
 * removed) the kernel refuses the batch, and the caller sends it again
 * without them. */
#define NBD_FW_MARK_CARRY_MSGS 2
#define NBD_FW_MARK_CARRY_ROOM 512
struct nlmsghdr *nbd_fw_mark_carry_msg(char *buf, unsigned i, uint32_t gen, uint32_t seq);

/* The set and its elements into b, at sequence numbers from *seq on (which
 * it advances), after the mark's table was made in b: 0 or -ENOMEM. */
int nbd_fw_summary_put(struct nftnl_batch *b, uint32_t *seq, const struct nbd_fw_summary_entry *v,
                       size_t n);
