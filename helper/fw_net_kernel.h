// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners in the kernel: the table "inet netbroker_net" read back
 * (its chains, their comments and the kernel's count of their rules: no
 * rule is read), and a batch's network ops in one nfnetlink transaction,
 * through the socket the caller gives each read and commit (the firewall
 * lane's, op_net.c; the loop's, for a read the loop needs at once).
 *
 * A transaction writes nothing when nothing changes: an ensure that finds
 * an owner's chains with its hash and rule count queues nothing, and a
 * transaction with nothing queued sends nothing, so the kernel's ruleset
 * generation stays as it was. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "fw_net.h"

struct nbd_net_txn;
struct mnl_socket;

/* The kernel's limit of functions on one hook (MAX_HOOK_COUNT), base
 * chains included: nbd_net_txn_apply() refuses an owner that would pass
 * it (E2BIG) rather than send a transaction the kernel refuses. */
#define NBD_NET_HOOK_MAX 1024

/* Read the table through nl (a kept socket, nfsock.h; the caller's, used
 * for this call only), and how many base chains of every inet, ip and ip6
 * table share the owners' hooks: 0, or -errno with e set. Chains only: it
 * grows with the networks, not their rules. */
int nbd_net_txn_read(struct mnl_socket *nl, struct nbd_net_txn **ret, struct nbd_err *e);
/* The same through the loop's kept socket, on the loop. */
int nbd_net_txn_begin(struct nbd_net_txn **ret, struct nbd_err *e);

struct nbd_net_applied {
        char hash[NBD_FW_HASH_HEX];
        bool unchanged; /* ensure: in place already, nothing queued */
        unsigned rules;
};
/* Queue s's chains, replacing the owner's (ensure: unless in place).
 * own_only: -EPERM when the owner exists for another uid. -E2BIG, nothing
 * queued, when a chain would pass NBD_NET_HOOK_MAX on its hook. */
int nbd_net_txn_apply(struct nbd_net_txn *t, const struct nbd_net_spec *s, bool ensure,
                      bool own_only, struct nbd_net_applied *ret, struct nbd_err *e);
/* Queue the removal of every chain of owner: -ENOENT when it has none,
 * -EPERM when only_for is given and it is another uid's. */
int nbd_net_txn_remove(struct nbd_net_txn *t, const char *owner, const uid_t *only_for,
                       struct nbd_err *e);
/* Whether anything is queued. */
bool nbd_net_txn_pending(const struct nbd_net_txn *t);
/* Send what is queued as one transaction through nl (as for read) and
 * read its acks: 0 (nothing queued: nothing sent), or -errno with e set
 * (the kernel took none of it). Nothing is queued after it. */
int nbd_net_txn_commit(struct nbd_net_txn *t, struct mnl_socket *nl, struct nbd_err *e);
void nbd_net_txn_free(struct nbd_net_txn *t);

/* Instead of its own commit, what is queued goes in the guests' one
 * (fw_kernel.h's nbd_fw_txn_join; op_firewall.c): put is an nbd_fw_put_fn
 * (data: the transaction), which copies the queued messages into that
 * batch, renumbered; joined(t) says that commit was sent, whatever its
 * outcome: nothing is left queued. */
struct nftnl_batch;
int nbd_net_txn_put(void *data, struct nftnl_batch *b, uint32_t *seq, bool ack);
void nbd_net_txn_joined(struct nbd_net_txn *t);

struct nbd_net_owner_info {
        char owner[NBD_FW_OWNER_MAX + 1];
        char bridge[IFNAMSIZ];
        char hash[NBD_FW_HASH_HEX];
        char mode[16];
        unsigned rules; /* as counted in the kernel */
        uid_t uid;
};
/* Every network owner as read; fn's -errno stops the walk. */
int nbd_net_txn_each(const struct nbd_net_txn *t,
                     int (*fn)(const struct nbd_net_owner_info *o, void *data), void *data);
