// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl as a script sees it: exit statuses and JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

/* Run netbrokerctl with a spawned helper and the given config; returns its
 * exit status, output in *out. */
static int ctl(const char *conf, char **out, const char *a1, const char *a2, const char *a3,
               const char *a4, const char *a5)
{
        const char *argv[] = {
                NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf, "--json", a1, a2, a3, a4,
                a5,          NULL};

        return tu_run(argv, out);
}

START_TEST(test_ctl_exit_statuses_are_what_scripts_rely_on)
{
        char *conf = tu_config(TU_ALLOW);
        char *out = NULL;

        tu_private_netns();
        ck_assert_int_eq(ctl(conf, &out, "ping", NULL, NULL, NULL, NULL), 0);
        ck_assert_msg(strstr(out, "\"ok\":true"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "exec", "--", "/bin/true", NULL, NULL), 0);
        free(out);
        /* The program failed: 1, with its exit code in the JSON. */
        ck_assert_int_eq(ctl(conf, &out, "exec", "--", "/bin/false", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "\"exit_code\":1"), "%s", out);
        free(out);
        /* Refused by the allow-list: an op failure, 1. */
        ck_assert_int_eq(ctl(conf, &out, "exec", "--", "/usr/bin/id", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "not on the allow-list"), "%s", out);
        free(out);
        /* Usage errors: 2, even before any helper is reached. */
        ck_assert_int_eq(ctl(conf, &out, "frobnicate", NULL, NULL, NULL, NULL), 2);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "exec", "--timeout", "soon", "--", "/bin/true"), 2);
        free(out);
        /* No helper to be had: 3. */
        {
                const char *argv[] = {NB_TEST_CTL, "--spawn", "/nonexistent/netbrokerd", "ping",
                                      NULL};
                ck_assert_int_eq(tu_run(argv, &out), 3);
                free(out);
        }
        free(conf);
}
END_TEST

START_TEST(test_ctl_link_create_and_names_in_json)
{
        char *conf = tu_config(TU_ALLOW);
        char *out = NULL;

        tu_private_netns();
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "bridge", "nbbr%d", NULL), 0);
        ck_assert_msg(strstr(out, "\"ifname\":\"nbbr0\""), "%s", out);
        free(out);
        ck_assert(tu_link_exists("nbbr0"));
        ck_assert_int_eq(ctl(conf, &out, "link", "set", "nbbr0", "--mtu", "1400"), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "names", NULL, NULL, NULL, NULL), 0);
        /* Each netbrokerctl spawns its own helper: this one rebuilt its
         * bitmap from the kernel (nbbr0 used) with a fresh cursor. */
        ck_assert_msg(strstr(out, "{\"prefix\":\"nbbr\",\"cursor\":0,\"used\":[0]}"), "%s", out);
        free(out);
        /* An existing name: the op fails, 1, with the reason. */
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "bridge", "nbbr0", NULL), 1);
        ck_assert_msg(strstr(out, "already exists"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "link", "delete", "nbbr0", NULL, NULL), 0);
        free(out);
        ck_assert(!tu_link_exists("nbbr0"));
        free(conf);
}
END_TEST

/* link list and bw show come from the helper (LinkList, BandwidthShow). */
START_TEST(test_ctl_link_list_and_bw_show_read_through_the_helper)
{
        char *conf = tu_config(TU_ALLOW);
        char *out = NULL, want[256];
        const char *text[] = {NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf,
                              "bw",        "show",    "ct0",          NULL};

        tu_private_netns();
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "tap", "ct0", NULL), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "link", "list", "ct0", NULL, NULL), 0);
        snprintf(want, sizeof(want),
                 "[{\"ifname\":\"ct0\",\"ifindex\":%s,\"kind\":\"tap\",\"kind_name\":\"tun\","
                 "\"mac\":\"%s\",\"mtu\":1500,\"up\":false,\"master\":\"\",\"owner_uid\":0,"
                 "\"made_by_helper\":true}]\n",
                 tu_link_get("ct0", "ifindex"), tu_link_get("ct0", "address"));
        ck_assert_str_eq(out, want);
        free(out);
        /* Every interface: lo, unmarked, too. */
        ck_assert_int_eq(ctl(conf, &out, "link", "list", NULL, NULL, NULL), 0);
        ck_assert_msg(strstr(out, "{\"ifname\":\"lo\",\"ifindex\":1,\"kind\":\"other\"") &&
                              strstr(out, "\"owner_uid\":null,\"made_by_helper\":false") &&
                              strstr(out, "\"ifname\":\"ct0\""),
                      "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "link", "list", "ctnone", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "\"status\":19,"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "bw", "set", "ct0", "--in-average", "100"), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "bw", "show", "ct0", NULL, NULL), 0);
        ck_assert_msg(strstr(out, "\"inbound\":{\"mechanism\":\"htb") &&
                              strstr(out, "\"average\":100,\"peak\":100,") &&
                              strstr(out, "\"outbound\":null}"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(tu_run(text, &out), 0);
        ck_assert_msg(strstr(out, "inbound   average 100 kB/s, peak 100 kB/s") &&
                              strstr(out, "outbound  none"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "bw", "clear", "ct0", NULL, NULL), 0);
        free(out);
        ck_assert_int_eq(tu_run(text, &out), 0);
        ck_assert_msg(strstr(out, "inbound   none") && strstr(out, "outbound  none"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "bw", "show", "ctnone", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "\"status\":19,"), "%s", out);
        free(out);
        free(conf);
}
END_TEST

/* fw apply with the new fields, fw list --counters and fw show: what a
 * script reads, in JSON and as text. */
START_TEST(test_ctl_fw_counters_and_show_print_the_rules_in_libvirts_terms)
{
        char *conf = tu_config(TU_ALLOW);
        char path[] = "/tmp/nbctl-fw-XXXXXX", *out = NULL;
        const char rules[] = "owner g0 on ctfw0\n"
                             "group ssh priority -100\n"
                             "rule to accept proto tcp dport ! 22 comment \"not ssh\"\n"
                             "rule from drop priority 7 ether-type ! ipv4\n";
        const char *show[] = {NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf,
                              "fw",        "show",    "g0",           NULL};
        const char *list[] = {NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf,
                              "fw",        "list",    "--counters",   NULL};
        int fd = mkstemp(path);

        tu_private_netns();
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, rules, strlen(rules)), (int)strlen(rules));
        close(fd);
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "tap", "ctfw0", NULL), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "apply", path, NULL, NULL), 0);
        ck_assert_msg(strstr(out, "\"owner\":\"g0\",\"status\":0"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "list", "--counters", NULL, NULL), 0);
        ck_assert_msg(strstr(out, "{\"group\":\"ssh\",\"direction\":\"to\",\"index\":0,"
                                  "\"packets\":0,\"bytes\":0,\"text\":\"comment='not ssh' in "
                                  "accept ip/ipv6 protocol='tcp' "
                                  "dstportstart='!22'\"}"),
                      "%s", out);
        ck_assert_msg(strstr(out, "\"direction\":\"from\",\"index\":0,\"packets\":0,\"bytes\":0,"
                                  "\"text\":\"out drop priority='7' mac protocolid='!ipv4'\"}"),
                      "%s", out);
        free(out);
        /* Without --counters, no counters. */
        ck_assert_int_eq(ctl(conf, &out, "fw", "list", NULL, NULL, NULL), 0);
        ck_assert_msg(strstr(out, "\"owner\":\"g0\"") && !strstr(out, "counters"), "%s", out);
        free(out);
        ck_assert_int_eq(tu_run(list, &out), 0);
        ck_assert_msg(strstr(out, "  to/ssh                         0          0            0  "
                                  "comment='not ssh' in accept"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(tu_run(show, &out), 0);
        ck_assert_msg(strstr(out, "g0 on ctfw0, ") &&
                              strstr(out, "  from/ssh                       0  out drop "
                                          "priority='7' mac protocolid='!ipv4'\n"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "show", "g0", NULL, NULL), 0);
        ck_assert_msg(strncmp(out, "{\"owner\":\"g0\",\"ifname\":\"ctfw0\"", 30) == 0 &&
                              strstr(out, "\"counters\":[{"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "show", "nobody", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "\"status\":2,"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "list", "--countres", NULL, NULL), 2);
        free(out);
        unlink(path);
        free(conf);
}
END_TEST

Suite *ctl_suite(void)
{
        Suite *s = suite_create("netbrokerctl");
        TCase *tc = tcase_create("ctl");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_ctl_exit_statuses_are_what_scripts_rely_on);
        tcase_add_test(tc, test_ctl_link_create_and_names_in_json);
        tcase_add_test(tc, test_ctl_link_list_and_bw_show_read_through_the_helper);
        tcase_add_test(tc, test_ctl_fw_counters_and_show_print_the_rules_in_libvirts_terms);
        suite_add_tcase(s, tc);
        return s;
}
