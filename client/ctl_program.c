// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl program start|stop|list: supervised programs. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* start [--tag TAG] [--] PROGRAM [ARGS...]: options end at the program,
 * whose own --help is its argument. */
static int program_start(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {
                {"tag", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'}, {0}};
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_batch *b = NULL;
        nb_results *res = NULL;
        uint64_t id = 0;
        int ch, pid = 0, rc;
        bool existing = false;

        opterr = 0;
        optind = 0;
        while ((ch = getopt_long(argc, argv, "+t:h", opts, NULL)) != -1) {
                if (ch == 'h') {
                        ctl_usage(stdout, c->cmd, c->cmd_name);
                        return 0;
                } else if (ch == 't') {
                        o.tag = optarg;
                } else {
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (optind >= argc)
                return ctl_usage_error(c, "no program given");
        o.argv = (const char *const *)&argv[optind];
        b = nb_batch_new();
        rc = b ? nb_batch_program_start(b, argv[optind], &o) : -ENOMEM;
        if (rc < 0) {
                rc = rc == -EINVAL ? ctl_usage_error(c, "%s: the program must be an absolute path",
                                                     argv[optind])
                                   : ctl_fail(c, EXIT_OP_FAILED, -rc, "%s", strerror(-rc));
                goto out;
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                nb_result_program(res, 0, &id, &pid, &existing);
                if (c->json)
                        printf("{\"ok\":true,\"id\":%" PRIu64 ",\"pid\":%d,\"existing\":%s}\n", id,
                               pid, existing ? "true" : "false");
                else
                        printf("program %" PRIu64 " pid %d%s\n", id, pid,
                               existing ? " (running already)" : "");
        }
out:
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

/* stop ID | stop --tag TAG [--grace MS] */
static int program_stop(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"tag", required_argument, NULL, 't'},
                                             {"grace", required_argument, NULL, 'g'},
                                             {0}};
        const char *tag = NULL;
        unsigned grace = 0, stopped = 0, had_exited = 0;
        unsigned long long id = 0;
        nb_batch *b = NULL;
        nb_results *res = NULL;
        int ch, rc;

        opterr = 0;
        optind = 0;
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch == 't')
                        tag = optarg;
                else if (ch == 'g' && ctl_parse_uint(optarg, 1, 3600u * 1000, &grace) < 0)
                        return ctl_usage_error(c, "--grace takes milliseconds, got '%s'", optarg);
                else if (ch != 'g')
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
        }
        if (tag ? optind != argc : optind + 1 != argc)
                return ctl_usage_error(c, "give a program ID or --tag TAG");
        if (!tag) {
                char *end;
                errno = 0;
                id = strtoull(argv[optind], &end, 10);
                if (errno || *end || !id || argv[optind][0] == '-')
                        return ctl_usage_error(c, "'%s' is not a program id", argv[optind]);
        }
        b = nb_batch_new();
        rc = b ? nb_batch_program_stop(b, id, tag, grace) : -ENOMEM;
        if (rc < 0) {
                rc = rc == -EINVAL ? ctl_usage_error(c, "give a program ID or a non-empty --tag")
                                   : ctl_fail(c, EXIT_OP_FAILED, -rc, "%s", strerror(-rc));
                goto out;
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                nb_result_program_stopped(res, 0, &stopped, &had_exited);
                if (c->json) {
                        printf("{\"ok\":true,\"stopped\":%u,\"had_exited\":%u,\"message\":",
                               stopped, had_exited);
                        json_str(nb_result_message(res, 0));
                        puts("}");
                } else {
                        printf("stopped %u%s%s\n", stopped,
                               nb_result_message(res, 0)[0] ? ": " : "", nb_result_message(res, 0));
                }
        }
out:
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static void print_program_json(const nb_program_info *p, bool first)
{
        printf("%s{\"id\":%" PRIu64 ",\"pid\":%d,\"path\":", first ? "" : ",", p->id, p->pid);
        json_str(p->path);
        fputs(",\"tag\":", stdout);
        json_str(p->tag);
        printf(",\"uid\":%u,\"running\":%s,\"exit_code\":%d,\"signal\":%d,\"adopted\":%s,"
               "\"status_unknown\":%s,\"argv\":[",
               p->uid, p->running ? "true" : "false", p->exit_code, p->signal,
               p->adopted ? "true" : "false", p->status_unknown ? "true" : "false");
        for (size_t k = 0; k < p->argc; k++) {
                if (k)
                        putchar(',');
                json_str(p->argv[k]);
        }
        fputs("],\"gone_interface\":", stdout);
        json_str(p->gone_interface ? p->gone_interface : "");
        putchar('}');
}

static void print_program_text(const nb_program_info *p)
{
        char state[48];

        if (p->running)
                snprintf(state, sizeof(state), "running%s", p->adopted ? " (adopted)" : "");
        else if (p->status_unknown)
                snprintf(state, sizeof(state), "exited (status unknown)");
        else if (p->signal)
                snprintf(state, sizeof(state), "killed by signal %d", p->signal);
        else
                snprintf(state, sizeof(state), "exited %d", p->exit_code);
        printf("%-6" PRIu64 " %7d %-6u %-16s %-26s", p->id, p->pid, p->uid,
               p->tag[0] ? p->tag : "-", state);
        for (size_t k = 0; k < p->argc; k++)
                printf(" %s", p->argv[k]);
        /* Why it stopped, when the helper stopped it (a helper before 0.2
         * does not say). */
        if (p->gone_interface && p->gone_interface[0])
                printf(" (stopped by the helper: interface %s went away)", p->gone_interface);
        putchar('\n');
}

static int program_list(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"tag", required_argument, NULL, 't'}, {0}};
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        const char *tag = NULL;
        nb_batch *b;
        nb_results *res = NULL;
        int ch, rc;

        opterr = 0;
        optind = 0;
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch != 't')
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                tag = optarg;
        }
        if (optind != argc)
                return ctl_usage_error(c, "takes no arguments but --tag TAG");
        b = nb_batch_new();
        if (!b || nb_batch_program_list(b, tag) < 0) {
                nb_batch_free(b);
                return ctl_fail(c, EXIT_OP_FAILED, ENOMEM, "out of memory");
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                size_t n = nb_result_program_count(res, 0);
                if (c->json)
                        fputs("{\"ok\":true,\"programs\":[", stdout);
                else
                        printf("%-6s %7s %-6s %-16s %-26s %s\n", "ID", "PID", "UID", "TAG", "STATE",
                               "ARGV");
                for (size_t k = 0; k < n && nb_result_program_at(res, 0, k, &p) == 0; k++) {
                        if (c->json)
                                print_program_json(&p, k == 0);
                        else
                                print_program_text(&p);
                }
                if (c->json)
                        puts("]}");
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static const struct command program_sub[] = {
        {
                .name = "start",
                .fn = program_start,
                .args = "[--tag TAG] [--] PROGRAM [ARGS...]",
                .summary = "start a supervised program from the helper's program_allow",
                .details = "  --tag TAG   an owner tag (a network's name) to stop it by\n"
                           "The program must stay in the foreground (dnsmasq -k, radvd -n).\n"
                           "The same start again returns the program that runs.\n",
                .example = "-- /bin/sleep 1000",
                .own_help = true,
        },
        {
                .name = "stop",
                .fn = program_stop,
                .args = "ID | --tag TAG [--grace MS]",
                .summary = "stop a program (SIGTERM, then SIGKILL after --grace, default 5000)",
                .example = "1",
        },
        {
                .name = "list",
                .fn = program_list,
                .args = "[--tag TAG]",
                .summary = "the programs the helper supervises for the caller: running or exited",
                .example = "",
        },
};

const struct command ctl_cmd_program = {
        .name = "program",
        .sub = program_sub,
        .n_sub = sizeof(program_sub) / sizeof(*program_sub),
        .args = "",
        .summary = "supervised programs: start, stop, list",
};
