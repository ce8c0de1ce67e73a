// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl ping, stats, exec and names: the helper's session ops and
 * its allocator. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

static int cmd_ping(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;
        nb_results *res = NULL;
        struct timespec t0, t1;
        int rc;

        (void)argv;
        if (argc != 1)
                return ctl_usage_error(c, "takes no arguments");
        b = nb_batch_new();
        if (!b)
                return ctl_fail(c, EXIT_OP_FAILED, ENOMEM, "cannot make a batch");
        nb_batch_ping(b);
        rc = ctl_open(c);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (rc == 0)
                rc = ctl_submit(c, b, &res);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                            (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
                if (c->json) {
                        json_ok_begin();
                        printf(",\"rtt_us\":%.1f}\n", us);
                } else {
                        printf("pong from netbrokerd in %.1f us\n", us);
                }
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

const struct command ctl_cmd_ping = {
        .name = "ping",
        .fn = cmd_ping,
        .args = "",
        .summary = "round trip to the helper",
        .example = "",
};

static void print_stats(const struct ctl *c, const nb_results *res)
{
        const char *name, *sv;
        uint64_t v;

        if (c->json)
                fputs("{\"ok\":true,\"stats\":{", stdout);
        for (size_t k = 0; nb_result_stat_at(res, 0, k, &name, &v) == 0; k++) {
                if (c->json) {
                        fputs(k ? "," : "", stdout);
                        json_str(name);
                        printf(":%llu", (unsigned long long)v);
                } else
                        printf("%-24s %llu\n", name, (unsigned long long)v);
        }
        if (c->json)
                fputs("},\"settings\":{", stdout);
        for (size_t k = 0; nb_result_stat_setting_at(res, 0, k, &name, &sv) == 0; k++) {
                if (c->json)
                        json_kv(name, sv, k == 0);
                else
                        printf("%-24s %s\n", name, sv);
        }
        if (c->json)
                puts("}}");
}

/* A command of one op and no arguments: add adds the op, print shows its
 * result when it worked. */
static int one_op(struct ctl *c, int argc, int (*add)(nb_batch *),
                  void (*print)(const struct ctl *, const nb_results *))
{
        nb_batch *b;
        nb_results *res = NULL;
        int rc;

        if (argc != 1)
                return ctl_usage_error(c, "takes no arguments");
        b = nb_batch_new();
        if (!b || add(b) < 0) {
                nb_batch_free(b);
                return ctl_fail(c, EXIT_OP_FAILED, ENOMEM, "cannot make a batch");
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0)))
                print(c, res);
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int cmd_stats(struct ctl *c, int argc, char **argv)
{
        (void)argv;
        return one_op(c, argc, nb_batch_stats, print_stats);
}

const struct command ctl_cmd_stats = {
        .name = "stats",
        .fn = cmd_stats,
        .args = "",
        .summary = "the helper's counters and settings",
        .example = "",
};

/* The program's outcome: its output as it is in text, all of it in JSON
 * beside "ok" (false when it could not run or did not exit 0). */
static int print_exec(struct ctl *c, const nb_results *res)
{
        int st = nb_result_status(res, 0);
        const char *msg = nb_result_message(res, 0);
        nb_exec_result e = NB_EXEC_RESULT_INIT;

        if (nb_result_exec(res, 0, &e) < 0)
                return st ? ctl_op_failed(c, res, 0)
                          : ctl_fail(c, EXIT_OP_FAILED, EPROTO, "the helper sent no exec result");
        if (!c->json) {
                fwrite(e.out, 1, e.out_len, stdout);
                fwrite(e.err, 1, e.err_len, stderr);
                return ctl_op_failed(c, res, 0);
        }
        printf("{\"ok\":%s,", st ? "false" : "true");
        if (st) {
                json_error_member(-st, msg);
                putchar(',');
        }
        printf("\"exit_code\":%d,\"signal\":%d,\"timed_out\":%s,\"duration_us\":%llu,\"stdout\":",
               e.exit_code, e.signal, e.timed_out ? "true" : "false",
               (unsigned long long)e.duration_us);
        json_strn(e.out, e.out_len);
        printf(",\"stdout_truncated\":%s,\"stderr\":", e.out_truncated ? "true" : "false");
        json_strn(e.err, e.err_len);
        printf(",\"stderr_truncated\":%s}\n", e.err_truncated ? "true" : "false");
        return st ? EXIT_OP_FAILED : 0;
}

/* Options end at the program: its own --help is its argument. */
static int exec_options(struct ctl *c, int argc, char **argv, unsigned *timeout, char **in,
                        size_t *in_len, bool *help)
{
        static const struct option opts[] = {{"timeout", required_argument, NULL, 't'},
                                             {"stdin", required_argument, NULL, 'i'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
        int ch, r;

        opterr = 0;
        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "+t:i:h", opts, NULL)) != -1) {
                if (ch == 'h') {
                        *help = true;
                        return 0;
                } else if (ch == 't') {
                        if (ctl_parse_uint(optarg, 0, 24u * 3600 * 1000, timeout) < 0)
                                return ctl_usage_error(c, "--timeout takes milliseconds, got '%s'",
                                                       optarg);
                } else if (ch == 'i') {
                        free(*in);
                        *in = NULL;
                        r = ctl_read_file(optarg, in, in_len);
                        if (r < 0)
                                return ctl_fail(c, EXIT_USAGE, -r, "--stdin %s: %s", optarg,
                                                strerror(-r));
                } else {
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (optind >= argc)
                return ctl_usage_error(c, "no program given");
        return 0;
}

static int cmd_exec(struct ctl *c, int argc, char **argv)
{
        unsigned timeout = 0;
        char *in = NULL;
        size_t in_len = 0;
        bool help = false;
        nb_batch *b = NULL;
        nb_results *res = NULL;
        int rc;

        rc = exec_options(c, argc, argv, &timeout, &in, &in_len, &help);
        if (rc || help) {
                if (help)
                        ctl_usage(stdout, c->cmd, c->cmd_name);
                goto out;
        }
        b = nb_batch_new();
        rc = b ? nb_batch_exec(b, argv[optind], (const char *const *)&argv[optind], NULL, in,
                               in_len, timeout)
               : -ENOMEM;
        if (rc < 0) {
                rc = rc == -EINVAL ? ctl_usage_error(c, "%s: the program must be an absolute path",
                                                     argv[optind])
                                   : ctl_fail(c, EXIT_OP_FAILED, -rc, "%s", strerror(-rc));
                goto out;
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0)
                rc = print_exec(c, res);
out:
        nb_results_free(res);
        nb_batch_free(b);
        free(in);
        return rc;
}

const struct command ctl_cmd_exec = {
        .name = "exec",
        .fn = cmd_exec,
        .args = "[--timeout MS] [--stdin FILE] [--] PROGRAM [ARGS...]",
        .summary = "run a program on the helper's allow-list",
        .details = "  --timeout MS   kill it after MS milliseconds (0: the helper's default)\n"
                   "  --stdin FILE   its standard input (- for ours)\n"
                   "Its output is printed as it is; the exit status is 1 when it could\n"
                   "not run or did not exit 0.\n",
        .example = "-- /bin/true",
        .own_help = true,
};

static void print_names(const struct ctl *c, const nb_results *res)
{
        const char *prefix;
        const uint32_t *used;
        size_t n_used;
        unsigned cursor;

        if (c->json)
                fputs("{\"ok\":true,\"names\":[", stdout);
        for (size_t k = 0; nb_result_names_at(res, 0, k, &prefix, &used, &n_used, &cursor) == 0;
             k++) {
                if (c->json) {
                        printf("%s{\"prefix\":", k ? "," : "");
                        json_str(prefix);
                        printf(",\"cursor\":%u,\"used\":[", cursor);
                } else {
                        printf("%-12s next from %-6u used:", prefix, cursor);
                }
                for (size_t j = 0; j < n_used; j++)
                        printf(c->json ? "%s%u" : "%s %u", c->json && j ? "," : "", used[j]);
                printf(c->json ? "]}" : "\n");
        }
        if (c->json)
                puts("]}");
}

static int cmd_names(struct ctl *c, int argc, char **argv)
{
        (void)argv;
        return one_op(c, argc, nb_batch_names_dump, print_names);
}

const struct command ctl_cmd_names = {
        .name = "names",
        .fn = cmd_names,
        .args = "",
        .summary = "the helper's name allocator: prefixes, cursors, names in use",
        .example = "",
};
