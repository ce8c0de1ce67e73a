// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbroker-demo's steps in files of their own. */
#pragma once

#include <stdio.h>

#include "netbroker.h"

double demo_now_ms(void);
/* The last step's lines of the helper's configuration (dnsmasq allowed,
 * its program_dir under demo_net_dir()), when dnsmasq is installed. */
void demo_net_config(FILE *f);
const char *demo_net_dir(void);
void demo_net_remove_dir(void); /* once the helper is gone */
/* A NAT network with DHCP, a guest's lease and ping, ensure, cleanup
 * (demo_net.c); 0 or -errno, with what failed on stderr. */
int demo_network(nb_conn *c);
