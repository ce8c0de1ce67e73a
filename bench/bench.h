/* netbroker-bench: shared pieces of the scenarios. A scenario fills a
 * struct bench_report; everything returns 0 or -errno and says what went
 * wrong where it happened. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- options common to every scenario ---- */

#define BENCH_MAX_COUNTS 4
/* The helper's default max_ops: one batch of N ops must fit in a request. */
#define BENCH_NAMES_MAX_COUNT 4096
/* restart: vnet0..vnet999, MACs and IPs derived from the index. */
#define BENCH_RESTART_MAX_GUESTS 1000
/* bandwidth: vbw0..vbw999, one request of N BandwidthSet. */
#define BENCH_BANDWIDTH_MAX_IFACES 1000

struct bench_opts {
        bool json;
        bool quick;
        unsigned count; /* 0: the scenario's default */
        unsigned counts[BENCH_MAX_COUNTS]; /* --counts 82,1000 (names) */
        size_t n_counts; /* 0: the scenario's default */
        unsigned guests; /* --guests N (restart); 0: the scenario's default */
        unsigned sample; /* --sample K (restart): time K guests, fill the rest; 0: all */
        unsigned reps; /* --reps N: repetitions where a scenario repeats; 0: its default */
        const char *helper; /* netbrokerd to spawn; NULL: the library's default */
        const char *helper_nolog; /* log: netbrokerd built with NB_LOG_NO_DEBUG */
        const char *json_out; /* --json-out FILE: the JSON report, also written there */
        const char *png; /* --png FILE: the chart (gnuplot) */
};

/* Progress and diagnostics; stderr, so that stdout stays one JSON object. */
#define bench_log(...) fprintf(stderr, __VA_ARGS__)

/* ---- time and samples (stats.c) ---- */

uint64_t bench_now_ns(void);

struct bench_samples {
        double *us;
        size_t n, cap;
};

struct bench_summary {
        size_t n;
        double median_us, min_us, max_us;
        double p99_us; /* nearest rank: the smallest sample >= 99% of them */
};

/* arr (of *cap elements of `size` bytes) with room for element n: arr, or
 * arr reallocated to twice the size; NULL (arr untouched) when out of memory. */
void *bench_grow(void *arr, size_t *cap, size_t n, size_t size);
int bench_samples_add(struct bench_samples *s, double us);
/* Returns 0, or -ENODATA for no samples, -ENOMEM. */
int bench_samples_summarize(const struct bench_samples *s, struct bench_summary *ret);
void bench_samples_clear(struct bench_samples *s);

/* ---- a fat parent, as a long-running management daemon is (fatparent.c) ---- */

struct bench_fat_parent {
        unsigned fd_limit; /* RLIMIT_NOFILE, soft and hard */
        unsigned fds_open; /* fds open after setup, all inheritable */
        int devnull; /* one of them, for children's stdin */
        int *fds; /* the fds opened here, closed on release */
        unsigned n_fds;
        void *heap;
        size_t heap_bytes; /* every page written */
};

/* Raise RLIMIT_NOFILE to fd_limit, open `fds` inheritable fds on /dev/null
 * and allocate and touch heap_bytes. Returns 0 or -errno; on failure
 * nothing is left allocated. */
int bench_fat_parent_setup(unsigned fd_limit, unsigned fds, size_t heap_bytes,
                           struct bench_fat_parent *ret);
void bench_fat_parent_release(struct bench_fat_parent *p);
/* Open fds of a process (pid 0: this one), or -errno. */
int bench_count_fds(int pid);

/* Reap pid (EINTR retried). Returns 0 or -errno. */
int bench_wait_child(pid_t pid, int *ret_status);

/* The fat parent every fork baseline uses: libvirt's daemon as the seeds
 * describe it. */
#define BENCH_FAT_FD_LIMIT 8192u
#define BENCH_FAT_FDS 500u
#define BENCH_FAT_HEAP (1024ul * 1024 * 1024)

enum bench_close {
        BENCH_CLOSE_LOOP, /* A: close(fd) for every fd 3..limit-1 (libvirt 2018) */
        BENCH_CLOSE_RANGE, /* A2: close_range(3, ~0) (libvirt today) */
};

/* A baseline's command as virCommandRun ran it: fork, stdin /dev/null,
 * output into a pipe read into out, the other fds closed `how` (loop up to
 * open_max, 0: sysconf before fork), exec, reap. *ret_status as waitpid's. */
int bench_fork_exec(const struct bench_fat_parent *fp, enum bench_close how, long open_max,
                    const char *path, char *const *argv, char *out, size_t cap, size_t *ret_len,
                    int *ret_status);
/* An untimed command: posix_spawn, stdin in_fd (negative: /dev/null),
 * output into out. */
int bench_spawn_capture(const struct bench_fat_parent *fp, const char *path, char *const *argv,
                        int in_fd, char *out, size_t cap, size_t *ret_len, int *ret_status);

/* ---- this process's netlink (netlink.c) ---- */

/* A libnl error (negative or not) as -errno, by the helper's one map
 * (nbd_netlink_nle_errno in helper/netlink.c). */
int bench_nl_errno(int nlerr);
/* Devices named prefix + digits ("macvtap12") in this namespace, or -errno. */
int bench_count_devices(const char *prefix);
struct nl_sock;
/* A connected rtnetlink socket; `who` ("bandwidth: ") starts the message
 * on failure. Returns 0 or -errno. */
int bench_nl_open(const char *who, struct nl_sock **ret);
/* Exactly `want` devices prefix + digits, or a message starting with `who`
 * and -EPROTO (-errno when they cannot be counted). */
int bench_expect_devices(const char *who, const char *prefix, unsigned want);
/* Delete link `name`; one not there is no error. Returns 0 or -errno. */
int bench_link_delete(struct nl_sock *sk, const char *who, const char *name);
/* A veth pair name/peer in this namespace, both up when `up`; *ret_ifindex
 * (NULL: not wanted) is name's. Returns 0 or -errno, with a message. */
int bench_veth_add(struct nl_sock *sk, const char *who, const char *name, const char *peer, bool up,
                   int *ret_ifindex);
/* Delete ifindex's qdisc at `parent` (TC_H_ROOT, TC_H_INGRESS); none there
 * is no error. Returns 0 or -errno, with a message. */
int bench_qdisc_delete(struct nl_sock *sk, const char *who, int ifindex, uint32_t parent);

/* ---- the helper (broker.c) ---- */

struct nb_conn;

/* Spawn the helper with a temporary config allowing exactly `programs`,
 * plus `extra` config lines (NULL: none); the file is gone once it runs. */
int bench_broker_start(const char *helper, const char *const *programs, struct nb_conn **ret);
int bench_broker_start_cfg(const char *helper, const char *const *programs, const char *extra,
                           struct nb_conn **ret);
void bench_broker_stop(struct nb_conn *conn);

/* The helper's Stats counters, as one Stats request returned them. */
#define BENCH_MAX_STATS 64

struct bench_stats {
        size_t n;
        char name[BENCH_MAX_STATS][48];
        uint64_t v[BENCH_MAX_STATS];
};

/* One Stats request: every counter (up to BENCH_MAX_STATS) into *ret. `who`
 * ("bandwidth: ", or "") starts the message on failure. Returns 0 or -errno. */
int bench_helper_stats(struct nb_conn *conn, const char *who, struct bench_stats *ret);
/* Counter `name` of s, or false when s has none. */
bool bench_stat_get(const struct bench_stats *s, const char *name, uint64_t *ret);

/* ---- the report (report.c) ---- */

#define BENCH_MAX_ROWS 32
#define BENCH_MAX_RATIOS 32
#define BENCH_MAX_NOTES 2

struct bench_row {
        const char *method; /* short name: "A", "B", ... */
        const char *program; /* what it ran */
        struct bench_summary s;
        double vs_baseline; /* baseline median / this median; 0 when none */
};

struct bench_ratio {
        char name[48]; /* "A/B", "A/B iptables" */
        double value;
};

/* A headline comparison for `all`'s summary and chart: baseline (base2,
 * today's libvirt, n == 0 where none) and broker per the same unit of work. */
struct bench_compare {
        char what[56]; /* "/bin/true, per command" */
        char base_name[8], base2_name[8], broker_name[8]; /* method names: "A", "A2", "B" */
        struct bench_summary base, base2, broker;
};

#define BENCH_MAX_COMPARES 8

struct bench_report {
        const char *scenario;
        const char *title; /* one line under the header */
        const char *ratios_title; /* what the ratios are; NULL: "ratios of medians" */
        bool has_parent; /* the scenario measured from a fat parent: */
        struct bench_fat_parent parent; /* a copy of its figures (heap already freed) */
        int helper_pid, helper_fds; /* 0 when no helper was used */
        struct bench_row rows[BENCH_MAX_ROWS];
        size_t n_rows;
        struct bench_ratio ratios[BENCH_MAX_RATIOS];
        size_t n_ratios;
        char notes[BENCH_MAX_NOTES][160]; /* skipped programs and the like */
        size_t n_notes;
        struct bench_compare compares[BENCH_MAX_COMPARES];
        size_t n_compares;
};

/* Each returns 0, or -ENOSPC when the report is full. */
int bench_report_add_row(struct bench_report *r, const char *method, const char *program,
                         const struct bench_summary *s, const struct bench_summary *baseline);
int bench_report_add_ratio(struct bench_report *r, const char *name, double value);
int bench_report_add_note(struct bench_report *r, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* base2 NULL (or base2->n == 0): no second baseline. Returns 0, -ENOSPC. */
int bench_report_add_compare(struct bench_report *r, const char *what, const char *base_name,
                             const struct bench_summary *base, const char *base2_name,
                             const struct bench_summary *base2, const char *broker_name,
                             const struct bench_summary *broker);
/* A scenario that adds no comparison of its own (bandwidth) gets one from
 * its first rows named A, A2 and B. */
void bench_report_default_compares(struct bench_report *r);

void bench_report_print_table(const struct bench_report *r, FILE *f);
void bench_report_print_json(const struct bench_report *r, FILE *f);
/* The same object without the newline, to nest in `all`'s report. */
void bench_report_print_json_object(const struct bench_report *r, FILE *f);

/* baseline median / broker median; NAN when either is missing. */
double bench_compare_ratio(const struct bench_summary *base, const struct bench_summary *broker);
/* "12.3 us", "4.56 ms", "7.89 s" into buf; returns buf. */
const char *bench_fmt_time(double us, char *buf, size_t len);
void bench_compare_print_heading(FILE *f);
/* One line per baseline: scenario, what, baseline, broker, ratio. */
void bench_compare_print(const struct bench_compare *c, const char *scenario, FILE *f);
void bench_compare_print_json(const struct bench_compare *c, const char *scenario, FILE *f);
/* Every comparison of r as bench_compare_print, labelled `label`; whether
 * there was one. */
bool bench_report_print_compares(const struct bench_report *r, const char *label, FILE *f);
/* JSON pieces for `all`: a string, a number (null when not finite), the
 * member "machine" (without a leading comma). */
void bench_json_string(FILE *f, const char *s);
void bench_json_number(FILE *f, double v, int decimals);
void bench_json_machine(FILE *f);

/* ---- the chart (chart.c) ---- */

struct bench_chart_item {
        const char *scenario;
        const struct bench_compare *c;
};

/* Draw items as a PNG with gnuplot. Returns 0 or -errno (-ENOENT: no
 * gnuplot; it says so on stderr). */
int bench_chart_png(const char *png, const char *title, const struct bench_chart_item *items,
                    size_t n);

/* ---- every scenario in one run (all.c) ---- */

typedef int (*bench_scenario_fn)(const struct bench_opts *o, struct bench_report *r);

/* The scenario table's function for name, or NULL (bench.c). */
bench_scenario_fn bench_find_scenario(const char *name);
/* `all` and `--scale`: run, print, write the files asked for. Returns 0,
 * or -errno when a scenario failed (the others still ran). */
int bench_all(const struct bench_opts *o);
int bench_scale(const struct bench_opts *o);
/* One scenario's --json-out and --png. */
int bench_write_files(const struct bench_opts *o, const struct bench_report *r);

/* ---- scenarios ---- */

int bench_spawn(const struct bench_opts *o, struct bench_report *r);
int bench_names(const struct bench_opts *o, struct bench_report *r);
int bench_restart(const struct bench_opts *o, struct bench_report *r);
int bench_log_scenario(const struct bench_opts *o, struct bench_report *r);
int bench_roundtrip(const struct bench_opts *o, struct bench_report *r);
int bench_bandwidth(const struct bench_opts *o, struct bench_report *r);

/* ---- the method runners (run.c) ---- */

/* The fat parent every fork baseline forks from, and the helper spawned
 * from that same parent. */
struct bench_ctx {
        struct bench_fat_parent fp;
        long open_max; /* fork loop: 0 takes sysconf(_SC_OPEN_MAX) before each fork */
        struct nb_conn *conn;
        void *scenario; /* the scenario's own state, for BENCH_CUSTOM methods */
};

/* A program a method runs; every run must exit 0 (and print `expect`): a
 * fast failure is not a result. */
struct bench_cmd {
        const char *label; /* the rows' program column */
        const char *path;
        const char *const *argv;
        const char *expect; /* in its output when it really ran, or NULL */
};

enum bench_how {
        BENCH_FORK_LOOP, /* fork, close every fd 3..open_max-1, exec (libvirt 2018) */
        BENCH_FORK_RANGE, /* fork, close_range(3, ~0), exec (libvirt today) */
        BENCH_BROKER_EXEC, /* one request of `ops` Exec ops; time per op */
        BENCH_BROKER_PING, /* one request of one Ping op */
        BENCH_CUSTOM, /* fn */
};

struct bench_method;
/* One timed run of a BENCH_CUSTOM method into *ret_us (per unit of work);
 * `timed` is false for warm-up runs. Returns 0 or -errno. */
typedef int (*bench_method_fn)(struct bench_ctx *c, const struct bench_method *m, bool timed,
                               double *ret_us);

struct bench_method {
        const char *name; /* "A", "A2", "B" */
        enum bench_how how;
        const struct bench_cmd *cmd; /* BENCH_FORK_*, BENCH_BROKER_EXEC */
        unsigned ops; /* BENCH_BROKER_EXEC: ops per request (0: 1) */
        unsigned per_round; /* runs each round (0: 1) */
        unsigned runs; /* rounds it runs in, spread over all of them (0: every one) */
        bench_method_fn fn; /* BENCH_CUSTOM */
        const void *arg; /* BENCH_CUSTOM: the fn's own */
        const char *program; /* its row's program column; NULL: cmd->label */
};

/* Set up ctx: the fat parent (fat: false for none), recorded in r, then the
 * helper with `programs` allowed and `extra` config lines (NULL: none),
 * recorded in r. Returns 0 or -errno; on failure nothing is left. */
int bench_ctx_start(struct bench_ctx *c, const struct bench_opts *o, struct bench_report *r,
                    bool fat, const char *const *programs, const char *extra);
void bench_ctx_stop(struct bench_ctx *c);

/* `warmup` untimed rounds, then `rounds` taking turns; ret[i] summarizes
 * ms[i]. keep (NULL: none) gets the samples, for the caller to clear.
 * `who` starts the progress lines. Returns 0 or -errno. */
int bench_run_rounds(struct bench_ctx *c, const char *who, const struct bench_method *ms, size_t n,
                     unsigned warmup, unsigned rounds, struct bench_summary *ret,
                     struct bench_samples *keep);

/* A comparison's report: a row per method (vs the first), then the
 * ratios "X/Y[ suffix]" of medians for each pair of names in `ratios`
 * (NULL-terminated pairs). Returns 0 or -ENOSPC. */
int bench_report_methods(struct bench_report *r, const struct bench_method *ms,
                         const struct bench_summary *s, size_t n, const char *const (*ratios)[2],
                         const char *suffix);
/* ---- shared set-up and checks (run.c) ---- */

/* An executable `name` in /usr/sbin, /sbin, /usr/bin or /bin, or NULL.
 * The string stays valid. */
const char *bench_find_tool(const char *name);
/* An untimed command (a reset, a listing, a check) as bench_spawn_capture,
 * which must exit 0; `who` ("restart: ") starts the message otherwise.
 * Returns 0 or -errno. */
int bench_run_quiet(const struct bench_fat_parent *fp, const char *who, const char *path,
                    char *const *argv, int in_fd, char *out, size_t cap, size_t *ret_len);
/* Every one of `features` (NULL-terminated) offered by the helper, or a
 * message starting with `who` and -EOPNOTSUPP. */
int bench_need_features(struct nb_conn *conn, const char *who, const char *const *features);
/* Close fds[0..n-1] from up to 64 threads, whose waits (a macvtap's close
 * waits for an RCU grace period) overlap. */
void bench_close_fds(const int *fds, size_t n);
/* RLIMIT_NOFILE at least `need` (a reply holding that many fds). Returns
 * 0 or -errno. */
int bench_raise_fd_limit(unsigned need);
/* Wait until the CPUs have been idle for a 50 ms window, at most 2 s: the
 * kernel's work after a run's ack (freeing devices, kdevtmpfs removing
 * their nodes) must not be paid by the next run. */
void bench_settle(void);
/* s per unit of work: every time divided by n. */
void bench_summary_per(struct bench_summary *s, double n);
/* Submit b and expect n results, every one a success; `who` starts the
 * message otherwise. *ret_done_ns (NULL: not wanted) is the time the reply
 * was in, before any check; *ret (freed by the caller) the results.
 * Returns 0 or -errno. */
struct nb_batch;
struct nb_results;
int bench_submit_all(struct nb_conn *conn, struct nb_batch *b, size_t n, const char *who,
                     uint64_t *ret_done_ns, struct nb_results **ret);
/* The ratios v[num] / v[den], named name + suffix; a pair where either is
 * not positive (a method that did not run) is left out. Returns 0 or
 * -ENOSPC. */
struct bench_pair {
        int num, den;
        const char *name;
};
int bench_report_pairs(struct bench_report *r, const struct bench_pair *p, size_t n,
                       const double *v, const char *suffix);
