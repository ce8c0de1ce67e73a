/* This process's own netlink, for the scenarios that create devices
 * themselves (names, bandwidth): libnl's errors as errnos, devices by name,
 * veth pairs made and links and qdiscs deleted. */
#include "bench.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/tc.h>

#include "netlink.h" /* helper/netlink.h: libnl's codes as errnos, the helper's one map */

int bench_count_devices(const char *prefix)
{
        struct if_nameindex *all = if_nameindex(), *d;
        size_t plen = strlen(prefix);
        int n = 0;

        if (!all)
                return -errno;
        for (d = all; d->if_index; d++) {
                const char *tail = d->if_name + plen;
                if (strncmp(d->if_name, prefix, plen) == 0 && *tail &&
                    strspn(tail, "0123456789") == strlen(tail))
                        n++;
        }
        if_freenameindex(all);
        return n;
}

int bench_nl_open(const char *who, struct nl_sock **ret)
{
        struct nl_sock *sk = nl_socket_alloc();
        int r = sk ? nbd_netlink_nle_errno(nl_connect(sk, NETLINK_ROUTE)) : -ENOMEM;

        if (r < 0) {
                bench_log("netbroker-bench: %scannot open rtnetlink: %s\n", who, strerror(-r));
                nl_socket_free(sk);
                return r;
        }
        *ret = sk;
        return 0;
}

int bench_expect_devices(const char *who, const char *prefix, unsigned want)
{
        int have = bench_count_devices(prefix);

        if (have == (int)want)
                return 0;
        bench_log("netbroker-bench: %s%d %s devices, expected %u\n", who, have, prefix, want);
        return have < 0 ? have : -EPROTO;
}

int bench_link_delete(struct nl_sock *sk, const char *who, const char *name)
{
        struct rtnl_link *link = rtnl_link_alloc();
        int r = -ENOMEM;

        if (link) {
                rtnl_link_set_name(link, name);
                r = nbd_netlink_nle_errno(rtnl_link_delete(sk, link));
                rtnl_link_put(link);
        }
        /* Not there: ENODEV, ENOENT or EINVAL. */
        if (r == -ENODEV || r == -ENOENT || r == -EINVAL)
                return 0;
        if (r < 0)
                bench_log("netbroker-bench: %scannot delete %s: %s\n", who, name, strerror(-r));
        return r;
}

static int link_up(struct nl_sock *sk, const char *name)
{
        struct rtnl_link *link = NULL, *change = rtnl_link_alloc();
        int r = -ENOMEM;

        if (change)
                r = nbd_netlink_nle_errno(rtnl_link_get_kernel(sk, 0, name, &link));
        if (r == 0) {
                rtnl_link_set_flags(change, IFF_UP);
                r = nbd_netlink_nle_errno(rtnl_link_change(sk, link, change, 0));
        }
        rtnl_link_put(link);
        rtnl_link_put(change);
        return r;
}

int bench_veth_add(struct nl_sock *sk, const char *who, const char *name, const char *peer_name,
                   bool up, int *ret_ifindex)
{
        struct rtnl_link *link = rtnl_link_veth_alloc(), *peer;
        int r, ifindex = 0;

        if (!link)
                return -ENOMEM;
        peer = rtnl_link_veth_get_peer(link);
        rtnl_link_set_name(link, name);
        if (up)
                rtnl_link_set_flags(link, IFF_UP);
        rtnl_link_set_name(peer, peer_name);
        r = nbd_netlink_nle_errno(rtnl_link_add(sk, link, NLM_F_CREATE | NLM_F_EXCL));
        rtnl_link_put(peer);
        rtnl_link_veth_release(link);
        if (r == 0) {
                ifindex = (int)if_nametoindex(name);
                r = ifindex ? 0 : -errno;
        }
        /* The peer's flags in the same request make libnl fail. */
        if (r == 0 && up)
                r = link_up(sk, peer_name);
        if (r < 0)
                bench_log("netbroker-bench: %scannot make the veth pair %s/%s: %s\n", who, name,
                          peer_name, strerror(-r));
        else if (ret_ifindex)
                *ret_ifindex = ifindex;
        return r;
}

int bench_qdisc_delete(struct nl_sock *sk, const char *who, int ifindex, uint32_t parent)
{
        struct rtnl_qdisc *q = rtnl_qdisc_alloc();
        int r;

        if (!q)
                return -ENOMEM;
        rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
        rtnl_tc_set_parent(TC_CAST(q), parent);
        r = nbd_netlink_nle_errno(rtnl_qdisc_delete(sk, q));
        rtnl_qdisc_put(q);
        /* Nothing there: ENOENT, or EINVAL for the default root qdisc. */
        if (r == -ENOENT || r == -EINVAL)
                return 0;
        if (r < 0)
                bench_log("netbroker-bench: %scannot delete a qdisc of ifindex %d: %s\n", who,
                          ifindex, strerror(-r));
        return r;
}
