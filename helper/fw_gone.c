// SPDX-License-Identifier: LGPL-2.1-or-later
/* Owners removed with their interface; see fw_gone.h. */
#include "fw_gone.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "log.h"
#include "stats.h"

NBD_LOG_CATEGORY(firewall);

struct gone_owner {
        char owner[NBD_FW_OWNER_MAX + 1];
        uid_t uid;
};

struct nbd_fw_gone {
        const struct nbd_backend_fw *be;
        struct nbd_fw *fw;
        char (*names)[IFNAMSIZ]; /* interfaces gone since the last removal */
        size_t n, cap;
        struct gone_owner *removed; /* a ring of NBD_FW_GONE_REMEMBERED */
        size_t n_removed, next_removed;
};

/* Which owners to remove: those bound to one of names[n] (gone), or, with
 * present, to none of them (the sweep). */
struct pick {
        const char (*names)[IFNAMSIZ];
        size_t n;
        bool present;
        struct gone_owner *owners;
        size_t n_owners, cap_owners;
};

static int name_cmp(const void *a, const void *b)
{
        return strcmp(a, b);
}

/* names is sorted (remove_picked): the sweep at start-up asks once per
 * owner among every interface of the host. */
static bool listed(const struct pick *p, const char *ifname)
{
        return p->n && bsearch(ifname, p->names, p->n, sizeof(*p->names), name_cmp) != NULL;
}

static int pick_owner(const struct nbd_fw_owner_info *o, void *data)
{
        struct pick *p = data;

        if (listed(p, o->ifname) == p->present)
                return 0;
        if (p->n_owners == p->cap_owners) {
                size_t cap = p->cap_owners ? 2 * p->cap_owners : 8;
                void *grown = realloc(p->owners, cap * sizeof(*p->owners));
                if (!grown)
                        return -ENOMEM;
                p->owners = grown;
                p->cap_owners = cap;
        }
        snprintf(p->owners[p->n_owners].owner, NBD_FW_OWNER_MAX + 1, "%s", o->owner);
        p->owners[p->n_owners++].uid = o->uid;
        return 0;
}

static void remember(struct nbd_fw_gone *g, const struct gone_owner *o)
{
        if (!g->removed)
                return; /* no memory for the ring: a later remove says ENOENT */
        g->removed[g->next_removed] = *o;
        g->next_removed = (g->next_removed + 1) % NBD_FW_GONE_REMEMBERED;
        if (g->n_removed < NBD_FW_GONE_REMEMBERED)
                g->n_removed++;
}

bool nbd_fw_gone_removed(const struct nbd_fw_gone *g, const char *owner, const uid_t *uid)
{
        for (size_t i = 0; g && i < g->n_removed; i++)
                if (strcmp(g->removed[i].owner, owner) == 0 && (!uid || g->removed[i].uid == *uid))
                        return true;
        return false;
}

/* Remove the owners p picks, in one transaction. */
static int remove_picked(struct nbd_fw_gone *g, struct pick *p, const char *why)
{
        const struct nbd_backend_fw *be = g->be;
        struct nbd_err err = {0};
        struct nbd_fw_txn *t = NULL;
        int r;

        qsort((void *)p->names, p->n, sizeof(*p->names), name_cmp);
        r = be->list(g->fw, pick_owner, p, &err);

        if (r < 0 || !p->n_owners)
                goto out;
        r = be->txn_begin(g->fw, &t, &err);
        for (size_t i = 0; r == 0 && i < p->n_owners; i++) {
                r = be->txn_remove(t, p->owners[i].owner, NULL, &err);
                if (r == -ENOENT)
                        r = 0; /* removed meanwhile: nothing to do */
        }
        if (r == 0)
                r = be->txn_commit(t, &err);
        if (r == 0) {
                nbd_stats[NBD_STAT_FW_OWNERS_GONE] += p->n_owners;
                for (size_t i = 0; i < p->n_owners; i++) {
                        nbd_notice("owner %s removed: %s", p->owners[i].owner, why);
                        remember(g, &p->owners[i]);
                }
        }
out:
        if (r < 0)
                nbd_warn("cannot remove the owners of interfaces that are gone: %s", err.msg);
        be->txn_free(t);
        free(p->owners);
        p->owners = NULL;
        p->n_owners = p->cap_owners = 0;
        return r;
}

int nbd_fw_gone_new(const struct nbd_backend *be, struct nbd_fw *fw, struct nbd_fw_gone **ret)
{
        struct nbd_fw_gone *g = calloc(1, sizeof(*g));

        if (!g)
                return -ENOMEM;
        g->be = &be->fw;
        g->fw = fw;
        g->removed = calloc(NBD_FW_GONE_REMEMBERED, sizeof(*g->removed));
        *ret = g;
        return 0;
}

void nbd_fw_gone_free(struct nbd_fw_gone *g)
{
        if (!g)
                return;
        free(g->names);
        free(g->removed);
        free(g);
}

void nbd_fw_gone_link(void *data, const struct nbd_link_entry *e)
{
        struct nbd_fw_gone *g = data;
        struct pick p = {0};

        if (e) {
                if (g->n == g->cap) {
                        size_t cap = g->cap ? 2 * g->cap : 8;
                        void *grown = realloc(g->names, cap * sizeof(*g->names));
                        if (!grown) {
                                /* The start-up sweep removes it later; until
                                 * then its rules may bind a device of its
                                 * name: say so. */
                                nbd_warn("out of memory: the owners of %s stay", e->name);
                                return;
                        }
                        g->names = grown;
                        g->cap = cap;
                }
                snprintf(g->names[g->n++], IFNAMSIZ, "%s", e->name);
                return;
        }
        if (!g->n)
                return;
        p.names = (const char(*)[IFNAMSIZ])g->names;
        p.n = g->n;
        remove_picked(g, &p, "its interface went away");
        g->n = 0;
}

int nbd_fw_gone_sweep(struct nbd_fw_gone *g, const struct nbd_link_entry *all, size_t n)
{
        struct pick p = {.present = true, .n = n};
        char(*names)[IFNAMSIZ] = calloc(n ? n : 1, sizeof(*names));
        int r;

        if (!names)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                snprintf(names[i], IFNAMSIZ, "%s", all[i].name);
        p.names = (const char(*)[IFNAMSIZ])names;
        r = remove_picked(g, &p, "its interface was gone at start-up");
        free(names);
        return r;
}
