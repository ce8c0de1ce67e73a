// SPDX-License-Identifier: LGPL-2.1-or-later
/* A model rule in libvirt's nwfilter terms, one line, and that line kept
 * with the rule in nftables (its userdata comment, as nft keeps a rule's
 * comment): FirewallList and `netbrokerctl fw show` read it back, and
 * `nft list ruleset` shows it. Derived from the model, so it is not part
 * of the owner's hash.
 *
 * The line, in order (each part only when the rule has it):
 *   comment='C'     the rule's comment; ' and \ escaped with \, other
 *                   control bytes as \xNN
 *   out|in          the direction: out is what the guest sends (libvirt's
 *                   direction='out'), in what it receives
 *   accept|drop|reject|return
 *   priority='P'    when not 0
 *   ELEMENT         the protocol element libvirt would use: mac, vlan, arp,
 *                   rarp, ip, ipv6, or ip/ipv6 for an IP match of either
 *                   family (a protocol alone); none when the rule matches
 *                   every frame
 *   ATTR='VALUE'... the matches, named as libvirt's XML names them:
 *                   srcmacaddr srcmacmask dstmacaddr dstmacmask protocolid
 *                   vlanid encap-protocol hwtype protocoltype opcode
 *                   arpsrcmacaddr arpsrcmacmask arpdstmacaddr arpdstmacmask
 *                   arpsrcipaddr arpsrcipmask arpdstipaddr arpdstipmask
 *                   gratuitous srcipaddr srcipmask srcipfrom srcipto
 *                   dstipaddr dstipmask dstipfrom dstipto protocol
 *                   srcportstart srcportend dstportstart dstportend dscp
 *                   type code flags (MASK/SET, as libvirt writes it)
 * Negation: libvirt negates a whole element (match='no'); the model
 * negates each match. A negated match is written with '!' before the value
 * of its first attribute, and the '!' negates the match as a whole:
 * srcipaddr='!10.0.0.0' srcipmask='8' is every source outside 10/8,
 * dstportstart='!1' dstportend='1023' every port above 1023, type='!8'
 * code='0' everything but an echo request with code 0. gratuitous (the
 * element's last attribute) has no value of its own to negate: an ARP
 * whose sender and target IP differ is match='no' gratuitous='true', as
 * libvirt writes it; the match='no' negates gratuitous alone (to libvirt,
 * the whole element: the same when gratuitous is its only attribute).
 * protocolid is written only when the element does not imply it. */
#pragma once

#include <libnftnl/rule.h>
#include <stddef.h>

#include "fw_model.h"

/* Render r into buf (len bytes, NUL-terminated when len > 0, cut short
 * when too small). Returns the length of the whole line, as snprintf(). */
int nbd_fw_rule_text(const struct nbd_fw_rule *r, char *buf, size_t len);

/* The longest line stored: the kernel's userdata would hold 253 bytes,
 * but nft(8) refuses to read back a comment over 128 characters, and a
 * ruleset `nft list ruleset` printed must load again with `nft -f`
 * (an operator's backup, the bench's N). */
#define NBD_FW_TEXT_STORED_MAX 128

/* The line as it is stored: the whole line when it fits in
 * NBD_FW_TEXT_STORED_MAX bytes; else the comment is kept first (whole, or
 * cut to leave room for the direction and action), then as many whole
 * attributes as fit, then " ...". Returns its length. */
size_t nbd_fw_rule_text_stored(const struct nbd_fw_rule *r, char buf[NBD_FW_TEXT_STORED_MAX + 1]);

/* Store the line in nr's userdata as its comment (NFTNL_UDATA_RULE_COMMENT,
 * nft's own). 0 or -ENOMEM. */
int nbd_fw_rule_udata(struct nftnl_rule *nr, const struct nbd_fw_rule *r);
