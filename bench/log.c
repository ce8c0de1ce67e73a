// SPDX-License-Identifier: LGPL-2.1-or-later
/* Scenario "log": what disabled debug messages cost the helper's hot path
 * (seeds/004): netbrokerd with debug off at run time (O) against
 * netbrokerd-nolog, debug compiled out (X), each sent batches of 10,000
 * Pings in turn; wall time and the helper's CPU time (schedstat). */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netbroker.h"

#define OPS 10000u
#define LIMIT_PCT 2.0

enum helper { H_OFF, H_OUT, N_HELPERS };

/* One helper: the runner keeps the wall times, this its cpu times. */
struct side {
        nb_conn *conn;
        int pid;
        struct bench_samples cpu;
        uint64_t cpu0; /* at the start of its last batch */
        bool pending; /* that batch's cpu time is still to be recorded */
};

static struct side sides[N_HELPERS];
static nb_batch *pings; /* OPS Pings, built once, submitted again each time */

/* A batch's cpu time is read once the helper waits again (the kernel
 * updates run time when a task stops): at its next batch, or after a pause
 * at the end. The nanoseconds it ran on a CPU, from schedstat. */
static int close_cpu(struct side *s, uint64_t *ret_now)
{
        char path[64];
        unsigned long long ns;
        FILE *f;
        int n;

        snprintf(path, sizeof(path), "/proc/%d/schedstat", s->pid);
        if (!(f = fopen(path, "re")))
                return -errno;
        n = fscanf(f, "%llu", &ns);
        fclose(f);
        if (n != 1)
                return -EIO;
        n = s->pending ? bench_samples_add(&s->cpu, (double)(ns - s->cpu0) / 1000.0) : 0;
        s->pending = false;
        *ret_now = ns;
        return n;
}

/* The method of both O and X: one batch to the helper of m->arg. */
static int one_batch(struct bench_ctx *c, const struct bench_method *m, bool timed, double *ret_us)
{
        struct side *s = &sides[m - (const struct bench_method *)m->arg];
        nb_results *res = NULL;
        uint64_t t0, t1 = 0;
        int r = close_cpu(s, &s->cpu0);

        (void)c;
        t0 = bench_now_ns();
        if (r == 0)
                r = bench_submit_all(s->conn, pings, OPS, "log: ", &t1, &res);
        nb_results_free(res);
        s->pending = r == 0 && timed;
        *ret_us = (double)(t1 - t0) / 1000.0;
        return r;
}

static const struct bench_method methods[N_HELPERS] = {
        {.name = "O",
         .how = BENCH_CUSTOM,
         .fn = one_batch,
         .arg = methods,
         .program = "10,000 Pings, wall"},
        {.name = "X",
         .how = BENCH_CUSTOM,
         .fn = one_batch,
         .arg = methods,
         .program = "10,000 Pings, wall"},
};

/* The nolog helper: --helper-nolog, $NETBROKERD_NOLOG, the build tree's,
 * or beside the helper being measured. NULL when none is executable. */
static const char *find_nolog(const struct bench_opts *o, char *buf, size_t len)
{
        const char *env = getenv("NETBROKERD_NOLOG");
        const char *slash = o->helper ? strrchr(o->helper, '/') : NULL;

        if (o->helper_nolog)
                return o->helper_nolog;
        if (env && *env)
                return env;
#ifdef NB_BUILD_HELPER_NOLOG
        if (access(NB_BUILD_HELPER_NOLOG, X_OK) == 0)
                return NB_BUILD_HELPER_NOLOG;
#endif
        if (slash)
                snprintf(buf, len, "%.*s/netbrokerd-nolog", (int)(slash - o->helper), o->helper);
        return slash && access(buf, X_OK) == 0 ? buf : NULL;
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
        if (r == 0 && (r = bench_samples_summarize(&d, &s)) == 0)
                *ret = s.median_us;
        bench_samples_clear(&d);
        return r;
}

/* Rows O, X of wall and of cpu; X (the floor) over O, as a baseline over
 * the broker elsewhere. */
static int add_results(struct bench_report *r, const struct bench_summary *w,
                       const struct bench_samples *wall)
{
        static const char *const names[N_HELPERS] = {"O", "X"};
        struct bench_summary c[N_HELPERS];
        double dw, dc, cm[N_HELPERS];
        int k = bench_report_methods(r, methods, w, N_HELPERS, "X/O", NULL);

        for (int h = 0; h < N_HELPERS && k == 0; h++) {
                k = bench_samples_summarize(&sides[h].cpu, &c[h]);
                cm[h] = c[h].median_us;
        }
        for (int h = 0; h < N_HELPERS && k == 0; h++)
                k = bench_report_add_row(r, names[h], "10,000 Pings, cpu", &c[h], &c[H_OFF]);
        if (k == 0)
                k = bench_report_ratios(r, "X/O", " cpu", names, cm, N_HELPERS);
        if (k == 0)
                k = paired_pct(&wall[H_OFF], &wall[H_OUT], &dw);
        if (k == 0)
                k = paired_pct(&sides[H_OFF].cpu, &sides[H_OUT].cpu, &dc);
        if (k == 0)
                k = bench_report_add_compare(r, "10,000 Pings, debug compiled out / off", "X",
                                             &w[H_OUT], NULL, NULL, "O", &w[H_OFF]);
        return k ? k
                 : bench_report_add_note(r,
                                         "O - X, median of pairs: %+.2f%% wall, %+.2f%% helper "
                                         "cpu (limit %.0f%%): %s",
                                         dw, dc, LIMIT_PCT,
                                         fabs(dw) < LIMIT_PCT && fabs(dc) < LIMIT_PCT ? "within"
                                                                                      : "OVER");
}

int bench_log_scenario(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL};
        static const char extra[] = "max_ops = 10000\nlog_level = notice\n";
        struct timespec pause = {0, 5 * 1000 * 1000};
        struct bench_ctx c = {0};
        struct bench_samples wall[N_HELPERS] = {0};
        struct bench_summary w[N_HELPERS];
        char buf[4096];
        const char *nolog = find_nolog(o, buf, sizeof(buf));
        uint64_t now;
        int k;

        r->title = "10,000 Pings in one batch: debug messages off versus compiled out";
        if (!nolog) {
                bench_log("netbroker-bench: log: no netbrokerd-nolog (build with -DNB_BENCH=ON "
                          "and run from the build tree, or give --helper-nolog PATH)\n");
                return -ENOENT;
        }
        /* Both spawned alike from this process, with no fat parent. */
        k = bench_ctx_start(&c, o, r, false, allow, extra, NULL);
        sides[H_OFF].conn = c.conn;
        if (k == 0)
                k = bench_broker_start(nolog, allow, extra, NULL, &sides[H_OUT].conn);
        for (int h = 0; h < N_HELPERS && k == 0; h++)
                if ((sides[h].pid = nb_conn_helper_pid(sides[h].conn)) <= 0)
                        k = -ESRCH;
        if (k == 0 && !(pings = nb_batch_new()))
                k = -ENOMEM;
        for (unsigned i = 0; i < OPS && k == 0; i++)
                k = nb_batch_ping(pings);
        if (k == 0)
                k = bench_run_rounds(&c, "log", methods, N_HELPERS, 5,
                                     o->reps    ? o->reps
                                     : o->quick ? 101
                                                : 1001,
                                     w, wall);
        if (k == 0)
                nanosleep(&pause, NULL);
        for (int h = 0; h < N_HELPERS && k == 0; h++)
                k = close_cpu(&sides[h], &now);
        if (k == 0)
                k = add_results(r, w, wall);
        nb_batch_free(pings);
        nb_close(sides[H_OUT].conn);
        bench_ctx_stop(&c);
        for (int h = 0; h < N_HELPERS; h++) {
                bench_samples_clear(&sides[h].cpu);
                bench_samples_clear(&wall[h]);
        }
        memset(sides, 0, sizeof(sides));
        pings = NULL;
        return k;
}
