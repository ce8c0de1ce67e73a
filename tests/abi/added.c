// SPDX-License-Identifier: LGPL-2.1-or-later
/* A function a later branch of this release adds to its version node: the
 * abi check must let the library with it pass (tests/abi/CMakeLists.txt). */
#include "netbroker.h"

__attribute__((visibility("default"))) int nb_abi_test_added(void);

int nb_abi_test_added(void)
{
        return (int)nb_version();
}
