// SPDX-License-Identifier: LGPL-2.1-or-later
/* Op references: which fields, what they may point at; see opref.h. */
#include "opref.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "ops.h"

bool nbd_opref_is(const char *s)
{
        return s && strncmp(s, NBD_OPREF_PREFIX, strlen(NBD_OPREF_PREFIX)) == 0;
}

size_t nbd_opref_slots(Netbroker__Op *op, char **ret[NBD_OPREF_SLOTS])
{
        switch (op->op_case) {
        case NETBROKER__OP__OP_LINK_SET:
                ret[0] = &op->link_set->name;
                ret[1] = &op->link_set->master;
                return 2;
        case NETBROKER__OP__OP_LINK_DELETE:
                ret[0] = &op->link_delete->name;
                return 1;
        case NETBROKER__OP__OP_MACVTAP_CREATE:
                ret[0] = &op->macvtap_create->parent;
                return 1;
        case NETBROKER__OP__OP_MACVLAN_CREATE:
                ret[0] = &op->macvlan_create->parent;
                return 1;
        case NETBROKER__OP__OP_FIREWALL_APPLY:
                ret[0] = &op->firewall_apply->ifname;
                return 1;
        case NETBROKER__OP__OP_BANDWIDTH_SET:
                ret[0] = &op->bandwidth_set->ifname;
                return 1;
        case NETBROKER__OP__OP_BANDWIDTH_CLEAR:
                ret[0] = &op->bandwidth_clear->ifname;
                return 1;
        case NETBROKER__OP__OP_BANDWIDTH_SHOW:
                ret[0] = &op->bandwidth_show->ifname;
                return 1;
        case NETBROKER__OP__OP_LINK_LIST:
                ret[0] = &op->link_list->name;
                return 1;
        /* The virtual networks' ops: without their slots here, a reference
         * passed validation unchecked and the op failed with ENODEV after
         * the ops before it ran (and were undone). */
        case NETBROKER__OP__OP_ADDR_ADD:
                ret[0] = &op->addr_add->ifname;
                return 1;
        case NETBROKER__OP__OP_ADDR_DELETE:
                ret[0] = &op->addr_delete->ifname;
                return 1;
        case NETBROKER__OP__OP_ADDR_LIST:
                ret[0] = &op->addr_list->ifname;
                return 1;
        case NETBROKER__OP__OP_ROUTE_ADD:
                ret[0] = &op->route_add->ifname;
                return 1;
        case NETBROKER__OP__OP_ROUTE_DELETE:
                ret[0] = &op->route_delete->ifname;
                return 1;
        case NETBROKER__OP__OP_ROUTE_LIST:
                ret[0] = &op->route_list->ifname;
                return 1;
        case NETBROKER__OP__OP_SYSCTL_SET:
                ret[0] = &op->sysctl_set->ifname;
                return 1;
        case NETBROKER__OP__OP_BRIDGE_OPT_SET:
                ret[0] = &op->bridge_opt_set->ifname;
                return 1;
        default:
                return 0;
        }
}

/* "op:K" or "op:K:peer", K decimal without sign or leading zeros. */
static int parse(const char *s, struct nbd_opref *ret)
{
        const char *p = s + strlen(NBD_OPREF_PREFIX);
        char *end;
        unsigned long k;

        if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
                return -EINVAL;
        errno = 0;
        k = strtoul(p, &end, 10);
        if (errno || (strcmp(end, "") != 0 && strcmp(end, ":peer") != 0))
                return -EINVAL;
        *ret = (struct nbd_opref){.op = k, .peer = end[0] != '\0'};
        return 0;
}

/* The name (or template) op makes here for ref, or NULL when it makes
 * none: not a create op, or a veth peer that goes to another namespace. */
static const char *made_name(const Netbroker__Op *op, bool peer)
{
        if (peer)
                return op->op_case == NETBROKER__OP__OP_VETH_CREATE &&
                                       !op->veth_create->has_peer_netns
                               ? op->veth_create->peer_name
                               : NULL;
        switch (op->op_case) {
        case NETBROKER__OP__OP_TAP_CREATE:
                return op->tap_create->name;
        case NETBROKER__OP__OP_MACVTAP_CREATE:
                return op->macvtap_create->name;
        case NETBROKER__OP__OP_MACVLAN_CREATE:
                return op->macvlan_create->name;
        case NETBROKER__OP__OP_VETH_CREATE:
                return op->veth_create->name;
        case NETBROKER__OP__OP_BRIDGE_CREATE:
                return op->bridge_create->name;
        default:
                return NULL;
        }
}

int nbd_opref_check(Netbroker__Op *const *ops, size_t i, const bool *refused, const char *s,
                    const char **ret_stand_in, Netbroker__Result *res)
{
        struct nbd_opref ref;
        const char *name;

        if (parse(s, &ref) < 0)
                return nbd_result_set(res, -EINVAL,
                                      "'%s': not a reference (\"op:K\" or \"op:K:peer\", K the "
                                      "index of an earlier op)",
                                      s);
        if (ref.op == i)
                return nbd_result_set(res, -EINVAL,
                                      "'%s': an op cannot refer to the interface it makes itself",
                                      s);
        if (ref.op > i)
                return nbd_result_set(res, -EINVAL,
                                      "'%s': a reference goes back to an earlier op (this is op "
                                      "%zu); op %zu has not run when this one does",
                                      s, i, ref.op);
        name = made_name(ops[ref.op], ref.peer);
        if (!name)
                return nbd_result_set(res, -EINVAL,
                                      ref.peer ? "'%s': op %zu makes no veth peer in this namespace"
                                               : "'%s': op %zu makes no interface",
                                      s, ref.op);
        if (refused && refused[ref.op])
                return nbd_result_set(res, -EINVAL, "'%s': op %zu was refused and makes nothing", s,
                                      ref.op);
        *ret_stand_in = nbd_is_template(name) ? s : name;
        return 0;
}

int nbd_opref_resolve(Netbroker__Result *const *results, size_t i, const char *s,
                      const char **ret_name, Netbroker__Result *res)
{
        struct nbd_opref ref;
        const Netbroker__Result *made;
        const char *name;

        if (parse(s, &ref) < 0 || ref.op >= i)
                return nbd_result_set(res, -EINVAL, "'%s': not a reference to an earlier op", s);
        made = results[ref.op];
        if (made->status)
                return nbd_result_set(res, -EINVAL,
                                      "'%s': op %zu failed (%s) and made no interface to refer to",
                                      s, ref.op, strerror((int)made->status));
        name = ref.peer ? made->peer_ifname : made->ifname;
        if (!name || !name[0])
                return nbd_result_set(res, -EINVAL, "'%s': op %zu made no interface", s, ref.op);
        *ret_name = name;
        return 0;
}
