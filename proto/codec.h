// SPDX-License-Identifier: LGPL-2.1-or-later
/* protobuf-c glue shared by both sides: a bounded allocator and packing a
 * message into a frame. */
#pragma once

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

#include "frame.h"
#include "netbroker.pb-c.h"

#define NBP_PROTOCOL_VERSION 1

/* The allocator a frame is decoded with: an arena with a budget.
 *
 * protobuf-c allocates once per field and message it decodes. Here each
 * allocation (a piece) is a pointer bump in the arena's newest block (4 KiB,
 * doubling to 1 MiB; a piece over a quarter of the next block's size gets a
 * block of its own), aligned to max_align_t, with its size in a header
 * before it. Freeing a piece gives its bytes back to the budget but not to
 * the arena: nbp_pb_budget_release() frees every block at once, in place of
 * protobuf_c_message_free_unpacked() walking the tree (which may still be
 * called, and frees nothing).
 *
 * The budget: `used` counts the requested sizes of the live pieces, as the
 * malloc-per-piece allocator did, and a piece that would take it past
 * `limit` is refused, so a small frame cannot unpack into a huge tree
 * (protobuf-c sizes repeated fields from the input). What was freed stays
 * in the arena until the release, so `held` (the blocks' bytes) is bounded
 * too, by NBP_ARENA_HELD_MULTIPLE * limit: a frame that repeats a message
 * field makes protobuf-c free what it decoded and decode again (a oneof
 * replaced, a message merged), over and over.
 * `fail_at`, when non-zero, fails the fail_at-th piece: the fault-injection
 * hook for the allocation-failure tests (a block's malloc can fail too). In
 * sanitizer builds the bytes between pieces, and freed pieces, are poisoned,
 * so an overflow out of a piece is found as on the heap. */
#define NBP_ARENA_HELD_MULTIPLE 2

struct nbp_arena_block;

struct nbp_pb_budget {
        ProtobufCAllocator allocator;
        size_t limit;
        size_t used;
        size_t held;
        size_t count;
        size_t fail_at;
        struct nbp_arena_block *blocks; /* newest first */
        char *cur, *end; /* free room in the block being filled */
        size_t next_block; /* bytes of the next block */
        /* Why a piece was refused, for the error: over the limit (the
         * frame decodes to too much), or malloc() failed. */
        bool over, oom;
};

/* Start an empty arena. */
void nbp_pb_budget_init(struct nbp_pb_budget *b, size_t limit);

/* Free the arena, and with it everything decoded from it; b is then empty
 * (init'ed with the same limit). Accepts an empty arena. */
void nbp_pb_budget_release(struct nbp_pb_budget *b);

/* Pack `msg` into a new frame. Returns 0 or -errno. */
int nbp_pack_frame(const ProtobufCMessage *msg, struct nbp_frame_out **ret);
