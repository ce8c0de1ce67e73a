// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall's kernel side: every change of a batch in one nfnetlink
 * transaction (libmnl), the table read back for ensure and listing, and a
 * monitor that notices the table being deleted behind our back. What goes
 * into a transaction is compiled by fw_compile.h; this is all that talks to
 * the kernel, and all the fake kernel of tests/fuzz replaces.
 *
 * Every function taking a struct nbd_err fills it on every failure path,
 * out of memory included: its sentence goes to the client as it is. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "fw_model.h"
#include "loop.h"

struct nbd_fw;
struct nbd_fw_txn;

typedef void (*nbd_fw_table_deleted_fn)(void *data, uint32_t family, const char *table);

int nbd_fw_open(struct nbd_loop *loop, struct nbd_fw **ret);
void nbd_fw_close(struct nbd_fw *fw);

/* fn(data, family, table) runs on the loop each time the monitor hears
 * another process delete one of the helper's tables: the guests'
 * (NBD_FW_TABLE), the networks' (NBD_NET_TABLE) or the outbound
 * policers' (NBD_BW_NFT_TABLE). Not for the helper's own deletions, nor
 * for one made while the monitor was out of its group (the monitor, in
 * fw_kernel.c). fn NULL: none. */
void nbd_fw_on_table_deleted(struct nbd_fw *fw, nbd_fw_table_deleted_fn fn, void *data);

/* A transaction: starts from one read of the table (for ensure and for
 * knowing what to delete), collects applies and removes, and commits them
 * all in one nfnetlink batch. The read is one dump of the chains; the
 * rules are dumped (once, for ensure) only when the generation mark of
 * our last commit is not the kernel's generation: see fw_table.h. */
int nbd_fw_txn_begin(struct nbd_fw *fw, struct nbd_fw_txn **ret, struct nbd_err *e);

struct nbd_fw_applied {
        char hash[NBD_FW_HASH_HEX];
        bool unchanged; /* ensure: already in place, nothing queued */
        unsigned rules;
};

int nbd_fw_txn_apply(struct nbd_fw_txn *t, const struct nbd_fw_owner_spec *s,
                     struct nbd_fw_applied *ret, struct nbd_err *e);
/* Ensure by hash (issue 14): is owner in place on ifname with content
 * hash `hash`, as ensure would find it, without the rules? Reads what the
 * transaction read (the summary when the mark holds; else the chains, and
 * the rules counted once against each owner's claim) and queues nothing,
 * but a repair of the shared set same_byte (fw_same_byte.h) when someone
 * has committed since our mark. ret: unchanged, or not (stale), with the
 * hash and rules installed ("" and 0: none). -EPERM when only_for is given
 * and the owner was made for another uid; -EINVAL when the transaction
 * changes the owner already. 0 or -errno with e set. */
int nbd_fw_txn_check_hash(struct nbd_fw_txn *t, const char *owner, const char *ifname,
                          const char *hash, const uid_t *only_for, struct nbd_fw_applied *ret,
                          struct nbd_err *e);
/* -ENOENT when the owner has no rules; -EPERM when only_for is given and
 * the owner was made for another uid. */
int nbd_fw_txn_remove(struct nbd_fw_txn *t, const char *owner, const uid_t *only_for,
                      struct nbd_err *e);
/* Queue the removal of every owner whose base chain is bound to one of
 * names[n] (sorted by strcmp), as nbd_fw_txn_remove() would each: found
 * in what the transaction read, never in another dump. *ret (malloc'd,
 * *n_ret of them; NULL when none) names each with its creator. Touches
 * the transaction alone: may run on the lane. 0 or -errno with e set. */
struct nbd_fw_owner_info;
int nbd_fw_txn_remove_bound(struct nbd_fw_txn *t, const char (*names)[IFNAMSIZ], size_t n,
                            struct nbd_fw_owner_info **ret, size_t *n_ret, struct nbd_err *e);
/* Send everything queued as one transaction and read every ack. Nothing to
 * send is a success that writes nothing. After a commit that removes
 * owners and makes none, the table goes if the kernel shows it empty, in a
 * commit of its own that the kernel takes only if nobody committed since
 * it was seen empty (fw_kernel.c, drop_if_empty): whether it is empty is
 * never taken from the transaction's read, which other transactions'
 * commits may have overtaken. */
int nbd_fw_txn_commit(struct nbd_fw_txn *t, struct nbd_err *e);
/* The same in three steps, so that the wait for the kernel (nfnetlink
 * handles the whole batch inside sendmsg: seconds for 400,000 rules) can
 * run on the firewall's lane (lane.h): prepare readies the commit (on the
 * loop), send builds the batch around the messages each op encoded when
 * it was queued (fw_msgs.h: it numbers them in place, from a copy of the
 * handle's sequence, and writes the mark, which grows with the table, off
 * the loop), sends it
 * and reads every ack (on the lane, over a socket of
 * its own that it opens and closes around the commit; it touches the
 * transaction and that socket, and takes the loop's monitor out of its
 * event group for the sendmsg (under a lock of its own), nothing else: no
 * logging, no counters), finish turns
 * what send found into 0 or -errno with e set (on the loop). A transaction
 * prepared is finished (or freed) before it is changed again. */
int nbd_fw_txn_commit_prepare(struct nbd_fw_txn *t, struct nbd_err *e);
void nbd_fw_txn_commit_send(struct nbd_fw_txn *t);
int nbd_fw_txn_commit_finish(struct nbd_fw_txn *t, struct nbd_err *e);
void nbd_fw_txn_free(struct nbd_fw_txn *t);

/* One transaction for guests' and networks' owners (issue 16): messages of
 * another of the helper's tables (fw_net_kernel.h's network owners) go in
 * this transaction's commit, after its own, between the same BEGIN and
 * END, so that the kernel takes both or neither. put(data, b, seq, ack)
 * writes them to b, numbered from *seq on (which it advances), the last
 * with NLM_F_ACK when ack; 0 or -ENOMEM. It runs where the batch is built
 * (in the send, on the firewall's lane): it touches its data alone. A refusal of one of them is
 * named in finish's message as the networks'. Set once, before prepare;
 * data outlives the commit. */
struct nftnl_batch;
typedef int (*nbd_fw_put_fn)(void *data, struct nftnl_batch *b, uint32_t *seq, bool ack);
void nbd_fw_txn_join(struct nbd_fw_txn *t, nbd_fw_put_fn put, void *data);

/* A handle of its own for one call on the firewall's lane (lane.h), so
 * that the loop keeps fw to itself: the lane's socket (made at its first
 * need and kept, see fw_kernel.c; emptied here of what an earlier call
 * left, so open it on the lane), no monitor (the generation is read with
 * GETGEN), nothing shared with fw but what fw learnt at open. Through it,
 * on the lane: a transaction's begin (the table read), its changes,
 * prepare and send; its finish, and the close, may run on the loop.
 * 0 or -errno. */
int nbd_fw_lane_open(const struct nbd_fw *fw, struct nbd_fw **ret);
void nbd_fw_lane_close(struct nbd_fw *lf);
/* The lane's socket itself, emptied, for another table's calls on the
 * firewall's lane (the networks', fw_net_kernel.h): on the lane, or on the
 * loop when there is none (or its eventfd could not be had: it is idle
 * then). Not closed by the caller, nor kept past the call. 0 or -errno. */
struct mnl_socket;
int nbd_fw_lane_socket(struct mnl_socket **ret);
/* Issue 14, the loop never waits for a chain dump or a rule count: after
 * chains_later, an apply or remove that needs the owners' chains (the
 * transaction began from the summary: fw_summary.h), or an ensure (apply
 * or hash) that needs the rules counted (the table is not intact: no mark
 * of our last commit), changes nothing and fails with -EAGAIN, and
 * chains_wanted says so; read_chains reads or counts what was wanted (on
 * the lane, through a lane's handle), and the op runs again. Without
 * chains_later, they are read where the op runs, as before. */
void nbd_fw_txn_chains_later(struct nbd_fw_txn *t);
bool nbd_fw_txn_chains_wanted(const struct nbd_fw_txn *t);
int nbd_fw_txn_read_chains(struct nbd_fw_txn *t, struct nbd_err *e);
/* A transaction begun through a lane's handle (its table read on the
 * lane) goes on through fw, the loop's: its later reads and a commit on
 * the loop use fw, and the lane's handle can close. On the loop. */
void nbd_fw_txn_rebind(struct nbd_fw_txn *t, struct nbd_fw *fw);

/* The owners in the kernel. */
struct nbd_fw_owner_info {
        char owner[NBD_FW_OWNER_MAX + 1];
        char ifname[IFNAMSIZ];
        char hash[NBD_FW_HASH_HEX];
        unsigned rules;
        uid_t uid; /* its creator */
};
/* fn returns 0, or -errno to stop the listing; nbd_fw_list then returns
 * that errno with e filled ("out of memory listing ..." for -ENOMEM). */
typedef int (*nbd_fw_owner_fn)(const struct nbd_fw_owner_info *o, void *data);
int nbd_fw_list(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e);
/* The same without counting the rules when the mark does not hold (each
 * owner's rules are what its comment claims): who made which owner, for a
 * non-root caller's validation on the loop. The summary when the mark
 * holds, else one chain dump. */
int nbd_fw_list_creators(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e);
/* The summary's owners when the mark holds; -ESTALE, nothing listed and e
 * untouched, when it does not (the caller then asks owner by owner). */
int nbd_fw_list_creators_marked(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data,
                                struct nbd_err *e);
/* One owner as its base chain's comment says it (rules as claimed), asked
 * for by name: one or two round trips whatever the table's size, where a
 * chain dump walks every chain of the namespace again for each datagram.
 * -ENOENT (e untouched) when the owner has no base chain. */
int nbd_fw_read_creator(struct nbd_fw *fw, const char *owner, struct nbd_fw_owner_info *ret,
                        struct nbd_err *e);

/* One rule of an owner's chains as the kernel holds it (FirewallList with
 * counters): the group ("" for a base chain's own rule), its direction and
 * position in its chain, its counter (0 when it has none) and its text
 * (fw_text.h; a jump without one reads "jump GROUP"). */
struct nbd_fw_rule_info {
        char owner[NBD_FW_OWNER_MAX + 1];
        char group[NBD_FW_GROUP_MAX + 1];
        enum nbd_fw_dir dir;
        unsigned index;
        uint64_t packets, bytes;
        const char *text;
};
/* fn as nbd_fw_list()'s; every rule of every owner, in one rule dump
 * (only NULL), or those of the owners made for uid *only, chain by chain
 * (the kernel reads a chain named in the request alone, where a dump of the
 * table walks all of it again for every message: a caller that lists its
 * own counters does not pay for everyone's). */
typedef int (*nbd_fw_rule_fn)(const struct nbd_fw_rule_info *r, void *data);
int nbd_fw_list_rules(struct nbd_fw *fw, const uid_t *only, nbd_fw_rule_fn fn, void *data,
                      struct nbd_err *e);
