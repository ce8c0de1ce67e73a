// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl addr add|del|list and route add|del|list (virtual networks,
 * part 1). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* "ADDR/PREFIX" into its parts (buf holds the address). */
static int split_prefix(const char *s, char *buf, size_t len, unsigned max, unsigned *ret_len)
{
        const char *slash = strchr(s, '/');

        if (!slash || (size_t)(slash - s) >= len)
                return -EINVAL;
        memcpy(buf, s, (size_t)(slash - s));
        buf[slash - s] = '\0';
        return ctl_parse_uint(slash + 1, 0, max, ret_len);
}

/* A one-op change: "ok" or the failure. */
static int submit_change(struct ctl *c, nb_batch *b, const char *done)
{
        nb_results *res = NULL;
        int rc = ctl_submit(c, b, &res);

        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                if (c->json) {
                        json_ok_begin();
                        json_kv("message", nb_result_message(res, 0), false);
                        puts("}");
                } else {
                        printf("%s\n",
                               nb_result_message(res, 0)[0] ? nb_result_message(res, 0) : done);
                }
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

/* ---- addr ---- */

static int addr_change(struct ctl *c, int argc, char **argv, bool add)
{
        static const struct option opts[] = {{"broadcast", required_argument, NULL, 'b'},
                                             {"noprefixroute", no_argument, NULL, 'n'},
                                             {0}};
        nb_addr_opts o = NB_ADDR_OPTS_INIT;
        char addr[64];
        unsigned len;
        nb_batch *b;
        int ch, r;

        opterr = 0;
        optind = 0;
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch == 'b' && add)
                        o.broadcast = optarg;
                else if (ch == 'n' && add)
                        o.noprefixroute = true;
                else
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
        }
        if (argc - optind != 2)
                return ctl_usage_error(c, "needs an interface NAME and an ADDRESS/PREFIX");
        if (split_prefix(argv[optind + 1], addr, sizeof(addr), 128, &len) < 0)
                return ctl_usage_error(c, "'%s' is not ADDRESS/PREFIX", argv[optind + 1]);
        b = nb_batch_new();
        r = !b    ? -ENOMEM
            : add ? nb_batch_addr_add(b, argv[optind], addr, len, &o)
                  : nb_batch_addr_delete(b, argv[optind], addr, len);
        if (r < 0) {
                nb_batch_free(b);
                return ctl_bad_input(c, "bad interface name or address");
        }
        return submit_change(c, b, add ? "added" : "deleted");
}

static int addr_add(struct ctl *c, int argc, char **argv)
{
        return addr_change(c, argc, argv, true);
}

static int addr_del(struct ctl *c, int argc, char **argv)
{
        return addr_change(c, argc, argv, false);
}

static void print_addrs(const struct ctl *c, const nb_results *res)
{
        nb_addr_info a = NB_ADDR_INFO_INIT;
        size_t n = nb_result_addr_count(res, 0);

        if (c->json)
                fputs("{\"ok\":true,\"addresses\":[", stdout);
        else
                printf("%-16s %-40s %-15s %s\n", "IFNAME", "ADDRESS", "BROADCAST", "FLAGS");
        for (size_t k = 0; k < n && nb_result_addr_at(res, 0, k, &a) == 0; k++) {
                if (c->json) {
                        printf("%s{", k ? "," : "");
                        json_kv("ifname", a.ifname, true);
                        printf(",\"ifindex\":%d", a.ifindex);
                        json_kv("address", a.address, false);
                        printf(",\"prefix_len\":%u", a.prefix_len);
                        json_kv("broadcast", a.broadcast, false);
                        printf(",\"noprefixroute\":%s,\"scope\":%u}",
                               a.noprefixroute ? "true" : "false", a.scope);
                } else {
                        char full[64];
                        snprintf(full, sizeof(full), "%s/%u", a.address, a.prefix_len);
                        printf("%-16s %-40s %-15s %s\n", a.ifname, full,
                               a.broadcast[0] ? a.broadcast : "-",
                               a.noprefixroute ? "noprefixroute" : "-");
                }
        }
        if (c->json)
                puts("]}");
}

static int addr_list(struct ctl *c, int argc, char **argv)
{
        nb_results *res = NULL;
        nb_batch *b;
        int rc;

        if (argc > 2 || (argc == 2 && argv[1][0] == '-'))
                return ctl_usage_error(c, "takes at most one interface NAME");
        b = nb_batch_new();
        if (!b || nb_batch_addr_list(b, argc == 2 ? argv[1] : NULL) < 0) {
                nb_batch_free(b);
                return ctl_usage_error(c, "bad interface name '%s'", argv[1]);
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0)))
                print_addrs(c, res);
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static const struct command addr_sub[] = {
        {
                .name = "add",
                .fn = addr_add,
                .args = "NAME ADDRESS/PREFIX [--broadcast ADDRESS] [--noprefixroute]",
                .summary = "add an IPv4 or IPv6 address to an interface",
                .example = "nbbr0 10.0.0.1/24",
        },
        {
                .name = "del",
                .fn = addr_del,
                .args = "NAME ADDRESS/PREFIX",
                .summary = "delete an address (one that is not there: nothing to do)",
                .example = "nbbr0 10.0.0.1/24",
        },
        {
                .name = "list",
                .fn = addr_list,
                .args = "[NAME]",
                .summary = "addresses (a caller that is not root: of its interfaces)",
                .example = "",
        },
};

const struct command ctl_cmd_addr = {
        .name = "addr",
        .sub = addr_sub,
        .n_sub = sizeof(addr_sub) / sizeof(*addr_sub),
        .args = "",
        .summary = "interface addresses: add, del, list",
};

/* ---- route ---- */

static int route_change(struct ctl *c, int argc, char **argv, bool add)
{
        static const struct option opts[] = {
                {"via", required_argument, NULL, 'v'},    {"dev", required_argument, NULL, 'd'},
                {"metric", required_argument, NULL, 'm'}, {"table", required_argument, NULL, 't'},
                {"ipv6", no_argument, NULL, '6'},         {0}};
        nb_route rt = NB_ROUTE_INIT;
        char dst[64];
        nb_batch *b;
        int ch, r;

        opterr = 0;
        optind = 0;
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (ch) {
                case 'v':
                        rt.gateway = optarg;
                        break;
                case 'd':
                        rt.ifname = optarg;
                        break;
                case 'm':
                        if (ctl_parse_uint(optarg, 0, 0xffffffffu, &rt.metric) < 0)
                                return ctl_usage_error(c, "--metric takes a number");
                        break;
                case 't':
                        if (ctl_parse_uint(optarg, 0, 0xfffffffeu, &rt.table) < 0)
                                return ctl_usage_error(c, "--table takes a number");
                        break;
                case '6':
                        rt.ipv6 = true;
                        break;
                default:
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (argc - optind != 1)
                return ctl_usage_error(c, "needs a DESTINATION/PREFIX or 'default'");
        if (strcmp(argv[optind], "default") != 0) {
                if (split_prefix(argv[optind], dst, sizeof(dst), 128, &rt.prefix_len) < 0)
                        return ctl_usage_error(c, "'%s' is not DESTINATION/PREFIX", argv[optind]);
                rt.destination = dst;
        }
        if (!rt.gateway && !rt.ifname)
                return ctl_usage_error(c, "needs --via GATEWAY or --dev NAME");
        b = nb_batch_new();
        r = !b ? -ENOMEM : add ? nb_batch_route_add(b, &rt) : nb_batch_route_delete(b, &rt);
        if (r < 0) {
                nb_batch_free(b);
                return ctl_bad_input(c, "bad route");
        }
        return submit_change(c, b, add ? "added" : "deleted");
}

static int route_add(struct ctl *c, int argc, char **argv)
{
        return route_change(c, argc, argv, true);
}

static int route_del(struct ctl *c, int argc, char **argv)
{
        return route_change(c, argc, argv, false);
}

static void print_routes(const struct ctl *c, const nb_results *res)
{
        nb_route rt = NB_ROUTE_INIT;
        size_t n = nb_result_route_count(res, 0);

        if (c->json)
                fputs("{\"ok\":true,\"routes\":[", stdout);
        else
                printf("%-43s %-39s %-16s %10s %s\n", "DESTINATION", "GATEWAY", "IFNAME", "METRIC",
                       "TABLE");
        for (size_t k = 0; k < n && nb_result_route_at(res, 0, k, &rt) == 0; k++) {
                char dst[80];
                if (rt.destination[0])
                        snprintf(dst, sizeof(dst), "%s/%u", rt.destination, rt.prefix_len);
                else
                        snprintf(dst, sizeof(dst), "default%s", rt.ipv6 ? " (IPv6)" : "");
                if (c->json) {
                        printf("%s{", k ? "," : "");
                        json_kv("destination", rt.destination, true);
                        printf(",\"prefix_len\":%u", rt.prefix_len);
                        json_kv("gateway", rt.gateway, false);
                        json_kv("ifname", rt.ifname, false);
                        printf(",\"metric\":%u,\"table\":%u,\"ipv6\":%s}", rt.metric, rt.table,
                               rt.ipv6 ? "true" : "false");
                } else {
                        printf("%-43s %-39s %-16s %10u %u\n", dst, rt.gateway[0] ? rt.gateway : "-",
                               rt.ifname[0] ? rt.ifname : "-", rt.metric, rt.table);
                }
        }
        if (c->json)
                puts("]}");
}

static int route_list(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"table", required_argument, NULL, 't'}, {0}};
        nb_results *res = NULL;
        unsigned table = 0;
        nb_batch *b;
        int ch, rc;

        opterr = 0;
        optind = 0;
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch != 't')
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                if (ctl_parse_uint(optarg, 0, 0xfffffffeu, &table) < 0)
                        return ctl_usage_error(c, "--table takes a number");
        }
        if (argc - optind > 1)
                return ctl_usage_error(c, "takes at most one interface NAME");
        b = nb_batch_new();
        if (!b || nb_batch_route_list(b, argc > optind ? argv[optind] : NULL, table) < 0) {
                nb_batch_free(b);
                return ctl_bad_input(c, "bad interface name");
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0)))
                print_routes(c, res);
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static const struct command route_sub[] = {
        {
                .name = "add",
                .fn = route_add,
                .args = "DESTINATION/PREFIX|default [--via GATEWAY] [--dev NAME] [--metric N]\n"
                        "        [--table N] [--ipv6]",
                .summary = "add a route (--ipv6: a default route without a gateway)",
                .example = "10.1.0.0/16 --dev nbbr0",
        },
        {
                .name = "del",
                .fn = route_del,
                .args = "DESTINATION/PREFIX|default [--via GATEWAY] [--dev NAME] [--metric N]\n"
                        "        [--table N] [--ipv6]",
                .summary = "delete a route",
                .example = "10.1.0.0/16 --dev nbbr0",
        },
        {
                .name = "list",
                .fn = route_list,
                .args = "[NAME] [--table N]",
                .summary = "unicast routes of a table (main by default)",
                .example = "",
        },
};

const struct command ctl_cmd_route = {
        .name = "route",
        .sub = route_sub,
        .n_sub = sizeof(route_sub) / sizeof(*route_sub),
        .args = "",
        .summary = "routes: add, del, list",
};
