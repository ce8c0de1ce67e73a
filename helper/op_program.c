// SPDX-License-Identifier: LGPL-2.1-or-later
/* ProgramStart, ProgramStop, ProgramList: protobuf in, program.c out.
 *
 * A program counts against its caller's spawn share while it runs
 * (spawn.c counts it in nbd_children_running_of()): for a uid other than
 * root, max_spawns_per_uid covers its Execs and its programs together, and
 * max_programs_per_uid its programs alone. max_programs bounds all callers,
 * root included, and root_reserved_programs of it are root's; a program
 * does not take one of max_spawns, the slots for short-lived Execs, or
 * eight dnsmasqs would stop every Exec. Only the caller that started a
 * program, or root, sees or stops it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ops.h"
#include "program.h"
#include "program_args.h"
#include "spawn.h"

#define TAG_MAX 64

static char *dup_str(const char *s, bool *oom)
{
        char *d;

        if (!s[0])
                return (char *)protobuf_c_empty_string;
        d = strdup(s);
        if (!d) {
                *oom = true;
                return (char *)protobuf_c_empty_string;
        }
        return d;
}

static bool tag_valid(const char *tag)
{
        size_t n = strlen(tag);

        if (n > TAG_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)tag[i] < 0x21 || (unsigned char)tag[i] > 0x7e)
                        return false;
        return true;
}

static bool may_manage(const struct nbd_peer *peer, const struct nbd_program_info *i)
{
        return nbd_peer_is_root(peer) || i->uid == peer->uid;
}

/* ---- ProgramStart ---- */

/* An interface a program's arguments name, while the batch is validated:
 * it exists (or an earlier op makes it) and is the caller's. */
static int owned_now(void *data, const char *ifname, struct nbd_err *e)
{
        struct nbd_validation *v = data;
        Netbroker__Result tmp = NETBROKER__RESULT__INIT;
        int r = nbd_check_interface(v, ifname, &tmp, "program");

        if (r == 0)
                r = nbd_check_owned(v, ifname, &tmp);
        if (r < 0)
                nbd_err_set(e, r, "%s", tmp.message);
        if (tmp.message != protobuf_c_empty_string)
                free(tmp.message);
        return r;
}

/* The same when the start runs: the interface is there, marked as the
 * caller's (one gone since may come back as another's, and dnsmasq's
 * --bind-dynamic would serve it). */
static int owned_at_start(void *data, const char *ifname, struct nbd_err *e)
{
        struct nbd_job *job = data;
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);
        uid_t uid = nbd_job_peer(job)->uid, owner;

        if (ctx->be->links.owner(ctx->links, ifname, &owner) == 0 && owner == uid)
                return 0;
        return nbd_err_set(e, -EPERM, "policy: uid %u does not own interface %s", (unsigned)uid,
                           ifname);
}

/* A caller other than root gives only printable arguments and
 * environment, and only the arguments program_args.h allows unless its
 * section says program_args = any. */
static int check_program_args(const struct nbd_config *cfg, const struct nbd_peer *peer,
                              const Netbroker__ProgramStart *s, nbd_program_owned_fn owned,
                              void *data, Netbroker__Result *res)
{
        const char *file = nbd_config_program_file(cfg, s->path);
        struct nbd_err e = {0};
        int r;

        if (!file || nbd_peer_is_root(peer))
                return 0;
        /* program_args = any too: it lets the caller choose the arguments,
         * not write the helper's log. */
        r = nbd_program_bytes_check(s->argv, s->n_argv, s->env, s->n_env, peer->uid, &e);
        if (r == 0 && nbd_policy_checks_program_args(&cfg->policy, peer))
                r = nbd_program_args_check(file, s->argv, s->n_argv, peer->uid, owned, data, &e);
        return r < 0 ? nbd_result_set(res, r, "program: %s", e.msg) : 0;
}

static int validate_start(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const struct nbd_config *cfg = v->ctx->cfg;
        const Netbroker__ProgramStart *s = op->program_start;
        struct nbd_err why = {0};
        int r;

        if (s->path[0] != '/')
                return nbd_result_set(res, -EINVAL,
                                      "program: program path must be absolute, got '%s'", s->path);
        if (!nbd_config_program_file(cfg, s->path))
                return nbd_result_set(res, -EPERM,
                                      "program: %s is not on program_allow (the allow-list of "
                                      "supervised programs)",
                                      s->path);
        if (nbd_policy_check_program(&cfg->policy, v->peer, s->path, &why) < 0)
                return nbd_result_set(res, -EPERM, "program: %s", why.msg);
        if (!tag_valid(s->tag))
                return nbd_result_set(res, -EINVAL,
                                      "program: tag must be at most %d printable characters "
                                      "without spaces",
                                      TAG_MAX);
        r = nbd_exec_check_args(cfg, "program", s->path, s->argv, s->n_argv, s->env, s->n_env, res);
        return r ? r : check_program_args(cfg, v->peer, s, owned_now, v, res);
}

static int set_program_result(Netbroker__Result *res, const struct nbd_program_info *i,
                              bool existing)
{
        Netbroker__ProgramResult *pr = malloc(sizeof(*pr));

        if (!pr)
                return nbd_result_set(res, -ENOMEM, "program: out of memory");
        netbroker__program_result__init(pr);
        pr->id = i->id;
        pr->pid = i->pid;
        pr->existing = existing;
        res->out_case = NETBROKER__RESULT__OUT_PROGRAM;
        res->program = pr;
        return 0;
}

/* A later op of the batch failed: the program it started goes. */
static void undo_start(struct nbd_job *job, void *data)
{
        struct nbd_program *p = nbd_program_by_id(*(uint64_t *)data);

        (void)job;
        if (p && nbd_program_info(p)->running)
                nbd_program_stop(p, NBD_PROGRAM_DEFAULT_GRACE_MS, NULL);
}

/* The caller's share: 0, or -EAGAIN with res set. */
static int check_share(struct nbd_job *job, Netbroker__Result *res)
{
        const struct nbd_config *cfg = nbd_job_ctx(job)->cfg;
        const struct nbd_peer *peer = nbd_job_peer(job);

        if (nbd_programs_running() >= cfg->max_programs)
                return nbd_result_set(res, -EAGAIN,
                                      "program: %u programs run already (max_programs)",
                                      nbd_programs_running());
        if (nbd_peer_is_root(peer))
                return 0;
        /* As root_reserved_spawns: admitted uids running one program each
         * would otherwise leave root none for its own networks. */
        if (nbd_programs_running() + cfg->root_reserved_programs >= cfg->max_programs)
                return nbd_result_set(res, -EAGAIN,
                                      "program: %u programs run already and %u of max_programs "
                                      "(%u) are root's (root_reserved_programs)",
                                      nbd_programs_running(), cfg->root_reserved_programs,
                                      cfg->max_programs);
        if (nbd_programs_running_of(peer->uid) >= cfg->max_programs_per_uid)
                return nbd_result_set(res, -EAGAIN,
                                      "program: uid %u runs %u programs already "
                                      "(max_programs_per_uid=%u)",
                                      (unsigned)peer->uid, nbd_programs_running_of(peer->uid),
                                      cfg->max_programs_per_uid);
        if (nbd_children_running_of(peer->uid) >= cfg->max_spawns_per_uid)
                return nbd_result_set(res, -EAGAIN,
                                      "program: uid %u has %u programs running, Execs and "
                                      "supervised ones (max_spawns_per_uid=%u)",
                                      (unsigned)peer->uid, nbd_children_running_of(peer->uid),
                                      cfg->max_spawns_per_uid);
        return 0;
}

static int run_start(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const struct nbd_config *cfg = nbd_job_ctx(job)->cfg;
        const Netbroker__ProgramStart *s = op->program_start;
        const char *file = nbd_config_program_file(cfg, s->path);
        struct nbd_program_spec spec;
        struct nbd_program *p;
        struct nbd_err e = {0};
        char **argv = NULL, **envp = NULL;
        uint64_t *undo_id;
        int r;

        /* A reload since validation may have taken it off the list. */
        if (!file)
                return nbd_result_set(res, -EPERM, "program: %s is not on program_allow", s->path);
        if ((r = check_program_args(cfg, nbd_job_peer(job), s, owned_at_start, job, res)) < 0)
                return r;
        argv = nbd_exec_build_argv(s->path, s->argv, s->n_argv);
        envp = nbd_exec_build_env(s->env, s->n_env);
        if (!argv || !envp) {
                r = nbd_result_set(res, -ENOMEM, "program: out of memory");
                goto out;
        }
        spec = (struct nbd_program_spec){.path = s->path,
                                         .file = file,
                                         .argv = argv,
                                         .envp = envp,
                                         .tag = s->tag,
                                         .uid = nbd_job_peer(job)->uid,
                                         .log_path = cfg->program_log};
        /* Idempotent: the same start again (a daemon's restart) is the
         * program that runs, not a second one. */
        p = nbd_program_find_same(&spec);
        if (p) {
                r = set_program_result(res, nbd_program_info(p), true);
                if (r == 0)
                        nbd_result_set(res, 0, "program: %llu (pid %d) runs already",
                                       (unsigned long long)nbd_program_info(p)->id,
                                       (int)nbd_program_info(p)->pid);
                goto out;
        }
        if ((r = check_share(job, res)) < 0)
                goto out;
        undo_id = malloc(sizeof(*undo_id));
        if (!undo_id) {
                r = nbd_result_set(res, -ENOMEM, "program: out of memory");
                goto out;
        }
        r = nbd_program_start(&spec, &p, &e);
        if (r < 0) {
                free(undo_id);
                r = nbd_result_set(res, r, "%s", e.msg);
                goto out;
        }
        *undo_id = nbd_program_info(p)->id;
        r = set_program_result(res, nbd_program_info(p), false);
        /* Without memory to note the undo, the batch still stops; the
         * program stays and is listed. */
        if (nbd_job_on_failure_undo(job, undo_start, free, undo_id) < 0)
                free(undo_id);
out:
        free(argv);
        free(envp);
        return r;
}

/* ---- ProgramStop ---- */

static int validate_stop(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__ProgramStop *s = op->program_stop;

        (void)v;
        if (!s->id && !s->tag[0])
                return nbd_result_set(res, -EINVAL, "program: stop needs an id or a tag");
        if (s->id && s->tag[0])
                return nbd_result_set(res, -EINVAL, "program: stop takes an id or a tag, not both");
        if (!tag_valid(s->tag))
                return nbd_result_set(res, -EINVAL, "program: not a valid tag");
        /* A stopping program holds its slot until it is gone: a grace of
         * days would hold it that long, against a later stop too. */
        if (s->grace_ms > NBD_PROGRAM_MAX_GRACE_MS)
                return nbd_result_set(res, -EINVAL,
                                      "program: a grace of %u ms is over the maximum of %u ms",
                                      s->grace_ms, NBD_PROGRAM_MAX_GRACE_MS);
        return 0;
}

/* The programs one ProgramStop waits for. */
struct stop_run {
        struct nbd_job *job;
        Netbroker__Result *res;
        size_t n, pending;
        struct nbd_program_waiter w[];
};

static void one_stopped(void *data)
{
        struct stop_run *x = data;

        if (--x->pending > 0)
                return;
        x->res->program->stopped = (uint32_t)x->n;
        nbd_job_op_done(x->job);
        free(x);
}

static void stop_cancel(void *data)
{
        struct stop_run *x = data;

        for (size_t i = 0; i < x->n; i++)
                nbd_program_cancel_wait(&x->w[i]);
        free(x);
}

/* The programs the op names that the caller may stop; EPERM for one it
 * names by id and may not. */
static bool stop_target(const Netbroker__ProgramStop *s, const struct nbd_program_info *i,
                        const struct nbd_peer *peer)
{
        return may_manage(peer, i) && (s->id ? i->id == s->id : strcmp(i->tag, s->tag) == 0);
}

static int run_stop(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__ProgramStop *s = op->program_stop;
        const struct nbd_peer *peer = nbd_job_peer(job);
        unsigned grace = s->grace_ms ? s->grace_ms : NBD_PROGRAM_DEFAULT_GRACE_MS;
        struct nbd_program *p, *next;
        struct stop_run *x;
        size_t running = 0, exited = 0;
        int r;

        if (s->id && (p = nbd_program_by_id(s->id)) && !may_manage(peer, nbd_program_info(p)))
                return nbd_result_set(res, -EPERM,
                                      "program: %llu was started by uid %u: only it or root may "
                                      "stop it",
                                      (unsigned long long)s->id,
                                      (unsigned)nbd_program_info(p)->uid);
        for (p = nbd_program_next(NULL); p; p = nbd_program_next(p))
                if (stop_target(s, nbd_program_info(p), peer))
                        running += nbd_program_info(p)->running;
        x = calloc(1, sizeof(*x) + running * sizeof(x->w[0]));
        if (!x || (r = set_program_result(res, &(struct nbd_program_info){0}, false)) < 0) {
                free(x);
                return nbd_result_set(res, -ENOMEM, "program: out of memory");
        }
        *x = (struct stop_run){.job = job, .res = res};
        for (p = nbd_program_next(NULL); p; p = next) {
                const struct nbd_program_info *i = nbd_program_info(p);
                next = nbd_program_next(p);
                if (!stop_target(s, i, peer))
                        continue;
                if (!i->running) {
                        exited++;
                        nbd_program_forget(p);
                        continue;
                }
                x->w[x->n] = (struct nbd_program_waiter){.fn = one_stopped, .data = x};
                nbd_program_stop(p, grace, &x->w[x->n++]);
        }
        res->program->id = s->id;
        res->program->had_exited = (uint32_t)exited;
        if (!x->n) {
                free(x);
                if (exited)
                        return nbd_result_set(res, 0, "program: %zu had exited already", exited);
                if (s->id)
                        return nbd_result_set(res, 0, "program: no program %llu: nothing to stop",
                                              (unsigned long long)s->id);
                return nbd_result_set(res, 0, "program: no program with tag '%s': nothing to stop",
                                      s->tag);
        }
        x->pending = x->n;
        nbd_job_park(job, stop_cancel, x);
        return 0;
}

/* ---- ProgramList ---- */

static int validate_list(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        (void)v;
        if (!tag_valid(op->program_list->tag))
                return nbd_result_set(res, -EINVAL, "program: not a valid tag");
        return 0;
}

static int add_info(Netbroker__ProgramListResult *l, const struct nbd_program_info *i)
{
        Netbroker__ProgramInfo *o = malloc(sizeof(*o));
        bool oom = false;
        size_t n = 0;

        if (!o)
                return -ENOMEM;
        netbroker__program_info__init(o);
        l->programs[l->n_programs++] = o; /* freed with the result from here on */
        o->id = i->id;
        o->pid = i->pid;
        o->path = dup_str(i->path, &oom);
        o->tag = dup_str(i->tag, &oom);
        o->uid = (uint32_t)i->uid;
        o->running = i->running;
        o->exit_code = i->exit_code;
        o->signal = i->signal;
        o->adopted = i->adopted;
        o->status_unknown = i->status_unknown;
        if (i->gone_link[0])
                o->gone_interface = dup_str(i->gone_link, &oom);
        while (i->argv[n])
                n++;
        o->argv = calloc(n ? n : 1, sizeof(*o->argv));
        if (!o->argv)
                return -ENOMEM;
        for (; o->n_argv < n; o->n_argv++)
                o->argv[o->n_argv] = dup_str(i->argv[o->n_argv], &oom);
        return oom ? -ENOMEM : 0;
}

static int run_list(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *tag = op->program_list->tag;
        const struct nbd_peer *peer = nbd_job_peer(job);
        Netbroker__ProgramListResult *l = malloc(sizeof(*l));
        size_t n = 0;

        if (!l)
                return nbd_result_set(res, -ENOMEM, "program: out of memory");
        netbroker__program_list_result__init(l);
        res->out_case = NETBROKER__RESULT__OUT_PROGRAM_LIST;
        res->program_list = l;
        for (struct nbd_program *p = nbd_program_next(NULL); p; p = nbd_program_next(p))
                n++;
        l->programs = calloc(n ? n : 1, sizeof(*l->programs));
        if (!l->programs)
                return nbd_result_set(res, -ENOMEM, "program: out of memory");
        for (struct nbd_program *p = nbd_program_next(NULL); p; p = nbd_program_next(p)) {
                const struct nbd_program_info *i = nbd_program_info(p);
                if (!may_manage(peer, i) || (tag[0] && strcmp(tag, i->tag) != 0))
                        continue;
                if (add_info(l, i) < 0)
                        return nbd_result_set(res, -ENOMEM, "program: out of memory");
        }
        return 0;
}

const struct nbd_op_handler nbd_op_program_start = {
        .name = "program_start",
        .stat = NBD_STAT_OPS_PROGRAM,
        .validate = validate_start,
        .run = run_start,
};

const struct nbd_op_handler nbd_op_program_stop = {
        .name = "program_stop",
        .stat = NBD_STAT_OPS_PROGRAM,
        .validate = validate_stop,
        .run = run_stop,
};

const struct nbd_op_handler nbd_op_program_list = {
        .name = "program_list",
        .stat = NBD_STAT_OPS_PROGRAM,
        .validate = validate_list,
        .run = run_list,
};
