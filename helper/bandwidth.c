// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bandwidth; see bandwidth.h. */
#include "bandwidth.h"

#include <errno.h>
#include <limits.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netlink/msg.h>
#include <netlink/route/action.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/tc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bw_nft.h"
#include "bw_old_tree.h"
#include "lane.h" /* nbd_test_hold_point */
#include "link.h"
#include "log.h"
#include "netlink.h"
#include "stats.h"

NBD_LOG_CATEGORY(bandwidth);

#define HTB_ROOT NBD_BW_HTB_ROOT /* the mark: bandwidth.h */
#define HTB_CLASS NBD_BW_HTB_CLASS
#define LEAF_HANDLE NBD_BW_LEAF_HANDLE
#define INGRESS_HANDLE TC_HANDLE(0xffffU, 0U) /* unsigned: 0xffff << 16 overflows an int */
/* The least bucket of a policer: a GSO frame of 64 KiB must fit, or every
 * such frame would be dropped. */
#define POLICE_MIN_BUCKET 65536u

/* Fair leaf qdiscs, best first; the first the kernel accepts is kept. */
static const char *const leaf_kinds[] = {"fq_codel", "sfq"};
#define N_LEAF_KINDS (sizeof(leaf_kinds) / sizeof(*leaf_kinds))

enum out_state {
        OUT_POLICE, /* nftables' limit is there (bw_nft.h) */
        OUT_NONE, /* no limit expression: out_mech says why */
};

struct nbd_bw {
        struct nbd_netlink *nl; /* link.c's, borrowed */
        struct nbd_bw_nft *nft; /* the policers of what enters an interface */
        enum out_state out;
        char out_mech[96];
        int leaf; /* index into leaf_kinds, N_LEAF_KINDS: fifo, -1: not tried */
        unsigned doomed; /* IFBs moved to NBD_BW_DOOMED_GROUP since the last flush */
        int *gone; /* ifindexes gone since the loop last said so (nbd_bw_link_gone) */
        size_t n_gone, cap_gone;
        /* The name map (link.c's, borrowed): whether a gone interface has
         * an IFB at all, without asking the kernel (nbd_bw_watch_links). */
        struct nbd_links *links;
};

static uint64_t bytes(uint32_t kb)
{
        return (uint64_t)kb * 1024;
}

/* ---- checking ---- */

static int check_rate(const struct nbd_bw_rate *r, const char *way, bool floor_ok,
                      struct nbd_err *err)
{
        if (!r->average) {
                if (r->peak || r->burst || r->floor) {
                        return nbd_err_set(err, -EINVAL,
                                           "%s: peak, burst or floor without an average", way);
                }
                return 0;
        }
        if (r->average > NBD_BW_MAX_RATE || r->peak > NBD_BW_MAX_RATE) {
                return nbd_err_set(err, -EINVAL, "%s: %u kB/s is above 100 Gbit/s (%llu kB/s)", way,
                                   r->average > r->peak ? r->average : r->peak, NBD_BW_MAX_RATE);
        }
        if (r->peak && r->peak < r->average) {
                return nbd_err_set(err, -EINVAL, "%s: peak %u kB/s is below the average %u kB/s",
                                   way, r->peak, r->average);
        }
        if (r->burst > NBD_BW_MAX_BURST) {
                return nbd_err_set(err, -EINVAL, "%s: burst %u kB is above %u kB", way, r->burst,
                                   NBD_BW_MAX_BURST);
        }
        if (r->floor && !floor_ok) {
                return nbd_err_set(err, -EINVAL, "%s: floor is for inbound traffic only", way);
        }
        if (r->floor > r->average) {
                return nbd_err_set(err, -EINVAL, "%s: floor %u kB/s is above the average %u kB/s",
                                   way, r->floor, r->average);
        }
        return 0;
}

int nbd_bw_check(const struct nbd_bw_limits *l, struct nbd_err *err)
{
        int r = check_rate(&l->in, "inbound", true, err);

        if (r == 0)
                r = check_rate(&l->out, "outbound", false, err);
        return r;
}

/* ---- netlink round trips ---- */

static bool is_marked_ifb(struct rtnl_link *link)
{
        const char *alias = rtnl_link_get_ifalias(link);

        return (alias && strcmp(alias, NBD_BW_IFB_MARK) == 0) ||
               rtnl_link_get_group(link) == NBD_BW_MADE_GROUP;
}

/* ret_ours: it carries the IFB mark (netbroker made it as an IFB);
 * ret_old: what tells whether an older helper's tree on it is ours. */
static int link_of(struct nbd_bw *bw, const char *name, int *ret, uint32_t *ret_group,
                   bool *ret_ours, bool *ret_macvtap, struct nbd_bw_old_link *ret_old)
{
        struct rtnl_link *link = NULL;
        int r;

        nbd_netlink_begin(bw->nl);
        r = rtnl_link_get_kernel(bw->nl->req, 0, name, &link);
        nbd_netlink_sent(1);
        r = nbd_netlink_errno(bw->nl, r);
        if (r == -EINVAL)
                r = -ENODEV;
        if (r == 0) {
                *ret = rtnl_link_get_ifindex(link);
                if (ret_group)
                        *ret_group = rtnl_link_get_group(link);
                if (ret_ours)
                        *ret_ours = is_marked_ifb(link);
                if (ret_macvtap)
                        *ret_macvtap = rtnl_link_get_type(link) &&
                                       strcmp(rtnl_link_get_type(link), "macvtap") == 0;
                if (ret_old)
                        nbd_bw_old_link_of(link, ret_old);
        }
        rtnl_link_put(link);
        return r;
}

/* The IFB of an interface, unless it is doomed (deleted at the next
 * flush): then, for every reader, it is gone already. A device of that
 * name without the mark is no IFB of ours. */
static int live_ifb_of(struct nbd_bw *bw, const char *name, int *ret)
{
        uint32_t group = 0;
        bool ours = false;
        int r = link_of(bw, name, ret, &group, &ours, NULL, NULL);

        return r == 0 && (group == NBD_BW_DOOMED_GROUP || !ours) ? -ENODEV : r;
}

static int delete_link(struct nbd_bw *bw, int ifindex)
{
        struct rtnl_link *link = rtnl_link_alloc();
        int r;

        if (!link)
                return -ENOMEM;
        rtnl_link_set_ifindex(link, ifindex);
        nbd_netlink_begin(bw->nl);
        r = rtnl_link_delete(bw->nl->req, link);
        nbd_netlink_sent(1);
        r = nbd_netlink_errno(bw->nl, r);
        rtnl_link_put(link);
        return r;
}

static void ifb_name(int ifindex, char name[IFNAMSIZ])
{
        snprintf(name, IFNAMSIZ, NBD_BW_IFB_PREFIX "%u", (unsigned)ifindex);
}

/* ---- open ---- */

int nbd_bw_open(struct nbd_netlink *nl, struct nbd_bw **ret)
{
        struct nbd_bw *bw = calloc(1, sizeof(*bw));

        if (!bw)
                return -ENOMEM;
        bw->nl = nl;
        bw->leaf = -1;
        if (nbd_bw_nft_open(&bw->nft) < 0) {
                free(bw);
                return -ENOMEM;
        }
        /* Deny by default: a tc police on the ingress qdisc would run
         * before the firewall's chains, and an IFB takes the frames past
         * other ports' (bw_nft.h); a limit that switches a filter off is
         * worse than none. */
        if (nbd_bw_nft_missing(bw->nft)) {
                bw->out = OUT_NONE;
                snprintf(bw->out_mech, sizeof(bw->out_mech), "none: %.88s",
                         nbd_bw_nft_missing(bw->nft));
        } else {
                bw->out = OUT_POLICE;
                snprintf(bw->out_mech, sizeof(bw->out_mech), "nft-limit");
        }
        nbd_info("a tap's inbound (a macvtap's outbound) htb, the other way %s", bw->out_mech);
        *ret = bw;
        return 0;
}

void nbd_bw_close(struct nbd_bw *bw)
{
        if (!bw)
                return;
        nbd_bw_flush(bw);
        nbd_bw_nft_close(bw->nft);
        free(bw->gone);
        free(bw);
}

void nbd_bw_mechanisms(const struct nbd_bw *bw, const char **ret_in, const char **ret_out)
{
        static const char *const leaf_names[] = {"htb+fq_codel", "htb+sfq", "htb"};

        *ret_in = bw->leaf < 0 ? "htb" : leaf_names[bw->leaf];
        *ret_out = bw->out_mech;
}

bool nbd_bw_outbound_available(const struct nbd_bw *bw)
{
        return bw->out != OUT_NONE;
}

/* ---- building: one HTB tree, on the interface's egress ---- */

static int send_result(struct nbd_bw *bw, int nlerr)
{
        nbd_netlink_sent(1);
        return nbd_netlink_errno(bw->nl, nlerr);
}

/* libvirt's burst is optional. Without one, HTB gets 10 ms of the average
 * rate (at least NBD_BW_MIN_BURST kB): tc's own default is one MTU on
 * kernels with high-resolution timers, too little for HTB to reach rates
 * of hundreds of Mbit/s. Written explicitly, so a read-back sees it. The
 * ceil's bucket (cburst) is the same: left to its default (one MTU here,
 * libnl computes it as tc does), the ceil, not the rate, held TCP at 85%
 * of a 512 Mbit/s average. */
static uint64_t burst_bytes(const struct nbd_bw_rate *rate)
{
        uint64_t b = rate->burst ? bytes(rate->burst) : bytes(rate->average) / 100;

        return b < bytes(NBD_BW_MIN_BURST) ? bytes(NBD_BW_MIN_BURST) : b;
}

static int set_htb_class(struct nbd_bw *bw, int ifindex, const struct nbd_bw_rate *rate,
                         const char *dev, struct nbd_err *err)
{
        struct rtnl_class *c = rtnl_class_alloc();
        uint64_t avg = bytes(rate->average), ceil = bytes(rate->peak ? rate->peak : rate->average);
        uint64_t quantum = avg / 10;
        int r;

        if (!c)
                return nbd_err_oom(err, "setting an htb class");
        /* The kernel warns of quanta outside 1000-200000 at every change. */
        quantum = quantum < 1600 ? 1600 : quantum > 200000 ? 200000 : quantum;
        rtnl_tc_set_ifindex(TC_CAST(c), ifindex);
        rtnl_tc_set_parent(TC_CAST(c), HTB_ROOT);
        rtnl_tc_set_handle(TC_CAST(c), HTB_CLASS);
        if ((r = rtnl_tc_set_kind(TC_CAST(c), "htb")) < 0 ||
            (r = rtnl_htb_set_rate64(c, avg)) < 0 || (r = rtnl_htb_set_ceil64(c, ceil)) < 0 ||
            (r = rtnl_htb_set_rbuffer(c, (uint32_t)burst_bytes(rate))) < 0 ||
            (r = rtnl_htb_set_cbuffer(c, (uint32_t)burst_bytes(rate))) < 0 ||
            (r = rtnl_htb_set_quantum(c, (uint32_t)quantum)) < 0) {
                rtnl_class_put(c);
                return nbd_err_oom(err, "setting an htb class");
        }
        nbd_netlink_begin(bw->nl);
        /* REPLACE changes the class in place: no instant without a limit. */
        r = send_result(bw, rtnl_class_add(bw->nl->req, c, NLM_F_CREATE | NLM_F_REPLACE));
        rtnl_class_put(c);
        if (r < 0)
                nbd_err_set(err, r, "cannot set htb class 4e42:1 on %s: %s", dev, strerror(-r));
        return r;
}

/* A fair leaf 4e43: under 4e42:1: the first kind the kernel has, found by trying
 * once; without one, HTB's own fifo stays. */
/* A qdisc object naming one qdisc of ifindex (kind NULL: any kind), for an
 * add or a delete; NULL when out of memory. */
static struct rtnl_qdisc *qdisc_new(int ifindex, uint32_t parent, uint32_t handle, const char *kind)
{
        struct rtnl_qdisc *q = rtnl_qdisc_alloc();

        if (!q)
                return NULL;
        rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
        rtnl_tc_set_parent(TC_CAST(q), parent);
        rtnl_tc_set_handle(TC_CAST(q), handle);
        if (kind && rtnl_tc_set_kind(TC_CAST(q), kind) < 0) {
                rtnl_qdisc_put(q);
                return NULL;
        }
        return q;
}

static int ensure_leaf(struct nbd_bw *bw, int ifindex, const char *dev, struct nbd_err *err)
{
        int start = bw->leaf < 0 ? 0 : bw->leaf;

        for (int k = start; k < (int)N_LEAF_KINDS; k++) {
                struct rtnl_qdisc *q = qdisc_new(ifindex, HTB_CLASS, LEAF_HANDLE, leaf_kinds[k]);
                int r;

                if (!q) {
                        return nbd_err_set(err, -ENOMEM,
                                           "cannot add a leaf qdisc on %s: out of memory", dev);
                }
                nbd_netlink_begin(bw->nl);
                r = send_result(bw, rtnl_qdisc_add(bw->nl->req, q, NLM_F_CREATE | NLM_F_EXCL));
                rtnl_qdisc_put(q);
                if (r == 0 || r == -EEXIST) {
                        bw->leaf = k;
                        return 0;
                }
                if (r != -ENOENT && r != -EOPNOTSUPP && r != -EINVAL) {
                        return nbd_err_set(err, r, "cannot add the %s leaf qdisc on %s: %s",
                                           leaf_kinds[k], dev, strerror(-r));
                }
                if (bw->leaf < 0 || bw->leaf == k)
                        nbd_notice("the kernel has no %s qdisc (%s): trying the next leaf",
                                   leaf_kinds[k], strerror(-r));
                bw->leaf = k + 1;
        }
        bw->leaf = N_LEAF_KINDS;
        return 0;
}

static int add_htb_root(struct nbd_bw *bw, int ifindex, int flags)
{
        struct rtnl_qdisc *q = qdisc_new(ifindex, TC_H_ROOT, HTB_ROOT, "htb");
        int r;

        if (!q)
                return -ENOMEM;
        if (rtnl_htb_set_defcls(q, TC_H_MIN(HTB_CLASS)) < 0) {
                rtnl_qdisc_put(q);
                return -ENOMEM;
        }
        nbd_netlink_begin(bw->nl);
        r = send_result(bw, rtnl_qdisc_add(bw->nl->req, q, flags));
        rtnl_qdisc_put(q);
        return r;
}

/* Delete an older helper's root htb 1: that bw_old_tree.c found to be
 * ours: with kind and handle in the request, the kernel deletes nothing
 * else. Gone meanwhile (ENOENT, EINVAL: another root now; ENODEV) is
 * nothing to delete. */
static int delete_old_root(struct nbd_bw *bw, int ifindex, const char *dev, struct nbd_err *err)
{
        struct rtnl_qdisc *q = qdisc_new(ifindex, TC_H_ROOT, NBD_BW_OLD_ROOT, "htb");
        int r;

        if (!q) {
                return nbd_err_set(err, -ENOMEM,
                                   "cannot delete an older helper's htb 1: of %s: out of memory",
                                   dev);
        }
        nbd_netlink_begin(bw->nl);
        r = send_result(bw, rtnl_qdisc_delete(bw->nl->req, q));
        rtnl_qdisc_put(q);
        if (r == -ENOENT || r == -EINVAL || r == -ENODEV)
                return 0;
        if (r < 0) {
                return nbd_err_set(err, r, "cannot delete an older helper's htb 1: of %s: %s", dev,
                                   strerror(-r));
        }
        nbd_info("%s: an older helper's htb 1: deleted (it is netbroker's: bw_old_tree.h)", dev);
        return 0;
}

/* The root qdisc of l is not htb 4e42: and not the kernel's default: an
 * older helper's tree that is ours (bw_old_tree.h) is deleted, and
 * *ret_deleted says so; anything else is someone else's, left alone. */
static int delete_if_old(struct nbd_bw *bw, const struct nbd_bw_old_link *l, const char *dev,
                         bool *ret_deleted, struct nbd_err *err)
{
        struct nbd_bw_old_tree old;
        int r = nbd_bw_old_tree_find(bw->nl, l, &old, err);

        if (r == 0 && old.found)
                r = delete_old_root(bw, l->ifindex, dev, err);
        if (r == 0)
                *ret_deleted = old.found;
        return r;
}

static int make_htb_tree(struct nbd_bw *bw, int ifindex, const struct nbd_bw_rate *rate,
                         const char *dev, struct nbd_err *err);

/* Root htb 4e42: default 1 and class 4e42:1. HTB cannot change a qdisc's
 * options, so an htb 4e42: that is there already is kept and only its
 * class changes. The kernel's default root qdisc (handle 0:) is replaced,
 * and so is an older helper's tree that is ours (bw_old_tree.h): between
 * its delete and the new class, a few requests, the egress is not shaped.
 * Any other root qdisc is someone else's (an administrator's htb 1:): it
 * is left as it is and the set fails with EBUSY, having changed nothing. */
static int set_htb_tree(struct nbd_bw *bw, const struct nbd_bw_old_link *l,
                        const struct nbd_bw_rate *rate, const char *dev, struct nbd_err *err)
{
        bool old = false;
        int r = make_htb_tree(bw, l->ifindex, rate, dev, err);

        if (r != -EEXIST)
                return r;
        /* Ours from before (the class changes in place), or a root qdisc
         * of an older helper or of someone else: then there is no qdisc
         * 4e42: for the class (ENOENT). */
        r = set_htb_class(bw, l->ifindex, rate, dev, err);
        if (r == 0)
                return ensure_leaf(bw, l->ifindex, dev, err);
        if (r != -ENOENT && r != -EINVAL)
                return r;
        r = delete_if_old(bw, l, dev, &old, err);
        if (r < 0)
                return r;
        if (old && (r = make_htb_tree(bw, l->ifindex, rate, dev, err)) != -EEXIST)
                return r;
        return nbd_err_set(err, -EBUSY,
                           "the root qdisc of %s is not netbroker's (its handle is not %x:, nor "
                           "is it an older helper's htb 1: on an interface netbroker made): it "
                           "is left as it is; delete it first to limit %s",
                           dev, TC_H_MAJ(HTB_ROOT) >> 16, dev);
}

/* A new tree over the kernel's default root qdisc; -EEXIST (err not set)
 * when another root qdisc is there. */
static int make_htb_tree(struct nbd_bw *bw, int ifindex, const struct nbd_bw_rate *rate,
                         const char *dev, struct nbd_err *err)
{
        /* Without NLM_F_REPLACE the kernel grafts over its default root
         * qdisc only; over any other it answers EEXIST. */
        int r = add_htb_root(bw, ifindex, NLM_F_CREATE | NLM_F_EXCL);

        if (r == -EEXIST)
                return r;
        if (r < 0) {
                return nbd_err_set(err, r, "cannot add the root htb qdisc on %s: %s", dev,
                                   strerror(-r));
        }
        r = set_htb_class(bw, ifindex, rate, dev, err);
        if (r == 0)
                r = ensure_leaf(bw, ifindex, dev, err);
        return r;
}

/* Delete the root qdisc if it is htb 4e42: (ours): with kind and handle in
 * the request, the kernel refuses (EINVAL) to delete any other, and a
 * default one (ENOENT). An interface gone meanwhile (ENODEV) has none. Any
 * other root is an older helper's tree that is ours (bw_old_tree.h),
 * deleted too, or someone else's, left alone. */
static int clear_htb_root(struct nbd_bw *bw, const struct nbd_bw_old_link *l, const char *dev,
                          struct nbd_err *err)
{
        struct rtnl_qdisc *q = qdisc_new(l->ifindex, TC_H_ROOT, HTB_ROOT, "htb");
        bool old = false;
        int r;

        if (!q) {
                return nbd_err_set(err, -ENOMEM,
                                   "cannot delete the root qdisc of %s: out of memory", dev);
        }
        nbd_netlink_begin(bw->nl);
        r = send_result(bw, rtnl_qdisc_delete(bw->nl->req, q));
        rtnl_qdisc_put(q);
        if (r == -EINVAL)
                return delete_if_old(bw, l, dev, &old, err);
        if (r == -ENOENT || r == -ENODEV)
                r = 0;
        if (r < 0)
                nbd_err_set(err, r, "cannot delete the root qdisc of %s: %s", dev, strerror(-r));
        return r;
}

/* ---- what an older helper left: IFBs, tc and nft redirects to them ---- */

/* Move one of our IFBs to group, writing its mark in the same message: an
 * IFB of a helper killed between its create and its alias is ours by its
 * group alone, and once doomed that group is gone, so the flush would
 * leave it for ever as a stranger's. */
static int set_group(struct nbd_bw *bw, int ifindex, uint32_t group)
{
        struct rtnl_link *orig = rtnl_link_alloc(), *change = rtnl_link_alloc();
        int r = -ENOMEM;

        if (orig && change) {
                rtnl_link_set_ifindex(orig, ifindex);
                rtnl_link_set_group(change, group);
                rtnl_link_set_ifalias(change, NBD_BW_IFB_MARK);
                nbd_netlink_begin(bw->nl);
                r = send_result(bw, rtnl_link_change(bw->nl->req, orig, change, 0));
        }
        rtnl_link_put(orig);
        rtnl_link_put(change);
        return r;
}

static int filters_left(struct nbd_bw *bw, int ifindex, size_t *ret)
{
        struct nl_cache *cache = NULL;
        int r;

        nbd_netlink_begin(bw->nl);
        r = send_result(bw, rtnl_cls_alloc_cache(bw->nl->req, ifindex, INGRESS_HANDLE, &cache));
        if (r == 0)
                *ret = (size_t)nl_cache_nitems(cache);
        nl_cache_free(cache);
        return r;
}

/* The tc redirect helpers before this one made (an ingress qdisc, a u32
 * filter of priority NBD_BW_PRIO with a mirred redirect): deleted, with
 * the ingress qdisc when it was ours (our filter was there) and no other
 * filter is left on it. None there is success. */
static int clear_tc_redirect(struct nbd_bw *bw, int ifindex, const char *dev, struct nbd_err *err)
{
        struct rtnl_cls *cls = rtnl_cls_alloc();
        struct rtnl_qdisc *q = NULL;
        size_t left = 1;
        int r;

        if (!cls) {
                r = nbd_err_oom(err, "deleting the redirect filter");
                goto out;
        }
        rtnl_tc_set_ifindex(TC_CAST(cls), ifindex);
        rtnl_tc_set_parent(TC_CAST(cls), INGRESS_HANDLE);
        rtnl_cls_set_prio(cls, NBD_BW_PRIO);
        rtnl_cls_set_protocol(cls, ETH_P_ALL);
        nbd_netlink_begin(bw->nl);
        r = send_result(bw, rtnl_cls_delete(bw->nl->req, cls, 0));
        /* Nothing there: no ingress qdisc (EINVAL), no such filter, or
         * no interface any more (ENODEV). */
        if (r == -ENOENT || r == -EINVAL || r == -ENODEV) {
                r = 0;
                goto out;
        }
        if (r < 0) {
                nbd_err_set(err, r, "cannot delete the redirect filter on %s: %s", dev,
                            strerror(-r));
                goto out;
        }
        if (filters_left(bw, ifindex, &left) == 0 && left == 0) {
                q = qdisc_new(ifindex, TC_H_INGRESS, INGRESS_HANDLE, "ingress");
                if (!q) {
                        r = nbd_err_oom(err, "deleting the ingress qdisc");
                        goto out;
                }
                nbd_netlink_begin(bw->nl);
                r = send_result(bw, rtnl_qdisc_delete(bw->nl->req, q));
                if (r == -ENOENT || r == -EINVAL || r == -ENODEV)
                        r = 0;
                if (r < 0)
                        nbd_err_set(err, r, "cannot delete the ingress qdisc of %s: %s", dev,
                                    strerror(-r));
        }
out:
        rtnl_qdisc_put(q);
        rtnl_cls_put(cls);
        return r;
}

/* Deleting a device makes the kernel wait for RCU readers: 16-24 ms an IFB
 * here, so a batch clearing 100 interfaces, or 100 guests going at once,
 * would hold the helper for 2 s. An IFB to delete is moved to
 * NBD_BW_DOOMED_GROUP instead (a cheap change), and nbd_bw_flush() deletes
 * the whole group in one request: one wait for all of them (100 IFBs: 21
 * ms instead of 1.6 s). None there is success. */
static int doom_ifb(struct nbd_bw *bw, int ifindex, struct nbd_err *err)
{
        char name[IFNAMSIZ];
        uint32_t group = 0;
        bool ours = false;
        int ifb = 0, r;

        ifb_name(ifindex, name);
        nbd_stat_inc(NBD_STAT_BW_IFB_LOOKUPS);
        r = link_of(bw, name, &ifb, &group, &ours, NULL, NULL);
        if (r == -ENODEV || r == -ENOENT)
                return 0;
        if (r == 0 && !ours) {
                nbd_warn("%s is left alone: netbroker did not make it (its alias is not %s)", name,
                         NBD_BW_IFB_MARK);
                return 0;
        }
        if (r == 0 && group == NBD_BW_DOOMED_GROUP)
                return 0;
        if (r == 0)
                r = set_group(bw, ifb, NBD_BW_DOOMED_GROUP);
        if (r == -ENODEV)
                return 0;
        if (r < 0) {
                return nbd_err_set(err, r, "cannot delete the IFB device %s: %s", name,
                                   strerror(-r));
        }
        bw->doomed++;
        return 0;
}

struct doomed {
        int *ours; /* ifindexes of the marked members */
        size_t n_ours, n_foreign;
        bool nomem;
};

static void note_member(struct nl_object *o, void *arg)
{
        struct rtnl_link *link = (struct rtnl_link *)o;
        struct doomed *d = arg;
        int *grown;

        if (rtnl_link_get_group(link) != NBD_BW_DOOMED_GROUP)
                return;
        if (!is_marked_ifb(link)) {
                nbd_warn("%s is in link group %#x but netbroker did not make it: it is left alone",
                         rtnl_link_get_name(link), NBD_BW_DOOMED_GROUP);
                d->n_foreign++;
                return;
        }
        grown = realloc(d->ours, (d->n_ours + 1) * sizeof(*grown));
        if (!grown) {
                d->nomem = true;
                return;
        }
        d->ours = grown;
        d->ours[d->n_ours++] = rtnl_link_get_ifindex(link);
}

/* Who is in the group now: a device someone else put there is not ours to
 * delete, so the whole group goes in one request only when every member
 * carries the IFB mark. */
static int doomed_members(struct nbd_bw *bw, struct doomed *ret)
{
        struct nl_cache *cache = NULL;
        int r;

        nbd_netlink_begin(bw->nl);
        r = send_result(bw, rtnl_link_alloc_cache(bw->nl->req, AF_UNSPEC, &cache));
        if (r == 0)
                nl_cache_foreach(cache, note_member, ret);
        nl_cache_free(cache);
        return r == 0 && ret->nomem ? -ENOMEM : r;
}

static int delete_group(struct nbd_bw *bw)
{
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
        struct nl_msg *msg;
        int r;

        msg = nlmsg_alloc_simple(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK);
        if (!msg)
                return -ENOMEM;
        /* No index, no name: the kernel deletes every device of the group. */
        if (nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
            nla_put_u32(msg, IFLA_GROUP, NBD_BW_DOOMED_GROUP) < 0) {
                nlmsg_free(msg);
                return -ENOMEM;
        }
        nbd_netlink_begin(bw->nl);
        r = nl_send_auto(bw->nl->req, msg);
        nlmsg_free(msg);
        if (r >= 0)
                r = nl_wait_for_ack(bw->nl->req);
        return send_result(bw, r);
}

int nbd_bw_flush(struct nbd_bw *bw)
{
        struct doomed d = {0};
        int r;

        if (!bw || !bw->doomed)
                return 0;
        r = doomed_members(bw, &d);
        if (r == 0 && d.n_foreign == 0 && d.n_ours) {
                r = delete_group(bw);
                if (r == -ENODEV)
                        r = 0; /* none left in the group: set again by a later op */
        } else {
                /* One by one, each with its own wait: the price of a
                 * stranger in the group. */
                for (size_t i = 0; r == 0 && i < d.n_ours; i++)
                        if ((r = delete_link(bw, d.ours[i])) == -ENODEV)
                                r = 0;
        }
        if (r < 0)
                nbd_warn("cannot delete %u IFB device(s) of link group %#x: %s", bw->doomed,
                         NBD_BW_DOOMED_GROUP, strerror(-r));
        else
                nbd_debug("deleted %zu IFB device(s) in %s", d.n_ours,
                          d.n_foreign ? "one request each" : "one request");
        free(d.ours);
        bw->doomed = 0;
        return r;
}

static bool is_ifb_name(const char *name, int *ret_owner)
{
        char *end;
        unsigned long v;

        if (strncmp(name, NBD_BW_IFB_PREFIX, strlen(NBD_BW_IFB_PREFIX)) != 0)
                return false;
        name += strlen(NBD_BW_IFB_PREFIX);
        errno = 0;
        v = strtoul(name, &end, 10);
        if (!*name || *end || errno || v == 0 || v > INT_MAX)
                return false;
        *ret_owner = (int)v;
        return true;
}

/* Since Linux 6.16 a netdev base chain outlives its device and hooks the
 * next device of its name: a policer left there would limit a new
 * interface (an older helper's redirect would send its frames to an IFB
 * that is being deleted, and drop them). */
static void prune_gone(struct nbd_bw *bw)
{
        struct nbd_err err;
        unsigned n = 0;

        if (!bw->n_gone)
                return;
        if (nbd_bw_nft_prune_ifindexes(bw->nft, bw->gone, bw->n_gone, &n, &err) < 0)
                nbd_warn("the bandwidth chains of interfaces that went stay: %s", err.msg);
        else if (n)
                nbd_debug("deleted %u bandwidth chain(s) of interfaces that went", n);
        bw->n_gone = 0;
}

static void note_gone(struct nbd_bw *bw, const struct nbd_link_entry *e)
{
        if (bw->n_gone == bw->cap_gone) {
                size_t cap = bw->cap_gone ? 2 * bw->cap_gone : 8;
                int *grown = realloc(bw->gone, cap * sizeof(*grown));
                if (!grown) {
                        /* The start-up sweep removes it later. */
                        nbd_warn("out of memory: the bandwidth chain of %s stays", e->name);
                        return;
                }
                bw->gone = grown;
                bw->cap_gone = cap;
        }
        bw->gone[bw->n_gone++] = e->ifindex;
}

void nbd_bw_watch_links(struct nbd_bw *bw, struct nbd_links *links)
{
        bw->links = links;
}

/* Only an older helper made IFBs (this one makes none), and an IFB is named
 * after the ifindex it shaped: when the name map, which the notifications
 * just read brought up to date, has no such name, there is nothing to
 * look up. Asking the kernel instead is an RTM_GETLINK on the loop, which
 * waits for the RTNL lock the links' lane holds while it deletes a group
 * of devices: 1.8 s seen for one Ping during a 100-tap deletion beside
 * 4,096 guests' filters, for every interface that went. */
static bool may_have_ifb(struct nbd_bw *bw, int ifindex)
{
        char name[IFNAMSIZ];

        ifb_name(ifindex, name);
        return !bw->links || nbd_links_knows(bw->links, name);
}

void nbd_bw_link_gone(void *data, const struct nbd_link_entry *e)
{
        struct nbd_bw *bw = data;
        struct nbd_err err;
        int owner;

        if (!e) {
                /* The end of the list: the chains go in one transaction,
                 * the IFBs together. */
                prune_gone(bw);
                nbd_bw_flush(bw);
                return;
        }
        if (is_ifb_name(e->name, &owner))
                return; /* an IFB itself went: nothing hangs on it */
        note_gone(bw, e);
        if (may_have_ifb(bw, e->ifindex) && doom_ifb(bw, e->ifindex, &err) < 0)
                nbd_warn("%s is gone but its IFB stays: %s", e->name, err.msg);
}

struct present {
        const struct nbd_link_entry *links;
        size_t n;
};

/* A chain is stale when no interface has its ifindex, or the one that has
 * it is not the device it hooks (a new one of the old name); an older
 * helper's fwd chain always is (convert_old() replaced those it could). */
static bool not_present(int ifindex, const char *dev, bool old, void *data)
{
        const struct present *p = data;

        if (old)
                return true;
        for (size_t i = 0; i < p->n; i++)
                if (p->links[i].ifindex == ifindex)
                        return strcmp(p->links[i].name, dev) != 0;
        return true;
}

/* libvirt polices this direction with tc police: rate = average, a
 * bucket of burst kB (without one: average kB, one second), peak
 * ignored. nft's limit in bytes holds one second of its rate plus its
 * burst, so the burst it gets is what the bucket has beyond that second
 * (a bucket below it cannot be had: it is one second then), and the
 * bucket is never below POLICE_MIN_BUCKET. */
static void police_of(const struct nbd_bw_rate *rate, struct nbd_bw_police *ret)
{
        uint64_t r = bytes(rate->average), bucket = rate->burst ? bytes(rate->burst) : r;

        if (bucket < POLICE_MIN_BUCKET)
                bucket = POLICE_MIN_BUCKET;
        ret->rate = r;
        ret->burst = bucket > r ? (uint32_t)(bucket - r) : 0; /* NBD_BW_MAX_BURST kB fits */
}

/* What enters ifindex (a tap's outbound, a macvtap's inbound), policed in
 * an nftables chain after the firewall's (bw_nft.h). What an older helper
 * left for it (a tc redirect, an IFB; its fwd chain goes with the set) is
 * removed once the policer is there. */
static int set_police(struct nbd_bw *bw, int ifindex, const char *dev,
                      const struct nbd_bw_rate *rate, struct nbd_err *err)
{
        struct nbd_bw_police p;
        int r;

        if (bw->out == OUT_NONE) {
                return nbd_err_set(err, -EOPNOTSUPP,
                                   "limits on what enters %s (a tap's outbound, a macvtap's "
                                   "inbound) are not available: %s",
                                   dev, bw->out_mech);
        }
        police_of(rate, &p);
        r = nbd_bw_nft_set(bw->nft, ifindex, dev, &p, err);
        if (r == 0)
                r = clear_tc_redirect(bw, ifindex, dev, err);
        if (r == 0)
                r = doom_ifb(bw, ifindex, err);
        return r;
}

/* The policer goes, and whatever an older helper left (its fwd chain goes
 * with ours; its tc redirect, its IFB). */
static int clear_police(struct nbd_bw *bw, int ifindex, const char *dev, struct nbd_err *err)
{
        /* The redirect goes first: no frame reaches an IFB on its way out. */
        int r = nbd_bw_nft_clear(bw->nft, ifindex, err);

        if (r == 0)
                r = clear_tc_redirect(bw, ifindex, dev, err);
        if (r == 0)
                r = doom_ifb(bw, ifindex, err);
        return r;
}

static void read_class(struct nbd_bw *bw, int ifindex, uint32_t handle, struct nbd_bw_rate *ret);

/* An older helper shaped what enters links[i] on the IFB ifb (through an
 * nft fwd or a tc redirect, both of which take frames past a firewall):
 * the same limit goes on as a policer, and the IFB and redirects go. */
static void convert_old(struct nbd_bw *bw, const struct nbd_link_entry *e, int ifb)
{
        struct nbd_bw_rate rate;
        struct nbd_err err;
        int r;

        read_class(bw, ifb, NBD_BW_OLD_CLASS, &rate);
        /* Without a limit to keep, its fwd chain goes with the prune of
         * the sweep; the chains of ours stay. */
        if (rate.average && bw->out != OUT_NONE)
                r = set_police(bw, e->ifindex, e->name, &rate, &err);
        else if ((r = clear_tc_redirect(bw, e->ifindex, e->name, &err)) == 0)
                r = doom_ifb(bw, e->ifindex, &err);
        if (r < 0)
                nbd_warn("%s: what an older helper left for its bandwidth stays: %s", e->name,
                         err.msg);
        else
                nbd_info("%s: an older helper's IFB replaced by %s", e->name,
                         rate.average && bw->out != OUT_NONE ? "a policer" : "nothing");
}

void nbd_bw_sweep(struct nbd_bw *bw, const struct nbd_link_entry *links, size_t n)
{
        struct present p = {links, n};
        struct nbd_err err;
        unsigned pruned = 0;

        /* IFBs of an older helper whose interface is there: converted
         * first, so the chains left after are stale. */
        for (size_t i = 0; i < n; i++) {
                int owner, ifb = 0;
                if (!is_ifb_name(links[i].name, &owner))
                        continue;
                for (size_t j = 0; j < n; j++)
                        if (links[j].ifindex == owner && live_ifb_of(bw, links[i].name, &ifb) == 0)
                                convert_old(bw, &links[j], ifb);
        }
        if (nbd_bw_nft_prune(bw->nft, not_present, &p, &pruned, &err) < 0)
                nbd_warn("%s", err.msg);
        else if (pruned)
                nbd_info("removed %u bandwidth chain(s) of interfaces that went while no helper "
                         "ran, or of an older helper",
                         pruned);
        for (size_t i = 0; i < n; i++) {
                int owner;
                bool owned = false;

                if (!is_ifb_name(links[i].name, &owner))
                        continue;
                for (size_t j = 0; j < n && !owned; j++)
                        owned = links[j].ifindex == owner;
                if (owned)
                        continue;
                nbd_info("removing %s: the interface it shaped (ifindex %d) is gone", links[i].name,
                         owner);
                if (doom_ifb(bw, owner, &err) < 0)
                        nbd_warn("%s", err.msg);
        }
        /* A helper killed between a clear and its flush left IFBs in the
         * group (their redirects are gone already): they go too. */
        bw->doomed++;
        nbd_bw_flush(bw);
}

/* ---- the interface ---- */

/* ret: ifname's ifindex, and what tells whether an older helper's tree
 * on it is ours (bw_old_tree.h). */
static int lookup(struct nbd_bw *bw, const char *ifname, struct nbd_bw_old_link *ret,
                  bool *ret_macvtap, struct nbd_err *err)
{
        int ifindex = 0, r = link_of(bw, ifname, &ifindex, NULL, NULL, ret_macvtap, ret);

        if (r < 0)
                nbd_err_set(err, r, "no interface %s: %s", ifname, strerror(-r));
        return r;
}

/* Which way is which: a tap's egress is what its guest receives, its
 * ingress what the guest sends; a macvtap's are the other way round (the
 * guest's frames leave through its egress), as libvirt has them for
 * <interface type='direct'>. The root qdisc shapes the egress, the policer the
 * ingress. */
static void split(const struct nbd_bw_limits *l, bool macvtap,
                  const struct nbd_bw_rate **ret_egress, const struct nbd_bw_rate **ret_ingress)
{
        *ret_egress = macvtap ? &l->out : &l->in;
        *ret_ingress = macvtap ? &l->in : &l->out;
}

int nbd_bw_set(struct nbd_bw *bw, const char *ifname, const struct nbd_bw_limits *l,
               struct nbd_bw_applied *ret, struct nbd_err *err)
{
        const char *root_mech, *police_mech;
        const struct nbd_bw_rate *egress, *ingress;
        struct nbd_bw_old_link link = {0}; /* set by lookup(); gcc 12 cannot tell */
        bool macvtap = false;
        int r;

        r = nbd_bw_check(l, err);
        if (r == 0)
                r = lookup(bw, ifname, &link, &macvtap, err);
        if (r < 0)
                return r;
        split(l, macvtap, &egress, &ingress);
        if (egress->average)
                r = set_htb_tree(bw, &link, egress, ifname, err);
        else
                r = clear_htb_root(bw, &link, ifname, err);
        if (r < 0)
                return r;
        if (ingress->average)
                r = set_police(bw, link.ifindex, ifname, ingress, err);
        else
                r = clear_police(bw, link.ifindex, ifname, err);
        if (r < 0)
                return r;
        nbd_bw_mechanisms(bw, &root_mech, &police_mech);
        memset(ret, 0, sizeof(*ret));
        if (l->in.average)
                snprintf(ret->in, sizeof(ret->in), "%s", macvtap ? police_mech : root_mech);
        if (l->out.average)
                snprintf(ret->out, sizeof(ret->out), "%s", macvtap ? root_mech : police_mech);
        return 0;
}

static bool hooks_name(int ifindex, const char *dev, bool old, void *data)
{
        (void)ifindex;
        (void)old;
        return strcmp(dev, data) == 0;
}

int nbd_bw_clear(struct nbd_bw *bw, const char *ifname, struct nbd_err *err)
{
        struct nbd_bw_old_link link = {0};
        int r = lookup(bw, ifname, &link, NULL, err);

        if (r == -ENODEV) {
                /* Gone with its guest: its qdiscs went with it. A chain
                 * hooking its name (since Linux 6.16 it outlives the
                 * device; the loop may not have heard of it yet) goes now,
                 * or it would limit the next device of that name. */
                unsigned n = 0;
                int p = nbd_bw_nft_prune(bw->nft, hooks_name, (void *)ifname, &n, err);

                if (p < 0)
                        return p;
                nbd_err_set(err, -ENODEV,
                            "already gone: its qdiscs went with it; %u chain(s) hooking its name "
                            "deleted",
                            n);
                return -ENODEV;
        }
        if (r == 0)
                r = clear_htb_root(bw, &link, ifname, err);
        if (r == 0)
                r = clear_police(bw, link.ifindex, ifname, err);
        return r;
}

/* ---- reading back ---- */

/* The htb class handle of ifindex (HTB_CLASS on an interface, the old
 * layout's on an older helper's IFB). */
static void read_class(struct nbd_bw *bw, int ifindex, uint32_t handle, struct nbd_bw_rate *ret)
{
        struct nl_cache *cache = NULL;
        struct rtnl_class *c = NULL;
        uint64_t rate = 0, ceil = 0;

        memset(ret, 0, sizeof(*ret));
        nbd_netlink_begin(bw->nl);
        if (send_result(bw, rtnl_class_alloc_cache(bw->nl->req, ifindex, &cache)) == 0)
                c = rtnl_class_get(cache, ifindex, handle);
        if (c && rtnl_tc_get_kind(TC_CAST(c)) && strcmp(rtnl_tc_get_kind(TC_CAST(c)), "htb") == 0 &&
            rtnl_htb_get_rate64(c, &rate) == 0 && rtnl_htb_get_ceil64(c, &ceil) == 0) {
                ret->average = (uint32_t)(rate / 1024);
                ret->peak = ceil != rate ? (uint32_t)(ceil / 1024) : 0;
                ret->burst = (rtnl_htb_get_rbuffer(c) + 1023) / 1024;
                if (!ret->burst)
                        ret->burst = 1;
        }
        rtnl_class_put(c);
        nl_cache_free(cache);
}

/* ---- a set or clear in steps: the policer on the firewall's lane ---- */

struct nbd_bw_change {
        char ifname[IFNAMSIZ];
        struct nbd_bw_old_link link; /* the interface, when not gone */
        bool macvtap;
        bool gone; /* a clear of an interface that is not there */
        /* The egress as it was (to put back), and the policer to make
         * (rate 0: none, the chains of ifindex go). */
        struct nbd_bw_rate egress_before;
        bool police;
        struct nbd_bw_police p;
        struct nbd_bw_limits want; /* a set's (zero for a clear) */
        /* The lane's: its copy of the nft handle, and its outcome. */
        struct nbd_bw_nft *nft;
        struct nbd_bw_police police_before;
        unsigned pruned;
        int r;
        struct nbd_err err;
};

void nbd_bw_change_free(struct nbd_bw_change *c)
{
        if (!c)
                return;
        nbd_bw_nft_close(c->nft);
        free(c);
}

/* The egress as it was before c's begin (tc only). */
static int put_egress_back(struct nbd_bw *bw, struct nbd_bw_change *c, struct nbd_err *err)
{
        if (c->egress_before.average)
                return set_htb_tree(bw, &c->link, &c->egress_before, c->ifname, err);
        return clear_htb_root(bw, &c->link, c->ifname, err);
}

/* The tc part: the egress's root qdisc as l wants it (l NULL: cleared),
 * then what an older helper left for what enters the interface (its tc
 * redirect, its IFB: doomed, deleted by the next flush). Both before the
 * policer, not after it as in nbd_bw_set: a failure here then changes
 * nothing of nftables, and the egress is put back on the loop. */
static int change_tc(struct nbd_bw *bw, struct nbd_bw_change *c, const struct nbd_bw_rate *egress,
                     struct nbd_err *err)
{
        struct nbd_err ignored;
        int r;

        if (egress && egress->average)
                r = set_htb_tree(bw, &c->link, egress, c->ifname, err);
        else
                r = clear_htb_root(bw, &c->link, c->ifname, err);
        if (r < 0)
                return r; /* each failure above changes nothing it did not put back */
        r = clear_tc_redirect(bw, c->link.ifindex, c->ifname, err);
        if (r == 0)
                r = doom_ifb(bw, c->link.ifindex, err);
        if (r < 0)
                put_egress_back(bw, c, &ignored);
        return r;
}

int nbd_bw_change_begin(struct nbd_bw *bw, const char *ifname, const struct nbd_bw_limits *l,
                        struct nbd_bw_change **ret, struct nbd_err *err)
{
        const struct nbd_bw_rate *egress = NULL, *ingress = NULL;
        struct nbd_bw_old_tree old = {0};
        struct nbd_bw_change *c;
        int r;

        if (l && (r = nbd_bw_check(l, err)) < 0)
                return r;
        c = calloc(1, sizeof(*c));
        if (!c)
                return nbd_err_oom(err, "changing bandwidth limits");
        snprintf(c->ifname, sizeof(c->ifname), "%s", ifname);
        r = nbd_bw_nft_lane_copy(bw->nft, &c->nft);
        if (r < 0) {
                r = nbd_err_oom(err, "changing bandwidth limits");
                goto fail;
        }
        r = lookup(bw, ifname, &c->link, &c->macvtap, err);
        if (r == -ENODEV && !l) {
                c->gone = true; /* its chains, if any, go on the lane */
                *ret = c;
                return 0;
        }
        if (r < 0)
                goto fail;
        if (l) {
                c->want = *l;
                split(l, c->macvtap, &egress, &ingress);
        }
        if (ingress && ingress->average && bw->out == OUT_NONE) {
                r = nbd_err_set(err, -EOPNOTSUPP,
                                "limits on what enters %s (a tap's outbound, a macvtap's "
                                "inbound) are not available: %s",
                                ifname, bw->out_mech);
                goto fail;
        }
        if (ingress && ingress->average) {
                c->police = true;
                police_of(ingress, &c->p);
        }
        /* The egress as it is, to put back: ours, else an older helper's
         * tree that is ours (as BandwidthShow reads it). */
        read_class(bw, c->link.ifindex, HTB_CLASS, &c->egress_before);
        if (!c->egress_before.average && nbd_bw_old_tree_find(bw->nl, &c->link, &old, NULL) == 0 &&
            old.found)
                read_class(bw, c->link.ifindex, NBD_BW_OLD_CLASS, &c->egress_before);
        r = change_tc(bw, c, egress, err);
        if (r < 0)
                goto fail;
        *ret = c;
        return 0;
fail:
        nbd_bw_change_free(c);
        return r;
}

void nbd_bw_change_nft(struct nbd_bw_change *c)
{
        int fwd = 0;

        if (c->gone) {
                /* Since Linux 6.16 a chain outlives its device and would
                 * limit the next one of its name. */
                c->r = nbd_bw_nft_prune(c->nft, hooks_name, c->ifname, &c->pruned, &c->err);
                return;
        }
        /* What to put back should the batch fail; unreadable, none (as
         * nbd_bw_get had it). */
        if (nbd_bw_nft_peek(c->link.ifindex, c->ifname, &c->police_before, &fwd, NULL) < 0)
                memset(&c->police_before, 0, sizeof(c->police_before));
        if (c->police)
                c->r = nbd_bw_nft_set(c->nft, c->link.ifindex, c->ifname, &c->p, &c->err);
        else
                c->r = nbd_bw_nft_clear(c->nft, c->link.ifindex, &c->err);
        /* Tests: the policer's commit, held where it runs. */
        nbd_test_hold_point("BW_POLICE");
}

int nbd_bw_change_end(struct nbd_bw *bw, struct nbd_bw_change *c, struct nbd_bw_applied *ret,
                      struct nbd_bw_limits *ret_before, struct nbd_err *err)
{
        const char *root_mech, *police_mech;
        struct nbd_bw_rate ingress_before;
        struct nbd_err ignored;

        if (c->gone) {
                if (c->r < 0)
                        return nbd_err_set(err, c->r, "%s", c->err.msg);
                return nbd_err_set(err, -ENODEV,
                                   "already gone: its qdiscs went with it; %u chain(s) hooking its "
                                   "name deleted",
                                   c->pruned);
        }
        if (c->r < 0) {
                /* The policer's transaction changed nothing: the egress
                 * goes back as it was. */
                put_egress_back(bw, c, &ignored);
                return nbd_err_set(err, c->r, "%s", c->err.msg);
        }
        nbd_bw_mechanisms(bw, &root_mech, &police_mech);
        memset(ret, 0, sizeof(*ret));
        if (c->want.in.average)
                snprintf(ret->in, sizeof(ret->in), "%s", c->macvtap ? police_mech : root_mech);
        if (c->want.out.average)
                snprintf(ret->out, sizeof(ret->out), "%s", c->macvtap ? root_mech : police_mech);
        nbd_bw_nft_rate(&c->police_before, &ingress_before);
        ret_before->in = c->macvtap ? ingress_before : c->egress_before;
        ret_before->out = c->macvtap ? c->egress_before : ingress_before;
        return 0;
}
