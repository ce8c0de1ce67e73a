// SPDX-License-Identifier: LGPL-2.1-or-later
/* The policy sections without a kernel: what they parse to, which section
 * applies to whom, what a refusal says, and every configuration error with
 * the file and line that caused it. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_load.h"
#include "policy.h"
#include "program_args.h"
#include "testutil.h"
#include "tests_unit.h"

/* Never the host's /etc/netbroker/policy.d. */
#define NO_DIR "policy_dir = /nonexistent/nbtest-policy.d\n"

static int load(const char *body, struct nbd_config *c, char *err, size_t errlen)
{
        return tu_config_load(body, c, err, errlen);
}

static const struct nbd_policy_section *section_for(const struct nbd_config *c, uid_t uid,
                                                    gid_t gid, const gid_t *groups, size_t n)
{
        struct nbd_peer p = tu_peer(uid, gid, groups, n);

        return nbd_policy_for(&c->policy, &p);
}

static bool may_run(const struct nbd_config *c, uid_t uid, gid_t gid, const char *op)
{
        struct nbd_peer p = tu_peer(uid, gid, NULL, 0);
        struct nbd_err why = {0};

        return nbd_policy_check_op(&c->policy, &p, op, &why) == 0;
}

START_TEST(test_policy_sections_parse_with_their_keys_and_defaults)
{
        const struct nbd_policy_section *s;
        struct nbd_config c;
        char err[512];

        ck_assert_msg(load(NO_DIR "exec_allow = /bin/true /bin/false\n"
                                  "[policy uid 1000]\n"
                                  "ops = tap_create link_set exec ping\n"
                                  "bridges = virbr0 br0\n"
                                  "parents = eth0\n"
                                  "name_prefixes = vnet macvtap\n"
                                  "max_devices = 4\n"
                                  "netns = own\n"
                                  "exec = /bin/true\n"
                                  "\n"
                                  "[ policy user nobody ]   # a comment\n"
                                  "[policy gid 990]\n"
                                  "ops = macvtap_create\n"
                                  "name_prefixes = nb\n"
                                  "macvlan_modes = passthru\n"
                                  "macvlan_modes = vepa\n"
                                  "[policy group nogroup]\n",
                           &c, err, sizeof(err)) == 0,
                      "%s", err);
        ck_assert_uint_eq(c.policy.n, 4);
        s = c.policy.sections[0];
        ck_assert(!s->is_group);
        ck_assert_uint_eq(s->id, 1000);
        ck_assert_str_eq(s->label, "policy uid 1000");
        ck_assert_uint_eq(s->line, 3);
        ck_assert(may_run(&c, 1000, 1000, "tap_create"));
        ck_assert(may_run(&c, 1000, 1000, "link_set"));
        ck_assert(may_run(&c, 1000, 1000, "exec"));
        ck_assert(!may_run(&c, 1000, 1000, "bridge_create"));
        ck_assert(!may_run(&c, 1000, 1000, "link_delete"));
        ck_assert(nbd_policy_may_bridge(s, "virbr0") && nbd_policy_may_bridge(s, "br0"));
        ck_assert(!nbd_policy_may_bridge(s, "br1"));
        ck_assert(nbd_policy_may_parent(s, "eth0") && !nbd_policy_may_parent(s, "eth1"));
        ck_assert(nbd_policy_may_name(s, "vnet7") && nbd_policy_may_name(s, "vnet%d"));
        ck_assert(nbd_policy_may_name(s, "macvtap%d") && !nbd_policy_may_name(s, "vn%d"));
        ck_assert(!nbd_policy_may_name(s, "eth5"));
        ck_assert_uint_eq(s->max_devices, 4);
        ck_assert(s->netns_own);
        /* Without macvlan_modes: every mode but passthru. */
        ck_assert(nbd_policy_may_mode(s, 0) && nbd_policy_may_mode(s, 1) &&
                  nbd_policy_may_mode(s, 2));
        ck_assert(!nbd_policy_may_mode(s, 3));
        /* A user by name, with the defaults: nothing granted, 16 devices. */
        s = c.policy.sections[1];
        ck_assert(!s->is_group);
        ck_assert_uint_eq(s->id, 65534);
        ck_assert_str_eq(s->label, "policy user nobody");
        ck_assert_uint_eq(s->ops, 0);
        ck_assert_uint_eq(s->max_devices, 16);
        ck_assert(!s->netns_own);
        ck_assert_uint_eq(s->n_exec, 0);
        /* A repeated list key adds to the list; the first replaces the default. */
        s = c.policy.sections[2];
        ck_assert(s->is_group);
        ck_assert_uint_eq(s->id, 990);
        ck_assert(nbd_policy_may_mode(s, 3) && nbd_policy_may_mode(s, 1));
        ck_assert(!nbd_policy_may_mode(s, 0) && !nbd_policy_may_mode(s, 2));
        s = c.policy.sections[3];
        ck_assert(s->is_group);
        ck_assert_uint_eq(s->id, 65534);
        nbd_config_free(&c);
}
END_TEST

/* Each mistake stops loading, naming the file's line and what is wrong
 * (line 1 of each file is NO_DIR). */
START_TEST(test_policy_config_errors_name_their_line)
{
        static const struct {
                const char *body, *want;
        } cases[] = {
                {"[policy user nbtest-no-such-user]\n",
                 ":2: [policy user nbtest-no-such-user]: no such user"},
                {"\n[policy group nbtest-no-such-group]\n",
                 ":3: [policy group nbtest-no-such-group]: no such group"},
                {"[policy uid 1000]\nops = tap_create frobnicate\nname_prefixes = vnet\n",
                 ":3: ops: unknown operation 'frobnicate'"},
                {"[policy uid 0]\n", ":2: [policy uid 0]: root (uid 0) is allowed everything"},
                {"# root by name is root too\n[policy user root]\n",
                 ":3: [policy user root]: root (uid 0) is allowed everything"},
                {"[policy uid 1000]\n\nops = link_set veth_create\n",
                 ":4: ops: interfaces may be created but [policy uid 1000] has no name_prefixes"},
                {"exec_allow = /bin/true\n[policy uid 1000]\nops = exec\nexec = /bin/true "
                 "/bin/sh\n",
                 ":5: exec: /bin/sh is not on exec_allow"},
                {"exec_allow = /bin/true\n[policy uid 1000]\nexec = /bin/true\n",
                 ":4: exec: programs are listed but 'exec' is not in 'ops' of [policy uid 1000]"},
                {"[policy uid 1000]\nops = exec\n",
                 ":3: ops: exec is granted but [policy uid 1000] lists no 'exec' programs"},
                {"[policy uid 1000]\nexec = bin/true\n", ":3: exec: 'bin/true' is not an absolute"},
                {"[policy uid 1000]\nallow_uid = 5\n",
                 ":3: allow_uid: not a key of a [policy] section"},
                {"[policy uid 1000]\n[policy gid 1000]\n[policy uid 1000]\n",
                 ":4: [policy uid 1000]: uid 1000 has a section already, at "},
                {"[polizy uid 1]\n", ":2: [polizy uid 1]: unknown section"},
                {"[policy uid 1 2]\n", ":2: [policy uid 1 2]: unknown section"},
                {"[policy login alice]\n", ":2: [policy login ...]: expected uid, user, gid or"},
                {"[policy uid alice]\n", ":2: [policy uid alice]: not a numeric uid"},
                {"[policy uid 4294967295]\n", ":2: [policy uid 4294967295]: not a numeric uid"},
                {"[policy uid 1000\n", ":2: expected '[policy ...]'"},
                {"[policy uid 1000]\nmacvlan_modes = bridge turbo\n",
                 ":3: macvlan_modes: unknown mode 'turbo'"},
                {"[policy uid 1000]\nnetns = all\n", ":3: netns: expected own or none"},
                {"[policy uid 1000]\nprogram_args = some\n",
                 ":3: program_args: expected checked or any"},
                {"[policy uid 1000]\nprogram_args = any\n",
                 ":3: program_args: [policy uid 1000] lists no 'programs'"},
                {"[policy uid 1000]\nbridges = a/b\n", ":3: bridges: 'a/b' is not an interface"},
                {"[policy uid 1000]\nmax_devices = lots\n", ":3: max_devices: expected a number"},
                {"[policy uid 1000]\nmax_devices = 65536\n", ":3: max_devices: expected a number"},
                {"[policy uid 1000]\nops\n", ":3: expected 'key = value'"},
        };
        struct nbd_config c;
        char err[512], body[512];

        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                snprintf(body, sizeof(body), NO_DIR "%s", cases[i].body);
                ck_assert_int_lt(load(body, &c, err, sizeof(err)), 0);
                ck_assert_msg(strstr(err, cases[i].want), "case %zu: error was: %s", i, err);
                ck_assert_msg(strncmp(err, "/tmp/nbtest-conf-", 17) == 0, "case %zu: %s", i, err);
                nbd_config_free(&c);
        }
}
END_TEST

/* The uid's section, else the first group section in the order read whose
 * gid is the effective gid or a supplementary group; root has none. */
START_TEST(test_policy_section_of_a_uid_beats_groups_and_the_first_group_wins)
{
        const gid_t both[] = {27, 4242, 4243}, second[] = {4243}, none[] = {27, 100};
        const struct nbd_policy_section *s;
        struct nbd_config c;
        char err[512];

        ck_assert_msg(load(NO_DIR "[policy gid 4242]\n"
                                  "[policy gid 4243]\n"
                                  "[policy uid 1000]\n",
                           &c, err, sizeof(err)) == 0,
                      "%s", err);
        /* uid 1000 in both groups: its own section. */
        s = section_for(&c, 1000, 1000, both, 3);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s->label, "policy uid 1000");
        /* Another uid in both groups by supplementary group: the first. */
        s = section_for(&c, 2000, 2000, both, 3);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s->label, "policy gid 4242");
        /* By supplementary group alone. */
        s = section_for(&c, 2000, 2000, second, 1);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s->label, "policy gid 4243");
        /* By the effective gid, ahead of a later group it also has. */
        s = section_for(&c, 2000, 4242, second, 1);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s->label, "policy gid 4242");
        ck_assert_ptr_null(section_for(&c, 2000, 2000, none, 2));
        /* Root is never restricted, so no section applies to it. */
        ck_assert_ptr_null(section_for(&c, 0, 4242, both, 3));
        nbd_config_free(&c);
}
END_TEST

/* Operators write one thing: a section admits its uid or its group, in
 * addition to allow_uid and allow_gid. */
START_TEST(test_policy_section_admits_its_uid_and_group)
{
        const gid_t member[] = {4242};
        struct nbd_config c;
        struct nbd_peer p;
        char err[512];

        ck_assert_msg(load(NO_DIR "allow_uid = 0\n[policy uid 1000]\n[policy gid 4242]\n", &c, err,
                           sizeof(err)) == 0,
                      "%s", err);
        p = tu_peer(1000, 1000, NULL, 0);
        ck_assert(nbd_config_peer_allowed(&c, &p));
        p = tu_peer(3000, 3000, member, 1);
        ck_assert(nbd_config_peer_allowed(&c, &p));
        p = tu_peer(3000, 3000, NULL, 0);
        ck_assert(!nbd_config_peer_allowed(&c, &p));
        p = tu_peer(0, 0, NULL, 0);
        ck_assert(nbd_config_peer_allowed(&c, &p));
        nbd_config_free(&c);
}
END_TEST

/* A refusal names the uid, the op or program, and the key that would
 * grant it; what needs no grant is open to everyone admitted. */
START_TEST(test_policy_refusals_name_the_uid_the_op_and_the_key)
{
        struct nbd_config c;
        struct nbd_peer p;
        char err[512];
        struct nbd_err why = {0};

        ck_assert_msg(load(NO_DIR "exec_allow = /bin/true /bin/false\n"
                                  "[policy uid 1000]\n"
                                  "ops = link_set exec\n"
                                  "exec = /bin/true\n",
                           &c, err, sizeof(err)) == 0,
                      "%s", err);
        p = tu_peer(1000, 1000, NULL, 0);
        ck_assert_int_eq(nbd_policy_check_op(&c.policy, &p, "bridge_create", &why), -EPERM);
        ck_assert_str_eq(why.msg,
                         "policy: uid 1000 may not run bridge_create (not in 'ops' of [policy uid "
                         "1000])");
        ck_assert_int_eq(nbd_policy_check_exec(&c.policy, &p, "/bin/false", &why), -EPERM);
        ck_assert_str_eq(why.msg,
                         "policy: uid 1000 may not run /bin/false (not in 'exec' of [policy "
                         "uid 1000])");
        ck_assert_int_eq(nbd_policy_check_exec(&c.policy, &p, "/bin/true", &why), 0);
        /* No section at all. */
        p = tu_peer(2000, 2000, NULL, 0);
        ck_assert_int_eq(nbd_policy_check_op(&c.policy, &p, "link_delete", &why), -EPERM);
        ck_assert_msg(strstr(why.msg,
                             "policy: uid 2000 may not run link_delete (no [policy] section "
                             "for uid 2000"),
                      "%s", why.msg);
        /* An op the policy does not know (a newer one): root's only. */
        p = tu_peer(1000, 1000, NULL, 0);
        ck_assert_int_eq(nbd_policy_check_op(&c.policy, &p, "route_add", &why), -EPERM);
        for (size_t i = 0; i < 4; i++) {
                static const char *const open_ops[] = {"ping", "stats", "names_dump",
                                                       "firewall_list"};
                ck_assert(may_run(&c, 2000, 2000, open_ops[i]));
        }
        /* Root: everything, with or without a section. */
        ck_assert(may_run(&c, 0, 0, "bridge_create"));
        ck_assert(may_run(&c, 0, 0, "route_add"));
        p = tu_peer(0, 0, NULL, 0);
        ck_assert_int_eq(nbd_policy_check_exec(&c.policy, &p, "/bin/false", &why), 0);
        nbd_config_free(&c);
}
END_TEST

/* ---- policy_dir ---- */

static char *make_dir(void)
{
        char *d = strdup("/tmp/nbtest-policy-XXXXXX");

        ck_assert_ptr_nonnull(mkdtemp(d));
        return d;
}

static void put_file(const char *dir, const char *name, const char *body)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fputs(body, f);
        fclose(f);
}

static void remove_dir(char *dir)
{
        char *out;

        /* Only ever one of ours. */
        ck_assert(strncmp(dir, "/tmp/nbtest-policy-", 19) == 0);
        ck_assert_int_eq(tu_run((const char *const[]){"/bin/rm", "-rf", dir, NULL}, &out), 0);
        free(out);
        free(dir);
}

static int load_with_dir(const char *dir, const char *body, struct nbd_config *c, char *err,
                         size_t errlen)
{
        char conf[1024];

        snprintf(conf, sizeof(conf), "policy_dir = %s\n%s", dir, body);
        return load(conf, c, err, errlen);
}

/* The main file's sections come first, then the files of policy_dir that
 * end in .conf, in byte order; the first matching group section wins. */
START_TEST(test_policy_dir_files_follow_the_main_file_in_lexical_order)
{
        const gid_t all[] = {4242, 4243, 4244}, two[] = {4242, 4243};
        const struct nbd_policy_section *s;
        char *dir = make_dir(), err[512];
        struct nbd_config c;

        put_file(dir, "20-b.conf", "[policy gid 4243]\n");
        put_file(dir, "10-a.conf", "# users of group 4242\n[policy gid 4242]\nops = link_set\n");
        put_file(dir, "notes.txt", "not a policy at all\n");
        put_file(dir, ".hidden.conf", "neither\n");
        ck_assert_msg(load_with_dir(dir, "[policy gid 4244]\n", &c, err, sizeof(err)) == 0, "%s",
                      err);
        ck_assert_uint_eq(c.policy.n, 3);
        ck_assert_str_eq(c.policy.sections[0]->label, "policy gid 4244");
        ck_assert_str_eq(c.policy.sections[1]->label, "policy gid 4242");
        ck_assert_str_eq(c.policy.sections[2]->label, "policy gid 4243");
        ck_assert_uint_eq(c.policy.sections[1]->line, 2);
        ck_assert(strstr(c.policy.sections[1]->file, "/10-a.conf"));
        s = section_for(&c, 2000, 2000, all, 3);
        ck_assert_str_eq(s->label, "policy gid 4244");
        s = section_for(&c, 2000, 2000, two, 2);
        ck_assert_str_eq(s->label, "policy gid 4242");
        ck_assert(may_run(&c, 2000, 4242, "link_set"));
        nbd_config_free(&c);
        remove_dir(dir);
}
END_TEST

START_TEST(test_policy_dir_missing_is_fine_an_unreadable_file_is_not)
{
        char *dir = make_dir(), err[512], path[512], missing[512];
        struct nbd_config c;

        /* No directory: no policy files. */
        snprintf(missing, sizeof(missing), "%s/none", dir);
        ck_assert_msg(load_with_dir(missing, "", &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(c.policy.n, 0);
        nbd_config_free(&c);
        /* A policy file that cannot be read (here: a dangling link). */
        snprintf(path, sizeof(path), "%s/30-gone.conf", dir);
        ck_assert_int_eq(symlink("/nonexistent/nbtest", path), 0);
        ck_assert_int_lt(load_with_dir(dir, "", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "/30-gone.conf: No such file or directory"), "%s", err);
        nbd_config_free(&c);
        unlink(path);
        /* One that cannot be read as a file. */
        snprintf(path, sizeof(path), "%s/40-dir.conf", dir);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        ck_assert_int_lt(load_with_dir(dir, "", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "/40-dir.conf: Is a directory"), "%s", err);
        nbd_config_free(&c);
        rmdir(path);
        /* A policy_dir that is no directory. */
        put_file(dir, "plain", "");
        snprintf(path, sizeof(path), "%s/plain", dir);
        ck_assert_int_lt(load_with_dir(path, "", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "/plain: Not a directory"), "%s", err);
        nbd_config_free(&c);
        /* Relative: the helper runs in / */
        ck_assert_int_lt(load("policy_dir = policy.d\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":1: policy_dir: expected an absolute path"), "%s", err);
        nbd_config_free(&c);
        remove_dir(dir);
}
END_TEST

/* A policy file holds sections only, and its errors name it and its line;
 * its exec programs must be on the main file's exec_allow. */
START_TEST(test_policy_dir_errors_name_the_policy_file_and_line)
{
        static const struct {
                const char *body, *want;
        } cases[] = {
                {"allow_uid = 1000\n", "/50-x.conf:1: allow_uid: only [policy ...] sections"},
                {"\n\nops = link_set\n[policy uid 1000]\n",
                 "/50-x.conf:3: ops: only [policy ...] sections"},
                {"[policy uid 1000]\nops = link_set\n[policy user nbtest-no-such-user]\n",
                 "/50-x.conf:3: [policy user nbtest-no-such-user]: no such user"},
                {"[policy uid 1000]\nops = exec\nexec = /bin/sh\n",
                 "/50-x.conf:3: exec: /bin/sh is not on exec_allow"},
                {"[policy uid 1000]\nops = tap_create\n",
                 "/50-x.conf:2: ops: interfaces may be created"},
                {"[policy uid 4000]\n", "[policy uid 4000]: uid 4000 has a section already, at "},
        };
        char *dir = make_dir(), err[512];
        struct nbd_config c;

        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                put_file(dir, "50-x.conf", cases[i].body);
                ck_assert_int_lt(load_with_dir(dir, "exec_allow = /bin/true\n[policy uid 4000]\n",
                                               &c, err, sizeof(err)),
                                 0);
                ck_assert_msg(strstr(err, cases[i].want), "case %zu: error was: %s", i, err);
                nbd_config_free(&c);
        }
        /* The same file, fixed, loads. */
        put_file(dir, "50-x.conf", "[policy uid 1000]\nops = exec\nexec = /bin/true\n");
        ck_assert_msg(load_with_dir(dir, "exec_allow = /bin/true\n", &c, err, sizeof(err)) == 0,
                      "%s", err);
        nbd_config_free(&c);
        remove_dir(dir);
}
END_TEST

/* ---- program arguments of a caller other than root (program_args.h) ---- */

/* Interfaces whose name starts with "mine" are the caller's; every name
 * asked about is counted. */
static int mine_only(void *data, const char *ifname, struct nbd_err *e)
{
        ++*(unsigned *)data;
        if (strncmp(ifname, "mine", 4) == 0)
                return 0;
        return nbd_err_set(e, -EPERM, "policy: uid 1000 does not own interface %s", ifname);
}

static int args_check(const char *file, const char *const *argv, unsigned *asked, struct nbd_err *e)
{
        size_t n = 0;

        while (argv[n])
                n++;
        *asked = 0;
        nbd_err_clear(e);
        return nbd_program_args_check(file, (char *const *)argv, n, 1000, mine_only, asked, e);
}

#define DNSMASQ_OK                                                                                 \
        "dnsmasq", "--keep-in-foreground", "--pid-file", "--leasefile-ro", "--bind-dynamic",       \
                "--interface=mine0,mine1"

START_TEST(test_program_args_of_a_caller_other_than_root_follow_the_documented_rules)
{
        static const struct {
                const char *file, *argv[12], *why; /* why: NULL when allowed */
        } cases[] = {
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, NULL}, NULL},
                {"/usr/sbin/dnsmasq",
                 {DNSMASQ_OK, "--conf-file", "--dhcp-range=10.0.0.2,10.0.0.9", "--user=root",
                  "--group=", "--log-facility=-", NULL},
                 NULL},
                /* getopt_long() takes an abbreviation: not the checker. */
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--dhcp-scr=/tmp/x", NULL}, "not an option"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "-C/etc/shadow", NULL}, "only long options"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--leasefile-ro=1", NULL}, "takes no value"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--user=../x/y", NULL}, "names a file"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--interface=mine0,eth0", NULL}, "eth0"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--interface=mine0,", NULL}, "interface name"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--pid-file=", NULL}, "takes no value"},
                {"/usr/sbin/radvd", {"radvd", "--nodaemon", "--logmethod=stderr", NULL}, NULL},
                {"/usr/sbin/radvd", {"radvd", "--logmethod=stderr", NULL}, "without --nodaemon"},
                {"/usr/sbin/radvd",
                 {"radvd", "--nodaemon", "--logmethod=logfile", NULL},
                 "one of: stderr stderr_syslog syslog none"},
                {"/usr/sbin/radvd",
                 {"radvd", "--nodaemon", "--config=/tmp/r.conf", NULL},
                 "not an"},
                {"/usr/sbin/radvd",
                 {"radvd", "--nodaemon", "--pidfile=/etc/passwd", NULL},
                 "not an"},
                {"/usr/sbin/radvd", {"radvd", "--nodaemon", "-u", "root", NULL}, "long options"},
                /* A cache of a process that runs as root: at most 10000
                 * names, given as a plain decimal number. */
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--cache-size=10000", NULL}, NULL},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--cache-size=0", NULL}, NULL},
                {"/usr/sbin/dnsmasq",
                 {DNSMASQ_OK, "--cache-size=10001", NULL},
                 "--cache-size takes at most 10000"},
                {"/usr/sbin/dnsmasq",
                 {DNSMASQ_OK, "--cache-size=99999999999999999999999", NULL},
                 "at most 10000"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--cache-size=-1", NULL}, "decimal number"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--cache-size= 5", NULL}, "decimal number"},
                {"/usr/sbin/dnsmasq", {DNSMASQ_OK, "--cache-size=", NULL}, "decimal number"},
                /* Without rules: no arguments at all. */
                {"/usr/bin/sleep", {"sleep", NULL}, NULL},
                {"/usr/bin/sleep", {"sleep", "100", NULL}, "may not give /usr/bin/sleep arguments"},
        };
        struct nbd_err e;
        unsigned asked;

        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                int r = args_check(cases[i].file, cases[i].argv, &asked, &e);
                if (!cases[i].why) {
                        ck_assert_msg(r == 0, "case %zu: %d %s", i, r, e.msg);
                        continue;
                }
                ck_assert_msg(r == -EPERM, "case %zu: %d", i, r);
                ck_assert_msg(strstr(e.msg, "uid 1000 may not"), "case %zu: %s", i, e.msg);
                ck_assert_msg(strstr(e.msg, cases[i].why), "case %zu: %s", i, e.msg);
        }
        /* Each interface of a list is asked about. */
        ck_assert_int_eq(args_check("/usr/sbin/dnsmasq", (const char *const[]){DNSMASQ_OK, NULL},
                                    &asked, &e),
                         0);
        ck_assert_uint_eq(asked, 2);
}
END_TEST

/* Every byte of every argument and environment entry of a caller other
 * than root is printable ASCII, whatever the program and its rules: a
 * newline would start a line of the helper's log, an escape or a C1 code
 * rewrite a terminal. */
START_TEST(test_program_args_and_env_of_a_caller_other_than_root_are_printable_ascii)
{
        static const char *const bad[] = {"a\nb", "\r",       "\t",          "\x1b[2J",
                                          "\x7f", "\xc2\x9b", "\xe2\x80\xae"};
        const char *argv[] = {"dnsmasq", "--domain=x y ~", NULL}, *env[] = {"LANG=C.UTF-8", NULL};
        struct nbd_err e;

        ck_assert_int_eq(
                nbd_program_bytes_check((char *const *)argv, 2, (char *const *)env, 1, 1000, &e),
                0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                char buf[32];
                snprintf(buf, sizeof(buf), "--domain=%s", bad[i]);
                argv[1] = buf;
                nbd_err_clear(&e);
                ck_assert_int_eq(nbd_program_bytes_check((char *const *)argv, 2, (char *const *)env,
                                                         1, 1000, &e),
                                 -EPERM);
                ck_assert_msg(strstr(e.msg, "uid 1000 may not give argument 1 with byte 0x"),
                              "case %zu: %s", i, e.msg);
                argv[1] = "--domain=x";
                snprintf(buf, sizeof(buf), "LANG=%s", bad[i]);
                env[0] = buf;
                nbd_err_clear(&e);
                ck_assert_int_eq(nbd_program_bytes_check((char *const *)argv, 2, (char *const *)env,
                                                         1, 1000, &e),
                                 -EPERM);
                ck_assert_msg(strstr(e.msg, "uid 1000 may not give environment entry 0 with byte"),
                              "case %zu: %s", i, e.msg);
                env[0] = "LANG=C.UTF-8";
        }
}
END_TEST

TCase *policy_unit_tcase(void)
{
        TCase *t = tcase_create("policy");

        tcase_add_test(t, test_policy_sections_parse_with_their_keys_and_defaults);
        tcase_add_test(t, test_policy_config_errors_name_their_line);
        tcase_add_test(t, test_policy_section_of_a_uid_beats_groups_and_the_first_group_wins);
        tcase_add_test(t, test_policy_section_admits_its_uid_and_group);
        tcase_add_test(t, test_policy_refusals_name_the_uid_the_op_and_the_key);
        tcase_add_test(t, test_policy_dir_files_follow_the_main_file_in_lexical_order);
        tcase_add_test(t, test_policy_dir_missing_is_fine_an_unreadable_file_is_not);
        tcase_add_test(t, test_policy_dir_errors_name_the_policy_file_and_line);
        tcase_add_test(t,
                       test_program_args_of_a_caller_other_than_root_follow_the_documented_rules);
        tcase_add_test(t,
                       test_program_args_and_env_of_a_caller_other_than_root_are_printable_ascii);
        return t;
}
