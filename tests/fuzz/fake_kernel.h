// SPDX-License-Identifier: LGPL-2.1-or-later
/* An in-memory kernel for the fuzzers and the allocation-failure test.
 *
 * fake_kernel.c implements the kernel-facing half of link.h, link_show.h,
 * fw_kernel.h, bandwidth.h, bandwidth_show.h and spawn.h over a table of
 * fake interfaces, firewall owners and bandwidth limits, so dispatch.c, the
 * op files and server.c run unchanged without touching the kernel. All of
 * it is one table, nbd_fake_backend (helper/backend.h is the contract),
 * which a test gives the dispatcher in place of nbd_kernel_backend; the
 * real kernel code is linked beside it, never called, and nothing is
 * renamed.
 *
 * The world it starts from (nb_fake_reset):
 *   lo(1)  eth0(2)  br0(3, bridge)  vnet0(4, tap, limits in and out,
 *   firewall owner "guest0")  macvtap0(5, on eth0)  fail0(6)
 * None of them carries an owner mark (only root may change them); what the
 * helper makes is marked for the uid that asked, and "guest0" is root's.
 * Anything named "fail..." (an interface, an owner, a program path
 * containing "fail") makes the operation on it fail with EIO, so failures
 * and their undo are reachable from a request. Programs: ".../false" exits
 * 1, ".../cat" echoes its stdin, ".../sleep" times out, a path containing
 * "missing" cannot be spawned (ENOENT); anything else exits 0 at once.
 * Programs finish from the loop (a 0 ms timer), as real ones do. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"

/* The fake's half of every capability: give it to the dispatcher (struct
 * nbd_dispatch_ctx's be, nbd_server_new's be) and open the objects with
 * its links.open, fw.open and bw.open. */
extern const struct nbd_backend nbd_fake_backend;

/* Forget everything and build the starting world again. Returns 0 or
 * -ENOMEM. */
int nb_fake_reset(void);

/* Free every object of the fake (nb_links_close does too). */
void nb_fake_free(void);

/* A canonical text of the whole state (interfaces with their attributes
 * and limits, firewall owners), for comparing before and after. Writes at
 * most len bytes; returns the length it needed. Allocates nothing. */
size_t nb_fake_describe(char *buf, size_t len);

/* Interfaces there now that were not in the starting world. */
unsigned nb_fake_made(void);

/* Fake programs started and not yet finished or abandoned. */
unsigned nb_fake_children(void);
