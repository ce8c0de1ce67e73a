// SPDX-License-Identifier: LGPL-2.1-or-later
/* The guest's copy of an inout rule; see fw_ruleset.h. On its own so that
 * the unit tests build it without the rest of the library. */
#include "fw_ruleset.h"

#define SWAP(a, b)                                                                                 \
        do {                                                                                       \
                __typeof__(a) tmp_ = (a);                                                          \
                (a) = (b);                                                                         \
                (b) = tmp_;                                                                        \
        } while (0)

void nb_fw_rule_reverse(nb_fw_rule *r)
{
        SWAP(r->ether_src, r->ether_dst);
        SWAP(r->ether_src_not, r->ether_dst_not);
        SWAP(r->arp_sender_mac, r->arp_target_mac);
        SWAP(r->arp_sender_mac_not, r->arp_target_mac_not);
        SWAP(r->arp_sender_ip, r->arp_target_ip);
        SWAP(r->arp_sender_ip_not, r->arp_target_ip_not);
        SWAP(r->ip_src, r->ip_dst);
        SWAP(r->ip_src_not, r->ip_dst_not);
        SWAP(r->sport_min, r->dport_min);
        SWAP(r->sport_max, r->dport_max);
        SWAP(r->sport_not, r->dport_not);
}
