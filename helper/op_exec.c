// SPDX-License-Identifier: LGPL-2.1-or-later
/* Exec: validation of the program, its arguments and environment, and
 * running it through spawn.c. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "child_start.h"
#include "ops.h"
#include "spawn.h"

/* The fixed environment every program starts from. */
static const char *const default_env[] = {
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL=C",
};
#define N_DEFAULT_ENV (sizeof(default_env) / sizeof(*default_env))

/* A multi-call program (busybox, xtables-nft-multi) picks the tool it acts
 * as from argv[0]; the client must not pick one the allow-list does not
 * name. The child always gets the allow-listed path (build_argv), so only
 * what is harmless to replace is taken: nothing, the path or its last
 * component. */
static bool argv0_names_program(const char *argv0, const char *path)
{
        return !argv0[0] || strcmp(argv0, path) == 0 || strcmp(argv0, strrchr(path, '/') + 1) == 0;
}

static bool locale_variable(const char *name, size_t len)
{
        return (len >= 3 && strncmp(name, "LC_", 3) == 0) ||
               (len == 4 && !strncmp(name, "LANG", 4)) ||
               (len == 8 && strncmp(name, "LANGUAGE", 8) == 0);
}

int nbd_exec_check_args(const struct nbd_config *cfg, const char *what, const char *path,
                        char *const *argv, size_t n_argv, char *const *env, size_t n_env,
                        Netbroker__Result *res)
{
        if (n_argv > cfg->max_args || n_env > cfg->max_args)
                return nbd_result_set(res, -E2BIG,
                                      "%s: more than %u arguments or environment entries", what,
                                      cfg->max_args);
        if (n_argv > 0 && !argv0_names_program(argv[0], path))
                return nbd_result_set(res, -EINVAL,
                                      "%s: argv[0] '%s' is neither empty, %s nor %s: the "
                                      "program's argv[0] is always its path",
                                      what, argv[0], path, strrchr(path, '/') + 1);
        for (size_t i = 0; i < n_env; i++) {
                const char *eq = strchr(env[i], '=');
                if (!eq || eq == env[i])
                        return nbd_result_set(res, -EINVAL,
                                              "%s: environment entry %zu is not KEY=VALUE", what,
                                              i);
                /* An allow-list: the tools read more variables than any
                 * deny-list would keep up with (IP_LIB_DIR made ip load a
                 * caller's plugin as root). config.c keeps the loader's
                 * and the plugin directories' variables off it. */
                if (!nbd_config_env_allowed(cfg, env[i], (size_t)(eq - env[i])))
                        return nbd_result_set(res, -EPERM,
                                              "%s: environment variable %.*s is not allowed: "
                                              "exec_env_allow does not list it",
                                              what, (int)(eq - env[i]), env[i]);
                /* A locale named by a path makes libc load that file (the
                 * program is not set-uid, so libc does not refuse it). */
                if (locale_variable(env[i], (size_t)(eq - env[i])) && strchr(eq, '/'))
                        return nbd_result_set(res, -EPERM,
                                              "%s: %.*s names a locale by a path: only locale "
                                              "names (C.UTF-8, de_DE) are allowed",
                                              what, (int)(eq - env[i]), env[i]);
        }
        return 0;
}

/* An Exec against cfg, for peer: at validation, and again when it runs
 * (a reload since, while it waited for a spawn slot, may have changed any
 * of it). */
static int check_exec(const struct nbd_config *cfg, const struct nbd_peer *peer,
                      const Netbroker__Exec *e, Netbroker__Result *res)
{
        struct nbd_err why = {0};
        int r;

        if (e->path[0] != '/')
                return nbd_result_set(res, -EINVAL, "exec: program path must be absolute, got '%s'",
                                      e->path);
        if (!nbd_config_exec_allowed(cfg, e->path))
                return nbd_result_set(res, -EPERM, "exec: %s is not on the allow-list", e->path);
        /* Root runs all of exec_allow; others only what their policy names. */
        if (nbd_policy_check_exec(&cfg->policy, peer, e->path, &why) < 0)
                return nbd_result_set(res, -EPERM, "exec: %s", why.msg);
        r = nbd_exec_check_args(cfg, "exec", e->path, e->argv, e->n_argv, e->env, e->n_env, res);
        if (r < 0)
                return r;
        if (e->timeout_ms > cfg->exec_timeout_max_ms)
                return nbd_result_set(res, -EINVAL,
                                      "exec: timeout %u ms is above the maximum of %u ms",
                                      e->timeout_ms, cfg->exec_timeout_max_ms);
        return 0;
}

static int validate_exec(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        return check_exec(v->ctx->cfg, v->peer, op->exec, res);
}

/* One running program. Strings in argv/envp are borrowed from the request,
 * which outlives it. */
struct exec_run {
        const struct nbd_backend_spawn *sp; /* the job's backend's */
        struct nbd_job *job;
        Netbroker__Result *res;
        const Netbroker__Exec *e;
        struct nbd_child *child;
        char **argv, **envp;
};

static void exec_run_free(struct exec_run *x)
{
        free(x->argv);
        free(x->envp);
        free(x);
}

/* Default environment plus the request's entries; a request entry replaces
 * a default of the same name. */
char **nbd_exec_build_env(char *const *req_env, size_t n_env)
{
        char **env = calloc(N_DEFAULT_ENV + n_env + 1, sizeof(*env));
        size_t n = 0;

        if (!env)
                return NULL;
        for (size_t i = 0; i < N_DEFAULT_ENV; i++) {
                size_t name_len = strcspn(default_env[i], "=") + 1;
                bool overridden = false;
                for (size_t j = 0; j < n_env; j++)
                        if (strncmp(req_env[j], default_env[i], name_len) == 0)
                                overridden = true;
                if (!overridden)
                        env[n++] = (char *)default_env[i];
        }
        for (size_t j = 0; j < n_env; j++)
                env[n++] = req_env[j];
        return env;
}

/* argv[0] is the allow-listed path whatever the request said (see
 * argv0_names_program). */
char **nbd_exec_build_argv(char *path, char *const *req_argv, size_t n_argv)
{
        size_t n = n_argv ? n_argv : 1;
        char **argv = calloc(n + 1, sizeof(*argv));

        if (!argv)
                return NULL;
        argv[0] = path;
        for (size_t i = 1; i < n_argv; i++)
                argv[i] = req_argv[i];
        return argv;
}

static void take_buf(struct nbd_buf *b, ProtobufCBinaryData *out)
{
        out->data = b->data;
        out->len = b->len;
        b->data = NULL;
        b->len = b->cap = 0;
}

static void exec_done(struct nbd_child *child, void *data)
{
        struct exec_run *x = data;
        struct nbd_job *job = x->job;
        Netbroker__Result *res = x->res;
        struct nbd_child_result *cr = x->sp->result(child);
        Netbroker__ExecResult *er = malloc(sizeof(*er));
        unsigned timeout =
                x->e->timeout_ms ? x->e->timeout_ms : nbd_job_ctx(job)->cfg->exec_timeout_ms;

        if (!er) {
                nbd_result_set(res, -ENOMEM, "exec: out of memory");
        } else {
                netbroker__exec_result__init(er);
                er->exit_code = cr->exit_code;
                er->signal = cr->signal;
                er->timed_out = cr->timed_out;
                er->stdout_truncated = cr->out_truncated;
                er->stderr_truncated = cr->err_truncated;
                er->duration_us = cr->duration_us;
                nbd_job_spend_reply_budget(job, cr->out.len + cr->err.len);
                take_buf(&cr->out, &er->stdout_data);
                take_buf(&cr->err, &er->stderr_data);
                res->out_case = NETBROKER__RESULT__OUT_EXEC;
                res->exec = er;
                if (cr->start_error)
                        nbd_result_set(res, -cr->start_error, "exec: cannot run %s as uid %u: %s%s",
                                       x->e->path, (unsigned)nbd_job_peer(job)->uid,
                                       strerror(cr->start_error),
                                       cr->start_error == EPERM
                                               ? " (the helper lacks CAP_SETUID or CAP_SETGID)"
                                               : "");
                else if (cr->timed_out)
                        nbd_result_set(res, -ETIMEDOUT, "exec: killed after the %u ms timeout",
                                       timeout);
                else if (cr->signal)
                        nbd_result_set(res, -EIO, "exec: killed by signal %d", cr->signal);
                else if (cr->exit_code)
                        nbd_result_set(res, -EIO, "exec: exited with status %d", cr->exit_code);
        }
        x->sp->free(child);
        exec_run_free(x);
        nbd_job_op_done(job);
}

/* The client went away: the program is killed and reaped by spawn.c. */
static void exec_cancel(void *data)
{
        struct exec_run *x = data;

        x->sp->abandon(x->child);
        exec_run_free(x);
}

static int run_exec(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const struct nbd_config *cfg = nbd_job_ctx(job)->cfg;
        const Netbroker__Exec *e = op->exec;
        const char *file = nbd_config_exec_file(cfg, e->path);
        size_t cap = cfg->exec_output_cap;
        struct nbd_exec_spec spec;
        struct nbd_err why = {0};
        struct exec_run *x;
        bool admitted;
        int r;

        /* validate_exec() passed it, but a reload (SIGHUP) since may have
         * taken it off the list, off the caller's grant, or changed what
         * its arguments, environment and timeout may be (an Exec that
         * waited for a spawn slot meanwhile). */
        if (!file)
                return nbd_result_set(res, -EPERM, "exec: %s is not on the allow-list", e->path);
        if (nbd_policy_check_op(&cfg->policy, nbd_job_peer(job), "exec", &why) < 0)
                return nbd_result_set(res, -EPERM, "%s", why.msg);
        if ((r = check_exec(cfg, nbd_job_peer(job), e, res)) < 0)
                return r;
        /* Run as its caller (child_start.h), or not at all. */
        if (!nbd_peer_is_root(nbd_job_peer(job)) && !nbd_child_can_run_as_caller())
                return nbd_result_set(res, -EPERM,
                                      "exec: this helper cannot run a program as uid %u: it was "
                                      "not given CAP_SETUID, CAP_SETGID and CAP_KILL (see "
                                      "netbrokerd(8), Programs)",
                                      (unsigned)nbd_job_peer(job)->uid);
        if ((r = nbd_job_spawn_admit(job, res, &admitted)) < 0)
                return r;
        if (!admitted)
                return 0; /* parked until a slot is free; run again then */
        x = calloc(1, sizeof(*x));
        if (!x)
                return nbd_result_set(res, -ENOMEM, "exec: out of memory");
        *x = (struct exec_run){.sp = &nbd_job_ctx(job)->be->spawn,
                               .job = job,
                               .res = res,
                               .e = e,
                               .argv = nbd_exec_build_argv(e->path, e->argv, e->n_argv),
                               .envp = nbd_exec_build_env(e->env, e->n_env)};
        if (!x->argv || !x->envp) {
                exec_run_free(x);
                return nbd_result_set(res, -ENOMEM, "exec: out of memory");
        }
        if (cap > nbd_job_reply_budget(job) / 2)
                cap = nbd_job_reply_budget(job) / 2;
        spec = (struct nbd_exec_spec){
                /* The file checked at start-up, not e->path again: a
                 * symlink on the way may have been changed since. */
                .path = file,
                .argv = x->argv,
                .envp = x->envp,
                .stdin_data = e->stdin_data.data,
                .stdin_len = e->stdin_data.len,
                .timeout_ms = e->timeout_ms ? e->timeout_ms : cfg->exec_timeout_ms,
                .output_cap = cap,
                .uid = nbd_job_peer(job)->uid,
                .as = nbd_job_peer(job),
#ifdef NB_TEST_HOOKS
                .test_stop = getenv("NETBROKERD_TEST_CHILD_STOP") != NULL,
#endif
        };
        r = x->sp->spawn(nbd_job_ctx(job)->loop, &spec, exec_done, x, &x->child);
        if (r < 0) {
                exec_run_free(x);
                return nbd_result_set(res, r, "exec: cannot run %s: %s", e->path, strerror(-r));
        }
        nbd_job_park(job, exec_cancel, x);
        return 0;
}

const struct nbd_op_handler nbd_op_exec = {
        .name = "exec",
        .stat = NBD_STAT_OPS_EXEC,
        .validate = validate_exec,
        .run = run_exec,
};
