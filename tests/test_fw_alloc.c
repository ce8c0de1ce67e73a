// SPDX-License-Identifier: LGPL-2.1-or-later
/* test-fw-alloc: the firewall against the real kernel with each of its
 * allocations failing in turn, libc's (tests/alloc_hook.c) and libnftnl's
 * (tests/nftnl_hook.c) in one sequence. A firewall op's message goes to the
 * client as it is, so every step must either work or fail with -ENOMEM and
 * a struct nbd_err that says so ("out of memory ...", the sentence
 * nbd_err_oom() writes, never text nobody wrote); nothing may crash, and the kernel must hold
 * either what it held before the failed transaction or what that transaction made (never a part of
 * it). Root, in a network namespace of its own. */
#include <check.h>
#include <malloc.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_hook.h"
#include "fw_compile.h"
#include "fw_kernel.h"
#include "fw_model.h"
#include "fw_render.h"
#include "log.h"

static struct nbd_fw_rule rules[6];
static struct nbd_fw_group groups[4];

/* Two owners, each with a guarded group of MAC, IP, port and reject rules,
 * a group with a plain drop and a root group with an IPv6 protocol rule
 * (two nft rules) and an address range, and a group with a negated
 * gratuitous ARP rule (the set it looks up, its elements, lookups):
 * chains, jumps, comments and every kind of expression. */
static void make_spec(struct nbd_fw_owner_spec *s, const char *owner, const char *ifname)
{
        /* Check allocates in its assertions: not the firewall's to fail. */
        nbt_alloc_pause();
        memset(rules, 0, sizeof(rules));
        rules[0].dir = NBD_FW_DIR_FROM;
        rules[0].verdict = NBD_FW_V_DROP;
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00:01", &rules[0].ether_src), 0);
        rules[0].ether_src.neg = true;
        rules[1].dir = NBD_FW_DIR_FROM;
        rules[1].verdict = NBD_FW_V_REJECT;
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.0/8", &rules[1].ip_dst), 0);
        rules[1].l4proto = (struct nbd_fw_num){true, false, 6};
        rules[1].dport[0] = 22;
        rules[2].dir = NBD_FW_DIR_TO;
        rules[2].verdict = NBD_FW_V_ACCEPT;
        ck_assert_int_eq(
                nbd_fw_parse_mac("52:54:00:00:00:01/ff:ff:ff:00:00:00", &rules[2].ether_dst), 0);
        rules[3].dir = NBD_FW_DIR_TO;
        rules[3].verdict = NBD_FW_V_DROP;
        rules[4].dir = NBD_FW_DIR_FROM;
        rules[4].verdict = NBD_FW_V_ACCEPT;
        rules[4].priority = -10;
        ck_assert_int_eq(nbd_fw_parse_ip("fe80::1-fe80::9", &rules[4].ip_src), 0);
        rules[4].l4proto = (struct nbd_fw_num){true, true, 17};
        rules[5].dir = NBD_FW_DIR_FROM;
        rules[5].verdict = NBD_FW_V_DROP;
        rules[5].arp_gratuitous = (struct nbd_fw_num){true, true, 0};
        memset(groups, 0, sizeof(groups));
        groups[0].has_guard = true;
        groups[0].guard.ether_type = (struct nbd_fw_num){true, true, 0x0806};
        snprintf(groups[2].name, sizeof(groups[2].name), "root");
        groups[2].rules = &rules[4];
        groups[2].n_rules = 1;
        groups[2].root = true;
        snprintf(groups[0].name, sizeof(groups[0].name), "no-spoofing");
        groups[0].rules = rules;
        groups[0].n_rules = 3;
        snprintf(groups[1].name, sizeof(groups[1].name), "default-drop");
        groups[1].rules = &rules[3];
        groups[1].n_rules = 1;
        snprintf(groups[3].name, sizeof(groups[3].name), "arp");
        groups[3].rules = &rules[5];
        groups[3].n_rules = 1;
        *s = (struct nbd_fw_owner_spec){
                .owner = owner, .ifname = ifname, .groups = groups, .n_groups = 4};
        nbt_alloc_resume();
}

static int count_owner(const struct nbd_fw_owner_info *o, void *data)
{
        (void)o;
        ++*(unsigned *)data;
        return 0;
}

/* Owners in the table, read with no failure armed. */
static unsigned owners(struct nbd_fw *fw)
{
        struct nbd_err err;
        unsigned n = 0;

        ck_assert_msg(nbd_fw_list(fw, count_owner, &n, &err) == 0, "list: %s", err.msg);
        return n;
}

/* What one step returned: fine, or out of memory and saying so: e holds
 * the code returned and a sentence that starts "out of memory". e was
 * filled with garbage before the step, so text nobody wrote shows. Returns
 * true when it failed. */
static bool failed(const char *step, unsigned long fail_at, int r, const struct nbd_err *e)
{
        if (r == 0)
                return false;
        nbt_alloc_pause(); /* as in make_spec() */
        ck_assert_msg(r == -ENOMEM, "allocation %lu: %s returned %d (%.200s), not -ENOMEM", fail_at,
                      step, r, e->msg);
        ck_assert_msg(e->code == r, "allocation %lu: %s returned %d but its error says %d", fail_at,
                      step, r, e->code);
        ck_assert_msg(strncmp(e->msg, "out of memory ", 14) == 0,
                      "allocation %lu: %s failed for memory and said '%.200s'", fail_at, step,
                      e->msg);
        nbt_alloc_resume();
        return true;
}

/* An error nobody has written yet: what a step that forgets to fill it
 * leaves behind. */
static void garbage(struct nbd_err *e)
{
        memset(e, 'x', sizeof(*e));
        e->msg[sizeof(e->msg) - 1] = '\0';
        e->code = 12345;
}

/* One transaction: begin, then apply or remove each owner, then commit.
 * Returns true when a step failed (then nothing was committed). */
static bool transaction(struct nbd_fw *fw, unsigned long fail_at, bool apply)
{
        static const char *const names[][2] = {{"guest-a", "fwa0"}, {"guest-b", "fwa1"}};
        struct nbd_fw_txn *t = NULL;
        struct nbd_err err;
        bool bad;

        garbage(&err);
        bad = failed("txn_begin", fail_at, nbd_fw_txn_begin(fw, &t, &err), &err);
        for (size_t i = 0; !bad && i < 2; i++) {
                struct nbd_fw_owner_spec s;
                struct nbd_fw_applied a;
                garbage(&err);
                make_spec(&s, names[i][0], names[i][1]);
                if (apply)
                        bad = failed("txn_apply", fail_at, nbd_fw_txn_apply(t, &s, &a, &err), &err);
                else if (i == 0)
                        bad = failed("txn_remove", fail_at,
                                     nbd_fw_txn_remove(t, names[i][0], NULL, &err), &err);
        }
        garbage(&err);
        if (!bad)
                bad = failed("txn_commit", fail_at, nbd_fw_txn_commit(t, &err), &err);
        nbd_fw_txn_free(t);
        return bad;
}

static int sh(const char *cmd)
{
        int st = system(cmd);

        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Apply two owners, list them, remove one, render one: with allocation 1,
 * 2, ... failing, until a run has no allocation left to fail. */
START_TEST(test_every_allocation_failure_of_the_firewall_is_enomem_with_its_message)
{
        struct nbd_fw *fw;
        unsigned long n;

        ck_assert_int_eq(sh("ip link add fwa0 type veth peer name fwa0p && "
                            "ip link add fwa1 type veth peer name fwa1p"),
                         0);
        ck_assert_int_eq(nbd_fw_open(NULL, &fw), 0);
        for (n = 1; n < 100000; n++) {
                struct nbd_err err;
                char *text = NULL;
                struct nbd_fw_owner_spec s;
                unsigned listed = 0;
                int stage = 0; /* steps that worked: 1 applied, 2 listed, 3 removed */

                nbt_alloc_arm(n);
                garbage(&err);
                if (!transaction(fw, n, true)) {
                        stage = 1;
                        if (!failed("list", n, nbd_fw_list(fw, count_owner, &listed, &err), &err)) {
                                stage = 2;
                                if (!transaction(fw, n, false))
                                        stage = 3;
                        }
                }
                if (stage == 3) {
                        make_spec(&s, "guest-a", "fwa0");
                        garbage(&err);
                        if (!failed("render", n, nbd_fw_render(&s, &text, &err), &err))
                                free(text);
                }
                nbt_alloc_disarm();
                /* All of a transaction or nothing of it is in the kernel. */
                ck_assert_uint_eq(owners(fw), stage == 0 ? 0 : stage == 3 ? 1 : 2);
                if (stage == 2)
                        ck_assert_uint_eq(listed, 2);
                if (!nbt_alloc_failed())
                        break;
                if (stage > 0)
                        ck_assert_int_eq(sh("nft delete table netdev " NBD_FW_TABLE), 0);
        }
        ck_assert_msg(n > 50, "only %lu allocations: the hooks are not linked in", n - 1);
        printf("test-fw-alloc: allocations 1..%lu failed in turn, each ended in -ENOMEM and "
               "\"out of memory\"\n",
               n - 1);
        nbd_fw_close(fw);
}
END_TEST

/* Allocation `at` of call fails: -ENOMEM and exactly the sentence want. */
#define EXPECT_OOM(at, call, e, want)                                                              \
        do {                                                                                       \
                int r_;                                                                            \
                garbage(e);                                                                        \
                nbt_alloc_arm(at);                                                                 \
                r_ = (call);                                                                       \
                nbt_alloc_disarm();                                                                \
                ck_assert_msg(nbt_alloc_failed(), "allocation %d of %s was not made", at, #call);  \
                ck_assert_int_eq(r_, -ENOMEM);                                                     \
                ck_assert_int_eq((e)->code, -ENOMEM);                                              \
                ck_assert_str_eq((e)->msg, want);                                                  \
        } while (0)

/* The transaction's own memory and the table it starts from: before the
 * error convention, a failed read said "cannot read table netbroker: out
 * of memory", and callers had to guess which failures wrote a sentence. */
START_TEST(test_txn_begin_out_of_memory_says_so)
{
        struct nbd_fw_txn *t = NULL;
        struct nbd_fw *fw;
        struct nbd_err err;

        ck_assert_int_eq(nbd_fw_open(NULL, &fw), 0);
        /* 1: the transaction itself (calloc); 2: the chain the dump asks
         * for (nftnl_chain_alloc). */
        EXPECT_OOM(1, nbd_fw_txn_begin(fw, &t, &err), &err,
                   "out of memory beginning a firewall transaction");
        ck_assert_ptr_null(t);
        EXPECT_OOM(2, nbd_fw_txn_begin(fw, &t, &err), &err,
                   "out of memory reading table " NBD_FW_TABLE);
        ck_assert_ptr_null(t);
        nbd_fw_close(fw);
}
END_TEST

/* The compiler's first object, and the commit's batch. */
START_TEST(test_compile_and_commit_out_of_memory_say_so)
{
        char hash[NBD_FW_HASH_HEX];
        struct nbd_fw_owner_spec s;
        struct nbd_fw_applied a;
        struct nbd_fw_txn *t;
        struct nbd_fw *fw;
        struct nbd_err err;
        unsigned n_rules, before;

        ck_assert_int_eq(sh("ip link add fwo0 type veth peer name fwo0p"), 0);
        make_spec(&s, "guest-o", "fwo0");
        /* Outputs stay untouched on failure. */
        memset(hash, 'x', sizeof(hash));
        n_rules = 12345;
        EXPECT_OOM(1, nbd_fw_hash(&s, hash, &n_rules, &err), &err,
                   "out of memory compiling the rules of owner guest-o");
        for (size_t i = 0; i < sizeof(hash); i++)
                ck_assert_msg(hash[i] == 'x', "hash byte %zu written on failure", i);
        ck_assert_uint_eq(n_rules, 12345);
        ck_assert_int_eq(nbd_fw_open(NULL, &fw), 0);
        before = owners(fw);
        ck_assert_int_eq(nbd_fw_txn_begin(fw, &t, &err), 0);
        ck_assert_msg(nbd_fw_txn_apply(t, &s, &a, &err) == 0, "%s", err.msg);
        /* 1: the batch (nftnl_batch_alloc). */
        EXPECT_OOM(1, nbd_fw_txn_commit(t, &err), &err, "out of memory building the transaction");
        nbd_fw_txn_free(t);
        ck_assert_uint_eq(owners(fw), before); /* nothing was sent */
        nbd_fw_close(fw);
}
END_TEST

static int refuse(const struct nbd_fw_owner_info *o, void *data)
{
        (void)o;
        return *(int *)data;
}

/* A listing stopped by its callback: the callback's errno, and a sentence
 * (before, nbd_fw_list returned it with the error unwritten). */
START_TEST(test_list_stopped_by_its_callback_says_why)
{
        struct nbd_fw_owner_spec s;
        struct nbd_fw_applied a;
        struct nbd_fw_txn *t;
        struct nbd_fw *fw;
        struct nbd_err err;
        int why = -ENOMEM;

        ck_assert_int_eq(sh("ip link add fwl0 type veth peer name fwl0p"), 0);
        make_spec(&s, "guest-l", "fwl0");
        ck_assert_int_eq(nbd_fw_open(NULL, &fw), 0);
        ck_assert_int_eq(nbd_fw_txn_begin(fw, &t, &err), 0);
        ck_assert_msg(nbd_fw_txn_apply(t, &s, &a, &err) == 0, "%s", err.msg);
        ck_assert_msg(nbd_fw_txn_commit(t, &err) == 0, "%s", err.msg);
        nbd_fw_txn_free(t);
        garbage(&err);
        ck_assert_int_eq(nbd_fw_list(fw, refuse, &why, &err), -ENOMEM);
        ck_assert_int_eq(err.code, -ENOMEM);
        ck_assert_str_eq(err.msg, "out of memory listing the owners");
        why = -EPERM;
        garbage(&err);
        ck_assert_int_eq(nbd_fw_list(fw, refuse, &why, &err), -EPERM);
        ck_assert_int_eq(err.code, -EPERM);
        ck_assert_str_eq(err.msg, "listing owner guest-l: Operation not permitted");
        ck_assert_int_eq(sh("nft delete table netdev " NBD_FW_TABLE), 0);
        nbd_fw_close(fw);
}
END_TEST

/* Rules, and those with a text (every rule of ours has one: the
 * compiler's, or a jump's); no Check call, allocations may be failing. */
static int count_rule(const struct nbd_fw_rule_info *r, void *data)
{
        unsigned *n = data;

        n[0]++;
        n[1] += r->text[0] != '\0';
        return 0;
}

/* FirewallList's counters read every rule whole: each allocation of that
 * read failing in turn is -ENOMEM with its sentence, and one that works
 * gives every rule. */
START_TEST(test_every_allocation_failure_of_the_rule_listing_is_enomem)
{
        struct nbd_fw *fw;
        struct nbd_err err;
        unsigned all[2] = {0, 0};
        unsigned long n;

        /* The first test may have made them: the tests share a namespace. */
        ck_assert_int_eq(sh("{ ip link add fwa0 type veth peer name fwa0p; "
                            "ip link add fwa1 type veth peer name fwa1p; } 2>/dev/null; "
                            "ip link show fwa0 >/dev/null && ip link show fwa1 >/dev/null"),
                         0);
        ck_assert_int_eq(nbd_fw_open(NULL, &fw), 0);
        ck_assert(!transaction(fw, 0, true));
        ck_assert_msg(nbd_fw_list_rules(fw, NULL, count_rule, all, &err) == 0, "%s", err.msg);
        ck_assert_uint_gt(all[0], 4);
        ck_assert_uint_eq(all[1], all[0]);
        for (n = 1; n < 100000; n++) {
                unsigned got[2] = {0, 0};
                int r;

                garbage(&err);
                nbt_alloc_arm(n);
                r = nbd_fw_list_rules(fw, NULL, count_rule, got, &err);
                nbt_alloc_disarm();
                if (!failed("list_rules", n, r, &err))
                        ck_assert(got[0] == all[0] && got[1] == all[1]);
                if (!nbt_alloc_failed())
                        break;
        }
        ck_assert_msg(n > 2, "only %lu allocations", n - 1);
        ck_assert_int_eq(sh("nft delete table netdev " NBD_FW_TABLE), 0);
        nbd_fw_close(fw);
}
END_TEST

/* tests/nftnl_hook.c: libnftnl rules allocated and not freed. */
long nbt_nftnl_rules_live(void);

/* Issue 14: a queued owner is encoded at once (helper/fw_msgs.h), and its
 * libnftnl objects freed, so that a transaction of thousands of owners
 * holds their messages, not an object for every rule and expression (at
 * 2,048 guests the helper's peak went from 105 MB to 54 MB). 200 owners
 * queued, none committed: no rule object of theirs lives on. */
START_TEST(test_a_queued_owner_holds_its_messages_not_its_compiled_objects)
{
        struct nbd_fw_owner_spec s;
        struct nbd_fw_applied a;
        struct nbd_fw_txn *t;
        struct nbd_fw *fw;
        struct nbd_err err;
        char owner[32], ifname[16];
        struct mallinfo2 m0, m1;
        long live;

        ck_assert_int_eq(nbd_fw_open(NULL, &fw), 0);
        ck_assert_int_eq(nbd_fw_txn_begin(fw, &t, &err), 0);
        live = nbt_nftnl_rules_live();
        m0 = mallinfo2();
        for (int i = 0; i < 200; i++) {
                snprintf(owner, sizeof(owner), "guest-q%d", i);
                snprintf(ifname, sizeof(ifname), "fwq%d", i);
                make_spec(&s, owner, ifname);
                ck_assert_msg(nbd_fw_txn_apply(t, &s, &a, &err) == 0, "apply: %s", err.msg);
                ck_assert_uint_gt(a.rules, 0);
        }
        m1 = mallinfo2();
        fprintf(stderr, "test-fw-alloc: 200 owners queued: %lld bytes held an owner\n",
                ((long long)(m1.uordblks + m1.hblkhd) - (long long)(m0.uordblks + m0.hblkhd)) /
                        200);
        ck_assert_msg(nbt_nftnl_rules_live() == live,
                      "%ld rule objects live on after 200 owners were queued",
                      nbt_nftnl_rules_live() - live);
        nbd_fw_txn_free(t);
        nbd_fw_close(fw);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("fw-alloc");
        TCase *tc = tcase_create("fw-alloc");
        SRunner *sr;
        int failed_n;

        if (geteuid() != 0) {
                fprintf(stderr,
                        "test-fw-alloc: skipped: needs root (nftables in a network namespace)\n");
                return 77;
        }
        /* Nothing here may touch the host's firewall. */
        if (unshare(CLONE_NEWNET) < 0) {
                fprintf(stderr,
                        "test-fw-alloc: skipped: cannot create a network namespace to run in "
                        "(unshare(CLONE_NEWNET): %s)\n",
                        strerror(errno));
                return 77;
        }
        setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", 1);
        nbd_log_configure(NBD_LOG_ERR, NULL, false);
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc,
                       test_every_allocation_failure_of_the_firewall_is_enomem_with_its_message);
        tcase_add_test(tc, test_txn_begin_out_of_memory_says_so);
        tcase_add_test(tc, test_compile_and_commit_out_of_memory_say_so);
        tcase_add_test(tc, test_list_stopped_by_its_callback_says_why);
        tcase_add_test(tc, test_every_allocation_failure_of_the_rule_listing_is_enomem);
        tcase_add_test(tc, test_a_queued_owner_holds_its_messages_not_its_compiled_objects);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed_n = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed_n ? 1 : 0;
}
