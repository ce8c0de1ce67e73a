// SPDX-License-Identifier: LGPL-2.1-or-later
/* A guest's rules die with its interface.
 *
 * The kernel binds a netdev base chain to a device by name, and since
 * Linux 6.16 a chain outlives its device and attaches to the next device
 * of that name: a caller that deleted its interface could leave its DROP
 * rules to whoever is given the name next (root's next vnet0 included).
 * So when an interface goes away, every firewall owner bound to it is
 * removed in a transaction of its own, before the reply of the request
 * that deleted it (or at once, when someone else did); and at start-up,
 * owners whose interface is gone already are removed too.
 *
 * Nothing of it waits for the kernel on the loop. The loop knows which
 * interfaces may have owners (those the start-up sweep found, and every
 * FirewallApply's since): an interface that never had one costs no read
 * at all. For the others, the table is read, the owners removed and the
 * commit sent on the firewall's lane (lane.h), through a handle of its own
 * (nbd_fw_lane_open); the loop finishes it. The lane is a FIFO: a firewall
 * op that comes after waits behind the clean-up and sees it done, and the
 * request that deleted the interface has its reply after it
 * (nbd_fw_gone_wait). When the set is not known whole (the sweep could not
 * read the table, memory ran out), every gone interface is looked up on the
 * lane. Uses only the firewall's public interface (fw_kernel.h), through
 * the backend table it is given (backend.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "fw_kernel.h"
#include "link.h"

struct nbd_backend;
struct nbd_fw_gone;

/* be (its firewall table) must outlive the nbd_fw_gone. */
int nbd_fw_gone_new(const struct nbd_backend *be, struct nbd_fw *fw, struct nbd_fw_gone **ret);
void nbd_fw_gone_free(struct nbd_fw_gone *g);

/* An nbd_links_on_gone() watcher: collects the names, and at the end of the
 * list (e NULL) removes their owners. */
void nbd_fw_gone_link(void *data, const struct nbd_link_entry *e);

/* Whether owner was removed with its interface since start-up, and made
 * for uid (any uid when uid is NULL): a later FirewallRemove of it is a
 * success that writes nothing. The last NBD_FW_GONE_REMEMBERED are kept. */
#define NBD_FW_GONE_REMEMBERED 4096
bool nbd_fw_gone_removed(const struct nbd_fw_gone *g, const char *owner, const uid_t *uid);

/* A FirewallApply binds an owner to ifname: when it goes, look. */
void nbd_fw_gone_note(struct nbd_fw_gone *g, const char *ifname);

/* The firewall's lane for the clean-ups (NULL: they run on the loop). */
struct nbd_lane;
void nbd_fw_gone_set_lane(struct nbd_fw_gone *g, struct nbd_lane *lane);

/* A clean-up is under way on the lane. */
bool nbd_fw_gone_pending(const struct nbd_fw_gone *g);
/* fn(data) runs on the loop once every clean-up under way now, and those
 * queued behind it, has ended; w is the caller's until then, or until
 * nbd_fw_gone_unwait(). Only while nbd_fw_gone_pending(). */
struct nbd_fw_gone_waiter {
        void (*fn)(void *data);
        void *data;
        struct nbd_fw_gone_waiter *next;
};
void nbd_fw_gone_wait(struct nbd_fw_gone *g, struct nbd_fw_gone_waiter *w);
void nbd_fw_gone_unwait(struct nbd_fw_gone *g, struct nbd_fw_gone_waiter *w);

/* Start-up: remove the owners whose interface is not among all[n]. */
int nbd_fw_gone_sweep(struct nbd_fw_gone *g, const struct nbd_link_entry *all, size_t n);
