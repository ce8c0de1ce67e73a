// SPDX-License-Identifier: LGPL-2.1-or-later
/* libvirt's stock filters through nb_fw_add_filter(), without a helper.
 *
 * Each filter's ruleset is rendered as libvirt's ebtables driver lays it
 * out, per direction ("from" is libvirt's I- chains, what the guest sends;
 * "to" its O- chains): the base chain first, with the jumps to the chains
 * ("-> NAME PRIORITY GUARD") and the root rules ("PRIORITY VERDICT
 * MATCHES") ordered by priority together, a jump before a root rule of the
 * same priority; then each chain's rules by priority. Equal priorities keep
 * their order, and a chain with no rule in a direction has no jump there,
 * as in libvirt. The expectations were written from libvirt's XML and its
 * driver's rules (bench/restart_cmds.txt has the commands libvirt ran for
 * clean-traffic: the same order). */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ruleset.h"
#include "internal.h"
#include "tests_unit.h"

#define MAC "52:54:00:12:34:56"
#define GW "52:54:00:00:00:01"
#define RARP_OUT                                                                                   \
        "500 accept ether-src " MAC " ether-dst ff:ff:ff:ff:ff:ff ether-type 0x8035 arp-op 3 "     \
        "arp-sender-mac " MAC " arp-target-mac " MAC " arp-sender-ip 0.0.0.0 arp-target-ip "       \
        "0.0.0.0"
#define RARP_IN                                                                                    \
        "500 accept ether-dst ff:ff:ff:ff:ff:ff ether-type 0x8035 arp-op 3 arp-sender-mac " MAC    \
        " arp-target-mac " MAC " arp-sender-ip 0.0.0.0 arp-target-ip 0.0.0.0"

struct buf {
        char s[16384];
        size_t n;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vsnprintf(b->s + b->n, sizeof(b->s) - b->n, fmt, ap);
        va_end(ap);
        ck_assert(r >= 0 && (size_t)r < sizeof(b->s) - b->n);
        b->n += (size_t)r;
}

static void put_str(struct buf *b, const char *name, const char *v, bool neg)
{
        if (v && v[0])
                put(b, " %s%s %s", name, neg ? " !" : "", v);
}

/* The matches of a rule (or a guard), in a fixed order. */
static void put_matches(struct buf *b, const Netbroker__FwRule *r)
{
        put_str(b, "ether-src", r->ether_src, r->ether_src_not);
        put_str(b, "ether-dst", r->ether_dst, r->ether_dst_not);
        if (r->ether_type)
                put(b, " ether-type%s 0x%04x", r->ether_type_not ? " !" : "", r->ether_type);
        if (r->arp_op)
                put(b, " arp-op %u", r->arp_op);
        put_str(b, "arp-sender-mac", r->arp_sender_mac, r->arp_sender_mac_not);
        put_str(b, "arp-target-mac", r->arp_target_mac, r->arp_target_mac_not);
        put_str(b, "arp-sender-ip", r->arp_sender_ip, r->arp_sender_ip_not);
        put_str(b, "arp-target-ip", r->arp_target_ip, r->arp_target_ip_not);
        put_str(b, "ip-src", r->ip_src, r->ip_src_not);
        put_str(b, "ip-dst", r->ip_dst, r->ip_dst_not);
        if (r->l4_proto)
                put(b, " proto %u", r->l4_proto);
        if (r->sport_min)
                put(b, " sport %u", r->sport_min);
        if (r->dport_min)
                put(b, " dport %u", r->dport_min);
        /* Nothing the stock filters use is left unrendered. */
        ck_assert(!r->has_vlan_id && !r->vlan_encap && !r->arp_htype && !r->arp_ptype &&
                  !r->arp_gratuitous && !r->has_dscp && !r->has_icmp_type && !r->tcp_flags_mask &&
                  !r->sport_max && !r->dport_max && !r->l4_proto_not && !r->ct_state);
}

static void put_rule(struct buf *b, const char *indent, const Netbroker__FwRule *r)
{
        static const char *const verdicts[] = {"accept", "drop", "reject", "return"};

        put(b, "%s%d %s", indent, r->priority, verdicts[r->verdict]);
        put_matches(b, r);
        put(b, "\n");
}

/* Stable: insertion sort of pointers by priority. */
static void sort_rules(const Netbroker__FwRule **r, size_t n)
{
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && r[j - 1]->priority > r[j]->priority; j--) {
                        const Netbroker__FwRule *t = r[j];
                        r[j] = r[j - 1];
                        r[j - 1] = t;
                }
}

static size_t rules_in(const Netbroker__FwGroup *g, int dir, const Netbroker__FwRule **out)
{
        size_t n = 0;

        for (size_t i = 0; i < g->n_rules; i++)
                if ((int)g->rules[i]->direction == dir)
                        out[n++] = g->rules[i];
        sort_rules(out, n);
        return n;
}

#define MAXR 256

static void render_dir(struct buf *b, const Netbroker__FirewallApply *a, int dir)
{
        const Netbroker__FwRule *root[MAXR];
        const Netbroker__FwGroup *chains[64];
        size_t n_root = 0, n_chains = 0, i = 0, j = 0;

        put(b, "%s\n", dir == NETBROKER__FW_DIRECTION__FW_FROM_GUEST ? "from" : "to");
        for (size_t g = 0; g < a->n_groups; g++) {
                const Netbroker__FwRule *tmp[MAXR];
                ck_assert_uint_lt(a->groups[g]->n_rules, MAXR);
                if (a->groups[g]->root) {
                        ck_assert_ptr_null(a->groups[g]->guard);
                        for (size_t k = 0; k < a->groups[g]->n_rules; k++)
                                if ((int)a->groups[g]->rules[k]->direction == dir)
                                        root[n_root++] = a->groups[g]->rules[k];
                } else if (rules_in(a->groups[g], dir, tmp)) {
                        chains[n_chains++] = a->groups[g];
                }
        }
        sort_rules(root, n_root);
        for (size_t x = 1; x < n_chains; x++) /* stable, by the chain's priority */
                for (size_t y = x; y > 0 && chains[y - 1]->priority > chains[y]->priority; y--) {
                        const Netbroker__FwGroup *t = chains[y];
                        chains[y] = chains[y - 1];
                        chains[y - 1] = t;
                }
        while (i < n_root || j < n_chains) {
                if (j < n_chains && (i == n_root || chains[j]->priority <= root[i]->priority)) {
                        put(b, "  -> %s %d", chains[j]->name, chains[j]->priority);
                        if (chains[j]->guard)
                                put_matches(b, chains[j]->guard);
                        put(b, "\n");
                        j++;
                } else {
                        put_rule(b, "  ", root[i++]);
                }
        }
        for (j = 0; j < n_chains; j++) {
                const Netbroker__FwRule *r[MAXR];
                size_t n = rules_in(chains[j], dir, r);
                put(b, "  %s:\n", chains[j]->name);
                for (size_t k = 0; k < n; k++)
                        put_rule(b, "    ", r[k]);
        }
}

/* The ruleset as the helper receives it (a batch's copy), rendered. */
static char *render(const nb_fw_ruleset *rs)
{
        nb_batch *b = nb_batch_new();
        struct buf *out = calloc(1, sizeof(*out));
        const Netbroker__FirewallApply *a;
        char *s;

        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_nonnull(out);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "vnet0", rs, NB_FW_REPLACE), 0);
        a = b->req.ops[0]->firewall_apply;
        render_dir(out, a, NETBROKER__FW_DIRECTION__FW_FROM_GUEST);
        render_dir(out, a, NETBROKER__FW_DIRECTION__FW_TO_GUEST);
        nb_batch_free(b);
        s = strdup(out->s);
        ck_assert_ptr_nonnull(s);
        free(out);
        return s;
}

static unsigned rule_count(const nb_fw_ruleset *rs)
{
        nb_batch *b = nb_batch_new();
        const Netbroker__FirewallApply *a;
        unsigned n = 0;

        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "vnet0", rs, NB_FW_REPLACE), 0);
        a = b->req.ops[0]->firewall_apply;
        for (size_t g = 0; g < a->n_groups; g++)
                n += (unsigned)a->groups[g]->n_rules;
        nb_batch_free(b);
        return n;
}

static const char *const mac1[] = {MAC, NULL};
static const char *const ip2[] = {"10.0.0.1", "10.0.0.2", NULL};
static const char *const ipv6_2[] = {"2001:db8::1", "2001:db8::2", NULL};
static const char *const gw[] = {GW, NULL};
static const char *const dhcp4[] = {"10.0.0.254", NULL};
static const char *const dhcp6[] = {"2001:db8::fe", NULL};

/* The same variables for every filter; DHCPSERVER in the family its
 * filter uses it in. */
static size_t sample_vars(const char *filter, nb_fw_var *v)
{
        v[0] = (nb_fw_var)NB_FW_VAR("MAC", mac1);
        v[1] = (nb_fw_var)NB_FW_VAR("IP", ip2);
        v[2] = (nb_fw_var)NB_FW_VAR("IPV6", ipv6_2);
        v[3] = (nb_fw_var)NB_FW_VAR("GATEWAY_MAC", gw);
        v[4] = (nb_fw_var)NB_FW_VAR("DHCPSERVER", strstr(filter, "v6") ? dhcp6 : dhcp4);
        return 5;
}

static char *render_filter(const char *filter)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_var v[5];
        size_t n = sample_vars(filter, v);
        char *s;

        ck_assert_int_eq(nb_fw_add_filter(rs, filter, v, n), 0);
        s = render(rs);
        nb_fw_ruleset_free(rs);
        return s;
}

#define IPV4_IP_CHAIN                                                                              \
        "  ipv4-ip:\n"                                                                             \
        "    100 return ether-type 0x0800 ip-src 0.0.0.0 proto 17\n"                               \
        "    500 return ether-type 0x0800 ip-src 10.0.0.1\n"                                       \
        "    500 return ether-type 0x0800 ip-src 10.0.0.2\n"                                       \
        "    1000 drop\n"
#define MAC_CHAIN                                                                                  \
        "  mac:\n"                                                                                 \
        "    500 return ether-src " MAC "\n"                                                       \
        "    500 drop\n"
#define ARP_MAC_CHAIN                                                                              \
        "  arp-mac:\n"                                                                             \
        "    350 return ether-type 0x0806 arp-sender-mac " MAC "\n"                                \
        "    1000 drop\n"
#define ARP_IP_CHAIN                                                                               \
        "  arp-ip:\n"                                                                              \
        "    400 return ether-type 0x0806 arp-sender-ip 10.0.0.1\n"                                \
        "    400 return ether-type 0x0806 arp-sender-ip 10.0.0.2\n"                                \
        "    1000 drop\n"
#define DHCP_REQUEST                                                                               \
        "    100 accept ether-type 0x0800 ip-src 0.0.0.0 ip-dst 255.255.255.255 proto 17 sport "   \
        "68 "                                                                                      \
        "dport 67\n"
#define DHCPV6_REQUEST                                                                             \
        "    100 accept ether-type 0x86dd ip-src fe80::/10 ip-dst ff02::1:2 proto 17 sport 546 "   \
        "dport 547\n"
#define JUMP_IPV4 "  -> ipv4 -700 ether-type 0x0800\n"
#define JUMP_IPV6 "  -> ipv6 -600 ether-type 0x86dd\n"
#define JUMP_RARP "  -> rarp -400 ether-type 0x8035\n"

static const struct {
        const char *name;
        const char *text;
        unsigned rules; /* with MAC and two IPs (and two IPv6 addresses) */
} expected[] = {
        {"allow-arp",
         "from\n  -> arp -500 ether-type 0x0806\n  arp:\n    500 accept\n"
         "to\n  -> arp -500 ether-type 0x0806\n  arp:\n    500 accept\n",
         2},
        {"allow-dhcp",
         "from\n" JUMP_IPV4 "  ipv4:\n" DHCP_REQUEST "to\n" JUMP_IPV4
         "  ipv4:\n    100 accept ether-type 0x0800 proto 17 sport 67 dport 68\n",
         2},
        {"allow-dhcp-server",
         "from\n" JUMP_IPV4 "  ipv4:\n" DHCP_REQUEST "to\n" JUMP_IPV4
         "  ipv4:\n    100 accept ether-type 0x0800 ip-src 10.0.0.254 proto 17 sport 67 dport 68\n",
         2},
        {"allow-dhcpv6",
         "from\n" JUMP_IPV6 "  ipv6:\n" DHCPV6_REQUEST "to\n" JUMP_IPV6
         "  ipv6:\n    100 accept ether-type 0x86dd proto 17 sport 547 dport 546\n",
         2},
        {"allow-dhcpv6-server",
         "from\n" JUMP_IPV6 "  ipv6:\n" DHCPV6_REQUEST "to\n" JUMP_IPV6
         "  ipv6:\n    100 accept ether-type 0x86dd ip-src 2001:db8::fe proto 17 sport 547 dport "
         "546\n",
         2},
        {"allow-incoming-ipv4", "from\nto\n" JUMP_IPV4 "  ipv4:\n    500 accept\n", 1},
        {"allow-incoming-ipv6", "from\nto\n" JUMP_IPV6 "  ipv6:\n    500 accept\n", 1},
        {"allow-ipv4",
         "from\n" JUMP_IPV4 "  ipv4:\n    500 accept\nto\n" JUMP_IPV4 "  ipv4:\n    500 accept\n",
         2},
        {"allow-ipv6",
         "from\n" JUMP_IPV6 "  ipv6:\n    500 accept\nto\n" JUMP_IPV6 "  ipv6:\n    500 accept\n",
         2},
        {"clean-traffic",
         "from\n"
         "  -> mac -800\n"
         "  -> ipv4-ip -710 ether-type 0x0800\n"
         "  -650 accept ether-type 0x0800\n"
         "  -> arp-mac -520 ether-type 0x0806\n"
         "  -> arp-ip -510 ether-type 0x0806\n"
         "  -500 accept ether-type 0x0806\n" JUMP_RARP "  500 accept ether-type 0x0835\n"
         "  1000 drop\n" MAC_CHAIN IPV4_IP_CHAIN ARP_MAC_CHAIN ARP_IP_CHAIN "  rarp:\n"
         "    " RARP_OUT "\n"
         "    1000 drop\n"
         "to\n" JUMP_IPV4 "  -500 accept ether-type 0x0806\n" JUMP_RARP "  1000 drop\n"
         "  ipv4:\n    500 accept\n"
         "  rarp:\n    " RARP_IN "\n    1000 drop\n",
         22},
        {"clean-traffic-gateway",
         "from\n"
         "  -> mac -800\n"
         "  -> ipv4-ip -710 ether-type 0x0800\n"
         "  -> arp-mac -520 ether-type 0x0806\n"
         "  -> arp-ip -510 ether-type 0x0806\n"
         /* Debian 12's version: qemu-announce-self, so QEMU's old 0x0835
          * announcement and no-other-rarp-traffic's drops too. */
         "  -500 accept ether-type 0x0806\n" JUMP_RARP "  500 accept ether-dst " GW "\n"
         "  500 accept ether-type 0x0835\n"
         "  1000 drop\n" MAC_CHAIN IPV4_IP_CHAIN ARP_MAC_CHAIN ARP_IP_CHAIN "  rarp:\n"
         "    " RARP_OUT "\n    1000 drop\n"
         "to\n"
         "  -500 accept ether-type 0x0806\n" JUMP_RARP "  500 accept ether-src " GW "\n"
         "  1000 drop\n"
         "  rarp:\n    " RARP_IN "\n    1000 drop\n",
         22},
        {"no-arp-ip-spoofing", "from\n  -> arp-ip -510 ether-type 0x0806\n" ARP_IP_CHAIN "to\n", 3},
        {"no-arp-mac-spoofing", "from\n  -> arp-mac -520 ether-type 0x0806\n" ARP_MAC_CHAIN "to\n",
         2},
        {"no-arp-spoofing",
         "from\n  -> arp-mac -520 ether-type 0x0806\n  -> arp-ip -510 ether-type "
         "0x0806\n" ARP_MAC_CHAIN ARP_IP_CHAIN "to\n",
         5},
        {"no-ip-multicast",
         "from\n" JUMP_IPV4 "  ipv4:\n    500 drop ether-type 0x0800 ip-dst 224.0.0.0/4\nto\n", 1},
        {"no-ip-spoofing", "from\n  -> ipv4-ip -710 ether-type 0x0800\n" IPV4_IP_CHAIN "to\n", 4},
        {"no-ipv6-multicast",
         "from\n" JUMP_IPV6 "  ipv6:\n    500 drop ether-type 0x86dd ip-dst ff00::/8\nto\n", 1},
        {"no-ipv6-spoofing",
         "from\n  -> ipv6-ip -610 ether-type 0x86dd\n  ipv6-ip:\n"
         "    100 return ether-type 0x86dd ip-src fe80::/10 proto 17\n"
         "    500 return ether-type 0x86dd ip-src 2001:db8::1\n"
         "    500 return ether-type 0x86dd ip-src 2001:db8::2\n"
         "    1000 drop\nto\n",
         4},
        {"no-mac-broadcast",
         "from\n" JUMP_IPV4 "  ipv4:\n    500 drop ether-dst ff:ff:ff:ff:ff:ff\nto\n", 1},
        {"no-mac-spoofing", "from\n  -> mac -800\n" MAC_CHAIN "to\n", 2},
        {"no-other-l2-traffic", "from\n  1000 drop\nto\n  1000 drop\n", 2},
        {"no-other-rarp-traffic",
         "from\n" JUMP_RARP "  rarp:\n    1000 drop\nto\n" JUMP_RARP "  rarp:\n    1000 drop\n", 2},
        {"qemu-announce-self",
         "from\n" JUMP_RARP "  500 accept ether-type 0x0835\n  rarp:\n    " RARP_OUT
         "\n    1000 drop\n"
         "to\n" JUMP_RARP "  rarp:\n    " RARP_IN "\n    1000 drop\n",
         5},
        {"qemu-announce-self-rarp",
         "from\n" JUMP_RARP "  rarp:\n    " RARP_OUT "\nto\n" JUMP_RARP "  rarp:\n    " RARP_IN
         "\n",
         2},
};

#define N_EXPECTED (sizeof(expected) / sizeof(*expected))

START_TEST(test_filter_names_are_libvirts_24)
{
        const char *const *names = nb_fw_filter_names();
        size_t n = 0;

        ck_assert_ptr_nonnull(names);
        while (names[n])
                n++;
        ck_assert_uint_eq(n, 24);
        ck_assert_uint_eq(N_EXPECTED, 24);
        for (size_t i = 0; i < n; i++)
                ck_assert_str_eq(names[i], expected[i].name);
}
END_TEST

START_TEST(test_each_filter_gives_libvirts_chains_and_rules)
{
        const char *name = expected[_i].name;
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_var v[5];
        size_t n = sample_vars(name, v);
        char *text;

        ck_assert_int_eq(nb_fw_add_filter(rs, name, v, n), 0);
        text = render(rs);
        ck_assert_msg(strcmp(text, expected[_i].text) == 0, "%s:\n--- got\n%s--- expected\n%s",
                      name, text, expected[_i].text);
        ck_assert_msg(rule_count(rs) == expected[_i].rules, "%s: %u rules", name, rule_count(rs));
        free(text);
        nb_fw_ruleset_free(rs);
}
END_TEST

/* A rule using a variable is one rule per value, the same value wherever
 * the rule uses it (qemu-announce-self-rarp uses $MAC three times). */
START_TEST(test_list_variables_give_one_rule_per_value)
{
        static const char *const macs[] = {MAC, "52:54:00:aa:bb:cc", NULL};
        static const char *const ips[] = {"10.0.0.1", "10.0.0.2", "192.0.2.0/24", NULL};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        char *text;

        ck_assert_int_eq(nb_fw_add_filter(rs, "qemu-announce-self-rarp",
                                          (nb_fw_var[]){NB_FW_VAR("MAC", macs)}, 1),
                         0);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-arp-ip-spoofing", (nb_fw_var[]){NB_FW_VAR("IP", ips)}, 1),
                0);
        text = render(rs);
        ck_assert_str_eq(text,
                         "from\n  -> arp-ip -510 ether-type 0x0806\n" JUMP_RARP "  arp-ip:\n"
                         "    400 return ether-type 0x0806 arp-sender-ip 10.0.0.1\n"
                         "    400 return ether-type 0x0806 arp-sender-ip 10.0.0.2\n"
                         "    400 return ether-type 0x0806 arp-sender-ip 192.0.2.0/24\n"
                         "    1000 drop\n"
                         "  rarp:\n    " RARP_OUT "\n"
                         "    500 accept ether-src 52:54:00:aa:bb:cc ether-dst ff:ff:ff:ff:ff:ff "
                         "ether-type 0x8035 arp-op 3 arp-sender-mac 52:54:00:aa:bb:cc "
                         "arp-target-mac 52:54:00:aa:bb:cc arp-sender-ip 0.0.0.0 arp-target-ip "
                         "0.0.0.0\n"
                         "to\n" JUMP_RARP "  rarp:\n    " RARP_IN "\n"
                         "    500 accept ether-dst ff:ff:ff:ff:ff:ff ether-type 0x8035 arp-op 3 "
                         "arp-sender-mac 52:54:00:aa:bb:cc arp-target-mac 52:54:00:aa:bb:cc "
                         "arp-sender-ip 0.0.0.0 arp-target-ip 0.0.0.0\n");
        free(text);
        nb_fw_ruleset_free(rs);
}
END_TEST

/* A variable given with no values: the rules using it vanish, the others
 * stay (the builders' empty address list). */
START_TEST(test_variable_with_no_values_drops_its_rules_only)
{
        static const char *const none[] = {NULL};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        char *text;

        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-ip-spoofing", (nb_fw_var[]){NB_FW_VAR("IP", none)}, 1), 0);
        text = render(rs);
        ck_assert_str_eq(text, "from\n  -> ipv4-ip -710 ether-type 0x0800\n  ipv4-ip:\n"
                               "    100 return ether-type 0x0800 ip-src 0.0.0.0 proto 17\n"
                               "    1000 drop\nto\n");
        free(text);
        nb_fw_ruleset_free(rs);
}
END_TEST

/* Refusals add nothing: a filter with a variable it uses missing (libvirt
 * refuses to instantiate it), values not valid where they are used, bad
 * variable lists, unknown filters. */
START_TEST(test_missing_and_invalid_variables_are_refused)
{
        static const char *const bad_mac[] = {"52:54:00:12:34", NULL};
        static const char *const v6[] = {"2001:db8::1", NULL};
        static const char *const v4[] = {"10.0.0.1", NULL};
        static const char *const bad_prefix[] = {"10.0.0.0/33", NULL};
        static const char *const learn_any[] = {"any", NULL};
        static const char *const learn_bad[] = {"sometimes", NULL};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();

        /* Missing. */
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-mac-spoofing", NULL, 0), -EINVAL);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "clean-traffic", (nb_fw_var[]){NB_FW_VAR("MAC", mac1)}, 1),
                -EINVAL); /* no IP: libvirt would learn it, netbroker does not */
        /* And says so (it said nothing: the nwfilter review). */
        ck_assert_str_eq(nb_last_error(), "nb_fw_add_filter: variable IP is not given (it is used; "
                                          "netbroker learns no address: give its value)");
        ck_assert_int_eq(nb_fw_add_filter(rs, "allow-dhcp-server", NULL, 0), -EINVAL);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "clean-traffic-gateway",
                                 (nb_fw_var[]){NB_FW_VAR("MAC", mac1), NB_FW_VAR("IP", ip2)}, 2),
                -EINVAL);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-mac-spoofing", (nb_fw_var[]){NB_FW_VAR("mac", mac1)}, 1),
                -EINVAL); /* names are case-sensitive, as libvirt's */
        /* Invalid where used. */
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-mac-spoofing",
                                          (nb_fw_var[]){NB_FW_VAR("MAC", bad_mac)}, 1),
                         -EINVAL);
        ck_assert_str_eq(nb_last_error(),
                         "nb_fw_add_filter: MAC='52:54:00:12:34' is not a MAC address");
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-ip-spoofing", (nb_fw_var[]){NB_FW_VAR("IP", v6)}, 1),
                -EINVAL);
        ck_assert_str_eq(nb_last_error(), "nb_fw_add_filter: IP='2001:db8::1' is not an address or "
                                          "prefix of the rule's IP family");
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-ip-spoofing",
                                          (nb_fw_var[]){NB_FW_VAR("IP", bad_prefix)}, 1),
                         -EINVAL);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-ipv6-spoofing", (nb_fw_var[]){NB_FW_VAR("IPV6", v4)}, 1),
                -EINVAL);
        ck_assert_int_eq(nb_fw_add_filter(rs, "allow-dhcpv6-server",
                                          (nb_fw_var[]){NB_FW_VAR("DHCPSERVER", v4)}, 1),
                         -EINVAL);
        ck_assert_int_eq(nb_fw_add_filter(rs, "allow-dhcp-server",
                                          (nb_fw_var[]){NB_FW_VAR("DHCPSERVER", v6)}, 1),
                         -EINVAL);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "clean-traffic-gateway",
                                 (nb_fw_var[]){NB_FW_VAR("MAC", mac1), NB_FW_VAR("IP", ip2),
                                               NB_FW_VAR("GATEWAY_MAC", v4)},
                                 3),
                -EINVAL);
        /* Bad lists. */
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-mac-spoofing",
                                 (nb_fw_var[]){NB_FW_VAR("MAC", mac1), NB_FW_VAR("MAC", mac1)}, 2),
                -EINVAL);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-mac-spoofing", (nb_fw_var[]){NB_FW_VAR("M-AC", mac1)}, 1),
                -EINVAL);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-mac-spoofing", (nb_fw_var[]){NB_FW_VAR("MAC", NULL)}, 1),
                -EINVAL);
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-mac-spoofing", NULL, 1), -EINVAL);
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-mac-spoofing",
                                          (nb_fw_var[]){NB_FW_VAR("MAC", mac1),
                                                        NB_FW_VAR("CTRL_IP_LEARNING", learn_bad)},
                                          2),
                         -EINVAL);
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-such-filter", NULL, 0), -ENOENT);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-promisc", (nb_fw_var[]){NB_FW_VAR("MAC", mac1)}, 1),
                -ENOENT); /* netbroker's own: nb_fw_add_no_promisc() only */
        ck_assert_int_eq(nb_fw_add_filter(NULL, "allow-arp", NULL, 0), -EINVAL);
        ck_assert_int_eq(nb_fw_add_filter(rs, NULL, NULL, 0), -EINVAL);
        ck_assert_uint_eq(rule_count(rs), 0);
        /* Libvirt's learning control and unused variables are accepted. */
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-mac-spoofing",
                                          (nb_fw_var[]){NB_FW_VAR("MAC", mac1),
                                                        NB_FW_VAR("CTRL_IP_LEARNING", learn_any),
                                                        NB_FW_VAR("UNUSED", v4)},
                                          3),
                         0);
        ck_assert_uint_eq(rule_count(rs), 2);
        nb_fw_ruleset_free(rs);
}
END_TEST

/* A failure half-way takes back the chains it started and the rules it
 * appended to chains that were there. */
START_TEST(test_failure_rolls_back_groups_and_appended_rules)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_var v[5];
        size_t n = sample_vars("clean-traffic", v);
        char *before, *after;

        ck_assert_int_eq(nb_fw_add_filter(rs, "allow-dhcp", NULL, 0), 0); /* chain ipv4 */
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-mac-spoofing", v, n), 0); /* chain mac */
        /* rarp, clean-traffic's last chain, taken with other options. */
        ck_assert_int_eq(nb_fw_group(rs, "rarp"), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &(nb_fw_rule){.size = sizeof(nb_fw_rule),
                                                          .verdict = NB_FW_DROP}),
                         0);
        before = render(rs);
        ck_assert_uint_eq(rule_count(rs), 5);
        ck_assert_int_eq(nb_fw_add_filter(rs, "clean-traffic", v, n), -EEXIST);
        after = render(rs);
        ck_assert_str_eq(after, before);
        ck_assert_uint_eq(rule_count(rs), 5);
        /* And the current group is the one it was: a plain rule still goes
         * to "rarp". */
        ck_assert_int_eq(nb_fw_rule_add(rs, &(nb_fw_rule){.size = sizeof(nb_fw_rule),
                                                          .verdict = NB_FW_ACCEPT}),
                         0);
        ck_assert_uint_eq(rule_count(rs), 6);
        free(before);
        free(after);
        nb_fw_ruleset_free(rs);
}
END_TEST

static unsigned count(const char *s, const char *what)
{
        unsigned n = 0;

        for (s = strstr(s, what); s; s = strstr(s + 1, what))
                n++;
        return n;
}

/* A rule added after a filter goes where it would have gone without the
 * filter: into the caller's group, or a new group "rules", never into the
 * filter's last chain (clean-traffic's is rarp, which only RARP enters:
 * an "accept VLAN 10" there would never match). */
START_TEST(test_a_rule_after_a_filter_is_not_in_the_filters_chain)
{
        nb_fw_var v[5];
        size_t n = sample_vars("clean-traffic", v);
        nb_fw_rule vlan = {.size = sizeof(nb_fw_rule),
                           .verdict = NB_FW_ACCEPT,
                           .ether_type = 0x8100}; /* any VLAN */
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        char *s;

        ck_assert_int_eq(nb_fw_add_filter(rs, "clean-traffic", v, n), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &vlan), 0);
        s = render(rs);
        /* Once, as the first rule of a group of its own. */
        ck_assert_msg(count(s, "0x8100") == 1 &&
                              strstr(s, "  rules:\n    0 accept ether-type 0x8100\n"),
                      "the rule is not alone in group \"rules\":\n%s", s);
        free(s);
        nb_fw_ruleset_free(rs);

        rs = nb_fw_ruleset_new();
        ck_assert_int_eq(nb_fw_group(rs, "mine"), 0);
        ck_assert_int_eq(nb_fw_add_no_promisc(rs, MAC), 0);
        ck_assert_int_eq(nb_fw_add_filter(rs, "clean-traffic", v, n), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &vlan), 0);
        s = render(rs);
        ck_assert_msg(count(s, "0x8100") == 1 &&
                              strstr(s, "  mine:\n    0 accept ether-type 0x8100\n") &&
                              !strstr(s, "  rules:\n"),
                      "the rule is not in the caller's group:\n%s", s);
        free(s);
        nb_fw_ruleset_free(rs);
}
END_TEST

static char *render_calls(const char *const *filters, bool promisc_first, bool promisc_last)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        char *s;

        if (promisc_first)
                ck_assert_int_eq(nb_fw_add_no_promisc(rs, MAC), 0);
        for (size_t i = 0; filters[i]; i++) {
                nb_fw_var v[5];
                size_t n = sample_vars(filters[i], v);
                ck_assert_int_eq(nb_fw_add_filter(rs, filters[i], v, n), 0);
        }
        if (promisc_last)
                ck_assert_int_eq(nb_fw_add_no_promisc(rs, MAC), 0);
        s = render(rs);
        nb_fw_ruleset_free(rs);
        return s;
}

/* Priorities, not calls, order the rules: two orders of the same filters
 * give the same chains (filters whose rules share a chain and a priority
 * are the exception libvirt has too: there the order of references
 * decides). A filter added twice is there once. */
START_TEST(test_order_of_calls_does_not_matter)
{
        static const char *const ct[] = {"clean-traffic", NULL};
        static const char *const a[] = {"allow-dhcp",       "clean-traffic", "allow-arp",
                                        "no-ipv6-spoofing", "allow-dhcpv6",  NULL};
        static const char *const b[] = {
                "allow-dhcpv6",  "allow-arp", "no-ipv6-spoofing", "clean-traffic", "allow-dhcp",
                "clean-traffic", NULL};
        char *x = render_calls(ct, true, false), *y = render_calls(ct, false, true);
        char *p = render_calls(a, false, false), *q = render_calls(b, false, false);

        ck_assert_str_eq(x, y);
        /* no-promisc runs first to the guest, whatever the order. */
        ck_assert_str_eq(strstr(x, "\nto\n"),
                         "\nto\n  -> mac -800\n" JUMP_IPV4
                         "  -500 accept ether-type 0x0806\n" JUMP_RARP "  1000 drop\n"
                         "  mac:\n    500 return ether-dst " MAC "\n"
                         "    500 return ether-dst 01:00:00:00:00:00/01:00:00:00:00:00\n"
                         "    500 drop\n"
                         "  ipv4:\n    500 accept\n"
                         "  rarp:\n    " RARP_IN "\n    1000 drop\n");
        ck_assert_str_eq(p, q);
        free(x);
        free(y);
        free(p);
        free(q);
}
END_TEST

/* The builders are their stock filters. */
START_TEST(test_builders_are_the_stock_filters)
{
        static const char *const one_ip[] = {"10.0.0.1", "10.0.0.2", NULL};
        struct {
                int r;
                const char *filter;
        } cases[4];
        nb_fw_ruleset *rs[4];
        char *t;

        for (size_t i = 0; i < 4; i++)
                rs[i] = nb_fw_ruleset_new();
        cases[0].r = nb_fw_add_clean_traffic(rs[0], MAC, one_ip), cases[0].filter = "clean-traffic";
        cases[1].r = nb_fw_add_no_arp_spoofing(rs[1], MAC, one_ip),
        cases[1].filter = "no-arp-spoofing";
        cases[2].r = nb_fw_add_allow_dhcp(rs[2], "10.0.0.254"),
        cases[2].filter = "allow-dhcp-server";
        cases[3].r = nb_fw_add_no_ip_spoofing(rs[3], one_ip), cases[3].filter = "no-ip-spoofing";
        for (size_t i = 0; i < 4; i++) {
                char *want = render_filter(cases[i].filter);
                ck_assert_int_eq(cases[i].r, 0);
                t = render(rs[i]);
                ck_assert_str_eq(t, want);
                free(t);
                free(want);
                nb_fw_ruleset_free(rs[i]);
        }
}
END_TEST

/* The guest's copy of an inout rule is libvirt's reverse: every source
 * the rule names becomes a destination and the other way round, with its
 * negation (a rule in "in" terms, srcipaddr being the far end, matches
 * what the guest sends to it); twice reversed is the rule again. */
START_TEST(test_an_inout_rules_copy_for_the_guests_frames_is_reversed)
{
        nb_fw_rule r = NB_FW_RULE_INIT, back;

        r.ether_src = "52:54:00:00:00:01";
        r.ether_src_not = true;
        r.arp_sender_mac = "52:54:00:00:00:02";
        r.arp_sender_ip = "192.0.2.1";
        r.arp_target_ip_not = true;
        r.ip_src = "192.0.2.7/32";
        r.ip_dst = "198.51.100.0/24";
        r.ip_dst_not = true;
        r.l4_proto = 6;
        r.sport_min = 1000;
        r.sport_max = 1999;
        r.dport_min = 22;
        r.dport_not = true;
        back = r;
        nb_fw_rule_reverse(&r);
        ck_assert_str_eq(r.ether_dst, "52:54:00:00:00:01");
        ck_assert(r.ether_dst_not && !r.ether_src_not && !r.ether_src);
        ck_assert_str_eq(r.arp_target_mac, "52:54:00:00:00:02");
        ck_assert_ptr_null(r.arp_sender_mac);
        ck_assert_str_eq(r.arp_target_ip, "192.0.2.1");
        ck_assert(r.arp_sender_ip_not && !r.arp_target_ip_not && !r.arp_sender_ip);
        ck_assert_str_eq(r.ip_dst, "192.0.2.7/32");
        ck_assert_str_eq(r.ip_src, "198.51.100.0/24");
        ck_assert(r.ip_src_not && !r.ip_dst_not);
        ck_assert_uint_eq(r.dport_min, 1000);
        ck_assert_uint_eq(r.dport_max, 1999);
        ck_assert_uint_eq(r.sport_min, 22);
        ck_assert_uint_eq(r.sport_max, 0);
        ck_assert(r.sport_not && !r.dport_not);
        ck_assert_uint_eq(r.l4_proto, 6);
        nb_fw_rule_reverse(&r);
        ck_assert_mem_eq(&r, &back, sizeof(r));
}
END_TEST

TCase *fw_filters_tcase(void)
{
        TCase *tc = tcase_create("fw-filters");

        tcase_add_test(tc, test_filter_names_are_libvirts_24);
        tcase_add_loop_test(tc, test_each_filter_gives_libvirts_chains_and_rules, 0,
                            (int)N_EXPECTED);
        tcase_add_test(tc, test_list_variables_give_one_rule_per_value);
        tcase_add_test(tc, test_variable_with_no_values_drops_its_rules_only);
        tcase_add_test(tc, test_missing_and_invalid_variables_are_refused);
        tcase_add_test(tc, test_failure_rolls_back_groups_and_appended_rules);
        tcase_add_test(tc, test_order_of_calls_does_not_matter);
        tcase_add_test(tc, test_a_rule_after_a_filter_is_not_in_the_filters_chain);
        tcase_add_test(tc, test_builders_are_the_stock_filters);
        tcase_add_test(tc, test_an_inout_rules_copy_for_the_guests_frames_is_reversed);
        return tc;
}
