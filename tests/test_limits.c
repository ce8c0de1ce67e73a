// SPDX-License-Identifier: LGPL-2.1-or-later
/* Limits: every cap of the config file, set small, exercised at N (served)
 * and at N+1 (refused cleanly: an error result, or an Error and a closed
 * connection), with the helper still serving others afterwards and nothing
 * run for what was refused. A refused request that carried an Exec of
 * `touch MARKER` must leave no MARKER behind.
 *
 * Tcases tagged "exec" run programs; the others run no program, so they
 * can run with the helper itself under valgrind 3.19, which lacks
 * pidfd_open (scripts/test.sh). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "config_load.h"
#include "testutil.h"
#include "tests.h"

/* ---- raw protocol ---- */

static Netbroker__Ping ping_msg = NETBROKER__PING__INIT;
static Netbroker__Op ping_op = {PROTOBUF_C_MESSAGE_INIT(&netbroker__op__descriptor),
                                NETBROKER__OP__OP_PING,
                                {.ping = &ping_msg}};

/* An Exec op; argv strings are borrowed and must outlive the op. */
struct exec_op {
        Netbroker__Op op;
        Netbroker__Exec e;
};

static Netbroker__Op *exec_op(struct exec_op *x, const char *path, const char *const *argv,
                              size_t argc)
{
        netbroker__op__init(&x->op);
        netbroker__exec__init(&x->e);
        x->e.path = (char *)path;
        x->e.argv = (char **)argv;
        x->e.n_argv = argc;
        x->op.op_case = NETBROKER__OP__OP_EXEC;
        x->op.exec = &x->e;
        return &x->op;
}

/* A marker file that an Exec creates when it runs. */
struct marker {
        char path[96];
        char cmd[128];
        const char *argv[4];
};

static void marker_init(struct marker *m, const char *what)
{
        static unsigned seq;

        snprintf(m->path, sizeof(m->path), "/tmp/nbtest-limits-%d-%u-%s", (int)getpid(), seq++,
                 what);
        unlink(m->path);
        snprintf(m->cmd, sizeof(m->cmd), "touch %s", m->path);
        m->argv[0] = "sh";
        m->argv[1] = "-c";
        m->argv[2] = m->cmd;
        m->argv[3] = NULL;
}

static Netbroker__Op *touch_op(struct exec_op *x, struct marker *m)
{
        return exec_op(x, "/bin/sh", m->argv, 3);
}

static bool marker_exists(const struct marker *m)
{
        return access(m->path, F_OK) == 0;
}

static void marker_remove(const struct marker *m)
{
        unlink(m->path);
}

static void fill_request(Netbroker__ClientMessage *cm, Netbroker__Request *req, uint64_t id,
                         Netbroker__Op **ops, size_t n)
{
        netbroker__client_message__init(cm);
        netbroker__request__init(req);
        req->id = id;
        req->ops = ops;
        req->n_ops = n;
        cm->msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        cm->request = req;
}

static void send_ops(int fd, uint64_t id, Netbroker__Op **ops, size_t n, const int *fds,
                     size_t nfds)
{
        Netbroker__ClientMessage cm;
        Netbroker__Request req;

        fill_request(&cm, &req, id, ops, n);
        ck_assert_int_eq(tu_raw_send_msg(fd, &cm.base, fds, nfds), 0);
}

/* The next message, which must be the Reply to `id` with n results. */
static Netbroker__ServerMessage *recv_reply(int fd, uint64_t id, size_t n)
{
        int err;
        Netbroker__ServerMessage *m = tu_raw_recv(fd, &err);

        ck_assert_msg(m != NULL, "no reply (err %d)", err);
        ck_assert_int_eq(m->msg_case, NETBROKER__SERVER_MESSAGE__MSG_REPLY);
        ck_assert_uint_eq(m->reply->id, id);
        ck_assert_uint_eq(m->reply->n_results, n);
        return m;
}

static void expect_all_status(int fd, uint64_t id, size_t n, int status)
{
        Netbroker__ServerMessage *m = recv_reply(fd, id, n);

        for (size_t i = 0; i < n; i++)
                ck_assert_msg(m->reply->results[i]->status == status, "op %zu: %d %s", i,
                              m->reply->results[i]->status, m->reply->results[i]->message);
        netbroker__server_message__free_unpacked(m, NULL);
}

/* A request of ops[0..n-1], every op of which succeeds. */
static void served(int fd, uint64_t id, Netbroker__Op **ops, size_t n)
{
        send_ops(fd, id, ops, n, NULL, 0);
        expect_all_status(fd, id, n, 0);
}

/* The next message is the Reply to `id` whose one op failed with
 * `status`, saying `needle`. */
static void expect_one_failed(int fd, uint64_t id, int status, const char *needle)
{
        Netbroker__ServerMessage *m = recv_reply(fd, id, 1);

        ck_assert_int_eq(m->reply->results[0]->status, status);
        ck_assert_msg(strstr(m->reply->results[0]->message, needle), "%s",
                      m->reply->results[0]->message);
        netbroker__server_message__free_unpacked(m, NULL);
}

static void ping_ok(int fd, uint64_t id)
{
        Netbroker__Op *ops[1] = {&ping_op};

        served(fd, id, ops, 1);
}

/* A connection past Hello. */
static int raw_client(struct tu_helper *h)
{
        int fd = tu_raw_connect(h->sock);

        tu_raw_hello(fd);
        return fd;
}

/* A new client is served: the helper survived and its slots are free,
 * once it has seen the closes of the connections a test just closed
 * (EUSERS until then: slow under valgrind). */
static void assert_helper_serves(struct tu_helper *h)
{
        Netbroker__ClientMessage cm = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Hello hello = NETBROKER__HELLO__INIT;
        Netbroker__ServerMessage *m = NULL;
        int fd = -1;

        hello.version = NBP_PROTOCOL_VERSION;
        cm.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_HELLO;
        cm.hello = &hello;
        for (int i = 0; i < 500; i++) {
                fd = tu_raw_connect(h->sock);
                ck_assert_int_eq(tu_raw_send_msg(fd, &cm.base, NULL, 0), 0);
                m = tu_raw_recv(fd, NULL);
                ck_assert_ptr_nonnull(m);
                if (m->msg_case != NETBROKER__SERVER_MESSAGE__MSG_ERROR ||
                    m->error->status != EUSERS)
                        break;
                netbroker__server_message__free_unpacked(m, NULL);
                m = NULL;
                close(fd);
                usleep(10000);
        }
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->msg_case, NETBROKER__SERVER_MESSAGE__MSG_HELLO);
        netbroker__server_message__free_unpacked(m, NULL);
        ping_ok(fd, 777);
        close(fd);
}

static bool client_ping(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        bool ok;

        nb_batch_ping(b);
        ok = nb_submit(c, b, &res) == 0 && nb_result_status(res, 0) == 0;
        nb_results_free(res);
        nb_batch_free(b);
        return ok;
}

/* Runs fn in a child as uid/gid 65534 and asserts it exits 0; its exit
 * code names the check that failed. */
static void as_nobody(struct tu_helper *h, int (*fn)(struct tu_helper *h))
{
        pid_t child;
        int status;

        ck_assert_int_eq(chmod(h->sock, 0666), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(100);
                _exit(fn(h));
        }
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "child failed at check %d (status %d)", WEXITSTATUS(status), status);
}

/* ---- connections ---- */

/* uid 65534 takes the 3rd of max_connections = 3 (N), then its own 2nd
 * connection, within max_connections_per_uid = 2, is the 4th overall and
 * refused for the total. */
static int nobody_fills_the_total(struct tu_helper *h)
{
        nb_conn *a = NULL, *b = NULL;

        if (nb_connect(h->sock, &a) != 0)
                return 1;
        if (!client_ping(a))
                return 2;
        if (nb_connect(h->sock, &b) != -EUSERS)
                return 3;
        if (!strstr(nb_last_error(), "too many connections (max_connections=3)"))
                return 4;
        if (!client_ping(a))
                return 5;
        nb_close(a);
        return 0;
}

START_TEST(test_connections_total_cap_counts_every_uid)
{
        struct tu_helper h;
        nb_conn *c[2] = {0}, *extra = NULL;
        int r = 0;

        tu_helper_start(&h, TU_ALLOW "allow_uid = 0 65534\nmax_connections = 3\n"
                                     "max_connections_per_uid = 2\n");
        for (int i = 0; i < 2; i++)
                ck_assert_int_eq(nb_connect(h.sock, &c[i]), 0);
        as_nobody(&h, nobody_fills_the_total);
        /* The connections that were in first are untouched. */
        ck_assert(client_ping(c[0]));
        ck_assert(client_ping(c[1]));
        /* Once the helper has seen the child's close, root is at its own
         * cap of 2, so its 3rd is refused for the per-uid cap. */
        for (int i = 0; i < 100; i++) {
                r = nb_connect(h.sock, &extra);
                ck_assert_int_eq(r, -EUSERS);
                if (strstr(nb_last_error(), "max_connections_per_uid=2"))
                        break;
                usleep(10000);
        }
        ck_assert_msg(strstr(nb_last_error(), "max_connections_per_uid=2"), "%s", nb_last_error());
        nb_close(c[0]);
        nb_close(c[1]);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

static int nobody_has_its_own_quota(struct tu_helper *h)
{
        nb_conn *a = NULL, *b = NULL, *extra = NULL;

        if (nb_connect(h->sock, &a) != 0 || nb_connect(h->sock, &b) != 0)
                return 1;
        if (!client_ping(a) || !client_ping(b))
                return 2;
        if (nb_connect(h->sock, &extra) != -EUSERS)
                return 3;
        if (!strstr(nb_last_error(), "for uid 65534 (max_connections_per_uid=2)"))
                return 4;
        nb_close(a);
        nb_close(b);
        return 0;
}

START_TEST(test_connections_per_uid_cap_leaves_other_uids_alone)
{
        struct tu_helper h;
        nb_conn *c[2] = {0}, *extra = NULL;

        tu_helper_start(&h, TU_ALLOW "allow_uid = 0 65534\nmax_connections_per_uid = 2\n");
        for (int i = 0; i < 2; i++)
                ck_assert_int_eq(nb_connect(h.sock, &c[i]), 0);
        ck_assert_int_eq(nb_connect(h.sock, &extra), -EUSERS);
        ck_assert_msg(strstr(nb_last_error(), "for uid 0 (max_connections_per_uid=2)"), "%s",
                      nb_last_error());
        as_nobody(&h, nobody_has_its_own_quota);
        ck_assert(client_ping(c[0]));
        nb_close(c[0]);
        nb_close(c[1]);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

/* ---- frames ---- */

/* A request of pings whose ClientMessage packs to exactly `size` bytes:
 * each ping adds 4 bytes, the id's varint 1 to 10. */
static void request_of_size(Netbroker__ClientMessage *cm, Netbroker__Request *req,
                            Netbroker__Op **ops, size_t max_ops, size_t size)
{
        static const uint64_t ids[] = {1, 1u << 7, 1u << 14, 1u << 21, 1ull << 28};

        for (size_t i = 0; i < max_ops; i++)
                ops[i] = &ping_op;
        for (size_t n = 0; n <= max_ops; n++)
                for (size_t k = 0; k < sizeof(ids) / sizeof(*ids); k++) {
                        fill_request(cm, req, ids[k], ops, n);
                        if (protobuf_c_message_get_packed_size(&cm->base) == size)
                                return;
                }
        ck_abort_msg("no request packs to %zu bytes", size);
}

START_TEST(test_frame_of_exactly_max_frame_is_served_one_byte_more_is_refused)
{
        struct tu_helper h;
        Netbroker__ClientMessage cm;
        Netbroker__Request req;
        Netbroker__Op *ops[300];
        int fd, other, base;

        tu_helper_start(&h, TU_ALLOW "max_frame = 1024\n");
        base = tu_fd_count(h.pid);
        other = raw_client(&h);
        fd = raw_client(&h);
        request_of_size(&cm, &req, ops, 300, 1024);
        ck_assert_int_eq(tu_raw_send_msg(fd, &cm.base, NULL, 0), 0);
        expect_all_status(fd, req.id, req.n_ops, 0);
        request_of_size(&cm, &req, ops, 300, 1025);
        ck_assert_int_eq(tu_raw_send_msg(fd, &cm.base, NULL, 0), 0);
        tu_raw_expect_error_and_close_or_reset(fd, EMSGSIZE,
                                               "frame of 1025 bytes is over the cap of 1024 bytes");
        close(fd);
        ping_ok(other, 2);
        close(other);
        tu_assert_fd_count_settles(h.pid, base, 2000);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_ops_at_max_ops_are_served_one_more_is_refused)
{
        struct tu_helper h;
        Netbroker__Op *ops[9];
        int fd;

        tu_helper_start(&h, TU_ALLOW "max_ops = 8\n");
        for (int i = 0; i < 9; i++)
                ops[i] = &ping_op;
        fd = raw_client(&h);
        served(fd, 1, ops, 8);
        send_ops(fd, 2, ops, 9, NULL, 0);
        tu_raw_expect_error_and_close(fd, E2BIG, "request has 9 ops, over max_ops=8");
        close(fd);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

/* The whole request is refused: its Exec does not run. */
START_TEST(test_ops_over_max_ops_run_nothing)
{
        struct tu_helper h;
        struct exec_op x;
        struct marker m;
        Netbroker__Op *ops[9];
        int fd;

        tu_helper_start(&h, TU_ALLOW "max_ops = 8\n");
        marker_init(&m, "max-ops");
        ops[0] = touch_op(&x, &m);
        for (int i = 1; i < 9; i++)
                ops[i] = &ping_op;
        fd = raw_client(&h);
        served(fd, 1, ops, 8);
        ck_assert(marker_exists(&m));
        marker_remove(&m);
        send_ops(fd, 2, ops, 9, NULL, 0);
        tu_raw_expect_error_and_close(fd, E2BIG, "over max_ops=8");
        close(fd);
        assert_helper_serves(&h);
        ck_assert(!marker_exists(&m));
        tu_helper_stop(&h);
}
END_TEST

/* A figure of pid's /proc/PID/status in kB: key "VmRSS:", "VmHWM:". */
static long status_kb(pid_t pid, const char *key)
{
        char path[64], line[32];
        const char *status, *p;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        snprintf(line, sizeof(line), "\n%s", key);
        status = tu_read_file(path);
        p = strstr(status, line);
        ck_assert_ptr_nonnull(p);
        return strtol(p + strlen(line), NULL, 10);
}

static long rss_kb(pid_t pid)
{
        return status_kb(pid, "VmRSS:");
}

static long hwm_kb(pid_t pid)
{
        return status_kb(pid, "VmHWM:");
}

/* max_reply bounds every result a request holds, not only programs'
 * output: once an op's result has passed it, the ops after it do not run
 * (each fails with E2BIG, and the batch stops there unless it goes on
 * after failures); the op that passed it keeps its result. What the
 * results hold decoded is charged to the connection's memory as they
 * come. The helper holds no more than that: 2,000 LinkLists of 200
 * interfaces (some 50 MB of results packed; a hostile-client review's
 * 4,096 of 390 took a helper to 400 MB) raise its peak RSS by a few MB. */
START_TEST(test_results_of_a_request_are_bounded_by_max_reply)
{
        struct tu_helper h;
        nb_batch *one;
        nb_results *res;
        long hwm0;
        nb_conn *c;

        tu_private_netns();
        tu_veths("rb", 100);
        tu_helper_start(&h, TU_ALLOW "max_reply = 1048576\n");
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        hwm0 = hwm_kb(h.pid);
        for (int keep = 0; keep < 2; keep++) {
                nb_batch *b = nb_batch_new();
                long first;
                if (keep)
                        nb_batch_set_flags(b, NB_BATCH_CONTINUE_ON_ERROR);
                for (int i = 0; i < 2000; i++)
                        ck_assert_int_eq(nb_batch_link_list(b, NULL), 0);
                ck_assert_int_eq(nb_submit(c, b, &res), 0);
                first = nb_results_first_error(res);
                /* 1 MiB holds some 40 lists of 200 interfaces. */
                ck_assert_msg(first >= 10 && first < 200, "first error at op %ld", first);
                ck_assert_int_eq(nb_result_status(res, (size_t)first), -E2BIG);
                ck_assert_msg(strstr(nb_result_message(res, (size_t)first), "max_reply"), "%s",
                              nb_result_message(res, (size_t)first));
                ck_assert_uint_eq(nb_result_link_count(res, (size_t)first), 0);
                for (long i = 0; i < first; i++) {
                        ck_assert_int_eq(nb_result_status(res, (size_t)i), 0);
                        ck_assert_uint_ge(nb_result_link_count(res, (size_t)i), 200);
                }
                for (size_t i = (size_t)first + 1; i < 2000; i++)
                        ck_assert_int_eq(nb_result_status(res, i), keep ? -E2BIG : -ECANCELED);
                nb_results_free(res);
                nb_batch_free(b);
        }
        /* Holding every result would take 200 MB and more. Not under
         * valgrind (NB_TEST_HELPER) or ASan, whose own memory is counted. */
#if !defined(__SANITIZE_ADDRESS__)
        if (!getenv("NB_TEST_HELPER"))
                ck_assert_msg(hwm_kb(h.pid) - hwm0 < 100 * 1024,
                              "the helper's peak RSS grew by %ld kB", hwm_kb(h.pid) - hwm0);
#else
        (void)hwm0;
#endif
        /* The bound is a request's: the next is whole. */
        one = nb_batch_new();
        ck_assert_int_eq(nb_batch_link_list(one, NULL), 0);
        res = tu_submit_ok(c, one);
        ck_assert_uint_ge(nb_result_link_count(res, 0), 200);
        nb_results_free(res);
        nb_close(c);
        tu_helper_stop(&h);

        /* What the results hold decoded (four times their packed size) is
         * charged to the connection's memory, whatever max_reply allows. */
        tu_helper_start(&h, TU_ALLOW "max_connection_memory = 1048576\n");
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        one = nb_batch_new();
        for (int i = 0; i < 2000; i++)
                ck_assert_int_eq(nb_batch_link_list(one, NULL), 0);
        ck_assert_int_eq(nb_submit(c, one, &res), 0);
        ck_assert_int_ge(nb_results_first_error(res), 1);
        ck_assert_int_eq(nb_result_status(res, (size_t)nb_results_first_error(res)), -E2BIG);
        ck_assert_msg(strstr(nb_result_message(res, (size_t)nb_results_first_error(res)),
                             "max_connection_memory"),
                      "%s", nb_result_message(res, (size_t)nb_results_first_error(res)));
        nb_results_free(res);
        nb_batch_free(one);
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST

/* An op whose result fills the reply did what it did: it keeps its
 * result, and the ops after it do not run. Without CONTINUE_ON_ERROR the
 * batch failed there and is undone, every bridge with it; with it, the
 * bridges made stay and the others were never made. (An op that passed
 * the bound once failed after its bridge was made, and stayed made.) */
START_TEST(test_a_full_reply_stops_the_batch_before_the_next_op_runs)
{
        struct tu_helper h;
        nb_results *res;
        nb_conn *c;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW "max_reply = 4096\n");
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        for (int keep = 0; keep < 2; keep++) {
                nb_batch *b = nb_batch_new();
                long first;
                if (keep)
                        nb_batch_set_flags(b, NB_BATCH_CONTINUE_ON_ERROR);
                for (int i = 0; i < 300; i++) {
                        char name[16];
                        snprintf(name, sizeof(name), "rfbridge-%06d", i);
                        ck_assert_int_eq(nb_batch_bridge_create(b, name), 0);
                }
                ck_assert_int_eq(nb_submit(c, b, &res), 0);
                /* The first E2BIG (without CONTINUE_ON_ERROR the ops before
                 * it say "undone"). */
                for (first = 0; first < 300; first++)
                        if (nb_result_status(res, (size_t)first) == -E2BIG)
                                break;
                ck_assert_msg(first >= 10 && first < 300, "first E2BIG at op %ld", first);
                ck_assert_msg(strstr(nb_result_message(res, (size_t)first), "not run"), "%s",
                              nb_result_message(res, (size_t)first));
                for (long i = 0; i < 300; i++) {
                        char name[16];
                        snprintf(name, sizeof(name), "rfbridge-%06ld", i);
                        ck_assert_msg(tu_link_exists(name) == (keep && i < first), "%s %s", name,
                                      tu_link_exists(name) ? "is there" : "is not there");
                        if (i < first)
                                ck_assert_int_eq(nb_result_status(res, (size_t)i),
                                                 keep ? 0 : -ECANCELED);
                }
                nb_results_free(res);
                nb_batch_free(b);
        }
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST

/* A client that sends requests and never reads a reply: once a reply waits
 * for the socket the helper stops reading, so the client's writes block
 * after a few thousand requests instead of the helper's memory growing
 * (it held 650 MB after 2 million Pings before). Every request is still
 * answered, in order, once the client reads. */
START_TEST(test_client_that_does_not_read_replies_is_held_back)
{
        struct tu_helper h;
        Netbroker__Op *ops[1] = {&ping_op};
        Netbroker__ClientMessage cm;
        Netbroker__Request req;
        uint8_t frame[64], *stream;
        size_t flen, chunk = 1000, sent = 0;
        uint64_t blocked_since = 0, t0;
        long rss0;
        int fd, fl;

        tu_helper_start(&h, TU_ALLOW);
        fd = raw_client(&h);
        rss0 = rss_kb(h.pid);
        fill_request(&cm, &req, 5, ops, 1);
        flen = protobuf_c_message_get_packed_size(&cm.base);
        ck_assert_uint_le(flen + 4, sizeof(frame));
        frame[0] = frame[1] = 0;
        frame[2] = (uint8_t)(flen >> 8);
        frame[3] = (uint8_t)flen;
        protobuf_c_message_pack(&cm.base, frame + 4);
        flen += 4;
        stream = malloc(chunk * flen);
        ck_assert_ptr_nonnull(stream);
        for (size_t i = 0; i < chunk; i++)
                memcpy(stream + i * flen, frame, flen);
        fl = fcntl(fd, F_GETFL);
        ck_assert_int_eq(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
        t0 = tu_now_us();
        /* Until writes have blocked for half a second (or 300,000 went). */
        while (sent < 300000 * flen && tu_now_us() - t0 < 20000000) {
                size_t off = sent % (chunk * flen);
                ssize_t n = send(fd, stream + off, chunk * flen - off, MSG_NOSIGNAL);
                if (n > 0) {
                        sent += (size_t)n;
                        blocked_since = 0;
                        continue;
                }
                ck_assert_int_eq(errno, EAGAIN);
                if (!blocked_since)
                        blocked_since = tu_now_us();
                else if (tu_now_us() - blocked_since > 500000)
                        break;
                usleep(10000);
        }
        ck_assert_msg(sent < 300000 * flen, "the helper read %zu requests unanswered", sent / flen);
        ck_assert_msg(rss_kb(h.pid) - rss0 < 16 * 1024, "helper RSS grew from %ld to %ld kB", rss0,
                      rss_kb(h.pid));
        /* Finish the frame cut in half, then read every reply. */
        ck_assert_int_eq(fcntl(fd, F_SETFL, fl), 0);
        if (sent % flen) {
                size_t rest = flen - sent % flen;
                ck_assert_int_eq(send(fd, frame + flen - rest, rest, MSG_NOSIGNAL), (ssize_t)rest);
                sent += rest;
        }
        for (size_t i = 0; i < sent / flen; i++)
                expect_all_status(fd, 5, 1, 0);
        ping_ok(fd, 6);
        free(stream);
        close(fd);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

/* Write ends of pipes sent to the helper: EOF on every read end shows the
 * helper kept no copy. */
static void expect_all_closed(const int *read_ends, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                char c;
                ck_assert_int_eq(read(read_ends[i], &c, 1), 0);
        }
}

static void open_pipe(int *read_end, int *write_end)
{
        int p[2];

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        *read_end = p[0];
        *write_end = p[1];
}

START_TEST(test_fds_at_max_fds_per_frame_are_taken_one_more_fails_the_request)
{
        struct tu_helper h;
        Netbroker__Op *ops[1] = {&ping_op};
        int fd, base, rd[3], wr[3];

        tu_helper_start(&h, TU_ALLOW "max_fds_per_frame = 2\n");
        fd = raw_client(&h);
        base = tu_fd_count(h.pid);
        for (int i = 0; i < 3; i++)
                open_pipe(&rd[i], &wr[i]);
        /* N: served (a Ping wants no fd, so they are closed at once). */
        send_ops(fd, 1, ops, 1, wr, 2);
        expect_all_status(fd, 1, 1, 0);
        for (int i = 0; i < 2; i++)
                close(wr[i]);
        expect_all_closed(rd, 2);
        tu_assert_fd_count_settles(h.pid, base, 2000);
        /* N+1: the request fails as a whole, every fd that came is closed. */
        for (int i = 0; i < 2; i++) {
                close(rd[i]);
                open_pipe(&rd[i], &wr[i]);
        }
        send_ops(fd, 2, ops, 1, wr, 3);
        expect_one_failed(fd, 2, EBADF, "max_fds_per_frame");
        for (int i = 0; i < 3; i++)
                close(wr[i]);
        expect_all_closed(rd, 3);
        /* Closed by the closer thread (helper/closer.h), whose eventfd
         * goes a moment after. */
        tu_assert_fd_count_settles(h.pid, base, 2000);
        /* The connection goes on. */
        ping_ok(fd, 3);
        for (int i = 0; i < 3; i++)
                close(rd[i]);
        close(fd);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

/* The client library learns max_fds from Hello and sends nothing over it. */
START_TEST(test_client_refuses_a_batch_over_max_fds_before_sending)
{
        nb_conn *c = tu_spawn(TU_ALLOW "max_fds_per_frame = 2\n");
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

        ck_assert_int_ge(devnull, 0);
        for (int i = 0; i < 3; i++) {
                char name[16], peer[16];
                snprintf(name, sizeof(name), "nblim%d", i);
                snprintf(peer, sizeof(peer), "nblimp%d", i);
                ck_assert_int_eq(nb_batch_veth_create(b, name, peer, devnull), 0);
        }
        ck_assert_int_eq(nb_submit(c, b, &res), -E2BIG);
        ck_assert_msg(strstr(nb_conn_error(c), "batch carries 3 fds; the helper takes at most 2"),
                      "%s", nb_conn_error(c));
        ck_assert(client_ping(c));
        nb_batch_free(b);
        close(devnull);
        nb_close(c);
}
END_TEST

/* ---- requests and programs ---- */

/* Long enough that a request sent right after is handled while it runs,
 * even on a loaded machine. */
static const char *const sleep_argv[] = {"sleep", "1", NULL};

/* Requests 1..n of one `sleep 1` each, sent without waiting for a reply. */
static void send_sleeps(int fd, int n)
{
        for (int i = 0; i < n; i++) {
                struct exec_op slow;
                Netbroker__Op *ops[1] = {exec_op(&slow, "/bin/sleep", sleep_argv, 2)};

                send_ops(fd, 1 + (uint64_t)i, ops, 1, NULL, 0);
        }
}

/* Request `id` of one `touch MARKER` is refused with `status`, saying
 * `needle`, and runs nothing. */
static void touch_refused(int fd, uint64_t id, struct marker *m, int status, const char *needle)
{
        struct exec_op x;
        Netbroker__Op *ops[1] = {touch_op(&x, m)};

        send_ops(fd, id, ops, 1, NULL, 0);
        expect_one_failed(fd, id, status, needle);
        ck_assert(!marker_exists(m));
}

/* Request `id` of one `touch MARKER` runs (the marker is removed again). */
static void touch_runs(int fd, uint64_t id, struct marker *m)
{
        struct exec_op x;
        Netbroker__Op *ops[1] = {touch_op(&x, m)};

        served(fd, id, ops, 1);
        ck_assert(marker_exists(m));
        marker_remove(m);
}

START_TEST(test_requests_in_flight_per_connection_are_capped)
{
        struct tu_helper h;
        struct marker m;
        Netbroker__ServerMessage *msg;
        bool seen[2] = {false, false};
        int fd, other;

        tu_helper_start(&h, TU_ALLOW "max_requests_per_connection = 2\n");
        marker_init(&m, "in-flight");
        fd = raw_client(&h);
        other = raw_client(&h);
        send_sleeps(fd, 2);
        /* The third is answered at once, before the two in flight end. */
        touch_refused(fd, 3, &m, EBUSY, "max_requests_per_connection");
        /* The cap is per connection: another one is served meanwhile. */
        ping_ok(other, 10);
        for (int i = 0; i < 2; i++) {
                int err;
                msg = tu_raw_recv(fd, &err);
                ck_assert_ptr_nonnull(msg);
                ck_assert_int_eq(msg->msg_case, NETBROKER__SERVER_MESSAGE__MSG_REPLY);
                ck_assert(msg->reply->id == 1 || msg->reply->id == 2);
                ck_assert_int_eq(msg->reply->results[0]->status, 0);
                seen[msg->reply->id - 1] = true;
                netbroker__server_message__free_unpacked(msg, NULL);
        }
        ck_assert(seen[0] && seen[1]);
        ck_assert(!marker_exists(&m));
        /* With the slots free again, the same request runs. */
        touch_runs(fd, 4, &m);
        close(other);
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

/* One program runs (max_spawns = 1), two wait (max_pending_spawns = 2):
 * the next is refused with EAGAIN and does not run; the waiting ones all
 * run, one at a time. */
START_TEST(test_pending_spawns_are_capped_and_the_next_is_refused)
{
        struct tu_helper h;
        struct marker m;
        int fd;

        tu_helper_start(&h, TU_ALLOW "max_spawns = 1\nmax_pending_spawns = 2\n");
        marker_init(&m, "pending");
        fd = raw_client(&h);
        send_sleeps(fd, 3);
        touch_refused(fd, 4, &m, EAGAIN,
                      "2 programs are waiting to run already (max_pending_spawns)");
        ck_assert_int_le(tu_children_of(h.pid), 1);
        /* In order, one at a time. */
        for (uint64_t id = 1; id <= 3; id++) {
                ck_assert_int_le(tu_children_of(h.pid), 1);
                expect_all_status(fd, id, 1, 0);
        }
        touch_runs(fd, 5, &m);
        close(fd);
        ck_assert_int_eq(tu_zombies_of(h.pid), 0);
        tu_helper_stop(&h);
}
END_TEST

/* Submits b, which must get a reply, and frees it; the caller frees the
 * results. */
static nb_results *submit_and_free(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;

        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        nb_batch_free(b);
        return res;
}

/* Op i's program ran to its end; its Exec result in *e. */
static void expect_ran(const nb_results *res, size_t i, nb_exec_result *e)
{
        ck_assert_int_eq(nb_result_status(res, i), 0);
        ck_assert_int_eq(nb_result_exec(res, i, e), 0);
}

/* Op i ran and wrote out_len bytes to stdout and err_len to stderr, both
 * cut to the cap or both whole. */
static void expect_output(const nb_results *res, size_t i, size_t out_len, size_t err_len,
                          bool truncated)
{
        nb_exec_result e = NB_EXEC_RESULT_INIT;

        expect_ran(res, i, &e);
        ck_assert_uint_eq(e.out_len, out_len);
        ck_assert_uint_eq(e.err_len, err_len);
        ck_assert(e.out_truncated == truncated && e.err_truncated == truncated);
}

/* Every limit Hello announces reads back through nb_conn_limit() as the
 * config set it (none of them at its default), and the helper's version
 * is this tree's. */
START_TEST(test_hello_limits_and_version_read_back_from_the_connection)
{
        nb_conn *c = tu_spawn(
                TU_ALLOW "max_frame = 70000\nmax_ops = 77\nmax_fds_per_frame = 0\n"
                         "max_reply = 80000\nmax_requests_per_connection = 9\n"
                         "max_rules_per_request = 1234\n"
                         "max_rules_per_request_nonroot = 99\n"
                         "max_spawns_per_uid = 3\nexec_output_cap = 0\n"
                         "exec_timeout_ms = 1000\nexec_timeout_max_ms = 4321\nmax_args = 17\n");
        static const struct {
                nb_limit limit;
                uint64_t want;
        } want[] = {
                {NB_LIMIT_REQUEST_BYTES, 70000},
                {NB_LIMIT_OPS, 77},
                {NB_LIMIT_REQUEST_FDS, 0},
                {NB_LIMIT_REPLY_BYTES, 80000},
                {NB_LIMIT_REQUESTS_IN_FLIGHT, 9},
                {NB_LIMIT_FW_RULES, 1234}, /* root's: this test runs as root */
                {NB_LIMIT_EXEC_RUNNING, 3},
                {NB_LIMIT_EXEC_OUTPUT, 0},
                {NB_LIMIT_EXEC_TIMEOUT_MS, 4321},
                {NB_LIMIT_EXEC_ARGS, 17},
        };
        unsigned version = 0;
        uint64_t v;

        for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
                v = 12345678;
                ck_assert_int_eq(nb_conn_limit(c, want[i].limit, &v), 0);
                ck_assert_msg(v == want[i].want, "limit %d: %llu, want %llu", (int)want[i].limit,
                              (unsigned long long)v, (unsigned long long)want[i].want);
        }
        ck_assert_int_eq(nb_conn_limit(c, (nb_limit)(NB_LIMIT_EXEC_ARGS + 1), &v), -EINVAL);
        ck_assert_int_eq(nb_conn_limit(c, NB_LIMIT_OPS, NULL), -EINVAL);
        ck_assert_int_eq(nb_conn_helper_version(c, &version), 0);
        ck_assert_uint_eq(version, nb_version());
        ck_assert_int_eq(nb_conn_helper_version(c, NULL), -EINVAL);
        nb_close(c);
}
END_TEST

/* exec_output_cap bytes come back whole; one byte more is cut to the cap
 * and flagged, for stdout and stderr alike. */
START_TEST(test_exec_output_at_the_cap_is_whole_one_byte_more_is_truncated)
{
        nb_conn *c = tu_spawn(TU_ALLOW "exec_output_cap = 1000\n");
        const char *exact[] = {"sh", "-c", "printf '%1000s' ''; printf '%1000s' '' >&2", NULL};
        const char *over[] = {"sh", "-c", "printf '%1001s' ''; printf '%1001s' '' >&2", NULL};
        nb_batch *b = nb_batch_new();
        nb_results *res;

        nb_batch_exec(b, "/bin/sh", exact, NULL, NULL, 0, 0);
        nb_batch_exec(b, "/bin/sh", over, NULL, NULL, 0, 0);
        res = submit_and_free(c, b);
        expect_output(res, 0, 1000, 1000, false);
        expect_output(res, 1, 1000, 1000, true); /* the program ran to its end */
        nb_results_free(res);
        nb_close(c);
}
END_TEST

/* Programs' output is reserved before they run (reply_budget) and holds
 * about its packed size: at the default limits, five programs each writing
 * 1 MiB to stdout and to stderr give all of it. (Charged four times over
 * against the connection's memory, the fourth failed after it ran.) */
START_TEST(test_programs_output_at_the_default_limits_is_whole)
{
        nb_conn *c = tu_spawn(TU_ALLOW);
        const char *argv[] = {"sh", "-c",
                              "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2", NULL};
        nb_batch *b = nb_batch_new();
        nb_results *res;

        for (int i = 0; i < 5; i++)
                ck_assert_int_eq(nb_batch_exec(b, "/bin/sh", argv, NULL, NULL, 0, 0), 0);
        res = submit_and_free(c, b);
        for (size_t i = 0; i < 5; i++)
                expect_output(res, i, 1048576, 1048576, false);
        nb_results_free(res);
        nb_close(c);
}
END_TEST

/* max_reply bounds the output of a whole request, whatever each op's cap. */
START_TEST(test_output_of_a_request_is_bounded_by_max_reply)
{
        nb_conn *c = tu_spawn(TU_ALLOW "max_reply = 4096\n");
        const char *big[] = {"sh", "-c", "printf '%3000s' ''", NULL};
        const char *small[] = {"sh", "-c", "printf '%100s' ''", NULL};
        nb_batch *b = nb_batch_new();
        nb_results *res;
        nb_exec_result e = NB_EXEC_RESULT_INIT;
        size_t total = 0;

        for (int i = 0; i < 4; i++)
                nb_batch_exec(b, "/bin/sh", big, NULL, NULL, 0, 0);
        res = submit_and_free(c, b);
        for (size_t i = 0; i < 4; i++) {
                expect_ran(res, i, &e);
                ck_assert(e.out_truncated);
                ck_assert_uint_gt(e.out_len, 0);
                total += e.out_len + e.err_len;
        }
        ck_assert_uint_le(total, 4096);
        nb_results_free(res);
        /* The budget is per request: small output of the next comes whole. */
        res = tu_exec1(c, "/bin/sh", small, NULL, NULL, 0);
        ck_assert_int_eq(nb_result_exec(res, 0, &e), 0);
        ck_assert_uint_eq(e.out_len, 100);
        ck_assert(!e.out_truncated);
        nb_results_free(res);
        nb_close(c);
}
END_TEST

/* max_args entries of argv and of env are taken; one more refuses the
 * whole request before any op runs. */
START_TEST(test_exec_args_and_env_at_max_args_run_one_more_is_refused)
{
        nb_conn *c = tu_spawn(TU_ALLOW "max_args = 4\nexec_env_allow = A B C D E\n");
        struct marker m;
        const char *argv4[5], *argv5[6];
        const char *env4[] = {"A=1", "B=2", "C=3", "D=4", NULL};
        const char *env5[] = {"A=1", "B=2", "C=3", "D=4", "E=5", NULL};
        const char *env_argv[] = {"env", NULL};
        nb_batch *b;
        nb_results *res;
        nb_exec_result e = NB_EXEC_RESULT_INIT;

        marker_init(&m, "max-args");
        /* sh -c CMD sh: 4 entries. */
        memcpy(argv4, (const char *[]){"sh", "-c", m.cmd, "sh", NULL}, sizeof(argv4));
        memcpy(argv5, (const char *[]){"sh", "-c", m.cmd, "sh", "x", NULL}, sizeof(argv5));
        res = tu_exec1(c, "/bin/sh", argv4, NULL, NULL, 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert(marker_exists(&m));
        marker_remove(&m);
        nb_results_free(res);

        b = nb_batch_new();
        nb_batch_exec(b, "/bin/sh", argv4, NULL, NULL, 0, 0);
        nb_batch_exec(b, "/bin/sh", argv5, NULL, NULL, 0, 0);
        res = submit_and_free(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), -ECANCELED);
        ck_assert_int_eq(nb_result_status(res, 1), -E2BIG);
        ck_assert_msg(strstr(nb_result_message(res, 1), "more than 4 arguments"), "%s",
                      nb_result_message(res, 1));
        ck_assert(!marker_exists(&m));
        nb_results_free(res);

        b = nb_batch_new();
        nb_batch_exec(b, "/usr/bin/env", env_argv, env4, NULL, 0, 0);
        nb_batch_exec(b, "/usr/bin/env", env_argv, env5, NULL, 0, 0);
        nb_batch_set_flags(b, NB_BATCH_CONTINUE_ON_ERROR);
        res = submit_and_free(c, b);
        /* CONTINUE_ON_ERROR goes on past a refusal: the good op runs. */
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert_int_eq(nb_result_status(res, 1), -E2BIG);
        nb_results_free(res);

        res = tu_exec1(c, "/usr/bin/env", env_argv, env4, NULL, 0);
        expect_ran(res, 0, &e);
        ck_assert(memmem(e.out, e.out_len, "D=4\n", 4));
        nb_results_free(res);
        ck_assert(client_ping(c));
        nb_close(c);
}
END_TEST

/* A timeout above exec_timeout_max_ms is refused before anything runs; no
 * timeout means exec_timeout_ms. */
START_TEST(test_exec_timeouts_are_capped_and_defaulted)
{
        nb_conn *c = tu_spawn(TU_ALLOW "exec_timeout_ms = 300\nexec_timeout_max_ms = 2000\n");
        struct marker m;
        const char *touch[4];
        const char *sleep5[] = {"sleep", "5", NULL};
        nb_results *res;
        nb_exec_result e = NB_EXEC_RESULT_INIT;
        uint64_t t0;

        marker_init(&m, "timeout");
        memcpy(touch, m.argv, sizeof(touch));
        res = tu_exec1(c, "/bin/sh", touch, NULL, NULL, 2001);
        ck_assert_int_eq(nb_result_status(res, 0), -EINVAL);
        ck_assert_msg(strstr(nb_result_message(res, 0), "above the maximum of 2000 ms"), "%s",
                      nb_result_message(res, 0));
        ck_assert(!marker_exists(&m));
        nb_results_free(res);

        res = tu_exec1(c, "/bin/sh", touch, NULL, NULL, 2000);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert(marker_exists(&m));
        marker_remove(&m);
        nb_results_free(res);

        t0 = tu_now_us();
        res = tu_exec1(c, "/bin/sleep", sleep5, NULL, NULL, 0);
        ck_assert_int_eq(nb_result_status(res, 0), -ETIMEDOUT);
        ck_assert_int_eq(nb_result_exec(res, 0, &e), 0);
        ck_assert(e.timed_out);
        ck_assert_uint_ge(tu_now_us() - t0, 250000);
        ck_assert_uint_lt(tu_now_us() - t0, 3000000);
        nb_results_free(res);
        nb_close(c);
}
END_TEST

/* ---- the config file ---- */

struct key_range {
        const char *name;
        size_t offset;
        bool is_size;
        unsigned long long min, max;
};

#define U(n, lo, hi)                                                                               \
        {                                                                                          \
#n, offsetof(struct nbd_config, n), false, lo, hi                                  \
        }
#define S(n, lo, hi)                                                                               \
        {                                                                                          \
#n, offsetof(struct nbd_config, n), true, lo, hi                                   \
        }

/* The ranges netbrokerd(8) documents. */
static const struct key_range ranges[] = {
        U(fd_limit, 24, 1u << 20),
        S(max_frame, 64, 1u << 30),
        S(max_reply, 4096, 1u << 30),
        U(max_ops, 1, 1u << 20),
        U(max_fds_per_frame, 0, 64),
        U(max_connections, 1, 4096),
        U(max_connections_per_uid, 1, 4096),
        U(max_requests_per_connection, 1, 1u << 16),
        U(max_spawns, 1, 1024),
        U(max_pending_spawns, 0, 1u << 20),
        U(max_args, 1, 1u << 16),
        S(exec_output_cap, 0, 1u << 30),
        U(exec_timeout_ms, 1, 24u * 3600 * 1000),
        U(exec_timeout_max_ms, 1, 24u * 3600 * 1000),
        U(frame_timeout_ms, 1, 24u * 3600 * 1000),
        U(idle_timeout_ms, 0, 24u * 3600 * 1000),
        U(max_fw_rules_per_uid, 1, 1u << 24),
        U(max_fw_owners_per_uid, 1, 1u << 20),
};

/* Lines 1-6: room for any single key at its minimum or maximum (so only
 * the range is tested, not how keys fit together); the key is line 7. */
static const char room_small[] = "fd_limit = 1048576\nmax_connections = 1\n"
                                 "max_connections_per_uid = 1\nmax_spawns = 1\n"
                                 "exec_timeout_ms = 1\nexec_timeout_max_ms = 86400000\n";
static const char room_large[] = "fd_limit = 1048576\nmax_connections = 4096\n"
                                 "max_connections_per_uid = 1\nmax_spawns = 1\n"
                                 "exec_timeout_ms = 1\nexec_timeout_max_ms = 86400000\n";

static int load_config(const char *body, struct nbd_config *c, char *err, size_t errlen)
{
        return tu_config_load(body, c, err, errlen);
}

static unsigned long long field(const struct nbd_config *c, const struct key_range *k)
{
        const char *p = (const char *)c + k->offset;

        return k->is_size ? *(const size_t *)p : *(const unsigned *)p;
}

static void expect_loads(const char *room, const struct key_range *k, unsigned long long v)
{
        struct nbd_config c;
        char body[512], err[512];

        snprintf(body, sizeof(body), "%s%s = %llu\n", room, k->name, v);
        ck_assert_msg(load_config(body, &c, err, sizeof(err)) == 0, "%s = %llu: %s", k->name, v,
                      err);
        ck_assert_msg(field(&c, k) == v, "%s = %llu read as %llu", k->name, v, field(&c, k));
        nbd_config_free(&c);
}

static void expect_refused_at_line_7(const struct key_range *k, const char *v)
{
        struct nbd_config c;
        char body[512], err[512], want[128];

        snprintf(body, sizeof(body), "%s%s = %s\n", room_large, k->name, v);
        snprintf(want, sizeof(want), ":7: %s: not a number in the allowed range", k->name);
        ck_assert_msg(load_config(body, &c, err, sizeof(err)) < 0, "%s = '%s' was accepted",
                      k->name, v);
        ck_assert_msg(strstr(err, want), "%s = '%s': %s", k->name, v, err);
        nbd_config_free(&c);
}

START_TEST(test_config_every_limit_parses_in_range_and_refuses_outside_naming_the_line)
{
        for (size_t i = 0; i < sizeof(ranges) / sizeof(*ranges); i++) {
                const struct key_range *k = &ranges[i];
                char v[32];

                expect_loads(room_small, k, k->min);
                expect_loads(room_large, k, k->max);
                snprintf(v, sizeof(v), "%llu", k->max + 1);
                expect_refused_at_line_7(k, v);
                if (k->min > 0) {
                        snprintf(v, sizeof(v), "%llu", k->min - 1);
                        expect_refused_at_line_7(k, v);
                }
                expect_refused_at_line_7(k, "-1");
                expect_refused_at_line_7(k, "");
                expect_refused_at_line_7(k, "12abc");
                expect_refused_at_line_7(k, "0x10");
                expect_refused_at_line_7(k, "99999999999999999999999");
        }
}
END_TEST

START_TEST(test_config_limits_that_conflict_name_the_line)
{
        struct nbd_config c;
        char err[512];

        ck_assert_int_lt(load_config("max_connections = 4\n# the next one is too many\n"
                                     "max_connections_per_uid = 5\n",
                                     &c, err, sizeof(err)),
                         0);
        ck_assert_msg(strstr(err, ":3: max_connections_per_uid (5) is above max_connections (4)"),
                      "%s", err);
        nbd_config_free(&c);
        ck_assert_int_lt(load_config("exec_timeout_ms = 5000\nexec_timeout_max_ms = 1000\n", &c,
                                     err, sizeof(err)),
                         0);
        ck_assert_msg(strstr(err, ":2: exec_timeout_ms (5000) is above exec_timeout_max_ms (1000)"),
                      "%s", err);
        nbd_config_free(&c);
        ck_assert_int_lt(load_config("max_spawns = 16\nfd_limit = 64\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":2: fd_limit is too small (64) for max_connections (12) and "
                                  "max_spawns (16): it needs 19 + max_connections + 4 * "
                                  "max_spawns = 95"),
                      "%s", err);
        nbd_config_free(&c);
        ck_assert_int_lt(
                load_config("max_programs = 4\nroot_reserved_programs = 4\n", &c, err, sizeof(err)),
                0);
        ck_assert_msg(strstr(err, ":2: root_reserved_programs (4) leaves no program slot for "
                                  "other uids (max_programs 4)"),
                      "%s", err);
        nbd_config_free(&c);
        /* A max_programs below the default reserve, without the key: the
         * largest reserve that leaves other uids one slot. */
        ck_assert_int_eq(load_config("max_programs = 1\n", &c, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.root_reserved_programs, 0);
        nbd_config_free(&c);
        /* Defaults fit: the defaults alone always load. */
        ck_assert_int_eq(load_config("# nothing\n", &c, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.root_reserved_programs, 1);
        nbd_config_free(&c);
}
END_TEST

START_TEST(test_config_lists_refuse_more_entries_than_they_hold)
{
        struct nbd_config c;
        char body[4096], err[512];
        size_t n;

        n = (size_t)snprintf(body, sizeof(body), "allow_uid =");
        for (int i = 0; i < 33; i++)
                n += (size_t)snprintf(body + n, sizeof(body) - n, " %d", 1000 + i);
        snprintf(body + n, sizeof(body) - n, "\n");
        ck_assert_int_lt(load_config(body, &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":1: allow_uid: more than 32 ids"), "%s", err);
        nbd_config_free(&c);

        n = (size_t)snprintf(body, sizeof(body), "# programs\nexec_allow =");
        for (int i = 0; i < 65; i++)
                n += (size_t)snprintf(body + n, sizeof(body) - n, " /usr/bin/p%d", i);
        snprintf(body + n, sizeof(body) - n, "\n");
        ck_assert_int_lt(load_config(body, &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":2: exec_allow: more than 64 programs"), "%s", err);
        nbd_config_free(&c);

        /* uid -1 means "unchanged" to the kernel: never an identity. */
        ck_assert_int_lt(load_config("allow_uid = 4294967295\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":1: allow_uid: expected numeric uids"), "%s", err);
        nbd_config_free(&c);
}
END_TEST

/* What an administrator sees: the helper does not start, and says where. */
START_TEST(test_helper_with_conflicting_limits_does_not_start_and_names_the_line)
{
        char buf[1024];

        tu_spawn_expect_failure(tu_helper_path(),
                                TU_ALLOW "max_connections = 2\nmax_connections_per_uid = 3\n",
                                -ECONNRESET, buf, sizeof(buf));
        ck_assert_msg(strstr(buf, ":3: max_connections_per_uid (3) is above max_connections (2)"),
                      "stderr was: %s", buf);
}
END_TEST

Suite *limits_suite(void)
{
        Suite *s = suite_create("limits");
        TCase *conns = tcase_create("limits-connections"), *frames = tcase_create("limits-frames");
        TCase *progs = tcase_create("limits-exec"), *config = tcase_create("limits-config");

        /* Generous: under valgrind every helper start takes a second. */
        tcase_set_timeout(conns, 120);
        tcase_set_timeout(frames, 120);
        tcase_set_timeout(progs, 120);
        tcase_set_timeout(config, 120);
        tcase_set_tags(progs, "exec");
        tcase_add_test(conns, test_connections_total_cap_counts_every_uid);
        tcase_add_test(conns, test_results_of_a_request_are_bounded_by_max_reply);
        tcase_add_test(conns, test_a_full_reply_stops_the_batch_before_the_next_op_runs);
        tcase_add_test(conns, test_connections_per_uid_cap_leaves_other_uids_alone);
        tcase_add_test(frames, test_frame_of_exactly_max_frame_is_served_one_byte_more_is_refused);
        tcase_add_test(frames, test_ops_at_max_ops_are_served_one_more_is_refused);
        tcase_add_test(frames, test_fds_at_max_fds_per_frame_are_taken_one_more_fails_the_request);
        tcase_add_test(frames, test_client_refuses_a_batch_over_max_fds_before_sending);
        tcase_add_test(frames, test_client_that_does_not_read_replies_is_held_back);
        tcase_add_test(frames, test_hello_limits_and_version_read_back_from_the_connection);
        tcase_add_test(progs, test_ops_over_max_ops_run_nothing);
        tcase_add_test(progs, test_requests_in_flight_per_connection_are_capped);
        tcase_add_test(progs, test_pending_spawns_are_capped_and_the_next_is_refused);
        tcase_add_test(progs, test_exec_output_at_the_cap_is_whole_one_byte_more_is_truncated);
        tcase_add_test(progs, test_output_of_a_request_is_bounded_by_max_reply);
        tcase_add_test(progs, test_programs_output_at_the_default_limits_is_whole);
        tcase_add_test(progs, test_exec_args_and_env_at_max_args_run_one_more_is_refused);
        tcase_add_test(progs, test_exec_timeouts_are_capped_and_defaulted);
        tcase_add_test(config,
                       test_config_every_limit_parses_in_range_and_refuses_outside_naming_the_line);
        tcase_add_test(config, test_config_limits_that_conflict_name_the_line);
        tcase_add_test(config, test_config_lists_refuse_more_entries_than_they_hold);
        tcase_add_test(config,
                       test_helper_with_conflicting_limits_does_not_start_and_names_the_line);
        suite_add_tcase(s, conns);
        suite_add_tcase(s, frames);
        suite_add_tcase(s, progs);
        suite_add_tcase(s, config);
        return s;
}
