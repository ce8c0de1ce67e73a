// SPDX-License-Identifier: LGPL-2.1-or-later
/* Lanes: the kernel calls that cannot be sliced, off the event loop.
 *
 * One op's kernel call may take long, and inside a single syscall: an
 * nfnetlink commit is processed whole inside sendmsg() (a 400,000-rule
 * FirewallApply held the loop for 13.5 s), an RTM_DELLINK waits for an RCU
 * grace period inside it (16-24 ms). The dispatcher's 2 ms slices end only
 * between ops, so such a call held every other client, even a Ping.
 *
 * The event loop stays the only thread that owns state: jobs, connections,
 * names, policy counters, caches, the stats. A blocking call is handed, as
 * a self-contained closure (struct nbd_lane_work), to a lane: one thread
 * per capability (the firewall's, the links'), which runs the closures it
 * is given one at a time, in order, and touches nothing but the closure's
 * data and the capability's own lane socket (one no loop code uses; no
 * logging, no counters). When a closure returns, the lane posts it on the
 * one completion eventfd the loop watches, and done() runs on the loop.
 *
 * The job that handed the call over is parked meanwhile (dispatch.c), and
 * jobs that need the same capability wait behind it in a FIFO, so their
 * reads of the kernel see what it left; Ping, Stats and jobs for other
 * capabilities go on. The dispatcher gives those jobs turns, one call
 * each: a job whose call returned goes behind the jobs that waited for it
 * (dispatch.c, wait_for_lane); the lane runs what it is given in order.
 * A closure cannot be interrupted: a job cancelled while its closure runs
 * (its client went away) is freed only after the closure returned, and
 * its done() is told so.
 *
 * Lanes are started after the privilege drop (main.c): a thread takes the
 * capability sets of the thread that creates it, so the lanes hold exactly
 * what the loop holds. Every signal is blocked in them; the loop's
 * signalfd gets SIGTERM. fds: while a call is under way, one eventfd for
 * all lanes, and the socket of the lane's own that the call opens and
 * closes; the firewall's lane keeps its socket (fw_kernel.c says why). */
#pragma once

#include <stdbool.h>

#include "loop.h"

struct nbd_lanes;
struct nbd_lane;

struct nbd_lane_work {
        /* On the lane's thread: the blocking call, over data alone. */
        void (*run)(void *data);
        /* On the loop, once run returned (or, cancelled before it began,
         * without it: not_run): the owner takes the outcome, or only frees.
         * A closure cancelled while it ran has run. */
        void (*done)(void *data, bool not_run);
        void *data;
        /* The lane's (nbd_lane_submit() sets them). */
        bool cancelled;
        bool ran; /* run() was called (the lane's, then the loop's) */
        struct nbd_lane *lane;
        struct nbd_lane_work *next;
};

/* The lanes' shared state; their completion eventfd is open (and watched
 * on loop) only while some closure is outstanding. 0 or -errno. */
int nbd_lanes_new(struct nbd_loop *loop, struct nbd_lanes **ret);
/* Stop every lane: the closure running finishes, those queued do not run;
 * each gets its done(not_run) here. Then the threads are joined. */
void nbd_lanes_free(struct nbd_lanes *ls);

/* A lane named name (for the thread's name, "nbd-NAME"). 0 or -errno. */
int nbd_lane_new(struct nbd_lanes *ls, const char *name, struct nbd_lane **ret);

/* Queue w behind the lane's other closures. w stays the caller's memory
 * and must live until its done() ran. 0, or -errno when the eventfd
 * cannot be opened (out of fds): then w is not queued. */
int nbd_lane_submit(struct nbd_lane *lane, struct nbd_lane_work *w);
/* The owner is gone: w does not run if it has not begun (then done() gets
 * not_run = true); one under way runs to its end. Only between
 * nbd_lane_submit() and w's done(). */
void nbd_lane_cancel(struct nbd_lane *lane, struct nbd_lane_work *w);

/* A closure is queued or running on the lane. */
bool nbd_lane_busy(const struct nbd_lane *lane);
/* fn(data) runs on the loop each time the lane has finished all it was
 * given (after the last done()). One per lane: the dispatcher's. */
void nbd_lane_on_idle(struct nbd_lane *lane, void (*fn)(void *data), void *data);

/* Tests only (a build with NB_TEST_HOOKS): while the file named by
 * $NETBROKERD_TEST_HOLD_<NAME> exists, the caller waits, and FILE.held
 * exists meanwhile. A step that grows with a request calls it where it
 * runs (a lane, or the loop), so a test can hold it there and see whether
 * the loop still serves. A no-op without the flag. */
#ifdef NB_TEST_HOOKS
void nbd_test_hold_point(const char *name);
#else
static inline void nbd_test_hold_point(const char *name)
{
        (void)name;
}
#endif
