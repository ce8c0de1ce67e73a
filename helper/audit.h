// SPDX-License-Identifier: LGPL-2.1-or-later
/* The audit trail: one line at notice level for every op that changed the
 * kernel or ran a program, with who asked (uid, pid), the op, the object
 * and the outcome, in a form a log filter can read:
 *
 *   audit: uid=1000 pid=4242 op=tap_create object=vnet3 status=0 result=done
 *
 * and for one refused before it ran (policy, bad input), result=refused
 * with the refusal's errno and message.
 *
 * Ops that change nothing (Ping, Stats, lists, an ensure that found its
 * rules in place) leave no line. */
#pragma once

#include "codec.h"
#include "peer.h"

/* How an op ended, as the audit line says it. */
enum nbd_audit_outcome {
        NBD_AUDIT_DONE, /* status 0 */
        NBD_AUDIT_FAILED, /* ran, and failed (status, message) */
        NBD_AUDIT_UNDONE, /* done, then undone because a later op failed */
        /* Its kernel call ran on a lane and ended after its client went
         * away: what the kernel did, and that nobody was told. */
        NBD_AUDIT_DONE_CLIENT_GONE,
        NBD_AUDIT_FAILED_CLIENT_GONE,
        NBD_AUDIT_REFUSED, /* refused at validation (policy, bad input): never ran */
        /* Done, a later op failed, and its undo changed nothing: the
         * interface was no longer the one it made or changed, or the
         * caller's (the message says which). */
        NBD_AUDIT_UNDO_SKIPPED,
};

/* Log op's line if it is one that changes the kernel or runs a program. */
void nbd_audit_op(const struct nbd_peer *peer, const Netbroker__Op *op,
                  const Netbroker__Result *res, enum nbd_audit_outcome outcome);

/* The same for an op refused at validation (result=refused), from the
 * loop: a refusal costs its client nothing, so at most
 * NBD_AUDIT_REFUSALS_PER_S lines a second are written for each uid but
 * root (one uid's flood silences no other's); the rest are counted
 * (audit_refusals_unlogged) and said in one line with the next second's
 * first refusal. */
#define NBD_AUDIT_REFUSALS_PER_S 20
void nbd_audit_refused(const struct nbd_peer *peer, const Netbroker__Op *op,
                       const Netbroker__Result *res);
