// SPDX-License-Identifier: LGPL-2.1-or-later
/* The closer: the last close() of a descriptor a client gave, off the loop.
 *
 * The last close of a file runs its release, and some releases wait for
 * the other side, which a client controls: a TCP socket with SO_LINGER on
 * and unsent data waits in tcp_close() for the linger time (the client's
 * choice, up to years); a FUSE file sends FLUSH to the client's own FUSE
 * daemon; a tty waits for its output to drain. A connection socket whose
 * receive queue still holds fds a client sent releases those files when it
 * closes. Done on the event loop, any such close froze every client, root's
 * Pings included, for as long as the sender chose.
 *
 * So a descriptor whose close a client may control is given here instead:
 * one thread closes them one at a time, in order. It touches nothing but
 * its queue; a descriptor stuck in it holds up only the descriptors given
 * after it, which are themselves only such descriptors (an op's fds, a
 * network namespace's, are closed where they are, and cost nothing).
 *
 * A stuck descriptor is a descriptor the helper holds, and the helper has
 * few (fd_limit): each one counts against the uid that sent it until it is
 * closed, and server.c stops reading fds from a uid whose count is at its
 * share, so a lingering client exhausts its own share and nothing else.
 * The queue has room for fd_limit entries: it can never hold more than the
 * process can have open, so giving never fails and never allocates. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "loop.h"

struct nbd_closer;

/* on_closed runs on the loop after the thread closed one or more
 * descriptors (the uids' counts are lower): readers held back may go on. */
int nbd_closer_new(struct nbd_loop *loop, unsigned capacity, void (*on_closed)(void *data),
                   void *data, struct nbd_closer **ret);
/* At exit: a thread stuck in a close is left to the process's end (its
 * queue with it), so that the helper's exit never waits for a client's
 * linger. */
void nbd_closer_free(struct nbd_closer *c);

/* Takes fd (>= 0), counted against uid until it is closed. Never blocks. */
void nbd_closer_give(struct nbd_closer *c, uid_t uid, int fd);
/* Descriptors of uid given and not closed yet. */
unsigned nbd_closer_pending(struct nbd_closer *c, uid_t uid);
/* Descriptors of every uid given and not closed yet. */
unsigned nbd_closer_pending_all(struct nbd_closer *c);
