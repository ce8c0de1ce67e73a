// SPDX-License-Identifier: LGPL-2.1-or-later
/* The loop's kept nfnetlink socket; see nfsock.h. */
#include "nfsock.h"
#include "lane.h" /* nbd_test_hold_point */

#include <errno.h>
#include <stdbool.h>
#include <linux/netlink.h>
#include <sys/socket.h>

static struct mnl_socket *kept;

bool nbd_nfsock_drain(int fd)
{
        char buf[256];

        while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC) >= 0 || errno == EINTR ||
               errno == ENOBUFS)
                ;
        return errno == EAGAIN;
}

int nbd_nfsock_get(struct mnl_socket **ret)
{
        int one = 1, big = 4 << 20;

        /* Each call reads what it asked for to the end; one an error
         * stopped may have left some, which is no later call's. What
         * cannot be read out costs a new socket (and this once the
         * close's wait). */
        if (kept && !nbd_nfsock_drain(mnl_socket_get_fd(kept)))
                nbd_nfsock_close();
        if (!kept) {
                struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
                if (!nl)
                        return -errno;
                if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                        int r = -errno;
                        mnl_socket_close(nl);
                        return r;
                }
                /* Short acks, and room for one per chain of a large prune:
                 * an ack the kernel drops might have been the error. */
                setsockopt(mnl_socket_get_fd(nl), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
                setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
                kept = nl;
        }
        *ret = kept;
        nbd_test_hold_point("NFSOCK");
        return 0;
}

void nbd_nfsock_close(void)
{
        if (kept)
                mnl_socket_close(kept);
        kept = NULL;
}
