// SPDX-License-Identifier: LGPL-2.1-or-later
/* The closer threads, one per uid with descriptors waiting: see closer.h
 * for why. */
#include "closer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

NBD_LOG_CATEGORY(closer);

/* Without an eventfd (the fd limit reached), the loop looks again. */
#define CLOSER_RETRY_MS 100

/* One uid's queue and its thread. A slot is in use while it has
 * descriptors waiting or a thread; a thread that ended is joined when its
 * slot gets the next one (or at free). */
struct closer_uid {
        struct nbd_closer *c;
        bool used;
        uid_t uid;
        int *q; /* a ring of cap fds */
        unsigned head, n; /* waiting */
        bool busy; /* its thread is in a close */
        bool running; /* its thread has not ended */
        bool joinable; /* tid is a thread not joined yet */
        pthread_t tid;
};

struct nbd_closer {
        struct nbd_loop *loop;
        void (*on_closed)(void *data);
        void *data;
        /* The threads' "closed some" to the loop: open only while
         * descriptors are given and not closed, as the lanes' (lane.c), so
         * a helper at rest holds the fds it always held. */
        int efd;
        struct nbd_watch w;
        struct nbd_timer retry;
        pthread_mutex_t mu;
        bool stop;
        unsigned cap;
        /* cap slots: as many uids as the process may hold descriptors. */
        struct closer_uid *uids;
        int *rings;
        unsigned pending; /* waiting and being closed, every uid */
};

/* A closer whose thread was stuck in a close at exit: kept reachable. */
static struct nbd_closer *closer_left;

static struct closer_uid *uid_slot(struct nbd_closer *c, uid_t uid)
{
        for (unsigned i = 0; i < c->cap; i++)
                if (c->uids[i].used && c->uids[i].uid == uid)
                        return &c->uids[i];
        return NULL;
}

static void *closer_main(void *arg)
{
        struct closer_uid *u = arg;
        struct nbd_closer *c = u->c;
        uint64_t one = 1;

        pthread_mutex_lock(&c->mu);
        while (!c->stop && u->n) {
                int fd = u->q[u->head];
                u->head = (u->head + 1) % c->cap;
                u->n--;
                u->busy = true;
                pthread_mutex_unlock(&c->mu);
                /* The one call that may wait as long as a client likes. */
                close(fd);
                pthread_mutex_lock(&c->mu);
                u->busy = false;
                c->pending--;
                if (c->efd >= 0 && write(c->efd, &one, sizeof(one)) < 0) {
                        /* The counter cannot overflow in practice; the
                         * loop reads it at its next wakeup anyway. */
                }
        }
        u->running = false;
        if (!u->n)
                u->used = false;
        /* Nothing of c is touched after this unlock: free() joins. */
        pthread_mutex_unlock(&c->mu);
        return NULL;
}

/* Called locked, on the loop: the thread of u's last run ended (its slot
 * is free or taken again), so joining it waits for nothing. */
static void join_ended(struct closer_uid *u)
{
        if (u->joinable && !u->running) {
                pthread_join(u->tid, NULL);
                u->joinable = false;
        }
}

/* Called locked, on the loop. Started after the privilege drop, like the
 * lanes (the first descriptor comes from a client); every signal blocked. */
static void start_thread(struct nbd_closer *c, struct closer_uid *u)
{
        sigset_t all, old;
        int r;

        if (u->running)
                return;
        join_ended(u);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        /* The default stack: the helper's static TLS (the firewall's dump
         * buffers) lives in it, so a small one is refused (EINVAL); only
         * what a close touches of it is ever resident. */
        r = pthread_create(&u->tid, NULL, closer_main, u);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r) {
                /* What was given waits in the queue, counted, for the
                 * retry: never a close on the loop. */
                nbd_warn("closer: cannot start a thread for uid %u: %s", (unsigned)u->uid,
                         strerror(r));
                return;
        }
        u->running = true;
        u->joinable = true;
}

static void on_retry(void *data);
static void on_efd(struct nbd_watch *w, uint32_t events);

/* Called locked, on the loop. */
static void open_efd(struct nbd_closer *c)
{
        if (c->efd >= 0)
                return;
        c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->efd >= 0 && nbd_loop_add(c->loop, &c->w, c->efd, EPOLLIN, on_efd, c) < 0) {
                close(c->efd);
                c->efd = -1;
        }
        if (c->efd < 0 && !c->retry.deadline_ms)
                nbd_timer_arm(c->loop, &c->retry, CLOSER_RETRY_MS, on_retry, c);
}

/* Called locked: every uid with descriptors waiting and no thread (its
 * start failed) gets one now; whether one is still without. */
static bool start_waiting(struct nbd_closer *c)
{
        bool without = false;

        for (unsigned i = 0; i < c->cap; i++)
                if (c->uids[i].used && c->uids[i].n && !c->uids[i].running) {
                        start_thread(c, &c->uids[i]);
                        without |= !c->uids[i].running;
                }
        return without;
}

/* No eventfd could be opened (the fd limit), or a thread could not start:
 * the loop looks again, and tells the server what was closed meanwhile. */
static void on_retry(void *data)
{
        struct nbd_closer *c = data;

        pthread_mutex_lock(&c->mu);
        if (c->pending)
                open_efd(c); /* arms the retry again if it cannot */
        if (start_waiting(c) && !c->retry.deadline_ms)
                nbd_timer_arm(c->loop, &c->retry, CLOSER_RETRY_MS, on_retry, c);
        pthread_mutex_unlock(&c->mu);
        if (c->on_closed)
                c->on_closed(c->data);
}

static void on_efd(struct nbd_watch *w, uint32_t events)
{
        struct nbd_closer *c = w->data;
        uint64_t v;

        (void)events;
        if (read(c->efd, &v, sizeof(v)) != sizeof(v))
                return;
        /* All closed, and the threads write no more until the next give
         * (which opens it again, under the same lock). */
        pthread_mutex_lock(&c->mu);
        if (!c->pending) {
                nbd_loop_remove(c->loop, &c->w);
                close(c->efd);
                c->efd = -1;
        }
        pthread_mutex_unlock(&c->mu);
        if (c->on_closed)
                c->on_closed(c->data);
}

int nbd_closer_new(struct nbd_loop *loop, unsigned capacity, void (*on_closed)(void *data),
                   void *data, struct nbd_closer **ret)
{
        struct nbd_closer *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->loop = loop;
        c->on_closed = on_closed;
        c->data = data;
        c->cap = capacity ? capacity : 1;
        c->efd = -1;
        c->uids = calloc(c->cap, sizeof(*c->uids));
        c->rings = calloc((size_t)c->cap * c->cap, sizeof(*c->rings));
        if (!c->uids || !c->rings) {
                free(c->uids);
                free(c->rings);
                free(c);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < c->cap; i++) {
                c->uids[i].c = c;
                c->uids[i].q = c->rings + (size_t)i * c->cap;
        }
        pthread_mutex_init(&c->mu, NULL);
        *ret = c;
        return 0;
}

void nbd_closer_give(struct nbd_closer *c, uid_t uid, int fd)
{
        struct closer_uid *u;

        pthread_mutex_lock(&c->mu);
        u = uid_slot(c, uid);
        for (unsigned i = 0; !u && i < c->cap; i++)
                if (!c->uids[i].used) {
                        u = &c->uids[i];
                        join_ended(u);
                        u->used = true;
                        u->uid = uid;
                        u->head = u->n = 0;
                }
        if (!u || c->pending == c->cap) {
                /* More than the process may hold: cannot happen while
                 * capacity is fd_limit. Better a slow loop than a leak. */
                pthread_mutex_unlock(&c->mu);
                nbd_warn("closer: full (%u); closing fd %d on the loop", c->cap, fd);
                close(fd);
                return;
        }
        u->q[(u->head + u->n) % c->cap] = fd;
        u->n++;
        c->pending++;
        open_efd(c);
        start_thread(c, u);
        if (!u->running && !c->retry.deadline_ms)
                nbd_timer_arm(c->loop, &c->retry, CLOSER_RETRY_MS, on_retry, c);
        pthread_mutex_unlock(&c->mu);
}

unsigned nbd_closer_pending(struct nbd_closer *c, uid_t uid)
{
        unsigned n;

        pthread_mutex_lock(&c->mu);
        struct closer_uid *u = uid_slot(c, uid);
        n = u ? u->n + u->busy : 0;
        pthread_mutex_unlock(&c->mu);
        return n;
}

unsigned nbd_closer_pending_all(struct nbd_closer *c)
{
        unsigned n;

        pthread_mutex_lock(&c->mu);
        n = c->pending;
        pthread_mutex_unlock(&c->mu);
        return n;
}

void nbd_closer_free(struct nbd_closer *c)
{
        bool stuck = false;

        if (!c)
                return;
        pthread_mutex_lock(&c->mu);
        if (c->efd >= 0) {
                nbd_loop_remove(c->loop, &c->w);
                close(c->efd);
                c->efd = -1;
        }
        nbd_timer_cancel(c->loop, &c->retry);
        c->stop = true;
        for (unsigned i = 0; i < c->cap; i++)
                stuck |= c->uids[i].running && c->uids[i].busy;
        pthread_mutex_unlock(&c->mu);
        if (stuck) {
                /* A close returns when its client lets it: its thread then
                 * sees stop and ends. The closer stays with them; what
                 * still waits is not closed here (each could wait): the
                 * process is ending. */
                for (unsigned i = 0; i < c->cap; i++)
                        if (c->uids[i].joinable)
                                pthread_detach(c->uids[i].tid);
                closer_left = c;
                return;
        }
        /* The threads not in a close see stop at once and end. */
        for (unsigned i = 0; i < c->cap; i++)
                if (c->uids[i].joinable)
                        pthread_join(c->uids[i].tid, NULL);
        pthread_mutex_destroy(&c->mu);
        free(c->uids);
        free(c->rings);
        free(c);
}
