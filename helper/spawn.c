// SPDX-License-Identifier: LGPL-2.1-or-later
/* Child processes; see spawn.h. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_start.h"
#include "log.h"
#include "program.h"
#include "stats.h"

NBD_LOG_CATEGORY(spawn);

/* How long a child runs before its output pipes are watched. Most allowed
 * programs (ip, tc, iptables) end well within it, having written less than
 * a pipe holds (64 KiB): their output is read once, after the exit, and the
 * helper wakes once for them, not once more for each pipe's end of file
 * (the child closes its pipes just before it exits, and each close woke the
 * helper on its own). A program that writes more waits at most this long
 * once. */
#define OUTPUT_WATCH_DELAY_MS 10

struct nbd_child {
        struct nbd_loop *loop;
        pid_t pid;
        struct nbd_watch pidw, inw, outw, errw;
        struct nbd_timer timer, output_timer;
        bool out_watched, err_watched; /* see OUTPUT_WATCH_DELAY_MS */
        const uint8_t *in_data;
        size_t in_len, in_off;
        size_t cap;
        uint64_t start_us;
        bool reaped, abandoned;
        bool as_caller; /* run as its caller: a fork (child_start.h) */
        uid_t uid; /* who asked: spawn slots are shared per uid */
        struct nbd_child *prev, *next; /* running (not yet reaped) */
        nbd_child_done_fn done;
        void *data;
        struct nbd_child_result res;
};

static unsigned running;
static struct nbd_child *running_list;
static void (*reaped_fn)(void *data);
static void *reaped_data;

void nbd_children_on_reaped(void (*fn)(void *data), void *data)
{
        reaped_fn = fn;
        reaped_data = data;
}

unsigned nbd_children_running(void)
{
        return running;
}

void nbd_children_slot_freed(void)
{
        if (reaped_fn)
                reaped_fn(reaped_data);
}

unsigned nbd_children_running_of(uid_t uid)
{
        /* A supervised program holds its caller's slot while it runs. */
        unsigned n = nbd_programs_running_of(uid);

        for (const struct nbd_child *c = running_list; c; c = c->next)
                n += c->uid == uid;
        return n;
}

static void running_add(struct nbd_child *c)
{
        running++;
        c->prev = NULL;
        c->next = running_list;
        if (running_list)
                running_list->prev = c;
        running_list = c;
}

static void running_remove(struct nbd_child *c)
{
        running--;
        if (c->prev)
                c->prev->next = c->next;
        else
                running_list = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
}

struct nbd_child_result *nbd_child_result(struct nbd_child *c)
{
        return &c->res;
}

static bool watched(const struct nbd_child *c, const struct nbd_watch *w)
{
        if (w == &c->outw)
                return c->out_watched;
        if (w == &c->errw)
                return c->err_watched;
        return true;
}

static void close_watch(struct nbd_child *c, struct nbd_watch *w)
{
        int fd = w->fd;

        if (fd < 0)
                return;
        if (watched(c, w))
                nbd_loop_remove(c->loop, w);
        w->fd = -1;
        close(fd);
}

static void close_all(struct nbd_child *c)
{
        close_watch(c, &c->pidw);
        close_watch(c, &c->inw);
        close_watch(c, &c->outw);
        close_watch(c, &c->errw);
        nbd_timer_cancel(c->loop, &c->timer);
        nbd_timer_cancel(c->loop, &c->output_timer);
}

static void free_child(void *p)
{
        struct nbd_child *c = p;

        free(c->res.out.data);
        free(c->res.err.data);
        free(c);
}

void nbd_child_free(struct nbd_child *c)
{
        if (!c)
                return;
        close_all(c);
        nbd_loop_defer_free(c->loop, free_child, c);
}

/* Read without blocking from our end of a child's output pipe, which is
 * not O_NONBLOCK (the flag would be the child's end's too: a program
 * writing faster than we read would fail with EAGAIN): RWF_NOWAIT, which
 * pipes honour since Linux 5.x (two fcntl() calls a spawn less). A kernel
 * without it says EOPNOTSUPP once; from then on each read first makes our
 * end non-blocking. */
static ssize_t read_nowait(int fd, void *buf, size_t len)
{
        static bool no_rwf_nowait;
        struct iovec iov = {buf, len};
        ssize_t n;

        if (!no_rwf_nowait) {
                n = preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
                if (n >= 0 || errno != EOPNOTSUPP)
                        return n;
                no_rwf_nowait = true;
        }
        if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
                return -1;
        return read(fd, buf, len);
}

/* Append what the pipe has; beyond the cap, read and drop so the child never
 * blocks on a full pipe. Returns true at end of file or on error. */
static bool drain(int fd, struct nbd_buf *b, size_t cap, bool *truncated)
{
        uint8_t scratch[16384];

        for (;;) {
                uint8_t *dst = scratch;
                size_t room = sizeof(scratch);
                ssize_t n;

                if (b->len < cap) {
                        if (b->cap - b->len < sizeof(scratch) && b->cap < cap) {
                                size_t ncap = b->cap ? b->cap * 2 : sizeof(scratch);
                                uint8_t *p;
                                if (ncap > cap)
                                        ncap = cap;
                                p = realloc(b->data, ncap);
                                if (p) {
                                        b->data = p;
                                        b->cap = ncap;
                                }
                        }
                        if (b->cap > b->len) {
                                dst = b->data + b->len;
                                room = b->cap - b->len;
                        }
                }
                n = read_nowait(fd, dst, room);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno != EAGAIN;
                if (n == 0)
                        return true;
                if (dst == scratch)
                        *truncated = true;
                else
                        b->len += (size_t)n;
        }
}

static void on_out(struct nbd_watch *w, uint32_t events)
{
        struct nbd_child *c = w->data;
        bool eof;

        (void)events;
        if (w == &c->outw)
                eof = drain(w->fd, &c->res.out, c->cap, &c->res.out_truncated);
        else
                eof = drain(w->fd, &c->res.err, c->cap, &c->res.err_truncated);
        if (eof)
                close_watch(c, w);
}

static void on_in(struct nbd_watch *w, uint32_t events)
{
        struct nbd_child *c = w->data;

        (void)events;
        while (c->in_off < c->in_len) {
                ssize_t n = write(w->fd, c->in_data + c->in_off, c->in_len - c->in_off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0) /* EPIPE: the child does not want the rest */
                        break;
                c->in_off += (size_t)n;
        }
        close_watch(c, w);
}

static void finish(struct nbd_child *c)
{
        /* The child is gone; what it wrote is in the pipes. Take it now. A
         * grandchild still holding a pipe open does not keep us waiting. */
        if (c->outw.fd >= 0)
                drain(c->outw.fd, &c->res.out, c->cap, &c->res.out_truncated);
        if (c->errw.fd >= 0)
                drain(c->errw.fd, &c->res.err, c->cap, &c->res.err_truncated);
        close_all(c);
        /* A caller's child that never ran its program said why instead. */
        if (c->as_caller && !c->res.signal &&
            (c->res.start_error =
                     nbd_child_start_error(c->res.exit_code, c->res.err.data, c->res.err.len)))
                c->res.err.len = 0;
        c->res.duration_us = nbd_now_us() - c->start_us;
        running_remove(c);
        if (reaped_fn)
                reaped_fn(reaped_data);
        if (c->abandoned) {
                nbd_loop_defer_free(c->loop, free_child, c);
                return;
        }
        c->done(c, c->data);
}

static void on_exit_ready(struct nbd_watch *w, uint32_t events)
{
        struct nbd_child *c = w->data;
        siginfo_t si = {0};

        (void)events;
        if (waitid((idtype_t)P_PIDFD, (id_t)w->fd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return;
        c->reaped = true;
        if (si.si_code == CLD_EXITED)
                c->res.exit_code = si.si_status;
        else
                c->res.signal = si.si_status;
        nbd_debug("pid %d ended: code %d signal %d", (int)c->pid, c->res.exit_code, c->res.signal);
        finish(c);
}

static void kill_child(struct nbd_child *c)
{
        /* The child leads its own process group (child_start.c), once it
         * has made it, and is not reaped yet: nbd_child_kill(). */
        nbd_child_kill(c->pid, c->pidw.fd);
}

static void on_timeout(void *data)
{
        struct nbd_child *c = data;

        nbd_info("pid %d (%s) timed out; killing it", (int)c->pid, c->data ? "exec" : "abandoned");
        c->res.timed_out = true;
        nbd_stat_inc(NBD_STAT_EXEC_TIMEOUTS);
        kill_child(c);
}

void nbd_child_abandon(struct nbd_child *c)
{
        if (!c)
                return;
        if (c->reaped) {
                nbd_child_free(c);
                return;
        }
        c->abandoned = true;
        close_watch(c, &c->inw);
        close_watch(c, &c->outw);
        close_watch(c, &c->errw);
        nbd_timer_cancel(c->loop, &c->timer);
        nbd_timer_cancel(c->loop, &c->output_timer);
        kill_child(c);
}

/* Only for the stdin pipe's end, which pipe2() just made: its one status
 * flag is its access mode, which F_SETFL leaves alone, so there is nothing
 * to read first (a syscall costs 1.5 us on a paravirtualised guest). */
static int set_nonblock(int fd)
{
        return fcntl(fd, F_SETFL, O_NONBLOCK) < 0 ? -errno : 0;
}

static int start(struct nbd_child *c, const struct nbd_exec_spec *s, int stdin_fd, int out[2],
                 int err[2])
{
        /* Without input the child opens /dev/null itself: no pipe. */
        const struct nbd_child_start cs = {
                .path = s->path,
                .argv = s->argv,
                .envp = s->envp,
                .fds = {stdin_fd >= 0 ? stdin_fd : NBD_CHILD_NULL, out[1], err[1]},
                .as = s->as,
                .test_stop = s->test_stop,
        };

        c->as_caller = s->as && s->as->uid != 0;
        return nbd_child_start(&cs, &c->pid);
}

static int watch_child(struct nbd_loop *l, struct nbd_child *c, int in[2], int out[2], int err[2])
{
        int pidfd = pidfd_open(c->pid, 0), r;

        if (pidfd < 0)
                return -errno;
        r = nbd_loop_add(l, &c->pidw, pidfd, EPOLLIN, on_exit_ready, c);
        if (r < 0) {
                close(pidfd);
                return r;
        }
        /* Taken now, watched from on_output_timer(); finish() reads what a
         * child that ended sooner wrote; read_nowait() reads them. */
        c->outw = (struct nbd_watch){.fd = out[0], .fn = on_out, .data = c};
        c->errw = (struct nbd_watch){.fd = err[0], .fn = on_out, .data = c};
        out[0] = err[0] = -1;
        /* Without input there is no pipe (the child has /dev/null). */
        if (c->in_len > 0) {
                if ((r = set_nonblock(in[1])) < 0 ||
                    (r = nbd_loop_add(l, &c->inw, in[1], EPOLLOUT, on_in, c)) < 0)
                        return r;
                in[1] = -1;
        }
        return 0;
}

/* The child still runs: read its output as it comes, so that it never
 * blocks on a full pipe. If a pipe cannot be watched (no memory for it),
 * what the child wrote is still read when it ends; only a child that
 * fills the pipe waits, until its timeout. */
static void on_output_timer(void *data)
{
        struct nbd_child *c = data;
        int r = 0;

        if (c->outw.fd >= 0 && !c->out_watched) {
                int fd = c->outw.fd;
                r = nbd_loop_add(c->loop, &c->outw, fd, EPOLLIN, on_out, c);
                c->out_watched = r == 0;
                c->outw.fd = fd;
        }
        if (r == 0 && c->errw.fd >= 0 && !c->err_watched) {
                int fd = c->errw.fd;
                r = nbd_loop_add(c->loop, &c->errw, fd, EPOLLIN, on_out, c);
                c->err_watched = r == 0;
                c->errw.fd = fd;
        }
        if (r < 0)
                nbd_warn("pid %d: cannot watch its output (%s): it is read when it ends",
                         (int)c->pid, strerror(-r));
}

static void close_pipes(int in[2], int out[2], int err[2])
{
        for (int i = 0; i < 2; i++) {
                if (in[i] >= 0)
                        close(in[i]);
                if (out[i] >= 0)
                        close(out[i]);
                if (err[i] >= 0)
                        close(err[i]);
                in[i] = out[i] = err[i] = -1;
        }
}

int nbd_child_spawn(struct nbd_loop *l, const struct nbd_exec_spec *s, nbd_child_done_fn done,
                    void *data, struct nbd_child **ret)
{
        int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
        struct nbd_child *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->loop = l;
        c->pidw.fd = c->inw.fd = c->outw.fd = c->errw.fd = -1;
        c->in_data = s->stdin_data;
        c->in_len = s->stdin_len;
        c->cap = s->output_cap;
        c->done = done;
        c->data = data;
        c->start_us = nbd_now_us();
        /* A child without input reads /dev/null, which it opens itself
         * (file_actions): no pipe to make and close here. */
        if ((c->in_len > 0 && pipe2(in, O_CLOEXEC) < 0) || pipe2(out, O_CLOEXEC) < 0 ||
            pipe2(err, O_CLOEXEC) < 0) {
                r = -errno;
                goto fail;
        }
        r = start(c, s, in[0], out, err);
        if (r < 0)
                goto fail;
        nbd_stat_inc(NBD_STAT_SPAWNS);
        c->uid = s->uid;
        running_add(c);
        /* The child has its copies; ours of its ends must go now so that EOF
         * on the pipes means the child (and its children) closed them. */
        if (in[0] >= 0)
                close(in[0]), in[0] = -1;
        close(out[1]), out[1] = -1;
        close(err[1]), err[1] = -1;
        r = watch_child(l, c, in, out, err);
        close_pipes(in, out, err);
        if (r < 0) {
                /* Could not watch it: kill and reap at once, so no zombie and
                 * no stray process is left (the child itself too: stopped,
                 * or before its group is made, the group's kill misses it,
                 * and the wait would be for ever). */
                nbd_child_kill(c->pid, -1);
                waitpid(c->pid, NULL, 0);
                running_remove(c);
                close_all(c);
                free_child(c);
                return r;
        }
        nbd_timer_arm(l, &c->timer, s->timeout_ms, on_timeout, c);
        nbd_timer_arm(l, &c->output_timer, OUTPUT_WATCH_DELAY_MS, on_output_timer, c);
        nbd_debug("spawned %s as pid %d", s->path, (int)c->pid);
        *ret = c;
        return 0;
fail:
        nbd_stat_inc(NBD_STAT_SPAWN_FAILURES);
        close_pipes(in, out, err);
        free_child(c);
        return r;
}
