// SPDX-License-Identifier: LGPL-2.1-or-later
/* Connections: spawning or connecting, Hello, and the requests on them,
 * waited for (nb_submit, nb_submit_timeout) or called back from the
 * caller's event loop (nb_submit_async, nb_conn_dispatch).
 *
 * There is no library thread. After Hello the socket is non-blocking and
 * all its I/O is done under the connection's lock by whoever comes by (see
 * "requests" below). A broken connection fails every request in flight at
 * once; the next submit builds a new connection (a new generation). A
 * request past its deadline breaks the connection too: the helper is
 * taken as stuck. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

/* Replies can carry program output of many ops: trust the helper more than
 * the helper trusts us, but not without bound. */
#define CLIENT_FRAME_CAP (1024u * 1024 * 1024)
#define HELPER_FD 3

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

struct nb_conn {
        pthread_mutex_t lock; /* everything below; socket I/O is non-blocking under it */
        pthread_cond_t cond; /* CLOCK_MONOTONIC: a request is done, or the poller left */
        int fd; /* the socket, O_NONBLOCK once Hello is done */
        pid_t pid;
        unsigned gen;
        bool broken;
        bool polling; /* a synchronous caller is in poll() on fd */
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
        char error[512];
};

static int64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void set_error(nb_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(nb_conn *c, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(c->error, sizeof(c->error), fmt, ap);
        va_end(ap);
}

static void free_features(nb_conn *c)
{
        for (size_t i = 0; i < c->n_features; i++)
                free(c->features[i]);
        free(c->features);
        c->features = NULL;
        c->n_features = 0;
}

/* ---- blocking frame I/O ---- */

/* Pack m with copies of fds (borrowed), which go with the frame's first
 * byte. */
static int pack_msg_fds(const ProtobufCMessage *m, const int *fds, size_t nfds,
                        struct nbp_frame_out **ret)
{
        struct nbp_frame_out *f;
        int r = nbp_pack_frame(m, &f);

        if (r < 0)
                return r;
        for (size_t i = 0; i < nfds && i < NBP_FRAME_MAX_FDS; i++) {
                f->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (f->fds[i] < 0) {
                        r = -errno;
                        nbp_frame_out_free(f);
                        return r;
                }
                f->nfds++;
        }
        *ret = f;
        return 0;
}

/* Hello is the one blocking exchange: the socket is blocking with
 * SO_SNDTIMEO/SO_RCVTIMEO at the caller's deadline then, so "would block"
 * means the time is up. */
static int send_msg(int fd, const ProtobufCMessage *m)
{
        struct nbp_frame_out *f;
        int r = nbp_pack_frame(m, &f);

        if (r < 0)
                return r;
        r = nbp_frame_write(fd, f);
        nbp_frame_out_free(f);
        return r < 0 ? r : r == 0 ? -ETIMEDOUT : 0;
}

/* Read one ServerMessage: 1 with *ret and the fds (the caller's), 0 when
 * the socket has no whole frame yet, or -errno. */
static int recv_msg(nb_conn *c, Netbroker__ServerMessage **ret, int *fds, size_t *nfds)
{
        uint8_t *body;
        size_t len;
        bool truncated;
        int r = nbp_frame_read(c->fd, &c->rd);

        if (r <= 0) {
                if (r < 0)
                        nbp_frame_reader_reset(&c->rd);
                return r;
        }
        nbp_frame_reader_take(&c->rd, &body, &len, fds, nfds, &truncated);
        *ret = netbroker__server_message__unpack(NULL, len, body);
        free(body);
        if (!*ret) {
                nbp_close_fds(fds, *nfds);
                return -EBADMSG;
        }
        if (truncated) {
                /* We could not take every fd the helper sent. */
                netbroker__server_message__free_unpacked(*ret, NULL);
                nbp_close_fds(fds, *nfds);
                return -EBADF;
        }
        return 1;
}

/* ---- establishing ---- */

static const char *const client_features[] = {
        "ping",
        "stats",
        "exec",
        "tap_create",
        "macvtap_create",
        "macvlan_create",
        "veth_create",
        "bridge_create",
        "link_set",
        "link_delete",
        "names_dump",
        "firewall_apply",
        "firewall_remove",
        "firewall_list",
        "bandwidth_set",
        "bandwidth_clear",
};

static int hello(nb_conn *c)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Hello h = NETBROKER__HELLO__INIT;
        Netbroker__ServerMessage *reply = NULL;
        int fds[NBP_FRAME_MAX_FDS];
        size_t nfds = 0;
        int r;

        h.version = NBP_PROTOCOL_VERSION;
        h.n_features = sizeof(client_features) / sizeof(*client_features);
        h.features = (char **)client_features;
        h.software = (char *)"libnetbroker " NB_VERSION;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_HELLO;
        m.hello = &h;
        /* A helper that refuses us says why and closes at once, possibly
         * before it read our Hello: even when the send fails, its Error may
         * be waiting to be read. */
        r = send_msg(c->fd, &m.base);
        int rr = recv_msg(c, &reply, fds, &nfds);
        if (rr == 0)
                rr = -ETIMEDOUT;
        if (rr < 0) {
                r = r < 0 ? r : rr;
                return r == -EPIPE ? -ECONNRESET : r;
        }
        nbp_close_fds(fds, nfds);
        switch (reply->msg_case) {
        case NETBROKER__SERVER_MESSAGE__MSG_HELLO:
                free_features(c);
                c->max_frame = reply->hello->max_frame;
                c->max_ops = reply->hello->max_ops;
                c->max_fds = reply->hello->max_fds;
                /* A helper that announces its limits announces this one too. */
                c->hello_fds_known = reply->hello->max_frame > 0;
                c->features = calloc(reply->hello->n_features + 1, sizeof(char *));
                for (size_t i = 0; c->features && i < reply->hello->n_features; i++)
                        if ((c->features[c->n_features] = strdup(reply->hello->features[i])))
                                c->n_features++;
                r = 0;
                break;
        case NETBROKER__SERVER_MESSAGE__MSG_ERROR:
                set_error(c, "%s", reply->error->message);
                r = reply->error->status > 0 ? -reply->error->status : -EPROTO;
                break;
        default:
                set_error(c, "the helper answered Hello with something else");
                r = -EPROTO;
        }
        netbroker__server_message__free_unpacked(reply, NULL);
        return r;
}

static void describe_exit(nb_conn *c, int status)
{
        if (WIFEXITED(status))
                set_error(c, "netbrokerd (pid %d) exited with status %d", (int)c->pid,
                          WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
                set_error(c, "netbrokerd (pid %d) was killed by signal %d", (int)c->pid,
                          WTERMSIG(status));
}

/* Reap our helper. A daemon with its own SIGCHLD reaper may have taken it
 * (ECHILD): that is fine, it is gone either way. */
static void reap_helper(nb_conn *c, bool block)
{
        int status;

        if (c->pid <= 0)
                return;
        pid_t p;
        do
                p = waitpid(c->pid, &status, block ? 0 : WNOHANG);
        while (p < 0 && errno == EINTR);
        if (p == c->pid) {
                describe_exit(c, status);
                c->pid = 0;
        } else if (p < 0) {
                c->pid = 0;
        }
}

static int spawn_helper(nb_conn *c)
{
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        int sv[2], r;
        char *argv[8];
        int argc = 0;
        char **envp = NULL;
        size_t n_env = 0;
        char level_env[64];

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        /* adddup2 onto the same number would leave close-on-exec set. */
        if (sv[1] == HELPER_FD) {
                int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, HELPER_FD + 1);
                if (moved < 0) {
                        r = -errno;
                        close(sv[0]);
                        close(sv[1]);
                        return r;
                }
                close(sv[1]);
                sv[1] = moved;
        }
        argv[argc++] = c->helper_path;
        argv[argc++] = (char *)"--fd";
        argv[argc++] = (char *)"3";
        if (c->config_path) {
                argv[argc++] = (char *)"--config";
                argv[argc++] = c->config_path;
        }
        argv[argc] = NULL;

        while (environ && environ[n_env])
                n_env++;
        envp = calloc(n_env + 2, sizeof(*envp));
        if (!envp) {
                close(sv[0]);
                close(sv[1]);
                return -ENOMEM;
        }
        for (size_t i = 0, j = 0; i < n_env; i++)
                if (!c->log_level || strncmp(environ[i], "NETBROKERD_LOG_LEVEL=", 21) != 0)
                        envp[j++] = environ[i];
        if (c->log_level) {
                size_t j = 0;
                while (envp[j])
                        j++;
                snprintf(level_env, sizeof(level_env), "NETBROKERD_LOG_LEVEL=%s", c->log_level);
                envp[j] = level_env;
        }

        sigemptyset(&none);
        sigfillset(&all);
        if (posix_spawn_file_actions_init(&fa)) {
                r = -ENOMEM;
                goto out_env;
        }
        if (posix_spawnattr_init(&attr)) {
                posix_spawn_file_actions_destroy(&fa);
                r = -ENOMEM;
                goto out_env;
        }
        /* The daemon's signal mask and ignored signals are not the helper's
         * business; every fd of the daemon beyond 0-2 stays behind (closefrom
         * is one close_range call, not a loop over thousands of fds). */
        if (posix_spawnattr_setsigmask(&attr, &none) ||
            posix_spawnattr_setsigdefault(&attr, &all) ||
            posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) ||
            posix_spawn_file_actions_adddup2(&fa, sv[1], HELPER_FD) ||
            posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) ||
            posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) ||
            posix_spawn_file_actions_addclosefrom_np(&fa, HELPER_FD + 1))
                r = -ENOMEM;
        else
                r = -posix_spawn(&c->pid, c->helper_path, &fa, &attr, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
out_env:
        free(envp);
        close(sv[1]);
        if (r < 0) {
                close(sv[0]);
                c->pid = 0;
                set_error(c, "cannot run %s: %s", c->helper_path, strerror(-r));
                return r;
        }
        c->fd = sv[0];
        return 0;
}

static int connect_socket(nb_conn *c)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;

        if (strlen(c->socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, c->socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                set_error(c, "cannot connect to %s: %s", c->socket_path, strerror(errno));
                close(fd);
                return r;
        }
        c->fd = fd;
        return 0;
}

static void epoll_sync(nb_conn *c);

static void epoll_forget(nb_conn *c)
{
        if (c->fd_in_epoll)
                epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        c->fd_in_epoll = false;
}

static void drop_fd(nb_conn *c)
{
        epoll_forget(c);
        if (c->fd >= 0) {
                close(c->fd);
                c->fd = -1;
        }
        nbp_frame_reader_reset(&c->rd);
}

/* Hello waits until `deadline` at most (a helper that was stopped accepts
 * connections on its listening socket but never answers). */
static int set_hello_timeout(int fd, int64_t deadline)
{
        struct timeval tv = {0};

        if (deadline != NO_DEADLINE) {
                int64_t left = deadline - now_ns();
                if (left <= 0)
                        return -ETIMEDOUT;
                tv.tv_sec = left / 1000000000;
                tv.tv_usec = (left % 1000000000) / 1000;
                if (tv.tv_sec == 0 && tv.tv_usec == 0)
                        tv.tv_usec = 1;
        }
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
                return -errno;
        return 0;
}

/* With lock held and no synchronous poller: make a working connection,
 * its Hello done by `deadline`. */
static int establish(nb_conn *c, int64_t deadline)
{
        int r;

        drop_fd(c);
        reap_helper(c, true);
        c->error[0] = '\0';
        r = c->socket_path ? connect_socket(c) : spawn_helper(c);
        if (r == 0) {
                r = set_hello_timeout(c->fd, deadline);
                if (r == 0)
                        r = hello(c);
                if (r == 0 && fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0)
                        r = -errno;
                if (r < 0) {
                        char said[sizeof(c->error)];
                        /* Reaping describes how the helper ended; its own
                         * message, if it sent one, says more. A helper of
                         * ours that did not answer in time is stopped or
                         * hung: it would not exit on EOF. */
                        if (r == -ETIMEDOUT && c->pid > 0)
                                kill(c->pid, SIGKILL);
                        snprintf(said, sizeof(said), "%s", c->error);
                        drop_fd(c);
                        reap_helper(c, true);
                        if (said[0])
                                snprintf(c->error, sizeof(c->error), "%s", said);
                        else if (r == -ETIMEDOUT)
                                set_error(c, "no Hello from the helper before the deadline");
                        else if (!c->error[0])
                                set_error(c, "no Hello from the helper: %s", strerror(-r));
                }
        }
        if (r == 0) {
                c->gen++;
                c->broken = false;
                epoll_sync(c);
        }
        return r;
}

/* ---- public: connections ---- */

static void conn_free(nb_conn *c)
{
        drop_fd(c);
        /* The helper exits when its only connection closes. */
        reap_helper(c, true);
        free_features(c);
        free(c->helper_path);
        free(c->config_path);
        free(c->log_level);
        free(c->socket_path);
        if (c->epfd >= 0)
                close(c->epfd);
        if (c->notify_fd >= 0)
                close(c->notify_fd);
        if (c->wake_fd >= 0)
                close(c->wake_fd);
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->cond);
        free(c);
}

static nb_conn *conn_alloc(void)
{
        nb_conn *c = calloc(1, sizeof(*c));
        pthread_condattr_t ca;
        struct epoll_event ev = {.events = EPOLLIN};

        if (!c)
                return NULL;
        pthread_mutex_init(&c->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->cond, &ca);
        pthread_condattr_destroy(&ca);
        c->fd = -1;
        c->completed_tail = &c->completed;
        c->out_tail = &c->out;
        nbp_frame_reader_init(&c->rd, CLIENT_FRAME_CAP, NBP_FRAME_MAX_FDS);
        c->epfd = epoll_create1(EPOLL_CLOEXEC);
        c->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ev.data.fd = c->notify_fd;
        if (c->epfd < 0 || c->notify_fd < 0 || c->wake_fd < 0 ||
            epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->notify_fd, &ev) < 0) {
                conn_free(c);
                return NULL;
        }
        return c;
}

static void finish_all(nb_conn *c);

NB_EXPORT void nb_close(nb_conn *c)
{
        if (!c)
                return;
        finish_all(c);
        conn_free(c);
}

/* Why the last nb_spawn()/nb_connect() of this thread failed: the
 * connection that held the message is gone by then. */
static __thread char last_error[512];

NB_EXPORT const char *nb_last_error(void)
{
        return last_error;
}

static int conn_finish(nb_conn *c, nb_conn **ret)
{
        int r = establish(c, NO_DEADLINE);

        last_error[0] = '\0';
        if (r < 0) {
                snprintf(last_error, sizeof(last_error), "%s",
                         c->error[0] ? c->error : strerror(-r));
                nb_close(c);
                return r;
        }
        *ret = c;
        return 0;
}

NB_EXPORT int nb_spawn(const char *helper_path, const nb_spawn_opts *opts, nb_conn **ret)
{
        nb_conn *c = conn_alloc();

        if (!c)
                return -ENOMEM;
        if (!helper_path)
                helper_path = getenv("NETBROKERD");
        if (!helper_path)
                helper_path = NB_HELPER_PATH;
        c->helper_path = strdup(helper_path);
        if (opts && opts->config_path)
                c->config_path = strdup(opts->config_path);
        if (opts && opts->log_level)
                c->log_level = strdup(opts->log_level);
        if (!c->helper_path || (opts && opts->config_path && !c->config_path) ||
            (opts && opts->log_level && !c->log_level)) {
                nb_close(c);
                return -ENOMEM;
        }
        return conn_finish(c, ret);
}

NB_EXPORT int nb_connect(const char *socket_path, nb_conn **ret)
{
        nb_conn *c;

        if (!socket_path)
                return -EINVAL;
        c = conn_alloc();
        if (!c)
                return -ENOMEM;
        c->socket_path = strdup(socket_path);
        if (!c->socket_path) {
                nb_close(c);
                return -ENOMEM;
        }
        return conn_finish(c, ret);
}

NB_EXPORT bool nb_conn_has_feature(nb_conn *c, const char *name)
{
        bool found = false;

        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < c->n_features; i++)
                if (strcmp(c->features[i], name) == 0)
                        found = true;
        pthread_mutex_unlock(&c->lock);
        return found;
}

NB_EXPORT const char *nb_conn_error(nb_conn *c)
{
        /* A copy per thread, so another thread's failure cannot change the
         * text while the caller reads it. */
        static __thread char copy[sizeof(c->error)];

        pthread_mutex_lock(&c->lock);
        memcpy(copy, c->error, sizeof(copy));
        pthread_mutex_unlock(&c->lock);
        return copy;
}

NB_EXPORT int nb_conn_helper_pid(nb_conn *c)
{
        int pid;

        pthread_mutex_lock(&c->lock);
        pid = c->pid;
        pthread_mutex_unlock(&c->lock);
        return pid;
}

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

static void notify(int efd)
{
        uint64_t one = 1;

        if (write(efd, &one, sizeof(one)) < 0) {
                /* EAGAIN: the counter is already non-zero, it wakes anyway. */
        }
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
static void epoll_sync(nb_conn *c)
{
        struct epoll_event ev = {.events = EPOLLIN | (c->out ? EPOLLOUT : 0u)};

        if (c->fd < 0 || c->broken) {
                epoll_forget(c);
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
                set_error(c, "fds sent by the helper were lost (out of memory or at this process's "
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
        epoll_forget(c);
        drop_output_queue(c);
        if (kill_helper && c->pid > 0)
                kill(c->pid, SIGKILL);
        if (!have_message) {
                c->error[0] = '\0';
                if (!kill_helper)
                        reap_helper(c, false);
                if (!c->error[0])
                        set_error(c, "connection to netbrokerd lost: %s", strerror(-err));
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
        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_ERROR) {
                set_error(c, "%s", m->error->message);
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
        while (r >= 0 && c->gen == gen && !c->broken) {
                Netbroker__ServerMessage *m = NULL;
                int fds[NBP_FRAME_MAX_FDS];
                size_t nfds = 0;

                r = recv_msg(c, &m, fds, &nfds);
                if (r <= 0)
                        break;
                file_frame(c, m, fds, nfds);
        }
        if (r < 0)
                conn_reset(c, gen, r, false, false);
        epoll_sync(c);
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
                set_error(c,
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
        return timeout_ms < 0 ? NO_DEADLINE : now_ns() + (int64_t)timeout_ms * 1000000;
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
                if (now_ns() >= deadline) {
                        set_error(c, "the connection to netbrokerd is being reset; "
                                     "the deadline passed first");
                        return -ETIMEDOUT;
                }
                wait_cond(c, deadline);
        }
        if (c->fd >= 0 && !c->broken)
                return 0;
        return establish(c, deadline);
}

/* Lock held: refuse what the helper would refuse, without sending it. The
 * frame's size is checked once it is packed (pack_request). */
static int check_limits(nb_conn *c, const nb_batch *b)
{
        if (b->nfds > NBP_FRAME_MAX_FDS || (c->hello_fds_known && b->nfds > c->max_fds)) {
                set_error(c, "batch carries %zu fds; the helper takes at most %u", b->nfds,
                          c->hello_fds_known ? c->max_fds : NBP_FRAME_MAX_FDS);
                return -E2BIG;
        }
        if (c->max_ops && b->req.n_ops > c->max_ops) {
                set_error(c, "batch has %zu ops; the helper takes at most %u", b->req.n_ops,
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
        r = pack_msg_fds(&m.base, b->fds, b->nfds, &f);
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
                epoll_sync(c);
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
                epoll_sync(c);
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

/* Connect if needed, check, pack and queue b as rq, whose id goes to
 * *ret_id (once queued, rq may be done and freed by another thread before
 * this returns). 0 or -errno; on failure nothing is left queued. */
static int submit_request(nb_conn *c, const nb_batch *b, struct request *rq, uint64_t *ret_id)
{
        struct nbp_frame_out *f = NULL;
        uint32_t max_frame;
        size_t len = 0;
        int r;

        pthread_mutex_lock(&c->lock);
        r = ensure_connected(c, rq->deadline);
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
                set_error(c, "batch encodes to %zu bytes; the helper takes at most %u", len,
                          max_frame);
        if (r == 0)
                r = ensure_connected(c, rq->deadline);
        if (r == 0)
                r = send_request(c, rq, f);
        else
                nbp_frame_out_free(f);
        pthread_mutex_unlock(&c->lock);
        return r;
}

/* Lock held: wait for rq (synchronous) to be done, doing the connection's
 * I/O meanwhile when no other thread does. */
static void wait_request(nb_conn *c, struct request *rq)
{
        while (!rq->done) {
                int64_t now = now_ns();

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
        return c ? c->epfd : -EINVAL;
}

NB_EXPORT int nb_conn_next_timeout(nb_conn *c)
{
        int64_t first = NO_DEADLINE;

        if (!c)
                return -1;
        pthread_mutex_lock(&c->lock);
        for (struct request *rq = c->pending; rq; rq = rq->next)
                if (rq->deadline < first)
                        first = rq->deadline;
        pthread_mutex_unlock(&c->lock);
        return ms_until(first, now_ns());
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

NB_EXPORT int nb_conn_dispatch(nb_conn *c)
{
        struct request *list;

        if (!c)
                return -EINVAL;
        pthread_mutex_lock(&c->lock);
        drain(c->notify_fd);
        io_step(c);
        expire(c, now_ns());
        list = c->completed;
        c->completed = NULL;
        c->completed_tail = &c->completed;
        pthread_mutex_unlock(&c->lock);
        return run_callbacks(c, list);
}

NB_EXPORT int nb_cancel(nb_conn *c, uint64_t id)
{
        struct request *rq;
        int r = -ENOENT;

        if (!c)
                return -EINVAL;
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
static void finish_all(nb_conn *c)
{
        struct request *list;

        pthread_mutex_lock(&c->lock);
        while (c->pending) {
                struct request *rq = c->pending;
                c->pending = rq->next;
                finish(c, rq, -ECANCELED);
        }
        list = c->completed;
        c->completed = NULL;
        c->completed_tail = &c->completed;
        pthread_mutex_unlock(&c->lock);
        run_callbacks(c, list);
}
