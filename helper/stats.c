#include "stats.h"

uint64_t nb_stats[NB_STAT__MAX];

static const char *const names[NB_STAT__MAX] = {
        [NB_STAT_CONNECTIONS] = "connections",
        [NB_STAT_CONNECTIONS_REFUSED] = "connections_refused",
        [NB_STAT_REQUESTS] = "requests",
        [NB_STAT_REQUESTS_REFUSED] = "requests_refused",
        [NB_STAT_OPS_PING] = "ops_ping",
        [NB_STAT_OPS_STATS] = "ops_stats",
        [NB_STAT_OPS_EXEC] = "ops_exec",
        [NB_STAT_OPS_LINK] = "ops_link",
        [NB_STAT_LINKS_CREATED] = "links_created",
        [NB_STAT_OPS_UNKNOWN] = "ops_unknown",
        [NB_STAT_OP_ERRORS] = "op_errors",
        [NB_STAT_SPAWNS] = "spawns",
        [NB_STAT_SPAWN_FAILURES] = "spawn_failures",
        [NB_STAT_EXEC_TIMEOUTS] = "exec_timeouts",
        [NB_STAT_NETLINK_MESSAGES] = "netlink_messages",
        [NB_STAT_FRAMES_REFUSED] = "frames_refused",
        [NB_STAT_OPS_FIREWALL] = "ops_firewall",
        [NB_STAT_FW_TRANSACTIONS] = "fw_transactions",
        [NB_STAT_FW_OWNERS_WRITTEN] = "fw_owners_written",
        [NB_STAT_FW_OWNERS_UNCHANGED] = "fw_owners_unchanged",
        [NB_STAT_FW_RULES_WRITTEN] = "fw_rules_written",
        [NB_STAT_FW_TABLE_DELETED] = "fw_table_deleted",
        [NB_STAT_FW_OWNERS_GONE] = "fw_owners_gone",
        [NB_STAT_OPS_BANDWIDTH] = "ops_bandwidth",
};

const char *nb_stat_name(enum nb_stat s)
{
        return names[s];
}
