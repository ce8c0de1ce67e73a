// SPDX-License-Identifier: LGPL-2.1-or-later
/* The kernel's uevents, read for one thing: the device number of the
 * character device a macvtap gets when it is made.
 *
 * Without udev the number is in sysfs (/sys/class/net/NAME/macvtap/tapN/dev),
 * but every component of that path is new for a new macvtap, and kernfs
 * makes a dentry and an inode for each on the first look-up: 25 us of a
 * macvtap's 40 us past its create (issue 14's names floor). The kernel
 * also says the number in the "add" uevent of that very device, which it
 * sends to the device's network namespace before the RTM_NEWLINK is
 * acknowledged: a socket in NETLINK_KOBJECT_UEVENT's group 1 already holds
 * it when the create returns, and one recvmmsg() reads it.
 *
 * Only the kernel's datagrams count: sent from port 0, with no process's
 * credentials (SCM_CREDENTIALS pid 0), and the number must be of the
 * character devices the kernel lists as "macvtap" (link.c checks). A process of the namespace with
 * CAP_NET_ADMIN may send to the group itself (from its own port), and one
 * with CAP_SYS_ADMIN over it may have the kernel send what it wrote (from
 * port 0, with its pid); a forged number would open another device. Anything that makes the answer
 * uncertain (uevents lost to a full socket, one too long to read) makes
 * the look-up fail, and the caller reads sysfs as before. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* One uevent's fields that matter here, pointing into the datagram. */
struct nbd_uevent {
        bool add, remove; /* ACTION=add / ACTION=remove; both false: another action */
        const char *devpath; /* DEVPATH, without /sys */
        const char *subsystem;
        bool has_devt;
        dev_t devt; /* MAJOR and MINOR, when has_devt */
};

/* Parse one kernel uevent datagram ("ACTION@DEVPATH\0KEY=VALUE\0..."):
 * 0, or -EINVAL when it is not one (no '@' header, no ACTION, DEVPATH or
 * SUBSYSTEM, a bad MAJOR/MINOR, no terminating NUL). Pure; *ret untouched
 * on failure. */
int nbd_uevent_parse(const char *buf, size_t len, struct nbd_uevent *ret);

struct nbd_uevents;

/* A non-blocking socket in the kernel's uevent group, in this network
 * namespace: one fd while it lives. */
int nbd_uevents_open(struct nbd_uevents **ret);
void nbd_uevents_close(struct nbd_uevents *u);
int nbd_uevents_fd(const struct nbd_uevents *u);

/* Read every queued uevent (at most 1,024: a flood makes the answer
 * unknown). If suffix is not NULL, *ret_devt is the device
 * number of the last device added whose DEVPATH ends in suffix (a '/' and
 * the rest of the path) and of subsystem, with no removal of it after.
 * 0; -ENOENT: no such uevent; -ENOBUFS: uevents were lost or one did not
 * fit, so the answer is not known; or another -errno. With suffix NULL
 * the queue is only emptied. */
int nbd_uevents_find_devt(struct nbd_uevents *u, const char *subsystem, const char *suffix,
                          dev_t *ret_devt);

/* The major number of the character devices called name in devices, the
 * text of /proc/devices: 0, or -ENOENT (none: the driver is not loaded, or
 * the name is a block device's only). Pure; *ret untouched on failure. */
int nbd_chrdev_major(const char *devices, const char *name, unsigned *ret);
