// SPDX-License-Identifier: LGPL-2.1-or-later
/* Requests: validate every op, then run them in order.
 *
 * A request becomes a job. The job runs its ops until one has to wait (an
 * Exec waits for its child, fds wait for the socket), parks, and resumes
 * from the loop. If an op fails, the interface changes of the ops before it
 * are undone (unless the request says to go on), so a failed batch leaves
 * no half-made state. When the last op is done the job hands its Reply to
 * its owner. The ops themselves live in op_*.c, one file per area. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "config.h"
#include "loop.h"
#include "peer.h"

struct nbd_job;
struct nbd_backend;
struct nbd_links;
struct nbd_fw;
struct nbd_fw_gone;
struct nbd_bw;

struct nbd_op_handler;
struct nbd_lane;

/* Work the ops of a job leave to do together (interfaces gone, IFBs to
 * delete): fn(data) runs when a job ends, after any undo and before its
 * reply. Registered by whoever made the capability (main.c). */
struct nbd_job_end_hook {
        void (*fn)(void *data);
        void *data;
};
#define NBD_JOB_END_HOOKS 4

struct nbd_dispatch_ctx {
        const struct nbd_config *cfg;
        struct nbd_loop *loop;
        /* The kernel half of the capabilities below (backend.h): the
         * helper's nbd_kernel_backend, or a test's fake. Never NULL. */
        const struct nbd_backend *be;
        struct nbd_links *links; /* NULL: no interface ops (EOPNOTSUPP) */
        struct nbd_fw *fw; /* NULL: no firewall ops */
        struct nbd_fw_gone *fw_gone; /* owners removed with their interface */
        struct nbd_bw *bw; /* NULL: no bandwidth ops */
        /* The handler of each op kind, indexed by the protobuf oneof case
         * (NULL: the helper's own, ops.h). A test runs the real dispatcher
         * with handlers of its own. */
        const struct nbd_op_handler *const *handlers;
        size_t n_handlers;
        struct nbd_job_end_hook job_end[NBD_JOB_END_HOOKS];
        size_t n_job_end;
        /* The lanes (lane.h) of the firewall and of the links: their
         * blocking calls run there. NULL: they run on the loop (tests, the
         * fake kernel). Set with nbd_dispatch_set_lanes(). */
        struct nbd_lane *lane_fw, *lane_links;
        /* Gives the heap back once large requests are over (job_free);
         * NULL: never (tests). Owned by whoever owns the context. */
        struct nbd_timer *trim_timer;
};

/* Give the dispatcher its lanes (either may be NULL). */
void nbd_dispatch_set_lanes(struct nbd_dispatch_ctx *ctx, struct nbd_lane *fw,
                            struct nbd_lane *links);

/* Add a hook run when each job ends, in the order added. 0, or -ENOSPC
 * when NBD_JOB_END_HOOKS are there already. */
int nbd_dispatch_on_job_end(struct nbd_dispatch_ctx *ctx, void (*fn)(void *data), void *data);

/* What the owner of a job (a connection) provides. */
struct nbd_job_owner {
        /* The finished reply; the job is freed after the callback returns,
         * so pack the reply inside it. Not called for cancelled jobs. */
        void (*done)(struct nbd_job *job, const Netbroker__Reply *reply, void *data);
        /* Send fds for the request now (they are the owner's to close once
         * sent). Returns 0 when sent, 1 when queued behind other output (the
         * job then waits before its next op until nbd_job_output_drained()), or -errno. */
        int (*send_fds)(void *data, uint64_t request_id, uint32_t op_index, int *fds, size_t n);
        /* The memory an op's result holds until the reply goes (bytes, an
         * estimate): the owner charges it to what the job may hold and
         * returns true, or returns false when that is full (NULL: no
         * bound). The charge ends with the job. */
        bool (*hold)(void *data, size_t bytes);
        /* Make the job's fd reservation n (an op's fds, before it runs;
         * 0 after it). Returns 0 when the job holds it, 1 when not now:
         * the owner calls nbd_job_fds_reserved() once it does (NULL: no
         * bound). The owner counts the fds an op gives against it, and
         * what it sent until the client took them. */
        int (*reserve_fds)(void *data, size_t n);
};

/* Take ownership of a decoded message (allocated from *budget, which the job
 * also takes) and of the fds that came with it, and start running it for
 * origin (copied). *ret is set before
 * any op runs, so the owner can cancel the job from inside it.
 * Returns 0 (the job may have finished already) or -ENOMEM (the caller
 * still owns msg, budget and fds). */
/* Who asked for a job, and what it may take. */
struct nbd_job_origin {
        struct nbd_peer peer; /* what it may do is decided by who it is */
        size_t reply_budget; /* bytes of program output its reply may carry */
        /* Bytes its results may take, packed, in all (0: no bound). Once an
         * op's result has passed it, or the owner could not hold that
         * result (hold), the ops after it do not run: each fails with
         * E2BIG, and the batch stops there unless it goes on after
         * failures. The op that passed it keeps its result: what it did is
         * done. Without a bound, one request of 4,096 LinkLists took a
         * helper to 400 MB. */
        size_t reply_max;
};

int nbd_job_start(const struct nbd_dispatch_ctx *ctx, const struct nbd_job_origin *origin,
                  Netbroker__ClientMessage *msg, struct nbp_pb_budget *budget, int *fds,
                  size_t nfds, const struct nbd_job_owner *owner, void *data, struct nbd_job **ret);

/* The owner is gone: stop the job, kill its child if any, free it later. */
void nbd_job_cancel(struct nbd_job *job);

/* The owner's output queue is empty again: a job parked on it resumes. */
void nbd_job_output_drained(struct nbd_job *job);

/* The owner reserved the fds a job waited for (reserve_fds): it resumes. */
void nbd_job_fds_reserved(struct nbd_job *job);

/* Number of jobs waiting for a spawn slot. They resume, from the loop,
 * when a child is reaped (spawn.h's nbd_children_on_reaped). */
unsigned nbd_jobs_waiting(void);

/* Hello's feature list: the names of the ops this helper runs. Returns the
 * count and fills names (at most max); names NULL: the count alone. */
size_t nbd_features(const struct nbd_dispatch_ctx *ctx, const char **names, size_t max);
