// SPDX-License-Identifier: LGPL-2.1-or-later
/* A bridge's forwarding database and address; see bridge_port.h. */
#include "bridge_port.h"

#include <errno.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <string.h>

#include "link.h"
#include "netlink.h"

struct fdb_search {
        int br_ifindex, except_ifindex;
        const uint8_t *mac;
        bool found;
};

static int on_neigh(struct nl_msg *msg, void *arg)
{
        struct fdb_search *s = arg;
        struct nlmsghdr *h = nlmsg_hdr(msg);
        struct ndmsg *nd = nlmsg_data(h);
        struct nlattr *tb[NDA_MAX + 1];
        int master;

        if (h->nlmsg_type != RTM_NEWNEIGH ||
            nlmsg_parse(h, sizeof(struct ndmsg), tb, NDA_MAX, NULL) < 0 || !tb[NDA_LLADDR] ||
            nla_len(tb[NDA_LLADDR]) != 6 || nd->ndm_family != AF_BRIDGE)
                return NL_OK;
        /* The bridge's entries name it as their master; the bridge's own
         * (its address, its multicast list) are on the bridge itself. */
        master = tb[NDA_MASTER] ? (int)nla_get_u32(tb[NDA_MASTER]) : 0;
        if (master != s->br_ifindex && nd->ndm_ifindex != s->br_ifindex)
                return NL_OK;
        if (nd->ndm_ifindex != s->except_ifindex &&
            memcmp(nla_data(tb[NDA_LLADDR]), s->mac, 6) == 0)
                s->found = true;
        return NL_OK;
}

int nbd_bridge_fdb_has(struct nbd_links *l, int br_ifindex, int except_ifindex,
                       const uint8_t mac[6], bool *ret, struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct fdb_search s = {br_ifindex, except_ifindex, mac, false};
        struct nl_cb *sock_cb = nl_socket_get_cb(nl->req), *cb = nl_cb_clone(sock_cb);
        struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETNEIGH, NLM_F_DUMP);
        int r;

        nl_cb_put(sock_cb);
        /* A bare ndmsg: every bridge's entries (filtered in on_neigh), on
         * kernels with strict dump checks and without alike. */
        if (!cb || !msg ||
            nlmsg_append(msg, &(struct ndmsg){.ndm_family = AF_BRIDGE}, sizeof(struct ndmsg),
                         NLMSG_ALIGNTO) < 0) {
                r = nbd_err_oom(err, "reading a bridge's forwarding database");
                goto out;
        }
        nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_neigh, &s);
        nbd_netlink_begin(nl);
        r = nl_send_auto(nl->req, msg);
        nbd_netlink_sent(1);
        if (r >= 0)
                r = nl_recvmsgs(nl->req, cb);
        r = nbd_netlink_errno(nl, r);
        if (r == -EINTR)
                r = nbd_err_set(err, -EAGAIN,
                                "the forwarding database changed while it was read: try again");
        else if (r < 0)
                nbd_err_set(err, r, "cannot read the forwarding database: %s", strerror(-r));
        else
                *ret = s.found;
out:
        nlmsg_free(msg);
        nl_cb_put(cb);
        return r;
}

int nbd_bridge_pin_addr(struct nbd_links *l, int br_ifindex, const uint8_t mac[6],
                        struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, 0);
        int r;

        /* Not rtnl_link_change(): it sends only what differs, and the
         * address is the one the bridge has. */
        if (!msg ||
            nlmsg_append(msg, &(struct ifinfomsg){.ifi_family = AF_UNSPEC, .ifi_index = br_ifindex},
                         sizeof(struct ifinfomsg), NLMSG_ALIGNTO) < 0 ||
            nla_put(msg, IFLA_ADDRESS, 6, mac) < 0) {
                r = nbd_err_oom(err, "setting a bridge's address");
                goto out;
        }
        r = nbd_netlink_call(nl, msg);
        nbd_netlink_sent(1);
        if (r < 0)
                nbd_err_set(err, r, "cannot set the bridge's address: %s", strerror(-r));
out:
        nlmsg_free(msg);
        return r;
}
