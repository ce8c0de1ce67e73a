// SPDX-License-Identifier: LGPL-2.1-or-later
/* What still uses an interface; see link_users.h. */
#include "link_users.h"

#include <stdbool.h>
#include <string.h>

#include "backend.h"
#include "fw_net_kernel.h"
#include "program.h"

struct net_user {
        const char *name;
        char owner[NBD_FW_OWNER_MAX + 1];
};

static int net_on(const struct nbd_net_owner_info *o, void *data)
{
        struct net_user *u = data;

        if (!u->owner[0] && strcmp(o->bridge, u->name) == 0)
                memcpy(u->owner, o->owner, sizeof(u->owner));
        return 0;
}

static const struct nbd_program_info *program_on(uid_t uid, const char *name)
{
        for (struct nbd_program *p = nbd_program_next(NULL); p; p = nbd_program_next(p)) {
                const struct nbd_program_info *i = nbd_program_info(p);
                if (i->running && i->uid == uid && nbd_program_serves(i, name))
                        return i;
        }
        return NULL;
}

int nbd_link_users_check(struct nbd_job *job, const char *name, Netbroker__Result *res)
{
        const struct nbd_peer *peer = nbd_job_peer(job);
        const struct nbd_program_info *i;
        struct net_user u = {.name = name};
        struct nbd_net_txn *t = NULL;
        struct nbd_err err;
        int r;

        if (nbd_peer_is_root(peer))
                return 0;
        if ((i = program_on(peer->uid, name)))
                return nbd_result_set(res, -EBUSY,
                                      "link delete: program %llu (%s, pid %d) serves %s: stop it "
                                      "first (program_stop)",
                                      (unsigned long long)i->id, i->path, (int)i->pid, name);
        /* Network owners live in the kernel only (op_net.c's kernel_only). */
        if (nbd_job_ctx(job)->be != &nbd_kernel_backend)
                return 0;
        if ((r = nbd_net_txn_begin(&t, &err)) < 0)
                return nbd_result_set(res, r, "link delete: %s", err.msg);
        nbd_net_txn_each(t, net_on, &u);
        nbd_net_txn_free(t);
        if (u.owner[0])
                return nbd_result_set(res, -EBUSY,
                                      "link delete: network %s is on %s: remove it first "
                                      "(net_remove)",
                                      u.owner, name);
        return 0;
}
