// SPDX-License-Identifier: LGPL-2.1-or-later
/* Only its own, and nothing left behind (issue 15): the firewall's tables
 * go with the last owner (by FirewallRemove, in a batch, with a gone
 * interface, and when other requests commit between a removal's read and
 * its commit, never taking what they put in) and come back with the next
 * apply, a helper starts clean with no table; and the connect deadlines:
 * nb_connect to a socket nobody serves, nb_spawn of a helper that never
 * says Hello, both -ETIMEDOUT in time, the spawned one killed and reaped.
 * Kernel tests run in a network namespace of their own; the idempotent
 * ops' root side is in test_link.c and test_firewall.c, their policy side
 * in test_policy.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

/* An owner whose rules use the shared set same_byte: its removal leaves
 * the set alone in the table, which is then empty, and goes. */
START_TEST(test_the_table_goes_with_the_shared_set_left_in_it)
{
        const nb_fw_rule grat = {
                .size = sizeof(nb_fw_rule), .verdict = NB_FW_DROP, .arp_gratuitous = true};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        nb_conn *c;
        char *t;

        tu_private_netns();
        tu_veth("clv0", "clv0p");
        c = tu_spawn(TU_ALLOW);
        ck_assert_int_eq(nb_fw_rule_add(rs, &grat), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "g", "clv0", rs, NB_FW_REPLACE), 0);
        nb_fw_ruleset_free(rs);
        run_ok(c, b);
        t = tu_sh("nft list set netdev netbroker same_byte 2>&1");
        ck_assert_msg(strstr(t, "set same_byte"), "no shared set:\n%s", t);
        free(t);
        remove_owners(c, (const char *const[]){"g", NULL});
        assert_no_fw_tables("the owner using the shared set removed");
        nb_close(c);
}
END_TEST

/* ---- a commit between a transaction's read and its own ----
 * A batch's firewall ops are one transaction: read at its first, committed
 * at its last, and the loop serves others in between (here, while an Exec
 * of the batch waits for a file to go). Whether the table goes is decided
 * by what the kernel holds when the commit is sent, not by that read. */

/* An asynchronous request's outcome. */
struct pending {
        bool done;
        int status; /* the callback's */
        long first_error; /* its first failed op, or -1 */
        char msg[256];
};

static void pending_done(nb_conn *conn, uint64_t id, int status, nb_results *res, void *opaque)
{
        struct pending *p = opaque;

        (void)conn;
        (void)id;
        p->done = true;
        p->status = status;
        p->first_error = res ? nb_results_first_error(res) : -1;
        if (res && p->first_error >= 0)
                snprintf(p->msg, sizeof(p->msg), "%s",
                         nb_result_message(res, (size_t)p->first_error));
        nb_results_free(res);
}

/* Send b (freed here) without waiting for its reply. */
static void submit_pending(nb_conn *c, nb_batch *b, struct pending *p)
{
        *p = (struct pending){0};
        ck_assert_int_eq(nb_submit_async(c, b, 60000, pending_done, p, NULL), 0);
        nb_batch_free(b);
}

/* Serve the connection until p's reply came (bounded, for order only). */
static void await_pending(nb_conn *c, const struct pending *p, const char *what)
{
        for (int i = 0; i < 3000 && !p->done; i++) {
                struct pollfd pfd = {.fd = nb_conn_fd(c), .events = POLLIN};
                ck_assert_int_ge(poll(&pfd, 1, 10), 0);
                ck_assert_int_ge(nb_conn_dispatch(c), 0);
        }
        ck_assert_msg(p->done, "%s: no reply", what);
        ck_assert_msg(p->status == 0 && p->first_error < 0, "%s: status %d, op %ld: %s", what,
                      p->status, p->first_error, p->msg);
}

static void await_file(const char *path, const char *what)
{
        for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++)
                usleep(5000);
        ck_assert_msg(access(path, F_OK) == 0, "%s never happened", what);
}

/* Remove owner first, wait (an Exec of sh, which makes `started` and
 * waits while `gate` exists), remove owner last: the transaction is read
 * at the first removal and committed at the last. */
static nb_batch *remove_around_a_wait(const char *first, const char *last, const char *gate,
                                      const char *started)
{
        static const char script[] = ": > \"$1\"; while [ -e \"$2\" ]; do sleep 0.01; done";
        const char *const argv[] = {"sh", "-c", script, "sh", started, gate, NULL};
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_firewall_remove(b, first), 0);
        ck_assert_int_eq(nb_batch_exec(b, "/bin/sh", argv, NULL, NULL, 0, 60000), 0);
        ck_assert_int_eq(nb_batch_firewall_remove(b, last), 0);
        return b;
}

static nb_batch *remove_one(const char *owner)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_firewall_remove(b, owner), 0);
        return b;
}

/* A gate (made) and its `started` file's name (not made). */
static void make_gate(char gate[static 32], char started[static 48])
{
        int fd;

        strcpy(gate, "/tmp/nbtest-gate-XXXXXX");
        fd = mkstemp(gate);
        ck_assert_int_ge(fd, 0);
        close(fd);
        snprintf(started, 48, "%s.started", gate);
        unlink(started);
}

/* A namespace with veths clv0-clv2 and a helper of its own. */
static nb_conn *three_veths_and_a_helper(void)
{
        tu_private_netns();
        tu_veth("clv0", "clv0p");
        tu_veth("clv1", "clv1p");
        tu_veth("clv2", "clv2p");
        return tu_spawn(TU_ALLOW);
}
/* Owners a, b and c; the batch removing a and c reads all three, then
 * waits while b's removal (another request on the same connection) reads
 * and commits. Each of the two saw an owner the other removed: the last
 * commit leaves no owner and must take the table, as after one batch. */
START_TEST(test_the_last_removal_takes_the_table_after_a_removal_since_its_read)
{
        char gate[32], started[48];
        struct pending ac, b;
        nb_conn *c;

        c = three_veths_and_a_helper();
        apply(c, "a", "clv0");
        apply(c, "b", "clv1");
        apply(c, "c", "clv2");
        make_gate(gate, started);
        submit_pending(c, remove_around_a_wait("a", "c", gate, started), &ac);
        await_file(started, "the batch's wait");
        submit_pending(c, remove_one("b"), &b);
        await_pending(c, &b, "the removal of b");
        ck_assert_msg(!ac.done, "the batch removing a and c did not wait");
        ck_assert_msg(nft_has_table("netbroker"), "the table went with owners a and c left");
        unlink(gate);
        await_pending(c, &ac, "the removal of a and c");
        unlink(started);
        ck_assert_uint_eq(owner_count(c), 0);
        assert_no_fw_tables("the last owners removed by a batch that read before b's removal");
        ck_assert_uint_eq(tu_stat(c, "fw_table_deleted"), 0);
        nb_close(c);
}
END_TEST

/* Owners a and c; the batch removing both reads them, then waits while
 * owner d is applied (and committed). Its commit leaves d: the table, and
 * d's chains in it, stay. (Deleting a table deletes all it holds: the
 * decision made from the batch's read took d along, whose apply had
 * succeeded.) */
START_TEST(test_a_removal_never_takes_an_owner_applied_since_its_read)
{
        char gate[32], started[48];
        struct pending ac;
        nb_conn *c;
        char *t;

        c = three_veths_and_a_helper();
        apply(c, "a", "clv0");
        apply(c, "c", "clv2");
        make_gate(gate, started);
        submit_pending(c, remove_around_a_wait("a", "c", gate, started), &ac);
        await_file(started, "the batch's wait");
        apply(c, "d", "clv1");
        ck_assert_msg(!ac.done, "the batch removing a and c did not wait");
        unlink(gate);
        await_pending(c, &ac, "the removal of a and c");
        unlink(started);
        ck_assert_uint_eq(owner_count(c), 1);
        t = tu_sh("nft list table netdev netbroker 2>&1");
        ck_assert_msg(strstr(t, "chain d/"), "owner d's chains went with a and c:\n%s", t);
        free(t);
        ck_assert_uint_eq(tu_stat(c, "fw_table_deleted"), 0);
        /* d's removal is the last: the table goes with it. */
        remove_owners(c, (const char *const[]){"d", NULL});
        assert_no_fw_tables("d removed after");
        nb_close(c);
}
END_TEST

#ifdef NB_TEST_HOOKS
/* The helper, holding at each hold point points[i] (lane.h:
 * nbd_test_hold_point) while holds[i] exists; each is a fresh path, absent
 * for now. */
static nb_conn *spawn_with_holds(const char *const *points, char (*holds)[32], size_t n)
{
        char var[64];
        nb_conn *c;

        for (size_t i = 0; i < n; i++) {
                int fd;
                strcpy(holds[i], "/tmp/nbtest-hold-XXXXXX");
                fd = mkstemp(holds[i]);
                ck_assert_int_ge(fd, 0);
                close(fd);
                unlink(holds[i]);
                snprintf(var, sizeof(var), "NETBROKERD_TEST_HOLD_%s", points[i]);
                ck_assert_int_eq(setenv(var, holds[i], 1), 0);
        }
        c = tu_spawn(TU_ALLOW);
        for (size_t i = 0; i < n; i++) {
                snprintf(var, sizeof(var), "NETBROKERD_TEST_HOLD_%s", points[i]);
                unsetenv(var);
        }
        return c;
}

static void hold(const char *path)
{
        int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        close(fd);
}

static void await_held(const char *path, const char *what)
{
        char held[64];

        snprintf(held, sizeof(held), "%s.held", path);
        await_file(held, what);
}

/* As the adopter saw it: the last two owners removed by two requests of
 * one connection, sent at once, each removing one. The firewall's lane
 * runs one closure at a time, but a request's read of the table and its
 * commit are two: when its read is in and the lane is busy (here, the
 * free of a transaction that committed before, held), the request waits
 * for the lane behind the other one, which then reads and commits in
 * between. (A commit of someone else's since the helper's last one, here
 * `nft add table`, makes the reads dump the chains, as they do wherever
 * another program uses nftables.) */
START_TEST(test_two_requests_removing_the_last_two_owners_at_once_take_the_table)
{
        static const char *const points[] = {"COMMIT_MUTED", "TXN_FREE"};
        char holds[2][32];
        struct pending first, a, b, ping;
        nb_batch *pb;
        nb_conn *c;

        tu_private_netns();
        tu_veth("clv0", "clv0p");
        tu_veth("clv1", "clv1p");
        c = spawn_with_holds(points, holds, 2);
        apply(c, "a", "clv0");
        apply(c, "b", "clv1");
        /* A replace of a, its commit held; another program commits. */
        hold(holds[0]);
        {
                nb_fw_ruleset *rs = nb_fw_ruleset_new();
                nb_batch *rb = nb_batch_new();
                ck_assert_int_eq(nb_fw_add_no_mac_spoofing(rs, "52:54:00:00:00:02"), 0);
                ck_assert_int_eq(nb_batch_firewall_apply(rb, "a", "clv0", rs, NB_FW_REPLACE), 0);
                nb_fw_ruleset_free(rs);
                submit_pending(c, rb, &first);
        }
        await_held(holds[0], "the replace's commit");
        free(tu_sh("nft add table inet nbtest_other"));
        /* The two removals wait for the lane (a Ping after them is
         * answered once both are in). */
        submit_pending(c, remove_one("a"), &a);
        submit_pending(c, remove_one("b"), &b);
        pb = nb_batch_new();
        ck_assert_int_eq(nb_batch_ping(pb), 0);
        submit_pending(c, pb, &ping);
        await_pending(c, &ping, "the Ping");
        /* The replace commits; a's removal reads; the replace's
         * transaction is freed on the lane, held there. */
        hold(holds[1]);
        unlink(holds[0]);
        await_held(holds[1], "the replace's transaction freed");
        unlink(holds[1]);
        await_pending(c, &first, "the replace of a");
        await_pending(c, &a, "the removal of a");
        await_pending(c, &b, "the removal of b");
        ck_assert_uint_eq(owner_count(c), 0);
        assert_no_fw_tables("the last two owners removed by two requests at once");
        nb_close(c);
}
END_TEST

/* Between the read that found the table empty and its deletion, someone
 * else puts a chain in it: the deletion, sent for the generation of that
 * read, is refused, and the table (their chain in it) stays. */
START_TEST(test_a_chain_made_after_the_table_was_read_empty_keeps_it)
{
        static const char *const points[] = {"DROP_READ"};
        char holds[1][32];
        struct pending a;
        nb_conn *c;
        char *t;

        tu_private_netns();
        tu_veth("clv0", "clv0p");
        c = spawn_with_holds(points, holds, 1);
        apply(c, "a", "clv0");
        hold(holds[0]);
        submit_pending(c, remove_one("a"), &a);
        await_held(holds[0], "the read of the empty table");
        free(tu_sh("nft add chain netdev netbroker theirs"));
        unlink(holds[0]);
        await_pending(c, &a, "the removal of a");
        ck_assert_uint_eq(owner_count(c), 0);
        t = tu_sh("nft list table netdev netbroker 2>&1");
        ck_assert_msg(strstr(t, "chain theirs"), "their chain went with the table:\n%s", t);
        free(t);
        nb_close(c);
}
END_TEST
#endif

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
        tcase_add_test(tables, test_the_table_goes_with_the_shared_set_left_in_it);
        tcase_add_test(tables,
                       test_the_last_removal_takes_the_table_after_a_removal_since_its_read);
        tcase_add_test(tables, test_a_removal_never_takes_an_owner_applied_since_its_read);
#ifdef NB_TEST_HOOKS
        tcase_add_test(tables,
                       test_two_requests_removing_the_last_two_owners_at_once_take_the_table);
        tcase_add_test(tables, test_a_chain_made_after_the_table_was_read_empty_keeps_it);
#endif
        tcase_add_test(deadlines, test_connect_to_a_socket_nobody_serves_times_out);
        tcase_add_test(deadlines,
                       test_spawn_of_a_helper_that_never_answers_times_out_and_is_reaped);
        suite_add_tcase(s, tables);
        suite_add_tcase(s, deadlines);
        return s;
}
