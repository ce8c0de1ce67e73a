/* The real helper/link.c with its kernel functions renamed away (see
 * fake_renames.h): only its pure functions are used. */
#include "fake_renames.h"

#include "link.c"
