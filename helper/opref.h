// SPDX-License-Identifier: LGPL-2.1-or-later
/* Op references (a VM start in one batch): a later op of a request names
 * the interface an earlier op of the same request made, whose name the
 * caller cannot know when it is made from a template ("vnet%d").
 *
 * A reference is written where a name goes: "op:K" (the interface op K
 * made) or "op:K:peer" (a VethCreate's peer). The kernel refuses ':' in an
 * interface name (dev_valid_name), so no real name is ever read as one.
 * This file knows which fields may hold one and what it may point at;
 * dispatch.c applies it: checks every reference before anything runs, and
 * puts the made name in its place before the op runs. Pure: no kernel, no
 * job. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "codec.h"

#define NBD_OPREF_PREFIX "op:"
/* The name fields of one op that may hold a reference (LinkSet: name and
 * master). */
#define NBD_OPREF_SLOTS 2

struct nbd_opref {
        size_t op; /* the op that made the interface */
        bool peer; /* its veth peer */
};

/* s is written as a reference (starts with "op:"). A validator lets such a
 * name pass as one this batch makes: dispatch.c has checked the reference
 * and validates the op again once it is resolved. */
bool nbd_opref_is(const char *s);

/* The fields of op that may hold a reference, as pointers to the message's
 * string pointers (into ret); returns how many, 0 to NBD_OPREF_SLOTS. A
 * create op's own name is none of them. */
size_t nbd_opref_slots(Netbroker__Op *op, char **ret[NBD_OPREF_SLOTS]);

/* The reference s in op i of ops: well formed, to an earlier op that makes
 * an interface here and was not refused (refused: CONTINUE_ON_ERROR's
 * refused ops, or NULL). Returns 0 with *ret_stand_in the name to validate
 * op i with now: the name op K makes when it is explicit, else s itself
 * (a template's name is known only when op K has run); or -EINVAL with
 * res's message saying why. */
int nbd_opref_check(Netbroker__Op *const *ops, size_t i, const bool *refused, const char *s,
                    const char **ret_stand_in, Netbroker__Result *res);

/* The name the reference s (checked already) stands for, from the results
 * of the ops that ran: 0 with *ret_name (results' string), or -EINVAL with
 * res set when op K failed, did not run or made no name. */
int nbd_opref_resolve(Netbroker__Result *const *results, size_t i, const char *s,
                      const char **ret_name, Netbroker__Result *res);
