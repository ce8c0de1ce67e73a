/* Scenarios "spawn": one command by fork/exec from the fat parent (A: close
 * loop, A2: close_range) against one Exec op a request (B) and 100 (C); and
 * "roundtrip": a one-op Ping request (P) against fork/exec of /bin/true
 * (A, A2), the floor of either kind of work. */
#include "bench.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define BATCH_OPS 100u
#define WARMUP 2u

static const char *const true_argv[] = {"true", NULL};
static const char *const iptables_argv[] = {"iptables", "-w", "-L", "-n", NULL};

/* /bin/true gets n commands per method, iptables-nft (milliseconds a run)
 * a quarter; C one request of 100 per 40 commands. */
static int bench_program(struct bench_ctx *c, const struct bench_cmd *p, const char *suffix,
                         unsigned n_cmds, unsigned n_batches, struct bench_report *r)
{
        const struct bench_method ms[] = {
                {.name = "A", .how = BENCH_FORK_LOOP, .cmd = p},
                {.name = "A2", .how = BENCH_FORK_RANGE, .cmd = p},
                {.name = "B", .how = BENCH_BROKER_EXEC, .cmd = p},
                {.name = "C",
                 .how = BENCH_BROKER_EXEC,
                 .cmd = p,
                 .ops = BATCH_OPS,
                 .runs = n_batches},
        };
        struct bench_summary s[4];
        char what[56];
        int k = bench_run_rounds(c, "spawn", ms, 4, WARMUP, n_cmds, s, NULL);

        if (k == 0)
                k = bench_report_methods(r, ms, s, 4, "A/B A/C A2/B A2/C B/C", suffix);
        snprintf(what, sizeof(what), "%s, per command", p->label);
        if (k == 0)
                k = bench_report_add_compare(r, what, "A", &s[0], "A2", &s[1], "B", &s[2]);
        snprintf(what, sizeof(what), "%s, per command, 100 a request", p->label);
        if (k == 0 && !*suffix)
                k = bench_report_add_compare(r, what, "A", &s[0], "A2", &s[1], "C", &s[3]);
        return k;
}

int bench_spawn(const struct bench_opts *o, struct bench_report *r)
{
        const struct bench_cmd t = {"/bin/true", "/bin/true", true_argv, NULL};
        const struct bench_cmd ipt = {"iptables -w -L -n", bench_find_tool("iptables"),
                                      iptables_argv, "Chain INPUT"};
        const char *allow[3] = {t.path, ipt.path, NULL};
        unsigned n = o->count ? o->count : o->quick ? 20 : 200;
        struct bench_ctx c = {.open_max = sysconf(_SC_OPEN_MAX)};
        int k;

        r->title = "cost per command, fork/exec from a fat parent versus netbrokerd";
        if (access(t.path, X_OK) < 0) {
                k = -errno;
                bench_log("netbroker-bench: %s: %s\n", t.path, strerror(-k));
                return k;
        }
        if (!ipt.path)
                bench_report_add_note(r, "iptables not found: its rows are skipped");
        k = bench_ctx_start(&c, o, r, true, allow, NULL, (const char *const[]){"exec", NULL});
        if (k < 0)
                return k;
        k = bench_program(&c, &t, "", n, n / 40 > 2 ? n / 40 : 2, r);
        if (k == 0 && ipt.path)
                k = bench_program(&c, &ipt, " iptables", n / 4 > 3 ? n / 4 : 3,
                                  (n / 40 + 1) / 2 > 1 ? (n / 40 + 1) / 2 : 1, r);
        bench_ctx_stop(&c);
        return k;
}

static const struct bench_cmd true_cmd = {"fork, exec /bin/true", "/bin/true", true_argv, NULL};
static const struct bench_method round_methods[] = {
        {.name = "A", .how = BENCH_FORK_LOOP, .cmd = &true_cmd},
        {.name = "A2", .how = BENCH_FORK_RANGE, .cmd = &true_cmd},
        {.name = "P", .how = BENCH_BROKER_PING, .per_round = 100, .program = "one-op Ping batch"},
};

int bench_roundtrip(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL}, *names[] = {"A", "A2", "P"};
        struct bench_summary s[3];
        struct bench_ctx c = {0};
        double p50[3], p99[3];
        int k = bench_ctx_start(&c, o, r, true, allow, NULL, NULL);

        r->title = "latency of one request: a one-op Ping batch versus fork/exec of /bin/true";
        if (k == 0)
                k = bench_run_rounds(&c, "roundtrip", round_methods, 3, 3,
                                     o->reps    ? o->reps
                                     : o->quick ? 30
                                                : 300,
                                     s, NULL);
        if (k == 0)
                k = bench_report_methods(r, round_methods, s, 3, NULL, NULL);
        for (int i = 0; i < 3; i++) {
                p50[i] = s[i].median_us;
                p99[i] = s[i].p99_us;
        }
        /* The ratios of p50 ("A/P p50"), then of p99, per baseline. */
        for (int i = 0; i < 2 && k == 0; i++) {
                char spec[8];
                snprintf(spec, sizeof(spec), "%s/P", names[i]);
                k = bench_report_ratios(r, spec, " p50", names, p50, 3);
                if (k == 0)
                        k = bench_report_ratios(r, spec, " p99", names, p99, 3);
        }
        if (k == 0)
                k = bench_report_add_compare(r, "empty round trip, p50", "A", &s[0], "A2", &s[1],
                                             "P", &s[2]);
        bench_ctx_stop(&c);
        return k;
}
