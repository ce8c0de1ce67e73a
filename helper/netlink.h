// SPDX-License-Identifier: LGPL-2.1-or-later
/* The helper's rtnetlink sockets (libnl-route-3): one for requests, one
 * subscribed to link notifications. Owns the conversion of libnl errors to
 * errno values, in one place, keeping the kernel's own errno: libnl folds
 * several (EEXIST and EADDRINUSE both become NLE_EXIST), so the error
 * callback records the errno from the kernel's ack before libnl maps it. */
#pragma once

#include <netlink/route/link.h>
#include <stdbool.h>

struct nbd_netlink {
        struct nl_sock *req; /* requests; blocking, acks checked */
        struct nl_sock *mon; /* RTNLGRP_LINK notifications; non-blocking */
        int kernel_errno; /* from the last error ack on req, 0 if none */
};

int nbd_netlink_open(struct nbd_netlink *nl);
/* The request socket alone (nl->mon stays NULL), for one call where the
 * loop's cannot be used (a lane's: nbd_netlink_call on it, then
 * nbd_netlink_close). 0 or -errno. */
int nbd_netlink_open_req(struct nbd_netlink *nl);
void nbd_netlink_close(struct nbd_netlink *nl);

/* Turn a libnl return value into 0 or -errno, preferring the errno the
 * kernel sent. Call right after the libnl call on nl->req. */
int nbd_netlink_errno(struct nbd_netlink *nl, int nlerr);

/* The one map of libnl codes to errno values (negative or not; 0 is 0, a
 * code without an errno -EIO), also for sockets other than nl->req (the
 * bench's). */
int nbd_netlink_nle_errno(int nlerr);

/* Send msg (NLM_F_ACK is added) on nl->req and wait for its ack, read
 * with one recvmsg (libnl's default peeks first: two). Returns 0 or
 * -errno, preferring the kernel's. */
int nbd_netlink_call(struct nbd_netlink *nl, struct nl_msg *msg);

/* Set the alias of interface ifindex of this namespace. 0 or -errno. */
int nbd_netlink_set_alias(struct nbd_netlink *nl, int ifindex, const char *alias);

/* Count messages sent to the kernel (Stats: netlink_messages), over
 * rtnetlink and over nfnetlink. */
void nbd_netlink_sent(unsigned n);
#define nbd_netlink_sent_nf nbd_netlink_sent

/* Before a request on nl->req: forget the previous error. */
static inline void nbd_netlink_begin(struct nbd_netlink *nl)
{
        nl->kernel_errno = 0;
}
