// SPDX-License-Identifier: LGPL-2.1-or-later
/* Compile one owner and write every chain and rule as libnftnl prints it,
 * after a round trip through the netlink encoding and libnftnl's parser
 * (what the kernel would be sent, read back). For tests: netbrokerd does
 * not link it. 0 with *ret_text malloc'd, or -errno with e filled. */
#pragma once

#include "err.h"
#include "fw_model.h"

int nbd_fw_render(const struct nbd_fw_owner_spec *s, char **ret_text, struct nbd_err *e);
