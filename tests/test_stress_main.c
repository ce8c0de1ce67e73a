/* test-stress: the load and crash-recovery tests. As root it first moves
 * into a private network namespace (and each test into one more of its
 * own), so nothing the helper does can touch the host's network.
 *
 * NB_LOAD_SECONDS (default 60) sets how long the load runs; NB_CRASH_ROUNDS
 * (default 50) how many times the helper is killed. */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stress.h"

unsigned stress_env_seconds(const char *name, unsigned def)
{
        const char *v = getenv(name);
        char *end;
        unsigned long n;

        if (!v || !*v)
                return def;
        n = strtoul(v, &end, 10);
        return *end || n == 0 || n > 3600 ? def : (unsigned)n;
}

int main(int argc, char **argv)
{
        SRunner *sr;
        int failed;

        if (geteuid() != 0) {
                fprintf(stderr, "test-stress: needs root (namespaces, /proc of the helper)\n");
                return 1;
        }
        if (unshare(CLONE_NEWNET) < 0) {
                perror("test-stress: unshare(CLONE_NEWNET)");
                return 1;
        }
        sr = srunner_create(load_suite());
        srunner_add_suite(sr, crash_suite());
        if (argc > 1)
                srunner_run(sr, NULL, argv[1], CK_NORMAL); /* run one test case */
        else
                srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
