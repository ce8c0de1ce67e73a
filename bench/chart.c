/* The chart: one group of bars per comparison, the baselines beside the
 * broker, on a log scale (the figures span from microseconds to seconds),
 * drawn by gnuplot from a data file and a script written here. A bar is
 * the median, its whisker min..max; above each group, baseline / broker. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A line per comparison: its label; median, min, max in ms of base, base2
 * and broker ("-" where none); the ratio label and its height. Quotes would
 * end gnuplot's string: the labels are ours, but say so. */
static int write_data(FILE *f, const struct bench_chart_item *items, size_t n)
{
        char buf[160];

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
                }
                fprintf(f, " \"%.*fx", r1 < 10 ? 2 : 0, r1);
                if (isfinite(r2))
                        fprintf(f, ", %.*fx", r2 < 10 ? 2 : 0, r2);
                fprintf(f, "\" %.6g\n", top / 1000.0 * 2.2);
        }
        return ferror(f) ? -EIO : 0;
}

/* Whole decades, with room above for the ratio labels. */
static void y_range(const struct bench_chart_item *items, size_t n, double *lo, double *hi)
{
        *lo = INFINITY;
        *hi = 0;
        for (size_t i = 0; i < n; i++) {
                const struct bench_summary *s[3] = {&items[i].c->base, &items[i].c->base2,
                                                    &items[i].c->broker};
                for (int k = 0; k < 3; k++) {
                        *lo = s[k]->n ? fmin(*lo, s[k]->min_us / 1000.0) : *lo;
                        *hi = s[k]->n ? fmax(*hi, s[k]->max_us / 1000.0) : *hi;
                }
        }
        *lo = pow(10, floor(log10(*lo > 0 ? *lo : 1e-3)));
        *hi = pow(10, ceil(log10(*hi > 0 ? *hi * 3 : 1)));
}

static int write_script(FILE *f, const char *png, const char *title,
                        const struct bench_chart_item *items, size_t n)
{
        double lo, hi;
        int width = 560 + 140 * (int)n;

        y_range(items, n, &lo, &hi);
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
                width, png, title, lo, hi, (double)n - 0.4);
        return ferror(f) ? -EIO : 0;
}

/* The data go inline as a datablock: gnuplot reads everything from a pipe. */
int bench_chart_png(const char *png, const char *title, const struct bench_chart_item *items,
                    size_t n)
{
        void (*old)(int);
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
        r = write_data(f, items, n);
        fputs("EOD\n", f);
        if (r == 0)
                r = write_script(f, png, title, items, n);
        st = pclose(f);
        signal(SIGPIPE, old);
        if (r == 0 && st != 0) {
                r = WIFEXITED(st) && WEXITSTATUS(st) == 127 ? -ENOENT : -EIO;
                bench_log("netbroker-bench: gnuplot failed (status %d)%s\n", st,
                          r == -ENOENT ? ": apt-get install gnuplot-nox" : "");
        }
        return r;
}
