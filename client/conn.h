// SPDX-License-Identifier: LGPL-2.1-or-later
/* Private to libnetbroker: a connection and its requests, shared by
 * client.c (making the connection: spawn or connect, Hello) and requests.c
 * (the requests on it: sending, reading, deadlines, callbacks). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"
#include "internal.h"

/* One request in flight. A synchronous one lives on its caller's stack
 * (cb == NULL) and its caller waits for `done`; an asynchronous one is
 * malloc'd, and once done it waits on `completed` for nb_conn_dispatch()
 * to run its callback. */
struct request {
        uint64_t id;
        unsigned gen;
        int64_t deadline; /* CLOCK_MONOTONIC ns; NO_DEADLINE: none */
        size_t n_ops;
        nb_callback cb;
        void *opaque;
        bool done;
        int err;
        Netbroker__ServerMessage *msg;
        int *fds; /* from Fds frames, in arrival order */
        size_t nfds, cap;
        bool lost_fds; /* an Fds frame could not be kept */
        struct request *next;
};

#define NO_DEADLINE INT64_MAX

/* An event received, waiting for nb_conn_dispatch() (events.c). */
struct conn_event {
        nb_event_kind kind;
        uint32_t family;
        char table[64];
        struct conn_event *next;
};

struct nb_conn {
        pthread_mutex_t lock; /* everything below; socket I/O is non-blocking under it */
        pthread_cond_t cond; /* CLOCK_MONOTONIC: a request is done, or the poller left */
        int fd; /* the socket, O_NONBLOCK once Hello is done */
        pid_t pid;
        /* The spawned helper's pidfd (-1: none, or a kernel before 5.3):
         * what it is signalled and reaped through, so that a pid recycled
         * after a daemon's own SIGCHLD reaper took it is never signalled. */
        int pidfd;
        /* The Hello's bound when the caller gives none (ms, <= 0: none). */
        int hello_timeout_ms;
        unsigned gen;
        bool broken;
        bool polling; /* a synchronous caller is in poll() on fd */
        /* getpid() of the nb_spawn()/nb_connect() that made it: a child of
         * fork() shares the socket, the helper and the epoll set, and may
         * only nb_close() its copy (conn_check_owner). */
        pid_t owner;
        /* nb_close() was called: nothing more is sent, a second call does
         * nothing. Called from a callback (in_callbacks > 0), the close is
         * finished by the nb_conn_dispatch() running it, once its
         * callbacks are done: the connection must outlive them. */
        bool closing;
        unsigned in_callbacks; /* nb_conn_dispatch()es and nb_close()s running callbacks */
        uint64_t next_id;
        struct request *pending; /* sent or queued, awaiting the reply */
        struct request *completed, **completed_tail; /* async, callback not yet run */
        struct nbp_frame_out *out, **out_tail; /* frames the socket did not take yet */
        int epfd; /* nb_conn_fd(): fd (while connected) and notify_fd */
        bool fd_in_epoll;
        uint32_t fd_events;
        int notify_fd; /* eventfd: callbacks are waiting for nb_conn_dispatch() */
        int wake_fd; /* eventfd: wakes the synchronous poller (output queued) */
        struct nbp_frame_reader rd;
        /* how to get a new connection */
        char *helper_path, *config_path, *log_level, *socket_path;
        char **features;
        size_t n_features;
        uint32_t max_frame, max_ops, max_fds; /* the helper's limits, from Hello (0: unknown) */
        bool hello_fds_known;
        /* The rest of Hello (nb_conn_limit, nb_conn_helper_version): 0 is
         * "not announced". */
        uint64_t limits[NB_LIMIT_EXEC_ARGS + 1];
        unsigned helper_version;
        bool helper_version_known;
        bool helper_events; /* its Hello said it sends Events */
        nb_event_callback event_cb; /* nb_conn_on_event()'s */
        void *event_opaque;
        struct conn_event *events, **events_tail; /* not yet delivered */
        char error[512];
};

/* client.c */
int64_t conn_now_ns(void);
void conn_set_error(nb_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0, or -ECHILD in another process than the connection's (a child of
 * fork()): then nothing may touch the socket, the helper, the eventfds,
 * the epoll set or the lock, all possibly in use by the parent. */
int conn_check_owner(nb_conn *c);
/* Call back what is left (conn_finish_all) and free c. Returns how many
 * callbacks ran. */
int conn_close_finish(nb_conn *c);
/* Pack m with copies of fds (borrowed), which go with the frame's first byte. */
int conn_pack_msg_fds(const ProtobufCMessage *m, const int *fds, size_t nfds,
                      struct nbp_frame_out **ret);
/* Read one ServerMessage: 1 with *ret and the fds (the caller's), 0 when
 * the socket has no whole frame yet, or -errno. */
int conn_recv_msg(nb_conn *c, Netbroker__ServerMessage **ret, int *fds, size_t *nfds);
/* Reap our helper (block: wait for it), describing how it ended. */
void conn_reap_helper(nb_conn *c, bool block);
/* SIGKILL our helper (a stopped one does not exit on EOF), through its
 * pidfd when it has one. */
void conn_kill_helper(nb_conn *c);
/* Take the socket out of the epoll set. */
void conn_epoll_forget(nb_conn *c);
/* With lock held and no synchronous poller: make a working connection,
 * its Hello done by `deadline` (CLOCK_MONOTONIC ns, or NO_DEADLINE). */
int conn_establish(nb_conn *c, int64_t deadline);

/* events.c */
/* Lock held: keep ev for the callback (dropped without one, or while one
 * of the same table waits); wakes nb_conn_fd(). */
void conn_event_file(nb_conn *c, const Netbroker__Event *ev);
/* No lock held: run the callback for the events received so far. Returns
 * how many ran. */
int conn_events_run(nb_conn *c);
/* nb_close(): drop what was not delivered. */
void conn_events_free(nb_conn *c);
/* requests.c's eventfd wake-up of nb_conn_fd(). */
void conn_notify(nb_conn *c);

/* requests.c */
/* Lock held: the socket is in the epoll set, with write interest exactly
 * while output is queued. */
void conn_epoll_sync(nb_conn *c);
/* nb_close(): every request not yet called back is, pending ones with
 * -ECANCELED. Returns how many. */
int conn_finish_all(nb_conn *c);
/* nb_close() in a child of fork(): free the parent's requests' memory and
 * close our copies of their fds, without calling anyone back. */
void conn_drop_requests(nb_conn *c);
/* nb_close(): true when the caller closes now; false when the close was
 * begun already, or is left to the nb_conn_dispatch() whose callback
 * called nb_close(). */
bool conn_close_begin(nb_conn *c);
