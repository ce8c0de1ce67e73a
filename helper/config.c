// SPDX-License-Identifier: LGPL-2.1-or-later
/* Configuration parsing. Everything is validated here, so the rest of the
 * helper can trust every value it reads from struct nbd_config. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "trust.h"

NBD_LOG_CATEGORY(config);

/* Programs libvirt and its peers run today; only those present are allowed. */
static const char *const default_programs[] = {
        "iptables-restore", "ip6tables-restore", "ebtables-restore", "nft", "tc", "ip",
};
static const char *const default_dirs[] = {"/usr/sbin", "/usr/bin", "/sbin", "/bin"};

/* Variables a deployment may not allow however it is configured, each with
 * why, since with them a caller picks code that runs as root; a name
 * ending in '*' is a prefix. PATH is fixed so that a tool that runs
 * another by name runs the system's. */
static const struct {
        const char *name, *why;
} refused_env[] = {
        /* glibc's unsecure list, and the tunables it filters in secure mode:
         * the dynamic loader and libc act on these. */
        {"LD_*", "the dynamic loader acts on it"},
        {"MALLOC_*", "libc acts on it"},
        {"GCONV_PATH", "libc loads code from it"},
        {"GETCONF_DIR", "libc acts on it"},
        {"GLIBC_TUNABLES", "libc acts on it"},
        {"HOSTALIASES", "libc acts on it"},
        {"LOCALDOMAIN", "libc acts on it"},
        {"LOCPATH", "libc acts on it"},
        {"NIS_PATH", "libc acts on it"},
        {"NLSPATH", "libc acts on it"},
        {"RESOLV_HOST_CONF", "libc acts on it"},
        {"RES_OPTIONS", "libc acts on it"},
        {"TMPDIR", "libc acts on it"},
        {"TZDIR", "libc acts on it"},
        /* Where the allow-listed tools load their plugins from. */
        {"IP_LIB_DIR", "ip loads code from it"},
        {"TC_LIB_DIR", "tc loads code from it"},
        {"XTABLES_LIBDIR", "iptables loads code from it"},
        {"IPTABLES_LIB_DIR", "iptables loads code from it"},
        {"IP6TABLES_LIB_DIR", "ip6tables loads code from it"},
        {"OPENSSL_CONF", "OpenSSL loads engines it names"},
        {"OPENSSL_MODULES", "OpenSSL loads code from it"},
        /* Files a shell reads and runs at start-up. */
        {"BASH_ENV", "a shell runs the file it names"},
        {"ENV", "a shell runs the file it names"},
        {"SHELLOPTS", "bash takes options from it (xtrace runs PS4)"},
        {"BASHOPTS", "bash takes options from it"},
        {"PS4", "bash expands it, commands included, for xtrace"},
        {"PYTHON*", "python loads code it names"},
        {"PERL5*", "perl loads code it names"},
        {"PATH", "the environment's PATH is fixed"},
};

/* Why a variable may never be passed on, or NULL. */
static const char *env_name_refused(const char *name)
{
        for (size_t i = 0; i < sizeof(refused_env) / sizeof(*refused_env); i++) {
                const char *r = refused_env[i].name;
                size_t n = strlen(r);
                if (r[n - 1] == '*' ? strncmp(name, r, n - 1) == 0 : strcmp(name, r) == 0)
                        return refused_env[i].why;
        }
        return NULL;
}

static bool env_name_valid(const char *name)
{
        if (!isalpha((unsigned char)*name) && *name != '_')
                return false;
        for (; *name; name++)
                if (!isalnum((unsigned char)*name) && *name != '_')
                        return false;
        return true;
}

static int add_program(struct nbd_config *c, const char *path)
{
        char *copy;

        if (c->n_exec_allow >= NBD_CONFIG_MAX_PROGRAMS)
                return -E2BIG;
        /* A NULL on the list would crash the first Exec that is checked. */
        copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        c->exec_allow[c->n_exec_allow++] = copy;
        return 0;
}

void nbd_config_defaults(struct nbd_config *c)
{
        memset(c, 0, sizeof(*c));
        c->fd_limit = 64;
        c->max_frame = 16u * 1024 * 1024;
        c->max_reply = 64u * 1024 * 1024;
        c->max_ops = 4096;
        /* Fds a half-received frame holds count against the helper's small
         * fd limit; no op takes more than one or two. */
        c->max_fds_per_frame = 4;
        c->max_connections = 12;
        c->max_connections_per_uid = 4;
        c->max_requests_per_connection = 256;
        c->max_spawns = 8;
        c->max_pending_spawns = 4096;
        c->max_args = 4096;
        c->exec_output_cap = 1024 * 1024;
        c->exec_timeout_ms = 60 * 1000;
        c->exec_timeout_max_ms = 3600 * 1000;
        c->frame_timeout_ms = 10 * 1000;
        c->idle_timeout_ms = 0;
        c->hello_timeout_ms = 5000;
        c->root_reserved_connections = 4;
        c->max_spawns_per_uid = 2;
        c->root_reserved_spawns = 2;
        c->max_connection_memory = 32u * 1024 * 1024;
        /* The kernel refuses a process more fds in flight than its fd
         * limit, across all its sockets: a client that never takes its fds
         * must not use up the helper's (fd_limit / 8 each, at most 4 per
         * uid by default). */
        c->max_fds_in_flight = 8;
        /* 4,096 guests of clean-traffic + no-promisc (26 rules each). */
        c->max_rules_per_request = 131072;
        /* Its commit holds the loop (some 200 ms on a loaded machine): what
         * a caller that is not root may make every other client wait. */
        c->max_rules_per_request_nonroot = 4096;
        /* Four full requests; 630 guests of clean-traffic. What a uid's
         * rules cost stays: some 420 bytes of kernel memory each, and
         * every count of the table (an ensure after someone else's
         * commit) walks them all. */
        c->max_fw_rules_per_uid = 16384;
        c->max_fw_owners_per_uid = 1024;
        c->allow_uids[0] = 0;
        c->n_allow_uids = 1;
        c->log_level = NBD_LOG_NOTICE;
        c->max_programs = 8;
        c->max_programs_per_uid = 1;
        c->root_reserved_programs = 1;
        for (size_t d = 0; d < sizeof(default_dirs) / sizeof(*default_dirs); d++)
                for (size_t p = 0; p < sizeof(default_programs) / sizeof(*default_programs); p++) {
                        char path[PATH_MAX];
                        snprintf(path, sizeof(path), "%s/%s", default_dirs[d], default_programs[p]);
                        /* Out of memory: the program is not allowed, which is safe. */
                        if (access(path, X_OK) == 0)
                                (void)add_program(c, path);
                }
}

static void free_programs(struct nbd_config *c)
{
        for (size_t i = 0; i < c->n_exec_allow; i++) {
                free(c->exec_allow[i]);
                free(c->exec_real[i]);
                c->exec_real[i] = NULL;
        }
        c->n_exec_allow = 0;
}

static void free_env_names(struct nbd_config *c)
{
        for (size_t i = 0; i < c->n_exec_env_allow; i++)
                free(c->exec_env_allow[i]);
        c->n_exec_env_allow = 0;
}

static void free_supervised(struct nbd_config *c)
{
        for (size_t i = 0; i < c->n_program_allow; i++) {
                free(c->program_allow[i]);
                free(c->program_real[i]);
                c->program_real[i] = NULL;
        }
        c->n_program_allow = 0;
}

const char *nbd_config_program_file(const struct nbd_config *c, const char *path)
{
        for (size_t i = 0; i < c->n_program_allow; i++)
                if (c->program_real[i] && strcmp(c->program_allow[i], path) == 0)
                        return c->program_real[i];
        return NULL;
}

void nbd_config_free(struct nbd_config *c)
{
        free_supervised(c);
        free(c->program_log);
        free(c->program_dir);
        c->program_log = c->program_dir = NULL;
        free_programs(c);
        free_env_names(c);
        free(c->policy_dir);
        c->policy_dir = NULL;
        nbd_policy_free(&c->policy);
}

const char *nbd_config_exec_file(const struct nbd_config *c, const char *path)
{
        for (size_t i = 0; i < c->n_exec_allow; i++)
                if (c->exec_real[i] && strcmp(c->exec_allow[i], path) == 0)
                        return c->exec_real[i];
        return NULL;
}

bool nbd_config_exec_allowed(const struct nbd_config *c, const char *path)
{
        return nbd_config_exec_file(c, path) != NULL;
}

bool nbd_config_env_allowed(const struct nbd_config *c, const char *name, size_t name_len)
{
        for (size_t i = 0; i < c->n_exec_env_allow; i++)
                if (strlen(c->exec_env_allow[i]) == name_len &&
                    memcmp(c->exec_env_allow[i], name, name_len) == 0)
                        return true;
        return false;
}

/* A group admits its members by supplementary group too: "allow_gid = 990"
 * is written for the members of group 990, whatever their primary group. */
bool nbd_config_peer_allowed(const struct nbd_config *c, const struct nbd_peer *p)
{
        for (size_t i = 0; i < c->n_allow_uids; i++)
                if (c->allow_uids[i] == p->uid)
                        return true;
        for (size_t i = 0; i < c->n_allow_gids; i++)
                if (nbd_peer_in_group(p, c->allow_gids[i]))
                        return true;
        /* Operators write one thing: a policy for a user admits that user. */
        return nbd_policy_admits(&c->policy, p);
}

unsigned nbd_config_max_rules(const struct nbd_config *c, const struct nbd_peer *p)
{
        if (nbd_peer_is_root(p) || c->max_rules_per_request < c->max_rules_per_request_nonroot)
                return c->max_rules_per_request;
        return c->max_rules_per_request_nonroot;
}

/* A quarter, so that root always has the rest of fd_limit; and half of
 * that per uid (and per op: dispatch refuses more), so that one uid's fds
 * left unread never hold the whole quarter. */
unsigned nbd_config_fds_nonroot(const struct nbd_config *c)
{
        return c->fd_limit / 4;
}

unsigned nbd_config_fds_per_uid(const struct nbd_config *c)
{
        return c->fd_limit / 8;
}

int nbd_parse_u64(const char *v, unsigned long long min, unsigned long long max,
                  unsigned long long *ret)
{
        char *end;
        unsigned long long n;

        if (!isdigit((unsigned char)*v))
                return -EINVAL;
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno || *end || n < min || n > max)
                return -ERANGE;
        *ret = n;
        return 0;
}

struct num_key {
        const char *name;
        size_t offset;
        bool is_size; /* size_t field, else unsigned */
        unsigned long long min, max;
};

#define UKEY(n, lo, hi)                                                                            \
        {                                                                                          \
#n, offsetof(struct nbd_config, n), false, lo, hi                                  \
        }
#define SKEY(n, lo, hi)                                                                            \
        {                                                                                          \
#n, offsetof(struct nbd_config, n), true, lo, hi                                   \
        }

static const struct num_key num_keys[] = {
        /* 24: what check_consistency() needs with one connection and one
         * spawn slot; anything lower could never load. */
        UKEY(fd_limit, 24, 1u << 20),
        SKEY(max_frame, 64, 1u << 30),
        SKEY(max_reply, 4096, 1u << 30),
        UKEY(max_ops, 1, 1u << 20),
        UKEY(max_fds_per_frame, 0, 64),
        UKEY(max_connections, 1, 4096),
        UKEY(max_connections_per_uid, 1, 4096),
        UKEY(max_requests_per_connection, 1, 1u << 16),
        UKEY(max_spawns, 1, 1024),
        UKEY(max_pending_spawns, 0, 1u << 20),
        UKEY(max_args, 1, 1u << 16),
        SKEY(exec_output_cap, 0, 1u << 30),
        UKEY(exec_timeout_ms, 1, 24u * 3600 * 1000),
        UKEY(exec_timeout_max_ms, 1, 24u * 3600 * 1000),
        UKEY(frame_timeout_ms, 1, 24u * 3600 * 1000),
        UKEY(idle_timeout_ms, 0, 24u * 3600 * 1000),
        UKEY(hello_timeout_ms, 1, 3600u * 1000),
        UKEY(root_reserved_connections, 0, 4095),
        UKEY(max_spawns_per_uid, 1, 1024),
        UKEY(root_reserved_spawns, 0, 1023),
        SKEY(max_connection_memory, 1u << 20, 1u << 30),
        UKEY(max_fds_in_flight, 1, 1024),
        UKEY(max_rules_per_request, 1, 1u << 24),
        UKEY(max_rules_per_request_nonroot, 1, 1u << 24),
        UKEY(max_programs, 1, 1024),
        UKEY(max_programs_per_uid, 1, 1024),
        UKEY(max_fw_rules_per_uid, 1, 1u << 24),
        UKEY(max_fw_owners_per_uid, 1, 1u << 20),
        UKEY(root_reserved_programs, 0, 1023),
};

#define N_NUM_KEYS (sizeof(num_keys) / sizeof(*num_keys))

struct parse_state {
        unsigned lineno;
        bool uids_seen, gids_seen, programs_seen, env_names_seen;
        unsigned program_line[NBD_CONFIG_MAX_PROGRAMS]; /* 0: a default entry */
        unsigned supervised_line[NBD_CONFIG_MAX_PROGRAMS]; /* program_allow's */
        /* Where each number was last set (0: the default), so that settings
         * that conflict are reported at a line of the file. */
        unsigned line[N_NUM_KEYS];
};

static int set_ids(unsigned *ids, size_t *n, bool *seen, const char *key, char *v,
                   struct nbd_err *e)
{
        char *save = NULL;

        if (!*seen)
                *n = 0;
        *seen = true;
        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                unsigned long long id;
                /* (uid_t)-1 means "no change" to the kernel: never an identity. */
                if (nbd_parse_u64(w, 0, (uid_t)-2, &id) < 0)
                        return nbd_err_set(e, -EINVAL, "%s: expected numeric %s", key,
                                           strcmp(key, "allow_uid") == 0 ? "uids" : "gids");
                if (*n >= NBD_CONFIG_MAX_IDS)
                        return nbd_err_set(e, -E2BIG, "%s: more than 32 ids", key);
                ids[(*n)++] = (unsigned)id;
        }
        return 0;
}

static int set_programs(struct nbd_config *c, struct parse_state *st, char *v, struct nbd_err *e)
{
        char *save = NULL;

        if (!st->programs_seen)
                free_programs(c);
        st->programs_seen = true;
        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                int r;
                if (w[0] != '/')
                        return nbd_err_set(e, -EINVAL, "exec_allow: expected absolute paths");
                r = add_program(c, w);
                if (r == -E2BIG)
                        return nbd_err_set(e, r, "exec_allow: more than 64 programs");
                if (r < 0)
                        return nbd_err_set(e, r, "exec_allow: out of memory");
                st->program_line[c->n_exec_allow - 1] = st->lineno;
        }
        return 0;
}

/* program_allow: no defaults, so every entry has its line. */
static int set_supervised(struct nbd_config *c, struct parse_state *st, char *v, struct nbd_err *e)
{
        char *save = NULL;

        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                if (w[0] != '/')
                        return nbd_err_set(e, -EINVAL, "program_allow: expected absolute paths");
                if (c->n_program_allow >= NBD_CONFIG_MAX_PROGRAMS)
                        return nbd_err_set(e, -E2BIG, "program_allow: more than 64 programs");
                c->program_allow[c->n_program_allow] = strdup(w);
                if (!c->program_allow[c->n_program_allow])
                        return nbd_err_set(e, -ENOMEM, "program_allow: out of memory");
                st->supervised_line[c->n_program_allow++] = st->lineno;
        }
        return 0;
}

static int set_path(char **field, const char *key, const char *v, struct nbd_err *e)
{
        char *copy;

        if (v[0] != '/')
                return nbd_err_set(e, -EINVAL, "%s: expected an absolute path", key);
        copy = strdup(v);
        if (!copy)
                return nbd_err_set(e, -ENOMEM, "%s: out of memory", key);
        free(*field);
        *field = copy;
        return 0;
}

static int set_env_names(struct nbd_config *c, struct parse_state *st, char *v, struct nbd_err *e)
{
        char *save = NULL;

        if (!st->env_names_seen)
                free_env_names(c);
        st->env_names_seen = true;
        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                const char *refused;
                char *copy;
                if (!env_name_valid(w))
                        return nbd_err_set(e, -EINVAL,
                                           "exec_env_allow: '%.64s' is not a variable name "
                                           "([A-Za-z_][A-Za-z0-9_]*)",
                                           w);
                refused = env_name_refused(w);
                if (refused)
                        return nbd_err_set(e, -EPERM,
                                           "exec_env_allow: %.64s may never be allowed: %s", w,
                                           refused);
                if (c->n_exec_env_allow >= NBD_CONFIG_MAX_ENV_NAMES)
                        return nbd_err_set(e, -E2BIG, "exec_env_allow: more than 64 names");
                copy = strdup(w);
                if (!copy)
                        return nbd_err_set(e, -ENOMEM, "exec_env_allow: out of memory");
                c->exec_env_allow[c->n_exec_env_allow++] = copy;
        }
        return 0;
}

static int set_key(struct nbd_config *c, struct parse_state *st, const char *key, char *v,
                   struct nbd_err *e)
{
        for (size_t i = 0; i < N_NUM_KEYS; i++) {
                const struct num_key *k = &num_keys[i];
                unsigned long long n;
                if (strcmp(key, k->name) != 0)
                        continue;
                if (nbd_parse_u64(v, k->min, k->max, &n) < 0)
                        return nbd_err_set(e, -ERANGE, "%s: not a number in the allowed range",
                                           key);
                if (k->is_size)
                        *(size_t *)((char *)c + k->offset) = (size_t)n;
                else
                        *(unsigned *)((char *)c + k->offset) = (unsigned)n;
                st->line[i] = st->lineno;
                return 0;
        }
        if (strcmp(key, "allow_uid") == 0)
                return set_ids(c->allow_uids, &c->n_allow_uids, &st->uids_seen, key, v, e);
        if (strcmp(key, "allow_gid") == 0)
                return set_ids(c->allow_gids, &c->n_allow_gids, &st->gids_seen, key, v, e);
        if (strcmp(key, "exec_allow") == 0)
                return set_programs(c, st, v, e);
        if (strcmp(key, "exec_env_allow") == 0)
                return set_env_names(c, st, v, e);
        if (strcmp(key, "program_allow") == 0)
                return set_supervised(c, st, v, e);
        if (strcmp(key, "program_log") == 0)
                return set_path(&c->program_log, key, v, e);
        if (strcmp(key, "program_dir") == 0)
                return set_path(&c->program_dir, key, v, e);
        if (strcmp(key, "log_level") == 0) {
                int l = nbd_log_parse_level(v);
                if (l < 0)
                        return nbd_err_set(e, l,
                                           "log_level: expected error, warning, notice, info or "
                                           "debug");
                c->log_level = l;
                return 0;
        }
        if (strcmp(key, "log_filters") == 0) {
                if (strlen(v) >= sizeof(c->log_filters))
                        return nbd_err_set(e, -E2BIG, "log_filters: too long");
                /* Checked here, not when applied: a reload must be refused
                 * whole, before anything of it is in force. */
                if (nbd_log_filters_check(v) < 0)
                        return nbd_err_set(e, -EINVAL,
                                           "log_filters: expected 'name:level ...' with levels "
                                           "error, warning, notice, info or debug");
                strcpy(c->log_filters, v);
                return 0;
        }
        if (strcmp(key, "log_output") == 0) {
                if (strcmp(v, "stderr") != 0 && strcmp(v, "syslog") != 0)
                        return nbd_err_set(e, -EINVAL, "log_output: expected stderr or syslog");
                c->log_syslog = strcmp(v, "syslog") == 0;
                return 0;
        }
        if (strcmp(key, "policy_dir") == 0) {
                if (v[0] != '/')
                        return nbd_err_set(e, -EINVAL, "policy_dir: expected an absolute path");
                free(c->policy_dir);
                c->policy_dir = strdup(v);
                return c->policy_dir ? 0 : nbd_err_set(e, -ENOMEM, "policy_dir: out of memory");
        }
        return nbd_err_set(e, -EINVAL, "%s: unknown key", key);
}

static char *strip(char *s)
{
        char *e;

        while (isspace((unsigned char)*s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
                *--e = '\0';
        return s;
}

/* The line that set a number, 0 when it kept its default. */
static unsigned line_of(const struct parse_state *st, const char *name)
{
        for (size_t i = 0; i < N_NUM_KEYS; i++)
                if (strcmp(num_keys[i].name, name) == 0)
                        return st->line[i];
        return 0;
}

static unsigned latest(unsigned a, unsigned b)
{
        return a > b ? a : b;
}

/* "path:line: " or, when every key involved kept its default, "path: ". */
static void where(char *at, size_t len, const char *path, unsigned line)
{
        if (line)
                snprintf(at, len, "%s:%u: ", path, line);
        else
                snprintf(at, len, "%s: ", path);
}

/* The reserves for root are shares of max_connections and max_spawns: a
 * deployment that sets those low without naming a reserve gets the
 * largest reserve that still leaves other uids one connection and one
 * slot. A reserve set in the file is taken as written (and checked). */
static void clamp_reserves(struct nbd_config *c, const struct parse_state *st)
{
        if (!line_of(st, "root_reserved_connections") &&
            c->root_reserved_connections >= c->max_connections)
                c->root_reserved_connections = c->max_connections - 1;
        if (!line_of(st, "root_reserved_spawns") && c->root_reserved_spawns >= c->max_spawns)
                c->root_reserved_spawns = c->max_spawns - 1;
        if (!line_of(st, "root_reserved_programs") && c->root_reserved_programs >= c->max_programs)
                c->root_reserved_programs = c->max_programs - 1;
}

/* Settings that are each valid but do not fit together, reported at the
 * last line that took part: the one that made the conflict. */
static int check_consistency(const struct nbd_config *c, const struct parse_state *st,
                             const char *path, struct nbd_err *e)
{
        /* stdio, epoll, signalfd, listener, netlink sockets: a dozen; each
         * running child holds a pidfd and three pipe ends, plus three more
         * while it is being spawned. */
        unsigned long need = 16ul + c->max_connections + 4ul * c->max_spawns + 3;
        /* A supervised program holds its pidfd while it runs. */
        unsigned long programs = c->n_program_allow ? c->max_programs : 0;
        char at[PATH_MAX + 16];

        if (c->exec_timeout_ms > c->exec_timeout_max_ms) {
                where(at, sizeof(at), path,
                      latest(line_of(st, "exec_timeout_ms"), line_of(st, "exec_timeout_max_ms")));
                return nbd_err_set(e, -EINVAL,
                                   "%sexec_timeout_ms (%u) is above exec_timeout_max_ms (%u)", at,
                                   c->exec_timeout_ms, c->exec_timeout_max_ms);
        }
        if (c->max_connections_per_uid > c->max_connections) {
                where(at, sizeof(at), path,
                      latest(line_of(st, "max_connections_per_uid"),
                             line_of(st, "max_connections")));
                return nbd_err_set(e, -EINVAL,
                                   "%smax_connections_per_uid (%u) is above max_connections (%u)",
                                   at, c->max_connections_per_uid, c->max_connections);
        }
        if (c->root_reserved_connections >= c->max_connections) {
                where(at, sizeof(at), path,
                      latest(line_of(st, "root_reserved_connections"),
                             line_of(st, "max_connections")));
                return nbd_err_set(
                        e, -EINVAL,
                        "%sroot_reserved_connections (%u) leaves no connection for other uids "
                        "(max_connections %u)",
                        at, c->root_reserved_connections, c->max_connections);
        }
        if (c->root_reserved_spawns >= c->max_spawns) {
                where(at, sizeof(at), path,
                      latest(line_of(st, "root_reserved_spawns"), line_of(st, "max_spawns")));
                return nbd_err_set(
                        e, -EINVAL,
                        "%sroot_reserved_spawns (%u) leaves no spawn slot for other uids "
                        "(max_spawns %u)",
                        at, c->root_reserved_spawns, c->max_spawns);
        }
        if (c->root_reserved_programs >= c->max_programs) {
                where(at, sizeof(at), path,
                      latest(line_of(st, "root_reserved_programs"), line_of(st, "max_programs")));
                return nbd_err_set(
                        e, -EINVAL,
                        "%sroot_reserved_programs (%u) leaves no program slot for other uids "
                        "(max_programs %u)",
                        at, c->root_reserved_programs, c->max_programs);
        }
        if (need + programs > c->fd_limit && need <= c->fd_limit) {
                where(at, sizeof(at), path,
                      latest(line_of(st, "fd_limit"), line_of(st, "max_programs")));
                return nbd_err_set(e, -EINVAL,
                                   "%sfd_limit is too small (%u) for max_programs (%u) besides "
                                   "max_connections and max_spawns: it needs %lu (each "
                                   "supervised program holds an fd)",
                                   at, c->fd_limit, c->max_programs, need + programs);
        }
        if (need > c->fd_limit) {
                where(at, sizeof(at), path,
                      latest(line_of(st, "fd_limit"),
                             latest(line_of(st, "max_connections"), line_of(st, "max_spawns"))));
                return nbd_err_set(
                        e, -EINVAL,
                        "%sfd_limit is too small (%u) for max_connections (%u) and max_spawns "
                        "(%u): it needs 19 + max_connections + 4 * max_spawns = %lu",
                        at, c->fd_limit, c->max_connections, c->max_spawns, need);
        }
        return 0;
}

static void drop_program(struct nbd_config *c, size_t i)
{
        free(c->exec_allow[i]);
        free(c->exec_real[i]);
        c->n_exec_allow--;
        memmove(&c->exec_allow[i], &c->exec_allow[i + 1],
                (c->n_exec_allow - i) * sizeof(*c->exec_allow));
        memmove(&c->exec_real[i], &c->exec_real[i + 1],
                (c->n_exec_allow - i) * sizeof(*c->exec_real));
        c->exec_real[c->n_exec_allow] = NULL;
}

/* Every program on the list must be safe for root to run, and what runs
 * is the file it resolved to now. The operator named the programs of the
 * file, so one of them that fails stops start-up; the defaults are only
 * what happens to be installed, so one of them that fails is left off. */
static int check_programs(struct nbd_config *c, const struct parse_state *st, const char *path,
                          struct nbd_err *e)
{
        size_t i = 0;

        while (i < c->n_exec_allow) {
                struct nbd_err why = {0};
                char *real = NULL;
                unsigned line = st->programs_seen ? st->program_line[i] : 0;
                int r = nbd_trust_program(c->exec_allow[i], &real, &why);

                if (r == 0) {
                        free(c->exec_real[i]);
                        c->exec_real[i++] = real;
                } else if (!st->programs_seen) {
                        nbd_warn("%s is left off the default exec_allow: %s", c->exec_allow[i],
                                 why.msg);
                        drop_program(c, i);
                } else {
                        return nbd_err_set(e, r, "%s:%u: exec_allow: %s: %s", path, line,
                                           c->exec_allow[i], why.msg);
                }
        }
        return 0;
}

/* program_allow: as exec_allow's entries the file names, each must be safe
 * for root to run, and what runs is what it resolved to now. */
static int check_supervised(struct nbd_config *c, const struct parse_state *st, const char *path,
                            struct nbd_err *e)
{
        for (size_t i = 0; i < c->n_program_allow; i++) {
                struct nbd_err why = {0};
                char *real = NULL;
                int r = nbd_trust_program(c->program_allow[i], &real, &why);

                if (r < 0)
                        return nbd_err_set(e, r, "%s:%u: program_allow: %s: %s", path,
                                           st->supervised_line[i], c->program_allow[i], why.msg);
                free(c->program_real[i]);
                c->program_real[i] = real;
        }
        return 0;
}

/* One line of a file: the helper's own key, or inside a [policy] section
 * (policy files have nothing else) a key of the section. */
static int parse_line(struct nbd_config *c, struct parse_state *st, const char *path, char *s,
                      bool *in_section, bool policy_only, struct nbd_err *e)
{
        struct nbd_err why = {0};
        char *eq, *key, *val;
        size_t n = strlen(s);
        int r;

        if (s[0] == '[') {
                if (s[n - 1] != ']')
                        return nbd_err_set(e, -EINVAL, "%s:%u: expected '[policy ...]'", path,
                                           st->lineno);
                s[n - 1] = '\0';
                r = nbd_policy_begin(&c->policy, strip(s + 1), path, st->lineno, &why);
                *in_section = r == 0;
                goto out;
        }
        eq = strchr(s, '=');
        if (!eq)
                return nbd_err_set(e, -EINVAL, "%s:%u: expected 'key = value'", path, st->lineno);
        *eq = '\0';
        key = strip(s);
        val = strip(eq + 1);
        if (*in_section) {
                r = nbd_policy_set(&c->policy, key, val, st->lineno, &why);
        } else if (policy_only) {
                r = nbd_err_set(&why, -EINVAL, "%s: only [policy ...] sections belong in %s", key,
                                path);
        } else {
                r = set_key(c, st, key, val, &why);
        }
out:
        if (r < 0)
                return nbd_err_set(e, r, "%s:%u: %s", path, st->lineno, why.msg);
        return 0;
}

static int parse_file(struct nbd_config *c, struct parse_state *st, const char *path, FILE *f,
                      bool policy_only, struct nbd_err *e)
{
        bool in_section = false;
        char *line = NULL;
        size_t cap = 0;
        int r = 0;

        st->lineno = 0;
        errno = 0;
        while (r == 0 && getline(&line, &cap, f) > 0) {
                char *s = line;
                st->lineno++;
                s[strcspn(s, "#")] = '\0';
                s = strip(s);
                if (*s)
                        r = parse_line(c, st, path, s, &in_section, policy_only, e);
        }
        /* A read error is not the end of the file: nothing of it is skipped. */
        if (r == 0 && ferror(f)) {
                r = errno ? -errno : -EIO;
                nbd_err_set(e, r, "%s: %s", path, strerror(-r));
        }
        free(line);
        return r;
}

static int is_policy_file(const struct dirent *d)
{
        size_t n = strlen(d->d_name);

        return d->d_name[0] != '.' && n > 5 && strcmp(d->d_name + n - 5, ".conf") == 0;
}

/* Byte order, whatever the locale: 10-a.conf before 20-b.conf anywhere. */
static int by_name(const struct dirent **a, const struct dirent **b)
{
        return strcmp((*a)->d_name, (*b)->d_name);
}

/* The policy files, in lexical order. A missing directory holds none; a
 * file that cannot be read stops start-up: a policy half read could grant
 * what its author meant to refuse only in a later file. */
static int open_config(const char *path, FILE **ret);

static int load_policy_dir(struct nbd_config *c, struct parse_state *st, struct nbd_err *e)
{
        const char *dir = c->policy_dir ? c->policy_dir : NBD_POLICY_DEFAULT_DIR;
        struct dirent **names = NULL;
        int n = scandir(dir, &names, is_policy_file, by_name), r = 0;

        if (n < 0) {
                if (errno == ENOENT)
                        return 0;
                r = -errno;
                return nbd_err_set(e, r, "%s: %s", dir, strerror(-r));
        }
        for (int i = 0; i < n; i++) {
                char path[PATH_MAX];
                FILE *f;
                if (r == 0) {
                        snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
                        /* As the main file: a FIFO here would hold the
                         * loop on a reload. */
                        r = open_config(path, &f);
                        if (r < 0) {
                                nbd_err_set(e, r, "%s: %s", path,
                                            r == -EINVAL ? "not a regular file" : strerror(-r));
                        } else {
                                r = parse_file(c, st, path, f, true, e);
                                fclose(f);
                        }
                }
                free(names[i]);
        }
        free(names);
        return r;
}

/* Only a regular file is a configuration: a directory opens, and reads as
 * an error only on some file systems; a FIFO would hold start-up until a
 * writer came (hence O_NONBLOCK, which means nothing to a regular file). */
static int open_config(const char *path, FILE **ret)
{
        struct stat st;
        FILE *f;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), r;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                goto fail;
        }
        if (!S_ISREG(st.st_mode)) {
                r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
                goto fail;
        }
        f = fdopen(fd, "re");
        if (!f) {
                r = -errno;
                goto fail;
        }
        *ret = f;
        return 0;
fail:
        close(fd);
        return r;
}

int nbd_config_load(struct nbd_config *c, const char *path, bool must_exist, struct nbd_err *e)
{
        struct parse_state st = {0};
        FILE *f = NULL;
        int r = open_config(path, &f);

        if (r == -EINVAL)
                return nbd_err_set(e, r, "%s: not a regular file", path);
        if (r < 0) {
                if (r != -ENOENT || must_exist)
                        return nbd_err_set(e, r, "%s: %s", path, strerror(-r));
                r = 0;
        }
        if (f) {
                r = parse_file(c, &st, path, f, false, e);
                fclose(f);
        }
        if (r == 0)
                r = load_policy_dir(c, &st, e);
        /* The numbers' and programs' lines are those of the main file. */
        if (r == 0) {
                clamp_reserves(c, &st);
                r = check_consistency(c, &st, path, e);
        }
        /* Programs first: a section may grant only what stays allowed. */
        if (r == 0)
                r = check_programs(c, &st, path, e);
        if (r == 0)
                r = check_supervised(c, &st, path, e);
        if (r == 0)
                r = nbd_policy_check(&c->policy, c, e);
        return r;
}

int nbd_config_reload(const struct nbd_config *cur, const char *path, bool must_exist,
                      struct nbd_config **ret, struct nbd_err *e)
{
        struct nbd_config *next = malloc(sizeof(*next));
        int r;

        if (!next)
                return nbd_err_oom(e, "reading the configuration");
        nbd_config_defaults(next);
        r = nbd_config_load(next, path, must_exist, e);
        /* The fd limit was set soft and hard at start-up and the helper may
         * not raise it again; a lower one could be below what is open. */
        if (r == 0 && next->fd_limit != cur->fd_limit)
                r = nbd_err_set(e, -EINVAL,
                                "%s: fd_limit changes only at start-up (%u in force, %u in the "
                                "file): restart netbrokerd for it",
                                path, cur->fd_limit, next->fd_limit);
        if (r < 0) {
                nbd_config_free(next);
                free(next);
                return r;
        }
        *ret = next;
        return 0;
}
