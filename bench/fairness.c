// SPDX-License-Identifier: LGPL-2.1-or-later
/* Scenario "fairness": does one client wait behind another's kernel work?
 * Two clients of one helper (run with --listen): one sends one-op Pings
 * back to back from a thread of its own, all the time; the other runs the
 * largest batches in turn, a replace of N guests' firewalls (restart's C,
 * R1), an ensure of the same N guests, nothing changed (E1: the helper
 * reads the table to find that out), and the deletion of T taps in one
 * request (R2), with quiet spells
 * between them (P0: the Ping's floor, nothing else running). R2's floor,
 * D0, follows each R2: as many taps made again by the helper, deleted by
 * the kernel alone in one link group (groupfloor.c), the same ruleset in
 * place. A Ping counts
 * for a load when its round trip overlapped that load, however little.
 * Last, the helper restarts with the guests' owners in place (R3): its
 * start-up CPU, the firewall's start-up sweep among it, is logged. */
#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "netbroker.h"

enum { L_REPLACE, L_DELETE, L_ENSURE, N_LOADS };
enum { S_P0, S_P1, S_R1, S_P2, S_R2, S_D0, S_P3, S_E1, N_SERIES };

/* The Pings' series of each load. */
static const int ping_series[N_LOADS] = {S_P1, S_P2, S_P3};

#define MAX_LOADS 64

struct pinger {
        nb_conn *conn;
        nb_batch *ping;
        /* The loads started and finished so far, and which each was: a Ping
         * overlapped a load when, at its end, more had started than had
         * finished at its start. */
        atomic_uint started, done;
        int kind[MAX_LOADS];
        atomic_bool quiet, stop;
        struct bench_samples s[N_SERIES]; /* P0, P1, P2 filled here */
        int err;
};

static void *ping_loop(void *arg)
{
        struct pinger *p = arg;
        nb_results *res = NULL;

        while (!atomic_load(&p->stop) && p->err == 0) {
                unsigned done0 = atomic_load(&p->done);
                bool quiet0 = atomic_load(&p->quiet);
                uint64_t t0 = bench_now_ns();
                int r = bench_submit_all(p->conn, p->ping, 1, "fairness: Ping: ", NULL, &res);
                double us = (double)(bench_now_ns() - t0) / 1000.0;
                unsigned started1 = atomic_load(&p->started);

                nb_results_free(res);
                res = NULL;
                if (r == 0 && started1 > done0)
                        r = bench_samples_add(&p->s[ping_series[p->kind[done0 % MAX_LOADS]]], us);
                else if (r == 0 && quiet0 && atomic_load(&p->quiet))
                        r = bench_samples_add(&p->s[S_P0], us);
                p->err = r;
        }
        return NULL;
}

/* A quiet spell: the pinger alone. */
static void quiet(struct pinger *p, unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

        atomic_store(&p->quiet, true);
        nanosleep(&ts, NULL);
        atomic_store(&p->quiet, false);
}

/* One load on conn, timed into s, the pinger told. */
static int load(struct pinger *p, nb_conn *conn, int kind, nb_batch *b, size_t n, const char *who,
                struct bench_samples *s)
{
        unsigned i = atomic_load(&p->started);
        nb_results *res = NULL;
        uint64_t t0, t1 = 0;
        int r;

        p->kind[i % MAX_LOADS] = kind;
        atomic_store(&p->started, i + 1);
        t0 = bench_now_ns();
        r = bench_submit_all(conn, b, n, who, &t1, &res);
        atomic_store(&p->done, i + 1);
        nb_results_free(res);
        if (r == 0)
                bench_log("%s%.2f ms\n", who, (double)(t1 - t0) / 1e6);
        return r < 0 ? r : bench_samples_add(s, (double)(t1 - t0) / 1000.0);
}

/* The deletion's taps (made untimed, the pinger's samples meanwhile
 * discarded), then their deletion; then the same again for D0, the
 * kernel's deletion alone (the pinger's samples discarded too). */
static int delete_load(struct pinger *p, nb_conn *conn, unsigned taps)
{
        nb_batch *b = nb_batch_new();
        char name[16], who[48];
        double us = 0;
        int r = b ? bench_taps(conn, "fairness: TapCreate: ", "fdel", taps) : -ENOMEM;

        for (unsigned i = 0; i < taps && r == 0; i++) {
                snprintf(name, sizeof(name), "fdel%u", i);
                r = nb_batch_link_delete(b, name);
        }
        snprintf(who, sizeof(who), "fairness: R2 delete %u taps: ", taps);
        if (r == 0)
                r = load(p, conn, L_DELETE, b, taps, who, &p->s[S_R2]);
        nb_batch_free(b);
        if (r == 0)
                r = bench_expect_devices(who, "fdel", 0);
        snprintf(who, sizeof(who), "fairness: D0 delete %u taps: ", taps);
        if (r == 0)
                r = bench_taps(conn, "fairness: TapCreate: ", "fdel", taps);
        if (r == 0)
                r = bench_group_delete("fdel", taps, &us);
        if (r == 0) {
                bench_log("%s%.2f ms (the kernel alone)\n", who, us / 1000.0);
                r = bench_expect_devices(who, "fdel", 0);
        }
        return r < 0 ? r : bench_samples_add(&p->s[S_D0], us);
}

static int add_results(struct bench_report *r, struct pinger *p, unsigned guests, unsigned taps)
{
        static const char *const names[N_SERIES] = {"P0", "P1", "R1", "P2", "R2", "D0", "P3", "E1"};
        static char prog[N_SERIES][40]; /* the rows keep them */
        char what[56];
        struct bench_summary s[N_SERIES];
        double p50[N_SERIES], p99[N_SERIES];
        int k = 0;

        snprintf(prog[S_P0], sizeof(prog[0]), "Ping, no load");
        snprintf(prog[S_P1], sizeof(prog[0]), "Ping, during R1");
        snprintf(prog[S_R1], sizeof(prog[0]), "replace, %u guests", guests);
        snprintf(prog[S_P2], sizeof(prog[0]), "Ping, during R2");
        snprintf(prog[S_R2], sizeof(prog[0]), "delete %u taps, 1 batch", taps);
        snprintf(prog[S_D0], sizeof(prog[0]), "kernel: %u taps, 1 group", taps);
        snprintf(prog[S_P3], sizeof(prog[0]), "Ping, during E1");
        snprintf(prog[S_E1], sizeof(prog[0]), "ensure, %u guests, unchanged", guests);
        for (int i = 0; i < N_SERIES && k == 0; i++) {
                k = bench_samples_summarize(&p->s[i], &s[i]);
                if (k == 0)
                        k = bench_report_add_row(r, names[i], prog[i], &s[i], NULL);
                p50[i] = s[i].median_us;
                p99[i] = s[i].p99_us;
        }
        if (k == 0)
                k = bench_report_ratios(r, "P1/P0 P2/P0 P3/P0", " p50", names, p50, N_SERIES);
        if (k == 0)
                k = bench_report_ratios(r, "P1/P0 P2/P0 P3/P0", " p99", names, p99, N_SERIES);
        if (k == 0)
                k = bench_report_ratios(r, "R2/D0", NULL, names, p50, N_SERIES);
        for (int i = 0; i < 2 * N_LOADS && k == 0; i++) {
                static const int load_of[N_LOADS] = {S_R1, S_R2, S_E1};
                int ps = ping_series[i / 2];
                snprintf(what, sizeof(what), "Ping during %s", prog[load_of[i / 2]]);
                k = bench_report_add_floor(r, what, "P0", &s[S_P0], names[ps], &s[ps], i % 2);
        }
        if (k == 0)
                k = bench_report_add_floor(r, prog[S_R2], "D0", &s[S_D0], "R2", &s[S_R2], false);
        return k;
}

/* The helper restarted with the guests' owners in place (R3): how soon it
 * answers a Ping, and the CPU its start-up takes (the firewall's sweep of
 * the owners whose interface went while no helper ran among it) until it
 * is idle: its CPU time grew by less than 1 ms in 200 ms. */
static int restart_load(const char *helper, const char *const *allow, const char *sock,
                        nb_batch *ping, unsigned guests, int *pid)
{
        nb_results *res = NULL;
        nb_conn *conn = NULL;
        uint64_t t0, t1 = 0, cpu_ping, cpu, prev;
        int k;

        kill(*pid, SIGTERM);
        waitpid(*pid, NULL, 0);
        *pid = 0;
        unlink(sock);
        t0 = bench_now_ns();
        k = bench_broker_listen(helper, allow, NULL, sock, 1, &conn, pid);
        if (k == 0)
                k = bench_submit_all(conn, ping, 1, "fairness: R3 restart: Ping: ", &t1, &res);
        nb_results_free(res);
        if (k < 0)
                goto out;
        cpu_ping = cpu = bench_process_cpu_ns(*pid);
        for (int i = 0; i < 300; i++) {
                prev = cpu;
                usleep(200000);
                cpu = bench_process_cpu_ns(*pid);
                if (cpu - prev < 1000000)
                        break;
        }
        bench_log("fairness: R3 restart with %u guests' owners in place: first Ping answered "
                  "%.1f ms after the spawn (helper CPU %.1f ms by then); start-up CPU until "
                  "idle %.1f ms\n",
                  guests, (double)(t1 - t0) / 1e6, (double)cpu_ping / 1e6, (double)prev / 1e6);
out:
        nb_close(conn);
        return k;
}

int bench_fairness(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL};
        unsigned guests = o->guests ? o->guests : o->quick ? 50 : BENCH_RESTART_MAX_GUESTS;
        unsigned taps = o->count ? o->count : o->quick ? 20 : 100;
        unsigned reps = o->reps ? o->reps : o->quick ? 2 : 3, spell = o->quick ? 300 : 1000;
        struct pinger *p = calloc(1, sizeof(*p));
        char dir[] = "/tmp/netbroker-bench.XXXXXX", sock[64];
        nb_conn *conns[2] = {NULL, NULL};
        nb_batch *fw = NULL, *ens = NULL;
        pthread_t tid;
        bool thread = false;
        int pid = 0, k;

        if (!p)
                return -ENOMEM;
        k = mkdtemp(dir) ? 0 : -errno;
        r->title = "Ping latency of one client while another runs the largest batches";
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        if (k == 0)
                k = bench_broker_listen(o->helper ? o->helper : getenv("NETBROKERD"), allow, NULL,
                                        sock, 2, conns, &pid);
        if (k == 0 && !nb_conn_has_feature(conns[0], "firewall_apply")) {
                bench_log("netbroker-bench: fairness: the helper has no firewall\n");
                k = -EOPNOTSUPP;
        }
        r->helper_pid = pid;
        r->helper_fds = pid > 0 ? bench_count_fds(pid) : 0;
        bench_log("fairness: %u guests' replace and %u taps' deletion, %u times each\n", guests,
                  taps, reps);
        if (k == 0)
                k = bench_taps(conns[0], "fairness: TapCreate: ", "vnet", guests);
        if (k == 0)
                k = bench_fw_batch(guests, true, &fw);
        if (k == 0)
                k = bench_fw_batch(guests, false, &ens);
        if (k == 0 && !(p->ping = nb_batch_new()))
                k = -ENOMEM;
        if (k == 0)
                k = nb_batch_ping(p->ping);
        p->conn = conns[1];
        if (k == 0)
                k = -pthread_create(&tid, NULL, ping_loop, p);
        thread = k == 0;
        for (unsigned i = 0; i < reps && k == 0; i++) {
                char who[48];
                snprintf(who, sizeof(who), "fairness: R1 replace %u guests: ", guests);
                quiet(p, spell);
                k = load(p, conns[0], L_REPLACE, fw, guests, who, &p->s[S_R1]);
                snprintf(who, sizeof(who), "fairness: E1 ensure %u guests: ", guests);
                if (k == 0)
                        k = load(p, conns[0], L_ENSURE, ens, guests, who, &p->s[S_E1]);
                if (k == 0)
                        k = delete_load(p, conns[0], taps);
        }
        if (k == 0)
                quiet(p, spell);
        atomic_store(&p->stop, true);
        if (thread)
                pthread_join(tid, NULL);
        for (int i = 0; i < 2; i++) {
                nb_close(conns[i]);
                conns[i] = NULL;
        }
        if (k == 0 && p->err == 0 && pid > 0)
                k = restart_load(o->helper ? o->helper : getenv("NETBROKERD"), allow, sock, p->ping,
                                 guests, &pid);
        if (k == 0 && (k = p->err) == 0)
                k = add_results(r, p, guests, taps);
        for (int i = 0; i < 2; i++)
                nb_close(conns[i]);
        if (pid > 0) {
                kill(pid, SIGTERM);
                waitpid(pid, NULL, 0);
        }
        unlink(sock);
        rmdir(dir);
        nb_batch_free(fw);
        nb_batch_free(ens);
        nb_batch_free(p->ping);
        for (int i = 0; i < N_SERIES; i++)
                bench_samples_clear(&p->s[i]);
        free(p);
        return k;
}
