// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bandwidth ops: protobuf in, bandwidth.c calls out. Validation checks the
 * interface and every rate before the batch runs; running reads back the
 * limits netbroker had on the interface before it changes them, so that a
 * later failure of the batch puts them back (a set or clear is undone by
 * setting what was read; an interface without netbroker limits is cleared
 * again). The policer's part runs on the firewall's lane (run_change). A root qdisc
 * that is not netbroker's (bandwidth.h's mark, or an older helper's tree
 * bw_old_tree.h finds to be ours) is never replaced: the set fails with
 * EBUSY. A clear of an interface that is gone (with its guest)
 * is a success that says so: nothing of it is left to remove. */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bandwidth.h"
#include "lane.h" /* nbd_test_hold_point */
#include "ops.h"

static struct nbd_bw *bw_of(const struct nbd_job *job)
{
        return nbd_job_ctx(job)->bw;
}

/* The kernel half the job's limits are set through. */
static const struct nbd_backend_bw *kernel_of(const struct nbd_job *job)
{
        return &nbd_job_ctx(job)->be->bw;
}

static void rate_from(const Netbroker__Rate *r, struct nbd_bw_rate *out)
{
        memset(out, 0, sizeof(*out));
        if (!r)
                return;
        out->average = r->average;
        out->peak = r->peak;
        out->burst = r->burst;
        out->floor = r->floor;
}

static void limits_from(const Netbroker__BandwidthSet *s, struct nbd_bw_limits *out)
{
        rate_from(s->inbound, &out->in);
        rate_from(s->outbound, &out->out);
}

/* ---- validation ---- */

static int validate_set(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__BandwidthSet *s = op->bandwidth_set;
        struct nbd_bw_limits l;
        struct nbd_err err;
        bool macvtap;
        int r;

        if ((r = nbd_check_interface(v, s->ifname, res, "bandwidth set")) ||
            (r = nbd_check_owned(v, s->ifname, res)))
                return r;
        limits_from(s, &l);
        if (nbd_bw_check(&l, &err) < 0)
                return nbd_result_set(res, -EINVAL, "bandwidth set %s: %s", s->ifname, err.msg);
        /* What enters the interface is policed after the firewall: a
         * tap's outbound, a macvtap's inbound (bandwidth.h). Without the
         * nft limit that keeps the firewall in force, such a limit is
         * refused. */
        macvtap = v->ctx->be->links.is_macvtap(v->ctx->links, s->ifname);
        if ((macvtap ? l.in.average : l.out.average) &&
            !v->ctx->be->bw.outbound_available(v->ctx->bw)) {
                const char *in, *out;
                v->ctx->be->bw.mechanisms(v->ctx->bw, &in, &out);
                return nbd_result_set(res, -EOPNOTSUPP,
                                      "bandwidth set %s: %s limits are not available: %s",
                                      s->ifname, macvtap ? "a macvtap's inbound" : "outbound", out);
        }
        return 0;
}

/* An interface that is not there is no error: it went with its guest,
 * and the clear says so when it runs (run_clear checks the owner again
 * if one of that name is there by then). */
static int validate_clear(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *ifname = op->bandwidth_clear->ifname;
        int r = nbd_check_interface(v, ifname, res, "bandwidth clear");

        if (r == -ENODEV) {
                res->status = 0;
                if (res->message != protobuf_c_empty_string)
                        free(res->message);
                res->message = (char *)protobuf_c_empty_string;
                return 0;
        }
        return r ? r : nbd_check_owned(v, ifname, res);
}

/* ---- running ---- */

/* A set or clear: its tc part on the loop, its policer on the firewall's
 * lane (bandwidth.h's steps), so that the loop never waits for the
 * nftables commit mutex behind a firewall transaction and no commit of
 * ours interrupts the firewall's table reads (issue 14); its undo the
 * same way. The undo is registered before the lane's call, so that it
 * holds the op's place among the batch's undos (newest first) whatever
 * the call returns, and owns this state: it does nothing unless the
 * change was made. */
struct bw_op {
        const struct nbd_backend_bw *k;
        struct nbd_bw *bw;
        Netbroker__Result *res;
        size_t op;
        bool set; /* else a clear */
        char ifname[IFNAMSIZ];
        int ifindex; /* the interface the op changes, for its undo */
        struct nbd_bw_change *c; /* from begin to end */
        bool made; /* the change is in the kernel */
        struct nbd_bw_limits before; /* what an undo puts back */
};

static void bw_op_free(void *data)
{
        struct bw_op *o = data;

        o->k->change_free(o->c);
        free(o);
}

/* A later op's failure: the limits go back on the interface the op
 * changed, not on another that took its name since (op_link.c's undo), in
 * the same steps as the op: the tc part here, on the loop, the policer on
 * the firewall's lane (bw_op_nft), the outcome in bw_op_undone. */
static bool bw_op_undo(struct nbd_job *job, void *data, size_t failed)
{
        struct bw_op *o = data;
        struct nbd_err err;
        int r;

        (void)failed;
        if (!o->made)
                return false;
        r = nbd_job_check_undo(job, o->ifname, o->ifindex, &err);
        if (r == 0)
                r = o->k->change_begin(o->bw, o->ifname, &o->before, &o->c, &err);
        if (r < 0) {
                nbd_job_mark_undo_skipped(job, o->op, err.msg);
                return false;
        }
        return true;
}

static void bw_op_undone(struct nbd_job *job, void *data)
{
        struct bw_op *o = data;
        struct nbd_bw_applied ignored;
        struct nbd_bw_limits was;
        struct nbd_err err;
        int r = o->k->change_end(o->bw, o->c, &ignored, &was, &err);

        o->k->change_free(o->c);
        o->c = NULL;
        if (r < 0)
                nbd_job_mark_undo_skipped(job, o->op, err.msg);
        else
                nbd_job_mark_undone(job, o->op);
}

/* On the firewall's lane: the op's policer, or its undo's. */
static void bw_op_nft(void *data)
{
        struct bw_op *o = data;

        o->k->change_nft(o->c);
        if (o->made) /* tests: an undo's policer, held where it runs */
                nbd_test_hold_point("BW_UNDO");
}

static int set_ifname(Netbroker__Result *res, const char *ifname)
{
        res->ifname = strdup(ifname);
        if (!res->ifname) {
                res->ifname = (char *)protobuf_c_empty_string;
                return -ENOMEM;
        }
        return 0;
}

/* A set's result: the mechanisms in place each way. */
static int set_result(Netbroker__Result *res, const struct nbd_bw_applied *applied)
{
        Netbroker__BandwidthResult *br = malloc(sizeof(*br));
        int r = 0;

        if (!br)
                return -ENOMEM;
        netbroker__bandwidth_result__init(br);
        res->out_case = NETBROKER__RESULT__OUT_BANDWIDTH;
        res->bandwidth = br;
        br->inbound_mechanism = strdup(applied->in);
        br->outbound_mechanism = strdup(applied->out);
        if (!br->inbound_mechanism || !br->outbound_mechanism)
                r = -ENOMEM;
        if (!br->inbound_mechanism)
                br->inbound_mechanism = (char *)protobuf_c_empty_string;
        if (!br->outbound_mechanism)
                br->outbound_mechanism = (char *)protobuf_c_empty_string;
        return r;
}

/* On the loop, once the policer's call returned. */
static void bw_op_done(struct nbd_job *job, void *data)
{
        struct bw_op *o = data;
        const char *what = o->set ? "bandwidth set" : "bandwidth clear";
        struct nbd_bw_applied applied, ignored;
        struct nbd_err err;
        int r = o->k->change_end(o->bw, o->c, &applied, &o->before, &err);

        (void)job;
        o->k->change_free(o->c);
        o->c = NULL;
        if (r == -ENODEV && !o->set) {
                /* Gone with its guest: nothing to put back either. */
                if (set_ifname(o->res, o->ifname) < 0)
                        nbd_result_set(o->res, -ENOMEM, "%s: out of memory", what);
                else
                        nbd_result_set(o->res, 0, "%s %s: %s", what, o->ifname, err.msg);
                return;
        }
        if (r < 0) {
                nbd_result_set(o->res, r, "%s %s: %s", what, o->ifname, err.msg);
                return;
        }
        r = set_ifname(o->res, o->ifname);
        if (r == 0 && o->set)
                r = set_result(o->res, &applied);
        if (r == 0) {
                o->made = true;
                return;
        }
        /* This op fails, so no undo of it runs: put back what it changed. */
        o->k->set(o->bw, o->ifname, &o->before, &ignored, NULL);
        nbd_result_set(o->res, -ENOMEM, "%s: out of memory", what);
}

static int run_change(struct nbd_job *job, const char *ifname, const struct nbd_bw_limits *l,
                      Netbroker__Result *res)
{
        const char *what = l ? "bandwidth set" : "bandwidth clear";
        struct nbd_err err;
        struct bw_op *o;
        int r;

        if ((r = nbd_job_check_owned(job, ifname, res)))
                return r;
        o = calloc(1, sizeof(*o));
        if (!o)
                return nbd_result_set(res, -ENOMEM, "%s: out of memory", what);
        *o = (struct bw_op){.k = kernel_of(job),
                            .bw = bw_of(job),
                            .res = res,
                            .op = nbd_job_op_index(job),
                            .set = l != NULL,
                            .ifindex = nbd_job_ifindex(job, ifname)};
        snprintf(o->ifname, sizeof(o->ifname), "%s", ifname);
        r = o->k->change_begin(o->bw, ifname, l, &o->c, &err);
        if (r < 0) {
                free(o);
                return nbd_result_set(res, r, "%s %s: %s", what, ifname, err.msg);
        }
        if (nbd_job_on_failure_lane(job, NBD_NEEDS_FIREWALL, bw_op_undo, bw_op_nft, bw_op_undone,
                                    bw_op_free, o, o->ifindex) < 0) {
                /* o freed, and with it the change begun: its tc part stays
                 * (out of memory, the rarest of failures). */
                return nbd_result_set(res, -ENOMEM, "%s: out of memory", what);
        }
        nbd_job_on_lane(job, NBD_NEEDS_FIREWALL, bw_op_nft, bw_op_done, o);
        return -(int)res->status;
}

static int run_set(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        struct nbd_bw_limits l;

        limits_from(op->bandwidth_set, &l);
        return run_change(job, op->bandwidth_set->ifname, &l, res);
}

static int run_clear(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        return run_change(job, op->bandwidth_clear->ifname, NULL, res);
}

const struct nbd_op_handler nbd_op_bandwidth_set = {
        .name = "bandwidth_set",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_BANDWIDTH,
        .lanes = NBD_NEEDS_FIREWALL, /* the policer */
        .stat = NBD_STAT_OPS_BANDWIDTH,
        .validate = validate_set,
        .run = run_set,
};
const struct nbd_op_handler nbd_op_bandwidth_clear = {
        .name = "bandwidth_clear",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_BANDWIDTH,
        .lanes = NBD_NEEDS_FIREWALL, /* the policer */
        .stat = NBD_STAT_OPS_BANDWIDTH,
        .validate = validate_clear,
        .run = run_clear,
};
