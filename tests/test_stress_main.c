// SPDX-License-Identifier: LGPL-2.1-or-later
/* test-stress: the load and crash-recovery tests. As root it first moves
 * into a private network namespace (and each test into one more of its
 * own), so nothing the helper does can touch the host's network.
 *
 * NB_LOAD_SECONDS (default 60) sets how long the load runs; NB_CRASH_ROUNDS
 * (default 50) how many times the helper is killed. */
#include <stdlib.h>

#include "stress.h"
#include "testutil.h"

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
        static Suite *(*const suites[])(void) = {load_suite, crash_suite, NULL};

        return tu_main_in_netns("test-stress", "namespaces, /proc of the helper", argc, argv,
                                suites);
}
