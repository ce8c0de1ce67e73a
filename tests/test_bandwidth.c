// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bandwidth through the helper, against the real kernel: what `tc -j`
 * shows after a set, a set twice, a clear, bad input, a batch that fails
 * after a set, and the conformance table: iperf3 TCP on a veth pair
 * between two namespaces, each way, at 8 to 512 Mbit/s, must be within 15%
 * of the average (the 2012 tc report in seeds/003 made a test). Every test
 * runs in a network namespace of its own; the guest end of the veth is in
 * a second one that dies with the test, and iperf3 listens only there. */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bw_nft.h"
#include "testutil.h"
#include "tests.h"

#define HOST_IP "10.99.0.1"
#define GUEST_IP "10.99.0.2"

/* The guest namespace, as a path for nsenter(1). */
static char guest_ns[64];

/* A private namespace with the veth h0 here and g0 in a guest namespace,
 * both addressed and up, and a helper. */
static nb_conn *setup(void)
{
        nb_conn *c;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int ns, look;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        ns = tu_new_netns_fd();
        look = fcntl(ns, F_DUPFD_CLOEXEC, 0);
        snprintf(guest_ns, sizeof(guest_ns), "/proc/%d/fd/%d", (int)getpid(), look);
        ck_assert_int_eq(nb_batch_veth_create(b, "h0", "g0", ns), 0);
        close(ns);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_msg(nb_results_first_error(res) < 0, "veth: %s", nb_result_message(res, 0));
        nb_results_free(res);
        nb_batch_free(b);
        free(tu_sh("ip addr add " HOST_IP "/24 dev h0 && ip link set h0 up"));
        free(tu_sh("nsenter --net=%s sh -c 'ip addr add " GUEST_IP
                   "/24 dev g0 && ip link set g0 up && ip link set lo up'",
                   guest_ns));
        return c;
}

/* One BandwidthSet; its status (0 or -errno). */
static int bw_set(nb_conn *c, const char *dev, const nb_rate *in, const nb_rate *out,
                  nb_results **ret)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        int st;

        ck_assert_int_eq(nb_batch_bandwidth_set(b, dev, in, out), 0);
        res = tu_submit(c, b);
        st = nb_result_status(res, 0);
        if (ret)
                *ret = res;
        else
                nb_results_free(res);
        return st;
}

static void bw_set_ok(nb_conn *c, const char *dev, const nb_rate *in, const nb_rate *out)
{
        nb_results *res;
        int st = bw_set(c, dev, in, out, &res);

        ck_assert_msg(st == 0, "bandwidth set %s: %s (%s)", dev, strerror(-st),
                      nb_result_message(res, 0));
        nb_results_free(res);
}

static void bw_clear_ok(nb_conn *c, const char *dev)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;

        ck_assert_int_eq(nb_batch_bandwidth_clear(b, dev), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "bandwidth clear %s: %s", dev,
                      nb_result_message(res, 0));
        nb_results_free(res);
}

/* The IFB an older helper made for h0 (none is made now). */
static const char *ifb_of_h0(void)
{
        static char name[16];

        snprintf(name, sizeof(name), "nbifb%s", tu_link_get("h0", "ifindex"));
        return name;
}

/* h0's policer (bw_nft.h): chain nbbwN of table netdev netbroker_bw. */
static const char *police_of_h0(void)
{
        static char name[16];

        snprintf(name, sizeof(name), "nbbw%s", tu_link_get("h0", "ifindex"));
        return name;
}

/* h0's chains, ours and an older helper's (nbifbN), with handles, so a
 * chain made again is another state; "no-chain" for each that is not
 * there. */
static char *nft_chain_of_h0(void)
{
        return tu_sh("nft -a list chain netdev netbroker_bw %s 2>/dev/null || echo no-chain; "
                     "nft -a list chain netdev netbroker_bw %s 2>/dev/null || echo no-chain",
                     police_of_h0(), ifb_of_h0());
}

/* Everything tc and nft say about the tc objects of h0 and of an IFB, and
 * its chains, without counters: equal strings mean the same state. */
static char *tc_state(void)
{
        const char *ifb = ifb_of_h0();
        char *tc = tu_sh("tc -j qdisc show dev h0; tc -j class show dev h0; "
                         "tc -j filter show dev h0 ingress; "
                         "if ip link show %s >/dev/null 2>&1; then tc -j qdisc show dev %s; "
                         "tc -j class show dev %s; else echo no-ifb; fi",
                         ifb, ifb, ifb);
        char *nft = nft_chain_of_h0(), *both;

        ck_assert_int_ge(asprintf(&both, "%s%s", tc, nft), 0);
        free(tc);
        free(nft);
        return both;
}

/* What enters h0 is policed at average kB/s by netbroker_bw's chain, on
 * h0's ingress after the firewall's chains; no tc redirect, no ingress
 * qdisc, no IFB, no older helper's chain is left. */
static void assert_policer(unsigned average)
{
        char *text = nft_chain_of_h0(), want[64];

        ck_assert_msg(strstr(text, "type filter hook ingress device \"h0\" priority 100;"),
                      "no policer chain on h0's ingress: %s", text);
        /* nft(8) writes whole MiB/s as mbytes. */
        if (average % 1024 == 0)
                snprintf(want, sizeof(want), "limit rate over %u mbytes/second", average / 1024);
        else
                snprintf(want, sizeof(want), "limit rate over %u kbytes/second", average);
        ck_assert_msg(strstr(text, want) && strstr(text, " drop"), "no '%s ... drop' in %s", want,
                      text);
        ck_assert_msg(!strstr(text, "fwd"), "an older helper's redirect is left: %s", text);
        free(text);
        text = tu_sh("tc qdisc show dev h0 ingress; ip -br link | grep '^nbifb' || true");
        ck_assert_msg(!strstr(text, "ingress") && !strstr(text, "nbifb"),
                      "an ingress qdisc or an IFB is left: %s", text);
        free(text);
}

/* A value from `tc -s -j KIND show dev DEV`, found by a Python expression
 * on the list `d` (e.g. "[q['kind'] for q in d]"): tests/py/tc_json.py. */
static char *tc_json(const char *what, const char *dev, const char *expr)
{
        return tu_sh("python3 '" TU_PY("tc_json.py") "' %s %s \"%s\"", what, dev, expr);
}

/* tc of Debian 12 prints classes as text only: "HANDLE AVG PEAK BURST"
 * per HTB class, in kB/s and kB, from `tc class show dev DEV`
 * (tests/py/tc_classes.py). */
static void assert_classes(const char *dev, const char *want)
{
        char *got = tu_sh("python3 '" TU_PY("tc_classes.py") "' %s", dev);

        got[strcspn(got, "\n")] = '\0';
        ck_assert_msg(strcmp(got, want) == 0, "tc class show dev %s: '%s', wanted '%s'", dev, got,
                      want);
        free(got);
}

static void assert_tc(const char *what, const char *dev, const char *expr, const char *want)
{
        char *got = tc_json(what, dev, expr);

        got[strcspn(got, "\n")] = '\0';
        ck_assert_msg(strcmp(got, want) == 0, "tc %s show dev %s: %s is '%s', wanted '%s'", what,
                      dev, expr, got, want);
        free(got);
}

static bool has_chain(const char *name)
{
        char *out = tu_sh("nft list chain netdev netbroker_bw %s >/dev/null 2>&1 && echo yes || "
                          "echo no",
                          name);
        bool yes = strncmp(out, "yes", 3) == 0;

        free(out);
        return yes;
}

/* ---- what tc shows ---- */

START_TEST(test_set_is_what_tc_shows_and_set_twice_is_the_same_state)
{
        nb_conn *c = setup();
        nb_rate in = {.size = sizeof(nb_rate), .average = 1024, .peak = 2048, .burst = 64};
        nb_rate out = {.size = sizeof(nb_rate), .average = 4096, .burst = 32};
        const char *in_mech = NULL, *out_mech = NULL, *setting = NULL;
        char *first, *second;
        nb_results *res;
        nb_batch *b;
        uint64_t n = 0;

        ck_assert_int_eq(bw_set(c, "h0", &in, &out, &res), 0);
        ck_assert_int_eq(nb_result_bandwidth(res, 0, &in_mech, &out_mech), 0);
        ck_assert_str_eq(in_mech, "htb");
        ck_assert_str_eq(out_mech, "nft-limit");
        nb_results_free(res);
        /* Inbound: htb 4e42: (the helper's mark) at the root, class 4e42:1
         * at average/peak/burst. */
        assert_tc("qdisc", "h0", "[q['kind'] for q in d if q.get('root')]", "['htb']");
        assert_tc("qdisc", "h0", "[q['handle'] for q in d if q.get('root')]", "['4e42:']");
        assert_classes("h0", "4e42:1 1024 2048 64");
        /* Outbound: an nft policer (after the firewall's chains; a tc
         * one would run before them), no IFB, no ingress qdisc. */
        assert_policer(4096);
        /* The same call again: the same state. */
        first = tc_state();
        bw_set_ok(c, "h0", &in, &out);
        second = tc_state();
        ck_assert_str_eq(first, second);
        /* A change of rate is a change of the class, in place. */
        in.average = 1500;
        bw_set_ok(c, "h0", &in, &out);
        assert_classes("h0", "4e42:1 1500 2048 64");
        /* Stats name the mechanisms and count the ops. */
        b = nb_batch_new();
        nb_batch_stats(b);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_stat_setting(res, 0, "bandwidth_outbound", &setting), 0);
        ck_assert_str_eq(setting, "nft-limit");
        ck_assert_int_eq(nb_result_stat_setting(res, 0, "bandwidth_inbound", &setting), 0);
        ck_assert_msg(strncmp(setting, "htb", 3) == 0, "inbound mechanism '%s'", setting);
        ck_assert_int_eq(nb_result_stat(res, 0, "ops_bandwidth", &n), 0);
        ck_assert_uint_eq(n, 3);
        nb_results_free(res);
        free(first);
        free(second);
        nb_close(c);
}
END_TEST

START_TEST(test_clear_leaves_the_interface_as_it_was)
{
        nb_conn *c = setup();
        nb_rate in = {.size = sizeof(nb_rate), .average = 1024, .burst = 64},
                out = {.size = sizeof(nb_rate), .average = 2048, .burst = 64};
        char *before, *after, *links_before, *links_after;

        before = tc_state();
        links_before = tu_link_names();
        bw_set_ok(c, "h0", &in, &out);
        ck_assert(has_chain(police_of_h0()));
        bw_clear_ok(c, "h0");
        after = tc_state();
        links_after = tu_link_names();
        ck_assert_str_eq(before, after);
        ck_assert_str_eq(links_before, links_after);
        ck_assert(!has_chain(police_of_h0()));
        /* Clear is idempotent, and a set without a direction clears it. */
        bw_clear_ok(c, "h0");
        bw_set_ok(c, "h0", &in, &out);
        bw_set_ok(c, "h0", &in, NULL);
        ck_assert(!has_chain(police_of_h0()));
        assert_tc("qdisc", "h0", "[q['kind'] for q in d if q['kind'] == 'ingress']", "[]");
        bw_set_ok(c, "h0", NULL, NULL);
        free(after);
        after = tc_state();
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        free(links_before);
        free(links_after);
        nb_close(c);
}
END_TEST

/* ---- refusals ---- */

static void assert_refused(nb_conn *c, const char *dev, const nb_rate *in, const nb_rate *out,
                           int status, const char *needle)
{
        nb_results *res;
        int st = bw_set(c, dev, in, out, &res);

        ck_assert_msg(st == status, "%s: status %d (%s), wanted %d", needle, st,
                      nb_result_message(res, 0), status);
        ck_assert_msg(strstr(nb_result_message(res, 0), needle), "message '%s' lacks '%s'",
                      nb_result_message(res, 0), needle);
        nb_results_free(res);
}

START_TEST(test_bad_input_is_refused_with_a_reason_and_changes_nothing)
{
        nb_conn *c = setup();
        nb_rate good = {.size = sizeof(nb_rate), .average = 1024, .burst = 64};
        nb_rate too_fast = {.size = sizeof(nb_rate), .average = 12207032, .burst = 64};
        nb_rate low_peak = {.size = sizeof(nb_rate), .average = 1024, .peak = 512, .burst = 64};
        nb_rate huge_burst = {.size = sizeof(nb_rate), .average = 1024, .burst = 1048577};
        nb_rate floor_out = {.size = sizeof(nb_rate), .average = 1024, .burst = 64, .floor = 100};
        nb_rate zero_avg = {.size = sizeof(nb_rate), .peak = 10};
        nb_results *res;
        nb_batch *b;
        char *before, *after;

        bw_set_ok(c, "h0", &good, &good);
        before = tc_state();
        assert_refused(c, "h0", &too_fast, NULL, -EINVAL, "above 100 Gbit/s");
        assert_refused(c, "h0", NULL, &too_fast, -EINVAL, "above 100 Gbit/s");
        assert_refused(c, "h0", &low_peak, NULL, -EINVAL, "below the average");
        assert_refused(c, "h0", &huge_burst, NULL, -EINVAL, "burst 1048577 kB is above");
        assert_refused(c, "h0", NULL, &floor_out, -EINVAL, "floor is for inbound");
        assert_refused(c, "nosuchdev", &good, NULL, -ENODEV, "no interface nosuchdev");
        /* The library refuses a rate without an average before sending. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "h0", &zero_avg, NULL), -EINVAL);
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "vnet%d", &good, NULL), -EINVAL);
        /* A good op before a bad one: the batch is refused as a whole. */
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "h0", &low_peak, &good), 0);
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "h0", &good, &low_peak), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), -EINVAL);
        ck_assert_int_eq(nb_result_status(res, 1), -ECANCELED);
        nb_results_free(res);
        b = nb_batch_new();
        low_peak.peak = 4096; /* good now */
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "h0", &low_peak, &good), 0);
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "nosuchdev", &good, NULL), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), -ECANCELED);
        ck_assert_int_eq(nb_result_status(res, 1), -ENODEV);
        nb_results_free(res);
        after = tc_state();
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        nb_close(c);
}
END_TEST

/* ---- only its own ---- */

/* dev's root qdisc as `tc -j qdisc show` has it: "KIND HANDLE". */
static char *root_of(const char *dev)
{
        char *got = tc_json("qdisc", dev,
                            "' '.join(q['kind'] + ' ' + q['handle'] for q in d "
                            "if q.get('root'))");

        got[strcspn(got, "\n")] = '\0';
        return got;
}

/* An administrator's htb 1: on h0: with a class 1:1, so that an old
 * reader that took any htb 1: for netbroker's would show a limit, and a
 * second class as default, so that it is not an older helper's tree
 * either (h0 is the helper's: those are its own, bw_old_tree.h). */
static void add_admin_htb(void)
{
        free(tu_sh("tc qdisc add dev h0 root handle 1: htb default 2 && "
                   "tc class add dev h0 parent 1: classid 1:1 htb rate 1mbit burst 16k && "
                   "tc class add dev h0 parent 1: classid 1:2 htb rate 2mbit burst 16k"));
}

/* The helper's tc objects carry its mark, the root handle 4e42:. An
 * administrator's htb 1: is not shown as the helper's, survives a clear,
 * and a set over it is refused with EBUSY and changes nothing; once it
 * is gone, the set makes the helper's own, which the clear removes. */
START_TEST(test_an_administrators_root_qdisc_is_neither_shown_nor_cleared_nor_replaced)
{
        nb_conn *c = setup();
        nb_rate in = {.size = sizeof(nb_rate), .average = 1024, .burst = 64},
                out = {.size = sizeof(nb_rate), .average = 2048, .burst = 64};
        nb_rate shown_in = NB_RATE_INIT, shown_out = NB_RATE_INIT;
        bool has_in = true, has_out = true;
        nb_results *res;
        nb_batch *b;
        char *before, *after, *root;

        add_admin_htb();
        root = root_of("h0");
        ck_assert_str_eq(root, "htb 1:");
        free(root);
        before = tc_state();
        /* Not shown as the helper's. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_bandwidth_show(b, "h0"), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_bandwidth_show(res, 0, &has_in, &shown_in, &has_out, &shown_out),
                         0);
        ck_assert_msg(!has_in, "an administrator's htb 1: shown as a limit of %u kB/s",
                      shown_in.average);
        ck_assert(!has_out);
        nb_results_free(res);
        /* Not deleted by a clear. */
        bw_clear_ok(c, "h0");
        after = tc_state();
        ck_assert_str_eq(before, after);
        free(after);
        /* Not replaced by a set, which changes nothing (not even the
         * other direction's policer). */
        assert_refused(c, "h0", &in, &out, -EBUSY, "is not netbroker's");
        after = tc_state();
        ck_assert_str_eq(before, after);
        ck_assert(!has_chain(police_of_h0()));
        free(after);
        /* Gone, the helper makes its own, and its clear removes it. */
        free(tu_sh("tc qdisc del dev h0 root"));
        bw_set_ok(c, "h0", &in, &out);
        root = root_of("h0");
        ck_assert_str_eq(root, "htb 4e42:");
        free(root);
        bw_clear_ok(c, "h0");
        root = root_of("h0");
        ck_assert_msg(!strstr(root, "4e42:"), "the helper's root qdisc stays: %s", root);
        free(root);
        free(before);
        nb_close(c);
}
END_TEST

/* ---- an older helper's tree, after an upgrade ---- */

/* The egress tree helpers before the mark made on dev, built with tc as
 * their bandwidth.c did (main before fe6cdb2): root htb 1: default 1;
 * class 1:1 at average, ceil peak, burst, quantum a tenth of the average
 * in 1600..200000; a leaf 2: of fq_codel, else sfq, else none (HTB's own
 * fifo). The cburst libnl computed (tc rounds its own) is no part of the
 * layout. Rates in kB/s of 1024 bytes, burst in kB. */
static void old_helper_tree(const char *dev, unsigned average, unsigned peak, unsigned burst)
{
        unsigned long long q = (unsigned long long)average * 1024 / 10;

        q = q < 1600 ? 1600 : q > 200000 ? 200000 : q;
        free(tu_sh("tc qdisc add dev %s root handle 1: htb default 1 && "
                   "tc class add dev %s parent 1: classid 1:1 htb rate %llubps ceil %llubps "
                   "burst %uk quantum %llu && "
                   "{ tc qdisc add dev %s parent 1:1 handle 2: fq_codel 2>/dev/null || "
                   "tc qdisc add dev %s parent 1:1 handle 2: sfq 2>/dev/null || true; }",
                   dev, dev, (unsigned long long)average * 1024, (unsigned long long)peak * 1024,
                   burst, q, dev, dev));
}

/* Everything tc says of dev's egress: its qdiscs, classes and the
 * filters of htb 1: and of class 1:1 (none there is "no-filter"). */
static char *egress_state(const char *dev)
{
        return tu_sh("tc -j qdisc show dev %s; tc class show dev %s; "
                     "tc -j filter show dev %s parent 1: 2>/dev/null || echo no-filter; "
                     "tc -j filter show dev %s parent 1:1 2>/dev/null || echo no-filter",
                     dev, dev, dev, dev);
}

/* BandwidthShow of dev's inbound (a tap's egress): has, rate, mechanism. */
static bool inbound_shown(nb_conn *c, const char *dev, nb_rate *ret, char *mech, size_t len)
{
        nb_rate out = NB_RATE_INIT;
        const char *in_mech = NULL, *out_mech = NULL;
        bool has_in = false, has_out = false;
        nb_results *res;
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_bandwidth_show(b, dev), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "bandwidth show %s: %s", dev,
                      nb_result_message(res, 0));
        ck_assert_int_eq(nb_result_bandwidth_show(res, 0, &has_in, ret, &has_out, &out), 0);
        ck_assert_int_eq(nb_result_bandwidth_show_mechanisms(res, 0, &in_mech, &out_mech), 0);
        snprintf(mech, len, "%s", in_mech);
        nb_results_free(res);
        return has_in;
}

/* A persistent tap the helper makes: it carries the helper's owner mark. */
static void helper_tap(nb_conn *c, const char *name)
{
        nb_tap_opts persist = {.size = sizeof(nb_tap_opts), .persist = true};
        nb_batch *b = nb_batch_new();
        nb_results *res;

        ck_assert_int_eq(nb_batch_tap_create(b, name, &persist), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "tap %s: %s", name, nb_result_message(res, 0));
        nb_results_free(res);
        ck_assert_str_eq(tu_link_get(name, "ifalias"), "netbroker:uid=0");
}

/* After an upgrade, the tree an older helper made on a tap the helper
 * made is the helper's own: shown (said to be an older helper's), replaced
 * by a set with the 4e42: tree, and deleted by a clear, which leaves the
 * tap as it was before any limit. */
START_TEST(test_an_older_helpers_tree_on_a_tap_it_made_is_adopted)
{
        nb_conn *c = setup();
        nb_rate in = {.size = sizeof(nb_rate), .average = 512, .peak = 1024, .burst = 32};
        nb_rate shown = NB_RATE_INIT;
        char mech[64], *pristine, *state, *root;

        helper_tap(c, "ot0");
        pristine = egress_state("ot0");
        old_helper_tree("ot0", 1024, 2048, 64);
        root = root_of("ot0");
        ck_assert_str_eq(root, "htb 1:");
        free(root);
        assert_classes("ot0", "1:1 1024 2048 64");
        /* Shown, and said to be an older helper's. */
        ck_assert_msg(inbound_shown(c, "ot0", &shown, mech, sizeof(mech)),
                      "an older helper's tree on a tap the helper made is not shown");
        ck_assert_uint_eq(shown.average, 1024);
        ck_assert_uint_eq(shown.peak, 2048);
        ck_assert_uint_eq(shown.burst, 64);
        ck_assert_msg(strncmp(mech, "htb", 3) == 0 && strstr(mech, "(older helper)"),
                      "mechanism '%s'", mech);
        /* A set replaces it: the 4e42: tree alone, nothing of 1: left. */
        bw_set_ok(c, "ot0", &in, NULL);
        root = root_of("ot0");
        ck_assert_str_eq(root, "htb 4e42:");
        free(root);
        assert_classes("ot0", "4e42:1 512 1024 32");
        assert_tc("qdisc", "ot0", "[q['handle'] for q in d if q['handle'] in ('1:', '2:')]", "[]");
        ck_assert(inbound_shown(c, "ot0", &shown, mech, sizeof(mech)));
        ck_assert_msg(!strstr(mech, "older"), "mechanism '%s' after a set", mech);
        /* A clear deletes the older helper's tree: the tap is as it was. */
        bw_clear_ok(c, "ot0");
        old_helper_tree("ot0", 1024, 2048, 64);
        bw_clear_ok(c, "ot0");
        state = egress_state("ot0");
        ck_assert_str_eq(state, pristine);
        ck_assert(!inbound_shown(c, "ot0", &shown, mech, sizeof(mech)));
        free(state);
        free(pristine);
        nb_close(c);
}
END_TEST

/* The same tree on a tap the helper did not make (no owner mark) is
 * someone else's: not shown, a set over it fails with EBUSY, a clear
 * leaves it; nothing of it changes. */
START_TEST(test_an_older_helpers_layout_on_a_device_it_did_not_make_is_left_alone)
{
        nb_conn *c = setup();
        nb_rate in = {.size = sizeof(nb_rate), .average = 512, .burst = 32};
        nb_rate shown = NB_RATE_INIT;
        char mech[64], *before, *after;

        free(tu_sh("ip tuntap add dev ft0 mode tap"));
        ck_assert_str_eq(tu_link_get("ft0", "ifalias"), TU_ABSENT);
        old_helper_tree("ft0", 1024, 2048, 64);
        before = egress_state("ft0");
        ck_assert_msg(!inbound_shown(c, "ft0", &shown, mech, sizeof(mech)),
                      "shown as the helper's: %u kB/s (%s)", shown.average, mech);
        assert_refused(c, "ft0", &in, NULL, -EBUSY, "is not netbroker's");
        after = egress_state("ft0");
        ck_assert_str_eq(before, after);
        free(after);
        bw_clear_ok(c, "ft0");
        after = egress_state("ft0");
        ck_assert_str_eq(before, after);
        free(after);
        free(before);
        nb_close(c);
}
END_TEST

/* On a tap the helper made, a tree that is not exactly an older helper's
 * is someone else's: another default class, a second class, a filter, a
 * leaf the older helper never made. Each is not shown, survives a clear,
 * and a set over it fails with EBUSY. */
START_TEST(test_another_tree_on_a_tap_it_made_is_left_alone)
{
        static const char *const extra[] = {
                /* HTB's options cannot change: the tree again, default 2. */
                "tc qdisc del dev ot0 root && tc qdisc add dev ot0 root handle 1: htb default 2 && "
                "tc class add dev ot0 parent 1: classid 1:1 htb rate 8mbit",
                "tc class add dev ot0 parent 1: classid 1:2 htb rate 1mbit",
                "tc filter add dev ot0 parent 1: protocol all prio 1 u32 match u32 0 0 flowid 1:1",
                "tc filter add dev ot0 parent 1:1 protocol all prio 1 u32 match u32 0 0",
                "tc qdisc replace dev ot0 parent 1:1 handle 3: pfifo",
        };
        nb_conn *c = setup();
        nb_rate in = {.size = sizeof(nb_rate), .average = 512, .burst = 32};
        nb_rate shown = NB_RATE_INIT;
        char mech[64], *before, *after;

        helper_tap(c, "ot0");
        for (size_t i = 0; i < sizeof(extra) / sizeof(*extra); i++) {
                free(tu_sh("tc qdisc del dev ot0 root 2>/dev/null; true"));
                old_helper_tree("ot0", 1024, 2048, 64);
                free(tu_sh("%s", extra[i]));
                before = egress_state("ot0");
                ck_assert_msg(!inbound_shown(c, "ot0", &shown, mech, sizeof(mech)),
                              "after '%s': shown as the helper's (%s)", extra[i], mech);
                bw_clear_ok(c, "ot0");
                after = egress_state("ot0");
                ck_assert_msg(strcmp(before, after) == 0, "after '%s', a clear changed:\n%s\n%s",
                              extra[i], before, after);
                free(after);
                assert_refused(c, "ot0", &in, NULL, -EBUSY, "is not netbroker's");
                after = egress_state("ot0");
                ck_assert_msg(strcmp(before, after) == 0, "after '%s', a set changed:\n%s\n%s",
                              extra[i], before, after);
                free(after);
                free(before);
        }
        nb_close(c);
}
END_TEST

/* BandwidthClear of an interface that went away with its guest is a
 * success that says so, alone and in a batch whose other ops run; the
 * policer chain that hooked its name is gone (since Linux 6.16 it would
 * limit the next device of that name). */
START_TEST(test_clear_of_an_interface_already_gone_succeeds_and_says_so)
{
        nb_conn *c = setup();
        nb_rate r = {.size = sizeof(nb_rate), .average = 1024, .burst = 64};
        char police[16];
        nb_results *res;
        nb_batch *b;

        bw_set_ok(c, "h0", &r, &r);
        snprintf(police, sizeof(police), "%s", police_of_h0());
        ck_assert(has_chain(police));
        free(tu_sh("ip link del h0"));
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_bandwidth_clear(b, "h0"), 0);
        ck_assert_int_eq(nb_batch_bandwidth_clear(b, "nosuchdev"), 0);
        ck_assert_int_eq(nb_batch_veth_create(b, "h1", "g1", -1), 0);
        res = tu_submit(c, b);
        for (size_t i = 0; i < 3; i++)
                ck_assert_msg(nb_result_status(res, i) == 0, "op %zu: %s (%s)", i,
                              strerror(-nb_result_status(res, i)), nb_result_message(res, i));
        ck_assert_msg(strstr(nb_result_message(res, 0), "already gone"),
                      "bandwidth clear of h0 says '%s'", nb_result_message(res, 0));
        ck_assert_msg(strstr(nb_result_message(res, 1), "already gone"),
                      "bandwidth clear of nosuchdev says '%s'", nb_result_message(res, 1));
        nb_results_free(res);
        ck_assert(!has_chain(police));
        nb_close(c);
}
END_TEST

/* Where nftables will not take the limit rule the policer needs, a limit
 * on what enters an interface (a tap's outbound, a macvtap's inbound) is
 * refused, with the reason: a tc police or redirect instead would run
 * before the guest's filter. The probe is made to fail by a table of its
 * name that another socket owns (flags owner: only that socket may touch
 * it), held by an nft(8) until the helper has started. */
START_TEST(test_without_nft_limit_a_limit_on_what_enters_is_refused)
{
        nb_conn *c;
        nb_rate r = {.size = sizeof(nb_rate), .average = 1024};
        const char *setting = NULL;
        nb_results *res;
        nb_batch *b;
        char *tables;

        tu_private_netns();
        free(tu_sh("{ echo 'add table netdev netbroker_bw_probe { flags owner; }'; sleep 5; } | "
                   "nft -i >/dev/null 2>&1 &\n"
                   "for i in $(seq 100); do nft list tables | grep -q netbroker_bw_probe && "
                   "break; sleep 0.05; done"));
        c = tu_spawn(TU_ALLOW);
        b = nb_batch_new();
        nb_batch_ping(b);
        nb_results_free(tu_submit(c, b));
        free(tu_sh("ip link add h0 type veth peer name g0 && ip link set h0 up && "
                   "ip link set g0 up && "
                   "ip link add mv0 link h0 address 52:54:00:00:00:09 type macvtap mode bridge"));
        assert_refused(c, "h0", NULL, &r, -EOPNOTSUPP, "outbound limits are not available");
        assert_refused(c, "h0", NULL, &r, -EOPNOTSUPP, "refused a probe of its limit");
        assert_refused(c, "mv0", &r, NULL, -EOPNOTSUPP, "a macvtap's inbound limits are not");
        /* Nothing of it was made; the other way still works. */
        ck_assert(!tu_link_exists(ifb_of_h0()));
        ck_assert(!has_chain(police_of_h0()));
        bw_set_ok(c, "h0", &r, NULL);
        bw_set_ok(c, "mv0", NULL, &r);
        assert_classes("h0", "4e42:1 1024 1024 10");
        assert_classes("mv0", "4e42:1 1024 1024 10");
        tables = tu_sh("nft list tables");
        ck_assert_msg(!strstr(tables, "netbroker_bw\n"), "%s", tables);
        free(tables);
        b = nb_batch_new();
        nb_batch_stats(b);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_stat_setting(res, 0, "bandwidth_outbound", &setting), 0);
        ck_assert_msg(strncmp(setting, "none: nftables refused a probe of its limit",
                              strlen("none: nftables refused a probe of its limit")) == 0,
                      "%s", setting);
        nb_results_free(res);
        nb_close(c);
}
END_TEST

START_TEST(test_set_is_undone_when_a_later_op_of_the_batch_fails)
{
        nb_conn *c = setup();
        nb_rate first = {.size = sizeof(nb_rate), .average = 1024, .burst = 64},
                second = {.size = sizeof(nb_rate), .average = 8192, .burst = 64};
        const char *const argv[] = {"/bin/false", NULL};
        char *before, *after;
        nb_results *res;
        nb_batch *b = nb_batch_new();

        bw_set_ok(c, "h0", &first, NULL);
        before = tc_state();
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "h0", &second, &second), 0);
        ck_assert_int_eq(nb_batch_exec(b, "/bin/false", argv, NULL, NULL, 0, 0), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), -ECANCELED);
        ck_assert_int_ne(nb_result_status(res, 1), 0);
        nb_results_free(res);
        after = tc_state();
        ck_assert_str_eq(before, after);
        ck_assert(!tu_link_exists(ifb_of_h0()));
        ck_assert(!has_chain(police_of_h0()));
        free(before);
        free(after);
        nb_close(c);
}
END_TEST

/* The burst a BandwidthShow of h0 gives outbound. */
static unsigned out_burst_shown(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_rate in = NB_RATE_INIT, out = NB_RATE_INIT;
        bool has_in, has_out;
        nb_results *res;
        unsigned burst;

        ck_assert_int_eq(nb_batch_bandwidth_show(b, "h0"), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_bandwidth_show(res, 0, &has_in, &in, &has_out, &out), 0);
        ck_assert(has_out);
        burst = out.burst;
        nb_results_free(res);
        return burst;
}

START_TEST(test_without_a_burst_htb_gets_10_ms_of_the_average)
{
        nb_conn *c = setup();
        /* libvirt's burst is optional: 8192 kB/s for 10 ms is 82 kB. The
         * policer gets libvirt's one second of the average, but never
         * less than 64 kB (a GSO frame must fit); a burst beyond one
         * second is added to it (nft's limit holds one second of its
         * rate plus its burst). */
        nb_rate in = {.size = sizeof(nb_rate), .average = 8192},
                out = {.size = sizeof(nb_rate), .average = 100};
        nb_rate small = {.size = sizeof(nb_rate), .average = 10},
                big = {.size = sizeof(nb_rate), .average = 100, .burst = 300};
        char *first, *second;

        bw_set_ok(c, "h0", &in, &small);
        assert_policer(10);
        ck_assert_uint_eq(out_burst_shown(c), 64);
        bw_set_ok(c, "h0", &in, &big);
        assert_policer(100);
        ck_assert_uint_eq(out_burst_shown(c), 300);
        bw_set_ok(c, "h0", &in, &out);
        assert_classes("h0", "4e42:1 8192 8192 82");
        assert_policer(100);
        ck_assert_uint_eq(out_burst_shown(c), 100);
        first = tc_state();
        bw_set_ok(c, "h0", &in, &out);
        second = tc_state();
        ck_assert_str_eq(first, second);
        free(first);
        free(second);
        nb_close(c);
}
END_TEST

/* Wait up to 2 s for dev to go (the helper removes IFBs from its loop). */
static bool gone_soon(const char *dev)
{
        for (int i = 0; i < 200; i++) {
                if (!tu_link_exists(dev))
                        return true;
                usleep(10000);
        }
        return false;
}

/* The same for a chain of netbroker_bw. */
static bool chain_gone_soon(const char *name)
{
        for (int i = 0; i < 200; i++) {
                if (!has_chain(name))
                        return true;
                usleep(10000);
        }
        return false;
}

/* An older helper's state for dev (ifindex-named IFB, marked, with its
 * htb at rate kB/s (of 1024 bytes, as netbroker's), and its fwd chain after the firewall's). */
static void old_helper_ifb(const char *dev, unsigned rate)
{
        const char *ix = tu_link_get(dev, "ifindex");

        free(tu_sh("ip link add nbifb%s type ifb && ip link set nbifb%s alias netbroker:ifb up && "
                   "tc qdisc add dev nbifb%s root handle 1: htb default 1 && "
                   "tc class add dev nbifb%s parent 1: classid 1:1 htb rate %ubps burst 64k && "
                   "nft add table netdev netbroker_bw && "
                   "nft add chain netdev netbroker_bw nbifb%s "
                   "'{ type filter hook ingress device \"%s\" priority 100; }' && "
                   "nft add rule netdev netbroker_bw nbifb%s fwd to nbifb%s",
                   ix, ix, ix, ix, rate * 1024, ix, dev, ix, ix));
}

START_TEST(test_the_policer_goes_with_its_interface)
{
        nb_conn *c = setup();
        nb_rate r = {.size = sizeof(nb_rate), .average = 1024};
        nb_batch *b = nb_batch_new();
        nb_results *res;
        char chain[16], lo_ifb[16], lo_chain[16], other[16], old[16];

        /* Deleted through the helper. */
        bw_set_ok(c, "h0", NULL, &r);
        snprintf(chain, sizeof(chain), "%s", police_of_h0());
        ck_assert(has_chain(chain));
        ck_assert_int_eq(nb_batch_link_delete(b, "h0"), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "delete h0: %s", nb_result_message(res, 0));
        nb_results_free(res);
        /* Gone by the reply: since Linux 6.16 the chain would outlive h0
         * and hook the next device of its name. */
        ck_assert_msg(!has_chain(chain), "the policer chain %s outlived h0", chain);
        /* Deleted behind the helper's back (a guest's tap closes). */
        free(tu_sh("ip link add h1 type veth peer name g1"));
        bw_set_ok(c, "h1", NULL, &r);
        snprintf(other, sizeof(other), "nbbw%s", tu_link_get("h1", "ifindex"));
        ck_assert(has_chain(other));
        free(tu_sh("ip link del h1"));
        ck_assert_msg(chain_gone_soon(other), "the policer chain %s outlived h1", other);
        /* An older helper's IFB and fwd chain go with their interface too. */
        free(tu_sh("ip link add h3 type veth peer name g3"));
        old_helper_ifb("h3", 1024);
        snprintf(old, sizeof(old), "nbifb%s", tu_link_get("h3", "ifindex"));
        free(tu_sh("ip link del h3"));
        ck_assert_msg(gone_soon(old), "an older helper's %s outlived h3", old);
        ck_assert_msg(chain_gone_soon(old), "an older helper's chain %s outlived h3", old);
        /* Left while no helper ran: the next one removes it at start-up.
         * IFBs as an older helper made them, with its mark (the sweep
         * deletes nothing else: tests/test_policy.c): one orphaned, one
         * doomed, and lo's, whose interface is there but which no helper
         * makes any more. */
        nb_close(c);
        snprintf(lo_ifb, sizeof(lo_ifb), "nbifb%s", tu_link_get("lo", "ifindex"));
        snprintf(lo_chain, sizeof(lo_chain), "nbbw%s", tu_link_get("lo", "ifindex"));
        free(tu_sh("ip link add nbifb999999 type ifb && ip link add %s type ifb && "
                   "ip link add nbifbx type ifb && ip link set nbifbx group %u && "
                   "for d in nbifb999999 %s nbifbx; do ip link set $d alias netbroker:ifb; done",
                   lo_ifb, 0x4e424446u, lo_ifb));
        /* Chains too: one whose interface is gone, one on an ifindex that
         * is now another device's (h2 is not h9), an older helper's on lo,
         * and ours on lo, which stays. */
        free(tu_sh("ip link add h2 type veth peer name g2"));
        snprintf(other, sizeof(other), "nbbw%s", tu_link_get("h2", "ifindex"));
        free(tu_sh("nft add table netdev netbroker_bw && for c in 'nbbw999999 gone0' '%s h9' "
                   "'%s lo' '%s lo'; do set -- $c; nft add chain netdev netbroker_bw $1 "
                   "\"{ type filter hook ingress device \\\"$2\\\" priority 100; }\"; done",
                   other, lo_ifb, lo_chain));
        ck_assert(has_chain("nbbw999999") && has_chain(other) && has_chain(lo_ifb) &&
                  has_chain(lo_chain));
        c = tu_spawn(TU_ALLOW);
        b = nb_batch_new();
        nb_batch_ping(b);
        nb_results_free(tu_submit(c, b));
        ck_assert_msg(!tu_link_exists("nbifb999999"), "an orphaned IFB survived a start-up");
        ck_assert_msg(!tu_link_exists("nbifbx"), "a doomed IFB survived a start-up");
        ck_assert_msg(!tu_link_exists(lo_ifb), "an older helper's %s survived a start-up", lo_ifb);
        ck_assert_msg(!has_chain("nbbw999999"), "an orphaned chain survived a start-up");
        ck_assert_msg(!has_chain(other), "a chain hooking h9 survived though h2 has its ifindex");
        ck_assert_msg(!has_chain(lo_ifb), "an older helper's chain %s survived", lo_ifb);
        ck_assert_msg(has_chain(lo_chain), "chain %s was removed though lo exists", lo_chain);
        nb_close(c);
}
END_TEST

/* Interfaces going cost no kernel lookup of an IFB when the helper's name
 * map has no device of that IFB's name: such a lookup, on the loop, waits
 * for the RTNL lock that the links' lane holds while it deletes a batch's
 * devices (seconds at thousands of guests). An older helper's IFB is still
 * found, and goes. The policer chain of h1, deleted last, says when the
 * helper has seen them all go. */
START_TEST(test_a_gone_interface_is_looked_up_for_an_ifb_only_when_one_is_there)
{
        nb_conn *c = setup();
        nb_rate r = {.size = sizeof(nb_rate), .average = 1024};
        char chain[16], old[16];
        uint64_t n0;

        free(tu_sh("for i in $(seq 0 19); do ip tuntap add nbq$i mode tap; done; "
                   "ip link add h1 type veth peer name g1"));
        bw_set_ok(c, "h1", NULL, &r);
        snprintf(chain, sizeof(chain), "nbbw%s", tu_link_get("h1", "ifindex"));
        n0 = tu_stat(c, "bw_ifb_lookups");
        free(tu_sh("for i in $(seq 0 19); do ip link del nbq$i; done; ip link del h1"));
        ck_assert_msg(chain_gone_soon(chain), "the policer chain %s outlived h1", chain);
        ck_assert_msg(tu_stat(c, "bw_ifb_lookups") == n0,
                      "%" PRIu64 " IFB lookups for 22 interfaces gone without one",
                      tu_stat(c, "bw_ifb_lookups") - n0);
        free(tu_sh("ip link add h3 type veth peer name g3"));
        old_helper_ifb("h3", 1024);
        snprintf(old, sizeof(old), "nbifb%s", tu_link_get("h3", "ifindex"));
        free(tu_sh("ip link del h3"));
        ck_assert_msg(gone_soon(old), "an older helper's %s outlived h3", old);
        ck_assert_uint_ge(tu_stat(c, "bw_ifb_lookups"), n0 + 1);
        nb_close(c);
}
END_TEST

static const char *out_mech_shown(nb_conn *c, char *buf, size_t len)
{
        nb_batch *b = nb_batch_new();
        const char *in_mech, *out_mech;
        nb_results *res;

        ck_assert_int_eq(nb_batch_bandwidth_show(b, "h0"), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_bandwidth_show_mechanisms(res, 0, &in_mech, &out_mech), 0);
        snprintf(buf, len, "%s", out_mech);
        nb_results_free(res);
        return buf;
}

/* A restarted helper keeps the policer a set made (a set again writes
 * nothing: the same handles). What an older helper left goes: a tc
 * redirect to an IFB (before the firewall's chains) with the next set;
 * an nft fwd to an IFB (whose frames skip other ports' egress chains)
 * with the next clear, and at start-up, where its limit becomes a
 * policer of the IFB's rate. */
START_TEST(test_a_restarted_helper_keeps_the_policer_and_replaces_an_older_helpers)
{
        nb_conn *c = setup();
        nb_rate r = {.size = sizeof(nb_rate), .average = 2048, .burst = 64};
        char *first, *second, mech[64];
        nb_batch *b;

        bw_set_ok(c, "h0", NULL, &r);
        first = tc_state();
        nb_close(c);
        c = tu_spawn(TU_ALLOW);
        b = nb_batch_new();
        nb_batch_ping(b);
        nb_results_free(tu_submit(c, b));
        second = tc_state();
        ck_assert_str_eq(first, second);
        free(second);
        bw_set_ok(c, "h0", NULL, &r);
        second = tc_state();
        ck_assert_str_eq(first, second);
        ck_assert_str_eq(out_mech_shown(c, mech, sizeof(mech)), "nft-limit");
        free(first);
        free(second);
        bw_clear_ok(c, "h0");
        /* A tc redirect of a helper from before: replaced by a set. */
        free(tu_sh("ip link add %s type ifb && ip link set %s alias netbroker:ifb up && "
                   "tc qdisc add dev %s root handle 1: htb default 1 && "
                   "tc class add dev %s parent 1: classid 1:1 htb rate 2048kbps burst 64k && "
                   "tc qdisc add dev h0 ingress && tc filter add dev h0 parent ffff: prio %d "
                   "protocol all u32 match u32 0 0 action mirred egress redirect dev %s",
                   ifb_of_h0(), ifb_of_h0(), ifb_of_h0(), ifb_of_h0(), 0x4e42, ifb_of_h0()));
        ck_assert_str_eq(out_mech_shown(c, mech, sizeof(mech)), "tc-mirred+ifb+htb");
        bw_set_ok(c, "h0", NULL, &r);
        assert_policer(2048);
        ck_assert_str_eq(out_mech_shown(c, mech, sizeof(mech)), "nft-limit");
        bw_clear_ok(c, "h0");
        /* An nft fwd to an IFB: gone with a clear, */
        old_helper_ifb("h0", 2048);
        ck_assert_str_eq(out_mech_shown(c, mech, sizeof(mech)), "ifb+htb");
        bw_clear_ok(c, "h0");
        first = tc_state();
        ck_assert_msg(strstr(first, "no-ifb") && !strstr(first, "fwd"), "%s", first);
        free(first);
        /* replaced by a set, */
        old_helper_ifb("h0", 2048);
        bw_set_ok(c, "h0", NULL, &r);
        assert_policer(2048);
        bw_clear_ok(c, "h0");
        /* and at start-up its limit becomes a policer. */
        old_helper_ifb("h0", 3072);
        nb_close(c);
        c = tu_spawn(TU_ALLOW);
        b = nb_batch_new();
        nb_batch_ping(b);
        nb_results_free(tu_submit(c, b));
        assert_policer(3072);
        ck_assert_str_eq(out_mech_shown(c, mech, sizeof(mech)), "nft-limit");
        nb_close(c);
}
END_TEST

/* The IFBs an older helper left go, with a batch of clears, in one request
 * at the end of the batch (a device deletion waits for RCU: 16-24 ms each
 * here), before the reply; a set makes none. */
START_TEST(test_clears_in_a_batch_delete_older_ifbs_together)
{
        enum { N = 20 };
        nb_conn *c = setup();
        nb_rate r = {.size = sizeof(nb_rate), .average = 8192};
        char name[16], *left;
        nb_results *res;
        nb_batch *b = nb_batch_new();
        uint64_t t0;

        free(tu_sh("for i in $(seq 0 %d); do ip link add b$i type veth peer name p$i; done",
                   N - 1));
        for (int i = 0; i < N; i++) {
                snprintf(name, sizeof(name), "b%d", i);
                old_helper_ifb(name, 8192);
        }
        left = tu_sh("ip -br link | grep -c '^nbifb' || true");
        ck_assert_int_eq(atoi(left), N);
        free(left);
        for (int i = 0; i < N; i++) {
                snprintf(name, sizeof(name), "b%d", i);
                ck_assert_int_eq(nb_batch_bandwidth_clear(b, name), 0);
        }
        t0 = tu_now_us();
        res = tu_submit(c, b);
        printf("bandwidth: %d clears with their older IFBs in one batch: %.1f ms\n", N,
               (double)(tu_now_us() - t0) / 1000);
        ck_assert_int_eq(nb_results_first_error(res), -1);
        nb_results_free(res);
        /* Gone when the reply came, not later; chains too. */
        left = tu_sh("ip -br link | grep -c '^nbifb' || true; "
                     "nft list table netdev netbroker_bw | grep -c chain || true");
        ck_assert_msg(strcmp(left, "0\n0\n") == 0,
                      "IFBs and chains left after the clears' reply: %s", left);
        free(left);
        /* Sets on all of them: policers, no IFB. */
        b = nb_batch_new();
        for (int i = 0; i < N; i++) {
                snprintf(name, sizeof(name), "b%d", i);
                ck_assert_int_eq(nb_batch_bandwidth_set(b, name, NULL, &r), 0);
        }
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_results_first_error(res), -1);
        nb_results_free(res);
        left = tu_sh(
                "ip -br link | grep -c '^nbifb' || true; "
                "nft list table netdev netbroker_bw | grep -c 'limit rate over 8 mbytes/second' "
                "|| true");
        ck_assert_msg(strcmp(left, "0\n20\n") == 0, "after %d sets: %s", N, left);
        free(left);
        /* An IFB marked by its group alone (its helper was killed between
         * the create and the alias) still goes with a clear: dooming it
         * writes the alias, or the flush would see a stranger's device in
         * the doomed group and leave it (the crash stress test met this). */
        old_helper_ifb("h0", 8192);
        free(tu_sh("ip link set %s alias '' && ip link set %s group %u", ifb_of_h0(), ifb_of_h0(),
                   0x4e424649u));
        ck_assert_str_eq(tu_link_get(ifb_of_h0(), "ifalias"), TU_ABSENT);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_bandwidth_clear(b, "h0"), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_results_first_error(res), -1);
        nb_results_free(res);
        ck_assert_msg(!tu_link_exists(ifb_of_h0()), "%s outlived its clear", ifb_of_h0());
        nb_close(c);
}
END_TEST

/* ---- conformance: the seed's table ---- */

/* iperf3 TCP for 3 s after 2 s of warm-up, from here to the guest
 * (reverse: from the guest to here); bits/s as the receiver counted them.
 * The server runs in the guest namespace, bound to its address, once, and
 * under timeout(1) so it cannot outlive a failed test for long. */
static double iperf(bool from_guest)
{
        char *out =
                tu_sh("nsenter --net=%s timeout 30 iperf3 -s -1 -B " GUEST_IP " >/dev/null 2>&1 &\n"
                      "for i in $(seq 100); do nsenter --net=%s ss -ltn | grep -q '" GUEST_IP
                      ":5201' && break; sleep 0.05; done\n"
                      "iperf3 -c " GUEST_IP " -B " HOST_IP
                      " -t 3 -O 2 %s -J | python3 '" TU_PY("iperf_bps.py") "'\n"
                                                                           "wait",
                      guest_ns, guest_ns, from_guest ? "-R" : "");
        double bps = atof(out);

        free(out);
        return bps;
}

/* A limited measurement within 15% of want: re-measured up to twice when it
 * falls short, because a CI machine that starves iperf3 of CPU can only
 * lower a throughput, never raise it; one over the bound fails at once (the
 * limiter let through too much). Returns the best measurement taken. */
static double iperf_within(bool from_guest, double want, int *tries)
{
        double best = iperf(from_guest);

        *tries = 1;
        while (best < want * 0.85 && *tries < 3) {
                double again = iperf(from_guest);

                ++*tries;
                if (again > best)
                        best = again;
        }
        return best;
}

START_TEST(test_measured_tcp_throughput_is_within_15_percent_of_the_average_both_ways)
{
        static const unsigned averages[] = {1024, 2048, 4096, 8192, 16384, 32768, 65536};
        double in_bps[7], out_bps[7], free_in, free_out;
        int in_tries[7], out_tries[7];
        char failures[1024] = "";
        nb_conn *c = setup();

        free_in = iperf(false);
        free_out = iperf(true);
        for (size_t i = 0; i < 7; i++) {
                double want = (double)averages[i] * 1024 * 8;
                /* A burst of 1/8 s at the rate, at least 64 kB. */
                nb_rate r = {.size = sizeof(nb_rate),
                             .average = averages[i],
                             .burst = averages[i] / 8 > 64 ? averages[i] / 8 : 64};
                bw_set_ok(c, "h0", &r, &r);
                in_bps[i] = iperf_within(false, want, &in_tries[i]);
                out_bps[i] = iperf_within(true, want, &out_tries[i]);
        }
        bw_clear_ok(c, "h0");
        printf("\naverage rate [kB/s]   : to guest (inbound) [Mbit/s] : from guest (outbound) "
               "[Mbit/s]\n"
               "====================================================================="
               "==========\n");
        for (size_t i = 0; i < 7; i++) {
                double want = (double)averages[i] * 1024 * 8;

                printf("%-5u (%3.0f Mbit/s)     : %8.2f (%+5.1f%%) x%d          : %8.2f "
                       "(%+5.1f%%) x%d\n",
                       averages[i], want / 1e6, in_bps[i] / 1e6, (in_bps[i] / want - 1) * 100,
                       in_tries[i], out_bps[i] / 1e6, (out_bps[i] / want - 1) * 100, out_tries[i]);
                if (in_bps[i] < want * 0.85 || in_bps[i] > want * 1.15)
                        snprintf(failures + strlen(failures), sizeof(failures) - strlen(failures),
                                 " in@%u", averages[i]);
                if (out_bps[i] < want * 0.85 || out_bps[i] > want * 1.15)
                        snprintf(failures + strlen(failures), sizeof(failures) - strlen(failures),
                                 " out@%u", averages[i]);
        }
        printf("unlimited             : %8.2f                     : %8.2f\n"
               "(xN: measurements taken; one short of the bound is taken again, at most 3 in "
               "all)\n",
               free_in / 1e6, free_out / 1e6);
        fflush(stdout);
        ck_assert_msg(!failures[0], "outside 15%% of the average:%s", failures);
        nb_close(c);
}
END_TEST

/* ---- the acks of a batch (no kernel) ---- */

/* Append to buf at *len an ack (error 0) or error of seq for portid. */
static void put_ack(char *buf, size_t *len, uint32_t portid, uint32_t seq, int error)
{
        struct nlmsghdr *h = (struct nlmsghdr *)(buf + *len);
        struct nlmsgerr *e = NLMSG_DATA(h);

        memset(h, 0, NLMSG_SPACE(sizeof(*e)));
        h->nlmsg_len = NLMSG_LENGTH(sizeof(*e));
        h->nlmsg_type = NLMSG_ERROR;
        h->nlmsg_seq = seq;
        h->nlmsg_pid = portid;
        e->error = error;
        e->msg.nlmsg_seq = seq;
        *len += NLMSG_SPACE(sizeof(*e));
}

/* A batch of messages 11..13 (begin 10, end 14) from port 77: answers for
 * another port or outside the batch are not counted, so one missing is
 * seen (got < 3) rather than read as success; the first error is kept with
 * its sequence number; an error for the begin fails the batch whole. */
START_TEST(test_acks_are_counted_by_port_and_sequence_number)
{
        char buf[1024];
        size_t len = 0;
        struct nbd_bw_nft_acks a = {.portid = 77, .first = 11, .end = 14};

        put_ack(buf, &len, 77, 11, 0);
        put_ack(buf, &len, 78, 12, 0); /* another socket's */
        put_ack(buf, &len, 77, 9, 0); /* an earlier batch's */
        put_ack(buf, &len, 77, 14, 0); /* the end message asked for none */
        put_ack(buf, &len, 77, 12, -ENOENT);
        ck_assert_int_eq(nbd_bw_nft_take_acks(&a, buf, len), 0);
        ck_assert_uint_eq(a.got, 2);
        ck_assert_int_eq(a.err, -ENOENT);
        ck_assert_uint_eq(a.err_seq, 12);
        /* The last answer, in another datagram: a later error does not
         * replace the first. */
        len = 0;
        put_ack(buf, &len, 77, 13, -EEXIST);
        ck_assert_int_eq(nbd_bw_nft_take_acks(&a, buf, len), 0);
        ck_assert_uint_eq(a.got, 3);
        ck_assert_int_eq(a.err, -ENOENT);
        ck_assert_uint_eq(a.err_seq, 12);
        /* A batch refused whole. */
        a = (struct nbd_bw_nft_acks){.portid = 77, .first = 11, .end = 14};
        len = 0;
        put_ack(buf, &len, 77, 10, -EINVAL);
        ck_assert_int_eq(nbd_bw_nft_take_acks(&a, buf, len), -EINVAL);
        ck_assert_uint_eq(a.got, 0);
        /* A truncated message is no answer. */
        a = (struct nbd_bw_nft_acks){.portid = 77, .first = 11, .end = 14};
        len = 0;
        put_ack(buf, &len, 77, 11, -EPERM);
        ck_assert_int_eq(nbd_bw_nft_take_acks(&a, buf, NLMSG_HDRLEN + 4), 0);
        ck_assert_uint_eq(a.got, 0);
        ck_assert_int_eq(a.err, 0);
}
END_TEST

Suite *bandwidth_suite(void)
{
        Suite *s = suite_create("bandwidth");
        TCase *ops = tcase_create("bandwidth-ops"), *rate = tcase_create("bandwidth-rate");
        TCase *acks = tcase_create("bandwidth-acks");
        TCase *upgrade = tcase_create("bandwidth-upgrade");

        tcase_set_timeout(ops, 60);
        tcase_set_timeout(rate, 180);
        tcase_set_tags(rate, "rate"); /* test.sh: not in the sanitized run */
        tcase_add_test(ops, test_set_is_what_tc_shows_and_set_twice_is_the_same_state);
        tcase_add_test(ops, test_clear_leaves_the_interface_as_it_was);
        tcase_add_test(ops, test_bad_input_is_refused_with_a_reason_and_changes_nothing);
        tcase_add_test(ops,
                       test_an_administrators_root_qdisc_is_neither_shown_nor_cleared_nor_replaced);
        tcase_add_test(ops, test_clear_of_an_interface_already_gone_succeeds_and_says_so);
        tcase_add_test(ops, test_set_is_undone_when_a_later_op_of_the_batch_fails);
        tcase_add_test(ops, test_without_nft_limit_a_limit_on_what_enters_is_refused);
        tcase_add_test(ops, test_without_a_burst_htb_gets_10_ms_of_the_average);
        tcase_add_test(ops, test_the_policer_goes_with_its_interface);
        tcase_add_test(ops, test_a_gone_interface_is_looked_up_for_an_ifb_only_when_one_is_there);
        tcase_add_test(ops, test_clears_in_a_batch_delete_older_ifbs_together);
        tcase_add_test(ops,
                       test_a_restarted_helper_keeps_the_policer_and_replaces_an_older_helpers);
        tcase_set_timeout(upgrade, 60);
        tcase_add_test(upgrade, test_an_older_helpers_tree_on_a_tap_it_made_is_adopted);
        tcase_add_test(upgrade,
                       test_an_older_helpers_layout_on_a_device_it_did_not_make_is_left_alone);
        tcase_add_test(upgrade, test_another_tree_on_a_tap_it_made_is_left_alone);
        tcase_add_test(rate,
                       test_measured_tcp_throughput_is_within_15_percent_of_the_average_both_ways);
        tcase_add_test(acks, test_acks_are_counted_by_port_and_sequence_number);
        suite_add_tcase(s, acks);
        suite_add_tcase(s, ops);
        suite_add_tcase(s, upgrade);
        suite_add_tcase(s, rate);
        return s;
}
