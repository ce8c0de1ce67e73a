/* rtnetlink sockets; see netlink.h. */
#include "netlink.h"

#include <errno.h>
#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/socket.h>

#include "stats.h"

static int on_error_ack(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
        struct nbd_netlink *nl = arg;

        (void)who;
        nl->kernel_errno = -e->error;
        return NL_STOP;
}

void nbd_netlink_sent(unsigned n)
{
        nbd_stats[NBD_STAT_NETLINK_MESSAGES] += n;
}

int nbd_netlink_errno(struct nbd_netlink *nl, int nlerr)
{
        if (nlerr >= 0)
                return 0;
        if (nl->kernel_errno > 0)
                return -nl->kernel_errno;
        switch (-nlerr) {
        case NLE_NOMEM:
                return -ENOMEM;
        case NLE_EXIST:
                return -EEXIST;
        case NLE_OBJ_NOTFOUND:
        case NLE_NODEV:
                return -ENODEV;
        case NLE_INVAL:
        case NLE_MISSING_ATTR:
                return -EINVAL;
        case NLE_PERM:
                return -EPERM;
        case NLE_BUSY:
                return -EBUSY;
        case NLE_RANGE:
                return -ERANGE;
        case NLE_OPNOTSUPP:
                return -EOPNOTSUPP;
        case NLE_AGAIN:
                return -EAGAIN;
        case NLE_NOACCESS:
                return -EACCES;
        case NLE_MSGSIZE:
                return -EMSGSIZE;
        case NLE_DUMP_INTR:
                return -EINTR;
        default:
                return -EIO;
        }
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

int nbd_netlink_set_alias(struct nbd_netlink *nl, int ifindex, const char *alias)
{
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = ifindex};
        struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_ACK);
        int r = -NLE_NOMEM;

        nbd_netlink_begin(nl);
        if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
            nla_put_string(msg, IFLA_IFALIAS, alias) < 0)
                goto out;
        r = nl_send_auto(nl->req, msg);
        if (r >= 0)
                r = nl_wait_for_ack(nl->req);
        nbd_netlink_sent(1);
out:
        nlmsg_free(msg);
        return nbd_netlink_errno(nl, r);
}

void nbd_netlink_close(struct nbd_netlink *nl)
{
        nl_socket_free(nl->req);
        nl_socket_free(nl->mon);
        nl->req = nl->mon = NULL;
}
