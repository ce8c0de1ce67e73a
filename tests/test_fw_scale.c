// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall's table read once per batch, and its rules not at all
 * while the generation mark says nobody has touched them (helper/fw_kernel.c,
 * struct nbd_fw_txn's intact): what the mark lets ensure skip, and every way
 * the mark must stop being believed. The figures at thousands of guests are
 * the bench's (netbroker-bench restart --scale); these stay small. */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_summary.h"
#include "fw_table.h"
#include "testutil.h"
#include "tests.h"

#define FW_ALLOW TU_ALLOW "exec_allow = /usr/sbin/nft\n"
#define GUESTS 40

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
        res = tu_submit_ok(c, b);
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
        res = tu_submit_ok(c, b);
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

/* A new helper, once its start-up sweep is done: the sweep runs on the
 * firewall's lane after the loop serves, and a FirewallList waits for it in
 * the lane's FIFO, so the sweep's reads are not counted as the next op's. */
static nb_conn *restart(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;

        nb_close(c);
        c = tu_spawn(FW_ALLOW);
        ck_assert_int_eq(nb_batch_firewall_list(b), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        nb_batch_free(b);
        ck_assert_int_eq(nb_results_first_error(res), -1);
        nb_results_free(res);
        return c;
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
        res = tu_submit_ok(c, b);
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
        nl = tu_stat(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS);
        /* The mark and the summary, and the generation before and after
         * them (GETGEN: the table is read on the firewall's lane, whose
         * handle has no monitor). */
        ck_assert_uint_eq(tu_stat(c, "netlink_messages") - nl, 2 + 2);
        free(tu_sh("nft add table inet someone_else"));
        nl = tu_stat(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS);
        /* The generation twice (GETGEN), the mark (passed: no summary), the
         * chains and the rules. */
        ck_assert_uint_eq(tu_stat(c, "netlink_messages") - nl, 2 + 3);
        ck_assert_uint_eq(tu_stat(c, "fw_transactions"), 0);
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
                nb_results_free(tu_submit_ok(c, b));
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
        nl = tu_stat(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, 7), GUESTS);
        ck_assert_uint_eq(tu_stat(c, "netlink_messages") - nl, 2 + 2);
        nb_close(c);
}
END_TEST

/* An owner whose rules were deleted by hand is found by ensure's count and
 * written anew; the others are as their comments say, so after that commit
 * the table is whole again and the commit marks it: the next ensure reads
 * the mark and the summary only. (Before, only a counted table with no
 * owner to repair was marked, and every ensure after a repair counted
 * again until some other change.) */
START_TEST(test_a_commit_that_repairs_an_owner_marks_the_table)
{
        nb_conn *c = setup();
        uint32_t mark = 0;
        uint64_t nl;

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        free(tu_sh("nft flush chain netdev netbroker sc000/from/mac"));
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS - 1);
        ck_assert_msg(mark_of(&mark) && mark == kernel_gen(),
                      "no mark after the repair (mark %u, generation %u)", mark, kernel_gen());
        c = restart(c);
        nl = tu_stat(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS);
        ck_assert_uint_eq(tu_stat(c, "netlink_messages") - nl, 2 + 2);
        nb_close(c);
}
END_TEST

/* The helper's own commits that are not the firewall's: a network's
 * table, and an outbound bandwidth policer where nftables polices (a
 * kernel without act_police; with it the policer is tc's, no commit).
 * Each is one nft commit (k: the k-th, a change each time). For bandwidth,
 * *ret_method says which it was: "nft-limit", or "tc". */
static void own_commit(nb_conn *c, bool network, unsigned k, const char **ret_method)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;

        if (network) {
                nb_net_spec spec = NB_NET_SPEC_INIT;
                char subnet[32];
                const char *subnets[] = {subnet};
                snprintf(subnet, sizeof(subnet), "10.77.%u.1/24", k);
                free(tu_sh("ip link add scbr type bridge 2>/dev/null || true"));
                spec.bridge = "scbr";
                spec.subnets = subnets;
                spec.n_subnets = 1;
                spec.mode = NB_NET_NAT;
                ck_assert_int_eq(nb_batch_net_apply(b, "scnet", &spec), 0);
        } else {
                nb_rate out = NB_RATE_INIT;
                out.average = 1000 * k; /* another each time: each is a commit */
                ck_assert_int_eq(nb_batch_bandwidth_set(b, "sc003", NULL, &out), 0);
        }
        res = tu_submit_ok(c, b);
        if (!network) {
                const char *in = NULL, *method = NULL;
                ck_assert_int_eq(nb_result_bandwidth(res, 0, &in, &method), 0);
                *ret_method = strcmp(method, "nft-limit") == 0 ? "nft-limit" : "tc";
        }
        nb_results_free(res);
}

/* A commit of the helper's own that leaves the guests' table as it is
 * carries the mark (fw_summary.h, nbd_fw_mark_holds): without it, every
 * bandwidth change or network start made the next ensure count the whole
 * table (66 ms at 1,000 guests, chain by chain). After it, the mark names
 * the kernel's generation, and ensure reads the mark and the summary
 * only. A commit by anyone else before it still leaves the mark behind. */
static void check_own_commit_carries_the_mark(bool network)
{
        nb_conn *c = setup();
        const char *method = NULL;
        uint32_t gen, mark = 0;
        uint64_t nl;

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        gen = kernel_gen();
        own_commit(c, network, 1, &method);
        if (!network && strcmp(method, "nft-limit") != 0) {
                /* The kernel polices with tc: nothing of nftables moved. */
                fprintf(stderr, "fw-scale: this kernel polices outbound with tc (act_police): "
                                "no nft commit to carry the mark across; tested with a "
                                "network's commit\n");
                ck_assert_uint_eq(kernel_gen(), gen);
                nb_close(c);
                return;
        }
        ck_assert_msg(kernel_gen() == gen + 1, "one commit: %u -> %u", gen, kernel_gen());
        ck_assert_msg(mark_of(&mark) && mark == gen + 1,
                      "the mark stayed at %u after the helper's own commit made %u", mark, gen + 1);
        c = restart(c);
        nl = tu_stat(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS);
        ck_assert_uint_eq(tu_stat(c, "netlink_messages") - nl, 2 + 2);
        ck_assert_uint_eq(tu_stat(c, "nft_rule_dumps") + tu_stat(c, "nft_rule_counts_by_chain"), 0);
        if (!network) {
                /* A policer's removal is such a commit too. */
                nb_batch *b = nb_batch_new();
                ck_assert_int_eq(nb_batch_bandwidth_clear(b, "sc003"), 0);
                nb_results_free(tu_submit_ok(c, b));
                ck_assert_msg(mark_of(&mark) && mark == kernel_gen(),
                              "the mark (%u) did not follow a policer's removal (%u)", mark,
                              kernel_gen());
        }

        /* Someone else's commit first: the mark is passed, and the
         * helper's commit after it does not bring it back. */
        free(tu_sh("nft add table inet someone_else"));
        gen = kernel_gen();
        own_commit(c, network, 2, &method);
        if (network) {
                nb_batch *b = nb_batch_new();
                nb_batch_net_remove(b, "scnet");
                nb_results_free(tu_submit_ok(c, b));
        }
        ck_assert_uint_gt(kernel_gen(), gen);
        ck_assert_msg(!mark_of(&mark) || mark != kernel_gen(),
                      "the helper's commit carried a mark someone else's commit had passed");
        nl = tu_stat(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS);
        ck_assert_uint_eq(tu_stat(c, "netlink_messages") - nl, 2 + 3);
        nb_close(c);
}

#ifdef NB_TEST_HOOKS
struct net_client {
        nb_conn *c;
        int first_error;
};

static void *net_client_run(void *p)
{
        struct net_client *nc = p;
        nb_net_spec spec = NB_NET_SPEC_INIT;
        const char *subnets[] = {"10.79.0.1/24"};
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;

        spec.bridge = "scbr";
        spec.subnets = subnets;
        spec.n_subnets = 1;
        spec.mode = NB_NET_NAT;
        nc->first_error = -2;
        if (nb_batch_net_apply(b, "scheld", &spec) == 0 && nb_submit(nc->c, b, &res) == 0)
                nc->first_error = nb_results_first_error(res);
        nb_results_free(res);
        nb_batch_free(b);
        return NULL;
}

/* The mark's table goes between the helper's read of the mark and its
 * network commit (here by hand; the firewall's lane drops it with the
 * guests' last owner): the kernel refuses the commit with the mark's
 * messages, and it is sent again without them. The network is made, and
 * nothing of the mark is made again (before, the carry made the table
 * anew, with no summary: a stray table in `nft list ruleset`). */
START_TEST(test_a_mark_gone_before_the_carry_is_left_gone)
{
        char hold[] = "/tmp/nbtest-hold-XXXXXX", held[64];
        struct net_client nc = {0};
        nb_conn *c = setup();
        pthread_t t;
        char *out;

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        free(tu_sh("ip link add scbr type bridge"));
        ck_assert_int_ge(mkstemp(hold), 0);
        snprintf(held, sizeof(held), "%s.held", hold);
        ck_assert_int_eq(setenv("NETBROKERD_TEST_HOLD_MARK_CARRY", hold, 1), 0);
        c = restart(c);
        unsetenv("NETBROKERD_TEST_HOLD_MARK_CARRY");
        nc.c = c;
        pthread_create(&t, NULL, net_client_run, &nc);
        /* Bounded, for order only: the commit is held after the read. */
        for (int i = 0; i < 12000 && access(held, F_OK) != 0; i++)
                usleep(5000);
        ck_assert_msg(access(held, F_OK) == 0, "the network's commit never reached its carry");
        free(tu_sh("nft delete table arp " NBD_FW_GEN_TABLE));
        unlink(hold);
        pthread_join(t, NULL);
        ck_assert_msg(nc.first_error == -1, "the network's apply failed (op %d)", nc.first_error);
        out = tu_sh("nft list tables");
        ck_assert_msg(strstr(out, "netbroker_net") && !strstr(out, NBD_FW_GEN_TABLE),
                      "after the carry refused:\n%s", out);
        free(out);
        nb_close(c);
}
END_TEST
#endif

START_TEST(test_a_network_commit_carries_the_mark)
{
        check_own_commit_carries_the_mark(true);
}
END_TEST

START_TEST(test_a_bandwidth_commit_carries_the_mark)
{
        check_own_commit_carries_the_mark(false);
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
        ck_assert_uint_eq(tu_stat(c, "fw_owners_written"), GUESTS + 1);
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        out = tu_sh("nft list table netdev netbroker | grep -c '^\tchain '");
        ck_assert_int_eq(atoi(out), GUESTS * 10);
        free(out);
        nb_close(c);
}
END_TEST

/* ---- the summary (helper/fw_summary.h) ---- */

/* Apply guests [0, n) in one batch (guest changed_one as variant 9), their
 * results into hashes/same (n of each). */
static void apply_results(nb_conn *c, int n, nb_fw_mode mode, int changed_one,
                          char hashes[][NBD_FW_HASH_HEX], bool *same)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;

        for (int i = 0; i < n; i++)
                add_guest(b, i, i == changed_one ? 9 : 0, mode);
        res = tu_submit_ok(c, b);
        for (int i = 0; i < n; i++) {
                const char *hash;
                unsigned rules;
                ck_assert_int_eq(nb_result_firewall(res, (size_t)i, &hash, &same[i], &rules), 0);
                ck_assert_uint_eq(rules, 23);
                snprintf(hashes[i], NBD_FW_HASH_HEX, "%s", hash);
        }
        nb_results_free(res);
}

/* What the summary says of owner (its element's comment), or of the
 * owner's base chain (chain true); "" when nothing. */
static char *comment_of(const char *owner, bool chain)
{
        char *out = chain ? tu_sh("nft list chain netdev " NBD_FW_TABLE " %s/from 2>/dev/null | "
                                  "sed -n 's/.*comment \"\\([^\"]*\\)\".*/\\1/p'",
                                  owner)
                          : tu_sh("nft list set arp " NBD_FW_GEN_TABLE " " NBD_FW_SUMMARY_SET
                                  " 2>/dev/null | tr ',' '\\n' | "
                                  "sed -n 's/.*comment \"netbroker %s \\([^\"]*\\)\".*/netbroker "
                                  "\\1/p'",
                                  owner);
        char *nl = strchr(out, '\n');

        if (nl)
                *nl = '\0';
        return out;
}

static unsigned summary_size(void)
{
        char *out = tu_sh("nft list set arp " NBD_FW_GEN_TABLE " " NBD_FW_SUMMARY_SET
                          " 2>/dev/null | grep -o 'comment \"netbroker ' | wc -l");
        unsigned n = (unsigned)atoi(out);

        free(out);
        return n;
}

/* Every owner's element says what its base chains say, and the mark is
 * the kernel's generation. */
static void check_summary(int n, int absent)
{
        uint32_t mark = 0;
        char owner[16];

        ck_assert(mark_of(&mark));
        ck_assert_uint_eq(mark, kernel_gen());
        ck_assert_uint_eq(summary_size(), (unsigned)(absent >= 0 ? n - 1 : n));
        for (int i = 0; i < n; i++) {
                char *el, *ch;
                snprintf(owner, sizeof(owner), "sc%03d", i);
                el = comment_of(owner, false);
                ch = comment_of(owner, true);
                if (i == absent) {
                        ck_assert_msg(!el[0] && !ch[0], "%s: '%s' '%s'", owner, el, ch);
                } else {
                        ck_assert_msg(strncmp(el, "netbroker ", 10) == 0, "%s: '%s'", owner, el);
                        ck_assert_msg(strcmp(el, ch) == 0, "%s: summary '%s', chain '%s'", owner,
                                      el, ch);
                }
                free(el);
                free(ch);
        }
}

/* The summary is read, not the chains: here, in one nft transaction, the
 * base chains of sc001 are deleted and the mark made again to name the
 * generation that transaction makes (the summary untouched), and ensure
 * and FirewallList take the summary's word for sc001, where the chains
 * would have shown it incomplete (test_a_chain_deleted_by_hand_is_rebuilt_
 * by_ensure) or not at all. This is the trust the mark and the summary
 * are: only our commits write them. */
START_TEST(test_ensure_takes_the_summarys_word)
{
        nb_conn *c = setup();
        bool listed_sc001 = false;
        nb_results *res;
        nb_batch *b;
        char *out;

        ck_assert_uint_eq(apply(c, 2, NB_FW_REPLACE, -1), 0);
        out = tu_sh("printf '%%s\\n' 'delete chain netdev " NBD_FW_TABLE " sc001/to' "
                    "'delete chain netdev " NBD_FW_TABLE " sc001/from' "
                    "'delete chain arp " NBD_FW_GEN_TABLE " " NBD_FW_GEN_CHAIN
                    "' 'add chain arp " NBD_FW_GEN_TABLE " " NBD_FW_GEN_CHAIN
                    " { comment \"netbroker generation %" PRIu32
                    "\"; }' | nft -f - 2>&1; echo rc=$?",
                    kernel_gen() + 1);
        ck_assert_msg(strstr(out, "rc=0"), "%s", out);
        free(out);
        c = restart(c);
        ck_assert_msg(unchanged_one(c, 1), "ensure read the chains, not the summary");
        ck_assert_msg(unchanged_one(c, 0), "sc000 is in place");
        ck_assert_uint_eq(tu_stat(c, "fw_owners_written"), 0);
        b = nb_batch_new();
        nb_batch_firewall_list(b);
        res = tu_submit_ok(c, b);
        ck_assert_uint_eq(nb_result_fw_owner_count(res, 0), 2);
        for (size_t i = 0; i < 2; i++) {
                const char *owner;
                unsigned n;
                ck_assert_int_eq(nb_result_fw_owner_at(res, 0, i, &owner, NULL, NULL, &n), 0);
                ck_assert_uint_eq(n, 23);
                listed_sc001 |= strcmp(owner, "sc001") == 0;
        }
        nb_results_free(res);
        ck_assert_msg(listed_sc001, "FirewallList read the chains, not the summary");
        nb_close(c);
}
END_TEST

/* Every commit leaves the summary the table's: a replace, an ensure that
 * rewrites one owner (its chains read then), a remove; and a restarted
 * helper ensures from it, reading neither chains nor rules. */
START_TEST(test_the_summary_follows_every_commit)
{
        nb_conn *c = setup();
        char h[GUESTS][NBD_FW_HASH_HEX];
        bool same[GUESTS];
        char *mine;
        uint64_t nl;

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        check_summary(GUESTS, -1);
        c = restart(c);
        apply_results(c, GUESTS, NB_FW_ENSURE, 7, h, same);
        for (int i = 0; i < GUESTS; i++)
                ck_assert_msg(same[i] == (i != 7), "sc%03d: unchanged %d", i, same[i]);
        check_summary(GUESTS, -1);
        mine = comment_of("sc007", false);
        ck_assert_msg(strstr(mine, h[7]), "sc007's element '%s' has not its new hash %s", mine,
                      h[7]);
        free(mine);
        c = restart(c);
        {
                nb_batch *b = nb_batch_new();
                ck_assert_int_eq(nb_batch_firewall_remove(b, "sc009"), 0);
                nb_results_free(tu_submit_ok(c, b));
        }
        check_summary(GUESTS, 9);
        c = restart(c);
        nl = tu_stat(c, "netlink_messages");
        /* sc009 is new: made without reading a chain. */
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, 7), GUESTS - 1);
        /* The generation twice (GETGEN, on the lane), the mark, the
         * summary, and the commit's batch: its BEGIN, table
         * and END, the mark's table (3), chain, set and elements (1),
         * sc009's 10 chains, its 23 rules and 8 jumps. */
        ck_assert_uint_eq(tu_stat(c, "netlink_messages") - nl, 2 + 2 + 3 + 6 + 10 + 23 + 8);
        check_summary(GUESTS, -1);
        nb_close(c);
}
END_TEST

/* A summary changed by anyone else is a commit like any: not believed.
 * Ensure reads the chains and the rules, finds every owner whole, writes
 * nothing; an owner whose chains someone deleted is made again. */
START_TEST(test_a_summary_changed_by_hand_is_not_believed)
{
        nb_conn *c = setup();
        uint64_t nl;
        char *out;

        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
        out = tu_sh("nft delete element arp " NBD_FW_GEN_TABLE " " NBD_FW_SUMMARY_SET
                    " '{ 4 }' 2>&1; echo rc=$?");
        ck_assert_msg(strstr(out, "rc=0"), "%s", out);
        free(out);
        c = restart(c);
        nl = tu_stat(c, "netlink_messages");
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS);
        /* The generation twice (GETGEN, on the lane), the mark (passed: no
         * summary read), the chains and the rules. */
        ck_assert_uint_eq(tu_stat(c, "netlink_messages") - nl, 2 + 3);
        ck_assert_uint_eq(tu_stat(c, "fw_transactions"), 0);
        /* Every chain of sc013, base chains first, in one nft transaction. */
        out = tu_sh("nft list table netdev " NBD_FW_TABLE " | awk '$1 == \"chain\" && "
                    "$2 ~ /^sc013\\// { print length($2), $2 }' | sort -n | "
                    "awk '{ print \"delete chain netdev " NBD_FW_TABLE " \" $2 }' | nft -f - 2>&1; "
                    "echo rc=$?");
        ck_assert_msg(strstr(out, "rc=0"), "%s", out);
        free(out);
        out = comment_of("sc013", true);
        ck_assert_str_eq(out, "");
        free(out);
        c = restart(c);
        ck_assert_uint_eq(apply(c, GUESTS, NB_FW_ENSURE, -1), GUESTS - 1);
        ck_assert_uint_eq(tu_stat(c, "fw_owners_written"), 1);
        check_summary(GUESTS, -1);
        nb_close(c);
}
END_TEST

/* The summary's ensure and the chains' give the same results and leave
 * the same table: one ensure (sc007 changed) after a foreign commit, one
 * after none. */
START_TEST(test_ensure_by_summary_and_by_chains_agree)
{
        nb_conn *c = setup();
        char h[2][GUESTS][NBD_FW_HASH_HEX];
        bool same[2][GUESTS];
        char *table[2];

        for (int k = 0; k < 2; k++) {
                ck_assert_uint_eq(apply(c, GUESTS, NB_FW_REPLACE, -1), 0);
                if (k == 0)
                        free(tu_sh("nft add table inet someone_else"));
                c = restart(c);
                apply_results(c, GUESTS, NB_FW_ENSURE, 7, h[k], same[k]);
                table[k] = tu_sh("nft list table netdev " NBD_FW_TABLE);
        }
        for (int i = 0; i < GUESTS; i++) {
                ck_assert_str_eq(h[0][i], h[1][i]);
                ck_assert_int_eq(same[0][i], same[1][i]);
        }
        ck_assert_str_eq(table[0], table[1]);
        free(table[0]);
        free(table[1]);
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
        tcase_add_test(t, test_a_commit_that_repairs_an_owner_marks_the_table);
        tcase_add_test(t, test_a_network_commit_carries_the_mark);
        tcase_add_test(t, test_a_bandwidth_commit_carries_the_mark);
#ifdef NB_TEST_HOOKS
        tcase_add_test(t, test_a_mark_gone_before_the_carry_is_left_gone);
#endif
        tcase_add_test(t, test_a_chain_deleted_by_hand_is_rebuilt_by_ensure);
        tcase_add_test(t, test_each_owner_found_among_many);
        suite_add_tcase(s, t);
        t = tcase_create("summary");
        tcase_set_timeout(t, 120);
        tcase_add_test(t, test_ensure_takes_the_summarys_word);
        tcase_add_test(t, test_the_summary_follows_every_commit);
        tcase_add_test(t, test_a_summary_changed_by_hand_is_not_believed);
        tcase_add_test(t, test_ensure_by_summary_and_by_chains_agree);
        suite_add_tcase(s, t);
        return s;
}
