// SPDX-License-Identifier: LGPL-2.1-or-later
/* One nftables transaction for a request's guests' and networks' owners
 * (issue 16).
 *
 * FirewallApply, FirewallRemove and FirewallEnsureHash (op_firewall.c)
 * commit at the request's last of them, NetApply and NetRemove (op_net.c)
 * at the last of theirs. When no other op runs between those two last ops
 * (the usual request: the guests' and the networks' ops together), the
 * later of them commits both, once: the networks' ops register a join at
 * their batch's start; when the guests' transaction commits (on the
 * firewall's lane, as always), the networks' queued messages go in the
 * same batch (fw_kernel.h's nbd_fw_txn_join), and one outcome is given to
 * both kinds' ops. Only ops of the other kind run meanwhile, so no other
 * op sees a commit later than it was. When another op runs between them
 * (a LinkSet that brings a guest's tap up must see its filter in place),
 * each kind commits at its own last op, as alone. A request whose later
 * kind's ops never run (a skipped op) commits at its end
 * (fw_batch_finish). Owned by op_firewall.c. */
#pragma once

#include <stdbool.h>

#include "fw_kernel.h"
#include "ops.h"

/* The firewall owner ops' cases (Op oneof), for nbd_job_*_of(). */
#define NBD_FW_OWNER_CASES 3
extern const unsigned nbd_fw_owner_cases[NBD_FW_OWNER_CASES];

struct nbd_fw_join {
        /* The messages (nbd_fw_txn_join's put, put_data) and whether there
         * are any: nothing queued joins nothing, and writes nothing. */
        nbd_fw_put_fn put;
        bool (*pending)(void *put_data);
        void *put_data;
        /* On the loop, once the commit that took the messages (or, nothing
         * pending, the guests' commit alone) is over: r is 0, or -errno and
         * why says what. may_park: done may park the job (nbd_job_park)
         * for the running op; else the job is ending or gone. */
        void (*done)(struct nbd_job *job, void *data, int r, const char *why, bool may_park);
        /* The request's last batched op is a firewall op, and the guests'
         * transaction commits nothing: the networks commit alone, now. */
        void (*alone)(struct nbd_job *job, void *data, bool may_park);
        /* On the loop, right before a commit that takes the messages: 0,
         * or -errno (e set) and nothing is committed (a network's bridge
         * gone since its op's check). */
        int (*check)(struct nbd_job *job, void *data, struct nbd_err *e);
        void *data;
        /* The index of the networks' first op queued (SIZE_MAX: none yet):
         * a commit on the lane that takes the messages decides it and the
         * ops after it (nbd_job_lane_decides_from). */
        size_t first_op;
};

/* Register j (which outlives the job) for the request's guests' commit.
 * 0, or -ENOMEM with res set when the job has no slot left. */
int nbd_fw_join(struct nbd_job *job, const struct nbd_fw_join *j, Netbroker__Result *res);

/* At the networks' last op: true if the request's firewall ops, all
 * before it, queued something in the guests' transaction and left it to
 * this op (no other op between), which commits it now with the joined
 * messages (on the firewall's lane: the op returns its result's status,
 * and the join's done tells the outcome); false if not, and the networks
 * commit alone. */
bool nbd_fw_commit_joined(struct nbd_job *job);
