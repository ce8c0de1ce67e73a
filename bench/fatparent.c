/* Make this process look like the management daemon the seeds describe: a
 * high fd limit, hundreds of fds open, and a large heap whose every page is
 * mapped. Without this, fork() from a 2 MiB process costs next to nothing
 * and the comparison with the helper would flatter fork. */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
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

        if (pid > 0)
                snprintf(path, sizeof(path), "/proc/%d/fd", pid);
        else
                snprintf(path, sizeof(path), "/proc/self/fd");
        d = opendir(path);
        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        /* Our own count includes the fd of the directory stream. */
        return pid > 0 ? n : n - 1;
}

static void close_fds(int *fds, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                close(fds[i]);
}

/* Inheritable on purpose: these stand for the fds a daemon leaks into
 * children unless something closes them before exec. */
static int open_fds(unsigned n, int *fds)
{
        int r;

        if (n == 0)
                return 0;
        fds[0] = open("/dev/null", O_RDWR);
        if (fds[0] < 0)
                return -errno;
        for (unsigned i = 1; i < n; i++) {
                fds[i] = fcntl(fds[0], F_DUPFD, 3);
                if (fds[i] < 0) {
                        r = -errno;
                        close_fds(fds, i);
                        return r;
                }
        }
        return 0;
}

static void *touched_heap(size_t bytes)
{
        long page = sysconf(_SC_PAGESIZE);
        char *p = malloc(bytes);
        uintptr_t lo, hi;

        if (!p)
                return NULL;
        /* A daemon's heap is made of small pages; a single huge-page mapping
         * would make the page-table copy in fork() 512 times cheaper. The
         * advice only applies to whole pages inside the block. */
        lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
        hi = ((uintptr_t)p + bytes) & ~((uintptr_t)page - 1);
        if (hi > lo)
                (void)madvise((void *)lo, hi - lo, MADV_NOHUGEPAGE);
        /* Not zero: the compiler may turn malloc+memset(0) into calloc, and
         * fresh anonymous pages would then stay unmapped. */
        memset(p, 0x5a, bytes);
        return p;
}

/* `all` runs every scenario from one fat parent: set up once (touching
 * 1 GiB takes seconds), and every scenario forks from the same process
 * image. A setup with the same figures while one is held shares it. */
static struct bench_fat_parent shared;
static unsigned shared_refs;

static int fat_parent_make(unsigned fd_limit, unsigned fds, size_t heap_bytes,
                           struct bench_fat_parent *ret)
{
        struct rlimit rl = {.rlim_cur = fd_limit, .rlim_max = fd_limit};
        int *held = NULL, n_open, r;
        void *heap;

        if (fds >= fd_limit)
                return -EINVAL;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        held = calloc(fds ? fds : 1, sizeof(*held));
        if (!held)
                return -ENOMEM;
        r = open_fds(fds, held);
        if (r < 0)
                goto out;
        heap = touched_heap(heap_bytes);
        if (!heap) {
                close_fds(held, fds);
                r = -ENOMEM;
                goto out;
        }
        n_open = bench_count_fds(0);
        if (n_open < 0) {
                free(heap);
                close_fds(held, fds);
                r = n_open;
                goto out;
        }
        *ret = (struct bench_fat_parent){
                .fd_limit = fd_limit,
                .fds_open = (unsigned)n_open,
                .devnull = fds ? held[0] : -1,
                .fds = held,
                .n_fds = fds,
                .heap = heap,
                .heap_bytes = heap_bytes,
        };
        return 0;
out:
        free(held);
        return r;
}

int bench_fat_parent_setup(unsigned fd_limit, unsigned fds, size_t heap_bytes,
                           struct bench_fat_parent *ret)
{
        int r;

        if (shared_refs && shared.fd_limit == fd_limit && shared.n_fds == fds &&
            shared.heap_bytes == heap_bytes) {
                shared_refs++;
                *ret = shared;
                return 0;
        }
        if (shared_refs)
                return fat_parent_make(fd_limit, fds, heap_bytes, ret);
        r = fat_parent_make(fd_limit, fds, heap_bytes, &shared);
        if (r < 0)
                return r;
        shared_refs = 1;
        *ret = shared;
        return 0;
}

void bench_fat_parent_release(struct bench_fat_parent *p)
{
        if (!p)
                return;
        if (shared_refs && p->heap && p->heap == shared.heap) {
                *p = (struct bench_fat_parent){.devnull = -1};
                if (--shared_refs)
                        return;
                p = &shared;
        }
        free(p->heap);
        p->heap = NULL;
        close_fds(p->fds, p->n_fds);
        free(p->fds);
        p->fds = NULL;
        p->n_fds = 0;
        p->devnull = -1;
}

static int drain_fd(int fd, char *buf, size_t cap, size_t *ret_len)
{
        char scratch[4096];
        size_t len = 0;

        for (;;) {
                ssize_t n = read(fd, scratch, sizeof(scratch));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                if (len + 1 < cap) {
                        size_t take = (size_t)n < cap - 1 - len ? (size_t)n : cap - 1 - len;
                        memcpy(buf + len, scratch, take);
                        len += take;
                }
        }
        buf[len] = '\0';
        *ret_len = len;
        return 0;
}

/* The child's output until EOF, then the child reaped, even when reading
 * failed: no zombie left behind. */
static int collect(int fd, pid_t pid, char *out, size_t cap, size_t *ret_len, int *ret_status)
{
        int r = drain_fd(fd, out, cap, ret_len), k;

        close(fd);
        k = bench_wait_child(pid, ret_status);
        return r < 0 ? r : k;
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

int bench_fork_exec(const struct bench_fat_parent *fp, enum bench_close how, long open_max,
                    const char *path, char *const *argv, char *out, size_t cap, size_t *ret_len,
                    int *ret_status)
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
                if (dup2(fp->devnull, 0) < 0 || dup2(pfd[1], 1) < 0 || dup2(pfd[1], 2) < 0)
                        child_fail("netbroker-bench: dup2 failed in the child\n");
                if (how == BENCH_CLOSE_RANGE) {
                        /* The raw call: glibc before 2.34 has no wrapper. */
                        if (syscall(SYS_close_range, 3u, ~0u, 0u) < 0)
                                child_fail("netbroker-bench: close_range failed in the child\n");
                } else {
                        /* The 2018 loop: every fd number, open or not. */
                        for (long fd = 3; fd < open_max; fd++)
                                close((int)fd);
                }
                execve(path, argv, (char *const *)child_env);
                child_fail("netbroker-bench: execve failed in the child\n");
        }
        close(pfd[1]);
        return collect(pfd[0], pid, out, cap, ret_len, ret_status);
}

int bench_spawn_capture(const struct bench_fat_parent *fp, const char *path, char *const *argv,
                        int in_fd, char *out, size_t cap, size_t *ret_len, int *ret_status)
{
        posix_spawn_file_actions_t fa;
        int pfd[2], r;
        pid_t pid;

        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in_fd >= 0 ? in_fd : fp->devnull, 0);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
        posix_spawn_file_actions_addclosefrom_np(&fa, 3);
        r = -posix_spawn(&pid, path, &fa, NULL, argv, (char *const *)child_env);
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[1]);
        if (r < 0) {
                close(pfd[0]);
                return r;
        }
        return collect(pfd[0], pid, out, cap, ret_len, ret_status);
}

int bench_wait_child(pid_t pid, int *ret_status)
{
        while (waitpid(pid, ret_status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}
