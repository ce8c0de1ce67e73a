// SPDX-License-Identifier: LGPL-2.1-or-later
/* See eintr_hook.c. */
#pragma once

/* The helper's next this many recvmmsg() calls fail with EINTR. */
extern unsigned nbt_recvmmsg_eintr;
/* Every recvmmsg() call of the helper's, counted. */
extern unsigned long nbt_recvmmsg_calls;
