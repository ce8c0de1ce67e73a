// SPDX-License-Identifier: LGPL-2.1-or-later
/* One nftables transaction for a request's guests' and networks' owners
 * (issue 16).
 *
 * FirewallApply, FirewallRemove and FirewallEnsureHash (op_firewall.c)
 * and NetApply and NetRemove (op_net.c) are all batched ops (ops.h): the
 * request's last of them, whichever kind it is, commits. The networks'
 * ops register a join at their batch's start; when the guests' transaction
 * commits (on the firewall's lane, as always), the networks' queued
 * messages go in the same batch (fw_kernel.h's nbd_fw_txn_join), and one
 * outcome is given to both kinds' ops. A request without firewall ops
 * commits its networks alone (fw_net_kernel.h), as one without network
 * ops commits its guests alone. Owned by op_firewall.c. */
#pragma once

#include <stdbool.h>

#include "fw_kernel.h"
#include "ops.h"

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
        void *data;
};

/* Register j (which outlives the job) for the request's guests' commit.
 * 0, or -ENOMEM with res set when the job has no slot left. */
int nbd_fw_join(struct nbd_job *job, const struct nbd_fw_join *j, Netbroker__Result *res);

/* At the request's last batched op, when it is a network op: true if a
 * firewall op of the request queued something in the guests' transaction,
 * which is now committed with the joined messages (on the firewall's lane:
 * the op returns its result's status, and the join's done tells the
 * outcome); false
 * if there is none, and the networks commit alone. */
bool nbd_fw_commit_joined(struct nbd_job *job);
