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

struct scenario {
        const char *name;
        int (*run)(const struct bench_opts *o, struct bench_report *r);
};

static const struct scenario scenarios[] = {
        {"spawn", bench_spawn},      {"names", bench_names},         {"restart", bench_restart},
        {"log", bench_log_scenario}, {"roundtrip", bench_roundtrip}, {"bandwidth", bench_bandwidth},
};

/* The scenarios and options are described in netbroker-bench(1). */
static void usage(FILE *f)
{
        fprintf(f, "usage: netbroker-bench SCENARIO|all|--scale [--json] [--json-out FILE] "
                   "[--png FILE] [--quick]\n"
                   "                       [--count N] [--counts N,N...] [--guests N] "
                   "[--sample K] [--reps N]\n"
                   "                       [--helper PATH] [--helper-nolog PATH]\nscenarios:");
        for (size_t i = 0; i < sizeof(scenarios) / sizeof(*scenarios); i++)
                fprintf(f, " %s", scenarios[i].name);
        fprintf(f, "\nSee netbroker-bench(1). Runs as root, in a network namespace of its own.\n");
}

static const struct scenario *find_scenario(const char *name)
{
        for (size_t i = 0; i < sizeof(scenarios) / sizeof(*scenarios); i++)
                if (strcmp(scenarios[i].name, name) == 0)
                        return &scenarios[i];
        return NULL;
}

bench_scenario_fn bench_find_scenario(const char *name)
{
        const struct scenario *sc = find_scenario(name);

        return sc ? sc->run : NULL;
}

/* NULL leaves the choice to the library: $NETBROKERD, else the installed
 * helper. The build-tree helper comes first only when $NETBROKERD is unset,
 * so that running from the build tree measures the helper just built. */
static const char *default_helper(void)
{
        if (getenv("NETBROKERD"))
                return NULL;
#ifdef NB_BUILD_HELPER
        if (access(NB_BUILD_HELPER, X_OK) == 0)
                return NB_BUILD_HELPER;
#endif
        return NULL;
}

/* What parse_count takes at the most. */
#define COUNT_MAX 1000000u

static int parse_count(const char *s, unsigned *ret)
{
        char *end;
        unsigned long n;

        errno = 0;
        n = strtoul(s, &end, 10);
        if (errno || end == s || *end || n < 1 || n > COUNT_MAX)
                return -ERANGE;
        *ret = (unsigned)n;
        return 0;
}

/* The value of a count option (optarg), 1..max; otherwise it says what
 * --name wants. */
static int parse_count_opt(const char *name, unsigned max, unsigned *ret)
{
        if (parse_count(optarg, ret) < 0 || *ret > max) {
                fprintf(stderr, "netbroker-bench: --%s wants 1..%u\n", name, max);
                return -EINVAL;
        }
        return 0;
}

/* "82,1000": at most BENCH_MAX_COUNTS counts, each 1..BENCH_NAMES_MAX_COUNT. */
static int parse_counts(const char *s, struct bench_opts *o)
{
        char buf[128], *save = NULL;
        size_t n = 0;

        if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
                return -ERANGE;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (n >= BENCH_MAX_COUNTS || parse_count(tok, &o->counts[n]) < 0 ||
                    o->counts[n] > BENCH_NAMES_MAX_COUNT)
                        return -ERANGE;
                n++;
        }
        if (n == 0)
                return -ERANGE;
        o->n_counts = n;
        return 0;
}

/* An option with a value: a count 1..max, or a string. */
static int set_option(int ch, struct bench_opts *o)
{
        const struct {
                int ch;
                const char *name;
                unsigned max;
                unsigned *count;
                const char **str;
        } opts[] = {
                {'n', "count", COUNT_MAX, &o->count, NULL},
                {'g', "guests", BENCH_RESTART_MAX_GUESTS, &o->guests, NULL},
                {'r', "reps", COUNT_MAX, &o->reps, NULL},
                {'s', "sample", COUNT_MAX, &o->sample, NULL},
                {'H', NULL, 0, NULL, &o->helper},
                {'o', NULL, 0, NULL, &o->json_out},
                {'p', NULL, 0, NULL, &o->png},
                {'L', NULL, 0, NULL, &o->helper_nolog},
        };

        for (size_t i = 0; i < sizeof(opts) / sizeof(*opts); i++) {
                if (opts[i].ch != ch)
                        continue;
                if (opts[i].str) {
                        *opts[i].str = optarg;
                        return 0;
                }
                return parse_count_opt(opts[i].name, opts[i].max, opts[i].count);
        }
        return -EINVAL;
}

/* argv[0] is the scenario name here, so getopt starts after it. */
static int parse_args(int argc, char **argv, struct bench_opts *o)
{
        static const struct option longopts[] = {
                {"json", no_argument, NULL, 'j'},
                {"count", required_argument, NULL, 'n'},
                {"counts", required_argument, NULL, 'N'},
                {"guests", required_argument, NULL, 'g'},
                {"quick", no_argument, NULL, 'q'},
                {"helper", required_argument, NULL, 'H'},
                {"help", no_argument, NULL, 'h'},
                {"reps", required_argument, NULL, 'r'},
                {"sample", required_argument, NULL, 's'},
                {"json-out", required_argument, NULL, 'o'},
                {"png", required_argument, NULL, 'p'},
                {"helper-nolog", required_argument, NULL, 'L'},
                {NULL, 0, NULL, 0},
        };
        int ch;

        while ((ch = getopt_long(argc, argv, "jn:N:g:qH:hr:s:o:p:L:", longopts, NULL)) != -1) {
                switch (ch) {
                case 'j':
                        o->json = true;
                        break;
                case 'N':
                        if (parse_counts(optarg, o) < 0) {
                                fprintf(stderr,
                                        "netbroker-bench: --counts wants up to %d counts, "
                                        "each 1..%d, separated by commas\n",
                                        BENCH_MAX_COUNTS, BENCH_NAMES_MAX_COUNT);
                                return -EINVAL;
                        }
                        break;
                case 'q':
                        o->quick = true;
                        break;
                case 'h':
                        usage(stdout);
                        exit(EXIT_SUCCESS);
                default:
                        if (set_option(ch, o) < 0)
                                return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "netbroker-bench: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

/* Before any fd, thread or child exists: everything after this, the helper
 * and the programs it runs included, sees only a private network. */
static int isolate(void)
{
        if (geteuid() != 0) {
                fprintf(stderr, "netbroker-bench: must run as root (it creates a network "
                                "namespace and runs netbrokerd)\n");
                return -EPERM;
        }
        if (unshare(CLONE_NEWNET) < 0) {
                int r = -errno;
                fprintf(stderr, "netbroker-bench: unshare(CLONE_NEWNET): %s\n", strerror(-r));
                return r;
        }
        return 0;
}

/* Options, the helper, the namespace: 0, or the exit status. */
static int setup(int argc, char **argv, struct bench_opts *o)
{
        if (parse_args(argc - 1, argv + 1, o) < 0)
                return 2;
        if (!o->helper)
                o->helper = default_helper();
        if (isolate() < 0)
                return 1;
        return 0;
}

/* The exit status after a run that returned r: 1 when it failed or the
 * report could not be written. */
static int finish(int r)
{
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "netbroker-bench: cannot write the report\n");
                return 1;
        }
        return r < 0 ? 1 : 0;
}

/* `all` and `--scale` run several scenarios; all.c prints their reports. */
static int run_many(int argc, char **argv)
{
        struct bench_opts o = {0};
        bool scale = strcmp(argv[1], "all") != 0;
        int r;

        r = setup(argc, argv, &o);
        if (r != 0)
                return r;
        bench_log("netbroker-bench %s: helper %s\n", argv[1],
                  o.helper ? o.helper : "from $NETBROKERD or installed");
        r = scale ? bench_scale(&o) : bench_all(&o);
        return finish(r);
}

int main(int argc, char **argv)
{
        struct bench_opts o = {0};
        struct bench_report *report;
        const struct scenario *sc;
        int r;

        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
                usage(stdout);
                return 0;
        }
        if (strcmp(argv[1], "all") == 0 || strcmp(argv[1], "--scale") == 0 ||
            strcmp(argv[1], "scale") == 0)
                return run_many(argc, argv);
        sc = find_scenario(argv[1]);
        if (!sc) {
                fprintf(stderr, "netbroker-bench: no scenario '%s'\n\n", argv[1]);
                usage(stderr);
                return 2;
        }
        r = setup(argc, argv, &o);
        if (r != 0)
                return r;

        report = calloc(1, sizeof(*report));
        if (!report)
                return 1;
        report->scenario = sc->name;
        bench_log("netbroker-bench %s: helper %s, private network namespace\n", sc->name,
                  o.helper ? o.helper : "from $NETBROKERD or installed");
        r = sc->run(&o, report);
        if (r < 0) {
                fprintf(stderr, "netbroker-bench %s: failed: %s\n", sc->name, strerror(-r));
                free(report);
                return 1;
        }
        bench_report_default_compares(report);
        if (o.json) {
                bench_report_print_json(report, stdout);
                putchar('\n');
        } else
                bench_report_print_table(report, stdout);
        r = bench_write_files(&o, report);
        free(report);
        return finish(r);
}
