// SPDX-License-Identifier: LGPL-2.1-or-later
/* What an op file (op_*.c) sees of a request: one handler per op kind, and
 * the job services it may use. dispatch.c runs the handlers; the op files
 * translate protobuf into calls on one capability (spawn.c, link.c, ...). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "codec.h"
#include "dispatch.h"
#include "err.h"
#include "stats.h"

struct nbd_job;

/* What validation may look at. Validation never changes the system; it
 * may read it (does a parent interface exist?). */
/* In a request's fd list: a descriptor came here that is not a network
 * namespace (the only kind an op takes); it went to the closer. */
#define NBD_FD_NOT_NETNS (-2)

struct nbd_validation {
        const struct nbd_dispatch_ctx *ctx;
        const struct nbd_peer *peer; /* who asked */
        size_t nfds; /* fds that came with the request */
        /* < 0: none; NBD_FD_NOT_NETNS: one came that is no network
         * namespace, closed on arrival (server.c, closer.h). */
        const int *fds;
        /* Explicit names created by earlier ops of the batch, so a later op
         * may name them. */
        char (*created)[16];
        size_t n_created;
        /* Names seen to exist already in this validation: a batch of 1000
         * macvtaps on one parent looks the parent up once. */
        char (*exists)[16];
        size_t n_exists;
        /* Names an earlier op of the batch deletes: a later op naming one
         * finds it gone, though the kernel still has it while the batch is
         * validated (a firewall owner bound to it would bind the next
         * interface of that name). NULL: none are noted. */
        char (*gone)[16];
        size_t n_gone;
        bool *fd_used; /* set by an op that takes request fd i */
        char **claims; /* keys ops have claimed (an owner may appear once) */
        size_t n_claims;
        size_t n_rules; /* firewall rules of the ops validated so far */
        /* The policy's limits for a non-root caller: interfaces it owns now
         * (counted once, on first use) and those the batch's creates add. */
        bool owned_counted;
        unsigned owned, creating;
        /* State an op file read from the kernel once for the whole batch
         * (op_firewall.c: the owners' creators); cache_free(cache) runs when
         * validation ends. */
        void *cache;
        void (*cache_free)(void *cache);
        /* Hash indexes of claims and exists (issue 14): a batch of 4,096
         * firewall owners walked both lists once per op. Slots hold an
         * index + 1; 0 is empty. */
        size_t *claim_slots, *exist_slots;
        size_t claim_cap, exist_cap;
};

/* The capabilities an op kind needs (struct nbd_op_handler.needs): it is
 * offered in Hello, and run, only when each opened at start-up. */
enum nbd_op_needs {
        NBD_NEEDS_LINKS = 1u << 0, /* rtnetlink: ctx->links */
        NBD_NEEDS_FIREWALL = 1u << 1, /* nfnetlink: ctx->fw */
        NBD_NEEDS_BANDWIDTH = 1u << 2, /* tc: ctx->bw */
};

struct nbd_op_handler {
        const char *name; /* feature name in Hello */
        unsigned needs; /* enum nbd_op_needs bits; 0: runs anywhere */
        /* Lanes run() hands calls to (nbd_job_on_lane) beyond those of
         * needs, as enum nbd_op_needs bits: the job waits its turn in their
         * FIFOs as for a need, but the op is offered without the capability
         * (bandwidth's policer, on the firewall's lane: HTB needs none). */
        unsigned lanes;
        enum nbd_stat stat; /* counted when the op runs */
        /* Returns 0, or -errno with the result's message set. */
        int (*validate)(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res);
        /* Returns 0 or -errno (message set). An op that goes on after
         * run() returns calls nbd_job_park() and returns 0: "parked" is
         * the job's state, never an errno value (it was 1, EPERM, and a
         * kernel EPERM once parked a job forever). */
        int (*run)(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res);
        /* Ops of this kind go to the kernel together, at the batch's last
         * op of the kind (the firewall's one transaction). */
        bool batched;
        /* The fds run() hands to the client (nbd_job_give_fds), at most:
         * reserved before it runs, since every fd made and not yet taken
         * is the helper's (NULL: none). */
        unsigned (*fds)(const Netbroker__Op *op);
};

extern const struct nbd_op_handler nbd_op_ping, nbd_op_stats, nbd_op_exec, nbd_op_tap_create,
        nbd_op_macvtap_create, nbd_op_macvlan_create, nbd_op_veth_create, nbd_op_bridge_create,
        nbd_op_link_set, nbd_op_link_delete, nbd_op_names_dump, nbd_op_firewall_apply,
        nbd_op_firewall_remove, nbd_op_firewall_list, nbd_op_bandwidth_set, nbd_op_bandwidth_clear;
extern const struct nbd_op_handler nbd_op_link_list, nbd_op_bandwidth_show;
/* Ensure by hash (issue 14). */
extern const struct nbd_op_handler nbd_op_firewall_ensure_hash;
/* Virtual networks, part 1 (op_addr.c): addresses, routes, sysctls. */
extern const struct nbd_op_handler nbd_op_addr_add, nbd_op_addr_delete, nbd_op_addr_list,
        nbd_op_route_add, nbd_op_route_delete, nbd_op_route_list, nbd_op_sysctl_set,
        nbd_op_bridge_opt_set;
/* virtual networks: network firewall owners (op_net.c) */
extern const struct nbd_op_handler nbd_op_net_apply, nbd_op_net_remove, nbd_op_net_list;

/* Claim a key ("fw:vnet0") for this batch: false if an earlier op has. */
bool nbd_validation_claim(struct nbd_validation *v, const char *key);

/* The interface `name` exists now or an earlier op of the batch creates it;
 * else sets res (ENODEV, EINVAL) and returns its status. (op_link.c) */
int nbd_check_interface(struct nbd_validation *v, const char *name, Netbroker__Result *res,
                        const char *what);
/* A non-root caller owns interface `name` (the kernel keeps the uid it was
 * made for in its alias) or an earlier op of the batch creates it; else
 * sets res (EPERM) and returns its status. Root owns everything. */
int nbd_check_owned(struct nbd_validation *v, const char *name, Netbroker__Result *res);
/* The same when the op runs (an op may wait between validation and run,
 * and the interface of that name may be another by then): for a non-root
 * caller the interface, if it exists, must be marked as made for it. */
int nbd_job_check_owned(struct nbd_job *job, const char *name, Netbroker__Result *res);
/* The same, and the interface must exist, for every caller: for an op
 * whose kernel objects bind a name rather than a device (a netdev chain,
 * since Linux 6.16, hooks the next device of that name; a network's rules
 * match it), so that nothing is left on a name that is gone (ENODEV). */
int nbd_job_check_present(struct nbd_job *job, const char *name, Netbroker__Result *res,
                          const char *what);
/* A non-root LinkSet of a port that is, or joins, a bridge not the
 * caller's: refused (EPERM, res set) when the port's MTU would lower the
 * bridge's, or its address is one the bridge knows (another port's, its
 * own) or would become the bridge's. (op_link_port.c) */
int nbd_job_check_port(struct nbd_job *job, const Netbroker__LinkSet *s, Netbroker__Result *res);
/* For an undo: the ifindex of interface `name` when the op ran (0 when
 * there is none), and, when the undo runs, whether `name` still is that
 * interface and, for a non-root caller, still marked as made for it: 0, or
 * -ESTALE (gone, or another interface holds the name) or -EPERM (no longer
 * the caller's) with err set, and the undo must change nothing. */
int nbd_job_ifindex(struct nbd_job *job, const char *name);
int nbd_job_check_undo(struct nbd_job *job, const char *name, int ifindex, struct nbd_err *err);

/* For batched ops: is this the batch's last op of its kind, and a slot for
 * the state they share. When the job ends, before its reply, finish(job,
 * data, failed) runs (failed: the op that stopped the batch, or SIZE_MAX;
 * data may still be NULL), unless the client is gone; then free_fn(data)
 * if data is not NULL. */
bool nbd_job_is_last_batched(const struct nbd_job *job);
void **nbd_job_batch_slot(struct nbd_job *job,
                          void (*finish)(struct nbd_job *job, void *data, size_t failed),
                          void (*free_fn)(void *data));

/* Set a result's status (err is 0 or -errno; the wire carries a positive
 * errno) and message; returns err. */
int nbd_result_set(Netbroker__Result *res, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Record an explicit name created by an op being validated. */
void nbd_validation_created(struct nbd_validation *v, const char *name);
bool nbd_validation_was_created(const struct nbd_validation *v, const char *name);
void nbd_validation_exists(struct nbd_validation *v, const char *name);
/* An op of the batch deletes name: it neither exists nor was created, and
 * is gone for the ops after it (until one creates it again). */
void nbd_validation_forget(struct nbd_validation *v, const char *name);
bool nbd_validation_is_gone(const struct nbd_validation *v, const char *name);
bool nbd_validation_known_to_exist(const struct nbd_validation *v, const char *name);

const struct nbd_dispatch_ctx *nbd_job_ctx(const struct nbd_job *job);
const struct nbd_peer *nbd_job_peer(const struct nbd_job *job);
/* The request fd at index i (still owned by the job), or -1. */
int nbd_job_request_fd(const struct nbd_job *job, size_t i);
/* Bytes of program output this request may still carry in its reply. */
size_t nbd_job_reply_budget(const struct nbd_job *job);
void nbd_job_spend_reply_budget(struct nbd_job *job, size_t n);

/* Hand fds an op made to the client (they are sent at once, before the
 * reply) and note their indices in res. Takes ownership of the fds. If
 * they queue behind other output the job waits before its next op: an op
 * that gives fds finishes in run() (it does not park). */
int nbd_job_give_fds(struct nbd_job *job, Netbroker__Result *res, int *fds, size_t n);

/* Run undo(data) if a later op of the batch fails (and the request did not
 * ask to go on); free_data(data) in any case when the job ends. */
int nbd_job_on_failure_undo(struct nbd_job *job, void (*undo)(struct nbd_job *job, void *data),
                            void (*free_data)(void *data), void *data);

/* Like nbd_job_on_failure_undo(), for an undo that may find that what it
 * would put back is no longer what its op made or changed (the interface
 * was deleted and another took its name, or it is no longer the caller's):
 * undo returns 0 once done, or -errno with err set when it changed nothing
 * or failed, and the op's result says "undo skipped" and why. ifindex: the
 * interface the undo works on, 0 for none; an undo on an interface the
 * batch made may run before the joint deletion of the devices the batch
 * made, any other waits for it (nbd_job_on_failure_joint). */
int nbd_job_on_failure_undo_checked(struct nbd_job *job,
                                    int (*undo)(struct nbd_job *job, void *data,
                                                struct nbd_err *err),
                                    void (*free_data)(void *data), void *data, int ifindex);

/* Undos that share one kernel call (issue 14): the devices a failed batch
 * made are deleted in one request on the links' lane (one RCU grace
 * period for all; one each on the loop, 400 taps held every other client
 * for 7.7-8.4 s). At the roll-back, in each undo's place (newest first),
 * join() does on the loop what needs no wait: the identity checks
 * (nbd_job_check_undo) and the device moved into the call's link group.
 * The call goes once the roll-back reaches an undo that must see it done
 * (one on an interface the batch did not make, or on none: they see the
 * newer devices gone, as newest first has them) or its end; the job waits
 * for it (JOB_UNDOING), the loop serves others, and the roll-back goes on
 * when it returned, even if the client went away meanwhile (then the job
 * is freed after its roll-back, unanswered). Without a lane it runs here. */
struct nbd_undo_joint {
        unsigned need; /* whose lane: NBD_NEEDS_LINKS */
        /* On the loop, for op `op`: *joint is the call's state (NULL until an undo of
         * the call makes it). 0 with *ret_joined true: the undo is in the
         * call, and done() sets its op's result; 0 with false: it was
         * done here (no memory for the call: the old way); -errno with
         * err set: it changed nothing ("undo skipped"). */
        int (*join)(struct nbd_job *job, size_t op, void *data, void **joint, bool *ret_joined,
                    struct nbd_err *err);
        /* On the lane: the one call, over joint and a socket of its own. */
        void (*run)(void *joint);
        /* On the loop once run returned, or (the helper stopping) when it
         * never began, which joint must tell: sets each joined op's result
         * (nbd_job_mark_undone, nbd_job_mark_undo_skipped), then frees
         * joint. */
        void (*done)(struct nbd_job *job, void *joint);
};
/* Register the running op's undo of kind `kind`, over data (ifindex: the
 * device it deletes); free_data(data) when the job ends. 0 or -ENOMEM
 * (data freed). */
int nbd_job_on_failure_joint(struct nbd_job *job, const struct nbd_undo_joint *kind,
                             void (*free_data)(void *data), void *data, int ifindex);

/* Like nbd_job_on_failure_undo(), for an undo that covers several ops:
 * fn(job, data, failed) runs instead of undo and marks each op it undid
 * with nbd_job_mark_undone() itself. */
int nbd_job_on_failure_call(struct nbd_job *job,
                            void (*fn)(struct nbd_job *job, void *data, size_t failed),
                            void (*free_data)(void *data), void *data);

/* Like nbd_job_on_failure_call(), for an undo that makes a kernel call of
 * capability `need` (NBD_NEEDS_FIREWALL: bandwidth's policer) on that
 * capability's lane: prepare(job, data, failed) on the loop (false: nothing
 * for the lane, and it marked the op itself if need be), then fn(data) on
 * the lane, touching data alone, then finish(job, data) on the loop, which
 * marks the op (nbd_job_mark_undone, nbd_job_mark_undo_skipped). The undos
 * older than it wait for it, and the reply for the last. Without a lane,
 * all three here and now. free_data(data) when the job ends. ifindex: as
 * for nbd_job_on_failure_undo_checked(). */
int nbd_job_on_failure_lane(struct nbd_job *job, unsigned need,
                            bool (*prepare)(struct nbd_job *job, void *data, size_t failed),
                            void (*fn)(void *data), void (*finish)(struct nbd_job *job, void *data),
                            void (*free_data)(void *data), void *data, int ifindex);
void nbd_job_mark_undone(struct nbd_job *job, size_t op);
/* Keep data with the job until the job is freed, then free_data(data):
 * what a lane's read fills, which may outlive its op (the client went
 * away while the lane ran it); a read has nothing to undo. 0, or -ENOMEM
 * with free_data(data) called. */
int nbd_job_keep(struct nbd_job *job, void (*free_data)(void *data), void *data);
/* Op op's undo changed nothing, for the reason why: its result says "undo
 * skipped" (ECANCELED) and why, and an audit line. */
void nbd_job_mark_undo_skipped(struct nbd_job *job, size_t op, const char *why);

/* Op `op`, before the running one, failed after the fact (it shared a
 * kernel call with the ops after it, and its part failed; its result says
 * why): counted, and unless the request goes on after failures, the batch
 * stops as if it had failed on its own. */
void nbd_job_op_failed_late(struct nbd_job *job, size_t op);
/* The kernel call the running op hands to nbd_job_on_lane() next decides
 * the outcome of ops first..now (a run of LinkDeletes, the ops queued in a
 * firewall transaction): if the client goes away meanwhile, each is
 * audited as it really ended. Called more than once before the call, the
 * lowest first counts. */
void nbd_job_lane_decides_from(struct nbd_job *job, size_t first);

/* The index of the op running now. */
size_t nbd_job_op_index(const struct nbd_job *job);
/* The next op this job runs (refused ones skipped) is of the same kind as
 * the one running now: ops that go to the kernel together (LinkDeletes
 * next to each other) know where their run ends. */
bool nbd_job_next_is_same_kind(const struct nbd_job *job);
/* An op of one of the kinds cases[n] (Op oneof cases) runs after the
 * running one (refused ones skipped): ops that share one kernel call find
 * the last of them (op_net.c). */
bool nbd_job_later_op_of(const struct nbd_job *job, const unsigned *cases, size_t n);
/* A later op of one of the kinds cases[n] runs, and every op between the
 * running one and the last of them is of those kinds too (refused ones
 * skipped): ops of another kind that may go to the kernel with the
 * running one's without any other op seeing the difference (fw_join.h). */
bool nbd_job_only_ops_of_ahead(const struct nbd_job *job, const unsigned *cases, size_t n);
/* The job's client went away: a lane's done (nbd_job_on_lane) still runs,
 * and must not park it. */
bool nbd_job_is_cancelled(const struct nbd_job *job);
/* The request says to go on after a failed op (CONTINUE_ON_ERROR). */
bool nbd_job_goes_on_after_failure(const struct nbd_job *job);
/* A pointer slot of the job's for an op file's state, one per key (any
 * address of the op file's); NULL when all NBD_JOB_SLOTS are taken. The
 * job never frees what it holds. */
#define NBD_JOB_SLOTS 4
void **nbd_job_slot(struct nbd_job *job, const void *key);

/* Run fn(data), a blocking kernel call of capability `need`
 * (NBD_NEEDS_FIREWALL or NBD_NEEDS_LINKS), on that capability's lane
 * (lane.h): fn touches data and the capability's lane socket, nothing
 * else. The job parks; when fn returns, done(job, data) runs on the loop
 * and sets the op's result, and the job goes on (its next op that needs
 * the lane behind the jobs that waited for this call: one call a turn).
 * Without a lane, fn and done run here and now. The op returns its
 * result's status either way:
 *         nbd_job_on_lane(job, NBD_NEEDS_LINKS, fn, done, data);
 *         return -(int)res->status;
 * If the client goes away while fn runs, fn finishes, done still runs (for
 * the audit; it must not park: nbd_job_is_cancelled), and the job is freed
 * (batch data, undo data) only after fn returned. Otherwise done may park
 * the job (nbd_job_park); the op then ends with nbd_job_op_done(). */
void nbd_job_on_lane(struct nbd_job *job, unsigned need, void (*fn)(void *data),
                     void (*done)(struct nbd_job *job, void *data), void *data);
/* The same for a call that changes nothing (a listing): if the client goes
 * away before the lane begins it, it is not run, and done is not called. */
void nbd_job_on_lane_read(struct nbd_job *job, unsigned need, void (*fn)(void *data),
                          void (*done)(struct nbd_job *job, void *data), void *data);
/* Loop-free reads (issue 14): the running op needs fn(data), a read of
 * the kernel that grows with what it holds (the firewall's table at a
 * batch's first op), before it can go on. With a lane, the job parks,
 * fn runs there, and the op's run() is called again, for the same op and
 * counted once, when fn returned: true, and run() returns at once with
 * its result untouched. Without a lane, fn runs here: false, and run()
 * goes on. fn touches data and the capability's lane socket, nothing else.
 * The op learns that fn ran from data. If the client goes away meanwhile,
 * the op never runs again and the job is freed after fn returned. */
bool nbd_job_on_lane_first(struct nbd_job *job, unsigned need, void (*fn)(void *data), void *data);
/* Run fn(data) on the lane of `need` for no job (a clean-up), then
 * release(data) on the loop; without a lane, both here and now. */
void nbd_dispatch_on_lane(const struct nbd_dispatch_ctx *ctx, unsigned need, void (*fn)(void *data),
                          void (*release)(void *data), void *data);

/* The op is under way and will call nbd_job_op_done(); cancel(data) stops
 * it if the client goes away first. */
void nbd_job_park(struct nbd_job *job, void (*cancel)(void *data), void *data);

/* An op that parked is done: record its status and go on. */
void nbd_job_op_done(struct nbd_job *job);

/* ---- supervised programs (op_program.c) share Exec's checks ---- */
extern const struct nbd_op_handler nbd_op_program_start, nbd_op_program_stop, nbd_op_program_list;
/* argv and env as Exec takes them (op_exec.c): the counts, argv[0], and
 * each env entry KEY=VALUE on exec_env_allow; else res set (what: "exec"). */
int nbd_exec_check_args(const struct nbd_config *cfg, const char *what, const char *path,
                        char *const *argv, size_t n_argv, char *const *env, size_t n_env,
                        Netbroker__Result *res);
/* NULL-terminated arrays borrowing the strings: argv with path as argv[0],
 * the fixed environment with the request's entries over it; NULL without
 * memory. free() the array only. */
char **nbd_exec_build_argv(char *path, char *const *argv, size_t n_argv);
char **nbd_exec_build_env(char *const *env, size_t n_env);

/* For Exec: 0 with *ret_admitted true when the caller may spawn now, or
 * false when the job waits for a slot (the op returns 0 without parking;
 * when a child is reaped and a slot is the caller's, the op runs again from
 * the loop); or -errno with res set (the caller's share, or
 * max_pending_spawns, is full). */
int nbd_job_spawn_admit(struct nbd_job *job, Netbroker__Result *res, bool *ret_admitted);
