/* netbroker-bench: shared pieces of the scenarios.
 *
 * A scenario is one function in the table in bench.c. It measures, fills a
 * struct bench_report with rows and ratios, and bench.c prints the report as
 * a table or as one JSON object. Everything returns 0 or -errno; a scenario
 * prints what went wrong where it happened. */
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
        const char *helper; /* netbrokerd to spawn; NULL: the library's default */
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
};

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

/* A baseline's child, as libvirt's virCommandRun handled it: read its output
 * until EOF, keeping the first cap - 1 bytes NUL-terminated (for error
 * messages), and reap it. Both return 0 or -errno. */
int bench_drain_fd(int fd, char *buf, size_t cap, size_t *ret_len);
int bench_wait_child(pid_t pid, int *ret_status);

/* ---- the helper (broker.c) ---- */

struct nb_conn;

/* Write a temporary config allowing exactly `programs` (NULL-terminated) and
 * spawn the helper with it over nb_spawn(). The config file is removed by
 * bench_broker_stop(), at exit and on SIGINT/SIGTERM. Returns 0 or -errno. */
int bench_broker_start(const char *helper, const char *const *programs, struct nb_conn **ret);
void bench_broker_stop(struct nb_conn *conn);

/* ---- the report (report.c) ---- */

#define BENCH_MAX_ROWS 32
#define BENCH_MAX_RATIOS 32
#define BENCH_MAX_NOTES 12

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

/* A scenario's own figures, beyond the timing rows: one table whose columns
 * the scenario names, printed before the rows, and in the JSON as the member
 * "figures", an array of objects keyed by the columns' keys. A NAN cell is
 * printed as "-" in the table and as null in the JSON. */
#define BENCH_MAX_COLS 12
#define BENCH_MAX_LINES 24

struct bench_column {
        const char *key; /* JSON key */
        const char *heading; /* table heading, at most `width` bytes */
        int width, decimals;
};

struct bench_line {
        const char *method;
        double v[BENCH_MAX_COLS];
        char text[64]; /* the last column, free text (the JSON key is text_key) */
};

struct bench_figures {
        const struct bench_column *cols;
        size_t n_cols;
        const char *text_key, *text_heading;
        struct bench_line lines[BENCH_MAX_LINES];
        size_t n_lines;
};

struct bench_report {
        const char *scenario;
        const char *title; /* one line under the header */
        const char *const *legend; /* "A  fork, ..." lines, NULL-terminated */
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
        struct bench_figures figures; /* n_cols 0: none */
};

/* Each returns 0, or -ENOSPC when the report is full. */
int bench_report_add_row(struct bench_report *r, const char *method, const char *program,
                         const struct bench_summary *s, const struct bench_summary *baseline);
int bench_report_add_ratio(struct bench_report *r, const char *name, double value);
int bench_report_add_note(struct bench_report *r, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* A line of figures: values for the first n of r->figures.cols (the rest
 * are NAN) and the text column. Returns the line, or NULL when full. */
struct bench_line *bench_report_add_line(struct bench_report *r, const char *method,
                                         const double *v, size_t n, const char *text);

void bench_report_print_table(const struct bench_report *r, FILE *f);
void bench_report_print_json(const struct bench_report *r, FILE *f);

/* ---- scenarios ---- */

int bench_spawn(const struct bench_opts *o, struct bench_report *r);
int bench_names(const struct bench_opts *o, struct bench_report *r);
int bench_restart(const struct bench_opts *o, struct bench_report *r);
int bench_bandwidth(const struct bench_opts *o, struct bench_report *r);
