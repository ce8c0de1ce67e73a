// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall compiler without a kernel: what rules compile to (read back
 * through libnftnl's parser), the content hash, and what is refused. */
#include <check.h>
#include <libnftnl/udata.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_compile.h"
#include "fw_model.h"
#include "fw_render.h"
#include "fw_table.h"
#include "tests_unit.h"

static struct nbd_fw_rule rule(enum nbd_fw_dir dir, enum nbd_fw_verdict v)
{
        struct nbd_fw_rule r;

        memset(&r, 0, sizeof(r));
        r.dir = dir;
        r.verdict = v;
        return r;
}

static char *render(struct nbd_fw_rule *rules, size_t n)
{
        struct nbd_fw_group g = {.name = "g", .rules = rules, .n_rules = n};
        struct nbd_fw_owner_spec s = {
                .owner = "vnet0", .ifname = "vnet0", .groups = &g, .n_groups = 1};
        struct nbd_err err;
        char *text = NULL;

        ck_assert_msg(nbd_fw_render(&s, &text, &err) == 0, "render: %s", err.msg);
        return text;
}

static void assert_has(const char *text, const char *needle)
{
        ck_assert_msg(strstr(text, needle), "expected\n  %s\nin\n%s", needle, text);
}

START_TEST(test_fw_mac_and_ip_rules_compile_to_the_expected_expressions)
{
        struct nbd_fw_rule r[3];
        char *t;

        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:AB:cd:01", &r[0].ether_src), 0);
        r[0].ether_src.neg = true;
        r[1] = rule(NBD_FW_DIR_FROM, NBD_FW_V_RETURN);
        ck_assert_int_eq(nbd_fw_parse_ip("10.1.2.0/24", &r[1].ip_src), 0);
        r[2] = rule(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        ck_assert_int_eq(nbd_fw_parse_mac("01:00:00:00:00:00/01:00:00:00:00:00", &r[2].ether_dst),
                         0);
        t = render(r, 3);
        /* The chains: a group chain per direction, then the base chains. */
        assert_has(t, "chain vnet0/from/g\n");
        assert_has(t, "chain vnet0/to/g\n");
        assert_has(t, "chain vnet0/from\n");
        assert_has(t, "chain vnet0/to\n");
        /* ether saddr != 52:54:00:ab:cd:01 counter drop */
        assert_has(t, "[ payload load 6b @ link header + 6 => reg 1 ] [ cmp neq reg 1 0xab005452 "
                      "0x000001cd ] "
                      "[ counter pkts 0 bytes 0 ] [ immediate reg 0 drop ]");
        /* ip saddr 10.1.2.0/24 return, with its protocol dependency first:
         * the outer type (bytes 12-13 as on the wire; it was meta protocol,
         * the inner type of a tagged frame, before issue 13) */
        assert_has(t, "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000008 ] "
                      "[ payload load 4b @ network header + 12 => reg 1 ] "
                      "[ bitwise reg 1 = ( reg 1 & 0x00ffffff ) ^ 0x00000000 ] [ cmp eq reg 1 "
                      "0x0002010a ] "
                      "[ counter pkts 0 bytes 0 ] [ immediate reg 0 return ]");
        /* multicast destination: masked */
        assert_has(t,
                   "[ payload load 6b @ link header + 0 => reg 1 ] [ bitwise reg 1 = ( reg 1 & "
                   "0x00000001 "
                   "0x00000000 ) ^ 0x00000000 0x00000000 ] [ cmp eq reg 1 0x00000001 0x00000000 ] "
                   "[ counter pkts 0 bytes 0 ] [ immediate reg 0 accept ]");
        /* the base chain jumps to the group */
        assert_has(t, "[ immediate reg 0 jump -> vnet0/from/g ]");
        free(t);
}
END_TEST

START_TEST(test_fw_arp_port_icmp_vlan_and_reject_compile)
{
        struct nbd_fw_rule r[4];
        char *t;

        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[0].arp_op = (struct nbd_fw_num){true, true, 1};
        ck_assert_int_eq(nbd_fw_parse_ip("192.168.0.7", &r[0].arp_spa), 0);
        r[0].arp_spa.neg = true;
        r[1] = rule(NBD_FW_DIR_FROM, NBD_FW_V_REJECT);
        r[1].l4proto = (struct nbd_fw_num){true, false, 6};
        r[1].dport[0] = 22;
        r[1].dport[1] = 80;
        r[2] = rule(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        r[2].l4proto = (struct nbd_fw_num){true, false, 58};
        r[2].has_icmp_type = true;
        r[2].icmp_type = 135;
        r[3] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[3].vlan_id = (struct nbd_fw_num){true, false, 42};
        t = render(r, 4);
        /* arp operation != request: ARP protocol (the outer type), then the opcode */
        assert_has(
                t,
                "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000608 ] "
                "[ payload load 2b @ network header + 6 => reg 1 ] [ cmp neq reg 1 0x00000100 ]");
        assert_has(
                t,
                "[ payload load 4b @ network header + 14 => reg 1 ] [ cmp neq reg 1 0x0700a8c0 ]");
        /* tcp dport 22-80 reject */
        assert_has(
                t,
                "[ meta load l4proto => reg 1 ] [ cmp eq reg 1 0x00000006 ] "
                "[ payload load 2b @ transport header + 2 => reg 1 ] [ cmp gte reg 1 0x00001600 ] "
                "[ cmp lte reg 1 0x00005000 ] [ counter pkts 0 bytes 0 ] [ reject type 2 code 1 ]");
        assert_has(
                t,
                "[ payload load 1b @ transport header + 0 => reg 1 ] [ cmp eq reg 1 0x00000087 ]");
        /* vlan id 42: the TPID, then the 12-bit id */
        assert_has(t, "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000081 ] "
                      "[ payload load 2b @ link header + 14 => reg 1 ] "
                      "[ bitwise reg 1 = ( reg 1 & 0x0000ff0f ) ^ 0x00000000 ] [ cmp eq reg 1 "
                      "0x00002a00 ]");
        free(t);
}
END_TEST

static void hash_of(struct nbd_fw_rule *r, size_t n, const char *ifname, char out[NBD_FW_HASH_HEX])
{
        struct nbd_fw_group g = {.name = "g", .rules = r, .n_rules = n};
        struct nbd_fw_owner_spec s = {
                .owner = "vnet0", .ifname = ifname, .groups = &g, .n_groups = 1};
        struct nbd_err err;
        unsigned rules;

        size_t want = 0;

        for (size_t i = 0; i < n; i++)
                want += nbd_fw_rule_alts(&r[i]);
        ck_assert_msg(nbd_fw_hash(&s, out, &rules, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(rules, want);
}

START_TEST(test_fw_hash_is_stable_canonical_and_sensitive)
{
        struct nbd_fw_rule a = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP), b;
        char h1[NBD_FW_HASH_HEX], h2[NBD_FW_HASH_HEX];

        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.5", &a.ip_src), 0);
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00:01", &a.ether_src), 0);
        hash_of(&a, 1, "vnet0", h1);
        hash_of(&a, 1, "vnet0", h2);
        ck_assert_str_eq(h1, h2);
        ck_assert_uint_eq(strlen(h1), 32);
        /* The same rule written differently hashes the same. */
        b = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.5/32", &b.ip_src), 0);
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00:01/ff:ff:ff:ff:ff:ff", &b.ether_src), 0);
        hash_of(&b, 1, "vnet0", h2);
        ck_assert_str_eq(h1, h2);
        /* Any change changes it: each field in turn, and the interface. */
        for (int field = 0; field < 8; field++) {
                b = a;
                switch (field) {
                case 0:
                        b.verdict = NBD_FW_V_ACCEPT;
                        break;
                case 1:
                        b.dir = NBD_FW_DIR_TO;
                        break;
                case 2:
                        b.ip_src.neg = true;
                        break;
                case 3:
                        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.6", &b.ip_src), 0);
                        break;
                case 4:
                        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00:02", &b.ether_src), 0);
                        break;
                case 5:
                        b.l4proto = (struct nbd_fw_num){true, false, 17};
                        break;
                case 6:
                        b.ether_dst.set = true;
                        memset(b.ether_dst.mask, 0xff, 6);
                        break;
                case 7:
                        b.vlan_id = (struct nbd_fw_num){true, false, 1};
                        break;
                }
                hash_of(&b, 1, "vnet0", h2);
                ck_assert_msg(strcmp(h1, h2) != 0, "field %d did not change the hash", field);
        }
        hash_of(&a, 1, "vnet1", h2);
        ck_assert_str_ne(h1, h2);
}
END_TEST

/* Leave garbage where the next call's locals will be. */
static void __attribute__((noinline)) dirty_stack(unsigned char byte)
{
        volatile unsigned char junk[32768];

        for (size_t i = 0; i < sizeof(junk); i++)
                junk[i] = byte;
}

/* A rule whose netlink encoding has padding (an IP, and both ports): its
 * hash must not depend on what was in memory before. */
START_TEST(test_fw_hash_does_not_depend_on_memory_contents)
{
        struct nbd_fw_rule r = rule(NBD_FW_DIR_FROM, NBD_FW_V_RETURN);
        char h1[NBD_FW_HASH_HEX], h2[NBD_FW_HASH_HEX];

        ck_assert_int_eq(nbd_fw_parse_ip("0.0.0.0", &r.ip_src), 0);
        r.l4proto = (struct nbd_fw_num){true, false, 17};
        r.sport[0] = r.sport[1] = 68;
        r.dport[0] = r.dport[1] = 67;
        dirty_stack(0x00);
        hash_of(&r, 1, "vnet0", h1);
        dirty_stack(0xa5);
        hash_of(&r, 1, "vnet0", h2);
        ck_assert_str_eq(h1, h2);
}
END_TEST

START_TEST(test_fw_bad_rules_are_refused_before_anything_is_sent)
{
        struct nbd_fw_ip ip;
        struct nbd_fw_mac mac;
        struct nbd_fw_rule r;
        struct nbd_err err;

        ck_assert_int_eq(nbd_fw_parse_ip("fe80::/129", &ip), -EINVAL);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.0/33", &ip), -EINVAL);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.0/", &ip), -EINVAL);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.256", &ip), -EINVAL);
        ck_assert_int_eq(nbd_fw_parse_ip("fe80::/64", &ip), 0);
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00", &mac), -EINVAL);
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00:0g", &mac), -EINVAL);
        /* A reversed port range. */
        r = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r.l4proto = (struct nbd_fw_num){true, false, 6};
        r.dport[0] = 80;
        r.dport[1] = 22;
        ck_assert_int_eq(nbd_fw_rule_check(&r, false, &err), -EINVAL);
        ck_assert_msg(strstr(err.msg, "reversed"), "%s", err.msg);
        /* Ports without a protocol that has ports. */
        r = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r.dport[0] = r.dport[1] = 53;
        ck_assert_int_eq(nbd_fw_rule_check(&r, false, &err), -EINVAL);
        /* Reject toward the guest. */
        r = rule(NBD_FW_DIR_TO, NBD_FW_V_REJECT);
        ck_assert_int_eq(nbd_fw_rule_check(&r, false, &err), -EINVAL);
        /* ARP and IP at once; IPv6 addresses in ARP; contradicting type. */
        r = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r.arp_op = (struct nbd_fw_num){true, false, 1};
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.1", &r.ip_src), 0);
        ck_assert_int_eq(nbd_fw_rule_check(&r, false, &err), -EINVAL);
        r = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        ck_assert_int_eq(nbd_fw_parse_ip("fe80::1", &r.arp_spa), 0);
        ck_assert_int_eq(nbd_fw_rule_check(&r, false, &err), -EINVAL);
        r = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r.ether_type = (struct nbd_fw_num){true, false, 0x86dd};
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.1", &r.ip_dst), 0);
        ck_assert_int_eq(nbd_fw_rule_check(&r, false, &err), -EINVAL);
        /* Names. */
        ck_assert(nbd_fw_owner_valid("vnet12"));
        ck_assert(nbd_fw_owner_valid("eth0.100"));
        ck_assert(!nbd_fw_owner_valid("a/b"));
        ck_assert(!nbd_fw_owner_valid(""));
        ck_assert(!nbd_fw_group_valid("no spaces"));
        ck_assert(nbd_fw_group_valid("no-mac-spoofing"));
}
END_TEST

static struct nbd_fw_num num(uint32_t v, bool neg)
{
        return (struct nbd_fw_num){true, neg, v};
}

/* A whole rule of t: its expressions from the first (whatever follows
 * them: a rule may carry userdata). */
static void assert_rule(const char *t, const char *rule_text)
{
        char *needle;

        ck_assert_int_ge(asprintf(&needle, "\n  %s ", rule_text), 0);
        assert_has(t, needle);
        free(needle);
}

START_TEST(test_fw_vlan_and_outer_type_compile_as_ebtables_sees_them)
{
        struct nbd_fw_rule r[3];
        char *t;

        /* ether type != 0x0800 and not 0x8100... with a VLAN id != 5 */
        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[0].vlan_id = num(5, true);
        r[1] = rule(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);
        r[1].vlan_encap = num(0x0806, false);
        r[2] = rule(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);
        r[2].ether_type = num(0x8100, false);
        t = render(r, 3);
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000081 ] "
                    "[ payload load 2b @ link header + 14 => reg 1 ] "
                    "[ bitwise reg 1 = ( reg 1 & 0x0000ff0f ) ^ 0x00000000 ] "
                    "[ cmp neq reg 1 0x00000500 ] [ counter pkts 0 bytes 0 ] "
                    "[ immediate reg 0 drop ]");
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000081 ] "
                    "[ payload load 2b @ link header + 16 => reg 1 ] "
                    "[ cmp eq reg 1 0x00000608 ] [ counter pkts 0 bytes 0 ] "
                    "[ immediate reg 0 accept ]");
        /* "any VLAN": the outer type, never meta protocol */
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000081 ] "
                    "[ counter pkts 0 bytes 0 ] [ immediate reg 0 accept ]");
        ck_assert_msg(!strstr(t, "meta load protocol"), "%s", t);
        free(t);
}
END_TEST

START_TEST(test_fw_arp_and_rarp_fields_compile_with_ebt_arp_header_checks)
{
        struct nbd_fw_rule r[3];
        char *t;

        /* RARP, opcode 3, hardware type not 6, sender MAC */
        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[0].ether_type = num(0x8035, false);
        r[0].arp_op = num(3, false);
        r[0].arp_htype = num(6, true);
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00:02", &r[0].arp_sha), 0);
        /* ARP target MAC and a target IP range */
        r[1] = rule(NBD_FW_DIR_FROM, NBD_FW_V_RETURN);
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00:01", &r[1].arp_tha), 0);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.1-10.0.0.9", &r[1].arp_tpa), 0);
        r[1].arp_tpa.neg = true;
        r[2] = rule(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);
        r[2].arp_ptype = num(0x0800, false);
        t = render(r, 3);
        assert_rule(
                t, "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00003580 ] "
                   "[ payload load 2b @ network header + 0 => reg 1 ] [ cmp neq reg 1 0x00000600 ] "
                   "[ payload load 2b @ network header + 6 => reg 1 ] [ cmp eq reg 1 0x00000300 ] "
                   "[ payload load 2b @ network header + 0 => reg 1 ] [ cmp eq reg 1 0x00000100 ] "
                   "[ payload load 1b @ network header + 4 => reg 1 ] [ cmp eq reg 1 0x00000006 ] "
                   "[ payload load 6b @ network header + 8 => reg 1 ] "
                   "[ cmp eq reg 1 0x00005452 0x00000200 ] [ counter pkts 0 bytes 0 ] "
                   "[ immediate reg 0 drop ]");
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000608 ] "
                    "[ payload load 2b @ network header + 0 => reg 1 ] [ cmp eq reg 1 0x00000100 ] "
                    "[ payload load 2b @ network header + 2 => reg 1 ] [ cmp eq reg 1 0x00000008 ] "
                    "[ payload load 2b @ network header + 4 => reg 1 ] [ cmp eq reg 1 0x00000406 ] "
                    "[ payload load 6b @ network header + 18 => reg 1 ] "
                    "[ cmp eq reg 1 0x00005452 0x00000100 ] "
                    "[ payload load 4b @ network header + 24 => reg 1 ] "
                    "[ range neq reg 1 0x0100000a 0x0900000a ] [ counter pkts 0 bytes 0 ] "
                    "[ immediate reg 0 return ]");
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000608 ] "
                    "[ payload load 2b @ network header + 2 => reg 1 ] [ cmp eq reg 1 0x00000008 ] "
                    "[ counter pkts 0 bytes 0 ] [ immediate reg 0 accept ]");
        free(t);
}
END_TEST

/* ebt_arp's gratuitous (sender IP == target IP): the ARP/IPv4 header
 * checks of the IP fields, then each byte pair looked up in the shared
 * set of pairs (b . b), the target's last byte first; negated, one
 * alternative per byte that differs first, from the last, and one for
 * hardware addresses that are not 6 bytes long. */
START_TEST(test_fw_gratuitous_compiles_to_byte_pair_lookups)
{
        static const char head[] =
                "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000608 ] "
                "[ payload load 2b @ network header + 2 => reg 1 ] [ cmp eq reg 1 0x00000008 ] "
                "[ payload load 2b @ network header + 4 => reg 1 ] [ cmp eq reg 1 0x00000406 ] ";
        static const char *const pair[4] = {"[ payload load 1b @ network header + 17 => reg 1 ] "
                                            "[ payload load 1b @ network header + 27 => reg 9 ] ",
                                            "[ payload load 1b @ network header + 16 => reg 1 ] "
                                            "[ payload load 1b @ network header + 26 => reg 9 ] ",
                                            "[ payload load 1b @ network header + 15 => reg 1 ] "
                                            "[ payload load 1b @ network header + 25 => reg 9 ] ",
                                            "[ payload load 1b @ network header + 14 => reg 1 ] "
                                            "[ payload load 1b @ network header + 24 => reg 9 ] "};
        static const char found[] = "[ lookup reg 1 set same_byte ] ";
        static const char missing[] = "[ lookup reg 1 set same_byte 0x1 ] ";
        struct nbd_fw_rule r[2];
        char want[1024];
        char *t;
        int n;

        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[0].arp_gratuitous = num(1, false);
        r[1] = rule(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        r[1].arp_gratuitous = num(1, true);
        ck_assert_uint_eq(nbd_fw_rule_alts(&r[0]), 1);
        ck_assert_uint_eq(nbd_fw_rule_alts(&r[1]), 5);
        t = render(r, 2);
        /* the set and its elements go first, ahead of the chains */
        ck_assert_msg(strncmp(t, "set same_byte\nelements same_byte\nchain ",
                              strlen("set same_byte\nelements same_byte\nchain ")) == 0,
                      "%s", t);
        n = snprintf(want, sizeof(want),
                     "%s%s%s%s%s%s%s%s%s[ counter pkts 0 bytes 0 ] "
                     "[ immediate reg 0 drop ]",
                     head, pair[0], found, pair[1], found, pair[2], found, pair[3], found);
        ck_assert_int_lt(n, (int)sizeof(want));
        assert_rule(t, want);
        for (int alt = 0; alt < 4; alt++) {
                n = snprintf(want, sizeof(want), "%s", head);
                for (int k = 0; k <= alt; k++)
                        n += snprintf(want + n, sizeof(want) - (size_t)n, "%s%s", pair[k],
                                      k == alt ? missing : found);
                snprintf(want + n, sizeof(want) - (size_t)n,
                         "[ counter pkts 0 bytes 0 ] [ immediate reg 0 accept ]");
                assert_rule(t, want);
        }
        /* the 5th: hardware addresses not 6 bytes long, IPv4 ones */
        assert_rule(t, "[ payload load 2b @ link header + 12 => reg 1 ] "
                       "[ cmp eq reg 1 0x00000608 ] "
                       "[ payload load 2b @ network header + 2 => reg 1 ] "
                       "[ cmp eq reg 1 0x00000008 ] "
                       "[ payload load 1b @ network header + 4 => reg 1 ] "
                       "[ cmp neq reg 1 0x00000006 ] "
                       "[ payload load 1b @ network header + 5 => reg 1 ] "
                       "[ cmp eq reg 1 0x00000004 ] [ counter pkts 0 bytes 0 ] "
                       "[ immediate reg 0 accept ]");
        free(t);
        /* a field read at the offsets of 6-byte addresses: no 5th */
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.0/8", &r[1].arp_spa), 0);
        ck_assert_uint_eq(nbd_fw_rule_alts(&r[1]), 4);

        /* an owner without gratuitous has no set item */
        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[0].arp_op = num(1, false);
        t = render(r, 1);
        ck_assert_msg(!strstr(t, "same_byte"), "%s", t);
        free(t);
}
END_TEST

START_TEST(test_fw_ipv4_fields_compile_to_header_loads)
{
        struct nbd_fw_rule r[4];
        char *t;

        /* IPv4 protocol != 17: the header's field, not meta l4proto */
        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[0].ether_type = num(0x0800, false);
        r[0].l4proto = num(17, true);
        /* dscp 46, src range, tcp flags SYN of SYN|ACK, dport not 22-80 */
        r[1] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.50-10.0.0.60", &r[1].ip_src), 0);
        r[1].dscp = num(46, false);
        r[1].l4proto = num(6, false);
        r[1].dport[0] = 22;
        r[1].dport[1] = 80;
        r[1].dport_neg = true;
        r[1].tcp_flags_mask = 0x12;
        r[1].tcp_flags = 0x02;
        /* icmp not (8, 1) */
        r[2] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[2].dscp = num(0, true);
        r[2].l4proto = num(1, false);
        r[2].has_icmp_type = r[2].has_icmp_code = r[2].icmp_neg = true;
        r[2].icmp_type = 8;
        r[2].icmp_code = 1;
        r[3] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[3].ether_type = num(0x0800, false);
        r[3].l4proto = num(17, false);
        r[3].sport[0] = 68;
        r[3].sport_neg = true;
        t = render(r, 4);
        assert_rule(
                t, "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000008 ] "
                   "[ payload load 1b @ network header + 9 => reg 1 ] [ cmp neq reg 1 0x00000011 ] "
                   "[ counter pkts 0 bytes 0 ] [ immediate reg 0 drop ]");
        assert_rule(
                t, "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000008 ] "
                   "[ payload load 4b @ network header + 12 => reg 1 ] "
                   "[ range eq reg 1 0x3200000a 0x3c00000a ] "
                   "[ payload load 1b @ network header + 1 => reg 1 ] "
                   "[ bitwise reg 1 = ( reg 1 & 0x000000fc ) ^ 0x00000000 ] "
                   "[ cmp eq reg 1 0x000000b8 ] "
                   "[ payload load 1b @ network header + 9 => reg 1 ] [ cmp eq reg 1 0x00000006 ] "
                   "[ payload load 2b @ network header + 6 => reg 1 ] [ bitwise reg 1 = ( reg 1 & "
                   "0x0000ff1f ) ^ 0x00000000 ] [ cmp eq reg 1 0x00000000 ] "
                   "[ payload load 1b @ network header + 0 => reg 1 ] [ cmp neq reg 1 0x00000045 ] "
                   "[ payload load 2b @ transport header + 2 => reg 1 ] "
                   "[ range neq reg 1 0x00001600 0x00005000 ] "
                   "[ payload load 1b @ transport header + 13 => reg 1 ] "
                   "[ bitwise reg 1 = ( reg 1 & 0x00000012 ) ^ 0x00000000 ] "
                   "[ cmp eq reg 1 0x00000002 ] [ counter pkts 0 bytes 0 ] "
                   "[ immediate reg 0 drop ]");
        /* ... and, for a 20-byte header, read behind it whatever the total
         * length says (as ebt_ip), disjoint from the above by that byte */
        assert_has(t,
                   "[ payload load 1b @ network header + 0 => reg 1 ] [ cmp eq reg 1 0x00000045 ] "
                   "[ payload load 2b @ network header + 22 => reg 1 ] "
                   "[ range neq reg 1 0x00001600 0x00005000 ] "
                   "[ payload load 1b @ network header + 33 => reg 1 ] "
                   "[ bitwise reg 1 = ( reg 1 & 0x00000012 ) ^ 0x00000000 ] "
                   "[ cmp eq reg 1 0x00000002 ] [ counter pkts 0 bytes 0 ] "
                   "[ immediate reg 0 drop ]");
        assert_has(t,
                   "[ bitwise reg 1 = ( reg 1 & 0x000000fc ) ^ 0x00000000 ] "
                   "[ cmp neq reg 1 0x00000000 ] "
                   "[ payload load 1b @ network header + 9 => reg 1 ] [ cmp eq reg 1 0x00000001 ] "
                   "[ payload load 2b @ network header + 6 => reg 1 ] [ bitwise reg 1 = ( reg 1 & "
                   "0x0000ff1f ) ^ 0x00000000 ] [ cmp eq reg 1 0x00000000 ] "
                   "[ payload load 1b @ network header + 0 => reg 1 ] [ cmp neq reg 1 0x00000045 ] "
                   "[ payload load 2b @ transport header + 0 => reg 1 ] "
                   "[ cmp neq reg 1 0x00000108 ] [ counter pkts 0 bytes 0 ]");
        assert_has(t,
                   "[ payload load 1b @ network header + 0 => reg 1 ] [ cmp eq reg 1 0x00000045 ] "
                   "[ payload load 2b @ network header + 20 => reg 1 ] "
                   "[ cmp neq reg 1 0x00000108 ] [ counter pkts 0 bytes 0 ]");
        assert_has(t, "[ payload load 2b @ transport header + 0 => reg 1 ] "
                      "[ cmp neq reg 1 0x00004400 ] [ counter pkts 0 bytes 0 ]");
        free(t);
}
END_TEST

/* ebt_ip6's protocol around fragments: two nft rules where one cannot say it. */
START_TEST(test_fw_ipv6_protocol_tells_later_fragments_apart)
{
        struct nbd_fw_rule r[3];
        char *t;

        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);
        ck_assert_int_eq(nbd_fw_parse_ip("fe80::/10", &r[0].ip_src), 0);
        r[0].l4proto = num(58, false);
        r[1] = rule(NBD_FW_DIR_TO, NBD_FW_V_DROP);
        r[1].ether_type = num(0x86dd, false);
        r[1].l4proto = num(17, true);
        r[2] = rule(NBD_FW_DIR_TO, NBD_FW_V_ACCEPT);
        r[2].ether_type = num(0x86dd, false);
        r[2].l4proto = num(44, false);
        ck_assert_uint_eq(nbd_fw_rule_alts(&r[0]), 3);
        ck_assert_uint_eq(nbd_fw_rule_alts(&r[1]), 3);
        ck_assert_uint_eq(nbd_fw_rule_alts(&r[2]), 1);
        {
                /* destination options (60) are skipped by ebt_ip6, never its
                 * protocol: no "next header 60" alternative */
                struct nbd_fw_rule d = rule(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);
                char *dt;

                d.ether_type = num(0x86dd, false);
                d.l4proto = num(60, false);
                ck_assert_uint_eq(nbd_fw_rule_alts(&d), 2);
                dt = render(&d, 1);
                ck_assert_msg(!strstr(dt, "[ cmp eq reg 1 0x0000003c ] [ counter"), "%s", dt);
                free(dt);
        }
        t = render(r, 3);
        /* 58: the next header, read without the kernel's validation of the
         * payload length (ebt_ip6 does not check it) */
        assert_has(t,
                   "[ payload load 1b @ network header + 6 => reg 1 ] [ cmp eq reg 1 0x0000003a ] "
                   "[ counter pkts 0 bytes 0 ] [ immediate reg 0 accept ]");
        /* 58: behind other headers: no fragment header, or offset 0 */
        assert_has(t,
                   "[ payload load 1b @ network header + 6 => reg 1 ] [ cmp neq reg 1 0x0000003a ] "
                   "[ meta load l4proto => reg 1 ] [ cmp eq reg 1 0x0000003a ] "
                   "[ exthdr load ipv6 1b @ 44 + 0 present => reg 1 ]");
        assert_has(t,
                   "[ meta load l4proto => reg 1 ] [ cmp eq reg 1 0x0000003a ] "
                   "[ exthdr load ipv6 1b @ 44 + 0 present => reg 1 ] [ cmp eq reg 1 0x00000000 ] "
                   "[ counter pkts 0 bytes 0 ] [ immediate reg 0 accept ]");
        assert_has(t, "[ meta load l4proto => reg 1 ] [ cmp eq reg 1 0x0000003a ] "
                      "[ exthdr load ipv6 2b @ 44 + 2 => reg 1 ] "
                      "[ bitwise reg 1 = ( reg 1 & 0x0000f8ff ) ^ 0x00000000 ] "
                      "[ cmp eq reg 1 0x00000000 ] [ counter pkts 0 bytes 0 ] "
                      "[ immediate reg 0 accept ]");
        /* not 17: a later fragment (44), or a protocol neither 17 nor 59 */
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x0000dd86 ] "
                    "[ exthdr load ipv6 2b @ 44 + 2 => reg 1 ] "
                    "[ bitwise reg 1 = ( reg 1 & 0x0000f8ff ) ^ 0x00000000 ] "
                    "[ cmp neq reg 1 0x00000000 ] [ counter pkts 0 bytes 0 ] "
                    "[ immediate reg 0 drop ]");
        /* ... but not a later fragment: meta l4proto is then the fragment
         * header's next header, and the alternatives must be disjoint */
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x0000dd86 ] "
                    "[ meta load l4proto => reg 1 ] [ cmp neq reg 1 0x00000011 ] "
                    "[ cmp neq reg 1 0x0000003b ] "
                    "[ exthdr load ipv6 1b @ 44 + 0 present => reg 1 ] [ cmp eq reg 1 0x00000000 ] "
                    "[ counter pkts 0 bytes 0 ] [ immediate reg 0 drop ]");
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x0000dd86 ] "
                    "[ meta load l4proto => reg 1 ] [ cmp neq reg 1 0x00000011 ] "
                    "[ cmp neq reg 1 0x0000003b ] [ exthdr load ipv6 2b @ 44 + 2 => reg 1 ] "
                    "[ bitwise reg 1 = ( reg 1 & 0x0000f8ff ) ^ 0x00000000 ] "
                    "[ cmp eq reg 1 0x00000000 ] [ counter pkts 0 bytes 0 ] "
                    "[ immediate reg 0 drop ]");
        assert_rule(t,
                    "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x0000dd86 ] "
                    "[ exthdr load ipv6 2b @ 44 + 2 => reg 1 ] "
                    "[ bitwise reg 1 = ( reg 1 & 0x0000f8ff ) ^ 0x00000000 ] "
                    "[ cmp neq reg 1 0x00000000 ] [ counter pkts 0 bytes 0 ] "
                    "[ immediate reg 0 accept ]");
        free(t);
}
END_TEST

static char *__attribute__((noinline)) render_groups(struct nbd_fw_group *g, size_t n)
{
        struct nbd_fw_owner_spec s = {
                .owner = "vnet0", .ifname = "vnet0", .groups = g, .n_groups = n};
        struct nbd_err err;
        char *text = NULL;

        ck_assert_msg(nbd_fw_render(&s, &text, &err) == 0, "render: %s", err.msg);
        return text;
}

/* The base chain's order, and a group's, by priority; equal ones as given. */
START_TEST(test_fw_priorities_order_groups_jumps_and_root_rules)
{
        struct nbd_fw_rule a[3], b[1], root[2];
        struct nbd_fw_group g[3] = {
                {.name = "a", .rules = a, .n_rules = 3, .priority = 10},
                {.name = "b", .rules = b, .n_rules = 1, .priority = -5, .has_guard = true},
                {.name = "root", .rules = root, .n_rules = 2, .root = true},
        };
        const char *p, *q;
        char *t;

        for (int i = 0; i < 3; i++)
                a[i] = rule(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);
        a[0].priority = 7;
        a[0].ether_type = num(0x0001, false);
        a[1].priority = -3;
        a[1].ether_type = num(0x0002, false);
        a[2].priority = 7;
        a[2].ether_type = num(0x0003, false);
        b[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        g[1].guard = rule(NBD_FW_DIR_FROM, NBD_FW_V_ACCEPT);
        g[1].guard.ether_type = num(0x0800, false);
        root[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        root[0].priority = 10;
        root[0].ether_type = num(0x0004, false);
        root[1] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        root[1].priority = -100;
        root[1].ether_type = num(0x0005, false);
        t = render_groups(g, 3);
        /* group a: -3 (0x0002), then 7 as given (0x0001, 0x0003) */
        p = strstr(t, "chain vnet0/from/a\n");
        ck_assert_ptr_nonnull(p);
        p = strstr(p, "0x00000200");
        q = strstr(t, "0x00000100");
        ck_assert_msg(p && q && p < q && q < strstr(t, "0x00000300"), "%s", t);
        /* the root group has no chain; the base chain: root -100, jump b
         * (-5, guarded), jump a (10), root 10 (a before it: groups first) */
        ck_assert_msg(!strstr(t, "vnet0/from/root"), "%s", t);
        p = strstr(t, "chain vnet0/from\n");
        ck_assert_ptr_nonnull(p);
        {
                /* one line each, in this order */
                static const char *const lines[] = {
                        "\n  [ payload load 2b @ link header + 12 => reg 1 ] "
                        "[ cmp eq reg 1 0x00000500 ] [ counter pkts 0 bytes 0 ] "
                        "[ immediate reg 0 drop ] ",
                        "\n  [ payload load 2b @ link header + 12 => reg 1 ] "
                        "[ cmp eq reg 1 0x00000008 ] [ immediate reg 0 jump -> vnet0/from/b ] ",
                        "\n  [ immediate reg 0 jump -> vnet0/from/a ] ",
                        "\n  [ payload load 2b @ link header + 12 => reg 1 ] "
                        "[ cmp eq reg 1 0x00000400 ] [ counter pkts 0 bytes 0 ] "
                        "[ immediate reg 0 drop ] ",
                };
                const char *at = p;
                for (size_t i = 0; i < 4; i++) {
                        const char *next = strstr(at, lines[i]);
                        ck_assert_msg(next, "base chain line %zu missing or out of order in\n%s", i,
                                      p);
                        /* the next rule follows directly */
                        if (i > 0)
                                ck_assert_ptr_null(memchr(at + 1, '\n', (size_t)(next - at - 1)));
                        at = next;
                }
                ck_assert_msg(strncmp(p, "chain vnet0/from", 16) == 0 &&
                                      strstr(p, lines[0]) == p + strlen("chain vnet0/from"),
                              "the root rule at -100 is not first:\n%s", p);
        }
        free(t);
}
END_TEST

/* libvirt sorts its root chain's entries by priority and puts a chain's
 * jump before a root rule of the same priority, whatever the order they
 * were defined in: a root group given first still comes after the jump. */
START_TEST(test_fw_a_jump_goes_before_a_root_rule_of_equal_priority)
{
        struct nbd_fw_rule root[1], x[1];
        struct nbd_fw_group g[2] = {
                {.name = "root", .rules = root, .n_rules = 1, .root = true},
                {.name = "x", .rules = x, .n_rules = 1, .priority = 0},
        };
        const char *p, *jump, *drop;
        char *t;

        root[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        x[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_RETURN);
        t = render_groups(g, 2);
        p = strstr(t, "chain vnet0/from\n");
        ck_assert_ptr_nonnull(p);
        jump = strstr(p, "jump -> vnet0/from/x");
        drop = strstr(p, "[ immediate reg 0 drop ]");
        ck_assert_msg(jump && drop && jump < drop, "the jump is not before the root rule:\n%s", p);
        free(t);
}
END_TEST

/* Every new field, each group option: a change is a new hash. */
START_TEST(test_fw_hash_sees_every_new_field_and_group_option)
{
        struct nbd_fw_rule a = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP), b;
        struct nbd_fw_group g = {.name = "g", .rules = &b, .n_rules = 1};
        struct nbd_fw_owner_spec s = {
                .owner = "vnet0", .ifname = "vnet0", .groups = &g, .n_groups = 1};
        char h0[NBD_FW_HASH_HEX], h[NBD_FW_HASH_HEX];
        unsigned rules;

        b = a;
        nbd_fw_model_hash(&s, h0, &rules);
        for (int field = 0; field < 22; field++) {
                b = a;
                g = (struct nbd_fw_group){.name = "g", .rules = &b, .n_rules = 1};
                switch (field) {
                case 0:
                        b.priority = 1;
                        break;
                case 1:
                        b.vlan_encap = num(0x0800, false);
                        break;
                case 2:
                        b.arp_htype = num(1, false);
                        break;
                case 3:
                        b.arp_ptype = num(0x0800, false);
                        break;
                case 4:
                        b.arp_tha.set = true;
                        break;
                case 5:
                        b.arp_gratuitous = num(1, false);
                        break;
                case 6:
                        b.dscp = num(0, false);
                        break;
                case 7:
                        b.sport_neg = true;
                        break;
                case 8:
                        b.dport_neg = true;
                        break;
                case 9:
                        b.has_icmp_code = true;
                        break;
                case 10:
                        b.icmp_neg = true;
                        break;
                case 11:
                        b.tcp_flags_mask = 2;
                        break;
                case 12:
                        b.tcp_flags_neg = true;
                        break;
                case 13:
                        strcpy(b.comment, "x");
                        break;
                case 14:
                        b.l4proto = num(6, true);
                        break;
                case 15:
                        b.vlan_id = num(1, true);
                        break;
                case 16:
                        b.ip_src.set = b.ip_src.is_range = true;
                        break;
                case 17:
                        g.priority = 1;
                        break;
                case 18:
                        g.root = true;
                        break;
                case 19:
                        g.has_guard = true;
                        break;
                case 20:
                        g.has_guard = true;
                        g.guard.ether_type = num(0x0800, false);
                        break;
                case 21:
                        b.tcp_flags = 2;
                        break;
                }
                nbd_fw_model_hash(&s, h, &rules);
                ck_assert_msg(strcmp(h0, h) != 0, "field %d did not change the hash", field);
                if (field == 20) { /* the guard's contents, not just that there is one */
                        char h2[NBD_FW_HASH_HEX];
                        g.guard.ether_type = num(0x86dd, false);
                        nbd_fw_model_hash(&s, h2, &rules);
                        ck_assert_str_ne(h, h2);
                }
        }
}
END_TEST

static int count_chain(const char *name, size_t rules, void *data)
{
        char *out = data;

        snprintf(out + strlen(out), 512 - strlen(out), "%s=%zu ", name, rules);
        return 0;
}

/* ensure's check counts what the compiler makes. */
START_TEST(test_fw_layout_counts_the_rules_compiled)
{
        struct nbd_fw_rule r[2], root[1];
        struct nbd_fw_group g[2] = {{.name = "g", .rules = r, .n_rules = 2},
                                    {.name = "r", .rules = root, .n_rules = 1, .root = true}};
        struct nbd_fw_owner_spec s = {
                .owner = "vnet0", .ifname = "vnet0", .groups = g, .n_groups = 2};
        char out[512] = "";

        r[0] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        r[0].ether_type = num(0x86dd, false);
        r[0].l4proto = num(6, false);
        r[1] = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
        root[0] = rule(NBD_FW_DIR_TO, NBD_FW_V_DROP);
        ck_assert_int_eq(nbd_fw_layout(&s, count_chain, out), 0);
        /* an IPv6 protocol is 3 (next header P; or behind extension
         * headers, unfragmented or a first fragment) */
        ck_assert_str_eq(out, "vnet0/from/g=4 vnet0/from=1 vnet0/to=1 ");
        /* the non-root limit's count (op_firewall) is the same sum */
        ck_assert_uint_eq(nbd_fw_installed_rules(g, 2), 6);
}
END_TEST

START_TEST(test_fw_new_bad_combinations_are_refused_with_a_sentence)
{
        static const struct {
                const char *why;
                int code;
                const char *needle;
        } want[] = {
                {"tcp flags without tcp", -EINVAL, "TCP flags need the protocol tcp"},
                {"icmp code without type", -EINVAL, "ICMP code"},
                {"dscp on IPv6", -EINVAL, "DSCP is matched for IPv4 only"},
                {"vlan with ether type ipv4", -EINVAL, "contradicts"},
                {"ARP with ether type ipv6", -EINVAL, "contradicts"},
                {"gratuitous with ether type ipv6", -EINVAL, "contradicts"},
                {"vlan with IP", -EINVAL, "VLAN and IP"},
                {"ports with negated protocol", -EINVAL, "not negated"},
                {"flags outside mask", -EINVAL, "outside their mask"},
                {"priority", -EINVAL, "-1000..1000"},
                {"not 0x8100 with vlan", -EINVAL, "not 0x8100"},
                {"protocol with ether type 0x8100", -EINVAL, "need 0x0800 or 0x86dd"},
        };
        struct nbd_err err;

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                struct nbd_fw_rule r = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);
                switch (i) {
                case 0:
                        r.l4proto = num(17, false);
                        r.tcp_flags_mask = 2;
                        break;
                case 1:
                        r.l4proto = num(1, false);
                        r.has_icmp_code = true;
                        break;
                case 2:
                        ck_assert_int_eq(nbd_fw_parse_ip("fe80::1", &r.ip_src), 0);
                        r.dscp = num(1, false);
                        break;
                case 3:
                        r.ether_type = num(0x0800, false);
                        r.vlan_id = num(1, false);
                        break;
                case 4:
                        r.ether_type = num(0x86dd, false);
                        r.arp_htype = num(1, false);
                        break;
                case 5:
                        r.ether_type = num(0x86dd, false);
                        r.arp_gratuitous = num(1, false);
                        break;
                case 6:
                        r.vlan_encap = num(0x0800, false);
                        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.1", &r.ip_src), 0);
                        break;
                case 7:
                        r.l4proto = num(6, true);
                        r.dport[0] = r.dport[1] = 80;
                        break;
                case 8:
                        r.l4proto = num(6, false);
                        r.tcp_flags_mask = 0x02;
                        r.tcp_flags = 0x12;
                        break;
                case 9:
                        r.priority = 1001;
                        break;
                case 10:
                        r.ether_type = num(0x8100, true);
                        r.vlan_id = num(1, false);
                        break;
                case 11:
                        r.ether_type = num(0x8100, false);
                        r.l4proto = num(6, false);
                        break;
                }
                ck_assert_msg(nbd_fw_rule_check(&r, false, &err) == want[i].code,
                              "%s: not refused with %d", want[i].why, want[i].code);
                ck_assert_msg(strstr(err.msg, want[i].needle), "%s: '%s' lacks '%s'", want[i].why,
                              err.msg, want[i].needle);
        }
}
END_TEST

START_TEST(test_fw_ip_ranges_parse_one_family_in_order)
{
        struct nbd_fw_ip ip;
        struct nbd_err err;
        struct nbd_fw_rule r = rule(NBD_FW_DIR_FROM, NBD_FW_V_DROP);

        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.1-10.0.0.9", &ip), 0);
        ck_assert(ip.is_range && ip.family == 4);
        ck_assert_int_eq(ip.addr[3], 1);
        ck_assert_int_eq(ip.mask[3], 9);
        ck_assert_int_eq(nbd_fw_parse_ip("fe80::1-fe80::2", &ip), 0);
        ck_assert_int_eq(ip.family, 6);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.9-10.0.0.1", &ip), -EINVAL);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.1-fe80::1", &ip), -EINVAL);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.0/24-10.0.1.0", &ip), -EINVAL);
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.1-", &ip), -EINVAL);
        /* A single-address range is fine; ARP addresses may be ranges. */
        ck_assert_int_eq(nbd_fw_parse_ip("10.0.0.1-10.0.0.1", &r.arp_spa), 0);
        ck_assert_int_eq(nbd_fw_rule_check(&r, false, &err), 0);
}
END_TEST

/* The owner table's buckets are not the unseeded FNV-1a's: 1,000 owner
 * names that all share one bucket under it (its low 10 bits, the table's
 * 1,024 buckets) spread over the table, and each is still found. */
static uint32_t fnv1a_unseeded(const char *s)
{
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

static int count_cb(const struct nftnl_udata *attr, void *data)
{
        (void)attr;
        ++*(unsigned *)data;
        return 0;
}

/* A comment's type-length-values are checked before libnftnl walks them:
 * its walk trusts each length, and a comment written by anyone with
 * CAP_NET_ADMIN with a length past its end made the helper read past it. */
START_TEST(test_fw_udata_lengths_past_the_end_are_refused)
{
        static const uint8_t good[] = {0, 3, 'a', 'b', 0, 1, 1, 'x'};
        static const uint8_t past[] = {0, 3, 'a', 'b', 0, 1, 200, 'x'};
        static const uint8_t half[] = {0, 1, 'a', 1};
        unsigned n = 0;

        ck_assert_int_eq(nbd_fw_udata_parse(good, sizeof(good), count_cb, &n), 0);
        ck_assert_uint_eq(n, 2);
        n = 0;
        ck_assert_int_eq(nbd_fw_udata_parse(past, sizeof(past), count_cb, &n), -EINVAL);
        ck_assert_int_eq(nbd_fw_udata_parse(half, sizeof(half), count_cb, &n), -EINVAL);
        ck_assert_uint_eq(n, 0);
        ck_assert_int_eq(nbd_fw_udata_parse(good, 0, count_cb, &n), 0);
        ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_fw_owner_table_survives_names_colliding_under_unseeded_fnv)
{
        enum { N = 1000, MASK = 1023 };
        struct nbd_fw_owners owners = {0};
        size_t longest = 0;
        char name[32];
        unsigned k = 0;

        for (unsigned i = 0; k < N; i++) {
                struct nbd_fw_owner_state *o;

                snprintf(name, sizeof(name), "vm-%u", i);
                if ((fnv1a_unseeded(name) & MASK) != 0)
                        continue;
                o = calloc(1, sizeof(*o));
                ck_assert_ptr_nonnull(o);
                snprintf(o->owner, sizeof(o->owner), "%s", name);
                ck_assert_int_eq(nbd_fw_owners_add(&owners, o), 0);
                k++;
        }
        ck_assert_uint_eq(owners.n, N);
        ck_assert_uint_eq(owners.n_buckets, 1024);
        for (size_t b = 0; b < owners.n_buckets; b++) {
                size_t len = 0;
                for (const struct nbd_fw_owner_state *o = owners.buckets[b]; o; o = o->hnext)
                        len++;
                longest = len > longest ? len : longest;
        }
        /* Random placement: 5 to 7 here; all of them in one without a seed. */
        ck_assert_msg(longest <= 16, "%zu names in one bucket", longest);
        for (const struct nbd_fw_owner_state *o = owners.list; o; o = o->next)
                ck_assert_ptr_eq(nbd_fw_owner_find(&owners, o->owner), o);
        ck_assert_ptr_null(nbd_fw_owner_find(&owners, "vm-none"));
        nbd_fw_owners_free(&owners);
}
END_TEST

TCase *fw_unit_tcase(void)
{
        TCase *tc = tcase_create("firewall");

        tcase_add_test(tc, test_fw_mac_and_ip_rules_compile_to_the_expected_expressions);
        tcase_add_test(tc, test_fw_arp_port_icmp_vlan_and_reject_compile);
        tcase_add_test(tc, test_fw_hash_is_stable_canonical_and_sensitive);
        tcase_add_test(tc, test_fw_owner_table_survives_names_colliding_under_unseeded_fnv);
        tcase_add_test(tc, test_fw_udata_lengths_past_the_end_are_refused);
        tcase_add_test(tc, test_fw_hash_does_not_depend_on_memory_contents);
        tcase_add_test(tc, test_fw_bad_rules_are_refused_before_anything_is_sent);
        tcase_add_test(tc, test_fw_vlan_and_outer_type_compile_as_ebtables_sees_them);
        tcase_add_test(tc, test_fw_arp_and_rarp_fields_compile_with_ebt_arp_header_checks);
        tcase_add_test(tc, test_fw_gratuitous_compiles_to_byte_pair_lookups);
        tcase_add_test(tc, test_fw_ipv4_fields_compile_to_header_loads);
        tcase_add_test(tc, test_fw_ipv6_protocol_tells_later_fragments_apart);
        tcase_add_test(tc, test_fw_priorities_order_groups_jumps_and_root_rules);
        tcase_add_test(tc, test_fw_a_jump_goes_before_a_root_rule_of_equal_priority);
        tcase_add_test(tc, test_fw_hash_sees_every_new_field_and_group_option);
        tcase_add_test(tc, test_fw_layout_counts_the_rules_compiled);
        tcase_add_test(tc, test_fw_new_bad_combinations_are_refused_with_a_sentence);
        tcase_add_test(tc, test_fw_ip_ranges_parse_one_family_in_order);
        return tc;
}
