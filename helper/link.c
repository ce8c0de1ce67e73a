// SPDX-License-Identifier: LGPL-2.1-or-later
/* Interfaces; see link.h. */
#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_link.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/macvlan.h>
#include <netlink/route/link/macvtap.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/rtnl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ifmap.h"
#include "lane.h" /* nbd_test_hold_point */
#include "log.h"
#include "names.h"
#include "netlink.h"
#include "stats.h"
#include "uevent.h"

NBD_LOG_CATEGORY(link);

/* How often a template allocation may find its name taken by someone else
 * (a race with another creator) before giving up. */
#define MAX_NAME_TRIES 32

/* Link notifications are read straight from the monitor socket, up to
 * MON_SLOTS datagrams a system call (a create makes four or five of them),
 * each at most MON_SLOT_SIZE bytes: a notification carries no VF list, and
 * one that does not fit counts as lost (a rebuild follows). */
#define MON_SLOTS 16
#define MON_SLOT_SIZE 32768

struct nbd_links {
        struct nbd_ifmap ifs; /* every interface here (ifmap.h) */
        struct nbd_loop *loop;
        struct nbd_netlink nl;
        struct nbd_names *names;
        struct nbd_watch monw;
        unsigned char *mon_buf; /* MON_SLOTS * MON_SLOT_SIZE */
        /* A validation step under way (nbd_links_hold): after one read of
         * the monitor that found it empty, look-ups read it no more. */
        bool held, held_read;
        /* The kernel's uevents, for a new macvtap's device number (see
         * uevent.h); NULL: sysfs is read. The loop empties the socket
         * whenever it holds something, so a macvtap's create finds little
         * more than its own uevents there. */
        struct nbd_uevents *uev;
        struct nbd_watch uevw;
        unsigned macvtap_major; /* 0: not read yet (macvtap_major_of()) */
        char *devdir;
        unsigned node_seq;
        /* Interfaces gone since the loop last told the watchers (on_gone):
         * bandwidth (the IFB goes) and the firewall (the owners go). */
        struct {
                void (*fn)(void *data, const struct nbd_link_entry *e);
                void *data;
        } gone_watch[4];
        size_t n_gone_watch;
        struct nbd_link_entry *gone;
        size_t n_gone, cap_gone;
        struct nbd_timer gone_timer;
        /* Told at once (nbd_links_on_gone_now), and asked before each
         * create (nbd_links_before_create): supervised programs. */
        void (*gone_now)(void *data, const char *name);
        void *gone_now_data;
        int (*before_create)(void *data, struct nbd_err *err);
        void *before_create_data;
};

/* ---- the allocator's view of the kernel ---- */

/* From IFLA_LINKINFO: 1 for a macvtap, 0 for anything else, -1 unknown. */
static int link_is_macvtap(struct nlattr *linkinfo)
{
        struct nlattr *li[IFLA_INFO_MAX + 1];

        if (!linkinfo || nla_parse_nested(li, IFLA_INFO_MAX, linkinfo, NULL) < 0)
                return -1;
        return li[IFLA_INFO_KIND] && strcmp(nla_get_string(li[IFLA_INFO_KIND]), "macvtap") == 0;
}

static void run_gone(void *data)
{
        struct nbd_links *l = data;
        /* fn may make requests that read more notifications: take the list. */
        struct nbd_link_entry *gone = l->gone;
        size_t n = l->n_gone;

        l->gone = NULL;
        l->n_gone = l->cap_gone = 0;
        for (size_t w = 0; w < l->n_gone_watch; w++) {
                for (size_t i = 0; i < n; i++)
                        l->gone_watch[w].fn(l->gone_watch[w].data, &gone[i]);
                l->gone_watch[w].fn(l->gone_watch[w].data, NULL);
        }
        free(gone);
}

/* Queue a gone interface for gone_fn; a lost entry (no memory) costs an
 * IFB left behind until the next start-up's sweep, nothing worse. */
static void note_gone(struct nbd_links *l, const char *name, int ifindex)
{
        /* Before anything else reads on: the look-up that read this
         * notification may be a create's, about to make the name again. */
        if (l->gone_now)
                l->gone_now(l->gone_now_data, name);
        if (!l->n_gone_watch || !l->loop)
                return;
        if (l->n_gone == l->cap_gone) {
                size_t cap = l->cap_gone ? 2 * l->cap_gone : 8;
                struct nbd_link_entry *g = realloc(l->gone, cap * sizeof(*g));
                if (!g)
                        return;
                l->gone = g;
                l->cap_gone = cap;
        }
        snprintf(l->gone[l->n_gone].name, IFNAMSIZ, "%s", name);
        l->gone[l->n_gone++].ifindex = ifindex;
        if (!l->gone_timer.deadline_ms)
                nbd_timer_arm(l->loop, &l->gone_timer, 0, run_gone, l);
}

/* Every RTM_NEWLINK carries the whole alias, or none when there is none. */
static void set_owner(struct nbd_ifmap *m, const char *name, const char *alias)
{
        uid_t uid = 0;
        bool owned = alias && nbd_link_parse_owner_mark(alias, &uid);

        nbd_ifmap_set_owner(m, name, owned, uid);
}

/* A known ifindex under a new name: for everything keyed by name the old
 * name is gone (since Linux 6.16 a netdev base chain stays with the name,
 * and would bind the next device of that name: the owner's rules and the
 * policer must go, as when the device is deleted), and it is free again. */
static void note_renamed(struct nbd_links *l, const char *name, int ifindex)
{
        const char *known = nbd_ifmap_name_of(&l->ifs, ifindex);
        char old[IFNAMSIZ];

        if (!known || strcmp(known, name) == 0)
                return;
        snprintf(old, sizeof(old), "%s", known);
        nbd_names_mark(l->names, old, false);
        note_gone(l, old, ifindex);
}

static void on_link_hdr(struct nbd_links *l, struct nlmsghdr *h)
{
        struct nlattr *tb[IFLA_MAX + 1];
        const struct ifinfomsg *ifi;
        bool present = h->nlmsg_type == RTM_NEWLINK;

        if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK)
                return;
        if (nlmsg_parse(h, sizeof(*ifi), tb, IFLA_MAX, NULL) < 0 || !tb[IFLA_IFNAME])
                return;
        ifi = nlmsg_data(h);
        /* A bridge reports its ports in AF_BRIDGE messages of the same
         * types: an RTM_DELLINK when a port leaves it, which is no
         * interface going away (its IFB must stay), and RTM_NEWLINKs
         * without the alias, which are no news about its owner. */
        if (ifi->ifi_family != AF_UNSPEC)
                return;
        if (present)
                note_renamed(l, nla_get_string(tb[IFLA_IFNAME]), ifi->ifi_index);
        nbd_names_mark(l->names, nla_get_string(tb[IFLA_IFNAME]), present);
        nbd_ifmap_note_kind(&l->ifs, nla_get_string(tb[IFLA_IFNAME]), ifi->ifi_index, present,
                            link_is_macvtap(tb[IFLA_LINKINFO]));
        if (present)
                set_owner(&l->ifs, nla_get_string(tb[IFLA_IFNAME]),
                          tb[IFLA_IFALIAS] ? nla_get_string(tb[IFLA_IFALIAS]) : NULL);
        if (!present)
                note_gone(l, nla_get_string(tb[IFLA_IFNAME]), ifi->ifi_index);
}

/* The dump's messages (rebuild) come through libnl. */
static int on_link_msg(struct nl_msg *msg, void *arg)
{
        on_link_hdr(arg, nlmsg_hdr(msg));
        return NL_OK;
}

/* One RTM_GETLINK dump: every name there is. */
static int rebuild(struct nbd_links *l)
{
        struct nl_cb *sock_cb = nl_socket_get_cb(l->nl.req); /* a reference */
        struct nl_cb *cb = nl_cb_clone(sock_cb);
        int r = -EINTR;

        nl_cb_put(sock_cb);
        if (!cb)
                return -ENOMEM;
        nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_link_msg, l);
        /* A dump interrupted by concurrent changes is retried. */
        nbd_ifmap_clear(&l->ifs);
        for (int i = 0; i < 5 && r == -EINTR; i++) {
                nbd_names_clear(l->names);
                nbd_netlink_begin(&l->nl);
                r = nl_rtgen_request(l->nl.req, RTM_GETLINK, AF_UNSPEC, NLM_F_DUMP);
                nbd_netlink_sent(1);
                if (r >= 0)
                        r = nl_recvmsgs(l->nl.req, cb);
                r = nbd_netlink_errno(&l->nl, r);
        }
        nl_cb_put(cb);
        return r;
}

/* Read what the monitor socket holds, MON_SLOTS datagrams a call; stops at
 * the first call that returns fewer (the queue was empty then). Only the
 * kernel's datagrams count: any process of this namespace may send to the
 * socket's port, and a forged RTM_NEWLINK would mark names used or carry an
 * owner mark. Returns 0, or -ENOBUFS when notifications were lost (the
 * socket overflowed, or one did not fit its slot), or -errno. */
static int mon_read(struct nbd_links *l)
{
        struct mmsghdr mm[MON_SLOTS];
        struct iovec iov[MON_SLOTS];
        struct sockaddr_nl from[MON_SLOTS];
        int fd = nl_socket_get_fd(l->nl.mon), n;

        /* Not a do-while: its `continue` would test n == MON_SLOTS with n
         * -1, and an EINTR would end the read with the queue unread. */
        for (;;) {
                for (int i = 0; i < MON_SLOTS; i++) {
                        iov[i] = (struct iovec){l->mon_buf + (size_t)i * MON_SLOT_SIZE,
                                                MON_SLOT_SIZE};
                        from[i] = (struct sockaddr_nl){0};
                        mm[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &from[i],
                                                             .msg_namelen = sizeof(from[i]),
                                                             .msg_iov = &iov[i],
                                                             .msg_iovlen = 1}};
                }
                n = recvmmsg(fd, mm, MON_SLOTS, MSG_DONTWAIT, NULL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                for (int i = 0; i < n; i++) {
                        struct nlmsghdr *h = iov[i].iov_base;
                        int len = (int)mm[i].msg_len;
                        if (mm[i].msg_hdr.msg_flags & MSG_TRUNC)
                                return -ENOBUFS;
                        if (from[i].nl_pid != 0)
                                continue;
                        for (; nlmsg_ok(h, len); h = nlmsg_next(h, &len))
                                on_link_hdr(l, h);
                }
                if (n < MON_SLOTS)
                        return 0;
        }
}

/* A rebuild after lost notifications: what went among them (a name now
 * gone, or now another ifindex's: deleted and made again) is told to the
 * watchers as gone, as its DELLINK would have been; a program serving it
 * must not serve its successor. */
static void rebuild_and_compare(struct nbd_links *l)
{
        struct nbd_link_entry *before = calloc(l->ifs.n ? l->ifs.n : 1, sizeof(*before));
        size_t n = 0;

        if (!before)
                nbd_error("out of memory: interfaces gone while notifications were lost are "
                          "not told to their watchers");
        for (size_t b = 0; before && b < l->ifs.n_buckets; b++)
                for (const struct nbd_ifnode *i = l->ifs.buckets[b]; i && n < l->ifs.n;
                     i = i->next) {
                        snprintf(before[n].name, IFNAMSIZ, "%s", i->name);
                        before[n++].ifindex = i->ifindex;
                }
        if (rebuild(l) < 0) {
                /* A partial map would tell interfaces there as gone. */
                nbd_error("rebuilding the name bitmaps failed");
                n = 0;
        }
        for (size_t k = 0; k < n; k++)
                if (nbd_ifmap_ifindex(&l->ifs, before[k].name) != before[k].ifindex)
                        note_gone(l, before[k].name, before[k].ifindex);
        free(before);
}

/* Every look-up (does this interface exist, whose is it) reads the monitor
 * first, so that it sees what the kernel did until then. While a
 * validation step holds the links (nbd_links_hold), one read is enough:
 * validation changes nothing, and what another process does during the
 * step's milliseconds is as concurrent as what it does after it. That
 * spares a read (a system call, about 3 µs here) for every op of a batch:
 * a quarter of the validation of 4,096 FirewallEnsureHash (issue 14).
 * force: read anyway (the monitor's own watch). */
static void links_sync(struct nbd_links *l, bool force)
{
        int r;

        if (!force && l->held && l->held_read)
                return;
        r = mon_read(l);
        l->held_read = l->held && r == 0;
        if (r != -ENOBUFS)
                return;
        /* Notifications were lost. Drop the rest and read the truth again. */
        nbd_notice("link notifications overflowed; rebuilding the name bitmaps");
        while (mon_read(l) == -ENOBUFS)
                ;
        rebuild_and_compare(l);
}

void nbd_links_sync(struct nbd_links *l)
{
        links_sync(l, false);
}

void nbd_links_hold(struct nbd_links *l, bool hold)
{
        l->held = hold;
        l->held_read = false;
}

static void on_monitor(struct nbd_watch *w, uint32_t events)
{
        (void)events;
        links_sync(w->data, true);
}

/* Uevents nobody waits for: dropped, so the socket does not fill up and
 * lose the next macvtap's. */
static void on_uevents(struct nbd_watch *w, uint32_t events)
{
        struct nbd_links *l = w->data;

        (void)events;
        nbd_uevents_find_devt(l->uev, NULL, NULL, NULL);
}

/* Without uevents a macvtap's device number comes from sysfs: slower,
 * nothing else. */
static void open_uevents(struct nbd_links *l)
{
        int r = nbd_uevents_open(&l->uev);

        if (r == 0 && l->loop)
                r = nbd_loop_add(l->loop, &l->uevw, nbd_uevents_fd(l->uev), EPOLLIN, on_uevents, l);
        if (r < 0) {
                nbd_notice("no kernel uevents (%s): macvtap device numbers are read from sysfs",
                           strerror(-r));
                nbd_uevents_close(l->uev);
                l->uev = NULL;
        }
}

struct nbd_names *nbd_links_names(struct nbd_links *l)
{
        return l->names;
}

struct nbd_netlink *nbd_links_netlink(struct nbd_links *l)
{
        return &l->nl;
}

void nbd_links_on_gone(struct nbd_links *l, void (*fn)(void *data, const struct nbd_link_entry *e),
                       void *data)
{
        if (l->n_gone_watch == sizeof(l->gone_watch) / sizeof(*l->gone_watch))
                return; /* a fixed set of capabilities: never more */
        l->gone_watch[l->n_gone_watch].fn = fn;
        l->gone_watch[l->n_gone_watch++].data = data;
}

void nbd_links_on_gone_now(struct nbd_links *l, void (*fn)(void *data, const char *name),
                           void *data)
{
        l->gone_now = fn;
        l->gone_now_data = data;
}

void nbd_links_before_create(struct nbd_links *l, int (*fn)(void *data, struct nbd_err *err),
                             void *data)
{
        l->before_create = fn;
        l->before_create_data = data;
}

void nbd_links_flush_gone(struct nbd_links *l)
{
        if (!l || !l->n_gone)
                return;
        nbd_timer_cancel(l->loop, &l->gone_timer);
        run_gone(l);
}

int nbd_links_list(struct nbd_links *l, struct nbd_link_entry **ret, size_t *n)
{
        struct nbd_link_entry *e;
        size_t k = 0;

        nbd_links_sync(l);
        e = calloc(l->ifs.n ? l->ifs.n : 1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        for (size_t b = 0; b < l->ifs.n_buckets; b++)
                for (struct nbd_ifnode *i = l->ifs.buckets[b]; i && k < l->ifs.n; i = i->next) {
                        snprintf(e[k].name, IFNAMSIZ, "%s", i->name);
                        e[k++].ifindex = i->ifindex;
                }
        *ret = e;
        *n = k;
        return 0;
}

int nbd_links_open(struct nbd_loop *loop, const char *devdir, struct nbd_links **ret)
{
        struct nbd_links *l = calloc(1, sizeof(*l));
        int r;

        if (!l)
                return -ENOMEM;
        l->loop = loop;
        l->monw.fd = -1;
        l->uevw.fd = -1;
        if (devdir && !(l->devdir = strdup(devdir))) {
                r = -ENOMEM;
                goto fail;
        }
        l->mon_buf = malloc((size_t)MON_SLOTS * MON_SLOT_SIZE);
        if (!l->mon_buf) {
                r = -ENOMEM;
                goto fail;
        }
        r = nbd_names_new(&l->names);
        if (r < 0)
                goto fail;
        r = nbd_netlink_open(&l->nl);
        if (r < 0)
                goto fail;
        r = rebuild(l);
        if (r < 0)
                goto fail;
        if (loop) {
                r = nbd_loop_add(loop, &l->monw, nl_socket_get_fd(l->nl.mon), EPOLLIN, on_monitor,
                                 l);
                if (r < 0)
                        goto fail;
        }
        open_uevents(l);
        *ret = l;
        return 0;
fail:
        nbd_links_close(l);
        return r;
}

void nbd_links_close(struct nbd_links *l)
{
        if (!l)
                return;
        if (l->loop && l->monw.fd >= 0)
                nbd_loop_remove(l->loop, &l->monw);
        if (l->loop && l->uevw.fd >= 0)
                nbd_loop_remove(l->loop, &l->uevw);
        nbd_uevents_close(l->uev);
        if (l->loop)
                nbd_timer_cancel(l->loop, &l->gone_timer);
        free(l->gone);
        free(l->mon_buf);
        nbd_netlink_close(&l->nl);
        nbd_names_free(l->names);
        nbd_ifmap_free(&l->ifs);
        free(l->devdir);
        free(l);
}

/* ---- lookups ---- */

/* By ifindex when it is not 0, else by name. */
static int get_link_at(struct nbd_links *l, int ifindex, const char *name, struct rtnl_link **ret)
{
        int r;

        nbd_netlink_begin(&l->nl);
        r = rtnl_link_get_kernel(l->nl.req, ifindex, ifindex ? NULL : name, ret);
        nbd_netlink_sent(1);
        r = nbd_netlink_errno(&l->nl, r);
        return r == -ENODEV || r == -EINVAL || r == -ENOENT ? -ENODEV : r;
}

static int get_link(struct nbd_links *l, const char *name, struct rtnl_link **ret)
{
        return get_link_at(l, 0, name, ret);
}

bool nbd_link_is_macvtap(struct nbd_links *l, const char *name)
{
        const struct nbd_ifnode *n;

        nbd_links_sync(l);
        n = nbd_ifmap_get(&l->ifs, name);
        return n && n->macvtap;
}

bool nbd_links_knows(struct nbd_links *l, const char *name)
{
        return nbd_ifmap_ifindex(&l->ifs, name) != 0;
}

int nbd_link_exists(struct nbd_links *l, const char *name)
{
        nbd_links_sync(l);
        return nbd_ifmap_ifindex(&l->ifs, name) ? 1 : 0;
}

bool nbd_link_parse_owner_mark(const char *alias, uid_t *ret)
{
        size_t n = strlen(NBD_LINK_OWNER_MARK);
        unsigned long long v;
        char *end;

        if (strncmp(alias, NBD_LINK_OWNER_MARK, n) != 0 || alias[n] < '0' || alias[n] > '9')
                return false;
        errno = 0;
        v = strtoull(alias + n, &end, 10);
        /* Anything but the exact form is no mark: owned by nobody but root. */
        if (errno || *end || v > (uid_t)-2)
                return false;
        *ret = (uid_t)v;
        return true;
}

int nbd_link_owner(struct nbd_links *l, const char *name, uid_t *ret)
{
        const struct nbd_ifnode *n;

        nbd_links_sync(l);
        n = nbd_ifmap_get(&l->ifs, name);
        if (!n)
                return -ENODEV;
        if (!n->owned)
                return -ENOENT;
        *ret = n->owner;
        return 0;
}

unsigned nbd_links_owned_by(struct nbd_links *l, uid_t uid)
{
        unsigned n = 0;

        nbd_links_sync(l);
        for (size_t b = 0; b < l->ifs.n_buckets; b++)
                for (const struct nbd_ifnode *i = l->ifs.buckets[b]; i; i = i->next)
                        n += i->owned && i->owner == uid;
        return n;
}

int nbd_links_owned_ifindexes(struct nbd_links *l, uid_t uid, int **ret, size_t *ret_n)
{
        unsigned n = nbd_links_owned_by(l, uid); /* syncs */
        int *v = calloc(n ? n : 1, sizeof(*v));
        size_t k = 0;

        if (!v)
                return -ENOMEM;
        for (size_t b = 0; b < l->ifs.n_buckets; b++)
                for (const struct nbd_ifnode *i = l->ifs.buckets[b]; i && k < n; i = i->next)
                        if (i->owned && i->owner == uid && i->ifindex > 0)
                                v[k++] = i->ifindex;
        *ret = v;
        *ret_n = k;
        return 0;
}

static int ifindex_of(struct nbd_links *l, const char *name, int *ret, struct nbd_err *err)
{
        struct rtnl_link *link = NULL;
        int r;

        nbd_links_sync(l);
        *ret = nbd_ifmap_ifindex(&l->ifs, name);
        if (*ret)
                return 0;
        r = get_link(l, name, &link);
        if (r < 0)
                return nbd_err_set(err, r, "no interface %s: %s", name, strerror(-r));
        *ret = rtnl_link_get_ifindex(link);
        nbd_ifmap_note(&l->ifs, name, *ret, true);
        rtnl_link_put(link);
        return 0;
}

int nbd_links_ifindex(struct nbd_links *l, const char *name, int *ret)
{
        int ifindex = 0, r = ifindex_of(l, name, &ifindex, NULL);

        if (r == 0)
                *ret = ifindex;
        return r;
}

const char *nbd_links_name_of(struct nbd_links *l, int ifindex)
{
        return nbd_ifmap_name_of(&l->ifs, ifindex);
}

/* ---- owner marks ---- */

static void owner_mark(uid_t uid, char mark[32])
{
        snprintf(mark, 32, NBD_LINK_OWNER_MARK "%u", (unsigned)uid);
}

/* Mark an interface just made here as made for creator. The RTM_NEWLINK
 * that made it carried the alias too, but kernels drop it there
 * (rtnl_create_link() does not read IFLA_IFALIAS): unless the map shows it
 * took, it is set now, before the op reports the interface. */
static int mark_created(struct nbd_links *l, const char *name, int ifindex, uid_t creator,
                        struct nbd_err *err)
{
        const struct nbd_ifnode *n = nbd_ifmap_get(&l->ifs, name);
        char mark[32];
        int r;

        /* The map was read just now (ifindex_of): no other sync here. */
        if (n && n->owned && n->owner == creator && n->ifindex == ifindex)
                return 0;
        owner_mark(creator, mark);
        r = nbd_netlink_set_alias(&l->nl, ifindex, mark);
        if (r < 0)
                return nbd_err_set(err, r, "cannot mark %s as made for uid %u: %s", name,
                                   (unsigned)creator, strerror(-r));
        set_owner(&l->ifs, name, mark);
        return 0;
}

/* ---- creating under a name or a template ---- */

typedef int (*create_fn)(struct nbd_links *l, const char *name, void *ctx, struct nbd_err *err);

/* Reserve and create in one step: the kernel's NLM_F_EXCL (or
 * IFF_TUN_EXCL) is the reservation. A template's candidate that turns out
 * to be taken is marked used and the next one is tried. */
static int create_named(struct nbd_links *l, const char *name, create_fn fn, void *ctx,
                        char ret_name[IFNAMSIZ], struct nbd_err *err)
{
        char prefix[IFNAMSIZ], cand[IFNAMSIZ];
        int r;

        /* The callers read the notifications just before: what went is
         * known, and whatever served it must be gone before its name,
         * or any other, is made again. */
        if (l->before_create && (r = l->before_create(l->before_create_data, err)) < 0)
                return r;
        if (!nbd_is_template(name)) {
                r = fn(l, name, ctx, err);
                if (r == -EEXIST || r == -EBUSY)
                        nbd_err_set(err, -EEXIST, "interface %s already exists", name);
                if (r == 0)
                        snprintf(ret_name, IFNAMSIZ, "%s", name);
                return r == -EBUSY ? -EEXIST : r;
        }
        if (nbd_template_parse(name, prefix) < 0)
                return nbd_err_set(err, -EINVAL, "bad template '%s': a name prefix followed by %%d",
                                   name);
        /* The callers read the notifications just before (one read an op). */
        for (int tries = 0; tries < MAX_NAME_TRIES; tries++) {
                r = nbd_names_allocate(l->names, prefix, cand);
                if (r == -ENOSPC)
                        return nbd_err_set(err, r, "every name from %s0 to %s%u is in use", prefix,
                                           prefix, nbd_names_max_suffix(prefix));
                if (r < 0)
                        return nbd_err_set(err, r, "no name from %s: %s", name, strerror(-r));
                r = fn(l, cand, ctx, err);
                if (r == -EEXIST || r == -EBUSY) {
                        /* Taken behind our back, or is it another name the op
                         * needs (a veth's peer)? Only the first is retried. */
                        if (nbd_link_exists(l, cand) == 0) {
                                nbd_names_mark(l->names, cand, false);
                                return nbd_err_set(
                                        err, -EEXIST,
                                        "another interface this op names already exists");
                        }
                        nbd_debug("%s was taken behind our back; trying the next name", cand);
                        continue;
                }
                if (r < 0) {
                        nbd_names_mark(l->names, cand, false);
                        return r;
                }
                snprintf(ret_name, IFNAMSIZ, "%s", cand);
                return 0;
        }
        return nbd_err_set(err, -EEXIST, "%d names for %s were taken by others while we tried them",
                           MAX_NAME_TRIES, name);
}

/* ---- taps ---- */

struct tap_ctx {
        const struct nbd_tap_spec *s;
        int *fds;
        unsigned nfds;
};

static int tap_open_queue(const char *name, short flags, int *ret_fd)
{
        struct ifreq ifr = {0};
        int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
        ifr.ifr_flags = flags;
        if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

static void close_fds(int *fds, unsigned *n)
{
        while (*n > 0)
                close(fds[--*n]);
}

static int tap_create_one(struct nbd_links *l, const char *name, void *data, struct nbd_err *err)
{
        struct tap_ctx *t = data;
        const struct nbd_tap_spec *s = t->s;
        unsigned queues = s->queues > 1 ? s->queues : 1;
        short flags = IFF_TAP | IFF_NO_PI | (s->vnet_hdr ? IFF_VNET_HDR : 0) |
                      (queues > 1 ? IFF_MULTI_QUEUE : 0);
        int r, fd = -1; /* set by tap_open_queue(); gcc 12 cannot tell */

        (void)l;
        /* IFF_TUN_EXCL: an existing device is never silently attached to. */
        r = tap_open_queue(name, flags | IFF_TUN_EXCL, &fd);
        if (r < 0) {
                if (r != -EBUSY && r != -EEXIST)
                        nbd_err_set(err, r, "cannot create tap %s: %s", name, strerror(-r));
                return r;
        }
        t->fds[t->nfds++] = fd;
        for (unsigned q = 1; q < queues; q++) {
                r = tap_open_queue(name, flags, &fd);
                if (r < 0) {
                        nbd_err_set(err, r, "cannot attach queue %u of tap %s: %s", q, name,
                                    strerror(-r));
                        goto fail;
                }
                t->fds[t->nfds++] = fd;
        }
        if (s->set_owner && (ioctl(t->fds[0], TUNSETOWNER, (unsigned long)s->uid) < 0 ||
                             ioctl(t->fds[0], TUNSETGROUP, (unsigned long)s->gid) < 0)) {
                r = -errno;
                nbd_err_set(err, r, "cannot set the owner of tap %s: %s", name, strerror(-r));
                goto fail;
        }
        if (s->persist && ioctl(t->fds[0], TUNSETPERSIST, 1UL) < 0) {
                r = -errno;
                nbd_err_set(err, r, "cannot make tap %s persistent: %s", name, strerror(-r));
                goto fail;
        }
        return 0;
fail:
        close_fds(t->fds, &t->nfds);
        return r;
}

int nbd_link_tap_create(struct nbd_links *l, const struct nbd_tap_spec *s,
                        struct nbd_link_made *ret, struct nbd_err *err)
{
        struct tap_ctx t = {.s = s, .fds = ret->fds};
        int r;

        nbd_links_sync(l);
        r = create_named(l, s->name, tap_create_one, &t, ret->ifname, err);

        if (r < 0)
                return r;
        ret->nfds = t.nfds;
        r = ifindex_of(l, ret->ifname, &ret->ifindex, err);
        if (r == 0)
                r = mark_created(l, ret->ifname, ret->ifindex, s->creator, err);
        if (r < 0) {
                /* The error that stands is the one above: no err for the delete. */
                if (s->persist)
                        nbd_link_delete(l, ret->ifname, NULL);
                close_fds(ret->fds, &ret->nfds);
        }
        return r;
}

/* ---- netlink-made kinds ---- */

static int add_link(struct nbd_links *l, struct rtnl_link *link, const char *name,
                    struct nbd_err *err, const char *what)
{
        struct nl_msg *msg = NULL;
        int r;

        rtnl_link_set_name(link, name);
        nbd_netlink_begin(&l->nl);
        r = rtnl_link_build_add_request(link, NLM_F_CREATE | NLM_F_EXCL, &msg);
        r = r < 0 ? nbd_netlink_errno(&l->nl, r) : nbd_netlink_call(&l->nl, msg);
        nlmsg_free(msg);
        nbd_netlink_sent(1);
        if (r < 0 && r != -EEXIST)
                nbd_err_set(err, r, "cannot create %s %s: %s", what, name, strerror(-r));
        return r;
}

static const uint32_t macvlan_modes[] = {
        [NBD_MACVLAN_BRIDGE] = MACVLAN_MODE_BRIDGE,
        [NBD_MACVLAN_VEPA] = MACVLAN_MODE_VEPA,
        [NBD_MACVLAN_PRIVATE] = MACVLAN_MODE_PRIVATE,
        [NBD_MACVLAN_PASSTHRU] = MACVLAN_MODE_PASSTHRU,
};

struct macvlan_ctx {
        const struct nbd_macvlan_spec *s;
        int parent;
        char mark[32];
};

static int macvlan_create_one(struct nbd_links *l, const char *name, void *data,
                              struct nbd_err *err)
{
        struct macvlan_ctx *m = data;
        struct rtnl_link *link = m->s->tap ? rtnl_link_macvtap_alloc() : rtnl_link_macvlan_alloc();
        struct nl_addr *addr = NULL;
        int r;

        if (!link) {
                r = nbd_err_oom(err, "making a macvlan");
                goto out;
        }
        rtnl_link_set_link(link, m->parent);
        rtnl_link_set_ifalias(link, m->mark);
        if (m->s->tap)
                rtnl_link_macvtap_set_mode(link, macvlan_modes[m->s->mode]);
        else
                rtnl_link_macvlan_set_mode(link, macvlan_modes[m->s->mode]);
        if (m->s->has_mac) {
                addr = nl_addr_build(AF_LLC, m->s->mac, 6);
                if (!addr) {
                        r = nbd_err_oom(err, "making a macvlan");
                        goto out;
                }
                rtnl_link_set_addr(link, addr);
        }
        r = add_link(l, link, name, err, m->s->tap ? "macvtap" : "macvlan");
out:
        nl_addr_put(addr);
        rtnl_link_put(link);
        return r;
}

/* One open of a macvtap's character device is one queue (the tap driver
 * adds a queue per open file, as QEMU's multiqueue expects; libvirt opens
 * /dev/tapN once per queue too). The driver turns vnet headers on for
 * every open: make the flag what was asked, both ways. Its TUNSETIFF takes
 * exactly IFF_TAP | IFF_NO_PI and the feature bits, and sets those: one
 * call, no TUNGETIFF first. */
static int open_macvtap_queue(const char *node, const char *name, bool vnet_hdr, int *ret_fd,
                              struct nbd_err *err)
{
        struct ifreq ifr = {.ifr_flags =
                                    (short)(IFF_TAP | IFF_NO_PI | (vnet_hdr ? IFF_VNET_HDR : 0))};
        int fd = open(node, O_RDWR | O_CLOEXEC), r;

        if (fd < 0) {
                r = -errno;
                return nbd_err_set(err, r, "cannot open the character device of %s: %s", name,
                                   strerror(-r));
        }
        if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
                r = -errno;
                close(fd);
                return nbd_err_set(err, r, "cannot set vnet headers on %s: %s", name, strerror(-r));
        }
        *ret_fd = fd;
        return 0;
}

/* queues opens of node into fds[]: all of them, or none. */
static int open_macvtap_queues(const char *node, const char *name, bool vnet_hdr, unsigned queues,
                               int *fds, struct nbd_err *err)
{
        unsigned n = 0;
        int r = 0;

        while (n < queues && (r = open_macvtap_queue(node, name, vnet_hdr, &fds[n], err)) == 0)
                n++;
        if (r < 0)
                close_fds(fds, &n);
        return r;
}

/* The major number of macvtaps' character devices, from /proc/devices,
 * read once the first macvtap exists (the driver may be a module, loaded
 * by that create): 0, or -errno. */
static int macvtap_major_of(struct nbd_links *l, unsigned *ret)
{
        char buf[16384]; /* 314 bytes here; one read() of a seq_file may return less */
        size_t len = 0;
        ssize_t n;
        int fd, r;

        if (l->macvtap_major) {
                *ret = l->macvtap_major;
                return 0;
        }
        fd = open("/proc/devices", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (;;) {
                n = read(fd, buf + len, sizeof(buf) - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0 || (len += (size_t)n) == sizeof(buf) - 1)
                        break;
        }
        r = n < 0 ? -errno : 0;
        close(fd);
        if (r < 0)
                return r;
        buf[len] = '\0';
        r = nbd_chrdev_major(buf, "macvtap", &l->macvtap_major);
        if (r == 0)
                *ret = l->macvtap_major;
        return r;
}

/* A device number from a uevent, checked to be a macvtap's: whatever
 * else went wrong, the helper opens no other kind of device. */
static bool from_uevent(struct nbd_links *l, const char *suffix, dev_t *ret)
{
        unsigned want = 0;
        dev_t devt = 0;

        if (!l->uev || nbd_uevents_find_devt(l->uev, "macvtap", suffix, &devt) < 0 ||
            macvtap_major_of(l, &want) < 0 || major(devt) != want)
                return false;
        *ret = devt;
        return true;
}

/* The device number of the character device of the macvtap name
 * (ifindex) just made: from its "add" uevent when the socket has it (see
 * uevent.h), else from sysfs (which must show this network namespace: the
 * helper mounts its own, see main.c). */
static int macvtap_devt(struct nbd_links *l, const char *name, int ifindex, dev_t *ret,
                        struct nbd_err *err)
{
        char path[128], buf[32];
        unsigned maj, min;
        int fd, r;
        ssize_t n;

        nbd_test_hold_point("MACVTAP_MADE");
        snprintf(path, sizeof(path), "/%s/macvtap/tap%d", name, ifindex);
        if (from_uevent(l, path, ret))
                return 0;
        nbd_stat_inc(NBD_STAT_MACVTAP_SYSFS_READS);
        snprintf(path, sizeof(path), "/sys/class/net/%s/macvtap/tap%d/dev", name, ifindex);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                return nbd_err_set(err, r,
                                   "cannot find the character device of %s (%s): sysfs must show "
                                   "this network namespace",
                                   name, strerror(-r));
        }
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0 || (buf[n] = '\0', sscanf(buf, "%u:%u", &maj, &min) != 2))
                return nbd_err_set(err, -EIO, "cannot read %s", path);
        *ret = makedev(maj, min);
        return 0;
}

/* The macvtap's character device (macvtap_devt()), made as a node in the
 * helper's private directory, opened once per queue, and removed again:
 * no udev, and no /dev/tapN that a device of another namespace could
 * own. */
static int open_macvtap(struct nbd_links *l, const char *name, int ifindex, bool vnet_hdr,
                        unsigned queues, int *fds, struct nbd_err *err)
{
        char node[PATH_MAX];
        struct stat st;
        dev_t devt = 0;
        int r = macvtap_devt(l, name, ifindex, &devt, err);

        if (r < 0)
                return r;
        if (!l->devdir) {
                /* No private directory: /dev/tapN only if it is this very device. */
                snprintf(node, sizeof(node), "/dev/tap%d", ifindex);
                if (stat(node, &st) < 0 || !S_ISCHR(st.st_mode) || st.st_rdev != devt) {
                        return nbd_err_set(
                                err, -ENODEV,
                                "no device node for %s: %s is missing or belongs to another device",
                                name, node);
                }
                return open_macvtap_queues(node, name, vnet_hdr, queues, fds, err);
        }
        snprintf(node, sizeof(node), "%s/tap%d.%u", l->devdir, ifindex, l->node_seq++);
        if (mknod(node, S_IFCHR | 0600, devt) < 0) {
                r = -errno;
                return nbd_err_set(err, r, "cannot make a device node for %s: %s", name,
                                   strerror(-r));
        }
        r = open_macvtap_queues(node, name, vnet_hdr, queues, fds, err);
        unlink(node);
        return r;
}

int nbd_link_macvlan_create(struct nbd_links *l, const struct nbd_macvlan_spec *s,
                            struct nbd_link_made *ret, struct nbd_err *err)
{
        struct macvlan_ctx m = {.s = s};
        int r;

        owner_mark(s->creator, m.mark);
        /* This reads the notifications for the whole op; create_named()
         * does not read them again. */
        r = ifindex_of(l, s->parent, &m.parent, err);
        if (r < 0)
                return r;
        r = create_named(l, s->name, macvlan_create_one, &m, ret->ifname, err);
        if (r < 0)
                return r;
        r = ifindex_of(l, ret->ifname, &ret->ifindex, err);
        if (r == 0)
                r = mark_created(l, ret->ifname, ret->ifindex, s->creator, err);
        if (r == 0 && s->tap) {
                unsigned queues = s->queues > 1 ? s->queues : 1;

                r = open_macvtap(l, ret->ifname, ret->ifindex, s->vnet_hdr, queues, ret->fds, err);
                if (r == 0)
                        ret->nfds = queues;
        }
        if (r < 0)
                nbd_link_delete(l, ret->ifname, NULL); /* the error above stands */
        return r;
}

struct veth_ctx {
        const struct nbd_veth_spec *s;
        char peer[IFNAMSIZ];
        char mark[32];
};

static int veth_create_one(struct nbd_links *l, const char *name, void *data, struct nbd_err *err)
{
        struct veth_ctx *v = data;
        struct rtnl_link *link = rtnl_link_veth_alloc(), *peer;
        int r;

        if (!link)
                return nbd_err_oom(err, "making a veth");
        peer = rtnl_link_veth_get_peer(link);
        rtnl_link_set_name(peer, v->peer);
        rtnl_link_set_ifalias(peer, v->mark);
        rtnl_link_set_ifalias(link, v->mark);
        if (v->s->peer_netns_fd >= 0)
                rtnl_link_set_ns_fd(peer, v->s->peer_netns_fd);
        rtnl_link_put(peer);
        r = add_link(l, link, name, err, "veth");
        rtnl_link_put(link);
        return r;
}

/* The peer is marked too when it stays here. One moved to another
 * namespace keeps only what the create asked (kernels drop the alias
 * there): the helper cannot enter that namespace (it holds no
 * CAP_SYS_ADMIN), and IFLA_TARGET_NETNSID on a change does not reach into
 * it but moves the device named by ifindex here over there. The helper
 * never acts on it anyway: it acts on interfaces of its own namespace. */
static int mark_peer(struct nbd_links *l, const struct veth_ctx *v, struct nbd_err *err)
{
        int r, peer;

        if (v->s->peer_netns_fd >= 0)
                return 0;
        r = ifindex_of(l, v->peer, &peer, err);
        return r < 0 ? r : mark_created(l, v->peer, peer, v->s->creator, err);
}

int nbd_link_veth_create(struct nbd_links *l, const struct nbd_veth_spec *s,
                         struct nbd_link_made *ret, struct nbd_err *err)
{
        struct veth_ctx v = {.s = s};
        int r;

        owner_mark(s->creator, v.mark);
        snprintf(v.peer, IFNAMSIZ, "%s", s->peer);
        nbd_links_sync(l);
        r = create_named(l, s->name, veth_create_one, &v, ret->ifname, err);
        if (r == -EEXIST && !nbd_is_template(s->name))
                nbd_err_set(err, r, "interface %s or its peer %s already exists", s->name, s->peer);
        else if (r == -EEXIST)
                nbd_err_set(err, r, "the peer name %s is taken%s", s->peer,
                            s->peer_netns_fd >= 0 ? " in the target namespace" : "");
        if (r < 0)
                return r;
        snprintf(ret->peer, IFNAMSIZ, "%s", v.peer);
        r = ifindex_of(l, ret->ifname, &ret->ifindex, err);
        if (r == 0)
                r = mark_created(l, ret->ifname, ret->ifindex, s->creator, err);
        if (r == 0)
                r = mark_peer(l, &v, err);
        if (r < 0)
                nbd_link_delete(l, ret->ifname, NULL); /* the error above stands */
        return r;
}

static int bridge_create_one(struct nbd_links *l, const char *name, void *data, struct nbd_err *err)
{
        struct rtnl_link *link = rtnl_link_alloc();
        int r;

        if (!link || rtnl_link_set_type(link, "bridge") < 0) {
                rtnl_link_put(link);
                return nbd_err_oom(err, "making a bridge");
        }
        rtnl_link_set_ifalias(link, data);
        r = add_link(l, link, name, err, "bridge");
        rtnl_link_put(link);
        return r;
}

int nbd_link_bridge_create(struct nbd_links *l, const char *name, uid_t creator,
                           struct nbd_link_made *ret, struct nbd_err *err)
{
        char mark[32];
        int r;

        owner_mark(creator, mark);
        nbd_links_sync(l);
        r = create_named(l, name, bridge_create_one, mark, ret->ifname, err);
        if (r < 0)
                return r;
        r = ifindex_of(l, ret->ifname, &ret->ifindex, err);
        if (r == 0)
                r = mark_created(l, ret->ifname, ret->ifindex, creator, err);
        if (r < 0)
                nbd_link_delete(l, ret->ifname, NULL); /* the error above stands */
        return r;
}

/* ---- changing and deleting ---- */

static int apply_change(struct nbd_links *l, struct rtnl_link *orig, struct rtnl_link *changes)
{
        int r;

        nbd_netlink_begin(&l->nl);
        r = rtnl_link_change(l->nl.req, orig, changes, 0);
        nbd_netlink_sent(1);
        return nbd_netlink_errno(&l->nl, r);
}

int nbd_link_set(struct nbd_links *l, const struct nbd_link_change *c, int *ret_ifindex,
                 struct nbd_err *err)
{
        struct rtnl_link *orig = NULL, *changes = rtnl_link_alloc();
        struct nl_addr *addr = NULL;
        int r, master;

        if (!changes)
                return nbd_err_oom(err, "changing an interface");
        r = get_link(l, c->name, &orig);
        if (r < 0) {
                nbd_err_set(err, r, "no interface %s: %s", c->name, strerror(-r));
                goto out;
        }
        if (c->up == 1)
                rtnl_link_set_flags(changes, IFF_UP);
        else if (c->up == 0)
                rtnl_link_unset_flags(changes, IFF_UP);
        if (c->mtu)
                rtnl_link_set_mtu(changes, c->mtu);
        if (c->has_mac) {
                addr = nl_addr_build(AF_LLC, c->mac, 6);
                if (!addr) {
                        r = nbd_err_oom(err, "changing an interface");
                        goto out;
                }
                rtnl_link_set_addr(changes, addr);
        }
        if (c->master) {
                r = ifindex_of(l, c->master, &master, err);
                if (r < 0)
                        goto out;
                rtnl_link_set_master(changes, master);
        } else if (c->nomaster) {
                rtnl_link_set_master(changes, 0);
        }
        r = apply_change(l, orig, changes);
        if (r < 0) {
                nbd_err_set(err, r, "cannot change %s: %s", c->name, strerror(-r));
                goto out;
        }
        *ret_ifindex = rtnl_link_get_ifindex(orig);
out:
        nl_addr_put(addr);
        rtnl_link_put(orig);
        rtnl_link_put(changes);
        return r;
}

int nbd_link_get_state(struct nbd_links *l, const char *name, struct nbd_link_state *ret)
{
        struct rtnl_link *link = NULL;
        struct nl_addr *addr;
        int r = get_link(l, name, &link);

        if (r < 0)
                return r;
        memset(ret, 0, sizeof(*ret));
        ret->up = rtnl_link_get_flags(link) & IFF_UP;
        ret->mtu = rtnl_link_get_mtu(link);
        ret->master = rtnl_link_get_master(link);
        ret->ifindex = rtnl_link_get_ifindex(link);
        addr = rtnl_link_get_addr(link);
        if (addr && nl_addr_get_len(addr) == 6) {
                memcpy(ret->mac, nl_addr_get_binary_addr(addr), 6);
                ret->has_mac = true;
        }
        rtnl_link_put(link);
        return 0;
}

/* Only what differs from the link as it is now is sent: the kernel takes
 * even an unchanged MAC address as one set by hand (NET_ADDR_SET), and a
 * bridge whose address is set no longer follows its ports'; an unchanged
 * attribute the device cannot take (a MAC on a device without one) would
 * fail the whole request. Nothing differs: no request. */
int nbd_link_restore(struct nbd_links *l, const char *name, const struct nbd_link_state *st)
{
        struct rtnl_link *orig = NULL, *changes = rtnl_link_alloc();
        struct nl_addr *addr = NULL, *now;
        bool any = false;
        int r = -ENOMEM;

        if (!changes)
                goto out;
        r = get_link_at(l, st->ifindex, name, &orig);
        if (r < 0)
                goto out;
        if (st->up != !!(rtnl_link_get_flags(orig) & IFF_UP)) {
                if (st->up)
                        rtnl_link_set_flags(changes, IFF_UP);
                else
                        rtnl_link_unset_flags(changes, IFF_UP);
                any = true;
        }
        if (st->mtu != rtnl_link_get_mtu(orig)) {
                rtnl_link_set_mtu(changes, st->mtu);
                any = true;
        }
        now = rtnl_link_get_addr(orig);
        if (st->has_mac && now && nl_addr_get_len(now) == 6 &&
            memcmp(nl_addr_get_binary_addr(now), st->mac, 6) != 0) {
                addr = nl_addr_build(AF_LLC, st->mac, 6);
                if (!addr) {
                        r = -ENOMEM;
                        goto out;
                }
                rtnl_link_set_addr(changes, addr);
                any = true;
        }
        if (st->master != rtnl_link_get_master(orig)) {
                rtnl_link_set_master(changes, st->master);
                any = true;
        }
        r = any ? apply_change(l, orig, changes) : 0;
out:
        nl_addr_put(addr);
        rtnl_link_put(orig);
        rtnl_link_put(changes);
        return r;
}

static int delete_at(struct nbd_links *l, int ifindex, const char *name, struct nbd_err *err)
{
        struct rtnl_link *link = rtnl_link_alloc();
        int r;

        if (!link)
                return nbd_err_oom(err, "deleting an interface");
        if (ifindex)
                rtnl_link_set_ifindex(link, ifindex);
        else
                rtnl_link_set_name(link, name);
        nbd_netlink_begin(&l->nl);
        r = rtnl_link_delete(l->nl.req, link);
        nbd_netlink_sent(1);
        r = nbd_netlink_errno(&l->nl, r);
        rtnl_link_put(link);
        if (r == -ENODEV || r == -EINVAL)
                r = -ENODEV;
        if (r < 0)
                nbd_err_set(err, r, "cannot delete %s: %s", name, strerror(-r));
        return r;
}

int nbd_link_delete(struct nbd_links *l, const char *name, struct nbd_err *err)
{
        return delete_at(l, 0, name, err);
}

int nbd_link_delete_index(struct nbd_links *l, int ifindex, const char *name, struct nbd_err *err)
{
        if (ifindex <= 0)
                return nbd_err_set(err, -EINVAL, "cannot delete %s: no ifindex", name);
        return delete_at(l, ifindex, name, err);
}

/* ---- deletion in batches ---- */

int nbd_link_doom(struct nbd_links *l, const char *name, uint32_t group,
                  struct nbd_link_doomed *ret, struct nbd_err *err)
{
        struct rtnl_link *orig = NULL, *change = rtnl_link_alloc();
        struct nbd_link_doomed d = {0};
        int r;

        if (!change)
                return nbd_err_oom(err, "deleting an interface");
        r = get_link(l, name, &orig);
        if (r < 0) {
                nbd_err_set(err, r, "cannot delete %s: %s", name, strerror(-r));
                goto out;
        }
        /* The kernel deletes only devices of a link kind; one other in the
         * group would fail the whole group's deletion. */
        if (!rtnl_link_get_type(orig)) {
                r = nbd_err_set(err, -EOPNOTSUPP, "cannot delete %s: %s", name,
                                strerror(EOPNOTSUPP));
                goto out;
        }
        snprintf(d.name, sizeof(d.name), "%s", name);
        d.ifindex = rtnl_link_get_ifindex(orig);
        d.group = rtnl_link_get_group(orig);
        rtnl_link_set_group(change, group);
        r = apply_change(l, orig, change);
        if (r == -EINVAL)
                r = -ENODEV; /* gone since it was read */
        if (r < 0) {
                nbd_err_set(err, r, "cannot delete %s: %s", name, strerror(-r));
                goto out;
        }
        *ret = d;
out:
        rtnl_link_put(orig);
        rtnl_link_put(change);
        return r;
}

int nbd_link_undoom(struct nbd_links *l, const struct nbd_link_doomed *d)
{
        struct rtnl_link *orig = rtnl_link_alloc(), *change = rtnl_link_alloc();
        int r = -ENOMEM;

        if (orig && change) {
                rtnl_link_set_ifindex(orig, d->ifindex);
                rtnl_link_set_group(change, d->group);
                r = apply_change(l, orig, change);
        }
        rtnl_link_put(orig);
        rtnl_link_put(change);
        return r;
}

/* The ack of request seq on fd: its errno (0 or negative). */
static int read_ack(int fd, uint32_t seq)
{
        char buf[4096] __attribute__((aligned(NLMSG_ALIGNTO)));

        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
                     h = NLMSG_NEXT(h, n)) {
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        if (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_seq == seq)
                                return e->error;
                }
        }
}

/* One RTM_GETLINK dump on fd, request seq, read into buf[cap]: -EBUSY (err
 * names the intruder) when a device in `group` is not one of
 * ifindexes[n], -EINTR when the kernel flagged the dump as interrupted by
 * a change (NLM_F_DUMP_INTR: a device may be missing from it), 0 or
 * -errno. The dump is read to its end in every case. */
static int group_dump(int fd, uint32_t seq, char *buf, size_t cap, uint32_t group,
                      const int *ifindexes, size_t n, struct nbd_err *err)
{
        /* Without statistics (RTEXT_FILTER_SKIP_STATS): the check reads
         * only each device's group, and the kernel may then skip summing
         * per-CPU counters (IPv6's at least). */
        struct {
                struct nlmsghdr h;
                struct ifinfomsg ifi;
                struct rtattr rta;
                uint32_t ext_mask;
        } req = {.h = {.nlmsg_len = sizeof(req),
                       .nlmsg_type = RTM_GETLINK,
                       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
                       .nlmsg_seq = seq},
                 .ifi = {.ifi_family = AF_UNSPEC},
                 .rta = {.rta_len = RTA_LENGTH(sizeof(uint32_t)), .rta_type = IFLA_EXT_MASK},
                 .ext_mask = RTEXT_FILTER_SKIP_STATS};
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        bool done = false, intr = false;
        int r = 0;

        if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
                return nbd_err_set(err, -errno, "cannot list interfaces: %s", strerror(errno));
        while (!done) {
                /* MSG_TRUNC: the datagram's whole length, to see one cut. */
                ssize_t got = recv(fd, buf, cap, MSG_TRUNC);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got < 0)
                        return nbd_err_set(err, -errno, "cannot list interfaces: %s",
                                           strerror(errno));
                if ((size_t)got > cap)
                        /* Its devices unread: the check cannot be made. */
                        return nbd_err_set(err, -ENOBUFS,
                                           "cannot list interfaces: a reply of %zd bytes did not "
                                           "fit: nothing deleted",
                                           got);
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)got);
                     h = NLMSG_NEXT(h, got)) {
                        const struct ifinfomsg *ifi = NLMSG_DATA(h);
                        int len;
                        if (h->nlmsg_seq != seq)
                                continue;
                        if (h->nlmsg_flags & NLM_F_DUMP_INTR)
                                intr = true;
                        if (h->nlmsg_type == NLMSG_DONE) {
                                /* A dump the kernel could not finish ends
                                 * in DONE too, with its errno. */
                                int e = h->nlmsg_len >= NLMSG_LENGTH(sizeof(int))
                                                ? *(const int *)NLMSG_DATA(h)
                                                : 0;
                                if (e < 0 && r == 0)
                                        r = nbd_err_set(err, e, "cannot list interfaces: %s",
                                                        strerror(-e));
                                done = true;
                                break;
                        }
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                return nbd_err_set(err, e->error ? e->error : -EIO,
                                                   "cannot list interfaces: %s",
                                                   strerror(e->error ? -e->error : EIO));
                        }
                        if (h->nlmsg_type != RTM_NEWLINK || r < 0)
                                continue;
                        len = (int)IFLA_PAYLOAD(h);
                        for (const struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len);
                             a = RTA_NEXT(a, len)) {
                                bool ours = false;
                                if (a->rta_type != IFLA_GROUP ||
                                    RTA_PAYLOAD(a) < sizeof(uint32_t) ||
                                    *(const uint32_t *)RTA_DATA(a) != group)
                                        continue;
                                for (size_t i = 0; i < n && !ours; i++)
                                        ours = ifindexes[i] == ifi->ifi_index;
                                if (!ours)
                                        /* Read the dump to its end first. */
                                        r = nbd_err_set(err, -EBUSY,
                                                        "link group %#x also holds interface "
                                                        "%d, which this request did not put "
                                                        "there: nothing deleted",
                                                        (unsigned)group, ifi->ifi_index);
                        }
                }
        }
        return r == 0 && intr ? -EINTR : r;
}

/* Whether every device in `group` is one of ifindexes[n]: a device that
 * someone else put there (an administrator's group, another helper's run
 * in this namespace) must not go with ours. A dump that a change
 * interrupted may have missed one: it is read again, a few times. 0,
 * -EBUSY (err names the intruder), -EAGAIN or -errno. */
#define GROUP_DUMP_TRIES 5

static int group_holds_only(int fd, uint32_t group, const int *ifindexes, size_t n,
                            struct nbd_err *err)
{
        size_t cap = 65536;
        char *buf = malloc(cap);
        int r = -EINTR;

        if (!buf)
                return nbd_err_oom(err, "checking a deletion's link group");
        for (uint32_t seq = 2; seq < 2 + GROUP_DUMP_TRIES && r == -EINTR; seq++)
                r = group_dump(fd, seq, buf, cap, group, ifindexes, n, err);
        if (r == -EINTR)
                r = nbd_err_set(err, -EAGAIN,
                                "interfaces kept changing while link group %#x was checked: "
                                "nothing deleted",
                                (unsigned)group);
        free(buf);
        return r;
}

/* No logging and no counting here: this runs on the links' lane, which
 * touches its arguments and a socket of its own, opened for the request
 * (the loop goes on using l->nl meanwhile; and at rest the helper holds
 * no more fds than before). */
int nbd_link_delete_group(struct nbd_links *l, uint32_t group, const int *ifindexes, size_t n,
                          struct nbd_err *err)
{
        struct {
                struct nlmsghdr h;
                struct ifinfomsg ifi;
                struct rtattr rta;
                uint32_t group;
        } req = {
                .h = {.nlmsg_len = sizeof(req),
                      .nlmsg_type = RTM_DELLINK,
                      .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK,
                      .nlmsg_seq = 1},
                .ifi = {.ifi_family = AF_UNSPEC},
                /* No index and no name: every device of the group. */
                .rta = {.rta_len = RTA_LENGTH(sizeof(uint32_t)), .rta_type = IFLA_GROUP},
                .group = group,
        };
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), r;

        (void)l;
        if (fd < 0)
                return nbd_err_set(err, -errno, "cannot open a socket to delete interfaces: %s",
                                   strerror(errno));
        r = group_holds_only(fd, group, ifindexes, n, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
                r = -errno;
        else
                r = read_ack(fd, req.h.nlmsg_seq);
        close(fd);
        if (r < 0)
                nbd_err_set(err, r, "cannot delete the interfaces of link group %#x: %s",
                            (unsigned)group, strerror(-r));
        return r;
}
