// SPDX-License-Identifier: LGPL-2.1-or-later
/* Private to libnetbroker: what the stock filters (fw_filters.c) need of a
 * ruleset beyond the public calls (firewall.c keeps the ruleset itself). */
#pragma once

#include <stddef.h>

#include "netbroker.h"

/* Where a ruleset stood: its groups, each group's rule count and the
 * current group. A filter that fails half-way rolls back to its mark. */
struct nb_fw_mark {
        size_t n_groups, cur;
        size_t *n_rules; /* one per group there was */
};

/* 0 or -ENOMEM. */
int nb_fw_mark_take(const nb_fw_ruleset *rs, struct nb_fw_mark *ret);
/* Drops every group started and every rule added since the mark. */
void nb_fw_mark_rollback(nb_fw_ruleset *rs, const struct nb_fw_mark *m);
void nb_fw_mark_release(struct nb_fw_mark *m);
/* Make the group that was current at the mark current again (none: the
 * next nb_fw_rule_add() starts group "rules"). */
void nb_fw_mark_restore_group(nb_fw_ruleset *rs, const struct nb_fw_mark *m);

/* nb_fw_rule_add() into the current group, unless the group has a rule
 * that is the same in every field (a filter instantiated twice adds its
 * rules once: the copy could never decide a frame the first did not).
 * Needs a current group. 0, -EINVAL, -ENOMEM. */
int nb_fw_rule_add_once(nb_fw_ruleset *rs, const nb_fw_rule *rule);

/* The copy of a direction="inout" rule for what the guest sends, as
 * libvirt makes it (ebtablesCreateRuleInstance's reverse): source and
 * destination swapped, of the frame (MAC), of ARP (MAC and IP), of IP and
 * of the ports, each with its negation. */
void nb_fw_rule_reverse(nb_fw_rule *r);
