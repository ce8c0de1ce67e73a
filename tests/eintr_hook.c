// SPDX-License-Identifier: LGPL-2.1-or-later
/* recvmmsg() interrupted on demand: link with --wrap=recvmmsg
 * (tests/CMakeLists.txt), and the helper's calls to it (link.c's monitor)
 * fail with EINTR as many times as nbt_recvmmsg_eintr says, first thing,
 * reading nothing. A signal does that to a blocking call; a test cannot
 * time one into a non-blocking call. */
#include <errno.h>
#include <sys/socket.h>

#include "eintr_hook.h"

unsigned nbt_recvmmsg_eintr;
unsigned long nbt_recvmmsg_calls;

int __real_recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t);
int __wrap_recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t);

int __wrap_recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t)
{
        nbt_recvmmsg_calls++;
        if (nbt_recvmmsg_eintr > 0) {
                nbt_recvmmsg_eintr--;
                errno = EINTR;
                return -1;
        }
        return __real_recvmmsg(fd, v, n, flags, t);
}
