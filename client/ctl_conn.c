// SPDX-License-Identifier: LGPL-2.1-or-later
/* Which helper netbrokerctl talks to, and reaching it.
 *
 * The order is ip(8)'s and nft(8)'s habit of "the system's, unless told":
 * --spawn or --socket on the command line, else $NETBROKER_SOCKET, else the
 * system socket (netbrokerd.socket's ListenStream) when it exists, and only
 * then a private helper spawned for this one command. A socket that was
 * named but cannot be reached is an error: falling back to a private helper
 * would run the command somewhere the operator did not ask for.
 *
 * A private helper shares our stderr, and its notices are not the
 * operator's business: its stderr is a memfd unless -v or --debug asks for
 * them, shown only when the helper could not start (it says why there). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"

#ifndef NB_SYSTEM_SOCKET
#define NB_SYSTEM_SOCKET "/run/netbroker/netbrokerd.sock"
#endif

void ctl_pick_source(struct ctl *c)
{
        const char *env = getenv("NETBROKER_SOCKET");
        struct stat st;

        if (c->helper_path) {
                c->source = CTL_SRC_SPAWN_OPTION;
        } else if (c->socket_path) {
                c->source = CTL_SRC_SOCKET_OPTION;
        } else if (env && env[0]) {
                c->source = CTL_SRC_ENV;
                c->socket_path = env;
        } else if (stat(NB_SYSTEM_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode)) {
                c->source = CTL_SRC_SYSTEM;
                c->socket_path = NB_SYSTEM_SOCKET;
        } else {
                c->source = CTL_SRC_PRIVATE;
        }
}

const char *ctl_source_text(const struct ctl *c, char *buf, size_t size)
{
        /* What nb_spawn() will start: it reads NETBROKERD the same way. */
        const char *helper = c->helper_path ? c->helper_path : secure_getenv("NETBROKERD");

        switch (c->source) {
        case CTL_SRC_SOCKET_OPTION:
                snprintf(buf, size, "netbrokerd at %s (from --socket)", c->socket_path);
                break;
        case CTL_SRC_ENV:
                snprintf(buf, size, "netbrokerd at %s (from NETBROKER_SOCKET)", c->socket_path);
                break;
        case CTL_SRC_SYSTEM:
                snprintf(buf, size, "netbrokerd at %s (the system socket)", c->socket_path);
                break;
        case CTL_SRC_SPAWN_OPTION:
                snprintf(buf, size, "a private netbrokerd, %s (from --spawn)", c->helper_path);
                break;
        case CTL_SRC_PRIVATE:
                snprintf(buf, size,
                         "a private netbrokerd, %s (no --socket, no NETBROKER_SOCKET, no %s)",
                         helper ? helper : "the installed one", NB_SYSTEM_SOCKET);
                break;
        }
        return buf;
}

/* What the helper wrote to the memfd, on stderr. */
static void show_helper_log(int fd)
{
        char buf[4096];
        ssize_t n;
        off_t off = 0;

        while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
                fwrite(buf, 1, (size_t)n, stderr);
                off += n;
        }
}

/* nb_spawn with the helper's stderr on a memfd (*ret_log_fd; -1 when it
 * could not be made, then the helper shares ours). */
static int spawn_quietly(struct ctl *c, const nb_spawn_opts *o, int *ret_log_fd)
{
        int log_fd = memfd_create("netbrokerd-log", MFD_CLOEXEC);
        int saved = log_fd < 0 ? -1 : fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
        int r;

        fflush(stderr);
        if (saved >= 0 && dup2(log_fd, STDERR_FILENO) < 0) {
                close(saved);
                saved = -1;
        }
        r = nb_spawn(c->helper_path, o, &c->conn);
        if (saved >= 0) {
                dup2(saved, STDERR_FILENO);
                close(saved);
        } else if (log_fd >= 0) {
                close(log_fd);
                log_fd = -1;
        }
        *ret_log_fd = log_fd;
        return r;
}

int ctl_connect(struct ctl *c)
{
        char where[512];
        int r, log_fd = -1;

        if (c->conn)
                return 0;
        if (c->verbose)
                fprintf(stderr, "netbrokerctl: using %s\n",
                        ctl_source_text(c, where, sizeof(where)));
        if (c->socket_path) {
                /* Not an error: a script written before the system socket
                 * existed keeps working, but nobody is misled. */
                if (c->config_path)
                        fprintf(stderr, "netbrokerctl: --config %s ignored: using %s\n",
                                c->config_path, ctl_source_text(c, where, sizeof(where)));
                r = nb_connect(c->socket_path, &c->conn);
        } else {
                nb_spawn_opts o = {.size = sizeof(nb_spawn_opts), .config_path = c->config_path};
                if (c->debug)
                        o.log_level = "debug";
                if (c->verbose)
                        r = nb_spawn(c->helper_path, &o, &c->conn);
                else
                        r = spawn_quietly(c, &o, &log_fd);
                if (r < 0 && log_fd >= 0)
                        show_helper_log(log_fd);
                /* The helper keeps its end; ours is not needed any more. */
                if (log_fd >= 0)
                        close(log_fd);
        }
        if (r < 0)
                c->conn = NULL;
        return r;
}

int ctl_open(struct ctl *c)
{
        char where[512];
        const char *why;
        int r = ctl_connect(c);

        if (r == 0)
                return 0;
        why = nb_last_error();
        return ctl_fail(c, EXIT_UNREACHABLE, -r, "cannot reach %s%s%s",
                        ctl_source_text(c, where, sizeof(where)), why[0] ? ": " : "", why);
}

int ctl_submit(struct ctl *c, nb_batch *b, nb_results **ret)
{
        int r = ctl_open(c);

        if (r)
                return r;
        r = nb_submit(c->conn, b, ret);
        if (r < 0) {
                const char *why = nb_conn_error(c->conn);
                return ctl_fail(c, EXIT_UNREACHABLE, -r, "%s", why[0] ? why : strerror(-r));
        }
        return 0;
}
