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

static int write_config(const char *const *programs, const char *extra)
{
        FILE *f;
        int fd, r = 0;

        if (config_exists)
                return -EBUSY;
        install_cleanup();
        snprintf(config_path, sizeof(config_path), "/tmp/netbroker-bench.XXXXXX");
        fd = mkstemp(config_path);
        if (fd < 0)
                return -errno;
        config_exists = 1;
        f = fdopen(fd, "w");
        if (!f) {
                close(fd);
                remove_config();
                return -ENOMEM;
        }
        fputs("# netbroker-bench: temporary, removed at exit\nexec_allow =", f);
        for (size_t i = 0; programs[i]; i++)
                fprintf(f, " %s", programs[i]);
        fprintf(f, "\n%s", extra ? extra : "");
        if (ferror(f))
                r = -EIO;
        if (fclose(f) != 0 && r == 0)
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

static void stats_failed(struct nb_conn *conn, const char *who, int r)
{
        bench_log("netbroker-bench: %sthe helper's Stats: %s (%s)\n", who, strerror(-r),
                  nb_conn_error(conn));
}

int bench_helper_stats(struct nb_conn *conn, const char *who, struct bench_stats *ret)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int r;

        if (!b)
                return -ENOMEM;
        r = nb_batch_stats(b);
        if (r == 0)
                r = nb_submit(conn, b, &res);
        if (r == 0)
                r = nb_result_status(res, 0);
        ret->n = 0;
        for (size_t k = 0; r == 0 && k < BENCH_MAX_STATS; k++) {
                const char *name;
                uint64_t v;
                if (nb_result_stat_at(res, 0, k, &name, &v) < 0)
                        break;
                snprintf(ret->name[ret->n], sizeof(ret->name[0]), "%s", name);
                ret->v[ret->n++] = v;
        }
        if (r < 0)
                stats_failed(conn, who, r);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

bool bench_stat_get(const struct bench_stats *s, const char *name, uint64_t *ret)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->name[i], name) == 0) {
                        *ret = s->v[i];
                        return true;
                }
        return false;
}
