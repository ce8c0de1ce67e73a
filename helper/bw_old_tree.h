// SPDX-License-Identifier: LGPL-2.1-or-later
/* An older helper's HTB tree on an interface's egress, and when this
 * helper takes it for its own. Only reads: bandwidth.c replaces or deletes
 * what it finds, bandwidth_show.c shows it. Knows nothing of the wire.
 *
 * Helpers before the mark (bandwidth.h's root 4e42:) shaped the egress
 * as: root qdisc htb 1: default 1; one class 1:1 (htb, at the top) with
 * the rates; under it a leaf qdisc 2: of fq_codel or sfq where the kernel
 * had one, else HTB's own fifo (which the kernel does not list); no
 * filter. After an upgrade that tree is still there, shaping a guest that
 * still runs, and a helper that took it for someone else's could neither
 * change nor clear its limit.
 *
 * Such a tree is netbroker's ("provably") only when, read from the kernel
 * at each request, both hold:
 *  1. the interface carries an owner mark in its alias (link.h's
 *     NBD_LINK_OWNER_MARK): netbroker made it. Only CAP_NET_ADMIN writes
 *     an alias, and every helper since owners were recorded (before the
 *     first release) wrote it on each interface it made; one made by a
 *     helper older still carries none, and its tree stays someone else's;
 *  2. its egress tree is that layout exactly: the root qdisc htb of handle
 *     1: and default class 1; of the htb's classes only 1:1, of kind htb,
 *     at the top; no other qdisc but, under 1:1, one leaf 2: of fq_codel
 *     or sfq (the ingress side, where an older helper's redirect was, is
 *     not part of it); no filter on 1:, 1:1 or the leaf.
 * Anything else is someone else's (deny by default): any tree on an
 * interface netbroker did not make, the old layout included (an
 * administrator's, or an older helper's on a tap libvirt made: nothing
 * tells those apart); any other tree on one it made (a second class,
 * another default, a filter, a leaf of another kind or handle). Not taken
 * as proof: a policer chain of the netdev netbroker_bw table (this helper
 * makes one beside anyone's root qdisc, so it says nothing of the
 * egress), the names map (a name, whoever made it), an IFB nbifbN (the
 * start-up sweep replaces those before the first request). The one case
 * it cannot tell: an administrator who built that very tree by hand on an
 * interface netbroker made; it is taken for the older helper's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "bandwidth.h"
#include "err.h"

struct nbd_netlink;
struct rtnl_link;

/* What rule 1 and a first look at rule 2 need of an interface, read with
 * its ifindex (so that no request is made for a tree that cannot be an
 * older helper's). */
struct nbd_bw_old_link {
        int ifindex;
        bool made; /* its alias is an owner mark */
        bool root_htb; /* its root qdisc is an htb (IFLA_QDISC) */
};

void nbd_bw_old_link_of(struct rtnl_link *link, struct nbd_bw_old_link *ret);

struct nbd_bw_old_tree {
        bool found; /* an older helper's tree that is netbroker's */
        char leaf[16]; /* its leaf's kind; "" for HTB's own fifo */
};

/* Whether l carries an older helper's tree that is netbroker's by the
 * rules above: 0 with ret->found false for anything else (without a
 * kernel read when l is not made or its root no htb; an interface gone
 * meanwhile has none), or -errno with e set when the kernel could not be
 * read (ret untouched). */
int nbd_bw_old_tree_find(struct nbd_netlink *nl, const struct nbd_bw_old_link *l,
                         struct nbd_bw_old_tree *ret, struct nbd_err *e);
