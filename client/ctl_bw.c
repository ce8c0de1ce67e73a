// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl bw set|show|clear. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <string.h>

#include "ctl.h"

static int bw_options(struct ctl *c, int argc, char **argv, nb_rate *in, nb_rate *out)
{
        static const struct option opts[] = {{"in-average", required_argument, NULL, 0},
                                             {"in-peak", required_argument, NULL, 1},
                                             {"in-burst", required_argument, NULL, 2},
                                             {"in-floor", required_argument, NULL, 3},
                                             {"out-average", required_argument, NULL, 4},
                                             {"out-peak", required_argument, NULL, 5},
                                             {"out-burst", required_argument, NULL, 6},
                                             {0}};
        unsigned *fields[] = {&in->average,  &in->peak,  &in->burst, &in->floor,
                              &out->average, &out->peak, &out->burst};
        int ch;

        opterr = 0;
        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch < 0 || ch > 6)
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                if (ctl_parse_uint(optarg, 0, UINT32_MAX, fields[ch]) < 0)
                        return ctl_usage_error(c, "--%s takes a number", opts[ch].name);
        }
        if (argc - optind != 1)
                return ctl_usage_error(c, "needs one interface NAME");
        return 0;
}

static int bw_set(struct ctl *c, int argc, char **argv)
{
        nb_rate in = NB_RATE_INIT, out = NB_RATE_INIT;
        nb_results *res = NULL;
        const char *in_mech = "", *out_mech = "", *name;
        nb_batch *b;
        int rc;

        rc = bw_options(c, argc, argv, &in, &out);
        if (rc)
                return rc;
        name = argv[optind];
        b = nb_batch_new();
        if (!b || nb_batch_bandwidth_set(b, name, &in, &out) < 0) {
                nb_batch_free(b);
                return ctl_bad_input(c, "bad name, or a rate without --*-average");
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                nb_result_bandwidth(res, 0, &in_mech, &out_mech);
                if (c->json) {
                        json_ok_begin();
                        json_kv("ifname", name, false);
                        json_kv("inbound_mechanism", in_mech, false);
                        json_kv("outbound_mechanism", out_mech, false);
                        puts("}");
                } else {
                        printf("%s: inbound %s, outbound %s\n", name,
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

        if (argc != 2 || argv[1][0] == '-')
                return ctl_usage_error(c, "needs one interface NAME");
        b = nb_batch_new();
        if (!b || nb_batch_bandwidth_clear(b, argv[1]) < 0) {
                nb_batch_free(b);
                return ctl_usage_error(c, "bad interface name '%s'", argv[1]);
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0))) {
                if (c->json) {
                        json_ok_begin();
                        json_kv("ifname", argv[1], false);
                        puts("}");
                } else {
                        printf("cleared %s\n", argv[1]);
                }
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static void bw_print_rate(const struct ctl *c, const char *what, bool has, const nb_rate *r,
                          const char *mech)
{
        if (c->json && !has) {
                printf(",\"%s\":null", what);
        } else if (c->json) {
                printf(",\"%s\":{", what);
                json_kv("mechanism", mech, true);
                printf(",\"average\":%u,\"peak\":%u,\"burst\":%u,\"floor\":%u}", r->average,
                       r->peak ? r->peak : r->average, r->burst, r->floor);
        } else if (!has) {
                printf("  %-9s none\n", what);
        } else {
                printf("  %-9s average %u kB/s, peak %u kB/s, burst %u kB (%s)\n", what, r->average,
                       r->peak ? r->peak : r->average, r->burst, mech);
        }
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

        if (argc != 2 || argv[1][0] == '-')
                return ctl_usage_error(c, "needs one interface NAME");
        b = nb_batch_new();
        if (!b || nb_batch_bandwidth_show(b, argv[1]) < 0) {
                nb_batch_free(b);
                return ctl_usage_error(c, "bad interface name '%s'", argv[1]);
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0)
                rc = ctl_op_failed(c, res, 0);
        if (rc == 0 && (nb_result_bandwidth_show(res, 0, &has_in, &in, &has_out, &out) < 0 ||
                        nb_result_bandwidth_show_mechanisms(res, 0, &in_mech, &out_mech) < 0))
                rc = ctl_fail(c, EXIT_OP_FAILED, EPROTO, "the helper sent no bandwidth result");
        if (rc == 0) {
                if (c->json) {
                        json_ok_begin();
                        json_kv("ifname", argv[1], false);
                } else {
                        printf("%s:\n", argv[1]);
                }
                bw_print_rate(c, "inbound", has_in, &in, in_mech);
                bw_print_rate(c, "outbound", has_out, &out, out_mech);
                if (c->json)
                        puts("}");
        }
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static const struct command bw_sub[] = {
        {
                .name = "set",
                .fn = bw_set,
                .args = "IFACE [--in-average N --in-peak N --in-burst N --in-floor N]\n"
                        "        [--out-average N --out-peak N --out-burst N]",
                .summary = "limit IFACE (kB/s and kB, kB = 1024 bytes); a direction without "
                           "--*-average is unlimited",
                .example = "nbctl0 --in-average 100",
        },
        {
                .name = "show",
                .fn = bw_show,
                .args = "IFACE",
                .summary = "the limits netbroker has on IFACE",
                .example = "nbctl0",
        },
        {
                .name = "clear",
                .fn = bw_clear,
                .args = "IFACE",
                .summary = "remove them",
                .example = "nbctl0",
        },
};

const struct command ctl_cmd_bw = {
        .name = "bw",
        .sub = bw_sub,
        .n_sub = sizeof(bw_sub) / sizeof(*bw_sub),
        .args = "",
        .summary = "bandwidth limits: set, show, clear",
};
