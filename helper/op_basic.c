/* Ping and Stats: the session ops. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "spawn.h"

static int run_ping(struct nb_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        (void)job, (void)op, (void)res;
        return 0;
}

const struct nb_op_handler nb_op_ping = {
        .name = "ping",
        .stat = NB_STAT_OPS_PING,
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

static int run_stats(struct nb_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        Netbroker__StatsResult *st = malloc(sizeof(*st));
        int r = 0;

        (void)job, (void)op;
        if (!st)
                return nb_result_set(res, ENOMEM, "stats: out of memory");
        netbroker__stats_result__init(st);
        res->out_case = NETBROKER__RESULT__OUT_STATS;
        res->stats = st;
        st->counters = calloc(NB_STAT__MAX + 2, sizeof(*st->counters));
        if (!st->counters)
                return nb_result_set(res, ENOMEM, "stats: out of memory");
        for (size_t i = 0; i < NB_STAT__MAX && r == 0; i++)
                r = add_counter(st, nb_stat_name((enum nb_stat)i), nb_stats[i]);
        /* Gauges, not counters: what is under way right now. */
        if (r == 0)
                r = add_counter(st, "children_running", nb_children_running());
        if (r == 0)
                r = add_counter(st, "spawns_waiting", nb_jobs_waiting());
        return r < 0 ? nb_result_set(res, ENOMEM, "stats: out of memory") : 0;
}

const struct nb_op_handler nb_op_stats = {
        .name = "stats",
        .stat = NB_STAT_OPS_STATS,
        .run = run_stats,
};
