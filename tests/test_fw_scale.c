// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall's table read once per batch, and its rules not at all
 * while the generation mark says nobody has touched them (helper/fw_kernel.c,
 * struct nbd_fw_txn's intact): what the mark lets ensure skip, and every way
 * the mark must stop being believed. The figures at thousands of guests are
 * the bench's (netbroker-bench restart --scale); these stay small. */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_table.h"
#include "testutil.h"
#include "tests.h"

#define FW_ALLOW TU_ALLOW "exec_allow = /usr/sbin/nft\n"
#define GUESTS 40

static nb_results *submit_ok(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;
        int r = nb_submit(c, b, &res);
        long bad;

        ck_assert_msg(r == 0, "nb_submit: %s (%s)", strerror(-r), nb_conn_error(c));
        nb_batch_free(b);
        bad = nb_results_first_error(res);
        ck_assert_msg(bad < 0, "op %ld failed: %s", bad,
                      bad < 0 ? "" : nb_result_message(res, (size_t)bad));
        return res;
}

static uint64_t stat_of(nb_conn *c, const char *name)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        uint64_t v = 0;

        nb_batch_stats(b);
        res = submit_ok(c, b);
        ck_assert_msg(nb_result_stat(res, 0, name, &v) == 0, "no counter %s", name);
        nb_results_free(res);
        return v;
}

/* Guest i: no-promisc and clean-traffic on its own veth sc%03d; variant
 * changes its address, so that its hash changes. */
static void add_guest(nb_batch *b, int i, int variant, nb_fw_mode mode)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        char name[IFNAMSIZ], mac[18], ip[16];

        snprintf(name, sizeof(name), "sc%03d", i);
        snprintf(mac, sizeof(mac), "52:54:00:02:%02x:%02x", (i >> 8) & 0xff, i & 0xff);
        snprintf(ip, sizeof(ip), "10.2.%d.%d", variant, i % 250 + 1);
        ck_assert_int_eq(nb_fw_add_no_promisc(rs, mac), 0);
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, mac, (const char *const[]){ip, NULL}), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, name, name, rs, mode), 0);
        nb_fw_ruleset_free(rs);
}

/* Apply guests [0, n) in one batch; the number reported unchanged. */
static unsigned apply(nb_conn *c, int n, nb_fw_mode mode, int changed_one)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        unsigned unchanged = 0;

        for (int i = 0; i < n; i++)
                add_guest(b, i, i == changed_one ? 9 : 0, mode);
        res = submit_ok(c, b);
        for (int i = 0; i < n; i++) {
                const char *hash;
                bool same = false;
                unsigned rules;
                ck_assert_int_eq(nb_result_firewall(res, (size_t)i, &hash, &same, &rules), 0);
                ck_assert_uint_eq(rules, 23);
                unchanged += same;
        }
        nb_results_free(res);
        return unchanged;
}

static bool unchanged_one(nb_conn *c, int i)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        const char *hash;
        bool same = false;
        unsigned rules;

        add_guest(b, i, 0, NB_FW_ENSURE);
        res = submit_ok(c, b);
        ck_assert_int_eq(nb_result_firewall(res, 0, &hash, &same, &rules), 0);
        nb_results_free(res);
        return same;
}

static uint32_t kernel_gen(void)
{
        struct nbd_fw *fw = NULL;
        uint32_t gen = 0;

        ck_assert_int_eq(nbd_fw_open(NULL, &fw), 0);
        ck_assert_int_eq(nbd_fw_read_gen(fw, &gen), 0);
        nbd_fw_close(fw);
        return gen;
}

/* The generation the mark names; false when there is no mark. */
static bool mark_of(uint32_t *ret)
{
        char *out = tu_sh("nft list chain arp " NBD_FW_GEN_TABLE " " NBD_FW_GEN_CHAIN
                          " 2>/dev/null || true");
        const char *at = strstr(out, "comment \"netbroker generation ");
        bool ok = at && sscanf(at, "comment \"netbroker generation %" SCNu32, ret) == 1;

        free(out);
        return ok;
}

static nb_conn *restart(nb_conn *c)
{
        nb_close(c);
        return tu_spawn(FW_ALLOW);
}

static nb_conn *setup(void)
{
        tu_private_netns();
        tu_veths("sc", GUESTS);
        return tu_spawn(FW_ALLOW);
}

START_TEST(test_commit_marks_the_generation_it_makes)
{
        nb_conn *c = setup();
        uint32_t mark = 0;

        ck_assert(!mark_of(&mark));
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        ck_assert_msg(mark_of(&mark), "no generation mark after the first commit");
        ck_assert_uint_eq(mark, kernel_gen());
        /* A replace over a marked table marks it again. */
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, 3), 0);
        ck_assert(mark_of(&mark));
        ck_assert_uint_eq(mark, kernel_gen());
        nb_close(c);
}
END_TEST

/* The mark is what ensure believes instead of reading the rules: here it
 * is forged, in the same nft transaction that flushes an owner's chain,
 * and ensure (and FirewallList) take the comment's word. This is the
 * trust the mark is: only a commit that knew the table whole writes it. */
START_TEST(test_ensure_believes_a_current_mark_and_reads_no_rule)
{
        nb_conn *c = setup();
        uint32_t gen;
        nb_batch *b;
        nb_results *res;
        unsigned rules = 0;
        char *out;

        ck_assert_uint_eq(apply(c, 2, NB_FW_REPLACE, -1), 0);
        gen = kernel_gen();
        out = tu_sh("printf '%%s\\n' 'flush chain netdev netbroker sc000/from/mac' "
                    "'delete table arp " NBD_FW_GEN_TABLE "' 'add table arp " NBD_FW_GEN_TABLE
                    "' 'add chain arp " NBD_FW_GEN_TABLE " " NBD_FW_GEN_CHAIN
                    " { comment \"netbroker generation %" PRIu32
                    "\"; }' | nft -f - 2>&1; echo rc=$?",
                    gen + 1);
        ck_assert_msg(strstr(out, "rc=0"), "%s", out);
        free(out);
        c = restart(c);
        ck_assert_msg(unchanged_one(c, 0), "ensure read the rules despite a current mark");
        b = nb_batch_new();
        nb_batch_firewall_list(b);
        res = submit_ok(c, b);
        for (size_t i = 0; i < nb_result_fw_owner_count(res, 0); i++) {
                const char *owner;
                unsigned n;
                ck_assert_int_eq(nb_result_fw_owner_at(res, 0, i, &owner, NULL, NULL, &n), 0);
                if (strcmp(owner, "sc000") == 0)
                        rules = n;
        }
        nb_results_free(res);
        ck_assert_uint_eq(rules, 23);
        nb_close(c);
}
END_TEST

/* Anyone's commit, even in another table, makes the mark stale: ensure
 * counts, finds every owner whole and changes nothing. */
START_TEST(test_a_commit_by_anyone_else_makes_ensure_count)
{
        nb_conn *c = setup();
        uint64_t nl;

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        c = restart(c);
        nl = stat_of(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS);
        /* The mark and the summary: the generation is the monitor's. */
        ck_assert_uint_eq(stat_of(c, "netlink_messages") - nl, 2);
        free(tu_sh("nft add table inet someone_else"));
        nl = stat_of(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS);
        /* The mark (passed: no summary), the chains and the rules. */
        ck_assert_uint_eq(stat_of(c, "netlink_messages") - nl, 3);
        ck_assert_uint_eq(stat_of(c, "fw_transactions"), 0);
        nb_close(c);
}
END_TEST

/* A commit that did not know the table whole (a replace after a change
 * nobody counted) must not mark it: the owner flushed by hand would then
 * pass for whole. */
START_TEST(test_a_commit_on_an_uncounted_table_leaves_no_mark)
{
        nb_conn *c = setup();
        uint32_t mark;

        ck_assert_uint_eq(apply(c, 2, NB_FW_REPLACE, -1), 0);
        free(tu_sh("nft flush chain netdev netbroker sc000/from/mac"));
        /* sc001 alone is replaced: sc000's rules are never read. */
        {
                nb_batch *b = nb_batch_new();
                add_guest(b, 1, 5, NB_FW_REPLACE);
                nb_results_free(submit_ok(c, b));
        }
        ck_assert_msg(!mark_of(&mark), "a commit marked a table it had not counted");
        c = restart(c);
        ck_assert_msg(!unchanged_one(c, 0), "ensure kept an owner whose chain was flushed");
        nb_close(c);
}
END_TEST

/* A counted table that agrees with its comments is marked by the next
 * commit; then ensure reads the chains only. */
START_TEST(test_a_counted_table_that_agrees_is_marked_again)
{
        nb_conn *c = setup();
        uint32_t mark;
        uint64_t nl;

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        free(tu_sh("nft add table inet someone_else"));
        /* Ensure with one owner changed: counts, rewrites that one, marks. */
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, 7), GUESTS - 1);
        ck_assert(mark_of(&mark));
        ck_assert_uint_eq(mark, kernel_gen());
        c = restart(c);
        nl = stat_of(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, 7), GUESTS);
        ck_assert_uint_eq(stat_of(c, "netlink_messages") - nl, 2);
        nb_close(c);
}
END_TEST

/* A base chain deleted by hand, after a helper restart: the chains are
 * read, the owner is incomplete and ensure rebuilds it alone. */
START_TEST(test_a_chain_deleted_by_hand_is_rebuilt_by_ensure)
{
        nb_conn *c = setup();

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        free(tu_sh("nft delete chain netdev netbroker sc017/to"));
        c = restart(c);
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS - 1);
        ck_assert(unchanged_one(c, 17));
        nb_close(c);
}
END_TEST

/* Owners are found by name among many: each of 40 ensures finds its own
 * (one changed owner rewritten, the rest untouched), then each replace
 * deletes its own chains and no other's. */
START_TEST(test_each_owner_found_among_many)
{
        nb_conn *c = setup();
        char *out;

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, 29), GUESTS - 1);
        ck_assert_uint_eq(stat_of(c, "fw_owners_written"), GUESTS + 1);
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        out = tu_sh("nft list table netdev netbroker | grep -c '^\tchain '");
        ck_assert_int_eq(atoi(out), GUESTS * 10);
        free(out);
        nb_close(c);
}
END_TEST

Suite *fw_scale_suite(void)
{
        Suite *s = suite_create("fw-scale");
        TCase *t = tcase_create("mark");

        tcase_set_timeout(t, 120);
        tcase_add_test(t, test_commit_marks_the_generation_it_makes);
        tcase_add_test(t, test_ensure_believes_a_current_mark_and_reads_no_rule);
        tcase_add_test(t, test_a_commit_by_anyone_else_makes_ensure_count);
        tcase_add_test(t, test_a_commit_on_an_uncounted_table_leaves_no_mark);
        tcase_add_test(t, test_a_counted_table_that_agrees_is_marked_again);
        tcase_add_test(t, test_a_chain_deleted_by_hand_is_rebuilt_by_ensure);
        tcase_add_test(t, test_each_owner_found_among_many);
        suite_add_tcase(s, t);
        return s;
}
