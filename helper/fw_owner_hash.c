// SPDX-License-Identifier: LGPL-2.1-or-later
/* The owner table's seeded hash; see fw_owner_hash.h. */
#include "fw_owner_hash.h"

#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint32_t basis;
static pthread_once_t basis_once = PTHREAD_ONCE_INIT;

/* Once per process, from any thread (lanes read the table too). Without
 * entropy yet (early boot: GRND_NONBLOCK fails with EAGAIN), the clock and
 * the pid: not secret, but not a constant a client can prepare for. */
static void basis_init(void)
{
        uint32_t seed = 0;
        struct timespec ts;

        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
                clock_gettime(CLOCK_MONOTONIC, &ts);
                seed = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec * 2654435761u ^
                       (uint32_t)getpid() << 16;
        }
        basis = 2166136261u ^ seed;
}

uint32_t nbd_fw_owner_hash(const char *name, size_t len)
{
        uint32_t h;

        pthread_once(&basis_once, basis_init);
        h = basis;
        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)name[i]) * 16777619u;
        /* murmur3's finaliser: FNV's low bits (the bucket) depend on the
         * low bits of the state and the bytes only. */
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        h *= 0xc2b2ae35u;
        return h ^ (h >> 16);
}
