// SPDX-License-Identifier: LGPL-2.1-or-later
/* The helper as a process: Hello, framing errors, access control, limits,
 * and the start-up hardening as the kernel reports it in /proc. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

static Netbroker__ServerMessage *send_ping_request(int fd, uint64_t id, const int *fds, size_t nfds)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Ping ping = NETBROKER__PING__INIT;

        op.op_case = NETBROKER__OP__OP_PING;
        op.ping = &ping;
        req.id = id;
        req.ops = ops;
        req.n_ops = 1;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        ck_assert_int_eq(tu_raw_send_msg(fd, &m.base, fds, nfds), 0);
        return tu_raw_recv(fd, NULL);
}

/* After abuse the helper still serves a well-behaved client. */
static void assert_helper_serves(struct tu_helper *h)
{
        int fd = tu_raw_connect(h->sock);
        Netbroker__ServerMessage *m;

        tu_raw_hello(fd);
        m = send_ping_request(fd, 77, NULL, 0);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->msg_case, NETBROKER__SERVER_MESSAGE__MSG_REPLY);
        ck_assert_uint_eq(m->reply->id, 77);
        ck_assert_int_eq(m->reply->results[0]->status, 0);
        netbroker__server_message__free_unpacked(m, NULL);
        close(fd);
}

START_TEST(test_hello_reports_version_and_features)
{
        nb_conn *c = tu_spawn(TU_ALLOW);

        ck_assert(nb_conn_has_feature(c, "exec"));
        ck_assert(nb_conn_has_feature(c, "ping"));
        ck_assert(nb_conn_has_feature(c, "stats"));
        ck_assert(!nb_conn_has_feature(c, "teleport"));
        /* Every op of the protocol, as root on this kernel: the list once
         * stopped at 32 and program_list, the 33rd, was not in it. */
        for (unsigned i = 0; i < netbroker__op__descriptor.n_fields; i++)
                ck_assert_msg(nb_conn_has_feature(c, netbroker__op__descriptor.fields[i].name),
                              "Hello has no feature %s", netbroker__op__descriptor.fields[i].name);
        ck_assert_uint_ge(netbroker__op__descriptor.n_fields, 33);
        nb_close(c);
}
END_TEST

START_TEST(test_version_mismatch_is_refused_with_a_clear_error)
{
        struct tu_helper h;
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Hello hello = NETBROKER__HELLO__INIT;
        int fd;

        tu_helper_start(&h, TU_ALLOW);
        fd = tu_raw_connect(h.sock);
        hello.version = 99;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_HELLO;
        m.hello = &hello;
        ck_assert_int_eq(tu_raw_send_msg(fd, &m.base, NULL, 0), 0);
        tu_raw_expect_error_and_close(fd, EPROTONOSUPPORT, "protocol version 99 is not supported");
        close(fd);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_request_before_hello_is_refused)
{
        struct tu_helper h;
        int fd;

        tu_helper_start(&h, TU_ALLOW);
        fd = tu_raw_connect(h.sock);
        Netbroker__ServerMessage *m = send_ping_request(fd, 1, NULL, 0);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->msg_case, NETBROKER__SERVER_MESSAGE__MSG_ERROR);
        ck_assert_int_eq(m->error->status, EPROTO);
        netbroker__server_message__free_unpacked(m, NULL);
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

/* An op from a future protocol (field 99 of Op) gets EOPNOTSUPP in its own
 * result; the batch is refused as a whole before anything runs. */
START_TEST(test_unknown_op_gets_eopnotsupp)
{
        struct tu_helper h;
        /* ClientMessage{ request(2) { id(1)=5, ops(2)=[ Op{99: 1} ], ops(2)=[ Op{ping(1){}} ] } }
         */
        static const uint8_t frame[] = {0x12, 0x0b, 0x08, 0x05, 0x12, 0x03, 0x98,
                                        0x06, 0x01, 0x12, 0x02, 0x0a, 0x00};
        Netbroker__ServerMessage *m;
        int fd;

        tu_helper_start(&h, TU_ALLOW);
        fd = tu_raw_connect(h.sock);
        tu_raw_hello(fd);
        ck_assert_int_eq(tu_raw_send(fd, frame, sizeof(frame), NULL, 0), 0);
        m = tu_raw_recv(fd, NULL);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->msg_case, NETBROKER__SERVER_MESSAGE__MSG_REPLY);
        ck_assert_uint_eq(m->reply->id, 5);
        ck_assert_uint_eq(m->reply->n_results, 2);
        ck_assert_int_eq(m->reply->results[0]->status, EOPNOTSUPP);
        ck_assert_int_eq(m->reply->results[1]->status, ECANCELED);
        netbroker__server_message__free_unpacked(m, NULL);
        /* The connection stays usable. */
        m = send_ping_request(fd, 6, NULL, 0);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->reply->results[0]->status, 0);
        netbroker__server_message__free_unpacked(m, NULL);
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_garbage_frame_closes_connection_and_leaks_nothing)
{
        struct tu_helper h;
        static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x42, 0x13, 0x37};
        int fd, base;

        tu_helper_start(&h, TU_ALLOW);
        base = tu_fd_count(h.pid); /* before any connection */
        assert_helper_serves(&h);
        for (int i = 0; i < 20; i++) {
                fd = tu_raw_connect(h.sock);
                tu_raw_hello(fd);
                ck_assert_int_eq(tu_raw_send(fd, garbage, sizeof(garbage), NULL, 0), 0);
                tu_raw_expect_error_and_close(fd, EBADMSG, "cannot decode");
                close(fd);
        }
        tu_assert_fd_count_settles(h.pid, base, 1000);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_truncated_frame_then_hangup_leaks_nothing)
{
        struct tu_helper h;
        static const uint8_t half[] = {0x00, 0x00, 0x01, 0x00, 0x12, 0x05};
        int fd, base;

        tu_helper_start(&h, TU_ALLOW);
        base = tu_fd_count(h.pid); /* before any connection */
        assert_helper_serves(&h);
        for (int i = 0; i < 20; i++) {
                fd = tu_raw_connect(h.sock);
                tu_raw_hello(fd);
                ck_assert_int_eq(write(fd, half, sizeof(half)), (ssize_t)sizeof(half));
                close(fd);
        }
        tu_assert_fd_count_settles(h.pid, base, 1000);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_frame_over_cap_is_refused_and_connection_closed)
{
        struct tu_helper h;
        uint8_t hdr[4] = {0x00, 0x00, 0x08, 0x00}; /* 2048 > 1024 */
        int fd;

        tu_helper_start(&h, TU_ALLOW "max_frame = 1024\n");
        fd = tu_raw_connect(h.sock);
        tu_raw_hello(fd);
        ck_assert_int_eq(write(fd, hdr, 4), 4);
        tu_raw_expect_error_and_close(fd, EMSGSIZE, "frame of 2048 bytes is over the cap of 1024");
        close(fd);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_half_sent_frame_times_out)
{
        struct tu_helper h;
        uint8_t part[6] = {0x00, 0x00, 0x00, 0x40, 0x12, 0x01};
        uint64_t t0;
        int fd;

        tu_helper_start(&h, TU_ALLOW "frame_timeout_ms = 300\n");
        fd = tu_raw_connect(h.sock);
        tu_raw_hello(fd);
        t0 = tu_now_us();
        ck_assert_int_eq(write(fd, part, sizeof(part)), (ssize_t)sizeof(part));
        tu_raw_expect_error_and_close(fd, ETIMEDOUT, "half-sent");
        ck_assert_uint_ge(tu_now_us() - t0, 250000);
        ck_assert_uint_lt(tu_now_us() - t0, 3000000);
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_idle_connection_is_closed_when_configured)
{
        struct tu_helper h;
        int fd;

        tu_helper_start(&h, TU_ALLOW "idle_timeout_ms = 200\n");
        fd = tu_raw_connect(h.sock);
        tu_raw_hello(fd);
        tu_raw_expect_error_and_close(fd, ETIMEDOUT, "idle for more than 200 ms");
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

/* A client attaching fds to a Ping: the helper closes them at once. We see
 * it as EOF on the read end of a pipe whose only other write end we sent. */
START_TEST(test_unexpected_fds_are_closed_at_once)
{
        struct tu_helper h;
        Netbroker__ServerMessage *m;
        int fd, p[2], base;
        char c;

        tu_helper_start(&h, TU_ALLOW);
        assert_helper_serves(&h);
        fd = tu_raw_connect(h.sock);
        tu_raw_hello(fd);
        base = tu_fd_count(h.pid);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        m = send_ping_request(fd, 9, &p[1], 1);
        close(p[1]);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->reply->results[0]->status, 0);
        netbroker__server_message__free_unpacked(m, NULL);
        ck_assert_int_eq(read(p[0], &c, 1), 0); /* EOF: no copy left in the helper */
        /* The closer thread holds an eventfd until it is done. */
        tu_assert_fd_count_settles(h.pid, base, 3000);
        close(p[0]);
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

/* More fds than max_fds_per_frame: the request fails with a clear error, the
 * fds that arrived are closed, the connection stays usable. */
START_TEST(test_too_many_fds_fail_the_request_cleanly)
{
        struct tu_helper h;
        Netbroker__ServerMessage *m;
        int fd, fds[4], base;

        tu_helper_start(&h, TU_ALLOW "max_fds_per_frame = 1\n");
        fd = tu_raw_connect(h.sock);
        tu_raw_hello(fd);
        base = tu_fd_count(h.pid);
        for (int i = 0; i < 4; i++)
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        m = send_ping_request(fd, 10, fds, 4);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->msg_case, NETBROKER__SERVER_MESSAGE__MSG_REPLY);
        ck_assert_int_eq(m->reply->results[0]->status, EBADF);
        ck_assert_msg(strstr(m->reply->results[0]->message, "MSG_CTRUNC"), "%s",
                      m->reply->results[0]->message);
        netbroker__server_message__free_unpacked(m, NULL);
        /* Not network namespaces: the closer thread closes them, a moment
         * after the reply (helper/closer.h). */
        tu_assert_fd_count_settles(h.pid, base, 2000);
        m = send_ping_request(fd, 11, NULL, 0);
        ck_assert_int_eq(m->reply->results[0]->status, 0);
        netbroker__server_message__free_unpacked(m, NULL);
        for (int i = 0; i < 4; i++)
                close(fds[i]);
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

/* The socket is world-writable, yet a peer whose uid is not allowed is
 * refused: identity comes from SO_PEERCRED, not from file modes. */
START_TEST(test_peer_with_other_uid_is_refused_even_with_mode_0666)
{
        struct tu_helper h;
        pid_t child;
        int status;

        tu_helper_start(&h, TU_ALLOW);
        ck_assert_int_eq(chmod(h.sock, 0666), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                nb_conn *c = NULL;
                int r;
                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                /* Every time, not just when the race goes our way: the helper
                 * may close before it reads our Hello. */
                for (int i = 0; i < 30; i++) {
                        r = nb_connect(h.sock, &c);
                        if (r != -EACCES)
                                _exit(11);
                        if (!strstr(nb_last_error(), "uid 65534 gid 65534 is not allowed"))
                                _exit(12);
                }
                _exit(0);
        }
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d",
                      WEXITSTATUS(status));
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_allowed_gid_admits_another_uid)
{
        struct tu_helper h;
        pid_t child;
        int status;

        tu_helper_start(&h, TU_ALLOW "allow_gid = 4242\n");
        ck_assert_int_eq(chmod(h.sock, 0666), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                nb_conn *c = NULL;
                nb_batch *b = nb_batch_new();
                nb_results *res = NULL;
                if (setgid(4242) < 0 || setuid(65534) < 0)
                        _exit(10);
                if (nb_connect(h.sock, &c) != 0)
                        _exit(11);
                nb_batch_ping(b);
                if (nb_submit(c, b, &res) != 0 || nb_result_status(res, 0) != 0)
                        _exit(12);
                nb_results_free(res);
                nb_batch_free(b);
                nb_close(c);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d",
                      WEXITSTATUS(status));
        tu_helper_stop(&h);
}
END_TEST

/* A child connecting as uid 65534 with primary group gid: 0 when its
 * Ping was answered, else the negative errno of the connect. */
static int connect_as(const char *sock, gid_t gid)
{
        pid_t child = fork();
        int status;

        ck_assert_int_ge(child, 0);
        if (child == 0) {
                nb_conn *c = NULL;
                nb_batch *b = nb_batch_new();
                nb_results *res = NULL;
                int r;
                if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(65534) < 0)
                        _exit(100);
                r = nb_connect(sock, &c);
                if (r < 0)
                        _exit(-r);
                nb_batch_ping(b);
                if (nb_submit(c, b, &res) != 0 || nb_result_status(res, 0) != 0)
                        _exit(101);
                nb_results_free(res);
                nb_batch_free(b);
                nb_close(c);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) < 100);
        return -WEXITSTATUS(status);
}

/* --listen-mode and --listen-group open the socket to a session daemon's
 * group as it is made (tests before chmod'ed it after the start: between
 * the two, or after a restart, the group could not connect). A member
 * connects, another uid is refused by the socket's mode; a directory
 * others may write to is refused (they could swap the socket for
 * something else before its group is set), and so is one inside another
 * user's directory or reached through their link (they could swap the
 * directory), as is a mode with x bits. The socket's own directory, in
 * sticky /tmp, is fine. */
START_TEST(test_listen_mode_and_group_open_the_socket_to_a_group_alone)
{
        char dir[64], *out;
        struct tu_helper h = {0};
        struct stat st;
        extern char **environ;

        snprintf(dir, sizeof(dir), "/tmp/nbtest-listen-%d", (int)getpid());
        free(tu_sh("rm -rf %s && mkdir -m 0755 %s", dir, dir));
        snprintf(h.sock, sizeof(h.sock), "%s/s", dir);
        h.config = tu_config(TU_ALLOW "allow_gid = 4242\n");
        {
                const char *argv[] = {
                        tu_helper_path(), "--listen", h.sock,     "--listen-mode", "0660",
                        "--listen-group", "4242",     "--config", h.config,        NULL};
                ck_assert_int_eq(
                        posix_spawn(&h.pid, argv[0], NULL, NULL, (char *const *)argv, environ), 0);
        }
        for (int i = 0; i < 5000 && tu_raw_try_connect(h.sock) != 0; i++)
                usleep(2000);
        ck_assert_int_eq(lstat(h.sock, &st), 0);
        printf("listen: %s mode %04o gid %u\n", h.sock, (unsigned)(st.st_mode & 07777),
               (unsigned)st.st_gid);
        ck_assert_uint_eq(st.st_mode & 07777, 0660);
        ck_assert_uint_eq(st.st_gid, 4242);
        ck_assert_int_eq(connect_as(h.sock, 4242), 0);
        ck_assert_int_eq(connect_as(h.sock, 65534), -EACCES);
        tu_helper_stop(&h);

        out = tu_sh("%s --listen /tmp/nbtest-listen-%d.sock --listen-group 4242 "
                    "--config /dev/null 2>&1; echo rc=$?",
                    tu_helper_path(), (int)getpid());
        ck_assert_msg(strstr(out, "/tmp (uid 0, mode 1777) must be root's and writable by root "
                                  "alone (the socket's directory)") &&
                              strstr(out, "rc=1"),
                      "%s", out);
        free(out);
        /* A directory of root's inside another user's (who could rename it
         * and put one of theirs in its place), or reached through their
         * link (which they could turn elsewhere): refused, naming it. */
        free(tu_sh("mkdir -m 0755 %s/user %s/user/run && chown 65534 %s/user && "
                   "ln -s %s/user/run %s/link && chown -h 65534 %s/link",
                   dir, dir, dir, dir, dir, dir));
        /* timeout: a helper that took the path would listen on it. */
        out = tu_sh(
                "timeout 5 %s --listen %s/user/run/s --listen-group 4242 --config /dev/null 2>&1; "
                "echo rc=$?",
                tu_helper_path(), dir);
        ck_assert_msg(strstr(out, "/user (uid 65534, mode 0755) must be root's") &&
                              strstr(out, "or sticky (a directory above the socket's)") &&
                              strstr(out, "rc=1"),
                      "%s", out);
        free(out);
        out = tu_sh("timeout 5 %s --listen %s/link/s --listen-group 4242 --config /dev/null 2>&1; "
                    "echo rc=$?",
                    tu_helper_path(), dir);
        ck_assert_msg(strstr(out, "/link (uid 65534, mode 0777) must be root's") &&
                              strstr(out, "rc=1"),
                      "%s", out);
        free(out);
        out = tu_sh("%s --listen %s/t --listen-mode 0770 2>&1; echo rc=$?", tu_helper_path(), dir);
        ck_assert_msg(strstr(out, "no execute or special bits") && !strstr(out, "rc=0"), "%s", out);
        free(out);
        free(tu_sh("rm -rf %s", dir));
}
END_TEST

START_TEST(test_connections_per_uid_are_capped)
{
        struct tu_helper h;
        nb_conn *c[3] = {0};
        nb_conn *extra = NULL;

        tu_helper_start(&h, TU_ALLOW "max_connections_per_uid = 3\n");
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(nb_connect(h.sock, &c[i]), 0);
        ck_assert_int_eq(nb_connect(h.sock, &extra), -EUSERS);
        ck_assert_msg(strstr(nb_last_error(), "max_connections_per_uid=3"), "%s", nb_last_error());
        nb_close(c[0]);
        /* A slot is free again once the helper has seen the close. */
        int r = -EUSERS;
        for (int i = 0; i < 100 && r == -EUSERS; i++) {
                usleep(10000);
                r = nb_connect(h.sock, &extra);
        }
        ck_assert_int_eq(r, 0);
        nb_close(extra);
        nb_close(c[1]);
        nb_close(c[2]);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_ops_over_max_ops_are_refused_by_client_and_helper)
{
        struct tu_helper h;
        nb_conn *c = NULL;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        int fd;

        tu_helper_start(&h, TU_ALLOW "max_ops = 10\n");
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        for (int i = 0; i < 11; i++)
                nb_batch_ping(b);
        /* The client knows the limit from Hello and does not send. */
        ck_assert_int_eq(nb_submit(c, b, &res), -E2BIG);
        ck_assert_msg(strstr(nb_conn_error(c), "at most 10"), "%s", nb_conn_error(c));
        nb_batch_free(b);
        b = nb_batch_new();
        for (int i = 0; i < 10; i++)
                nb_batch_ping(b);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_results_first_error(res), -1);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
        /* A client that sends anyway gets one Error, not a result per op. */
        fd = tu_raw_connect(h.sock);
        tu_raw_hello(fd);
        {
                Netbroker__Request req = NETBROKER__REQUEST__INIT;
                Netbroker__Op op = NETBROKER__OP__INIT, *ops[11];
                Netbroker__Ping ping = NETBROKER__PING__INIT;

                op.op_case = NETBROKER__OP__OP_PING;
                op.ping = &ping;
                for (int i = 0; i < 11; i++)
                        ops[i] = &op;
                req.id = 42;
                req.n_ops = 11;
                req.ops = ops;
                m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
                m.request = &req;
                ck_assert_int_eq(tu_raw_send_msg(fd, &m.base, NULL, 0), 0);
        }
        tu_raw_expect_error_and_close(fd, E2BIG, "request has 11 ops, over max_ops=10");
        close(fd);
        assert_helper_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_batch_over_max_frame_is_refused_before_sending)
{
        nb_conn *c = tu_spawn(TU_ALLOW "max_frame = 1024\n");
        char big[2000];
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;

        memset(big, 'x', sizeof(big));
        nb_batch_exec(b, "/bin/cat", NULL, NULL, big, sizeof(big), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), -EMSGSIZE);
        ck_assert_msg(strstr(nb_conn_error(c), "at most 1024"), "%s", nb_conn_error(c));
        nb_batch_free(b);
        /* Nothing was sent: the same connection goes on working. */
        b = nb_batch_new();
        nb_batch_exec(b, "/bin/cat", NULL, NULL, big, 500, 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

/* The size the helper checks of a one-Exec request of /bin/cat with
 * stdin_len bytes of input, as nb_batch_exec() builds it. */
static size_t exec_request_size(uint64_t id, size_t stdin_len)
{
        static uint8_t input[1024];
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Exec e = NETBROKER__EXEC__INIT;

        e.path = "/bin/cat";
        e.stdin_data.data = input;
        e.stdin_data.len = stdin_len;
        op.op_case = NETBROKER__OP__OP_EXEC;
        op.exec = &e;
        req.id = id;
        req.n_ops = 1;
        req.ops = ops;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        return protobuf_c_message_get_packed_size(&m.base);
}

/* The client measures the frame it sends, with its real id: a batch of
 * exactly max_frame bytes goes (the largest id's ten bytes used to be
 * counted instead), one byte more does not. */
START_TEST(test_batch_of_exactly_max_frame_is_sent)
{
        nb_conn *c = tu_spawn(TU_ALLOW "max_frame = 1024\n");
        uint8_t input[1024] = {0};
        nb_results *res = NULL;
        size_t len = 0;
        nb_batch *b;

        /* The first request of a connection has id 1. */
        while (exec_request_size(1, len + 1) <= 1024)
                len++;
        ck_assert_uint_eq(exec_request_size(1, len), 1024);
        b = nb_batch_new();
        nb_batch_exec(b, "/bin/cat", NULL, NULL, input, len, 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        nb_results_free(res);
        nb_batch_free(b);
        /* id 2 encodes in as many bytes as id 1. */
        ck_assert_uint_eq(exec_request_size(2, len + 1), 1025);
        b = nb_batch_new();
        nb_batch_exec(b, "/bin/cat", NULL, NULL, input, len + 1, 0);
        ck_assert_int_eq(nb_submit(c, b, &res), -EMSGSIZE);
        ck_assert_msg(strstr(nb_conn_error(c), "encodes to 1025 bytes"), "%s", nb_conn_error(c));
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

static void assert_status_line(const char *status, const char *key, const char *value)
{
        char want[128];

        snprintf(want, sizeof(want), "\n%s:\t%s\n", key, value);
        ck_assert_msg(strstr(status, want), "%s is not %s in /proc status:\n%s", key, value,
                      status);
}

/* What the kernel says about the running helper: the fd limit, only the
 * kept capabilities (CAP_NET_ADMIN = bit 12, CAP_NET_RAW = bit 13,
 * CAP_MKNOD = bit 27) effective (so not CAP_SYS_ADMIN, which it held only
 * to set up its mounts), CAP_SETUID and CAP_SETGID (bits 7 and 6)
 * and CAP_KILL (bit 5) permitted only (a caller's Exec child becomes its
 * caller with the first two; the loop raises the third to end it), the
 * bounding set the network two alone, and NoNewPrivs. */
START_TEST(test_running_helper_has_fd_limit_caps_and_no_new_privs)
{
        nb_conn *c = tu_spawn(TU_ALLOW);
        char path[64];
        const char *text;
        pid_t pid = nb_conn_helper_pid(c);

        ck_assert_int_gt(pid, 0);
        snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
        text = tu_read_file(path);
        ck_assert_msg(strstr(text, "Max open files            64                   64"), "%s",
                      text);
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        text = tu_read_file(path);
        assert_status_line(text, "CapEff", "0000000008003000");
        assert_status_line(text, "CapPrm", "00000000080030e0");
        assert_status_line(text, "CapInh", "0000000000000000");
        assert_status_line(text, "CapBnd", "0000000000003000");
        assert_status_line(text, "CapAmb", "0000000000000000");
        assert_status_line(text, "NoNewPrivs", "1");
        nb_close(c);
}
END_TEST

/* Started with fds 0-2 closed, the helper puts /dev/null there before it
 * makes anything: else its listening socket took fd 0 and a socket of its
 * own fd 2, which a supervised program without a log inherited as its
 * stderr (a security review). */
START_TEST(test_helper_started_without_0_to_2_puts_dev_null_there)
{
        char sock[] = "/tmp/nbtest-std-XXXXXX", conf[] = "/tmp/nbtest-conf-XXXXXX", path[64],
             link[64];
        char *argv[] = {
                (char *)tu_helper_path(), (char *)"--listen", sock, (char *)"--config", conf, NULL};
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int fd, w;

        tu_private_netns();
        fd = mkstemp(conf);
        ck_assert_int_ge(fd, 0);
        close(fd);
        close(mkstemp(sock));
        unlink(sock);
        ck_assert_int_eq(posix_spawn_file_actions_init(&fa), 0);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(posix_spawn_file_actions_addclose(&fa, i), 0);
        ck_assert_int_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        for (int i = 0; i < 500 && access(sock, F_OK) != 0; i++)
                usleep(10000);
        ck_assert_msg(access(sock, F_OK) == 0, "the helper did not listen");
        for (int i = 0; i < 3; i++) {
                ssize_t n;
                snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, i);
                n = readlink(path, link, sizeof(link) - 1);
                ck_assert_int_gt(n, 0);
                link[n] = '\0';
                ck_assert_msg(strcmp(link, "/dev/null") == 0, "fd %d is %s", i, link);
        }
        kill(pid, SIGTERM);
        ck_assert_int_eq(waitpid(pid, &w, 0), pid);
        unlink(sock);
        unlink(conf);
}
END_TEST

/* fds the daemon forgot to mark close-on-exec do not reach the helper. */
START_TEST(test_spawned_helper_does_not_inherit_client_fds)
{
        int leak = open("/dev/null", O_RDONLY); /* no O_CLOEXEC on purpose */
        nb_conn *c;
        char path[64], target[64];
        pid_t pid;

        ck_assert_int_ge(leak, 0);
        c = tu_spawn(TU_ALLOW);
        pid = nb_conn_helper_pid(c);
        for (int fd = 3; fd < 64; fd++) {
                snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
                ssize_t n = readlink(path, target, sizeof(target) - 1);
                if (n < 0)
                        continue;
                target[n] = '\0';
                ck_assert_msg(strcmp(target, "/dev/null") != 0, "helper holds a /dev/null at fd %d",
                              fd);
        }
        /* 0-2, its socket, epoll, signalfd, two rtnetlink sockets, four
         * nfnetlink sockets (the loop's firewall handle and monitor, the
         * socket the loop keeps for bandwidth and networks, the one the
         * firewall's lane keeps, which its start-up sweep made) and the
         * uevent socket (a macvtap's device number): nothing else, once
         * that sweep is done. */
        ck_assert_int_le(tu_fd_count_settled(pid, 13, 2000), 13);
        nb_close(c);
        close(leak);
}
END_TEST

/* A program run with a file capability by another user is in secure-
 * execution mode (AT_SECURE), and so is libnetbroker inside it: its
 * caller's NETBROKERD must not choose the helper it starts. A copy of
 * tests/secure_probe.c with CAP_NET_ADMIN in its permitted set, run as
 * nobody with NETBROKERD naming a script that leaves a mark, must not run
 * the script; the same copy without the capability must (which shows
 * the mark would be seen). */
static void vfs_cap_set(const char *path, bool on)
{
        struct vfs_cap_data cap = {.magic_etc = VFS_CAP_REVISION_2};

        cap.data[0].permitted = 1u << CAP_NET_ADMIN;
        if (on)
                ck_assert_msg(setxattr(path, "security.capability", &cap, XATTR_CAPS_SZ_2, 0) == 0,
                              "setxattr security.capability on %s: %s", path, strerror(errno));
        else
                ck_assert_int_eq(removexattr(path, "security.capability"), 0);
}

/* A copy of from at to, mode 0755: a file of the test's own for the xattr. */
static void copy_file(const char *from, const char *to)
{
        char buf[65536];
        int in = open(from, O_RDONLY | O_CLOEXEC);
        int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        ssize_t n;

        ck_assert_int_ge(in, 0);
        ck_assert_int_ge(out, 0);
        while ((n = read(in, buf, sizeof(buf))) > 0)
                ck_assert_int_eq(write(out, buf, (size_t)n), n);
        ck_assert_int_eq(n, 0);
        close(in);
        ck_assert_int_eq(close(out), 0);
}

/* The probe's line, run as nobody with NETBROKERD=helper. */
static void run_probe_as_nobody(const char *probe, const char *helper, char *out, size_t size)
{
        int p[2];
        ssize_t n, len = 0;
        int status;
        pid_t pid;

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                const char *argv[] = {probe, NULL};
                if (dup2(p[1], 1) < 0 || setenv("NETBROKERD", helper, 1) < 0 ||
                    setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                    setresuid(65534, 65534, 65534) < 0)
                        _exit(126);
                execv(probe, (char *const *)argv);
                _exit(127);
        }
        close(p[1]);
        while ((n = read(p[0], out + len, size - 1 - (size_t)len)) > 0)
                len += n;
        close(p[0]);
        out[len] = '\0';
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "probe: status %#x", status);
}

START_TEST(test_netbrokerd_env_is_ignored_in_secure_execution_mode)
{
        char dir[] = "/tmp/nbtest-secure-XXXXXX", probe[64], helper[64], mark[64], out[128];
        FILE *f;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0777), 0); /* nobody's script writes the mark here */
        snprintf(probe, sizeof(probe), "%s/probe", dir);
        snprintf(helper, sizeof(helper), "%s/helper", dir);
        snprintf(mark, sizeof(mark), "%s/ran", dir);
        copy_file(NB_SECURE_PROBE, probe);
        f = fopen(helper, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "#!/bin/sh\n: > %s\n", mark);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(helper, 0755), 0);

        vfs_cap_set(probe, true);
        run_probe_as_nobody(probe, helper, out, sizeof(out));
        ck_assert_msg(strstr(out, "secure=1 "), "not in secure-execution mode: %s", out);
        ck_assert_msg(access(mark, F_OK) != 0, "NETBROKERD's program ran: %s", out);

        vfs_cap_set(probe, false);
        run_probe_as_nobody(probe, helper, out, sizeof(out));
        ck_assert_msg(strstr(out, "secure=0 "), "still in secure-execution mode: %s", out);
        ck_assert_msg(access(mark, F_OK) == 0, "NETBROKERD's program did not run: %s", out);

        unlink(mark);
        unlink(helper);
        unlink(probe);
        rmdir(dir);
}
END_TEST

START_TEST(test_helper_started_by_socket_activation)
{
        char sock[108], *conf = tu_config(TU_ALLOW);
        pid_t pid;
        nb_conn *c = NULL;
        nb_batch *b;
        nb_results *res = NULL;
        uint64_t v;
        int r = -1, status;

        if (access("/usr/bin/systemd-socket-activate", X_OK) != 0)
                ck_abort_msg("systemd-socket-activate is missing (package systemd)");
        snprintf(sock, sizeof(sock), "/tmp/nbtest-activate-%d.sock", (int)getpid());
        unlink(sock);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                execl("/usr/bin/systemd-socket-activate", "systemd-socket-activate", "-l", sock,
                      NB_TEST_HELPER, "--config", conf, (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 300 && r != 0; i++) {
                usleep(10000);
                r = nb_connect(sock, &c);
        }
        ck_assert_msg(r == 0, "nb_connect: %s", strerror(-r));
        b = nb_batch_new();
        nb_batch_stats(b);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_stat(res, 0, "connections", &v), 0);
        ck_assert_uint_eq(v, 1);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
        kill(pid, SIGTERM);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        unlink(sock);
        free(conf);
}
END_TEST

START_TEST(test_bad_config_stops_startup_naming_the_line)
{
        char buf[512];

        tu_spawn_expect_failure(NB_TEST_HELPER, TU_ALLOW "max_spawns = 0\n", -ECONNRESET, buf,
                                sizeof(buf));
        ck_assert_msg(strstr(buf, ":2: max_spawns"), "stderr was: %s", buf);
}
END_TEST

START_TEST(test_stats_count_requests_ops_and_errors)
{
        nb_conn *c = tu_spawn(TU_ALLOW);
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        uint64_t v;

        nb_batch_ping(b);
        nb_batch_ping(b);
        nb_batch_exec(b, "/bin/true", NULL, NULL, NULL, 0, 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        nb_results_free(res);
        nb_batch_free(b);
        b = nb_batch_new();
        nb_batch_exec(b, "/bin/false", NULL, NULL, NULL, 0, 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        nb_results_free(res);
        nb_batch_free(b);
        b = nb_batch_new();
        nb_batch_stats(b);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_stat(res, 0, "requests", &v), 0);
        ck_assert_uint_eq(v, 3);
        ck_assert_int_eq(nb_result_stat(res, 0, "ops_ping", &v), 0);
        ck_assert_uint_eq(v, 2);
        ck_assert_int_eq(nb_result_stat(res, 0, "ops_exec", &v), 0);
        ck_assert_uint_eq(v, 2);
        ck_assert_int_eq(nb_result_stat(res, 0, "spawns", &v), 0);
        ck_assert_uint_eq(v, 2);
        ck_assert_int_eq(nb_result_stat(res, 0, "op_errors", &v), 0);
        ck_assert_uint_eq(v, 1);
        ck_assert_int_eq(nb_result_stat(res, 0, "netlink_messages", &v), 0);
        ck_assert_int_eq(nb_result_stat(res, 0, "no_such_counter", &v), -ENOENT);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

Suite *protocol_suite(void)
{
        Suite *s = suite_create("protocol");
        TCase *proto = tcase_create("protocol"), *access_tc = tcase_create("access");
        TCase *hard = tcase_create("hardening");
        /* Apart: they run programs, which valgrind 3.19 cannot (no
         * pidfd_open), so "protocol" can run with the helper under it. */
        TCase *proto_exec = tcase_create("protocol-exec");

        tcase_set_timeout(proto, 30);
        tcase_set_timeout(access_tc, 30);
        tcase_set_timeout(hard, 30);
        tcase_set_timeout(proto_exec, 30);
        tcase_set_tags(proto_exec, "exec");
        tcase_add_test(proto, test_hello_reports_version_and_features);
        tcase_add_test(proto, test_version_mismatch_is_refused_with_a_clear_error);
        tcase_add_test(proto, test_request_before_hello_is_refused);
        tcase_add_test(proto, test_unknown_op_gets_eopnotsupp);
        tcase_add_test(proto, test_garbage_frame_closes_connection_and_leaks_nothing);
        tcase_add_test(proto, test_truncated_frame_then_hangup_leaks_nothing);
        tcase_add_test(proto, test_frame_over_cap_is_refused_and_connection_closed);
        tcase_add_test(proto, test_half_sent_frame_times_out);
        tcase_add_test(proto, test_idle_connection_is_closed_when_configured);
        tcase_add_test(proto, test_unexpected_fds_are_closed_at_once);
        tcase_add_test(proto, test_too_many_fds_fail_the_request_cleanly);
        tcase_add_test(proto, test_ops_over_max_ops_are_refused_by_client_and_helper);
        tcase_add_test(proto_exec, test_batch_over_max_frame_is_refused_before_sending);
        tcase_add_test(proto_exec, test_batch_of_exactly_max_frame_is_sent);
        tcase_add_test(proto_exec, test_stats_count_requests_ops_and_errors);
        tcase_add_test(access_tc, test_peer_with_other_uid_is_refused_even_with_mode_0666);
        tcase_add_test(access_tc, test_allowed_gid_admits_another_uid);
        tcase_add_test(access_tc, test_connections_per_uid_are_capped);
        tcase_add_test(access_tc, test_listen_mode_and_group_open_the_socket_to_a_group_alone);
        tcase_add_test(hard, test_running_helper_has_fd_limit_caps_and_no_new_privs);
        tcase_add_test(hard, test_helper_started_without_0_to_2_puts_dev_null_there);
        tcase_add_test(hard, test_spawned_helper_does_not_inherit_client_fds);
        tcase_add_test(hard, test_netbrokerd_env_is_ignored_in_secure_execution_mode);
        tcase_add_test(hard, test_helper_started_by_socket_activation);
        tcase_add_test(hard, test_bad_config_stops_startup_naming_the_line);
        suite_add_tcase(s, proto);
        suite_add_tcase(s, proto_exec);
        suite_add_tcase(s, access_tc);
        suite_add_tcase(s, hard);
        return s;
}
