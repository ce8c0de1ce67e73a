// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading a reply. The results own the unpacked message and every fd that
 * came with it until the caller takes them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Fds no result points at (those of ops that were undone) are closed at
 * once: a tap lives as long as an fd of it is open. */
static void close_unreferenced(nb_results *r)
{
        const Netbroker__Reply *reply = r->msg->reply;

        for (size_t k = 0; k < r->nfds; k++) {
                bool used = false;
                for (size_t i = 0; i < reply->n_results && !used; i++)
                        for (size_t j = 0; j < reply->results[i]->n_fd_index && !used; j++)
                                used = reply->results[i]->fd_index[j] == k;
                if (!used && r->fds[k] >= 0) {
                        close(r->fds[k]);
                        r->fds[k] = -1;
                }
        }
}

int nb_results_new(Netbroker__ServerMessage *msg, int *fds, size_t nfds, nb_results **ret)
{
        nb_results *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        r->msg = msg;
        r->fds = fds; /* taken */
        r->nfds = nfds;
        close_unreferenced(r);
        *ret = r;
        return 0;
}

NB_EXPORT void nb_results_free(nb_results *r)
{
        if (!r)
                return;
        nbp_close_fds(r->fds, r->nfds);
        free(r->fds);
        netbroker__server_message__free_unpacked(r->msg, NULL);
        free(r);
}

static const Netbroker__Result *get(const nb_results *r, size_t i)
{
        if (!r || i >= r->msg->reply->n_results)
                return NULL;
        return r->msg->reply->results[i];
}

NB_EXPORT size_t nb_results_count(const nb_results *r)
{
        return r ? r->msg->reply->n_results : 0;
}

NB_EXPORT int nb_result_status(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        return res->status > 0 ? -res->status : res->status;
}

NB_EXPORT const char *nb_result_message(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res ? res->message : "";
}

NB_EXPORT long nb_results_first_error(const nb_results *r)
{
        for (size_t i = 0; i < nb_results_count(r); i++)
                if (get(r, i)->status)
                        return (long)i;
        return -1;
}

NB_EXPORT long nb_results_failed_op(const nb_results *r)
{
        long first = nb_results_first_error(r);

        /* The others say -ECANCELED: undone, or not run, because of it. */
        for (size_t i = first < 0 ? 0 : (size_t)first; first >= 0 && i < nb_results_count(r); i++)
                if (get(r, i)->status && get(r, i)->status != ECANCELED)
                        return (long)i;
        return first;
}

NB_EXPORT int nb_result_exec(const nb_results *r, size_t i, nb_exec_result *ret)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__ExecResult *e;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_EXEC)
                return -ENODATA;
        e = res->exec;
        return NB_STRUCT_OUT(ret,
                             (&(nb_exec_result){
                                     .exit_code = e->exit_code,
                                     .signal = e->signal,
                                     .timed_out = e->timed_out,
                                     .out = e->stdout_data.data,
                                     .out_len = e->stdout_data.len,
                                     .out_truncated = e->stdout_truncated,
                                     .err = e->stderr_data.data,
                                     .err_len = e->stderr_data.len,
                                     .err_truncated = e->stderr_truncated,
                                     .duration_us = e->duration_us,
                             }),
                             NB_EXEC_RESULT_SIZE_0);
}

NB_EXPORT int nb_result_stat_at(const nb_results *r, size_t i, size_t k, const char **ret_name,
                                uint64_t *ret_value)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_STATS)
                return -ENODATA;
        if (k >= res->stats->n_counters)
                return -ERANGE;
        *ret_name = res->stats->counters[k]->name;
        *ret_value = res->stats->counters[k]->value;
        return 0;
}

NB_EXPORT int nb_result_stat(const nb_results *r, size_t i, const char *name, uint64_t *ret)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_STATS)
                return -ENODATA;
        for (size_t k = 0; k < res->stats->n_counters; k++)
                if (strcmp(res->stats->counters[k]->name, name) == 0) {
                        *ret = res->stats->counters[k]->value;
                        return 0;
                }
        return -ENOENT;
}

NB_EXPORT int nb_result_stat_setting_at(const nb_results *r, size_t i, size_t k,
                                        const char **ret_name, const char **ret_value)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_STATS)
                return -ENODATA;
        if (k >= res->stats->n_settings)
                return -ERANGE;
        *ret_name = res->stats->settings[k]->name;
        *ret_value = res->stats->settings[k]->value;
        return 0;
}

NB_EXPORT int nb_result_stat_setting(const nb_results *r, size_t i, const char *name,
                                     const char **ret)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_STATS)
                return -ENODATA;
        for (size_t k = 0; k < res->stats->n_settings; k++)
                if (strcmp(res->stats->settings[k]->name, name) == 0) {
                        *ret = res->stats->settings[k]->value;
                        return 0;
                }
        return -ENOENT;
}

NB_EXPORT int nb_result_bandwidth(const nb_results *r, size_t i, const char **ret_in,
                                  const char **ret_out)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_BANDWIDTH)
                return -ENODATA;
        if (ret_in)
                *ret_in = res->bandwidth->inbound_mechanism;
        if (ret_out)
                *ret_out = res->bandwidth->outbound_mechanism;
        return 0;
}

NB_EXPORT size_t nb_result_fd_count(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res ? res->n_fd_index : 0;
}

NB_EXPORT int nb_result_take_fd(nb_results *r, size_t i, size_t k)
{
        const Netbroker__Result *res = get(r, i);
        size_t idx;
        int fd;

        if (!res || k >= res->n_fd_index)
                return -ERANGE;
        idx = res->fd_index[k];
        if (idx >= r->nfds)
                return -ERANGE;
        fd = r->fds[idx];
        if (fd < 0)
                return -EBADF;
        r->fds[idx] = -1;
        return fd;
}

NB_EXPORT const char *nb_result_ifname(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res ? res->ifname : "";
}

NB_EXPORT int nb_result_ifindex(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res ? res->ifindex : 0;
}

NB_EXPORT const char *nb_result_peer_ifname(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res ? res->peer_ifname : "";
}

NB_EXPORT size_t nb_result_names_count(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res && res->out_case == NETBROKER__RESULT__OUT_NAMES ? res->names->n_prefixes : 0;
}

NB_EXPORT int nb_result_names_at(const nb_results *r, size_t i, size_t k, const char **ret_prefix,
                                 const uint32_t **ret_used, size_t *ret_n_used,
                                 unsigned *ret_cursor)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__NamePrefix *p;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_NAMES)
                return -ENODATA;
        if (k >= res->names->n_prefixes)
                return -ERANGE;
        p = res->names->prefixes[k];
        *ret_prefix = p->prefix;
        *ret_used = p->used;
        *ret_n_used = p->n_used;
        *ret_cursor = p->cursor;
        return 0;
}

NB_EXPORT int nb_result_firewall(const nb_results *r, size_t i, const char **ret_hash,
                                 bool *ret_unchanged, unsigned *ret_rules)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_FIREWALL)
                return -ENODATA;
        if (ret_hash)
                *ret_hash = res->firewall->hash;
        if (ret_unchanged)
                *ret_unchanged = res->firewall->unchanged;
        if (ret_rules)
                *ret_rules = res->firewall->rules;
        return 0;
}

NB_EXPORT int nb_result_firewall_stale(const nb_results *r, size_t i, bool *ret_stale)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_FIREWALL)
                return -ENODATA;
        if (ret_stale)
                *ret_stale = res->firewall->stale;
        return 0;
}

NB_EXPORT size_t nb_result_fw_owner_count(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res && res->out_case == NETBROKER__RESULT__OUT_FIREWALL_LIST
                       ? res->firewall_list->n_owners
                       : 0;
}

NB_EXPORT int nb_result_fw_owner_at(const nb_results *r, size_t i, size_t k, const char **ret_owner,
                                    const char **ret_ifname, const char **ret_hash,
                                    unsigned *ret_rules)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__FwOwner *o;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_FIREWALL_LIST)
                return -ENODATA;
        if (k >= res->firewall_list->n_owners)
                return -ERANGE;
        o = res->firewall_list->owners[k];
        if (ret_owner)
                *ret_owner = o->owner;
        if (ret_ifname)
                *ret_ifname = o->ifname;
        if (ret_hash)
                *ret_hash = o->hash;
        if (ret_rules)
                *ret_rules = o->rules;
        return 0;
}

NB_EXPORT bool nb_result_fw_owner_is_network(const nb_results *r, size_t i, size_t k)
{
        const Netbroker__Result *res = get(r, i);

        return res && res->out_case == NETBROKER__RESULT__OUT_FIREWALL_LIST &&
               k < res->firewall_list->n_owners && res->firewall_list->owners[k]->network;
}

/* Owner k of op i's listing, or NULL. */
static const Netbroker__FwOwner *fw_owner(const nb_results *r, size_t i, size_t k)
{
        const Netbroker__Result *res = get(r, i);

        if (!res || res->out_case != NETBROKER__RESULT__OUT_FIREWALL_LIST ||
            k >= res->firewall_list->n_owners)
                return NULL;
        return res->firewall_list->owners[k];
}

NB_EXPORT size_t nb_result_fw_counter_count(const nb_results *r, size_t i, size_t k)
{
        const Netbroker__FwOwner *o = fw_owner(r, i, k);

        return o ? o->n_counters : 0;
}

NB_EXPORT int nb_result_fw_counter_at(const nb_results *r, size_t i, size_t k, size_t j,
                                      nb_fw_counter *ret)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__FwOwner *o = fw_owner(r, i, k);
        const Netbroker__FwRuleCounter *c;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_FIREWALL_LIST)
                return -ENODATA;
        if (!o || j >= o->n_counters)
                return -ERANGE;
        c = o->counters[j];
        if (!ret)
                return 0;
        return NB_STRUCT_OUT(
                ret,
                (&(nb_fw_counter){
                        .group = c->group,
                        .direction = c->direction == NETBROKER__FW_DIRECTION__FW_TO_GUEST
                                             ? NB_FW_TO_GUEST
                                             : NB_FW_FROM_GUEST,
                        .index = c->index,
                        .packets = c->packets,
                        .bytes = c->bytes,
                        .text = c->text,
                }),
                NB_FW_COUNTER_SIZE_0);
}

static nb_rate rate_of(const Netbroker__Rate *m)
{
        nb_rate r = NB_RATE_INIT;

        if (m) {
                r.average = m->average;
                r.peak = m->peak;
                r.burst = m->burst;
                r.floor = m->floor;
        }
        return r;
}

NB_EXPORT int nb_result_bandwidth_show(const nb_results *rs, size_t i, bool *ret_has_in,
                                       nb_rate *ret_in, bool *ret_has_out, nb_rate *ret_out)
{
        const Netbroker__Result *res = get(rs, i);
        nb_rate in, out;
        int r;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_BANDWIDTH_SHOW)
                return -ENODATA;
        in = rate_of(res->bandwidth_show->inbound);
        out = rate_of(res->bandwidth_show->outbound);
        /* Both sizes checked before either is written. */
        if (ret_in && ret_out && (ret_in->size < NB_RATE_SIZE_0 || ret_out->size < NB_RATE_SIZE_0))
                return -EINVAL;
        if (ret_in && (r = NB_STRUCT_OUT(ret_in, &in, NB_RATE_SIZE_0)) < 0)
                return r;
        if (ret_out && (r = NB_STRUCT_OUT(ret_out, &out, NB_RATE_SIZE_0)) < 0)
                return r;
        if (ret_has_in)
                *ret_has_in = res->bandwidth_show->inbound != NULL;
        if (ret_has_out)
                *ret_has_out = res->bandwidth_show->outbound != NULL;
        return 0;
}

NB_EXPORT int nb_result_bandwidth_show_mechanisms(const nb_results *r, size_t i,
                                                  const char **ret_in, const char **ret_out)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_BANDWIDTH_SHOW)
                return -ENODATA;
        if (ret_in)
                *ret_in = res->bandwidth_show->inbound_mechanism;
        if (ret_out)
                *ret_out = res->bandwidth_show->outbound_mechanism;
        return 0;
}

NB_EXPORT size_t nb_result_link_count(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res && res->out_case == NETBROKER__RESULT__OUT_LINK_LIST ? res->link_list->n_links
                                                                        : 0;
}

NB_EXPORT int nb_result_link_at(const nb_results *r, size_t i, size_t k, nb_link_info *ret)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__LinkInfo *l;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_LINK_LIST)
                return -ENODATA;
        if (k >= res->link_list->n_links)
                return -ERANGE;
        l = res->link_list->links[k];
        return NB_STRUCT_OUT(
                ret,
                (&(nb_link_info){
                        .name = l->name,
                        .ifindex = l->ifindex,
                        /* A kind newer than this library: other. */
                        .kind = (unsigned)l->kind <= NB_LINK_KIND_IFB ? (nb_link_kind)l->kind
                                                                      : NB_LINK_KIND_OTHER,
                        .kind_name = l->kind_name,
                        .mac = l->mac,
                        .mtu = l->mtu,
                        .up = l->up,
                        .master = l->master,
                        .has_owner = l->has_owner,
                        .owner_uid = l->owner_uid,
                        .made_by_helper = l->made_by_helper,
                }),
                NB_LINK_INFO_SIZE_0);
}

NB_EXPORT const char *nb_link_kind_name(nb_link_kind kind)
{
        static const char *const names[] = {"other", "tap",    "macvtap", "macvlan",
                                            "veth",  "bridge", "ifb"};

        return (unsigned)kind < sizeof(names) / sizeof(*names) ? names[kind] : "other";
}

/* ---- virtual networks, part 1 ---- */

NB_EXPORT size_t nb_result_addr_count(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res && res->out_case == NETBROKER__RESULT__OUT_ADDR_LIST ? res->addr_list->n_addrs
                                                                        : 0;
}

NB_EXPORT int nb_result_addr_at(const nb_results *r, size_t i, size_t k, nb_addr_info *ret)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__AddrInfo *a;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_ADDR_LIST)
                return -ENODATA;
        if (k >= res->addr_list->n_addrs)
                return -ERANGE;
        a = res->addr_list->addrs[k];
        return NB_STRUCT_OUT(ret,
                             (&(nb_addr_info){
                                     .ifname = a->ifname,
                                     .ifindex = a->ifindex,
                                     .address = a->address,
                                     .prefix_len = a->prefix_len,
                                     .broadcast = a->broadcast,
                                     .noprefixroute = a->noprefixroute,
                                     .scope = a->scope,
                             }),
                             NB_ADDR_INFO_SIZE_0);
}

NB_EXPORT size_t nb_result_route_count(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res && res->out_case == NETBROKER__RESULT__OUT_ROUTE_LIST ? res->route_list->n_routes
                                                                         : 0;
}

NB_EXPORT int nb_result_route_at(const nb_results *r, size_t i, size_t k, nb_route *ret)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__RouteInfo *o;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_ROUTE_LIST)
                return -ENODATA;
        if (k >= res->route_list->n_routes)
                return -ERANGE;
        o = res->route_list->routes[k];
        return NB_STRUCT_OUT(ret,
                             (&(nb_route){
                                     .destination = o->destination,
                                     .prefix_len = o->prefix_len,
                                     .gateway = o->gateway,
                                     .ifname = o->ifname,
                                     .metric = o->metric,
                                     .table = o->table,
                                     .ipv6 = o->ipv6,
                             }),
                             NB_ROUTE_SIZE_0);
}

NB_EXPORT int nb_result_sysctl_old(const nb_results *r, size_t i, unsigned *ret)
{
        const Netbroker__Result *res = get(r, i);

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_SYSCTL)
                return -ENODATA;
        if (!ret)
                return -EINVAL; /* as the struct outputs (nb_struct_out) */
        *ret = res->sysctl->old_value;
        return 0;
}

/* ---- supervised programs ---- */

NB_EXPORT int nb_result_program(const nb_results *r, size_t i, uint64_t *ret_id, int *ret_pid,
                                bool *ret_existing)
{
        const Netbroker__Result *res = get(r, i);

        if (!res || res->out_case != NETBROKER__RESULT__OUT_PROGRAM)
                return -ENODATA;
        if (ret_id)
                *ret_id = res->program->id;
        if (ret_pid)
                *ret_pid = res->program->pid;
        if (ret_existing)
                *ret_existing = res->program->existing;
        return 0;
}

NB_EXPORT int nb_result_program_stopped(const nb_results *r, size_t i, unsigned *ret_stopped,
                                        unsigned *ret_had_exited)
{
        const Netbroker__Result *res = get(r, i);

        if (!res || res->out_case != NETBROKER__RESULT__OUT_PROGRAM)
                return -ENODATA;
        if (ret_stopped)
                *ret_stopped = res->program->stopped;
        if (ret_had_exited)
                *ret_had_exited = res->program->had_exited;
        return 0;
}

NB_EXPORT size_t nb_result_program_count(const nb_results *r, size_t i)
{
        const Netbroker__Result *res = get(r, i);

        return res && res->out_case == NETBROKER__RESULT__OUT_PROGRAM_LIST
                       ? res->program_list->n_programs
                       : 0;
}

NB_EXPORT int nb_result_program_at(const nb_results *r, size_t i, size_t k, nb_program_info *ret)
{
        const Netbroker__Result *res = get(r, i);
        const Netbroker__ProgramInfo *p;

        if (!res)
                return -ERANGE;
        if (res->out_case != NETBROKER__RESULT__OUT_PROGRAM_LIST)
                return -ENODATA;
        if (k >= res->program_list->n_programs)
                return -ERANGE;
        p = res->program_list->programs[k];
        return NB_STRUCT_OUT(ret,
                             (&(nb_program_info){
                                     .id = p->id,
                                     .pid = p->pid,
                                     .path = p->path,
                                     .tag = p->tag,
                                     .uid = p->uid,
                                     .running = p->running,
                                     .exit_code = p->exit_code,
                                     .signal = p->signal,
                                     .adopted = p->adopted,
                                     .status_unknown = p->status_unknown,
                                     .argc = p->n_argv,
                                     .argv = p->argv,
                                     .gone_interface = p->gone_interface,
                             }),
                             NB_PROGRAM_INFO_SIZE_0);
}
