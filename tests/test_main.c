/* test-helper: runs the helper as a real process. As root it first moves
 * into a private network namespace, so nothing the helper or a program it
 * runs does can touch the host's network. */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"

int main(int argc, char **argv)
{
        SRunner *sr;
        int failed;

        if (geteuid() != 0) {
                fprintf(stderr, "test-helper: needs root (peer-uid checks, capabilities, /proc)\n");
                return 1;
        }
        if (unshare(CLONE_NEWNET) < 0) {
                perror("test-helper: unshare(CLONE_NEWNET)");
                return 1;
        }
        sr = srunner_create(protocol_suite());
        srunner_add_suite(sr, exec_suite());
        srunner_add_suite(sr, ctl_suite());
        srunner_add_suite(sr, link_suite());
        srunner_add_suite(sr, firewall_suite());
        srunner_add_suite(sr, bandwidth_suite());
        srunner_add_suite(sr, limits_suite());
        if (argc > 1)
                srunner_run(sr, NULL, argv[1], CK_NORMAL); /* run one test case */
        else
                srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
