// SPDX-License-Identifier: LGPL-2.1-or-later
/* Scenario "names": N macvtaps on one veth parent, named by probing
 * macvtap0, macvtap1, ... as the 2015 code did (A; A1 with one socket; K
 * the kernel's create alone) and by netbrokerd's allocator (B: one request
 * of N ops; B1: N requests of one). Every method at every N is a runner
 * method, each run from an empty parent; netbroker-bench(1) says more. K is
 * B's floor; A and A1 are skipped above BENCH_BASELINE_MAX devices. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/macvtap.h>

#include "netbroker.h"
#include "netlink.h" /* helper/netlink.h */

#define PARENT "p0"
#define PREFIX "macvtap"

enum method { M_K, M_A, M_A1, M_B, M_B1, N_METHODS };

static const char *const names[N_METHODS] = {"K", "A", "A1", "B", "B1"};

/* One method at one N: a runner method's arg. */
struct outcome {
        enum method m;
        unsigned n;
        uint64_t probes; /* of the last run: the same every time */
        struct bench_samples per_dev; /* every run's; empty for B */
};

/* "macvtap, N=82": the rows' program column, which the report keeps. */
static char programs[BENCH_MAX_COUNTS][24];

struct ctx {
        struct bench_ctx b; /* the helper (no fat parent) */
        struct bench_method ms[BENCH_MAX_COUNTS * N_METHODS];
        struct outcome out[BENCH_MAX_COUNTS * N_METHODS];
        struct nl_sock *sk;
        int probe_fd; /* A1's socket for SIOCGIFFLAGS */
        int parent_ifindex;
        int fds[BENCH_NAMES_MAX_COUNT]; /* B's and B1's /dev/tapN fds, closed after the clock */
        size_t nfds;
};

/* Wait until the CPUs have been idle (under 5% busy) for a 50 ms window, at
 * most 2 s: the kernel's work after a run (freeing devices, kdevtmpfs
 * removing their nodes) must not be paid by the next run. */
static void settle(void)
{
        struct timespec tick = {0, 50 * 1000 * 1000};
        unsigned long long v[2][8], busy, total;

        for (int i = 0; i < 80; i++) {
                unsigned long long *x = v[i % 2];
                FILE *f = fopen("/proc/stat", "re");
                int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &x[0], &x[1],
                                   &x[2], &x[3], &x[4], &x[5], &x[6], &x[7])
                          : 0;
                if (f)
                        fclose(f);
                if (n < 8)
                        return;
                busy = total = 0;
                for (int k = 0; i % 2 && k < 8; k++) {
                        total += v[1][k] - v[0][k];
                        busy += k == 3 || k == 4 ? 0 : v[1][k] - v[0][k]; /* idle, iowait */
                }
                if (i % 2 && total && busy * 20 < total)
                        return;
                if (i % 2 == 0)
                        nanosleep(&tick, NULL);
        }
}

static int nl_open(struct nl_sock **ret)
{
        struct nl_sock *sk = nl_socket_alloc();
        int r = sk ? nbd_netlink_nle_errno(nl_connect(sk, NETLINK_ROUTE)) : -ENOMEM;

        if (r < 0) {
                bench_log("netbroker-bench: names: cannot open rtnetlink: %s\n", strerror(-r));
                nl_socket_free(sk);
                return r;
        }
        *ret = sk;
        return 0;
}

/* K's, A's and A1's create: libnl, as the helper makes its macvtaps. */
static int macvtap_create(struct ctx *c, const char *name)
{
        struct rtnl_link *link = rtnl_link_macvtap_alloc();
        int r;

        if (!link)
                return -ENOMEM;
        rtnl_link_set_link(link, c->parent_ifindex);
        rtnl_link_macvtap_set_mode(link, MACVLAN_MODE_BRIDGE);
        rtnl_link_set_name(link, name);
        r = rtnl_link_add(c->sk, link, NLM_F_CREATE | NLM_F_EXCL);
        rtnl_link_put(link);
        if (r < 0)
                bench_log("netbroker-bench: cannot create macvtap %s: %s\n", name, nl_geterror(r));
        return r < 0 ? nbd_netlink_nle_errno(r) : 0;
}

/* Delete the parent (its macvtaps go with it) and make it again. */
static int parent_reset(struct ctx *c)
{
        int r = bench_veths(c->b.conn, "names: ", "p", "q", 1, false, &c->parent_ifindex);

        return r < 0 ? r : bench_expect_devices("names: after deleting " PARENT ": ", PREFIX, 0);
}

/* 1: the name is taken, 0: free (ENODEV or ENXIO), or -errno. With family
 * (A), libvirt's virNetDevExists: a datagram socket of VIR_NETDEV_FAMILY
 * (AF_PACKET in 2015, AF_UNIX today) made close-on-exec by virSetInherit,
 * SIOCGIFFLAGS, close; without (A1), fd. */
static int probe(int family, int fd, const char *name)
{
        struct ifreq ifr = {0};
        int flags, r;

        if (family && (fd = socket(family, SOCK_DGRAM, 0)) < 0)
                return -errno;
        flags = family ? fcntl(fd, F_GETFD) : 0;
        if (family && (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0))
                r = -errno;
        else if (snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name),
                 ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
                r = 1;
        else
                r = errno == ENODEV || errno == ENXIO ? 0 : -errno;
        if (family)
                close(fd);
        return r;
}

/* K, A, A1: each device timed alone; A and A1 take the first name
 * macvtapK no device has, probing from K = 0; K the i-th. */
static int run_local(struct ctx *c, struct outcome *o)
{
        char name[24]; /* "macvtap" and at most 5 digits (BENCH_NAMES_MAX_COUNT) */
        int r = 0, k;

        for (unsigned i = 0; i < o->n && r == 0; i++) {
                uint64_t t = bench_now_ns();
                snprintf(name, sizeof(name), PREFIX "%u", i);
                for (k = 0; o->m != M_K; k++) {
                        snprintf(name, sizeof(name), PREFIX "%d", k);
                        o->probes++;
                        r = probe(o->m == M_A ? AF_UNIX : 0, c->probe_fd, name);
                        if (r <= 0)
                                break;
                }
                if (r < 0)
                        bench_log("netbroker-bench: SIOCGIFFLAGS %s: %s\n", name, strerror(-r));
                if (r == 0)
                        r = macvtap_create(c, name);
                if (r == 0)
                        r = bench_samples_add(&o->per_dev, (double)(bench_now_ns() - t) / 1000.0);
        }
        return r;
}

struct closer {
        const int *fds;
        size_t n;
};

static void *close_some(void *arg)
{
        const struct closer *w = arg;

        for (size_t i = 0; i < w->n; i++)
                close(w->fds[i]);
        return NULL;
}

/* B's macvtap fds: each close waits for an RCU grace period (tap_release),
 * which a VM pays at its end, not at naming: closed after the clock stops,
 * from up to 64 threads whose waits overlap (what none took, here). */
static void close_kept(struct ctx *c)
{
        struct closer w[64];
        pthread_t tid[64];
        size_t i = 0, t = 0, per = (c->nfds + 63) / 64;

        for (; i < c->nfds; i += w[t++].n) {
                w[t] = (struct closer){c->fds + i, c->nfds - i < per ? c->nfds - i : per};
                if (pthread_create(&tid[t], NULL, close_some, &w[t]) != 0)
                        break;
        }
        for (; i < c->nfds; i++)
                close(c->fds[i]);
        while (t > 0)
                pthread_join(tid[--t], NULL);
        c->nfds = 0;
}

/* One request of `ops` MacvtapCreate ops, timed from building the batch (a
 * client pays for that per device too) to the reply. Each op must give a
 * name and exactly one fd, a character device, kept for close_kept(). */
static int submit_timed(struct ctx *c, const char *who, unsigned ops, double *ret_us)
{
        uint64_t t0 = bench_now_ns(), t1;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        struct stat sb;
        int r = b ? 0 : -ENOMEM, fd;

        for (unsigned i = 0; i < ops && r == 0; i++)
                r = nb_batch_macvtap_create(b, PREFIX "%d", PARENT, NB_MACVLAN_BRIDGE, NULL, false);
        if (r == 0)
                r = bench_submit_all(c->b.conn, b, ops, who, &t1, &res);
        for (size_t i = 0; i < ops && r == 0; i++) {
                fd = nb_result_ifname(res, i)[0] && nb_result_fd_count(res, i) == 1
                             ? nb_result_take_fd(res, i, 0)
                             : -1;
                if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISCHR(sb.st_mode)) {
                        c->fds[c->nfds++] = fd;
                        continue;
                }
                bench_log("netbroker-bench: %sop %zu (ifname '%s'): not one character device fd\n",
                          who, i, nb_result_ifname(res, i));
                if (fd >= 0)
                        close(fd);
                r = -EPROTO;
        }
        if (r == 0)
                *ret_us = (double)(t1 - t0) / 1000.0;
        nb_results_free(res); /* closes every fd not taken */
        nb_batch_free(b);
        return r;
}

/* B: one request; B1: N requests of one, its time their sum. */
static int run_helper(struct ctx *c, struct outcome *o, double *ret_us)
{
        unsigned per = o->m == M_B1 ? 1 : o->n;
        char who[16];
        double us;
        int r = 0;

        snprintf(who, sizeof(who), "names: %s: ", names[o->m]);
        *ret_us = 0;
        for (unsigned i = 0; i < o->n && r == 0; i += per) {
                r = submit_timed(c, who, per, &us);
                *ret_us += r == 0 ? us : 0;
                if (r == 0 && o->m == M_B1)
                        r = bench_samples_add(&o->per_dev, us);
        }
        close_kept(c);
        return r;
}

/* The runner's method: one method at one N from an empty parent (the
 * kernel's work after deleting the last one settled), checked by counting
 * the macvtaps; its time the run's wall time. No warm-up round: warm_up()
 * is it. */
static int run_method(struct bench_ctx *b, const struct bench_method *bm, bool timed,
                      double *ret_us)
{
        struct ctx *c = b->scenario;
        struct outcome *o = (struct outcome *)bm->arg;
        char who[32];
        uint64_t t0;
        int r = parent_reset(c);

        (void)timed;
        o->probes = 0;
        if (r == 0)
                settle();
        t0 = bench_now_ns();
        if (r == 0 && o->m < M_B)
                r = run_local(c, o);
        *ret_us = (double)(bench_now_ns() - t0) / 1000.0;
        if (r == 0 && o->m >= M_B)
                r = run_helper(c, o, ret_us);
        snprintf(who, sizeof(who), "names: %s@%u: ", bm->name, o->n);
        if (r == 0)
                r = bench_expect_devices(who, PREFIX, o->n);
        if (r == 0)
                bench_log("names: %-2s N=%-5u %9.1f ms, %8.1f us/device, %llu probes\n", bm->name,
                          o->n, *ret_us / 1000.0, *ret_us / o->n, (unsigned long long)o->probes);
        return r;
}

/* What one probe of an existing name costs, as nearly all of A's are: A1's
 * (one socket), A's (AF_UNIX) and 2015's (AF_PACKET: a few only, each
 * costs an RCU grace period), into us[3]. */
static int measure_probes(struct ctx *c, double *us)
{
        static const unsigned times[3] = {20000, 20000, 10};
        int r = 0;

        for (int k = 0; k < 3; k++) {
                uint64_t t = bench_now_ns();
                unsigned i = 0;
                for (; i < times[k] && r >= 0; i++)
                        r = probe(k == 0 ? 0 : k == 1 ? AF_UNIX : AF_PACKET, c->probe_fd, PARENT);
                if (r < 0 && k < 2) {
                        bench_log("netbroker-bench: probing %s: %s\n", PARENT, strerror(-r));
                        return r;
                }
                us[k] = i ? (double)(bench_now_ns() - t) / 1000.0 / i : 0;
        }
        bench_log("names: one probe: %.2f us (one socket), %.2f us (libvirt, AF_UNIX), %.1f us "
                  "(libvirt 2015, AF_PACKET)\n",
                  us[0], us[1], us[2]);
        return 0;
}

/* Rows: per-device times where devices were timed one by one (not B);
 * ratios and comparisons: of the runs' wall times. */
static int add_results(struct bench_report *r, struct ctx *c, size_t n_counts,
                       const struct bench_summary *wall, const double *probe_us)
{
        static const char *const pairs[] = {"A/B", "A1/B", "A/B1", "A/K", "A1/K", "B/K"};
        double med[BENCH_MAX_COUNTS * N_METHODS];
        struct bench_summary s[N_METHODS];
        char name[48];
        int k = 0;

        for (size_t i = 0; i < n_counts; i++) {
                const struct outcome *o = &c->out[i * N_METHODS];
                /* A method that was skipped has no samples and no row. */
                for (int m = 0; m < N_METHODS && k == 0; m++)
                        if (m != M_B && o[m].per_dev.n)
                                k = bench_samples_summarize(&o[m].per_dev, &s[m]);
                for (int m = 0; m < N_METHODS && k == 0; m++)
                        if (m != M_B && o[m].per_dev.n)
                                k = bench_report_add_row(r, names[m], programs[i], &s[m],
                                                         o[M_A].per_dev.n ? &s[M_A] : NULL);
        }
        for (size_t i = 0; i < n_counts * N_METHODS; i++)
                med[i] = wall[i].median_us;
        /* A/B first: the figures the issue asks for, "A/B@82", "A/B@1000". */
        for (size_t p = 0; p < BENCH_N(pairs) && k == 0; p++)
                for (size_t i = 0; i < n_counts && k == 0; i++) {
                        snprintf(name, sizeof(name), "@%u", c->out[i * N_METHODS].n);
                        k = bench_report_ratios(r, pairs[p], name, names, &med[i * N_METHODS],
                                                N_METHODS);
                }
        for (size_t i = 0; i < n_counts && k == 0; i++) {
                struct bench_summary a = wall[i * N_METHODS + M_A], b = wall[i * N_METHODS + M_B],
                                     kk = wall[i * N_METHODS + M_K];
                unsigned n = c->out[i * N_METHODS].n;
                bench_summary_per(&a, n);
                bench_summary_per(&b, n);
                bench_summary_per(&kk, n);
                snprintf(name, sizeof(name), "%u macvtaps, per device", n);
                if (a.n)
                        k = bench_report_add_compare(r, name, "A", &a, NULL, NULL, "B", &b);
                if (k == 0)
                        k = bench_report_add_floor(r, name, "K", &kk, "B", &b, false);
        }
        return k ? k
                 : bench_report_add_note(r,
                                         "one probe: %.2f us (AF_UNIX, A), %.1f ms (AF_PACKET, "
                                         "2015: its close waits for RCU)",
                                         probe_us[1], probe_us[2] / 1000.0);
}

/* RLIMIT_NOFILE for B's reply (N fds until they are closed), the rtnetlink
 * socket, A1's probe socket, the helper (max_ops raised to max: one request
 * of max ops); then, unrecorded, the kernel's first macvtap in this
 * namespace and the helper's first one. */
static int setup(struct ctx *c, const struct bench_opts *o, struct bench_report *r, unsigned max)
{
        static const char *const allow[] = {"/bin/true", NULL};
        static const char *const features[] = {"macvtap_create", "veth_create", "link_delete",
                                               NULL};
        struct rlimit rl = {0};
        char extra[32];
        double us;
        int k = getrlimit(RLIMIT_NOFILE, &rl) < 0 ? -errno : 0;
        /* The fds open already (the fat parent's 500 under --scale) count. */
        unsigned want = max + 256 + (unsigned)bench_count_fds(getpid());

        snprintf(extra, sizeof(extra), "max_ops = %u\n", max > 4096 ? max : 4096);
        rl.rlim_cur = rl.rlim_cur > want ? rl.rlim_cur : want;
        rl.rlim_max = rl.rlim_max > rl.rlim_cur ? rl.rlim_max : rl.rlim_cur;
        if (k == 0 && setrlimit(RLIMIT_NOFILE, &rl) < 0)
                k = -errno;
        if (k < 0) {
                bench_log("netbroker-bench: cannot raise RLIMIT_NOFILE to %u: %s\n", want,
                          strerror(-k));
                return k;
        }
        k = nl_open(&c->sk);
        if (k == 0 && (c->probe_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
                k = -errno;
        if (k == 0)
                k = bench_ctx_start(&c->b, o, r, false, allow, extra, features);
        if (k == 0)
                k = parent_reset(c);
        if (k == 0)
                k = macvtap_create(c, PREFIX "0");
        if (k == 0)
                k = submit_timed(c, "names: warm-up: ", 1, &us);
        close_kept(c);
        return k;
}

int bench_names(const struct bench_opts *o, struct bench_report *r)
{
        struct bench_summary wall[BENCH_MAX_COUNTS * N_METHODS] = {0},
                                                     ran[BENCH_MAX_COUNTS * N_METHODS];
        size_t idx[BENCH_MAX_COUNTS * N_METHODS], n_ran = 0;
        unsigned counts[BENCH_MAX_COUNTS] = {82, o->quick ? 200 : 1000}, max = 0;
        size_t n_counts = o->n_counts ? o->n_counts : o->count ? 1 : 2, n = n_counts * N_METHODS;
        struct ctx *c = calloc(1, sizeof(*c));
        double probe_us[3];
        int k;

        r->title = "N macvtaps on a veth parent: probing for a free name versus netbrokerd";
        r->ratios_title = "ratios of wall times";
        if (o->n_counts)
                memcpy(counts, o->counts, o->n_counts * sizeof(*counts));
        else if (o->count)
                counts[0] = o->count;
        for (size_t i = 0; i < n_counts; i++)
                max = counts[i] > max ? counts[i] : max;
        if (max > BENCH_NAMES_MAX_COUNT || !c) {
                if (c)
                        bench_log("netbroker-bench: names: at most %d devices (one request)\n",
                                  BENCH_NAMES_MAX_COUNT);
                free(c);
                return c ? -ERANGE : -ENOMEM;
        }
        c->b.scenario = c;
        c->probe_fd = -1;
        for (size_t i = 0; i < n; i++) {
                struct outcome *oc = &c->out[i];
                *oc = (struct outcome){.m = (enum method)(i % N_METHODS),
                                       .n = counts[i / N_METHODS]};
                snprintf(programs[i / N_METHODS], sizeof(programs[0]), "macvtap, N=%u", oc->n);
                /* Probing N names makes N(N+1)/2 probes, B1 N requests:
                 * minutes a run. */
                if (oc->m != M_K && oc->m != M_B && oc->n > BENCH_BASELINE_MAX) {
                        bench_log("names: %s at N=%u skipped: minutes a run\n", names[oc->m],
                                  oc->n);
                        continue;
                }
                idx[n_ran] = i;
                c->ms[n_ran++] = (struct bench_method){.name = names[oc->m],
                                                       .how = BENCH_CUSTOM,
                                                       .fn = run_method,
                                                       .arg = oc,
                                                       .program = programs[i / N_METHODS]};
        }
        k = setup(c, o, r, max);
        if (k == 0)
                k = measure_probes(c, probe_us);
        if (k == 0)
                k = bench_run_rounds(&c->b, "names", c->ms, n_ran, 0, o->reps ? o->reps : 3, ran,
                                     NULL);
        for (size_t j = 0; j < n_ran && k == 0; j++)
                wall[idx[j]] = ran[j];
        if (k == 0 && n_ran < n)
                k = bench_report_add_note(r,
                                          "A, A1 (N(N+1)/2 probes) and B1 (N requests) skipped "
                                          "above %u devices",
                                          BENCH_BASELINE_MAX);
        if (k == 0)
                k = add_results(r, c, n_counts, wall, probe_us);
        bench_ctx_stop(&c->b);
        for (size_t i = 0; i < n; i++)
                bench_samples_clear(&c->out[i].per_dev);
        close_kept(c);
        if (c->probe_fd >= 0)
                close(c->probe_fd);
        nl_socket_free(c->sk);
        free(c);
        return k;
}
