// SPDX-License-Identifier: LGPL-2.1-or-later
/* A caller's port in a bridge that is not its own (root's virbr0, which
 * its policy's `bridges` lets it join): what its LinkSet may not do to
 * the bridge and the bridge's other ports. See ops.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bridge_port.h"
#include "link_show.h"
#include "mac.h"
#include "ops.h"

static struct nbd_link_info *find(struct nbd_link_info *all, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(all[i].name, name) == 0)
                        return &all[i];
        return NULL;
}

/* What the port and the bridge are now, and what the port will be. */
struct port_plan {
        const struct nbd_link_info *port, *br;
        bool joins;
        uint8_t mac[6], br_mac[6];
        bool has_mac; /* the port's address after the op, and the bridge's, read */
        unsigned mtu;
};

/* A port's MTU below the bridge's would lower the bridge's (it follows
 * its lowest port's unless set by hand): every other port's traffic would
 * go in smaller frames, or be dropped. */
static int check_mtu(const struct port_plan *p, const Netbroker__LinkSet *s, uid_t uid,
                     Netbroker__Result *res)
{
        if ((!p->joins && !s->mtu) || p->mtu >= p->br->mtu)
                return 0;
        return nbd_result_set(res, -EPERM,
                              "link set: policy: uid %u may not give %s an MTU of %u in bridge %s, "
                              "not its own, whose MTU is %u: the bridge would take the lower one",
                              (unsigned)uid, s->name, p->mtu, p->br->name, p->br->mtu);
}

/* An address the bridge knows, on another port or as its own: the kernel
 * makes a port's address a local (permanent) entry, which wins over the
 * one it learned, and the bridge would send that guest's traffic, the
 * host's too, to the caller's port. */
static int check_known(struct nbd_job *job, const struct port_plan *p, const char *name, uid_t uid,
                       Netbroker__Result *res)
{
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);
        struct nbd_err err;
        bool known = memcmp(p->mac, p->br_mac, 6) == 0;
        int r;

        if (!known && (r = ctx->be->net.fdb_has(ctx->links, p->br->ifindex, p->port->ifindex,
                                                p->mac, &known, &err)) < 0)
                return nbd_result_set(res, r, "link set: bridge %s: %s", p->br->name, err.msg);
        if (!known)
                return 0;
        return nbd_result_set(res, -EPERM,
                              "link set: policy: uid %u may not give %s the address "
                              "%02x:%02x:%02x:%02x:%02x:%02x in bridge %s, not its own: the "
                              "bridge knows it already (another port's, or its own)",
                              (unsigned)uid, name, p->mac[0], p->mac[1], p->mac[2], p->mac[3],
                              p->mac[4], p->mac[5], p->br->name);
}

/* A bridge whose address was not set by hand takes its lowest port's
 * (br_stp_recalculate_bridge_id): a port's address would become the
 * bridge's, the host's address on it. The kernel does not report whether
 * it was set by hand; it surely was when the bridge's address is none of
 * its lowest port's. Without other ports the bridge is pinned (its own
 * address set again, as by hand: that flushes its neighbours, none
 * behind other ports); with them, a change of its address is refused. */
static int check_bridge_addr(struct nbd_job *job, const struct port_plan *p,
                             struct nbd_link_info *all, size_t n, const char *name, uid_t uid,
                             Netbroker__Result *res)
{
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);
        uint8_t low[6], others[6], m[6];
        bool has_low = false, has_others = false;
        struct nbd_err err;
        int r;

        for (size_t i = 0; i < n; i++) {
                if (strcmp(all[i].master, p->br->name) != 0 || nbp_mac_parse(all[i].mac, m) < 0)
                        continue;
                if (!has_low || memcmp(m, low, 6) < 0)
                        memcpy(low, m, 6), has_low = true;
                if (&all[i] != p->port && (!has_others || memcmp(m, others, 6) < 0))
                        memcpy(others, m, 6), has_others = true;
        }
        if (!has_others) {
                r = ctx->be->net.bridge_pin_addr(ctx->links, p->br->ifindex, p->br_mac, &err);
                return r < 0 ? nbd_result_set(res, r, "link set: bridge %s: %s", p->br->name,
                                              err.msg)
                             : 0;
        }
        if (memcmp(low, p->br_mac, 6) != 0) /* set by hand */
                return 0;
        if (memcmp(p->mac, others, 6) < 0)
                memcpy(others, p->mac, 6);
        if (memcmp(others, p->br_mac, 6) == 0)
                return 0;
        return nbd_result_set(res, -EPERM,
                              "link set: policy: uid %u may not give %s the address "
                              "%02x:%02x:%02x:%02x:%02x:%02x in bridge %s, not its own: the "
                              "bridge takes its lowest port's address, and would change its own "
                              "(root can set the bridge's address by hand: then it stays)",
                              (unsigned)uid, name, p->mac[0], p->mac[1], p->mac[2], p->mac[3],
                              p->mac[4], p->mac[5], p->br->name);
}

static int check_plan(struct nbd_job *job, struct port_plan *p, struct nbd_link_info *all, size_t n,
                      const Netbroker__LinkSet *s, Netbroker__Result *res)
{
        uid_t uid = nbd_job_peer(job)->uid;
        int r;

        if ((r = check_mtu(p, s, uid, res)) < 0)
                return r;
        if ((!p->joins && !s->mac[0]) || !p->has_mac)
                return 0;
        if ((r = check_known(job, p, s->name, uid, res)) < 0)
                return r;
        return check_bridge_addr(job, p, all, n, s->name, uid, res);
}

int nbd_job_check_port(struct nbd_job *job, const Netbroker__LinkSet *s, Netbroker__Result *res)
{
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);
        const struct nbd_backend_links *k = &ctx->be->links;
        uid_t uid = nbd_job_peer(job)->uid;
        struct nbd_link_info *all = NULL;
        struct port_plan p = {0};
        struct nbd_err err;
        size_t n = 0;
        int r;

        if (nbd_peer_is_root(nbd_job_peer(job)) || s->nomaster ||
            (!s->master[0] && !s->mac[0] && !s->mtu))
                return 0;
        r = k->show(k->netlink(ctx->links), NULL, &all, &n, &err);
        if (r < 0)
                return nbd_result_set(res, r, "link set: %s", err.msg);
        /* Gone: the op fails on its own, with ENODEV. */
        p.port = find(all, n, s->name);
        p.br = p.port ? find(all, n, s->master[0] ? s->master : p.port->master) : NULL;
        if (!p.br || p.br->kind != NBD_LINK_KIND_BRIDGE || (p.br->has_owner && p.br->owner == uid))
                goto out;
        p.joins = strcmp(p.port->master, p.br->name) != 0;
        p.mtu = s->mtu ? s->mtu : p.port->mtu;
        p.has_mac = nbp_mac_parse(s->mac[0] ? s->mac : p.port->mac, p.mac) == 0 &&
                    nbp_mac_parse(p.br->mac, p.br_mac) == 0;
        r = check_plan(job, &p, all, n, s, res);
out:
        free(all);
        return r;
}
