// SPDX-License-Identifier: LGPL-2.1-or-later
/* `all`: every scenario in one process, each in a network namespace of its
 * own, all forking from one fat parent; `--scale`: names at 10 to 10,000
 * devices, restart at 10 to 4,096 guests, fairness at 4,096. Then each
 * report, the summary (comparisons, floors, the scale table), --json,
 * --png. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct size {
        unsigned count, guests, sample, reps;
        unsigned counts[BENCH_MAX_COUNTS];
        size_t n_counts;
        const char *text;
};

/* The order of the run. Cheap and exact first; restart, the long one, in
 * the middle, so that a run cut short still has most of the report. */
static const struct {
        const char *name;
        struct size full, quick;
} all_steps[] = {
        {"spawn",
         {.text = "200 commands per method (iptables 50), C: 5 requests of 100"},
         {.text = "20 commands per method (iptables 5), C: 2 requests of 100"}},
        {"names",
         {.counts = {82, 1000}, .n_counts = 2, .reps = 5, .text = "82 and 1000 macvtaps, 5 times"},
         {.counts = {82}, .n_counts = 1, .reps = 2, .text = "82 macvtaps, twice"}},
        {"restart",
         {.guests = 20, .text = "20 guests, all timed; N, C, D, F 20 times"},
         {.guests = 1, .text = "1 guest; N, C, D, F 20 times"}},
        {"bandwidth",
         {.text = "100 interfaces, 3 runs"},
         {.count = 2, .text = "2 interfaces, 3 runs"}},
        {"fairness",
         {.guests = 1000,
          .count = 100,
          .text = "Pings during 1000 guests' replace, 100 taps' deletion"},
         {.guests = 50, .count = 20, .text = "Pings during 50 guests' replace, 20 taps' deletion"}},
        {"network",
         {.count = 20, .text = "20 NAT networks, 3 rounds"},
         {.count = 2, .reps = 1, .text = "2 NAT networks, 1 round"}},
        {"log",
         {.reps = 1001, .text = "1001 batches of 10,000 Pings per helper"},
         {.reps = 101, .text = "101 batches of 10,000 Pings per helper"}},
        {"roundtrip",
         {.reps = 300, .text = "300 rounds: 300 A, 300 A2, 30,000 Pings"},
         {.reps = 30, .text = "30 rounds: 30 A, 30 A2, 3,000 Pings"}},
};

#define MAX_RUNS BENCH_N(all_steps)
/* --scale: names once at each of names_ns, restart at each of restart_ns
 * (SCALE_SAMPLE guests timed by the baselines, none above
 * BENCH_BASELINE_MAX), fairness at the largest. */
#define SCALE_SAMPLE 5u
#define N_SCALE_NS 4
static const unsigned names_ns[N_SCALE_NS] = {10, 100, 1000, 10000},
                      restart_ns[N_SCALE_NS] = {10, 100, 1000, BENCH_RESTART_MAX_GUESTS};

struct result {
        char label[32]; /* "spawn", "restart@100" */
        const char *name; /* the scenario */
        char size[96];
        struct bench_opts o;
        struct bench_report *r; /* NULL when it failed */
        int err;
        double secs;
};

static struct run {
        const char *kind; /* "all", "scale" */
        struct result res[MAX_RUNS];
        size_t n;
        double secs;
        bool quick;
} run;

static void run_step(struct result *res)
{
        bench_scenario_fn fn = bench_find_scenario(res->name);
        uint64_t t0 = bench_now_ns();

        res->r = calloc(1, sizeof(*res->r));
        res->err = res->r ? 0 : -ENOMEM;
        /* A namespace of its own: the last one goes with its last user. */
        if (res->err == 0 && unshare(CLONE_NEWNET) < 0)
                res->err = -errno;
        if (run.n > 1 || strcmp(run.kind, "scale") == 0)
                bench_log("\n== %s: %s (%s)\n", res->label, res->size,
                          res->o.quick ? "quick" : "full");
        if (res->err == 0) {
                res->r->scenario = res->name;
                res->err = fn(&res->o, res->r);
        }
        res->secs = (double)(bench_now_ns() - t0) / 1e9;
        if (res->err < 0) {
                bench_log("netbroker-bench %s: failed: %s\n", res->label, strerror(-res->err));
                free(res->r);
                res->r = NULL;
        }
        bench_log("== %s: %.1f s\n", res->label, res->secs);
}

/* A result of the run: the scenario, its label, its options sized by z. */
static struct result *add(const struct bench_opts *o, const char *name, const struct size *z)
{
        struct result *res = &run.res[run.n++];

        res->name = name;
        snprintf(res->label, sizeof(res->label), "%s", name);
        snprintf(res->size, sizeof(res->size), "%s", z->text ? z->text : "");
        res->o = *o;
        res->o.count = z->count;
        res->o.guests = o->guests && z->guests ? o->guests : z->guests;
        res->o.sample = o->sample && z->guests ? o->sample : z->sample;
        /* --scale --reps N: every scale step's repetitions. */
        res->o.reps = strcmp(run.kind, "scale") == 0 && o->reps ? o->reps : z->reps;
        res->o.n_counts = z->n_counts;
        memcpy(res->o.counts, z->counts, sizeof(z->counts));
        return res;
}

/* ---- the scale table: one row per method, one column per N ---- */

/* Each row's figures are a method's per-unit medians, found by its name in
 * the comparisons and floors of the result for that N. */
static const struct {
        const char *what;
        bool restart; /* else names */
        const char *method;
} scale_rows[] = {
        {"names K: the kernel's create (floor), per device", false, "K"},
        {"names A: probing, then create, per device", false, "A"},
        {"names B: netbrokerd, per device", false, "B"},
        {"restart A: VM start, per guest", true, "A"},
        {"restart A2: VM start, per guest", true, "A2"},
        {"restart C: VM start, per guest", true, "C"},
        {"restart F: C's floor (libmnl), per guest", true, "F"},
        {"restart N: one nft -f, per guest", true, "N"},
        {"restart Ar: daemon restart, per guest", true, "Ar"},
        {"restart A2r: daemon restart, per guest", true, "A2r"},
        {"restart D: daemon restart, per guest", true, "D"},
};

static double pick(const struct bench_summary *const *s, const char *const *names, size_t n,
                   const char *m)
{
        for (size_t i = 0; i < n; i++)
                if (s[i]->n && strcmp(names[i], m) == 0)
                        return s[i]->median_us;
        return NAN;
}

/* Method m's median in r where a comparison's or floor's `what` starts
 * with needle ("82 macvtaps,"). */
static double find_median(const struct bench_report *r, const char *needle, const char *m)
{
        size_t nl = strlen(needle);
        double v = NAN;

        for (size_t i = 0; r && i < r->n_compares + r->n_floors && !isfinite(v); i++) {
                bool cmp = i < r->n_compares;
                const struct bench_compare *c = cmp ? &r->compares[i] : NULL;
                const struct bench_floor *f = cmp ? NULL : &r->floors[i - r->n_compares];
                const char *what = cmp ? c->what : f->what;
                if (strncmp(what, needle, nl) != 0)
                        continue;
                v = cmp ? pick((const struct bench_summary *[]){&c->base, &c->base2, &c->broker},
                               (const char *[]){c->base_name, c->base2_name, c->broker_name}, 3, m)
                        : pick((const struct bench_summary *[]){&f->floor, &f->helper},
                               (const char *[]){f->floor_name, f->helper_name}, 2, m);
        }
        return v;
}

static unsigned scale_n(size_t w, size_t i)
{
        return scale_rows[w].restart ? restart_ns[i] : names_ns[i];
}

/* Row w's median at the i-th N, NAN where it did not run: restart's rows
 * are per guest, one result per N; names' per device where each device
 * was timed alone, so its comparisons' and floors' (wall time / N). */
static double scale_cell(size_t w, size_t i)
{
        const struct bench_report *r = run.res[scale_rows[w].restart ? 1 + i : 0].r;
        char needle[32];

        for (size_t k = 0; scale_rows[w].restart && r && k < r->n_rows; k++)
                if (strcmp(r->rows[k].method, scale_rows[w].method) == 0)
                        return r->rows[k].s.median_us;
        snprintf(needle, sizeof(needle), "%u macvtaps,", scale_n(w, i));
        return scale_rows[w].restart ? NAN : find_median(r, needle, scale_rows[w].method);
}

/* The largest N's figure over N=100's: the largest N the row has. */
static double scale_growth(size_t w)
{
        for (size_t i = N_SCALE_NS; i-- > 2;)
                if (isfinite(scale_cell(w, i)))
                        return scale_cell(w, i) / scale_cell(w, 1);
        return NAN;
}

static void print_scale(FILE *f, bool json)
{
        char buf[24];

        fputs(json ? ",\"per_unit\":[" : "\ncost per unit as N grows (medians):", f);
        for (size_t w = 0; w < BENCH_N(scale_rows); w++) {
                bool head = !json && (w == 0 || scale_rows[w].restart != scale_rows[w - 1].restart);
                if (head) {
                        fprintf(f, "\n%-50s", scale_rows[w].restart ? "restart" : "names");
                        for (size_t i = 0; i < N_SCALE_NS; i++)
                                fprintf(f, " %8s%-6u", "N=", scale_n(w, i));
                        fprintf(f, " %8s\n", "growth");
                }
                if (json) {
                        fputs(w ? ",{" : "{", f);
                        bench_json_str(f, "what", scale_rows[w].what);
                        fputs(",\"median_us\":{", f);
                } else {
                        fprintf(f, "%-50s", scale_rows[w].what);
                }
                for (size_t i = 0; i < N_SCALE_NS; i++) {
                        if (json) {
                                fprintf(f, "%s\"%u\":", i ? "," : "", scale_n(w, i));
                                bench_json_num(f, NULL, scale_cell(w, i), 3);
                        } else {
                                fprintf(f, " %14s",
                                        bench_fmt_time(scale_cell(w, i), buf, sizeof(buf)));
                        }
                }
                if (json) {
                        fputc('}', f);
                        bench_json_num(f, ",growth", scale_growth(w), 3);
                        fputc('}', f);
                } else {
                        fprintf(f, " %7.2fx\n", scale_growth(w));
                }
        }
        if (json)
                fputc(']', f);
        else
                fprintf(f,
                        "growth: per unit at the largest N measured over N=100; restart: the "
                        "baselines time %u guests at each N up to %u\n",
                        SCALE_SAMPLE, BENCH_BASELINE_MAX);
}

/* ---- printing ---- */

static void print_tables(FILE *f)
{
        bool any = false;

        for (size_t i = 0; i < run.n; i++) {
                const struct result *res = &run.res[i];
                fprintf(f, "%s==== %s: %s ====\n", i ? "\n" : "", res->label, res->size);
                if (res->r)
                        bench_report_print_table(res->r, f);
                else
                        fprintf(f, "FAILED: %s\n", strerror(-res->err));
        }
        fprintf(f, "\n==== netbroker-bench %s%s: summary ====\n", run.kind,
                run.quick ? " --quick" : "");
        for (size_t i = 0; i < run.n; i++)
                fprintf(f, "  %-12s %-58s %7.1f s%s\n", run.res[i].label, run.res[i].size,
                        run.res[i].secs, run.res[i].r ? "" : "  FAILED");
        fprintf(f, "  total %.1f s (%.1f min)\n\n", run.secs, run.secs / 60);
        bench_compare_print_heading(f);
        for (size_t i = 0; i < run.n; i++)
                if (run.res[i].r)
                        any |= bench_report_print_compares(run.res[i].r, run.res[i].label, f);
        if (!any)
                fprintf(f, "(no comparisons)\n");
        fprintf(f, "\nfloors, helper / floor:\n");
        bench_floor_print_heading(f);
        for (size_t i = 0; i < run.n; i++)
                if (run.res[i].r)
                        bench_report_print_floors(run.res[i].r, run.res[i].label, f);
        if (strcmp(run.kind, "scale") == 0)
                print_scale(f, false);
}

/* "summary": every comparison; "ratios": "spawn: /bin/true, per command
 * A/B", one number per summary line. "floors", "floor_ratios": the same of
 * the floors ("spawn: /bin/true, per command B/F"). */
static void print_floors_json(FILE *f, bool ratios)
{
        bool first = true;
        char key[128];

        for (size_t i = 0; i < run.n; i++)
                for (size_t k = 0; run.res[i].r && k < run.res[i].r->n_floors; k++) {
                        const struct bench_floor *fl = &run.res[i].r->floors[k];
                        fputs(first ? "" : ",", f);
                        first = false;
                        if (!ratios) {
                                bench_floor_print_json(fl, run.res[i].label, f);
                                continue;
                        }
                        snprintf(key, sizeof(key), "%s: %s %s/%s%s", run.res[i].label, fl->what,
                                 fl->helper_name, fl->floor_name, fl->p99 ? " p99" : "");
                        bench_json_str(f, NULL, key);
                        bench_json_num(f, ":", bench_floor_ratio(fl), 3);
                }
}

static void print_compares_json(FILE *f, bool ratios)
{
        bool first = true;

        for (size_t i = 0; i < run.n; i++) {
                const struct result *res = &run.res[i];
                for (size_t k = 0; res->r && k < res->r->n_compares; k++) {
                        const struct bench_compare *c = &res->r->compares[k];
                        const struct bench_summary *b[2] = {&c->base, &c->base2};
                        const char *bn[2] = {c->base_name, c->base2_name};
                        char key[128];
                        for (int j = 0; ratios && j < 2; j++) {
                                if (!b[j]->n)
                                        continue;
                                snprintf(key, sizeof(key), "%s: %s %s/%s", res->label, c->what,
                                         bn[j], c->broker_name);
                                bench_json_str(f, first ? NULL : ",", key);
                                bench_json_num(f, ":", bench_compare_ratio(b[j], &c->broker), 3);
                                first = false;
                        }
                        if (!ratios) {
                                fputs(first ? "" : ",", f);
                                first = false;
                                bench_compare_print_json(c, res->label, f);
                        }
                }
        }
}

static void print_json(FILE *f)
{
        fputc('{', f);
        bench_json_str(f, "scenario", run.kind);
        fprintf(f, ",\"quick\":%s,", run.quick ? "true" : "false");
        bench_json_machine(f);
        bench_json_num(f, ",elapsed_s", run.secs, 1);
        fputs(",\"runs\":[", f);
        for (size_t i = 0; i < run.n; i++) {
                const struct result *res = &run.res[i];
                fputs(i ? ",{" : "{", f);
                bench_json_str(f, "label", res->label);
                bench_json_str(f, ",scenario", res->name);
                bench_json_str(f, ",size", res->size);
                bench_json_num(f, ",elapsed_s", res->secs, 1);
                bench_json_str(f, ",error", res->r ? NULL : strerror(-res->err));
                fputc('}', f);
        }
        fputs("],\"summary\":[", f);
        print_compares_json(f, false);
        fputs("],\"ratios\":{", f);
        print_compares_json(f, true);
        fputs("},\"floors\":[", f);
        print_floors_json(f, false);
        fputs("],\"floor_ratios\":{", f);
        print_floors_json(f, true);
        fputc('}', f);
        if (strcmp(run.kind, "scale") == 0)
                print_scale(f, true);
        fputs(",\"scenarios\":{", f);
        for (size_t i = 0, first = 1; i < run.n; i++) {
                if (!run.res[i].r)
                        continue;
                bench_json_str(f, first ? NULL : ",", run.res[i].label);
                fputc(':', f);
                bench_report_print_json(run.res[i].r, f);
                first = 0;
        }
        fputs("}}", f);
}

/* --json-out (the run's JSON, or with r, r's) and --png, as asked. */
static int write_files(const struct bench_opts *o, const struct bench_report *r, const char *title)
{
        struct bench_chart_item items[BENCH_MAX_COMPARES * MAX_RUNS];
        FILE *f = o->json_out ? fopen(o->json_out, "we") : NULL;
        size_t n = 0;
        int ret = 0, k;

        if (f && r)
                bench_report_print_json(r, f);
        else if (f)
                print_json(f);
        if (o->json_out && (!f || fputc('\n', f) == EOF || fclose(f) != 0)) {
                ret = -errno;
                bench_log("netbroker-bench: %s: %s\n", o->json_out, strerror(-ret));
        } else if (o->json_out) {
                bench_log("netbroker-bench: JSON written to %s\n", o->json_out);
        }
        for (size_t i = 0; i < (r ? 1 : run.n); i++) {
                const struct bench_report *ri = r ? r : run.res[i].r;
                for (size_t j = 0; ri && j < ri->n_compares; j++)
                        items[n++] = (struct bench_chart_item){r ? r->scenario : run.res[i].label,
                                                               &ri->compares[j]};
        }
        k = o->png ? bench_chart_png(o->png, title, items, n) : 0;
        if (o->png && k == 0)
                bench_log("netbroker-bench: chart written to %s\n", o->png);
        else if (k == -ENODATA)
                bench_log("netbroker-bench: --png: nothing to draw\n");
        return ret < 0 ? ret : k;
}

/* Every result of the run, `all` and `--scale` from one fat parent (they
 * all fork from it), then the report: the run's, or one scenario's. */
static int run_all(const struct bench_opts *o, bool one)
{
        uint64_t t0 = bench_now_ns();
        char title[160];
        int r = one ? 0 : bench_fat_parent(NULL), k;

        for (size_t i = 0; i < run.n && r == 0; i++)
                run_step(&run.res[i]);
        for (size_t i = 0; i < run.n && r == 0; i++)
                r = run.res[i].err;
        run.secs = (double)(bench_now_ns() - t0) / 1e9;
        if (one && r == 0 && o->json)
                bench_report_print_json(run.res[0].r, stdout);
        else if (one && r == 0)
                bench_report_print_table(run.res[0].r, stdout);
        else if (!one && o->json)
                print_json(stdout);
        else if (!one)
                print_tables(stdout);
        if (o->json && (!one || r == 0))
                fputc('\n', stdout);
        snprintf(title, sizeof(title),
                 one ? "netbroker-bench %s (baseline / broker above each group)"
                     : "netbroker-bench %s%s: fork/exec and probing versus netbrokerd (baseline / "
                       "broker above each group)",
                 run.kind, run.quick ? " --quick" : "");
        k = one && r < 0 ? 0 : write_files(o, one ? run.res[0].r : NULL, title);
        for (size_t i = 0; i < run.n; i++)
                free(run.res[i].r);
        return r < 0 ? r : k;
}

int bench_run(const struct bench_opts *o, const char *what)
{
        const struct size names = {.counts = {10, 100, 1000, 10000},
                                   .n_counts = 4,
                                   .reps = 3,
                                   .text = "10, 100, 1000 and 10000 macvtaps, 3 times"};
        const struct size fair = {.guests = BENCH_RESTART_MAX_GUESTS,
                                  .count = 100,
                                  .reps = 3,
                                  .text = "Pings during 4096 guests' replace, 100 taps' deletion"};
        bool all = strcmp(what, "all") == 0, scale = !all && bench_find_scenario(what) == NULL;

        run.kind = scale ? "scale" : what;
        run.quick = o->quick;
        for (size_t i = 0; all && i < MAX_RUNS; i++) {
                const struct size *z = o->quick ? &all_steps[i].quick : &all_steps[i].full;
                struct result *res = add(o, all_steps[i].name, z);
                if (strcmp(res->name, "restart") == 0 && res->o.guests &&
                    (res->o.guests != z->guests || res->o.sample != z->sample))
                        snprintf(res->size, sizeof(res->size),
                                 "%u guests, %u timed (--guests, --sample)", res->o.guests,
                                 res->o.sample && res->o.sample < res->o.guests ? res->o.sample
                                                                                : res->o.guests);
        }
        if (scale)
                add(o, "names", &names);
        for (size_t i = 0; scale && i < N_SCALE_NS; i++) {
                unsigned n = restart_ns[i], k = n < SCALE_SAMPLE ? n : SCALE_SAMPLE;
                /* Minutes a repetition at 4,096: 3, not 5. */
                const struct size z = {.guests = n, .sample = k, .reps = n > 1000 ? 3 : 0};
                struct result *res = add(o, "restart", &z);

                res->o.guests = n;
                snprintf(res->label, sizeof(res->label), "restart@%u", n);
                if (n > BENCH_BASELINE_MAX)
                        snprintf(res->size, sizeof(res->size), "%u guests, C, D, N, F only", n);
                else
                        snprintf(res->size, sizeof(res->size),
                                 "%u guests, %u timed, the rest restored", n, k);
        }
        if (scale)
                add(o, "fairness", &fair);
        if (!all && !scale)
                add(o, what, &(struct size){0})->o = *o;
        return run_all(o, !all && !scale);
}
