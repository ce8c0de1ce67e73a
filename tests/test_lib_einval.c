// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bad input to the batch- and ruleset-building calls says why: the return
 * value is what it always was, nb_last_error() names the function and the
 * argument (an adopter's report: -22 and an empty nb_last_error() for a
 * 16-byte name, a 65-byte owner, a bad MAC, an nb_rate initialised with
 * {0}), the message holds printable ASCII only, and nothing is added. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "netbroker.h"
#include "tests_unit.h"

/* Every byte printable ASCII: the message goes to logs and terminals, and
 * a bad name may hold anything. */
static bool printable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
                        return false;
        return true;
}

/* call returns err and leaves exactly msg in nb_last_error(). */
#define REFUSED(call, err, msg)                                                                    \
        do {                                                                                       \
                set_sentinel();                                                                    \
                ck_assert_int_eq((call), (err));                                                   \
                ck_assert_str_eq(nb_last_error(), (msg));                                          \
                ck_assert(printable(nb_last_error()));                                             \
        } while (0)

/* Leave something in nb_last_error() that no case below says, so a case
 * whose call sets nothing fails on its own, not on the last case's text. */
static void set_sentinel(void)
{
        nb_batch *b = nb_batch_new();

        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(nb_batch_link_delete(b, NULL), -EINVAL);
        ck_assert_str_eq(nb_last_error(), "nb_batch_link_delete: name is NULL");
        nb_batch_free(b);
}

START_TEST(test_link_calls_name_the_bad_name)
{
        nb_batch *b = nb_batch_new();
        nb_link_change up2 = NB_LINK_CHANGE_INIT;
        nb_link_change both = NB_LINK_CHANGE_INIT;
        /* 16 bytes no terminal should be sent */
        char ctrl[] = "abcdefghijkl\n\x01\x7f\xff";

        up2.up = 2;
        both.master = "br0";
        both.nomaster = true;
        REFUSED(nb_batch_tap_create(b, "abcdefghijklmnop", NULL), -EINVAL,
                "nb_batch_tap_create: name 'abcdefghijklmnop' is 16 bytes; at most 15");
        REFUSED(nb_batch_tap_create(b, ctrl, NULL), -EINVAL,
                "nb_batch_tap_create: name 'abcdefghijkl\\x0a\\x01\\x7f\\xff' is 16 bytes; at "
                "most 15");
        REFUSED(nb_batch_macvtap_create(b, "macvtap%d-abcdefg", "eth0", NB_MACVLAN_BRIDGE, NULL,
                                        false),
                -EINVAL,
                "nb_batch_macvtap_create: name 'macvtap%d-abcdefg' is 17 bytes; at most 16 for a "
                "template (with a %)");
        REFUSED(nb_batch_macvtap_create_queues(b, "mvt0", "eth0", NB_MACVLAN_BRIDGE, NULL, false,
                                               17),
                -EINVAL, "nb_batch_macvtap_create_queues: queues 17 is above 16");
        REFUSED(nb_batch_macvlan_create(b, "mv0", "", NB_MACVLAN_BRIDGE, NULL), -EINVAL,
                "nb_batch_macvlan_create: parent is empty");
        REFUSED(nb_batch_macvlan_create(b, "mv0", "eth0", (nb_macvlan_mode)9, NULL), -EINVAL,
                "nb_batch_macvlan_create: mode 9 is not NB_MACVLAN_BRIDGE, _VEPA, _PRIVATE or "
                "_PASSTHRU");
        REFUSED(nb_batch_veth_create(b, "v0", NULL, -1), -EINVAL,
                "nb_batch_veth_create: peer is NULL");
        REFUSED(nb_batch_bridge_create(NULL, "br0"), -EINVAL,
                "nb_batch_bridge_create: batch is NULL");
        REFUSED(nb_batch_link_set(b, "tap0", &up2), -EINVAL,
                "nb_batch_link_set: change->up 2 is not -1, 0 or 1");
        REFUSED(nb_batch_link_set(b, "tap0", &both), -EINVAL,
                "nb_batch_link_set: change has both master 'br0' and nomaster");
        REFUSED(nb_batch_link_list(b, "tap%d"), -EINVAL,
                "nb_batch_link_list: name 'tap%d' has a %: it must name one interface");
        REFUSED(nb_ref(5, (char[4]){0}, 4), -ERANGE,
                "nb_ref: len 4 is too small for 'op:5' and its NUL");
        REFUSED(nb_ref_peer(5, NULL, 8), -EINVAL, "nb_ref_peer: buf is NULL");
        ck_assert_uint_eq(nb_batch_size(b), 0);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_unsized_structs_say_which_init_macro)
{
        nb_batch *b = nb_batch_new();
        nb_tap_opts zero_tap = {0}; /* the natural C idiom, size 0 */
        nb_rate in = NB_RATE_INIT, zero_rate = {0}, peak_only = NB_RATE_INIT;
        struct {
                nb_tap_opts o;
                uint64_t newer; /* a field of a header newer than the library */
        } big = {.o = NB_TAP_OPTS_INIT, .newer = 1};
        char want[256];

        big.o.size = sizeof(big);
        peak_only.peak = 1000;
        REFUSED(nb_batch_tap_create(b, "tap0", &zero_tap), -EINVAL,
                "nb_batch_tap_create: opts: size is 0: initialise an nb_tap_opts with "
                "NB_TAP_OPTS_INIT");
        REFUSED(nb_batch_bandwidth_set(b, "tap0", &in, &zero_rate), -EINVAL,
                "nb_batch_bandwidth_set: out: size is 0: initialise an nb_rate with NB_RATE_INIT");
        REFUSED(nb_batch_bandwidth_set(b, "tap0", &peak_only, NULL), -EINVAL,
                "nb_batch_bandwidth_set: in: a peak, burst or floor and no average");
        REFUSED(nb_batch_bandwidth_clear(b, "tap%d"), -EINVAL,
                "nb_batch_bandwidth_clear: ifname 'tap%d' has a %: it must name one interface");
        zero_tap.size = 8;
        snprintf(want, sizeof(want),
                 "nb_batch_tap_create: opts: size 8 is below %zu, the smallest nb_tap_opts: "
                 "initialise it with NB_TAP_OPTS_INIT",
                 offsetof(nb_tap_opts, gid) + sizeof(zero_tap.gid));
        REFUSED(nb_batch_tap_create(b, "tap0", &zero_tap), -EINVAL, want);
        snprintf(want, sizeof(want),
                 "nb_batch_tap_create: opts: size %zu is larger than this library's nb_tap_opts "
                 "(%zu bytes) and sets a field past those: a newer header's, which this library "
                 "cannot honour",
                 sizeof(big), sizeof(nb_tap_opts));
        REFUSED(nb_batch_tap_create(b, "tap0", &big.o), -E2BIG, want);
        ck_assert_uint_eq(nb_batch_size(b), 0);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_addresses_routes_and_sysctls_name_the_argument)
{
        nb_batch *b = nb_batch_new();
        nb_addr_opts zero_opts = {0};
        nb_route gw = NB_ROUTE_INIT, dev = NB_ROUTE_INIT;
        char long_addr[65];

        memset(long_addr, '1', 64);
        long_addr[64] = '\0';
        gw.gateway = long_addr;
        dev.destination = "10.0.0.0";
        dev.ifname = "abcdefghijklmnop";
        REFUSED(nb_batch_addr_add(b, "br0", "", 24, NULL), -EINVAL,
                "nb_batch_addr_add: address is empty");
        REFUSED(nb_batch_addr_add(b, "br0", "10.0.0.1", 24, &zero_opts), -EINVAL,
                "nb_batch_addr_add: opts: size is 0: initialise an nb_addr_opts with "
                "NB_ADDR_OPTS_INIT");
        /* A long argument is cut in the message; its length is said. */
        REFUSED(nb_batch_addr_delete(b, "br0", long_addr, 24), -EINVAL,
                "nb_batch_addr_delete: address '111111111111111111111111111111111111111111111111"
                "1111111111...' is 64 bytes; at most 63");
        REFUSED(nb_batch_addr_list(b, ""), -EINVAL, "nb_batch_addr_list: ifname is empty");
        REFUSED(nb_batch_route_add(b, NULL), -EINVAL, "nb_batch_route_add: route is NULL");
        REFUSED(nb_batch_route_add(b, &dev), -EINVAL,
                "nb_batch_route_add: route->ifname 'abcdefghijklmnop' is 16 bytes; at most 15");
        REFUSED(nb_batch_route_delete(b, &gw), -EINVAL,
                "nb_batch_route_delete: route->gateway '1111111111111111111111111111111111111111"
                "111111111111111111...' is 64 bytes; at most 63");
        REFUSED(nb_batch_sysctl_set(b, NULL, NULL, 1), -EINVAL,
                "nb_batch_sysctl_set: name is NULL");
        REFUSED(nb_batch_bridge_opt_set(
                        b, "br0", &(nb_bridge_opts){.size = sizeof(nb_bridge_opts), .stp = 3}),
                -EINVAL, "nb_batch_bridge_opt_set: opts->stp 3 is not -1, 0 or 1");
        ck_assert_uint_eq(nb_batch_size(b), 0);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_exec_and_programs_name_the_argument)
{
        nb_batch *b = nb_batch_new();
        nb_program_opts opts = NB_PROGRAM_OPTS_INIT;
        const char *const env[] = {"LANG=C", "FOO", NULL};

        opts.env = env;
        REFUSED(nb_batch_exec(b, "bin/true", NULL, NULL, NULL, 0, 0), -EINVAL,
                "nb_batch_exec: path 'bin/true' is not absolute");
        REFUSED(nb_batch_exec(b, "/bin/true", NULL, NULL, NULL, 3, 0), -EINVAL,
                "nb_batch_exec: stdin_data is NULL and stdin_len is 3");
        REFUSED(nb_batch_exec(b, "/bin/true", NULL, (const char *const[]){"=x", NULL}, NULL, 0, 0),
                -EINVAL, "nb_batch_exec: envp[0] '=x' has an empty NAME");
        REFUSED(nb_batch_program_start(b, "/usr/sbin/dnsmasq", &opts), -EINVAL,
                "nb_batch_program_start: opts->env[1] 'FOO' has no '=': not NAME=VALUE");
        REFUSED(nb_batch_program_stop(b, 0, NULL, 0), -EINVAL,
                "nb_batch_program_stop: id is 0 and tag is NULL: give one of them");
        REFUSED(nb_batch_program_stop(b, 7, "net1", 0), -EINVAL,
                "nb_batch_program_stop: both id 7 and tag 'net1': give one of them");
        REFUSED(nb_batch_ping(NULL), -EINVAL, "nb_batch_ping: batch is NULL");
        ck_assert_uint_eq(nb_batch_size(b), 0);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_networks_name_the_field)
{
        nb_batch *b = nb_batch_new();
        nb_net_spec spec = NB_NET_SPEC_INIT, zero = {0};
        nb_net_forward fwd = NB_NET_FORWARD_INIT;
        const nb_net_forward *fwds[] = {&fwd};

        REFUSED(nb_batch_net_apply(b, "net1", &spec), -EINVAL,
                "nb_batch_net_apply: spec->bridge is NULL");
        REFUSED(nb_batch_net_apply(b, "net1", &zero), -EINVAL,
                "nb_batch_net_apply: spec: size is 0: initialise an nb_net_spec with "
                "NB_NET_SPEC_INIT");
        spec.bridge = "virbr0";
        spec.forwards = fwds;
        spec.n_forwards = 1;
        fwd.protocol = "tcp";
        fwd.guest_address = "192.168.122.2";
        REFUSED(nb_batch_net_apply(b, "net1", &spec), -EINVAL,
                "nb_batch_net_apply: spec->forwards[0]->outside_port 0 is not 1 to 65535");
        /* A forward of a newer header's is E2BIG, as any struct of one
         * (it was -ENOMEM). */
        {
                struct {
                        nb_net_forward f;
                        uint64_t newer;
                } big = {.f = NB_NET_FORWARD_INIT, .newer = 1};
                const nb_net_forward *bigs[] = {&big.f};
                big.f.size = sizeof(big);
                spec.forwards = bigs;
                ck_assert_int_eq(nb_batch_net_apply(b, "net1", &spec), -E2BIG);
                ck_assert(strstr(nb_last_error(), "spec->forwards[0]"));
                spec.forwards = fwds;
        }
        REFUSED(nb_batch_net_remove(b, ""), -EINVAL, "nb_batch_net_remove: owner is empty");
        ck_assert_uint_eq(nb_batch_size(b), 0);
        nb_batch_free(b);
}
END_TEST

START_TEST(test_firewall_names_the_owner_the_rule_field_and_the_mac)
{
        nb_batch *b = nb_batch_new();
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule neg = NB_FW_RULE_INIT, zero = {0};
        nb_fw_group_opts prio = NB_FW_GROUP_OPTS_INIT;
        const char *const ips[] = {"10.0.0.1", "300.1.1.1", NULL};
        char owner[66];

        memset(owner, 'a', 65);
        owner[65] = '\0';
        neg.ip_src_not = true;
        prio.priority = 2000;
        REFUSED(nb_batch_firewall_apply(b, owner, "vnet0", rs, NB_FW_REPLACE), -EINVAL,
                "nb_batch_firewall_apply: owner "
                "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                "aaaaaaaa...' is 65 bytes; at most 64");
        REFUSED(nb_batch_firewall_remove(b, "vm\t1"), -EINVAL,
                "nb_batch_firewall_remove: owner 'vm\\x091': byte 2 is not a letter, a digit or "
                "one of _.:@-");
        REFUSED(nb_batch_firewall_apply(b, "vm1", "vnet0", rs, (nb_fw_mode)7), -EINVAL,
                "nb_batch_firewall_apply: mode 7 is not NB_FW_REPLACE or NB_FW_ENSURE");
        REFUSED(nb_batch_firewall_ensure_hash(b, "vm1", "vnet0", "ABC"), -EINVAL,
                "nb_batch_firewall_ensure_hash: hash 'ABC' is not 32 lowercase hex digits");
        REFUSED(nb_batch_firewall_list(NULL), -EINVAL, "nb_batch_firewall_list: batch is NULL");
        REFUSED(nb_fw_rule_add(rs, &neg), -EINVAL,
                "nb_fw_rule_add: rule->ip_src_not is set and ip_src is not: nothing to negate");
        REFUSED(nb_fw_rule_add(rs, &zero), -EINVAL,
                "nb_fw_rule_add: rule: size is 0: initialise an nb_fw_rule with NB_FW_RULE_INIT");
        REFUSED(nb_fw_group(rs, "a b"), -EINVAL,
                "nb_fw_group: name 'a b' (3 bytes) is not 1 to 32 letters, digits, _ or -");
        REFUSED(nb_fw_group_ex(rs, "g", &prio), -EINVAL,
                "nb_fw_group_ex: opts->priority 2000 is outside -1000..1000");
        REFUSED(nb_fw_add_clean_traffic(rs, "zz", NULL), -EINVAL,
                "nb_fw_add_clean_traffic: mac 'zz' is not a MAC address (aa:bb:cc:dd:ee:ff)");
        REFUSED(nb_fw_add_no_promisc(rs, NULL), -EINVAL,
                "nb_fw_add_no_promisc: mac NULL is not a MAC address (aa:bb:cc:dd:ee:ff)");
        REFUSED(nb_fw_add_no_ip_spoofing(rs, ips), -EINVAL,
                "nb_fw_add_no_ip_spoofing: ips[1] '300.1.1.1' is not an IPv4 address or prefix");
        REFUSED(nb_fw_add_allow_dhcp(rs, "server"), -EINVAL,
                "nb_fw_add_allow_dhcp: dhcp_server 'server' is not an IPv4 address or prefix");
        REFUSED(nb_fw_add_filter(rs, "no-mac-spoofing",
                                 (nb_fw_var[]){{.size = 0, .name = "MAC", .values = ips}}, 1),
                -EINVAL, "nb_fw_add_filter: vars[0]: size 0: make each with NB_FW_VAR()");
        ck_assert_uint_eq(nb_batch_size(b), 0);
        /* Nothing was added to the ruleset either: it installs no rule. */
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vm1", "vnet0", rs, NB_FW_REPLACE), 0);
        nb_fw_ruleset_free(rs);
        nb_batch_free(b);
}
END_TEST

/* nb_spawn() and nb_connect() write the message on every return (the
 * early ones too), and nb_fw_ensure() for its own arguments. */
START_TEST(test_spawn_connect_and_ensure_refusals_say_why)
{
        nb_spawn_opts zero = {0};
        nb_conn *c = NULL;

        REFUSED(nb_spawn("/nonexistent", &zero, &c), -EINVAL,
                "nb_spawn: opts: size is 0: initialise an nb_spawn_opts with NB_SPAWN_OPTS_INIT");
        REFUSED(nb_connect(NULL, &c), -EINVAL, "nb_connect: socket_path is NULL");
        REFUSED(nb_connect_timeout(NULL, 5, &c), -EINVAL,
                "nb_connect_timeout: socket_path is NULL");
        ck_assert_ptr_null(c);
        REFUSED(nb_fw_ensure(NULL, NULL, 0, NULL, NULL, NULL), -EINVAL,
                "nb_fw_ensure: conn is NULL");
}
END_TEST

/* 1 when this new thread's message starts empty and its own refusal is
 * its own. */
static void *other_thread(void *arg)
{
        nb_batch *b = arg;
        bool ok = nb_last_error()[0] == '\0' && nb_batch_bridge_create(b, "") == -EINVAL &&
                  strcmp(nb_last_error(), "nb_batch_bridge_create: name is empty") == 0;

        return (void *)(intptr_t)ok;
}

START_TEST(test_a_success_leaves_the_message_and_threads_have_their_own)
{
        nb_batch *b = nb_batch_new();
        pthread_t t;
        void *seen;

        REFUSED(nb_batch_tap_create(b, "", NULL), -EINVAL, "nb_batch_tap_create: name is empty");
        /* A success clears nothing: the message is the last refusal's. */
        ck_assert_int_eq(nb_batch_tap_create(b, "tap0", NULL), 0);
        ck_assert_str_eq(nb_last_error(), "nb_batch_tap_create: name is empty");
        /* Each thread has its own. */
        ck_assert_int_eq(pthread_create(&t, NULL, other_thread, b), 0);
        ck_assert_int_eq(pthread_join(t, &seen), 0);
        ck_assert_int_eq((intptr_t)seen, 1);
        ck_assert_str_eq(nb_last_error(), "nb_batch_tap_create: name is empty");
        nb_batch_free(b);
}
END_TEST

TCase *lib_einval_tcase(void)
{
        TCase *tc = tcase_create("lib-einval");

        tcase_add_test(tc, test_link_calls_name_the_bad_name);
        tcase_add_test(tc, test_unsized_structs_say_which_init_macro);
        tcase_add_test(tc, test_addresses_routes_and_sysctls_name_the_argument);
        tcase_add_test(tc, test_exec_and_programs_name_the_argument);
        tcase_add_test(tc, test_networks_name_the_field);
        tcase_add_test(tc, test_firewall_names_the_owner_the_rule_field_and_the_mac);
        tcase_add_test(tc, test_a_success_leaves_the_message_and_threads_have_their_own);
        tcase_add_test(tc, test_spawn_connect_and_ensure_refusals_say_why);
        return tc;
}
