// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners in the client library: NetApply, NetRemove, NetList and
 * their results (netbroker.h, "virtual networks"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static bool forward_ok(const nb_net_forward *f)
{
        return f->protocol && f->guest_address && f->outside_port && f->outside_port <= 65535 &&
               f->guest_port <= 65535;
}

static int forward_msg(const nb_net_forward *theirs, Netbroker__NetPortForward **ret)
{
        Netbroker__NetPortForward *m;
        nb_net_forward f;
        bool oom = false;
        int r;

        if (!theirs)
                return -EINVAL;
        if ((r = NB_STRUCT_IN(&f, theirs, NB_NET_FORWARD_SIZE_0)) < 0)
                return r;
        if (!forward_ok(&f))
                return -EINVAL;
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

static int fill(Netbroker__NetApply *a, const nb_net_spec *s)
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
                        return -EINVAL;
                a->subnets[a->n_subnets++] = nb_dup_or_empty(s->subnets[i], &oom);
                if (oom)
                        return -ENOMEM;
        }
        if (s->n_forwards && !(a->port_forwards = calloc(s->n_forwards, sizeof(void *))))
                return -ENOMEM;
        for (size_t i = 0; i < s->n_forwards; i++) {
                Netbroker__NetPortForward *m = NULL;
                r = forward_msg(s->forwards[i], &m);
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

        if (!b || !owner || !owner[0] || !theirs)
                return -EINVAL;
        if ((r = NB_STRUCT_IN(&s, theirs, NB_NET_SPEC_SIZE_0)) < 0)
                return r;
        if (!s.bridge || !s.bridge[0] || (unsigned)s.mode > NB_NET_ISOLATED ||
            (s.n_subnets && !s.subnets) || (s.n_forwards && !s.forwards) || s.n_subnets > 1024 ||
            s.n_forwards > 1024)
                return -EINVAL;
        if (!(a = malloc(sizeof(*a))))
                return -ENOMEM;
        netbroker__net_apply__init(a);
        a->owner = nb_dup_or_empty(owner, &oom);
        r = oom ? -ENOMEM : fill(a, &s);
        if (r == -EINVAL) {
                protobuf_c_message_free_unpacked(&a->base, NULL);
                return r;
        }
        return nb_batch_add_sub(b, NETBROKER__OP__OP_NET_APPLY, a, r < 0);
}

NB_EXPORT int nb_batch_net_remove(nb_batch *b, const char *owner)
{
        Netbroker__NetRemove *m;
        bool oom = false;

        if (!b || !owner || !owner[0])
                return -EINVAL;
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
                return -EINVAL;
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
