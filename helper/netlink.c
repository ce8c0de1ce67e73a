// SPDX-License-Identifier: LGPL-2.1-or-later
/* rtnetlink sockets; see netlink.h. */
#include "netlink.h"

#include <errno.h>
#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/socket.h>

#include "stats.h"

/* An ack: its header, the error, the request it answers (no ext-ack
 * attributes are asked for), with room to spare. */
#define ACK_BUF_SIZE 8192

static int on_error_ack(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
        struct nbd_netlink *nl = arg;

        (void)who;
        nl->kernel_errno = -e->error;
        return NL_STOP;
}

void nbd_netlink_sent(unsigned n)
{
        /* Atomic: fw_gone's table read on the firewall's lane counts too. */
        __atomic_fetch_add(&nbd_stats[NBD_STAT_NETLINK_MESSAGES], n, __ATOMIC_RELAXED);
}

/* libnl's own codes, back to the errno each stands for. Where libnl made
 * the code from a kernel errno (lib/error.c, nl_syserr2nlerr), the map is
 * that function's inverse; where several errnos fold into one code, the
 * first of them. The kernel's own errno, when an ack carried one, is taken
 * before this (nbd_netlink_errno). */
int nbd_netlink_nle_errno(int nlerr)
{
        switch (nlerr < 0 ? -nlerr : nlerr) {
        case 0:
                return 0;
        case NLE_NOMEM: /* ENOMEM, and ENOBUFS folded in */
                return -ENOMEM;
        case NLE_EXIST: /* EEXIST, and EADDRINUSE folded in */
                return -EEXIST;
        case NLE_OBJ_NOTFOUND:
                /* libnl's own "no such object" (a look-up or a reply that
                 * held none), not the kernel's: a missing device comes as
                 * the kernel's ENODEV through kernel_errno. ENOENT, as
                 * for any missing entry; callers that look up devices
                 * treat it as ENODEV themselves. */
                return -ENOENT;
        case NLE_NODEV: /* ENODEV */
                return -ENODEV;
        case NLE_INVAL: /* EINVAL */
        case NLE_MISSING_ATTR: /* a required attribute libnl did not have */
                return -EINVAL;
        case NLE_PERM: /* EPERM */
                return -EPERM;
        case NLE_NOACCESS: /* EACCES: not folded into EPERM, the kernel tells them apart */
                return -EACCES;
        case NLE_BUSY: /* EBUSY */
                return -EBUSY;
        case NLE_RANGE: /* ERANGE */
                return -ERANGE;
        case NLE_OPNOTSUPP: /* EOPNOTSUPP */
                return -EOPNOTSUPP;
        case NLE_AGAIN: /* EAGAIN */
                return -EAGAIN;
        case NLE_MSGSIZE: /* EMSGSIZE */
                return -EMSGSIZE;
        case NLE_DUMP_INTR: /* NLM_F_DUMP_INTR: the dump must be redone, as libmnl's EINTR */
                return -EINTR;
        case NLE_INTR: /* EINTR */
                return -EINTR;
        case NLE_AF_NOSUPPORT: /* EAFNOSUPPORT */
                return -EAFNOSUPPORT;
        default: /* a libnl failure with no errno of its own */
                return -EIO;
        }
}

int nbd_netlink_errno(struct nbd_netlink *nl, int nlerr)
{
        if (nlerr >= 0)
                return 0;
        if (nl->kernel_errno > 0)
                return -nl->kernel_errno;
        return nbd_netlink_nle_errno(nlerr);
}

int nbd_netlink_open(struct nbd_netlink *nl)
{
        int r;

        nl->req = nl_socket_alloc();
        nl->mon = nl_socket_alloc();
        if (!nl->req || !nl->mon) {
                r = -ENOMEM;
                goto fail;
        }
        nl_socket_modify_err_cb(nl->req, NL_CB_CUSTOM, on_error_ack, nl);
        /* Notifications are not acknowledged and carry no sequence. */
        nl_socket_disable_seq_check(nl->mon);
        if ((r = nl_connect(nl->req, NETLINK_ROUTE)) < 0 ||
            (r = nl_connect(nl->mon, NETLINK_ROUTE)) < 0 ||
            (r = nl_socket_add_membership(nl->mon, RTNLGRP_LINK)) < 0 ||
            (r = nl_socket_set_nonblocking(nl->mon)) < 0) {
                r = nbd_netlink_errno(nl, r);
                goto fail;
        }
        /* A burst of 1000 creates makes 1000 notifications: give them room,
         * and resynchronise from a dump when they overflow anyway. */
        nl_socket_set_buffer_size(nl->mon, 4 << 20, 0);
        return 0;
fail:
        nbd_netlink_close(nl);
        return r;
}

int nbd_netlink_open_req(struct nbd_netlink *nl)
{
        int r;

        *nl = (struct nbd_netlink){.req = nl_socket_alloc()};
        if (!nl->req)
                return -ENOMEM;
        nl_socket_modify_err_cb(nl->req, NL_CB_CUSTOM, on_error_ack, nl);
        r = nl_connect(nl->req, NETLINK_ROUTE);
        if (r < 0) {
                r = nbd_netlink_errno(nl, r);
                nbd_netlink_close(nl);
        }
        return r;
}

int nbd_netlink_call(struct nbd_netlink *nl, struct nl_msg *msg)
{
        int r;

        nbd_netlink_begin(nl);
        r = nl_send_auto(nl->req, msg); /* sets the sequence, NLM_F_REQUEST and NLM_F_ACK */
        /* A buffer of our own size is what keeps libnl from reading every
         * datagram twice (a MSG_PEEK for its size, then the datagram). An
         * ack is small; dumps and look-ups keep the peek (size 0), whose
         * replies can be any size. libnl still checks the ack's sequence. */
        if (r >= 0 && (r = nl_socket_set_msg_buf_size(nl->req, ACK_BUF_SIZE)) >= 0) {
                r = nl_wait_for_ack(nl->req);
                nl_socket_set_msg_buf_size(nl->req, 0);
        }
        return nbd_netlink_errno(nl, r);
}

int nbd_netlink_set_alias(struct nbd_netlink *nl, int ifindex, const char *alias)
{
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = ifindex};
        struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_ACK);
        int r = -NLE_NOMEM;

        nbd_netlink_begin(nl);
        if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
            nla_put_string(msg, IFLA_IFALIAS, alias) < 0) {
                nlmsg_free(msg);
                return nbd_netlink_errno(nl, r);
        }
        r = nbd_netlink_call(nl, msg);
        nbd_netlink_sent(1);
        nlmsg_free(msg);
        return r;
}

void nbd_netlink_close(struct nbd_netlink *nl)
{
        nl_socket_free(nl->req);
        nl_socket_free(nl->mon);
        nl->req = nl->mon = NULL;
}
