/* Scenario "log": what disabled debug messages cost the helper's hot path
 * (seeds/004): netbrokerd with debug off at run time (O) against
 * netbrokerd-nolog, debug compiled out (X), each sent batches of 10,000
 * Pings in turn; wall time and the helper's CPU time (schedstat). */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netbroker.h"

#define OPS 10000u
#define WARMUP 5u
#define REPS_FULL 1001u
#define REPS_QUICK 101u
#define LIMIT_PCT 2.0

enum helper { H_OFF, H_OUT, N_HELPERS };

static const char *const helper_names[N_HELPERS] = {"O", "X"};

struct side {
        nb_conn *conn;
        int pid;
        struct bench_samples cpu; /* the runner keeps the wall times */
        uint64_t cpu0; /* at the start of its last batch */
        bool pending; /* that batch's cpu time is still to be recorded */
};

struct log_state {
        struct side sd[N_HELPERS];
        nb_batch *b; /* OPS Pings, built once, submitted again each time */
};

/* Nanoseconds the process has run on a CPU, or -errno. */
static int cpu_ns(int pid, uint64_t *ret)
{
        char path[64];
        unsigned long long ns;
        FILE *f;
        int n;

        snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        n = fscanf(f, "%llu", &ns);
        fclose(f);
        if (n != 1)
                return -EIO;
        *ret = ns;
        return 0;
}

static int check_results(const nb_results *res)
{
        long bad;

        if (nb_results_count(res) != OPS) {
                bench_log("netbroker-bench: log: %zu results for %u Pings\n", nb_results_count(res),
                          OPS);
                return -EPROTO;
        }
        bad = nb_results_first_error(res);
        if (bad >= 0) {
                bench_log("netbroker-bench: log: Ping %ld: %s\n", bad,
                          nb_result_message(res, (size_t)bad));
                return nb_result_status(res, (size_t)bad);
        }
        return 0;
}

/* A batch's cpu time is read once the helper waits again (the kernel
 * updates run time when a task stops): at its next batch, or after a
 * pause at the end. */
static int close_cpu(struct side *s, uint64_t now)
{
        int r = 0;

        if (s->pending)
                r = bench_samples_add(&s->cpu, (double)(now - s->cpu0) / 1000.0);
        s->pending = false;
        return r;
}

static int flush_cpu(struct side *s)
{
        struct timespec pause = {0, 5 * 1000 * 1000};
        uint64_t now = 0;
        int r;

        nanosleep(&pause, NULL);
        r = cpu_ns(s->pid, &now);
        return r < 0 ? r : close_cpu(s, now);
}

/* The method of both O and X: one batch to the helper of m->arg. */
static int one_batch(struct bench_ctx *c, const struct bench_method *m, bool timed, double *ret_us)
{
        struct log_state *st = c->scenario;
        struct side *s = &st->sd[*(const int *)m->arg];
        nb_results *res = NULL;
        uint64_t c0 = 0, t0, t1;
        int r;

        r = cpu_ns(s->pid, &c0);
        if (r == 0)
                r = close_cpu(s, c0);
        if (r < 0)
                return r;
        s->cpu0 = c0;
        t0 = bench_now_ns();
        r = nb_submit(s->conn, st->b, &res);
        t1 = bench_now_ns();
        if (r < 0) {
                bench_log("netbroker-bench: log: submit: %s (%s)\n", strerror(-r),
                          nb_conn_error(s->conn));
                return r;
        }
        r = check_results(res);
        nb_results_free(res);
        if (r < 0)
                return r;
        s->pending = timed;
        *ret_us = (double)(t1 - t0) / 1000.0;
        return 0;
}

/* The nolog helper: --helper-nolog, $NETBROKERD_NOLOG, the build tree's,
 * or beside the helper being measured. NULL when none is executable. */
static const char *find_nolog(const struct bench_opts *o, char *buf, size_t len)
{
        const char *env = getenv("NETBROKERD_NOLOG");
        const char *slash;

        if (o->helper_nolog)
                return o->helper_nolog;
        if (env && *env)
                return env;
#ifdef NB_BUILD_HELPER_NOLOG
        if (access(NB_BUILD_HELPER_NOLOG, X_OK) == 0)
                return NB_BUILD_HELPER_NOLOG;
#endif
        if (o->helper && (slash = strrchr(o->helper, '/'))) {
                snprintf(buf, len, "%.*s/netbrokerd-nolog", (int)(slash - o->helper), o->helper);
                if (access(buf, X_OK) == 0)
                        return buf;
        }
        return NULL;
}

/* The median of (O - X) / X in percent, each O against the X of its own
 * round: slow drift moves both halves of a pair alike and cancels. */
static int paired_pct(const struct bench_samples *o, const struct bench_samples *x, double *ret)
{
        struct bench_samples d = {0};
        struct bench_summary s;
        int r = 0;

        for (size_t i = 0; i < o->n && i < x->n && r == 0; i++)
                r = bench_samples_add(&d, 100.0 * (o->us[i] - x->us[i]) / x->us[i]);
        if (r == 0)
                r = bench_samples_summarize(&d, &s);
        if (r == 0)
                *ret = s.median_us;
        bench_samples_clear(&d);
        return r;
}

static int add_results(struct bench_report *r, const struct log_state *st,
                       const struct bench_summary *w, const struct bench_samples *wall)
{
        struct bench_summary c[N_HELPERS];
        double dw, dc;
        int k = 0;

        for (int h = 0; h < N_HELPERS && k == 0; h++)
                k = bench_samples_summarize(&st->sd[h].cpu, &c[h]);
        for (int h = 0; h < N_HELPERS && k == 0; h++)
                k = bench_report_add_row(r, helper_names[h], "10,000 Pings, cpu", &c[h], &c[H_OFF]);
        if (k == 0)
                k = paired_pct(&wall[H_OFF], &wall[H_OUT], &dw);
        if (k == 0)
                k = paired_pct(&st->sd[H_OFF].cpu, &st->sd[H_OUT].cpu, &dc);
        if (k < 0)
                return k;
        /* Baseline first, as in every other scenario: X is the floor. */
        bench_report_add_ratio(r, "X/O", w[H_OUT].median_us / w[H_OFF].median_us);
        bench_report_add_ratio(r, "X/O cpu", c[H_OUT].median_us / c[H_OFF].median_us);
        bench_report_add_compare(r, "10,000 Pings, debug compiled out / off", "X", &w[H_OUT], NULL,
                                 NULL, "O", &w[H_OFF]);
        return bench_report_add_note(
                r, "O - X, median of pairs: %+.2f%% wall, %+.2f%% helper cpu (limit %.0f%%): %s",
                dw, dc, LIMIT_PCT,
                fabs(dw) < LIMIT_PCT && fabs(dc) < LIMIT_PCT ? "within" : "OVER");
}

static const int helper_index[N_HELPERS] = {H_OFF, H_OUT};

static const struct bench_method methods[N_HELPERS] = {
        {.name = "O",
         .how = BENCH_CUSTOM,
         .fn = one_batch,
         .arg = &helper_index[H_OFF],
         .program = "10,000 Pings, wall"},
        {.name = "X",
         .how = BENCH_CUSTOM,
         .fn = one_batch,
         .arg = &helper_index[H_OUT],
         .program = "10,000 Pings, wall"},
};

int bench_log_scenario(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL};
        static const char extra[] = "max_ops = 10000\nlog_level = notice\n";
        unsigned reps = o->reps ? o->reps : o->quick ? REPS_QUICK : REPS_FULL;
        struct log_state st = {0};
        struct bench_ctx c = {.scenario = &st};
        struct bench_samples wall[N_HELPERS] = {0};
        struct bench_summary w[N_HELPERS];
        const char *nolog;
        char buf[4096];
        int k = 0;

        r->title = "10,000 Pings in one batch: debug messages off versus compiled out";
        nolog = find_nolog(o, buf, sizeof(buf));
        if (!nolog) {
                bench_log("netbroker-bench: log: no netbrokerd-nolog (build with -DNB_BENCH=ON "
                          "and run from the build tree, or give --helper-nolog PATH)\n");
                return -ENOENT;
        }
        /* Both spawned alike from this process, with no fat parent. */
        k = bench_ctx_start(&c, o, r, false, allow, extra);
        if (k < 0)
                return k;
        st.sd[H_OFF].conn = c.conn;
        k = bench_broker_start(nolog, allow, extra, &st.sd[H_OUT].conn);
        for (int h = 0; h < N_HELPERS && k == 0; h++) {
                st.sd[h].pid = nb_conn_helper_pid(st.sd[h].conn);
                if (st.sd[h].pid <= 0)
                        k = -ESRCH;
        }
        if (k < 0)
                goto out;
        st.b = nb_batch_new();
        for (unsigned i = 0; st.b && i < OPS && k == 0; i++)
                k = nb_batch_ping(st.b);
        if (!st.b)
                k = -ENOMEM;
        if (k == 0)
                k = bench_run_rounds(&c, "log", methods, N_HELPERS, WARMUP, reps, w, wall);
        for (int h = 0; h < N_HELPERS && k == 0; h++)
                k = flush_cpu(&st.sd[h]);
        if (k == 0)
                k = bench_report_methods(r, methods, w, N_HELPERS, NULL, NULL);
        if (k == 0)
                k = add_results(r, &st, w, wall);
out:
        nb_batch_free(st.b);
        if (st.sd[H_OUT].conn)
                nb_close(st.sd[H_OUT].conn);
        bench_ctx_stop(&c);
        for (int h = 0; h < N_HELPERS; h++) {
                bench_samples_clear(&st.sd[h].cpu);
                bench_samples_clear(&wall[h]);
        }
        return k;
}
