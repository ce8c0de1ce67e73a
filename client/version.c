// SPDX-License-Identifier: LGPL-2.1-or-later
/* The library's version at run time, from CMake's project() (the header's
 * NB_VERSION_* are the version a program was built with; the abi tests
 * check that both agree with CMake). */
#include "internal.h"

NB_EXPORT unsigned nb_version(void)
{
        return NB_VERSION_ENCODE(NB_LIB_VERSION_MAJOR, NB_LIB_VERSION_MINOR, NB_LIB_VERSION_MICRO);
}
