// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl's parts: the command table (netbrokerctl.c), reaching the
 * helper (ctl_conn.c), output in text and JSON (ctl_out.c), and one file per
 * command family (ctl_basic.c, ctl_link.c, ctl_fw.c, ctl_bw.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "netbroker.h"

/* Exit statuses (netbrokerctl(1), EXIT STATUS). */
enum { EXIT_OP_FAILED = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3 };

/* Where the helper comes from, in the order netbrokerctl looks. */
enum ctl_source {
        CTL_SRC_SPAWN_OPTION, /* --spawn HELPER */
        CTL_SRC_SOCKET_OPTION, /* --socket PATH */
        CTL_SRC_ENV, /* $NETBROKER_SOCKET */
        CTL_SRC_SYSTEM, /* the system socket exists */
        CTL_SRC_PRIVATE, /* none of those: a private helper */
};

struct command;

struct ctl {
        const char *socket_path; /* the socket to connect to, or NULL: spawn */
        const char *helper_path; /* --spawn, or NULL for the installed one */
        const char *config_path;
        enum ctl_source source;
        bool json;
        bool verbose; /* -v: say where the helper is; its log on stderr */
        bool debug; /* --debug: -v and the helper's debug messages */
        nb_conn *conn;
        const struct command *cmd; /* the command running, for its usage */
        char cmd_name[64]; /* "link create": for messages */
};

/* A command: a leaf runs fn; a group has subcommands. argv[0] names it. */
struct command {
        const char *name;
        int (*fn)(struct ctl *c, int argc, char **argv);
        const struct command *sub;
        size_t n_sub;
        const char *args; /* synopsis after the name */
        const char *summary; /* one line */
        const char *details; /* more lines of help, or NULL */
        /* Arguments that pass the command's own checks and need the
         * helper: the table test runs the command with them (hidden). */
        const char *example;
        /* The command reads --help itself (exec: its program's arguments
         * may be --help). */
        bool own_help;
};

extern const struct command ctl_cmd_ping, ctl_cmd_stats, ctl_cmd_exec, ctl_cmd_names, ctl_cmd_link,
        ctl_cmd_fw, ctl_cmd_bw;
/* virtual networks, part 1 (ctl_addr.c) */
extern const struct command ctl_cmd_addr, ctl_cmd_route;
/* virtual networks: network firewall owners (ctl_net.c) */
extern const struct command ctl_cmd_net;
/* supervised programs (ctl_program.c) */
extern const struct command ctl_cmd_program;
/* the helper's events (ctl_events.c) */
extern const struct command ctl_cmd_events;

/* ---- ctl_conn.c ---- */

/* Decide where the helper is (no connection yet). */
void ctl_pick_source(struct ctl *c);
/* A sentence naming the helper chosen: "socket X (from NETBROKER_SOCKET)". */
const char *ctl_source_text(const struct ctl *c, char *buf, size_t size);
/* Connect or spawn, saying nothing but -v's line; 0 or -errno
 * (nb_last_error() says more). */
int ctl_connect(struct ctl *c);
/* Connect or spawn; 0, or EXIT_UNREACHABLE after saying why. */
int ctl_open(struct ctl *c);
/* Connect if not yet and submit; 0 or EXIT_UNREACHABLE after saying why.
 * Op failures are the caller's. */
int ctl_submit(struct ctl *c, nb_batch *b, nb_results **ret);

/* ---- ctl_out.c ---- */

/* A JSON string, escaped. */
void json_str(const char *s);
void json_strn(const void *data, size_t len);
/* ,"key":"value" (first: no comma). */
void json_kv(const char *key, const char *value, bool first);
/* "error":{"errno":N,"name":"ENAME","message":"..."} (err > 0). */
void json_error_member(int err, const char *message);
/* The usage of cmd (named by path, e.g. "link create") on f. */
void ctl_usage(FILE *f, const struct command *cmd, const char *path);
/* A usage error of the running command: the message and its usage on
 * stderr (with --json, also a failure object on stdout); EXIT_USAGE. */
int ctl_usage_error(struct ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A building call (nb_batch_*) refused its arguments: the library's
 * sentence (nb_last_error()), or fallback when it has none; EXIT_USAGE. */
int ctl_bad_input(struct ctl *c, const char *fallback);
/* A failure with errno err (> 0): "netbrokerctl: CMD: message (ENAME)" on
 * stderr, or with --json {"ok":false,"error":{...}} on stdout. Returns
 * exit_status. */
int ctl_fail(struct ctl *c, int exit_status, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Op i of res failed (status < 0): as ctl_fail with the helper's message,
 * EXIT_OP_FAILED; 0 when it did not fail. */
int ctl_op_failed(struct ctl *c, const nb_results *res, size_t i);
/* {"ok":true (the caller adds its members and "}\n"). */
void json_ok_begin(void);

/* ---- shared parsers ---- */
int ctl_parse_uint(const char *s, unsigned min, unsigned max, unsigned *ret);
/* A whole file, or stdin for "-"; 0 or -errno. */
int ctl_read_file(const char *path, char **ret, size_t *ret_len);
