/* The firewall compiler without a kernel: what rules compile to (read back
 * through libnftnl's parser), the content hash, and what is refused. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_compile.h"
#include "fw_model.h"
#include "fw_render.h"
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

        ck_assert_msg(nbd_fw_hash(&s, out, &rules, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(rules, n);
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

TCase *fw_unit_tcase(void)
{
        TCase *tc = tcase_create("firewall");

        tcase_add_test(tc, test_fw_mac_and_ip_rules_compile_to_the_expected_expressions);
        tcase_add_test(tc, test_fw_arp_port_icmp_vlan_and_reject_compile);
        tcase_add_test(tc, test_fw_hash_is_stable_canonical_and_sensitive);
        tcase_add_test(tc, test_fw_hash_does_not_depend_on_memory_contents);
        tcase_add_test(tc, test_fw_bad_rules_are_refused_before_anything_is_sent);
        return tc;
}
