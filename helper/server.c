// SPDX-License-Identifier: LGPL-2.1-or-later
/* Connections and frames; see server.h. */
#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netfilter.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backend.h"
#include "bw_nft.h"
#include "closer.h"
#include "codec.h"
#include "dispatch.h"
#include "fw_model.h"
#include "fw_net.h"
#include "lane.h"
#include "log.h"
#include "ops.h"
#include "peer.h"
#include "stats.h"

NBD_LOG_CATEGORY(server);

#define MAX_LISTENERS 8
/* Frames handled per wake-up, so one busy client cannot starve the others;
 * and no more frames once the wake-up has run that long. Cheap frames
 * (Pings) still go 16 at a time, but a client that sends a 1,000-rule
 * batch (20 ms) again the moment its reply leaves no longer has 16 served
 * in a row while a Ping on another connection waits 300 ms or more. */
#define FRAMES_PER_WAKEUP 16
#define WAKEUP_BUDGET_US 1000
/* While a job waits for fds, how often the clients holding some are asked
 * whether they took them (nothing tells the helper when they do). */
#define FDS_POLL_MS 5
/* While only connections closed with fds still in their client's queue
 * are left to look at (see conn_close), the poll is slower: nobody waits. */
#define FDS_DRAIN_POLL_MS 100

/* Remove item from the singly linked list at *head (by its `next`); an
 * item not on it is left alone. Connections and their jobs both use it. */
#define LIST_REMOVE(head, item)                                                                    \
        do {                                                                                       \
                for (__typeof__(item) *p_ = (head); *p_; p_ = &(*p_)->next)                        \
                        if (*p_ == (item)) {                                                       \
                                *p_ = (item)->next;                                                \
                                break;                                                             \
                        }                                                                          \
        } while (0)

struct conn;
struct decode;

struct conn_job {
        struct conn *conn;
        struct nbd_job *job;
        size_t mem; /* the decoded request, the reply room it was given, its results */
        size_t results; /* of mem, its results' (job_hold) */
        unsigned nfds; /* fds that came with the request, held until it ends */
        /* Of the fds its op is about to make (reserve_fds): reserved and
         * not yet given, or wanted while it waits. A connection has one
         * job on the server's list (next_fds_wait), and the rest of its
         * waiting jobs behind it on its own (next_conn_wait): the poll
         * walks one waiter per connection, however many requests wait. */
        unsigned fds_reserved, fds_wanted;
        struct conn_job *next_fds_wait, *next_conn_wait;
        bool finished;
        struct conn_job *next;
};

/* The tables whose deletion by someone else is an Event (server_event
 * below): the guests', the networks', the outbound policers'. */
#define EVENT_TABLES 3

/* What the connections of one uid other than root hold (counted as in
 * struct conn, reservations included), kept as it changes so that a
 * decision costs no walk; and, while fds_kick() walks the waiting list,
 * what waiters of the uid it passed claim. */
struct uid_fds {
        uid_t uid;
        unsigned conns; /* its connections, draining ones included */
        unsigned held, claimed;
        struct uid_fds *next;
};

struct conn {
        struct nbd_server *srv;
        struct nbd_watch w;
        int fd;
        struct nbd_peer peer; /* from the kernel, at accept */
        bool hello_done;
        bool closing; /* an Error is queued: close once it is sent */
        /* The socket failed or the Error is out: nothing more is read or
         * written, and the connection closes from the loop (close_timer),
         * never inside a job's call into the server. */
        bool dead;
        bool closed;
        bool refs_blocked; /* fds cannot go now (see conn_fds_may_go): the retry timer flushes */
        /* Closed while fds it sent were still in its client's queue (see
         * conn_close): its socket is kept, shut down, until they are read
         * or the client closes, and still counts as the uid's. */
        bool draining;
        /* SO_PASSRIGHTS is off on its socket: no fds can wait in it, so
         * its close costs nothing and is done on the loop (else the closer
         * does it). */
        bool no_rights;
        /* The socketpair of the process that started the helper (--fd):
         * what its close costs is that process's own business. */
        bool adopted;
        /* To be closed by the closer, whose share of its uid is full: kept,
         * counted as a connection of its uid, until the closer has room. */
        bool parked;
        uint32_t events; /* what the connection is watched for now */
        struct nbp_frame_reader rd;
        struct nbp_frame_out *out_head, *out_tail;
        struct nbd_timer frame_timer, idle_timer, retry_timer, close_timer, hello_timer;
        struct conn_job *jobs;
        unsigned n_jobs;
        /* Memory this connection holds: requests being run (with the reply
         * room given to them) and output the client has not read. Nothing
         * more is read from it at max_connection_memory. */
        size_t mem;
        size_t results; /* of mem, its requests' results (job_hold) */
        /* Fds given to it that its client has not taken: queued in the
         * helper (its own), and sent that the client may not have taken
         * yet (reset when the socket's send queue is empty, SIOCOUTQ 0:
         * every frame read). With its jobs' reservations, what it holds. */
        unsigned fds_queued, fds_in_flight;
        unsigned fds_reserved; /* the sum of its jobs' */
        struct uid_fds *uid_fds; /* NULL for root */
        /* Its job on the server's list of those waiting for fds, and its
         * other waiting jobs behind it. */
        struct conn_job *fds_waiting, *conn_wait_head, *conn_wait_tail;
        unsigned fds_held; /* fds its running requests came with */
        /* fds of the frame being received (the reader's), counted in the
         * server's fds_held_nonroot for a non-root connection. */
        unsigned fds_partial;
        /* A frame of it being decoded on the decode lane: nothing more is
         * read until it is handled, so its requests start in order. */
        struct decode *decoding;
        /* Its Hello asked for Events; the one of each table still queued,
         * not yet written (NULL: none): a later one is not queued behind
         * it, so a client that does not read holds at most these. */
        bool want_events;
        struct nbp_frame_out *event_out[EVENT_TABLES];
        struct conn *next;
};

struct nbd_server {
        const struct nbd_config *cfg;
        struct nbd_loop *loop;
        struct nbd_dispatch_ctx dctx;
        struct nbd_timer trim_timer; /* dctx's */
        struct nbd_watch listeners[MAX_LISTENERS];
        size_t n_listeners;
        struct conn *conns;
        unsigned n_conns;
        unsigned n_conns_nonroot;
        /* The sum of fds_held and fds_partial over non-root connections. */
        unsigned fds_held_nonroot;
        /* Jobs of non-root connections waiting for their op's fds, one a
         * connection, in the order they came, and the poll that lets them
         * go on. */
        struct conn_job *fds_wait, **fds_wait_tail;
        struct nbd_timer fds_timer;
        /* What all non-root connections hold (the sum of their uids'). */
        unsigned fds_nonroot;
        struct uid_fds *uids;
        unsigned n_draining;
        unsigned n_parked;
        /* The last close of what a client gave, off the loop (closer.h). */
        struct nbd_closer *closer;
        /* The device of nsfs: an fd of it (a network namespace) is the
         * only kind an op takes from a request. */
        dev_t nsfs_dev;
        bool stopping; /* nbd_server_shutdown(): nothing drains */
        struct nbd_timer accept_pause;
        struct nbd_lane *lane_decode; /* NULL: every frame is decoded on the loop */
        /* Root's frames: never behind another caller's 16 MiB decode. */
        struct nbd_lane *lane_decode_root;
};

static void conn_close(struct conn *c);
static void conn_update_events(struct conn *c);
static void conn_close_later(struct conn *c);
static bool conn_fds_may_go(struct conn *c, size_t n);
static void conn_fds_sent(struct conn *c, size_t n);
static void conn_arm_idle(struct conn *c);
static void conn_flush(struct conn *c);
static void conn_push(struct conn *c, struct nbp_frame_out *f);

/* ---- output ---- */

/* Whether more frames may be read from c now. Every fd a frame brings is
 * the helper's until its request ends, and the helper has few (fd_limit):
 * a connection whose requests hold fds (a veth's namespace, parked behind
 * a long Exec) is not read until they end, and the non-root connections
 * together hold at most fd_limit / 8, so a client cannot pin the helper at
 * its fd limit and keep root from connecting. */
/* Whether the closer holds less than uid's share of fds (fd_limit / 8),
 * and less than all non-root uids' (fd_limit / 4) for all of them: what a
 * client made wait in a close is the helper's fd, and counts as its. */
static bool closer_has_room(struct nbd_server *s, uid_t uid)
{
        return nbd_closer_pending(s->closer, uid) < nbd_config_fds_per_uid(s->cfg) &&
               nbd_closer_pending_all(s->closer) < nbd_config_fds_nonroot(s->cfg);
}

static bool conn_may_read(const struct conn *c)
{
        const struct nbd_config *cfg = c->srv->cfg;

        if (c->mem >= cfg->max_connection_memory || c->fds_held || c->decoding)
                return false;
        /* Fds of its uid the closer still holds are held by the helper. */
        if (!nbd_peer_is_root(&c->peer) && !closer_has_room(c->srv, c->peer.uid))
                return false;
        /* A frame under way is read to its end: its fds are counted. */
        return nbd_peer_is_root(&c->peer) || nbp_frame_reader_busy(&c->rd) ||
               c->srv->fds_held_nonroot + cfg->max_fds_per_frame <= cfg->fd_limit / 8;
}

/* The fds of c's frame under way, as its reader holds them now, into the
 * non-root count: false when they take it past the non-root share (a
 * frame that brought its fds after the check conn_may_read() made, or
 * after other connections' did), and c must be refused. Fewer (the frame
 * taken or dropped) lets the others read again. */
static bool conn_count_partial_fds(struct conn *c)
{
        struct nbd_server *s = c->srv;
        unsigned now = nbp_frame_reader_busy(&c->rd) ? (unsigned)c->rd.nfds : 0;

        if (nbd_peer_is_root(&c->peer) || now == c->fds_partial)
                return true;
        s->fds_held_nonroot = s->fds_held_nonroot - c->fds_partial + now;
        if (now < c->fds_partial)
                for (struct conn *o = s->conns; o; o = o->next)
                        if (o != c)
                                conn_update_events(o);
        c->fds_partial = now;
        return s->fds_held_nonroot <= s->cfg->fd_limit / 8;
}

/* While output waits for the socket, the connection is not read: a client
 * that sends requests without reading the replies is held back by its own
 * socket buffer, instead of growing the helper's output queue without bound.
 * Replies of requests already running are still queued, and those are
 * capped by max_requests_per_connection. */
static void conn_update_events(struct conn *c)
{
        uint32_t events;

        if (c->closed || c->dead)
                return;
        if (!c->out_head)
                events = conn_may_read(c) ? EPOLLIN : 0;
        else if (c->refs_blocked)
                events = 0; /* the socket is writable: EPOLLOUT would spin */
        else
                events = EPOLLOUT;
        if (events == c->events)
                return;
        c->events = events;
        nbd_loop_modify(c->srv->loop, &c->w, events);
}

static void on_retry_flush(void *data)
{
        conn_flush(data);
}

/* What a non-root connection holds grows or shrinks by n: its uid's count
 * and the server's follow, so a decision reads them without a walk. Root's
 * are not counted. */
static void conn_fds_take(struct conn *c, unsigned n)
{
        if (!c->uid_fds)
                return;
        c->uid_fds->held += n;
        c->srv->fds_nonroot += n;
}

static void conn_fds_drop(struct conn *c, unsigned n)
{
        if (!c->uid_fds)
                return;
        c->uid_fds->held -= n;
        c->srv->fds_nonroot -= n;
}

/* Refresh the count of fds the client has not taken: SIOCOUTQ of a unix
 * stream socket is what the peer has not read yet; at 0 every fd sent has
 * been received. Asked only of a connection that has some in flight. */
static void conn_fds_refresh(struct conn *c)
{
        int outq = 0;

        if (!c->fds_in_flight)
                return;
        nbd_stat_inc(NBD_STAT_FDS_OUTQ_CHECKS);
        if (ioctl(c->fd, SIOCOUTQ, &outq) < 0 || outq > 0)
                return;
        conn_fds_drop(c, c->fds_in_flight);
        c->fds_in_flight = 0;
}

/* The kernel counts the fds a process has in flight on all its sockets
 * and refuses more than its fd limit (ETOOMANYREFS): a client that never
 * takes its tap fds would make every other client's TapCreate wait. Each
 * connection may have max_fds_in_flight; what the non-root ones hold
 * together, in flight or not, their reservations bound (fds_kick). */
static bool conn_fds_may_go(struct conn *c, size_t n)
{
        conn_fds_refresh(c);
        return !c->fds_in_flight || c->fds_in_flight + n <= c->srv->cfg->max_fds_in_flight;
}

static void fds_poll_arm(struct nbd_server *s, bool in_flight);

static void conn_fds_sent(struct conn *c, size_t n)
{
        c->fds_queued -= (unsigned)n;
        c->fds_in_flight += (unsigned)n;
        /* Held as before, but now only the poll sees them go. */
        if (c->uid_fds)
                fds_poll_arm(c->srv, true);
}

/* ---- fd reservations ----
 *
 * Every fd a tap or macvtap op makes is the helper's until it is sent, and
 * counts against its fd limit; sent, it counts against that limit again
 * (in flight) until the client takes it, even once the helper closed the
 * connection (the client's receive queue keeps them). So the fds of
 * non-root callers are reserved before their op opens them, and held until
 * their client takes them or closes its socket: their connections together
 * hold at most a quarter of fd_limit, and one uid at most an eighth (an op
 * needing more is refused at validation). A job whose op does not fit
 * waits, having made nothing, first come first served; root never waits:
 * the rest of fd_limit is its. */

static void fds_wait_unlink(struct nbd_server *s, struct conn_job *cj)
{
        for (struct conn_job **p = &s->fds_wait; *p; p = &(*p)->next_fds_wait)
                if (*p == cj) {
                        *p = cj->next_fds_wait;
                        if (s->fds_wait_tail == &cj->next_fds_wait)
                                s->fds_wait_tail = p;
                        break;
                }
        cj->next_fds_wait = NULL;
}

static void fds_wait_append(struct nbd_server *s, struct conn_job *cj)
{
        if (!s->fds_wait)
                s->fds_wait_tail = &s->fds_wait;
        cj->next_fds_wait = NULL;
        *s->fds_wait_tail = cj;
        s->fds_wait_tail = &cj->next_fds_wait;
        cj->conn->fds_waiting = cj;
}

/* A connection's next waiting job takes its place on the server's list,
 * at the end: the requests of one connection wait one behind the other. */
static void conn_fds_wait_next(struct conn *c)
{
        struct conn_job *next = c->conn_wait_head;

        c->fds_waiting = NULL;
        if (!next)
                return;
        c->conn_wait_head = next->next_conn_wait;
        if (!c->conn_wait_head)
                c->conn_wait_tail = NULL;
        next->next_conn_wait = NULL;
        fds_wait_append(c->srv, next);
}

static void fds_wait_add(struct nbd_server *s, struct conn_job *cj, unsigned n)
{
        struct conn *c = cj->conn;

        cj->fds_wanted = n;
        if (!c->fds_waiting) {
                fds_wait_append(s, cj);
                return;
        }
        cj->next_conn_wait = NULL;
        if (c->conn_wait_tail)
                c->conn_wait_tail->next_conn_wait = cj;
        else
                c->conn_wait_head = cj;
        c->conn_wait_tail = cj;
}

/* A waiting job that ends (its connection closed) leaves its place. */
static void fds_wait_remove(struct nbd_server *s, struct conn_job *cj)
{
        struct conn *c = cj->conn;

        if (c->fds_waiting == cj) {
                fds_wait_unlink(s, cj);
                conn_fds_wait_next(c);
        } else {
                struct conn_job *prev = NULL;
                for (struct conn_job *j = c->conn_wait_head; j; prev = j, j = j->next_conn_wait) {
                        if (j != cj)
                                continue;
                        if (prev)
                                prev->next_conn_wait = j->next_conn_wait;
                        else
                                c->conn_wait_head = j->next_conn_wait;
                        if (c->conn_wait_tail == j)
                                c->conn_wait_tail = prev;
                        break;
                }
        }
        cj->next_conn_wait = NULL;
        cj->fds_wanted = 0;
}

/* Every waiting job of a closing connection, at once. */
static void conn_fds_wait_clear(struct conn *c)
{
        if (c->fds_waiting)
                fds_wait_unlink(c->srv, c->fds_waiting);
        c->fds_waiting = NULL;
        c->conn_wait_head = c->conn_wait_tail = NULL;
}

static void cj_fds_reserve(struct conn_job *cj, unsigned n)
{
        cj->fds_reserved += n;
        cj->conn->fds_reserved += n;
        conn_fds_take(cj->conn, n);
}

static void cj_fds_unreserve(struct conn_job *cj, unsigned n)
{
        if (n > cj->fds_reserved)
                n = cj->fds_reserved;
        cj->fds_reserved -= n;
        cj->conn->fds_reserved -= n;
        conn_fds_drop(cj->conn, n);
}

static void conn_forget(struct conn *c);
static void conn_uid_fds_put(struct nbd_server *s, struct conn *c);
static void on_fds_timer(void *data);

/* The poll runs while a job waits and some client holds fds sent (only
 * SIOCOUTQ tells the helper that it took them; everything else that frees
 * room kicks the list itself), or a closed connection drains. Armed
 * sooner already, it is left alone: new waiters do not postpone it. */
static void fds_poll_arm(struct nbd_server *s, bool in_flight)
{
        uint64_t ms;

        if (s->fds_wait && in_flight)
                ms = FDS_POLL_MS;
        else if (s->n_draining)
                ms = FDS_DRAIN_POLL_MS;
        else {
                nbd_timer_cancel(s->loop, &s->fds_timer);
                return;
        }
        if (s->fds_timer.deadline_ms && s->fds_timer.deadline_ms <= nbd_now_ms() + ms)
                return;
        nbd_timer_arm(s->loop, &s->fds_timer, ms, on_fds_timer, s);
}

/* Reserve for the waiting jobs, in order. One that does not fit keeps its
 * room: a job behind it goes first only if it leaves that room (claimed)
 * free, so a request for many fds is not passed for ever by small ones;
 * and one held back by its own uid's share claims only from that uid.
 * After one look at each client holding fds sent, each waiter costs O(1). */
static void fds_kick(struct nbd_server *s)
{
        const unsigned all_max = nbd_config_fds_nonroot(s->cfg);
        const unsigned uid_max = nbd_config_fds_per_uid(s->cfg);
        unsigned claimed = 0;
        bool in_flight = false;
        struct conn *next;

        for (struct conn *c = s->conns; c; c = next) {
                next = c->next;
                if (!c->uid_fds || !c->fds_in_flight)
                        continue;
                conn_fds_refresh(c);
                if (c->fds_in_flight)
                        in_flight = true;
                else if (c->draining)
                        conn_forget(c);
        }
        for (struct uid_fds *u = s->uids; u; u = u->next)
                u->claimed = 0;
        for (struct conn_job **p = &s->fds_wait; *p;) {
                struct conn_job *cj = *p;
                struct uid_fds *u = cj->conn->uid_fds;
                unsigned n = cj->fds_wanted;
                bool uid_room = u->held + u->claimed + n <= uid_max;

                if (uid_room && s->fds_nonroot + claimed + n <= all_max) {
                        fds_wait_unlink(s, cj);
                        conn_fds_wait_next(cj->conn);
                        cj->fds_wanted = 0;
                        cj_fds_reserve(cj, n);
                        nbd_job_fds_reserved(cj->job);
                        continue;
                }
                u->claimed += n;
                if (uid_room)
                        claimed += n;
                p = &cj->next_fds_wait;
        }
        fds_poll_arm(s, in_flight);
}

static void on_fds_timer(void *data)
{
        nbd_stat_inc(NBD_STAT_FDS_POLLS);
        fds_kick(data);
}

static void conn_flush(struct conn *c)
{
        bool had_output = c->out_head != NULL;

        if (c->dead)
                return;
        c->refs_blocked = false;
        while (c->out_head) {
                struct nbp_frame_out *head = c->out_head;
                size_t nfds = head->off == 0 ? head->nfds : 0;
                int r = nfds && !conn_fds_may_go(c, nfds) ? -ETOOMANYREFS
                                                          : nbp_frame_write(c->fd, head);
                /* The fds go with the frame's first byte, which may be all
                 * that went. */
                if (nfds && !head->nfds)
                        conn_fds_sent(c, nfds);
                if (r == 0)
                        break;
                if (r == -ETOOMANYREFS) {
                        /* Too many of our fds are in flight, not yet taken
                         * by the client: the socket is writable, so EPOLLOUT
                         * would spin. Try again in a moment. */
                        c->refs_blocked = true;
                        nbd_timer_arm(c->srv->loop, &c->retry_timer, 2, on_retry_flush, c);
                        break;
                }
                if (r < 0) {
                        nbd_debug("write to pid %d failed: %s", (int)c->peer.pid, strerror(-r));
                        conn_close_later(c);
                        return;
                }
                c->out_head = head->next;
                if (!c->out_head)
                        c->out_tail = NULL;
                c->mem -= head->len;
                for (size_t i = 0; i < EVENT_TABLES; i++)
                        if (c->event_out[i] == head)
                                c->event_out[i] = NULL;
                nbp_frame_out_free(head);
        }
        if (!c->out_head && c->closing) {
                conn_close_later(c);
                return;
        }
        conn_update_events(c);
        if (had_output && !c->out_head)
                for (struct conn_job *cj = c->jobs; cj; cj = cj->next)
                        if (!cj->finished && cj->job)
                                nbd_job_output_drained(cj->job);
}

/* Queue a frame (taking it) and send what the socket takes. */
static void conn_push(struct conn *c, struct nbp_frame_out *f)
{
        if (c->closed || c->dead) {
                nbp_frame_out_free(f);
                return;
        }
        if (c->out_tail)
                c->out_tail->next = f;
        else
                c->out_head = f;
        c->out_tail = f;
        c->mem += f->len;
        c->fds_queued += (unsigned)f->nfds;
        conn_fds_take(c, (unsigned)f->nfds);
        conn_flush(c);
}

static int conn_queue(struct conn *c, const Netbroker__ServerMessage *m)
{
        struct nbp_frame_out *f;
        int r = nbp_pack_frame(&m->base, &f);

        if (r < 0)
                return r;
        conn_push(c, f);
        return 0;
}

/* Send an Error and close the connection once it is out. */
static void conn_fail(struct conn *c, int status, uint64_t request_id, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static void conn_fail(struct conn *c, int status, uint64_t request_id, const char *fmt, ...)
{
        Netbroker__ServerMessage m = NETBROKER__SERVER_MESSAGE__INIT;
        Netbroker__Error e = NETBROKER__ERROR__INIT;
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        nbd_info("closing connection of pid %d: %s", (int)c->peer.pid, msg);
        e.status = status;
        e.message = msg;
        e.request_id = request_id;
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_ERROR;
        m.error = &e;
        c->closing = true;
        /* Nothing more is read from a connection that is being closed. */
        nbp_frame_reader_reset(&c->rd);
        conn_count_partial_fds(c);
        nbd_timer_cancel(c->srv->loop, &c->frame_timer);
        /* Before the Error is queued: fds the client took are not held
         * by the bytes of an Error it has not read yet (else the
         * connection would drain holding them). */
        conn_fds_refresh(c);
        if (conn_queue(c, &m) < 0)
                conn_close_later(c);
}

/* ---- jobs ---- */

static void free_conn_job(void *p)
{
        free(p);
}

/* A request's fds are closed (its job ended): its connection, and the
 * non-root ones the shared bound held back, may be read again. */
static void conn_release_fds(struct conn *c, struct conn_job *cj)
{
        struct nbd_server *s = c->srv;

        if (!cj->nfds)
                return;
        c->fds_held -= cj->nfds;
        if (!nbd_peer_is_root(&c->peer)) {
                s->fds_held_nonroot -= cj->nfds;
                for (struct conn *o = s->conns; o; o = o->next)
                        if (o != c)
                                conn_update_events(o);
        }
        cj->nfds = 0;
        conn_update_events(c);
}

static void on_job_done(struct nbd_job *job, const Netbroker__Reply *reply, void *data)
{
        struct conn_job *cj = data;
        struct conn *c = cj->conn;
        Netbroker__ServerMessage m = NETBROKER__SERVER_MESSAGE__INIT;

        (void)job;
        cj->finished = true;
        if (cj->fds_wanted)
                fds_wait_remove(c->srv, cj);
        if (cj->fds_reserved) {
                cj_fds_unreserve(cj, cj->fds_reserved);
                fds_kick(c->srv);
        }
        c->mem -= cj->mem;
        c->results -= cj->results;
        conn_release_fds(c, cj);
        LIST_REMOVE(&c->jobs, cj);
        c->n_jobs--;
        nbd_loop_defer_free(c->srv->loop, free_conn_job, cj);
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_REPLY;
        m.reply = (Netbroker__Reply *)reply;
        if (conn_queue(c, &m) < 0)
                conn_fail(c, ENOMEM, reply->id, "cannot encode the reply");
        conn_arm_idle(c);
}

/* An op made fds: send them now, in their own frame ahead of the reply, so
 * the helper holds as few as possible (its fd limit is small, and fds in
 * flight count against it too). */
static int send_job_fds(void *data, uint64_t request_id, uint32_t op_index, int *fds, size_t n)
{
        struct conn_job *cj = data;
        struct conn *c = cj->conn;
        Netbroker__ServerMessage m = NETBROKER__SERVER_MESSAGE__INIT;
        Netbroker__Fds f = NETBROKER__FDS__INIT;
        struct nbp_frame_out *frame;
        int r;

        f.request_id = request_id;
        f.op_index = op_index;
        f.count = (uint32_t)n;
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_FDS;
        m.fds = &f;
        r = n <= NBP_FRAME_MAX_FDS ? nbp_pack_frame(&m.base, &frame) : -E2BIG;
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        close(fds[i]);
                return r;
        }
        memcpy(frame->fds, fds, n * sizeof(int));
        frame->nfds = n;
        /* From here they count as the connection's queue, then in flight. */
        cj_fds_unreserve(cj, (unsigned)n);
        conn_push(c, frame);
        return c->closed || c->dead ? -ECONNRESET : c->out_head != NULL;
}

/* What a job's results hold until its reply goes: the results of the
 * requests in flight on one connection share max_connection_memory
 * (released with each job), and count in the connection's memory, which
 * stops its reads when full. Not the requests themselves: a request larger
 * than the bound (4,096 guests' filters) is admitted, and its results are
 * small. */
static bool job_hold(void *data, size_t bytes)
{
        struct conn_job *cj = data;
        struct conn *c = cj->conn;

        if (c->results + bytes > c->srv->cfg->max_connection_memory)
                return false;
        c->results += bytes;
        cj->results += bytes;
        c->mem += bytes;
        cj->mem += bytes;
        return true;
}

static int job_reserve_fds(void *data, size_t n)
{
        struct conn_job *cj = data;
        struct conn *c = cj->conn;
        struct nbd_server *s = c->srv;

        if (!n) {
                if (cj->fds_reserved) {
                        cj_fds_unreserve(cj, cj->fds_reserved);
                        fds_kick(s);
                }
                return 0;
        }
        /* Reserved already: fds_kick() did, while the job waited. */
        if (!c->uid_fds || cj->fds_reserved >= n)
                return 0;
        /* Behind those already waiting (first come, first served): the
         * kick reserves for it at once when it may go. */
        fds_wait_add(s, cj, (unsigned)n);
        fds_kick(s);
        if (cj->fds_reserved >= n)
                return 0;
        nbd_debug("a request of uid %u waits for %zu fds: its share is held", (unsigned)c->peer.uid,
                  n);
        return 1;
}

static const struct nbd_job_owner job_owner = {
        .done = on_job_done,
        .send_fds = send_job_fds,
        .hold = job_hold,
        .reserve_fds = job_reserve_fds,
};

/* Every op of a request that cannot be run answers with the same status. */
static void reply_all(struct conn *c, const Netbroker__Request *req, int status, const char *msg)
{
        Netbroker__ServerMessage m = NETBROKER__SERVER_MESSAGE__INIT;
        Netbroker__Reply reply = NETBROKER__REPLY__INIT;
        Netbroker__Result *results = NULL, **ptrs = NULL;

        reply.id = req->id;
        if (req->n_ops) {
                results = calloc(req->n_ops, sizeof(*results));
                ptrs = calloc(req->n_ops, sizeof(*ptrs));
                if (!results || !ptrs) {
                        free(results);
                        free(ptrs);
                        conn_fail(c, ENOMEM, req->id, "out of memory");
                        return;
                }
        }
        for (size_t i = 0; i < req->n_ops; i++) {
                netbroker__result__init(&results[i]);
                results[i].status = status;
                results[i].message = (char *)msg;
                ptrs[i] = &results[i];
        }
        reply.n_results = req->n_ops;
        reply.results = ptrs;
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_REPLY;
        m.reply = &reply;
        if (conn_queue(c, &m) < 0)
                conn_fail(c, ENOMEM, req->id, "cannot encode the reply");
        free(results);
        free(ptrs);
}

static void handle_hello(struct conn *c, const Netbroker__Hello *h)
{
        Netbroker__ServerMessage m = NETBROKER__SERVER_MESSAGE__INIT;
        Netbroker__Hello me = NETBROKER__HELLO__INIT;

        if (h->version != NBP_PROTOCOL_VERSION) {
                conn_fail(c, EPROTONOSUPPORT, 0,
                          "protocol version %u is not supported: this helper speaks version %u",
                          h->version, NBP_PROTOCOL_VERSION);
                return;
        }
        /* Every op the helper runs: a fixed array of 32 names dropped the
         * 33rd op's (program_list) once there were more. */
        size_t n = nbd_features(&c->srv->dctx, NULL, 0);
        const char **features = calloc(n ? n : 1, sizeof(*features));

        if (!features) {
                conn_fail(c, ENOMEM, 0, "out of memory answering Hello");
                return;
        }
        me.version = NBP_PROTOCOL_VERSION;
        me.n_features = nbd_features(&c->srv->dctx, features, n);
        me.features = (char **)features;
        me.software = (char *)"netbrokerd " NB_VERSION;
        me.max_frame = (uint32_t)c->srv->cfg->max_frame;
        me.max_ops = c->srv->cfg->max_ops;
        me.max_fds = c->srv->cfg->max_fds_per_frame;
        me.max_reply = c->srv->cfg->max_reply;
        me.max_requests = c->srv->cfg->max_requests_per_connection;
        me.max_rules = nbd_config_max_rules(c->srv->cfg, &c->peer);
        me.max_execs_running = c->srv->cfg->max_spawns_per_uid;
        me.exec_output_cap = c->srv->cfg->exec_output_cap;
        me.exec_timeout_max_ms = c->srv->cfg->exec_timeout_max_ms;
        me.max_args = c->srv->cfg->max_args;
        me.events = true;
        c->want_events = h->events;
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_HELLO;
        m.hello = &me;
        c->hello_done = true;
        nbd_timer_cancel(c->srv->loop, &c->hello_timer);
        if (conn_queue(c, &m) < 0)
                conn_fail(c, ENOMEM, 0, "cannot encode Hello");
        free(features);
}

/* ---- events ---- */

/* A caller hears of a table's deletion when it may write to the table
 * (root always): deny by default, as the ops. */
static const struct {
        uint32_t family;
        const char *table;
        const char *op;
} event_tables[EVENT_TABLES] = {
        {NFPROTO_NETDEV, NBD_FW_TABLE, "firewall_apply"},
        {NFPROTO_INET, NBD_NET_TABLE, "net_apply"},
        {NFPROTO_NETDEV, NBD_BW_NFT_TABLE, "bandwidth_set"},
};

static bool conn_hears(const struct conn *c, size_t k)
{
        struct nbd_err why;

        if (!c->want_events || !c->hello_done || c->closing || c->dead || c->closed || c->draining)
                return false;
        return nbd_policy_check_op(&c->srv->cfg->policy, &c->peer, event_tables[k].op, &why) == 0;
}

/* Someone else deleted one of the helper's tables (fw_kernel.h): each
 * connection that asked for events and may write to it is told, once
 * while such a notice waits unread there. */
static void server_table_deleted(void *data, uint32_t family, const char *table)
{
        Netbroker__ServerMessage m = NETBROKER__SERVER_MESSAGE__INIT;
        Netbroker__Event ev = NETBROKER__EVENT__INIT;
        Netbroker__TableDeleted td = NETBROKER__TABLE_DELETED__INIT;
        struct nbd_server *s = data;
        size_t k = 0;

        while (k < EVENT_TABLES &&
               !(event_tables[k].family == family && strcmp(event_tables[k].table, table) == 0))
                k++;
        if (k == EVENT_TABLES)
                return;
        td.family = family;
        td.table = (char *)table;
        ev.ev_case = NETBROKER__EVENT__EV_TABLE_DELETED;
        ev.table_deleted = &td;
        m.msg_case = NETBROKER__SERVER_MESSAGE__MSG_EVENT;
        m.event = &ev;
        for (struct conn *c = s->conns; c; c = c->next) {
                struct nbp_frame_out *f;

                if (!conn_hears(c, k))
                        continue;
                if (c->event_out[k]) {
                        nbd_stat_inc(NBD_STAT_EVENTS_COALESCED);
                        continue;
                }
                if (nbp_pack_frame(&m.base, &f) < 0) {
                        nbd_warn("cannot tell pid %d that table %s was deleted: out of memory",
                                 (int)c->peer.pid, table);
                        continue;
                }
                /* Cleared by conn_flush when written, which may be now. */
                c->event_out[k] = f;
                nbd_stat_inc(NBD_STAT_EVENTS_SENT);
                conn_push(c, f);
        }
}

/* What the reply of req may carry of program output: what its Execs can
 * produce (max_reply at most), within what is left of the connection's
 * memory. A client that piles up requests without reading their replies
 * gets truncated output, not a helper that grows. */
static size_t reply_room(const struct conn *c, const Netbroker__Request *req)
{
        const struct nbd_config *cfg = c->srv->cfg;
        size_t want = 0, room;

        for (size_t i = 0; i < req->n_ops && want < cfg->max_reply; i++)
                if (req->ops[i]->op_case == NETBROKER__OP__OP_EXEC)
                        want += 2 * cfg->exec_output_cap;
        if (want > cfg->max_reply)
                want = cfg->max_reply;
        room = c->mem < cfg->max_connection_memory ? cfg->max_connection_memory - c->mem : 0;
        return want < room ? want : room;
}

static void handle_request(struct conn *c, Netbroker__ClientMessage *msg,
                           struct nbp_pb_budget *budget, int *fds, size_t nfds)
{
        Netbroker__Request *req = msg->request;
        struct nbd_job_origin origin;
        struct conn_job *cj;
        int r;

        nbd_stat_inc(NBD_STAT_REQUESTS);
        if (req->n_ops > c->srv->cfg->max_ops) {
                /* One Error, not one result per op: a request of millions of
                 * empty ops must not become a reply of hundreds of MB. */
                nbd_stat_inc(NBD_STAT_REQUESTS_REFUSED);
                conn_fail(c, E2BIG, req->id, "request has %zu ops, over max_ops=%u", req->n_ops,
                          c->srv->cfg->max_ops);
                goto drop;
        }
        if (c->n_jobs >= c->srv->cfg->max_requests_per_connection) {
                nbd_stat_inc(NBD_STAT_REQUESTS_REFUSED);
                reply_all(c, req, EBUSY,
                          "too many requests in flight on this connection "
                          "(max_requests_per_connection)");
                goto drop;
        }
        cj = calloc(1, sizeof(*cj));
        if (!cj) {
                nbd_stat_inc(NBD_STAT_REQUESTS_REFUSED);
                reply_all(c, req, ENOMEM, "out of memory");
                goto drop;
        }
        origin.peer = c->peer;
        origin.reply_budget = reply_room(c, req);
        /* Every result, not only programs' output, within max_reply; what
         * they hold is charged to the connection as they come (job_hold). */
        origin.reply_max = c->srv->cfg->max_reply;
        cj->conn = c;
        cj->mem = budget->used + origin.reply_budget;
        cj->nfds = (unsigned)nfds;
        c->fds_held += cj->nfds;
        if (!nbd_peer_is_root(&c->peer))
                c->srv->fds_held_nonroot += cj->nfds;
        cj->next = c->jobs;
        c->jobs = cj;
        c->n_jobs++;
        c->mem += cj->mem;
        nbd_timer_cancel(c->srv->loop, &c->idle_timer);
        /* cj->job is set before the job runs anything, so a connection that
         * fails while the job runs finds the job to cancel. */
        r = nbd_job_start(&c->srv->dctx, &origin, msg, budget, fds, nfds, &job_owner, cj, &cj->job);
        if (r < 0) {
                c->jobs = cj->next;
                c->n_jobs--;
                c->mem -= cj->mem;
                conn_release_fds(c, cj);
                free(cj);
                nbd_stat_inc(NBD_STAT_REQUESTS_REFUSED);
                reply_all(c, req, -r, "out of memory");
                goto drop;
        }
        conn_update_events(c);
        return;
drop:
        nbp_close_fds(fds, nfds);
        nbp_pb_budget_release(budget);
        free(budget);
}

/* protobuf-c sizes repeated fields from the input, so the decoded tree can
 * be much larger than the frame: an empty FwRule, the largest message a
 * request repeats, is 2 bytes on the wire and a whole struct (with the
 * allocator's size word and the array's pointer) decoded. Allow that
 * multiple, within a hard bound; what is really used is what the job is
 * charged. */
#define DECODE_MULTIPLE ((sizeof(Netbroker__FwRule) + sizeof(size_t) + sizeof(void *) + 1) / 2)

static size_t decode_budget(size_t frame_len)
{
        size_t b = DECODE_MULTIPLE * frame_len + (1u << 20);

        return b > (128u << 20) ? (128u << 20) : b;
}

/* A frame, decoded (msg NULL: it was not a ClientMessage) within budget:
 * handled, taking msg, budget and the fds. */
static void handle_decoded(struct conn *c, Netbroker__ClientMessage *msg,
                           struct nbp_pb_budget *budget, size_t len, int *fds, size_t nfds,
                           bool truncated)
{
        if (!msg) {
                /* Not a bad message when the arena said no: the sender
                 * should be told what to change. */
                bool over = budget->over, oom = budget->oom;
                size_t limit = budget->limit;
                nbd_stat_inc(NBD_STAT_FRAMES_REFUSED);
                nbp_close_fds(fds, nfds);
                nbp_pb_budget_release(budget);
                free(budget);
                if (over)
                        conn_fail(c, E2BIG, 0,
                                  "cannot decode the frame (%zu bytes): it decodes to more than "
                                  "%zu bytes (many small messages: send fewer ops a request)",
                                  len, limit);
                else if (oom)
                        conn_fail(c, ENOMEM, 0,
                                  "cannot decode the frame (%zu bytes): out of memory", len);
                else
                        conn_fail(c, EBADMSG, 0,
                                  "cannot decode the frame (%zu bytes): not a ClientMessage", len);
                return;
        }
        if (!c->hello_done && msg->msg_case != NETBROKER__CLIENT_MESSAGE__MSG_HELLO) {
                conn_fail(c, EPROTO, 0, "the first message must be Hello");
                goto drop;
        }
        switch (msg->msg_case) {
        case NETBROKER__CLIENT_MESSAGE__MSG_HELLO:
                if (c->hello_done)
                        conn_fail(c, EPROTO, 0, "Hello was already exchanged");
                else
                        handle_hello(c, msg->hello);
                goto drop;
        case NETBROKER__CLIENT_MESSAGE__MSG_REQUEST:
                if (truncated && msg->request->n_ops <= c->srv->cfg->max_ops) {
                        /* Close what arrived before answering: once the
                         * client has the reply, the helper holds none of it. */
                        nbp_close_fds(fds, nfds);
                        nbd_stat_inc(NBD_STAT_REQUESTS);
                        nbd_stat_inc(NBD_STAT_REQUESTS_REFUSED);
                        reply_all(c, msg->request, EBADF,
                                  "file descriptors sent with the request were lost (MSG_CTRUNC: "
                                  "more than max_fds_per_frame, or the helper is at its fd limit)");
                        goto drop;
                }
                handle_request(c, msg, budget, fds, nfds);
                return;
        default:
                conn_fail(c, EOPNOTSUPP, 0, "unknown message type");
                goto drop;
        }
drop:
        nbp_close_fds(fds, nfds);
        nbp_pb_budget_release(budget);
        free(budget);
}

/* Frames from this size on are decoded on the decode lane: protobuf-c's
 * unpack of a 4,096-guest FirewallApply (~100,000 rules, ~6 MB) takes
 * hundreds of ms, and the loop serves every other client meanwhile. A
 * Ping or a Stats (tens of bytes) is decoded here, with no thread hop. */
#define DECODE_ON_LANE_MIN (64u << 10)

/* A frame on the decode lane. The closure owns the frame, the fds that came
 * with it and the arena until done() on the loop hands them on (or closes
 * and frees them): exactly one owner for each at any time. The lane
 * touches body, len, budget and msg only. */
struct decode {
        struct nbd_lane_work work;
        struct conn *conn; /* the loop's: NULL once the connection closed */
        uint8_t *body;
        size_t len;
        struct nbp_pb_budget *budget;
        Netbroker__ClientMessage *msg;
        int fds[NBP_FRAME_MAX_FDS];
        size_t nfds;
        bool truncated;
};

/* On the decode lane. The frame is of no use once unpacked (protobuf-c
 * copies what it keeps). */
static void decode_run(void *data)
{
        struct decode *d = data;

        d->msg = netbroker__client_message__unpack(&d->budget->allocator, d->len, d->body);
        free(d->body);
        d->body = NULL;
}

/* On the loop: the decoded frame to its connection, which may be read
 * again; or, with the connection gone, closed and freed. */
static void decode_done(void *data, bool not_run)
{
        struct decode *d = data;
        struct conn *c = d->conn;

        if (c)
                c->decoding = NULL;
        if (!c || not_run || c->closed || c->dead || c->closing) {
                nbp_close_fds(d->fds, d->nfds);
                nbp_pb_budget_release(d->budget);
                free(d->budget);
        } else {
                handle_decoded(c, d->msg, d->budget, d->len, d->fds, d->nfds, d->truncated);
                conn_update_events(c);
        }
        free(d->body);
        free(d);
}

/* Hand the frame to the decode lane: 0, or -errno (the caller still owns
 * everything and decodes here). */
static int decode_on_lane(struct conn *c, uint8_t *body, size_t len, struct nbp_pb_budget *budget,
                          int *fds, size_t nfds, bool truncated)
{
        struct decode *d = calloc(1, sizeof(*d));
        int r;

        if (!d)
                return -ENOMEM;
        *d = (struct decode){.work = {.run = decode_run, .done = decode_done, .data = d},
                             .conn = c,
                             .body = body,
                             .len = len,
                             .budget = budget,
                             .nfds = nfds,
                             .truncated = truncated};
        memcpy(d->fds, fds, nfds * sizeof(*fds));
        r = nbd_lane_submit(nbd_peer_is_root(&c->peer) && c->srv->lane_decode_root
                                    ? c->srv->lane_decode_root
                                    : c->srv->lane_decode,
                            &d->work);
        if (r < 0) {
                free(d);
                return r;
        }
        c->decoding = d;
        conn_update_events(c);
        return 0;
}

/* Takes body (malloc'd) and the fds. */
static void handle_frame(struct conn *c, uint8_t *body, size_t len, int *fds, size_t nfds,
                         bool truncated)
{
        struct nbp_pb_budget *budget = malloc(sizeof(*budget));
        Netbroker__ClientMessage *msg;

        if (!budget) {
                free(body);
                nbp_close_fds(fds, nfds);
                conn_fail(c, ENOMEM, 0, "out of memory");
                return;
        }
        nbp_pb_budget_init(budget, decode_budget(len));
        if (len >= DECODE_ON_LANE_MIN && c->srv->lane_decode &&
            decode_on_lane(c, body, len, budget, fds, nfds, truncated) == 0)
                return;
        msg = netbroker__client_message__unpack(&budget->allocator, len, body);
        free(body);
        handle_decoded(c, msg, budget, len, fds, nfds, truncated);
}

/* ---- input ---- */

/* A request's fds that are not network namespaces (the only kind an op
 * takes: VethCreate's peer_netns_fd) go to the closer at once, and their
 * places read NBD_FD_NOT_NETNS (ops.h): from here on, every fd of the
 * request the loop closes is an nsfs file, whose close costs nothing.
 * statx() asks for no fresh attributes (AT_STATX_DONT_SYNC), so a FUSE or
 * NFS file's server is not asked either; an ioctl could be (FUSE forwards
 * them). */
static bool is_netns(const struct nbd_server *s, int fd)
{
        struct statx st;

        return s->nsfs_dev &&
               statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &st) == 0 &&
               makedev(st.stx_dev_major, st.stx_dev_minor) == s->nsfs_dev;
}

static void conn_sort_fds(struct conn *c, int *fds, size_t nfds)
{
        for (size_t i = 0; i < nfds; i++) {
                if (fds[i] < 0 || is_netns(c->srv, fds[i]))
                        continue;
                nbd_closer_give(c->srv->closer, c->peer.uid, fds[i]);
                fds[i] = NBD_FD_NOT_NETNS;
        }
}

/* The reader's fds it lets go (over max_fds, a frame cut short): sorted
 * as above. */
static void conn_drop_fd(void *data, int fd)
{
        struct conn *c = data;

        if (is_netns(c->srv, fd))
                close(fd);
        else
                nbd_closer_give(c->srv->closer, c->peer.uid, fd);
}

/* /proc/self/fdinfo of a unix socket: "scm_fds: N", the fds queued in
 * it (Linux 5.7+). 0 or -errno. */
static int queued_fds(int fd, unsigned *ret)
{
        char path[64], buf[512];
        const char *p;
        ssize_t n;
        int f;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        f = open(path, O_RDONLY | O_CLOEXEC);
        if (f < 0)
                return -errno;
        n = read(f, buf, sizeof(buf) - 1);
        close(f);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = '\0';
        p = strstr(buf, "scm_fds:");
        if (!p)
                return -EOPNOTSUPP;
        *ret = (unsigned)strtoul(p + 8, NULL, 10);
        return 0;
}

/* The helper's open descriptors: /proc/self/fd's entries. 0 or -errno. */
static int open_fds(unsigned *ret)
{
        DIR *d = opendir("/proc/self/fd");
        unsigned n = 0;
        struct dirent *e;

        if (!d)
                return -errno;
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        /* Less the directory's own. */
        *ret = n ? n - 1 : 0;
        return 0;
}

/* The frame reader's fds_fit (frame.h) for a non-root connection whose
 * next read brings fds (rare: a veth peer's namespace): every fd queued
 * in its socket must fit one read and the descriptors free under
 * fd_limit, else the kernel would release the surplus in the loop's
 * recvmsg(), at the cost its sender chose. What cannot be read is
 * refused: the socket, its queue with it, goes to the closer. */
static int conn_fds_fit(void *data, int fd)
{
        struct conn *c = data;
        unsigned queued = 0, n_open = 0;

        if (queued_fds(fd, &queued) < 0 || open_fds(&n_open) < 0)
                return -ETOOMANYREFS;
        if (queued > NBP_FRAME_MAX_FDS || n_open + queued > c->srv->cfg->fd_limit)
                return -ETOOMANYREFS;
        return 0;
}

static void on_frame_timeout(void *data)
{
        struct conn *c = data;

        conn_fail(c, ETIMEDOUT, 0, "a frame was left half-sent for more than %u ms",
                  c->srv->cfg->frame_timeout_ms);
}

static void on_hello_timeout(void *data)
{
        struct conn *c = data;

        conn_fail(c, ETIMEDOUT, 0, "no Hello within %u ms (hello_timeout_ms)",
                  c->srv->cfg->hello_timeout_ms);
}

static void on_idle_timeout(void *data)
{
        struct conn *c = data;

        conn_fail(c, ETIMEDOUT, 0, "idle for more than %u ms", c->srv->cfg->idle_timeout_ms);
}

static void conn_arm_idle(struct conn *c)
{
        if (c->srv->cfg->idle_timeout_ms && c->n_jobs == 0 && !c->closing && !c->closed && !c->dead)
                nbd_timer_arm(c->srv->loop, &c->idle_timer, c->srv->cfg->idle_timeout_ms,
                              on_idle_timeout, c);
}

static void conn_read(struct conn *c)
{
        uint64_t start = nbd_now_us();

        /* Output waiting ends the round (see conn_update_events); one frame
         * is still read, so a hang-up reported meanwhile reaches its EOF. */
        for (int i = 0;
             i < FRAMES_PER_WAKEUP && !c->closing && !c->closed && !c->dead && !c->decoding &&
             (i == 0 ||
              (!c->out_head && nbd_now_us() - start < WAKEUP_BUDGET_US && conn_may_read(c)));
             i++) {
                int fds[NBP_FRAME_MAX_FDS];
                uint8_t *body;
                size_t len, nfds;
                bool truncated;
                int r = nbp_frame_read(c->fd, &c->rd);

                if (!conn_count_partial_fds(c)) {
                        nbd_stat_inc(NBD_STAT_FRAMES_REFUSED);
                        conn_fail(c, EMFILE, 0,
                                  "the fds of frames sent by uids other than root would be over "
                                  "their share (fd_limit / 8: %u)",
                                  c->srv->cfg->fd_limit / 8);
                        return;
                }
                if (r == 0) {
                        if (nbp_frame_reader_busy(&c->rd) && !c->frame_timer.deadline_ms)
                                nbd_timer_arm(c->srv->loop, &c->frame_timer,
                                              c->srv->cfg->frame_timeout_ms, on_frame_timeout, c);
                        return;
                }
                if (r == -EMSGSIZE) {
                        nbd_stat_inc(NBD_STAT_FRAMES_REFUSED);
                        conn_fail(c, EMSGSIZE, 0, "frame of %zu bytes is over the cap of %zu bytes",
                                  c->rd.oversize, c->srv->cfg->max_frame);
                        return;
                }
                if (r == -ETOOMANYREFS) {
                        /* Seen by the peek (frame.h): the message stays in
                         * the socket, whose close, the closer's, releases
                         * its fds. */
                        nbd_stat_inc(NBD_STAT_FRAMES_REFUSED);
                        conn_fail(c, ETOOMANYREFS, 0,
                                  "a message carried more file descriptors than one read takes "
                                  "(%d) or than the helper has room for (fd_limit=%u)",
                                  NBP_FRAME_MAX_FDS, c->srv->cfg->fd_limit);
                        return;
                }
                if (r < 0) {
                        if (r != -EPIPE)
                                nbd_debug("connection of pid %d: %s", (int)c->peer.pid,
                                          strerror(-r));
                        conn_close(c);
                        return;
                }
                nbd_timer_cancel(c->srv->loop, &c->frame_timer);
                nbp_frame_reader_take(&c->rd, &body, &len, fds, &nfds, &truncated);
                conn_sort_fds(c, fds, nfds);
                /* Taken: the request's own count (handle_request) has them. */
                conn_count_partial_fds(c);
                handle_frame(c, body, len, fds, nfds, truncated);
        }
}

static void on_conn_event(struct nbd_watch *w, uint32_t events)
{
        struct conn *c = w->data;

        if (events & EPOLLOUT)
                conn_flush(c);
        if (c->closed || c->dead)
                return;
        /* Hung up (the peer closed: no reply reaches it) while a frame of
         * it is on the decode lane: what it sent after is not read. The
         * round below reads one frame to find the end, which would start
         * a request out of its turn and leave the decode's pointer to the
         * connection behind when it closes (a use-after-free). */
        if ((events & (EPOLLHUP | EPOLLERR)) && c->decoding) {
                conn_close(c);
                return;
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                conn_read(c);
}

/* ---- connection life ---- */

static void free_conn(void *p)
{
        free(p);
}

static void on_close_timer(void *data)
{
        conn_close(data);
}

/* The socket is of no more use. A job may be running right now (its fds'
 * send failed): it must not be cancelled under its own feet, so the
 * connection stops reading and writing here and closes from the loop. */
static void conn_close_later(struct conn *c)
{
        if (c->closed || c->dead)
                return;
        c->dead = true;
        nbd_loop_modify(c->srv->loop, &c->w, 0);
        c->events = 0;
        nbd_timer_cancel(c->srv->loop, &c->frame_timer);
        nbd_timer_cancel(c->srv->loop, &c->idle_timer);
        nbd_timer_cancel(c->srv->loop, &c->retry_timer);
        nbd_timer_cancel(c->srv->loop, &c->hello_timer);
        nbd_timer_arm(c->srv->loop, &c->close_timer, 0, on_close_timer, c);
}

/* The connection is gone for good: its socket closed, its uid's count of
 * connections and fds let go. */
static void conn_forget(struct conn *c)
{
        struct nbd_server *s = c->srv;
        struct uid_fds *u = c->uid_fds;

        if (!c->no_rights && !c->adopted && !s->stopping && u && !closer_has_room(s, c->peer.uid)) {
                if (c->draining)
                        s->n_draining--;
                c->draining = false;
                if (!c->parked)
                        s->n_parked++;
                c->parked = true;
                return;
        }
        if (c->parked)
                s->n_parked--;
        c->parked = false;
        /* Fds it sent may still wait in its socket: their release is the
         * socket's, and could wait as long as their sender likes. Root's,
         * like the socketpair's, cost what root makes them cost. */
        if (c->no_rights || c->adopted || nbd_peer_is_root(&c->peer))
                close(c->fd);
        else
                nbd_closer_give(s->closer, c->peer.uid, c->fd);
        LIST_REMOVE(&s->conns, c);
        s->n_conns--;
        if (c->draining)
                s->n_draining--;
        if (u) {
                s->n_conns_nonroot--;
                conn_fds_drop(c, c->fds_in_flight);
                c->fds_in_flight = 0;
                conn_uid_fds_put(s, c);
        }
        nbd_debug("connection of pid %d closed", (int)c->peer.pid);
        nbd_loop_defer_free(s->loop, free_conn, c);
}

/* Only from the loop (an event or a timer of this connection), or at
 * shutdown: never while a job of the connection is on the stack.
 *
 * The fds sent to a client and not yet read stay in its socket's receive
 * queue after the helper closes its end, and the kernel counts them as
 * the helper's in flight until the client reads them or closes: forgotten,
 * they let other uids' fds past the share, up to the helper's fd limit,
 * where root's could not be sent any more. So a non-root connection
 * closed with fds in its client's queue is shut down (the client reads
 * what is queued, then end of file) and kept, draining: it holds those
 * fds in its uid's share and counts as a connection of its uid, until the
 * poll sees its queue empty. For as long as the client neither reads nor
 * closes: closing the helper's end would free nothing. */
static void conn_close(struct conn *c)
{
        struct nbd_server *s = c->srv;
        bool nonroot = c->uid_fds != NULL;

        if (c->closed) {
                if ((c->draining || c->parked) && s->stopping)
                        conn_forget(c);
                return;
        }
        c->closed = true;
        /* A frame of it on the decode lane is dropped when it comes back. */
        if (c->decoding)
                c->decoding->conn = NULL;
        c->decoding = NULL;
        conn_fds_wait_clear(c);
        while (c->jobs) {
                struct conn_job *cj = c->jobs;
                c->jobs = cj->next;
                if (!cj->finished)
                        nbd_job_cancel(cj->job);
                cj->fds_wanted = 0;
                cj_fds_unreserve(cj, cj->fds_reserved);
                if (!nbd_peer_is_root(&c->peer))
                        s->fds_held_nonroot -= cj->nfds;
                nbd_loop_defer_free(s->loop, free_conn_job, cj);
        }
        c->fds_held = 0;
        nbd_timer_cancel(s->loop, &c->frame_timer);
        nbd_timer_cancel(s->loop, &c->idle_timer);
        nbd_timer_cancel(s->loop, &c->retry_timer);
        nbd_timer_cancel(s->loop, &c->close_timer);
        nbd_timer_cancel(s->loop, &c->hello_timer);
        nbd_loop_remove(s->loop, &c->w);
        nbp_frame_reader_reset(&c->rd);
        conn_count_partial_fds(c);
        while (c->out_head) {
                struct nbp_frame_out *f = c->out_head;
                c->out_head = f->next;
                nbp_frame_out_free(f);
        }
        memset(c->event_out, 0, sizeof(c->event_out));
        conn_fds_drop(c, c->fds_queued);
        c->fds_queued = 0;
        c->out_tail = NULL;
        if (nonroot)
                conn_fds_refresh(c);
        if (nonroot && c->fds_in_flight && !s->stopping) {
                shutdown(c->fd, SHUT_RDWR);
                c->draining = true;
                s->n_draining++;
                nbd_debug("connection of pid %d closed; %u fds still in its queue",
                          (int)c->peer.pid, c->fds_in_flight);
        }
        if (!c->draining)
                conn_forget(c);
        if (nonroot) {
                /* Room it held is free for the others. */
                for (struct conn *o = s->conns; o; o = o->next)
                        conn_update_events(o);
                fds_kick(s);
        }
}

static unsigned conns_of_uid(const struct nbd_server *s, uid_t uid)
{
        unsigned n = 0;

        for (const struct conn *c = s->conns; c; c = c->next)
                n += c->peer.uid == uid;
        return n;
}

/* c's uid's count, made for its first connection; c is counted in it. */
static int conn_uid_fds(struct nbd_server *s, struct conn *c)
{
        struct uid_fds *u = s->uids;

        while (u && u->uid != c->peer.uid)
                u = u->next;
        if (!u) {
                u = calloc(1, sizeof(*u));
                if (!u)
                        return -ENOMEM;
                u->uid = c->peer.uid;
                u->next = s->uids;
                s->uids = u;
        }
        u->conns++;
        c->uid_fds = u;
        return 0;
}

/* Undoes conn_uid_fds() for a connection never added. */
static void conn_uid_fds_put(struct nbd_server *s, struct conn *c)
{
        struct uid_fds *u = c->uid_fds;

        if (u && !--u->conns) {
                LIST_REMOVE(&s->uids, u);
                free(u);
        }
        c->uid_fds = NULL;
}

/* SO_PASSRIGHTS (Linux 6.16): whether the peer's fds are taken at all.
 * The listeners refuse them (the kernel copies that to each connection,
 * the not yet accepted ones too: their sender gets EPERM), so a refused
 * peer can leave none in its connection. An admitted one gets them back
 * while the closer has room for its uid: a caller without netns = own is
 * then told by validation why its fd is of no use (refused here, it would
 * only see its own sendmsg() fail with EPERM, and libnetbroker its
 * connection lost). One admitted while the closer holds its uid's share
 * cannot send fds on that connection, so its connections that end cannot
 * grow what the closer holds past the share by more than one socket each.
 * Not on the socketpair: its peer started the helper.
 *
 * What no closer helps with: a sender that puts more fds in one message
 * than a frame takes (max_fds_per_frame) or than the fd limit leaves room
 * for makes the kernel release the surplus inside recvmsg(), on the
 * loop's thread (README, the hostile-client item). */
#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83
#endif

static void conn_allow_rights(struct conn *c)
{
        int on = 1;

        if (!nbd_peer_is_root(&c->peer) && !closer_has_room(c->srv, c->peer.uid))
                return;
        if (setsockopt(c->fd, SOL_SOCKET, SO_PASSRIGHTS, &on, sizeof(on)) == 0)
                c->no_rights = false;
}

/* Takes ownership of fd. The peer's identity comes from the kernel only. */
static int conn_new(struct nbd_server *s, int fd, bool no_rights, bool adopted)
{
        struct nbd_peer peer;
        struct conn *c;
        int r;

        r = nbd_peer_from_socket(fd, &peer);
        if (r < 0) {
                nbd_warn("cannot identify a peer (%s): refused", strerror(-r));
                nbd_stat_inc(NBD_STAT_CONNECTIONS_REFUSED);
                close(fd);
                return r;
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->srv = s;
        c->fd = fd;
        c->peer = peer;
        c->no_rights = no_rights;
        c->adopted = adopted;
        if (!nbd_peer_is_root(&peer) && (r = conn_uid_fds(s, c)) < 0) {
                close(fd);
                free(c);
                return r;
        }
        nbp_frame_reader_init(&c->rd, s->cfg->max_frame, s->cfg->max_fds_per_frame);
        c->rd.drop_fd = conn_drop_fd;
        c->rd.drop_data = c;
        /* A surplus of fds in one message is seen before it is read: its
         * release would be the kernel's, in recvmsg(), on the loop. Root's,
         * like the socketpair's, cost what their sender makes them cost. */
        if (!adopted && !nbd_peer_is_root(&peer))
                c->rd.fds_fit = conn_fds_fit;
        c->events = EPOLLIN;
        r = nbd_loop_add(s->loop, &c->w, fd, EPOLLIN, on_conn_event, c);
        if (r < 0) {
                conn_uid_fds_put(s, c);
                close(fd);
                free(c);
                return r;
        }
        c->next = s->conns;
        s->conns = c;
        s->n_conns++;
        if (!nbd_peer_is_root(&peer))
                s->n_conns_nonroot++;
        if (!nbd_config_peer_allowed(s->cfg, &peer)) {
                nbd_stat_inc(NBD_STAT_CONNECTIONS_REFUSED);
                conn_fail(c, EACCES, 0, "uid %u gid %u is not allowed to use netbrokerd",
                          (unsigned)peer.uid, (unsigned)peer.gid);
                return -EACCES;
        }
        if (s->n_conns > s->cfg->max_connections) {
                nbd_stat_inc(NBD_STAT_CONNECTIONS_REFUSED);
                conn_fail(c, EUSERS, 0, "too many connections (max_connections=%u)",
                          s->cfg->max_connections);
                return -EUSERS;
        }
        if (!nbd_peer_is_root(&peer) &&
            s->n_conns_nonroot > s->cfg->max_connections - s->cfg->root_reserved_connections) {
                nbd_stat_inc(NBD_STAT_CONNECTIONS_REFUSED);
                conn_fail(c, EUSERS, 0,
                          "no connection free for uid %u: %u of max_connections=%u are kept for "
                          "root (root_reserved_connections)",
                          (unsigned)peer.uid, s->cfg->root_reserved_connections,
                          s->cfg->max_connections);
                return -EUSERS;
        }
        if (conns_of_uid(s, peer.uid) > s->cfg->max_connections_per_uid) {
                nbd_stat_inc(NBD_STAT_CONNECTIONS_REFUSED);
                conn_fail(c, EUSERS, 0,
                          "too many connections for uid %u (max_connections_per_uid=%u)",
                          (unsigned)peer.uid, s->cfg->max_connections_per_uid);
                return -EUSERS;
        }
        if (c->no_rights)
                conn_allow_rights(c);
        nbd_stat_inc(NBD_STAT_CONNECTIONS);
        nbd_debug("connection from pid %d uid %u", (int)c->peer.pid, (unsigned)c->peer.uid);
        nbd_timer_arm(s->loop, &c->hello_timer, s->cfg->hello_timeout_ms, on_hello_timeout, c);
        conn_arm_idle(c);
        return 0;
}

static void on_accept(struct nbd_watch *w, uint32_t events);

/* Asked of the socket itself: one that was queued before the listener
 * refused fds (systemd's, while no helper ran) still takes them. */
static bool rights_off(int fd)
{
        int v = 1;
        socklen_t len = sizeof(v);

        return getsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &v, &len) == 0 && v == 0;
}

static void resume_accept(void *data)
{
        struct nbd_server *s = data;

        for (size_t i = 0; i < s->n_listeners; i++)
                nbd_loop_modify(s->loop, &s->listeners[i], EPOLLIN);
}

static void on_accept(struct nbd_watch *w, uint32_t events)
{
        struct nbd_server *s = w->data;
        int fd;

        (void)events;
        fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
                conn_new(s, fd, rights_off(fd), false);
                return;
        }
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of fds: stop accepting for a moment instead of spinning
                 * on a listener that stays readable. */
                nbd_warn("accept: %s; pausing for 100 ms", strerror(errno));
                for (size_t i = 0; i < s->n_listeners; i++)
                        nbd_loop_modify(s->loop, &s->listeners[i], 0);
                nbd_timer_arm(s->loop, &s->accept_pause, 100, resume_accept, s);
        }
}

int nbd_server_add_listener(struct nbd_server *s, int fd)
{
        int off = 0;

        if (s->n_listeners >= MAX_LISTENERS)
                return -EMFILE;
#ifdef NB_TEST_HOOKS
        /* The older kernels' path, on a kernel that has the option. */
        if (!getenv("NETBROKERD_TEST_NO_PASSRIGHTS"))
#endif
                /* Older kernels (Debian 12's 6.1) say ENOPROTOOPT: every
                 * peer's fds are then taken, and the closer closes them. */
                (void)setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &off, sizeof(off));
        int r = nbd_loop_add(s->loop, &s->listeners[s->n_listeners], fd, EPOLLIN, on_accept, s);
        if (r < 0)
                return r;
        s->n_listeners++;
        return 0;
}

int nbd_server_adopt(struct nbd_server *s, int fd)
{
        int type;
        socklen_t len = sizeof(type);

        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
                return -errno;
        if (type != SOCK_STREAM)
                return -ESOCKTNOSUPPORT;
        /* A refused peer is told why and then closed; that is not an error
         * of the helper's own. */
        conn_new(s, fd, false, true);
        return 0;
}

bool nbd_server_done(const struct nbd_server *s)
{
        /* Draining connections wait for nothing of the helper's. */
        return s->n_listeners == 0 && s->n_conns == s->n_draining + s->n_parked;
}

unsigned nbd_server_closing(const struct nbd_server *s)
{
        return nbd_closer_pending_all(s->closer);
}

void nbd_server_shutdown(struct nbd_server *s)
{
        for (size_t i = 0; i < s->n_listeners; i++) {
                int fd = s->listeners[i].fd;
                nbd_loop_remove(s->loop, &s->listeners[i]);
                close(fd);
        }
        s->n_listeners = 0;
        s->stopping = true;
        nbd_timer_cancel(s->loop, &s->accept_pause);
        while (s->conns)
                conn_close(s->conns);
}

/* The closer closed some: the readers it held back, and the connections
 * parked for its room, may go on. */
static void server_closed_some(void *data)
{
        struct nbd_server *s = data;

        for (struct conn *c = s->conns, *next; c; c = next) {
                next = c->next;
                if (c->parked)
                        conn_forget(c);
                else
                        conn_update_events(c);
        }
}

/* nsfs's device, from a network namespace fd any socket gives
 * (SIOCGSKNS): no /proc needed. 0 if not known: then no fd is taken. */
static dev_t nsfs_dev(void)
{
        struct statx st;
        dev_t dev = 0;
        int sk, ns;

        sk = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (sk < 0)
                return 0;
        ns = ioctl(sk, SIOCGSKNS);
        if (ns >= 0 && statx(ns, "", AT_EMPTY_PATH, STATX_TYPE, &st) == 0)
                dev = makedev(st.stx_dev_major, st.stx_dev_minor);
        if (ns >= 0)
                close(ns);
        close(sk);
        return dev;
}

int nbd_server_new(const struct nbd_config *cfg, struct nbd_loop *loop,
                   const struct nbd_backend *be, struct nbd_links *links, struct nbd_fw *fw,
                   struct nbd_fw_gone *fw_gone, struct nbd_bw *bw, struct nbd_server **ret)
{
        struct nbd_server *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        s->cfg = cfg;
        s->loop = loop;
        s->dctx.cfg = cfg;
        s->dctx.loop = loop;
        s->dctx.trim_timer = &s->trim_timer;
        s->dctx.be = be;
        s->dctx.links = links;
        s->dctx.fw = fw;
        s->dctx.fw_gone = fw_gone;
        s->dctx.bw = bw;
        r = nbd_closer_new(loop, cfg->fd_limit, server_closed_some, s, &s->closer);
        if (r < 0) {
                free(s);
                return r;
        }
        s->nsfs_dev = nsfs_dev();
        if (fw)
                be->fw.on_table_deleted(fw, server_table_deleted, s);
        *ret = s;
        return 0;
}

void nbd_server_free(struct nbd_server *s)
{
        if (!s)
                return;
        if (s->dctx.fw)
                s->dctx.be->fw.on_table_deleted(s->dctx.fw, NULL, NULL);
        nbd_server_shutdown(s);
        nbd_timer_cancel(s->dctx.loop, &s->trim_timer);
        nbd_timer_cancel(s->loop, &s->fds_timer);
        nbd_closer_free(s->closer);
        free(s);
}

int nbd_server_on_job_end(struct nbd_server *s, void (*fn)(void *data), void *data)
{
        return nbd_dispatch_on_job_end(&s->dctx, fn, data);
}

const struct nbd_dispatch_ctx *nbd_server_dispatch_ctx(const struct nbd_server *s)
{
        return &s->dctx;
}

/* Every reader of the configuration reads it through s->cfg or the
 * dispatch context at the moment it decides, and none keeps a pointer
 * into it across a return to the loop (the lanes' threads read none), so
 * the old one may be freed as soon as this returns. */
void nbd_server_set_config(struct nbd_server *s, const struct nbd_config *cfg)
{
        s->cfg = cfg;
        s->dctx.cfg = cfg;
}

void nbd_server_set_lanes(struct nbd_server *s, struct nbd_lane *fw, struct nbd_lane *links)
{
        nbd_dispatch_set_lanes(&s->dctx, fw, links);
}

void nbd_server_set_decode_lanes(struct nbd_server *s, struct nbd_lane *decode,
                                 struct nbd_lane *decode_root)
{
        s->lane_decode = decode;
        s->lane_decode_root = decode_root;
}
