// SPDX-License-Identifier: LGPL-2.1-or-later
/* A transaction's messages, encoded as each op is queued.
 *
 * An owner's chains and rules are compiled into libnftnl objects
 * (fw_compile.h), encoded here at once, and the objects freed: a batch of
 * thousands of owners holds its messages, not libnftnl's objects for every
 * rule and expression besides (at 2,048 guests those were half of the
 * helper's 105 MB peak, and faulting their pages in was about half of the
 * loop's time in the compile). The send numbers the messages in place and hands
 * the buffer to sendmsg() as it is, without copying it into a batch.
 * Each message remembers its op, for naming the owner the kernel refused. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fw_compile.h"

struct nbd_fw_msgs {
        char *buf;
        size_t len, cap;
        struct nbd_fw_msg {
                size_t off; /* of its nlmsghdr in buf */
                size_t owner; /* its op's index */
        } * v;
        size_t n, cap_v;
        char *scratch; /* zeroed; where each message is built */
};

/* Encode every item of it (with the op index each carries) after the
 * messages m has. 0, or -ENOMEM with m as it was. The items stay it's. */
int nbd_fw_msgs_add(struct nbd_fw_msgs *m, const struct nbd_fw_items *it);
/* Drop the messages from index n on. */
void nbd_fw_msgs_truncate(struct nbd_fw_msgs *m, size_t n);
/* Number the messages first, first + 1, ...; the last one asks for an ack
 * when ack_last, no other does. Then they are the bytes *ret (nothing when
 * there are none). */
void nbd_fw_msgs_number(struct nbd_fw_msgs *m, uint32_t first, bool ack_last, struct iovec *ret);
void nbd_fw_msgs_free(struct nbd_fw_msgs *m);
