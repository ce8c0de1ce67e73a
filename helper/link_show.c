// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading interfaces back; see link_show.h. */
#include "link_show.h"

#include <errno.h>
#include <linux/if_arp.h>
#include <netlink/route/link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bandwidth.h"
#include "link.h"
#include "netlink.h"

static enum nbd_link_kind kind_of(struct rtnl_link *link)
{
        static const struct {
                const char *name;
                enum nbd_link_kind kind;
        } kinds[] = {
                {"macvtap", NBD_LINK_KIND_MACVTAP}, {"macvlan", NBD_LINK_KIND_MACVLAN},
                {"veth", NBD_LINK_KIND_VETH},       {"bridge", NBD_LINK_KIND_BRIDGE},
                {"ifb", NBD_LINK_KIND_IFB},
        };
        const char *k = rtnl_link_get_type(link);

        if (!k)
                return NBD_LINK_KIND_OTHER;
        /* A tun device is a tap when it carries Ethernet frames. */
        if (strcmp(k, "tun") == 0)
                return rtnl_link_get_arptype(link) == ARPHRD_ETHER ? NBD_LINK_KIND_TAP
                                                                   : NBD_LINK_KIND_OTHER;
        for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
                if (strcmp(k, kinds[i].name) == 0)
                        return kinds[i].kind;
        return NBD_LINK_KIND_OTHER;
}

static void mac_of(struct rtnl_link *link, char *buf, size_t len)
{
        struct nl_addr *a = rtnl_link_get_addr(link);
        const unsigned char *b = a ? nl_addr_get_binary_addr(a) : NULL;
        unsigned n = a ? nl_addr_get_len(a) : 0;
        size_t off = 0;

        buf[0] = '\0';
        for (unsigned i = 0; b && i < n && off + 4 <= len; i++)
                off += (size_t)snprintf(buf + off, len - off, i ? ":%02x" : "%02x", b[i]);
}

static void fill(struct nl_cache *cache, struct rtnl_link *link, struct nbd_link_info *ret)
{
        const char *alias = rtnl_link_get_ifalias(link), *k = rtnl_link_get_type(link);
        int master = rtnl_link_get_master(link);
        uid_t uid = 0;

        memset(ret, 0, sizeof(*ret));
        snprintf(ret->name, sizeof(ret->name), "%s", rtnl_link_get_name(link));
        ret->ifindex = rtnl_link_get_ifindex(link);
        ret->kind = kind_of(link);
        snprintf(ret->kind_name, sizeof(ret->kind_name), "%s", k ? k : "");
        mac_of(link, ret->mac, sizeof(ret->mac));
        ret->mtu = rtnl_link_get_mtu(link);
        ret->up = (rtnl_link_get_flags(link) & IFF_UP) != 0;
        if (master > 0 && !rtnl_link_i2name(cache, master, ret->master, sizeof(ret->master)))
                ret->master[0] = '\0';
        ret->has_owner = alias && nbd_link_parse_owner_mark(alias, &uid);
        ret->owner = uid;
        ret->made_by_helper = ret->has_owner || (alias && strcmp(alias, NBD_BW_IFB_MARK) == 0) ||
                              rtnl_link_get_group(link) == NBD_BW_MADE_GROUP;
}

static int by_ifindex(const void *a, const void *b)
{
        const struct nbd_link_info *x = a, *y = b;

        return (x->ifindex > y->ifindex) - (x->ifindex < y->ifindex);
}

int nbd_link_show(struct nbd_netlink *nl, const char *name, struct nbd_link_info **ret,
                  size_t *ret_n, struct nbd_err *e)
{
        struct nl_cache *cache = NULL;
        struct nbd_link_info *all = NULL;
        struct nl_object *o;
        size_t n = 0;
        int r;

        if (!nl)
                return nbd_err_set(e, -EOPNOTSUPP, "link list: no rtnetlink here");
        nbd_netlink_begin(nl);
        r = nbd_netlink_errno(nl, rtnl_link_alloc_cache(nl->req, AF_UNSPEC, &cache));
        nbd_netlink_sent(1);
        if (r < 0)
                return nbd_err_set(e, r, "reading the interfaces: %s", strerror(-r));
        all = calloc((size_t)nl_cache_nitems(cache) + 1, sizeof(*all));
        if (!all) {
                r = nbd_err_oom(e, "listing the interfaces");
                goto out;
        }
        for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
                struct rtnl_link *link = (struct rtnl_link *)o;
                if (name && name[0] && strcmp(rtnl_link_get_name(link), name) != 0)
                        continue;
                fill(cache, link, &all[n++]);
        }
        if (name && name[0] && n == 0) {
                r = nbd_err_set(e, -ENODEV, "no interface %s", name);
                goto out;
        }
        qsort(all, n, sizeof(*all), by_ifindex);
        *ret = all;
        *ret_n = n;
        all = NULL;
out:
        free(all);
        nl_cache_free(cache);
        return r;
}

int nbd_link_show_own(const char *name, struct nbd_link_info **ret, size_t *ret_n,
                      struct nbd_err *e)
{
        struct nbd_netlink own;
        int r = nbd_netlink_open_req(&own);

        if (r < 0)
                return nbd_err_set(e, r, "cannot open a socket to read the interfaces: %s",
                                   strerror(-r));
        r = nbd_link_show(&own, name, ret, ret_n, e);
        nbd_netlink_close(&own);
        return r;
}
