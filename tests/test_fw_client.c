// SPDX-License-Identifier: LGPL-2.1-or-later
/* The client side of the firewall, without a helper: libvirt's standard
 * filters as rules, rulesets copied into batches, name checks, the result
 * accessors, and the fw text format of netbrokerctl. Batches are inspected
 * through the library's internal view of them (internal.h). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwfile.h"
#include "internal.h"
#include "tests_unit.h"

#define MAC "52:54:00:12:34:56"

/* A rule in the fw text format's words, so expectations read like the
 * filters they describe. */
static const char *rule_str(const Netbroker__FwRule *r)
{
        static char buf[1024];
        size_t n = 0;

#define PUT(...) n += (size_t)snprintf(buf + n, sizeof(buf) - n, __VA_ARGS__)
#define PUT_STR(name, field)                                                                       \
        do {                                                                                       \
                if (r->field[0])                                                                   \
                        PUT(" " name "%s %s", r->field##_not ? " !" : "", r->field);               \
        } while (0)
        static const char *const verdicts[] = {"accept", "drop", "reject", "return"};

        ck_assert_uint_eq(r->ct_state, 0); /* no conntrack at netdev hooks */
        PUT("%s %s", r->direction == NETBROKER__FW_DIRECTION__FW_FROM_GUEST ? "from" : "to",
            verdicts[r->verdict]);
        PUT_STR("ether-src", ether_src);
        PUT_STR("ether-dst", ether_dst);
        if (r->ether_type)
                PUT(" ether-type%s 0x%04x", r->ether_type_not ? " !" : "", r->ether_type);
        if (r->has_vlan_id)
                PUT(" vlan %u", r->vlan_id);
        if (r->arp_op)
                PUT(" arp-op%s %u", r->arp_op_not ? " !" : "", r->arp_op);
        PUT_STR("arp-sender-mac", arp_sender_mac);
        PUT_STR("arp-target-mac", arp_target_mac);
        PUT_STR("arp-sender-ip", arp_sender_ip);
        PUT_STR("arp-target-ip", arp_target_ip);
        PUT_STR("ip-src", ip_src);
        PUT_STR("ip-dst", ip_dst);
        if (r->l4_proto)
                PUT(" proto %u", r->l4_proto);
        if (r->sport_min || r->sport_max)
                PUT(r->sport_max ? " sport %u-%u" : " sport %u", r->sport_min, r->sport_max);
        if (r->dport_min || r->dport_max)
                PUT(r->dport_max ? " dport %u-%u" : " dport %u", r->dport_min, r->dport_max);
        if (r->has_icmp_type)
                PUT(" icmp-type %u", r->icmp_type);
#undef PUT
#undef PUT_STR
        return buf;
}

static void expect_group(const Netbroker__FwGroup *g, const char *name, const char *const *rules)
{
        size_t n = 0;

        ck_assert_str_eq(g->name, name);
        while (rules[n])
                n++;
        ck_assert_msg(g->n_rules == n, "group %s: %zu rules, expected %zu", name, g->n_rules, n);
        for (size_t i = 0; i < n; i++)
                ck_assert_str_eq(rule_str(g->rules[i]), rules[i]);
}

static const Netbroker__FirewallApply *apply_op(const nb_batch *b, size_t i)
{
        ck_assert_uint_lt(i, b->req.n_ops);
        ck_assert_int_eq(b->req.ops[i]->op_case, NETBROKER__OP__OP_FIREWALL_APPLY);
        return b->req.ops[i]->firewall_apply;
}

/* Build one filter into a fresh ruleset, put it into a batch, free the
 * ruleset, and return the batch (whose op 0 carries the copy). */
#define BATCH_OF(call)                                                                             \
        ({                                                                                         \
                nb_fw_ruleset *rs_ = nb_fw_ruleset_new();                                          \
                nb_fw_ruleset *rs = rs_;                                                           \
                nb_batch *b_ = nb_batch_new();                                                     \
                ck_assert_ptr_nonnull(rs_);                                                        \
                ck_assert_ptr_nonnull(b_);                                                         \
                ck_assert_int_eq((call), 0);                                                       \
                ck_assert_int_eq(                                                                  \
                        nb_batch_firewall_apply(b_, "vnet0", "vnet0", rs_, NB_FW_REPLACE), 0);     \
                nb_fw_ruleset_free(rs);                                                            \
                b_;                                                                                \
        })

static const char *const ips[] = {"192.0.2.10", "198.51.100.0/24", NULL};

START_TEST(test_no_mac_spoofing_returns_the_guests_mac_and_drops_the_rest)
{
        nb_batch *b = BATCH_OF(nb_fw_add_no_mac_spoofing(rs, MAC));
        const Netbroker__FirewallApply *a = apply_op(b, 0);

        /* The groups are libvirt's chains now (here "mac"), not the filters:
         * several filters share a chain, which runs at its priority. */
        ck_assert_uint_eq(a->n_groups, 1);
        expect_group(a->groups[0], "mac",
                     (const char *[]){"from return ether-src " MAC, "from drop", NULL});
        nb_batch_free(b);
}
END_TEST

START_TEST(test_no_ip_spoofing_returns_each_address_and_dhcp_and_drops_other_ipv4)
{
        nb_batch *b = BATCH_OF(nb_fw_add_no_ip_spoofing(rs, ips));
        const Netbroker__FirewallApply *a = apply_op(b, 0);

        /* As libvirt's: any UDP from 0.0.0.0 goes on (DHCP is checked by a
         * later filter, if any), and the catch-all drop has no ether type
         * of its own: the group "ipv4-ip" is entered for IPv4 only. */
        ck_assert_uint_eq(a->n_groups, 1);
        ck_assert_uint_eq(a->groups[0]->guard->ether_type, 0x0800);
        expect_group(a->groups[0], "ipv4-ip",
                     (const char *[]){
                             "from return ether-type 0x0800 ip-src 0.0.0.0 proto 17",
                             "from return ether-type 0x0800 ip-src 192.0.2.10",
                             "from return ether-type 0x0800 ip-src 198.51.100.0/24",
                             "from drop",
                             NULL,
                     });
        nb_batch_free(b);
}
END_TEST

START_TEST(test_no_arp_spoofing_checks_sender_mac_ip_and_opcode)
{
        nb_batch *b = BATCH_OF(nb_fw_add_no_arp_spoofing(rs, MAC, ips));
        const Netbroker__FirewallApply *a = apply_op(b, 0);

        /* libvirt's two chains, arp-mac then arp-ip; no opcode check (the
         * published filter has none: opcodes 3, 4, 8, 9 with the right
         * sender pass, as in libvirt). */
        ck_assert_uint_eq(a->n_groups, 2);
        expect_group(a->groups[0], "arp-mac",
                     (const char *[]){"from return ether-type 0x0806 arp-sender-mac " MAC,
                                      "from drop", NULL});
        expect_group(a->groups[1], "arp-ip",
                     (const char *[]){
                             "from return ether-type 0x0806 arp-sender-ip 192.0.2.10",
                             "from return ether-type 0x0806 arp-sender-ip 198.51.100.0/24",
                             "from drop",
                             NULL,
                     });
        nb_batch_free(b);
}
END_TEST

START_TEST(test_no_promisc_lets_unicast_to_the_guest_and_multicast_through)
{
        nb_batch *b = BATCH_OF(nb_fw_add_no_promisc(rs, MAC));
        const Netbroker__FirewallApply *a = apply_op(b, 0);

        /* In libvirt's chain mac (-800): before every accept of the stock
         * filters, whatever the order of calls. */
        ck_assert_uint_eq(a->n_groups, 1);
        expect_group(a->groups[0], "mac",
                     (const char *[]){
                             "to return ether-dst " MAC,
                             "to return ether-dst 01:00:00:00:00:00/01:00:00:00:00:00",
                             "to drop",
                             NULL,
                     });
        nb_batch_free(b);
}
END_TEST

START_TEST(test_allow_dhcp_with_and_without_a_server)
{
        nb_batch *b = BATCH_OF(nb_fw_add_allow_dhcp(rs, NULL));
        const Netbroker__FirewallApply *a = apply_op(b, 0);
        const char *request = "from accept ether-type 0x0800 ip-src 0.0.0.0 ip-dst "
                              "255.255.255.255 proto 17 sport 68 dport 67";

        /* Both variants share libvirt's chain "ipv4". */
        expect_group(a->groups[0], "ipv4",
                     (const char *[]){request,
                                      "to accept ether-type 0x0800 proto 17 sport 67 dport 68",
                                      NULL});
        nb_batch_free(b);
        b = BATCH_OF(nb_fw_add_allow_dhcp(rs, "192.0.2.1"));
        a = apply_op(b, 0);
        expect_group(a->groups[0], "ipv4",
                     (const char *[]){request,
                                      "to accept ether-type 0x0800 ip-src 192.0.2.1 proto 17 "
                                      "sport 67 dport 68",
                                      NULL});
        nb_batch_free(b);
}
END_TEST

START_TEST(test_allow_arp_accepts_arp_both_ways)
{
        nb_batch *b = BATCH_OF(nb_fw_add_allow_arp(rs));

        /* libvirt's rule has no protocol: the group "arp" is entered for
         * ARP only. */
        ck_assert_uint_eq(apply_op(b, 0)->groups[0]->guard->ether_type, 0x0806);
        expect_group(apply_op(b, 0)->groups[0], "arp",
                     (const char *[]){"from accept", "to accept", NULL});
        nb_batch_free(b);
}
END_TEST

START_TEST(test_clean_traffic_is_libvirts_composition)
{
        const char *const one[] = {"192.0.2.10", NULL};
        nb_batch *b = BATCH_OF(nb_fw_add_clean_traffic(rs, MAC, one));
        const Netbroker__FirewallApply *a = apply_op(b, 0);

        /* libvirt's chains, in the order the filters first use them; the
         * helper orders them by priority (test_fw_filters.c has the base
         * chain as libvirt builds it). Changed with libvirt's priorities:
         * any UDP from 0.0.0.0 passes no-ip-spoofing, ARP opcodes are not
         * checked, the RARP announcement is checked to its payload, and
         * other RARP is dropped in the rarp chain. */
        ck_assert_uint_eq(a->n_groups, 7);
        expect_group(a->groups[0], "mac",
                     (const char *[]){"from return ether-src " MAC, "from drop", NULL});
        expect_group(a->groups[1], "ipv4-ip",
                     (const char *[]){
                             "from return ether-type 0x0800 ip-src 0.0.0.0 proto 17",
                             "from return ether-type 0x0800 ip-src 192.0.2.10",
                             "from drop",
                             NULL,
                     });
        expect_group(a->groups[2], "root",
                     (const char *[]){
                             "from accept ether-type 0x0800",
                             "from accept ether-type 0x0806",
                             "to accept ether-type 0x0806",
                             "from drop",
                             "to drop",
                             "from accept ether-type 0x0835",
                             NULL,
                     });
        ck_assert(a->groups[2]->root);
        expect_group(a->groups[3], "ipv4", (const char *[]){"to accept", NULL});
        expect_group(a->groups[4], "arp-mac",
                     (const char *[]){"from return ether-type 0x0806 arp-sender-mac " MAC,
                                      "from drop", NULL});
        expect_group(a->groups[5], "arp-ip",
                     (const char *[]){"from return ether-type 0x0806 arp-sender-ip 192.0.2.10",
                                      "from drop", NULL});
        expect_group(a->groups[6], "rarp",
                     (const char *[]){
                             "from accept ether-src " MAC " ether-dst ff:ff:ff:ff:ff:ff ether-type "
                             "0x8035 arp-op 3 arp-sender-mac " MAC " arp-target-mac " MAC
                             " arp-sender-ip 0.0.0.0 arp-target-ip 0.0.0.0",
                             "to accept ether-dst ff:ff:ff:ff:ff:ff ether-type 0x8035 arp-op 3 "
                             "arp-sender-mac " MAC " arp-target-mac " MAC
                             " arp-sender-ip 0.0.0.0 arp-target-ip 0.0.0.0",
                             "from drop",
                             "to drop",
                             NULL,
                     });
        nb_batch_free(b);
}
END_TEST

START_TEST(test_ruleset_and_strings_are_copied_into_the_batch)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        char mac[] = MAC, owner[] = "vnet7", ifname[] = "vnet7";
        nb_fw_rule rule = {.size = sizeof(nb_fw_rule),
                           .direction = NB_FW_TO_GUEST,
                           .verdict = NB_FW_DROP,
                           .ether_src = mac};
        const Netbroker__FirewallApply *a;
        uint8_t *wire;
        size_t len;

        ck_assert_int_eq(nb_fw_rule_add(rs, &rule), 0); /* starts the group "rules" */
        memset(mac, 'x', sizeof(mac) - 1);
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, MAC, ips), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, owner, ifname, rs, NB_FW_ENSURE), 0);
        /* Everything the caller had may go now. */
        nb_fw_ruleset_free(rs);
        memset(owner, 'y', sizeof(owner) - 1);
        memset(ifname, 'z', sizeof(ifname) - 1);

        a = apply_op(b, 0);
        ck_assert_str_eq(a->owner, "vnet7");
        ck_assert_str_eq(a->ifname, "vnet7");
        ck_assert_int_eq(a->mode, NETBROKER__FW_MODE__FW_ENSURE);
        ck_assert_uint_eq(a->n_groups, 8); /* "rules" and clean-traffic's 7 chains */
        expect_group(a->groups[0], "rules", (const char *[]){"to drop ether-src " MAC, NULL});
        ck_assert_str_eq(a->groups[7]->name, "rarp");
        /* The whole request still encodes: no pointer into freed memory
         * (run under the sanitizers to be sure). The generic calls, since
         * this binary's descriptors are not the library's own copies. */
        len = protobuf_c_message_get_packed_size(&b->req.base);
        wire = malloc(len);
        ck_assert_ptr_nonnull(wire);
        ck_assert_uint_eq(protobuf_c_message_pack(&b->req.base, wire), len);
        free(wire);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_empty_ruleset_is_an_owner_with_no_rules)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "vnet0", rs, NB_FW_REPLACE), 0);
        nb_fw_ruleset_free(rs);
        ck_assert_uint_eq(apply_op(b, 0)->n_groups, 0);
        ck_assert_int_eq(nb_batch_firewall_remove(b, "vnet0"), 0);
        ck_assert_int_eq(nb_batch_firewall_list(b), 0);
        ck_assert_int_eq(b->req.ops[1]->op_case, NETBROKER__OP__OP_FIREWALL_REMOVE);
        ck_assert_str_eq(b->req.ops[1]->firewall_remove->owner, "vnet0");
        ck_assert_int_eq(b->req.ops[2]->op_case, NETBROKER__OP__OP_FIREWALL_LIST);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_bad_group_and_owner_names_are_refused)
{
        static const char *const bad_groups[] = {
                "", "a b", "a/b", "a.b", "x:y", "abcdefghijklmnopqrstuvwxyz0123456"}; /* 33 */
        static const char *const bad_owners[] = {
                "",
                "a b",
                "a/b",
                "a\"b",
                "vnet0\n",
                "0123456789012345678901234567890123456789012345678901234567890123x"}; /* 65 */
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();

        for (size_t i = 0; i < sizeof(bad_groups) / sizeof(*bad_groups); i++)
                ck_assert_int_eq(nb_fw_group(rs, bad_groups[i]), -EINVAL);
        ck_assert_int_eq(nb_fw_group(rs, NULL), -EINVAL);
        ck_assert_int_eq(nb_fw_group(NULL, "ok"), -EINVAL);
        ck_assert_int_eq(nb_fw_group(rs, "abcdefghijklmnopqrstuvwxyz_-0123"), 0); /* 32 */
        ck_assert_int_eq(nb_fw_group(rs, "abcdefghijklmnopqrstuvwxyz_-0123"), -EEXIST);
        for (size_t i = 0; i < sizeof(bad_owners) / sizeof(*bad_owners); i++) {
                ck_assert_int_eq(
                        nb_batch_firewall_apply(b, bad_owners[i], "vnet0", rs, NB_FW_REPLACE),
                        -EINVAL);
                ck_assert_int_eq(nb_batch_firewall_remove(b, bad_owners[i]), -EINVAL);
        }
        ck_assert_int_eq(nb_batch_firewall_remove(b, NULL), -EINVAL);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "", rs, NB_FW_REPLACE), -EINVAL);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "a23456789012345x", rs, NB_FW_REPLACE),
                         -EINVAL); /* 16 bytes */
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "vnet0", NULL, NB_FW_REPLACE),
                         -EINVAL);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "vnet0", rs, (nb_fw_mode)2), -EINVAL);
        ck_assert_int_eq(nb_batch_firewall_apply(NULL, "vnet0", "vnet0", rs, NB_FW_REPLACE),
                         -EINVAL);
        ck_assert_uint_eq(nb_batch_size(b), 0); /* nothing was added */
        ck_assert_int_eq(nb_batch_firewall_apply(b, "guest-1.net0:a@b_c", "a23456789012345", rs,
                                                 NB_FW_REPLACE),
                         0);
        nb_fw_ruleset_free(rs);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_bad_rules_and_filter_arguments_add_nothing)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        const char *const bad_ips[] = {"192.0.2.1", "2001:db8::1", NULL};
        const char *const bad_prefix[] = {"192.0.2.0/33", NULL};

        ck_assert_int_eq(
                nb_fw_rule_add(rs, &(nb_fw_rule){.size = sizeof(nb_fw_rule), .direction = 2}),
                -EINVAL);
        ck_assert_int_eq(
                nb_fw_rule_add(rs, &(nb_fw_rule){.size = sizeof(nb_fw_rule), .verdict = 4}),
                -EINVAL);
        ck_assert_int_eq(
                nb_fw_rule_add(rs, &(nb_fw_rule){.size = sizeof(nb_fw_rule), .ip_src_not = true}),
                -EINVAL);
        ck_assert_int_eq(nb_fw_rule_add(rs, &(nb_fw_rule){.size = sizeof(nb_fw_rule),
                                                          .ether_type_not = true}),
                         -EINVAL);
        ck_assert_int_eq(nb_fw_rule_add(rs, NULL), -EINVAL);
        ck_assert_int_eq(nb_fw_rule_add(NULL, &(nb_fw_rule){.size = sizeof(nb_fw_rule)}), -EINVAL);
        ck_assert_int_eq(nb_fw_add_no_mac_spoofing(rs, "52:54:00:12:34"), -EINVAL);
        ck_assert_int_eq(nb_fw_add_no_mac_spoofing(rs, "52:54:00:12:34:5g"), -EINVAL);
        ck_assert_int_eq(nb_fw_add_no_mac_spoofing(rs, NULL), -EINVAL);
        ck_assert_int_eq(nb_fw_add_no_ip_spoofing(rs, bad_ips), -EINVAL);
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, MAC, bad_prefix), -EINVAL);
        ck_assert_int_eq(nb_fw_add_allow_dhcp(rs, "dhcp.example"), -EINVAL);
        ck_assert_int_eq(nb_fw_add_no_promisc(NULL, MAC), -EINVAL);
        /* A filter whose chain is taken (a group of that name with other
         * options) fails whole: clean-traffic's first chains, and the
         * rules it added to no-arp-spoofing's chains, are not left behind
         * when its rarp chain clashes. (A filter added twice is no clash
         * any more: its chains are selected again, its rules there once,
         * as libvirt's filterref shares chains.) */
        ck_assert_int_eq(nb_fw_add_no_arp_spoofing(rs, MAC, NULL), 0);
        ck_assert_int_eq(nb_fw_group(rs, "rarp"), 0);
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, MAC, NULL), -EEXIST);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "vnet0", rs, NB_FW_REPLACE), 0);
        ck_assert_uint_eq(apply_op(b, 0)->n_groups, 3);
        /* With no address, the guest may send no ARP at all. */
        expect_group(apply_op(b, 0)->groups[0], "arp-mac",
                     (const char *[]){"from return ether-type 0x0806 arp-sender-mac " MAC,
                                      "from drop", NULL});
        expect_group(apply_op(b, 0)->groups[1], "arp-ip", (const char *[]){"from drop", NULL});
        ck_assert_uint_eq(apply_op(b, 0)->groups[2]->n_rules, 0);
        nb_fw_ruleset_free(rs);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_result_accessors_read_firewall_results)
{
        Netbroker__FirewallApplyResult fa = NETBROKER__FIREWALL_APPLY_RESULT__INIT;
        Netbroker__FwOwner o1 = NETBROKER__FW_OWNER__INIT, o2 = NETBROKER__FW_OWNER__INIT;
        Netbroker__FwOwner *owners[] = {&o1, &o2};
        Netbroker__FirewallListResult fl = NETBROKER__FIREWALL_LIST_RESULT__INIT;
        Netbroker__Result r0 = NETBROKER__RESULT__INIT, r1 = NETBROKER__RESULT__INIT;
        Netbroker__Result r2 = NETBROKER__RESULT__INIT;
        Netbroker__Result *results[] = {&r0, &r1, &r2};
        Netbroker__Reply reply = NETBROKER__REPLY__INIT;
        Netbroker__ServerMessage msg = NETBROKER__SERVER_MESSAGE__INIT;
        nb_results res = {.msg = &msg};
        const char *owner, *ifname, *hash = NULL;
        bool unchanged = false;
        unsigned rules = 0;

        fa.hash = "c0ffee";
        fa.unchanged = true;
        fa.rules = 17;
        r0.out_case = NETBROKER__RESULT__OUT_FIREWALL;
        r0.firewall = &fa;
        o1.owner = "vnet0";
        o1.ifname = "vnet0";
        o1.hash = "aa";
        o1.rules = 3;
        o2.owner = "vnet1";
        o2.ifname = "tap1";
        o2.hash = "bb";
        o2.rules = 4;
        fl.owners = owners;
        fl.n_owners = 2;
        r1.out_case = NETBROKER__RESULT__OUT_FIREWALL_LIST;
        r1.firewall_list = &fl;
        reply.results = results;
        reply.n_results = 3;
        msg.msg_case = NETBROKER__SERVER_MESSAGE__MSG_REPLY;
        msg.reply = &reply;

        ck_assert_int_eq(nb_result_firewall(&res, 0, &hash, &unchanged, &rules), 0);
        ck_assert_str_eq(hash, "c0ffee");
        ck_assert(unchanged);
        ck_assert_uint_eq(rules, 17);
        ck_assert_int_eq(nb_result_firewall(&res, 1, &hash, &unchanged, &rules), -ENODATA);
        ck_assert_int_eq(nb_result_firewall(&res, 3, &hash, &unchanged, &rules), -ERANGE);
        ck_assert_uint_eq(nb_result_fw_owner_count(&res, 1), 2);
        ck_assert_uint_eq(nb_result_fw_owner_count(&res, 0), 0);
        ck_assert_uint_eq(nb_result_fw_owner_count(&res, 9), 0);
        ck_assert_int_eq(nb_result_fw_owner_at(&res, 1, 1, &owner, &ifname, &hash, &rules), 0);
        ck_assert_str_eq(owner, "vnet1");
        ck_assert_str_eq(ifname, "tap1");
        ck_assert_str_eq(hash, "bb");
        ck_assert_uint_eq(rules, 4);
        ck_assert_int_eq(nb_result_fw_owner_at(&res, 1, 2, &owner, &ifname, &hash, &rules),
                         -ERANGE);
        ck_assert_int_eq(nb_result_fw_owner_at(&res, 2, 0, &owner, &ifname, &hash, &rules),
                         -ENODATA);
}
END_TEST

/* ---- the fw text format ---- */

static const char good_file[] = "# two guests\n"
                                "owner vnet0 ensure\n"
                                "filter no-promisc " MAC "\n"
                                "filter clean-traffic " MAC " 192.0.2.10   # its address\n"
                                "\n"
                                "owner guest1.net0 on tap1\n"
                                "rule to accept ether-type arp\n"
                                "group web\n"
                                "\trule to accept proto tcp dport 80-81 ip-dst ! 2001:db8::/32\n"
                                "rule from drop ether-src ! 52:54:00:00:00:01 vlan 7 arp-op "
                                "reply icmp-type 3 sport 0x10\n"
                                "rule from reject ether-dst 01:00:00:00:00:00/01:00:00:00:00:00 "
                                "arp-sender-ip 10.0.0.1 arp-target-ip ! 10.0.0.0/8 "
                                "arp-sender-mac " MAC " proto icmpv6 ip-src ::1\n"
                                "owner vnet2";

START_TEST(test_fw_file_good_file_gives_one_apply_per_owner)
{
        struct fwfile f = {.name = "t.fw"};
        nb_batch *b = nb_batch_new();
        const Netbroker__FirewallApply *a;

        ck_assert_int_eq(fwfile_parse(&f, good_file, strlen(good_file), b), 3);
        ck_assert_msg(f.err[0] == '\0', "%s", f.err);
        ck_assert_uint_eq(nb_batch_size(b), 3);
        ck_assert_uint_eq(f.n_owners, 3);
        ck_assert_str_eq(f.owners[0], "vnet0");
        ck_assert_str_eq(f.owners[1], "guest1.net0");
        ck_assert_str_eq(f.owners[2], "vnet2");

        a = apply_op(b, 0);
        ck_assert_str_eq(a->owner, "vnet0");
        ck_assert_str_eq(a->ifname, "vnet0");
        ck_assert_int_eq(a->mode, NETBROKER__FW_MODE__FW_ENSURE);
        /* no-promisc and clean-traffic share libvirt's chain mac. */
        ck_assert_uint_eq(a->n_groups, 7);
        ck_assert_str_eq(a->groups[0]->name, "mac");
        ck_assert_uint_eq(a->groups[0]->n_rules, 5);
        ck_assert_str_eq(a->groups[1]->name, "ipv4-ip");
        ck_assert_str_eq(a->groups[6]->name, "rarp");

        a = apply_op(b, 1);
        ck_assert_str_eq(a->owner, "guest1.net0");
        ck_assert_str_eq(a->ifname, "tap1");
        ck_assert_int_eq(a->mode, NETBROKER__FW_MODE__FW_REPLACE);
        ck_assert_uint_eq(a->n_groups, 2);
        expect_group(a->groups[0], "rules", (const char *[]){"to accept ether-type 0x0806", NULL});
        expect_group(a->groups[1], "web",
                     (const char *[]){
                             "to accept ip-dst ! 2001:db8::/32 proto 6 dport 80-81",
                             "from drop ether-src ! 52:54:00:00:00:01 vlan 7 arp-op 2 sport 16 "
                             "icmp-type 3",
                             "from reject ether-dst 01:00:00:00:00:00/01:00:00:00:00:00 "
                             "arp-sender-mac " MAC " arp-sender-ip 10.0.0.1 arp-target-ip ! "
                             "10.0.0.0/8 ip-src ::1 proto 58",
                             NULL,
                     });

        a = apply_op(b, 2);
        ck_assert_str_eq(a->owner, "vnet2");
        ck_assert_uint_eq(a->n_groups, 0);
        fwfile_done(&f);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_fw_file_force_ensure_overrides_every_owner)
{
        struct fwfile f = {.name = "t.fw", .force_ensure = true};
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(fwfile_parse(&f, good_file, strlen(good_file), b), 3);
        for (size_t i = 0; i < 3; i++)
                ck_assert_int_eq(apply_op(b, i)->mode, NETBROKER__FW_MODE__FW_ENSURE);
        fwfile_done(&f);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_fw_file_bad_lines_are_reported_with_their_number)
{
        static const struct {
                const char *text;
                const char *where; /* the message starts with this */
                const char *why; /* and holds this */
        } cases[] = {
                {"", "t.fw:", "no 'owner'"},
                {"# nothing\n\n", "t.fw:", "no 'owner'"},
                {"rule from drop\n", "t.fw:1:", "before any 'owner'"},
                {"owner a\nfilter allow-arp\nrule sideways drop\n", "t.fw:3:", "direction"},
                {"owner a\nrule from frob\n", "t.fw:2:", "verdict"},
                {"owner a\nrule from drop color red\n", "t.fw:2:", "unknown match 'color'"},
                {"owner a\nrule from drop vlan 4096\n", "t.fw:2:", "vlan '4096'"},
                {"owner a\nrule from drop priority ! 3\n", "t.fw:2:", "cannot be negated"},
                {"owner a\nrule from drop sport 9-3\n", "t.fw:2:", "sport '9-3'"},
                {"owner a\nrule from drop dport -1\n", "t.fw:2:", "dport '-1'"},
                {"owner a\nrule from drop dport 0\n", "t.fw:2:", "dport '0'"},
                {"owner a\nrule from drop dport 1-65536\n", "t.fw:2:", "dport '1-65536'"},
                {"owner a\nrule from drop ip-src 10.0.0.0/33\n", "t.fw:2:", "ip-src"},
                {"owner a\nrule from drop ip-src 2001:db8::/129\n", "t.fw:2:", "ip-src"},
                {"owner a\nrule from drop arp-sender-ip ::1\n", "t.fw:2:", "arp-sender-ip"},
                {"owner a\nrule from drop ether-src 52:54:00:12:34\n", "t.fw:2:", "ether-src"},
                {"owner a\nrule from drop ether-type 0\n", "t.fw:2:", "ether-type"},
                {"owner a\nrule from drop proto tcp proto udp\n", "t.fw:2:", "given twice"},
                {"owner a\nrule from drop ip-src\n", "t.fw:2:", "needs a value"},
                {"owner a\nrule from drop ip-src !\n", "t.fw:2:", "needs a value"},
                {"owner a b\n", "t.fw:1:", "unexpected 'b'"},
                {"owner a on\n", "t.fw:1:", "'on' needs"},
                {"owner bad/name\n", "t.fw:1:", "bad owner name"},
                {"owner a on a234567890123456\n", "t.fw:1:", "longer than 15"},
                {"owner a\nowner b\n\nowner a\n", "t.fw:4:", "already defined at line 1"},
                {"owner a\ngroup g\ngroup g\n", "t.fw:3:", "group 'g' already"},
                {"owner a\ngroup no/slash\n", "t.fw:2:", "bad group name"},
                {"owner a\nfilter no-mac-spoofing\n", "t.fw:2:", "usage: filter"},
                {"owner a\nfilter no-such-filter\n", "t.fw:2:", "usage: filter"},
                {"owner a\nfilter clean-traffic " MAC " 2001:db8::1\n",
                 "t.fw:2:", "bad MAC or IPv4"},
                /* A group named as one of the filter's chains, with other
                 * options (a filter added twice is no clash). */
                {"owner a\ngroup mac\nfilter clean-traffic " MAC "\n",
                 "t.fw:3:", "already has a group"},
                {"owner a\nfirewall on\n", "t.fw:2:", "unknown statement 'firewall'"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                struct fwfile f = {.name = "t.fw"};
                nb_batch *b = nb_batch_new();
                int r = fwfile_parse(&f, cases[i].text, strlen(cases[i].text), b);

                ck_assert_msg(r == -EINVAL, "case %zu: %d", i, r);
                ck_assert_msg(strncmp(f.err, cases[i].where, strlen(cases[i].where)) == 0 &&
                                      strstr(f.err, cases[i].why),
                              "case %zu: '%s'", i, f.err);
                fwfile_done(&f);
                nb_batch_free(b);
        }
}
END_TEST

START_TEST(test_fw_file_nul_byte_is_an_error)
{
        static const char text[] = "owner a\nrule from\0 drop\n";
        struct fwfile f = {.name = "t.fw"};
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(fwfile_parse(&f, text, sizeof(text) - 1, b), -EINVAL);
        ck_assert_msg(strstr(f.err, "t.fw:2: NUL"), "%s", f.err);
        fwfile_done(&f);
        nb_batch_free(b);
}
END_TEST

TCase *fw_client_tcase(void)
{
        TCase *tc = tcase_create("fw-client");

        tcase_add_test(tc, test_no_mac_spoofing_returns_the_guests_mac_and_drops_the_rest);
        tcase_add_test(tc, test_no_ip_spoofing_returns_each_address_and_dhcp_and_drops_other_ipv4);
        tcase_add_test(tc, test_no_arp_spoofing_checks_sender_mac_ip_and_opcode);
        tcase_add_test(tc, test_no_promisc_lets_unicast_to_the_guest_and_multicast_through);
        tcase_add_test(tc, test_allow_dhcp_with_and_without_a_server);
        tcase_add_test(tc, test_allow_arp_accepts_arp_both_ways);
        tcase_add_test(tc, test_clean_traffic_is_libvirts_composition);
        tcase_add_test(tc, test_ruleset_and_strings_are_copied_into_the_batch);
        tcase_add_test(tc, test_empty_ruleset_is_an_owner_with_no_rules);
        tcase_add_test(tc, test_bad_group_and_owner_names_are_refused);
        tcase_add_test(tc, test_bad_rules_and_filter_arguments_add_nothing);
        tcase_add_test(tc, test_result_accessors_read_firewall_results);
        tcase_add_test(tc, test_fw_file_good_file_gives_one_apply_per_owner);
        tcase_add_test(tc, test_fw_file_force_ensure_overrides_every_owner);
        tcase_add_test(tc, test_fw_file_bad_lines_are_reported_with_their_number);
        tcase_add_test(tc, test_fw_file_nul_byte_is_an_error);
        return tc;
}
