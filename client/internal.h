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
/* Refuse bad input: nb_last_error() says "WHO: " and the rest, and -err is
 * returned, so each check is one line:
 *     return nb_bad_arg(EINVAL, __func__, "name is NULL");
 * (nb_spawn() and nb_connect() also say their -ENOMEM with it.) Writes the
 * thread-local fixed buffer of nb_last_error(): allocates nothing. */
int nb_bad_arg(int err, const char *who, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* The caller's string s for a message: 'text' with bytes outside printable
 * ASCII (and ' and \) escaped as \xNN, cut with ... when long; NULL as
 * NULL. A name a caller got wrong may hold anything, and the message ends
 * up in logs and terminals. Written into buf (len bytes), returned. */
#define NB_QUOTE_MAX 64
const char *nb_quote(const char *s, char *buf, size_t len);
/* nb_quote() into a buffer that lives as long as the enclosing block. */
#define NB_Q(s) nb_quote((s), (char[NB_QUOTE_MAX]){0}, NB_QUOTE_MAX)

/* NB_STRUCT_IN() of the caller's sized struct argument arg of who, saying
 * why when it refuses it: NB_ARG_IN(__func__, "opts", &mine, theirs,
 * NB_TAP_OPTS) reads an nb_tap_opts (the prefix names the type, its
 * _SIZE_0 and its _INIT macro). 0, -EINVAL or -E2BIG. */
int nb_arg_in(const char *who, const char *arg, const char *prefix, void *dst, size_t known,
              size_t first, const void *src);
#define NB_ARG_IN(who, arg, dst, src, prefix)                                                      \
        nb_arg_in((who), (arg), #prefix, (dst), sizeof(*(dst)), prefix##_SIZE_0, (src))

/* How an interface name argument may look (nb_check_ifname()). */
enum nb_ifname_form {
        NB_IFNAME_PLAIN, /* 1 to 15 bytes, a % or not */
        NB_IFNAME_TEMPLATE, /* 1 to 15 bytes, 16 for a template with a % */
        NB_IFNAME_NO_TEMPLATE, /* 1 to 15 bytes, no % */
};
/* 0, or -EINVAL after saying why (nb_bad_arg()). */
int nb_check_ifname(const char *who, const char *arg, const char *name, enum nb_ifname_form form);
/* Wrap a filled sub-message into an op and append it to the batch; frees
 * sub on failure (and when oom is already set, so callers can check once). */
int nb_batch_add_sub(nb_batch *b, Netbroker__Op__OpCase which, void *sub, bool oom);
