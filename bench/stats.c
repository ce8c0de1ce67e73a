/* Samples and their summary: median, min, max. The median, not the mean:
 * one page-cache miss or a scheduler hiccup must not move the figure. */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bench_now_ns(void)
{
        struct timespec ts;

        /* Monotonic: an NTP step in the middle of a run must not count. */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bench_samples_add(struct bench_samples *s, double us)
{
        if (s->n == s->cap) {
                size_t ncap = s->cap ? s->cap * 2 : 64;
                double *p = realloc(s->us, ncap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                s->us = p;
                s->cap = ncap;
        }
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
