// SPDX-License-Identifier: LGPL-2.1-or-later
/* Private to libnetbroker: how batches and results look inside. */
#pragma once

#include "codec.h"
#include "netbroker.h"
#include "abi_struct.h"

#define NB_EXPORT __attribute__((visibility("default")))

struct nb_batch {
        Netbroker__Request req; /* id is filled in at submit time */
        size_t cap;
        int *fds; /* sent with the request (netns fds); the batch's own copies */
        size_t nfds;
};

struct nb_results {
        Netbroker__ServerMessage *msg; /* unpacked with the default allocator */
        int *fds;
        size_t nfds;
};

/* Takes ownership of msg and fds. */
int nb_results_new(Netbroker__ServerMessage *msg, int *fds, size_t nfds, nb_results **ret);

/* Building ops (batch.c), shared with firewall.c. A copy of s, or the empty
 * string for NULL or ""; sets *oom when the copy fails. */
char *nb_dup_or_empty(const char *s, bool *oom);
/* What nb_last_error() says next, in this thread (a sentence, no newline):
 * for the calls whose failures it explains. */
void nb_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Wrap a filled sub-message into an op and append it to the batch; frees
 * sub on failure (and when oom is already set, so callers can check once). */
int nb_batch_add_sub(nb_batch *b, Netbroker__Op__OpCase which, void *sub, bool oom);
