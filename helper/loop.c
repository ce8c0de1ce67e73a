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

struct nb_loop {
        int epfd;
        struct nb_timer *timers;
        struct deferred *deferred;
        struct deferred reserve[DEFER_RESERVE];
};

uint64_t nb_now_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t nb_now_ms(void)
{
        return nb_now_us() / 1000u;
}

int nb_loop_new(struct nb_loop **ret)
{
        struct nb_loop *l = calloc(1, sizeof(*l));

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

static void run_deferred(struct nb_loop *l)
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

void nb_loop_free(struct nb_loop *l)
{
        if (!l)
                return;
        run_deferred(l);
        close(l->epfd);
        free(l);
}

int nb_loop_add(struct nb_loop *l, struct nb_watch *w, int fd, uint32_t events, nb_watch_fn fn,
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

int nb_loop_modify(struct nb_loop *l, struct nb_watch *w, uint32_t events)
{
        struct epoll_event ev = {.events = events, .data.ptr = w};

        return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

void nb_loop_remove(struct nb_loop *l, struct nb_watch *w)
{
        if (w->fd < 0)
                return;
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
        w->fd = -1;
}

void nb_timer_cancel(struct nb_loop *l, struct nb_timer *t)
{
        for (struct nb_timer **p = &l->timers; *p; p = &(*p)->next)
                if (*p == t) {
                        *p = t->next;
                        break;
                }
        t->deadline_ms = 0;
        t->next = NULL;
}

void nb_timer_arm(struct nb_loop *l, struct nb_timer *t, uint64_t ms, nb_timer_fn fn, void *data)
{
        nb_timer_cancel(l, t);
        t->deadline_ms = nb_now_ms() + ms;
        t->fn = fn;
        t->data = data;
        t->next = l->timers;
        l->timers = t;
}

int nb_loop_defer_free(struct nb_loop *l, void (*fn)(void *), void *p)
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

static int next_timeout(struct nb_loop *l)
{
        uint64_t now = nb_now_ms(), first = UINT64_MAX;

        for (struct nb_timer *t = l->timers; t; t = t->next)
                if (t->deadline_ms < first)
                        first = t->deadline_ms;
        if (first == UINT64_MAX)
                return -1;
        return first <= now ? 0 : (int)(first - now > 60000 ? 60000 : first - now);
}

static void run_timers(struct nb_loop *l)
{
        uint64_t now = nb_now_ms();
        bool again = true;

        /* A timer callback may arm or cancel others: restart the scan after each. */
        while (again) {
                again = false;
                for (struct nb_timer *t = l->timers; t; t = t->next) {
                        if (t->deadline_ms > now)
                                continue;
                        nb_timer_cancel(l, t);
                        t->fn(t->data);
                        again = true;
                        break;
                }
        }
}

int nb_loop_iterate(struct nb_loop *l)
{
        struct epoll_event evs[32];
        int n = epoll_wait(l->epfd, evs, 32, next_timeout(l));

        if (n < 0 && errno != EINTR)
                return -errno;
        for (int i = 0; i < n; i++) {
                struct nb_watch *w = evs[i].data.ptr;
                if (w->fd >= 0)
                        w->fn(w, evs[i].events);
        }
        run_timers(l);
        run_deferred(l);
        return 0;
}
