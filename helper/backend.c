/* The real backend table; see backend.h. */
#include "backend.h"

#include "fw_kernel.h"
#include "spawn.h"

const struct nbd_backend nbd_kernel_backend = {
        .fw =
                {
                        .open = nbd_fw_open,
                        .close = nbd_fw_close,
                        .txn_begin = nbd_fw_txn_begin,
                        .txn_apply = nbd_fw_txn_apply,
                        .txn_remove = nbd_fw_txn_remove,
                        .txn_commit = nbd_fw_txn_commit,
                        .txn_free = nbd_fw_txn_free,
                        .list = nbd_fw_list,
                },
        .spawn =
                {
                        .spawn = nbd_child_spawn,
                        .result = nbd_child_result,
                        .free = nbd_child_free,
                        .abandon = nbd_child_abandon,
                        .running = nbd_children_running,
                        .running_of = nbd_children_running_of,
                        .on_reaped = nbd_children_on_reaped,
                },
};
