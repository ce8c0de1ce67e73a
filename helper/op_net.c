// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owner ops: protobuf in, fw_net_kernel.h calls out. Every spec is
 * parsed and checked in validation; the NetApply and NetRemove ops of a
 * batch form one transaction, committed at the batch's last of them; with
 * the guests' owners of the same request when it has any (fw_join.h), at
 * the last of either kind.
 *
 * The kernel work is the firewall lane's (lane.h), as the guests' is
 * (op_firewall.c), and in the same FIFO, so the two tables' transactions
 * go one at a time: the batch's table read (nbd_job_on_lane_first, at its
 * first op), its commit (nbd_job_on_lane) and NetList's read
 * (nbd_job_on_lane_read). On the loop, a uid's NetList of 256 NAT networks
 * of 32 forwards held every other client 370 ms, and a commit the kernel
 * refused took 6 s there.
 *
 * Who may: root; a non-root caller only when a [policy] section grants
 * net_apply / net_remove (deny by default, policy.c), and then only on a
 * bridge it owns, for owners it made, isolated or open and without port
 * forwards (validate_apply() says why).
 *
 * A removed network takes its programs with it: once the transaction that
 * removes owner N is in, the caller's running programs tagged N are
 * stopped (SIGTERM, SIGKILL after the grace, as ProgramStop does) and the
 * op's reply waits, parked, until they are gone. Only the caller's own:
 * a tag is a name anyone may give, not a capability, so another uid's
 * program tagged N runs on. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "fw_join.h"
#include "fw_kernel.h" /* nbd_fw_lane_socket */
#include "fw_net.h"
#include "fw_net_kernel.h"
#include "lane.h" /* nbd_test_hold_point */
#include "nfsock.h"
#include "ops.h"
#include "peer.h"
#include "program.h"

/* ---- protobuf to the spec ---- */

static int spec_from_proto(const Netbroker__NetApply *a, uid_t uid, struct nbd_net_spec *s,
                           struct nbd_err *e)
{
        struct nbd_err why;
        int r;

        memset(s, 0, sizeof(*s));
        if (strlen(a->owner) > NBD_FW_OWNER_MAX || strlen(a->bridge) >= IFNAMSIZ ||
            strlen(a->forward_dev) >= IFNAMSIZ)
                return nbd_err_set(e, -EINVAL, "owner, bridge or forward device name too long");
        strcpy(s->owner, a->owner);
        strcpy(s->bridge, a->bridge);
        strcpy(s->forward_dev, a->forward_dev);
        s->uid = uid;
        if (a->mode > NETBROKER__NET_FORWARD_MODE__NET_FORWARD_ISOLATED)
                return nbd_err_set(e, -EINVAL, "unknown forward mode %d", a->mode);
        s->mode = (enum nbd_net_mode)a->mode;
        if (a->nat_port_min > 65535 || a->nat_port_max > 65535 ||
            (a->nat_port_min || a->nat_port_max) != (a->nat_port_min && a->nat_port_max))
                return nbd_err_set(e, -EINVAL, "NAT ports: both 1-65535, min < max, or both 0");
        s->nat_port_min = (uint16_t)a->nat_port_min;
        s->nat_port_max = (uint16_t)a->nat_port_max;
        s->nat_ipv6 = a->nat_ipv6;
        s->ipv6_nogw = a->ipv6_nogw;
        if (a->n_subnets > NBD_NET_SUBNETS_MAX || a->n_port_forwards > NBD_NET_FORWARDS_MAX)
                return nbd_err_set(e, -E2BIG, "at most %d subnets and %d port forwards",
                                   NBD_NET_SUBNETS_MAX, NBD_NET_FORWARDS_MAX);
        for (size_t i = 0; i < a->n_subnets; i++)
                if ((r = nbd_net_parse_subnet(a->subnets[i], &s->subnets[s->n_subnets++], e)))
                        return r;
        for (size_t i = 0; i < a->n_port_forwards; i++) {
                const Netbroker__NetPortForward *f = a->port_forwards[i];
                r = nbd_net_parse_forward(s, f->protocol, f->outside_address, f->outside_port,
                                          f->guest_address, f->guest_port,
                                          &s->forwards[s->n_forwards++], &why);
                if (r < 0)
                        return nbd_err_set(e, r, "port forward %zu: %.200s", i, why.msg);
        }
        return nbd_net_spec_check(s, e);
}

/* ---- validation ---- */

static int claim(struct nbd_validation *v, const char *owner, Netbroker__Result *res)
{
        char key[NBD_FW_OWNER_MAX + 8];

        if (!nbd_fw_owner_valid(owner))
                return nbd_result_set(res, -EINVAL,
                                      "network: bad owner '%s' ([A-Za-z0-9_.:@-], 1-%d bytes)",
                                      owner, NBD_FW_OWNER_MAX);
        snprintf(key, sizeof(key), "net:%s", owner);
        if (!nbd_validation_claim(v, key))
                return nbd_result_set(res, -EINVAL, "network: owner %s appears twice in this batch",
                                      owner);
        return 0;
}

static int validate_apply(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__NetApply *a = op->net_apply;
        struct nbd_net_spec *s;
        struct nbd_err err;
        int r;

        if ((r = claim(v, a->owner, res)))
                return r;
        if (a->fw_mode > NETBROKER__FW_MODE__FW_ENSURE)
                return nbd_result_set(res, -EINVAL, "network %s: unknown mode %d", a->owner,
                                      a->fw_mode);
        if (!(s = malloc(sizeof(*s))))
                return nbd_result_set(res, -ENOMEM, "network %s: out of memory", a->owner);
        r = spec_from_proto(a, v->peer->uid, s, &err);
        if (r < 0)
                nbd_result_set(res, r, "network %s: %s", a->owner, err.msg);
        /* What a caller that is not root may have: a filter on its own
         * bridge. A port forward takes a port of every host address, for
         * the host's own connections too (the output hook), and any
         * outside address; a nat or route network's masquerade and
         * forwarding match its subnets, which nothing ties to its bridge:
         * each would act on traffic that is not the caller's. */
        if (r == 0 && !nbd_peer_is_root(v->peer) && s->n_forwards)
                r = nbd_result_set(res, -EPERM,
                                   "policy: uid %u may not forward ports: a port forward takes a "
                                   "port of the host's own addresses (only root may)",
                                   (unsigned)v->peer->uid);
        if (r == 0 && !nbd_peer_is_root(v->peer) &&
            (s->mode == NBD_NET_NAT || s->mode == NBD_NET_ROUTE))
                r = nbd_result_set(res, -EPERM,
                                   "policy: uid %u may not make a nat or route network: its "
                                   "masquerade and forwarding act on any traffic of its subnets "
                                   "(only root may; isolated and open are a bridge's own)",
                                   (unsigned)v->peer->uid);
        free(s);
        /* A non-root caller's network is on a bridge of its own (root's
         * rules may come before their bridge: they match it by name). */
        if (r == 0 && !nbd_peer_is_root(v->peer) &&
            ((r = nbd_check_interface(v, a->bridge, res, "network")) ||
             (r = nbd_check_owned(v, a->bridge, res))))
                return r;
        return r;
}

static int validate_remove(struct nbd_validation *v, const Netbroker__Op *op,
                           Netbroker__Result *res)
{
        return claim(v, op->net_remove->owner, res);
}

/* ---- running: one transaction for the batch ---- */

/* Network owners talk to the kernel themselves (fw_net_kernel.h), not
 * through the backend table: under a fake backend (the fuzzers,
 * test-alloc) they must not reach the real kernel. */
static int kernel_only(struct nbd_job *job, Netbroker__Result *res)
{
        if (nbd_job_ctx(job)->be == &nbd_kernel_backend)
                return 0;
        return nbd_result_set(res, -EOPNOTSUPP, "network: network owners need the kernel backend");
}

static const char txn_key; /* nbd_job_slot()'s key */
static const unsigned net_cases[] = {NETBROKER__OP__OP_NET_APPLY, NETBROKER__OP__OP_NET_REMOVE};

struct net_batch {
        struct nbd_net_txn *txn;
        /* The table's read, on the lane at the batch's first op, which runs
         * again when it is in (reading), and what it found. */
        bool reading;
        int read_r;
        struct nbd_err read_err;
        /* The commit on the lane: its outcome, and whether its done may
         * park the job (for a removed network's programs). */
        int commit_r;
        struct nbd_err commit_err;
        bool commit_may_park;
        struct nbd_fw_join join; /* into the guests' commit (fw_join.h) */
        /* The ops in the transaction: results and indices in the request. */
        struct net_queued {
                Netbroker__Result *res;
                size_t op;
                char bridge[IFNAMSIZ]; /* a non-root NetApply's, that must exist ("": none) */
        } * queued;
        size_t n_queued;
        struct removed {
                char owner[NBD_FW_OWNER_MAX + 1];
                Netbroker__Result *res;
        } * removed; /* queued removals, for their programs */
        size_t n_removed;
        bool done; /* committed, or failed as a whole */
};

static void fail_queued(struct net_batch *b, int err, const char *why)
{
        for (size_t i = 0; i < b->n_queued; i++)
                if (b->queued[i].res->status == 0)
                        nbd_result_set(b->queued[i].res, err, "network: %s", why);
}

/* A later op stopped the batch before the transaction went: nothing the
 * ops queued was applied, and their results must not say it was. */
static void batch_stopped(struct nbd_job *job, void *data, size_t failed)
{
        struct net_batch *b = data;
        char why[64];

        (void)job;
        if (b->done)
                return;
        snprintf(why, sizeof(why), "not applied: op %zu failed", failed);
        fail_queued(b, -ECANCELED, why);
        b->done = true;
}

static void batch_free(void *data)
{
        struct net_batch *b = data;

        nbd_net_txn_free(b->txn);
        free(b->queued);
        free(b->removed);
        free(b);
}

static void committed(struct nbd_job *job, struct net_batch *b, int r, const char *why,
                      bool may_park);

static bool join_pending(void *put_data)
{
        return nbd_net_txn_pending(put_data);
}

/* The guests' commit took the queued messages (or, none queued, went
 * without them): its outcome is this batch's. */
static void join_done(struct nbd_job *job, void *data, int r, const char *why, bool may_park)
{
        struct net_batch *b = data;

        nbd_net_txn_joined(b->txn);
        committed(job, b, r, why, may_park);
}

/* A bridge may go after its op's check and before the commit (the request
 * yields to the loop between its ops): committed, a caller's rules would
 * act on the next bridge of that name. The loop's map, read up to now,
 * says which went. 0, or -ENODEV with e set. */
static int gone_before_commit(struct nbd_job *job, void *data, struct nbd_err *e)
{
        const struct nbd_dispatch_ctx *ctx = nbd_job_ctx(job);
        const struct net_batch *b = data;

        for (size_t i = 0; i < b->n_queued; i++) {
                const char *bridge = b->queued[i].bridge;
                if (bridge[0] && ctx->be->links.exists(ctx->links, bridge) == 0)
                        return nbd_err_set(e, -ENODEV,
                                           "bridge %s went away before the commit: the rules "
                                           "would act on the next bridge of that name",
                                           bridge);
        }
        return 0;
}

/* On the firewall's lane (without one, the loop: the lane idle then):
 * what is queued goes, through the lane's socket. */
static void commit_run(void *data)
{
        struct net_batch *b = data;
        struct mnl_socket *nl;
        int r = nbd_fw_lane_socket(&nl);

        nbd_test_hold_point("NET_COMMIT");
        if (r < 0)
                b->commit_r =
                        nbd_err_set(&b->commit_err, r, "cannot open nfnetlink: %s", strerror(-r));
        else
                b->commit_r = nbd_net_txn_commit(b->txn, nl, &b->commit_err);
}

/* On the loop again: the outcome is every queued op's. */
static void commit_done(struct nbd_job *job, void *data)
{
        struct net_batch *b = data;

        committed(job, b, b->commit_r, b->commit_err.msg,
                  b->commit_may_park && !nbd_job_is_cancelled(job));
}

/* The batch's transaction goes: checked on the loop (a bridge gone since
 * its op), then sent on the firewall's lane, the job parked meanwhile and
 * its result set by commit_done (the op returns its result's status).
 * Nothing queued, nothing is sent, and no lane is asked. */
static void commit_on_lane(struct nbd_job *job, struct net_batch *b, bool may_park)
{
        struct nbd_err err;
        int r = gone_before_commit(job, b, &err);

        if (r < 0 || !nbd_net_txn_pending(b->txn)) {
                committed(job, b, r, err.msg, may_park);
                return;
        }
        b->commit_may_park = may_park;
        if (b->n_queued)
                nbd_job_lane_decides_from(job, b->queued[0].op);
        nbd_job_on_lane(job, NBD_NEEDS_FIREWALL, commit_run, commit_done, b);
}

/* The guests' transaction committed nothing: the networks' goes alone.
 * From a firewall op's run (may_park), on the lane as commit_on_lane; at
 * the job's end (the op that would have committed was skipped), where
 * no job may wait for a lane, on the loop through the loop's socket. */
static void join_alone(struct nbd_job *job, void *data, bool may_park)
{
        struct net_batch *b = data;
        struct mnl_socket *nl;
        struct nbd_err err;
        int r;

        if (b->done)
                return;
        if (may_park) {
                commit_on_lane(job, b, true);
                return;
        }
        r = gone_before_commit(job, b, &err);
        if (r == 0 && (r = nbd_nfsock_get(&nl)) < 0)
                nbd_err_set(&err, r, "cannot open nfnetlink: %s", strerror(-r));
        if (r == 0)
                r = nbd_net_txn_commit(b->txn, nl, &err);
        committed(job, b, r, err.msg, false);
}

/* On the firewall's lane: the batch's one read of the table, through the
 * lane's socket. */
static void read_run(void *data)
{
        struct net_batch *b = data;
        struct mnl_socket *nl;
        int r = nbd_fw_lane_socket(&nl);

        if (r < 0)
                b->read_r = nbd_err_set(&b->read_err, r, "cannot open nfnetlink: %s", strerror(-r));
        else
                b->read_r = nbd_net_txn_read(nl, &b->txn, &b->read_err);
        nbd_test_hold_point("NET_READ_DONE");
}

/* The batch's transaction. At its first network op the table is read on
 * the firewall's lane, and that op runs again when it is in: NULL with res
 * untouched (the op returns 0). NULL with res set: failed. */
static struct net_batch *batch_of(struct nbd_job *job, Netbroker__Result *res)
{
        void **slot = nbd_job_slot(job, &txn_key);
        struct net_batch *b;

        if (!slot) {
                nbd_result_set(res, -ENOMEM, "network: no job slot left");
                return NULL;
        }
        if (kernel_only(job, res) < 0)
                return NULL;
        b = *slot;
        if (b && !b->reading)
                return b;
        if (!b) {
                if (!(b = calloc(1, sizeof(*b)))) {
                        nbd_result_set(res, -ENOMEM, "network: out of memory");
                        return NULL;
                }
                /* The job frees it, whenever it ends: a lane's read may
                 * outlive the op. */
                if (nbd_job_on_failure_call(job, batch_stopped, batch_free, b) < 0) { /* frees b */
                        nbd_result_set(res, -ENOMEM, "network: out of memory");
                        return NULL;
                }
                *slot = b;
                b->reading = true;
                if (nbd_job_on_lane_first(job, NBD_NEEDS_FIREWALL, read_run, b))
                        return NULL; /* this op runs again once the read is in */
        }
        b->reading = false;
        if (b->read_r < 0) {
                /* The next network op of the batch reads again, into a
                 * batch of its own; this one stays the job's to free. */
                nbd_result_set(res, b->read_r, "network: %s", b->read_err.msg);
                b->done = true;
                *slot = NULL;
                return NULL;
        }
        b->join = (struct nbd_fw_join){.put = nbd_net_txn_put,
                                       .pending = join_pending,
                                       .put_data = b->txn,
                                       .done = join_done,
                                       .alone = join_alone,
                                       .check = gone_before_commit,
                                       .data = b,
                                       .first_op = SIZE_MAX};
        if (nbd_fw_join(job, &b->join, res) < 0) {
                b->done = true;
                *slot = NULL;
                return NULL; /* the job frees b */
        }
        return b;
}

/* ---- a removed network's programs ---- */

/* The programs one batch's removals wait for. */
struct prog_stop {
        struct nbd_job *job;
        size_t n, pending;
        struct nbd_program_waiter w[];
};

static void prog_gone(void *data)
{
        struct prog_stop *x = data;

        if (--x->pending > 0)
                return;
        nbd_job_op_done(x->job);
        free(x);
}

static void prog_stop_cancel(void *data)
{
        struct prog_stop *x = data;

        for (size_t i = 0; i < x->n; i++)
                nbd_program_cancel_wait(&x->w[i]);
        free(x);
}

static const struct removed *removed_as(const struct net_batch *b, const char *tag)
{
        for (size_t i = 0; i < b->n_removed; i++)
                if (strcmp(b->removed[i].owner, tag) == 0)
                        return &b->removed[i];
        return NULL;
}

static bool stops_with(const struct net_batch *b, const struct nbd_program_info *i, uid_t uid)
{
        return i->running && i->uid == uid && removed_as(b, i->tag);
}

/* The transaction removed b's owners: stop uid's programs tagged with
 * their names. With wait, the job parks until they are gone (without
 * memory to wait, they are stopped all the same). */
static void stop_programs(struct nbd_job *job, const struct net_batch *b, uid_t uid, bool wait)
{
        struct nbd_program *p;
        struct prog_stop *x;
        size_t n = 0;

        for (p = nbd_program_next(NULL); p; p = nbd_program_next(p))
                n += stops_with(b, nbd_program_info(p), uid);
        if (!n)
                return;
        x = wait ? calloc(1, sizeof(*x) + n * sizeof(x->w[0])) : NULL;
        if (x)
                x->job = job;
        for (p = nbd_program_next(NULL); p; p = nbd_program_next(p)) {
                const struct nbd_program_info *i = nbd_program_info(p);
                const struct removed *rm;
                if (!stops_with(b, i, uid))
                        continue;
                rm = removed_as(b, i->tag);
                nbd_result_set(rm->res, 0, "network %s removed; its program %llu (pid %d) stops",
                               rm->owner, (unsigned long long)i->id, (int)i->pid);
                if (!x) {
                        nbd_program_stop(p, NBD_PROGRAM_DEFAULT_GRACE_MS, NULL);
                        continue;
                }
                x->w[x->n] = (struct nbd_program_waiter){.fn = prog_gone, .data = x};
                nbd_program_stop(p, NBD_PROGRAM_DEFAULT_GRACE_MS, &x->w[x->n++]);
        }
        if (!x)
                return;
        x->pending = x->n;
        nbd_job_park(job, prog_stop_cancel, x);
}

/* The batch's transaction is over (r: 0 or -errno, why: the kernel's
 * word): the queued ops' outcome, and the removed networks' programs. */
static void committed(struct nbd_job *job, struct net_batch *b, int r, const char *why,
                      bool may_park)
{
        if (b->done)
                return;
        b->done = true;
        if (r < 0) {
                fail_queued(b, r, why);
                /* Those that ended already (the commit went with a
                 * firewall op's, or after them): a failure of the batch,
                 * which stops there unless it goes on (as op_firewall.c's
                 * queued ops). The running op is counted as it ends. */
                for (size_t i = 0; i < b->n_queued; i++)
                        if (b->queued[i].op != nbd_job_op_index(job))
                                nbd_job_op_failed_late(job, b->queued[i].op);
        } else {
                stop_programs(job, b, nbd_job_peer(job)->uid, may_park);
        }
}

/* The op ran (r); at the batch's last network op, what was queued goes to
 * the kernel in one transaction: when this op succeeded, or failed in a
 * request that goes on after failures. With the guests' owners (fw_join.h)
 * when the request's firewall ops come right after it (they commit these
 * with theirs) or came right before it (this op commits theirs). bridge:
 * a non-root NetApply's, which must still be there at the commit (NULL:
 * none). */
static int finish_op(struct nbd_job *job, struct net_batch *b, Netbroker__Result *res, int r,
                     const char *bridge)
{
        if (r == 0) {
                if (!b->n_queued)
                        b->join.first_op = nbd_job_op_index(job);
                /* room was made before */
                b->queued[b->n_queued] = (struct net_queued){res, nbd_job_op_index(job), ""};
                snprintf(b->queued[b->n_queued++].bridge, IFNAMSIZ, "%s", bridge ? bridge : "");
        }
        if (b->done || nbd_job_later_op_of(job, net_cases, 2))
                return r;
        if (r < 0 && !nbd_job_goes_on_after_failure(job))
                return r; /* batch_stopped() cancels the others */
        if (nbd_job_only_ops_of_ahead(job, nbd_fw_owner_cases, NBD_FW_OWNER_CASES))
                return r; /* the last firewall op commits these too */
        if (nbd_fw_commit_joined(job))
                return r < 0 ? r : -(int)res->status; /* on the lane, or parked */
        /* A park goes with returning 0: only when this op succeeded. */
        commit_on_lane(job, b, r == 0);
        return r < 0 ? r : -(int)res->status;
}

static int reserve(struct net_batch *b)
{
        struct net_queued *q = realloc(b->queued, (b->n_queued + 1) * sizeof(*q));

        if (!q)
                return -ENOMEM;
        b->queued = q;
        return 0;
}

static int run_apply(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__NetApply *a = op->net_apply;
        const struct nbd_peer *p = nbd_job_peer(job);
        struct net_batch *b = batch_of(job, res);
        Netbroker__NetApplyResult *out = NULL;
        struct nbd_net_applied applied;
        struct nbd_net_spec *s = NULL;
        struct nbd_err err;
        char *hash = NULL;
        int r;

        if (!b)
                return -(int)res->status;
        /* Its rules match the bridge's name: on a gone one, they would
         * act on the next bridge of that name (root's may come first, as
         * validate_apply says). */
        if (!nbd_peer_is_root(p) && (r = nbd_job_check_present(job, a->bridge, res, "network")))
                return finish_op(job, b, res, r, NULL);
        s = malloc(sizeof(*s));
        out = malloc(sizeof(*out));
        hash = malloc(NBD_FW_HASH_HEX);
        if (!s || !out || !hash || reserve(b) < 0) {
                r = nbd_result_set(res, -ENOMEM, "network: out of memory");
                goto out;
        }
        r = spec_from_proto(a, p->uid, s, &err);
        if (r == 0)
                r = nbd_net_txn_apply(b->txn, s, a->fw_mode == NETBROKER__FW_MODE__FW_ENSURE,
                                      !nbd_peer_is_root(p), &applied, &err);
        if (r < 0) {
                nbd_result_set(res, r, "network %s: %s", a->owner, err.msg);
                goto out;
        }
        netbroker__net_apply_result__init(out);
        memcpy(hash, applied.hash, NBD_FW_HASH_HEX);
        out->hash = hash;
        out->unchanged = applied.unchanged;
        out->rules = applied.rules;
        res->out_case = NETBROKER__RESULT__OUT_NET_APPLY;
        res->net_apply = out;
        out = NULL;
        hash = NULL;
out:
        free(s);
        free(out);
        free(hash);
        return finish_op(job, b, res, r, nbd_peer_is_root(p) ? NULL : a->bridge);
}

static int run_remove(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const struct nbd_peer *p = nbd_job_peer(job);
        struct net_batch *b = batch_of(job, res);
        struct removed *grown;
        struct nbd_err err;
        int r;

        if (!b)
                return -(int)res->status;
        grown = realloc(b->removed, (b->n_removed + 1) * sizeof(*grown));
        if (grown)
                b->removed = grown;
        if (!grown || reserve(b) < 0)
                return finish_op(job, b, res,
                                 nbd_result_set(res, -ENOMEM, "network: out of memory"), NULL);
        r = nbd_net_txn_remove(b->txn, op->net_remove->owner, nbd_peer_is_root(p) ? NULL : &p->uid,
                               &err);
        if (r < 0)
                nbd_result_set(res, r, "network: %s", err.msg);
        else {
                /* claim() checked its length */
                strcpy(b->removed[b->n_removed].owner, op->net_remove->owner);
                b->removed[b->n_removed++].res = res;
        }
        return finish_op(job, b, res, r, NULL);
}

struct listing {
        Netbroker__NetListResult *l;
        const struct nbd_peer *peer;
};

static int add_owner(const struct nbd_net_owner_info *o, void *data)
{
        struct listing *ls = data;
        Netbroker__NetListResult *l = ls->l;
        Netbroker__NetOwner *p, **grown;

        /* Others' networks are not a non-root caller's business. */
        if (!nbd_peer_is_root(ls->peer) && o->uid != ls->peer->uid)
                return 0;
        if (!(p = malloc(sizeof(*p))))
                return -ENOMEM;
        netbroker__net_owner__init(p);
        if (!(grown = realloc(l->owners, (l->n_owners + 1) * sizeof(*grown)))) {
                free(p);
                return -ENOMEM;
        }
        l->owners = grown;
        l->owners[l->n_owners++] = p;
        p->rules = o->rules;
        p->owner = strdup(o->owner);
        p->bridge = strdup(o->bridge);
        p->hash = strdup(o->hash);
        p->mode = strdup(o->mode);
        if (!p->owner || !p->bridge || !p->hash || !p->mode) {
                p->owner = p->owner ? p->owner : (char *)protobuf_c_empty_string;
                p->bridge = p->bridge ? p->bridge : (char *)protobuf_c_empty_string;
                p->hash = p->hash ? p->hash : (char *)protobuf_c_empty_string;
                p->mode = p->mode ? p->mode : (char *)protobuf_c_empty_string;
                return -ENOMEM;
        }
        return 0;
}

/* NetList's read, on the firewall's lane: the table's chains (no rule:
 * the kernel counts them) through the lane's socket, and the listing
 * built there from them. The job keeps it until it is freed. */
struct list_work {
        struct listing ls;
        Netbroker__Result *res;
        int r;
        struct nbd_err err;
};

static void list_run(void *data)
{
        struct list_work *w = data;
        struct nbd_net_txn *t = NULL;
        struct mnl_socket *nl;

        if ((w->r = nbd_fw_lane_socket(&nl)) < 0) {
                nbd_err_set(&w->err, w->r, "cannot open nfnetlink: %s", strerror(-w->r));
                return;
        }
        if ((w->r = nbd_net_txn_read(nl, &t, &w->err)) < 0)
                return;
        nbd_test_hold_point("NET_LIST_READ_DONE");
        if ((w->r = nbd_net_txn_each(t, add_owner, &w->ls)) < 0)
                nbd_err_oom(&w->err, "listing the owners");
        nbd_net_txn_free(t);
}

static void list_done(struct nbd_job *job, void *data)
{
        struct list_work *w = data;

        (void)job;
        if (w->r < 0)
                nbd_result_set(w->res, w->r, "network: %s", w->err.msg);
}

static int run_list(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        Netbroker__NetListResult *l;
        struct list_work *w;
        int r;

        (void)op;
        if ((r = kernel_only(job, res)) < 0)
                return r;
        l = malloc(sizeof(*l));
        w = calloc(1, sizeof(*w));
        if (!l || !w) {
                free(l);
                free(w);
                return nbd_result_set(res, -ENOMEM, "network: out of memory");
        }
        netbroker__net_list_result__init(l);
        res->out_case = NETBROKER__RESULT__OUT_NET_LIST;
        res->net_list = l;
        w->ls = (struct listing){l, nbd_job_peer(job)};
        w->res = res;
        if (nbd_job_keep(job, free, w) < 0) /* frees w */
                return nbd_result_set(res, -ENOMEM, "network: out of memory");
        nbd_job_on_lane_read(job, NBD_NEEDS_FIREWALL, list_run, list_done, w);
        return -(int)res->status;
}

const struct nbd_op_handler nbd_op_net_apply = {
        .name = "net_apply",
        .needs = NBD_NEEDS_LINKS | NBD_NEEDS_FIREWALL,
        .stat = NBD_STAT_OPS_FIREWALL,
        .validate = validate_apply,
        .run = run_apply,
};
const struct nbd_op_handler nbd_op_net_remove = {
        .name = "net_remove",
        .needs = NBD_NEEDS_FIREWALL,
        .stat = NBD_STAT_OPS_FIREWALL,
        .validate = validate_remove,
        .run = run_remove,
};
const struct nbd_op_handler nbd_op_net_list = {
        .name = "net_list",
        .needs = NBD_NEEDS_FIREWALL,
        .stat = NBD_STAT_OPS_FIREWALL,
        .run = run_list,
};
