// SPDX-License-Identifier: LGPL-2.1-or-later
/* Whether a backend table (helper/backend.h) is complete: a NULL entry
 * would crash the helper, or the fuzzer, the first time an op reaches it.
 * The tables hold nothing but function pointers, so every entry is checked
 * without naming them: an entry added to backend.h is checked as it is. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"

typedef void (*nbt_backend_entry)(void);

_Static_assert(sizeof(struct nbd_backend) % sizeof(nbt_backend_entry) == 0,
               "struct nbd_backend holds function pointers only");

/* The offset in struct nbd_backend of its first NULL entry, or SIZE_MAX
 * when every entry is set. */
static inline size_t nbt_backend_unset(const struct nbd_backend *be)
{
        for (size_t off = 0; off < sizeof(*be); off += sizeof(nbt_backend_entry)) {
                nbt_backend_entry fn;

                memcpy(&fn, (const char *)be + off, sizeof(fn));
                if (!fn)
                        return off;
        }
        return SIZE_MAX;
}
