// SPDX-License-Identifier: LGPL-2.1-or-later
/* Private to libnetbroker: reading and writing the caller's sized structs
 * (netbroker.h, "ABI"), the way the kernel's copy_struct_from_user() does. */
#pragma once

#include <stddef.h>

#include "netbroker.h"

/* The bytes of type up to and including field. */
#define NB_SIZE_TO(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* Each struct's size in the first release that had a size field (0.2): no
 * caller can have a smaller one. A field added later goes after these. */
#define NB_SPAWN_OPTS_SIZE_0 NB_SIZE_TO(nb_spawn_opts, log_level)
#define NB_TAP_OPTS_SIZE_0 NB_SIZE_TO(nb_tap_opts, gid)
#define NB_LINK_CHANGE_SIZE_0 NB_SIZE_TO(nb_link_change, nomaster)
#define NB_FW_RULE_SIZE_0 NB_SIZE_TO(nb_fw_rule, comment)
#define NB_FW_GROUP_OPTS_SIZE_0 NB_SIZE_TO(nb_fw_group_opts, guard)
#define NB_FW_VAR_SIZE_0 NB_SIZE_TO(nb_fw_var, values)
#define NB_RATE_SIZE_0 NB_SIZE_TO(nb_rate, floor)
#define NB_EXEC_RESULT_SIZE_0 NB_SIZE_TO(nb_exec_result, duration_us)
#define NB_LINK_INFO_SIZE_0 NB_SIZE_TO(nb_link_info, made_by_helper)
#define NB_FW_COUNTER_SIZE_0 NB_SIZE_TO(nb_fw_counter, text)
/* Ensure by hash (issue 14). */
#define NB_FW_ENSURE_OWNER_SIZE_0 NB_SIZE_TO(nb_fw_ensure_owner, hash)
/* virtual networks, part 1 */
#define NB_ADDR_OPTS_SIZE_0 NB_SIZE_TO(nb_addr_opts, noprefixroute)
#define NB_ROUTE_SIZE_0 NB_SIZE_TO(nb_route, ipv6)
#define NB_ADDR_INFO_SIZE_0 NB_SIZE_TO(nb_addr_info, scope)
#define NB_BRIDGE_OPTS_SIZE_0 NB_SIZE_TO(nb_bridge_opts, broadcast_flood)
/* virtual networks: network firewall owners */
#define NB_NET_FORWARD_SIZE_0 NB_SIZE_TO(nb_net_forward, guest_port)
#define NB_NET_SPEC_SIZE_0 NB_SIZE_TO(nb_net_spec, fw_mode)
#define NB_NET_OWNER_SIZE_0 NB_SIZE_TO(nb_net_owner, rules)
/* supervised programs */
#define NB_PROGRAM_OPTS_SIZE_0 NB_SIZE_TO(nb_program_opts, tag)
#define NB_PROGRAM_INFO_SIZE_0 NB_SIZE_TO(nb_program_info, argv)

/* Copy the caller's struct src (its size in its leading size_t) into dst,
 * the library's own of `known` bytes: the fields that fit, the rest zero,
 * dst's size set to known. Returns 0, -EINVAL (size 0 or below first, the
 * struct's first released size), -E2BIG (larger than known with a non-zero
 * byte past it); dst is untouched on failure. */
int nb_struct_in(void *dst, size_t known, size_t first, const void *src);

/* Copy the library's struct src (known bytes; its size field is ignored)
 * into the caller's dst, of the size dst says: the fields that fit, and
 * zero past known. Returns 0 or -EINVAL (size 0 or below first); dst is
 * untouched on failure. */
int nb_struct_out(void *dst, const void *src, size_t known, size_t first);

/* Typed forms: NB_STRUCT_IN(&mine, theirs, NB_FW_RULE_SIZE_0). */
#define NB_STRUCT_IN(dst, src, first) nb_struct_in((dst), sizeof(*(dst)), (first), (src))
#define NB_STRUCT_OUT(dst, src, first) nb_struct_out((dst), (src), sizeof(*(src)), (first))
