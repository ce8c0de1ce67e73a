// SPDX-License-Identifier: LGPL-2.1-or-later
/* The one MAC address parser (proto/mac.c) and its users, the helper's
 * interface ops (nbp_mac_parse), its firewall (nbd_fw_parse_mac, with an
 * optional mask) and the client library's firewall builder: which forms are
 * taken and which are refused. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "firewall.h"
#include "mac.h"
#include "netbroker.h"
#include "tests_unit.h"

/* Forms strtoul/sscanf("%2x") once let through (a sign, a blank, one
 * digit) and forms of the wrong shape; each is refused by both users of
 * the parser, the interface ops and the firewall (with and without a
 * mask), and leaves the output as it was. */
static const char *const bad_macs[] = {
        "+2:+3:+4:+5:+6:+7",  "+2:54:00:00:00:01",  "-1:-1:-1:-1:-1:-1",
        "52:54:00:00:00:-1",  " 1:02:03:04:05:06",  "01:02:03:04:05: 6",
        "1:2:3:4:5:6",        "001:02:03:04:05:6",  "01:02:03:04:05:06:07",
        "01:02:03:04:05:06x", "01:02:03:04:05:06 ", "01:02:03:04:05",
        "01-02-03-04-05-06",  "0102.0304.0506",     "0x:02:03:04:05:06",
        "01:02:03:04:05:0g",  "01::02:03:04:05:6",  "",
};

START_TEST(test_mac_parser_takes_six_hex_pairs_and_nothing_else)
{
        const char *s = bad_macs[_i];
        uint8_t mac[6] = {1, 2, 3, 4, 5, 6}, was[6] = {1, 2, 3, 4, 5, 6};
        struct nbd_fw_mac fw = {0};
        char with_mask[64];

        ck_assert_msg(nbp_mac_parse(s, mac) == -EINVAL, "'%s' was taken as a MAC address", s);
        ck_assert_mem_eq(mac, was, 6);
        ck_assert_msg(nbd_fw_parse_mac(s, &fw) == -EINVAL, "the firewall took '%s'", s);
        snprintf(with_mask, sizeof(with_mask), "%s/ff:ff:ff:ff:ff:ff", s);
        ck_assert_msg(nbd_fw_parse_mac(with_mask, &fw) == -EINVAL, "the firewall took '%s'",
                      with_mask);
        snprintf(with_mask, sizeof(with_mask), "52:54:00:00:00:01/%s", s);
        ck_assert_msg(nbd_fw_parse_mac(with_mask, &fw) == -EINVAL, "the firewall took '%s'",
                      with_mask);
        ck_assert(!fw.set);
        /* The client library's builder, which parses with the same code. */
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        ck_assert_ptr_nonnull(rs);
        ck_assert_msg(nb_fw_add_no_mac_spoofing(rs, s) == -EINVAL, "the client library took '%s'",
                      s);
        nb_fw_ruleset_free(rs);
}
END_TEST

START_TEST(test_mac_parser_accepts_both_cases)
{
        const uint8_t want[6] = {0x52, 0x54, 0x00, 0xab, 0xcd, 0xef};
        uint8_t mac[6];
        struct nbd_fw_mac fw;

        ck_assert_int_eq(nbp_mac_parse("52:54:00:ab:cd:ef", mac), 0);
        ck_assert_mem_eq(mac, want, 6);
        ck_assert_int_eq(nbp_mac_parse("52:54:00:AB:CD:EF", mac), 0);
        ck_assert_mem_eq(mac, want, 6);
        ck_assert_int_eq(nbp_mac_parse("52:54:00:aB:Cd:eF", mac), 0);
        ck_assert_mem_eq(mac, want, 6);
        ck_assert_int_eq(nbp_mac_parse("ff:FF:00:00:00:00", mac), 0);
        ck_assert_mem_eq(mac, ((uint8_t[6]){0xff, 0xff, 0, 0, 0, 0}), 6);
        /* The firewall's mask is parsed the same way and applied. */
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:AB:CD:EF/FF:ff:FF:00:00:00", &fw), 0);
        ck_assert_mem_eq(fw.addr, ((uint8_t[6]){0x52, 0x54, 0, 0, 0, 0}), 6);
        ck_assert_mem_eq(fw.mask, ((uint8_t[6]){0xff, 0xff, 0xff, 0, 0, 0}), 6);
        /* Only the first len bytes count for nbp_mac_parse_n. */
        ck_assert_int_eq(nbp_mac_parse_n("52:54:00:ab:cd:ef/junk", 17, mac), 0);
        ck_assert_mem_eq(mac, want, 6);
        ck_assert_int_eq(nbp_mac_parse_n("52:54:00:ab:cd:ef", 16, mac), -EINVAL);
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        ck_assert_ptr_nonnull(rs);
        ck_assert_int_eq(nb_fw_add_no_mac_spoofing(rs, "52:54:00:aB:Cd:eF"), 0);
        nb_fw_ruleset_free(rs);
}
END_TEST

TCase *mac_tcase(void)
{
        TCase *tc = tcase_create("mac");

        tcase_add_loop_test(tc, test_mac_parser_takes_six_hex_pairs_and_nothing_else, 0,
                            sizeof(bad_macs) / sizeof(*bad_macs));
        tcase_add_test(tc, test_mac_parser_accepts_both_cases);
        return tc;
}
