// SPDX-License-Identifier: LGPL-2.1-or-later
/* BridgeOptSet (virtual networks, part 1): a bridge's STP and forward
 * delay, a port's isolated, learning and flooding flags, as libvirt sets
 * them. The values before are read first: an option the kernel does not
 * report for the device (not a bridge, not a port, a kernel without it)
 * fails the op with EOPNOTSUPP and changes nothing; the op's own failure
 * part-way, and a later op's failure, put the old values back. Runs as
 * LinkSet does (op_addr.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bridge_opt.h"
#include "ops.h"

/* The op's fields as options. */
static void opts_of(const Netbroker__BridgeOptSet *m, struct nbd_bropts *o)
{
        memset(o, 0, sizeof(*o));
        snprintf(o->ifname, sizeof(o->ifname), "%s", m->ifname);
        o->has[NBD_BROPT_STP] = m->has_stp;
        o->val[NBD_BROPT_STP] = m->stp;
        o->has[NBD_BROPT_FORWARD_DELAY] = m->has_forward_delay;
        o->val[NBD_BROPT_FORWARD_DELAY] = m->forward_delay_cs;
        o->has[NBD_BROPT_ISOLATED] = m->has_isolated;
        o->val[NBD_BROPT_ISOLATED] = m->isolated;
        o->has[NBD_BROPT_LEARNING] = m->has_learning;
        o->val[NBD_BROPT_LEARNING] = m->learning;
        o->has[NBD_BROPT_UNICAST_FLOOD] = m->has_unicast_flood;
        o->val[NBD_BROPT_UNICAST_FLOOD] = m->unicast_flood;
        o->has[NBD_BROPT_MULTICAST_FLOOD] = m->has_multicast_flood;
        o->val[NBD_BROPT_MULTICAST_FLOOD] = m->multicast_flood;
        o->has[NBD_BROPT_BROADCAST_FLOOD] = m->has_broadcast_flood;
        o->val[NBD_BROPT_BROADCAST_FLOOD] = m->broadcast_flood;
}

static int validate_bridge_opt(struct nbd_validation *v, const Netbroker__Op *op,
                               Netbroker__Result *res)
{
        const Netbroker__BridgeOptSet *m = op->bridge_opt_set;
        struct nbd_bropts o;
        bool any = false;
        int r;

        if ((r = nbd_check_interface(v, m->ifname, res, "bridge options")) ||
            (r = nbd_check_owned(v, m->ifname, res)))
                return r;
        opts_of(m, &o);
        for (int i = 0; i < NBD_BROPT_N; i++)
                any |= o.has[i];
        if (!any)
                return nbd_result_set(res, -EINVAL, "bridge options: none given for %s", m->ifname);
        /* The kernel's range with STP on is 2-30 s; with it off any
         * delay up to that (libvirt's default network: delay 0). */
        if (m->has_forward_delay && m->forward_delay_cs > 3000)
                return nbd_result_set(res, -EINVAL,
                                      "bridge options: forward delay %u cs is over 3000 (30 s)",
                                      m->forward_delay_cs);
        /* The kernel sets the delay, then starts STP, which raises a delay
         * under 2 s to 2 s without a word: the op would succeed with a
         * delay other than the one asked for. */
        if (m->has_stp && m->stp && m->has_forward_delay && m->forward_delay_cs < 200)
                return nbd_result_set(res, -EINVAL,
                                      "bridge options: forward delay %u cs is under 200 (2 s), "
                                      "the least a bridge with STP on takes",
                                      m->forward_delay_cs);
        return 0;
}

struct undo_bropt {
        struct nbd_bropts old;
        int ifindex; /* the interface the op changed */
};

/* A later op's failure: the options go back on the interface the op
 * changed, not on another that took its name since (op_link.c's undo). */
static int undo_bropt(struct nbd_job *job, void *data, struct nbd_err *err)
{
        struct undo_bropt *u = data;
        int r = nbd_job_check_undo(job, u->old.ifname, u->ifindex, err);

        if (r == 0)
                r = nbd_job_ctx(job)->be->net.bropt_set(nbd_job_ctx(job)->links, &u->old, err);
        return r;
}

static int run_bridge_opt(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const struct nbd_backend_net *be = &nbd_job_ctx(job)->be->net;
        struct nbd_links *l = nbd_job_ctx(job)->links;
        struct undo_bropt *u;
        struct nbd_bropts o, old;
        struct nbd_err err;
        int r, ifindex;

        if ((r = nbd_job_check_owned(job, op->bridge_opt_set->ifname, res)))
                return r;
        ifindex = nbd_job_ifindex(job, op->bridge_opt_set->ifname);
        opts_of(op->bridge_opt_set, &o);
        r = be->bropt_get(l, &o, &old, &err);
        if (r < 0)
                return nbd_result_set(res, r, "bridge options: %s", err.msg);
        r = be->bropt_set(l, &o, &err);
        if (r < 0) {
                /* Part of it may be in place: the kernel takes a bridge's
                 * delay before its STP and keeps it when it refuses STP
                 * (a bridge running MRP), and STP off with a delay goes
                 * in two requests (bridge_opt.c). Put back what was
                 * there, so that the op changes nothing. Gone: nothing
                 * of it stays. */
                int rr = be->bropt_set(l, &old, NULL);
                if (rr < 0 && rr != -ENODEV)
                        return nbd_result_set(res, r,
                                              "bridge options: %s; putting the options of %s "
                                              "back failed too: %s",
                                              err.msg, o.ifname, strerror(-rr));
                return nbd_result_set(res, r, "bridge options: %s", err.msg);
        }
        u = malloc(sizeof(*u));
        if (u) {
                u->old = old;
                u->ifindex = ifindex;
                if (nbd_job_on_failure_undo_checked(job, undo_bropt, free, u, ifindex) ==
                    0) /* frees u */
                        return 0;
        }
        be->bropt_set(l, &old, NULL);
        return nbd_result_set(res, -ENOMEM, "bridge options: out of memory");
}

const struct nbd_op_handler nbd_op_bridge_opt_set = {
        .name = "bridge_opt_set",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = validate_bridge_opt,
        .run = run_bridge_opt,
};
