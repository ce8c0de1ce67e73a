// SPDX-License-Identifier: LGPL-2.1-or-later
/* The event-loop API and deadlines of libnetbroker (client/client.c): the
 * callback form driven from a poll() loop, many requests in flight,
 * replies out of order, deadlines against a stopped helper and what comes
 * after, cancel before and after the reply, fds of a cancelled request,
 * callbacks that submit, synchronous callers beside the loop,
 * nb_submit_timeout(), a worker thread's deadline waking the loop,
 * nb_close() from a callback, and a connection inherited by a child of
 * fork(). Every test runs in a network namespace of its own with a helper
 * of its own. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

/* What one request's callback saw. */
struct seen {
        int calls;
        int status;
        uint64_t id;
        nb_results *res;
        int order; /* place among all callbacks of the test, from 1 */
};

static int callbacks_run;

static void record(nb_conn *c, uint64_t id, int status, nb_results *res, void *opaque)
{
        struct seen *s = opaque;

        (void)c;
        s->calls++;
        s->status = status;
        s->id = id;
        nb_results_free(s->res); /* a second call would leak otherwise; it is asserted on */
        s->res = res;
        s->order = ++callbacks_run;
}

static nb_batch *ping_batch(void)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_ping(b), 0);
        return b;
}

static uint64_t submit_async(nb_conn *c, nb_batch *b, int timeout_ms, struct seen *s)
{
        uint64_t id = 0;
        int r = nb_submit_async(c, b, timeout_ms, record, s, &id);

        ck_assert_msg(r == 0, "nb_submit_async: %s (%s)", strerror(-r), nb_conn_error(c));
        ck_assert_uint_ne(id, 0);
        nb_batch_free(b);
        return id;
}

/* One turn of an event loop: poll nb_conn_fd() until it is readable or the
 * connection's next deadline (at most max_ms), then dispatch. */
static void loop_once(nb_conn *c, int max_ms)
{
        struct pollfd p = {.fd = nb_conn_fd(c), .events = POLLIN};
        int t = nb_conn_next_timeout(c);

        if (t < 0 || t > max_ms)
                t = max_ms;
        ck_assert_int_ge(poll(&p, 1, t), 0);
        ck_assert_int_ge(nb_conn_dispatch(c), 0);
}

/* Run the loop until *counter reaches want, failing after max_ms. */
static void loop_until(nb_conn *c, const int *counter, int want, unsigned max_ms)
{
        uint64_t end = tu_now_us() + (uint64_t)max_ms * 1000;

        while (*counter < want) {
                uint64_t now = tu_now_us();
                ck_assert_msg(now < end, "%d of %d callbacks after %u ms", *counter, want, max_ms);
                /* No short cap: a wake-up the fd failed to give fails the
                 * test instead of being covered by polling. */
                loop_once(c, (int)((end - now) / 1000) + 1);
        }
}

/* Keep the loop running for ms (callbacks that should not come). */
static void loop_for(nb_conn *c, unsigned ms)
{
        uint64_t end = tu_now_us() + (uint64_t)ms * 1000;

        while (tu_now_us() < end)
                loop_once(c, 20);
}

static void ping_sync_ok(nb_conn *c)
{
        nb_batch *b = ping_batch();
        nb_results *res = NULL;
        int r = nb_submit_timeout(c, b, 10000, &res);

        ck_assert_msg(r == 0, "ping: %s (%s)", strerror(-r), nb_conn_error(c));
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        nb_results_free(res);
        nb_batch_free(b);
}

static nb_batch *sleep_batch(const char *seconds)
{
        const char *argv[] = {"/bin/sleep", seconds, NULL};
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_exec(b, "/bin/sleep", argv, NULL, NULL, 0, 0), 0);
        return b;
}

START_TEST(test_callback_gets_results_once_and_the_fd_is_quiet_after)
{
        struct seen s = {0};
        uint64_t id;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        ck_assert_int_ge(nb_conn_fd(c), 0);
        ck_assert_int_eq(nb_conn_next_timeout(c), -1);
        id = submit_async(c, ping_batch(), -1, &s);
        ck_assert_int_eq(s.calls, 0); /* never from inside the submit */
        loop_until(c, &s.calls, 1, 10000);
        ck_assert_int_eq(s.status, 0);
        ck_assert_uint_eq(s.id, id);
        ck_assert_ptr_nonnull(s.res);
        ck_assert_uint_eq(nb_results_count(s.res), 1);
        ck_assert_int_eq(nb_result_status(s.res, 0), 0);
        loop_for(c, 100);
        ck_assert_int_eq(s.calls, 1);
        {
                /* Nothing in flight: the fd is not readable (a busy loop
                 * otherwise). */
                struct pollfd p = {.fd = nb_conn_fd(c), .events = POLLIN};
                ck_assert_int_eq(poll(&p, 1, 0), 0);
        }
        ck_assert_int_eq(nb_cancel(c, id), -ENOENT); /* called back already */
        nb_results_free(s.res);
        nb_close(c);
}
END_TEST

START_TEST(test_fifty_pings_and_batches_in_flight_each_called_back_once)
{
        enum { PINGS = 50, STATS = 5 };
        struct seen s[PINGS + STATS] = {{0}};
        uint64_t ids[PINGS + STATS];
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        for (int i = 0; i < PINGS + STATS; i++) {
                nb_batch *b = nb_batch_new();
                if (i < PINGS)
                        ck_assert_int_eq(nb_batch_ping(b), 0);
                else
                        for (int k = 0; k < 3; k++)
                                ck_assert_int_eq(nb_batch_stats(b), 0);
                ids[i] = submit_async(c, b, 10000, &s[i]);
        }
        ck_assert_int_ge(nb_conn_next_timeout(c), 0);
        loop_until(c, &callbacks_run, PINGS + STATS, 20000);
        for (int i = 0; i < PINGS + STATS; i++) {
                ck_assert_int_eq(s[i].calls, 1);
                ck_assert_int_eq(s[i].status, 0);
                ck_assert_uint_eq(s[i].id, ids[i]);
                ck_assert_uint_eq(nb_results_count(s[i].res), i < PINGS ? 1 : 3);
                ck_assert_int_eq(nb_results_first_error(s[i].res), -1);
                for (int j = 0; j < i; j++)
                        ck_assert_uint_ne(ids[i], ids[j]);
                nb_results_free(s[i].res);
        }
        ck_assert_int_eq(nb_conn_next_timeout(c), -1);
        nb_close(c);
}
END_TEST

/* The helper runs an Exec off its loop: a Ping sent after it is answered
 * first, and each reply finds its own callback. */
START_TEST(test_replies_out_of_order_find_their_callbacks)
{
        struct seen slow = {0}, fast = {0};
        uint64_t slow_id, fast_id;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        slow_id = submit_async(c, sleep_batch("0.5"), 10000, &slow);
        fast_id = submit_async(c, ping_batch(), 10000, &fast);
        loop_until(c, &callbacks_run, 2, 10000);
        ck_assert_int_eq(fast.order, 1);
        ck_assert_int_eq(slow.order, 2);
        ck_assert_uint_eq(fast.id, fast_id);
        ck_assert_uint_eq(slow.id, slow_id);
        ck_assert_int_eq(fast.status, 0);
        ck_assert_int_eq(slow.status, 0);
        ck_assert_int_eq(nb_result_status(slow.res, 0), 0); /* sleep exited 0 */
        nb_results_free(slow.res);
        nb_results_free(fast.res);
        nb_close(c);
}
END_TEST

static bool process_gone(pid_t pid)
{
        return kill(pid, 0) < 0 && errno == ESRCH;
}

/* A spawned helper stopped with SIGSTOP: the request with a deadline fails
 * with -ETIMEDOUT when it passes, the other one in flight with
 * -ECONNRESET, the stopped helper is killed and reaped, the fd the loop
 * watches stays the same, and the next request goes to a new helper. */
START_TEST(test_stopped_spawned_helper_times_out_resets_and_is_replaced)
{
        struct seen bounded = {0}, unbounded = {0}, after = {0};
        nb_conn *c;
        pid_t pid;
        int fd;
        uint64_t t0;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        fd = nb_conn_fd(c);
        pid = nb_conn_helper_pid(c);
        ck_assert_int_gt(pid, 0);
        ck_assert_int_eq(kill(pid, SIGSTOP), 0);
        t0 = tu_now_us();
        submit_async(c, ping_batch(), -1, &unbounded);
        submit_async(c, ping_batch(), 300, &bounded);
        ck_assert_int_le(nb_conn_next_timeout(c), 300);
        loop_until(c, &callbacks_run, 2, 10000);
        ck_assert_uint_ge(tu_now_us() - t0, 300 * 1000);
        ck_assert_int_eq(bounded.status, -ETIMEDOUT);
        ck_assert_ptr_null(bounded.res);
        ck_assert_int_eq(unbounded.status, -ECONNRESET);
        ck_assert_int_eq(bounded.order, 1); /* the one whose deadline passed says so first */
        ck_assert_msg(strstr(nb_conn_error(c), "deadline"), "error: %s", nb_conn_error(c));
        /* Killed now; reaped by the next submit, which spawns anew. */
        submit_async(c, ping_batch(), 10000, &after);
        ck_assert_msg(process_gone(pid), "the stopped helper %d is still there", (int)pid);
        ck_assert_int_gt(nb_conn_helper_pid(c), 0);
        ck_assert_int_ne(nb_conn_helper_pid(c), pid);
        ck_assert_int_eq(nb_conn_fd(c), fd);
        loop_until(c, &after.calls, 1, 10000);
        ck_assert_int_eq(after.status, 0);
        ck_assert_int_eq(bounded.calls + unbounded.calls + after.calls, 3);
        ck_assert_int_eq(tu_zombies_of(getpid()), 0);
        nb_results_free(after.res);
        nb_close(c);
}
END_TEST

/* The synchronous form: -ETIMEDOUT against a stopped shared helper (one
 * reached by nb_connect, which the library leaves alone); while it is
 * still stopped a new connection's Hello times out as well; after SIGCONT
 * the next call connects again and works. */
START_TEST(test_sync_timeout_on_stopped_socket_helper_and_recovery_after_sigcont)
{
        struct tu_helper h;
        nb_results *res = NULL;
        nb_batch *b = ping_batch();
        nb_conn *c;
        uint64_t t0;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        ping_sync_ok(c);
        ck_assert_int_eq(kill(h.pid, SIGSTOP), 0);
        t0 = tu_now_us();
        ck_assert_int_eq(nb_submit_timeout(c, b, 300, &res), -ETIMEDOUT);
        ck_assert_uint_ge(tu_now_us() - t0, 300 * 1000);
        ck_assert_ptr_null(res);
        ck_assert_msg(strstr(nb_conn_error(c), "deadline"), "error: %s", nb_conn_error(c));
        /* Connecting again: the stopped helper's socket accepts, nobody
         * says Hello. */
        ck_assert_int_eq(nb_submit_timeout(c, b, 300, &res), -ETIMEDOUT);
        ck_assert_msg(strstr(nb_conn_error(c), "Hello"), "error: %s", nb_conn_error(c));
        ck_assert_msg(tu_process_alive(h.pid), "a shared helper is not the library's to kill");
        ck_assert_int_eq(kill(h.pid, SIGCONT), 0);
        ping_sync_ok(c);
        nb_batch_free(b);
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_sync_timeout_then_nb_submit_works_on_a_new_spawned_helper)
{
        nb_results *res = NULL;
        nb_batch *b = ping_batch();
        nb_conn *c;
        pid_t pid;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        pid = nb_conn_helper_pid(c);
        ck_assert_int_eq(kill(pid, SIGSTOP), 0);
        ck_assert_int_eq(nb_submit_timeout(c, b, 200, &res), -ETIMEDOUT);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert_int_ne(nb_conn_helper_pid(c), pid);
        ck_assert(process_gone(pid));
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

/* A deadline that is met changes nothing: the reply is the result and the
 * helper is the same. */
START_TEST(test_deadline_met_keeps_the_connection)
{
        struct seen s = {0};
        nb_conn *c;
        pid_t pid;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        pid = nb_conn_helper_pid(c);
        submit_async(c, sleep_batch("0.2"), 5000, &s);
        loop_until(c, &s.calls, 1, 10000);
        ck_assert_int_eq(s.status, 0);
        ping_sync_ok(c);
        ck_assert_int_eq(nb_conn_helper_pid(c), pid);
        nb_results_free(s.res);
        nb_close(c);
}
END_TEST

/* Cancelled before the reply: the callback runs once with -ECANCELED, the
 * reply that comes later is dropped, and the connection goes on. */
START_TEST(test_cancel_before_reply_calls_back_once_and_drops_the_reply)
{
        struct seen s = {0}, other = {0};
        uint64_t id;
        nb_conn *c;
        pid_t pid;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        pid = nb_conn_helper_pid(c);
        id = submit_async(c, sleep_batch("0.3"), -1, &s);
        submit_async(c, sleep_batch("0.4"), -1, &other);
        ck_assert_int_eq(nb_cancel(c, id), 0);
        ck_assert_int_eq(s.calls, 0); /* from the next dispatch, not from nb_cancel */
        ck_assert_int_eq(nb_cancel(c, id), -ENOENT);
        loop_until(c, &s.calls, 1, 1000);
        ck_assert_int_eq(s.status, -ECANCELED);
        ck_assert_ptr_null(s.res);
        ck_assert_int_eq(nb_cancel(c, id), -ENOENT);
        ck_assert_int_eq(nb_cancel(c, 123456789), -ENOENT);
        /* The cancelled one's reply comes before the other's and is
         * dropped; the other is unaffected. */
        loop_until(c, &other.calls, 1, 10000);
        ck_assert_int_eq(other.status, 0);
        ck_assert_int_eq(s.calls, 1);
        ping_sync_ok(c);
        ck_assert_int_eq(nb_conn_helper_pid(c), pid);
        nb_results_free(other.res);
        nb_close(c);
}
END_TEST

/* Cancelled after the reply came (the fd turned readable) but before the
 * callback ran: -ECANCELED, and the results are dropped. */
START_TEST(test_cancel_after_reply_arrived_before_callback)
{
        struct seen s = {0};
        struct pollfd p;
        uint64_t id;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        id = submit_async(c, ping_batch(), -1, &s);
        p = (struct pollfd){.fd = nb_conn_fd(c), .events = POLLIN};
        ck_assert_int_eq(poll(&p, 1, 10000), 1);
        ck_assert_int_eq(nb_cancel(c, id), 0);
        loop_until(c, &s.calls, 1, 1000);
        ck_assert_int_eq(s.status, -ECANCELED);
        ck_assert_ptr_null(s.res);
        loop_for(c, 100);
        ck_assert_int_eq(s.calls, 1);
        nb_close(c);
}
END_TEST

/* The same, with the reply already read by a synchronous caller (it files
 * every reply it reads): the cancel drops results that were ready. */
START_TEST(test_cancel_of_a_reply_read_by_another_caller)
{
        struct seen s = {0};
        uint64_t id;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        id = submit_async(c, ping_batch(), -1, &s);
        /* Pings are answered in order: by the time this one's reply is
         * read, the first one's was. */
        ping_sync_ok(c);
        ck_assert_int_eq(s.calls, 0); /* callbacks run only in dispatch */
        ck_assert_int_eq(nb_cancel(c, id), 0);
        ck_assert_int_eq(nb_conn_dispatch(c), 1);
        ck_assert_int_eq(s.calls, 1);
        ck_assert_int_eq(s.status, -ECANCELED);
        ck_assert_ptr_null(s.res);
        nb_close(c);
}
END_TEST

static nb_batch *tap_batch(const char *name, unsigned queues)
{
        nb_tap_opts o = {.size = sizeof(nb_tap_opts), .queues = queues};
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_tap_create(b, name, &o), 0);
        return b;
}

/* The fds of a cancelled TapCreate are closed when its reply comes (the
 * tap, not persistent, goes away with them); a second TapCreate queued
 * behind it on the helper's link lane tells when that has happened. */
START_TEST(test_fds_of_a_cancelled_request_are_closed)
{
        struct seen cancelled = {0}, kept = {0};
        uint64_t id;
        int before;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        ping_sync_ok(c);
        before = tu_fd_count(getpid());
        id = submit_async(c, tap_batch("evc0", 4), -1, &cancelled);
        ck_assert_int_eq(nb_cancel(c, id), 0);
        submit_async(c, tap_batch("evk0", 4), -1, &kept);
        loop_until(c, &callbacks_run, 2, 10000);
        ck_assert_int_eq(cancelled.status, -ECANCELED);
        ck_assert_int_eq(kept.status, 0);
        ck_assert_int_eq(nb_result_status(kept.res, 0), 0);
        ck_assert_uint_eq(nb_result_fd_count(kept.res, 0), 4);
        /* Only the kept tap's 4 fds are open. */
        ck_assert_int_eq(tu_fd_count(getpid()), before + 4);
        ck_assert(tu_link_exists("evk0"));
        ck_assert(!tu_link_exists("evc0"));
        nb_results_free(kept.res);
        ck_assert_int_eq(tu_fd_count(getpid()), before);
        nb_close(c);
}
END_TEST

/* The fds of a request whose reply was read (by a synchronous caller,
 * whose TapCreate waited behind it on the helper's link lane) but not yet
 * handed to its callback are closed by the cancel. */
START_TEST(test_fds_of_a_request_cancelled_after_its_reply_are_closed)
{
        struct seen s = {0};
        nb_batch *b = tap_batch("evs0", 2);
        nb_results *res = NULL;
        uint64_t id;
        int before;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        ping_sync_ok(c);
        before = tu_fd_count(getpid());
        id = submit_async(c, tap_batch("eva0", 4), -1, &s);
        ck_assert_int_eq(nb_submit_timeout(c, b, 10000, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        /* The async tap's 4 fds are here, waiting for the callback. */
        ck_assert_int_eq(tu_fd_count(getpid()), before + 4 + 2);
        ck_assert_int_eq(nb_cancel(c, id), 0);
        ck_assert_int_eq(tu_fd_count(getpid()), before + 2);
        ck_assert(!tu_link_exists("eva0"));
        ck_assert_int_eq(nb_conn_dispatch(c), 1);
        ck_assert_int_eq(s.status, -ECANCELED);
        nb_results_free(res);
        ck_assert_int_eq(tu_fd_count(getpid()), before);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

/* A request larger than the socket takes at once stays queued in the
 * library; the loop watches nb_conn_fd() for readability only, and that is
 * enough: the fd turns readable when the socket can take more, and
 * dispatch writes the rest. */
START_TEST(test_large_request_is_sent_by_the_loop_watching_readability_only)
{
        enum { LEN = 8 << 20 };
        struct seen big = {0}, small = {0};
        char *data = malloc(LEN);
        const char *argv[] = {"/bin/true", NULL};
        nb_batch *b = nb_batch_new();
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        ck_assert_ptr_nonnull(data);
        memset(data, 'x', LEN);
        ck_assert_int_eq(nb_batch_exec(b, "/bin/true", argv, NULL, data, LEN, 0), 0);
        free(data);
        submit_async(c, b, 30000, &big);
        submit_async(c, ping_batch(), 30000, &small); /* queued behind it */
        loop_until(c, &callbacks_run, 2, 30000);
        ck_assert_int_eq(big.status, 0);
        ck_assert_int_eq(small.status, 0);
        ck_assert_int_eq(nb_result_status(big.res, 0), 0);
        nb_results_free(big.res);
        nb_results_free(small.res);
        nb_close(c);
}
END_TEST

/* Callbacks that submit again, and one that waits synchronously: no
 * deadlock, every request answered. */
struct chain {
        nb_conn *conn;
        int left;
        int done;
        int failures;
};

static void chain_next(nb_conn *c, uint64_t id, int status, nb_results *res, void *opaque)
{
        struct chain *ch = opaque;
        nb_batch *b;

        (void)id;
        if (status != 0 || nb_result_status(res, 0) != 0)
                ch->failures++;
        nb_results_free(res);
        ch->done++;
        if (ch->left == 0)
                return;
        ch->left--;
        b = ping_batch();
        if (ch->left % 2 == 0) {
                if (nb_submit_async(c, b, 10000, chain_next, ch, NULL) < 0)
                        ch->failures++;
        } else {
                /* The synchronous form inside a callback, then the async
                 * one to keep the chain going. */
                nb_results *r2 = NULL;
                if (nb_submit_timeout(c, b, 10000, &r2) != 0 || nb_result_status(r2, 0) != 0)
                        ch->failures++;
                nb_results_free(r2);
                if (nb_submit_async(c, b, 10000, chain_next, ch, NULL) < 0)
                        ch->failures++;
        }
        nb_batch_free(b);
}

START_TEST(test_callback_that_submits_again_and_waits_does_not_deadlock)
{
        struct chain ch = {.left = 20};
        nb_batch *b = ping_batch();
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        ch.conn = c;
        ck_assert_int_eq(nb_submit_async(c, b, 10000, chain_next, &ch, NULL), 0);
        nb_batch_free(b);
        loop_until(c, &ch.done, 21, 20000);
        ck_assert_int_eq(ch.failures, 0);
        nb_close(c);
}
END_TEST

/* Threads calling nb_submit() on the connection an event loop drives:
 * whoever reads a reply files it under its request. */
struct sync_caller {
        nb_conn *conn;
        int ok;
};

static void *sync_caller_run(void *p)
{
        struct sync_caller *s = p;

        for (int i = 0; i < 30; i++) {
                nb_batch *b = nb_batch_new();
                nb_results *res = NULL;
                nb_batch_ping(b);
                if (nb_submit(s->conn, b, &res) == 0 && nb_result_status(res, 0) == 0)
                        s->ok++;
                nb_results_free(res);
                nb_batch_free(b);
        }
        return NULL;
}

/* Two threads' sync Pings beside 60 async ones dispatched by the loop,
 * on c: every one answered once. */
static void sync_and_async_round(nb_conn *c)
{
        enum { ASYNC = 60 };
        struct sync_caller t[2];
        struct seen s[ASYNC] = {{0}};
        pthread_t th[2];

        callbacks_run = 0;
        for (int i = 0; i < 2; i++) {
                t[i] = (struct sync_caller){.conn = c};
                pthread_create(&th[i], NULL, sync_caller_run, &t[i]);
        }
        for (int i = 0; i < ASYNC; i++) {
                submit_async(c, ping_batch(), 20000, &s[i]);
                loop_once(c, 0);
        }
        loop_until(c, &callbacks_run, ASYNC, 30000);
        for (int i = 0; i < 2; i++) {
                pthread_join(th[i], NULL);
                ck_assert_int_eq(t[i].ok, 30);
        }
        for (int i = 0; i < ASYNC; i++) {
                ck_assert_int_eq(s[i].calls, 1);
                ck_assert_int_eq(s[i].status, 0);
                nb_results_free(s[i].res);
        }
}

START_TEST(test_sync_callers_beside_the_event_loop)
{
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        sync_and_async_round(c);
        nb_close(c);
}
END_TEST

/* The same, again and again on one connection. A sync caller that became
 * the poller waits in poll() without the lock; when the event loop's
 * dispatch read and filed its reply, nothing woke it, and once no other
 * reply came it waited for ever (a subagent caught it hung at its 150th and
 * 450th round under ASan and load; the single round above failed one CI
 * run in some twenty). 150 rounds, a few seconds. */
START_TEST(test_sync_callers_beside_the_event_loop_again_and_again)
{
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        for (int round = 0; round < 150; round++)
                sync_and_async_round(c);
        nb_close(c);
}
END_TEST

/* nb_close() with requests in flight calls each back with -ECANCELED, so
 * the caller can free what its opaque pointers hold. */
START_TEST(test_close_calls_back_what_is_in_flight)
{
        struct seen s[3] = {{0}};
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        for (int i = 0; i < 3; i++)
                submit_async(c, sleep_batch("0.5"), -1, &s[i]);
        nb_close(c);
        for (int i = 0; i < 3; i++) {
                ck_assert_int_eq(s[i].calls, 1);
                ck_assert_int_eq(s[i].status, -ECANCELED);
        }
}
END_TEST

/* A worker thread submits with a deadline while the loop sleeps. */
struct late_submit {
        nb_conn *conn;
        nb_batch *batch;
        struct seen *seen;
        uint64_t when; /* tu_now_us() of the submit */
        int r;
};

static void *submit_later(void *p)
{
        struct late_submit *w = p;

        usleep(200 * 1000); /* the loop is in poll() by then */
        w->when = tu_now_us();
        w->r = nb_submit_async(w->conn, w->batch, 300, record, w->seen, NULL);
        return NULL;
}

/* The loop waits with nb_conn_next_timeout() -1 (nothing in flight, _i 0)
 * or a later timer (a request with a 20 s deadline, _i 1), and a worker
 * thread submits with a 300 ms deadline: nb_conn_fd() turned readable for
 * its reply only, so the request timed out when the loop's own bound ran
 * out (5 s here, for ever in a loop with no other work). Now the submit
 * wakes the loop, whose dispatch does nothing and whose next
 * nb_conn_next_timeout() has the new deadline. A submit whose deadline is
 * not the earliest does not wake it. */
START_TEST(test_submit_from_a_thread_with_the_earliest_deadline_wakes_the_loop)
{
        struct seen early = {0}, late = {0}, s = {0};
        struct late_submit w = {0};
        pthread_t th;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        if (_i == 1) {
                struct pollfd p = {.fd = nb_conn_fd(c), .events = POLLIN};
                submit_async(c, sleep_batch("5"), 20000, &early);
                ck_assert_int_eq(nb_conn_dispatch(c), 0);
                submit_async(c, sleep_batch("5"), 30000, &late);
                ck_assert_int_eq(poll(&p, 1, 0), 0);
                ck_assert_int_gt(nb_conn_next_timeout(c), 10000);
        } else {
                ck_assert_int_eq(nb_conn_next_timeout(c), -1);
        }
        w = (struct late_submit){.conn = c, .batch = sleep_batch("5"), .seen = &s};
        ck_assert_int_eq(pthread_create(&th, NULL, submit_later, &w), 0);
        loop_until(c, &s.calls, 1, 5000);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_int_eq(w.r, 0);
        ck_assert_int_eq(s.status, -ETIMEDOUT);
        ck_assert_uint_lt(tu_now_us() - w.when, 1500 * 1000);
        if (_i == 1) {
                /* The connection was reset for the deadline. */
                loop_until(c, &callbacks_run, 3, 5000);
                ck_assert_int_eq(early.status, -ECONNRESET);
                ck_assert_int_eq(late.status, -ECONNRESET);
        }
        nb_batch_free(w.batch);
        nb_close(c);
}
END_TEST

/* ---- a connection inherited by a child of fork() ---- */

/* The child's side: every call that would touch the shared socket, helper
 * or epoll set is refused, nb_close() frees the child's copy, and nothing
 * is called back (the request in flight is the parent's). Returns 0, or
 * the number of the first check that failed: the child's exit status
 * (ck_assert is the test process's, not the child's). */
static int child_uses_inherited(nb_conn *c, nb_batch *b, uint64_t parents_id,
                                const struct seen *parents, int fds_without_conn, bool only_close)
{
        struct seen mine = {0};
        nb_results *res = NULL;
        uint64_t id = 0;

        if (only_close)
                goto close;
        if (nb_submit_timeout(c, b, 1000, &res) != -ECHILD || res)
                return 1;
        if (nb_submit(c, b, &res) != -ECHILD || res)
                return 2;
        if (nb_submit_async(c, b, 1000, record, &mine, &id) != -ECHILD || id != 0)
                return 3;
        if (nb_conn_dispatch(c) != -ECHILD)
                return 4;
        if (nb_cancel(c, parents_id) != -ECHILD)
                return 5;
        if (nb_conn_fd(c) != -ECHILD)
                return 6;
        if (nb_conn_next_timeout(c) != -1)
                return 7;
        if (!strstr(nb_conn_error(c), "fork()"))
                return 8;
close:
        nb_close(c);
        if (mine.calls != 0 || parents->calls != 0)
                return 9;
        /* The socket, the epoll fd, the two eventfds and the pidfd: the
         * child's copies are closed. */
        if (tu_fd_count(getpid()) != fds_without_conn)
                return 10;
        return 0;
}

/* A child of fork() that calls nb_submit() on the connection it inherited
 * shared the parent's socket (request ids collide, replies go to the wrong
 * process), and after a deadline both SIGKILLed the helper through the
 * inherited pidfd; its nb_close() ran the parent's callbacks and took the
 * socket out of the parent's epoll set. Now the child is refused with
 * -ECHILD and its nb_close() only frees its copy: the parent's request in
 * flight is answered through the fd its loop watches, by the same helper.
 * Run twice: the child uses the connection then closes it (_i 0), or only
 * closes it (_i 1), as a child that tidies up before its work does. */
START_TEST(test_child_of_fork_is_refused_and_its_close_leaves_the_parent_alone)
{
        struct seen parents = {0};
        int fds_without_conn, status;
        uint64_t t0;
        nb_batch *b;
        uint64_t id;
        pid_t pid, child;
        nb_conn *c;

        tu_private_netns();
        fds_without_conn = tu_fd_count(getpid());
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        pid = nb_conn_helper_pid(c);
        /* No deadline: the loop below wakes only when the fd says so. */
        t0 = tu_now_us();
        id = submit_async(c, sleep_batch("0.3"), -1, &parents);
        b = ping_batch();
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0)
                _exit(child_uses_inherited(c, b, id, &parents, fds_without_conn, _i == 1));
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "the child's check %d failed (child_uses_inherited), status %#x",
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1, status);
        loop_until(c, &parents.calls, 1, 10000);
        /* Not at the end of the loop's 10 s: the socket is still in the
         * epoll set behind nb_conn_fd(). */
        ck_assert_uint_lt(tu_now_us() - t0, 3000 * 1000);
        ck_assert_int_eq(parents.status, 0);
        ck_assert_uint_eq(parents.id, id);
        ck_assert_int_eq(nb_result_status(parents.res, 0), 0);
        ping_sync_ok(c);
        ck_assert_int_eq(nb_conn_helper_pid(c), pid);
        ck_assert(tu_process_alive(pid));
        ck_assert_str_eq(nb_conn_error(c), "");
        nb_results_free(parents.res);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

/* A thread of the parent takes and lets go the connection's lock, as a
 * daemon's worker asking nb_conn_helper_pid() would, while the main thread
 * forks again and again, and each child asks the connection's getters.
 * Before, a child forked while the lock was held waited for it for ever:
 * no thread is left in the child to let it go (here its alarm ends it).
 * Now a child's getters answer without the lock. */
struct lock_hammer {
        nb_conn *c;
        _Atomic bool stop;
};

static void *hammer_the_lock(void *arg)
{
        struct lock_hammer *h = arg;

        while (!h->stop)
                (void)nb_conn_helper_pid(h->c);
        return NULL;
}

/* In the child: 0, or the number of the getter that answered wrongly. */
static int child_asks_the_getters(nb_conn *c)
{
        unsigned version;
        sigset_t alrm;
        uint64_t v;

        /* A getter waiting on the lock dies of it: the test process may
         * block or ignore SIGALRM, and a child inherits that. */
        sigemptyset(&alrm);
        sigaddset(&alrm, SIGALRM);
        signal(SIGALRM, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        alarm(5);
        if (nb_conn_has_feature(c, "ping"))
                return 1;
        if (nb_conn_helper_version(c, &version) != -ECHILD)
                return 2;
        if (nb_conn_limit(c, NB_LIMIT_EXEC_RUNNING, &v) != -ECHILD)
                return 3;
        if (nb_conn_helper_pid(c) != 0)
                return 4;
        if (nb_conn_on_event(c, NULL, NULL) != -ECHILD)
                return 5;
        return 0;
}

START_TEST(test_child_of_fork_asks_the_getters_while_a_parent_thread_holds_the_lock)
{
        struct lock_hammer h = {0};
        int status = 0, i;
        pthread_t t;
        pid_t pid;

        tu_private_netns();
        h.c = tu_spawn(TU_ALLOW);
        pid = nb_conn_helper_pid(h.c);
        ck_assert(nb_conn_has_feature(h.c, "ping"));
        ck_assert_int_eq(pthread_create(&t, NULL, hammer_the_lock, &h), 0);
        for (i = 0; i < 200 && status == 0; i++) {
                pid_t child = fork();
                if (child == 0)
                        _exit(child_asks_the_getters(h.c));
                if (child < 0 || waitpid(child, &status, 0) != child)
                        status = -1;
        }
        h.stop = true;
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "child %d of 200: status %#x (%s, exit %d: the getter that failed)", i,
                      status, WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited",
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        /* The parent's connection goes on. */
        ck_assert_int_eq(nb_conn_helper_pid(h.c), pid);
        ping_sync_ok(h.c);
        nb_close(h.c);
}
END_TEST

/* The parent closes while a child of fork() still holds its copy of the
 * socket (it has not exec'd or exited yet): the spawned helper saw no EOF,
 * and nb_close() waited for it until the child went. */
START_TEST(test_parent_close_while_a_child_holds_the_connection_does_not_wait_for_it)
{
        int p[2], status;
        uint64_t t0;
        pid_t pid, child;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        pid = nb_conn_helper_pid(c);
        ck_assert_int_eq(pipe(p), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                /* Holds the inherited fds until the parent says, at most 10 s. */
                struct pollfd pf = {.fd = p[0], .events = POLLIN};
                close(p[1]);
                poll(&pf, 1, 10000);
                _exit(0);
        }
        close(p[0]);
        t0 = tu_now_us();
        nb_close(c);
        ck_assert_uint_lt(tu_now_us() - t0, 3000 * 1000);
        ck_assert(process_gone(pid));
        close(p[1]);
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* ---- nb_close() from a callback ---- */

struct close_test {
        struct seen s[3];
        nb_batch *batch;
        struct seen extra; /* what a submit after the close would call back */
        int in_flight_calls_at_first_close;
        int closes;
        int submits[3]; /* nb_submit_async() after nb_close(), per callback */
        int dispatches[3]; /* a nested nb_conn_dispatch() after it */
};

struct close_req {
        struct close_test *t;
        int i;
};

/* As code that frees its objects from callbacks does: every callback
 * closes the connection, then still calls on it. */
static void close_from_callback(nb_conn *c, uint64_t id, int status, nb_results *res, void *opaque)
{
        struct close_req *q = opaque;
        struct close_test *t = q->t;

        record(c, id, status, res, &t->s[q->i]);
        nb_close(c);
        if (t->closes++ == 0)
                t->in_flight_calls_at_first_close = t->s[2].calls;
        t->submits[q->i] = nb_submit_async(c, t->batch, 1000, record, &t->extra, NULL);
        t->dispatches[q->i] = nb_conn_dispatch(c);
}

/* Two replies handed to callbacks by one dispatch, and the first callback
 * closes the connection: nb_close() freed it under the dispatch, which
 * went on with the next callback (a double free, a use after free). Now
 * the close is finished by that dispatch once its callbacks have run: the
 * second one gets its results, the request still in flight -ECANCELED
 * after them, a second nb_close() is a no-op, submits after the close are
 * refused, and the helper is gone once nb_conn_dispatch() returns. */
START_TEST(test_close_from_a_callback_is_finished_after_the_dispatchs_callbacks)
{
        struct close_test t = {0};
        struct close_req q[3];
        uint64_t ids[3];
        nb_conn *c;
        pid_t pid;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        pid = nb_conn_helper_pid(c);
        t.batch = ping_batch();
        for (int i = 0; i < 3; i++) {
                nb_batch *b = i < 2 ? ping_batch() : sleep_batch("5");
                q[i] = (struct close_req){.t = &t, .i = i};
                ck_assert_int_eq(nb_submit_async(c, b, -1, close_from_callback, &q[i], &ids[i]), 0);
                nb_batch_free(b);
        }
        /* Pings are answered in order: once this one's reply is read, both
         * async pings' replies were, and wait for their callbacks. */
        ping_sync_ok(c);
        ck_assert_int_eq(nb_conn_dispatch(c), 3);
        for (int i = 0; i < 3; i++) {
                ck_assert_int_eq(t.s[i].calls, 1);
                ck_assert_uint_eq(t.s[i].id, ids[i]);
                ck_assert_int_eq(t.s[i].order, i + 1);
                ck_assert_int_eq(t.submits[i], -ECANCELED);
                ck_assert_int_ge(t.dispatches[i], 0);
        }
        ck_assert_int_eq(t.s[0].status, 0);
        ck_assert_int_eq(t.s[1].status, 0); /* done before the close: its results */
        ck_assert_int_eq(nb_result_status(t.s[1].res, 0), 0);
        ck_assert_int_eq(t.s[2].status, -ECANCELED);
        ck_assert_int_eq(t.in_flight_calls_at_first_close, 0);
        ck_assert_int_eq(t.closes, 3);
        ck_assert_int_eq(t.extra.calls, 0);
        ck_assert(process_gone(pid));
        ck_assert_int_eq(tu_zombies_of(getpid()), 0);
        for (int i = 0; i < 3; i++)
                nb_results_free(t.s[i].res);
        nb_batch_free(t.batch);
}
END_TEST

/* nb_close() from outside, and the callbacks it runs close again and
 * dispatch: the first close finishes, once. */
START_TEST(test_close_whose_callbacks_close_and_dispatch_again)
{
        struct close_test t = {0};
        struct close_req q[3];
        nb_conn *c;
        pid_t pid;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        callbacks_run = 0;
        pid = nb_conn_helper_pid(c);
        t.batch = ping_batch();
        for (int i = 0; i < 3; i++) {
                nb_batch *b = sleep_batch("5");
                q[i] = (struct close_req){.t = &t, .i = i};
                ck_assert_int_eq(nb_submit_async(c, b, -1, close_from_callback, &q[i], NULL), 0);
                nb_batch_free(b);
        }
        nb_close(c);
        for (int i = 0; i < 3; i++) {
                ck_assert_int_eq(t.s[i].calls, 1);
                ck_assert_int_eq(t.s[i].status, -ECANCELED);
                ck_assert_int_eq(t.submits[i], -ECANCELED);
                ck_assert_int_ge(t.dispatches[i], 0);
        }
        ck_assert_int_eq(t.closes, 3);
        ck_assert_int_eq(t.extra.calls, 0);
        ck_assert(process_gone(pid));
        nb_batch_free(t.batch);
}
END_TEST

START_TEST(test_bad_arguments_are_refused_without_a_callback)
{
        nb_batch *b = ping_batch();
        struct seen s = {0};
        nb_results *res = NULL;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        ck_assert_int_eq(nb_submit_async(c, b, -1, NULL, &s, NULL), -EINVAL);
        ck_assert_int_eq(nb_submit_async(NULL, b, -1, record, &s, NULL), -EINVAL);
        ck_assert_int_eq(nb_submit_timeout(c, NULL, 10, &res), -EINVAL);
        ck_assert_int_eq(nb_conn_dispatch(NULL), -EINVAL);
        ck_assert_int_eq(nb_cancel(NULL, 1), -EINVAL);
        ck_assert_int_eq(nb_conn_fd(NULL), -EINVAL);
        loop_for(c, 50);
        ck_assert_int_eq(s.calls, 0);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

Suite *evloop_suite(void)
{
        Suite *s = suite_create("evloop");
        TCase *tc = tcase_create("evloop");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_callback_gets_results_once_and_the_fd_is_quiet_after);
        tcase_add_test(tc, test_fifty_pings_and_batches_in_flight_each_called_back_once);
        tcase_add_test(tc, test_replies_out_of_order_find_their_callbacks);
        tcase_add_test(tc, test_stopped_spawned_helper_times_out_resets_and_is_replaced);
        tcase_add_test(tc, test_sync_timeout_on_stopped_socket_helper_and_recovery_after_sigcont);
        tcase_add_test(tc, test_sync_timeout_then_nb_submit_works_on_a_new_spawned_helper);
        tcase_add_test(tc, test_deadline_met_keeps_the_connection);
        tcase_add_test(tc, test_cancel_before_reply_calls_back_once_and_drops_the_reply);
        tcase_add_test(tc, test_cancel_after_reply_arrived_before_callback);
        tcase_add_test(tc, test_cancel_of_a_reply_read_by_another_caller);
        tcase_add_test(tc, test_fds_of_a_cancelled_request_are_closed);
        tcase_add_test(tc, test_fds_of_a_request_cancelled_after_its_reply_are_closed);
        tcase_add_test(tc, test_large_request_is_sent_by_the_loop_watching_readability_only);
        tcase_add_test(tc, test_callback_that_submits_again_and_waits_does_not_deadlock);
        tcase_add_test(tc, test_sync_callers_beside_the_event_loop);
        tcase_add_test(tc, test_sync_callers_beside_the_event_loop_again_and_again);
        tcase_add_test(tc, test_close_calls_back_what_is_in_flight);
        tcase_add_test(tc, test_bad_arguments_are_refused_without_a_callback);
        tcase_add_loop_test(tc, test_child_of_fork_is_refused_and_its_close_leaves_the_parent_alone,
                            0, 2);
        tcase_add_test(tc,
                       test_parent_close_while_a_child_holds_the_connection_does_not_wait_for_it);
        tcase_add_test(tc,
                       test_child_of_fork_asks_the_getters_while_a_parent_thread_holds_the_lock);
        tcase_add_test(tc, test_close_from_a_callback_is_finished_after_the_dispatchs_callbacks);
        tcase_add_test(tc, test_close_whose_callbacks_close_and_dispatch_again);
        tcase_add_loop_test(tc, test_submit_from_a_thread_with_the_earliest_deadline_wakes_the_loop,
                            0, 2);
        suite_add_tcase(s, tc);
        return s;
}
