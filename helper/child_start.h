// SPDX-License-Identifier: LGPL-2.1-or-later
/* The one way the helper starts a program (Exec's children, supervised
 * programs): a clone(CLONE_VM | CLONE_VFORK) child, as glibc's posix_spawn
 * makes one, that narrows its credentials before it execs, which
 * posix_spawn cannot do.
 *
 * Every child keeps CAP_NET_ADMIN and CAP_NET_RAW (what the allowed tools
 * need), and nothing else of the helper's: not CAP_MKNOD (the helper's own
 * macvtap nodes), nor CAP_SETUID/CAP_SETGID (kept, in the permitted set
 * only, for this file), nor CAP_KILL (for the helper to end a caller's
 * program). A child run for a caller that is not root runs as that caller
 * (its uid, gid and supplementary groups, as SO_PEERCRED and SO_PEERGROUPS
 * said them) with the two capabilities as ambient ones: the allowed tool
 * can still change the network, but reads and writes files as its caller,
 * not as uid 0. Root's children run as uid 0.
 *
 * Root's child shares the helper's memory until its exec (vfork), and the
 * helper waits for that: no caller may signal a child of uid 0. A
 * caller's child may be signalled by its caller once it has the caller's
 * uid, before its exec: a SIGSTOP there would hold a vfork parent, the
 * loop, for ever. It is a fork (its own copy of the memory, every fd of
 * the helper's but 0-2 closed before it changes uid) that the helper does
 * not wait for: what failed before its exec comes with its exit, 127, as a
 * line on its stderr (nbd_child_start_error()). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "peer.h"

/* fds[i] of struct nbd_child_start: /dev/null, opened by the child. */
#define NBD_CHILD_NULL (-1)

struct nbd_child_start {
        const char *path;
        char *const *argv;
        char *const *envp;
        /* The child's 0-2: an fd of the helper's (3 and up; dup2'ed, the
         * copy not close-on-exec), i itself (the helper's own, inherited)
         * or NBD_CHILD_NULL. */
        int fds[3];
        bool new_session; /* setsid(), else a process group of its own */
        /* Whose program it is: NULL or uid 0 runs as uid 0. */
        const struct nbd_peer *as;
        /* Tests (NB_TEST_HOOKS): a caller's child stops itself once it is
         * the caller, as that caller's SIGSTOP could. */
        bool test_stop;
};

/* 0 with *ret the child's pid, or -errno, and no child is left. Root's:
 * what failed before its exec (-ENOENT, -EACCES). A caller's: see
 * nbd_child_start_error(). Only the loop's thread calls it (one stack). */
int nbd_child_start(const struct nbd_child_start *s, pid_t *ret);

/* What a caller's child that exited 127 said on its stderr before: the
 * errno that kept it from running its program (EPERM: the helper lacks
 * CAP_SETUID/CAP_SETGID), or 0 (it ran, and the program said 127). A
 * program could print the line itself; it would only mislabel its own
 * failure. */
#define NBD_CHILD_ERRNO_MARK "netbrokerd: cannot run the program: errno "
int nbd_child_start_error(int exit_code, const uint8_t *err, size_t len);

/* Whether the helper can run, and end, a program as a caller that is not
 * root (CAP_SETUID, CAP_SETGID and CAP_KILL permitted): for a clear error
 * up front. */
bool nbd_child_can_run_as_caller(void);

/* SIGKILL to a child not yet reaped, its process group and, with pidfd
 * (or -1), through that: CAP_KILL raised in the calling thread for these
 * calls alone. */
void nbd_child_kill(pid_t pid, int pidfd);
