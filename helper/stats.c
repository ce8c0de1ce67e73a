// SPDX-License-Identifier: LGPL-2.1-or-later
#include "stats.h"

uint64_t nbd_stats[NBD_STAT__MAX];

static const char *const names[NBD_STAT__MAX] = {
        [NBD_STAT_CONNECTIONS] = "connections",
        [NBD_STAT_CONNECTIONS_REFUSED] = "connections_refused",
        [NBD_STAT_REQUESTS] = "requests",
        [NBD_STAT_REQUESTS_REFUSED] = "requests_refused",
        [NBD_STAT_OPS_PING] = "ops_ping",
        [NBD_STAT_OPS_STATS] = "ops_stats",
        [NBD_STAT_OPS_EXEC] = "ops_exec",
        [NBD_STAT_OPS_LINK] = "ops_link",
        [NBD_STAT_LINKS_CREATED] = "links_created",
        [NBD_STAT_OPS_UNKNOWN] = "ops_unknown",
        [NBD_STAT_OP_ERRORS] = "op_errors",
        [NBD_STAT_SPAWNS] = "spawns",
        [NBD_STAT_SPAWN_FAILURES] = "spawn_failures",
        [NBD_STAT_EXEC_TIMEOUTS] = "exec_timeouts",
        [NBD_STAT_NETLINK_MESSAGES] = "netlink_messages",
        [NBD_STAT_FRAMES_REFUSED] = "frames_refused",
        [NBD_STAT_OPS_FIREWALL] = "ops_firewall",
        [NBD_STAT_FW_TRANSACTIONS] = "fw_transactions",
        [NBD_STAT_FW_OWNERS_WRITTEN] = "fw_owners_written",
        [NBD_STAT_FW_OWNERS_UNCHANGED] = "fw_owners_unchanged",
        [NBD_STAT_FW_RULES_WRITTEN] = "fw_rules_written",
        [NBD_STAT_FW_TABLE_DELETED] = "fw_table_deleted",
        [NBD_STAT_FW_OWNERS_GONE] = "fw_owners_gone",
        [NBD_STAT_OPS_BANDWIDTH] = "ops_bandwidth",
        [NBD_STAT_OPS_SHOW] = "ops_show",
        [NBD_STAT_BW_IFB_LOOKUPS] = "bw_ifb_lookups",
        [NBD_STAT_NFT_CHAIN_DUMPS] = "nft_chain_dumps",
        [NBD_STAT_NFT_DUMPS_INTERRUPTED] = "nft_dumps_interrupted",
        [NBD_STAT_NFT_RULE_DUMPS] = "nft_rule_dumps",
        [NBD_STAT_NFT_RULE_COUNTS_BY_CHAIN] = "nft_rule_counts_by_chain",
        [NBD_STAT_MACVTAP_SYSFS_READS] = "macvtap_sysfs_reads",
        [NBD_STAT_ROUTES_DUMPED] = "routes_dumped",
        [NBD_STAT_OPS_PROGRAM] = "ops_program",
        [NBD_STAT_PROGRAMS_STARTED] = "programs_started",
        [NBD_STAT_PROGRAMS_EXITED] = "programs_exited",
        [NBD_STAT_PROGRAMS_ADOPTED] = "programs_adopted",
        [NBD_STAT_PROGRAMS_LINK_GONE] = "programs_link_gone",
        [NBD_STAT_FDS_POLLS] = "fds_polls",
        [NBD_STAT_FDS_OUTQ_CHECKS] = "fds_outq_checks",
        [NBD_STAT_EVENTS_SENT] = "events_sent",
        [NBD_STAT_EVENTS_COALESCED] = "events_coalesced",
        [NBD_STAT_AUDIT_REFUSALS_UNLOGGED] = "audit_refusals_unlogged",
        [NBD_STAT_LOG_LINES_DROPPED] = "log_lines_dropped",
        [NBD_STAT_LOG_AUDIT_LINES_DROPPED] = "log_audit_lines_dropped",
};

const char *nbd_stat_name(enum nbd_stat s)
{
        return names[s];
}
