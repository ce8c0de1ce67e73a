// SPDX-License-Identifier: LGPL-2.1-or-later
/* Jobs: validation, running, undo, fd streaming; see dispatch.h. */
#include "dispatch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "audit.h"
#include "backend.h"
#include "fw_gone.h"
#include "lane.h"
#include "log.h"
#include "opref.h"
#include "ops.h"

NBD_LOG_CATEGORY(dispatch);

/* The helper's own handler per op kind, indexed by the protobuf oneof case. */
static const struct nbd_op_handler *const own_handlers[] = {
        [NETBROKER__OP__OP_PING] = &nbd_op_ping,
        [NETBROKER__OP__OP_STATS] = &nbd_op_stats,
        [NETBROKER__OP__OP_EXEC] = &nbd_op_exec,
        [NETBROKER__OP__OP_TAP_CREATE] = &nbd_op_tap_create,
        [NETBROKER__OP__OP_MACVTAP_CREATE] = &nbd_op_macvtap_create,
        [NETBROKER__OP__OP_MACVLAN_CREATE] = &nbd_op_macvlan_create,
        [NETBROKER__OP__OP_VETH_CREATE] = &nbd_op_veth_create,
        [NETBROKER__OP__OP_BRIDGE_CREATE] = &nbd_op_bridge_create,
        [NETBROKER__OP__OP_LINK_SET] = &nbd_op_link_set,
        [NETBROKER__OP__OP_LINK_DELETE] = &nbd_op_link_delete,
        [NETBROKER__OP__OP_NAMES_DUMP] = &nbd_op_names_dump,
        [NETBROKER__OP__OP_FIREWALL_APPLY] = &nbd_op_firewall_apply,
        [NETBROKER__OP__OP_FIREWALL_REMOVE] = &nbd_op_firewall_remove,
        [NETBROKER__OP__OP_FIREWALL_LIST] = &nbd_op_firewall_list,
        [NETBROKER__OP__OP_BANDWIDTH_SET] = &nbd_op_bandwidth_set,
        [NETBROKER__OP__OP_BANDWIDTH_CLEAR] = &nbd_op_bandwidth_clear,
        [NETBROKER__OP__OP_LINK_LIST] = &nbd_op_link_list,
        [NETBROKER__OP__OP_BANDWIDTH_SHOW] = &nbd_op_bandwidth_show,
        [NETBROKER__OP__OP_FIREWALL_ENSURE_HASH] = &nbd_op_firewall_ensure_hash,
        /* virtual networks, part 1: addresses, routes, sysctls */
        [NETBROKER__OP__OP_ADDR_ADD] = &nbd_op_addr_add,
        [NETBROKER__OP__OP_ADDR_DELETE] = &nbd_op_addr_delete,
        [NETBROKER__OP__OP_ADDR_LIST] = &nbd_op_addr_list,
        [NETBROKER__OP__OP_ROUTE_ADD] = &nbd_op_route_add,
        [NETBROKER__OP__OP_ROUTE_DELETE] = &nbd_op_route_delete,
        [NETBROKER__OP__OP_ROUTE_LIST] = &nbd_op_route_list,
        [NETBROKER__OP__OP_SYSCTL_SET] = &nbd_op_sysctl_set,
        [NETBROKER__OP__OP_BRIDGE_OPT_SET] = &nbd_op_bridge_opt_set,
        /* virtual networks: network firewall owners */
        [NETBROKER__OP__OP_NET_APPLY] = &nbd_op_net_apply,
        [NETBROKER__OP__OP_NET_REMOVE] = &nbd_op_net_remove,
        [NETBROKER__OP__OP_NET_LIST] = &nbd_op_net_list,
        /* supervised programs */
        [NETBROKER__OP__OP_PROGRAM_START] = &nbd_op_program_start,
        [NETBROKER__OP__OP_PROGRAM_STOP] = &nbd_op_program_stop,
        [NETBROKER__OP__OP_PROGRAM_LIST] = &nbd_op_program_list,
};

/* The handler of op kind i in ctx's table, or NULL. */
static const struct nbd_op_handler *table_entry(const struct nbd_dispatch_ctx *ctx, size_t i)
{
        if (!ctx->handlers)
                return i < sizeof(own_handlers) / sizeof(*own_handlers) ? own_handlers[i] : NULL;
        return i < ctx->n_handlers ? ctx->handlers[i] : NULL;
}

static size_t table_size(const struct nbd_dispatch_ctx *ctx)
{
        return ctx->handlers ? ctx->n_handlers : sizeof(own_handlers) / sizeof(*own_handlers);
}

/* Offered when each capability it declares it needs opened at start-up. */
static bool available(const struct nbd_dispatch_ctx *ctx, const struct nbd_op_handler *h)
{
        return (!(h->needs & NBD_NEEDS_LINKS) || ctx->links) &&
               (!(h->needs & NBD_NEEDS_FIREWALL) || ctx->fw) &&
               (!(h->needs & NBD_NEEDS_BANDWIDTH) || ctx->bw);
}

static const struct nbd_op_handler *handler_for(const struct nbd_dispatch_ctx *ctx,
                                                const Netbroker__Op *op)
{
        const struct nbd_op_handler *h = table_entry(ctx, (size_t)op->op_case);

        return h && available(ctx, h) ? h : NULL;
}

size_t nbd_features(const struct nbd_dispatch_ctx *ctx, const char **names, size_t max)
{
        size_t n = 0;

        for (size_t i = 0; i < table_size(ctx) && (!names || n < max); i++) {
                const struct nbd_op_handler *h = table_entry(ctx, i);
                if (!h || !available(ctx, h))
                        continue;
                if (names)
                        names[n] = h->name;
                n++;
        }
        return n;
}

int nbd_dispatch_on_job_end(struct nbd_dispatch_ctx *ctx, void (*fn)(void *data), void *data)
{
        if (ctx->n_job_end >= NBD_JOB_END_HOOKS)
                return -ENOSPC;
        ctx->job_end[ctx->n_job_end++] = (struct nbd_job_end_hook){.fn = fn, .data = data};
        return 0;
}

/* Where a job is in its life: one state, no flags beside it. */
enum job_state {
        JOB_VALIDATING, /* its validation's slice is used up: goes on from a timer */
        JOB_RUNNING, /* running ops, or between two */
        JOB_PARKED, /* an op is under way (a child): nbd_job_op_done() */
        JOB_ON_LANE, /* an op's kernel call runs on a lane (nbd_job_on_lane) */
        JOB_WAITING_LANE, /* its next op's capability is busy on its lane */
        JOB_WAITING_SLOT, /* an Exec waits for a spawn slot (the waiting list) */
        JOB_SLOT_FREE, /* it got one: its op runs again, counted already */
        JOB_OUTPUT_BLOCKED, /* fds an op gave are queued behind other output */
        JOB_WAITING_FDS, /* its next op's fds are not reserved yet (reserve_fds) */
        JOB_OUTPUT_DRAINED, /* they are out, or reserved: resumes from a timer */
        JOB_YIELDED, /* its slice of the loop is used up: resumes from a timer */
        JOB_UNDOING, /* ended; its roll-back yielded, or its joint call runs on a lane */
        JOB_REPLY_WAIT, /* ended; its reply waits for fw_gone's clean-up */
        JOB_DONE, /* its reply went to the owner */
        JOB_CANCELLED, /* its owner went away: no reply */
};

struct undo {
        size_t op;
        void (*undo)(struct nbd_job *job, void *data);
        /* Instead of undo: may find that what it would put back is no
         * longer what its op changed, and change nothing (err says why). */
        int (*checked)(struct nbd_job *job, void *data, struct nbd_err *err);
        /* Instead of undo: says in the results itself what it undid. */
        void (*call)(struct nbd_job *job, void *data, size_t failed);
        /* Instead of undo: joins the undos of its kind in one call
         * (nbd_job_on_failure_joint). */
        const struct nbd_undo_joint *joint;
        /* Instead of undo: a kernel call of its own on the lane of need
         * (nbd_job_on_failure_lane). */
        bool (*prepare)(struct nbd_job *job, void *data, size_t failed);
        void (*lane_fn)(void *data);
        void (*finish)(struct nbd_job *job, void *data);
        unsigned need;
        /* The interface the undo works on (0: none, or not said): what
         * decides whether it may run before a joint call pending. */
        int ifindex;
        void (*free_data)(void *data);
        void *data;
        struct undo *next;
};

struct nbd_job {
        const struct nbd_dispatch_ctx *ctx;
        struct nbd_peer peer;
        Netbroker__ClientMessage *msg;
        Netbroker__Request *req;
        struct nbp_pb_budget *budget;
        Netbroker__Result **results;
        int *fds; /* the request's */
        size_t nfds;
        size_t next;
        size_t ran; /* ops before this index ran (or were skipped as refused) */
        size_t failed; /* first failed op that stops the batch, or SIZE_MAX */
        size_t reply_budget;
        size_t reply_max; /* nbd_job_origin's */
        size_t reply_bytes; /* what the results hold, packed */
        size_t reply_full; /* the op whose result filled the reply, or SIZE_MAX */
        uint32_t fds_given;
        size_t fds_reserved; /* by the owner for the op at next (reserve_fds) */
        enum job_state state;
        struct undo *undos;
        /* The roll-back (a failed batch): the next undo to run, and the
         * joint call its undos joined so far (kind and state; NULL: none). */
        struct undo *undo_next;
        struct undo *undo_on_lane; /* its call runs on a lane (undo_on_lane) */
        const struct nbd_undo_joint *joint_kind;
        void *joint;
        /* The interfaces joint undos work on (the devices the batch made),
         * sorted; NULL without memory (then no other undo passes a joint
         * call pending). */
        int *made;
        size_t n_made;
        void (*cancel_parked)(void *data);
        void *parked_data;
        struct nbd_timer resume_timer;
        size_t last_batched; /* index of the last batched op, or SIZE_MAX */
        /* CONTINUE_ON_ERROR: ops validation refused, skipped when running
         * (NULL: none, or the flag is not set and nothing runs). */
        bool *refused;
        void *batch_data;
        void (*batch_finish)(struct nbd_job *job, void *data, size_t failed);
        void (*batch_free)(void *data);
        struct {
                const void *key;
                void *p;
        } slots[NBD_JOB_SLOTS]; /* nbd_job_slot() */
        const struct nbd_job_owner *owner;
        void *data;
        struct nbd_job *next_waiting;
        /* A kernel call on a lane: lane is set from submit to completion,
         * and the job is not freed before (the call uses its data). */
        struct nbd_lane_work work;
        struct nbd_lane *lane;
        void (*lane_fn)(void *data);
        void (*lane_done)(struct nbd_job *job, void *data);
        void *lane_data;
        struct nbd_job *next_lane_wait; /* JOB_WAITING_LANE: its queue's */
        size_t lane_queue;
        /* The first op whose outcome the call on the lane decides (a run
         * of LinkDeletes: all of the run's): job->next unless an op said. */
        size_t lane_first;
        /* The call on the lane is a read the op needs before it runs
         * (nbd_job_on_lane_first): when it returns, the op runs again. */
        bool lane_again;
        /* The call on the lane changes nothing (nbd_job_on_lane_read): a
         * cancel before the lane begins it lets it go. */
        bool lane_read;
        bool op_counted; /* the op about to run again was counted already */
        /* An op before the running one failed after the fact (its kernel
         * call was shared with later ops): SIZE_MAX, or the first such. */
        size_t late_failed;
        struct nbd_fw_gone_waiter gone_wait; /* JOB_REPLY_WAIT */
        /* Names put in place of op references (opref.h) before their ops
         * ran: the decoded request points at them until the job is freed. */
        char **resolved;
        size_t n_resolved;
        /* Validation, in slices (issue 14): what it kept so far, the next
         * op to validate, the op that stopped it (SIZE_MAX: none), and the
         * ops refused under CONTINUE_ON_ERROR. NULL once it ended. */
        struct nbd_validation *v;
        size_t v_next, v_bad, v_refused;
};

/* Jobs waiting for a lane, first come first served: one queue per lane
 * (the firewall's, the links'). They take turns (wait_for_lane): a job
 * whose call returned goes behind those that waited meanwhile, so one
 * request of thousands of calls holds no one else's for more than one.
 * They resume when the lane is idle. */
static struct lane_queue {
        unsigned need;
        struct nbd_lane *lane;
        struct nbd_job *head, *tail;
        /* The job running its turn now (lane_idle, or an op whose read
         * came back: job_lane_finished), which goes on past those that
         * wait; NULL between turns. The loop's, set only around one
         * job_continue(). */
        struct nbd_job *turn;
} lane_queues[] = {{.need = NBD_NEEDS_FIREWALL}, {.need = NBD_NEEDS_LINKS}};
#define N_LANE_QUEUES (sizeof(lane_queues) / sizeof(*lane_queues))

/* How long a job runs before it lets the loop serve others: between two
 * ops, never inside one. A batch of 100 tap deletions (each waits for the
 * kernel's RCU grace period) or of 4,096 firewall owners no longer keeps
 * every other client waiting until it ends. */
#define SLICE_US 2000

static struct nbd_job *waiting_head, *waiting_tail;
static unsigned n_waiting;

static bool job_ended(const struct nbd_job *job)
{
        return job->state == JOB_DONE || job->state == JOB_CANCELLED;
}

unsigned nbd_jobs_waiting(void)
{
        return n_waiting;
}

/* ---- services for op files ---- */

int nbd_result_set(Netbroker__Result *res, int err, const char *fmt, ...)
{
        char buf[512];
        va_list ap;

        /* 0 or -errno in, a positive errno on the wire. A positive value
         * is a caller's bug: report it as EIO rather than as success or as
         * some other errno. */
        if (err > 0)
                err = -EIO;
        res->status = -err;
        if (!fmt)
                return err;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (res->message != protobuf_c_empty_string)
                free(res->message);
        res->message = strdup(buf);
        if (!res->message)
                res->message = (char *)protobuf_c_empty_string;
        return err;
}

void nbd_validation_created(struct nbd_validation *v, const char *name)
{
        snprintf(v->created[v->n_created++], 16, "%s", name);
        for (size_t i = 0; i < v->n_gone; i++)
                if (strcmp(v->gone[i], name) == 0)
                        v->gone[i][0] = '\0';
}

/* ---- the batch's names, by hash (issue 14) ---- */

static const char *claim_at(const struct nbd_validation *v, size_t i)
{
        return v->claims[i];
}

static const char *exist_at(const struct nbd_validation *v, size_t i)
{
        return v->exists[i];
}

typedef const char *(*name_at_fn)(const struct nbd_validation *v, size_t i);

static size_t name_hash(const char *s)
{
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

/* Where name is in slots (cap a power of two), or the empty slot it would
 * take. A name blanked by nbd_validation_forget() stays in its slot and
 * matches nothing. */
static size_t *name_slot(size_t *slots, size_t cap, const struct nbd_validation *v, name_at_fn at,
                         const char *name)
{
        size_t mask = cap - 1, i = name_hash(name) & mask;

        while (slots[i] && strcmp(at(v, slots[i] - 1), name) != 0)
                i = (i + 1) & mask;
        return &slots[i];
}

/* Room for the n names at(v, 0..n-1) and one more, at most half full: 0,
 * or -ENOMEM with *slots and *cap as they were. */
static int name_index_reserve(size_t **slots, size_t *cap, const struct nbd_validation *v,
                              name_at_fn at, size_t n)
{
        size_t want = *cap ? *cap : 64, *grown;

        while (want < 2 * (n + 1))
                want *= 2;
        if (want == *cap)
                return 0;
        grown = calloc(want, sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                *name_slot(grown, want, v, at, at(v, i)) = i + 1;
        free(*slots);
        *slots = grown;
        *cap = want;
        return 0;
}

bool nbd_validation_claim(struct nbd_validation *v, const char *key)
{
        bool indexed =
                name_index_reserve(&v->claim_slots, &v->claim_cap, v, claim_at, v->n_claims) == 0;
        size_t *slot = indexed ? name_slot(v->claim_slots, v->claim_cap, v, claim_at, key) : NULL;
        char **p;

        if (!indexed) {
                /* Out of memory: the list is walked, and indexed anew. */
                free(v->claim_slots);
                v->claim_slots = NULL;
                v->claim_cap = 0;
        }
        if (slot && *slot)
                return false;
        for (size_t i = 0; !indexed && i < v->n_claims; i++)
                if (strcmp(v->claims[i], key) == 0)
                        return false;
        p = realloc(v->claims, (v->n_claims + 1) * sizeof(*p));
        if (!p)
                return true; /* out of memory: not a reason to refuse */
        v->claims = p;
        p[v->n_claims] = strdup(key);
        if (!p[v->n_claims])
                return true;
        if (slot)
                *slot = v->n_claims + 1;
        v->n_claims++;
        return true;
}

bool nbd_job_is_last_batched(const struct nbd_job *job)
{
        return job->next == job->last_batched;
}

void **nbd_job_batch_slot(struct nbd_job *job,
                          void (*finish)(struct nbd_job *job, void *data, size_t failed),
                          void (*free_fn)(void *data))
{
        job->batch_finish = finish;
        job->batch_free = free_fn;
        return &job->batch_data;
}

void nbd_validation_exists(struct nbd_validation *v, const char *name)
{
        bool indexed =
                name_index_reserve(&v->exist_slots, &v->exist_cap, v, exist_at, v->n_exists) == 0;

        snprintf(v->exists[v->n_exists], 16, "%s", name);
        if (indexed)
                *name_slot(v->exist_slots, v->exist_cap, v, exist_at, v->exists[v->n_exists]) =
                        v->n_exists + 1;
        else {
                /* Out of memory: the lists are walked again. */
                free(v->exist_slots);
                v->exist_slots = NULL;
                v->exist_cap = 0;
        }
        v->n_exists++;
}

void nbd_validation_forget(struct nbd_validation *v, const char *name)
{
        for (size_t i = 0; i < v->n_exists; i++)
                if (strcmp(v->exists[i], name) == 0)
                        v->exists[i][0] = '\0';
        for (size_t i = 0; i < v->n_created; i++)
                if (strcmp(v->created[i], name) == 0)
                        v->created[i][0] = '\0';
        if (v->gone && !nbd_validation_is_gone(v, name))
                snprintf(v->gone[v->n_gone++], 16, "%s", name);
}

bool nbd_validation_is_gone(const struct nbd_validation *v, const char *name)
{
        for (size_t i = 0; i < v->n_gone; i++)
                if (strcmp(v->gone[i], name) == 0)
                        return true;
        return false;
}

bool nbd_validation_known_to_exist(const struct nbd_validation *v, const char *name)
{
        if (v->exist_slots)
                return *name_slot(v->exist_slots, v->exist_cap, v, exist_at, name) != 0;
        for (size_t i = 0; i < v->n_exists; i++)
                if (strcmp(v->exists[i], name) == 0)
                        return true;
        return false;
}

bool nbd_validation_was_created(const struct nbd_validation *v, const char *name)
{
        for (size_t i = 0; i < v->n_created; i++)
                if (strcmp(v->created[i], name) == 0)
                        return true;
        return false;
}

const struct nbd_dispatch_ctx *nbd_job_ctx(const struct nbd_job *job)
{
        return job->ctx;
}

const struct nbd_peer *nbd_job_peer(const struct nbd_job *job)
{
        return &job->peer;
}

int nbd_job_request_fd(const struct nbd_job *job, size_t i)
{
        return i < job->nfds ? job->fds[i] : -1;
}

size_t nbd_job_reply_budget(const struct nbd_job *job)
{
        return job->reply_budget;
}

void nbd_job_spend_reply_budget(struct nbd_job *job, size_t n)
{
        job->reply_budget -= n < job->reply_budget ? n : job->reply_budget;
}

int nbd_job_give_fds(struct nbd_job *job, Netbroker__Result *res, int *fds, size_t n)
{
        uint32_t *idx = realloc(res->fd_index, (res->n_fd_index + n) * sizeof(*idx));
        int r;

        if (!idx) {
                for (size_t i = 0; i < n; i++)
                        close(fds[i]);
                return -ENOMEM;
        }
        res->fd_index = idx;
        r = job->owner->send_fds(job->data, job->req->id, (uint32_t)job->next, fds, n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                res->fd_index[res->n_fd_index++] = job->fds_given++;
        /* The op goes on; the job waits before its next one. */
        if (r == 1)
                job->state = JOB_OUTPUT_BLOCKED;
        return 0;
}

/* The undo t (one of undo, checked, call and joint set) for the op running
 * now, newest first. Without memory, its data is freed: -ENOMEM. */
static int push_undo(struct nbd_job *job, struct undo t)
{
        struct undo *u = malloc(sizeof(*u));

        if (!u) {
                t.free_data(t.data);
                return -ENOMEM;
        }
        t.op = job->next;
        t.next = job->undos;
        *u = t;
        job->undos = u;
        return 0;
}

int nbd_job_on_failure_undo(struct nbd_job *job, void (*undo)(struct nbd_job *job, void *data),
                            void (*free_data)(void *data), void *data)
{
        return push_undo(job, (struct undo){.undo = undo, .free_data = free_data, .data = data});
}

int nbd_job_on_failure_undo_checked(struct nbd_job *job,
                                    int (*undo)(struct nbd_job *job, void *data,
                                                struct nbd_err *err),
                                    void (*free_data)(void *data), void *data, int ifindex)
{
        return push_undo(job, (struct undo){.checked = undo,
                                            .ifindex = ifindex,
                                            .free_data = free_data,
                                            .data = data});
}

int nbd_job_on_failure_lane(struct nbd_job *job, unsigned need,
                            bool (*prepare)(struct nbd_job *job, void *data, size_t failed),
                            void (*fn)(void *data), void (*finish)(struct nbd_job *job, void *data),
                            void (*free_data)(void *data), void *data, int ifindex)
{
        struct undo *u = malloc(sizeof(*u));

        if (!u) {
                free_data(data);
                return -ENOMEM;
        }
        *u = (struct undo){.op = job->next,
                           .prepare = prepare,
                           .lane_fn = fn,
                           .finish = finish,
                           .need = need,
                           .ifindex = ifindex,
                           .free_data = free_data,
                           .data = data,
                           .next = job->undos};
        job->undos = u;
        return 0;
}

int nbd_job_on_failure_call(struct nbd_job *job,
                            void (*fn)(struct nbd_job *job, void *data, size_t failed),
                            void (*free_data)(void *data), void *data)
{
        return push_undo(job, (struct undo){.call = fn, .free_data = free_data, .data = data});
}

int nbd_job_on_failure_joint(struct nbd_job *job, const struct nbd_undo_joint *kind,
                             void (*free_data)(void *data), void *data, int ifindex)
{
        return push_undo(job, (struct undo){.joint = kind,
                                            .ifindex = ifindex,
                                            .free_data = free_data,
                                            .data = data});
}

static void kept(struct nbd_job *job, void *data, size_t failed)
{
        (void)job;
        (void)data;
        (void)failed;
}

int nbd_job_keep(struct nbd_job *job, void (*free_data)(void *data), void *data)
{
        return nbd_job_on_failure_call(job, kept, free_data, data);
}

void nbd_job_mark_undone(struct nbd_job *job, size_t op)
{
        Netbroker__Result *res = job->results[op];

        nbd_result_set(res, -ECANCELED, "undone: op %zu failed", job->failed);
        res->n_fd_index = 0; /* the client closes fds nobody points at */
        nbd_audit_op(&job->peer, job->req->ops[op], res, NBD_AUDIT_UNDONE);
}

/* The op's undo changed nothing, for the reason why: its result says so
 * (ECANCELED, as an undone op's: the batch failed, and the op's fds are
 * not the client's either). */
void nbd_job_mark_undo_skipped(struct nbd_job *job, size_t op, const char *why)
{
        Netbroker__Result *res = job->results[op];

        nbd_result_set(res, -ECANCELED, "undo skipped: op %zu failed; %s", job->failed, why);
        res->n_fd_index = 0;
        nbd_audit_op(&job->peer, job->req->ops[op], res, NBD_AUDIT_UNDO_SKIPPED);
}

void nbd_job_op_failed_late(struct nbd_job *job, size_t op)
{
        nbd_stat_inc(NBD_STAT_OP_ERRORS);
        if (op < job->late_failed)
                job->late_failed = op;
}

void nbd_job_lane_decides_from(struct nbd_job *job, size_t first)
{
        if (first < job->lane_first)
                job->lane_first = first;
}

size_t nbd_job_op_index(const struct nbd_job *job)
{
        return job->next;
}

bool nbd_job_next_is_same_kind(const struct nbd_job *job)
{
        const Netbroker__Request *req = job->req;
        size_t i = job->next + 1;

        while (i < req->n_ops && job->refused && job->refused[i])
                i++;
        return i < req->n_ops && req->ops[i]->op_case == req->ops[job->next]->op_case;
}

static bool op_is_of(const Netbroker__Op *op, const unsigned *cases, size_t n)
{
        for (size_t k = 0; k < n; k++)
                if ((unsigned)op->op_case == cases[k])
                        return true;
        return false;
}

bool nbd_job_later_op_of(const struct nbd_job *job, const unsigned *cases, size_t n)
{
        const Netbroker__Request *req = job->req;

        for (size_t i = job->next + 1; i < req->n_ops; i++)
                for (size_t k = 0; k < n && !(job->refused && job->refused[i]); k++)
                        if ((unsigned)req->ops[i]->op_case == cases[k])
                                return true;
        return false;
}

bool nbd_job_only_ops_of_ahead(const struct nbd_job *job, const unsigned *cases, size_t n)
{
        const Netbroker__Request *req = job->req;
        size_t last = SIZE_MAX;

        for (size_t i = job->next + 1; i < req->n_ops; i++)
                if (!(job->refused && job->refused[i]) && op_is_of(req->ops[i], cases, n))
                        last = i;
        if (last == SIZE_MAX)
                return false;
        for (size_t i = job->next + 1; i < last; i++)
                if (!(job->refused && job->refused[i]) && !op_is_of(req->ops[i], cases, n))
                        return false;
        return true;
}

bool nbd_job_is_cancelled(const struct nbd_job *job)
{
        return job->state == JOB_CANCELLED;
}

bool nbd_job_goes_on_after_failure(const struct nbd_job *job)
{
        return job->req->flags & NETBROKER__REQUEST_FLAG__REQUEST_FLAG_CONTINUE_ON_ERROR;
}

void **nbd_job_slot(struct nbd_job *job, const void *key)
{
        for (size_t i = 0; i < NBD_JOB_SLOTS; i++)
                if (job->slots[i].key == key)
                        return &job->slots[i].p;
        for (size_t i = 0; i < NBD_JOB_SLOTS; i++)
                if (!job->slots[i].key) {
                        job->slots[i].key = key;
                        return &job->slots[i].p;
                }
        return NULL;
}

/* ---- validation: reads the system at most, never changes it ---- */

/* Op i's own checks, its references (opref.h) checked and, for the time
 * of the check, replaced by the names they stand for where those are
 * known already (an explicit name): validation is then what it would be
 * had the caller written the name. A template's interface is named when
 * op K has run, and the op is validated again then (resolve_refs). */
static int validate_with_refs(struct nbd_job *job, struct nbd_validation *v, size_t i,
                              const struct nbd_op_handler *h)
{
        Netbroker__Op *op = job->req->ops[i];
        Netbroker__Result *res = job->results[i];
        char **slots[NBD_OPREF_SLOTS], *refs[NBD_OPREF_SLOTS];
        size_t n = nbd_opref_slots(op, slots);
        int r = 0;

        for (size_t j = 0; j < n; j++)
                refs[j] = *slots[j];
        for (size_t j = 0; j < n && r == 0; j++) {
                const char *stand_in;

                if (!nbd_opref_is(refs[j]))
                        continue;
                r = nbd_opref_check(job->req->ops, i, job->refused, refs[j], &stand_in, res);
                if (r == 0)
                        *slots[j] = (char *)stand_in;
        }
        if (r == 0 && h->validate)
                r = h->validate(v, op, res);
        for (size_t j = 0; j < n; j++)
                *slots[j] = refs[j];
        return r;
}

/* An op of a caller other than root with more fds than one uid may hold
 * (an eighth of fd_limit) is refused: it could wait for ever, and, were a
 * uid holding none let past that (up to the quarter all such callers
 * share), one such op never read would hold every other uid's taps. */
static int check_fds_nonroot(const struct nbd_job *job, const struct nbd_op_handler *h,
                             const Netbroker__Op *op, Netbroker__Result *res)
{
        unsigned n = h->fds ? h->fds(op) : 0, max = nbd_config_fds_per_uid(job->ctx->cfg);

        if (n <= max || nbd_peer_is_root(&job->peer))
                return 0;
        return nbd_result_set(res, -EMFILE,
                              "%s: its %u fds are more than one uid other than root may hold at "
                              "once (%u: an eighth of fd_limit)",
                              h->name, n, max);
}

/* Op i, alone: known to this helper, allowed to this peer by policy, and
 * valid by its handler. Returns 0, or -errno with its result set. */
static int validate_op(struct nbd_job *job, struct nbd_validation *v, size_t i)
{
        const Netbroker__Op *op = job->req->ops[i];
        const struct nbd_op_handler *h = handler_for(job->ctx, op);
        Netbroker__Result *res = job->results[i];
        struct nbd_err why = {0};
        int r;

        if (!h) {
                nbd_stat_inc(NBD_STAT_OPS_UNKNOWN);
                return nbd_result_set(res, -EOPNOTSUPP,
                                      "unknown operation: this helper does not run it (see "
                                      "Hello's features)");
        }
        if ((r = nbd_policy_check_op(&job->ctx->cfg->policy, &job->peer, h->name, &why)) < 0)
                return nbd_result_set(res, -EPERM, "%s", why.msg);
        if ((r = validate_with_refs(job, v, i, h)) < 0) {
                if (!res->status)
                        nbd_result_set(res, r, "%s: %s", h->name, strerror(-r));
                return r;
        }
        if ((r = check_fds_nonroot(job, h, op, res)) < 0)
                return r;
        if (h->batched)
                job->last_batched = i;
        return 0;
}

/* What validation kept for the batch goes; fds no op asked for are closed
 * at once: the client's mistake must not cost the helper its few fds. */
static void validation_end(struct nbd_job *job, struct nbd_validation *v)
{
        if (v->cache_free)
                v->cache_free(v->cache);
        for (size_t i = 0; i < v->n_claims; i++)
                free(v->claims[i]);
        free(v->claims);
        free(v->claim_slots);
        free(v->exist_slots);
        for (size_t i = 0; i < job->nfds; i++)
                if (!v->fd_used[i] && job->fds[i] >= 0) {
                        close(job->fds[i]);
                        job->fds[i] = -1;
                }
        free(v->created);
        free(v->exists);
        free(v->gone);
        free(v->fd_used);
}

/* Validation holds the loop as long as its request is large: at 4,096
 * firewall owners, each op's model parsed and checked, 80-390 ms (issue
 * 14). It goes in slices as running does, yielding to the loop between two
 * ops once SLICE_US is used up; no op runs before the whole request is
 * validated. What it reads of the system may change between slices, as it
 * may between validation and an op's run: each run reads again. */
static int validation_begin(struct nbd_job *job)
{
        Netbroker__Request *req = job->req;
        struct nbd_validation *v = calloc(1, sizeof(*v));

        if (v) {
                *v = (struct nbd_validation){
                        .ctx = job->ctx, .peer = &job->peer, .nfds = job->nfds, .fds = job->fds};
                /* A veth names two interfaces: room for two per op. */
                v->created = calloc(2 * req->n_ops + 1, sizeof(*v->created));
                v->exists = calloc(2 * req->n_ops + 1, sizeof(*v->exists));
                /* One name per LinkDelete. */
                v->gone = calloc(req->n_ops + 1, sizeof(*v->gone));
                v->fd_used = calloc(job->nfds ? job->nfds : 1, sizeof(*v->fd_used));
        }
        if (!v || !v->created || !v->exists || !v->gone || !v->fd_used) {
                if (v) {
                        free(v->created);
                        free(v->exists);
                        free(v->gone);
                        free(v->fd_used);
                        free(v);
                }
                for (size_t i = 0; i < req->n_ops; i++)
                        nbd_result_set(job->results[i], -ENOMEM, "not run: out of memory");
                return -ENOMEM;
        }
        job->v = v;
        job->v_next = 0;
        job->v_bad = SIZE_MAX;
        job->v_refused = 0;
        return 0;
}

#ifdef NB_TEST_HOOKS
/* Tests only: while the file $NETBROKERD_TEST_HOLD_VALIDATE exists, a
 * request's validation yields after each op and does not go on (FILE.held
 * says one waits), so a test sees the loop serve in between; the same for
 * running with $NETBROKERD_TEST_HOLD_RUN (a test changes the system between
 * two ops of a request). */
static bool held_by(const char *var)
{
        const char *path = getenv(var);
        char held[4096];

        if (!path || !*path)
                return false;
        snprintf(held, sizeof(held), "%s.held", path);
        if (access(path, F_OK) != 0) {
                unlink(held);
                return false;
        }
        close(open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        return true;
}

static bool validation_held(void)
{
        return held_by("NETBROKERD_TEST_HOLD_VALIDATE");
}

static bool run_held(void)
{
        return held_by("NETBROKERD_TEST_HOLD_RUN");
}

/* The same for a failed batch's roll-back: it yields after each undo. */
static bool undo_held(void)
{
        return held_by("NETBROKERD_TEST_HOLD_UNDO");
}
#else
static bool validation_held(void)
{
        return false;
}

static bool run_held(void)
{
        return false;
}

static bool undo_held(void)
{
        return false;
}
#endif

static void validate_from_timer(void *data);

/* A validation step holds the links: they read their monitor once. */
static void links_hold(struct nbd_job *job, bool hold)
{
        const struct nbd_backend *be = job->ctx->be;

        if (be && be->links.hold && job->ctx->links)
                be->links.hold(job->ctx->links, hold);
}

/* Validate ops until the request is done (true) or the slice is used up:
 * then the job yields, and goes on from a timer (false). */
static bool validation_step(struct nbd_job *job)
{
        Netbroker__Request *req = job->req;
        bool keep_going = req->flags & NETBROKER__REQUEST_FLAG__REQUEST_FLAG_CONTINUE_ON_ERROR;
        uint64_t start = nbd_now_us();
        size_t first = job->v_next;
        bool more = true;

        /* Validation changes nothing: the links are read once a step. */
        links_hold(job, true);
        while (job->v_next < req->n_ops && job->v_bad == SIZE_MAX) {
                size_t i = job->v_next;

                if (i > first && (nbd_now_us() - start > SLICE_US || validation_held())) {
                        job->state = JOB_VALIDATING;
                        nbd_timer_arm(job->ctx->loop, &job->resume_timer, 0, validate_from_timer,
                                      job);
                        more = false;
                        break;
                }
                job->v_next++;
                if (validate_op(job, job->v, i) == 0)
                        continue;
                nbd_audit_refused(&job->peer, req->ops[i], job->results[i]);
                /* Going on after failures goes on after refusals too: a
                 * guest's clean-up batch still removes its firewall when its
                 * tap is gone already. */
                if (keep_going && !job->refused)
                        job->refused = calloc(req->n_ops, sizeof(*job->refused));
                if (keep_going && job->refused) {
                        job->refused[i] = true;
                        job->v_refused++;
                } else {
                        job->v_bad = i;
                }
        }
        links_hold(job, false);
        return more;
}

/* What validation kept goes (validation_end); 0, or -EINVAL when an op
 * was refused and nothing runs (every result says why). */
static int validation_finish(struct nbd_job *job)
{
        Netbroker__Request *req = job->req;
        size_t bad = job->v_bad;

        if (job->v_refused)
                nbd_stats[NBD_STAT_OP_ERRORS] += job->v_refused;
        validation_end(job, job->v);
        free(job->v);
        job->v = NULL;
        if (bad == SIZE_MAX)
                return 0;
        for (size_t i = 0; i < req->n_ops; i++)
                if (i != bad)
                        nbd_result_set(job->results[i], -ECANCELED, "not run: op %zu was refused",
                                       bad);
        return -EINVAL;
}

static void job_continue(struct nbd_job *job);
static void job_finish(struct nbd_job *job, enum job_state end);

/* Validate (a slice at a time), then run, or answer with the refusal. */
static void validate_and_run(struct nbd_job *job)
{
        if (!validation_step(job))
                return;
        if (validation_finish(job) < 0) {
                nbd_stat_inc(NBD_STAT_REQUESTS_REFUSED);
                job_finish(job, JOB_DONE);
                return;
        }
        job->state = JOB_RUNNING;
        job_continue(job);
}

static void validate_from_timer(void *data)
{
        struct nbd_job *job = data;

        if (job->state != JOB_VALIDATING)
                return;
        if (validation_held()) {
                nbd_timer_arm(job->ctx->loop, &job->resume_timer, 1, validate_from_timer, job);
                return;
        }
        job->state = JOB_RUNNING;
        validate_and_run(job);
}

/* ---- running ---- */

/* What a result holds in memory, decoded (its structs, pointer arrays,
 * strings and malloc's words), for each byte it packs to: a LinkList's
 * entry packs to some 60 bytes and holds some 240. A program's output is
 * one buffer, and was reserved before it ran (reply_budget): not charged. */
#define NBD_RESULT_MEMORY_FACTOR 4

/* The result of the op that ended is held until the reply goes: counted
 * against the reply's bound, and charged to its owner. The op keeps it
 * (what it did is done); once over either, the ops after it do not run. */
static void hold_result(struct nbd_job *job, Netbroker__Result *res)
{
        size_t n;

        if (!job->reply_max && !job->owner->hold)
                return;
        n = protobuf_c_message_get_packed_size(&res->base);
        job->reply_bytes += n;
        if (job->reply_full != SIZE_MAX)
                return;
        if ((job->reply_max && job->reply_bytes > job->reply_max) ||
            (job->owner->hold && res->out_case != NETBROKER__RESULT__OUT_EXEC &&
             !job->owner->hold(job->data, NBD_RESULT_MEMORY_FACTOR * n)))
                job->reply_full = job->next;
}

/* An op the full reply leaves unrun (hold_result): its result says so. */
static void reply_full_refuse(struct nbd_job *job, Netbroker__Result *res)
{
        nbd_result_set(res, -E2BIG,
                       "not run: the reply is full after op %zu (max_reply, %zu bytes, or this "
                       "connection's max_connection_memory)",
                       job->reply_full, job->reply_max);
}

/* An op has its result: count an error; after a failure, skip the rest
 * unless the request says to go on. */
static void op_finished(struct nbd_job *job)
{
        Netbroker__Request *req = job->req;
        Netbroker__Result *res = job->results[job->next];
        bool keep_going = req->flags & NETBROKER__REQUEST_FLAG__REQUEST_FLAG_CONTINUE_ON_ERROR;
        size_t failed = job->next;

        hold_result(job, res);
        /* What the op did not give is free again for the others. */
        if (job->fds_reserved && !job_ended(job)) {
                job->owner->reserve_fds(job->data, 0);
                job->fds_reserved = 0;
        }

        job->next++;
        job->ran = job->next;
        if (!res->status && job->late_failed == SIZE_MAX)
                return;
        if (res->status)
                nbd_stat_inc(NBD_STAT_OP_ERRORS);
        if (keep_going)
                return;
        /* An earlier op of a shared kernel call failed: the batch stops
         * there, as it would have had that op failed on its own. */
        if (job->late_failed < failed || !res->status)
                failed = job->late_failed;
        job->failed = failed;
        for (; job->next < req->n_ops; job->next++)
                nbd_result_set(job->results[job->next], -ECANCELED, "not run: op %zu failed",
                               failed);
}

void nbd_job_op_done(struct nbd_job *job)
{
        job->state = JOB_RUNNING;
        job->cancel_parked = NULL;
        job->parked_data = NULL;
        op_finished(job);
        job_continue(job);
}

void nbd_job_park(struct nbd_job *job, void (*cancel)(void *data), void *data)
{
        job->state = JOB_PARKED;
        job->cancel_parked = cancel;
        job->parked_data = data;
}

/* A spawn slot this job's caller may take now: root any of max_spawns;
 * another uid none of the root_reserved_spawns, and no more than
 * max_spawns_per_uid of its own. */
static bool slot_free(const struct nbd_job *job)
{
        const struct nbd_config *cfg = job->ctx->cfg;
        unsigned running = job->ctx->be->spawn.running();

        if (nbd_peer_is_root(&job->peer))
                return running < cfg->max_spawns;
        return running + cfg->root_reserved_spawns < cfg->max_spawns &&
               job->ctx->be->spawn.running_of(job->peer.uid) < cfg->max_spawns_per_uid;
}

static void kick_waiting(void *data);

/* From inside spawn.c's handling of a child's exit: resuming jobs there
 * would spawn and run ops under its feet, so they resume from the loop. */
static void on_child_reaped(void *data)
{
        (void)data;
        /* The first waiting job's timer (idle while it waits) tries them
         * all; if that job is cancelled first, the next one's is armed. */
        if (waiting_head)
                nbd_timer_arm(waiting_head->ctx->loop, &waiting_head->resume_timer, 0, kick_waiting,
                              NULL);
}

static unsigned waiting_of(uid_t uid)
{
        unsigned n = 0;

        for (const struct nbd_job *j = waiting_head; j; j = j->next_waiting)
                n += j->peer.uid == uid;
        return n;
}

int nbd_job_spawn_admit(struct nbd_job *job, Netbroker__Result *res, bool *ret_admitted)
{
        const struct nbd_config *cfg = job->ctx->cfg;
        const struct nbd_backend_spawn *sp = &job->ctx->be->spawn;
        uid_t uid = job->peer.uid;

        if (slot_free(job)) {
                *ret_admitted = true;
                return 0;
        }
        if (!nbd_peer_is_root(&job->peer) &&
            sp->running_of(uid) + waiting_of(uid) >= cfg->max_spawns_per_uid)
                return nbd_result_set(res, -EAGAIN,
                                      "exec: uid %u has %u programs running or waiting "
                                      "(max_spawns_per_uid=%u)",
                                      (unsigned)uid, sp->running_of(uid) + waiting_of(uid),
                                      cfg->max_spawns_per_uid);
        if (n_waiting >= cfg->max_pending_spawns)
                return nbd_result_set(
                        res, -EAGAIN,
                        "exec: %u programs are waiting to run already (max_pending_spawns)",
                        n_waiting);
        job->state = JOB_WAITING_SLOT;
        sp->on_reaped(on_child_reaped, NULL);
        job->next_waiting = NULL;
        if (waiting_tail)
                waiting_tail->next_waiting = job;
        else
                waiting_head = job;
        waiting_tail = job;
        n_waiting++;
        *ret_admitted = false;
        return 0;
}

static struct nbd_lane *lane_for(const struct nbd_dispatch_ctx *ctx, unsigned need);
static void roll_back(struct nbd_job *job);

static int int_cmp(const void *a, const void *b)
{
        int x = *(const int *)a, y = *(const int *)b;

        return (x > y) - (x < y);
}

/* Whether undo u may run while the joint call its kind's undos joined is
 * still to come (issue 14: the devices the batch made go in one deletion
 * at the end, one RCU grace period for all, not one each in its undo's
 * place). u is then of that kind, or it works on an interface the batch
 * made: the undos of a device's other changes (limits, addresses, bridge
 * options) are newer than its create and ran before it joined; an older
 * one on another device the batch made sees the joined devices still
 * there, and its interface goes with them anyway. Any other undo (one on
 * an interface that was there before the batch and stays, or one that
 * says none) sees the newer devices gone, as newest first would have
 * them: a device that existed before may hold a new one (a macvlan's
 * parent cannot join a bridge while it has one). */
static bool may_run_before_joint(const struct nbd_job *job, const struct undo *u)
{
        if (!job->joint)
                return true;
        if (u->joint)
                return u->joint == job->joint_kind;
        return u->ifindex && job->made &&
               bsearch(&u->ifindex, job->made, job->n_made, sizeof(*job->made), int_cmp);
}

/* job->made, for may_run_before_joint: sorted once, so that a batch of
 * thousands of devices and their limits is not a walk of the undo list for
 * each undo. */
static void note_made(struct nbd_job *job)
{
        size_t n = 0;

        for (const struct undo *u = job->undos; u; u = u->next)
                n += u->joint != NULL;
        job->made = malloc((n ? n : 1) * sizeof(*job->made));
        if (!job->made)
                return;
        for (const struct undo *u = job->undos; u; u = u->next)
                if (u->joint)
                        job->made[job->n_made++] = u->ifindex;
        qsort(job->made, job->n_made, sizeof(*job->made), int_cmp);
}

static void joint_lane_run(void *data)
{
        struct nbd_job *job = data;

        job->joint_kind->run(job->joint);
}

static void joint_done(struct nbd_job *job)
{
        const struct nbd_undo_joint *kind = job->joint_kind;
        void *joint = job->joint;

        job->joint = NULL;
        job->joint_kind = NULL;
        kind->done(job, joint);
}

/* On the loop: the joint call returned, or (the helper stopping) never
 * began, which its state tells done(). The roll-back goes on to its end
 * even when the client went away meanwhile: what the batch made must not
 * stay. */
static void joint_lane_finished(void *data, bool not_run)
{
        struct nbd_job *job = data;

        (void)not_run;
        job->lane = NULL;
        joint_done(job);
        roll_back(job);
}

/* The joint call pending goes: true when it went to its lane (the job
 * waits there, JOB_UNDOING, and is not freed before it returned), false
 * when it ran here (no lane: the fake kernel, tests of the dispatcher). */
static bool joint_flush(struct nbd_job *job)
{
        struct nbd_lane *lane = lane_for(job->ctx, job->joint_kind->need);

        if (lane) {
                job->lane = lane;
                job->work = (struct nbd_lane_work){
                        .run = joint_lane_run, .done = joint_lane_finished, .data = job};
                if (nbd_lane_submit(lane, &job->work) == 0) {
                        if (job->state != JOB_CANCELLED)
                                job->state = JOB_UNDOING;
                        return true;
                }
                /* No fd for the lane's eventfd: here, which is only slower. */
                job->lane = NULL;
        }
        job->joint_kind->run(job->joint);
        joint_done(job);
        return false;
}

static void undo_lane_run(void *data)
{
        struct nbd_job *job = data;

        job->undo_on_lane->lane_fn(job->undo_on_lane->data);
}

/* On the loop: an undo's own call returned (its op's result set by
 * finish), or, the helper stopping, never began (its op says so). The
 * roll-back goes on, to its end even when the client went away. */
static void undo_lane_finished(void *data, bool not_run)
{
        struct nbd_job *job = data;
        struct undo *u = job->undo_on_lane;

        job->lane = NULL;
        job->undo_on_lane = NULL;
        if (not_run)
                nbd_job_mark_undo_skipped(job, u->op, "not run: the helper is stopping");
        else
                u->finish(job, u->data);
        roll_back(job);
}

/* An undo with a call of its own on a lane (nbd_job_on_failure_lane):
 * prepare on the loop, the call on the lane (true: the job waits there,
 * JOB_UNDOING, and is not freed before it returned), or here when there
 * is no lane (the fake kernel) or no eventfd for it (the lane is idle
 * then); false too when prepare found nothing to do. */
static bool undo_on_lane(struct nbd_job *job, struct undo *u)
{
        struct nbd_lane *lane = lane_for(job->ctx, u->need);

        if (!u->prepare(job, u->data, job->failed))
                return false;
        if (lane) {
                job->lane = lane;
                job->undo_on_lane = u;
                job->work = (struct nbd_lane_work){
                        .run = undo_lane_run, .done = undo_lane_finished, .data = job};
                if (nbd_lane_submit(lane, &job->work) == 0) {
                        if (job->state != JOB_CANCELLED)
                                job->state = JOB_UNDOING;
                        return true;
                }
                job->lane = NULL;
                job->undo_on_lane = NULL;
        }
        u->lane_fn(u->data);
        u->finish(job, u->data);
        return false;
}

static void job_wind_up(struct nbd_job *job);

static void roll_back_from_timer(void *data)
{
        struct nbd_job *job = data;

        if (undo_held()) {
                nbd_timer_arm(job->ctx->loop, &job->resume_timer, 1, roll_back_from_timer, job);
                return;
        }
        roll_back(job);
}

/* Undo, newest first, what the ops before the failed one changed, and say
 * so in their results; from job->undo_next on, so that it goes on where a
 * joint call stopped it. Undos of a joint kind (the devices the batch
 * made) do on the loop what needs no wait and join one call, made on its
 * lane when the roll-back reaches an undo that must see it done
 * (may_run_before_joint), or its end: the results of the joined ops are
 * set, and their audit lines written, when it returned. Then the job's
 * end. It yields to the loop every 2 ms, as a job's run does (each join
 * is a request to the kernel: 2,000 devices held the loop 35 ms). */
static void roll_back(struct nbd_job *job)
{
        uint64_t start = nbd_now_us();
        bool first = true;

        while (job->undo_next) {
                struct undo *u = job->undo_next;
                struct nbd_err err;
                bool joined = false;

                /* A cancelled job's roll-back runs to its end (or its
                 * lane): the helper may be stopping, and a timer would
                 * never fire, leaving the devices in the group. */
                if (!first && job->state != JOB_CANCELLED &&
                    (nbd_now_us() - start > SLICE_US || undo_held())) {
                        job->state = JOB_UNDOING;
                        nbd_timer_arm(job->ctx->loop, &job->resume_timer, 0, roll_back_from_timer,
                                      job);
                        return;
                }
                first = false;

                if (!may_run_before_joint(job, u) && joint_flush(job))
                        return;
                job->undo_next = u->next;
                if (u->call) {
                        u->call(job, u->data, job->failed);
                        continue;
                }
                if (u->lane_fn) {
                        if (undo_on_lane(job, u))
                                return;
                        continue;
                }
                if (u->joint) {
                        if (u->joint->join(job, u->op, u->data, &job->joint, &joined, &err) < 0)
                                nbd_job_mark_undo_skipped(job, u->op, err.msg);
                        else if (!joined)
                                nbd_job_mark_undone(job, u->op);
                        if (job->joint)
                                job->joint_kind = u->joint;
                        continue;
                }
                if (u->checked && u->checked(job, u->data, &err) < 0) {
                        nbd_job_mark_undo_skipped(job, u->op, err.msg);
                        continue;
                }
                if (u->undo)
                        u->undo(job, u->data);
                nbd_job_mark_undone(job, u->op);
        }
        if (job->joint && joint_flush(job))
                return;
        job_wind_up(job);
}

static void free_undos(struct nbd_job *job)
{
        while (job->undos) {
                struct undo *u = job->undos;
                job->undos = u->next;
                u->free_data(u->data);
                free(u);
        }
}

/* A large request leaves the heap grown by its decoded tree and, several
 * times that, by what it compiled and sent (a 1,000-rule FirewallApply:
 * 320 KB decoded, a main-heap peak of 7 MB; 4,096 guests: 106 MB). A chunk
 * still live above them (a reply, or what another client's request
 * allocated meanwhile) keeps glibc from shrinking the heap's top, so the
 * helper would stay at its peak. malloc_trim() gives back every free page
 * wherever it lies: 2 ms here, on the loop. It runs once a burst of large
 * requests is over, not after each: trimming after every 1,000-rule apply
 * made the next one 35% slower (57 -> 78 ms, its pages faulted in again). */
#define LARGE_REQUEST_DECODED (256u << 10)
#define TRIM_IDLE_MS 200

static void trim_heap(void *data)
{
        (void)data;
        malloc_trim(0);
}

static void job_free(void *p)
{
        struct nbd_job *job = p;

        nbd_timer_cancel(job->ctx->loop, &job->resume_timer);
        if (job->v) {
                /* Cancelled while it was validated. */
                validation_end(job, job->v);
                free(job->v);
        }
        free_undos(job);
        free(job->made);
        free(job->refused);
        for (size_t i = 0; i < job->n_resolved; i++)
                free(job->resolved[i]);
        free(job->resolved);
        if (job->batch_data && job->batch_free)
                job->batch_free(job->batch_data);
        if (job->results) {
                for (size_t i = 0; i < job->req->n_ops; i++)
                        if (job->results[i])
                                protobuf_c_message_free_unpacked(&job->results[i]->base, NULL);
                free(job->results);
        }
        /* Large in what it decoded, or in what its results held. */
        bool large = job->budget->used >= LARGE_REQUEST_DECODED ||
                     job->reply_bytes >= LARGE_REQUEST_DECODED;
        const struct nbd_dispatch_ctx *ctx = job->ctx;

        nbp_close_fds(job->fds, job->nfds);
        free(job->fds);
        nbp_pb_budget_release(job->budget);
        free(job->budget);
        free(job);
        if (large && ctx->trim_timer)
                nbd_timer_arm(ctx->loop, ctx->trim_timer, TRIM_IDLE_MS, trim_heap, NULL);
}

/* The job's reply (none when cancelled), and its end. */
static void job_reply(struct nbd_job *job, bool cancelled)
{
        Netbroker__Reply reply = NETBROKER__REPLY__INIT;

        /* The request's own fds (netns fds) are of no use past this point. */
        nbp_close_fds(job->fds, job->nfds);
        reply.id = job->req->id;
        reply.n_results = job->req->n_ops;
        reply.results = job->results;
        if (!cancelled)
                job->owner->done(job, &reply, job->data);
        /* A call still on a lane uses the job's data: freed when it ends. */
        if (!job->lane)
                nbd_loop_defer_free(job->ctx->loop, job_free, job);
}

/* fw_gone's clean-ups ended: the reply that waited for them goes. */
static void reply_after_gone(void *data)
{
        struct nbd_job *job = data;

        job->state = JOB_DONE;
        job_reply(job, false);
}

/* Did an op that ran touch interfaces (and so maybe make some go)? The
 * firewall's ops read them only. */
static bool ran_link_ops(const struct nbd_job *job)
{
        for (size_t i = 0; i < job->ran; i++) {
                const struct nbd_op_handler *h = handler_for(job->ctx, job->req->ops[i]);
                if (h && (h->needs & NBD_NEEDS_LINKS) && !(h->needs & NBD_NEEDS_FIREWALL) &&
                    (!job->refused || !job->refused[i]))
                        return true;
        }
        return false;
}

/* End the job as end (JOB_DONE: its reply goes to the owner; or
 * JOB_CANCELLED). */
static void job_finish(struct nbd_job *job, enum job_state end)
{
        bool cancelled = end == JOB_CANCELLED;

        /* Once: a job cancelled while one of its ops runs (its owner went
         * away in the middle of it) is finished by the cancel, and the op's
         * return must not finish it again. */
        if (job_ended(job) || job->state == JOB_REPLY_WAIT || job->state == JOB_UNDOING)
                return;
        job->state = end;
        /* Batched ops not yet sent learn how the batch ended first (they
         * may still commit, and a failure of theirs is undone too). */
        if (job->batch_finish && !cancelled)
                job->batch_finish(job, job->batch_data, job->failed);
        /* Every op that ran, as it ended (a firewall op's commit is done by
         * now); the undo below adds a line for each op it undoes. */
        for (size_t i = 0; i < job->ran; i++)
                if (!job->refused || !job->refused[i])
                        nbd_audit_op(&job->peer, job->req->ops[i], job->results[i],
                                     job->results[i]->status ? NBD_AUDIT_FAILED : NBD_AUDIT_DONE);
        if (job->failed != SIZE_MAX && !cancelled) {
                job->undo_next = job->undos;
                note_made(job);
                roll_back(job); /* then job_wind_up() */
                return;
        }
        job_wind_up(job);
}

/* The job's end, once its roll-back is done (which may have waited for a
 * lane: the client may have gone away meanwhile). */
static void job_wind_up(struct nbd_job *job)
{
        bool cancelled = job->state == JOB_CANCELLED;

        if (job->state == JOB_UNDOING)
                job->state = JOB_DONE;
        for (size_t i = 0; i < job->ctx->n_job_end; i++)
                job->ctx->job_end[i].fn(job->ctx->job_end[i].data);
        /* The owners of the interfaces this job made go are removed on the
         * firewall's lane (fw_gone.h): the reply comes after, so that a
         * device of the same name made next inherits no rule. */
        if (!cancelled && nbd_fw_gone_pending(job->ctx->fw_gone) && ran_link_ops(job)) {
                job->state = JOB_REPLY_WAIT;
                job->gone_wait = (struct nbd_fw_gone_waiter){.fn = reply_after_gone, .data = job};
                nbd_fw_gone_wait(job->ctx->fw_gone, &job->gone_wait);
                return;
        }
        job_reply(job, cancelled);
}

static void resume_from_timer(void *data);

/* ---- lanes ---- */

static struct nbd_lane *lane_for(const struct nbd_dispatch_ctx *ctx, unsigned need)
{
        if (need & NBD_NEEDS_FIREWALL)
                return ctx->lane_fw;
        if (need & NBD_NEEDS_LINKS)
                return ctx->lane_links;
        return NULL;
}

/* The op h is next and a capability it needs is busy on its lane: the job
 * waits its turn, so that what it reads of the kernel is what the call
 * under way left. Ping, Stats and other capabilities go on. The lane idle,
 * it waits too when others wait already and this is not its turn: a job
 * whose call just returned (job_lane_finished) goes behind the jobs that
 * waited for that call, one call a turn, round robin (else one request of
 * 4,096 RouteLists kept every other client's link ops, root's too, until
 * it ended). A job that holds its op's fds (reserved while its lane was
 * free, and the lane taken again before it resumed) goes first: it holds
 * them while the call under way ends, not behind every job that came
 * meanwhile; the lane idle, it goes on. */
static bool wait_for_lane(struct nbd_job *job, const struct nbd_op_handler *h)
{
        for (size_t i = 0; i < N_LANE_QUEUES; i++) {
                struct lane_queue *q = &lane_queues[i];
                if (!((h->needs | h->lanes) & q->need))
                        continue;
                if (!nbd_lane_busy(lane_for(job->ctx, q->need)) &&
                    (!q->head || q->turn == job || job->fds_reserved))
                        continue;
                job->state = JOB_WAITING_LANE;
                job->lane_queue = i;
                job->next_lane_wait = NULL;
                if (job->fds_reserved && q->head) {
                        job->next_lane_wait = q->head;
                        q->head = job;
                        return true;
                }
                if (q->tail)
                        q->tail->next_lane_wait = job;
                else
                        q->head = job;
                q->tail = job;
                return true;
        }
        return false;
}

static void unlink_lane_wait(struct nbd_job *job)
{
        struct lane_queue *q = &lane_queues[job->lane_queue];
        struct nbd_job *prev = NULL;

        for (struct nbd_job *j = q->head; j; prev = j, j = j->next_lane_wait) {
                if (j != job)
                        continue;
                if (prev)
                        prev->next_lane_wait = j->next_lane_wait;
                else
                        q->head = j->next_lane_wait;
                if (q->tail == j)
                        q->tail = prev;
                return;
        }
}

/* A lane has done all it was given: its waiting jobs go on, in order,
 * each for its turn, until one of them gives it work again. A turn ends
 * with the job's next call on the lane (which it makes past those still
 * waiting), or when the job stops for anything else (its slice of the
 * loop used up, fds, a child): then the next one's begins. */
static void lane_idle(void *data)
{
        struct lane_queue *q = data;

        while (q->head && !nbd_lane_busy(q->lane)) {
                struct nbd_job *job = q->head;
                q->head = job->next_lane_wait;
                if (!q->head)
                        q->tail = NULL;
                job->state = JOB_RUNNING;
                q->turn = job;
                job_continue(job);
                q->turn = NULL;
        }
}

/* The queue of lane's jobs, or NULL. */
static struct lane_queue *queue_of(const struct nbd_lane *lane)
{
        for (size_t i = 0; i < N_LANE_QUEUES; i++)
                if (lane && lane_queues[i].lane == lane)
                        return &lane_queues[i];
        return NULL;
}

void nbd_dispatch_set_lanes(struct nbd_dispatch_ctx *ctx, struct nbd_lane *fw,
                            struct nbd_lane *links)
{
        ctx->lane_fw = fw;
        ctx->lane_links = links;
        nbd_fw_gone_set_lane(ctx->fw_gone, fw);
        for (size_t i = 0; i < N_LANE_QUEUES; i++) {
                struct lane_queue *q = &lane_queues[i];
                q->lane = lane_for(ctx, q->need);
                if (q->lane)
                        nbd_lane_on_idle(q->lane, lane_idle, q);
        }
}

static void job_lane_run(void *data)
{
        struct nbd_job *job = data;

        job->lane_fn(job->lane_data);
}

/* On the loop: the call returned (or, when the helper stops, never ran).
 * The job's turn on the lane is over: its next op that needs the lane
 * waits behind the jobs that waited for this call (wait_for_lane). But a
 * read the op needed before it runs (nbd_job_on_lane_first) is part of
 * the op's turn: the op runs again at once, and a batch's commit follows
 * the table it was compiled against with no one else's call between,
 * as when no one waits (else each commit's generation mark would name a
 * generation another's commit had passed, and the next batch would dump
 * every chain: a second at 4,096 guests). */
static void job_lane_finished(void *data, bool not_run)
{
        struct nbd_job *job = data;
        struct lane_queue *q = queue_of(job->lane);

        job->lane = NULL;
        job->lane_read = false;
        if (job->state == JOB_CANCELLED) {
                /* Its client went away while the call ran: the call did
                 * what it did; the audit trail says so, op by op. (A read
                 * before an op did nothing to audit.) */
                if (!not_run && !job->lane_again) {
                        job->lane_done(job, job->lane_data);
                        for (size_t i = job->lane_first; i <= job->next; i++)
                                if (!job->refused || !job->refused[i])
                                        nbd_audit_op(&job->peer, job->req->ops[i], job->results[i],
                                                     job->results[i]->status
                                                             ? NBD_AUDIT_FAILED_CLIENT_GONE
                                                             : NBD_AUDIT_DONE_CLIENT_GONE);
                }
                nbd_loop_defer_free(job->ctx->loop, job_free, job);
                return;
        }
        job->lane_first = SIZE_MAX;
        if (job->lane_again && !not_run) {
                /* The op's read is in: the op runs again, from the loop's
                 * FIFO of the lane like any op that needs it. */
                job->lane_again = false;
                job->op_counted = true;
                job->state = JOB_RUNNING;
                if (q)
                        q->turn = job;
                job_continue(job);
                if (q)
                        q->turn = NULL;
                return;
        }
        job->lane_again = false;
        if (not_run) {
                nbd_result_set(job->results[job->next], -ECANCELED,
                               "not run: the helper is stopping");
        } else {
                /* done may park the job (a removed network's programs,
                 * stopped after the commit that removed it: op_net.c);
                 * then the op ends with nbd_job_op_done(). */
                job->state = JOB_RUNNING;
                job->lane_done(job, job->lane_data);
                if (job->state == JOB_PARKED)
                        return;
        }
        nbd_job_op_done(job);
}

bool nbd_job_on_lane_first(struct nbd_job *job, unsigned need, void (*fn)(void *data), void *data)
{
        struct nbd_lane *lane = lane_for(job->ctx, need);

        if (lane) {
                job->lane = lane;
                job->lane_fn = fn;
                job->lane_done = NULL;
                job->lane_data = data;
                job->lane_again = true;
                job->lane_first = job->next; /* nothing of this op ran yet */
                job->work = (struct nbd_lane_work){
                        .run = job_lane_run, .done = job_lane_finished, .data = job};
                job->state = JOB_ON_LANE;
                if (nbd_lane_submit(lane, &job->work) == 0)
                        return true;
                /* No fd for the lane's eventfd: here, which is only slower. */
                job->lane = NULL;
                job->lane_again = false;
                job->lane_first = SIZE_MAX;
                job->state = JOB_RUNNING;
        }
        fn(data);
        return false;
}

void nbd_job_on_lane(struct nbd_job *job, unsigned need, void (*fn)(void *data),
                     void (*done)(struct nbd_job *job, void *data), void *data)
{
        struct nbd_lane *lane = lane_for(job->ctx, need);

        if (!lane) {
                job->lane_first = SIZE_MAX;
                fn(data);
                done(job, data);
                return;
        }
        if (job->lane_first > job->next)
                job->lane_first = job->next;
        job->lane = lane;
        job->lane_fn = fn;
        job->lane_done = done;
        job->lane_data = data;
        job->work =
                (struct nbd_lane_work){.run = job_lane_run, .done = job_lane_finished, .data = job};
        job->state = JOB_ON_LANE;
        if (nbd_lane_submit(lane, &job->work) < 0) {
                /* No fd for the lane's eventfd: here, which is only slower. */
                job->lane = NULL;
                job->lane_first = SIZE_MAX;
                job->state = JOB_RUNNING;
                fn(data);
                done(job, data);
        }
}

void nbd_job_on_lane_read(struct nbd_job *job, unsigned need, void (*fn)(void *data),
                          void (*done)(struct nbd_job *job, void *data), void *data)
{
        job->lane_read = true;
        nbd_job_on_lane(job, need, fn, done, data);
        if (job->state != JOB_ON_LANE)
                job->lane_read = false; /* it ran here */
}

struct detached {
        struct nbd_lane_work work;
        void (*fn)(void *data);
        void (*release)(void *data);
        void *data;
};

static void detached_run(void *data)
{
        struct detached *d = data;

        d->fn(d->data);
}

static void detached_done(void *data, bool not_run)
{
        struct detached *d = data;

        (void)not_run;
        d->release(d->data);
        free(d);
}

void nbd_dispatch_on_lane(const struct nbd_dispatch_ctx *ctx, unsigned need, void (*fn)(void *data),
                          void (*release)(void *data), void *data)
{
        struct nbd_lane *lane = lane_for(ctx, need);
        struct detached *d = lane ? malloc(sizeof(*d)) : NULL;

        /* Out of memory: on the loop, which is only slower. */
        if (!d) {
                fn(data);
                release(data);
                return;
        }
        *d = (struct detached){.work = {.run = detached_run, .done = detached_done, .data = d},
                               .fn = fn,
                               .release = release,
                               .data = data};
        if (nbd_lane_submit(lane, &d->work) < 0) {
                free(d);
                fn(data);
                release(data);
        }
}

/* The op's own checks again, on the names its references stand for now:
 * its policy is decided on the real name, as if the caller had written it
 * (an interface this batch made counts as made, as for an explicit name). */
static int revalidate(struct nbd_job *job, const struct nbd_op_handler *h, Netbroker__Op *op,
                      Netbroker__Result *res, char *const *names, size_t n)
{
        struct nbd_validation v = {
                .ctx = job->ctx, .peer = &job->peer, .nfds = job->nfds, .fds = job->fds};
        /* Room for the made names, and what the op itself creates or
         * looks up (two each at most: a LinkSet's name and master). */
        const size_t room = 2 * NBD_OPREF_SLOTS + 2;
        int r;

        v.created = calloc(room, sizeof(*v.created));
        v.exists = calloc(room, sizeof(*v.exists));
        v.fd_used = calloc(job->nfds ? job->nfds : 1, sizeof(*v.fd_used));
        if (!v.created || !v.exists || !v.fd_used) {
                r = nbd_result_set(res, -ENOMEM, "%s: out of memory", h->name);
                goto out;
        }
        for (size_t j = 0; j < n; j++)
                nbd_validation_created(&v, names[j]);
        r = h->validate(&v, op, res);
        if (r < 0 && !res->status)
                nbd_result_set(res, r, "%s: %s", h->name, strerror(-r));
out:
        /* Not validation_end(): the request's fds stay with the job. */
        if (v.cache_free)
                v.cache_free(v.cache);
        for (size_t i = 0; i < v.n_claims; i++)
                free(v.claims[i]);
        free(v.claims);
        free(v.claim_slots);
        free(v.created);
        free(v.exists);
        free(v.exist_slots);
        free(v.fd_used);
        return r;
}

/* The op about to run: each reference (opref.h) becomes the name its op
 * made, and the op is validated again on those names. Lanes see only the
 * names: this runs on the loop before the op's run(). */
static int resolve_refs(struct nbd_job *job, const struct nbd_op_handler *h)
{
        size_t i = job->next, n_done = 0;
        Netbroker__Op *op = job->req->ops[i];
        Netbroker__Result *res = job->results[i];
        char **slots[NBD_OPREF_SLOTS], *done[NBD_OPREF_SLOTS];
        size_t n = nbd_opref_slots(op, slots);
        int r = 0;

        for (size_t j = 0; j < n && r == 0; j++) {
                const char *name;
                char **p, *copy = NULL;

                if (!nbd_opref_is(*slots[j]))
                        continue;
                r = nbd_opref_resolve(job->results, i, *slots[j], &name, res);
                if (r < 0)
                        break;
                p = realloc(job->resolved, (job->n_resolved + 1) * sizeof(*p));
                if (p) {
                        job->resolved = p;
                        copy = strdup(name);
                }
                if (!copy) {
                        r = nbd_result_set(res, -ENOMEM, "%s: out of memory", h->name);
                        break;
                }
                nbd_debug("request %" PRIu64 ": op %zu: %s is %s", job->req->id, i, *slots[j],
                          copy);
                job->resolved[job->n_resolved++] = copy;
                *slots[j] = copy;
                done[n_done++] = copy;
        }
        if (r == 0 && n_done && h->validate)
                r = revalidate(job, h, op, res, done, n_done);
        return r;
}

/* The fds op h is about to make are reserved first: each one is the
 * helper's until its client takes it, and the helper has few, so a caller
 * whose share is held waits here, before its op opens them, instead of
 * queueing them in the helper. Not before its lane is free: the job holds
 * no reservation while others' calls run, but the one under way when the
 * reservation came late (wait_for_lane puts it first). */
static bool wait_for_fds(struct nbd_job *job, const struct nbd_op_handler *h)
{
        unsigned n = h->fds ? h->fds(job->req->ops[job->next]) : 0;

        if (!n || !job->owner->reserve_fds || job->fds_reserved >= n)
                return false;
        if (job->owner->reserve_fds(job->data, n) == 0) {
                job->fds_reserved = n;
                return false;
        }
        job->state = JOB_WAITING_FDS;
        return true;
}

static void job_continue(struct nbd_job *job)
{
        Netbroker__Request *req = job->req;
        uint64_t start = nbd_now_us();
        size_t first = job->next;

        while (job->next < req->n_ops && !job_ended(job)) {
                const struct nbd_op_handler *h = handler_for(job->ctx, req->ops[job->next]);
                int r;

                if (job->refused && job->refused[job->next]) {
                        job->next++; /* its result says why; counted already */
                        continue;
                }
                /* Fds are queued: wait until they are out, so the
                 * helper never holds more than a handful. */
                if (job->state == JOB_OUTPUT_BLOCKED)
                        return;
                if (job->next > first && (nbd_now_us() - start > SLICE_US || run_held())) {
                        job->state = JOB_YIELDED;
                        nbd_timer_arm(job->ctx->loop, &job->resume_timer, 0, resume_from_timer,
                                      job);
                        return;
                }
                /* Interfaces gone so far have their owners removed first
                 * (fw_gone.h: on the firewall's lane, which this op then
                 * waits for): else this op reads them as still there. */
                if ((h->needs & NBD_NEEDS_FIREWALL) && job->ctx->links)
                        job->ctx->be->links.flush_gone(job->ctx->links);
                /* An op the full reply leaves unrun makes nothing: it
                 * waits for no fds. */
                if (wait_for_lane(job, h) || (job->reply_full == SIZE_MAX && wait_for_fds(job, h)))
                        return;
                /* An op resumed after waiting for a slot, or for its read
                 * on a lane, was counted already. */
                if (job->state != JOB_SLOT_FREE && !job->op_counted)
                        nbd_stat_inc(h->stat);
                job->op_counted = false;
                job->state = JOB_RUNNING;
                /* Per op, so that debug logging traces a batch; off, each is
                 * two integer compares (the bench's `log` scenario). */
                nbd_debug("request %" PRIu64 ": op %zu of %zu, %s", req->id, job->next, req->n_ops,
                          h->name);
                if (job->reply_full != SIZE_MAX) {
                        reply_full_refuse(job, job->results[job->next]);
                        op_finished(job);
                        continue;
                }
                r = resolve_refs(job, h);
                if (r == 0)
                        r = h->run(job, req->ops[job->next], job->results[job->next]);
                /* Parking is the job's state, never a return value: any
                 * errno, EPERM included, is an answer. */
                if (job->state == JOB_PARKED || job->state == JOB_WAITING_SLOT ||
                    job->state == JOB_ON_LANE)
                        return;
                if (r < 0 && !job->results[job->next]->status)
                        nbd_result_set(job->results[job->next], r, "%s: %s", h->name, strerror(-r));
                nbd_debug("request %" PRIu64 ": op %zu: status %d", req->id, job->next,
                          (int)job->results[job->next]->status);
                op_finished(job);
        }
        job_finish(job, JOB_DONE);
}

/* A yielded job goes on. */
static void resume_from_timer(void *data)
{
        struct nbd_job *job = data;

        if (job->state != JOB_YIELDED)
                return;
        if (run_held()) {
                nbd_timer_arm(job->ctx->loop, &job->resume_timer, 1, resume_from_timer, job);
                return;
        }
        job->state = JOB_RUNNING;
        job_continue(job);
}

static void resume(void *data)
{
        struct nbd_job *job = data;

        if (job->state != JOB_OUTPUT_DRAINED)
                return;
        job->state = JOB_RUNNING;
        job_continue(job);
}

void nbd_job_output_drained(struct nbd_job *job)
{
        /* Not from inside the owner's flush: resume from the loop. */
        if (job->state != JOB_OUTPUT_BLOCKED)
                return;
        job->state = JOB_OUTPUT_DRAINED;
        nbd_timer_arm(job->ctx->loop, &job->resume_timer, 0, resume, job);
}

void nbd_job_fds_reserved(struct nbd_job *job)
{
        const Netbroker__Op *op;
        const struct nbd_op_handler *h;

        if (job->state != JOB_WAITING_FDS)
                return;
        /* Held from now: should its lane be taken before it resumes, it
         * waits there first in line (wait_for_lane). */
        op = job->req->ops[job->next];
        h = handler_for(job->ctx, op);
        job->fds_reserved = h->fds ? h->fds(op) : 0;
        job->state = JOB_OUTPUT_DRAINED;
        nbd_timer_arm(job->ctx->loop, &job->resume_timer, 0, resume, job);
}

static void unlink_waiting(struct nbd_job *job);

/* Start, in order, every waiting job whose caller may take a slot now: a
 * job of a uid at its share does not hold up root's or another uid's. */
static void kick_waiting(void *data)
{
        struct nbd_job *job = waiting_head;

        (void)data;
        while (job && job->ctx->be->spawn.running() < job->ctx->cfg->max_spawns) {
                struct nbd_job *next = job->next_waiting;
                if (slot_free(job)) {
                        unlink_waiting(job);
                        job->state = JOB_SLOT_FREE;
                        job_continue(job);
                        /* The job may have ended others (its connection's);
                         * start again from the head. */
                        next = waiting_head;
                }
                job = next;
        }
}

static void unlink_waiting(struct nbd_job *job)
{
        struct nbd_job *prev = NULL;

        for (struct nbd_job *j = waiting_head; j; prev = j, j = j->next_waiting) {
                if (j != job)
                        continue;
                if (prev)
                        prev->next_waiting = j->next_waiting;
                else
                        waiting_head = j->next_waiting;
                if (waiting_tail == j)
                        waiting_tail = prev;
                n_waiting--;
                return;
        }
}

void nbd_job_cancel(struct nbd_job *job)
{
        if (!job || job_ended(job))
                return;
        if (job->state == JOB_UNDOING) {
                /* Its roll-back yielded, or its joint call runs on a lane:
                 * the roll-back goes on to its end (the batch's devices must
                 * not stay), and the job is freed then, unanswered. One
                 * that yielded goes on here, unsliced: the helper may be
                 * stopping (the loop's last turn). */
                job->state = JOB_CANCELLED;
                if (!job->lane) {
                        nbd_timer_cancel(job->ctx->loop, &job->resume_timer);
                        roll_back(job);
                }
                return;
        }
        if (job->state == JOB_WAITING_SLOT) {
                bool kicked = job->resume_timer.deadline_ms != 0;

                unlink_waiting(job);
                nbd_timer_cancel(job->ctx->loop, &job->resume_timer);
                if (kicked)
                        on_child_reaped(NULL);
        }
        if (job->state == JOB_WAITING_LANE)
                unlink_lane_wait(job);
        if (job->state == JOB_REPLY_WAIT) {
                /* Ended already: only the reply is left, and nobody to
                 * take it. */
                nbd_fw_gone_unwait(job->ctx->fw_gone, &job->gone_wait);
                job->state = JOB_CANCELLED;
                job_reply(job, true);
                return;
        }
        if (job->state == JOB_ON_LANE) {
                /* The call runs to its end, and the job is freed after it;
                 * the ops it decides are audited then, as they ended
                 * (job_lane_finished), not here as if they had failed. Even
                 * one the lane has not begun: the ops before it are done
                 * and wait on it (a LinkDelete run's devices are in their
                 * group). Only a read for an op not yet run is let go. */
                job->ran = job->lane_first;
                if (job->lane_again || job->lane_read)
                        nbd_lane_cancel(job->lane, &job->work);
        }
        if (job->cancel_parked) {
                /* The op under way (an Exec) is stopped: it ran, and the
                 * audit trail says how it ended. */
                nbd_result_set(job->results[job->next], -ECANCELED,
                               "stopped: the client went away");
                job->ran = job->next + 1;
                job->cancel_parked(job->parked_data);
        }
        job->cancel_parked = NULL;
        job_finish(job, JOB_CANCELLED);
}

int nbd_job_start(const struct nbd_dispatch_ctx *ctx, const struct nbd_job_origin *origin,
                  Netbroker__ClientMessage *msg, struct nbp_pb_budget *budget, int *fds,
                  size_t nfds, const struct nbd_job_owner *owner, void *data, struct nbd_job **ret)
{
        struct nbd_job *job = calloc(1, sizeof(*job));

        if (!job)
                return -ENOMEM;
        job->ctx = ctx;
        job->peer = origin->peer;
        job->msg = msg;
        job->req = msg->request;
        job->budget = budget;
        job->owner = owner;
        job->data = data;
        job->failed = SIZE_MAX;
        job->last_batched = SIZE_MAX;
        job->late_failed = SIZE_MAX;
        job->lane_first = SIZE_MAX;
        job->reply_budget = origin->reply_budget;
        job->reply_max = origin->reply_max;
        job->reply_full = SIZE_MAX;
        job->results = calloc(job->req->n_ops ? job->req->n_ops : 1, sizeof(*job->results));
        if (nfds)
                job->fds = malloc(nfds * sizeof(int));
        if (!job->results || (nfds && !job->fds))
                goto oom;
        for (size_t i = 0; i < job->req->n_ops; i++) {
                job->results[i] = malloc(sizeof(**job->results));
                if (!job->results[i])
                        goto oom;
                netbroker__result__init(job->results[i]);
        }
        if (nfds)
                memcpy(job->fds, fds, nfds * sizeof(int));
        job->nfds = nfds;
        *ret = job;
        if (validation_begin(job) < 0) {
                nbd_stat_inc(NBD_STAT_REQUESTS_REFUSED);
                job_finish(job, JOB_DONE);
                return 0;
        }
        validate_and_run(job);
        return 0;
oom:
        if (job->results) {
                for (size_t i = 0; i < job->req->n_ops; i++)
                        if (job->results[i])
                                protobuf_c_message_free_unpacked(&job->results[i]->base, NULL);
                free(job->results);
        }
        free(job->fds);
        free(job);
        return -ENOMEM;
}
