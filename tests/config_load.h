// SPDX-License-Identifier: LGPL-2.1-or-later
/* Loading a config body in a unit test: one helper for test_unit.c,
 * test_policy_unit.c and test_limits.c. Needs the helper's objects
 * (nbhelper), which is why it is not in testutil.c. */
#pragma once

#include <stddef.h>

#include "config.h"

/* Write body to a temporary file and load it over the defaults into c.
 * Returns nbd_config_load()'s value; err gets its message ("" on success).
 * On failure the test fails unless the struct nbd_err was filled (its code
 * the value returned, and a sentence). */
int tu_config_load(const char *body, struct nbd_config *c, char *err, size_t errlen);
