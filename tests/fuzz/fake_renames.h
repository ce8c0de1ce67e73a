/* The real link.c and bandwidth.c go into the fake kernel library for
 * their pure functions: nbd_bw_check and the like (the firewall's model and
 * compiler are files of their own, fw_model.c and fw_compile.c, linked as
 * they are, with no renaming; fw_kernel.c stays out). Fuzzing those is the
 * point; faking them would fuzz the fake. Every function of theirs that
 * talks to the kernel is renamed out of the way here (it stays in the
 * object, never called), and fake_kernel.c provides it instead. A kernel
 * function added to those files and called by an op must be added here and
 * to fake_kernel.c, or the fuzzers would call the real one. */
#pragma once

#define nbd_links_open nbd_real_links_open
#define nbd_links_close nbd_real_links_close
#define nbd_links_sync nbd_real_links_sync
#define nbd_links_names nbd_real_links_names
#define nbd_links_on_gone nbd_real_links_on_gone
#define nbd_links_list nbd_real_links_list
#define nbd_links_flush_gone nbd_real_links_flush_gone
#define nbd_links_netlink nbd_real_links_netlink
#define nbd_link_tap_create nbd_real_link_tap_create
#define nbd_link_macvlan_create nbd_real_link_macvlan_create
#define nbd_link_veth_create nbd_real_link_veth_create
#define nbd_link_bridge_create nbd_real_link_bridge_create
#define nbd_link_set nbd_real_link_set
#define nbd_link_delete nbd_real_link_delete
#define nbd_link_is_macvtap nbd_real_link_is_macvtap
#define nbd_link_exists nbd_real_link_exists
#define nbd_link_owner nbd_real_link_owner
#define nbd_links_owned_by nbd_real_links_owned_by
#define nbd_link_get_state nbd_real_link_get_state
#define nbd_link_restore nbd_real_link_restore

#define nbd_bw_open nbd_real_bw_open
#define nbd_bw_close nbd_real_bw_close
#define nbd_bw_mechanisms nbd_real_bw_mechanisms
#define nbd_bw_outbound_available nbd_real_bw_outbound_available
#define nbd_bw_set nbd_real_bw_set
#define nbd_bw_clear nbd_real_bw_clear
#define nbd_bw_get nbd_real_bw_get
#define nbd_bw_link_gone nbd_real_bw_link_gone
#define nbd_bw_sweep nbd_real_bw_sweep
#define nbd_bw_flush nbd_real_bw_flush
