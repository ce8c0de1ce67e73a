/* Writes the fuzzers' seed corpus from real requests (requests.c), as
 * libnetbroker packs them:
 *   DIR/dispatch/NAME  a ClientMessage carrying the request (fuzz-dispatch)
 *   DIR/request/NAME   the stream a client writes: a Hello frame, then the
 *                      request frame (fuzz-request)
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

static int write_file(const char *dir, const char *sub, const char *name, const uint8_t *a,
                      size_t alen, const uint8_t *b, size_t blen)
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
        if ((alen && fwrite(a, 1, alen, f) != alen) || (blen && fwrite(b, 1, blen, f) != blen)) {
                fclose(f);
                return -EIO;
        }
        return fclose(f) == 0 ? 0 : -errno;
}

/* A frame: 4-byte big-endian length, then the body. */
static uint8_t *frame(const uint8_t *body, size_t len, size_t *ret_len)
{
        uint8_t *f = malloc(len + 4);

        if (!f)
                return NULL;
        f[0] = (uint8_t)(len >> 24);
        f[1] = (uint8_t)(len >> 16);
        f[2] = (uint8_t)(len >> 8);
        f[3] = (uint8_t)len;
        memcpy(f + 4, body, len);
        *ret_len = len + 4;
        return f;
}

static int write_one(const char *dir, const struct nbt_request *rq, uint64_t id, int netns_fd,
                     const uint8_t *hello, size_t hello_len)
{
        nb_batch *b = nb_batch_new();
        uint8_t *body = NULL, *req = NULL, *stream = NULL;
        size_t len, req_len, stream_len;
        /* Cap 64 KiB with 4 fds a frame; cut into pieces by seed 0x5a. Ids
         * are even and 0 mod 7: the fds go out at once, no cancel. */
        const uint8_t control[2] = {0x26, 0x5a};
        int r = b ? rq->build(b, netns_fd) : -ENOMEM;

        if (r == 0)
                r = nbt_pack_request(b, id, &body, &len);
        if (r == 0 &&
            (!(req = frame(body, len, &req_len)) || !(stream = malloc(2 + hello_len + req_len))))
                r = -ENOMEM;
        if (r == 0) {
                memcpy(stream, control, 2);
                memcpy(stream + 2, hello, hello_len);
                memcpy(stream + 2 + hello_len, req, req_len);
                stream_len = 2 + hello_len + req_len;
                r = write_file(dir, "dispatch", rq->name, body, len, NULL, 0);
        }
        if (r == 0)
                r = write_file(dir, "request", rq->name, stream + 2, stream_len - 2, NULL, 0);
        if (r == 0)
                r = write_file(dir, "frame", rq->name, stream, stream_len, NULL, 0);
        if (r < 0)
                fprintf(stderr, "nb-gen-corpus: %s: %s\n", rq->name, strerror(-r));
        free(body);
        free(req);
        free(stream);
        nb_batch_free(b);
        return r;
}

int main(int argc, char **argv)
{
        uint8_t *hello_body, *hello;
        size_t hello_body_len, hello_len;
        int netns_fd, r = 0;

        if (argc != 2) {
                fprintf(stderr, "usage: %s DIR\n", argv[0]);
                return 2;
        }
        netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (nbt_pack_hello(&hello_body, &hello_body_len) < 0 ||
            !(hello = frame(hello_body, hello_body_len, &hello_len)))
                return 1;
        for (size_t i = 0; i < nbt_n_requests && r == 0; i++)
                r = write_one(argv[1], &nbt_requests[i], 14 * (i + 1), netns_fd, hello, hello_len);
        free(hello_body);
        free(hello);
        if (netns_fd >= 0)
                close(netns_fd);
        if (r == 0)
                printf("nb-gen-corpus: %zu requests written under %s\n", nbt_n_requests, argv[1]);
        return r < 0 ? 1 : 0;
}
