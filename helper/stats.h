// SPDX-License-Identifier: LGPL-2.1-or-later
/* Counters reported by the Stats op. One table, so adding a counter is one
 * line here and one in stats.c. */
#pragma once

#include <stdint.h>

enum nbd_stat {
        NBD_STAT_CONNECTIONS,
        NBD_STAT_CONNECTIONS_REFUSED,
        NBD_STAT_REQUESTS,
        NBD_STAT_REQUESTS_REFUSED,
        NBD_STAT_OPS_PING,
        NBD_STAT_OPS_STATS,
        NBD_STAT_OPS_EXEC,
        NBD_STAT_OPS_LINK,
        NBD_STAT_LINKS_CREATED,
        NBD_STAT_OPS_UNKNOWN,
        NBD_STAT_OP_ERRORS,
        NBD_STAT_SPAWNS,
        NBD_STAT_SPAWN_FAILURES,
        NBD_STAT_EXEC_TIMEOUTS,
        NBD_STAT_NETLINK_MESSAGES,
        NBD_STAT_FRAMES_REFUSED,
        NBD_STAT_OPS_FIREWALL,
        NBD_STAT_FW_TRANSACTIONS,
        NBD_STAT_FW_OWNERS_WRITTEN,
        NBD_STAT_FW_OWNERS_UNCHANGED,
        NBD_STAT_FW_RULES_WRITTEN,
        NBD_STAT_FW_TABLE_DELETED,
        NBD_STAT_FW_OWNERS_GONE, /* removed because their interface went away */
        NBD_STAT_OPS_BANDWIDTH,
        NBD_STAT_OPS_SHOW, /* LinkList, BandwidthShow */
        NBD_STAT_BW_IFB_LOOKUPS, /* an interface's IFB asked of the kernel (bandwidth.c) */
        /* Loop-free reads (issue 14): chain dumps of nftables' netdev
         * family (the firewall's or bandwidth's table: each walks every
         * chain of the family), on any thread (nbd_stat_inc_shared). */
        NBD_STAT_NFT_CHAIN_DUMPS,
        /* nf_tables dumps the kernel interrupted with a commit, each asked
         * again (nfsock.h), on any thread. */
        NBD_STAT_NFT_DUMPS_INTERRUPTED,
        /* Dumps of every rule of the firewall's table (a count, or root's
         * listing with counters): each walks the table again for every
         * message, on any thread. */
        NBD_STAT_NFT_RULE_DUMPS,
        /* Counts of the firewall's rules made chain by chain (a table of
         * thousands of chains: fw_table.c), on any thread. */
        NBD_STAT_NFT_RULE_COUNTS_BY_CHAIN,
        /* A macvtap's device number read from sysfs: its uevent was not
         * there (link.c, uevent.h). */
        NBD_STAT_MACVTAP_SYSFS_READS,
        /* Routes the kernel sent in answer to the helper's route dumps
         * (RouteList, RouteDelete), on any thread: what a listing costs
         * (issue 14). */
        NBD_STAT_ROUTES_DUMPED,
        /* supervised programs */
        NBD_STAT_OPS_PROGRAM,
        NBD_STAT_PROGRAMS_STARTED,
        NBD_STAT_PROGRAMS_EXITED,
        NBD_STAT_PROGRAMS_ADOPTED,
        /* stopped because an interface they served went (program.h) */
        NBD_STAT_PROGRAMS_LINK_GONE,
        /* fds sent to non-root clients (server.c): the polls of those
         * clients while requests wait for fds, and the SIOCOUTQ asked of
         * one connection each, to see whether its client took them. */
        NBD_STAT_FDS_POLLS,
        NBD_STAT_FDS_OUTQ_CHECKS,
        /* Events (server.c): queued to a connection, and not queued
         * because one of the same table still waited unread there. */
        NBD_STAT_EVENTS_SENT,
        NBD_STAT_EVENTS_COALESCED,
        /* Refused ops not in the audit trail: over its rate (audit.h). */
        NBD_STAT_AUDIT_REFUSALS_UNLOGGED,
        /* Log lines dropped because the log's reader did not keep up (the
         * log thread's ring was full: log.h), and of them audit lines; on
         * any thread. */
        NBD_STAT_LOG_LINES_DROPPED,
        NBD_STAT_LOG_AUDIT_LINES_DROPPED,
        NBD_STAT__MAX,
};

extern uint64_t nbd_stats[NBD_STAT__MAX];

const char *nbd_stat_name(enum nbd_stat s);

static inline void nbd_stat_inc(enum nbd_stat s)
{
        nbd_stats[s]++;
}

/* The one way a lane counts: atomically, a counter the loop never writes
 * (the Stats op reads every counter atomically). */
static inline void nbd_stat_inc_shared(enum nbd_stat s)
{
        __atomic_add_fetch(&nbd_stats[s], 1, __ATOMIC_RELAXED);
}
