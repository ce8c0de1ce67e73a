// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl events: wait for the helper's events (a table of its deleted
 * behind its back) and print each, for an operator watching a host or a
 * script that re-applies its policy when one comes. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

#define MAX_KEPT 64 /* events kept for --json's one object */

struct heard {
        const struct ctl *c;
        unsigned n;
        char kept[MAX_KEPT][80];
};

static const char *family_name(int family)
{
        return family == 1 ? "inet" : family == 5 ? "netdev" : "other";
}

static void on_event(nb_conn *conn, const nb_event *ev, void *opaque)
{
        struct heard *h = opaque;

        (void)conn;
        if (ev->kind != NB_EVENT_TABLE_DELETED)
                return;
        if (!h->c->json) {
                printf("table %s %s deleted\n", family_name(ev->family), ev->table);
                fflush(stdout);
        } else if (h->n < MAX_KEPT) {
                snprintf(h->kept[h->n], sizeof(h->kept[h->n]), "%s %s", family_name(ev->family),
                         ev->table);
        }
        h->n++;
}

static int64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The helper still answers: a Ping (events come on a connection that
 * works; a lost one says nothing by itself). */
static int still_there(struct ctl *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int r = b ? nb_batch_ping(b) : -ENOMEM;

        if (r == 0)
                r = nb_submit_timeout(c->conn, b, 5000, &res);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

static void print_json(const struct heard *h)
{
        json_ok_begin();
        printf(",\"events\":[");
        for (unsigned i = 0; i < h->n && i < MAX_KEPT; i++) {
                char *sp = strchr(h->kept[i], ' ');
                *sp = '\0';
                printf("%s{\"kind\":\"table_deleted\",\"family\":", i ? "," : "");
                json_str(h->kept[i]);
                printf(",\"table\":");
                json_str(sp + 1);
                printf("}");
                *sp = ' ';
        }
        printf("],\"count\":%u}\n", h->n);
}

static int cmd_events(struct ctl *c, int argc, char **argv)
{
        static const struct option opts[] = {{"count", required_argument, NULL, 'n'},
                                             {"timeout", required_argument, NULL, 't'},
                                             {0}};
        struct heard *h = calloc(1, sizeof(*h));
        unsigned count = 0, timeout = 0;
        int64_t end;
        int ch, rc;

        if (!h)
                return ctl_fail(c, EXIT_OP_FAILED, ENOMEM, "out of memory");
        h->c = c;
        opterr = 0;
        optind = 0;
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (ch == 'n' && ctl_parse_uint(optarg, 1, UINT32_MAX, &count) == 0)
                        continue;
                if (ch == 't' && ctl_parse_uint(optarg, 0, UINT32_MAX, &timeout) == 0)
                        continue;
                free(h);
                return ctl_usage_error(c, "bad option '%s'", argv[optind - 1]);
        }
        if (optind != argc) {
                free(h);
                return ctl_usage_error(c, "takes no arguments but --count and --timeout");
        }
        rc = ctl_open(c);
        if (rc == 0 && !nb_conn_has_feature(c->conn, "events"))
                rc = ctl_fail(c, EXIT_OP_FAILED, EOPNOTSUPP, "this helper sends no events");
        if (rc == 0 && nb_conn_on_event(c->conn, on_event, h) < 0)
                rc = ctl_fail(c, EXIT_OP_FAILED, EINVAL, "cannot listen for events");
        end = timeout ? now_ms() + timeout : INT64_MAX;
        while (rc == 0 && (!count || h->n < count) && now_ms() < end) {
                int64_t left = end - now_ms();
                struct pollfd p = {.fd = nb_conn_fd(c->conn), .events = POLLIN};
                int r = poll(&p, 1, (int)(left < 1000 ? left : 1000));
                if (r > 0)
                        nb_conn_dispatch(c->conn);
                else if (r == 0 && (r = still_there(c)) < 0)
                        rc = ctl_fail(c, EXIT_UNREACHABLE, -r, "the helper went away: %s",
                                      nb_conn_error(c->conn));
        }
        if (rc == 0 && c->json)
                print_json(h);
        free(h);
        return rc;
}

const struct command ctl_cmd_events = {
        .name = "events",
        .fn = cmd_events,
        .args = "[--count N] [--timeout MS]",
        .summary = "print the helper's events as they come (a table deleted behind its back)",
        .details = "  --count N     stop after N events\n"
                   "  --timeout MS  stop after MS milliseconds (0, the default: none)\n"
                   "Each event is a line \"table FAMILY NAME deleted\" (with --json, one\n"
                   "object at the end). Another process deleted one of the helper's tables\n"
                   "(nft flush ruleset, a firewall reload): what the daemon installed there\n"
                   "is gone until it applies it again.\n",
        .example = "--timeout 10",
};
