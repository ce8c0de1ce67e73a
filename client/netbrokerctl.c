// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl: talk to netbrokerd from a shell.
 *
 * Exit status: 0 success, 1 an op failed (for exec: the program could not
 * run or did not exit 0), 2 usage error, 3 the helper could not be reached.
 * Subcommands are a table, one function each (wireguard-tools' wg.c). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fwfile.h"
#include "netbroker.h"

enum { EXIT_OP_FAILED = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3 };

struct ctl {
        const char *socket_path;
        const char *helper_path;
        const char *config_path;
        bool json;
        nb_conn *conn;
};

static void usage(FILE *f)
{
        fprintf(f,
                "usage: netbrokerctl [--socket PATH | --spawn HELPER] [--config PATH] [--json] "
                "COMMAND\n"
                "commands:\n"
                "  ping                                   round trip to the helper\n"
                "  stats                                  the helper's counters\n"
                "  exec [--timeout MS] [--stdin FILE] -- PROGRAM [ARGS...]\n"
                "                                         run an allow-listed program\n"
                "  link create tap NAME [--vnet-hdr] [--queues N] [--transient]\n"
                "  link create macvtap|macvlan NAME --parent DEV [--mode "
                "bridge|vepa|private|passthru]\n"
                "                                 [--mac MAC] [--vnet-hdr]\n"
                "  link create veth NAME --peer NAME [--peer-netns PATH]\n"
                "  link create bridge NAME\n"
                "        NAME may be a template such as vnet%%d\n"
                "  link set NAME [--up | --down] [--mtu N] [--mac MAC] [--master BR | --nomaster]\n"
                "  link delete NAME\n"
                "  link list [NAME]                       interfaces, as the helper reads them\n"
                "  names                                  the helper's name allocator\n"
                "  fw apply [--ensure] FILE               install the owners and rules of FILE\n"
                "                                         (- for stdin) in one transaction\n"
                "  fw list [--counters]                   owners in the kernel, with hashes;\n"
                "                                         --counters: every rule, its counters\n"
                "                                         and its text\n"
                "  fw show OWNER                          OWNER's installed rules in libvirt's "
                "terms\n"
                "  fw remove OWNER                        remove an owner's rules\n"
                "  bw set IFACE [--in-average N --in-peak N --in-burst N --in-floor N]\n"
                "               [--out-average N --out-peak N --out-burst N]\n"
                "                                         limit IFACE (kB/s and kB, kB = 1024 "
                "bytes);\n"
                "                                         a direction without --*-average is "
                "unlimited\n"
                "  bw show IFACE                          the limits netbroker has on IFACE\n"
                "  bw clear IFACE                         remove them\n"
                "Without --socket or --spawn, the installed helper is spawned.\n"
                "\n"
                "fw apply FILE: one statement per line, '#' comments:\n"
                "  owner NAME [on IFNAME] [replace|ensure]   (IFNAME defaults to NAME)\n"
                "  group NAME\n"
                "  rule from|to accept|drop|reject|return [MATCH...]\n"
                "  filter no-mac-spoofing MAC | no-ip-spoofing [IPV4...] | no-arp-spoofing MAC "
                "[IPV4...]\n"
                "       | no-promisc MAC | allow-dhcp [SERVER] | allow-arp | clean-traffic MAC "
                "[IPV4...]\n"
                "MATCH ('!' negates where shown):\n"
                "  ether-src [!] MAC[/MASK]  ether-dst [!] MAC[/MASK]  ether-type [!] "
                "N|ipv4|arp|ipv6|rarp|vlan\n"
                "  arp-op [!] N|request|reply  arp-sender-mac [!] MAC\n"
                "  arp-sender-ip [!] ADDR  arp-target-ip [!] ADDR  ip-src [!] ADDR[/LEN]  "
                "ip-dst [!] ADDR[/LEN]\n"
                "  proto [!] N|tcp|udp|sctp|icmp|icmpv6  sport [!] P[-Q]  dport [!] P[-Q]\n"
                "  icmp-type [!] N  icmp-code N  vlan [!] ID  vlan-encap [!] TYPE  dscp [!] N\n"
                "  arp-target-mac [!] MAC  arp-htype [!] N  arp-ptype [!] N  arp-gratuitous [!] "
                "true\n"
                "  tcp-flags [!] MASK/SET  priority P  comment \"TEXT\"  (ip-src/ip-dst: also "
                "A-B)\n"
                "  group NAME [priority P] [root] [guard MATCH...]\n"
                "  filter NAME [VAR=VALUE...]   any of libvirt's stock filters\n");
}

/* JSON string output: enough escaping for program output and messages. */
static void json_str(const void *data, size_t len)
{
        const unsigned char *p = data;

        putchar('"');
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = p[i];
                if (ch == '"' || ch == '\\')
                        printf("\\%c", ch);
                else if (ch == '\n')
                        fputs("\\n", stdout);
                else if (ch == '\t')
                        fputs("\\t", stdout);
                else if (ch < 0x20 || ch == 0x7f)
                        printf("\\u%04x", ch);
                else
                        putchar(ch);
        }
        putchar('"');
}

static int open_conn(struct ctl *c)
{
        int r;

        if (c->socket_path) {
                r = nb_connect(c->socket_path, &c->conn);
        } else {
                nb_spawn_opts o = {.size = sizeof(nb_spawn_opts), .config_path = c->config_path};
                r = nb_spawn(c->helper_path, &o, &c->conn);
        }
        if (r < 0) {
                fprintf(stderr, "netbrokerctl: cannot reach netbrokerd: %s%s%s\n", strerror(-r),
                        nb_last_error()[0] ? ": " : "", nb_last_error());
                return -r;
        }
        return 0;
}

/* Submit and report transport failures; op failures are the caller's. */
static int submit(struct ctl *c, nb_batch *b, nb_results **res)
{
        int r = nb_submit(c->conn, b, res);

        if (r < 0) {
                const char *why = nb_conn_error(c->conn);
                fprintf(stderr, "netbrokerctl: %s%s%s\n", strerror(-r), why[0] ? ": " : "", why);
                return EXIT_UNREACHABLE;
        }
        return 0;
}

static int report_failure(const nb_results *res, size_t i)
{
        int st = nb_result_status(res, i);

        if (st == 0)
                return 0;
        fprintf(stderr, "netbrokerctl: %s (%s)\n", nb_result_message(res, i), strerror(-st));
        return EXIT_OP_FAILED;
}

/* A command or subcommand: argv[0] names it. */
struct command {
        const char *name;
        int (*fn)(struct ctl *c, int argc, char **argv);
};

/* Run the entry of cmds that argv[0] names (argv[0] is the subcommand). */
static int run_subcommand(struct ctl *c, const struct command *cmds, size_t n, int argc,
                          char **argv)
{
        for (size_t i = 0; argc >= 1 && i < n; i++)
                if (strcmp(argv[0], cmds[i].name) == 0)
                        return cmds[i].fn(c, argc, argv);
        usage(stderr);
        return EXIT_USAGE;
}

static int cmd_ping(struct ctl *c, int argc, char **argv)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        struct timespec t0, t1;
        int rc;

        (void)argv;
        if (argc != 1 || !b) {
                nb_batch_free(b);
                usage(stderr);
                return EXIT_USAGE;
        }
        nb_batch_ping(b);
        if (open_conn(c)) {
                nb_batch_free(b);
                return EXIT_UNREACHABLE;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = submit(c, b, &res);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc == 0) {
                double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                            (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
                rc = report_failure(res, 0);
                if (c->json)
                        printf("{\"ok\":%s,\"rtt_us\":%.1f}\n", rc ? "false" : "true", us);
                else if (!rc)
                        printf("pong from netbrokerd in %.1f us\n", us);
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int cmd_stats(struct ctl *c, int argc, char **argv)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int rc;

        (void)argv;
        if (argc != 1 || !b) {
                nb_batch_free(b);
                usage(stderr);
                return EXIT_USAGE;
        }
        nb_batch_stats(b);
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0 && !(rc = report_failure(res, 0))) {
                const char *name;
                uint64_t v;
                if (c->json)
                        putchar('{');
                for (size_t k = 0; nb_result_stat_at(res, 0, k, &name, &v) == 0; k++) {
                        if (c->json)
                                printf("%s\"%s\":%llu", k ? "," : "", name, (unsigned long long)v);
                        else
                                printf("%-24s %llu\n", name, (unsigned long long)v);
                }
                const char *sv;
                for (size_t k = 0; nb_result_stat_setting_at(res, 0, k, &name, &sv) == 0; k++) {
                        if (c->json) {
                                printf(",\"%s\":", name);
                                json_str(sv, strlen(sv));
                        } else {
                                printf("%-24s %s\n", name, sv);
                        }
                }
                if (c->json)
                        puts("}");
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
        FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
        char *buf = NULL;
        size_t len = 0, cap = 0;

        if (!f)
                return -errno;
        for (;;) {
                if (cap - len < 65536) {
                        char *p = realloc(buf, cap + 65536);
                        if (!p) {
                                free(buf);
                                if (f != stdin)
                                        fclose(f);
                                return -ENOMEM;
                        }
                        buf = p;
                        cap += 65536;
                }
                size_t n = fread(buf + len, 1, cap - len, f);
                len += n;
                if (n == 0)
                        break;
        }
        if (f != stdin)
                fclose(f);
        *ret = buf;
        *ret_len = len;
        return 0;
}

static void print_exec(const struct ctl *c, const nb_results *res, int status)
{
        nb_exec_result e = NB_EXEC_RESULT_INIT;

        if (nb_result_exec(res, 0, &e) < 0) {
                if (c->json) {
                        printf("{\"status\":%d,\"message\":", -status);
                        json_str(nb_result_message(res, 0), strlen(nb_result_message(res, 0)));
                        puts("}");
                }
                return;
        }
        if (!c->json) {
                fwrite(e.out, 1, e.out_len, stdout);
                fwrite(e.err, 1, e.err_len, stderr);
                return;
        }
        printf("{\"status\":%d,\"message\":", -status);
        json_str(nb_result_message(res, 0), strlen(nb_result_message(res, 0)));
        printf(",\"exit_code\":%d,\"signal\":%d,\"timed_out\":%s,\"duration_us\":%llu,\"stdout\":",
               e.exit_code, e.signal, e.timed_out ? "true" : "false",
               (unsigned long long)e.duration_us);
        json_str(e.out, e.out_len);
        printf(",\"stdout_truncated\":%s,\"stderr\":", e.out_truncated ? "true" : "false");
        json_str(e.err, e.err_len);
        printf(",\"stderr_truncated\":%s}\n", e.err_truncated ? "true" : "false");
}

static int cmd_exec(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"timeout", required_argument, NULL, 't'},
                                             {"stdin", required_argument, NULL, 'i'},
                                             {0}};
        unsigned timeout = 0;
        char *in = NULL;
        size_t in_len = 0;
        nb_batch *b = NULL;
        nb_results *res = NULL;
        int ch, rc;

        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "+t:i:", opts, NULL)) != -1) {
                if (ch == 't') {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (!*optarg || *end || v > 24ul * 3600 * 1000) {
                                fprintf(stderr,
                                        "netbrokerctl: --timeout takes milliseconds, got '%s'\n",
                                        optarg);
                                free(in);
                                return EXIT_USAGE;
                        }
                        timeout = (unsigned)v;
                } else if (ch == 'i') {
                        int r = read_file(optarg, &in, &in_len);
                        if (r < 0) {
                                fprintf(stderr, "netbrokerctl: %s: %s\n", optarg, strerror(-r));
                                return EXIT_USAGE;
                        }
                } else {
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                free(in);
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        rc = b ? nb_batch_exec(b, argv[optind], (const char *const *)&argv[optind], NULL, in,
                               in_len, timeout)
               : -ENOMEM;
        if (rc < 0) {
                fprintf(stderr, "netbrokerctl: exec %s: %s\n", argv[optind],
                        rc == -EINVAL ? "the program must be an absolute path" : strerror(-rc));
                nb_batch_free(b);
                free(in);
                return EXIT_USAGE;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0) {
                int st = nb_result_status(res, 0);
                print_exec(c, res, st);
                if (!c->json)
                        rc = report_failure(res, 0);
                else
                        rc = st ? EXIT_OP_FAILED : 0;
        }
        nb_results_free(res);
        nb_batch_free(b);
        free(in);
        return rc;
}

/* Print the outcome of a one-op interface batch. */
static int report_link(struct ctl *c, nb_results *res, const char *verb)
{
        int st = nb_result_status(res, 0);

        if (c->json) {
                printf("{\"status\":%d,\"message\":", -st);
                json_str(nb_result_message(res, 0), strlen(nb_result_message(res, 0)));
                printf(",\"ifname\":");
                json_str(nb_result_ifname(res, 0), strlen(nb_result_ifname(res, 0)));
                printf(",\"ifindex\":%d,\"peer\":", nb_result_ifindex(res, 0));
                json_str(nb_result_peer_ifname(res, 0), strlen(nb_result_peer_ifname(res, 0)));
                printf("}\n");
                return st ? EXIT_OP_FAILED : 0;
        }
        if (st)
                return report_failure(res, 0);
        printf("%s %s", verb, nb_result_ifname(res, 0));
        if (nb_result_ifindex(res, 0))
                printf(" (ifindex %d)", nb_result_ifindex(res, 0));
        if (nb_result_peer_ifname(res, 0)[0])
                printf(", peer %s", nb_result_peer_ifname(res, 0));
        printf("\n");
        return 0;
}

static int submit_one(struct ctl *c, nb_batch *b, const char *verb)
{
        nb_results *res = NULL;
        int rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);

        if (rc == 0)
                rc = report_link(c, res, verb);
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *ret)
{
        char *end;
        unsigned long v;

        if (!isdigit((unsigned char)s[0]))
                return -EINVAL;
        v = strtoul(s, &end, 10);
        if (*end || v < min || v > max)
                return -ERANGE;
        *ret = (unsigned)v;
        return 0;
}

static int parse_mode(const char *s, nb_macvlan_mode *ret)
{
        static const char *const names[] = {"bridge", "vepa", "private", "passthru"};

        for (int i = 0; i < 4; i++)
                if (strcmp(s, names[i]) == 0) {
                        *ret = (nb_macvlan_mode)i;
                        return 0;
                }
        return -EINVAL;
}

static int link_create(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"parent", required_argument, NULL, 'p'},
                                             {"mode", required_argument, NULL, 'm'},
                                             {"mac", required_argument, NULL, 'a'},
                                             {"peer", required_argument, NULL, 'P'},
                                             {"peer-netns", required_argument, NULL, 'n'},
                                             {"vnet-hdr", no_argument, NULL, 'v'},
                                             {"queues", required_argument, NULL, 'q'},
                                             {"transient", no_argument, NULL, 't'},
                                             {0}};
        const char *parent = NULL, *mac = NULL, *peer = NULL, *netns = NULL, *kind, *name;
        nb_macvlan_mode mode = NB_MACVLAN_BRIDGE;
        nb_tap_opts tap = {.size = sizeof(nb_tap_opts), .persist = true};
        nb_batch *b;
        int ch, r, nsfd = -1;

        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (ch) {
                case 'p':
                        parent = optarg;
                        break;
                case 'm':
                        if (parse_mode(optarg, &mode) < 0) {
                                fprintf(stderr, "netbrokerctl: unknown mode '%s'\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'a':
                        mac = optarg;
                        break;
                case 'P':
                        peer = optarg;
                        break;
                case 'n':
                        netns = optarg;
                        break;
                case 'v':
                        tap.vnet_hdr = true;
                        break;
                case 'q':
                        if (parse_uint(optarg, 1, 16, &tap.queues) < 0) {
                                fprintf(stderr, "netbrokerctl: --queues takes 1 to 16\n");
                                return EXIT_USAGE;
                        }
                        break;
                case 't':
                        tap.persist = false;
                        break;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (argc - optind != 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        kind = argv[optind];
        name = argv[optind + 1];
        b = nb_batch_new();
        if (!b)
                return EXIT_OP_FAILED;
        if (strcmp(kind, "tap") == 0) {
                r = nb_batch_tap_create(b, name, &tap);
        } else if (strcmp(kind, "macvtap") == 0 || strcmp(kind, "macvlan") == 0) {
                r = !parent ? -EINVAL
                    : strcmp(kind, "macvtap") == 0
                            ? nb_batch_macvtap_create(b, name, parent, mode, mac, tap.vnet_hdr)
                            : nb_batch_macvlan_create(b, name, parent, mode, mac);
        } else if (strcmp(kind, "veth") == 0) {
                if (netns && (nsfd = open(netns, O_RDONLY | O_CLOEXEC)) < 0) {
                        fprintf(stderr, "netbrokerctl: %s: %s\n", netns, strerror(errno));
                        nb_batch_free(b);
                        return EXIT_USAGE;
                }
                r = peer ? nb_batch_veth_create(b, name, peer, nsfd) : -EINVAL;
                if (nsfd >= 0)
                        close(nsfd);
        } else if (strcmp(kind, "bridge") == 0) {
                r = nb_batch_bridge_create(b, name);
        } else {
                r = -EINVAL;
        }
        if (r < 0) {
                fprintf(stderr, "netbrokerctl: link create %s %s: %s\n", kind, name,
                        r == -EINVAL ? "bad or missing arguments (see --help)" : strerror(-r));
                nb_batch_free(b);
                return EXIT_USAGE;
        }
        return submit_one(c, b, "created");
}

static int link_set(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"up", no_argument, NULL, 'u'},
                                             {"down", no_argument, NULL, 'd'},
                                             {"mtu", required_argument, NULL, 'm'},
                                             {"mac", required_argument, NULL, 'a'},
                                             {"master", required_argument, NULL, 'M'},
                                             {"nomaster", no_argument, NULL, 'N'},
                                             {0}};
        nb_link_change ch_ = {.size = sizeof(nb_link_change), .up = -1};
        nb_batch *b;
        int ch;

        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (ch) {
                case 'u':
                        ch_.up = 1;
                        break;
                case 'd':
                        ch_.up = 0;
                        break;
                case 'm':
                        if (parse_uint(optarg, 68, 65535, &ch_.mtu) < 0) {
                                fprintf(stderr, "netbrokerctl: --mtu takes 68 to 65535\n");
                                return EXIT_USAGE;
                        }
                        break;
                case 'a':
                        ch_.mac = optarg;
                        break;
                case 'M':
                        ch_.master = optarg;
                        break;
                case 'N':
                        ch_.nomaster = true;
                        break;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (argc - optind != 1) {
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        if (!b || nb_batch_link_set(b, argv[optind], &ch_) < 0) {
                fprintf(stderr, "netbrokerctl: link set: bad arguments\n");
                nb_batch_free(b);
                return EXIT_USAGE;
        }
        return submit_one(c, b, "changed");
}

static int link_delete(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;

        if (argc != 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        if (!b || nb_batch_link_delete(b, argv[1]) < 0) {
                fprintf(stderr, "netbrokerctl: link delete: bad name\n");
                nb_batch_free(b);
                return EXIT_USAGE;
        }
        return submit_one(c, b, "deleted");
}

/* A read op that failed: with --json, its status and message on stdout
 * (as report_link gives them), else the reason on stderr. */
static int report_read_failure(const struct ctl *c, const nb_results *res)
{
        int st = nb_result_status(res, 0);

        if (st == 0 || !c->json)
                return report_failure(res, 0);
        printf("{\"status\":%d,\"message\":", -st);
        json_str(nb_result_message(res, 0), strlen(nb_result_message(res, 0)));
        printf("}\n");
        return EXIT_OP_FAILED;
}

static void print_link_json(const nb_link_info *l, bool first)
{
        /* Interface names may hold '"' or '\\': escape them. */
        printf("%s{\"ifname\":", first ? "" : ",");
        json_str(l->name, strlen(l->name));
        printf(",\"ifindex\":%d,\"kind\":\"%s\",\"kind_name\":", l->ifindex,
               nb_link_kind_name(l->kind));
        json_str(l->kind_name, strlen(l->kind_name));
        printf(",\"mac\":\"%s\",\"mtu\":%u,\"up\":%s,\"master\":", l->mac, l->mtu,
               l->up ? "true" : "false");
        json_str(l->master, strlen(l->master));
        if (l->has_owner)
                printf(",\"owner_uid\":%u", l->owner_uid);
        else
                printf(",\"owner_uid\":null");
        printf(",\"made_by_helper\":%s}", l->made_by_helper ? "true" : "false");
}

static void print_link_text(const nb_link_info *l)
{
        char owner[16] = "-";

        if (l->has_owner)
                snprintf(owner, sizeof(owner), "%u", l->owner_uid);
        printf("%-16s %6d  %-8s %-4s %5u  %-17s %-16s %-6s %s\n", l->name, l->ifindex,
               nb_link_kind_name(l->kind), l->up ? "up" : "down", l->mtu, l->mac[0] ? l->mac : "-",
               l->master[0] ? l->master : "-", owner, l->made_by_helper ? "helper" : "-");
}

/* The helper reads the links (a non-root caller sees its own only). */
static int link_list(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;
        nb_results *res = NULL;
        int rc;

        if (argc > 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        if (!b || nb_batch_link_list(b, argc == 2 ? argv[1] : NULL) < 0) {
                fprintf(stderr, "netbrokerctl: bad interface name\n");
                nb_batch_free(b);
                return EXIT_USAGE;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0)
                rc = report_read_failure(c, res);
        if (rc == 0) {
                size_t n = nb_result_link_count(res, 0);
                nb_link_info l = NB_LINK_INFO_INIT;
                if (c->json)
                        putchar('[');
                else
                        printf("%-16s %6s  %-8s %-4s %5s  %-17s %-16s %-6s %s\n", "NAME", "INDEX",
                               "KIND", "STATE", "MTU", "MAC", "MASTER", "OWNER", "MADE");
                for (size_t k = 0; k < n && nb_result_link_at(res, 0, k, &l) == 0; k++) {
                        if (c->json)
                                print_link_json(&l, k == 0);
                        else
                                print_link_text(&l);
                }
                if (c->json)
                        puts("]");
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int cmd_link(struct ctl *c, int argc, char **argv)
{
        static const struct command sub[] = {
                {"create", link_create},
                {"set", link_set},
                {"delete", link_delete},
                {"list", link_list},
        };

        return run_subcommand(c, sub, sizeof(sub) / sizeof(*sub), argc - 1, argv + 1);
}

static int cmd_names(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;
        nb_results *res = NULL;
        int rc;

        (void)argv;
        if (argc != 1) {
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        if (!b || nb_batch_names_dump(b) < 0) {
                nb_batch_free(b);
                return EXIT_OP_FAILED;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0 && !(rc = report_failure(res, 0))) {
                const char *prefix;
                const uint32_t *used;
                size_t n_used;
                unsigned cursor;
                if (c->json)
                        putchar('[');
                for (size_t k = 0;
                     nb_result_names_at(res, 0, k, &prefix, &used, &n_used, &cursor) == 0; k++) {
                        if (c->json) {
                                printf("%s{\"prefix\":", k ? "," : "");
                                json_str(prefix, strlen(prefix));
                                printf(",\"cursor\":%u,\"used\":[", cursor);
                        } else {
                                printf("%-12s next from %-6u used:", prefix, cursor);
                        }
                        for (size_t j = 0; j < n_used; j++)
                                printf(c->json ? "%s%u" : "%s %u", c->json && j ? "," : "",
                                       used[j]);
                        printf(c->json ? "]}" : "\n");
                }
                if (c->json)
                        puts("]");
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

/* ---- firewall ---- */

static void print_fw_apply(const struct ctl *c, const nb_results *res, const struct fwfile *f)
{
        if (c->json)
                putchar('[');
        for (size_t i = 0; i < f->n_owners; i++) {
                int st = nb_result_status(res, i);
                const char *msg = nb_result_message(res, i), *hash = "";
                bool unchanged = false;
                unsigned rules = 0;

                nb_result_firewall(res, i, &hash, &unchanged, &rules);
                if (c->json) {
                        printf("%s{\"owner\":", i ? "," : "");
                        json_str(f->owners[i], strlen(f->owners[i]));
                        printf(",\"status\":%d,\"message\":", -st);
                        json_str(msg, strlen(msg));
                        printf(",\"hash\":");
                        json_str(hash, strlen(hash));
                        printf(",\"unchanged\":%s,\"rules\":%u}", unchanged ? "true" : "false",
                               rules);
                } else if (st) {
                        fprintf(stderr, "netbrokerctl: %s: %s%s(%s)\n", f->owners[i], msg,
                                msg[0] ? " " : "", strerror(-st));
                } else {
                        printf("%s: %s, %u rules, hash %s\n", f->owners[i],
                               unchanged ? "unchanged" : "installed", rules, hash);
                }
        }
        if (c->json)
                puts("]");
}

static int fw_apply(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"ensure", no_argument, NULL, 'e'}, {0}};
        struct fwfile f = {0};
        nb_results *res = NULL;
        nb_batch *b = NULL;
        char *text = NULL;
        size_t len = 0;
        int ch, r, rc;

        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch != 'e') {
                        usage(stderr);
                        return EXIT_USAGE;
                }
                f.force_ensure = true;
        }
        if (argc - optind != 1) {
                usage(stderr);
                return EXIT_USAGE;
        }
        f.name = strcmp(argv[optind], "-") == 0 ? "<stdin>" : argv[optind];
        r = read_file(argv[optind], &text, &len);
        if (r < 0) {
                fprintf(stderr, "netbrokerctl: %s: %s\n", f.name, strerror(-r));
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        r = b ? fwfile_parse(&f, text, len, b) : -ENOMEM;
        free(text);
        if (r < 0) {
                fprintf(stderr, "netbrokerctl: %s\n", b ? f.err : strerror(ENOMEM));
                rc = r == -EINVAL ? EXIT_USAGE : EXIT_OP_FAILED;
                goto out;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0) {
                print_fw_apply(c, res, &f);
                rc = nb_results_first_error(res) >= 0 ? EXIT_OP_FAILED : 0;
        }
out:
        nb_results_free(res);
        nb_batch_free(b);
        fwfile_done(&f);
        return rc;
}

static const char *dir_name(nb_fw_direction d)
{
        return d == NB_FW_TO_GUEST ? "to" : "from";
}

/* ,"counters":[...] of owner k. */
static void print_counters_json(const nb_results *res, size_t k)
{
        nb_fw_counter fc = NB_FW_COUNTER_INIT;

        printf(",\"counters\":[");
        for (size_t j = 0; nb_result_fw_counter_at(res, 0, k, j, &fc) == 0; j++) {
                printf("%s{\"group\":", j ? "," : "");
                json_str(fc.group, strlen(fc.group));
                printf(",\"direction\":\"%s\",\"index\":%u,\"packets\":%llu,\"bytes\":%llu,"
                       "\"text\":",
                       dir_name(fc.direction), fc.index, (unsigned long long)fc.packets,
                       (unsigned long long)fc.bytes);
                json_str(fc.text, strlen(fc.text));
                putchar('}');
        }
        putchar(']');
}

/* One line per rule of owner k: its chain (DIR or DIR/GROUP), position,
 * counters, text. */
static void print_counters_text(const nb_results *res, size_t k, bool counts)
{
        nb_fw_counter fc = NB_FW_COUNTER_INIT;
        char chain[64];

        for (size_t j = 0; nb_result_fw_counter_at(res, 0, k, j, &fc) == 0; j++) {
                snprintf(chain, sizeof(chain), "%s%s%s", dir_name(fc.direction),
                         fc.group[0] ? "/" : "", fc.group);
                if (counts)
                        printf("  %-28s %3u %10llu %12llu  %s\n", chain, fc.index,
                               (unsigned long long)fc.packets, (unsigned long long)fc.bytes,
                               fc.text);
                else
                        printf("  %-28s %3u  %s\n", chain, fc.index, fc.text);
        }
}

static void print_fw_list(const struct ctl *c, const nb_results *res, bool counters)
{
        const char *owner, *ifname, *hash;
        unsigned rules;

        if (c->json)
                putchar('[');
        for (size_t k = 0; nb_result_fw_owner_at(res, 0, k, &owner, &ifname, &hash, &rules) == 0;
             k++) {
                if (c->json) {
                        printf("%s{\"owner\":", k ? "," : "");
                        json_str(owner, strlen(owner));
                        printf(",\"ifname\":");
                        json_str(ifname, strlen(ifname));
                        printf(",\"hash\":");
                        json_str(hash, strlen(hash));
                        printf(",\"rules\":%u", rules);
                        if (counters)
                                print_counters_json(res, k);
                        putchar('}');
                } else {
                        printf("%-24s %-16s %6u  %s\n", owner, ifname, rules, hash);
                        if (counters)
                                print_counters_text(res, k, true);
                }
        }
        if (c->json)
                puts("]");
}

/* A FirewallList, with counters or not; 0 or an exit status. */
static int fw_read(struct ctl *c, bool counters, nb_batch **ret_b, nb_results **ret_res)
{
        nb_batch *b = nb_batch_new();
        int rc;

        *ret_b = b;
        *ret_res = NULL;
        if (!b || (counters ? nb_batch_firewall_list_counters(b) : nb_batch_firewall_list(b)) < 0)
                return EXIT_OP_FAILED;
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, ret_res);
        return rc ? rc : report_read_failure(c, *ret_res);
}

static int fw_list(struct ctl *c, int argc, char **argv)
{
        bool counters = argc == 2 && strcmp(argv[1], "--counters") == 0;
        nb_batch *b;
        nb_results *res;
        int rc;

        if (argc != 1 && !counters) {
                usage(stderr);
                return EXIT_USAGE;
        }
        rc = fw_read(c, counters, &b, &res);
        if (rc == 0)
                print_fw_list(c, res, counters);
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

/* The installed rules of one owner in libvirt's terms (the text each rule
 * carries), chain by chain, with their counters in JSON. */
static int fw_show(struct ctl *c, int argc, char **argv)
{
        const char *owner, *ifname, *hash;
        unsigned rules;
        nb_batch *b;
        nb_results *res;
        size_t k;
        int rc;

        if (argc != 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        rc = fw_read(c, true, &b, &res);
        for (k = 0;
             rc == 0 && nb_result_fw_owner_at(res, 0, k, &owner, &ifname, &hash, &rules) == 0; k++)
                if (strcmp(owner, argv[1]) == 0)
                        break;
        if (rc == 0 && k == nb_result_fw_owner_count(res, 0)) {
                if (c->json) {
                        printf("{\"status\":%d,\"message\":", ENOENT);
                        json_str("no such owner", strlen("no such owner"));
                        puts("}");
                } else {
                        fprintf(stderr, "netbrokerctl: fw show: no owner %s\n", argv[1]);
                }
                rc = EXIT_OP_FAILED;
        }
        if (rc == 0 && c->json) {
                printf("{\"owner\":");
                json_str(owner, strlen(owner));
                printf(",\"ifname\":");
                json_str(ifname, strlen(ifname));
                printf(",\"hash\":");
                json_str(hash, strlen(hash));
                printf(",\"rules\":%u", rules);
                print_counters_json(res, k);
                puts("}");
        } else if (rc == 0) {
                printf("%s on %s, %u rules, hash %s\n", owner, ifname, rules, hash);
                print_counters_text(res, k, false);
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int fw_remove(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;
        nb_results *res = NULL;
        int rc;

        if (argc != 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        if (!b || nb_batch_firewall_remove(b, argv[1]) < 0) {
                fprintf(stderr, "netbrokerctl: fw remove: bad owner name '%s'\n", argv[1]);
                nb_batch_free(b);
                return EXIT_USAGE;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0) {
                int st = nb_result_status(res, 0);
                if (c->json) {
                        printf("{\"owner\":");
                        json_str(argv[1], strlen(argv[1]));
                        printf(",\"status\":%d,\"message\":", -st);
                        json_str(nb_result_message(res, 0), strlen(nb_result_message(res, 0)));
                        puts("}");
                        rc = st ? EXIT_OP_FAILED : 0;
                } else if (!(rc = report_failure(res, 0))) {
                        printf("removed %s\n", argv[1]);
                }
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int cmd_fw(struct ctl *c, int argc, char **argv)
{
        static const struct command sub[] = {
                {"apply", fw_apply},
                {"list", fw_list},
                {"remove", fw_remove},
                {"show", fw_show},
        };

        return run_subcommand(c, sub, sizeof(sub) / sizeof(*sub), argc - 1, argv + 1);
}

/* ---- bandwidth ---- */

static int bw_set(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"in-average", required_argument, NULL, 0},
                                             {"in-peak", required_argument, NULL, 1},
                                             {"in-burst", required_argument, NULL, 2},
                                             {"in-floor", required_argument, NULL, 3},
                                             {"out-average", required_argument, NULL, 4},
                                             {"out-peak", required_argument, NULL, 5},
                                             {"out-burst", required_argument, NULL, 6},
                                             {0}};
        nb_rate in = NB_RATE_INIT, out = NB_RATE_INIT;
        unsigned *fields[] = {&in.average,  &in.peak,  &in.burst, &in.floor,
                              &out.average, &out.peak, &out.burst};
        nb_results *res = NULL;
        const char *in_mech = "", *out_mech = "";
        nb_batch *b;
        int ch, rc;

        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch < 0 || ch > 6 || parse_uint(optarg, 0, UINT32_MAX, fields[ch]) < 0) {
                        if (ch >= 0 && ch <= 6)
                                fprintf(stderr, "netbrokerctl: --%s takes a number\n",
                                        opts[ch].name);
                        else
                                usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (argc - optind != 1) {
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        if (!b || nb_batch_bandwidth_set(b, argv[optind], &in, &out) < 0) {
                fprintf(stderr, "netbrokerctl: bw set: bad name, or a rate without --*-average\n");
                nb_batch_free(b);
                return EXIT_USAGE;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0 && !(rc = report_failure(res, 0))) {
                nb_result_bandwidth(res, 0, &in_mech, &out_mech);
                if (c->json) {
                        printf("{\"ifname\":");
                        json_str(argv[optind], strlen(argv[optind]));
                        printf(",\"inbound_mechanism\":");
                        json_str(in_mech, strlen(in_mech));
                        printf(",\"outbound_mechanism\":");
                        json_str(out_mech, strlen(out_mech));
                        puts("}");
                } else {
                        printf("%s: inbound %s, outbound %s\n", argv[optind],
                               in_mech[0] ? in_mech : "unlimited",
                               out_mech[0] ? out_mech : "unlimited");
                }
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int bw_clear(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;
        nb_results *res = NULL;
        int rc;

        if (argc != 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        if (!b || nb_batch_bandwidth_clear(b, argv[1]) < 0) {
                fprintf(stderr, "netbrokerctl: bw clear: bad name\n");
                nb_batch_free(b);
                return EXIT_USAGE;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0 && !(rc = report_failure(res, 0)) && !c->json)
                printf("cleared %s\n", argv[1]);
        else if (rc == 0 && c->json)
                puts("{\"ok\":true}");
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static void bw_print_rate(const struct ctl *c, const char *what, bool has, const nb_rate *r,
                          const char *mech)
{
        if (c->json && !has)
                printf("\"%s\":null", what);
        else if (c->json)
                printf("\"%s\":{\"mechanism\":\"%s\",\"average\":%u,\"peak\":%u,\"burst\":%u,"
                       "\"floor\":%u}",
                       what, mech, r->average, r->peak ? r->peak : r->average, r->burst, r->floor);
        else if (!has)
                printf("  %-9s none\n", what);
        else
                printf("  %-9s average %u kB/s, peak %u kB/s, burst %u kB (%s)\n", what, r->average,
                       r->peak ? r->peak : r->average, r->burst, mech);
}

/* The helper reads the limits back (a non-root caller: of its own
 * interfaces only). */
static int bw_show(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;
        nb_results *res = NULL;
        bool has_in = false, has_out = false;
        nb_rate in = NB_RATE_INIT, out = NB_RATE_INIT;
        const char *in_mech = "", *out_mech = "";
        int rc;

        if (argc != 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        b = nb_batch_new();
        if (!b || nb_batch_bandwidth_show(b, argv[1]) < 0) {
                fprintf(stderr, "netbrokerctl: bad interface name %s\n", argv[1]);
                nb_batch_free(b);
                return EXIT_USAGE;
        }
        rc = open_conn(c) ? EXIT_UNREACHABLE : submit(c, b, &res);
        if (rc == 0)
                rc = report_read_failure(c, res);
        if (rc == 0 && (nb_result_bandwidth_show(res, 0, &has_in, &in, &has_out, &out) < 0 ||
                        nb_result_bandwidth_show_mechanisms(res, 0, &in_mech, &out_mech) < 0)) {
                fprintf(stderr, "netbrokerctl: the helper sent no bandwidth result\n");
                rc = EXIT_OP_FAILED;
        }
        if (rc == 0) {
                if (c->json) {
                        printf("{\"ifname\":");
                        json_str(argv[1], strlen(argv[1]));
                        putchar(',');
                } else {
                        printf("%s:\n", argv[1]);
                }
                bw_print_rate(c, "inbound", has_in, &in, in_mech);
                if (c->json)
                        putchar(',');
                bw_print_rate(c, "outbound", has_out, &out, out_mech);
                if (c->json)
                        puts("}");
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int cmd_bw(struct ctl *c, int argc, char **argv)
{
        static const struct command sub[] = {
                {"set", bw_set},
                {"show", bw_show},
                {"clear", bw_clear},
        };

        return run_subcommand(c, sub, sizeof(sub) / sizeof(*sub), argc - 1, argv + 1);
}

static const struct command commands[] = {
        {"ping", cmd_ping},   {"stats", cmd_stats}, {"exec", cmd_exec}, {"link", cmd_link},
        {"names", cmd_names}, {"fw", cmd_fw},       {"bw", cmd_bw},
};

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"socket", required_argument, NULL, 's'}, {"spawn", required_argument, NULL, 'p'},
                {"config", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
                {"help", no_argument, NULL, 'h'},         {0}};
        struct ctl c = {0};
        int ch, rc = EXIT_USAGE;

        while ((ch = getopt_long(argc, argv, "+s:p:c:jh", opts, NULL)) != -1) {
                switch (ch) {
                case 's':
                        c.socket_path = optarg;
                        break;
                case 'p':
                        c.helper_path = optarg;
                        break;
                case 'c':
                        c.config_path = optarg;
                        break;
                case 'j':
                        c.json = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc || (c.socket_path && c.helper_path)) {
                usage(stderr);
                return EXIT_USAGE;
        }
        for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++) {
                if (strcmp(argv[optind], commands[i].name) != 0)
                        continue;
                /* Each command checks its arguments before it connects, so a
                 * usage error is exit 2 even when no helper can be reached. */
                rc = commands[i].fn(&c, argc - optind, argv + optind);
                nb_close(c.conn);
                return rc;
        }
        fprintf(stderr, "netbrokerctl: unknown command '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
}
