// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbroker-bench: shared pieces of the scenarios. A scenario fills a
 * struct bench_report; everything returns 0 or -errno and says what went
 * wrong where it happened. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define BENCH_MAX_COUNTS 4
#define BENCH_NAMES_MAX_COUNT 10000 /* one request: the helper's max_ops is raised to it */
#define BENCH_RESTART_MAX_GUESTS 4096 /* vnet0..vnet4095: the helper's default max_ops */
/* Above this, restart's baselines (hours of ebtables) and names' probing (N^2/2
 * probes) are skipped, with the reason printed. */
#define BENCH_BASELINE_MAX 1000
#define BENCH_BANDWIDTH_MAX_IFACES 1000 /* vbw0..vbw999 */
#define BENCH_N(a) (sizeof(a) / sizeof(*(a)))

struct bench_opts {
        bool json, quick;
        unsigned count; /* 0: the scenario's default, as for every count here */
        unsigned counts[BENCH_MAX_COUNTS]; /* --counts 82,1000 (names) */
        size_t n_counts;
        unsigned guests; /* --guests N (restart) */
        unsigned sample; /* --sample K (restart): time K guests, fill the rest; 0: all */
        unsigned reps; /* --reps N: repetitions where a scenario repeats */
        const char *helper; /* netbrokerd to spawn; NULL: the library's default */
        const char *helper_nolog; /* log: netbrokerd built with NB_LOG_NO_DEBUG */
        const char *json_out, *png; /* --json-out FILE, --png FILE */
};

/* Progress and diagnostics; stderr, so that stdout stays one JSON object. */
#define bench_log(...) fprintf(stderr, __VA_ARGS__)

/* ---- time and samples (run.c) ---- */

struct bench_samples {
        double *us;
        size_t n, cap;
};

struct bench_summary {
        size_t n;
        double median_us, min_us, max_us;
        double p99_us; /* nearest rank: the smallest sample >= 99% of them */
};

uint64_t bench_now_ns(void);
int bench_samples_add(struct bench_samples *s, double us);
/* -ENODATA for no samples. */
int bench_samples_summarize(const struct bench_samples *s, struct bench_summary *ret);
void bench_samples_clear(struct bench_samples *s);
/* s per unit of work: every time divided by n. */
void bench_summary_per(struct bench_summary *s, double n);

/* ---- the fat parent, and running programs from it (fatparent.c) ---- */

/* libvirt's daemon as the seeds describe it. */
#define BENCH_FAT_FD_LIMIT 8192u
#define BENCH_FAT_FDS 500u
#define BENCH_FAT_HEAP (1024ul * 1024 * 1024)

struct bench_fat_parent {
        unsigned fd_limit; /* RLIMIT_NOFILE, soft and hard */
        unsigned fds_open; /* fds open after setup, all inheritable */
        int devnull; /* one of them, for children's stdin */
        size_t heap_bytes; /* every page written */
};

/* Set up on the first call, kept until exit; its figures into *ret (NULL:
 * not wanted). */
int bench_fat_parent(struct bench_fat_parent *ret);
/* Open fds of process pid, or -errno. */
int bench_count_fds(int pid);

/* A baseline's command as virCommandRun ran it from the fat parent: fork,
 * stdin /dev/null, output into out, the other fds closed by close_range(3,
 * ~0) (A2, libvirt today) or by close() of every fd 3..open_max-1 (A,
 * libvirt 2018; open_max 0: sysconf before fork), exec, reap. */
int bench_fork_exec(bool close_range, long open_max, const char *path, char *const *argv, char *out,
                    size_t cap, size_t *ret_len, int *ret_status);
/* An untimed command (close_range, stdin in_fd or /dev/null) that must exit
 * 0; `who` ("restart: ") starts the message otherwise. */
int bench_run_quiet(const char *who, const char *path, char *const *argv, int in_fd, char *out,
                    size_t cap, size_t *ret_len);

/* ---- the helper (run.c) ---- */

struct nb_conn;
struct nb_batch;
struct nb_results;

/* Spawn the helper allowing exactly `programs`, plus `extra` config lines
 * (NULL: none); -EOPNOTSUPP unless it offers every one of `features`
 * (NULL-terminated; NULL: none). */
int bench_broker_start(const char *helper, const char *const *programs, const char *extra,
                       const char *const *features, struct nb_conn **ret);
/* The helper run with --listen sock (helper NULL: -ENOENT), n clients
 * connected to it in ret[0..n); *ret_pid to SIGTERM and reap. */
int bench_broker_listen(const char *helper, const char *const *programs, const char *extra,
                        const char *sock, size_t n, struct nb_conn **ret, int *ret_pid);
/* The CPU time every thread of process pid has had, in ns (schedstat);
 * 0 when unreadable (restart.c). */
uint64_t bench_process_cpu_ns(int pid);
/* Submit b and expect n results, every one a success. *ret_done_ns (NULL:
 * not wanted) is when the reply was in; *ret the results, for the caller. */
int bench_submit_all(struct nb_conn *conn, struct nb_batch *b, size_t n, const char *who,
                     uint64_t *ret_done_ns, struct nb_results **ret);
/* Devices named prefix + digits ("macvtap12"), or -errno; exactly `want`
 * of them, or -EPROTO with a message starting with `who` ("names: "). */
int bench_count_devices(const char *prefix);
int bench_expect_devices(const char *who, const char *prefix, unsigned want);
/* Veth pairs prefix+i and peer+i (i < n) made by the helper in one request,
 * both ends up when `up`, those there deleted first (and all they had
 * with them); *ret_ifindex (NULL: not wanted) the first's. */
int bench_veths(struct nb_conn *conn, const char *who, const char *prefix, const char *peer,
                unsigned n, bool up, int *ret_ifindex);
/* Persistent taps prefix0..prefix(n-1), made in one request. */
int bench_taps(struct nb_conn *conn, const char *who, const char *prefix, unsigned n);
/* The FirewallApply batch of restart: guests 0..n-1 (taps vnetI), each
 * with no-promisc + clean-traffic, replace or ensure (restart.c). */
int bench_fw_batch(unsigned n, bool replace, struct nb_batch **ret);
/* An executable `name` in /usr/sbin, /sbin, /usr/bin or /bin, or NULL. */
const char *bench_find_tool(const char *name);

/* ---- the report (report.c) ---- */

#define BENCH_MAX_ROWS 32
#define BENCH_MAX_RATIOS 32
#define BENCH_MAX_NOTES 4
#define BENCH_MAX_COMPARES 8
#define BENCH_MAX_FLOORS 8

struct bench_row {
        const char *method; /* "A", "B", ... */
        const char *program; /* what it ran */
        struct bench_summary s;
        double vs_baseline; /* baseline median / this median; 0 when none */
};

struct bench_ratio {
        char name[48]; /* "A/B", "A/B iptables" */
        double value;
};

/* A headline comparison for the summary and the chart: baseline (base2:
 * today's libvirt, n == 0 where none) and broker per unit of work. */
struct bench_compare {
        char what[56]; /* "/bin/true, per command" */
        char base_name[8], base2_name[8], broker_name[8]; /* "A", "A2", "B" */
        struct bench_summary base, base2, broker;
};

/* A floor: what the kernel or the OS alone costs for the work a helper
 * method does, measured in the same run; its ratio is helper / floor, of
 * the medians (p99: of the p99s). */
struct bench_floor {
        char what[56]; /* "/bin/true, per command" */
        char floor_name[8], helper_name[8]; /* "F", "B" */
        bool p99;
        struct bench_summary floor, helper;
};

struct bench_report {
        const char *scenario;
        const char *title; /* one line under the header */
        const char *ratios_title; /* NULL: "ratios of medians" */
        bool has_parent; /* measured from the fat parent, whose figures: */
        struct bench_fat_parent parent;
        int helper_pid, helper_fds; /* 0 when no helper was used */
        struct bench_row rows[BENCH_MAX_ROWS];
        size_t n_rows;
        struct bench_ratio ratios[BENCH_MAX_RATIOS];
        size_t n_ratios;
        char notes[BENCH_MAX_NOTES][160];
        size_t n_notes;
        struct bench_compare compares[BENCH_MAX_COMPARES];
        size_t n_compares;
        struct bench_floor floors[BENCH_MAX_FLOORS];
        size_t n_floors;
};

/* Each returns 0, or -ENOSPC when the report is full. base2 NULL or empty:
 * no second baseline. */
int bench_report_add_row(struct bench_report *r, const char *method, const char *program,
                         const struct bench_summary *s, const struct bench_summary *baseline);
int bench_report_add_ratio(struct bench_report *r, const char *name, double value);
int bench_report_add_note(struct bench_report *r, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
int bench_report_add_compare(struct bench_report *r, const char *what, const char *base_name,
                             const struct bench_summary *base, const char *base2_name,
                             const struct bench_summary *base2, const char *broker_name,
                             const struct bench_summary *broker);
/* A floor and the helper method it bounds: 0, or -ENOSPC. */
int bench_report_add_floor(struct bench_report *r, const char *what, const char *floor_name,
                           const struct bench_summary *floor, const char *helper_name,
                           const struct bench_summary *helper, bool p99);
/* helper / floor (medians, or p99s); NAN when either is missing. */
double bench_floor_ratio(const struct bench_floor *f);
/* The ratios "X/Y" + suffix for each pair of spec ("A/B A2/B"), of v[i]
 * named names[i]; a pair with a value missing or not positive is left out. */
int bench_report_ratios(struct bench_report *r, const char *spec, const char *suffix,
                        const char *const *names, const double *v, size_t n);
/* baseline median / broker median; NAN when either is missing. */
double bench_compare_ratio(const struct bench_summary *base, const struct bench_summary *broker);
/* "12.3 us", "4.56 ms", "7.89 s" into buf; returns buf. */
const char *bench_fmt_time(double us, char *buf, size_t len);

void bench_report_print_table(const struct bench_report *r, FILE *f);
/* The JSON object, without a newline. */
void bench_report_print_json(const struct bench_report *r, FILE *f);
/* The summary's heading; r's comparisons under it labelled `label`, or one
 * as JSON; JSON pieces: "key": (",key": with a comma; NULL: no key) and a
 * string or a number (null when not finite), "machine":{..}. */
void bench_compare_print_heading(FILE *f);
bool bench_report_print_compares(const struct bench_report *r, const char *label, FILE *f);
void bench_compare_print_json(const struct bench_compare *c, const char *scenario, FILE *f);
/* The floors, as the comparisons: a heading, r's lines labelled `label`
 * (false: none), one as JSON. */
void bench_floor_print_heading(FILE *f);
bool bench_report_print_floors(const struct bench_report *r, const char *label, FILE *f);
void bench_floor_print_json(const struct bench_floor *fl, const char *scenario, FILE *f);
void bench_json_str(FILE *f, const char *key, const char *s); /* s NULL: null */
void bench_json_num(FILE *f, const char *key, double v, int decimals);
void bench_json_machine(FILE *f);

/* ---- the chart (chart.c) ---- */

struct bench_chart_item {
        const char *scenario;
        const struct bench_compare *c;
};

/* A PNG by gnuplot; -ENOENT: no gnuplot (said on stderr), -ENODATA: n 0. */
int bench_chart_png(const char *png, const char *title, const struct bench_chart_item *items,
                    size_t n);

/* ---- scenarios (bench.c, all.c) ---- */

typedef int (*bench_scenario_fn)(const struct bench_opts *o, struct bench_report *r);

/* The scenario table's function for name, or NULL. bench_run: scenario
 * `what`, `all` or (any other) `--scale`; run, print, write the files asked
 * for; -errno when a scenario failed (with `all`, the others still ran). */
bench_scenario_fn bench_find_scenario(const char *name);
int bench_run(const struct bench_opts *o, const char *what);

int bench_spawn(const struct bench_opts *o, struct bench_report *r);
int bench_names(const struct bench_opts *o, struct bench_report *r);
int bench_restart(const struct bench_opts *o, struct bench_report *r);
int bench_log_scenario(const struct bench_opts *o, struct bench_report *r);
int bench_roundtrip(const struct bench_opts *o, struct bench_report *r);
int bench_bandwidth(const struct bench_opts *o, struct bench_report *r);
int bench_fairness(const struct bench_opts *o, struct bench_report *r);
/* fairness's floor D0 (groupfloor.c): interfaces PREFIX0..PREFIX(n-1) put
 * in a link group, untimed, then the group deleted in one RTM_DELLINK,
 * timed into *ret_us. */
int bench_group_delete(const char *prefix, unsigned n, double *ret_us);
int bench_network(const struct bench_opts *o, struct bench_report *r); /* network.c */

/* ---- the method runners (run.c) ---- */

struct bench_ctx {
        long open_max; /* fork loop: 0 takes sysconf(_SC_OPEN_MAX) before each fork */
        struct nb_conn *conn; /* the helper, spawned from the fat parent if any */
        void *scenario; /* the scenario's own state, for BENCH_CUSTOM methods */
};

/* A program a method runs; every run must exit 0 (and print `expect`). */
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
/* One run of a BENCH_CUSTOM method, *ret_us per unit of work; `timed` is
 * false for warm-up runs. */
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

/* The fat parent (fat: false for none), then the helper with `programs`
 * allowed and `extra` config lines, both recorded in r. */
int bench_ctx_start(struct bench_ctx *c, const struct bench_opts *o, struct bench_report *r,
                    bool fat, const char *const *programs, const char *extra,
                    const char *const *features);
void bench_ctx_stop(struct bench_ctx *c);
/* One command run `how` (BENCH_FORK_*: from the fat parent; BENCH_BROKER_EXEC:
 * one Exec op), stdout and stderr into out; *ret_ok when it exited 0.
 * -errno when it could not run or was killed. */
int bench_run_cmd(struct bench_ctx *c, enum bench_how how, const char *path, char *const *argv,
                  char *out, size_t cap, size_t *ret_len, bool *ret_ok);
/* `warmup` untimed rounds, then `rounds` taking turns (the order reversed
 * every other round); ret[i] summarizes ms[i]'s samples, which keep (NULL:
 * cleared) gets for the caller to clear. */
int bench_run_rounds(struct bench_ctx *c, const char *who, const struct bench_method *ms, size_t n,
                     unsigned warmup, unsigned rounds, struct bench_summary *ret,
                     struct bench_samples *keep);
/* A row per method (vs the first), then bench_report_ratios of medians. */
int bench_report_methods(struct bench_report *r, const struct bench_method *ms,
                         const struct bench_summary *s, size_t n, const char *spec,
                         const char *suffix);

/* ---- the floor process (floor.c) ---- */

/* A small process that measures a floor: this program run again with
 * --floor (bench.c hands it to bench_floor_main), fds 0-3 only. */
struct bench_floor_proc {
        int fd, pid;
        const void *req; /* pong: what each round trip sends, req_len bytes */
        size_t req_len, reply_len;
};

int bench_floor_main(int argc, char **argv);
/* args: "spawn", PATH, ARG..., NULL or "pong", "Q", "R", NULL. */
int bench_floor_start(const char *const *args, struct bench_floor_proc *ret);
void bench_floor_stop(struct bench_floor_proc *p); /* accepts a stopped one */
/* BENCH_CUSTOM methods, arg the process: its posix_spawn+waitpid as it
 * timed it; one ping-pong as we time it. */
int bench_floor_spawn_once(struct bench_ctx *c, const struct bench_method *m, bool timed,
                           double *ret_us);
int bench_floor_pong_once(struct bench_ctx *c, const struct bench_method *m, bool timed,
                          double *ret_us);

/* ---- restart's floor (nftfloor.c) ---- */

/* A table's chains and rules as the kernel dumps them (keep: as objects,
 * to send again; else counted only). */
struct bench_nft_table;
int bench_nft_capture(const char *table, bool keep, struct bench_nft_table **ret);
void bench_nft_counts(const struct bench_nft_table *t, size_t *ret_chains, size_t *ret_rules);
/* One transaction that creates it all (on an empty ruleset), by libmnl;
 * *ret_us from building the batch to the last ack. */
int bench_nft_send(const struct bench_nft_table *t, double *ret_us);
void bench_nft_free(struct bench_nft_table *t); /* accepts NULL */
