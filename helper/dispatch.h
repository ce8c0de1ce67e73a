/* Requests: validate every op, then run them in order.
 *
 * This is the only place that turns protobuf ops into calls on the helper's
 * capabilities (spawn.c today; link, firewall, bandwidth later). A request
 * becomes a job; a job runs its ops until one has to wait (an Exec waits for
 * its child), parks, and resumes from the loop. When the last op is done the
 * job hands a Reply to its owner. */
#pragma once

#include <stddef.h>

#include "codec.h"
#include "config.h"
#include "loop.h"

struct nb_job;

/* Called once per job with the finished reply; the job is freed after the
 * callback returns (the reply with it), so pack it inside the callback. */
typedef void (*nb_job_done_fn)(struct nb_job *job, const Netbroker__Reply *reply, void *data);

struct nb_dispatch_ctx {
        const struct nb_config *cfg;
        struct nb_loop *loop;
};

/* Take ownership of a decoded message (allocated from *budget, which the job
 * also takes) and of the fds that came with it, and start running it. */
int nb_job_start(const struct nb_dispatch_ctx *ctx, Netbroker__ClientMessage *msg,
                 struct nb_pb_budget *budget, int *fds, size_t nfds, nb_job_done_fn done,
                 void *data, struct nb_job **ret);

/* The owner is gone: stop the job, kill its child if any, free it later. */
void nb_job_cancel(struct nb_job *job);

/* Resume jobs that wait for a free spawn slot. Called by the loop. */
void nb_jobs_kick(const struct nb_dispatch_ctx *ctx);

/* Number of jobs waiting for a spawn slot. */
unsigned nb_jobs_waiting(void);

/* The feature list sent in Hello: one name per op this helper runs. */
extern const char *const nb_features[];
extern const size_t nb_n_features;
