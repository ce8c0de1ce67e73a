// SPDX-License-Identifier: LGPL-2.1-or-later
/* Shared fuzzing set-up; see harness.h. */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bandwidth.h"
#include "fake_kernel.h"
#include "firewall.h"
#include "link.h"
#include "log.h"
#include "loop.h"

static const char *const programs[] = {
        "/bin/true", "/bin/false", "/bin/cat", "/bin/sleep", "/usr/sbin/missing", "/bin/fail",
};
static const char *const env_names[] = {"FOO", "LC_ALL"};

void nb_harness_fail(const char *file, int line, const char *what)
{
        fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
        abort();
}

/* Open fds, counted in /proc: a leaked fd may sit above a free one. */
static int count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        int n = 0;

        if (!d)
                nb_harness_fail(__FILE__, __LINE__, "opendir /proc/self/fd");
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static struct nb_harness *harness_get(void)
{
        static struct nb_harness h;
        static bool ready;
        struct nbd_links *links;
        struct nbd_fw *fw;
        struct nbd_bw *bw;

        if (ready)
                return &h;
        nbd_log_configure(NBD_LOG_ERR, NULL, false);
        nbd_config_defaults(&h.cfg);
        nbd_config_free(&h.cfg);
        /* Set as nbd_config_load() would after checking them (the spawn
         * here is the fake kernel's, which runs nothing). */
        for (size_t i = 0; i < sizeof(programs) / sizeof(*programs); i++) {
                h.cfg.exec_allow[i] = strdup(programs[i]);
                h.cfg.exec_real[i] = strdup(programs[i]);
        }
        h.cfg.n_exec_allow = sizeof(programs) / sizeof(*programs);
        /* The variables the seed requests set (tests/fuzz/requests.c). */
        for (size_t i = 0; i < sizeof(env_names) / sizeof(*env_names); i++)
                h.cfg.exec_env_allow[h.cfg.n_exec_env_allow++] = strdup(env_names[i]);
        /* Small enough that a fuzzer's input reaches every limit. */
        h.cfg.max_frame = 64 * 1024;
        h.cfg.max_ops = 64;
        h.cfg.max_args = 16;
        h.cfg.max_spawns = 1;
        h.cfg.max_pending_spawns = 1;
        h.cfg.max_requests_per_connection = 2;
        h.cfg.exec_output_cap = 128;
        h.cfg.max_reply = 512;
        h.cfg.exec_timeout_max_ms = 10000;
        h.cfg.allow_uids[0] = geteuid();
        if (nbd_loop_new(&h.loop) < 0 || nbd_fake_backend.links.open(h.loop, NULL, &links) < 0 ||
            nbd_fake_backend.fw.open(h.loop, &fw) < 0 || nbd_fake_backend.bw.open(NULL, &bw) < 0)
                nb_harness_fail(__FILE__, __LINE__, "set-up");
        h.ctx = (struct nbd_dispatch_ctx){.cfg = &h.cfg,
                                          .loop = h.loop,
                                          .be = &nbd_fake_backend,
                                          .links = links,
                                          .fw = fw,
                                          .bw = bw};
        h.netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        h.null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (h.netns_fd < 0 || h.null_fd < 0)
                nb_harness_fail(__FILE__, __LINE__, "open the netns and /dev/null");
        ready = true;
        return &h;
}

/* libFuzzer may hold an fd of its own (a corpus directory) while it runs
 * an input, so fds are counted per input, not once. */
struct nb_harness *nb_harness_begin(void)
{
        struct nb_harness *h = harness_get();

        h->fd_count = count_fds();
        return h;
}

static void tick(void *data)
{
        (void)data;
}

void nb_harness_step(struct nb_harness *h)
{
        /* A timer due now keeps nbd_loop_iterate from blocking. */
        static struct nbd_timer t;

        nbd_timer_arm(h->loop, &t, 0, tick, NULL);
        nbd_loop_iterate(h->loop);
}

int nb_harness_dup(int fd)
{
        return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

void nb_harness_check_clean(struct nb_harness *h)
{
        /* Deferred frees run at the end of an iteration. */
        nb_harness_step(h);
        NB_HARNESS_ASSERT(nb_fake_children() == 0);
        NB_HARNESS_ASSERT(nbd_jobs_waiting() == 0);
        NB_HARNESS_ASSERT(count_fds() == h->fd_count);
}

ssize_t nb_harness_send(int fd, const uint8_t *p, size_t len, const int *fds, size_t nfds)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * NB_HARNESS_SEND_FDS)];
                struct cmsghdr align;
        } ctrl;
        struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n;

        NB_HARNESS_ASSERT(nfds <= NB_HARNESS_SEND_FDS);
        if (nfds) {
                memset(&ctrl, 0, sizeof(ctrl));
                msg.msg_control = ctrl.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        return n < 0 ? -errno : n;
}

size_t nb_harness_decode_budget(size_t len)
{
        size_t b = 32 * len + (1u << 20);

        return b > (128u << 20) ? (128u << 20) : b;
}
