// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bridge options and bridge port flags; see bridge_opt.h. */
#include "bridge_opt.h"

#include <errno.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <string.h>

#include "link.h"
#include "netlink.h"

/* Each option: whose it is and its attribute. */
static const struct {
        bool port; /* IFLA_INFO_SLAVE_DATA (IFLA_BRPORT_*, u8), else IFLA_INFO_DATA (u32) */
        int attr;
        const char *name;
} opts[NBD_BROPT_N] = {
        [NBD_BROPT_STP] = {false, IFLA_BR_STP_STATE, "stp"},
        [NBD_BROPT_FORWARD_DELAY] = {false, IFLA_BR_FORWARD_DELAY, "forward delay"},
        [NBD_BROPT_ISOLATED] = {true, IFLA_BRPORT_ISOLATED, "isolated"},
        [NBD_BROPT_LEARNING] = {true, IFLA_BRPORT_LEARNING, "learning"},
        [NBD_BROPT_UNICAST_FLOOD] = {true, IFLA_BRPORT_UNICAST_FLOOD, "unicast flooding"},
        [NBD_BROPT_MULTICAST_FLOOD] = {true, IFLA_BRPORT_MCAST_FLOOD, "multicast flooding"},
        [NBD_BROPT_BROADCAST_FLOOD] = {true, IFLA_BRPORT_BCAST_FLOOD, "broadcast flooding"},
};

struct reading {
        const struct nbd_bropts *want;
        struct nbd_bropts *got;
        int missing; /* the first option asked for and not reported, or -1 */
        bool seen;
};

static int on_link(struct nl_msg *msg, void *arg)
{
        struct reading *rd = arg;
        struct nlattr *tb[IFLA_MAX + 1], *li[IFLA_INFO_MAX + 1];
        struct nlattr *br[IFLA_BR_MAX + 1] = {0}, *port[IFLA_BRPORT_MAX + 1] = {0};

        if (nlmsg_parse(nlmsg_hdr(msg), sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL) < 0)
                return NL_SKIP;
        rd->seen = true;
        if (tb[IFLA_LINKINFO] &&
            nla_parse_nested(li, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) == 0) {
                if (li[IFLA_INFO_KIND] &&
                    strcmp(nla_get_string(li[IFLA_INFO_KIND]), "bridge") == 0 && li[IFLA_INFO_DATA])
                        nla_parse_nested(br, IFLA_BR_MAX, li[IFLA_INFO_DATA], NULL);
                if (li[IFLA_INFO_SLAVE_KIND] &&
                    strcmp(nla_get_string(li[IFLA_INFO_SLAVE_KIND]), "bridge") == 0 &&
                    li[IFLA_INFO_SLAVE_DATA])
                        nla_parse_nested(port, IFLA_BRPORT_MAX, li[IFLA_INFO_SLAVE_DATA], NULL);
        }
        for (int i = 0; i < NBD_BROPT_N; i++) {
                struct nlattr *a = opts[i].port ? port[opts[i].attr] : br[opts[i].attr];
                if (!rd->want->has[i])
                        continue;
                if (!a) {
                        if (rd->missing < 0)
                                rd->missing = i;
                        continue;
                }
                rd->got->has[i] = true;
                rd->got->val[i] = opts[i].port ? nla_get_u8(a) : nla_get_u32(a);
        }
        return NL_STOP;
}

int nbd_bropt_get(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_bropts *ret,
                  struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct nbd_bropts got = {0};
        struct reading rd = {.want = o, .got = &got, .missing = -1};
        struct nl_cb *sock_cb = nl_socket_get_cb(nl->req), *cb = nl_cb_clone(sock_cb);
        struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETLINK, 0);
        int ifindex = 0, r;

        nl_cb_put(sock_cb);
        r = nbd_links_ifindex(l, o->ifname, &ifindex);
        if (r < 0) {
                nbd_err_set(err, r, "no interface %s", o->ifname);
                goto out;
        }
        if (!cb || !msg ||
            nlmsg_append(msg, &(struct ifinfomsg){.ifi_family = AF_UNSPEC, .ifi_index = ifindex},
                         sizeof(struct ifinfomsg), NLMSG_ALIGNTO) < 0) {
                r = nbd_err_oom(err, "reading bridge options");
                goto out;
        }
        nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_link, &rd);
        nbd_netlink_begin(nl);
        r = nl_send_auto(nl->req, msg);
        nbd_netlink_sent(1);
        if (r >= 0)
                r = nl_recvmsgs(nl->req, cb);
        /* nl_send_auto() asked for an ack too: read it, or the next
         * request on this socket would take it for its own. */
        if (r >= 0)
                r = nl_wait_for_ack(nl->req);
        r = nbd_netlink_errno(nl, r);
        if (r < 0) {
                nbd_err_set(err, r, "cannot read %s: %s", o->ifname, strerror(-r));
                goto out;
        }
        if (!rd.seen || rd.missing >= 0) {
                r = nbd_err_set(err, -EOPNOTSUPP, "%s has no %s (%s)", o->ifname,
                                rd.seen ? opts[rd.missing].name : "answer",
                                rd.seen && opts[rd.missing].port
                                        ? "not a bridge port, or a kernel without it"
                                        : "not a bridge, or a kernel without it");
                goto out;
        }
        memcpy(got.ifname, o->ifname, sizeof(got.ifname));
        *ret = got;
out:
        nlmsg_free(msg);
        nl_cb_put(cb);
        return r;
}

/* Nest the options of one side (port or not) in attr; none: nothing. */
static int put_side(struct nl_msg *msg, const struct nbd_bropts *o, bool port, int attr)
{
        struct nlattr *nest;
        bool any = false;

        for (int i = 0; i < NBD_BROPT_N; i++)
                any |= o->has[i] && opts[i].port == port;
        if (!any)
                return 0;
        nest = nla_nest_start(msg, attr);
        if (!nest)
                return -ENOMEM;
        for (int i = 0; i < NBD_BROPT_N; i++) {
                int r = 0;
                if (!o->has[i] || opts[i].port != port)
                        continue;
                r = port ? nla_put_u8(msg, opts[i].attr, (uint8_t)o->val[i])
                         : nla_put_u32(msg, opts[i].attr, o->val[i]);
                if (r < 0)
                        return -ENOMEM;
        }
        return nla_nest_end(msg, nest) < 0 ? -ENOMEM : 0;
}

static bool any_of(const struct nbd_bropts *o, bool port)
{
        for (int i = 0; i < NBD_BROPT_N; i++)
                if (o->has[i] && opts[i].port == port)
                        return true;
        return false;
}

static int send_set(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, 0);
        struct nlattr *info;
        int ifindex = 0, r = nbd_links_ifindex(l, o->ifname, &ifindex);

        if (r < 0) {
                nbd_err_set(err, r, "no interface %s", o->ifname);
                goto out;
        }
        r = -ENOMEM;
        if (!msg ||
            nlmsg_append(msg, &(struct ifinfomsg){.ifi_family = AF_UNSPEC, .ifi_index = ifindex},
                         sizeof(struct ifinfomsg), NLMSG_ALIGNTO) < 0 ||
            !(info = nla_nest_start(msg, IFLA_LINKINFO)) ||
            (any_of(o, false) && nla_put_string(msg, IFLA_INFO_KIND, "bridge") < 0) ||
            (any_of(o, true) && nla_put_string(msg, IFLA_INFO_SLAVE_KIND, "bridge") < 0) ||
            put_side(msg, o, false, IFLA_INFO_DATA) < 0 ||
            put_side(msg, o, true, IFLA_INFO_SLAVE_DATA) < 0 || nla_nest_end(msg, info) < 0) {
                nbd_err_oom(err, "building a bridge option request");
                goto out;
        }
        r = nbd_netlink_call(nl, msg);
        nbd_netlink_sent(1);
        if (r < 0)
                nbd_err_set(err, r, "cannot set the bridge options of %s: %s", o->ifname,
                            strerror(-r));
out:
        nlmsg_free(msg);
        return r;
}

/* The kernel applies IFLA_BR_FORWARD_DELAY before IFLA_BR_STP_STATE and
 * checks the delay's range (2-30 s) only while STP is on: turning STP on
 * with a delay works in one request (delay, then STP, as libvirt does),
 * turning it off with a delay below 2 s takes STP first. */
int nbd_bropt_set(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_err *err)
{
        struct nbd_bropts stp_first = {0};
        int r;

        if (!o->has[NBD_BROPT_STP] || o->val[NBD_BROPT_STP] || !o->has[NBD_BROPT_FORWARD_DELAY])
                return send_set(l, o, err);
        memcpy(stp_first.ifname, o->ifname, sizeof(stp_first.ifname));
        stp_first.has[NBD_BROPT_STP] = true;
        r = send_set(l, &stp_first, err);
        return r < 0 ? r : send_set(l, o, err);
}
