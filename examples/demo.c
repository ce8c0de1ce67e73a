// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbroker-demo: what a daemon sees when it adopts netbroker.
 *
 * It moves into a private network namespace (the host's network is never
 * touched), spawns the helper over a socketpair, says Hello, and sends
 * batches of Exec ops, printing what came back and what it cost; last, a
 * NAT network with DHCP (demo_net.c). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

double demo_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *helper_path(void)
{
        const char *env = getenv("NETBROKERD");

        if (env)
                return env;
        return access(NB_BUILD_HELPER, X_OK) == 0 ? NB_BUILD_HELPER : NULL;
}

/* The tools the demo runs; only those present go on the allow-list. */
static const char *const tools[] = {"/bin/true", "/usr/sbin/ip", "/usr/sbin/nft",
                                    "/usr/sbin/iptables"};

static char *write_config(void)
{
        static char path[] = "/tmp/netbroker-demo-XXXXXX";
        int fd = mkstemp(path);
        FILE *f;

        if (fd < 0)
                return NULL;
        f = fdopen(fd, "w");
        /* The audit trail (a notice line per change: some 300 here) would
         * bury what the demo shows; warnings still print. */
        fputs("# written by netbroker-demo\nlog_filters = audit:warning\nexec_allow =", f);
        for (size_t i = 0; i < sizeof(tools) / sizeof(*tools); i++)
                if (access(tools[i], X_OK) == 0)
                        fprintf(f, " %s", tools[i]);
        fputc('\n', f);
        demo_net_config(f);
        fclose(f);
        return path;
}

static void show_proc(pid_t pid)
{
        char path[64], line[256];
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "CapEff:", 7) || !strncmp(line, "CapBnd:", 7) ||
                    !strncmp(line, "NoNewPrivs:", 11))
                        printf("    %s", line);
        if (f)
                fclose(f);
        snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "Max open files", 14))
                        printf("    %s", line);
        if (f)
                fclose(f);
}

static void print_first_lines(const uint8_t *p, size_t len, int max)
{
        int lines = 0;
        size_t start = 0;

        for (size_t i = 0; i < len && lines < max; i++)
                if (p[i] == '\n') {
                        printf("      | %.*s\n", (int)(i - start), p + start);
                        start = i + 1;
                        lines++;
                }
        if (lines == max && start < len)
                printf("      | ...\n");
}

static int tools_batch(nb_conn *c)
{
        const char *ip[] = {"ip", "-br", "link", NULL};
        const char *nft[] = {"nft", "list", "ruleset", NULL};
        const char *ipt[] = {"iptables", "-w", "-L", "-n", NULL};
        const char *const *argvs[] = {ip, nft, ipt};
        const char *paths[] = {"/usr/sbin/ip", "/usr/sbin/nft", "/usr/sbin/iptables"};
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        double t0;
        int r;

        for (size_t i = 0; i < 3; i++)
                if (access(paths[i], X_OK) == 0)
                        nb_batch_exec(b, paths[i], argvs[i], NULL, NULL, 0, 5000);
        t0 = demo_now_ms();
        r = nb_submit(c, b, &res);
        if (r < 0) {
                fprintf(stderr, "demo: submit: %s: %s\n", strerror(-r), nb_conn_error(c));
                nb_batch_free(b);
                return r;
        }
        printf("\n2. One request with %zu Exec ops (the network tools a daemon runs), %.2f ms in "
               "all:\n",
               nb_batch_size(b), demo_now_ms() - t0);
        for (size_t i = 0; i < nb_results_count(res); i++) {
                nb_exec_result e = NB_EXEC_RESULT_INIT;
                int st = nb_result_status(res, i);
                if (nb_result_exec(res, i, &e) == 0)
                        printf("   op %zu: status %d, exit %d, %.2f ms, %zu bytes of output\n", i,
                               st, e.exit_code, (double)e.duration_us / 1000.0, e.out_len);
                else
                        printf("   op %zu: status %d: %s\n", i, st, nb_result_message(res, i));
                if (nb_result_exec(res, i, &e) == 0)
                        print_first_lines(e.out, e.out_len, 4);
        }
        r = nb_results_first_error(res) == -1 ? 0 : -EIO;
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

static int hundred_true(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        double t0, t_fork;
        int r;

        for (int i = 0; i < 100; i++)
                nb_batch_exec(b, "/bin/true", NULL, NULL, NULL, 0, 0);
        t0 = demo_now_ms();
        r = nb_submit(c, b, &res);
        t0 = demo_now_ms() - t0;
        if (r < 0 || nb_results_first_error(res) != -1) {
                fprintf(stderr, "demo: 100 x /bin/true failed\n");
                nb_results_free(res);
                nb_batch_free(b);
                return -EIO;
        }
        /* For scale: the same from this (small) process with fork + exec. */
        t_fork = demo_now_ms();
        for (int i = 0; i < 100; i++) {
                pid_t p = fork();
                if (p == 0) {
                        execl("/bin/true", "true", (char *)NULL);
                        _exit(127);
                }
                waitpid(p, NULL, 0);
        }
        t_fork = demo_now_ms() - t_fork;
        printf("\n3. One request with 100 x /bin/true: %.2f ms (%.3f ms each), all exit 0.\n", t0,
               t0 / 100);
        printf("   The same 100 by fork+exec from this small demo process: %.2f ms.\n", t_fork);
        printf("   A daemon with 1 GiB of heap and 8192 fds pays far more per fork+exec;\n"
               "   build/bench/netbroker-bench spawn measures both sides.\n");
        nb_results_free(res);
        nb_batch_free(b);
        return 0;
}

static uint64_t stat_of(nb_conn *c, const char *name)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        uint64_t v = 0;

        nb_batch_stats(b);
        if (nb_submit(c, b, &res) == 0)
                nb_result_stat(res, 0, name, &v);
        nb_results_free(res);
        nb_batch_free(b);
        return v;
}

/* seeds/000: libvirt took over 2 minutes for 82 macvtaps, probing
 * macvtap0, macvtap1, ... for a free name (3,403 ioctls). Here the helper
 * owns the names: one batch, no probe. */
static int macvtaps(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_link_change up = {.size = sizeof(nb_link_change), .up = 1};
        uint64_t nl0, created0;
        size_t fds = 0;
        double t0;
        int r;

        nb_batch_veth_create(b, "uplink0", "uplink1", -1);
        nb_batch_link_set(b, "uplink0", &up);
        r = nb_submit(c, b, &res);
        if (r < 0 || nb_results_first_error(res) != -1) {
                fprintf(stderr, "demo: cannot make the veth parent: %s\n",
                        r < 0 ? strerror(-r)
                              : nb_result_message(res, (size_t)nb_results_first_error(res)));
                nb_results_free(res);
                nb_batch_free(b);
                return -EIO;
        }
        nb_results_free(res);
        nb_batch_free(b);

        nl0 = stat_of(c, "netlink_messages");
        created0 = stat_of(c, "links_created");
        b = nb_batch_new();
        for (int i = 0; i < 82; i++)
                nb_batch_macvtap_create(b, "macvtap%d", "uplink0", NB_MACVLAN_BRIDGE, NULL, true);
        t0 = demo_now_ms();
        r = nb_submit(c, b, &res);
        t0 = demo_now_ms() - t0;
        if (r < 0 || nb_results_first_error(res) != -1) {
                fprintf(stderr, "demo: 82 macvtaps failed: %s\n",
                        r < 0 ? strerror(-r)
                              : nb_result_message(res, (size_t)nb_results_first_error(res)));
                nb_results_free(res);
                nb_batch_free(b);
                return -EIO;
        }
        for (size_t i = 0; i < nb_results_count(res); i++)
                fds += nb_result_fd_count(res, i);
        printf("\n4. One request with 82 MacvtapCreate ops on uplink0 (template macvtap%%d): %.1f "
               "ms,\n"
               "   %.2f ms per device, names %s .. %s, %zu /dev/tapN fds received (no udev "
               "needed).\n",
               t0, t0 / 82, nb_result_ifname(res, 0), nb_result_ifname(res, 81), fds);
        printf("   Name probes: 0 (the helper keeps a bitmap of used names from netlink);\n"
               "   netlink messages: %llu for %llu devices created.\n",
               (unsigned long long)(stat_of(c, "netlink_messages") - nl0 - 1),
               (unsigned long long)(stat_of(c, "links_created") - created0));
        printf("   (libvirt in 2015: 82 macvtaps took over 2 minutes, 3,403 name probes; "
               "seeds/000.\n"
               "    build/bench/netbroker-bench names compares both ways on this machine.)\n");
        nb_results_free(res); /* closes the fds: QEMU would get them instead */
        nb_batch_free(b);
        return 0;
}

/* seeds/001: 100 guests with clean-traffic + no-promisc took libvirt 140 s
 * to restart, one ebtables/iptables process per rule. Here: one request, one
 * nftables transaction; and after a restart, one read and no write. */
static int build_guest_batch(nb_batch *b, nb_fw_mode mode)
{
        for (int i = 0; i < 100; i++) {
                nb_fw_ruleset *rs = nb_fw_ruleset_new();
                char owner[16], mac[18], ip[16];
                const char *ips[] = {ip, NULL};
                int r;

                snprintf(owner, sizeof(owner), "guest%d", i);
                snprintf(mac, sizeof(mac), "52:54:00:00:%02x:%02x", i / 256, i % 256);
                snprintf(ip, sizeof(ip), "10.0.%d.%d", i / 250, 2 + i % 250);
                /* no-promisc first: clean-traffic accepts incoming IPv4. */
                r = rs ? nb_fw_add_no_promisc(rs, mac) : -ENOMEM;
                if (r == 0)
                        r = nb_fw_add_clean_traffic(rs, mac, ips);
                if (r == 0)
                        r = nb_batch_firewall_apply(b, owner, owner, rs, mode);
                nb_fw_ruleset_free(rs);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int submit_timed(nb_conn *c, nb_batch *b, double *ms)
{
        nb_results *res = NULL;
        double t0 = demo_now_ms();
        int r = nb_submit(c, b, &res);

        *ms = demo_now_ms() - t0;
        if (r == 0 && nb_results_first_error(res) != -1) {
                long e = nb_results_first_error(res);
                fprintf(stderr, "demo: op %ld: %s\n", e, nb_result_message(res, (size_t)e));
                r = -EIO;
        }
        nb_results_free(res);
        return r;
}

static int firewall(nb_conn **cp, const nb_spawn_opts *opts)
{
        nb_batch *taps = nb_batch_new(), *b = nb_batch_new();
        uint64_t rules, written, unchanged, txns;
        nb_tap_opts persist = {.size = sizeof(nb_tap_opts), .persist = true};
        double ms_apply, ms_ensure;
        nb_conn *c = *cp;
        int r = 0;

        for (int i = 0; i < 100 && r == 0; i++) {
                char name[16];
                snprintf(name, sizeof(name), "guest%d", i);
                r = nb_batch_tap_create(taps, name, &persist);
        }
        if (r == 0)
                r = submit_timed(c, taps, &ms_apply);
        if (r == 0)
                r = build_guest_batch(b, NB_FW_REPLACE);
        if (r == 0)
                r = submit_timed(c, b, &ms_apply);
        if (r < 0) {
                fprintf(stderr, "demo: firewall: %s\n", strerror(-r));
                goto out;
        }
        rules = stat_of(c, "fw_rules_written");
        txns = stat_of(c, "fw_transactions");
        printf("\n5. 100 guests (taps guest0..guest99), each clean-traffic + no-promisc, in ONE "
               "request:\n"
               "   %.1f ms, %llu rules in %llu nftables transaction (table netbroker, netdev "
               "family).\n",
               ms_apply, (unsigned long long)rules, (unsigned long long)txns);

        /* The daemon restarts, and so does its helper: ensure the same 100. */
        nb_close(c);
        *cp = NULL;
        r = nb_spawn(helper_path(), opts, cp);
        if (r < 0) {
                fprintf(stderr, "demo: respawn: %s\n", nb_last_error());
                goto out;
        }
        c = *cp;
        nb_batch_free(b);
        b = nb_batch_new();
        r = build_guest_batch(b, NB_FW_ENSURE);
        if (r == 0)
                r = submit_timed(c, b, &ms_ensure);
        if (r < 0)
                goto out;
        written = stat_of(c, "fw_rules_written");
        unchanged = stat_of(c, "fw_owners_unchanged");
        printf("6. Restart (a new helper), then the same 100 in ensure mode: %.2f ms,\n"
               "   %llu owners found unchanged by their hash in the kernel, %llu rules written.\n"
               "   (libvirt in 2018: 140 s to restart 100 such guests; seeds/001.\n"
               "    build/bench/netbroker-bench restart compares both ways on this machine.)\n",
               ms_ensure, (unsigned long long)unchanged, (unsigned long long)written);
out:
        nb_batch_free(taps);
        nb_batch_free(b);
        return r;
}

static void stats(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        const char *name;
        uint64_t v;

        nb_batch_stats(b);
        if (nb_submit(c, b, &res) == 0) {
                printf("\n7. The helper's counters (this helper, since the restart):\n   ");
                for (size_t k = 0; nb_result_stat_at(res, 0, k, &name, &v) == 0; k++)
                        if (v)
                                printf(" %s=%llu", name, (unsigned long long)v);
                printf("\n");
        }
        nb_results_free(res);
        nb_batch_free(b);
}

int main(void)
{
        nb_spawn_opts opts = NB_SPAWN_OPTS_INIT;
        nb_conn *c = NULL;
        char *conf;
        double t0;
        int r;

        if (geteuid() != 0) {
                fprintf(stderr,
                        "netbroker-demo: run as root (the helper manages network devices)\n");
                return 1;
        }
        if (unshare(CLONE_NEWNET) < 0) {
                perror("netbroker-demo: unshare(CLONE_NEWNET)");
                return 1;
        }
        conf = write_config();
        if (!conf) {
                perror("netbroker-demo: config");
                return 1;
        }
        opts.config_path = conf;
        t0 = demo_now_ms();
        r = nb_spawn(helper_path(), &opts, &c);
        if (r < 0) {
                fprintf(stderr, "netbroker-demo: cannot start netbrokerd: %s: %s\n", strerror(-r),
                        nb_last_error());
                unlink(conf);
                return 1;
        }
        printf("netbroker demo, in a private network namespace\n\n");
        printf("1. Spawned netbrokerd (pid %d) over a socketpair and said Hello in %.2f ms.\n",
               nb_conn_helper_pid(c), demo_now_ms() - t0);
        printf("   Features: %s%s%s\n", nb_conn_has_feature(c, "ping") ? "ping " : "",
               nb_conn_has_feature(c, "stats") ? "stats " : "",
               nb_conn_has_feature(c, "exec") ? "exec" : "");
        printf("   What the kernel says about it:\n");
        show_proc(nb_conn_helper_pid(c));
        r = tools_batch(c);
        if (r == 0)
                r = hundred_true(c);
        if (r == 0)
                r = macvtaps(c);
        if (r == 0)
                r = firewall(&c, &opts);
        if (c)
                stats(c);
        if (r == 0)
                r = demo_network(c);
        if (c)
                nb_close(c);
        demo_net_remove_dir();
        unlink(conf);
        printf("\n%s\n", r == 0 ? "demo: ok" : "demo: FAILED");
        return r == 0 ? 0 : 1;
}
