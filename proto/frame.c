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

void nbp_frame_reader_init(struct nbp_frame_reader *r, size_t cap, size_t max_fds)
{
        memset(r, 0, sizeof(*r));
        r->cap = cap;
        r->max_fds = max_fds > NBP_FRAME_MAX_FDS ? NBP_FRAME_MAX_FDS : max_fds;
}

void nbp_frame_reader_init_exact(struct nbp_frame_reader *r, size_t cap, size_t max_fds)
{
        nbp_frame_reader_init(r, cap, max_fds);
        r->exact = true;
}

/* The frame being assembled, forgotten (what is read ahead stays). */
static void frame_clear(struct nbp_frame_reader *r)
{
        nbp_close_fds(r->fds, r->nfds);
        free(r->body);
        r->body = NULL;
        r->hdr_got = r->len = r->got = r->nfds = r->oversize = 0;
        r->fds_truncated = false;
}

void nbp_frame_reader_reset(struct nbp_frame_reader *r)
{
        frame_clear(r);
        nbp_close_fds(r->ahead_fds, r->ahead_nfds);
        r->ahead_nfds = r->ahead_at = r->ahead_len = 0;
        r->ahead_truncated = r->drained = false;
}

bool nbp_frame_reader_busy(const struct nbp_frame_reader *r)
{
        return r->hdr_got > 0;
}

bool nbp_frame_reader_buffered(const struct nbp_frame_reader *r)
{
        return r->ahead_at < r->ahead_len;
}

bool nbp_frame_reader_whole(const struct nbp_frame_reader *r)
{
        size_t have = r->ahead_len - r->ahead_at, need, len;
        uint8_t hdr[NBP_FRAME_HEADER_SIZE];

        if (r->hdr_got == NBP_FRAME_HEADER_SIZE)
                return r->len - r->got <= have;
        need = NBP_FRAME_HEADER_SIZE - r->hdr_got;
        if (have < need)
                return false;
        memcpy(hdr, r->hdr, r->hdr_got);
        memcpy(hdr + r->hdr_got, r->ahead + r->ahead_at, need);
        len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | (size_t)hdr[3];
        /* An oversize header is refused without a read too. */
        return len > r->cap || len <= have - need;
}

bool nbp_frame_reader_drained(const struct nbp_frame_reader *r)
{
        return r->drained && !nbp_frame_reader_buffered(r);
}

/* fds[n] into the frame's; beyond max_fds closed and the frame marked
 * truncated, exactly like a kernel-side MSG_CTRUNC. */
static void add_fds(struct nbp_frame_reader *r, const int *fds, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (r->nfds < r->max_fds) {
                        r->fds[r->nfds++] = fds[i];
                } else {
                        close(fds[i]);
                        r->fds_truncated = true;
                }
        }
}

/* The SCM_RIGHTS of one recvmsg: the frame's (a read of its own bytes
 * only), or parked with the bytes read ahead (ahead). Whether any came. */
static bool collect_fds(struct nbp_frame_reader *r, struct msghdr *msg, bool ahead)
{
        bool any = false;

        if (msg->msg_flags & MSG_CTRUNC) {
                *(ahead ? &r->ahead_truncated : &r->fds_truncated) = true;
                any = true;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int *fds = (int *)CMSG_DATA(c);
                for (size_t i = 0; i < n; i++) {
                        int fd;
                        memcpy(&fd, &fds[i], sizeof(fd));
                        any = true;
                        if (!ahead) {
                                add_fds(r, &fd, 1);
                        } else if (r->ahead_nfds < r->max_fds) {
                                r->ahead_fds[r->ahead_nfds++] = fd;
                        } else {
                                close(fd);
                                r->ahead_truncated = true;
                        }
                }
        }
        return any;
}

/* One recvmsg of up to len bytes into buf (ahead: the read-ahead buffer):
 * the bytes read, 0 at the end of the stream, or -errno. */
static ssize_t recv_some(int fd, struct nbp_frame_reader *r, void *buf, size_t len, bool ahead)
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
        bool fds;

        do
                n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                r->drained = errno == EAGAIN;
                return -errno;
        }
        fds = collect_fds(r, &msg, ahead);
        /* Short: the socket had no more. Unless fds came: a read that
         * brings fds ends there, whatever is queued after them. */
        r->drained = n > 0 && (size_t)n < len && !fds;
        return n;
}

/* The header is whole: check it, and make room for the body. */
static int header_done(struct nbp_frame_reader *r)
{
        r->len = (size_t)r->hdr[0] << 24 | (size_t)r->hdr[1] << 16 | (size_t)r->hdr[2] << 8 |
                 (size_t)r->hdr[3];
        if (r->len > r->cap) {
                r->oversize = r->len;
                return -EMSGSIZE;
        }
        /* One extra byte so an empty body still gets a distinct pointer. */
        r->body = malloc(r->len + 1);
        return r->body ? 0 : -ENOMEM;
}

/* What the frame needs of the bytes read ahead. Once they are all taken,
 * the fds that came with them are this frame's: its bytes were the read's
 * last (frame.h). 0 or -errno. */
static int take_ahead(struct nbp_frame_reader *r)
{
        while (r->ahead_at < r->ahead_len &&
               (r->hdr_got < NBP_FRAME_HEADER_SIZE || r->got < r->len)) {
                const uint8_t *p = r->ahead + r->ahead_at;
                size_t have = r->ahead_len - r->ahead_at, n;

                if (r->hdr_got < NBP_FRAME_HEADER_SIZE) {
                        n = NBP_FRAME_HEADER_SIZE - r->hdr_got;
                        n = n < have ? n : have;
                        memcpy(r->hdr + r->hdr_got, p, n);
                        r->hdr_got += n;
                        r->ahead_at += n;
                        if (r->hdr_got == NBP_FRAME_HEADER_SIZE) {
                                int k = header_done(r);
                                if (k < 0)
                                        return k;
                        }
                        continue;
                }
                n = r->len - r->got;
                n = n < have ? n : have;
                memcpy(r->body + r->got, p, n);
                r->got += n;
                r->ahead_at += n;
        }
        if (r->ahead_at == r->ahead_len && (r->ahead_nfds || r->ahead_truncated)) {
                add_fds(r, r->ahead_fds, r->ahead_nfds);
                r->fds_truncated |= r->ahead_truncated;
                r->ahead_nfds = 0;
                r->ahead_truncated = false;
        }
        return 0;
}

int nbp_frame_read(int fd, struct nbp_frame_reader *r)
{
        for (;;) {
                int k = take_ahead(r);
                ssize_t n;

                if (k < 0)
                        return k;
                if (r->hdr_got == NBP_FRAME_HEADER_SIZE && r->got == r->len)
                        return 1;
                if (r->hdr_got == NBP_FRAME_HEADER_SIZE && r->len - r->got >= NBP_FRAME_AHEAD) {
                        /* A large body: straight into it, and no further. */
                        n = recv_some(fd, r, r->body + r->got, r->len - r->got, false);
                        if (n > 0)
                                r->got += (size_t)n;
                } else {
                        size_t want = r->hdr_got < NBP_FRAME_HEADER_SIZE
                                              ? NBP_FRAME_HEADER_SIZE - r->hdr_got
                                              : r->len - r->got;
                        n = recv_some(fd, r, r->ahead, r->exact ? want : sizeof(r->ahead), true);
                        r->ahead_at = 0;
                        r->ahead_len = n > 0 ? (size_t)n : 0;
                }
                if (n == -EAGAIN)
                        return 0;
                if (n < 0)
                        return (int)n;
                if (n == 0)
                        return r->hdr_got == 0 && r->nfds == 0 ? -EPIPE : -ECONNRESET;
        }
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
        frame_clear(r);
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
