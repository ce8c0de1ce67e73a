// SPDX-License-Identifier: LGPL-2.1-or-later
/* The real backend table; see backend.h. */
#include "backend.h"

#include "bandwidth.h"
#include "bandwidth_show.h"
#include "bridge_port.h"
#include "fw_kernel.h"
#include "link.h"
#include "link_show.h"
#include "spawn.h"

const struct nbd_backend nbd_kernel_backend = {
        .links =
                {
                        .open = nbd_links_open,
                        .close = nbd_links_close,
                        .sync = nbd_links_sync,
                        .hold = nbd_links_hold,
                        .names = nbd_links_names,
                        .flush_gone = nbd_links_flush_gone,
                        .netlink = nbd_links_netlink,
                        .tap_create = nbd_link_tap_create,
                        .macvlan_create = nbd_link_macvlan_create,
                        .veth_create = nbd_link_veth_create,
                        .bridge_create = nbd_link_bridge_create,
                        .set = nbd_link_set,
                        .delete = nbd_link_delete,
                        .delete_index = nbd_link_delete_index,
                        .doom = nbd_link_doom,
                        .undoom = nbd_link_undoom,
                        .delete_group = nbd_link_delete_group,
                        .is_macvtap = nbd_link_is_macvtap,
                        .exists = nbd_link_exists,
                        .owner = nbd_link_owner,
                        .owned_by = nbd_links_owned_by,
                        .ifindex = nbd_links_ifindex,
                        .owned_ifindexes = nbd_links_owned_ifindexes,
                        .get_state = nbd_link_get_state,
                        .restore = nbd_link_restore,
                        .show = nbd_link_show,
                        .show_own = nbd_link_show_own,
                },
        .bw =
                {
                        .open = nbd_bw_open,
                        .close = nbd_bw_close,
                        .mechanisms = nbd_bw_mechanisms,
                        .outbound_available = nbd_bw_outbound_available,
                        .set = nbd_bw_set,
                        .flush = nbd_bw_flush,
                        .change_begin = nbd_bw_change_begin,
                        .change_nft = nbd_bw_change_nft,
                        .change_end = nbd_bw_change_end,
                        .change_free = nbd_bw_change_free,
                        .show = nbd_bw_show,
                },
        .fw =
                {
                        .open = nbd_fw_open,
                        .close = nbd_fw_close,
                        .on_table_deleted = nbd_fw_on_table_deleted,
                        .txn_begin = nbd_fw_txn_begin,
                        .txn_apply = nbd_fw_txn_apply,
                        .txn_remove = nbd_fw_txn_remove,
                        .txn_commit = nbd_fw_txn_commit,
                        .txn_commit_prepare = nbd_fw_txn_commit_prepare,
                        .txn_commit_send = nbd_fw_txn_commit_send,
                        .txn_commit_finish = nbd_fw_txn_commit_finish,
                        .txn_free = nbd_fw_txn_free,
                        .list = nbd_fw_list,
                        .list_creators = nbd_fw_list_creators,
                        .list_creators_marked = nbd_fw_list_creators_marked,
                        .read_creator = nbd_fw_read_creator,
                        .lane_open = nbd_fw_lane_open,
                        .lane_close = nbd_fw_lane_close,
                        .txn_remove_bound = nbd_fw_txn_remove_bound,
                        .list_rules = nbd_fw_list_rules,
                        .txn_check_hash = nbd_fw_txn_check_hash,
                        .txn_rebind = nbd_fw_txn_rebind,
                        .txn_chains_later = nbd_fw_txn_chains_later,
                        .txn_chains_wanted = nbd_fw_txn_chains_wanted,
                        .txn_read_chains = nbd_fw_txn_read_chains,
                        .txn_join = nbd_fw_txn_join,
                },
        .spawn =
                {
                        .spawn = nbd_child_spawn,
                        .result = nbd_child_result,
                        .free = nbd_child_free,
                        .abandon = nbd_child_abandon,
                        .running = nbd_children_running,
                        .running_of = nbd_children_running_of,
                        .on_reaped = nbd_children_on_reaped,
                },
        .net =
                {
                        .addr_add = nbd_addr_add,
                        .addr_delete = nbd_addr_delete,
                        .addr_dump = nbd_addr_dump,
                        .addr_names = nbd_addr_names,
                        .route_add = nbd_route_add,
                        .route_delete = nbd_route_delete,
                        .route_restore = nbd_route_restore,
                        .route_saved_free = nbd_route_saved_free,
                        .route_list = nbd_route_list,
                        .route_names = nbd_route_names,
                        .sysctl_get = nbd_sysctl_get,
                        .sysctl_set = nbd_sysctl_set,
                        .bropt_get = nbd_bropt_get,
                        .bropt_set = nbd_bropt_set,
                        .fdb_has = nbd_bridge_fdb_has,
                        .bridge_pin_addr = nbd_bridge_pin_addr,
                },
};
