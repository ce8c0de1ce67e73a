// SPDX-License-Identifier: LGPL-2.1-or-later
/* The floors of spawn and roundtrip: a small process (this program run
 * again as `netbroker-bench --floor MODE ...`, a fresh image with fds 0-3
 * only), so that neither the fat parent's size nor its 500 fds inflate
 * what it measures. Over fd 3, a stream socket to the bench:
 *   spawn PATH ARG...  each byte read: posix_spawn PATH (stdin and stdout
 *                      /dev/null, the helper's environment), waitpid; the
 *                      nanoseconds of both as an int64, or -errno (-EIO:
 *                      it did not exit 0)
 *   pong Q R           each Q bytes read: R bytes written back
 * It exits at end of stream. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define FLOOR_FD 3
#define PONG_MAX 4096u

/* Exactly len bytes, or -errno (-EPIPE: end of stream). */
static int io_all(int fd, void *buf, size_t len, bool out)
{
        for (size_t done = 0; done < len;) {
                ssize_t n = out ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                                : read(fd, (char *)buf + done, len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n == 0 ? -EPIPE : -errno;
                done += (size_t)n;
        }
        return 0;
}

static int64_t spawn_one(char *const *argv)
{
        static char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
        uint64_t t0 = bench_now_ns();
        pid_t pid;
        int st, r = posix_spawn(&pid, argv[0], NULL, NULL, argv, env);

        if (r != 0)
                return -r;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? (int64_t)(bench_now_ns() - t0) : -EIO;
}

int bench_floor_main(int argc, char **argv)
{
        static char buf[PONG_MAX];
        unsigned q = argc == 3 ? (unsigned)atoi(argv[1]) : 0, rl = argc == 3 ? atoi(argv[2]) : 0;
        bool spawn = argc >= 2 && strcmp(argv[0], "spawn") == 0;
        int r = 0;

        if (!spawn && (argc != 3 || strcmp(argv[0], "pong") != 0 || !q || !rl || q > PONG_MAX ||
                       rl > PONG_MAX)) {
                fprintf(stderr, "netbroker-bench --floor: spawn PATH ARG... | pong Q R\n");
                return 2;
        }
        /* Not into the programs it runs. */
        if (fcntl(FLOOR_FD, F_SETFD, FD_CLOEXEC) < 0)
                return 1;
        while (r == 0) {
                int64_t ns;
                r = io_all(FLOOR_FD, buf, spawn ? 1 : q, false);
                ns = r == 0 && spawn ? spawn_one(argv + 1) : 0;
                if (r == 0)
                        r = spawn ? io_all(FLOOR_FD, &ns, sizeof(ns), true)
                                  : io_all(FLOOR_FD, buf, rl, true);
        }
        return r == -EPIPE ? 0 : 1;
}

int bench_floor_start(const char *const *args, struct bench_floor_proc *ret)
{
        char *argv[16] = {"netbroker-bench", "--floor"};
        int sv[2], null, r = 0;
        size_t n = 2;
        pid_t pid;

        for (; args[n - 2] && n + 1 < BENCH_N(argv); n++)
                argv[n] = (char *)args[n - 2];
        argv[n] = NULL;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid = fork();
        if (pid == 0) {
                /* Between fork and exec: system calls only. */
                null = open("/dev/null", O_RDWR);
                if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
                    dup2(sv[1], FLOOR_FD) < 0 || syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
                        _exit(127);
                execv("/proc/self/exe", argv);
                _exit(127);
        }
        if (pid < 0)
                r = -errno;
        close(sv[1]);
        if (r < 0) {
                close(sv[0]);
                bench_log("netbroker-bench: cannot start the floor process: %s\n", strerror(-r));
                return r;
        }
        *ret = (struct bench_floor_proc){.fd = sv[0], .pid = pid};
        return 0;
}

void bench_floor_stop(struct bench_floor_proc *p)
{
        if (p->pid <= 0)
                return;
        close(p->fd);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        *p = (struct bench_floor_proc){.fd = -1};
}

int bench_floor_spawn_once(struct bench_ctx *c, const struct bench_method *m, bool timed,
                           double *ret_us)
{
        const struct bench_floor_proc *p = m->arg;
        int64_t ns = 0;
        int r = io_all(p->fd, "s", 1, true);

        (void)c;
        (void)timed;
        if (r == 0)
                r = io_all(p->fd, &ns, sizeof(ns), false);
        if (r == 0 && ns < 0)
                r = (int)ns;
        if (r < 0)
                bench_log("netbroker-bench: floor %s: posix_spawn and wait: %s\n", m->name,
                          strerror(-r));
        else
                *ret_us = (double)ns / 1000.0;
        return r;
}

int bench_floor_pong_once(struct bench_ctx *c, const struct bench_method *m, bool timed,
                          double *ret_us)
{
        const struct bench_floor_proc *p = m->arg;
        static char reply[PONG_MAX];
        uint64_t t0 = bench_now_ns();
        int r = io_all(p->fd, (void *)p->req, p->req_len, true);

        (void)c;
        (void)timed;
        if (r == 0)
                r = io_all(p->fd, reply, p->reply_len, false);
        if (r < 0)
                bench_log("netbroker-bench: floor %s: ping-pong: %s\n", m->name, strerror(-r));
        else
                *ret_us = (double)(bench_now_ns() - t0) / 1000.0;
        return r;
}
