// SPDX-License-Identifier: LGPL-2.1-or-later
/* --listen's socket; see listen.h. */
#include "listen.h"

#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int nbd_listen_parse_mode(const char *s, mode_t *ret, struct nbd_err *e)
{
        char *end;
        unsigned long m;

        errno = 0;
        m = strtoul(s, &end, 8);
        if (errno || !*s || *end || m > 07777)
                return nbd_err_set(e, -EINVAL, "--listen-mode: '%s' is not an octal mode", s);
        if ((m & ~0666ul) || (m & 0600) != 0600)
                return nbd_err_set(e, -EINVAL,
                                   "--listen-mode: %04lo: a socket's mode reads and writes for "
                                   "its owner and has no execute or special bits (0600, 0660, "
                                   "0666)",
                                   m);
        *ret = (mode_t)m;
        return 0;
}

int nbd_listen_parse_group(const char *s, gid_t *ret, struct nbd_err *e)
{
        struct group gr, *found = NULL;
        char buf[4096], *end;
        unsigned long n;

        errno = 0;
        n = strtoul(s, &end, 10);
        if (*s && !*end && !errno && n < (gid_t)-1) {
                *ret = (gid_t)n;
                return 0;
        }
        if (getgrnam_r(s, &gr, buf, sizeof(buf), &found) != 0 || !found)
                return nbd_err_set(e, -ENOENT, "--listen-group: no group '%s'", s);
        *ret = found->gr_gid;
        return 0;
}

/* One entry on the way to the socket. A symbolic link: root's (or ours),
 * its target is walked on its own. A directory: root's (or ours), and no
 * one else may replace what it holds: the socket's own directory writable
 * by its owner alone; one above it by its owner alone, or sticky (as /tmp:
 * there only an entry's owner may rename it, and the entry below is
 * root's). */
static int entry_safe(const char *p, bool sockets_dir, struct nbd_err *e)
{
        struct stat st;
        bool ok;

        if (lstat(p, &st) < 0)
                return nbd_err_set(e, -errno, "%s: %s", p, strerror(errno));
        ok = st.st_uid == 0 || st.st_uid == geteuid();
        if (!S_ISLNK(st.st_mode))
                ok = ok && S_ISDIR(st.st_mode) &&
                     (!(st.st_mode & 022) || (!sockets_dir && (st.st_mode & S_ISVTX)));
        if (!ok)
                return nbd_err_set(e, -EPERM,
                                   "--listen-mode/--listen-group: %s (uid %u, mode %04o) must be "
                                   "root's and writable by root alone%s: another user could "
                                   "replace the socket before its group is set",
                                   p, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                                   sockets_dir ? " (the socket's directory)"
                                               : ", or sticky (a directory above the socket's)");
        return 0;
}

/* dir (absolute) and every directory above it. */
static int walk_up(char *dir, struct nbd_err *e)
{
        bool sockets_dir = true;
        int r;

        for (;;) {
                char *slash = strrchr(dir, '/');
                if ((r = entry_safe(*dir ? dir : "/", sockets_dir, e)) < 0 || !slash || !*dir)
                        return r;
                sockets_dir = false;
                *slash = '\0'; /* "/a/b" -> "/a" -> "" (the root) */
        }
}

/* The socket's directory and every one above it are root's and no one
 * else may replace what they hold: as the path is written (a link of
 * another user's on the way could be turned elsewhere) and as it resolves. */
static int dir_safe(const char *path, struct nbd_err *e)
{
        char copy[PATH_MAX], dir[PATH_MAX], resolved[PATH_MAX];
        int r;

        if (strlen(path) >= sizeof(copy))
                return nbd_err_set(e, -ENAMETOOLONG, "%s: path too long", path);
        strcpy(copy, path);
        if (path[0] == '/') {
                snprintf(dir, sizeof(dir), "%s", dirname(copy));
        } else {
                char cwd[PATH_MAX];
                if (!getcwd(cwd, sizeof(cwd)))
                        return nbd_err_set(e, -errno, "getcwd: %s", strerror(errno));
                if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", cwd, dirname(copy)) >= sizeof(dir))
                        return nbd_err_set(e, -ENAMETOOLONG, "%s: path too long", path);
        }
        if (!realpath(dir, resolved))
                return nbd_err_set(e, -errno, "%s: %s", dir, strerror(errno));
        if ((r = walk_up(dir, e)) < 0)
                return r;
        return walk_up(resolved, e);
}

int nbd_listen_on(const char *path, const struct nbd_listen_opts *o, struct nbd_err *e)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        const mode_t mode = o->mode ? o->mode : 0700;
        struct stat st;
        mode_t old;
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return nbd_err_set(e, -ENAMETOOLONG, "%s: longer than a socket's path may be",
                                   path);
        if ((o->mode || o->gid != (gid_t)-1) && (r = dir_safe(path, e)) < 0)
                return r;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return nbd_err_set(e, -errno, "socket: %s", strerror(errno));
        /* A stale socket from an earlier run is replaced; any other file is not. */
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
                unlink(path);
        old = umask(~mode & 0777);
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        umask(old);
        if (r < 0) {
                nbd_err_set(e, r, "bind: %s", strerror(-r));
                goto fail;
        }
        /* lchown: what is at path now is the socket just bound (the
         * directory is root's alone), and a link would not be followed. */
        if (o->gid != (gid_t)-1 && lchown(path, (uid_t)-1, o->gid) < 0) {
                r = -errno;
                nbd_err_set(e, r, "cannot give %s to group %u: %s", path, (unsigned)o->gid,
                            strerror(-r));
                unlink(path);
                goto fail;
        }
        if (listen(fd, 128) < 0) {
                r = -errno;
                nbd_err_set(e, r, "listen: %s", strerror(-r));
                goto fail;
        }
        return fd;
fail:
        close(fd);
        return r;
}
