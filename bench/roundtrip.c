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
 * turns: one A, one A2 and 100 Pings, the order reversed every other
 * round. Figures: p50 (median), p99 (nearest rank), min, max. */
#include "bench.h"

#include <errno.h>

#define ROUNDS_FULL 300u
#define ROUNDS_QUICK 30u
#define WARMUP 3u

static const char *const true_argv[] = {"true", NULL};
static const struct bench_cmd true_cmd = {"fork, exec /bin/true", "/bin/true", true_argv, NULL};

static const struct bench_method methods[] = {
        {.name = "A", .how = BENCH_FORK_LOOP, .cmd = &true_cmd},
        {.name = "A2", .how = BENCH_FORK_RANGE, .cmd = &true_cmd},
        {.name = "P", .how = BENCH_BROKER_PING, .per_round = 100, .program = "one-op Ping batch"},
};
#define N_METHODS (sizeof(methods) / sizeof(*methods))

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

static int add_results(struct bench_report *r, const struct bench_summary *s)
{
        int k = 0;

        /* The ratios of p50 ("A/P p50"), then of p99, as before. */
        for (size_t i = 0; i < 2 && k == 0; i++) {
                char name[48];
                snprintf(name, sizeof(name), "%s/P p50", methods[i].name);
                k = bench_report_add_ratio(r, name, s[i].median_us / s[2].median_us);
                snprintf(name, sizeof(name), "%s/P p99", methods[i].name);
                if (k == 0)
                        k = bench_report_add_ratio(r, name, s[i].p99_us / s[2].p99_us);
        }
        for (size_t m = 0; m < N_METHODS && k == 0; m++) {
                const char *what = methods[m].program ? methods[m].program : true_cmd.label;
                double v[N_COLS] = {
                        [C_RUNS] = (double)s[m].n, [C_P50] = s[m].median_us, [C_P99] = s[m].p99_us,
                        [C_MIN] = s[m].min_us,     [C_MAX] = s[m].max_us,
                };
                if (!bench_report_add_line(r, methods[m].name, v, N_COLS, what))
                        k = -ENOSPC;
        }
        if (k == 0)
                k = bench_report_add_compare(r, "empty round trip, p50", "A", &s[0], "A2", &s[1],
                                             "P", &s[2]);
        return k;
}

int bench_roundtrip(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL};
        unsigned rounds = o->reps ? o->reps : o->quick ? ROUNDS_QUICK : ROUNDS_FULL;
        struct bench_summary s[N_METHODS];
        struct bench_ctx c = {0};
        int k;

        r->title = "latency of one request: a one-op Ping batch versus fork/exec of /bin/true";
        r->legend = legend;
        r->figures = (struct bench_figures){
                .cols = columns, .n_cols = N_COLS, .text_key = "what", .text_heading = "what"};
        k = bench_ctx_start(&c, o, r, true, allow, NULL);
        if (k < 0)
                return k;
        k = bench_run_rounds(&c, "roundtrip", methods, N_METHODS, WARMUP, rounds, s, NULL);
        if (k == 0)
                k = bench_report_methods(r, methods, s, N_METHODS, NULL, NULL);
        if (k == 0)
                k = add_results(r, s);
        bench_ctx_stop(&c);
        return k;
}
