// SPDX-License-Identifier: LGPL-2.1-or-later
/* Kept nfnetlink sockets; see nfsock.h. */
#include "nfsock.h"
#include "lane.h" /* nbd_test_hold_point */
#include "stats.h"

#include <errno.h>
#include <string.h>
#include <linux/netlink.h>
#include <stdbool.h>
#include <sys/socket.h>

static struct nbd_nfsock loop_sock;
static struct nbd_nfsock lane_sock;

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

int nbd_nfsock_read_answer(struct mnl_socket *nl, char *buf, size_t size, uint32_t seq, mnl_cb_t cb,
                           void *data)
{
        uint32_t portid = mnl_socket_get_portid(nl);
        int kernel = 0, failed = 0;
        bool intr = false;

        /* Not mnl_cb_run(): it stops at the first flagged message, and the
         * DONE may be in the very datagram it stopped in, or still to
         * come. A reader that then waited for the DONE waited for ever when
         * it had already come (a firewall lane did, with the helper's
         * shutdown waiting on it). */
        for (;;) {
                /* MSG_TRUNC: the datagram's whole length, to see one cut. */
                ssize_t n = recv(mnl_socket_get_fd(nl), buf, size, MSG_TRUNC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if ((size_t)n > size)
                        return -ENOSPC;
                int len = (int)n; /* at most size: NBD_NFSOCK_DUMP_BUF */
                for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; mnl_nlmsg_ok(h, len);
                     h = mnl_nlmsg_next(h, &len)) {
                        if (h->nlmsg_seq != seq || h->nlmsg_pid != portid)
                                continue; /* an earlier request's, or not ours */
                        if (h->nlmsg_flags & NLM_F_DUMP_INTR)
                                intr = true;
                        if (h->nlmsg_type == NLMSG_DONE) {
                                /* A dump the kernel could not finish ends
                                 * in DONE too, with its errno. */
                                if (h->nlmsg_len >= mnl_nlmsg_size(sizeof(int)))
                                        kernel = *(const int *)mnl_nlmsg_get_payload(h);
                                goto end;
                        }
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                                if (h->nlmsg_len < mnl_nlmsg_size(sizeof(*e)))
                                        kernel = -EBADMSG;
                                else
                                        kernel = e->error;
                                goto end;
                        }
                        if (h->nlmsg_type < NLMSG_MIN_TYPE || intr || failed || !cb)
                                continue;
                        /* MNL_CB_STOP is taken as MNL_CB_OK: the answer is
                         * read to its end all the same. */
                        errno = 0;
                        if (cb(h, data) == MNL_CB_ERROR)
                                failed = errno ? -errno : -EIO;
                }
        }
end:
        return kernel < 0 ? kernel : failed ? failed : intr ? -EINTR : 0;
}

int nbd_nfsock_dump_tries(int (*once)(void *data), void *data)
{
        int r = -EINTR;

        for (int i = 0; i < NBD_NFSOCK_DUMP_TRIES && r == -EINTR; i++) {
                if (i > 0)
                        nbd_stat_inc_shared(NBD_STAT_NFT_DUMPS_INTERRUPTED);
                r = once(data);
        }
        if (r == -EINTR)
                nbd_stat_inc_shared(NBD_STAT_NFT_DUMPS_INTERRUPTED);
        return r == -EINTR ? -EAGAIN : r;
}

#define STR_(x) #x
#define STR(x) STR_(x)

const char *nbd_nfsock_strerror(int r)
{
        if (r == -EAGAIN)
                return "it kept changing while it was read (each of " STR(
                        NBD_NFSOCK_DUMP_TRIES) " tries was interrupted by a commit): try again";
        return strerror(-r);
}

int nbd_nfsock_lane_get(struct mnl_socket **ret)
{
        return nbd_nfsock_take(&lane_sock, ret);
}

void nbd_nfsock_lane_close(void)
{
        nbd_nfsock_drop(&lane_sock);
}
