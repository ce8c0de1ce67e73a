// SPDX-License-Identifier: LGPL-2.1-or-later
/* A netlink dump's reply altered on demand: link with --wrap=recv
 * (tests/CMakeLists.txt), and what the helper's recv() calls return is
 * marked as a dump that a concurrent change interrupted, or ended by a
 * DONE with an errno, as dump_hook.h says. A test cannot make the kernel
 * do either at a chosen moment. Untouched otherwise. */
#include <linux/netlink.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "dump_hook.h"

unsigned nbt_dump_intr, nbt_dump_intr_done;
int nbt_dump_done_err;

ssize_t __real_recv(int fd, void *buf, size_t len, int flags);
ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags);

ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags)
{
        ssize_t got = __real_recv(fd, buf, len, flags);
        size_t left = got > 0 ? ((size_t)got < len ? (size_t)got : len) : 0;
        bool done = false;

        for (struct nlmsghdr *h = buf; left >= sizeof(*h) && NLMSG_OK(h, left);
             h = NLMSG_NEXT(h, left)) {
                if (!(h->nlmsg_flags & NLM_F_MULTI))
                        continue;
                done |= h->nlmsg_type == NLMSG_DONE;
                if (nbt_dump_intr || (nbt_dump_intr_done && h->nlmsg_type == NLMSG_DONE))
                        h->nlmsg_flags |= NLM_F_DUMP_INTR;
                if (h->nlmsg_type == NLMSG_DONE && nbt_dump_done_err < 0 &&
                    h->nlmsg_len >= NLMSG_LENGTH(sizeof(int))) {
                        *(int *)NLMSG_DATA(h) = nbt_dump_done_err;
                        nbt_dump_done_err = 0;
                }
        }
        if (done && nbt_dump_intr)
                nbt_dump_intr--;
        else if (done && nbt_dump_intr_done)
                nbt_dump_intr_done--;
        return got;
}
