// SPDX-License-Identifier: LGPL-2.1-or-later
/* Test cases of the test-unit binary that live in their own files. */
#pragma once

#include <check.h>
#include <stddef.h>
#include <sys/types.h>

#include "peer.h"

/* A peer as SO_PEERCRED and SO_PEERGROUPS would report it (test_unit.c). */
struct nbd_peer tu_peer(uid_t uid, gid_t gid, const gid_t *groups, size_t n);

TCase *abi_tcase(void);
TCase *fw_unit_tcase(void);
TCase *fw_client_tcase(void);
TCase *fw_filters_tcase(void);
TCase *fw_text_tcase(void);
TCase *fwfile_tcase(void);
TCase *mac_tcase(void);
TCase *names_scale_tcase(void);
TCase *policy_unit_tcase(void);
/* A VM start in one batch (session 8): op references. */
TCase *opref_tcase(void);
/* virtual networks: network firewall owners */
TCase *fw_net_unit_tcase(void);
/* the uevent parser: a macvtap's device number (issue 14) */
TCase *uevent_unit_tcase(void);
/* a transaction's messages, encoded as queued (issue 14) */
TCase *fw_msgs_unit_tcase(void);
/* bad input to the building calls says why in nb_last_error() */
TCase *lib_einval_tcase(void);
