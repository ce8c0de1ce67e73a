// SPDX-License-Identifier: LGPL-2.1-or-later
/* Writes the fuzzers' seed corpus from real requests (requests.c), as
 * libnetbroker packs them:
 *   DIR/dispatch/NAME  a ClientMessage carrying the request (fuzz-dispatch)
 *   DIR/request/NAME   the stream a client writes: a Hello frame, then the
 *                      request frame(s) (fuzz-request)
 *   DIR/frame/NAME     fuzz-frame's two control bytes, then that stream
 * Usage: nb-gen-corpus DIR (tests/fuzz/corpus; the output is committed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netbroker.h"
#include "requests.h"

/* Cap 64 KiB with 4 fds a frame; cut into pieces by seed 0x5a. */
static const uint8_t frame_control[2] = {0x26, 0x5a};

struct buf {
        uint8_t *p;
        size_t len;
};

static int append(struct buf *b, const void *p, size_t len)
{
        uint8_t *n = realloc(b->p, b->len + len);

        if (!n)
                return -ENOMEM;
        memcpy(n + b->len, p, len);
        b->p = n;
        b->len += len;
        return 0;
}

/* A frame: 4-byte big-endian length, then the body. */
static int append_frame(struct buf *b, const uint8_t *body, size_t len)
{
        const uint8_t hdr[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                                (uint8_t)len};
        int r = append(b, hdr, sizeof(hdr));

        return r < 0 ? r : append(b, body, len);
}

static int write_file(const char *dir, const char *sub, const char *name, const struct buf *b)
{
        char path[4096];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, sub);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -errno;
        snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
        f = fopen(path, "wb");
        if (!f)
                return -errno;
        if (b->len && fwrite(b->p, 1, b->len, f) != b->len) {
                fclose(f);
                return -EIO;
        }
        return fclose(f) == 0 ? 0 : -errno;
}

/* A seed of requests built by builds[0..n) with ids[0..n): the first as
 * fuzz-dispatch's input (unless !dispatch), all of them after a Hello as
 * the others'. */
static int write_seed(const char *dir, const char *name, const nbt_build_fn *builds,
                      const uint64_t *ids, size_t n, bool dispatch, int netns_fd)
{
        struct buf stream = {0}, framed = {0}, first = {0};
        uint8_t *body;
        size_t len;
        int r = nbt_pack_hello(&body, &len);

        if (r == 0) {
                r = append_frame(&stream, body, len);
                free(body);
        }
        for (size_t i = 0; i < n && r == 0; i++) {
                struct nbt_packed p;
                r = nbt_pack(builds[i], ids[i], netns_fd, &p);
                if (r < 0)
                        break;
                r = append_frame(&stream, p.body, p.len);
                if (r == 0 && i == 0)
                        r = append(&first, p.body, p.len);
                free(p.body);
                for (size_t k = 0; k < p.nfds; k++)
                        close(p.fds[k]);
        }
        if (r == 0)
                r = append(&framed, frame_control, sizeof(frame_control));
        if (r == 0)
                r = append(&framed, stream.p, stream.len);
        if (r == 0 && dispatch)
                r = write_file(dir, "dispatch", name, &first);
        if (r == 0)
                r = write_file(dir, "request", name, &stream);
        if (r == 0)
                r = write_file(dir, "frame", name, &framed);
        if (r < 0)
                fprintf(stderr, "nb-gen-corpus: %s: %s\n", name, strerror(-r));
        free(stream.p);
        free(framed.p);
        free(first.p);
        return r;
}

static const struct nbt_request *find(const char *name)
{
        for (size_t i = 0; i < nbt_n_requests; i++)
                if (strcmp(nbt_requests[i].name, name) == 0)
                        return &nbt_requests[i];
        return NULL;
}

int main(int argc, char **argv)
{
        /* Allocations fuzz-dispatch fails in every-op (its id's bits 32-43). */
        static const unsigned fail_at[] = {40, 150, 260, 330};
        const struct nbt_request *every = find("every-op"), *exec = find("op03-exec"),
                                 *outputs = find("exec-outputs");
        int netns_fd, r = 0;
        size_t n = 0;

        if (argc != 2) {
                fprintf(stderr, "usage: %s DIR\n", argv[0]);
                return 2;
        }
        if (mkdir(argv[1], 0755) < 0 && errno != EEXIST) {
                fprintf(stderr, "nb-gen-corpus: %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        /* Ids are even and 0 mod 7: fds go out at once, no second job, no
         * cancel (fuzz_dispatch.c); mutations reach those. */
        for (size_t i = 0; i < nbt_n_requests && r == 0; i++, n++) {
                uint64_t id = 14 * (i + 1);
                r = write_seed(argv[1], nbt_requests[i].name, &nbt_requests[i].build, &id, 1, true,
                               netns_fd);
        }
        for (size_t i = 0; i < sizeof(fail_at) / sizeof(*fail_at) && r == 0; i++, n++) {
                uint64_t id = (uint64_t)fail_at[i] << 32 | 14;
                char name[64];
                snprintf(name, sizeof(name), "every-op-failing-alloc-%u", fail_at[i]);
                r = write_seed(argv[1], name, &every->build, &id, 1, true, netns_fd);
        }
        if (r == 0) {
                /* Requests that arrive together: in flight at once, waiting
                 * for a spawn slot, one too many on the connection. */
                const nbt_build_fn b[] = {exec->build, outputs->build, exec->build};
                const uint64_t ids[] = {1, 2, 3};
                r = write_seed(argv[1], "pipelined", b, ids, 3, false, netns_fd);
                n++;
        }
        if (netns_fd >= 0)
                close(netns_fd);
        if (r == 0)
                printf("nb-gen-corpus: %zu seeds written under %s\n", n, argv[1]);
        return r < 0 ? 1 : 0;
}
