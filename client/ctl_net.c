// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl net create|delete|list: network owners (netbroker.h,
 * "virtual networks"). */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

#define MAX_SUBNETS 8
#define MAX_FORWARDS 64

struct net_args {
        nb_net_spec spec;
        const char *subnets[MAX_SUBNETS];
        nb_net_forward fwd[MAX_FORWARDS];
        const nb_net_forward *fwdp[MAX_FORWARDS];
        char *fwd_text[MAX_FORWARDS]; /* the copies fwd points into */
};

static void net_args_free(struct net_args *a)
{
        for (size_t i = 0; i < a->spec.n_forwards; i++)
                free(a->fwd_text[i]);
}

/* proto=tcp,port=N[,address=A],to=G[,to-port=M]: keys, so that an IPv6
 * address needs no brackets. 0 or -EINVAL. */
static int parse_forward(const char *text, nb_net_forward *f, char **ret_copy)
{
        char *copy = strdup(text), *save = NULL;
        int r = copy ? 0 : -ENOMEM;

        *f = (nb_net_forward)NB_NET_FORWARD_INIT;
        for (char *kv = copy ? strtok_r(copy, ",", &save) : NULL; r == 0 && kv;
             kv = strtok_r(NULL, ",", &save)) {
                char *v = strchr(kv, '=');
                if (!v) {
                        r = -EINVAL;
                        break;
                }
                *v++ = 0;
                if (strcmp(kv, "proto") == 0)
                        f->protocol = v;
                else if (strcmp(kv, "address") == 0)
                        f->outside_address = v;
                else if (strcmp(kv, "to") == 0)
                        f->guest_address = v;
                else if (strcmp(kv, "port") == 0)
                        r = ctl_parse_uint(v, 1, 65535, &f->outside_port);
                else if (strcmp(kv, "to-port") == 0)
                        r = ctl_parse_uint(v, 1, 65535, &f->guest_port);
                else
                        r = -EINVAL;
        }
        if (r == 0 && (!f->protocol || !f->guest_address || !f->outside_port))
                r = -EINVAL;
        if (r < 0) {
                free(copy);
                return r;
        }
        *ret_copy = copy;
        return 0;
}

static int parse_mode(const char *s, nb_net_mode *ret)
{
        static const char *const names[] = {"nat", "route", "open", "isolated"};

        for (unsigned i = 0; i < 4; i++)
                if (strcmp(s, names[i]) == 0) {
                        *ret = (nb_net_mode)i;
                        return 0;
                }
        return -EINVAL;
}

static int parse_ports(const char *s, unsigned *min, unsigned *max)
{
        char buf[32], *dash;

        snprintf(buf, sizeof(buf), "%s", s);
        if (!(dash = strchr(buf, '-')))
                return -EINVAL;
        *dash = 0;
        if (ctl_parse_uint(buf, 1, 65535, min) < 0 || ctl_parse_uint(dash + 1, 1, 65535, max) < 0 ||
            *min >= *max)
                return -EINVAL;
        return 0;
}

static int net_options(struct ctl *c, int argc, char **argv, struct net_args *a)
{
        static const struct option opts[] = {{"bridge", required_argument, NULL, 'b'},
                                             {"subnet", required_argument, NULL, 's'},
                                             {"mode", required_argument, NULL, 'm'},
                                             {"forward-dev", required_argument, NULL, 'd'},
                                             {"nat-ports", required_argument, NULL, 'n'},
                                             {"port-forward", required_argument, NULL, 'f'},
                                             {"ensure", no_argument, NULL, 'e'},
                                             {"nat-ipv6", no_argument, NULL, '6'},
                                             {"ipv6-nogw", no_argument, NULL, 'g'},
                                             {0}};
        nb_net_spec *s = &a->spec;
        int ch;

        opterr = 0;
        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (ch) {
                case 'b':
                        s->bridge = optarg;
                        break;
                case 's':
                        if (s->n_subnets == MAX_SUBNETS)
                                return ctl_usage_error(c, "at most %d --subnet", MAX_SUBNETS);
                        a->subnets[s->n_subnets++] = optarg;
                        break;
                case 'm':
                        if (parse_mode(optarg, &s->mode) < 0)
                                return ctl_usage_error(c, "--mode: nat, route, open or isolated");
                        break;
                case 'd':
                        s->forward_dev = optarg;
                        break;
                case 'n':
                        if (parse_ports(optarg, &s->nat_port_min, &s->nat_port_max) < 0)
                                return ctl_usage_error(c,
                                                       "--nat-ports: MIN-MAX, 1-65535, MIN < MAX");
                        break;
                case 'f':
                        if (s->n_forwards == MAX_FORWARDS)
                                return ctl_usage_error(c, "at most %d --port-forward",
                                                       MAX_FORWARDS);
                        if (parse_forward(optarg, &a->fwd[s->n_forwards],
                                          &a->fwd_text[s->n_forwards]) < 0)
                                return ctl_usage_error(c, "--port-forward: proto=tcp|udp,port=N"
                                                          "[,address=ADDR],to=GUEST[,to-port=M]");
                        a->fwdp[s->n_forwards] = &a->fwd[s->n_forwards];
                        s->n_forwards++;
                        break;
                case 'e':
                        s->fw_mode = NB_FW_ENSURE;
                        break;
                case '6':
                        s->nat_ipv6 = true;
                        break;
                case 'g':
                        s->ipv6_nogw = true;
                        break;
                default:
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (argc - optind != 1 || argv[optind][0] == '-')
                return ctl_usage_error(c, "needs one network OWNER");
        if (!s->bridge)
                return ctl_usage_error(c, "needs --bridge");
        return 0;
}

static int net_create(struct ctl *c, int argc, char **argv)
{
        struct net_args a = {.spec = NB_NET_SPEC_INIT};
        nb_results *res = NULL;
        const char *hash = "";
        bool unchanged = false;
        unsigned rules = 0;
        nb_batch *b = NULL;
        int rc = net_options(c, argc, argv, &a);

        if (rc)
                goto out;
        a.spec.subnets = a.subnets;
        a.spec.forwards = a.fwdp;
        b = nb_batch_new();
        if (!b || nb_batch_net_apply(b, argv[optind], &a.spec) < 0) {
                rc = ctl_bad_input(c, "bad owner or network");
                goto out;
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                nb_result_net(res, 0, &hash, &unchanged, &rules);
                if (c->json) {
                        json_ok_begin();
                        json_kv("owner", argv[optind], false);
                        json_kv("hash", hash, false);
                        printf(",\"unchanged\":%s,\"rules\":%u}\n", unchanged ? "true" : "false",
                               rules);
                } else {
                        printf("%s: %u rules%s, hash %s\n", argv[optind], rules,
                               unchanged ? " (unchanged: nothing written)" : "", hash);
                }
        }
out:
        nb_results_free(res);
        nb_batch_free(b);
        net_args_free(&a);
        return rc;
}

static int net_delete(struct ctl *c, int argc, char **argv)
{
        nb_results *res = NULL;
        nb_batch *b;
        int rc;

        if (argc != 2 || argv[1][0] == '-')
                return ctl_usage_error(c, "needs one network OWNER");
        b = nb_batch_new();
        if (!b || nb_batch_net_remove(b, argv[1]) < 0) {
                nb_batch_free(b);
                return ctl_usage_error(c, "bad owner '%s'", argv[1]);
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                if (c->json) {
                        json_ok_begin();
                        json_kv("owner", argv[1], false);
                        puts("}");
                }
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static int net_list(struct ctl *c, int argc, char **argv)
{
        nb_results *res = NULL;
        nb_batch *b;
        int rc;

        (void)argv;
        if (argc != 1)
                return ctl_usage_error(c, "takes no arguments");
        b = nb_batch_new();
        if (!b || nb_batch_net_list(b) < 0) {
                nb_batch_free(b);
                return ctl_fail(c, EXIT_OP_FAILED, ENOMEM, "cannot make a batch");
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0)
                rc = ctl_op_failed(c, res, 0);
        if (rc == 0 && c->json)
                fputs("{\"ok\":true,\"networks\":[", stdout);
        for (size_t k = 0; rc == 0; k++) {
                nb_net_owner o = NB_NET_OWNER_INIT;
                if (nb_result_net_owner_at(res, 0, k, &o) < 0)
                        break;
                if (c->json) {
                        printf("%s{", k ? "," : "");
                        json_kv("owner", o.owner, true);
                        json_kv("bridge", o.bridge, false);
                        json_kv("mode", o.mode, false);
                        json_kv("hash", o.hash, false);
                        printf(",\"rules\":%u}", o.rules);
                } else {
                        printf("%-24s %-16s %-8s %4u  %s\n", o.owner, o.bridge, o.mode, o.rules,
                               o.hash);
                }
        }
        if (rc == 0 && c->json)
                puts("]}");
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static const struct command net_sub[] = {
        {
                .name = "create",
                .fn = net_create,
                .args = "OWNER --bridge BR [--subnet ADDR/PREFIX]... [--mode nat|route|open|"
                        "isolated]\n"
                        "        [--forward-dev DEV] [--nat-ports MIN-MAX] [--nat-ipv6] "
                        "[--ipv6-nogw] [--ensure]\n"
                        "        [--port-forward proto=tcp|udp,port=N[,address=ADDR],to=GUEST"
                        "[,to-port=M]]...",
                .summary = "install (or with --ensure: make sure of) a network's forward "
                           "filter, NAT and port forwards",
                .details = "  the mode is nat unless --mode says; --ensure writes nothing "
                           "when the rules are in place\n",
                .example = "nbnet0 --bridge nbctl0 --subnet 192.168.250.0/24",
        },
        {
                .name = "delete",
                .fn = net_delete,
                .args = "OWNER",
                .summary = "remove every rule of the network",
                .example = "nbnet0",
        },
        {
                .name = "list",
                .fn = net_list,
                .args = "",
                .summary = "the networks in the kernel: owner, bridge, mode, rules, hash",
                .example = "",
        },
};

const struct command ctl_cmd_net = {
        .name = "net",
        .sub = net_sub,
        .n_sub = sizeof(net_sub) / sizeof(*net_sub),
        .args = "",
        .summary = "virtual networks' firewall: create, delete, list",
};
