// SPDX-License-Identifier: LGPL-2.1-or-later
/* The audit trail; see audit.h. */
#include "audit.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "loop.h" /* nbd_now_us */
#include "stats.h"

NBD_LOG_CATEGORY(audit);

/* The op's name and the object it acts on; NULL for ops that change
 * nothing. A refused op's strings were never validated: the line escapes
 * them (escape()). */
static const char *describe(const Netbroker__Op *op, const Netbroker__Result *res, char *obj,
                            size_t n)
{
        const char *made = res->ifname && res->ifname[0] ? res->ifname : NULL;

        switch (op->op_case) {
        case NETBROKER__OP__OP_EXEC:
                snprintf(obj, n, "%s", op->exec->path);
                return "exec";
        case NETBROKER__OP__OP_TAP_CREATE:
                snprintf(obj, n, "%s", made ? made : op->tap_create->name);
                return "tap_create";
        case NETBROKER__OP__OP_MACVTAP_CREATE:
                snprintf(obj, n, "%s@%s", made ? made : op->macvtap_create->name,
                         op->macvtap_create->parent);
                return "macvtap_create";
        case NETBROKER__OP__OP_MACVLAN_CREATE:
                snprintf(obj, n, "%s@%s", made ? made : op->macvlan_create->name,
                         op->macvlan_create->parent);
                return "macvlan_create";
        case NETBROKER__OP__OP_VETH_CREATE:
                snprintf(obj, n, "%s,%s", made ? made : op->veth_create->name,
                         op->veth_create->peer_name);
                return "veth_create";
        case NETBROKER__OP__OP_BRIDGE_CREATE:
                snprintf(obj, n, "%s", made ? made : op->bridge_create->name);
                return "bridge_create";
        case NETBROKER__OP__OP_LINK_SET:
                snprintf(obj, n, "%s", op->link_set->name);
                return "link_set";
        case NETBROKER__OP__OP_LINK_DELETE:
                snprintf(obj, n, "%s", op->link_delete->name);
                return "link_delete";
        case NETBROKER__OP__OP_FIREWALL_APPLY:
                if (res->out_case == NETBROKER__RESULT__OUT_FIREWALL && res->firewall->unchanged)
                        return NULL;
                snprintf(obj, n, "%s@%s", op->firewall_apply->owner, op->firewall_apply->ifname);
                return "firewall_apply";
        case NETBROKER__OP__OP_FIREWALL_REMOVE:
                snprintf(obj, n, "%s", op->firewall_remove->owner);
                return "firewall_remove";
        case NETBROKER__OP__OP_BANDWIDTH_SET:
                snprintf(obj, n, "%s", op->bandwidth_set->ifname);
                return "bandwidth_set";
        case NETBROKER__OP__OP_BANDWIDTH_CLEAR:
                snprintf(obj, n, "%s", op->bandwidth_clear->ifname);
                return "bandwidth_clear";
        /* virtual networks, part 1 */
        case NETBROKER__OP__OP_ADDR_ADD:
                snprintf(obj, n, "%s/%u@%s", op->addr_add->address, op->addr_add->prefix_len,
                         op->addr_add->ifname);
                return "addr_add";
        case NETBROKER__OP__OP_ADDR_DELETE:
                snprintf(obj, n, "%s/%u@%s", op->addr_delete->address, op->addr_delete->prefix_len,
                         op->addr_delete->ifname);
                return "addr_delete";
        case NETBROKER__OP__OP_ROUTE_ADD:
                snprintf(obj, n, "%s/%u", op->route_add->destination, op->route_add->prefix_len);
                return "route_add";
        case NETBROKER__OP__OP_ROUTE_DELETE:
                snprintf(obj, n, "%s/%u", op->route_delete->destination,
                         op->route_delete->prefix_len);
                return "route_delete";
        case NETBROKER__OP__OP_SYSCTL_SET:
                snprintf(obj, n, "%s@%s=%u", op->sysctl_set->name, op->sysctl_set->ifname,
                         op->sysctl_set->value);
                return "sysctl_set";
        case NETBROKER__OP__OP_BRIDGE_OPT_SET:
                snprintf(obj, n, "%s", op->bridge_opt_set->ifname);
                return "bridge_opt_set";
        default:
                return NULL;
        }
}

/* Into out, s as one field a filter can split: every byte that is not
 * printable ASCII, and space (in object) or '"' (in the quoted error), as
 * \xNN. A refused op's strings were never validated: a name with spaces
 * would write "status=0 result=done" of its own before the real fields,
 * and bytes >= 0x80 include terminal sequences (C1 CSI) and invalid UTF-8. */
static void escape(const char *s, bool space_ok, char *out, size_t size)
{
        size_t n = 0;

        for (; *s && n + 5 < size; s++) {
                unsigned char ch = (unsigned char)*s;
                if (ch > 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
                        out[n++] = (char)ch;
                else if (ch == ' ' && space_ok)
                        out[n++] = ' ';
                else
                        n += (size_t)snprintf(out + n, size - n, "\\x%02x", ch);
        }
        out[n] = '\0';
}

void nbd_audit_op(const struct nbd_peer *peer, const Netbroker__Op *op,
                  const Netbroker__Result *res, enum nbd_audit_outcome outcome)
{
        static const char *const outcomes[] = {
                "done",    "failed",      "undone", "done-client-gone", "failed-client-gone",
                "refused", "undo-skipped"};
        char obj[128], shown[4 * sizeof(obj)], error[4 * 320] = "";
        const char *name;

        name = describe(op, res, obj, sizeof(obj));
        if (!name)
                return;
        escape(obj, false, shown, sizeof(shown));
        if (res->status)
                escape(res->message ? res->message : "", true, error, sizeof(error));
        nbd_notice("uid=%u pid=%d op=%s object=%s status=%d result=%s%s%s%s", (unsigned)peer->uid,
                   (int)peer->pid, name, shown, (int)res->status, outcomes[outcome],
                   res->status ? " error=\"" : "", error, res->status ? "\"" : "");
}

/* Refusals logged this second, per uid: one uid's flood does not silence
 * another's (nor root's, never limited). Uids past the table's size share
 * its last slot. */
#define REFUSING_UIDS 16

void nbd_audit_refused(const struct nbd_peer *peer, const Netbroker__Op *op,
                       const Netbroker__Result *res)
{
        static struct {
                uid_t uid;
                unsigned logged;
        } uids[REFUSING_UIDS];
        static size_t n_uids;
        static uint64_t second;
        static unsigned unlogged;
        uint64_t now = nbd_now_us() / 1000000;
        char obj[128];
        size_t i;

        if (!describe(op, res, obj, sizeof(obj)))
                return;
        if (now != second) {
                if (unlogged)
                        nbd_notice("%u more refused ops were not logged (over %d a second for "
                                   "their uid)",
                                   unlogged, NBD_AUDIT_REFUSALS_PER_S);
                second = now;
                n_uids = 0;
                unlogged = 0;
        }
        if (!nbd_peer_is_root(peer)) {
                for (i = 0; i < n_uids && uids[i].uid != peer->uid; i++)
                        ;
                if (i == n_uids && n_uids < REFUSING_UIDS) {
                        uids[n_uids].uid = peer->uid;
                        uids[n_uids++].logged = 0;
                } else if (i == n_uids) {
                        i = REFUSING_UIDS - 1;
                }
                if (uids[i].logged >= NBD_AUDIT_REFUSALS_PER_S) {
                        unlogged++;
                        nbd_stat_inc(NBD_STAT_AUDIT_REFUSALS_UNLOGGED);
                        return;
                }
                uids[i].logged++;
        }
        nbd_audit_op(peer, op, res, NBD_AUDIT_REFUSED);
}
