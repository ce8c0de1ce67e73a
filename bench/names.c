/* Scenario "names": N macvtaps on one veth parent, named by probing
 * macvtap0, macvtap1, ... as the 2015 code did (A; A1 with one socket; K
 * the kernel's create alone) and by netbrokerd's allocator (B: one request
 * of N ops; B1: N requests of one). Every method starts from an empty
 * parent; netbroker-bench(1) says more. */
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
#define PEER "p1"
#define PREFIX "macvtap"
#define TEMPLATE PREFIX "%d"

enum method { M_K, M_A, M_A1, M_B, M_B1, N_METHODS };

struct outcome {
        unsigned n;
        uint64_t probes; /* of the last run: the same every time */
        double wall_us; /* of one run; after every repetition, their median */
        struct bench_samples per_dev; /* every repetition's; empty for B */
};

/* "macvtap, N=82": the rows' program column, which the report keeps. */
static char programs[BENCH_MAX_COUNTS][24];

struct ctx {
        struct bench_ctx b; /* the helper (no fat parent) */
        struct bench_method ms[BENCH_MAX_COUNTS * N_METHODS]; /* every method at every N */
        struct outcome out[BENCH_MAX_COUNTS][N_METHODS]; /* the same, one each */
        struct nl_sock *sk;
        int probe_fd; /* A1's socket for SIOCGIFFLAGS */
        int parent_ifindex;
        int *fds; /* B's and B1's /dev/tapN fds, closed after the clock stops */
        size_t nfds, cap;
};

/* ---- the parent, and K's, A's and A1's creates ---- */

/* The same create for K, A and A1: libnl, as the helper makes its macvtaps. */
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
        if (r < 0) {
                bench_log("netbroker-bench: cannot create macvtap %s: %s\n", name, nl_geterror(r));
                return nbd_netlink_nle_errno(r);
        }
        return 0;
}

/* Delete the parent (its macvtaps go with it) and make it again: every
 * method starts from an empty parent. */
static int parent_reset(struct ctx *c)
{
        int r = bench_link_delete(c->sk, "names: ", PARENT);

        if (r == 0)
                r = bench_veth_add(c->sk, "names: ", PARENT, PEER, false, &c->parent_ifindex);
        return r < 0 ? r : bench_expect_devices("names: after deleting " PARENT ": ", PREFIX, 0);
}

/* Wait until the CPUs have been idle (under 5% busy) for a 50 ms window, at
 * most 2 s: the kernel's work after a run (freeing devices, kdevtmpfs
 * removing their nodes) must not be paid by the next run. */
static void settle(void)
{
        struct timespec tick = {0, 50 * 1000 * 1000};
        unsigned long long v[2][8];

        for (int i = 0; i < 80; i++) {
                FILE *f = fopen("/proc/stat", "re");
                int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[i % 2][0],
                                   &v[i % 2][1], &v[i % 2][2], &v[i % 2][3], &v[i % 2][4],
                                   &v[i % 2][5], &v[i % 2][6], &v[i % 2][7])
                          : 0;
                unsigned long long busy = 0, total = 0;
                if (f)
                        fclose(f);
                if (n < 8)
                        return;
                for (int k = 0; i % 2 && k < 8; k++) {
                        unsigned long long d = v[1][k] - v[0][k];
                        total += d;
                        busy += k == 3 || k == 4 ? 0 : d; /* idle, iowait */
                }
                if (i % 2 && total && busy * 20 < total)
                        return;
                if (i % 2 == 0)
                        nanosleep(&tick, NULL);
        }
}

/* ---- K, A and A1 ---- */

/* 1: the name is taken, 0: free (ENODEV or ENXIO), or -errno. */
static int probe(int fd, const char *name)
{
        struct ifreq ifr = {0};

        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%.*s", IFNAMSIZ - 1, name);
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
                return 1;
        return errno == ENODEV || errno == ENXIO ? 0 : -errno;
}

/* libvirt's virNetDevExists: virNetDevSetupControl opens a datagram socket
 * of VIR_NETDEV_FAMILY (AF_PACKET in 2015, AF_UNIX today) and virSetInherit
 * makes it close-on-exec; then SIOCGIFFLAGS, then VIR_FORCE_CLOSE. */
static int probe_libvirt(int family, const char *name)
{
        int fd = socket(family, SOCK_DGRAM, 0), flags, r;

        if (fd < 0)
                return -errno;
        flags = fcntl(fd, F_GETFD);
        if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        r = probe(fd, name);
        close(fd);
        return r;
}

/* A method: its create, and for K, A and A1 how it finds a free name. */
struct names_method {
        const char *name;
        int (*run)(struct ctx *c, const struct names_method *nm, unsigned n, struct outcome *o);
        bool probes; /* A, A1: probe from macvtap0 on; K: the i-th name */
        int family; /* A: libvirt's socket of this family per probe; A1: 0, one kept */
        unsigned batch; /* B: 0, one request of N ops; B1: 1, N requests */
};

/* A, A1: the first name macvtapK that no device has, probing from K = 0. */
static int find_free(struct ctx *c, const struct names_method *nm, char *name, size_t len,
                     uint64_t *probes)
{
        int r;

        for (unsigned k = 0;; k++) {
                snprintf(name, len, PREFIX "%u", k);
                (*probes)++;
                r = nm->family ? probe_libvirt(nm->family, name) : probe(c->probe_fd, name);
                if (r <= 0)
                        break;
        }
        if (r < 0)
                bench_log("netbroker-bench: SIOCGIFFLAGS %s: %s\n", name, strerror(-r));
        return r;
}

static int run_local(struct ctx *c, const struct names_method *nm, unsigned n, struct outcome *o)
{
        char name[24]; /* "macvtap" and at most 4 digits (BENCH_NAMES_MAX_COUNT) */
        uint64_t t0 = bench_now_ns(), t;
        int r = 0;

        for (unsigned i = 0; i < n && r == 0; i++) {
                t = bench_now_ns();
                snprintf(name, sizeof(name), PREFIX "%u", i);
                if (nm->probes)
                        r = find_free(c, nm, name, sizeof(name), &o->probes);
                if (r == 0)
                        r = macvtap_create(c, name);
                if (r == 0)
                        r = bench_samples_add(&o->per_dev, (double)(bench_now_ns() - t) / 1000.0);
        }
        o->wall_us = (double)(bench_now_ns() - t0) / 1000.0;
        return r;
}

/* B's macvtap fds: each close waits for an RCU grace period (tap_release),
 * which a VM pays at its end, not at naming: they are closed after the
 * clock stops, by bench_close_fds. */
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

/* Up to 64 threads, whose waits overlap; what no thread took, this one. */
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

/* Op i made a device with a name and gave exactly one fd, a character
 * device: it is taken here and closed by close_kept(). */
static int take_fd(struct ctx *c, const char *who, nb_results *res, size_t i)
{
        int *p = bench_grow(c->fds, &c->cap, c->nfds, sizeof(*p)), fd = -1;
        struct stat sb;

        if (!p)
                return -ENOMEM;
        c->fds = p;
        if (nb_result_ifname(res, i)[0] && nb_result_fd_count(res, i) == 1)
                fd = nb_result_take_fd(res, i, 0);
        if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISCHR(sb.st_mode)) {
                bench_log("netbroker-bench: %sop %zu (ifname '%s'): not one character device "
                          "fd\n",
                          who, i, nb_result_ifname(res, i));
                if (fd >= 0)
                        close(fd);
                return -EPROTO;
        }
        c->fds[c->nfds++] = fd;
        return 0;
}

/* One request of `ops` MacvtapCreate ops, timed from building the batch
 * (a client pays for that per device too) to the reply with its fds. */
static int submit_timed(struct ctx *c, const char *who, unsigned ops, double *ret_us)
{
        uint64_t t0 = bench_now_ns(), t1;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int r = b ? 0 : -ENOMEM;

        for (unsigned i = 0; i < ops && r == 0; i++)
                r = nb_batch_macvtap_create(b, TEMPLATE, PARENT, NB_MACVLAN_BRIDGE, NULL, false);
        if (r == 0)
                r = bench_submit_all(c->b.conn, b, ops, who, &t1, &res);
        for (size_t i = 0; i < ops && r == 0; i++)
                r = take_fd(c, who, res, i);
        if (r == 0)
                *ret_us = (double)(t1 - t0) / 1000.0;
        /* Closes every fd not taken: none is left open here. */
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* B: one request; B1: the sum of its N requests' times, like B's. */
static int run_helper(struct ctx *c, const struct names_method *nm, unsigned n, struct outcome *o)
{
        unsigned per = nm->batch ? nm->batch : n;
        char who[16];
        double us;
        int r = 0;

        snprintf(who, sizeof(who), "names: %s: ", nm->name);
        o->wall_us = 0;
        for (unsigned i = 0; i < n && r == 0; i += per) {
                r = submit_timed(c, who, per, &us);
                if (r == 0)
                        o->wall_us += us;
                if (r == 0 && nm->batch)
                        r = bench_samples_add(&o->per_dev, us);
        }
        close_kept(c);
        return r;
}

static const struct names_method methods[N_METHODS] = {
        [M_K] = {"K", run_local},
        [M_A] = {"A", run_local, .probes = true, .family = AF_UNIX},
        [M_A1] = {"A1", run_local, .probes = true},
        [M_B] = {"B", run_helper},
        [M_B1] = {"B1", run_helper, .batch = 1},
};

/* ---- one method at one N ---- */

/* One method at one N, from an empty parent (the kernel's work after
 * deleting the last one settled), checked by counting the macvtaps: a
 * BENCH_CUSTOM fn, its time the run's wall time. */
static int run_method(struct bench_ctx *b, const struct bench_method *bm, bool timed,
                      double *ret_us)
{
        struct ctx *c = b->scenario;
        size_t k = (size_t)(bm - c->ms);
        const struct names_method *nm = &methods[k % N_METHODS];
        struct outcome *o = &c->out[k / N_METHODS][k % N_METHODS];
        char who[32];
        int r;

        (void)timed; /* no warm-up round: warm_up() is it */
        o->probes = 0;
        r = parent_reset(c);
        if (r == 0) {
                settle();
                r = nm->run(c, nm, o->n, o);
        }
        snprintf(who, sizeof(who), "names: %s@%u: ", nm->name, o->n);
        if (r == 0)
                r = bench_expect_devices(who, PREFIX, o->n);
        if (r < 0)
                return r;
        bench_log("names: %-2s N=%-5u %9.1f ms, %8.1f us/device, %llu probes\n", nm->name, o->n,
                  o->wall_us / 1000.0, o->wall_us / o->n, (unsigned long long)o->probes);
        *ret_us = o->wall_us;
        return 0;
}

/* ---- the scenario ---- */

static size_t plan(const struct bench_opts *o, unsigned *counts)
{
        if (o->n_counts) {
                memcpy(counts, o->counts, o->n_counts * sizeof(*counts));
                return o->n_counts;
        }
        if (o->count) {
                counts[0] = o->count;
                return 1;
        }
        counts[0] = 82;
        counts[1] = o->quick ? 200 : 1000;
        return 2;
}

/* Unrecorded: the kernel's first macvtap in this namespace, the helper's
 * first macvtap and its device directory. */
static int warm_up(struct ctx *c)
{
        double us;
        int r = parent_reset(c);

        if (r == 0)
                r = macvtap_create(c, PREFIX "0");
        if (r == 0)
                r = submit_timed(c, "names: warm-up: ", 1, &us);
        close_kept(c);
        return r;
}

/* ---- what one probe costs ---- */

struct probe_costs {
        double one_us; /* A1's: SIOCGIFFLAGS on a socket kept open */
        double libvirt_us; /* A's: virNetDevExists with AF_UNIX */
        double packet_us; /* 2015's: virNetDevExists with AF_PACKET; 0 if none */
        unsigned n_packet;
};

#define PROBES_TIMED 20000u
#define PACKET_PROBES_TIMED 10u

/* Probes of an existing name, as nearly all of A's are. */
static int measure_probes(struct ctx *c, struct probe_costs *pc)
{
        uint64_t t = bench_now_ns();
        int r = 0;

        for (unsigned i = 0; i < PROBES_TIMED && r >= 0; i++)
                r = probe(c->probe_fd, PARENT);
        pc->one_us = (double)(bench_now_ns() - t) / 1000.0 / PROBES_TIMED;
        t = bench_now_ns();
        for (unsigned i = 0; i < PROBES_TIMED && r >= 0; i++)
                r = probe_libvirt(AF_UNIX, PARENT);
        pc->libvirt_us = (double)(bench_now_ns() - t) / 1000.0 / PROBES_TIMED;
        if (r < 0) {
                bench_log("netbroker-bench: probing %s: %s\n", PARENT, strerror(-r));
                return r;
        }
        /* A few only: each costs an RCU grace period. */
        t = bench_now_ns();
        for (pc->n_packet = 0; pc->n_packet < PACKET_PROBES_TIMED; pc->n_packet++)
                if (probe_libvirt(AF_PACKET, PARENT) != 1)
                        break;
        pc->packet_us = pc->n_packet ? (double)(bench_now_ns() - t) / 1000.0 / pc->n_packet : 0;
        bench_log("names: one probe: %.2f us (one socket), %.2f us (libvirt, AF_UNIX), %.1f us "
                  "(libvirt 2015, AF_PACKET)\n",
                  pc->one_us, pc->libvirt_us, pc->packet_us);
        return 0;
}

/* wall: the runs' wall times, per method at each N as in c->ms. */
static int add_results(struct bench_report *r, struct ctx *c, const struct probe_costs *pc,
                       const unsigned *counts, size_t n_counts, const struct bench_summary *wall)
{
        static const char *const pairs[] = {"A/B", "A1/B", "A/B1", "A/K", "A1/K", "B/K"};
        static const char *const names[N_METHODS] = {"K", "A", "A1", "B", "B1"};
        double med[BENCH_MAX_COUNTS * N_METHODS];
        struct bench_summary s[N_METHODS];
        char name[48];
        int k = 0;

        /* Per-device time distributions where devices were timed one by one. */
        for (size_t i = 0; i < n_counts; i++) {
                for (int m = 0; m < N_METHODS && k == 0; m++)
                        if (m != M_B)
                                k = bench_samples_summarize(&c->out[i][m].per_dev, &s[m]);
                for (int m = 0; m < N_METHODS && k == 0; m++)
                        if (m != M_B)
                                k = bench_report_add_row(r, methods[m].name, programs[i], &s[m],
                                                         &s[M_A]);
        }
        for (size_t i = 0; i < n_counts * N_METHODS; i++)
                med[i] = wall[i].median_us;
        /* A/B first: the figures the issue asks for, "A/B@82", "A/B@1000". */
        for (size_t p = 0; p < BENCH_N(pairs) && k == 0; p++)
                for (size_t i = 0; i < n_counts && k == 0; i++) {
                        snprintf(name, sizeof(name), "@%u", counts[i]);
                        k = bench_report_ratios(r, pairs[p], name, names, &med[i * N_METHODS],
                                                N_METHODS);
                }
        for (size_t i = 0; i < n_counts && k == 0; i++) {
                struct bench_summary a = wall[i * N_METHODS + M_A], b = wall[i * N_METHODS + M_B];
                bench_summary_per(&a, counts[i]);
                bench_summary_per(&b, counts[i]);
                snprintf(name, sizeof(name), "%u macvtaps, per device", counts[i]);
                k = bench_report_add_compare(r, name, "A", &a, NULL, NULL, "B", &b);
        }
        return k ? k
                 : bench_report_add_note(r,
                                         "one probe: %.2f us (AF_UNIX, A), %.1f ms (AF_PACKET, "
                                         "2015: its close waits for RCU)",
                                         pc->libvirt_us, pc->packet_us / 1000.0);
}

/* The rtnetlink socket, A1's probe socket, then the helper. */
static int setup(struct ctx *c, const struct bench_opts *o, struct bench_report *r, unsigned max)
{
        static const char *const allow[] = {"/bin/true", NULL};
        static const char *const features[] = {"macvtap_create", "stats", NULL};
        /* B's reply holds N fds until they are closed. */
        struct rlimit rl;
        int k = getrlimit(RLIMIT_NOFILE, &rl) < 0 ? -errno : 0;

        if (k == 0 && rl.rlim_cur < max + 256) {
                rl.rlim_cur = max + 256;
                rl.rlim_max = rl.rlim_max < rl.rlim_cur ? rl.rlim_cur : rl.rlim_max;
                k = setrlimit(RLIMIT_NOFILE, &rl) < 0 ? -errno : 0;
        }
        if (k < 0) {
                bench_log("netbroker-bench: cannot raise RLIMIT_NOFILE to %u: %s\n", max + 256,
                          strerror(-k));
                return k;
        }
        k = bench_nl_open("names: ", &c->sk);
        if (k < 0)
                return k;
        c->probe_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (c->probe_fd < 0)
                return -errno;
        k = bench_ctx_start(&c->b, o, r, false, allow, NULL);
        return k < 0 ? k : bench_need_features(c->b.conn, "names: ", features);
}

int bench_names(const struct bench_opts *o, struct bench_report *r)
{
        struct bench_summary wall[BENCH_MAX_COUNTS * N_METHODS];
        unsigned counts[BENCH_MAX_COUNTS], max = 0;
        struct ctx *c = calloc(1, sizeof(*c));
        struct probe_costs pc = {0};
        size_t n_counts = plan(o, counts), n = n_counts * N_METHODS;
        unsigned reps = o->reps ? o->reps : 3;
        int k;

        r->title = "N macvtaps on a veth parent: probing for a free name versus netbrokerd";
        r->ratios_title = "ratios of wall times";
        for (size_t i = 0; i < n_counts; i++)
                max = counts[i] > max ? counts[i] : max;
        if (max > BENCH_NAMES_MAX_COUNT) {
                bench_log("netbroker-bench: names: at most %d devices (one request)\n",
                          BENCH_NAMES_MAX_COUNT);
                return -ERANGE;
        }
        if (!c)
                return -ENOMEM;
        /* Every method at every N, one BENCH_CUSTOM method each. */
        c->b.scenario = c;
        c->probe_fd = -1;
        for (size_t i = 0; i < n_counts; i++) {
                snprintf(programs[i], sizeof(programs[i]), "macvtap, N=%u", counts[i]);
                for (int m = 0; m < N_METHODS; m++) {
                        c->out[i][m].n = counts[i];
                        c->ms[i * N_METHODS + m] = (struct bench_method){
                                .name = methods[m].name,
                                .how = BENCH_CUSTOM,
                                .fn = run_method,
                                .program = programs[i],
                        };
                }
        }
        k = setup(c, o, r, max);
        if (k == 0)
                k = warm_up(c);
        if (k == 0)
                k = measure_probes(c, &pc);
        if (k == 0)
                k = bench_run_rounds(&c->b, "names", c->ms, n, 0, reps, wall, NULL);
        if (k == 0)
                k = add_results(r, c, &pc, counts, n_counts, wall);
        /* Leave no macvtap behind, in case the namespace outlives us. */
        if (c->sk)
                bench_link_delete(c->sk, "names: ", PARENT);
        bench_ctx_stop(&c->b);
        for (size_t i = 0; i < n; i++)
                bench_samples_clear(&c->out[i / N_METHODS][i % N_METHODS].per_dev);
        close_kept(c);
        free(c->fds);
        if (c->probe_fd >= 0)
                close(c->probe_fd);
        nl_socket_free(c->sk);
        free(c);
        return k;
}
