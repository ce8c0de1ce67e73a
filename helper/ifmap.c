// SPDX-License-Identifier: LGPL-2.1-or-later
/* The interface map; see ifmap.h. */
#include "ifmap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t name_hash(const char *s, size_t n_buckets)
{
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 16777619u;
        return h % n_buckets;
}

static size_t index_hash(int ifindex, size_t n_buckets)
{
        return ((uint32_t)ifindex * 2654435761u) % n_buckets;
}

static struct nbd_ifnode **ifidx_slot(const struct nbd_ifmap *m, const char *name)
{
        struct nbd_ifnode **p = &m->buckets[name_hash(name, m->n_buckets)];

        while (*p && strcmp((*p)->name, name) != 0)
                p = &(*p)->next;
        return p;
}

/* Where n is linked in by_index (it must be there). */
static struct nbd_ifnode **index_slot_of(const struct nbd_ifmap *m, const struct nbd_ifnode *n)
{
        struct nbd_ifnode **p = &m->by_index[index_hash(n->ifindex, m->n_buckets)];

        while (*p != n)
                p = &(*p)->next_index;
        return p;
}

static void index_link(struct nbd_ifmap *m, struct nbd_ifnode *n)
{
        struct nbd_ifnode **b = &m->by_index[index_hash(n->ifindex, m->n_buckets)];

        n->next_index = *b;
        *b = n;
}

void nbd_ifmap_clear(struct nbd_ifmap *m)
{
        for (size_t b = 0; b < m->n_buckets; b++) {
                while (m->buckets[b]) {
                        struct nbd_ifnode *n = m->buckets[b];
                        m->buckets[b] = n->next;
                        free(n);
                }
                m->by_index[b] = NULL;
        }
        m->n = 0;
}

void nbd_ifmap_free(struct nbd_ifmap *m)
{
        nbd_ifmap_clear(m);
        free(m->buckets);
        free(m->by_index);
        m->buckets = m->by_index = NULL;
        m->n_buckets = 0;
}

static void ifidx_grow(struct nbd_ifmap *m)
{
        size_t nb = m->n_buckets ? m->n_buckets * 4 : 256;
        struct nbd_ifnode **b = calloc(nb, sizeof(*b)), **x = calloc(nb, sizeof(*x));

        if (!b || !x) {
                free(b);
                free(x);
                return; /* longer chains, still correct */
        }
        for (size_t i = 0; i < m->n_buckets; i++)
                while (m->buckets[i]) {
                        struct nbd_ifnode *n = m->buckets[i];
                        m->buckets[i] = n->next;
                        n->next = b[name_hash(n->name, nb)];
                        b[name_hash(n->name, nb)] = n;
                        n->next_index = x[index_hash(n->ifindex, nb)];
                        x[index_hash(n->ifindex, nb)] = n;
                }
        free(m->buckets);
        free(m->by_index);
        m->buckets = b;
        m->by_index = x;
        m->n_buckets = nb;
}

/* Unlink n, found at *slot in its name chain, from both tables; free it. */
static void ifidx_drop(struct nbd_ifmap *m, struct nbd_ifnode **slot)
{
        struct nbd_ifnode *n = *slot;

        *index_slot_of(m, n) = n->next_index;
        *slot = n->next;
        free(n);
        m->n--;
}

/* Drop the entry of ifindex unless it is keep: an ifindex has one name. */
static void ifidx_remove_index(struct nbd_ifmap *m, int ifindex, const struct nbd_ifnode *keep)
{
        struct nbd_ifnode *n = m->by_index[index_hash(ifindex, m->n_buckets)];

        while (n && (n->ifindex != ifindex || n == keep))
                n = n->next_index;
        if (n)
                ifidx_drop(m, ifidx_slot(m, n->name));
}

void nbd_ifmap_note(struct nbd_ifmap *m, const char *name, int ifindex, bool present)
{
        nbd_ifmap_note_kind(m, name, ifindex, present, -1);
}

void nbd_ifmap_note_kind(struct nbd_ifmap *m, const char *name, int ifindex, bool present,
                         int macvtap)
{
        struct nbd_ifnode **p, *n;

        if (m->n >= m->n_buckets)
                ifidx_grow(m);
        if (!m->n_buckets)
                return;
        p = ifidx_slot(m, name);
        /* The kernel names both: the ifindex is the device. A deletion
         * drops the entry of its ifindex only, not a newer device that took
         * the name since (our own create notes it before the deletion's
         * notification is read). */
        if (!present) {
                ifidx_remove_index(m, ifindex, NULL);
                return;
        }
        if (*p) {
                if ((*p)->ifindex != ifindex) {
                        /* Another entry with this ifindex is the device's
                         * old name (a rename whose target name the map
                         * still gives a device since deleted): it goes, or
                         * the ifindex would have two entries. */
                        ifidx_remove_index(m, ifindex, *p);
                        p = ifidx_slot(m, name);
                        *index_slot_of(m, *p) = (*p)->next_index;
                        (*p)->ifindex = ifindex;
                        index_link(m, *p);
                }
                if (macvtap >= 0)
                        (*p)->macvtap = macvtap;
                return;
        }
        ifidx_remove_index(m, ifindex, NULL);
        n = calloc(1, sizeof(*n));
        if (!n)
                return;
        snprintf(n->name, IFNAMSIZ, "%s", name);
        n->ifindex = ifindex;
        n->macvtap = macvtap > 0;
        p = ifidx_slot(m, name);
        *p = n;
        index_link(m, n);
        m->n++;
}

void nbd_ifmap_set_owner(struct nbd_ifmap *m, const char *name, bool owned, uid_t owner)
{
        struct nbd_ifnode **p;

        if (!m->n_buckets)
                return;
        p = ifidx_slot(m, name);
        if (!*p)
                return;
        (*p)->owned = owned;
        (*p)->owner = owned ? owner : 0;
}

const struct nbd_ifnode *nbd_ifmap_get(const struct nbd_ifmap *m, const char *name)
{
        if (!m->n_buckets)
                return NULL;
        return *ifidx_slot(m, name);
}

const char *nbd_ifmap_name_of(const struct nbd_ifmap *m, int ifindex)
{
        const struct nbd_ifnode *n;

        if (!m->n_buckets)
                return NULL;
        n = m->by_index[index_hash(ifindex, m->n_buckets)];
        while (n && n->ifindex != ifindex)
                n = n->next_index;
        return n ? n->name : NULL;
}

int nbd_ifmap_ifindex(const struct nbd_ifmap *m, const char *name)
{
        const struct nbd_ifnode *n = nbd_ifmap_get(m, name);

        return n ? n->ifindex : 0;
}
