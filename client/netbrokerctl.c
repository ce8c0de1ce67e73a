// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl: talk to netbrokerd from a shell.
 *
 * Exit status: 0 success, 1 an op failed (for exec: the program could not
 * run or did not exit 0), 2 usage error, 3 the helper could not be reached.
 * Commands are a table (wireguard-tools' wg.c), one file per family; the
 * table also gives every command its --help and usage text, and the hidden
 * --list-commands that the tests walk, so no command can miss them. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static const struct command *const commands[] = {
        &ctl_cmd_ping,  &ctl_cmd_stats, &ctl_cmd_exec,    &ctl_cmd_link,
        &ctl_cmd_names, &ctl_cmd_fw,    &ctl_cmd_bw,      &ctl_cmd_addr,
        &ctl_cmd_route, &ctl_cmd_net,   &ctl_cmd_program, &ctl_cmd_events,
};
#define N_COMMANDS (sizeof(commands) / sizeof(*commands))

static void usage(FILE *f)
{
        fprintf(f, "usage: netbrokerctl [OPTIONS] COMMAND [ARGS]\n"
                   "options:\n"
                   "  -s, --socket PATH    the helper listening at PATH\n"
                   "  -p, --spawn HELPER   a private helper, this program\n"
                   "  -c, --config PATH    the private helper's configuration\n"
                   "  -j, --json           one JSON object on stdout, on success and failure\n"
                   "  -v, --verbose        say which helper is used; a private helper's log "
                   "on stderr\n"
                   "      --debug          -v, and the private helper's debug messages\n"
                   "  -V, --version        versions\n"
                   "  -h, --help           this text (COMMAND --help: that command's)\n"
                   "commands:\n");
        for (size_t i = 0; i < N_COMMANDS; i++) {
                const struct command *cmd = commands[i];
                if (!cmd->sub) {
                        fprintf(f, "  %s%s%s\n", cmd->name, cmd->args[0] ? " " : "", cmd->args);
                        continue;
                }
                for (size_t j = 0; j < cmd->n_sub; j++)
                        fprintf(f, "  %s %s%s%s\n", cmd->name, cmd->sub[j].name,
                                cmd->sub[j].args[0] ? " " : "", cmd->sub[j].args);
        }
        fprintf(f, "Without --socket or --spawn: $NETBROKER_SOCKET, else the system socket\n"
                   "when it exists, else a private helper (netbrokerctl(1), ENVIRONMENT).\n"
                   "Exit status: 0 ok, 1 an operation failed, 2 usage, 3 no helper reached.\n");
}

/* Every command a user can run, one per line: its words, a tab, and
 * arguments that pass its own checks (for the tests, which must not miss
 * a command). */
static void list_commands(void)
{
        for (size_t i = 0; i < N_COMMANDS; i++) {
                const struct command *cmd = commands[i];
                if (!cmd->sub) {
                        printf("%s\t%s\n", cmd->name, cmd->example);
                        continue;
                }
                printf("%s\t\n", cmd->name);
                for (size_t j = 0; j < cmd->n_sub; j++)
                        printf("%s %s\t%s\n", cmd->name, cmd->sub[j].name, cmd->sub[j].example);
        }
}

/* libnetbroker 0.2 reads the library's and the helper's versions. */
#ifdef NB_VERSION_MAJOR
#if NB_VERSION_MAJOR > 0 || NB_VERSION_MINOR >= 2
#define CTL_VERSIONS 1
#endif
#endif

#ifdef CTL_VERSIONS
/* "X.Y.Z" of an NB_VERSION_ENCODE()d number. */
static const char *version_text(unsigned v, char *buf, size_t size)
{
        snprintf(buf, size, "%u.%u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
        return buf;
}
#endif

/* The helper's version, from its Hello, when a helper was named (a socket
 * or --spawn): a private helper is not started just to ask. 0, or -errno
 * with *ret_why saying why not. */
static int helper_version(struct ctl *c, char *buf, size_t size, const char **ret_why)
{
        int r;

        if (c->source == CTL_SRC_PRIVATE) {
                *ret_why = "no helper named (no socket, no --spawn)";
                return -ENOENT;
        }
        r = ctl_connect(c);
        if (r < 0) {
                *ret_why = "not reached";
                return r;
        }
#ifdef CTL_VERSIONS
        unsigned v;
        r = nb_conn_helper_version(c->conn, &v);
        if (r < 0) {
                *ret_why = "it did not say";
                return r;
        }
        version_text(v, buf, size);
        return 0;
#else
        (void)buf, (void)size;
        *ret_why = "this libnetbroker cannot tell";
        return -EOPNOTSUPP;
#endif
}

/* The tool's version, the library's it runs with, and the helper's. */
static void version(struct ctl *c)
{
        char lib[32] = NB_VERSION, helper[32];
        const char *why = "";
        int r;

#ifdef CTL_VERSIONS
        version_text(nb_version(), lib, sizeof(lib));
#endif
        r = helper_version(c, helper, sizeof(helper), &why);
        if (c->json) {
                printf("{\"ok\":true,\"netbrokerctl\":\"%s\",\"libnetbroker\":\"%s\","
                       "\"netbrokerd\":",
                       NB_VERSION, lib);
                if (r < 0)
                        puts("null}");
                else
                        printf("\"%s\"}\n", helper);
                return;
        }
        printf("netbrokerctl %s\nlibnetbroker %s\n", NB_VERSION, lib);
        if (r < 0)
                printf("netbrokerd: unknown, %s\n", why);
        else
                printf("netbrokerd %s\n", helper);
}

/* --help or -h among a leaf's arguments, before any "--". */
static bool wants_help(int argc, char **argv)
{
        for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
                        return true;
        return false;
}

/* Run cmd (argv[0] names it; path: the words so far). */
static int run(struct ctl *c, const struct command *cmd, const char *path, int argc, char **argv)
{
        c->cmd = cmd;
        snprintf(c->cmd_name, sizeof(c->cmd_name), "%s", path);
        if (!cmd->sub) {
                if (!cmd->own_help && wants_help(argc, argv)) {
                        ctl_usage(stdout, cmd, path);
                        return 0;
                }
                /* Each command checks its arguments before it connects, so
                 * a usage error is exit 2 even when no helper can be
                 * reached. */
                return cmd->fn(c, argc, argv);
        }
        if (argc < 2)
                return ctl_usage_error(c, "needs a subcommand");
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                ctl_usage(stdout, cmd, path);
                return 0;
        }
        for (size_t i = 0; i < cmd->n_sub; i++) {
                if (strcmp(argv[1], cmd->sub[i].name) == 0) {
                        char sub_path[64];
                        snprintf(sub_path, sizeof(sub_path), "%s %s", path, cmd->sub[i].name);
                        return run(c, &cmd->sub[i], sub_path, argc - 1, argv + 1);
                }
        }
        return ctl_usage_error(c, "unknown subcommand '%s'", argv[1]);
}

enum { OPT_DEBUG = 256, OPT_LIST_COMMANDS };

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"socket", required_argument, NULL, 's'},
                {"spawn", required_argument, NULL, 'p'},
                {"config", required_argument, NULL, 'c'},
                {"json", no_argument, NULL, 'j'},
                {"verbose", no_argument, NULL, 'v'},
                {"debug", no_argument, NULL, OPT_DEBUG},
                {"version", no_argument, NULL, 'V'},
                {"help", no_argument, NULL, 'h'},
                {"list-commands", no_argument, NULL, OPT_LIST_COMMANDS},
                {0}};
        struct ctl c = {0};
        bool show_version = false;
        int ch, rc;

        opterr = 0;
        while ((ch = getopt_long(argc, argv, "+s:p:c:jvVh", opts, NULL)) != -1) {
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
                case OPT_DEBUG:
                        c.debug = true;
                        /* fall through */
                case 'v':
                        c.verbose = true;
                        break;
                case 'V':
                        show_version = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case OPT_LIST_COMMANDS:
                        list_commands();
                        return 0;
                default:
                        ctl_usage_error(&c, "unknown option or missing argument '%s'",
                                        argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (show_version) {
                ctl_pick_source(&c);
                version(&c);
                nb_close(c.conn);
                return 0;
        }
        if (c.socket_path && c.helper_path) {
                ctl_usage_error(&c, "--socket and --spawn exclude each other");
                usage(stderr);
                return EXIT_USAGE;
        }
        if (optind >= argc) {
                ctl_usage_error(&c, "no command given");
                usage(stderr);
                return EXIT_USAGE;
        }
        ctl_pick_source(&c);
        for (size_t i = 0; i < N_COMMANDS; i++) {
                if (strcmp(argv[optind], commands[i]->name) != 0)
                        continue;
                rc = run(&c, commands[i], commands[i]->name, argc - optind, argv + optind);
                nb_close(c.conn);
                return rc;
        }
        ctl_usage_error(&c, "unknown command '%s'", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
}
