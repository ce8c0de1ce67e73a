// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbroker-bench: fork/exec versus the broker, one run, one report. Each
 * scenario is a row of the table below; every run is in a network
 * namespace of its own, so nothing it does touches the host's network. */
#include "bench.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
        const char *name;
        bench_scenario_fn run;
} scenarios[] = {
        {"spawn", bench_spawn},         {"names", bench_names},
        {"restart", bench_restart},     {"log", bench_log_scenario},
        {"roundtrip", bench_roundtrip}, {"bandwidth", bench_bandwidth},
        {"fairness", bench_fairness},   {"network", bench_network},
};

/* The scenarios and options are described in netbroker-bench(1). */
static void usage(FILE *f)
{
        fprintf(f, "usage: netbroker-bench SCENARIO|all|--scale [--json] [--json-out FILE] "
                   "[--png FILE] [--quick]\n"
                   "                       [--count N] [--counts N,N...] [--guests N] "
                   "[--sample K] [--reps N]\n"
                   "                       [--helper PATH] [--helper-nolog PATH]\nscenarios:");
        for (size_t i = 0; i < BENCH_N(scenarios); i++)
                fprintf(f, " %s", scenarios[i].name);
        fprintf(f, "\nSee netbroker-bench(1). Runs as root, in a network namespace of its own.\n");
}

bench_scenario_fn bench_find_scenario(const char *name)
{
        for (size_t i = 0; i < BENCH_N(scenarios); i++)
                if (strcmp(scenarios[i].name, name) == 0)
                        return scenarios[i].run;
        return NULL;
}

#define COUNT_MAX 1000000u

/* A count 1..max, or -ERANGE. */
static int parse_count(const char *s, unsigned max, unsigned *ret)
{
        char *end;
        unsigned long n;

        errno = 0;
        n = strtoul(s, &end, 10);
        if (errno || end == s || *end || n < 1 || n > max)
                return -ERANGE;
        *ret = (unsigned)n;
        return 0;
}

/* "82,1000": at most BENCH_MAX_COUNTS counts, each 1..BENCH_NAMES_MAX_COUNT. */
static int parse_counts(const char *s, struct bench_opts *o)
{
        char buf[128], *save = NULL;
        size_t n = 0;

        if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
                return -ERANGE;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                if (n >= BENCH_MAX_COUNTS ||
                    parse_count(tok, BENCH_NAMES_MAX_COUNT, &o->counts[n++]) < 0)
                        return -ERANGE;
        o->n_counts = n;
        return n ? 0 : -ERANGE;
}

/* argv[0] is the scenario name here, so getopt starts after it. Each
 * option's value: a count 1..max, or a string. */
static int parse_args(int argc, char **argv, struct bench_opts *o)
{
        const struct {
                struct option opt;
                unsigned max;
                unsigned *count;
                const char **str;
        } opts[] = {
                {{"count", required_argument, NULL, 'n'}, COUNT_MAX, &o->count, NULL},
                {{"guests", required_argument, NULL, 'g'},
                 BENCH_RESTART_MAX_GUESTS,
                 &o->guests,
                 NULL},
                {{"reps", required_argument, NULL, 'r'}, COUNT_MAX, &o->reps, NULL},
                {{"sample", required_argument, NULL, 's'}, COUNT_MAX, &o->sample, NULL},
                {{"helper", required_argument, NULL, 'H'}, 0, NULL, &o->helper},
                {{"json-out", required_argument, NULL, 'o'}, 0, NULL, &o->json_out},
                {{"png", required_argument, NULL, 'p'}, 0, NULL, &o->png},
                {{"helper-nolog", required_argument, NULL, 'L'}, 0, NULL, &o->helper_nolog},
                {{"counts", required_argument, NULL, 'N'}, 0, NULL, NULL},
                {{"json", no_argument, NULL, 'j'}, 0, NULL, NULL},
                {{"quick", no_argument, NULL, 'q'}, 0, NULL, NULL},
                {{"help", no_argument, NULL, 'h'}, 0, NULL, NULL},
        };
        struct option longopts[BENCH_N(opts) + 1] = {{0}};
        int ch;

        for (size_t i = 0; i < BENCH_N(opts); i++)
                longopts[i] = opts[i].opt;
        while ((ch = getopt_long(argc, argv, "jn:N:g:qH:hr:s:o:p:L:", longopts, NULL)) != -1) {
                size_t i = 0;
                while (i < BENCH_N(opts) && opts[i].opt.val != ch)
                        i++;
                if (ch == 'j' || ch == 'q') {
                        *(ch == 'j' ? &o->json : &o->quick) = true;
                } else if (ch == 'h') {
                        usage(stdout);
                        exit(EXIT_SUCCESS);
                } else if (ch == 'N' && parse_counts(optarg, o) < 0) {
                        fprintf(stderr,
                                "netbroker-bench: --counts wants up to %d counts, each 1..%d, "
                                "separated by commas\n",
                                BENCH_MAX_COUNTS, BENCH_NAMES_MAX_COUNT);
                        return -EINVAL;
                } else if (i == BENCH_N(opts)) {
                        return -EINVAL;
                } else if (opts[i].str) {
                        *opts[i].str = optarg;
                } else if (opts[i].count && parse_count(optarg, opts[i].max, opts[i].count) < 0) {
                        fprintf(stderr, "netbroker-bench: --%s wants 1..%u\n", opts[i].opt.name,
                                opts[i].max);
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "netbroker-bench: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

/* Options; the helper (NULL leaves it to the library: $NETBROKERD, else the
 * installed one; the build tree's first only when $NETBROKERD is unset, so
 * that a run from the build tree measures the helper just built); then,
 * before any fd, thread or child exists, a network namespace of our own:
 * everything after, the helper and its programs included, sees only it.
 * 0, or the exit status. */
static int setup(int argc, char **argv, struct bench_opts *o)
{
        if (parse_args(argc - 1, argv + 1, o) < 0)
                return 2;
#ifdef NB_BUILD_HELPER
        if (!o->helper && !getenv("NETBROKERD") && access(NB_BUILD_HELPER, X_OK) == 0)
                o->helper = NB_BUILD_HELPER;
#endif
        if (geteuid() != 0) {
                fprintf(stderr, "netbroker-bench: must run as root (it creates a network "
                                "namespace and runs netbrokerd)\n");
                return 1;
        }
        if (unshare(CLONE_NEWNET) < 0) {
                fprintf(stderr, "netbroker-bench: unshare(CLONE_NEWNET): %s\n", strerror(errno));
                return 1;
        }
        bench_log("netbroker-bench %s: helper %s, private network namespace\n", argv[1],
                  o->helper ? o->helper : "from $NETBROKERD or installed");
        return 0;
}

int main(int argc, char **argv)
{
        struct bench_opts o = {0};
        int r = argc < 2 ? 2 : 0;

        /* The floor process (floor.c): no root, no namespace of its own. */
        if (r == 0 && strcmp(argv[1], "--floor") == 0)
                return bench_floor_main(argc - 2, argv + 2);
        if (r == 0 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
                usage(stdout);
                return 0;
        }
        if (r == 0 && !bench_find_scenario(argv[1]) && strcmp(argv[1], "all") != 0 &&
            strcmp(argv[1], "--scale") != 0 && strcmp(argv[1], "scale") != 0) {
                fprintf(stderr, "netbroker-bench: no scenario '%s'\n\n", argv[1]);
                r = 2;
        }
        if (r != 0)
                usage(stderr);
        else
                r = setup(argc, argv, &o);
        if (r != 0)
                return r;
        r = bench_run(&o, argv[1]);
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "netbroker-bench: cannot write the report\n");
                return 1;
        }
        return r < 0 ? 1 : 0;
}
