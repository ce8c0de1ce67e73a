// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall, for callers that take all of it (the server, the
 * dispatcher): the model (fw_model.h) and the kernel side (fw_kernel.h).
 * The compiler (fw_compile.h) is the kernel side's; include it directly. */
#pragma once

#include "fw_kernel.h"
#include "fw_model.h"
