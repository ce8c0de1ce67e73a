// SPDX-License-Identifier: LGPL-2.1-or-later
/* Request decoding and validation where a client meets them: the input is
 * the byte stream a client writes on its connection (frames: Hello, then
 * requests), served by the real server.c over a socketpair, with the fake
 * kernel behind the dispatcher. server.c reads the frames, decodes each
 * with the bounded budget, checks Hello and the limits, and the dispatcher
 * validates every op before any runs.
 *
 * The harness splits the stream at the frame boundaries it announces and
 * sends a netns fd and a /dev/null fd with every frame after the first, as
 * a client would for a veth whose peer goes elsewhere (six, over the
 * limit, with every third). It writes the whole stream before the helper
 * runs, so requests arrive together (requests in flight, spawn slots),
 * lets the helper run for as many rounds as the last byte's low 3 bits
 * say (0: the client hangs up at once, cancelling what runs), fails the
 * helper's allocation 1 + (bits 3-6 of the last byte, then the byte before
 * it) when the last byte's top bit is set (tests/alloc_hook.h), reads the
 * helper's side and checks that every frame it sends is a ServerMessage,
 * shuts its side down, and requires the helper to close the connection,
 * leaving no fd, program, job or memory behind.
 *
 * The third byte from the end says how the client goes: bit 0 set, it
 * closes its socket completely (both directions: the helper's next write
 * meets EPIPE, whatever it is sending) instead of a shutdown of its writing
 * side; bits 1-3, after how many frames of the stream it does so (0: once
 * the whole stream is sent), so a close lands in the middle of requests,
 * fd frames and replies. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc_hook.h"
#include "bandwidth.h"
#include "codec.h"
#include "fake_kernel.h"
#include "frame.h"
#include "harness.h"
#include "link.h"
#include "server.h"

/* What main.c runs at the end of each job. */
static void flush_gone(void *links)
{
        nbd_fake_backend.links.flush_gone(links);
}

static void flush_ifbs(void *bw)
{
        nbd_fake_backend.bw.flush(bw);
}

/* Read what the helper sent; every frame must decode. Returns false at the
 * end of the stream. */
static bool drain(int fd, struct nbp_frame_reader *rd)
{
        bool open = true;

        nbt_alloc_pause(); /* the client's side */
        while (open) {
                int fds[NBP_FRAME_MAX_FDS];
                uint8_t *body;
                size_t len, nfds;
                bool truncated;
                Netbroker__ServerMessage *m;
                int r = nbp_frame_read(fd, rd);

                if (r <= 0) {
                        open = r == 0;
                        break;
                }
                nbp_frame_reader_take(rd, &body, &len, fds, &nfds, &truncated);
                nbp_close_fds(fds, nfds);
                m = netbroker__server_message__unpack(NULL, len, body);
                NB_HARNESS_ASSERT(m != NULL);
                netbroker__server_message__free_unpacked(m, NULL);
                free(body);
        }
        nbt_alloc_resume();
        return open;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct nb_harness *h = nb_harness_begin();
        struct nbp_frame_reader rd;
        struct nbd_server *srv;
        size_t off = 0, next_frame = 0, frames = 0;
        bool open = true, full_close = size >= 3 && data[size - 3] & 1;
        size_t close_after = size >= 3 ? (size_t)(data[size - 3] >> 1 & 7) : 0;
        int sv[2];

        NB_HARNESS_ASSERT(nb_fake_reset() == 0);
        NB_HARNESS_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) ==
                          0);
        NB_HARNESS_ASSERT(nbd_server_new(&h->cfg, h->loop, h->ctx.be, h->ctx.links, h->ctx.fw, NULL,
                                         h->ctx.bw, &srv) == 0);
        NB_HARNESS_ASSERT(nbd_server_on_job_end(srv, flush_gone, h->ctx.links) == 0);
        NB_HARNESS_ASSERT(nbd_server_on_job_end(srv, flush_ifbs, h->ctx.bw) == 0);
        NB_HARNESS_ASSERT(nbd_server_adopt(srv, sv[1]) == 0);
        nbp_frame_reader_init(&rd, 1u << 24, NBP_FRAME_MAX_FDS);
        if (size >= 2 && data[size - 1] & 0x80)
                nbt_alloc_arm(1 +
                              ((unsigned long)(data[size - 1] >> 3 & 0xf) << 8 | data[size - 2]));
        for (int iter = 0; iter < 2000 && off < size && open &&
                           (!close_after || frames < close_after || off != next_frame);
             iter++) {
                size_t len = size - off;
                int fds[6];
                size_t nfds = 0;
                ssize_t n;

                if (off == next_frame) {
                        /* A frame starts here: its length says where the next does. */
                        if (len >= 4) {
                                size_t flen = (size_t)data[off] << 24 |
                                              (size_t)data[off + 1] << 16 |
                                              (size_t)data[off + 2] << 8 | data[off + 3];
                                next_frame = off + 4 + flen;
                        } else {
                                next_frame = size;
                        }
                        if (frames++ > 0) {
                                nfds = frames % 3 == 1 ? 6 : 2;
                                for (size_t i = 0; i < nfds; i++)
                                        fds[i] = nb_harness_dup(i ? h->null_fd : h->netns_fd);
                        }
                }
                if (next_frame > off && next_frame - off < len)
                        len = next_frame - off;
                n = nb_harness_send(sv[0], data + off, len, fds, nfds);
                nbp_close_fds(fds, nfds); /* sent copies are the helper's */
                if (n > 0) {
                        off += (size_t)n;
                        continue;
                }
                if (n != -EAGAIN)
                        break; /* the helper closed the connection */
                if (nfds) {
                        next_frame = off; /* not sent: the fds go again */
                        frames--;
                }
                /* The socket is full: the helper reads. */
                nb_harness_step(h);
                open = drain(sv[0], &rd);
        }
        /* Let the helper work, then hang up: it must close too. */
        for (int i = 0; i < (size ? data[size - 1] & 7 : 0) && open; i++) {
                nb_harness_step(h);
                open = drain(sv[0], &rd);
        }
        if (full_close) {
                close(sv[0]);
                sv[0] = -1;
        } else {
                shutdown(sv[0], SHUT_WR);
        }
        for (int iter = 0; iter < 1000 && !nbd_server_done(srv); iter++) {
                nb_harness_step(h);
                if (sv[0] >= 0)
                        drain(sv[0], &rd);
        }
        nbt_alloc_disarm();
        NB_HARNESS_ASSERT(nbd_server_done(srv));
        /* What the client sent that was no network namespace (the /dev/null
         * copies) is closed by the closer's thread: the fds are counted
         * once it is done, and the loop has put its eventfd away. */
        for (int iter = 0; iter < 200000 && nbd_server_closing(srv); iter++)
                usleep(50);
        NB_HARNESS_ASSERT(nbd_server_closing(srv) == 0);
        nb_harness_step(h);
        nbd_server_free(srv);
        nbp_frame_reader_reset(&rd);
        if (sv[0] >= 0)
                close(sv[0]);
        nb_harness_check_clean(h);
        return 0;
}
