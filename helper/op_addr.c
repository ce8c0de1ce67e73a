// SPDX-License-Identifier: LGPL-2.1-or-later
/* Address, route and sysctl ops (virtual networks, part 1): protobuf in,
 * addr.h calls out. Validation parses every address and checks every
 * interface against the caller's ownership before the batch runs; each
 * change records how to undo it should a later op of the batch fail. They
 * need the links' capability, so they run in the links' order (behind a
 * LinkDelete's group deletion on the links' lane): an address change or
 * sysctl op is one short rtnetlink request, or a write under
 * /proc/sys/net, on the loop, as LinkSet is; what grows with the
 * namespace runs on the links' lane: the reads of every address
 * (AddrList's, AddrDelete's) and a route op's kernel work (RouteList's
 * dumps, a RouteDelete's read of its table, every route change). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "backend.h"
#include "lane.h" /* nbd_test_hold_point */
#include "netlink.h" /* nbd_netlink_sent */
#include "ops.h"

static struct nbd_links *links_of(const struct nbd_job *job)
{
        return nbd_job_ctx(job)->links;
}

static const struct nbd_backend *be_of(const struct nbd_job *job)
{
        return nbd_job_ctx(job)->be;
}

/* "10.0.0.1" or "fd00::1" into bytes; 0 or -EINVAL. */
static int parse_ip(const char *text, int *ret_family, uint8_t ret[16])
{
        uint8_t b[16] = {0};

        if (inet_pton(AF_INET, text, b) == 1) {
                *ret_family = AF_INET;
        } else if (inet_pton(AF_INET6, text, b) == 1) {
                *ret_family = AF_INET6;
        } else {
                return -EINVAL;
        }
        memcpy(ret, b, 16);
        return 0;
}

static unsigned max_prefix(int family)
{
        return family == AF_INET ? 32 : 128;
}

static const char *ip_text(int family, const uint8_t *b, char buf[INET6_ADDRSTRLEN])
{
        if (!inet_ntop(family, b, buf, INET6_ADDRSTRLEN))
                buf[0] = '\0';
        return buf;
}

/* An interface the op names: it exists (or an earlier op makes it) and
 * the caller owns it. */
static int check_iface(struct nbd_validation *v, const char *name, Netbroker__Result *res,
                       const char *what)
{
        int r = nbd_check_interface(v, name, res, what);

        return r ? r : nbd_check_owned(v, name, res);
}

/* ---- addresses ---- */

/* An address op's fields into a, or res set (EINVAL). */
static int parse_addr(const char *ifname, const char *address, uint32_t prefix_len, const char *brd,
                      bool noprefixroute, struct nbd_addr *a, Netbroker__Result *res,
                      const char *what)
{
        memset(a, 0, sizeof(*a));
        if (parse_ip(address, &a->family, a->addr) < 0)
                return nbd_result_set(res, -EINVAL,
                                      "%s: '%s' is not an IPv4 or IPv6 address (want 10.0.0.1 or "
                                      "fd00::1)",
                                      what, address);
        if (prefix_len > max_prefix(a->family))
                return nbd_result_set(res, -EINVAL, "%s: prefix length %u is over %u for %s", what,
                                      prefix_len, max_prefix(a->family),
                                      a->family == AF_INET ? "IPv4" : "IPv6");
        a->prefix_len = prefix_len;
        if (brd && brd[0]) {
                if (a->family != AF_INET || inet_pton(AF_INET, brd, a->brd) != 1)
                        return nbd_result_set(res, -EINVAL,
                                              "%s: broadcast '%s' is not an IPv4 address (and "
                                              "only IPv4 addresses have one)",
                                              what, brd);
                a->has_brd = true;
        }
        a->noprefixroute = noprefixroute;
        snprintf(a->ifname, sizeof(a->ifname), "%s", ifname);
        return 0;
}

/* An address or a route redirects the host's own traffic, whatever
 * interface it is on: an address is local to the whole host (traffic to
 * the host's gateway or DNS server, given to a bridge, stays here), a route
 * sends a destination to the bridge. Only root adds either, and removes a
 * route; a caller may remove an address from an interface of its own. */
static int root_only(const struct nbd_validation *v, Netbroker__Result *res, const char *what)
{
        if (nbd_peer_is_root(v->peer))
                return 0;
        return nbd_result_set(res, -EPERM,
                              "policy: uid %u may not %s: it redirects the host's own traffic, "
                              "on whatever interface (only root may)",
                              (unsigned)v->peer->uid, what);
}

static int validate_addr_add(struct nbd_validation *v, const Netbroker__Op *op,
                             Netbroker__Result *res)
{
        const Netbroker__AddrAdd *m = op->addr_add;
        struct nbd_addr a;
        int r = check_iface(v, m->ifname, res, "addr add");

        if (!r)
                r = root_only(v, res, "add an address");

        return r ? r
                 : parse_addr(m->ifname, m->address, m->prefix_len, m->broadcast, m->noprefixroute,
                              &a, res, "addr add");
}

static int validate_addr_delete(struct nbd_validation *v, const Netbroker__Op *op,
                                Netbroker__Result *res)
{
        const Netbroker__AddrDelete *m = op->addr_delete;
        struct nbd_addr a;
        int r = check_iface(v, m->ifname, res, "addr delete");

        return r ? r
                 : parse_addr(m->ifname, m->address, m->prefix_len, NULL, false, &a, res,
                              "addr delete");
}

struct undo_addr {
        struct nbd_addr a;
        bool add; /* undo by adding it back (else by deleting it) */
        int ifindex; /* the interface the op changed */
};

static void undo_addr(struct nbd_job *job, void *data)
{
        struct undo_addr *u = data;

        if (u->add)
                be_of(job)->net.addr_add(links_of(job), &u->a, NULL);
        else
                be_of(job)->net.addr_delete(links_of(job), &u->a, NULL);
}

/* A later op's failure: the address goes back on (or off) the interface
 * the op changed, not another that took its name since (op_link.c's
 * undo). */
static int undo_addr_later(struct nbd_job *job, void *data, struct nbd_err *err)
{
        struct undo_addr *u = data;
        int r = nbd_job_check_undo(job, u->a.ifname, u->ifindex, err);

        if (r < 0)
                return r;
        if (u->add)
                return be_of(job)->net.addr_add(links_of(job), &u->a, err);
        return be_of(job)->net.addr_delete(links_of(job), &u->a, err);
}

/* After a change: how to undo it. On failure (no memory) the change is
 * undone here and the op fails. */
static int remember_addr(struct nbd_job *job, const struct nbd_addr *a, bool add,
                         Netbroker__Result *res, const char *what)
{
        struct undo_addr *u = calloc(1, sizeof(*u));

        if (u) {
                u->a = *a;
                u->add = add;
                u->ifindex = nbd_job_ifindex(job, a->ifname);
                /* frees u */
                if (nbd_job_on_failure_undo_checked(job, undo_addr_later, free, u, u->ifindex) == 0)
                        return 0;
        }
        undo_addr(job, &(struct undo_addr){.a = *a, .add = add});
        return nbd_result_set(res, -ENOMEM, "%s: out of memory", what);
}

static int run_addr_add(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__AddrAdd *m = op->addr_add;
        struct nbd_addr a;
        struct nbd_err err;
        int r;

        if ((r = nbd_job_check_owned(job, m->ifname, res)) ||
            (r = parse_addr(m->ifname, m->address, m->prefix_len, m->broadcast, m->noprefixroute,
                            &a, res, "addr add")))
                return r;
        r = be_of(job)->net.addr_add(links_of(job), &a, &err);
        if (r == -EEXIST)
                return nbd_result_set(res, r, "addr add: %s has %s/%u already", m->ifname,
                                      m->address, m->prefix_len);
        if (r < 0)
                return nbd_result_set(res, r, "addr add: %s", err.msg);
        return remember_addr(job, &a, false, res, "addr add");
}

/* AddrDelete reads the interface's addresses to find the one it deletes
 * (its broadcast and flags, to put it back as it was). The kernel sends
 * every address of the namespace, so the read runs on the links' lane
 * (issue 14: nbd_job_on_lane_first), over a socket of its own, and the
 * op, run again when it is in, deletes on the loop. The job's slot holds
 * the read between the two runs; the job frees it. */
struct addr_find {
        const struct nbd_backend *be;
        size_t op; /* the op it is for (nbd_job_op_index) */
        int ifindex;
        struct nbd_addr *v;
        size_t n;
        struct nbd_err err;
        int r;
};

static const char addr_find_key;

static void addr_find_free(void *data)
{
        struct addr_find *w = data;

        free(w->v);
        free(w);
}

/* On the links' lane (or here, without one). */
static void addr_find_read(void *data)
{
        struct addr_find *w = data;

        w->r = w->be->net.addr_dump(w->ifindex, &w->v, &w->n, &w->err);
        nbd_test_hold_point("ADDR_DELETE_READ");
}

/* The addresses of ifname: 0 with *ret_w the read (w->r says how it
 * went; the job frees w); 0 with *ret_w NULL when the read went to the
 * lane (res untouched: the op runs again when it is in); -errno, res
 * set. */
static int addr_find_first(struct nbd_job *job, const char *ifname, Netbroker__Result *res,
                           struct addr_find **ret_w)
{
        void **slot = nbd_job_slot(job, &addr_find_key);
        struct addr_find *w;
        int r;

        *ret_w = NULL;
        if (slot && *slot) {
                /* Run again: the read is in. Another op's (this op's checks
                 * failed when it ran again) is not this one's: read anew. */
                w = *slot;
                *slot = NULL;
                if (w->op == nbd_job_op_index(job)) {
                        *ret_w = w;
                        return 0;
                }
        }
        w = calloc(1, sizeof(*w));
        if (!w)
                return nbd_result_set(res, -ENOMEM, "addr delete: out of memory");
        w->be = be_of(job);
        w->op = nbd_job_op_index(job);
        r = w->be->links.ifindex(links_of(job), ifname, &w->ifindex);
        if (r < 0) {
                free(w);
                return nbd_result_set(res, r, "addr delete: no interface %s", ifname);
        }
        if (nbd_job_keep(job, addr_find_free, w) < 0) /* frees w */
                return nbd_result_set(res, -ENOMEM, "addr delete: out of memory");
        if (slot) {
                *slot = w;
                if (nbd_job_on_lane_first(job, NBD_NEEDS_LINKS, addr_find_read, w))
                        return 0;
                *slot = NULL;
        } else {
                /* Every slot taken (a batch of many kinds): read here. */
                addr_find_read(w);
        }
        *ret_w = w;
        return 0;
}

/* The address as the interface has it: 0, or -EADDRNOTAVAIL. */
static int find_addr(const struct addr_find *w, const struct nbd_addr *want, struct nbd_addr *ret)
{
        for (size_t i = 0; i < w->n; i++)
                if (w->v[i].family == want->family && w->v[i].prefix_len == want->prefix_len &&
                    memcmp(w->v[i].addr, want->addr, want->family == AF_INET ? 4 : 16) == 0) {
                        *ret = w->v[i];
                        snprintf(ret->ifname, sizeof(ret->ifname), "%s", want->ifname);
                        return 0;
                }
        return -EADDRNOTAVAIL;
}

static int run_addr_delete(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__AddrDelete *m = op->addr_delete;
        struct nbd_addr want, had;
        struct addr_find *w;
        struct nbd_err err;
        int r;

        if ((r = nbd_job_check_owned(job, m->ifname, res)) ||
            (r = parse_addr(m->ifname, m->address, m->prefix_len, NULL, false, &want, res,
                            "addr delete")) ||
            (r = addr_find_first(job, m->ifname, res, &w)) || !w)
                return r;
        if (w->r < 0)
                return nbd_result_set(res, w->r, "addr delete: %s", w->err.msg);
        r = find_addr(w, &want, &had);
        free(w->v); /* the rest of w stays with the job until it ends */
        w->v = NULL;
        w->n = 0;
        if (r == -EADDRNOTAVAIL) /* clean-up that finds nothing to clean */
                return nbd_result_set(res, 0, "addr delete: %s does not have %s/%u: nothing to do",
                                      m->ifname, m->address, m->prefix_len);
        r = be_of(job)->net.addr_delete(links_of(job), &had, &err);
        if (r < 0)
                return nbd_result_set(res, r, "addr delete: %s", err.msg);
        return remember_addr(job, &had, true, res, "addr delete");
}

static int validate_addr_list(struct nbd_validation *v, const Netbroker__Op *op,
                              Netbroker__Result *res)
{
        const char *name = op->addr_list->ifname;

        return name[0] ? check_iface(v, name, res, "addr list") : 0;
}

/* A non-root caller sees what is on its own interfaces only. */
static bool may_see(struct nbd_job *job, const char *ifname)
{
        const struct nbd_peer *p = nbd_job_peer(job);
        uid_t owner;

        if (nbd_peer_is_root(p))
                return true;
        return ifname[0] && be_of(job)->links.owner(links_of(job), ifname, &owner) == 0 &&
               owner == p->uid;
}

static int add_addr_info(Netbroker__AddrListResult *l, const struct nbd_addr *a)
{
        Netbroker__AddrInfo *o = malloc(sizeof(*o));
        char text[INET6_ADDRSTRLEN];

        if (!o)
                return -ENOMEM;
        netbroker__addr_info__init(o);
        l->addrs[l->n_addrs++] = o; /* freed with the result from here on */
        o->ifindex = a->ifindex;
        o->prefix_len = a->prefix_len;
        o->noprefixroute = a->noprefixroute;
        o->scope = a->scope;
        if (!(o->ifname = strdup(a->ifname)) ||
            !(o->address = strdup(ip_text(a->family, a->addr, text))) ||
            (a->has_brd && !(o->broadcast = strdup(ip_text(AF_INET, a->brd, text))))) {
                o->ifname = o->ifname ? o->ifname : (char *)protobuf_c_empty_string;
                o->address = o->address ? o->address : (char *)protobuf_c_empty_string;
                o->broadcast = (char *)protobuf_c_empty_string;
                return -ENOMEM;
        }
        return 0;
}

/* An AddrList's dump runs on the links' lane (issue 14): the kernel sends
 * the whole namespace's addresses (16,000 held the loop for tens of
 * milliseconds). The loop looks the named interface up before, and, after,
 * names the addresses' interfaces and keeps those the caller may see. */
struct addr_listing {
        const struct nbd_backend *be;
        struct nbd_links *links;
        Netbroker__Result *res;
        int ifindex; /* 0: every interface */
        struct nbd_addr *v;
        size_t n;
        struct nbd_err err;
        int r;
};

static void addr_listing_free(void *data)
{
        struct addr_listing *w = data;

        free(w->v);
        free(w);
}

/* On the links' lane. */
static void addr_listing_read(void *data)
{
        struct addr_listing *w = data;

        w->r = w->be->net.addr_dump(w->ifindex, &w->v, &w->n, &w->err);
        nbd_test_hold_point("ADDR_LIST_READ");
}

static void addr_listing_done(struct nbd_job *job, void *data)
{
        struct addr_listing *w = data;
        Netbroker__AddrListResult *l = w->res->addr_list;
        int r = w->r;

        if (r < 0) {
                nbd_result_set(w->res, r, "addr list: %s", w->err.msg);
                return;
        }
        w->be->net.addr_names(w->links, w->v, w->n);
        l->addrs = calloc(w->n ? w->n : 1, sizeof(*l->addrs));
        r = l->addrs ? 0 : -ENOMEM;
        for (size_t i = 0; i < w->n && r == 0; i++)
                if (may_see(job, w->v[i].ifname))
                        r = add_addr_info(l, &w->v[i]);
        free(w->v);
        w->v = NULL;
        if (r < 0)
                nbd_result_set(w->res, r, "addr list: out of memory");
}

static int run_addr_list(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *name = op->addr_list->ifname;
        Netbroker__AddrListResult *l = malloc(sizeof(*l));
        struct addr_listing *w;
        int r;

        if (!l)
                return nbd_result_set(res, -ENOMEM, "addr list: out of memory");
        netbroker__addr_list_result__init(l);
        res->out_case = NETBROKER__RESULT__OUT_ADDR_LIST;
        res->addr_list = l;
        if (name[0] && (r = nbd_job_check_owned(job, name, res)))
                return r;
        w = calloc(1, sizeof(*w));
        if (!w)
                return nbd_result_set(res, -ENOMEM, "addr list: out of memory");
        *w = (struct addr_listing){.be = be_of(job), .links = links_of(job), .res = res};
        if (name[0] && (r = w->be->links.ifindex(w->links, name, &w->ifindex)) < 0) {
                addr_listing_free(w);
                return nbd_result_set(res, r, "addr list: no interface %s", name);
        }
        if (nbd_job_keep(job, addr_listing_free, w) < 0)
                return nbd_result_set(res, -ENOMEM, "addr list: out of memory"); /* w freed */
        nbd_job_on_lane_read(job, NBD_NEEDS_LINKS, addr_listing_read, addr_listing_done, w);
        return -(int)res->status;
}

/* ---- routes ---- */

struct route_fields {
        const char *destination, *gateway, *ifname;
        uint32_t prefix_len, metric, table;
        bool ipv6;
};

static int parse_route(struct nbd_validation *v, const struct route_fields *f,
                       const struct nbd_peer *peer, struct nbd_route *rt, Netbroker__Result *res,
                       const char *what)
{
        int gw_family = 0;

        memset(rt, 0, sizeof(*rt));
        rt->family = f->ipv6 ? AF_INET6 : AF_INET;
        if (f->destination[0] && parse_ip(f->destination, &rt->family, rt->dst) < 0)
                return nbd_result_set(res, -EINVAL, "%s: destination '%s' is not an IP address",
                                      what, f->destination);
        if (f->gateway[0]) {
                if (parse_ip(f->gateway, &gw_family, rt->gw) < 0)
                        return nbd_result_set(res, -EINVAL, "%s: gateway '%s' is not an IP address",
                                              what, f->gateway);
                if (!f->destination[0])
                        rt->family = gw_family;
                if (gw_family != rt->family)
                        return nbd_result_set(res, -EINVAL,
                                              "%s: gateway %s and destination are of different "
                                              "families",
                                              what, f->gateway);
                rt->has_gw = true;
        }
        if (f->prefix_len > max_prefix(rt->family))
                return nbd_result_set(res, -EINVAL, "%s: prefix length %u is over %u", what,
                                      f->prefix_len, max_prefix(rt->family));
        if (!f->destination[0] && f->prefix_len)
                return nbd_result_set(res, -EINVAL,
                                      "%s: a prefix length without a destination (the default "
                                      "route has prefix length 0)",
                                      what);
        if (!f->ifname[0] && !f->gateway[0])
                return nbd_result_set(res, -EINVAL, "%s: neither a gateway nor an interface", what);
        /* A caller that is not root changes routes through its own
         * interfaces only. */
        if (!f->ifname[0] && !nbd_peer_is_root(peer))
                return nbd_result_set(res, -EPERM,
                                      "%s: policy: uid %u must name an interface it owns", what,
                                      (unsigned)peer->uid);
        if (f->table > 0xfffffffeu)
                return nbd_result_set(res, -EINVAL, "%s: bad table %u", what, f->table);
        rt->dst_len = f->prefix_len;
        rt->metric = f->metric;
        rt->table = f->table;
        snprintf(rt->ifname, sizeof(rt->ifname), "%s", f->ifname);
        if (v && f->ifname[0])
                return check_iface(v, f->ifname, res, what);
        return 0;
}

#define ROUTE_FIELDS(m)                                                                            \
        (struct route_fields)                                                                      \
        {                                                                                          \
                .destination = (m)->destination, .gateway = (m)->gateway, .ifname = (m)->ifname,   \
                .prefix_len = (m)->prefix_len, .metric = (m)->metric, .table = (m)->table,         \
                .ipv6 = (m)->ipv6                                                                  \
        }

static int validate_route_add(struct nbd_validation *v, const Netbroker__Op *op,
                              Netbroker__Result *res)
{
        struct nbd_route rt;
        int r = parse_route(v, &ROUTE_FIELDS(op->route_add), v->peer, &rt, res, "route add");

        return r ? r : root_only(v, res, "add a route");
}

static int validate_route_delete(struct nbd_validation *v, const Netbroker__Op *op,
                                 Netbroker__Result *res)
{
        struct nbd_route rt;
        int r = parse_route(v, &ROUTE_FIELDS(op->route_delete), v->peer, &rt, res, "route delete");

        return r ? r : root_only(v, res, "delete a route");
}

/* A route change runs on the links' lane (issue 14). A deletion reads
 * the routes of its table to find, and save, the one it deletes (so that
 * a failed batch puts it back exactly); without an interface the kernel
 * cannot narrow that read, and with 300,000 routes in the table it held
 * the loop, every other client's Ping, for 0.3-0.45 s. The loop parses
 * the op, checks ownership and looks the interface up before; the lane
 * reads and changes; the loop sets the result after. The undo is
 * registered before the call, so that it takes the op's place among the
 * batch's undos (they run newest first) and is there whatever the lane
 * returns; it does nothing unless the change was made. It runs on the
 * loop, as every undo does: one request, no read. */
struct route_change {
        const struct nbd_backend *be;
        struct nbd_links *links;
        Netbroker__Result *res;
        size_t op;
        struct nbd_route rt;
        bool add;
        /* The lane's outcome, and the route deleted as the kernel had it
         * (its metric, protocol, source and metrics, not only what the
         * request said). */
        int r;
        struct nbd_err err;
        struct nbd_route_saved *saved;
        bool made; /* set on the loop: the change is in the kernel */
};

/* The batch failed after the change: the route added, deleted again; the
 * route deleted, put back as the kernel had it. */
static void route_change_undo(struct nbd_job *job, void *data, size_t failed)
{
        struct route_change *w = data;

        (void)failed;
        if (!w->made)
                return;
        if (w->add)
                w->be->net.route_delete(w->links, &w->rt, NULL, NULL);
        else if (w->saved)
                w->be->net.route_restore(w->links, w->saved, NULL);
        else /* a backend that saved nothing: as the request said */
                w->be->net.route_add(w->links, &w->rt, NULL);
        nbd_job_mark_undone(job, w->op);
}

static void route_change_free(void *data)
{
        struct route_change *w = data;

        w->be->net.route_saved_free(w->saved);
        free(w);
}

/* On the links' lane. */
static void route_change_run(void *data)
{
        struct route_change *w = data;

        /* No links: they are the loop's (addr.h). */
        w->r = w->add ? w->be->net.route_add(NULL, &w->rt, &w->err)
                      : w->be->net.route_delete(NULL, &w->rt, &w->saved, &w->err);
        nbd_test_hold_point("ROUTE_CHANGE");
}

static void route_change_done(struct nbd_job *job, void *data)
{
        struct route_change *w = data;

        (void)job;
        if (w->r < 0) {
                nbd_result_set(w->res, w->r, "%s: %s", w->add ? "route add" : "route delete",
                               w->err.msg);
                return;
        }
        w->made = true;
}

static int route_change(struct nbd_job *job, const struct route_fields *f, bool add,
                        Netbroker__Result *res)
{
        const char *what = add ? "route add" : "route delete";
        struct route_change *w;
        struct nbd_route rt;
        int r;

        if ((r = parse_route(NULL, f, nbd_job_peer(job), &rt, res, what)) ||
            (f->ifname[0] && (r = nbd_job_check_owned(job, f->ifname, res))))
                return r;
        if (f->ifname[0] && (r = be_of(job)->links.ifindex(links_of(job), f->ifname, &rt.ifindex)))
                return nbd_result_set(res, r, "%s: no interface %s", what, f->ifname);
        w = calloc(1, sizeof(*w));
        if (!w)
                return nbd_result_set(res, -ENOMEM, "%s: out of memory", what);
        *w = (struct route_change){.be = be_of(job),
                                   .links = links_of(job),
                                   .res = res,
                                   .op = nbd_job_op_index(job),
                                   .rt = rt,
                                   .add = add};
        if (nbd_job_on_failure_call(job, route_change_undo, route_change_free, w) < 0)
                return nbd_result_set(res, -ENOMEM, "%s: out of memory", what); /* w freed */
        nbd_job_on_lane(job, NBD_NEEDS_LINKS, route_change_run, route_change_done, w);
        return -(int)res->status;
}

static int run_route_add(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        return route_change(job, &ROUTE_FIELDS(op->route_add), true, res);
}

static int run_route_delete(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        return route_change(job, &ROUTE_FIELDS(op->route_delete), false, res);
}

static int validate_route_list(struct nbd_validation *v, const Netbroker__Op *op,
                               Netbroker__Result *res)
{
        const char *name = op->route_list->ifname;

        return name[0] ? check_iface(v, name, res, "route list") : 0;
}

static int add_route_info(Netbroker__RouteListResult *l, const struct nbd_route *rt)
{
        Netbroker__RouteInfo *o = malloc(sizeof(*o));
        char text[INET6_ADDRSTRLEN];
        static const uint8_t zero[16];
        bool dflt = rt->dst_len == 0 && memcmp(rt->dst, zero, 16) == 0;

        if (!o)
                return -ENOMEM;
        netbroker__route_info__init(o);
        l->routes[l->n_routes++] = o;
        o->prefix_len = rt->dst_len;
        o->metric = rt->metric;
        o->table = rt->table;
        o->ipv6 = rt->family == AF_INET6;
        if ((!dflt && !(o->destination = strdup(ip_text(rt->family, rt->dst, text)))) ||
            (rt->has_gw && !(o->gateway = strdup(ip_text(rt->family, rt->gw, text)))) ||
            (rt->ifname[0] && !(o->ifname = strdup(rt->ifname)))) {
                o->destination =
                        dflt || !o->destination ? (char *)protobuf_c_empty_string : o->destination;
                o->gateway =
                        rt->has_gw && o->gateway ? o->gateway : (char *)protobuf_c_empty_string;
                o->ifname = (char *)protobuf_c_empty_string;
                return -ENOMEM;
        }
        return 0;
}

/* A RouteList's dumps run on the links' lane (issue 14): what the kernel
 * sends grows with what the listing shows, and for each dump the kernel
 * walks the whole table, even when it sends nothing. The loop looks up
 * the interfaces before (the caller's own, or the one named: the kernel
 * sends only the routes through them) and, after, names them and checks
 * every route's interface against the caller again. */
struct route_listing {
        const struct nbd_backend *be;
        struct nbd_links *links;
        Netbroker__Result *res;
        char ifname[IFNAMSIZ]; /* "": every interface the caller may see */
        struct nbd_route_filter f;
        int *oifs;
        struct nbd_route *v;
        size_t n;
        unsigned sent;
        struct nbd_err err;
        int r;
};

static void route_listing_free(void *data)
{
        struct route_listing *w = data;

        free(w->oifs);
        free(w->v);
        free(w);
}

/* On the links' lane. */
static void route_listing_read(void *data)
{
        struct route_listing *w = data;

        w->r = w->be->net.route_list(w->links, &w->f, &w->v, &w->n, &w->sent, &w->err);
        nbd_test_hold_point("ROUTE_LIST_READ");
}

static void route_listing_done(struct nbd_job *job, void *data)
{
        struct route_listing *w = data;
        Netbroker__RouteListResult *l = w->res->route_list;
        int r = w->r;

        nbd_netlink_sent(w->sent);
        if (r < 0) {
                nbd_result_set(w->res, r, "route list: %s", w->err.msg);
                return;
        }
        w->be->net.route_names(w->links, w->v, w->n);
        l->routes = calloc(w->n ? w->n : 1, sizeof(*l->routes));
        r = l->routes ? 0 : -ENOMEM;
        for (size_t i = 0; i < w->n && r == 0; i++)
                if ((!w->ifname[0] || strcmp(w->ifname, w->v[i].ifname) == 0) &&
                    may_see(job, w->v[i].ifname))
                        r = add_route_info(l, &w->v[i]);
        free(w->v);
        w->v = NULL;
        if (r < 0)
                nbd_result_set(w->res, r, "route list: out of memory");
}

static int run_route_list(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__RouteList *m = op->route_list;
        const struct nbd_peer *peer = nbd_job_peer(job);
        Netbroker__RouteListResult *l = malloc(sizeof(*l));
        struct route_listing *w;
        int r;

        if (!l)
                return nbd_result_set(res, -ENOMEM, "route list: out of memory");
        netbroker__route_list_result__init(l);
        res->out_case = NETBROKER__RESULT__OUT_ROUTE_LIST;
        res->route_list = l;
        if (m->ifname[0] && (r = nbd_job_check_owned(job, m->ifname, res)))
                return r;
        w = calloc(1, sizeof(*w));
        if (!w)
                return nbd_result_set(res, -ENOMEM, "route list: out of memory");
        *w = (struct route_listing){.be = be_of(job), .links = links_of(job), .res = res};
        snprintf(w->ifname, sizeof(w->ifname), "%s", m->ifname);
        w->f.table = m->table;
        if (m->ifname[0]) {
                /* The routes through it alone. */
                w->f.by_oif = true;
                w->oifs = malloc(sizeof(*w->oifs));
                r = w->oifs ? w->be->links.ifindex(w->links, m->ifname, w->oifs) : -ENOMEM;
                w->f.n_oifs = 1;
                if (r < 0) {
                        route_listing_free(w);
                        return r == -ENOMEM ? nbd_result_set(res, r, "route list: out of memory")
                                            : nbd_result_set(res, r, "route list: no interface %s",
                                                             m->ifname);
                }
        } else if (!nbd_peer_is_root(peer)) {
                /* A caller that is not root sees the routes through its own
                 * interfaces only: the kernel is asked for those. */
                w->f.by_oif = true;
                r = w->be->links.owned_ifindexes(w->links, peer->uid, &w->oifs, &w->f.n_oifs);
                if (r < 0) {
                        route_listing_free(w);
                        return nbd_result_set(res, r, "route list: out of memory");
                }
        }
        w->f.oifs = w->oifs;
        if (nbd_job_keep(job, route_listing_free, w) < 0)
                return nbd_result_set(res, -ENOMEM, "route list: out of memory"); /* w freed */
        nbd_job_on_lane_read(job, NBD_NEEDS_LINKS, route_listing_read, route_listing_done, w);
        return -(int)res->status;
}

/* ---- sysctls: a fixed allow-list ---- */

struct sysctl_entry {
        const char *name; /* as the op names it */
        /* Under /proc/sys/net: global, the path; per interface, the leaf
         * in ipv6/conf/IFNAME/. */
        const char *path;
        bool per_interface; /* else global: root only */
        unsigned max;
};

static const struct sysctl_entry sysctls[] = {
        {"ipv6.disable_ipv6", "disable_ipv6", true, 1},
        {"ipv6.accept_ra", "accept_ra", true, 2},
        {"ipv6.forwarding", "forwarding", true, 1},
        {"ipv4.forwarding", "ipv4/ip_forward", false, 1},
        {"ipv6.forwarding", "ipv6/conf/all/forwarding", false, 1},
};

/* The entry for name, per interface or global as ifname says. */
static const struct sysctl_entry *sysctl_find(const char *name, bool per_interface)
{
        for (size_t i = 0; i < sizeof(sysctls) / sizeof(*sysctls); i++)
                if (strcmp(sysctls[i].name, name) == 0 && sysctls[i].per_interface == per_interface)
                        return &sysctls[i];
        return NULL;
}

/* The entry and its path, or res set. */
static int sysctl_check(const Netbroker__SysctlSet *m, const struct nbd_peer *peer, char *path,
                        size_t len, Netbroker__Result *res)
{
        const struct sysctl_entry *e = sysctl_find(m->name, m->ifname[0] != '\0');

        if (!e)
                return nbd_result_set(res, -EPERM,
                                      "sysctl set: %s%s%s is not on the allow-list (per interface: "
                                      "ipv6.disable_ipv6, ipv6.accept_ra, ipv6.forwarding; "
                                      "global, root only: ipv4.forwarding, ipv6.forwarding)",
                                      m->name, m->ifname[0] ? " on " : " (global)", m->ifname);
        if (!e->per_interface && !nbd_peer_is_root(peer))
                return nbd_result_set(res, -EPERM,
                                      "sysctl set: policy: uid %u may not change the global %s "
                                      "(only root may)",
                                      (unsigned)peer->uid, m->name);
        if (m->value > e->max)
                return nbd_result_set(res, -EINVAL, "sysctl set: %s takes 0 to %u, not %u", m->name,
                                      e->max, m->value);
        /* A Router Advertisement a caller sends through its own interface
         * would install routes and addresses for the whole host (op_link.c
         * turned accept_ra off when it made the interface). disable_ipv6
         * and forwarding may stay: with accept_ra, autoconf and
         * accept_redirects 0 neither lets a frame change the host's routes,
         * and both keep the interface's settings. */
        if (strcmp(e->path, "accept_ra") == 0 && m->value != 0 && !nbd_peer_is_root(peer))
                return nbd_result_set(
                        res, -EPERM,
                        "sysctl set: policy: uid %u may set ipv6.accept_ra on %s to 0 "
                        "only, not %u: Router Advertisements through it would change "
                        "the host's routes and addresses (only root may)",
                        (unsigned)peer->uid, m->ifname, m->value);
        if (e->per_interface)
                snprintf(path, len, "ipv6/conf/%s/%s", m->ifname, e->path);
        else
                snprintf(path, len, "%s", e->path);
        return 0;
}

static int validate_sysctl(struct nbd_validation *v, const Netbroker__Op *op,
                           Netbroker__Result *res)
{
        const Netbroker__SysctlSet *m = op->sysctl_set;
        char path[64];
        int r = sysctl_check(m, v->peer, path, sizeof(path), res);

        if (r == 0 && m->ifname[0])
                r = check_iface(v, m->ifname, res, "sysctl set");
        return r;
}

struct undo_sysctl {
        char path[64];
        unsigned old;
        char ifname[IFNAMSIZ]; /* a global one: "" */
        int ifindex; /* the interface the op changed */
};

static void undo_sysctl(struct nbd_job *job, void *data)
{
        struct undo_sysctl *u = data;

        be_of(job)->net.sysctl_set(u->path, u->old, NULL);
}

/* A later op's failure: an interface's value goes back on the interface
 * the op changed, not on another that took its name since (op_link.c's
 * undo). */
static int undo_sysctl_later(struct nbd_job *job, void *data, struct nbd_err *err)
{
        struct undo_sysctl *u = data;
        int r = u->ifname[0] ? nbd_job_check_undo(job, u->ifname, u->ifindex, err) : 0;

        if (r == 0)
                r = be_of(job)->net.sysctl_set(u->path, u->old, err);
        return r;
}

static int run_sysctl(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__SysctlSet *m = op->sysctl_set;
        Netbroker__SysctlResult *out;
        struct undo_sysctl *u = calloc(1, sizeof(*u)), copy;
        struct nbd_err err;
        int r;

        if (!u)
                return nbd_result_set(res, -ENOMEM, "sysctl set: out of memory");
        if ((r = sysctl_check(m, nbd_job_peer(job), u->path, sizeof(u->path), res)) ||
            (m->ifname[0] && (r = nbd_job_check_owned(job, m->ifname, res))))
                goto fail;
        if (m->ifname[0]) {
                snprintf(u->ifname, sizeof(u->ifname), "%s", m->ifname);
                u->ifindex = nbd_job_ifindex(job, m->ifname);
        }
        r = be_of(job)->net.sysctl_get(u->path, &u->old, &err);
        if (r == 0)
                r = be_of(job)->net.sysctl_set(u->path, m->value, &err);
        if (r < 0) {
                nbd_result_set(res, r, "sysctl set: %s", err.msg);
                goto fail;
        }
        out = malloc(sizeof(*out));
        if (out) {
                netbroker__sysctl_result__init(out);
                out->old_value = u->old;
                res->out_case = NETBROKER__RESULT__OUT_SYSCTL;
                res->sysctl = out;
        }
        copy = *u;
        if (out && nbd_job_on_failure_undo_checked(job, undo_sysctl_later, free, u, copy.ifindex) ==
                           0) /* frees u */
                return 0;
        if (!out)
                free(u);
        undo_sysctl(job, &copy);
        return nbd_result_set(res, -ENOMEM, "sysctl set: out of memory");
fail:
        free(u);
        return r;
}

#define NET_OP(id, v, fn)                                                                          \
        const struct nbd_op_handler nbd_op_##id = {                                                \
                .name = #id,                                                                       \
                .needs = NBD_NEEDS_LINKS,                                                          \
                .stat = NBD_STAT_OPS_LINK,                                                         \
                .validate = v,                                                                     \
                .run = fn,                                                                         \
        }

NET_OP(addr_add, validate_addr_add, run_addr_add);
NET_OP(addr_delete, validate_addr_delete, run_addr_delete);
NET_OP(addr_list, validate_addr_list, run_addr_list);
NET_OP(route_add, validate_route_add, run_route_add);
NET_OP(route_delete, validate_route_delete, run_route_delete);
NET_OP(route_list, validate_route_list, run_route_list);
NET_OP(sysctl_set, validate_sysctl, run_sysctl);
