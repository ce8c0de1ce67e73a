// SPDX-License-Identifier: LGPL-2.1-or-later
/* The frame reader (proto/frame.c) on a real socketpair.
 *
 * Input: byte 0 picks the reader's cap (bits 0-2) and fds per frame (bits
 * 3-5); byte 1 seeds how the stream is cut into writes and which writes
 * carry fds (0: one write, no fds); the rest is the stream. The harness
 * parses the same stream itself and checks the reader against it: every
 * frame it returns has the announced length and the stream's bytes, at
 * most max_fds fds; an oversize header is refused with its length before
 * anything is allocated; the end of the stream is -EPIPE exactly at a
 * frame boundary with nothing pending. Every fd is closed at the end
 * (counted), and LeakSanitizer checks memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"

static const size_t caps[8] = {0, 1, 8, 64, 512, 4096, 65536, NBP_FRAME_DEFAULT_CAP};

struct cutter {
        uint32_t state;
};

static uint32_t next_rand(struct cutter *c)
{
        /* xorshift32: deterministic per input. */
        c->state ^= c->state << 13;
        c->state ^= c->state >> 17;
        c->state ^= c->state << 5;
        return c->state;
}

/* A stream piece with nfds copies of null_fd on its first byte. */
static ssize_t send_chunk(int fd, const uint8_t *p, size_t len, size_t nfds, int null_fd)
{
        int fds[4];
        ssize_t n;

        for (size_t i = 0; i < nfds; i++)
                fds[i] = nb_harness_dup(null_fd);
        n = nb_harness_send(fd, p, len, fds, nfds);
        for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
        return n;
}

/* The reference: where the frame at `at` ends, or SIZE_MAX for a header
 * over the cap; 0 when the stream ends inside the header. */
static size_t frame_end(const uint8_t *s, size_t len, size_t at, size_t cap, size_t *ret_flen)
{
        size_t flen;

        if (len - at < NBP_FRAME_HEADER_SIZE)
                return 0;
        flen = (size_t)s[at] << 24 | (size_t)s[at + 1] << 16 | (size_t)s[at + 2] << 8 | s[at + 3];
        *ret_flen = flen;
        return flen > cap ? SIZE_MAX : at + NBP_FRAME_HEADER_SIZE + flen;
}

struct state {
        const uint8_t *s;
        size_t len, sent, parsed; /* parsed: where the next frame starts */
        size_t cap, max_fds;
        bool refused;
};

/* Take every frame the reader has. Returns what ended it: 0 (would
 * block), -EMSGSIZE (refused), or the end of the stream. */
static int read_frames(int fd, struct nbp_frame_reader *rd, struct state *st)
{
        for (;;) {
                int fds[NBP_FRAME_MAX_FDS];
                uint8_t *body;
                size_t len, nfds, flen = 0, end;
                bool truncated;
                int r = nbp_frame_read(fd, rd);

                end = frame_end(st->s, st->len, st->parsed, st->cap, &flen);
                if (r == -EMSGSIZE) {
                        NB_HARNESS_ASSERT(end == SIZE_MAX && rd->oversize == flen);
                        NB_HARNESS_ASSERT(rd->body == NULL);
                        st->refused = true;
                }
                if (r != 1)
                        return r;
                NB_HARNESS_ASSERT(end != 0 && end != SIZE_MAX && end <= st->sent);
                nbp_frame_reader_take(rd, &body, &len, fds, &nfds, &truncated);
                NB_HARNESS_ASSERT(len == flen && len <= st->cap && nfds <= st->max_fds);
                NB_HARNESS_ASSERT(memcmp(body, st->s + st->parsed + NBP_FRAME_HEADER_SIZE, len) ==
                                  0);
                NB_HARNESS_ASSERT(!nbp_frame_reader_busy(rd));
                nbp_close_fds(fds, nfds);
                free(body);
                st->parsed = end;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct nb_harness *h = nb_harness_begin();
        struct nbp_frame_reader rd;
        struct cutter cut;
        struct state st = {0};
        int sv[2], r;

        if (size < 2)
                return 0;
        st.cap = caps[data[0] & 7];
        st.max_fds = (data[0] >> 3) & 7;
        cut.state = data[1] ? data[1] * 2654435761u : 0;
        st.s = data + 2;
        st.len = size - 2;
        NB_HARNESS_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) ==
                          0);
        nbp_frame_reader_init(&rd, st.cap, st.max_fds);
        while (st.sent < st.len && !st.refused) {
                size_t len = st.len - st.sent, nfds = 0;
                ssize_t n;
                if (cut.state) {
                        uint32_t x = next_rand(&cut);
                        size_t most = (size_t)1 << (x & 7);
                        len = len < most ? len : 1 + (x >> 8) % most;
                        nfds = (x >> 24) % 8 < 2 ? (x >> 27) % 4 + 1 : 0;
                }
                n = send_chunk(sv[0], st.s + st.sent, len, nfds, h->null_fd);
                NB_HARNESS_ASSERT(n > 0 || n == -EAGAIN);
                if (n > 0)
                        st.sent += (size_t)n;
                r = read_frames(sv[1], &rd, &st);
                NB_HARNESS_ASSERT(r == 0 || r == -EMSGSIZE);
        }
        if (!st.refused) {
                shutdown(sv[0], SHUT_WR);
                r = read_frames(sv[1], &rd, &st);
                /* -EPIPE exactly at a frame boundary. */
                if (r != -EMSGSIZE) {
                        NB_HARNESS_ASSERT(r == -EPIPE || r == -ECONNRESET);
                        NB_HARNESS_ASSERT((r == -EPIPE) == (st.parsed == st.len));
                }
        }
        nbp_frame_reader_reset(&rd);
        NB_HARNESS_ASSERT(!nbp_frame_reader_busy(&rd) && rd.nfds == 0 && rd.body == NULL);
        close(sv[0]);
        close(sv[1]);
        nb_harness_check_clean(h);
        return 0;
}
