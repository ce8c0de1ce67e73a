// SPDX-License-Identifier: LGPL-2.1-or-later
/* The helper's one error convention.
 *
 * Every internal function returns 0 or -errno; outputs are untouched on
 * failure. A function whose caller reports to a client also fills a
 * struct nbd_err, through nbd_err_set() and on every failure path: out of
 * memory is a sentence too, so no caller ever sends text nobody wrote.
 * "The op is under way" (a parked job) is not an error and never travels as
 * an errno value; see ops.h. */
#pragma once

#include <errno.h>

#define NBD_ERR_MSG_MAX 512

struct nbd_err {
        int code; /* 0, or the -errno returned with the message */
        char msg[NBD_ERR_MSG_MAX];
};

/* Record code (a negative errno) and a sentence; returns code, so a failure
 * path reads `return nbd_err_set(e, -EINVAL, "...")`. e may be NULL (the
 * caller wants only the errno). A code that is not negative is a bug and
 * becomes -EIO, so nothing reports failure with a success value. */
int nbd_err_set(struct nbd_err *e, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Out of memory while doing `what`: -ENOMEM, "out of memory <what>". */
int nbd_err_oom(struct nbd_err *e, const char *what);

/* Clear e before a call (code 0, empty message). */
void nbd_err_clear(struct nbd_err *e);
