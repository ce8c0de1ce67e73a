/* Scenario "bandwidth": inbound and outbound limits on N veth interfaces:
 * libvirt's 8 tc processes per interface (virNetDevBandwidthSet, seeds/003)
 * from the fat parent (A: close loop, A2: close_range) against one request
 * of N BandwidthSet ops (B). A kernel part libvirt's command needs and this
 * kernel lacks is replaced by the same command without it, so A still forks
 * as often; every run starts with no limit and is checked with tc -j. */
#include "bench.h"

#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/pkt_sched.h>
#include <netlink/netlink.h>

#include "netbroker.h"

#define DEFAULT_IFACES 100u
#define QUICK_IFACES 10u
#define RUNS 3u
#define IF_PREFIX "vbw"
#define PEER_PREFIX "vbp"
/* The helper's IFB devices (helper/bandwidth.h, NB_BW_IFB_PREFIX). */
#define IFB_PREFIX "nbifb"
#define OUT_CAP 4096u
#define LIST_CAP (4u << 20)
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

enum step {
        S_DEL_ROOT,
        S_DEL_INGRESS,
        S_ROOT,
        S_CLASS,
        S_LEAF,
        S_FILTER,
        S_INGRESS,
        S_POLICE,
        N_STEPS
};

#define W_POLICE_HEAD "filter add dev X parent ffff: protocol all u32 match u32 0 0 "

struct step_def {
        const char *libvirt; /* what libvirt runs after "tc" */
        const char *fallback; /* NULL, or the same without what a kernel may lack */
        const char *lacks; /* that part, for the report */
        bool clear; /* virNetDevBandwidthClear's: exit status ignored */
};

static const struct step_def steps[N_STEPS] = {
        [S_DEL_ROOT] = {"qdisc del dev X root", NULL, NULL, true},
        [S_DEL_INGRESS] = {"qdisc del dev X ingress", NULL, NULL, true},
        [S_ROOT] = {"qdisc add dev X root handle 1: htb default 1", NULL, NULL, false},
        [S_CLASS] =
                {"class add dev X parent 1: classid 1:1 htb rate " STR(IN_AVERAGE) "kbps ceil " STR(
                         IN_PEAK) "kbps burst " STR(IN_BURST) "kb quantum " STR(IN_QUANTUM),
                 NULL, NULL, false},
        [S_LEAF] = {"qdisc add dev X parent 1:1 handle 2: sfq perturb 10",
                    "qdisc add dev X parent 1:1 handle 2: pfifo", "sch_sfq", false},
        [S_FILTER] = {"filter add dev X parent 1:0 protocol all prio 1 handle 1 fw flowid 1",
                      "filter add dev X parent 1:0 protocol all prio 1 u32 match u32 0 0 flowid "
                      "1:1",
                      "cls_fw", false},
        [S_INGRESS] = {"qdisc add dev X ingress", NULL, NULL, false},
        [S_POLICE] = {W_POLICE_HEAD "police rate " STR(OUT_AVERAGE) "kbps burst " STR(
                              OUT_BURST) "kb mtu 64kb drop flowid :1",
                      W_POLICE_HEAD "flowid :1", "act_police", false},
};

/* ---- the methods and the report ---- */

enum method { M_A, M_A2, M_B, N_METHODS };

struct ctx {
        const struct bench_opts *o;
        unsigned n;
        char ifname[BENCH_BANDWIDTH_MAX_IFACES][IFNAMSIZ];
        int ifindex[BENCH_BANDWIDTH_MAX_IFACES];
        const char *tc;
        struct bench_ctx b; /* the fat parent and the helper */
        struct nl_sock *sk;
        bool ready; /* the helper offers what the scenario needs */
        /* The variant of each step this kernel takes, and why. */
        const char *words[N_STEPS];
        char refused[N_STEPS][96];
        struct bench_samples per_if[N_METHODS]; /* us; A, A2: each interface alone; B: run / N */
        char out_buf[OUT_CAP];
};

/* ---- running tc ---- */

/* argv of one command for one interface, its words in buf; argv[0] is "tc". */
static void make_argv(const char *words, const char *ifname, char *buf, size_t len, char **argv)
{
        size_t i = 0;

        snprintf(buf, len, "%s", words);
        argv[i++] = "tc";
        for (char *w = strtok(buf, " "); w && i < MAX_ARGS - 1; w = strtok(NULL, " "))
                argv[i++] = strcmp(w, "X") == 0 ? (char *)ifname : w;
        argv[i] = NULL;
}

/* A clear that fails must have been refused by the kernel (tc prints its
 * extended ack as "Error: ..."), about something other than the device:
 * then it did what libvirt's does on a clean interface. The kernel says
 * "Cannot find specified qdisc" for an interface that never had an ingress
 * qdisc, "Invalid handle" for one that had one before. */
static bool clear_refusal_ok(const char *out)
{
        return strncmp(out, "Error: ", 7) == 0 && !strstr(out, "Cannot find device");
}

/* One command of step s, in the variant chosen, for interface i. */
static int exec_step(struct ctx *c, bool close_range, const char *words, unsigned i,
                     int *ret_status)
{
        char *argv[MAX_ARGS], w[256];
        size_t len;
        int r;

        make_argv(words, c->ifname[i], w, sizeof(w), argv);
        /* virCommandRun's way, stdout and stderr into c->out_buf. */
        r = bench_fork_exec(close_range ? BENCH_CLOSE_RANGE : BENCH_CLOSE_LOOP, c->b.open_max,
                            c->tc, argv, c->out_buf, sizeof(c->out_buf), &len, ret_status);
        if (r < 0)
                bench_log("netbroker-bench: bandwidth: cannot run tc: %s\n", strerror(-r));
        return r;
}

/* Run step s on interface i: 0, 1 when a clear failed as it may, or
 * -errno. */
static int run_step(struct ctx *c, bool close_range, enum step s, unsigned i)
{
        int st, r = exec_step(c, close_range, c->words[s], i, &st);

        if (r < 0)
                return r;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                return 0;
        if (steps[s].clear && WIFEXITED(st) && clear_refusal_ok(c->out_buf))
                return 1;
        bench_log("netbroker-bench: bandwidth: tc %s (X: %s): exit status %d%s: %s\n", c->words[s],
                  c->ifname[i], WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                  WIFSIGNALED(st) ? " (signal)" : "", c->out_buf);
        return -EIO;
}

/* ---- the helper ---- */

/* One request of n BandwidthSet ops (every interface's limits, checked in
 * place) or, `set` false, BandwidthClear ops: timed from building the
 * batch, which a client pays for too, to the reply. */
static int bandwidth_request(struct ctx *c, unsigned n, bool set, double *ret_us)
{
        const nb_rate in = {.average = IN_AVERAGE, .peak = IN_PEAK, .burst = IN_BURST};
        const nb_rate out = {.average = OUT_AVERAGE, .burst = OUT_BURST};
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
        for (unsigned i = 0; set && i < n && r == 0; i++) {
                r = nb_result_bandwidth(res, i, &mi, &mo);
                if (r == 0 && (!mi[0] || !mo[0])) {
                        bench_log("netbroker-bench: bandwidth: B: %s: no limit in place "
                                  "(inbound '%s', outbound '%s')\n",
                                  c->ifname[i], mi, mo);
                        r = -EPROTO;
                }
        }
        if (ret_us)
                *ret_us = (double)(t1 - t0) / 1000.0;
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* ---- the interfaces' state ---- */

struct tc_state {
        unsigned htb_roots; /* htb 1: at the root of a vbw interface */
        unsigned ingress; /* ingress qdiscs on vbw interfaces */
        unsigned leaves; /* qdiscs under 1:1 on vbw interfaces (A's) */
        unsigned ifb_htb_roots; /* htb 1: at the root of an IFB */
        unsigned ifbs; /* IFB devices */
};

/* The string value of "key" in one object of tc's JSON, into buf. */
static void json_value(const char *obj, const char *end, const char *key, char *buf, size_t len)
{
        const char *p = strstr(obj, key);
        size_t k;

        buf[0] = '\0';
        if (!p || p >= end)
                return;
        p += strlen(key);
        k = strcspn(p, "\"");
        snprintf(buf, len, "%.*s", (int)k, p);
}

static bool has_prefix(const char *s, const char *prefix)
{
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* `tc -j qdisc show`: one array of flat objects, each starting with its
 * "kind" (the nested "options" object has no "kind"). */
static char listing[LIST_CAP];

static int read_state(struct ctx *c, struct tc_state *ret)
{
        char *argv[] = {"tc", "-j", "qdisc", "show", NULL};
        static const char start[] = "{\"kind\":\"";
        char kind[32], dev[IFNAMSIZ + 1], handle[16], parent[16];
        size_t len;
        int r = bench_run_quiet("bandwidth: ", c->tc, argv, -1, listing, sizeof(listing), &len), k;

        if (r < 0)
                return r;
        if (len + 1 >= sizeof(listing)) {
                bench_log("netbroker-bench: bandwidth: tc -j qdisc show: over %u bytes\n",
                          LIST_CAP);
                return -E2BIG;
        }
        *ret = (struct tc_state){0};
        for (char *p = strstr(listing, start); p;) {
                char *next = strstr(p + 1, start), *end = next ? next : listing + len;
                bool root = strstr(p, "\"root\":true") && strstr(p, "\"root\":true") < end;
                json_value(p, end, start, kind, sizeof(kind));
                json_value(p, end, "\"dev\":\"", dev, sizeof(dev));
                json_value(p, end, "\"handle\":\"", handle, sizeof(handle));
                json_value(p, end, "\"parent\":\"", parent, sizeof(parent));
                if (has_prefix(dev, IF_PREFIX)) {
                        ret->htb_roots += root && !strcmp(kind, "htb") && !strcmp(handle, "1:");
                        ret->ingress += !strcmp(kind, "ingress");
                        ret->leaves += !strcmp(parent, "1:1");
                } else if (has_prefix(dev, IFB_PREFIX)) {
                        ret->ifb_htb_roots += root && !strcmp(kind, "htb") && !strcmp(handle, "1:");
                }
                p = next;
        }
        k = bench_count_devices(IFB_PREFIX);
        if (k < 0)
                return k;
        ret->ifbs = (unsigned)k;
        return 0;
}

/* Before every run: no limit anywhere, no IFB, every interface there. */
static int reset(struct ctx *c)
{
        struct tc_state s;
        int r = bandwidth_request(c, c->n, false, NULL);

        for (unsigned i = 0; i < c->n && r == 0; i++) {
                r = bench_qdisc_delete(c->sk, "bandwidth: ", c->ifindex[i], TC_H_ROOT);
                if (r == 0)
                        r = bench_qdisc_delete(c->sk, "bandwidth: ", c->ifindex[i], TC_H_INGRESS);
        }
        if (r == 0)
                r = bench_expect_devices("bandwidth: ", IF_PREFIX, c->n);
        if (r == 0)
                r = read_state(c, &s);
        if (r == 0 && (s.htb_roots || s.ingress || s.leaves || s.ifbs)) {
                bench_log("netbroker-bench: bandwidth: not clean after clearing: %u htb roots, "
                          "%u ingress, %u leaves, %u IFBs\n",
                          s.htb_roots, s.ingress, s.leaves, s.ifbs);
                r = -EPROTO;
        }
        return r;
}

/* ---- the methods: one run from a clean state, checked with tc -j ---- */

/* After a run: every interface limited both ways, in the method's way. */
static int check_limited(struct ctx *c, const char *name, bool ifb)
{
        unsigned ifbs = ifb ? c->n : 0, leaves = ifb ? 0 : c->n;
        struct tc_state s;
        int r = read_state(c, &s);

        if (r < 0)
                return r;
        if (s.htb_roots != c->n || s.ingress != c->n || s.leaves != leaves || s.ifbs != ifbs ||
            s.ifb_htb_roots != ifbs) {
                bench_log("netbroker-bench: bandwidth: after %s, tc -j qdisc show has %u htb "
                          "roots, %u ingress qdiscs, %u leaf qdiscs on the %u interfaces, %u "
                          "IFBs with %u htb roots (expected %u, %u, %u, %u, %u)\n",
                          name, s.htb_roots, s.ingress, s.leaves, c->n, s.ifbs, s.ifb_htb_roots,
                          c->n, c->n, leaves, ifbs, ifbs);
                return -EPROTO;
        }
        return 0;
}
/* A, A2: every interface's 8 commands, each interface timed alone. */
static int run_tc(struct ctx *c, enum method m, double *ret_us)
{
        int r = 0;

        *ret_us = 0;
        for (unsigned i = 0; i < c->n && r == 0; i++) {
                uint64_t t0 = bench_now_ns();
                double us;

                for (int s = 0; s < N_STEPS && r >= 0; s++)
                        r = run_step(c, m == M_A2, (enum step)s, i);
                us = (double)(bench_now_ns() - t0) / 1000.0;
                *ret_us += us;
                r = r < 0 ? r : bench_samples_add(&c->per_if[m], us);
        }
        return r;
}

/* B: one request of N BandwidthSet ops; its row per interface. */
static int run_helper(struct ctx *c, enum method m, double *ret_us)
{
        int r = bandwidth_request(c, c->n, true, ret_us);

        return r < 0 ? r : bench_samples_add(&c->per_if[m], *ret_us / c->n);
}

struct bw_method {
        int (*run)(struct ctx *c, enum method m, double *ret_us);
        bool ifb; /* B: limited in the helper's way, an IFB each; A, A2: leaf qdiscs */
};

static const struct bw_method kinds[N_METHODS] = {
        [M_A] = {run_tc, false},
        [M_A2] = {run_tc, false},
        [M_B] = {run_helper, true},
};

static int run_method(struct bench_ctx *b, const struct bench_method *bm, bool timed,
                      double *ret_us)
{
        struct ctx *c = b->scenario;
        const struct bw_method *k = bm->arg;
        int r = reset(c);

        (void)timed; /* no warm-up round: choose_commands() and warm_up_helper() are it */
        if (r == 0)
                r = k->run(c, (enum method)(k - kinds), ret_us);
        return r < 0 ? r : check_limited(c, bm->name, k->ifb);
}

static const struct bench_method methods[N_METHODS] = {
        {"A", BENCH_CUSTOM, .fn = run_method, .arg = &kinds[M_A], .program = "8 tc, per interface"},
        {"A2", BENCH_CUSTOM, .fn = run_method, .arg = &kinds[M_A2],
         .program = "8 tc, per interface"},
        {"B", BENCH_CUSTOM, .fn = run_method, .arg = &kinds[M_B], .program = "batch / N"},
};

/* ---- before anything is timed ---- */

/* Which of libvirt's commands this kernel takes: each on vbw0, in order,
 * from a clean state; a refused one is replaced by its fallback, which must
 * succeed. This also brings tc into the page cache and loads what the
 * kernel loads on first use. */
static int choose_commands(struct ctx *c)
{
        int r = reset(c), st;

        for (int s = 0; s < N_STEPS && r >= 0; s++) {
                c->words[s] = steps[s].libvirt;
                if (steps[s].fallback) {
                        r = exec_step(c, false, steps[s].libvirt, 0, &st);
                        if (r < 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 0))
                                continue;
                        /* The first line of its output. */
                        snprintf(c->refused[s], sizeof(c->refused[s]), "%.*s",
                                 (int)strcspn(c->out_buf, "\n"), c->out_buf);
                        bench_log("bandwidth: no %s in this kernel (libvirt's command: %s): "
                                  "the same command without it runs instead\n",
                                  steps[s].lacks, c->refused[s]);
                        c->words[s] = steps[s].fallback;
                }
                r = run_step(c, false, (enum step)s, 0);
        }
        return r < 0 ? r : 0;
}

/* The helper's first BandwidthSet finds out which leaf qdiscs the kernel
 * has: once per helper, not per interface. */
static int warm_up_helper(struct ctx *c)
{
        double us;
        int r = reset(c);

        if (r == 0)
                r = bandwidth_request(c, 1, true, &us);
        return r;
}

/* ---- the report ---- */

/* The one note: what this kernel lacked, so that A ran another command. */
static int add_note(struct bench_report *r, const struct ctx *c)
{
        char lacks[96] = "";
        size_t o = 0;

        for (int s = 0; s < N_STEPS; s++)
                if (steps[s].lacks && c->words[s] != steps[s].libvirt && o < sizeof(lacks))
                        o += (size_t)snprintf(lacks + o, sizeof(lacks) - o, " %s", steps[s].lacks);
        return o ? bench_report_add_note(r, "A: the kernel lacks%s: those commands ran without it",
                                         lacks)
                 : 0;
}

/* t: the runs' totals; the rows are per interface. */
static int add_results(struct bench_report *r, struct ctx *c, const struct bench_summary *t)
{
        static const char *const names[N_METHODS] = {"A", "A2", "B"};
        struct bench_summary s[N_METHODS];
        double med[N_METHODS];
        int k = 0;

        for (int m = 0; m < N_METHODS && k == 0; m++) {
                med[m] = t[m].median_us;
                k = bench_samples_summarize(&c->per_if[m], &s[m]);
        }
        if (k == 0)
                k = bench_report_methods(r, methods, s, N_METHODS, NULL, NULL);
        if (k == 0)
                k = bench_report_ratios(r, "A/B A2/B A/A2", NULL, names, med, N_METHODS);
        if (k == 0)
                k = add_note(r, c);
        return k;
}

/* ---- the scenario ---- */

static int setup(struct ctx *c, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL};
        static const char *const features[] = {"bandwidth_set", "bandwidth_clear", "stats", NULL};
        char peer[IFNAMSIZ];
        int k;

        c->tc = bench_find_tool("tc");
        if (!c->tc) {
                bench_log("netbroker-bench: bandwidth: tc not found\n");
                return -ENOENT;
        }
        k = bench_nl_open("bandwidth: ", &c->sk);
        /* vbwI and its peer vbpI, both up, as a guest's tap is. */
        for (unsigned i = 0; i < c->n && k == 0; i++) {
                snprintf(c->ifname[i], IFNAMSIZ, IF_PREFIX "%u", i);
                snprintf(peer, sizeof(peer), PEER_PREFIX "%u", i);
                k = bench_veth_add(c->sk, "bandwidth: ", c->ifname[i], peer, true, &c->ifindex[i]);
        }
        if (k < 0)
                return k;
        c->b.open_max = sysconf(_SC_OPEN_MAX);
        k = bench_ctx_start(&c->b, c->o, r, true, allow, NULL);
        if (k < 0)
                return k;
        k = bench_need_features(c->b.conn, "bandwidth: ", features);
        c->ready = k == 0;
        return k;
}

static void teardown(struct ctx *c)
{
        /* The namespace goes with us; leave no IFB in case it does not. */
        if (c->ready)
                (void)bandwidth_request(c, c->n, false, NULL);
        bench_ctx_stop(&c->b);
        nl_socket_free(c->sk);
        for (int m = 0; m < N_METHODS; m++)
                bench_samples_clear(&c->per_if[m]);
        free(c);
}

int bench_bandwidth(const struct bench_opts *o, struct bench_report *r)
{
        struct bench_summary t[N_METHODS];
        unsigned n = o->count ? o->count : o->quick ? QUICK_IFACES : DEFAULT_IFACES;
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
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->o = o;
        c->b.scenario = c;
        c->n = n;
        bench_log("bandwidth: %u interfaces (%s0..%s%u), %u runs of each method\n", c->n, IF_PREFIX,
                  IF_PREFIX, c->n - 1, RUNS);
        k = setup(c, r);
        if (k == 0)
                k = choose_commands(c);
        if (k == 0)
                k = warm_up_helper(c);
        if (k == 0)
                k = bench_run_rounds(&c->b, "bandwidth", methods, N_METHODS, 0, RUNS, t, NULL);
        if (k == 0)
                k = add_results(r, c, t);
        teardown(c);
        return k;
}
