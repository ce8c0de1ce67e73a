// SPDX-License-Identifier: LGPL-2.1-or-later
/* How long another client's Ping waits while a listing reads the whole
 * namespace (issue 14): a helper in the namespace this runs in (run it
 * with bench/dump_lane.sh, which makes a fresh one and its N taps with A
 * addresses each), then R rounds of each listing, LinkList, AddrList and
 * BandwidthShow (of one tap; its dumps are of every qdisc and class), and
 * AddrDelete of an address the tap has not (it reads every address): root
 * sends it back to back for 200 ms while another root client pings back
 * to back; each round's worst Ping and the listing's median time are
 * kept, and the medians of the rounds printed.
 *
 *   dump_lane HELPER [ROUNDS]   (7)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The helper goes too, and its files. */
static void die(const char *what, int r)
{
        fprintf(stderr, "dump_lane: %s: %s\n", what, strerror(r < 0 ? -r : r));
        if (getpid() == parent) {
                if (helper > 0)
                        kill(helper, SIGTERM);
                unlink(conf);
                unlink(sock);
        }
        exit(1);
}

static void submit(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;
        int r = nb_submit(c, b, &res);

        if (r < 0)
                die("submit", r);
        if (nb_results_first_error(res) >= 0) {
                fprintf(stderr, "dump_lane: %s\n", nb_result_message(res, 0));
                die("request", EIO);
        }
        nb_results_free(res);
        nb_batch_free(b);
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
                submit(c, b);
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

static void one_listing(nb_conn *c, int kind)
{
        nb_batch *b = nb_batch_new();

        if (kind == 0)
                nb_batch_link_list(b, NULL);
        else if (kind == 1)
                nb_batch_addr_list(b, NULL);
        else if (kind == 2)
                nb_batch_bandwidth_show(b, "dt0");
        else /* an address dt0 has not: nothing deleted, every one read */
                nb_batch_addr_delete(b, "dt0", "10.250.0.1", 32);
        submit(c, b);
}

int main(int argc, char **argv)
{
        static const char *names[] = {"LinkList", "AddrList", "BandwidthShow", "AddrDelete"};
        int rounds = argc > 2 ? atoi(argv[2]) : 7, r;
        double worst[64], took[64], each[4096];
        char *hargv[6];
        extern char **environ;
        FILE *cf;
        nb_conn *c;

        parent = getpid();
        if (argc < 2 || rounds < 1 || rounds > 64) {
                fprintf(stderr, "usage: dump_lane HELPER [ROUNDS]\n");
                return 2;
        }
        snprintf(sock, sizeof(sock), "/tmp/nb-dump-lane-%d.sock", (int)getpid());
        snprintf(conf, sizeof(conf), "/tmp/nb-dump-lane-%d.conf", (int)getpid());
        if (!(cf = fopen(conf, "w")))
                die("config", errno);
        fprintf(cf, "policy_dir = /nonexistent/nb-dump-lane.d\nallow_uid = 0\n");
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
        for (int kind = 0; kind < 4; kind++) {
                for (int k = 0; k < rounds; k++) {
                        struct pinger pg = {.sock = sock};
                        pthread_t t;
                        double t0 = now_ms();
                        int n = 0;
                        pthread_create(&t, NULL, ping_run, &pg);
                        usleep(20000);
                        while ((n == 0 || now_ms() - t0 < 220) && n < 4096) {
                                double t1 = now_ms();
                                one_listing(c, kind);
                                each[n++] = now_ms() - t1;
                        }
                        atomic_store(&pg.stop, true);
                        pthread_join(t, NULL);
                        worst[k] = pg.worst;
                        took[k] = median(each, n);
                }
                printf("  %-14s took %.1f ms, other client's worst Ping %.1f ms\n", names[kind],
                       median(took, rounds), median(worst, rounds));
        }
        nb_close(c);
        kill(helper, SIGTERM);
        waitpid(helper, NULL, 0);
        unlink(conf);
        unlink(sock);
        return 0;
}
