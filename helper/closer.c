// SPDX-License-Identifier: LGPL-2.1-or-later
/* The closer thread: see closer.h for why. */
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

struct closer_item {
        int fd;
        uid_t uid;
};

struct closer_uid {
        uid_t uid;
        unsigned n;
};

struct nbd_closer {
        struct nbd_loop *loop;
        void (*on_closed)(void *data);
        void *data;
        /* The thread's "closed some" to the loop: open only while
         * descriptors are given and not closed, as the lanes' (lane.c), so
         * a helper at rest holds the fds it always held. */
        int efd;
        struct nbd_watch w;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        pthread_t thread;
        bool started, stop, busy;
        /* A ring of what waits, and per uid what waits or is being closed:
         * both have room for as many descriptors as the process may hold. */
        struct closer_item *q;
        unsigned cap, head, n;
        struct closer_uid *uids;
        unsigned n_uids;
};

/* A closer whose thread was stuck in a close at exit: kept reachable. */
static struct nbd_closer *closer_left;

static struct closer_uid *uid_slot(struct nbd_closer *c, uid_t uid)
{
        for (unsigned i = 0; i < c->n_uids; i++)
                if (c->uids[i].uid == uid)
                        return &c->uids[i];
        return NULL;
}

static void *closer_main(void *arg)
{
        struct nbd_closer *c = arg;
        uint64_t one = 1;

        pthread_mutex_lock(&c->mu);
        for (;;) {
                while (!c->stop && !c->n)
                        pthread_cond_wait(&c->cv, &c->mu);
                if (c->stop)
                        break;
                struct closer_item it = c->q[c->head];
                c->head = (c->head + 1) % c->cap;
                c->n--;
                c->busy = true;
                pthread_mutex_unlock(&c->mu);
                /* The one call that may wait as long as a client likes. */
                close(it.fd);
                pthread_mutex_lock(&c->mu);
                c->busy = false;
                struct closer_uid *u = uid_slot(c, it.uid);
                if (u && !--u->n)
                        *u = c->uids[--c->n_uids];
                if (c->efd >= 0 && write(c->efd, &one, sizeof(one)) < 0) {
                        /* The counter cannot overflow in practice; the
                         * loop reads it at its next wakeup anyway. */
                }
        }
        pthread_mutex_unlock(&c->mu);
        return NULL;
}

static void on_efd(struct nbd_watch *w, uint32_t events)
{
        struct nbd_closer *c = w->data;
        bool idle;
        uint64_t v;

        (void)events;
        if (read(c->efd, &v, sizeof(v)) != sizeof(v))
                return;
        /* All closed, and the thread writes no more until the next give
         * (which opens it again, under the same lock). */
        pthread_mutex_lock(&c->mu);
        idle = !c->n && !c->busy;
        if (idle) {
                nbd_loop_remove(c->loop, &c->w);
                close(c->efd);
                c->efd = -1;
        }
        pthread_mutex_unlock(&c->mu);
        if (c->on_closed)
                c->on_closed(c->data);
}

/* Called locked, on the loop. */
static void open_efd(struct nbd_closer *c)
{
        if (c->efd >= 0)
                return;
        c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->efd < 0) {
                nbd_warn("closer: no eventfd (%s): what waits for it is resumed later",
                         strerror(errno));
                return;
        }
        if (nbd_loop_add(c->loop, &c->w, c->efd, EPOLLIN, on_efd, c) < 0) {
                close(c->efd);
                c->efd = -1;
        }
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
        c->q = calloc(c->cap, sizeof(*c->q));
        c->uids = calloc(c->cap, sizeof(*c->uids));
        if (!c->q || !c->uids)
                goto fail;
        pthread_mutex_init(&c->mu, NULL);
        pthread_cond_init(&c->cv, NULL);
        *ret = c;
        return 0;
fail:
        free(c->q);
        free(c->uids);
        free(c);
        return -ENOMEM;
}

/* Started at the first descriptor given: most helpers never need it, and
 * then it runs after the privilege drop, like the lanes. Called locked. */
static void closer_start(struct nbd_closer *c)
{
        sigset_t all, old;
        int r;

        if (c->started)
                return;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = pthread_create(&c->thread, NULL, closer_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r) {
                /* What was given waits in the queue, counted, for the
                 * next try: never a close on the loop. */
                nbd_warn("closer: cannot start its thread: %s", strerror(r));
                return;
        }
        c->started = true;
}

void nbd_closer_give(struct nbd_closer *c, uid_t uid, int fd)
{
        struct closer_uid *u;

        pthread_mutex_lock(&c->mu);
        if (c->n == c->cap) {
                /* More than the process may hold: cannot happen while
                 * capacity is fd_limit. Better a slow loop than a leak. */
                pthread_mutex_unlock(&c->mu);
                nbd_warn("closer: queue full (%u); closing fd %d on the loop", c->cap, fd);
                close(fd);
                return;
        }
        c->q[(c->head + c->n) % c->cap] = (struct closer_item){.fd = fd, .uid = uid};
        c->n++;
        u = uid_slot(c, uid);
        if (!u) {
                u = &c->uids[c->n_uids++];
                *u = (struct closer_uid){.uid = uid};
        }
        u->n++;
        open_efd(c);
        closer_start(c);
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
}

unsigned nbd_closer_pending(struct nbd_closer *c, uid_t uid)
{
        unsigned n;

        pthread_mutex_lock(&c->mu);
        struct closer_uid *u = uid_slot(c, uid);
        n = u ? u->n : 0;
        pthread_mutex_unlock(&c->mu);
        return n;
}

unsigned nbd_closer_pending_all(struct nbd_closer *c)
{
        unsigned n = 0;

        pthread_mutex_lock(&c->mu);
        for (unsigned i = 0; i < c->n_uids; i++)
                n += c->uids[i].n;
        pthread_mutex_unlock(&c->mu);
        return n;
}

void nbd_closer_free(struct nbd_closer *c)
{
        bool busy;

        if (!c)
                return;
        pthread_mutex_lock(&c->mu);
        if (c->efd >= 0) {
                nbd_loop_remove(c->loop, &c->w);
                close(c->efd);
                c->efd = -1;
        }
        c->stop = true;
        busy = c->busy;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        if (c->started && busy) {
                /* Its close returns when the client lets it: the thread
                 * then sees stop and ends. Its queue stays with it. */
                pthread_detach(c->thread);
                closer_left = c;
                return;
        }
        if (c->started)
                pthread_join(c->thread, NULL);
        /* What still waits is not closed here (each could wait): the
         * process is ending. */
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c->q);
        free(c->uids);
        free(c);
}
