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

struct nb_job;
struct nb_links;
struct nb_fw;
struct nb_fw_gone;
struct nb_bw;

struct nb_dispatch_ctx {
        const struct nb_config *cfg;
        struct nb_loop *loop;
        struct nb_links *links; /* NULL: no interface ops (EOPNOTSUPP) */
        struct nb_fw *fw; /* NULL: no firewall ops */
        struct nb_fw_gone *fw_gone; /* owners removed with their interface */
        struct nb_bw *bw; /* NULL: no bandwidth ops */
        /* Run when a job ends, after any undo and before its reply (NULL:
         * nothing): work the job's ops left to do together. */
        void (*job_end)(const struct nb_dispatch_ctx *ctx);
};

/* What the owner of a job (a connection) provides. */
struct nb_job_owner {
        /* The finished reply; the job is freed after the callback returns,
         * so pack the reply inside it. Not called for cancelled jobs. */
        void (*done)(struct nb_job *job, const Netbroker__Reply *reply, void *data);
        /* Send fds for the request now (they are the owner's to close once
         * sent). Returns 0 when sent, 1 when queued behind other output (the
         * job then parks until nb_job_output_drained()), or -errno. */
        int (*send_fds)(void *data, uint64_t request_id, uint32_t op_index, int *fds, size_t n);
};

/* Take ownership of a decoded message (allocated from *budget, which the job
 * also takes) and of the fds that came with it, and start running it for
 * origin (copied). *ret is set before
 * any op runs, so the owner can cancel the job from inside it.
 * Returns 0 (the job may have finished already) or -ENOMEM (the caller
 * still owns msg, budget and fds). */
/* Who asked for a job, and what it may take. */
struct nb_job_origin {
        struct nb_peer peer; /* what it may do is decided by who it is */
        size_t reply_budget; /* bytes of program output its reply may carry */
};

int nb_job_start(const struct nb_dispatch_ctx *ctx, const struct nb_job_origin *origin,
                 Netbroker__ClientMessage *msg, struct nb_pb_budget *budget, int *fds, size_t nfds,
                 const struct nb_job_owner *owner, void *data, struct nb_job **ret);

/* The owner is gone: stop the job, kill its child if any, free it later. */
void nb_job_cancel(struct nb_job *job);

/* The owner's output queue is empty again: a job parked on it resumes. */
void nb_job_output_drained(struct nb_job *job);

/* Resume jobs that wait for a free spawn slot. Called by the loop. */
void nb_jobs_kick(const struct nb_dispatch_ctx *ctx);

/* Number of jobs waiting for a spawn slot. */
unsigned nb_jobs_waiting(void);

/* Hello's feature list: the names of the ops this helper runs. Returns the
 * count and fills names (at most max). */
size_t nb_features(const struct nb_dispatch_ctx *ctx, const char **names, size_t max);
