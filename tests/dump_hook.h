// SPDX-License-Identifier: LGPL-2.1-or-later
/* See dump_hook.c. */
#pragma once

/* The next this many netlink dumps (counted at their NLMSG_DONE) have
 * NLM_F_DUMP_INTR set on each of their messages, as after a concurrent
 * change. */
extern unsigned nbt_dump_intr;
/* The next this many dumps have it on their NLMSG_DONE alone, as when the
 * change came between the dump's last datagram and its end. */
extern unsigned nbt_dump_intr_done;
/* When negative: the next NLMSG_DONE a recv() returns carries this errno,
 * as a dump the kernel could not finish does; then it is 0 again. */
extern int nbt_dump_done_err;
