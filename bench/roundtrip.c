/* Scenario "roundtrip": a one-op Ping request (P) against fork/exec of
 * /bin/true from the fat parent (A, A2): the floor of either kind of work. */
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
        k = bench_ctx_start(&c, o, r, true, allow, NULL, NULL);
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
