// SPDX-License-Identifier: LGPL-2.1-or-later
/* Running allow-listed programs without stalling the event loop.
 *
 * Children are started by child_start.h (root's: a vfork-like clone, no
 * page-table copy; a caller's: a fork that becomes the caller) and get
 * exactly fds 0-2: every fd the helper holds is close-on-exec, so there is
 * no loop closing fds. The helper watches each child through a
 * pidfd, and its output pipes once it has run 10 ms (a shorter run's output
 * is read at its exit: one wake-up for it); it reaps it as soon as it exits,
 * and kills its process group at the timeout. No child is ever left a
 * zombie. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop.h"
#include "peer.h"

struct nbd_exec_spec {
        const char *path;
        char *const *argv; /* NULL-terminated */
        char *const *envp; /* NULL-terminated */
        const uint8_t *stdin_data;
        size_t stdin_len;
        unsigned timeout_ms;
        size_t output_cap; /* bytes kept of each of stdout and stderr */
        uid_t uid; /* the caller it runs for (its spawn slots) */
        const struct nbd_peer *as; /* run as this caller (child_start.h); NULL: root */
        bool test_stop; /* tests: the caller's child stops itself (child_start.h) */
};

struct nbd_buf {
        uint8_t *data;
        size_t len, cap;
};

struct nbd_child_result {
        int exit_code;
        int signal;
        bool timed_out;
        struct nbd_buf out, err;
        bool out_truncated, err_truncated;
        uint64_t duration_us;
        /* A caller's child that never ran the program: why (an errno; it
         * exited 127). */
        int start_error;
};

struct nbd_child;
typedef void (*nbd_child_done_fn)(struct nbd_child *c, void *data);

/* Start a child; `done` is called from the loop once it has been reaped and
 * its output read. Returns 0 or -errno (nothing is left running on error). */
int nbd_child_spawn(struct nbd_loop *l, const struct nbd_exec_spec *s, nbd_child_done_fn done,
                    void *data, struct nbd_child **ret);

/* The result; valid inside and after `done`, until nbd_child_free(). */
struct nbd_child_result *nbd_child_result(struct nbd_child *c);

/* Free a finished child. Accepts NULL. */
void nbd_child_free(struct nbd_child *c);

/* Give up on a running child: it is killed, reaped later and freed by the
 * loop; `done` is not called. */
void nbd_child_abandon(struct nbd_child *c);

/* Children spawned and not yet reaped (abandoned ones included). */
unsigned nbd_children_running(void);
/* The same, of those spawned for uid, and the supervised programs
 * (program.h) running for uid: each holds one of uid's slots while it
 * runs. */
unsigned nbd_children_running_of(uid_t uid);
/* A supervised program ended: its slot is free (runs the on_reaped
 * callback, as a child's exit does). */
void nbd_children_slot_freed(void);

/* fn(data) runs each time a child is reaped (its spawn slot is free
 * again), from inside the loop's handling of its exit: fn must not run
 * jobs there, only schedule them. One callback; NULL removes it. */
void nbd_children_on_reaped(void (*fn)(void *data), void *data);
