// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl link create|set|delete|list. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

#include "ctl.h"

/* The outcome of a one-op interface batch. */
static int report_link(struct ctl *c, nb_results *res, const char *verb)
{
        int rc = ctl_op_failed(c, res, 0);

        if (rc)
                return rc;
        if (c->json) {
                json_ok_begin();
                json_kv("ifname", nb_result_ifname(res, 0), false);
                printf(",\"ifindex\":%d", nb_result_ifindex(res, 0));
                json_kv("peer", nb_result_peer_ifname(res, 0), false);
                /* A tap's or macvtap's queues: one fd each, received and
                 * closed when netbrokerctl exits. */
                printf(",\"fds\":%zu}\n", nb_result_fd_count(res, 0));
                return 0;
        }
        printf("%s %s", verb, nb_result_ifname(res, 0));
        if (nb_result_ifindex(res, 0))
                printf(" (ifindex %d)", nb_result_ifindex(res, 0));
        if (nb_result_peer_ifname(res, 0)[0])
                printf(", peer %s", nb_result_peer_ifname(res, 0));
        if (nb_result_fd_count(res, 0) > 1)
                printf(", %zu queues", nb_result_fd_count(res, 0));
        printf("\n");
        return 0;
}

static int submit_one(struct ctl *c, nb_batch *b, const char *verb)
{
        nb_results *res = NULL;
        int rc = ctl_submit(c, b, &res);

        if (rc == 0)
                rc = report_link(c, res, verb);
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
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

struct create_args {
        const char *parent, *mac, *peer, *netns;
        nb_macvlan_mode mode;
        nb_tap_opts *tap;
};

static int create_options(struct ctl *c, int argc, char **argv, struct create_args *a)
{
        static const struct option opts[] = {{"parent", required_argument, NULL, 'p'},
                                             {"mode", required_argument, NULL, 'm'},
                                             {"mac", required_argument, NULL, 'a'},
                                             {"peer", required_argument, NULL, 'P'},
                                             {"peer-netns", required_argument, NULL, 'n'},
                                             {"vnet-hdr", no_argument, NULL, 'v'},
                                             {"queues", required_argument, NULL, 'q'},
                                             {"transient", no_argument, NULL, 't'},
                                             {"owner", required_argument, NULL, 'o'},
                                             {0}};
        int ch;

        opterr = 0;
        optind = 0; /* 0, not 1: glibc then also resets its internal state */
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (ch) {
                case 'p':
                        a->parent = optarg;
                        break;
                case 'm':
                        if (parse_mode(optarg, &a->mode) < 0)
                                return ctl_usage_error(c, "unknown mode '%s'", optarg);
                        break;
                case 'a':
                        a->mac = optarg;
                        break;
                case 'P':
                        a->peer = optarg;
                        break;
                case 'n':
                        a->netns = optarg;
                        break;
                case 'v':
                        a->tap->vnet_hdr = true;
                        break;
                case 'q':
                        if (ctl_parse_uint(optarg, 1, 16, &a->tap->queues) < 0)
                                return ctl_usage_error(c, "--queues takes 1 to 16");
                        break;
                case 't':
                        a->tap->persist = false;
                        break;
                case 'o': {
                        unsigned uid, gid;
                        char *colon = strchr(optarg, ':');
                        if (colon)
                                *colon = '\0';
                        if (ctl_parse_uint(optarg, 0, UINT32_MAX - 1, &uid) < 0 ||
                            (colon && ctl_parse_uint(colon + 1, 0, UINT32_MAX - 1, &gid) < 0))
                                return ctl_usage_error(c, "--owner takes UID or UID:GID");
                        a->tap->set_owner = true;
                        a->tap->uid = uid;
                        a->tap->gid = colon ? gid : uid;
                        break;
                }
                default:
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (argc - optind != 2)
                return ctl_usage_error(c, "needs a KIND and a NAME");
        return 0;
}

static int link_create(struct ctl *c, int argc, char **argv)
{
        nb_tap_opts tap = {.size = sizeof(nb_tap_opts), .persist = true};
        struct create_args a = {.mode = NB_MACVLAN_BRIDGE, .tap = &tap};
        const char *kind, *name;
        nb_batch *b;
        int r, nsfd = -1;

        r = create_options(c, argc, argv, &a);
        if (r)
                return r;
        kind = argv[optind];
        name = argv[optind + 1];
        if (strcmp(kind, "tap") != 0 && strcmp(kind, "macvtap") != 0 &&
            strcmp(kind, "macvlan") != 0 && strcmp(kind, "veth") != 0 &&
            strcmp(kind, "bridge") != 0)
                return ctl_usage_error(c, "unknown kind '%s'", kind);
        if (!a.parent && (strcmp(kind, "macvtap") == 0 || strcmp(kind, "macvlan") == 0))
                return ctl_usage_error(c, "%s needs --parent", kind);
        if (!a.peer && strcmp(kind, "veth") == 0)
                return ctl_usage_error(c, "veth needs --peer");
        if (tap.queues > 1 && strcmp(kind, "tap") != 0 && strcmp(kind, "macvtap") != 0)
                return ctl_usage_error(c, "--queues is for a tap or a macvtap");
        /* A persistent tap of a caller other than root must be its own
         * (the policy refuses one without an owner, or another's): its
         * own uid and gid unless --owner says. */
        if (strcmp(kind, "tap") == 0 && tap.persist && !tap.set_owner && getuid() != 0) {
                tap.set_owner = true;
                tap.uid = getuid();
                tap.gid = getgid();
        }
        if (tap.set_owner && strcmp(kind, "tap") != 0)
                return ctl_usage_error(c, "--owner is for a tap");
        if (a.netns && (nsfd = open(a.netns, O_RDONLY | O_CLOEXEC)) < 0)
                return ctl_fail(c, EXIT_USAGE, errno, "%s: %s", a.netns, strerror(errno));
        b = nb_batch_new();
        if (!b)
                r = -ENOMEM;
        else if (strcmp(kind, "tap") == 0)
                r = nb_batch_tap_create(b, name, &tap);
        else if (strcmp(kind, "macvtap") == 0)
                r = nb_batch_macvtap_create_queues(b, name, a.parent, a.mode, a.mac, tap.vnet_hdr,
                                                   tap.queues);
        else if (strcmp(kind, "macvlan") == 0)
                r = nb_batch_macvlan_create(b, name, a.parent, a.mode, a.mac);
        else if (strcmp(kind, "veth") == 0)
                r = nb_batch_veth_create(b, name, a.peer, nsfd);
        else
                r = nb_batch_bridge_create(b, name);
        if (nsfd >= 0)
                close(nsfd);
        if (r < 0) {
                nb_batch_free(b);
                return r == -EINVAL ? ctl_usage_error(c, "%s %s: bad name or arguments", kind, name)
                                    : ctl_fail(c, EXIT_OP_FAILED, -r, "%s", strerror(-r));
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

        opterr = 0;
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
                        if (ctl_parse_uint(optarg, 68, 65535, &ch_.mtu) < 0)
                                return ctl_usage_error(c, "--mtu takes 68 to 65535");
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
                        return ctl_usage_error(c, "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (argc - optind != 1)
                return ctl_usage_error(c, "needs one interface NAME");
        b = nb_batch_new();
        if (!b || nb_batch_link_set(b, argv[optind], &ch_) < 0) {
                nb_batch_free(b);
                return ctl_bad_input(c, "bad name, MAC or combination of options");
        }
        return submit_one(c, b, "changed");
}

static int link_delete(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;

        if (argc != 2 || argv[1][0] == '-')
                return ctl_usage_error(c, "needs one interface NAME");
        b = nb_batch_new();
        if (!b || nb_batch_link_delete(b, argv[1]) < 0) {
                nb_batch_free(b);
                return ctl_usage_error(c, "bad interface name '%s'", argv[1]);
        }
        return submit_one(c, b, "deleted");
}

static void print_link_json(const nb_link_info *l, bool first)
{
        /* Interface names may hold '"' or '\\': escape them. */
        printf("%s{", first ? "" : ",");
        json_kv("ifname", l->name, true);
        printf(",\"ifindex\":%d,\"kind\":\"%s\"", l->ifindex, nb_link_kind_name(l->kind));
        json_kv("kind_name", l->kind_name, false);
        printf(",\"mac\":\"%s\",\"mtu\":%u,\"up\":%s", l->mac, l->mtu, l->up ? "true" : "false");
        json_kv("master", l->master, false);
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

static void print_links(const struct ctl *c, const nb_results *res)
{
        size_t n = nb_result_link_count(res, 0);
        nb_link_info l = NB_LINK_INFO_INIT;

        if (c->json)
                fputs("{\"ok\":true,\"links\":[", stdout);
        else
                printf("%-16s %6s  %-8s %-4s %5s  %-17s %-16s %-6s %s\n", "NAME", "INDEX", "KIND",
                       "STATE", "MTU", "MAC", "MASTER", "OWNER", "MADE");
        for (size_t k = 0; k < n && nb_result_link_at(res, 0, k, &l) == 0; k++) {
                if (c->json)
                        print_link_json(&l, k == 0);
                else
                        print_link_text(&l);
        }
        if (c->json)
                puts("]}");
}

/* The helper reads the links (a non-root caller sees its own only). */
static int link_list(struct ctl *c, int argc, char **argv)
{
        nb_batch *b;
        nb_results *res = NULL;
        int rc;

        if (argc > 2 || (argc == 2 && argv[1][0] == '-'))
                return ctl_usage_error(c, "takes at most one interface NAME");
        b = nb_batch_new();
        if (!b || nb_batch_link_list(b, argc == 2 ? argv[1] : NULL) < 0) {
                nb_batch_free(b);
                return ctl_usage_error(c, "bad interface name '%s'", argv[1]);
        }
        rc = ctl_submit(c, b, &res);
        if (rc == 0 && !(rc = ctl_op_failed(c, res, 0)))
                print_links(c, res);
        nb_results_free(res);
        nb_batch_free(b);
        return rc;
}

static const struct command link_sub[] = {
        {
                .name = "create",
                .fn = link_create,
                .args = "KIND NAME [OPTIONS]",
                .summary = "create an interface (NAME may be a template such as vnet%d)",
                .details =
                        "  tap NAME [--vnet-hdr] [--queues N] [--transient] [--owner UID[:GID]]\n"
                        "  macvtap|macvlan NAME --parent DEV "
                        "[--mode bridge|vepa|private|passthru]\n"
                        "                  [--mac MAC] [--vnet-hdr] [--queues N (macvtap)]\n"
                        "  veth NAME --peer NAME [--peer-netns PATH]\n"
                        "  bridge NAME\n",
                .example = "tap nbctl%d",
        },
        {
                .name = "set",
                .fn = link_set,
                .args = "NAME [--up | --down] [--mtu N] [--mac MAC] [--master BR | --nomaster]",
                .summary = "change an interface",
                .example = "nbctl0 --up",
        },
        {
                .name = "delete",
                .fn = link_delete,
                .args = "NAME",
                .summary = "delete an interface",
                .example = "nbctl0",
        },
        {
                .name = "list",
                .fn = link_list,
                .args = "[NAME]",
                .summary = "interfaces, as the helper reads them",
                .example = "",
        },
};

const struct command ctl_cmd_link = {
        .name = "link",
        .sub = link_sub,
        .n_sub = sizeof(link_sub) / sizeof(*link_sub),
        .args = "",
        .summary = "interfaces: create, set, delete, list",
};
