// SPDX-License-Identifier: LGPL-2.1-or-later
/* Lanes: one thread per capability for the kernel calls that block; see
 * lane.h for the design. Everything a lane shares with the loop (its
 * queue, the completion list) is under the one mutex. */
#include "lane.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct nbd_lane {
        struct nbd_lanes *ls;
        pthread_t thread;
        pthread_cond_t cond;
        struct nbd_lane_work *head, *tail; /* queued (mu) */
        /* The loop's alone: */
        unsigned outstanding; /* submitted, done() not yet run */
        bool finished_some; /* a done() ran in this round of completions */
        void (*idle_fn)(void *data);
        void *idle_data;
        struct nbd_lane *next;
#ifdef NB_TEST_HOOKS
        char *hold; /* $NETBROKERD_TEST_HOLD_<NAME>: see test_hold() */
#endif
};

struct nbd_lanes {
        struct nbd_loop *loop;
        struct nbd_watch watch;
        int efd; /* open only while closures are outstanding (-1) */
        unsigned outstanding; /* the loop's: of all lanes */
        pthread_mutex_t mu;
        bool stopping; /* mu */
        struct nbd_lane_work *done_head, *done_tail; /* mu */
        struct nbd_lane *lanes;
};

static void push(struct nbd_lane_work **head, struct nbd_lane_work **tail, struct nbd_lane_work *w)
{
        w->next = NULL;
        if (*tail)
                (*tail)->next = w;
        else
                *head = w;
        *tail = w;
}

/* Wake the loop. An eventfd write fails only when its counter would
 * overflow, and then the loop has a wake-up pending anyway. */
static void post(struct nbd_lanes *ls)
{
        uint64_t one = 1;
        ssize_t n = write(ls->efd, &one, sizeof(one));

        (void)n;
}

#ifdef NB_TEST_HOOKS
/* Tests only (a build with NB_TEST_HOOKS): while the file named by
 * $NETBROKERD_TEST_HOLD_<NAME> (NAME: the lane's, upper case) exists, the
 * lane does not begin its next closure. A test holds a lane to see, in
 * order and in state, what the loop does meanwhile; never in a timed
 * path of a build without the flag. */
static void hold_while(const char *path);

static void test_hold(const struct nbd_lane *lane)
{
        /* A closure waits: the test learns it from HOLD.held, there while
         * the closure is held. */
        hold_while(lane->hold);
}

/* Wait while path exists; path.held says so meanwhile. */
static void hold_while(const char *path)
{
        char held[4096];

        if (!path || !*path || access(path, F_OK) != 0)
                return;
        snprintf(held, sizeof(held), "%s.held", path);
        close(open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        while (access(path, F_OK) == 0)
                usleep(1000);
        unlink(held);
}

void nbd_test_hold_point(const char *name)
{
        char var[64];

        snprintf(var, sizeof(var), "NETBROKERD_TEST_HOLD_%s", name);
        hold_while(getenv(var));
}

static void test_hold_init(struct nbd_lane *lane, const char *name)
{
        char var[64];
        const char *v;
        size_t n = (size_t)snprintf(var, sizeof(var), "NETBROKERD_TEST_HOLD_%s", name);

        for (size_t i = sizeof("NETBROKERD_TEST_HOLD_") - 1; i < n && i < sizeof(var); i++)
                if (var[i] >= 'a' && var[i] <= 'z')
                        var[i] = (char)(var[i] - 'a' + 'A');
        v = getenv(var);
        lane->hold = v && *v ? strdup(v) : NULL;
}
#else
static void test_hold(const struct nbd_lane *lane)
{
        (void)lane;
}

static void test_hold_init(struct nbd_lane *lane, const char *name)
{
        (void)lane;
        (void)name;
}
#endif

static void *lane_main(void *p)
{
        struct nbd_lane *lane = p;
        struct nbd_lanes *ls = lane->ls;

        pthread_mutex_lock(&ls->mu);
        for (;;) {
                struct nbd_lane_work *w;
                bool skip;

                while (!lane->head && !ls->stopping)
                        pthread_cond_wait(&lane->cond, &ls->mu);
                if (ls->stopping)
                        break; /* nbd_lanes_free() takes what is queued */
                w = lane->head;
                lane->head = w->next;
                if (!lane->head)
                        lane->tail = NULL;
                pthread_mutex_unlock(&ls->mu);
                /* A held closure has not begun: a cancel meanwhile counts,
                 * as it does for one the thread has not taken yet. */
                test_hold(lane);
                pthread_mutex_lock(&ls->mu);
                skip = w->cancelled;
                pthread_mutex_unlock(&ls->mu);
                if (!skip)
                        w->run(w->data);
                pthread_mutex_lock(&ls->mu);
                w->ran = !skip;
                push(&ls->done_head, &ls->done_tail, w);
                post(ls);
        }
        pthread_mutex_unlock(&ls->mu);
        return NULL;
}

static void on_done(struct nbd_watch *watch, uint32_t events);

static void close_efd(struct nbd_lanes *ls)
{
        if (ls->efd < 0)
                return;
        nbd_loop_remove(ls->loop, &ls->watch);
        close(ls->efd);
        ls->efd = -1;
}

/* The eventfd, for the closures about to be outstanding: opened on demand,
 * so that a helper at rest holds the fds it always held. 0 or -errno. */
static int open_efd(struct nbd_lanes *ls)
{
        int r;

        if (ls->efd >= 0)
                return 0;
        ls->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ls->efd < 0)
                return -errno;
        r = nbd_loop_add(ls->loop, &ls->watch, ls->efd, EPOLLIN, on_done, ls);
        if (r < 0) {
                close(ls->efd);
                ls->efd = -1;
        }
        return r;
}

/* On the loop: every closure the lanes finished gets its done(). */
static void on_done(struct nbd_watch *watch, uint32_t events)
{
        struct nbd_lanes *ls = watch->data;
        struct nbd_lane_work *w;
        uint64_t n;

        (void)events;
        if (read(ls->efd, &n, sizeof(n)) < 0)
                n = 0; /* EAGAIN: an earlier read took the count; the list is the truth */
        pthread_mutex_lock(&ls->mu);
        w = ls->done_head;
        ls->done_head = ls->done_tail = NULL;
        pthread_mutex_unlock(&ls->mu);
        while (w) {
                struct nbd_lane_work *next = w->next;
                struct nbd_lane *lane = w->lane;
                bool not_run = !w->ran;

                lane->outstanding--;
                ls->outstanding--;
                lane->finished_some = true;
                w->done(w->data, not_run); /* may free w, may submit again */
                w = next;
        }
        /* Every closure given is done, and posted: no lane writes to the
         * eventfd before the next submit, which opens it again. */
        if (ls->outstanding == 0)
                close_efd(ls);
        for (struct nbd_lane *lane = ls->lanes; lane; lane = lane->next) {
                bool idle = lane->finished_some && lane->outstanding == 0;

                lane->finished_some = false;
                if (idle && lane->idle_fn)
                        lane->idle_fn(lane->idle_data);
        }
}

int nbd_lanes_new(struct nbd_loop *loop, struct nbd_lanes **ret)
{
        struct nbd_lanes *ls = calloc(1, sizeof(*ls));

        if (!ls)
                return -ENOMEM;
        ls->loop = loop;
        ls->watch.fd = -1;
        ls->efd = -1;
        pthread_mutex_init(&ls->mu, NULL);
        *ret = ls;
        return 0;
}

int nbd_lane_new(struct nbd_lanes *ls, const char *name, struct nbd_lane **ret)
{
        struct nbd_lane *lane = calloc(1, sizeof(*lane));
        sigset_t all, old;
        char tname[16];
        int r;

        if (!lane)
                return -ENOMEM;
        lane->ls = ls;
        test_hold_init(lane, name);
        pthread_cond_init(&lane->cond, NULL);
        /* The thread starts with every signal blocked: SIGTERM is the
         * loop's, through its signalfd. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&lane->thread, NULL, lane_main, lane);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                pthread_cond_destroy(&lane->cond);
#ifdef NB_TEST_HOOKS
                free(lane->hold);
#endif
                free(lane);
                return r;
        }
        snprintf(tname, sizeof(tname), "nbd-%s", name);
        pthread_setname_np(lane->thread, tname);
        lane->next = ls->lanes;
        ls->lanes = lane;
        *ret = lane;
        return 0;
}

int nbd_lane_submit(struct nbd_lane *lane, struct nbd_lane_work *w)
{
        struct nbd_lanes *ls = lane->ls;
        int r = open_efd(ls);

        if (r < 0)
                return r;
        w->cancelled = false;
        w->ran = false;
        w->lane = lane;
        lane->outstanding++;
        ls->outstanding++;
        pthread_mutex_lock(&ls->mu);
        push(&lane->head, &lane->tail, w);
        pthread_cond_signal(&lane->cond);
        pthread_mutex_unlock(&ls->mu);
        return 0;
}

void nbd_lane_cancel(struct nbd_lane *lane, struct nbd_lane_work *w)
{
        pthread_mutex_lock(&lane->ls->mu);
        w->cancelled = true;
        pthread_mutex_unlock(&lane->ls->mu);
}

bool nbd_lane_busy(const struct nbd_lane *lane)
{
        return lane && lane->outstanding > 0;
}

void nbd_lane_on_idle(struct nbd_lane *lane, void (*fn)(void *data), void *data)
{
        lane->idle_fn = fn;
        lane->idle_data = data;
}

void nbd_lanes_free(struct nbd_lanes *ls)
{
        struct nbd_lane_work *left = NULL, *left_tail = NULL;

        if (!ls)
                return;
        pthread_mutex_lock(&ls->mu);
        ls->stopping = true;
        for (struct nbd_lane *lane = ls->lanes; lane; lane = lane->next)
                pthread_cond_signal(&lane->cond);
        pthread_mutex_unlock(&ls->mu);
        for (struct nbd_lane *lane = ls->lanes; lane; lane = lane->next)
                pthread_join(lane->thread, NULL);
        /* The threads are gone: no lock needed. Finished ones first. */
        left = ls->done_head;
        left_tail = ls->done_tail;
        for (struct nbd_lane *lane = ls->lanes; lane; lane = lane->next)
                for (struct nbd_lane_work *w = lane->head, *next; w; w = next) {
                        next = w->next;
                        w->cancelled = true;
                        push(&left, &left_tail, w);
                }
        while (left) {
                struct nbd_lane_work *next = left->next;
                left->done(left->data, !left->ran);
                left = next;
        }
        while (ls->lanes) {
                struct nbd_lane *lane = ls->lanes;
                ls->lanes = lane->next;
                pthread_cond_destroy(&lane->cond);
#ifdef NB_TEST_HOOKS
                free(lane->hold);
#endif
                free(lane);
        }
        close_efd(ls);
        pthread_mutex_destroy(&ls->mu);
        free(ls);
}
