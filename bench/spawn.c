// SPDX-License-Identifier: LGPL-2.1-or-later
/* Scenarios "spawn": one command by fork/exec from the fat parent (A: close
 * loop, A2: close_range) against one Exec op a request (B) and 100 (C),
 * with their floor F, a bare posix_spawn from a small process; and
 * "roundtrip": a one-op Ping request (P) against fork/exec of /bin/true
 * (A, A2), the floor of either kind of work, and P's own floor F, a bare
 * ping-pong of frames of P's sizes over the helper's kind of socket. */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h" /* proto/: the frames, as both sides pack them */
#include "frame.h"
#include "netbroker.pb-c.h"

#define BATCH_OPS 100u
#define WARMUP 2u

static const char *const true_argv[] = {"true", NULL};
static const char *const iptables_argv[] = {"iptables", "-w", "-L", "-n", NULL};

/* /bin/true gets n commands per method, iptables-nft (milliseconds a run)
 * a quarter; C one request of 100 per 40 commands. */
static int bench_program(struct bench_ctx *c, const struct bench_cmd *p, const char *suffix,
                         unsigned n_cmds, unsigned n_batches, struct bench_report *r)
{
        struct bench_floor_proc fp = {.fd = -1};
        const char *args[8] = {"spawn", p->path};
        const struct bench_method ms[] = {
                {.name = "A", .how = BENCH_FORK_LOOP, .cmd = p},
                {.name = "A2", .how = BENCH_FORK_RANGE, .cmd = p},
                {.name = "B", .how = BENCH_BROKER_EXEC, .cmd = p},
                {.name = "C",
                 .how = BENCH_BROKER_EXEC,
                 .cmd = p,
                 .ops = BATCH_OPS,
                 .runs = n_batches},
                {.name = "F",
                 .how = BENCH_CUSTOM,
                 .cmd = p,
                 .fn = bench_floor_spawn_once,
                 .arg = &fp},
        };
        struct bench_summary s[5];
        char what[56];
        int k;

        for (size_t i = 1; p->argv[i] && i + 2 < BENCH_N(args); i++)
                args[i + 1] = p->argv[i];
        k = bench_floor_start(args, &fp);
        if (k == 0)
                k = bench_run_rounds(c, "spawn", ms, 5, WARMUP, n_cmds, s, NULL);
        bench_floor_stop(&fp);
        if (k == 0)
                k = bench_report_methods(r, ms, s, 5, "A/B A/C A2/B A2/C B/C B/F C/F", suffix);
        snprintf(what, sizeof(what), "%s, per command", p->label);
        if (k == 0)
                k = bench_report_add_compare(r, what, "A", &s[0], "A2", &s[1], "B", &s[2]);
        if (k == 0)
                k = bench_report_add_floor(r, what, "F", &s[4], "B", &s[2], false);
        snprintf(what, sizeof(what), "%s, per command, 100 a request", p->label);
        if (k == 0 && !*suffix)
                k = bench_report_add_compare(r, what, "A", &s[0], "A2", &s[1], "C", &s[3]);
        if (k == 0 && !*suffix)
                k = bench_report_add_floor(r, what, "F", &s[4], "C", &s[3], false);
        return k;
}

int bench_spawn(const struct bench_opts *o, struct bench_report *r)
{
        const struct bench_cmd t = {"/bin/true", "/bin/true", true_argv, NULL};
        const struct bench_cmd ipt = {"iptables -w -L -n", bench_find_tool("iptables"),
                                      iptables_argv, "Chain INPUT"};
        const char *allow[3] = {t.path, ipt.path, NULL};
        unsigned n = o->count ? o->count : o->quick ? 20 : 200;
        struct bench_ctx c = {.open_max = sysconf(_SC_OPEN_MAX)};
        int k;

        r->title = "cost per command, fork/exec from a fat parent versus netbrokerd";
        if (access(t.path, X_OK) < 0) {
                k = -errno;
                bench_log("netbroker-bench: %s: %s\n", t.path, strerror(-k));
                return k;
        }
        if (!ipt.path)
                bench_report_add_note(r, "iptables not found: its rows are skipped");
        k = bench_ctx_start(&c, o, r, true, allow, NULL, (const char *const[]){"exec", NULL});
        if (k < 0)
                return k;
        k = bench_program(&c, &t, "", n, n / 40 > 2 ? n / 40 : 2, r);
        if (k == 0 && ipt.path)
                k = bench_program(&c, &ipt, " iptables", n / 4 > 3 ? n / 4 : 3,
                                  (n / 40 + 1) / 2 > 1 ? (n / 40 + 1) / 2 : 1, r);
        bench_ctx_stop(&c);
        return k;
}

/* The frames of a one-op Ping request and its reply, as the client and the
 * helper pack them (an id of two bytes, as after a few hundred requests):
 * into *ret_req (the caller frees it) and their lengths. */
static int ping_frames(struct nbp_frame_out **ret_req, size_t *ret_reply_len)
{
        Netbroker__Ping ping = NETBROKER__PING__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[] = {&op};
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__ClientMessage cm = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Result res = NETBROKER__RESULT__INIT, *results[] = {&res};
        Netbroker__Reply reply = NETBROKER__REPLY__INIT;
        Netbroker__ServerMessage sm = NETBROKER__SERVER_MESSAGE__INIT;
        struct nbp_frame_out *q = NULL, *a = NULL;
        int r;

        op.op_case = NETBROKER__OP__OP_PING;
        op.ping = &ping;
        req.id = reply.id = 1000;
        req.n_ops = reply.n_results = 1;
        req.ops = ops;
        reply.results = results;
        cm.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        cm.request = &req;
        sm.msg_case = NETBROKER__SERVER_MESSAGE__MSG_REPLY;
        sm.reply = &reply;
        r = nbp_pack_frame(&cm.base, &q);
        if (r == 0)
                r = nbp_pack_frame(&sm.base, &a);
        if (r == 0) {
                *ret_req = q;
                *ret_reply_len = a->len;
        } else {
                nbp_frame_out_free(q);
        }
        nbp_frame_out_free(a);
        return r;
}

static struct bench_floor_proc pong = {.fd = -1};
static const struct bench_cmd true_cmd = {"fork, exec /bin/true", "/bin/true", true_argv, NULL};
static const struct bench_method round_methods[] = {
        {.name = "A", .how = BENCH_FORK_LOOP, .cmd = &true_cmd},
        {.name = "A2", .how = BENCH_FORK_RANGE, .cmd = &true_cmd},
        {.name = "P", .how = BENCH_BROKER_PING, .per_round = 100, .program = "one-op Ping batch"},
        {.name = "F",
         .how = BENCH_CUSTOM,
         .per_round = 100,
         .fn = bench_floor_pong_once,
         .arg = &pong,
         .program = "bare AF_UNIX ping-pong"},
};

/* The floor process ready to pong frames of a Ping's sizes. */
static int pong_start(struct nbp_frame_out **req)
{
        char q[16], a[16];
        size_t reply_len = 0;
        int k = ping_frames(req, &reply_len);

        snprintf(q, sizeof(q), "%zu", k == 0 ? (*req)->len : 0);
        snprintf(a, sizeof(a), "%zu", reply_len);
        if (k == 0)
                k = bench_floor_start((const char *const[]){"pong", q, a, NULL}, &pong);
        if (k == 0) {
                pong.req = (*req)->buf;
                pong.req_len = (*req)->len;
                pong.reply_len = reply_len;
                bench_log("roundtrip: F pongs a %zu-byte request frame with a %zu-byte reply\n",
                          (*req)->len, reply_len);
        }
        return k;
}

int bench_roundtrip(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const allow[] = {"/bin/true", NULL}, *names[] = {"A", "A2", "P", "F"};
        struct nbp_frame_out *req = NULL;
        struct bench_summary s[4];
        struct bench_ctx c = {0};
        double p50[4], p99[4];
        int k = bench_ctx_start(&c, o, r, true, allow, NULL, NULL);

        r->title = "latency of one request: a one-op Ping batch versus fork/exec of /bin/true";
        if (k == 0)
                k = pong_start(&req);
        if (k == 0)
                k = bench_run_rounds(&c, "roundtrip", round_methods, 4, 3,
                                     o->reps    ? o->reps
                                     : o->quick ? 30
                                                : 300,
                                     s, NULL);
        bench_floor_stop(&pong);
        nbp_frame_out_free(req);
        if (k == 0)
                k = bench_report_methods(r, round_methods, s, 4, NULL, NULL);
        for (int i = 0; i < 4; i++) {
                p50[i] = s[i].median_us;
                p99[i] = s[i].p99_us;
        }
        /* The ratios of p50 ("A/P p50"), then of p99, per baseline; P over
         * its floor. */
        for (int i = 0; i < 3 && k == 0; i++) {
                char spec[8];
                snprintf(spec, sizeof(spec), "%s/%s", names[i == 2 ? 2 : i], i == 2 ? "F" : "P");
                k = bench_report_ratios(r, spec, " p50", names, p50, 4);
                if (k == 0)
                        k = bench_report_ratios(r, spec, " p99", names, p99, 4);
        }
        if (k == 0)
                k = bench_report_add_compare(r, "empty round trip, p50", "A", &s[0], "A2", &s[1],
                                             "P", &s[2]);
        if (k == 0)
                k = bench_report_add_floor(r, "empty round trip", "F", &s[3], "P", &s[2], false);
        if (k == 0)
                k = bench_report_add_floor(r, "empty round trip", "F", &s[3], "P", &s[2], true);
        bench_ctx_stop(&c);
        return k;
}
