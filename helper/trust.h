// SPDX-License-Identifier: LGPL-2.1-or-later
/* Whether a program is safe for root to run: the test OpenSSH's
 * StrictModes and sudo apply to the files they trust. */
#pragma once

#include <stddef.h>

#include "err.h"

/* Resolve every symlink of path (realpath) and check the file it leads to
 * and every directory from / down to it: each must be owned by root and
 * not writable by its group or others (else whoever may write there
 * chooses what root runs), and the file must be a regular file with an
 * execute bit. Returns 0 and the resolved path in *ret_real (the caller
 * frees it), or -errno with e filled (a sentence naming the file or directory
 * at fault); *ret_real is untouched on failure. */
int nbd_trust_program(const char *path, char **ret_real, struct nbd_err *e);
