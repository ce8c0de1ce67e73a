// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerd configuration: defaults, and the file that overrides them.
 *
 * Format: one "key = value" per line; '#' starts a comment. List keys
 * (allow_uid, allow_gid, exec_allow, exec_env_allow) take several
 * space-separated values and may repeat; their first appearance replaces
 * the default list. After the helper's own keys come [policy ...] sections
 * (policy.h), here and in the *.conf files of policy_dir, read in lexical
 * order after this file. A bad line stops start-up with its line number. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"
#include "peer.h"
#include "policy.h"

#define NBD_CONFIG_DEFAULT_PATH "/etc/netbroker/netbrokerd.conf"
#define NBD_CONFIG_MAX_IDS 32
#define NBD_CONFIG_MAX_PROGRAMS 64
#define NBD_CONFIG_MAX_ENV_NAMES 64

struct nbd_config {
        unsigned fd_limit; /* RLIMIT_NOFILE set at start-up */
        size_t max_frame; /* bytes of one incoming frame */
        size_t max_reply; /* bytes of Exec output kept per request */
        unsigned max_ops; /* ops in one request */
        unsigned max_fds_per_frame; /* fds a client may attach to a frame */
        unsigned max_connections;
        unsigned max_connections_per_uid;
        unsigned max_requests_per_connection; /* requests in flight on one connection */
        unsigned max_spawns; /* children running at once */
        unsigned max_pending_spawns; /* Exec ops waiting for a free slot */
        unsigned max_args; /* argv and env entries of one Exec */
        size_t exec_output_cap; /* bytes kept of each of stdout, stderr */
        unsigned exec_timeout_ms; /* default when a request gives none */
        unsigned exec_timeout_max_ms;
        unsigned frame_timeout_ms; /* a half-sent frame older than this closes the connection */
        unsigned idle_timeout_ms; /* 0: idle connections stay */
        unsigned hello_timeout_ms; /* a connection without Hello by then is closed */
        /* Fair shares: what other uids can never take from root, and what
         * one uid or connection may hold. */
        unsigned root_reserved_connections; /* of max_connections, root's only */
        unsigned max_spawns_per_uid; /* programs running or waiting, per non-root uid */
        unsigned root_reserved_spawns; /* of max_spawns, root's only */
        size_t max_connection_memory; /* requests held and replies unread, per connection */
        unsigned max_fds_in_flight; /* fds sent and not yet taken, per connection */
        unsigned max_rules_per_request; /* firewall rules in one request */
        unsigned max_rules_per_request_nonroot; /* the same, for uids other than root */
        unsigned max_fw_rules_per_uid; /* installed, all owners of a non-root uid */
        unsigned max_fw_owners_per_uid; /* owners, per non-root uid */
        uid_t allow_uids[NBD_CONFIG_MAX_IDS];
        size_t n_allow_uids;
        gid_t allow_gids[NBD_CONFIG_MAX_IDS];
        size_t n_allow_gids;
        char *exec_allow[NBD_CONFIG_MAX_PROGRAMS];
        /* What runs for each exec_allow entry: its realpath, set once the
         * entry passed nbd_trust_program() in nbd_config_load(). An entry
         * without one is not allowed. */
        char *exec_real[NBD_CONFIG_MAX_PROGRAMS];
        size_t n_exec_allow;
        /* Names of the variables an Exec request may add to the fixed
         * environment; none by default. */
        char *exec_env_allow[NBD_CONFIG_MAX_ENV_NAMES];
        size_t n_exec_env_allow;
        int log_level;
        char log_filters[256];
        bool log_syslog;
        char *policy_dir; /* NULL: NBD_POLICY_DEFAULT_DIR */
        struct nbd_policy policy;
        /* Supervised programs (program.h): program_allow is their own
         * allow-list, empty by default; program_real as exec_real. */
        char *program_allow[NBD_CONFIG_MAX_PROGRAMS];
        char *program_real[NBD_CONFIG_MAX_PROGRAMS];
        size_t n_program_allow;
        char *program_log; /* their stderr; NULL: the helper's own */
        char *program_dir; /* pid files; NULL: NBD_PROGRAM_DEFAULT_DIR */
        unsigned max_programs; /* running at once, all callers */
        unsigned max_programs_per_uid; /* running at once, per non-root uid */
        unsigned root_reserved_programs; /* of max_programs, root's only */
};

/* Fill in the defaults: root only, the standard firewall and network tools
 * that exist on this machine (checked and resolved by nbd_config_load()). */
void nbd_config_defaults(struct nbd_config *c);

/* Read `path` over the defaults, then the policy files of policy_dir. A
 * missing file is fine when !must_exist, a missing policy_dir always.
 * Then every program on exec_allow is checked to be safe for root to run
 * (see trust.h) and resolved: a default one that is not is dropped with a
 * warning, one the file names is an error at its line.
 * On error returns -errno and fills e with "path:line: what" (out of
 * memory included). */
int nbd_config_load(struct nbd_config *c, const char *path, bool must_exist, struct nbd_err *e);

/* SIGHUP: read path afresh over the defaults, exactly as at start-up, into
 * a new configuration (*ret, the caller's to nbd_config_free() and free()).
 * Fails, and changes nothing, on anything nbd_config_load() refuses and on
 * an fd_limit other than cur's (set once at start-up). */
int nbd_config_reload(const struct nbd_config *cur, const char *path, bool must_exist,
                      struct nbd_config **ret, struct nbd_err *e);

/* A decimal number from min to max, digits only: 0, -EINVAL (not a number)
 * or -ERANGE; *ret is untouched on failure. Shared by the helper's keys
 * and the [policy] sections'. */
int nbd_parse_u64(const char *v, unsigned long long min, unsigned long long max,
                  unsigned long long *ret);

bool nbd_config_exec_allowed(const struct nbd_config *c, const char *path);
/* The file to run for an allowed path (its realpath as checked at start-up,
 * so a symlink changed since does not change what runs), or NULL. */
const char *nbd_config_exec_file(const struct nbd_config *c, const char *path);
/* Whether an Exec request may set the variable whose name is the first
 * name_len bytes of name. */
bool nbd_config_env_allowed(const struct nbd_config *c, const char *name, size_t name_len);
/* allow_uid, allow_gid, or a [policy] section written for the peer. */
bool nbd_config_peer_allowed(const struct nbd_config *c, const struct nbd_peer *p);

/* The fds (tap and macvtap queues) the connections of uids other than root
 * may hold at once, made and not yet taken by their clients, and what one
 * such uid may hold, which bounds one op of it too (netbrokerd.conf(5),
 * max_fds_in_flight). */
unsigned nbd_config_fds_nonroot(const struct nbd_config *c);
unsigned nbd_config_fds_per_uid(const struct nbd_config *c);
/* Firewall rules one request of peer p may carry (root or not), as the
 * firewall ops enforce it and Hello announces it. */
unsigned nbd_config_max_rules(const struct nbd_config *c, const struct nbd_peer *p);

void nbd_config_free(struct nbd_config *c);

/* Supervised programs: the file to run for a path on program_allow, or
 * NULL. */
const char *nbd_config_program_file(const struct nbd_config *c, const char *path);
