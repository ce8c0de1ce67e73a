// SPDX-License-Identifier: LGPL-2.1-or-later
/* Scenario "network": starting N NAT networks (a bridge each, with an
 * address, a /24 and 2 port forwards, and a dnsmasq) the way libvirt's
 * network driver does it today against one netbrokerd batch, and again
 * as at a daemon restart.
 *
 * A, from the fat parent, one process per command as libvirt's nftables
 * backend runs them (src/network/network_nftables.c, util/virfirewall.c):
 * once, for ip and for ip6 (networkSetupPrivateChains does both layers),
 * `nft list table` and, when missing, the table, its 5 chains and 3
 * jumps; then per network the 10 rules of an IPv4 NAT network
 * (guest_output, guest_input, guest_cross: 2 rejects and 3 accepts;
 * guest_nat: 3 masquerades and 2 returns), 2 DNAT rules for the port
 * forwards, as netavark writes them (in a prerouting nat chain of the
 * same table, made once), `ip addr add`, and a real dnsmasq that
 * daemonizes (the run ends when its parent exits, the daemon serving).
 * Every rule goes in as `nft -ae insert|add rule ...`, as
 * virFirewallCmdNftablesApply runs a command of an auto-rollback
 * transaction: the handle nft echoes is kept for the network's removal
 * commands (libvirt's fwRemoval, saved in the network's status XML).
 *
 * AR, the restart, as networkStateInitialize does it
 * (src/network/bridge_driver.c): networkReloadFirewallRules lists both
 * tables once (the private chains, once per daemon run), then
 * networkReloadFirewallRulesHelper, for each active network,
 * networkRemoveFirewallRules (bridge_driver_linux.c) applies the saved
 * removal, one `nft delete rule ... handle H` a rule in reverse order, and
 * networkAddFirewallRules adds all 12 again (new handles, saved again);
 * then networkRefreshDaemons finds each dnsmasq by its pid file and sends
 * it SIGHUP. B: one batch of N x (AddrAdd + NetApply + ProgramStart
 * dnsmasq). BR: N x (NetApply in ensure mode + ProgramStart), which must
 * find every network unchanged, every dnsmasq running, and write
 * nothing. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netbroker.h"

#define NET_DEFAULT 20u
#define NET_QUICK 2u
#define NET_MAX BENCH_BASELINE_MAX
#define FORWARDS 2u
#define A_RULES 10u /* libvirt's, per IPv4 NAT network */
#define A_JUMPS 3u /* forward -> guest_output, guest_input, guest_cross */
#define A_NET_RULES (A_RULES + FORWARDS)
#define OUT_CAP (8u << 20) /* nft -j list of 1,000 networks' rules */
#define TABLE "libvirt_network"
#define DNSMASQ "/usr/sbin/dnsmasq"

struct net {
        char br[16], owner[16], net[32], addr[24], guest[24], range[64];
        char pidfile[96], leases[96], iface[40], lf[128], pf[128];
        unsigned port[FORWARDS];
        /* libvirt's fwRemoval: each rule's chain and the handle nft gave */
        const char *chain[A_NET_RULES];
        char handle[A_NET_RULES][16];
};

struct netbench {
        unsigned n;
        struct net *nets;
        const char *nft, *ip;
        char dir[64];
        int devnull;
        char *out; /* OUT_CAP bytes */
        struct nb_conn *conn;
};

/* ---- the baseline: one process per command, from the fat parent ---- */

/* One command as virCommandRun runs it; libvirt ignores the status of
 * `nft list table` (a missing table is its signal to create it). */
static int run_a(struct netbench *nb, const char *path, const char *const *argv, bool must)
{
        size_t len;
        int st, r = bench_fork_exec(true, 0, path, (char *const *)argv, nb->out, 4096, &len, &st);

        if (r == 0 && must && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                bench_log("netbroker-bench: network: %s %s %s failed: %s\n", argv[0], argv[1],
                          argv[2] ? argv[2] : "", nb->out);
                r = -EIO;
        }
        return r;
}

/* `nft list table FAMILY`, and the table, chains and jumps when it is
 * missing (nftablesSetupPrivateChains). The table of family ip also gets
 * the port forwards' prerouting chain. */
static int a_once_family(struct netbench *nb, const char *family, bool *ret_created)
{
        static const char *const chains[][2] = {
                {"forward", "{ type filter hook forward priority 0; policy accept; }"},
                {"guest_output", NULL},
                {"guest_input", NULL},
                {"guest_cross", NULL},
                {"guest_nat", "{ type nat hook postrouting priority 100; policy accept; }"},
                /* netavark's DNAT, here in libvirt's table */
                {"guest_dnat", "{ type nat hook prerouting priority -100; policy accept; }"},
        };
        size_t n_chains = strcmp(family, "ip") == 0 ? BENCH_N(chains) : BENCH_N(chains) - 1;
        const char *list[] = {"nft", "list", "table", family, TABLE, NULL};
        const char *table[] = {"nft", "add", "table", family, TABLE, NULL};
        size_t len;
        int st, r = bench_fork_exec(true, 0, nb->nft, (char *const *)list, nb->out, OUT_CAP, &len,
                                    &st);

        *ret_created = false;
        if (r < 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 0))
                return r;
        *ret_created = true;
        r = run_a(nb, nb->nft, table, true);
        for (size_t i = 0; i < n_chains && r == 0; i++) {
                const char *chain[] = {"nft", "add",        "chain",      family,
                                       TABLE, chains[i][0], chains[i][1], NULL};
                const char *jump[] = {"nft",     "insert",  "rule", family,       TABLE,
                                      "forward", "counter", "jump", chains[i][0], NULL};
                r = run_a(nb, nb->nft, chain, true);
                if (r == 0 && i >= 1 && i <= A_JUMPS)
                        r = run_a(nb, nb->nft, jump, true);
        }
        return r;
}

/* Both layers, as networkSetupPrivateChains sets them up: created at the
 * first start, found at the restart. */
static int a_once(struct netbench *nb, bool restart)
{
        static const char *const families[] = {"ip", "ip6"};
        int r = 0;

        for (size_t i = 0; i < BENCH_N(families) && r == 0; i++) {
                bool created;
                r = a_once_family(nb, families[i], &created);
                if (r == 0 && created == restart) {
                        bench_log("netbroker-bench: network: libvirt's table %s was %s\n",
                                  families[i],
                                  restart ? "missing at the restart" : "there before the start");
                        r = -EPROTO;
                }
        }
        return r;
}

/* One rule of network t, as an auto-rollback transaction runs it: `nft
 * -ae`, and the handle it echoes ("... # handle 42") kept as rule k's. */
static int a_rule(struct netbench *nb, struct net *t, unsigned k, const char *const *argv)
{
        const char *h;
        size_t n;
        int r = run_a(nb, nb->nft, argv, true);

        if (r == 0 && (!(h = strstr(nb->out, "# handle ")) || !(n = strspn(h + 9, "0123456789")) ||
                       n >= sizeof(t->handle[k]))) {
                bench_log("netbroker-bench: network: no handle in nft's echo: %s\n", nb->out);
                r = -EPROTO;
        }
        if (r == 0) {
                memcpy(t->handle[k], h + 9, n);
                t->handle[k][n] = 0;
                t->chain[k] = argv[6];
        }
        return r;
}

/* The network's saved removal (virFirewallNewFromRollback: the rollback
 * commands in reverse order), one `nft delete rule` each. */
static int a_remove(struct netbench *nb, const struct net *t)
{
        int r = 0;

        for (unsigned k = A_NET_RULES; k-- > 0 && r == 0;)
                r = run_a(nb, nb->nft,
                          (const char *const[]){"nft", "delete", "rule", "ip", TABLE, t->chain[k],
                                                "handle", t->handle[k], NULL},
                          true);
        return r;
}

/* The 10 rules of libvirt's IPv4 NAT network and the 2 DNATs, each with
 * its handle kept. */
static int a_rules(struct netbench *nb, struct net *t)
{
#define R(...)                                                                                     \
        (const char *const[])                                                                      \
        {                                                                                          \
                "nft", "-ae", "insert", "rule", "ip", TABLE, __VA_ARGS__, NULL                     \
        }
        const char *const *cmds[A_RULES] = {
                R("guest_output", "iif", t->br, "counter", "reject"),
                R("guest_input", "oif", t->br, "counter", "reject"),
                R("guest_cross", "iif", t->br, "oif", t->br, "counter", "accept"),
                R("guest_output", "ip", "saddr", t->net, "iif", t->br, "counter", "accept"),
                R("guest_input", "oif", t->br, "ip", "daddr", t->net, "ct", "state",
                  "related,established", "counter", "accept"),
                R("guest_nat", "ip", "saddr", t->net, "ip", "daddr", "!=", t->net, "counter",
                  "masquerade"),
                R("guest_nat", "meta", "l4proto", "udp", "ip", "saddr", t->net, "ip", "daddr",
                  "!=", t->net, "counter", "masquerade", "to", ":1024-65535"),
                R("guest_nat", "meta", "l4proto", "tcp", "ip", "saddr", t->net, "ip", "daddr",
                  "!=", t->net, "counter", "masquerade", "to", ":1024-65535"),
                R("guest_nat", "ip", "saddr", t->net, "ip", "daddr", "255.255.255.255/32",
                  "counter", "return"),
                R("guest_nat", "ip", "saddr", t->net, "ip", "daddr", "224.0.0.0/24", "counter",
                  "return"),
        };
#undef R
        char port[FORWARDS][8], to[FORWARDS][32];
        int r = 0;

        for (unsigned i = 0; i < BENCH_N(cmds) && r == 0; i++)
                r = a_rule(nb, t, i, cmds[i]);
        for (unsigned i = 0; i < FORWARDS && r == 0; i++) {
                snprintf(port[i], sizeof(port[i]), "%u", t->port[i]);
                snprintf(to[i], sizeof(to[i]), "%s:%u", t->guest, 22 + 58 * i);
                r = a_rule(nb, t, A_RULES + i,
                           (const char *const[]){"nft", "-ae", "add", "rule", "ip", TABLE,
                                                 "guest_dnat", "fib", "daddr", "type", "local",
                                                 "tcp", "dport", port[i], "counter", "dnat", "to",
                                                 to[i], NULL});
        }
        return r;
}

/* dnsmasq as libvirt starts it: it daemonizes, and its parent exits once
 * the daemon is up (or failed). Not through bench_fork_exec: the daemon
 * would hold the output pipe open; its stdio is /dev/null, as virCommand
 * gives it. */
static int a_dnsmasq(struct netbench *nb, const struct net *t)
{
        const char *argv[] = {"dnsmasq",
                              "--conf-file=/dev/null",
                              "--user=root",
                              "--group=",
                              t->iface,
                              "--bind-interfaces",
                              "--except-interface=lo",
                              t->range,
                              "--port=0",
                              t->lf,
                              t->pf,
                              NULL};
        int st;
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (dup2(nb->devnull, 0) < 0 || dup2(nb->devnull, 1) < 0 ||
                    dup2(nb->devnull, 2) < 0 || syscall(SYS_close_range, 3u, ~0u, 0u) < 0)
                        _exit(127);
                execve(DNSMASQ, (char *const *)argv,
                       (char *const[]){"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL});
                _exit(127);
        }
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                bench_log("netbroker-bench: network: dnsmasq on %s failed (status %d)\n", t->br,
                          st);
                return -EIO;
        }
        return 0;
}

/* The pid in a dnsmasq pid file, 0 when none. */
static pid_t read_pidfile(const char *path)
{
        FILE *f = fopen(path, "r");
        int pid = 0;

        if (f && fscanf(f, "%d", &pid) != 1)
                pid = 0;
        if (f)
                fclose(f);
        return pid;
}

/* Whether pid runs dnsmasq (not a zombie). */
static bool is_dnsmasq(pid_t pid)
{
        char path[64], buf[256], *p;
        FILE *f;
        bool ok = false;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = pid > 0 ? fopen(path, "r") : NULL;
        if (f && fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
                ok = strncmp(buf + strcspn(buf, "("), "(dnsmasq)", 9) == 0 && p[1] == ' ' &&
                     p[2] != 'Z';
        if (f)
                fclose(f);
        return ok;
}

/* A start of every network; or the restart: each network's saved removal
 * and its rules again, then each dnsmasq found by its pid file and sent
 * SIGHUP (networkRefreshDhcpDaemon; the hosts files it rewrites first are
 * not written here). */
static int a_run(struct netbench *nb, bool restart)
{
        int r = a_once(nb, restart);

        for (unsigned i = 0; i < nb->n && r == 0; i++) {
                struct net *t = &nb->nets[i];
                if (restart)
                        r = a_remove(nb, t);
                if (r == 0)
                        r = a_rules(nb, t);
                if (r == 0 && !restart)
                        r = run_a(nb, nb->ip,
                                  (const char *const[]){"ip", "addr", "add", t->addr, "dev", t->br,
                                                        NULL},
                                  true);
                if (r == 0 && !restart)
                        r = a_dnsmasq(nb, t);
        }
        for (unsigned i = 0; i < nb->n && r == 0 && restart; i++) {
                pid_t pid = read_pidfile(nb->nets[i].pidfile);
                if (!is_dnsmasq(pid) || kill(pid, SIGHUP) < 0)
                        r = -ESRCH;
        }
        return r;
}

/* ---- checks and cleaning up (untimed) ---- */

/* The rules of table `family name` in the kernel. */
static int count_rules(struct netbench *nb, const char *family, const char *name, unsigned *ret)
{
        const char *argv[] = {"nft", "-j", "list", "table", family, name, NULL};
        size_t len;
        unsigned n = 0;
        int r = bench_run_quiet("network: ", nb->nft, (char *const *)argv, -1, nb->out, OUT_CAP,
                                &len);

        for (const char *p = nb->out; r == 0 && (p = strstr(p, "{\"rule\": ")); p++)
                n++;
        if (r == 0)
                *ret = n;
        return r;
}

/* A's work in place: libvirt's table with its jumps and every network's
 * rules once (AR deleted the old ones before adding them again), every
 * dnsmasq running. */
static int a_check(struct netbench *nb, bool restart)
{
        const char *when = restart ? "restart" : "start";
        unsigned rules, want = A_JUMPS + nb->n * A_NET_RULES;
        int r = count_rules(nb, "ip", TABLE, &rules);

        if (r == 0 && rules != want) {
                bench_log("netbroker-bench: network: A %s: %u rules in ip %s, not %u\n", when,
                          rules, TABLE, want);
                r = -EPROTO;
        }
        for (unsigned i = 0; i < nb->n && r == 0; i++)
                if (!is_dnsmasq(read_pidfile(nb->nets[i].pidfile))) {
                        bench_log("netbroker-bench: network: A %s: no dnsmasq on %s\n", when,
                                  nb->nets[i].br);
                        r = -ESRCH;
                }
        return r;
}

/* Until pid is gone (the daemons are init's children), at most 5 s. */
static void wait_gone(pid_t pid)
{
        for (int i = 0; i < 500 && pid > 0 && kill(pid, 0) == 0; i++)
                usleep(10000);
}

static int a_clean(struct netbench *nb)
{
        const char *del[] = {"nft", "delete", "table", "ip", TABLE, NULL};
        const char *del6[] = {"nft", "delete", "table", "ip6", TABLE, NULL};
        int r = bench_run_quiet("network: ", nb->nft, (char *const *)del, -1, nb->out, 4096, NULL);

        if (r == 0)
                r = bench_run_quiet("network: ", nb->nft, (char *const *)del6, -1, nb->out, 4096,
                                    NULL);

        for (unsigned i = 0; i < nb->n; i++) {
                const struct net *t = &nb->nets[i];
                const char *flush[] = {"ip", "addr", "flush", "dev", t->br, NULL};
                pid_t pid = read_pidfile(t->pidfile);
                if (pid > 0 && kill(pid, SIGTERM) == 0)
                        wait_gone(pid);
                unlink(t->pidfile);
                unlink(t->leases);
                if (r == 0)
                        r = bench_run_quiet("network: ", nb->ip, (char *const *)flush, -1, nb->out,
                                            4096, NULL);
        }
        return r;
}

/* ---- the broker ---- */

static int b_batch(struct netbench *nb, bool restart, struct nb_batch **ret)
{
        nb_batch *b = nb_batch_new();
        int r = b ? 0 : -ENOMEM;

        for (unsigned i = 0; i < nb->n && r == 0; i++) {
                const struct net *t = &nb->nets[i];
                const char *subnets[] = {t->net};
                nb_net_forward fw[FORWARDS];
                const nb_net_forward *fwp[FORWARDS];
                nb_net_spec s = NB_NET_SPEC_INIT;
                nb_program_opts po = NB_PROGRAM_OPTS_INIT;
                const char *argv[] = {DNSMASQ,
                                      "--keep-in-foreground",
                                      "--conf-file=/dev/null",
                                      "--user=root",
                                      "--group=",
                                      t->iface,
                                      "--bind-interfaces",
                                      "--except-interface=lo",
                                      t->range,
                                      "--port=0",
                                      t->lf,
                                      "--pid-file=",
                                      NULL};

                for (unsigned k = 0; k < FORWARDS; k++) {
                        fw[k] = (nb_net_forward)NB_NET_FORWARD_INIT;
                        fw[k].protocol = "tcp";
                        fw[k].outside_port = t->port[k];
                        fw[k].guest_address = t->guest;
                        fw[k].guest_port = 22 + 58 * k;
                        fwp[k] = &fw[k];
                }
                s.bridge = t->br;
                s.subnets = subnets;
                s.n_subnets = 1;
                s.mode = NB_NET_NAT;
                s.forwards = fwp;
                s.n_forwards = FORWARDS;
                s.fw_mode = restart ? NB_FW_ENSURE : NB_FW_REPLACE;
                po.argv = argv;
                po.tag = t->owner;
                if (!restart)
                        r = nb_batch_addr_add(b, t->br, t->addr, 24, NULL);
                if (r == 0)
                        r = nb_batch_net_apply(b, t->owner, &s);
                if (r == 0)
                        r = nb_batch_program_start(b, DNSMASQ, &po);
        }
        if (r == 0)
                *ret = b;
        else
                nb_batch_free(b);
        return r;
}

/* The results: every network's rules, unchanged ones at a restart, every
 * dnsmasq running (the restart: the same ones). *ret_rules: their sum. */
static int b_check(struct netbench *nb, nb_results *res, bool restart, pid_t *pids,
                   unsigned *ret_rules)
{
        unsigned per = restart ? 2 : 3, sum = 0;
        int r = 0;

        for (unsigned i = 0; i < nb->n && r == 0; i++) {
                unsigned rules = 0;
                bool unchanged = false, existing = false;
                int pid = 0;
                r = nb_result_net(res, i * per + per - 2, NULL, &unchanged, &rules);
                if (r == 0)
                        r = nb_result_program(res, i * per + per - 1, NULL, &pid, &existing);
                if (r == 0 && (rules == 0 || unchanged != restart || existing != restart ||
                               (restart && pid != pids[i]))) {
                        bench_log("netbroker-bench: network: B%s: %s: %u rules, %s, dnsmasq pid "
                                  "%d%s\n",
                                  restart ? "R" : "", nb->nets[i].owner, rules,
                                  unchanged ? "unchanged" : "written", pid,
                                  existing ? " (existing)" : "");
                        r = -EPROTO;
                }
                pids[i] = pid;
                sum += rules;
        }
        if (r == 0)
                *ret_rules = sum;
        return r;
}

static int b_run(struct netbench *nb, bool restart, pid_t *pids, double *ret_us)
{
        nb_batch *b = NULL;
        nb_results *res = NULL;
        unsigned rules = 0, kernel = 0;
        uint64_t t0, t1;
        char *before = NULL;
        size_t ops = nb->n * (restart ? 2 : 3);
        int r = 0;

        /* The ruleset with its handles, a rule rewritten would get a new
         * one; stateless (-s): the counters move with the bridges' own
         * IGMP and MLD packets. */
        if (restart) {
                const char *argv[] = {"nft",           "-a", "-s", "list", "table", "inet",
                                      "netbroker_net", NULL};
                r = bench_run_quiet("network: ", nb->nft, (char *const *)argv, -1, nb->out, OUT_CAP,
                                    NULL);
                if (r == 0 && !(before = strdup(nb->out)))
                        r = -ENOMEM;
        }
        if (r == 0)
                r = b_batch(nb, restart, &b);
        t0 = bench_now_ns();
        if (r == 0)
                r = bench_submit_all(nb->conn, b, ops,
                                     restart ? "network BR: " : "network B: ", &t1, &res);
        if (r == 0)
                r = b_check(nb, res, restart, pids, &rules);
        if (r == 0)
                r = count_rules(nb, "inet", "netbroker_net", &kernel);
        if (r == 0 && kernel < rules) {
                bench_log("netbroker-bench: network: B: %u rules in inet netbroker_net, the "
                          "networks have %u\n",
                          kernel, rules);
                r = -EPROTO;
        }
        if (r == 0 && restart) {
                const char *argv[] = {"nft",           "-a", "-s", "list", "table", "inet",
                                      "netbroker_net", NULL};
                r = bench_run_quiet("network: ", nb->nft, (char *const *)argv, -1, nb->out, OUT_CAP,
                                    NULL);
                if (r == 0 && strcmp(before, nb->out) != 0) {
                        bench_log("netbroker-bench: network: BR wrote to the ruleset\n");
                        r = -EPROTO;
                }
        }
        if (r == 0)
                *ret_us = (double)(t1 - t0) / 1000.0 / nb->n;
        free(before);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* dnsmasq exits soon when it cannot serve: each must still run. */
static int b_check_programs(struct netbench *nb, const pid_t *pids)
{
        usleep(200000);
        for (unsigned i = 0; i < nb->n; i++)
                if (!is_dnsmasq(pids[i])) {
                        bench_log("netbroker-bench: network: B: no dnsmasq on %s (pid %d)\n",
                                  nb->nets[i].br, (int)pids[i]);
                        return -ESRCH;
                }
        return 0;
}

static int b_clean(struct netbench *nb)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int r = b ? 0 : -ENOMEM;

        for (unsigned i = 0; i < nb->n && r == 0; i++) {
                const struct net *t = &nb->nets[i];
                r = nb_batch_net_remove(b, t->owner);
                if (r == 0)
                        r = nb_batch_program_stop(b, 0, t->owner, 2000);
                if (r == 0)
                        r = nb_batch_addr_delete(b, t->br, t->addr, 24);
        }
        if (r == 0)
                r = bench_submit_all(nb->conn, b, 3 * nb->n, "network cleanup: ", NULL, &res);
        for (unsigned i = 0; i < nb->n && r == 0; i++)
                unlink(nb->nets[i].leases);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* ---- setting up ---- */

static void net_names(struct netbench *nb, unsigned i, struct net *t)
{
        unsigned x = 100 + i / 250, y = i % 250;

        snprintf(t->br, sizeof(t->br), "nbnet%u", i);
        snprintf(t->owner, sizeof(t->owner), "nbnet%u", i);
        snprintf(t->net, sizeof(t->net), "10.%u.%u.0/24", x, y);
        snprintf(t->addr, sizeof(t->addr), "10.%u.%u.1", x, y);
        snprintf(t->guest, sizeof(t->guest), "10.%u.%u.10", x, y);
        snprintf(t->range, sizeof(t->range), "--dhcp-range=10.%u.%u.10,10.%u.%u.250,1h", x, y, x,
                 y);
        snprintf(t->iface, sizeof(t->iface), "--interface=%s", t->br);
        snprintf(t->pidfile, sizeof(t->pidfile), "%s/%s.pid", nb->dir, t->br);
        snprintf(t->leases, sizeof(t->leases), "%s/%s.leases", nb->dir, t->br);
        snprintf(t->pf, sizeof(t->pf), "--pid-file=%s", t->pidfile);
        snprintf(t->lf, sizeof(t->lf), "--dhcp-leasefile=%s", t->leases);
        for (unsigned k = 0; k < FORWARDS; k++)
                t->port[k] = 10000 + FORWARDS * i + k;
}

/* The bridges, up, by the helper (untimed: libvirt makes them before its
 * rules), and port 67 open to its unprivileged dnsmasqs. */
static int setup(struct netbench *nb)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_link_change up = NB_LINK_CHANGE_INIT;
        int fd, r = b ? 0 : -ENOMEM;

        up.up = 1;

        fd = open("/proc/sys/net/ipv4/ip_unprivileged_port_start", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
                r = -errno;
        if (fd >= 0)
                close(fd);
        for (unsigned i = 0; i < nb->n && r == 0; i++) {
                r = nb_batch_bridge_create(b, nb->nets[i].br);
                if (r == 0)
                        r = nb_batch_link_set(b, nb->nets[i].br, &up);
        }
        if (r == 0)
                r = bench_submit_all(nb->conn, b, 2 * nb->n, "network setup: ", NULL, &res);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* One round: A and AR, then B and BR (reversed every other round), each
 * cleaned up after. */
static int one_round(struct netbench *nb, unsigned round, struct bench_samples *s)
{
        pid_t *pids = calloc(nb->n, sizeof(*pids));
        int r = pids ? 0 : -ENOMEM;

        for (int k = 0; k < 2 && r == 0; k++) {
                bool a = (k == 0) == (round % 2 == 0);
                for (int restart = 0; restart < 2 && r == 0; restart++) {
                        uint64_t t0 = bench_now_ns();
                        double us = 0;
                        if (a) {
                                r = a_run(nb, restart);
                                us = (double)(bench_now_ns() - t0) / 1000.0 / nb->n;
                                if (r == 0)
                                        r = a_check(nb, restart);
                        } else {
                                r = b_run(nb, restart, pids, &us);
                                if (r == 0)
                                        r = b_check_programs(nb, pids);
                        }
                        if (r == 0)
                                r = bench_samples_add(&s[(a ? 0 : 1) + 2 * restart], us);
                }
                /* Even after a failure: A's dnsmasqs would outlive us. */
                int c = a ? a_clean(nb) : b_clean(nb);
                r = r ? r : c;
        }
        free(pids);
        return r;
}

int bench_network(const struct bench_opts *o, struct bench_report *r)
{
        static const char *const names[] = {"A", "B", "AR", "BR"};
        struct netbench nb = {.n = o->count ? o->count : o->quick ? NET_QUICK : NET_DEFAULT};
        unsigned reps = o->reps ? o->reps : o->quick ? 1 : 3;
        struct bench_samples s[4] = {{0}};
        struct bench_summary sum[4];
        struct bench_ctx c = {0};
        char extra[512];
        int k = 0;

        r->title = "starting N NAT networks (bridge address, rules, 2 port forwards, dnsmasq): "
                   "libvirt's commands from a fat parent versus one batch";
        nb.nft = bench_find_tool("nft");
        nb.ip = bench_find_tool("ip");
        if (nb.n > NET_MAX) {
                bench_log("netbroker-bench: network: --count at most %u\n", NET_MAX);
                return -ERANGE;
        }
        if (!nb.nft || !nb.ip || access(DNSMASQ, X_OK) < 0) {
                bench_log("netbroker-bench: network: needs nft, ip and %s (dnsmasq-base)\n",
                          DNSMASQ);
                return -ENOENT;
        }
        snprintf(nb.dir, sizeof(nb.dir), "/tmp/netbroker-bench-net-%d", (int)getpid());
        if (mkdir(nb.dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        snprintf(extra, sizeof(extra),
                 "program_allow = " DNSMASQ "\nprogram_dir = %s/programs\n"
                 "fd_limit = %u\nmax_programs = %u\nmax_programs_per_uid = %u\n"
                 "max_spawns = %u\nmax_spawns_per_uid = %u\n",
                 nb.dir, 64 + 8 * (nb.n + 16), nb.n + 8, nb.n + 8, nb.n + 16, nb.n + 16);
        nb.nets = calloc(nb.n, sizeof(*nb.nets));
        nb.out = malloc(OUT_CAP);
        if (!nb.nets || !nb.out)
                k = -ENOMEM;
        for (unsigned i = 0; i < nb.n && k == 0; i++)
                net_names(&nb, i, &nb.nets[i]);
        if (k == 0)
                k = bench_ctx_start(&c, o, r, true, (const char *const[]){NULL}, extra,
                                    (const char *const[]){"net_apply", "program_start", NULL});
        nb.conn = c.conn;
        nb.devnull = r->parent.devnull;
        if (k == 0)
                k = setup(&nb);
        bench_log("network: %u networks, %u rounds\n", nb.n, reps);
        for (unsigned i = 0; i < reps && k == 0; i++)
                k = one_round(&nb, i, s);
        for (int i = 0; i < 4 && k == 0; i++)
                k = bench_samples_summarize(&s[i], &sum[i]);
        if (k == 0) {
                /* The rows keep the pointers: the report is printed later. */
                static char a[96], b[96], ar[96], br[96];
                snprintf(a, sizeof(a), "%u nft+ip+dnsmasq a net", A_NET_RULES);
                snprintf(b, sizeof(b), "1 batch of %u ops", 3 * nb.n);
                k = bench_report_add_row(r, "A", a, &sum[0], NULL);
                if (k == 0)
                        k = bench_report_add_row(r, "B", b, &sum[1], &sum[0]);
                snprintf(ar, sizeof(ar), "%u nft (%u del) a net", 2 * A_NET_RULES, A_NET_RULES);
                snprintf(br, sizeof(br), "1 batch of %u, ensure", 2 * nb.n);
                if (k == 0)
                        k = bench_report_add_row(r, "AR", ar, &sum[2], NULL);
                if (k == 0)
                        k = bench_report_add_row(r, "BR", br, &sum[3], &sum[2]);
        }
        if (k == 0) {
                double v[4] = {sum[0].median_us, sum[1].median_us, sum[2].median_us,
                               sum[3].median_us};
                k = bench_report_ratios(r, "A/B AR/BR", "", names, v, 4);
        }
        if (k == 0)
                k = bench_report_add_compare(r, "NAT network start, per network", "A", &sum[0],
                                             NULL, NULL, "B", &sum[1]);
        if (k == 0)
                k = bench_report_add_compare(r, "NAT network restart, per network", "AR", &sum[2],
                                             NULL, NULL, "BR", &sum[3]);
        if (k == 0)
                k = bench_report_add_note(r,
                                          "times per network; A's once-per-daemon table setup "
                                          "(21 nft: ip and ip6) is in A, AR's (2 nft list) in "
                                          "AR, spread over the %u networks",
                                          nb.n);
        if (k == 0)
                k = bench_report_add_note(r, "A's dnsmasq: a real one, daemonized; libvirt sets "
                                             "the address by netlink, A by `ip addr add`; AR "
                                             "deletes each rule by the handle A saved, then adds "
                                             "it again (networkReloadFirewallRulesHelper)");
        bench_ctx_stop(&c);
        for (int i = 0; i < 4; i++)
                bench_samples_clear(&s[i]);
        free(nb.nets);
        free(nb.out);
        snprintf(extra, sizeof(extra), "%s/programs", nb.dir);
        rmdir(extra);
        rmdir(nb.dir);
        return k;
}
