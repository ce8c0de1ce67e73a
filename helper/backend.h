/* The kernel half of each capability the ops use, as tables of functions.
 *
 * The dispatcher is given one (struct nbd_dispatch_ctx's be) and the op
 * files, fw_gone.c and main.c call the kernel only through it. The helper
 * runs nbd_kernel_backend (backend.c: the real link.c, fw_kernel.c,
 * bandwidth.c and spawn.c); the fuzzers and the allocation test run
 * tests/fuzz's nbd_fake_backend over the same dispatcher, ops and pure code
 * (fw_model.c, fw_compile.c, names.c, ...), without a kernel and without
 * renaming anything. This header is the whole contract between the two:
 * a kernel function an op needs is added here, to the real table and to
 * the fake one (test-unit and test-alloc check that no entry is NULL).
 *
 * Each entry has the meaning, arguments and errors of the function of the
 * real header it names; only that header documents them. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "err.h"
#include "fw_kernel.h"
#include "loop.h"
#include "spawn.h"

/* The firewall: fw_kernel.h. */
struct nbd_backend_fw {
        int (*open)(struct nbd_loop *loop, struct nbd_fw **ret);
        void (*close)(struct nbd_fw *fw);
        int (*txn_begin)(struct nbd_fw *fw, struct nbd_fw_txn **ret, struct nbd_err *e);
        int (*txn_apply)(struct nbd_fw_txn *t, const struct nbd_fw_owner_spec *s,
                         struct nbd_fw_applied *ret, struct nbd_err *e);
        int (*txn_remove)(struct nbd_fw_txn *t, const char *owner, const uid_t *only_for,
                          struct nbd_err *e);
        int (*txn_commit)(struct nbd_fw_txn *t, struct nbd_err *e);
        void (*txn_free)(struct nbd_fw_txn *t);
        int (*list)(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e);
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

struct nbd_backend {
        struct nbd_backend_fw fw;
        struct nbd_backend_spawn spawn;
};

/* The kernel: what netbrokerd runs. */
extern const struct nbd_backend nbd_kernel_backend;
