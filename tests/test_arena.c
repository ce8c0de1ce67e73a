// SPDX-License-Identifier: LGPL-2.1-or-later
/* The decode arena (proto/codec.h) on its own: pieces aligned and apart,
 * blocks that grow, the budget in requested bytes, the bound on what the
 * arena holds, and every block's malloc failing in turn (tests/alloc_hook.h
 * wraps malloc at link time). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_hook.h"
#include "codec.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#endif
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#endif

static void *take(struct nbp_pb_budget *b, size_t size)
{
        return b->allocator.alloc(b->allocator.allocator_data, size);
}

static void give(struct nbp_pb_budget *b, void *p)
{
        b->allocator.free(b->allocator.allocator_data, p);
}

/* A Request of n Pings, packed (by the test, not counted). */
static uint8_t *pings(size_t n, size_t *ret_len)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, **ops = calloc(n, sizeof(*ops));
        Netbroker__Ping ping = NETBROKER__PING__INIT;
        uint8_t *buf;

        ck_assert_ptr_nonnull(ops);
        op.op_case = NETBROKER__OP__OP_PING;
        op.ping = &ping;
        for (size_t i = 0; i < n; i++)
                ops[i] = &op;
        req.n_ops = n;
        req.ops = ops;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        *ret_len = netbroker__client_message__get_packed_size(&m);
        buf = malloc(*ret_len);
        ck_assert_ptr_nonnull(buf);
        netbroker__client_message__pack(&m, buf);
        free(ops);
        return buf;
}

START_TEST(test_arena_pieces_are_aligned_and_apart)
{
        struct nbp_pb_budget b;
        unsigned char *p[200];
        size_t used = 0;

        nbp_pb_budget_init(&b, 1u << 20);
        for (size_t i = 0; i < 200; i++) {
                p[i] = take(&b, i);
                ck_assert_ptr_nonnull(p[i]);
                ck_assert_uint_eq((uintptr_t)p[i] % _Alignof(max_align_t), 0);
                memset(p[i], (int)i, i);
                used += i;
        }
        for (size_t i = 0; i < 200; i++)
                for (size_t j = 0; j < i; j++)
                        ck_assert_uint_eq(p[i][j], i);
        ck_assert_uint_eq(b.used, used);
        nbp_pb_budget_release(&b);
        ck_assert_uint_eq(b.used, 0);
        ck_assert_uint_eq(b.held, 0);
}
END_TEST

/* One malloc per block, not per piece; blocks double up to 1 MiB. */
START_TEST(test_arena_grows_by_doubling_blocks)
{
        struct nbp_pb_budget b;
        size_t grew[16], n = 0, held = 0;
        size_t live = nbt_alloc_outstanding();

        nbp_pb_budget_init(&b, 64u << 20);
        /* No assertion while counting: Check's own allocations would count. */
        nbt_alloc_arm(0);
        for (size_t i = 0; i < 100000 && n < 16; i++) {
                if (!take(&b, 64))
                        break;
                if (b.held != held) {
                        grew[n++] = b.held - held;
                        held = b.held;
                }
        }
        nbt_alloc_disarm();
        ck_assert_uint_eq(b.used, 100000 * 64);
        /* 100,000 pieces of 80 bytes with their headers: 8 MB, 15 blocks. */
        ck_assert_uint_eq(nbt_alloc_count(), n);
        ck_assert_uint_eq(n, 15);
        ck_assert_uint_eq(grew[0], 4096);
        for (size_t i = 1; i < n; i++)
                ck_assert_uint_eq(grew[i], grew[i - 1] < (1u << 20) ? 2 * grew[i - 1] : 1u << 20);
        ck_assert_uint_eq(nbt_alloc_outstanding(), live + n);
        nbp_pb_budget_release(&b);
        ck_assert_uint_eq(nbt_alloc_outstanding(), live);
}
END_TEST

/* A piece too large for the next block gets one of its own, and the block
 * being filled goes on being filled. */
START_TEST(test_arena_large_piece_gets_a_block_of_its_own)
{
        struct nbp_pb_budget b;
        char *small, *large, *after;
        size_t first;

        nbp_pb_budget_init(&b, 1u << 20);
        small = take(&b, 100);
        first = b.held;
        large = take(&b, 100000);
        after = take(&b, 100);
        ck_assert_ptr_nonnull(small);
        ck_assert_ptr_nonnull(large);
        ck_assert_ptr_nonnull(after);
        ck_assert_uint_gt(b.held - first, 100000);
        ck_assert_uint_lt(b.held - first, 100000 + 64);
        ck_assert(after > small);
        ck_assert_uint_lt((size_t)(after - small), first);
        memset(large, 1, 100000);
        nbp_pb_budget_release(&b);
}
END_TEST

/* The budget counts requested bytes of live pieces, as malloc per piece
 * did: a freed piece's bytes can be taken again. */
START_TEST(test_arena_budget_counts_requested_bytes)
{
        struct nbp_pb_budget b;
        void *a;

        nbp_pb_budget_init(&b, 1000);
        a = take(&b, 600);
        ck_assert_ptr_nonnull(a);
        ck_assert_uint_eq(b.used, 600);
        ck_assert_ptr_null(take(&b, 401));
        ck_assert_uint_eq(b.used, 600);
        ck_assert_ptr_nonnull(take(&b, 400));
        ck_assert_uint_eq(b.used, 1000);
        ck_assert_ptr_null(take(&b, 1));
        give(&b, a);
        ck_assert_uint_eq(b.used, 400);
        ck_assert_ptr_nonnull(take(&b, 600));
        ck_assert_uint_eq(b.count, 5);
        nbp_pb_budget_release(&b);
}
END_TEST

/* Freed pieces stay in the arena: taking and freeing in turn stops once
 * the arena's blocks would pass NBP_ARENA_HELD_MULTIPLE * limit. */
START_TEST(test_arena_refuses_churn_past_its_bound)
{
        struct nbp_pb_budget b;
        size_t rounds = 0;
        void *p;

        nbp_pb_budget_init(&b, 64u << 10);
        while ((p = take(&b, 1024))) {
                give(&b, p);
                rounds++;
                ck_assert_uint_lt(rounds, 1000);
        }
        ck_assert_uint_eq(b.used, 0);
        ck_assert_uint_le(b.held, NBP_ARENA_HELD_MULTIPLE * (64u << 10));
        ck_assert_uint_gt(rounds, 64); /* more than the limit, freed in turn */
        nbp_pb_budget_release(&b);
}
END_TEST

/* The same as a frame: 1,000 copies of a Request of 100 Pings, each of
 * which replaces the one before (a oneof: protobuf-c frees the old one and
 * decodes the new). Small live, much taken: refused under a bound its live
 * size fits (the old allocator took it, reusing what it freed). */
START_TEST(test_arena_refuses_a_frame_that_repeats_a_field)
{
        struct nbp_pb_budget b;
        size_t one, len;
        uint8_t *msg = pings(100, &one), *frame = malloc(1000 * one);
        Netbroker__ClientMessage *out;

        ck_assert_ptr_nonnull(frame);
        for (size_t i = 0; i < 1000; i++)
                memcpy(frame + i * one, msg, one);
        len = 1000 * one;
        nbp_pb_budget_init(&b, 64u << 20);
        out = netbroker__client_message__unpack(&b.allocator, len, frame);
        ck_assert_ptr_nonnull(out);
        ck_assert_uint_eq(out->request->n_ops, 100);
        ck_assert_uint_lt(b.used, 64u << 10);
        ck_assert_uint_gt(b.held, 2u << 20);
        nbp_pb_budget_release(&b);
        nbp_pb_budget_init(&b, 1u << 20);
        ck_assert_ptr_null(netbroker__client_message__unpack(&b.allocator, len, frame));
        ck_assert_uint_eq(b.used, 0);
        ck_assert_uint_le(b.held, NBP_ARENA_HELD_MULTIPLE * (1u << 20));
        nbp_pb_budget_release(&b);
        free(frame);
        free(msg);
}
END_TEST

/* Each block's malloc fails in turn: the decode fails, and the release
 * leaves nothing behind. */
START_TEST(test_arena_block_allocation_fails_cleanly)
{
        size_t len;
        uint8_t *buf = pings(5000, &len);
        size_t live = nbt_alloc_outstanding();
        unsigned long n = 1;

        for (;; n++) {
                struct nbp_pb_budget b;
                Netbroker__ClientMessage *out;

                nbp_pb_budget_init(&b, 16u << 20);
                nbt_alloc_arm(n);
                out = netbroker__client_message__unpack(&b.allocator, len, buf);
                nbt_alloc_disarm();
                if (out) {
                        ck_assert(!nbt_alloc_failed());
                        ck_assert_uint_eq(out->request->n_ops, 5000);
                        nbp_pb_budget_release(&b);
                        break;
                }
                ck_assert(nbt_alloc_failed());
                ck_assert_uint_eq(b.used, 0);
                nbp_pb_budget_release(&b);
                ck_assert_uint_eq(nbt_alloc_outstanding(), live);
                ck_assert_uint_lt(n, 100);
        }
        /* 5,000 Pings decode into a few blocks, each a failure point. */
        ck_assert_uint_gt(n, 5);
        ck_assert_uint_eq(nbt_alloc_outstanding(), live);
        free(buf);
}
END_TEST

#ifdef ARENA_ASAN
/* The bytes after a piece, and a freed piece, are poisoned: an overflow
 * out of a piece is found as on the heap. */
START_TEST(test_arena_poisons_around_pieces)
{
        struct nbp_pb_budget b;
        char *p, *q;

        nbp_pb_budget_init(&b, 1u << 20);
        p = take(&b, 5);
        q = take(&b, 16);
        ck_assert(!__asan_address_is_poisoned(p + 4));
        ck_assert(__asan_address_is_poisoned(p + 5));
        ck_assert(!__asan_address_is_poisoned(q + 15));
        ck_assert(__asan_address_is_poisoned(q + 16));
        ck_assert(__asan_address_is_poisoned(q - 1));
        give(&b, q);
        ck_assert(__asan_address_is_poisoned(q));
        nbp_pb_budget_release(&b);
}
END_TEST
#endif

int main(void)
{
        Suite *s = suite_create("arena");
        TCase *tc = tcase_create("arena");
        SRunner *sr;
        int failed;

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_arena_pieces_are_aligned_and_apart);
        tcase_add_test(tc, test_arena_grows_by_doubling_blocks);
        tcase_add_test(tc, test_arena_large_piece_gets_a_block_of_its_own);
        tcase_add_test(tc, test_arena_budget_counts_requested_bytes);
        tcase_add_test(tc, test_arena_refuses_churn_past_its_bound);
        tcase_add_test(tc, test_arena_refuses_a_frame_that_repeats_a_field);
        tcase_add_test(tc, test_arena_block_allocation_fails_cleanly);
#ifdef ARENA_ASAN
        tcase_add_test(tc, test_arena_poisons_around_pieces);
#endif
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_ENV);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
