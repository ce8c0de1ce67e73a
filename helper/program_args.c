// SPDX-License-Identifier: LGPL-2.1-or-later
/* The argument rules for callers other than root; see program_args.h.
 *
 * Only long options, whole: getopt_long() also takes an unambiguous
 * abbreviation (--dhcp-scr for --dhcp-script) and a short option's value
 * glued to it (-C/etc/shadow), and a value given as the next argument
 * would be read by the program as a value but by a checker as an option;
 * "--name" or "--name=VALUE" with name exactly as listed leaves no second
 * reading. A value is never taken from the next argument: every argument
 * is checked as an option of its own. */
#include "program_args.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum arg_kind {
        FLAG, /* --name */
        VALUE, /* --name=anything: the program reads no file, runs nothing */
        NAME, /* --name=VALUE without '/': a name, never a path */
        ONE_OF, /* --name=one of values */
        BARE_OR, /* --name alone, or --name=one of values */
        IFACES, /* --name=IF[,IF...], each the caller's */
        UP_TO, /* --name=N, decimal, at most up_to[]'s */
};

struct arg_rule {
        const char *name;
        enum arg_kind kind;
        const char *const *values; /* ONE_OF, BARE_OR: NULL-terminated */
};

/* The largest value of each UP_TO option. */
static const struct {
        const char *name;
        unsigned long max;
} up_to[] = {
        /* Memory of a process that runs as root: dnsmasq takes up to
         * 5,000,000 names (555 MB); its default is 150. */
        {"cache-size", 10000},
};

/* One of these options must be given, or the program does what `why`
 * says. BARE_OR options count only when given bare. */
struct arg_need {
        const char *const *names; /* NULL-terminated */
        const char *why;
};

struct program_rules {
        const char *program; /* the last component of the file that runs */
        const struct arg_rule *rules;
        size_t n_rules;
        const struct arg_need *needs;
        size_t n_needs;
};

#define N(a) (sizeof(a) / sizeof(*(a)))

/* ---- dnsmasq: DHCP, DNS and router advertisements on the caller's own
 * interfaces, from the command line only (no file, script or directory) */

static const char *const dev_null[] = {"/dev/null", NULL};
static const char *const nothing[] = {NULL};

static const struct arg_rule dnsmasq_rules[] = {
        {"keep-in-foreground", FLAG, NULL},
        {"no-daemon", FLAG, NULL},
        {"bind-interfaces", FLAG, NULL},
        {"bind-dynamic", FLAG, NULL},
        {"leasefile-ro", FLAG, NULL},
        {"no-resolv", FLAG, NULL},
        {"no-hosts", FLAG, NULL},
        {"no-poll", FLAG, NULL},
        {"strict-order", FLAG, NULL},
        {"domain-needed", FLAG, NULL},
        {"bogus-priv", FLAG, NULL},
        {"expand-hosts", FLAG, NULL},
        {"dhcp-authoritative", FLAG, NULL},
        {"dhcp-no-override", FLAG, NULL},
        {"dhcp-rapid-commit", FLAG, NULL},
        {"dhcp-sequential-ip", FLAG, NULL},
        {"dhcp-fqdn", FLAG, NULL},
        {"enable-ra", FLAG, NULL},
        {"no-ping", FLAG, NULL},
        {"no-negcache", FLAG, NULL},
        {"local-service", FLAG, NULL},
        {"dns-loop-detect", FLAG, NULL},
        {"stop-dns-rebind", FLAG, NULL},
        {"log-dhcp", FLAG, NULL},
        {"log-queries", FLAG, NULL},
        {"quiet-dhcp", FLAG, NULL},
        {"quiet-dhcp6", FLAG, NULL},
        {"quiet-ra", FLAG, NULL},
        /* Without a file: no configuration file at all, or none read. */
        {"conf-file", BARE_OR, dev_null},
        /* Bare: no pid file (the default is the system's). */
        {"pid-file", BARE_OR, nothing},
        {"interface", IFACES, NULL},
        /* Exclusions: they take nothing from anyone. */
        {"except-interface", VALUE, NULL},
        {"no-dhcp-interface", VALUE, NULL},
        {"no-dhcpv4-interface", VALUE, NULL},
        {"no-dhcpv6-interface", VALUE, NULL},
        {"port", VALUE, NULL},
        {"dhcp-range", VALUE, NULL},
        {"dhcp-host", VALUE, NULL},
        {"dhcp-option", VALUE, NULL},
        {"dhcp-option-force", VALUE, NULL},
        {"dhcp-match", VALUE, NULL},
        {"dhcp-lease-max", VALUE, NULL},
        {"ra-param", VALUE, NULL},
        {"domain", VALUE, NULL},
        {"local", VALUE, NULL},
        {"address", VALUE, NULL},
        {"server", VALUE, NULL},
        {"host-record", VALUE, NULL},
        {"cname", VALUE, NULL},
        {"srv-host", VALUE, NULL},
        {"txt-record", VALUE, NULL},
        {"ptr-record", VALUE, NULL},
        {"mx-host", VALUE, NULL},
        {"cache-size", UP_TO, NULL},
        {"dns-forward-max", VALUE, NULL},
        {"local-ttl", VALUE, NULL},
        {"neg-ttl", VALUE, NULL},
        {"max-ttl", VALUE, NULL},
        {"max-cache-ttl", VALUE, NULL},
        {"min-cache-ttl", VALUE, NULL},
        /* dnsmasq cannot change its user (the helper holds no
         * CAP_SETUID): names only, as the man page's example gives them. */
        {"user", NAME, NULL},
        {"group", NAME, NULL},
        /* A syslog facility, or "-" (standard error); a '/' is a file. */
        {"log-facility", NAME, NULL},
};

static const char *const foreground[] = {"keep-in-foreground", "no-daemon", NULL};
static const char *const no_pid_file[] = {"pid-file", NULL};
static const char *const no_lease_file[] = {"leasefile-ro", NULL};
static const char *const bound[] = {"bind-interfaces", "bind-dynamic", NULL};
static const char *const interfaces[] = {"interface", NULL};

static const struct arg_need dnsmasq_needs[] = {
        {foreground, "it would fork away from the helper's supervision"},
        {no_pid_file, "it would write the system's pid file"},
        {no_lease_file, "it would write the system's lease file"},
        {bound, "it would bind the wildcard address, every interface's"},
        {interfaces, "it would serve every interface"},
};

/* ---- radvd: only what leaves its configuration, pid and log files the
 * system's (a configuration names the interfaces it advertises on) */

static const char *const radvd_logmethods[] = {"stderr", "stderr_syslog", "syslog", "none", NULL};

static const struct arg_rule radvd_rules[] = {
        {"nodaemon", FLAG, NULL},
        {"logmethod", ONE_OF, radvd_logmethods},
};

static const char *const radvd_foreground[] = {"nodaemon", NULL};

static const struct arg_need radvd_needs[] = {
        {radvd_foreground, "it would fork away from the helper's supervision"},
};

static const struct program_rules programs[] = {
        {"dnsmasq", dnsmasq_rules, N(dnsmasq_rules), dnsmasq_needs, N(dnsmasq_needs)},
        {"radvd", radvd_rules, N(radvd_rules), radvd_needs, N(radvd_needs)},
};

/* ---- checking ---- */

static const struct program_rules *rules_for(const char *file)
{
        const char *base = strrchr(file, '/');

        base = base ? base + 1 : file;
        for (size_t i = 0; i < N(programs); i++)
                if (strcmp(programs[i].program, base) == 0)
                        return &programs[i];
        return NULL;
}

static const struct arg_rule *rule_for(const struct program_rules *p, const char *name, size_t len)
{
        for (size_t i = 0; i < p->n_rules; i++)
                if (strlen(p->rules[i].name) == len && strncmp(p->rules[i].name, name, len) == 0)
                        return &p->rules[i];
        return NULL;
}

static bool in_list(const char *const *list, const char *v)
{
        for (; *list; list++)
                if (strcmp(*list, v) == 0)
                        return true;
        return false;
}

/* The values, space-separated, for a message. */
static void join(const char *const *values, char *buf, size_t len)
{
        size_t at = 0;

        buf[0] = '\0';
        for (; *values && at < len; values++) {
                int n = snprintf(buf + at, len - at, "%s%s", at ? " " : "", *values);
                at += n > 0 ? (size_t)n : 0;
        }
}

/* Each comma-separated interface of value is the caller's. */
static int check_ifaces(const char *value, nbd_program_owned_fn owned, void *data,
                        struct nbd_err *e)
{
        char name[64];

        for (const char *at = value;;) {
                size_t len = strcspn(at, ",");
                int r;

                if (len == 0 || len >= sizeof(name))
                        return nbd_err_set(e, -EPERM, "not an interface name");
                memcpy(name, at, len);
                name[len] = '\0';
                /* The program reads a pattern where a name has one ("vnet*":
                 * every vnet, anyone's); no name the helper makes has. */
                if (strpbrk(name, "*?[]"))
                        return nbd_err_set(e, -EPERM, "an interface pattern, not a name");
                if ((r = owned(data, name, e)) < 0)
                        return r;
                if (!at[len])
                        return 0;
                at += len + 1;
        }
}

/* A decimal number of at most r->max: nothing dnsmasq would read as
 * another (no sign, space or suffix). */
static int check_up_to(const struct arg_rule *r, const char *value, struct nbd_err *e)
{
        unsigned long n = 0, max = 0;

        for (size_t i = 0; i < N(up_to); i++)
                if (strcmp(up_to[i].name, r->name) == 0)
                        max = up_to[i].max;
        if (!*value || strspn(value, "0123456789") != strlen(value))
                return nbd_err_set(e, -EPERM, "--%s takes a decimal number", r->name);
        for (const char *d = value; *d && n <= max; d++)
                n = n * 10 + (unsigned long)(*d - '0');
        if (n > max)
                return nbd_err_set(e, -EPERM, "--%s takes at most %lu", r->name, max);
        return 0;
}

/* The value of rule r (NULL: none given): 0, or -EPERM / owned's error
 * with e saying why. */
static int check_value(const struct arg_rule *r, const char *value, nbd_program_owned_fn owned,
                       void *data, struct nbd_err *e)
{
        char list[128];

        if (!value)
                return r->kind == FLAG || r->kind == BARE_OR
                               ? 0
                               : nbd_err_set(e, -EPERM, "give its value as --%s=VALUE", r->name);
        switch (r->kind) {
        case FLAG:
                return nbd_err_set(e, -EPERM, "--%s takes no value", r->name);
        case VALUE:
                return 0;
        case NAME:
                return strchr(value, '/') ? nbd_err_set(e, -EPERM, "a value with '/' names a file")
                                          : 0;
        case ONE_OF:
        case BARE_OR:
                if (in_list(r->values, value))
                        return 0;
                join(r->values, list, sizeof(list));
                if (r->kind == ONE_OF)
                        return nbd_err_set(e, -EPERM, "--%s takes one of: %s", r->name, list);
                return nbd_err_set(e, -EPERM, "--%s takes %s%s", r->name,
                                   r->values[0] ? "no value, or one of: " : "no value", list);
        case IFACES:
                return check_ifaces(value, owned, data, e);
        case UP_TO:
                return check_up_to(r, value, e);
        }
        return nbd_err_set(e, -EPERM, "unknown kind of option");
}

static bool given(const char *const *argv, size_t n_argv, const char *name, bool bare)
{
        size_t len = strlen(name);

        for (size_t i = 1; i < n_argv; i++)
                if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, name, len) == 0 &&
                    (argv[i][2 + len] == '\0' || (!bare && argv[i][2 + len] == '=')))
                        return true;
        return false;
}

static int check_needs(const struct program_rules *p, char *const *argv, size_t n_argv, uid_t uid,
                       struct nbd_err *e)
{
        for (size_t i = 0; i < p->n_needs; i++) {
                const struct arg_need *need = &p->needs[i];
                bool ok = false;
                for (const char *const *n = need->names; *n && !ok; n++) {
                        const struct arg_rule *r = rule_for(p, *n, strlen(*n));
                        ok = given((const char *const *)argv, n_argv, *n, r && r->kind == BARE_OR);
                }
                if (!ok)
                        return nbd_err_set(e, -EPERM,
                                           "policy: uid %u may not start %s without --%s%s%s: %s",
                                           (unsigned)uid, p->program, need->names[0],
                                           need->names[1] ? " or --" : "",
                                           need->names[1] ? need->names[1] : "", need->why);
        }
        return 0;
}

int nbd_program_args_check(const char *file, char *const *argv, size_t n_argv, uid_t uid,
                           nbd_program_owned_fn owned, void *data, struct nbd_err *e)
{
        const struct program_rules *p = rules_for(file);
        struct nbd_err why = {0};

        if (!p) {
                if (n_argv <= 1)
                        return 0;
                return nbd_err_set(e, -EPERM,
                                   "policy: uid %u may not give %s arguments: it runs as root, and "
                                   "only dnsmasq and radvd have rules for what a caller other "
                                   "than root may give them (netbrokerd(8))",
                                   (unsigned)uid, file);
        }
        for (size_t i = 1; i < n_argv; i++) {
                const char *a = argv[i], *eq;
                const struct arg_rule *r;
                int k;

                if (strncmp(a, "--", 2) != 0 || !a[2])
                        return nbd_err_set(e, -EPERM,
                                           "policy: uid %u may not give %s '%.64s': only long "
                                           "options (--name or --name=VALUE) are taken from a "
                                           "caller other than root",
                                           (unsigned)uid, p->program, a);
                eq = strchr(a + 2, '=');
                r = rule_for(p, a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
                if (!r)
                        return nbd_err_set(e, -EPERM,
                                           "policy: uid %u may not give %s '%.64s': not an option "
                                           "a caller other than root may give it (netbrokerd(8), "
                                           "SUPERVISED PROGRAMS)",
                                           (unsigned)uid, p->program, a);
                k = check_value(r, eq ? eq + 1 : NULL, owned, data, &why);
                if (k < 0)
                        return nbd_err_set(e, k, "policy: uid %u may not give %s '%.64s': %s",
                                           (unsigned)uid, p->program, a, why.msg);
        }
        return check_needs(p, argv, n_argv, uid, e);
}

/* The first byte of s a log line or a terminal would read as more than a
 * character of its own, or NULL. */
static const char *unprintable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
                        return s;
        return NULL;
}

/* what: "argument", "environment entry". */
static int bytes_check(char *const *v, size_t n, const char *what, uid_t uid, struct nbd_err *e)
{
        const char *bad;

        for (size_t i = 0; i < n; i++)
                if ((bad = unprintable(v[i])))
                        return nbd_err_set(e, -EPERM,
                                           "policy: uid %u may not give %s %zu with byte 0x%02x: "
                                           "only printable ASCII is taken from a caller other "
                                           "than root (a program's output is the helper's log)",
                                           (unsigned)uid, what, i, (unsigned char)*bad);
        return 0;
}

int nbd_program_bytes_check(char *const *argv, size_t n_argv, char *const *env, size_t n_env,
                            uid_t uid, struct nbd_err *e)
{
        int r = bytes_check(argv, n_argv, "argument", uid, e);

        return r < 0 ? r : bytes_check(env, n_env, "environment entry", uid, e);
}
