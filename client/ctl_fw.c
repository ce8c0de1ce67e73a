// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl fw apply|list|show|remove. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "fwfile.h"

/* One owner's outcome in a batch: the common shape, with its owner. */
static void print_apply_json(const nb_results *res, size_t i, const char *owner)
{
        int st = nb_result_status(res, i);
        const char *hash = "";
        bool unchanged = false;
        unsigned rules = 0;

        printf("%s{\"ok\":%s", i ? "," : "", st ? "false" : "true");
        json_kv("owner", owner, false);
        if (st) {
                putchar(',');
                json_error_member(-st, nb_result_message(res, i));
        } else {
                nb_result_firewall(res, i, &hash, &unchanged, &rules);
                json_kv("hash", hash, false);
                printf(",\"unchanged\":%s,\"rules\":%u", unchanged ? "true" : "false", rules);
        }
        putchar('}');
}

static int print_fw_apply(struct ctl *c, const nb_results *res, const struct fwfile *f)
{
        long first = nb_results_first_error(res);

        if (c->json) {
                printf("{\"ok\":%s", first >= 0 ? "false" : "true");
                if (first >= 0) {
                        putchar(',');
                        json_error_member(-nb_result_status(res, (size_t)first),
                                          nb_result_message(res, (size_t)first));
                }
                fputs(",\"results\":[", stdout);
                for (size_t i = 0; i < f->n_owners; i++)
                        print_apply_json(res, i, f->owners[i]);
                puts("]}");
                return first >= 0 ? EXIT_OP_FAILED : 0;
        }
        for (size_t i = 0; i < f->n_owners; i++) {
                int st = nb_result_status(res, i);
                const char *hash = "";
                bool unchanged = false;
                unsigned rules = 0;

                if (st) {
                        const char *msg = nb_result_message(res, i);
                        fprintf(stderr, "netbrokerctl: %s: %s: %s (%s)\n", c->cmd_name,
                                f->owners[i], msg[0] ? msg : strerror(-st),
                                strerrorname_np(-st) ? strerrorname_np(-st) : "EUNKNOWN");
                        continue;
                }
                nb_result_firewall(res, i, &hash, &unchanged, &rules);
                printf("%s: %s, %u rules, hash %s\n", f->owners[i],
                       unchanged ? "unchanged" : "installed", rules, hash);
        }
        return first >= 0 ? EXIT_OP_FAILED : 0;
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

        opterr = 0;
        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch != 'e')
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                f.force_ensure = true;
        }
        if (argc - optind != 1)
                return ctl_usage_error(c, "needs one FILE (- for stdin)");
        f.name = strcmp(argv[optind], "-") == 0 ? "<stdin>" : argv[optind];
        r = ctl_read_file(argv[optind], &text, &len);
        if (r < 0)
                return ctl_fail(c, EXIT_USAGE, -r, "%s: %s", f.name, strerror(-r));
        b = nb_batch_new();
        r = b ? fwfile_parse(&f, text, len, b) : -ENOMEM;
        free(text);
        if (r < 0) {
                rc = r == -EINVAL ? ctl_fail(c, EXIT_USAGE, EINVAL, "%s", f.err)
                                  : ctl_fail(c, EXIT_OP_FAILED, -r, "%s", strerror(-r));
                goto out;
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0)
                rc = print_fw_apply(c, res, &f);
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
                printf("%s{", j ? "," : "");
                json_kv("group", fc.group, true);
                printf(",\"direction\":\"%s\",\"index\":%u,\"packets\":%llu,\"bytes\":%llu",
                       dir_name(fc.direction), fc.index, (unsigned long long)fc.packets,
                       (unsigned long long)fc.bytes);
                json_kv("text", fc.text, false);
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

/* "owner":...,"ifname":...,"hash":...,"rules":N of owner k. */
static void print_owner_json(const nb_results *res, size_t k, bool counters)
{
        const char *owner, *ifname, *hash;
        unsigned rules;

        nb_result_fw_owner_at(res, 0, k, &owner, &ifname, &hash, &rules);
        json_kv("owner", owner, true);
        json_kv("ifname", ifname, false);
        json_kv("hash", hash, false);
        printf(",\"rules\":%u", rules);
        if (nb_result_fw_owner_is_network(res, 0, k))
                fputs(",\"network\":true", stdout);
        if (counters)
                print_counters_json(res, k);
}

static void print_fw_list(const struct ctl *c, const nb_results *res, bool counters)
{
        const char *owner, *ifname, *hash;
        unsigned rules;

        if (c->json)
                fputs("{\"ok\":true,\"owners\":[", stdout);
        for (size_t k = 0; nb_result_fw_owner_at(res, 0, k, &owner, &ifname, &hash, &rules) == 0;
             k++) {
                if (c->json) {
                        printf("%s{", k ? "," : "");
                        print_owner_json(res, k, counters);
                        putchar('}');
                } else {
                        printf("%-24s %-16s %6u  %s%s\n", owner, ifname, rules, hash,
                               nb_result_fw_owner_is_network(res, 0, k) ? "  network" : "");
                        if (counters)
                                print_counters_text(res, k, true);
                }
        }
        if (c->json)
                puts("]}");
}

/* A FirewallList, with counters or not; 0 or an exit status (said). */
static int fw_read(struct ctl *c, bool counters, nb_batch **ret_b, nb_results **ret_res)
{
        nb_batch *b = nb_batch_new();
        int rc;

        *ret_b = b;
        *ret_res = NULL;
        if (!b || (counters ? nb_batch_firewall_list_counters(b) : nb_batch_firewall_list(b)) < 0)
                return ctl_fail(c, EXIT_OP_FAILED, ENOMEM, "cannot make a batch");
        rc = ctl_submit(c, b, ret_res);
        return rc ? rc : ctl_op_failed(c, *ret_res, 0);
}

static int fw_list(struct ctl *c, int argc, char **argv)
{
        bool counters = argc == 2 && strcmp(argv[1], "--counters") == 0;
        nb_batch *b;
        nb_results *res;
        int rc;

        if (argc != 1 && !counters)
                return ctl_usage_error(c, "takes only --counters");
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

        if (argc != 2 || argv[1][0] == '-')
                return ctl_usage_error(c, "needs one OWNER");
        rc = fw_read(c, true, &b, &res);
        for (k = 0;
             rc == 0 && nb_result_fw_owner_at(res, 0, k, &owner, &ifname, &hash, &rules) == 0; k++)
                if (strcmp(owner, argv[1]) == 0)
                        break;
        if (rc == 0 && k == nb_result_fw_owner_count(res, 0))
                rc = ctl_fail(c, EXIT_OP_FAILED, ENOENT, "no owner %s", argv[1]);
        if (rc == 0 && c->json) {
                json_ok_begin();
                putchar(',');
                print_owner_json(res, k, true);
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

        if (argc != 2 || argv[1][0] == '-')
                return ctl_usage_error(c, "needs one OWNER");
        b = nb_batch_new();
        if (!b || nb_batch_firewall_remove(b, argv[1]) < 0) {
                nb_batch_free(b);
                return ctl_usage_error(c, "bad owner name '%s'", argv[1]);
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                if (c->json) {
                        json_ok_begin();
                        json_kv("owner", argv[1], false);
                        json_kv("message", nb_result_message(res, 0), false);
                        puts("}");
                } else {
                        printf("removed %s\n", argv[1]);
                }
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static const struct command fw_sub[] = {
        {
                .name = "apply",
                .fn = fw_apply,
                .args = "[--ensure] FILE",
                .summary = "install the owners and rules of FILE (- for stdin) in one "
                           "transaction",
                .details =
                        "FILE: one statement per line, '#' comments:\n"
                        "  owner NAME [on IFNAME] [replace|ensure]   (IFNAME defaults to NAME)\n"
                        "  group NAME\n"
                        "  rule from|to accept|drop|reject|return [MATCH...]\n"
                        "  filter no-mac-spoofing MAC | no-ip-spoofing [IPV4...] | "
                        "no-arp-spoofing MAC [IPV4...]\n"
                        "       | no-promisc MAC | allow-dhcp [SERVER] | allow-arp | "
                        "clean-traffic MAC [IPV4...]\n"
                        "MATCH ('!' negates where shown):\n"
                        "  ether-src [!] MAC[/MASK]  ether-dst [!] MAC[/MASK]  "
                        "ether-type [!] N|ipv4|arp|ipv6|rarp|vlan\n"
                        "  arp-op [!] N|request|reply  arp-sender-mac [!] MAC\n"
                        "  arp-sender-ip [!] ADDR  arp-target-ip [!] ADDR  ip-src [!] ADDR[/LEN]  "
                        "ip-dst [!] ADDR[/LEN]\n"
                        "  proto [!] N|tcp|udp|sctp|icmp|icmpv6  sport [!] P[-Q]  dport [!] P[-Q]\n"
                        "  icmp-type [!] N  icmp-code N  vlan [!] ID  vlan-encap [!] TYPE  "
                        "dscp [!] N\n"
                        "  arp-target-mac [!] MAC  arp-htype [!] N  arp-ptype [!] N  "
                        "arp-gratuitous [!] true\n"
                        "  tcp-flags [!] MASK/SET  priority P  comment \"TEXT\"  (ip-src/ip-dst: "
                        "also A-B)\n"
                        "  group NAME [priority P] [root] [guard MATCH...]\n"
                        "  filter NAME [VAR=VALUE...]   any of libvirt's stock filters\n",
                .example = "-",
        },
        {
                .name = "list",
                .fn = fw_list,
                .args = "[--counters]",
                .summary = "owners in the kernel, with hashes; --counters: every rule, its "
                           "counters and its text",
                .example = "",
        },
        {
                .name = "show",
                .fn = fw_show,
                .args = "OWNER",
                .summary = "OWNER's installed rules in libvirt's terms",
                .example = "nbctl0",
        },
        {
                .name = "remove",
                .fn = fw_remove,
                .args = "OWNER",
                .summary = "remove an owner's rules",
                .example = "nbctl0",
        },
};

const struct command ctl_cmd_fw = {
        .name = "fw",
        .sub = fw_sub,
        .n_sub = sizeof(fw_sub) / sizeof(*fw_sub),
        .args = "",
        .summary = "firewall rules per owner: apply, list, show, remove",
};
