// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bandwidth ops: protobuf in, bandwidth.c calls out. Validation checks the
 * interface and every rate before the batch runs; running first reads back
 * the limits netbroker had on the interface, so that a later failure of the
 * batch puts them back (a set or clear is undone by setting what was read;
 * an interface without netbroker limits is cleared again). A root qdisc
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

/* ---- undo ---- */

struct undo_bw {
        char ifname[IFNAMSIZ];
        int ifindex; /* the interface the op changed */
        struct nbd_bw_limits before;
};

static void undo_bw(struct nbd_job *job, void *data)
{
        struct undo_bw *u = data;
        struct nbd_bw_applied ignored;

        kernel_of(job)->set(bw_of(job), u->ifname, &u->before, &ignored, NULL);
}

/* A later op's failure: the limits go back on the interface the op
 * changed, not on another that took its name since (op_link.c's undo). */
static int undo_bw_later(struct nbd_job *job, void *data, struct nbd_err *err)
{
        struct undo_bw *u = data;
        struct nbd_bw_applied ignored;
        int r = nbd_job_check_undo(job, u->ifname, u->ifindex, err);

        if (r == 0)
                r = kernel_of(job)->set(bw_of(job), u->ifname, &u->before, &ignored, err);
        return r;
}

/* What netbroker has on ifname now, to put back on failure. */
static struct undo_bw *snapshot(struct nbd_job *job, const char *ifname)
{
        struct undo_bw *u = calloc(1, sizeof(*u));

        if (!u)
                return NULL;
        snprintf(u->ifname, sizeof(u->ifname), "%s", ifname);
        u->ifindex = nbd_job_ifindex(job, ifname);
        if (kernel_of(job)->get(bw_of(job), ifname, &u->before) < 0)
                memset(&u->before, 0, sizeof(u->before));
        return u;
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

/* ---- running ---- */

static int run_set(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__BandwidthSet *s = op->bandwidth_set;
        Netbroker__BandwidthResult *br;
        struct undo_bw *u, before;
        struct nbd_bw_applied applied;
        struct nbd_bw_limits l;
        struct nbd_err err;
        int r;

        if ((r = nbd_job_check_owned(job, s->ifname, res)))
                return r;
        br = malloc(sizeof(*br));
        u = snapshot(job, s->ifname);
        if (!br || !u) {
                free(br);
                free(u);
                return nbd_result_set(res, -ENOMEM, "bandwidth set: out of memory");
        }
        before = *u;
        netbroker__bandwidth_result__init(br);
        res->out_case = NETBROKER__RESULT__OUT_BANDWIDTH;
        res->bandwidth = br;
        limits_from(s, &l);
        r = kernel_of(job)->set(bw_of(job), s->ifname, &l, &applied, &err);
        if (r < 0) {
                /* Part of it may be in place: put back what was there. */
                undo_bw(job, u);
                free(u);
                return nbd_result_set(res, r, "bandwidth set %s: %s", s->ifname, err.msg);
        }
        br->inbound_mechanism = strdup(applied.in);
        br->outbound_mechanism = strdup(applied.out);
        r = br->inbound_mechanism && br->outbound_mechanism ? 0 : -ENOMEM;
        if (!br->inbound_mechanism)
                br->inbound_mechanism = (char *)protobuf_c_empty_string;
        if (!br->outbound_mechanism)
                br->outbound_mechanism = (char *)protobuf_c_empty_string;
        if (set_ifname(res, s->ifname) < 0)
                r = -ENOMEM;
        if (r < 0)
                free(u);
        else if (nbd_job_on_failure_undo_checked(job, undo_bw_later, free, u, before.ifindex) ==
                 0) /* frees u */
                return 0;
        /* This op fails, so no undo of it runs: put back what it changed. */
        undo_bw(job, &before);
        return nbd_result_set(res, -ENOMEM, "bandwidth set: out of memory");
}

static int run_clear(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *ifname = op->bandwidth_clear->ifname;
        struct undo_bw *u, before;
        struct nbd_err err;
        int r;

        if ((r = nbd_job_check_owned(job, ifname, res)))
                return r;
        u = snapshot(job, ifname);
        if (!u)
                return nbd_result_set(res, -ENOMEM, "bandwidth clear: out of memory");
        r = kernel_of(job)->clear(bw_of(job), ifname, &err);
        if (r == -ENODEV) {
                /* Gone with its guest: nothing to put back either. */
                free(u);
                if (set_ifname(res, ifname) < 0)
                        return nbd_result_set(res, -ENOMEM, "bandwidth clear: out of memory");
                nbd_result_set(res, 0, "bandwidth clear %s: %s", ifname, err.msg);
                return 0;
        }
        if (r < 0) {
                undo_bw(job, u);
                free(u);
                return nbd_result_set(res, r, "bandwidth clear %s: %s", ifname, err.msg);
        }
        before = *u;
        if (set_ifname(res, ifname) < 0)
                free(u);
        else if (nbd_job_on_failure_undo_checked(job, undo_bw_later, free, u, before.ifindex) ==
                 0) /* frees u */
                return 0;
        /* This op fails, so no undo of it runs: put back what it changed. */
        undo_bw(job, &before);
        return nbd_result_set(res, -ENOMEM, "bandwidth clear: out of memory");
}

const struct nbd_op_handler nbd_op_bandwidth_set = {
        .name = "bandwidth_set",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_BANDWIDTH,
        .stat = NBD_STAT_OPS_BANDWIDTH,
        .validate = validate_set,
        .run = run_set,
};
const struct nbd_op_handler nbd_op_bandwidth_clear = {
        .name = "bandwidth_clear",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_BANDWIDTH,
        .stat = NBD_STAT_OPS_BANDWIDTH,
        .validate = validate_clear,
        .run = run_clear,
};
