// SPDX-License-Identifier: LGPL-2.1-or-later
#include "testutil.h"

#include <dirent.h>
#include <sched.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t tu_now_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Config files live until the test process exits (a respawned helper
 * reads its config again). */
static char *configs[64];
static size_t n_configs;

static void remove_configs(void)
{
        for (size_t i = 0; i < n_configs; i++) {
                unlink(configs[i]);
                free(configs[i]);
        }
        n_configs = 0;
}

char *tu_config(const char *body)
{
        char *path = strdup("/tmp/nbtest-conf-XXXXXX");
        int fd = mkstemp(path);

        if (n_configs == 0)
                atexit(remove_configs);
        if (n_configs < 64)
                configs[n_configs++] = strdup(path);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
        close(fd);
        return path;
}

/* NB_TEST_HELPER in the environment replaces the helper under test: a
 * wrapper that runs it under valgrind (scripts/valgrind-helper.sh). */
const char *tu_helper_path(void)
{
        const char *p = getenv("NB_TEST_HELPER");

        return p && *p ? p : NB_TEST_HELPER;
}

/* Call fn with the link target of each of pid's fds ("socket:[123]",
 * "anon_inode:[eventfd]"...) until it returns true. -ENOENT when pid has
 * no /proc entry (gone). */
static int each_fd_target(pid_t pid, bool (*fn)(const char *target, void *data), void *data)
{
        char path[64], fd_path[320], target[64];
        struct dirent *e;
        DIR *d;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        d = opendir(path);
        if (!d)
                return -ENOENT;
        while ((e = readdir(d))) {
                ssize_t n;

                snprintf(fd_path, sizeof(fd_path), "%s/%s", path, e->d_name);
                n = readlink(fd_path, target, sizeof(target) - 1);
                if (n <= 0)
                        continue;
                target[n] = '\0';
                if (fn(target, data))
                        break;
        }
        closedir(d);
        return 0;
}

static bool is_eventfd(const char *target, void *data)
{
        bool *found = data;

        *found = strcmp(target, "anon_inode:[eventfd]") == 0;
        return *found;
}

/* Whether pid holds an eventfd: the helper's lanes hold one exactly while
 * a closure is outstanding (helper/lane.c, open_efd), and the start-up
 * sweep of the firewall table is one, submitted before the helper serves. */
static bool holds_eventfd(pid_t pid)
{
        bool found = false;

        (void)each_fd_target(pid, is_eventfd, &found); /* gone: the caller finds out */
        return found;
}

/* A test holding a lane on purpose (NETBROKERD_TEST_HOLD_*) may hold the
 * sweep: it waits for what it holds itself. */
static bool lane_held_on_purpose(void)
{
        extern char **environ;

        for (char **e = environ; *e; e++)
                if (strncmp(*e, "NETBROKERD_TEST_HOLD_", 21) == 0)
                        return true;
        return false;
}

void tu_helper_at_rest(pid_t pid)
{
        if (lane_held_on_purpose())
                return;
        /* Bounded for order only: 20 s, a sweep under valgrind on a loaded
         * machine included. */
        for (int i = 0; i < 10000 && holds_eventfd(pid); i++)
                usleep(2000);
        ck_assert_msg(!holds_eventfd(pid), "helper %d never came to rest (its lanes stay busy)",
                      (int)pid);
}

void tu_helper_start(struct tu_helper *h, const char *config_body)
{
        static unsigned seq;
        char *argv[] = {(char *)tu_helper_path(),
                        (char *)"--listen",
                        h->sock,
                        (char *)"--config",
                        NULL,
                        NULL};
        extern char **environ;

        h->config = tu_config(config_body);
        argv[4] = h->config;
        snprintf(h->sock, sizeof(h->sock), "/tmp/nbtest-%d-%u.sock", (int)getpid(), seq++);
        unlink(h->sock);
        ck_assert_int_eq(posix_spawn(&h->pid, argv[0], NULL, NULL, argv, environ), 0);
        /* The socket is bound first thing (stage 1), well before the helper
         * serves: wait until a Hello is answered, then until its start-up
         * sweep is done and its fd count is steady, so a test's "idle" fd
         * count (and counters) are the helper's at rest. Up to 10 s: under
         * valgrind the helper takes a second to bind. */
        for (int i = 0; i < 5000; i++) {
                struct stat st;
                if (stat(h->sock, &st) == 0 && tu_raw_try_connect(h->sock) == 0) {
                        int fd = tu_raw_connect(h->sock), last = -1, same = 0;
                        tu_raw_hello(fd);
                        close(fd);
                        tu_helper_at_rest(h->pid);
                        for (int k = 0; k < 200 && same < 5; k++) {
                                int n = tu_fd_count(h->pid);
                                same = n == last ? same + 1 : 0;
                                last = n;
                                usleep(5000);
                        }
                        return;
                }
                usleep(2000);
        }
        ck_abort_msg("helper did not create %s", h->sock);
}

void tu_helper_stop(struct tu_helper *h)
{
        int status;

        kill(h->pid, SIGTERM);
        ck_assert_int_eq(waitpid(h->pid, &status, 0), h->pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "helper exit status %d",
                      status);
        unlink(h->sock);
        free(h->config);
}

/* 0 once something accepts connections at sock (between bind and listen
 * a connect is refused), else -errno. */
int tu_raw_try_connect(const char *sock)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

        ck_assert_int_ge(fd, 0);
        strcpy(sa.sun_path, sock);
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        close(fd);
        return r;
}

int tu_raw_connect(const char *sock)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        strcpy(sa.sun_path, sock);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

int tu_raw_send(int fd, const void *body, size_t len, const int *fds, size_t nfds)
{
        struct nbp_frame_out *f;
        int r = nbp_frame_out_new(len, &f);

        ck_assert_int_eq(r, 0);
        memcpy(f->buf + NBP_FRAME_HEADER_SIZE, body, len);
        /* The frame closes the fds it sent: give it copies. */
        for (size_t i = 0; i < nfds; i++)
                f->fds[f->nfds++] = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
        do
                r = nbp_frame_write(fd, f);
        while (r == 0);
        nbp_frame_out_free(f);
        return r < 0 ? r : 0;
}

int tu_raw_send_msg(int fd, const ProtobufCMessage *m, const int *fds, size_t nfds)
{
        size_t len = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(len + 1);
        int r;

        protobuf_c_message_pack(m, buf);
        r = tu_raw_send(fd, buf, len, fds, nfds);
        free(buf);
        return r;
}

Netbroker__ServerMessage *tu_raw_recv(int fd, int *ret_err)
{
        struct nbp_frame_reader rd;
        Netbroker__ServerMessage *m;
        uint8_t *body;
        size_t len, nfds;
        int fds[NBP_FRAME_MAX_FDS];
        bool trunc;
        int r;

        nbp_frame_reader_init(&rd, 64u << 20, NBP_FRAME_MAX_FDS);
        do
                r = nbp_frame_read(fd, &rd);
        while (r == 0);
        if (r < 0) {
                nbp_frame_reader_reset(&rd);
                if (ret_err)
                        *ret_err = r;
                return NULL;
        }
        nbp_frame_reader_take(&rd, &body, &len, fds, &nfds, &trunc);
        nbp_close_fds(fds, nfds);
        m = netbroker__server_message__unpack(NULL, len, body);
        free(body);
        if (ret_err)
                *ret_err = m ? 0 : -EBADMSG;
        return m;
}

void tu_raw_hello_events(int fd, bool events)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Hello h = NETBROKER__HELLO__INIT;
        Netbroker__ServerMessage *r;

        h.version = NBP_PROTOCOL_VERSION;
        h.events = events;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_HELLO;
        m.hello = &h;
        ck_assert_int_eq(tu_raw_send_msg(fd, &m.base, NULL, 0), 0);
        r = tu_raw_recv(fd, NULL);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->msg_case, NETBROKER__SERVER_MESSAGE__MSG_HELLO);
        ck_assert_msg(r->hello->events, "the helper does not say it sends events");
        netbroker__server_message__free_unpacked(r, NULL);
}

void tu_raw_hello(int fd)
{
        tu_raw_hello_events(fd, false);
}

static void expect_error_then_end(int fd, int status, const char *needle, bool reset_ok)
{
        int err;
        Netbroker__ServerMessage *m = tu_raw_recv(fd, &err);

        ck_assert_msg(m != NULL, "no Error message (err %d)", err);
        ck_assert_int_eq(m->msg_case, NETBROKER__SERVER_MESSAGE__MSG_ERROR);
        ck_assert_int_eq(m->error->status, status);
        ck_assert_msg(strstr(m->error->message, needle), "message: %s", m->error->message);
        netbroker__server_message__free_unpacked(m, NULL);
        ck_assert_ptr_null(tu_raw_recv(fd, &err));
        if (reset_ok)
                ck_assert_msg(err == -EPIPE || err == -ECONNRESET, "err %d", err);
        else
                ck_assert_int_eq(err, -EPIPE);
}

void tu_raw_expect_error_and_close(int fd, int status, const char *needle)
{
        expect_error_then_end(fd, status, needle, false);
}

void tu_raw_expect_error_and_close_or_reset(int fd, int status, const char *needle)
{
        expect_error_then_end(fd, status, needle, true);
}

int tu_fd_count(pid_t pid)
{
        char path[64];
        DIR *d;
        struct dirent *e;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d)))
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        /* Our own opendir fd is counted when pid is us. */
        return pid == getpid() ? n - 1 : n;
}

int tu_netlink_sockets(pid_t pid, int protocol)
{
        return tu_netlink_sockets_in(pid, protocol, 0);
}

struct socket_inodes {
        unsigned long v[256];
        size_t n;
};

static bool add_socket_inode(const char *target, void *data)
{
        struct socket_inodes *in = data;
        unsigned long ino;

        if (sscanf(target, "socket:[%lu]", &ino) == 1)
                in->v[in->n++] = ino;
        return in->n == sizeof(in->v) / sizeof(in->v[0]);
}

/* pid's netlink sockets of protocol in group (0: any): how many, their
 * Drops added into *drops and their inodes into ino[cap] (NULL: not
 * wanted). The listing walks the kernel's netlink hash table, which is
 * shared by every namespace and resized as sockets come and go (another
 * test's, under ctest -j2): a resize during the walk lists some sockets
 * twice, so each inode counts once. */
static int netlink_sockets(pid_t pid, int protocol, unsigned group, unsigned long *drops,
                           unsigned long *inodes, size_t cap)
{
        struct socket_inodes in = {.n = 0};
        bool seen[sizeof(in.v) / sizeof(in.v[0])] = {false};
        char path[64], line[512];
        int n = 0;
        FILE *f;

        ck_assert_int_eq(each_fd_target(pid, add_socket_inode, &in), 0);
        /* sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode */
        snprintf(path, sizeof(path), "/proc/%d/net/netlink", (int)pid);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f)) {
                int eth;
                unsigned long ino, d;
                unsigned groups;

                if (sscanf(line, "%*s %d %*s %x %*s %*s %*s %*s %lu %lu", &eth, &groups, &d,
                           &ino) != 4 ||
                    eth != protocol || (group && !(groups & (1u << (group - 1)))))
                        continue;
                for (size_t i = 0; i < in.n; i++)
                        if (in.v[i] == ino) {
                                if (seen[i])
                                        break;
                                seen[i] = true;
                                if (inodes && (size_t)n < cap)
                                        inodes[n] = ino;
                                n++;
                                if (drops)
                                        *drops += d;
                                break;
                        }
        }
        fclose(f);
        return n;
}

int tu_netlink_sockets_in(pid_t pid, int protocol, unsigned group)
{
        return netlink_sockets(pid, protocol, group, NULL, NULL, 0);
}

static int ulong_cmp(const void *a, const void *b)
{
        unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

        return x < y ? -1 : x > y;
}

size_t tu_netlink_inodes(pid_t pid, int protocol, unsigned long *inodes, size_t cap)
{
        int n = netlink_sockets(pid, protocol, 0, NULL, inodes, cap);

        ck_assert_int_le(n, (int)cap);
        qsort(inodes, (size_t)n, sizeof(*inodes), ulong_cmp);
        return (size_t)n;
}

unsigned long tu_netlink_drops(pid_t pid, int protocol)
{
        unsigned long drops = 0;

        (void)netlink_sockets(pid, protocol, 0, &drops, NULL, 0);
        return drops;
}

int tu_fd_count_settled(pid_t pid, int expected, unsigned ms)
{
        int n = -1;

        for (unsigned i = 0; i < ms / 5; i++) {
                n = tu_fd_count(pid);
                if (n == expected)
                        break;
                usleep(5000);
        }
        return n;
}

static bool add_target(const char *target, void *data)
{
        char *list = data;
        size_t len = strlen(list);

        snprintf(list + len, 512 - len, "%s%s", len ? " " : "", target);
        return false;
}

void tu_assert_fd_count_settles(pid_t pid, int expected, unsigned ms)
{
        int n = tu_fd_count_settled(pid, expected, ms);
        char list[512] = "";

        if (n != expected)
                (void)each_fd_target(pid, add_target, list);
        ck_assert_msg(n == expected, "helper has %d fds, expected %d: %s", n, expected, list);
}

static int scan_children(pid_t pid, bool zombies_only)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d))) {
                char path[300], buf[512], state;
                int ppid;
                FILE *f;
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                if (fgets(buf, sizeof(buf), f)) {
                        char *p = strrchr(buf, ')');
                        if (p && sscanf(p + 2, "%c %d", &state, &ppid) == 2 && ppid == pid &&
                            (!zombies_only || state == 'Z'))
                                n++;
                }
                fclose(f);
        }
        closedir(d);
        return n;
}

/* The state letter of /proc/PID/task/TID/stat (or /proc/PID/stat), 0 if
 * it cannot be read. */
static char task_state(const char *path)
{
        char buf[512], state = 0;
        FILE *f = fopen(path, "re");

        if (!f)
                return 0;
        if (fgets(buf, sizeof(buf), f)) {
                char *p = strrchr(buf, ')');
                if (p)
                        state = p[2];
        }
        fclose(f);
        return state;
}

/* Alive while any of its threads is: the helper's lanes are threads, and
 * its leader shows 'Z' while they are still exiting, its fds still open. */
bool tu_process_alive(pid_t pid)
{
        char path[96];
        struct dirent *e;
        bool alive = false;
        DIR *d;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        d = opendir(path);
        if (!d) {
                char state;
                snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
                state = task_state(path);
                return state != 0 && state != 'Z' && state != 'X';
        }
        while (!alive && (e = readdir(d))) {
                char state;
                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", (int)pid, e->d_name);
                state = task_state(path);
                alive = state != 0 && state != 'Z' && state != 'X';
        }
        closedir(d);
        return alive;
}

int tu_zombies_of(pid_t pid)
{
        return scan_children(pid, true);
}

int tu_children_of(pid_t pid)
{
        return scan_children(pid, false);
}

const char *tu_read_file(const char *path)
{
        static char buf[16384];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        ck_assert_int_ge(fd, 0);
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
        return buf;
}

nb_conn *tu_spawn(const char *config_body)
{
        char *conf = tu_config(config_body);
        nb_spawn_opts o = {.size = sizeof(nb_spawn_opts), .config_path = conf};
        nb_conn *c = NULL;
        int r = nb_spawn(tu_helper_path(), &o, &c);

        free(conf);
        ck_assert_msg(r == 0, "nb_spawn: %s", strerror(-r));
        tu_helper_at_rest(nb_conn_helper_pid(c));
        return c;
}

void tu_spawn_expect_failure(const char *helper, const char *config_body, int expected, char *buf,
                             size_t size)
{
        char *conf = tu_config(config_body);
        nb_spawn_opts o = {.size = sizeof(nb_spawn_opts), .config_path = conf};
        nb_conn *c = NULL;
        int pipefd[2], saved, r;
        ssize_t n;

        /* Catch the helper's stderr, where it explains itself. */
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        saved = dup(2);
        dup2(pipefd[1], 2);
        r = nb_spawn(helper, &o, &c);
        dup2(saved, 2);
        close(saved);
        close(pipefd[1]);
        ck_assert_int_eq(r, expected);
        n = read(pipefd[0], buf, size - 1);
        ck_assert_int_gt(n, 0);
        buf[n] = '\0';
        close(pipefd[0]);
        free(conf);
}

nb_results *tu_submit(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;
        int r = nb_submit(c, b, &res);

        ck_assert_msg(r == 0, "nb_submit: %s (%s)", strerror(-r), nb_conn_error(c));
        nb_batch_free(b);
        return res;
}

nb_results *tu_submit_ok(nb_conn *c, nb_batch *b)
{
        nb_results *res = tu_submit(c, b);
        long bad = nb_results_first_error(res);

        ck_assert_msg(bad < 0, "op %ld failed: %s (%s)", bad,
                      bad < 0 ? "" : strerror(-nb_result_status(res, (size_t)bad)),
                      bad < 0 ? "" : nb_result_message(res, (size_t)bad));
        return res;
}

void tu_assert_status(const nb_results *res, size_t i, int status, const char *needle)
{
        ck_assert_msg(nb_result_status(res, i) == status, "op %zu: status %d (%s), wanted %d", i,
                      nb_result_status(res, i), nb_result_message(res, i), status);
        ck_assert_msg(!needle || strstr(nb_result_message(res, i), needle),
                      "op %zu: message '%s' lacks '%s'", i, nb_result_message(res, i), needle);
}

nb_results *tu_exec1(nb_conn *c, const char *path, const char *const *argv, const char *const *env,
                     const char *in, unsigned timeout_ms)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;

        ck_assert_int_eq(nb_batch_exec(b, path, argv, env, in, in ? strlen(in) : 0, timeout_ms), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        nb_batch_free(b);
        return res;
}

/* ---- network namespaces and the real tools ---- */

void tu_private_netns(void)
{
        const char *path = getenv("PATH");
        char *grown;

        ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s", strerror(errno));
        /* ip(8) lives in sbin, which a non-login root shell may lack. */
        ck_assert_int_ge(asprintf(&grown, "%s:/usr/sbin:/sbin:/usr/bin:/bin", path ? path : ""), 0);
        setenv("PATH", grown, 1);
        free(grown);
}

int tu_new_netns_fd(void)
{
        int here = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), there;

        ck_assert_int_ge(here, 0);
        ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s", strerror(errno));
        there = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(there, 0);
        ck_assert_msg(setns(here, CLONE_NEWNET) == 0, "setns back: %s", strerror(errno));
        close(here);
        return there;
}

int tu_run(const char *const argv[], char **out)
{
        posix_spawn_file_actions_t fa;
        extern char **environ;
        int pipefd[2], status, r;
        size_t len = 0, cap = 4096;
        char *buf = malloc(cap);
        pid_t pid;
        ssize_t n;

        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        r = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        ck_assert_msg(r == 0, "cannot run %s: %s", argv[0], strerror(r));
        while ((n = read(pipefd[0], buf + len, cap - len - 1)) > 0 || (n < 0 && errno == EINTR)) {
                if (n < 0)
                        continue;
                len += (size_t)n;
                if (cap - len < 2) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                        ck_assert_ptr_nonnull(buf);
                }
        }
        close(pipefd[0]);
        buf[len] = '\0';
        while (waitpid(pid, &status, 0) < 0)
                ck_assert_int_eq(errno, EINTR);
        if (out)
                *out = buf;
        else
                free(buf);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

char *tu_sh(const char *fmt, ...)
{
        va_list ap;
        char *cmd, *out;
        int r;

        va_start(ap, fmt);
        ck_assert_int_ge(vasprintf(&cmd, fmt, ap), 0);
        va_end(ap);
        r = tu_run((const char *const[]){"/bin/sh", "-c", cmd, NULL}, &out);
        ck_assert_msg(r == 0, "'%s' exited with %d", cmd, r);
        free(cmd);
        return out;
}

char *tu_log_quote(const char *text)
{
        size_t lines = 1;
        char *out, *o;

        for (const char *p = text; *p; p++)
                lines += *p == '\n';
        out = malloc(strlen(text) + 2 * lines + 1);
        ck_assert_ptr_nonnull(out);
        o = out;
        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n');
                size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
                memcpy(o, "| ", 2);
                memcpy(o + 2, p, n);
                o += 2 + n;
                p += n;
        }
        *o = '\0';
        return out;
}

/* tests/py/link_get.py walks the path; it exits 3 when there is no such
 * device. */
const char *tu_link_get_ns(const char *netns, const char *dev, const char *path)
{
        static char ring[16][1024];
        static unsigned next;
        char *out, *slot = ring[next++ % 16];
        int r = tu_run((const char *const[]){"/usr/bin/python3", TU_PY("link_get.py"),
                                             netns ? netns : "", dev, path, NULL},
                       &out);

        ck_assert_msg(r == 0 || r == 3, "reading %s of %s failed (%d)", path, dev, r);
        snprintf(slot, sizeof(ring[0]), "%s", out);
        free(out);
        return r == 3 ? NULL : slot;
}

const char *tu_link_get(const char *dev, const char *path)
{
        return tu_link_get_ns(NULL, dev, path);
}

bool tu_link_exists(const char *dev)
{
        return tu_link_get(dev, "ifname") != NULL;
}

char *tu_link_names(void)
{
        char *names = tu_sh("/usr/bin/python3 '" TU_PY("link_names.py") "'");

        return names;
}

char *tu_links_snapshot(void)
{
        return tu_sh("ip -d -j link show");
}

void tu_veth(const char *name, const char *peer)
{
        free(tu_sh("ip link add %s type veth peer name %s", name, peer));
}

void tu_veths(const char *prefix, int n)
{
        char path[64];
        FILE *f;

        snprintf(path, sizeof(path), "/tmp/nbtest-veths-%d", (int)getpid());
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        for (int i = 0; i < n; i++)
                fprintf(f, "link add %s%03d type veth peer name %sp%03d\n", prefix, i, prefix, i);
        fclose(f);
        free(tu_sh("ip -batch %s", path));
        unlink(path);
}

int tu_main_in_netns(const char *prog, const char *why_root, int argc, char **argv,
                     Suite *(*const suites[])(void))
{
        SRunner *sr;
        int failed;

        /* 77: ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt), so a build
         * without privileges reports these suites as skipped, not failed. */
        if (geteuid() != 0) {
                fprintf(stderr, "%s: skipped: needs root (%s)\n", prog, why_root);
                return 77;
        }
        if (unshare(CLONE_NEWNET) < 0) {
                fprintf(stderr,
                        "%s: skipped: cannot create a network namespace to run in "
                        "(unshare(CLONE_NEWNET): %s)\n",
                        prog, strerror(errno));
                return 77;
        }
        sr = srunner_create(suites[0]());
        for (size_t i = 1; suites[i]; i++)
                srunner_add_suite(sr, suites[i]());
        if (argc > 1)
                srunner_run(sr, NULL, argv[1], CK_NORMAL); /* run one test case */
        else
                srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

uint64_t tu_stat(nb_conn *c, const char *name)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        uint64_t v = 0;

        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(nb_batch_stats(b), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        nb_batch_free(b);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert_msg(nb_result_stat(res, 0, name, &v) == 0, "no counter %s", name);
        nb_results_free(res);
        return v;
}

void tu_clean_traffic(nb_batch *b, const char *owner, const char *ifname)
{
        static const char *const ips[] = {"192.168.100.50", NULL};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();

        ck_assert_ptr_nonnull(rs);
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, "52:54:00:00:00:01", ips), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, owner, ifname, rs, NB_FW_REPLACE), 0);
        nb_fw_ruleset_free(rs);
}
