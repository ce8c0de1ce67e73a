// SPDX-License-Identifier: LGPL-2.1-or-later
/* The ABI rules of netbroker.h: sized structs read and written as the
 * header says (client/abi_struct.c, and through the public functions that
 * take them), and the version macros agreeing with CMake's project version
 * and with nb_version(). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "abi_struct.h"
#include "netbroker.h"
#include "tests_unit.h"

/* A struct of some release: `known` is the library's, `first` the size
 * of the first release's. */
struct v2 {
        size_t size;
        uint32_t a, b; /* first release */
        uint64_t c; /* added later */
};
#define V2_FIRST NB_SIZE_TO(struct v2, b)

START_TEST(test_struct_in_reads_what_fits_and_zeroes_the_rest)
{
        struct v2 theirs = {.size = V2_FIRST, .a = 1, .b = 2, .c = 99};
        struct v2 mine;

        memset(&mine, 0xee, sizeof(mine));
        ck_assert_int_eq(NB_STRUCT_IN(&mine, &theirs, V2_FIRST), 0);
        ck_assert_uint_eq(mine.size, sizeof(mine));
        ck_assert_uint_eq(mine.a, 1);
        ck_assert_uint_eq(mine.b, 2);
        ck_assert_uint_eq(mine.c, 0); /* past the caller's size: zero, not its 99 */
}
END_TEST

START_TEST(test_struct_in_refuses_size_zero_small_or_unknown_non_zero_bytes)
{
        struct {
                struct v2 s;
                uint64_t newer; /* a field of a header newer than the library */
        } theirs = {.s = {.size = sizeof(theirs), .a = 1}, .newer = 0};
        struct v2 mine = {.a = 7}, before = mine;

        ck_assert_int_eq(NB_STRUCT_IN(&mine, &theirs, V2_FIRST), 0);
        ck_assert_uint_eq(mine.a, 1);
        mine = before;
        theirs.newer = 5;
        ck_assert_int_eq(NB_STRUCT_IN(&mine, &theirs, V2_FIRST), -E2BIG);
        theirs.s.size = 0;
        ck_assert_int_eq(NB_STRUCT_IN(&mine, &theirs, V2_FIRST), -EINVAL);
        theirs.s.size = V2_FIRST - 1;
        ck_assert_int_eq(NB_STRUCT_IN(&mine, &theirs, V2_FIRST), -EINVAL);
        ck_assert_int_eq(memcmp(&mine, &before, sizeof(mine)), 0); /* untouched */
}
END_TEST

START_TEST(test_struct_out_writes_only_the_callers_size)
{
        struct v2 src = {.size = 12345, .a = 1, .b = 2, .c = 3};
        struct v2 small;
        struct {
                struct v2 s;
                uint64_t newer;
        } big = {.s = {.size = sizeof(big)}, .newer = 0xffff};

        memset(&small, 0xee, sizeof(small));
        small.size = V2_FIRST;
        ck_assert_int_eq(NB_STRUCT_OUT(&small, &src, V2_FIRST), 0);
        ck_assert_uint_eq(small.size, V2_FIRST); /* the caller's, not src's */
        ck_assert_uint_eq(small.a, 1);
        ck_assert_uint_eq(small.b, 2);
        ck_assert_uint_eq(small.c, 0xeeeeeeeeeeeeeeeeull); /* beyond its size: not written */
        ck_assert_int_eq(NB_STRUCT_OUT(&big.s, &src, V2_FIRST), 0);
        ck_assert_uint_eq(big.s.c, 3);
        ck_assert_uint_eq(big.newer, 0); /* what this library does not know: zero */
        small.size = 0;
        small.a = 42;
        ck_assert_int_eq(NB_STRUCT_OUT(&small, &src, V2_FIRST), -EINVAL);
        ck_assert_uint_eq(small.a, 42);
}
END_TEST

/* Through the public functions: a size 0 struct (a caller that did not
 * use the INIT macro) is refused and adds nothing. */
START_TEST(test_public_functions_refuse_an_unsized_struct_and_add_nothing)
{
        nb_batch *b = nb_batch_new();
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_tap_opts tap = {.persist = true};
        nb_link_change ch = {.up = 1};
        nb_rate rate = {.average = 100};
        nb_fw_rule rule = {.verdict = NB_FW_DROP};
        nb_fw_group_opts go = {.priority = 1};

        ck_assert_int_eq(nb_batch_tap_create(b, "t0", &tap), -EINVAL);
        ck_assert_int_eq(nb_batch_link_set(b, "t0", &ch), -EINVAL);
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "t0", &rate, NULL), -EINVAL);
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "t0", NULL, &rate), -EINVAL);
        ck_assert_uint_eq(nb_batch_size(b), 0);
        ck_assert_int_eq(nb_fw_rule_add(rs, &rule), -EINVAL);
        ck_assert_int_eq(nb_fw_group_ex(rs, "g", &go), -EINVAL);
        go.size = sizeof(go);
        go.guard = &rule; /* a guard without its size */
        ck_assert_int_eq(nb_fw_group_ex(rs, "g", &go), -EINVAL);
        ck_assert_int_eq(nb_spawn("/nonexistent", &(nb_spawn_opts){.config_path = "x"}, NULL),
                         -EINVAL);

        tap.size = sizeof(tap);
        ch.size = sizeof(ch);
        rate.size = sizeof(rate);
        ck_assert_int_eq(nb_batch_tap_create(b, "t0", &tap), 0);
        ck_assert_int_eq(nb_batch_link_set(b, "t0", &ch), 0);
        ck_assert_int_eq(nb_batch_bandwidth_set(b, "t0", &rate, NULL), 0);
        ck_assert_uint_eq(nb_batch_size(b), 3);
        nb_fw_ruleset_free(rs);
        nb_batch_free(b);
}
END_TEST

/* A caller built against a newer header: its structs are larger. Fields
 * it leaves at zero are accepted (their zero means "as before"); a
 * non-zero one this library cannot honour is -E2BIG. */
START_TEST(test_public_functions_take_a_newer_callers_larger_struct)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        struct {
                nb_fw_rule r;
                uint64_t newer;
        } rule = {.r = {.size = sizeof(rule), .verdict = NB_FW_DROP, .ether_type = 0x0800}};
        /* An array's stride is its elements' size: a newer nb_fw_var. */
        struct wide_var {
                nb_fw_var v;
                uint64_t newer;
        };
        const char *const mac[] = {"52:54:00:00:00:01", NULL};
        const char *const ip[] = {"10.0.0.1", NULL};
        struct wide_var vars[] = {
                {.v = {.size = sizeof(struct wide_var), .name = "MAC", .values = mac}},
                {.v = {.size = sizeof(struct wide_var), .name = "IP", .values = ip}},
        };

        ck_assert_int_eq(nb_fw_rule_add(rs, &rule.r), 0);
        rule.newer = 1;
        ck_assert_int_eq(nb_fw_rule_add(rs, &rule.r), -E2BIG);
        ck_assert_int_eq(nb_fw_add_filter(rs, "clean-traffic", &vars[0].v, 2), 0);
        vars[1].v.size = sizeof(nb_fw_var); /* elements of different sizes */
        ck_assert_int_eq(nb_fw_add_filter(rs, "no-ip-spoofing", &vars[0].v, 2), -EINVAL);
        nb_fw_ruleset_free(rs);
}
END_TEST

/* NB_VERSION_CHECK works where a program needs it first: in #if. */
#if NB_VERSION_CHECK(NB_VERSION_MAJOR, NB_VERSION_MINOR, NB_VERSION_MICRO) &&                      \
        !NB_VERSION_CHECK(NB_VERSION_MAJOR + 1, 0, 0)
static const bool version_check_in_if = true;
#else
static const bool version_check_in_if = false;
#endif

START_TEST(test_version_macros_agree_with_cmake_and_the_library)
{
        ck_assert(version_check_in_if);
        ck_assert_int_eq(NB_VERSION_MAJOR, NB_CMAKE_VERSION_MAJOR);
        ck_assert_int_eq(NB_VERSION_MINOR, NB_CMAKE_VERSION_MINOR);
        ck_assert_int_eq(NB_VERSION_MICRO, NB_CMAKE_VERSION_PATCH);
        ck_assert_uint_eq(nb_version(), NB_VERSION_NUMBER);
        ck_assert(NB_VERSION_CHECK(NB_CMAKE_VERSION_MAJOR, NB_CMAKE_VERSION_MINOR,
                                   NB_CMAKE_VERSION_PATCH));
        ck_assert(NB_VERSION_CHECK(NB_CMAKE_VERSION_MAJOR, 0, 0));
        ck_assert(!NB_VERSION_CHECK(NB_CMAKE_VERSION_MAJOR, NB_CMAKE_VERSION_MINOR + 1, 0));
        ck_assert(!NB_VERSION_CHECK(NB_CMAKE_VERSION_MAJOR + 1, 0, 0));
        ck_assert_uint_eq(NB_VERSION_ENCODE(1, 2, 3), 0x010203);
}
END_TEST

TCase *abi_tcase(void)
{
        TCase *tc = tcase_create("abi");

        tcase_add_test(tc, test_struct_in_reads_what_fits_and_zeroes_the_rest);
        tcase_add_test(tc, test_struct_in_refuses_size_zero_small_or_unknown_non_zero_bytes);
        tcase_add_test(tc, test_struct_out_writes_only_the_callers_size);
        tcase_add_test(tc, test_public_functions_refuse_an_unsized_struct_and_add_nothing);
        tcase_add_test(tc, test_public_functions_take_a_newer_callers_larger_struct);
        tcase_add_test(tc, test_version_macros_agree_with_cmake_and_the_library);
        return tc;
}
