// SPDX-License-Identifier: LGPL-2.1-or-later
/* Firewall rulesets and the firewall ops (libvirt's stock filters are
 * fw_filters.c's).
 *
 * A ruleset is kept as the wire messages themselves (FwGroup with FwRule),
 * so adding it to a batch is a copy, not a translation. Checks here are the
 * quick ones that need no knowledge of the kernel (names, enum ranges); the
 * helper validates every rule fully before anything of a batch reaches the
 * kernel. */
#include <ctype.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ruleset.h"
#include "internal.h"

#define NO_GROUP SIZE_MAX

struct nb_fw_ruleset {
        Netbroker__FwGroup **groups;
        size_t n_groups;
        size_t cap;
        /* The group nb_fw_rule_add() adds to (nb_fw_group_ex selects one);
         * NO_GROUP: none chosen yet, the next rule starts group "rules". */
        size_t cur;
};

NB_EXPORT nb_fw_ruleset *nb_fw_ruleset_new(void)
{
        nb_fw_ruleset *rs = calloc(1, sizeof(nb_fw_ruleset));

        if (rs)
                rs->cur = NO_GROUP;
        return rs;
}

/* Drop the groups from index `keep` on: a builder that fails half-way
 * leaves the ruleset as it found it. */
static void truncate_groups(nb_fw_ruleset *rs, size_t keep)
{
        while (rs->n_groups > keep)
                protobuf_c_message_free_unpacked(&rs->groups[--rs->n_groups]->base, NULL);
        if (rs->cur != NO_GROUP && rs->cur >= rs->n_groups)
                rs->cur = rs->n_groups ? rs->n_groups - 1 : NO_GROUP;
}

NB_EXPORT void nb_fw_ruleset_free(nb_fw_ruleset *rs)
{
        if (!rs)
                return;
        truncate_groups(rs, 0);
        free(rs->groups);
        free(rs);
}

/* The ruleset and group name arguments of who. */
static int group_check(const char *who, const nb_fw_ruleset *rs, const char *name)
{
        size_t n = 0;

        if (!rs)
                return nb_bad_arg(EINVAL, who, "rs is NULL");
        if (!name)
                return nb_bad_arg(EINVAL, who, "name is NULL");
        for (; name[n]; n++)
                if (!isalnum((unsigned char)name[n]) && name[n] != '_' && name[n] != '-')
                        break;
        if (name[n] || n < 1 || n > 32)
                return nb_bad_arg(EINVAL, who,
                                  "name %s (%zu bytes) is not 1 to 32 letters, digits, _ or -",
                                  NB_Q(name), strlen(name));
        return 0;
}

static Netbroker__FwRule *rule_to_proto(const nb_fw_rule *r);
static int rule_check(const char *who, const char *arg, const nb_fw_rule *r);

static ssize_t group_find(const nb_fw_ruleset *rs, const char *name)
{
        for (size_t i = 0; i < rs->n_groups; i++)
                if (strcmp(rs->groups[i]->name, name) == 0)
                        return (ssize_t)i;
        return -1;
}

/* Start group `name` with the given options (guard already converted, and
 * owned by the group from here on, also on failure). */
static int group_start(nb_fw_ruleset *rs, const char *name, int32_t priority, bool root,
                       Netbroker__FwRule *guard)
{
        Netbroker__FwGroup *g;

        if (rs->n_groups == rs->cap) {
                size_t ncap = rs->cap ? rs->cap * 2 : 4;
                Netbroker__FwGroup **p = realloc(rs->groups, ncap * sizeof(*p));
                if (!p)
                        goto oom; /* the guard is ours to free here too */
                rs->groups = p;
                rs->cap = ncap;
        }
        g = malloc(sizeof(*g));
        if (!g)
                goto oom;
        netbroker__fw_group__init(g);
        g->name = strdup(name);
        if (!g->name) {
                free(g);
                goto oom;
        }
        g->priority = priority;
        g->root = root;
        g->guard = guard;
        rs->cur = rs->n_groups;
        rs->groups[rs->n_groups++] = g;
        return 0;
oom:
        if (guard)
                protobuf_c_message_free_unpacked(&guard->base, NULL);
        return -ENOMEM;
}

NB_EXPORT int nb_fw_group(nb_fw_ruleset *rs, const char *name)
{
        int r = group_check(__func__, rs, name);

        if (r < 0)
                return r;
        if (group_find(rs, name) >= 0)
                return -EEXIST;
        return group_start(rs, name, 0, false, NULL);
}

/* Two rules (or guards) are the same when their wire forms are: 1 when
 * they are, 0 when not, -ENOMEM. A rule packs to a few hundred bytes, so
 * the stack takes it unless its strings are long. */
static int same_wire(const Netbroker__FwRule *a, const Netbroker__FwRule *b)
{
        uint8_t sa[1024], sb[1024], *pa = sa, *pb = sb;
        size_t la, lb;
        int same;

        if (!a || !b)
                return !a && !b;
        la = netbroker__fw_rule__get_packed_size(a);
        lb = netbroker__fw_rule__get_packed_size(b);
        if (la != lb)
                return 0;
        if (la > sizeof(sa)) {
                pa = malloc(la);
                pb = malloc(lb);
        }
        same = pa && pb ? 0 : -ENOMEM;
        if (same == 0) {
                netbroker__fw_rule__pack(a, pa);
                netbroker__fw_rule__pack(b, pb);
                same = memcmp(pa, pb, la) == 0;
        }
        if (pa != sa) {
                free(pa);
                free(pb);
        }
        return same;
}

NB_EXPORT int nb_fw_group_ex(nb_fw_ruleset *rs, const char *name, const nb_fw_group_opts *opts)
{
        Netbroker__FwRule *guard = NULL;
        nb_fw_group_opts mine;
        const nb_fw_group_opts *o = &mine;
        nb_fw_rule guard_rule;
        ssize_t at;
        int same, r;

        if ((r = group_check(__func__, rs, name)) < 0)
                return r;
        if (!opts)
                return nb_bad_arg(EINVAL, __func__, "opts is NULL");
        r = NB_ARG_IN(__func__, "opts", &mine, opts, NB_FW_GROUP_OPTS);
        if (r == 0 && mine.guard) {
                r = NB_ARG_IN(__func__, "opts->guard", &guard_rule, mine.guard, NB_FW_RULE);
                mine.guard = &guard_rule;
        }
        if (r < 0)
                return r;
        if (o->priority < -1000 || o->priority > 1000)
                return nb_bad_arg(EINVAL, __func__, "opts->priority %d is outside -1000..1000",
                                  o->priority);
        if (o->guard && (r = rule_check(__func__, "opts->guard", o->guard)) < 0)
                return r;
        if (o->guard) {
                guard = rule_to_proto(o->guard);
                if (!guard)
                        return -ENOMEM;
                /* Only the matches guard a jump. */
                guard->direction = 0;
                guard->verdict = 0;
                guard->priority = 0;
                if (guard->comment != protobuf_c_empty_string)
                        free(guard->comment);
                guard->comment = (char *)protobuf_c_empty_string;
        }
        at = group_find(rs, name);
        if (at < 0)
                return group_start(rs, name, o->priority, o->root, guard);
        same = same_wire(rs->groups[at]->guard, guard);
        if (guard)
                protobuf_c_message_free_unpacked(&guard->base, NULL);
        if (same < 0)
                return same; /* not -EEXIST: out of memory while comparing */
        if (rs->groups[at]->priority != o->priority || rs->groups[at]->root != o->root || !same)
                return -EEXIST;
        rs->cur = (size_t)at;
        return 0;
}

/* A negation needs something to negate: a "not" on an unset match would
 * otherwise mean nothing, or everything, depending on who reads it. */
static bool str_set(const char *s)
{
        return s && s[0];
}

/* Rule argument arg of who (already the library's own nb_fw_rule). */
static int rule_check(const char *who, const char *arg, const nb_fw_rule *r)
{
        /* Each negation and the match it needs. */
        const struct {
                const char *neg, *match;
                bool negated, set;
        } nots[] = {
                {"ether_src_not", "ether_src", r->ether_src_not, str_set(r->ether_src)},
                {"ether_dst_not", "ether_dst", r->ether_dst_not, str_set(r->ether_dst)},
                {"ether_type_not", "ether_type", r->ether_type_not, r->ether_type},
                {"arp_op_not", "arp_op", r->arp_op_not, r->arp_op},
                {"arp_sender_mac_not", "arp_sender_mac", r->arp_sender_mac_not,
                 str_set(r->arp_sender_mac)},
                {"arp_sender_ip_not", "arp_sender_ip", r->arp_sender_ip_not,
                 str_set(r->arp_sender_ip)},
                {"arp_target_ip_not", "arp_target_ip", r->arp_target_ip_not,
                 str_set(r->arp_target_ip)},
                {"ip_src_not", "ip_src", r->ip_src_not, str_set(r->ip_src)},
                {"ip_dst_not", "ip_dst", r->ip_dst_not, str_set(r->ip_dst)},
                {"l4_proto_not", "l4_proto", r->l4_proto_not, r->l4_proto},
                {"sport_not", "sport_min", r->sport_not, r->sport_min},
                {"dport_not", "dport_min", r->dport_not, r->dport_min},
                {"vlan_id_not", "has_vlan_id", r->vlan_id_not, r->has_vlan_id},
                {"vlan_encap_not", "vlan_encap", r->vlan_encap_not, r->vlan_encap},
                {"arp_htype_not", "arp_htype", r->arp_htype_not, r->arp_htype},
                {"arp_ptype_not", "arp_ptype", r->arp_ptype_not, r->arp_ptype},
                {"arp_target_mac_not", "arp_target_mac", r->arp_target_mac_not,
                 str_set(r->arp_target_mac)},
                {"arp_gratuitous_not", "arp_gratuitous", r->arp_gratuitous_not, r->arp_gratuitous},
                {"dscp_not", "has_dscp", r->dscp_not, r->has_dscp},
                {"icmp_not", "has_icmp_type", r->icmp_not, r->has_icmp_type},
                {"tcp_flags_not", "tcp_flags_mask", r->tcp_flags_not, r->tcp_flags_mask},
        };

        if (r->direction != NB_FW_FROM_GUEST && r->direction != NB_FW_TO_GUEST)
                return nb_bad_arg(EINVAL, who,
                                  "%s->direction %d is not NB_FW_FROM_GUEST or NB_FW_TO_GUEST", arg,
                                  (int)r->direction);
        if (r->verdict < NB_FW_ACCEPT || r->verdict > NB_FW_RETURN)
                return nb_bad_arg(EINVAL, who, "%s->verdict %d is not one of NB_FW_ACCEPT..RETURN",
                                  arg, (int)r->verdict);
        for (size_t i = 0; i < sizeof(nots) / sizeof(*nots); i++)
                if (nots[i].negated && !nots[i].set)
                        return nb_bad_arg(EINVAL, who,
                                          "%s->%s is set and %s is not: nothing to negate", arg,
                                          nots[i].neg, nots[i].match);
        if (r->priority < -1000 || r->priority > 1000)
                return nb_bad_arg(EINVAL, who, "%s->priority %d is outside -1000..1000", arg,
                                  (int)r->priority);
        if (r->comment && strlen(r->comment) > 256)
                return nb_bad_arg(EINVAL, who, "%s->comment is %zu bytes; at most 256", arg,
                                  strlen(r->comment));
        return 0;
}

static Netbroker__FwRule *rule_to_proto(const nb_fw_rule *r)
{
        Netbroker__FwRule *p = malloc(sizeof(*p));
        bool oom = false;

        if (!p)
                return NULL;
        netbroker__fw_rule__init(p);
        p->direction = (Netbroker__FwDirection)r->direction;
        p->verdict = (Netbroker__FwVerdict)r->verdict;
        p->ether_src = nb_dup_or_empty(r->ether_src, &oom);
        p->ether_src_not = r->ether_src_not;
        p->ether_dst = nb_dup_or_empty(r->ether_dst, &oom);
        p->ether_dst_not = r->ether_dst_not;
        p->ether_type = r->ether_type;
        p->ether_type_not = r->ether_type_not;
        p->has_vlan_id = r->has_vlan_id;
        p->vlan_id = r->vlan_id;
        p->arp_op = r->arp_op;
        p->arp_op_not = r->arp_op_not;
        p->arp_sender_mac = nb_dup_or_empty(r->arp_sender_mac, &oom);
        p->arp_sender_mac_not = r->arp_sender_mac_not;
        p->arp_sender_ip = nb_dup_or_empty(r->arp_sender_ip, &oom);
        p->arp_sender_ip_not = r->arp_sender_ip_not;
        p->arp_target_ip = nb_dup_or_empty(r->arp_target_ip, &oom);
        p->arp_target_ip_not = r->arp_target_ip_not;
        p->ip_src = nb_dup_or_empty(r->ip_src, &oom);
        p->ip_src_not = r->ip_src_not;
        p->ip_dst = nb_dup_or_empty(r->ip_dst, &oom);
        p->ip_dst_not = r->ip_dst_not;
        p->l4_proto = r->l4_proto;
        p->sport_min = r->sport_min;
        p->sport_max = r->sport_max;
        p->dport_min = r->dport_min;
        p->dport_max = r->dport_max;
        p->has_icmp_type = r->has_icmp_type;
        p->icmp_type = r->icmp_type;
        p->priority = r->priority;
        p->l4_proto_not = r->l4_proto_not;
        p->sport_not = r->sport_not;
        p->dport_not = r->dport_not;
        p->vlan_id_not = r->vlan_id_not;
        p->vlan_encap = r->vlan_encap;
        p->vlan_encap_not = r->vlan_encap_not;
        p->arp_htype = r->arp_htype;
        p->arp_htype_not = r->arp_htype_not;
        p->arp_ptype = r->arp_ptype;
        p->arp_ptype_not = r->arp_ptype_not;
        p->arp_target_mac = nb_dup_or_empty(r->arp_target_mac, &oom);
        p->arp_target_mac_not = r->arp_target_mac_not;
        p->arp_gratuitous = r->arp_gratuitous;
        p->arp_gratuitous_not = r->arp_gratuitous_not;
        p->has_dscp = r->has_dscp;
        p->dscp = r->dscp;
        p->dscp_not = r->dscp_not;
        p->has_icmp_code = r->has_icmp_code;
        p->icmp_code = r->icmp_code;
        p->icmp_not = r->icmp_not;
        p->tcp_flags_mask = r->tcp_flags_mask;
        p->tcp_flags = r->tcp_flags;
        p->tcp_flags_not = r->tcp_flags_not;
        p->comment = nb_dup_or_empty(r->comment, &oom);
        /* ct_state stays 0: the netdev hooks have no conntrack. */
        if (oom) {
                protobuf_c_message_free_unpacked(&p->base, NULL);
                return NULL;
        }
        return p;
}

/* A rules array is full exactly when n_rules is 0 or a power of two (it
 * doubles then), so a group needs no capacity field beside n_rules. */
static int append_rule(Netbroker__FwGroup *g, Netbroker__FwRule *p)
{
        size_t n = g->n_rules;

        if ((n & (n - 1)) == 0) {
                Netbroker__FwRule **a = realloc(g->rules, (n ? n * 2 : 1) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                g->rules = a;
        }
        g->rules[g->n_rules++] = p;
        return 0;
}

int nb_fw_rule_add_once(nb_fw_ruleset *rs, const nb_fw_rule *rule)
{
        Netbroker__FwGroup *g;
        Netbroker__FwRule *p;

        /* The stock filters' own rules: a refusal is a bug of the table. */
        if (!rs || !rule || rule_check(__func__, "rule", rule) < 0 || rs->cur == NO_GROUP)
                return -EINVAL;
        g = rs->groups[rs->cur];
        p = rule_to_proto(rule);
        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < g->n_rules; i++) {
                int same = same_wire(g->rules[i], p);
                if (same != 0) {
                        protobuf_c_message_free_unpacked(&p->base, NULL);
                        return same < 0 ? same : 0;
                }
        }
        if (append_rule(g, p) < 0) {
                protobuf_c_message_free_unpacked(&p->base, NULL);
                return -ENOMEM;
        }
        return 0;
}

int nb_fw_mark_take(const nb_fw_ruleset *rs, struct nb_fw_mark *ret)
{
        size_t *n = malloc((rs->n_groups ? rs->n_groups : 1) * sizeof(*n));

        if (!n)
                return -ENOMEM;
        for (size_t i = 0; i < rs->n_groups; i++)
                n[i] = rs->groups[i]->n_rules;
        *ret = (struct nb_fw_mark){.n_groups = rs->n_groups, .cur = rs->cur, .n_rules = n};
        return 0;
}

void nb_fw_mark_rollback(nb_fw_ruleset *rs, const struct nb_fw_mark *m)
{
        truncate_groups(rs, m->n_groups);
        for (size_t i = 0; i < m->n_groups; i++) {
                Netbroker__FwGroup *g = rs->groups[i];
                while (g->n_rules > m->n_rules[i])
                        protobuf_c_message_free_unpacked(&g->rules[--g->n_rules]->base, NULL);
        }
        rs->cur = m->cur;
}

void nb_fw_mark_restore_group(nb_fw_ruleset *rs, const struct nb_fw_mark *m)
{
        rs->cur = m->cur;
}

void nb_fw_mark_release(struct nb_fw_mark *m)
{
        free(m->n_rules);
        m->n_rules = NULL;
}

NB_EXPORT int nb_fw_rule_add(nb_fw_ruleset *rs, const nb_fw_rule *theirs)
{
        const nb_fw_rule *rule = NULL;
        nb_fw_rule mine;
        Netbroker__FwRule *p;
        bool started = false;
        int r;

        if (!rs)
                return nb_bad_arg(EINVAL, __func__, "rs is NULL");
        if ((r = NB_ARG_IN(__func__, "rule", &mine, theirs, NB_FW_RULE)) < 0)
                return r;
        rule = &mine;
        if ((r = rule_check(__func__, "rule", rule)) < 0)
                return r;
        if (rs->cur == NO_GROUP) {
                r = nb_fw_group(rs, "rules");
                if (r < 0)
                        return r;
                started = true;
        }
        p = rule_to_proto(rule);
        if (!p || append_rule(rs->groups[rs->cur], p) < 0) {
                if (p)
                        protobuf_c_message_free_unpacked(&p->base, NULL);
                if (started)
                        truncate_groups(rs, 0);
                return -ENOMEM;
        }
        return 0;
}

/* libvirt's stock filters and the nb_fw_add_* builders are fw_filters.c's. */

/* ---- ops ---- */

/* The batch and owner arguments of who. */
static int owner_check(const char *who, const nb_batch *b, const char *owner)
{
        size_t n = 0;

        if (!b)
                return nb_bad_arg(EINVAL, who, "batch is NULL");
        if (!owner)
                return nb_bad_arg(EINVAL, who, "owner is NULL");
        if (!owner[0])
                return nb_bad_arg(EINVAL, who, "owner is empty");
        for (; owner[n]; n++)
                if (!isalnum((unsigned char)owner[n]) && !strchr("_.:@-", owner[n]))
                        return nb_bad_arg(EINVAL, who,
                                          "owner %s: byte %zu is not a letter, a digit or one "
                                          "of _.:@-",
                                          NB_Q(owner), n);
        if (n > 64)
                return nb_bad_arg(EINVAL, who, "owner %s is %zu bytes; at most 64", NB_Q(owner), n);
        return 0;
}

/* A pack/unpack round trip is a deep copy that stays right when fields are
 * added to FwRule; unpacking with the default allocator gives what
 * protobuf_c_message_free_unpacked() frees with the batch. */
static Netbroker__FwGroup *copy_group(const Netbroker__FwGroup *g)
{
        size_t len = netbroker__fw_group__get_packed_size(g);
        uint8_t *buf = malloc(len ? len : 1);
        Netbroker__FwGroup *copy;

        if (!buf)
                return NULL;
        netbroker__fw_group__pack(g, buf);
        copy = netbroker__fw_group__unpack(NULL, len, buf);
        free(buf);
        return copy;
}

NB_EXPORT int nb_batch_firewall_apply(nb_batch *b, const char *owner, const char *ifname,
                                      const nb_fw_ruleset *rs, nb_fw_mode mode)
{
        Netbroker__FirewallApply *a;
        bool oom = false;
        int r;

        if ((r = owner_check(__func__, b, owner)) < 0 ||
            (r = nb_check_ifname(__func__, "ifname", ifname, NB_IFNAME_PLAIN)) < 0)
                return r;
        if (!rs)
                return nb_bad_arg(EINVAL, __func__, "rs is NULL");
        if (mode != NB_FW_REPLACE && mode != NB_FW_ENSURE)
                return nb_bad_arg(EINVAL, __func__, "mode %d is not NB_FW_REPLACE or NB_FW_ENSURE",
                                  (int)mode);
        a = malloc(sizeof(*a));
        if (!a)
                return -ENOMEM;
        netbroker__firewall_apply__init(a);
        a->owner = nb_dup_or_empty(owner, &oom);
        a->ifname = nb_dup_or_empty(ifname, &oom);
        a->mode = (Netbroker__FwMode)mode;
        if (rs->n_groups) {
                a->groups = calloc(rs->n_groups, sizeof(*a->groups));
                if (!a->groups)
                        oom = true;
                /* n_groups grows with each copy made, so a failure frees
                 * exactly the copies there are. */
                for (size_t i = 0; !oom && i < rs->n_groups; i++) {
                        a->groups[i] = copy_group(rs->groups[i]);
                        if (!a->groups[i])
                                oom = true;
                        else
                                a->n_groups++;
                }
        }
        return nb_batch_add_sub(b, NETBROKER__OP__OP_FIREWALL_APPLY, a, oom);
}

/* Ensure by hash (issue 14): the hash as FirewallApply returns it. */
static int hash_check(const char *who, const char *hash)
{
        size_t n = hash ? strspn(hash, "0123456789abcdef") : 0;

        if (!hash)
                return nb_bad_arg(EINVAL, who, "hash is NULL");
        if (n != 32 || hash[n])
                return nb_bad_arg(EINVAL, who, "hash %s is not 32 lowercase hex digits",
                                  NB_Q(hash));
        return 0;
}

NB_EXPORT int nb_batch_firewall_ensure_hash(nb_batch *b, const char *owner, const char *ifname,
                                            const char *hash)
{
        Netbroker__FirewallEnsureHash *h;
        bool oom = false;
        int r;

        if ((r = owner_check(__func__, b, owner)) < 0 ||
            (r = nb_check_ifname(__func__, "ifname", ifname, NB_IFNAME_PLAIN)) < 0 ||
            (r = hash_check(__func__, hash)) < 0)
                return r;
        h = malloc(sizeof(*h));
        if (!h)
                return -ENOMEM;
        netbroker__firewall_ensure_hash__init(h);
        h->owner = nb_dup_or_empty(owner, &oom);
        h->ifname = nb_dup_or_empty(ifname, &oom);
        h->hash = nb_dup_or_empty(hash, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_FIREWALL_ENSURE_HASH, h, oom);
}

NB_EXPORT int nb_batch_firewall_remove(nb_batch *b, const char *owner)
{
        Netbroker__FirewallRemove *rm;
        bool oom = false;
        int r;

        if ((r = owner_check(__func__, b, owner)) < 0)
                return r;
        rm = malloc(sizeof(*rm));
        if (!rm)
                return -ENOMEM;
        netbroker__firewall_remove__init(rm);
        rm->owner = nb_dup_or_empty(owner, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_FIREWALL_REMOVE, rm, oom);
}

static int add_list(const char *who, nb_batch *b, bool counters)
{
        Netbroker__FirewallList *l;

        if (!b)
                return nb_bad_arg(EINVAL, who, "batch is NULL");
        l = malloc(sizeof(*l));
        if (!l)
                return -ENOMEM;
        netbroker__firewall_list__init(l);
        l->counters = counters;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_FIREWALL_LIST, l, false);
}

NB_EXPORT int nb_batch_firewall_list(nb_batch *b)
{
        return add_list(__func__, b, false);
}

NB_EXPORT int nb_batch_firewall_list_counters(nb_batch *b)
{
        return add_list(__func__, b, true);
}
