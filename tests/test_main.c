// SPDX-License-Identifier: LGPL-2.1-or-later
/* test-helper: runs the helper as a real process. As root it first moves
 * into a private network namespace, so nothing the helper or a program it
 * runs does can touch the host's network. */
#include "testutil.h"
#include "tests.h"

int main(int argc, char **argv)
{
        static Suite *(*const suites[])(void) = {
                protocol_suite,
                exec_suite,
                ctl_suite,
                link_suite,
                firewall_suite,
                bandwidth_suite,
                bw_filter_suite,
                limits_suite,
                hostile_suite,
                hostile_user_suite,
                policy_suite,
                show_suite,
                fw_counters_suite,
                fw_scale_suite,
                names_suite,
                lanes_suite,
                systemd_suite,
                evloop_suite,
                vmbatch_suite, /* session 8: a VM start in
                                  one batch */
                cleanup_suite,
                fw_hash_suite,
                addr_suite,
                net_suite,
                program_suite,
                macvtap_devt_suite,
                events_suite, /* a table deleted behind the helper's back */
                NULL,
        };

        return tu_main_in_netns("test-helper", "peer-uid checks, capabilities, /proc", argc, argv,
                                suites);
}
