// SPDX-License-Identifier: LGPL-2.1-or-later
/* The text format of `netbrokerctl fw apply FILE`: owners and their rules,
 * read into one batch of FirewallApply ops (one transaction).
 *
 * One statement per line; words are separated by blanks; '#' starts a
 * comment that runs to the end of the line. A word in double quotes may
 * hold blanks and '#'; \" and \\ in it stand for " and \.
 *
 *   owner NAME [on IFNAME] [replace|ensure]
 *           Starts an owner: NAME is [A-Za-z0-9_.:@-], 1-64 bytes; IFNAME
 *           (1-15 bytes) defaults to NAME; the mode defaults to replace.
 *           Every statement below belongs to the last owner. Each owner
 *           appears once in a file.
 *   group NAME [priority P] [root] [guard MATCH...]
 *           Starts a group ([A-Za-z0-9_-], 1-32 bytes). Without options,
 *           once per owner (nb_fw_group); with them (nb_fw_group_ex), it
 *           selects the group again when it exists with the same options.
 *           priority -1000..1000 orders the groups as libvirt's chains;
 *           guard: entered only for frames its matches hold for; root:
 *           its rules sit in the base chain. Rules before any group go
 *           into a group named "rules".
 *   rule from|to accept|drop|reject|return [MATCH...]
 *           One rule. "from" is what the guest sends, "to" what it
 *           receives. Every MATCH given must hold; each at most once.
 *   filter no-mac-spoofing MAC
 *   filter no-ip-spoofing [IPV4...]
 *   filter no-arp-spoofing MAC [IPV4...]
 *   filter no-promisc MAC
 *   filter allow-dhcp [SERVER]
 *   filter allow-arp
 *   filter clean-traffic MAC [IPV4...]
 *           libvirt's standard filters and netbroker's own no-promisc
 *           (libvirt ships none), see libnetbroker's nb_fw_add_*; each
 *           its own groups, named after it.
 *   filter NAME [VAR=VALUE...]
 *           Any of libvirt's stock filters (nb_fw_add_filter); a variable
 *           given again, or with values joined by ',', has several values.
 *           The seven forms above are taken by position when no argument
 *           holds a '='.
 *
 * MATCH ("!" before the value negates it, where shown):
 *   ether-src [!] MAC[/MASK]      ether-dst [!] MAC[/MASK]
 *   ether-type [!] N|ipv4|arp|ipv6|rarp|vlan
 *   vlan [!] ID                   (0-4095)
 *   vlan-encap [!] N|ipv4|arp|ipv6|rarp|vlan
 *   arp-op [!] N|request|reply
 *   arp-sender-mac [!] MAC        arp-sender-ip [!] ADDR
 *   arp-target-mac [!] MAC        arp-target-ip [!] ADDR
 *   arp-htype [!] N               arp-ptype [!] N|ipv4
 *   arp-gratuitous [!] true
 *   ip-src [!] ADDR[/LEN]|A-B     ip-dst [!] ADDR[/LEN]|A-B  (IPv4 or IPv6)
 *   proto [!] N|tcp|udp|sctp|icmp|icmpv6
 *   sport [!] P[-Q]               dport [!] P[-Q]
 *   dscp [!] N                    (0-63)
 *   icmp-type [!] N               icmp-code N  ('!' negates both)
 *   tcp-flags [!] MASK/SET        (FIN,SYN,RST,PSH,ACK,URG,ECE,CWR, ALL, NONE, N)
 *   priority P                    (-1000..1000)
 *   comment TEXT                  (up to 256 bytes)
 * Numbers are decimal or 0x-prefixed hex.
 *
 * Example:
 *   owner vnet0 ensure
 *   filter no-promisc 52:54:00:12:34:56
 *   filter clean-traffic 52:54:00:12:34:56 192.0.2.10
 *   owner vnet1 on vnet1
 *   group ssh-only
 *   rule to accept proto tcp dport 22
 *   rule to drop ether-type ipv4
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "netbroker.h"

struct fwfile {
        const char *name; /* the file's name, for messages */
        bool force_ensure; /* every owner in ensure mode, whatever the file says */
        char **owners; /* the owner of each op added, in order */
        size_t n_owners;
        char err[512]; /* "NAME:LINE: why" after a failure */
};

/* Read text (len bytes, not NUL-terminated) and add one FirewallApply per
 * owner to batch. Returns the number of owners, or -EINVAL on a syntax
 * error, -ENOMEM; err says where and why. On failure the batch may hold the
 * ops of the owners before the error: free it. */
int fwfile_parse(struct fwfile *f, const char *text, size_t len, nb_batch *batch);
/* Free what fwfile_parse() kept (f->owners). */
void fwfile_done(struct fwfile *f);
