/* The real link.c, firewall.c and bandwidth.c go into the fake kernel
 * library for their pure functions: the firewall's parsers, rule checker and
 * compiler (nb_fw_hash), nb_bw_check. Fuzzing those is the
 * point; faking them would fuzz the fake. Every function of theirs that
 * talks to the kernel is renamed out of the way here (it stays in the
 * object, never called), and fake_kernel.c provides it instead. A kernel
 * function added to those files and called by an op must be added here and
 * to fake_kernel.c, or the fuzzers would call the real one. */
#pragma once

#define nb_links_open nb_real_links_open
#define nb_links_close nb_real_links_close
#define nb_links_sync nb_real_links_sync
#define nb_links_names nb_real_links_names
#define nb_links_on_gone nb_real_links_on_gone
#define nb_links_list nb_real_links_list
#define nb_links_flush_gone nb_real_links_flush_gone
#define nb_links_netlink nb_real_links_netlink
#define nb_link_tap_create nb_real_link_tap_create
#define nb_link_macvlan_create nb_real_link_macvlan_create
#define nb_link_veth_create nb_real_link_veth_create
#define nb_link_bridge_create nb_real_link_bridge_create
#define nb_link_set nb_real_link_set
#define nb_link_delete nb_real_link_delete
#define nb_link_is_macvtap nb_real_link_is_macvtap
#define nb_link_exists nb_real_link_exists
#define nb_link_owner nb_real_link_owner
#define nb_links_owned_by nb_real_links_owned_by
#define nb_link_get_state nb_real_link_get_state
#define nb_link_restore nb_real_link_restore

#define nb_fw_open nb_real_fw_open
#define nb_fw_close nb_real_fw_close
#define nb_fw_txn_begin nb_real_fw_txn_begin
#define nb_fw_txn_apply nb_real_fw_txn_apply
#define nb_fw_txn_remove nb_real_fw_txn_remove
#define nb_fw_txn_commit nb_real_fw_txn_commit
#define nb_fw_txn_free nb_real_fw_txn_free
#define nb_fw_list nb_real_fw_list

#define nb_bw_open nb_real_bw_open
#define nb_bw_close nb_real_bw_close
#define nb_bw_mechanisms nb_real_bw_mechanisms
#define nb_bw_outbound_available nb_real_bw_outbound_available
#define nb_bw_set nb_real_bw_set
#define nb_bw_clear nb_real_bw_clear
#define nb_bw_get nb_real_bw_get
#define nb_bw_link_gone nb_real_bw_link_gone
#define nb_bw_sweep nb_real_bw_sweep
#define nb_bw_flush nb_real_bw_flush
