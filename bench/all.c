/* `all`: every scenario in one process, each in a network namespace of its
 * own, all forking from one fat parent; `--scale`: names and restart at 10,
 * 100 and 1,000. Then each report, the summary, --json, --png. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct size {
        unsigned count, guests, sample, reps;
        unsigned counts[3];
        size_t n_counts;
        const char *text;
};

struct step {
        const char *name;
        struct size full, quick;
};

/* The order of the run. Cheap and exact first; restart, the long one, in
 * the middle, so that a run cut short still has most of the report. */
static const struct step all_steps[] = {
        {"spawn",
         {.text = "200 commands per method (iptables 50), C: 5 requests of 100"},
         {.text = "20 commands per method (iptables 5), C: 2 requests of 100"}},
        {"names",
         {.counts = {82, 1000}, .n_counts = 2, .reps = 5, .text = "82 and 1000 macvtaps, 5 times"},
         {.counts = {82}, .n_counts = 1, .reps = 2, .text = "82 macvtaps, twice"}},
        {"restart",
         {.guests = 20, .text = "20 guests, all timed; N, C, D 20 times"},
         {.guests = 1, .text = "1 guest; N, C, D 20 times"}},
        {"bandwidth",
         {.text = "100 interfaces, 3 runs"},
         {.count = 2, .text = "2 interfaces, 3 runs"}},
        {"log",
         {.reps = 1001, .text = "1001 batches of 10,000 Pings per helper"},
         {.reps = 101, .text = "101 batches of 10,000 Pings per helper"}},
        {"roundtrip",
         {.reps = 300, .text = "300 rounds: 300 A, 300 A2, 30,000 Pings"},
         {.reps = 30, .text = "30 rounds: 30 A, 30 A2, 3,000 Pings"}},
};

#define N_ALL (sizeof(all_steps) / sizeof(*all_steps))
/* names once, restart at each N. */
#define N_SCALE 4
#define SCALE_SAMPLE 5u
static const unsigned scale_ns[] = {10, 100, 1000};

struct result {
        char label[32]; /* "spawn", "restart@100" */
        const char *name; /* the scenario */
        char size[96];
        struct bench_report *r;
        int err;
        double secs;
};

struct run {
        const char *kind; /* "all", "scale" */
        struct result res[N_ALL > N_SCALE ? N_ALL : N_SCALE];
        size_t n;
        double secs;
        bool quick;
};

/* ---- running ---- */

static int run_step(const struct bench_opts *so, struct result *res)
{
        bench_scenario_fn fn = bench_find_scenario(res->name);
        uint64_t t0 = bench_now_ns();

        if (!fn) {
                bench_log("netbroker-bench: no scenario '%s' in this build\n", res->name);
                return res->err = -ENOENT;
        }
        res->r = calloc(1, sizeof(*res->r));
        if (!res->r)
                return res->err = -ENOMEM;
        res->r->scenario = res->name;
        /* A namespace of its own: the last one goes with its last user. */
        if (unshare(CLONE_NEWNET) < 0) {
                res->err = -errno;
                bench_log("netbroker-bench: unshare(CLONE_NEWNET): %s\n", strerror(-res->err));
                return res->err;
        }
        bench_log("\n== %s: %s (%s)\n", res->label, res->size, so->quick ? "quick" : "full");
        res->err = fn(so, res->r);
        res->secs = (double)(bench_now_ns() - t0) / 1e9;
        if (res->err < 0)
                bench_log("netbroker-bench %s: failed: %s\n", res->label, strerror(-res->err));
        else
                bench_report_default_compares(res->r);
        bench_log("== %s: %.1f s\n", res->label, res->secs);
        return res->err;
}

static struct bench_opts sized(const struct bench_opts *o, const struct size *z)
{
        struct bench_opts so = *o;

        so.count = z->count;
        so.guests = o->guests && z->guests ? o->guests : z->guests;
        so.sample = o->sample && z->guests ? o->sample : z->sample;
        so.reps = z->reps;
        so.n_counts = z->n_counts;
        memcpy(so.counts, z->counts, sizeof(z->counts));
        return so;
}

/* ---- the scale table: one row per method, one column per N ---- */

struct scale_row {
        const char *what;
        bool restart; /* else names */
        int cmp; /* restart: 0 VM start, 1 daemon restart */
        int side; /* 0 baseline, 1 baseline today, 2 broker */
};

static const struct scale_row scale_rows[] = {
        {"names A: probing, then create, per device", false, 0, 0},
        {"names B: netbrokerd, per device", false, 0, 2},
        {"restart A: VM start, per guest", true, 0, 0},
        {"restart A2: VM start, per guest", true, 0, 1},
        {"restart C: VM start, per guest", true, 0, 2},
        {"restart Ar: daemon restart, per guest", true, 1, 0},
        {"restart A2r: daemon restart, per guest", true, 1, 1},
        {"restart D: daemon restart, per guest", true, 1, 2},
};

#define N_SCALE_NS (sizeof(scale_ns) / sizeof(*scale_ns))

/* The summary of a row at the i-th N, or NULL where it did not run. The
 * names result holds a comparison per N; restart one result per N. */
static const struct bench_summary *scale_cell(const struct run *run, const struct scale_row *w,
                                              size_t i)
{
        const struct result *res = &run->res[w->restart ? 1 + i : 0];
        size_t k = w->restart ? (size_t)w->cmp : i;
        const struct bench_compare *c;

        if (res->err < 0 || !res->r || k >= res->r->n_compares)
                return NULL;
        c = &res->r->compares[k];
        return w->side == 0 ? &c->base : w->side == 1 ? &c->base2 : &c->broker;
}

static double scale_growth(const struct run *run, const struct scale_row *w)
{
        const struct bench_summary *a = scale_cell(run, w, 0);
        const struct bench_summary *b = scale_cell(run, w, N_SCALE_NS - 1);

        return a && b && a->n && b->n ? b->median_us / a->median_us : NAN;
}

static void print_scale(const struct run *run, FILE *f)
{
        char buf[24];

        fprintf(f, "\ncost per unit as N grows (medians):\n%-42s", "");
        for (size_t i = 0; i < N_SCALE_NS; i++)
                fprintf(f, " %9s%-5u", "N=", scale_ns[i]);
        fprintf(f, " %8s\n", "growth");
        for (size_t r = 0; r < sizeof(scale_rows) / sizeof(*scale_rows); r++) {
                const struct scale_row *w = &scale_rows[r];
                fprintf(f, "%-42s", w->what);
                for (size_t i = 0; i < N_SCALE_NS; i++) {
                        const struct bench_summary *s = scale_cell(run, w, i);
                        fprintf(f, " %14s",
                                bench_fmt_time(s && s->n ? s->median_us : NAN, buf, sizeof(buf)));
                }
                fprintf(f, " %7.2fx\n", scale_growth(run, w));
        }
        fprintf(f, "growth: at N=%u over N=%u; restart: %u guests timed at each N\n",
                scale_ns[N_SCALE_NS - 1], scale_ns[0], SCALE_SAMPLE);
}

static void print_scale_json(const struct run *run, FILE *f)
{
        fputs(",\"per_unit\":[", f);
        for (size_t r = 0; r < sizeof(scale_rows) / sizeof(*scale_rows); r++) {
                const struct scale_row *w = &scale_rows[r];
                fputs(r ? ",{\"what\":" : "{\"what\":", f);
                bench_json_string(f, w->what);
                fputs(",\"median_us\":{", f);
                for (size_t i = 0; i < N_SCALE_NS; i++) {
                        const struct bench_summary *s = scale_cell(run, w, i);
                        fprintf(f, "%s\"%u\":", i ? "," : "", scale_ns[i]);
                        bench_json_number(f, s && s->n ? s->median_us : NAN, 3);
                }
                fputs("},\"growth\":", f);
                bench_json_number(f, scale_growth(run, w), 3);
                fputc('}', f);
        }
        fputc(']', f);
}

/* ---- printing ---- */

static void print_summary(const struct run *run, FILE *f)
{
        bool any = false;

        fprintf(f, "\n==== netbroker-bench %s%s: summary ====\n", run->kind,
                run->quick ? " --quick" : "");
        for (size_t i = 0; i < run->n; i++)
                fprintf(f, "  %-12s %-58s %7.1f s%s\n", run->res[i].label, run->res[i].size,
                        run->res[i].secs, run->res[i].err < 0 ? "  FAILED" : "");
        fprintf(f, "  total %.1f s (%.1f min)\n\n", run->secs, run->secs / 60);
        bench_compare_print_heading(f);
        for (size_t i = 0; i < run->n; i++)
                if (run->res[i].err == 0)
                        any |= bench_report_print_compares(run->res[i].r, run->res[i].label, f);
        if (!any)
                fprintf(f, "(no comparisons)\n");
}

static bool is_scale(const struct run *run)
{
        return strcmp(run->kind, "scale") == 0;
}

static void print_tables(const struct run *run, FILE *f)
{
        for (size_t i = 0; i < run->n; i++) {
                const struct result *res = &run->res[i];
                fprintf(f, "%s==== %s: %s ====\n", i ? "\n" : "", res->label, res->size);
                if (res->err < 0)
                        fprintf(f, "FAILED: %s\n", strerror(-res->err));
                else
                        bench_report_print_table(res->r, f);
        }
        print_summary(run, f);
        if (is_scale(run))
                print_scale(run, f);
}

static void print_json(const struct run *run, FILE *f)
{
        bool first = true;

        fputs("{\"scenario\":", f);
        bench_json_string(f, run->kind);
        fprintf(f, ",\"quick\":%s,", run->quick ? "true" : "false");
        bench_json_machine(f);
        fputs(",\"elapsed_s\":", f);
        bench_json_number(f, run->secs, 1);
        fputs(",\"runs\":[", f);
        for (size_t i = 0; i < run->n; i++) {
                const struct result *res = &run->res[i];
                fputs(i ? ",{\"label\":" : "{\"label\":", f);
                bench_json_string(f, res->label);
                fputs(",\"scenario\":", f);
                bench_json_string(f, res->name);
                fputs(",\"size\":", f);
                bench_json_string(f, res->size);
                fputs(",\"elapsed_s\":", f);
                bench_json_number(f, res->secs, 1);
                fputs(",\"error\":", f);
                if (res->err < 0)
                        bench_json_string(f, strerror(-res->err));
                else
                        fputs("null", f);
                fputc('}', f);
        }
        fputs("],\"summary\":[", f);
        for (size_t i = 0; i < run->n; i++) {
                const struct result *res = &run->res[i];
                for (size_t k = 0; res->err == 0 && k < res->r->n_compares; k++) {
                        if (!first)
                                fputc(',', f);
                        first = false;
                        bench_compare_print_json(&res->r->compares[k], res->label, f);
                }
        }
        /* "spawn: /bin/true, per command A/B": one number per summary line. */
        fputs("],\"ratios\":{", f);
        first = true;
        for (size_t i = 0; i < run->n; i++) {
                const struct result *res = &run->res[i];
                for (size_t k = 0; res->err == 0 && k < res->r->n_compares; k++) {
                        const struct bench_compare *c = &res->r->compares[k];
                        const struct bench_summary *b[2] = {&c->base, &c->base2};
                        const char *bn[2] = {c->base_name, c->base2_name};
                        for (int j = 0; j < 2; j++) {
                                char key[128];
                                if (!b[j]->n)
                                        continue;
                                snprintf(key, sizeof(key), "%s: %s %s/%s", res->label, c->what,
                                         bn[j], c->broker_name);
                                fputs(first ? "" : ",", f);
                                first = false;
                                bench_json_string(f, key);
                                fputc(':', f);
                                bench_json_number(f, bench_compare_ratio(b[j], &c->broker), 3);
                        }
                }
        }
        fputc('}', f);
        if (is_scale(run))
                print_scale_json(run, f);
        fputs(",\"scenarios\":{", f);
        first = true;
        for (size_t i = 0; i < run->n; i++) {
                const struct result *res = &run->res[i];
                if (res->err < 0)
                        continue;
                fputs(first ? "" : ",", f);
                first = false;
                bench_json_string(f, res->label);
                fputc(':', f);
                bench_report_print_json(res->r, f);
        }
        fputs("}}", f);
}

/* run's JSON, or (run NULL) r's, into path. */
static int write_json_file(const char *path, const struct run *run, const struct bench_report *r)
{
        FILE *f = fopen(path, "we");
        int k = 0;

        if (f) {
                if (run)
                        print_json(run, f);
                else
                        bench_report_print_json(r, f);
                fputc('\n', f);
        }
        if (!f || fclose(f) != 0)
                k = -errno;
        if (k < 0)
                bench_log("netbroker-bench: %s: %s\n", path, strerror(-k));
        else
                bench_log("netbroker-bench: JSON written to %s\n", path);
        return k;
}

static int chart(const char *png, const char *title, const struct bench_report *const *reports,
                 const char *const *labels, size_t n)
{
        struct bench_chart_item items[BENCH_MAX_COMPARES * (N_ALL > N_SCALE ? N_ALL : N_SCALE)];
        size_t k = 0;
        int r;

        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; reports[i] && j < reports[i]->n_compares; j++)
                        items[k++] = (struct bench_chart_item){labels[i], &reports[i]->compares[j]};
        r = bench_chart_png(png, title, items, k);
        if (r == 0)
                bench_log("netbroker-bench: chart written to %s\n", png);
        else if (r == -ENODATA)
                bench_log("netbroker-bench: --png: nothing to draw\n");
        return r;
}

static int finish(struct run *run, const struct bench_opts *o)
{
        const struct bench_report *reports[N_ALL > N_SCALE ? N_ALL : N_SCALE];
        const char *labels[N_ALL > N_SCALE ? N_ALL : N_SCALE];
        char title[160];
        int r = 0, k;

        for (size_t i = 0; i < run->n; i++) {
                reports[i] = run->res[i].err < 0 ? NULL : run->res[i].r;
                labels[i] = run->res[i].label;
                if (run->res[i].err < 0 && r == 0)
                        r = run->res[i].err;
        }
        if (o->json) {
                print_json(run, stdout);
                fputc('\n', stdout);
        } else
                print_tables(run, stdout);
        if (o->json_out && (k = write_json_file(o->json_out, run, NULL)) < 0 && r == 0)
                r = k;
        snprintf(title, sizeof(title),
                 "netbroker-bench %s%s: fork/exec and probing versus netbrokerd (baseline / "
                 "broker above each group)",
                 run->kind, run->quick ? " --quick" : "");
        if (o->png && (k = chart(o->png, title, reports, labels, run->n)) < 0 && r == 0)
                r = k;
        for (size_t i = 0; i < run->n; i++)
                free(run->res[i].r);
        return r;
}

/* ---- the two commands ---- */

/* Every result of run with its options so[i], from one fat parent held
 * across them all (they all fork from it), then the report. */
static int run_all(struct run *run, const struct bench_opts *o, const struct bench_opts *so)
{
        uint64_t t0 = bench_now_ns();
        int r = bench_fat_parent(NULL);

        if (r < 0)
                return r;
        run->quick = o->quick;
        for (size_t i = 0; i < run->n; i++)
                (void)run_step(&so[i], &run->res[i]);
        run->secs = (double)(bench_now_ns() - t0) / 1e9;
        return finish(run, o);
}

int bench_all(const struct bench_opts *o)
{
        static struct run run = {.kind = "all"};
        struct bench_opts so[N_ALL];

        for (size_t i = 0; i < N_ALL; i++) {
                const struct step *st = &all_steps[i];
                const struct size *z = o->quick ? &st->quick : &st->full;
                struct result *res = &run.res[run.n++];

                so[i] = sized(o, z);
                res->name = st->name;
                snprintf(res->label, sizeof(res->label), "%s", st->name);
                if (so[i].guests && (so[i].guests != z->guests || so[i].sample != z->sample))
                        snprintf(res->size, sizeof(res->size),
                                 "%u guests, %u timed (--guests, --sample)", so[i].guests,
                                 so[i].sample && so[i].sample < so[i].guests ? so[i].sample
                                                                             : so[i].guests);
                else
                        snprintf(res->size, sizeof(res->size), "%s", z->text);
        }
        return run_all(&run, o, so);
}

int bench_scale(const struct bench_opts *o)
{
        static struct run run = {.kind = "scale", .n = 1};
        const struct size names = {.counts = {10, 100, 1000}, .n_counts = 3, .reps = 3};
        struct bench_opts so[N_SCALE] = {sized(o, &names)};

        run.res[0] = (struct result){
                .label = "names", .name = "names", .size = "10, 100 and 1000 macvtaps, 3 times"};
        for (size_t i = 0; i < N_SCALE_NS; i++) {
                unsigned n = scale_ns[i], k = n < SCALE_SAMPLE ? n : SCALE_SAMPLE;
                struct size z = {.guests = n, .sample = k};
                struct result *res = &run.res[run.n];

                so[run.n] = sized(o, &z);
                so[run.n++].guests = n;
                res->name = "restart";
                snprintf(res->label, sizeof(res->label), "restart@%u", n);
                snprintf(res->size, sizeof(res->size), "%u guests, %u timed, the rest restored", n,
                         k);
        }
        return run_all(&run, o, so);
}

int bench_write_files(const struct bench_opts *o, const struct bench_report *r)
{
        const struct bench_report *reports[1] = {r};
        const char *labels[1] = {r->scenario};
        char title[128];
        int k, ret = 0;

        if (o->json_out && (k = write_json_file(o->json_out, NULL, r)) < 0)
                ret = k;
        snprintf(title, sizeof(title), "netbroker-bench %s (baseline / broker above each group)",
                 r->scenario);
        if (o->png && (k = chart(o->png, title, reports, labels, 1)) < 0 && ret == 0)
                ret = k;
        return ret;
}
