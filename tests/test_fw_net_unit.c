// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners' pure half (fw_net.h, fw_net_compile.h), without a
 * kernel: parsing and checks, the content hash, the compiled layout. */
#include <errno.h>
#include <string.h>

#include "fw_net.h"
#include "fw_net_compile.h"
#include "tests_unit.h"

static struct nbd_net_spec nat_spec(void)
{
        struct nbd_net_spec s = {.owner = "n0", .bridge = "virbr0", .mode = NBD_NET_NAT};
        struct nbd_err e;

        ck_assert_int_eq(nbd_net_parse_subnet("192.168.122.1/24", &s.subnets[0], &e), 0);
        s.n_subnets = 1;
        return s;
}

START_TEST(test_net_subnet_is_the_network_and_bad_ones_are_refused_with_a_reason)
{
        static const char *const bad[] = {"192.168.1.0",  "192.168.1.0/33", "192.168.1.0/0",
                                          "192.168.1.0/", "fd00::/129",     "x/24",
                                          "1.2.3.4/+8",   "1.2.3.4/8x"};
        struct nbd_net_subnet n;
        struct nbd_err e;

        ck_assert_int_eq(nbd_net_parse_subnet("192.168.122.77/24", &n, &e), 0);
        ck_assert_int_eq(n.family, 4);
        ck_assert_uint_eq(n.prefix, 24);
        ck_assert_mem_eq(n.addr, ((uint8_t[]){192, 168, 122, 0}), 4);
        ck_assert_int_eq(nbd_net_parse_subnet("fd00:1:2:3::9/64", &n, &e), 0);
        ck_assert_int_eq(n.family, 6);
        ck_assert_uint_eq(n.addr[15], 0);
        ck_assert_uint_eq(n.mask[7], 0xff);
        ck_assert_uint_eq(n.mask[8], 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                ck_assert_int_eq(nbd_net_parse_subnet(bad[i], &n, &e), -EINVAL);
                ck_assert_ptr_nonnull(strstr(e.msg, "subnet"));
        }
}
END_TEST

START_TEST(test_net_forward_needs_a_guest_inside_a_subnet_and_one_family)
{
        struct nbd_net_spec s = nat_spec();
        struct nbd_net_forward f;
        struct nbd_err e;

        ck_assert_int_eq(nbd_net_parse_forward(&s, "tcp", "", 8080, "192.168.122.2", 0, &f, &e), 0);
        ck_assert_uint_eq(f.guest_port, 8080);
        ck_assert_int_eq(nbd_net_parse_forward(&s, "tcp", "", 8080, "10.0.0.2", 80, &f, &e),
                         -EINVAL);
        ck_assert_ptr_nonnull(strstr(e.msg, "in none of the subnets"));
        ck_assert_int_eq(
                nbd_net_parse_forward(&s, "tcp", "fd00::1", 8080, "192.168.122.2", 80, &f, &e),
                -EINVAL);
        ck_assert_int_eq(nbd_net_parse_forward(&s, "sctp", "", 1, "192.168.122.2", 1, &f, &e),
                         -EINVAL);
        ck_assert_int_eq(nbd_net_parse_forward(&s, "udp", "", 0, "192.168.122.2", 1, &f, &e),
                         -EINVAL);
        /* isolated: no forwards */
        ck_assert_int_eq(
                nbd_net_parse_forward(&s, "udp", "", 53, "192.168.122.2", 0, &s.forwards[0], &e),
                0);
        s.n_forwards = 1;
        s.mode = NBD_NET_ISOLATED;
        ck_assert_int_eq(nbd_net_spec_check(&s, &e), -EINVAL);
        s.mode = NBD_NET_NAT;
        ck_assert_int_eq(nbd_net_spec_check(&s, &e), 0);
        /* <nat ipv6='yes'/> is nat mode's */
        s.nat_ipv6 = true;
        ck_assert_int_eq(nbd_net_spec_check(&s, &e), 0);
        s.mode = NBD_NET_ROUTE;
        ck_assert_int_eq(nbd_net_spec_check(&s, &e), -EINVAL);
        ck_assert_ptr_nonnull(strstr(e.msg, "nat_ipv6 is for nat mode"));
        s.mode = NBD_NET_NAT;
        s.nat_ipv6 = false;
        /* the same outside port twice */
        s.forwards[1] = s.forwards[0];
        s.n_forwards = 2;
        ck_assert_int_eq(nbd_net_spec_check(&s, &e), -EINVAL);
}
END_TEST

START_TEST(test_net_hash_changes_with_every_field_and_not_with_the_creator)
{
        struct nbd_net_spec a = nat_spec(), b;
        char h0[NBD_FW_HASH_HEX], h[NBD_FW_HASH_HEX];

        nbd_net_hash(&a, h0);
        b = a;
        b.uid = 1000;
        nbd_net_hash(&b, h);
        ck_assert_str_eq(h, h0);
        b = a;
        b.mode = NBD_NET_ROUTE;
        nbd_net_hash(&b, h);
        ck_assert_str_ne(h, h0);
        b = a;
        strcpy(b.forward_dev, "eth0");
        nbd_net_hash(&b, h);
        ck_assert_str_ne(h, h0);
        b = a;
        b.nat_port_min = 2000;
        b.nat_port_max = 3000;
        nbd_net_hash(&b, h);
        ck_assert_str_ne(h, h0);
        b = a;
        b.subnets[0].prefix = 25;
        nbd_net_hash(&b, h);
        ck_assert_str_ne(h, h0);
        b = a;
        strcpy(b.bridge, "virbr1");
        nbd_net_hash(&b, h);
        ck_assert_str_ne(h, h0);
        b = a;
        b.nat_ipv6 = true;
        nbd_net_hash(&b, h);
        ck_assert_str_ne(h, h0);
        b.nat_ipv6 = false;
        b.ipv6_nogw = true;
        nbd_net_hash(&b, h);
        ck_assert_str_ne(h, h0);
}
END_TEST

/* libvirt's rules for a nat network with one IPv4 subnet: cross, input
 * (related,established), its reject, output, its reject; guest_nat's 5. */
START_TEST(test_net_compile_lays_out_libvirts_rules_per_mode)
{
        static const struct {
                enum nbd_net_mode mode;
                size_t forward, post;
        } want[] = {{NBD_NET_NAT, 5, 5},
                    {NBD_NET_ROUTE, 5, 0},
                    {NBD_NET_OPEN, 0, 0},
                    {NBD_NET_ISOLATED, 3, 0}};
        struct nbd_net_spec s = nat_spec();
        struct nbd_net_compiled c;
        struct nbd_net_comment cm;
        char hash[NBD_FW_HASH_HEX];

        for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
                s.mode = want[i].mode;
                nbd_net_hash(&s, hash);
                ck_assert_int_eq(nbd_net_compile(&s, hash, &c), 0);
                ck_assert_ptr_nonnull(c.chains[NBD_NET_FORWARD]); /* the owner, always */
                ck_assert_uint_eq(c.n_rules[NBD_NET_FORWARD], want[i].forward);
                ck_assert_uint_eq(c.n_rules[NBD_NET_POSTROUTING], want[i].post);
                ck_assert(!c.chains[NBD_NET_POSTROUTING] == !want[i].post);
                ck_assert_ptr_null(c.chains[NBD_NET_PREROUTING]);
                ck_assert_uint_eq(c.total, want[i].forward + want[i].post);
                nbd_net_compiled_free(&c);
        }
        /* An IPv6 subnet adds ip6's cross and rejects, and routing rules. */
        s.mode = NBD_NET_NAT;
        ck_assert_int_eq(nbd_net_parse_subnet("fd00::/64", &s.subnets[1], &(struct nbd_err){0}), 0);
        s.n_subnets = 2;
        nbd_net_hash(&s, hash);
        ck_assert_int_eq(nbd_net_compile(&s, hash, &c), 0);
        ck_assert_uint_eq(c.n_rules[NBD_NET_FORWARD], 10);
        ck_assert_uint_eq(c.n_rules[NBD_NET_POSTROUTING], 5);
        nbd_net_compiled_free(&c);
        /* libvirt's <nat ipv6='yes'/>: the IPv6 subnet masqueraded too,
         * ff02::/16 left alone (no broadcast): 4 more postrouting rules. */
        s.nat_ipv6 = true;
        nbd_net_hash(&s, hash);
        ck_assert_int_eq(nbd_net_compile(&s, hash, &c), 0);
        ck_assert_uint_eq(c.n_rules[NBD_NET_FORWARD], 10);
        ck_assert_uint_eq(c.n_rules[NBD_NET_POSTROUTING], 9);
        nbd_net_compiled_free(&c);
        /* libvirt's <network ipv6='yes'> on an IPv4-only network: ip6's
         * cross and two rejects, nothing else for IPv6. */
        s.nat_ipv6 = false;
        s.n_subnets = 1;
        s.ipv6_nogw = true;
        nbd_net_hash(&s, hash);
        ck_assert_int_eq(nbd_net_compile(&s, hash, &c), 0);
        ck_assert_uint_eq(c.n_rules[NBD_NET_FORWARD], 8);
        ck_assert_uint_eq(c.n_rules[NBD_NET_POSTROUTING], 5);
        nbd_net_compiled_free(&c);
        ck_assert_int_eq(nbd_net_parse_comment("netbroker-net 0123456789abcdef0123456789abcdef "
                                               "virbr0 nat 10 uid=107",
                                               &cm),
                         0);
        ck_assert_str_eq(cm.bridge, "virbr0");
        ck_assert_uint_eq(cm.uid, 107);
        ck_assert_int_eq(nbd_net_parse_comment("netbroker 0123 virbr0 nat 10 uid=1", &cm), -EINVAL);
}
END_TEST

TCase *fw_net_unit_tcase(void)
{
        TCase *t = tcase_create("fw-net");

        tcase_add_test(t, test_net_subnet_is_the_network_and_bad_ones_are_refused_with_a_reason);
        tcase_add_test(t, test_net_forward_needs_a_guest_inside_a_subnet_and_one_family);
        tcase_add_test(t, test_net_hash_changes_with_every_field_and_not_with_the_creator);
        tcase_add_test(t, test_net_compile_lays_out_libvirts_rules_per_mode);
        return t;
}
