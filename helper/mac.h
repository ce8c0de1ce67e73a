/* MAC addresses as text: the helper's one parser, shared by the interface
 * ops and the firewall so that both accept exactly the same addresses. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Parse exactly six pairs of hex digits separated by ':' ("52:54:00:AB:cd:01"),
 * nothing before, between or after them. Returns 0 or -EINVAL; ret is
 * untouched on failure. */
int nbd_mac_parse(const char *s, uint8_t ret[6]);

/* The same for the first len bytes of s (the firewall's "addr/mask"). */
int nbd_mac_parse_n(const char *s, size_t len, uint8_t ret[6]);
