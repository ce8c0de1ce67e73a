// SPDX-License-Identifier: LGPL-2.1-or-later
/* Framing: see frame.h for the format and the rules. */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void nbp_close_fds(int *fds, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (fds[i] >= 0)
                        close(fds[i]);
                fds[i] = -1;
        }
}

static void drop_fds(struct nbp_frame_reader *r, int *fds, size_t n)
{
        if (!r->drop_fd) {
                nbp_close_fds(fds, n);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                if (fds[i] >= 0)
                        r->drop_fd(r->drop_data, fds[i]);
                fds[i] = -1;
        }
}

void nbp_frame_reader_init(struct nbp_frame_reader *r, size_t cap, size_t max_fds)
{
        memset(r, 0, sizeof(*r));
        r->cap = cap;
        r->max_fds = max_fds > NBP_FRAME_MAX_FDS ? NBP_FRAME_MAX_FDS : max_fds;
}

void nbp_frame_reader_reset(struct nbp_frame_reader *r)
{
        drop_fds(r, r->fds, r->nfds);
        free(r->body);
        r->body = NULL;
        r->hdr_got = r->len = r->got = r->nfds = r->oversize = 0;
        r->fds_truncated = false;
}

bool nbp_frame_reader_busy(const struct nbp_frame_reader *r)
{
        return r->hdr_got > 0;
}

/* Collect SCM_RIGHTS from one recvmsg. Fds beyond max_fds are closed at once
 * and the frame is marked truncated, exactly like a kernel-side MSG_CTRUNC. */
static void collect_fds(struct nbp_frame_reader *r, struct msghdr *msg)
{
        if (msg->msg_flags & MSG_CTRUNC)
                r->fds_truncated = true;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int *fds = (int *)CMSG_DATA(c);
                for (size_t i = 0; i < n; i++) {
                        int fd;
                        memcpy(&fd, &fds[i], sizeof(fd));
                        if (r->nfds < r->max_fds) {
                                r->fds[r->nfds++] = fd;
                        } else {
                                drop_fds(r, &fd, 1);
                                r->fds_truncated = true;
                        }
                }
        }
}

/* The peek of fds_fit (frame.h): 0 with *len set to what the real read
 * is to take (0: end of file), or -errno. */
static int peek_some(int fd, struct nbp_frame_reader *r, void *buf, size_t *len)
{
        struct iovec iov = {.iov_base = buf, .iov_len = *len};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n;

        do
                n = recvmsg(fd, &msg, MSG_PEEK);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (msg.msg_flags & MSG_CTRUNC) {
                int fit = r->fds_fit(r->drop_data, fd);
                if (fit < 0)
                        return fit;
        }
        *len = (size_t)n;
        return 0;
}

static ssize_t recv_some(int fd, struct nbp_frame_reader *r, void *buf, size_t len)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * NBP_FRAME_MAX_FDS)];
                struct cmsghdr align;
        } ctrl;
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = ctrl.buf,
                .msg_controllen = sizeof(ctrl.buf),
        };
        ssize_t n;

        if (r->fds_fit) {
                int p = peek_some(fd, r, buf, &iov.iov_len);
                if (p < 0)
                        return p;
                if (iov.iov_len == 0)
                        return 0;
        }
        do
                n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        collect_fds(r, &msg);
        return n;
}

int nbp_frame_read(int fd, struct nbp_frame_reader *r)
{
        while (r->hdr_got < NBP_FRAME_HEADER_SIZE) {
                ssize_t n =
                        recv_some(fd, r, r->hdr + r->hdr_got, NBP_FRAME_HEADER_SIZE - r->hdr_got);
                if (n == -EAGAIN)
                        return 0;
                if (n < 0)
                        return (int)n;
                if (n == 0)
                        return r->hdr_got == 0 && r->nfds == 0 ? -EPIPE : -ECONNRESET;
                r->hdr_got += (size_t)n;
                if (r->hdr_got < NBP_FRAME_HEADER_SIZE)
                        continue;
                r->len = (size_t)r->hdr[0] << 24 | (size_t)r->hdr[1] << 16 |
                         (size_t)r->hdr[2] << 8 | (size_t)r->hdr[3];
                if (r->len > r->cap) {
                        r->oversize = r->len;
                        return -EMSGSIZE;
                }
                /* One extra byte so an empty body still gets a distinct pointer. */
                r->body = malloc(r->len + 1);
                if (!r->body)
                        return -ENOMEM;
        }
        while (r->got < r->len) {
                ssize_t n = recv_some(fd, r, r->body + r->got, r->len - r->got);
                if (n == -EAGAIN)
                        return 0;
                if (n < 0)
                        return (int)n;
                if (n == 0)
                        return -ECONNRESET;
                r->got += (size_t)n;
        }
        return 1;
}

void nbp_frame_reader_take(struct nbp_frame_reader *r, uint8_t **ret_body, size_t *ret_len,
                           int *ret_fds, size_t *ret_nfds, bool *ret_truncated)
{
        *ret_body = r->body;
        *ret_len = r->len;
        memcpy(ret_fds, r->fds, r->nfds * sizeof(int));
        *ret_nfds = r->nfds;
        *ret_truncated = r->fds_truncated;
        r->body = NULL;
        r->nfds = 0;
        nbp_frame_reader_reset(r);
}

int nbp_frame_out_new(size_t body_len, struct nbp_frame_out **ret)
{
        struct nbp_frame_out *f;

        if (body_len > UINT32_MAX)
                return -EMSGSIZE;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->buf = malloc(NBP_FRAME_HEADER_SIZE + body_len);
        if (!f->buf) {
                free(f);
                return -ENOMEM;
        }
        f->len = NBP_FRAME_HEADER_SIZE + body_len;
        f->buf[0] = (uint8_t)(body_len >> 24);
        f->buf[1] = (uint8_t)(body_len >> 16);
        f->buf[2] = (uint8_t)(body_len >> 8);
        f->buf[3] = (uint8_t)body_len;
        *ret = f;
        return 0;
}

void nbp_frame_out_free(struct nbp_frame_out *f)
{
        if (!f)
                return;
        nbp_close_fds(f->fds, f->nfds);
        free(f->buf);
        free(f);
}

int nbp_frame_write(int fd, struct nbp_frame_out *f)
{
        while (f->off < f->len) {
                union {
                        char buf[CMSG_SPACE(sizeof(int) * NBP_FRAME_MAX_FDS)];
                        struct cmsghdr align;
                } ctrl;
                struct iovec iov = {.iov_base = f->buf + f->off, .iov_len = f->len - f->off};
                struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
                ssize_t n;

                if (f->off == 0 && f->nfds > 0) {
                        memset(ctrl.buf, 0, sizeof(ctrl.buf));
                        msg.msg_control = ctrl.buf;
                        msg.msg_controllen = CMSG_SPACE(sizeof(int) * f->nfds);
                        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(int) * f->nfds);
                        memcpy(CMSG_DATA(c), f->fds, sizeof(int) * f->nfds);
                }
                do
                        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
                while (n < 0 && errno == EINTR);
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                /* The fds went with the first byte: they are the peer's now. */
                if (f->off == 0)
                        nbp_close_fds(f->fds, f->nfds), f->nfds = 0;
                f->off += (size_t)n;
        }
        return 1;
}
