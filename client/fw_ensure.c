// SPDX-License-Identifier: LGPL-2.1-or-later
/* nb_fw_ensure(): an ensure that sends the rules only of the owners whose
 * content hash is not in place (issue 14; netbroker.h). At 4,096 guests
 * the rules are ~100,000 FwRule messages: packing them costs the client
 * 0.6 s of CPU and unpacking them the helper 0.5 s, only to find every
 * hash equal. Owners and hashes go first; the rules follow for the stale. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The caller's array at its stride, in our layout (netbroker.h, ABI). */
static int owners_in(const char *who, const nb_fw_ensure_owner *owners, size_t n,
                     nb_fw_ensure_owner **ret)
{
        size_t stride = owners[0].size;
        nb_fw_ensure_owner *mine = calloc(n, sizeof(*mine));
        int r = 0;

        if (!mine)
                return -ENOMEM;
        for (size_t i = 0; i < n && r == 0; i++) {
                const nb_fw_ensure_owner *o = (const void *)((const char *)owners + i * stride);
                char arg[32];

                snprintf(arg, sizeof(arg), "owners[%zu]", i);
                r = o->size != stride
                            ? nb_bad_arg(EINVAL, who, "%s: size %zu is not owners[0]'s %zu", arg,
                                         o->size, stride)
                            : NB_ARG_IN(who, arg, &mine[i], o, NB_FW_ENSURE_OWNER);
        }
        if (r < 0) {
                free(mine);
                return r;
        }
        *ret = mine;
        return 0;
}

static bool has_hash(const nb_fw_ensure_owner *o)
{
        return o->hash && o->hash[0];
}

/* The first request: every owner with a hash, by hash. */
static int ask(nb_conn *conn, const nb_fw_ensure_owner *v, size_t n, nb_results **ret)
{
        nb_batch *b = nb_batch_new();
        int r = b ? 0 : -ENOMEM;

        for (size_t k = 0; k < n && r == 0; k++)
                if (has_hash(&v[k]))
                        r = nb_batch_firewall_ensure_hash(b, v[k].owner, v[k].ifname, v[k].hash);
        if (r == 0)
                r = nb_submit(conn, b, ret);
        nb_batch_free(b);
        return r;
}

/* The second: the stale owners' rules, in ensure mode (one transaction). */
static int send_rules(nb_conn *conn, const nb_fw_ensure_owner *v, const bool *stale, size_t n,
                      nb_fw_rules_fn rules, void *data, nb_results **ret)
{
        nb_batch *b = nb_batch_new();
        int r = b ? 0 : -ENOMEM;

        for (size_t k = 0; k < n && r == 0; k++) {
                nb_fw_ruleset *rs;
                if (!stale[k])
                        continue;
                rs = nb_fw_ruleset_new();
                r = rs ? rules(k, rs, data) : -ENOMEM;
                if (r == 0)
                        r = nb_batch_firewall_apply(b, v[k].owner, v[k].ifname, rs, NB_FW_ENSURE);
                nb_fw_ruleset_free(rs);
        }
        if (r == 0)
                r = nb_submit(conn, b, ret);
        nb_batch_free(b);
        return r;
}

/* One reply of n results, owner k's at k: first's for the owners in place
 * (first has one per owner with a hash), second's for the stale (one each,
 * in order). The results change hands between the two unpacked messages,
 * so each is freed once, with whichever message holds it. */
static int merge(nb_results *first, nb_results *second, const nb_fw_ensure_owner *v,
                 const bool *stale, size_t n, nb_results **ret)
{
        Netbroker__Reply *f = first ? first->msg->reply : NULL, *s = second->msg->reply;
        size_t j = 0, m = 0, left = 0;
        Netbroker__Result **all = calloc(n, sizeof(*all)), **out = NULL;

        if (!all)
                return -ENOMEM;
        for (size_t k = 0; k < n; k++) {
                Netbroker__Result *mine = has_hash(&v[k]) ? f->results[j++] : NULL;
                all[k] = stale[k] ? s->results[m++] : mine;
                /* A stale owner's first answer goes to the second reply. */
                if (stale[k] && mine)
                        s->results[left++] = mine;
        }
        s->n_results = left;
        if (!first) {
                /* Every owner was sent: the second reply is the answer. */
                memcpy(s->results, all, n * sizeof(*all));
                s->n_results = n;
                free(all);
                *ret = second;
                return 0;
        }
        out = f->results;
        f->results = all;
        f->n_results = n;
        free(out);
        nb_results_free(second);
        *ret = first;
        return 0;
}

NB_EXPORT int nb_fw_ensure(nb_conn *conn, const nb_fw_ensure_owner *owners, size_t n,
                           nb_fw_rules_fn rules, void *data, nb_results **ret)
{
        nb_fw_ensure_owner *v = NULL;
        nb_results *first = NULL, *second = NULL;
        size_t n_hashed = 0, n_stale = 0;
        bool *stale = NULL;
        int r;

        if (!conn || !owners || !rules || !ret)
                return nb_bad_arg(EINVAL, __func__, "%s is NULL",
                                  !conn     ? "conn"
                                  : !owners ? "owners"
                                  : !rules  ? "rules"
                                            : "ret");
        if (!n)
                return nb_bad_arg(EINVAL, __func__, "n is 0");
        r = owners_in(__func__, owners, n, &v);
        if (r < 0)
                return r;
        stale = calloc(n, sizeof(*stale));
        if (!stale) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t k = 0; k < n; k++)
                n_hashed += has_hash(&v[k]);
        if (n_hashed && (r = ask(conn, v, n, &first)) < 0)
                goto out;
        /* Refused or stopped, as one batch would be: nothing more. */
        if (first && nb_results_first_error(first) >= 0)
                goto done;
        if (first && nb_results_count(first) != n_hashed) {
                r = -EPROTO;
                goto out;
        }
        for (size_t k = 0, j = 0; k < n; k++) {
                bool s = true;
                if (has_hash(&v[k]) && nb_result_firewall_stale(first, j++, &s) < 0)
                        s = true;
                stale[k] = s;
                n_stale += s;
        }
        if (!n_stale)
                goto done;
        r = send_rules(conn, v, stale, n, rules, data, &second);
        if (r == 0 && nb_results_count(second) != n_stale)
                r = -EPROTO;
        if (r == 0)
                r = merge(first, second, v, stale, n, ret);
        if (r == 0)
                first = second = NULL;
        goto out;
done:
        if (r == 0) {
                *ret = first;
                first = NULL;
        }
out:
        nb_results_free(first);
        nb_results_free(second);
        free(stale);
        free(v);
        return r;
}
