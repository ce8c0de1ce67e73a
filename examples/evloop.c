// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbroker-evloop: libnetbroker driven from an event loop, the way a
 * daemon such as libvirtd drives it from its own.
 *
 * The loop below is a small poll() loop with the shape of libvirt's
 * virEventAddHandle()/virEventAddTimeout(): handles (an fd, the events
 * wanted, a callback) and timers (an interval in ms, -1 disabled). The
 * glue to netbroker is three things, as a daemon would write them:
 *
 *   1. one handle on nb_conn_fd(), readable only, for the connection's
 *      whole life (the fd stays the same when the library reconnects);
 *   2. one timer kept at nb_conn_next_timeout() after every dispatch and
 *      every submit, so deadlines fire although nothing is readable;
 *   3. both call nb_conn_dispatch(), which runs the requests' callbacks.
 *
 * It spawns the helper (in a private network namespace when it may make
 * one), puts 50 Pings, a few batches (Stats; Exec of /bin/true; Ping +
 * Stats) and one Ping it cancels in flight at once, each with a 5 s
 * deadline, and runs the loop until every callback has run. It exits 0
 * when each request was answered as expected. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netbroker.h"

/* ---- a tiny event loop in libvirt's style ---- */

#define EV_READABLE 1 /* VIR_EVENT_HANDLE_READABLE */
#define MAX_HANDLES 8
#define MAX_TIMERS 8

typedef void (*ev_handle_cb)(int watch, int fd, int events, void *opaque);
typedef void (*ev_timeout_cb)(int timer, void *opaque);

static struct {
        int fd, events;
        ev_handle_cb cb;
        void *opaque;
} handles[MAX_HANDLES];
static int n_handles;

static struct {
        int interval_ms; /* -1: disabled */
        double due_ms;
        ev_timeout_cb cb;
        void *opaque;
} timers[MAX_TIMERS];
static int n_timers;

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int ev_add_handle(int fd, int events, ev_handle_cb cb, void *opaque)
{
        if (n_handles == MAX_HANDLES)
                return -1;
        handles[n_handles].fd = fd;
        handles[n_handles].events = events;
        handles[n_handles].cb = cb;
        handles[n_handles].opaque = opaque;
        return n_handles++;
}

static int ev_add_timeout(int interval_ms, ev_timeout_cb cb, void *opaque)
{
        if (n_timers == MAX_TIMERS)
                return -1;
        timers[n_timers].cb = cb;
        timers[n_timers].opaque = opaque;
        timers[n_timers].interval_ms = interval_ms;
        timers[n_timers].due_ms = now_ms() + (interval_ms > 0 ? interval_ms : 0);
        return n_timers++;
}

static void ev_update_timeout(int timer, int interval_ms)
{
        timers[timer].interval_ms = interval_ms;
        timers[timer].due_ms = now_ms() + (interval_ms > 0 ? interval_ms : 0);
}

/* One iteration: wait for a handle or the first timer, run what is due. */
static void ev_run_once(void)
{
        struct pollfd p[MAX_HANDLES];
        double first = -1, now;
        int timeout = -1;

        for (int i = 0; i < n_handles; i++)
                p[i] = (struct pollfd){.fd = handles[i].fd,
                                       .events = handles[i].events & EV_READABLE ? POLLIN : 0};
        for (int i = 0; i < n_timers; i++)
                if (timers[i].interval_ms >= 0 && (first < 0 || timers[i].due_ms < first))
                        first = timers[i].due_ms;
        if (first >= 0) {
                double left = first - now_ms();
                timeout = left <= 0 ? 0 : (int)left + 1;
        }
        if (poll(p, (nfds_t)n_handles, timeout) < 0 && errno != EINTR)
                return;
        for (int i = 0; i < n_handles; i++)
                if (p[i].revents)
                        handles[i].cb(i, handles[i].fd, EV_READABLE, handles[i].opaque);
        now = now_ms();
        for (int i = 0; i < n_timers; i++)
                if (timers[i].interval_ms >= 0 && timers[i].due_ms <= now) {
                        timers[i].due_ms = now + timers[i].interval_ms;
                        timers[i].cb(i, timers[i].opaque);
                }
}

/* ---- the netbroker glue: what a daemon writes ---- */

struct nb_glue {
        nb_conn *conn;
        int timer;
};

static void glue_rearm(struct nb_glue *g)
{
        ev_update_timeout(g->timer, nb_conn_next_timeout(g->conn));
}

static void glue_handle(int watch, int fd, int events, void *opaque)
{
        struct nb_glue *g = opaque;

        (void)watch, (void)fd, (void)events;
        nb_conn_dispatch(g->conn);
        glue_rearm(g);
}

static void glue_timeout(int timer, void *opaque)
{
        struct nb_glue *g = opaque;

        (void)timer;
        nb_conn_dispatch(g->conn);
        glue_rearm(g);
}

/* ---- the requests ---- */

#define PINGS 50
#define DEADLINE_MS 5000

struct tally {
        int done, ok, cancelled, failed;
        int expected;
};

struct request {
        const char *what;
        size_t n_ops;
        bool cancel; /* we cancel it: -ECANCELED is the expected outcome */
        struct tally *t;
};

static void on_reply(nb_conn *c, uint64_t id, int status, nb_results *res, void *opaque)
{
        struct request *rq = opaque;

        (void)c;
        rq->t->done++;
        if (rq->cancel && status == -ECANCELED) {
                rq->t->cancelled++;
        } else if (status == 0 && nb_results_count(res) == rq->n_ops &&
                   nb_results_first_error(res) < 0) {
                rq->t->ok++;
        } else {
                rq->t->failed++;
                fprintf(stderr, "evloop: request %llu (%s): %s\n", (unsigned long long)id, rq->what,
                        status < 0 ? strerror(-status) : "an op failed");
        }
        nb_results_free(res);
}

static int submit(struct nb_glue *g, nb_batch *b, struct request *rq, uint64_t *ret_id)
{
        int r = nb_submit_async(g->conn, b, DEADLINE_MS, on_reply, rq, ret_id);

        nb_batch_free(b);
        if (r < 0) {
                fprintf(stderr, "evloop: submit %s: %s (%s)\n", rq->what, strerror(-r),
                        nb_conn_error(g->conn));
                return r;
        }
        rq->t->expected++;
        return 0;
}

static char *write_config(void)
{
        static char path[] = "/tmp/netbroker-evloop-XXXXXX";
        int fd = mkstemp(path);
        FILE *f;

        if (fd < 0)
                return NULL;
        f = fdopen(fd, "w");
        if (!f) {
                close(fd);
                return NULL;
        }
        fputs("# written by netbroker-evloop\nexec_allow = /bin/true\n", f);
        fclose(f);
        return path;
}

int main(void)
{
        static struct request pings[PINGS], batches[3], cancelled;
        struct tally t = {0};
        struct nb_glue g = {0};
        const char *helper = getenv("NETBROKERD");
        nb_spawn_opts opts = {.size = sizeof(nb_spawn_opts)};
        uint64_t cancel_id;
        char *config;
        double t0;
        int r;

        /* Nothing here touches the network; a private namespace keeps it so. */
        if (unshare(CLONE_NEWNET) < 0)
                fprintf(stderr, "evloop: no private network namespace (%s); going on\n",
                        strerror(errno));
        if (!helper && access(NB_BUILD_HELPER, X_OK) == 0)
                helper = NB_BUILD_HELPER;
        config = write_config();
        if (!config) {
                perror("evloop: config");
                return 1;
        }
        opts.config_path = config;
        r = nb_spawn(helper, &opts, &g.conn);
        unlink(config);
        if (r < 0) {
                fprintf(stderr, "evloop: nb_spawn: %s: %s\n", strerror(-r), nb_last_error());
                return 1;
        }

        ev_add_handle(nb_conn_fd(g.conn), EV_READABLE, glue_handle, &g);
        g.timer = ev_add_timeout(-1, glue_timeout, &g);

        t0 = now_ms();
        for (int i = 0; i < PINGS; i++) {
                nb_batch *b = nb_batch_new();
                pings[i] = (struct request){.what = "Ping", .n_ops = 1, .t = &t};
                nb_batch_ping(b);
                if (submit(&g, b, &pings[i], NULL) < 0)
                        return 1;
        }
        {
                const char *argv[] = {"/bin/true", NULL};
                nb_batch *b = nb_batch_new();
                batches[0] = (struct request){.what = "Stats", .n_ops = 1, .t = &t};
                nb_batch_stats(b);
                r = submit(&g, b, &batches[0], NULL);
                b = nb_batch_new();
                batches[1] = (struct request){.what = "Exec /bin/true", .n_ops = 1, .t = &t};
                nb_batch_exec(b, "/bin/true", argv, NULL, NULL, 0, 2000);
                r = r < 0 ? r : submit(&g, b, &batches[1], NULL);
                b = nb_batch_new();
                batches[2] = (struct request){.what = "Ping+Stats", .n_ops = 2, .t = &t};
                nb_batch_ping(b);
                nb_batch_stats(b);
                r = r < 0 ? r : submit(&g, b, &batches[2], NULL);
                b = nb_batch_new();
                cancelled = (struct request){
                        .what = "Ping (cancelled)", .n_ops = 1, .cancel = true, .t = &t};
                nb_batch_ping(b);
                r = r < 0 ? r : submit(&g, b, &cancelled, &cancel_id);
                if (r < 0)
                        return 1;
        }
        /* Changed our mind about the last one: its callback says so. */
        r = nb_cancel(g.conn, cancel_id);
        if (r < 0) {
                fprintf(stderr, "evloop: nb_cancel: %s\n", strerror(-r));
                return 1;
        }
        glue_rearm(&g);
        printf("evloop: %d requests in flight, deadline %d ms each\n", t.expected, DEADLINE_MS);

        while (t.done < t.expected && now_ms() - t0 < 4.0 * DEADLINE_MS)
                ev_run_once();

        printf("evloop: %d answered, %d cancelled, %d failed, %d missing, in %.1f ms\n", t.ok,
               t.cancelled, t.failed, t.expected - t.done, now_ms() - t0);
        nb_close(g.conn);
        return t.ok == t.expected - 1 && t.cancelled == 1 && t.failed == 0 ? 0 : 1;
}
