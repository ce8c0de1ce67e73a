// SPDX-License-Identifier: LGPL-2.1-or-later
/* LinkList and BandwidthShow against the real kernel: what the helper reads
 * back is what `ip -d -j link` and `tc` show, and a caller of another uid
 * sees only its own interfaces. Each test runs in a network namespace of
 * its own. */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

#define NO_DIR "policy_dir = /nonexistent/nbtest-policy.d\n"
#define NOBODY 65534
#define OTHER 65533

/* One batch; every op must work. The results are the caller's. */
static nb_results *run_ok(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;
        long bad;

        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        bad = nb_results_first_error(res);
        ck_assert_msg(bad < 0, "op %ld: %s", bad, bad >= 0 ? nb_result_message(res, bad) : "");
        nb_batch_free(b);
        return res;
}

static void make_tap_and_macvtap(nb_conn *c)
{
        nb_tap_opts persist = {.size = sizeof(nb_tap_opts), .persist = true};
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_tap_create(b, "sh0", &persist), 0);
        ck_assert_int_eq(nb_batch_macvtap_create(b, "shv0", "shp0", NB_MACVLAN_BRIDGE, NULL, false),
                         0);
        ck_assert_int_eq(nb_batch_bridge_create(b, "shbr0"), 0);
        ck_assert_int_eq(nb_batch_link_set(b, "sh0",
                                           &(nb_link_change){.size = sizeof(nb_link_change),
                                                             .up = 1,
                                                             .master = "shbr0"}),
                         0);
        nb_results_free(run_ok(c, b));
}

/* The entry of a LinkList result for name, asserted to be there once. */
static nb_link_info find_link(const nb_results *res, const char *name)
{
        nb_link_info l = NB_LINK_INFO_INIT, found = NB_LINK_INFO_INIT;
        int n = 0;

        for (size_t k = 0; k < nb_result_link_count(res, 0); k++) {
                ck_assert_int_eq(nb_result_link_at(res, 0, k, &l), 0);
                if (strcmp(l.name, name) == 0) {
                        found = l;
                        n++;
                }
        }
        ck_assert_msg(n == 1, "%s is listed %d times", name, n);
        return found;
}

/* An entry agrees with `ip -d -j link show dev NAME`. */
static void assert_like_ip(const nb_link_info *l, const char *kind, const char *alias)
{
        char num[32];
        const char *flags = tu_link_get(l->name, "flags");
        const char *master = tu_link_get(l->name, "master");
        const char *kind_name;

        snprintf(num, sizeof(num), "%d", l->ifindex);
        ck_assert_str_eq(tu_link_get(l->name, "ifindex"), num);
        snprintf(num, sizeof(num), "%u", l->mtu);
        ck_assert_str_eq(tu_link_get(l->name, "mtu"), num);
        ck_assert_str_eq(tu_link_get(l->name, "address"), l->mac);
        ck_assert_str_eq(nb_link_kind_name(l->kind), kind);
        kind_name = tu_link_get(l->name, "linkinfo.info_kind");
        ck_assert_str_eq(strcmp(kind_name, TU_ABSENT) == 0 ? "" : kind_name, l->kind_name);
        ck_assert_int_eq(strstr(flags, "\"UP\"") != NULL, l->up);
        ck_assert_str_eq(strcmp(master, TU_ABSENT) == 0 ? "" : master, l->master);
        if (alias) {
                ck_assert_str_eq(tu_link_get(l->name, "ifalias"), alias);
                ck_assert(l->has_owner);
                ck_assert(l->made_by_helper);
        } else {
                ck_assert_str_eq(tu_link_get(l->name, "ifalias"), TU_ABSENT);
                ck_assert(!l->has_owner);
                ck_assert(!l->made_by_helper);
        }
}

START_TEST(test_link_list_is_what_ip_shows)
{
        nb_conn *c;
        nb_results *res;
        nb_link_info l = NB_LINK_INFO_INIT;
        nb_batch *b;

        tu_private_netns();
        tu_veth("shp0", "shp1");
        c = tu_spawn(TU_ALLOW);
        make_tap_and_macvtap(c);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_link_list(b, NULL), 0);
        res = run_ok(c, b);
        assert_like_ip((l = find_link(res, "sh0"), &l), "tap", "netbroker:uid=0");
        ck_assert_str_eq(l.master, "shbr0");
        ck_assert(l.up);
        ck_assert_uint_eq(l.owner_uid, 0);
        assert_like_ip((l = find_link(res, "shv0"), &l), "macvtap", "netbroker:uid=0");
        assert_like_ip((l = find_link(res, "shbr0"), &l), "bridge", "netbroker:uid=0");
        assert_like_ip((l = find_link(res, "shp0"), &l), "veth", NULL);
        assert_like_ip((l = find_link(res, "lo"), &l), "other", NULL);
        for (size_t k = 1; k < nb_result_link_count(res, 0); k++) {
                nb_link_info prev = NB_LINK_INFO_INIT;
                ck_assert_int_eq(nb_result_link_at(res, 0, k - 1, &prev), 0);
                ck_assert_int_eq(nb_result_link_at(res, 0, k, &l), 0);
                ck_assert_int_lt(prev.ifindex, l.ifindex);
        }
        nb_results_free(res);
        /* One by name; a missing one is ENODEV before anything runs. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_link_list(b, "shv0"), 0);
        res = run_ok(c, b);
        ck_assert_uint_eq(nb_result_link_count(res, 0), 1);
        ck_assert_int_eq(nb_result_link_at(res, 0, 0, &l), 0);
        ck_assert_str_eq(l.name, "shv0");
        nb_results_free(res);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_link_list(b, "shnone"), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), -ENODEV);
        ck_assert_int_eq(nb_result_link_at(res, 0, 0, &l), -ENODATA);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

/* "HANDLE AVG PEAK BURST" of each HTB class of dev, in kB/s and kB, from
 * `tc class show` (Debian 12's tc prints classes as text only). */
static char *tc_classes(const char *dev)
{
        char *got = tu_sh(
                "tc -s class show dev %s | python3 -c \"import re, sys\n"
                "u = {'': 1, 'K': 1e3, 'M': 1e6, 'G': 1e9}\n"
                "b = {'b': 1, 'Kb': 1024, 'Mb': 1048576}\n"
                "for l in sys.stdin:\n"
                "    m = re.match(r'class htb (\\S+) .*rate (\\d+)(\\w?)bit ceil (\\d+)(\\w?)bit "
                "burst (\\d+)(\\w+)', l)\n"
                "    if m:\n"
                "        g = m.groups()\n"
                "        print(g[0], round(int(g[1]) * u[g[2]] / 8192), round(int(g[3]) * u[g[4]] "
                "/ 8192), round(int(g[5]) * b[g[6]] / 1024))\"",
                dev);

        got[strcspn(got, "\n")] = '\0';
        return got;
}

/* The kind of dev's root qdisc and of its child 4e42:1 (the helper's
 * handles), from `tc -s -j qdisc`. */
static char *tc_qdiscs(const char *dev)
{
        char *got = tu_sh("tc -s -j qdisc show dev %s | python3 -c \"import json, sys\n"
                          "d = json.load(sys.stdin)\n"
                          "r = [q['kind'] for q in d if q.get('root')]\n"
                          "l = [q['kind'] for q in d if q.get('parent') == '4e42:1']\n"
                          "print('+'.join(r + l))\"",
                          dev);

        got[strcspn(got, "\n")] = '\0';
        return got;
}

static nb_results *show(nb_conn *c, const char *dev)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_bandwidth_show(b, dev), 0);
        return run_ok(c, b);
}

/* The bucket a policer has for rate r, in kB: the burst (the average
 * without one), at least one second of the average (nft's limit in bytes
 * holds that much) and 64 kB. */
static unsigned bucket_of(const nb_rate *r)
{
        unsigned b = r->burst ? r->burst : r->average;

        b = b > r->average ? b : r->average;
        return b > 64 ? b : 64;
}

/* dev's limits as BandwidthShow gives them and as tc and nft show them
 * agree: inbound (to the guest) on a tap's root qdisc, outbound policed in
 * nft on its ingress; on a macvtap the other way round (its guest sends
 * through its egress). The policer has no peak (libvirt ignores it there
 * too) and reads back its bucket as the burst. */
static void assert_show_is_tc(nb_conn *c, const char *dev, const nb_rate *set_in,
                              const nb_rate *set_out)
{
        char want[128], *got;
        const char *in_mech, *out_mech;
        nb_results *res = show(c, dev);
        bool has_in, has_out,
                macvtap = strcmp(tu_link_get(dev, "linkinfo.info_kind"), "macvtap") == 0;
        nb_rate in = NB_RATE_INIT, out = NB_RATE_INIT;
        const nb_rate *root = macvtap ? &out : &in, *policed = macvtap ? &in : &out;
        const nb_rate *set_policed = macvtap ? set_in : set_out;

        ck_assert_int_eq(nb_result_bandwidth_show(res, 0, &has_in, &in, &has_out, &out), 0);
        ck_assert_int_eq(nb_result_bandwidth_show_mechanisms(res, 0, &in_mech, &out_mech), 0);
        ck_assert(has_in && has_out);
        ck_assert_str_eq(nb_result_ifname(res, 0), dev);
        snprintf(want, sizeof(want), "4e42:1 %u %u %u", root->average,
                 root->peak ? root->peak : root->average, root->burst);
        got = tc_classes(dev);
        ck_assert_str_eq(got, want);
        free(got);
        got = tc_qdiscs(dev);
        ck_assert_str_eq(got, macvtap ? out_mech : in_mech);
        free(got);
        ck_assert_str_eq(macvtap ? in_mech : out_mech, "nft-limit");
        ck_assert_uint_eq(policed->average, set_policed->average);
        ck_assert_uint_eq(policed->peak, 0);
        ck_assert_uint_eq(policed->burst, bucket_of(set_policed));
        got = tu_sh("nft list chain netdev netbroker_bw nbbw%s", tu_link_get(dev, "ifindex"));
        snprintf(want, sizeof(want), "limit rate over %u kbytes/second", policed->average);
        ck_assert_msg(strstr(got, want) && strstr(got, " drop"), "no '%s ... drop' in %s", want,
                      got);
        free(got);
        got = tu_sh("ip -br link | grep -c '^nbifb' || true");
        ck_assert_int_eq(atoi(got), 0);
        free(got);
        nb_results_free(res);
}

static void assert_none(nb_conn *c, const char *dev)
{
        const char *in_mech, *out_mech;
        nb_results *res = show(c, dev);
        bool has_in = true, has_out = true;
        nb_rate in = NB_RATE_INIT, out = NB_RATE_INIT;

        ck_assert_int_eq(nb_result_bandwidth_show(res, 0, &has_in, &in, &has_out, &out), 0);
        ck_assert_int_eq(nb_result_bandwidth_show_mechanisms(res, 0, &in_mech, &out_mech), 0);
        ck_assert(!has_in && !has_out);
        ck_assert_uint_eq(in.average + out.average, 0);
        ck_assert_str_eq(in_mech, "");
        ck_assert_str_eq(out_mech, "");
        nb_results_free(res);
}

START_TEST(test_bandwidth_show_is_what_tc_shows_and_none_after_clear)
{
        nb_rate in = {.size = sizeof(nb_rate), .average = 1000, .peak = 2000, .burst = 64},
                out = {.size = sizeof(nb_rate), .average = 500};
        nb_rate in2 = {.size = sizeof(nb_rate), .average = 300};
        const char *devs[] = {"sh0", "shv0"};
        nb_results *res;
        nb_rate got_in = NB_RATE_INIT, got_out = NB_RATE_INIT;
        bool has_in, has_out;
        nb_conn *c;
        nb_batch *b;

        tu_private_netns();
        tu_veth("shp0", "shp1");
        free(tu_sh("ip link set shp0 up"));
        c = tu_spawn(TU_ALLOW);
        make_tap_and_macvtap(c);
        for (size_t i = 0; i < 2; i++) {
                assert_none(c, devs[i]);
                b = nb_batch_new();
                ck_assert_int_eq(nb_batch_bandwidth_set(b, devs[i], &in, &out), 0);
                nb_results_free(run_ok(c, b));
                assert_show_is_tc(c, devs[i], &in, &out);
                /* The rates each way are the ones set (the policer's peak
                 * is ignored and its burst is its bucket: assert_show_is_tc). */
                res = show(c, devs[i]);
                ck_assert_int_eq(
                        nb_result_bandwidth_show(res, 0, &has_in, &got_in, &has_out, &got_out), 0);
                ck_assert_uint_eq(got_in.average, 1000);
                ck_assert_uint_eq(got_in.peak, i == 0 ? 2000 : 0);
                ck_assert_uint_eq(got_in.burst, i == 0 ? 64 : 1000);
                ck_assert_uint_eq(got_out.average, 500);
                ck_assert_uint_eq(got_out.peak, 0);
                nb_results_free(res);
                /* A change in place is read back as well. */
                b = nb_batch_new();
                ck_assert_int_eq(nb_batch_bandwidth_set(b, devs[i], &in2, &out), 0);
                nb_results_free(run_ok(c, b));
                assert_show_is_tc(c, devs[i], &in2, &out);
                b = nb_batch_new();
                ck_assert_int_eq(nb_batch_bandwidth_clear(b, devs[i]), 0);
                nb_results_free(run_ok(c, b));
                assert_none(c, devs[i]);
        }
        /* Not a limit of netbroker's: someone else's root qdisc is "none". */
        free(tu_sh("tc qdisc add dev shp0 root handle 7: htb default 1 && "
                   "tc class add dev shp0 parent 7: classid 7:1 htb rate 8mbit"));
        assert_none(c, "shp0");
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_bandwidth_show(b, "shnone"), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), -ENODEV);
        ck_assert_int_eq(nb_result_bandwidth_show(res, 0, NULL, NULL, NULL, NULL), -ENODATA);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

/* ---- another uid ---- */

/* What a process of uid sees: it connects to sock, runs body, and writes
 * "ok" or what went wrong into the pipe; returns that text (caller frees). */
static char *as_uid(const char *sock, uid_t uid, void (*body)(nb_conn *c, char *why, size_t len))
{
        char buf[1024] = "";
        int p[2], status;
        ssize_t n;
        pid_t pid;

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char why[1024] = "ok";
                nb_conn *c = NULL;
                close(p[0]);
                if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0)
                        snprintf(why, sizeof(why), "cannot become %u: %s", (unsigned)uid,
                                 strerror(errno));
                else if (nb_connect(sock, &c) < 0)
                        snprintf(why, sizeof(why), "connect: %s", nb_last_error());
                else
                        body(c, why, sizeof(why));
                nb_close(c);
                if (write(p[1], why, strlen(why)) < 0)
                        _exit(2);
                _exit(0);
        }
        close(p[1]);
        n = read(p[0], buf, sizeof(buf) - 1);
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_int_eq(status, 0);
        buf[n > 0 ? n : 0] = '\0';
        return strdup(buf);
}

/* One op's status (a failure of the batch as a whole: that -errno). */
static char last_msg[512];

static int status_of(nb_conn *c, nb_batch *b, nb_results **ret)
{
        nb_results *res = NULL;
        int r = nb_submit(c, b, &res);

        nb_batch_free(b);
        if (r < 0)
                return r;
        r = nb_result_status(res, 0);
        snprintf(last_msg, sizeof(last_msg), "%s", nb_result_message(res, 0));
        if (ret)
                *ret = res;
        else
                nb_results_free(res);
        return r;
}

static void nobody_body(nb_conn *c, char *why, size_t len)
{
        nb_tap_opts persist = {.size = sizeof(nb_tap_opts),
                               .persist = true,
                               .set_owner = true,
                               .uid = NOBODY,
                               .gid = NOBODY};
        nb_rate in = {.size = sizeof(nb_rate), .average = 100};
        nb_results *res = NULL;
        nb_link_info l = NB_LINK_INFO_INIT;
        nb_batch *b = nb_batch_new();
        int r;

        nb_batch_tap_create(b, "sa0", &persist);
        nb_batch_bandwidth_set(b, "sa0", &in, NULL);
        if ((r = status_of(c, b, NULL))) {
                snprintf(why, len, "tap and limit: %s: %s", strerror(-r), last_msg);
                return;
        }
        b = nb_batch_new();
        nb_batch_link_list(b, NULL);
        if ((r = status_of(c, b, &res))) {
                snprintf(why, len, "link list: %s", strerror(-r));
                return;
        }
        /* Its own tap, nothing else: not root's, not lo. */
        if (nb_result_link_count(res, 0) != 1 || nb_result_link_at(res, 0, 0, &l) ||
            strcmp(l.name, "sa0") || !l.has_owner || l.owner_uid != NOBODY) {
                snprintf(why, len, "link list shows %zu interfaces, the first %s",
                         nb_result_link_count(res, 0),
                         nb_result_link_count(res, 0) ? l.name : "none");
                nb_results_free(res);
                return;
        }
        nb_results_free(res);
        b = nb_batch_new();
        nb_batch_bandwidth_show(b, "sa0");
        if ((r = status_of(c, b, &res)) ||
            nb_result_bandwidth_show(res, 0, NULL, &in, NULL, NULL) || in.average != 100) {
                snprintf(why, len, "bandwidth show sa0: %s", strerror(-r));
                nb_results_free(res);
                return;
        }
        nb_results_free(res);
        /* Another's: refused, by name too. */
        b = nb_batch_new();
        nb_batch_bandwidth_show(b, "sroot0");
        if ((r = status_of(c, b, NULL)) != -EPERM) {
                snprintf(why, len, "bandwidth show sroot0: %s, not EPERM", strerror(-r));
                return;
        }
        b = nb_batch_new();
        nb_batch_link_list(b, "sroot0");
        if ((r = status_of(c, b, NULL)) != -EPERM) {
                snprintf(why, len, "link list sroot0: %s, not EPERM", strerror(-r));
                return;
        }
}

/* Not granted link_list or bandwidth_show: both refused, as every op. */
static void other_body(nb_conn *c, char *why, size_t len)
{
        nb_batch *b = nb_batch_new();
        int r;

        nb_batch_link_list(b, NULL);
        if ((r = status_of(c, b, NULL)) != -EPERM) {
                snprintf(why, len, "link list without a grant: %s, not EPERM", strerror(-r));
                return;
        }
        b = nb_batch_new();
        nb_batch_bandwidth_show(b, "sb0");
        if ((r = status_of(c, b, NULL)) != -EPERM)
                snprintf(why, len, "bandwidth show without a grant: %s, not EPERM", strerror(-r));
}

START_TEST(test_another_uid_sees_only_its_own_interfaces_and_limits)
{
        nb_tap_opts persist = {.size = sizeof(nb_tap_opts), .persist = true};
        nb_rate in = {.size = sizeof(nb_rate), .average = 200};
        struct tu_helper h;
        nb_conn *c = NULL;
        nb_batch *b;
        char *got;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW NO_DIR "[policy uid 65534]\n"
                                            "ops = tap_create bandwidth_set link_list "
                                            "bandwidth_show\n"
                                            "name_prefixes = sa\n"
                                            "[policy uid 65533]\n"
                                            "ops = tap_create\n"
                                            "name_prefixes = sb\n");
        ck_assert_int_eq(chmod(h.sock, 0666), 0);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        b = nb_batch_new();
        nb_batch_tap_create(b, "sroot0", &persist);
        nb_batch_tap_create(b, "sb0", &(nb_tap_opts){.size = sizeof(nb_tap_opts), .persist = true});
        nb_batch_bandwidth_set(b, "sroot0", &in, NULL);
        nb_results_free(run_ok(c, b));
        got = as_uid(h.sock, NOBODY, nobody_body);
        ck_assert_str_eq(got, "ok");
        free(got);
        got = as_uid(h.sock, OTHER, other_body);
        ck_assert_str_eq(got, "ok");
        free(got);
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST

Suite *show_suite(void)
{
        Suite *s = suite_create("show");
        TCase *tc = tcase_create("show");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_link_list_is_what_ip_shows);
        tcase_add_test(tc, test_bandwidth_show_is_what_tc_shows_and_none_after_clear);
        tcase_add_test(tc, test_another_uid_sees_only_its_own_interfaces_and_limits);
        suite_add_tcase(s, tc);
        return s;
}
