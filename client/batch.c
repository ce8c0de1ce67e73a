/* Building batches. Every call copies what it is given, so the caller's
 * buffers can go as soon as the call returns, and fails at once on bad
 * input: no error is kept for later (no sticky errors). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

NB_EXPORT nb_batch *nb_batch_new(void)
{
        nb_batch *b = calloc(1, sizeof(*b));

        if (b)
                netbroker__request__init(&b->req);
        return b;
}

NB_EXPORT void nb_batch_free(nb_batch *b)
{
        if (!b)
                return;
        for (size_t i = 0; i < b->req.n_ops; i++)
                protobuf_c_message_free_unpacked(&b->req.ops[i]->base, NULL);
        free(b->req.ops);
        free(b);
}

NB_EXPORT void nb_batch_set_flags(nb_batch *b, unsigned flags)
{
        b->req.flags = 0;
        if (flags & NB_BATCH_CONTINUE_ON_ERROR)
                b->req.flags |= NETBROKER__REQUEST_FLAG__REQUEST_FLAG_CONTINUE_ON_ERROR;
}

NB_EXPORT size_t nb_batch_size(const nb_batch *b)
{
        return b->req.n_ops;
}

/* Append a fresh Op; the caller fills it and must free it on failure. */
static int add_op(nb_batch *b, Netbroker__Op *op)
{
        if (b->req.n_ops == b->cap) {
                size_t ncap = b->cap ? b->cap * 2 : 8;
                Netbroker__Op **p = realloc(b->req.ops, ncap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                b->req.ops = p;
                b->cap = ncap;
        }
        b->req.ops[b->req.n_ops++] = op;
        return 0;
}

static Netbroker__Op *new_op(void)
{
        Netbroker__Op *op = malloc(sizeof(*op));

        if (op)
                netbroker__op__init(op);
        return op;
}

NB_EXPORT int nb_batch_ping(nb_batch *b)
{
        Netbroker__Op *op = new_op();
        Netbroker__Ping *p = malloc(sizeof(*p));

        if (!b || !op || !p) {
                free(op);
                free(p);
                return b ? -ENOMEM : -EINVAL;
        }
        netbroker__ping__init(p);
        op->op_case = NETBROKER__OP__OP_PING;
        op->ping = p;
        if (add_op(b, op) < 0) {
                protobuf_c_message_free_unpacked(&op->base, NULL);
                return -ENOMEM;
        }
        return 0;
}

NB_EXPORT int nb_batch_stats(nb_batch *b)
{
        Netbroker__Op *op = new_op();
        Netbroker__StatsQuery *q = malloc(sizeof(*q));

        if (!b || !op || !q) {
                free(op);
                free(q);
                return b ? -ENOMEM : -EINVAL;
        }
        netbroker__stats_query__init(q);
        op->op_case = NETBROKER__OP__OP_STATS;
        op->stats = q;
        if (add_op(b, op) < 0) {
                protobuf_c_message_free_unpacked(&op->base, NULL);
                return -ENOMEM;
        }
        return 0;
}

/* Copy a NULL-terminated string vector. */
static int copy_strv(const char *const *v, char ***ret, size_t *ret_n)
{
        size_t n = 0;
        char **out;

        while (v && v[n])
                n++;
        if (n == 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        out = calloc(n, sizeof(*out));
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                out[i] = strdup(v[i]);
                if (!out[i]) {
                        while (i--)
                                free(out[i]);
                        free(out);
                        return -ENOMEM;
                }
        }
        *ret = out;
        *ret_n = n;
        return 0;
}

NB_EXPORT int nb_batch_exec(nb_batch *b, const char *path, const char *const *argv,
                            const char *const *envp, const void *stdin_data, size_t stdin_len,
                            unsigned timeout_ms)
{
        Netbroker__Op *op;
        Netbroker__Exec *e;

        if (!b || !path || path[0] != '/' || (stdin_len && !stdin_data))
                return -EINVAL;
        for (size_t i = 0; envp && envp[i]; i++) {
                const char *eq = strchr(envp[i], '=');
                if (!eq || eq == envp[i])
                        return -EINVAL;
        }
        op = new_op();
        e = malloc(sizeof(*e));
        if (!op || !e) {
                free(op);
                free(e);
                return -ENOMEM;
        }
        netbroker__exec__init(e);
        op->op_case = NETBROKER__OP__OP_EXEC;
        op->exec = e;
        e->timeout_ms = timeout_ms;
        e->path = strdup(path);
        if (!e->path) {
                e->path = (char *)protobuf_c_empty_string;
                goto oom;
        }
        if (copy_strv(argv, &e->argv, &e->n_argv) < 0 || copy_strv(envp, &e->env, &e->n_env) < 0)
                goto oom;
        if (stdin_len) {
                e->stdin_data.data = malloc(stdin_len);
                if (!e->stdin_data.data)
                        goto oom;
                memcpy(e->stdin_data.data, stdin_data, stdin_len);
                e->stdin_data.len = stdin_len;
        }
        if (add_op(b, op) < 0)
                goto oom;
        return 0;
oom:
        protobuf_c_message_free_unpacked(&op->base, NULL);
        return -ENOMEM;
}
