// SPDX-License-Identifier: LGPL-2.1-or-later
/* libnl-route-3's allocating calls, failed in turn with the malloc
 * family's (tests/alloc_hook.h): link with --wrap=rtnl_link_alloc and the
 * others below (tests/CMakeLists.txt). libnl is a shared library, so its own
 * malloc calls do not go through alloc_hook.c; these wrappers stand for
 * them at the calls link.c and bandwidth.c make. A failure does what libnl
 * does when out of memory: NULL, or -NLE_NOMEM. */
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/route/action.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/tc.h>

#include "alloc_hook.h"

#define WRAP_PTR(type, name, params, args)                                                         \
        type __real_##name params;                                                                 \
        type __wrap_##name params;                                                                 \
        type __wrap_##name params                                                                  \
        {                                                                                          \
                return nbt_alloc_should_fail() ? NULL : __real_##name args;                        \
        }
#define WRAP_INT(name, params, args)                                                               \
        int __real_##name params;                                                                  \
        int __wrap_##name params;                                                                  \
        int __wrap_##name params                                                                   \
        {                                                                                          \
                return nbt_alloc_should_fail() ? -NLE_NOMEM : __real_##name args;                  \
        }

WRAP_PTR(struct rtnl_link *, rtnl_link_alloc, (void), ())
WRAP_PTR(struct rtnl_link *, rtnl_link_veth_alloc, (void), ())
WRAP_PTR(struct rtnl_link *, rtnl_link_macvlan_alloc, (void), ())
WRAP_PTR(struct rtnl_link *, rtnl_link_macvtap_alloc, (void), ())
WRAP_PTR(struct rtnl_class *, rtnl_class_alloc, (void), ())
WRAP_PTR(struct rtnl_qdisc *, rtnl_qdisc_alloc, (void), ())
WRAP_PTR(struct rtnl_cls *, rtnl_cls_alloc, (void), ())
WRAP_PTR(struct rtnl_act *, rtnl_act_alloc, (void), ())
WRAP_PTR(struct nl_addr *, nl_addr_build, (int family, const void *buf, size_t size),
         (family, buf, size))
WRAP_PTR(struct nl_msg *, nlmsg_alloc_simple, (int type, int flags), (type, flags))
WRAP_PTR(struct nl_cb *, nl_cb_clone, (struct nl_cb * orig), (orig))
WRAP_INT(rtnl_link_set_type, (struct rtnl_link * link, const char *type), (link, type))
WRAP_INT(rtnl_tc_set_kind, (struct rtnl_tc * tc, const char *kind), (tc, kind))
