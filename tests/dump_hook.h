// SPDX-License-Identifier: LGPL-2.1-or-later
/* See dump_hook.c. */
#pragma once

/* The next this many netlink dumps (counted at their NLMSG_DONE) have
 * NLM_F_DUMP_INTR set on each of their messages, as after a concurrent
 * change. */
extern unsigned nbt_dump_intr;
/* When negative: the next NLMSG_DONE a recv() returns carries this errno,
 * as a dump the kernel could not finish does; then it is 0 again. */
extern int nbt_dump_done_err;
