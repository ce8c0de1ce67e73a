// SPDX-License-Identifier: LGPL-2.1-or-later
/* Ping and Stats: the session ops. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bandwidth.h"
#include "ops.h"

static int run_ping(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        (void)job, (void)op, (void)res;
        return 0;
}

const struct nbd_op_handler nbd_op_ping = {
        .name = "ping",
        .stat = NBD_STAT_OPS_PING,
        .run = run_ping,
};

static int add_counter(Netbroker__StatsResult *st, const char *name, uint64_t value)
{
        Netbroker__Counter *c = malloc(sizeof(*c));

        if (!c)
                return -ENOMEM;
        netbroker__counter__init(c);
        c->name = strdup(name);
        c->value = value;
        if (!c->name) {
                free(c);
                return -ENOMEM;
        }
        st->counters[st->n_counters++] = c;
        return 0;
}

static int add_setting(Netbroker__StatsResult *st, const char *name, const char *value)
{
        Netbroker__Setting *s = malloc(sizeof(*s));

        if (!s)
                return -ENOMEM;
        netbroker__setting__init(s);
        s->name = strdup(name);
        s->value = strdup(value);
        if (!s->name || !s->value) {
                free(s->name);
                free(s->value);
                free(s);
                return -ENOMEM;
        }
        st->settings[st->n_settings++] = s;
        return 0;
}

/* Which mechanisms this helper uses, for a reader of Stats. */
static int add_settings(const struct nbd_dispatch_ctx *ctx, Netbroker__StatsResult *st)
{
        const char *in = "none: no rtnetlink", *out = in;

        st->settings = calloc(2, sizeof(*st->settings));
        if (!st->settings)
                return -ENOMEM;
        if (ctx->bw)
                ctx->be->bw.mechanisms(ctx->bw, &in, &out);
        if (add_setting(st, "bandwidth_inbound", in) < 0 ||
            add_setting(st, "bandwidth_outbound", out) < 0)
                return -ENOMEM;
        return 0;
}

static int run_stats(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        Netbroker__StatsResult *st = malloc(sizeof(*st));
        int r = 0;

        (void)op;
        if (!st)
                return nbd_result_set(res, -ENOMEM, "stats: out of memory");
        netbroker__stats_result__init(st);
        res->out_case = NETBROKER__RESULT__OUT_STATS;
        res->stats = st;
        st->counters = calloc(NBD_STAT__MAX + 2, sizeof(*st->counters));
        if (!st->counters)
                return nbd_result_set(res, -ENOMEM, "stats: out of memory");
        for (size_t i = 0; i < NBD_STAT__MAX && r == 0; i++)
                r = add_counter(st, nbd_stat_name((enum nbd_stat)i),
                                __atomic_load_n(&nbd_stats[i], __ATOMIC_RELAXED));
        /* Gauges, not counters: what is under way right now. */
        if (r == 0)
                r = add_counter(st, "children_running", nbd_job_ctx(job)->be->spawn.running());
        if (r == 0)
                r = add_counter(st, "spawns_waiting", nbd_jobs_waiting());
        if (r == 0)
                r = add_settings(nbd_job_ctx(job), st);
        return r < 0 ? nbd_result_set(res, -ENOMEM, "stats: out of memory") : 0;
}

const struct nbd_op_handler nbd_op_stats = {
        .name = "stats",
        .stat = NBD_STAT_OPS_STATS,
        .run = run_stats,
};
