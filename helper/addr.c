// SPDX-License-Identifier: LGPL-2.1-or-later
/* Addresses, routes and net sysctls; see addr.h. */
#include "addr.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "link.h"
#include "netlink.h"
#include "stats.h"

static size_t family_len(int family)
{
        return family == AF_INET ? 4 : 16;
}

/* An nl_addr of family with prefix length len, or NULL (no memory). */
static struct nl_addr *build_addr(int family, const uint8_t *bytes, unsigned len)
{
        struct nl_addr *a = nl_addr_build(family, bytes, family_len(family));

        if (a)
                nl_addr_set_prefixlen(a, (int)len);
        return a;
}

static const char *addr_text(int family, const uint8_t *bytes, char buf[INET6_ADDRSTRLEN])
{
        if (!inet_ntop(family, bytes, buf, INET6_ADDRSTRLEN))
                snprintf(buf, INET6_ADDRSTRLEN, "?");
        return buf;
}

/* ---- addresses ---- */

/* The libnl object for a, on its interface. */
static int addr_object(struct nbd_links *l, const struct nbd_addr *a, struct rtnl_addr **ret,
                       struct nbd_err *err)
{
        struct rtnl_addr *o = NULL;
        struct nl_addr *local = NULL, *brd = NULL;
        int ifindex = 0, r;

        r = nbd_links_ifindex(l, a->ifname, &ifindex);
        if (r < 0)
                return nbd_err_set(err, r, "no interface %s", a->ifname);
        o = rtnl_addr_alloc();
        local = build_addr(a->family, a->addr, a->prefix_len);
        if (a->has_brd)
                brd = build_addr(AF_INET, a->brd, 32);
        if (!o || !local || (a->has_brd && !brd)) {
                r = nbd_err_oom(err, "building an address request");
                goto out;
        }
        rtnl_addr_set_ifindex(o, ifindex);
        rtnl_addr_set_family(o, a->family);
        if ((r = rtnl_addr_set_local(o, local)) < 0 ||
            (brd && (r = rtnl_addr_set_broadcast(o, brd)) < 0)) {
                r = nbd_err_set(err, nbd_netlink_nle_errno(r), "cannot build an address request");
                goto out;
        }
        rtnl_addr_set_prefixlen(o, (int)a->prefix_len);
        if (a->noprefixroute)
                rtnl_addr_set_flags(o, IFA_F_NOPREFIXROUTE);
        *ret = o;
        o = NULL;
out:
        nl_addr_put(local);
        nl_addr_put(brd);
        rtnl_addr_put(o);
        return r;
}

static int addr_call(struct nbd_links *l, const struct nbd_addr *a, bool add, struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct rtnl_addr *o = NULL;
        struct nl_msg *msg = NULL;
        char text[INET6_ADDRSTRLEN];
        int r = addr_object(l, a, &o, err);

        if (r < 0)
                return r;
        r = add ? rtnl_addr_build_add_request(o, NLM_F_CREATE | NLM_F_EXCL, &msg)
                : rtnl_addr_build_delete_request(o, 0, &msg);
        if (r < 0) {
                r = nbd_err_set(err, nbd_netlink_nle_errno(r), "cannot build an address request");
                goto out;
        }
        r = nbd_netlink_call(nl, msg);
        nbd_netlink_sent(1);
        if (r < 0)
                nbd_err_set(err, r, "%s %s/%u %s %s: %s", add ? "cannot add" : "cannot delete",
                            addr_text(a->family, a->addr, text), a->prefix_len, add ? "to" : "from",
                            a->ifname, strerror(-r));
out:
        nlmsg_free(msg);
        rtnl_addr_put(o);
        return r;
}

int nbd_addr_add(struct nbd_links *l, const struct nbd_addr *a, struct nbd_err *err)
{
        return addr_call(l, a, true, err);
}

int nbd_addr_delete(struct nbd_links *l, const struct nbd_addr *a, struct nbd_err *err)
{
        return addr_call(l, a, false, err);
}

static void addr_from(struct nbd_links *l, struct rtnl_addr *o, struct nbd_addr *ret)
{
        struct nl_addr *local = rtnl_addr_get_local(o), *brd = rtnl_addr_get_broadcast(o);
        const char *name;

        memset(ret, 0, sizeof(*ret));
        ret->family = rtnl_addr_get_family(o);
        memcpy(ret->addr, nl_addr_get_binary_addr(local),
               nl_addr_get_len(local) < 16 ? nl_addr_get_len(local) : 16);
        ret->prefix_len = (unsigned)rtnl_addr_get_prefixlen(o);
        if (brd && ret->family == AF_INET && nl_addr_get_len(brd) == 4) {
                ret->has_brd = true;
                memcpy(ret->brd, nl_addr_get_binary_addr(brd), 4);
        }
        ret->noprefixroute = rtnl_addr_get_flags(o) & IFA_F_NOPREFIXROUTE;
        ret->ifindex = rtnl_addr_get_ifindex(o);
        ret->scope = (unsigned)rtnl_addr_get_scope(o);
        name = nbd_links_name_of(l, ret->ifindex);
        snprintf(ret->ifname, IFNAMSIZ, "%s", name ? name : "");
}

int nbd_addr_list(struct nbd_links *l, const char *ifname, struct nbd_addr **ret, size_t *ret_n,
                  struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct nl_cache *cache = NULL;
        struct nbd_addr *v = NULL;
        size_t n = 0;
        int ifindex = 0, r = 0;

        if (ifname && (r = nbd_links_ifindex(l, ifname, &ifindex)) < 0)
                return nbd_err_set(err, r, "no interface %s", ifname);
        nbd_links_sync(l); /* names of interfaces made meanwhile */
        nbd_netlink_begin(nl);
        r = rtnl_addr_alloc_cache(nl->req, &cache);
        nbd_netlink_sent(1);
        r = nbd_netlink_errno(nl, r);
        if (r < 0)
                return nbd_err_set(err, r, "cannot list addresses: %s", strerror(-r));
        v = calloc((size_t)nl_cache_nitems(cache) + 1, sizeof(*v));
        if (!v) {
                r = nbd_err_oom(err, "listing addresses");
                goto out;
        }
        for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
                struct rtnl_addr *a = (struct rtnl_addr *)o;
                int fam = rtnl_addr_get_family(a);
                if ((fam != AF_INET && fam != AF_INET6) || !rtnl_addr_get_local(a) ||
                    (ifindex && rtnl_addr_get_ifindex(a) != ifindex))
                        continue;
                addr_from(l, a, &v[n++]);
        }
        *ret = v;
        *ret_n = n;
        v = NULL;
out:
        free(v);
        nl_cache_free(cache);
        return r;
}

/* ---- routes ---- */

/* The metric the kernel gives an IPv6 route added without one. */
#define IPV6_UNNAMED_METRIC 1024u

static int route_object(struct nbd_links *l, const struct nbd_route *rt, bool add,
                        struct rtnl_route **ret, struct nbd_err *err)
{
        struct rtnl_route *o = rtnl_route_alloc();
        struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
        struct nl_addr *dst = build_addr(rt->family, rt->dst, rt->dst_len), *gw = NULL;
        int ifindex = 0, r = 0;

        if (rt->ifname[0] && (r = nbd_links_ifindex(l, rt->ifname, &ifindex)) < 0) {
                r = nbd_err_set(err, r, "no interface %s", rt->ifname);
                goto out;
        }
        if (rt->has_gw)
                gw = build_addr(rt->family, rt->gw, rt->family == AF_INET ? 32 : 128);
        if (!o || !nh || !dst || (rt->has_gw && !gw)) {
                r = nbd_err_oom(err, "building a route request");
                goto out;
        }
        rtnl_route_set_family(o, (uint8_t)rt->family);
        rtnl_route_set_table(o, rt->table ? rt->table : RT_TABLE_MAIN);
        rtnl_route_set_type(o, RTN_UNICAST);
        /* What we add is static; the deletion here is only ever the undo
         * of our own add, so it names that route exactly: protocol static
         * and the metric the kernel gave it (IPv6 makes an unnamed one
         * 1024, IP6_RT_PRIO_USER; IPv4 keeps 0), else the kernel deletes
         * the first route to the destination, maybe someone else's. */
        rtnl_route_set_protocol(o, RTPROT_STATIC);
        if (rt->metric)
                rtnl_route_set_priority(o, rt->metric);
        else if (!add && rt->family == AF_INET6)
                rtnl_route_set_priority(o, IPV6_UNNAMED_METRIC);
        if ((r = rtnl_route_set_dst(o, dst)) < 0) {
                r = nbd_err_set(err, nbd_netlink_nle_errno(r), "cannot build a route request");
                goto out;
        }
        if (ifindex)
                rtnl_route_nh_set_ifindex(nh, ifindex);
        if (gw)
                rtnl_route_nh_set_gateway(nh, gw);
        if (ifindex || gw) {
                rtnl_route_add_nexthop(o, nh); /* the route owns it now */
                nh = NULL;
        }
        *ret = o;
        o = NULL;
out:
        if (nh)
                rtnl_route_nh_free(nh);
        nl_addr_put(dst);
        nl_addr_put(gw);
        rtnl_route_put(o);
        return r;
}

static int route_call(struct nbd_links *l, const struct nbd_route *rt, bool add,
                      struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct rtnl_route *o = NULL;
        struct nl_msg *msg = NULL;
        char text[INET6_ADDRSTRLEN];
        int r = route_object(l, rt, add, &o, err);

        if (r < 0)
                return r;
        r = add ? rtnl_route_build_add_request(o, NLM_F_CREATE | NLM_F_EXCL, &msg)
                : rtnl_route_build_del_request(o, 0, &msg);
        if (r < 0) {
                r = nbd_err_set(err, nbd_netlink_nle_errno(r), "cannot build a route request");
                goto out;
        }
        r = nbd_netlink_call(nl, msg);
        nbd_netlink_sent(1);
        if (r < 0)
                nbd_err_set(err, r, "cannot %s the route to %s/%u: %s", add ? "add" : "delete",
                            addr_text(rt->family, rt->dst, text), rt->dst_len, strerror(-r));
out:
        nlmsg_free(msg);
        rtnl_route_put(o);
        return r;
}

int nbd_route_add(struct nbd_links *l, const struct nbd_route *r, struct nbd_err *err)
{
        return route_call(l, r, true, err);
}

static void route_from(struct nbd_links *l, struct rtnl_route *o, struct nbd_route *ret);

/* Does have (listed) fall under want (a request)? */
static bool route_matches(const struct nbd_route *want, const struct nbd_route *have)
{
        size_t alen = want->family == AF_INET ? 4 : 16;

        return have->family == want->family &&
               have->table == (want->table ? want->table : RT_TABLE_MAIN) &&
               have->dst_len == want->dst_len && memcmp(have->dst, want->dst, alen) == 0 &&
               (!want->metric || have->metric == want->metric) &&
               (!want->has_gw || (have->has_gw && memcmp(have->gw, want->gw, alen) == 0)) &&
               (!want->ifname[0] || strcmp(have->ifname, want->ifname) == 0);
}

/* The one unicast route r names, with a reference (rtnl_route_put). */
static int route_find(struct nbd_links *l, const struct nbd_route *r, struct rtnl_route **ret,
                      struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct rtnl_route *found = NULL;
        struct nl_cache *cache = NULL;
        char text[INET6_ADDRSTRLEN], metrics[96] = "";
        unsigned n = 0;
        size_t used = 0;
        int k;

        nbd_links_sync(l);
        nbd_netlink_begin(nl);
        k = rtnl_route_alloc_cache(nl->req, r->family, 0, &cache);
        nbd_netlink_sent(1);
        k = nbd_netlink_errno(nl, k);
        if (k < 0)
                return nbd_err_set(err, k, "cannot list routes: %s", strerror(-k));
        nbd_stats[NBD_STAT_ROUTES_DUMPED] += (uint64_t)nl_cache_nitems(cache);
        for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
                struct rtnl_route *rt = (struct rtnl_route *)o;
                struct nbd_route have;
                if (rtnl_route_get_type(rt) != RTN_UNICAST)
                        continue;
                route_from(l, rt, &have);
                if (!route_matches(r, &have))
                        continue;
                if (n++ == 0)
                        found = rt;
                if (used < sizeof(metrics))
                        used += (size_t)snprintf(metrics + used, sizeof(metrics) - used, "%s%u",
                                                 n > 1 ? ", " : "", have.metric);
        }
        if (n == 1) {
                rtnl_route_get(found);
                *ret = found;
                k = 0;
        } else if (n == 0) {
                k = nbd_err_set(err, -ESRCH, "no route to %s/%u matches",
                                addr_text(r->family, r->dst, text), r->dst_len);
        } else {
                k = nbd_err_set(err, -EINVAL,
                                "%u routes to %s/%u match (metrics %s): name the one to delete "
                                "by its metric, gateway or interface",
                                n, addr_text(r->family, r->dst, text), r->dst_len, metrics);
        }
        nl_cache_free(cache);
        return k;
}

/* Send o (the kernel's own, every attribute) as an add or a deletion. */
static int route_send(struct nbd_links *l, struct rtnl_route *o, bool add, struct nbd_err *err)
{
        struct nl_msg *msg = NULL;
        int r = add ? rtnl_route_build_add_request(o, NLM_F_CREATE | NLM_F_EXCL, &msg)
                    : rtnl_route_build_del_request(o, 0, &msg);

        if (r < 0)
                return nbd_err_set(err, nbd_netlink_nle_errno(r), "cannot build a route request");
        r = nbd_netlink_call(nbd_links_netlink(l), msg);
        nbd_netlink_sent(1);
        nlmsg_free(msg);
        return r;
}

int nbd_route_delete(struct nbd_links *l, const struct nbd_route *r,
                     struct nbd_route_saved **ret_saved, struct nbd_err *err)
{
        struct nbd_route_saved *s;
        struct rtnl_route *o = NULL;
        char text[INET6_ADDRSTRLEN];
        int k;

        if (!ret_saved)
                return route_call(l, r, false, err);
        s = calloc(1, sizeof(*s));
        if (!s)
                return nbd_err_oom(err, "deleting a route");
        k = route_find(l, r, &o, err);
        if (k == 0) {
                route_from(l, o, &s->rt);
                k = route_send(l, o, false, err);
                if (k < 0)
                        nbd_err_set(err, k, "cannot delete the route to %s/%u: %s",
                                    addr_text(r->family, r->dst, text), r->dst_len, strerror(-k));
        }
        if (k < 0) {
                rtnl_route_put(o);
                free(s);
                return k;
        }
        s->kernel = o;
        *ret_saved = s;
        return 0;
}

int nbd_route_restore(struct nbd_links *l, const struct nbd_route_saved *s, struct nbd_err *err)
{
        char text[INET6_ADDRSTRLEN];
        int k = s->kernel ? route_send(l, s->kernel, true, err) : route_call(l, &s->rt, true, err);

        if (k < 0)
                nbd_err_set(err, k, "cannot put back the route to %s/%u: %s",
                            addr_text(s->rt.family, s->rt.dst, text), s->rt.dst_len, strerror(-k));
        return k;
}

void nbd_route_saved_free(struct nbd_route_saved *s)
{
        if (!s)
                return;
        rtnl_route_put(s->kernel);
        free(s);
}

static void route_from(struct nbd_links *l, struct rtnl_route *o, struct nbd_route *ret)
{
        struct nl_addr *dst = rtnl_route_get_dst(o);
        struct rtnl_nexthop *nh =
                rtnl_route_get_nnexthops(o) > 0 ? rtnl_route_nexthop_n(o, 0) : NULL;
        struct nl_addr *gw = nh ? rtnl_route_nh_get_gateway(nh) : NULL;
        const char *name = nh ? nbd_links_name_of(l, rtnl_route_nh_get_ifindex(nh)) : NULL;

        memset(ret, 0, sizeof(*ret));
        ret->family = rtnl_route_get_family(o);
        if (dst) {
                memcpy(ret->dst, nl_addr_get_binary_addr(dst),
                       nl_addr_get_len(dst) < 16 ? nl_addr_get_len(dst) : 16);
                ret->dst_len = (unsigned)nl_addr_get_prefixlen(dst);
        }
        if (gw && nl_addr_get_len(gw) <= 16) {
                ret->has_gw = true;
                memcpy(ret->gw, nl_addr_get_binary_addr(gw), nl_addr_get_len(gw));
        }
        snprintf(ret->ifname, IFNAMSIZ, "%s", name ? name : "");
        ret->metric = rtnl_route_get_priority(o);
        ret->table = rtnl_route_get_table(o);
}

int nbd_route_list(struct nbd_links *l, unsigned table, struct nbd_route **ret, size_t *ret_n,
                   struct nbd_err *err)
{
        struct nbd_netlink *nl = nbd_links_netlink(l);
        struct nl_cache *cache = NULL;
        struct nbd_route *v = NULL;
        size_t n = 0;
        int r;

        if (!table)
                table = RT_TABLE_MAIN;
        nbd_links_sync(l);
        nbd_netlink_begin(nl);
        r = rtnl_route_alloc_cache(nl->req, AF_UNSPEC, 0, &cache);
        nbd_netlink_sent(1);
        r = nbd_netlink_errno(nl, r);
        if (r < 0)
                return nbd_err_set(err, r, "cannot list routes: %s", strerror(-r));
        nbd_stats[NBD_STAT_ROUTES_DUMPED] += (uint64_t)nl_cache_nitems(cache);
        v = calloc((size_t)nl_cache_nitems(cache) + 1, sizeof(*v));
        if (!v) {
                r = nbd_err_oom(err, "listing routes");
                goto out;
        }
        for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
                struct rtnl_route *rt = (struct rtnl_route *)o;
                int fam = rtnl_route_get_family(rt);
                if ((fam != AF_INET && fam != AF_INET6) || rtnl_route_get_table(rt) != table ||
                    rtnl_route_get_type(rt) != RTN_UNICAST)
                        continue;
                route_from(l, rt, &v[n++]);
        }
        *ret = v;
        *ret_n = n;
        v = NULL;
out:
        free(v);
        nl_cache_free(cache);
        return r;
}

/* ---- sysctls ---- */

static int sysctl_open(const char *rel, int flags, int *ret, struct nbd_err *err)
{
        char path[256];
        int fd;

        if (snprintf(path, sizeof(path), "/proc/sys/net/%s", rel) >= (int)sizeof(path))
                return nbd_err_set(err, -ENAMETOOLONG, "sysctl net/%s: name too long", rel);
        fd = open(path, flags | O_CLOEXEC);
        if (fd < 0)
                return nbd_err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        *ret = fd;
        return 0;
}

int nbd_sysctl_get(const char *rel, unsigned *ret, struct nbd_err *err)
{
        char buf[32];
        unsigned v;
        ssize_t n;
        int fd, r = sysctl_open(rel, O_RDONLY, &fd, err);

        if (r < 0)
                return r;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                r = nbd_err_set(err, -errno, "cannot read net/%s: %s", rel, strerror(errno));
        close(fd);
        if (r < 0)
                return r;
        buf[n] = '\0';
        if (sscanf(buf, "%u", &v) != 1)
                return nbd_err_set(err, -EIO, "net/%s holds '%s', not a number", rel, buf);
        *ret = v;
        return 0;
}

int nbd_sysctl_set(const char *rel, unsigned value, struct nbd_err *err)
{
        char buf[16];
        int len = snprintf(buf, sizeof(buf), "%u\n", value);
        int fd, r = sysctl_open(rel, O_WRONLY, &fd, err);
        ssize_t n;

        if (r < 0)
                return r;
        n = write(fd, buf, (size_t)len);
        /* The kernel takes a number whole or refuses it. */
        if (n != len) {
                r = n < 0 ? -errno : -EIO;
                nbd_err_set(err, r, "cannot write %u to net/%s: %s", value, rel, strerror(-r));
        }
        close(fd);
        return r;
}
