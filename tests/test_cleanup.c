// SPDX-License-Identifier: LGPL-2.1-or-later
/* Only its own, and nothing left behind (issue 15): the firewall's tables
 * go with the last owner (by FirewallRemove, in a batch, with a gone
 * interface) and come back with the next apply, a helper starts clean with
 * no table; and the connect deadlines: nb_connect to a socket nobody
 * serves, nb_spawn of a helper that never says Hello, both -ETIMEDOUT in
 * time, the spawned one killed and reaped. Kernel tests run in a network
 * namespace of their own; the idempotent ops' root side is in test_link.c
 * and test_firewall.c, their policy side in test_policy.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

/* ---- the empty table ---- */

/* Does `nft -j list ruleset` show a table of that name (any family)? */
static bool nft_has_table(const char *name)
{
        char needle[128];
        char *j = tu_sh("nft -j list ruleset");
        bool found;

        snprintf(needle, sizeof(needle), "\"name\": \"%s\"", name);
        found = strstr(j, needle) != NULL;
        free(j);
        return found;
}

/* None of the firewall's tables is left. */
static void assert_no_fw_tables(const char *when)
{
        char *j = tu_sh("nft -j list ruleset");

        ck_assert_msg(!strstr(j, "\"name\": \"netbroker\"") &&
                              !strstr(j, "\"name\": \"netbroker_gen\""),
                      "%s: a table of the helper's is left:\n%s", when, j);
        free(j);
}

static void run_ok(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;
        long bad;

        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        bad = nb_results_first_error(res);
        ck_assert_msg(bad < 0, "op %ld: %s", bad,
                      bad < 0 ? "" : nb_result_message(res, (size_t)bad));
        nb_results_free(res);
        nb_batch_free(b);
}

/* Apply owner's one rule on ifname; returns whether the helper left it
 * unchanged (ensure only). */
static bool apply_mode(nb_conn *c, const char *owner, const char *ifname, nb_fw_mode mode)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        const char *hash;
        bool unchanged = false;

        ck_assert_int_eq(nb_fw_add_no_mac_spoofing(rs, "52:54:00:00:00:01"), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, owner, ifname, rs, mode), 0);
        nb_fw_ruleset_free(rs);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_msg(nb_result_status(res, 0) == 0, "apply %s: %s", owner,
                      nb_result_message(res, 0));
        ck_assert_int_eq(nb_result_firewall(res, 0, &hash, &unchanged, NULL), 0);
        nb_results_free(res);
        nb_batch_free(b);
        return unchanged;
}

static void apply(nb_conn *c, const char *owner, const char *ifname)
{
        apply_mode(c, owner, ifname, NB_FW_REPLACE);
}

static void remove_owners(nb_conn *c, const char *const *owners)
{
        nb_batch *b = nb_batch_new();

        for (; *owners; owners++)
                ck_assert_int_eq(nb_batch_firewall_remove(b, *owners), 0);
        run_ok(c, b);
}

static size_t owner_count(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        size_t n;

        nb_batch_firewall_list(b);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        n = nb_result_fw_owner_count(res, 0);
        nb_results_free(res);
        nb_batch_free(b);
        return n;
}

/* The last owner's removal takes the table and the mark's table along,
 * in one batch or one by one; the next apply makes them again; a helper
 * started with no table works, and the generation mark too (an ensure
 * after it leaves the owner unchanged). Our own deletion is no
 * "table deleted" event. */
START_TEST(test_tables_go_with_the_last_owner_and_come_back)
{
        nb_conn *c;

        tu_private_netns();
        tu_veth("clv0", "clv0p");
        tu_veth("clv1", "clv1p");
        c = tu_spawn(TU_ALLOW);
        apply(c, "a", "clv0");
        apply(c, "b", "clv1");
        ck_assert(nft_has_table("netbroker"));
        remove_owners(c, (const char *const[]){"a", NULL});
        ck_assert_msg(nft_has_table("netbroker"), "the table went with an owner left");
        ck_assert_uint_eq(owner_count(c), 1);
        remove_owners(c, (const char *const[]){"b", NULL});
        assert_no_fw_tables("the last owner removed");
        ck_assert_uint_eq(owner_count(c), 0);

        /* Back with the next apply; two removed in one batch. */
        apply(c, "a", "clv0");
        apply(c, "b", "clv1");
        ck_assert(nft_has_table("netbroker"));
        ck_assert_uint_eq(owner_count(c), 2);
        remove_owners(c, (const char *const[]){"a", "b", NULL});
        assert_no_fw_tables("both owners removed in one batch");
        ck_assert_uint_eq(tu_stat(c, "fw_table_deleted"), 0);

        /* With the interface: the gone owner's removal drops the table. */
        apply(c, "a", "clv0");
        free(tu_sh("ip link del clv0"));
        for (int i = 0; i < 100 && nft_has_table("netbroker"); i++)
                usleep(50000);
        assert_no_fw_tables("the last owner's interface gone");
        ck_assert_uint_eq(tu_stat(c, "fw_table_deleted"), 0);
        nb_close(c);

        /* A helper started with no table: clean, and applies work. */
        c = tu_spawn(TU_ALLOW);
        ck_assert_uint_eq(owner_count(c), 0);
        assert_no_fw_tables("a helper started");
        apply(c, "b", "clv1");
        ck_assert(nft_has_table("netbroker"));
        ck_assert_uint_eq(owner_count(c), 1);
        /* The mark came back with it (when the kernel has the arp family):
         * an ensure reads the summary and leaves the owner as it is. */
        if (!nft_has_table("netbroker_gen"))
                printf("no generation mark here (no arp family): ensure reads the chains\n");
        ck_assert_msg(apply_mode(c, "b", "clv1", NB_FW_ENSURE), "ensure rewrote owner b");
        /* Someone else's flush is still reported. */
        free(tu_sh("nft delete table netdev netbroker"));
        for (int i = 0; i < 100 && tu_stat(c, "fw_table_deleted") == 0; i++)
                usleep(50000);
        ck_assert_uint_eq(tu_stat(c, "fw_table_deleted"), 1);
        /* A chain of someone else's in our table keeps it (and itself). */
        apply(c, "b", "clv1");
        free(tu_sh("nft add chain netdev netbroker theirs"));
        remove_owners(c, (const char *const[]){"b", NULL});
        ck_assert_uint_eq(owner_count(c), 0);
        char *j = tu_sh("nft -j list ruleset");
        ck_assert_msg(strstr(j, "\"name\": \"theirs\""), "their chain went:\n%s", j);
        free(j);
        nb_close(c);
}
END_TEST

/* ---- connect deadlines ---- */

/* A listening socket nobody accepts on, with a backlog of one. */
static int dead_listener(char *path, size_t len)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        snprintf(path, len, "/tmp/nbtest-dead-%d.sock", (int)getpid());
        unlink(path);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(fd, 0), 0);
        return fd;
}

/* Nobody serves the socket: the Hello is never answered, and once the
 * backlog is full connect() itself would wait. Both are -ETIMEDOUT after
 * the deadline, and not long after it. */
START_TEST(test_connect_to_a_socket_nobody_serves_times_out)
{
        char path[108];
        int lfd = dead_listener(path, sizeof(path));
        nb_conn *c = NULL;
        uint64_t t0;
        int r;

        for (int i = 0; i < 3; i++) {
                t0 = tu_now_us();
                r = nb_connect_timeout(path, 300, &c);
                uint64_t took = tu_now_us() - t0;
                printf("nb_connect_timeout(300 ms) #%d: %s after %.0f ms (%s)\n", i, strerror(-r),
                       took / 1000.0, nb_last_error());
                ck_assert_int_eq(r, -ETIMEDOUT);
                ck_assert_ptr_null(c);
                ck_assert_uint_ge(took, 290 * 1000);
                ck_assert_uint_lt(took, 5 * 1000 * 1000);
                ck_assert_msg(strstr(nb_last_error(), "deadline"), "%s", nb_last_error());
        }
        close(lfd);
        unlink(path);
}
END_TEST

/* A "helper" that never answers Hello (a script that sleeps): nb_spawn
 * gives up at the deadline with -ETIMEDOUT, and the child is killed and
 * reaped: no child of ours is left, not even a zombie. */
START_TEST(test_spawn_of_a_helper_that_never_answers_times_out_and_is_reaped)
{
        char script[64];
        nb_spawn_opts o = {.size = sizeof(nb_spawn_opts), .hello_timeout_ms = 300};
        nb_conn *c = NULL;
        FILE *f;
        uint64_t t0, took;
        int r;

        snprintf(script, sizeof(script), "/tmp/nbtest-mute-%d.sh", (int)getpid());
        f = fopen(script, "w");
        ck_assert_ptr_nonnull(f);
        fputs("#!/bin/sh\nexec sleep 60\n", f);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(script, 0755), 0);
        ck_assert_int_eq(tu_children_of(getpid()), 0);
        t0 = tu_now_us();
        r = nb_spawn(script, &o, &c);
        took = tu_now_us() - t0;
        printf("nb_spawn(never answers, 300 ms): %s after %.0f ms (%s)\n", strerror(-r),
               took / 1000.0, nb_last_error());
        ck_assert_int_eq(r, -ETIMEDOUT);
        ck_assert_ptr_null(c);
        ck_assert_uint_ge(took, 290 * 1000);
        ck_assert_uint_lt(took, 5 * 1000 * 1000);
        ck_assert_int_eq(tu_children_of(getpid()), 0);
        ck_assert_int_eq(tu_zombies_of(getpid()), 0);
        unlink(script);
}
END_TEST

Suite *cleanup_suite(void)
{
        Suite *s = suite_create("cleanup");
        TCase *tables = tcase_create("cleanup-tables"),
              *deadlines = tcase_create("cleanup-deadlines");

        tcase_set_timeout(tables, 120);
        tcase_set_timeout(deadlines, 30);
        tcase_add_test(tables, test_tables_go_with_the_last_owner_and_come_back);
        tcase_add_test(deadlines, test_connect_to_a_socket_nobody_serves_times_out);
        tcase_add_test(deadlines,
                       test_spawn_of_a_helper_that_never_answers_times_out_and_is_reaped);
        suite_add_tcase(s, tables);
        suite_add_tcase(s, deadlines);
        return s;
}
