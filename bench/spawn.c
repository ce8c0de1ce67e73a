/* Scenario "spawn": one command by fork/exec from the fat parent (A: close
 * loop, A2: close_range) against one Exec op a request (B) and 100 (C). */
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
