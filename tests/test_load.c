// SPDX-License-Identifier: LGPL-2.1-or-later
/* Load: 64 client threads over 4 connections to one helper, each running
 * a guest's life in a loop for NB_LOAD_SECONDS (default 60):
 *
 *   up      TapCreate NAME, FirewallApply NAME (replace), BandwidthSet NAME
 *   exec    Exec /bin/echo -n TOKEN, Exec /bin/true
 *   ensure  FirewallApply NAME (ensure: must write nothing), Ping
 *   veth    VethCreate "lv%d" with peer PEER
 *   down    LinkDelete VETH, BandwidthClear NAME, FirewallRemove NAME,
 *           LinkDelete NAME
 *
 * Names and tokens are unique per thread and cycle, so a reply filed under
 * the wrong request shows: every result is checked against its own op.
 * A 65th thread, on a fifth connection of its own, pings every 5 ms to see
 * what a one-op request waits behind in the (single-threaded) helper. One
 * cycle run alone first says what each kind of batch costs by itself.
 *
 * Then a second phase measures the latency of a Ping while a 1,000-rule
 * firewall batch and a one-second Exec run in other threads, on other
 * connections.
 *
 * The helper's open fds and RSS are measured after a warm-up (so caches
 * made on first use count as the start) and again at the end, idle (its
 * heap given back, see settled_rss_kib), with
 * the same connections open; its children must all be gone, and every
 * device, nftables object and qdisc must be what it was before the test. */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stress.h"
#include "testutil.h"

#define THREADS 64
#define CONNS 4
#define WARMUP_SECONDS 3
#define LATENCY_SECONDS 5
#define BIG_RULES 1000
#define SOLO_CYCLES 5

/* The Exec programs are the test's own choice, not the default list. */
/* Four connections and a probe, all root's: one more than the default
 * max_connections_per_uid. */
#define LOAD_ALLOW TU_ALLOW "max_connections_per_uid = 5\n"

/* ---- figures ---- */

struct samples {
        uint64_t *us;
        size_t n, cap;
};

static void samples_add(struct samples *s, uint64_t us)
{
        if (s->n == s->cap) {
                s->cap = s->cap ? s->cap * 2 : 1024;
                s->us = realloc(s->us, s->cap * sizeof(*s->us));
                ck_assert_ptr_nonnull(s->us);
        }
        s->us[s->n++] = us;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

/* The q-th percentile in milliseconds (nearest rank). */
static double percentile_ms(struct samples *s, unsigned q)
{
        size_t k;

        if (s->n == 0)
                return 0;
        qsort(s->us, s->n, sizeof(*s->us), cmp_u64);
        k = (s->n * q + 99) / 100;
        return (double)s->us[k ? k - 1 : 0] / 1000.0;
}

/* ---- the helper as a process ---- */

static long rss_kib(pid_t pid)
{
        char path[64];
        const char *s;
        long kib = -1;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        s = strstr(tu_read_file(path), "\nVmRSS:");
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(sscanf(s, "\nVmRSS: %ld kB", &kib), 1);
        return kib;
}

/* The fd count once it has not changed for 10 reads 10 ms apart: replies
 * and child pipes of work that just ended may still be closing. */
static int settled_fd_count(pid_t pid)
{
        int last = -1, same = 0;

        for (int k = 0; k < 500 && same < 10; k++) {
                int n = tu_fd_count(pid);
                same = n == last ? same + 1 : 0;
                last = n;
                usleep(10000);
        }
        return last;
}

/* The RSS once the helper is idle: it gives its heap back 200 ms after
 * its last large request (dispatch.c, TRIM_IDLE_MS), so the RSS is read
 * until it has not fallen for half a second (3 s at most). */
static long settled_rss_kib(pid_t pid)
{
        long best = rss_kib(pid);

        for (int k = 0, same = 0; k < 60 && same < 10; k++) {
                long now;

                usleep(50000);
                now = rss_kib(pid);
                same = now < best ? 0 : same + 1;
                best = now < best ? now : best;
        }
        return best;
}

/* Every device, nftables object and qdisc in this namespace, one per line,
 * sorted, so two snapshots compare as strings (tests/py/ns_snapshot.py). */
static char *namespace_snapshot(void)
{
        char *out;

        ck_assert_int_eq(
                tu_run((const char *const[]){"/usr/bin/python3", TU_PY("ns_snapshot.py"), NULL},
                       &out),
                0);
        return out;
}

/* ---- one thread's work ---- */

struct shared {
        nb_conn *conns[CONNS];
        atomic_bool stop;
        atomic_uint expected_rules; /* of a guest ruleset, from the first apply */
        bool outbound; /* the kernel can limit traffic from the guest */
};

struct lworker {
        pthread_t thread;
        struct shared *sh;
        nb_conn *c;
        int id;
        unsigned cycle;
        uint64_t requests, ops, failures, mismatches;
        uint64_t kind_us[5], kind_n[5]; /* time in nb_submit per kind of batch */
        char first_problem[512];
};

static const char *const kinds[5] = {"up", "exec", "ensure", "veth", "down"};

static void problem(struct lworker *w, uint64_t *counter, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void problem(struct lworker *w, uint64_t *counter, const char *fmt, ...)
{
        va_list ap;

        (*counter)++;
        if (w->first_problem[0])
                return;
        va_start(ap, fmt);
        vsnprintf(w->first_problem, sizeof(w->first_problem), fmt, ap);
        va_end(ap);
}

/* Submit; the helper must answer with one result per op, each a success.
 * NULL (and the problem counted) otherwise. Frees the batch. */
static nb_results *run_batch(struct lworker *w, nb_batch *b, const char *what)
{
        nb_results *res = NULL;
        size_t nops = nb_batch_size(b);
        uint64_t t0 = tu_now_us();
        int r = nb_submit(w->c, b, &res);
        long bad;

        for (int k = 0; k < 5; k++)
                if (strcmp(kinds[k], what) == 0) {
                        w->kind_us[k] += tu_now_us() - t0;
                        w->kind_n[k]++;
                }
        nb_batch_free(b);
        w->requests++;
        w->ops += nops;
        if (r < 0) {
                problem(w, &w->failures, "thread %d cycle %u %s: nb_submit: %s (%s)", w->id,
                        w->cycle, what, strerror(-r), nb_conn_error(w->c));
                return NULL;
        }
        if (nb_results_count(res) != nops) {
                problem(w, &w->mismatches, "thread %d cycle %u %s: %zu results for %zu ops", w->id,
                        w->cycle, what, nb_results_count(res), nops);
                nb_results_free(res);
                return NULL;
        }
        bad = nb_results_first_error(res);
        if (bad >= 0) {
                problem(w, &w->failures, "thread %d cycle %u %s: op %ld: %s (%s)", w->id, w->cycle,
                        what, bad, strerror(-nb_result_status(res, (size_t)bad)),
                        nb_result_message(res, (size_t)bad));
                nb_results_free(res);
                return NULL;
        }
        return res;
}

static void expect_ifname(struct lworker *w, const nb_results *res, size_t i, const char *want,
                          const char *what)
{
        if (strcmp(nb_result_ifname(res, i), want) != 0)
                problem(w, &w->mismatches, "thread %d cycle %u %s op %zu: ifname %s, asked %s",
                        w->id, w->cycle, what, i, nb_result_ifname(res, i), want);
}

/* A guest's filters as libvirt gives them: no-promisc and clean-traffic. */
static nb_fw_ruleset *guest_ruleset(int id)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        char mac[18], ip[16];

        snprintf(mac, sizeof(mac), "52:54:00:10:%02x:01", id & 0xff);
        snprintf(ip, sizeof(ip), "10.20.%d.2", id & 0xff);
        ck_assert_int_eq(nb_fw_add_no_promisc(rs, mac), 0);
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, mac, (const char *const[]){ip, NULL}), 0);
        return rs;
}

static const nb_rate rate_in = {
        .size = sizeof(nb_rate), .average = 1024, .peak = 2048, .burst = 256};
static const nb_rate rate_out = {.size = sizeof(nb_rate), .average = 512, .burst = 128};

/* up: the tap, its filters and its limits in one batch. Returns false when
 * the guest is not there (the batch was undone). */
static bool guest_up(struct lworker *w, const char *tap, const nb_fw_ruleset *rs, int *ret_fd,
                     char hash[33])
{
        nb_batch *b = nb_batch_new();
        nb_tap_opts opts = {
                .size = sizeof(nb_tap_opts), .vnet_hdr = true, .persist = w->cycle % 2 == 1};
        nb_results *res;
        const char *h = "", *in = "", *out = "";
        bool unchanged = true;
        unsigned rules = 0, want;

        nb_batch_tap_create(b, tap, &opts);
        nb_batch_firewall_apply(b, tap, tap, rs, NB_FW_REPLACE);
        nb_batch_bandwidth_set(b, tap, &rate_in, w->sh->outbound ? &rate_out : NULL);
        res = run_batch(w, b, "up");
        if (!res)
                return false;
        expect_ifname(w, res, 0, tap, "up");
        if (nb_result_fd_count(res, 0) != 1)
                problem(w, &w->mismatches, "thread %d cycle %u up: %zu fds for one tap", w->id,
                        w->cycle, nb_result_fd_count(res, 0));
        /* A plain tap lives as long as its fd, as with QEMU holding it. */
        if (!opts.persist)
                *ret_fd = nb_result_take_fd(res, 0, 0);
        if (nb_result_firewall(res, 1, &h, &unchanged, &rules) < 0 || unchanged || strlen(h) != 32)
                problem(w, &w->mismatches, "thread %d cycle %u up: firewall result %s %d", w->id,
                        w->cycle, h, unchanged);
        snprintf(hash, 33, "%s", h);
        want = 0;
        atomic_compare_exchange_strong(&w->sh->expected_rules, &want, rules);
        if (rules != atomic_load(&w->sh->expected_rules))
                problem(w, &w->mismatches,
                        "thread %d cycle %u up: %u rules, the first apply had %u", w->id, w->cycle,
                        rules, atomic_load(&w->sh->expected_rules));
        if (nb_result_bandwidth(res, 2, &in, &out) < 0 || !*in || (w->sh->outbound != !!*out))
                problem(w, &w->mismatches, "thread %d cycle %u up: bandwidth '%s' '%s'", w->id,
                        w->cycle, in, out);
        nb_results_free(res);
        return true;
}

static void exec_pair(struct lworker *w)
{
        nb_batch *b = nb_batch_new();
        char token[64];
        const char *echo[] = {"echo", "-n", token, NULL};
        nb_results *res;
        nb_exec_result e = NB_EXEC_RESULT_INIT;

        snprintf(token, sizeof(token), "t%d-c%u", w->id, w->cycle);
        nb_batch_exec(b, "/bin/echo", echo, NULL, NULL, 0, 0);
        nb_batch_exec(b, "/bin/true", NULL, NULL, NULL, 0, 0);
        res = run_batch(w, b, "exec");
        if (!res)
                return;
        if (nb_result_exec(res, 0, &e) < 0 || e.exit_code || e.signal ||
            e.out_len != strlen(token) || memcmp(e.out, token, e.out_len) != 0)
                problem(w, &w->mismatches, "thread %d cycle %u exec: echo said '%.*s', not '%s'",
                        w->id, w->cycle, (int)e.out_len, (const char *)e.out, token);
        if (nb_result_exec(res, 1, &e) < 0 || e.exit_code || e.signal || e.out_len)
                problem(w, &w->mismatches, "thread %d cycle %u exec: /bin/true: exit %d", w->id,
                        w->cycle, e.exit_code);
        nb_results_free(res);
}

static void ensure_and_ping(struct lworker *w, const char *tap, const nb_fw_ruleset *rs,
                            const char *hash)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        const char *h = "";
        bool unchanged = false;
        unsigned rules = 0;

        nb_batch_firewall_apply(b, tap, tap, rs, NB_FW_ENSURE);
        nb_batch_ping(b);
        res = run_batch(w, b, "ensure");
        if (!res)
                return;
        if (nb_result_firewall(res, 0, &h, &unchanged, &rules) < 0 || !unchanged ||
            strcmp(h, hash) != 0)
                problem(w, &w->mismatches,
                        "thread %d cycle %u ensure: unchanged=%d hash %s, apply gave %s", w->id,
                        w->cycle, unchanged, h, hash);
        nb_results_free(res);
}

/* veth: a template name, so 64 threads share one prefix of the allocator. */
static bool veth_up(struct lworker *w, char veth[IFNAMSIZ])
{
        nb_batch *b = nb_batch_new();
        char peer[IFNAMSIZ];
        const char *name;
        nb_results *res;

        snprintf(peer, sizeof(peer), "lp%02dx%u", w->id, w->cycle);
        nb_batch_veth_create(b, "lv%d", peer, -1);
        res = run_batch(w, b, "veth");
        if (!res)
                return false;
        name = nb_result_ifname(res, 0);
        snprintf(veth, IFNAMSIZ, "%s", name);
        if (strncmp(name, "lv", 2) != 0 || !name[2] ||
            strspn(name + 2, "0123456789") != strlen(name + 2))
                problem(w, &w->mismatches, "thread %d cycle %u veth: got %s for lv%%d", w->id,
                        w->cycle, name);
        if (strcmp(nb_result_peer_ifname(res, 0), peer) != 0)
                problem(w, &w->mismatches, "thread %d cycle %u veth: peer %s, asked %s", w->id,
                        w->cycle, nb_result_peer_ifname(res, 0), peer);
        nb_results_free(res);
        return true;
}

static void guest_down(struct lworker *w, const char *tap, const char *veth)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        size_t i = 0;

        if (veth[0])
                nb_batch_link_delete(b, veth);
        nb_batch_bandwidth_clear(b, tap);
        nb_batch_firewall_remove(b, tap);
        nb_batch_link_delete(b, tap);
        res = run_batch(w, b, "down");
        if (!res)
                return;
        if (veth[0])
                expect_ifname(w, res, i++, veth, "down");
        expect_ifname(w, res, i, tap, "down");
        expect_ifname(w, res, i + 2, tap, "down");
        nb_results_free(res);
}

static void one_cycle(struct lworker *w)
{
        char tap[IFNAMSIZ], veth[IFNAMSIZ] = "", hash[33] = "";
        nb_fw_ruleset *rs = guest_ruleset(w->id);
        int fd = -1;

        snprintf(tap, sizeof(tap), "ld%02dx%u", w->id, w->cycle);
        if (guest_up(w, tap, rs, &fd, hash)) {
                exec_pair(w);
                ensure_and_ping(w, tap, rs, hash);
                veth_up(w, veth);
                guest_down(w, tap, veth);
        }
        if (fd >= 0)
                close(fd);
        nb_fw_ruleset_free(rs);
        w->cycle++;
}

static void *worker_main(void *p)
{
        struct lworker *w = p;

        while (!atomic_load(&w->sh->stop))
                one_cycle(w);
        return NULL;
}

/* Pings on one connection every 5 ms until told to stop. */
struct pinger {
        pthread_t thread;
        nb_conn *c;
        atomic_bool *stop;
        struct samples lat;
        unsigned failures;
        unsigned interval_us;
};

static void *pinger_main(void *p)
{
        struct pinger *pg = p;
        nb_batch *b = nb_batch_new();

        nb_batch_ping(b);
        while (!atomic_load(pg->stop)) {
                nb_results *res = NULL;
                uint64_t t0 = tu_now_us();
                int r = nb_submit(pg->c, b, &res);
                uint64_t t1 = tu_now_us();
                if (r < 0 || nb_results_count(res) != 1 || nb_result_status(res, 0) != 0)
                        pg->failures++;
                else
                        samples_add(&pg->lat, t1 - t0);
                nb_results_free(res);
                if (pg->interval_us)
                        usleep(pg->interval_us);
        }
        nb_batch_free(b);
        return NULL;
}

struct run_totals {
        uint64_t requests, ops, cycles;
        double seconds;
};

/* All 64 workers (and a pinger when pg is given) for `seconds`; every
 * problem is reported and fails the test. */
static void run_workers(struct shared *sh, unsigned seconds, struct pinger *pg,
                        struct run_totals *ret)
{
        static struct lworker w[THREADS];
        uint64_t t0 = tu_now_us(), problems = 0;

        atomic_store(&sh->stop, false);
        memset(ret, 0, sizeof(*ret));
        for (int i = 0; i < THREADS; i++) {
                unsigned cycle = w[i].cycle; /* names stay unique across runs */
                w[i] = (struct lworker){
                        .sh = sh, .c = sh->conns[i % CONNS], .id = i, .cycle = cycle};
                ck_assert_int_eq(pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
        }
        if (pg) {
                pg->stop = &sh->stop;
                ck_assert_int_eq(pthread_create(&pg->thread, NULL, pinger_main, pg), 0);
        }
        sleep(seconds);
        atomic_store(&sh->stop, true);
        for (int i = 0; i < THREADS; i++)
                pthread_join(w[i].thread, NULL);
        if (pg)
                pthread_join(pg->thread, NULL);
        ret->seconds = (double)(tu_now_us() - t0) / 1e6;
        for (int i = 0; i < THREADS; i++) {
                ret->requests += w[i].requests;
                ret->ops += w[i].ops;
                ret->cycles += w[i].cycle;
                problems += w[i].failures + w[i].mismatches;
                if (w[i].first_problem[0])
                        fprintf(stderr,
                                "load: %s (%" PRIu64 " failures, %" PRIu64
                                " mismatches in this thread)\n",
                                w[i].first_problem, w[i].failures, w[i].mismatches);
        }
        ck_assert_msg(problems == 0, "%" PRIu64 " requests went wrong (see above)", problems);
        if (pg)
                ck_assert_msg(pg->failures == 0, "%u pings failed", pg->failures);
}

/* ---- the 1,000-rule batch, a slow Exec and Pings beside them ---- */

struct side {
        pthread_t thread;
        nb_conn *c;
        atomic_bool *stop;
        nb_batch *batch; /* submitted again and again */
        unsigned runs, failures;
        uint64_t busy_us;
        char first_problem[256];
};

static void *side_main(void *p)
{
        struct side *s = p;

        while (!atomic_load(s->stop)) {
                nb_results *res = NULL;
                uint64_t t0 = tu_now_us();
                int r = nb_submit(s->c, s->batch, &res);
                long bad = r < 0 ? 0 : nb_results_first_error(res);
                s->busy_us += tu_now_us() - t0;
                s->runs++;
                if (r < 0 || bad >= 0) {
                        if (!s->failures++)
                                snprintf(s->first_problem, sizeof(s->first_problem), "%s",
                                         r < 0 ? strerror(-r)
                                               : nb_result_message(res, (size_t)bad));
                }
                nb_results_free(res);
        }
        return NULL;
}

/* One owner on lbig0 with 1,000 rules: drop TCP to port 10000 + k. */
static nb_batch *big_firewall_batch(void)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_fw_group(rs, "ports"), 0);
        for (unsigned k = 0; k < BIG_RULES; k++) {
                nb_fw_rule r = {.size = sizeof(nb_fw_rule),
                                .verdict = NB_FW_DROP,
                                .ether_type = 0x0800,
                                .l4_proto = 6,
                                .dport_min = (uint16_t)(10000 + k)};
                ck_assert_int_eq(nb_fw_rule_add(rs, &r), 0);
        }
        ck_assert_int_eq(nb_batch_firewall_apply(b, "lbig", "lbig0", rs, NB_FW_REPLACE), 0);
        nb_fw_ruleset_free(rs);
        return b;
}

static void remove_big(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;

        nb_batch_firewall_remove(b, "lbig");
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_msg(nb_result_status(res, 0) == 0, "remove lbig: %s", nb_result_message(res, 0));
        nb_results_free(res);
        nb_batch_free(b);
}

static void latency_phase(struct shared *sh, nb_conn *probe, struct samples *idle,
                          struct samples *busy, double *big_ms)
{
        atomic_bool stop = false;
        struct pinger pg = {.c = probe, .stop = &stop};
        const char *sleep1[] = {"sleep", "1", NULL};
        struct side fw = {.c = sh->conns[1], .stop = &stop, .batch = big_firewall_batch()};
        struct side ex = {.c = sh->conns[2], .stop = &stop, .batch = nb_batch_new()};

        nb_batch_exec(ex.batch, "/bin/sleep", sleep1, NULL, NULL, 0, 0);

        /* Alone first, for comparison. */
        ck_assert_int_eq(pthread_create(&pg.thread, NULL, pinger_main, &pg), 0);
        sleep(1);
        atomic_store(&stop, true);
        pthread_join(pg.thread, NULL);
        *idle = pg.lat;
        ck_assert_uint_eq(pg.failures, 0);

        memset(&pg.lat, 0, sizeof(pg.lat));
        atomic_store(&stop, false);
        ck_assert_int_eq(pthread_create(&fw.thread, NULL, side_main, &fw), 0);
        ck_assert_int_eq(pthread_create(&ex.thread, NULL, side_main, &ex), 0);
        usleep(100000); /* both are under way */
        ck_assert_int_eq(pthread_create(&pg.thread, NULL, pinger_main, &pg), 0);
        sleep(LATENCY_SECONDS);
        atomic_store(&stop, true);
        pthread_join(pg.thread, NULL);
        pthread_join(fw.thread, NULL);
        pthread_join(ex.thread, NULL);
        ck_assert_msg(fw.failures == 0, "1,000-rule batch failed %u times: %s", fw.failures,
                      fw.first_problem);
        ck_assert_msg(ex.failures == 0, "sleep 1 failed %u times: %s", ex.failures,
                      ex.first_problem);
        ck_assert_uint_eq(pg.failures, 0);
        ck_assert_uint_gt(fw.runs, 0);
        ck_assert_uint_gt(ex.runs, 0);
        *busy = pg.lat;
        *big_ms = (double)fw.busy_us / fw.runs / 1000.0;
        remove_big(sh->conns[1]);
        nb_batch_free(fw.batch);
        nb_batch_free(ex.batch);
}

/* ---- the test ---- */

/* Can the helper limit traffic from the guest here (an IFB and a redirect)? */
static bool outbound_available(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        const char *out = "";
        bool ok;

        nb_batch_stats(b);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        nb_result_stat_setting(res, 0, "bandwidth_outbound", &out);
        ok = strstr(out, "ifb") != NULL;
        fprintf(stderr, "load: outbound bandwidth mechanism: %s\n", out);
        nb_results_free(res);
        nb_batch_free(b);
        return ok;
}

START_TEST(test_64_threads_4_connections_mixed_batches_leave_nothing_behind)
{
        unsigned seconds = stress_env_seconds("NB_LOAD_SECONDS", 60);
        struct shared sh = {0};
        struct tu_helper h;
        struct run_totals warm, tot;
        struct pinger pg = {.interval_us = 5000};
        struct lworker solo;
        nb_conn *probe;
        struct samples idle, busy;
        char *before, *after;
        int fd0, fd_mid, fd1;
        long rss0, rss_mid, rss1;
        double big_ms;

        tu_private_netns();
        tu_veth("lbig0", "lbig1"); /* the 1,000-rule owner's interface */
        before = namespace_snapshot();
        tu_helper_start(&h, LOAD_ALLOW);
        for (int i = 0; i < CONNS; i++)
                ck_assert_int_eq(nb_connect(h.sock, &sh.conns[i]), 0);
        /* The probe has a connection of its own: it measures what a
         * request waits behind in the helper, not in its connection's
         * queue of 16 threads. */
        ck_assert_int_eq(nb_connect(h.sock, &probe), 0);
        pg.c = probe;
        sh.outbound = outbound_available(sh.conns[0]);

        /* What one guest's cycle costs with nothing beside it. */
        solo = (struct lworker){.sh = &sh, .c = sh.conns[0], .id = THREADS};
        for (int i = 0; i < SOLO_CYCLES; i++)
                one_cycle(&solo);
        ck_assert_msg(solo.failures + solo.mismatches == 0, "%s", solo.first_problem);

        /* Warm-up: every kind of work once or more, then the start values. */
        run_workers(&sh, WARMUP_SECONDS, NULL, &warm);
        {
                nb_batch *b = big_firewall_batch();
                nb_results *res = NULL;
                ck_assert_int_eq(nb_submit(sh.conns[1], b, &res), 0);
                ck_assert_int_eq(nb_results_first_error(res), -1);
                nb_results_free(res);
                nb_batch_free(b);
                remove_big(sh.conns[1]);
        }
        fd0 = settled_fd_count(h.pid);
        rss0 = settled_rss_kib(h.pid);

        run_workers(&sh, seconds, &pg, &tot);
        fd_mid = settled_fd_count(h.pid);
        rss_mid = settled_rss_kib(h.pid);
        latency_phase(&sh, probe, &idle, &busy, &big_ms);

        fd1 = settled_fd_count(h.pid);
        rss1 = settled_rss_kib(h.pid);
        printf("load: %" PRIu64 " requests (%" PRIu64 " ops, %" PRIu64
               " guest cycles) in %.1f s = %.0f req/s, %.0f ops/s; 64 threads, 4 connections\n",
               tot.requests, tot.ops, tot.cycles, tot.seconds, tot.requests / tot.seconds,
               tot.ops / tot.seconds);
        printf("load: one guest cycle alone (5 requests, 12 ops): up %.1f ms, exec %.1f, ensure "
               "%.1f, veth %.1f, down %.1f\n",
               solo.kind_us[0] / 1000.0 / SOLO_CYCLES, solo.kind_us[1] / 1000.0 / SOLO_CYCLES,
               solo.kind_us[2] / 1000.0 / SOLO_CYCLES, solo.kind_us[3] / 1000.0 / SOLO_CYCLES,
               solo.kind_us[4] / 1000.0 / SOLO_CYCLES);
        printf("load: ping during the mixed load: p50 %.2f ms p99 %.2f ms (%zu pings)\n",
               percentile_ms(&pg.lat, 50), percentile_ms(&pg.lat, 99), pg.lat.n);
        printf("load: ping alone: p50 %.3f ms p99 %.3f ms (%zu pings)\n", percentile_ms(&idle, 50),
               percentile_ms(&idle, 99), idle.n);
        printf("load: ping p50 %.2f ms p99 %.2f ms beside a 1,000-rule batch (%.1f ms each) and "
               "sleep 1 (%zu pings)\n",
               percentile_ms(&busy, 50), percentile_ms(&busy, 99), big_ms, busy.n);
        printf("load: helper fds %d -> %d -> %d, RSS %ld -> %ld -> %ld KiB (after the warm-up of "
               "%" PRIu64 " requests, the load, the latency phase)\n",
               fd0, fd_mid, fd1, rss0, rss_mid, rss1, warm.requests);
        /* The figures in one line, for the log. */
        printf("load: %" PRIu64 " requests in %.0f s = %.0f req/s; ping p50 %.2f ms p99 %.2f ms "
               "beside a 1,000-rule batch and sleep 1\n",
               tot.requests, tot.seconds, tot.requests / tot.seconds, percentile_ms(&busy, 50),
               percentile_ms(&busy, 99));
        fflush(stdout);

        ck_assert_int_eq(tu_zombies_of(h.pid), 0);
        ck_assert_int_eq(tu_children_of(h.pid), 0);
        ck_assert_msg(fd1 <= fd0, "the helper holds %d fds, %d after the warm-up", fd1, fd0);
#if !defined(__SANITIZE_ADDRESS__)
        /* ASan's quarantine keeps freed memory on purpose: only the plain
         * build's RSS says anything about leaks. 1 MiB or 10% is what
         * malloc's free lists may keep after 64 guests' worth of work. */
        ck_assert_msg(rss1 <= rss0 + (rss0 / 10 > 1024 ? rss0 / 10 : 1024),
                      "the helper's RSS grew from %ld to %ld KiB", rss0, rss1);
#endif
        for (int i = 0; i < CONNS; i++)
                nb_close(sh.conns[i]);
        nb_close(probe);
        after = namespace_snapshot();
        ck_assert_msg(strcmp(before, after) == 0, "left behind or lost:\nbefore:\n%s\nafter:\n%s",
                      before, after);
        free(before);
        free(after);
        free(pg.lat.us);
        free(idle.us);
        free(busy.us);
        tu_helper_stop(&h);
}
END_TEST

Suite *load_suite(void)
{
        Suite *s = suite_create("load");
        TCase *tc = tcase_create("load");

        /* The run, the warm-up and the latency phase, and room for a slow
         * (sanitized) build to settle and compare. */
        tcase_set_timeout(tc, stress_env_seconds("NB_LOAD_SECONDS", 60) + 180);
        tcase_add_test(tc, test_64_threads_4_connections_mixed_batches_leave_nothing_behind);
        suite_add_tcase(s, tc);
        return s;
}
