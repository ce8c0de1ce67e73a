// SPDX-License-Identifier: LGPL-2.1-or-later
/* fairness's floor for R2: the kernel's own deletion of the same number of
 * taps, one RTM_DELLINK of a link group, which is what the helper sends for
 * a run of LinkDeletes (helper/link.c, nbd_link_delete_group). The taps
 * are put in the group first, untimed, one RTM_NEWLINK each; only the
 * deletion and its ack are timed. What R2 adds on top (the request, each
 * device's doom, the group check, the clean-up after) is what R2/D0 shows.
 * Raw libmnl: libnl deletes a link only by index or name. */
#include "bench.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

/* The group of the floor's taps: "NB" and the bench's pid. The bench runs
 * in a network namespace of its own; the helper's runs use "NL"
 * (helper/op_link.c), so the two never share a group. */
#define GROUP_BASE 0x4e420000u

/* Send nlh on nl and read its ack: 0 or -errno. */
static int request(struct mnl_socket *nl, struct nlmsghdr *nlh)
{
        char buf[MNL_SOCKET_BUFFER_SIZE] __attribute__((aligned(NLMSG_ALIGNTO)));
        uint32_t seq = nlh->nlmsg_seq, port = mnl_socket_get_portid(nl);
        ssize_t n;
        int r;

        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        do {
                n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                errno = 0;
                r = mnl_cb_run(buf, (size_t)n, seq, port, NULL, NULL);
        } while (r == MNL_CB_OK);
        return r == MNL_CB_STOP ? 0 : errno ? -errno : -EPROTO;
}

/* RTM_NEWLINK putting interface `name` in `group`, or RTM_DELLINK of the
 * whole group (name NULL), as request `seq`. */
static struct nlmsghdr *link_msg(char *buf, const char *name, uint32_t group, uint32_t seq)
{
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        struct ifinfomsg *ifi;

        nlh->nlmsg_type = name ? RTM_NEWLINK : RTM_DELLINK;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        nlh->nlmsg_seq = seq;
        ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        if (name)
                mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        mnl_attr_put_u32(nlh, IFLA_GROUP, group);
        return nlh;
}

int bench_group_delete(const char *prefix, unsigned n, double *ret_us)
{
        char buf[MNL_SOCKET_BUFFER_SIZE] __attribute__((aligned(NLMSG_ALIGNTO)));
        char name[IF_NAMESIZE];
        uint32_t group = GROUP_BASE | ((uint32_t)getpid() & 0xffffu), seq = 1;
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        uint64_t t0;
        int r = nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == 0 ? 0 : -errno;

        if (r < 0)
                bench_log("netbroker-bench: fairness: D0: cannot open an rtnetlink socket: %s\n",
                          strerror(-r));
        /* A tap that fails to move stops the floor; those moved before it
         * stay in the group, and go with the bench's namespace. */
        for (unsigned i = 0; i < n && r == 0; i++) {
                snprintf(name, sizeof(name), "%s%u", prefix, i);
                r = request(nl, link_msg(buf, name, group, seq++));
                if (r < 0)
                        bench_log("netbroker-bench: fairness: D0: cannot put %s in group %#x: "
                                  "%s\n",
                                  name, (unsigned)group, strerror(-r));
        }
        if (r == 0) {
                struct nlmsghdr *nlh = link_msg(buf, NULL, group, seq++);
                t0 = bench_now_ns();
                r = request(nl, nlh);
                if (r == 0)
                        *ret_us = (double)(bench_now_ns() - t0) / 1000.0;
                else
                        bench_log("netbroker-bench: fairness: D0: cannot delete group %#x: %s\n",
                                  (unsigned)group, strerror(-r));
        }
        if (nl)
                mnl_socket_close(nl);
        return r;
}
