// SPDX-License-Identifier: LGPL-2.1-or-later
/* The reading ops: LinkList (link_show.c) and BandwidthShow
 * (bandwidth_show.c): protobuf in, a read of the kernel out. Nothing here
 * changes the system, so nothing is undone. A non-root caller sees only
 * the interfaces marked as made for it. */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bandwidth_show.h"
#include "lane.h" /* nbd_test_hold_point */
#include "link.h"
#include "link_show.h"
#include "ops.h"

/* A copy of s for a result ("" needs none). Out of memory: "", and *oom
 * set, so the result stays one that packs. */
static char *dup_str(const char *s, bool *oom)
{
        char *d;

        if (!s[0])
                return (char *)protobuf_c_empty_string;
        d = strdup(s);
        if (!d) {
                *oom = true;
                return (char *)protobuf_c_empty_string;
        }
        return d;
}

/* ---- LinkList ---- */

static int validate_list(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *name = op->link_list->name;
        int r;

        if (!name[0])
                return 0;
        if ((r = nbd_check_interface(v, name, res, "link list")))
                return r;
        return nbd_check_owned(v, name, res);
}

static const Netbroker__LinkKind wire_kinds[] = {
        [NBD_LINK_KIND_OTHER] = NETBROKER__LINK_KIND__LINK_KIND_OTHER,
        [NBD_LINK_KIND_TAP] = NETBROKER__LINK_KIND__LINK_KIND_TAP,
        [NBD_LINK_KIND_MACVTAP] = NETBROKER__LINK_KIND__LINK_KIND_MACVTAP,
        [NBD_LINK_KIND_MACVLAN] = NETBROKER__LINK_KIND__LINK_KIND_MACVLAN,
        [NBD_LINK_KIND_VETH] = NETBROKER__LINK_KIND__LINK_KIND_VETH,
        [NBD_LINK_KIND_BRIDGE] = NETBROKER__LINK_KIND__LINK_KIND_BRIDGE,
        [NBD_LINK_KIND_IFB] = NETBROKER__LINK_KIND__LINK_KIND_IFB,
};

/* Append one interface to the listing; -ENOMEM. */
static int add_link(Netbroker__LinkListResult *l, const struct nbd_link_info *in)
{
        Netbroker__LinkInfo *o = malloc(sizeof(*o));
        bool oom = false;

        if (!o)
                return -ENOMEM;
        netbroker__link_info__init(o);
        l->links[l->n_links++] = o; /* freed with the result from here on */
        o->ifindex = in->ifindex;
        o->kind = wire_kinds[in->kind];
        o->mtu = in->mtu;
        o->up = in->up;
        o->has_owner = in->has_owner;
        o->owner_uid = in->has_owner ? (uint32_t)in->owner : 0;
        o->made_by_helper = in->made_by_helper;
        o->name = dup_str(in->name, &oom);
        o->kind_name = dup_str(in->kind_name, &oom);
        o->mac = dup_str(in->mac, &oom);
        o->master = dup_str(in->master, &oom);
        return oom ? -ENOMEM : 0;
}

/* Interfaces a non-root caller may see: those marked as made for it (the
 * same mark nbd_check_owned() asks the link map about). */
static bool visible(const struct nbd_peer *p, const struct nbd_link_info *in)
{
        return nbd_peer_is_root(p) || (in->has_owner && in->owner == p->uid);
}

/* The dump runs on the links' lane (issue 14): at 4,096 devices it held
 * the loop, and every other client, for tens of milliseconds. The lane
 * reads into the listing's own data over a socket of the call's own; the
 * loop, after, picks what the caller may see and builds the reply. */
struct link_listing {
        const struct nbd_backend *be;
        Netbroker__Result *res;
        char name[IFNAMSIZ]; /* "": every interface */
        struct nbd_link_info *all;
        size_t n;
        struct nbd_err e;
        int r;
};

static void link_listing_free(void *data)
{
        struct link_listing *w = data;

        free(w->all);
        free(w);
}

/* On the links' lane. */
static void link_listing_read(void *data)
{
        struct link_listing *w = data;

        w->r = w->be->links.show_own(w->name, &w->all, &w->n, &w->e);
        nbd_test_hold_point("LINK_LIST_READ");
}

static void link_listing_done(struct nbd_job *job, void *data)
{
        struct link_listing *w = data;
        const struct nbd_peer *peer = nbd_job_peer(job);
        Netbroker__Result *res = w->res;
        Netbroker__LinkListResult *l;

        if (w->r < 0) {
                nbd_result_set(res, w->r, "link list: %s", w->e.msg);
                goto out;
        }
        l = malloc(sizeof(*l));
        if (!l) {
                nbd_result_set(res, -ENOMEM, "link list: out of memory");
                goto out;
        }
        netbroker__link_list_result__init(l);
        res->out_case = NETBROKER__RESULT__OUT_LINK_LIST;
        res->link_list = l;
        l->links = calloc(w->n ? w->n : 1, sizeof(*l->links));
        if (!l->links) {
                nbd_result_set(res, -ENOMEM, "link list: out of memory");
                goto out;
        }
        for (size_t i = 0; i < w->n; i++)
                if (visible(peer, &w->all[i]) && add_link(l, &w->all[i]) < 0) {
                        nbd_result_set(res, -ENOMEM, "link list: out of memory");
                        goto out;
                }
        /* A named interface that changed hands since the check. */
        if (w->name[0] && !l->n_links)
                nbd_result_set(res, -EPERM, "policy: uid %u does not own interface %s",
                               (unsigned)peer->uid, w->name);
out:
        /* The rest of w stays with the job until it ends. */
        free(w->all);
        w->all = NULL;
}

static int run_list(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *name = op->link_list->name;
        struct link_listing *w;
        int r;

        if (name[0] && (r = nbd_job_check_owned(job, name, res)))
                return r;
        if (!nbd_job_ctx(job)->links)
                return nbd_result_set(res, -EOPNOTSUPP, "link list: link list: no rtnetlink here");
        w = calloc(1, sizeof(*w));
        if (!w)
                return nbd_result_set(res, -ENOMEM, "link list: out of memory");
        *w = (struct link_listing){.be = nbd_job_ctx(job)->be, .res = res};
        snprintf(w->name, sizeof(w->name), "%s", name);
        if (nbd_job_keep(job, link_listing_free, w) < 0)
                return nbd_result_set(res, -ENOMEM, "link list: out of memory"); /* w freed */
        nbd_job_on_lane_read(job, NBD_NEEDS_LINKS, link_listing_read, link_listing_done, w);
        return -(int)res->status;
}

const struct nbd_op_handler nbd_op_link_list = {
        .name = "link_list",
        .stat = NBD_STAT_OPS_SHOW,
        /* Its checks look interfaces up (nbd_check_interface): without
         * rtnetlink they would dereference no links at all. */
        .needs = NBD_NEEDS_LINKS,
        .validate = validate_list,
        .run = run_list,
};

/* ---- BandwidthShow ---- */

static int validate_bw(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *ifname = op->bandwidth_show->ifname;
        int r = nbd_check_interface(v, ifname, res, "bandwidth show");

        return r ? r : nbd_check_owned(v, ifname, res);
}

/* A Rate for a direction with a limit; NULL in *ret for one without. */
static int rate_msg(bool has, const struct nbd_bw_rate *in, Netbroker__Rate **ret)
{
        Netbroker__Rate *m;

        *ret = NULL;
        if (!has)
                return 0;
        m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        netbroker__rate__init(m);
        m->average = in->average;
        m->peak = in->peak;
        m->burst = in->burst;
        m->floor = in->floor;
        *ret = m;
        return 0;
}

/* BandwidthShow reads the policer with nftables: on the firewall's lane,
 * like every nftables call of bandwidth's (issue 14), so the loop never
 * waits for the nftables commit mutex and no read of ours is interrupted
 * by a commit of the lane's. The tc objects are read there too, over a
 * socket of the call's own: the links' is the loop's. */
struct bw_showing {
        const struct nbd_backend *be;
        Netbroker__Result *res;
        char ifname[IFNAMSIZ];
        struct nbd_bw_shown s;
        struct nbd_err e;
        int r;
};

/* On the firewall's lane. */
static void bw_showing_read(void *data)
{
        struct bw_showing *w = data;

        w->r = w->be->bw.show(NULL, w->ifname, &w->s, &w->e);
        nbd_test_hold_point("BW_SHOW_READ");
}

static void bw_showing_done(struct nbd_job *job, void *data)
{
        struct bw_showing *w = data;
        Netbroker__Result *res = w->res;
        Netbroker__BandwidthShowResult *b;
        bool oom = false;

        (void)job;
        if (w->r < 0) {
                nbd_result_set(res, w->r, "bandwidth show: %s", w->e.msg);
                return;
        }
        b = malloc(sizeof(*b));
        if (!b) {
                nbd_result_set(res, -ENOMEM, "bandwidth show: out of memory");
                return;
        }
        netbroker__bandwidth_show_result__init(b);
        res->out_case = NETBROKER__RESULT__OUT_BANDWIDTH_SHOW;
        res->bandwidth_show = b;
        b->inbound_mechanism = dup_str(w->s.in_mech, &oom);
        b->outbound_mechanism = dup_str(w->s.out_mech, &oom);
        res->ifname = dup_str(w->ifname, &oom);
        if (oom || rate_msg(w->s.has_in, &w->s.in, &b->inbound) < 0 ||
            rate_msg(w->s.has_out, &w->s.out, &b->outbound) < 0)
                nbd_result_set(res, -ENOMEM, "bandwidth show: out of memory");
}

static int run_bw(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *ifname = op->bandwidth_show->ifname;
        struct bw_showing *w;
        int r;

        if ((r = nbd_job_check_owned(job, ifname, res)))
                return r;
        w = calloc(1, sizeof(*w));
        if (!w)
                return nbd_result_set(res, -ENOMEM, "bandwidth show: out of memory");
        w->be = nbd_job_ctx(job)->be;
        w->res = res;
        snprintf(w->ifname, sizeof(w->ifname), "%s", ifname);
        if (nbd_job_keep(job, free, w) < 0)
                return nbd_result_set(res, -ENOMEM, "bandwidth show: out of memory"); /* w freed */
        nbd_job_on_lane_read(job, NBD_NEEDS_FIREWALL, bw_showing_read, bw_showing_done, w);
        return -(int)res->status;
}

const struct nbd_op_handler nbd_op_bandwidth_show = {
        .name = "bandwidth_show",
        .stat = NBD_STAT_OPS_SHOW,
        .needs = NBD_NEEDS_LINKS, /* reads tc */
        .lanes = NBD_NEEDS_FIREWALL, /* and the policer: run_bw */
        .validate = validate_bw,
        .run = run_bw,
};
