// SPDX-License-Identifier: LGPL-2.1-or-later
/* Connections: spawning the helper or connecting to it, Hello, and the
 * public calls about a connection. The requests on it are requests.c's.
 * Hello is the one blocking exchange, bounded by the caller's deadline;
 * after it the socket is non-blocking. */
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
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"

extern char **environ;

/* Replies can carry program output of many ops: trust the helper more than
 * the helper trusts us, but not without bound. */
#define CLIENT_FRAME_CAP (1024u * 1024 * 1024)
#define HELPER_FD 3

int64_t conn_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void conn_set_error(nb_conn *c, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(c->error, sizeof(c->error), fmt, ap);
        va_end(ap);
}

/* sd-bus answers a call from a child of fork() the same way. Not -EBADF:
 * nb_submit() says that of fds the helper sent and that were lost. */
int conn_check_owner(nb_conn *c)
{
        return c->owner == getpid() ? 0 : -ECHILD;
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
int conn_pack_msg_fds(const ProtobufCMessage *m, const int *fds, size_t nfds,
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
int conn_recv_msg(nb_conn *c, Netbroker__ServerMessage **ret, int *fds, size_t *nfds)
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

/* "netbrokerd X.Y.Z" (netbroker.proto, Hello.software). */
static bool parse_software(const char *s, unsigned *ret)
{
        unsigned major, minor, micro;
        int end = -1;

        if (sscanf(s, "netbrokerd %u.%u.%u%n", &major, &minor, &micro, &end) != 3 ||
            (s[end] && s[end] != ' ') || major > 0xffff || minor > 0xff || micro > 0xff)
                return false;
        *ret = NB_VERSION_ENCODE(major, minor, micro);
        return true;
}

/* What Hello says beyond the limits nb_submit() checks. */
static void hello_rest(nb_conn *c, const Netbroker__Hello *h)
{
        c->limits[NB_LIMIT_REQUEST_BYTES] = h->max_frame;
        c->limits[NB_LIMIT_OPS] = h->max_ops;
        /* 0 fds is a real limit, announced with the others. */
        c->limits[NB_LIMIT_REQUEST_FDS] = h->max_frame ? (uint64_t)h->max_fds + 1 : 0;
        c->limits[NB_LIMIT_REPLY_BYTES] = h->max_reply;
        c->limits[NB_LIMIT_REQUESTS_IN_FLIGHT] = h->max_requests;
        c->limits[NB_LIMIT_FW_RULES] = h->max_rules;
        c->limits[NB_LIMIT_EXEC_RUNNING] = h->max_execs_running;
        /* 0 bytes of output is a real cap, announced with max_reply. */
        c->limits[NB_LIMIT_EXEC_OUTPUT] = h->max_reply ? h->exec_output_cap + 1 : 0;
        c->limits[NB_LIMIT_EXEC_TIMEOUT_MS] = h->exec_timeout_max_ms;
        c->limits[NB_LIMIT_EXEC_ARGS] = h->max_args;
        c->helper_version_known = parse_software(h->software, &c->helper_version);
}

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
        /* Always: without a callback they are dropped on arrival. */
        h.events = true;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_HELLO;
        m.hello = &h;
        /* A helper that refuses us says why and closes at once, possibly
         * before it read our Hello: even when the send fails, its Error may
         * be waiting to be read. */
        r = send_msg(c->fd, &m.base);
        int rr = conn_recv_msg(c, &reply, fds, &nfds);
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
                hello_rest(c, reply->hello);
                c->helper_events = reply->hello->events;
                c->features = calloc(reply->hello->n_features + 1, sizeof(char *));
                for (size_t i = 0; c->features && i < reply->hello->n_features; i++)
                        if ((c->features[c->n_features] = strdup(reply->hello->features[i])))
                                c->n_features++;
                r = 0;
                break;
        case NETBROKER__SERVER_MESSAGE__MSG_ERROR:
                conn_set_error(c, "%s", reply->error->message);
                r = reply->error->status > 0 ? -reply->error->status : -EPROTO;
                break;
        default:
                conn_set_error(c, "the helper answered Hello with something else");
                r = -EPROTO;
        }
        netbroker__server_message__free_unpacked(reply, NULL);
        return r;
}

static void describe_exit(nb_conn *c, const siginfo_t *si)
{
        if (si->si_code == CLD_EXITED)
                conn_set_error(c, "netbrokerd (pid %d) exited with status %d", (int)c->pid,
                               si->si_status);
        else if (si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED)
                conn_set_error(c, "netbrokerd (pid %d) was killed by signal %d", (int)c->pid,
                               si->si_status);
}

static void forget_helper(nb_conn *c)
{
        c->pid = 0;
        if (c->pidfd >= 0)
                close(c->pidfd);
        c->pidfd = -1;
}

/* Reap our helper. A daemon with its own SIGCHLD reaper may have taken it
 * (ECHILD): that is fine, it is gone either way. Through the pidfd when
 * there is one (waitid P_PIDFD, Linux 5.4): after such a reaper, the pid
 * may be another process's, the pidfd never is. */
void conn_reap_helper(nb_conn *c, bool block)
{
        siginfo_t si;
        int r;

        if (c->pid <= 0)
                return;
        do {
                memset(&si, 0, sizeof(si));
                if (c->pidfd >= 0)
                        r = waitid(P_PIDFD, (id_t)c->pidfd, &si, WEXITED | (block ? 0 : WNOHANG));
                else
                        r = waitid(P_PID, (id_t)c->pid, &si, WEXITED | (block ? 0 : WNOHANG));
        } while (r < 0 && errno == EINTR);
        if (r == 0 && si.si_pid != 0) {
                describe_exit(c, &si);
                forget_helper(c);
        } else if (r < 0) {
                forget_helper(c);
        }
}

void conn_kill_helper(nb_conn *c)
{
        if (c->pid <= 0)
                return;
        if (c->pidfd >= 0)
                pidfd_send_signal(c->pidfd, SIGKILL, NULL, 0);
        else
                kill(c->pid, SIGKILL);
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
                conn_set_error(c, "cannot run %s: %s", c->helper_path, strerror(-r));
                return r;
        }
        /* Our child, not reaped yet: its pid cannot have been reused. (A
         * kernel before 5.3 has no pidfd: the pid it is, then.) */
        c->pidfd = pidfd_open(c->pid, 0);
        c->fd = sv[0];
        return 0;
}

static int set_hello_timeout(int fd, int64_t deadline);

/* connect() waits for room in the listener's backlog (a helper that stopped
 * accepting) until `deadline` at most: SO_SNDTIMEO bounds it. */
static int connect_socket(nb_conn *c, int64_t deadline)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;

        if (strlen(c->socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, c->socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int r = set_hello_timeout(fd, deadline);
        if (r == 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                r = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
        if (r < 0) {
                if (r == -ETIMEDOUT)
                        conn_set_error(c,
                                       "cannot connect to %s: its backlog stayed full until "
                                       "the deadline",
                                       c->socket_path);
                else
                        conn_set_error(c, "cannot connect to %s: %s", c->socket_path, strerror(-r));
                close(fd);
                return r;
        }
        c->fd = fd;
        return 0;
}

void conn_epoll_forget(nb_conn *c)
{
        if (c->fd_in_epoll)
                epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        c->fd_in_epoll = false;
}

static void drop_fd(nb_conn *c)
{
        conn_epoll_forget(c);
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
                int64_t left = deadline - conn_now_ns();
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
int conn_establish(nb_conn *c, int64_t deadline)
{
        int r;

        drop_fd(c);
        conn_reap_helper(c, true);
        c->error[0] = '\0';
        if (deadline == NO_DEADLINE && c->hello_timeout_ms > 0)
                deadline = conn_now_ns() + (int64_t)c->hello_timeout_ms * 1000000;
        r = c->socket_path ? connect_socket(c, deadline) : spawn_helper(c);
        if (r == 0) {
                r = set_hello_timeout(c->fd, deadline);
                if (r == 0)
                        r = hello(c);
                /* The bounds were the Hello's: the socket goes on without. */
                if (r == 0)
                        r = set_hello_timeout(c->fd, NO_DEADLINE);
                if (r == 0 && fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0)
                        r = -errno;
                if (r < 0) {
                        char said[sizeof(c->error)];
                        /* Reaping describes how the helper ended; its own
                         * message, if it sent one, says more. A helper of
                         * ours that did not answer in time is stopped or
                         * hung: it would not exit on EOF. */
                        if (r == -ETIMEDOUT)
                                conn_kill_helper(c);
                        snprintf(said, sizeof(said), "%s", c->error);
                        drop_fd(c);
                        conn_reap_helper(c, true);
                        if (said[0])
                                snprintf(c->error, sizeof(c->error), "%s", said);
                        else if (r == -ETIMEDOUT)
                                conn_set_error(c, "no Hello from the helper before the deadline");
                        else if (!c->error[0])
                                conn_set_error(c, "no Hello from the helper: %s", strerror(-r));
                }
        }
        if (r == 0) {
                c->gen++;
                c->broken = false;
                conn_epoll_sync(c);
        }
        return r;
}

/* ---- public: connections ---- */

static void conn_free(nb_conn *c)
{
        /* A child of fork() that has not exec'd or exited yet holds a copy
         * of the socket: without the shutdown the helper would see no EOF,
         * and the wait below would last as long as that child. (The child's
         * own nb_close() has no socket left here: conn_disown.) */
        if (c->fd >= 0)
                shutdown(c->fd, SHUT_RDWR);
        drop_fd(c);
        /* The helper exits when its only connection closes. */
        conn_reap_helper(c, true);
        free_features(c);
        conn_events_free(c);
        free(c->helper_path);
        free(c->config_path);
        free(c->log_level);
        free(c->socket_path);
        forget_helper(c); /* reaped above, or taken by someone else */
        if (c->epfd >= 0)
                close(c->epfd);
        if (c->notify_fd >= 0)
                close(c->notify_fd);
        if (c->wake_fd >= 0)
                close(c->wake_fd);
        /* In a child of fork(), a thread of the parent may have held the
         * lock or waited on cond at the fork: destroying them could wait
         * for that thread, which does not exist here. */
        if (conn_check_owner(c) == 0) {
                pthread_mutex_destroy(&c->lock);
                pthread_cond_destroy(&c->cond);
        }
        free(c);
}

static nb_conn *conn_alloc(void)
{
        nb_conn *c = calloc(1, sizeof(*c));
        pthread_condattr_t ca;
        struct epoll_event ev = {.events = EPOLLIN};

        if (!c)
                return NULL;
        c->owner = getpid();
        pthread_mutex_init(&c->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->cond, &ca);
        pthread_condattr_destroy(&ca);
        c->fd = -1;
        c->pidfd = -1;
        c->hello_timeout_ms = NB_HELLO_TIMEOUT_MS_DEFAULT;
        c->completed_tail = &c->completed;
        c->events_tail = &c->events;
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

/* nb_close() in a child of fork(): the socket, the helper and the epoll
 * set are the parent's, still in use there. Only our copies of the fds
 * are closed: no shutdown(), which would end the parent's connection too,
 * no signal or wait for the helper, no epoll_ctl() (the set is shared), no
 * lock. conn_free() then finds nothing of that left to do. */
static void conn_disown(nb_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        c->fd_in_epoll = false;
        if (c->pidfd >= 0)
                close(c->pidfd);
        c->pidfd = -1;
        c->pid = 0;
        conn_drop_requests(c);
}

int conn_close_finish(nb_conn *c)
{
        int n = conn_finish_all(c);

        conn_free(c);
        return n;
}

NB_EXPORT void nb_close(nb_conn *c)
{
        if (!c)
                return;
        if (conn_check_owner(c) < 0) {
                conn_disown(c);
                conn_free(c);
        } else if (conn_close_begin(c)) {
                conn_close_finish(c);
        }
}

/* Why the last nb_spawn()/nb_connect() of this thread failed (the
 * connection that held the message is gone by then), or why a call
 * building a batch or a ruleset refused its input since (nb_bad_arg()). */
static __thread char last_error[512];

NB_EXPORT const char *nb_last_error(void)
{
        return last_error;
}

int nb_bad_arg(int err, const char *who, const char *fmt, ...)
{
        int n = snprintf(last_error, sizeof(last_error), "%s: ", who);
        va_list ap;

        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < sizeof(last_error))
                vsnprintf(last_error + n, sizeof(last_error) - (size_t)n, fmt, ap);
        va_end(ap);
        return -err;
}

const char *nb_quote(const char *s, char *buf, size_t len)
{
        size_t o = 0;

        if (!s) {
                snprintf(buf, len, "NULL");
                return buf;
        }
        buf[o++] = '\'';
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                char e[5] = {(char)c, '\0'};
                size_t n = 1;

                if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\')
                        n = (size_t)snprintf(e, sizeof(e), "\\x%02x", c);
                /* Keep room for the "...'" of a cut and the NUL. */
                if (o + n + 5 > len) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                memcpy(buf + o, e, n);
                o += n;
        }
        buf[o++] = '\'';
        buf[o] = '\0';
        return buf;
}

int nb_arg_in(const char *who, const char *arg, const char *prefix, void *dst, size_t known,
              size_t first, const void *src)
{
        int r = nb_struct_in(dst, known, first, src);
        char type[64];
        size_t size, i;

        if (r == 0)
                return 0;
        if (!src)
                return nb_bad_arg(-r, who, "%s is NULL", arg);
        /* The macros' prefix names the type: NB_TAP_OPTS, nb_tap_opts. */
        for (i = 0; prefix[i] && i < sizeof(type) - 1; i++)
                type[i] = prefix[i] >= 'A' && prefix[i] <= 'Z' ? (char)(prefix[i] - 'A' + 'a')
                                                               : prefix[i];
        type[i] = '\0';
        memcpy(&size, src, sizeof(size));
        if (r == -E2BIG)
                return nb_bad_arg(E2BIG, who,
                                  "%s: size %zu is larger than this library's %s (%zu bytes) "
                                  "and sets a field past those: a newer header's, which this "
                                  "library cannot honour",
                                  arg, size, type, known);
        if (size == 0)
                return nb_bad_arg(-r, who, "%s: size is 0: initialise an %s with %s_INIT", arg,
                                  type, prefix);
        return nb_bad_arg(-r, who,
                          "%s: size %zu is below %zu, the smallest %s: initialise it with %s_INIT",
                          arg, size, first, type, prefix);
}

static int conn_finish(nb_conn *c, nb_conn **ret)
{
        int r = conn_establish(c, NO_DEADLINE);

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

NB_EXPORT int nb_spawn(const char *helper_path, const nb_spawn_opts *theirs, nb_conn **ret)
{
        nb_spawn_opts mine;
        const nb_spawn_opts *opts = NULL;
        nb_conn *c;

        /* Every return says why in nb_last_error() (netbroker.h), these
         * early ones too. */
        if (theirs) {
                int r = NB_ARG_IN(__func__, "opts", &mine, theirs, NB_SPAWN_OPTS);
                if (r < 0)
                        return r;
                opts = &mine;
        }
        c = conn_alloc();
        if (!c)
                return nb_bad_arg(ENOMEM, __func__, "out of memory");
        /* The library runs inside privileged daemons: in a setuid or
         * file-capability program the environment is its caller's, who must
         * not choose the binary run with its privileges. */
        if (!helper_path)
                helper_path = secure_getenv("NETBROKERD");
        if (!helper_path)
                helper_path = NB_HELPER_PATH;
        c->helper_path = strdup(helper_path);
        if (opts && opts->config_path)
                c->config_path = strdup(opts->config_path);
        if (opts && opts->log_level)
                c->log_level = strdup(opts->log_level);
        if (opts && opts->hello_timeout_ms)
                c->hello_timeout_ms = opts->hello_timeout_ms;
        if (!c->helper_path || (opts && opts->config_path && !c->config_path) ||
            (opts && opts->log_level && !c->log_level)) {
                nb_close(c);
                return nb_bad_arg(ENOMEM, __func__, "out of memory");
        }
        return conn_finish(c, ret);
}

/* nb_connect_timeout() for who: every return says why in nb_last_error(). */
static int connect_timeout(const char *who, const char *socket_path, int timeout_ms, nb_conn **ret)
{
        nb_conn *c;

        if (!socket_path)
                return nb_bad_arg(EINVAL, who, "socket_path is NULL");
        c = conn_alloc();
        if (!c)
                return nb_bad_arg(ENOMEM, who, "out of memory");
        if (timeout_ms)
                c->hello_timeout_ms = timeout_ms;
        c->socket_path = strdup(socket_path);
        if (!c->socket_path) {
                nb_close(c);
                return nb_bad_arg(ENOMEM, who, "out of memory");
        }
        return conn_finish(c, ret);
}

NB_EXPORT int nb_connect(const char *socket_path, nb_conn **ret)
{
        return connect_timeout(__func__, socket_path, 0, ret);
}

NB_EXPORT int nb_connect_timeout(const char *socket_path, int timeout_ms, nb_conn **ret)
{
        return connect_timeout(__func__, socket_path, timeout_ms, ret);
}

NB_EXPORT bool nb_conn_has_feature(nb_conn *c, const char *name)
{
        bool found = false;

        /* In a child of fork(), not the lock: a thread of the parent may
         * have held it at the fork, and none is left to let it go. */
        if (conn_check_owner(c) < 0)
                return false;
        pthread_mutex_lock(&c->lock);
        /* Not an op: said by Hello's events (netbroker.h, events). */
        if (strcmp(name, "events") == 0)
                found = c->helper_events;
        for (size_t i = 0; i < c->n_features; i++)
                if (strcmp(c->features[i], name) == 0)
                        found = true;
        pthread_mutex_unlock(&c->lock);
        return found;
}

NB_EXPORT int nb_conn_helper_version(nb_conn *c, unsigned *ret)
{
        int r = -ENODATA;

        if (!c || !ret)
                return -EINVAL;
        if (conn_check_owner(c) < 0)
                return -ECHILD; /* the lock may be held for ever: nb_conn_has_feature() */
        pthread_mutex_lock(&c->lock);
        if (c->helper_version_known) {
                *ret = c->helper_version;
                r = 0;
        }
        pthread_mutex_unlock(&c->lock);
        return r;
}

NB_EXPORT int nb_conn_limit(nb_conn *c, nb_limit limit, uint64_t *ret)
{
        /* The fd and output limits are stored one up: 0 there is a limit. */
        bool one_up = limit == NB_LIMIT_REQUEST_FDS || limit == NB_LIMIT_EXEC_OUTPUT;
        uint64_t v;

        if (!c || !ret || (unsigned)limit >= sizeof(c->limits) / sizeof(*c->limits))
                return -EINVAL;
        if (conn_check_owner(c) < 0)
                return -ECHILD; /* the lock may be held for ever: nb_conn_has_feature() */
        pthread_mutex_lock(&c->lock);
        v = c->limits[limit];
        pthread_mutex_unlock(&c->lock);
        if (!v)
                return -ENODATA;
        *ret = one_up ? v - 1 : v;
        return 0;
}

NB_EXPORT const char *nb_conn_error(nb_conn *c)
{
        /* A copy per thread, so another thread's failure cannot change the
         * text while the caller reads it. */
        static __thread char copy[sizeof(c->error)];

        if (conn_check_owner(c) < 0) {
                /* Not the lock: a thread of the parent may have held it. */
                snprintf(copy, sizeof(copy),
                         "this connection to netbrokerd was made by process %d: process %d (a "
                         "child of fork()) can only nb_close() it",
                         (int)c->owner, (int)getpid());
                return copy;
        }
        pthread_mutex_lock(&c->lock);
        memcpy(copy, c->error, sizeof(copy));
        pthread_mutex_unlock(&c->lock);
        return copy;
}

NB_EXPORT int nb_conn_helper_pid(nb_conn *c)
{
        int pid;

        /* The parent's helper is none of the child's; and the lock may be
         * held for ever (nb_conn_has_feature()). */
        if (conn_check_owner(c) < 0)
                return 0;
        pthread_mutex_lock(&c->lock);
        pid = c->pid;
        pthread_mutex_unlock(&c->lock);
        return pid;
}
