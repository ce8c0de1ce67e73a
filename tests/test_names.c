// SPDX-License-Identifier: LGPL-2.1-or-later
/* The helper's view of the namespace's names as a process (test-helper,
 * suite "names"): what it takes from the link notifications. */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests.h"
#include "testutil.h"

/* The suffixes the helper has in use for prefix, as "0 1 2". */
static void names_of(nb_conn *c, const char *prefix, char *out, size_t size)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;

        out[0] = '\0';
        ck_assert_int_eq(nb_batch_names_dump(b), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        for (size_t k = 0; k < nb_result_names_count(res, 0); k++) {
                const char *p;
                const uint32_t *used;
                size_t n_used;
                unsigned cursor;
                ck_assert_int_eq(nb_result_names_at(res, 0, k, &p, &used, &n_used, &cursor), 0);
                for (size_t i = 0; strcmp(p, prefix) == 0 && i < n_used; i++)
                        snprintf(out + strlen(out), size - strlen(out), "%s%u", i ? " " : "",
                                 used[i]);
        }
        nb_results_free(res);
        nb_batch_free(b);
}

/* The port of the one rtnetlink socket of this namespace subscribed to
 * RTNLGRP_LINK: the helper's monitor (/proc/net/netlink shows this
 * namespace's sockets only). */
static unsigned link_monitor_port(void)
{
        FILE *f = fopen("/proc/net/netlink", "re");
        char line[256];
        unsigned port = 0, found = 0;

        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f)) {
                unsigned long long sk;
                unsigned eth, pid, groups;
                if (sscanf(line, "%llx %u %u %x", &sk, &eth, &pid, &groups) == 4 &&
                    eth == NETLINK_ROUTE && groups == 1u << (RTNLGRP_LINK - 1)) {
                        port = pid;
                        found++;
                }
        }
        fclose(f);
        ck_assert_uint_eq(found, 1);
        return port;
}

/* Any process of the namespace may send a datagram to the monitor's port:
 * an RTM_NEWLINK that did not come from the kernel names no interface. */
START_TEST(test_link_notification_not_from_the_kernel_is_ignored)
{
        struct {
                struct nlmsghdr h;
                struct ifinfomsg ifi;
                struct rtattr name_attr;
                char name[8];
        } msg = {
                .h = {.nlmsg_len = sizeof(msg), .nlmsg_type = RTM_NEWLINK},
                .ifi = {.ifi_family = AF_UNSPEC, .ifi_index = 4242},
                .name_attr = {.rta_len = RTA_LENGTH(sizeof(msg.name)), .rta_type = IFLA_IFNAME},
                .name = "vnet77",
        };
        struct sockaddr_nl to = {.nl_family = AF_NETLINK};
        nb_conn *c;
        nb_batch *b;
        nb_results *res = NULL;
        char used[64];
        int fd;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        to.nl_pid = link_monitor_port();
        fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(sendto(fd, &msg, sizeof(msg), 0, (struct sockaddr *)&to, sizeof(to)),
                         (ssize_t)sizeof(msg));
        close(fd);
        names_of(c, "vnet", used, sizeof(used));
        ck_assert_str_eq(used, "");
        /* What the kernel says still counts: a tap the helper makes. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_tap_create(b, "vnet5", NULL), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        names_of(c, "vnet", used, sizeof(used)); /* while its fd keeps it */
        ck_assert_str_eq(used, "5");
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
}
END_TEST

Suite *names_suite(void)
{
        Suite *s = suite_create("names");
        TCase *notify = tcase_create("names-notify");

        tcase_set_timeout(notify, 60);
        tcase_add_test(notify, test_link_notification_not_from_the_kernel_is_ignored);
        suite_add_tcase(s, notify);
        return s;
}
