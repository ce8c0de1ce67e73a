// SPDX-License-Identifier: LGPL-2.1-or-later
/* Events: someone else deleting one of the helper's nftables tables is told
 * to the connections that asked (libnetbroker always asks) and may write to
 * that table; nobody else hears, an old client's Hello (no events) gets
 * none, and a client that never reads holds at most one of each table in
 * the helper, the rest counted as coalesced. The daemon's side (the filter
 * and the limit gone, then put back, with real traffic) is in
 * test_bw_filter.c. Every test runs in a network namespace of its own. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/un.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile.h"
#include "testutil.h"
#include "tests.h"

#define NO_DIR "policy_dir = /nonexistent/nbtest-policy.d\n"

/* Each deletes the three tables once (each made first, by someone else). */
#define DELETE_ALL                                                                                 \
        "nft -f - <<'EOF'\n"                                                                       \
        "add table netdev netbroker\ndelete table netdev netbroker\n"                              \
        "add table netdev netbroker_bw\ndelete table netdev netbroker_bw\n"                        \
        "add table inet netbroker_net\ndelete table inet netbroker_net\n"                          \
        "EOF"

/* What a callback heard, as "family:table;" in order. */
struct heard {
        char text[512];
        unsigned n;
};

static void record(nb_conn *c, const nb_event *ev, void *opaque)
{
        struct heard *h = opaque;
        size_t len = strlen(h->text);

        (void)c;
        if (ev->kind == NB_EVENT_TABLE_DELETED)
                snprintf(h->text + len, sizeof(h->text) - len, "%d:%s;", ev->family, ev->table);
        else
                snprintf(h->text + len, sizeof(h->text) - len, "kind %d;", (int)ev->kind);
        h->n++;
}

/* Everything the helper sent before the reply of a Ping is read with it;
 * then the callbacks run. */
static void ping_and_dispatch(nb_conn *c)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_ping(b), 0);
        nb_results_free(tu_submit_ok(c, b));
        ck_assert_int_ge(nb_conn_dispatch(c), 0);
}

/* ---- a listener of another uid, in a child process ---- */

struct listener {
        pid_t pid;
        int sock;
        uid_t uid;
};

static void listener_main(int sock, const char *path, uid_t uid)
{
        struct heard h = {.n = 0};
        nb_conn *c = NULL;
        char go;
        int r = 0;

        if (uid && (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0))
                r = -errno;
        if (r == 0)
                r = nb_connect(path, &c);
        if (r == 0)
                r = nb_conn_on_event(c, record, &h);
        if (send(sock, &r, sizeof(r), 0) != sizeof(r) || r < 0)
                _exit(1);
        if (recv(sock, &go, 1, 0) != 1)
                _exit(1);
        ping_and_dispatch(c);
        if (send(sock, h.text, sizeof(h.text), 0) != sizeof(h.text))
                _exit(1);
        nb_close(c);
        _exit(0);
}

static void listener_start(struct listener *l, const struct tu_helper *h, uid_t uid)
{
        int sv[2], r = 0;

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        l->uid = uid;
        l->pid = fork();
        ck_assert_int_ge(l->pid, 0);
        if (l->pid == 0) {
                close(sv[0]);
                listener_main(sv[1], h->sock, uid);
        }
        close(sv[1]);
        l->sock = sv[0];
        ck_assert_int_eq(recv(l->sock, &r, sizeof(r), 0), sizeof(r));
        ck_assert_msg(r == 0, "uid %u cannot listen: %s", (unsigned)uid, strerror(-r));
}

/* What it heard, once told that everything was sent. */
static void listener_expect(struct listener *l, const char *want)
{
        char text[512];
        int status;

        ck_assert_int_eq(send(l->sock, "g", 1, 0), 1);
        ck_assert_int_eq(recv(l->sock, text, sizeof(text), 0), sizeof(text));
        ck_assert_int_eq(waitpid(l->pid, &status, 0), l->pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "uid %u: status %d",
                      (unsigned)l->uid, status);
        close(l->sock);
        printf("events: uid %u heard '%s'\n", (unsigned)l->uid, text);
        ck_assert_msg(strcmp(text, want) == 0, "uid %u heard '%s', not '%s'", (unsigned)l->uid,
                      text, want);
}

/* ---- raw clients ---- */

/* Send a Ping and read up to its reply: the Events before it. */
static unsigned raw_events_before_ping(int fd, uint64_t id, const char *table)
{
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Ping ping = NETBROKER__PING__INIT;
        unsigned n = 0;

        op.op_case = NETBROKER__OP__OP_PING;
        op.ping = &ping;
        th_send_request(fd, id, ops, 1, NULL, 0);
        for (;;) {
                Netbroker__ServerMessage *r = tu_raw_recv(fd, NULL);
                ck_assert_ptr_nonnull(r);
                if (r->msg_case == NETBROKER__SERVER_MESSAGE__MSG_REPLY) {
                        ck_assert_uint_eq(r->reply->id, id);
                        netbroker__server_message__free_unpacked(r, NULL);
                        return n;
                }
                ck_assert_int_eq(r->msg_case, NETBROKER__SERVER_MESSAGE__MSG_EVENT);
                ck_assert_int_eq(r->event->ev_case, NETBROKER__EVENT__EV_TABLE_DELETED);
                ck_assert_str_eq(r->event->table_deleted->table, table);
                netbroker__server_message__free_unpacked(r, NULL);
                n++;
        }
}

static uint64_t raw_stat(const struct tu_helper *h, const char *name)
{
        nb_conn *c;
        uint64_t v;

        ck_assert_int_eq(nb_connect(h->sock, &c), 0);
        v = tu_stat(c, name);
        nb_close(c);
        return v;
}

/* The helper heard `n` deletions of its tables (each sent or coalesced,
 * to each connection that hears it): wait for it, 5 s at most. */
static void await_events(const struct tu_helper *h, uint64_t want)
{
        uint64_t got = 0;

        for (int i = 0; i < 500; i++) {
                got = raw_stat(h, "events_sent") + raw_stat(h, "events_coalesced");
                if (got >= want)
                        break;
                usleep(10000);
        }
        ck_assert_msg(got == want, "the helper told %llu events, not %llu", (unsigned long long)got,
                      (unsigned long long)want);
}

/* ---- the tests ---- */

static const char audience_policy[] = "[policy uid 65534]\nops = firewall_apply firewall_remove\n"
                                      "[policy uid 65533]\nops = bandwidth_set bandwidth_clear\n"
                                      "[policy uid 65532]\nops = net_apply net_remove\n"
                                      "[policy uid 65531]\nops = tap_create\nname_prefixes = evx\n";

/* Root hears of all three tables; each other uid of the table it may
 * write to, and one granted none of them of nothing; a client whose Hello
 * did not ask (an older library's) gets no Event frame. */
START_TEST(test_only_callers_who_may_write_a_table_hear_it_was_deleted)
{
        static const uid_t uids[] = {0, 65534, 65533, 65532, 65531};
        static const char *const want[] = {
                "5:netbroker;5:netbroker_bw;1:netbroker_net;",
                "5:netbroker;",
                "5:netbroker_bw;",
                "1:netbroker_net;",
                "",
        };
        struct listener l[5];
        struct tu_helper h;
        char conf[1024];
        int old;

        tu_private_netns();
        snprintf(conf, sizeof(conf), TU_ALLOW NO_DIR "%s", audience_policy);
        tu_helper_start(&h, conf);
        ck_assert_int_eq(chmod(h.sock, 0666), 0);
        for (size_t i = 0; i < 5; i++)
                listener_start(&l[i], &h, uids[i]);
        old = tu_raw_connect(h.sock);
        tu_raw_hello(old);

        free(tu_sh(DELETE_ALL));
        /* Root's three, and one for each of three uids. */
        await_events(&h, 6);
        ck_assert_uint_eq(raw_stat(&h, "events_coalesced"), 0);
        for (size_t i = 0; i < 5; i++)
                listener_expect(&l[i], want[i]);
        ck_assert_uint_eq(raw_events_before_ping(old, 1, ""), 0);
        close(old);

        /* A table of another name, or our names in another family, is
         * not ours. */
        free(tu_sh("nft add table inet netbroker && nft delete table inet netbroker && "
                   "nft add table netdev netbroker_x && nft delete table netdev netbroker_x"));
        listener_start(&l[0], &h, 0);
        usleep(300000);
        listener_expect(&l[0], "");
        ck_assert_uint_eq(raw_stat(&h, "events_sent"), 6);
        tu_helper_stop(&h);
}
END_TEST

/* A client that asked for events and never reads: the helper writes what
 * its socket takes and then holds one Event for the table, counting the
 * rest as coalesced; read at last, every one written arrives, and the
 * connection serves. The library, not dispatched meanwhile, keeps one. */
START_TEST(test_a_client_that_never_reads_holds_one_event_of_a_table)
{
        enum { DELETIONS = 3000 };
        struct tu_helper h;
        struct heard heard = {.n = 0};
        uint64_t sent, coalesced;
        unsigned got;
        nb_conn *lib;
        FILE *f;
        int fd;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW);
        fd = tu_raw_connect(h.sock);
        tu_raw_hello_events(fd, true);
        ck_assert_int_eq(nb_connect(h.sock, &lib), 0);
        ck_assert(nb_conn_has_feature(lib, "events"));
        ck_assert_int_eq(nb_conn_on_event(lib, record, &heard), 0);

        /* One transaction: DELETIONS times made and deleted. */
        f = fopen("/tmp/nbtest-events.nft", "w");
        ck_assert_ptr_nonnull(f);
        for (int i = 0; i < DELETIONS; i++)
                fputs("add table netdev netbroker\ndelete table netdev netbroker\n", f);
        ck_assert_int_eq(fclose(f), 0);
        free(tu_sh("nft -f /tmp/nbtest-events.nft"));
        unlink("/tmp/nbtest-events.nft");
        await_events(&h, 2 * DELETIONS);
        sent = raw_stat(&h, "events_sent");
        coalesced = raw_stat(&h, "events_coalesced");
        printf("events: %d deletions, to 2 connections: %llu sent, %llu coalesced\n", DELETIONS,
               (unsigned long long)sent, (unsigned long long)coalesced);
        /* Neither client read: each socket took what it holds, the helper
         * one more each. */
        ck_assert_uint_gt(coalesced, DELETIONS);
        ck_assert_uint_eq(sent + coalesced, 2 * DELETIONS);

        got = raw_events_before_ping(fd, 1, "netbroker");
        ping_and_dispatch(lib);
        printf("events: the raw client read %u, the library delivered %u ('%s')\n", got, heard.n,
               heard.text);
        ck_assert_uint_eq(heard.n, 1);
        ck_assert_str_eq(heard.text, "5:netbroker;");
        /* The rest of what was sent went to the library. */
        ck_assert_uint_ge(got, 1);
        ck_assert_uint_lt(got, sent);
        /* Both still served, and nothing is left waiting. */
        ck_assert_uint_eq(raw_events_before_ping(fd, 2, "netbroker"), 0);
        heard.n = 0;
        ping_and_dispatch(lib);
        ck_assert_uint_eq(heard.n, 0);
        close(fd);
        nb_close(lib);
        tu_helper_stop(&h);
}
END_TEST

/* A request's callback that closes its connection, as a daemon tearing
 * down its driver does (and then frees what opaque points to). */
static void close_in_callback(nb_conn *c, uint64_t id, int status, nb_results *res, void *opaque)
{
        (void)id;
        (void)status;
        nb_results_free(res);
        *(bool *)opaque = true;
        nb_close(c);
}

/* An event read, then a request whose callback closes the connection,
 * both run by one dispatch: the close is finished by it, and the event
 * callback does not run after (the review saw it run on a closed
 * connection, whose opaque a daemon has freed by then). */
START_TEST(test_no_event_callback_runs_after_a_close_from_a_callback)
{
        struct heard heard = {.n = 0};
        bool closed = false;
        nb_batch *b;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        ck_assert_int_eq(nb_conn_on_event(c, record, &heard), 0);
        free(tu_sh("nft add table netdev netbroker && nft delete table netdev netbroker"));
        /* Read (a Stats through the same connection), not yet delivered. */
        for (int i = 0; i < 500 && tu_stat(c, "events_sent") == 0; i++)
                usleep(10000);
        ck_assert_uint_eq(tu_stat(c, "events_sent"), 1);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_ping(b), 0);
        ck_assert_int_eq(nb_submit_async(c, b, 5000, close_in_callback, &closed, NULL), 0);
        nb_batch_free(b);
        /* Its reply read too (a synchronous Ping's comes after it); then
         * one dispatch runs both. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_ping(b), 0);
        nb_results_free(tu_submit_ok(c, b));
        ck_assert_int_ge(nb_conn_dispatch(c), 1);
        ck_assert(closed);
        ck_assert_msg(heard.n == 0, "an event callback ran after nb_close(): '%s'", heard.text);
}
END_TEST

/* ---- a helper that lies ---- */

struct liar {
        int listen_fd;
        atomic_bool stop;
        unsigned sent;
};

/* Accepts one client, answers its Hello (events on), then sends Events
 * of tables the helper never has, and now and then one of its own, until
 * the client goes or it is told to stop; never a Reply. */
static void *liar_main(void *arg)
{
        struct liar *l = arg;
        Netbroker__ServerMessage m = NETBROKER__SERVER_MESSAGE__INIT;
        Netbroker__Hello h = NETBROKER__HELLO__INIT;
        Netbroker__Event ev = NETBROKER__EVENT__INIT;
        Netbroker__TableDeleted td = NETBROKER__TABLE_DELETED__INIT;
        char table[32];
        uint8_t buf[4096];
        int fd = accept4(l->listen_fd, NULL, NULL, SOCK_CLOEXEC);

        if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
                goto out;
        h.version = NBP_PROTOCOL_VERSION;
        h.software = (char *)"netbrokerd 0.2.0";
        h.events = true;
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_HELLO;
        m.hello = &h;
        if (tu_raw_send_msg(fd, &m.base, NULL, 0) < 0)
                goto out;
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_EVENT;
        m.event = &ev;
        ev.ev_case = NETBROKER__EVENT__EV_TABLE_DELETED;
        ev.table_deleted = &td;
        td.table = table;
        while (!atomic_load(&l->stop)) {
                bool real = l->sent % 1000 == 0;
                td.family = real ? 5 : l->sent;
                snprintf(table, sizeof(table), real ? "netbroker" : "t%u\x1b[2J", l->sent);
                if (tu_raw_send_msg(fd, &m.base, NULL, 0) < 0)
                        break;
                l->sent++;
        }
out:
        if (fd >= 0)
                close(fd);
        return NULL;
}

/* A helper that sends Events without end and answers nothing: the
 * library keeps the helper's three tables' alone (one here), and a
 * submit's deadline holds. Before, every table was kept (a list scanned
 * for each: 150,000 took 44 s and 16 MB) and the reading went on as long
 * as frames came, far past the deadline. */
START_TEST(test_a_lying_helpers_events_neither_grow_the_library_nor_outlast_a_deadline)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct liar l = {.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
        struct heard heard = {.n = 0};
        nb_results *res = NULL;
        uint64_t t0, took;
        pthread_t t;
        nb_batch *b;
        nb_conn *c;
        int r;

        snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/nbtest-liar-%d.sock", (int)getpid());
        unlink(sa.sun_path);
        ck_assert_int_eq(bind(l.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(l.listen_fd, 1), 0);
        ck_assert_int_eq(pthread_create(&t, NULL, liar_main, &l), 0);
        ck_assert_int_eq(nb_connect(sa.sun_path, &c), 0);
        ck_assert_int_eq(nb_conn_on_event(c, record, &heard), 0);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_ping(b), 0);
        t0 = tu_now_us();
        r = nb_submit_timeout(c, b, 300, &res);
        took = tu_now_us() - t0;
        nb_batch_free(b);
        ck_assert_int_ge(nb_conn_dispatch(c), 0);
        atomic_store(&l.stop, true);
        nb_close(c);
        pthread_join(t, NULL);
        close(l.listen_fd);
        unlink(sa.sun_path);
        printf("events: a lying helper sent %u events; the 300 ms submit ended after %.0f ms "
               "(%s); the callback heard '%s'\n",
               l.sent, took / 1000.0, strerror(-r), heard.text);
        ck_assert_int_eq(r, -ETIMEDOUT);
        ck_assert_uint_lt(took, 3000000);
        ck_assert_uint_le(heard.n, 1);
        ck_assert(heard.n == 0 || strcmp(heard.text, "5:netbroker;") == 0);
}
END_TEST

/* netbrokerctl events: an operator's or a script's way to hear it. */
static pid_t ctl_events(const char *sock, const char *count, int out)
{
        const char *argv[] = {NB_TEST_CTL, "--socket", sock,        "--json", "events",
                              "--count",   count,      "--timeout", "10000",  NULL};
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (dup2(out, 1) < 0)
                        _exit(126);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        return pid;
}

START_TEST(test_netbrokerctl_events_prints_a_deletion_as_it_comes)
{
        struct tu_helper h;
        char buf[1024] = "";
        int out = memfd_create("out", 0), status;
        uint64_t before;
        pid_t pid;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW);
        before = raw_stat(&h, "connections");
        pid = ctl_events(h.sock, "1", out);
        /* Connected (ours and its), then the deletion. */
        for (int i = 0; i < 500 && raw_stat(&h, "connections") < before + 3; i++)
                usleep(10000);
        free(tu_sh("nft add table netdev netbroker && nft delete table netdev netbroker"));
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_int_eq(pread(out, buf, sizeof(buf) - 1, 0) > 0, 1);
        printf("events: netbrokerctl --json events --count 1: %s", buf);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
        ck_assert_msg(strstr(buf, "\"ok\":true") &&
                              strstr(buf, "{\"kind\":\"table_deleted\",\"family\":\"netdev\","
                                          "\"table\":\"netbroker\"}") &&
                              strstr(buf, "\"count\":1}"),
                      "%s", buf);
        close(out);
        tu_helper_stop(&h);
}
END_TEST

Suite *events_suite(void)
{
        Suite *s = suite_create("events");
        TCase *tc = tcase_create("events");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_only_callers_who_may_write_a_table_hear_it_was_deleted);
        tcase_add_test(tc, test_a_client_that_never_reads_holds_one_event_of_a_table);
        tcase_add_test(tc, test_netbrokerctl_events_prints_a_deletion_as_it_comes);
        tcase_add_test(tc, test_no_event_callback_runs_after_a_close_from_a_callback);
        tcase_add_test(tc,
                       test_a_lying_helpers_events_neither_grow_the_library_nor_outlast_a_deadline);
        suite_add_tcase(s, tc);
        return s;
}
