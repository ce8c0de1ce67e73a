// SPDX-License-Identifier: LGPL-2.1-or-later
/* The kernel half of each capability the ops use, as tables of functions.
 *
 * The dispatcher is given one (struct nbd_dispatch_ctx's be) and the op
 * files, fw_gone.c and main.c call the kernel only through it. The helper
 * runs nbd_kernel_backend (backend.c: the real link.c, link_show.c,
 * fw_kernel.c, bandwidth.c, bandwidth_show.c and spawn.c); the fuzzers and
 * the allocation test run tests/fuzz's nbd_fake_backend over the same
 * dispatcher, ops and pure code (fw_model.c, fw_compile.c, names.c,
 * nbd_bw_check, ...), without a kernel and without renaming anything: the
 * real kernel code is linked there too, and never called. This header is
 * the whole contract between the two: a kernel function an op needs is
 * added here, to the real table and to the fake one (test-dispatch and
 * test-alloc check that no entry is NULL).
 *
 * Each entry has the meaning, arguments and errors of the function of the
 * real header it names; only that header documents them. What only
 * main.c's start-up uses (nbd_links_on_gone, nbd_links_list,
 * nbd_bw_link_gone, nbd_bw_sweep) is the kernel's alone and stays out. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "addr.h"
#include "bandwidth.h"
#include "bandwidth_show.h"
#include "bridge_opt.h"
#include "err.h"
#include "fw_kernel.h"
#include "link.h"
#include "link_show.h"
#include "loop.h"
#include "spawn.h"

/* Interfaces: link.h, and link_show.h's show. */
struct nbd_backend_links {
        int (*open)(struct nbd_loop *loop, const char *devdir, struct nbd_links **ret);
        void (*close)(struct nbd_links *l);
        void (*sync)(struct nbd_links *l);
        void (*hold)(struct nbd_links *l, bool hold);
        struct nbd_names *(*names)(struct nbd_links *l);
        void (*flush_gone)(struct nbd_links *l);
        struct nbd_netlink *(*netlink)(struct nbd_links *l);
        int (*tap_create)(struct nbd_links *l, const struct nbd_tap_spec *s,
                          struct nbd_link_made *ret, struct nbd_err *err);
        int (*macvlan_create)(struct nbd_links *l, const struct nbd_macvlan_spec *s,
                              struct nbd_link_made *ret, struct nbd_err *err);
        int (*veth_create)(struct nbd_links *l, const struct nbd_veth_spec *s,
                           struct nbd_link_made *ret, struct nbd_err *err);
        int (*bridge_create)(struct nbd_links *l, const char *name, uid_t creator,
                             struct nbd_link_made *ret, struct nbd_err *err);
        int (*set)(struct nbd_links *l, const struct nbd_link_change *c, int *ret_ifindex,
                   struct nbd_err *err);
        int (*delete)(struct nbd_links *l, const char *name, struct nbd_err *err);
        int (*delete_index)(struct nbd_links *l, int ifindex, const char *name,
                            struct nbd_err *err);
        int (*doom)(struct nbd_links *l, const char *name, uint32_t group,
                    struct nbd_link_doomed *ret, struct nbd_err *err);
        int (*undoom)(struct nbd_links *l, const struct nbd_link_doomed *d);
        int (*delete_group)(struct nbd_links *l, uint32_t group, const int *ifindexes, size_t n,
                            struct nbd_err *err);
        bool (*is_macvtap)(struct nbd_links *l, const char *name);
        int (*exists)(struct nbd_links *l, const char *name);
        int (*owner)(struct nbd_links *l, const char *name, uid_t *ret);
        unsigned (*owned_by)(struct nbd_links *l, uid_t uid);
        int (*ifindex)(struct nbd_links *l, const char *name, int *ret);
        int (*owned_ifindexes)(struct nbd_links *l, uid_t uid, int **ret, size_t *ret_n);
        int (*get_state)(struct nbd_links *l, const char *name, struct nbd_link_state *ret);
        int (*restore)(struct nbd_links *l, const char *name, const struct nbd_link_state *st);
        int (*show)(struct nbd_netlink *nl, const char *name, struct nbd_link_info **ret,
                    size_t *ret_n, struct nbd_err *e);
        /* The same over a socket of the call's own: LinkList's, on the
         * links' lane. */
        int (*show_own)(const char *name, struct nbd_link_info **ret, size_t *ret_n,
                        struct nbd_err *e);
};

/* Bandwidth: bandwidth.h, and bandwidth_show.h's show. */
struct nbd_backend_bw {
        int (*open)(struct nbd_netlink *nl, struct nbd_bw **ret);
        void (*close)(struct nbd_bw *bw);
        void (*mechanisms)(const struct nbd_bw *bw, const char **ret_in, const char **ret_out);
        bool (*outbound_available)(const struct nbd_bw *bw);
        int (*set)(struct nbd_bw *bw, const char *ifname, const struct nbd_bw_limits *l,
                   struct nbd_bw_applied *ret, struct nbd_err *err);
        int (*flush)(struct nbd_bw *bw);
        /* A set or clear in steps, the policer on the firewall's lane. */
        int (*change_begin)(struct nbd_bw *bw, const char *ifname, const struct nbd_bw_limits *l,
                            struct nbd_bw_change **ret, struct nbd_err *err);
        void (*change_nft)(struct nbd_bw_change *c);
        int (*change_end)(struct nbd_bw *bw, struct nbd_bw_change *c, struct nbd_bw_applied *ret,
                          struct nbd_bw_limits *ret_before, struct nbd_err *err);
        void (*change_free)(struct nbd_bw_change *c);
        int (*show)(struct nbd_netlink *nl, const char *ifname, struct nbd_bw_shown *ret,
                    struct nbd_err *e);
};

/* The firewall: fw_kernel.h. */
struct nbd_backend_fw {
        int (*open)(struct nbd_loop *loop, struct nbd_fw **ret);
        void (*close)(struct nbd_fw *fw);
        /* fw_kernel.h: a table of ours deleted by someone else. */
        void (*on_table_deleted)(struct nbd_fw *fw, nbd_fw_table_deleted_fn fn, void *data);
        int (*txn_begin)(struct nbd_fw *fw, struct nbd_fw_txn **ret, struct nbd_err *e);
        int (*txn_apply)(struct nbd_fw_txn *t, const struct nbd_fw_owner_spec *s,
                         struct nbd_fw_applied *ret, struct nbd_err *e);
        int (*txn_remove)(struct nbd_fw_txn *t, const char *owner, const uid_t *only_for,
                          struct nbd_err *e);
        int (*txn_commit)(struct nbd_fw_txn *t, struct nbd_err *e);
        int (*txn_commit_prepare)(struct nbd_fw_txn *t, struct nbd_err *e);
        void (*txn_commit_send)(struct nbd_fw_txn *t);
        int (*txn_commit_finish)(struct nbd_fw_txn *t, struct nbd_err *e);
        void (*txn_free)(struct nbd_fw_txn *t);
        int (*list)(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e);
        /* The owners and their creators only (validation, on the loop): no
         * rule count, whose cost grows with the table; rules as claimed. */
        int (*list_creators)(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e);
        /* The same from the summary alone, -ESTALE when the mark does not
         * hold; then one owner by name, -ENOENT when it has no chains. */
        int (*list_creators_marked)(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data,
                                    struct nbd_err *e);
        int (*read_creator)(struct nbd_fw *fw, const char *owner, struct nbd_fw_owner_info *ret,
                            struct nbd_err *e);
        /* For fw_gone's clean-up on the firewall's lane (fw_kernel.h). */
        int (*lane_open)(const struct nbd_fw *fw, struct nbd_fw **ret);
        void (*lane_close)(struct nbd_fw *lf);
        int (*txn_remove_bound)(struct nbd_fw_txn *t, const char (*names)[IFNAMSIZ], size_t n,
                                struct nbd_fw_owner_info **ret, size_t *n_ret, struct nbd_err *e);
        int (*list_rules)(struct nbd_fw *fw, const uid_t *only, nbd_fw_rule_fn fn, void *data,
                          struct nbd_err *e);
        /* Ensure by hash (issue 14). */
        int (*txn_check_hash)(struct nbd_fw_txn *t, const char *owner, const char *ifname,
                              const char *hash, const uid_t *only_for, struct nbd_fw_applied *ret,
                              struct nbd_err *e);
        /* A batch's table read on the lane (op_firewall.c, fw_kernel.h). */
        void (*txn_rebind)(struct nbd_fw_txn *t, struct nbd_fw *fw);
        /* No chain dump on the loop (issue 14, fw_kernel.h); NULL: the
         * chains are read where the op runs. */
        void (*txn_chains_later)(struct nbd_fw_txn *t);
        bool (*txn_chains_wanted)(const struct nbd_fw_txn *t);
        int (*txn_read_chains)(struct nbd_fw_txn *t, struct nbd_err *e);
        /* A request's network owners in the same commit (issue 16). */
        void (*txn_join)(struct nbd_fw_txn *t, nbd_fw_put_fn put, void *data);
};

/* Programs: spawn.h. */
struct nbd_backend_spawn {
        int (*spawn)(struct nbd_loop *l, const struct nbd_exec_spec *s, nbd_child_done_fn done,
                     void *data, struct nbd_child **ret);
        struct nbd_child_result *(*result)(struct nbd_child *c);
        void (*free)(struct nbd_child *c);
        void (*abandon)(struct nbd_child *c);
        unsigned (*running)(void);
        unsigned (*running_of)(uid_t uid);
        void (*on_reaped)(void (*fn)(void *data), void *data);
};

/* Virtual networks, part 1: addresses, routes and sysctls (addr.h).
 * Address changes over the links' request socket, their reads on the
 * links' lane over sockets of their own; routes on the links' lane,
 * over sockets of their own (a listing's dumps, a change and a deletion's
 * read: l NULL), or on the loop over the links' socket (an undo). */
struct nbd_backend_net {
        int (*addr_add)(struct nbd_links *l, const struct nbd_addr *a, struct nbd_err *err);
        int (*addr_delete)(struct nbd_links *l, const struct nbd_addr *a, struct nbd_err *err);
        /* AddrList's and AddrDelete's read, on the links' lane; the
         * names after, on the loop. */
        int (*addr_dump)(int ifindex, struct nbd_addr **ret, size_t *ret_n, struct nbd_err *err);
        void (*addr_names)(struct nbd_links *l, struct nbd_addr *v, size_t n);
        int (*route_add)(struct nbd_links *l, const struct nbd_route *r, struct nbd_err *err);
        int (*route_delete)(struct nbd_links *l, const struct nbd_route *r,
                            struct nbd_route_saved **ret_saved, struct nbd_err *err);
        int (*route_restore)(struct nbd_links *l, const struct nbd_route_saved *s,
                             struct nbd_err *err);
        void (*route_saved_free)(struct nbd_route_saved *s);
        int (*route_list)(struct nbd_links *l, const struct nbd_route_filter *f,
                          struct nbd_route **ret, size_t *ret_n, unsigned *ret_sent,
                          struct nbd_err *err);
        void (*route_names)(struct nbd_links *l, struct nbd_route *v, size_t n);
        int (*sysctl_get)(const char *rel, unsigned *ret, struct nbd_err *err);
        int (*sysctl_set)(const char *rel, unsigned value, struct nbd_err *err);
        int (*bropt_get)(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_bropts *ret,
                         struct nbd_err *err);
        int (*bropt_set)(struct nbd_links *l, const struct nbd_bropts *o, struct nbd_err *err);
        /* bridge_port.h */
        int (*fdb_has)(struct nbd_links *l, int br_ifindex, int except_ifindex,
                       const uint8_t mac[6], bool *ret, struct nbd_err *err);
        int (*bridge_pin_addr)(struct nbd_links *l, int br_ifindex, const uint8_t mac[6],
                               struct nbd_err *err);
};

struct nbd_backend {
        struct nbd_backend_links links;
        struct nbd_backend_bw bw;
        struct nbd_backend_fw fw;
        struct nbd_backend_spawn spawn;
        struct nbd_backend_net net;
};

/* The kernel: what netbrokerd runs. */
extern const struct nbd_backend nbd_kernel_backend;
