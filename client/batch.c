// SPDX-License-Identifier: LGPL-2.1-or-later
/* Building batches. Every call copies what it is given, so the caller's
 * buffers can go as soon as the call returns, and fails at once on bad
 * input: no error is kept for later (no sticky errors). */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

NB_EXPORT nb_batch *nb_batch_new(void)
{
        nb_batch *b = calloc(1, sizeof(*b));

        if (b)
                netbroker__request__init(&b->req);
        return b;
}

NB_EXPORT void nb_batch_free(nb_batch *b)
{
        if (!b)
                return;
        for (size_t i = 0; i < b->req.n_ops; i++)
                protobuf_c_message_free_unpacked(&b->req.ops[i]->base, NULL);
        free(b->req.ops);
        for (size_t i = 0; i < b->nfds; i++)
                close(b->fds[i]);
        free(b->fds);
        free(b);
}

NB_EXPORT void nb_batch_set_flags(nb_batch *b, unsigned flags)
{
        b->req.flags = 0;
        if (flags & NB_BATCH_CONTINUE_ON_ERROR)
                b->req.flags |= NETBROKER__REQUEST_FLAG__REQUEST_FLAG_CONTINUE_ON_ERROR;
}

NB_EXPORT size_t nb_batch_size(const nb_batch *b)
{
        return b->req.n_ops;
}

/* Append a fresh Op; the caller fills it and must free it on failure. */
static int add_op(nb_batch *b, Netbroker__Op *op)
{
        if (b->req.n_ops == b->cap) {
                size_t ncap = b->cap ? b->cap * 2 : 8;
                Netbroker__Op **p = realloc(b->req.ops, ncap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                b->req.ops = p;
                b->cap = ncap;
        }
        b->req.ops[b->req.n_ops++] = op;
        return 0;
}

static Netbroker__Op *new_op(void)
{
        Netbroker__Op *op = malloc(sizeof(*op));

        if (op)
                netbroker__op__init(op);
        return op;
}

NB_EXPORT int nb_batch_ping(nb_batch *b)
{
        Netbroker__Op *op;
        Netbroker__Ping *p;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        op = new_op();
        p = malloc(sizeof(*p));
        if (!op || !p) {
                free(op);
                free(p);
                return -ENOMEM;
        }
        netbroker__ping__init(p);
        op->op_case = NETBROKER__OP__OP_PING;
        op->ping = p;
        if (add_op(b, op) < 0) {
                protobuf_c_message_free_unpacked(&op->base, NULL);
                return -ENOMEM;
        }
        return 0;
}

NB_EXPORT int nb_batch_stats(nb_batch *b)
{
        Netbroker__Op *op;
        Netbroker__StatsQuery *q;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        op = new_op();
        q = malloc(sizeof(*q));
        if (!op || !q) {
                free(op);
                free(q);
                return -ENOMEM;
        }
        netbroker__stats_query__init(q);
        op->op_case = NETBROKER__OP__OP_STATS;
        op->stats = q;
        if (add_op(b, op) < 0) {
                protobuf_c_message_free_unpacked(&op->base, NULL);
                return -ENOMEM;
        }
        return 0;
}

/* An environment argument arg of who: every entry NAME=VALUE. */
static int env_check(const char *who, const char *arg, const char *const *env)
{
        for (size_t i = 0; env && env[i]; i++) {
                const char *eq = strchr(env[i], '=');
                if (!eq)
                        return nb_bad_arg(EINVAL, who, "%s[%zu] %s has no '=': not NAME=VALUE", arg,
                                          i, NB_Q(env[i]));
                if (eq == env[i])
                        return nb_bad_arg(EINVAL, who, "%s[%zu] %s has an empty NAME", arg, i,
                                          NB_Q(env[i]));
        }
        return 0;
}

/* An absolute path argument. */
static int path_check(const char *who, const char *arg, const char *path)
{
        if (!path)
                return nb_bad_arg(EINVAL, who, "%s is NULL", arg);
        if (path[0] != '/')
                return nb_bad_arg(EINVAL, who, "%s %s is not absolute", arg, NB_Q(path));
        return 0;
}

/* Copy a NULL-terminated string vector. */
static int copy_strv(const char *const *v, char ***ret, size_t *ret_n)
{
        size_t n = 0;
        char **out;

        while (v && v[n])
                n++;
        if (n == 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        out = calloc(n, sizeof(*out));
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                out[i] = strdup(v[i]);
                if (!out[i]) {
                        while (i--)
                                free(out[i]);
                        free(out);
                        return -ENOMEM;
                }
        }
        *ret = out;
        *ret_n = n;
        return 0;
}

NB_EXPORT int nb_batch_exec(nb_batch *b, const char *path, const char *const *argv,
                            const char *const *envp, const void *stdin_data, size_t stdin_len,
                            unsigned timeout_ms)
{
        Netbroker__Op *op;
        Netbroker__Exec *e;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = path_check(__func__, "path", path)) < 0)
                return r;
        if (stdin_len && !stdin_data)
                return nb_bad_arg(EINVAL, __func__, "stdin_data is NULL and stdin_len is %zu",
                                  stdin_len);
        if ((r = env_check(__func__, "envp", envp)) < 0)
                return r;
        op = new_op();
        e = malloc(sizeof(*e));
        if (!op || !e) {
                free(op);
                free(e);
                return -ENOMEM;
        }
        netbroker__exec__init(e);
        op->op_case = NETBROKER__OP__OP_EXEC;
        op->exec = e;
        e->timeout_ms = timeout_ms;
        e->path = strdup(path);
        if (!e->path) {
                e->path = (char *)protobuf_c_empty_string;
                goto oom;
        }
        if (copy_strv(argv, &e->argv, &e->n_argv) < 0 || copy_strv(envp, &e->env, &e->n_env) < 0)
                goto oom;
        if (stdin_len) {
                e->stdin_data.data = malloc(stdin_len);
                if (!e->stdin_data.data)
                        goto oom;
                memcpy(e->stdin_data.data, stdin_data, stdin_len);
                e->stdin_data.len = stdin_len;
        }
        if (add_op(b, op) < 0)
                goto oom;
        return 0;
oom:
        protobuf_c_message_free_unpacked(&op->base, NULL);
        return -ENOMEM;
}

/* ---- interfaces ---- */

/* What can be checked here: present and short enough. The helper checks
 * the rest (and whether the interfaces exist) before anything runs. */
int nb_check_ifname(const char *who, const char *arg, const char *name, enum nb_ifname_form form)
{
        bool template = name && strchr(name, '%');
        size_t max = form == NB_IFNAME_TEMPLATE && template ? IFNAMSIZ : IFNAMSIZ - 1;
        size_t len;

        if (!name)
                return nb_bad_arg(EINVAL, who, "%s is NULL", arg);
        if (!name[0])
                return nb_bad_arg(EINVAL, who, "%s is empty", arg);
        if (form == NB_IFNAME_NO_TEMPLATE && template)
                return nb_bad_arg(EINVAL, who, "%s %s has a %%: it must name one interface", arg,
                                  NB_Q(name));
        len = strlen(name);
        if (len > max)
                return nb_bad_arg(EINVAL, who, "%s %s is %zu bytes; at most %zu%s", arg, NB_Q(name),
                                  len, max, max == IFNAMSIZ ? " for a template (with a %)" : "");
        return 0;
}

/* The interface names of the link ops: templates allowed. */
static int name_check(const char *who, const char *arg, const char *name)
{
        return nb_check_ifname(who, arg, name, NB_IFNAME_TEMPLATE);
}

char *nb_dup_or_empty(const char *s, bool *oom)
{
        char *d;

        if (!s || !s[0])
                return (char *)protobuf_c_empty_string;
        d = strdup(s);
        if (!d) {
                *oom = true;
                return (char *)protobuf_c_empty_string;
        }
        return d;
}

int nb_batch_add_sub(nb_batch *b, Netbroker__Op__OpCase which, void *sub, bool oom)
{
        Netbroker__Op *op = new_op();

        if (!op) {
                protobuf_c_message_free_unpacked(sub, NULL);
                return -ENOMEM;
        }
        op->op_case = which;
        op->tap_create = sub; /* every member of the oneof shares this slot */
        if (oom || add_op(b, op) < 0) {
                protobuf_c_message_free_unpacked(&op->base, NULL);
                return -ENOMEM;
        }
        return 0;
}

NB_EXPORT int nb_batch_tap_create(nb_batch *b, const char *name, const nb_tap_opts *theirs)
{
        Netbroker__TapCreate *t;
        nb_tap_opts mine;
        const nb_tap_opts *opts = NULL;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = name_check(__func__, "name", name)) < 0)
                return r;
        if (theirs) {
                if ((r = NB_ARG_IN(__func__, "opts", &mine, theirs, NB_TAP_OPTS)) < 0)
                        return r;
                opts = &mine;
        }
        if (opts && opts->queues > 16)
                return nb_bad_arg(EINVAL, __func__, "opts->queues %u is above 16", opts->queues);
        t = malloc(sizeof(*t));
        if (!t)
                return -ENOMEM;
        netbroker__tap_create__init(t);
        t->name = nb_dup_or_empty(name, &oom);
        if (opts) {
                t->vnet_hdr = opts->vnet_hdr;
                t->queues = opts->queues;
                t->persist = opts->persist;
                t->set_owner = opts->set_owner;
                t->owner_uid = opts->uid;
                t->owner_gid = opts->gid;
        }
        return nb_batch_add_sub(b, NETBROKER__OP__OP_TAP_CREATE, t, oom);
}

/* What a macvlan or macvtap of who takes: a batch, names, a mode. */
static int macvlan_check(const char *who, const nb_batch *b, const char *name, const char *parent,
                         nb_macvlan_mode mode)
{
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, who, "batch is NULL");
        if ((r = name_check(who, "name", name)) < 0 || (r = name_check(who, "parent", parent)) < 0)
                return r;
        if (mode < NB_MACVLAN_BRIDGE || mode > NB_MACVLAN_PASSTHRU)
                return nb_bad_arg(EINVAL, who,
                                  "mode %d is not NB_MACVLAN_BRIDGE, _VEPA, _PRIVATE or _PASSTHRU",
                                  (int)mode);
        return 0;
}

static int macvtap_create(const char *who, nb_batch *b, const char *name, const char *parent,
                          nb_macvlan_mode mode, const char *mac, bool vnet_hdr, unsigned queues)
{
        Netbroker__MacvtapCreate *m;
        bool oom = false;
        int r;

        if ((r = macvlan_check(who, b, name, parent, mode)) < 0)
                return r;
        if (queues > 16)
                return nb_bad_arg(EINVAL, who, "queues %u is above 16", queues);
        m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        netbroker__macvtap_create__init(m);
        m->name = nb_dup_or_empty(name, &oom);
        m->parent = nb_dup_or_empty(parent, &oom);
        m->mode = (Netbroker__MacvlanMode)mode;
        m->mac = nb_dup_or_empty(mac, &oom);
        m->vnet_hdr = vnet_hdr;
        m->queues = queues > 1 ? queues : 0;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_MACVTAP_CREATE, m, oom);
}

NB_EXPORT int nb_batch_macvtap_create(nb_batch *b, const char *name, const char *parent,
                                      nb_macvlan_mode mode, const char *mac, bool vnet_hdr)
{
        return macvtap_create(__func__, b, name, parent, mode, mac, vnet_hdr, 1);
}

NB_EXPORT int nb_batch_macvtap_create_queues(nb_batch *b, const char *name, const char *parent,
                                             nb_macvlan_mode mode, const char *mac, bool vnet_hdr,
                                             unsigned queues)
{
        return macvtap_create(__func__, b, name, parent, mode, mac, vnet_hdr, queues);
}

/* "op:K" or "op:K:peer": the helper's syntax (helper/opref.h). */
static int ref_format(const char *who, size_t op, const char *tail, char *buf, size_t len)
{
        char tmp[NB_REF_MAX];
        int n = snprintf(tmp, sizeof(tmp), "op:%zu%s", op, tail);

        if (!buf)
                return nb_bad_arg(EINVAL, who, "buf is NULL");
        if (n < 0 || (size_t)n >= len)
                return nb_bad_arg(ERANGE, who, "len %zu is too small for %s and its NUL", len,
                                  NB_Q(tmp));
        memcpy(buf, tmp, (size_t)n + 1);
        return 0;
}

NB_EXPORT int nb_ref(size_t op, char *buf, size_t len)
{
        return ref_format(__func__, op, "", buf, len);
}

NB_EXPORT int nb_ref_peer(size_t op, char *buf, size_t len)
{
        return ref_format(__func__, op, ":peer", buf, len);
}

NB_EXPORT int nb_batch_macvlan_create(nb_batch *b, const char *name, const char *parent,
                                      nb_macvlan_mode mode, const char *mac)
{
        Netbroker__MacvlanCreate *m;
        bool oom = false;
        int r;

        if ((r = macvlan_check(__func__, b, name, parent, mode)) < 0)
                return r;
        m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        netbroker__macvlan_create__init(m);
        m->name = nb_dup_or_empty(name, &oom);
        m->parent = nb_dup_or_empty(parent, &oom);
        m->mode = (Netbroker__MacvlanMode)mode;
        m->mac = nb_dup_or_empty(mac, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_MACVLAN_CREATE, m, oom);
}

NB_EXPORT int nb_batch_veth_create(nb_batch *b, const char *name, const char *peer,
                                   int peer_netns_fd)
{
        Netbroker__VethCreate *v;
        bool oom = false;
        int copy = -1, r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = name_check(__func__, "name", name)) < 0 ||
            (r = name_check(__func__, "peer", peer)) < 0)
                return r;
        if (peer_netns_fd >= 0) {
                int *fds = realloc(b->fds, (b->nfds + 1) * sizeof(*fds));
                if (!fds)
                        return -ENOMEM;
                b->fds = fds;
                copy = fcntl(peer_netns_fd, F_DUPFD_CLOEXEC, 3);
                if (copy < 0)
                        return -errno;
        }
        v = malloc(sizeof(*v));
        if (!v) {
                if (copy >= 0)
                        close(copy);
                return -ENOMEM;
        }
        netbroker__veth_create__init(v);
        v->name = nb_dup_or_empty(name, &oom);
        v->peer_name = nb_dup_or_empty(peer, &oom);
        if (copy >= 0) {
                v->has_peer_netns = true;
                v->peer_netns_fd = (uint32_t)b->nfds;
        }
        if (nb_batch_add_sub(b, NETBROKER__OP__OP_VETH_CREATE, v, oom) < 0) {
                if (copy >= 0)
                        close(copy);
                return -ENOMEM;
        }
        if (copy >= 0)
                b->fds[b->nfds++] = copy;
        return 0;
}

NB_EXPORT int nb_batch_bridge_create(nb_batch *b, const char *name)
{
        Netbroker__BridgeCreate *br;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = name_check(__func__, "name", name)) < 0)
                return r;
        br = malloc(sizeof(*br));
        if (!br)
                return -ENOMEM;
        netbroker__bridge_create__init(br);
        br->name = nb_dup_or_empty(name, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_BRIDGE_CREATE, br, oom);
}

NB_EXPORT int nb_batch_link_set(nb_batch *b, const char *name, const nb_link_change *theirs)
{
        Netbroker__LinkSet *s;
        nb_link_change mine;
        const nb_link_change *c = &mine;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = name_check(__func__, "name", name)) < 0 ||
            (r = NB_ARG_IN(__func__, "change", &mine, theirs, NB_LINK_CHANGE)) < 0)
                return r;
        if (c->up < -1 || c->up > 1)
                return nb_bad_arg(EINVAL, __func__, "change->up %d is not -1, 0 or 1", c->up);
        if (c->master && c->nomaster)
                return nb_bad_arg(EINVAL, __func__, "change has both master %s and nomaster",
                                  NB_Q(c->master));
        s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        netbroker__link_set__init(s);
        s->name = nb_dup_or_empty(name, &oom);
        s->state = c->up == 1   ? NETBROKER__LINK_STATE__LINK_STATE_UP
                   : c->up == 0 ? NETBROKER__LINK_STATE__LINK_STATE_DOWN
                                : NETBROKER__LINK_STATE__LINK_STATE_UNCHANGED;
        s->mtu = c->mtu;
        s->mac = nb_dup_or_empty(c->mac, &oom);
        s->master = nb_dup_or_empty(c->master, &oom);
        s->nomaster = c->nomaster;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_LINK_SET, s, oom);
}

NB_EXPORT int nb_batch_link_delete(nb_batch *b, const char *name)
{
        Netbroker__LinkDelete *d;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = name_check(__func__, "name", name)) < 0)
                return r;
        d = malloc(sizeof(*d));
        if (!d)
                return -ENOMEM;
        netbroker__link_delete__init(d);
        d->name = nb_dup_or_empty(name, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_LINK_DELETE, d, oom);
}

/* The caller's rate arg (NULL: none) as this library's. */
static int rate_in(const char *who, const char *arg, const nb_rate *theirs, nb_rate *mine,
                   const nb_rate **ret)
{
        int r = 0;

        *ret = NULL;
        if (theirs) {
                r = NB_ARG_IN(who, arg, mine, theirs, NB_RATE);
                if (r == 0)
                        *ret = mine;
        }
        return r;
}

/* A peak, burst or floor needs an average. */
static int rate_check(const char *who, const char *arg, const nb_rate *r)
{
        if (r && !r->average && (r->peak || r->burst || r->floor))
                return nb_bad_arg(EINVAL, who, "%s: a peak, burst or floor and no average", arg);
        return 0;
}

/* NULL or all zero: no Rate on the wire (no limit that way). */
static int rate_msg(const nb_rate *r, Netbroker__Rate **ret)
{
        Netbroker__Rate *m;

        *ret = NULL;
        if (!r || !r->average)
                return 0;
        m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        netbroker__rate__init(m);
        m->average = r->average;
        m->peak = r->peak;
        m->burst = r->burst;
        m->floor = r->floor;
        *ret = m;
        return 0;
}

NB_EXPORT int nb_batch_bandwidth_set(nb_batch *b, const char *ifname, const nb_rate *in_theirs,
                                     const nb_rate *out_theirs)
{
        Netbroker__BandwidthSet *s;
        nb_rate in_mine, out_mine;
        const nb_rate *in = NULL, *out = NULL;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = nb_check_ifname(__func__, "ifname", ifname, NB_IFNAME_NO_TEMPLATE)) < 0 ||
            (r = rate_in(__func__, "in", in_theirs, &in_mine, &in)) < 0 ||
            (r = rate_in(__func__, "out", out_theirs, &out_mine, &out)) < 0 ||
            (r = rate_check(__func__, "in", in)) < 0 || (r = rate_check(__func__, "out", out)) < 0)
                return r;
        s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        netbroker__bandwidth_set__init(s);
        s->ifname = nb_dup_or_empty(ifname, &oom);
        if (rate_msg(in, &s->inbound) < 0 || rate_msg(out, &s->outbound) < 0)
                oom = true;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_BANDWIDTH_SET, s, oom);
}

NB_EXPORT int nb_batch_bandwidth_clear(nb_batch *b, const char *ifname)
{
        Netbroker__BandwidthClear *c;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = nb_check_ifname(__func__, "ifname", ifname, NB_IFNAME_NO_TEMPLATE)) < 0)
                return r;
        c = malloc(sizeof(*c));
        if (!c)
                return -ENOMEM;
        netbroker__bandwidth_clear__init(c);
        c->ifname = nb_dup_or_empty(ifname, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_BANDWIDTH_CLEAR, c, oom);
}

NB_EXPORT int nb_batch_bandwidth_show(nb_batch *b, const char *ifname)
{
        Netbroker__BandwidthShow *s;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = nb_check_ifname(__func__, "ifname", ifname, NB_IFNAME_NO_TEMPLATE)) < 0)
                return r;
        s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        netbroker__bandwidth_show__init(s);
        s->ifname = nb_dup_or_empty(ifname, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_BANDWIDTH_SHOW, s, oom);
}

NB_EXPORT int nb_batch_link_list(nb_batch *b, const char *name)
{
        Netbroker__LinkList *l;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        /* NULL or "": every link. */
        if (name && name[0] &&
            (r = nb_check_ifname(__func__, "name", name, NB_IFNAME_NO_TEMPLATE)) < 0)
                return r;
        l = malloc(sizeof(*l));
        if (!l)
                return -ENOMEM;
        netbroker__link_list__init(l);
        l->name = nb_dup_or_empty(name, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_LINK_LIST, l, oom);
}

NB_EXPORT int nb_batch_names_dump(nb_batch *b)
{
        Netbroker__NamesDump *n;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        n = malloc(sizeof(*n));
        if (!n)
                return -ENOMEM;
        netbroker__names_dump__init(n);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_NAMES_DUMP, n, false);
}

/* ---- virtual networks, part 1: addresses, routes, sysctls ---- */

/* Argument arg of who: a non-empty string shorter than max. */
static int text_check(const char *who, const char *arg, const char *s, size_t max)
{
        if (!s)
                return nb_bad_arg(EINVAL, who, "%s is NULL", arg);
        if (!s[0])
                return nb_bad_arg(EINVAL, who, "%s is empty", arg);
        if (strlen(s) >= max)
                return nb_bad_arg(EINVAL, who, "%s %s is %zu bytes; at most %zu", arg, NB_Q(s),
                                  strlen(s), max - 1);
        return 0;
}

NB_EXPORT int nb_batch_addr_add(nb_batch *b, const char *ifname, const char *address,
                                unsigned prefix_len, const nb_addr_opts *theirs)
{
        nb_addr_opts mine = NB_ADDR_OPTS_INIT;
        Netbroker__AddrAdd *a;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = name_check(__func__, "ifname", ifname)) < 0 ||
            (r = text_check(__func__, "address", address, 64)) < 0 ||
            (theirs && (r = NB_ARG_IN(__func__, "opts", &mine, theirs, NB_ADDR_OPTS)) < 0))
                return r;
        a = malloc(sizeof(*a));
        if (!a)
                return -ENOMEM;
        netbroker__addr_add__init(a);
        a->ifname = nb_dup_or_empty(ifname, &oom);
        a->address = nb_dup_or_empty(address, &oom);
        a->prefix_len = prefix_len;
        a->broadcast = nb_dup_or_empty(mine.broadcast, &oom);
        a->noprefixroute = mine.noprefixroute;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_ADDR_ADD, a, oom);
}

NB_EXPORT int nb_batch_addr_delete(nb_batch *b, const char *ifname, const char *address,
                                   unsigned prefix_len)
{
        Netbroker__AddrDelete *d;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = name_check(__func__, "ifname", ifname)) < 0 ||
            (r = text_check(__func__, "address", address, 64)) < 0)
                return r;
        d = malloc(sizeof(*d));
        if (!d)
                return -ENOMEM;
        netbroker__addr_delete__init(d);
        d->ifname = nb_dup_or_empty(ifname, &oom);
        d->address = nb_dup_or_empty(address, &oom);
        d->prefix_len = prefix_len;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_ADDR_DELETE, d, oom);
}

NB_EXPORT int nb_batch_addr_list(nb_batch *b, const char *ifname)
{
        Netbroker__AddrList *l;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if (ifname && (r = name_check(__func__, "ifname", ifname)) < 0)
                return r;
        l = malloc(sizeof(*l));
        if (!l)
                return -ENOMEM;
        netbroker__addr_list__init(l);
        l->ifname = nb_dup_or_empty(ifname, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_ADDR_LIST, l, oom);
}

/* RouteAdd and RouteDelete carry the same fields. */
#define ROUTE_TO_MSG(m, c, oom)                                                                    \
        do {                                                                                       \
                (m)->destination = nb_dup_or_empty((c)->destination, (oom));                       \
                (m)->prefix_len = (c)->prefix_len;                                                 \
                (m)->gateway = nb_dup_or_empty((c)->gateway, (oom));                               \
                (m)->ifname = nb_dup_or_empty((c)->ifname, (oom));                                 \
                (m)->metric = (c)->metric;                                                         \
                (m)->table = (c)->table;                                                           \
                (m)->ipv6 = (c)->ipv6;                                                             \
        } while (0)

/* Of route's strings, NULL and "" are "none". */
static int route_in(const char *who, const nb_batch *b, const nb_route *theirs, nb_route *mine)
{
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, who, "batch is NULL");
        if ((r = NB_ARG_IN(who, "route", mine, theirs, NB_ROUTE)) < 0)
                return r;
        if (mine->ifname && mine->ifname[0] &&
            (r = name_check(who, "route->ifname", mine->ifname)) < 0)
                return r;
        if (mine->destination && mine->destination[0] &&
            (r = text_check(who, "route->destination", mine->destination, 64)) < 0)
                return r;
        if (mine->gateway && mine->gateway[0] &&
            (r = text_check(who, "route->gateway", mine->gateway, 64)) < 0)
                return r;
        return 0;
}

NB_EXPORT int nb_batch_route_add(nb_batch *b, const nb_route *theirs)
{
        Netbroker__RouteAdd *m;
        nb_route c;
        bool oom = false;
        int r;

        if ((r = route_in(__func__, b, theirs, &c)) < 0)
                return r;
        m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        netbroker__route_add__init(m);
        ROUTE_TO_MSG(m, &c, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_ROUTE_ADD, m, oom);
}

NB_EXPORT int nb_batch_route_delete(nb_batch *b, const nb_route *theirs)
{
        Netbroker__RouteDelete *m;
        nb_route c;
        bool oom = false;
        int r;

        if ((r = route_in(__func__, b, theirs, &c)) < 0)
                return r;
        m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        netbroker__route_delete__init(m);
        ROUTE_TO_MSG(m, &c, &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_ROUTE_DELETE, m, oom);
}

NB_EXPORT int nb_batch_route_list(nb_batch *b, const char *ifname, unsigned table)
{
        Netbroker__RouteList *l;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if (ifname && (r = name_check(__func__, "ifname", ifname)) < 0)
                return r;
        l = malloc(sizeof(*l));
        if (!l)
                return -ENOMEM;
        netbroker__route_list__init(l);
        l->ifname = nb_dup_or_empty(ifname, &oom);
        l->table = table;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_ROUTE_LIST, l, oom);
}

NB_EXPORT int nb_batch_sysctl_set(nb_batch *b, const char *ifname, const char *name, unsigned value)
{
        Netbroker__SysctlSet *s;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((ifname && (r = name_check(__func__, "ifname", ifname)) < 0) ||
            (r = text_check(__func__, "name", name, 64)) < 0)
                return r;
        s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        netbroker__sysctl_set__init(s);
        s->ifname = nb_dup_or_empty(ifname, &oom);
        s->name = nb_dup_or_empty(name, &oom);
        s->value = value;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_SYSCTL_SET, s, oom);
}

/* A field of nb_bridge_opts: -1 (unchanged), 0 or 1. */
static int tristate_check(const char *who, const char *field, int v)
{
        if (v < -1 || v > 1)
                return nb_bad_arg(EINVAL, who, "opts->%s %d is not -1, 0 or 1", field, v);
        return 0;
}

NB_EXPORT int nb_batch_bridge_opt_set(nb_batch *b, const char *ifname, const nb_bridge_opts *theirs)
{
        Netbroker__BridgeOptSet *m;
        nb_bridge_opts o;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = name_check(__func__, "ifname", ifname)) < 0 ||
            (r = NB_ARG_IN(__func__, "opts", &o, theirs, NB_BRIDGE_OPTS)) < 0 ||
            (r = tristate_check(__func__, "stp", o.stp)) < 0 ||
            (r = tristate_check(__func__, "isolated", o.isolated)) < 0 ||
            (r = tristate_check(__func__, "learning", o.learning)) < 0 ||
            (r = tristate_check(__func__, "unicast_flood", o.unicast_flood)) < 0 ||
            (r = tristate_check(__func__, "multicast_flood", o.multicast_flood)) < 0 ||
            (r = tristate_check(__func__, "broadcast_flood", o.broadcast_flood)) < 0)
                return r;
        if (o.forward_delay_cs < -1)
                return nb_bad_arg(EINVAL, __func__, "opts->forward_delay_cs %d is below -1",
                                  o.forward_delay_cs);
        m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        netbroker__bridge_opt_set__init(m);
        m->ifname = nb_dup_or_empty(ifname, &oom);
        m->has_stp = o.stp >= 0;
        m->stp = o.stp == 1;
        m->has_forward_delay = o.forward_delay_cs >= 0;
        m->forward_delay_cs = o.forward_delay_cs >= 0 ? (uint32_t)o.forward_delay_cs : 0;
        m->has_isolated = o.isolated >= 0;
        m->isolated = o.isolated == 1;
        m->has_learning = o.learning >= 0;
        m->learning = o.learning == 1;
        m->has_unicast_flood = o.unicast_flood >= 0;
        m->unicast_flood = o.unicast_flood == 1;
        m->has_multicast_flood = o.multicast_flood >= 0;
        m->multicast_flood = o.multicast_flood == 1;
        m->has_broadcast_flood = o.broadcast_flood >= 0;
        m->broadcast_flood = o.broadcast_flood == 1;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_BRIDGE_OPT_SET, m, oom);
}

/* ---- supervised programs ---- */

NB_EXPORT int nb_batch_program_start(nb_batch *b, const char *path, const nb_program_opts *theirs)
{
        Netbroker__ProgramStart *s;
        nb_program_opts mine = NB_PROGRAM_OPTS_INIT;
        bool oom = false;
        int r;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if ((r = path_check(__func__, "path", path)) < 0 ||
            (theirs && (r = NB_ARG_IN(__func__, "opts", &mine, theirs, NB_PROGRAM_OPTS)) < 0) ||
            (r = env_check(__func__, "opts->env", mine.env)) < 0)
                return r;
        s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        netbroker__program_start__init(s);
        s->path = nb_dup_or_empty(path, &oom);
        s->tag = nb_dup_or_empty(mine.tag ? mine.tag : "", &oom);
        if (copy_strv(mine.argv, &s->argv, &s->n_argv) < 0 ||
            copy_strv(mine.env, &s->env, &s->n_env) < 0)
                oom = true;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_PROGRAM_START, s, oom);
}

NB_EXPORT int nb_batch_program_stop(nb_batch *b, uint64_t id, const char *tag, unsigned grace_ms)
{
        Netbroker__ProgramStop *s;
        bool oom = false;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        if (!id && (!tag || !tag[0]))
                return nb_bad_arg(EINVAL, __func__, "id is 0 and tag is %s: give one of them",
                                  tag ? "empty" : "NULL");
        if (id && tag && tag[0])
                return nb_bad_arg(EINVAL, __func__, "both id %llu and tag %s: give one of them",
                                  (unsigned long long)id, NB_Q(tag));
        s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        netbroker__program_stop__init(s);
        s->id = id;
        s->tag = nb_dup_or_empty(tag ? tag : "", &oom);
        s->grace_ms = grace_ms;
        return nb_batch_add_sub(b, NETBROKER__OP__OP_PROGRAM_STOP, s, oom);
}

NB_EXPORT int nb_batch_program_list(nb_batch *b, const char *tag)
{
        Netbroker__ProgramList *s;
        bool oom = false;

        if (!b)
                return nb_bad_arg(EINVAL, __func__, "batch is NULL");
        s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        netbroker__program_list__init(s);
        s->tag = nb_dup_or_empty(tag ? tag : "", &oom);
        return nb_batch_add_sub(b, NETBROKER__OP__OP_PROGRAM_LIST, s, oom);
}
