/* Private to libnetbroker: how batches and results look inside. */
#pragma once

#include "codec.h"
#include "netbroker.h"

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
