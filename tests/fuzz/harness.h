// SPDX-License-Identifier: LGPL-2.1-or-later
/* What the fuzzers share: one helper set up once per process over the fake
 * kernel, and checks that an input left nothing behind. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "dispatch.h"

struct nb_harness {
        struct nbd_config cfg;
        struct nbd_loop *loop;
        struct nbd_dispatch_ctx ctx;
        int netns_fd, null_fd; /* copies of these go with requests */
        int fd_count; /* open fds when the input began */
};

/* Start an input: the helper, set up once (aborts if it cannot), with small
 * limits so that the fuzzer reaches them and the programs of fake_kernel.h
 * on the allow-list; and the count of open fds to compare at the end. */
struct nb_harness *nb_harness_begin(void);

/* Run one loop iteration without blocking, as main.c's loop does. */
void nb_harness_step(struct nb_harness *h);

/* An fd (F_DUPFD_CLOEXEC) of the netns or /dev/null, for a request. */
int nb_harness_dup(int fd);

/* Abort unless every fd, program and job of the input is gone. */
void nb_harness_check_clean(struct nb_harness *h);

/* Write p[0..len) to the socket fd with fds (at most NB_HARNESS_SEND_FDS)
 * on its first byte; returns the bytes written or -errno. */
#define NB_HARNESS_SEND_FDS 8
ssize_t nb_harness_send(int fd, const uint8_t *p, size_t len, const int *fds, size_t nfds);

/* The decode budget server.c gives a frame of len bytes. */
size_t nb_harness_decode_budget(size_t len);

#define NB_HARNESS_ASSERT(cond)                                                                    \
        do {                                                                                       \
                if (!(cond))                                                                       \
                        nb_harness_fail(__FILE__, __LINE__, #cond);                                \
        } while (0)

_Noreturn void nb_harness_fail(const char *file, int line, const char *what);
