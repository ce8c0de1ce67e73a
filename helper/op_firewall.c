// SPDX-License-Identifier: LGPL-2.1-or-later
/* Firewall ops: protobuf in, fw_kernel.h calls out. Every rule is parsed and
 * checked in validation; all FirewallApply and FirewallRemove ops of a batch
 * form one transaction, committed at the batch's last of them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "err.h"
#include "fw_kernel.h"
#include "fw_model.h"
#include "fw_gone.h"
#include "fw_join.h"
#include "fw_net_kernel.h"
#include "lane.h"
#include "link.h"
#include "ops.h"

/* ---- protobuf to the firewall's model ---- */

struct model {
        struct nbd_fw_group *groups;
        size_t n_groups;
};

static void model_free(struct model *m)
{
        for (size_t g = 0; g < m->n_groups; g++)
                free(m->groups[g].rules);
        free(m->groups);
        m->groups = NULL;
        m->n_groups = 0;
}

static int mac_field(const char *s, bool neg, struct nbd_fw_mac *out, const char *what,
                     struct nbd_err *e)
{
        if (!s[0])
                return 0;
        if (nbd_fw_parse_mac(s, out) < 0) {
                return nbd_err_set(e, -EINVAL, "%s: bad MAC '%s' (aa:bb:cc:dd:ee:ff or MAC/MASK)",
                                   what, s);
        }
        out->neg = neg;
        return 0;
}

static int ip_field(const char *s, bool neg, struct nbd_fw_ip *out, const char *what,
                    struct nbd_err *e)
{
        if (!s[0])
                return 0;
        if (nbd_fw_parse_ip(s, out) < 0) {
                return nbd_err_set(e, -EINVAL,
                                   "%s: bad address '%s' (an IPv4 or IPv6 address, prefix, or "
                                   "range LO-HI of one family with LO <= HI)",
                                   what, s);
        }
        out->neg = neg;
        return 0;
}

static int port_field(uint32_t min, uint32_t max, uint16_t out[2], const char *what,
                      struct nbd_err *e)
{
        if (!min && !max)
                return 0;
        if (!min || min > 65535 || max > 65535) {
                return nbd_err_set(e, -EINVAL, "%s: ports are 1-65535", what);
        }
        out[0] = (uint16_t)min;
        out[1] = (uint16_t)(max ? max : min);
        return 0;
}

/* The length of the UTF-8 sequence at s (n bytes left), or 0 when it is
 * not one: overlong forms, surrogates and anything past U+10FFFF are not.
 * *ret_cp is its code point. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        size_t len = s[0] < 0x80                    ? 1
                     : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                     : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                     : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                    : 0;
        uint32_t cp = len == 1 ? s[0] : s[0] & (0x7f >> len);

        if (!len || len > n)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret_cp = cp;
        return len;
}

/* A comment comes back in FirewallList and on terminals (fw list
 * --counters): valid UTF-8 only (proto3 decoders refuse anything else in
 * a string), and no C0 or C1 control character, DEL included (C1 holds
 * CSI, U+009B, which starts a terminal escape). */
static int comment_field(const char *s, char out[NBD_FW_COMMENT_MAX + 1], struct nbd_err *e)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t n = strlen(s), len;
        uint32_t cp;

        if (n > NBD_FW_COMMENT_MAX)
                return nbd_err_set(e, -EINVAL, "comment: %zu bytes; at most %d", n,
                                   NBD_FW_COMMENT_MAX);
        for (size_t i = 0; i < n; i += len) {
                len = utf8_seq(u + i, n - i, &cp);
                if (!len)
                        return nbd_err_set(e, -EINVAL, "comment: byte %zu is not valid UTF-8", i);
                if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
                        return nbd_err_set(e, -EINVAL, "comment: byte %zu is a control character",
                                           i);
        }
        memcpy(out, s, n + 1);
        return 0;
}

/* A number that is matched when it is not 0 (0 means "any"). */
static struct nbd_fw_num num_field(uint32_t v, bool neg)
{
        return v ? (struct nbd_fw_num){true, neg, v} : (struct nbd_fw_num){0};
}

/* What no netdev hook can do: refused, with why. */
static int unsupported(const Netbroker__FwRule *p, struct nbd_err *e)
{
        if (p->ct_state)
                return nbd_err_set(e, -EOPNOTSUPP,
                                   "conntrack state cannot be matched (ct_state): the rules run "
                                   "at the interface's netdev hooks, where connection tracking "
                                   "is not available, and this kernel has no bridge-family "
                                   "conntrack");
        if (p->connlimit_above)
                return nbd_err_set(e, -EOPNOTSUPP,
                                   "connections cannot be counted (connlimit_above): the rules "
                                   "run at the interface's netdev hooks, where connection "
                                   "tracking is not available, and this kernel has no "
                                   "bridge-family conntrack");
        return 0;
}

static int addr_fields(const Netbroker__FwRule *p, struct nbd_fw_rule *r, struct nbd_err *e)
{
        int ret = 0;

        if ((ret = mac_field(p->ether_src, p->ether_src_not, &r->ether_src, "ether source", e)) ||
            (ret = mac_field(p->ether_dst, p->ether_dst_not, &r->ether_dst, "ether destination",
                             e)) ||
            (ret = mac_field(p->arp_sender_mac, p->arp_sender_mac_not, &r->arp_sha,
                             "ARP sender MAC", e)) ||
            (ret = mac_field(p->arp_target_mac, p->arp_target_mac_not, &r->arp_tha,
                             "ARP target MAC", e)) ||
            (ret = ip_field(p->arp_sender_ip, p->arp_sender_ip_not, &r->arp_spa, "ARP sender IP",
                            e)) ||
            (ret = ip_field(p->arp_target_ip, p->arp_target_ip_not, &r->arp_tpa, "ARP target IP",
                            e)) ||
            (ret = ip_field(p->ip_src, p->ip_src_not, &r->ip_src, "IP source", e)) ||
            (ret = ip_field(p->ip_dst, p->ip_dst_not, &r->ip_dst, "IP destination", e)) ||
            (ret = port_field(p->sport_min, p->sport_max, r->sport, "source port", e)) ||
            (ret = port_field(p->dport_min, p->dport_max, r->dport, "destination port", e)))
                return ret;
        r->sport_neg = p->sport_not;
        r->dport_neg = p->dport_not;
        return 0;
}

static int l4_fields(const Netbroker__FwRule *p, struct nbd_fw_rule *r, struct nbd_err *e)
{
        if (p->l4_proto > 255)
                return nbd_err_set(e, -EINVAL, "l4_proto: protocol %u is over 255", p->l4_proto);
        r->l4proto = num_field(p->l4_proto, p->l4_proto_not);
        if (p->has_dscp && p->dscp > 63)
                return nbd_err_set(e, -EINVAL, "dscp: %u is over 63", p->dscp);
        if (p->has_dscp)
                r->dscp = (struct nbd_fw_num){true, p->dscp_not, p->dscp};
        if ((p->has_icmp_type && p->icmp_type > 255) || (p->has_icmp_code && p->icmp_code > 255))
                return nbd_err_set(e, -EINVAL, "icmp_type/icmp_code: %u/%u is over 255",
                                   p->icmp_type, p->icmp_code);
        r->has_icmp_type = p->has_icmp_type;
        r->icmp_type = (uint8_t)p->icmp_type;
        r->has_icmp_code = p->has_icmp_code;
        r->icmp_code = (uint8_t)p->icmp_code;
        r->icmp_neg = p->icmp_not;
        if (p->tcp_flags_mask > 255 || p->tcp_flags > 255)
                return nbd_err_set(e, -EINVAL, "tcp_flags: mask 0x%x or flags 0x%x is over 0xff",
                                   p->tcp_flags_mask, p->tcp_flags);
        r->tcp_flags_mask = (uint8_t)p->tcp_flags_mask;
        r->tcp_flags = (uint8_t)p->tcp_flags;
        r->tcp_flags_neg = p->tcp_flags_not;
        return 0;
}

/* A negation needs something to negate: a "not" on an unset match would
 * otherwise be dropped here and the rule would match every frame (the
 * client library refuses the same in its rule_ok). */
static int negations_ok(const Netbroker__FwRule *p, struct nbd_err *e)
{
        const struct {
                bool neg, set;
                const char *what;
        } n[] = {
                {p->ether_src_not, p->ether_src[0], "ether_src_not: no ether_src to negate"},
                {p->ether_dst_not, p->ether_dst[0], "ether_dst_not: no ether_dst to negate"},
                {p->ether_type_not, p->ether_type, "ether_type_not: no ether_type to negate"},
                {p->arp_op_not, p->arp_op, "arp_op_not: no arp_op to negate"},
                {p->arp_sender_mac_not, p->arp_sender_mac[0],
                 "arp_sender_mac_not: no arp_sender_mac to negate"},
                {p->arp_sender_ip_not, p->arp_sender_ip[0],
                 "arp_sender_ip_not: no arp_sender_ip to negate"},
                {p->arp_target_ip_not, p->arp_target_ip[0],
                 "arp_target_ip_not: no arp_target_ip to negate"},
                {p->ip_src_not, p->ip_src[0], "ip_src_not: no ip_src to negate"},
                {p->ip_dst_not, p->ip_dst[0], "ip_dst_not: no ip_dst to negate"},
                {p->l4_proto_not, p->l4_proto, "l4_proto_not: no l4_proto to negate"},
                {p->sport_not, p->sport_min || p->sport_max, "sport_not: no source port to negate"},
                {p->dport_not, p->dport_min || p->dport_max,
                 "dport_not: no destination port to negate"},
                {p->vlan_id_not, p->has_vlan_id, "vlan_id_not: no vlan_id to negate"},
                {p->vlan_encap_not, p->vlan_encap, "vlan_encap_not: no vlan_encap to negate"},
                {p->arp_htype_not, p->arp_htype, "arp_htype_not: no arp_htype to negate"},
                {p->arp_ptype_not, p->arp_ptype, "arp_ptype_not: no arp_ptype to negate"},
                {p->arp_target_mac_not, p->arp_target_mac[0],
                 "arp_target_mac_not: no arp_target_mac to negate"},
                {p->arp_gratuitous_not, p->arp_gratuitous,
                 "arp_gratuitous_not: arp_gratuitous is not set"},
                {p->dscp_not, p->has_dscp, "dscp_not: no dscp to negate"},
                {p->icmp_not, p->has_icmp_type, "icmp_not: no icmp_type to negate"},
                {p->tcp_flags_not, p->tcp_flags_mask, "tcp_flags_not: tcp_flags_mask is 0"},
        };

        for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
                if (n[i].neg && !n[i].set)
                        return nbd_err_set(e, -EINVAL, "%s", n[i].what);
        return 0;
}

/* The matches of a rule (also a guard's): everything but direction,
 * verdict, priority and comment. */
static int match_fields(const Netbroker__FwRule *p, struct nbd_fw_rule *r, struct nbd_err *e)
{
        int ret;

        if ((ret = unsupported(p, e)) || (ret = negations_ok(p, e)) ||
            (ret = addr_fields(p, r, e)) || (ret = l4_fields(p, r, e)))
                return ret;
        r->ether_type = num_field(p->ether_type, p->ether_type_not);
        if (p->has_vlan_id)
                r->vlan_id = (struct nbd_fw_num){true, p->vlan_id_not, p->vlan_id};
        r->vlan_encap = num_field(p->vlan_encap, p->vlan_encap_not);
        r->arp_op = num_field(p->arp_op, p->arp_op_not);
        r->arp_htype = num_field(p->arp_htype, p->arp_htype_not);
        r->arp_ptype = num_field(p->arp_ptype, p->arp_ptype_not);
        if (p->arp_gratuitous)
                r->arp_gratuitous = (struct nbd_fw_num){true, p->arp_gratuitous_not, 1};
        return 0;
}

static int rule_from_proto(const Netbroker__FwRule *p, bool reversed, struct nbd_fw_rule *r,
                           struct nbd_err *e)
{
        int ret;

        memset(r, 0, sizeof(*r));
        if (p->direction > NETBROKER__FW_DIRECTION__FW_TO_GUEST ||
            p->verdict > NETBROKER__FW_VERDICT__FW_RETURN) {
                return nbd_err_set(e, -EINVAL, "unknown direction %d or verdict %d", p->direction,
                                   p->verdict);
        }
        if (p->priority < -1000 || p->priority > 1000)
                return nbd_err_set(e, -EINVAL, "priority: %d is outside -1000..1000", p->priority);
        r->dir = p->direction == NETBROKER__FW_DIRECTION__FW_TO_GUEST ? NBD_FW_DIR_TO
                                                                      : NBD_FW_DIR_FROM;
        r->verdict = (enum nbd_fw_verdict)p->verdict;
        r->priority = (int16_t)p->priority;
        if ((ret = comment_field(p->comment, r->comment, e)) || (ret = match_fields(p, r, e)))
                return ret;
        return nbd_fw_rule_check(r, reversed, e);
}

/* A group's guard: its matches only (an accepting rule, so that the checks
 * for verdicts and directions have nothing to say). */
static int guard_from_proto(const Netbroker__FwRule *p, bool reversed, struct nbd_fw_rule *r,
                            struct nbd_err *e)
{
        int ret;

        memset(r, 0, sizeof(*r));
        r->dir = NBD_FW_DIR_FROM;
        r->verdict = NBD_FW_V_ACCEPT;
        ret = match_fields(p, r, e);
        return ret ? ret : nbd_fw_rule_check(r, reversed, e);
}

static int group_from_proto(const Netbroker__FwGroup *pg, bool reversed, struct nbd_fw_group *mg,
                            struct nbd_err *e)
{
        struct nbd_err why;
        int r;

        if (pg->priority < -1000 || pg->priority > 1000)
                return nbd_err_set(e, -EINVAL, "group %s: priority %d is outside -1000..1000",
                                   pg->name, pg->priority);
        mg->priority = (int16_t)pg->priority;
        mg->root = pg->root;
        if (pg->guard && pg->root)
                return nbd_err_set(e, -EINVAL,
                                   "group %s: a root group has no jump, so it cannot have a guard",
                                   pg->name);
        if (pg->guard) {
                r = guard_from_proto(pg->guard, reversed, &mg->guard, &why);
                if (r < 0)
                        return nbd_err_set(e, r, "group %s guard: %.200s", pg->name, why.msg);
                mg->has_guard = true;
        }
        return 0;
}

/* Parse and check every group and rule; err names the group and rule. */
static int model_from_proto(const Netbroker__FirewallApply *a, bool reversed, struct model *m,
                            struct nbd_err *e)
{
        struct nbd_err why;
        int r;

        if (a->n_groups > 64) {
                return nbd_err_set(e, -E2BIG, "%zu groups; at most 64", a->n_groups);
        }
        m->groups = calloc(a->n_groups ? a->n_groups : 1, sizeof(*m->groups));
        if (!m->groups)
                return nbd_err_oom(e, "parsing the rules");
        for (size_t g = 0; g < a->n_groups; g++) {
                const Netbroker__FwGroup *pg = a->groups[g];
                struct nbd_fw_group *mg = &m->groups[m->n_groups++];
                if (!nbd_fw_group_valid(pg->name)) {
                        return nbd_err_set(e, -EINVAL,
                                           "group %zu: bad name '%s' ([A-Za-z0-9_-], 1-%d bytes)",
                                           g, pg->name, NBD_FW_GROUP_MAX);
                }
                for (size_t k = 0; k < g; k++)
                        if (strcmp(a->groups[k]->name, pg->name) == 0) {
                                return nbd_err_set(e, -EINVAL, "group %s appears twice", pg->name);
                        }
                strcpy(mg->name, pg->name);
                if ((r = group_from_proto(pg, reversed, mg, e)) < 0)
                        return r;
                mg->rules = calloc(pg->n_rules ? pg->n_rules : 1, sizeof(*mg->rules));
                if (!mg->rules)
                        return nbd_err_oom(e, "parsing the rules");
                for (size_t i = 0; i < pg->n_rules; i++) {
                        r = rule_from_proto(pg->rules[i], reversed, &mg->rules[mg->n_rules], &why);
                        if (r < 0)
                                return nbd_err_set(e, r, "group %s rule %zu: %.200s", pg->name, i,
                                                   why.msg);
                        mg->n_rules++;
                }
        }
        return 0;
}

/* ---- validation ---- */

static int claim_owner(struct nbd_validation *v, const char *owner, Netbroker__Result *res)
{
        char key[NBD_FW_OWNER_MAX + 4];

        if (!nbd_fw_owner_valid(owner))
                return nbd_result_set(res, -EINVAL,
                                      "firewall: bad owner '%s' ([A-Za-z0-9_.:@-], 1-%d bytes)",
                                      owner, NBD_FW_OWNER_MAX);
        snprintf(key, sizeof(key), "fw:%s", owner);
        if (!nbd_validation_claim(v, key))
                return nbd_result_set(res, -EINVAL,
                                      "firewall: owner %s appears twice in this batch", owner);
        return 0;
}

/* Rules one request may carry: its commit holds the loop. */
static unsigned max_rules(const struct nbd_validation *v)
{
        return nbd_config_max_rules(v->ctx->cfg, v->peer);
}

/* The owners' creators, when a non-root caller names an owner
 * (v->cache): the table's summary, read once per batch, while the
 * generation mark holds; else each owner named, asked for by name. A
 * chain dump would walk every chain of the namespace again for each of
 * its datagrams, on the loop: 250-290 ms at 4,096 guests' chains here. */
struct creators {
        struct nbd_fw_owner_info *v;
        size_t n;
        bool by_name; /* the mark did not hold: v is unused */
        /* The caller's owners and rules as the request leaves them so far,
         * for max_fw_owners_per_uid and max_fw_rules_per_uid: summed from
         * v at the first op that needs them (held_known). */
        bool held_known;
        size_t owners, rules;
};

static void creators_free(void *data)
{
        struct creators *c = data;

        if (c)
                free(c->v);
        free(c);
}

static int creator_cmp(const void *a, const void *b)
{
        const struct nbd_fw_owner_info *x = a, *y = b;

        return strcmp(x->owner, y->owner);
}

static int add_creator(const struct nbd_fw_owner_info *o, void *data)
{
        struct creators *c = data;
        struct nbd_fw_owner_info *grown = realloc(c->v, (c->n + 1) * sizeof(*grown));

        if (!grown)
                return -ENOMEM;
        c->v = grown;
        c->v[c->n++] = *o;
        return 0;
}

/* A non-root caller may change an owner only if it does not exist yet or
 * was made for it. *ret_rules: the rules the owner holds (0 when it has
 * none, or when the mark did not hold: ret_found false then too). */
static int check_creator(struct nbd_validation *v, const char *owner, Netbroker__Result *res,
                         bool *ret_found, unsigned *ret_rules)
{
        const struct nbd_backend_fw *be = &v->ctx->be->fw;
        struct creators *c = v->cache;
        struct nbd_fw_owner_info key = {0}, named;
        const struct nbd_fw_owner_info *found;
        struct nbd_err err;
        int r;

        if (nbd_peer_is_root(v->peer))
                return 0;
        if (!c) {
                c = calloc(1, sizeof(*c));
                /* Who made them, not how many rules they hold: the rule
                 * count grows with the table, and this runs on the loop. */
                r = c ? be->list_creators_marked(v->ctx->fw, add_creator, c, &err)
                      : nbd_err_oom(&err, "reading the owners");
                if (r == -ESTALE) {
                        c->by_name = true;
                        r = 0;
                }
                if (r < 0) {
                        creators_free(c);
                        /* Not knowing who made it is no licence to change it. */
                        return nbd_result_set(res, r, "firewall: cannot read the owners: %s",
                                              err.msg);
                }
                /* Sorted once: a batch names thousands of owners. */
                if (c->n)
                        qsort(c->v, c->n, sizeof(*c->v), creator_cmp);
                v->cache = c;
                v->cache_free = creators_free;
        }
        if (c->by_name) {
                /* An owner appears once in a batch: no need to keep it. */
                r = be->read_creator(v->ctx->fw, owner, &named, &err);
                if (r < 0 && r != -ENOENT)
                        return nbd_result_set(res, r, "firewall: cannot read owner %s: %s", owner,
                                              err.msg);
                found = r == 0 ? &named : NULL;
        } else {
                snprintf(key.owner, sizeof(key.owner), "%s", owner);
                found = c->n ? bsearch(&key, c->v, c->n, sizeof(*c->v), creator_cmp) : NULL;
        }
        if (found && found->uid != v->peer->uid)
                /* Whose it is stays unsaid: FirewallList hides other
                 * callers' owners too. */
                return nbd_result_set(res, -EPERM,
                                      "policy: uid %u does not own firewall owner %s (it is "
                                      "another caller's)",
                                      (unsigned)v->peer->uid, owner);
        *ret_found = found != NULL;
        *ret_rules = found ? found->rules : 0;
        return 0;
}

/* The caller's owners and rules in the table, as the summary says; false
 * when the mark did not hold (the run counts them then, from the
 * transaction's read) or for root (no bound). */
static struct creators *held(struct nbd_validation *v)
{
        struct creators *c = v->cache;

        if (nbd_peer_is_root(v->peer) || !c || c->by_name)
                return NULL;
        if (!c->held_known) {
                for (size_t i = 0; i < c->n; i++)
                        if (c->v[i].uid == v->peer->uid) {
                                c->owners++;
                                c->rules += c->v[i].rules;
                        }
                c->held_known = true;
        }
        return c;
}

/* The owner, holding `was` rules (none: !found), is to hold `now` rules:
 * within the caller's bounds? Then they count for the request's next
 * ops. */
static int check_held(struct nbd_validation *v, const char *owner, bool found, unsigned was,
                      unsigned now, Netbroker__Result *res)
{
        const struct nbd_config *cfg = v->ctx->cfg;
        struct creators *c = held(v);
        size_t owners, rules;

        if (!c)
                return 0;
        owners = c->owners + (found ? 0 : 1);
        rules = c->rules - (found && was <= c->rules ? was : 0) + now;
        if (owners > cfg->max_fw_owners_per_uid)
                return nbd_result_set(res, -EDQUOT,
                                      "firewall %s: uid %u would have %zu firewall owners, more "
                                      "than %u (max_fw_owners_per_uid)",
                                      owner, (unsigned)v->peer->uid, owners,
                                      cfg->max_fw_owners_per_uid);
        if (rules > cfg->max_fw_rules_per_uid)
                return nbd_result_set(res, -EDQUOT,
                                      "firewall %s: uid %u would have %zu firewall rules "
                                      "installed, more than %u (max_fw_rules_per_uid)",
                                      owner, (unsigned)v->peer->uid, rules,
                                      cfg->max_fw_rules_per_uid);
        c->owners = owners;
        c->rules = rules;
        return 0;
}

/* The rules an owner's comment records for these groups (fw_model.c's
 * nbd_fw_model_hash): what the summary, and so the bound, counts. */
static unsigned claimed_rules(const struct model *m)
{
        unsigned n = 0;

        for (size_t g = 0; g < m->n_groups; g++)
                for (size_t i = 0; i < m->groups[g].n_rules; i++)
                        n += nbd_fw_rule_alts(&m->groups[g].rules[i]);
        return n;
}

static int over_max_rules(const struct nbd_validation *v, const char *owner, const char *how,
                          Netbroker__Result *res)
{
        if (v->n_rules <= max_rules(v))
                return 0;
        return nbd_result_set(res, -E2BIG, "firewall %s: the request has more than %u rules%s (%s)",
                              owner, max_rules(v), how,
                              nbd_peer_is_root(v->peer) ? "max_rules_per_request"
                                                        : "max_rules_per_request_nonroot");
}

static int validate_apply(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__FirewallApply *a = op->firewall_apply;
        struct nbd_err err;
        struct model m = {0};
        size_t written = 0;
        unsigned was = 0, now = 0;
        bool found = false;
        int r;

        if ((r = claim_owner(v, a->owner, res)))
                return r;
        /* The whole request is compiled and committed in one go on the
         * loop: its size bounds how long other clients wait. The rules as
         * written bound the parsing; they install as at least as many. */
        for (size_t g = 0; g < a->n_groups; g++)
                written += a->groups[g]->n_rules;
        v->n_rules += written;
        if ((r = over_max_rules(v, a->owner, "", res)))
                return r;
        if (a->mode > NETBROKER__FW_MODE__FW_ENSURE)
                return nbd_result_set(res, -EINVAL, "firewall %s: unknown mode %d", a->owner,
                                      a->mode);
        /* Unknown interfaces are refused here, before anything is sent. */
        if ((r = nbd_check_interface(v, a->ifname, res, "firewall")) ||
            (r = nbd_check_owned(v, a->ifname, res)) ||
            (r = check_creator(v, a->owner, res, &found, &was)))
                return r;
        /* An interface made earlier in the batch is checked again at run. */
        r = model_from_proto(a, v->ctx->be->links.is_macvtap(v->ctx->links, a->ifname), &m, &err);
        /* A non-root caller's limit counts what the kernel gets: an IPv6
         * protocol is 2 or 3 nftables rules, a group adds its jumps. (Root's
         * stays by rules as written, as max_rules_per_request documents.) */
        if (r == 0 && !nbd_peer_is_root(v->peer)) {
                v->n_rules += nbd_fw_installed_rules(m.groups, m.n_groups) - written;
                now = claimed_rules(&m);
        }
        model_free(&m);
        if (r < 0)
                return nbd_result_set(res, r, "firewall %s: %s", a->owner, err.msg);
        if ((r = over_max_rules(v, a->owner, " as installed", res)))
                return r;
        /* Checked again at run, against the transaction's read: the mark
         * may not hold now, and other requests of the uid commit
         * meanwhile. */
        return check_held(v, a->owner, found, was, now, res);
}

static int validate_remove(struct nbd_validation *v, const Netbroker__Op *op,
                           Netbroker__Result *res)
{
        const char *owner = op->firewall_remove->owner;
        struct creators *c;
        unsigned was = 0;
        bool found = false;
        int r = claim_owner(v, owner, res);

        if (r || (r = check_creator(v, owner, res, &found, &was)))
                return r;
        /* What it held no longer counts against the request's later
         * applies. */
        if (found && (c = held(v)) != NULL) {
                c->owners -= c->owners ? 1 : 0;
                c->rules -= was <= c->rules ? was : c->rules;
        }
        return 0;
}

/* ---- running: one transaction for the batch ---- */

/* An op whose changes are in the batch's transaction: its result, which
 * the commit decides, and its index in the request. */
struct fw_queued {
        Netbroker__Result *res;
        size_t op;
        char ifname[IFNAMSIZ]; /* the interface it binds ("": none) */
};

struct fw_batch {
        const struct nbd_backend_fw *be; /* the job's backend's */
        const struct nbd_dispatch_ctx *ctx;
        struct nbd_fw_txn *txn;
        /* The table read at the batch's first op, on the firewall's lane
         * (begin_read): through a handle of its own, opened and closed on
         * the lane; what the read found, for that op's run again. */
        struct nbd_fw *fw, *lf;
        bool begun;
        int begin_r;
        struct nbd_err begin_err;
        /* The owners' chains, read on the lane for an op that needs them
         * (fw_kernel.h: chains_later): what the read found. */
        int chains_r;
        struct nbd_err chains_err;
        bool chains_pending; /* the read is on the lane: the op runs again */
        bool reading; /* the table's read is on the lane: the same */
        struct fw_queued *queued; /* the ops in the transaction */
        size_t n_queued;
        bool committed;
        const struct nbd_fw_join *join; /* the networks' in its commit */
};

/* err: a negative errno, as nbd_result_set() takes it. */
static void fail_queued(struct fw_batch *b, size_t skip_last, int err, const char *why)
{
        for (size_t i = 0; i + skip_last < b->n_queued; i++)
                nbd_result_set(b->queued[i].res, err, "firewall: not applied: %s", why);
}

/* The transaction failed: the ops queued in it failed (fail_queued, all
 * but the last skip_last), and the job learns it of those that ended
 * already, so that a batch that stops on a failure stops at the first of
 * them and rolls back what its other ops did, as it would have had that
 * op failed on its own; each is counted once (the running op is counted
 * as it ends). Without this, a request whose last firewall op queued
 * nothing (an owner already gone) kept the taps it made before a refused
 * commit (found by fuzz-dispatch). */
static void queued_failed_late(struct nbd_job *job, struct fw_batch *b, size_t skip_last, int err,
                               const char *why)
{
        fail_queued(b, skip_last, err, why);
        for (size_t i = 0; i + skip_last < b->n_queued; i++)
                if (b->queued[i].op != nbd_job_op_index(job))
                        nbd_job_op_failed_late(job, b->queued[i].op);
}

/* The commit about to go on the lane decides the queued ops, and the
 * joined networks' (fw_join.h): for the audit, if the client goes away
 * meanwhile. */
static void commit_decides(struct nbd_job *job, const struct fw_batch *b)
{
        if (b->n_queued)
                nbd_job_lane_decides_from(job, b->queued[0].op);
        if (b->join && b->join->first_op != SIZE_MAX)
                nbd_job_lane_decides_from(job, b->join->first_op);
}

/* ---- networks in the same transaction (fw_join.h) ---- */

static const char join_key; /* nbd_job_slot()'s key */
static const unsigned net_cases[] = {NETBROKER__OP__OP_NET_APPLY, NETBROKER__OP__OP_NET_REMOVE};
const unsigned nbd_fw_owner_cases[NBD_FW_OWNER_CASES] = {NETBROKER__OP__OP_FIREWALL_APPLY,
                                                         NETBROKER__OP__OP_FIREWALL_REMOVE,
                                                         NETBROKER__OP__OP_FIREWALL_ENSURE_HASH};

static void fw_batch_finish(struct nbd_job *job, void *data, size_t failed);
static int gone_before_commit(struct nbd_job *job, const struct fw_batch *b, struct nbd_err *e);
static void fw_batch_free(void *data);

int nbd_fw_join(struct nbd_job *job, const struct nbd_fw_join *j, Netbroker__Result *res)
{
        void **slot = nbd_job_slot(job, &join_key);

        if (!slot)
                return nbd_result_set(res, -ENOMEM, "network: no job slot left");
        *slot = (void *)j;
        /* The job's end learns of the join, with or without a firewall op
         * (fw_batch_finish: the networks' left-overs go then). */
        nbd_job_batch_slot(job, fw_batch_finish, fw_batch_free);
        return 0;
}

/* The guests' commit waits for the networks' ops right after this, the
 * last firewall op: their last commits both (no other op between). */
static bool leaves_commit_to_networks(const struct nbd_job *job)
{
        return nbd_job_only_ops_of_ahead(job, net_cases, 2);
}

static const struct nbd_fw_join *joined(struct nbd_job *job)
{
        void **slot = nbd_job_slot(job, &join_key);

        return slot ? *slot : NULL;
}

/* The join, if any, its messages handed to b's transaction when it has
 * some: before the commit is prepared. */
static const struct nbd_fw_join *join_with(struct nbd_job *job, struct fw_batch *b)
{
        const struct nbd_fw_join *j = joined(job);

        /* Network ops still to run: theirs is one transaction of its own,
         * at the last of them. */
        if (!j || nbd_job_later_op_of(job, net_cases, 2))
                return NULL;
        if (j->pending(j->put_data))
                b->be->txn_join(b->txn, j->put, j->put_data);
        b->join = j;
        return j;
}

/* A lane's done may park the job for the running op, unless it is gone. */
static void join_done(struct nbd_job *job, const struct nbd_fw_join *j, int r, const char *why)
{
        if (j)
                j->done(job, j->data, r, why, !nbd_job_is_cancelled(job));
}

/* The batch ends and the transaction was not committed: its last firewall
 * op failed before queueing, or an op before it stopped the batch. Without
 * this, the ops queued so far would report success for rules never sent. */
static void fw_batch_finish(struct nbd_job *job, void *data, size_t failed)
{
        struct fw_batch *b = data;
        const struct nbd_fw_join *j = joined(job);
        struct nbd_err err;
        char why[NBD_ERR_MSG_MAX + 64];
        int r;

        if (!b || b->committed || b->n_queued == 0) {
                /* The networks' ops left their commit to a firewall op
                 * that never ran (skipped) or queued nothing: it goes now,
                 * alone (a stopped batch: batch_stopped fails them). */
                if (j && failed == SIZE_MAX)
                        j->alone(job, j->data, false);
                return;
        }
        if (failed != SIZE_MAX) {
                snprintf(why, sizeof(why), "op %zu failed", failed);
                fail_queued(b, 0, -ECANCELED, why);
                return;
        }
        /* The request said to go on after failures: what was queued goes
         * (end_commit sent it on the lane already when the last firewall
         * op ran; this is only for a batch that never reached it). */
        j = join_with(job, b);
        r = gone_before_commit(job, b, &err);
        if (r == 0)
                r = b->be->txn_commit(b->txn, &err);
        b->committed = r == 0;
        if (r < 0) {
                snprintf(why, sizeof(why), "the batch's transaction failed: %s", err.msg);
                queued_failed_late(job, b, 0, r, why);
        }
        if (j)
                j->done(job, j->data, r, err.msg, false);
}

/* A transaction of thousands of owners was hundreds of thousands of
 * libnftnl objects, and freeing them took 0.45 s on the loop at 4,096
 * guests (issue 14). Since session 14 it holds their encoded messages
 * (fw_msgs.h) and the table as read, and its free is short, but it still
 * goes to the firewall's lane: it holds up no one there but the next
 * firewall op, in the lane's FIFO, and the owners read from a table of
 * thousands are freed one by one. */
struct txn_drop {
        const struct nbd_backend_fw *be;
        struct nbd_fw_txn *txn;
};

static void txn_drop_run(void *data)
{
        struct txn_drop *d = data;

        d->be->txn_free(d->txn);
        d->txn = NULL;
}

/* On the loop: after the free, or instead of it (the helper stopping). */
static void txn_drop_release(void *data)
{
        struct txn_drop *d = data;

        if (d->txn)
                d->be->txn_free(d->txn);
        free(d);
}

static void fw_batch_free(void *data)
{
        struct fw_batch *b = data;
        struct txn_drop *d = b->txn && b->ctx->lane_fw ? malloc(sizeof(*d)) : NULL;

        if (d) {
                *d = (struct txn_drop){b->be, b->txn};
                nbd_dispatch_on_lane(b->ctx, NBD_NEEDS_FIREWALL, txn_drop_run, txn_drop_release, d);
        } else {
                b->be->txn_free(b->txn); /* none, or out of memory: here */
        }
        if (b->lf)
                b->be->lane_close(b->lf);
        free(b->queued);
        free(b);
}

/* On the firewall's lane (or, without one, the loop): the batch's one read
 * of the table, through the lane's handle when there is one. */
static void begin_read(void *data)
{
        struct fw_batch *b = data;

        b->begin_r = b->be->txn_begin(b->lf ? b->lf : b->fw, &b->txn, &b->begin_err);
        b->begun = true;
}

/* On the firewall's lane, after a read: its handle is closed here, not
 * when the op runs again on the loop. A job whose read is in can wait for
 * the loop a while (validation slices, the other clients' turns), and
 * under load dozens waited, each with a socket: an Exec found no fd left
 * (EMFILE, the stress-load test). The transaction keeps only the pointer,
 * the loop's handle again. */
static void lane_handle_close(struct fw_batch *b)
{
        if (b->txn)
                b->be->txn_rebind(b->txn, b->fw);
        b->be->lane_close(b->lf);
        b->lf = NULL;
}

/* On the firewall's lane: the read's handle is opened here, not on the
 * loop before the job is queued, so that a job waiting in the lane's FIFO
 * holds no socket (under load, dozens waited, each with one, and an Exec
 * found no fd left: EMFILE). */
static void begin_read_on_lane(void *data)
{
        struct fw_batch *b = data;
        int r = b->be->lane_open(b->fw, &b->lf);

        if (r < 0) {
                b->lf = NULL;
                b->begin_r =
                        nbd_err_set(&b->begin_err, r, "cannot open a socket to read the table: %s",
                                    strerror(-r));
                b->begun = true;
                return;
        }
        begin_read(b);
        lane_handle_close(b);
        nbd_test_hold_point("TABLE_READ_DONE");
}

/* The batch's transaction. At its first firewall op the table is read on
 * the firewall's lane (it grows with the table: a chain dump when the
 * summary cannot be trusted), and that op runs again when it is in: NULL
 * with res untouched and the job on the lane. NULL with res set: failed. */
static struct fw_batch *batch_of(struct nbd_job *job, Netbroker__Result *res)
{
        void **slot = nbd_job_batch_slot(job, fw_batch_finish, fw_batch_free);
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);
        struct fw_batch *b = *slot;

        /* Read and handed back already: the batch's later ops. (Read on the
         * lane but not handed back yet: the op that asked runs again, and
         * takes the read's outcome below.) */
        if (b && b->txn && !b->reading && !b->chains_pending)
                return b;
        if (!b) {
                /* Owners of interfaces gone so far go now, in fw_gone's own
                 * transaction: left to the job's end, they would take along
                 * those this batch applies to a new interface of the same
                 * name. */
                ctx->be->links.flush_gone(ctx->links);
                b = calloc(1, sizeof(*b));
                if (!b) {
                        nbd_result_set(res, -ENOMEM, "firewall: out of memory");
                        return NULL;
                }
                b->be = &ctx->be->fw;
                b->ctx = ctx;
                b->fw = ctx->fw;
                *slot = b;
                /* Without a lane, the read runs on the loop's handle. */
                b->reading = ctx->lane_fw != NULL;
                if (b->reading &&
                    nbd_job_on_lane_first(job, NBD_NEEDS_FIREWALL, begin_read_on_lane, b))
                        return NULL; /* this op runs again once the read is in */
                if (!b->begun)
                        begin_read(b);
        }
        b->reading = false;
        if (b->lf) {
                b->be->lane_close(b->lf);
                b->lf = NULL;
        }
        b->chains_pending = false;
        if (b->begin_r < 0) {
                /* The next firewall op of the batch tries again. */
                nbd_result_set(res, b->begin_r, "firewall: %s", b->begin_err.msg);
                *slot = NULL;
                fw_batch_free(b);
                return NULL;
        }
        b->be->txn_rebind(b->txn, ctx->fw);
        /* With a lane, no chain dump on the loop: the op that needs one
         * reads it there (chains_on_lane). */
        if (ctx->lane_fw && b->be->txn_chains_later)
                b->be->txn_chains_later(b->txn);
        if (b->chains_r < 0) {
                /* The op that asked fails; the next one tries again. */
                nbd_result_set(res, b->chains_r, "firewall: %s", b->chains_err.msg);
                b->chains_r = 0;
                return NULL;
        }
        return b;
}

/* On the firewall's lane (or, without one, the loop): the owners' chains,
 * through a handle of its own opened here (as begin_read_on_lane's). */
static void chains_read(void *data)
{
        struct fw_batch *b = data;
        int r = b->be->lane_open(b->fw, &b->lf);

        if (r < 0) {
                b->lf = NULL;
                b->chains_r =
                        nbd_err_set(&b->chains_err, r,
                                    "cannot open a socket to read the chains: %s", strerror(-r));
                return;
        }
        b->be->txn_rebind(b->txn, b->lf);
        b->chains_r = b->be->txn_read_chains(b->txn, &b->chains_err);
        lane_handle_close(b);
        nbd_test_hold_point("CHAINS_READ_DONE");
}

/* Did the op's step leave the transaction as it was, for want of the
 * owners' chains (fw_kernel.h: chains_later)? */
static bool wants_chains(const struct fw_batch *b, int r)
{
        return r == -EAGAIN && b->be->txn_chains_wanted && b->be->txn_chains_wanted(b->txn);
}

/* The op needs the owners' chains: one dump, which grows with the table
 * (a second at 4,096 guests), so it is read on the firewall's lane
 * through a handle of its own, as the batch's first read, and the op runs
 * again when it is in (0, res untouched). Without a lane, it is read here
 * and *again says to run the op's step now. */
static int chains_on_lane(struct nbd_job *job, struct fw_batch *b, Netbroker__Result *res,
                          bool *again)
{
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);
        struct nbd_err err;
        int r;

        *again = false;
        b->chains_pending = true;
        if (nbd_job_on_lane_first(job, NBD_NEEDS_FIREWALL, chains_read, b))
                return 0; /* batch_of() takes the read's outcome */
        b->chains_pending = false;
        if (b->lf) {
                b->be->lane_close(b->lf);
                b->lf = NULL;
        }
        b->be->txn_rebind(b->txn, ctx->fw);
        r = b->chains_r;
        err = b->chains_err;
        b->chains_r = 0;
        if (r < 0)
                return nbd_result_set(res, r, "firewall: %s", err.msg);
        *again = true;
        return 0;
}

/* Room for one more queued result, made before an op changes the
 * transaction: a change once queued cannot be taken back, and with
 * CONTINUE_ON_ERROR the transaction is committed after a failed op too. */
static int reserve_queue(struct fw_batch *b)
{
        struct fw_queued *q = realloc(b->queued, (b->n_queued + 1) * sizeof(*q));

        if (!q)
                return -ENOMEM;
        b->queued = q;
        return 0;
}

/* On the firewall's lane: the batch goes to the kernel, the acks come back. */
static void commit_send(void *data)
{
        struct fw_batch *b = data;

        b->be->txn_commit_send(b->txn);
}

/* On the loop again: the outcome, for the last op (res) and the others. */
static void commit_done(struct nbd_job *job, void *data)
{
        struct fw_batch *b = data;
        Netbroker__Result *res = b->queued[b->n_queued - 1].res;
        char why[NBD_ERR_MSG_MAX + 64];
        struct nbd_err err;
        int r = b->be->txn_commit_finish(b->txn, &err);

        if (r < 0) {
                snprintf(why, sizeof(why), "the batch's transaction failed: %s", err.msg);
                queued_failed_late(job, b, 1, r, why);
                nbd_result_set(res, r, "firewall: %s", err.msg);
        }
        join_done(job, b->join, r, err.msg);
}

/* An interface may go after its op's check and before the commit: the
 * request yields to the loop between its ops (slices, reads on the lane),
 * and fw_gone's clean-up of a gone name, queued meanwhile, found no owner
 * there yet; committed, the owner would bind the next interface of that
 * name. The loop's map, read up to now, says which went; one that goes
 * after this has its clean-up queued behind the commit on the lane (a
 * FIFO). 0, or -ENODEV with e set (and no commit). */
static int gone_before_commit(struct nbd_job *job, const struct fw_batch *b, struct nbd_err *e)
{
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);

        for (size_t i = 0; i < b->n_queued; i++) {
                const char *ifname = b->queued[i].ifname;
                if (ifname[0] && ctx->be->links.exists(ctx->links, ifname) == 0)
                        return nbd_err_set(e, -ENODEV,
                                           "interface %s went away before the commit: what "
                                           "binds its name would bind the next interface of "
                                           "that name",
                                           ifname);
        }
        /* The networks' messages joined into this commit: theirs too. */
        return b->join && b->join->check ? b->join->check(job, b->join->data, e) : 0;
}

/* Queue res (ifname: the interface the op binds, NULL for none); at the
 * batch's last firewall op, commit. A refused commit fails every firewall
 * op of the batch: nothing of it was applied. */
static int queue_and_maybe_commit(struct nbd_job *job, struct fw_batch *b, Netbroker__Result *res,
                                  const char *ifname)
{
        struct nbd_err err;
        int r;

        /* reserve_queue() made room */
        b->queued[b->n_queued] = (struct fw_queued){res, nbd_job_op_index(job), ""};
        snprintf(b->queued[b->n_queued++].ifname, IFNAMSIZ, "%s", ifname ? ifname : "");
        if (!nbd_job_is_last_batched(job) || leaves_commit_to_networks(job))
                return 0;
        b->committed = true; /* sent, well or not: finish has nothing to do */
        const struct nbd_fw_join *j = join_with(job, b);
        r = gone_before_commit(job, b, &err);
        if (r == 0)
                r = b->be->txn_commit_prepare(b->txn, &err);
        if (r < 0) {
                char why[NBD_ERR_MSG_MAX + 64];
                snprintf(why, sizeof(why), "the batch's transaction failed: %s", err.msg);
                queued_failed_late(job, b, 1, r, why);
                nbd_result_set(res, r, "firewall: %s", err.msg);
                join_done(job, j, r, err.msg);
                return r;
        }
        /* The kernel takes the whole batch inside one sendmsg(): off the
         * loop, so that other clients are served meanwhile. */
        commit_decides(job, b);
        nbd_job_on_lane(job, NBD_NEEDS_FIREWALL, commit_send, commit_done, b);
        return -(int)res->status;
}

/* On the loop again after an end commit: the outcome is the queued ops'
 * (the op that ran last has its own result already). */
static void end_commit_done(struct nbd_job *job, void *data)
{
        struct fw_batch *b = data;
        char why[NBD_ERR_MSG_MAX + 64];
        struct nbd_err err;
        int r = b->be->txn_commit_finish(b->txn, &err);

        if (r < 0) {
                snprintf(why, sizeof(why), "the batch's transaction failed: %s", err.msg);
                queued_failed_late(job, b, 0, r, why);
        }
        join_done(job, b->join, r, err.msg);
}

static void send_queued(struct nbd_job *job, struct fw_batch *b);

/* The batch's last firewall op ended (returning r) without sending the
 * transaction: it failed and the request goes on after failures, or it
 * removed an owner gone with its interface. What the ops before it queued
 * is sent now, on the firewall's lane as any commit (not on the loop at
 * the job's end). */
static int end_commit(struct nbd_job *job, int r)
{
        struct fw_batch *b = *nbd_job_batch_slot(job, fw_batch_finish, fw_batch_free);
        const struct nbd_fw_join *j = joined(job);

        if (!nbd_job_is_last_batched(job) || (r < 0 && !nbd_job_goes_on_after_failure(job)))
                return r; /* a batch that stops: fw_batch_finish fails them */
        /* The op waits for a read on the lane (the table's, or the
         * chains') and runs again; it commits then. (reading and
         * chains_pending are the loop's to read; the lane sets b->txn
         * meanwhile.) */
        if (b && (b->reading || b->chains_pending))
                return r;
        if (leaves_commit_to_networks(job))
                return r; /* the networks' last op commits */
        if (b && !b->committed && b->n_queued) {
                send_queued(job, b);
                return r;
        }
        /* The guests' transaction commits nothing: the request's
         * networks, if any, go alone. */
        if (j && !(b && b->committed) && !nbd_job_later_op_of(job, net_cases, 2))
                j->alone(job, j->data, !nbd_job_is_cancelled(job));
        return r;
}

/* The queued ops' transaction goes, from the request's last batched op,
 * which queued nothing in it itself; the networks' messages with it. */
static void send_queued(struct nbd_job *job, struct fw_batch *b)
{
        const struct nbd_fw_join *j;
        char why[NBD_ERR_MSG_MAX + 64];
        struct nbd_err err;
        int k;

        b->committed = true;
        j = join_with(job, b);
        k = gone_before_commit(job, b, &err);
        if (k == 0)
                k = b->be->txn_commit_prepare(b->txn, &err);
        if (k < 0) {
                snprintf(why, sizeof(why), "the batch's transaction failed: %s", err.msg);
                queued_failed_late(job, b, 0, k, why);
                join_done(job, j, k, err.msg);
                return;
        }
        commit_decides(job, b);
        nbd_job_on_lane(job, NBD_NEEDS_FIREWALL, commit_send, end_commit_done, b);
}

bool nbd_fw_commit_joined(struct nbd_job *job)
{
        struct fw_batch *b = *nbd_job_batch_slot(job, fw_batch_finish, fw_batch_free);

        if (!b || !b->txn || b->committed || !b->n_queued ||
            nbd_job_later_op_of(job, nbd_fw_owner_cases, NBD_FW_OWNER_CASES))
                return false;
        send_queued(job, b);
        return true;
}

/* What FirewallApply and FirewallEnsureHash share around their own step:
 * the batch's transaction, the interface's check, a note for fw_gone (when
 * the interface goes, its owners go too), and all the result needs,
 * allocated before the transaction changes. owner_op_begin: -errno (res
 * set), or 0 with o->b NULL when the op waits for the table's read on the
 * lane and runs again (return 0 from the op), or 0 and ready. */
struct owner_op {
        struct fw_batch *b;
        const char *ifname;
        Netbroker__FirewallApplyResult *out;
        char *hash;
};

static int owner_op_begin(struct nbd_job *job, const char *ifname, Netbroker__Result *res,
                          struct owner_op *ret)
{
        struct owner_op o = {.b = batch_of(job, res)};
        int r;

        if (!o.b) {
                /* Failed (res set), or the op runs again once the table is
                 * read (res->status 0: ret->b NULL says so). */
                ret->b = NULL;
                return -(int)res->status; /* the wire's is positive */
        }
        /* A chain bound to a gone name would hook the next interface of
         * that name (fw_gone.h): for root too, since libvirt filters only
         * the interface it just made. */
        if ((r = nbd_job_check_present(job, ifname, res, "firewall")))
                return r;
        nbd_fw_gone_note(nbd_job_ctx(job)->fw_gone, ifname);
        o.ifname = ifname;
        o.out = malloc(sizeof(*o.out));
        o.hash = malloc(NBD_FW_HASH_HEX);
        if (!o.out || !o.hash || reserve_queue(o.b) < 0) {
                free(o.out);
                free(o.hash);
                return nbd_result_set(res, -ENOMEM, "firewall: out of memory");
        }
        *ret = o;
        return 0;
}

/* The op's own step failed (r < 0): its result says why. */
static int owner_op_fail(struct owner_op *o, int r, const char *owner, const struct nbd_err *err,
                         Netbroker__Result *res)
{
        free(o->out);
        free(o->hash);
        return nbd_result_set(res, r, "firewall %s: %s", owner, err->msg);
}

/* The op's own step is in the transaction: its result, and the commit
 * when it is the batch's last firewall op. */
static int owner_op_end(struct nbd_job *job, struct owner_op *o, const struct nbd_fw_applied *a,
                        bool report_stale, Netbroker__Result *res)
{
        netbroker__firewall_apply_result__init(o->out);
        memcpy(o->hash, a->hash, NBD_FW_HASH_HEX);
        o->out->hash = o->hash;
        o->out->unchanged = a->unchanged;
        o->out->stale = report_stale && !a->unchanged;
        o->out->rules = a->rules;
        res->out_case = NETBROKER__RESULT__OUT_FIREWALL;
        res->firewall = o->out;
        return queue_and_maybe_commit(job, o->b, res, o->ifname);
}

static int run_apply(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__FirewallApply *a = op->firewall_apply;
        struct nbd_fw_applied applied;
        struct nbd_fw_owner_spec spec;
        struct owner_op o;
        struct nbd_err err;
        struct model m = {0};
        bool reversed;
        int r;

        if ((r = owner_op_begin(job, a->ifname, res, &o)) || !o.b)
                return r;
        reversed = nbd_job_ctx(job)->be->links.is_macvtap(nbd_job_ctx(job)->links, a->ifname);
        r = model_from_proto(a, reversed, &m, &err);
        if (r == 0) {
                spec = (struct nbd_fw_owner_spec){
                        .owner = a->owner,
                        .ifname = a->ifname,
                        .reversed = reversed,
                        .groups = m.groups,
                        .n_groups = m.n_groups,
                        .ensure = a->mode == NETBROKER__FW_MODE__FW_ENSURE,
                        .uid = nbd_job_peer(job)->uid,
                        .own_only = !nbd_peer_is_root(nbd_job_peer(job)),
                };
                if (spec.own_only) {
                        spec.max_uid_owners = nbd_job_ctx(job)->cfg->max_fw_owners_per_uid;
                        spec.max_uid_rules = nbd_job_ctx(job)->cfg->max_fw_rules_per_uid;
                }
                r = o.b->be->txn_apply(o.b->txn, &spec, &applied, &err);
        }
        model_free(&m);
        if (wants_chains(o.b, r)) {
                bool again;
                free(o.out);
                free(o.hash);
                r = chains_on_lane(job, o.b, res, &again);
                return r == 0 && again ? run_apply(job, op, res) : r;
        }
        if (r < 0)
                return owner_op_fail(&o, r, a->owner, &err, res);
        return owner_op_end(job, &o, &applied, false, res);
}

static int run_apply_op(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        return end_commit(job, run_apply(job, op, res));
}

static int run_remove(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        struct fw_batch *b = batch_of(job, res);
        const struct nbd_peer *p = nbd_job_peer(job);
        struct nbd_err err;
        int r;

        if (!b)
                return -(int)res->status; /* batch_of() set it; the wire's is positive */
        if (reserve_queue(b) < 0)
                return nbd_result_set(res, -ENOMEM, "firewall: out of memory");
        r = b->be->txn_remove(b->txn, op->firewall_remove->owner,
                              nbd_peer_is_root(p) ? NULL : &p->uid, &err);
        if (wants_chains(b, r)) {
                bool again;
                r = chains_on_lane(job, b, res, &again);
                return r == 0 && again ? run_remove(job, op, res) : r;
        }
        /* Removed with its interface already: what the caller asks is
         * done, and nothing is written. */
        if (r == -ENOENT &&
            nbd_fw_gone_removed(nbd_job_ctx(job)->fw_gone, op->firewall_remove->owner,
                                nbd_peer_is_root(p) ? NULL : &p->uid))
                return nbd_result_set(res, 0, "firewall: owner %s went with its interface",
                                      op->firewall_remove->owner);
        /* Idempotent: an owner with no rules is what the caller asks for.
         * A non-root caller gets here only for an owner that is absent or
         * its own (check_creator): one that may make it may remove it. */
        if (r == -ENOENT)
                return nbd_result_set(res, 0, "firewall: owner %s is already gone (no rules)",
                                      op->firewall_remove->owner);
        if (r < 0)
                return nbd_result_set(res, r, "firewall: %s", err.msg);
        return queue_and_maybe_commit(job, b, res, NULL);
}

static int run_remove_op(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        return end_commit(job, run_remove(job, op, res));
}

struct listing {
        Netbroker__FirewallListResult *l;
        const struct nbd_peer *peer;
};

static int add_owner(const struct nbd_fw_owner_info *o, void *data)
{
        struct listing *ls = data;
        Netbroker__FirewallListResult *l = ls->l;
        Netbroker__FwOwner *p, **grown;

        /* Others' owners are not a non-root caller's business. */
        if (!nbd_peer_is_root(ls->peer) && o->uid != ls->peer->uid)
                return 0;
        p = malloc(sizeof(*p));
        if (!p)
                return -ENOMEM;
        netbroker__fw_owner__init(p);
        grown = realloc(l->owners, (l->n_owners + 1) * sizeof(*grown));
        if (!grown) {
                free(p);
                return -ENOMEM;
        }
        l->owners = grown;
        l->owners[l->n_owners++] = p;
        p->owner = strdup(o->owner);
        p->ifname = strdup(o->ifname);
        p->hash = strdup(o->hash);
        p->rules = o->rules;
        if (!p->owner || !p->ifname || !p->hash) {
                p->owner = p->owner ? p->owner : (char *)protobuf_c_empty_string;
                p->ifname = p->ifname ? p->ifname : (char *)protobuf_c_empty_string;
                p->hash = p->hash ? p->hash : (char *)protobuf_c_empty_string;
                return -ENOMEM;
        }
        return 0;
}

/* A rule's counters go to its owner, if the listing has it: the owners the
 * caller may see, with their base chains (what add_owner was given). */
static int add_counter(const struct nbd_fw_rule_info *ri, void *data)
{
        Netbroker__FirewallListResult *l = ((struct listing *)data)->l;
        Netbroker__FwOwner *o = NULL;
        Netbroker__FwRuleCounter *c, **grown;

        for (size_t i = 0; i < l->n_owners && !o; i++)
                if (strcmp(l->owners[i]->owner, ri->owner) == 0)
                        o = l->owners[i];
        if (!o)
                return 0;
        c = malloc(sizeof(*c));
        if (!c)
                return -ENOMEM;
        netbroker__fw_rule_counter__init(c);
        grown = realloc(o->counters, (o->n_counters + 1) * sizeof(*grown));
        if (!grown) {
                free(c);
                return -ENOMEM;
        }
        o->counters = grown;
        o->counters[o->n_counters++] = c;
        c->direction = ri->dir == NBD_FW_DIR_TO ? NETBROKER__FW_DIRECTION__FW_TO_GUEST
                                                : NETBROKER__FW_DIRECTION__FW_FROM_GUEST;
        c->index = ri->index;
        c->packets = ri->packets;
        c->bytes = ri->bytes;
        c->group = ri->group[0] ? strdup(ri->group) : (char *)protobuf_c_empty_string;
        c->text = ri->text[0] ? strdup(ri->text) : (char *)protobuf_c_empty_string;
        if (!c->group || !c->text) {
                c->group = c->group ? c->group : (char *)protobuf_c_empty_string;
                c->text = c->text ? c->text : (char *)protobuf_c_empty_string;
                return -ENOMEM;
        }
        return 0;
}

/* The plain listing reads the chains and counts the rules; with counters,
 * one more dump reads every rule whole. */
/* A network owner (fw_net_kernel.h), listed after the guests' as issue 16
 * asks: the same fields, ifname its bridge, flagged. */
static int add_net_owner(const struct nbd_net_owner_info *n, void *data)
{
        struct listing *ls = data;
        struct nbd_fw_owner_info o = {.rules = n->rules, .uid = n->uid};
        size_t before = ls->l->n_owners;
        int r;

        snprintf(o.owner, sizeof(o.owner), "%s", n->owner);
        snprintf(o.ifname, sizeof(o.ifname), "%s", n->bridge);
        memcpy(o.hash, n->hash, sizeof(o.hash));
        r = add_owner(&o, ls);
        if (ls->l->n_owners > before)
                ls->l->owners[before]->network = true;
        return r;
}

/* The network owners, through the firewall lane's socket (on the lane, or
 * on the loop when there is none): their chains, no rule. */
static int list_networks(struct listing *ls, struct nbd_err *err)
{
        struct nbd_net_txn *t;
        struct mnl_socket *nl;
        int r;

        if ((r = nbd_fw_lane_socket(&nl)) < 0)
                return nbd_err_set(err, r, "cannot open nfnetlink: %s", strerror(-r));
        if ((r = nbd_net_txn_read(nl, &t, err)) < 0)
                return r;
        r = nbd_net_txn_each(t, add_net_owner, ls);
        nbd_net_txn_free(t);
        return r < 0 ? nbd_err_oom(err, "listing the network owners") : 0;
}

/* FirewallList's reads of the guests' table, off the loop: without the
 * generation mark (any commit in the namespace by another program since
 * the helper's last firewall commit takes it) they count every
 * rule, which grows with the table, and the kernel's rule dump walks the
 * table again for every message: 5 s at 1,000 owners of 60 rules, during
 * which a hostile-client review saw root's Ping wait, and a request of 200
 * FirewallLists from a uid granted nothing held the loop for minutes. On
 * the firewall's lane (issue 14), through a handle of its own opened there,
 * as the batches' reads are; without a lane, on the loop's handle. The
 * networks' owners are read there too, after the guests' (their chains:
 * a read of 256 networks' every rule held the loop 370 ms). */
struct list_work {
        const struct nbd_backend_fw *be;
        struct nbd_fw *fw; /* the loop's */
        bool lane; /* run on the firewall's lane: a handle of its own */
        /* Root's listing counts the rules when the mark does not hold;
         * another caller's says what each owner's chains claim: a count
         * is a read of every rule of every caller's owners, which grows
         * with the table, and any admitted uid may list (the lane serves
         * the clients' ops in turn, each as long as its read). */
        bool count;
        bool counters;
        bool networks; /* the network owners too: under the kernel backend only */
        Netbroker__Result *res;
        struct listing ls;
        int r;
        struct nbd_err err;
};

static void list_read(void *data)
{
        struct list_work *w = data;
        struct nbd_fw *fw = w->fw;

        if (w->lane && (w->r = w->be->lane_open(w->fw, &fw)) < 0) {
                nbd_err_set(&w->err, w->r, "cannot open a socket to read the table: %s",
                            strerror(-w->r));
                return;
        }
        w->r = (w->count ? w->be->list : w->be->list_creators)(fw, add_owner, &w->ls, &w->err);
        if (w->r == 0 && w->counters && w->ls.l->n_owners)
                w->r = w->be->list_rules(fw, w->count ? NULL : &w->ls.peer->uid, add_counter,
                                         &w->ls, &w->err);
        if (w->lane)
                w->be->lane_close(fw);
        if (w->r == 0 && w->networks)
                w->r = list_networks(&w->ls, &w->err);
        nbd_test_hold_point("LIST_READ_DONE");
}

static void list_read_done(struct nbd_job *job, void *data)
{
        struct list_work *w = data;

        (void)job;
        if (w->r < 0)
                nbd_result_set(w->res, w->r, "firewall: %s", w->err.msg);
}

static int run_list(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);
        Netbroker__FirewallListResult *l = malloc(sizeof(*l));
        struct list_work *w = calloc(1, sizeof(*w));

        if (!l || !w) {
                free(l);
                free(w);
                return nbd_result_set(res, -ENOMEM, "firewall: out of memory");
        }
        netbroker__firewall_list_result__init(l);
        res->out_case = NETBROKER__RESULT__OUT_FIREWALL_LIST;
        res->firewall_list = l;
        *w = (struct list_work){.be = &ctx->be->fw,
                                .fw = ctx->fw,
                                .lane = ctx->lane_fw != NULL,
                                .count = nbd_peer_is_root(nbd_job_peer(job)),
                                .counters = op->firewall_list->counters,
                                .networks = ctx->be == &nbd_kernel_backend,
                                .res = res,
                                .ls = {l, nbd_job_peer(job)}};
        if (nbd_job_keep(job, free, w) < 0) /* frees w */
                return nbd_result_set(res, -ENOMEM, "firewall: out of memory");
        nbd_job_on_lane_read(job, NBD_NEEDS_FIREWALL, list_read, list_read_done, w);
        return -(int)res->status;
}

/* ---- ensure by hash (issue 14) ---- */

/* As FirewallApply returns it: 32 lowercase hex digits. Anything else could
 * never equal an owner's hash, and a caller would resend every owner. */
static bool hash_valid(const char *h)
{
        size_t n = strspn(h, "0123456789abcdef");

        return n == NBD_FW_HASH_HEX - 1 && !h[n];
}

/* The checks of a FirewallApply in ensure mode, the rules aside: who may
 * ask about an owner is who may ensure it. */
static int validate_ensure_hash(struct nbd_validation *v, const Netbroker__Op *op,
                                Netbroker__Result *res)
{
        const Netbroker__FirewallEnsureHash *h = op->firewall_ensure_hash;
        unsigned rules;
        bool found;
        int r;

        if ((r = claim_owner(v, h->owner, res)))
                return r;
        if (!hash_valid(h->hash))
                return nbd_result_set(res, -EINVAL,
                                      "firewall %s: bad hash '%.40s' (32 lowercase hex digits, "
                                      "as FirewallApply returned it)",
                                      h->owner, h->hash);
        if ((r = nbd_check_interface(v, h->ifname, res, "firewall")) ||
            (r = nbd_check_owned(v, h->ifname, res)))
                return r;
        /* It changes nothing: the bounds are not concerned. */
        return check_creator(v, h->owner, res, &found, &rules);
}

/* Writes nothing of its own, but takes part in the batch's transaction:
 * its read is the one the batch's other firewall ops share, and a repair
 * of the shared set it queues goes with their commit. */
static int run_ensure_hash(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__FirewallEnsureHash *h = op->firewall_ensure_hash;
        const struct nbd_peer *p = nbd_job_peer(job);
        struct nbd_fw_applied a;
        struct owner_op o;
        struct nbd_err err;
        int r;

        if ((r = owner_op_begin(job, h->ifname, res, &o)) || !o.b)
                return r;
        r = o.b->be->txn_check_hash(o.b->txn, h->owner, h->ifname, h->hash,
                                    nbd_peer_is_root(p) ? NULL : &p->uid, &a, &err);
        if (wants_chains(o.b, r)) {
                /* The rules are counted on the lane (fw_kernel.h), and the
                 * op runs again. */
                bool again;
                free(o.out);
                free(o.hash);
                r = chains_on_lane(job, o.b, res, &again);
                return r == 0 && again ? run_ensure_hash(job, op, res) : r;
        }
        if (r < 0)
                return owner_op_fail(&o, r, h->owner, &err, res);
        return owner_op_end(job, &o, &a, true, res);
}

static int run_ensure_hash_op(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        return end_commit(job, run_ensure_hash(job, op, res));
}

const struct nbd_op_handler nbd_op_firewall_apply = {
        .name = "firewall_apply",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_FIREWALL,
        .stat = NBD_STAT_OPS_FIREWALL,
        .validate = validate_apply,
        .run = run_apply_op,
        .batched = true,
};
const struct nbd_op_handler nbd_op_firewall_remove = {
        .name = "firewall_remove",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_FIREWALL,
        .stat = NBD_STAT_OPS_FIREWALL,
        .validate = validate_remove,
        .run = run_remove_op,
        .batched = true,
};
const struct nbd_op_handler nbd_op_firewall_list = {
        .name = "firewall_list",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_FIREWALL,
        .stat = NBD_STAT_OPS_FIREWALL,
        .run = run_list,
};
const struct nbd_op_handler nbd_op_firewall_ensure_hash = {
        .name = "firewall_ensure_hash",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_FIREWALL,
        .stat = NBD_STAT_OPS_FIREWALL,
        .validate = validate_ensure_hash,
        .run = run_ensure_hash_op,
        .batched = true,
};
