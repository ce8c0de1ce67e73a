// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall's table as the kernel holds it: our owners, their chains
 * and the comment their base chains carry, read with a dump. Shared by the
 * kernel side only (fw_table.c reads, fw_kernel.c's transactions use what
 * was read); callers see fw_kernel.h. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "fw_kernel.h"
#include "fw_model.h"
#include "loop.h"

struct nftnl_udata;

struct nbd_fw {
        struct mnl_socket *nl; /* requests and dumps */
        bool nl_borrowed; /* nl is the lane's (nbd_fw_lane_open): not closed with it */
        struct mnl_socket *mon; /* NFNLGRP_NFTABLES: our table being deleted */
        struct nbd_loop *loop;
        struct nbd_watch monw;
        uint32_t seq;
        /* The kernel's ruleset generation, as of the last NEWGEN the
         * monitor read; unknown after the monitor lost events (ENOBUFS: a
         * NEWGEN read after it may be older than one lost). */
        uint32_t gen;
        bool gen_known;
        unsigned mon_epoch; /* nbd_fw_monitor_heard()'s, at the last check */
        bool can_mark; /* the kernel has the arp family (probed at open) */
        /* nbd_fw_on_table_deleted()'s; NULL: none. */
        nbd_fw_table_deleted_fn table_deleted;
        void *table_deleted_data;
        /* The notice of a deletion: when last logged, and whether some
         * came since that were not (one line a second). */
        uint64_t deleted_logged_us;
        bool deleted_unlogged;
};

struct nbd_fw_owner_state {
        char owner[NBD_FW_OWNER_MAX + 1];
        char ifname[IFNAMSIZ];
        char hash[NBD_FW_HASH_HEX];
        unsigned rules;
        unsigned uid; /* its creator, from the comment (0 when it names none) */
        bool has_base;
        char **chains; /* base chains first, then group chains */
        unsigned *chain_rules; /* rules in each chain, when counted */
        size_t n_chains;
        unsigned kernel_rules; /* rules in its group chains, when counted */
        bool touched; /* an op of this transaction queued a change */
        uint32_t age; /* its key in the summary: higher is newer */
        struct nbd_fw_owner_state *next; /* every owner */
        struct nbd_fw_owner_state *hnext; /* the next in its bucket */
};

/* Our owners as read, in a list for walks and a hash table by name: a
 * batch of thousands of owners finds each in constant time. */
struct nbd_fw_owners {
        struct nbd_fw_owner_state *list;
        struct nbd_fw_owner_state **buckets;
        size_t n, n_buckets;
        /* The generation our last commit made, when it knew the table
         * whole (NBD_FW_GEN_TABLE's chain): while the kernel's ruleset
         * generation still is that, nobody has changed anything since, and
         * every owner's rules are what its comment says. */
        bool marked;
        uint32_t mark;
        /* Chains of our table that are no owner's (no '/': someone
         * else's, never touched): while there is one, the table stays
         * when the last owner goes (the kernel says so after the commit:
         * fw_kernel.c, drop_if_empty), and so does the mark
         * (leaves_table_empty). */
        size_t foreign;
};

/* Where the generation mark lives: a table of its own, so that ours holds
 * owners' chains only; its one chain's comment is "netbroker generation N".
 * In the arp family: nft (1.0.6) lists a table by dumping every rule of its
 * family, so a netdev table would double what `nft list ruleset` reads. */
#define NBD_FW_GEN_TABLE "netbroker_gen"
#define NBD_FW_GEN_FAMILY NFPROTO_ARP
#define NBD_FW_GEN_CHAIN "generation"

void nbd_fw_owners_free(struct nbd_fw_owners *o);
/* Put o (allocated, its owner set) in the table, which doubles when it has
 * as many owners as buckets: 0 or -ENOMEM, with o in neither list nor
 * table. nbd_fw_owners_free() frees it. */
int nbd_fw_owners_add(struct nbd_fw_owners *o, struct nbd_fw_owner_state *state);
struct nbd_fw_owner_state *nbd_fw_owner_find(const struct nbd_fw_owners *o, const char *owner);
/* The same, for an owner named by the first len bytes of name. */
struct nbd_fw_owner_state *nbd_fw_owner_find_n(const struct nbd_fw_owners *o, const char *name,
                                               size_t len);
/* A base chain's comment (or the summary's, fw_summary.h) into o's hash,
 * ifname, rules and uid ("netbroker HASH IFNAME RULES uid=UID"; without
 * the uid, from before, 0): whether it had at least the first three. */
bool nbd_fw_parse_owner_comment(struct nbd_fw_owner_state *o, const char *text);
/* Our owners as their chains show them: 0, or -errno with *ret untouched. */
int nbd_fw_read_owners(struct nbd_fw *fw, struct nbd_fw_owners *ret);
/* Count the rules in each of the owners' chains (what ensure compares):
 * 0 or -errno. */
int nbd_fw_count_rules(struct nbd_fw *fw, struct nbd_fw_owners *owners);
/* The kernel's ruleset generation (NFT_MSG_GETGEN): bumped by every commit
 * of anyone's in this network namespace. 0 or -errno. */
int nbd_fw_read_gen(struct nbd_fw *fw, uint32_t *ret);
/* The same on any nfnetlink socket, *seq advanced. */
int nbd_fw_read_gen_on(struct mnl_socket *nl, uint32_t *seq, uint32_t *ret);
/* Does our table hold nothing of anyone's, the shared set aside (no
 * chain, no other set, object or flowtable)? On any nfnetlink socket, *seq
 * advanced; one or two requests, whatever the table's size. 0, -ENOENT
 * when there is no table, or -errno. */
int nbd_fw_table_empty_on(struct mnl_socket *nl, uint32_t *seq, bool *ret);
/* The generation now: the monitor's events read to the end (every commit
 * finished by now has sent its NEWGEN there), and a GETGEN only when they
 * were lost. 0 or -errno. */
int nbd_fw_current_gen(struct nbd_fw *fw, uint32_t *ret);
/* Read what the monitor has queued (fw_kernel.c). */
void nbd_fw_monitor_drain(struct nbd_fw *fw);
/* Has the monitor heard every commit since *epoch (fw_kernel.c)? Not
 * while one of our sends has it out of its group, nor if it could not
 * join again; *epoch is set to now. */
bool nbd_fw_monitor_heard(unsigned *epoch);
/* Fill e for a failed nbd_fw_read_owners (rules false) or
 * nbd_fw_count_rules (rules true); returns r. */
int nbd_fw_read_failed(struct nbd_err *e, int r, bool rules);
/* nftnl_udata_parse() of len bytes at data, after checking that every
 * type-length-value in them fits: libnftnl's walk trusts each length, and
 * anyone with CAP_NET_ADMIN in the namespace writes these comments.
 * -EINVAL, cb never called, when one does not fit. */
int nbd_fw_udata_parse(const void *data, uint32_t len,
                       int (*cb)(const struct nftnl_udata *attr, void *data), void *arg);
