// SPDX-License-Identifier: LGPL-2.1-or-later
/* Descriptors whose last close a client makes wait (helper/closer.h): a
 * TCP socket with SO_LINGER on and unsent data waits in close() for the
 * linger time. Passed to the helper by a uid it refuses (the fd is still
 * in the connection's queue when the helper closes it) or attached to a
 * Ping by an admitted one, it froze the event loop for the whole linger:
 * root's Pings waited 5 s. Each test requires root's worst Ping to stay
 * far below the linger, and the helper's fds to come back to idle once
 * the linger is over. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "hostile.h"
#include "testutil.h"
#include "tests.h"

#define LINGER_S 5
/* A freeze is the whole linger; a loop that stays a dispatcher answers in
 * milliseconds. The bound only tells the two apart on a loaded machine. */
#define WORST_PING_MAX_US (LINGER_S * 1000000ull / 3)
/* The uid that holds its share: frames of lingering sockets it sends. */
#define MANY_FRAMES 6
#define FDS_A_FRAME 4
/* One message with more fds than a read takes (64, NBP_FRAME_MAX_FDS):
 * the last one, the lingering socket, is the surplus. */
#define SURPLUS_FDS (NBP_FRAME_MAX_FDS + 1)

/* A TCP socket on loopback whose close waits LINGER_S seconds: its peer
 * (4 KiB receive buffer) never reads, so its send queue stays full.
 * Returns the socket; *ret_keep is the listener and the peer, to keep open
 * so nothing is ever acked. */
static int lingering_tcp_socket(int ret_keep[2])
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof(a);
        struct linger lg = {.l_onoff = 1, .l_linger = LINGER_S};
        int small = 4096, l, s, p;
        char junk[65536];

        memset(junk, 'x', sizeof(junk));
        l = socket(AF_INET, SOCK_STREAM, 0);
        if (l < 0 || setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
            bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
            getsockname(l, (struct sockaddr *)&a, &alen) < 0)
                return -1;
        s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            (p = accept(l, NULL, NULL)) < 0)
                return -1;
        while (send(s, junk, sizeof(junk), MSG_DONTWAIT) > 0)
                ;
        if (setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
                return -1;
        ret_keep[0] = l;
        ret_keep[1] = p;
        return s;
}

/* One byte with fds[n] as SCM_RIGHTS, as the reviewer sent it: 0, or
 * -errno. */
static int send_fds_byte(int sock, const int *fds, size_t n, char byte)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * SURPLUS_FDS)];
                struct cmsghdr align;
        } ctrl;
        char b = byte;
        struct iovec iov = {.iov_base = &b, .iov_len = 1};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = ctrl.buf,
                           .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);

        if (n > SURPLUS_FDS)
                return -E2BIG;
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        return sendmsg(sock, &m, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* A Ping request with fds[n]: its first byte carries them, and the rest
 * goes only after the sender dropped its own copies (each set to -1). The
 * helper cannot let go of fds of a frame it has not read to its end, so
 * the helper's copy is always the last: its close is the one that waits
 * the linger. (Dropped after the helper's instead, the sender's own close
 * would wait the linger, in the attacker: 5 s per socket.) 0 or -errno. */
static int send_ping_with_fds(int sock, uint64_t id, int *fds, size_t n, int ready)
{
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Ping ping = NETBROKER__PING__INIT;
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        uint8_t buf[256];
        size_t len;
        int r;

        op.op_case = NETBROKER__OP__OP_PING;
        op.ping = &ping;
        req.id = id;
        req.ops = ops;
        req.n_ops = 1;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        len = protobuf_c_message_get_packed_size(&m.base);
        if (len + 4 > sizeof(buf))
                return -E2BIG;
        buf[0] = (uint8_t)(len >> 24);
        buf[1] = (uint8_t)(len >> 16);
        buf[2] = (uint8_t)(len >> 8);
        buf[3] = (uint8_t)len;
        protobuf_c_message_pack(&m.base, buf + 4);
        if ((r = send_fds_byte(sock, fds, n, (char)buf[0])) < 0)
                return r;
        /* ready >= 0: say the fds went now, for the drop below may wait
         * (see the test of one message over the share). */
        if (ready >= 0 && write(ready, "\1", 1) != 1)
                return -EIO;
        for (size_t i = 0; i < n; i++) {
                close(fds[i]);
                fds[i] = -1;
        }
        return send(sock, buf + 1, len + 3, MSG_NOSIGNAL) == (ssize_t)(len + 3) ? 0 : -EIO;
}

enum how { REFUSED_PEER, ON_A_PING, SURPLUS_ON_A_PING };

/* Request 2: Exec /bin/sleep 1, with a copy of fd. */
static void hold_connection_a_second(int conn, int fd)
{
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Exec e = NETBROKER__EXEC__INIT;
        char *argv[] = {(char *)"/bin/sleep", (char *)"1"};

        e.path = argv[0];
        e.argv = argv;
        e.n_argv = 2;
        op.op_case = NETBROKER__OP__OP_EXEC;
        op.exec = &e;
        th_send_request(conn, 2, ops, 1, &fd, 1);
}

/* A Ping whose first byte brings 64 fds of /dev/null and then tcp (the
 * surplus), all the sender's copies dropped: the helper must refuse the
 * message before it reads it (ETOOMANYREFS), for a read would have the
 * kernel release the surplus, tcp's linger, in recvmsg() on the loop.
 * Takes tcp. 0, or -errno: the helper's answer was not that refusal. */
static int surplus_on_a_ping(int conn, int tcp)
{
        int fds[SURPLUS_FDS], r = 0;
        Netbroker__ServerMessage *m;

        for (int i = 0; i < SURPLUS_FDS - 1; i++)
                if ((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
                        return -errno;
        fds[SURPLUS_FDS - 1] = tcp;
        tu_raw_hello(conn);
        /* An Exec that came with an fd: its connection is not read until
         * it ends (server.c, fds_held), so the helper reads the message
         * below only after this process dropped its copies, whatever the
         * two processes' timing: the helper's release is the last. */
        hold_connection_a_second(conn, fds[0]);
        /* The rest of the frame may meet a closed connection: the helper
         * needs only the first byte to refuse it. */
        (void)send_ping_with_fds(conn, 1, fds, SURPLUS_FDS, -1);
        m = tu_raw_recv(conn, NULL);
        if (m && m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_REPLY && m->reply->id == 2) {
                netbroker__server_message__free_unpacked(m, NULL);
                m = tu_raw_recv(conn, NULL);
        }
        if (!m || m->msg_case != NETBROKER__SERVER_MESSAGE__MSG_ERROR ||
            m->error->status != ETOOMANYREFS) {
                fprintf(stderr, "attack: the helper answered %s %d\n",
                        m ? m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_ERROR ? "an Error"
                                                                                : "no Error"
                          : "nothing",
                        m && m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_ERROR ? m->error->status
                                                                                 : 0);
                r = -EPROTO;
        }
        if (m)
                netbroker__server_message__free_unpacked(m, NULL);
        return r;
}

/* The attacker, as uid: hands the helper its lingering socket, drops its
 * own copy (the helper's is then the last), says so on ready (1 if the
 * helper took it, or refused a surplus with ETOOMANYREFS; 2 if the kernel
 * refused it for the helper: EPERM, SO_PASSRIGHTS; 3 if the helper read a
 * surplus message), and holds the TCP peer open until hold closes. */
static int attack(const char *sock, uid_t uid, enum how how, int ready, int hold)
{
        int keep[2], tcp, conn, r = -EPIPE;
        bool refused = false;
        char word, c;

        if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0)
                return 100;
        if ((tcp = lingering_tcp_socket(keep)) < 0)
                return 101;
        /* A refused peer may be closed before its byte goes (EPIPE,
         * ECONNRESET...): again. */
        for (int i = 0; i < 200 && r < 0 && r != -EPERM; i++) {
                conn = tu_raw_connect(sock);
                if (how == SURPLUS_ON_A_PING) {
                        refused = surplus_on_a_ping(conn, tcp) == 0;
                        tcp = -1;
                        close(conn);
                        r = 0;
                } else if (how == ON_A_PING) {
                        tu_raw_hello(conn);
                        r = send_ping_with_fds(conn, 1, &tcp, 1, -1);
                        if (r == 0) {
                                Netbroker__ServerMessage *rep = tu_raw_recv(conn, NULL);
                                if (!rep || rep->msg_case != NETBROKER__SERVER_MESSAGE__MSG_REPLY)
                                        return 102;
                                netbroker__server_message__free_unpacked(rep, NULL);
                        }
                        /* Its connection is not what the helper's fd
                         * count waits for. */
                        close(conn);
                } else {
                        r = send_fds_byte(conn, &tcp, 1, 0);
                        if (r < 0 && r != -EPERM) {
                                close(conn);
                                usleep(5000); /* a loaded helper: 1 s in all */
                        }
                }
        }
        if (r < 0 && r != -EPERM) {
                fprintf(stderr, "attack: sending the fd: %s\n", strerror(-r));
                return 103;
        }
        if (tcp >= 0)
                close(tcp);
        word = r != 0 ? 2 : how == SURPLUS_ON_A_PING && !refused ? 3 : 1;
        if (write(ready, &word, 1) != 1)
                return 104;
        while (read(hold, &c, 1) > 0)
                ;
        return 0;
}

/* Root's worst Ping over ms milliseconds on conn, a connection made
 * before the attack (a new one would wait in its Hello, not timed). */
static uint64_t worst_ping_us(int conn, unsigned ms)
{
        uint64_t end = tu_now_us() + ms * 1000ull, worst = 0;

        for (uint64_t id = 1; tu_now_us() < end; id++) {
                uint64_t t = th_ping_us(conn, id);
                worst = t > worst ? t : worst;
                usleep(5000);
        }
        return worst;
}

/* A helper on conf in a namespace of the test's (loopback up: the
 * lingering sockets' TCP is there), its socket open to every uid. */
static void start_attacked_helper(struct tu_helper *h, const char *conf)
{
        tu_private_netns();
        free(tu_sh("ip link set lo up"));
        tu_helper_start(h, conf);
        ck_assert_int_eq(chmod(h->sock, 0666), 0);
}

/* The pipes an attacker says ready on and is held by, and the fork: 0 in
 * the child, whose ends are ready[1] and hold[0]; else the child's pid,
 * the parent's ends ready[0] and hold[1]. */
static pid_t fork_attacker(int ready[2], int hold[2])
{
        pid_t pid;

        ck_assert_int_eq(pipe(ready), 0);
        ck_assert_int_eq(pipe(hold), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        close(pid == 0 ? ready[0] : ready[1]);
        close(pid == 0 ? hold[1] : hold[0]);
        return pid;
}

/* The attack as uid, root's Pings measured meanwhile: 1 if the helper took
 * the fd, 2 if the kernel refused it for the helper. */
static char attack_and_measure(const char *conf, uid_t uid, enum how how, const char *what)
{
        struct tu_helper h;
        int ready[2], hold[2], fds, status, root;
        char word = 0;
        long rss;
        pid_t pid;

        start_attacked_helper(&h, conf);
        fds = tu_fd_count(h.pid);
        rss = th_rss_kib(h.pid);
        root = tu_raw_connect(h.sock);
        tu_raw_hello(root);
        pid = fork_attacker(ready, hold);
        if (pid == 0) {
                close(root);
                _exit(attack(h.sock, uid, how, ready[1], hold[0]));
        }
        /* From the fork on: the attack's close comes within this window. */
        uint64_t worst = worst_ping_us(root, 3000);
        close(root);
        if (read(ready[0], &word, 1) != 1) {
                ck_assert_int_eq(waitpid(pid, &status, 0), pid);
                ck_abort_msg("the attack could not be made (status %d)", status);
        }
        printf("hostile: %s: %s\n", what,
               word == 1   ? "the helper took the fd"
               : word == 3 ? "the helper read a message with more fds than a read takes"
                           : "the kernel refused the fd for the helper (SO_PASSRIGHTS)");
        th_report(what, &h, fds, rss, th_rss_kib(h.pid), worst);
        ck_assert_msg(worst < WORST_PING_MAX_US,
                      "root's worst Ping took %.1f ms while a %d s linger was closed",
                      worst / 1000.0, LINGER_S);
        /* The linger ends (its peer stays unread until then). */
        tu_assert_fd_count_settles(h.pid, fds, (LINGER_S + 5) * 1000);
        close(hold[1]);
        close(ready[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "attacker status %d", status);
        th_assert_serves(&h);
        tu_helper_stop(&h);
        return word;
}

START_TEST(test_a_refused_peers_lingering_socket_does_not_freeze_the_loop)
{
        attack_and_measure(TU_ALLOW, 12345, REFUSED_PEER,
                           "lingering TCP socket sent by a refused uid");
}
END_TEST

/* The same with SO_PASSRIGHTS not used (Debian 12's kernel has none): the
 * fd reaches the helper's connection socket, which the closer closes. */
START_TEST(test_a_refused_peers_lingering_socket_without_passrights)
{
        setenv("NETBROKERD_TEST_NO_PASSRIGHTS", "1", 1);
        attack_and_measure(TU_ALLOW, 12345, REFUSED_PEER,
                           "lingering TCP socket sent by a refused uid, no SO_PASSRIGHTS");
        unsetenv("NETBROKERD_TEST_NO_PASSRIGHTS");
}
END_TEST

/* An admitted uid's connection takes fds (a veth peer's namespace): the
 * helper sends what is no namespace to the closer. */
START_TEST(test_an_admitted_uids_lingering_socket_on_a_ping_does_not_freeze_the_loop)
{
        char word = attack_and_measure(
                TU_ALLOW
                "[policy uid 65534]\nops = veth_create\nname_prefixes = nbv\nnetns = own\n",
                65534, ON_A_PING, "lingering TCP socket on a Ping of an admitted uid");

        /* netns = own: an op may take an fd from it, on any kernel. */
        ck_assert_int_eq(word, 1);
}
END_TEST

/* More fds in one message than a read takes, the surplus a lingering
 * socket: the kernel itself released the surplus inside the loop's
 * recvmsg() (MSG_CTRUNC) and froze it for the linger. The helper peeks
 * first (proto/frame.h, peek_fds) and refuses the message unread. */
START_TEST(test_an_admitted_uids_surplus_of_fds_does_not_freeze_the_loop)
{
        char word = attack_and_measure(
                TU_ALLOW "[policy uid 65534]\nops = tap_create exec\nname_prefixes = nbv\nexec = "
                         "/bin/sleep\n",
                65534, SURPLUS_ON_A_PING, "65 fds in one message, the last a lingering TCP socket");

        if (word == 2) {
                printf("hostile: this kernel refuses the fds of a uid without netns = own\n");
                return;
        }
        ck_assert_msg(word == 1, "the helper did not refuse the message with ETOOMANYREFS");
}
END_TEST

/* ---- what a lingering uid can hold ---- */

#define BIG_MESSAGE 30
#define MOST_LINGERING 32 /* of both attacks below */

/* As uid 65534: `frames` Pings of `each` lingering sockets, its copies
 * dropped; held until hold closes (its TCP peers with it: then every
 * linger ends at once). ready_early: ready is said once the first frame's
 * fds went, before its copies are dropped: a helper that refuses the
 * frame on its first byte may have let go of its own copies already, and
 * then the attacker's drop waits out the lingers (the test kills it). */
static int attack_lingering_frames(const char *sock, int frames, int each, bool ready_early,
                                   int ready, int hold)
{
        int keep[MOST_LINGERING][2], tcp[MOST_LINGERING], conn;
        char word = 1, c;

        if (frames * each > MOST_LINGERING)
                return 99;
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                return 100;
        conn = tu_raw_connect(sock);
        tu_raw_hello(conn);
        for (int f = 0; f < frames; f++) {
                for (int i = 0; i < each; i++)
                        if ((tcp[i] = lingering_tcp_socket(keep[f * each + i])) < 0)
                                return 101;
                /* -EIO: the rest of the frame met a connection the helper
                 * closed after its first byte (a message over the share is
                 * refused then): the fds went. */
                int r = send_ping_with_fds(conn, (uint64_t)f + 1, tcp, (size_t)each,
                                           ready_early ? ready : -1);
                if (r < 0 && r != -EIO)
                        return 102;
        }
        if (!ready_early && write(ready, &word, 1) != 1)
                return 104;
        while (read(hold, &c, 1) > 0)
                ;
        return 0;
}

/* The closer holds what a lingering uid sent, and the uid's share of
 * fd_limit (an eighth: 8 of 64) bounds it: its connection is not read
 * while the closer holds its share, so the helper's fds stay within idle
 * + the share + one frame, root is served, and all comes back to idle
 * once the lingers end. */
START_TEST(test_a_lingering_uid_holds_no_more_than_its_share_of_fds)
{
        struct tu_helper h;
        int ready[2], hold[2], fds, most = 0, status, root;
        char word;
        pid_t pid;

        start_attacked_helper(&h, TU_ALLOW "max_fds_per_frame = 4\n[policy uid 65534]\nops = "
                                           "tap_create\nname_prefixes = nbv\n");
        fds = tu_fd_count(h.pid);
        root = tu_raw_connect(h.sock);
        tu_raw_hello(root);
        pid = fork_attacker(ready, hold);
        if (pid == 0) {
                close(root);
                _exit(attack_lingering_frames(h.sock, MANY_FRAMES, FDS_A_FRAME, false, ready[1],
                                              hold[0]));
        }
        ck_assert_msg(read(ready[0], &word, 1) == 1, "the attack could not be made");
        uint64_t end = tu_now_us() + 2000000, worst = 0;
        for (uint64_t id = 1; tu_now_us() < end; id++) {
                uint64_t t = th_ping_us(root, id);
                int n = tu_fd_count(h.pid);
                worst = t > worst ? t : worst;
                most = n > most ? n : most;
                usleep(20000);
        }
        printf("hostile: %d lingering sockets from one uid: helper fds %d -> at most %d "
               "(fd_limit 64: its share 8), worst Ping of root %.1f ms\n",
               MANY_FRAMES * FDS_A_FRAME, fds, most, worst / 1000.0);
        fflush(stdout);
        /* idle + the root connection + the uid's share + one frame over
         * it + the attacker's connection + the closer's eventfd. */
        ck_assert_int_le(most, fds + 1 + 8 + FDS_A_FRAME + 1 + 1);
        ck_assert_msg(worst < WORST_PING_MAX_US, "root's worst Ping took %.1f ms", worst / 1000.0);
        close(hold[1]);
        close(ready[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "attacker status %d", status);
        close(root);
        tu_assert_fd_count_settles(h.pid, fds, 20000);
        th_assert_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

/* ---- one message over the share; one uid's stuck close and another's ---- */

/* One message of 30 lingering sockets from a uid whose share is 8: the
 * peek's check was only against 64 fds a read and fd_limit, so the helper
 * took them all (fds 13 -> 45; with 48, 64, and root could not connect).
 * Now a message over what a frame takes, or over the uid's share of the
 * closer, is refused unread, its socket to the closer. */
START_TEST(test_one_message_over_a_uids_share_is_refused_unread)
{
        struct tu_helper h;
        int ready[2], hold[2], fds, most = 0, status, root;
        char word;
        pid_t pid;

        start_attacked_helper(&h, TU_ALLOW
                              "[policy uid 65534]\nops = tap_create\nname_prefixes = nbv\n");
        fds = tu_fd_count(h.pid);
        pid = fork_attacker(ready, hold);
        if (pid == 0) {
                _exit(attack_lingering_frames(h.sock, 1, BIG_MESSAGE, true, ready[1], hold[0]));
        }
        ck_assert_msg(read(ready[0], &word, 1) == 1, "the attack could not be made");
        for (int i = 0; i < 50; i++) {
                int n = tu_fd_count(h.pid);
                most = n > most ? n : most;
                usleep(20000);
        }
        /* Root connects and is answered while the lingers last. */
        root = tu_raw_connect(h.sock);
        tu_raw_hello(root);
        uint64_t t = th_ping_us(root, 1);
        printf("hostile: one message of %d lingering sockets from a uid whose share is 8: helper "
               "fds %d -> at most %d; a new root connection's Ping %.1f ms\n",
               BIG_MESSAGE, fds, most, t / 1000.0);
        fflush(stdout);
        /* idle + the attacker's connection + its socket in the closer +
         * the closer's eventfd, a few for the machine's timing. */
        ck_assert_int_le(most, fds + 8);
        close(root);
        /* It may be in a close that waits out a linger (ready_early): its
         * end closes the TCP peers, and every linger ends at once. */
        kill(pid, SIGKILL);
        close(hold[1]);
        close(ready[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
                      "attacker status %d", status);
        tu_assert_fd_count_settles(h.pid, fds, (LINGER_S + 5) * 1000);
        th_assert_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

#define VICTIM_ROUNDS 11

/* As uid 65533: VICTIM_ROUNDS times connect, Ping, hang up; each Ping
 * answered within 2 s, else exit 10 + the round. */
static int victim(const char *sock)
{
        if (setgroups(0, NULL) < 0 || setgid(65533) < 0 || setuid(65533) < 0)
                return 100;
        for (int i = 0; i < VICTIM_ROUNDS; i++) {
                Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
                Netbroker__Ping ping = NETBROKER__PING__INIT;
                int conn = tu_raw_connect(sock);
                struct pollfd p = {.fd = conn, .events = POLLIN};
                Netbroker__ServerMessage *m;

                tu_raw_hello(conn);
                op.op_case = NETBROKER__OP__OP_PING;
                op.ping = &ping;
                th_send_request(conn, 1, ops, 1, NULL, 0);
                if (poll(&p, 1, 2000) != 1 || !(m = tu_raw_recv(conn, NULL)))
                        return 10 + i;
                netbroker__server_message__free_unpacked(m, NULL);
                close(conn);
        }
        return 0;
}

/* One closer thread closed every uid's descriptors in turn: uid 65534's
 * lingering socket held it, and behind it uid 65533's ordinary hang-ups
 * (its connection sockets) filled 65533's share: from its ninth
 * connection on, its Pings were not read. Now a connection whose queue
 * holds no fds is closed in place, and each uid's closes have a thread of
 * their own. */
START_TEST(test_one_uids_stuck_close_does_not_hold_another_uids_hang_ups)
{
        struct tu_helper h;
        int ready[2], hold[2], status;
        char word = 0;
        pid_t pid, v;

        start_attacked_helper(&h, TU_ALLOW
                              "[policy uid 65534]\nops = tap_create\nname_prefixes = nbv\n"
                              "[policy uid 65533]\nops = tap_create\nname_prefixes = nbw\n");
        pid = fork_attacker(ready, hold);
        if (pid == 0) {
                _exit(attack(h.sock, 65534, ON_A_PING, ready[1], hold[0]));
        }
        ck_assert_msg(read(ready[0], &word, 1) == 1 && word == 1, "the attack could not be made");
        v = fork();
        ck_assert_int_ge(v, 0);
        if (v == 0)
                _exit(victim(h.sock));
        ck_assert_int_eq(waitpid(v, &status, 0), v);
        printf("hostile: uid 65533's %d connections beside uid 65534's lingering close: %s\n",
               VICTIM_ROUNDS,
               WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "all answered" : "one not answered");
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "uid 65533's victim status %d (10 + n: round n's Ping got no answer in 2 s)",
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        close(hold[1]);
        close(ready[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        th_assert_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

void hostile_add_close_tests(Suite *s)
{
        TCase *tc = tcase_create("linger");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_a_refused_peers_lingering_socket_does_not_freeze_the_loop);
        tcase_add_test(tc, test_an_admitted_uids_surplus_of_fds_does_not_freeze_the_loop);
        tcase_add_test(tc, test_a_refused_peers_lingering_socket_without_passrights);
        tcase_add_test(tc,
                       test_an_admitted_uids_lingering_socket_on_a_ping_does_not_freeze_the_loop);
        tcase_add_test(tc, test_a_lingering_uid_holds_no_more_than_its_share_of_fds);
        tcase_add_test(tc, test_one_message_over_a_uids_share_is_refused_unread);
        tcase_add_test(tc, test_one_uids_stuck_close_does_not_hold_another_uids_hang_ups);
        suite_add_tcase(s, tc);
}
