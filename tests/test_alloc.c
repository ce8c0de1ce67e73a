// SPDX-License-Identifier: LGPL-2.1-or-later
/* Allocation failure, as dbus-daemon tests its out-of-memory paths: a
 * representative request (every op kind, built by libnetbroker as a client
 * builds it: tests/fuzz/requests.c) is served by the real server.c and
 * dispatcher over a socketpair, with the fake kernel behind them
 * (tests/fuzz/fake_kernel.h), and the Nth allocation on the helper's side
 * fails, for N = 1, 2, ... until a run needs no failure (alloc_hook.h).
 * Each run starts from a fresh helper and must end
 *   - in a reply with an error in it, or an Error and a closed connection,
 *     or a closed connection, never a crash or a hang;
 *   - or, where the failure was absorbed, in exactly the reply of a run
 *     without failures;
 * and must leave the fake kernel as it was (a failed batch undoes what it
 * made) or as the whole batch leaves it, every allocation freed (counted by
 * the hook; LeakSanitizer too in the ASan build) and no fd open. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <libnftnl/common.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define NB_LSAN 1
#endif

#include "alloc_hook.h"
#include "dump_hook.h"
#include "eintr_hook.h"
#include "backend_check.h"
#include "bandwidth.h"
#include "codec.h"
#include "config.h"
#include "dispatch.h"
#include "fake_kernel.h"
#include "firewall.h"
#include "frame.h"
#include "fw_kernel.h"
#include "fw_table.h"
#include "link.h"
#include "log.h"
#include "loop.h"
#include "nfsock.h"
#include "requests.h"
#include "server.h"
#include "stats.h"

#define REQUEST_ID 77
#define MAX_ITERATIONS 1000
#define STATE_LEN 8192

enum outcome_kind { OUT_NONE, OUT_REPLY, OUT_ERROR, OUT_CLOSED };

struct outcome {
        enum outcome_kind kind;
        Netbroker__ServerMessage *msg; /* the Reply or Error */
};

/* One helper, its client end and the fake kernel behind it. */
struct rig {
        struct nbd_loop *loop;
        struct nbd_server *srv;
        struct nbd_links *links;
        int client;
        struct nbp_frame_reader rd;
};

static struct nbd_config cfg;

static void tick(void *data)
{
        (void)data;
}

/* One loop iteration of the helper, never blocking, counted by the hook. */
static void step(struct rig *r)
{
        static struct nbd_timer t;

        nbd_timer_arm(r->loop, &t, 0, tick, NULL);
        nbd_loop_iterate(r->loop);
}

/* Read what the helper sent, as the client (not counted): fds are closed,
 * the first Hello, Reply or Error ends it. */
static void client_read(struct rig *r, struct outcome *o)
{
        nbt_alloc_pause();
        while (o->kind == OUT_NONE) {
                int fds[NBP_FRAME_MAX_FDS];
                uint8_t *body;
                size_t len, nfds;
                bool truncated;
                Netbroker__ServerMessage *m;
                int n = nbp_frame_read(r->client, &r->rd);

                if (n == 0)
                        break;
                if (n < 0) {
                        o->kind = OUT_CLOSED;
                        break;
                }
                nbp_frame_reader_take(&r->rd, &body, &len, fds, &nfds, &truncated);
                nbp_close_fds(fds, nfds);
                m = netbroker__server_message__unpack(NULL, len, body);
                free(body);
                ck_assert_msg(m != NULL, "the helper sent a frame that is not a ServerMessage");
                if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_FDS) {
                        netbroker__server_message__free_unpacked(m, NULL);
                        continue;
                }
                o->kind =
                        m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_ERROR ? OUT_ERROR : OUT_REPLY;
                o->msg = m;
        }
        nbt_alloc_resume();
}

/* Run the helper until the client has an outcome. No Check assertion here:
 * Check allocates for each, and these allocations must not count. */
static void pump(struct rig *r, struct outcome *o)
{
        for (int i = 0; i < MAX_ITERATIONS && o->kind == OUT_NONE; i++) {
                step(r);
                client_read(r, o);
        }
}

static struct nbp_frame_out *make_frame(const uint8_t *body, size_t len, const int *fds,
                                        size_t nfds)
{
        struct nbp_frame_out *f;

        ck_assert_int_eq(nbp_frame_out_new(len, &f), 0);
        memcpy(f->buf + NBP_FRAME_HEADER_SIZE, body, len);
        for (size_t i = 0; i < nfds; i++)
                f->fds[f->nfds++] = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
        return f;
}

static void send_frame(int fd, struct nbp_frame_out *f)
{
        ck_assert_int_eq(nbp_frame_write(fd, f), 1);
        nbp_frame_out_free(f);
}

/* What main.c runs at the end of each job. */
static void flush_gone(void *links)
{
        nbd_fake_backend.links.flush_gone(links);
}

static void flush_ifbs(void *bw)
{
        nbd_fake_backend.bw.flush(bw);
}

/* A helper that has answered Hello. Not counted. */
static void rig_up(struct rig *r)
{
        struct outcome o = {0};
        struct nbd_fw *fw;
        struct nbd_bw *bw;
        uint8_t *hello;
        size_t len;
        int sv[2];

        ck_assert_int_eq(nbd_loop_new(&r->loop), 0);
        ck_assert_int_eq(nbd_fake_backend.links.open(r->loop, NULL, &r->links), 0);
        ck_assert_int_eq(nbd_fake_backend.fw.open(r->loop, &fw), 0);
        ck_assert_int_eq(nbd_fake_backend.bw.open(NULL, &bw), 0);
        ck_assert_int_eq(
                nbd_server_new(&cfg, r->loop, &nbd_fake_backend, r->links, fw, NULL, bw, &r->srv),
                0);
        ck_assert_int_eq(nbd_server_on_job_end(r->srv, flush_gone, r->links), 0);
        ck_assert_int_eq(nbd_server_on_job_end(r->srv, flush_ifbs, bw), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        ck_assert_int_eq(nbd_server_adopt(r->srv, sv[1]), 0);
        r->client = sv[0];
        nbp_frame_reader_init(&r->rd, NBP_FRAME_DEFAULT_CAP, NBP_FRAME_MAX_FDS);
        ck_assert_int_eq(nbt_pack_hello(&hello, &len), 0);
        send_frame(r->client, make_frame(hello, len, NULL, 0));
        free(hello);
        pump(r, &o);
        ck_assert_int_eq(o.kind, OUT_REPLY);
        ck_assert_int_eq(o.msg->msg_case, NETBROKER__SERVER_MESSAGE__MSG_HELLO);
        netbroker__server_message__free_unpacked(o.msg, NULL);
}

static void rig_down(struct rig *r)
{
        close(r->client);
        for (int i = 0; i < MAX_ITERATIONS && !nbd_server_done(r->srv); i++)
                step(r);
        ck_assert(nbd_server_done(r->srv));
        nbd_server_free(r->srv);
        nbd_fake_backend.links.close(r->links);
        nbd_loop_free(r->loop);
        nbp_frame_reader_reset(&r->rd);
}

static int count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static unsigned long wrong; /* checks that failed; each is told on stderr */

/* A check of one run: the sweep goes on after a failure, so that one test
 * run lists every allocation that is handled wrong. */
static bool expect(bool ok, unsigned long n, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static bool expect(bool ok, unsigned long n, const char *fmt, ...)
{
        va_list ap;

        if (ok)
                return true;
        fprintf(stderr, "failing allocation %lu: ", n);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        wrong++;
        return false;
}

/* The representative request, packed once. */
static void request_build(nbt_build_fn build, struct nbt_packed *rq)
{
        int netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);

        ck_assert_int_ge(netns, 0);
        ck_assert_int_eq(nbt_pack(build, REQUEST_ID, netns, rq), 0);
        close(netns);
}

static void request_free(struct nbt_packed *rq)
{
        free(rq->body);
        nbp_close_fds(rq->fds, rq->nfds);
}

struct run {
        struct outcome o;
        bool failed; /* the Nth allocation came and failed */
        unsigned long allocations;
        char state[STATE_LEN]; /* the fake kernel after the run */
        char initial[STATE_LEN]; /* and before it */
};

/* Serve the request with allocation n failing (0: none); everything the
 * run made must be gone afterwards. */
static void run_once(const struct nbt_packed *rq, unsigned long n, struct run *run)
{
        size_t outstanding = nbt_alloc_outstanding();
        int fds = count_fds();
        struct nbp_frame_out *f;
        struct rig r = {0};
        int sent;

        memset(run, 0, sizeof(*run));
        rig_up(&r);
        nb_fake_describe(run->initial, sizeof(run->initial));
        f = make_frame(rq->body, rq->len, rq->fds, rq->nfds);
        nbt_alloc_arm(n);
        sent = nbp_frame_write(r.client, f);
        pump(&r, &run->o);
        nbt_alloc_disarm();
        ck_assert_int_eq(sent, 1);
        expect(run->o.kind != OUT_NONE, n, "the helper neither answers nor closes");
        nbp_frame_out_free(f);
        run->failed = nbt_alloc_failed();
        run->allocations = nbt_alloc_count();
        ck_assert_uint_lt(nb_fake_describe(run->state, sizeof(run->state)), sizeof(run->state));
        rig_down(&r);
        expect(nbt_alloc_outstanding() == outstanding, n, "%zd allocations not freed",
               (ssize_t)(nbt_alloc_outstanding() - outstanding));
        expect(count_fds() == fds, n, "%d fds left open", count_fds() - fds);
#ifdef NB_LSAN
        /* Memory the hook does not see (libnftnl's, libc's): per run, so
         * the report names the allocation that was failed. */
        expect(__lsan_do_recoverable_leak_check() == 0, n, "LeakSanitizer found leaks (above)");
#endif
}

static bool reply_has_error(const Netbroker__Reply *reply)
{
        for (size_t i = 0; i < reply->n_results; i++)
                if (reply->results[i]->status)
                        return true;
        return false;
}

static const char *str(const char *s)
{
        return s ? s : "";
}

/* What a client can rely on in a result (Stats' counters move on). */
static void expect_same_result(const Netbroker__Result *a, const Netbroker__Result *b,
                               unsigned long n, size_t i)
{
        if (!expect(a->status == b->status && a->ifindex == b->ifindex &&
                            a->n_fd_index == b->n_fd_index && a->out_case == b->out_case &&
                            strcmp(str(a->ifname), str(b->ifname)) == 0 &&
                            strcmp(str(a->peer_ifname), str(b->peer_ifname)) == 0,
                    n,
                    "absorbed, but op %zu says %d '%s' ifname '%s' (%zu fds), not %d '%s' (%zu "
                    "fds)",
                    i, a->status, str(a->message), str(a->ifname), a->n_fd_index, b->status,
                    str(b->ifname), b->n_fd_index))
                return;
        if (a->out_case == NETBROKER__RESULT__OUT_FIREWALL)
                expect(strcmp(a->firewall->hash, b->firewall->hash) == 0 &&
                               a->firewall->rules == b->firewall->rules &&
                               a->firewall->unchanged == b->firewall->unchanged,
                       n, "absorbed, but op %zu's firewall result differs", i);
        if (a->out_case == NETBROKER__RESULT__OUT_EXEC)
                expect(a->exec->stdout_data.len == b->exec->stdout_data.len &&
                               a->exec->exit_code == b->exec->exit_code,
                       n, "absorbed, but op %zu's program output differs", i);
        /* NamesDump is not compared: the name bitmaps are a cache that
         * forgets a name it had no memory to note (names.h), and a create
         * that then picks a name in use gets EEXIST and takes the next. */
        if (a->out_case == NETBROKER__RESULT__OUT_FIREWALL_LIST)
                expect(a->firewall_list->n_owners == b->firewall_list->n_owners, n,
                       "absorbed, but op %zu's owners differ", i);
}

struct tally {
        unsigned long replies, errors, closes, absorbed;
};

static bool has_owner(const char *state, const char *owner)
{
        char line[128];

        snprintf(line, sizeof(line), "owner %s on ", owner);
        return strstr(state, line) != NULL;
}

/* With CONTINUE_ON_ERROR the ops after a failure still run and the
 * firewall transaction is committed: each firewall op's status must say
 * what it left in the kernel. */
static void expect_firewall_agrees(const struct nbt_packed *rq, const Netbroker__Reply *reply,
                                   const char *state, unsigned long n)
{
        Netbroker__ClientMessage *m = netbroker__client_message__unpack(NULL, rq->len, rq->body);

        ck_assert_ptr_nonnull(m);
        for (size_t i = 0; i < m->request->n_ops; i++) {
                const Netbroker__Op *op = m->request->ops[i];
                bool ok = reply->results[i]->status == 0;
                if (op->op_case == NETBROKER__OP__OP_FIREWALL_APPLY)
                        expect(ok == has_owner(state, op->firewall_apply->owner), n,
                               "op %zu, FirewallApply %s, says %d '%s', but the kernel has:\n%s", i,
                               op->firewall_apply->owner, reply->results[i]->status,
                               reply->results[i]->message, state);
                if (op->op_case == NETBROKER__OP__OP_FIREWALL_REMOVE)
                        expect(ok != has_owner(state, op->firewall_remove->owner), n,
                               "op %zu, FirewallRemove %s, says %d '%s', but the kernel has:\n%s",
                               i, op->firewall_remove->owner, reply->results[i]->status,
                               reply->results[i]->message, state);
        }
        netbroker__client_message__free_unpacked(m, NULL);
}

/* One run with allocation n failing against the reference run. */
static void judge(const struct run *run, const struct run *ref, const struct nbt_packed *rq,
                  bool keep_going, unsigned long n, struct tally *t)
{
        size_t n_ops = rq->n_ops;
        const Netbroker__Reply *reply = run->o.msg ? run->o.msg->reply : NULL;
        bool initial = strcmp(run->state, run->initial) == 0;
        bool final = strcmp(run->state, ref->state) == 0;

        switch (run->o.kind) {
        case OUT_REPLY:
                if (!expect(reply && reply->id == REQUEST_ID && reply->n_results == n_ops, n,
                            "a reply that is not the request's"))
                        return;
                if (reply_has_error(reply)) {
                        t->replies++;
                        if (keep_going)
                                expect_firewall_agrees(rq, reply, run->state, n);
                        else /* a failed batch leaves nothing half-made */
                                expect(initial, n,
                                       "an error reply, but the kernel was changed:\n%s",
                                       run->state);
                        return;
                }
                t->absorbed++;
                for (size_t i = 0; i < n_ops; i++)
                        expect_same_result(reply->results[i], ref->o.msg->reply->results[i], n, i);
                expect(final, n, "absorbed, but the kernel differs:\n%s", run->state);
                return;
        case OUT_ERROR:
        case OUT_CLOSED:
                run->o.kind == OUT_ERROR ? t->errors++ : t->closes++;
                /* The client is gone: the batch is all done or all undone. */
                expect(initial || final, n, "connection closed, kernel half-changed:\n%s",
                       run->state);
                return;
        default:
                return; /* a hang, told already */
        }
}

/* The reading ops, then a batch that changes the fake (the runs must), its
 * firewall ops last as every batch's: they are not undone. */
static int shows_then_every_op(struct nb_batch *b, int netns_fd)
{
        int r = nbt_build_shows(b, netns_fd);

        return r ? r : nbt_build_every_op_but_exec(b, netns_fd);
}

/* FirewallList with counters (the fake's owner and its rules), then the
 * batch that changes the fake, as above. */
static int counters_then_every_op(struct nb_batch *b, int netns_fd)
{
        int r = nbt_build_fw_counters(b, netns_fd);

        return r ? r : nbt_build_every_op_but_exec(b, netns_fd);
}

/* Every op kind with an Exec (the job parks and resumes from the loop),
 * and without (the batch runs to its end inside nbd_job_start); firewall
 * ops that go on after a failure. */
static const struct {
        const char *name;
        nbt_build_fn build;
        bool keep_going;
} requests[] = {
        {"every op", nbt_build_every_op, false},
        {"every op but Exec", nbt_build_every_op_but_exec, false},
        {"firewall, continue on error", nbt_build_firewall_continue, true},
        {"the reading ops, then every op but Exec", shows_then_every_op, false},
        {"firewall counters, then every op but Exec", counters_then_every_op, false},
};

START_TEST(test_every_allocation_failure_ends_in_an_error_or_a_close)
{
        struct nbt_packed rq = {0};
        struct run *ref = calloc(1, sizeof(*ref)), *run = calloc(1, sizeof(*run));
        struct tally t = {0};
        unsigned long n;

        ck_assert_ptr_nonnull(ref);
        ck_assert_ptr_nonnull(run);
        request_build(requests[_i].build, &rq);
        /* Without a failure: the reference reply and kernel state. */
        run_once(&rq, 0, ref);
        ck_assert_uint_eq(wrong, 0);
        ck_assert_int_eq(ref->o.kind, OUT_REPLY);
        ck_assert_uint_eq(ref->o.msg->reply->n_results, rq.n_ops);
        for (size_t i = 0; i < rq.n_ops; i++)
                ck_assert_msg(ref->o.msg->reply->results[i]->status == 0, "op %zu: %d %s", i,
                              ref->o.msg->reply->results[i]->status,
                              ref->o.msg->reply->results[i]->message);
        ck_assert_str_ne(ref->state, ref->initial);
        for (n = 1; n <= ref->allocations + 1; n++) {
                run_once(&rq, n, run);
                if (!run->failed) {
                        /* Past the last allocation: the reference again. */
                        expect(run->o.kind == OUT_REPLY && !reply_has_error(run->o.msg->reply) &&
                                       strcmp(run->state, ref->state) == 0,
                               n, "no failure, yet not the reference run");
                        netbroker__server_message__free_unpacked(run->o.msg, NULL);
                        break;
                }
                judge(run, ref, &rq, requests[_i].keep_going, n, &t);
                if (run->o.msg)
                        netbroker__server_message__free_unpacked(run->o.msg, NULL);
        }
        printf("test-alloc: %s, %zu ops; allocations 1..%lu failed in turn (a run makes %lu): %lu "
               "error replies, %lu Error+close, %lu closes, %lu absorbed; %lu checks failed\n",
               requests[_i].name, rq.n_ops, n - 1, ref->allocations, t.replies, t.errors, t.closes,
               t.absorbed, wrong);
        fflush(stdout);
        ck_assert_msg(wrong == 0, "%lu checks failed (listed above)", wrong);
        ck_assert_uint_eq(n - 1, ref->allocations);
        netbroker__server_message__free_unpacked(ref->o.msg, NULL);
        request_free(&rq);
        free(ref);
        free(run);
}
END_TEST

/* An op whose capability answers EPERM gets a reply: EPERM (1) was the
 * value of "parked", so the job waited for a resume that never came. */
START_TEST(test_an_op_refused_with_eperm_is_answered)
{
        struct nbt_packed rq = {0};
        struct run *run = calloc(1, sizeof(*run));

        ck_assert_ptr_nonnull(run);
        request_build(nbt_build_eperm_tap, &rq);
        run_once(&rq, 0, run);
        ck_assert_int_eq(run->o.kind, OUT_REPLY);
        ck_assert_uint_eq(run->o.msg->reply->n_results, 1);
        ck_assert_int_eq(run->o.msg->reply->results[0]->status, EPERM);
        ck_assert_msg(strstr(run->o.msg->reply->results[0]->message, "not permitted"), "%s",
                      run->o.msg->reply->results[0]->message);
        netbroker__server_message__free_unpacked(run->o.msg, NULL);
        request_free(&rq);
        free(run);
}
END_TEST

/* A BridgeOptSet the kernel refuses half-way (the delay taken, STP
 * refused) fails with the kernel's errno and changes nothing: the op puts
 * the delay back. Before, the delay stayed. */
START_TEST(test_a_bridge_opt_set_refused_half_way_changes_nothing)
{
        struct nbt_packed rq = {0};
        struct run *run = calloc(1, sizeof(*run));
        const Netbroker__Result *res;

        ck_assert_ptr_nonnull(run);
        request_build(nbt_build_half_bridge_opt, &rq);
        run_once(&rq, 0, run);
        ck_assert_int_eq(run->o.kind, OUT_REPLY);
        ck_assert_uint_eq(run->o.msg->reply->n_results, 1);
        res = run->o.msg->reply->results[0];
        ck_assert_msg(
                res->status == EIO &&
                        strcmp(res->message, "bridge options: fake kernel: fail0 refused stp") == 0,
                "%d %s", res->status, res->message);
        ck_assert_str_eq(run->state, run->initial);
        netbroker__server_message__free_unpacked(run->o.msg, NULL);
        request_free(&rq);
        free(run);
}
END_TEST

/* A refused firewall commit fails the ops queued in it, and a batch that
 * stops on failures stops at the first of them and is rolled back: the
 * tap it made goes. [0]: the last firewall op queues nothing (the owner
 * it removes is gone already), and sends the transaction after every op
 * ended; fuzz-dispatch found the tap left. [1]: the last op's commit
 * fails; the batch stopped at that op, not the first that failed. */
static const struct {
        nbt_build_fn build;
        int last_status; /* op 2's */
} refused_commits[] = {
        {nbt_build_late_commit_failure, 0},
        {nbt_build_last_op_commit_failure, EIO},
};

START_TEST(test_a_commit_refused_after_its_ops_ended_rolls_the_batch_back)
{
        struct nbt_packed rq = {0};
        struct run *run = calloc(1, sizeof(*run));
        Netbroker__Result **res;

        ck_assert_ptr_nonnull(run);
        request_build(refused_commits[_i].build, &rq);
        run_once(&rq, 0, run);
        ck_assert_int_eq(run->o.kind, OUT_REPLY);
        ck_assert_uint_eq(run->o.msg->reply->n_results, 3);
        res = run->o.msg->reply->results;
        ck_assert_msg(res[1]->status == EIO && strstr(res[1]->message, "owner failg1 refused"),
                      "%d %s", res[1]->status, res[1]->message);
        ck_assert_msg(res[0]->status == ECANCELED && strstr(res[0]->message, "undone: op 1 failed"),
                      "%d %s", res[0]->status, res[0]->message);
        ck_assert_msg(res[2]->status == refused_commits[_i].last_status, "%d %s", res[2]->status,
                      res[2]->message);
        ck_assert_uint_eq(res[0]->n_fd_index, 0);
        ck_assert_str_eq(run->state, run->initial);
        ck_assert_uint_eq(nb_fake_made(), 0);
        netbroker__server_message__free_unpacked(run->o.msg, NULL);
        request_free(&rq);
        free(run);
}
END_TEST

/* The reading ops read the fake kernel's world through the backend table
 * (the real link_show.c and bandwidth_show.c, given no socket, would
 * answer EOPNOTSUPP). */
START_TEST(test_the_reading_ops_read_the_fake_world)
{
        struct nbt_packed rq = {0};
        struct run *run = calloc(1, sizeof(*run));
        Netbroker__Result **res;
        Netbroker__LinkInfo *vnet0;
        Netbroker__BandwidthShowResult *bw;

        ck_assert_ptr_nonnull(run);
        request_build(nbt_build_shows, &rq);
        run_once(&rq, 0, run);
        ck_assert_int_eq(run->o.kind, OUT_REPLY);
        ck_assert_uint_eq(run->o.msg->reply->n_results, 3);
        res = run->o.msg->reply->results;
        for (size_t i = 0; i < 3; i++)
                ck_assert_msg(res[i]->status == 0, "op %zu: %d %s", i, res[i]->status,
                              res[i]->message);
        /* lo eth0 br0 vnet0 macvtap0 fail0, as fake_kernel.h starts. */
        ck_assert_uint_eq(res[0]->link_list->n_links, 6);
        ck_assert_str_eq(res[0]->link_list->links[4]->name, "macvtap0");
        ck_assert_int_eq(res[0]->link_list->links[4]->kind,
                         NETBROKER__LINK_KIND__LINK_KIND_MACVTAP);
        ck_assert_uint_eq(res[1]->link_list->n_links, 1);
        vnet0 = res[1]->link_list->links[0];
        ck_assert_str_eq(vnet0->name, "vnet0");
        ck_assert_int_eq(vnet0->ifindex, 4);
        ck_assert_int_eq(vnet0->kind, NETBROKER__LINK_KIND__LINK_KIND_TAP);
        ck_assert(vnet0->up);
        ck_assert_uint_eq(vnet0->mtu, 1500);
        ck_assert_str_eq(vnet0->mac, "52:54:00:00:00:04");
        /* vnet0's limits: in 1000/2000/64, out 500/-/32. */
        bw = res[2]->bandwidth_show;
        ck_assert_ptr_nonnull(bw->inbound);
        ck_assert_uint_eq(bw->inbound->average, 1000);
        ck_assert_uint_eq(bw->inbound->peak, 2000);
        ck_assert_uint_eq(bw->inbound->burst, 64);
        ck_assert_str_eq(bw->inbound_mechanism, "htb");
        ck_assert_ptr_nonnull(bw->outbound);
        ck_assert_uint_eq(bw->outbound->average, 500);
        ck_assert_uint_eq(bw->outbound->peak, 0);
        ck_assert_str_eq(bw->outbound_mechanism, "nft-limit");
        netbroker__server_message__free_unpacked(run->o.msg, NULL);
        request_free(&rq);
        free(run);
}
END_TEST

/* The fake kernel fakes every entry of the contract: an entry it left NULL
 * would crash the first request that reaches it. */
START_TEST(test_the_fake_backend_sets_every_entry)
{
        ck_assert_msg(nbt_backend_unset(&nbd_fake_backend) == SIZE_MAX,
                      "nbd_fake_backend: the entry at byte %zu is NULL",
                      nbt_backend_unset(&nbd_fake_backend));
}
END_TEST

/* Loading a config fails with -ENOMEM and a sentence at whichever of its
 * allocations fails (the file's exec_allow, exec_env_allow and policy_dir,
 * a [policy] section, its exec list), and loads once none does. */
START_TEST(test_config_load_out_of_memory_is_a_sentence)
{
        static const char body[] = "policy_dir = /nonexistent/nbtest-policy\n"
                                   "exec_allow = /bin/true\n"
                                   "exec_env_allow = LANG\n"
                                   "[policy uid 1000]\n"
                                   "ops = exec\n"
                                   "exec = /bin/true\n";
        char path[] = "/tmp/nbtest-alloc-conf-XXXXXX";
        int fd = mkstemp(path), r = -ENOMEM;
        unsigned long n, failures = 0;

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, body, sizeof(body) - 1), (ssize_t)(sizeof(body) - 1));
        close(fd);
        for (n = 1; r == -ENOMEM && n < 1000; n++) {
                struct nbd_config c;
                struct nbd_err e = {0};

                nbd_config_defaults(&c);
                nbt_alloc_arm(n);
                r = nbd_config_load(&c, path, true, &e);
                nbt_alloc_disarm();
                nbd_config_free(&c);
                if (r == 0) {
                        ck_assert(!nbt_alloc_failed());
                        break;
                }
                failures++;
                ck_assert_int_eq(r, -ENOMEM);
                ck_assert_int_eq(e.code, -ENOMEM);
                ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0 &&
                                      strstr(e.msg, "out of memory"),
                              "allocation %lu: %s", n, e.msg);
        }
        unlink(path);
        ck_assert_int_eq(r, 0);
        /* exec_allow, exec_env_allow, policy_dir, the section (calloc,
         * realloc, the file name's realloc and strdup), exec. */
        ck_assert_uint_ge(failures, 6);
}
END_TEST

#define UNWRITTEN "unwritten"

struct kernel_tally {
        unsigned long failures, oom_sentences, wrong;
};

/* A failure reports its errno and a sentence written for it. */
static void judge_err(struct kernel_tally *t, const char *what, unsigned long n, int r,
                      struct nbd_err *e)
{
        if (r < 0) {
                t->failures++;
                if (e->code != r || strcmp(e->msg, UNWRITTEN) == 0) {
                        printf("allocation %lu: %s returned %d, err says %d \"%s\"\n", n, what, r,
                               e->code, e->msg);
                        t->wrong++;
                }
                if (strstr(e->msg, "out of memory"))
                        t->oom_sentences++;
        }
        e->code = 0;
        snprintf(e->msg, sizeof(e->msg), "%s", UNWRITTEN);
}

/* The real link.c and bandwidth.c (linked with the fake kernel, whose
 * users never call them) against a real kernel in a network namespace of
 * this test's own. */
START_TEST(test_link_and_bandwidth_fill_err_when_out_of_memory)
{
        struct nbd_links *l = NULL;
        struct nbd_bw *bw = NULL;
        struct kernel_tally t = {0};
        struct nbd_err e = {.msg = UNWRITTEN};
        const struct nbd_bw_limits lim = {.in = {.average = 1000}, .out = {.average = 1000}};
        unsigned long n;

        ck_assert_msg(unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0,
                      "no network namespace of our own: %s", strerror(errno));
        ck_assert_int_eq(nbd_links_open(NULL, NULL, &l), 0);
        ck_assert_int_eq(nbd_bw_open(nbd_links_netlink(l), &bw), 0);
        for (n = 1; n < MAX_ITERATIONS; n++) {
                struct nbd_link_made m = {0};
                struct nbd_link_change c = {
                        .up = 1, .has_mac = true, .mac = {0x52, 0x54, 0, 1, 2, 3}};
                struct nbd_bw_applied applied;
                int r, ifindex;

                nbt_alloc_arm(n);
                r = nbd_link_bridge_create(l, "nbt%d", 0, &m, &e);
                judge_err(&t, "bridge create", n, r, &e);
                c.name = m.ifname;
                if (r == 0) {
                        judge_err(&t, "link set", n, nbd_link_set(l, &c, &ifindex, &e), &e);
                        judge_err(&t, "bandwidth set", n,
                                  nbd_bw_set(bw, m.ifname, &lim, &applied, &e), &e);
                        judge_err(&t, "bandwidth clear", n, nbd_bw_clear(bw, m.ifname, &e), &e);
                        judge_err(&t, "link delete", n, nbd_link_delete(l, m.ifname, &e), &e);
                }
                /* A batch's deletion: doomed into a group, the group deleted. */
                r = nbd_link_bridge_create(l, "nbt%d", 0, &m, &e);
                judge_err(&t, "bridge create", n, r, &e);
                if (r == 0) {
                        struct nbd_link_doomed d;
                        int dr = nbd_link_doom(l, m.ifname, 0x4e4cfff0u, &d, &e);
                        judge_err(&t, "link doom", n, dr, &e);
                        if (dr == 0)
                                judge_err(&t, "link delete group", n,
                                          nbd_link_delete_group(l, 0x4e4cfff0u, &d.ifindex, 1, &e),
                                          &e);
                        nbd_link_delete(l, m.ifname, NULL); /* if one above failed */
                }
                judge_err(&t, "link set (no such interface)", n,
                          nbd_link_set(l, &(struct nbd_link_change){.name = "nbtnone", .up = -1},
                                       &ifindex, &e),
                          &e);
                nbt_alloc_disarm();
                if (r == 0)
                        nbd_link_delete(l, m.ifname, NULL); /* if the one above failed */
                if (!nbt_alloc_failed())
                        break;
        }
        printf("test-alloc: link.c and bandwidth.c, allocations 1..%lu failed in turn: %lu "
               "failures, %lu \"out of memory\" sentences; %lu checks failed\n",
               n - 1, t.failures, t.oom_sentences, t.wrong);
        fflush(stdout);
        ck_assert_msg(t.wrong == 0, "%lu checks failed (listed above)", t.wrong);
        ck_assert_uint_lt(n, MAX_ITERATIONS);
        ck_assert_uint_gt(t.oom_sentences, 0);
        nbd_bw_close(bw);
        nbd_links_close(l);
}
END_TEST

/* An interrupted read of the link monitor is retried: a device made
 * behind the helper's back is known after one sync although the first
 * recvmmsg() failed with EINTR (before the fix the read ended there, with
 * the notification left in the queue until the next wake-up). */
START_TEST(test_link_monitor_read_retries_after_eintr)
{
        struct nbd_links *l = NULL;

        ck_assert_msg(unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0,
                      "no network namespace of our own: %s", strerror(errno));
        ck_assert_int_eq(nbd_links_open(NULL, NULL, &l), 0);
        ck_assert_int_eq(nbd_link_exists(l, "nbtintr0"), 0);
        ck_assert_int_eq(system("ip link add nbtintr0 type bridge"), 0);
        nbt_recvmmsg_eintr = 2;
        ck_assert_int_eq(nbd_link_exists(l, "nbtintr0"), 1);
        ck_assert_uint_eq(nbt_recvmmsg_eintr, 0);
        nbd_links_close(l);
}
END_TEST

/* Issue 14: while a validation step holds the links, look-ups read the
 * link monitor once (4,096 FirewallEnsureHash made 8,192 reads, a quarter
 * of their validation); outside it, each look-up reads, and the next hold
 * reads again. */
START_TEST(test_link_lookups_read_the_monitor_once_a_validation_step)
{
        struct nbd_links *l = NULL;
        unsigned long calls;

        ck_assert_msg(unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0,
                      "no network namespace of our own: %s", strerror(errno));
        ck_assert_int_eq(nbd_links_open(NULL, NULL, &l), 0);
        nbd_links_hold(l, true);
        calls = nbt_recvmmsg_calls;
        for (int i = 0; i < 100; i++)
                ck_assert_int_eq(nbd_link_exists(l, "lo"), 1);
        ck_assert_uint_eq(nbt_recvmmsg_calls - calls, 1);
        nbd_links_hold(l, false);
        /* Unheld: every look-up reads, and sees a device made meanwhile. */
        ck_assert_int_eq(system("ip link add nbtsync0 type bridge"), 0);
        calls = nbt_recvmmsg_calls;
        ck_assert_int_eq(nbd_link_exists(l, "nbtsync0"), 1);
        ck_assert_int_eq(nbd_link_exists(l, "nbtsync0"), 1);
        ck_assert_uint_eq(nbt_recvmmsg_calls - calls, 2);
        /* The next step reads again at its first look-up. */
        ck_assert_int_eq(system("ip link del nbtsync0"), 0);
        nbd_links_hold(l, true);
        calls = nbt_recvmmsg_calls;
        ck_assert_int_eq(nbd_link_exists(l, "nbtsync0"), 0);
        ck_assert_int_eq(nbd_link_exists(l, "lo"), 1);
        ck_assert_uint_eq(nbt_recvmmsg_calls - calls, 1);
        nbd_links_hold(l, false);
        nbd_links_close(l);
}
END_TEST

/* A run of LinkDeletes deletes its link group after one dump has shown
 * that the group holds only the run's devices. A dump that a change
 * interrupted (NLM_F_DUMP_INTR) may have missed one that someone else put
 * there: it is read again, and while every try is interrupted nothing is
 * deleted. A dump the kernel could not finish (an errno in its DONE)
 * deletes nothing either. */
START_TEST(test_group_delete_trusts_no_partial_dump)
{
        const uint32_t group = 0x4e4c4321;
        struct nbd_err err;
        int ours[1];
        char cmd[128];

        ck_assert_msg(unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0,
                      "no network namespace of our own: %s", strerror(errno));
        snprintf(cmd, sizeof(cmd),
                 "ip link add gd0 type veth peer name gd1 && ip link set gd0 group %u",
                 (unsigned)group);
        ck_assert_int_eq(system(cmd), 0);
        ours[0] = (int)if_nametoindex("gd0");
        ck_assert_int_gt(ours[0], 0);

        nbt_dump_intr = 1000;
        ck_assert_int_eq(nbd_link_delete_group(NULL, group, ours, 1, &err), -EAGAIN);
        ck_assert_msg(strstr(err.msg, "kept changing") && strstr(err.msg, "nothing deleted"), "%s",
                      err.msg);
        ck_assert_uint_eq(nbt_dump_intr, 1000 - 5); /* five dumps, all interrupted */
        ck_assert_uint_ne(if_nametoindex("gd0"), 0);
        nbt_dump_intr = 0;

        nbt_dump_done_err = -EMSGSIZE;
        ck_assert_int_eq(nbd_link_delete_group(NULL, group, ours, 1, &err), -EMSGSIZE);
        ck_assert_int_eq(nbt_dump_done_err, 0); /* the DONE was altered */
        ck_assert_msg(strstr(err.msg, "cannot list interfaces"), "%s", err.msg);
        ck_assert_uint_ne(if_nametoindex("gd0"), 0);

        /* Interrupted once: read again, and the group goes. */
        nbt_dump_intr = 1;
        ck_assert_int_eq(nbd_link_delete_group(NULL, group, ours, 1, &err), 0);
        ck_assert_uint_eq(nbt_dump_intr, 0);
        ck_assert_uint_eq(if_nametoindex("gd0"), 0);
}
END_TEST

static int count_chain(const struct nlmsghdr *h, void *data)
{
        (void)h;
        ++*(unsigned *)data;
        return MNL_CB_OK;
}

/* One dump of table netdev nbtdump's chains on nl: what reading it
 * returned, the chains it counted in *ret. */
static int dump_test_chains(struct mnl_socket *nl, uint32_t seq, unsigned *ret)
{
        static char buf[NBD_NFSOCK_DUMP_BUF];
        struct nlmsghdr *h =
                nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETCHAIN, NFPROTO_NETDEV, NLM_F_DUMP, seq);

        *ret = 0;
        mnl_attr_put_strz(h, NFTA_CHAIN_TABLE, "nbtdump");
        ck_assert_int_ge(mnl_socket_sendto(nl, h, h->nlmsg_len), 0);
        return nbd_nfsock_read_answer(nl, buf, sizeof(buf), seq, count_chain, ret);
}

static void assert_socket_empty(struct mnl_socket *nl)
{
        char b[64];

        ck_assert_int_lt(recv(mnl_socket_get_fd(nl), b, sizeof(b), MSG_DONTWAIT), 0);
        ck_assert_int_eq(errno, EAGAIN);
}

/* An nf_tables dump that a commit interrupted (NLM_F_DUMP_INTR) is read to
 * its end before it is asked for again, wherever the kernel put the flag:
 * on every message, or on the DONE alone (the commit came between the last
 * chains and the end), the DONE then in the very datagram where the flag
 * was seen. A firewall lane once waited for ever there for the DONE it had
 * read, and the helper's shutdown with it; the loop's bandwidth and network
 * reads failed their op, or took the old dump's rest for their answer. */
START_TEST(test_an_interrupted_nft_dump_is_read_to_its_end)
{
        struct nbd_fw *fw = NULL;
        struct nbd_fw_owners owners = {0};
        struct nbd_nfsock k = {0};
        struct mnl_socket *nl = NULL;
        unsigned chains = 0;
        struct nbd_err err;
        uint64_t stat0;
        int r;

        /* A read that waits for ever fails the test now, not at the case's
         * timeout. */
        alarm(60);
        ck_assert_msg(unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0,
                      "no network namespace of our own: %s", strerror(errno));
        /* Chains enough for a dump of several datagrams. */
        ck_assert_int_eq(system("(echo 'table netdev nbtdump {'; i=0; while [ $i -lt 600 ]; do "
                                "echo \"chain c$i { }\"; i=$((i + 1)); done; echo '}') | nft -f -"),
                         0);

        /* The firewall's read of its owners: interrupted once at the DONE,
         * read again. */
        ck_assert_int_eq(nbd_fw_open(NULL, &fw), 0);
        nbt_dump_intr_done = 1;
        ck_assert_int_eq(nbd_fw_read_owners(fw, &owners), 0);
        ck_assert_uint_eq(nbt_dump_intr_done, 0);
        nbd_fw_owners_free(&owners);
        /* Interrupted at every try but the last: read; at every try: the
         * op's error says the table kept changing, and each interrupted
         * dump is counted. */
        stat0 = nbd_stats[NBD_STAT_NFT_DUMPS_INTERRUPTED];
        nbt_dump_intr_done = NBD_NFSOCK_DUMP_TRIES - 1;
        ck_assert_int_eq(nbd_fw_read_owners(fw, &owners), 0);
        nbd_fw_owners_free(&owners);
        nbt_dump_intr_done = NBD_NFSOCK_DUMP_TRIES;
        r = nbd_fw_read_owners(fw, &owners);
        ck_assert_int_eq(r, -EAGAIN);
        ck_assert_uint_eq(nbt_dump_intr_done, 0);
        nbd_fw_read_failed(&err, r, false);
        ck_assert_msg(strstr(err.msg, "cannot read table netbroker: it kept changing while it was "
                                      "read (each of 40 tries"),
                      "%s", err.msg);
        ck_assert_uint_eq(nbd_stats[NBD_STAT_NFT_DUMPS_INTERRUPTED] - stat0,
                          2 * NBD_NFSOCK_DUMP_TRIES - 1);
        nbd_fw_close(fw);

        /* On a kept socket, either way: -EINTR, nothing left behind, and
         * the next dump on the socket is read whole. */
        ck_assert_int_eq(nbd_nfsock_take(&k, &nl), 0);
        nbt_dump_intr_done = 1;
        ck_assert_int_eq(dump_test_chains(nl, 1, &chains), -EINTR);
        ck_assert_uint_eq(nbt_dump_intr_done, 0);
        assert_socket_empty(nl);
        nbt_dump_intr = 1;
        ck_assert_int_eq(dump_test_chains(nl, 2, &chains), -EINTR);
        ck_assert_uint_eq(chains, 0); /* none taken from an interrupted dump */
        ck_assert_uint_eq(nbt_dump_intr, 0);
        assert_socket_empty(nl);
        ck_assert_int_eq(dump_test_chains(nl, 3, &chains), 0);
        ck_assert_uint_eq(chains, 600);
        assert_socket_empty(nl);
        nbd_nfsock_drop(&k);
        alarm(0);
}
END_TEST

static const char *const programs[] = {"/bin/cat", "/bin/true"};
static const char *const env_names[] = {"FOO", "LC_ALL"};

int main(void)
{
        Suite *s = suite_create("alloc");
        TCase *tc = tcase_create("alloc");
        SRunner *sr;
        int failed;

        if (geteuid() != 0) {
                /* The fake kernel's requests come from root (a non-root
                 * caller needs a policy); the rest reads the real kernel in
                 * a network namespace. */
                fprintf(stderr, "test-alloc: skipped: needs root (network namespaces, and the "
                                "requests are root's)\n");
                return 77;
        }
        nbd_log_configure(NBD_LOG_ERR, NULL, false);
        nbd_config_defaults(&cfg);
        nbd_config_free(&cfg);
        /* Set as nbd_config_load() would after checking them (the spawn
         * here is the fake kernel's, which runs nothing). */
        for (size_t i = 0; i < sizeof(programs) / sizeof(*programs); i++) {
                cfg.exec_allow[i] = strdup(programs[i]);
                cfg.exec_real[i] = strdup(programs[i]);
        }
        cfg.n_exec_allow = sizeof(programs) / sizeof(*programs);
        /* The variables the Exec of tests/fuzz/requests.c sets. */
        for (size_t i = 0; i < sizeof(env_names) / sizeof(*env_names); i++)
                cfg.exec_env_allow[cfg.n_exec_env_allow++] = strdup(env_names[i]);
        cfg.allow_uids[0] = geteuid();
        /* Hundreds of runs; ASan makes each slower. */
        tcase_set_timeout(tc, 600);
        tcase_add_loop_test(tc, test_every_allocation_failure_ends_in_an_error_or_a_close, 0,
                            sizeof(requests) / sizeof(*requests));
        tcase_add_test(tc, test_an_op_refused_with_eperm_is_answered);
        tcase_add_test(tc, test_the_fake_backend_sets_every_entry);
        tcase_add_test(tc, test_config_load_out_of_memory_is_a_sentence);
        tcase_add_test(tc, test_a_bridge_opt_set_refused_half_way_changes_nothing);
        tcase_add_test(tc, test_the_reading_ops_read_the_fake_world);
        tcase_add_loop_test(tc, test_a_commit_refused_after_its_ops_ended_rolls_the_batch_back, 0,
                            sizeof(refused_commits) / sizeof(*refused_commits));
        tcase_add_test(tc, test_link_and_bandwidth_fill_err_when_out_of_memory);
        tcase_add_test(tc, test_link_monitor_read_retries_after_eintr);
        tcase_add_test(tc, test_link_lookups_read_the_monitor_once_a_validation_step);
        tcase_add_test(tc, test_group_delete_trusts_no_partial_dump);
        tcase_add_test(tc, test_an_interrupted_nft_dump_is_read_to_its_end);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        nbd_config_free(&cfg);
        return failed ? 1 : 0;
}
