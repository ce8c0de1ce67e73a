/* The real helper/firewall.c with its kernel functions renamed away (see
 * fake_renames.h): only its pure functions are used. */
#include "fake_renames.h"

#include "firewall.c"
