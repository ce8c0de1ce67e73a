// SPDX-License-Identifier: LGPL-2.1-or-later
/* The hash the firewall's owner table (fw_table.c) buckets names by: FNV-1a
 * from a per-process random basis, finished by a mixer so that every bit
 * of the state reaches the bucket bits. Owner names are the clients': with
 * a fixed function, one client could choose thousands of names that share
 * a bucket and make every look-up of every batch a walk of all of them. It
 * is for look-ups only: nothing it returns is stored anywhere (the content
 * hash in the kernel's comments is fw_model.c's, and stays stable). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The hash of the first len bytes of name, for this process. */
uint32_t nbd_fw_owner_hash(const char *name, size_t len);
