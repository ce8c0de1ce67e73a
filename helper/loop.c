// SPDX-License-Identifier: LGPL-2.1-or-later
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

struct deferred {
        void (*fn)(void *); /* NULL: a free reserve slot */
        void *p;
        struct deferred *next;
        bool reserve;
};

/* Deferred frees that found no memory take one of these: freeing at once
 * instead would free objects under callers that still use them (a
 * connection's job, the connection itself). Refilled every iteration. */
#define DEFER_RESERVE 64

struct nbd_loop {
        int epfd;
        struct nbd_timer *timers;
        struct deferred *deferred;
        struct deferred reserve[DEFER_RESERVE];
};

uint64_t nbd_now_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t nbd_now_ms(void)
{
        return nbd_now_us() / 1000u;
}

int nbd_loop_new(struct nbd_loop **ret)
{
        struct nbd_loop *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0) {
                int r = -errno;
                free(l);
                return r;
        }
        *ret = l;
        return 0;
}

static void run_deferred(struct nbd_loop *l)
{
        while (l->deferred) {
                struct deferred *d = l->deferred;
                l->deferred = d->next;
                d->fn(d->p);
                if (d->reserve)
                        d->fn = NULL;
                else
                        free(d);
        }
}

void nbd_loop_run_deferred(struct nbd_loop *l)
{
        run_deferred(l);
}

void nbd_loop_free(struct nbd_loop *l)
{
        if (!l)
                return;
        run_deferred(l);
        close(l->epfd);
        free(l);
}

int nbd_loop_add(struct nbd_loop *l, struct nbd_watch *w, int fd, uint32_t events, nbd_watch_fn fn,
                 void *data)
{
        struct epoll_event ev = {.events = events, .data.ptr = w};

        w->fd = fd;
        w->fn = fn;
        w->data = data;
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                w->fd = -1;
                return -errno;
        }
        return 0;
}

int nbd_loop_modify(struct nbd_loop *l, struct nbd_watch *w, uint32_t events)
{
        struct epoll_event ev = {.events = events, .data.ptr = w};

        return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

void nbd_loop_remove(struct nbd_loop *l, struct nbd_watch *w)
{
        if (w->fd < 0)
                return;
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
        w->fd = -1;
}

void nbd_timer_cancel(struct nbd_loop *l, struct nbd_timer *t)
{
        for (struct nbd_timer **p = &l->timers; *p; p = &(*p)->next)
                if (*p == t) {
                        *p = t->next;
                        break;
                }
        t->deadline_ms = 0;
        t->next = NULL;
}

void nbd_timer_arm(struct nbd_loop *l, struct nbd_timer *t, uint64_t ms, nbd_timer_fn fn,
                   void *data)
{
        nbd_timer_cancel(l, t);
        t->deadline_ms = nbd_now_ms() + ms;
        t->fn = fn;
        t->data = data;
        t->next = l->timers;
        l->timers = t;
}

int nbd_loop_defer_free(struct nbd_loop *l, void (*fn)(void *), void *p)
{
        struct deferred *d = malloc(sizeof(*d));

        if (d)
                d->reserve = false;
        for (size_t i = 0; !d && i < DEFER_RESERVE; i++)
                if (!l->reserve[i].fn) {
                        d = &l->reserve[i];
                        d->reserve = true;
                }
        if (!d) {
                /* Out of memory and of reserve slots (64 frees in one
                 * iteration): freeing now is unsafe if p is still in use;
                 * leaking would be worse for a long-running helper. */
                fn(p);
                return -ENOMEM;
        }
        d->fn = fn;
        d->p = p;
        d->next = l->deferred;
        l->deferred = d;
        return 0;
}

static int next_timeout(struct nbd_loop *l)
{
        uint64_t now = nbd_now_ms(), first = UINT64_MAX;

        for (struct nbd_timer *t = l->timers; t; t = t->next)
                if (t->deadline_ms < first)
                        first = t->deadline_ms;
        if (first == UINT64_MAX)
                return -1;
        return first <= now ? 0 : (int)(first - now > 60000 ? 60000 : first - now);
}

static void run_timers(struct nbd_loop *l)
{
        uint64_t now = nbd_now_ms();
        bool again = true;

        /* A timer callback may arm or cancel others: restart the scan after each. */
        while (again) {
                again = false;
                for (struct nbd_timer *t = l->timers; t; t = t->next) {
                        if (t->deadline_ms > now)
                                continue;
                        nbd_timer_cancel(l, t);
                        t->fn(t->data);
                        again = true;
                        break;
                }
        }
}

int nbd_loop_iterate(struct nbd_loop *l)
{
        struct epoll_event evs[32];
        int n = epoll_wait(l->epfd, evs, 32, next_timeout(l));

        if (n < 0 && errno != EINTR)
                return -errno;
        for (int i = 0; i < n; i++) {
                struct nbd_watch *w = evs[i].data.ptr;
                if (w->fd >= 0)
                        w->fn(w, evs[i].events);
        }
        run_timers(l);
        run_deferred(l);
        return 0;
}
