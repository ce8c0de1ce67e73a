// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners in the client library: NetApply, NetRemove, NetList and
 * their results (netbroker.h, "virtual networks"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The batch and owner arguments of who (the helper checks the owner's
 * name itself). */
static int owner_check(const char *who, const nb_batch *b, const char *owner)
{
        if (!b)
                return nb_bad_arg(EINVAL, who, "batch is NULL");
        if (!owner || !owner[0])
                return nb_bad_arg(EINVAL, who, "owner is %s", owner ? "empty" : "NULL");
        return 0;
}

/* Port forward arg of who. */
static int forward_check(const char *who, const char *arg, const nb_net_forward *f)
{
        if (!f->protocol)
                return nb_bad_arg(EINVAL, who, "%s->protocol is NULL", arg);
        if (!f->guest_address)
                return nb_bad_arg(EINVAL, who, "%s->guest_address is NULL", arg);
        if (!f->outside_port || f->outside_port > 65535)
                return nb_bad_arg(EINVAL, who, "%s->outside_port %u is not 1 to 65535", arg,
                                  (unsigned)f->outside_port);
        if (f->guest_port > 65535)
                return nb_bad_arg(EINVAL, who, "%s->guest_port %u is above 65535", arg,
                                  (unsigned)f->guest_port);
        return 0;
}

static int forward_msg(const char *who, size_t i, const nb_net_forward *theirs,
                       Netbroker__NetPortForward **ret)
{
        Netbroker__NetPortForward *m;
        nb_net_forward f;
        bool oom = false;
        char arg[48];
        int r;

        snprintf(arg, sizeof(arg), "spec->forwards[%zu]", i);
        if ((r = NB_ARG_IN(who, arg, &f, theirs, NB_NET_FORWARD)) < 0 ||
            (r = forward_check(who, arg, &f)) < 0)
                return r;
        if (!(m = malloc(sizeof(*m))))
                return -ENOMEM;
        netbroker__net_port_forward__init(m);
        m->protocol = nb_dup_or_empty(f.protocol, &oom);
        m->outside_address = nb_dup_or_empty(f.outside_address, &oom);
        m->guest_address = nb_dup_or_empty(f.guest_address, &oom);
        m->outside_port = f.outside_port;
        m->guest_port = f.guest_port;
        *ret = m; /* freed with the op, filled or not */
        return oom ? -ENOMEM : 0;
}

static int fill(const char *who, Netbroker__NetApply *a, const nb_net_spec *s)
{
        bool oom = false;
        int r;

        a->bridge = nb_dup_or_empty(s->bridge, &oom);
        a->forward_dev = nb_dup_or_empty(s->forward_dev, &oom);
        a->mode = (Netbroker__NetForwardMode)s->mode;
        a->nat_port_min = s->nat_port_min;
        a->nat_port_max = s->nat_port_max;
        a->nat_ipv6 = s->nat_ipv6;
        a->ipv6_nogw = s->ipv6_nogw;
        a->fw_mode = s->fw_mode == NB_FW_ENSURE ? NETBROKER__FW_MODE__FW_ENSURE
                                                : NETBROKER__FW_MODE__FW_REPLACE;
        if (oom)
                return -ENOMEM;
        if (s->n_subnets && !(a->subnets = calloc(s->n_subnets, sizeof(char *))))
                return -ENOMEM;
        for (size_t i = 0; i < s->n_subnets; i++) {
                if (!s->subnets[i])
                        return nb_bad_arg(EINVAL, who, "spec->subnets[%zu] is NULL", i);
                a->subnets[a->n_subnets++] = nb_dup_or_empty(s->subnets[i], &oom);
                if (oom)
                        return -ENOMEM;
        }
        if (s->n_forwards && !(a->port_forwards = calloc(s->n_forwards, sizeof(void *))))
                return -ENOMEM;
        for (size_t i = 0; i < s->n_forwards; i++) {
                Netbroker__NetPortForward *m = NULL;
                r = forward_msg(who, i, s->forwards[i], &m);
                if (m)
                        a->port_forwards[a->n_port_forwards++] = m;
                if (r < 0)
                        return r;
        }
        return 0;
}

NB_EXPORT int nb_batch_net_apply(nb_batch *b, const char *owner, const nb_net_spec *theirs)
{
        Netbroker__NetApply *a;
        nb_net_spec s;
        bool oom = false;
        int r;

        if ((r = owner_check(__func__, b, owner)) < 0)
                return r;
        if (!theirs)
                return nb_bad_arg(EINVAL, __func__, "spec is NULL");
        if ((r = NB_ARG_IN(__func__, "spec", &s, theirs, NB_NET_SPEC)) < 0)
                return r;
        if (!s.bridge || !s.bridge[0])
                return nb_bad_arg(EINVAL, __func__, "spec->bridge is %s",
                                  s.bridge ? "empty" : "NULL");
        if ((unsigned)s.mode > NB_NET_ISOLATED)
                return nb_bad_arg(EINVAL, __func__,
                                  "spec->mode %d is not NB_NET_NAT, _ROUTE, _OPEN or _ISOLATED",
                                  (int)s.mode);
        if ((s.n_subnets && !s.subnets) || (s.n_forwards && !s.forwards))
                return nb_bad_arg(EINVAL, __func__, "spec->%s is NULL and spec->n_%s is %zu",
                                  s.n_subnets && !s.subnets ? "subnets" : "forwards",
                                  s.n_subnets && !s.subnets ? "subnets" : "forwards",
                                  s.n_subnets && !s.subnets ? s.n_subnets : s.n_forwards);
        if (s.n_subnets > 1024 || s.n_forwards > 1024)
                return nb_bad_arg(EINVAL, __func__, "spec->n_%s is %zu; at most 1024",
                                  s.n_subnets > 1024 ? "subnets" : "forwards",
                                  s.n_subnets > 1024 ? s.n_subnets : s.n_forwards);
        if (!(a = malloc(sizeof(*a))))
                return -ENOMEM;
        netbroker__net_apply__init(a);
        a->owner = nb_dup_or_empty(owner, &oom);
        r = oom ? -ENOMEM : fill(__func__, a, &s);
        /* Bad input (a forward of a newer header's: E2BIG) is no -ENOMEM. */
        if (r == -EINVAL || r == -E2BIG) {
                protobuf_c_message_free_unpacked(&a->base, NULL);
                return r;
        }
        return nb_batch_add_sub(b, NETBROKER__OP__OP_NET_APPLY, a, r < 0);
}

NB_EXPORT int nb_batch_net_remove(nb_batch *b, const char *owner)
{
        Netbroker__NetRemove *m;
        bool oom = false;
        int r;

        if ((r = owner_check(__func__, b, owner)) < 0)
                return r;
        if (!(m = malloc(sizeof(*m))))
                return -ENOMEM;
        netbroker__net_remove__init(m);
        m->owner = nb_dup_or_empty(owner, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_NET_REMOVE, m, oom);
}

NB_EXPORT int nb_batch_net_list(nb_batch *b)
{
        Netbroker__NetList *m;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if (!(m = malloc(sizeof(*m))))
                return -ENOMEM;
        netbroker__net_list__init(m);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_NET_LIST, m, false);
}

static const Netbroker__Result *get(const nb_results *r, size_t i)
{
        if (!r || i >= r->msg->reply->n_results)
                return NULL;
        return r->msg->reply->results[i];
}

NB_EXPORT int nb_result_net(const nb_results *r, size_t i, const char **ret_hash,
                            bool *ret_unchanged, unsigned *ret_rules)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_NET_APPLY)
                return -ENODATA;
        if (ret_hash)
                *ret_hash = res->net_apply->hash;
        if (ret_unchanged)
                *ret_unchanged = res->net_apply->unchanged;
        if (ret_rules)
                *ret_rules = res->net_apply->rules;
        return 0;
}

NB_EXPORT size_t nb_result_net_owner_count(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res && res->out_case == NETBROKER__RESULT__OUT_NET_LIST ? res->net_list->n_owners
                                                                       : 0;
}

NB_EXPORT int nb_result_net_owner_at(const nb_results *r, size_t i, size_t k, nb_net_owner *ret)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__NetOwner *o;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_NET_LIST)
                return -ENODATA;
        if (k >= res->net_list->n_owners)
                return -ERANGE;
        o = res->net_list->owners[k];
        return NB_STRUCT_OUT(ret,
                             (&(nb_net_owner){.owner = o->owner,
                                              .bridge = o->bridge,
                                              .hash = o->hash,
                                              .mode = o->mode,
                                              .rules = o->rules}),
                             NB_NET_OWNER_SIZE_0);
}
