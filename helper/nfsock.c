// SPDX-License-Identifier: LGPL-2.1-or-later
/* Kept nfnetlink sockets; see nfsock.h. */
#include "nfsock.h"
#include "lane.h" /* nbd_test_hold_point */

#include <errno.h>
#include <linux/netlink.h>
#include <stdbool.h>
#include <sys/socket.h>

static struct nbd_nfsock loop_sock;

/* A leftover dump is read to its end in this many datagrams at most (a
 * 4,096-guest table's chains take some 1,300 of 32 KiB). */
#define DRAIN_MAX 65536

/* Read fd until it is empty: true; false when it could not be emptied:
 * a read failed, or lost messages (ENOBUFS: a dump the kernel could not
 * go on with stays running, and the next dump would be refused), or it
 * did not end. */
static bool drain(int fd)
{
        char buf[256];

        for (unsigned i = 0; i < DRAIN_MAX; i++) {
                if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC) >= 0 || errno == EINTR)
                        continue;
                return errno == EAGAIN;
        }
        return false;
}

int nbd_nfsock_take(struct nbd_nfsock *k, struct mnl_socket **ret)
{
        int one = 1, big = 4 << 20;

        if (k->nl && !drain(mnl_socket_get_fd(k->nl)))
                nbd_nfsock_drop(k);
        if (!k->nl) {
                /* Connected to the kernel: no other port of the namespace
                 * can send it anything (a kept socket's port is known for
                 * the helper's life). */
                const struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
                struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
                if (!nl)
                        return -errno;
                if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ||
                    connect(mnl_socket_get_fd(nl), (const struct sockaddr *)&kernel,
                            sizeof(kernel)) < 0) {
                        int r = -errno;
                        mnl_socket_close(nl);
                        return r;
                }
                /* Short acks, and room for one per chain of a large prune:
                 * an ack the kernel drops might have been the error. */
                setsockopt(mnl_socket_get_fd(nl), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
                setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
                k->nl = nl;
        }
        *ret = k->nl;
        return 0;
}

void nbd_nfsock_drop(struct nbd_nfsock *k)
{
        if (k->nl)
                mnl_socket_close(k->nl);
        k->nl = NULL;
}

int nbd_nfsock_get(struct mnl_socket **ret)
{
        int r = nbd_nfsock_take(&loop_sock, ret);

        if (r == 0)
                nbd_test_hold_point("NFSOCK");
        return r;
}

void nbd_nfsock_close(void)
{
        nbd_nfsock_drop(&loop_sock);
}
