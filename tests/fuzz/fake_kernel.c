// SPDX-License-Identifier: LGPL-2.1-or-later
/* The in-memory kernel; see fake_kernel.h. Every allocation here can fail
 * (the allocation-failure test fails them too) and then reports -ENOMEM, as
 * libnl and libnftnl do, leaving the state as it was. */
#include "fake_kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "bandwidth.h"
#include "bandwidth_show.h"
#include "firewall.h"
#include "fw_compile.h"
#include "link.h"
#include "link_show.h"
#include "loop.h"
#include "names.h"
#include "spawn.h"

enum fake_kind { K_DEVICE, K_TAP, K_MACVTAP, K_MACVLAN, K_VETH, K_BRIDGE };

static const char *const kind_names[] = {"device", "tap", "macvtap", "macvlan", "veth", "bridge"};

struct fake_if {
        char name[IFNAMSIZ];
        int ifindex;
        enum fake_kind kind;
        bool initial;
        struct nbd_link_state st;
        char peer[IFNAMSIZ]; /* a veth's other end in this namespace */
        struct nbd_bw_limits bw;
        bool owned; /* made by the helper for uid owner (its owner mark) */
        uid_t owner;
        uint32_t group; /* link group (nbd_link_doom) */
        uint32_t bropt[NBD_BROPT_N]; /* bridge options and port flags, 0 at first */
        struct fake_if *next;
};

struct fake_owner {
        char owner[NBD_FW_OWNER_MAX + 1];
        char ifname[IFNAMSIZ];
        char hash[NBD_FW_HASH_HEX];
        unsigned rules;
        uid_t uid;
        struct fake_owner *next;
};

struct nbd_links {
        struct fake_if *ifs; /* ascending ifindex */
        struct nbd_names *names;
        int next_ifindex;
        struct fake_owner *owners;
};

struct nbd_fw {
        int unused;
};

struct nbd_bw {
        int unused;
};

static struct nbd_links world;
static struct nbd_fw the_fw;
static struct nbd_bw the_bw;

static bool refused(const char *name)
{
        return strncmp(name, "fail", 4) == 0;
}

/* ---- the world ---- */

static struct fake_if *find_if(const char *name)
{
        for (struct fake_if *f = world.ifs; f; f = f->next)
                if (strcmp(f->name, name) == 0)
                        return f;
        return NULL;
}

static struct fake_if *find_ifindex(int ifindex)
{
        for (struct fake_if *f = world.ifs; f; f = f->next)
                if (f->ifindex == ifindex)
                        return f;
        return NULL;
}

static struct fake_owner *find_owner(const char *owner)
{
        for (struct fake_owner *o = world.owners; o; o = o->next)
                if (strcmp(o->owner, owner) == 0)
                        return o;
        return NULL;
}

static struct fake_if *add_if(const char *name, enum fake_kind kind)
{
        struct fake_if *f = calloc(1, sizeof(*f)), **tail = &world.ifs;

        if (!f)
                return NULL;
        snprintf(f->name, sizeof(f->name), "%s", name);
        f->ifindex = world.next_ifindex++;
        f->kind = kind;
        f->st.mtu = 1500;
        f->st.has_mac = true;
        f->st.mac[0] = 0x52;
        f->st.mac[1] = 0x54;
        f->st.mac[5] = (uint8_t)f->ifindex;
        while (*tail)
                tail = &(*tail)->next;
        *tail = f;
        nbd_names_mark(world.names, name, true);
        return f;
}

static void remove_if(struct fake_if *f)
{
        for (struct fake_if **p = &world.ifs; *p; p = &(*p)->next)
                if (*p == f) {
                        *p = f->next;
                        break;
                }
        /* The kernel detaches a bridge's ports when the bridge goes. */
        for (struct fake_if *o = world.ifs; o; o = o->next)
                if (o->st.master == f->ifindex)
                        o->st.master = 0;
        nbd_names_mark(world.names, f->name, false);
        free(f);
}

void nb_fake_free(void)
{
        while (world.ifs) {
                struct fake_if *f = world.ifs;
                world.ifs = f->next;
                free(f);
        }
        while (world.owners) {
                struct fake_owner *o = world.owners;
                world.owners = o->next;
                free(o);
        }
        nbd_names_free(world.names);
        world = (struct nbd_links){0};
}

int nb_fake_reset(void)
{
        static const struct {
                const char *name;
                enum fake_kind kind;
        } start[] = {{"lo", K_DEVICE}, {"eth0", K_DEVICE},      {"br0", K_BRIDGE},
                     {"vnet0", K_TAP}, {"macvtap0", K_MACVTAP}, {"fail0", K_DEVICE}};
        struct fake_owner *o;
        struct fake_if *f;
        int r;

        nb_fake_free();
        world.next_ifindex = 1;
        r = nbd_names_new(&world.names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(start) / sizeof(*start); i++) {
                f = add_if(start[i].name, start[i].kind);
                if (!f)
                        goto oom;
                f->initial = true;
                f->st.up = true;
        }
        f = find_if("vnet0");
        f->bw = (struct nbd_bw_limits){.in = {1000, 2000, 64, 0}, .out = {500, 0, 32, 0}};
        o = calloc(1, sizeof(*o));
        if (!o)
                goto oom;
        snprintf(o->owner, sizeof(o->owner), "guest0");
        snprintf(o->ifname, sizeof(o->ifname), "vnet0");
        snprintf(o->hash, sizeof(o->hash), "%032x", 0x6e6275);
        o->rules = 3;
        world.owners = o;
        return 0;
oom:
        nb_fake_free();
        return -ENOMEM;
}

unsigned nb_fake_made(void)
{
        unsigned n = 0;

        for (const struct fake_if *f = world.ifs; f; f = f->next)
                n += !f->initial;
        return n;
}

static size_t put(char *buf, size_t len, size_t at, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static size_t put(char *buf, size_t len, size_t at, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(at < len ? buf + at : NULL, at < len ? len - at : 0, fmt, ap);
        va_end(ap);
        return at + (n > 0 ? (size_t)n : 0);
}

size_t nb_fake_describe(char *buf, size_t len)
{
        size_t at = 0;

        if (len)
                buf[0] = '\0';
        for (const struct fake_if *f = world.ifs; f; f = f->next) {
                const struct nbd_bw_rate *i = &f->bw.in, *o = &f->bw.out;
                at = put(buf, len, at,
                         "%d %s %s up=%d mtu=%u mac=%02x:%02x:%02x:%02x:%02x:%02x master=%d "
                         "peer=%s bw=%u/%u/%u/%u,%u/%u/%u owner=%ld br=",
                         f->ifindex, f->name, kind_names[f->kind], f->st.up, f->st.mtu,
                         f->st.mac[0], f->st.mac[1], f->st.mac[2], f->st.mac[3], f->st.mac[4],
                         f->st.mac[5], f->st.master, f->peer, i->average, i->peak, i->burst,
                         i->floor, o->average, o->peak, o->burst, f->owned ? (long)f->owner : -1L);
                for (int k = 0; k < NBD_BROPT_N; k++)
                        at = put(buf, len, at, "%s%u", k ? "/" : "", f->bropt[k]);
                at = put(buf, len, at, "\n");
        }
        for (const struct fake_owner *o = world.owners; o; o = o->next)
                at = put(buf, len, at, "owner %s on %s hash %s rules %u uid %u\n", o->owner,
                         o->ifname, o->hash, o->rules, (unsigned)o->uid);
        return at;
}

/* ---- link.h ---- */

static int fake_links_open(struct nbd_loop *loop, const char *devdir, struct nbd_links **ret)
{
        int r = nb_fake_reset();

        (void)loop, (void)devdir;
        if (r < 0)
                return r;
        *ret = &world;
        return 0;
}

static void fake_links_close(struct nbd_links *l)
{
        if (l)
                nb_fake_free();
}

static void fake_links_flush_gone(struct nbd_links *l)
{
        (void)l; /* nothing goes behind the fake's back */
}

/* The fake world changes only through its own calls: nothing to hold. */
static void fake_links_hold(struct nbd_links *l, bool hold)
{
        (void)l;
        (void)hold;
}

static void fake_links_sync(struct nbd_links *l)
{
        (void)l; /* nobody else changes the fake */
}

static struct nbd_names *fake_links_names(struct nbd_links *l)
{
        return l->names;
}

static struct nbd_netlink *fake_links_netlink(struct nbd_links *l)
{
        (void)l;
        return NULL;
}

static bool fake_link_is_macvtap(struct nbd_links *l, const char *name)
{
        struct fake_if *f = find_if(name);

        (void)l;
        return f && f->kind == K_MACVTAP;
}

static int fake_link_exists(struct nbd_links *l, const char *name)
{
        (void)l;
        return find_if(name) != NULL;
}

static int fake_link_owner(struct nbd_links *l, const char *name, uid_t *ret)
{
        struct fake_if *f = find_if(name);

        (void)l;
        if (!f)
                return -ENODEV;
        if (!f->owned)
                return -ENOENT;
        *ret = f->owner;
        return 0;
}

static unsigned fake_links_owned_by(struct nbd_links *l, uid_t uid);

static int fake_links_ifindex(struct nbd_links *l, const char *name, int *ret)
{
        struct fake_if *f = find_if(name);

        (void)l;
        if (!f)
                return -ENODEV;
        *ret = f->ifindex;
        return 0;
}

static int fake_links_owned_ifindexes(struct nbd_links *l, uid_t uid, int **ret, size_t *ret_n)
{
        int *v = calloc(fake_links_owned_by(l, uid) + 1, sizeof(*v));
        size_t k = 0;

        if (!v)
                return -ENOMEM;
        for (const struct fake_if *f = world.ifs; f; f = f->next)
                if (f->owned && f->owner == uid)
                        v[k++] = f->ifindex;
        *ret = v;
        *ret_n = k;
        return 0;
}

static unsigned fake_links_owned_by(struct nbd_links *l, uid_t uid)
{
        unsigned n = 0;

        (void)l;
        for (const struct fake_if *f = world.ifs; f; f = f->next)
                n += f->owned && f->owner == uid;
        return n;
}

/* A free name for a create: the template's next name from the allocator,
 * or the explicit name if nothing has it. */
static int claim_name(const char *name, char ret[IFNAMSIZ], struct nbd_err *err)
{
        char prefix[IFNAMSIZ];
        int r;

        if (!nbd_is_template(name)) {
                if (find_if(name)) {
                        return nbd_err_set(err, -EEXIST, "%s exists", name);
                }
                snprintf(ret, IFNAMSIZ, "%s", name);
                return 0;
        }
        r = nbd_template_parse(name, prefix);
        if (r == 0)
                r = nbd_names_allocate(world.names, prefix, ret);
        if (r < 0)
                nbd_err_set(err, r, "no name from %s: %s", name, strerror(-r));
        return r;
}

/* Make the interface, marked as made for creator, or give its name back. */
static int create(const char *name, enum fake_kind kind, unsigned nfds, uid_t creator,
                  struct nbd_link_made *ret, struct nbd_err *err)
{
        char ifname[IFNAMSIZ];
        struct fake_if *f;
        int r = claim_name(name, ifname, err);

        if (r < 0)
                return r;
        if (refused(ifname)) {
                r = nbd_err_set(err, -EIO, "fake kernel: %s refused", ifname);
                goto fail;
        }
        /* As the kernel refuses a tap in a user namespace without rights. */
        if (strncmp(ifname, "eperm", 5) == 0) {
                r = nbd_err_set(err, -EPERM, "fake kernel: %s: operation not permitted", ifname);
                goto fail;
        }
        f = add_if(ifname, kind);
        if (!f) {
                r = nbd_err_oom(err, "making an interface");
                goto fail;
        }
        f->owned = true;
        f->owner = creator;
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->ifname, sizeof(ret->ifname), "%s", ifname);
        ret->ifindex = f->ifindex;
        for (; ret->nfds < nfds; ret->nfds++) {
                ret->fds[ret->nfds] = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (ret->fds[ret->nfds] < 0) {
                        r = -errno;
                        nbd_err_set(err, r, "open: %s", strerror(-r));
                        while (ret->nfds)
                                close(ret->fds[--ret->nfds]);
                        remove_if(f);
                        return r;
                }
        }
        return 0;
fail:
        nbd_names_mark(world.names, ifname, false);
        return r;
}

static int fake_link_tap_create(struct nbd_links *l, const struct nbd_tap_spec *s,
                                struct nbd_link_made *ret, struct nbd_err *err)
{
        (void)l;
        if (s->queues > NBD_LINK_MAX_QUEUES) {
                return nbd_err_set(err, -EINVAL, "%u queues", s->queues);
        }
        return create(s->name, K_TAP, s->queues ? s->queues : 1, s->creator, ret, err);
}

static int fake_link_macvlan_create(struct nbd_links *l, const struct nbd_macvlan_spec *s,
                                    struct nbd_link_made *ret, struct nbd_err *err)
{
        struct fake_if *f;
        int r;

        (void)l;
        if (!find_if(s->parent)) {
                return nbd_err_set(err, -ENODEV, "no interface %s", s->parent);
        }
        if (s->queues > NBD_LINK_MAX_QUEUES) {
                return nbd_err_set(err, -EINVAL, "%u queues", s->queues);
        }
        r = create(s->name, s->tap ? K_MACVTAP : K_MACVLAN,
                   s->tap ? (s->queues ? s->queues : 1) : 0, s->creator, ret, err);
        if (r == 0 && s->has_mac && (f = find_if(ret->ifname)))
                memcpy(f->st.mac, s->mac, 6);
        return r;
}

static int fake_link_veth_create(struct nbd_links *l, const struct nbd_veth_spec *s,
                                 struct nbd_link_made *ret, struct nbd_err *err)
{
        struct fake_if *f, *p;
        int r;

        (void)l;
        if (s->peer_netns_fd < 0 && find_if(s->peer)) {
                return nbd_err_set(err, -EEXIST, "%s exists", s->peer);
        }
        r = create(s->name, K_VETH, 0, s->creator, ret, err);
        if (r < 0)
                return r;
        snprintf(ret->peer, sizeof(ret->peer), "%s", s->peer);
        /* A peer in another namespace is not ours to see. */
        if (s->peer_netns_fd >= 0)
                return 0;
        f = find_if(ret->ifname);
        if (refused(s->peer) || !(p = add_if(s->peer, K_VETH))) {
                remove_if(f);
                if (refused(s->peer))
                        return nbd_err_set(err, -EIO, "fake kernel: peer %s refused", s->peer);
                return nbd_err_oom(err, "making a veth");
        }
        snprintf(f->peer, sizeof(f->peer), "%s", p->name);
        snprintf(p->peer, sizeof(p->peer), "%s", f->name);
        p->owned = true;
        p->owner = s->creator;
        return 0;
}

static int fake_link_bridge_create(struct nbd_links *l, const char *name, uid_t creator,
                                   struct nbd_link_made *ret, struct nbd_err *err)
{
        (void)l;
        return create(name, K_BRIDGE, 0, creator, ret, err);
}

static int fake_link_set(struct nbd_links *l, const struct nbd_link_change *c, int *ret_ifindex,
                         struct nbd_err *err)
{
        struct fake_if *f = find_if(c->name), *m = NULL;

        (void)l;
        if (!f) {
                return nbd_err_set(err, -ENODEV, "no interface %s", c->name);
        }
        if (refused(c->name)) {
                return nbd_err_set(err, -EIO, "fake kernel: %s refused", c->name);
        }
        if (c->master) {
                m = find_if(c->master);
                if (!m) {
                        return nbd_err_set(err, -ENODEV, "no interface %s", c->master);
                }
        }
        /* As the kernel's do_setlink(): the MAC, the MTU and up/down are
         * in place when the master is refused. */
        if (c->has_mac)
                memcpy(f->st.mac, c->mac, 6);
        if (c->mtu)
                f->st.mtu = c->mtu;
        if (c->up >= 0)
                f->st.up = c->up;
        if (m && (m->kind != K_BRIDGE || m == f))
                return nbd_err_set(err, -EOPNOTSUPP, "%s cannot be the master of %s", m->name,
                                   f->name);
        if (m)
                f->st.master = m->ifindex;
        if (c->nomaster)
                f->st.master = 0;
        *ret_ifindex = f->ifindex;
        return 0;
}

static int fake_link_get_state(struct nbd_links *l, const char *name, struct nbd_link_state *ret)
{
        struct fake_if *f = find_if(name);

        (void)l;
        if (!f)
                return -ENODEV;
        *ret = f->st;
        ret->ifindex = f->ifindex;
        return 0;
}

static int fake_link_restore(struct nbd_links *l, const char *name, const struct nbd_link_state *st)
{
        struct fake_if *f = st->ifindex ? find_ifindex(st->ifindex) : find_if(name);

        (void)l;
        if (!f)
                return -ENODEV;
        f->st = *st;
        if (st->master && !find_ifindex(st->master))
                f->st.master = 0;
        return 0;
}

static int fake_link_delete(struct nbd_links *l, const char *name, struct nbd_err *err)
{
        struct fake_if *f = find_if(name), *p;

        (void)l;
        if (!f) {
                return nbd_err_set(err, -ENODEV, "no interface %s", name);
        }
        if (refused(name)) {
                return nbd_err_set(err, -EIO, "fake kernel: %s refused", name);
        }
        /* A veth goes with its peer. */
        if (f->kind == K_VETH && f->peer[0] && (p = find_if(f->peer)))
                remove_if(p);
        remove_if(f);
        return 0;
}

static int fake_link_delete_index(struct nbd_links *l, int ifindex, const char *name,
                                  struct nbd_err *err)
{
        struct fake_if *f = find_ifindex(ifindex);

        if (!f)
                return nbd_err_set(err, -ENODEV, "no interface %s", name);
        return fake_link_delete(l, f->name, err);
}

static int fake_link_doom(struct nbd_links *l, const char *name, uint32_t group,
                          struct nbd_link_doomed *ret, struct nbd_err *err)
{
        struct fake_if *f = find_if(name);

        (void)l;
        if (!f)
                return nbd_err_set(err, -ENODEV, "cannot delete %s: no such device", name);
        /* As fake_link_delete: found at once, so it fails alone. */
        if (refused(name))
                return nbd_err_set(err, -EIO, "fake kernel: %s refused", name);
        snprintf(ret->name, sizeof(ret->name), "%s", name);
        ret->ifindex = f->ifindex;
        ret->group = f->group;
        f->group = group;
        return 0;
}

static int fake_link_undoom(struct nbd_links *l, const struct nbd_link_doomed *d)
{
        struct fake_if *f = find_ifindex(d->ifindex);

        (void)l;
        if (!f)
                return -ENODEV;
        f->group = d->group;
        return 0;
}

static int fake_link_delete_group(struct nbd_links *l, uint32_t group, const int *ifindexes,
                                  size_t n, struct nbd_err *err)
{
        (void)ifindexes;
        (void)n;
        bool found = false;

        for (struct fake_if *f = world.ifs, *next; f; f = next) {
                struct fake_if *p;
                next = f->next;
                if (f->group != group)
                        continue;
                found = true;
                /* A veth goes with its peer (which may be the next). */
                if (f->kind == K_VETH && f->peer[0] && (p = find_if(f->peer))) {
                        if (p == next)
                                next = p->next;
                        remove_if(p);
                }
                remove_if(f);
        }
        (void)l;
        return found ? 0 : nbd_err_set(err, -ENODEV, "no interface in group %#x", group);
}

/* ---- link_show.h ---- */

static const enum nbd_link_kind show_kinds[] = {
        [K_DEVICE] = NBD_LINK_KIND_OTHER,    [K_TAP] = NBD_LINK_KIND_TAP,
        [K_MACVTAP] = NBD_LINK_KIND_MACVTAP, [K_MACVLAN] = NBD_LINK_KIND_MACVLAN,
        [K_VETH] = NBD_LINK_KIND_VETH,       [K_BRIDGE] = NBD_LINK_KIND_BRIDGE,
};
/* IFLA_INFO_KIND as the kernel names them ("" for a plain device). */
static const char *const info_kinds[] = {"", "tun", "macvtap", "macvlan", "veth", "bridge"};

static void show_one(const struct fake_if *f, struct nbd_link_info *o)
{
        const struct fake_if *m = f->st.master ? find_ifindex(f->st.master) : NULL;
        const uint8_t *a = f->st.mac;

        snprintf(o->name, sizeof(o->name), "%s", f->name);
        o->ifindex = f->ifindex;
        o->kind = show_kinds[f->kind];
        snprintf(o->kind_name, sizeof(o->kind_name), "%s", info_kinds[f->kind]);
        snprintf(o->mac, sizeof(o->mac), "%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3],
                 a[4], a[5]);
        o->mtu = f->st.mtu;
        o->up = f->st.up;
        snprintf(o->master, sizeof(o->master), "%s", m ? m->name : "");
        o->has_owner = o->made_by_helper = f->owned;
        o->owner = f->owned ? f->owner : 0;
}

static int fake_link_show(struct nbd_netlink *nl, const char *name, struct nbd_link_info **ret,
                          size_t *ret_n, struct nbd_err *e)
{
        bool one = name && name[0];
        struct nbd_link_info *all;
        size_t n = 0;

        (void)nl; /* the fake lends no socket: it reads its world */
        if (one && !find_if(name))
                return nbd_err_set(e, -ENODEV, "no interface %s", name);
        if (one && refused(name))
                return nbd_err_set(e, -EIO, "fake kernel: %s refused", name);
        for (const struct fake_if *f = world.ifs; f; f = f->next)
                n += !one || strcmp(f->name, name) == 0;
        all = calloc(n ? n : 1, sizeof(*all));
        if (!all)
                return nbd_err_oom(e, "listing the interfaces");
        n = 0;
        for (const struct fake_if *f = world.ifs; f; f = f->next)
                if (!one || strcmp(f->name, name) == 0)
                        show_one(f, &all[n++]);
        *ret = all;
        *ret_n = n;
        return 0;
}

static int fake_link_show_own(const char *name, struct nbd_link_info **ret, size_t *ret_n,
                              struct nbd_err *e)
{
        return fake_link_show(NULL, name, ret, ret_n, e);
}

/* ---- bandwidth.h ---- */

static int fake_bw_open(struct nbd_netlink *nl, struct nbd_bw **ret)
{
        (void)nl;
        *ret = &the_bw;
        return 0;
}

static void fake_bw_close(struct nbd_bw *bw)
{
        (void)bw;
}

static void fake_bw_mechanisms(const struct nbd_bw *bw, const char **ret_in, const char **ret_out)
{
        (void)bw;
        *ret_in = "htb";
        *ret_out = "nft-limit";
}

static bool fake_bw_outbound_available(const struct nbd_bw *bw)
{
        (void)bw;
        return true;
}

/* As the real nbd_bw_set and the steps: limits checked first (set
 * only), then the interface looked up, err filled on every failure. */
static int bw_target(const char *ifname, struct fake_if **ret, struct nbd_err *err)
{
        struct fake_if *f = find_if(ifname);

        if (!f)
                return nbd_err_set(err, -ENODEV, "no interface %s: %s", ifname, strerror(ENODEV));
        if (refused(ifname))
                return nbd_err_set(err, -EIO, "fake kernel: %s refused", ifname);
        *ret = f;
        return 0;
}

static int fake_bw_set(struct nbd_bw *bw, const char *ifname, const struct nbd_bw_limits *l,
                       struct nbd_bw_applied *ret, struct nbd_err *err)
{
        struct fake_if *f;
        int r = nbd_bw_check(l, err);

        (void)bw;
        if (r == 0)
                r = bw_target(ifname, &f, err);
        if (r < 0)
                return r;
        f->bw = *l;
        snprintf(ret->in, sizeof(ret->in), "%s", l->in.average ? "htb" : "");
        snprintf(ret->out, sizeof(ret->out), "%s", l->out.average ? "nft-limit" : "");
        return 0;
}

static int fake_bw_flush(struct nbd_bw *bw)
{
        (void)bw; /* clears take effect at once here: nothing waits */
        return 0;
}

/* As the real steps (bandwidth.h): begin checks and looks up, the lane's
 * step (here, with no lane, on the caller's thread) does nothing, end makes
 * the change and says what was there. */
struct nbd_bw_change {
        char ifname[IFNAMSIZ];
        bool gone, set;
        struct nbd_bw_limits want;
};

static int fake_bw_change_begin(struct nbd_bw *bw, const char *ifname,
                                const struct nbd_bw_limits *l, struct nbd_bw_change **ret,
                                struct nbd_err *err)
{
        struct nbd_bw_change *c;
        struct fake_if *f;
        int r = l ? nbd_bw_check(l, err) : 0;

        (void)bw;
        if (r == 0)
                r = bw_target(ifname, &f, err);
        if (r < 0 && !(r == -ENODEV && !l))
                return r;
        c = calloc(1, sizeof(*c));
        if (!c)
                return nbd_err_oom(err, "changing bandwidth limits");
        snprintf(c->ifname, sizeof(c->ifname), "%s", ifname);
        c->gone = r == -ENODEV;
        c->set = l != NULL;
        if (l)
                c->want = *l;
        *ret = c;
        return 0;
}

static void fake_bw_change_nft(struct nbd_bw_change *c)
{
        (void)c;
}

static int fake_bw_change_end(struct nbd_bw *bw, struct nbd_bw_change *c,
                              struct nbd_bw_applied *ret, struct nbd_bw_limits *ret_before,
                              struct nbd_err *err)
{
        struct fake_if *f;
        int r;

        (void)bw;
        if (c->gone)
                return nbd_err_set(err, -ENODEV, "already gone: fake kernel");
        if ((r = bw_target(c->ifname, &f, err)) < 0)
                return r;
        *ret_before = f->bw;
        /* The kernel does not keep a floor. */
        ret_before->in.floor = ret_before->out.floor = 0;
        f->bw = c->want;
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->in, sizeof(ret->in), "%s", c->want.in.average ? "htb" : "");
        snprintf(ret->out, sizeof(ret->out), "%s", c->want.out.average ? "nft-limit" : "");
        return 0;
}

static void fake_bw_change_free(struct nbd_bw_change *c)
{
        free(c);
}

/* ---- bandwidth_show.h ---- */

/* One direction as the kernel gives it back: peak 0 when it is the
 * average, no floor. */
static bool show_rate(const struct nbd_bw_rate *in, const char *mech, struct nbd_bw_rate *out,
                      char mech_out[32])
{
        if (!in->average)
                return false;
        *out = *in;
        if (out->peak == out->average)
                out->peak = 0;
        out->floor = 0;
        snprintf(mech_out, 32, "%s", mech);
        return true;
}

static int fake_bw_show(struct nbd_netlink *nl, const char *ifname, struct nbd_bw_shown *ret,
                        struct nbd_err *e)
{
        (void)nl;
        struct nbd_bw_shown s = {0};
        struct fake_if *f;
        int r = bw_target(ifname, &f, e);

        if (r < 0)
                return r;
        s.has_in = show_rate(&f->bw.in, "htb", &s.in, s.in_mech);
        s.has_out = show_rate(&f->bw.out, "nft-limit", &s.out, s.out_mech);
        *ret = s;
        return 0;
}

/* ---- fw_kernel.h: the same contract, err filled on every failure ---- */

struct txn_op {
        bool remove;
        struct fake_owner *rec; /* allocated at queueing: commit cannot fail half-way */
        struct txn_op *next;
};

struct nbd_fw_txn {
        struct txn_op *ops, **tail;
};

static int fake_fw_open(struct nbd_loop *loop, struct nbd_fw **ret)
{
        (void)loop;
        *ret = &the_fw;
        return 0;
}

static void fake_fw_close(struct nbd_fw *fw)
{
        (void)fw;
}

/* Nobody else writes the fake's tables: no deletion to tell of. */
static void fake_fw_on_table_deleted(struct nbd_fw *fw, nbd_fw_table_deleted_fn fn, void *data)
{
        (void)fw;
        (void)fn;
        (void)data;
}

static int fake_fw_txn_begin(struct nbd_fw *fw, struct nbd_fw_txn **ret, struct nbd_err *e)
{
        struct nbd_fw_txn *t = calloc(1, sizeof(*t));

        (void)fw;
        if (!t)
                return nbd_err_oom(e, "beginning a firewall transaction");
        t->tail = &t->ops;
        *ret = t;
        return 0;
}

static void fake_fw_txn_free(struct nbd_fw_txn *t)
{
        if (!t)
                return;
        while (t->ops) {
                struct txn_op *op = t->ops;
                t->ops = op->next;
                free(op->rec);
                free(op);
        }
        free(t);
}

static int queue(struct nbd_fw_txn *t, bool remove, const char *owner, const char *ifname,
                 const struct nbd_fw_applied *a, uid_t uid, struct nbd_err *e)
{
        struct txn_op *op = calloc(1, sizeof(*op));
        struct fake_owner *rec = calloc(1, sizeof(*rec));

        if (!op || !rec) {
                free(op);
                free(rec);
                return remove ? nbd_err_set(e, -ENOMEM,
                                            "out of memory queueing the removal of owner %s", owner)
                              : nbd_err_set(e, -ENOMEM, "out of memory queueing owner %s", owner);
        }
        snprintf(rec->owner, sizeof(rec->owner), "%s", owner);
        if (a) {
                snprintf(rec->ifname, sizeof(rec->ifname), "%s", ifname);
                memcpy(rec->hash, a->hash, sizeof(rec->hash));
                rec->rules = a->rules;
                rec->uid = uid;
        }
        op->remove = remove;
        op->rec = rec;
        *t->tail = op;
        t->tail = &op->next;
        return 0;
}

static int fake_fw_txn_apply(struct nbd_fw_txn *t, const struct nbd_fw_owner_spec *s,
                             struct nbd_fw_applied *ret, struct nbd_err *e)
{
        struct nbd_fw_applied a = {0};
        struct fake_owner *o;
        int r;

        if (!find_if(s->ifname))
                return nbd_err_set(e, -ENODEV, "no interface %s", s->ifname);
        /* The real compiler and hash: what would go to the kernel. */
        r = nbd_fw_hash(s, a.hash, &a.rules, e);
        if (r < 0)
                return r;
        o = find_owner(s->owner);
        if (o && s->own_only && o->uid != s->uid)
                return nbd_err_set(e, -EPERM, "owner %s was made for uid %u", s->owner,
                                   (unsigned)o->uid);
        if (s->ensure && o && strcmp(o->hash, a.hash) == 0 && strcmp(o->ifname, s->ifname) == 0) {
                a.unchanged = true;
                *ret = a;
                return 0;
        }
        r = queue(t, false, s->owner, s->ifname, &a, s->uid, e);
        if (r == 0)
                *ret = a;
        return r;
}

/* Ensure by hash: the fake's owners are always what they claim. */
static int fake_fw_txn_check_hash(struct nbd_fw_txn *t, const char *owner, const char *ifname,
                                  const char *hash, const uid_t *only_for,
                                  struct nbd_fw_applied *ret, struct nbd_err *e)
{
        struct fake_owner *o = find_owner(owner);
        struct nbd_fw_applied a = {0};

        (void)t;
        if (o && only_for && o->uid != *only_for)
                return nbd_err_set(e, -EPERM, "owner %s was made for uid %u", owner,
                                   (unsigned)o->uid);
        if (o) {
                memcpy(a.hash, o->hash, sizeof(a.hash));
                a.rules = o->rules;
                a.unchanged = strcmp(o->hash, hash) == 0 && strcmp(o->ifname, ifname) == 0;
        }
        *ret = a;
        return 0;
}

static int fake_fw_txn_remove(struct nbd_fw_txn *t, const char *owner, const uid_t *only_for,
                              struct nbd_err *e)
{
        struct fake_owner *o = find_owner(owner);

        if (!o)
                return nbd_err_set(e, -ENOENT, "owner %s has no rules", owner);
        if (only_for && o->uid != *only_for)
                return nbd_err_set(e, -EPERM, "owner %s was made for uid %u", owner,
                                   (unsigned)o->uid);
        return queue(t, true, owner, NULL, NULL, 0, e);
}

static void unlink_owner(const char *owner)
{
        for (struct fake_owner **p = &world.owners; *p; p = &(*p)->next)
                if (strcmp((*p)->owner, owner) == 0) {
                        struct fake_owner *o = *p;
                        *p = o->next;
                        free(o);
                        return;
                }
}

/* The commit in three steps: the fake has no lane and no wait, so the
 * whole commit is its finish. */
static int fake_fw_txn_commit_prepare(struct nbd_fw_txn *t, struct nbd_err *e)
{
        (void)t;
        (void)e;
        return 0;
}

static void fake_fw_txn_commit_send(struct nbd_fw_txn *t)
{
        (void)t;
}

static int fake_fw_txn_commit(struct nbd_fw_txn *t, struct nbd_err *e)
{
        /* All or nothing, as one nfnetlink batch. */
        for (struct txn_op *op = t->ops; op; op = op->next)
                if (refused(op->rec->owner))
                        return nbd_err_set(e, -EIO, "fake kernel: owner %s refused",
                                           op->rec->owner);
        for (struct txn_op *op = t->ops; op; op = op->next) {
                unlink_owner(op->rec->owner);
                if (op->remove)
                        continue;
                op->rec->next = world.owners;
                world.owners = op->rec;
                op->rec = NULL;
        }
        while (t->ops) {
                struct txn_op *op = t->ops;
                t->ops = op->next;
                free(op->rec);
                free(op);
        }
        t->tail = &t->ops;
        return 0;
}

/* fw_gone's lane handle: the fake's one table, which no thread shares. */
static int fake_fw_lane_open(const struct nbd_fw *fw, struct nbd_fw **ret)
{
        (void)fw;
        *ret = &the_fw;
        return 0;
}

static void fake_fw_lane_close(struct nbd_fw *lf)
{
        (void)lf;
}

static void fake_fw_txn_rebind(struct nbd_fw_txn *t, struct nbd_fw *fw)
{
        (void)t; /* one table: nothing to rebind */
        (void)fw;
}

/* The fake's transaction holds the owners whole: it never wants chains. */
static void fake_fw_txn_chains_later(struct nbd_fw_txn *t)
{
        (void)t;
}

static bool fake_fw_txn_chains_wanted(const struct nbd_fw_txn *t)
{
        (void)t;
        return false;
}

static int fake_fw_txn_read_chains(struct nbd_fw_txn *t, struct nbd_err *e)
{
        (void)t;
        (void)e;
        return 0;
}

/* Network owners need the kernel backend (op_net.c refuses them under
 * this one), so nothing is ever joined here. */
static void fake_fw_txn_join(struct nbd_fw_txn *t, nbd_fw_put_fn fn, void *data)
{
        (void)t;
        (void)fn;
        (void)data;
}

static int ifname_cmp(const void *a, const void *b)
{
        return strcmp(a, b);
}

static int fake_fw_txn_remove_bound(struct nbd_fw_txn *t, const char (*names)[IFNAMSIZ], size_t n,
                                    struct nbd_fw_owner_info **ret, size_t *n_ret,
                                    struct nbd_err *e)
{
        struct nbd_fw_owner_info *v = NULL;
        size_t k = 0;

        for (const struct fake_owner *o = world.owners; o; o = o->next) {
                struct nbd_fw_owner_info *grown;
                int r;
                if (!bsearch(o->ifname, names, n, sizeof(*names), ifname_cmp))
                        continue;
                grown = realloc(v, (k + 1) * sizeof(*v));
                if (!grown) {
                        free(v);
                        return nbd_err_oom(e, "removing the owners of interfaces that are gone");
                }
                v = grown;
                r = fake_fw_txn_remove(t, o->owner, NULL, e);
                if (r < 0) {
                        free(v);
                        return r;
                }
                v[k] = (struct nbd_fw_owner_info){.uid = o->uid};
                snprintf(v[k].owner, sizeof(v[k].owner), "%s", o->owner);
                snprintf(v[k].ifname, sizeof(v[k].ifname), "%s", o->ifname);
                k++;
        }
        *ret = v;
        *n_ret = k;
        return 0;
}

static int fake_fw_list(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e)
{
        (void)fw;
        for (const struct fake_owner *o = world.owners; o; o = o->next) {
                struct nbd_fw_owner_info info = {.rules = o->rules, .uid = o->uid};
                int r;
                snprintf(info.owner, sizeof(info.owner), "%s", o->owner);
                snprintf(info.ifname, sizeof(info.ifname), "%s", o->ifname);
                memcpy(info.hash, o->hash, sizeof(info.hash));
                r = fn(&info, data);
                /* As fw_kernel.c words it. */
                if (r == -ENOMEM)
                        return nbd_err_oom(e, "listing the owners");
                if (r < 0)
                        return nbd_err_set(e, r, "listing owner %s: %s", o->owner, strerror(-r));
        }
        return 0;
}

/* Its summary always holds: fake_fw_list(); one owner alone, as the
 * kernel's chain would say it. */
static int fake_fw_read_creator(struct nbd_fw *fw, const char *owner, struct nbd_fw_owner_info *ret,
                                struct nbd_err *e)
{
        (void)fw;
        (void)e;
        for (const struct fake_owner *o = world.owners; o; o = o->next) {
                if (strcmp(o->owner, owner) != 0)
                        continue;
                *ret = (struct nbd_fw_owner_info){.rules = o->rules, .uid = o->uid};
                snprintf(ret->owner, sizeof(ret->owner), "%s", o->owner);
                snprintf(ret->ifname, sizeof(ret->ifname), "%s", o->ifname);
                memcpy(ret->hash, o->hash, sizeof(ret->hash));
                return 0;
        }
        return -ENOENT;
}

/* The fake keeps no rules, only their number: it lists that many, in the
 * base chain of "from", uncounted and without text. */
static int fake_fw_list_rules(struct nbd_fw *fw, const uid_t *only, nbd_fw_rule_fn fn, void *data,
                              struct nbd_err *e)
{
        (void)fw;
        for (const struct fake_owner *o = world.owners; o; o = o->next)
                for (unsigned k = 0; k < o->rules && (!only || o->uid == *only); k++) {
                        struct nbd_fw_rule_info info = {.index = k, .text = ""};
                        int r;
                        snprintf(info.owner, sizeof(info.owner), "%s", o->owner);
                        r = fn(&info, data);
                        if (r == -ENOMEM)
                                return nbd_err_oom(e, "listing the rules");
                        if (r < 0)
                                return nbd_err_set(e, r, "listing the rules of owner %s: %s",
                                                   o->owner, strerror(-r));
                }
        return 0;
}

/* ---- spawn.h ---- */

struct nbd_child {
        struct nbd_loop *loop;
        struct nbd_timer timer;
        bool running;
        uid_t uid;
        struct nbd_child *next_running;
        nbd_child_done_fn done;
        void *data;
        struct nbd_child_result res;
};

static unsigned running;
static struct nbd_child *running_list;
static void (*reaped_fn)(void *data);
static void *reaped_data;

static void fake_children_on_reaped(void (*fn)(void *data), void *data)
{
        reaped_fn = fn;
        reaped_data = data;
}

static unsigned fake_children_running(void)
{
        return running;
}

static unsigned fake_children_running_of(uid_t uid)
{
        unsigned n = 0;

        for (const struct nbd_child *c = running_list; c; c = c->next_running)
                n += c->uid == uid;
        return n;
}

unsigned nb_fake_children(void)
{
        return running;
}

static struct nbd_child_result *fake_child_result(struct nbd_child *c)
{
        return &c->res;
}

static void stop(struct nbd_child *c)
{
        if (!c->running)
                return;
        c->running = false;
        running--;
        for (struct nbd_child **p = &running_list; *p; p = &(*p)->next_running)
                if (*p == c) {
                        *p = c->next_running;
                        break;
                }
        nbd_timer_cancel(c->loop, &c->timer);
        if (reaped_fn)
                reaped_fn(reaped_data);
}

static void fake_child_free(struct nbd_child *c)
{
        if (!c)
                return;
        stop(c);
        free(c->res.out.data);
        free(c->res.err.data);
        free(c);
}

static void fake_child_abandon(struct nbd_child *c)
{
        fake_child_free(c);
}

static void on_exit_timer(void *data)
{
        struct nbd_child *c = data;

        stop(c);
        c->done(c, c->data);
}

/* Keep at most cap bytes of src in b. */
static int capture(struct nbd_buf *b, const void *src, size_t len, size_t cap, bool *truncated)
{
        size_t n = len < cap ? len : cap;

        *truncated = len > n;
        if (!n)
                return 0;
        b->data = malloc(n);
        if (!b->data)
                return -ENOMEM;
        memcpy(b->data, src, n);
        b->len = b->cap = n;
        return 0;
}

static int fake_child_spawn(struct nbd_loop *l, const struct nbd_exec_spec *s,
                            nbd_child_done_fn done, void *data, struct nbd_child **ret)
{
        const char *base = strrchr(s->path, '/') ? strrchr(s->path, '/') + 1 : s->path;
        struct nbd_child_result *res;
        struct nbd_child *c;
        int r = 0;

        if (strstr(s->path, "missing"))
                return -ENOENT;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        res = &c->res;
        res->duration_us = 1;
        if (strcmp(base, "false") == 0 || strstr(s->path, "fail")) {
                res->exit_code = 1;
                r = capture(&res->err, "failed\n", 7, s->output_cap, &res->err_truncated);
        } else if (strcmp(base, "cat") == 0) {
                r = capture(&res->out, s->stdin_data, s->stdin_len, s->output_cap,
                            &res->out_truncated);
        } else if (strcmp(base, "sleep") == 0) {
                res->timed_out = true;
                res->signal = 9;
        }
        if (r < 0) {
                fake_child_free(c);
                return r;
        }
        c->loop = l;
        c->done = done;
        c->data = data;
        c->running = true;
        running++;
        c->uid = s->uid;
        c->next_running = running_list;
        running_list = c;
        nbd_timer_arm(l, &c->timer, 0, on_exit_timer, c);
        *ret = c;
        return 0;
}

/* ---- addresses, routes, sysctls: each names an interface of the
 * world, or fails as the kernel does; the world keeps none of them (a
 * listing is empty), and every sysctl reads 0. ---- */

static int fake_iface(struct nbd_links *l, const char *name, struct nbd_err *err)
{
        if (!name[0] || fake_link_exists(l, name) > 0)
                return 0;
        return nbd_err_set(err, -ENODEV, "no interface %s", name);
}

static int fake_addr_change(struct nbd_links *l, const struct nbd_addr *a, struct nbd_err *err)
{
        return fake_iface(l, a->ifname, err);
}

static int fake_addr_dump(int ifindex, struct nbd_addr **ret, size_t *ret_n, struct nbd_err *err)
{
        struct nbd_addr *v = calloc(1, sizeof(*v));

        (void)ifindex;
        if (!v)
                return nbd_err_oom(err, "listing addresses");
        *ret = v;
        *ret_n = 0;
        return 0;
}

static void fake_addr_names(struct nbd_links *l, struct nbd_addr *v, size_t n)
{
        (void)l;
        for (size_t i = 0; i < n; i++) {
                const struct fake_if *f = world.ifs;
                while (f && f->ifindex != v[i].ifindex)
                        f = f->next;
                snprintf(v[i].ifname, IFNAMSIZ, "%s", f ? f->name : "");
        }
}

static int fake_route_change(struct nbd_links *l, const struct nbd_route *rt, struct nbd_err *err)
{
        return fake_iface(l, rt->ifname, err);
}

static int fake_route_delete(struct nbd_links *l, const struct nbd_route *rt,
                             struct nbd_route_saved **ret_saved, struct nbd_err *err)
{
        struct nbd_route_saved *s = NULL;
        int r = fake_iface(l, rt->ifname, err);

        if (r < 0 || !ret_saved)
                return r;
        s = calloc(1, sizeof(*s));
        if (!s)
                return nbd_err_oom(err, "deleting a route");
        s->rt = *rt;
        *ret_saved = s;
        return 0;
}

static int fake_route_restore(struct nbd_links *l, const struct nbd_route_saved *s,
                              struct nbd_err *err)
{
        return fake_route_change(l, &s->rt, err);
}

static void fake_route_saved_free(struct nbd_route_saved *s)
{
        free(s);
}

static int fake_route_list(struct nbd_links *l, const struct nbd_route_filter *f,
                           struct nbd_route **ret, size_t *ret_n, unsigned *ret_sent,
                           struct nbd_err *err)
{
        struct nbd_route *v = calloc(1, sizeof(*v));

        (void)l;
        (void)f;
        *ret_sent = 0;
        if (!v)
                return nbd_err_oom(err, "listing routes");
        *ret = v;
        *ret_n = 0;
        return 0;
}

static void fake_route_names(struct nbd_links *l, struct nbd_route *v, size_t n)
{
        (void)l;
        for (size_t i = 0; i < n; i++) {
                const struct fake_if *f = world.ifs;
                while (f && f->ifindex != v[i].ifindex)
                        f = f->next;
                snprintf(v[i].ifname, IFNAMSIZ, "%s", f ? f->name : "");
        }
}

static int fake_sysctl_get(const char *rel, unsigned *ret, struct nbd_err *err)
{
        (void)rel;
        (void)err;
        *ret = 0;
        return 0;
}

static int fake_sysctl_set(const char *rel, unsigned value, struct nbd_err *err)
{
        (void)rel;
        (void)value;
        (void)err;
        return 0;
}

static int fake_bropt_get(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_bropts *ret,
                          struct nbd_err *err)
{
        const struct fake_if *f = find_if(o->ifname);
        int r = fake_iface(l, o->ifname, err);

        if (r < 0 || !f)
                return r < 0 ? r : nbd_err_set(err, -ENODEV, "no interface %s", o->ifname);
        *ret = *o;
        for (int i = 0; i < NBD_BROPT_N; i++)
                ret->val[i] = o->has[i] ? f->bropt[i] : 0;
        return 0;
}

/* The fake learns nothing: a bridge knows its own address and its
 * ports' (their local entries). */
static int fake_fdb_has(struct nbd_links *l, int br_ifindex, int except_ifindex,
                        const uint8_t mac[6], bool *ret, struct nbd_err *err)
{
        const struct fake_if *br = find_ifindex(br_ifindex);
        bool found;

        (void)l;
        if (!br)
                return nbd_err_set(err, -ENODEV, "no interface %d", br_ifindex);
        found = br->ifindex != except_ifindex && memcmp(br->st.mac, mac, 6) == 0;
        for (const struct fake_if *f = world.ifs; f; f = f->next)
                found |= f->st.master == br_ifindex && f->ifindex != except_ifindex &&
                         memcmp(f->st.mac, mac, 6) == 0;
        *ret = found;
        return 0;
}

/* The fake's bridges take no address from their ports: pinned already. */
static int fake_bridge_pin_addr(struct nbd_links *l, int br_ifindex, const uint8_t mac[6],
                                struct nbd_err *err)
{
        (void)l;
        (void)mac;
        return find_ifindex(br_ifindex) ? 0
                                        : nbd_err_set(err, -ENODEV, "no interface %d", br_ifindex);
}

/* As the kernel's br_changelink(): one option after another, the delay
 * before STP, stopping at the first refused and keeping those before it.
 * On an interface named "fail..." STP cannot be turned on (as on a bridge
 * running MRP): EIO, with the delay of the same request in place. */
static int fake_bropt_set(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_err *err)
{
        struct fake_if *f = find_if(o->ifname);
        int r = fake_iface(l, o->ifname, err);

        if (r < 0 || !f)
                return r < 0 ? r : nbd_err_set(err, -ENODEV, "no interface %s", o->ifname);
        if (o->has[NBD_BROPT_FORWARD_DELAY])
                f->bropt[NBD_BROPT_FORWARD_DELAY] = o->val[NBD_BROPT_FORWARD_DELAY];
        for (int i = 0; i < NBD_BROPT_N; i++) {
                if (!o->has[i] || i == NBD_BROPT_FORWARD_DELAY)
                        continue;
                if (i == NBD_BROPT_STP && o->val[i] && refused(o->ifname))
                        return nbd_err_set(err, -EIO, "fake kernel: %s refused stp", o->ifname);
                f->bropt[i] = o->val[i];
        }
        return 0;
}

/* ---- the table the dispatcher is given ---- */

const struct nbd_backend nbd_fake_backend = {
        .links =
                {
                        .open = fake_links_open,
                        .close = fake_links_close,
                        .sync = fake_links_sync,
                        .hold = fake_links_hold,
                        .names = fake_links_names,
                        .flush_gone = fake_links_flush_gone,
                        .netlink = fake_links_netlink,
                        .tap_create = fake_link_tap_create,
                        .macvlan_create = fake_link_macvlan_create,
                        .veth_create = fake_link_veth_create,
                        .bridge_create = fake_link_bridge_create,
                        .set = fake_link_set,
                        .delete = fake_link_delete,
                        .delete_index = fake_link_delete_index,
                        .doom = fake_link_doom,
                        .undoom = fake_link_undoom,
                        .delete_group = fake_link_delete_group,
                        .is_macvtap = fake_link_is_macvtap,
                        .exists = fake_link_exists,
                        .owner = fake_link_owner,
                        .owned_by = fake_links_owned_by,
                        .ifindex = fake_links_ifindex,
                        .owned_ifindexes = fake_links_owned_ifindexes,
                        .get_state = fake_link_get_state,
                        .restore = fake_link_restore,
                        .show = fake_link_show,
                        .show_own = fake_link_show_own,
                },
        .bw =
                {
                        .open = fake_bw_open,
                        .close = fake_bw_close,
                        .mechanisms = fake_bw_mechanisms,
                        .outbound_available = fake_bw_outbound_available,
                        .set = fake_bw_set,
                        .flush = fake_bw_flush,
                        .change_begin = fake_bw_change_begin,
                        .change_nft = fake_bw_change_nft,
                        .change_end = fake_bw_change_end,
                        .change_free = fake_bw_change_free,
                        .show = fake_bw_show,
                },
        .fw =
                {
                        .open = fake_fw_open,
                        .close = fake_fw_close,
                        .on_table_deleted = fake_fw_on_table_deleted,
                        .txn_begin = fake_fw_txn_begin,
                        .txn_apply = fake_fw_txn_apply,
                        .txn_remove = fake_fw_txn_remove,
                        .txn_commit = fake_fw_txn_commit,
                        .txn_commit_prepare = fake_fw_txn_commit_prepare,
                        .txn_commit_send = fake_fw_txn_commit_send,
                        .txn_commit_finish = fake_fw_txn_commit,
                        .txn_free = fake_fw_txn_free,
                        .list = fake_fw_list,
                        .list_creators = fake_fw_list,
                        .list_creators_marked = fake_fw_list,
                        .read_creator = fake_fw_read_creator,
                        .lane_open = fake_fw_lane_open,
                        .lane_close = fake_fw_lane_close,
                        .txn_remove_bound = fake_fw_txn_remove_bound,
                        .list_rules = fake_fw_list_rules,
                        .txn_check_hash = fake_fw_txn_check_hash,
                        .txn_rebind = fake_fw_txn_rebind,
                        .txn_chains_later = fake_fw_txn_chains_later,
                        .txn_chains_wanted = fake_fw_txn_chains_wanted,
                        .txn_read_chains = fake_fw_txn_read_chains,
                        .txn_join = fake_fw_txn_join,
                },
        .spawn =
                {
                        .spawn = fake_child_spawn,
                        .result = fake_child_result,
                        .free = fake_child_free,
                        .abandon = fake_child_abandon,
                        .running = fake_children_running,
                        .running_of = fake_children_running_of,
                        .on_reaped = fake_children_on_reaped,
                },
        .net =
                {
                        .addr_add = fake_addr_change,
                        .addr_delete = fake_addr_change,
                        .addr_dump = fake_addr_dump,
                        .addr_names = fake_addr_names,
                        .route_add = fake_route_change,
                        .route_delete = fake_route_delete,
                        .route_restore = fake_route_restore,
                        .route_saved_free = fake_route_saved_free,
                        .route_list = fake_route_list,
                        .route_names = fake_route_names,
                        .sysctl_get = fake_sysctl_get,
                        .sysctl_set = fake_sysctl_set,
                        .bropt_get = fake_bropt_get,
                        .bropt_set = fake_bropt_set,
                        .fdb_has = fake_fdb_has,
                        .bridge_pin_addr = fake_bridge_pin_addr,
                },
};
