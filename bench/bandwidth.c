// SPDX-License-Identifier: LGPL-2.1-or-later
/* Scenario "bandwidth": inbound and outbound limits on N veth interfaces:
 * libvirt's 8 tc processes per interface (virNetDevBandwidthSet, seeds/003)
 * from the fat parent (A: close loop, A2: close_range) against one request
 * of N BandwidthSet ops (B). A kernel part libvirt's command needs and this
 * kernel lacks is replaced by the same command without it, so A still forks
 * as often; every run starts with no limit and is checked with tc. */
#include "bench.h"

#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netbroker.h"

#define DEFAULT_IFACES 100u
#define QUICK_IFACES 10u
#define RUNS 3u
#define IF_PREFIX "vbw"
#define PEER_PREFIX "vbp"
/* IFB devices of older helpers (helper/bandwidth.h, NB_BW_IFB_PREFIX):
 * none may be there, the helper makes none. */
#define IFB_PREFIX "nbifb"
#define MAX_ARGS 32

/* The rates of every interface, libvirt's units (kB = 1024 bytes): inbound
 * average 1024 kB/s, peak 2048, burst 256 kB; outbound average 1024, burst
 * 256. libvirt writes them as "%llukbps" and "%llukb". */
#define IN_AVERAGE 1024
#define IN_PEAK 2048
#define IN_BURST 256
#define OUT_AVERAGE 1024
#define OUT_BURST 256
/* virNetDevBandwidthCmdAddOptimalQuantum: average * 1024 / 8 / 1500. */
#define IN_QUANTUM 87
_Static_assert(IN_QUANTUM == IN_AVERAGE * 1024 / 8 / 1500, "libvirt's quantum");

#define XSTR(x) #x
#define STR(x) XSTR(x)

/* ---- libvirt's commands, in its order; X is the interface ---- */

#define W_POLICE_HEAD "filter add dev X parent ffff: protocol all u32 match u32 0 0 "

struct step_def {
        const char *libvirt; /* what libvirt runs after "tc" */
        const char *fallback; /* NULL, or the same without what a kernel may lack */
        const char *lacks; /* that part, for the report */
        bool clear; /* virNetDevBandwidthClear's: exit status ignored */
};

#define N_STEPS 8

/* The clears, htb root, class, leaf, filter, ingress qdisc, police. */
static const struct step_def steps[N_STEPS] = {
        {"qdisc del dev X root", NULL, NULL, true},
        {"qdisc del dev X ingress", NULL, NULL, true},
        {"qdisc add dev X root handle 1: htb default 1", NULL, NULL, false},
        {"class add dev X parent 1: classid 1:1 htb rate " STR(IN_AVERAGE) "kbps ceil " STR(
                 IN_PEAK) "kbps burst " STR(IN_BURST) "kb quantum " STR(IN_QUANTUM),
         NULL, NULL, false},
        {"qdisc add dev X parent 1:1 handle 2: sfq perturb 10",
         "qdisc add dev X parent 1:1 handle 2: pfifo", "sch_sfq", false},
        {"filter add dev X parent 1:0 protocol all prio 1 handle 1 fw flowid 1",
         "filter add dev X parent 1:0 protocol all prio 1 u32 match u32 0 0 flowid "
         "1:1",
         "cls_fw", false},
        {"qdisc add dev X ingress", NULL, NULL, false},
        {W_POLICE_HEAD
         "police rate " STR(OUT_AVERAGE) "kbps burst " STR(OUT_BURST) "kb mtu 64kb drop flowid :1",
         W_POLICE_HEAD "flowid :1", "act_police", false},
};

/* ---- the methods ---- */

enum method { M_A, M_A2, M_B, N_METHODS };

struct ctx {
        unsigned n;
        char ifname[BENCH_BANDWIDTH_MAX_IFACES][IFNAMSIZ];
        const char *tc;
        struct bench_ctx b; /* the helper, spawned from the fat parent */
        bool ready; /* the helper offers what the scenario needs */
        const char *words[N_STEPS]; /* the variant of each step this kernel takes */
        struct bench_samples per_if[N_METHODS]; /* A, A2: each interface alone; B: run / N */
};

static char out_buf[4u << 20]; /* a command's output, a listing */

/* Step words (libvirt's or its fallback) on interface i, the fork loop or
 * close_range. 0, 1 when a clear failed as it may, or -errno. A clear may
 * fail when the kernel refused it (tc prints its extended ack as "Error:
 * ...") about anything but the device: "Cannot find specified qdisc" on an
 * interface that never had an ingress qdisc, "Invalid handle" on one that
 * had. With `quiet`, a failure is only returned. */
static int run_step(struct ctx *c, bool close_range, const char *words, bool clear, unsigned i,
                    bool quiet)
{
        char *argv[MAX_ARGS] = {"tc"}, w[256];
        size_t k = 1, len;
        bool ok;
        int r;

        snprintf(w, sizeof(w), "%s", words);
        for (char *t = strtok(w, " "); t && k < MAX_ARGS - 1; t = strtok(NULL, " "))
                argv[k++] = strcmp(t, "X") == 0 ? c->ifname[i] : t;
        argv[k] = NULL;
        r = bench_run_cmd(&c->b, close_range ? BENCH_FORK_RANGE : BENCH_FORK_LOOP, c->tc, argv,
                          out_buf, sizeof(out_buf), &len, &ok);
        if (r < 0 || ok)
                return r;
        if (clear && strncmp(out_buf, "Error: ", 7) == 0 && !strstr(out_buf, "Cannot find device"))
                return 1;
        if (!quiet)
                bench_log("netbroker-bench: bandwidth: tc %s (X: %s) failed: %s\n", words,
                          c->ifname[i], out_buf);
        return -EIO;
}

/* One request of n BandwidthSet ops (every interface's limits, checked in
 * place) or, `set` false, BandwidthClear ops: timed from building the
 * batch, which a client pays for too, to the reply. */
static int bandwidth_request(struct ctx *c, unsigned n, bool set, double *ret_us)
{
        const nb_rate in = {
                .size = sizeof(nb_rate), .average = IN_AVERAGE, .peak = IN_PEAK, .burst = IN_BURST};
        const nb_rate out = {.size = sizeof(nb_rate), .average = OUT_AVERAGE, .burst = OUT_BURST};
        uint64_t t0 = bench_now_ns(), t1 = t0;
        nb_results *res = NULL;
        const char *mi, *mo;
        nb_batch *b = nb_batch_new();
        int r = b ? 0 : -ENOMEM;

        for (unsigned i = 0; i < n && r == 0; i++)
                r = set ? nb_batch_bandwidth_set(b, c->ifname[i], &in, &out)
                        : nb_batch_bandwidth_clear(b, c->ifname[i]);
        if (r == 0)
                r = bench_submit_all(
                        c->b.conn, b, n,
                        set ? "bandwidth: BandwidthSet: " : "bandwidth: BandwidthClear: ", &t1,
                        &res);
        for (unsigned i = 0; set && i < n && r == 0; i++)
                if ((r = nb_result_bandwidth(res, i, &mi, &mo)) == 0 && (!mi[0] || !mo[0])) {
                        bench_log("netbroker-bench: bandwidth: B: %s: no limit in place "
                                  "(inbound '%s', outbound '%s')\n",
                                  c->ifname[i], mi, mo);
                        r = -EPROTO;
                }
        if (ret_us)
                *ret_us = (double)(t1 - t0) / 1000.0;
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* The qdiscs `tc qdisc show` lists: htb 1: (libvirt's) or 4e42: (the
 * helper's) at the root, ingress, and leaves under 1:1 or 4e42:1 on the
 * vbw interfaces; htb 1: at the root of an IFB; IFBs. */
struct tc_state {
        unsigned htb_roots, ingress, leaves, ifb_htb_roots, ifbs;
};

static int read_state(struct ctx *c, struct tc_state *ret)
{
        char *argv[] = {"tc", "qdisc", "show", NULL};
        char kind[32], handle[16], dev[IFNAMSIZ + 1], where[16], parent[16];
        size_t len;
        int r = bench_run_quiet("bandwidth: ", c->tc, argv, -1, out_buf, sizeof(out_buf), &len);

        if (r == 0 && len + 1 >= sizeof(out_buf)) {
                bench_log("netbroker-bench: bandwidth: tc qdisc show: over %zu bytes\n",
                          sizeof(out_buf));
                r = -E2BIG;
        }
        *ret = (struct tc_state){0};
        for (char *p = out_buf; r == 0 && p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                int k = sscanf(p, "qdisc %31s %15s dev %16s %15s %15s", kind, handle, dev, where,
                               parent);
                /* libvirt's tc makes htb 1:, the helper its own 4e42:. */
                bool htb_root = k >= 4 && strcmp(kind, "htb") == 0 &&
                                (strcmp(handle, "1:") == 0 || strcmp(handle, "4e42:") == 0) &&
                                strcmp(where, "root") == 0;
                if (k >= 4 && strncmp(dev, IF_PREFIX, strlen(IF_PREFIX)) == 0) {
                        ret->htb_roots += htb_root;
                        ret->ingress += strcmp(kind, "ingress") == 0;
                        ret->leaves +=
                                k == 5 && strcmp(where, "parent") == 0 &&
                                (strcmp(parent, "1:1") == 0 || strcmp(parent, "4e42:1") == 0);
                } else if (k >= 4 && strncmp(dev, IFB_PREFIX, strlen(IFB_PREFIX)) == 0) {
                        ret->ifb_htb_roots += htb_root;
                }
        }
        if (r == 0 && (r = bench_count_devices(IFB_PREFIX)) >= 0) {
                ret->ifbs = (unsigned)r;
                r = 0;
        }
        return r;
}

/* Every interface limited both ways (A's ingress qdiscs and leaves), or
 * none, as want; never an IFB; `after` starts the message otherwise. */
static int check_state(struct ctx *c, const char *after, bool limited, bool helper)
{
        /* The helper polices what enters an interface with nftables (no
         * ingress qdisc, no IFB: helper/bw_nft.h); tc's way needs an
         * ingress qdisc per interface. */
        unsigned want[5] = {limited ? c->n : 0, limited && !helper ? c->n : 0,
                            limited && !helper ? c->n : 0, 0, 0};
        struct tc_state s;
        int r = read_state(c, &s);

        if (r < 0 || (s.htb_roots == want[0] && s.ingress == want[1] && s.leaves == want[2] &&
                      s.ifb_htb_roots == want[3] && s.ifbs == want[4]))
                return r;
        bench_log("netbroker-bench: bandwidth: after %s, tc qdisc show has %u htb roots, %u "
                  "ingress qdiscs, %u leaf qdiscs on the %u interfaces, %u IFB htb roots, %u IFBs "
                  "(expected %u, %u, %u, %u, %u)\n",
                  after, s.htb_roots, s.ingress, s.leaves, c->n, s.ifb_htb_roots, s.ifbs, want[0],
                  want[1], want[2], want[3], want[4]);
        return -EPROTO;
}

/* Before every run: no limit anywhere, no IFB, every interface there. */
static int reset(struct ctx *c)
{
        int r = bandwidth_request(c, c->n, false, NULL);

        if (r == 0)
                r = bench_veths(c->b.conn, "bandwidth: ", IF_PREFIX, PEER_PREFIX, c->n, true, NULL);
        if (r == 0)
                r = bench_expect_devices("bandwidth: ", IF_PREFIX, c->n);
        return r < 0 ? r : check_state(c, "clearing", false, false);
}

/* The runner's method, from a clean state, checked after: A, A2 every
 * interface's 8 commands, each interface timed alone; B one request of N
 * BandwidthSet ops, its row per interface. No warm-up round:
 * choose_commands() and the helper's first BandwidthSet are it. */
static int run_method(struct bench_ctx *b, const struct bench_method *bm, bool timed,
                      double *ret_us)
{
        struct ctx *c = b->scenario;
        enum method m = (enum method)(bm - (const struct bench_method *)bm->arg);
        int r = reset(c);

        (void)timed;
        *ret_us = 0;
        for (unsigned i = 0; m != M_B && i < c->n && r == 0; i++) {
                uint64_t t0 = bench_now_ns();
                double us;
                for (int s = 0; s < N_STEPS && r >= 0; s++)
                        r = run_step(c, m == M_A2, c->words[s], steps[s].clear, i, false);
                us = (double)(bench_now_ns() - t0) / 1000.0;
                *ret_us += us;
                r = r < 0 ? r : bench_samples_add(&c->per_if[m], us);
        }
        if (m == M_B && r == 0)
                r = bandwidth_request(c, c->n, true, ret_us);
        if (m == M_B && r == 0)
                r = bench_samples_add(&c->per_if[m], *ret_us / c->n);
        return r < 0 ? r : check_state(c, bm->name, true, m == M_B);
}

static const struct bench_method methods[N_METHODS] = {
        {"A", BENCH_CUSTOM, .fn = run_method, .arg = methods, .program = "8 tc, per interface"},
        {"A2", BENCH_CUSTOM, .fn = run_method, .arg = methods, .program = "8 tc, per interface"},
        {"B", BENCH_CUSTOM, .fn = run_method, .arg = methods, .program = "batch / N"},
};

/* ---- the scenario ---- */

/* The veth pairs vbwI/vbpI, both up as a guest's tap is; the helper. Then
 * which of libvirt's commands this kernel takes: each on vbw0, in order,
 * from a clean state; a refused one is replaced by its fallback, which
 * must succeed (this also brings tc into the page cache and loads what the
 * kernel loads on first use). Last, the helper's first BandwidthSet finds
 * out which leaf qdiscs the kernel has: once per helper. */
static int setup(struct ctx *c, const struct bench_opts *o, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL};
        static const char *const features[] = {"bandwidth_set", "bandwidth_clear", "veth_create",
                                               "link_set",      "link_delete",     NULL};
        char lacks[96] = "";
        size_t n = 0;
        double us;
        int k = (c->tc = bench_find_tool("tc")) ? 0 : -ENOENT;

        if (k < 0)
                bench_log("netbroker-bench: bandwidth: tc not found\n");
        for (unsigned i = 0; i < c->n; i++)
                snprintf(c->ifname[i], IFNAMSIZ, IF_PREFIX "%u", i);
        c->b.open_max = sysconf(_SC_OPEN_MAX);
        if (k == 0)
                k = bench_ctx_start(&c->b, o, r, true, allow, NULL, features);
        if (k == 0)
                k = bench_veths(c->b.conn, "bandwidth: ", IF_PREFIX, PEER_PREFIX, c->n, true, NULL);
        c->ready = k == 0;
        if (k == 0)
                k = reset(c);
        for (int s = 0; s < N_STEPS && k >= 0; s++) {
                c->words[s] = steps[s].libvirt;
                if (steps[s].fallback &&
                    run_step(c, false, steps[s].libvirt, steps[s].clear, 0, true) == 0)
                        continue;
                if (steps[s].fallback) {
                        bench_log("bandwidth: no %s in this kernel (libvirt's command: %.*s): "
                                  "the same command without it runs instead\n",
                                  steps[s].lacks, (int)strcspn(out_buf, "\n"), out_buf);
                        c->words[s] = steps[s].fallback;
                        n += (size_t)snprintf(lacks + n, sizeof(lacks) - n, " %s", steps[s].lacks);
                }
                k = run_step(c, false, c->words[s], steps[s].clear, 0, false);
        }
        if (k >= 0)
                k = reset(c);
        if (k == 0)
                k = bandwidth_request(c, 1, true, &us);
        /* The one note: what this kernel lacked, so that A ran another command. */
        if (k == 0 && n)
                k = bench_report_add_note(r, "A: the kernel lacks%s: those commands ran without it",
                                          lacks);
        return k;
}

int bench_bandwidth(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const names[N_METHODS] = {"A", "A2", "B"};
        struct bench_summary t[N_METHODS], s[N_METHODS];
        unsigned n = o->count ? o->count : o->quick ? QUICK_IFACES : DEFAULT_IFACES;
        double med[N_METHODS];
        struct ctx *c;
        int k;

        r->title = "inbound and outbound limits on N interfaces: libvirt's tc processes versus "
                   "one batch";
        r->ratios_title = "ratios of median totals";
        if (n > BENCH_BANDWIDTH_MAX_IFACES) {
                bench_log("netbroker-bench: bandwidth: at most %d interfaces\n",
                          BENCH_BANDWIDTH_MAX_IFACES);
                return -ERANGE;
        }
        if (!(c = calloc(1, sizeof(*c))))
                return -ENOMEM;
        c->b.scenario = c;
        c->n = n;
        bench_log("bandwidth: %u interfaces (%s0..%s%u), %u runs of each method\n", c->n, IF_PREFIX,
                  IF_PREFIX, c->n - 1, RUNS);
        k = setup(c, o, r);
        if (k == 0)
                k = bench_run_rounds(&c->b, "bandwidth", methods, N_METHODS, 0, RUNS, t, NULL);
        /* The rows per interface, the ratios of the runs' totals. */
        for (int m = 0; m < N_METHODS && k == 0; m++) {
                med[m] = t[m].median_us;
                k = bench_samples_summarize(&c->per_if[m], &s[m]);
        }
        if (k == 0)
                k = bench_report_methods(r, methods, s, N_METHODS, NULL, NULL);
        if (k == 0)
                k = bench_report_ratios(r, "A/B A2/B A/A2", NULL, names, med, N_METHODS);
        if (k == 0)
                k = bench_report_add_compare(r, methods[M_A].program, "A", &s[M_A], "A2", &s[M_A2],
                                             "B", &s[M_B]);
        /* The namespace goes with us; leave no limit in case it does not. */
        if (c->ready)
                (void)bandwidth_request(c, c->n, false, NULL);
        bench_ctx_stop(&c->b);
        for (int m = 0; m < N_METHODS; m++)
                bench_samples_clear(&c->per_if[m]);
        free(c);
        return k;
}
