// SPDX-License-Identifier: LGPL-2.1-or-later
/* The firewall's kernel side: transactions and the monitor, over the
 * table as fw_table.c reads it; see fw_kernel.h. */
#include "fw_kernel.h"

#include <arpa/inet.h> /* first: <linux/netfilter.h> defers to its in.h */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bw_nft.h"
#include "fw_compile.h"
#include "fw_msgs.h"
#include "fw_net.h"
#include "fw_same_byte.h"
#include "fw_summary.h"
#include "fw_table.h"
#include "lane.h"
#include "nfsock.h"
#include "log.h"
#include "loop.h" /* nbd_now_us */
#include "netlink.h"
#include "stats.h"

NBD_LOG_CATEGORY(firewall);

/* ---- transactions ---- */

/* Our own deletions of the table (the last owner removed) under way: the
 * monitor takes their DELTABLE events as ours, not as someone's flush.
 * Raised before a send the monitor hears (one it could not leave the
 * group for, monitor_mute), lowered by the monitor on the loop (or by the
 * sender, when the kernel refused the deletion). */
static unsigned own_table_deletions;

/* What the acks of a batch said. */
struct acks {
        int first_err; /* the first error ack */
        uint32_t err_seq;
        bool acked; /* the last message's (last) */
        bool lost; /* ENOBUFS: some were dropped */
};

struct nbd_fw_txn {
        struct nbd_fw *fw;
        struct nbd_fw_owners owners; /* as read at the start */
        struct nbd_fw_msgs msgs; /* every change queued, encoded (fw_msgs.h) */
        char **op_owner; /* owner of each queued op, for error messages */
        size_t n_ops, cap_ops;
        struct {
                char owner[NBD_FW_OWNER_MAX + 1];
                char hash[NBD_FW_HASH_HEX];
                char ifname[IFNAMSIZ];
                unsigned rules;
                uid_t uid;
        } * expect; /* what must be in the kernel after commit */
        size_t n_expect, cap_expect;
        unsigned rules_queued;
        /* One uid's owners and rules as they stand in this transaction,
         * for its bounds (nbd_fw_owner_spec's max_uid_*): summed once from
         * what was read and what is queued, then kept up by each op. */
        struct {
                bool known;
                uid_t uid;
                size_t owners, rules;
        } held;
        bool rules_counted; /* the rule dump ensure needs, done once */
        bool same_byte_checked; /* fw_same_byte.h: once a transaction */
        /* The owners are the summary's (fw_summary.h): the table is intact,
         * but their chains' names are not known until read_chains(). */
        bool summary;
        uint32_t gen; /* the kernel's generation, read after the chains */
        /* The chains are read on the firewall's lane (issue 14): an op
         * that needs them leaves the transaction as it was and fails with
         * -EAGAIN, chains_wanted set, until nbd_fw_txn_read_chains(). */
        bool chains_later, chains_wanted;
        /* Likewise the count of the rules an ensure needs when the table is
         * not intact: counts_wanted, and nbd_fw_txn_read_chains() counts. */
        bool counts_wanted;
        /* Every owner is what its comment says: the table has the mark of
         * our last commit and nobody has committed since, or the rules were
         * counted and agree. The commit then marks what it makes. */
        bool intact;
        unsigned mark_msgs; /* the messages the mark took, in the last batch built */
        /* The last batch built leaves none of the owners read: it writes
         * no mark (leaves_table_empty). Whether the table goes is not
         * decided from the read (drop_if_empty). */
        bool leaves_none;
        /* Another table's messages for the same commit (nbd_fw_txn_join). */
        nbd_fw_put_fn join_put;
        void *join_data;
        /* A commit in its three steps (nbd_fw_txn_commit_prepare): what
         * the send takes, and what it found, for the finish. */
        struct {
                bool pending; /* prepared; the send and finish are to come */
                /* The batch is built by the send, on the lane: through
                 * `shadow` (the handle's sequence and can_mark, copied at
                 * prepare), so that the build touches nothing of the loop's
                 * handle (`home`, bound again when the commit is cleared). */
                bool build_at_send;
                struct nbd_fw shadow, *home;
                int built; /* 0, or the build's -errno */
                struct nftnl_batch *b, *tail; /* around the messages */
                struct iovec mid; /* the messages, numbered */
                struct iovec *iov;
                int n_iov, fd, sndbuf;
                struct mnl_socket *nl; /* fd's, for the requests after the send */
                bool lane_fd; /* fd is the lane's socket (kept, not closed) */
                uint32_t first, last;
                uint32_t join_first, join_last; /* the joined messages' */
                unsigned msgs; /* in the batch, BEGIN and END included */
                int sent; /* 0, or sendmsg's -errno */
                struct acks ack;
                bool muted; /* sent while the monitor was out of the group */
                /* The batch removes owners and makes none: the table may
                 * be empty after it (drop_if_empty asks the kernel). */
                bool may_empty;
                bool dropped; /* the table went after the batch */
                int drop_r; /* 0, or why the empty table could not go */
                char *buf; /* for the acks */
        } c;
};

int nbd_fw_txn_begin(struct nbd_fw *fw, struct nbd_fw_txn **ret, struct nbd_err *e)
{
        struct nbd_fw_txn *t = calloc(1, sizeof(*t));
        int r;

        if (!t)
                return nbd_err_oom(e, "beginning a firewall transaction");
        t->fw = fw;
        r = nbd_fw_read_summary(fw, &t->owners, &t->gen, &t->summary);
        if (r < 0) {
                free(t);
                return nbd_fw_read_failed(e, r, false);
        }
        if (t->summary) {
                t->intact = true;
                *ret = t;
                return 0;
        }
        r = nbd_fw_read_owners(fw, &t->owners);
        if (r < 0) {
                free(t);
                return nbd_fw_read_failed(e, r, false);
        }
        /* Read after the chains: a change since our mark, even one made
         * while they were being read, makes the generation another. */
        r = nbd_fw_current_gen(fw, &t->gen);
        if (r < 0) {
                nbd_fw_owners_free(&t->owners);
                free(t);
                return nbd_err_set(e, r, "cannot read the ruleset generation: %s", strerror(-r));
        }
        t->intact = t->owners.n == 0 || (t->owners.marked && t->owners.mark == t->gen);
        *ret = t;
        return 0;
}

void nbd_fw_txn_rebind(struct nbd_fw_txn *t, struct nbd_fw *fw)
{
        t->fw = fw;
}

void nbd_fw_txn_join(struct nbd_fw_txn *t, nbd_fw_put_fn put, void *data)
{
        t->join_put = put;
        t->join_data = data;
}

static void commit_clear(struct nbd_fw_txn *t)
{
        if (t->c.home)
                t->fw = t->c.home;
        if (t->c.b)
                nftnl_batch_free(t->c.b);
        if (t->c.tail)
                nftnl_batch_free(t->c.tail);
        free(t->c.iov);
        free(t->c.buf);
        memset(&t->c, 0, sizeof(t->c));
}

void nbd_fw_txn_free(struct nbd_fw_txn *t)
{
        if (!t)
                return;
        if (t->msgs.n)
                nbd_test_hold_point("TXN_FREE");
        commit_clear(t);
        nbd_fw_msgs_free(&t->msgs);
        for (size_t i = 0; i < t->n_ops; i++)
                free(t->op_owner[i]);
        free(t->op_owner);
        free(t->expect);
        nbd_fw_owners_free(&t->owners);
        free(t);
}

/* Room for one more in *v (n used of *cap, each size bytes), doubling:
 * a batch of thousands of owners grew these by one, copying them all. */
static int grow(void **v, size_t n, size_t *cap, size_t size)
{
        size_t ncap = *cap ? 2 * *cap : 64;
        void *p;

        if (n < *cap)
                return 0;
        p = realloc(*v, ncap * size);
        if (!p)
                return -ENOMEM;
        *v = p;
        *cap = ncap;
        return 0;
}

static int note_op(struct nbd_fw_txn *t, const char *owner, size_t *ret_idx)
{
        char **p;

        if (grow((void **)&t->op_owner, t->n_ops, &t->cap_ops, sizeof(*p)) < 0)
                return -ENOMEM;
        p = t->op_owner;
        p[t->n_ops] = strdup(owner);
        if (!p[t->n_ops])
                return -ENOMEM;
        *ret_idx = t->n_ops++;
        return 0;
}

/* The deletion of o's chains, for op idx, into it. */
static int queue_delete(struct nbd_fw_items *it, struct nbd_fw_owner_state *o, size_t idx)
{
        for (size_t i = 0; i < o->n_chains; i++) {
                struct nftnl_chain *c = nbd_fw_new_chain(o->chains[i]);
                if (!c || nbd_fw_items_push(it, (struct nbd_fw_item){NBD_FW_ITEM_DELCHAIN, c, NULL,
                                                                     idx}) < 0) {
                        if (c)
                                nftnl_chain_free(c);
                        return -ENOMEM;
                }
        }
        return 0;
}

/* The rules in chain `name` of o; -1 when it has no such chain, and 0
 * without a count (counted false: the table is intact, see struct
 * nbd_fw_txn). */
static long chain_rules(const struct nbd_fw_owner_state *o, const char *name, bool counted)
{
        for (size_t i = 0; i < o->n_chains; i++)
                if (strcmp(o->chains[i], name) == 0)
                        return !counted ? 0 : o->chain_rules ? (long)o->chain_rules[i] : -1;
        return -1;
}

struct expect {
        const struct nbd_fw_owner_state *o;
        bool counted;
        size_t chains;
};

static int expect_chain(const char *name, size_t rules, void *data)
{
        struct expect *x = data;
        long have = chain_rules(x->o, name, x->counted);

        x->chains++;
        return have >= 0 && (!x->counted || have == (long)rules) ? 0 : 1;
}

/* Ensure's test: the hash in the comment is only a claim; the kernel must
 * also hold exactly the chains the spec makes, each with its number of
 * rules (nbd_fw_layout: a chain flushed or deleted by hand makes the owner
 * changed, and ensure rebuilds it). When the table is intact, the rules
 * are what the comment says and need no count. */
static bool in_place(const struct nbd_fw_owner_state *o, const struct nbd_fw_owner_spec *s,
                     const char *hash, bool counted)
{
        struct expect x = {o, counted, 0};

        if (!o || !o->has_base || strcmp(o->hash, hash) != 0 || strcmp(o->ifname, s->ifname) != 0)
                return false;
        /* Out of memory counts as changed: ensure rebuilds. */
        return nbd_fw_layout(s, expect_chain, &x) == 0 && o->n_chains == x.chains;
}

/* The owners' chains, for an op that deletes some, when the transaction
 * began from the summary: one chain dump, which may find that someone has
 * committed since (then, as at any begin, the mark does not hold). Owners
 * the summary let ensure skip stay skipped: they were in place when read.
 * No owner is touched yet: touching one needs its chains. */
static int read_chains(struct nbd_fw_txn *t, struct nbd_err *e)
{
        struct nbd_fw_owners now = {0};
        uint32_t gen;
        int r;

        if (!t->summary)
                return 0;
        if (t->chains_later) {
                t->chains_wanted = true;
                return nbd_err_set(e, -EAGAIN, "the owners' chains are read on the lane first");
        }
        nbd_test_hold_point("CHAINS");
        r = nbd_fw_read_owners(t->fw, &now);
        if (r < 0)
                return nbd_fw_read_failed(e, r, false);
        r = nbd_fw_current_gen(t->fw, &gen);
        if (r < 0) {
                nbd_fw_owners_free(&now);
                return nbd_err_set(e, r, "cannot read the ruleset generation: %s", strerror(-r));
        }
        nbd_fw_owners_free(&t->owners);
        t->owners = now;
        t->gen = gen;
        t->intact = now.n == 0 || (now.marked && now.mark == gen);
        t->summary = false;
        return 0;
}

/* After a count: does every owner have its base chains and, in all, the
 * rules its comment claims? Then a commit may mark the table. */
static bool all_as_claimed(const struct nbd_fw_owners *owners)
{
        for (const struct nbd_fw_owner_state *o = owners->list; o; o = o->next)
                if (!o->has_base || o->kernel_rules != o->rules)
                        return false;
        return true;
}

/* After a count: every owner this transaction leaves alone is as its
 * comment says. The ones it touches are written anew by its commit, so
 * the table is then whole again: a commit that repairs an owner (rules
 * deleted by hand, found by ensure's count) marks the table. */
static bool untouched_as_claimed(const struct nbd_fw_txn *t)
{
        if (!t->rules_counted)
                return false;
        for (const struct nbd_fw_owner_state *o = t->owners.list; o; o = o->next)
                if (!o->touched && (!o->has_base || o->kernel_rules != o->rules))
                        return false;
        return true;
}

/* The rule dump an ensure needs, once a transaction, when the table is not
 * intact: it grows with the table, and the kernel walks the table again
 * for every message of it (seconds at 1,000 owners of 60 rules). With
 * chains_later, not here (the loop): -EAGAIN, and nbd_fw_txn_read_chains()
 * counts on the firewall's lane. */
static int count_rules(struct nbd_fw_txn *t, struct nbd_err *e)
{
        int r;

        if (t->intact || t->rules_counted)
                return 0;
        if (t->chains_later) {
                t->chains_wanted = t->counts_wanted = true;
                return nbd_err_set(e, -EAGAIN, "the rules are counted on the lane first");
        }
        r = nbd_fw_count_rules(t->fw, &t->owners);
        if (r < 0)
                return nbd_fw_read_failed(e, r, true);
        t->rules_counted = true;
        t->intact = all_as_claimed(&t->owners);
        return 0;
}

/* The summary's test, for an ensure: the same hash on the same interface.
 * The chains need no look: the mark says our last commit made them, and
 * it made them from a model of this hash (which names the compiler's
 * version: a helper that compiles differently makes other hashes). */
static bool in_summary(const struct nbd_fw_owner_state *o, const struct nbd_fw_owner_spec *s,
                       const char *hash)
{
        return o && o->has_base && strcmp(o->hash, hash) == 0 && strcmp(o->ifname, s->ifname) == 0;
}

/* The shared set, checked by the transaction's first ensure of an owner
 * that uses it; a failed read is tried again by the next (the op itself
 * stands). */
static void ensure_same_byte(struct nbd_fw_txn *t, size_t idx)
{
        struct nbd_fw_items repair = {0};
        int r = nbd_fw_same_byte_ensure(t->fw, &t->owners, t->gen, &repair, idx);

        if (r == 0)
                r = nbd_fw_msgs_add(&t->msgs, &repair);
        nbd_fw_items_clear(&repair, 0);
        free(repair.v);
        if (r < 0)
                nbd_warn("cannot check set %s: %s", NBD_FW_SET_SAME_BYTE, strerror(-r));
        t->same_byte_checked = r == 0;
}

/* uid's owners and rules once the transaction is committed: those read
 * that no op of it changed, and what its ops queued. Summed when first
 * asked for (a walk of every owner: once a transaction, not once an op). */
static void held_by(struct nbd_fw_txn *t, uid_t uid)
{
        if (t->held.known && t->held.uid == uid)
                return;
        t->held.known = true;
        t->held.uid = uid;
        t->held.owners = t->held.rules = 0;
        for (const struct nbd_fw_owner_state *o = t->owners.list; o; o = o->next)
                if (o->has_base && !o->touched && o->uid == uid) {
                        t->held.owners++;
                        t->held.rules += o->rules;
                }
        for (size_t i = 0; i < t->n_expect; i++)
                if (t->expect[i].hash[0] && t->expect[i].uid == uid) {
                        t->held.owners++;
                        t->held.rules += t->expect[i].rules;
                }
}

/* Would s, replacing o (NULL: a new owner), take its uid past a bound?
 * Every owner costs the kernel memory nobody reclaims but by removing it,
 * and every rule makes each later count of the table (an ensure after
 * someone else's commit) longer: one request's bound alone let one uid
 * install 800,000 rules, request by request. */
static int over_uid_bounds(struct nbd_fw_txn *t, const struct nbd_fw_owner_spec *s,
                           const struct nbd_fw_owner_state *o, unsigned rules, struct nbd_err *e)
{
        size_t owners, total;

        if (!s->max_uid_owners && !s->max_uid_rules)
                return 0;
        held_by(t, s->uid);
        owners = t->held.owners + (o ? 0 : 1);
        total = t->held.rules - (o && o->rules <= t->held.rules ? o->rules : 0) + rules;
        if (s->max_uid_owners && owners > s->max_uid_owners)
                return nbd_err_set(e, -EDQUOT,
                                   "uid %u would have %zu firewall owners, more than %u "
                                   "(max_fw_owners_per_uid)",
                                   (unsigned)s->uid, owners, s->max_uid_owners);
        if (s->max_uid_rules && total > s->max_uid_rules)
                return nbd_err_set(e, -EDQUOT,
                                   "uid %u would have %zu firewall rules installed, more than %u "
                                   "(max_fw_rules_per_uid)",
                                   (unsigned)s->uid, total, s->max_uid_rules);
        return 0;
}

/* An owner of the held uid changed: from `was` rules (or none: !existed)
 * to `now` (or none: !stays). */
static void held_change(struct nbd_fw_txn *t, uid_t uid, bool existed, unsigned was, bool stays,
                        unsigned now)
{
        if (!t->held.known || t->held.uid != uid)
                return;
        if (existed) {
                t->held.owners -= t->held.owners ? 1 : 0;
                t->held.rules -= was <= t->held.rules ? was : t->held.rules;
        }
        if (stays) {
                t->held.owners++;
                t->held.rules += now;
        }
}

int nbd_fw_txn_apply(struct nbd_fw_txn *t, const struct nbd_fw_owner_spec *s,
                     struct nbd_fw_applied *ret, struct nbd_err *e)
{
        struct nbd_fw_owner_state *o = nbd_fw_owner_find(&t->owners, s->owner);
        struct nbd_fw_items fresh = {0}, old = {0};
        size_t idx, mark = t->msgs.n;
        int r;

        memset(ret, 0, sizeof(*ret));
        if (o && o->touched) {
                return nbd_err_set(e, -EINVAL, "owner %s is changed twice in one transaction",
                                   s->owner);
        }
        if (o && s->own_only && o->uid != s->uid) {
                return nbd_err_set(e, -EPERM, "owner %s is another caller's", s->owner);
        }
        r = note_op(t, s->owner, &idx);
        if (r < 0) {
                nbd_err_set(e, r, "out of memory queueing owner %s", s->owner);
                goto out;
        }
        /* The hash of the model decides whether anything is written. */
        nbd_fw_model_hash(s, ret->hash, &ret->rules);
        if (t->summary && s->ensure && in_summary(o, s, ret->hash)) {
                ret->unchanged = true;
                nbd_stat_inc(NBD_STAT_FW_OWNERS_UNCHANGED);
                goto out;
        }
        /* An owner that is there is replaced: its chains are deleted. */
        if (t->summary && o) {
                r = read_chains(t, e);
                if (r < 0 && t->chains_wanted) {
                        /* Nothing of this op stays: it runs again. */
                        free(t->op_owner[--t->n_ops]);
                        memset(ret, 0, sizeof(*ret));
                        return r;
                }
                if (r < 0)
                        goto out;
                o = nbd_fw_owner_find(&t->owners, s->owner);
                if (o && s->own_only && o->uid != s->uid) {
                        r = nbd_err_set(e, -EPERM, "owner %s is another caller's", s->owner);
                        goto out;
                }
        }
        if (s->ensure && o) {
                r = count_rules(t, e);
                if (r < 0 && t->counts_wanted) {
                        /* Nothing of this op stays: it runs again. */
                        free(t->op_owner[--t->n_ops]);
                        memset(ret, 0, sizeof(*ret));
                        return r;
                }
                if (r < 0)
                        goto out;
        }
        /* Nothing to write: no need to compile. */
        if (s->ensure && in_place(o, s, ret->hash, t->rules_counted)) {
                ret->unchanged = true;
                nbd_stat_inc(NBD_STAT_FW_OWNERS_UNCHANGED);
                goto out;
        }
        r = over_uid_bounds(t, s, o && o->has_base ? o : NULL, ret->rules, e);
        if (r < 0)
                goto out;
        r = nbd_fw_compile_owner(s, idx, &fresh, ret->hash, ret->rules, e);
        if (r < 0)
                goto out;
        /* The old chains go, and the new come, in the same transaction;
         * encoded now, so that the objects are freed owner by owner. */
        if (o) {
                r = queue_delete(&old, o, idx);
                o->touched = true;
        }
        if (r == 0)
                r = nbd_fw_msgs_add(&t->msgs, &old);
        if (r == 0)
                r = nbd_fw_msgs_add(&t->msgs, &fresh);
        if (r == 0)
                r = grow((void **)&t->expect, t->n_expect, &t->cap_expect, sizeof(*t->expect));
        if (r < 0) {
                /* Nothing of a failed op stays queued: with CONTINUE_ON_ERROR
                 * the transaction is still committed (a delete of the old
                 * chains without the new would leave the guest unfiltered). */
                nbd_fw_msgs_truncate(&t->msgs, mark);
                if (o)
                        o->touched = false;
                nbd_err_set(e, r, "out of memory queueing owner %s", s->owner);
                goto out;
        }
        snprintf(t->expect[t->n_expect].owner, sizeof(t->expect[0].owner), "%s", s->owner);
        snprintf(t->expect[t->n_expect].hash, sizeof(t->expect[0].hash), "%s", ret->hash);
        snprintf(t->expect[t->n_expect].ifname, sizeof(t->expect[0].ifname), "%s", s->ifname);
        t->expect[t->n_expect].rules = ret->rules;
        t->expect[t->n_expect].uid = s->uid;
        t->n_expect++;
        t->rules_queued += ret->rules;
        held_change(t, s->uid, o && o->has_base, o ? o->rules : 0, true, ret->rules);
out:
        if (r == 0 && s->ensure && !t->same_byte_checked && nbd_fw_uses_same_byte(s))
                ensure_same_byte(t, idx);
        nbd_fw_items_clear(&fresh, 0);
        free(fresh.v);
        nbd_fw_items_clear(&old, 0);
        free(old.v);
        return r;
}

/* Ensure by hash: the chains' test without a spec. The summary holds when
 * the mark does (our commit made every owner from a model of its hash);
 * otherwise the rules are counted once, and an owner whose chains do not
 * hold the rules its comment claims is stale, as in all_as_claimed(). */
static bool hash_in_place(struct nbd_fw_txn *t, const struct nbd_fw_owner_state *o,
                          const char *ifname, const char *hash)
{
        if (!o || !o->has_base || strcmp(o->hash, hash) != 0 || strcmp(o->ifname, ifname) != 0)
                return false;
        return t->intact || (t->rules_counted && o->kernel_rules == o->rules);
}

int nbd_fw_txn_check_hash(struct nbd_fw_txn *t, const char *owner, const char *ifname,
                          const char *hash, const uid_t *only_for, struct nbd_fw_applied *ret,
                          struct nbd_err *e)
{
        struct nbd_fw_owner_state *o = nbd_fw_owner_find(&t->owners, owner);
        struct nbd_fw_applied a = {0};
        size_t idx;
        int r;

        if (o && o->touched)
                return nbd_err_set(e, -EINVAL, "owner %s is changed twice in one transaction",
                                   owner);
        if (o && only_for && o->uid != *only_for)
                return nbd_err_set(e, -EPERM, "owner %s is another caller's", owner);
        if (o && (r = count_rules(t, e)) < 0)
                return r;
        a.unchanged = hash_in_place(t, o, ifname, hash);
        if (o && o->has_base) {
                snprintf(a.hash, sizeof(a.hash), "%s", o->hash);
                a.rules = t->intact ? o->rules : o->kernel_rules;
        }
        /* The owner's hash does not cover the shared set: checked as the
         * first ensure of the transaction would (whether this owner uses
         * it is in the rules the caller did not send). */
        if (a.unchanged && !t->same_byte_checked) {
                if (note_op(t, owner, &idx) < 0)
                        return nbd_err_set(e, -ENOMEM, "out of memory checking owner %s", owner);
                ensure_same_byte(t, idx);
        }
        if (a.unchanged)
                nbd_stat_inc(NBD_STAT_FW_OWNERS_UNCHANGED);
        *ret = a;
        return 0;
}

void nbd_fw_txn_chains_later(struct nbd_fw_txn *t)
{
        t->chains_later = true;
}

bool nbd_fw_txn_chains_wanted(const struct nbd_fw_txn *t)
{
        return t->chains_wanted;
}

int nbd_fw_txn_read_chains(struct nbd_fw_txn *t, struct nbd_err *e)
{
        bool later = t->chains_later, counts = t->counts_wanted;
        int r;

        t->chains_later = false;
        t->chains_wanted = false;
        t->counts_wanted = false;
        r = read_chains(t, e);
        if (r == 0 && counts)
                r = count_rules(t, e);
        t->chains_later = later;
        return r;
}

int nbd_fw_txn_remove(struct nbd_fw_txn *t, const char *owner, const uid_t *only_for,
                      struct nbd_err *e)
{
        struct nbd_fw_owner_state *o = nbd_fw_owner_find(&t->owners, owner);
        struct nbd_fw_items old = {0};
        size_t idx, mark = t->msgs.n;
        int r;

        if (o && t->summary) {
                r = read_chains(t, e);
                if (r < 0)
                        return r;
                o = nbd_fw_owner_find(&t->owners, owner);
        }
        if (!o) {
                return nbd_err_set(e, -ENOENT, "owner %s has no rules", owner);
        }
        if (only_for && o->uid != *only_for) {
                return nbd_err_set(e, -EPERM, "owner %s is another caller's", owner);
        }
        if (o->touched) {
                return nbd_err_set(e, -EINVAL, "owner %s is changed twice in one transaction",
                                   owner);
        }
        r = note_op(t, owner, &idx);
        if (r == 0)
                r = queue_delete(&old, o, idx);
        if (r == 0)
                r = nbd_fw_msgs_add(&t->msgs, &old);
        nbd_fw_items_clear(&old, 0);
        free(old.v);
        if (r == 0)
                r = grow((void **)&t->expect, t->n_expect, &t->cap_expect, sizeof(*t->expect));
        if (r < 0) {
                /* As in nbd_fw_txn_apply: nothing of a failed op stays queued. */
                nbd_fw_msgs_truncate(&t->msgs, mark);
                return nbd_err_set(e, r, "out of memory queueing the removal of owner %s", owner);
        }
        o->touched = true;
        held_change(t, o->uid, o->has_base, o->rules, false, 0);
        snprintf(t->expect[t->n_expect].owner, sizeof(t->expect[0].owner), "%s", owner);
        t->expect[t->n_expect].hash[0] = '\0';
        t->n_expect++;
        return 0;
}

static int put_table(struct nftnl_batch *b, uint16_t type, uint16_t flags, const char *name,
                     uint16_t family, uint32_t seq)
{
        struct nftnl_table *tb = nftnl_table_alloc();
        struct nlmsghdr *nlh;
        int r = -ENOMEM;

        if (!tb || nftnl_table_set_str(tb, NFTNL_TABLE_NAME, name) < 0)
                goto out;
        nlh = nftnl_table_nlmsg_build_hdr(nftnl_batch_buffer(b), type, family, flags, seq);
        nftnl_table_nlmsg_build_payload(nlh, tb);
        r = nftnl_batch_update(b) < 0 ? -ENOMEM : 0;
out:
        if (tb)
                nftnl_table_free(tb);
        return r;
}

static int put_mark_chain(struct nftnl_batch *b, uint32_t gen, uint32_t seq)
{
        struct nftnl_chain *c = nftnl_chain_alloc();
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        char text[64];
        struct nlmsghdr *nlh;
        int r = -ENOMEM;

        snprintf(text, sizeof(text), "netbroker generation %" PRIu32, gen);
        if (!c || !u || !nftnl_udata_put_strz(u, NBD_FW_UDATA_CHAIN_COMMENT, text) ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NBD_FW_GEN_TABLE) < 0 ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, NBD_FW_GEN_CHAIN) < 0 ||
            nftnl_chain_set_data(c, NFTNL_CHAIN_USERDATA, nftnl_udata_buf_data(u),
                                 nftnl_udata_buf_len(u)) < 0)
                goto out;
        nlh = nftnl_chain_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWCHAIN,
                                          NBD_FW_GEN_FAMILY, NLM_F_CREATE | NLM_F_EXCL, seq);
        nftnl_chain_nlmsg_build_payload(nlh, c);
        r = nftnl_batch_update(b) < 0 ? -ENOMEM : 0;
out:
        if (c)
                nftnl_chain_free(c);
        if (u)
                nftnl_udata_buf_free(u);
        return r;
}

/* The owners the table will have after the commit, for the summary:
 * those untouched, and those applied. 0 or -ENOMEM. */
static int summary_entries(const struct nbd_fw_txn *t, struct nbd_fw_summary_entry **ret,
                           size_t *ret_n)
{
        struct nbd_fw_summary_entry *v = calloc(t->owners.n + t->n_expect + 1, sizeof(*v));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        /* Oldest first (the list is newest first, as the chains were
         * made): a listing from the summary keeps the chains' order. */
        for (const struct nbd_fw_owner_state *o = t->owners.list; o; o = o->next)
                if (o->has_base && !o->touched)
                        v[n++] = (struct nbd_fw_summary_entry){o->owner, o->ifname, o->hash,
                                                               o->rules, o->uid};
        for (size_t i = 0; i < n / 2; i++) {
                struct nbd_fw_summary_entry x = v[i];
                v[i] = v[n - 1 - i];
                v[n - 1 - i] = x;
        }
        for (size_t i = 0; i < t->n_expect; i++)
                if (t->expect[i].hash[0])
                        v[n++] = (struct nbd_fw_summary_entry){
                                t->expect[i].owner, t->expect[i].ifname, t->expect[i].hash,
                                t->expect[i].rules, t->expect[i].uid};
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The generation mark goes, whatever it said (made and deleted: no error
 * when it is missing); it comes back, saying the generation this commit
 * will make, with the summary of the owners (fw_summary.h), only when the
 * table was intact before it, or was counted and is whole but for the
 * owners this commit writes anew (untouched_as_claimed). If anyone commits
 * between our read and this commit, the mark names a generation the
 * kernel has already passed: the next reader counts, as it must. */
static int put_mark(struct nbd_fw_txn *t, struct nftnl_batch *b, uint32_t *seq)
{
        const uint16_t fam = NBD_FW_GEN_FAMILY;
        uint32_t from = *seq;
        int r = 0;

        t->mark_msgs = 0;
        if (!t->fw->can_mark)
                return 0;
        r = put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, NBD_FW_GEN_TABLE, fam, (*seq)++);
        if (r == 0)
                r = put_table(b, NFT_MSG_DELTABLE, 0, NBD_FW_GEN_TABLE, fam, (*seq)++);
        /* Without owners, no mark: the next reader finds no table, which
         * is no owner, and intact (nbd_fw_txn_begin). */
        bool remark = (t->intact || untouched_as_claimed(t)) && !t->leaves_none;

        if (r == 0 && remark)
                r = put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, NBD_FW_GEN_TABLE, fam, (*seq)++);
        if (r == 0 && remark)
                r = put_mark_chain(b, t->gen + 1, (*seq)++);
        if (r == 0 && remark) {
                struct nbd_fw_summary_entry *v = NULL;
                size_t n = 0;
                r = summary_entries(t, &v, &n);
                if (r == 0)
                        r = nbd_fw_summary_put(b, seq, v, n);
                free(v);
        }
        t->mark_msgs = *seq - from;
        return r;
}

/* After this commit, does the table hold none of the owners read? Every
 * owner read is removed by it (touched, and not applied again) and none is
 * made; an owner with no base chain (a half-deleted one) or a chain of
 * someone else's (no '/' in its name) would stay. Then the commit writes no
 * mark. Whether the table itself goes is not decided from the read: the
 * firewall's lane runs a transaction's read and its commit as two closures,
 * and other transactions may read and commit between them, so the kernel
 * is asked after the commit (drop_if_empty). */
static bool leaves_table_empty(const struct nbd_fw_txn *t)
{
        /* A removal reads the chains: summary is false then. */
        if (!t->msgs.n || t->summary || t->owners.foreign)
                return false;
        for (const struct nbd_fw_owner_state *o = t->owners.list; o; o = o->next)
                if (!o->touched)
                        return false;
        for (size_t i = 0; i < t->n_expect; i++)
                if (t->expect[i].hash[0])
                        return false;
        return true;
}

/* Does the transaction remove owners and make none? Then the table may be
 * empty after its commit, whatever its read said of the owners that stay:
 * another transaction may have removed them since. */
static bool removes_only(const struct nbd_fw_txn *t)
{
        for (size_t i = 0; i < t->n_expect; i++)
                if (t->expect[i].hash[0])
                        return false;
        return t->n_expect > 0;
}

/* The batch around the queued messages: t->c.b holds BEGIN, our table
 * and the mark, t->c.tail the joined messages and END, and the messages
 * are numbered in place between them (t->c.mid). Our table is never
 * deleted here (drop_if_empty). 0 or -ENOMEM. */
static int build_batch(struct nbd_fw_txn *t)
{
        struct nftnl_batch *b = nftnl_batch_alloc(32 * 4096, 64 * 1024);
        struct nftnl_batch *tail = nftnl_batch_alloc(32 * 4096, 64 * 1024);
        struct nftnl_table *tb = nftnl_table_alloc();
        struct nlmsghdr *nlh;
        uint32_t seq = t->fw->seq + 1, first;
        int r = -ENOMEM;

        if (!b || !tail || !tb)
                goto out;
        nftnl_batch_begin(nftnl_batch_buffer(b), seq++);
        if (nftnl_batch_update(b) < 0)
                goto out;
        /* The table is created if missing (never exclusive: it is ours). */
        if (nftnl_table_set_str(tb, NFTNL_TABLE_NAME, NBD_FW_TABLE) < 0)
                goto out;
        t->leaves_none = leaves_table_empty(t);
        t->c.may_empty = removes_only(t);
        /* Only joined messages (every guest owner unchanged): the guests'
         * table is written only to keep its mark, when it has owners. */
        if (t->msgs.n || (t->intact && t->owners.n)) {
                nlh = nftnl_table_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWTABLE,
                                                  NFPROTO_NETDEV, NLM_F_CREATE, seq++);
                nftnl_table_nlmsg_build_payload(nlh, tb);
                if (nftnl_batch_update(b) < 0 || put_mark(t, b, &seq) < 0)
                        goto out;
        }
        first = seq;
        /* The last message is the one acknowledged. */
        nbd_fw_msgs_number(&t->msgs, seq, !t->join_put, &t->c.mid);
        seq += (uint32_t)t->msgs.n;
        t->c.join_first = seq;
        if (t->join_put && t->join_put(t->join_data, tail, &seq, true) < 0)
                goto out;
        t->c.join_last = seq - 1;
        nftnl_batch_end(nftnl_batch_buffer(tail), seq++);
        if (nftnl_batch_update(tail) < 0)
                goto out;
        t->c.first = first;
        t->c.last = seq - 2;
        t->c.msgs = seq - (t->fw->seq + 1);
        t->fw->seq = seq;
        t->c.b = b;
        t->c.tail = tail;
        b = tail = NULL;
        r = 0;
out:
        if (tb)
                nftnl_table_free(tb);
        if (b)
                nftnl_batch_free(b);
        if (tail)
                nftnl_batch_free(tail);
        return r;
}

/* Does the kernel have what the transaction was to leave? (After acks were
 * lost to ENOBUFS, the state itself is the answer.) */
static int verify(struct nbd_fw_txn *t)
{
        struct nbd_fw_owners now = {0};
        int r;

        /* Only joined messages: the guests' table cannot tell. Nor can a
         * lane's handle here, on the loop: its socket is the lane's (a
         * clean-up or sweep of gone interfaces, done again later). */
        if (t->n_expect == 0 || t->fw->nl_borrowed)
                return -EIO;
        r = nbd_fw_read_owners(t->fw, &now);

        for (size_t i = 0; r == 0 && i < t->n_expect; i++) {
                struct nbd_fw_owner_state *o = nbd_fw_owner_find(&now, t->expect[i].owner);
                /* An empty hash stands for a removed owner. */
                if (t->expect[i].hash[0] ? !o || strcmp(o->hash, t->expect[i].hash) != 0
                                         : o != NULL)
                        r = -EIO;
        }
        nbd_fw_owners_free(&now);
        return r;
}

#define ACK_BUF 65536

/* On the lane: the whole batch is handled by the kernel inside sendmsg():
 * every ack and error is queued by the time it returns, so read fd until
 * it is empty, into buf (ACK_BUF). */
static void read_acks(int fd, char *buf, uint32_t last, struct acks *a)
{
        for (;;) {
                ssize_t n = recv(fd, buf, ACK_BUF, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == ENOBUFS) {
                        a->lost = true;
                        continue;
                }
                if (n < 0)
                        break;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, (int)n);
                     h = mnl_nlmsg_next(h, (int *)&n)) {
                        const struct nlmsgerr *ack;
                        if (h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        ack = mnl_nlmsg_get_payload(h);
                        if (ack->error && !a->first_err) {
                                a->first_err = ack->error;
                                a->err_seq = h->nlmsg_seq;
                        } else if (!ack->error && h->nlmsg_seq == last) {
                                a->acked = true;
                        }
                }
        }
}

/* The batch and its iovec: 0 or -ENOMEM. Touches the transaction alone
 * (t->fw is its shadow when it runs on the lane). */
static int commit_build(struct nbd_fw_txn *t)
{
        size_t total = 0;
        int n_head, n_tail;

        nbd_test_hold_point("BUILD");
        if (build_batch(t) < 0)
                return -ENOMEM;
        n_head = nftnl_batch_iovec_len(t->c.b);
        n_tail = nftnl_batch_iovec_len(t->c.tail);
        t->c.n_iov = n_head + 1 + n_tail;
        t->c.iov = calloc((size_t)t->c.n_iov, sizeof(*t->c.iov));
        if (!t->c.iov)
                return -ENOMEM;
        nftnl_batch_iovec(t->c.b, t->c.iov, (uint32_t)n_head);
        t->c.iov[n_head] = t->c.mid;
        nftnl_batch_iovec(t->c.tail, t->c.iov + n_head + 1, (uint32_t)n_tail);
        for (int i = 0; i < t->c.n_iov; i++)
                total += t->c.iov[i].iov_len;
        /* A large batch must fit the socket's send buffer whole. */
        t->c.sndbuf = total < (size_t)INT_MAX - 65536 ? (int)total + 65536 : INT_MAX;
        return 0;
}

/* The acks' buffer, for sending on fd (-1: a socket the send opens). */
static int commit_prepare(struct nbd_fw_txn *t, int fd, struct nbd_err *e)
{
        commit_clear(t);
        t->leaves_none = false;
        t->mark_msgs = 0;
        if (t->msgs.n == 0 && !t->join_put)
                return 0; /* nothing changes: nothing is written */
        t->c.buf = malloc(ACK_BUF);
        if (!t->c.buf) {
                commit_clear(t);
                return nbd_err_oom(e, "building the transaction");
        }
        t->c.fd = fd;
        t->c.pending = true;
        return 0;
}

int nbd_fw_txn_commit_prepare(struct nbd_fw_txn *t, struct nbd_err *e)
{
        /* The lane opens a socket of its own for the commit (fd -1): the
         * loop goes on using fw->nl meanwhile. The batch is built there
         * too (issue 14: 0.65-0.9 s on the loop for 4,096 guests when it
         * encoded every owner; now the messages are encoded as each op is
         * queued, and the send numbers them and adds the mark), from the
         * transaction and a copy of what it needs of the handle. */
        int r = commit_prepare(t, -1, e);

        if (r < 0 || !t->c.pending)
                return r;
        t->c.build_at_send = true;
        t->c.shadow =
                (struct nbd_fw){.seq = t->fw->seq, .can_mark = t->fw->can_mark, .monw = {.fd = -1}};
        t->c.home = t->fw;
        t->fw = &t->c.shadow;
        return 0;
}

/* The lane's kept nfnetlink socket (nfsock.h): its commits and its
 * handles' reads (nbd_fw_lane_open) go through it. Opened and closed for
 * each, they held replies 13-29 ms: a one-guest replace took 12 ms, 16 ms
 * when another had just been sent. Only the firewall's lane uses it (the
 * loop, when there is no lane or the lane is idle), one call at a time;
 * the loop's handle drops it at shutdown, after the lanes stopped. */
static struct mnl_socket *lane_socket(int *r)
{
        struct mnl_socket *nl = NULL;

        *r = nbd_nfsock_lane_get(&nl);
        return nl;
}

int nbd_fw_lane_socket(struct mnl_socket **ret)
{
        return nbd_nfsock_lane_get(ret);
}

/* t's socket: the lane's. 0 or -errno. */
static int open_lane_socket(struct nbd_fw_txn *t)
{
        int r;
        struct mnl_socket *nl = lane_socket(&r);

        if (nl) {
                t->c.nl = nl;
                t->c.fd = mnl_socket_get_fd(nl);
                t->c.lane_fd = true;
        }
        return r;
}

/* ---- the monitor, out of the group while our own batch is sent ---- */

/* nf_tables builds an event for every table, chain and rule a commit
 * touches, but only while someone is in NFNLGRP_NFTABLES: with our
 * monitor there, a 4,096-guest replace built some 250,000 of them (a
 * quarter of the commit's time in the kernel, 17 s against 6 s for the
 * replace in all), overflowed the monitor's buffer and then held the loop
 * reading what was left. So the monitor leaves the group for each of our
 * sends, whichever handle sends (the loop's, a lane's), and joins again
 * when the send returns.
 * What that costs: another process's commit that runs while we are out
 * (one holding or waiting for the kernel's nftables lock when our batch
 * comes, or one in the microseconds after it) is not heard. The cached
 * generation is not trusted from the moment we leave until it has been
 * read from the kernel after we joined again (mute_epoch,
 * nbd_fw_monitor_heard), so the generation mark is never taken for
 * current when it is not, and what such a commit did to the table is
 * found by the next read. Its DELTABLE, if it deleted our table, goes
 * uncounted in fw_table_deleted (netbrokerd(8) says so).
 * Sends come from the loop and the lanes: the lock keeps one count of
 * them, so that the monitor joins again after the last. */
static pthread_mutex_t mute_lock = PTHREAD_MUTEX_INITIALIZER;
static int monitor_fd = -1; /* the loop's handle's monitor, once open */
static unsigned mutes;
/* Moves at every join: a generation read before the last join, or while
 * out (mutes > 0), was not followed by the monitor. */
static unsigned mute_epoch;
/* Joining again failed: the monitor is deaf, and the generation is asked
 * of the kernel every time, as on a lane's handle. */
static bool monitor_deaf;
static bool deaf_warned; /* on the loop */

static bool monitor_mute(void)
{
        int grp = NFNLGRP_NFTABLES;
        bool ok = false;

        pthread_mutex_lock(&mute_lock);
        if (monitor_fd >= 0 && !monitor_deaf)
                ok = mutes > 0 || setsockopt(monitor_fd, SOL_NETLINK, NETLINK_DROP_MEMBERSHIP, &grp,
                                             sizeof(grp)) == 0;
        mutes += ok;
        pthread_mutex_unlock(&mute_lock);
        return ok;
}

static void monitor_unmute(void)
{
        int grp = NFNLGRP_NFTABLES;

        pthread_mutex_lock(&mute_lock);
        mute_epoch++;
        /* (Closed meanwhile, at shutdown: nothing to join.) */
        if (--mutes == 0 && monitor_fd >= 0 &&
            setsockopt(monitor_fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp)) < 0)
                monitor_deaf = true;
        pthread_mutex_unlock(&mute_lock);
}

static bool monitor_is_deaf(void)
{
        bool deaf;

        pthread_mutex_lock(&mute_lock);
        deaf = monitor_deaf;
        pthread_mutex_unlock(&mute_lock);
        return deaf;
}

bool nbd_fw_monitor_heard(unsigned *epoch)
{
        bool heard;

        pthread_mutex_lock(&mute_lock);
        heard = !monitor_deaf && mutes == 0 && *epoch == mute_epoch;
        *epoch = mute_epoch;
        pthread_mutex_unlock(&mute_lock);
        return heard;
}

/* One of our own deletions of the table is accounted for: true if one
 * was under way. */
static bool own_deletion_seen(void)
{
        unsigned n = __atomic_load_n(&own_table_deletions, __ATOMIC_SEQ_CST);

        while (n && !__atomic_compare_exchange_n(&own_table_deletions, &n, n - 1, false,
                                                 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
                ;
        return n != 0;
}

/* Tries of the empty table's deletion: each is refused when someone
 * commits between the question and the deletion, and asked again. */
#define DROP_TRIES 5

/* Our table and the mark's deleted, in a batch the kernel takes only at
 * generation gen (NFNL_BATCH_GENID: it checks under its commit mutex, and
 * refuses the whole batch with ERESTART when anyone has committed since).
 * Deleting a table deletes all it holds: this batch is sent only for the
 * generation the table was seen empty at. Touches t->c, t->fw (the
 * shadow, on the lane) and the socket alone. 0 or -errno. */
static int send_drop(struct nbd_fw_txn *t, uint32_t gen)
{
        struct nftnl_batch *b = nftnl_batch_alloc(4096, 4096);
        struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
        struct iovec iov;
        struct msghdr msg = {
                .msg_name = &snl, .msg_namelen = sizeof(snl), .msg_iov = &iov, .msg_iovlen = 1};
        const uint16_t fam = NBD_FW_GEN_FAMILY;
        uint32_t seq = t->fw->seq + 1, first = seq, last;
        struct acks a = {0};
        struct nlmsghdr *nlh;
        bool muted;
        int r = -ENOMEM;

        if (!b)
                return -ENOMEM;
        /* Zeroed: the builders leave attribute padding as they find it,
         * and it is sent. It fits in this one page. */
        memset(nftnl_batch_buffer(b), 0, 4096);
        nlh = nftnl_batch_begin(nftnl_batch_buffer(b), seq++);
        mnl_attr_put_u32(nlh, NFNL_BATCH_GENID, htonl(gen));
        if (nftnl_batch_update(b) < 0)
                goto out;
        /* The mark's table, made if the commit before wrote none, goes. */
        if (t->fw->can_mark &&
            (put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, NBD_FW_GEN_TABLE, fam, seq++) < 0 ||
             put_table(b, NFT_MSG_DELTABLE, 0, NBD_FW_GEN_TABLE, fam, seq++) < 0))
                goto out;
        last = seq;
        if (put_table(b, NFT_MSG_DELTABLE, NLM_F_ACK, NBD_FW_TABLE, NFPROTO_NETDEV, seq++) < 0)
                goto out;
        nftnl_batch_end(nftnl_batch_buffer(b), seq++);
        if (nftnl_batch_update(b) < 0 || nftnl_batch_iovec_len(b) != 1)
                goto out;
        t->fw->seq = seq;
        nftnl_batch_iovec(b, &iov, 1);
        muted = monitor_mute();
        /* Heard, its event may be read on the loop before the send returns:
         * counted first, and lowered again if it is refused. */
        if (!muted)
                __atomic_add_fetch(&own_table_deletions, 1, __ATOMIC_SEQ_CST);
        r = sendmsg(t->c.fd, &msg, 0) < 0 ? -errno : 0;
        if (muted)
                monitor_unmute();
        if (r == 0) {
                nbd_netlink_sent_nf(seq - first);
                read_acks(t->c.fd, t->c.buf, last, &a);
                r = a.first_err ? a.first_err : a.acked ? 0 : -EIO;
        }
        if (r < 0 && !muted)
                own_deletion_seen();
out:
        nftnl_batch_free(b);
        return r;
}

/* After a commit that removed owners and made none: our table goes if it
 * holds nothing now, the mark's with it, so that `nft list ruleset` shows
 * nothing of ours (the next apply makes them again). The transaction's
 * read cannot tell: another transaction may have committed since it, and
 * removed an owner it read as staying, or made one it never saw. So the
 * kernel is asked (two or three requests, whatever the table's size), and
 * the deletion goes for the generation it was asked at (send_drop). On the
 * firewall's lane, as every commit of ours is (or on the loop, for
 * nbd_fw_txn_commit); touches what send_drop touches. */
static void drop_if_empty(struct nbd_fw_txn *t)
{
        int r = 0;

        for (int i = 0; i < DROP_TRIES; i++) {
                bool empty = false;
                uint32_t gen;

                /* The generation first: a commit after it, even one before
                 * the table is read, makes the deletion refused. */
                r = nbd_fw_read_gen_on(t->c.nl, &t->fw->seq, &gen);
                if (r == 0)
                        r = nbd_fw_table_empty_on(t->c.nl, &t->fw->seq, &empty);
                if (r == -ENOENT || (r == 0 && !empty)) {
                        r = 0; /* gone already, or it holds something: it stays */
                        break;
                }
                if (r == 0) {
                        nbd_test_hold_point("DROP_READ"); /* tests: a commit between */
                        r = send_drop(t, gen);
                }
                t->c.dropped = r == 0;
                if (r != -ERESTART)
                        break;
        }
        t->c.drop_r = r;
}

void nbd_fw_txn_commit_send(struct nbd_fw_txn *t)
{
        struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
        struct msghdr msg = {.msg_name = &snl, .msg_namelen = sizeof(snl)};

        if (!t->c.pending)
                return;
        if (t->c.build_at_send && (t->c.built = commit_build(t)) < 0)
                return;
        msg.msg_iov = t->c.iov;
        msg.msg_iovlen = (size_t)t->c.n_iov;
        if (t->c.fd < 0 && (t->c.sent = open_lane_socket(t)) < 0)
                return;
        setsockopt(t->c.fd, SOL_SOCKET, SO_SNDBUFFORCE, &t->c.sndbuf, sizeof(t->c.sndbuf));
        t->c.muted = monitor_mute();
        nbd_test_hold_point("COMMIT_MUTED");
        t->c.sent = sendmsg(t->c.fd, &msg, 0) < 0 ? -errno : 0;
        if (t->c.muted)
                monitor_unmute();
        if (t->c.sent == 0)
                read_acks(t->c.fd, t->c.buf, t->c.last, &t->c.ack);
        /* Taken (a refused batch changed nothing): the table may be empty
         * now, whatever the transaction read. */
        if (t->c.sent == 0 && !t->c.ack.first_err && t->c.may_empty)
                drop_if_empty(t);
        if (t->c.lane_fd) {
                t->c.fd = -1; /* the lane's, kept */
                t->c.nl = NULL;
                t->c.lane_fd = false;
        }
}

int nbd_fw_txn_commit_finish(struct nbd_fw_txn *t, struct nbd_err *e)
{
        int r = 0;

        /* The loop's handle again: verify() below reads through it. */
        if (t->c.home) {
                t->fw = t->c.home;
                t->c.home = NULL;
        }
        if (!t->c.pending)
                goto out; /* nothing was to be written */
        if (t->c.built < 0) {
                r = nbd_err_oom(e, "building the transaction");
                goto out;
        }
        /* A send with the monitor out of the group needs nothing here for
         * the generation: the epoch it moved makes the next check ask the
         * kernel (nbd_fw_monitor_heard). */
        if (t->c.muted && monitor_is_deaf() && !deaf_warned) {
                deaf_warned = true;
                nbd_warn("cannot join the nf_tables event group again: someone else's deletion of "
                         "table %s will not be seen, and every generation check asks the kernel",
                         NBD_FW_TABLE);
        }
        if (t->c.sent < 0) {
                r = nbd_err_set(e, t->c.sent, "cannot send the transaction: %s",
                                strerror(-t->c.sent));
                goto out;
        }
        nbd_netlink_sent_nf(t->c.msgs);
        if (t->c.ack.first_err) {
                uint32_t s = t->c.ack.err_seq;
                size_t item = s >= t->c.first && s <= t->c.last ? s - t->c.first : SIZE_MAX;
                bool joined = t->join_put && s >= t->c.join_first && s <= t->c.join_last;
                /* A joined message is no owner's item. */
                if (item >= t->msgs.n)
                        item = SIZE_MAX;
                const char *owner = item != SIZE_MAX ? t->op_owner[t->msgs.v[item].owner] : NULL;
                r = nbd_err_set(
                        e, t->c.ack.first_err, "the kernel refused the transaction%s%s%s%s: %s",
                        owner ? " (owner " : "", owner ? owner : "", owner ? ")" : "",
                        joined ? " (a network owner's rules)" : "", strerror(-t->c.ack.first_err));
        } else if (!t->c.ack.acked && !(t->c.ack.lost && verify(t) == 0)) {
                r = nbd_err_set(e, -EIO, "%s",
                                t->c.ack.lost ? "acknowledgements were lost and the table does not "
                                                "show the new rules"
                                              : "no acknowledgement for the transaction");
        }
        /* The transaction stands either way: only its clean-up is told. */
        if (t->c.dropped)
                nbd_info("the last owner is gone, and tables %s and %s with it", NBD_FW_TABLE,
                         NBD_FW_GEN_TABLE);
        else if (t->c.drop_r < 0)
                nbd_warn("the last owner is gone, but the empty table %s stays: %s", NBD_FW_TABLE,
                         t->c.drop_r == -ERESTART ? "the ruleset kept changing"
                                                  : strerror(-t->c.drop_r));
        if (r == 0) {
                nbd_stat_inc(NBD_STAT_FW_TRANSACTIONS);
                nbd_stats[NBD_STAT_FW_OWNERS_WRITTEN] += t->n_expect;
                nbd_stats[NBD_STAT_FW_RULES_WRITTEN] += t->rules_queued;
        }
out:
        commit_clear(t);
        return r;
}

int nbd_fw_txn_commit(struct nbd_fw_txn *t, struct nbd_err *e)
{
        int r = commit_prepare(t, mnl_socket_get_fd(t->fw->nl), e);

        t->c.nl = t->fw->nl;
        if (r == 0 && t->c.pending && commit_build(t) < 0) {
                commit_clear(t);
                r = nbd_err_oom(e, "building the transaction");
        }
        if (r < 0)
                return r;
        nbd_fw_txn_commit_send(t);
        return nbd_fw_txn_commit_finish(t, e);
}

static int name_cmp(const void *a, const void *b)
{
        return strcmp(a, b);
}

int nbd_fw_txn_remove_bound(struct nbd_fw_txn *t, const char (*names)[IFNAMSIZ], size_t n,
                            struct nbd_fw_owner_info **ret, size_t *n_ret, struct nbd_err *e)
{
        struct nbd_fw_owner_info *v = NULL;
        size_t k = 0, cap = 0;
        int r = 0;

        /* From the summary, the owners' chains are not known yet, and
         * nbd_fw_txn_remove() reads them, which replaces the owner list
         * this loop walks: read them first, when any owner is bound to a
         * gone name, so the list stays the one walked. */
        for (struct nbd_fw_owner_state *o = t->owners.list; t->summary && o; o = o->next) {
                if (o->has_base && !o->touched &&
                    bsearch(o->ifname, names, n, sizeof(*names), name_cmp)) {
                        r = read_chains(t, e);
                        if (r < 0)
                                return r;
                        break;
                }
        }
        for (struct nbd_fw_owner_state *o = t->owners.list; o && r == 0; o = o->next) {
                if (!o->has_base || o->touched ||
                    !bsearch(o->ifname, names, n, sizeof(*names), name_cmp))
                        continue;
                if (k == cap && (r = grow((void **)&v, k, &cap, sizeof(*v))) < 0) {
                        nbd_err_oom(e, "removing the owners of interfaces that are gone");
                        break;
                }
                r = nbd_fw_txn_remove(t, o->owner, NULL, e);
                if (r < 0)
                        break;
                v[k] = (struct nbd_fw_owner_info){.uid = o->uid};
                snprintf(v[k].owner, sizeof(v[k].owner), "%s", o->owner);
                snprintf(v[k].ifname, sizeof(v[k].ifname), "%s", o->ifname);
                k++;
        }
        if (r < 0) {
                free(v);
                return r;
        }
        *ret = v;
        *n_ret = k;
        return 0;
}

/* ---- a handle for the lane ---- */

int nbd_fw_lane_open(const struct nbd_fw *fw, struct nbd_fw **ret)
{
        struct nbd_fw *lf = calloc(1, sizeof(*lf));
        int r;

        if (!lf)
                return -ENOMEM;
        lf->monw.fd = -1;
        /* Its own numbers, on its own socket: any will do (not the loop's
         * fw->seq, which the loop changes meanwhile). */
        lf->seq = (uint32_t)nbd_now_us();
        lf->can_mark = fw->can_mark;
        lf->nl = lane_socket(&r);
        if (!lf->nl) {
                free(lf);
                return r;
        }
        lf->nl_borrowed = true;
        *ret = lf;
        return 0;
}

void nbd_fw_lane_close(struct nbd_fw *lf)
{
        nbd_fw_close(lf); /* no loop, no monitor, the lane's socket kept: itself */
}

/* ---- the table being deleted behind our back ---- */

static int gen_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **id = data;

        if (mnl_attr_get_type(attr) == NFTA_GEN_ID && mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
                *id = attr;
        return MNL_CB_OK;
}

void nbd_fw_on_table_deleted(struct nbd_fw *fw, nbd_fw_table_deleted_fn fn, void *data)
{
        fw->table_deleted = fn;
        fw->table_deleted_data = data;
}

/* A table was deleted: one of ours, by someone else? The guests' table is
 * also deleted by the helper itself (its last owner removed), which
 * own_deletion_seen() accounts for; the networks' and the policers' never
 * are (only their probes, under other names). */
static void on_table_deleted(struct nbd_fw *fw, uint32_t family, const char *name)
{
        bool guests = family == NFPROTO_NETDEV && strcmp(name, NBD_FW_TABLE) == 0;

        if (!guests && !(family == NFPROTO_INET && strcmp(name, NBD_NET_TABLE) == 0) &&
            !(family == NFPROTO_NETDEV && strcmp(name, NBD_BW_NFT_TABLE) == 0))
                return;
        if (guests && own_deletion_seen())
                return;
        /* The daemon owns the policy: it hears of it (an Event to the
         * connections that asked, and Stats) and installs it again; the
         * helper keeps no copy to rebuild from. One line a second at most:
         * a script deleting the table in a loop does not flood the log. */
        uint64_t now = nbd_now_us();
        if (now - fw->deleted_logged_us >= 1000000 || !fw->deleted_logged_us) {
                nbd_notice("table %s %s was deleted (nft flush ruleset, a firewall reload?)%s",
                           family == NFPROTO_INET ? "inet" : "netdev", name,
                           fw->deleted_unlogged ? "; more deletions of the tables since the "
                                                  "last such line"
                                                : "");
                fw->deleted_logged_us = now;
                fw->deleted_unlogged = false;
        } else {
                fw->deleted_unlogged = true;
        }
        if (guests)
                nbd_stat_inc(NBD_STAT_FW_TABLE_DELETED);
        if (fw->table_deleted)
                fw->table_deleted(fw->table_deleted_data, family, name);
}

static int on_nft_event(const struct nlmsghdr *nlh, void *data)
{
        struct nbd_fw *fw = data;
        const struct nlattr *id = NULL;
        struct nftnl_table *t;

        /* Every commit ends with one: the generation it made. */
        if (NFNL_MSG_TYPE(nlh->nlmsg_type) == NFT_MSG_NEWGEN) {
                uint32_t gen;

                if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), gen_cb, &id) < 0 || !id)
                        return MNL_CB_OK;
                gen = ntohl(mnl_attr_get_u32(id));
                /* Never back: a NEWGEN queued before one of our sends took
                 * the monitor out of its group may be read after a GETGEN
                 * has given a newer generation; taken, it could equal a
                 * mark the table has moved past. */
                if (!fw->gen_known || (int32_t)(gen - fw->gen) > 0)
                        fw->gen = gen;
                return MNL_CB_OK;
        }
        if (NFNL_MSG_TYPE(nlh->nlmsg_type) != NFT_MSG_DELTABLE)
                return MNL_CB_OK;
        t = nftnl_table_alloc();
        if (t && nftnl_table_nlmsg_parse(nlh, t) == 0 && nftnl_table_is_set(t, NFTNL_TABLE_NAME))
                on_table_deleted(fw, nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY),
                                 nftnl_table_get_str(t, NFTNL_TABLE_NAME));
        if (t)
                nftnl_table_free(t);
        return MNL_CB_OK;
}

void nbd_fw_monitor_drain(struct nbd_fw *fw)
{
        static char buf[65536];

        if (!fw->mon)
                return; /* a lane's handle: its generation comes from GETGEN */

        for (;;) {
                struct sockaddr_nl from = {0};
                socklen_t len = sizeof(from);
                ssize_t n = recvfrom(mnl_socket_get_fd(fw->mon), buf, sizeof(buf), MSG_DONTWAIT,
                                     (struct sockaddr *)&from, &len);
                if (n < 0 && errno == ENOBUFS) {
                        /* Our own big transactions make one event per rule;
                         * losing some of those is harmless, but a NEWGEN may
                         * have been among them: the generation is read
                         * again when next needed. */
                        fw->gen_known = false;
                        continue;
                }
                if (n <= 0)
                        return;
                /* Only the kernel's events: a NEWGEN from a process would
                 * make the generation mark look current. */
                if (from.nl_pid != 0)
                        continue;
                mnl_cb_run(buf, (size_t)n, 0, 0, on_nft_event, fw);
        }
}

static void on_monitor(struct nbd_watch *w, uint32_t events)
{
        (void)events;
        nbd_fw_monitor_drain(w->data);
}

/* Can the mark's table be made? A batch that makes it, then deletes a
 * table that is not there: the kernel aborts it whole (no commit, no
 * generation), and refuses the first message only if it cannot. */
static bool mark_table_works(struct nbd_fw *fw)
{
        struct nftnl_batch *b = nftnl_batch_alloc(4096, 4096);
        uint32_t seq = ++fw->seq, absent = 0;
        int fd = mnl_socket_get_fd(fw->nl), err = 0, err_seq = -1;
        struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
        struct iovec iov;
        struct msghdr msg = {
                .msg_name = &snl, .msg_namelen = sizeof(snl), .msg_iov = &iov, .msg_iovlen = 1};
        char buf[4096];
        bool ok = false;
        ssize_t n;

        if (!b)
                return false;
        /* Zeroed: the message builders leave attribute padding as they find
         * it, and it is sent (valgrind: uninitialised bytes). The probe fits
         * in this one page. */
        memset(nftnl_batch_buffer(b), 0, 4096);
        nftnl_batch_begin(nftnl_batch_buffer(b), seq++);
        if (nftnl_batch_update(b) < 0 ||
            put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, NBD_FW_GEN_TABLE, NBD_FW_GEN_FAMILY,
                      seq++) < 0 ||
            put_table(b, NFT_MSG_DELTABLE, 0, NBD_FW_GEN_TABLE "_absent", NFPROTO_NETDEV,
                      absent = seq++) < 0)
                goto out;
        nftnl_batch_end(nftnl_batch_buffer(b), seq++);
        fw->seq = seq;
        if (nftnl_batch_update(b) < 0 || nftnl_batch_iovec_len(b) != 1)
                goto out;
        nftnl_batch_iovec(b, &iov, 1);
        if (sendmsg(fd, &msg, 0) < 0)
                goto out;
        nbd_netlink_sent_nf(4);
        /* Handled inside send(): the errors are queued by now. */
        while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0 || (n < 0 && errno == EINTR)) {
                int len = (int)n;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; n > 0 && mnl_nlmsg_ok(h, len);
                     h = mnl_nlmsg_next(h, &len)) {
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                        if (h->nlmsg_type == NLMSG_ERROR && e->error && err_seq < 0) {
                                err = e->error;
                                err_seq = (int)h->nlmsg_seq;
                        }
                }
        }
        ok = err == -ENOENT && err_seq == (int)absent;
        if (!ok)
                nbd_info("no generation mark (the kernel refused a table in the arp family: "
                         "%s); ensure reads every rule",
                         strerror(err ? -err : EIO));
out:
        nftnl_batch_free(b);
        return ok;
}

int nbd_fw_open(struct nbd_loop *loop, struct nbd_fw **ret)
{
        struct nbd_fw *fw = calloc(1, sizeof(*fw));
        int r, big = 4 << 20;

        if (!fw)
                return -ENOMEM;
        fw->monw.fd = -1;
        fw->seq = (uint32_t)time(NULL);
        fw->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        fw->mon = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (!fw->nl || !fw->mon || mnl_socket_bind(fw->nl, 0, MNL_SOCKET_AUTOPID) < 0 ||
            mnl_socket_bind(fw->mon, 1 << (NFNLGRP_NFTABLES - 1), MNL_SOCKET_AUTOPID) < 0) {
                r = -errno;
                goto fail;
        }
        setsockopt(mnl_socket_get_fd(fw->nl), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
        setsockopt(mnl_socket_get_fd(fw->mon), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
        /* After the monitor's bind: every later commit's NEWGEN follows. */
        r = nbd_fw_read_gen(fw, &fw->gen);
        if (r < 0)
                goto fail;
        fw->gen_known = true;
        fw->can_mark = mark_table_works(fw);
        fw->loop = loop;
        if (loop) {
                r = nbd_loop_add(loop, &fw->monw, mnl_socket_get_fd(fw->mon), EPOLLIN, on_monitor,
                                 fw);
                if (r < 0)
                        goto fail;
        }
        pthread_mutex_lock(&mute_lock);
        if (monitor_fd < 0)
                monitor_fd = mnl_socket_get_fd(fw->mon);
        pthread_mutex_unlock(&mute_lock);
        *ret = fw;
        return 0;
fail:
        nbd_fw_close(fw);
        return r ? r : -EIO;
}

void nbd_fw_close(struct nbd_fw *fw)
{
        if (!fw)
                return;
        if (fw->loop && fw->monw.fd >= 0)
                nbd_loop_remove(fw->loop, &fw->monw);
        if (fw->nl && !fw->nl_borrowed)
                mnl_socket_close(fw->nl);
        /* The loop's handle goes last, after the lanes stopped: the lane's
         * commit socket with it. */
        if (fw->mon)
                nbd_nfsock_lane_close();
        if (fw->mon) {
                pthread_mutex_lock(&mute_lock);
                if (monitor_fd == mnl_socket_get_fd(fw->mon))
                        monitor_fd = -1;
                pthread_mutex_unlock(&mute_lock);
                mnl_socket_close(fw->mon);
        }
        free(fw);
}
