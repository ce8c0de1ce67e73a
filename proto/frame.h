// SPDX-License-Identifier: LGPL-2.1-or-later
/* Framing shared by netbrokerd and libnetbroker.
 *
 * A frame is a 4-byte big-endian length followed by that many bytes. File
 * descriptors travel as SCM_RIGHTS on the frame's first byte. Readers never
 * read past the frame they are assembling, so fds can never be attributed to
 * the wrong frame, and they check the length against a cap before they
 * allocate anything.
 *
 * Every function returns 0 or a negative errno value unless it says otherwise.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NBP_FRAME_HEADER_SIZE 4
#define NBP_FRAME_DEFAULT_CAP (16u * 1024 * 1024)
/* Upper bound for fds on one frame; the effective cap is configurable below it. */
#define NBP_FRAME_MAX_FDS 64

struct nbp_frame_reader {
        size_t cap; /* largest body accepted */
        size_t max_fds; /* fds accepted per frame (<= NBP_FRAME_MAX_FDS) */
        uint8_t hdr[NBP_FRAME_HEADER_SIZE];
        size_t hdr_got;
        uint8_t *body; /* allocated once the header is complete and checked */
        size_t len; /* body length from the header */
        size_t got; /* body bytes read so far */
        int fds[NBP_FRAME_MAX_FDS];
        size_t nfds;
        bool fds_truncated; /* MSG_CTRUNC seen: some fds were lost */
        size_t oversize; /* length of a refused oversize frame, else 0 */
        /* Where the fds the reader lets go (over max_fds, or of a frame
         * reset unfinished) go instead of close(): the helper's closer,
         * whose last close a sender may make wait (see helper/closer.h).
         * NULL: close(). */
        void (*drop_fd)(void *data, int fd);
        void *drop_data;
        /* Set: each read is first made with MSG_PEEK and no room for fds,
         * which installs none and tells only whether the read brings some
         * (MSG_CTRUNC); then fds_fit(data, fd) says whether all the fds
         * queued in the socket fit one read and the process's free
         * descriptors: 0, or -ETOOMANYREFS and the read is refused before
         * it is made. A read that took fewer than the kernel holds for it
         * would have the kernel release the surplus inside recvmsg(), in
         * the reader's thread, at whatever cost their sender chose (a
         * lingering socket's close). The real read then takes exactly the
         * bytes the peek saw, so it cannot reach fds queued after it. */
        int (*fds_fit)(void *data, int fd);
};

void nbp_frame_reader_init(struct nbp_frame_reader *r, size_t cap, size_t max_fds);

/* Read what is available of one frame.
 * Returns 1 when a whole frame is ready (take it with nbp_frame_reader_take()),
 * 0 when the socket would block (non-blocking sockets only), -EPIPE on a clean
 * end of stream at a frame boundary, -ECONNRESET on an end of stream inside a
 * frame, -EMSGSIZE when the header announces more than the cap (r->oversize
 * holds the length; nothing was allocated), or another -errno. */
int nbp_frame_read(int fd, struct nbp_frame_reader *r);

/* Take the assembled frame: the body (caller frees) and its fds (caller owns
 * them). Resets the reader for the next frame. *ret_truncated reports
 * MSG_CTRUNC: the caller must treat the frame's fds as incomplete. */
void nbp_frame_reader_take(struct nbp_frame_reader *r, uint8_t **ret_body, size_t *ret_len,
                           int *ret_fds, size_t *ret_nfds, bool *ret_truncated);

/* Close any fds held and free the partial body. */
void nbp_frame_reader_reset(struct nbp_frame_reader *r);

/* True while a frame is partly read. */
bool nbp_frame_reader_busy(const struct nbp_frame_reader *r);

/* An outgoing frame: header and body in one buffer, fds sent with byte 0.
 * The fds are borrowed: the sender closes them after the frame is sent. */
struct nbp_frame_out {
        uint8_t *buf;
        size_t len;
        size_t off;
        int fds[NBP_FRAME_MAX_FDS];
        size_t nfds;
        struct nbp_frame_out *next;
};

/* Allocate a frame with room for a body of body_len bytes after the header;
 * the body starts at buf + NBP_FRAME_HEADER_SIZE. */
int nbp_frame_out_new(size_t body_len, struct nbp_frame_out **ret);
/* Frees the buffer and closes every fd still attached. Accepts NULL. */
void nbp_frame_out_free(struct nbp_frame_out *f);

/* Write what the socket takes of the frame, with MSG_NOSIGNAL (a closed peer
 * is -EPIPE, never SIGPIPE). Returns 1 when the frame is fully sent (its fds
 * have then been closed), 0 when the socket would block, or -errno. */
int nbp_frame_write(int fd, struct nbp_frame_out *f);

/* Close an array of fds, skipping negative entries. */
void nbp_close_fds(int *fds, size_t n);
