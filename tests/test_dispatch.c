// SPDX-License-Identifier: LGPL-2.1-or-later
/* The real dispatcher (dispatch.c) with handlers of the test's own, given
 * through struct nbd_dispatch_ctx's table: whatever errno a handler answers
 * with, from validate() or run(), directly or after parking, the request
 * gets a reply with that status and a message. Under the old convention a
 * run() returning 1 (NB_OP_PARKED) parked the job, so a kernel EPERM hung
 * its request forever. And a job waiting for a spawn slot resumes when a
 * child exits, with nothing but the loop running. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "backend_check.h"
#include "codec.h"
#include "config.h"
#include "dispatch.h"
#include "loop.h"
#include "ops.h"
#include "spawn.h"

enum fake_mode {
        FAIL_VALIDATE, /* validate() returns -err with a message */
        FAIL_VALIDATE_BARE, /* validate() returns -err, no message */
        FAIL_RUN, /* run() returns -err with a message */
        FAIL_RUN_BARE, /* run() returns -err, no message */
        PARK_THEN_FAIL, /* run() parks; a timer ends the op with -err */
        SPAWN, /* run() takes a spawn slot and runs a short program */
};

static enum fake_mode mode;
static int fake_err; /* positive errno */

struct reply_seen {
        unsigned replies;
        int status;
        char message[512];
};

/* ---- a fake capability ---- */

struct parked {
        struct nbd_job *job;
        Netbroker__Result *res;
        struct nbd_timer timer;
        struct nbd_child *child;
};

static int fake_validate(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        (void)v;
        (void)op;
        if (mode == FAIL_VALIDATE)
                return nbd_result_set(res, -fake_err, "fake: refused with errno %d", fake_err);
        if (mode == FAIL_VALIDATE_BARE)
                return -fake_err;
        return 0;
}

static void parked_free(void *data)
{
        struct parked *p = data;

        nbd_timer_cancel(nbd_job_ctx(p->job)->loop, &p->timer);
        nbd_job_ctx(p->job)->be->spawn.abandon(p->child);
        free(p);
}

static void parked_done(void *data)
{
        struct parked *p = data;
        struct nbd_job *job = p->job;

        nbd_result_set(p->res, -fake_err, "fake: failed after parking with errno %d", fake_err);
        free(p);
        nbd_job_op_done(job);
}

static void child_done(struct nbd_child *c, void *data)
{
        struct parked *p = data;
        struct nbd_job *job = p->job;
        const struct nbd_backend_spawn *sp = &nbd_job_ctx(job)->be->spawn;

        if (sp->result(c)->exit_code)
                nbd_result_set(p->res, -EIO, "fake: the program failed");
        sp->free(c);
        free(p);
        nbd_job_op_done(job);
}

static int run_spawn(struct nbd_job *job, Netbroker__Result *res)
{
        static char *const argv[] = {"true", NULL}, *const envp[] = {NULL};
        struct nbd_exec_spec spec = {
                .path = "/bin/true", .argv = argv, .envp = envp, .timeout_ms = 5000};
        struct parked *p;
        bool admitted;
        int r;

        if ((r = nbd_job_spawn_admit(job, res, &admitted)) < 0 || !admitted)
                return r;
        p = calloc(1, sizeof(*p));
        if (!p)
                return nbd_result_set(res, -ENOMEM, "fake: out of memory");
        *p = (struct parked){.job = job, .res = res};
        r = nbd_job_ctx(job)->be->spawn.spawn(nbd_job_ctx(job)->loop, &spec, child_done, p,
                                              &p->child);
        if (r < 0) {
                free(p);
                return nbd_result_set(res, r, "fake: cannot spawn");
        }
        nbd_job_park(job, parked_free, p);
        return 0;
}

static int fake_run(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        struct parked *p;

        (void)op;
        switch (mode) {
        case FAIL_RUN:
                return nbd_result_set(res, -fake_err, "fake: failed with errno %d", fake_err);
        case FAIL_RUN_BARE:
                return -fake_err;
        case PARK_THEN_FAIL:
                p = calloc(1, sizeof(*p));
                if (!p)
                        return nbd_result_set(res, -ENOMEM, "fake: out of memory");
                *p = (struct parked){.job = job, .res = res};
                nbd_timer_arm(nbd_job_ctx(job)->loop, &p->timer, 0, parked_done, p);
                nbd_job_park(job, parked_free, p);
                return 0;
        case SPAWN:
                return run_spawn(job, res);
        default:
                return 0;
        }
}

static const struct nbd_op_handler fake_handler = {
        .name = "fake",
        .validate = fake_validate,
        .run = fake_run,
};

static const struct nbd_op_handler *const fake_table[] = {
        [NETBROKER__OP__OP_PING] = &fake_handler,
};

/* ---- the dispatcher's owner ---- */

static void on_done(struct nbd_job *job, const Netbroker__Reply *reply, void *data)
{
        struct reply_seen *seen = data;

        (void)job;
        ck_assert_uint_eq(reply->n_results, 1);
        seen->replies++;
        seen->status = (int)reply->results[0]->status;
        snprintf(seen->message, sizeof(seen->message), "%s",
                 reply->results[0]->message ? reply->results[0]->message : "");
}

static int no_fds(void *data, uint64_t request_id, uint32_t op_index, int *fds, size_t n)
{
        (void)data;
        (void)request_id;
        (void)op_index;
        (void)fds;
        (void)n;
        ck_abort_msg("no op of this test sends fds");
        return -EINVAL;
}

static const struct nbd_job_owner owner = {.done = on_done, .send_fds = no_fds};

static struct nbd_config cfg;
static struct nbd_loop *loop;
static struct nbd_dispatch_ctx ctx;

static void setup(void)
{
        nbd_config_defaults(&cfg);
        cfg.max_spawns = 1;
        cfg.max_pending_spawns = 4;
        ck_assert_int_eq(nbd_loop_new(&loop), 0);
        ctx = (struct nbd_dispatch_ctx){.cfg = &cfg,
                                        .loop = loop,
                                        .be = &nbd_kernel_backend,
                                        .handlers = fake_table,
                                        .n_handlers = sizeof(fake_table) / sizeof(*fake_table)};
}

static void teardown(void)
{
        nbd_loop_free(loop);
        nbd_config_free(&cfg);
}

/* Start a one-op request (decoded as the server decodes one) as root. */
static struct nbd_job *start(uint64_t id, struct reply_seen *seen)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[] = {&op};
        Netbroker__Ping ping = NETBROKER__PING__INIT;
        struct nbd_job_origin origin = {.reply_budget = 4096};
        struct nbp_pb_budget *budget = malloc(sizeof(*budget));
        Netbroker__ClientMessage *msg;
        struct nbd_job *job = NULL;
        uint8_t buf[256];
        size_t len;

        op.op_case = NETBROKER__OP__OP_PING;
        op.ping = &ping;
        req.id = id;
        req.n_ops = 1;
        req.ops = ops;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        len = netbroker__client_message__pack(&m, buf);
        ck_assert_ptr_nonnull(budget);
        nbp_pb_budget_init(budget, 1u << 20);
        msg = netbroker__client_message__unpack(&budget->allocator, len, buf);
        ck_assert_ptr_nonnull(msg);
        ck_assert_int_eq(nbd_job_start(&ctx, &origin, msg, budget, NULL, 0, &owner, seen, &job), 0);
        return job;
}

static void tick(void *data)
{
        (void)data;
}

/* One loop iteration that does not block (a timer due now), as main.c's
 * loop runs it; deferred frees run at its end. */
static void step(void)
{
        static struct nbd_timer t;

        nbd_timer_arm(loop, &t, 0, tick, NULL);
        ck_assert_int_ge(nbd_loop_iterate(loop), 0);
}

/* Run the loop, and nothing else, until the reply came (or 5 s passed). */
static void run_until_replied(const struct reply_seen *seen)
{
        uint64_t end = nbd_now_ms() + 5000;

        while (!seen->replies && nbd_now_ms() < end)
                step();
}

static void check_every_errno(enum fake_mode m)
{
        mode = m;
        for (fake_err = 1; fake_err <= 133; fake_err++) {
                struct reply_seen seen = {0};

                start((uint64_t)fake_err, &seen);
                run_until_replied(&seen);
                ck_assert_msg(seen.replies == 1, "mode %d errno %d: %u replies", (int)m, fake_err,
                              seen.replies);
                ck_assert_int_eq(seen.status, fake_err);
                ck_assert_msg(seen.message[0], "mode %d errno %d: empty message", (int)m, fake_err);
                step(); /* the job's deferred free */
        }
}

START_TEST(test_validate_errno_is_the_reply)
{
        check_every_errno(FAIL_VALIDATE);
        check_every_errno(FAIL_VALIDATE_BARE);
}
END_TEST

START_TEST(test_run_errno_is_the_reply)
{
        /* EPERM (1) first: it was NB_OP_PARKED, and the request hung. */
        check_every_errno(FAIL_RUN);
        check_every_errno(FAIL_RUN_BARE);
}
END_TEST

START_TEST(test_parked_op_errno_is_the_reply)
{
        check_every_errno(PARK_THEN_FAIL);
}
END_TEST

START_TEST(test_waiting_job_resumes_when_a_child_is_reaped)
{
        struct reply_seen first = {0}, second = {0};

        mode = SPAWN;
        start(1, &first);
        ck_assert_uint_eq(nbd_children_running(), 1);
        start(2, &second);
        /* max_spawns is 1: the second waits for the first's child. */
        ck_assert_uint_eq(nbd_jobs_waiting(), 1);
        ck_assert_uint_eq(second.replies, 0);
        /* Nothing but the loop: no kick. */
        run_until_replied(&first);
        run_until_replied(&second);
        ck_assert_uint_eq(first.replies, 1);
        ck_assert_int_eq(first.status, 0);
        ck_assert_uint_eq(second.replies, 1);
        ck_assert_int_eq(second.status, 0);
        ck_assert_uint_eq(nbd_jobs_waiting(), 0);
        step();
}
END_TEST

static int hook_calls;

static void count_hook(void *data)
{
        *(int *)data += 1;
}

START_TEST(test_job_end_hooks_run_before_the_reply)
{
        struct reply_seen seen = {0};
        int calls = 0;

        ck_assert_int_eq(nbd_dispatch_on_job_end(&ctx, count_hook, &calls), 0);
        ck_assert_int_eq(nbd_dispatch_on_job_end(&ctx, count_hook, &hook_calls), 0);
        for (int i = 2; i < NBD_JOB_END_HOOKS; i++)
                ck_assert_int_eq(nbd_dispatch_on_job_end(&ctx, count_hook, &calls), 0);
        ck_assert_int_eq(nbd_dispatch_on_job_end(&ctx, count_hook, &calls), -ENOSPC);
        mode = FAIL_RUN;
        fake_err = EPERM;
        start(1, &seen);
        run_until_replied(&seen);
        ck_assert_uint_eq(seen.replies, 1);
        ck_assert_int_eq(calls, NBD_JOB_END_HOOKS - 1);
        ck_assert_int_eq(hook_calls, 1);
        step();
}
END_TEST

START_TEST(test_features_read_the_handlers_needs)
{
        static const struct nbd_op_handler needs_links = {
                .name = "needs-links", .needs = NBD_NEEDS_LINKS, .run = fake_run};
        static const struct nbd_op_handler *const table[] = {
                [NETBROKER__OP__OP_PING] = &fake_handler,
                [NETBROKER__OP__OP_STATS] = &needs_links,
        };
        static const struct nbd_op_handler *const only_links[] = {[NETBROKER__OP__OP_PING] =
                                                                          &needs_links};
        struct reply_seen seen = {0};
        const char *names[4];

        ctx.handlers = table;
        ctx.n_handlers = sizeof(table) / sizeof(*table);
        /* No links: the op needing them is neither offered nor run. */
        ck_assert_uint_eq(nbd_features(&ctx, names, 4), 1);
        ck_assert_str_eq(names[0], "fake");
        ctx.handlers = only_links;
        ctx.n_handlers = sizeof(only_links) / sizeof(*only_links);
        mode = FAIL_RUN;
        fake_err = EIO;
        start(1, &seen);
        ck_assert_uint_eq(seen.replies, 1);
        ck_assert_int_eq(seen.status, EOPNOTSUPP);
        step();
}
END_TEST

/* The real table: with no rtnetlink (links NULL) no op that looks up an
 * interface is offered (Exec and the supervised programs need none). LinkList and BandwidthShow
 * once lacked their needs, were offered, and their validation dereferenced the missing links. */
START_TEST(test_real_ops_without_links_are_not_offered)
{
        struct nbd_dispatch_ctx bare = ctx;
        const char *names[64];
        size_t n;

        bare.handlers = NULL; /* the real table */
        bare.n_handlers = 0;
        bare.links = NULL;
        bare.fw = NULL;
        bare.bw = NULL;
        n = nbd_features(&bare, names, 64);
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(strcmp(names[i], "ping") == 0 || strcmp(names[i], "stats") == 0 ||
                                      strcmp(names[i], "exec") == 0 ||
                                      strncmp(names[i], "program_", 8) == 0,
                              "%s is offered without rtnetlink", names[i]);
        ck_assert_uint_ge(n, 3);
}
END_TEST

/* A spawn table that says how many programs run, whatever spawn.c knows. */
static unsigned said_running;
static void (*said_reaped_fn)(void *data);
static void *said_reaped_data;

static unsigned say_running(void)
{
        return said_running;
}

static unsigned say_running_of(uid_t uid)
{
        (void)uid;
        return said_running;
}

static void say_on_reaped(void (*fn)(void *data), void *data)
{
        said_reaped_fn = fn;
        said_reaped_data = data;
}

START_TEST(test_the_dispatcher_counts_children_through_its_backend)
{
        static struct nbd_backend be;
        struct reply_seen seen = {0};

        be = nbd_kernel_backend;
        be.spawn.running = say_running;
        be.spawn.running_of = say_running_of;
        be.spawn.on_reaped = say_on_reaped;
        ctx.be = &be;
        /* max_spawns is 1, and the table says one runs: the job waits,
         * though spawn.c runs nothing. */
        said_running = 1;
        mode = SPAWN;
        start(1, &seen);
        ck_assert_uint_eq(nbd_jobs_waiting(), 1);
        ck_assert_ptr_nonnull(said_reaped_fn);
        step();
        ck_assert_uint_eq(seen.replies, 0);
        /* The table's child is reaped: the job resumes, from the loop. */
        said_running = 0;
        said_reaped_fn(said_reaped_data);
        ck_assert_uint_eq(seen.replies, 0);
        run_until_replied(&seen);
        ck_assert_uint_eq(seen.replies, 1);
        ck_assert_int_eq(seen.status, 0);
        ck_assert_uint_eq(nbd_jobs_waiting(), 0);
        step();
}
END_TEST

START_TEST(test_the_kernel_backend_sets_every_entry)
{
        struct nbd_backend be = nbd_kernel_backend;

        ck_assert_msg(nbt_backend_unset(&nbd_kernel_backend) == SIZE_MAX,
                      "nbd_kernel_backend: the entry at byte %zu is NULL",
                      nbt_backend_unset(&nbd_kernel_backend));
        /* The check sees a missing entry, in either table. */
        be.fw.open = NULL;
        ck_assert_uint_eq(nbt_backend_unset(&be), offsetof(struct nbd_backend, fw.open));
        be = nbd_kernel_backend;
        be.spawn.on_reaped = NULL;
        ck_assert_uint_eq(nbt_backend_unset(&be), offsetof(struct nbd_backend, spawn.on_reaped));
}
END_TEST

static Suite *dispatch_suite(void)
{
        Suite *s = suite_create("dispatch");
        TCase *tc = tcase_create("dispatch");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_validate_errno_is_the_reply);
        tcase_add_test(tc, test_run_errno_is_the_reply);
        tcase_add_test(tc, test_parked_op_errno_is_the_reply);
        tcase_add_test(tc, test_waiting_job_resumes_when_a_child_is_reaped);
        tcase_add_test(tc, test_job_end_hooks_run_before_the_reply);
        tcase_add_test(tc, test_features_read_the_handlers_needs);
        tcase_add_test(tc, test_real_ops_without_links_are_not_offered);
        tcase_add_test(tc, test_the_dispatcher_counts_children_through_its_backend);
        tcase_add_test(tc, test_the_kernel_backend_sets_every_entry);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(dispatch_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
