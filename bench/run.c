// SPDX-License-Identifier: LGPL-2.1-or-later
/* The method runners: samples and medians (one page-cache miss must not
 * move a figure), the helper, one timed run of a method, rounds taking
 * turns, and a comparison's rows and ratios. Every scenario times through
 * here. */
#include "bench.h"

#include <errno.h>
#include <net/if.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "netbroker.h"

uint64_t bench_now_ns(void)
{
        struct timespec ts;

        /* Monotonic: an NTP step in the middle of a run must not count. */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bench_samples_add(struct bench_samples *s, double us)
{
        double *p = s->n < s->cap ? s->us : realloc(s->us, (s->cap ? 2 * s->cap : 64) * sizeof(*p));

        if (!p)
                return -ENOMEM;
        if (s->n == s->cap)
                s->cap = s->cap ? 2 * s->cap : 64;
        s->us = p;
        s->us[s->n++] = us;
        return 0;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

int bench_samples_summarize(const struct bench_samples *s, struct bench_summary *ret)
{
        double *v;
        size_t n = s->n;

        if (n == 0)
                return -ENODATA;
        /* Sort a copy: the samples stay in the order they were taken. */
        v = malloc(n * sizeof(*v));
        if (!v)
                return -ENOMEM;
        memcpy(v, s->us, n * sizeof(*v));
        qsort(v, n, sizeof(*v), cmp_double);
        ret->n = n;
        ret->min_us = v[0];
        ret->max_us = v[n - 1];
        ret->median_us = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        /* Nearest rank, ceil(0.99 n): with fewer than 100 samples it is the
         * maximum, never an interpolation between two samples. */
        ret->p99_us = v[(n * 99 + 99) / 100 - 1];
        free(v);
        return 0;
}

void bench_samples_clear(struct bench_samples *s)
{
        free(s->us);
        *s = (struct bench_samples){0};
}

/* ---- setting up: the fat parent, then the helper ---- */

/* The helper spawned the way a daemon would spawn it (nb_spawn, over a
 * socketpair), with a configuration that allows exactly the programs a
 * scenario runs: a memfd the helper reads by its /proc path, so that no
 * file is left behind, whatever kills us. */
/* The configuration as a memfd: *ret_f to close once the helper has read
 * it, path its name. */
static int config_memfd(const char *const *programs, const char *extra, char *path, size_t len,
                        FILE **ret_f)
{
        FILE *f = NULL;
        int fd = memfd_create("netbroker-bench.conf", MFD_CLOEXEC), r = 0;

        if (fd < 0 || !(f = fdopen(fd, "w")))
                r = -errno;
        for (size_t i = 0; r == 0 && programs[i]; i++)
                fprintf(f, "%s %s", i ? "" : "exec_allow =", programs[i]);
        if (r == 0 && (fprintf(f, "\n%s", extra ? extra : "") < 0 || fflush(f) != 0))
                r = -EIO;
        snprintf(path, len, "/proc/%d/fd/%d", getpid(), fd);
        if (r < 0 && f)
                fclose(f);
        else if (r < 0 && fd >= 0)
                close(fd);
        else
                *ret_f = f;
        return r;
}

int bench_broker_start(const char *helper, const char *const *programs, const char *extra,
                       const char *const *features, struct nb_conn **ret)
{
        nb_spawn_opts opts = NB_SPAWN_OPTS_INIT;
        char path[64];
        nb_conn *conn = NULL;
        FILE *f = NULL;
        int r = config_memfd(programs, extra, path, sizeof(path), &f);

        opts.config_path = path;
        if (r == 0)
                r = nb_spawn(helper, &opts, &conn);
        /* The helper has read it before its Hello. */
        if (f)
                fclose(f);
        if (r < 0) {
                bench_log("netbroker-bench: cannot start %s: %s (%s)\n",
                          helper ? helper : "the default netbrokerd", strerror(-r),
                          nb_last_error());
                return r;
        }
        for (size_t i = 0; features && features[i]; i++)
                if (!nb_conn_has_feature(conn, features[i])) {
                        bench_log("netbroker-bench: the helper does not offer %s\n", features[i]);
                        nb_close(conn);
                        return -EOPNOTSUPP;
                }
        *ret = conn;
        return 0;
}

int bench_ctx_start(struct bench_ctx *c, const struct bench_opts *o, struct bench_report *r,
                    bool fat, const char *const *programs, const char *extra,
                    const char *const *features)
{
        int k = fat ? bench_fat_parent(&r->parent) : 0;

        r->has_parent = fat;
        /* After the fat setup: the helper is spawned from the parent a
         * daemon would spawn it from, fds and all. */
        if (k == 0)
                k = bench_broker_start(o->helper, programs, extra, features, &c->conn);
        if (k < 0)
                return k;
        r->helper_pid = nb_conn_helper_pid(c->conn);
        r->helper_fds = r->helper_pid > 0 ? bench_count_fds(r->helper_pid) : 0;
        return 0;
}

int bench_broker_listen(const char *helper, const char *const *programs, const char *extra,
                        const char *sock, size_t n, struct nb_conn **ret, int *ret_pid)
{
        extern char **environ;
        char path[64];
        char *argv[] = {(char *)helper, "--config", path, "--listen", (char *)sock, NULL};
        FILE *f = NULL;
        pid_t pid = 0;
        size_t got = 0;
        int r = helper ? config_memfd(programs, extra, path, sizeof(path), &f) : -ENOENT;

        if (r == 0)
                r = -posix_spawn(&pid, helper, NULL, NULL, argv, environ);
        /* Bound first thing, served soon after: up to 10 s. */
        for (int i = 0; r == 0 && got < n && i < 5000; i++) {
                if (nb_connect(sock, &ret[got]) == 0)
                        got++;
                else
                        usleep(2000);
        }
        r = r == 0 && got < n ? -ETIMEDOUT : r;
        if (f)
                fclose(f);
        if (r < 0) {
                bench_log("netbroker-bench: cannot start %s --listen %s: %s (%s)\n",
                          helper ? helper : "(no helper: --helper or $NETBROKERD)", sock,
                          strerror(-r), nb_last_error());
                while (got > 0)
                        nb_close(ret[--got]);
                if (pid > 0) {
                        kill(pid, SIGTERM);
                        waitpid(pid, NULL, 0);
                }
                return r;
        }
        *ret_pid = pid;
        return 0;
}

void bench_ctx_stop(struct bench_ctx *c)
{
        nb_close(c->conn);
        c->conn = NULL;
}

/* ---- one run of each kind ---- */

int bench_run_cmd(struct bench_ctx *c, enum bench_how how, const char *path, char *const *argv,
                  char *out, size_t cap, size_t *ret_len, bool *ret_ok)
{
        nb_results *res = NULL;
        nb_exec_result er = NB_EXEC_RESULT_INIT;
        nb_batch *b = NULL;
        int st = 0, r;

        if (how != BENCH_BROKER_EXEC) {
                r = bench_fork_exec(how == BENCH_FORK_RANGE, c->open_max, path, argv, out, cap,
                                    ret_len, &st);
                r = r == 0 && WIFSIGNALED(st) ? -EINTR : r;
                *ret_ok = r == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
        } else {
                r = (b = nb_batch_new())
                            ? nb_batch_exec(b, path, (const char *const *)argv, NULL, NULL, 0, 0)
                            : -ENOMEM;
                if (r == 0 && (r = nb_submit(c->conn, b, &res)) == 0)
                        st = nb_result_status(res, 0);
                if (r == 0 && (nb_result_exec(res, 0, &er) < 0 || (st && st != -EIO) || er.signal ||
                               er.timed_out))
                        r = st < 0 ? st : -EIO;
                /* stdout, then stderr: libvirt's callbacks read the first. */
                if (r == 0)
                        *ret_len = (size_t)snprintf(out, cap, "%.*s%.*s", (int)er.out_len,
                                                    (const char *)er.out, (int)er.err_len,
                                                    (const char *)er.err);
                *ret_len = *ret_len < cap ? *ret_len : cap - 1;
                *ret_ok = r == 0 && st == 0 && er.exit_code == 0;
        }
        if (r < 0)
                bench_log("netbroker-bench: %s: %s (%s)\n", argv[0], strerror(-r),
                          res ? nb_result_message(res, 0) : "killed, or not run");
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* Every run must exit 0 and print cmd->expect: a fast failure is not a
 * result. */
static int fork_once(struct bench_ctx *c, const struct bench_method *m, double *ret_us)
{
        const char *expect = m->cmd->expect;
        char out[1024];
        size_t len = 0;
        bool ok;
        uint64_t t0 = bench_now_ns();
        int r = bench_run_cmd(c, m->how, m->cmd->path, (char *const *)m->cmd->argv, out,
                              sizeof(out), &len, &ok);

        *ret_us = (double)(bench_now_ns() - t0) / 1000.0;
        if (r == 0 && !(ok && (!expect || strstr(out, expect)))) {
                bench_log("netbroker-bench: %s %s: failed%s%s, output: %s\n", m->name,
                          m->cmd->label, expect ? " or did not print " : "", expect ? expect : "",
                          out);
                r = -EIO;
        }
        return r;
}

/* One request of `ops` Exec or Ping ops; building it is part of what a
 * client pays per request. */
static int broker_once(struct bench_ctx *c, const struct bench_method *m, double *ret_us)
{
        unsigned ops = m->how == BENCH_BROKER_PING || !m->ops ? 1 : m->ops;
        nb_results *res = NULL;
        nb_exec_result er = NB_EXEC_RESULT_INIT;
        uint64_t t0 = bench_now_ns(), t1;
        nb_batch *b = nb_batch_new();
        char who[48];
        int r = b ? 0 : -ENOMEM;

        snprintf(who, sizeof(who), "%s %s: ", m->name, m->cmd ? m->cmd->label : "Ping");
        for (unsigned i = 0; i < ops && r == 0; i++)
                r = m->how == BENCH_BROKER_PING
                            ? nb_batch_ping(b)
                            : nb_batch_exec(b, m->cmd->path, m->cmd->argv, NULL, NULL, 0, 0);
        if (r == 0)
                r = bench_submit_all(c->conn, b, ops, who, &t1, &res);
        /* Every run must exit 0 and print cmd->expect: a fast failure is not
         * a result. */
        for (size_t i = 0; i < ops && r == 0 && m->how == BENCH_BROKER_EXEC; i++)
                if (nb_result_exec(res, i, &er) < 0 || er.signal || er.exit_code ||
                    (m->cmd->expect &&
                     !memmem(er.out, er.out_len, m->cmd->expect, strlen(m->cmd->expect)))) {
                        bench_log("netbroker-bench: %sop %zu did not exit 0 printing \"%s\"\n", who,
                                  i, m->cmd->expect ? m->cmd->expect : "");
                        r = -EIO;
                }
        if (r == 0)
                *ret_us = (double)(t1 - t0) / 1000.0 / ops;
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* A round's runs of m, recorded in s (NULL: warm-up runs). */
static int time_method(struct bench_ctx *c, const struct bench_method *m, struct bench_samples *s)
{
        double us;
        int r = 0;

        for (unsigned i = 0; i < (m->per_round ? m->per_round : 1) && r == 0; i++) {
                r = m->how == BENCH_CUSTOM       ? m->fn(c, m, s != NULL, &us)
                    : m->how <= BENCH_FORK_RANGE ? fork_once(c, m, &us)
                                                 : broker_once(c, m, &us);
                if (r == 0 && s)
                        r = bench_samples_add(s, us);
        }
        return r;
}

/* ---- rounds ---- */

/* A method with `runs` runs over `rounds` rounds runs in the rounds where
 * the count of its runs due moves on. */
static bool due(const struct bench_method *m, unsigned i, unsigned rounds)
{
        return !m->runs || (i + 1) * (uint64_t)m->runs / rounds != i * (uint64_t)m->runs / rounds;
}

int bench_run_rounds(struct bench_ctx *c, const char *who, const struct bench_method *ms, size_t n,
                     unsigned warmup, unsigned rounds, struct bench_summary *ret,
                     struct bench_samples *keep)
{
        struct bench_samples *s = calloc(n, sizeof(*s));
        int r = s ? 0 : -ENOMEM;

        /* Unrecorded runs first: the program's pages into the page cache,
         * the helper's first spawn, the allocators and caches warm. */
        for (unsigned i = 0; i < warmup && r == 0; i++)
                for (size_t j = 0; j < n && r == 0; j++)
                        r = time_method(c, &ms[j], NULL);
        for (unsigned i = 0; i < rounds && r == 0; i++)
                for (size_t j = 0; j < n && r == 0; j++) {
                        const struct bench_method *m = &ms[i % 2 ? n - 1 - j : j];
                        if (due(m, i, rounds))
                                r = time_method(c, m, &s[m - ms]);
                }
        for (size_t j = 0; j < n && r == 0; j++) {
                r = bench_samples_summarize(&s[j], &ret[j]);
                if (r == 0)
                        bench_log("%s: %-2s %-24s %6zu runs, median %10.1f us, p99 %10.1f us\n",
                                  who, ms[j].name, ms[j].program ? ms[j].program : ms[j].cmd->label,
                                  ret[j].n, ret[j].median_us, ret[j].p99_us);
        }
        for (size_t j = 0; s && j < n; j++)
                if (keep)
                        keep[j] = s[j];
                else
                        bench_samples_clear(&s[j]);
        free(s);
        return r;
}

/* ---- a comparison's rows and ratios ---- */

int bench_report_methods(struct bench_report *r, const struct bench_method *ms,
                         const struct bench_summary *s, size_t n, const char *spec,
                         const char *suffix)
{
        const char *names[BENCH_MAX_ROWS];
        double med[BENCH_MAX_ROWS];
        int k = 0;

        for (size_t i = 0; i < n && k == 0; i++) {
                names[i] = ms[i].name;
                med[i] = s[i].median_us;
                k = bench_report_add_row(r, ms[i].name,
                                         ms[i].program ? ms[i].program : ms[i].cmd->label, &s[i],
                                         &s[0]);
        }
        return k ? k : bench_report_ratios(r, spec, suffix, names, med, n);
}

int bench_report_ratios(struct bench_report *r, const char *spec, const char *suffix,
                        const char *const *names, const double *v, size_t n)
{
        char num[16], den[16], name[48];
        int k = 0, len;

        for (const char *p = spec; p && sscanf(p, " %15[^/]/%15s%n", num, den, &len) == 2 && k == 0;
             p += len) {
                double a = 0, b = 0;
                for (size_t i = 0; i < n; i++) {
                        a = strcmp(names[i], num) == 0 ? v[i] : a;
                        b = strcmp(names[i], den) == 0 ? v[i] : b;
                }
                /* A method that did not run has no ratio. */
                snprintf(name, sizeof(name), "%s/%s%s", num, den, suffix ? suffix : "");
                if (a > 0 && b > 0)
                        k = bench_report_add_ratio(r, name, a / b);
        }
        return k;
}

/* ---- shared set-up and checks ---- */

const char *bench_find_tool(const char *name)
{
        static char found[8][64]; /* every tool found stays valid */
        static unsigned next;
        static const char *const dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};

        for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
                char *p = found[next % 8];
                snprintf(p, sizeof(found[0]), "%s/%s", dirs[i], name);
                if (access(p, X_OK) == 0) {
                        next++;
                        return p;
                }
        }
        return NULL;
}

void bench_summary_per(struct bench_summary *s, double n)
{
        s->median_us /= n;
        s->min_us /= n;
        s->max_us /= n;
        s->p99_us /= n;
}

int bench_submit_all(struct nb_conn *conn, struct nb_batch *b, size_t n, const char *who,
                     uint64_t *ret_done_ns, struct nb_results **ret)
{
        nb_results *res = NULL;
        int r = nb_submit(conn, b, &res);
        long bad;

        if (ret_done_ns)
                *ret_done_ns = bench_now_ns();

        if (r < 0) {
                bench_log("netbroker-bench: %ssubmit of %zu ops failed: %s (%s)\n", who, n,
                          strerror(-r), nb_conn_error(conn));
                return r;
        }
        if (nb_results_count(res) != n) {
                bench_log("netbroker-bench: %s%zu results for %zu ops\n", who,
                          nb_results_count(res), n);
                r = -EPROTO;
        } else if ((bad = nb_results_first_error(res)) >= 0) {
                bench_log("netbroker-bench: %sop %ld: %s\n", who, bad,
                          nb_result_message(res, (size_t)bad));
                r = nb_result_status(res, (size_t)bad);
                r = r < 0 ? r : -EPROTO;
        }
        if (r < 0)
                nb_results_free(res);
        else
                *ret = res;
        return r;
}

int bench_count_devices(const char *prefix)
{
        struct if_nameindex *all = if_nameindex(), *d;
        size_t plen = strlen(prefix);
        int n = 0;

        if (!all)
                return -errno;
        for (d = all; d->if_index; d++) {
                const char *tail = d->if_name + plen;
                if (strncmp(d->if_name, prefix, plen) == 0 && *tail &&
                    strspn(tail, "0123456789") == strlen(tail))
                        n++;
        }
        if_freenameindex(all);
        return n;
}

int bench_expect_devices(const char *who, const char *prefix, unsigned want)
{
        int have = bench_count_devices(prefix);

        if (have == (int)want)
                return 0;
        bench_log("netbroker-bench: %s%d %s devices, expected %u\n", who, have, prefix, want);
        return have < 0 ? have : -EPROTO;
}

int bench_taps(struct nb_conn *conn, const char *who, const char *prefix, unsigned n)
{
        const nb_tap_opts opts = {.size = sizeof(nb_tap_opts), .persist = true};
        nb_results *res = NULL;
        nb_batch *b = nb_batch_new();
        char name[IFNAMSIZ];
        int r = b ? 0 : -ENOMEM;

        for (unsigned i = 0; i < n && r == 0; i++) {
                snprintf(name, sizeof(name), "%s%u", prefix, i);
                r = nb_batch_tap_create(b, name, &opts);
        }
        if (r == 0)
                r = bench_submit_all(conn, b, n, who, NULL, &res);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

int bench_veths(struct nb_conn *conn, const char *who, const char *prefix, const char *peer,
                unsigned n, bool up, int *ret_ifindex)
{
        const nb_link_change on = {.size = sizeof(nb_link_change), .up = 1};
        char a[IFNAMSIZ], p[IFNAMSIZ];
        nb_batch *del = nb_batch_new(), *add = nb_batch_new();
        nb_results *res = NULL;
        int r = del && add ? 0 : -ENOMEM;

        for (unsigned i = 0; i < n && r == 0; i++) {
                snprintf(a, sizeof(a), "%s%u", prefix, i);
                snprintf(p, sizeof(p), "%s%u", peer, i);
                r = nb_batch_link_delete(del, a);
                if (r == 0)
                        r = nb_batch_veth_create(add, a, p, -1);
                if (r == 0 && up)
                        r = nb_batch_link_set(add, a, &on);
                if (r == 0 && up)
                        r = nb_batch_link_set(add, p, &on);
        }
        /* Deleting what is not there fails: no error here. */
        if (r == 0)
                r = nb_submit(conn, del, &res);
        nb_results_free(res);
        res = NULL;
        if (r == 0)
                r = bench_submit_all(conn, add, n * (up ? 3 : 1), who, NULL, &res);
        if (r == 0 && ret_ifindex)
                *ret_ifindex = nb_result_ifindex(res, 0);
        nb_results_free(res);
        nb_batch_free(del);
        nb_batch_free(add);
        return r;
}
