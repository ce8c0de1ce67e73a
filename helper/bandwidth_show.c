// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading limits back; see bandwidth_show.h. */
#include "bandwidth_show.h"

#include <errno.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/tc.h>
#include <stdio.h>
#include <string.h>

#include "bw_nft.h"
#include "bw_old_tree.h"
#include "netlink.h"

static bool kind_is(struct rtnl_tc *tc, const char *kind)
{
        const char *k = rtnl_tc_get_kind(tc);

        return k && strcmp(k, kind) == 0;
}

/* One interface by name: -ENODEV when there is none. */
static int get_link(struct nbd_netlink *nl, const char *name, struct rtnl_link **ret)
{
        int r;

        nbd_netlink_begin(nl);
        r = rtnl_link_get_kernel(nl->req, 0, name, ret);
        nbd_netlink_sent(1);
        r = nbd_netlink_errno(nl, r);
        return r == -EINVAL ? -ENODEV : r;
}

/* The root qdisc is htb of handle root (NBD_BW_HTB_ROOT, netbroker's mark;
 * an older helper's IFB's htb 1:), then *ret_leaf is the kind of the leaf
 * qdisc under class cls, or "" for HTB's own fifo. An htb of any other
 * handle (an administrator's htb 1:) is not ours. */
static int read_root(struct nbd_netlink *nl, int ifindex, uint32_t root_handle, uint32_t cls,
                     bool *ret_ours, char *ret_leaf, size_t leaf_len, struct nbd_err *e)
{
        struct nl_cache *cache = NULL;
        struct rtnl_qdisc *root = NULL, *leaf = NULL;
        int r;

        nbd_netlink_begin(nl);
        r = nbd_netlink_errno(nl, rtnl_qdisc_alloc_cache(nl->req, &cache));
        nbd_netlink_sent(1);
        if (r < 0)
                return nbd_err_set(e, r, "reading the qdiscs of ifindex %d: %s", ifindex,
                                   strerror(-r));
        root = rtnl_qdisc_get_by_parent(cache, ifindex, TC_H_ROOT);
        *ret_ours = root && kind_is(TC_CAST(root), "htb") &&
                    rtnl_tc_get_handle(TC_CAST(root)) == root_handle;
        leaf = *ret_ours ? rtnl_qdisc_get_by_parent(cache, ifindex, cls) : NULL;
        snprintf(ret_leaf, leaf_len, "%s",
                 leaf && rtnl_tc_get_kind(TC_CAST(leaf)) ? rtnl_tc_get_kind(TC_CAST(leaf)) : "");
        rtnl_qdisc_put(leaf);
        rtnl_qdisc_put(root);
        nl_cache_free(cache);
        return 0;
}

/* Class cls's rates, in kB/s and kB. *ret_found false: there is none. */
static int read_class(struct nbd_netlink *nl, int ifindex, uint32_t cls, struct nbd_bw_rate *ret,
                      bool *ret_found, struct nbd_err *e)
{
        struct nl_cache *cache = NULL;
        struct rtnl_class *c = NULL;
        uint64_t rate = 0, ceil = 0;
        int r;

        memset(ret, 0, sizeof(*ret));
        *ret_found = false;
        nbd_netlink_begin(nl);
        r = nbd_netlink_errno(nl, rtnl_class_alloc_cache(nl->req, ifindex, &cache));
        nbd_netlink_sent(1);
        if (r < 0)
                return nbd_err_set(e, r, "reading the classes of ifindex %d: %s", ifindex,
                                   strerror(-r));
        c = rtnl_class_get(cache, ifindex, cls);
        if (c && kind_is(TC_CAST(c), "htb") && rtnl_htb_get_rate64(c, &rate) == 0 &&
            rtnl_htb_get_ceil64(c, &ceil) == 0 && rate >= 1024) {
                ret->average = (uint32_t)(rate / 1024);
                ret->peak = ceil != rate ? (uint32_t)(ceil / 1024) : 0;
                ret->burst = (rtnl_htb_get_rbuffer(c) + 1023) / 1024;
                *ret_found = true;
        }
        rtnl_class_put(c);
        nl_cache_free(cache);
        return 0;
}

/* netbroker's HTB tree on ifindex (root qdisc root_handle, class cls), if
 * it has one there. */
static int read_tree(struct nbd_netlink *nl, int ifindex, uint32_t root_handle, uint32_t cls,
                     bool *ret_has, struct nbd_bw_rate *ret, char *ret_leaf, size_t leaf_len,
                     struct nbd_err *e)
{
        bool ours = false;
        int r = read_root(nl, ifindex, root_handle, cls, &ours, ret_leaf, leaf_len, e);

        *ret_has = false;
        if (r == 0 && ours)
                r = read_class(nl, ifindex, cls, ret, ret_has, e);
        return r;
}

/* The live IFB netbroker made for ifindex: marked, not waiting to be
 * deleted. 0 with *ret_ifb 0 when there is none. */
static int find_ifb(struct nbd_netlink *nl, int ifindex, int *ret_ifb, struct nbd_err *e)
{
        struct rtnl_link *link = NULL;
        char name[IFNAMSIZ];
        const char *alias;
        int r;

        snprintf(name, sizeof(name), NBD_BW_IFB_NAME_FMT, (unsigned)ifindex);
        *ret_ifb = 0;
        r = get_link(nl, name, &link);
        if (r == -ENODEV)
                return 0;
        if (r < 0)
                return nbd_err_set(e, r, "reading %s: %s", name, strerror(-r));
        alias = rtnl_link_get_ifalias(link);
        if (((alias && strcmp(alias, NBD_BW_IFB_MARK) == 0) ||
             rtnl_link_get_group(link) == NBD_BW_MADE_GROUP) &&
            rtnl_link_get_group(link) != NBD_BW_DOOMED_GROUP)
                *ret_ifb = rtnl_link_get_ifindex(link);
        rtnl_link_put(link);
        return 0;
}

/* A tc redirect of a helper from before this one (u32 of priority
 * NBD_BW_PRIO on the ingress qdisc): still shaping, and still taking the
 * frames past the firewall, until a set or a clear replaces it. */
static bool has_tc_redirect(struct nbd_netlink *nl, int ifindex)
{
        struct nl_cache *cache = NULL;
        bool found = false;

        nbd_netlink_begin(nl);
        if (nbd_netlink_errno(nl, rtnl_cls_alloc_cache(nl->req, ifindex, TC_H_MAKE(TC_H_INGRESS, 0),
                                                       &cache)) == 0) {
                for (struct nl_object *o = nl_cache_get_first(cache); o && !found;
                     o = nl_cache_get_next(o))
                        found = rtnl_cls_get_prio((struct rtnl_cls *)o) == NBD_BW_PRIO;
        }
        nbd_netlink_sent(1);
        nl_cache_free(cache);
        return found;
}

/* The limit on what enters ifindex: bw_nft.h's policer; or, left by an
 * older helper until a set, a clear or a restart replaces it, an IFB's
 * tree, in force only while something redirects there (its nft fwd chain
 * or its tc redirect). */
static int read_ingress(struct nbd_netlink *nl, int ifindex, const char *ifname, bool *ret_has,
                        struct nbd_bw_rate *ret, char *ret_mech, size_t mech_len, struct nbd_err *e)
{
        struct nbd_bw_police p = {0};
        char leaf[16];
        int ifb = 0, fwd = 0, r = nbd_bw_nft_peek(ifindex, ifname, &p, &fwd, e);

        *ret_has = false;
        if (r < 0)
                return r;
        if (p.rate) {
                nbd_bw_nft_rate(&p, ret);
                *ret_has = true;
                snprintf(ret_mech, mech_len, "nft-limit");
                return 0;
        }
        r = find_ifb(nl, ifindex, &ifb, e);
        if (r < 0 || !ifb)
                return r;
        r = read_tree(nl, ifb, NBD_BW_OLD_ROOT, NBD_BW_OLD_CLASS, ret_has, ret, leaf, sizeof(leaf),
                      e);
        if (r < 0 || !*ret_has)
                return r;
        if (fwd == ifb) {
                snprintf(ret_mech, mech_len, "ifb+htb");
        } else if (has_tc_redirect(nl, ifindex)) {
                snprintf(ret_mech, mech_len, "tc-mirred+ifb+htb");
        } else {
                *ret_has = false; /* shaping nothing */
                memset(ret, 0, sizeof(*ret));
        }
        return 0;
}

/* The egress limit: netbroker's tree (root htb 4e42:), else an older
 * helper's tree that is netbroker's (bw_old_tree.h), said so in the
 * mechanism; a tree of someone else is not shown. */
static int read_egress(struct nbd_netlink *nl, const struct nbd_bw_old_link *l, bool *ret_has,
                       struct nbd_bw_rate *ret, char *ret_mech, size_t mech_len, struct nbd_err *e)
{
        struct nbd_bw_old_tree old;
        char leaf[16];
        int r = read_tree(nl, l->ifindex, NBD_BW_HTB_ROOT, NBD_BW_HTB_CLASS, ret_has, ret, leaf,
                          sizeof(leaf), e);

        if (r == 0 && *ret_has) {
                snprintf(ret_mech, mech_len, "htb%s%s", leaf[0] ? "+" : "", leaf);
                return 0;
        }
        if (r == 0)
                r = nbd_bw_old_tree_find(nl, l, &old, e);
        if (r == 0 && old.found)
                r = read_class(nl, l->ifindex, NBD_BW_OLD_CLASS, ret, ret_has, e);
        if (r == 0 && *ret_has)
                snprintf(ret_mech, mech_len, "htb%s%s (older helper)", old.leaf[0] ? "+" : "",
                         old.leaf);
        return r;
}

static int show_over(struct nbd_netlink *nl, const char *ifname, struct nbd_bw_shown *ret,
                     struct nbd_err *e)
{
        struct nbd_bw_shown s = {0};
        struct rtnl_link *link = NULL;
        struct nbd_bw_rate root = {0}, ifb = {0};
        struct nbd_bw_old_link l;
        char root_mech[48] = "", ifb_mech[48] = "";
        bool has_root = false, has_ifb, macvtap;
        int r;

        r = get_link(nl, ifname, &link);
        if (r < 0)
                return nbd_err_set(e, r, "no interface %s: %s", ifname, strerror(-r));
        nbd_bw_old_link_of(link, &l);
        /* A macvtap's egress is what its guest sends (bandwidth.h). */
        macvtap = rtnl_link_get_type(link) && strcmp(rtnl_link_get_type(link), "macvtap") == 0;
        rtnl_link_put(link);
        r = read_egress(nl, &l, &has_root, &root, root_mech, sizeof(root_mech), e);
        if (r < 0)
                return r;
        r = read_ingress(nl, l.ifindex, ifname, &has_ifb, &ifb, ifb_mech, sizeof(ifb_mech), e);
        if (r < 0)
                return r;
        s.has_in = macvtap ? has_ifb : has_root;
        s.in = macvtap ? ifb : root;
        snprintf(s.in_mech, sizeof(s.in_mech), "%s", macvtap ? ifb_mech : root_mech);
        s.has_out = macvtap ? has_root : has_ifb;
        s.out = macvtap ? root : ifb;
        snprintf(s.out_mech, sizeof(s.out_mech), "%s", macvtap ? root_mech : ifb_mech);
        *ret = s;
        return 0;
}

int nbd_bw_show(struct nbd_netlink *nl, const char *ifname, struct nbd_bw_shown *ret,
                struct nbd_err *e)
{
        struct nbd_netlink own = {0};
        int r;

        if (nl)
                return show_over(nl, ifname, ret, e);
        r = nbd_netlink_open_req(&own);
        if (r < 0)
                return nbd_err_set(e, r, "cannot open an rtnetlink socket: %s", strerror(-r));
        r = show_over(&own, ifname, ret, e);
        nbd_netlink_close(&own);
        return r;
}
