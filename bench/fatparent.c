/* Make this process look like the management daemon the seeds describe: a
 * high fd limit, hundreds of fds open, and a large heap whose every page is
 * mapped. Without this, fork() from a 2 MiB process costs next to nothing
 * and the comparison with the helper would flatter fork. */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
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

int bench_fat_parent_setup(unsigned fd_limit, unsigned fds, size_t heap_bytes,
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

void bench_fat_parent_release(struct bench_fat_parent *p)
{
        if (!p)
                return;
        free(p->heap);
        p->heap = NULL;
        close_fds(p->fds, p->n_fds);
        free(p->fds);
        p->fds = NULL;
        p->n_fds = 0;
        p->devnull = -1;
}

int bench_drain_fd(int fd, char *buf, size_t cap, size_t *ret_len)
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

int bench_wait_child(pid_t pid, int *ret_status)
{
        while (waitpid(pid, ret_status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}
