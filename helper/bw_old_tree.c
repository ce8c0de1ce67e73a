// SPDX-License-Identifier: LGPL-2.1-or-later
/* An older helper's HTB tree; see bw_old_tree.h. */
#include "bw_old_tree.h"

#include <errno.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/tc.h>
#include <stdio.h>
#include <string.h>

#include "link.h"
#include "netlink.h"

void nbd_bw_old_link_of(struct rtnl_link *link, struct nbd_bw_old_link *ret)
{
        const char *alias = rtnl_link_get_ifalias(link), *kind = rtnl_link_get_qdisc(link);
        uid_t owner;

        ret->ifindex = rtnl_link_get_ifindex(link);
        ret->made = alias && nbd_link_parse_owner_mark(alias, &owner);
        ret->root_htb = kind && strcmp(kind, "htb") == 0;
}

static bool kind_is(struct rtnl_tc *tc, const char *kind)
{
        const char *k = rtnl_tc_get_kind(tc);

        return k && strcmp(k, kind) == 0;
}

/* What walking the qdiscs or classes of one interface found. */
struct walk {
        int ifindex;
        bool off; /* something that is not the older helper's layout */
        unsigned n; /* the layout's objects met: the root, the class */
        char leaf[16];
};

/* The root htb 1: default 1, a leaf 2: of a fair kind under 1:1, and what
 * sits on the ingress side (an older helper's redirect's ingress qdisc,
 * anyone's clsact); any other qdisc of the interface is not the layout. */
static void check_qdisc(struct nl_object *o, void *arg)
{
        struct rtnl_qdisc *q = (struct rtnl_qdisc *)o;
        struct rtnl_tc *tc = TC_CAST(q);
        struct walk *w = arg;
        uint32_t parent = rtnl_tc_get_parent(tc), handle = rtnl_tc_get_handle(tc);

        if (rtnl_tc_get_ifindex(tc) != w->ifindex || parent == TC_H_INGRESS)
                return;
        if (parent == TC_H_ROOT) {
                if (handle == NBD_BW_OLD_ROOT && kind_is(tc, "htb") &&
                    rtnl_htb_get_defcls(q) == TC_H_MIN(NBD_BW_OLD_CLASS))
                        w->n++;
                else
                        w->off = true;
        } else if (parent == NBD_BW_OLD_CLASS && handle == NBD_BW_OLD_LEAF && !w->leaf[0] &&
                   (kind_is(tc, "fq_codel") || kind_is(tc, "sfq"))) {
                snprintf(w->leaf, sizeof(w->leaf), "%s", rtnl_tc_get_kind(tc));
        } else {
                w->off = true;
        }
}

/* Of the htb's classes (major 1:) only 1:1, an htb class at the top; a
 * leaf's classes (fq_codel's flows) are its own affair. */
static void check_class(struct nl_object *o, void *arg)
{
        struct rtnl_tc *tc = TC_CAST((struct rtnl_class *)o);
        struct walk *w = arg;

        if (TC_H_MAJ(rtnl_tc_get_handle(tc)) != NBD_BW_OLD_ROOT)
                return;
        if (rtnl_tc_get_handle(tc) == NBD_BW_OLD_CLASS && kind_is(tc, "htb") &&
            rtnl_tc_get_parent(tc) == TC_H_ROOT)
                w->n++;
        else
                w->off = true;
}

static int read_error(struct nbd_err *e, int r, const char *what, int ifindex)
{
        return nbd_err_set(e, r, "reading the %s of ifindex %d for an older helper's htb: %s", what,
                           ifindex, strerror(-r));
}

/* The classes first: read for this interface alone, they rule out most
 * trees before the qdiscs, which the kernel dumps for every interface. */
static int check_classes(struct nbd_netlink *nl, struct walk *w, struct nbd_err *e)
{
        struct nl_cache *cache = NULL;
        int r;

        nbd_netlink_begin(nl);
        r = nbd_netlink_errno(nl, rtnl_class_alloc_cache(nl->req, w->ifindex, &cache));
        nbd_netlink_sent(1);
        if (r < 0)
                return read_error(e, r, "classes", w->ifindex);
        nl_cache_foreach(cache, check_class, w);
        nl_cache_free(cache);
        return 0;
}

static int check_qdiscs(struct nbd_netlink *nl, struct walk *w, struct nbd_err *e)
{
        struct nl_cache *cache = NULL;
        int r;

        nbd_netlink_begin(nl);
        r = nbd_netlink_errno(nl, rtnl_qdisc_alloc_cache(nl->req, &cache));
        nbd_netlink_sent(1);
        if (r < 0)
                return read_error(e, r, "qdiscs", w->ifindex);
        nl_cache_foreach(cache, check_qdisc, w);
        nl_cache_free(cache);
        return 0;
}

/* No filter on parent: an older helper classified nothing. */
static int check_no_filter(struct nbd_netlink *nl, struct walk *w, uint32_t parent,
                           struct nbd_err *e)
{
        struct nl_cache *cache = NULL;
        int r;

        nbd_netlink_begin(nl);
        r = nbd_netlink_errno(nl, rtnl_cls_alloc_cache(nl->req, w->ifindex, parent, &cache));
        nbd_netlink_sent(1);
        if (r < 0)
                return read_error(e, r, "filters", w->ifindex);
        if (nl_cache_nitems(cache))
                w->off = true;
        nl_cache_free(cache);
        return 0;
}

int nbd_bw_old_tree_find(struct nbd_netlink *nl, const struct nbd_bw_old_link *l,
                         struct nbd_bw_old_tree *ret, struct nbd_err *e)
{
        struct walk w = {.ifindex = l->ifindex};
        int r = 0;

        /* Rule 1 before any read: on an interface netbroker did not make,
         * no tree is an older helper's. */
        if (l->made && l->root_htb)
                r = check_classes(nl, &w, e);
        if (r == 0 && w.n == 1 && !w.off)
                r = check_qdiscs(nl, &w, e);
        if (r == 0 && w.n == 2 && !w.off)
                r = check_no_filter(nl, &w, NBD_BW_OLD_ROOT, e);
        if (r == 0 && w.n == 2 && !w.off)
                r = check_no_filter(nl, &w, NBD_BW_OLD_CLASS, e);
        if (r == 0 && w.n == 2 && !w.off && w.leaf[0])
                r = check_no_filter(nl, &w, NBD_BW_OLD_LEAF, e);
        if (r == -ENODEV)
                w.off = true; /* gone meanwhile: no tree there */
        else if (r < 0)
                return r;
        ret->found = w.n == 2 && !w.off;
        snprintf(ret->leaf, sizeof(ret->leaf), "%s", ret->found ? w.leaf : "");
        return 0;
}
