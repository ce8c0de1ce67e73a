// SPDX-License-Identifier: LGPL-2.1-or-later
/* Every interface of the namespace, name to ifindex: a hash map that
 * link.c builds from the dump at start-up and keeps current from link
 * notifications, so "does vnet7 exist?" and "what is p0's ifindex?" need no
 * netlink round trip (100 firewall owners validate without 100 lookups).
 * Pure data: no netlink, no loop, so it can be tested on its own. Lost
 * memory costs a missing entry (a look-up falls back to the kernel), never
 * a wrong one. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct nbd_ifnode {
        char name[IFNAMSIZ];
        int ifindex;
        bool macvtap; /* its traffic flows the other way round (firewall.c) */
        bool owned; /* it carries an owner mark (its alias), for uid owner */
        uid_t owner;
        struct nbd_ifnode *next; /* in buckets, by name */
        struct nbd_ifnode *next_index; /* in by_index, by ifindex */
};

/* Zero-initialised is empty. Two hash tables over the same nodes: by name
 * (look-ups), and by ifindex, so that a rename or a new device finds the
 * entry its ifindex had without a walk over every interface (10,000 macvtaps
 * made one by one would cost 10,000 walks of a growing map). */
struct nbd_ifmap {
        struct nbd_ifnode **buckets;
        struct nbd_ifnode **by_index;
        size_t n_buckets, n;
};

/* Forget every entry (the buckets stay). */
void nbd_ifmap_clear(struct nbd_ifmap *m);
/* Forget every entry and free the buckets. */
void nbd_ifmap_free(struct nbd_ifmap *m);

/* A link exists (present) or is gone. A new name for a known ifindex is a
 * rename: the old name goes. */
void nbd_ifmap_note(struct nbd_ifmap *m, const char *name, int ifindex, bool present);
/* The same; macvtap: 1 or 0 when the message said, -1 to keep what is known. */
void nbd_ifmap_note_kind(struct nbd_ifmap *m, const char *name, int ifindex, bool present,
                         int macvtap);
/* Record whether name carries an owner mark, and for which uid. */
void nbd_ifmap_set_owner(struct nbd_ifmap *m, const char *name, bool owned, uid_t owner);

/* The entry for name, or NULL. */
const struct nbd_ifnode *nbd_ifmap_get(const struct nbd_ifmap *m, const char *name);
/* The name the map knows for ifindex, or NULL; valid until the next change. */
const char *nbd_ifmap_name_of(const struct nbd_ifmap *m, int ifindex);
/* Its ifindex, or 0 when the map does not know name. */
int nbd_ifmap_ifindex(const struct nbd_ifmap *m, const char *name);
