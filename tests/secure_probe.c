// SPDX-License-Identifier: LGPL-2.1-or-later
/* nb_spawn() with no helper path, as a daemon linked against libnetbroker
 * calls it, for tests/test_helper.c: that test runs a copy of this program
 * with a file capability as another user (secure-execution mode) and
 * without, NETBROKERD naming a program that leaves a mark. Prints
 * "secure=N spawn=R" (getauxval(AT_SECURE), nb_spawn's return), so the test
 * knows which mode the kernel gave it. */
#include <stdio.h>
#include <sys/auxv.h>

#include "netbroker.h"

int main(void)
{
        nb_conn *c = NULL;
        int r = nb_spawn(NULL, NULL, &c);

        if (r == 0)
                nb_close(c);
        printf("secure=%lu spawn=%d\n", getauxval(AT_SECURE), r);
        return 0;
}
