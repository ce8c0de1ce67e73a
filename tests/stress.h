// SPDX-License-Identifier: LGPL-2.1-or-later
/* The test-stress binary's suites: load and crash recovery. They take
 * minutes, so they live apart from test-helper. */
#pragma once

#include <check.h>

Suite *load_suite(void);
Suite *crash_suite(void);

/* Seconds from the environment variable `name`, or `def` when it is unset
 * or not a positive number. */
unsigned stress_env_seconds(const char *name, unsigned def);
