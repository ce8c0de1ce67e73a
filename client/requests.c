// SPDX-License-Identifier: LGPL-2.1-or-later
/* Requests on a connection: waited for (nb_submit, nb_submit_timeout) or
 * called back from the caller's event loop (nb_submit_async,
 * nb_conn_dispatch), with deadlines and cancel.
 *
 * There is no library thread. A broken connection fails every request in
 * flight at once; the next submit builds a new connection (a new
 * generation, client.c). A request past its deadline breaks the
 * connection too: the helper is taken as stuck. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"

/* ---- requests: the one engine under the synchronous and the callback API ----
 *
 * Every piece of socket I/O is non-blocking and done with `lock` held, by
 * whoever comes by: nb_conn_dispatch() in the caller's event loop, or a
 * synchronous caller that waits for its reply. Such a caller polls the
 * socket itself (without the lock) when no other thread does; the others
 * sleep on `cond` until their request is done or the poller leaves. A reply
 * read by any thread is filed under its request: a synchronous one is
 * woken, an asynchronous one goes on `completed` and notify_fd tells the
 * event loop, so callbacks run only inside nb_conn_dispatch() and never
 * with the lock held: a callback may submit, cancel or wait. */

/* Keep fds that arrived for rq; on failure close them and remember it. */
static void request_add_fds(struct request *rq, const int *fds, size_t n)
{
        if (rq->nfds + n > rq->cap) {
                size_t ncap = (rq->cap ? rq->cap * 2 : 16) + n;
                int *p = realloc(rq->fds, ncap * sizeof(*p));
                if (!p) {
                        for (size_t i = 0; i < n; i++)
                                close(fds[i]);
                        rq->lost_fds = true;
                        return;
                }
                rq->fds = p;
                rq->cap = ncap;
        }
        memcpy(rq->fds + rq->nfds, fds, n * sizeof(int));
        rq->nfds += n;
}

/* What a request got, dropped: a failed, cancelled or timed-out request
 * leaves no fd open behind it. */
static void request_drop_output(struct request *rq)
{
        nbp_close_fds(rq->fds, rq->nfds);
        free(rq->fds);
        rq->fds = NULL;
        rq->nfds = rq->cap = 0;
        if (rq->msg)
                netbroker__server_message__free_unpacked(rq->msg, NULL);
        rq->msg = NULL;
}

static void notify(int efd)
{
        uint64_t one = 1;

        if (write(efd, &one, sizeof(one)) < 0) {
                /* EAGAIN: the counter is already non-zero, it wakes anyway. */
        }
}

void conn_notify(nb_conn *c)
{
        notify(c->notify_fd);
}

static void drain(int efd)
{
        uint64_t n;

        if (read(efd, &n, sizeof(n)) < 0) {
                /* EAGAIN: nothing to drain. */
        }
}

/* Lock held: the socket is in the epoll set with write interest exactly
 * while output is queued. */
void conn_epoll_sync(nb_conn *c)
{
        struct epoll_event ev = {.events = EPOLLIN | (c->out ? EPOLLOUT : 0u)};

        if (c->fd < 0 || c->broken) {
                conn_epoll_forget(c);
                return;
        }
        ev.data.fd = c->fd;
        if (!c->fd_in_epoll) {
                if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->fd, &ev) == 0)
                        c->fd_in_epoll = true;
        } else if (c->fd_events != ev.events) {
                epoll_ctl(c->epfd, EPOLL_CTL_MOD, c->fd, &ev);
        }
        c->fd_events = ev.events;
}

static void unlink_pending(nb_conn *c, struct request *rq)
{
        for (struct request **p = &c->pending; *p; p = &(*p)->next)
                if (*p == rq) {
                        *p = rq->next;
                        rq->next = NULL;
                        return;
                }
}

/* Lock held, rq already off `pending`: it is done with err (0: its msg and
 * fds are the result). */
static void finish(nb_conn *c, struct request *rq, int err)
{
        if (err == 0 && rq->msg && rq->msg->reply->n_results != rq->n_ops)
                err = -EPROTO;
        if (err == 0 && rq->lost_fds) {
                /* Devices were made, but we could not take all their fds. */
                conn_set_error(
                        c, "fds sent by the helper were lost (out of memory or at this process's "
                           "fd limit)");
                err = -EBADF;
        }
        if (err == 0 && !rq->msg)
                err = -EPROTO;
        rq->err = err;
        if (err < 0)
                request_drop_output(rq);
        rq->done = true;
        if (rq->cb) {
                rq->next = NULL;
                *c->completed_tail = rq;
                c->completed_tail = &rq->next;
                notify(c->notify_fd);
        } else {
                pthread_cond_broadcast(&c->cond);
                /* Its caller may be the poller, in poll() without the lock:
                 * the reply was read by another thread (the event loop's
                 * nb_conn_dispatch), so the socket will not wake it. */
                if (c->polling)
                        notify(c->wake_fd);
        }
}

static void drop_output_queue(nb_conn *c)
{
        while (c->out) {
                struct nbp_frame_out *f = c->out;
                c->out = f->next;
                nbp_frame_out_free(f);
        }
        c->out_tail = &c->out;
}

/* Lock held: the connection of generation `gen` is unusable. Every request
 * still on it fails with -ECONNRESET (none is sent again: the helper may
 * have run it). kill: the helper is ours and stopped answering; it would
 * not exit on EOF, so it is killed (the next call spawns a new one). The
 * fd is closed when the next call re-establishes, so no thread polls a
 * number that was reused. The message says why, best first: the helper's
 * own Error (already set by the caller), how the helper ended, or what the
 * socket said. */
static void conn_reset(nb_conn *c, unsigned gen, int err, bool have_message, bool kill_helper)
{
        if (c->gen != gen || c->broken)
                return;
        c->broken = true;
        if (c->fd >= 0)
                shutdown(c->fd, SHUT_RDWR);
        conn_epoll_forget(c);
        drop_output_queue(c);
        if (kill_helper && c->pid > 0)
                conn_kill_helper(c);
        if (!have_message) {
                c->error[0] = '\0';
                if (!kill_helper)
                        conn_reap_helper(c, false);
                if (!c->error[0])
                        conn_set_error(c, "connection to netbrokerd lost: %s", strerror(-err));
        }
        while (c->pending) {
                struct request *rq = c->pending;
                c->pending = rq->next;
                finish(c, rq, -ECONNRESET);
        }
        notify(c->wake_fd);
        pthread_cond_broadcast(&c->cond);
}

static struct request *find_pending(nb_conn *c, uint64_t id)
{
        for (struct request *rq = c->pending; rq; rq = rq->next)
                if (rq->id == id)
                        return rq;
        return NULL;
}

/* Lock held: file one frame under the request it belongs to. What belongs
 * to no request (it was cancelled, or timed out) is dropped, fds closed. */
static void file_frame(nb_conn *c, Netbroker__ServerMessage *m, int *fds, size_t nfds)
{
        struct request *rq;

        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_FDS &&
            (rq = find_pending(c, m->fds->request_id))) {
                if (m->fds->count != nfds)
                        rq->lost_fds = true;
                request_add_fds(rq, fds, nfds);
                netbroker__server_message__free_unpacked(m, NULL);
                return;
        }
        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_REPLY &&
            (rq = find_pending(c, m->reply->id))) {
                unlink_pending(c, rq);
                rq->msg = m;
                nbp_close_fds(fds, nfds); /* a Reply carries none */
                finish(c, rq, 0);
                return;
        }
        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_EVENT)
                conn_event_file(c, m->event);
        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_ERROR) {
                conn_set_error(c, "%s", m->error->message);
                rq = m->error->request_id ? find_pending(c, m->error->request_id) : NULL;
                if (rq) {
                        unlink_pending(c, rq);
                        finish(c, rq, m->error->status > 0 ? -m->error->status : -EPROTO);
                }
                /* The helper closes the connection after an Error. */
                conn_reset(c, c->gen, -EPROTO, true, false);
        }
        nbp_close_fds(fds, nfds);
        netbroker__server_message__free_unpacked(m, NULL);
}

/* Lock held: write what the socket takes of the queued frames. */
static int flush_output(nb_conn *c)
{
        while (c->out) {
                struct nbp_frame_out *f = c->out;
                int r = nbp_frame_write(c->fd, f);
                if (r <= 0)
                        return r == -EPIPE ? -ECONNRESET : r;
                c->out = f->next;
                if (!c->out)
                        c->out_tail = &c->out;
                nbp_frame_out_free(f);
        }
        return 0;
}

/* Lock held: do what the socket allows now, without blocking. */
static void io_step(nb_conn *c)
{
        unsigned gen = c->gen;
        int r;

        if (c->fd < 0 || c->broken)
                return;
        r = flush_output(c);
        /* Bounded: a helper that sends frame after frame must not keep a
         * caller here past its deadline (the waits check it between
         * steps; the socket stays readable for the next). */
        for (int frames = 0; r >= 0 && c->gen == gen && !c->broken && frames < 256; frames++) {
                Netbroker__ServerMessage *m = NULL;
                int fds[NBP_FRAME_MAX_FDS];
                size_t nfds = 0;

                r = conn_recv_msg(c, &m, fds, &nfds);
                if (r <= 0)
                        break;
                file_frame(c, m, fds, nfds);
        }
        if (r < 0)
                conn_reset(c, gen, r, false, false);
        conn_epoll_sync(c);
}

/* Lock held: a request past its deadline fails with -ETIMEDOUT, and the
 * connection is reset: a helper that does not answer in time is taken as
 * stuck, and a stream cannot skip the reply it may still send. */
static void expire(nb_conn *c, int64_t now)
{
        for (struct request *rq = c->pending; rq; rq = rq->next) {
                if (rq->deadline > now)
                        continue;
                unsigned gen = c->gen;
                unlink_pending(c, rq);
                conn_set_error(c,
                               "request %llu got no reply before its deadline; the connection to "
                               "netbrokerd was reset",
                               (unsigned long long)rq->id);
                finish(c, rq, -ETIMEDOUT);
                conn_reset(c, gen, -ETIMEDOUT, true, true);
                return;
        }
}

static int64_t deadline_of(int timeout_ms)
{
        return timeout_ms < 0 ? NO_DEADLINE : conn_now_ns() + (int64_t)timeout_ms * 1000000;
}

static int ms_until(int64_t deadline, int64_t now)
{
        int64_t ms;

        if (deadline == NO_DEADLINE)
                return -1;
        if (deadline <= now)
                return 0;
        ms = (deadline - now + 999999) / 1000000;
        return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Lock held: sleep on cond until woken or `deadline`. */
static void wait_cond(nb_conn *c, int64_t deadline)
{
        struct timespec ts;

        if (deadline == NO_DEADLINE) {
                pthread_cond_wait(&c->cond, &c->lock);
                return;
        }
        ts.tv_sec = deadline / 1000000000;
        ts.tv_nsec = deadline % 1000000000;
        pthread_cond_timedwait(&c->cond, &c->lock, &ts);
}

/* Lock held: make sure there is a working connection to send on. */
static int ensure_connected(nb_conn *c, int64_t deadline)
{
        if (c->fd >= 0 && !c->broken)
                return 0;
        /* Let the poller notice the breakage and leave first: it holds the
         * old fd's number. */
        while (c->polling) {
                if (conn_now_ns() >= deadline) {
                        conn_set_error(c, "the connection to netbrokerd is being reset; "
                                          "the deadline passed first");
                        return -ETIMEDOUT;
                }
                wait_cond(c, deadline);
        }
        if (c->fd >= 0 && !c->broken)
                return 0;
        return conn_establish(c, deadline);
}

/* Lock held: refuse what the helper would refuse, without sending it. The
 * frame's size is checked once it is packed (pack_request). */
static int check_limits(nb_conn *c, const nb_batch *b)
{
        if (b->nfds > NBP_FRAME_MAX_FDS || (c->hello_fds_known && b->nfds > c->max_fds)) {
                conn_set_error(c, "batch carries %zu fds; the helper takes at most %u", b->nfds,
                               c->hello_fds_known ? c->max_fds : NBP_FRAME_MAX_FDS);
                return -E2BIG;
        }
        if (c->max_ops && b->req.n_ops > c->max_ops) {
                conn_set_error(c, "batch has %zu ops; the helper takes at most %u", b->req.n_ops,
                               c->max_ops);
                return -E2BIG;
        }
        return 0;
}

/* The request's frame, packed once: its size is the one the helper checks
 * (a second pass over the batch only to measure it cost as much as the
 * packing). Over max_frame (0: unknown) it is -EMSGSIZE, with the size in
 * *ret_len, and nothing is sent: the helper would close the connection. */
static int pack_request(const nb_batch *b, uint64_t id, uint32_t max_frame,
                        struct nbp_frame_out **ret, size_t *ret_len)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = b->req;
        struct nbp_frame_out *f = NULL;
        int r;

        req.id = id;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        r = conn_pack_msg_fds(&m.base, b->fds, b->nfds, &f);
        if (r == -EMSGSIZE) /* over 4 GiB: no frame can say its length */
                *ret_len = protobuf_c_message_get_packed_size(&m.base);
        if (r < 0)
                return r;
        *ret_len = f->len - NBP_FRAME_HEADER_SIZE;
        if (max_frame && *ret_len > max_frame) {
                nbp_frame_out_free(f);
                return -EMSGSIZE;
        }
        *ret = f;
        return 0;
}

/* Lock held, connected: queue f (taken) for rq and write what the socket
 * takes now. A helper found dead before any byte of f went out ran
 * nothing: the connection is replaced, once, and f goes to the new one
 * (rather than fail a call that the next one would make work). */
static int send_request(nb_conn *c, struct request *rq, struct nbp_frame_out *f)
{
        bool retried = false;
        int r;

again:
        rq->gen = c->gen;
        rq->next = c->pending;
        c->pending = rq;
        if (c->out) {
                /* Behind frames the socket has not taken yet. */
                f->next = NULL;
                *c->out_tail = f;
                c->out_tail = &f->next;
                conn_epoll_sync(c);
                if (c->polling)
                        notify(c->wake_fd);
                return 0;
        }
        r = nbp_frame_write(c->fd, f);
        if (r == 1) {
                nbp_frame_out_free(f);
                return 0;
        }
        if (r == 0) {
                f->next = NULL;
                c->out = f;
                c->out_tail = &f->next;
                conn_epoll_sync(c);
                if (c->polling)
                        notify(c->wake_fd);
                return 0;
        }
        unlink_pending(c, rq);
        conn_reset(c, rq->gen, r, false, false);
        if ((r == -EPIPE || r == -ECONNRESET) && f->off == 0 && !retried) {
                retried = true;
                r = ensure_connected(c, rq->deadline);
                if (r == 0)
                        goto again;
        }
        nbp_frame_out_free(f);
        return r == -EPIPE ? -ECONNRESET : r;
}

/* Lock held, rq queued: its deadline is earlier than every other in
 * flight. An event loop (perhaps in another thread) may be waiting with no
 * timer or a later one: nb_conn_fd() turns readable so that it dispatches
 * (nothing to do) and reads nb_conn_next_timeout() again. */
static bool earliest_deadline(nb_conn *c, const struct request *rq)
{
        if (rq->deadline == NO_DEADLINE)
                return false;
        for (const struct request *p = c->pending; p; p = p->next)
                if (p != rq && p->deadline <= rq->deadline)
                        return false;
        return true;
}

/* Connect if needed, check, pack and queue b as rq, whose id goes to
 * *ret_id (once queued, rq may be done and freed by another thread before
 * this returns). 0 or -errno; on failure nothing is left queued. */
static int submit_request(nb_conn *c, const nb_batch *b, struct request *rq, uint64_t *ret_id)
{
        struct nbp_frame_out *f = NULL;
        uint32_t max_frame;
        size_t len = 0;
        int r = conn_check_owner(c);

        if (r < 0)
                return r;
        pthread_mutex_lock(&c->lock);
        if (c->closing) {
                /* From a callback that runs after nb_close(): nothing may
                 * outlive the connection, nor spawn a helper for it. */
                conn_set_error(c, "nb_close() was called on this connection");
                r = -ECANCELED;
        } else {
                r = ensure_connected(c, rq->deadline);
        }
        if (r == 0)
                r = check_limits(c, b);
        rq->id = *ret_id = ++c->next_id;
        max_frame = c->max_frame;
        pthread_mutex_unlock(&c->lock);
        if (r < 0)
                return r;

        /* Packing a large batch takes a while: not under the lock. */
        r = pack_request(b, rq->id, max_frame, &f, &len);
        pthread_mutex_lock(&c->lock);
        if (r == -EMSGSIZE)
                conn_set_error(c, "batch encodes to %zu bytes; the helper takes at most %u", len,
                               max_frame);
        if (r == 0)
                r = ensure_connected(c, rq->deadline);
        if (r == 0)
                r = send_request(c, rq, f);
        else
                nbp_frame_out_free(f);
        if (r == 0 && earliest_deadline(c, rq))
                notify(c->notify_fd);
        pthread_mutex_unlock(&c->lock);
        return r;
}

/* Lock held: wait for rq (synchronous) to be done, doing the connection's
 * I/O meanwhile when no other thread does. */
static void wait_request(nb_conn *c, struct request *rq)
{
        while (!rq->done) {
                int64_t now = conn_now_ns();

                expire(c, now);
                if (rq->done)
                        break;
                if (c->polling) {
                        wait_cond(c, rq->deadline);
                        continue;
                }
                struct pollfd p[2] = {
                        {.fd = c->fd, .events = POLLIN | (c->out ? POLLOUT : 0)},
                        {.fd = c->wake_fd, .events = POLLIN},
                };
                unsigned gen = c->gen;
                c->polling = true;
                pthread_mutex_unlock(&c->lock);
                poll(p, 2, ms_until(rq->deadline, now));
                pthread_mutex_lock(&c->lock);
                c->polling = false;
                if (p[1].revents)
                        drain(c->wake_fd);
                if (c->gen == gen)
                        io_step(c);
                /* Another waiter may take the poll over now. */
                pthread_cond_broadcast(&c->cond);
        }
}

static int take_results(struct request *rq, nb_results **ret)
{
        int r;

        if (rq->err < 0)
                return rq->err;
        r = nb_results_new(rq->msg, rq->fds, rq->nfds, ret);
        if (r < 0) {
                request_drop_output(rq);
                return r;
        }
        rq->msg = NULL;
        rq->fds = NULL;
        rq->nfds = 0;
        return 0;
}

NB_EXPORT int nb_submit_timeout(nb_conn *c, const nb_batch *b, int timeout_ms, nb_results **ret)
{
        struct request rq = {0};
        uint64_t id;
        int r;

        if (!c || !b || !ret)
                return -EINVAL;
        rq.deadline = deadline_of(timeout_ms);
        rq.n_ops = b->req.n_ops;
        r = submit_request(c, b, &rq, &id);
        if (r < 0)
                return r;
        pthread_mutex_lock(&c->lock);
        wait_request(c, &rq);
        pthread_mutex_unlock(&c->lock);
        return take_results(&rq, ret);
}

NB_EXPORT int nb_submit(nb_conn *c, const nb_batch *b, nb_results **ret)
{
        return nb_submit_timeout(c, b, -1, ret);
}

/* ---- the callback API ---- */

NB_EXPORT int nb_submit_async(nb_conn *c, const nb_batch *b, int timeout_ms, nb_callback cb,
                              void *opaque, uint64_t *ret_id)
{
        struct request *rq;
        uint64_t id;
        int r;

        if (!c || !b || !cb)
                return -EINVAL;
        rq = calloc(1, sizeof(*rq));
        if (!rq)
                return -ENOMEM;
        rq->deadline = deadline_of(timeout_ms);
        rq->n_ops = b->req.n_ops;
        rq->cb = cb;
        rq->opaque = opaque;
        r = submit_request(c, b, rq, &id);
        if (r < 0) {
                free(rq);
                return r;
        }
        if (ret_id)
                *ret_id = id;
        return 0;
}

NB_EXPORT int nb_conn_fd(nb_conn *c)
{
        if (!c)
                return -EINVAL;
        /* A child of fork() watching the parent's epoll set would spin. */
        return conn_check_owner(c) < 0 ? -ECHILD : c->epfd;
}

NB_EXPORT int nb_conn_next_timeout(nb_conn *c)
{
        int64_t first = NO_DEADLINE;

        if (!c || conn_check_owner(c) < 0)
                return -1;
        pthread_mutex_lock(&c->lock);
        for (struct request *rq = c->pending; rq; rq = rq->next)
                if (rq->deadline < first)
                        first = rq->deadline;
        pthread_mutex_unlock(&c->lock);
        return ms_until(first, conn_now_ns());
}

/* Run the callbacks of a list of done requests (no lock held). */
static int run_callbacks(nb_conn *c, struct request *list)
{
        int n = 0;

        while (list) {
                struct request *rq = list;
                nb_results *res = NULL;
                int status;

                list = rq->next;
                status = take_results(rq, &res);
                rq->cb(c, rq->id, status, res, rq->opaque);
                request_drop_output(rq);
                free(rq);
                n++;
        }
        return n;
}

/* No lock held: a run of callbacks of c is over. The last one after an
 * nb_close() from a callback finishes the close (c is freed then).
 * Returns how many callbacks the close ran. */
static int callbacks_done(nb_conn *c)
{
        bool last;

        pthread_mutex_lock(&c->lock);
        last = --c->in_callbacks == 0 && c->closing;
        pthread_mutex_unlock(&c->lock);
        return last ? conn_close_finish(c) : 0;
}

NB_EXPORT int nb_conn_dispatch(nb_conn *c)
{
        struct request *list;
        int n;

        if (!c)
                return -EINVAL;
        if (conn_check_owner(c) < 0)
                return -ECHILD;
        pthread_mutex_lock(&c->lock);
        drain(c->notify_fd);
        io_step(c);
        expire(c, conn_now_ns());
        list = c->completed;
        c->completed = NULL;
        c->completed_tail = &c->completed;
        c->in_callbacks++;
        pthread_mutex_unlock(&c->lock);
        n = run_callbacks(c, list);
        /* Events before callbacks_done(), which may free c. */
        n += conn_events_run(c);
        return n + callbacks_done(c);
}

NB_EXPORT int nb_cancel(nb_conn *c, uint64_t id)
{
        struct request *rq;
        int r = -ENOENT;

        if (!c)
                return -EINVAL;
        /* finish() would wake the parent's event loop through notify_fd. */
        if (conn_check_owner(c) < 0)
                return -ECHILD;
        pthread_mutex_lock(&c->lock);
        rq = find_pending(c, id);
        if (rq && rq->cb) {
                /* Its reply, if it comes, belongs to nobody and is dropped. */
                unlink_pending(c, rq);
                finish(c, rq, -ECANCELED);
                r = 0;
        }
        for (rq = c->completed; r < 0 && rq; rq = rq->next)
                if (rq->id == id && rq->err == 0) {
                        /* Done, but not yet called back: the callback
                         * sees the cancel, and the fds are closed. */
                        request_drop_output(rq);
                        rq->err = -ECANCELED;
                        r = 0;
                }
        pthread_mutex_unlock(&c->lock);
        return r;
}

/* nb_close(): every request not yet called back is, pending ones with
 * -ECANCELED, so callers can free what their opaque pointers hold. */
int conn_finish_all(nb_conn *c)
{
        struct request *list;
        int n;

        pthread_mutex_lock(&c->lock);
        while (c->pending) {
                struct request *rq = c->pending;
                c->pending = rq->next;
                finish(c, rq, -ECANCELED);
        }
        list = c->completed;
        c->completed = NULL;
        c->completed_tail = &c->completed;
        /* A callback's nb_conn_dispatch() must not finish the close too. */
        c->in_callbacks++;
        pthread_mutex_unlock(&c->lock);
        n = run_callbacks(c, list);
        pthread_mutex_lock(&c->lock);
        c->in_callbacks--;
        pthread_mutex_unlock(&c->lock);
        return n;
}

bool conn_close_begin(nb_conn *c)
{
        bool now;

        pthread_mutex_lock(&c->lock);
        now = !c->closing && c->in_callbacks == 0;
        c->closing = true;
        pthread_mutex_unlock(&c->lock);
        return now;
}

/* nb_close() in a child of fork(): the requests are the parent's, which
 * still waits for their replies; a callback here would answer them a
 * second time. Their memory is freed (a synchronous one lives on a stack
 * of the parent's thread: only what it points to) and our copies of their
 * fds closed. */
void conn_drop_requests(nb_conn *c)
{
        struct request *lists[] = {c->pending, c->completed};

        c->pending = c->completed = NULL;
        c->completed_tail = &c->completed;
        for (size_t i = 0; i < sizeof(lists) / sizeof(*lists); i++)
                while (lists[i]) {
                        struct request *rq = lists[i];
                        lists[i] = rq->next;
                        request_drop_output(rq);
                        if (rq->cb)
                                free(rq);
                }
        drop_output_queue(c);
}
