// SPDX-License-Identifier: LGPL-2.1-or-later
/* Addresses and routes of the helper's namespace over rtnetlink
 * (libnl-route-3), and the few per-interface and global sysctls a virtual
 * network needs, written under /proc/sys/net of this namespace (the helper
 * runs in the namespace it serves: no fork, no setns). Knows nothing of
 * the wire format or of policy. Every function returns 0 or -errno and
 * fills err (may be NULL) on every failure path. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct nbd_links;

struct nbd_addr {
        int family; /* AF_INET or AF_INET6 */
        uint8_t addr[16];
        unsigned prefix_len;
        bool has_brd; /* IPv4 only */
        uint8_t brd[4];
        bool noprefixroute;
        char ifname[IFNAMSIZ];
        int ifindex; /* listing only (the others look ifname up) */
        unsigned scope; /* listing only */
};

struct nbd_route {
        int family;
        uint8_t dst[16]; /* zero with dst_len 0: the default route */
        unsigned dst_len;
        bool has_gw;
        uint8_t gw[16];
        char ifname[IFNAMSIZ]; /* "": none given */
        unsigned metric;
        unsigned table; /* 0: main */
        /* ifname's index (0: none): a change's interface, which the loop
         * looks up before the change runs on the lane; in a listing, the
         * (first) nexthop's. */
        int ifindex;
};

/* What a listing asks of the kernel (issue 14): a dump filtered there by
 * table, type and interface brings in what it lists, not the table. */
struct nbd_route_filter {
        unsigned table; /* 0: main */
        /* Only the routes whose (first) nexthop is through one of oifs[n_oifs]
         * (none: no route at all); else through any interface. */
        bool by_oif;
        const int *oifs;
        size_t n_oifs;
};

/* -EEXIST when the interface has the address already. */
int nbd_addr_add(struct nbd_links *l, const struct nbd_addr *a, struct nbd_err *err);
/* -EADDRNOTAVAIL when the interface does not have it. */
int nbd_addr_delete(struct nbd_links *l, const struct nbd_addr *a, struct nbd_err *err);
/* Every address (ifindex 0) or those of ifindex, in a malloc'ed array
 * (free it), over a socket of the call's own: AddrList's and
 * AddrDelete's read, on the links' lane (issue 14). The names are left
 * "" (the lane must not read the loop's interface map). */
int nbd_addr_dump(int ifindex, struct nbd_addr **ret, size_t *ret_n, struct nbd_err *err);
/* On the loop, after: name each address's interface ("" if gone). */
void nbd_addr_names(struct nbd_links *l, struct nbd_addr *v, size_t n);

/* Route changes run on the links' lane (issue 14), as listings do:
 * with l NULL, nbd_route_add, nbd_route_delete and nbd_route_restore
 * touch r (or s), their outputs and sockets of the call's own, one at a
 * time. On the loop (an undo), l: the change goes over its request socket.
 * r's interface is r->ifindex, looked up by the loop (nbd_links_ifindex)
 * when r->ifname names one; -ENODEV when it is not set. */

/* -EEXIST when the table has that route already (NLM_F_EXCL). */
int nbd_route_add(struct nbd_links *l, const struct nbd_route *r, struct nbd_err *err);
/* A route as the kernel held it, every attribute (protocol, scope,
 * preferred source, metrics): what the undo of its deletion puts back. */
struct rtnl_route;
struct nbd_route_saved {
        struct nbd_route rt; /* as nbd_route_list() would say it: no ifname */
        struct rtnl_route *kernel; /* libnl's object; NULL in a fake kernel */
};
/* Delete the route r names. With ret_saved, exactly one: the unicast
 * routes of r's family and table (through r's interface, if it names one:
 * the kernel is asked for those only; else the family's whole table is
 * read) to its destination, narrowed by the
 * metric, gateway and interface r gives; -ESRCH when none is, -EINVAL
 * (err says which) when several are, and nothing is deleted; the one
 * deleted into *ret_saved (nbd_route_saved_free). Without: the undo of
 * nbd_route_add(r), the route it made (protocol static, r's metric or the
 * one the kernel gave it), not another to the same destination. */
int nbd_route_delete(struct nbd_links *l, const struct nbd_route *r,
                     struct nbd_route_saved **ret_saved, struct nbd_err *err);
/* Put a deleted route back as it was: 0 or -errno. */
int nbd_route_restore(struct nbd_links *l, const struct nbd_route_saved *s, struct nbd_err *err);
void nbd_route_saved_free(struct nbd_route_saved *s);
/* The unicast routes of f (IPv4 and IPv6), in a malloc'ed array (free
 * it), without their interfaces' names (nbd_route_names). Runs on the
 * links' lane: it touches f, its outputs and a socket of its own, never l
 * (the loop's). The kernel is asked for f's table, unicast routes, and
 * for each of f's interfaces (up to 8; more: the table, filtered here);
 * a kernel before Linux 4.20, which ignores the filter, sends every route
 * of the family once, filtered here. *ret_sent: the dump requests sent,
 * on failure too. -EAGAIN when changes kept interrupting a dump. */
int nbd_route_list(struct nbd_links *l, const struct nbd_route_filter *f, struct nbd_route **ret,
                   size_t *ret_n, unsigned *ret_sent, struct nbd_err *err);
/* Fill each route's ifname from its ifindex (on the loop): "" when the
 * interface is gone. */
void nbd_route_names(struct nbd_links *l, struct nbd_route *v, size_t n);

/* A sysctl of this namespace's net tree: rel is the path under
 * /proc/sys/net ("ipv6/conf/br0/accept_ra"), checked against the
 * allow-list by the caller. Values are small non-negative integers. */
int nbd_sysctl_get(const char *rel, unsigned *ret, struct nbd_err *err);
int nbd_sysctl_set(const char *rel, unsigned value, struct nbd_err *err);
