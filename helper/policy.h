// SPDX-License-Identifier: LGPL-2.1-or-later
/* What a non-root caller may do: the [policy ...] sections of the
 * configuration, deny by default.
 *
 *   [policy uid 1000]   [policy user alice]   [policy gid 990]   [policy group kvm]
 *   ops = tap_create link_set ...   the ops it may run (Ping, Stats, NamesDump
 *                                   and FirewallList need no grant)
 *   bridges = virbr0                bridges it may attach to, besides its own
 *   parents = eth0                  parents of its macvtaps and macvlans
 *   macvlan_modes = bridge          modes it may use (default: bridge vepa
 *                                   private; passthru only when named)
 *   name_prefixes = vnet            names it creates start with one of these
 *   max_devices = 16                interfaces it may own at once
 *   netns = own                     a veth peer may go to a namespace it owns
 *   exec = /usr/sbin/foo            programs it may Exec
 *   programs = /usr/sbin/dnsmasq    programs it may start (program_start;
 *                                   on program_allow)
 *
 * Root (uid 0) is never restricted: every query answers yes for it. For
 * anyone else the section that applies is the one of its uid, else the
 * first group section, in the order read, whose gid is its effective gid or
 * one of its supplementary groups; no section grants nothing. A section
 * also admits its uid or group (nbd_policy_admits).
 *
 * The ops and the limits are checked by the dispatcher and the op files;
 * this file only parses and answers. Ownership of objects is kept in the
 * kernel (link.c, firewall.c), not here. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "peer.h"

#define NBD_POLICY_DEFAULT_DIR "/etc/netbroker/policy.d"
#define NBD_POLICY_MAX_NAMES 32 /* entries of bridges, parents and name_prefixes */
#define NBD_POLICY_MAX_PROGRAMS 64
#define NBD_POLICY_DEFAULT_MAX_DEVICES 16

struct nbd_config;

struct nbd_policy_section {
        bool is_group; /* else a uid section */
        unsigned id; /* the uid or gid */
        char label[136]; /* "policy user alice", for messages: "[policy user alice]" */
        const char *file; /* where it was read (owned by struct nbd_policy) */
        unsigned line;
        uint32_t ops; /* one bit per grantable op */
        char bridges[NBD_POLICY_MAX_NAMES][IFNAMSIZ];
        size_t n_bridges;
        char parents[NBD_POLICY_MAX_NAMES][IFNAMSIZ];
        size_t n_parents;
        char prefixes[NBD_POLICY_MAX_NAMES][IFNAMSIZ];
        size_t n_prefixes;
        unsigned modes; /* one bit per macvlan mode, in the order of nbd_policy_mode_names */
        bool modes_set;
        unsigned max_devices;
        bool netns_own;
        char *exec[NBD_POLICY_MAX_PROGRAMS];
        unsigned exec_line[NBD_POLICY_MAX_PROGRAMS];
        size_t n_exec;
        /* Lines for the checks made once everything is read (0: none). */
        unsigned create_line; /* the first 'ops' that granted a create op */
        unsigned exec_op_line; /* the 'ops' that granted exec */
        /* Supervised programs: what program_start may start. */
        char *programs[NBD_POLICY_MAX_PROGRAMS];
        unsigned programs_line[NBD_POLICY_MAX_PROGRAMS];
        size_t n_programs;
        unsigned program_op_line; /* the 'ops' that granted program_start */
        /* program_args = any: its programs take any arguments, unchecked
         * (program_args.h); the line, for the check that needs programs. */
        bool program_args_any;
        unsigned program_args_line;
};

struct nbd_policy {
        struct nbd_policy_section **sections; /* in the order read */
        size_t n;
        char **files;
        size_t n_files;
};

/* "bridge", "vepa", "private", "passthru": the order of link.h's
 * enum nbd_macvlan_mode and of the protocol's. */
extern const char *const nbd_policy_mode_names[4];

void nbd_policy_free(struct nbd_policy *p);

/* ---- reading (driven by config.c, one line at a time) ----
 * Each returns 0 or -errno and, on failure, fills e with why (without
 * the "path:line: " that the caller puts before it). */

/* A section starts: header is the text between the brackets ("policy uid
 * 1000"). Users and groups are resolved now. */
int nbd_policy_begin(struct nbd_policy *p, const char *header, const char *file, unsigned line,
                     struct nbd_err *e);
/* A "key = value" line inside the current section. */
int nbd_policy_set(struct nbd_policy *p, const char *key, char *value, unsigned line,
                   struct nbd_err *e);
/* Checks that need everything read (exec_allow may come later in the
 * file): a create op granted without name_prefixes, exec programs not on
 * exec_allow, exec without its op. On error fills e with "path:line: why". */
int nbd_policy_check(const struct nbd_policy *p, const struct nbd_config *c, struct nbd_err *e);

/* ---- queries ---- */

/* The section that applies to peer, or NULL (none, or root). */
const struct nbd_policy_section *nbd_policy_for(const struct nbd_policy *p,
                                                const struct nbd_peer *peer);
/* A section is written for peer's uid or one of its groups. */
bool nbd_policy_admits(const struct nbd_policy *p, const struct nbd_peer *peer);
/* May peer run op (a handler's name, "tap_create")? 0, or -EPERM with a
 * sentence in e that names the uid, the op and what would grant it. */
int nbd_policy_check_op(const struct nbd_policy *p, const struct nbd_peer *peer, const char *op,
                        struct nbd_err *e);
/* May peer Exec path (which is on exec_allow)? 0 or -EPERM, as above. */
int nbd_policy_check_exec(const struct nbd_policy *p, const struct nbd_peer *peer, const char *path,
                          struct nbd_err *e);

/* May peer start supervised program path (on program_allow)? As above. */
int nbd_policy_check_program(const struct nbd_policy *p, const struct nbd_peer *peer,
                             const char *path, struct nbd_err *e);

/* Are peer's program arguments checked (program_args.h)? Not for root,
 * nor where its section says program_args = any. */
bool nbd_policy_checks_program_args(const struct nbd_policy *p, const struct nbd_peer *peer);

bool nbd_policy_may_bridge(const struct nbd_policy_section *s, const char *name);
bool nbd_policy_may_parent(const struct nbd_policy_section *s, const char *name);
bool nbd_policy_may_mode(const struct nbd_policy_section *s, unsigned mode);
/* name (or template) starts with one of the section's name_prefixes. */
bool nbd_policy_may_name(const struct nbd_policy_section *s, const char *name);
/* The name_prefixes, space-separated, for messages. */
void nbd_policy_prefixes(const struct nbd_policy_section *s, char *buf, size_t len);
