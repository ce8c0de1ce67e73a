// SPDX-License-Identifier: LGPL-2.1-or-later
/* nwfilter-nb-apply: install one of libvirt's stock filters (or a
 * composition of them) on an interface through netbrokerd, as a libvirt
 * adopter would: FirewallApply of nb_fw_add_filter(), owner = interface.
 * The differential test (tests/py/nwfilter_diff.py) runs it for side B.
 *
 * usage: nwfilter-nb-apply HELPER IFNAME FILTER[+FILTER...] [VAR=V1[,V2...]...]
 *
 * "no-promisc" (not a stock filter: the 2018 report's own, which
 * nb_fw_add_no_promisc() implements) is added with the MAC variable.
 * Exit status: 0 applied; 1 the helper refused it; 2 usage; 3 the helper
 * could not be reached; 4 a filter this build's libnetbroker does not have
 * (built against a libnetbroker without nb_fw_add_filter, the legacy
 * helpers stand in for the filters they implement). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netbroker.h"

#pragma weak nb_fw_add_filter

enum { MAX_VARS = 16, MAX_VALUES = 16 };

struct vars {
        nb_fw_var v[MAX_VARS];
        const char *values[MAX_VARS][MAX_VALUES + 1];
        size_t n;
};

static int parse_var(struct vars *vs, char *arg)
{
        char *eq = strchr(arg, '='), *save = NULL, *tok;
        size_t k = 0;

        if (!eq || vs->n == MAX_VARS)
                return -EINVAL;
        *eq = '\0';
        for (tok = strtok_r(eq + 1, ",", &save); tok && k < MAX_VALUES;
             tok = strtok_r(NULL, ",", &save))
                vs->values[vs->n][k++] = tok;
        if (k == 0 || tok)
                return -EINVAL;
        vs->values[vs->n][k] = NULL;
        vs->v[vs->n].size = sizeof(nb_fw_var);
        vs->v[vs->n].name = arg;
        vs->v[vs->n].values = vs->values[vs->n];
        vs->n++;
        return 0;
}

static const char *const *var_values(const struct vars *vs, const char *name)
{
        static const char *const none[] = {NULL};

        for (size_t i = 0; i < vs->n; i++)
                if (strcmp(vs->v[i].name, name) == 0)
                        return vs->v[i].values;
        return none;
}

static const char *var_first(const struct vars *vs, const char *name)
{
        return var_values(vs, name)[0];
}

/* Without nb_fw_add_filter: the helpers libnetbroker had before it. */
static int add_legacy(nb_fw_ruleset *rs, const char *f, const struct vars *vs)
{
        const char *mac = var_first(vs, "MAC");
        const char *const *ips = var_values(vs, "IP");

        if (strcmp(f, "clean-traffic") == 0)
                return nb_fw_add_clean_traffic(rs, mac, ips);
        if (strcmp(f, "no-mac-spoofing") == 0)
                return nb_fw_add_no_mac_spoofing(rs, mac);
        if (strcmp(f, "no-ip-spoofing") == 0)
                return nb_fw_add_no_ip_spoofing(rs, ips);
        if (strcmp(f, "no-arp-spoofing") == 0)
                return nb_fw_add_no_arp_spoofing(rs, mac, ips);
        if (strcmp(f, "allow-dhcp") == 0)
                return nb_fw_add_allow_dhcp(rs, NULL);
        if (strcmp(f, "allow-dhcp-server") == 0)
                return nb_fw_add_allow_dhcp(rs, var_first(vs, "DHCPSERVER"));
        if (strcmp(f, "allow-arp") == 0)
                return nb_fw_add_allow_arp(rs);
        return -ENOSYS;
}

/* nb-gratuitous-arp.xml here: from the guest only gratuitous ARP, to it
 * every ARP but gratuitous dropped. */
static int add_gratuitous(nb_fw_ruleset *rs)
{
        nb_fw_rule out_grat = {.size = sizeof(nb_fw_rule),
                               .direction = NB_FW_FROM_GUEST,
                               .verdict = NB_FW_ACCEPT,
                               .arp_gratuitous = true};
        nb_fw_rule out_arp = {.size = sizeof(nb_fw_rule),
                              .direction = NB_FW_FROM_GUEST,
                              .verdict = NB_FW_DROP,
                              .ether_type = 0x0806};
        nb_fw_rule in = {.size = sizeof(nb_fw_rule),
                         .direction = NB_FW_TO_GUEST,
                         .verdict = NB_FW_DROP,
                         .arp_gratuitous = true,
                         .arp_gratuitous_not = true};
        int r = nb_fw_rule_add(rs, &out_grat);

        if (r == 0)
                r = nb_fw_rule_add(rs, &out_arp);
        return r < 0 ? r : nb_fw_rule_add(rs, &in);
}

static int add_one(nb_fw_ruleset *rs, const char *f, const struct vars *vs)
{
        if (strcmp(f, "no-promisc") == 0)
                return nb_fw_add_no_promisc(rs, var_first(vs, "MAC"));
        if (strcmp(f, "nb-gratuitous-arp") == 0)
                return add_gratuitous(rs);
        if (nb_fw_add_filter)
                return nb_fw_add_filter(rs, f, vs->v, vs->n);
        return add_legacy(rs, f, vs);
}

static int build(nb_fw_ruleset *rs, char *filters, const struct vars *vs)
{
        char *save = NULL;

        for (char *f = strtok_r(filters, "+", &save); f; f = strtok_r(NULL, "+", &save)) {
                int r = add_one(rs, f, vs);
                if (r == -ENOSYS) {
                        printf("filter %s: not available in this build\n", f);
                        return 4;
                }
                if (r < 0) {
                        fprintf(stderr, "nwfilter-nb-apply: filter %s: %s\n", f, strerror(-r));
                        return 1;
                }
        }
        return 0;
}

static int apply(const char *helper, const char *ifname, const nb_fw_ruleset *rs)
{
        nb_conn *c = NULL;
        nb_batch *b = NULL;
        nb_results *res = NULL;
        int r, ret = 3;

        r = nb_spawn(helper, NULL, &c);
        if (r < 0) {
                fprintf(stderr, "nwfilter-nb-apply: spawn %s: %s %s\n", helper, strerror(-r),
                        nb_last_error());
                goto out;
        }
        b = nb_batch_new();
        if (!b || nb_batch_firewall_apply(b, ifname, ifname, rs, NB_FW_REPLACE) < 0) {
                fprintf(stderr, "nwfilter-nb-apply: cannot build the batch\n");
                ret = 1;
                goto out;
        }
        r = nb_submit(c, b, &res);
        if (r < 0) {
                fprintf(stderr, "nwfilter-nb-apply: submit: %s %s\n", strerror(-r),
                        nb_conn_error(c));
                goto out;
        }
        ret = nb_result_status(res, 0) == 0 ? 0 : 1;
        if (ret)
                fprintf(stderr, "nwfilter-nb-apply: FirewallApply: %s: %s\n",
                        strerror(-nb_result_status(res, 0)), nb_result_message(res, 0));
out:
        nb_results_free(res);
        nb_batch_free(b);
        if (c)
                nb_close(c);
        return ret;
}

int main(int argc, char **argv)
{
        struct vars vs = {0};
        nb_fw_ruleset *rs = NULL;
        int ret;

        if (argc < 4) {
                fprintf(stderr, "usage: nwfilter-nb-apply HELPER IFNAME FILTER[+FILTER...] "
                                "[VAR=V1[,V2...]...]\n");
                return 2;
        }
        for (int i = 4; i < argc; i++)
                if (parse_var(&vs, argv[i]) < 0) {
                        fprintf(stderr, "nwfilter-nb-apply: bad variable %s\n", argv[i]);
                        return 2;
                }
        rs = nb_fw_ruleset_new();
        if (!rs)
                return 1;
        ret = build(rs, argv[3], &vs);
        if (ret == 0)
                ret = apply(argv[1], argv[2], rs);
        nb_fw_ruleset_free(rs);
        return ret;
}
