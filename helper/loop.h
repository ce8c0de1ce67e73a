// SPDX-License-Identifier: LGPL-2.1-or-later
/* The event loop: epoll for fds, a short list of deadlines for timers, and
 * deferred frees so an object closed while handling one event is never
 * touched by a later event of the same epoll batch. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct nbd_loop;
struct nbd_watch;

typedef void (*nbd_watch_fn)(struct nbd_watch *w, uint32_t events);
typedef void (*nbd_timer_fn)(void *data);

struct nbd_watch {
        int fd; /* -1 once removed */
        nbd_watch_fn fn;
        void *data;
};

struct nbd_timer {
        uint64_t deadline_ms; /* 0: not armed */
        nbd_timer_fn fn;
        void *data;
        struct nbd_timer *next;
};

int nbd_loop_new(struct nbd_loop **ret);
void nbd_loop_free(struct nbd_loop *l);

/* Watch fd for events (EPOLLIN, EPOLLOUT...). Returns 0 or -errno. */
int nbd_loop_add(struct nbd_loop *l, struct nbd_watch *w, int fd, uint32_t events, nbd_watch_fn fn,
                 void *data);
int nbd_loop_modify(struct nbd_loop *l, struct nbd_watch *w, uint32_t events);
/* Stop watching (does not close the fd). Safe on a removed watch. */
void nbd_loop_remove(struct nbd_loop *l, struct nbd_watch *w);

/* Arm (or re-arm) a timer `ms` from now; cancel disarms it. */
void nbd_timer_arm(struct nbd_loop *l, struct nbd_timer *t, uint64_t ms, nbd_timer_fn fn,
                   void *data);
void nbd_timer_cancel(struct nbd_loop *l, struct nbd_timer *t);

/* Call fn(p) after the current batch of events has been handled. */
int nbd_loop_defer_free(struct nbd_loop *l, void (*fn)(void *), void *p);
/* Run the deferred frees now (at shutdown, before what they use goes). */
void nbd_loop_run_deferred(struct nbd_loop *l);

/* Wait for and handle one batch of events and due timers. */
int nbd_loop_iterate(struct nbd_loop *l);

uint64_t nbd_now_ms(void);
uint64_t nbd_now_us(void);
