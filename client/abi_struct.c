// SPDX-License-Identifier: LGPL-2.1-or-later
/* The caller's sized structs: see abi_struct.h and netbroker.h, "ABI". */
#include "abi_struct.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

int nb_struct_in(void *dst, size_t known, size_t first, const void *src)
{
        size_t size;

        if (!src)
                return -EINVAL;
        memcpy(&size, src, sizeof(size));
        if (size == 0 || size < first)
                return -EINVAL;
        /* Fields of a newer header than ours: only their zero value, which
         * means what the struct meant without them, can be honoured. */
        for (size_t i = known; i < size; i++)
                if (((const uint8_t *)src)[i])
                        return -E2BIG;
        if (size > known)
                size = known;
        memcpy(dst, src, size);
        memset((uint8_t *)dst + size, 0, known - size);
        memcpy(dst, &known, sizeof(known));
        return 0;
}

int nb_struct_out(void *dst, const void *src, size_t known, size_t first)
{
        size_t size;

        if (!dst)
                return -EINVAL;
        memcpy(&size, dst, sizeof(size));
        if (size == 0 || size < first)
                return -EINVAL;
        /* The caller's size stays as it set it: only what follows is ours. */
        memcpy((uint8_t *)dst + sizeof(size), (const uint8_t *)src + sizeof(size),
               (size < known ? size : known) - sizeof(size));
        if (size > known)
                memset((uint8_t *)dst + known, 0, size - known);
        return 0;
}
