// SPDX-License-Identifier: LGPL-2.1-or-later
/* The name allocator and the interface map at the scale of a host with
 * 10,000 guests and more (test-unit): what must stay flat per device. */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#include "ifmap.h"
#include "names.h"
#include "tests_unit.h"

/* 200,000 interfaces noted one by one, as their notifications come. A map
 * that looks for an ifindex by walking every entry takes O(N^2) here (some
 * 2 * 10^10 steps: far past the test's timeout); by hash, O(N). Renames
 * and deletes find their entries by ifindex and by name. */
START_TEST(test_ifmap_notes_200000_interfaces_each_in_constant_time)
{
        enum { N = 200000 };
        struct nbd_ifmap m = {0};
        char name[IFNAMSIZ];

        for (int i = 1; i <= N; i++) {
                snprintf(name, sizeof(name), "v%d", i);
                nbd_ifmap_note_kind(&m, name, 1000 + i, true, i % 2);
        }
        ck_assert_uint_eq(m.n, N);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "v1"), 1001);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "v200000"), 1000 + N);
        ck_assert(nbd_ifmap_get(&m, "v77777")->macvtap);
        /* Renamed: the new name for a known ifindex drops the old one. */
        for (int i = 1; i <= N; i += 2) {
                snprintf(name, sizeof(name), "w%d", i);
                nbd_ifmap_note(&m, name, 1000 + i, true);
        }
        ck_assert_uint_eq(m.n, N);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "v1"), 0);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "w1"), 1001);
        /* A known name under a new ifindex (deleted and made again, its
         * RTM_DELLINK lost): found by the new one afterwards. */
        nbd_ifmap_note(&m, "v2", 5000000, true);
        nbd_ifmap_note(&m, "x2", 5000000, true);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "v2"), 0);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "x2"), 5000000);
        for (int i = 1; i <= N; i++) {
                snprintf(name, sizeof(name), "%c%d", i == 2 ? 'x' : i % 2 ? 'w' : 'v', i);
                nbd_ifmap_note(&m, name, i == 2 ? 5000000 : 1000 + i, false);
        }
        ck_assert_uint_eq(m.n, 0);
        ck_assert_ptr_null(nbd_ifmap_get(&m, "w1"));
        nbd_ifmap_free(&m);
}
END_TEST

/* 10,000 macvtaps named in one go, half of them deleted, 10,000 more: next
 * fit hands out 0-9999, then 10000-19999 (no name freed a moment ago comes
 * back), and the dump lists exactly what is in use, in order. */
struct seen {
        size_t n_used;
        unsigned first, last, cursor;
};

static int seen_macvtap(const char *prefix, const unsigned *used, size_t n_used, unsigned cursor,
                        void *data)
{
        struct seen *s = data;

        if (strcmp(prefix, "macvtap") != 0)
                return 0;
        for (size_t i = 1; i < n_used; i++)
                ck_assert_uint_lt(used[i - 1], used[i]);
        *s = (struct seen){n_used, n_used ? used[0] : 0, n_used ? used[n_used - 1] : 0, cursor};
        return 0;
}

START_TEST(test_names_10000_macvtaps_next_fit_and_dump)
{
        struct nbd_names *n;
        char name[IFNAMSIZ], want[IFNAMSIZ];
        struct seen s = {0};

        ck_assert_int_eq(nbd_names_new(&n), 0);
        for (unsigned i = 0; i < 10000; i++) {
                ck_assert_int_eq(nbd_names_allocate(n, "macvtap", name), 0);
                snprintf(want, sizeof(want), "macvtap%u", i);
                ck_assert_str_eq(name, want);
        }
        for (unsigned i = 0; i < 10000; i += 2) {
                snprintf(name, sizeof(name), "macvtap%u", i);
                nbd_names_mark(n, name, false);
        }
        for (unsigned i = 0; i < 10000; i++) {
                ck_assert_int_eq(nbd_names_allocate(n, "macvtap", name), 0);
                snprintf(want, sizeof(want), "macvtap%u", 10000 + i);
                ck_assert_str_eq(name, want);
        }
        ck_assert_int_eq(nbd_names_foreach(n, seen_macvtap, &s), 0);
        ck_assert_uint_eq(s.n_used, 15000);
        ck_assert_uint_eq(s.first, 1);
        ck_assert_uint_eq(s.last, 19999);
        ck_assert_uint_eq(s.cursor, 20000);
        nbd_names_free(n);
}
END_TEST

TCase *names_scale_tcase(void)
{
        TCase *tc = tcase_create("names-scale");

        /* The map's test does 400,000 notes in some 100 ms; the walk it
         * replaces would take minutes. */
        tcase_set_timeout(tc, 20);
        tcase_add_test(tc, test_ifmap_notes_200000_interfaces_each_in_constant_time);
        tcase_add_test(tc, test_names_10000_macvtaps_next_fit_and_dump);
        return tc;
}
