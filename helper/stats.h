/* Counters reported by the Stats op. One table, so adding a counter is one
 * line here and one in stats.c. */
#pragma once

#include <stdint.h>

enum nb_stat {
        NB_STAT_CONNECTIONS,
        NB_STAT_CONNECTIONS_REFUSED,
        NB_STAT_REQUESTS,
        NB_STAT_REQUESTS_REFUSED,
        NB_STAT_OPS_PING,
        NB_STAT_OPS_STATS,
        NB_STAT_OPS_EXEC,
        NB_STAT_OPS_LINK,
        NB_STAT_LINKS_CREATED,
        NB_STAT_OPS_UNKNOWN,
        NB_STAT_OP_ERRORS,
        NB_STAT_SPAWNS,
        NB_STAT_SPAWN_FAILURES,
        NB_STAT_EXEC_TIMEOUTS,
        NB_STAT_NETLINK_MESSAGES,
        NB_STAT_FRAMES_REFUSED,
        NB_STAT_OPS_FIREWALL,
        NB_STAT_FW_TRANSACTIONS,
        NB_STAT_FW_OWNERS_WRITTEN,
        NB_STAT_FW_OWNERS_UNCHANGED,
        NB_STAT_FW_RULES_WRITTEN,
        NB_STAT_FW_TABLE_DELETED,
        NB_STAT_FW_OWNERS_GONE, /* removed because their interface went away */
        NB_STAT_OPS_BANDWIDTH,
        NB_STAT__MAX,
};

extern uint64_t nb_stats[NB_STAT__MAX];

const char *nb_stat_name(enum nb_stat s);

static inline void nb_stat_inc(enum nb_stat s)
{
        nb_stats[s]++;
}
