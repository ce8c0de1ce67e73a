/* Scenario "spawn": what one command costs a management daemon.
 *
 *  A   the 2018 way (seeds/001): fork() from the fat parent, close every fd
 *      from 3 up to the fd limit one by one, exec.
 *  A2  today's libvirt: fork(), close_range(3, ~0), exec. The page-table
 *      copy of fork() stays; only the close loop is gone.
 *  B   the same parent sends each command to netbrokerd as a request with
 *      one Exec op; the helper posix_spawns it from a small process.
 *  C   100 Exec ops in one request; the cost per command is the request's
 *      time divided by 100.
 *
 * The methods take turns, one command each per round (C: a request every
 * n/40 rounds), the order reversed every other round.
 *
 * Every command is timed on its own (C: every request), from the first
 * system call it needs until its exit status is known, and every one must
 * succeed: a fast failure is not a result. */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netbroker.h"

#define FAT_FD_LIMIT 8192u
#define FAT_FDS 500u
#define FAT_HEAP (1024ul * 1024 * 1024)
#define BATCH_OPS 100u
#define WARMUP 2u

static const char *const true_argv[] = {"true", NULL};
static const char *const iptables_argv[] = {"iptables", "-w", "-L", "-n", NULL};

struct program {
        const char *name; /* suffix of its ratio names: "" or "iptables" */
        const char *label; /* its rows' program column */
        const char *path;
        const char *const *argv;
        const char *expect; /* in its stdout when it really ran, or NULL */
        unsigned n_cmds; /* commands for A, A2 and B each */
        unsigned n_batches; /* requests of BATCH_OPS commands for C */
};

enum method { M_A, M_A2, M_B, M_C, N_METHODS };

static const char *const method_names[N_METHODS] = {"A", "A2", "B", "C"};

static const char *const legend[] = {
        "A   fork from the fat parent, close fds 3..limit-1 one by one, exec (libvirt 2018)",
        "A2  fork from the fat parent, close_range(3, ~0), exec (libvirt today)",
        "B   one Exec per request to netbrokerd (posix_spawn in the helper)",
        "C   100 Exec ops in one request to netbrokerd, time per command",
        "vs A: median of A / median of the row; runs of C are requests of 100",
        NULL,
};

/* ---- A and A2: fork and exec from this process ---- */

struct fork_ctx {
        const struct bench_fat_parent *fp;
        long open_max; /* sysconf(_SC_OPEN_MAX), taken before fork as virExec did */
        bool close_range;
};

static int check_child(const char *method, const struct program *p, int status, const char *out)
{
        if (WIFSIGNALED(status))
                bench_log("netbroker-bench: %s %s: killed by signal %d\n", method, p->label,
                          WTERMSIG(status));
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                bench_log("netbroker-bench: %s %s: exited with status %d\n", method, p->label,
                          WEXITSTATUS(status));
        else if (p->expect && !strstr(out, p->expect))
                bench_log("netbroker-bench: %s %s: exited 0 without printing \"%s\"\n", method,
                          p->label, p->expect);
        else
                return 0;
        if (out[0])
                bench_log("  its output: %s\n", out);
        return -EIO;
}

static int fork_exec_once(const struct fork_ctx *c, const struct program *p, double *ret_us)
{
        char out[1024];
        size_t out_len;
        uint64_t t0 = bench_now_ns(), t1;
        int status, r;

        r = bench_fork_exec(c->fp, c->close_range ? BENCH_CLOSE_RANGE : BENCH_CLOSE_LOOP,
                            c->open_max, p->path, (char *const *)p->argv, out, sizeof(out),
                            &out_len, &status);
        t1 = bench_now_ns();
        if (r < 0) {
                bench_log("netbroker-bench: %s: %s\n", p->label, strerror(-r));
                return r;
        }
        r = check_child(c->close_range ? "A2" : "A", p, status, out);
        if (r < 0)
                return r;
        *ret_us = (double)(t1 - t0) / 1000.0;
        return 0;
}

/* ---- B and C: through the helper ---- */

static int check_exec(enum method m, const nb_results *res, size_t i, const struct program *p)
{
        int status = nb_result_status(res, i);
        nb_exec_result er;
        bool have = nb_result_exec(res, i, &er) == 0;

        if (status == 0 && have && er.signal == 0 && er.exit_code == 0) {
                if (!p->expect || memmem(er.out, er.out_len, p->expect, strlen(p->expect)))
                        return 0;
                bench_log("netbroker-bench: %s %s: op %zu: exited 0, but \"%s\" is not in its "
                          "%zu bytes of stdout\n",
                          method_names[m], p->label, i, p->expect, er.out_len);
                return -EIO;
        }
        bench_log("netbroker-bench: %s %s: op %zu: status %d (%s) \"%s\"", method_names[m],
                  p->label, i, status, strerror(status < 0 ? -status : status),
                  nb_result_message(res, i));
        if (have)
                bench_log(", exit %d, signal %d, stderr: %.*s", er.exit_code, er.signal,
                          (int)(er.err_len > 512 ? 512 : er.err_len), (const char *)er.err);
        bench_log("\n");
        /* A status of 0 with a failed program is a helper bug; still a failure. */
        return status < 0 ? status : -EIO;
}

static int submit_timed(enum method m, nb_conn *conn, const struct program *p, unsigned ops,
                        double *ret_us)
{
        nb_results *res = NULL;
        nb_batch *b;
        uint64_t t0 = bench_now_ns(), t1;
        int r = 0;

        /* Building the batch is part of what a client pays per command. */
        b = nb_batch_new();
        if (!b)
                return -ENOMEM;
        for (unsigned i = 0; i < ops && r == 0; i++)
                r = nb_batch_exec(b, p->path, p->argv, NULL, NULL, 0, 0);
        if (r < 0) {
                bench_log("netbroker-bench: %s: cannot build the batch: %s\n", p->label,
                          strerror(-r));
                goto out;
        }
        r = nb_submit(conn, b, &res);
        t1 = bench_now_ns();
        if (r < 0) {
                bench_log("netbroker-bench: %s %s: submit failed: %s (%s)\n", method_names[m],
                          p->label, strerror(-r), nb_conn_error(conn));
                goto out;
        }
        if (nb_results_count(res) != ops) {
                bench_log("netbroker-bench: %s %s: %zu results for %u ops\n", method_names[m],
                          p->label, nb_results_count(res), ops);
                r = -EPROTO;
                goto out;
        }
        for (size_t i = 0; i < ops && r == 0; i++)
                r = check_exec(m, res, i, p);
        if (r == 0)
                *ret_us = (double)(t1 - t0) / 1000.0 / ops;
out:
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* ---- running a method ---- */

struct run {
        struct fork_ctx fork;
        nb_conn *conn;
};

static int run_once(const struct run *run, enum method m, const struct program *p, double *ret_us)
{
        struct fork_ctx c = run->fork;

        switch (m) {
        case M_A:
        case M_A2:
                c.close_range = m == M_A2;
                return fork_exec_once(&c, p, ret_us);
        case M_B:
                return submit_timed(m, run->conn, p, 1, ret_us);
        case M_C:
                return submit_timed(m, run->conn, p, BATCH_OPS, ret_us);
        default:
                return -EINVAL;
        }
}

/* Rounds: one command each of A, A2 and B, and a request of C every
 * n_cmds / n_batches rounds, the order reversed every other round, so
 * that drift (other load, frequency, caches) hits every method alike. */
static int measure(const struct run *run, const struct program *p, struct bench_summary *ret)
{
        struct bench_samples s[N_METHODS] = {0};
        double us;
        int r = 0;

        /* Unrecorded runs first: the program's pages into the page cache,
         * the helper's first spawn, the dynamic loader's first lookups. */
        for (unsigned i = 0; i < WARMUP && r == 0; i++)
                for (int m = 0; m < N_METHODS && r == 0; m++)
                        r = run_once(run, (enum method)m, p, &us);
        for (unsigned i = 0; i < p->n_cmds && r == 0; i++) {
                /* C in the rounds where the count of its requests due moves on. */
                bool c_due = (i + 1) * p->n_batches / p->n_cmds != i * p->n_batches / p->n_cmds;
                for (int j = 0; j < N_METHODS && r == 0; j++) {
                        enum method m = (enum method)(i % 2 ? N_METHODS - 1 - j : j);
                        if (m == M_C && !c_due)
                                continue;
                        r = run_once(run, m, p, &us);
                        if (r == 0)
                                r = bench_samples_add(&s[m], us);
                }
        }
        for (int m = 0; m < N_METHODS && r == 0; m++) {
                r = bench_samples_summarize(&s[m], &ret[m]);
                if (r == 0)
                        bench_log("spawn: %-2s %-20s %5zu %s, median %10.1f us\n", method_names[m],
                                  p->label, ret[m].n, m == M_C ? "requests" : "commands",
                                  ret[m].median_us);
        }
        for (int m = 0; m < N_METHODS; m++)
                bench_samples_clear(&s[m]);
        return r;
}

static int add_ratio(struct bench_report *r, const struct program *p, enum method num,
                     enum method den, const struct bench_summary *s)
{
        char name[48];

        if (p->name[0])
                snprintf(name, sizeof(name), "%s/%s %s", method_names[num], method_names[den],
                         p->name);
        else
                snprintf(name, sizeof(name), "%s/%s", method_names[num], method_names[den]);
        return bench_report_add_ratio(r, name, s[num].median_us / s[den].median_us);
}

static int bench_program(const struct run *run, const struct program *p, struct bench_report *r)
{
        static const enum method pairs[][2] = {
                {M_A, M_B}, {M_A, M_C}, {M_A2, M_B}, {M_A2, M_C}, {M_B, M_C},
        };
        struct bench_summary s[N_METHODS];
        char what[56];
        int k = measure(run, p, s);

        if (k < 0)
                return k;
        for (int m = 0; m < N_METHODS; m++) {
                k = bench_report_add_row(r, method_names[m], p->label, &s[m], &s[M_A]);
                if (k < 0)
                        return k;
        }
        for (size_t i = 0; i < sizeof(pairs) / sizeof(*pairs); i++) {
                k = add_ratio(r, p, pairs[i][0], pairs[i][1], s);
                if (k < 0)
                        return k;
        }
        snprintf(what, sizeof(what), "%s, per command", p->label);
        k = bench_report_add_compare(r, what, "A", &s[M_A], "A2", &s[M_A2], "B", &s[M_B]);
        if (k == 0 && !p->name[0]) {
                snprintf(what, sizeof(what), "%s, per command, 100 a request", p->label);
                k = bench_report_add_compare(r, what, "A", &s[M_A], "A2", &s[M_A2], "C", &s[M_C]);
        }
        return k;
}

/* ---- the scenario ---- */

static const char *find_iptables(void)
{
        static const char *const candidates[] = {"/usr/sbin/iptables", "/sbin/iptables"};

        for (size_t i = 0; i < sizeof(candidates) / sizeof(*candidates); i++)
                if (access(candidates[i], X_OK) == 0)
                        return candidates[i];
        return NULL;
}

/* /bin/true gets `count` commands; iptables-nft takes milliseconds per run,
 * so it gets a quarter. C gets one request of 100 per 40 commands. */
static void plan(const struct bench_opts *o, struct program *t, struct program *ipt)
{
        unsigned n = o->count ? o->count : o->quick ? 20 : 200;

        t->n_cmds = n;
        t->n_batches = n / 40 > 2 ? n / 40 : 2;
        ipt->n_cmds = n / 4 > 3 ? n / 4 : 3;
        ipt->n_batches = (n / 40 + 1) / 2 > 1 ? (n / 40 + 1) / 2 : 1;
}

int bench_spawn(const struct bench_opts *o, struct bench_report *r)
{
        struct program progs[2] = {
                {.name = "", .label = "/bin/true", .path = "/bin/true", .argv = true_argv},
                {.name = "iptables",
                 .label = "iptables -w -L -n",
                 .argv = iptables_argv,
                 .expect = "Chain INPUT"},
        };
        const char *allow[3] = {progs[0].path, NULL, NULL};
        struct bench_fat_parent fp;
        struct run run = {0};
        size_t n_progs = 1;
        int k;

        r->title = "cost per command, fork/exec from a fat parent versus netbrokerd";
        r->legend = legend;
        plan(o, &progs[0], &progs[1]);
        if (access(progs[0].path, X_OK) < 0) {
                k = -errno;
                bench_log("netbroker-bench: %s: %s\n", progs[0].path, strerror(-k));
                return k;
        }
        progs[1].path = find_iptables();
        if (progs[1].path)
                allow[n_progs++] = progs[1].path;
        else
                bench_report_add_note(r, "iptables: not found in /usr/sbin or /sbin; "
                                         "its rows are skipped");

        k = bench_fat_parent_setup(FAT_FD_LIMIT, FAT_FDS, FAT_HEAP, &fp);
        if (k < 0) {
                bench_log("netbroker-bench: cannot set up the fat parent: %s\n", strerror(-k));
                return k;
        }
        r->has_parent = true;
        r->parent = fp;
        r->parent.heap = NULL;
        r->parent.fds = NULL;
        run.fork.fp = &fp;
        run.fork.open_max = sysconf(_SC_OPEN_MAX);

        /* After the fat setup, so the helper is spawned from the same parent
         * a daemon would spawn it from, fds and all. */
        k = bench_broker_start(o->helper, allow, &run.conn);
        if (k < 0)
                goto out;
        r->helper_pid = nb_conn_helper_pid(run.conn);
        r->helper_fds = r->helper_pid > 0 ? bench_count_fds(r->helper_pid) : 0;

        for (size_t i = 0; i < n_progs && k == 0; i++)
                k = bench_program(&run, &progs[i], r);
        bench_broker_stop(run.conn);
out:
        bench_fat_parent_release(&fp);
        return k;
}
