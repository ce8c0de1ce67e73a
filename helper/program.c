// SPDX-License-Identifier: LGPL-2.1-or-later
/* Supervised programs; see program.h. */
#include "program.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_start.h"
#include "config.h"
#include "log.h"
#include "spawn.h"
#include "stats.h"

NBD_LOG_CATEGORY(program);

#define PIDFILE_MAGIC "netbroker-program-1"
#define PIDFILE_MAX (256 * 1024)
/* Exited programs kept for ProgramList until stopped: the oldest go first. */
#define MAX_EXITED 64
/* How long a create waits for a program stopped for its gone interface
 * to die of SIGKILL (nbd_programs_fence): one in uninterruptible sleep. */
#define FENCE_MS 1000

struct nbd_program {
        struct nbd_program_info info;
        unsigned long long start_time; /* field 22 of /proc/PID/stat */
        struct nbd_watch pidw;
        struct nbd_timer kill_timer;
        struct nbd_program_waiter *waiters;
        /* Stopped by the helper (its interface went), not by a ProgramStop:
         * once exited it stays listed, as one that exited by itself. */
        bool keep;
        struct nbd_program *next; /* ascending id */
};

static struct {
        struct nbd_loop *loop;
        char *dir;
        struct nbd_program *head;
        uint64_t next_id;
} st = {.next_id = 1};

static void info_free(struct nbd_program_info *i)
{
        free(i->path);
        free(i->file);
        free(i->tag);
        for (size_t k = 0; i->argv && i->argv[k]; k++)
                free(i->argv[k]);
        free(i->argv);
}

static void program_free(void *data)
{
        struct nbd_program *p = data;

        info_free(&p->info);
        free(p);
}

static void list_insert(struct nbd_program *p)
{
        struct nbd_program **at = &st.head;

        while (*at && (*at)->info.id < p->info.id)
                at = &(*at)->next;
        p->next = *at;
        *at = p;
}

static void list_remove(struct nbd_program *p)
{
        for (struct nbd_program **at = &st.head; *at; at = &(*at)->next)
                if (*at == p) {
                        *at = p->next;
                        return;
                }
}

unsigned nbd_programs_running(void)
{
        unsigned n = 0;

        for (const struct nbd_program *p = st.head; p; p = p->next)
                n += p->info.running;
        return n;
}

unsigned nbd_programs_running_of(uid_t uid)
{
        unsigned n = 0;

        for (const struct nbd_program *p = st.head; p; p = p->next)
                n += p->info.running && p->info.uid == uid;
        return n;
}

struct nbd_program *nbd_program_by_id(uint64_t id)
{
        for (struct nbd_program *p = st.head; p; p = p->next)
                if (p->info.id == id)
                        return p;
        return NULL;
}

struct nbd_program *nbd_program_next(struct nbd_program *prev)
{
        return prev ? prev->next : st.head;
}

const struct nbd_program_info *nbd_program_info(const struct nbd_program *p)
{
        return &p->info;
}

static bool same_argv(char *const *a, char *const *b)
{
        size_t i = 0;

        for (; a[i] && b[i]; i++)
                if (strcmp(a[i], b[i]) != 0)
                        return false;
        return !a[i] && !b[i];
}

struct nbd_program *nbd_program_find_same(const struct nbd_program_spec *s)
{
        for (struct nbd_program *p = st.head; p; p = p->next)
                if (p->info.running && !p->info.stopping && p->info.uid == s->uid &&
                    strcmp(p->info.path, s->path) == 0 && strcmp(p->info.tag, s->tag) == 0 &&
                    same_argv(p->info.argv, s->argv))
                        return p;
        return NULL;
}

/* ---- /proc ---- */

/* Field 22 of /proc/PID/stat: the start time, in clock ticks after boot.
 * The command name (field 2) may hold spaces and parentheses: the fields
 * after it start after its last ')'. */
static int read_start_time(pid_t pid, unsigned long long *ret)
{
        char path[64], buf[1024], *s;
        unsigned long long v;
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = '\0';
        s = strrchr(buf, ')');
        /* After ')': field 3 (state) is the first; 22 is the 20th. */
        if (!s || sscanf(s + 1,
                         " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                         "%*d %*d %*d %llu",
                         &v) != 1)
                return -EIO;
        *ret = v;
        return 0;
}

/* /proc/PID/exe names `file`, or names it deleted: a package upgrade
 * replaces the file under a running dnsmasq, whose exe then reads
 * "FILE (deleted)". It is the same process all the same (the pidfd and
 * the start time say so); left unadopted, it would run on unsupervised
 * and the next ProgramStart would start a second one beside it. */
static bool exe_is(pid_t pid, const char *file)
{
        static const char deleted[] = " (deleted)";
        char path[64], exe[PATH_MAX];
        size_t len = strlen(file);
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
        n = readlink(path, exe, sizeof(exe) - 1);
        if (n < 0)
                return false;
        exe[n] = '\0';
        return strncmp(exe, file, len) == 0 &&
               (exe[len] == '\0' || strcmp(exe + len, deleted) == 0);
}

/* ---- pid files ---- */

static void pidfile_path(uint64_t id, char *buf, size_t len)
{
        snprintf(buf, len, "%s/%llu.pid", st.dir, (unsigned long long)id);
}

static int write_all(int fd, const char *s, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, s, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                s += n;
                len -= (size_t)n;
        }
        return 0;
}

static int write_field(int fd, const char *s)
{
        return write_all(fd, s, strlen(s) + 1);
}

/* Written to ID.pid.tmp and renamed: a helper killed meanwhile leaves no
 * half-written pid file (a .tmp is removed at the next start). */
static int pidfile_write(const struct nbd_program *p)
{
        char path[PATH_MAX], tmp[PATH_MAX + 8], num[3][32];
        int fd, r = 0;

        pidfile_path(p->info.id, path, sizeof(path));
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        snprintf(num[0], sizeof(num[0]), "%d", (int)p->info.pid);
        snprintf(num[1], sizeof(num[1]), "%llu", p->start_time);
        snprintf(num[2], sizeof(num[2]), "%u", (unsigned)p->info.uid);
        if ((r = write_field(fd, PIDFILE_MAGIC)) < 0 || (r = write_field(fd, num[0])) < 0 ||
            (r = write_field(fd, num[1])) < 0 || (r = write_field(fd, num[2])) < 0 ||
            (r = write_field(fd, p->info.file)) < 0 || (r = write_field(fd, p->info.path)) < 0 ||
            (r = write_field(fd, p->info.tag)) < 0)
                goto out;
        for (size_t i = 0; p->info.argv[i] && r == 0; i++)
                r = write_field(fd, p->info.argv[i]);
out:
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

static void pidfile_remove(uint64_t id)
{
        char path[PATH_MAX];

        pidfile_path(id, path, sizeof(path));
        if (unlink(path) < 0 && errno != ENOENT)
                nbd_warn("cannot remove %s: %s", path, strerror(errno));
}

/* ---- exit ---- */

static void notify_waiters(struct nbd_program *p)
{
        struct nbd_program_waiter *w = p->waiters;

        p->waiters = NULL;
        while (w) {
                struct nbd_program_waiter *next = w->next;
                w->next = NULL;
                w->fn(w->data);
                w = next;
        }
}

/* Keep at most MAX_EXITED exited programs for ProgramList. */
static void trim_exited(void)
{
        unsigned n = 0;

        for (const struct nbd_program *p = st.head; p; p = p->next)
                n += !p->info.running;
        for (struct nbd_program *p = st.head, *next; p && n > MAX_EXITED; p = next) {
                next = p->next;
                if (!p->info.running) {
                        list_remove(p);
                        nbd_loop_defer_free(st.loop, program_free, p);
                        n--;
                }
        }
}

static void close_watch(struct nbd_program *p)
{
        int fd = p->pidw.fd;

        if (fd < 0)
                return;
        nbd_loop_remove(st.loop, &p->pidw);
        p->pidw.fd = -1;
        close(fd);
}

static void on_exit_ready(struct nbd_watch *w, uint32_t events)
{
        struct nbd_program *p = w->data;
        siginfo_t si = {0};

        (void)events;
        if (!p->info.adopted) {
                /* The leader is a zombie until reaped: its process group id
                 * is still its own, so what is left of the group is the
                 * program's (helpers it forked) and goes with it. */
                kill(-p->info.pid, SIGKILL);
                if (waitid((idtype_t)P_PIDFD, (id_t)w->fd, &si, WEXITED | WNOHANG) < 0 ||
                    si.si_pid == 0)
                        return;
                if (si.si_code == CLD_EXITED)
                        p->info.exit_code = si.si_status;
                else
                        p->info.signal = si.si_status;
        } else {
                /* Not our child (init reaps it): gone, status unknown. */
                p->info.status_unknown = true;
        }
        close_watch(p);
        nbd_timer_cancel(st.loop, &p->kill_timer);
        p->info.running = false;
        pidfile_remove(p->info.id);
        nbd_stat_inc(NBD_STAT_PROGRAMS_EXITED);
        if (p->info.status_unknown)
                nbd_notice("program %llu (%s, pid %d, tag '%s') exited (adopted: status unknown)",
                           (unsigned long long)p->info.id, p->info.path, (int)p->info.pid,
                           p->info.tag);
        else if (p->info.signal)
                nbd_notice("program %llu (%s, pid %d, tag '%s') killed by signal %d%s",
                           (unsigned long long)p->info.id, p->info.path, (int)p->info.pid,
                           p->info.tag, p->info.signal, p->info.stopping ? " (stopped)" : "");
        else
                nbd_notice("program %llu (%s, pid %d, tag '%s') exited with status %d%s",
                           (unsigned long long)p->info.id, p->info.path, (int)p->info.pid,
                           p->info.tag, p->info.exit_code, p->info.stopping ? " (stopped)" : "");
        if (p->info.stopping && !p->keep) {
                list_remove(p);
                nbd_loop_defer_free(st.loop, program_free, p);
        }
        notify_waiters(p);
        trim_exited();
        /* Its spawn slot is free: an Exec waiting for one may run. */
        nbd_children_slot_freed();
}

static int watch(struct nbd_program *p, int pidfd)
{
        return nbd_loop_add(st.loop, &p->pidw, pidfd, EPOLLIN, on_exit_ready, p);
}

/* ---- start ---- */

static char **copy_argv(char *const *argv)
{
        size_t n = 0;
        char **out;

        while (argv[n])
                n++;
        out = calloc(n + 1, sizeof(*out));
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(out[i] = strdup(argv[i]))) {
                        for (size_t k = 0; k < i; k++)
                                free(out[k]);
                        free(out);
                        return NULL;
                }
        return out;
}

static struct nbd_program *program_new(const char *path, const char *file, const char *tag,
                                       char *const *argv, uid_t uid)
{
        struct nbd_program *p = calloc(1, sizeof(*p));

        if (!p)
                return NULL;
        p->pidw.fd = -1;
        p->info.uid = uid;
        p->info.path = strdup(path);
        p->info.file = strdup(file);
        p->info.tag = strdup(tag);
        p->info.argv = copy_argv(argv);
        if (!p->info.path || !p->info.file || !p->info.tag || !p->info.argv) {
                program_free(p);
                return NULL;
        }
        return p;
}

/* A session of its own (a stop signals its whole process group, and a
 * helper that dies takes nothing with it), default signal dispositions and
 * mask, /dev/null in and out, its log (or the helper's stderr) as stderr;
 * every other fd the helper holds is close-on-exec. As uid 0, with the
 * network capabilities alone (child_start.h). */
static int spawn_session(const struct nbd_program_spec *s, int log_fd, pid_t *ret)
{
        const struct nbd_child_start cs = {
                .path = s->file,
                .argv = s->argv,
                .envp = s->envp,
                .fds = {NBD_CHILD_NULL, NBD_CHILD_NULL, log_fd >= 0 ? log_fd : 2},
                .new_session = true,
        };

        return nbd_child_start(&cs, ret);
}

/* The bytes of a pid file for s, its numbers at their longest. */
static size_t pidfile_size(const struct nbd_program_spec *s)
{
        size_t n = sizeof(PIDFILE_MAGIC) + 3 * 21 + strlen(s->file) + 1 + strlen(s->path) + 1 +
                   strlen(s->tag) + 1;

        for (size_t i = 0; s->argv[i]; i++)
                n += strlen(s->argv[i]) + 1;
        return n;
}

int nbd_program_start(const struct nbd_program_spec *s, struct nbd_program **ret, struct nbd_err *e)
{
        struct nbd_program *p;
        int log_fd = -1, pidfd = -1, r;

        if (!st.loop)
                return nbd_err_set(e, -EOPNOTSUPP, "program: supervision is not running");
        /* A restarted helper reads at most PIDFILE_MAX of a pid file; one
         * longer would be taken as stale and its program left running,
         * unsupervised and counted against no one. */
        if (pidfile_size(s) > PIDFILE_MAX)
                return nbd_err_set(e, -E2BIG,
                                   "program: its path, tag and arguments take %zu bytes: a pid "
                                   "file holds at most %d, or a restarted helper could not find "
                                   "the program again",
                                   pidfile_size(s), PIDFILE_MAX);
        p = program_new(s->path, s->file, s->tag, s->argv, s->uid);
        if (!p)
                return nbd_err_oom(e, "starting a program");
        if (s->log_path) {
                log_fd = open(s->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
                              0640);
                if (log_fd < 0) {
                        r = -errno;
                        nbd_err_set(e, r, "program: cannot open program_log %s: %s", s->log_path,
                                    strerror(-r));
                        goto fail;
                }
        }
        r = spawn_session(s, log_fd, &p->info.pid);
        if (log_fd >= 0)
                close(log_fd);
        if (r < 0) {
                nbd_stat_inc(NBD_STAT_SPAWN_FAILURES);
                nbd_err_set(e, r, "program: cannot run %s: %s", s->path, strerror(-r));
                goto fail;
        }
        p->info.running = true;
        p->info.id = st.next_id++;
        /* The start time is the process's from its fork: the same before
         * and after its exec. */
        pidfd = pidfd_open(p->info.pid, 0);
        if (pidfd < 0) {
                r = -errno;
        } else if ((r = read_start_time(p->info.pid, &p->start_time)) == 0 &&
                   (r = watch(p, pidfd)) == 0) {
                pidfd = -1;
                r = pidfile_write(p);
        }
        if (r < 0) {
                nbd_err_set(e, r, "program: cannot supervise %s: %s", s->path, strerror(-r));
                /* Nothing may run unsupervised: kill and reap it now. */
                kill(-p->info.pid, SIGKILL);
                waitpid(p->info.pid, NULL, 0);
                if (pidfd >= 0)
                        close(pidfd);
                close_watch(p);
                goto fail;
        }
        nbd_stat_inc(NBD_STAT_SPAWNS);
        nbd_stat_inc(NBD_STAT_PROGRAMS_STARTED);
        list_insert(p);
        nbd_notice("program %llu: started %s as pid %d for uid %u (tag '%s')",
                   (unsigned long long)p->info.id, s->path, (int)p->info.pid, (unsigned)s->uid,
                   s->tag);
        *ret = p;
        return 0;
fail:
        program_free(p);
        return r;
}

/* ---- stop ---- */

static void signal_group(struct nbd_program *p, int sig)
{
        /* The leader is not reaped while we watch it, so -pid is still its
         * group; the pidfd reaches the leader even if it left the group. */
        kill(-p->info.pid, sig);
        if (p->pidw.fd >= 0)
                pidfd_send_signal(p->pidw.fd, sig, NULL, 0);
}

static void on_grace_over(void *data)
{
        struct nbd_program *p = data;

        nbd_info("program %llu (pid %d) still runs after SIGTERM: SIGKILL",
                 (unsigned long long)p->info.id, (int)p->info.pid);
        signal_group(p, SIGKILL);
}

void nbd_program_stop(struct nbd_program *p, unsigned grace_ms, struct nbd_program_waiter *w)
{
        /* Asked for (a ProgramStop, a NetRemove, an undo): once exited it
         * leaves the list, as every stopped program does. */
        p->keep = false;
        if (w) {
                w->next = p->waiters;
                p->waiters = w;
        }
        if (p->info.stopping)
                return;
        p->info.stopping = true;
        signal_group(p, SIGTERM);
        nbd_timer_arm(st.loop, &p->kill_timer, grace_ms, on_grace_over, p);
}

void nbd_program_cancel_wait(struct nbd_program_waiter *w)
{
        for (struct nbd_program *p = st.head; p; p = p->next)
                for (struct nbd_program_waiter **at = &p->waiters; *at; at = &(*at)->next)
                        if (*at == w) {
                                *at = w->next;
                                w->next = NULL;
                                return;
                        }
}

void nbd_program_forget(struct nbd_program *p)
{
        if (p->info.running)
                return;
        list_remove(p);
        nbd_loop_defer_free(st.loop, program_free, p);
}

/* ---- interfaces that go ---- */

bool nbd_program_serves(const struct nbd_program_info *i, const char *name)
{
        static const char opt[] = "--interface=";
        size_t len = strlen(name);

        for (size_t k = 1; i->argv[k]; k++) {
                const char *arg = i->argv[k];
                if (strncmp(arg, opt, sizeof(opt) - 1) != 0)
                        continue;
                for (const char *at = arg + sizeof(opt) - 1; *at;
                     at += strcspn(at, ","), at += *at == ',')
                        if (strncmp(at, name, len) == 0 && (at[len] == ',' || !at[len]))
                                return true;
        }
        return false;
}

/* Root's programs are root's to order (link_users.h): only a caller other
 * than root is held to the interfaces that are its own. */
static void stop_for_link(struct nbd_program *p, const char *name, const char *why)
{
        if (!p->info.running || p->info.uid == 0 || p->info.gone_link[0])
                return;
        snprintf(p->info.gone_link, sizeof(p->info.gone_link), "%s", name);
        nbd_stat_inc(NBD_STAT_PROGRAMS_LINK_GONE);
        nbd_warn("program %llu (%s, pid %d, uid %u, tag '%s') serves %s, which %s: stopping it, "
                 "or it would serve the next interface of that name, whoever makes it",
                 (unsigned long long)p->info.id, p->info.path, (int)p->info.pid,
                 (unsigned)p->info.uid, p->info.tag, name, why);
        /* Stopping already (a ProgramStop's grace): the fence kills it
         * before the next create all the same. */
        if (p->info.stopping)
                return;
        nbd_program_stop(p, NBD_PROGRAM_DEFAULT_GRACE_MS, NULL);
        p->keep = true;
}

void nbd_programs_link_gone(const char *name)
{
        for (struct nbd_program *p = st.head; p; p = p->next)
                if (nbd_program_serves(&p->info, name))
                        stop_for_link(p, name, "went away");
}

/* The pidfd turns readable once the process has exited: its sockets are
 * closed then. The loop reaps it (the pidfd stays readable): here the
 * create only waits, so that no job's stop waiter runs from inside it. */
static bool exited_within(struct nbd_program *p, int ms)
{
        struct pollfd pfd = {.fd = p->pidw.fd, .events = POLLIN};
        int r;

        if (p->pidw.fd < 0)
                return true;
        do
                r = poll(&pfd, 1, ms);
        while (r < 0 && errno == EINTR);
        return r > 0;
}

int nbd_programs_fence(struct nbd_err *e)
{
        for (struct nbd_program *p = st.head; p; p = p->next) {
                if (!p->info.running || !p->info.gone_link[0] || exited_within(p, 0))
                        continue;
                nbd_info("program %llu (pid %d) served %s, which went away: SIGKILL before an "
                         "interface is made",
                         (unsigned long long)p->info.id, (int)p->info.pid, p->info.gone_link);
                signal_group(p, SIGKILL);
                if (!exited_within(p, FENCE_MS))
                        return nbd_err_set(e, -EBUSY,
                                           "program %llu (pid %d) served %s, which went away, and "
                                           "still runs %d ms after SIGKILL: no interface is made "
                                           "until it has gone (try again)",
                                           (unsigned long long)p->info.id, (int)p->info.pid,
                                           p->info.gone_link, FENCE_MS);
        }
        return 0;
}

void nbd_programs_sweep_links(int (*owner_of)(void *links, const char *name, uid_t *ret),
                              void *links)
{
        for (struct nbd_program *p = st.head; p; p = p->next) {
                if (!p->info.running || p->info.uid == 0)
                        continue;
                for (size_t k = 1; p->info.argv[k] && !p->info.gone_link[0]; k++) {
                        static const char opt[] = "--interface=";
                        const char *at = p->info.argv[k];
                        if (strncmp(at, opt, sizeof(opt) - 1) != 0)
                                continue;
                        for (at += sizeof(opt) - 1; *at && !p->info.gone_link[0];
                             at += strcspn(at, ","), at += *at == ',') {
                                char name[IFNAMSIZ];
                                size_t len = strcspn(at, ",");
                                uid_t owner;
                                int r;
                                if (len == 0 || len >= sizeof(name))
                                        continue;
                                memcpy(name, at, len);
                                name[len] = '\0';
                                r = owner_of(links, name, &owner);
                                /* Unmarked: made outside the helper, as it
                                 * was when the program started on it
                                 * (program_args = any). */
                                if (r == -ENODEV)
                                        stop_for_link(p, name, "went away while no helper ran");
                                else if (r == 0 && owner != p->info.uid)
                                        stop_for_link(p, name,
                                                      "was made again since, for another uid");
                        }
                }
        }
}

/* ---- start-up ---- */

/* The NUL-separated fields of a pid file. */
struct pidfile {
        char *buf;
        char *f[7]; /* magic pid start uid file path tag */
        char **argv; /* into buf, NULL-terminated */
};

static int pidfile_read(int dfd, const char *name, struct pidfile *ret)
{
        int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct pidfile pf = {0};
        size_t len = 0, n_fields = 0;
        struct stat sb;
        int r = -EINVAL;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > PIDFILE_MAX ||
            !(pf.buf = malloc((size_t)sb.st_size + 1)))
                goto out;
        while (len < (size_t)sb.st_size) {
                ssize_t n = read(fd, pf.buf + len, (size_t)sb.st_size - len);
                if (n <= 0)
                        goto out;
                len += (size_t)n;
        }
        pf.buf[len] = '\0';
        for (size_t i = 0; i < len; i++)
                n_fields += pf.buf[i] == '\0';
        if (len == 0 || pf.buf[len - 1] != '\0' || n_fields < 8 ||
            !(pf.argv = calloc(n_fields - 7 + 1, sizeof(char *))))
                goto out;
        for (size_t i = 0, k = 0, off = 0; off < len; i++) {
                char *s = pf.buf + off;
                if (i < 7)
                        pf.f[i] = s;
                else
                        pf.argv[k++] = s;
                off += strlen(s) + 1;
        }
        if (strcmp(pf.f[0], PIDFILE_MAGIC) != 0)
                goto out;
        *ret = pf;
        pf = (struct pidfile){0};
        r = 0;
out:
        free(pf.buf);
        free(pf.argv);
        close(fd);
        return r;
}

/* Adopt the program of pid file `name` (ID.pid) if it still runs: 0 when
 * adopted, 1 when stale, -errno. */
static int adopt(int dfd, const char *name, uint64_t id)
{
        struct pidfile pf = {0}; /* gcc -O2 cannot see read_pidfile() fill it */
        unsigned long long pid, start, uid, now;
        struct nbd_program *p = NULL;
        int pidfd = -1, r = pidfile_read(dfd, name, &pf);

        if (r < 0)
                return 1;
        r = 1;
        if (nbd_parse_u64(pf.f[1], 1, INT_MAX, &pid) < 0 ||
            nbd_parse_u64(pf.f[2], 0, ULLONG_MAX, &start) < 0 ||
            nbd_parse_u64(pf.f[3], 0, (uid_t)-2, &uid) < 0)
                goto out;
        /* The pidfd first: once the start time read after it matches, the
         * pidfd is that process's, whatever reuses the number later. */
        pidfd = pidfd_open((pid_t)pid, 0);
        if (pidfd < 0)
                goto out;
        if (read_start_time((pid_t)pid, &now) < 0 || now != start || !exe_is((pid_t)pid, pf.f[4])) {
                nbd_info("%s: pid %llu is another process now: not adopted", name, pid);
                goto out;
        }
        p = program_new(pf.f[5], pf.f[4], pf.f[6], pf.argv, (uid_t)uid);
        if (!p) {
                r = -ENOMEM;
                goto out;
        }
        p->info.id = id;
        p->info.pid = (pid_t)pid;
        p->info.running = p->info.adopted = true;
        p->start_time = start;
        if ((r = watch(p, pidfd)) < 0)
                goto out;
        pidfd = -1;
        list_insert(p);
        nbd_stat_inc(NBD_STAT_PROGRAMS_ADOPTED);
        nbd_notice("program %llu: adopted %s, pid %d (tag '%s')", (unsigned long long)id,
                   p->info.path, (int)p->info.pid, p->info.tag);
        p = NULL;
        r = 0;
out:
        if (p)
                program_free(p);
        if (pidfd >= 0)
                close(pidfd);
        free(pf.buf);
        free(pf.argv);
        return r;
}

/* "123.pid" -> 123; else 0. */
static uint64_t pidfile_id(const char *name)
{
        unsigned long long id;
        char num[24];
        size_t n = strlen(name);

        if (n < 5 || n - 4 >= sizeof(num) || strcmp(name + n - 4, ".pid") != 0)
                return 0;
        memcpy(num, name, n - 4);
        num[n - 4] = '\0';
        return nbd_parse_u64(num, 1, UINT64_MAX - 1, &id) == 0 ? id : 0;
}

static void adopt_all(void)
{
        DIR *d = opendir(st.dir);
        struct dirent *de;

        if (!d) {
                nbd_warn("%s: %s: no program adopted", st.dir, strerror(errno));
                return;
        }
        while ((de = readdir(d))) {
                uint64_t id = pidfile_id(de->d_name);
                size_t n = strlen(de->d_name);
                int r;

                if (n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0) {
                        unlinkat(dirfd(d), de->d_name, 0);
                        continue;
                }
                if (!id)
                        continue;
                /* A stale file's id is not reused either. */
                if (id >= st.next_id)
                        st.next_id = id + 1;
                r = adopt(dirfd(d), de->d_name, id);
                if (r == 1) {
                        nbd_info("%s/%s: stale pid file removed", st.dir, de->d_name);
                        unlinkat(dirfd(d), de->d_name, 0);
                } else if (r < 0) {
                        nbd_warn("%s/%s: %s: not adopted", st.dir, de->d_name, strerror(-r));
                }
        }
        closedir(d);
}

/* The pid files decide what is adopted, and for whom: a directory someone
 * else may write in lets them name any process that runs an allowed file
 * (the system's dnsmasq) as their program, to stop it. */
static int dir_trusted(const char *dir)
{
        struct stat sb;

        if (lstat(dir, &sb) < 0)
                return -errno;
        if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & (S_IWGRP | S_IWOTH)))
                return -EPERM;
        return 0;
}

int nbd_programs_init(struct nbd_loop *l, const char *dir)
{
        char *copy = strdup(dir);
        int r;

        if (!copy)
                return -ENOMEM;
        r = mkdir(copy, 0700) < 0 && errno != EEXIST ? -errno : dir_trusted(copy);
        if (r < 0) {
                free(copy);
                return r;
        }
        free(st.dir);
        st.dir = copy;
        st.loop = l;
        adopt_all();
        return 0;
}

void nbd_programs_shutdown(void)
{
        while (st.head) {
                struct nbd_program *p = st.head;
                st.head = p->next;
                close_watch(p);
                nbd_timer_cancel(st.loop, &p->kill_timer);
                program_free(p);
        }
        free(st.dir);
        st.dir = NULL;
        st.loop = NULL;
}
