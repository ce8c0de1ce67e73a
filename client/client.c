// SPDX-License-Identifier: LGPL-2.1-or-later
/* Connections: spawning or connecting, Hello, and thread-safe submits.
 *
 * Many threads may submit on one connection. Writes are serialised by
 * write_lock. Reading uses a leader/follower scheme instead of a library
 * thread: whichever waiting thread finds nobody reading becomes the reader,
 * reads one frame, files it under the waiter it belongs to and wakes
 * everyone; the others sleep on the condition variable. A broken connection
 * (the helper died) fails every call in flight at once; the next submit
 * builds a new connection (a new generation). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

struct waiter {
        uint64_t id;
        unsigned gen;
        bool done;
        int err;
        Netbroker__ServerMessage *msg;
        int *fds; /* from Fds frames, in arrival order */
        size_t nfds, cap;
        bool lost_fds; /* an Fds frame could not be kept */
        struct waiter *next;
};

/* Keep fds that arrived for w; on failure close them and remember it. */
static void waiter_add_fds(struct waiter *w, const int *fds, size_t n)
{
        if (w->nfds + n > w->cap) {
                size_t ncap = (w->cap ? w->cap * 2 : 16) + n;
                int *p = realloc(w->fds, ncap * sizeof(*p));
                if (!p) {
                        for (size_t i = 0; i < n; i++)
                                close(fds[i]);
                        w->lost_fds = true;
                        return;
                }
                w->fds = p;
                w->cap = ncap;
        }
        memcpy(w->fds + w->nfds, fds, n * sizeof(int));
        w->nfds += n;
}

struct nb_conn {
        pthread_mutex_t lock; /* everything below but fd I/O */
        pthread_cond_t cond;
        pthread_mutex_t write_lock; /* taken after lock, never the other way */
        int fd;
        pid_t pid;
        unsigned gen;
        bool broken;
        bool reading;
        uint64_t next_id;
        struct waiter *waiters;
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
        char error[512];
};

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

static int send_msg(int fd, const ProtobufCMessage *m)
{
        struct nbp_frame_out *f;
        int r = nbp_pack_frame(m, &f);

        if (r < 0)
                return r;
        do
                r = nbp_frame_write(fd, f);
        while (r == 0);
        nbp_frame_out_free(f);
        return r < 0 ? r : 0;
}

/* Read one ServerMessage. On success the caller owns *ret and the fds. */
static int recv_msg(nb_conn *c, Netbroker__ServerMessage **ret, int *fds, size_t *nfds)
{
        uint8_t *body;
        size_t len;
        bool truncated;
        int r;

        do
                r = nbp_frame_read(c->fd, &c->rd);
        while (r == 0);
        if (r < 0) {
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
        return 0;
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
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_HELLO;
        m.hello = &h;
        /* A helper that refuses us says why and closes at once, possibly
         * before it read our Hello: even when the send fails, its Error may
         * be waiting to be read. */
        r = send_msg(c->fd, &m.base);
        int rr = recv_msg(c, &reply, fds, &nfds);
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

static void drop_fd(nb_conn *c)
{
        if (c->fd >= 0) {
                close(c->fd);
                c->fd = -1;
        }
        nbp_frame_reader_reset(&c->rd);
}

/* With lock held, no reader and no writer: make a working connection. */
static int establish(nb_conn *c)
{
        int r;

        pthread_mutex_lock(&c->write_lock);
        drop_fd(c);
        reap_helper(c, true);
        c->error[0] = '\0';
        r = c->socket_path ? connect_socket(c) : spawn_helper(c);
        if (r == 0) {
                r = hello(c);
                if (r < 0) {
                        char said[sizeof(c->error)];
                        /* Reaping describes how the helper ended; its own
                         * message, if it sent one, says more. */
                        snprintf(said, sizeof(said), "%s", c->error);
                        drop_fd(c);
                        reap_helper(c, true);
                        if (said[0])
                                snprintf(c->error, sizeof(c->error), "%s", said);
                        else if (!c->error[0])
                                set_error(c, "no Hello from the helper: %s", strerror(-r));
                }
        }
        if (r == 0) {
                c->gen++;
                c->broken = false;
        }
        pthread_mutex_unlock(&c->write_lock);
        return r;
}

/* ---- public: connections ---- */

static nb_conn *conn_alloc(void)
{
        nb_conn *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        pthread_mutex_init(&c->lock, NULL);
        pthread_mutex_init(&c->write_lock, NULL);
        pthread_cond_init(&c->cond, NULL);
        c->fd = -1;
        nbp_frame_reader_init(&c->rd, CLIENT_FRAME_CAP, NBP_FRAME_MAX_FDS);
        return c;
}

NB_EXPORT void nb_close(nb_conn *c)
{
        if (!c)
                return;
        drop_fd(c);
        /* The helper exits when its only connection closes. */
        reap_helper(c, true);
        free_features(c);
        free(c->helper_path);
        free(c->config_path);
        free(c->log_level);
        free(c->socket_path);
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->write_lock);
        pthread_cond_destroy(&c->cond);
        free(c);
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
        int r = establish(c);

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

        if (theirs) {
                int r = NB_STRUCT_IN(&mine, theirs, NB_SPAWN_OPTS_SIZE_0);
                if (r < 0)
                        return r;
                opts = &mine;
        }
        c = conn_alloc();
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

NB_EXPORT int nb_conn_helper_version(nb_conn *c, unsigned *ret)
{
        int r = -ENODATA;

        if (!c || !ret)
                return -EINVAL;
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

/* ---- public: submit ---- */

/* With lock held: the connection of generation `gen` is unusable. Wake any
 * thread blocked on it; the fd is closed when the next call re-establishes.
 * The message says why, best first: the helper's own Error (already set by
 * the caller), how the helper ended, or what the socket said. */
static void mark_broken(nb_conn *c, unsigned gen, int err, bool have_message)
{
        if (c->gen != gen || c->broken)
                return;
        c->broken = true;
        if (c->fd >= 0)
                shutdown(c->fd, SHUT_RDWR);
        if (!have_message) {
                c->error[0] = '\0';
                reap_helper(c, false);
                if (!c->error[0])
                        set_error(c, "connection to netbrokerd lost: %s", strerror(-err));
        }
        pthread_cond_broadcast(&c->cond);
}

static struct waiter *find_waiter(nb_conn *c, uint64_t id)
{
        for (struct waiter *w = c->waiters; w; w = w->next)
                if (w->id == id && w->gen == c->gen)
                        return w;
        return NULL;
}

/* With lock held, as the reader: read one frame and file it. */
static void read_one(nb_conn *c)
{
        Netbroker__ServerMessage *m = NULL;
        int fds[NBP_FRAME_MAX_FDS];
        size_t nfds = 0;
        unsigned gen = c->gen;
        struct waiter *w;
        int r;

        c->reading = true;
        pthread_mutex_unlock(&c->lock);
        r = recv_msg(c, &m, fds, &nfds);
        pthread_mutex_lock(&c->lock);
        c->reading = false;
        if (r < 0) {
                mark_broken(c, gen, r, false);
                return;
        }
        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_FDS &&
            (w = find_waiter(c, m->fds->request_id))) {
                if (m->fds->count != nfds)
                        w->lost_fds = true;
                waiter_add_fds(w, fds, nfds);
                netbroker__server_message__free_unpacked(m, NULL);
                return;
        }
        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_REPLY &&
            (w = find_waiter(c, m->reply->id))) {
                w->msg = m;
                nbp_close_fds(fds, nfds); /* a Reply carries none */
                w->done = true;
                /* Its owner sleeps on the condition; wake it before this
                 * thread perhaps goes on reading for its own reply. */
                pthread_cond_broadcast(&c->cond);
                return;
        }
        if (m->msg_case == NETBROKER__SERVER_MESSAGE__MSG_ERROR) {
                set_error(c, "%s", m->error->message);
                w = find_waiter(c, m->error->request_id);
                if (w && m->error->request_id) {
                        w->err = m->error->status > 0 ? -m->error->status : -EPROTO;
                        w->done = true;
                }
                /* The helper closes the connection after an Error. */
                mark_broken(c, gen, -EPROTO, true);
        }
        /* A reply nobody waits for (its caller gave up) is dropped. */
        nbp_close_fds(fds, nfds);
        netbroker__server_message__free_unpacked(m, NULL);
}

static void unlink_waiter(nb_conn *c, struct waiter *w)
{
        for (struct waiter **p = &c->waiters; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        return;
                }
}

/* Lock held: make sure there is a working connection to send on. */
static int ensure_connected(nb_conn *c)
{
        if (c->fd >= 0 && !c->broken)
                return 0;
        /* Let the current reader notice the breakage and leave first. */
        while (c->reading)
                pthread_cond_wait(&c->cond, &c->lock);
        if (c->fd >= 0 && !c->broken)
                return 0;
        return establish(c);
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

/* -ECONNRESET without sending when the connection of `gen` was replaced
 * meanwhile: fd may be the new connection's number by now, and a request
 * sent there would run although its caller is told it failed. (establish()
 * changes gen only with write_lock held.) */
static int write_request(nb_conn *c, int fd, unsigned gen, struct nbp_frame_out *f)
{
        int r = -ECONNRESET;

        pthread_mutex_lock(&c->write_lock);
        if (c->gen == gen)
                do
                        r = nbp_frame_write(fd, f);
                while (r == 0);
        pthread_mutex_unlock(&c->write_lock);
        return r < 0 ? r : 0;
}

NB_EXPORT int nb_submit(nb_conn *c, const nb_batch *b, nb_results **ret)
{
        struct waiter w = {0};
        struct nbp_frame_out *f = NULL;
        bool retried = false;
        uint32_t max_frame;
        size_t len = 0;
        int r, fd;

        if (!c || !b || !ret)
                return -EINVAL;
again:
        pthread_mutex_lock(&c->lock);
        r = ensure_connected(c);
        if (r == 0)
                r = check_limits(c, b);
        if (r < 0) {
                pthread_mutex_unlock(&c->lock);
                return r;
        }
        w.id = ++c->next_id;
        w.gen = c->gen;
        w.next = c->waiters;
        c->waiters = &w;
        fd = c->fd;
        max_frame = c->max_frame;
        pthread_mutex_unlock(&c->lock);

        r = pack_request(b, w.id, max_frame, &f, &len);
        if (r < 0) {
                /* Nothing was sent: the connection goes on. */
                pthread_mutex_lock(&c->lock);
                unlink_waiter(c, &w);
                if (r == -EMSGSIZE)
                        set_error(c, "batch encodes to %zu bytes; the helper takes at most %u", len,
                                  max_frame);
                pthread_mutex_unlock(&c->lock);
                return r;
        }
        r = write_request(c, fd, w.gen, f);
        nbp_frame_out_free(f);

        pthread_mutex_lock(&c->lock);
        if (r < 0) {
                mark_broken(c, w.gen, r, false);
                /* No whole frame reached the helper, so it ran nothing: the
                 * helper died (or closed) while the connection was idle.
                 * Replace it now, once, rather than fail a call that the
                 * next one would make work. */
                if ((r == -EPIPE || r == -ECONNRESET) && !retried) {
                        unlink_waiter(c, &w);
                        pthread_cond_broadcast(&c->cond);
                        pthread_mutex_unlock(&c->lock);
                        w = (struct waiter){0};
                        retried = true;
                        goto again;
                }
                w.err = r == -EPIPE ? -ECONNRESET : r;
                w.done = true;
        }
        while (!w.done) {
                if (c->gen != w.gen || c->broken) {
                        w.err = -ECONNRESET;
                        break;
                }
                if (!c->reading)
                        read_one(c);
                else
                        pthread_cond_wait(&c->cond, &c->lock);
        }
        unlink_waiter(c, &w);
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);

        if (w.err == 0 && w.msg && w.msg->reply->n_results != b->req.n_ops)
                w.err = -EPROTO;
        if (w.err == 0 && w.lost_fds) {
                /* Devices were made, but we could not take all their fds. */
                pthread_mutex_lock(&c->lock);
                set_error(c, "fds sent by the helper were lost (out of memory or at this process's "
                             "fd limit)");
                pthread_mutex_unlock(&c->lock);
                w.err = -EBADF;
        }
        if (w.err < 0 || !w.msg) {
                nbp_close_fds(w.fds, w.nfds);
                free(w.fds);
                if (w.msg)
                        netbroker__server_message__free_unpacked(w.msg, NULL);
                return w.err < 0 ? w.err : -EPROTO;
        }
        r = nb_results_new(w.msg, w.fds, w.nfds, ret);
        if (r < 0) {
                nbp_close_fds(w.fds, w.nfds);
                free(w.fds);
                netbroker__server_message__free_unpacked(w.msg, NULL);
        }
        return r;
}
