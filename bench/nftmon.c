/* Counting nf_tables notifications: the kernel's view of what each method
 * wrote, whoever wrote it (an ebtables child, nft, the helper). Read only
 * between timed sections, so reading costs no method anything; the socket's
 * buffer holds what one timed section produces. */
#include "restart.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* Enough for the notifications of 1000 guests' rules in one transaction. */
#define RCVBUF (256 << 20)

int rs_nftmon_open(struct rs_nftmon *m)
{
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
        int grp = NFNLGRP_NFTABLES, sz = RCVBUF, r;

        *m = (struct rs_nftmon){.fd = -1};
        m->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_NETFILTER);
        if (m->fd < 0)
                return -errno;
        /* FORCE: past net.core.rmem_max; we are root. */
        if (setsockopt(m->fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
                (void)setsockopt(m->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
        if (bind(m->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            setsockopt(m->fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp)) < 0) {
                r = -errno;
                rs_nftmon_close(m);
                return r;
        }
        return 0;
}

int rs_nftmon_drain(struct rs_nftmon *m)
{
        static char buf[1 << 16] __attribute__((aligned(8)));

        for (;;) {
                ssize_t n = recv(m->fd, buf, sizeof(buf), MSG_DONTWAIT);
                int len;

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == ENOBUFS) {
                        m->lost++;
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return 0;
                if (n < 0)
                        return -errno;
                len = (int)n;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
                     h = NLMSG_NEXT(h, len)) {
                        unsigned type = NFNL_MSG_TYPE(h->nlmsg_type);

                        if (NFNL_SUBSYS_ID(h->nlmsg_type) != NFNL_SUBSYS_NFTABLES)
                                continue;
                        if (type == NFT_MSG_NEWGEN) {
                                m->commits++;
                                continue;
                        }
                        m->changes++;
                }
        }
}

void rs_nftmon_close(struct rs_nftmon *m)
{
        if (m->fd >= 0)
                close(m->fd);
        m->fd = -1;
}
