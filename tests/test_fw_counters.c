// SPDX-License-Identifier: LGPL-2.1-or-later
/* FirewallList's counters and rule text against the real kernel and real
 * frames, and an owner's rules dying with its interface (issue 13). As in
 * test_firewall.c, a guest namespace holds geth0, joined by a veth pair to
 * vnet0 here, where the helper runs: vnet0's ingress is what the guest
 * sends, its egress what it receives. Frames are sent and counted with
 * AF_PACKET sockets; a receiver bound to one ethertype sees only what the
 * ingress hook let through. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

#define HOST_MAC "52:54:00:00:00:01"
#define GUEST_MAC "52:54:00:00:00:02"
#define SPOOF_MAC "52:54:00:66:66:66"
#define ETH_P_NBTEST 0x88b5

struct lab {
        nb_conn *c;
        int ns;
        char ns_path[64];
};

static void expect_ok(nb_results *res)
{
        long bad = nb_results_first_error(res);

        ck_assert_msg(bad < 0, "op %ld: %s", bad, bad < 0 ? "" : nb_result_message(res, bad));
        nb_results_free(res);
}

static int packet_socket_in(int ns, const char *dev, int proto)
{
        struct sockaddr_ll sa = {.sll_family = AF_PACKET, .sll_protocol = htons((uint16_t)proto)};
        int here = -1, fd;

        if (ns >= 0) {
                here = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
                ck_assert_int_ge(here, 0);
                ck_assert_msg(setns(ns, CLONE_NEWNET) == 0, "setns: %s", strerror(errno));
        }
        fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons((uint16_t)proto));
        sa.sll_ifindex = (int)if_nametoindex(dev);
        if (fd >= 0 && sa.sll_ifindex > 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                fd = -1;
        }
        if (ns >= 0) {
                ck_assert_msg(setns(here, CLONE_NEWNET) == 0, "setns back: %s", strerror(errno));
                close(here);
        }
        ck_assert_msg(fd >= 0 && sa.sll_ifindex > 0, "packet socket on %s: %s", dev,
                      strerror(errno));
        return fd;
}

/* vnet0 here and geth0 in the guest, up. */
static void pair_up(struct lab *l)
{
        free(tu_sh("ip link add vnet0 address %s type veth peer name geth0 address %s netns %s",
                   HOST_MAC, GUEST_MAC, l->ns_path));
        free(tu_sh("ip link set vnet0 up && nsenter --net=%s ip link set geth0 up", l->ns_path));
}

static void lab_up(struct lab *l, const char *config)
{
        tu_private_netns();
        l->c = tu_spawn(config);
        l->ns = tu_new_netns_fd();
        snprintf(l->ns_path, sizeof(l->ns_path), "/proc/%d/fd/%d", (int)getpid(), l->ns);
        pair_up(l);
}

static void lab_down(struct lab *l)
{
        close(l->ns);
        nb_close(l->c);
}

static void parse_mac(const char *s, uint8_t mac[6])
{
        unsigned b[6];

        ck_assert_int_eq(sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]),
                         6);
        for (int i = 0; i < 6; i++)
                mac[i] = (uint8_t)b[i];
}

/* A 60-byte frame of our ethertype with the marker as payload. */
static void test_frame(uint8_t f[60], const char *dst, const char *src, const char *marker)
{
        memset(f, 0, 60);
        parse_mac(dst, f);
        parse_mac(src, f + 6);
        f[12] = ETH_P_NBTEST >> 8;
        f[13] = ETH_P_NBTEST & 0xff;
        memcpy(f + 14, marker, strlen(marker));
}

static unsigned count_marked(int fd, const char *marker, unsigned enough)
{
        uint64_t end = tu_now_us() + 2000000, last = tu_now_us();
        uint8_t buf[2048];
        unsigned n = 0;

        while (n < enough && tu_now_us() < end && tu_now_us() - last < 200000) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ssize_t len;
                if (poll(&p, 1, 20) <= 0)
                        continue;
                len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (len > 0 && memmem(buf, (size_t)len, marker, strlen(marker))) {
                        n++;
                        last = tu_now_us();
                }
        }
        return n;
}

/* Send copies of a frame from the guest (into vnet0's ingress) or to it
 * (out of vnet0's egress); how many arrived on the other side. */
static unsigned send_frames(struct lab *l, bool from_guest, const uint8_t *f, const char *marker,
                            unsigned copies)
{
        int tx =
                from_guest ? packet_socket_in(l->ns, "geth0", 0) : packet_socket_in(-1, "vnet0", 0);
        int rx = from_guest ? packet_socket_in(-1, "vnet0", ETH_P_NBTEST)
                            : packet_socket_in(l->ns, "geth0", ETH_P_NBTEST);
        unsigned n;

        for (unsigned i = 0; i < copies; i++) {
                ssize_t k = send(tx, f, 60, 0);
                /* A frame the egress hook drops fails with ENOBUFS. */
                ck_assert_msg(k == 60 || (k < 0 && errno == ENOBUFS), "send: %s", strerror(errno));
        }
        n = count_marked(rx, marker, copies + 1);
        close(tx);
        close(rx);
        return n;
}

/* The counter whose text is `text` among owner's, which must be there. */
static nb_fw_counter find_rule(const nb_results *res, const char *owner, const char *text)
{
        const char *name;
        nb_fw_counter c = NB_FW_COUNTER_INIT;

        for (size_t k = 0; nb_result_fw_owner_at(res, 0, k, &name, NULL, NULL, NULL) == 0; k++) {
                if (strcmp(name, owner) != 0)
                        continue;
                for (size_t j = 0; nb_result_fw_counter_at(res, 0, k, j, &c) == 0; j++)
                        if (strcmp(c.text, text) == 0)
                                return c;
        }
        ck_abort_msg("owner %s has no rule '%s'", owner, text);
        return c;
}

static nb_results *list_counters(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;

        ck_assert_int_eq(nb_batch_firewall_list_counters(b), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        return res;
}

#define DROP_SPOOF                                                                                 \
        "comment='spoofed' out drop mac srcmacaddr='52:54:00:66:66:66' protocolid='0x88b5'"
#define ACCEPT_TEST "out accept mac protocolid='0x88b5'"
#define DROP_TO "in drop priority='5' mac dstmacaddr='52:54:00:00:00:02' protocolid='0x88b5'"

static void apply_counted(struct lab *l)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule spoof = {.size = sizeof(nb_fw_rule),
                            .direction = NB_FW_FROM_GUEST,
                            .verdict = NB_FW_DROP,
                            .ether_src = SPOOF_MAC,
                            .ether_type = ETH_P_NBTEST,
                            .comment = "spoofed"};
        nb_fw_rule accept = {.size = sizeof(nb_fw_rule),
                             .direction = NB_FW_FROM_GUEST,
                             .verdict = NB_FW_ACCEPT,
                             .ether_type = ETH_P_NBTEST};
        nb_fw_rule to = {.size = sizeof(nb_fw_rule),
                         .direction = NB_FW_TO_GUEST,
                         .verdict = NB_FW_DROP,
                         .ether_dst = GUEST_MAC,
                         .ether_type = ETH_P_NBTEST,
                         .priority = 5};
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_fw_group(rs, "g"), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &spoof), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &accept), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &to), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "guest0", "vnet0", rs, NB_FW_REPLACE), 0);
        expect_ok(tu_submit(l->c, b));
        nb_fw_ruleset_free(rs);
}

/* Each rule counts the frames it matched and their bytes, no other rule
 * moves; the text says what the rule is, also to nft. */
START_TEST(test_counters_move_by_the_frames_each_rule_matched)
{
        struct lab l;
        uint8_t spoofed[60], good[60], to_guest[60];
        nb_fw_counter c = NB_FW_COUNTER_INIT;
        nb_results *res;
        char *ruleset;

        lab_up(&l, TU_ALLOW);
        apply_counted(&l);
        test_frame(spoofed, HOST_MAC, SPOOF_MAC, "nbcnt-spoof");
        test_frame(good, HOST_MAC, GUEST_MAC, "nbcnt-good");
        test_frame(to_guest, GUEST_MAC, HOST_MAC, "nbcnt-to");

        res = list_counters(l.c);
        c = find_rule(res, "guest0", DROP_SPOOF);
        ck_assert_uint_eq(c.packets, 0);
        ck_assert_uint_eq(c.bytes, 0);
        ck_assert_str_eq(c.group, "g");
        ck_assert_int_eq(c.direction, NB_FW_FROM_GUEST);
        c = find_rule(res, "guest0", ACCEPT_TEST);
        ck_assert_uint_eq(c.packets, 0);
        ck_assert_str_eq(c.group, "g");
        c = find_rule(res, "guest0", DROP_TO);
        ck_assert_int_eq(c.direction, NB_FW_TO_GUEST);
        ck_assert_uint_eq(c.index, 0);
        /* The base chains' jumps are listed too, under no group. */
        c = find_rule(res, "guest0", "jump g");
        ck_assert_str_eq(c.group, "");
        nb_results_free(res);

        ck_assert_uint_eq(send_frames(&l, true, spoofed, "nbcnt-spoof", 3), 0);
        ck_assert_uint_eq(send_frames(&l, true, good, "nbcnt-good", 2), 2);
        ck_assert_uint_eq(send_frames(&l, false, to_guest, "nbcnt-to", 4), 0);
        res = list_counters(l.c);
        /* At the ingress hook the kernel has pulled the Ethernet header:
         * 46 bytes of each 60-byte frame; at egress it counts all 60. */
        c = find_rule(res, "guest0", DROP_SPOOF);
        ck_assert_uint_eq(c.packets, 3);
        ck_assert_uint_eq(c.bytes, 3 * 46);
        ck_assert_uint_eq(c.index, 0);
        c = find_rule(res, "guest0", ACCEPT_TEST);
        ck_assert_uint_eq(c.packets, 2);
        ck_assert_uint_eq(c.bytes, 2 * 46);
        ck_assert_uint_eq(c.index, 1);
        c = find_rule(res, "guest0", DROP_TO);
        ck_assert_uint_eq(c.packets, 4);
        ck_assert_uint_eq(c.bytes, 4 * 60);
        nb_results_free(res);

        ruleset = tu_sh("nft list table netdev netbroker");
        ck_assert_msg(strstr(ruleset, "comment \"" DROP_SPOOF "\""), "%s", ruleset);
        free(ruleset);
        lab_down(&l);
}
END_TEST

/* The plain listing reads no rule: no counters, as before. */
START_TEST(test_plain_list_carries_no_counters)
{
        struct lab l;
        nb_batch *b;
        nb_results *res;
        unsigned rules = 0;

        lab_up(&l, TU_ALLOW);
        apply_counted(&l);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_firewall_list(b), 0);
        res = tu_submit(l.c, b);
        ck_assert_int_eq(nb_result_fw_owner_at(res, 0, 0, NULL, NULL, NULL, &rules), 0);
        ck_assert_uint_gt(rules, 0);
        ck_assert_uint_eq(nb_result_fw_counter_count(res, 0, 0), 0);
        nb_results_free(res);
        res = list_counters(l.c);
        ck_assert_uint_ge(nb_result_fw_counter_count(res, 0, 0), 3);
        nb_results_free(res);
        lab_down(&l);
}
END_TEST

/* What nft lists loads again: the stored rule text stays within the 128
 * characters nft(8) reads back, even for clean-traffic's longest rules
 * and a rule with the longest comment. */
START_TEST(test_the_listed_table_loads_again_with_nft_f)
{
        const char *ips[] = {"10.0.0.2", NULL};
        nb_fw_rule long_comment = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_ACCEPT};
        char comment[257];
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        struct lab l;
        nb_batch *b;
        char *out;

        lab_up(&l, TU_ALLOW);
        memset(comment, 'c', 256);
        comment[256] = '\0';
        long_comment.comment = comment;
        long_comment.ether_type = 0x88b5;
        ck_assert_int_eq(nb_fw_add_no_promisc(rs, GUEST_MAC), 0);
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, GUEST_MAC, ips), 0);
        ck_assert_int_eq(nb_fw_group(rs, "long"), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &long_comment), 0);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vnet0", "vnet0", rs, NB_FW_REPLACE), 0);
        expect_ok(tu_submit(l.c, b));
        out = tu_sh("nft list table netdev netbroker > /tmp/nbfw-listed.$$ && "
                    "nft delete table netdev netbroker && nft -f /tmp/nbfw-listed.$$ 2>&1; "
                    "echo rc=$?; rm -f /tmp/nbfw-listed.$$");
        ck_assert_msg(strstr(out, "rc=0"), "nft -f of the listed table failed:\n%s", out);
        free(out);
        nb_fw_ruleset_free(rs);
        lab_down(&l);
}
END_TEST

/* ---- a guest's rules die with its interface ---- */

static size_t owners_listed(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        size_t n;

        nb_batch_firewall_list(b);
        res = tu_submit(c, b);
        n = nb_result_fw_owner_count(res, 0);
        nb_results_free(res);
        return n;
}

/* The old owner drops everything the guest sends. The interface goes and
 * a new one of its name comes: the frames of the new guest pass (the old
 * chain does not bind the new device), the owner is gone from the table
 * and counted in Stats, and removing it afterwards is a success that
 * writes nothing. */
START_TEST(test_a_new_interface_of_the_name_inherits_no_rule)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule drop = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_DROP};
        uint8_t f[60];
        struct lab l;
        nb_batch *b;
        nb_results *res;
        char *before, *after;
        uint64_t gone0;
        unsigned got = 0;

        lab_up(&l, TU_ALLOW);
        test_frame(f, HOST_MAC, GUEST_MAC, "nbgone-frame");
        ck_assert_int_eq(nb_fw_rule_add(rs, &drop), 0);
        b = nb_batch_new();
        nb_batch_firewall_apply(b, "old-guest", "vnet0", rs, NB_FW_REPLACE);
        expect_ok(tu_submit(l.c, b));
        ck_assert_uint_eq(send_frames(&l, true, f, "nbgone-frame", 3), 0);
        gone0 = tu_stat(l.c, "fw_owners_gone");

        free(tu_sh("ip link del vnet0"));
        pair_up(&l);
        /* The helper notices from its loop, at once; a frame sent before
         * it has may still meet the old chain, so look for a while. */
        for (int i = 0; i < 50 && got == 0; i++)
                got = send_frames(&l, true, f, "nbgone-frame", 1);
        ck_assert_uint_eq(got, 1);
        ck_assert_uint_eq(send_frames(&l, true, f, "nbgone-frame", 3), 3);
        ck_assert_uint_eq(owners_listed(l.c), 0);
        ck_assert_uint_eq(tu_stat(l.c, "fw_owners_gone"), gone0 + 1);

        before = tu_sh("nft list ruleset");
        b = nb_batch_new();
        nb_batch_firewall_remove(b, "old-guest");
        res = tu_submit(l.c, b);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert_msg(strstr(nb_result_message(res, 0), "went with its interface"), "%s",
                      nb_result_message(res, 0));
        nb_results_free(res);
        after = tu_sh("nft list ruleset");
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        nb_fw_ruleset_free(rs);
        lab_down(&l);
}
END_TEST

/* A rename is the old name going: the owner's chains are bound to the
 * name (since Linux 6.16 they stay with it), so they go, and a new device
 * of the old name inherits no rule. */
START_TEST(test_a_renamed_interface_leaves_no_rule_for_its_old_name)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule drop = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_DROP};
        uint8_t f[60];
        struct lab l;
        nb_batch *b;
        uint64_t gone0;
        unsigned got = 0;
        char *ruleset;

        lab_up(&l, TU_ALLOW);
        test_frame(f, HOST_MAC, GUEST_MAC, "nbgone-frame");
        ck_assert_int_eq(nb_fw_rule_add(rs, &drop), 0);
        b = nb_batch_new();
        nb_batch_firewall_apply(b, "old-guest", "vnet0", rs, NB_FW_REPLACE);
        expect_ok(tu_submit(l.c, b));
        ck_assert_uint_eq(send_frames(&l, true, f, "nbgone-frame", 3), 0);
        gone0 = tu_stat(l.c, "fw_owners_gone");

        free(tu_sh("ip link set vnet0 down && ip link set vnet0 name nbrenamed0 && "
                   "nsenter --net=%s ip link set geth0 name gold0",
                   l.ns_path));
        ck_assert(tu_link_exists("nbrenamed0") && !tu_link_exists("vnet0"));
        pair_up(&l);
        for (int i = 0; i < 50 && got == 0; i++)
                got = send_frames(&l, true, f, "nbgone-frame", 1);
        ck_assert_uint_eq(got, 1);
        ck_assert_uint_eq(send_frames(&l, true, f, "nbgone-frame", 3), 3);
        ck_assert_uint_eq(owners_listed(l.c), 0);
        ck_assert_uint_eq(tu_stat(l.c, "fw_owners_gone"), gone0 + 1);
        /* Its last owner gone, the table goes too (none to list is fine). */
        ruleset = tu_sh("nft list table netdev netbroker 2>/dev/null || true");
        ck_assert_msg(!strstr(ruleset, "old-guest"), "the owner's chains stayed:\n%s", ruleset);
        free(ruleset);
        nb_fw_ruleset_free(rs);
        lab_down(&l);
}
END_TEST

/* A guest's tap is deleted; the next guest's tap of the same name is made
 * and given its own rules: the old owner went, the new one stays (the
 * removal is for the interface that went, not for its name). */
START_TEST(test_rules_applied_after_the_interface_went_stay)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule drop = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_DROP};
        nb_tap_opts persist = {.size = sizeof(nb_tap_opts), .persist = true};
        nb_conn *c;
        nb_batch *b;
        nb_results *res;
        const char *name;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        ck_assert_int_eq(nb_fw_rule_add(rs, &drop), 0);
        b = nb_batch_new();
        nb_batch_tap_create(b, "nbgt0", &persist);
        nb_batch_firewall_apply(b, "first", "nbgt0", rs, NB_FW_REPLACE);
        expect_ok(tu_submit(c, b));
        b = nb_batch_new();
        nb_batch_link_delete(b, "nbgt0");
        expect_ok(tu_submit(c, b));
        b = nb_batch_new();
        nb_batch_tap_create(b, "nbgt0", &persist);
        nb_batch_firewall_apply(b, "second", "nbgt0", rs, NB_FW_REPLACE);
        expect_ok(tu_submit(c, b));
        b = nb_batch_new();
        nb_batch_firewall_list(b);
        res = tu_submit(c, b);
        ck_assert_uint_eq(nb_result_fw_owner_count(res, 0), 1);
        ck_assert_int_eq(nb_result_fw_owner_at(res, 0, 0, &name, NULL, NULL, NULL), 0);
        ck_assert_str_eq(name, "second");
        nb_results_free(res);
        nb_fw_ruleset_free(rs);
        nb_close(c);
}
END_TEST

struct submitter {
        nb_conn *c;
        nb_batch *b;
        nb_results *res;
};

static void *submit_thread(void *data)
{
        struct submitter *s = data;

        s->res = tu_submit(s->c, s->b);
        return NULL;
}

/* The helper learns that an interface went and gets a request for the new
 * interface of that name in the same turn of its loop (it was busy when
 * both came: here, stopped). The old owner goes; the owner the request
 * applies to the new interface stays, and its rules filter the new guest. */
START_TEST(test_an_owner_applied_in_the_turn_the_interface_went_stays)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule drop = {
                .size = sizeof(nb_fw_rule), .direction = NB_FW_FROM_GUEST, .verdict = NB_FW_DROP};
        struct submitter s;
        struct lab l;
        pthread_t t;
        uint8_t f[60];
        nb_batch *b;
        nb_results *res;
        const char *name;
        pid_t helper;

        lab_up(&l, TU_ALLOW);
        helper = nb_conn_helper_pid(l.c);
        ck_assert_int_gt(helper, 0);
        test_frame(f, HOST_MAC, GUEST_MAC, "nbturn-frame");
        ck_assert_int_eq(nb_fw_rule_add(rs, &drop), 0);
        b = nb_batch_new();
        nb_batch_firewall_apply(b, "old-guest", "vnet0", rs, NB_FW_REPLACE);
        expect_ok(tu_submit(l.c, b));

        ck_assert_int_eq(kill(helper, SIGSTOP), 0);
        free(tu_sh("ip link del vnet0"));
        pair_up(&l);
        s.c = l.c;
        s.b = nb_batch_new();
        nb_batch_firewall_apply(s.b, "new-guest", "vnet0", rs, NB_FW_REPLACE);
        ck_assert_int_eq(pthread_create(&t, NULL, submit_thread, &s), 0);
        usleep(200000); /* the request is in the socket */
        ck_assert_int_eq(kill(helper, SIGCONT), 0);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        expect_ok(s.res);
        usleep(100000);

        b = nb_batch_new();
        nb_batch_firewall_list(b);
        res = tu_submit(l.c, b);
        ck_assert_uint_eq(nb_result_fw_owner_count(res, 0), 1);
        ck_assert_int_eq(nb_result_fw_owner_at(res, 0, 0, &name, NULL, NULL, NULL), 0);
        ck_assert_str_eq(name, "new-guest");
        nb_results_free(res);
        ck_assert_uint_eq(send_frames(&l, true, f, "nbturn-frame", 3), 0);
        nb_fw_ruleset_free(rs);
        lab_down(&l);
}
END_TEST

Suite *fw_counters_suite(void)
{
        Suite *s = suite_create("fw-counters");
        TCase *counters = tcase_create("fw-counters"), *gone = tcase_create("fw-gone");

        tcase_set_timeout(counters, 60);
        tcase_add_test(counters, test_counters_move_by_the_frames_each_rule_matched);
        tcase_add_test(counters, test_plain_list_carries_no_counters);
        tcase_add_test(counters, test_the_listed_table_loads_again_with_nft_f);
        suite_add_tcase(s, counters);
        tcase_set_timeout(gone, 60);
        tcase_add_test(gone, test_a_new_interface_of_the_name_inherits_no_rule);
        tcase_add_test(gone, test_rules_applied_after_the_interface_went_stay);
        tcase_add_test(gone, test_a_renamed_interface_leaves_no_rule_for_its_old_name);
        tcase_add_test(gone, test_an_owner_applied_in_the_turn_the_interface_went_stays);
        suite_add_tcase(s, gone);
        return s;
}
