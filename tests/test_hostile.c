/* Hostile clients: what a peer that closes mid-reply, never reads, floods or
 * lies can do to the helper, and to the other clients. Each test attacks a
 * running helper as a real process and then requires it to be alive, to
 * serve a well-behaved client, and to hold no more fds than before. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

/* A Ping on a new connection is answered. */
static void assert_serves(const struct tu_helper *h)
{
        int fd = tu_raw_connect(h->sock);
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Ping ping = NETBROKER__PING__INIT;
        Netbroker__ServerMessage *r;

        ck_assert_msg(tu_process_alive(h->pid), "the helper died");
        tu_raw_hello(fd);
        op.op_case = NETBROKER__OP__OP_PING;
        op.ping = &ping;
        req.id = 4242;
        req.ops = ops;
        req.n_ops = 1;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        ck_assert_int_eq(tu_raw_send_msg(fd, &m.base, NULL, 0), 0);
        r = tu_raw_recv(fd, NULL);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->msg_case, NETBROKER__SERVER_MESSAGE__MSG_REPLY);
        ck_assert_int_eq(r->reply->results[0]->status, 0);
        netbroker__server_message__free_unpacked(r, NULL);
        close(fd);
}

/* A request that returns fds: three taps from a template and two macvtaps
 * on parent, each op's fds sent in a frame of their own before the reply
 * (six frames in all). */
static void send_fd_request(int fd, const char *parent)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__Op op[5], *ops[5];
        Netbroker__TapCreate tap = NETBROKER__TAP_CREATE__INIT;
        Netbroker__MacvtapCreate mvt = NETBROKER__MACVTAP_CREATE__INIT;

        tap.name = (char *)"nbh%d";
        tap.vnet_hdr = true;
        mvt.name = (char *)"nbhm%d";
        mvt.parent = (char *)parent;
        mvt.mode = NETBROKER__MACVLAN_MODE__MACVLAN_MODE_BRIDGE;
        for (int i = 0; i < 5; i++) {
                netbroker__op__init(&op[i]);
                if (i < 3) {
                        op[i].op_case = NETBROKER__OP__OP_TAP_CREATE;
                        op[i].tap_create = &tap;
                } else {
                        op[i].op_case = NETBROKER__OP__OP_MACVTAP_CREATE;
                        op[i].macvtap_create = &mvt;
                }
                ops[i] = &op[i];
        }
        req.id = 9;
        req.ops = ops;
        req.n_ops = 5;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        ck_assert_int_eq(tu_raw_send_msg(fd, &m.base, NULL, 0), 0);
}

/* The helper has no macvtap left over from the attack (a tap goes with its
 * last fd; a macvtap stays until deleted). */
static void delete_macvtaps(void)
{
        free(tu_sh("for l in $(ip -o link show type macvtap | sed -n 's/^[0-9]*: "
                   "\\(nbhm[0-9]*\\)@.*/\\1/p'); "
                   "do ip link del \"$l\"; done"));
}

/* A client closes its socket at every step of a request whose ops return
 * fds: before the helper has read it, while fds are being sent, between the
 * fd frames and the reply, after the reply; fully (both directions) and
 * with a shutdown first. The helper used to finish the job twice when the
 * fds' send met EPIPE (a double free). */
START_TEST(test_close_at_every_step_of_a_fd_request_never_crashes)
{
        struct tu_helper h;
        int base;

        tu_veth("nbhp0", "nbhp1");
        tu_helper_start(&h, TU_ALLOW);
        base = tu_fd_count(h.pid);
        for (int mode = 0; mode < 3; mode++)
                for (int step = 0; step <= 6; step++) {
                        int fd = tu_raw_connect(h.sock);
                        tu_raw_hello(fd);
                        send_fd_request(fd, "nbhp0");
                        for (int i = 0; i < step; i++) {
                                Netbroker__ServerMessage *r = tu_raw_recv(fd, NULL);
                                ck_assert_msg(r, "mode %d step %d: no frame %d", mode, step, i);
                                netbroker__server_message__free_unpacked(r, NULL);
                        }
                        if (mode == 1)
                                shutdown(fd, SHUT_RDWR);
                        if (mode == 2)
                                shutdown(fd, SHUT_WR);
                        close(fd);
                        assert_serves(&h);
                        delete_macvtaps();
                }
        tu_assert_fd_count_settles(h.pid, base, 3000);
        assert_serves(&h);
        tu_helper_stop(&h);
}
END_TEST

Suite *hostile_suite(void)
{
        Suite *s = suite_create("hostile");
        TCase *close_tc = tcase_create("close");

        tcase_set_timeout(close_tc, 120);
        tcase_add_test(close_tc, test_close_at_every_step_of_a_fd_request_never_crashes);
        suite_add_tcase(s, close_tc);
        return s;
}
