// SPDX-License-Identifier: LGPL-2.1-or-later
/* The dispatcher end to end over the fake kernel: decode a ClientMessage as
 * server.c does (bounded budget), nbd_job_start, run the loop until the job
 * is done, pack the reply and read it back.
 *
 * The request id steers what the owner does, so the fuzzer reaches the
 * job's other paths too: odd ids make fd hand-over report "queued" (the job
 * parks until its output drains), ids = 1 mod 3 run a second copy of the
 * request beside the first (spawn slots, shared state), ids = 3 mod 7
 * cancel the last job after the first loop iteration (the client went
 * away), ids = 5 mod 11 cancel the job from inside its first fd hand-over
 * (the client went away while its fds were being sent: the owner ends the
 * job under the op's feet, and the job must end once), and bits 32-43, when not 0, are the
 * allocation that fails (tests/alloc_hook.h: the allocation-failure test's hook, here for any
 * request), counted from the decode on.
 *
 * Checks: the reply has one result per op and survives a pack and unpack;
 * every job finishes; after a failed batch without CONTINUE_ON_ERROR no
 * interface it made is left; no fd, program or job outlives the input (and
 * LeakSanitizer: no memory). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_hook.h"
#include "codec.h"
#include "dispatch.h"
#include "fake_kernel.h"
#include "harness.h"

struct run {
        struct nbd_job *job;
        size_t n_ops;
        bool done, blocked, failed, cancelled;
        bool queue_fds; /* report fds as queued behind other output */
        bool die_in_send; /* cancel the job from inside the fd hand-over */
        size_t fds_sent; /* the client's fd indices 0..fds_sent-1 */
        size_t max_reply;
};

/* What a client relies on in a reply: statuses are errno values, fd
 * indices point at fds it was sent (each once), program output stays
 * within the request's reply budget. */
static void check_reply(const struct run *run, const Netbroker__Reply *reply)
{
        bool seen[NBP_FRAME_MAX_FDS * 64] = {false};
        size_t output = 0;

        NB_HARNESS_ASSERT(reply->n_results == run->n_ops);
        for (size_t i = 0; i < reply->n_results; i++) {
                const Netbroker__Result *r = reply->results[i];
                NB_HARNESS_ASSERT(r->status >= 0 && r->status < 4096);
                for (size_t k = 0; k < r->n_fd_index; k++) {
                        NB_HARNESS_ASSERT(r->fd_index[k] < run->fds_sent);
                        NB_HARNESS_ASSERT(r->fd_index[k] >= sizeof(seen) || !seen[r->fd_index[k]]);
                        if (r->fd_index[k] < sizeof(seen))
                                seen[r->fd_index[k]] = true;
                }
                if (r->out_case == NETBROKER__RESULT__OUT_EXEC)
                        output += r->exec->stdout_data.len + r->exec->stderr_data.len;
        }
        NB_HARNESS_ASSERT(output <= run->max_reply);
}

static void on_done(struct nbd_job *job, const Netbroker__Reply *reply, void *data)
{
        struct run *run = data;
        Netbroker__ServerMessage m = NETBROKER__SERVER_MESSAGE__INIT;
        Netbroker__ServerMessage *back;
        struct nbp_frame_out *f;

        (void)job;
        nbt_alloc_pause(); /* the client's side */
        NB_HARNESS_ASSERT(!run->done);
        check_reply(run, reply);
        for (size_t i = 0; i < reply->n_results; i++) {
                if (reply->results[i]->status)
                        run->failed = true;
                /* For reading what an input does (reproducing a crash). */
                if (getenv("NB_FUZZ_VERBOSE"))
                        fprintf(stderr, "op %zu: %d %s\n", i, reply->results[i]->status,
                                reply->results[i]->message);
        }
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_REPLY;
        m.reply = (Netbroker__Reply *)reply;
        if (nbp_pack_frame(&m.base, &f) == 0) {
                back = netbroker__server_message__unpack(NULL, f->len - NBP_FRAME_HEADER_SIZE,
                                                         f->buf + NBP_FRAME_HEADER_SIZE);
                NB_HARNESS_ASSERT(back && back->reply && back->reply->n_results == run->n_ops);
                netbroker__server_message__free_unpacked(back, NULL);
                nbp_frame_out_free(f);
        }
        run->done = true;
        nbt_alloc_resume();
}

static int on_send_fds(void *data, uint64_t request_id, uint32_t op_index, int *fds, size_t n)
{
        struct run *run = data;

        (void)request_id;
        NB_HARNESS_ASSERT(op_index < run->n_ops);
        /* Sent: the fds are the client's now, and it closes them. */
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
        if (run->die_in_send && !run->cancelled) {
                run->cancelled = true;
                nbd_job_cancel(run->job);
                return -ECONNRESET;
        }
        run->fds_sent += n;
        if (!run->queue_fds)
                return 0;
        run->blocked = true;
        return 1;
}

static const struct nbd_job_owner owner = {.done = on_done, .send_fds = on_send_fds};

/* Decode and start one job; false when the input is not a request the
 * server would hand to the dispatcher. */
static bool start(struct nb_harness *h, const uint8_t *data, size_t size, struct run *run,
                  uint64_t *ret_id, bool *ret_keep_going)
{
        struct nbp_pb_budget *budget = malloc(sizeof(*budget));
        Netbroker__ClientMessage *msg;
        int fds[2];

        if (!budget)
                return false;
        nbp_pb_budget_init(budget, nb_harness_decode_budget(size));
        msg = netbroker__client_message__unpack(&budget->allocator, size, data);
        /* server.c refuses these before dispatch. */
        if (!msg || msg->msg_case != NETBROKER__CLIENT_MESSAGE__MSG_REQUEST ||
            msg->request->n_ops > h->cfg.max_ops) {
                nbp_pb_budget_release(budget);
                free(budget);
                return false;
        }
        *ret_id = msg->request->id;
        *ret_keep_going =
                msg->request->flags & NETBROKER__REQUEST_FLAG__REQUEST_FLAG_CONTINUE_ON_ERROR;
        run->n_ops = msg->request->n_ops;
        run->queue_fds = msg->request->id & 1;
        run->die_in_send = msg->request->id % 11 == 5;
        run->max_reply = h->cfg.max_reply;
        const struct nbd_job_origin root = {.peer = {.uid = 0, .gid = 0, .pid = getpid()},
                                            .reply_budget = h->cfg.max_reply};

        fds[0] = nb_harness_dup(h->netns_fd);
        fds[1] = nb_harness_dup(h->null_fd);
        if (nbd_job_start(&h->ctx, &root, msg, budget, fds, 2, &owner, run, &run->job) < 0) {
                nbp_close_fds(fds, 2);
                nbp_pb_budget_release(budget);
                free(budget);
                return false;
        }
        return true;
}

/* The allocation to fail, from the request id (0: none). */
static unsigned long fail_at_of(const uint8_t *data, size_t size)
{
        struct nbp_pb_budget budget;
        Netbroker__ClientMessage *msg;
        unsigned long n = 0;

        nbp_pb_budget_init(&budget, nb_harness_decode_budget(size));
        msg = netbroker__client_message__unpack(&budget.allocator, size, data);
        if (msg && msg->msg_case == NETBROKER__CLIENT_MESSAGE__MSG_REQUEST)
                n = (unsigned long)(msg->request->id >> 32) & 0xfff;
        nbp_pb_budget_release(&budget);
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct nb_harness *h = nb_harness_begin();
        struct run runs[2] = {0};
        size_t n = 0;
        uint64_t id = 0;
        bool keep_going = false, all_done = false;
        unsigned long fail_at;

        NB_HARNESS_ASSERT(nb_fake_reset() == 0);
        fail_at = fail_at_of(data, size);
        if (fail_at)
                nbt_alloc_arm(fail_at);
        if (start(h, data, size, &runs[0], &id, &keep_going))
                n = 1;
        if (n == 1 && id % 3 == 1 && start(h, data, size, &runs[1], &id, &keep_going))
                n = 2;
        for (int iter = 0; iter < 1000 && !all_done; iter++) {
                for (size_t i = 0; i < n; i++)
                        if (!runs[i].done && !runs[i].cancelled && runs[i].blocked) {
                                runs[i].blocked = false;
                                nbd_job_output_drained(runs[i].job);
                        }
                if (iter == 1 && n && id % 7 == 3 && !runs[n - 1].done && !runs[n - 1].cancelled) {
                        nbd_job_cancel(runs[n - 1].job);
                        runs[n - 1].cancelled = true;
                }
                nb_harness_step(h);
                all_done = true;
                for (size_t i = 0; i < n; i++)
                        all_done &= runs[i].done || runs[i].cancelled;
        }
        nbt_alloc_disarm();
        NB_HARNESS_ASSERT(all_done);
        /* A failed batch leaves none of the interfaces it made. */
        if (n == 1 && runs[0].done && runs[0].failed && !keep_going)
                NB_HARNESS_ASSERT(nb_fake_made() == 0);
        nb_harness_check_clean(h);
        return 0;
}
