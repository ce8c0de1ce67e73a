// SPDX-License-Identifier: LGPL-2.1-or-later
/* The stock filters with each allocation failing in turn: the library's
 * own sources linked in (tests/alloc_hook.h wraps them at link time), so
 * a filter that runs out of memory half-way must leave the ruleset as it
 * was (the chains it started gone, the rules it appended to chains that
 * were there taken back) and nothing allocated behind. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_hook.h"
#include "internal.h"

#define MAC "52:54:00:12:34:56"

/* The ruleset as the helper would receive it, packed (not counted). */
static uint8_t *packed(const nb_fw_ruleset *rs, size_t *ret_len)
{
        nb_batch *b;
        uint8_t *buf;

        nbt_alloc_pause();
        b = nb_batch_new();
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "vnet0", rs, NB_FW_REPLACE), 0);
        *ret_len = protobuf_c_message_get_packed_size(&b->req.base);
        buf = malloc(*ret_len ? *ret_len : 1);
        ck_assert_ptr_nonnull(buf);
        protobuf_c_message_pack(&b->req.base, buf);
        nb_batch_free(b);
        nbt_alloc_resume();
        return buf;
}

/* Chains there already: ipv4 (allow-dhcp) and mac (no-mac-spoofing), which
 * clean-traffic and no-promisc append to, and a group of the caller's. */
static nb_fw_ruleset *populated(void)
{
        static const char *const mac[] = {MAC, NULL};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();

        ck_assert_ptr_nonnull(rs);
        ck_assert_int_eq(nb_fw_add_filter(rs, "allow-dhcp", NULL, 0), 0);
        ck_assert_int_eq(
                nb_fw_add_filter(rs, "no-mac-spoofing", (nb_fw_var[]){NB_FW_VAR("MAC", mac)}, 1),
                0);
        ck_assert_int_eq(nb_fw_group(rs, "mine"), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &(nb_fw_rule){.size = sizeof(nb_fw_rule),
                                                          .verdict = NB_FW_DROP}),
                         0);
        return rs;
}

static int add_clean_traffic(nb_fw_ruleset *rs)
{
        static const char *const ips[] = {"10.0.0.1", "10.0.0.2", NULL};

        return nb_fw_add_clean_traffic(rs, MAC, ips);
}

static int add_no_promisc(nb_fw_ruleset *rs)
{
        return nb_fw_add_no_promisc(rs, MAC);
}

static int add_gateway(nb_fw_ruleset *rs)
{
        static const char *const mac[] = {MAC, NULL}, *const ips[] = {"10.0.0.1", NULL},
                                 *const gw[] = {"52:54:00:00:00:01", NULL};

        return nb_fw_add_filter(rs, "clean-traffic-gateway",
                                (nb_fw_var[]){NB_FW_VAR("MAC", mac), NB_FW_VAR("IP", ips),
                                              NB_FW_VAR("GATEWAY_MAC", gw)},
                                3);
}

static const struct {
        const char *name;
        int (*add)(nb_fw_ruleset *rs);
} calls[] = {
        {"clean-traffic", add_clean_traffic},
        {"no-promisc", add_no_promisc},
        {"clean-traffic-gateway", add_gateway},
};

START_TEST(test_every_allocation_failing_leaves_the_ruleset_as_it_was)
{
        unsigned long n;

        for (n = 1;; n++) {
                nb_fw_ruleset *rs = populated();
                size_t len_before, len_after, live;
                uint8_t *before = packed(rs, &len_before), *after;
                int r;

                live = nbt_alloc_outstanding();
                nbt_alloc_arm(n);
                r = calls[_i].add(rs);
                nbt_alloc_disarm();
                if (!nbt_alloc_failed()) {
                        ck_assert_msg(r == 0, "%s: %d with no allocation failing", calls[_i].name,
                                      r);
                        free(before);
                        nb_fw_ruleset_free(rs);
                        break;
                }
                ck_assert_msg(r == -ENOMEM, "%s, allocation %lu failing: %d", calls[_i].name, n, r);
                ck_assert_msg(nbt_alloc_outstanding() == live,
                              "%s, allocation %lu: %zu left behind", calls[_i].name, n,
                              nbt_alloc_outstanding() - live);
                after = packed(rs, &len_after);
                ck_assert_msg(len_after == len_before && memcmp(before, after, len_before) == 0,
                              "%s, allocation %lu failing changed the ruleset", calls[_i].name, n);
                /* And it still works once memory is back. */
                ck_assert_int_eq(calls[_i].add(rs), 0);
                free(before);
                free(after);
                nb_fw_ruleset_free(rs);
        }
        ck_assert_uint_gt(n, 3); /* the failures were reached */
}
END_TEST

/* A refusal says why without allocating (nb_last_error()'s buffer is the
 * thread's own): it must be told even when memory is what ran out. */
START_TEST(test_refusals_say_why_and_allocate_nothing)
{
        static const char *const bad_ips[] = {"10.0.0.1", "10.0.0", NULL};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        nb_rate zero = {0};
        char ref[4];
        struct {
                int r;
                const char *why;
        } got[6];

        ck_assert_ptr_nonnull(rs);
        ck_assert_ptr_nonnull(b);
        nbt_alloc_arm(0); /* count, fail nothing */
        got[0].r = nb_batch_tap_create(b, "abcdefghijklmnop", NULL);
        got[0].why = strdupa(nb_last_error());
        got[1].r = nb_batch_bandwidth_set(b, "tap0", NULL, &zero);
        got[1].why = strdupa(nb_last_error());
        got[2].r = nb_batch_firewall_remove(b, "a b");
        got[2].why = strdupa(nb_last_error());
        got[3].r = nb_fw_add_clean_traffic(rs, "zz", NULL);
        got[3].why = strdupa(nb_last_error());
        got[4].r = nb_fw_add_no_arp_spoofing(rs, MAC, bad_ips);
        got[4].why = strdupa(nb_last_error());
        got[5].r = nb_ref(123, ref, sizeof(ref));
        got[5].why = strdupa(nb_last_error());
        ck_assert_uint_eq(nbt_alloc_count(), 0);
        nbt_alloc_disarm();
        ck_assert_int_eq(got[0].r, -EINVAL);
        ck_assert_str_eq(got[0].why,
                         "nb_batch_tap_create: name 'abcdefghijklmnop' is 16 bytes; at most 15");
        ck_assert_int_eq(got[1].r, -EINVAL);
        ck_assert_str_eq(got[1].why, "nb_batch_bandwidth_set: out: size is 0: initialise an "
                                     "nb_rate with NB_RATE_INIT");
        ck_assert_int_eq(got[2].r, -EINVAL);
        ck_assert_str_eq(got[2].why, "nb_batch_firewall_remove: owner 'a b': byte 1 is not a "
                                     "letter, a digit or one of _.:@-");
        ck_assert_int_eq(got[3].r, -EINVAL);
        ck_assert_str_eq(got[3].why, "nb_fw_add_clean_traffic: mac 'zz' is not a MAC address "
                                     "(aa:bb:cc:dd:ee:ff)");
        ck_assert_int_eq(got[4].r, -EINVAL);
        ck_assert_str_eq(got[4].why, "nb_fw_add_no_arp_spoofing: ips[1] '10.0.0' is not an IPv4 "
                                     "address or prefix");
        ck_assert_int_eq(got[5].r, -ERANGE);
        ck_assert_str_eq(got[5].why, "nb_ref: len 4 is too small for 'op:123' and its NUL");
        nb_batch_free(b);
        nb_fw_ruleset_free(rs);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("fw-filters-alloc");
        TCase *tc = tcase_create("fw-filters-alloc");
        SRunner *sr;
        int failed;

        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, test_every_allocation_failing_leaves_the_ruleset_as_it_was, 0,
                            (int)(sizeof(calls) / sizeof(*calls)));
        tcase_add_test(tc, test_refusals_say_why_and_allocate_nothing);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
