/* Scenario "roundtrip": the latency of asking the helper anything at all,
 * a request of one Ping op over the socketpair, against the cheapest thing
 * a daemon without a helper can do in a child: fork and exec /bin/true.
 *
 *  A   fork from the fat parent, close fds 3..limit-1 one by one, exec
 *      /bin/true, read its output to EOF, reap (libvirt 2018's virCommandRun)
 *  A2  the same with close_range(3, ~0) (libvirt today)
 *  P   nb_batch_new, one nb_batch_ping, nb_submit, nb_results_free: a whole
 *      request and reply, as a client pays for it
 *
 * The baseline is a floor, not an equivalent: no privileged work a daemon
 * forks for costs less than a fork and exec of /bin/true, and no work it
 * asks the helper for costs less than an empty round trip. Rounds take
 * turns: one A, one A2 and PINGS_PER_ROUND Pings, the order reversed every
 * other round, so drift hits all three. Figures: p50 (median), p99
 * (nearest rank), min, max. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netbroker.h"

#define ROUNDS_FULL 300u
#define ROUNDS_QUICK 30u
#define PINGS_PER_ROUND 100u
#define WARMUP 3u

enum method { M_A, M_A2, M_P, N_METHODS };

static const char *const method_names[N_METHODS] = {"A", "A2", "P"};
static const char *const programs[N_METHODS] = {"fork, exec /bin/true", "fork, exec /bin/true",
                                                "one-op Ping batch"};

static const char *const legend[] = {
        "A   fork from the fat parent, close fds 3..limit-1 one by one, exec /bin/true (2018)",
        "A2  fork from the fat parent, close_range(3, ~0), exec /bin/true (libvirt today)",
        "P   one request with one Ping op to netbrokerd over its socketpair, reply decoded",
        "A and A2 are the floor of any work done in a child; P the floor of any work asked of",
        "the helper. Rounds: one A, one A2, 100 P, order reversed every other round.",
        NULL,
};

enum col { C_RUNS, C_P50, C_P99, C_MIN, C_MAX, N_COLS };

static const struct bench_column columns[N_COLS] = {
        [C_RUNS] = {"runs", "runs", 6, 0},     [C_P50] = {"p50_us", "p50 us", 10, 1},
        [C_P99] = {"p99_us", "p99 us", 10, 1}, [C_MIN] = {"min_us", "min us", 10, 1},
        [C_MAX] = {"max_us", "max us", 10, 1},
};

struct ctx {
        struct bench_fat_parent fp;
        nb_conn *conn;
        struct bench_samples s[N_METHODS];
};

static int fork_true(struct ctx *c, enum bench_close how, double *ret_us)
{
        static char *const argv[] = {"true", NULL};
        char out[256];
        size_t len;
        uint64_t t0 = bench_now_ns();
        int st, r;

        r = bench_fork_exec(&c->fp, how, 0, "/bin/true", argv, out, sizeof(out), &len, &st);
        if (r == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                bench_log("netbroker-bench: roundtrip: /bin/true: status %d: %s\n", st, out);
                r = -EIO;
        }
        if (r == 0)
                *ret_us = (double)(bench_now_ns() - t0) / 1000.0;
        return r;
}

static int ping(struct ctx *c, double *ret_us)
{
        nb_results *res = NULL;
        uint64_t t0 = bench_now_ns();
        nb_batch *b = nb_batch_new();
        int r = b ? nb_batch_ping(b) : -ENOMEM;

        if (r == 0)
                r = nb_submit(c->conn, b, &res);
        if (r == 0 && (nb_results_count(res) != 1 || nb_result_status(res, 0) != 0))
                r = -EPROTO;
        nb_results_free(res);
        nb_batch_free(b);
        if (r < 0) {
                bench_log("netbroker-bench: roundtrip: Ping: %s (%s)\n", strerror(-r),
                          nb_conn_error(c->conn));
                return r;
        }
        *ret_us = (double)(bench_now_ns() - t0) / 1000.0;
        return 0;
}

static int run_one(struct ctx *c, enum method m, bool record)
{
        unsigned n = m == M_P ? PINGS_PER_ROUND : 1;
        double us;
        int r = 0;

        for (unsigned i = 0; i < n && r == 0; i++) {
                r = m == M_P ? ping(c, &us)
                             : fork_true(c, m == M_A ? BENCH_CLOSE_LOOP : BENCH_CLOSE_RANGE, &us);
                if (r == 0 && record)
                        r = bench_samples_add(&c->s[m], us);
        }
        return r;
}

static int add_results(struct ctx *c, struct bench_report *r)
{
        static const enum method bases[] = {M_A, M_A2};
        struct bench_summary s[N_METHODS];
        char name[48];
        int k = 0;

        for (int m = 0; m < N_METHODS && k == 0; m++)
                k = bench_samples_summarize(&c->s[m], &s[m]);
        for (int m = 0; m < N_METHODS && k == 0; m++) {
                double v[N_COLS] = {
                        [C_RUNS] = (double)s[m].n, [C_P50] = s[m].median_us, [C_P99] = s[m].p99_us,
                        [C_MIN] = s[m].min_us,     [C_MAX] = s[m].max_us,
                };
                k = bench_report_add_row(r, method_names[m], programs[m], &s[m], &s[M_A]);
                if (k == 0 && !bench_report_add_line(r, method_names[m], v, N_COLS, programs[m]))
                        k = -ENOSPC;
        }
        for (size_t i = 0; i < sizeof(bases) / sizeof(*bases) && k == 0; i++) {
                enum method m = bases[i];
                snprintf(name, sizeof(name), "%s/P p50", method_names[m]);
                k = bench_report_add_ratio(r, name, s[m].median_us / s[M_P].median_us);
                snprintf(name, sizeof(name), "%s/P p99", method_names[m]);
                if (k == 0)
                        k = bench_report_add_ratio(r, name, s[m].p99_us / s[M_P].p99_us);
        }
        if (k == 0)
                k = bench_report_add_compare(r, "empty round trip, p50", "A", &s[M_A], "A2",
                                             &s[M_A2], "P", &s[M_P]);
        return k;
}

int bench_roundtrip(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL};
        unsigned rounds = o->reps ? o->reps : o->quick ? ROUNDS_QUICK : ROUNDS_FULL;
        struct ctx *c = calloc(1, sizeof(*c));
        int k;

        if (!c)
                return -ENOMEM;
        r->title = "latency of one request: a one-op Ping batch versus fork/exec of /bin/true";
        r->legend = legend;
        r->figures.cols = columns;
        r->figures.n_cols = N_COLS;
        r->figures.text_key = "what";
        r->figures.text_heading = "what";
        k = bench_fat_parent_setup(BENCH_FAT_FD_LIMIT, BENCH_FAT_FDS, BENCH_FAT_HEAP, &c->fp);
        if (k < 0) {
                bench_log("netbroker-bench: cannot set up the fat parent: %s\n", strerror(-k));
                free(c);
                return k;
        }
        r->has_parent = true;
        r->parent = c->fp;
        r->parent.heap = NULL;
        r->parent.fds = NULL;
        /* After the fat setup: the helper is spawned from the parent a
         * daemon would spawn it from. */
        k = bench_broker_start(o->helper, allow, &c->conn);
        if (k < 0)
                goto out;
        r->helper_pid = nb_conn_helper_pid(c->conn);
        r->helper_fds = r->helper_pid > 0 ? bench_count_fds(r->helper_pid) : 0;

        for (unsigned i = 0; i < WARMUP && k == 0; i++)
                for (int m = 0; m < N_METHODS && k == 0; m++)
                        k = run_one(c, (enum method)m, false);
        for (unsigned i = 0; i < rounds && k == 0; i++)
                for (int j = 0; j < N_METHODS && k == 0; j++)
                        k = run_one(c, (enum method)(i % 2 ? N_METHODS - 1 - j : j), true);
        if (k == 0)
                k = add_results(c, r);
        if (k == 0)
                bench_log("roundtrip: %u rounds: A p50 %.1f us, A2 p50 %.1f us, P p50 %.1f us, "
                          "p99 %.1f us\n",
                          rounds, r->rows[0].s.median_us, r->rows[1].s.median_us,
                          r->rows[2].s.median_us, r->rows[2].s.p99_us);
        bench_broker_stop(c->conn);
out:
        bench_fat_parent_release(&c->fp);
        for (int m = 0; m < N_METHODS; m++)
                bench_samples_clear(&c->s[m]);
        free(c);
        return k;
}
