// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbroker-demo, the last step: a NAT network with DHCP, as libvirt's
 * "default" network. One request makes the bridge, its address, IPv4
 * forwarding, the network's rules (masquerade and a port forward) and
 * starts dnsmasq under the helper; a guest namespace plugged into the
 * bridge takes a lease from it (busybox udhcpc) and pings the "outside", a
 * namespace that has no route back to the network: its reply comes back
 * only through the masquerade. The outside then reaches the guest's port
 * 22 through the port forward (DNAT of the host's 8022). Then the same
 * network again in ensure mode (nothing written), and everything removed.
 *
 * The guest and the outside are scaffolding, made by ip(8) as QEMU and
 * the world would make them; everything the daemon asks for goes through
 * the helper. */
#include "demo.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DNSMASQ "/usr/sbin/dnsmasq"
#define BUSYBOX "/bin/busybox"
#define BR "demonet0"
#define NET "192.168.150.0/24"
#define GUEST_MAC "52:54:00:15:00:0a"
#define GUEST_IP "192.168.150.10"
#define OUTSIDE_IP "198.51.100.2"

static char dir[64];

const char *demo_net_dir(void)
{
        if (!dir[0])
                snprintf(dir, sizeof(dir), "/tmp/netbroker-demo-net-%d", (int)getpid());
        return dir;
}

void demo_net_config(FILE *f)
{
        /* The helper makes its program_dir, not the parents. */
        if (access(DNSMASQ, X_OK) == 0 && (mkdir(demo_net_dir(), 0700) == 0 || errno == EEXIST))
                fprintf(f, "program_allow = %s\nprogram_dir = %s/programs\nfd_limit = 128\n",
                        DNSMASQ, demo_net_dir());
}

void demo_net_remove_dir(void)
{
        char programs[96];

        snprintf(programs, sizeof(programs), "%s/programs", demo_net_dir());
        rmdir(programs);
        rmdir(demo_net_dir());
}

/* A child in a network namespace of its own that waits for a byte on
 * go_fd, then runs cmd there with sh, its output into out_fd. Returned
 * once the child is in its namespace: a veth end moved to "netns PID"
 * before that would land in the namespace it leaves (a CI run lost the
 * outside's demox1 so). -1 with errno set when it could not get there. */
static pid_t ns_child(int go_fd, int out_fd, const char *cmd)
{
        int ready[2];
        pid_t pid;
        char c;

        if (pipe2(ready, O_CLOEXEC) < 0)
                return -1;
        pid = fork();
        if (pid == 0) {
                close(ready[0]);
                if (unshare(CLONE_NEWNET) < 0 || write(ready[1], "r", 1) != 1)
                        _exit(98);
                close(ready[1]);
                if (read(go_fd, &c, 1) != 1)
                        _exit(98);
                if (out_fd >= 0 && (dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0))
                        _exit(98);
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(99);
        }
        close(ready[1]);
        if (pid > 0 && read(ready[0], &c, 1) != 1) {
                /* It exited before it got there: reaped here. */
                waitpid(pid, NULL, 0);
                errno = EIO;
                pid = -1;
        }
        close(ready[0]);
        return pid;
}

/* Scaffolding by ip(8); 0 or -EIO (its message on stderr). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
        char cmd[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        return system(cmd) == 0 ? 0 : -EIO;
}

static int submit(nb_conn *c, nb_batch *b, double *ms, nb_results **ret)
{
        nb_results *res = NULL;
        double t0 = demo_now_ms();
        int r = nb_submit(c, b, &res);

        *ms = demo_now_ms() - t0;
        if (r < 0)
                fprintf(stderr, "demo: network: %s: %s\n", strerror(-r), nb_conn_error(c));
        if (r == 0 && nb_results_first_error(res) != -1) {
                long e = nb_results_first_error(res);
                fprintf(stderr, "demo: network: op %ld: %s\n", e,
                        nb_result_message(res, (size_t)e));
                r = -EIO;
        }
        if (r == 0 && ret)
                *ret = res;
        else
                nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* The network's ops: its firewall, and dnsmasq (start: the bridge, its
 * address and forwarding first). */
static nb_batch *network_batch(bool start, const char *leases)
{
        static const char *const subnets[] = {NET};
        char lf[128];
        const char *argv[] = {DNSMASQ,
                              "--keep-in-foreground",
                              "--conf-file=/dev/null",
                              "--user=root",
                              "--group=",
                              "--interface=" BR,
                              "--bind-interfaces",
                              "--except-interface=lo",
                              "--dhcp-range=192.168.150.100,192.168.150.200,1h",
                              "--dhcp-host=" GUEST_MAC "," GUEST_IP,
                              "--port=0",
                              lf,
                              "--pid-file=",
                              "--quiet-dhcp",
                              NULL};
        nb_net_forward fw = NB_NET_FORWARD_INIT;
        const nb_net_forward *fwp[] = {&fw};
        nb_net_spec s = NB_NET_SPEC_INIT;
        nb_program_opts po = NB_PROGRAM_OPTS_INIT;
        nb_link_change up = NB_LINK_CHANGE_INIT;
        nb_batch *b = nb_batch_new();

        snprintf(lf, sizeof(lf), "--dhcp-leasefile=%s", leases);
        fw.protocol = "tcp";
        fw.outside_port = 8022;
        fw.guest_address = GUEST_IP;
        fw.guest_port = 22;
        s.bridge = BR;
        s.subnets = subnets;
        s.n_subnets = 1;
        s.mode = NB_NET_NAT;
        s.forwards = fwp;
        s.n_forwards = 1;
        s.fw_mode = start ? NB_FW_REPLACE : NB_FW_ENSURE;
        po.argv = argv;
        po.tag = BR;
        up.up = 1;
        if (start) {
                nb_batch_bridge_create(b, BR);
                nb_batch_link_set(b, BR, &up);
                nb_batch_addr_add(b, BR, "192.168.150.1", 24, NULL);
                nb_batch_sysctl_set(b, NULL, "ipv4.forwarding", 1);
                up.master = BR;
                nb_batch_link_set(b, "demog0h", &up);
        }
        nb_batch_net_apply(b, BR, &s);
        nb_batch_program_start(b, DNSMASQ, &po);
        return b;
}

static void print_lines(const char *indent, const char *path)
{
        char line[256];
        FILE *f = fopen(path, "r");

        while (f && fgets(line, sizeof(line), f))
                printf("%s%s", indent, line);
        if (f)
                fclose(f);
}

/* The guest's commands: a lease (the script sets the address and the
 * default route it got), then a ping of the outside. */
static int write_script(const char *path)
{
        FILE *f = fopen(path, "w");

        if (!f)
                return -errno;
        fputs("#!/bin/sh\n[ \"$1\" = bound ] || exit 0\n"
              "ip addr add \"$ip/$mask\" dev \"$interface\"\n"
              "ip route add default via \"$router\"\n"
              "echo \"guest: lease $ip/$mask, router $router, from DHCP server $serverid\"\n",
              f);
        if (fclose(f) != 0 || chmod(path, 0755) < 0)
                return -errno;
        return 0;
}

/* Until the guest has its lease and its ping's reply (it then serves
 * port 22 once), at most 20 s; its output printed. */
static int wait_pinged(pid_t guest, const char *log, const char *leases)
{
        char pinged[128];
        int st, r = -ETIMEDOUT;

        snprintf(pinged, sizeof(pinged), "%s/pinged", demo_net_dir());
        for (int i = 0; i < 200 && r == -ETIMEDOUT; i++) {
                if (access(pinged, F_OK) == 0)
                        r = 0;
                else if (waitpid(guest, &st, WNOHANG) == guest)
                        r = -EIO;
                else
                        usleep(100000);
        }
        print_lines("   | ", log);
        if (r < 0) {
                fprintf(stderr, "demo: network: the guest got no lease or no reply: %s\n",
                        strerror(-r));
                return r;
        }
        printf("   The outside (%s) has no route back to %s: its reply came through the "
               "masquerade.\n   dnsmasq's lease file:\n",
               OUTSIDE_IP, NET);
        print_lines("     ", leases);
        return 0;
}

int demo_network(nb_conn *c)
{
        char leases[128], script[128], log[128], *cmd = NULL;
        int go[2] = {-1, -1}, r = 0;
        pid_t guest = -1, outside = -1;
        nb_results *res = NULL;
        double ms_start, ms_ensure;
        unsigned rules = 0;
        bool unchanged = false, existing = false;
        int pid = 0;
        FILE *out;

        printf("\n8. A NAT network with DHCP, as libvirt's default network:\n");
        if (access(DNSMASQ, X_OK) != 0 || access(BUSYBOX, X_OK) != 0 ||
            !nb_conn_has_feature(c, "net_apply") || !nb_conn_has_feature(c, "program_start")) {
                printf("   needs %s and %s (scripts/deps.sh: dnsmasq-base, busybox-static) and a "
                       "helper with net_apply and program_start\n",
                       DNSMASQ, BUSYBOX);
                return -ENOENT;
        }
        snprintf(leases, sizeof(leases), "%s/dnsmasq.leases", demo_net_dir());
        snprintf(script, sizeof(script), "%s/udhcpc.sh", demo_net_dir());
        snprintf(log, sizeof(log), "%s/guest.log", demo_net_dir());
        r = write_script(script);
        if (r == 0)
                r = sh("printf '#!/bin/sh\\necho hello from the guest, port 22\\n' > %s/hello.sh "
                       "&& chmod 755 %s/hello.sh",
                       demo_net_dir(), demo_net_dir());
        /* The helper's dnsmasq holds no CAP_NET_BIND_SERVICE: port 67 open
         * to it, in this namespace only. */
        if (r == 0)
                r = sh("echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start && "
                       "ip link set lo up");
        if (r == 0 && pipe2(go, O_CLOEXEC) < 0)
                r = -errno;
        out = r == 0 ? fopen(log, "w") : NULL;
        if (r == 0 && !out)
                r = -errno;
        if (r == 0 && asprintf(&cmd,
                               "ip link set lo up && ip link set demog0 up && "
                               "busybox udhcpc -i demog0 -n -q -t 5 -T 1 -s %s && "
                               "busybox ping -c 1 -W 2 " OUTSIDE_IP " && : > %s/pinged && "
                               "exec busybox nc -l -p 22 -e %s/hello.sh",
                               script, demo_net_dir(), demo_net_dir()) < 0)
                r = -ENOMEM;
        if (r == 0) {
                outside = ns_child(go[0], -1,
                                   "ip link set lo up && ip addr add " OUTSIDE_IP
                                   "/24 dev demox1 && ip link set demox1 up && exec sleep 60");
                guest = ns_child(go[0], fileno(out), cmd);
                if (outside < 0 || guest < 0)
                        r = -errno;
        }
        /* Their ends of two veth pairs; the guest's MAC has a reservation. */
        if (r == 0)
                r = sh("ip link add demox0 type veth peer name demox1 netns %d && "
                       "ip addr add 198.51.100.1/24 dev demox0 && ip link set demox0 up && "
                       "ip link add demog0h type veth peer name demog0 address " GUEST_MAC
                       " netns %d",
                       (int)outside, (int)guest);
        if (r == 0)
                r = submit(c, network_batch(true, leases), &ms_start, &res);
        if (r == 0) {
                nb_result_net(res, 5, NULL, NULL, &rules);
                nb_result_program(res, 6, NULL, &pid, NULL);
                printf("   ONE request of 7 ops, %.1f ms: bridge %s up, 192.168.150.1/24 on it, "
                       "IPv4 forwarding on,\n"
                       "   the guest's port on it, the network's %u rules (masquerade, "
                       "%s->outside, port 8022 -> %s:22)\n"
                       "   in table inet netbroker_net, and dnsmasq (pid %d) supervised by the "
                       "helper.\n",
                       ms_start, BR, rules, NET, GUEST_IP, pid);
        }
        nb_results_free(res);
        res = NULL;
        /* dnsmasq binds its sockets once started. */
        usleep(300000);
        if (r == 0 && write(go[1], "gg", 2) != 2)
                r = -errno;
        if (r == 0)
                r = wait_pinged(guest, log, leases);
        /* From the outside, to the host's port 8022: DNAT to the guest. */
        if (r == 0) {
                char line[256] = "";
                FILE *p;
                snprintf(line, sizeof(line),
                         "nsenter -t %d -n busybox nc -w 3 198.51.100.1 8022 </dev/null",
                         (int)outside);
                p = popen(line, "r");
                line[0] = '\0';
                if (!p || !fgets(line, sizeof(line), p))
                        line[0] = '\0';
                if (p)
                        pclose(p);
                printf("   The outside connects to 198.51.100.1:8022 (the host), DNAT to %s:22; "
                       "the guest says:\n     %s",
                       GUEST_IP, line[0] ? line : "(nothing)\n");
                if (!strstr(line, "hello from the guest"))
                        r = -EIO;
        }
        /* The daemon restarts: the same network again, in ensure mode. */
        if (r == 0)
                r = submit(c, network_batch(false, leases), &ms_ensure, &res);
        if (r == 0) {
                nb_result_net(res, 0, NULL, &unchanged, NULL);
                nb_result_program(res, 1, NULL, NULL, &existing);
                printf("   Again as after a restart (ensure): %.2f ms, rules %s, dnsmasq %s.\n",
                       ms_ensure, unchanged ? "unchanged (nothing written)" : "WRITTEN",
                       existing ? "found running (the same one)" : "STARTED AGAIN");
                if (!unchanged || !existing)
                        r = -EPROTO;
        }
        nb_results_free(res);

        /* Cleaning up: the network, dnsmasq, the bridge, the scaffolding. */
        {
                nb_batch *b = nb_batch_new();
                double ms;
                int k;
                nb_batch_program_stop(b, 0, BR, 2000);
                nb_batch_net_remove(b, BR);
                nb_batch_link_delete(b, BR);
                k = submit(c, b, &ms, NULL);
                if (k == 0)
                        printf("   Removed in one request (%.1f ms): dnsmasq stopped, the rules, "
                               "the bridge.\n",
                               ms);
                r = r ? r : k;
        }
        if (guest > 0) {
                kill(guest, SIGKILL);
                waitpid(guest, NULL, 0);
        }
        if (outside > 0) {
                kill(outside, SIGKILL);
                waitpid(outside, NULL, 0);
        }
        if (go[0] >= 0)
                close(go[0]);
        if (go[1] >= 0)
                close(go[1]);
        if (out)
                fclose(out);
        sh("ip link del demox0 2>/dev/null; ip link del demog0h 2>/dev/null; "
           "rm -f %s %s %s %s/pinged %s/hello.sh",
           leases, script, log, demo_net_dir(), demo_net_dir());
        free(cmd);
        return r;
}
