// SPDX-License-Identifier: LGPL-2.1-or-later
/* Ensure by hash (issue 14): FirewallEnsureHash and nb_fw_ensure() against
 * the real kernel, each test in a network namespace of its own. The
 * caller sends owners and the hashes an earlier apply returned; the helper
 * says which are stale, writing nothing; the library sends the rules of
 * those only. What is installed is read with nft(8) (tests/py's summary of
 * `nft -j list ruleset`), what was written with the kernel's ruleset
 * generation and the helper's write counters. */
#include <errno.h>
#include <grp.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fw_table.h"
#include "testutil.h"
#include "tests.h"

#define FW_ALLOW TU_ALLOW "exec_allow = /usr/sbin/nft\n"
#define GUESTS 12

/* Guest i's no-promisc and clean-traffic; variant changes its address,
 * and so its hash. */
static int guest_rules(int i, int variant, nb_fw_ruleset *rs)
{
        char mac[18], ip[16];
        int r;

        snprintf(mac, sizeof(mac), "52:54:00:03:%02x:%02x", (i >> 8) & 0xff, i & 0xff);
        snprintf(ip, sizeof(ip), "10.3.%d.%d", variant, i % 250 + 1);
        r = nb_fw_add_no_promisc(rs, mac);
        return r ? r : nb_fw_add_clean_traffic(rs, mac, (const char *const[]){ip, NULL});
}

static void name_of(int i, char name[IFNAMSIZ])
{
        snprintf(name, IFNAMSIZ, "eh%03d", i);
}

/* Replace guest i with variant's rules; its hash into hash (33 bytes). */
static void apply(nb_conn *c, int i, int variant, char *hash)
{
        nb_batch *b = nb_batch_new();
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        char name[IFNAMSIZ];
        nb_results *res;
        const char *h;

        name_of(i, name);
        ck_assert_int_eq(guest_rules(i, variant, rs), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, name, name, rs, NB_FW_REPLACE), 0);
        nb_fw_ruleset_free(rs);
        res = tu_submit_ok(c, b);
        ck_assert_int_eq(nb_result_firewall(res, 0, &h, NULL, NULL), 0);
        if (hash)
                snprintf(hash, 33, "%s", h);
        nb_results_free(res);
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

/* Our table, one line per chain (name, hook, comment, device, rules),
 * sorted: chains remade are listed last by the kernel. */
static char *table_lines(void)
{
        char *out;
        int r = tu_run((const char *const[]){"/bin/sh", "-c",
                                             "/usr/bin/python3 " TU_PY("nft_summary.py") " | sort",
                                             NULL},
                       &out);

        ck_assert_msg(r == 0, "reading table netdev netbroker failed (%d)", r);
        return out;
}

static nb_conn *setup(char hashes[GUESTS][33])
{
        nb_conn *c;

        tu_private_netns();
        tu_veths("eh", GUESTS);
        c = tu_spawn(FW_ALLOW);
        for (int i = 0; i < GUESTS; i++)
                apply(c, i, 0, hashes[i]);
        return c;
}

/* The daemon restarts, and its helper with it. */
static nb_conn *restart(nb_conn *c)
{
        nb_close(c);
        return tu_spawn(FW_ALLOW);
}

/* nb_fw_ensure()'s rules callback: guest k's variant-0 rules, noted. */
struct asked {
        bool v[GUESTS];
        unsigned n;
};

static int rules_of(size_t k, nb_fw_ruleset *rs, void *data)
{
        struct asked *a = data;

        a->v[k] = true;
        a->n++;
        return guest_rules((int)k, 0, rs);
}

/* nb_fw_ensure() of every guest with hashes (NULL entries: no hash). */
static nb_results *ensure_all(nb_conn *c, char hashes[GUESTS][33], struct asked *a)
{
        nb_fw_ensure_owner v[GUESTS];
        char names[GUESTS][IFNAMSIZ];
        nb_results *res = NULL;
        int r;

        for (int i = 0; i < GUESTS; i++) {
                name_of(i, names[i]);
                v[i] = (nb_fw_ensure_owner)NB_FW_ENSURE_OWNER_INIT;
                v[i].owner = v[i].ifname = names[i];
                v[i].hash = hashes[i];
        }
        memset(a, 0, sizeof(*a));
        r = nb_fw_ensure(c, v, GUESTS, rules_of, a, &res);
        ck_assert_msg(r == 0, "nb_fw_ensure: %s (%s)", strerror(-r), nb_conn_error(c));
        ck_assert_uint_eq(nb_results_count(res), GUESTS);
        ck_assert_msg(nb_results_first_error(res) < 0, "owner %ld: %s", nb_results_first_error(res),
                      nb_result_message(res, (size_t)nb_results_first_error(res)));
        return res;
}

static bool unchanged_at(const nb_results *res, int i, const char *want_hash)
{
        const char *h;
        bool same = false, stale = true;
        unsigned rules = 0;

        ck_assert_int_eq(nb_result_firewall(res, (size_t)i, &h, &same, &rules), 0);
        ck_assert_int_eq(nb_result_firewall_stale(res, (size_t)i, &stale), 0);
        ck_assert_msg(!stale, "owner %d: stale in the final result", i);
        ck_assert_str_eq(h, want_hash);
        ck_assert_uint_eq(rules, 23);
        return same;
}

START_TEST(test_ensure_by_hash_of_an_unchanged_set_writes_nothing)
{
        char hashes[GUESTS][33];
        nb_conn *c = setup(hashes);
        char *before, *after;
        nb_results *res;
        struct asked a;
        uint32_t gen;

        c = restart(c);
        before = table_lines();
        gen = kernel_gen();
        res = ensure_all(c, hashes, &a);
        for (int i = 0; i < GUESTS; i++)
                ck_assert_msg(unchanged_at(res, i, hashes[i]), "owner %d not found in place", i);
        nb_results_free(res);
        ck_assert_msg(a.n == 0, "the rules of %u owners were asked for", a.n);
        ck_assert_uint_eq(kernel_gen(), gen);
        ck_assert_uint_eq(tu_stat(c, "fw_transactions"), 0);
        ck_assert_uint_eq(tu_stat(c, "fw_rules_written"), 0);
        ck_assert_uint_eq(tu_stat(c, "fw_owners_unchanged"), GUESTS);
        after = table_lines();
        ck_assert_str_eq(after, before);
        free(before);
        free(after);
        nb_close(c);
}
END_TEST

/* Guest 3's chain flushed by hand (nft: the mark no longer holds, the
 * rules are counted), guest 7 replaced with other rules (its hash is not
 * the caller's), guest 9 removed: only those three are sent and remade,
 * in one transaction, and the table is again what the applies made.
 * Guest 11's hash is not known: its rules are sent, and found in place. */
START_TEST(test_ensure_by_hash_resends_only_the_stale_owners)
{
        char hashes[GUESTS][33], other[33];
        nb_conn *c = setup(hashes);
        char *want = table_lines(), *now;
        nb_batch *b = nb_batch_new();
        nb_results *res;
        struct asked a;

        apply(c, 7, 9, other);
        ck_assert_str_ne(other, hashes[7]);
        ck_assert_int_eq(nb_batch_firewall_remove(b, "eh009"), 0);
        nb_results_free(tu_submit_ok(c, b));
        c = restart(c);
        free(tu_sh("nft flush chain netdev netbroker eh003/from/mac"));
        snprintf(other, sizeof(other), "%s", hashes[11]);
        hashes[11][0] = '\0';
        res = ensure_all(c, hashes, &a);
        snprintf(hashes[11], sizeof(hashes[11]), "%s", other);
        for (int i = 0; i < GUESTS; i++) {
                bool resent = i == 3 || i == 7 || i == 9;
                ck_assert_msg(a.v[i] == (resent || i == 11), "owner %d: rules asked %d", i, a.v[i]);
                ck_assert_msg(unchanged_at(res, i, hashes[i]) == !resent,
                              "owner %d: unchanged is wrong", i);
        }
        nb_results_free(res);
        ck_assert_uint_eq(a.n, 4);
        ck_assert_uint_eq(tu_stat(c, "fw_transactions"), 1);
        ck_assert_uint_eq(tu_stat(c, "fw_owners_written"), 3);
        now = table_lines();
        ck_assert_str_eq(now, want);
        free(now);
        free(want);
        nb_close(c);
}
END_TEST

/* The same damage mended by nb_fw_ensure() and by a full ensure of every
 * owner: the same table. */
static void damage(nb_conn **c)
{
        nb_batch *b = nb_batch_new();

        apply(*c, 5, 4, NULL);
        ck_assert_int_eq(nb_batch_firewall_remove(b, "eh010"), 0);
        nb_results_free(tu_submit_ok(*c, b));
        *c = restart(*c);
        free(tu_sh("nft flush chain netdev netbroker eh002/from/mac"));
}

START_TEST(test_two_step_ensure_gives_the_table_a_full_ensure_gives)
{
        char hashes[GUESTS][33];
        nb_conn *c = setup(hashes);
        char *by_hash, *full;
        nb_results *res;
        nb_batch *b;
        struct asked a;

        damage(&c);
        res = ensure_all(c, hashes, &a);
        nb_results_free(res);
        ck_assert_uint_eq(a.n, 3);
        by_hash = table_lines();

        damage(&c);
        b = nb_batch_new();
        for (int i = 0; i < GUESTS; i++) {
                nb_fw_ruleset *rs = nb_fw_ruleset_new();
                char name[IFNAMSIZ];
                name_of(i, name);
                ck_assert_int_eq(guest_rules(i, 0, rs), 0);
                ck_assert_int_eq(nb_batch_firewall_apply(b, name, name, rs, NB_FW_ENSURE), 0);
                nb_fw_ruleset_free(rs);
        }
        nb_results_free(tu_submit_ok(c, b));
        ck_assert_uint_eq(tu_stat(c, "fw_owners_written"), 3);
        full = table_lines();
        ck_assert_str_eq(by_hash, full);
        free(by_hash);
        free(full);
        nb_close(c);
}
END_TEST

/* A caller that is not root: its own owner by hash (granted by
 * firewall_apply), and one made for root on its own interface, refused as
 * an apply is, before anything else of the request runs. */
static int as_nobody(const char *sock, const char *hash, char *msg, size_t size)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        bool stale = false;
        nb_conn *c;
        int r;

        if (!b || nb_connect(sock, &c) != 0)
                return 100;
        /* Its own: nbu0, an owner it made; in place with that hash. */
        nb_batch_firewall_ensure_hash(b, "nbu0", "nbu0", hash);
        r = nb_submit(c, b, &res);
        if (r != 0 || nb_result_status(res, 0) != 0 ||
            nb_result_firewall_stale(res, 0, &stale) != 0 || stale) {
                snprintf(msg, size, "own owner: %d %d %s stale %d", r,
                         res ? nb_result_status(res, 0) : 0, res ? nb_result_message(res, 0) : "",
                         stale);
                return 101;
        }
        nb_results_free(res);
        nb_batch_free(b);
        /* Root's owner "nbroot" bound to nbu0, with a wrong hash. */
        b = nb_batch_new();
        nb_batch_firewall_ensure_hash(b, "nbroot", "nbu0", "0123456789abcdef0123456789abcdef");
        r = nb_submit(c, b, &res);
        snprintf(msg, size, "%s", res ? nb_result_message(res, 0) : "");
        r = r ? 102 : nb_result_status(res, 0) != -EPERM ? 103 : 0;
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
        return r;
}

static int apply_as_nobody(const char *sock, char *hash, char *msg, size_t size)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        const char *h;
        nb_conn *c;
        int r;
        nb_tap_opts persist = NB_TAP_OPTS_INIT;

        if (!rs || !b || nb_connect(sock, &c) != 0 || guest_rules(0, 0, rs) != 0)
                return 110;
        persist.persist = true; /* it outlives this connection */
        persist.set_owner = true;
        persist.uid = persist.gid = 65534;
        nb_batch_tap_create(b, "nbu0", &persist);
        nb_batch_firewall_apply(b, "nbu0", "nbu0", rs, NB_FW_REPLACE);
        r = nb_submit(c, b, &res);
        if (r != 0 || nb_results_first_error(res) >= 0 ||
            nb_result_firewall(res, 1, &h, NULL, NULL) != 0) {
                snprintf(msg, size, "%s / %s", res ? nb_result_message(res, 0) : "",
                         res ? nb_result_message(res, 1) : "");
                return 111;
        }
        snprintf(hash, 33, "%s", h);
        nb_results_free(res);
        nb_batch_free(b);
        nb_fw_ruleset_free(rs);
        nb_close(c);
        return 0;
}

static void in_child_as_nobody(int (*fn)(const char *, char *, char *, size_t), const char *sock,
                               char *hash)
{
        char msg[600] = "";
        int status;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int r;
                if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                r = fn(sock, hash, msg, sizeof(msg));
                if (r)
                        fprintf(stderr, "as nobody: %d: %s\n", r, msg);
                else
                        printf("%s\n", msg);
                fflush(NULL);
                _exit(r);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
}

static int nobody_ensures(const char *sock, char *hash, char *msg, size_t size)
{
        int r = as_nobody(sock, hash, msg, size);

        return r == 0 && !strstr(msg, "does not own firewall owner nbroot") ? 104 : r;
}

/* Ensure of a table of thousands of chains whose mark is gone (someone
 * else committed): the rules are counted chain by chain, not by a dump of
 * every rule, whose cost grows as the square of the table (5.3 s for
 * 60,000 rules); the count finds the same: the owner whose chain another
 * hand flushed is written again, the others are left as they are. */
START_TEST(test_a_count_of_thousands_of_chains_is_made_chain_by_chain)
{
        enum { N = 210 }; /* 10 chains each */
        nb_batch *b = nb_batch_new();
        uint64_t counts0, dumps0;
        nb_results *res;
        nb_conn *c;

        tu_private_netns();
        tu_veths("cc", 8);
        c = tu_spawn(FW_ALLOW);
        for (int variant = 0; variant < 2; variant++) {
                for (int i = 0; i < N; i++) {
                        nb_fw_ruleset *rs = nb_fw_ruleset_new();
                        char owner[16], ifname[16];
                        snprintf(owner, sizeof(owner), "cc%03d", i);
                        snprintf(ifname, sizeof(ifname), "cc%03d", i % 8);
                        ck_assert_int_eq(guest_rules(i, 0, rs), 0);
                        ck_assert_int_eq(
                                nb_batch_firewall_apply(b, owner, ifname, rs,
                                                        variant ? NB_FW_ENSURE : NB_FW_REPLACE),
                                0);
                        nb_fw_ruleset_free(rs);
                }
                if (variant)
                        break;
                nb_results_free(tu_submit_ok(c, b));
                b = nb_batch_new();
                free(tu_sh("nft flush chain netdev netbroker cc007/from/mac"));
                counts0 = tu_stat(c, "nft_rule_counts_by_chain");
                dumps0 = tu_stat(c, "nft_rule_dumps");
        }
        res = tu_submit_ok(c, b);
        for (int i = 0; i < N; i++) {
                bool same = false;
                ck_assert_int_eq(nb_result_firewall(res, (size_t)i, NULL, &same, NULL), 0);
                ck_assert_msg(same == (i != 7), "owner %d: unchanged %d", i, same);
        }
        nb_results_free(res);
        ck_assert_uint_eq(tu_stat(c, "nft_rule_counts_by_chain"), counts0 + 1);
        ck_assert_uint_eq(tu_stat(c, "nft_rule_dumps"), dumps0);
        nb_close(c);
}
END_TEST

/* 33 bytes the children write and the parent reads. */
static char *mmap_shared_hash(void)
{
        char *p = mmap(NULL, 33, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        ck_assert_ptr_ne(p, MAP_FAILED);
        return p;
}

START_TEST(test_ensure_by_hash_of_another_callers_owner_is_refused)
{
        struct tu_helper h;
        nb_conn *root;
        nb_batch *b;
        nb_fw_ruleset *rs;
        char *hash = mmap_shared_hash();

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW "policy_dir = /nonexistent/nbtest-policy.d\n"
                                     "[policy uid 65534]\n"
                                     "ops = tap_create firewall_apply\n"
                                     "name_prefixes = nbu\n"
                                     "max_devices = 4\n");
        ck_assert_int_eq(chmod(h.sock, 0666), 0);
        in_child_as_nobody(apply_as_nobody, h.sock, hash);
        ck_assert_int_eq(strlen(hash), 32);
        /* Root binds an owner of its own to the caller's interface. */
        ck_assert_int_eq(nb_connect(h.sock, &root), 0);
        rs = nb_fw_ruleset_new();
        ck_assert_int_eq(guest_rules(1, 0, rs), 0);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_firewall_apply(b, "nbroot", "nbu0", rs, NB_FW_REPLACE), 0);
        nb_results_free(tu_submit_ok(root, b));
        nb_fw_ruleset_free(rs);
        in_child_as_nobody(nobody_ensures, h.sock, hash);
        nb_close(root);
        tu_helper_stop(&h);
        munmap(hash, 33);
}
END_TEST

Suite *fw_hash_suite(void)
{
        Suite *s = suite_create("fw-hash");
        TCase *t = tcase_create("fw-hash");

        tcase_set_timeout(t, 60);
        tcase_add_test(t, test_ensure_by_hash_of_an_unchanged_set_writes_nothing);
        tcase_add_test(t, test_ensure_by_hash_resends_only_the_stale_owners);
        tcase_add_test(t, test_two_step_ensure_gives_the_table_a_full_ensure_gives);
        tcase_add_test(t, test_ensure_by_hash_of_another_callers_owner_is_refused);
        tcase_add_test(t, test_a_count_of_thousands_of_chains_is_made_chain_by_chain);
        suite_add_tcase(s, t);
        return s;
}
