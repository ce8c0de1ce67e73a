#include "codec.h"

#include <errno.h>
#include <stdlib.h>

/* Each block carries its size in front so free() can give the budget back. */
struct block {
        size_t size;
        max_align_t data[];
};

static void *budget_alloc(void *data, size_t size)
{
        struct nbp_pb_budget *b = data;
        struct block *blk;

        b->count++;
        if (b->fail_at && b->count == b->fail_at)
                return NULL;
        if (size > b->limit - b->used)
                return NULL;
        blk = malloc(sizeof(*blk) + size);
        if (!blk)
                return NULL;
        blk->size = size;
        b->used += size;
        return blk->data;
}

static void budget_free(void *data, void *ptr)
{
        struct nbp_pb_budget *b = data;
        struct block *blk;

        if (!ptr)
                return;
        blk = (struct block *)((char *)ptr - offsetof(struct block, data));
        b->used -= blk->size;
        free(blk);
}

void nbp_pb_budget_init(struct nbp_pb_budget *b, size_t limit)
{
        b->allocator.alloc = budget_alloc;
        b->allocator.free = budget_free;
        b->allocator.allocator_data = b;
        b->limit = limit;
        b->used = 0;
        b->count = 0;
        b->fail_at = 0;
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
