// SPDX-License-Identifier: LGPL-2.1-or-later
/* Starting a program; see child_start.h. */
#include "child_start.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* What every child keeps; and what it takes, for a moment, to become its
 * caller. All below 32: the first word of the capability sets. */
#define CHILD_CAPS ((1u << CAP_NET_ADMIN) | (1u << CAP_NET_RAW))
#define SETID_CAPS ((1u << CAP_SETUID) | (1u << CAP_SETGID))

/* The child's stack: the loop's thread alone starts children, and
 * CLONE_VFORK holds it until the child has exec'd or exited. As glibc's
 * posix_spawn, a page or so is used; the rest is room. */
#define CHILD_STACK (64 * 1024)
static _Alignas(64) char child_stack[CHILD_STACK];

struct child_args {
        const struct nbd_child_start *s;
        uint32_t permitted; /* the helper's, first word */
        int err; /* the vfork child's errno before its exec; 0: it exec'd */
        int status_fd; /* the fork child's end of the status pipe, or -1 */
};

static void own_caps(uint32_t *effective, uint32_t *permitted)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2] = {{0}};

        if (syscall(SYS_capget, &h, d) < 0)
                d[0].effective = d[0].permitted = 0;
        *effective = d[0].effective;
        *permitted = d[0].permitted;
}

bool nbd_child_can_run_as_caller(void)
{
        uint32_t eff, prm;

        own_caps(&eff, &prm);
        return (prm & SETID_CAPS) == SETID_CAPS && (eff & (1u << CAP_KILL));
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
        if (syscall(SYS_setgroups, p->n_groups, p->groups) < 0 ||
            syscall(SYS_setresgid, p->gid, p->gid, p->gid) < 0 ||
            syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0)
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

static int child_main(void *data)
{
        struct child_args *a = data;
        const struct nbd_child_start *s = a->s;
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        uint32_t keep = a->permitted & CHILD_CAPS;
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
        if (r == 0)
                r = a->status_fd >= 0 ? become_caller(s->as, keep) : set_caps(keep, keep, 0);
        /* Its pid from the kernel: the fork child's glibc caches are the
         * helper's thread's. */
        if (r == 0 && s->test_stop && a->status_fd >= 0)
                syscall(SYS_kill, syscall(SYS_getpid), SIGSTOP);
        if (r == 0) {
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                execve(s->path, s->argv, s->envp);
                r = -errno;
        }
        if (a->status_fd >= 0) {
                int e = -r;
                /* 4 bytes into a new pipe cannot block; a failed write
                 * still ends in 127 and end of file. */
                if (write(a->status_fd, &e, sizeof(e)) < 0)
                        r = -EIO;
        } else {
                a->err = -r;
        }
        _exit(127);
}

int nbd_child_start(const struct nbd_child_start *s, pid_t *ret, int *ret_status)
{
        const bool as_caller = s->as && s->as->uid != 0;
        struct child_args a = {.s = s, .status_fd = -1};
        int status[2] = {-1, -1}, saved;
        uint32_t eff;
        sigset_t all, old;
        pid_t pid;

        own_caps(&eff, &a.permitted);
        for (int i = 0; i < 3; i++)
                if (s->fds[i] != NBD_CHILD_NULL && s->fds[i] < 3 && s->fds[i] != i)
                        return -EINVAL; /* would be overwritten by another's dup2 */
        if (as_caller) {
                if (pipe2(status, O_CLOEXEC) < 0)
                        return -errno;
                a.status_fd = status[1];
        }
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
        if (as_caller)
                close(status[1]);
        if (pid < 0) {
                if (as_caller)
                        close(status[0]);
                return -saved;
        }
        if (a.err) {
                /* It never exec'd: reap it here, no zombie is left. */
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                return -a.err;
        }
        *ret = pid;
        *ret_status = status[0];
        return 0;
}
