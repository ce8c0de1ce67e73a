// SPDX-License-Identifier: LGPL-2.1-or-later
/* Issue 14, loop audit finding 2: what a BandwidthSet does to the others
 * while a large FirewallApply runs. Three clients of one helper (run by
 * bw-beside-fw.sh, with --listen, in a namespace of its own): A replaces N
 * guests' firewalls (no-promisc + clean-traffic each, one request) ROUNDS
 * times; B changes the outbound limit of tap bwt0 back and forth (each one
 * a policer commit), back to back, while A's replace runs; C pings back to
 * back all the time. Per round: A's status (EAGAIN counted) and time, the
 * number of B's sets, B's worst set, and C's worst Ping while A ran.
 *
 *   cc -O2 -o bw-beside-fw scripts/bw-beside-fw.c -Iclient -Lbuild -lnetbroker -lpthread
 *   bw-beside-fw SOCKET N ROUNDS [GAP_MS]
 * GAP_MS: B waits that long between two sets (default 0: back to back;
 * -1: B sends none, the replace alone). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netbroker.h"

static atomic_bool running, stop;
static int gap_ms; /* between B's sets; 0: back to back; < 0: B sends none */

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static nb_conn *connect_or_die(const char *sock)
{
        nb_conn *c;

        if (nb_connect(sock, &c) < 0) {
                fprintf(stderr, "connect %s: %s\n", sock, nb_last_error());
                exit(1);
        }
        return c;
}

/* b submitted; its first failing op's status, 0, or the submit's error. */
static int submit(nb_conn *c, nb_batch *b, char *msg, size_t len)
{
        nb_results *res = NULL;
        long bad;
        int r = nb_submit(c, b, &res);

        if (r < 0)
                return r;
        bad = nb_results_first_error(res);
        r = bad < 0 ? 0 : nb_result_status(res, (size_t)bad);
        if (msg)
                snprintf(msg, len, "%s", bad < 0 ? "" : nb_result_message(res, (size_t)bad));
        nb_results_free(res);
        return r;
}

struct worker {
        nb_conn *c;
        const char *what;
        unsigned n; /* requests while A ran */
        double worst; /* ms, while A ran */
        int err;
};

/* C: Pings back to back; the worst of those that overlapped A's replace. */
static void *pinger(void *p)
{
        struct worker *w = p;
        nb_batch *b = nb_batch_new();

        nb_batch_ping(b);
        while (!atomic_load(&stop) && !w->err) {
                bool during = atomic_load(&running);
                double t0 = now_ms();
                int r = submit(w->c, b, NULL, 0);
                double ms = now_ms() - t0;

                if (r < 0)
                        w->err = r;
                if (during || atomic_load(&running)) {
                        w->n++;
                        if (ms > w->worst)
                                w->worst = ms;
                }
        }
        nb_batch_free(b);
        return NULL;
}

/* B: bwt0's outbound limit changed back and forth while A runs. */
static void *setter(void *p)
{
        struct worker *w = p;
        unsigned i = 0;

        while (!atomic_load(&stop) && !w->err) {
                nb_rate out = NB_RATE_INIT;
                nb_batch *b;
                double t0, ms;
                char msg[256];
                int r;

                out.average = 1000 + 1000 * (i++ & 1);
                if (!atomic_load(&running) || gap_ms < 0) {
                        struct timespec ts = {0, 200000};
                        nanosleep(&ts, NULL);
                        continue;
                }
                b = nb_batch_new();
                nb_batch_bandwidth_set(b, "bwt0", NULL, &out);
                t0 = now_ms();
                r = submit(w->c, b, msg, sizeof(msg));
                ms = now_ms() - t0;
                nb_batch_free(b);
                if (r < 0) {
                        fprintf(stderr, "bandwidth set: %s %s\n", strerror(-r), msg);
                        w->err = r;
                }
                w->n++;
                if (ms > w->worst)
                        w->worst = ms;
                for (int k = 0; k < gap_ms && !atomic_load(&stop); k++) {
                        struct timespec ts = {0, 1000000};
                        nanosleep(&ts, NULL);
                }
        }
        return NULL;
}

/* Counter name of the helper's Stats (0 if not there). */
static uint64_t stat_of(nb_conn *c, const char *name)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        uint64_t v = 0;

        nb_batch_stats(b);
        if (nb_submit(c, b, &res) == 0)
                nb_result_stat(res, 0, name, &v);
        nb_results_free(res);
        nb_batch_free(b);
        return v;
}

static nb_batch *replace(unsigned n, unsigned round)
{
        nb_batch *b = nb_batch_new();

        for (unsigned i = 0; i < n; i++) {
                char owner[32], dev[16], mac[32], ip[32];
                const char *ips[] = {ip, NULL};
                nb_fw_ruleset *rs = nb_fw_ruleset_new();

                snprintf(owner, sizeof(owner), "vm%u", i);
                snprintf(dev, sizeof(dev), "fg%u", i);
                snprintf(mac, sizeof(mac), "52:54:00:%02x:%02x:%02x", (i >> 8) & 0xff, i & 0xff,
                         round & 0xff);
                snprintf(ip, sizeof(ip), "10.%u.%u.%u", 1 + (round & 0x3f), (i >> 8) & 0xff,
                         i & 0xff);
                nb_fw_add_no_promisc(rs, mac);
                nb_fw_add_clean_traffic(rs, mac, ips);
                nb_batch_firewall_apply(b, owner, dev, rs, NB_FW_REPLACE);
                nb_fw_ruleset_free(rs);
        }
        return b;
}

/* Taps fg0.. and bwt0, persistent, 512 a request (a reply's size is
 * bounded). */
static void make_taps(nb_conn *c, unsigned n)
{
        nb_tap_opts o = {.size = sizeof(nb_tap_opts), .persist = true};

        for (unsigned first = 0; first <= n; first += 512) {
                nb_batch *b = nb_batch_new();
                char msg[256];
                int r;

                for (unsigned i = first; i < first + 512 && i <= n; i++) {
                        char dev[16];
                        if (i == n)
                                snprintf(dev, sizeof(dev), "bwt0");
                        else
                                snprintf(dev, sizeof(dev), "fg%u", i);
                        nb_batch_tap_create(b, dev, &o);
                }
                r = submit(c, b, msg, sizeof(msg));
                nb_batch_free(b);
                if (r < 0) {
                        fprintf(stderr, "taps: %s %s\n", strerror(-r), msg);
                        exit(1);
                }
        }
}

int main(int argc, char **argv)
{
        unsigned n, rounds, eagain = 0;
        nb_conn *a;
        nb_batch *b;
        char msg[256];
        int r;

        if (argc != 4 && argc != 5) {
                fprintf(stderr, "usage: %s SOCKET N ROUNDS [GAP_MS]\n", argv[0]);
                return 2;
        }
        gap_ms = argc == 5 ? atoi(argv[4]) : 0;
        n = (unsigned)atoi(argv[2]);
        rounds = (unsigned)atoi(argv[3]);
        a = connect_or_die(argv[1]);
        make_taps(a, n);
        b = replace(n, 0);
        if ((r = submit(a, b, msg, sizeof(msg))) < 0)
                fprintf(stderr, "first apply: %s %s\n", strerror(-r), msg);
        nb_batch_free(b);
        printf("round  apply_status  apply_ms  bw_sets  bw_worst_ms  pings  ping_worst_ms  "
               "dumps_interrupted\n");
        for (unsigned k = 1; k <= rounds; k++) {
                struct worker p = {.c = connect_or_die(argv[1])},
                              s = {.c = connect_or_die(argv[1])};
                pthread_t tp, ts;
                double t0, ms;
                uint64_t intr = stat_of(a, "nft_dumps_interrupted");

                b = replace(n, k);
                atomic_store(&stop, false);
                pthread_create(&tp, NULL, pinger, &p);
                pthread_create(&ts, NULL, setter, &s);
                atomic_store(&running, true);
                t0 = now_ms();
                r = submit(a, b, msg, sizeof(msg));
                ms = now_ms() - t0;
                atomic_store(&running, false);
                atomic_store(&stop, true);
                pthread_join(tp, NULL);
                pthread_join(ts, NULL);
                nb_batch_free(b);
                if (r == -EAGAIN)
                        eagain++;
                printf("%5u  %12s  %8.0f  %7u  %11.1f  %5u  %13.1f  %17llu%s%s\n", k,
                       r ? strerror(-r) : "ok", ms, s.n, s.worst, p.n, p.worst,
                       (unsigned long long)(stat_of(a, "nft_dumps_interrupted") - intr),
                       r ? "  " : "", r ? msg : "");
                fflush(stdout);
                nb_close(p.c);
                nb_close(s.c);
        }
        printf("EAGAIN: %u of %u\n", eagain, rounds);
        nb_close(a);
        return 0;
}
