// SPDX-License-Identifier: LGPL-2.1-or-later
/* A VM start in one batch, against the real kernel: op references ("op:K",
 * helper/opref.h) let the ops after a template create name its interface,
 * so create, attach, filter and limit are one all-or-nothing request; and
 * a macvtap with one fd per queue. What is left is read with ip -d -j link,
 * nft -j list ruleset and tc -j qdisc. Each test runs in a network
 * namespace of its own with a veth pair p0/p1. */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

#define GUEST_MAC "52:54:00:00:00:07"

static nb_conn *setup(void)
{
        tu_private_netns();
        tu_veth("p0", "p1");
        return tu_spawn(TU_ALLOW);
}

static void assert_all_ok(const nb_results *res)
{
        long bad = nb_results_first_error(res);

        ck_assert_msg(bad < 0, "op %ld failed: %s", bad,
                      bad < 0 ? "" : nb_result_message(res, (size_t)bad));
}

static char *ref(size_t op)
{
        static char buf[4][NB_REF_MAX];
        static int next;
        char *p = buf[next++ % 4];

        ck_assert_int_eq(nb_ref(op, p, NB_REF_MAX), 0);
        return p;
}

/* ---- the guest's batch ---- */

/* Bridge "vbr%d" (op 0), tap "vnet%d" (op 1) put up on the bridge (op 2),
 * a filter (op 3) and a limit (op 4) on the tap, all by reference. */
static nb_batch *vm_start_batch(void)
{
        nb_batch *b = nb_batch_new();
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_link_change ch = NB_LINK_CHANGE_INIT;
        nb_rate in = {.size = sizeof(nb_rate), .average = 1024, .burst = 64};
        nb_rate out = {.size = sizeof(nb_rate), .average = 512, .burst = 32};

        ck_assert_int_eq(nb_batch_bridge_create(b, "vbr%d"), 0);
        ck_assert_uint_eq(nb_batch_size(b), 1);
        ck_assert_int_eq(nb_batch_tap_create(b, "vnet%d", NULL), 0);
        ch.up = 1;
        ch.master = ref(0);
        ck_assert_int_eq(nb_batch_link_set(b, ref(1), &ch), 0);
        ck_assert_int_eq(nb_fw_add_no_mac_spoofing(rs, GUEST_MAC), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "guest7", ref(1), rs, NB_FW_REPLACE), 0);
        nb_fw_ruleset_free(rs);
        ck_assert_int_eq(nb_batch_bandwidth_set(b, ref(1), &in, &out), 0);
        return b;
}

START_TEST(test_vm_start_by_reference_creates_attaches_filters_and_limits)
{
        nb_conn *c = setup();
        nb_results *res = tu_submit(c, vm_start_batch());
        char *nft, *tc, want[64];
        const char *tap, *br;

        assert_all_ok(res);
        br = nb_result_ifname(res, 0);
        tap = nb_result_ifname(res, 1);
        ck_assert_str_eq(br, "vbr0");
        ck_assert_str_eq(tap, "vnet0");
        /* Each later op reports the real name, not the reference. */
        for (size_t i = 2; i < 5; i++)
                if (nb_result_ifname(res, i)[0])
                        ck_assert_str_eq(nb_result_ifname(res, i), "vnet0");
        ck_assert_str_eq(tu_link_get("vnet0", "master"), "vbr0");
        ck_assert_ptr_nonnull(strstr(tu_link_get("vnet0", "flags"), "\"UP\""));
        /* The owner, recorded with its interface, and its base chain on
         * the tap's hook (nft 1.0.6's JSON has no device for a netdev
         * chain: its text has). */
        nft = tu_sh("nft -j list ruleset");
        snprintf(want, sizeof(want), "netbroker guest7 ");
        ck_assert_msg(strstr(nft, want) && strstr(strstr(nft, want), " vnet0 "),
                      "no owner guest7 on vnet0 in: %s", nft);
        free(nft);
        nft = tu_sh("nft list chain netdev netbroker guest7/from");
        ck_assert_msg(strstr(nft, "hook ingress") && strstr(nft, "\"vnet0\""),
                      "guest7/from is not on vnet0's ingress: %s", nft);
        tc = tu_sh("tc -j qdisc show dev vnet0");
        ck_assert_msg(strstr(tc, "\"kind\":\"htb\""), "no htb on vnet0: %s", tc);
        free(nft);
        free(tc);
        nb_results_free(res);
        nb_close(c);
}
END_TEST

START_TEST(test_vm_start_whose_last_op_fails_leaves_nothing)
{
        nb_conn *c = setup();
        nb_batch *b = vm_start_batch();
        nb_link_change ch = NB_LINK_CHANGE_INIT;
        nb_results *res;
        char *before = tu_sh("ip -d -j link show"), *after;

        /* p0 is a veth, which takes no master: the kernel refuses it when
         * op 5 runs, after ops 0-4 did their work. */
        ch.master = "p0";
        ck_assert_int_eq(nb_batch_link_set(b, ref(1), &ch), 0);
        res = tu_submit(c, b);
        ck_assert_int_ne(nb_result_status(res, 5), 0);
        /* The interface ops say they were undone. The firewall's
         * transaction was committed at op 3 and is not taken back by the
         * undo: its rules go with the tap (fw_gone.c, before the reply),
         * which the ruleset below shows. */
        for (size_t i = 0; i < 5; i++)
                if (i != 3)
                        tu_assert_status(res, i, -ECANCELED, "undone");
        ck_assert(!tu_link_exists("vnet0"));
        ck_assert(!tu_link_exists("vbr0"));
        after = tu_sh("ip -d -j link show");
        ck_assert_msg(strcmp(before, after) == 0, "links before: %s\nafter: %s", before, after);
        free(after);
        after = tu_sh("nft -j list ruleset; tc -j qdisc show");
        ck_assert_msg(!strstr(after, "guest7"), "the filter is still there: %s", after);
        ck_assert_msg(!strstr(after, "vnet0") && !strstr(after, "vbr0") && !strstr(after, "htb"),
                      "something of the batch is left: %s", after);
        nb_results_free(res);
        free(before);
        free(after);
        nb_close(c);
}
END_TEST

/* LinkDeletes next to each other are one run, deleted on the links' lane
 * in one call (op_link.c): by then the references are names. */
START_TEST(test_link_deletes_by_reference_run_on_the_links_lane)
{
        nb_conn *c = setup();
        nb_batch *b = nb_batch_new();
        nb_results *res;

        nb_batch_tap_create(b, "vnet%d", NULL);
        nb_batch_bridge_create(b, "vbr%d");
        nb_batch_link_delete(b, ref(0));
        nb_batch_link_delete(b, ref(1));
        res = tu_submit(c, b);
        assert_all_ok(res);
        ck_assert_str_eq(nb_result_ifname(res, 2), "vnet0");
        ck_assert_str_eq(nb_result_ifname(res, 3), "vbr0");
        ck_assert(!tu_link_exists("vnet0"));
        ck_assert(!tu_link_exists("vbr0"));
        nb_results_free(res);
        nb_close(c);
}
END_TEST

/* ---- what a reference may not point at ---- */

START_TEST(test_references_forward_self_and_to_non_creating_ops_are_refused)
{
        nb_conn *c = setup();
        nb_link_change up = NB_LINK_CHANGE_INIT;
        nb_batch *b;
        nb_results *res;

        up.up = 1;
        /* Forward: op 0 names what op 1 makes. */
        b = nb_batch_new();
        nb_batch_link_set(b, ref(1), &up);
        nb_batch_tap_create(b, "vnet%d", NULL);
        res = tu_submit(c, b);
        tu_assert_status(res, 0, -EINVAL, "a reference goes back to an earlier op");
        tu_assert_status(res, 1, -ECANCELED, "not run");
        nb_results_free(res);
        /* Self: a macvtap on what it makes itself. */
        b = nb_batch_new();
        nb_batch_macvtap_create(b, "macvtap%d", ref(0), NB_MACVLAN_BRIDGE, NULL, false);
        res = tu_submit(c, b);
        tu_assert_status(res, 0, -EINVAL, "cannot refer to the interface it makes itself");
        nb_results_free(res);
        /* An op that makes nothing, and a LinkSet that makes nothing either. */
        b = nb_batch_new();
        nb_batch_ping(b);
        nb_batch_link_set(b, ref(0), &up);
        res = tu_submit(c, b);
        tu_assert_status(res, 1, -EINVAL, "op 0 makes no interface");
        nb_results_free(res);
        /* Not a reference at all. */
        b = nb_batch_new();
        nb_batch_tap_create(b, "vnet%d", NULL);
        nb_batch_link_set(b, "op:01", &up);
        res = tu_submit(c, b);
        tu_assert_status(res, 1, -EINVAL, "not a reference");
        nb_results_free(res);
        /* A veth peer moved to another namespace is no interface here. */
        b = nb_batch_new();
        {
                int ns = tu_new_netns_fd();
                char peer[NB_REF_MAX];

                nb_batch_veth_create(b, "vv%d", "vvpeer", ns);
                close(ns);
                ck_assert_int_eq(nb_ref_peer(0, peer, sizeof(peer)), 0);
                ck_assert_str_eq(peer, "op:0:peer");
                nb_batch_link_set(b, peer, &up);
        }
        res = tu_submit(c, b);
        tu_assert_status(res, 1, -EINVAL, "op 0 makes no veth peer in this namespace");
        nb_results_free(res);
        /* Nothing ran: the tap of the batches above was never made. */
        ck_assert(!tu_link_exists("vnet0"));
        ck_assert(!tu_link_exists("vv0"));
        nb_close(c);
}
END_TEST

/* With NB_BATCH_CONTINUE_ON_ERROR an op may run after the one it names has
 * been refused or has failed: it is refused then, and never runs on some
 * other interface. A peer reference that is fine works. */
START_TEST(test_references_to_refused_or_failed_ops_are_refused)
{
        nb_conn *c = setup();
        nb_link_change up = NB_LINK_CHANGE_INIT;
        nb_batch *b = nb_batch_new();
        nb_results *res;
        char peer[NB_REF_MAX];

        up.up = 1;
        nb_batch_set_flags(b, NB_BATCH_CONTINUE_ON_ERROR);
        /* 0: refused (p0 exists); 1: names it. */
        nb_batch_tap_create(b, "p0", NULL);
        nb_batch_link_set(b, ref(0), &up);
        /* 2, 3: two passthru macvlans on p1, the second fails when it runs
         * (the kernel allows one); 4: names it. */
        nb_batch_macvlan_create(b, "mva%d", "p1", NB_MACVLAN_PASSTHRU, NULL);
        nb_batch_macvlan_create(b, "mvb%d", "p1", NB_MACVLAN_PASSTHRU, NULL);
        nb_batch_link_set(b, ref(3), &up);
        /* 5: a veth here; 6: its peer, by reference. */
        nb_batch_veth_create(b, "vv%d", "vvpeer", -1);
        ck_assert_int_eq(nb_ref_peer(5, peer, sizeof(peer)), 0);
        nb_batch_link_set(b, peer, &up);
        res = tu_submit(c, b);
        tu_assert_status(res, 0, -EEXIST, NULL);
        tu_assert_status(res, 1, -EINVAL, "op 0 was refused");
        tu_assert_status(res, 2, 0, NULL);
        ck_assert_int_ne(nb_result_status(res, 3), 0);
        tu_assert_status(res, 4, -EINVAL, "op 3 failed");
        tu_assert_status(res, 5, 0, NULL);
        tu_assert_status(res, 6, 0, NULL);
        ck_assert_str_eq(nb_result_ifname(res, 6), "vvpeer");
        ck_assert_ptr_nonnull(strstr(tu_link_get("vvpeer", "flags"), "\"UP\""));
        nb_results_free(res);
        nb_close(c);
}
END_TEST

/* ---- policy: decided on the name a reference stands for ---- */

#define NOBODY 65534

/* As uid NOBODY: connect to sock, submit what build() adds, and write each
 * op's status into out (n at most). Returns how many ops answered. */
static size_t submit_as_nobody(const char *sock, void (*build)(nb_batch *b), int *out, size_t n)
{
        int pipefd[2], status;
        ssize_t got;
        pid_t pid;

        ck_assert_int_eq(chmod(sock, 0666), 0);
        ck_assert_int_eq(pipe(pipefd), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int st[16] = {0};
                nb_batch *b = nb_batch_new();
                nb_results *res = NULL;
                nb_conn *c = NULL;
                size_t k = 0;

                close(pipefd[0]);
                if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0 ||
                    nb_connect(sock, &c) < 0)
                        _exit(1);
                build(b);
                if (nb_submit(c, b, &res) < 0)
                        _exit(2);
                for (; k < nb_results_count(res) && k < 16; k++)
                        st[k] = nb_result_status(res, k);
                if (write(pipefd[1], st, k * sizeof(int)) != (ssize_t)(k * sizeof(int)))
                        _exit(3);
                _exit(0);
        }
        close(pipefd[1]);
        got = read(pipefd[0], out, n * sizeof(int));
        close(pipefd[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "caller status %d", status);
        return got > 0 ? (size_t)got / sizeof(int) : 0;
}

/* A macvlan from a template (allowed: pvup0 is a listed parent), then a
 * macvtap on it by reference: its parent is pva0, not in 'parents'. */
static void build_macvtap_on_own_macvlan(nb_batch *b)
{
        nb_batch_macvlan_create(b, "pva%d", "pvup0", NB_MACVLAN_BRIDGE, NULL);
        nb_batch_macvtap_create(b, "pva%d", "op:0", NB_MACVLAN_BRIDGE, NULL, false);
}

/* The same with an up by reference: the caller owns what it made. */
static void build_macvlan_and_up(nb_batch *b)
{
        nb_link_change up = NB_LINK_CHANGE_INIT;

        up.up = 1;
        nb_batch_macvlan_create(b, "pva%d", "pvup0", NB_MACVLAN_BRIDGE, NULL);
        nb_batch_link_set(b, "op:0", &up);
}

START_TEST(test_reference_is_checked_by_policy_on_the_name_it_stands_for)
{
        struct tu_helper h;
        int st[4];
        size_t n;

        tu_private_netns();
        tu_veth("pvup0", "pvup0p");
        tu_helper_start(&h, TU_ALLOW "policy_dir = /nonexistent/nbtest-policy.d\n"
                                     "[policy uid 65534]\n"
                                     "ops = macvtap_create macvlan_create link_set\n"
                                     "parents = pvup0\n"
                                     "name_prefixes = pva\n"
                                     "max_devices = 8\n");
        n = submit_as_nobody(h.sock, build_macvtap_on_own_macvlan, st, 4);
        ck_assert_uint_eq(n, 2);
        ck_assert_int_eq(st[1], -EPERM);
        ck_assert_int_eq(st[0], -ECANCELED); /* made, then undone */
        ck_assert(!tu_link_exists("pva0"));
        ck_assert(!tu_link_exists("pva1"));
        n = submit_as_nobody(h.sock, build_macvlan_and_up, st, 4);
        ck_assert_uint_eq(n, 2);
        ck_assert_int_eq(st[0], 0);
        ck_assert_int_eq(st[1], 0);
        ck_assert_ptr_nonnull(strstr(tu_link_get("pva1", "flags"), "\"UP\""));
        tu_helper_stop(&h);
}
END_TEST

/* ---- macvtap queues ---- */

/* Wait up to ms for a frame on fd whose payload holds marker. */
static bool saw_frame(int fd, const char *marker, int ms)
{
        uint8_t buf[2048];

        for (uint64_t end = tu_now_us() + (uint64_t)ms * 1000; tu_now_us() < end;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ssize_t n;

                if (poll(&p, 1, 100) <= 0)
                        continue;
                n = recv(fd, buf, sizeof(buf), 0);
                if (n > 0 && memmem(buf, (size_t)n, marker, strlen(marker)))
                        return true;
        }
        return false;
}

static int packet_socket(const char *dev)
{
        struct sockaddr_ll sa = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
        int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));

        ck_assert_msg(fd >= 0, "AF_PACKET socket: %s", strerror(errno));
        sa.sll_ifindex = (int)if_nametoindex(dev);
        ck_assert_int_gt(sa.sll_ifindex, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

START_TEST(test_macvtap_with_4_queues_gives_4_working_fds)
{
        nb_conn *c = setup();
        nb_batch *b = nb_batch_new();
        nb_link_change up = NB_LINK_CHANGE_INIT;
        nb_results *res;
        int fds[4], cap;

        up.up = 1;
        ck_assert_int_eq(nb_batch_macvtap_create_queues(b, "macvtap0", "p0", NB_MACVLAN_BRIDGE,
                                                        "52:54:00:00:00:09", false, 4),
                         0);
        nb_batch_link_set(b, "macvtap0", &up);
        nb_batch_link_set(b, "p0", &up);
        nb_batch_link_set(b, "p1", &up);
        res = tu_submit(c, b);
        assert_all_ok(res);
        ck_assert_uint_eq(nb_result_fd_count(res, 0), 4);
        for (size_t q = 0; q < 4; q++) {
                struct ifreq ifr = {0};

                fds[q] = nb_result_take_fd(res, 0, q);
                ck_assert_int_ge(fds[q], 0);
                ck_assert_int_eq(ioctl(fds[q], TUNGETIFF, &ifr), 0);
                ck_assert_str_eq(ifr.ifr_name, "macvtap0");
        }
        nb_results_free(res);
        /* Out through each queue: fd -> macvtap0 -> p0 -> p1. */
        cap = packet_socket("p1");
        for (int q = 0; q < 4; q++) {
                uint8_t frame[64] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52,
                                     0x54, 0,    0,    0,    9,    0x88, 0xb5};
                char marker[16];

                snprintf(marker, sizeof(marker), "nb-queue-%d", q);
                memcpy(frame + 14, marker, strlen(marker));
                ck_assert_int_eq(write(fds[q], frame, sizeof(frame)), (ssize_t)sizeof(frame));
                ck_assert_msg(saw_frame(cap, marker, 2000), "queue %d: no frame on p1", q);
        }
        close(cap);
        for (int q = 0; q < 4; q++)
                close(fds[q]);
        nb_close(c);
}
END_TEST

START_TEST(test_macvtap_queues_over_the_maximum_are_refused)
{
        nb_batch *b = nb_batch_new();
        Netbroker__MacvtapCreate m = NETBROKER__MACVTAP_CREATE__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__ClientMessage cm = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__ServerMessage *sm;
        struct tu_helper h;
        int fd, err = 0;

        tu_private_netns();
        tu_veth("p0", "p1");
        /* The library refuses it before sending. */
        ck_assert_int_eq(nb_batch_macvtap_create_queues(b, "macvtap%d", "p0", NB_MACVLAN_BRIDGE,
                                                        NULL, false, 17),
                         -EINVAL);
        ck_assert_uint_eq(nb_batch_size(b), 0);
        nb_batch_free(b);
        /* And so does the helper, from a client that sends it anyway. */
        tu_helper_start(&h, TU_ALLOW);
        fd = tu_raw_connect(h.sock);
        tu_raw_hello(fd);
        m.name = "macvtap%d";
        m.parent = "p0";
        m.queues = 17;
        op.op_case = NETBROKER__OP__OP_MACVTAP_CREATE;
        op.macvtap_create = &m;
        req.id = 1;
        req.n_ops = 1;
        req.ops = ops;
        cm.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        cm.request = &req;
        ck_assert_int_eq(tu_raw_send_msg(fd, &cm.base, NULL, 0), 0);
        sm = tu_raw_recv(fd, &err);
        ck_assert_ptr_nonnull(sm);
        ck_assert_int_eq(sm->msg_case, NETBROKER__SERVER_MESSAGE__MSG_REPLY);
        ck_assert_uint_eq(sm->reply->n_results, 1);
        ck_assert_int_eq(sm->reply->results[0]->status, EINVAL);
        ck_assert_msg(strstr(sm->reply->results[0]->message, "17 queues; at most 16"), "%s",
                      sm->reply->results[0]->message);
        netbroker__server_message__free_unpacked(sm, NULL);
        ck_assert(!tu_link_exists("macvtap0"));
        close(fd);
        tu_helper_stop(&h);
}
END_TEST

Suite *vmbatch_suite(void)
{
        Suite *s = suite_create("vmbatch");
        TCase *tc = tcase_create("vmbatch");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_vm_start_by_reference_creates_attaches_filters_and_limits);
        tcase_add_test(tc, test_vm_start_whose_last_op_fails_leaves_nothing);
        tcase_add_test(tc, test_link_deletes_by_reference_run_on_the_links_lane);
        tcase_add_test(tc, test_references_forward_self_and_to_non_creating_ops_are_refused);
        tcase_add_test(tc, test_references_to_refused_or_failed_ops_are_refused);
        tcase_add_test(tc, test_reference_is_checked_by_policy_on_the_name_it_stands_for);
        tcase_add_test(tc, test_macvtap_with_4_queues_gives_4_working_fds);
        tcase_add_test(tc, test_macvtap_queues_over_the_maximum_are_refused);
        suite_add_tcase(s, tc);
        return s;
}
