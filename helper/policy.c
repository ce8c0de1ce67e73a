// SPDX-License-Identifier: LGPL-2.1-or-later
/* The policy model: parsing of [policy ...] sections and the answers the
 * dispatcher and the op files ask for; see policy.h. */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "names.h"

/* Ops a section may grant, by the name of their handler (dispatch.c), in
 * the order of the bits of nbd_policy_section.ops (addr_add on: virtual
 * networks, part 1). */
static const char *const grantable[] = {
        "tap_create",      "macvtap_create", "macvlan_create", "veth_create",     "bridge_create",
        "link_set",        "link_delete",    "firewall_apply", "firewall_remove", "bandwidth_set",
        "bandwidth_clear", "exec",           "link_list",      "bandwidth_show",  "addr_add",
        "addr_delete",     "addr_list",      "route_add",      "route_delete",    "route_list",
        "sysctl_set",      "bridge_opt_set", "net_apply",      "net_remove",      "program_start",
        "program_stop",
};
#define N_GRANTABLE (sizeof(grantable) / sizeof(*grantable))
_Static_assert(N_GRANTABLE <= 32, "nbd_policy_section.ops has 32 bits");
#define OP_BIT(i) (1u << (i))
/* The first five make interfaces: they need name_prefixes. */
#define CREATE_OPS 0x1fu

/* The bit of a grantable op, by name: the list grows as ops come (three
 * branches added to it at once), so no bit is written down by number. */
static unsigned grant_bit(const char *name)
{
        for (size_t i = 0; i < N_GRANTABLE; i++)
                if (strcmp(grantable[i], name) == 0)
                        return OP_BIT(i);
        return 0;
}
#define EXEC_OP grant_bit("exec")
#define PROGRAM_START_OP grant_bit("program_start")

/* Reading only: every admitted caller may look (its own firewall owners
 * only, op_firewall.c). */
static const char *const always[] = {"ping",          "stats",    "names_dump",
                                     "firewall_list", "net_list", "program_list"};
#define N_ALWAYS (sizeof(always) / sizeof(*always))

const char *const nbd_policy_mode_names[4] = {"bridge", "vepa", "private", "passthru"};
/* Without a macvlan_modes key: every mode but passthru, which hands the
 * whole uplink (and every frame on it) to the caller. */
#define DEFAULT_MODES 0x7u

static void section_free(struct nbd_policy_section *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n_exec; i++)
                free(s->exec[i]);
        for (size_t i = 0; i < s->n_programs; i++)
                free(s->programs[i]);
        free(s);
}

void nbd_policy_free(struct nbd_policy *p)
{
        for (size_t i = 0; i < p->n; i++)
                section_free(p->sections[i]);
        free(p->sections);
        for (size_t i = 0; i < p->n_files; i++)
                free(p->files[i]);
        free(p->files);
        memset(p, 0, sizeof(*p));
}

/* ---- reading ---- */

/* A uid or gid; (uid_t)-1 means "no change" to the kernel: never an
 * identity. */
static int parse_id(const char *w, unsigned *ret)
{
        unsigned long long n;
        int r = nbd_parse_u64(w, 0, (uid_t)-2, &n);

        if (r == 0)
                *ret = (unsigned)n;
        return r;
}

/* The file name, kept once for all the sections read from it. */
static const char *intern_file(struct nbd_policy *p, const char *file)
{
        char **grown;

        if (p->n_files && strcmp(p->files[p->n_files - 1], file) == 0)
                return p->files[p->n_files - 1];
        grown = realloc(p->files, (p->n_files + 1) * sizeof(*grown));
        if (!grown)
                return NULL;
        p->files = grown;
        grown[p->n_files] = strdup(file);
        return grown[p->n_files] ? grown[p->n_files++] : NULL;
}

/* kind and name of "policy KIND NAME" to a uid or gid. */
static int resolve(const char *kind, const char *name, bool *ret_group, unsigned *ret_id,
                   struct nbd_err *e)
{
        bool group = strcmp(kind, "gid") == 0 || strcmp(kind, "group") == 0;
        struct passwd *pw;
        struct group *gr;

        if (strcmp(kind, "uid") == 0 || strcmp(kind, "gid") == 0) {
                if (parse_id(name, ret_id) < 0) {
                        return nbd_err_set(e, -EINVAL, "[policy %s %s]: not a numeric %s", kind,
                                           name, kind);
                }
        } else if (strcmp(kind, "user") == 0) {
                pw = getpwnam(name);
                if (!pw) {
                        return nbd_err_set(e, -ENOENT, "[policy user %s]: no such user", name);
                }
                *ret_id = pw->pw_uid;
        } else if (strcmp(kind, "group") == 0) {
                gr = getgrnam(name);
                if (!gr) {
                        return nbd_err_set(e, -ENOENT, "[policy group %s]: no such group", name);
                }
                *ret_id = gr->gr_gid;
        } else {
                return nbd_err_set(e, -EINVAL, "[policy %s ...]: expected uid, user, gid or group",
                                   kind);
        }
        *ret_group = group;
        return 0;
}

int nbd_policy_begin(struct nbd_policy *p, const char *header, const char *file, unsigned line,
                     struct nbd_err *e)
{
        char words[3][64], extra[2];
        struct nbd_policy_section *s, **grown;
        bool group = false;
        unsigned id = 0;
        int r;

        if (sscanf(header, "%63s %63s %63s %1s", words[0], words[1], words[2], extra) != 3 ||
            strcmp(words[0], "policy") != 0) {
                return nbd_err_set(
                        e, -EINVAL,
                        "[%s]: unknown section (expected [policy uid N], [policy user NAME], "
                        "[policy gid N] or [policy group NAME])",
                        header);
        }
        r = resolve(words[1], words[2], &group, &id, e);
        if (r < 0)
                return r;
        if (!group && id == 0) {
                return nbd_err_set(
                        e, -EINVAL,
                        "[policy %s %s]: root (uid 0) is allowed everything; a policy for it would "
                        "mean nothing",
                        words[1], words[2]);
        }
        for (size_t i = 0; i < p->n; i++)
                if (p->sections[i]->is_group == group && p->sections[i]->id == id) {
                        return nbd_err_set(e, -EEXIST,
                                           "[policy %s %s]: %s %u has a section already, at %s:%u",
                                           words[1], words[2], group ? "gid" : "uid", id,
                                           p->sections[i]->file, p->sections[i]->line);
                }
        s = calloc(1, sizeof(*s));
        grown = s ? realloc(p->sections, (p->n + 1) * sizeof(*grown)) : NULL;
        if (grown)
                p->sections = grown;
        if (!grown || !(s->file = intern_file(p, file))) {
                free(s);
                return nbd_err_set(e, -ENOMEM, "out of memory");
        }
        s->is_group = group;
        s->id = id;
        snprintf(s->label, sizeof(s->label), "policy %s %s", words[1], words[2]);
        s->line = line;
        s->modes = DEFAULT_MODES;
        s->max_devices = NBD_POLICY_DEFAULT_MAX_DEVICES;
        p->sections[p->n++] = s;
        return 0;
}

static int set_ops(struct nbd_policy_section *s, char *v, unsigned line, struct nbd_err *e)
{
        char *save = NULL;

        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                size_t i;
                bool known = false;
                for (i = 0; i < N_ALWAYS; i++)
                        known |= strcmp(w, always[i]) == 0;
                if (known)
                        continue; /* needs no grant; harmless to name */
                for (i = 0; i < N_GRANTABLE && strcmp(w, grantable[i]) != 0; i++)
                        ;
                if (i == N_GRANTABLE) {
                        return nbd_err_set(
                                e, -EINVAL,
                                "ops: unknown operation '%s' (tap_create macvtap_create "
                                "macvlan_create veth_create bridge_create link_set link_delete "
                                "firewall_apply firewall_remove bandwidth_set bandwidth_clear "
                                "exec link_list bandwidth_show addr_add addr_delete addr_list "
                                "route_add route_delete route_list sysctl_set bridge_opt_set "
                                "net_apply net_remove program_start program_stop)",
                                w);
                }
                if ((CREATE_OPS & OP_BIT(i)) && !s->create_line)
                        s->create_line = line;
                if (OP_BIT(i) == EXEC_OP && !s->exec_op_line)
                        s->exec_op_line = line;
                if (OP_BIT(i) == PROGRAM_START_OP && !s->program_op_line)
                        s->program_op_line = line;
                s->ops |= OP_BIT(i);
        }
        return 0;
}

static int set_names(char (*names)[IFNAMSIZ], size_t *n, const char *key, char *v,
                     struct nbd_err *e)
{
        char *save = NULL;

        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                if (!nbd_ifname_valid(w)) {
                        return nbd_err_set(
                                e, -EINVAL,
                                "%s: '%s' is not an interface name (1-15 bytes, no '/', ':' or "
                                "white space)",
                                key, w);
                }
                if (*n >= NBD_POLICY_MAX_NAMES) {
                        return nbd_err_set(e, -E2BIG, "%s: more than %d names", key,
                                           NBD_POLICY_MAX_NAMES);
                }
                snprintf(names[(*n)++], IFNAMSIZ, "%s", w);
        }
        return 0;
}

static int set_modes(struct nbd_policy_section *s, char *v, struct nbd_err *e)
{
        char *save = NULL;

        if (!s->modes_set)
                s->modes = 0;
        s->modes_set = true;
        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                unsigned m;
                for (m = 0; m < 4 && strcmp(w, nbd_policy_mode_names[m]) != 0; m++)
                        ;
                if (m == 4) {
                        return nbd_err_set(
                                e, -EINVAL,
                                "macvlan_modes: unknown mode '%s' (bridge, vepa, private or "
                                "passthru)",
                                w);
                }
                s->modes |= 1u << m;
        }
        return 0;
}

static int set_exec(struct nbd_policy_section *s, char *v, unsigned line, struct nbd_err *e)
{
        char *save = NULL;

        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                if (w[0] != '/') {
                        return nbd_err_set(e, -EINVAL, "exec: '%s' is not an absolute path", w);
                }
                if (s->n_exec >= NBD_POLICY_MAX_PROGRAMS) {
                        return nbd_err_set(e, -E2BIG, "exec: more than %d programs",
                                           NBD_POLICY_MAX_PROGRAMS);
                }
                s->exec[s->n_exec] = strdup(w);
                if (!s->exec[s->n_exec]) {
                        return nbd_err_set(e, -ENOMEM, "out of memory");
                }
                s->exec_line[s->n_exec++] = line;
        }
        return 0;
}

/* programs = ...: what program_start may start (on program_allow). */
static int set_programs(struct nbd_policy_section *s, char *v, unsigned line, struct nbd_err *e)
{
        char *save = NULL;

        for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                if (w[0] != '/')
                        return nbd_err_set(e, -EINVAL, "programs: '%s' is not an absolute path", w);
                if (s->n_programs >= NBD_POLICY_MAX_PROGRAMS)
                        return nbd_err_set(e, -E2BIG, "programs: more than %d programs",
                                           NBD_POLICY_MAX_PROGRAMS);
                s->programs[s->n_programs] = strdup(w);
                if (!s->programs[s->n_programs])
                        return nbd_err_set(e, -ENOMEM, "out of memory");
                s->programs_line[s->n_programs++] = line;
        }
        return 0;
}

int nbd_policy_set(struct nbd_policy *p, const char *key, char *v, unsigned line, struct nbd_err *e)
{
        struct nbd_policy_section *s = p->n ? p->sections[p->n - 1] : NULL;
        unsigned long long n;

        if (!s) {
                return nbd_err_set(e, -EINVAL, "%s: only [policy ...] sections belong here", key);
        }
        if (strcmp(key, "ops") == 0)
                return set_ops(s, v, line, e);
        if (strcmp(key, "bridges") == 0)
                return set_names(s->bridges, &s->n_bridges, key, v, e);
        if (strcmp(key, "parents") == 0)
                return set_names(s->parents, &s->n_parents, key, v, e);
        if (strcmp(key, "name_prefixes") == 0)
                return set_names(s->prefixes, &s->n_prefixes, key, v, e);
        if (strcmp(key, "macvlan_modes") == 0)
                return set_modes(s, v, e);
        if (strcmp(key, "exec") == 0)
                return set_exec(s, v, line, e);
        if (strcmp(key, "programs") == 0)
                return set_programs(s, v, line, e);
        if (strcmp(key, "max_devices") == 0) {
                if (nbd_parse_u64(v, 0, 65535, &n) < 0) {
                        return nbd_err_set(e, -ERANGE,
                                           "max_devices: expected a number from 0 to 65535");
                }
                s->max_devices = (unsigned)n;
                return 0;
        }
        if (strcmp(key, "program_args") == 0) {
                if (strcmp(v, "checked") != 0 && strcmp(v, "any") != 0)
                        return nbd_err_set(e, -EINVAL, "program_args: expected checked or any");
                s->program_args_any = strcmp(v, "any") == 0;
                s->program_args_line = line;
                return 0;
        }
        if (strcmp(key, "netns") == 0) {
                if (strcmp(v, "own") != 0 && strcmp(v, "none") != 0) {
                        return nbd_err_set(e, -EINVAL, "netns: expected own or none");
                }
                s->netns_own = strcmp(v, "own") == 0;
                return 0;
        }
        return nbd_err_set(
                e, -EINVAL,
                "%s: not a key of a [policy] section (ops, bridges, parents, macvlan_modes, "
                "name_prefixes, max_devices, netns, exec, programs, program_args); settings of the "
                "helper go "
                "before the "
                "first section",
                key);
}

/* As exec: program_start and its programs come together, each on
 * program_allow. */
static int check_section_programs(const struct nbd_policy_section *s, const struct nbd_config *c,
                                  struct nbd_err *e)
{
        if ((s->ops & PROGRAM_START_OP) && !s->n_programs)
                return nbd_err_set(e, -EINVAL,
                                   "%s:%u: ops: program_start is granted but [%s] lists no "
                                   "'programs'",
                                   s->file, s->program_op_line, s->label);
        if (s->program_args_any && !s->n_programs)
                return nbd_err_set(
                        e, -EINVAL,
                        "%s:%u: program_args: [%s] lists no 'programs' it would apply to", s->file,
                        s->program_args_line, s->label);
        for (size_t i = 0; i < s->n_programs; i++) {
                if (!(s->ops & PROGRAM_START_OP))
                        return nbd_err_set(e, -EINVAL,
                                           "%s:%u: programs: listed but 'program_start' is not "
                                           "in 'ops' of [%s]",
                                           s->file, s->programs_line[i], s->label);
                if (!nbd_config_program_file(c, s->programs[i]))
                        return nbd_err_set(e, -EINVAL,
                                           "%s:%u: programs: %s is not on program_allow", s->file,
                                           s->programs_line[i], s->programs[i]);
        }
        return 0;
}

static int check_section(const struct nbd_policy_section *s, const struct nbd_config *c,
                         struct nbd_err *e)
{
        if ((s->ops & CREATE_OPS) && !s->n_prefixes) {
                return nbd_err_set(
                        e, -EINVAL,
                        "%s:%u: ops: interfaces may be created but [%s] has no name_prefixes "
                        "for their names",
                        s->file, s->create_line, s->label);
        }
        if ((s->ops & EXEC_OP) && !s->n_exec) {
                return nbd_err_set(e, -EINVAL,
                                   "%s:%u: ops: exec is granted but [%s] lists no 'exec' programs",
                                   s->file, s->exec_op_line, s->label);
        }
        for (size_t i = 0; i < s->n_exec; i++) {
                if (!(s->ops & EXEC_OP)) {
                        return nbd_err_set(
                                e, -EINVAL,
                                "%s:%u: exec: programs are listed but 'exec' is not in 'ops' of "
                                "[%s]",
                                s->file, s->exec_line[i], s->label);
                }
                if (!nbd_config_exec_allowed(c, s->exec[i])) {
                        return nbd_err_set(e, -EINVAL, "%s:%u: exec: %s is not on exec_allow",
                                           s->file, s->exec_line[i], s->exec[i]);
                }
        }
        return check_section_programs(s, c, e);
}

int nbd_policy_check(const struct nbd_policy *p, const struct nbd_config *c, struct nbd_err *e)
{
        for (size_t i = 0; i < p->n; i++) {
                int r = check_section(p->sections[i], c, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- queries ---- */

const struct nbd_policy_section *nbd_policy_for(const struct nbd_policy *p,
                                                const struct nbd_peer *peer)
{
        if (nbd_peer_is_root(peer))
                return NULL;
        for (size_t i = 0; i < p->n; i++)
                if (!p->sections[i]->is_group && p->sections[i]->id == peer->uid)
                        return p->sections[i];
        for (size_t i = 0; i < p->n; i++)
                if (p->sections[i]->is_group && nbd_peer_in_group(peer, p->sections[i]->id))
                        return p->sections[i];
        return NULL;
}

bool nbd_policy_admits(const struct nbd_policy *p, const struct nbd_peer *peer)
{
        return nbd_policy_for(p, peer) != NULL;
}

int nbd_policy_check_op(const struct nbd_policy *p, const struct nbd_peer *peer, const char *op,
                        struct nbd_err *e)
{
        const struct nbd_policy_section *s;
        size_t i;

        if (nbd_peer_is_root(peer))
                return 0;
        /* Ensure by hash is FirewallApply's ensure without the rules: the
         * same grant, and op_firewall.c's same checks of the owner. */
        if (strcmp(op, "firewall_ensure_hash") == 0)
                op = "firewall_apply";
        for (i = 0; i < N_ALWAYS; i++)
                if (strcmp(op, always[i]) == 0)
                        return 0;
        s = nbd_policy_for(p, peer);
        for (i = 0; i < N_GRANTABLE && strcmp(op, grantable[i]) != 0; i++)
                ;
        if (s && i < N_GRANTABLE && (s->ops & OP_BIT(i)))
                return 0;
        if (!s)
                return nbd_err_set(
                        e, -EPERM,
                        "policy: uid %u may not run %s (no [policy] section for uid %u or its "
                        "groups grants it in 'ops')",
                        (unsigned)peer->uid, op, (unsigned)peer->uid);
        if (i == N_GRANTABLE)
                return nbd_err_set(e, -EPERM, "policy: uid %u may not run %s (only root may)",
                                   (unsigned)peer->uid, op);
        return nbd_err_set(e, -EPERM, "policy: uid %u may not run %s (not in 'ops' of [%s])",
                           (unsigned)peer->uid, op, s->label);
}

int nbd_policy_check_exec(const struct nbd_policy *p, const struct nbd_peer *peer, const char *path,
                          struct nbd_err *e)
{
        const struct nbd_policy_section *s;

        if (nbd_peer_is_root(peer))
                return 0;
        s = nbd_policy_for(p, peer);
        for (size_t i = 0; s && i < s->n_exec; i++)
                if (strcmp(s->exec[i], path) == 0)
                        return 0;
        if (s)
                return nbd_err_set(e, -EPERM,
                                   "policy: uid %u may not run %s (not in 'exec' of [%s])",
                                   (unsigned)peer->uid, path, s->label);
        return nbd_err_set(e, -EPERM, "policy: uid %u may not run %s (no [policy] section for it)",
                           (unsigned)peer->uid, path);
}

int nbd_policy_check_program(const struct nbd_policy *p, const struct nbd_peer *peer,
                             const char *path, struct nbd_err *e)
{
        const struct nbd_policy_section *s;

        if (nbd_peer_is_root(peer))
                return 0;
        s = nbd_policy_for(p, peer);
        for (size_t i = 0; s && i < s->n_programs; i++)
                if (strcmp(s->programs[i], path) == 0)
                        return 0;
        if (s)
                return nbd_err_set(e, -EPERM,
                                   "policy: uid %u may not start %s (not in 'programs' of [%s])",
                                   (unsigned)peer->uid, path, s->label);
        return nbd_err_set(e, -EPERM,
                           "policy: uid %u may not start %s (no [policy] section for it)",
                           (unsigned)peer->uid, path);
}

bool nbd_policy_checks_program_args(const struct nbd_policy *p, const struct nbd_peer *peer)
{
        const struct nbd_policy_section *s;

        if (nbd_peer_is_root(peer))
                return false;
        s = nbd_policy_for(p, peer);
        return !s || !s->program_args_any;
}

static bool in_names(const char (*names)[IFNAMSIZ], size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(names[i], name) == 0)
                        return true;
        return false;
}

bool nbd_policy_may_bridge(const struct nbd_policy_section *s, const char *name)
{
        return s && in_names(s->bridges, s->n_bridges, name);
}

bool nbd_policy_may_parent(const struct nbd_policy_section *s, const char *name)
{
        return s && in_names(s->parents, s->n_parents, name);
}

bool nbd_policy_may_mode(const struct nbd_policy_section *s, unsigned mode)
{
        return s && mode < 4 && (s->modes & (1u << mode));
}

bool nbd_policy_may_name(const struct nbd_policy_section *s, const char *name)
{
        for (size_t i = 0; s && i < s->n_prefixes; i++)
                if (strncmp(name, s->prefixes[i], strlen(s->prefixes[i])) == 0)
                        return true;
        return false;
}

void nbd_policy_prefixes(const struct nbd_policy_section *s, char *buf, size_t len)
{
        size_t at = 0;

        if (len)
                buf[0] = '\0';
        for (size_t i = 0; s && i < s->n_prefixes && at < len; i++) {
                int n = snprintf(buf + at, len - at, "%s%s", i ? " " : "", s->prefixes[i]);
                at += n > 0 ? (size_t)n : 0;
        }
}
