// SPDX-License-Identifier: LGPL-2.1-or-later
/* The attacks of test_hostile.c again, made by an admitted uid other than
 * root (65534) whose [policy] section grants what each attack needs: what
 * the policy allows it must not turn against the helper or against root.
 * The attacker is a child process that drops to the uid, makes its attack,
 * says so, and holds what it took until the test lets it go; the test
 * measures the helper and a good client (root) meanwhile. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "hostile.h"
#include "testutil.h"
#include "tests.h"

#define NOBODY 65534

/* What uid 65534 may do in these tests. */
#define USER_POLICY                                                                                \
        "policy_dir = /nonexistent/nbtest-policy.d\n"                                              \
        "[policy uid 65534]\n"                                                                     \
        "ops = tap_create macvtap_create link_delete firewall_apply firewall_remove exec\n"        \
        "parents = nbup0\n"                                                                        \
        "name_prefixes = nbu\n"                                                                    \
        "max_devices = 400\n"                                                                      \
        "exec = /bin/sh /bin/sleep /bin/true\n"

struct attacker {
        pid_t pid;
        int ready, hold; /* our ends: the attack's word, and its leash */
};

/* An attack: runs as uid 65534, returns 0 when it was made (a non-zero
 * value names what went wrong). What it opened stays open until the test
 * lets the attacker go. */
typedef int (*attack_fn)(const char *sock, void *arg);

static void attack_start(struct attacker *a, const struct tu_helper *h, attack_fn fn, void *arg)
{
        int ready[2], hold[2];
        unsigned char word = 0;

        ck_assert_int_eq(chmod(h->sock, 0666), 0);
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(hold, O_CLOEXEC), 0);
        a->pid = fork();
        ck_assert_int_ge(a->pid, 0);
        if (a->pid == 0) {
                char c;
                close(ready[0]);
                close(hold[1]);
                if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
                        _exit(100);
                word = (unsigned char)fn(h->sock, arg);
                if (write(ready[1], &word, 1) != 1)
                        _exit(101);
                while (read(hold[0], &c, 1) > 0)
                        ;
                _exit(word);
        }
        close(ready[1]);
        close(hold[0]);
        a->ready = ready[0];
        a->hold = hold[1];
        ck_assert_int_eq(read(a->ready, &word, 1), 1);
        ck_assert_msg(word == 0, "the attack could not be made (%u)", word);
}

/* Let the attacker go: it exits, and the kernel closes all it held. */
static void attack_end(struct attacker *a)
{
        int status;

        close(a->hold);
        close(a->ready);
        ck_assert_int_eq(waitpid(a->pid, &status, 0), a->pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "attacker status %d", status);
}

/* In a namespace of its own (with veth nbup0/nbup1 when veth), a helper
 * of conf attacked by fn as uid 65534: once the attacker is gone the
 * helper's fds settle (within settle_ms) and it serves. */
static void attack_and_settle(const char *conf, bool veth, attack_fn fn, int settle_ms)
{
        struct tu_helper h;
        struct attacker a;
        int fds;

        tu_private_netns(); /* what it leaves dies with it */
        if (veth)
                tu_veth("nbup0", "nbup1");
        tu_helper_start(&h, conf);
        fds = tu_fd_count(h.pid);
        attack_start(&a, &h, fn, NULL);
        attack_end(&a);
        tu_assert_fd_count_settles(h.pid, fds, settle_ms);
        th_assert_serves(&h);
        tu_helper_stop(&h);
}

static Netbroker__ServerMessage *recv_msg(int fd)
{
        return tu_raw_recv(fd, NULL);
}

/* ---- closing at every step ---- */

static int close_at_every_step(const char *sock, void *arg)
{
        (void)arg;
        for (int mode = 0; mode < 3; mode++)
                for (int step = 0; step <= 6; step++) {
                        int fd = tu_raw_connect(sock), probe;
                        tu_raw_hello(fd);
                        th_send_fd_request(fd, "nbup0", "nbu%d", "nbum%d");
                        for (int i = 0; i < step; i++) {
                                Netbroker__ServerMessage *r = recv_msg(fd);
                                if (!r)
                                        return 1;
                                netbroker__server_message__free_unpacked(r, NULL);
                        }
                        if (mode == 1)
                                shutdown(fd, SHUT_RDWR);
                        if (mode == 2)
                                shutdown(fd, SHUT_WR);
                        close(fd);
                        probe = tu_raw_connect(sock);
                        tu_raw_hello(probe);
                        th_ping_us(probe, 1);
                        close(probe);
                }
        return 0;
}

START_TEST(test_user_closing_at_every_step_never_crashes_the_helper)
{
        attack_and_settle(TU_ALLOW USER_POLICY, true, close_at_every_step, 3000);
}
END_TEST

/* ---- fds never taken ---- */

static int taps_never_read(const char *sock, void *arg)
{
        Netbroker__Op op[100], *ops[100];
        Netbroker__TapCreate tap = NETBROKER__TAP_CREATE__INIT;
        int fd = tu_raw_connect(sock);

        (void)arg;
        tu_raw_hello(fd);
        tap.name = (char *)"nbu%d";
        for (int i = 0; i < 100; i++) {
                netbroker__op__init(&op[i]);
                op[i].op_case = NETBROKER__OP__OP_TAP_CREATE;
                op[i].tap_create = &tap;
                ops[i] = &op[i];
        }
        th_send_request(fd, 1, ops, 100, NULL, 0);
        usleep(300 * 1000);
        return 0; /* fd stays open, never read */
}

START_TEST(test_user_that_never_takes_its_fds_delays_no_one)
{
        struct tu_helper h;
        struct attacker a;
        nb_conn *good;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        long rss;
        int fds;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        fds = tu_fd_count(h.pid);
        rss = th_rss_kib(h.pid);
        attack_start(&a, &h, taps_never_read, NULL);
        ck_assert_int_eq(nb_connect(h.sock, &good), 0);
        nb_batch_tap_create(b, "nbgood%d", NULL);
        uint64_t t0 = tu_now_us();
        ck_assert_int_eq(nb_submit(good, b, &res), 0);
        uint64_t took = tu_now_us() - t0;
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert_msg(took < 2000000, "root's TapCreate waited %llu us", (unsigned long long)took);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(good);
        uint64_t worst = th_worst_ping_us(&h, 200);
        th_report("uid 65534: 100 tap fds never taken (root's TapCreate counted)", &h, fds, rss,
                  th_rss_kib(h.pid), took > worst ? took : worst);
        attack_end(&a);
        tu_assert_fd_count_settles(h.pid, fds, 5000);
        tu_helper_stop(&h);
}
END_TEST

/* ---- many connections' tap queues never taken ---- */

#define HOG_CONNS 4 /* max_connections_per_uid */
#define HOG_QUEUES 16 /* NBD_LINK_MAX_QUEUES */
#define UID_QUEUES 8 /* what one uid other than root may hold: fd_limit (64) / 8 */

static void send_tap_queues(int fd, uint64_t id, unsigned queues)
{
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__TapCreate tap = NETBROKER__TAP_CREATE__INIT;

        tap.name = (char *)"nbu%d";
        tap.queues = queues;
        op.op_case = NETBROKER__OP__OP_TAP_CREATE;
        op.tap_create = &tap;
        th_send_request(fd, id, ops, 1, NULL, 0);
}

/* The review's fdhog: each connection the uid may have asks for a tap of
 * as many queues as the uid may hold, and never reads. */
static int queues_never_read(const char *sock, void *arg)
{
        (void)arg;
        for (int i = 0; i < HOG_CONNS; i++) {
                int fd = tu_raw_connect(sock);
                tu_raw_hello(fd);
                send_tap_queues(fd, 1, UID_QUEUES);
        }
        usleep(300 * 1000);
        return 0; /* every fd stays open, never read */
}

/* Before: with 16 queues a connection, the first connection's 16 fds went
 * out, the other three's 48 waited in the helper's own output queues, and
 * the helper stood at its fd limit (64): root's connect timed out and its
 * 16-queue TapCreate got EMFILE. Now a request waits for its fds to be
 * reserved before its tap is made, and one uid other than root holds at
 * most an eighth of fd_limit. */
START_TEST(test_user_holding_tap_queues_on_every_connection_leaves_root_room)
{
        struct tu_helper h;
        struct attacker a;
        nb_conn *good;
        nb_batch *b = nb_batch_new();
        nb_tap_opts o = NB_TAP_OPTS_INIT;
        nb_results *res = NULL;
        long rss;
        int fds, held;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        fds = tu_fd_count(h.pid);
        rss = th_rss_kib(h.pid);
        attack_start(&a, &h, queues_never_read, NULL);
        held = tu_fd_count(h.pid) - fds;
        /* Its connections, and no more than its eighth (64 / 8). */
        ck_assert_msg(held <= HOG_CONNS + UID_QUEUES, "the helper holds %d more fds", held);
        uint64_t t0 = tu_now_us();
        ck_assert_int_eq(nb_connect(h.sock, &good), 0);
        o.queues = HOG_QUEUES;
        nb_batch_tap_create(b, "nbgood%d", &o);
        ck_assert_int_eq(nb_submit(good, b, &res), 0);
        uint64_t took = tu_now_us() - t0;
        tu_assert_status(res, 0, 0, NULL);
        ck_assert_int_eq(nb_result_fd_count(res, 0), HOG_QUEUES);
        ck_assert_msg(took < 2000000, "root's connect and TapCreate took %llu us",
                      (unsigned long long)took);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(good);
        uint64_t worst = th_worst_ping_us(&h, 200);
        th_report("uid 65534: 4 connections' 8-queue taps never taken (root's TapCreate counted)",
                  &h, fds, rss, th_rss_kib(h.pid), took > worst ? took : worst);
        attack_end(&a);
        tu_assert_fd_count_settles(h.pid, fds, 5000);
        tu_helper_stop(&h);
}
END_TEST

/* Whether a frame comes on fd within ms milliseconds. */
/* How long a frame (or a hang-up) that must come may take. Generous: a
 * passing test never waits it out, and on a loaded CI machine the kernel's
 * clean-up of the namespaces earlier tests left (under the rtnl lock) has
 * held a first tap's creation past 2 s. What must not come is waited for
 * briefly (300 ms) where it is asserted. */
#define ARRIVES_MS 10000

static bool frame_within(int fd, int ms)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};

        return poll(&p, 1, ms) == 1;
}

/* Read frames until the reply to request id; its first result's status
 * (-1000: none). */
static int reply_status(int fd, uint64_t id)
{
        for (;;) {
                Netbroker__ServerMessage *m = recv_msg(fd);
                int st;
                if (!m)
                        return -1000;
                if (m->msg_case != NETBROKER__SERVER_MESSAGE__MSG_REPLY || m->reply->id != id) {
                        netbroker__server_message__free_unpacked(m, NULL);
                        continue;
                }
                st = m->reply->n_results ? m->reply->results[0]->status : -1000;
                netbroker__server_message__free_unpacked(m, NULL);
                return st;
        }
}

/* Two connections of one uid each ask for 8 queues, the eighth of
 * fd_limit that one uid other than root may hold: the second waits for the
 * first's fds, then runs once its client took them; again, once its
 * connection closed; and a waiting request that goes away with its
 * connection leaves the next in line waiting for nothing. */
static int second_waits_for_the_firsts_fds(const char *sock, void *arg)
{
        int first = tu_raw_connect(sock), second = tu_raw_connect(sock);

        (void)arg;
        tu_raw_hello(first);
        tu_raw_hello(second);
        send_tap_queues(first, 1, UID_QUEUES);
        if (!frame_within(first, ARRIVES_MS))
                return 1;
        send_tap_queues(second, 1, UID_QUEUES);
        if (frame_within(second, 300))
                return 2; /* its fds did not wait */
        if (reply_status(first, 1) != 0)
                return 3; /* the first takes its fds (closed at once) */
        if (!frame_within(second, ARRIVES_MS) || reply_status(second, 1) != 0)
                return 4;
        send_tap_queues(first, 2, UID_QUEUES);
        if (!frame_within(first, ARRIVES_MS))
                return 5;
        send_tap_queues(second, 2, UID_QUEUES);
        if (frame_within(second, 300))
                return 6;
        close(first); /* its fds never taken */
        if (!frame_within(second, ARRIVES_MS) || reply_status(second, 2) != 0)
                return 7;
        /* A waiting request whose client goes away takes its place in the
         * queue with it, and the one behind it still runs. */
        int third = tu_raw_connect(sock), fourth = tu_raw_connect(sock);
        tu_raw_hello(third);
        tu_raw_hello(fourth);
        send_tap_queues(third, 1, UID_QUEUES);
        if (!frame_within(third, ARRIVES_MS))
                return 8;
        send_tap_queues(second, 3, UID_QUEUES);
        send_tap_queues(fourth, 1, UID_QUEUES);
        if (frame_within(fourth, 300))
                return 9;
        close(second); /* waiting, first in line */
        close(third);
        if (!frame_within(fourth, ARRIVES_MS) || reply_status(fourth, 1) != 0)
                return 10;
        close(fourth);
        return 0;
}

START_TEST(test_user_tap_waiting_for_its_fds_runs_once_they_are_taken_or_gone)
{
        attack_and_settle(TU_ALLOW USER_POLICY, false, second_waits_for_the_firsts_fds, 5000);
}
END_TEST

/* A tap whose queues are more fds than one uid other than root may hold
 * (an eighth of fd_limit: 5 here) is refused, with what the bound is,
 * instead of holding the share of every uid other than root (before: up to
 * the quarter, 10, for a uid holding none) or waiting for ever; one within
 * the eighth is made. */
static int queues_over_the_eighth(const char *sock, void *arg)
{
        nb_tap_opts o = NB_TAP_OPTS_INIT;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_conn *c;
        int ok;

        (void)arg;
        if (nb_connect(sock, &c) != 0)
                return 1;
        o.queues = 8;
        nb_batch_tap_create(b, "nbu%d", &o);
        ok = nb_submit(c, b, &res) == 0 && nb_result_status(res, 0) == -EMFILE &&
             strstr(nb_result_message(res, 0), "(5: an eighth of fd_limit)");
        if (res)
                printf("hostile: uid 65534 asks for an 8-queue tap at fd_limit 40: %d %s\n",
                       nb_result_status(res, 0), nb_result_message(res, 0));
        fflush(stdout);
        nb_results_free(res);
        nb_batch_free(b);
        b = nb_batch_new();
        o.queues = 5;
        nb_batch_tap_create(b, "nbu%d", &o);
        res = NULL;
        ok = ok && nb_submit(c, b, &res) == 0 && nb_result_status(res, 0) == 0 &&
             nb_result_fd_count(res, 0) == 5;
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
        return ok ? 0 : 2;
}

START_TEST(test_user_tap_with_more_queues_than_its_eighth_of_fds_is_refused)
{
        struct tu_helper h;
        struct attacker a;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW
                        "fd_limit = 40\nmax_connections = 5\nmax_spawns = 4\n" USER_POLICY);
        attack_start(&a, &h, queues_over_the_eighth, NULL);
        attack_end(&a);
        tu_helper_stop(&h);
}
END_TEST

/* ---- fds left in a client's queue, waiters, first come ---- */

/* Other uids' sections, for the tests that need three uids' taps. */
#define OTHER_UIDS_POLICY                                                                          \
        "[policy uid 65533]\nops = tap_create\nname_prefixes = nbu\nmax_devices = 400\n"           \
        "[policy uid 65532]\nops = tap_create\nname_prefixes = nbu\nmax_devices = 400\n"

/* A connection to the helper made by a child running as uid (the helper
 * takes the peer's credentials at connect), handed back over SCM_RIGHTS:
 * the test drives it, in order, as that uid's client; Hello done. */
static int connect_as(const char *sock, uid_t uid)
{
        int sp[2], fd = -1;
        char byte = 0, cbuf[CMSG_SPACE(sizeof(int))] = {0};
        struct iovec iov = {&byte, 1};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *cm;
        pid_t pid;
        int status;

        ck_assert_int_eq(chmod(sock, 0666), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0)
                        _exit(100);
                fd = tu_raw_connect(sock);
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
                _exit(sendmsg(sp[1], &mh, 0) == 1 ? 0 : 101);
        }
        close(sp[1]);
        ck_assert_int_eq(recvmsg(sp[0], &mh, MSG_CMSG_CLOEXEC), 1);
        cm = CMSG_FIRSTHDR(&mh);
        ck_assert_ptr_nonnull(cm);
        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        close(sp[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        tu_raw_hello(fd);
        return fd;
}

/* Whether the helper has shut its end of fd (end of file past what is
 * queued) within ms milliseconds; nothing queued is read. */
static bool hung_up_within(int fd, int ms)
{
        struct pollfd p = {.fd = fd, .events = POLLRDHUP};

        return poll(&p, 1, ms) == 1 && (p.revents & (POLLRDHUP | POLLHUP));
}

/* Read the frames of the n connections fd[], as they come, until each
 * had per replies; how many of all the replies said 0. The fds of each
 * are taken at once: a connection left unread would hold the uid's share
 * while another is read. */
static unsigned replies_ok(const int *fd, unsigned n, unsigned per)
{
        struct pollfd p[8];
        unsigned got[8] = {0}, ok = 0, done = 0;

        ck_assert_uint_le(n, 8);
        while (done < n) {
                for (unsigned i = 0; i < n; i++)
                        p[i] = (struct pollfd){.fd = got[i] < per ? fd[i] : -1, .events = POLLIN};
                ck_assert_int_gt(poll(p, n, 5000), 0);
                for (unsigned i = 0; i < n; i++) {
                        Netbroker__ServerMessage *m;
                        if (!(p[i].revents & (POLLIN | POLLHUP)))
                                continue;
                        m = recv_msg(fd[i]);
                        ck_assert_ptr_nonnull(m);
                        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_REPLY) {
                                ok += m->reply->n_results && m->reply->results[0]->status == 0;
                                done += ++got[i] == per;
                        }
                        netbroker__server_message__free_unpacked(m, NULL);
                }
        }
        return ok;
}

/* The review's attack: a tap of the uid's eighth, never read, then
 * shutdown(SHUT_WR); again and again. The helper closes each connection
 * (end of file), but the fds stay in the client's queue, and the kernel
 * counts them as the helper's in flight until they are read or the client
 * closes. *arg: the taps whose fds came. */
static int closes_without_reading(const char *sock, void *arg)
{
        unsigned *made = arg;

        for (int i = 0; i < 10; i++) {
                int fd = tu_raw_connect(sock);
                tu_raw_hello(fd);
                send_tap_queues(fd, 1, UID_QUEUES);
                if (!frame_within(fd, 1000))
                        return 0; /* it waits: the uid's share is held */
                (*made)++;
                shutdown(fd, SHUT_WR);
                if (!hung_up_within(fd, ARRIVES_MS))
                        return 1;
        }
        return 0;
}

/* Before: each closed connection's fds were forgotten, the next tap went,
 * and after 8 of them (64 fds in flight, the helper's fd limit) root's
 * TapCreate never came (every send failed with ETOOMANYREFS). Now the
 * closed connection drains: its fds count in its uid's share until its
 * client reads them or closes, so one tap's fds went; the helper closes it
 * for good once the client is gone. */
START_TEST(test_user_closed_with_its_fds_unread_still_holds_them)
{
        struct tu_helper h;
        struct attacker a;
        unsigned *made = mmap(NULL, sizeof(unsigned), PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        int fds, root;

        ck_assert_ptr_ne(made, MAP_FAILED);
        *made = 0;
        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        fds = tu_fd_count(h.pid);
        attack_start(&a, &h, closes_without_reading, made);
        root = tu_raw_connect(h.sock);
        tu_raw_hello(root);
        send_tap_queues(root, 1, HOG_QUEUES);
        ck_assert_msg(frame_within(root, ARRIVES_MS),
                      "root's TapCreate got nothing in %d ms (%u taps made)", ARRIVES_MS, *made);
        ck_assert_int_eq(reply_status(root, 1), 0);
        close(root);
        ck_assert_uint_eq(*made, 1);
        attack_end(&a);
        /* The client gone, its fds are too: the draining connections close. */
        tu_assert_fd_count_settles(h.pid, fds, 5000);
        th_assert_serves(&h);
        tu_helper_stop(&h);
        munmap(made, sizeof(unsigned));
}
END_TEST

/* A connection that held the uid's connections limit while draining: the
 * client reads what was queued, and the uid may connect again. */
START_TEST(test_user_draining_connection_goes_once_its_client_reads)
{
        struct tu_helper h;
        int fd, second, fds;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        fds = tu_fd_count(h.pid);
        fd = connect_as(h.sock, NOBODY);
        send_tap_queues(fd, 1, UID_QUEUES);
        ck_assert(frame_within(fd, ARRIVES_MS));
        shutdown(fd, SHUT_WR);
        ck_assert(hung_up_within(fd, ARRIVES_MS));
        /* Draining, it still holds the uid's eighth. */
        second = connect_as(h.sock, NOBODY);
        send_tap_queues(second, 1, 1);
        ck_assert(!frame_within(second, 300));
        /* Read: what was queued, then the end. */
        ck_assert_int_eq(reply_status(fd, 1), 0);
        ck_assert_ptr_null(recv_msg(fd));
        ck_assert(frame_within(second, ARRIVES_MS));
        ck_assert_int_eq(reply_status(second, 1), 0);
        close(second);
        /* fd is still open here: the helper closed its end once it was read. */
        tu_assert_fd_count_settles(h.pid, fds, 3000);
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

/* A connection the helper closes (here its idle timeout) after its client
 * took every fd and the reply holds nothing while its Error waits unread:
 * the uid's next tap is made at once. (The stale count of fds sent made
 * it drain holding the uid's eighth until the client read again; from a
 * review of the fd reservations.) */
START_TEST(test_user_closed_after_taking_its_fds_holds_nothing)
{
        struct tu_helper h;
        int fd, second;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW "idle_timeout_ms = 300\n" USER_POLICY);
        fd = connect_as(h.sock, NOBODY);
        send_tap_queues(fd, 1, UID_QUEUES);
        ck_assert_int_eq(reply_status(fd, 1), 0); /* every fd and the reply read */
        usleep(800 * 1000); /* the idle timeout: an Error sent, not read */
        second = connect_as(h.sock, NOBODY);
        send_tap_queues(second, 1, 1);
        ck_assert_msg(frame_within(second, ARRIVES_MS),
                      "the uid's tap waits: the closed connection drains with fds its client took");
        ck_assert_int_eq(reply_status(second, 1), 0);
        close(second);
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

/* The helper stops (and frees all, which the valgrind run checks) while a
 * connection drains and a request of the same uid waits for its room. */
START_TEST(test_helper_stops_while_a_connection_drains)
{
        struct tu_helper h;
        int fd, fd2;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        fd = connect_as(h.sock, NOBODY);
        send_tap_queues(fd, 1, 4);
        ck_assert(frame_within(fd, ARRIVES_MS));
        fd2 = connect_as(h.sock, NOBODY);
        send_tap_queues(fd2, 1, 4);
        ck_assert(frame_within(fd2, ARRIVES_MS));
        shutdown(fd, SHUT_WR);
        ck_assert(hung_up_within(fd, ARRIVES_MS));
        send_tap_queues(fd2, 2, 4); /* waits: the uid's eighth is held */
        usleep(200 * 1000);
        tu_helper_stop(&h);
        close(fd);
        close(fd2);
}
END_TEST

/* Waiting taps of many requests cost the poll one SIOCOUTQ per connection
 * holding fds sent, not one per waiter and connection: one uid's holder
 * never reads its eighth, and its 3 other connections ask for 64 one-queue
 * taps each. Before, each poll asked the holder once for each of the 192
 * waiters. The poll stops once nothing waits. */
START_TEST(test_user_many_waiting_taps_cost_one_look_a_poll)
{
        struct tu_helper h;
        nb_conn *good;
        int holder, w[3];
        uint64_t p0, c0, p1, c1;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        ck_assert_int_eq(nb_connect(h.sock, &good), 0);
        holder = connect_as(h.sock, NOBODY);
        send_tap_queues(holder, 1, UID_QUEUES);
        ck_assert(frame_within(holder, ARRIVES_MS));
        for (int c = 0; c < 3; c++) {
                w[c] = connect_as(h.sock, NOBODY);
                for (int i = 0; i < 64; i++)
                        send_tap_queues(w[c], 10 + (uint64_t)i, 1);
        }
        usleep(200 * 1000);
        p0 = tu_stat(good, "fds_polls");
        c0 = tu_stat(good, "fds_outq_checks");
        usleep(300 * 1000);
        p1 = tu_stat(good, "fds_polls");
        c1 = tu_stat(good, "fds_outq_checks");
        ck_assert_msg(p1 - p0 >= 5, "%llu polls in 300 ms", (unsigned long long)(p1 - p0));
        ck_assert_msg(c1 - c0 <= p1 - p0 + 2, "%llu SIOCOUTQ for %llu polls",
                      (unsigned long long)(c1 - c0), (unsigned long long)(p1 - p0));
        /* The holder reads: every waiter goes, one after the other. */
        ck_assert_int_eq(reply_status(holder, 1), 0);
        ck_assert_uint_eq(replies_ok(w, 3, 64), 3 * 64);
        usleep(50 * 1000);
        p0 = tu_stat(good, "fds_polls");
        usleep(100 * 1000);
        ck_assert_uint_eq(tu_stat(good, "fds_polls"), p0);
        for (int c = 0; c < 3; c++)
                close(w[c]);
        close(holder);
        nb_close(good);
        tu_helper_stop(&h);
}
END_TEST

/* First come: uids 65534 and 65532 hold 5 and 8 of the quarter (16);
 * uid 65533 asks for 8 and waits; a one-queue tap 65534 asks for after
 * it waits behind it, though it would fit (before, it went ahead: small
 * taps could pass a large one for ever). Once 65532 reads, both go. */
START_TEST(test_user_small_tap_does_not_pass_a_waiting_large_one)
{
        struct tu_helper h;
        int b, b2, c, a;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY OTHER_UIDS_POLICY);
        b = connect_as(h.sock, NOBODY);
        c = connect_as(h.sock, 65532);
        a = connect_as(h.sock, 65533);
        b2 = connect_as(h.sock, NOBODY);
        send_tap_queues(b, 1, 5);
        ck_assert(frame_within(b, ARRIVES_MS));
        send_tap_queues(c, 1, UID_QUEUES);
        ck_assert(frame_within(c, ARRIVES_MS));
        send_tap_queues(a, 1, UID_QUEUES);
        ck_assert(!frame_within(a, 300));
        send_tap_queues(b2, 1, 1);
        ck_assert_msg(!frame_within(b2, 300), "the small tap went ahead of the waiting one");
        ck_assert_int_eq(reply_status(c, 1), 0);
        ck_assert(frame_within(a, ARRIVES_MS));
        ck_assert_int_eq(reply_status(a, 1), 0);
        ck_assert(frame_within(b2, ARRIVES_MS));
        ck_assert_int_eq(reply_status(b2, 1), 0);
        close(a);
        close(b);
        close(b2);
        close(c);
        tu_helper_stop(&h);
}
END_TEST

/* A stream of new waiters (one every 2 ms, under the 5 ms poll) does not
 * postpone the poll: before, each re-armed it, and it never ran. */
START_TEST(test_user_stream_of_waiters_does_not_postpone_the_poll)
{
        struct tu_helper h;
        nb_conn *good;
        int holder, w;
        uint64_t p0;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        ck_assert_int_eq(nb_connect(h.sock, &good), 0);
        holder = connect_as(h.sock, NOBODY);
        send_tap_queues(holder, 1, UID_QUEUES);
        ck_assert(frame_within(holder, ARRIVES_MS));
        w = connect_as(h.sock, NOBODY);
        p0 = tu_stat(good, "fds_polls");
        for (int i = 0; i < 100; i++) {
                send_tap_queues(w, 10 + (uint64_t)i, 1);
                usleep(2000);
        }
        ck_assert_msg(tu_stat(good, "fds_polls") - p0 >= 10, "%llu polls",
                      (unsigned long long)(tu_stat(good, "fds_polls") - p0));
        close(w);
        close(holder);
        nb_close(good);
        tu_helper_stop(&h);
}
END_TEST

/* A tap after an op that filled the reply (max_reply) is not run: it says
 * so at once, and waits for no fds first (before, it waited for the
 * uid's share, held here by a tap never read, and the reply never came). */
START_TEST(test_user_tap_left_unrun_by_a_full_reply_waits_for_no_fds)
{
        struct tu_helper h;
        Netbroker__Op op[2], *ops[2] = {&op[0], &op[1]};
        Netbroker__Exec e = NETBROKER__EXEC__INIT;
        Netbroker__TapCreate tap = NETBROKER__TAP_CREATE__INIT;
        /* Half the reply's room each on stdout and stderr: with the
         * result around them, more than max_reply. */
        char *argv[] = {(char *)"/bin/sh", (char *)"-c",
                        (char *)"head -c 8000 /dev/zero; head -c 8000 /dev/zero >&2"};
        Netbroker__ServerMessage *m = NULL;
        int holder, fd;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW "max_reply = 4096\n" USER_POLICY);
        holder = connect_as(h.sock, NOBODY);
        send_tap_queues(holder, 1, UID_QUEUES);
        ck_assert(frame_within(holder, ARRIVES_MS));
        fd = connect_as(h.sock, NOBODY);
        netbroker__op__init(&op[0]);
        netbroker__op__init(&op[1]);
        e.path = argv[0];
        e.argv = argv;
        e.n_argv = 3;
        op[0].op_case = NETBROKER__OP__OP_EXEC;
        op[0].exec = &e;
        tap.name = (char *)"nbu%d";
        op[1].op_case = NETBROKER__OP__OP_TAP_CREATE;
        op[1].tap_create = &tap;
        th_send_request(fd, 1, ops, 2, NULL, 0);
        ck_assert_msg(frame_within(fd, ARRIVES_MS), "no reply: the tap waits for fds");
        m = recv_msg(fd);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->msg_case, NETBROKER__SERVER_MESSAGE__MSG_REPLY);
        ck_assert_uint_eq(m->reply->n_results, 2);
        ck_assert_int_eq(m->reply->results[1]->status, E2BIG);
        ck_assert_ptr_nonnull(strstr(m->reply->results[1]->message, "the reply is full"));
        netbroker__server_message__free_unpacked(m, NULL);
        close(fd);
        close(holder);
        tu_helper_stop(&h);
}
END_TEST

#ifdef NB_TEST_HOOKS
/* The reply's ifindex of the first result to request id on fd (0: none). */
static int reply_ifindex(int fd, uint64_t id)
{
        for (;;) {
                Netbroker__ServerMessage *m = recv_msg(fd);
                int ix;
                if (!m)
                        return 0;
                if (m->msg_case != NETBROKER__SERVER_MESSAGE__MSG_REPLY || m->reply->id != id) {
                        netbroker__server_message__free_unpacked(m, NULL);
                        continue;
                }
                ix = m->reply->n_results && !m->reply->results[0]->status
                             ? m->reply->results[0]->ifindex
                             : 0;
                netbroker__server_message__free_unpacked(m, NULL);
                return ix;
        }
}

/* A tap given its fds while the links' lane was taken again waits first
 * in line for it: it holds them only while the call under way ends. Root's
 * LinkDelete holds the lane (the test's hook), root's TapCreate waits
 * behind it; then uid 65534's waiting tap is given its fds. Before, it went
 * to the end of the lane's queue, behind root's tap, holding them. */
START_TEST(test_user_tap_given_its_fds_waits_first_for_its_lane)
{
        char hold[] = "/tmp/nbtest-hold-XXXXXX", held[64];
        struct tu_helper h;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__LinkDelete del = NETBROKER__LINK_DELETE__INIT;
        Netbroker__TapCreate tap = NETBROKER__TAP_CREATE__INIT;
        int holder, w, root, root2, hfd, wix, rix;

        tu_private_netns(); /* what it leaves dies with it */
        hfd = mkstemp(hold);
        ck_assert_int_ge(hfd, 0);
        close(hfd);
        unlink(hold);
        snprintf(held, sizeof(held), "%s.held", hold);
        ck_assert_int_eq(setenv("NETBROKERD_TEST_HOLD_LINKS", hold, 1), 0);
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        unsetenv("NETBROKERD_TEST_HOLD_LINKS");
        free(tu_sh("ip tuntap add dev nbr0 mode tap"));
        holder = connect_as(h.sock, NOBODY);
        send_tap_queues(holder, 1, UID_QUEUES);
        ck_assert(frame_within(holder, ARRIVES_MS));
        w = connect_as(h.sock, NOBODY);
        send_tap_queues(w, 1, 1); /* waits for fds */
        root = tu_raw_connect(h.sock);
        tu_raw_hello(root);
        root2 = tu_raw_connect(h.sock);
        tu_raw_hello(root2);
        hfd = open(hold, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        ck_assert_int_ge(hfd, 0);
        close(hfd);
        del.name = (char *)"nbr0";
        op.op_case = NETBROKER__OP__OP_LINK_DELETE;
        op.link_delete = &del;
        th_send_request(root, 1, ops, 1, NULL, 0);
        for (int i = 0; i < 1000 && access(held, F_OK) != 0; i++)
                usleep(5000);
        ck_assert_msg(access(held, F_OK) == 0, "the links' lane was never held");
        tap.name = (char *)"nbx%d";
        op.op_case = NETBROKER__OP__OP_TAP_CREATE;
        op.tap_create = &tap;
        th_send_request(root2, 1, ops, 1, NULL, 0); /* waits for the lane */
        usleep(100 * 1000);
        ck_assert_int_eq(reply_status(holder, 1), 0); /* w is given its fds */
        usleep(200 * 1000);
        ck_assert(!frame_within(w, 0));
        unlink(hold);
        unlink(held);
        ck_assert_int_eq(reply_status(root, 1), 0);
        wix = reply_ifindex(w, 1);
        rix = reply_ifindex(root2, 1);
        ck_assert_msg(wix && rix && wix < rix, "uid 65534's tap %d, root's %d: root's went first",
                      wix, rix);
        close(w);
        close(holder);
        close(root);
        close(root2);
        tu_helper_stop(&h);
}
END_TEST
#endif

/* The review's churn: behind a holder of the uid's eighth, 3 connections
 * of 20 waiting taps each (1 to 8 queues), then, round after round, the
 * holder reads or closes, and waiters close or shut down, in every order.
 * No reservation, claim or draining connection outlives its round: at the
 * end a tap of the whole eighth is made at once. (Between rounds the
 * closed connections drain; the poll sees them gone within 100 ms.) */
static int waiters_churn(const char *sock, void *arg)
{
        (void)arg;
        for (int r = 0; r < 16; r++) {
                int hog = tu_raw_connect(sock), w[3];
                tu_raw_hello(hog);
                send_tap_queues(hog, 1, UID_QUEUES);
                if (!frame_within(hog, ARRIVES_MS))
                        return 1;
                for (int c = 0; c < 3; c++) {
                        w[c] = tu_raw_connect(sock);
                        tu_raw_hello(w[c]);
                        for (int i = 0; i < 20; i++)
                                send_tap_queues(w[c], 10 + (uint64_t)i,
                                                (unsigned)(1 + (i + c) % UID_QUEUES));
                }
                switch (r % 4) {
                case 0:
                        close(w[0]);
                        reply_status(hog, 1);
                        break;
                case 1:
                        reply_status(hog, 1);
                        close(w[1]);
                        break;
                case 2:
                        close(hog);
                        hog = -1;
                        close(w[2]);
                        break;
                case 3:
                        shutdown(w[0], SHUT_WR);
                        reply_status(hog, 1);
                        shutdown(w[1], SHUT_WR);
                        break;
                }
                if (hog >= 0)
                        close(hog);
                for (int c = 0; c < 3; c++)
                        close(w[c]);
                usleep(300 * 1000);
        }
        int last = tu_raw_connect(sock);
        tu_raw_hello(last);
        send_tap_queues(last, 1, UID_QUEUES);
        if (!frame_within(last, ARRIVES_MS) || reply_status(last, 1) != 0)
                return 9; /* a reservation leaked */
        close(last);
        return 0;
}

START_TEST(test_user_churn_of_waiters_leaks_no_reservation)
{
        attack_and_settle(TU_ALLOW USER_POLICY, false, waiters_churn, 5000);
}
END_TEST

/* ---- fds of frames half-sent ---- */

/* On each of its connections (the per-uid share, 4), a frame's header and
 * one byte of its body with max_fds_per_frame fds (4), the rest never
 * sent: the helper holds those fds until the frame completes or times out
 * (frame_timeout_ms, 10 s), and reconnecting starts again. */
static int half_frames_with_fds(const char *sock, void *arg)
{
        unsigned *refused = arg;
        uint8_t head[NBP_FRAME_HEADER_SIZE + 1] = {0, 0, 0, 100, 0x12};
        int fds[4];

        for (int i = 0; i < 4; i++)
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        for (int k = 0; k < 4; k++) {
                char cbuf[CMSG_SPACE(sizeof(fds))] = {0};
                struct iovec iov = {head, sizeof(head)};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = cbuf,
                                    .msg_controllen = sizeof(cbuf)};
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                int fd = tu_raw_connect(sock);
                Netbroker__ServerMessage *m;
                struct pollfd p = {.fd = fd, .events = POLLIN};

                tu_raw_hello(fd);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(fds));
                memcpy(CMSG_DATA(cm), fds, sizeof(fds));
                if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(head))
                        return 1;
                /* Refused now (over the share) or held: both are the
                 * helper's to choose; the fds must not pile up. */
                if (poll(&p, 1, 200) == 1 && (m = recv_msg(fd))) {
                        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_ERROR &&
                            m->error->status == EMFILE)
                                (*refused)++;
                        netbroker__server_message__free_unpacked(m, NULL);
                }
        }
        return 0;
}

/* One byte at b with nfds fds of /dev/null (0: none). */
static int send_with_fds(int fd, const uint8_t *b, size_t len, int nfds)
{
        char cbuf[CMSG_SPACE(4 * sizeof(int))] = {0};
        struct iovec iov = {(void *)b, len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        int fds[4];

        if (nfds) {
                struct cmsghdr *cm;
                mh.msg_control = cbuf;
                mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
                for (int i = 0; i < nfds; i++)
                        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
        }
        int r = sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        return r;
}

/* A frame's fds sent after its header (which passed the share's check
 * with none): connection 0 sends a header alone, 1 and 2 headers with 4
 * fds each (the share, 8, is full), then 0 sends a byte with 4 fds: 0 is
 * refused with EMFILE, its fds closed. */
static int fds_after_the_header(const char *sock, void *arg)
{
        const uint8_t head[NBP_FRAME_HEADER_SIZE] = {0, 0, 0, 100}, byte = 0x12;
        Netbroker__ServerMessage *m;
        int fd[3], r = 0;

        (void)arg;
        for (int k = 0; k < 3; k++) {
                fd[k] = tu_raw_connect(sock);
                tu_raw_hello(fd[k]);
                if (send_with_fds(fd[k], head, sizeof(head), k ? 4 : 0) < 0)
                        return 1;
                usleep(20000); /* read by the helper in this order (for the test's sake) */
        }
        if (send_with_fds(fd[0], &byte, 1, 4) < 0)
                return 2;
        m = recv_msg(fd[0]);
        if (!m || m->msg_case != NETBROKER__SERVER_MESSAGE__MSG_ERROR ||
            m->error->status != EMFILE || !strstr(m->error->message, "fd_limit / 8"))
                r = 3;
        if (m)
                netbroker__server_message__free_unpacked(m, NULL);
        return r;
}

/* uid 65534's half-sent frames hold at most its share of request fds
 * (fd_limit / 8, as whole requests' fds do): once it is full, its other
 * connections are not read (their fds stay in their sockets), and one
 * whose frame brings fds past it anyway is refused with EMFILE. (The
 * share was not applied to frames still being received: a security
 * review held 32 fds, half of fd_limit, with 8 such connections, and
 * root's 16-queue tap failed with EMFILE.) */
START_TEST(test_user_half_sent_frames_hold_no_more_fds_than_its_share)
{
        unsigned *refused = mmap(NULL, sizeof(unsigned), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        struct tu_helper h;
        struct attacker a;
        int fds;

        ck_assert_ptr_ne(refused, MAP_FAILED);
        *refused = 0;
        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        fds = tu_fd_count(h.pid);
        attack_start(&a, &h, half_frames_with_fds, refused);
        /* Its 4 sockets, and 8 fds (64 / 8) of half-sent frames at most. */
        ck_assert_msg(tu_fd_count(h.pid) - fds <= 4 + 8,
                      "the helper holds %d more fds (%u connections refused)",
                      tu_fd_count(h.pid) - fds, *refused);
        th_assert_serves(&h);
        attack_end(&a);
        tu_assert_fd_count_settles(h.pid, fds, 5000);
        attack_start(&a, &h, fds_after_the_header, NULL);
        /* Connection 0's socket and fds go to the closer (helper/closer.h),
         * which holds an eventfd until it has closed them: a moment. */
        for (int i = 0; i < 100 && tu_fd_count(h.pid) - fds > 2 + 8; i++)
                usleep(10000);
        ck_assert_msg(tu_fd_count(h.pid) - fds <= 2 + 8, "the helper holds %d more fds",
                      tu_fd_count(h.pid) - fds);
        attack_end(&a);
        tu_assert_fd_count_settles(h.pid, fds, 5000);
        munmap(refused, sizeof(unsigned));
        tu_helper_stop(&h);
}
END_TEST

/* ---- memory ---- */

static int execs_piled_up(const char *sock, void *arg)
{
        int fd = tu_raw_connect(sock);

        (void)arg;
        tu_raw_hello(fd);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        for (uint64_t id = 1; id <= 200; id++)
                th_send_exec_request(fd, id);
        return 0;
}

START_TEST(test_user_piling_up_unread_execs_stays_within_the_budget)
{
        struct tu_helper h;
        struct attacker a;
        long rss, peak = 0;
        uint64_t worst = 0;
        int fds;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        fds = tu_fd_count(h.pid);
        rss = th_rss_kib(h.pid);
        attack_start(&a, &h, execs_piled_up, NULL);
        for (int i = 0; i < 6; i++) {
                uint64_t w = th_worst_ping_us(&h, 250);
                long r = th_rss_kib(h.pid);
                worst = w > worst ? w : worst;
                peak = r > peak ? r : peak;
        }
        ck_assert_msg(peak - rss < TH_GROWTH_MAX_KIB, "the helper grew by %ld KiB", peak - rss);
        th_report("uid 65534: 200 piped 1 MiB Execs, replies never read", &h, fds, rss, peak,
                  worst);
        attack_end(&a);
        tu_assert_fd_count_settles(h.pid, fds, 5000);
        tu_helper_stop(&h);
}
END_TEST

/* ---- spawn slots ---- */

/* uid 65534 starts two 3 s programs (its max_spawns_per_uid) on two
 * connections; a third is refused at once; root's Exec still runs at once
 * in the slot kept for it. */
static int spawns_held(const char *sock, void *arg)
{
        int fd[3];
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Exec e = NETBROKER__EXEC__INIT;
        char *argv[] = {(char *)"/bin/sleep", (char *)"3"};
        Netbroker__ServerMessage *r;
        int ok;

        (void)arg;
        e.path = (char *)"/bin/sleep";
        e.argv = argv;
        e.n_argv = 2;
        op.op_case = NETBROKER__OP__OP_EXEC;
        op.exec = &e;
        for (int i = 0; i < 3; i++) {
                fd[i] = tu_raw_connect(sock);
                tu_raw_hello(fd[i]);
                th_send_request(fd[i], (uint64_t)i + 1, ops, 1, NULL, 0);
                usleep(50 * 1000);
        }
        r = recv_msg(fd[2]);
        ok = r && r->msg_case == NETBROKER__SERVER_MESSAGE__MSG_REPLY &&
             r->reply->results[0]->status == EAGAIN &&
             strstr(r->reply->results[0]->message, "max_spawns_per_uid");
        if (r)
                netbroker__server_message__free_unpacked(r, NULL);
        return ok ? 0 : 1;
}

START_TEST(test_user_holding_its_spawn_share_leaves_roots_slot)
{
        struct tu_helper h;
        struct attacker a;
        nb_conn *c;
        nb_results *res;
        uint64_t t0;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW "max_spawns = 3\nroot_reserved_spawns = 1\n" USER_POLICY);
        attack_start(&a, &h, spawns_held, NULL);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        t0 = tu_now_us();
        res = tu_exec1(c, "/bin/true", NULL, NULL, NULL, 0);
        uint64_t took = tu_now_us() - t0;
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert_msg(took < 1500000, "root's Exec waited %llu us", (unsigned long long)took);
        printf("hostile: uid 65534 holds its 2 spawn slots: root's Exec took %.1f ms\n",
               took / 1000.0);
        nb_results_free(res);
        nb_close(c);
        attack_end(&a);
        tu_helper_stop(&h);
}
END_TEST

/* ---- the firewall work one request may make ---- */

static int too_many_rules(const char *sock, void *arg)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule rule = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_ACCEPT};
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_conn *c;
        int ok;

        (void)arg;
        if (nb_connect(sock, &c) != 0)
                return 1;
        for (int i = 0; i < 4097; i++)
                nb_fw_rule_add(rs, &rule);
        nb_batch_tap_create(b, "nbu0", NULL);
        nb_batch_firewall_apply(b, "u0", "nbu0", rs, NB_FW_REPLACE);
        if (nb_submit(c, b, &res) != 0)
                return 2;
        ok = nb_result_status(res, 1) == -E2BIG &&
             strstr(nb_result_message(res, 1), "max_rules_per_request_nonroot") &&
             nb_result_status(res, 0) == -ECANCELED;
        nb_results_free(res);
        nb_batch_free(b);
        nb_fw_ruleset_free(rs);
        nb_close(c);
        return ok ? 0 : 3;
}

START_TEST(test_user_request_over_its_rule_cap_is_refused_and_changes_nothing)
{
        struct tu_helper h;
        struct attacker a;
        char *before, *after;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        before = tu_sh("nft list ruleset; ip -o link show | cut -d' ' -f2");
        attack_start(&a, &h, too_many_rules, NULL);
        attack_end(&a);
        after = tu_sh("nft list ruleset; ip -o link show | cut -d' ' -f2");
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        tu_helper_stop(&h);
}
END_TEST

/* The largest firewall request uid 65534 may make (132 guests of
 * no-promisc + clean-traffic on a tap of its own, 4,092 nftables rules as
 * installed, max_rules_per_request_nonroot counting them so): root's
 * Pings meanwhile are answered; the worst is printed. */
static int largest_user_batch(const char *sock, void *arg)
{
        const char *ips[] = {"192.0.2.10", NULL};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        uint64_t *took = arg, t0;
        nb_conn *c;
        int ok;

        if (nb_connect(sock, &c) != 0)
                return 1;
        nb_fw_add_no_promisc(rs, "52:54:00:00:00:04");
        nb_fw_add_clean_traffic(rs, "52:54:00:00:00:04", ips);
        nb_batch_tap_create(b, "nbu1", NULL);
        for (int i = 0; i < 132; i++) {
                char owner[32];
                snprintf(owner, sizeof(owner), "u%d", i);
                nb_batch_firewall_apply(b, owner, "nbu1", rs, NB_FW_REPLACE);
        }
        t0 = tu_now_us();
        if (nb_submit(c, b, &res) != 0)
                return 2;
        *took = tu_now_us() - t0;
        ok = nb_result_status(res, 132) == 0;
        if (!ok)
                fprintf(stderr, "largest_user_batch: %s\n", nb_result_message(res, 132));
        nb_results_free(res);
        nb_batch_free(b);
        nb_fw_ruleset_free(rs);
        nb_close(c);
        return ok ? 0 : 3;
}

START_TEST(test_user_largest_firewall_request_lets_roots_pings_through)
{
        struct tu_helper h;
        struct attacker a;
        uint64_t took = 0, worst = 0;
        long rss;
        int fds;
        pid_t pinger;
        int pp[2];

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        fds = tu_fd_count(h.pid);
        rss = th_rss_kib(h.pid);
        /* Root pings from a process of its own while the attack runs. */
        ck_assert_int_eq(pipe(pp), 0);
        pinger = fork();
        ck_assert_int_ge(pinger, 0);
        if (pinger == 0) {
                uint64_t w = th_worst_ping_us(&h, 1500);
                _exit(write(pp[1], &w, sizeof(w)) == sizeof(w) ? 0 : 1);
        }
        close(pp[1]);
        usleep(100 * 1000);
        attack_start(&a, &h, largest_user_batch, &took);
        ck_assert_int_eq(read(pp[0], &worst, sizeof(worst)), sizeof(worst));
        close(pp[0]);
        ck_assert_int_eq(waitpid(pinger, NULL, 0), pinger);
        attack_end(&a);
        th_report("uid 65534: its largest firewall request (4,092 rules) beside", &h, fds, rss,
                  th_rss_kib(h.pid), worst);
        tu_helper_stop(&h);
}
END_TEST

/* ---- max_devices and requests that run later ---- */

/* Four connections each ask for [Exec sleep 1, three persistent taps]:
 * every request is validated while nothing exists yet, and the taps are
 * made only after the Execs. max_devices (4) must hold when they run: the
 * helper once counted at validation only, and the uid got 6 here (31 in a
 * reviewer's variant). */
static int creates_after_a_wait(const char *sock, void *arg)
{
        Netbroker__Op op[4], *ops[4];
        Netbroker__Exec e = NETBROKER__EXEC__INIT;
        Netbroker__TapCreate tap = NETBROKER__TAP_CREATE__INIT;
        char *argv[] = {(char *)"/bin/sleep", (char *)"1"};
        int fd[4];

        (void)arg;
        e.path = (char *)"/bin/sleep";
        e.argv = argv;
        e.n_argv = 2;
        tap.name = (char *)"nbu%d";
        tap.persist = true;
        tap.set_owner = true;
        tap.owner_uid = NOBODY;
        tap.owner_gid = NOBODY;
        for (int i = 0; i < 4; i++) {
                netbroker__op__init(&op[i]);
                ops[i] = &op[i];
        }
        op[0].op_case = NETBROKER__OP__OP_EXEC;
        op[0].exec = &e;
        for (int i = 1; i < 4; i++) {
                op[i].op_case = NETBROKER__OP__OP_TAP_CREATE;
                op[i].tap_create = &tap;
        }
        for (int c = 0; c < 4; c++) {
                fd[c] = tu_raw_connect(sock);
                tu_raw_hello(fd[c]);
                th_send_request(fd[c], (uint64_t)c + 1, ops, 4, NULL, 0);
        }
        /* Every reply (fd frames first): wait until all four are done. */
        for (int c = 0; c < 4; c++)
                for (;;) {
                        Netbroker__ServerMessage *r = recv_msg(fd[c]);
                        bool reply = r && r->msg_case == NETBROKER__SERVER_MESSAGE__MSG_REPLY;
                        if (r)
                                netbroker__server_message__free_unpacked(r, NULL);
                        if (!r)
                                return 1;
                        if (reply)
                                break;
                }
        for (int c = 0; c < 4; c++)
                close(fd[c]);
        return 0;
}

START_TEST(test_user_cannot_exceed_max_devices_with_requests_that_run_later)
{
        struct tu_helper h;
        struct attacker a;
        char *owned;

        tu_private_netns(); /* only this test's interfaces are counted */
        tu_helper_start(&h, TU_ALLOW "policy_dir = /nonexistent/nbtest-policy.d\n"
                                     "[policy uid 65534]\n"
                                     "ops = tap_create exec\n"
                                     "name_prefixes = nbu\n"
                                     "max_devices = 4\n"
                                     "exec = /bin/sleep\n");
        attack_start(&a, &h, creates_after_a_wait, NULL);
        attack_end(&a);
        owned = tu_sh("python3 '" TU_PY("link_names.py") "' --alias netbroker:uid=65534");
        /* The first request to run makes its three; a later one that would
         * pass four is refused at its second tap and undone whole. */
        ck_assert_msg(atoi(owned) == 3, "uid 65534 owns %s interfaces (max_devices 4)", owned);
        free(owned);
        tu_helper_stop(&h);
}
END_TEST

/* ---- a parked request and everyone's firewall ---- */

/* uid 65534's request applies a firewall owner, then makes a 9-queue tap
 * whose fds it never reads, so the request waits for its client
 * indefinitely. Root's firewall change must not wait with it (it once
 * did: the request held the firewall until it ended). */
static int firewall_then_unread_fds(const char *sock, void *arg)
{
        Netbroker__Op op[4], *ops[4];
        Netbroker__TapCreate first = NETBROKER__TAP_CREATE__INIT, big = NETBROKER__TAP_CREATE__INIT;
        Netbroker__FirewallApply fw = NETBROKER__FIREWALL_APPLY__INIT;
        Netbroker__FwGroup g = NETBROKER__FW_GROUP__INIT, *groups[1] = {&g};
        int fd = tu_raw_connect(sock);

        (void)arg;
        tu_raw_hello(fd);
        first.name = (char *)"nbu3";
        big.name = (char *)"nbu%d";
        big.queues = 9;
        g.name = (char *)"g";
        fw.owner = (char *)"held";
        fw.ifname = (char *)"nbu3";
        fw.groups = groups;
        fw.n_groups = 1;
        for (int i = 0; i < 4; i++) {
                netbroker__op__init(&op[i]);
                ops[i] = &op[i];
        }
        op[0].op_case = NETBROKER__OP__OP_TAP_CREATE;
        op[0].tap_create = &first;
        op[1].op_case = NETBROKER__OP__OP_FIREWALL_APPLY;
        op[1].firewall_apply = &fw;
        op[2].op_case = NETBROKER__OP__OP_TAP_CREATE;
        op[2].tap_create = &big;
        op[3].op_case = NETBROKER__OP__OP_TAP_CREATE;
        op[3].tap_create = &big;
        th_send_request(fd, 1, ops, 4, NULL, 0);
        usleep(300 * 1000);
        return 0; /* never read */
}

START_TEST(test_user_request_waiting_on_its_fds_does_not_hold_roots_firewall)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        struct tu_helper h;
        struct attacker a;
        nb_conn *c;

        tu_private_netns(); /* what it leaves dies with it */
        tu_veth("nbur0", "nbur1");
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        attack_start(&a, &h, firewall_then_unread_fds, NULL);
        ck_assert_int_eq(nb_fw_add_no_promisc(rs, "52:54:00:00:00:05"), 0);
        nb_batch_firewall_apply(b, "rootfw", "nbur0", rs, NB_FW_REPLACE);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        uint64_t t0 = tu_now_us();
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        uint64_t took = tu_now_us() - t0;
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert_msg(took < 2000000, "root's FirewallApply waited %llu us",
                      (unsigned long long)took);
        printf("hostile: uid 65534's request parked on unread fds: root's FirewallApply took "
               "%.1f ms\n",
               took / 1000.0);
        nb_results_free(res);
        nb_batch_free(b);
        nb_fw_ruleset_free(rs);
        nb_close(c);
        attack_end(&a);
        tu_helper_stop(&h);
}
END_TEST

/* ---- rules that would outlive their interface ---- */

static int rules_then_delete(const char *sock, void *arg)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule drop = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_DROP};
        nb_tap_opts own = {.size = sizeof(nb_tap_opts),
                           .persist = true,
                           .set_owner = true,
                           .uid = NOBODY,
                           .gid = NOBODY};
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_conn *c;
        int ok;

        (void)arg;
        if (nb_connect(sock, &c) != 0)
                return 1;
        nb_fw_rule_add(rs, &drop);
        drop.direction = NB_FW_TO_GUEST;
        nb_fw_rule_add(rs, &drop);
        nb_batch_tap_create(b, "nbu5", &own);
        nb_batch_firewall_apply(b, "fw5", "nbu5", rs, NB_FW_REPLACE);
        nb_batch_link_delete(b, "nbu5");
        ok = nb_submit(c, b, &res) == 0 && nb_results_first_error(res) == -1;
        nb_results_free(res);
        nb_batch_free(b);
        nb_fw_ruleset_free(rs);
        nb_close(c);
        return ok ? 0 : 2;
}

/* uid 65534 binds DROP rules to its tap and deletes the tap. The kernel
 * (6.16 and later) would keep the chains and bind them to the next device
 * of that name, root's included; the helper removes them with the tap. */
START_TEST(test_user_rules_do_not_outlive_its_interface)
{
        struct tu_helper h;
        struct attacker a;
        char *chains;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW USER_POLICY);
        attack_start(&a, &h, rules_then_delete, NULL);
        attack_end(&a);
        tu_veth("nbu5", "nbu5p"); /* root's, by the same name */
        chains = tu_sh("nft list chains netdev 2>/dev/null | grep -c 'device \"nbu5\"' || true");
        ck_assert_msg(atoi(chains) == 0, "%s chains are bound to root's nbu5", chains);
        free(chains);
        tu_helper_stop(&h);
}
END_TEST

/* ---- rules planted on a name whose interface is gone ---- */

/* What uid 65534 may do here: interfaces, firewall owners and networks on
 * names of its own. */
#define GONE_POLICY                                                                                \
        "policy_dir = /nonexistent/nbtest-policy.d\n"                                              \
        "[policy uid 65534]\n"                                                                     \
        "ops = tap_create veth_create bridge_create link_delete firewall_apply firewall_remove "   \
        "net_apply net_remove\n"                                                                   \
        "name_prefixes = nbu\n"

/* What uid 65534 saw (shared with the test: the attacker is a child). Its
 * own interfaces: nbu6 (a persistent tap, or a bridge for networks), veths
 * nbu6a/nbu6b and nbu6c/nbu6d. */
struct gone_attack {
        bool network; /* NetApply instead of FirewallApply */
        int made; /* the set-up request's first failure, or 0 */
        int same[2], peer[2], ensure[2]; /* the statuses of each request's two ops */
        char same_msg[512], peer_msg[512], ensure_msg[512]; /* op 1's message */
};

/* Drop all, both ways (FirewallApply), or an isolated network (NetApply),
 * on ifname. */
static void gone_apply(nb_batch *b, bool network, const char *owner, const char *ifname,
                       nb_fw_ruleset *rs)
{
        static const char *const subnets[] = {"10.97.0.0/24"};
        nb_net_spec spec = NB_NET_SPEC_INIT;

        if (!network) {
                nb_batch_firewall_apply(b, owner, ifname, rs, NB_FW_REPLACE);
                return;
        }
        spec.bridge = ifname;
        spec.subnets = subnets;
        spec.n_subnets = 1;
        spec.mode = NB_NET_ISOLATED;
        nb_batch_net_apply(b, owner, &spec);
}

/* Submits b (and frees it): st[] the two ops' statuses, msg op 1's. */
static void gone_submit(nb_conn *c, nb_batch *b, int st[2], char *msg, size_t len)
{
        nb_results *res = NULL;

        st[0] = st[1] = -EIO;
        snprintf(msg, len, "no reply");
        if (nb_submit(c, b, &res) == 0) {
                st[0] = nb_result_status(res, 0);
                st[1] = nb_result_status(res, 1);
                snprintf(msg, len, "%s", nb_result_message(res, 1));
        }
        nb_results_free(res);
        nb_batch_free(b);
}

static int apply_on_gone_names(const char *sock, void *arg)
{
        struct gone_attack *x = arg;
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule drop = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_DROP};
        nb_tap_opts own = {.size = sizeof(nb_tap_opts),
                           .persist = true,
                           .set_owner = true,
                           .uid = NOBODY,
                           .gid = NOBODY};
        nb_results *res = NULL;
        nb_batch *b = nb_batch_new();
        nb_conn *c;

        if (nb_connect(sock, &c) != 0)
                return 1;
        nb_fw_rule_add(rs, &drop);
        drop.direction = NB_FW_TO_GUEST;
        nb_fw_rule_add(rs, &drop);
        if (x->network)
                nb_batch_bridge_create(b, "nbu6");
        else
                nb_batch_tap_create(b, "nbu6", &own);
        nb_batch_veth_create(b, "nbu6a", "nbu6b", -1);
        nb_batch_veth_create(b, "nbu6c", "nbu6d", -1);
        x->made = nb_submit(c, b, &res) == 0 && nb_results_first_error(res) == -1 ? 0 : -EIO;
        nb_results_free(res);
        nb_batch_free(b);
        /* The name the batch deletes first. */
        b = nb_batch_new();
        nb_batch_link_delete(b, "nbu6");
        gone_apply(b, x->network, "evil_same", "nbu6", rs);
        gone_submit(c, b, x->same, x->same_msg, sizeof(x->same_msg));
        /* A name that goes with the one the batch deletes (a veth's peer):
         * validation sees it, the run does not. */
        b = nb_batch_new();
        nb_batch_link_delete(b, "nbu6a");
        gone_apply(b, x->network, "evil_peer", "nbu6b", rs);
        gone_submit(c, b, x->peer, x->peer_msg, sizeof(x->peer_msg));
        if (!x->network) {
                b = nb_batch_new();
                nb_batch_link_delete(b, "nbu6c");
                nb_batch_firewall_ensure_hash(b, "evil_ensure", "nbu6d",
                                              "0123456789abcdef0123456789abcdef");
                gone_submit(c, b, x->ensure, x->ensure_msg, sizeof(x->ensure_msg));
        }
        nb_fw_ruleset_free(rs);
        nb_close(c);
        return 0;
}

/* How many times the ruleset names what: as nft -j lists it (json), or
 * as text, which shows the device a netdev chain hooks (nft 1.0.6's JSON
 * does not). */
static int ruleset_names(bool json, const char *what)
{
        char *n = tu_sh("nft %s list ruleset | grep -o '%s' | wc -l", json ? "-j" : "", what);
        int v = atoi(n);

        free(n);
        return v;
}

static void print_gone(const char *who, const char *batch, const int st[2], const char *msg)
{
        printf("hostile: %s [%s]: %d, %d: %s\n", who, batch, st[0], st[1], msg);
        fflush(stdout);
}

/* uid 65534 deletes an interface of its own and, later in the same batch,
 * binds a drop-all firewall owner to its name. The kernel (6.16 and later)
 * keeps a netdev chain of a gone name and hooks the next device of that
 * name, root's next vnet0 included, and fw_gone.h's clean-up ran before the
 * owner was there. Before, both ops succeeded: validation asked the kernel,
 * which still had the name, and the run let a gone interface pass. Now
 * validation refuses it (nothing runs), and the run refuses an interface
 * gone since validation (a veth's peer goes with it), root's too: nothing
 * of it is in the ruleset. */
START_TEST(test_user_firewall_on_a_name_its_batch_deleted_is_refused)
{
        struct gone_attack *x =
                mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule drop = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_DROP};
        struct tu_helper h;
        struct attacker a;
        nb_results *res;
        nb_batch *b;
        nb_conn *c;
        int evil, named;

        ck_assert(x != MAP_FAILED);
        *x = (struct gone_attack){.network = false};
        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW GONE_POLICY);
        attack_start(&a, &h, apply_on_gone_names, x);
        attack_end(&a);
        evil = ruleset_names(true, "evil");
        named = ruleset_names(false, "\"nbu6[a-d]*\"");
        printf("hostile: uid 65534's owners on gone names: %d mentions of evil*, %d of nbu6*\n",
               evil, named);
        print_gone("uid 65534", "link_delete nbu6, firewall_apply nbu6", x->same, x->same_msg);
        print_gone("uid 65534", "link_delete nbu6a, firewall_apply nbu6b", x->peer, x->peer_msg);
        print_gone("uid 65534", "link_delete nbu6c, firewall_ensure_hash nbu6d", x->ensure,
                   x->ensure_msg);
        ck_assert_int_eq(x->made, 0);
        ck_assert_int_eq(x->same[1], -ENODEV);
        ck_assert_msg(strstr(x->same_msg, "an earlier op of this batch deletes it"), "%s",
                      x->same_msg);
        ck_assert_msg(tu_link_exists("nbu6"), "the refused batch deleted nbu6");
        ck_assert_int_eq(x->peer[0], 0);
        ck_assert_int_eq(x->peer[1], -ENODEV);
        ck_assert_msg(strstr(x->peer_msg, "gone since the request was checked"), "%s", x->peer_msg);
        ck_assert_int_eq(x->ensure[0], 0);
        ck_assert_int_eq(x->ensure[1], -ENODEV);
        ck_assert_int_eq(evil, 0);
        ck_assert_int_eq(named, 0);
        /* Root's: the same, on a veth's peer it deletes with the veth. */
        tu_veth("nbr0", "nbr1");
        ck_assert_int_eq(nb_fw_rule_add(rs, &drop), 0);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        b = nb_batch_new();
        nb_batch_link_delete(b, "nbr0");
        nb_batch_firewall_apply(b, "rootfw", "nbr1", rs, NB_FW_REPLACE);
        res = tu_submit(c, b);
        print_gone("root", "link_delete nbr0, firewall_apply nbr1",
                   (int[]){nb_result_status(res, 0), nb_result_status(res, 1)},
                   nb_result_message(res, 1));
        tu_assert_status(res, 0, 0, NULL);
        tu_assert_status(res, 1, -ENODEV, "gone since the request was checked");
        nb_results_free(res);
        ck_assert_int_eq(ruleset_names(true, "rootfw"), 0);
        ck_assert_int_eq(ruleset_names(false, "\"nbr1\""), 0);
        nb_close(c);
        nb_fw_ruleset_free(rs);
        tu_helper_stop(&h);
        munmap(x, sizeof(*x));
}
END_TEST

/* The same with a network (NetApply): its rules match the bridge by name,
 * and would isolate the next bridge of that name, root's. Before, both
 * ops succeeded and 3 rules named the gone bridge. */
START_TEST(test_user_network_on_a_bridge_its_batch_deleted_is_refused)
{
        struct gone_attack *x =
                mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        struct tu_helper h;
        struct attacker a;
        int evil, named;

        ck_assert(x != MAP_FAILED);
        *x = (struct gone_attack){.network = true};
        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW GONE_POLICY);
        attack_start(&a, &h, apply_on_gone_names, x);
        attack_end(&a);
        evil = ruleset_names(true, "evil");
        named = ruleset_names(false, "\"nbu6[a-d]*\"");
        printf("hostile: uid 65534's networks on gone names: %d mentions of evil*, %d of "
               "nbu6*\n",
               evil, named);
        print_gone("uid 65534", "link_delete nbu6, net_apply nbu6", x->same, x->same_msg);
        print_gone("uid 65534", "link_delete nbu6a, net_apply nbu6b", x->peer, x->peer_msg);
        ck_assert_int_eq(x->made, 0);
        ck_assert_int_eq(x->same[1], -ENODEV);
        ck_assert_msg(strstr(x->same_msg, "an earlier op of this batch deletes it"), "%s",
                      x->same_msg);
        ck_assert_msg(tu_link_exists("nbu6"), "the refused batch deleted nbu6");
        ck_assert_int_eq(x->peer[0], 0);
        ck_assert_int_eq(x->peer[1], -ENODEV);
        ck_assert_msg(strstr(x->peer_msg, "gone since the request was checked"), "%s", x->peer_msg);
        ck_assert_int_eq(evil, 0);
        ck_assert_int_eq(named, 0);
        tu_helper_stop(&h);
        munmap(x, sizeof(*x));
}
END_TEST

#ifdef NB_TEST_HOOKS
/* Root's two owners, in one request that the test holds between its two
 * ops (NETBROKERD_TEST_HOLD_RUN); st: their statuses, msg op 1's message. */
static void two_owners_held(const char *sock, int st[2], char *msg, size_t len)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule drop = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_DROP};
        nb_batch *b = nb_batch_new();
        nb_conn *c;

        nb_fw_rule_add(rs, &drop);
        nb_batch_firewall_apply(b, "racea", "nbg0", rs, NB_FW_REPLACE);
        nb_batch_firewall_apply(b, "raceb", "nbg1", rs, NB_FW_REPLACE);
        st[0] = st[1] = -EIO;
        if (nb_connect(sock, &c) == 0) {
                gone_submit(c, b, st, msg, len);
                nb_close(c);
        } else {
                nb_batch_free(b);
        }
        nb_fw_ruleset_free(rs);
}

/* A request yields to the loop between its ops (slices, reads on the
 * lane; here the test holds it there): the interface its first owner was
 * checked on goes meanwhile, and fw_gone's clean-up of it finds no owner
 * yet. Before, the commit then put the owner on the gone name (chains
 * hooking "nbg0", for the next nbg0); now the interfaces are looked up
 * again right before the commit: ENODEV, and nothing is applied. */
START_TEST(test_interface_gone_before_the_commit_gets_no_owner)
{
        struct {
                int st[2];
                char msg[512];
        } *x = mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        char hold[] = "/tmp/nbtest-gone-holdXXXXXX", held[64];
        struct tu_helper h;
        int fd, status, i;
        pid_t pid;

        ck_assert(x != MAP_FAILED);
        tu_private_netns(); /* what it leaves dies with it */
        tu_veth("nbg0", "nbg0p");
        tu_veth("nbg1", "nbg1p");
        ck_assert_int_ge((fd = mkstemp(hold)), 0);
        close(fd);
        snprintf(held, sizeof(held), "%s.held", hold);
        ck_assert_int_eq(setenv("NETBROKERD_TEST_HOLD_RUN", hold, 1), 0);
        tu_helper_start(&h, TU_ALLOW);
        unsetenv("NETBROKERD_TEST_HOLD_RUN");
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                two_owners_held(h.sock, x->st, x->msg, sizeof(x->msg));
                _exit(0);
        }
        for (i = 0; i < 1000 && access(held, F_OK) != 0; i++)
                usleep(10 * 1000);
        ck_assert_msg(i < 1000, "the request did not reach the hold after its first op");
        free(tu_sh("ip link del nbg0"));
        /* The loop reads the link's deletion and runs fw_gone's clean-up
         * of nbg0 on the firewall's lane, before the commit. */
        usleep(500 * 1000);
        unlink(hold);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        print_gone("root", "firewall_apply nbg0, (nbg0 deleted) firewall_apply nbg1", x->st,
                   x->msg);
        printf("hostile: root's owners after nbg0 went before the commit: %d mentions of race*, "
               "%d chain devices nbg0\n",
               ruleset_names(true, "race"), ruleset_names(false, "\"nbg0\""));
        fflush(stdout);
        ck_assert_int_eq(x->st[0], -ENODEV);
        ck_assert_int_eq(x->st[1], -ENODEV);
        ck_assert_msg(strstr(x->msg, "nbg0 went away before the commit"), "%s", x->msg);
        ck_assert_int_eq(ruleset_names(true, "race"), 0);
        ck_assert_int_eq(ruleset_names(false, "\"nbg[01]\""), 0);
        unlink(held);
        tu_helper_stop(&h);
        munmap(x, sizeof(*x));
}
END_TEST

/* uid 65534: bridges nbu7a and nbu7b and a tap nbu7t of its own (one op
 * a request: a request of one op is not held), then one request that the
 * test holds between its two ops: a network on nbu7a, then a network on
 * nbu7b (alone: the networks commit at their last op) or, joined, an
 * owner on nbu7t (one commit for both kinds, at the firewall op). */
static void two_owners_on_bridges_held(const char *sock, bool joined, int st[2], char *msg,
                                       size_t len)
{
        static const char *const subnets[] = {"10.96.0.0/24"};
        nb_net_spec spec = NB_NET_SPEC_INIT;
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_tap_opts own = {.size = sizeof(nb_tap_opts),
                           .persist = true,
                           .set_owner = true,
                           .uid = NOBODY,
                           .gid = NOBODY};
        nb_results *res;
        nb_batch *b;
        nb_conn *c;

        st[0] = st[1] = -EIO;
        if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0 ||
            nb_connect(sock, &c) != 0)
                return;
        for (int i = 0; i < 3; i++) {
                b = nb_batch_new();
                if (i < 2)
                        nb_batch_bridge_create(b, i ? "nbu7b" : "nbu7a");
                else
                        nb_batch_tap_create(b, "nbu7t", &own);
                res = NULL;
                if (nb_submit(c, b, &res) != 0 || nb_result_status(res, 0) != 0)
                        st[0] = -EEXIST;
                nb_results_free(res);
                nb_batch_free(b);
        }
        if (st[0] == -EEXIST)
                return;
        spec.subnets = subnets;
        spec.n_subnets = 1;
        spec.mode = NB_NET_ISOLATED;
        b = nb_batch_new();
        spec.bridge = "nbu7a";
        nb_batch_net_apply(b, "racenet_a", &spec);
        spec.bridge = "nbu7b";
        if (joined)
                nb_batch_firewall_apply(b, "racefw", "nbu7t", rs, NB_FW_REPLACE);
        else
                nb_batch_net_apply(b, "racenet_b", &spec);
        gone_submit(c, b, st, msg, len);
        nb_fw_ruleset_free(rs);
        nb_close(c);
}

/* The same for networks of a caller other than root, whose rules match
 * the bridge by name, committed alone and joined with a guest's owner.
 * Before, the commit put them on the gone nbu7a (4 rules naming it, for
 * root's next nbu7a); now ENODEV, and nothing is applied. */
START_TEST(test_bridge_gone_before_the_commit_gets_no_network)
{
        struct {
                int st[2];
                char msg[512];
        } *x = mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        struct tu_helper h;
        int fd, status, i;
        pid_t pid;

        ck_assert(x != MAP_FAILED);
        tu_private_netns(); /* what it leaves dies with it */
        for (int joined = 0; joined < 2; joined++) {
                char hold[] = "/tmp/nbtest-gone-holdXXXXXX", held[64];
                ck_assert_int_ge((fd = mkstemp(hold)), 0);
                close(fd);
                snprintf(held, sizeof(held), "%s.held", hold);
                ck_assert_int_eq(setenv("NETBROKERD_TEST_HOLD_RUN", hold, 1), 0);
                tu_helper_start(&h, TU_ALLOW GONE_POLICY);
                unsetenv("NETBROKERD_TEST_HOLD_RUN");
                ck_assert_int_eq(chmod(h.sock, 0666), 0);
                pid = fork();
                ck_assert_int_ge(pid, 0);
                if (pid == 0) {
                        two_owners_on_bridges_held(h.sock, joined, x->st, x->msg, sizeof(x->msg));
                        _exit(0);
                }
                for (i = 0; i < 1000 && access(held, F_OK) != 0; i++)
                        usleep(10 * 1000);
                ck_assert_msg(i < 1000, "the request did not reach the hold after its first op");
                free(tu_sh("ip link del nbu7a"));
                usleep(500 * 1000);
                unlink(hold);
                ck_assert_int_eq(waitpid(pid, &status, 0), pid);
                ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                print_gone("uid 65534",
                           joined ? "net_apply nbu7a, (nbu7a deleted) firewall_apply nbu7t"
                                  : "net_apply nbu7a, (nbu7a deleted) net_apply nbu7b",
                           x->st, x->msg);
                printf("hostile: uid 65534's owners after nbu7a went before the commit: %d "
                       "mentions of race*, %d rules naming nbu7a\n",
                       ruleset_names(true, "race"), ruleset_names(false, "\"nbu7a\""));
                fflush(stdout);
                ck_assert_int_eq(x->st[0], -ENODEV);
                ck_assert_int_eq(x->st[1], -ENODEV);
                ck_assert_msg(strstr(x->msg, "nbu7a went away before the commit"), "%s", x->msg);
                ck_assert_int_eq(ruleset_names(true, "race"), 0);
                ck_assert_int_eq(ruleset_names(false, "\"nbu7[abt]\""), 0);
                unlink(held);
                tu_helper_stop(&h);
                free(tu_sh("ip link del nbu7b; ip link del nbu7t"));
        }
        munmap(x, sizeof(*x));
}
END_TEST
#endif

/* ---- the audit trail names the caller ---- */

static int make_a_tap(const char *sock, void *arg)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_conn *c;
        int ok;

        (void)arg;
        if (nb_connect(sock, &c) != 0)
                return 1;
        nb_batch_tap_create(b, "nbu2", NULL);
        ok = nb_submit(c, b, &res) == 0 && nb_result_status(res, 0) == 0;
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
        return ok ? 0 : 2;
}

START_TEST(test_user_changes_are_audited_with_its_uid)
{
        char path[32], want[160];
        struct tu_helper h;
        struct attacker a;
        const char *log;

        tu_private_netns(); /* what it leaves dies with it */
        th_helper_start_logged(&h, TU_ALLOW USER_POLICY, path);
        attack_start(&a, &h, make_a_tap, NULL);
        snprintf(want, sizeof(want), "audit: uid=65534 pid=%d op=tap_create object=nbu2 status=0",
                 (int)a.pid);
        attack_end(&a);
        tu_helper_stop(&h);
        log = tu_read_file(path);
        ck_assert_msg(log && strstr(log, want), "no '%s' in:\n%s", want, log ? log : "");
        unlink(path);
}
END_TEST

/* 100 route_adds it may not run, 25 a request (each a refusal the
 * client pays nothing for). */
static int refused_routes(const char *sock, void *arg)
{
        nb_conn *c;
        int bad = 0;

        (void)arg;
        if (nb_connect(sock, &c) != 0)
                return 1;
        for (int r = 0; r < 4; r++) {
                nb_batch *b = nb_batch_new();
                nb_results *res = NULL;
                for (int i = 0; i < 25; i++) {
                        char dst[32];
                        nb_route rt = NB_ROUTE_INIT;
                        snprintf(dst, sizeof(dst), "10.%d.%d.0", r, i);
                        rt.destination = dst;
                        rt.prefix_len = 24;
                        rt.gateway = "10.0.0.1";
                        nb_batch_route_add(b, &rt);
                }
                nb_batch_set_flags(b, NB_BATCH_CONTINUE_ON_ERROR);
                if (nb_submit(c, b, &res) != 0 || nb_result_status(res, 0) != -EPERM)
                        bad = 2;
                nb_results_free(res);
                nb_batch_free(b);
        }
        nb_close(c);
        return bad;
}

/* What the policy refuses is in the audit trail too (a refused route_add
 * is a caller reaching for the host's routes), with who asked and why;
 * before, a refused op left no line. A refusal costs its client nothing,
 * so at most NBD_AUDIT_REFUSALS_PER_S (20) such lines a second are
 * written: 100 refusals at once leave 20, and the rest are counted. */
START_TEST(test_user_refusals_are_audited_at_a_bounded_rate)
{
        char path[32], want[200];
        struct tu_helper h;
        struct attacker a;
        const char *log, *at;
        unsigned lines = 0;
        uint64_t unlogged;
        nb_conn *root;

        tu_private_netns();
        th_helper_start_logged(&h, TU_ALLOW USER_POLICY, path);
        attack_start(&a, &h, refused_routes, NULL);
        snprintf(want, sizeof(want),
                 "audit: uid=65534 pid=%d op=route_add object=10.0.0.0/24 status=1 "
                 "result=refused error=\"policy: uid 65534 may not run route_add",
                 (int)a.pid);
        attack_end(&a);
        ck_assert_int_eq(nb_connect(h.sock, &root), 0);
        /* Root's refusal is logged whatever another uid's flood did. */
        {
                nb_batch *b = nb_batch_new();
                nb_results *res = NULL;
                nb_batch_link_delete(b, "nbroot%d");
                ck_assert_int_eq(nb_submit(root, b, &res), 0);
                ck_assert_int_eq(nb_result_status(res, 0), -EINVAL);
                nb_results_free(res);
                nb_batch_free(b);
        }
        unlogged = tu_stat(root, "audit_refusals_unlogged");
        nb_close(root);
        tu_helper_stop(&h);
        log = tu_read_file(path);
        ck_assert_msg(log && strstr(log, want), "no '%s' in:\n%s", want, log ? log : "");
        ck_assert_msg(strstr(log, "op=link_delete object=nbroot%d status=22 result=refused"),
                      "root's refusal is not in:\n%s", log);
        /* uid 65534's refused lines. */
        for (at = log; at && *at; at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL) {
                const char *eol = strchr(at, '\n'), *u = strstr(at, "uid=65534 pid"),
                           *ref = strstr(at, "result=refused");
                lines += u && ref && (!eol || (u < eol && ref < eol));
        }
        printf("hostile-user: 100 refused route_adds: %u audit lines, %llu unlogged\n", lines,
               (unsigned long long)unlogged);
        /* Within one second, or across two (a second may start mid-way). */
        ck_assert_uint_ge(lines, 20);
        ck_assert_uint_le(lines, 40);
        ck_assert_uint_eq(lines + unlogged, 100);
        unlink(path);
}
END_TEST

/* ---- network owners (NetApply) of a caller other than root ---- */

/* What uid 65534 may do with networks: isolated and open ones on bridges
 * of its own. */
#define NET_POLICY                                                                                 \
        "policy_dir = /nonexistent/nbtest-policy.d\n"                                              \
        "[policy uid 65534]\n"                                                                     \
        "ops = bridge_create link_delete net_apply net_remove\n"                                   \
        "name_prefixes = nbu\n"

/* A bridge of its own, then `requests` requests of `each` isolated
 * networks on it; status: the first failure's, or 0. Shared with the
 * test (the attacker is a child). */
struct nets_attack {
        int requests, each, status;
};

static int one_nets_request(nb_conn *c, int req, int each, bool bridge)
{
        static const char *const subnets[] = {"10.99.0.0/24"};
        nb_net_spec spec = NB_NET_SPEC_INIT;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        long failed;
        int status = 0, n = 0;

        spec.bridge = "nbu7";
        spec.subnets = subnets;
        spec.n_subnets = 1;
        spec.mode = NB_NET_ISOLATED;
        if (bridge && ++n)
                nb_batch_bridge_create(b, "nbu7");
        for (int i = 0; i < each; i++, n++) {
                char owner[32];
                snprintf(owner, sizeof(owner), "n%d_%d", req, i);
                nb_batch_net_apply(b, owner, &spec);
        }
        if (nb_submit(c, b, &res) != 0)
                return -EIO;
        failed = nb_results_first_error(res);
        /* The op that stopped the batch (the others: ECANCELED). */
        for (long i = n - 1; i >= 0; i--)
                if (nb_result_status(res, (size_t)i) != -ECANCELED &&
                    nb_result_status(res, (size_t)i) != 0)
                        failed = i;
        if (failed >= 0) {
                status = nb_result_status(res, (size_t)failed);
                printf("hostile: networks: request %d op %ld: %s\n", req, failed,
                       nb_result_message(res, (size_t)failed));
                fflush(stdout);
        }
        nb_results_free(res);
        nb_batch_free(b);
        return status;
}

static int many_networks(const char *sock, void *arg)
{
        struct nets_attack *x = arg;
        nb_conn *c;

        if (nb_connect(sock, &c) != 0)
                return 1;
        x->status = 0;
        for (int r = 0; r < x->requests && !x->status; r++)
                x->status = one_nets_request(c, r, x->each, r == 0);
        nb_close(c);
        return 0;
}

static unsigned net_chains(void)
{
        char *n = tu_sh("nft list table inet netbroker_net 2>/dev/null | grep -c 'chain ' || true");
        unsigned v = (unsigned)atoi(n);

        free(n);
        return v;
}

/* A caller other than root puts one network on each bridge of its own: its
 * networks are bounded by max_devices like its interfaces. Before, 8
 * requests of 250 owners on one bridge put 1,000 in (the fifth request's
 * commit met ENOBUFS), each a chain every later network request of
 * anyone's read first, on the loop: root's NetApply took 20 ms after them
 * (0.4-1.8 ms now), and nothing bounded smaller requests. */
START_TEST(test_user_networks_are_one_per_bridge_it_owns)
{
        static const char *const subnets[] = {"10.98.0.0/24"};
        nb_net_spec spec = NB_NET_SPEC_INIT;
        struct tu_helper h;
        struct attacker a;
        struct nets_attack *x =
                mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        uint64_t t0, took;
        nb_results *res;
        nb_batch *b;
        nb_conn *c;
        unsigned chains;

        ck_assert(x != MAP_FAILED);
        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW NET_POLICY);
        *x = (struct nets_attack){.requests = 8, .each = 250};
        attack_start(&a, &h, many_networks, x);
        attack_end(&a);
        chains = net_chains();
        /* What root's next network request costs now (every one reads
         * the helper's whole table first). */
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        spec.bridge = "nbroot0";
        spec.subnets = subnets;
        spec.n_subnets = 1;
        spec.mode = NB_NET_ISOLATED;
        b = nb_batch_new();
        nb_batch_net_apply(b, "root0", &spec);
        t0 = tu_now_us();
        res = tu_submit(c, b);
        took = tu_now_us() - t0;
        printf("hostile: uid 65534 asked for 8 x 250 networks on one bridge: status %d, %u chains; "
               "root's NetApply then took %.1f ms: %d %s\n",
               x->status, chains, took / 1000.0, nb_result_status(res, 0),
               nb_result_message(res, 0));
        fflush(stdout);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        nb_results_free(res);
        nb_close(c);
        ck_assert_int_eq(x->status, -EEXIST);
        ck_assert_uint_eq(chains, 0);
        /* One network on its bridge is what it may have. */
        *x = (struct nets_attack){.requests = 1, .each = 1};
        free(tu_sh("ip link del nbu7 2>/dev/null; true")); /* undone with the batch */
        attack_start(&a, &h, many_networks, x);
        attack_end(&a);
        ck_assert_int_eq(x->status, 0);
        tu_helper_stop(&h);
        munmap(x, sizeof(*x));
}
END_TEST

static nb_results *submit_as_attacker(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;

        if (nb_submit(c, b, &res) != 0)
                res = NULL;
        nb_batch_free(b);
        return res;
}

/* A network on a bridge of its own; the bridge's deletion is refused while
 * the network is there, and goes with its removal. */
static int network_then_delete(const char *sock, void *arg)
{
        struct nets_attack x = {.requests = 1, .each = 1};
        nb_results *res;
        nb_batch *b;
        nb_conn *c;
        int ok;

        (void)arg;
        if (many_networks(sock, &x) != 0 || x.status != 0 || nb_connect(sock, &c) != 0)
                return 3;
        b = nb_batch_new();
        nb_batch_link_delete(b, "nbu7");
        res = submit_as_attacker(c, b);
        ok = res && nb_result_status(res, 0) == -EBUSY &&
             strstr(nb_result_message(res, 0), "network n0_0 is on nbu7");
        if (res)
                printf("hostile: uid 65534 deletes the bridge of its network: %d %s\n",
                       nb_result_status(res, 0), nb_result_message(res, 0));
        fflush(stdout);
        nb_results_free(res);
        b = nb_batch_new();
        nb_batch_net_remove(b, "n0_0");
        nb_batch_link_delete(b, "nbu7");
        res = submit_as_attacker(c, b);
        ok = ok && res && nb_results_first_error(res) == -1;
        nb_results_free(res);
        nb_close(c);
        return ok ? 0 : 4;
}

/* uid 65534 isolates a bridge of its own and deletes the bridge: its
 * rules match the bridge by name, so they would isolate the next bridge of
 * that name, root's (before: 3 rules named root's nbu7). The deletion is
 * refused (EBUSY) while the network is there; removed with it, it leaves
 * nothing. */
START_TEST(test_user_network_does_not_outlive_its_bridge)
{
        struct tu_helper h;
        struct attacker a;
        char *rules;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW NET_POLICY);
        attack_start(&a, &h, network_then_delete, NULL);
        attack_end(&a);
        free(tu_sh("ip link add nbu7 type bridge")); /* root's, by the same name */
        rules = tu_sh("nft list table inet netbroker_net 2>/dev/null | grep -c '\"nbu7\"' || true");
        printf("hostile: uid 65534's network after its bridge went: %d rules name nbu7\n",
               atoi(rules));
        ck_assert_msg(atoi(rules) == 0, "%s rules match root's nbu7", rules);
        free(rules);
        tu_helper_stop(&h);
}
END_TEST

/* ---- an undo touches only what its op made or changed ---- */

#define UNDO_POLICY                                                                                \
        "policy_dir = /nonexistent/nbtest-policy.d\n"                                              \
        "[policy uid 65534]\n"                                                                     \
        "ops = tap_create bridge_create link_set link_delete\n"                                    \
        "name_prefixes = nbu\n"
#define UNDO_SETTINGS_POLICY                                                                       \
        "policy_dir = /nonexistent/nbtest-policy.d\n"                                              \
        "[policy uid 65534]\n"                                                                     \
        "ops = tap_create bridge_create link_delete sysctl_set bridge_opt_set bandwidth_set "      \
        "addr_delete\n"                                                                            \
        "name_prefixes = nbu\n"

/* A new op of kind c whose message (size bytes, zeroed) is returned for
 * its init and fields: the members of the op's union are all pointers. */
static void *undo_op_new(Netbroker__Op **ret, Netbroker__Op__OpCase c, size_t size)
{
        Netbroker__Op *op = calloc(1, sizeof(*op));
        void *m = calloc(1, size);

        ck_assert(op && m);
        netbroker__op__init(op);
        op->op_case = c;
        op->tap_create = m;
        *ret = op;
        return m;
}

static Netbroker__Op *undo_op_tap(const char *name, unsigned queues)
{
        Netbroker__Op *op;
        Netbroker__TapCreate *m = undo_op_new(&op, NETBROKER__OP__OP_TAP_CREATE, sizeof(*m));

        netbroker__tap_create__init(m);
        m->name = (char *)name;
        m->queues = queues;
        return op;
}

static Netbroker__Op *undo_op_bridge(const char *name)
{
        Netbroker__Op *op;
        Netbroker__BridgeCreate *m = undo_op_new(&op, NETBROKER__OP__OP_BRIDGE_CREATE, sizeof(*m));

        netbroker__bridge_create__init(m);
        m->name = (char *)name;
        return op;
}

static Netbroker__Op *undo_op_nomaster(const char *name)
{
        Netbroker__Op *op;
        Netbroker__LinkSet *m = undo_op_new(&op, NETBROKER__OP__OP_LINK_SET, sizeof(*m));

        netbroker__link_set__init(m);
        m->name = (char *)name;
        m->nomaster = true;
        return op;
}

static Netbroker__Op *undo_op_delete(const char *name)
{
        Netbroker__Op *op;
        Netbroker__LinkDelete *m = undo_op_new(&op, NETBROKER__OP__OP_LINK_DELETE, sizeof(*m));

        netbroker__link_delete__init(m);
        m->name = (char *)name;
        return op;
}

static void undo_ops_free(Netbroker__Op **ops, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(ops[i]->tap_create); /* the one member of the union set */
                free(ops[i]);
        }
}

/* Send ops as one request on fd and free them. */
static void undo_send(int fd, uint64_t id, Netbroker__Op **ops, size_t n)
{
        th_send_request(fd, id, ops, n, NULL, 0);
        undo_ops_free(ops, n);
}

/* The reply to request id on fd (frames of fds before it are skipped). */
static Netbroker__Reply *undo_reply(int fd, uint64_t id, Netbroker__ServerMessage **ret_msg)
{
        for (;;) {
                Netbroker__ServerMessage *m;
                ck_assert_msg(frame_within(fd, ARRIVES_MS), "no reply to request %llu",
                              (unsigned long long)id);
                m = recv_msg(fd);
                ck_assert_ptr_nonnull(m);
                if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_REPLY && m->reply->id == id) {
                        *ret_msg = m;
                        return m->reply;
                }
                netbroker__server_message__free_unpacked(m, NULL);
        }
}

/* One op on fd as uid 65534, which must succeed. */
static void undo_one(int fd, uint64_t id, Netbroker__Op *op)
{
        Netbroker__ServerMessage *m;
        Netbroker__Reply *r;

        undo_send(fd, id, &op, 1);
        r = undo_reply(fd, id, &m);
        ck_assert_uint_eq(r->n_results, 1);
        ck_assert_msg(r->results[0]->status == 0, "request %llu: %d %s", (unsigned long long)id,
                      r->results[0]->status, r->results[0]->message);
        netbroker__server_message__free_unpacked(m, NULL);
}

/* Root's persistent tap `name`, up in root's bridge nbroot0. */
static void undo_roots_tap(const struct tu_helper *h, const char *name)
{
        nb_link_change c = NB_LINK_CHANGE_INIT;
        nb_tap_opts o = NB_TAP_OPTS_INIT;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_conn *root;

        ck_assert_int_eq(nb_connect(h->sock, &root), 0);
        o.persist = true;
        nb_batch_tap_create(b, name, &o);
        c.master = "nbroot0";
        c.up = 1;
        nb_batch_link_set(b, name, &c);
        ck_assert_int_eq(nb_submit(root, b, &res), 0);
        tu_assert_status(res, 0, 0, NULL);
        tu_assert_status(res, 1, 0, NULL);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(root);
}

/* The review's sequence (HIGH 1). Connection C holds the uid's fd share
 * unread, so that A's [victim op, TapCreate victim2] runs its first op
 * and waits before the second; meanwhile B deletes what the first op
 * made or changed, root makes a tap of that name in its bridge nbroot0,
 * and B makes a bridge named as A's tap will be, so the tap fails once C
 * goes and the first op is undone. `first` is A's first op; what A's
 * first op said is returned (caller frees). */
static char *undo_race(const struct tu_helper *h, const char *victim, Netbroker__Op **first,
                       size_t n, const char *second, bool deleted,
                       void (*roots)(const struct tu_helper *h, const char *name))
{
        int a = connect_as(h->sock, NOBODY), b = connect_as(h->sock, NOBODY),
            c = connect_as(h->sock, NOBODY);
        Netbroker__Op *ops[8];
        Netbroker__ServerMessage *m;
        Netbroker__Reply *r;
        char *said = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&said, &len);

        ck_assert(n < 8 && f);
        memcpy(ops, first, n * sizeof(*ops));
        ops[n] = undo_op_tap(second, 1);
        undo_send(c, 1, (Netbroker__Op *[]){undo_op_tap("nbuq%d", UID_QUEUES)}, 1);
        ck_assert_msg(frame_within(c, ARRIVES_MS), "C's fds never came");
        undo_send(a, 1, ops, n + 1);
        /* A's first ops run; its tap waits for fd room (no reply yet). */
        ck_assert_msg(!frame_within(a, 500), "A's request did not wait for fd room");
        if (deleted)
                undo_one(b, 1, undo_op_delete(victim));
        roots(h, victim);
        undo_one(b, 2, undo_op_bridge(second));
        close(c); /* fd room: A's tap runs, fails (EEXIST), A is undone */
        r = undo_reply(a, 1, &m);
        ck_assert_uint_eq(r->n_results, n + 1);
        for (size_t i = 0; i <= n; i++)
                printf("hostile: uid 65534's undo, %s taken by root meanwhile: op "
                       "%zu: %d %s\n",
                       victim, i, r->results[i]->status, r->results[i]->message);
        fflush(stdout);
        ck_assert_int_eq(r->results[n]->status, EEXIST); /* errno values on the wire */
        for (size_t i = 0; i < n; i++) {
                ck_assert_int_eq(r->results[i]->status, ECANCELED);
                fprintf(f, "%s\n", r->results[i]->message);
        }
        ck_assert_int_eq(fclose(f), 0);
        netbroker__server_message__free_unpacked(m, NULL);
        close(a);
        close(b);
        return said;
}

/* What the first n ops said, one a line: that each undo was skipped, and
 * why. */
static void undo_assert_skipped(char *said, size_t n, const char *victim)
{
        char want[64];
        const char *p = said;

        snprintf(want, sizeof(want), "undo skipped: op %zu failed", n);
        for (size_t i = 0; i < n; i++) {
                const char *eol = strchr(p, '\n');
                ck_assert_ptr_nonnull(eol);
                const char *took = strstr(p, "took its name");
                ck_assert_msg(strncmp(p, want, strlen(want)) == 0 && strstr(p, victim) && took &&
                                      took < eol,
                              "op %zu says: %.*s", i, (int)(eol - p), p);
                p = eol + 1;
        }
        free(said);
}

/* Root's tap survives a uid's undo: A's first op made bridge nbu5, B
 * deleted it, root's tap nbu5 took the name. Before: the undo deleted
 * root's tap ("op 0: -125 undone: op 1 failed"). */
START_TEST(test_user_undo_does_not_delete_roots_interface_of_the_same_name)
{
        struct tu_helper h;

        tu_private_netns(); /* what it leaves dies with it */
        free(tu_sh("ip link add nbroot0 type bridge && ip link set nbroot0 up"));
        tu_helper_start(&h, TU_ALLOW UNDO_POLICY);
        char *said = undo_race(&h, "nbu5", (Netbroker__Op *[]){undo_op_bridge("nbu5")}, 1, "nbu6",
                               true, undo_roots_tap);
        ck_assert_msg(tu_link_exists("nbu5"), "root's tap nbu5 was deleted");
        ck_assert_str_eq(tu_link_get("nbu5", "master"), "nbroot0");
        ck_assert_str_eq(tu_link_get("nbu5", "ifalias"), "netbroker:uid=0");
        undo_assert_skipped(said, 1, "nbu5");
        th_assert_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

/* The uid's persistent tap nbu7 in its bridge nbuB. */
static void undo_users_tap_in_its_bridge(const struct tu_helper *h)
{
        int u = connect_as(h->sock, NOBODY);
        Netbroker__Op *ops[2] = {undo_op_tap("nbu7", 0), undo_op_nomaster("nbu7")};
        Netbroker__ServerMessage *m;
        Netbroker__Reply *r;

        undo_one(u, 1, undo_op_bridge("nbuB"));
        ops[0]->tap_create->persist = true; /* as its own (the policy's terms) */
        ops[0]->tap_create->set_owner = true;
        ops[0]->tap_create->owner_uid = NOBODY;
        ops[0]->tap_create->owner_gid = NOBODY;
        ops[1]->link_set->nomaster = false;
        ops[1]->link_set->master = (char *)"nbuB";
        undo_send(u, 2, ops, 2);
        r = undo_reply(u, 2, &m);
        ck_assert_msg(r->results[0]->status == 0, "%s", r->results[0]->message);
        ck_assert_msg(r->results[1]->status == 0, "%s", r->results[1]->message);
        netbroker__server_message__free_unpacked(m, NULL);
        close(u);
        ck_assert_str_eq(tu_link_get("nbu7", "master"), "nbuB");
}

/* The move variant: A's first op took the uid's tap nbu7 out of its
 * bridge nbuB, B deleted nbu7, root's tap nbu7 in nbroot0 took the name.
 * Before: the undo put root's nbu7 into the uid's bridge nbuB. */
START_TEST(test_user_undo_does_not_move_roots_interface_of_the_same_name)
{
        struct tu_helper h;
        char *said;

        tu_private_netns(); /* what it leaves dies with it */
        free(tu_sh("ip link add nbroot0 type bridge && ip link set nbroot0 up"));
        tu_helper_start(&h, TU_ALLOW UNDO_POLICY);
        undo_users_tap_in_its_bridge(&h);
        said = undo_race(&h, "nbu7", (Netbroker__Op *[]){undo_op_nomaster("nbu7")}, 1, "nbu8", true,
                         undo_roots_tap);
        ck_assert_msg(tu_link_exists("nbu7"), "root's tap nbu7 was deleted");
        ck_assert_str_eq(tu_link_get("nbu7", "master"), "nbroot0");
        ck_assert_str_eq(tu_link_get("nbu7", "ifalias"), "netbroker:uid=0");
        undo_assert_skipped(said, 1, "nbu7");
        th_assert_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

/* Root takes the uid's nbu7 over (its alias, then its bridge nbroot0). */
static void undo_root_adopts(const struct tu_helper *h, const char *name)
{
        (void)h;
        free(tu_sh("ip link set %s alias netbroker:uid=0 && ip link set %s master nbroot0", name,
                   name));
}

/* Not deleted but no longer the caller's: root took the uid's tap nbu7
 * (its owner mark, into nbroot0) while A's [LinkSet nbu7 nomaster, tap]
 * waited. Before the owner check at undo, the undo put root's nbu7 back
 * into the uid's bridge nbuB. */
START_TEST(test_user_undo_does_not_move_an_interface_no_longer_its_own)
{
        struct tu_helper h;
        char *said;

        tu_private_netns(); /* what it leaves dies with it */
        free(tu_sh("ip link add nbroot0 type bridge && ip link set nbroot0 up"));
        tu_helper_start(&h, TU_ALLOW UNDO_POLICY);
        undo_users_tap_in_its_bridge(&h);
        said = undo_race(&h, "nbu7", (Netbroker__Op *[]){undo_op_nomaster("nbu7")}, 1, "nbu8",
                         false, undo_root_adopts);
        ck_assert_str_eq(tu_link_get("nbu7", "master"), "nbroot0");
        ck_assert_msg(strstr(said, "undo skipped: op 1 failed; uid 65534 no longer owns "
                                   "interface nbu7"),
                      "op 0 says: %s", said);
        free(said);
        th_assert_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

/* Root's bridge nbu5, made by hand with settings of its own: IPv6 off, a
 * forward delay of 10 s, and (through the helper) an inbound limit. */
static void undo_roots_bridge(const struct tu_helper *h, const char *name)
{
        nb_rate in = NB_RATE_INIT;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_conn *root;

        free(tu_sh("ip link add %s type bridge forward_delay 1000 && "
                   "sysctl -qw net.ipv6.conf.%s.disable_ipv6=1",
                   name, name));
        ck_assert_int_eq(nb_connect(h->sock, &root), 0);
        in.average = 1000;
        nb_batch_bandwidth_set(b, name, &in, NULL);
        ck_assert_int_eq(nb_submit(root, b, &res), 0);
        tu_assert_status(res, 0, 0, NULL);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(root);
}

/* The same race for what puts settings back: A's [SysctlSet, BridgeOptSet,
 * BandwidthSet, AddrDelete] on its bridge nbu5 then a tap that fails; B
 * deletes nbu5 and root's own bridge takes the name. Before: the undos
 * wrote the uid's old values on root's bridge (IPv6 on, forward delay
 * 15 s, root's limit removed, the address root had given the uid's
 * bridge added to root's). */
START_TEST(test_user_undo_does_not_reset_roots_interface_of_the_same_name)
{
        Netbroker__Op *ops[4];
        Netbroker__AddrDelete ad = NETBROKER__ADDR_DELETE__INIT;
        Netbroker__SysctlSet sy = NETBROKER__SYSCTL_SET__INIT;
        Netbroker__BridgeOptSet bo = NETBROKER__BRIDGE_OPT_SET__INIT;
        Netbroker__BandwidthSet bw = NETBROKER__BANDWIDTH_SET__INIT;
        Netbroker__Rate rate = NETBROKER__RATE__INIT;
        struct tu_helper h;
        char *said, *qdiscs, *ipv6, *addrs;
        int u;

        tu_private_netns(); /* what it leaves dies with it */
        tu_helper_start(&h, TU_ALLOW UNDO_SETTINGS_POLICY);
        u = connect_as(h.sock, NOBODY);
        undo_one(u, 1, undo_op_bridge("nbu5"));
        close(u);
        free(tu_sh("ip addr add 10.77.0.1/24 dev nbu5")); /* root gave the uid's bridge one */
        sy.ifname = bo.ifname = bw.ifname = ad.ifname = (char *)"nbu5";
        ad.address = (char *)"10.77.0.1";
        ad.prefix_len = 24;
        sy.name = (char *)"ipv6.disable_ipv6";
        sy.value = 1;
        bo.has_forward_delay = true;
        bo.forward_delay_cs = 400;
        rate.average = 2000;
        bw.inbound = &rate;
        for (int i = 0; i < 4; i++) {
                ops[i] = calloc(1, sizeof(*ops[i]));
                ck_assert_ptr_nonnull(ops[i]);
                netbroker__op__init(ops[i]);
        }
        /* undo_send frees each op and its one member: copies. */
        ops[0]->op_case = NETBROKER__OP__OP_SYSCTL_SET;
        ops[0]->sysctl_set = malloc(sizeof(sy));
        ops[1]->op_case = NETBROKER__OP__OP_BRIDGE_OPT_SET;
        ops[1]->bridge_opt_set = malloc(sizeof(bo));
        ops[2]->op_case = NETBROKER__OP__OP_BANDWIDTH_SET;
        ops[2]->bandwidth_set = malloc(sizeof(bw));
        ops[3]->op_case = NETBROKER__OP__OP_ADDR_DELETE;
        ops[3]->addr_delete = malloc(sizeof(ad));
        ck_assert(ops[0]->sysctl_set && ops[1]->bridge_opt_set && ops[2]->bandwidth_set &&
                  ops[3]->addr_delete);
        *ops[3]->addr_delete = ad;
        *ops[0]->sysctl_set = sy;
        *ops[1]->bridge_opt_set = bo;
        *ops[2]->bandwidth_set = bw;
        said = undo_race(&h, "nbu5", ops, 4, "nbu6", true, undo_roots_bridge);
        ipv6 = tu_sh("cat /proc/sys/net/ipv6/conf/nbu5/disable_ipv6");
        ck_assert_str_eq(ipv6, "1\n");
        free(ipv6);
        ck_assert_str_eq(tu_link_get("nbu5", "linkinfo.info_data.forward_delay"), "1000");
        qdiscs = tu_sh("tc qdisc show dev nbu5");
        ck_assert_msg(strstr(qdiscs, "htb 4e42:"), "root's limit on nbu5 is gone: %s", qdiscs);
        free(qdiscs);
        addrs = tu_sh("ip -4 addr show dev nbu5");
        ck_assert_msg(!strstr(addrs, "10.77.0.1"), "the uid's address is on root's nbu5: %s",
                      addrs);
        free(addrs);
        undo_assert_skipped(said, 4, "nbu5");
        th_assert_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

Suite *hostile_user_suite(void)
{
        Suite *s = suite_create("hostile-user");
        TCase *tc = tcase_create("user");

        tcase_set_timeout(tc, 180);
        tcase_add_test(tc, test_user_closing_at_every_step_never_crashes_the_helper);
        tcase_add_test(tc, test_user_that_never_takes_its_fds_delays_no_one);
        tcase_add_test(tc, test_user_half_sent_frames_hold_no_more_fds_than_its_share);
        tcase_add_test(tc, test_user_piling_up_unread_execs_stays_within_the_budget);
        tcase_add_test(tc, test_user_holding_its_spawn_share_leaves_roots_slot);
        tcase_add_test(tc, test_user_request_over_its_rule_cap_is_refused_and_changes_nothing);
        tcase_add_test(tc, test_user_largest_firewall_request_lets_roots_pings_through);
        tcase_add_test(tc, test_user_changes_are_audited_with_its_uid);
        tcase_add_test(tc, test_user_refusals_are_audited_at_a_bounded_rate);
        tcase_add_test(tc, test_user_rules_do_not_outlive_its_interface);
        tcase_add_test(tc, test_user_cannot_exceed_max_devices_with_requests_that_run_later);
        tcase_add_test(tc, test_user_request_waiting_on_its_fds_does_not_hold_roots_firewall);
        tcase_add_test(tc, test_user_networks_are_one_per_bridge_it_owns);
        tcase_add_test(tc, test_user_network_does_not_outlive_its_bridge);
        suite_add_tcase(s, tc);
        /* Owners on a name whose interface is gone: CK_RUN_CASE=gone. */
        tc = tcase_create("gone");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_user_firewall_on_a_name_its_batch_deleted_is_refused);
        tcase_add_test(tc, test_user_network_on_a_bridge_its_batch_deleted_is_refused);
#ifdef NB_TEST_HOOKS
        tcase_add_test(tc, test_interface_gone_before_the_commit_gets_no_owner);
        tcase_add_test(tc, test_bridge_gone_before_the_commit_gets_no_network);
#endif
        suite_add_tcase(s, tc);
        /* The tap and macvtap fds of uids other than root (server.c's
         * reservations): CK_RUN_CASE=fds runs them alone. */
        tc = tcase_create("fds");
        tcase_set_timeout(tc, 180);
        tcase_add_test(tc, test_user_holding_tap_queues_on_every_connection_leaves_root_room);
        tcase_add_test(tc, test_user_tap_waiting_for_its_fds_runs_once_they_are_taken_or_gone);
        tcase_add_test(tc, test_user_tap_with_more_queues_than_its_eighth_of_fds_is_refused);
        tcase_add_test(tc, test_user_closed_with_its_fds_unread_still_holds_them);
        tcase_add_test(tc, test_user_draining_connection_goes_once_its_client_reads);
        tcase_add_test(tc, test_user_closed_after_taking_its_fds_holds_nothing);
        tcase_add_test(tc, test_helper_stops_while_a_connection_drains);
        tcase_add_test(tc, test_user_many_waiting_taps_cost_one_look_a_poll);
        tcase_add_test(tc, test_user_small_tap_does_not_pass_a_waiting_large_one);
        tcase_add_test(tc, test_user_stream_of_waiters_does_not_postpone_the_poll);
        tcase_add_test(tc, test_user_tap_left_unrun_by_a_full_reply_waits_for_no_fds);
        tcase_add_test(tc, test_user_churn_of_waiters_leaks_no_reservation);
#ifdef NB_TEST_HOOKS
        tcase_add_test(tc, test_user_tap_given_its_fds_waits_first_for_its_lane);
#endif
        suite_add_tcase(s, tc);
        /* Undo after a race with the caller's own deletion (the review's
         * HIGH 1): CK_RUN_CASE=undo runs them alone. */
        tc = tcase_create("undo");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_user_undo_does_not_delete_roots_interface_of_the_same_name);
        tcase_add_test(tc, test_user_undo_does_not_move_roots_interface_of_the_same_name);
        tcase_add_test(tc, test_user_undo_does_not_reset_roots_interface_of_the_same_name);
        tcase_add_test(tc, test_user_undo_does_not_move_an_interface_no_longer_its_own);
        suite_add_tcase(s, tc);
        return s;
}
