// SPDX-License-Identifier: LGPL-2.1-or-later
/* Owners removed with their interface; see fw_gone.h. */
#include "fw_gone.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "lane.h"
#include "log.h"
#include "stats.h"

NBD_LOG_CATEGORY(firewall);

struct gone_owner {
        char owner[NBD_FW_OWNER_MAX + 1];
        uid_t uid;
};

/* An interface an owner may be bound to (the loop's memory of them). */
struct known {
        char name[IFNAMSIZ];
        struct known *next;
};
#define KNOWN_BUCKETS 1024

struct nbd_fw_gone {
        const struct nbd_backend_fw *be;
        struct nbd_fw *fw;
        char (*names)[IFNAMSIZ]; /* interfaces gone since the last removal */
        size_t n, cap;
        struct gone_owner *removed; /* a ring of NBD_FW_GONE_REMEMBERED */
        size_t n_removed, next_removed;
        /* Every interface an owner may be bound to, when known_all. */
        struct known **known;
        bool known_all;
        /* The start-up sweep is on the lane: what is applied meanwhile is
         * noted, and the set is whole once the sweep says where the rest
         * is (lost: a note failed meanwhile, it is not). */
        bool sweeping, sweep_lost;
        struct nbd_lane *lane;
        unsigned pending; /* clean-ups on the lane */
        struct nbd_fw_gone_waiter *waiters;
};

/* One clean-up on the firewall's lane: the names are the loop's copy; the
 * rest is the lane's until done() runs on the loop. */
struct cleanup {
        struct nbd_lane_work work;
        struct nbd_fw_gone *g;
        char (*names)[IFNAMSIZ];
        size_t n;
        struct nbd_fw *lf;
        struct nbd_fw_txn *t;
        struct nbd_fw_owner_info *owners;
        size_t n_owners;
        int r;
        struct nbd_err err;
};

/* Which owners to remove: those bound to one of names[n] (gone), or, with
 * present, to none of them (the sweep). */
struct pick {
        const char (*names)[IFNAMSIZ];
        size_t n;
        bool present;
        struct nbd_fw_gone *note; /* the sweep: notes where the others are */
        /* The sweep on the lane: where the others are, for the loop to note. */
        bool collect;
        char (*bound)[IFNAMSIZ];
        size_t n_bound, cap_bound;
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

/* Room for one more of n in *v (of cap, each size bytes): 0 or -ENOMEM. */
static int grow(void **v, size_t n, size_t *cap, size_t size)
{
        void *grown;

        if (n < *cap)
                return 0;
        grown = realloc(*v, (*cap ? 2 * *cap : 8) * size);
        if (!grown)
                return -ENOMEM;
        *v = grown;
        *cap = *cap ? 2 * *cap : 8;
        return 0;
}

static int pick_owner(const struct nbd_fw_owner_info *o, void *data)
{
        struct pick *p = data;

        if (listed(p, o->ifname) == p->present) {
                if (!p->collect) {
                        nbd_fw_gone_note(p->note, o->ifname);
                        return 0;
                }
                if (grow((void **)&p->bound, p->n_bound, &p->cap_bound, sizeof(*p->bound)) < 0)
                        return -ENOMEM;
                snprintf(p->bound[p->n_bound++], IFNAMSIZ, "%s", o->ifname);
                return 0;
        }
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
        /* Names and creators only: a count of the rules reads every rule. */
        r = be->list_creators(g->fw, pick_owner, p, &err);

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

static size_t known_bucket(const char *name)
{
        size_t h = 5381;

        for (; *name; name++)
                h = h * 33 + (unsigned char)*name;
        return h % KNOWN_BUCKETS;
}

static struct known **known_find(struct nbd_fw_gone *g, const char *name)
{
        struct known **k = &g->known[known_bucket(name)];

        while (*k && strcmp((*k)->name, name) != 0)
                k = &(*k)->next;
        return k;
}

void nbd_fw_gone_note(struct nbd_fw_gone *g, const char *ifname)
{
        struct known **k;

        if (!g || (!g->known_all && !g->sweeping))
                return;
        k = known_find(g, ifname);
        if (*k)
                return;
        *k = calloc(1, sizeof(**k));
        if (!*k) {
                /* Not known whole any more: every gone name is looked up. */
                g->known_all = false;
                g->sweep_lost = true;
                return;
        }
        snprintf((*k)->name, IFNAMSIZ, "%s", ifname);
}

static void known_clear(struct nbd_fw_gone *g)
{
        for (size_t b = 0; g->known && b < KNOWN_BUCKETS; b++)
                while (g->known[b]) {
                        struct known *k = g->known[b];
                        g->known[b] = k->next;
                        free(k);
                }
}

/* Keep, of names[n], those an owner may be bound to; they leave the set
 * (an apply to a new interface of the name notes it again). Returns how
 * many are kept, in place. */
static size_t keep_known(struct nbd_fw_gone *g, char (*names)[IFNAMSIZ], size_t n)
{
        size_t k = 0;

        if (!g->known_all)
                return n;
        for (size_t i = 0; i < n; i++) {
                struct known **p = known_find(g, names[i]), *hit = *p;
                if (!hit)
                        continue;
                *p = hit->next;
                free(hit);
                memmove(names[k++], names[i], IFNAMSIZ);
        }
        return k;
}

int nbd_fw_gone_new(const struct nbd_backend *be, struct nbd_fw *fw, struct nbd_fw_gone **ret)
{
        struct nbd_fw_gone *g = calloc(1, sizeof(*g));

        if (!g)
                return -ENOMEM;
        g->be = &be->fw;
        g->fw = fw;
        g->removed = calloc(NBD_FW_GONE_REMEMBERED, sizeof(*g->removed));
        g->known = calloc(KNOWN_BUCKETS, sizeof(*g->known));
        *ret = g;
        return 0;
}

void nbd_fw_gone_free(struct nbd_fw_gone *g)
{
        if (!g)
                return;
        known_clear(g);
        free(g->known);
        free(g->names);
        free(g->removed);
        free(g);
}

void nbd_fw_gone_set_lane(struct nbd_fw_gone *g, struct nbd_lane *lane)
{
        if (g)
                g->lane = lane;
}

bool nbd_fw_gone_pending(const struct nbd_fw_gone *g)
{
        return g && g->pending > 0;
}

void nbd_fw_gone_wait(struct nbd_fw_gone *g, struct nbd_fw_gone_waiter *w)
{
        w->next = g->waiters;
        g->waiters = w;
}

void nbd_fw_gone_unwait(struct nbd_fw_gone *g, struct nbd_fw_gone_waiter *w)
{
        for (struct nbd_fw_gone_waiter **p = &g->waiters; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        return;
                }
}

/* On the lane: read the table through a handle of its own, queue the
 * removal of the owners bound to the names, send the commit. */
static void cleanup_run(void *data)
{
        struct cleanup *c = data;
        const struct nbd_backend_fw *be = c->g->be;

        c->r = be->lane_open(c->g->fw, &c->lf);
        if (c->r < 0) {
                nbd_err_set(&c->err, c->r, "cannot open a socket: %s", strerror(-c->r));
                return;
        }
        c->r = be->txn_begin(c->lf, &c->t, &c->err);
        if (c->r == 0)
                c->r = be->txn_remove_bound(c->t, (const char(*)[IFNAMSIZ])c->names, c->n,
                                            &c->owners, &c->n_owners, &c->err);
        if (c->r == 0 && c->n_owners)
                c->r = be->txn_commit_prepare(c->t, &c->err);
        if (c->r == 0 && c->n_owners)
                be->txn_commit_send(c->t);
}

/* The owners in c are removed: said, counted and remembered. */
static void removed(struct nbd_fw_gone *g, const struct nbd_fw_owner_info *o, size_t n,
                    const char *why)
{
        nbd_stats[NBD_STAT_FW_OWNERS_GONE] += n;
        for (size_t i = 0; i < n; i++) {
                struct gone_owner go = {.uid = o[i].uid};
                snprintf(go.owner, sizeof(go.owner), "%s", o[i].owner);
                nbd_notice("owner %s removed: %s", go.owner, why);
                remember(g, &go);
        }
}

/* On the loop: the commit's outcome; the waiters go on once none is left. */
static void cleanup_done(void *data, bool not_run)
{
        struct cleanup *c = data;
        struct nbd_fw_gone *g = c->g;
        const struct nbd_backend_fw *be = g->be;
        int r = c->r;

        if (not_run)
                r = nbd_err_set(&c->err, -ECANCELED, "the helper is stopping");
        else if (r == 0 && c->n_owners)
                r = be->txn_commit_finish(c->t, &c->err);
        if (r == 0) {
                removed(g, c->owners, c->n_owners, "its interface went away");
        } else {
                nbd_warn("cannot remove the owners of interfaces that are gone: %s", c->err.msg);
                /* Their owners may still be bound to these names: the next
                 * interface of each name must be looked up when it goes
                 * (a later FirewallApply replaces or a sweep removes them). */
                for (size_t i = 0; i < c->n; i++)
                        nbd_fw_gone_note(g, c->names[i]);
        }
        be->txn_free(c->t);
        if (c->lf)
                be->lane_close(c->lf);
        free(c->owners);
        free(c->names);
        free(c);
        if (--g->pending)
                return;
        while (g->waiters) {
                struct nbd_fw_gone_waiter *w = g->waiters;
                g->waiters = w->next;
                w->fn(w->data);
        }
}

/* The gone names of this round, kept[n], to the lane. 0 or -errno (then
 * the caller cleans up on the loop). */
static int to_lane(struct nbd_fw_gone *g, const char (*kept)[IFNAMSIZ], size_t n)
{
        struct cleanup *c = calloc(1, sizeof(*c));
        int r = -ENOMEM;

        if (!c || !(c->names = malloc(n * sizeof(*c->names))))
                goto fail;
        memcpy(c->names, kept, n * sizeof(*c->names));
        qsort(c->names, n, sizeof(*c->names), name_cmp);
        c->n = n;
        c->g = g;
        c->work = (struct nbd_lane_work){.run = cleanup_run, .done = cleanup_done, .data = c};
        r = nbd_lane_submit(g->lane, &c->work);
        if (r < 0)
                goto fail;
        g->pending++;
        return 0;
fail:
        if (c)
                free(c->names);
        free(c);
        return r;
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
        /* No owner was ever bound to most interfaces that go: no read. */
        g->n = keep_known(g, g->names, g->n);
        if (!g->n)
                return;
        if (g->lane && to_lane(g, (const char(*)[IFNAMSIZ])g->names, g->n) == 0) {
                g->n = 0;
                return;
        }
        p.names = (const char(*)[IFNAMSIZ])g->names;
        p.n = g->n;
        remove_picked(g, &p, "its interface went away");
        g->n = 0;
}

/* The start-up sweep on the firewall's lane (loop-free reads, issue 14):
 * the owners are read through the lane's handle (the summary when the
 * generation mark holds, no chain dump; the chains otherwise), those bound
 * to no present interface removed in one transaction, sent there; the loop
 * notes where the others are and finishes the commit. */
struct sweep {
        struct nbd_lane_work work;
        struct nbd_fw_gone *g;
        struct pick p; /* names: the present interfaces, sorted */
        struct nbd_fw *lf;
        struct nbd_fw_txn *t;
        bool sent;
        int r;
        struct nbd_err err;
};

static void sweep_free(struct sweep *s)
{
        const struct nbd_backend_fw *be = s->g->be;

        be->txn_free(s->t);
        if (s->lf)
                be->lane_close(s->lf);
        free((void *)s->p.names);
        free(s->p.bound);
        free(s->p.owners);
        free(s);
}

/* On the lane: s and the lane's handle alone. */
static void sweep_run(void *data)
{
        struct sweep *s = data;
        const struct nbd_backend_fw *be = s->g->be;

        /* Opened here: the lane's socket is the lane's to use. */
        s->r = be->lane_open(s->g->fw, &s->lf);
        if (s->r < 0) {
                s->lf = NULL;
                nbd_err_set(&s->err, s->r, "cannot open a socket: %s", strerror(-s->r));
                return;
        }
        s->r = be->list_creators(s->lf, pick_owner, &s->p, &s->err);
        if (s->r < 0 || !s->p.n_owners)
                return;
        s->r = be->txn_begin(s->lf, &s->t, &s->err);
        for (size_t i = 0; s->r == 0 && i < s->p.n_owners; i++) {
                s->r = be->txn_remove(s->t, s->p.owners[i].owner, NULL, &s->err);
                if (s->r == -ENOENT)
                        s->r = 0; /* removed meanwhile: nothing to do */
        }
        if (s->r == 0)
                s->r = be->txn_commit_prepare(s->t, &s->err);
        if (s->r == 0) {
                be->txn_commit_send(s->t);
                s->sent = true;
        }
}

/* On the loop: the set of interfaces with owners is whole again (or, the
 * sweep failed, not known: every gone name is looked up). */
static void sweep_done(void *data, bool not_run)
{
        struct sweep *s = data;
        struct nbd_fw_gone *g = s->g;
        int r = not_run ? nbd_err_set(&s->err, -ECANCELED, "the helper is stopping") : s->r;

        if (r == 0 && s->sent)
                r = g->be->txn_commit_finish(s->t, &s->err);
        if (r == 0) {
                for (size_t i = 0; i < s->p.n_bound; i++)
                        nbd_fw_gone_note(g, s->p.bound[i]);
                g->known_all = g->known && !g->sweep_lost;
                nbd_stats[NBD_STAT_FW_OWNERS_GONE] += s->p.n_owners;
                for (size_t i = 0; i < s->p.n_owners; i++) {
                        nbd_notice("owner %s removed: its interface was gone at start-up",
                                   s->p.owners[i].owner);
                        remember(g, &s->p.owners[i]);
                }
        } else {
                nbd_warn("cannot remove the owners of interfaces that are gone: %s", s->err.msg);
                known_clear(g);
                g->known_all = false;
        }
        g->sweeping = false;
        sweep_free(s);
        if (--g->pending)
                return;
        while (g->waiters) {
                struct nbd_fw_gone_waiter *w = g->waiters;
                g->waiters = w->next;
                w->fn(w->data);
        }
}

/* The sweep to the lane: 0, or -errno (the caller sweeps on the loop). */
static int sweep_to_lane(struct nbd_fw_gone *g, char (*names)[IFNAMSIZ], size_t n)
{
        struct sweep *s = calloc(1, sizeof(*s));
        int r = -ENOMEM;

        if (!s)
                return r;
        s->g = g;
        s->p = (struct pick){.present = true, .collect = true, .n = n};
        qsort(names, n, sizeof(*names), name_cmp);
        s->p.names = (const char(*)[IFNAMSIZ])names;
        s->work = (struct nbd_lane_work){.run = sweep_run, .done = sweep_done, .data = s};
        r = nbd_lane_submit(g->lane, &s->work);
        if (r < 0) {
                s->p.names = NULL; /* the caller's still */
                sweep_free(s);
                return r;
        }
        /* Until it is done every gone name is looked up (queued behind it
         * on the lane), and what is applied meanwhile is noted. */
        known_clear(g);
        g->known_all = false;
        g->sweeping = true;
        g->sweep_lost = false;
        g->pending++;
        return 0;
}

int nbd_fw_gone_sweep(struct nbd_fw_gone *g, const struct nbd_link_entry *all, size_t n)
{
        struct pick p = {.present = true, .n = n, .note = g};
        char(*names)[IFNAMSIZ] = calloc(n ? n : 1, sizeof(*names));
        int r;

        if (!names)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                snprintf(names[i], IFNAMSIZ, "%s", all[i].name);
        if (g->lane && sweep_to_lane(g, names, n) == 0)
                return 0; /* names are the sweep's */
        p.names = (const char(*)[IFNAMSIZ])names;
        /* Read whole, the table says where every owner is: from now on the
         * loop knows (nbd_fw_gone_note keeps it so). */
        known_clear(g);
        g->known_all = g->known != NULL;
        r = remove_picked(g, &p, "its interface was gone at start-up");
        if (r < 0) {
                known_clear(g);
                g->known_all = false;
        }
        free(names);
        return r;
}
