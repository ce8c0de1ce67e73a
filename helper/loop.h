/* The event loop: epoll for fds, a short list of deadlines for timers, and
 * deferred frees so an object closed while handling one event is never
 * touched by a later event of the same epoll batch. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct nb_loop;
struct nb_watch;

typedef void (*nb_watch_fn)(struct nb_watch *w, uint32_t events);
typedef void (*nb_timer_fn)(void *data);

struct nb_watch {
        int fd; /* -1 once removed */
        nb_watch_fn fn;
        void *data;
};

struct nb_timer {
        uint64_t deadline_ms; /* 0: not armed */
        nb_timer_fn fn;
        void *data;
        struct nb_timer *next;
};

int nb_loop_new(struct nb_loop **ret);
void nb_loop_free(struct nb_loop *l);

/* Watch fd for events (EPOLLIN, EPOLLOUT...). Returns 0 or -errno. */
int nb_loop_add(struct nb_loop *l, struct nb_watch *w, int fd, uint32_t events, nb_watch_fn fn,
                void *data);
int nb_loop_modify(struct nb_loop *l, struct nb_watch *w, uint32_t events);
/* Stop watching (does not close the fd). Safe on a removed watch. */
void nb_loop_remove(struct nb_loop *l, struct nb_watch *w);

/* Arm (or re-arm) a timer `ms` from now; cancel disarms it. */
void nb_timer_arm(struct nb_loop *l, struct nb_timer *t, uint64_t ms, nb_timer_fn fn, void *data);
void nb_timer_cancel(struct nb_loop *l, struct nb_timer *t);

/* Call fn(p) after the current batch of events has been handled. */
int nb_loop_defer_free(struct nb_loop *l, void (*fn)(void *), void *p);

/* Wait for and handle one batch of events and due timers. */
int nb_loop_iterate(struct nb_loop *l);

uint64_t nb_now_ms(void);
uint64_t nb_now_us(void);
