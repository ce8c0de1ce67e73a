// SPDX-License-Identifier: LGPL-2.1-or-later
/* The test-helper binary's suites. */
#pragma once

#include <check.h>

Suite *protocol_suite(void);
Suite *exec_suite(void);
Suite *ctl_suite(void);
Suite *link_suite(void);
Suite *firewall_suite(void);
Suite *bandwidth_suite(void);
Suite *bw_filter_suite(void);
Suite *limits_suite(void);
Suite *hostile_suite(void);
Suite *hostile_user_suite(void);
Suite *policy_suite(void);
Suite *show_suite(void);
Suite *fw_counters_suite(void);
Suite *fw_scale_suite(void);
Suite *names_suite(void);
Suite *lanes_suite(void);
Suite *systemd_suite(void);
Suite *evloop_suite(void);
/* A VM start in one batch (session 8): op references, macvtap queues. */
Suite *vmbatch_suite(void);
/* idempotent clean-up, the empty table, connect deadlines (issue 15) */
Suite *cleanup_suite(void);
Suite *events_suite(void);
/* Ensure by hash (issue 14). */
Suite *fw_hash_suite(void);
/* virtual networks, part 1 */
Suite *addr_suite(void);
/* virtual networks: network firewall owners */
Suite *net_suite(void);
/* supervised programs */
Suite *program_suite(void);
/* a macvtap's device number from its uevent (issue 14: names) */
Suite *macvtap_devt_suite(void);
