// SPDX-License-Identifier: LGPL-2.1-or-later
/* Allocation-failure injection, for tests only, by link-time wrapping.
 *
 * A binary linked with NB_ALLOC_HOOK_LINK_OPTIONS (tests/CMakeLists.txt:
 * -Wl,--wrap=malloc and the rest) sends every allocation made by its own
 * objects and static libraries here: the helper's dispatch, op files,
 * server, loop and names code, the codec's decode budget, the framing, and
 * the fake kernel. Shared libraries (libc, libprotobuf-c) keep their own.
 * The production code carries no hook and no switch.
 *
 * Armed with fail_at = N, the Nth allocation from then on returns NULL
 * (once); the others succeed. Every pointer the wrappers hand out is
 * remembered until it is freed, so a test can count what a run left
 * behind, independently of LeakSanitizer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Count allocations from now and fail the fail_at-th (0: count, never fail). */
void nbt_alloc_arm(unsigned long fail_at);
/* Stop counting and failing. */
void nbt_alloc_disarm(void);
/* Leave out the allocations in between (the test's own, as the client),
 * and go on counting where it was. */
void nbt_alloc_pause(void);
void nbt_alloc_resume(void);
/* Allocations counted since the last arm. */
unsigned long nbt_alloc_count(void);
/* The armed failure happened. */
bool nbt_alloc_failed(void);
/* Pointers handed out by the wrappers and not freed yet. */
size_t nbt_alloc_outstanding(void);
/* For wrappers of other allocating functions (tests/nftnl_hook.c): count
 * one allocation, in the same sequence as malloc's, and say whether it is
 * the one to fail. */
bool nbt_alloc_should_fail(void);
