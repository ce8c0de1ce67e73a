/* netbrokerctl: talk to netbrokerd from a shell.
 *
 * Exit status: 0 success, 1 an op failed (for exec: the program could not
 * run or did not exit 0), 2 usage error, 3 the helper could not be reached.
 * Subcommands are a table, one function each (wireguard-tools' wg.c). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "netbroker.h"

enum { EXIT_OP_FAILED = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3 };

struct ctl {
        const char *socket_path;
        const char *helper_path;
        const char *config_path;
        bool json;
        nb_conn *conn;
};

static void usage(FILE *f)
{
        fprintf(f, "usage: netbrokerctl [--socket PATH | --spawn HELPER] [--config PATH] [--json] "
                   "COMMAND\n"
                   "commands:\n"
                   "  ping                                   round trip to the helper\n"
                   "  stats                                  the helper's counters\n"
                   "  exec [--timeout MS] [--stdin FILE] -- PROGRAM [ARGS...]\n"
                   "                                         run an allow-listed program\n"
                   "Without --socket or --spawn, the installed helper is spawned.\n");
}

/* JSON string output: enough escaping for program output and messages. */
static void json_str(const void *data, size_t len)
{
        const unsigned char *p = data;

        putchar('"');
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = p[i];
                if (ch == '"' || ch == '\\')
                        printf("\\%c", ch);
                else if (ch == '\n')
                        fputs("\\n", stdout);
                else if (ch == '\t')
                        fputs("\\t", stdout);
                else if (ch < 0x20 || ch == 0x7f)
                        printf("\\u%04x", ch);
                else
                        putchar(ch);
        }
        putchar('"');
}

static int open_conn(struct ctl *c)
{
        int r;

        if (c->socket_path) {
                r = nb_connect(c->socket_path, &c->conn);
        } else {
                nb_spawn_opts o = {.config_path = c->config_path};
                r = nb_spawn(c->helper_path, &o, &c->conn);
        }
        if (r < 0) {
                fprintf(stderr, "netbrokerctl: cannot reach netbrokerd: %s%s%s\n", strerror(-r),
                        nb_last_error()[0] ? ": " : "", nb_last_error());
                return -r;
        }
        return 0;
}

/* Submit and report transport failures; op failures are the caller's. */
static int submit(struct ctl *c, nb_batch *b, nb_results **res)
{
        int r = nb_submit(c->conn, b, res);

        if (r < 0) {
                const char *why = nb_conn_error(c->conn);
                fprintf(stderr, "netbrokerctl: %s%s%s\n", strerror(-r), why[0] ? ": " : "", why);
                return EXIT_UNREACHABLE;
        }
        return 0;
}

static int report_failure(const nb_results *res, size_t i)
{
        int st = nb_result_status(res, i);

        if (st == 0)
                return 0;
        fprintf(stderr, "netbrokerctl: %s (%s)\n", nb_result_message(res, i), strerror(-st));
        return EXIT_OP_FAILED;
}

static int cmd_ping(struct ctl *c, int argc, char **argv)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        struct timespec t0, t1;
        int rc;

        (void)argv;
        if (argc != 1 || !b) {
                nb_batch_free(b);
                usage(stderr);
                return EXIT_USAGE;
        }
        nb_batch_ping(b);
        if (open_conn(c)) {
                nb_batch_free(b);
                return EXIT_UNREACHABLE;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = submit(c, b, &res);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc == 0) {
                double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                            (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
                rc = report_failure(res, 0);
                if (c->json)
                        printf("{\"ok\":%s,\"rtt_us\":%.1f}\n", rc ? "false" : "true", us);
                else if (!rc)
                        printf("pong from netbrokerd in %.1f us\n", us);
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int cmd_stats(struct ctl *c, int argc, char **argv)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int rc;

        (void)argv;
        if (argc != 1 || !b) {
                nb_batch_free(b);
                usage(stderr);
                return EXIT_USAGE;
        }
        nb_batch_stats(b);
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0 && !(rc = report_failure(res, 0))) {
                const char *name;
                uint64_t v;
                if (c->json)
                        putchar('{');
                for (size_t k = 0; nb_result_stat_at(res, 0, k, &name, &v) == 0; k++) {
                        if (c->json)
                                printf("%s\"%s\":%llu", k ? "," : "", name, (unsigned long long)v);
                        else
                                printf("%-24s %llu\n", name, (unsigned long long)v);
                }
                if (c->json)
                        puts("}");
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
        FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
        char *buf = NULL;
        size_t len = 0, cap = 0;

        if (!f)
                return -errno;
        for (;;) {
                if (cap - len < 65536) {
                        char *p = realloc(buf, cap + 65536);
                        if (!p) {
                                free(buf);
                                if (f != stdin)
                                        fclose(f);
                                return -ENOMEM;
                        }
                        buf = p;
                        cap += 65536;
                }
                size_t n = fread(buf + len, 1, cap - len, f);
                len += n;
                if (n == 0)
                        break;
        }
        if (f != stdin)
                fclose(f);
        *ret = buf;
        *ret_len = len;
        return 0;
}

static void print_exec(const struct ctl *c, const nb_results *res, int status)
{
        nb_exec_result e;

        if (nb_result_exec(res, 0, &e) < 0) {
                if (c->json) {
                        printf("{\"status\":%d,\"message\":", -status);
                        json_str(nb_result_message(res, 0), strlen(nb_result_message(res, 0)));
                        puts("}");
                }
                return;
        }
        if (!c->json) {
                fwrite(e.out, 1, e.out_len, stdout);
                fwrite(e.err, 1, e.err_len, stderr);
                return;
        }
        printf("{\"status\":%d,\"message\":", -status);
        json_str(nb_result_message(res, 0), strlen(nb_result_message(res, 0)));
        printf(",\"exit_code\":%d,\"signal\":%d,\"timed_out\":%s,\"duration_us\":%llu,\"stdout\":",
               e.exit_code, e.signal, e.timed_out ? "true" : "false",
               (unsigned long long)e.duration_us);
        json_str(e.out, e.out_len);
        printf(",\"stdout_truncated\":%s,\"stderr\":", e.out_truncated ? "true" : "false");
        json_str(e.err, e.err_len);
        printf(",\"stderr_truncated\":%s}\n", e.err_truncated ? "true" : "false");
}

static int cmd_exec(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"timeout", required_argument, NULL, 't'},
                                             {"stdin", required_argument, NULL, 'i'},
                                             {0}};
        unsigned timeout = 0;
        char *in = NULL;
        size_t in_len = 0;
        nb_batch *b = NULL;
        nb_results *res = NULL;
        int ch, rc;

        optind = 1;
        while ((ch = getopt_long(argc, argv, "+t:i:", opts, NULL)) != -1) {
                if (ch == 't') {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (!*optarg || *end || v > 24ul * 3600 * 1000) {
                                fprintf(stderr,
                                        "netbrokerctl: --timeout takes milliseconds, got '%s'\n",
                                        optarg);
                                free(in);
                                return EXIT_USAGE;
                        }
                        timeout = (unsigned)v;
                } else if (ch == 'i') {
                        int r = read_file(optarg, &in, &in_len);
                        if (r < 0) {
                                fprintf(stderr, "netbrokerctl: %s: %s\n", optarg, strerror(-r));
                                return EXIT_USAGE;
                        }
                } else {
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                free(in);
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        rc = b ? nb_batch_exec(b, argv[optind], (const char *const *)&argv[optind], NULL, in,
                               in_len, timeout)
               : -ENOMEM;
        if (rc < 0) {
                fprintf(stderr, "netbrokerctl: exec %s: %s\n", argv[optind],
                        rc == -EINVAL ? "the program must be an absolute path" : strerror(-rc));
                nb_batch_free(b);
                free(in);
                return EXIT_USAGE;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0) {
                int st = nb_result_status(res, 0);
                print_exec(c, res, st);
                if (!c->json)
                        rc = report_failure(res, 0);
                else
                        rc = st ? EXIT_OP_FAILED : 0;
        }
        nb_results_free(res);
        nb_batch_free(b);
        free(in);
        return rc;
}

static const struct {
        const char *name;
        int (*fn)(struct ctl *c, int argc, char **argv);
} commands[] = {
        {"ping", cmd_ping},
        {"stats", cmd_stats},
        {"exec", cmd_exec},
};

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"socket", required_argument, NULL, 's'}, {"spawn", required_argument, NULL, 'p'},
                {"config", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
                {"help", no_argument, NULL, 'h'},         {0}};
        struct ctl c = {0};
        int ch, rc = EXIT_USAGE;

        while ((ch = getopt_long(argc, argv, "+s:p:c:jh", opts, NULL)) != -1) {
                switch (ch) {
                case 's':
                        c.socket_path = optarg;
                        break;
                case 'p':
                        c.helper_path = optarg;
                        break;
                case 'c':
                        c.config_path = optarg;
                        break;
                case 'j':
                        c.json = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc || (c.socket_path && c.helper_path)) {
                usage(stderr);
                return EXIT_USAGE;
        }
        for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++) {
                if (strcmp(argv[optind], commands[i].name) != 0)
                        continue;
                /* Each command checks its arguments before it connects, so a
                 * usage error is exit 2 even when no helper can be reached. */
                rc = commands[i].fn(&c, argc - optind, argv + optind);
                nb_close(c.conn);
                return rc;
        }
        fprintf(stderr, "netbrokerctl: unknown command '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
}
