// SPDX-License-Identifier: LGPL-2.1-or-later
/* The device-name allocator: one bitmap of used suffixes per prefix.
 *
 * The kernel is the source of truth: the bitmaps are built from one
 * RTM_GETLINK dump and kept current from link notifications (link.c feeds
 * them in), so names others make or remove are known without asking. A
 * name counts for its prefix when it is that prefix followed by a decimal
 * number without leading zeros ("vnet12", not "vnet012").
 *
 * Names are handed out next-fit: each prefix has a cursor that moves on,
 * wrapping, skipping used bits. A name freed a moment ago is therefore not
 * handed out again at once, so late clean-up of the old device's filters and
 * tc state cannot hit a new device of the same name (why libvirt dropped its
 * lowest-free allocator). Nothing here touches the kernel. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

struct nbd_names;

int nbd_names_new(struct nbd_names **ret);
void nbd_names_free(struct nbd_names *n);

/* Forget every used bit (before a rebuild from a dump); cursors stay, so a
 * rebuild does not make recently freed names the next ones out. */
void nbd_names_clear(struct nbd_names *n);

/* A device `ifname` exists (used) or is gone (!used). Names without a
 * numeric suffix, or with one over the prefix's range, are ignored. */
void nbd_names_mark(struct nbd_names *n, const char *ifname, bool used);

/* The next free suffix for prefix, from its cursor, wrapping once. Moves the
 * cursor past it and marks it used (the caller is about to create it; if the
 * create fails for another reason, nbd_names_mark(..., false) gives it back).
 * Writes the full name to ret_name. Returns 0 or -ENOSPC when every suffix
 * of the prefix is in use. */
int nbd_names_allocate(struct nbd_names *n, const char *prefix, char ret_name[IFNAMSIZ]);

/* Largest suffix for a prefix: what still fits in IFNAMSIZ-1 characters,
 * and at most NBD_NAMES_MAX_SUFFIX. */
#define NBD_NAMES_MAX_SUFFIX 65535u
unsigned nbd_names_max_suffix(const char *prefix);

/* The kernel's dev_valid_name(): 1-15 bytes, not "." or "..", no '/', ':'
 * or white space. */
bool nbd_ifname_valid(const char *name);

/* A template is a prefix followed by "%d" and nothing else; the prefix is
 * a valid name with room for at least one digit and does not end in a
 * digit. Writes the prefix to ret_prefix. Returns 0, or -EINVAL. */
int nbd_template_parse(const char *tmpl, char ret_prefix[IFNAMSIZ]);

/* True when the string is meant as a template (contains '%'). */
bool nbd_is_template(const char *s);

/* Walk the prefixes for NamesDump: fn is called once per prefix with its
 * used suffixes in ascending order. */
typedef int (*nbd_names_fn)(const char *prefix, const unsigned *used, size_t n_used,
                            unsigned cursor, void *data);
int nbd_names_foreach(struct nbd_names *n, nbd_names_fn fn, void *data);
