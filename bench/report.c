// SPDX-License-Identifier: LGPL-2.1-or-later
/* One report per run: a table for people, one JSON object with the same
 * figures for scripts, and the chart: one group of bars per comparison,
 * the baselines beside the broker, on a log scale (the figures span from
 * microseconds to seconds), drawn by gnuplot from a data block and a script
 * written here. A bar is the median, its whisker min..max; above each
 * group, baseline / broker. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

int bench_report_add_row(struct bench_report *r, const char *method, const char *program,
                         const struct bench_summary *s, const struct bench_summary *baseline)
{
        if (r->n_rows >= BENCH_MAX_ROWS)
                return -ENOSPC;
        r->rows[r->n_rows++] = (struct bench_row){
                method, program, *s,
                baseline && s->median_us > 0 ? baseline->median_us / s->median_us : 0};
        return 0;
}

int bench_report_add_ratio(struct bench_report *r, const char *name, double value)
{
        if (r->n_ratios >= BENCH_MAX_RATIOS)
                return -ENOSPC;
        snprintf(r->ratios[r->n_ratios].name, sizeof(r->ratios[0].name), "%s", name);
        r->ratios[r->n_ratios++].value = value;
        return 0;
}

int bench_report_add_note(struct bench_report *r, const char *fmt, ...)
{
        va_list ap;

        if (r->n_notes >= BENCH_MAX_NOTES)
                return -ENOSPC;
        va_start(ap, fmt);
        vsnprintf(r->notes[r->n_notes++], sizeof(r->notes[0]), fmt, ap);
        va_end(ap);
        return 0;
}

int bench_report_add_compare(struct bench_report *r, const char *what, const char *base_name,
                             const struct bench_summary *base, const char *base2_name,
                             const struct bench_summary *base2, const char *broker_name,
                             const struct bench_summary *broker)
{
        struct bench_compare *c;

        if (r->n_compares >= BENCH_MAX_COMPARES)
                return -ENOSPC;
        c = &r->compares[r->n_compares++];
        *c = (struct bench_compare){.base = *base, .broker = *broker};
        snprintf(c->what, sizeof(c->what), "%s", what);
        snprintf(c->base_name, sizeof(c->base_name), "%s", base_name);
        snprintf(c->broker_name, sizeof(c->broker_name), "%s", broker_name);
        if (base2 && base2->n) {
                c->base2 = *base2;
                snprintf(c->base2_name, sizeof(c->base2_name), "%s", base2_name);
        }
        return 0;
}

int bench_report_add_floor(struct bench_report *r, const char *what, const char *floor_name,
                           const struct bench_summary *floor, const char *helper_name,
                           const struct bench_summary *helper, bool p99)
{
        struct bench_floor *fl;

        if (r->n_floors >= BENCH_MAX_FLOORS)
                return -ENOSPC;
        fl = &r->floors[r->n_floors++];
        *fl = (struct bench_floor){.p99 = p99, .floor = *floor, .helper = *helper};
        snprintf(fl->what, sizeof(fl->what), "%s", what);
        snprintf(fl->floor_name, sizeof(fl->floor_name), "%s", floor_name);
        snprintf(fl->helper_name, sizeof(fl->helper_name), "%s", helper_name);
        return 0;
}

double bench_floor_ratio(const struct bench_floor *f)
{
        double a = f->p99 ? f->helper.p99_us : f->helper.median_us;
        double b = f->p99 ? f->floor.p99_us : f->floor.median_us;

        return f->floor.n && f->helper.n && b > 0 ? a / b : NAN;
}

double bench_compare_ratio(const struct bench_summary *base, const struct bench_summary *broker)
{
        return base->n && broker->n && broker->median_us > 0 ? base->median_us / broker->median_us
                                                             : NAN;
}

/* 12.3 us, 4.56 ms, 7.89 s: three significant digits, whatever the size. */
const char *bench_fmt_time(double us, char *buf, size_t len)
{
        static const struct {
                double div;
                const char *unit;
        } units[] = {{1e6, "s"}, {1e3, "ms"}, {1, "us"}};
        size_t i = 0;

        if (!isfinite(us)) {
                snprintf(buf, len, "-");
                return buf;
        }
        while (i < 2 && us < units[i].div)
                i++;
        us /= units[i].div;
        snprintf(buf, len, "%.*f %s", us >= 100 ? 0 : us >= 10 ? 1 : 2, us, units[i].unit);
        return buf;
}

static void print_compare_side(FILE *f, const char *name, const struct bench_summary *s)
{
        char med[24], lo[24], hi[24];

        fprintf(f, "%-3s %9s [%s .. %s]", name, bench_fmt_time(s->median_us, med, sizeof(med)),
                bench_fmt_time(s->min_us, lo, sizeof(lo)),
                bench_fmt_time(s->max_us, hi, sizeof(hi)));
}

/* A line per baseline: scenario, what, baseline, broker, ratio. */
bool bench_report_print_compares(const struct bench_report *r, const char *label, FILE *f)
{
        for (size_t i = 0; i < r->n_compares; i++) {
                const struct bench_compare *c = &r->compares[i];
                const struct bench_summary *bases[2] = {&c->base, &c->base2};
                const char *names[2] = {c->base_name, c->base2_name};
                for (int k = 0; k < 2; k++) {
                        if (!bases[k]->n)
                                continue;
                        fprintf(f, "%-10s %-40s ", label, c->what);
                        print_compare_side(f, names[k], bases[k]);
                        fputs("  ", f);
                        print_compare_side(f, c->broker_name, &c->broker);
                        fprintf(f, "  %9.2f\n", bench_compare_ratio(bases[k], &c->broker));
                }
        }
        return r->n_compares > 0;
}

void bench_floor_print_heading(FILE *f)
{
        fprintf(f, "%-10s %-40s %-33s  %-33s  %9s\n", "scenario", "what (floor: medians or p99s)",
                "floor [min .. max]", "helper [min .. max]", "hlp/floor");
}

bool bench_report_print_floors(const struct bench_report *r, const char *label, FILE *f)
{
        for (size_t i = 0; i < r->n_floors; i++) {
                const struct bench_floor *fl = &r->floors[i];
                struct bench_summary a = fl->floor, b = fl->helper;
                char what[64];
                /* A p99 floor prints its p99s where the medians go. */
                a.median_us = fl->p99 ? a.p99_us : a.median_us;
                b.median_us = fl->p99 ? b.p99_us : b.median_us;
                snprintf(what, sizeof(what), "%s%s", fl->what, fl->p99 ? ", p99" : "");
                fprintf(f, "%-10s %-40s ", label, what);
                print_compare_side(f, fl->floor_name, &a);
                fputs("  ", f);
                print_compare_side(f, fl->helper_name, &b);
                fprintf(f, "  %9.2f\n", bench_floor_ratio(fl));
        }
        return r->n_floors > 0;
}

void bench_compare_print_heading(FILE *f)
{
        fprintf(f, "%-10s %-40s %-33s  %-33s  %9s\n", "scenario", "what",
                "baseline median [min .. max]", "broker median [min .. max]", "base/brk");
}

struct machine {
        long nproc;
        struct utsname u;
        char cpu[128];
};

static void get_machine(struct machine *m)
{
        FILE *f = fopen("/proc/cpuinfo", "re");
        char line[256], *colon;

        m->nproc = sysconf(_SC_NPROCESSORS_ONLN);
        if (uname(&m->u) < 0)
                memset(&m->u, 0, sizeof(m->u));
        snprintf(m->cpu, sizeof(m->cpu), "unknown");
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "model name", 10) == 0 && (colon = strchr(line, ':'))) {
                        colon += strspn(colon + 1, " \t") + 1;
                        snprintf(m->cpu, sizeof(m->cpu), "%.*s", (int)strcspn(colon, "\n"), colon);
                        break;
                }
        if (f)
                fclose(f);
}

void bench_report_print_table(const struct bench_report *r, FILE *f)
{
        struct machine m;

        get_machine(&m);
        fprintf(f, "netbroker-bench %s: %s\n", r->scenario, r->title);
        fprintf(f, "machine: %ld CPUs (%s), Linux %s %s\n", m.nproc, m.cpu, m.u.release,
                m.u.machine);
        if (r->has_parent)
                fprintf(f, "parent:  RLIMIT_NOFILE %u, %u fds open, %zu MiB of heap touched\n",
                        r->parent.fd_limit, r->parent.fds_open, r->parent.heap_bytes >> 20);
        if (r->helper_pid > 0)
                fprintf(f, "helper:  netbrokerd pid %d with %d fds open\n", r->helper_pid,
                        r->helper_fds);
        fputc('\n', f);
        if (r->n_rows)
                fprintf(f, "\n%-6s %-22s %6s %12s %12s %12s %12s %8s\n", "method", "program",
                        "runs", "median us", "min us", "max us", "p99 us", "vs A");
        for (size_t i = 0; i < r->n_rows; i++) {
                const struct bench_row *w = &r->rows[i];
                fprintf(f, "%-6s %-22s %6zu %12.1f %12.1f %12.1f %12.1f %8.2f\n", w->method,
                        w->program, w->s.n, w->s.median_us, w->s.min_us, w->s.max_us, w->s.p99_us,
                        w->vs_baseline);
        }
        fprintf(f, "\n%s:", r->ratios_title ? r->ratios_title : "ratios of medians");
        for (size_t i = 0; i < r->n_ratios; i++)
                fprintf(f, "%s %s %.2f", i ? "," : "", r->ratios[i].name, r->ratios[i].value);
        fputc('\n', f);
        for (size_t i = 0; i < r->n_notes; i++)
                fprintf(f, "note: %s\n", r->notes[i]);
        if (r->n_compares) {
                fputc('\n', f);
                bench_compare_print_heading(f);
                bench_report_print_compares(r, r->scenario, f);
        }
        if (r->n_floors) {
                fputc('\n', f);
                bench_floor_print_heading(f);
                bench_report_print_floors(r, r->scenario, f);
        }
}

/* "key": (",key": with the comma) before a value; key NULL: none; "," or
 * ":" alone: that separator. */
static void json_key(FILE *f, const char *key)
{
        if (key && (strcmp(key, ",") == 0 || strcmp(key, ":") == 0))
                fputs(key, f); /* a separator alone */
        else if (key)
                fprintf(f, "%s\"%s\":", *key == ',' ? "," : "", key + (*key == ','));
}

void bench_json_str(FILE *f, const char *key, const char *s)
{
        json_key(f, key);
        fputs(s ? "\"" : "null", f);
        for (; s && *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c == '"' || c == '\\')
                        fprintf(f, "\\%c", c);
                else if (c < 0x20)
                        fprintf(f, "\\u%04x", c);
                else
                        fputc(c, f);
        }
        fputs(s ? "\"" : "", f);
}

/* JSON has no NaN or infinity; a ratio that could not be computed is null. */
void bench_json_num(FILE *f, const char *key, double v, int decimals)
{
        json_key(f, key);
        if (isfinite(v))
                fprintf(f, "%.*f", decimals, v);
        else
                fputs("null", f);
}

void bench_json_machine(FILE *f)
{
        struct machine m;

        get_machine(&m);
        fprintf(f, "\"machine\":{\"nproc\":%ld", m.nproc);
        bench_json_str(f, ",cpu", m.cpu);
        bench_json_str(f, ",kernel", m.u.release);
        bench_json_str(f, ",arch", m.u.machine);
        fputc('}', f);
}

/* ,"runs":..,"median_us":..,"min_us":..,"max_us":..,"p99_us":.. */
static void json_summary(FILE *f, const struct bench_summary *s)
{
        fprintf(f, ",\"runs\":%zu", s->n);
        bench_json_num(f, ",median_us", s->median_us, 3);
        bench_json_num(f, ",min_us", s->min_us, 3);
        bench_json_num(f, ",max_us", s->max_us, 3);
        bench_json_num(f, ",p99_us", s->p99_us, 3);
}

static void json_side(FILE *f, const char *key, const char *name, const struct bench_summary *s)
{
        fprintf(f, ",\"%s\":{", key);
        bench_json_str(f, "method", name);
        json_summary(f, s);
        fputc('}', f);
}

void bench_compare_print_json(const struct bench_compare *c, const char *scenario, FILE *f)
{
        fputc('{', f);
        bench_json_str(f, "scenario", scenario);
        bench_json_str(f, ",what", c->what);
        json_side(f, "baseline", c->base_name, &c->base);
        if (c->base2.n)
                json_side(f, "baseline2", c->base2_name, &c->base2);
        json_side(f, "broker", c->broker_name, &c->broker);
        bench_json_num(f, ",ratio", bench_compare_ratio(&c->base, &c->broker), 3);
        if (c->base2.n)
                bench_json_num(f, ",ratio2", bench_compare_ratio(&c->base2, &c->broker), 3);
        fputc('}', f);
}

void bench_floor_print_json(const struct bench_floor *fl, const char *scenario, FILE *f)
{
        fputc('{', f);
        bench_json_str(f, "scenario", scenario);
        bench_json_str(f, ",what", fl->what);
        bench_json_str(f, ",of", fl->p99 ? "p99" : "median");
        json_side(f, "floor", fl->floor_name, &fl->floor);
        json_side(f, "helper", fl->helper_name, &fl->helper);
        bench_json_num(f, ",ratio", bench_floor_ratio(fl), 3);
        fputc('}', f);
}

void bench_report_print_json(const struct bench_report *r, FILE *f)
{
        fputc('{', f);
        bench_json_str(f, "scenario", r->scenario);
        fputc(',', f);
        bench_json_machine(f);
        if (r->has_parent)
                fprintf(f, ",\"parent\":{\"fd_limit\":%u,\"fds_open\":%u,\"heap_bytes\":%zu}",
                        r->parent.fd_limit, r->parent.fds_open, r->parent.heap_bytes);
        if (r->helper_pid > 0)
                fprintf(f, ",\"helper\":{\"pid\":%d,\"fds_open\":%d}", r->helper_pid,
                        r->helper_fds);
        fputs(",\"rows\":[", f);
        for (size_t i = 0; i < r->n_rows; i++) {
                const struct bench_row *w = &r->rows[i];
                fputs(i ? ",{" : "{", f);
                bench_json_str(f, "method", w->method);
                bench_json_str(f, ",program", w->program);
                json_summary(f, &w->s);
                bench_json_num(f, ",vs_A", w->vs_baseline > 0 ? w->vs_baseline : NAN, 3);
                fputc('}', f);
        }
        fputs("],\"ratios\":{", f);
        for (size_t i = 0; i < r->n_ratios; i++) {
                bench_json_str(f, i ? "," : NULL, r->ratios[i].name);
                bench_json_num(f, ":", r->ratios[i].value, 3);
        }
        fputs("},\"compares\":[", f);
        for (size_t i = 0; i < r->n_compares; i++) {
                fputs(i ? "," : "", f);
                bench_compare_print_json(&r->compares[i], r->scenario, f);
        }
        fputs("],\"floors\":[", f);
        for (size_t i = 0; i < r->n_floors; i++) {
                fputs(i ? "," : "", f);
                bench_floor_print_json(&r->floors[i], r->scenario, f);
        }
        fputs("],\"notes\":[", f);
        for (size_t i = 0; i < r->n_notes; i++)
                bench_json_str(f, i ? "," : NULL, r->notes[i]);
        fputs("]}", f);
}

/* ---- the chart ---- */

/* A line per comparison: its label; median, min, max in ms of base, base2
 * and broker ("-" where none); the ratio label and its height. Quotes would
 * end gnuplot's string: the labels are ours, but say so. *lo, *hi: the
 * y range, whole decades with room above for the ratio labels. */
static int write_data(FILE *f, const struct bench_chart_item *items, size_t n, double *lo,
                      double *hi)
{
        char buf[160];

        *lo = INFINITY;
        *hi = 0;
        for (size_t i = 0; i < n; i++) {
                const struct bench_compare *c = items[i].c;
                const struct bench_summary *s[3] = {&c->base, &c->base2, &c->broker};
                double r1 = bench_compare_ratio(&c->base, &c->broker);
                double r2 = bench_compare_ratio(&c->base2, &c->broker), top = 0;
                snprintf(buf, sizeof(buf), "%s: %s (%s%s%s vs %s)", items[i].scenario, c->what,
                         c->base_name, c->base2.n ? ", " : "", c->base2.n ? c->base2_name : "",
                         c->broker_name);
                for (char *p = buf; *p; p++)
                        *p = *p == '"' ? '\'' : *p;
                fprintf(f, "\"%s\"", buf);
                for (int k = 0; k < 3; k++) {
                        if (s[k]->n)
                                fprintf(f, " %.6g %.6g %.6g", s[k]->median_us / 1000.0,
                                        s[k]->min_us / 1000.0, s[k]->max_us / 1000.0);
                        else
                                fputs(" - - -", f);
                        top = s[k]->n ? fmax(top, s[k]->max_us) : top;
                        *lo = s[k]->n ? fmin(*lo, s[k]->min_us / 1000.0) : *lo;
                }
                *hi = fmax(*hi, top / 1000.0);
                fprintf(f, " \"%.*fx", r1 < 10 ? 2 : 0, r1);
                if (isfinite(r2))
                        fprintf(f, ", %.*fx", r2 < 10 ? 2 : 0, r2);
                fprintf(f, "\" %.6g\n", top / 1000.0 * 2.2);
        }
        *lo = pow(10, floor(log10(*lo > 0 ? *lo : 1e-3)));
        *hi = pow(10, ceil(log10(*hi > 0 ? *hi * 3 : 1)));
        return ferror(f) ? -EIO : 0;
}

static int write_script(FILE *f, const char *png, const char *title, size_t n, double lo, double hi)
{
        fprintf(f,
                /* noenhanced: labels hold '@' and '_', which enhanced text
                 * would take for markup. */
                "set terminal pngcairo noenhanced size %d,820 font 'DejaVu Sans,10'\n"
                "set output '%s'\n"
                "set title \"%s\" font ',12'\n"
                "set logscale y\n"
                "set yrange [%g:%g]\n"
                "set xrange [-0.6:%g]\n"
                "set format y '%%g'\n"
                "set ylabel 'ms per unit of work (median; whiskers: min..max; log scale)'\n"
                "set grid ytics mytics\n"
                "set style data histogram\n"
                "set style histogram errorbars gap 1.5 lw 1\n"
                "set style fill solid 0.85 border -1\n"
                "set bars front\n"
                "set datafile missing '-'\n"
                "set xtics rotate by 30 right scale 0 font ',9' nomirror offset 2,0\n"
                "set bmargin 16\n"

                "set lmargin 30\n"
                "set key outside right top vertical Left reverse font ',9'\n"
                "plot $data using 2:3:4:xtic(1) title 'A: libvirt 2018 (names: probing; log: "
                "X)' lc rgb '#c0392b', \\\n"
                "     $data using 5:6:7 title 'A2: libvirt today (close_range)' lc rgb '#e67e22', "
                "\\\n"
                "     $data using 8:9:10 title 'netbrokerd' lc rgb '#2471a3', \\\n"
                "     $data using 0:12:11 with labels font ',9' notitle\n",
                560 + 140 * (int)n, png, title, lo, hi, (double)n - 0.4);
        return ferror(f) ? -EIO : 0;
}

/* The data go inline as a datablock: gnuplot reads everything from a pipe. */
int bench_chart_png(const char *png, const char *title, const struct bench_chart_item *items,
                    size_t n)
{
        void (*old)(int);
        double lo, hi;
        FILE *f;
        int st, r;

        if (n == 0)
                return -ENODATA;
        /* The path goes into the script between single quotes. */
        if (strchr(png, '\'') || strchr(png, '\n')) {
                bench_log("netbroker-bench: --png: no quotes or newlines in the path, please\n");
                return -EINVAL;
        }
        /* A gnuplot that is missing or dies early must not kill us. */
        old = signal(SIGPIPE, SIG_IGN);
        f = popen("gnuplot", "we");
        if (!f) {
                r = -errno;
                signal(SIGPIPE, old);
                return r;
        }
        fputs("$data << EOD\n", f);
        r = write_data(f, items, n, &lo, &hi);
        fputs("EOD\n", f);
        if (r == 0)
                r = write_script(f, png, title, n, lo, hi);
        st = pclose(f);
        signal(SIGPIPE, old);
        if (r == 0 && st != 0) {
                r = WIFEXITED(st) && WEXITSTATUS(st) == 127 ? -ENOENT : -EIO;
                bench_log("netbroker-bench: gnuplot failed (status %d)%s\n", st,
                          r == -ENOENT ? ": apt-get install gnuplot-nox" : "");
        }
        return r;
}
