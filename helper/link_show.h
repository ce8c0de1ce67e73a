// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading the interfaces of the namespace back from the kernel, for
 * LinkList: one RTM_GETLINK dump, nothing changed. Knows nothing of the
 * wire format. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

struct nbd_netlink;

enum nbd_link_kind {
        NBD_LINK_KIND_OTHER,
        NBD_LINK_KIND_TAP,
        NBD_LINK_KIND_MACVTAP,
        NBD_LINK_KIND_MACVLAN,
        NBD_LINK_KIND_VETH,
        NBD_LINK_KIND_BRIDGE,
        NBD_LINK_KIND_IFB,
};

struct nbd_link_info {
        char name[IFNAMSIZ];
        int ifindex;
        enum nbd_link_kind kind;
        char kind_name[32]; /* IFLA_INFO_KIND, "" for none */
        char mac[96]; /* "aa:bb:cc:dd:ee:ff", "" without an address */
        unsigned mtu;
        bool up; /* IFF_UP */
        char master[IFNAMSIZ]; /* "" for none */
        bool has_owner; /* it carries NBD_LINK_OWNER_MARK ... */
        uid_t owner; /* ... for this uid */
        bool made_by_helper; /* an owner mark, or netbroker's IFB mark or group */
};

/* Every interface (name NULL or ""), or only `name` (-ENODEV when there is
 * none), ascending by ifindex, in a malloc'ed array (free it). nl is
 * link.c's request socket; NULL: no kernel to read, -EOPNOTSUPP. 0, or
 * -errno with e set. */
int nbd_link_show(struct nbd_netlink *nl, const char *name, struct nbd_link_info **ret,
                  size_t *ret_n, struct nbd_err *e);
/* The same over a request socket of the call's own, opened and closed
 * here: safe on the links' lane (issue 14), which must not use the loop's. */
int nbd_link_show_own(const char *name, struct nbd_link_info **ret, size_t *ret_n,
                      struct nbd_err *e);
