// SPDX-License-Identifier: LGPL-2.1-or-later
/* A macvtap's character device: the helper takes its device number from
 * the kernel's "add" uevent of that device (helper/uevent.h), and from
 * sysfs only when that uevent may have been lost. What it opens must be
 * the macvtap it made, whatever else a process of the namespace sends to
 * the uevent group. Every test runs in a network namespace of its own with
 * a veth pair p0/p1, the macvtaps' parent. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

/* A fresh namespace with p0/p1 and a helper; hold (a fresh path, absent
 * for now) NULL, or what holds the helper between a macvtap's create and
 * the look-up of its device number while it exists. */
static nb_conn *start(struct tu_helper *h, char *hold)
{
        nb_conn *c;

        tu_private_netns();
        tu_veth("p0", "p1");
        if (hold) {
                int fd = mkstemp(hold);
                ck_assert_int_ge(fd, 0);
                close(fd);
                unlink(hold);
                ck_assert_int_eq(setenv("NETBROKERD_TEST_HOLD_MACVTAP_MADE", hold, 1), 0);
        }
        tu_helper_start(h, TU_ALLOW);
        unsetenv("NETBROKERD_TEST_HOLD_MACVTAP_MADE");
        ck_assert_int_eq(nb_connect(h->sock, &c), 0);
        return c;
}

/* The device number of name's character device, as the helper's own sysfs
 * (which shows this namespace) says. */
static dev_t sysfs_devt(pid_t helper, const char *name)
{
        char path[256];
        unsigned maj, min;
        const char *ifindex = tu_link_get(name, "ifindex");

        ck_assert_ptr_nonnull(ifindex);
        snprintf(path, sizeof(path), "/proc/%d/root/sys/class/net/%s/macvtap/tap%s/dev",
                 (int)helper, name, ifindex);
        ck_assert_msg(sscanf(tu_read_file(path), "%u:%u", &maj, &min) == 2, "%s", path);
        return makedev(maj, min);
}

/* fd is an open of name's character device: the tap driver says so, and
 * its device number is the one sysfs gives. */
static void assert_fd_is_macvtap(int fd, pid_t helper, const char *name)
{
        struct ifreq ifr = {0};
        struct stat st;

        ck_assert_int_ge(fd, 0);
        ck_assert_msg(ioctl(fd, TUNGETIFF, &ifr) == 0, "TUNGETIFF: %s", strerror(errno));
        ck_assert_msg(strcmp(ifr.ifr_name, name) == 0, "the fd for %s is %s's", name, ifr.ifr_name);
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISCHR(st.st_mode));
        ck_assert_msg(st.st_rdev == sysfs_devt(helper, name), "the fd for %s is device %u:%u", name,
                      major(st.st_rdev), minor(st.st_rdev));
}

/* Op i of res made name: its fds (queues of them) are name's device. */
static void assert_made(nb_results *res, size_t i, pid_t helper, const char *name, unsigned queues)
{
        tu_assert_status(res, i, 0, NULL);
        ck_assert_str_eq(nb_result_ifname(res, i), name);
        ck_assert_uint_eq(nb_result_fd_count(res, i), queues);
        for (unsigned q = 0; q < queues; q++) {
                int fd = nb_result_take_fd(res, i, q);
                assert_fd_is_macvtap(fd, helper, name);
                close(fd);
        }
}

/* Three macvtaps (one with two queues) and a tap in one batch: every fd is
 * its macvtap's device, and no device number was read from sysfs. With
 * sysfs only, macvtap_sysfs_reads counts 3. */
START_TEST(test_a_macvtaps_device_number_comes_from_its_uevent_not_sysfs)
{
        struct tu_helper h;
        nb_conn *c = start(&h, NULL);
        nb_batch *b = nb_batch_new();
        nb_results *res;

        nb_batch_macvtap_create(b, "mv%d", "p0", NB_MACVLAN_BRIDGE, NULL, true);
        nb_batch_tap_create(b, "vnet%d", NULL);
        nb_batch_macvtap_create_queues(b, "mv%d", "p0", NB_MACVLAN_BRIDGE, NULL, true, 2);
        nb_batch_macvtap_create(b, "mv%d", "p0", NB_MACVLAN_VEPA, NULL, false);
        res = tu_submit_ok(c, b);
        assert_made(res, 0, h.pid, "mv0", 1);
        assert_made(res, 2, h.pid, "mv1", 2);
        assert_made(res, 3, h.pid, "mv2", 1);
        ck_assert_uint_eq(tu_stat(c, "macvtap_sysfs_reads"), 0);
        nb_results_free(res);
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST

#ifdef NB_TEST_HOOKS
/* A client that makes one macvtap, name, in a thread of its own. */
struct maker {
        const char *sock, *name;
        nb_results *res;
        int r;
        atomic_bool done;
};

static void *make_run(void *p)
{
        struct maker *m = p;
        nb_batch *b = nb_batch_new();
        nb_conn *c;

        m->r = nb_connect(m->sock, &c);
        nb_batch_macvtap_create(b, m->name, "p0", NB_MACVLAN_BRIDGE, NULL, true);
        if (m->r == 0) {
                m->r = nb_submit(c, b, &m->res);
                nb_close(c);
        }
        nb_batch_free(b);
        atomic_store(&m->done, true);
        return NULL;
}

/* m's macvtap is made and the helper waits before it looks up its device
 * number (hold exists). */
static void make_held(const char *hold, struct maker *m, pthread_t *t)
{
        char held[256];
        int fd = open(hold, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        close(fd);
        snprintf(held, sizeof(held), "%s.held", hold);
        pthread_create(t, NULL, make_run, m);
        for (int i = 0; i < 12000 && access(held, F_OK) != 0; i++) {
                ck_assert_msg(!atomic_load(&m->done), "%s was answered before it was held",
                              m->name);
                usleep(5000);
        }
        ck_assert_msg(access(held, F_OK) == 0, "%s was never held after its create", m->name);
        ck_assert(tu_link_exists(m->name));
}

static void let_go(const char *hold, struct maker *m, pthread_t t)
{
        unlink(hold);
        pthread_join(t, NULL);
        ck_assert_int_eq(m->r, 0);
}

/* While the helper is held between a macvtap's create and its look-up,
 * 150 veth pairs come and go: their 3,000 uevents overflow the helper's
 * uevent socket (its drops count, as /proc/net/netlink shows), so what it
 * reads there is not the whole story. The macvtap's own uevent is still
 * queued, but the helper reads sysfs: the fd is the macvtap's, and
 * macvtap_sysfs_reads counts 1. The next macvtap finds its uevent again.
 * Trusting the queue after a loss, the count stays 0. */
START_TEST(test_a_macvtap_whose_uevents_overflowed_is_found_through_sysfs)
{
        char hold[] = "/tmp/nbtest-hold-XXXXXX";
        struct maker m = {.name = "mv7"};
        struct tu_helper h;
        nb_conn *c = start(&h, hold);
        nb_batch *b;
        nb_results *res;
        pthread_t t;

        m.sock = h.sock;
        make_held(hold, &m, &t);
        free(tu_sh("for i in $(seq 150); do echo link add fl$i type veth peer name fm$i; done "
                   "> /tmp/nbtest-veths-$$ && ip -batch /tmp/nbtest-veths-$$ && "
                   "for i in $(seq 150); do echo link del fl$i; done > /tmp/nbtest-veths-$$ && "
                   "ip -batch /tmp/nbtest-veths-$$; rm -f /tmp/nbtest-veths-$$"));
        ck_assert_msg(tu_netlink_drops(h.pid, NETLINK_KOBJECT_UEVENT) > 0,
                      "150 veth pairs did not overflow the helper's uevent socket");
        let_go(hold, &m, t);
        assert_made(m.res, 0, h.pid, "mv7", 1);
        nb_results_free(m.res);
        ck_assert_uint_eq(tu_stat(c, "macvtap_sysfs_reads"), 1);

        b = nb_batch_new();
        nb_batch_macvtap_create(b, "mv8", "p0", NB_MACVLAN_BRIDGE, NULL, true);
        res = tu_submit_ok(c, b);
        assert_made(res, 0, h.pid, "mv8", 1);
        ck_assert_uint_eq(tu_stat(c, "macvtap_sysfs_reads"), 1);
        nb_results_free(res);
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST

/* A uevent "add" of devpath with subsystem macvtap and device number devt:
 * the datagram. */
static size_t forged_uevent(char *buf, size_t size, const char *devpath, dev_t devt)
{
        int n = snprintf(buf, size,
                         "add@%s%cACTION=add%cDEVPATH=%s%cSUBSYSTEM=macvtap%cMAJOR=%u%cMINOR=%u%c"
                         "DEVNAME=forged%cSEQNUM=1%c",
                         devpath, 0, 0, devpath, 0, 0, major(devt), 0, minor(devt), 0, 0, 0);

        ck_assert(n > 0 && (size_t)n < size);
        return (size_t)n;
}

/* Sent to the uevent group from this process's own port, as anyone with
 * CAP_NET_ADMIN here may. */
static void broadcast_uevent(const char *devpath, dev_t devt)
{
        struct sockaddr_nl to = {.nl_family = AF_NETLINK, .nl_groups = 1};
        char buf[512];
        size_t n = forged_uevent(buf, sizeof(buf), devpath, devt);
        int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);

        ck_assert_int_ge(fd, 0);
        ck_assert_msg(sendto(fd, buf, n, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)n,
                      "sending to the uevent group: %s", strerror(errno));
        close(fd);
}

/* Handed to the kernel, which broadcasts it from port 0 as if it were its
 * own (uevent_net_rcv_skb(), Linux 4.18; CAP_SYS_ADMIN over the namespace).
 * Returns the kernel's answer: 0, or -errno (-EPERM, -EOPNOTSUPP...). */
static int inject_uevent(const char *devpath, dev_t devt)
{
        struct sockaddr_nl to = {.nl_family = AF_NETLINK};
        struct {
                struct nlmsghdr h;
                char data[512];
        } req = {0};
        struct {
                struct nlmsghdr h;
                struct nlmsgerr e;
        } ack;
        size_t n = forged_uevent(req.data, sizeof(req.data), devpath, devt);
        int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
        ssize_t got;

        ck_assert_int_ge(fd, 0);
        /* Types below NLMSG_MIN_TYPE are acknowledged and never read. */
        req.h = (struct nlmsghdr){.nlmsg_len = (uint32_t)(NLMSG_HDRLEN + n),
                                  .nlmsg_type = NLMSG_MIN_TYPE,
                                  .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK,
                                  .nlmsg_seq = 1};
        ck_assert(sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&to, sizeof(to)) ==
                  (ssize_t)req.h.nlmsg_len);
        got = recv(fd, &ack, sizeof(ack), 0);
        close(fd);
        if (got < 0)
                return -errno;
        ck_assert(got >= (ssize_t)sizeof(ack) && ack.h.nlmsg_type == NLMSG_ERROR);
        return ack.e.error;
}

/* Held after mv1's create, the test says in the uevent group that mv1's
 * device is mv0's, twice: from its own port, and through the kernel (from
 * port 0, with the test's pid). Both come after mv1's real uevent, so a
 * helper that took them would open mv0's device for mv1 (and attach a
 * queue to a macvtap that is not the op's). Its fd is mv1's, from mv1's
 * own uevent. */
START_TEST(test_a_uevent_that_a_process_sends_does_not_choose_the_device)
{
        char hold[] = "/tmp/nbtest-hold-XXXXXX", devpath[128];
        struct maker m = {.name = "mv1"};
        struct tu_helper h;
        nb_conn *c = start(&h, hold);
        nb_batch *b = nb_batch_new();
        nb_results *res;
        struct stat st;
        pthread_t t;
        int fd, r;

        nb_batch_macvtap_create(b, "mv0", "p0", NB_MACVLAN_BRIDGE, NULL, true);
        res = tu_submit_ok(c, b);
        fd = nb_result_take_fd(res, 0, 0);
        assert_fd_is_macvtap(fd, h.pid, "mv0");
        ck_assert_int_eq(fstat(fd, &st), 0);

        m.sock = h.sock;
        make_held(hold, &m, &t);
        snprintf(devpath, sizeof(devpath), "/devices/virtual/net/mv1/macvtap/tap%s",
                 tu_link_get("mv1", "ifindex"));
        broadcast_uevent(devpath, st.st_rdev);
        r = inject_uevent(devpath, st.st_rdev);
        if (r < 0)
                printf("# this kernel does not broadcast a process's uevent (%s): only the "
                       "one sent from the test's own port is tested\n",
                       strerror(-r));
        let_go(hold, &m, t);
        assert_made(m.res, 0, h.pid, "mv1", 1);
        ck_assert_uint_eq(tu_stat(c, "macvtap_sysfs_reads"), 0);
        assert_fd_is_macvtap(fd, h.pid, "mv0");
        close(fd);
        nb_results_free(m.res);
        nb_results_free(res);
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST
#endif

Suite *macvtap_devt_suite(void)
{
        Suite *s = suite_create("macvtap-devt");
        TCase *tc = tcase_create("macvtap-devt");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_a_macvtaps_device_number_comes_from_its_uevent_not_sysfs);
#ifdef NB_TEST_HOOKS
        tcase_add_test(tc, test_a_macvtap_whose_uevents_overflowed_is_found_through_sysfs);
        tcase_add_test(tc, test_a_uevent_that_a_process_sends_does_not_choose_the_device);
#endif
        suite_add_tcase(s, tc);
        return s;
}
