// SPDX-License-Identifier: LGPL-2.1-or-later
/* Starting a program; see child_start.h. */
#include "child_start.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* What every child keeps; and what it takes, for a moment, to become its
 * caller. All below 32: the first word of the capability sets. */
#define CHILD_CAPS ((1u << CAP_NET_ADMIN) | (1u << CAP_NET_RAW))
#define SETID_CAPS ((1u << CAP_SETUID) | (1u << CAP_SETGID))

/* The 32-bit id calls where the plain ones take 16-bit ids (i386, 32-bit
 * ARM), as glibc's own wrappers pick them: with the 16-bit one, uid 65535
 * would be -1, "unchanged", and the child would stay uid 0. */
#ifdef SYS_setresuid32
#define SETRESUID_NR SYS_setresuid32
#define SETRESGID_NR SYS_setresgid32
#define SETGROUPS_NR SYS_setgroups32
#else
#define SETRESUID_NR SYS_setresuid
#define SETRESGID_NR SYS_setresgid
#define SETGROUPS_NR SYS_setgroups
#endif

/* The child's stack: the loop's thread alone starts children, and
 * CLONE_VFORK holds it until the child has exec'd or exited. As glibc's
 * posix_spawn, a page or so is used; the rest is room. */
#define CHILD_STACK (64 * 1024)
static _Alignas(64) char child_stack[CHILD_STACK];

struct child_args {
        const struct nbd_child_start *s;
        uint32_t permitted; /* the helper's, first word */
        bool fork; /* a caller's child: its own copy of the memory */
        int err; /* the vfork child's errno before its exec; 0: it exec'd */
};

/* The calling thread's sets, first word. */
static void own_caps(uint32_t *effective, uint32_t *permitted, uint32_t *inheritable)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2] = {{0}};

        if (syscall(SYS_capget, &h, d) < 0)
                d[0].effective = d[0].permitted = d[0].inheritable = 0;
        *effective = d[0].effective;
        *permitted = d[0].permitted;
        *inheritable = d[0].inheritable;
}

bool nbd_child_can_run_as_caller(void)
{
        uint32_t eff, prm, inh;

        own_caps(&eff, &prm, &inh);
        return (prm & (SETID_CAPS | (1u << CAP_KILL))) == (SETID_CAPS | (1u << CAP_KILL));
}

static int set_caps(uint32_t effective, uint32_t permitted, uint32_t inheritable);

void nbd_child_kill(pid_t pid, int pidfd)
{
        const uint32_t kill_cap = 1u << CAP_KILL;
        uint32_t eff, prm, inh;
        bool raised;

        /* CAP_KILL is effective in this thread for these calls alone (a
         * capset changes the calling thread's sets): the rest of the
         * helper, lanes included, cannot signal another uid's process. */
        own_caps(&eff, &prm, &inh);
        raised = (prm & kill_cap) && !(eff & kill_cap) && set_caps(eff | kill_cap, prm, inh) == 0;
        /* The group, and the process itself: a caller's fork may not have
         * made its group yet, and a stopped one must die too (SIGKILL
         * ends a stopped process). Not reaped yet: neither id is reused. */
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        if (pidfd >= 0)
                pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
        if (raised)
                set_caps(eff, prm, inh);
}

/* ---- in the child: system calls only (it runs on the helper's memory,
 * with the calling thread's TLS; glibc's setuid family would signal the
 * helper's threads, so those are raw system calls) ---- */

static int set_caps(uint32_t effective, uint32_t permitted, uint32_t inheritable)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2] = {{effective, permitted, inheritable}, {0, 0, 0}};

        return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

static int become_caller(const struct nbd_peer *p, uint32_t keep)
{
        /* -1 is "unchanged" to setres*id: never a uid or gid to run as. */
        if (p->uid == (uid_t)-1 || p->gid == (gid_t)-1)
                return -EINVAL;
        /* Keep the permitted set across the uid change; SETUID/SETGID
         * effective for the change itself (EPERM without them: the child
         * never runs as uid 0 instead). */
        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                return -errno;
        int r = set_caps(keep | SETID_CAPS, keep | SETID_CAPS, keep);
        if (r < 0)
                return r;
        if (syscall(SETGROUPS_NR, p->n_groups, p->groups) < 0 ||
            syscall(SETRESGID_NR, p->gid, p->gid, p->gid) < 0 ||
            syscall(SETRESUID_NR, p->uid, p->uid, p->uid) < 0)
                return -errno;
        if ((r = set_caps(keep, keep, keep)) < 0)
                return r;
        /* Ambient: what a program of a uid other than 0 keeps across exec. */
        for (unsigned cap = 0; cap < 32; cap++)
                if ((keep & (1u << cap)) &&
                    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
                        return -errno;
        return 0;
}

static int child_fds(const int fds[3])
{
        for (int i = 0; i < 3; i++) {
                int fd = fds[i];
                if (fd == NBD_CHILD_NULL) {
                        fd = open("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
                        if (fd < 0)
                                return -errno;
                        /* 0-2 are always open in the helper: never i. */
                        if (dup2(fd, i) < 0)
                                return -errno;
                        close(fd);
                } else if (fd == i) {
                        /* Inherited as it is (the helper's stderr). */
                        if (fcntl(i, F_SETFD, 0) < 0)
                                return -errno;
                } else if (dup2(fd, i) < 0) {
                        return -errno;
                }
        }
        return 0;
}

/* The errno of a caller's child that never ran its program, on its
 * stderr (the helper's pipe by then) before it exits 127, for
 * nbd_child_start_error(): no more fds than the pipes it has. Digits by
 * hand: nothing of stdio here. */
static void say_errno(int e)
{
        char line[sizeof(NBD_CHILD_ERRNO_MARK) + 12] = NBD_CHILD_ERRNO_MARK;
        size_t n = sizeof(NBD_CHILD_ERRNO_MARK) - 1;
        char digits[12];
        size_t k = 0;

        do
                digits[k++] = (char)('0' + e % 10);
        while ((e /= 10) > 0 && k < sizeof(digits));
        while (k > 0)
                line[n++] = digits[--k];
        line[n++] = '\n';
        if (write(2, line, n) < 0)
                return; /* 127 alone says it */
}

static int child_main(void *data)
{
        struct child_args *a = data;
        const struct nbd_child_start *s = a->s;
        const bool as_caller = a->fork;
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        uint32_t keep = a->permitted & CHILD_CAPS;
        bool have_fds = false;
        sigset_t none;
        int r = 0;

        /* Default dispositions (the helper ignores SIGPIPE); the mask,
         * all blocked by the parent, is emptied last. EINVAL for the
         * signals that cannot be changed, and glibc's own. */
        for (int sig = 1; sig < NSIG; sig++)
                sigaction(sig, &dfl, NULL);
        if ((s->new_session ? setsid() : setpgid(0, 0)) < 0)
                r = -errno;
        if (r == 0)
                r = child_fds(s->fds);
        have_fds = r == 0;
        /* A fork holds a copy of every fd of the helper's until its exec,
         * and a caller may stop it before (once it is the caller's): none
         * but 0-2 may stay (another client's stdin pipe held open). */
        if (r == 0 && as_caller && syscall(SYS_close_range, 3u, ~0u, 0u) < 0)
                r = -errno;
        if (r == 0)
                r = as_caller ? become_caller(s->as, keep) : set_caps(keep, keep, 0);
        /* Its pid from the kernel: the fork child's glibc caches are the
         * helper's thread's. */
        if (r == 0 && s->test_stop && as_caller)
                syscall(SYS_kill, syscall(SYS_getpid), SIGSTOP);
        if (r == 0) {
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                execve(s->path, s->argv, s->envp);
                r = -errno;
        }
        if (as_caller && have_fds)
                say_errno(-r);
        else
                a->err = -r;
        _exit(127);
}

int nbd_child_start(const struct nbd_child_start *s, pid_t *ret)
{
        const bool as_caller = s->as && s->as->uid != 0;
        struct child_args a = {.s = s, .fork = as_caller};
        uint32_t eff, inh;
        sigset_t all, old;
        pid_t pid;
        int saved;

        own_caps(&eff, &a.permitted, &inh);
        for (int i = 0; i < 3; i++)
                if (s->fds[i] != NBD_CHILD_NULL && s->fds[i] < 3 && s->fds[i] != i)
                        return -EINVAL; /* would be overwritten by another's dup2 */
        /* No handler of the helper's may run in the child (on its stack,
         * or on the copy of the helper's). */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (as_caller)
                /* A fork without glibc's atfork handlers: the child makes
                 * system calls only. */
                pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
        else
                pid = clone(child_main, child_stack + sizeof(child_stack),
                            CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
        if (as_caller && pid == 0)
                child_main(&a); /* does not return */
        saved = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                return -saved;
        if (a.err) {
                /* It never exec'd: reap it here, no zombie is left (a vfork
                 * child, or a fork that failed before its fds were set). */
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                return -a.err;
        }
        *ret = pid;
        return 0;
}

int nbd_child_start_error(int exit_code, const uint8_t *err, size_t len)
{
        const size_t mark = sizeof(NBD_CHILD_ERRNO_MARK) - 1;
        int e = 0;

        if (exit_code != 127 || len <= mark || memcmp(err, NBD_CHILD_ERRNO_MARK, mark) != 0)
                return 0;
        for (size_t i = mark; i < len && err[i] >= '0' && err[i] <= '9' && e < 100000; i++)
                e = e * 10 + (err[i] - '0');
        return e;
}
