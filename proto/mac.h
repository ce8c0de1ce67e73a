// SPDX-License-Identifier: LGPL-2.1-or-later
/* MAC addresses as text: the one parser of the project. The helper's
 * interface ops and firewall, and the client library's firewall builder and
 * rule-file reader, all use it, so a MAC one side takes the other takes. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Parse exactly six pairs of hex digits separated by ':' ("52:54:00:AB:cd:01"),
 * nothing before, between or after them. Returns 0 or -EINVAL; ret is
 * untouched on failure. */
int nbp_mac_parse(const char *s, uint8_t ret[6]);

/* The same for the first len bytes of s (the firewall's "addr/mask"). */
int nbp_mac_parse_n(const char *s, size_t len, uint8_t ret[6]);
