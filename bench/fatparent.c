// SPDX-License-Identifier: LGPL-2.1-or-later
/* Make this process look like the management daemon the seeds describe: a
 * high fd limit, hundreds of fds open, and a large heap whose every page is
 * mapped. Without this, fork() from a 2 MiB process costs next to nothing
 * and the comparison with the helper would flatter fork. Then its children,
 * libvirt's way: fork, close, exec. */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int bench_count_fds(int pid)
{
        char path[64];
        struct dirent *de;
        DIR *d;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", pid);
        d = opendir(path);
        if (!d)
                return -errno;
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        /* Our own count includes the fd of the directory stream. */
        return pid == getpid() ? n - 1 : n;
}

/* One fat parent for the whole process: `all` runs every scenario from the
 * same image (touching 1 GiB takes seconds); it lives until exit. */
static struct bench_fat_parent fat = {.devnull = -1};

static int fat_setup(void)
{
        struct rlimit rl;
        long page = sysconf(_SC_PAGESIZE);
        uintptr_t lo, hi;
        char *heap;
        int n;

        /* The soft limit is what libvirt's close loop walks; the hard one
         * stays as high as it was, so that names can raise the soft one
         * for its 10,000 fds without CAP_SYS_RESOURCE. */
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        rl.rlim_cur = BENCH_FAT_FD_LIMIT;
        rl.rlim_max = rl.rlim_max > BENCH_FAT_FD_LIMIT ? rl.rlim_max : BENCH_FAT_FD_LIMIT;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        /* Inheritable on purpose: these stand for the fds a daemon leaks into
         * children unless something closes them before exec. */
        fat.devnull = open("/dev/null", O_RDWR);
        for (unsigned i = 1; fat.devnull >= 0 && i < BENCH_FAT_FDS; i++)
                if (fcntl(fat.devnull, F_DUPFD, 3) < 0)
                        return -errno;
        heap = malloc(BENCH_FAT_HEAP);
        if (fat.devnull < 0 || !heap)
                return fat.devnull < 0 ? -errno : -ENOMEM;
        /* A daemon's heap is made of small pages; one huge-page mapping would
         * make the page-table copy in fork() 512 times cheaper. */
        lo = ((uintptr_t)heap + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
        hi = ((uintptr_t)heap + BENCH_FAT_HEAP) & ~((uintptr_t)page - 1);
        if (hi > lo)
                (void)madvise((void *)lo, hi - lo, MADV_NOHUGEPAGE);
        /* Not zero: malloc+memset(0) may become calloc, its pages unmapped. */
        memset(heap, 0x5a, BENCH_FAT_HEAP);
        n = bench_count_fds(getpid());
        if (n < 0)
                return n;
        fat.fd_limit = BENCH_FAT_FD_LIMIT;
        fat.fds_open = (unsigned)n;
        fat.heap_bytes = BENCH_FAT_HEAP;
        return 0;
}

int bench_fat_parent(struct bench_fat_parent *ret)
{
        static int state = 1; /* 1: not tried yet; 0 or -errno after */

        if (state == 1 && (state = fat_setup()) < 0)
                bench_log("netbroker-bench: cannot set up the fat parent: %s\n", strerror(-state));
        if (state == 0 && ret)
                *ret = fat;
        return state;
}

/* The child's output until EOF, then the child reaped, even when reading
 * failed: no zombie left behind. */
static int collect(int fd, pid_t pid, char *out, size_t cap, size_t *ret_len, int *ret_status)
{
        char scratch[4096];
        size_t len = 0;
        ssize_t n;
        int r = 0;

        while ((n = read(fd, scratch, sizeof(scratch))) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        break;
                }
                n = (size_t)n < cap - 1 - len ? n : (ssize_t)(cap - 1 - len);
                memcpy(out + len, scratch, (size_t)n);
                len += (size_t)n;
        }
        out[len] = '\0';
        *ret_len = len;
        close(fd);
        while (waitpid(pid, ret_status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return r;
}

/* The fixed environment the helper gives its children; the baselines'
 * children get the same, as libvirt's virCommand gave them a cleaned one. */
static const char *const child_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};

static _Noreturn void child_fail(const char *what)
{
        /* write(2) only: this runs between fork and exec. */
        ssize_t n = write(2, what, strlen(what));
        (void)n;
        _exit(127);
}

static int run_child(bool close_range, long open_max, int in_fd, const char *path,
                     char *const *argv, char *out, size_t cap, size_t *ret_len, int *ret_status)
{
        int pfd[2], r;
        pid_t pid;

        /* Taken before fork, as virExec did: the child calls nothing it
         * need not. */
        if (open_max == 0)
                open_max = sysconf(_SC_OPEN_MAX);
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                r = -errno;
                close(pfd[0]);
                close(pfd[1]);
                return r;
        }
        if (pid == 0) {
                if (dup2(in_fd, 0) < 0 || dup2(pfd[1], 1) < 0 || dup2(pfd[1], 2) < 0)
                        child_fail("netbroker-bench: dup2 failed in the child\n");
                /* close_range by the raw call: glibc before 2.34 has no
                 * wrapper; the 2018 loop: every fd number, open or not. */
                if (close_range && syscall(SYS_close_range, 3u, ~0u, 0u) < 0)
                        child_fail("netbroker-bench: close_range failed in the child\n");
                for (long fd = 3; !close_range && fd < open_max; fd++)
                        close((int)fd);
                execve(path, argv, (char *const *)child_env);
                child_fail("netbroker-bench: execve failed in the child\n");
        }
        close(pfd[1]);
        return collect(pfd[0], pid, out, cap, ret_len, ret_status);
}

int bench_fork_exec(bool close_range, long open_max, const char *path, char *const *argv, char *out,
                    size_t cap, size_t *ret_len, int *ret_status)
{
        return run_child(close_range, open_max, fat.devnull, path, argv, out, cap, ret_len,
                         ret_status);
}

int bench_run_quiet(const char *who, const char *path, char *const *argv, int in_fd, char *out,
                    size_t cap, size_t *ret_len)
{
        size_t len;
        int st, r = run_child(true, 0, in_fd >= 0 ? in_fd : fat.devnull, path, argv, out, cap, &len,
                              &st);

        if (r == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                bench_log("netbroker-bench: %s%s %s failed: %s\n", who, argv[0],
                          argv[1] ? argv[1] : "", out);
                r = -EIO;
        }
        if (r == 0 && ret_len)
                *ret_len = len;
        return r;
}
