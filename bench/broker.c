/* The helper side of a benchmark: a temporary configuration that allows
 * exactly the programs a scenario runs, and netbrokerd spawned the way a
 * daemon would spawn it (nb_spawn, over a socketpair). */
#include "bench.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netbroker.h"

/* One config at a time; static so the signal handler can remove it. */
static char config_path[32];
static volatile sig_atomic_t config_exists;

static void remove_config(void)
{
        if (config_exists) {
                config_exists = 0;
                unlink(config_path);
        }
}

static void on_fatal_signal(int sig)
{
        /* Only async-signal-safe calls: unlink, signal, raise. */
        remove_config();
        signal(sig, SIG_DFL);
        raise(sig);
}

static void install_cleanup(void)
{
        static bool installed;
        struct sigaction sa = {.sa_handler = on_fatal_signal};

        if (installed)
                return;
        installed = true;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        atexit(remove_config);
}

static int write_all(int fd, const char *s)
{
        size_t len = strlen(s);

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

static int write_config(const char *const *programs, const char *extra)
{
        int fd, r = 0;

        if (config_exists)
                return -EBUSY;
        install_cleanup();
        snprintf(config_path, sizeof(config_path), "/tmp/netbroker-bench.XXXXXX");
        fd = mkstemp(config_path);
        if (fd < 0)
                return -errno;
        config_exists = 1;
        r = write_all(fd, "# netbroker-bench: temporary, removed at exit\nexec_allow =");
        for (size_t i = 0; r == 0 && programs[i]; i++) {
                r = write_all(fd, " ");
                if (r == 0)
                        r = write_all(fd, programs[i]);
        }
        if (r == 0)
                r = write_all(fd, "\n");
        if (r == 0 && extra)
                r = write_all(fd, extra);
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r < 0)
                remove_config();
        return r;
}

int bench_broker_start_cfg(const char *helper, const char *const *programs, const char *extra,
                           struct nb_conn **ret)
{
        nb_spawn_opts opts = {0};
        nb_conn *conn;
        int r;

        r = write_config(programs, extra);
        if (r < 0) {
                bench_log("netbroker-bench: cannot write the helper's config: %s\n", strerror(-r));
                return r;
        }
        opts.config_path = config_path;
        r = nb_spawn(helper, &opts, &conn);
        /* The helper has read it before its Hello: two helpers at once (the
         * log scenario) need no two files. */
        remove_config();
        if (r < 0) {
                bench_log("netbroker-bench: cannot start %s: %s\n",
                          helper ? helper : "the default netbrokerd", strerror(-r));
                return r;
        }
        if (!nb_conn_has_feature(conn, "exec")) {
                bench_log("netbroker-bench: the helper does not offer exec\n");
                bench_broker_stop(conn);
                return -EOPNOTSUPP;
        }
        *ret = conn;
        return 0;
}

int bench_broker_start(const char *helper, const char *const *programs, struct nb_conn **ret)
{
        return bench_broker_start_cfg(helper, programs, NULL, ret);
}

void bench_broker_stop(struct nb_conn *conn)
{
        nb_close(conn);
        remove_config();
}
