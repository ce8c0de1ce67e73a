// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl as a script sees it: exit statuses and JSON. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

/* Run netbrokerctl with a spawned helper and the given config; returns its
 * exit status, output in *out. */
static int ctl(const char *conf, char **out, const char *a1, const char *a2, const char *a3,
               const char *a4, const char *a5)
{
        const char *argv[] = {
                NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf, "--json", a1, a2, a3, a4,
                a5,          NULL};

        return tu_run(argv, out);
}

START_TEST(test_ctl_exit_statuses_are_what_scripts_rely_on)
{
        char *conf = tu_config(TU_ALLOW);
        char *out = NULL;

        tu_private_netns();
        ck_assert_int_eq(ctl(conf, &out, "ping", NULL, NULL, NULL, NULL), 0);
        ck_assert_msg(strstr(out, "\"ok\":true"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "exec", "--", "/bin/true", NULL, NULL), 0);
        free(out);
        /* The program failed: 1, with its exit code in the JSON. */
        ck_assert_int_eq(ctl(conf, &out, "exec", "--", "/bin/false", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "\"exit_code\":1"), "%s", out);
        free(out);
        /* A program's output is any bytes: valid UTF-8 is kept, any other
         * byte (here a lone 0xff, and a sequence cut at the end) becomes
         * its code point, so the JSON stays valid. */
        ck_assert_int_eq(ctl(conf, &out, "exec", "--", "/bin/sh", "-c",
                             "printf '\\377\\303\\251ok\\342\\202'"),
                         0);
        ck_assert_msg(strstr(out, "\"stdout\":\"\\u00ff\xc3\xa9ok\\u00e2\\u0082\""), "%s", out);
        free(out);
        /* Refused by the allow-list: an op failure, 1. */
        ck_assert_int_eq(ctl(conf, &out, "exec", "--", "/usr/bin/id", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "not on the allow-list"), "%s", out);
        free(out);
        /* Usage errors: 2, even before any helper is reached. */
        ck_assert_int_eq(ctl(conf, &out, "frobnicate", NULL, NULL, NULL, NULL), 2);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "exec", "--timeout", "soon", "--", "/bin/true"), 2);
        free(out);
        /* The library's sentence says which argument and why. */
        ck_assert_int_eq(ctl(conf, &out, "bw", "set", "abcdefghijklmnopq", "--out-average", "100"),
                         2);
        ck_assert_msg(strstr(out, "ifname 'abcdefghijklmnopq' is 17 bytes; at most 15"), "%s", out);
        free(out);
        /* No helper to be had: 3. */
        {
                const char *argv[] = {NB_TEST_CTL, "--spawn", "/nonexistent/netbrokerd", "ping",
                                      NULL};
                ck_assert_int_eq(tu_run(argv, &out), 3);
                free(out);
        }
        free(conf);
}
END_TEST

START_TEST(test_ctl_link_create_and_names_in_json)
{
        char *conf = tu_config(TU_ALLOW);
        char *out = NULL;

        tu_private_netns();
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "bridge", "nbbr%d", NULL), 0);
        ck_assert_msg(strstr(out, "\"ifname\":\"nbbr0\""), "%s", out);
        free(out);
        ck_assert(tu_link_exists("nbbr0"));
        ck_assert_int_eq(ctl(conf, &out, "link", "set", "nbbr0", "--mtu", "1400"), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "names", NULL, NULL, NULL, NULL), 0);
        /* Each netbrokerctl spawns its own helper: this one rebuilt its
         * bitmap from the kernel (nbbr0 used) with a fresh cursor. */
        ck_assert_msg(strstr(out, "{\"prefix\":\"nbbr\",\"cursor\":0,\"used\":[0]}"), "%s", out);
        free(out);
        /* An existing name: the op fails, 1, with the reason. */
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "bridge", "nbbr0", NULL), 1);
        ck_assert_msg(strstr(out, "already exists"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "link", "delete", "nbbr0", NULL, NULL), 0);
        free(out);
        ck_assert(!tu_link_exists("nbbr0"));
        free(conf);
}
END_TEST

/* --queues: a macvtap of 4 queues comes back as 4 fds (one open of its
 * character device each), a tap of 2 as 2; a bridge with --queues is a
 * usage error that makes nothing. */
START_TEST(test_ctl_link_create_queues_for_a_tap_and_a_macvtap)
{
        char *conf = tu_config(TU_ALLOW);
        char *out = NULL;
        const char *mvt[] = {NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf,
                             "--json",    "link",    "create",       "macvtap",  "ctq0",
                             "--parent",  "p0",      "--queues",     "4",        NULL};
        const char *bad[] = {
                NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf, "--json", "link",
                "create",    "bridge",  "ctqbr0",       "--queues", "2",  NULL};

        tu_private_netns();
        tu_veth("p0", "p1");
        ck_assert_int_eq(tu_run(mvt, &out), 0);
        ck_assert_msg(strstr(out, "\"ifname\":\"ctq0\"") && strstr(out, "\"fds\":4}"), "%s", out);
        free(out);
        ck_assert_str_eq(tu_link_get("ctq0", "linkinfo.info_kind"), "macvtap");
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "tap", "ctq1", "--queues"), 2);
        free(out);
        mvt[7] = "create", mvt[8] = "tap", mvt[9] = "ctq1", mvt[10] = "--queues", mvt[11] = "2";
        mvt[12] = NULL;
        ck_assert_int_eq(tu_run(mvt, &out), 0);
        ck_assert_msg(strstr(out, "\"ifname\":\"ctq1\"") && strstr(out, "\"fds\":2}"), "%s", out);
        free(out);
        ck_assert_int_eq(tu_run(bad, &out), 2);
        ck_assert_msg(strstr(out, "--queues is for a tap or a macvtap"), "%s", out);
        free(out);
        ck_assert(!tu_link_exists("ctqbr0"));
        free(conf);
}
END_TEST

/* link list and bw show come from the helper (LinkList, BandwidthShow). */
START_TEST(test_ctl_link_list_and_bw_show_read_through_the_helper)
{
        char *conf = tu_config(TU_ALLOW);
        char *out = NULL, want[256];
        const char *text[] = {NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf,
                              "bw",        "show",    "ct0",          NULL};

        tu_private_netns();
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "tap", "ct0", NULL), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "link", "list", "ct0", NULL, NULL), 0);
        snprintf(want, sizeof(want),
                 "{\"ok\":true,\"links\":[{\"ifname\":\"ct0\",\"ifindex\":%s,\"kind\":\"tap\","
                 "\"kind_name\":\"tun\","
                 "\"mac\":\"%s\",\"mtu\":1500,\"up\":false,\"master\":\"\",\"owner_uid\":0,"
                 "\"made_by_helper\":true}]}\n",
                 tu_link_get("ct0", "ifindex"), tu_link_get("ct0", "address"));
        ck_assert_str_eq(out, want);
        free(out);
        /* Every interface: lo, unmarked, too. */
        ck_assert_int_eq(ctl(conf, &out, "link", "list", NULL, NULL, NULL), 0);
        ck_assert_msg(strstr(out, "{\"ifname\":\"lo\",\"ifindex\":1,\"kind\":\"other\"") &&
                              strstr(out, "\"owner_uid\":null,\"made_by_helper\":false") &&
                              strstr(out, "\"ifname\":\"ct0\""),
                      "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "link", "list", "ctnone", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "\"errno\":19,"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "bw", "set", "ct0", "--in-average", "100"), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "bw", "show", "ct0", NULL, NULL), 0);
        ck_assert_msg(strstr(out, "\"inbound\":{\"mechanism\":\"htb") &&
                              strstr(out, "\"average\":100,\"peak\":100,") &&
                              strstr(out, "\"outbound\":null}"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(tu_run(text, &out), 0);
        ck_assert_msg(strstr(out, "inbound   average 100 kB/s, peak 100 kB/s") &&
                              strstr(out, "outbound  none"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "bw", "clear", "ct0", NULL, NULL), 0);
        free(out);
        ck_assert_int_eq(tu_run(text, &out), 0);
        ck_assert_msg(strstr(out, "inbound   none") && strstr(out, "outbound  none"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "bw", "show", "ctnone", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "\"errno\":19,"), "%s", out);
        free(out);
        free(conf);
}
END_TEST

/* fw apply with the new fields, fw list --counters and fw show: what a
 * script reads, in JSON and as text. */
START_TEST(test_ctl_fw_counters_and_show_print_the_rules_in_libvirts_terms)
{
        char *conf = tu_config(TU_ALLOW);
        char path[] = "/tmp/nbctl-fw-XXXXXX", *out = NULL;
        const char rules[] = "owner g0 on ctfw0\n"
                             "group ssh priority -100\n"
                             "rule to accept proto tcp dport ! 22 comment \"not ssh\"\n"
                             "rule from drop priority 7 ether-type ! ipv4\n";
        const char *show[] = {NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf,
                              "fw",        "show",    "g0",           NULL};
        const char *list[] = {NB_TEST_CTL, "--spawn", NB_TEST_HELPER, "--config", conf,
                              "fw",        "list",    "--counters",   NULL};
        int fd = mkstemp(path);

        tu_private_netns();
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, rules, strlen(rules)), (int)strlen(rules));
        close(fd);
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "tap", "ctfw0", NULL), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "apply", path, NULL, NULL), 0);
        ck_assert_msg(strstr(out, "{\"ok\":true,\"owner\":\"g0\",\"hash\":"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "list", "--counters", NULL, NULL), 0);
        ck_assert_msg(strstr(out, "{\"group\":\"ssh\",\"direction\":\"to\",\"index\":0,"
                                  "\"packets\":0,\"bytes\":0,\"text\":\"comment='not ssh' in "
                                  "accept ip/ipv6 protocol='tcp' "
                                  "dstportstart='!22'\"}"),
                      "%s", out);
        ck_assert_msg(strstr(out, "\"direction\":\"from\",\"index\":0,\"packets\":0,\"bytes\":0,"
                                  "\"text\":\"out drop priority='7' mac protocolid='!ipv4'\"}"),
                      "%s", out);
        free(out);
        /* Without --counters, no counters. */
        ck_assert_int_eq(ctl(conf, &out, "fw", "list", NULL, NULL, NULL), 0);
        ck_assert_msg(strstr(out, "\"owner\":\"g0\"") && !strstr(out, "counters"), "%s", out);
        free(out);
        ck_assert_int_eq(tu_run(list, &out), 0);
        ck_assert_msg(strstr(out, "  to/ssh                         0          0            0  "
                                  "comment='not ssh' in accept"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(tu_run(show, &out), 0);
        ck_assert_msg(strstr(out, "g0 on ctfw0, ") &&
                              strstr(out, "  from/ssh                       0  out drop "
                                          "priority='7' mac protocolid='!ipv4'\n"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "show", "g0", NULL, NULL), 0);
        ck_assert_msg(strncmp(out, "{\"ok\":true,\"owner\":\"g0\",\"ifname\":\"ctfw0\"", 40) == 0 &&
                              strstr(out, "\"counters\":[{"),
                      "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "show", "nobody", NULL, NULL), 1);
        ck_assert_msg(strstr(out, "\"errno\":2,"), "%s", out);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "list", "--countres", NULL, NULL), 2);
        free(out);
        unlink(path);
        free(conf);
}
END_TEST

/* A memfd's whole content, NUL-terminated (caller frees). */
static char *slurp_fd(int fd)
{
        off_t len = lseek(fd, 0, SEEK_END);
        char *buf = malloc((size_t)len + 1);

        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(pread(fd, buf, (size_t)len, 0), len);
        buf[len] = '\0';
        close(fd);
        return buf;
}

/* Run netbrokerctl with argv (NULL-terminated, without argv[0]) in our
 * environment; its exit status, stdout and stderr (caller frees). */
static int ctl_run(const char *const *args, char **ret_out, char **ret_err)
{
        const char *argv[16] = {NB_TEST_CTL};
        int out = memfd_create("out", MFD_CLOEXEC), err = memfd_create("err", MFD_CLOEXEC);
        int status;
        pid_t pid;

        for (size_t i = 0; args[i]; i++) {
                ck_assert_uint_lt(i + 2, sizeof(argv) / sizeof(*argv));
                argv[i + 1] = args[i];
        }
        ck_assert_int_ge(out, 0);
        ck_assert_int_ge(err, 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int null = open("/dev/null", O_RDONLY);
                if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
                        _exit(126);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "netbrokerctl died: %d", status);
        *ret_out = slurp_fd(out);
        *ret_err = slurp_fd(err);
        return WEXITSTATUS(status);
}

/* The helper that answers is the one listening: its allocator's cursor
 * moves on from name to name, where a private helper would start again at
 * 0 (DESIGN: next-fit). Creates and deletes PREFIX0, then creates PREFIX1. */
static void assert_same_helper_twice(const char *prefix, const char *const *via)
{
        char tmpl[32], name[32], *out, *err;
        const char *args[12];
        size_t n = 0;

        snprintf(tmpl, sizeof(tmpl), "%s%%d", prefix);
        while (via[n])
                args[n] = via[n], n++;
        for (int round = 0; round < 2; round++) {
                snprintf(name, sizeof(name), "%s%d", prefix, round);
                args[n] = "-j", args[n + 1] = "link", args[n + 2] = "create";
                args[n + 3] = "bridge", args[n + 4] = tmpl, args[n + 5] = NULL;
                ck_assert_int_eq(ctl_run(args, &out, &err), 0);
                ck_assert_msg(strstr(out, "\"ok\":true") && strstr(out, name), "%s%s", out, err);
                free(out);
                free(err);
                args[n + 2] = "delete", args[n + 3] = name, args[n + 4] = NULL;
                ck_assert_int_eq(ctl_run(args, &out, &err), 0);
                free(out);
                free(err);
        }
}

START_TEST(test_ctl_netbroker_socket_names_the_helper)
{
        struct tu_helper h;
        char *out, *err, *conf = tu_config(TU_ALLOW);
        const char *none[] = {NULL};
        const char *verbose_ping[] = {"-v", "ping", NULL};
        const char *opt_wins[] = {"--socket", NULL, "ping", NULL};
        const char *json_ping[] = {"-j", "ping", NULL};
        const char *version[] = {"--version", NULL};

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW);
        setenv("NETBROKER_SOCKET", h.sock, 1);
        assert_same_helper_twice("nbenv", none);
        ck_assert_int_eq(ctl_run(verbose_ping, &out, &err), 0);
        ck_assert_msg(strstr(err, "(from NETBROKER_SOCKET)") && strstr(err, h.sock), "%s", err);
        free(out);
        free(err);

        /* A missing socket is an error that says where it looked; no
         * private helper stands in, though one is at hand. */
        setenv("NETBROKERD", NB_TEST_HELPER, 1);
        setenv("NETBROKER_SOCKET", "/nonexistent/netbrokerd.sock", 1);
        ck_assert_int_eq(ctl_run(verbose_ping + 1, &out, &err), 3);
        ck_assert_msg(strstr(err, "netbrokerctl: ping: cannot reach netbrokerd at "
                                  "/nonexistent/netbrokerd.sock (from NETBROKER_SOCKET)") &&
                              strstr(err, "(ENOENT)\n"),
                      "%s", err);
        ck_assert_str_eq(out, "");
        free(out);
        free(err);
        ck_assert_int_eq(ctl_run(json_ping, &out, &err), 3);
        ck_assert_msg(strstr(out, "{\"ok\":false,\"error\":{\"errno\":2,\"name\":\"ENOENT\","),
                      "%s", out);
        free(out);
        free(err);
        /* --version asks the helper named, and says so when it cannot. */
        ck_assert_int_eq(ctl_run(version, &out, &err), 0);
        ck_assert_msg(strncmp(out, "netbrokerctl " NB_VERSION "\n", strlen(NB_VERSION) + 14) == 0 &&
                              strstr(out, "\nnetbrokerd: unknown, not reached\n"),
                      "%s", out);
        free(out);
        free(err);
        setenv("NETBROKER_SOCKET", h.sock, 1);
        ck_assert_int_eq(ctl_run(version, &out, &err), 0);
#ifdef NB_VERSION_MAJOR
        ck_assert_msg(strstr(out, "\nnetbrokerd " NB_VERSION "\n"), "%s", out);
#else
        /* A library without nb_conn_helper_version(). */
        ck_assert_msg(strstr(out, "\nnetbrokerd: unknown, this libnetbroker cannot tell\n"), "%s",
                      out);
#endif
        free(out);
        free(err);
        setenv("NETBROKER_SOCKET", "/nonexistent/netbrokerd.sock", 1);
        /* --socket wins over the environment. */
        opt_wins[1] = h.sock;
        ck_assert_int_eq(ctl_run(opt_wins, &out, &err), 0);
        free(out);
        free(err);
        tu_helper_stop(&h);
        free(conf);
}
END_TEST

/* A unix socket file at path that nobody listens on. */
static void stale_socket(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd);
}

/* Without --socket or NETBROKER_SOCKET the system socket is used when it
 * exists: here, in a mount namespace of the test's own, a tmpfs on /run
 * with NB_SYSTEM_SOCKET a symlink to a listening helper's socket. */
START_TEST(test_ctl_system_socket_is_the_default_when_it_exists)
{
        struct tu_helper h;
        char *out, *err, *conf = tu_config(TU_ALLOW), dir[sizeof(NB_SYSTEM_SOCKET)];
        const char *none[] = {NULL};
        const char *verbose_ping[] = {"-v", "--config", conf, "ping", NULL};

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW);
        unsetenv("NETBROKER_SOCKET");
        setenv("NETBROKERD", NB_TEST_HELPER, 1);
        ck_assert_msg(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_msg(strncmp(NB_SYSTEM_SOCKET, "/run/", 5) == 0, "%s", NB_SYSTEM_SOCKET);
        ck_assert_int_eq(mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"), 0);
        snprintf(dir, sizeof(dir), "%s", NB_SYSTEM_SOCKET);
        *strrchr(dir, '/') = '\0';
        free(tu_sh("mkdir -p %s", dir));

        /* No system socket: a private helper, and -v says so. */
        ck_assert_int_eq(ctl_run(verbose_ping, &out, &err), 0);
        ck_assert_msg(strstr(err, "using a private netbrokerd") && strstr(err, NB_SYSTEM_SOCKET),
                      "%s", err);
        free(out);
        free(err);

        ck_assert_int_eq(symlink(h.sock, NB_SYSTEM_SOCKET), 0);
        ck_assert_int_eq(ctl_run(verbose_ping, &out, &err), 0);
        ck_assert_msg(strstr(err, "(the system socket)") &&
                              strstr(err, "netbrokerctl: --config ") && strstr(err, " ignored: "),
                      "%s", err);
        free(out);
        free(err);
        assert_same_helper_twice("nbsys", none);
        tu_helper_stop(&h);
        /* A stale socket, nobody listening: an error, not a private
         * helper. */
        ck_assert_int_eq(unlink(NB_SYSTEM_SOCKET), 0);
        stale_socket(NB_SYSTEM_SOCKET);
        ck_assert_int_eq(ctl_run(verbose_ping + 3, &out, &err), 3);
        ck_assert_msg(strstr(err, "(the system socket)") && strstr(err, "(ECONNREFUSED)"), "%s",
                      err);
        free(out);
        free(err);
        free(conf);
}
END_TEST

/* A private helper's log is its own business unless -v asks: here a
 * helper at log level debug, which says a lot. */
START_TEST(test_ctl_private_helper_log_stays_off_the_terminal)
{
        char *conf = tu_config(TU_ALLOW "log_level = debug\n"), *out, *err;
        const char *quiet[] = {"--spawn", NB_TEST_HELPER, "--config", conf, "ping", NULL};
        const char *verbose[] = {"-v", "--spawn", NB_TEST_HELPER, "--config", conf, "ping", NULL};
        const char *bad[] = {"--spawn",           NB_TEST_HELPER, "--config",
                             "/nonexistent.conf", "ping",         NULL};

        tu_private_netns();
        ck_assert_int_eq(ctl_run(quiet, &out, &err), 0);
        ck_assert_msg(strstr(out, "pong from netbrokerd"), "%s", out);
        ck_assert_str_eq(err, "");
        free(out);
        free(err);
        ck_assert_int_eq(ctl_run(verbose, &out, &err), 0);
        ck_assert_msg(strstr(err, "netbrokerd[debug]"), "%s", err);
        free(out);
        free(err);
        /* A helper that cannot start says why, even without -v. */
        ck_assert_int_eq(ctl_run(bad, &out, &err), 3);
        ck_assert_msg(strstr(err, "netbrokerd") && strstr(err, "/nonexistent.conf: No such file") &&
                              strstr(err, "netbrokerctl: ping: cannot reach a private netbrokerd"),
                      "%s", err);
        free(out);
        free(err);
        free(conf);
}
END_TEST

/* A batch command: each op's result in the common shape, and the first
 * failure as the whole command's error. */
START_TEST(test_ctl_fw_apply_gives_each_owner_the_common_shape)
{
        char *conf = tu_config(TU_ALLOW);
        char path[] = "/tmp/nbctl-fw2-XXXXXX", *out = NULL;
        const char rules[] = "owner ok0 on ctok0\nrule to accept\n"
                             "owner bad0 on ctnone0\nrule to accept\n";
        int fd = mkstemp(path);

        tu_private_netns();
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, rules, strlen(rules)), (int)strlen(rules));
        close(fd);
        ck_assert_int_eq(ctl(conf, &out, "link", "create", "tap", "ctok0", NULL), 0);
        free(out);
        ck_assert_int_eq(ctl(conf, &out, "fw", "apply", path, NULL, NULL), 1);
        ck_assert_msg(strncmp(out, "{\"ok\":false,\"error\":{\"errno\":", 29) == 0 &&
                              strstr(out, ",\"results\":[{\"ok\":") &&
                              strstr(out, "{\"ok\":false,\"owner\":\"bad0\",\"error\":{\"errno\":"),
                      "%s", out);
        free(out);
        unlink(path);
        free(conf);
}
END_TEST

/* A user other than root making a persistent tap through netbrokerctl:
 * the policy takes one only with the caller as its owner, which the CLI
 * had no way to say (every persistent tap of such a caller was refused);
 * now it is the caller's own by default, --owner names another, and root
 * gives one to QEMU's user with --owner. */
START_TEST(test_ctl_persistent_tap_of_a_user_is_its_own)
{
        struct tu_helper h;
        char *out, *owner;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW "policy_dir = /nonexistent/nbtest-policy.d\n"
                                     "[policy uid 65534]\nops = tap_create link_delete\n"
                                     "name_prefixes = nbo\n");
        ck_assert_int_eq(chmod(h.sock, 0666), 0);
        out = tu_sh("setpriv --reuid 65534 --regid 65534 --clear-groups %s --socket %s --json "
                    "link create tap nbo0; echo rc=$?",
                    NB_TEST_CTL, h.sock);
        ck_assert_msg(strstr(out, "\"ok\":true") && strstr(out, "rc=0"), "%s", out);
        free(out);
        owner = tu_sh("ip -d -j link show nbo0 | python3 -c 'import json,sys; "
                      "d=json.load(sys.stdin)[0][\"linkinfo\"][\"info_data\"]; "
                      "print(d.get(\"user\"), d.get(\"group\"), "
                      "d.get(\"persist\"))'");
        printf("ctl: uid 65534's tap nbo0: user group persist = %s", owner);
        ck_assert_str_eq(owner, "nobody nogroup True\n");
        free(owner);
        out = tu_sh("setpriv --reuid 65534 --regid 65534 --clear-groups %s --socket %s "
                    "link create tap nbo1 --owner 0 2>&1; echo rc=$?",
                    NB_TEST_CTL, h.sock);
        ck_assert_msg(strstr(out, "rc=1") && strstr(out, "EPERM"), "%s", out);
        free(out);
        out = tu_sh("%s --socket %s link create tap nbo2 --owner 4711:4712; echo rc=$?",
                    NB_TEST_CTL, h.sock);
        ck_assert_msg(strstr(out, "rc=0"), "%s", out);
        free(out);
        owner = tu_sh("ip -d -j link show nbo2 | python3 -c 'import json,sys; "
                      "d=json.load(sys.stdin)[0][\"linkinfo\"][\"info_data\"]; "
                      "print(d.get(\"user\"), d.get(\"group\"))'");
        ck_assert_str_eq(owner, "4711 4712\n");
        free(owner);
        tu_helper_stop(&h);
}
END_TEST

Suite *ctl_suite(void)
{
        Suite *s = suite_create("netbrokerctl");
        TCase *tc = tcase_create("ctl");

        /* Each test runs 5 to 15 netbrokerctl commands, most starting a
         * helper: 2 s each in the ASan build on a loaded machine. */
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, test_ctl_exit_statuses_are_what_scripts_rely_on);
        tcase_add_test(tc, test_ctl_link_create_and_names_in_json);
        tcase_add_test(tc, test_ctl_link_create_queues_for_a_tap_and_a_macvtap);
        tcase_add_test(tc, test_ctl_link_list_and_bw_show_read_through_the_helper);
        tcase_add_test(tc, test_ctl_fw_counters_and_show_print_the_rules_in_libvirts_terms);
        tcase_add_test(tc, test_ctl_netbroker_socket_names_the_helper);
        tcase_add_test(tc, test_ctl_system_socket_is_the_default_when_it_exists);
        tcase_add_test(tc, test_ctl_private_helper_log_stays_off_the_terminal);
        tcase_add_test(tc, test_ctl_fw_apply_gives_each_owner_the_common_shape);
        tcase_add_test(tc, test_ctl_persistent_tap_of_a_user_is_its_own);
        suite_add_tcase(s, tc);
        return s;
}
