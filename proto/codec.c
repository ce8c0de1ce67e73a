// SPDX-License-Identifier: LGPL-2.1-or-later
#include "codec.h"

#include <errno.h>
#include <sanitizer/asan_interface.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN _Alignof(max_align_t)
#define HEADER ARENA_ALIGN /* a piece's size, in front of it */
#define FIRST_BLOCK (4u << 10)
#define LAST_BLOCK (1u << 20) /* blocks stop doubling here */

struct nbp_arena_block {
        struct nbp_arena_block *next;
        size_t size; /* bytes, this header included */
        max_align_t data[];
};

static size_t round_up(size_t n)
{
        return (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
}

/* Room for need bytes: in the block being filled, or else in a new block
 * (of its own for a large piece, so the current one goes on being filled).
 * Returns where it starts, or NULL. */
static char *arena_take(struct nbp_pb_budget *b, size_t need)
{
        struct nbp_arena_block *blk;
        size_t room = b->limit * NBP_ARENA_HELD_MULTIPLE - b->held;
        bool alone = need > b->next_block / 4;
        size_t size = sizeof(*blk) + (alone ? need : b->next_block - sizeof(*blk));
        char *p;

        if ((size_t)(b->end - b->cur) >= need) {
                p = b->cur;
                b->cur += need;
                return p;
        }
        if (size > room) {
                /* Near the bound (a small limit): what is left, if it fits. */
                if (sizeof(*blk) + need > room) {
                        b->over = true;
                        return NULL;
                }
                size = room;
        }
        blk = malloc(size);
        if (!blk) {
                b->oom = true;
                return NULL;
        }
        blk->size = size;
        b->held += size;
        p = (char *)blk->data;
        ASAN_POISON_MEMORY_REGION(p, size - sizeof(*blk));
        if (alone && b->blocks) {
                blk->next = b->blocks->next;
                b->blocks->next = blk;
                return p;
        }
        blk->next = b->blocks;
        b->blocks = blk;
        b->cur = p + need;
        b->end = p + size - sizeof(*blk);
        if (!alone && b->next_block < LAST_BLOCK)
                b->next_block *= 2;
        return p;
}

static void *budget_alloc(void *data, size_t size)
{
        struct nbp_pb_budget *b = data;
        char *p;

        b->count++;
        if (b->fail_at && b->count == b->fail_at)
                return NULL;
        if (size > b->limit - b->used) {
                b->over = true;
                return NULL;
        }
        p = arena_take(b, HEADER + round_up(size ? size : 1));
        if (!p)
                return NULL;
        ASAN_UNPOISON_MEMORY_REGION(p, sizeof(size_t));
        memcpy(p, &size, sizeof(size));
        ASAN_POISON_MEMORY_REGION(p, sizeof(size_t));
        b->used += size;
        ASAN_UNPOISON_MEMORY_REGION(p + HEADER, size);
        return p + HEADER;
}

/* The piece goes back to the budget; its bytes stay in the arena. */
static void budget_free(void *data, void *ptr)
{
        struct nbp_pb_budget *b = data;
        char *p = ptr;
        size_t size;

        if (!p)
                return;
        ASAN_UNPOISON_MEMORY_REGION(p - HEADER, sizeof(size_t));
        memcpy(&size, p - HEADER, sizeof(size));
        ASAN_POISON_MEMORY_REGION(p - HEADER, sizeof(size_t));
        ASAN_POISON_MEMORY_REGION(p, size);
        b->used -= size;
}

void nbp_pb_budget_init(struct nbp_pb_budget *b, size_t limit)
{
        b->allocator.alloc = budget_alloc;
        b->allocator.free = budget_free;
        b->allocator.allocator_data = b;
        /* Bounded so that NBP_ARENA_HELD_MULTIPLE * limit and a piece's
         * header and rounding cannot overflow. */
        b->limit = limit < SIZE_MAX / 4 ? limit : SIZE_MAX / 4;
        b->used = 0;
        b->held = 0;
        b->count = 0;
        b->fail_at = 0;
        b->blocks = NULL;
        b->cur = NULL;
        b->end = NULL;
        b->next_block = FIRST_BLOCK;
        b->over = b->oom = false;
}

void nbp_pb_budget_release(struct nbp_pb_budget *b)
{
        struct nbp_arena_block *blk = b->blocks, *next;

        for (; blk; blk = next) {
                next = blk->next;
                ASAN_UNPOISON_MEMORY_REGION(blk->data, blk->size - sizeof(*blk));
                free(blk);
        }
        nbp_pb_budget_init(b, b->limit);
}

int nbp_pack_frame(const ProtobufCMessage *msg, struct nbp_frame_out **ret)
{
        struct nbp_frame_out *f;
        size_t len = protobuf_c_message_get_packed_size(msg);
        int r = nbp_frame_out_new(len, &f);

        if (r < 0)
                return r;
        protobuf_c_message_pack(msg, f->buf + NBP_FRAME_HEADER_SIZE);
        *ret = f;
        return 0;
}
