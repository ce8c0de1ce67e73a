// SPDX-License-Identifier: LGPL-2.1-or-later
/* The rule text (fw_text.h): every field of the model in libvirt's terms,
 * and the line as it is kept in a rule's userdata (cut to fit, the comment
 * first), read back through libnftnl as nft reads it. */
#include <check.h>
#include <libnftnl/rule.h>
#include <libnftnl/udata.h>
#include <string.h>

#include "fw_text.h"
#include "tests_unit.h"

static struct nbd_fw_rule base(enum nbd_fw_dir dir, enum nbd_fw_verdict v)
{
        struct nbd_fw_rule r;

        memset(&r, 0, sizeof(r));
        r.dir = dir;
        r.verdict = v;
        return r;
}

static const char *text(const struct nbd_fw_rule *r)
{
        static char buf[2048];
        int n = nbd_fw_rule_text(r, buf, sizeof(buf));

        ck_assert_int_eq(n, (int)strlen(buf));
        return buf;
}

static struct nbd_fw_mac mac(const char *s, bool neg)
{
        struct nbd_fw_mac m;

        ck_assert_int_eq(nbd_fw_parse_mac(s, &m), 0);
        m.neg = neg;
        return m;
}

static struct nbd_fw_ip ip(const char *s, bool neg)
{
        struct nbd_fw_ip a;

        ck_assert_int_eq(nbd_fw_parse_ip(s, &a), 0);
        a.neg = neg;
        return a;
}

static struct nbd_fw_ip ip_range(const char *from, const char *to, bool neg)
{
        struct nbd_fw_ip a = ip(from, neg), b = ip(to, false);

        a.is_range = true;
        memcpy(a.mask, b.addr, sizeof(a.mask));
        return a;
}

#define NUM(v_, neg_) ((struct nbd_fw_num){true, (neg_), (v_)})

START_TEST(test_fw_text_direction_action_priority_and_empty_match)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_DROP);

        ck_assert_str_eq(text(&r), "out drop");
        r = base(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        ck_assert_str_eq(text(&r), "in accept");
        r.verdict = NBD_FW_V_REJECT;
        ck_assert_str_eq(text(&r), "in reject");
        r.verdict = NBD_FW_V_RETURN;
        r.priority = -700;
        ck_assert_str_eq(text(&r), "in return priority='-700'");
}
END_TEST

START_TEST(test_fw_text_mac_and_ether_type)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_RETURN);

        r.ether_src = mac("52:54:00:12:34:56", false);
        ck_assert_str_eq(text(&r), "out return mac srcmacaddr='52:54:00:12:34:56'");
        r.ether_src = mac("52:54:00:12:34:56", true);
        r.ether_dst = mac("01:00:00:00:00:00/01:00:00:00:00:00", false);
        ck_assert_str_eq(text(&r), "out return mac srcmacaddr='!52:54:00:12:34:56' "
                                   "dstmacaddr='01:00:00:00:00:00' dstmacmask='01:00:00:00:00:00'");
        r = base(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r.ether_type = NUM(0x88cc, false);
        ck_assert_str_eq(text(&r), "out drop mac protocolid='0x88cc'");
        r.ether_type = NUM(0x0800, true);
        ck_assert_str_eq(text(&r), "out drop mac protocolid='!ipv4'");
        r.ether_type = NUM(0x86dd, true);
        ck_assert_str_eq(text(&r), "out drop mac protocolid='!ipv6'");
        /* Implied by the element: not repeated. */
        r.ether_type = NUM(0x0800, false);
        ck_assert_str_eq(text(&r), "out drop ip");
        r.ether_type = NUM(0x86dd, false);
        ck_assert_str_eq(text(&r), "out drop ipv6");
        r.ether_type = NUM(0x0806, false);
        ck_assert_str_eq(text(&r), "out drop arp");
        r.ether_type = NUM(0x8035, false);
        ck_assert_str_eq(text(&r), "out drop rarp");
        r.ether_type = NUM(0x8100, false);
        ck_assert_str_eq(text(&r), "out drop vlan");
}
END_TEST

START_TEST(test_fw_text_vlan)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_TO, NBD_FW_V_DROP);

        r.vlan_id = NUM(7, false);
        ck_assert_str_eq(text(&r), "in drop vlan vlanid='7'");
        r.vlan_id = NUM(7, true);
        r.vlan_encap = NUM(0x0806, false);
        ck_assert_str_eq(text(&r), "in drop vlan vlanid='!7' encap-protocol='arp'");
        r.vlan_encap = NUM(0x1234, true);
        ck_assert_str_eq(text(&r), "in drop vlan vlanid='!7' encap-protocol='!0x1234'");
}
END_TEST

START_TEST(test_fw_text_arp_and_rarp)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);

        r.arp_htype = NUM(1, false);
        r.arp_ptype = NUM(0x0800, true);
        r.arp_op = NUM(2, false);
        r.arp_sha = mac("52:54:00:12:34:56", false);
        r.arp_tha = mac("ff:ff:ff:ff:ff:ff", true);
        r.arp_spa = ip("192.0.2.10", false);
        r.arp_tpa = ip("10.0.0.0/8", true);
        ck_assert_str_eq(text(&r), "out accept arp hwtype='1' protocoltype='!0x0800' "
                                   "opcode='Reply' arpsrcmacaddr='52:54:00:12:34:56' "
                                   "arpdstmacaddr='!ff:ff:ff:ff:ff:ff' arpsrcipaddr='192.0.2.10' "
                                   "arpdstipaddr='!10.0.0.0' arpdstipmask='8'");
        r = base(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r.arp_op = NUM(9, true);
        ck_assert_str_eq(text(&r), "out drop arp opcode='!ARP_NAK'");
        r.arp_op = NUM(300, false);
        ck_assert_str_eq(text(&r), "out drop arp opcode='300'");
        r = base(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r.arp_gratuitous = (struct nbd_fw_num){.set = true};
        ck_assert_str_eq(text(&r), "out drop arp gratuitous='true'");
        r.arp_gratuitous.neg = true;
        ck_assert_str_eq(text(&r), "out drop arp match='no' gratuitous='true'");
        r = base(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        r.ether_type = NUM(0x8035, false);
        r.arp_op = NUM(3, false);
        r.arp_sha = mac("52:54:00:00:00:00/ff:ff:ff:00:00:00", false);
        ck_assert_str_eq(text(&r), "in accept rarp opcode='Request_Reverse' "
                                   "arpsrcmacaddr='52:54:00:00:00:00' "
                                   "arpsrcmacmask='ff:ff:ff:00:00:00'");
}
END_TEST

START_TEST(test_fw_text_ip_addresses_masks_and_ranges)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_RETURN);

        r.ip_src = ip("192.0.2.10", false);
        ck_assert_str_eq(text(&r), "out return ip srcipaddr='192.0.2.10'");
        r.ip_src = ip("10.1.0.0/16", true);
        r.ip_dst = ip("198.51.100.0/24", false);
        ck_assert_str_eq(text(&r), "out return ip srcipaddr='!10.1.0.0' srcipmask='16' "
                                   "dstipaddr='198.51.100.0' dstipmask='24'");
        /* A mask that is no prefix (it can only come from the model). */
        r = base(NBD_FW_DIR_FROM, NBD_FW_V_RETURN);
        r.ip_src = ip("10.0.0.1", false);
        r.ip_src.mask[2] = 0;
        ck_assert_str_eq(text(&r), "out return ip srcipaddr='10.0.0.1' srcipmask='255.255.0.255'");
        r = base(NBD_FW_DIR_FROM, NBD_FW_V_RETURN);
        r.ip_src = ip_range("10.0.0.5", "10.0.0.9", true);
        r.ip_dst = ip_range("10.0.1.5", "10.0.1.9", false);
        ck_assert_str_eq(text(&r), "out return ip srcipfrom='!10.0.0.5' srcipto='10.0.0.9' "
                                   "dstipfrom='10.0.1.5' dstipto='10.0.1.9'");
        r = base(NBD_FW_DIR_TO, NBD_FW_V_DROP);
        r.ip_src = ip("fe80::/10", false);
        r.ip_dst = ip("2001:db8::1", true);
        ck_assert_str_eq(text(&r), "in drop ipv6 srcipaddr='fe80::' srcipmask='10' "
                                   "dstipaddr='!2001:db8::1'");
}
END_TEST

START_TEST(test_fw_text_protocol_ports_dscp_icmp_and_flags)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_DROP);

        r.l4proto = NUM(6, false);
        ck_assert_str_eq(text(&r), "out drop ip/ipv6 protocol='tcp'");
        r.l4proto = NUM(17, true);
        ck_assert_str_eq(text(&r), "out drop ip/ipv6 protocol='!udp'");
        r.l4proto = NUM(44, false);
        ck_assert_str_eq(text(&r), "out drop ip/ipv6 protocol='44'");
        r = base(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r.ip_src = ip("0.0.0.0", false);
        r.l4proto = NUM(17, false);
        r.sport[0] = r.sport[1] = 68;
        r.dport[0] = 1;
        r.dport[1] = 1023;
        r.dport_neg = true;
        ck_assert_str_eq(text(&r), "out drop ip srcipaddr='0.0.0.0' protocol='udp' "
                                   "srcportstart='68' dstportstart='!1' dstportend='1023'");
        r.sport_neg = true;
        r.sport[1] = 0;
        ck_assert_str_eq(text(&r), "out drop ip srcipaddr='0.0.0.0' protocol='udp' "
                                   "srcportstart='!68' dstportstart='!1' dstportend='1023'");
        r = base(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        r.dscp = NUM(46, false);
        ck_assert_str_eq(text(&r), "in accept ip dscp='46'");
        r.dscp.neg = true;
        ck_assert_str_eq(text(&r), "in accept ip dscp='!46'");
        r = base(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        r.l4proto = NUM(1, false);
        r.has_icmp_type = true;
        r.icmp_type = 8;
        ck_assert_str_eq(text(&r), "in accept ip protocol='icmp' type='8'");
        r.has_icmp_code = true;
        r.icmp_neg = true;
        ck_assert_str_eq(text(&r), "in accept ip protocol='icmp' type='!8' code='0'");
        r.l4proto = NUM(58, false);
        r.icmp_type = 135;
        r.icmp_neg = false;
        ck_assert_str_eq(text(&r), "in accept ipv6 protocol='icmpv6' type='135' code='0'");
        r = base(NBD_FW_DIR_FROM, NBD_FW_V_REJECT);
        r.l4proto = NUM(6, false);
        r.tcp_flags_mask = 0x02 | 0x10 | 0x04 | 0x01;
        r.tcp_flags = 0x02;
        ck_assert_str_eq(text(&r), "out reject ip/ipv6 protocol='tcp' flags='FIN,SYN,RST,ACK/SYN'");
        r.tcp_flags_mask = 0xc0;
        r.tcp_flags = 0;
        r.tcp_flags_neg = true;
        ck_assert_str_eq(text(&r), "out reject ip/ipv6 protocol='tcp' flags='!ECE,CWR/NONE'");
}
END_TEST

START_TEST(test_fw_text_comment_comes_first_and_is_escaped)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);

        strcpy(r.comment, "guest's \\ ssh\n");
        r.l4proto = NUM(6, false);
        r.dport[0] = 22;
        ck_assert_str_eq(text(&r), "comment='guest\\'s \\\\ ssh\\x0a' out accept ip/ipv6 "
                                   "protocol='tcp' dstportstart='22'");
}
END_TEST

START_TEST(test_fw_text_short_buffer_is_cut_and_counted)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);
        char buf[6];

        r.ip_src = ip("192.0.2.10", false);
        ck_assert_int_eq(nbd_fw_rule_text(&r, buf, sizeof(buf)),
                         (int)strlen("out accept ip srcipaddr='192.0.2.10'"));
        ck_assert_str_eq(buf, "out a");
        ck_assert_int_eq(nbd_fw_rule_text(&r, NULL, 0), 36);
}
END_TEST

/* The stored line: whole when it fits; else the comment first, whole
 * attributes, " ...". */
START_TEST(test_fw_text_stored_keeps_the_comment_first_within_nft_limit)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        char buf[NBD_FW_TEXT_STORED_MAX + 1], full[2048];
        size_t n;

        r.ip_src = ip("2001:db8:1111:2222:3333:4444:5555:6666", false);
        r.ip_dst = ip("2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff", false);
        r.ether_src = mac("52:54:00:12:34:56/ff:ff:ff:ff:ff:00", true);
        r.ether_dst = mac("52:54:00:12:34:57/ff:ff:ff:ff:ff:00", true);
        r.l4proto = NUM(6, false);
        r.sport[0] = 1000;
        r.sport[1] = 2000;
        r.dport[0] = 3000;
        r.dport[1] = 4000;
        r.tcp_flags_mask = 0xff;
        r.tcp_flags = 0x12;
        r.priority = 100;
        nbd_fw_rule_text(&r, full, sizeof(full));
        ck_assert_uint_gt(strlen(full), NBD_FW_TEXT_STORED_MAX);
        /* No comment: the attributes that fit, cut between two. */
        n = nbd_fw_rule_text_stored(&r, buf);
        ck_assert_uint_eq(n, strlen(buf));
        ck_assert_uint_le(n, NBD_FW_TEXT_STORED_MAX);
        ck_assert_str_eq(buf + n - 4, " ...");
        ck_assert(strncmp(full, buf, n - 4) == 0);
        ck_assert(full[n - 4] == ' ');
        /* A short comment: whole, first; the rule cut after it. */
        strcpy(r.comment, "web tier");
        nbd_fw_rule_text(&r, full, sizeof(full));
        n = nbd_fw_rule_text_stored(&r, buf);
        ck_assert_uint_le(n, NBD_FW_TEXT_STORED_MAX);
        ck_assert(strncmp(buf, "comment='web tier' out drop priority='100' ipv6 ", 48) == 0);
        ck_assert(strncmp(full, buf, n - 4) == 0 && full[n - 4] == ' ');
        ck_assert_str_eq(buf + n - 4, " ...");
        /* The longest comment: cut, and the direction and action stay. */
        memset(r.comment, 'c', NBD_FW_COMMENT_MAX);
        r.comment[NBD_FW_COMMENT_MAX] = '\0';
        n = nbd_fw_rule_text_stored(&r, buf);
        ck_assert_uint_eq(n, NBD_FW_TEXT_STORED_MAX);
        ck_assert(strncmp(buf, "comment='ccc", 12) == 0);
        ck_assert_str_eq(buf + n - strlen("...' out drop ..."), "...' out drop ...");
        /* A short rule with a short comment is stored whole. */
        r = base(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        strcpy(r.comment, "ok");
        ck_assert_uint_eq(nbd_fw_rule_text_stored(&r, buf), strlen("comment='ok' in accept"));
        ck_assert_str_eq(buf, "comment='ok' in accept");
}
END_TEST

/* A cut never splits a UTF-8 character of the comment. */
START_TEST(test_fw_text_stored_cuts_a_comment_between_characters)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        char buf[NBD_FW_TEXT_STORED_MAX + 1];
        size_t n, i;

        for (i = 0; i + 2 <= NBD_FW_COMMENT_MAX; i += 2)
                memcpy(r.comment + i, "\xc3\xa9", 2); /* é */
        r.comment[i] = '\0';
        n = nbd_fw_rule_text_stored(&r, buf);
        ck_assert_uint_le(n, NBD_FW_TEXT_STORED_MAX);
        /* comment=' is 9 bytes; then whole é's up to the "...". */
        i = strstr(buf, "...'") - buf;
        ck_assert_uint_eq((i - 9) % 2, 0);
        ck_assert_str_eq(buf + i, "...' out drop");
}
END_TEST

static int comment_cb(const struct nftnl_udata *a, void *data)
{
        const char **out = data;

        if (nftnl_udata_type(a) == NFTNL_UDATA_RULE_COMMENT)
                *out = nftnl_udata_get(a);
        return 0;
}

/* In the rule's userdata as nft's comment, NUL-terminated as nft wants. */
START_TEST(test_fw_text_udata_is_the_rule_comment_nft_reads)
{
        struct nbd_fw_rule r = base(NBD_FW_DIR_TO, NBD_FW_V_DROP);
        struct nftnl_rule *nr = nftnl_rule_alloc();
        const char *got = NULL;
        const void *ud;
        uint32_t len = 0;

        r.vlan_id = NUM(5, false);
        strcpy(r.comment, "no vlan 5");
        ck_assert_int_eq(nbd_fw_rule_udata(nr, &r), 0);
        ud = nftnl_rule_get_data(nr, NFTNL_RULE_USERDATA, &len);
        ck_assert_ptr_nonnull(ud);
        ck_assert_uint_le(len, 256);
        ck_assert_int_ge(nftnl_udata_parse(ud, len, comment_cb, &got), 0);
        ck_assert_ptr_nonnull(got);
        ck_assert_str_eq(got, "comment='no vlan 5' in drop vlan vlanid='5'");
        /* The longest line is the 128 characters nft(8) reads back (and a
         * NUL, behind the TLV's 2-byte header), no more. */
        memset(r.comment, 'x', NBD_FW_COMMENT_MAX);
        r.comment[NBD_FW_COMMENT_MAX] = '\0';
        ck_assert_int_eq(nbd_fw_rule_udata(nr, &r), 0);
        ud = nftnl_rule_get_data(nr, NFTNL_RULE_USERDATA, &len);
        ck_assert_uint_eq(len, 2 + NBD_FW_TEXT_STORED_MAX + 1);
        nftnl_rule_free(nr);
}
END_TEST

TCase *fw_text_tcase(void)
{
        TCase *tc = tcase_create("fw-text");

        tcase_add_test(tc, test_fw_text_direction_action_priority_and_empty_match);
        tcase_add_test(tc, test_fw_text_mac_and_ether_type);
        tcase_add_test(tc, test_fw_text_vlan);
        tcase_add_test(tc, test_fw_text_arp_and_rarp);
        tcase_add_test(tc, test_fw_text_ip_addresses_masks_and_ranges);
        tcase_add_test(tc, test_fw_text_protocol_ports_dscp_icmp_and_flags);
        tcase_add_test(tc, test_fw_text_comment_comes_first_and_is_escaped);
        tcase_add_test(tc, test_fw_text_short_buffer_is_cut_and_counted);
        tcase_add_test(tc, test_fw_text_stored_keeps_the_comment_first_within_nft_limit);
        tcase_add_test(tc, test_fw_text_stored_cuts_a_comment_between_characters);
        tcase_add_test(tc, test_fw_text_udata_is_the_rule_comment_nft_reads);
        return tc;
}
