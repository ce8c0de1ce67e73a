// SPDX-License-Identifier: LGPL-2.1-or-later
/* The kernel's uevents; see uevent.h. */
#include "uevent.h"

#include <errno.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Datagrams read a call, and room for each: a uevent is its header (the
 * action and the DEVPATH) and at most 2,048 bytes of environment
 * (UEVENT_BUFFER_SIZE); a longer one counts as not read. */
#define SLOTS 16
#define SLOT_SIZE 8192
#define UEVENT_GROUP 1 /* the kernel's; udev's own messages go to group 2 */
/* recvmmsg() calls a read may take: 1,024 datagrams (a macvtap's create
 * makes four). The loop empties the socket as it fills. */
#define MAX_CALLS 64

struct nbd_uevents {
        int fd;
        char *buf; /* SLOTS * SLOT_SIZE */
};

/* "KEY=" at the start of field: its value, else NULL. */
static const char *value_of(const char *field, const char *key)
{
        size_t n = strlen(key);

        return strncmp(field, key, n) == 0 && field[n] == '=' ? field + n + 1 : NULL;
}

static int parse_number(const char *s, unsigned *ret)
{
        char *end;
        unsigned long v;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || *end || v > 0xffffffffUL)
                return -EINVAL;
        *ret = (unsigned)v;
        return 0;
}

int nbd_uevent_parse(const char *buf, size_t len, struct nbd_uevent *ret)
{
        struct nbd_uevent e = {0};
        const char *action = NULL, *major = NULL, *minor = NULL, *v;
        unsigned maj, min;
        size_t off;

        if (len == 0 || buf[len - 1] != '\0' || !memchr(buf, '@', strlen(buf)))
                return -EINVAL;
        for (off = strlen(buf) + 1; off < len; off += strlen(buf + off) + 1) {
                const char *f = buf + off;
                if ((v = value_of(f, "ACTION")))
                        action = v;
                else if ((v = value_of(f, "DEVPATH")))
                        e.devpath = v;
                else if ((v = value_of(f, "SUBSYSTEM")))
                        e.subsystem = v;
                else if ((v = value_of(f, "MAJOR")))
                        major = v;
                else if ((v = value_of(f, "MINOR")))
                        minor = v;
        }
        if (!action || !e.devpath || !e.subsystem || !major != !minor)
                return -EINVAL;
        if (major && (parse_number(major, &maj) < 0 || parse_number(minor, &min) < 0))
                return -EINVAL;
        e.add = strcmp(action, "add") == 0;
        e.remove = strcmp(action, "remove") == 0;
        e.has_devt = major != NULL;
        e.devt = major ? makedev(maj, min) : 0;
        *ret = e;
        return 0;
}

int nbd_uevents_open(struct nbd_uevents **ret)
{
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = UEVENT_GROUP};
        struct nbd_uevents *u = calloc(1, sizeof(*u));
        int one = 1, r;

        if (!u)
                return -ENOMEM;
        u->fd = -1;
        u->buf = malloc((size_t)SLOTS * SLOT_SIZE);
        if (!u->buf) {
                r = -ENOMEM;
                goto fail;
        }
        u->fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                       NETLINK_KOBJECT_UEVENT);
        if (u->fd < 0 || setsockopt(u->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0 ||
            bind(u->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                goto fail;
        }
        *ret = u;
        return 0;
fail:
        nbd_uevents_close(u);
        return r;
}

void nbd_uevents_close(struct nbd_uevents *u)
{
        if (!u)
                return;
        if (u->fd >= 0)
                close(u->fd);
        free(u->buf);
        free(u);
}

int nbd_uevents_fd(const struct nbd_uevents *u)
{
        return u->fd;
}

/* The kernel's own: sent from port 0, and with the credentials of no
 * process (pid 0, which no process can claim: the kernel fills in a
 * sender's own pid). A process with CAP_SYS_ADMIN over the namespace may
 * have the kernel broadcast a uevent it wrote (uevent_net_rcv_skb(), for
 * container managers): that one comes from port 0 too, but carries the
 * writer's pid. The uid is not looked at: in a namespace owned by another
 * user namespace the kernel stamps its uevents with that one's root. */
static bool from_kernel(const struct msghdr *m, const struct sockaddr_nl *from)
{
        struct ucred uc;

        if (from->nl_pid != 0)
                return false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_CREDENTIALS ||
                    c->cmsg_len < CMSG_LEN(sizeof(uc)))
                        continue;
                memcpy(&uc, CMSG_DATA(c), sizeof(uc));
                return uc.pid == 0;
        }
        return false;
}

/* One kernel datagram: if it is about the device sought, *found and *devt
 * follow it (an add sets them, a removal clears them). */
static void consider(const char *buf, size_t len, const char *subsystem, const char *suffix,
                     bool *found, dev_t *devt)
{
        struct nbd_uevent e;
        size_t n, s;

        if (nbd_uevent_parse(buf, len, &e) < 0 || strcmp(e.subsystem, subsystem) != 0)
                return;
        n = strlen(e.devpath);
        s = strlen(suffix);
        if (n < s || strcmp(e.devpath + n - s, suffix) != 0)
                return;
        if (e.add && e.has_devt) {
                *found = true;
                *devt = e.devt;
        } else if (e.remove) {
                *found = false;
        }
}

int nbd_uevents_find_devt(struct nbd_uevents *u, const char *subsystem, const char *suffix,
                          dev_t *ret_devt)
{
        struct mmsghdr mm[SLOTS];
        struct iovec iov[SLOTS];
        struct sockaddr_nl from[SLOTS];
        union {
                char buf[CMSG_SPACE(sizeof(struct ucred))];
                struct cmsghdr align;
        } ctl[SLOTS];
        bool found = false, lost = false, empty = false;
        dev_t devt = 0;
        int n;

        /* Until the socket says EAGAIN: recvmmsg() returns what it read
         * before an overflow's ENOBUFS and says that only on the next
         * call. Bounded, for a flood of datagrams would hold the loop:
         * past MAX_CALLS the answer is not known. */
        for (int calls = 0; calls < MAX_CALLS && !empty; calls++) {
                for (int i = 0; i < SLOTS; i++) {
                        iov[i] = (struct iovec){u->buf + (size_t)i * SLOT_SIZE, SLOT_SIZE};
                        from[i] = (struct sockaddr_nl){0};
                        mm[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &from[i],
                                                             .msg_namelen = sizeof(from[i]),
                                                             .msg_iov = &iov[i],
                                                             .msg_iovlen = 1,
                                                             .msg_control = ctl[i].buf,
                                                             .msg_controllen = sizeof(ctl[i])}};
                }
                n = recvmmsg(u->fd, mm, SLOTS, MSG_DONTWAIT, NULL);
                empty = n < 0 && errno == EAGAIN;
                if (empty)
                        continue;
                if (n < 0 && (errno == EINTR || errno == ENOBUFS)) {
                        /* ENOBUFS: the socket overflowed since the last read
                         * (said once); what is queued is still read. */
                        lost |= errno == ENOBUFS;
                        continue;
                }
                if (n < 0)
                        return -errno;
                for (int i = 0; i < n && suffix; i++) {
                        /* Another process's datagrams are never read, too
                         * long or not: they cannot make the answer unknown. */
                        if (!from_kernel(&mm[i].msg_hdr, &from[i]))
                                continue;
                        if (mm[i].msg_hdr.msg_flags & MSG_TRUNC)
                                lost = true;
                        else
                                consider(iov[i].iov_base, mm[i].msg_len, subsystem, suffix, &found,
                                         &devt);
                }
        }
        if (!suffix)
                return 0;
        if (lost || !empty)
                return -ENOBUFS;
        if (!found)
                return -ENOENT;
        *ret_devt = devt;
        return 0;
}

int nbd_chrdev_major(const char *devices, const char *name, unsigned *ret)
{
        const char *line = devices;
        bool chr = false;

        for (; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                unsigned major;
                int end = 0;
                size_t n = strlen(name);

                if (strncmp(line, "Character devices:", 18) == 0)
                        chr = true;
                else if (strncmp(line, "Block devices:", 14) == 0)
                        chr = false;
                else if (chr && sscanf(line, "%u %n", &major, &end) == 1 && end > 0 &&
                         strncmp(line + end, name, n) == 0 &&
                         (line[end + n] == '\n' || line[end + n] == '\0')) {
                        *ret = major;
                        return 0;
                }
        }
        return -ENOENT;
}
