/* The helper side of a benchmark: netbrokerd spawned the way a daemon would
 * spawn it (nb_spawn, over a socketpair), with a configuration that allows
 * exactly the programs a scenario runs. The configuration is a memfd the
 * helper reads by its /proc path: no file is left behind, whatever kills us. */
#include "bench.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "netbroker.h"

int bench_broker_start(const char *helper, const char *const *programs, const char *extra,
                       struct nb_conn **ret)
{
        nb_spawn_opts opts = {0};
        char path[64];
        nb_conn *conn = NULL;
        FILE *f = NULL;
        int fd = memfd_create("netbroker-bench.conf", MFD_CLOEXEC), r = 0;

        if (fd < 0 || !(f = fdopen(fd, "w")))
                r = -errno;
        for (size_t i = 0; r == 0 && programs[i]; i++)
                fprintf(f, "%s %s", i ? "" : "exec_allow =", programs[i]);
        if (r == 0 && (fprintf(f, "\n%s", extra ? extra : "") < 0 || fflush(f) != 0))
                r = -EIO;
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", getpid(), fd);
        opts.config_path = path;
        if (r == 0)
                r = nb_spawn(helper, &opts, &conn);
        /* The helper has read it before its Hello. */
        if (f)
                fclose(f);
        else if (fd >= 0)
                close(fd);
        if (r < 0) {
                bench_log("netbroker-bench: cannot start %s: %s (%s)\n",
                          helper ? helper : "the default netbrokerd", strerror(-r),
                          nb_last_error());
                return r;
        }
        if (!nb_conn_has_feature(conn, "exec")) {
                bench_log("netbroker-bench: the helper does not offer exec\n");
                nb_close(conn);
                return -EOPNOTSUPP;
        }
        *ret = conn;
        return 0;
}
