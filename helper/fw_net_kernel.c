// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners in the kernel; see fw_net_kernel.h.
 *
 * The reads and the commit take the socket they go through: a request's
 * run on the firewall's lane, behind the guests' transactions (op_net.c);
 * a read the loop needs at once (link_users.c) through the loop's. The
 * table is read from its chains alone: each base chain's comment says the
 * owner, and the kernel's count of what uses it (NFTA_CHAIN_USE: a base
 * chain cannot be jumped to, so its rules) says whether its rules are
 * still all there, where a dump of every rule took 370 ms at 256 NAT
 * networks of 32 forwards. */
#include "fw_net_kernel.h"

#include "netlink.h" /* before the kernel headers: libnl wants netinet/in.h */

#include <errno.h>
#include <limits.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fw_net_compile.h"
#include "fw_summary.h"
#include "lane.h" /* nbd_test_hold_point */
#include "nfsock.h"

/* One owner as its chains show it. */
struct net_state {
        struct nbd_net_owner_info info;
        bool has_comment;
        bool mixed; /* its base chains' comments differ */
        unsigned chains; /* bit k: chain kind k exists */
        unsigned rules; /* counted in its chains */
        bool touched; /* an op of this transaction queued a change */
};

struct nbd_net_txn {
        struct mnl_socket *nl;
        uint32_t seq, portid;
        struct net_state *owners;
        size_t n_owners;
        struct nftnl_batch *batch; /* NULL until something is queued */
        uint32_t table_seq; /* the one message that asks for its ack */
        /* Base chains in the namespace on each kind's hook array, as read
         * ([0]: IPv4's, [1]: IPv6's; an inet chain takes a place in both),
         * and those this transaction makes (see over_hook_limit). */
        unsigned hooked[2][NBD_NET_CHAINS];
        unsigned adding[NBD_NET_CHAINS];
};

/* ---- reading ---- */

static struct net_state *find(const struct nbd_net_txn *t, const char *owner, size_t len)
{
        for (size_t i = 0; i < t->n_owners; i++)
                if (strlen(t->owners[i].info.owner) == len &&
                    memcmp(t->owners[i].info.owner, owner, len) == 0)
                        return &t->owners[i];
        return NULL;
}

/* The owner and chain kind a chain name says, or -EINVAL (not ours). */
static int split_name(const char *name, size_t *ret_len, unsigned *ret_kind)
{
        const char *slash = strrchr(name, '/');

        if (!slash || slash == name || (size_t)(slash - name) > NBD_FW_OWNER_MAX)
                return -EINVAL;
        for (unsigned k = 0; k < NBD_NET_CHAINS; k++)
                if (strcmp(slash + 1, nbd_net_chain_names[k]) == 0) {
                        *ret_len = (size_t)(slash - name);
                        *ret_kind = k;
                        return 0;
                }
        return -EINVAL;
}

static struct net_state *find_or_add(struct nbd_net_txn *t, const char *name, size_t len)
{
        struct net_state *o = find(t, name, len), *grown;

        if (o)
                return o;
        grown = realloc(t->owners, (t->n_owners + 1) * sizeof(*grown));
        if (!grown)
                return NULL;
        t->owners = grown;
        o = &t->owners[t->n_owners++];
        memset(o, 0, sizeof(*o));
        memcpy(o->info.owner, name, len);
        return o;
}

static int comment_cb(const struct nftnl_udata *attr, void *data)
{
        const char **text = data;
        const char *v = nftnl_udata_get(attr);
        uint8_t len = nftnl_udata_len(attr);

        /* Anyone with CAP_NET_ADMIN writes these: a comment is a string
         * only when it ends inside its attribute. */
        if (nftnl_udata_type(attr) == 0 && len > 0 && memchr(v, 0, len))
                *text = v;
        return 0;
}

struct dump_ctx {
        struct nbd_net_txn *t;
        int err;
};

static void note_comment(struct net_state *o, const char *text)
{
        struct nbd_net_comment c;

        if (!text || nbd_net_parse_comment(text, &c) < 0) {
                o->mixed = true;
                return;
        }
        if (o->has_comment && strcmp(o->info.hash, c.hash) != 0)
                o->mixed = true;
        o->has_comment = true;
        memcpy(o->info.hash, c.hash, sizeof(c.hash));
        memcpy(o->info.bridge, c.bridge, sizeof(c.bridge));
        memcpy(o->info.mode, c.mode, sizeof(c.mode));
        o->info.uid = (uid_t)c.uid;
        o->info.rules = c.rules;
}

/* A base chain of any table of the inet, ip or ip6 family: its place in
 * the hook arrays the owners' chains go to. */
static void note_hook(struct nbd_net_txn *t, const struct nftnl_chain *c)
{
        uint32_t family = nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY);
        const char *type = nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE);
        int k;

        if (!nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM))
                return;
        k = nbd_net_hook_kind(nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
                              type && strcmp(type, "nat") == 0);
        if (k < 0)
                return;
        if (family == NFPROTO_IPV4 || family == NFPROTO_INET)
                t->hooked[0][k]++;
        if (family == NFPROTO_IPV6 || family == NFPROTO_INET)
                t->hooked[1][k]++;
}

static int on_chain(const struct nlmsghdr *nlh, void *data)
{
        struct dump_ctx *d = data;
        struct nftnl_chain *c = nftnl_chain_alloc();
        const char *name, *table, *text = NULL;
        const void *ud;
        uint32_t udlen = 0;
        struct net_state *o;
        size_t len;
        unsigned kind;

        if (!c || nftnl_chain_nlmsg_parse(nlh, c) < 0) {
                d->err = c ? -EINVAL : -ENOMEM;
                goto out;
        }
        note_hook(d->t, c);
        name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
        table = nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE);
        if (!name || !table || strcmp(table, NBD_NET_TABLE) != 0 ||
            nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY) != NFPROTO_INET ||
            split_name(name, &len, &kind) < 0)
                goto out;
        if (!(o = find_or_add(d->t, name, len))) {
                d->err = -ENOMEM;
                goto out;
        }
        o->chains |= 1u << kind;
        /* Its rules: what uses a base chain (nothing may jump to one). */
        if (nftnl_chain_is_set(c, NFTNL_CHAIN_USE))
                o->rules += nftnl_chain_get_u32(c, NFTNL_CHAIN_USE);
        ud = nftnl_chain_get_data(c, NFTNL_CHAIN_USERDATA, &udlen);
        if (ud)
                nftnl_udata_parse(ud, udlen, comment_cb, &text);
        note_comment(o, text);
out:
        if (c)
                nftnl_chain_free(c);
        return MNL_CB_OK;
}

/* One dump of every chain of family's tables (names, comments and the
 * kernel's count of their rules); no table at all is none. */
static int dump_chains(struct nbd_net_txn *t, uint8_t family)
{
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct dump_ctx d = {t, 0};
        uint32_t seq = ++t->seq;
        struct nlmsghdr *nlh =
                nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETCHAIN, family, NLM_F_DUMP | NLM_F_ACK, seq);
        /* Room for the largest datagram a kept socket may bring (nfsock.h),
         * read to its end even when interrupted (read_table asks again).
         * Not static: the lane and the loop (link_users.c) may both read. */
        char *in = malloc(NBD_NFSOCK_DUMP_BUF);
        int r;

        if (!in)
                return -ENOMEM;
        if (mnl_socket_sendto(t->nl, nlh, nlh->nlmsg_len) < 0) {
                r = -errno;
                goto out;
        }
        nbd_netlink_sent_nf(1);
        r = nbd_nfsock_read_answer(t->nl, in, NBD_NFSOCK_DUMP_BUF, seq, on_chain, &d);
        if (r == -ENOENT)
                r = 0;
        r = r < 0 ? r : d.err;
out:
        free(in);
        return r;
}

/* Every chain of the inet, ip and ip6 tables into t from nothing: ours,
 * and the base chains that share the owners' hooks. 0, -EINTR (a dump was
 * interrupted by a commit: all are read again) or -errno. */
static int read_table_once(void *data)
{
        static const uint8_t families[] = {NFPROTO_INET, NFPROTO_IPV4, NFPROTO_IPV6};
        struct nbd_net_txn *t = data;
        int r = 0;

        free(t->owners);
        t->owners = NULL;
        t->n_owners = 0;
        memset(t->hooked, 0, sizeof(t->hooked));
        for (size_t i = 0; r == 0 && i < sizeof(families); i++)
                r = dump_chains(t, families[i]);
        return r;
}

/* -EAGAIN: it kept changing. */
static int read_table(struct nbd_net_txn *t)
{
        return nbd_nfsock_dump_tries(read_table_once, t);
}

int nbd_net_txn_read(struct mnl_socket *nl, struct nbd_net_txn **ret, struct nbd_err *e)
{
        struct nbd_net_txn *t = calloc(1, sizeof(*t));
        int r;

        if (!t)
                return nbd_err_oom(e, "starting the network transaction");
        t->nl = nl;
        t->portid = mnl_socket_get_portid(nl);
        t->seq = (uint32_t)rand();
        r = read_table(t);
        t->nl = NULL; /* the caller's, for this call only */
        if (r < 0) {
                nbd_net_txn_free(t);
                return nbd_err_set(e, r, "cannot read table inet " NBD_NET_TABLE ": %s",
                                   nbd_nfsock_strerror(r));
        }
        *ret = t;
        return 0;
}

int nbd_net_txn_begin(struct nbd_net_txn **ret, struct nbd_err *e)
{
        struct mnl_socket *nl;
        /* The loop's kept socket (nfsock.h). */
        int r = nbd_nfsock_get(&nl);

        if (r < 0)
                return nbd_err_set(e, r, "cannot open nfnetlink: %s", strerror(-r));
        return nbd_net_txn_read(nl, ret, e);
}

void nbd_net_txn_free(struct nbd_net_txn *t)
{
        if (!t)
                return;
        if (t->batch)
                nftnl_batch_free(t->batch);
        free(t->owners);
        free(t);
}

int nbd_net_txn_each(const struct nbd_net_txn *t,
                     int (*fn)(const struct nbd_net_owner_info *o, void *data), void *data)
{
        for (size_t i = 0; i < t->n_owners; i++) {
                struct nbd_net_owner_info info = t->owners[i].info;
                int r;
                info.rules = t->owners[i].rules;
                if ((r = fn(&info, data)) < 0)
                        return r;
        }
        return 0;
}

/* ---- queueing ---- */

/* The batch, begun, with the table created if missing (never exclusive:
 * it is ours, and its other owners stay). */
static int batch_of(struct nbd_net_txn *t)
{
        struct nftnl_table *tb;
        struct nlmsghdr *nlh;

        if (t->batch)
                return 0;
        t->batch = nftnl_batch_alloc(4096, 64 * 1024);
        tb = nftnl_table_alloc();
        if (!t->batch || !tb || nftnl_table_set_str(tb, NFTNL_TABLE_NAME, NBD_NET_TABLE) < 0)
                goto oom;
        nftnl_batch_begin(nftnl_batch_buffer(t->batch), ++t->seq);
        if (nftnl_batch_update(t->batch) < 0)
                goto oom;
        nlh = nftnl_table_nlmsg_build_hdr(nftnl_batch_buffer(t->batch), NFT_MSG_NEWTABLE,
                                          NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, ++t->seq);
        nftnl_table_nlmsg_build_payload(nlh, tb);
        nftnl_table_free(tb);
        t->table_seq = t->seq;
        return nftnl_batch_update(t->batch) < 0 ? -ENOMEM : 0;
oom:
        if (tb)
                nftnl_table_free(tb);
        if (t->batch)
                nftnl_batch_free(t->batch);
        t->batch = NULL;
        return -ENOMEM;
}

static int put_chain(struct nbd_net_txn *t, uint16_t type, struct nftnl_chain *c, uint16_t flags)
{
        struct nlmsghdr *nlh = nftnl_chain_nlmsg_build_hdr(nftnl_batch_buffer(t->batch), type,
                                                           NFPROTO_INET, flags, ++t->seq);

        nftnl_chain_nlmsg_build_payload(nlh, c);
        return nftnl_batch_update(t->batch) < 0 ? -ENOMEM : 0;
}

static int put_rule(struct nbd_net_txn *t, struct nftnl_rule *r)
{
        struct nlmsghdr *nlh =
                nftnl_rule_nlmsg_build_hdr(nftnl_batch_buffer(t->batch), NFT_MSG_NEWRULE,
                                           NFPROTO_INET, NLM_F_CREATE | NLM_F_APPEND, ++t->seq);

        nftnl_rule_nlmsg_build_payload(nlh, r);
        return nftnl_batch_update(t->batch) < 0 ? -ENOMEM : 0;
}

/* Deleting a base chain takes its rules along (the kernel flushes it). */
static int queue_delete(struct nbd_net_txn *t, struct net_state *o)
{
        char name[NBD_FW_OWNER_MAX + 16];
        int r = 0;

        for (unsigned k = 0; r == 0 && k < NBD_NET_CHAINS; k++) {
                struct nftnl_chain *c;
                if (!(o->chains & (1u << k)))
                        continue;
                if ((r = nbd_net_chain_name(o->info.owner, k, name, sizeof(name))) < 0)
                        break;
                c = nftnl_chain_alloc();
                if (!c || nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NBD_NET_TABLE) < 0 ||
                    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name) < 0)
                        r = -ENOMEM;
                else
                        r = put_chain(t, NFT_MSG_DELCHAIN, c, 0);
                if (c)
                        nftnl_chain_free(c);
        }
        return r;
}

static unsigned chain_mask(const struct nbd_net_compiled *c)
{
        unsigned m = 0;

        for (unsigned k = 0; k < NBD_NET_CHAINS; k++)
                if (c->chains[k])
                        m |= 1u << k;
        return m;
}

static bool in_place(const struct net_state *o, const struct nbd_net_compiled *c, const char *hash)
{
        return o && !o->touched && o->has_comment && !o->mixed && strcmp(o->info.hash, hash) == 0 &&
               o->chains == chain_mask(c) && o->rules == c->total && o->info.rules == c->total;
}

/* Another owner with rules on s's bridge (as read, or as this transaction
 * leaves it), or NULL. */
static const struct net_state *other_on_bridge(const struct nbd_net_txn *t,
                                               const struct nbd_net_spec *s)
{
        for (size_t i = 0; i < t->n_owners; i++) {
                const struct net_state *o = &t->owners[i];
                if (o->chains && strcmp(o->info.owner, s->owner) != 0 &&
                    strcmp(o->info.bridge, s->bridge) == 0)
                        return o;
        }
        return NULL;
}

/* The kernel keeps a hook's functions in an array of at most 1,024
 * (MAX_HOOK_COUNT, net/netfilter/core.c; a nat chain's in its nat hook's
 * own array, as many): one more base chain is refused with E2BIG. It
 * refuses it inside the commit, after the whole batch was built and sent
 * (a 1.2 MB sendmsg took 6 s), so the owner that would pass the limit is
 * refused here instead, before anything is sent. A chain a transaction
 * deletes holds its place until the commit, while the new ones take
 * theirs as they are added: a replace counts both. What is not an
 * nftables base chain (an iptables-legacy table, conntrack's own hooks)
 * holds places too, and no nftables read shows it (nfnetlink_hook, which
 * would, is not in every kernel): for those few the kernel stays the
 * judge, at the commit. 0, or -E2BIG with e set. */
static int over_hook_limit(const struct nbd_net_txn *t, const struct nbd_net_compiled *c,
                           struct nbd_err *e)
{
        for (unsigned k = 0; k < NBD_NET_CHAINS; k++)
                for (unsigned v = 0; c->chains[k] && v < 2; v++)
                        if (t->hooked[v][k] + t->adding[k] >= NBD_NET_HOOK_MAX)
                                return nbd_err_set(e, -E2BIG,
                                                   "its %s chain would be base chain %u of the "
                                                   "IPv%d %s hook, and the kernel allows %d a hook "
                                                   "(%u there, %u more in this request; a replaced "
                                                   "network's old chains count until the commit)",
                                                   nbd_net_chain_names[k],
                                                   t->hooked[v][k] + t->adding[k] + 1, v ? 6 : 4,
                                                   nbd_net_chain_names[k], NBD_NET_HOOK_MAX,
                                                   t->hooked[v][k], t->adding[k]);
        return 0;
}

int nbd_net_txn_apply(struct nbd_net_txn *t, const struct nbd_net_spec *s, bool ensure,
                      bool own_only, struct nbd_net_applied *ret, struct nbd_err *e)
{
        struct net_state *o = find(t, s->owner, strlen(s->owner));
        const struct net_state *other;
        struct nbd_net_compiled c = {0};
        struct nbd_net_applied a = {0};
        int r;

        if (o && own_only && o->info.uid != s->uid)
                return nbd_err_set(e, -EPERM,
                                   "policy: uid %u does not own network owner %s (it is "
                                   "another caller's)",
                                   (unsigned)s->uid, s->owner);
        /* One network per bridge for a caller other than root: its networks
         * are then bounded by its interfaces (max_devices). Without, one
         * uid's thousands of owners on one bridge made every network
         * request of everyone's read them all, on the loop. */
        if (own_only && (other = other_on_bridge(t, s)))
                return nbd_err_set(e, -EEXIST,
                                   "policy: bridge %s has network %s already (a caller other "
                                   "than root has one network per bridge it owns)",
                                   s->bridge, other->info.owner);
        nbd_net_hash(s, a.hash);
        if ((r = nbd_net_compile(s, a.hash, &c)) < 0)
                return nbd_err_set(e, r, "compiling network %s: %s", s->owner, strerror(-r));
        a.rules = c.total;
        if (ensure && in_place(o, &c, a.hash)) {
                a.unchanged = true;
                goto done;
        }
        if ((r = over_hook_limit(t, &c, e)) < 0) {
                nbd_net_compiled_free(&c);
                return r;
        }
        /* The old chains go and the new come in the same transaction: the
         * old rules filter until the commit puts the new in place. */
        if ((r = batch_of(t)) < 0 || (o && (r = queue_delete(t, o)) < 0))
                goto oom;
        for (unsigned k = 0; k < NBD_NET_CHAINS; k++) {
                if (!c.chains[k])
                        continue;
                if ((r = put_chain(t, NFT_MSG_NEWCHAIN, c.chains[k], NLM_F_CREATE | NLM_F_EXCL)))
                        goto oom;
                t->adding[k]++;
                for (size_t i = 0; i < c.n_rules[k]; i++)
                        if ((r = put_rule(t, c.rules[k][i])))
                                goto oom;
        }
        if (!o && !(o = find_or_add(t, s->owner, strlen(s->owner))))
                goto oom;
        o->touched = true;
        /* As the transaction leaves it, for the batch's later ops. */
        o->chains = chain_mask(&c);
        memcpy(o->info.bridge, s->bridge, sizeof(o->info.bridge));
        o->info.uid = s->uid;
done:
        nbd_net_compiled_free(&c);
        *ret = a;
        return 0;
oom:
        nbd_net_compiled_free(&c);
        /* What was queued cannot be taken back: the whole batch goes. */
        if (t->batch)
                nftnl_batch_free(t->batch);
        t->batch = NULL;
        memset(t->adding, 0, sizeof(t->adding));
        return nbd_err_oom(e, "queueing a network's rules");
}

int nbd_net_txn_remove(struct nbd_net_txn *t, const char *owner, const uid_t *only_for,
                       struct nbd_err *e)
{
        struct net_state *o = find(t, owner, strlen(owner));

        if (!o || !o->chains)
                return nbd_err_set(e, -ENOENT, "network owner %s has no rules", owner);
        if (only_for && o->info.uid != *only_for)
                return nbd_err_set(e, -EPERM,
                                   "policy: uid %u does not own network owner %s (it is "
                                   "another caller's)",
                                   (unsigned)*only_for, owner);
        if (batch_of(t) < 0 || queue_delete(t, o) < 0) {
                if (t->batch)
                        nftnl_batch_free(t->batch);
                t->batch = NULL;
                memset(t->adding, 0, sizeof(t->adding));
                return nbd_err_oom(e, "queueing a network's removal");
        }
        o->chains = 0;
        o->touched = true;
        return 0;
}

bool nbd_net_txn_pending(const struct nbd_net_txn *t)
{
        return t->batch != NULL;
}

/* ---- the commit ---- */

/* The queued messages, BEGIN left out (the batch has no END yet), in
 * order: fn(h, i, data) for the i-th of them. 0 or fn's -errno. */
static int each_queued(const struct nbd_net_txn *t,
                       int (*fn)(const struct nlmsghdr *h, size_t i, void *data), void *data)
{
        int n = nftnl_batch_iovec_len(t->batch), r = 0;
        struct iovec *iov = calloc((size_t)n, sizeof(*iov));
        size_t i = 0;

        if (!iov)
                return -ENOMEM;
        nftnl_batch_iovec(t->batch, iov, (uint32_t)n);
        for (int k = 0; r == 0 && k < n; k++) {
                int len = (int)iov[k].iov_len;
                for (const struct nlmsghdr *h = iov[k].iov_base; r == 0 && mnl_nlmsg_ok(h, len);
                     h = mnl_nlmsg_next(h, &len))
                        if (h->nlmsg_type != NFNL_MSG_BATCH_BEGIN)
                                r = fn(h, i++, data);
        }
        free(iov);
        return r;
}

static int count_one(const struct nlmsghdr *h, size_t i, void *data)
{
        (void)h;
        *(size_t *)data = i + 1;
        return 0;
}

struct copy {
        struct nftnl_batch *b;
        uint32_t *seq;
        size_t ack_at; /* the message to flag NLM_F_ACK, or SIZE_MAX */
};

static int copy_one(const struct nlmsghdr *h, size_t i, void *data)
{
        struct copy *c = data;
        struct nlmsghdr *to = nftnl_batch_buffer(c->b);

        /* nftnl_batch_update() moves a message that overflows its page to
         * the next one: its header is final before the update. */
        memcpy(to, h, h->nlmsg_len);
        to->nlmsg_seq = (*c->seq)++;
        to->nlmsg_flags &= (uint16_t)~NLM_F_ACK;
        if (i == c->ack_at)
                to->nlmsg_flags |= NLM_F_ACK;
        return nftnl_batch_update(c->b) < 0 ? -ENOMEM : 0;
}

int nbd_net_txn_put(void *data, struct nftnl_batch *b, uint32_t *seq, bool ack)
{
        struct nbd_net_txn *t = data;
        struct copy c = {.b = b, .seq = seq, .ack_at = SIZE_MAX};
        size_t n = 0;
        int r;

        if (!t->batch)
                return 0;
        if ((r = each_queued(t, count_one, &n)) < 0)
                return r;
        if (ack && n)
                c.ack_at = n - 1;
        return each_queued(t, copy_one, &c);
}

void nbd_net_txn_joined(struct nbd_net_txn *t)
{
        if (t->batch)
                nftnl_batch_free(t->batch);
        t->batch = NULL;
}

static int read_acks(struct nbd_net_txn *t)
{
        char buf[MNL_SOCKET_BUFFER_SIZE];
        bool acked = false;
        int first = 0;

        /* nfnetlink handles the whole batch inside sendmsg(): every error
         * is queued by now, and the table's ack says the batch was seen
         * (only it and the generation mark's two messages ask for one:
         * thousands of acks could overflow the socket and lose an error). */
        for (;;) {
                ssize_t n = recv(mnl_socket_get_fd(t->nl), buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return first ? first : acked ? 0 : -EIO;
                if (n < 0)
                        return first ? first : -errno;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, (int)n);
                     h = mnl_nlmsg_next(h, (int *)&n)) {
                        const struct nlmsgerr *ack;
                        if (h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        ack = mnl_nlmsg_get_payload(h);
                        if (ack->error && !first)
                                first = ack->error;
                        if (h->nlmsg_seq == t->table_seq)
                                acked = true;
                }
        }
}

/* The firewall's generation mark, carried across this commit when it
 * holds now (fw_summary.h): a network's table is not the guests'. Its
 * messages and the batch's end go into tail (room for NBD_FW_MARK_CARRY_
 * ROOM bytes each and the end); without the mark, or after a failed read,
 * the end alone (the mark goes, as any commit not the firewall's makes
 * it). Returns the bytes written; *ret_carried says whether it carries. */
static size_t put_tail(struct nbd_net_txn *t, char *tail, bool carry, bool *ret_carried)
{
        bool holds = false;
        uint32_t gen = 0;
        size_t len = 0;

        if (carry && nbd_fw_mark_holds(t->nl, &t->seq, &holds, &gen) < 0)
                holds = false;
        for (unsigned i = 0; holds && i < NBD_FW_MARK_CARRY_MSGS; i++) {
                struct nlmsghdr *nlh = nbd_fw_mark_carry_msg(tail + len, i, gen, ++t->seq);
                if (!nlh) {
                        holds = false;
                        len = 0;
                        break;
                }
                len += MNL_ALIGN(nlh->nlmsg_len);
        }
        len += MNL_ALIGN(nftnl_batch_end(tail + len, ++t->seq)->nlmsg_len);
        *ret_carried = holds;
        return len;
}

/* The batch, ended by tail, in one sendmsg(): 0 or -errno. */
static int send_batch(struct nbd_net_txn *t, const char *tail, size_t tail_len)
{
        struct iovec *iov = NULL;
        struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
        struct msghdr msg = {.msg_name = &snl, .msg_namelen = sizeof(snl)};
        size_t total = 0;
        int r, n = nftnl_batch_iovec_len(t->batch), sndbuf;

        if (!(iov = calloc((size_t)n + 1, sizeof(*iov))))
                return -ENOMEM;
        nftnl_batch_iovec(t->batch, iov, (uint32_t)n);
        iov[n] = (struct iovec){.iov_base = (void *)tail, .iov_len = tail_len};
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)n + 1;
        /* nfnetlink takes a batch in one sendmsg(), which the socket's send
         * buffer must hold whole: the default (212,992 bytes) failed with
         * EMSGSIZE from 23 NAT networks with two port forwards in one
         * request. As the guests' commit (fw_kernel.c) does: forced (the
         * helper has CAP_NET_ADMIN) to the batch's size and some room. */
        for (int k = 0; k <= n; k++)
                total += iov[k].iov_len;
        sndbuf = total + 65536 > INT_MAX ? INT_MAX : (int)(total + 65536);
        setsockopt(mnl_socket_get_fd(t->nl), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf));
        r = sendmsg(mnl_socket_get_fd(t->nl), &msg, 0) < 0 ? -errno : 0;
        free(iov);
        nbd_netlink_sent_nf(1);
        return r == 0 ? read_acks(t) : r;
}

int nbd_net_txn_commit(struct nbd_net_txn *t, struct mnl_socket *nl, struct nbd_err *e)
{
        /* Zeroed: the attributes' padding goes to the kernel too. */
        char tail[NBD_FW_MARK_CARRY_MSGS * NBD_FW_MARK_CARRY_ROOM + MNL_NLMSG_HDRLEN + 64] = {0};
        bool carried;
        size_t len;
        int r;

        if (!t->batch)
                return 0; /* nothing changes: nothing is written */
        t->nl = nl;
        t->portid = mnl_socket_get_portid(t->nl);
        len = put_tail(t, tail, true, &carried);
        if (carried)
                nbd_test_hold_point("MARK_CARRY"); /* tests: a commit between */
        r = send_batch(t, tail, len);
        if (r < 0 && carried) {
                /* Refused with the mark's messages (its chain gone
                 * meanwhile, with the guests' last owner): as without. */
                memset(tail, 0, sizeof(tail));
                len = put_tail(t, tail, false, &carried);
                r = send_batch(t, tail, len);
        }
        nftnl_batch_free(t->batch);
        t->batch = NULL;
        t->nl = NULL; /* the caller's, for this call only */
        if (r < 0)
                return nbd_err_set(e, r, "the kernel refused the network transaction: %s",
                                   strerror(-r));
        return 0;
}
