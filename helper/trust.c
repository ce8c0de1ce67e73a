// SPDX-License-Identifier: LGPL-2.1-or-later
/* The start-up check of allow-listed programs; see trust.h. */
#include "trust.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"

/* One component of the resolved path. lstat: realpath left no symlink in
 * it, so one that is there now was put there since, by someone who could
 * write to a directory above (which the caller's walk from / finds). */
static int check_one(const char *p, bool is_dir, struct nbd_err *e)
{
        const char *what = is_dir ? "directory " : "";
        struct stat st;

        if (lstat(p, &st) < 0) {
                int r = -errno;
                return nbd_err_set(e, r, "%s%s: %s", what, p, strerror(-r));
        }
        if (is_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
                return nbd_err_set(e, -EPERM, "not safe to run as root: %s is not a %s", p,
                                   is_dir ? "directory" : "regular file");
        }
        if (st.st_uid != 0) {
                return nbd_err_set(e, -EPERM,
                                   "not safe to run as root: %s%s is owned by uid %u, not root",
                                   what, p, (unsigned)st.st_uid);
        }
        if (st.st_mode & (S_IWGRP | S_IWOTH)) {
                return nbd_err_set(
                        e, -EPERM,
                        "not safe to run as root: %s%s is writable by its group or others (mode "
                        "%04o)",
                        what, p, (unsigned)(st.st_mode & 07777));
        }
        if (!is_dir && !(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
                return nbd_err_set(e, -EPERM, "%s is not executable (mode %04o)", p,
                                   (unsigned)(st.st_mode & 07777));
        }
        return 0;
}

int nbd_trust_program(const char *path, char **ret_real, struct nbd_err *e)
{
        char *real = realpath(path, NULL);
        int r = 0;

        if (!real) {
                r = -errno;
                return nbd_err_set(e, r, "cannot resolve it: %s", strerror(-r));
        }
        /* "/", then each directory below it down to the file's own: the
         * path cut at each of its slashes in turn. */
        for (size_t i = 0; r == 0 && real[i]; i++) {
                size_t cut = i ? i : 1;
                char saved;

                if (real[i] != '/')
                        continue;
                saved = real[cut];
                real[cut] = '\0';
                r = check_one(real, true, e);
                real[cut] = saved;
        }
        if (r == 0)
                r = check_one(real, false, e);
        if (r == 0) {
                *ret_real = real;
                real = NULL;
        }
        free(real);
        return r;
}
