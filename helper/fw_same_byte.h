// SPDX-License-Identifier: LGPL-2.1-or-later
/* Ensure's check of the shared set same_byte (fw_compile.h): its content is
 * not an owner's, so no owner's hash covers it, and anyone with
 * CAP_NET_ADMIN in the namespace can change it (as any of the table): an
 * element (1 . 2) added makes an ARP whose sender and target addresses
 * differ pass as gratuitous for every guest. When someone has committed
 * since the helper's last commit, the first ensure of an owner that uses
 * the set reads its elements (once a transaction) and, when they are not
 * exactly the 256 pairs (b . b), queues a flush and the 256 again. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "fw_compile.h"
#include "fw_table.h"

/* Whether the set holds exactly the pairs (b . b): *ret true when it does
 * or does not exist (no rule can use a set that is not there), false when
 * anything else is in it or any pair is missing. 0 or -errno. */
int nbd_fw_same_byte_read(struct nbd_fw *fw, bool *ret);

/* For ensure: unless the table is as our last commit left it (owners'
 * mark is gen), read the set, and when it is not ours, push a flush and
 * its elements to it, for op owner_idx. 0 or -errno (items untouched). */
int nbd_fw_same_byte_ensure(struct nbd_fw *fw, const struct nbd_fw_owners *owners, uint32_t gen,
                            struct nbd_fw_items *it, size_t owner_idx);
