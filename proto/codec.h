/* protobuf-c glue shared by both sides: a bounded allocator and packing a
 * message into a frame. */
#pragma once

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "frame.h"
#include "netbroker.pb-c.h"

#define NBP_PROTOCOL_VERSION 1

/* An allocator that refuses to hand out more than `limit` bytes in all, so a
 * small frame cannot unpack into a huge tree (protobuf-c sizes repeated
 * fields from the input). `fail_at`, when non-zero, fails the fail_at-th
 * allocation: the fault-injection hook for the allocation-failure tests. */
struct nbp_pb_budget {
        ProtobufCAllocator allocator;
        size_t limit;
        size_t used;
        size_t count;
        size_t fail_at;
};

void nbp_pb_budget_init(struct nbp_pb_budget *b, size_t limit);

/* Pack `msg` into a new frame. Returns 0 or -errno. */
int nbp_pack_frame(const ProtobufCMessage *msg, struct nbp_frame_out **ret);
