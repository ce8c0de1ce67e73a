// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerd: the privileged network helper.
 *
 * Theory of operation
 * -------------------
 * netbrokerd does network work for a daemon (libvirtd and its kind) and must
 * be safe to leave running with root's powers. Before it reads a single
 * request it goes through these stages, in this order:
 *
 *  1. Sockets in hand. The one connection it was spawned with (--fd, the
 *     client library's socketpair), the listening sockets systemd passed
 *     (libsystemd's sd_listen_fds(); each must be a listening unix stream
 *     socket: a connected one, what Accept=yes hands over, is refused), or
 *     its own listener (--listen PATH, bound now). Every other fd it
 *     inherited is closed: a daemon that leaks fds into us must not have
 *     them held open by a privileged process.
 *  2. Signals and working directory reset. Default SIGCHLD (children are
 *     reaped through pidfds, which needs SIGCHLD not ignored), SIGPIPE
 *     ignored (a vanished peer is an EPIPE, not a death), SIGTERM/SIGINT
 *     (stop) and SIGHUP (reload) blocked for a signalfd and everything
 *     else unblocked; the working
 *     directory is "/", not whatever the embedding daemon had (paths given
 *     on the command line were made absolute first).
 *  3. Configuration read. A bad line stops start-up, naming the line. Each
 *     program on exec_allow is resolved (realpath) and must be owned by
 *     root and writable by nobody else, with every directory from / down
 *     to it (trust.c): else whoever may write there chooses what root runs.
 *     A program the file names that fails stops start-up; a default one is
 *     left off with a warning. Exec runs the resolved file.
 *  4. A mount namespace of its own, while CAP_SYS_ADMIN is still held: a
 *     sysfs that shows the helper's network namespace (so it finds the
 *     character device of a macvtap it made, wherever it runs), and a small
 *     tmpfs where it makes, opens and removes those device nodes, without
 *     udev and without touching the host's /dev. Mounts propagate into it
 *     from the host, never out of it.
 *  5. RLIMIT_NOFILE lowered (fd_limit, 64 by default), soft and hard. With
 *     few fds and all of them close-on-exec, posix_spawn needs no loop over
 *     fds: the child gets exactly 0-2 (seeds/001: closing 8k fds per spawn).
 *  6. Capabilities dropped to the keep-list below, in all sets and, when
 *     it holds CAP_SETPCAP, in the bounding set (libcap-ng); the unit gives
 *     none and its CapabilityBoundingSet= is the bound. With stage 7 no
 *     program it runs holds more than the keep-list either way.
 *     CAP_SYS_ADMIN goes here.
 *  7. PR_SET_NO_NEW_PRIVS: no program it runs can gain privileges through
 *     set-uid bits or file capabilities.
 *  8. Serve: rtnetlink sockets and one dump of the interfaces for the name
 *     allocator, then one event loop; peers checked with SO_PEERCRED and
 *     SO_PEERGROUPS. The loop stays a dispatcher: a job runs its ops for
 *     at most a 2 ms slice before the loop serves others (between ops,
 *     never inside one), and a program runs as a child watched through a
 *     pidfd. A job's firewall ops go to the kernel in one transaction at
 *     its last firewall op, built on a read of the table at its first: of
 *     two jobs that change the same owner at once, the later commit wins
 *     or fails whole (the kernel's transaction is all or nothing). What a
 *     caller may hold (connections, spawn slots, memory, fds) is shared
 *     out in server.c and dispatch.c, with a reserve kept for root.
 *  9. Lanes (lane.h), made here, after stage 6: a thread for the
 *     firewall's commits and table reads (the start-up sweep's among
 *     them), one for the links' group deletions, the kernel calls that
 *     block inside one syscall, and one that decodes large frames. A thread takes the
 *     capability sets of the thread that creates it, so they hold what the
 *     loop holds; every signal is blocked in them. The loop stays the only
 *     owner of state; a job waits for its call, and jobs needing the same
 *     capability wait behind it, while every other client is served.
 *     And the log thread (log.h), made just before stage 8: the loop
 *     formats its lines and leaves them in a bounded ring, which the
 *     thread writes out; a journal or a parent that stops reading the
 *     helper's stderr makes it drop lines (counted, and said once the
 *     reader is back), not stop the loop. At exit it is given a second to
 *     write what it holds.
 * 10. The closer (closer.h), a thread started at the first descriptor it
 *     is given: the loop never makes a close whose cost a client chooses
 *     (a lingering TCP socket, a FUSE file, a connection socket whose
 *     queue holds such fds). Every fd a frame brings that is not a network
 *     namespace goes to it at once, counted in its sender's share of
 *     fd_limit until it is closed; a uid at its share is not read. On
 *     Linux 6.16+ the listeners refuse fds (SO_PASSRIGHTS off; accepted
 *     sockets inherit it) and only an admitted peer takes them again: a
 *     refused peer can queue none. A read of a non-root connection that
 *     would bring more fds than it takes is refused before it is made
 *     (frame.h, fds_fit): the kernel would release the surplus inside
 *     recvmsg(), on the loop.
 *
 * Every fd the helper opens afterwards is opened close-on-exec.
 *
 * Under systemd (Type=notify) it says READY=1 once it serves, STOPPING=1
 * when told to stop, and RELOADING=1 ... READY=1 around a SIGHUP, which
 * reads the configuration and the policy again, whole, and puts them in
 * force only if every check of stage 3 passes; otherwise the old ones stay
 * and the error is logged. Spawned by a client (--fd) it is no service:
 * it tells systemd nothing, whatever NOTIFY_SOCKET it inherited.
 */
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <limits.h>
#include <sched.h>
#include <sys/mount.h>

#include "backend.h"
#include "bandwidth.h"
#include "config.h"
#include "firewall.h"
#include "fw_gone.h"
#include "lane.h"
#include "link.h"
#include "listen.h"
#include "log.h"
#include "nfsock.h"
#include "loop.h"
#include "program.h"
#include "server.h"

NBD_LOG_CATEGORY(main);

/* The capabilities netbrokerd keeps, and why:
 * - CAP_NET_ADMIN: everything it exists for: links, tc, nftables over
 *   netlink, tap owners, and the allow-listed tools (iptables-restore, nft,
 *   tc, ip) it runs, which inherit it through the bounding set.
 * - CAP_NET_RAW: iptables-restore and ebtables-restore open raw sockets to
 *   talk to the kernel; without it they fail.
 * - CAP_MKNOD: a macvtap's character device is made as a node in the
 *   helper's private tmpfs, opened, and removed (no udev needed).
 * No program the helper runs keeps CAP_MKNOD (child_start.h). */
static const int keep_caps[] = {CAP_NET_ADMIN, CAP_NET_RAW, CAP_MKNOD};
/* Kept when given, out of the bounding set, for the programs of callers
 * other than root (child_start.c): CAP_SETUID and CAP_SETGID in the
 * permitted set alone (never effective in the helper), with which such a
 * child becomes its caller, and CAP_KILL, raised for the loop's thread
 * alone to end that child (at its timeout, when its client goes) though it
 * is no longer uid 0's (nbd_child_kill). Without all three such a caller's
 * Exec fails (EPERM); it never runs as uid 0. */
static const struct {
        int cap;
        bool effective;
} caller_caps[] = {{CAP_SETUID, false}, {CAP_SETGID, false}, {CAP_KILL, false}};
#define N_CALLER_CAPS (sizeof(caller_caps) / sizeof(*caller_caps))

/* Where macvtap device nodes are made (a tmpfs in the helper's own mount
 * namespace). */
#define DEVDIR_PARENT "/run/netbroker"
#define DEVDIR DEVDIR_PARENT "/dev"

/* Sockets systemd may pass: the server's listeners, less --listen's. */
#define NBD_MAX_ACTIVATED 7

struct options {
        char *config_path;
        bool config_required;
        bool check_config;
        int conn_fd;
        char *listen_path;
        struct nbd_listen_opts listen; /* --listen-mode, --listen-group */
};

/* Paths from the command line, made absolute before the chdir("/"). */
static char *absolute(const char *path)
{
        char cwd[PATH_MAX], *out;

        if (path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
                return strdup(path);
        if (asprintf(&out, "%s/%s", cwd, path) < 0)
                return NULL;
        return out;
}

static void usage(FILE *f)
{
        fprintf(f,
                "usage: netbrokerd [--config PATH] (--fd N | --listen PATH | <socket activation>)\n"
                "       netbrokerd --check-config [--config PATH]\n"
                "  --fd N          serve the connected socket N (the client library's socketpair)\n"
                "  --listen PATH   listen on a unix socket at PATH (mode 0700: root alone)\n"
                "  --listen-mode MODE    its mode instead (0660: its group too)\n"
                "  --listen-group GROUP  its group (a session daemon's)\n"
                "  --config PATH   configuration file (default " NBD_CONFIG_DEFAULT_PATH ")\n"
                "  --check-config  read and check the configuration and its policy files,\n"
                "                  exit 0 if the helper would start with them, else 1\n"
                "  --version\n");
}

static int parse_args(int argc, char **argv, struct options *o)
{
        static const struct option longopts[] = {
                {"config", required_argument, NULL, 'c'},
                {"fd", required_argument, NULL, 'f'},
                {"listen", required_argument, NULL, 'l'},
                {"listen-mode", required_argument, NULL, 'm'},
                {"listen-group", required_argument, NULL, 'g'},
                {"help", no_argument, NULL, 'h'},
                {"version", no_argument, NULL, 'V'},
                {"check-config", no_argument, NULL, 'C'},
                {0},
        };
        int ch;

        o->conn_fd = -1;
        o->listen.gid = (gid_t)-1;
        while ((ch = getopt_long(argc, argv, "c:f:l:hV", longopts, NULL)) != -1) {
                switch (ch) {
                case 'c':
                        free(o->config_path);
                        o->config_path = absolute(optarg);
                        o->config_required = true;
                        break;
                case 'f': {
                        char *end;
                        long fd = strtol(optarg, &end, 10);
                        if (*end || fd < 3 || fd > 1023) {
                                nbd_error("--fd needs a number from 3 to 1023");
                                return -EINVAL;
                        }
                        o->conn_fd = (int)fd;
                        break;
                }
                case 'l':
                        free(o->listen_path);
                        o->listen_path = absolute(optarg);
                        break;
                case 'm':
                case 'g': {
                        struct nbd_err e = {0};
                        if ((ch == 'm' ? nbd_listen_parse_mode(optarg, &o->listen.mode, &e)
                                       : nbd_listen_parse_group(optarg, &o->listen.gid, &e)) < 0) {
                                nbd_error("%s", e.msg);
                                return -EINVAL;
                        }
                        break;
                }
                case 'C':
                        o->check_config = true;
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                case 'V':
                        printf("netbrokerd %s\n", NB_VERSION);
                        exit(0);
                default:
                        usage(stderr);
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                usage(stderr);
                return -EINVAL;
        }
        if ((o->listen.mode || o->listen.gid != (gid_t)-1) && !o->listen_path) {
                nbd_error("--listen-mode and --listen-group go with --listen (netbrokerd.socket "
                          "has SocketMode= and SocketGroup=)");
                return -EINVAL;
        }
        if (!o->config_path)
                o->config_path = strdup(NBD_CONFIG_DEFAULT_PATH);
        return o->config_path ? 0 : -ENOMEM;
}

/* systemd's sockets (stage 1): sd_listen_fds() takes them only if
 * LISTEN_PID is us, sets close-on-exec and removes the variables so that
 * nothing we run sees them. Each must be a listening unix stream socket:
 * Accept=yes in a .socket unit hands over one connection instead, and
 * polling that as a listener would hang its client (accept() on it never
 * succeeds). Returns the count (0: not socket-activated) or -1 (said). */
static int activated_sockets(void)
{
        int n = sd_listen_fds(1);

        if (n < 0) {
                nbd_error("LISTEN_FDS: %s", strerror(-n));
                return -1;
        }
        if (n > NBD_MAX_ACTIVATED) {
                nbd_error("systemd passed %d sockets; netbrokerd serves at most %d", n,
                          NBD_MAX_ACTIVATED);
                return -1;
        }
        for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; fd++) {
                int r = sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0);
                if (r > 0)
                        continue;
                if (r < 0)
                        nbd_error("socket %d from systemd: %s", fd, strerror(-r));
                else if (sd_is_socket_unix(fd, SOCK_STREAM, 0, NULL, 0) > 0)
                        nbd_error("socket %d from systemd is a connected socket, not a listening "
                                  "one (SO_ACCEPTCONN is 0): the .socket unit must not have "
                                  "Accept=yes",
                                  fd);
                else
                        nbd_error("fd %d from systemd is not a unix stream socket", fd);
                return -1;
        }
        return n;
}

/* Stage 4; see the theory of operation. Returns the device-node directory,
 * or NULL when the helper cannot have one (not started with
 * CAP_SYS_ADMIN): then macvtap fds come from /dev/tapN only when that node
 * is the right device. */
static const char *private_mounts(void)
{
        if (unshare(CLONE_NEWNS) < 0) {
                nbd_warn("no mount namespace of its own (%s): using the host's /sys and /dev",
                         strerror(errno));
                return NULL;
        }
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
                nbd_error("cannot make mounts one-way: %s", strerror(errno));
                return NULL;
        }
        /* EBUSY: this namespace's sysfs is mounted there already (`ip
         * netns exec` mounts one), which is what the mount is for. */
        if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NOEXEC | MS_NODEV, NULL) < 0) {
                if (errno == EBUSY)
                        nbd_debug("/sys is this network namespace's sysfs already");
                else
                        nbd_warn("cannot mount a sysfs for this network namespace: %s",
                                 strerror(errno));
        }
        if ((mkdir(DEVDIR_PARENT, 0755) < 0 && errno != EEXIST) ||
            (mkdir(DEVDIR, 0700) < 0 && errno != EEXIST) ||
            /* An unlinked node keeps its inode while a client holds the
             * device open, so the inode count must not be capped (0: no
             * limit); nodes take no blocks. */
            mount("tmpfs", DEVDIR, "tmpfs", MS_NOSUID | MS_NOEXEC,
                  "mode=0700,size=4k,nr_inodes=0") < 0) {
                nbd_warn("cannot make %s for device nodes: %s", DEVDIR, strerror(errno));
                return NULL;
        }
        return DEVDIR;
}

static int lower_fd_limit(unsigned limit)
{
        struct rlimit rl = {.rlim_cur = limit, .rlim_max = limit};

        return setrlimit(RLIMIT_NOFILE, &rl) < 0 ? -errno : 0;
}

static int drop_capabilities(void)
{
        bool can_bound = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP);
        bool given[N_CALLER_CAPS];
        int r;

        for (size_t i = 0; i < N_CALLER_CAPS; i++)
                given[i] = capng_have_capability(CAPNG_PERMITTED, (unsigned)caller_caps[i].cap);
        capng_clear(CAPNG_SELECT_BOTH);
        for (size_t i = 0; i < sizeof(keep_caps) / sizeof(*keep_caps); i++)
                capng_update(CAPNG_ADD,
                             CAPNG_EFFECTIVE | CAPNG_PERMITTED |
                                     (keep_caps[i] == CAP_MKNOD ? 0 : CAPNG_BOUNDING_SET),
                             (unsigned)keep_caps[i]);
        for (size_t i = 0; i < N_CALLER_CAPS; i++)
                if (given[i])
                        capng_update(CAPNG_ADD,
                                     CAPNG_PERMITTED |
                                             (caller_caps[i].effective ? CAPNG_EFFECTIVE : 0),
                                     (unsigned)caller_caps[i].cap);
        /* Without CAP_SETPCAP the bounding set cannot be changed; the
         * capability sets still can. */
        r = capng_apply(can_bound ? CAPNG_SELECT_BOTH : CAPNG_SELECT_CAPS);
        if (r < 0)
                return -EPERM;
        /* As systemd starts it: the unit's CapabilityBoundingSet= is the
         * bound, and NO_NEW_PRIVS (stage 7) keeps every program it runs at
         * the permitted set above, whatever the bounding set holds. */
        if (!can_bound)
                nbd_info("not started with CAP_SETPCAP: the bounding set is the one it was "
                         "given");
        return 0;
}

static int reset_signals(sigset_t *handled)
{
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigset_t none;

        sigaction(SIGCHLD, &sa, NULL);
        sa.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &sa, NULL);
        sigemptyset(&none);
        sigemptyset(handled);
        sigaddset(handled, SIGTERM);
        sigaddset(handled, SIGINT);
        sigaddset(handled, SIGHUP);
        return sigprocmask(SIG_SETMASK, handled, NULL) < 0 ? -errno : 0;
}

struct sig_state {
        struct nbd_watch w;
        bool quit;
        bool reload; /* SIGHUP came: done by the loop's owner, between iterations */
};

static void on_signal(struct nbd_watch *w, uint32_t events)
{
        struct sig_state *st = w->data;
        struct signalfd_siginfo si;

        (void)events;
        if (read(w->fd, &si, sizeof(si)) != sizeof(si))
                return;
        if (si.ssi_signo == SIGHUP) {
                st->reload = true;
                return;
        }
        nbd_notice("signal %u: shutting down", si.ssi_signo);
        st->quit = true;
}

/* Wait for children that were killed on shutdown, so none is left a zombie
 * for our parent to inherit. */
static void reap_children(const struct nbd_backend *be, struct nbd_loop *loop)
{
        for (int i = 0; i < 500 && be->spawn.running() > 0; i++)
                nbd_loop_iterate(loop);
}

/* Deletions that jobs leave to be done together, run before each reply so
 * the client sees them done: interfaces a job deleted leave their
 * clean-up to the loop (link.c), bandwidth clears their IFBs (bandwidth.c). */
static void flush_gone_links(void *links)
{
        nbd_kernel_backend.links.flush_gone(links);
}

static void flush_ifbs(void *bw)
{
        nbd_kernel_backend.bw.flush(bw);
}

/* The capabilities the helper offers; any may be NULL (its ops are then
 * not offered). */
struct caps {
        struct nbd_links *links;
        struct nbd_fw *fw;
        struct nbd_bw *bw;
        struct nbd_fw_gone *fw_gone;
};

/* Open what the kernel offers; a capability that cannot open is left out
 * with a warning, never fatal: Exec works without any of them. */
static void caps_open(const struct nbd_backend *be, struct nbd_loop *loop, const char *devdir,
                      struct caps *c)
{
        int r;

        if ((r = be->links.open(loop, devdir, &c->links)) < 0) {
                nbd_warn("rtnetlink unavailable (%s): interface ops are disabled", strerror(-r));
                c->links = NULL;
        }
        if ((r = be->fw.open(loop, &c->fw)) < 0) {
                nbd_warn("nfnetlink unavailable (%s): firewall ops are disabled", strerror(-r));
                c->fw = NULL;
        }
        r = c->links ? be->bw.open(be->links.netlink(c->links), &c->bw) : -ENOTCONN;
        if (r < 0) {
                nbd_warn("bandwidth ops are disabled: %s", strerror(-r));
                c->bw = NULL;
        }
        if (c->links && c->fw && nbd_fw_gone_new(be, c->fw, &c->fw_gone) < 0) {
                /* Without it, rules could outlive their interface and bind
                 * the next device of its name: no firewall then. */
                nbd_error("out of memory: firewall ops are disabled");
                be->fw.close(c->fw);
                c->fw = NULL;
        }
}

/* An IFB outlives the interface it shapes unless removed; a netdev chain
 * binds the next device of its name. Watch interfaces go, and sweep what
 * went while no helper ran. (The kernel's own start-up: no backend table
 * entries.) */
static void caps_watch_gone(const struct caps *c)
{
        struct nbd_link_entry *all;
        size_t n;

        if (!c->links || (!c->bw && !c->fw_gone))
                return;
        if (c->bw) {
                nbd_bw_watch_links(c->bw, c->links);
                nbd_links_on_gone(c->links, nbd_bw_link_gone, c->bw);
        }
        if (c->fw_gone)
                nbd_links_on_gone(c->links, nbd_fw_gone_link, c->fw_gone);
        if (nbd_links_list(c->links, &all, &n) == 0) {
                if (c->bw)
                        nbd_bw_sweep(c->bw, all, n);
                if (c->fw_gone)
                        nbd_fw_gone_sweep(c->fw_gone, all, n);
                free(all);
        }
}

/* A program of a caller other than root serves only interfaces that are
 * still there (program.h): told as each one goes, before any create goes
 * on; and the adopted ones, checked against what went while no helper
 * ran. */
static void program_link_gone(void *data, const char *name)
{
        (void)data;
        nbd_programs_link_gone(name);
}

static int program_fence(void *data, struct nbd_err *err)
{
        (void)data;
        return nbd_programs_fence(err);
}

static int link_owner(void *links, const char *name, uid_t *ret)
{
        return nbd_link_owner(links, name, ret);
}

static void caps_watch_programs(const struct caps *c)
{
        if (!c->links)
                return;
        nbd_links_on_gone_now(c->links, program_link_gone, NULL);
        nbd_links_before_create(c->links, program_fence, NULL);
        nbd_programs_sweep_links(link_owner, c->links);
}

static void caps_close(const struct nbd_backend *be, struct caps *c)
{
        be->bw.close(c->bw); /* before links: it borrows their socket */
        be->links.close(c->links);
        nbd_fw_gone_free(c->fw_gone);
        be->fw.close(c->fw);
}

/* The server's sockets: systemd's, --listen's and --fd's. */
static int add_sockets(struct nbd_server *srv, const struct options *o, int n_activated,
                       int listen_fd)
{
        int r;

        for (int i = 0; i < n_activated; i++)
                if ((r = nbd_server_add_listener(srv, 3 + i)) < 0)
                        return r;
        if (listen_fd >= 0 && (r = nbd_server_add_listener(srv, listen_fd)) < 0)
                return r;
        if (o->conn_fd >= 0) {
                fcntl(o->conn_fd, F_SETFL, fcntl(o->conn_fd, F_GETFL) | O_NONBLOCK);
                r = nbd_server_adopt(srv, o->conn_fd);
                if (r < 0) {
                        nbd_error("--fd %d: not a usable connection: %s", o->conn_fd, strerror(-r));
                        return -ECANCELED; /* said already */
                }
        }
        return 0;
}

/* The lanes (lane.h): a thread for the firewall's commits and table reads,
 * one for the links' group deletions, and two that decode large frames
 * (server.c), root's and everyone else's: root's never waits behind
 * another caller's decode. Made here, after the privilege drop (stage 6), so they hold
 * the capabilities the loop holds and no more: a thread takes the sets of
 * the thread that creates it. Without them (no memory, no threads), those
 * calls run on the loop as before. fds: one eventfd, and a socket per
 * kernel call under way. */
struct lanes {
        struct nbd_lanes *all;
        struct nbd_lane *fw, *links, *decode, *decode_root;
};

static void lanes_open(struct nbd_loop *loop, const struct caps *c, struct lanes *ls)
{
        int r = nbd_lanes_new(loop, &ls->all);

        if (r == 0 && c->fw)
                r = nbd_lane_new(ls->all, "fw", &ls->fw);
        if (r == 0 && c->links)
                r = nbd_lane_new(ls->all, "links", &ls->links);
        if (r == 0)
                r = nbd_lane_new(ls->all, "decode", &ls->decode);
        if (r == 0)
                r = nbd_lane_new(ls->all, "decode_root", &ls->decode_root);
        if (r < 0) {
                nbd_warn("no lanes (%s): long kernel calls hold the loop", strerror(-r));
                nbd_lanes_free(ls->all);
                *ls = (struct lanes){0};
        }
}

/* The environment overrides the file's log level and filters. */
static int configure_logging(const struct nbd_config *cfg)
{
        const char *lvl = getenv("NETBROKERD_LOG_LEVEL");
        const char *filters = getenv("NETBROKERD_LOG_FILTERS");
        int level = lvl ? nbd_log_parse_level(lvl) : cfg->log_level;

        if (level < 0 ||
            nbd_log_configure(level, filters ? filters : cfg->log_filters, cfg->log_syslog) < 0) {
                nbd_error(
                        "bad log level or filters (NETBROKERD_LOG_LEVEL, NETBROKERD_LOG_FILTERS)");
                return -1;
        }
        return 0;
}

static uint64_t monotonic_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* SIGHUP: the configuration and the policy read again, whole, as at
 * start-up (stage 3), and put in force only if all of it passes; else the
 * old ones stay. What it changes for connections already open: see
 * nbd_server_set_config() and netbrokerd(8), RELOADING. */
static void reload(struct nbd_server *srv, struct nbd_config **cfg, const struct options *o)
{
        struct nbd_config *next = NULL;
        struct nbd_err err = {0};
        int r;

        /* MONOTONIC_USEC: systemd 253 and later match the reload by it;
         * 252 (Debian 12) ignores what it does not know. */
        sd_notifyf(0, "RELOADING=1\nSTATUS=Reloading %s\nMONOTONIC_USEC=%" PRIu64, o->config_path,
                   monotonic_usec());
        r = nbd_config_reload(*cfg, o->config_path, o->config_required, &next, &err);
        /* Every value was checked by the parser: this does not fail. */
        if (r == 0 && configure_logging(next) < 0)
                r = nbd_err_set(&err, -EINVAL, "%s: bad log level or filters", o->config_path);
        if (r < 0) {
                nbd_error("reload refused, the configuration in force stays: %s", err.msg);
                sd_notifyf(0, "READY=1\nSTATUS=Serving; the last reload was refused: %s", err.msg);
                if (next) {
                        nbd_config_free(next);
                        free(next);
                }
                return;
        }
        nbd_server_set_config(srv, next);
        nbd_config_free(*cfg);
        free(*cfg);
        *cfg = next;
        nbd_notice("reloaded %s: %zu programs allowed, %zu policy sections", o->config_path,
                   next->n_exec_allow, next->policy.n);
        sd_notify(0, "READY=1\nSTATUS=Serving");
}

static int serve(struct nbd_config **cfg, const struct options *o, int n_activated, int listen_fd,
                 const sigset_t *handled, const char *devdir)
{
        const struct nbd_backend *be = &nbd_kernel_backend;
        struct nbd_loop *loop = NULL;
        struct nbd_server *srv = NULL;
        struct caps c = {0};
        struct lanes lanes = {0};
        struct sig_state sig = {0};
        int r, sfd = -1;

        r = nbd_loop_new(&loop);
        if (r < 0)
                return r;
        caps_open(be, loop, devdir, &c);
        /* Programs a previous helper started are adopted before any
         * client can ask to start them again. */
        r = nbd_programs_init(loop,
                              (*cfg)->program_dir ? (*cfg)->program_dir : NBD_PROGRAM_DEFAULT_DIR);
        if (r < 0)
                nbd_warn("no supervised programs: program_dir %s: %s (it must be a directory "
                         "of the helper's uid that no one else may write)",
                         (*cfg)->program_dir ? (*cfg)->program_dir : NBD_PROGRAM_DEFAULT_DIR,
                         strerror(-r));
        caps_watch_programs(&c);
        r = nbd_server_new(*cfg, loop, be, c.links, c.fw, c.fw_gone, c.bw, &srv);
        if (r < 0)
                goto out;
        lanes_open(loop, &c, &lanes);
        nbd_server_set_lanes(srv, lanes.fw, lanes.links);
        nbd_server_set_decode_lanes(srv, lanes.decode, lanes.decode_root);
        /* After the lanes: the firewall's sweep reads the table on its
         * lane while the loop starts serving. */
        caps_watch_gone(&c);
        if ((c.links && (r = nbd_server_on_job_end(srv, flush_gone_links, c.links)) < 0) ||
            (c.bw && (r = nbd_server_on_job_end(srv, flush_ifbs, c.bw)) < 0))
                goto out;
        sfd = signalfd(-1, handled, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0 || nbd_loop_add(loop, &sig.w, sfd, EPOLLIN, on_signal, &sig) < 0) {
                r = -errno;
                goto out;
        }
        if ((r = add_sockets(srv, o, n_activated, listen_fd)) < 0)
                goto out;
        nbd_info("serving (fd limit %u, %zu programs allowed)", (*cfg)->fd_limit,
                 (*cfg)->n_exec_allow);
        sd_notify(0, "READY=1\nSTATUS=Serving");
        while (!sig.quit && !nbd_server_done(srv)) {
                r = nbd_loop_iterate(loop);
                if (r < 0)
                        break;
                if (sig.reload) {
                        sig.reload = false;
                        reload(srv, cfg, o);
                }
        }
        r = sig.quit || nbd_server_done(srv) ? 0 : r;
        sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
out:
        /* Jobs whose call is on a lane are freed once it returned: the
         * lanes stop (a call under way ends first), then those frees run,
         * while what they use is still there. */
        if (srv) {
                nbd_server_shutdown(srv);
                nbd_server_set_lanes(srv, NULL, NULL);
                nbd_server_set_decode_lanes(srv, NULL, NULL);
        }
        nbd_lanes_free(lanes.all);
        nbd_loop_run_deferred(loop);
        nbd_server_free(srv);
        reap_children(be, loop);
        /* Supervised programs go on running for the next helper. */
        nbd_programs_shutdown();
        caps_close(be, &c);
        nbd_nfsock_close();
        if (sfd >= 0)
                close(sfd);
        nbd_loop_free(loop);
        return r;
}

/* Stage 1: keep 0-2 and our sockets (systemd's from 3, --fd's), close every
 * other fd we were started with. Returns 0 or -1 (said on stderr). */
static int keep_only_our_fds(const struct options *o, int n_activated)
{
        int first_stray = 3 + n_activated;

        if (o->conn_fd >= 0) {
                if (o->conn_fd >= first_stray && o->conn_fd > 3)
                        close_range((unsigned)first_stray, (unsigned)o->conn_fd - 1, 0);
                if (o->conn_fd >= first_stray)
                        first_stray = o->conn_fd + 1;
                if (fcntl(o->conn_fd, F_SETFD, FD_CLOEXEC) < 0) {
                        nbd_error("--fd %d: %s", o->conn_fd, strerror(errno));
                        return -1;
                }
        }
        close_range((unsigned)first_stray, ~0u, 0);
        return 0;
}

/* Stage 1 too: 0-2 open, on /dev/null when we were started without them.
 * Else the next fd made takes the number (a socket of ours as fd 2) and a
 * program that inherits 0-2 (a supervised one without program_log) gets
 * it. Returns 0 or -1 (said on stderr, if there is one). */
static int std_fds_open(void)
{
        for (int fd = 0; fd < 3; fd++) {
                int got;
                if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
                        continue;
                got = open("/dev/null", O_RDWR);
                if (got != fd) {
                        nbd_error("cannot put /dev/null on fd %d: %s", fd,
                                  got < 0 ? strerror(errno) : "another fd was taken");
                        if (got >= 0)
                                close(got);
                        return -1;
                }
        }
        return 0;
}

/* --check-config: stage 3 alone, touching nothing: no socket, no fd
 * closed, no mount, no privilege needed beyond reading the files. */
static int check_config(const struct options *o)
{
        struct nbd_config cfg; /* nbd_config_defaults() fills it */
        struct nbd_err err = {0};
        int r;

        nbd_config_defaults(&cfg);
        r = nbd_config_load(&cfg, o->config_path, o->config_required, &err);
        if (r < 0)
                nbd_error("%s", err.msg);
        else if (configure_logging(&cfg) < 0)
                r = -EINVAL;
        else
                printf("%s: valid (%zu programs allowed, %zu policy sections)\n", o->config_path,
                       cfg.n_exec_allow, cfg.policy.n);
        nbd_config_free(&cfg);
        return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
        struct options o = {0};
        struct nbd_config *cfg = NULL;
        sigset_t handled;
        struct nbd_err err = {0};
        const char *devdir;
        int r, n_activated, listen_fd = -1, ret = 1;

        if (parse_args(argc, argv, &o) < 0) {
                ret = 2;
                goto out;
        }
        if (o.check_config) {
                ret = check_config(&o);
                goto out;
        }
        /* Stage 1: keep 0-2, our sockets, nothing else. */
        n_activated = activated_sockets();
        if (n_activated < 0)
                goto out;
        if (n_activated == 0 && o.conn_fd < 0 && !o.listen_path) {
                nbd_error("nothing to serve: give --fd, --listen or use socket activation");
                usage(stderr);
                ret = 2;
                goto out;
        }
        /* Spawned by a client, the helper is part of that client, not a
         * service: its manager must hear nothing from us. */
        if (n_activated == 0 && !o.listen_path)
                unsetenv("NOTIFY_SOCKET");
        if (keep_only_our_fds(&o, n_activated) < 0 || std_fds_open() < 0)
                goto out;
        if (o.listen_path) {
                struct nbd_err e = {0};
                listen_fd = nbd_listen_on(o.listen_path, &o.listen, &e);
                if (listen_fd < 0) {
                        nbd_error("cannot listen on %s: %s", o.listen_path, e.msg);
                        goto out;
                }
        }

        /* Stage 2. */
        if (reset_signals(&handled) < 0 || chdir("/") < 0) {
                nbd_error("cannot reset signals or chdir: %s", strerror(errno));
                goto out;
        }

        /* Stage 3. A file that cannot be read, is not a regular file or
         * has a bad line stops start-up here. */
        cfg = malloc(sizeof(*cfg));
        if (!cfg) {
                nbd_error("out of memory");
                goto out;
        }
        nbd_config_defaults(cfg);
        r = nbd_config_load(cfg, o.config_path, o.config_required, &err);
        if (r < 0) {
                nbd_error("%s", err.msg);
                goto out;
        }
        if (configure_logging(cfg) < 0)
                goto out;
        /* Stage 4. */
        devdir = private_mounts();
        /* Stage 5. */
        r = lower_fd_limit(cfg->fd_limit);
        if (r < 0) {
                nbd_error("cannot set the fd limit to %u: %s", cfg->fd_limit, strerror(-r));
                goto out;
        }
        /* Stage 6. */
        r = drop_capabilities();
        if (r < 0) {
                nbd_error("cannot drop capabilities");
                goto out;
        }
        /* Stage 7. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                nbd_error("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
                goto out;
        }
        /* The log thread (stage 9): not before unshare() (stage 4), which
         * refuses a process with threads, nor before the capability drop. */
        if ((r = nbd_log_start()) < 0)
                nbd_warn("no log thread (%s): a log reader that stops reading stops the helper",
                         strerror(-r));
        /* Stage 8. */
        r = serve(&cfg, &o, n_activated, listen_fd, &handled, devdir);
        if (r < 0 && r != -ECANCELED)
                nbd_error("%s", strerror(-r));
        ret = r < 0 ? 1 : 0;
out:
        /* The last lines written (a second at most: see log.h). */
        nbd_log_stop();
        /* Also on the early exits, so that valgrind sees nothing lost. */
        if (cfg) {
                nbd_config_free(cfg);
                free(cfg);
        }
        free(o.config_path);
        free(o.listen_path);
        return ret;
}
