// SPDX-License-Identifier: LGPL-2.1-or-later
/* What still uses an interface a caller other than root deletes.
 *
 * Its network owner's rules (table inet netbroker_net) and its programs'
 * --interface= match the interface by name: deleted under them, they would
 * act on the next interface of that name, another caller's or root's
 * (dnsmasq's --bind-dynamic serves it as soon as it appears). So a caller
 * other than root removes its network (net_remove) and stops its programs
 * (program_stop) before it deletes their interface; root's deletions are
 * root's to order. */
#pragma once

#include "ops.h"

/* 0 when nothing of the caller's uses interface `name`; else -EBUSY with
 * res naming what does. Root: always 0. */
int nbd_link_users_check(struct nbd_job *job, const char *name, Netbroker__Result *res);
