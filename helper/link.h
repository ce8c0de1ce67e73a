// SPDX-License-Identifier: LGPL-2.1-or-later
/* Interfaces: create, change and delete them over rtnetlink (libnl-route-3),
 * taps through /dev/net/tun, macvtap character devices opened without udev.
 * Knows nothing of the wire format. Every function returns 0 or -errno; one
 * that takes a struct nbd_err fills it on every failure path, out of memory
 * included (err may be NULL: only the errno is wanted). */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "loop.h"

#define NBD_LINK_MAX_QUEUES 16
/* Every interface netbroker makes carries, in its alias (IFLA_IFALIAS), the
 * uid whose request made it: "netbroker:uid=1000", root's "netbroker:uid=0".
 * The kernel keeps it, so a helper started later knows every owner; only
 * CAP_NET_ADMIN can change it. */
#define NBD_LINK_OWNER_MARK "netbroker:uid="

struct nbd_links;

enum nbd_macvlan_mode {
        NBD_MACVLAN_BRIDGE,
        NBD_MACVLAN_VEPA,
        NBD_MACVLAN_PRIVATE,
        NBD_MACVLAN_PASSTHRU,
};

struct nbd_tap_spec {
        const char *name; /* name or template */
        bool vnet_hdr;
        unsigned queues; /* 0 or 1: one queue */
        bool persist;
        bool set_owner;
        uid_t uid;
        gid_t gid;
        uid_t creator; /* whose request: its owner mark */
};

struct nbd_macvlan_spec {
        const char *name; /* name or template */
        const char *parent;
        enum nbd_macvlan_mode mode;
        bool has_mac;
        uint8_t mac[6];
        bool tap; /* macvtap: open its character device */
        bool vnet_hdr; /* macvtap only */
        uid_t creator;
        unsigned queues; /* macvtap: opens of its device, one fd each; 0 or 1: one */
};

struct nbd_veth_spec {
        const char *name;
        const char *peer;
        int peer_netns_fd; /* -1: keep the peer here */
        uid_t creator; /* marks both ends (a peer moved elsewhere: see link.c) */
};

struct nbd_link_change {
        const char *name;
        int up; /* -1 unchanged, 0 down, 1 up */
        unsigned mtu; /* 0 unchanged */
        bool has_mac;
        uint8_t mac[6];
        const char *master; /* NULL unchanged */
        bool nomaster;
};

/* What a create op made, marked as made for its spec's creator (a mark
 * that cannot be set fails the op, and the device goes again). fds are the
 * caller's to pass on and close. */
struct nbd_link_made {
        char ifname[IFNAMSIZ];
        int ifindex;
        char peer[IFNAMSIZ];
        int fds[NBD_LINK_MAX_QUEUES];
        unsigned nfds;
};

/* A link's state before a change, to put it back on rollback. */
struct nbd_link_state {
        bool up;
        unsigned mtu;
        bool has_mac; /* mac: the device has a 6-byte address */
        uint8_t mac[6];
        int master; /* ifindex, 0 none */
        /* The interface it was read from: nbd_link_restore() puts it back
         * there, not on whatever holds its name by then (0: by name). */
        int ifindex;
};

/* devdir: a directory on a filesystem that allows device nodes, private to
 * the helper, where macvtap nodes are made, opened and removed; NULL to use
 * /dev/tapN only when it is the right device. */
int nbd_links_open(struct nbd_loop *loop, const char *devdir, struct nbd_links **ret);
void nbd_links_close(struct nbd_links *l);

/* Take in every link notification that has arrived (names others made or
 * removed). Called before each allocation, and by the loop. */
void nbd_links_sync(struct nbd_links *l);
/* A validation step begins (hold true) or ends (false): in between, the
 * look-ups read the notifications once, at the first of them, not each
 * time (issue 14). Validation itself changes nothing; what others change
 * meanwhile is seen at the next step, or at the run, which reads again. */
void nbd_links_hold(struct nbd_links *l, bool hold);

struct nbd_names *nbd_links_names(struct nbd_links *l);

/* An interface of the namespace, as the name map knows it. */
struct nbd_link_entry {
        char name[IFNAMSIZ];
        int ifindex;
};

/* Call fn (one of up to four watchers) for every interface that goes away
 * (deleted by anyone, or moved to another namespace), from the loop after
 * the notification was read: never in the middle of a netlink exchange,
 * so fn may make requests; then fn(data, NULL) ends the list. Bandwidth
 * uses it to remove the IFB it made for the interface, the firewall to
 * remove the owners bound to it (fw_gone.h). */
void nbd_links_on_gone(struct nbd_links *l, void (*fn)(void *data, const struct nbd_link_entry *e),
                       void *data);

/* Call fn (one watcher) at once for every interface that goes away, as
 * its notification is read: inside the look-up that read it (each create
 * reads them first), so before the op that looked goes on. fn must make no
 * netlink request and run no job: signal, log, mark. Supervised programs
 * use it: one that serves the name must not serve the next interface of
 * that name, which a create in the same loop iteration may make. */
void nbd_links_on_gone_now(struct nbd_links *l, void (*fn)(void *data, const char *name),
                           void *data);
/* fn (one) runs before each create, once the notifications are read; its
 * error (err set) fails the create, which makes nothing. */
void nbd_links_before_create(struct nbd_links *l, int (*fn)(void *data, struct nbd_err *err),
                             void *data);

/* Run fn for the interfaces gone so far now, not from the loop: before a
 * reply, so a LinkDelete's reply comes after its IFB is gone too. */
void nbd_links_flush_gone(struct nbd_links *l);

/* Whether the name map has an interface of that name, as the notifications
 * read so far say (no sync: safe from a gone watcher). */
bool nbd_links_knows(struct nbd_links *l, const char *name);

/* The ifindex of interface name (after reading the notifications; a
 * look-up in the kernel when the map does not know it): 0 or -ENODEV. And
 * the name the map knows for ifindex, or NULL (valid until the next sync). */
int nbd_links_ifindex(struct nbd_links *l, const char *name, int *ret);
const char *nbd_links_name_of(struct nbd_links *l, int ifindex);

/* Every interface there is now, in a malloc'ed array (free it). */
int nbd_links_list(struct nbd_links *l, struct nbd_link_entry **ret, size_t *n);
/* The request socket, lent to bandwidth.c: one fewer fd of the few the
 * helper has. */
struct nbd_netlink *nbd_links_netlink(struct nbd_links *l);

int nbd_link_tap_create(struct nbd_links *l, const struct nbd_tap_spec *s,
                        struct nbd_link_made *ret, struct nbd_err *err);
int nbd_link_macvlan_create(struct nbd_links *l, const struct nbd_macvlan_spec *s,
                            struct nbd_link_made *ret, struct nbd_err *err);
int nbd_link_veth_create(struct nbd_links *l, const struct nbd_veth_spec *s,
                         struct nbd_link_made *ret, struct nbd_err *err);
int nbd_link_bridge_create(struct nbd_links *l, const char *name, uid_t creator,
                           struct nbd_link_made *ret, struct nbd_err *err);
int nbd_link_set(struct nbd_links *l, const struct nbd_link_change *c, int *ret_ifindex,
                 struct nbd_err *err);
int nbd_link_delete(struct nbd_links *l, const char *name, struct nbd_err *err);
/* The same for the interface of that ifindex, whatever its name now (name:
 * for the message): an undo deletes the device its op made, not the next
 * device of that name. -ENODEV when it is gone. */
int nbd_link_delete_index(struct nbd_links *l, int ifindex, const char *name, struct nbd_err *err);

/* Deleting a device makes the kernel wait for an RCU grace period (16-24
 * ms here), inside the request. A batch of deletions pays it once: each
 * device is moved to a link group of the batch's own (a cheap change),
 * then one RTM_DELLINK deletes the whole group, all or nothing.
 *
 * nbd_link_doom() moves interface `name` to `group` and says where it was
 * (ret, untouched on failure). -ENODEV: no such interface; -EOPNOTSUPP:
 * one the kernel cannot delete (no link kind: lo, a physical NIC), found
 * here so that it fails alone and before anything is deleted. */
struct nbd_link_doomed {
        char name[IFNAMSIZ];
        int ifindex;
        uint32_t group; /* before */
};
int nbd_link_doom(struct nbd_links *l, const char *name, uint32_t group,
                  struct nbd_link_doomed *ret, struct nbd_err *err);
/* Put a doomed interface back in the group it was in. 0 or -errno. */
int nbd_link_undoom(struct nbd_links *l, const struct nbd_link_doomed *d);
/* Delete every interface of `group` in one request, if the group holds
 * only ifindexes[n] (else -EBUSY: nothing deleted). 0 or -errno (err set). */
int nbd_link_delete_group(struct nbd_links *l, uint32_t group, const int *ifindexes, size_t n,
                          struct nbd_err *err);

/* A macvtap: what its guest sends leaves through its egress, what the
 * guest receives comes through its ingress (the reverse of a tap). */
bool nbd_link_is_macvtap(struct nbd_links *l, const char *name);

/* 1 if an interface of that name exists here, 0 if not, or -errno. */
int nbd_link_exists(struct nbd_links *l, const char *name);

/* The uid interface `name` was made for, from its mark, as the map knows it
 * (no netlink round trip): 0, -ENOENT when it carries no owner mark (made by
 * others than netbroker), -ENODEV when there is no such interface. */
int nbd_link_owner(struct nbd_links *l, const char *name, uid_t *ret);
/* Interfaces here marked as made for uid. */
unsigned nbd_links_owned_by(struct nbd_links *l, uid_t uid);
/* The ifindexes of the interfaces uid owns, in a malloc'ed array (free
 * it): 0 or -ENOMEM. */
int nbd_links_owned_ifindexes(struct nbd_links *l, uid_t uid, int **ret, size_t *ret_n);
/* An alias that is an owner mark: true, and its uid in *ret. */
bool nbd_link_parse_owner_mark(const char *alias, uid_t *ret);
int nbd_link_get_state(struct nbd_links *l, const char *name, struct nbd_link_state *ret);
/* Put back what differs of st (up/down, MTU, MAC, master) in one request,
 * as nbd_link_get_state() read it, on the interface it was read from
 * (st->ifindex; by name when 0): 0 (nothing differed: nothing sent), or
 * -errno (-ENODEV: no such interface). */
int nbd_link_restore(struct nbd_links *l, const char *name, const struct nbd_link_state *st);
