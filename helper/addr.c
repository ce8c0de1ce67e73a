// SPDX-License-Identifier: LGPL-2.1-or-later
/* Addresses, routes and net sysctls; see addr.h. */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* The name is left "": the lane must not read the interface map
 * (nbd_addr_names, on the loop, fills it). */
static void addr_from(struct rtnl_addr *o, struct nbd_addr *ret)
{
        struct nl_addr *local = rtnl_addr_get_local(o), *brd = rtnl_addr_get_broadcast(o);

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
}

/* The addresses (of ifindex only, when not 0) over nl. */
static int addr_read(struct nbd_netlink *nl, int ifindex, struct nbd_addr **ret, size_t *ret_n,
                     struct nbd_err *err)
{
        struct nl_cache *cache = NULL;
        struct nbd_addr *v = NULL;
        size_t n = 0;
        int r;

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
                addr_from(a, &v[n++]);
        }
        *ret = v;
        *ret_n = n;
        v = NULL;
out:
        free(v);
        nl_cache_free(cache);
        return r;
}

int nbd_addr_dump(int ifindex, struct nbd_addr **ret, size_t *ret_n, struct nbd_err *err)
{
        struct nbd_netlink own;
        int r = nbd_netlink_open_req(&own);

        if (r < 0)
                return nbd_err_set(err, r, "cannot open a socket to list addresses: %s",
                                   strerror(-r));
        r = addr_read(&own, ifindex, ret, ret_n, err);
        nbd_netlink_close(&own);
        return r;
}

void nbd_addr_names(struct nbd_links *l, struct nbd_addr *v, size_t n)
{
        nbd_links_sync(l); /* names of interfaces made meanwhile */
        for (size_t i = 0; i < n; i++) {
                const char *name = nbd_links_name_of(l, v[i].ifindex);
                snprintf(v[i].ifname, IFNAMSIZ, "%s", name ? name : "");
        }
}

/* ---- routes ---- */

/* The metric the kernel gives an IPv6 route added without one. */
#define IPV6_UNNAMED_METRIC 1024u

/* ---- route changes (issue 14) ----
 *
 * Lane-safe with l NULL, as the dumps below: a route change, and the read
 * a deletion makes to find and save its route, use r (its interface by the
 * index the loop looked up) and sockets of their own, one at a time;
 * counters through nbd_netlink_sent and nbd_stat_inc_shared only. On the
 * loop (an undo) a change goes over l's request socket: no fd more than
 * the helper counts on. */

static int route_object(const struct nbd_route *rt, bool add, struct rtnl_route **ret,
                        struct nbd_err *err)
{
        struct rtnl_route *o = rtnl_route_alloc();
        struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
        struct nl_addr *dst = build_addr(rt->family, rt->dst, rt->dst_len), *gw = NULL;
        int ifindex = rt->ifindex, r = 0;

        if (rt->ifname[0] && ifindex <= 0) {
                r = nbd_err_set(err, -ENODEV, "no interface %s", rt->ifname);
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

/* msg, and its ack, over l's request socket, or (l NULL: on a lane) a
 * socket of the call's own: 0 or -errno, the kernel's. When no socket
 * could be had: -errno with err set, and *ret_sent false. */
static int change_request(struct nbd_links *l, struct nl_msg *msg, bool *ret_sent,
                          struct nbd_err *err)
{
        struct nbd_netlink own;
        int r;

        *ret_sent = false;
        if (l) {
                r = nbd_netlink_call(nbd_links_netlink(l), msg);
        } else {
                r = nbd_netlink_open_req(&own);
                if (r < 0)
                        return nbd_err_set(err, r, "cannot open a socket to change routes: %s",
                                           strerror(-r));
                r = nbd_netlink_call(&own, msg);
                nbd_netlink_close(&own);
        }
        nbd_netlink_sent(1);
        *ret_sent = true;
        return r;
}

static int route_call(struct nbd_links *l, const struct nbd_route *rt, bool add,
                      struct nbd_err *err)
{
        struct rtnl_route *o = NULL;
        struct nl_msg *msg = NULL;
        char text[INET6_ADDRSTRLEN];
        bool sent;
        int r = route_object(rt, add, &o, err);

        if (r < 0)
                return r;
        r = add ? rtnl_route_build_add_request(o, NLM_F_CREATE | NLM_F_EXCL, &msg)
                : rtnl_route_build_del_request(o, 0, &msg);
        if (r < 0) {
                r = nbd_err_set(err, nbd_netlink_nle_errno(r), "cannot build a route request");
                goto out;
        }
        r = change_request(l, msg, &sent, err);
        if (r < 0 && sent)
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

static void route_from_kernel(struct rtnl_route *o, struct nbd_route *ret);

/* Does have (listed) fall under want (a request)? */
static bool route_matches(const struct nbd_route *want, const struct nbd_route *have)
{
        size_t alen = want->family == AF_INET ? 4 : 16;

        return have->family == want->family &&
               have->table == (want->table ? want->table : RT_TABLE_MAIN) &&
               have->dst_len == want->dst_len && memcmp(have->dst, want->dst, alen) == 0 &&
               (!want->metric || have->metric == want->metric) &&
               (!want->has_gw || (have->has_gw && memcmp(have->gw, want->gw, alen) == 0)) &&
               (!want->ifname[0] || have->ifindex == want->ifindex);
}

/* ---- route dumps (issue 14) ----
 *
 * libnl's route cache is a dump of every route: every family, table and
 * type, whatever the op wants, and the cache's cost grows faster than the
 * table (300,000 blackholes made a non-root caller's RouteList of its one
 * route hold the helper for 29 s). The kernel filters a route dump by
 * table, type and outgoing interface when the socket asks for strict
 * checking (NETLINK_GET_STRICT_CHK, Linux 4.20), and says that it did
 * (NLM_F_DUMP_FILTERED): a dump here asks for one family, one table,
 * unicast routes, through one interface wanted, and brings in what the op
 * shows. Every route that comes is checked here all the same; a kernel
 * that ignores the filter sends the family's every route, which is
 * filtered here, in one dump per family.
 *
 * Lane-safe: a socket of the dump's own (the loop's request socket keeps
 * the lax checks that libnl's link and address dumps need), no names, no
 * logging, nbd_stat_inc_shared only. */

/* More interfaces than this: one dump of the family's table, filtered
 * here, instead of a kernel walk of the table for each of them. */
#define ROUTE_DUMP_OIFS_MAX 8
/* A dump that a change interrupted is asked again, this many times in all. */
#define ROUTE_DUMP_TRIES 5

struct route_set {
        struct rtnl_route **v;
        size_t n, cap;
};

static void route_set_truncate(struct route_set *s, size_t n)
{
        while (s->n > n)
                rtnl_route_put(s->v[--s->n]);
}

static void route_set_free(struct route_set *s)
{
        route_set_truncate(s, 0);
        free(s->v);
        *s = (struct route_set){0};
}

static int route_set_add(struct route_set *s, struct rtnl_route *o)
{
        if (s->n == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 16;
                struct rtnl_route **v = realloc(s->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        s->v[s->n++] = o;
        return 0;
}

/* The interface of a route's first nexthop (the one a listing shows), 0
 * when it has none. */
static int route_oif(struct rtnl_route *o)
{
        struct rtnl_nexthop *nh =
                rtnl_route_get_nnexthops(o) > 0 ? rtnl_route_nexthop_n(o, 0) : NULL;

        return nh ? rtnl_route_nh_get_ifindex(nh) : 0;
}

/* One dump under way, shared with the socket's callbacks. */
struct route_dump {
        const struct nbd_route_filter *f;
        int family;
        unsigned table;
        int oif; /* asked of the kernel; 0: none */
        bool filtered; /* the kernel says it filtered (NLM_F_DUMP_FILTERED) */
        int kernel_errno; /* negative: an error ack, or NLMSG_DONE's error */
        int r; /* negative: the dump's own failure (no memory, a bad route) */
        struct route_set *s;
};

static bool oif_wanted(const struct route_dump *d, int oif, bool filtered)
{
        if (!d->f->by_oif)
                return true;
        /* The kernel sends what goes through d->oif on any nexthop: a
         * multipath route over two wanted interfaces comes in both their
         * dumps, and is taken in the one of its first nexthop's. */
        if (filtered && d->oif)
                return oif == d->oif;
        for (size_t i = 0; i < d->f->n_oifs; i++)
                if (d->f->oifs[i] == oif)
                        return true;
        return false;
}

static int dump_msg_in(struct nl_msg *msg, void *arg)
{
        struct route_dump *d = arg;
        struct nlmsghdr *h = nlmsg_hdr(msg);

        if (h->nlmsg_flags & NLM_F_DUMP_FILTERED)
                d->filtered = true;
        /* A dump's failure after it began (no such table, a bad request)
         * comes as NLMSG_DONE's payload, which libnl does not read. */
        if (h->nlmsg_type == NLMSG_DONE && nlmsg_datalen(h) >= (int)sizeof(int)) {
                int e;
                memcpy(&e, nlmsg_data(h), sizeof(e));
                if (e < 0)
                        d->kernel_errno = e;
        }
        return NL_OK;
}

static int dump_valid(struct nl_msg *msg, void *arg)
{
        struct route_dump *d = arg;
        struct nlmsghdr *h = nlmsg_hdr(msg);
        struct rtnl_route *o = NULL;
        int r;

        if (h->nlmsg_type != RTM_NEWROUTE)
                return NL_SKIP;
        nbd_stat_inc_shared(NBD_STAT_ROUTES_DUMPED);
        r = rtnl_route_parse(h, &o);
        if (r < 0) {
                d->r = nbd_netlink_nle_errno(r);
                return NL_STOP;
        }
        if (rtnl_route_get_family(o) != d->family || rtnl_route_get_table(o) != d->table ||
            rtnl_route_get_type(o) != RTN_UNICAST ||
            !oif_wanted(d, route_oif(o), h->nlmsg_flags & NLM_F_DUMP_FILTERED)) {
                rtnl_route_put(o);
                return NL_OK;
        }
        if (route_set_add(d->s, o) < 0) {
                rtnl_route_put(o);
                d->r = -ENOMEM;
                return NL_STOP;
        }
        return NL_OK;
}

static int dump_error(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
        struct route_dump *d = arg;

        (void)who;
        d->kernel_errno = e->error;
        return NL_STOP;
}

/* A socket for dumps into d: 0 or -errno. */
static int route_socket(struct route_dump *d, struct nl_sock **ret)
{
        struct nl_sock *sk = nl_socket_alloc();
        int one = 1, r;

        if (!sk)
                return -ENOMEM;
        r = nl_connect(sk, NETLINK_ROUTE);
        if (r < 0) {
                nl_socket_free(sk);
                return nbd_netlink_nle_errno(r);
        }
        /* Refused before Linux 4.20, which ignores the filter: the dump
         * brings in the family's every route, and they are filtered here. */
        (void)setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one,
                         sizeof(one));
        nl_socket_modify_cb(sk, NL_CB_MSG_IN, NL_CB_CUSTOM, dump_msg_in, d);
        nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, dump_valid, d);
        nl_socket_modify_err_cb(sk, NL_CB_CUSTOM, dump_error, d);
        *ret = sk;
        return 0;
}

/* One dump of d's family, table and interface into d->s: 0, -EINTR (a
 * change interrupted it) or -errno. */
static int route_dump_one(struct nl_sock *sk, struct route_dump *d)
{
        struct rtmsg rtm = {
                .rtm_family = (unsigned char)d->family,
                .rtm_table = d->table < 256 ? (unsigned char)d->table : RT_TABLE_UNSPEC,
                .rtm_type = RTN_UNICAST,
        };
        struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_DUMP);
        int r;

        if (!msg)
                return -ENOMEM;
        if (nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 ||
            nla_put_u32(msg, RTA_TABLE, d->table) < 0 ||
            (d->oif && nla_put_u32(msg, RTA_OIF, (uint32_t)d->oif) < 0)) {
                nlmsg_free(msg);
                return -ENOMEM;
        }
        d->filtered = false;
        d->kernel_errno = 0;
        d->r = 0;
        r = nl_send_auto(sk, msg);
        nlmsg_free(msg);
        if (r >= 0)
                r = nl_recvmsgs_default(sk);
        if (d->r < 0)
                return d->r;
        if (r == -NLE_DUMP_INTR)
                return -EINTR;
        if (d->kernel_errno < 0)
                return d->kernel_errno;
        return r < 0 ? nbd_netlink_nle_errno(r) : 0;
}

/* The unicast routes of d->f's table in family (through its interfaces,
 * if it names some) into d->s; *sent counts the requests. 0 or -errno. */
static int route_dump_family(struct nl_sock *sk, struct route_dump *d, int family, unsigned *sent)
{
        const struct nbd_route_filter *f = d->f;
        bool per_oif = f->by_oif && f->n_oifs <= ROUTE_DUMP_OIFS_MAX;
        size_t n = per_oif ? f->n_oifs : 1;

        if (f->by_oif && !f->n_oifs)
                return 0;
        d->family = family;
        d->table = f->table ? f->table : RT_TABLE_MAIN;
        for (size_t i = 0; i < n; i++) {
                size_t mark = d->s->n;
                int r = -EINTR;
                d->oif = per_oif ? f->oifs[i] : 0;
                if (per_oif && d->oif <= 0)
                        continue; /* 0 would ask for every interface */
                for (int t = 0; t < ROUTE_DUMP_TRIES && r == -EINTR; t++) {
                        route_set_truncate(d->s, mark);
                        r = route_dump_one(sk, d);
                        (*sent)++;
                }
                if (r == -EINTR)
                        return -EAGAIN;
                /* No such table in this family, or the interface went
                 * away meanwhile: nothing of theirs to list. */
                if (r == -ENOENT || r == -ENODEV)
                        r = 0;
                if (r < 0)
                        return r;
                /* A kernel that does not filter sent the whole family:
                 * every wanted interface's routes are in already. */
                if (!d->filtered)
                        break;
        }
        return 0;
}

/* The routes of f in family (AF_UNSPEC: IPv4 and IPv6) into s, over a
 * socket of their own. 0 or -errno, with err set. */
static int route_dump(const struct nbd_route_filter *f, int family, struct route_set *s,
                      unsigned *sent, struct nbd_err *err)
{
        struct route_dump d = {.f = f, .s = s};
        struct nl_sock *sk = NULL;
        int r = route_socket(&d, &sk);

        if (r < 0)
                return nbd_err_set(err, r, "cannot open a socket to list routes: %s", strerror(-r));
        if (family == AF_UNSPEC) {
                r = route_dump_family(sk, &d, AF_INET, sent);
                if (r == 0)
                        r = route_dump_family(sk, &d, AF_INET6, sent);
        } else {
                r = route_dump_family(sk, &d, family, sent);
        }
        nl_socket_free(sk);
        if (r == -EAGAIN)
                return nbd_err_set(err, r,
                                   "the routes kept changing while they were read (asked %d "
                                   "times): ask again",
                                   ROUTE_DUMP_TRIES);
        if (r < 0)
                return nbd_err_set(err, r, "cannot list routes: %s", strerror(-r));
        return 0;
}

/* The one unicast route r names, with a reference (rtnl_route_put). Its
 * interface, when r names one, is asked of the kernel: the dump is of the
 * routes through it, not of the whole table. Without one, the dump is of
 * the family's table (the kernel filters a dump by table, type and
 * interface only): 300,000 routes took 0.3-0.45 s, which is why a
 * deletion runs on the links' lane. */
static int route_find(const struct nbd_route *r, struct rtnl_route **ret, struct nbd_err *err)
{
        struct nbd_route_filter f = {.table = r->table};
        struct rtnl_route *found = NULL;
        struct route_set s = {0};
        char text[INET6_ADDRSTRLEN], metrics[96] = "";
        unsigned n = 0, sent = 0;
        size_t used = 0;
        int k;

        if (r->ifname[0]) {
                if (r->ifindex <= 0)
                        return nbd_err_set(err, -ENODEV, "no interface %s", r->ifname);
                f.by_oif = true;
                f.oifs = &r->ifindex;
                f.n_oifs = 1;
        }
        k = route_dump(&f, r->family, &s, &sent, err);
        nbd_netlink_sent(sent);
        if (k < 0)
                return k;
        for (size_t i = 0; i < s.n; i++) {
                struct nbd_route have;
                route_from_kernel(s.v[i], &have);
                if (!route_matches(r, &have))
                        continue;
                if (n++ == 0)
                        found = s.v[i];
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
        route_set_free(&s);
        return k;
}
/* Send o (the kernel's own, every attribute) as an add or a deletion: 0,
 * or -errno (err set when no request could be sent: *ret_sent false). */
static int route_send(struct nbd_links *l, struct rtnl_route *o, bool add, bool *ret_sent,
                      struct nbd_err *err)
{
        struct nl_msg *msg = NULL;
        int r = add ? rtnl_route_build_add_request(o, NLM_F_CREATE | NLM_F_EXCL, &msg)
                    : rtnl_route_build_del_request(o, 0, &msg);

        *ret_sent = false;
        if (r < 0)
                return nbd_err_set(err, nbd_netlink_nle_errno(r), "cannot build a route request");
        r = change_request(l, msg, ret_sent, err);
        nlmsg_free(msg);
        return r;
}

int nbd_route_delete(struct nbd_links *l, const struct nbd_route *r,
                     struct nbd_route_saved **ret_saved, struct nbd_err *err)
{
        struct nbd_route_saved *s;
        struct rtnl_route *o = NULL;
        char text[INET6_ADDRSTRLEN];
        bool sent;
        int k;

        if (!ret_saved)
                return route_call(l, r, false, err);
        s = calloc(1, sizeof(*s));
        if (!s)
                return nbd_err_oom(err, "deleting a route");
        k = route_find(r, &o, err);
        if (k == 0) {
                route_from_kernel(o, &s->rt);
                k = route_send(l, o, false, &sent, err);
                if (k < 0 && sent)
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
        bool sent = true;
        int k = s->kernel ? route_send(l, s->kernel, true, &sent, err)
                          : route_call(l, &s->rt, true, err);

        if (k < 0 && sent)
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

/* Everything of o but the interface's name (ifindex is set). */
static void route_from_kernel(struct rtnl_route *o, struct nbd_route *ret)
{
        struct nl_addr *dst = rtnl_route_get_dst(o);
        struct rtnl_nexthop *nh =
                rtnl_route_get_nnexthops(o) > 0 ? rtnl_route_nexthop_n(o, 0) : NULL;
        struct nl_addr *gw = nh ? rtnl_route_nh_get_gateway(nh) : NULL;

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
        ret->ifindex = route_oif(o);
        ret->metric = rtnl_route_get_priority(o);
        ret->table = rtnl_route_get_table(o);
}

int nbd_route_list(struct nbd_links *l, const struct nbd_route_filter *f, struct nbd_route **ret,
                   size_t *ret_n, unsigned *ret_sent, struct nbd_err *err)
{
        struct route_set s = {0};
        struct nbd_route *v = NULL;
        unsigned sent = 0;
        int r;

        (void)l; /* on the links' lane: the loop's */
        r = route_dump(f, AF_UNSPEC, &s, &sent, err);
        if (r == 0 && !(v = calloc(s.n ? s.n : 1, sizeof(*v))))
                r = nbd_err_oom(err, "listing routes");
        if (r == 0) {
                for (size_t i = 0; i < s.n; i++)
                        route_from_kernel(s.v[i], &v[i]);
                *ret = v;
                *ret_n = s.n;
        }
        *ret_sent = sent;
        route_set_free(&s);
        return r;
}

void nbd_route_names(struct nbd_links *l, struct nbd_route *v, size_t n)
{
        nbd_links_sync(l);
        for (size_t i = 0; i < n; i++) {
                const char *name = v[i].ifindex ? nbd_links_name_of(l, v[i].ifindex) : NULL;
                snprintf(v[i].ifname, IFNAMSIZ, "%s", name ? name : "");
        }
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
