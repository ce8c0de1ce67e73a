// SPDX-License-Identifier: LGPL-2.1-or-later
/* The fw text format's fields for libvirt's rule model (fwfile.h): every
 * new match, negations, quoted comments, group options and stock filters
 * by name with variables, read into a batch and checked on the wire form;
 * and the accessors of FirewallList's counters, on a reply built here. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwfile.h"
#include "internal.h"
#include "tests_unit.h"

static nb_batch *parse_ok(const char *text)
{
        struct fwfile f = {.name = "t.fw"};
        nb_batch *b = nb_batch_new();
        int r = fwfile_parse(&f, text, strlen(text), b);

        ck_assert_msg(r == 1, "%d: %s", r, f.err);
        fwfile_done(&f);
        return b;
}

static const Netbroker__FwGroup *group_of(const nb_batch *b, size_t g)
{
        const Netbroker__FirewallApply *a = b->req.ops[0]->firewall_apply;

        ck_assert_uint_lt(g, a->n_groups);
        return a->groups[g];
}

static const Netbroker__FwRule *rule_of(const nb_batch *b, size_t g, size_t i)
{
        const Netbroker__FwGroup *grp = group_of(b, g);

        ck_assert_uint_lt(i, grp->n_rules);
        return grp->rules[i];
}

START_TEST(test_fw_file_reads_every_new_match)
{
        nb_batch *b = parse_ok(
                "owner a\n"
                "rule from drop priority -250 vlan ! 7 vlan-encap ! arp arp-htype ! 6 "
                "arp-ptype ipv4 arp-target-mac ! ff:ff:ff:ff:ff:ff arp-gratuitous ! true\n"
                "rule to accept proto ! udp sport ! 10-20 dport ! 30 dscp ! 46\n"
                "rule to accept proto icmp icmp-type ! 8 icmp-code 0 comment \"no # echo, "
                "\\\"ok\\\"\"\n"
                "rule from reject proto tcp tcp-flags ! SYN,ACK,FIN,RST/SYN ip-src ! "
                "10.0.0.5-10.0.0.9 ip-dst 2001:db8::1-2001:db8::9\n"
                "rule from drop proto tcp tcp-flags ALL/NONE priority 1000\n"
                "rule from drop proto tcp tcp-flags 0x12/2 arp-ptype 0x1234 arp-htype 1\n");
        const Netbroker__FwRule *r = rule_of(b, 0, 0);

        ck_assert_int_eq(r->priority, -250);
        ck_assert(r->has_vlan_id && r->vlan_id == 7 && r->vlan_id_not);
        ck_assert(r->vlan_encap == 0x0806 && r->vlan_encap_not);
        ck_assert(r->arp_htype == 6 && r->arp_htype_not);
        ck_assert(r->arp_ptype == 0x0800 && !r->arp_ptype_not);
        ck_assert_str_eq(r->arp_target_mac, "ff:ff:ff:ff:ff:ff");
        ck_assert(r->arp_target_mac_not);
        ck_assert(r->arp_gratuitous && r->arp_gratuitous_not);
        r = rule_of(b, 0, 1);
        ck_assert(r->l4_proto == 17 && r->l4_proto_not);
        ck_assert(r->sport_min == 10 && r->sport_max == 20 && r->sport_not);
        ck_assert(r->dport_min == 30 && r->dport_max == 0 && r->dport_not);
        ck_assert(r->has_dscp && r->dscp == 46 && r->dscp_not);
        r = rule_of(b, 0, 2);
        ck_assert(r->has_icmp_type && r->icmp_type == 8 && r->icmp_not);
        ck_assert(r->has_icmp_code && r->icmp_code == 0);
        ck_assert_str_eq(r->comment, "no # echo, \"ok\"");
        r = rule_of(b, 0, 3);
        ck_assert_uint_eq(r->tcp_flags_mask, NB_TCP_SYN | NB_TCP_ACK | NB_TCP_FIN | NB_TCP_RST);
        ck_assert_uint_eq(r->tcp_flags, NB_TCP_SYN);
        ck_assert(r->tcp_flags_not);
        ck_assert_str_eq(r->ip_src, "10.0.0.5-10.0.0.9");
        ck_assert(r->ip_src_not);
        ck_assert_str_eq(r->ip_dst, "2001:db8::1-2001:db8::9");
        r = rule_of(b, 0, 4);
        ck_assert_uint_eq(r->tcp_flags_mask, 0x3f);
        ck_assert_uint_eq(r->tcp_flags, 0);
        ck_assert_int_eq(r->priority, 1000);
        r = rule_of(b, 0, 5);
        ck_assert_uint_eq(r->tcp_flags_mask, 0x12);
        ck_assert_uint_eq(r->tcp_flags, 2);
        ck_assert_uint_eq(r->arp_ptype, 0x1234);
        ck_assert_uint_eq(r->arp_htype, 1);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_fw_file_group_options_select_or_start_a_group)
{
        nb_batch *b = parse_ok("owner a\n"
                               "group ipv4 priority -700 guard ether-type ipv4\n"
                               "rule from accept ip-src 10.0.0.1\n"
                               "group top root priority 5\n"
                               "rule from drop\n"
                               "group ipv4 priority -700 guard ether-type ipv4 # again\n"
                               "rule to accept\n");
        const Netbroker__FwGroup *g = group_of(b, 0);

        ck_assert_str_eq(g->name, "ipv4");
        ck_assert_int_eq(g->priority, -700);
        ck_assert(!g->root);
        ck_assert_ptr_nonnull(g->guard);
        ck_assert_uint_eq(g->guard->ether_type, 0x0800);
        ck_assert_uint_eq(g->n_rules, 2);
        g = group_of(b, 1);
        ck_assert_str_eq(g->name, "top");
        ck_assert(g->root);
        ck_assert_int_eq(g->priority, 5);
        ck_assert_ptr_null(g->guard);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_fw_file_stock_filters_by_name_with_variables)
{
        nb_batch *b = parse_ok("owner a\n"
                               "filter clean-traffic MAC=52:54:00:12:34:56 "
                               "IP=192.0.2.10,192.0.2.11 IP=192.0.2.12\n"
                               "filter allow-ipv4\n");
        const Netbroker__FirewallApply *a = b->req.ops[0]->firewall_apply;
        size_t ips = 0;

        ck_assert_uint_gt(a->n_groups, 1);
        /* Every address became rules: each appears in some rule. */
        for (size_t g = 0; g < a->n_groups; g++)
                for (size_t i = 0; i < a->groups[g]->n_rules; i++)
                        ips += strcmp(a->groups[g]->rules[i]->ip_src, "192.0.2.12") == 0 ||
                               strcmp(a->groups[g]->rules[i]->arp_sender_ip, "192.0.2.12") == 0;
        ck_assert_uint_gt(ips, 0);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_fw_file_bad_new_fields_are_reported_with_their_line)
{
        static const struct {
                const char *text, *why;
        } cases[] = {
                {"owner a\nrule from drop priority 1001\n", "priority '1001'"},
                {"owner a\nrule from drop priority --3\n", "priority '--3'"},
                {"owner a\nrule from drop dscp 64\n", "dscp '64'"},
                {"owner a\nrule from drop icmp-code ! 1\n", "cannot be negated"},
                {"owner a\nrule from drop tcp-flags SYN\n", "tcp-flags 'SYN'"},
                {"owner a\nrule from drop tcp-flags SYN/ACK\n", "tcp-flags 'SYN/ACK'"},
                {"owner a\nrule from drop tcp-flags BOGUS/SYN\n", "tcp-flags 'BOGUS/SYN'"},
                {"owner a\nrule from drop arp-gratuitous yes\n", "arp-gratuitous 'yes'"},
                {"owner a\nrule from drop ip-src 10.0.0.1-2001:db8::1\n", "ip-src"},
                {"owner a\nrule from drop arp-target-mac 1:2\n", "arp-target-mac '1:2'"},
                {"owner a\nrule from drop comment \"open\n", "quote is not closed"},
                {"owner a\nrule from drop comment \"a\"b\n", "blank must follow"},
                {"owner a\ngroup g priority 2000\n", "group priority"},
                {"owner a\ngroup g colour red\n", "unexpected 'colour'"},
                {"owner a\ngroup g guard vlan\n", "'vlan' needs a value"},
                {"owner a\ngroup g priority 1\ngroup g priority 2\n", "with other options"},
                {"owner a\nfilter no-such-stock MAC=52:54:00:12:34:56\n", "unknown filter"},
                {"owner a\nfilter clean-traffic 52:54:00:12:34:56 IP=1.2.3.4\n",
                 "is not VAR=VALUE"},
                {"owner a\nfilter clean-traffic MAC=nonsense\n",
                 "filter clean-traffic: MAC='nonsense' is not a MAC address"},
                {"owner a\nfilter clean-traffic MAC=52:54:00:12:34:56\n",
                 "filter clean-traffic: variable IP is not given"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                struct fwfile f = {.name = "t.fw"};
                nb_batch *b = nb_batch_new();
                int r = fwfile_parse(&f, cases[i].text, strlen(cases[i].text), b);

                ck_assert_msg(r == -EINVAL, "case %zu: %d", i, r);
                ck_assert_msg(strncmp(f.err, "t.fw:", 5) == 0 && strstr(f.err, cases[i].why),
                              "case %zu: '%s'", i, f.err);
                fwfile_done(&f);
                nb_batch_free(b);
        }
}
END_TEST

/* Variables after one with nearly all the value slots each still need a
 * slot for their end mark: refused, not written past the array (this
 * overflowed the stack by one slot, seen under ASan). */
START_TEST(test_fw_file_filter_values_and_variables_are_bounded)
{
        static const char head[] = "owner a\nfilter clean-traffic MAC=", tail[] = " B= C= D=\n";
        size_t len = sizeof(head) + 510 * 18 + sizeof(tail);
        char *text = malloc(len), *t = text;
        struct fwfile f = {.name = "t.fw"};
        nb_batch *b = nb_batch_new();
        int r;

        ck_assert_ptr_nonnull(text);
        t += sprintf(t, "%s", head);
        for (int i = 0; i < 510; i++)
                t += sprintf(t, "%s52:54:00:00:%02x:%02x", i ? "," : "", i >> 8, i & 0xff);
        t += sprintf(t, "%s", tail);
        ck_assert_uint_lt((size_t)(t - text), len);
        r = fwfile_parse(&f, text, strlen(text), b);
        ck_assert_msg(r == -EINVAL, "%d", r);
        ck_assert_msg(strstr(f.err, "more than 510 values and variables"), "'%s'", f.err);
        fwfile_done(&f);
        nb_batch_free(b);
        free(text);
}
END_TEST

START_TEST(test_counter_accessors_read_each_owners_rules)
{
        Netbroker__FwRuleCounter c0 = NETBROKER__FW_RULE_COUNTER__INIT;
        Netbroker__FwRuleCounter c1 = NETBROKER__FW_RULE_COUNTER__INIT;
        Netbroker__FwRuleCounter *counters[] = {&c0, &c1};
        Netbroker__FwOwner o0 = NETBROKER__FW_OWNER__INIT, o1 = NETBROKER__FW_OWNER__INIT;
        Netbroker__FwOwner *owners[] = {&o0, &o1};
        Netbroker__FirewallListResult fl = NETBROKER__FIREWALL_LIST_RESULT__INIT;
        Netbroker__FirewallApplyResult fa = NETBROKER__FIREWALL_APPLY_RESULT__INIT;
        Netbroker__Result r0 = NETBROKER__RESULT__INIT, r1 = NETBROKER__RESULT__INIT;
        Netbroker__Result *results[] = {&r0, &r1};
        Netbroker__Reply reply = NETBROKER__REPLY__INIT;
        Netbroker__ServerMessage msg = NETBROKER__SERVER_MESSAGE__INIT;
        nb_results res = {.msg = &msg};
        nb_fw_counter c = NB_FW_COUNTER_INIT;

        c0.group = "web";
        c0.direction = NETBROKER__FW_DIRECTION__FW_TO_GUEST;
        c0.index = 1;
        c0.packets = 5;
        c0.bytes = 300;
        c0.text = "in accept";
        c1.direction = NETBROKER__FW_DIRECTION__FW_FROM_GUEST;
        c1.text = "jump web";
        o1.counters = counters;
        o1.n_counters = 2;
        fl.owners = owners;
        fl.n_owners = 2;
        r0.out_case = NETBROKER__RESULT__OUT_FIREWALL_LIST;
        r0.firewall_list = &fl;
        r1.out_case = NETBROKER__RESULT__OUT_FIREWALL;
        r1.firewall = &fa;
        reply.results = results;
        reply.n_results = 2;
        msg.msg_case = NETBROKER__SERVER_MESSAGE__MSG_REPLY;
        msg.reply = &reply;

        ck_assert_uint_eq(nb_result_fw_counter_count(&res, 0, 0), 0);
        ck_assert_uint_eq(nb_result_fw_counter_count(&res, 0, 1), 2);
        ck_assert_uint_eq(nb_result_fw_counter_count(&res, 0, 2), 0);
        ck_assert_uint_eq(nb_result_fw_counter_count(&res, 1, 0), 0);
        ck_assert_uint_eq(nb_result_fw_counter_count(&res, 5, 0), 0);
        ck_assert_int_eq(nb_result_fw_counter_at(&res, 0, 1, 0, &c), 0);
        ck_assert_str_eq(c.group, "web");
        ck_assert_int_eq(c.direction, NB_FW_TO_GUEST);
        ck_assert_uint_eq(c.index, 1);
        ck_assert_uint_eq(c.packets, 5);
        ck_assert_uint_eq(c.bytes, 300);
        ck_assert_str_eq(c.text, "in accept");
        ck_assert_int_eq(nb_result_fw_counter_at(&res, 0, 1, 1, &c), 0);
        ck_assert_str_eq(c.group, "");
        ck_assert_int_eq(c.direction, NB_FW_FROM_GUEST);
        ck_assert_str_eq(c.text, "jump web");
        ck_assert_int_eq(nb_result_fw_counter_at(&res, 0, 1, 2, &c), -ERANGE);
        ck_assert_int_eq(nb_result_fw_counter_at(&res, 0, 0, 0, &c), -ERANGE);
        ck_assert_int_eq(nb_result_fw_counter_at(&res, 0, 2, 0, &c), -ERANGE);
        ck_assert_int_eq(nb_result_fw_counter_at(&res, 1, 0, 0, &c), -ENODATA);
        ck_assert_int_eq(nb_result_fw_counter_at(&res, 2, 0, 0, &c), -ERANGE);
        ck_assert_int_eq(nb_result_fw_counter_at(&res, 0, 1, 0, NULL), 0);
}
END_TEST

/* The request: FirewallList with counters set; the plain one without. */
START_TEST(test_list_counters_asks_for_counters)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_firewall_list(b), 0);
        ck_assert_int_eq(nb_batch_firewall_list_counters(b), 0);
        ck_assert_int_eq(b->req.ops[0]->op_case, NETBROKER__OP__OP_FIREWALL_LIST);
        ck_assert(!b->req.ops[0]->firewall_list->counters);
        ck_assert_int_eq(b->req.ops[1]->op_case, NETBROKER__OP__OP_FIREWALL_LIST);
        ck_assert(b->req.ops[1]->firewall_list->counters);
        ck_assert_int_eq(nb_batch_firewall_list_counters(NULL), -EINVAL);
        nb_batch_free(b);
}
END_TEST

TCase *fwfile_tcase(void)
{
        TCase *tc = tcase_create("fw-file");

        tcase_add_test(tc, test_fw_file_reads_every_new_match);
        tcase_add_test(tc, test_fw_file_group_options_select_or_start_a_group);
        tcase_add_test(tc, test_fw_file_stock_filters_by_name_with_variables);
        tcase_add_test(tc, test_fw_file_bad_new_fields_are_reported_with_their_line);
        tcase_add_test(tc, test_fw_file_filter_values_and_variables_are_bounded);
        tcase_add_test(tc, test_counter_accessors_read_each_owners_rules);
        tcase_add_test(tc, test_list_counters_asks_for_counters);
        return tc;
}
