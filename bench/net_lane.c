// SPDX-License-Identifier: LGPL-2.1-or-later
/* How long another client's Ping waits while the network table is read or
 * committed (issue 14): a helper in the namespace this runs in (run it
 * with bench/net_lane.sh, which makes a fresh one), N NAT networks of F
 * port forwards made by root, then R rounds of each:
 *   list:   uid 65534 (granted net_list) sends one NetList;
 *   commit: root replaces C of them in one request (one commit; every
 *           one of 256 x 32 is more than the kernel takes in one batch:
 *           EMSGSIZE).
 * A root client pings back to back meanwhile; each round's worst Ping and
 * the op's own time are kept, and the medians printed.
 *
 * With NB_NET_LANE_LIMIT=1, then: another table's forward chains fill the
 * forward hook up to 8 below the kernel's 1,024, and root sends R
 * requests of C new networks, each refused at its 9th (E2BIG); their
 * time and the worst Ping beside them.
 *
 *   net_lane HELPER [N [F [R [C]]]]   (256 32 11 64)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netbroker.h>

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static pid_t helper, parent;
static char sock[64], conf[64];

/* The helper goes too (it holds the caller's pipes), and its files. */
static void die(const char *what, int r)
{
        fprintf(stderr, "net_lane: %s: %s\n", what, strerror(r < 0 ? -r : r));
        if (getpid() == parent) {
                if (helper > 0)
                        kill(helper, SIGTERM);
                unlink(conf);
                unlink(sock);
        }
        exit(1);
}

static nb_results *submit(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;
        int r = nb_submit(c, b, &res);

        if (r < 0)
                die("submit", r);
        if (nb_results_first_error(res) >= 0) {
                long i = nb_results_first_error(res);
                fprintf(stderr, "net_lane: op %ld: %s\n", i, nb_result_message(res, (size_t)i));
                die("request", EIO);
        }
        nb_batch_free(b);
        return res;
}

/* Networks first..first+n-1 into b, each with f forwards. */
static void add_networks(nb_batch *b, int first, int n, int f)
{
        static nb_net_forward fw[64];
        static const nb_net_forward *fp[64];
        static char subnet[64][32], guest[64][32];

        for (int i = first; i < first + n; i++) {
                const char *subnets[] = {subnet[i % 64]};
                nb_net_spec s = NB_NET_SPEC_INIT;
                char owner[32], bridge[16];
                snprintf(subnet[i % 64], sizeof(subnet[0]), "10.%d.%d.0/24", 100 + i / 256,
                         i % 256);
                snprintf(guest[i % 64], sizeof(guest[0]), "10.%d.%d.2", 100 + i / 256, i % 256);
                for (int k = 0; k < f; k++) {
                        fw[k] = (nb_net_forward)NB_NET_FORWARD_INIT;
                        fw[k].protocol = k % 2 ? "udp" : "tcp";
                        fw[k].outside_port = (unsigned)(10000 + i * 64 + k);
                        fw[k].guest_address = guest[i % 64];
                        fw[k].guest_port = 80;
                        fp[k] = &fw[k];
                }
                snprintf(owner, sizeof(owner), "bn%d", i);
                snprintf(bridge, sizeof(bridge), "bnbr%d", i);
                s.bridge = bridge;
                s.subnets = subnets;
                s.n_subnets = 1;
                s.mode = NB_NET_NAT;
                s.forwards = fp;
                s.n_forwards = (size_t)f;
                if (nb_batch_net_apply(b, owner, &s) < 0)
                        die("net_apply", EINVAL);
        }
}

struct pinger {
        const char *sock;
        atomic_bool stop;
        double worst;
};

static void *ping_run(void *p)
{
        struct pinger *pg = p;
        nb_conn *c;
        int r = nb_connect(pg->sock, &c);

        if (r < 0)
                die("pinger connect", r);
        while (!atomic_load(&pg->stop)) {
                nb_batch *b = nb_batch_new();
                double t0 = now_ms(), dt;
                nb_batch_ping(b);
                nb_results_free(submit(c, b));
                dt = now_ms() - t0;
                if (dt > pg->worst)
                        pg->worst = dt;
        }
        nb_close(c);
        return NULL;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
        qsort(v, (size_t)n, sizeof(*v), cmp);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Requests past the forward hook's limit: refused, whoever refuses. */
static void limit_rounds(nb_conn *c, const char *sock, int n, int f, int rounds, int commit_n)
{
        double took[64], worst[64];
        FILE *p = popen("nft -f -", "w");

        if (!p)
                die("nft", errno);
        fprintf(p, "table inet nb_net_lane_filler {\n");
        for (int i = 0; i < 1024 - 8 - n; i++)
                fprintf(p, "chain c%d { type filter hook forward priority 0; }\n", i);
        fprintf(p, "}\n");
        if (pclose(p) != 0)
                die("nft -f", EIO);
        for (int k = 0; k < rounds; k++) {
                struct pinger pg = {.sock = sock};
                nb_batch *b = nb_batch_new();
                nb_results *res = NULL;
                pthread_t t;
                double t0;
                int r;
                add_networks(b, n, commit_n, f);
                pthread_create(&t, NULL, ping_run, &pg);
                usleep(20000);
                t0 = now_ms();
                if ((r = nb_submit(c, b, &res)) < 0)
                        die("submit", r);
                took[k] = now_ms() - t0;
                if (nb_results_first_error(res) < 0)
                        die("a request past the limit was taken", EINVAL);
                for (int i = commit_n - 1; k == 0 && i >= 0; i--)
                        if (nb_result_status(res, (size_t)i) < 0) {
                                printf("  refused: op %d: %s\n", i,
                                       nb_result_message(res, (size_t)i));
                                break;
                        }
                nb_results_free(res);
                nb_batch_free(b);
                atomic_store(&pg.stop, true);
                pthread_join(t, NULL);
                worst[k] = pg.worst;
        }
        printf("  %d new, past the hook: took %.1f ms, other client's worst Ping %.1f ms\n",
               commit_n, median(took, rounds), median(worst, rounds));
}

/* The uid's side: a NetList each time it is told, its time written back. */
static void lister(const char *sock, int go, int back)
{
        nb_conn *c;
        char x;
        int r;

        if (setgid(65534) < 0 || setuid(65534) < 0)
                die("setuid", errno);
        if ((r = nb_connect(sock, &c)) < 0)
                die("uid connect", r);
        while (read(go, &x, 1) == 1) {
                nb_batch *b = nb_batch_new();
                double t0 = now_ms(), dt;
                nb_batch_net_list(b);
                nb_results_free(submit(c, b));
                dt = now_ms() - t0;
                if (write(back, &dt, sizeof(dt)) != sizeof(dt))
                        break;
        }
        nb_close(c);
        _exit(0);
}

int main(int argc, char **argv)
{
        int n = argc > 2 ? atoi(argv[2]) : 256, f = argc > 3 ? atoi(argv[3]) : 32;
        int rounds = argc > 4 ? atoi(argv[4]) : 11, go[2], back[2], r;
        char *hargv[6];
        double worst_list[64], took_list[64], worst_commit[64], took_commit[64];
        int commit_n = argc > 5 ? atoi(argv[5]) : 64;
        extern char **environ;
        pid_t child;
        FILE *cf;
        nb_conn *c;

        parent = getpid();
        if (argc < 2 || rounds < 1 || rounds > 64 || f > 64 || commit_n > n) {
                fprintf(stderr,
                        "usage: net_lane HELPER [NETWORKS [FORWARDS [ROUNDS [REPLACED]]]]\n");
                return 2;
        }
        snprintf(sock, sizeof(sock), "/tmp/nb-net-lane-%d.sock", (int)getpid());
        snprintf(conf, sizeof(conf), "/tmp/nb-net-lane-%d.conf", (int)getpid());
        if (!(cf = fopen(conf, "w")))
                die("config", errno);
        fprintf(cf, "policy_dir = /nonexistent/nb-net-lane.d\nallow_uid = 0 65534\n"
                    "[policy uid 65534]\nops = net_list\n");
        fclose(cf);
        hargv[0] = argv[1];
        hargv[1] = "--listen";
        hargv[2] = sock;
        hargv[3] = "--config";
        hargv[4] = conf;
        hargv[5] = NULL;
        if ((r = posix_spawn(&helper, argv[1], NULL, NULL, hargv, environ)) != 0)
                die("spawn", r);
        for (int i = 0; i < 5000 && nb_connect(sock, &c) < 0; i++)
                usleep(2000);
        chmod(sock, 0666);
        /* The networks, 8 a request. */
        for (int i = 0; i < n; i += 8) {
                nb_batch *b = nb_batch_new();
                add_networks(b, i, i + 8 > n ? n - i : 8, f);
                nb_results_free(submit(c, b));
        }
        if (pipe(go) < 0 || pipe(back) < 0)
                die("pipe", errno);
        if ((child = fork()) == 0) {
                close(go[1]);
                close(back[0]);
                lister(sock, go[0], back[1]);
        }
        close(go[0]);
        close(back[1]);
        for (int k = 0; k < rounds; k++) {
                struct pinger pg = {.sock = sock};
                pthread_t t;
                nb_batch *b;
                double t0;
                pthread_create(&t, NULL, ping_run, &pg);
                usleep(20000);
                if (write(go[1], "x", 1) != 1 ||
                    read(back[0], &took_list[k], sizeof(double)) != sizeof(double))
                        die("lister", EIO);
                atomic_store(&pg.stop, true);
                pthread_join(t, NULL);
                worst_list[k] = pg.worst;

                pg = (struct pinger){.sock = sock};
                pthread_create(&t, NULL, ping_run, &pg);
                usleep(20000);
                b = nb_batch_new();
                add_networks(b, 0, commit_n, f); /* replaced anew, one commit */
                t0 = now_ms();
                nb_results_free(submit(c, b));
                took_commit[k] = now_ms() - t0;
                atomic_store(&pg.stop, true);
                pthread_join(t, NULL);
                worst_commit[k] = pg.worst;
        }
        close(go[1]);
        waitpid(child, NULL, 0);
        printf("%d networks x %d forwards, %d rounds, medians:\n", n, f, rounds);
        printf("  uid NetList:          took %.1f ms, other client's worst Ping %.1f ms\n",
               median(took_list, rounds), median(worst_list, rounds));
        printf("  root replaces %d:     took %.1f ms, other client's worst Ping %.1f ms\n",
               commit_n, median(took_commit, rounds), median(worst_commit, rounds));
        if (getenv("NB_NET_LANE_LIMIT") && *getenv("NB_NET_LANE_LIMIT") == '1')
                limit_rounds(c, sock, n, f, rounds, commit_n);

        nb_close(c);
        kill(helper, SIGTERM);
        waitpid(helper, NULL, 0);
        unlink(conf);
        unlink(sock);
        return 0;
}
