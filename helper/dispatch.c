/* Validation and execution of requests; see dispatch.h. */
#include "dispatch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "spawn.h"
#include "stats.h"

NB_LOG_CATEGORY(dispatch);

const char *const nb_features[] = {"ping", "stats", "exec"};
const size_t nb_n_features = sizeof(nb_features) / sizeof(*nb_features);

/* The fixed environment every program starts from. */
static const char *const default_env[] = {
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL=C",
};
#define N_DEFAULT_ENV (sizeof(default_env) / sizeof(*default_env))

/* Variables the dynamic loader or libc act on (glibc's unsecure list, and
 * the tunables it filters in secure mode): a privileged helper never passes
 * them on. LD_* and MALLOC_* are refused as prefixes. */
static const char *const refused_env[] = {
        "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES",   "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
        "NIS_PATH",   "NLSPATH",     "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR",      "TZDIR",
};

enum job_state { JOB_RUNNING, JOB_WAITING_SLOT, JOB_WAITING_CHILD, JOB_DONE };

struct nb_job {
        const struct nb_dispatch_ctx *ctx;
        Netbroker__ClientMessage *msg;
        Netbroker__Request *req;
        struct nb_pb_budget *budget;
        Netbroker__Result **results;
        size_t next;
        size_t reply_budget;
        enum job_state state;
        bool cancelled;
        bool resuming;
        struct nb_child *child;
        char **child_argv, **child_envp;
        nb_job_done_fn done;
        void *data;
        struct nb_job *next_waiting;
};

static struct nb_job *waiting_head, *waiting_tail;
static unsigned n_waiting;

unsigned nb_jobs_waiting(void)
{
        return n_waiting;
}

/* ---- results ---- */

static int set_status(Netbroker__Result *res, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int set_status(Netbroker__Result *res, int err, const char *fmt, ...)
{
        char buf[512];
        va_list ap;

        res->status = err;
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

/* ---- validation: nothing here touches the system ---- */

static bool env_name_refused(const char *entry, size_t name_len)
{
        if (name_len >= 3 && strncmp(entry, "LD_", 3) == 0)
                return true;
        if (name_len >= 7 && strncmp(entry, "MALLOC_", 7) == 0)
                return true;
        for (size_t i = 0; i < sizeof(refused_env) / sizeof(*refused_env); i++)
                if (strlen(refused_env[i]) == name_len &&
                    strncmp(entry, refused_env[i], name_len) == 0)
                        return true;
        return false;
}

static int validate_exec(const struct nb_config *cfg, const Netbroker__Exec *e,
                         Netbroker__Result *res)
{
        if (!e->path[0] || e->path[0] != '/')
                return set_status(res, EINVAL, "exec: program path must be absolute, got '%s'",
                                  e->path);
        if (!nb_config_exec_allowed(cfg, e->path))
                return set_status(res, EPERM, "exec: %s is not on the allow-list", e->path);
        if (e->n_argv > cfg->max_args || e->n_env > cfg->max_args)
                return set_status(res, E2BIG, "exec: more than %u arguments or environment entries",
                                  cfg->max_args);
        for (size_t i = 0; i < e->n_env; i++) {
                const char *eq = strchr(e->env[i], '=');
                if (!eq || eq == e->env[i])
                        return set_status(res, EINVAL,
                                          "exec: environment entry %zu is not KEY=VALUE", i);
                if (env_name_refused(e->env[i], (size_t)(eq - e->env[i])))
                        return set_status(res, EPERM,
                                          "exec: environment variable %.*s is not allowed",
                                          (int)(eq - e->env[i]), e->env[i]);
        }
        if (e->timeout_ms > cfg->exec_timeout_max_ms)
                return set_status(res, EINVAL, "exec: timeout %u ms is above the maximum of %u ms",
                                  e->timeout_ms, cfg->exec_timeout_max_ms);
        return 0;
}

static int validate_op(const struct nb_config *cfg, const Netbroker__Op *op, Netbroker__Result *res)
{
        switch (op->op_case) {
        case NETBROKER__OP__OP_PING:
        case NETBROKER__OP__OP_STATS:
                return 0;
        case NETBROKER__OP__OP_EXEC:
                return validate_exec(cfg, op->exec, res);
        default:
                nb_stat_inc(NB_STAT_OPS_UNKNOWN);
                return set_status(res, EOPNOTSUPP,
                                  "unknown operation (this helper speaks: ping, stats, exec)");
        }
}

/* Validate every op before any runs. On failure the failing op carries the
 * reason and every other op says it was not run. */
static int validate_request(struct nb_job *job)
{
        const struct nb_config *cfg = job->ctx->cfg;
        Netbroker__Request *req = job->req;
        size_t bad = SIZE_MAX;

        for (size_t i = 0; i < req->n_ops && bad == SIZE_MAX; i++)
                if (validate_op(cfg, req->ops[i], job->results[i]) != 0)
                        bad = i;
        if (bad == SIZE_MAX)
                return 0;
        for (size_t i = 0; i < req->n_ops; i++)
                if (i != bad)
                        set_status(job->results[i], ECANCELED, "not run: op %zu was refused", bad);
        return -EINVAL;
}

/* ---- running ---- */

static void job_continue(struct nb_job *job);
static void op_finished(struct nb_job *job);

static void count_op(const Netbroker__Op *op)
{
        switch (op->op_case) {
        case NETBROKER__OP__OP_PING:
                nb_stat_inc(NB_STAT_OPS_PING);
                break;
        case NETBROKER__OP__OP_STATS:
                nb_stat_inc(NB_STAT_OPS_STATS);
                break;
        case NETBROKER__OP__OP_EXEC:
                nb_stat_inc(NB_STAT_OPS_EXEC);
                break;
        default:
                break;
        }
}

static int run_stats(Netbroker__Result *res)
{
        Netbroker__StatsResult *st = malloc(sizeof(*st));
        size_t extra = 2;

        if (!st)
                return set_status(res, ENOMEM, "stats: out of memory");
        netbroker__stats_result__init(st);
        res->out_case = NETBROKER__RESULT__OUT_STATS;
        res->stats = st;
        st->counters = calloc(NB_STAT__MAX + extra, sizeof(*st->counters));
        if (!st->counters)
                return set_status(res, ENOMEM, "stats: out of memory");
        for (size_t i = 0; i < NB_STAT__MAX + extra; i++) {
                Netbroker__Counter *c = malloc(sizeof(*c));
                if (!c)
                        return set_status(res, ENOMEM, "stats: out of memory");
                netbroker__counter__init(c);
                if (i < NB_STAT__MAX) {
                        c->name = strdup(nb_stat_name((enum nb_stat)i));
                        c->value = nb_stats[i];
                } else if (i == NB_STAT__MAX) {
                        c->name = strdup("children_running");
                        c->value = nb_children_running();
                } else {
                        c->name = strdup("spawns_waiting");
                        c->value = n_waiting;
                }
                st->counters[st->n_counters++] = c;
                if (!c->name) {
                        c->name = (char *)protobuf_c_empty_string;
                        return set_status(res, ENOMEM, "stats: out of memory");
                }
        }
        return 0;
}

static void free_child_arrays(struct nb_job *job)
{
        free(job->child_argv);
        free(job->child_envp);
        job->child_argv = job->child_envp = NULL;
}

/* Default environment plus the request's entries; a request entry replaces
 * a default of the same name. Strings are borrowed from the request. */
static char **build_env(const Netbroker__Exec *e)
{
        char **env = calloc(N_DEFAULT_ENV + e->n_env + 1, sizeof(*env));
        size_t n = 0;

        if (!env)
                return NULL;
        for (size_t i = 0; i < N_DEFAULT_ENV; i++) {
                size_t name_len = strcspn(default_env[i], "=") + 1;
                bool overridden = false;
                for (size_t j = 0; j < e->n_env; j++)
                        if (strncmp(e->env[j], default_env[i], name_len) == 0)
                                overridden = true;
                if (!overridden)
                        env[n++] = (char *)default_env[i];
        }
        for (size_t j = 0; j < e->n_env; j++)
                env[n++] = e->env[j];
        return env;
}

static char **build_argv(const Netbroker__Exec *e)
{
        size_t n = e->n_argv ? e->n_argv : 1;
        char **argv = calloc(n + 1, sizeof(*argv));

        if (!argv)
                return NULL;
        if (e->n_argv == 0)
                argv[0] = e->path;
        for (size_t i = 0; i < e->n_argv; i++)
                argv[i] = e->argv[i];
        return argv;
}

static int move_buf(struct nb_buf *b, ProtobufCBinaryData *out)
{
        out->data = b->data;
        out->len = b->len;
        b->data = NULL;
        b->len = b->cap = 0;
        return 0;
}

static void exec_done(struct nb_child *child, void *data)
{
        struct nb_job *job = data;
        Netbroker__Result *res = job->results[job->next];
        struct nb_child_result *cr = nb_child_result(child);
        Netbroker__ExecResult *er = malloc(sizeof(*er));

        free_child_arrays(job);
        job->child = NULL;
        if (!er) {
                set_status(res, ENOMEM, "exec: out of memory");
        } else {
                netbroker__exec_result__init(er);
                er->exit_code = cr->exit_code;
                er->signal = cr->signal;
                er->timed_out = cr->timed_out;
                er->stdout_truncated = cr->out_truncated;
                er->stderr_truncated = cr->err_truncated;
                er->duration_us = cr->duration_us;
                job->reply_budget -= cr->out.len + cr->err.len;
                move_buf(&cr->out, &er->stdout_data);
                move_buf(&cr->err, &er->stderr_data);
                res->out_case = NETBROKER__RESULT__OUT_EXEC;
                res->exec = er;
                if (cr->timed_out)
                        set_status(res, ETIMEDOUT, "exec: killed after the %u ms timeout",
                                   job->req->ops[job->next]->exec->timeout_ms
                                           ? job->req->ops[job->next]->exec->timeout_ms
                                           : job->ctx->cfg->exec_timeout_ms);
                else if (cr->signal)
                        set_status(res, EIO, "exec: killed by signal %d", cr->signal);
                else if (cr->exit_code)
                        set_status(res, EIO, "exec: exited with status %d", cr->exit_code);
        }
        nb_child_free(child);
        job->state = JOB_RUNNING;
        op_finished(job);
        job_continue(job);
}

static void wait_for_slot(struct nb_job *job)
{
        job->state = JOB_WAITING_SLOT;
        job->next_waiting = NULL;
        if (waiting_tail)
                waiting_tail->next_waiting = job;
        else
                waiting_head = job;
        waiting_tail = job;
        n_waiting++;
}

/* Returns 1 when the op is under way (the job parks), else its status. */
static int run_exec(struct nb_job *job, const Netbroker__Exec *e, Netbroker__Result *res)
{
        const struct nb_config *cfg = job->ctx->cfg;
        size_t cap = cfg->exec_output_cap;
        struct nb_exec_spec spec;
        int r;

        if (nb_children_running() >= cfg->max_spawns) {
                if (n_waiting >= cfg->max_pending_spawns)
                        return set_status(
                                res, EAGAIN,
                                "exec: %u programs are waiting to run already (max_pending_spawns)",
                                n_waiting);
                wait_for_slot(job);
                return 1;
        }
        if (cap > job->reply_budget / 2)
                cap = job->reply_budget / 2;
        job->child_argv = build_argv(e);
        job->child_envp = build_env(e);
        if (!job->child_argv || !job->child_envp) {
                free_child_arrays(job);
                return set_status(res, ENOMEM, "exec: out of memory");
        }
        spec = (struct nb_exec_spec){
                .path = e->path,
                .argv = job->child_argv,
                .envp = job->child_envp,
                .stdin_data = e->stdin_data.data,
                .stdin_len = e->stdin_data.len,
                .timeout_ms = e->timeout_ms ? e->timeout_ms : cfg->exec_timeout_ms,
                .output_cap = cap,
        };
        r = nb_child_spawn(job->ctx->loop, &spec, exec_done, job, &job->child);
        if (r < 0) {
                free_child_arrays(job);
                return set_status(res, -r, "exec: cannot run %s: %s", e->path, strerror(-r));
        }
        job->state = JOB_WAITING_CHILD;
        return 1;
}

/* Returns 1 when the op parked the job, else the op's status. */
static int run_op(struct nb_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        switch (op->op_case) {
        case NETBROKER__OP__OP_PING:
                return 0;
        case NETBROKER__OP__OP_STATS:
                return run_stats(res);
        case NETBROKER__OP__OP_EXEC:
                return run_exec(job, op->exec, res);
        default:
                return set_status(res, EOPNOTSUPP, "unknown operation");
        }
}

static void job_free(void *p)
{
        struct nb_job *job = p;

        if (job->results) {
                for (size_t i = 0; i < job->req->n_ops; i++)
                        if (job->results[i])
                                protobuf_c_message_free_unpacked(&job->results[i]->base, NULL);
                free(job->results);
        }
        free_child_arrays(job);
        protobuf_c_message_free_unpacked(&job->msg->base, &job->budget->allocator);
        free(job->budget);
        free(job);
}

static void job_finish(struct nb_job *job)
{
        Netbroker__Reply reply = NETBROKER__REPLY__INIT;

        job->state = JOB_DONE;
        reply.id = job->req->id;
        reply.n_results = job->req->n_ops;
        reply.results = job->results;
        if (!job->cancelled)
                job->done(job, &reply, job->data);
        nb_loop_defer_free(job->ctx->loop, job_free, job);
}

/* An op has its result: count an error, skip the rest after a failure
 * unless the request says to go on. */
static void op_finished(struct nb_job *job)
{
        Netbroker__Request *req = job->req;
        Netbroker__Result *res = job->results[job->next];
        bool keep_going = req->flags & NETBROKER__REQUEST_FLAG__REQUEST_FLAG_CONTINUE_ON_ERROR;
        size_t failed = job->next;

        job->next++;
        if (!res->status)
                return;
        nb_stat_inc(NB_STAT_OP_ERRORS);
        if (keep_going)
                return;
        for (; job->next < req->n_ops; job->next++)
                set_status(job->results[job->next], ECANCELED, "not run: op %zu failed", failed);
}

static void job_continue(struct nb_job *job)
{
        Netbroker__Request *req = job->req;

        while (job->next < req->n_ops && !job->cancelled) {
                /* An op resumed after waiting for a slot was counted already. */
                if (!job->resuming)
                        count_op(req->ops[job->next]);
                job->resuming = false;
                if (run_op(job, req->ops[job->next], job->results[job->next]) == 1)
                        return;
                op_finished(job);
        }
        job_finish(job);
}

void nb_jobs_kick(const struct nb_dispatch_ctx *ctx)
{
        while (waiting_head && nb_children_running() < ctx->cfg->max_spawns) {
                struct nb_job *job = waiting_head;
                waiting_head = job->next_waiting;
                if (!waiting_head)
                        waiting_tail = NULL;
                n_waiting--;
                job->state = JOB_RUNNING;
                job->resuming = true;
                job_continue(job);
        }
}

static void unlink_waiting(struct nb_job *job)
{
        struct nb_job *prev = NULL;

        for (struct nb_job *j = waiting_head; j; prev = j, j = j->next_waiting) {
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

void nb_job_cancel(struct nb_job *job)
{
        if (!job)
                return;
        job->cancelled = true;
        if (job->state == JOB_WAITING_SLOT) {
                unlink_waiting(job);
                job_finish(job);
        } else if (job->state == JOB_WAITING_CHILD) {
                nb_child_abandon(job->child);
                job->child = NULL;
                job_finish(job);
        }
        /* JOB_RUNNING cannot be seen here (jobs run to a park point inside
         * one callback); JOB_DONE is already queued for freeing. */
}

int nb_job_start(const struct nb_dispatch_ctx *ctx, Netbroker__ClientMessage *msg,
                 struct nb_pb_budget *budget, int *fds, size_t nfds, nb_job_done_fn done,
                 void *data, struct nb_job **ret)
{
        struct nb_job *job = calloc(1, sizeof(*job));
        int r;

        /* No op of this protocol version takes an fd: any that came are the
         * client's mistake and are closed at once. */
        nb_close_fds(fds, nfds);
        if (!job)
                return -ENOMEM;
        job->ctx = ctx;
        job->msg = msg;
        job->req = msg->request;
        job->budget = budget;
        job->done = done;
        job->data = data;
        job->reply_budget = ctx->cfg->max_reply;
        job->results = calloc(job->req->n_ops ? job->req->n_ops : 1, sizeof(*job->results));
        if (!job->results) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < job->req->n_ops; i++) {
                job->results[i] = malloc(sizeof(**job->results));
                if (!job->results[i]) {
                        r = -ENOMEM;
                        goto fail;
                }
                netbroker__result__init(job->results[i]);
        }
        *ret = job;
        if (validate_request(job) < 0) {
                nb_stat_inc(NB_STAT_REQUESTS_REFUSED);
                job_finish(job);
                return 0;
        }
        job_continue(job);
        return 0;
fail:
        /* The caller still owns msg and budget on failure. */
        if (job->results) {
                for (size_t i = 0; i < job->req->n_ops; i++)
                        if (job->results[i])
                                protobuf_c_message_free_unpacked(&job->results[i]->base, NULL);
                free(job->results);
        }
        free(job);
        return r;
}
