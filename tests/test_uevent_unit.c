// SPDX-License-Identifier: LGPL-2.1-or-later
/* The uevent parser (helper/uevent.c) on datagrams as the kernel writes
 * them, and on ones it would not: nothing half-read is taken for a device
 * number. */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "tests_unit.h"
#include "uevent.h"

#define ADD_TAP4                                                                                   \
        "add@/devices/virtual/net/mvt0/macvtap/tap4\0ACTION=add\0"                                 \
        "DEVPATH=/devices/virtual/net/mvt0/macvtap/tap4\0SUBSYSTEM=macvtap\0MAJOR=246\0MINOR=1\0"  \
        "DEVNAME=tap4\0SEQNUM=7253089"

/* sizeof a literal counts its final NUL: the datagram's last byte. */
START_TEST(test_a_macvtaps_add_uevent_gives_its_device_number)
{
        static const char msg[] = ADD_TAP4;
        struct nbd_uevent e;

        ck_assert_int_eq(nbd_uevent_parse(msg, sizeof(msg), &e), 0);
        ck_assert(e.add && !e.remove && e.has_devt);
        ck_assert_str_eq(e.devpath, "/devices/virtual/net/mvt0/macvtap/tap4");
        ck_assert_str_eq(e.subsystem, "macvtap");
        ck_assert_uint_eq(major(e.devt), 246);
        ck_assert_uint_eq(minor(e.devt), 1);
}
END_TEST

START_TEST(test_a_uevent_without_a_device_number_or_of_another_action_says_so)
{
        static const char queue[] = "add@/devices/virtual/net/p0/queues/rx-0\0ACTION=add\0"
                                    "DEVPATH=/devices/virtual/net/p0/queues/rx-0\0"
                                    "SUBSYSTEM=queues\0SEQNUM=7";
        static const char gone[] = "remove@/devices/virtual/net/mvt0/macvtap/tap4\0ACTION=remove\0"
                                   "DEVPATH=/devices/virtual/net/mvt0/macvtap/tap4\0"
                                   "SUBSYSTEM=macvtap\0MAJOR=246\0MINOR=1";
        static const char moved[] = "move@/devices/virtual/net/b\0ACTION=move\0"
                                    "DEVPATH=/devices/virtual/net/b\0SUBSYSTEM=net";
        struct nbd_uevent e;

        ck_assert_int_eq(nbd_uevent_parse(queue, sizeof(queue), &e), 0);
        ck_assert(e.add && !e.has_devt);
        ck_assert_int_eq(nbd_uevent_parse(gone, sizeof(gone), &e), 0);
        ck_assert(e.remove && !e.add && e.has_devt);
        ck_assert_int_eq(nbd_uevent_parse(moved, sizeof(moved), &e), 0);
        ck_assert(!e.add && !e.remove);
}
END_TEST

/* Each is refused whole, and the output is left as it was. */
START_TEST(test_a_datagram_that_is_no_whole_uevent_is_refused)
{
        static const struct {
                const char *msg;
                size_t len;
                const char *why;
        } bad[] = {
#define BAD(s, why) {s, sizeof(s), why}
                BAD("libudev\0\xfe\xed\xca\xfe", "udev's own format: no '@' header"),
                BAD("add@/x\0DEVPATH=/x\0SUBSYSTEM=macvtap\0MAJOR=1\0MINOR=3", "no ACTION"),
                BAD("add@/x\0ACTION=add\0SUBSYSTEM=macvtap\0MAJOR=1\0MINOR=3", "no DEVPATH"),
                BAD("add@/x\0ACTION=add\0DEVPATH=/x\0MAJOR=1\0MINOR=3", "no SUBSYSTEM"),
                BAD("add@/x\0ACTION=add\0DEVPATH=/x\0SUBSYSTEM=macvtap\0MAJOR=1", "MAJOR only"),
                BAD("add@/x\0ACTION=add\0DEVPATH=/x\0SUBSYSTEM=macvtap\0MINOR=3", "MINOR only"),
                BAD("add@/x\0ACTION=add\0DEVPATH=/x\0SUBSYSTEM=macvtap\0MAJOR=-1\0MINOR=3",
                    "a negative MAJOR"),
                BAD("add@/x\0ACTION=add\0DEVPATH=/x\0SUBSYSTEM=macvtap\0MAJOR=1x\0MINOR=3",
                    "a MAJOR that is not a number"),
                BAD("add@/x\0ACTION=add\0DEVPATH=/x\0SUBSYSTEM=macvtap\0MAJOR=1\0"
                    "MINOR=99999999999",
                    "a MINOR past 32 bits"),
                BAD("", "empty"),
#undef BAD
        };
        static const char cut[] = ADD_TAP4;
        struct nbd_uevent e = {.devpath = "untouched"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(nbd_uevent_parse(bad[i].msg, bad[i].len, &e) == -EINVAL, "%s",
                              bad[i].why);
        /* Cut short inside its last field: no terminating NUL. */
        ck_assert_int_eq(nbd_uevent_parse(cut, sizeof(cut) - 3, &e), -EINVAL);
        ck_assert_int_eq(nbd_uevent_parse(cut, 0, &e), -EINVAL);
        ck_assert_str_eq(e.devpath, "untouched");
}
END_TEST

/* /proc/devices as Linux 6.18 writes it (abridged): a name among the
 * character devices only, the whole name, and nothing when it is absent. */
START_TEST(test_the_macvtap_major_is_read_from_the_character_devices)
{
        static const char devices[] = "Character devices:\n  1 mem\n  5 /dev/tty\n"
                                      "246 macvtapx\n247 macvtap\n248 tap\n\n"
                                      "Block devices:\n  7 loop\n249 macvtap2\n";
        unsigned major = 99;

        ck_assert_int_eq(nbd_chrdev_major(devices, "macvtap", &major), 0);
        ck_assert_uint_eq(major, 247);
        ck_assert_int_eq(nbd_chrdev_major(devices, "mem", &major), 0);
        ck_assert_uint_eq(major, 1);
        ck_assert_int_eq(nbd_chrdev_major(devices, "loop", &major), -ENOENT);
        ck_assert_int_eq(nbd_chrdev_major(devices, "macvtap2", &major), -ENOENT);
        ck_assert_int_eq(nbd_chrdev_major(devices, "macvta", &major), -ENOENT);
        ck_assert_int_eq(nbd_chrdev_major("Character devices:\n  1 mem", "macvtap", &major),
                         -ENOENT);
        ck_assert_int_eq(nbd_chrdev_major("", "macvtap", &major), -ENOENT);
        ck_assert_uint_eq(major, 1);
}
END_TEST

TCase *uevent_unit_tcase(void)
{
        TCase *tc = tcase_create("uevent");

        tcase_add_test(tc, test_a_macvtaps_add_uevent_gives_its_device_number);
        tcase_add_test(tc, test_a_uevent_without_a_device_number_or_of_another_action_says_so);
        tcase_add_test(tc, test_a_datagram_that_is_no_whole_uevent_is_refused);
        tcase_add_test(tc, test_the_macvtap_major_is_read_from_the_character_devices);
        return tc;
}
