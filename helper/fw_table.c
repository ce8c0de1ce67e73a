// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading the firewall's table back; see fw_table.h. */
#include "fw_table.h"

#include <arpa/inet.h> /* first: <linux/netfilter.h> defers to its in.h */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_compile.h"
#include "fw_owner_hash.h"
#include "fw_summary.h"
#include "fw_text.h"
#include "netlink.h"
#include "lane.h" /* nbd_test_hold_point */
#include "nfsock.h"
#include "stats.h"

/* ---- reading the table back ---- */

void nbd_fw_owners_free(struct nbd_fw_owners *owners)
{
        struct nbd_fw_owner_state *o = owners ? owners->list : NULL;

        while (o) {
                struct nbd_fw_owner_state *next = o->next;
                for (size_t i = 0; i < o->n_chains; i++)
                        free(o->chains[i]);
                free(o->chains);
                free(o->chain_rules);
                free(o);
                o = next;
        }
        if (owners) {
                free(owners->buckets);
                *owners = (struct nbd_fw_owners){0};
        }
}

/* Seeded: the names are the clients' (fw_owner_hash.h). */
static size_t name_hash(const char *name, size_t len)
{
        return nbd_fw_owner_hash(name, len);
}

struct nbd_fw_owner_state *nbd_fw_owner_find_n(const struct nbd_fw_owners *owners, const char *name,
                                               size_t len)
{
        struct nbd_fw_owner_state *o;

        if (!owners->n_buckets || len > NBD_FW_OWNER_MAX)
                return NULL;
        o = owners->buckets[name_hash(name, len) & (owners->n_buckets - 1)];
        for (; o; o = o->hnext)
                if (strncmp(o->owner, name, len) == 0 && o->owner[len] == '\0')
                        return o;
        return NULL;
}

struct nbd_fw_owner_state *nbd_fw_owner_find(const struct nbd_fw_owners *owners, const char *owner)
{
        return nbd_fw_owner_find_n(owners, owner, strlen(owner));
}

/* Put o in the table, which doubles when it has as many owners as
 * buckets: 0 or -ENOMEM, with o in neither list nor table. */
int nbd_fw_owners_add(struct nbd_fw_owners *owners, struct nbd_fw_owner_state *o)
{
        size_t len = strlen(o->owner), b;

        if (owners->n >= owners->n_buckets) {
                size_t nb = owners->n_buckets ? 2 * owners->n_buckets : 64;
                struct nbd_fw_owner_state **v = calloc(nb, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                for (struct nbd_fw_owner_state *p = owners->list; p; p = p->next) {
                        size_t pb = name_hash(p->owner, strlen(p->owner)) & (nb - 1);
                        p->hnext = v[pb];
                        v[pb] = p;
                }
                free(owners->buckets);
                owners->buckets = v;
                owners->n_buckets = nb;
        }
        b = name_hash(o->owner, len) & (owners->n_buckets - 1);
        o->hnext = owners->buckets[b];
        owners->buckets[b] = o;
        o->next = owners->list;
        owners->list = o;
        owners->n++;
        return 0;
}

struct comment {
        const char *text;
        size_t len;
};

static int comment_cb(const struct nftnl_udata *attr, void *data)
{
        struct comment *out = data;

        if (nftnl_udata_type(attr) == NBD_FW_UDATA_CHAIN_COMMENT && nftnl_udata_len(attr) > 0) {
                out->text = nftnl_udata_get(attr);
                out->len = nftnl_udata_len(attr);
        }
        return MNL_CB_OK;
}

struct chain_dump {
        struct nbd_fw_owners owners;
        int err;
};

static int chain_attr_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **tb = data;
        uint16_t type = mnl_attr_get_type(attr);

        if ((type == NFTA_CHAIN_TABLE || type == NFTA_CHAIN_NAME) &&
            mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
                tb[type] = attr;
        if (type == NFTA_CHAIN_USERDATA)
                tb[type] = attr;
        return MNL_CB_OK;
}

int nbd_fw_udata_parse(const void *data, uint32_t len,
                       int (*cb)(const struct nftnl_udata *attr, void *data), void *arg)
{
        const uint8_t *p = data;

        for (uint32_t i = 0; i < len; i += 2u + p[i + 1]) {
                if (len - i < 2 || p[i + 1] > len - i - 2)
                        return -EINVAL;
        }
        return nftnl_udata_parse(data, len, cb, arg);
}

/* A chain's comment into text (up to its NUL or its end, whichever comes
 * first); false when it has none. */
static bool comment_text(const struct nlattr *ud, char text[NFT_USERDATA_MAXLEN + 1])
{
        struct comment c = {0};

        if (!ud ||
            nbd_fw_udata_parse(mnl_attr_get_payload(ud), mnl_attr_get_payload_len(ud), comment_cb,
                               &c) < 0 ||
            !c.text)
                return false;
        snprintf(text, NFT_USERDATA_MAXLEN + 1, "%.*s", (int)strnlen(c.text, c.len), c.text);
        return true;
}

/* The comment of a base chain into o. "uid=N" came later: a comment
 * without it was written for root, when only root could ask. */
bool nbd_fw_parse_owner_comment(struct nbd_fw_owner_state *o, const char *text)
{
        return sscanf(text, "netbroker %32s %15s %u uid=%u", o->hash, o->ifname, &o->rules,
                      &o->uid) >= 3;
}

static void read_comment(struct nbd_fw_owner_state *o, const struct nlattr *ud)
{
        char text[NFT_USERDATA_MAXLEN + 1];

        if (comment_text(ud, text))
                nbd_fw_parse_owner_comment(o, text);
}

static void read_mark(struct nbd_fw_owners *owners, const struct nlattr *ud)
{
        char text[NFT_USERDATA_MAXLEN + 1];

        if (comment_text(ud, text))
                owners->marked = sscanf(text, "netbroker generation %" SCNu32, &owners->mark) == 1;
}

/* Only the chain's table, name and comment are read: parsing all of
 * forty thousand chains with libnftnl is what ensure must not pay for. */
static int on_chain(const struct nlmsghdr *nlh, void *data)
{
        struct chain_dump *d = data;
        const struct nlattr *tb[NFTA_CHAIN_MAX + 1] = {0};
        const char *name, *slash;
        struct nbd_fw_owner_state *o;
        char **chains, *copy;
        uint8_t family;

        /* A chain of ours left out of the list would be left behind when
         * its owner is replaced or removed: out of memory fails the dump. */
        if (d->err < 0 || mnl_attr_parse(nlh, sizeof(struct nfgenmsg), chain_attr_cb, tb) < 0 ||
            !tb[NFTA_CHAIN_NAME] || !tb[NFTA_CHAIN_TABLE])
                return MNL_CB_OK;
        name = mnl_attr_get_str(tb[NFTA_CHAIN_NAME]);
        /* The dump has every family's chains: the mark's and ours. */
        family = ((const struct nfgenmsg *)mnl_nlmsg_get_payload(nlh))->nfgen_family;
        if (family == NBD_FW_GEN_FAMILY &&
            strcmp(mnl_attr_get_str(tb[NFTA_CHAIN_TABLE]), NBD_FW_GEN_TABLE) == 0) {
                if (strcmp(name, NBD_FW_GEN_CHAIN) == 0)
                        read_mark(&d->owners, tb[NFTA_CHAIN_USERDATA]);
                return MNL_CB_OK;
        }
        if (family != NFPROTO_NETDEV ||
            strcmp(mnl_attr_get_str(tb[NFTA_CHAIN_TABLE]), NBD_FW_TABLE))
                return MNL_CB_OK;
        slash = strchr(name, '/');
        if (!slash || (size_t)(slash - name) > NBD_FW_OWNER_MAX) {
                d->owners.foreign++;
                return MNL_CB_OK; /* not one of ours: never touched */
        }
        o = nbd_fw_owner_find_n(&d->owners, name, (size_t)(slash - name));
        if (!o) {
                o = calloc(1, sizeof(*o));
                if (!o) {
                        d->err = -ENOMEM;
                        return MNL_CB_OK;
                }
                memcpy(o->owner, name, (size_t)(slash - name));
                if (nbd_fw_owners_add(&d->owners, o) < 0) {
                        free(o);
                        d->err = -ENOMEM;
                        return MNL_CB_OK;
                }
        }
        /* The kernel resumes a dump by counting chains, and a commit
         * elsewhere between two of its datagrams can make it send one
         * again, unflagged (seen with another client's bandwidth commits
         * on the loop): an owner's chain deleted twice fails its
         * transaction. A chain seen twice is an interrupted dump. */
        for (size_t i = 0; i < o->n_chains; i++)
                if (strcmp(o->chains[i], name) == 0) {
                        errno = EINTR;
                        return MNL_CB_ERROR;
                }
        chains = realloc(o->chains, (o->n_chains + 1) * sizeof(*chains));
        if (chains)
                o->chains = chains;
        copy = chains ? strdup(name) : NULL;
        if (!copy) {
                d->err = -ENOMEM;
                return MNL_CB_OK;
        }
        if (!strchr(slash + 1, '/')) {
                /* A base chain: first in the list (deleted before the group
                 * chains its rules jump to), and it has the comment. */
                memmove(o->chains + 1, o->chains, o->n_chains * sizeof(*chains));
                o->chains[0] = copy;
                o->has_base = true;
                read_comment(o, tb[NFTA_CHAIN_USERDATA]);
        } else {
                o->chains[o->n_chains] = copy;
        }
        o->n_chains++;
        return MNL_CB_OK;
}

struct rule_count {
        struct nbd_fw_owners *owners;
};

static int dump(struct nbd_fw *fw, uint16_t type, mnl_cb_t cb, void (*restart)(void *data),
                void *data);

static int rule_attr_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **tb = data;

        if (mnl_attr_get_type(attr) == NFTA_RULE_CHAIN &&
            mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
                tb[NFTA_RULE_CHAIN] = attr;
        if (mnl_attr_get_type(attr) == NFTA_RULE_EXPRESSIONS &&
            mnl_attr_validate(attr, MNL_TYPE_NESTED) == 0)
                tb[NFTA_RULE_EXPRESSIONS] = attr;
        return MNL_CB_OK;
}

/* Whether a rule has a counter: every rule the compiler makes of the
 * model does, a jump does not. Only the expressions' names are read. */
static bool has_counter(const struct nlattr *exprs)
{
        const struct nlattr *e, *a;

        if (!exprs)
                return false;
        mnl_attr_for_each_nested(e, exprs)
        {
                mnl_attr_for_each_nested(a, e)
                {
                        if (mnl_attr_get_type(a) == NFTA_EXPR_NAME &&
                            mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 &&
                            strcmp(mnl_attr_get_str(a), "counter") == 0)
                                return true;
                }
        }
        return false;
}

/* Count rules per chain from a rule dump. Only the chain's name is read:
 * parsing every expression of thousands of rules is what ensure must not
 * pay for. */
static int on_rule(const struct nlmsghdr *nlh, void *data)
{
        struct rule_count *d = data;
        const struct nlattr *tb[NFTA_RULE_MAX + 1] = {0};
        const char *chain, *slash;
        struct nbd_fw_owner_state *o;

        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), rule_attr_cb, tb) < 0 ||
            !tb[NFTA_RULE_CHAIN])
                return MNL_CB_OK;
        chain = mnl_attr_get_str(tb[NFTA_RULE_CHAIN]);
        slash = strchr(chain, '/');
        o = slash ? nbd_fw_owner_find_n(d->owners, chain, (size_t)(slash - chain)) : NULL;
        if (!o)
                return MNL_CB_OK;
        for (size_t i = 0; i < o->n_chains; i++)
                if (strcmp(o->chains[i], chain) == 0 && o->chain_rules)
                        o->chain_rules[i]++;
        /* The owner's rules have counters (root groups' rules in the base
         * chains too; jumps have none). Rules in group chains made before
         * counters existed count as well. */
        if (strchr(slash + 1, '/') || has_counter(tb[NFTA_RULE_EXPRESSIONS]))
                o->kernel_rules++;
        return MNL_CB_OK;
}

static void restart_count(void *data)
{
        struct rule_count *rc = data;

        for (struct nbd_fw_owner_state *o = rc->owners->list; o; o = o->next) {
                o->kernel_rules = 0;
                memset(o->chain_rules, 0,
                       (o->n_chains ? o->n_chains : 1) * sizeof(*o->chain_rules));
        }
}

/* One dump of chain's rules (a GETRULE naming it: the kernel reads that
 * chain alone), cb on each: 0 (a chain gone meanwhile has none), -EINTR
 * (interrupted: read again) or -errno. */
static int dump_chain_rules(struct nbd_fw *fw, const char *chain, mnl_cb_t cb, void *data)
{
        static _Thread_local char buf[65536]; /* the loop and the firewall lane */
        uint32_t seq = ++fw->seq;
        struct nlmsghdr *nlh =
                nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETRULE, NFPROTO_NETDEV, NLM_F_DUMP, seq);
        struct nftnl_rule *rl = nbd_fw_new_rule(chain);
        int r;

        if (!rl)
                return -ENOMEM;
        nftnl_rule_nlmsg_build_payload(nlh, rl);
        nftnl_rule_free(rl);
        if (mnl_socket_sendto(fw->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        r = nbd_nfsock_read_answer(fw->nl, buf, sizeof(buf), seq, cb, data);
        return r == -ENOENT ? 0 : r;
}

/* One chain's rules counted (a GETRULE naming it: the kernel reads that
 * chain alone), each try from the counts before it. */
struct chain_count {
        struct nbd_fw *fw;
        struct rule_count *rc;
        struct nbd_fw_owner_state *o;
        size_t i; /* o's chain */
        unsigned kernel_rules; /* o's before this chain */
};

static int chain_count_once(void *data)
{
        struct chain_count *c = data;

        c->o->kernel_rules = c->kernel_rules;
        c->o->chain_rules[c->i] = 0;
        return dump_chain_rules(c->fw, c->o->chains[c->i], on_rule, c->rc);
}

/* A dump of every rule walks the whole table again for every message of
 * it, some 50 rules a message: its cost grows as the square of the table
 * (5.3 s for 60,000 rules here), where a chain asked for by name costs one
 * round trip. From this many chains on (some 200 guests of no-promisc and
 * clean-traffic), the chains are counted one by one. */
#define COUNT_BY_CHAIN_FROM 2048

int nbd_fw_count_rules(struct nbd_fw *fw, struct nbd_fw_owners *owners)
{
        struct rule_count rc = {owners};
        size_t chains = 0;
        int r = 0;

        /* Tests: where a count happens, a lane or the loop (test_lanes.c). */
        nbd_test_hold_point("COUNT");

        for (struct nbd_fw_owner_state *o = owners->list; o; o = o->next) {
                o->kernel_rules = 0;
                free(o->chain_rules);
                o->chain_rules = calloc(o->n_chains ? o->n_chains : 1, sizeof(*o->chain_rules));
                if (!o->chain_rules)
                        return -ENOMEM;
                chains += o->n_chains;
        }
        if (chains < COUNT_BY_CHAIN_FROM)
                return dump(fw, NFT_MSG_GETRULE, on_rule, restart_count, &rc);
        nbd_stat_inc_shared(NBD_STAT_NFT_RULE_COUNTS_BY_CHAIN);
        for (struct nbd_fw_owner_state *o = owners->list; r == 0 && o; o = o->next)
                for (size_t i = 0; r == 0 && i < o->n_chains; i++) {
                        struct chain_count c = {fw, &rc, o, i, o->kernel_rules};
                        r = nbd_nfsock_dump_tries(chain_count_once, &c);
                }
        return r;
}

/* One dump of chains or rules of our table (dump()'s, asked again). */
struct table_dump {
        struct nbd_fw *fw;
        uint16_t type;
        mnl_cb_t cb;
        void (*restart)(void *data);
        void *data;
        bool again; /* an interrupted try came first */
};

/* Room for the largest datagram an answer may come in. Per thread: a
 * lane's handle (nbd_fw_lane_open) reads too. */
static _Thread_local char answer_buf[NBD_NFSOCK_DUMP_BUF];

static int dump_once(void *data)
{
        char *buf = answer_buf;
        struct table_dump *t = data;
        uint32_t seq = ++t->fw->seq;
        /* Chains of every family: the mark is in the arp one. */
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(
                buf, t->type, t->type == NFT_MSG_GETCHAIN ? NFPROTO_UNSPEC : NFPROTO_NETDEV,
                NLM_F_DUMP, seq);
        int r;

        if (t->again)
                t->restart(t->data);
        t->again = true;
        if (t->type == NFT_MSG_GETCHAIN) {
                struct nftnl_chain *c = nbd_fw_new_chain("");
                if (!c)
                        return -ENOMEM;
                nftnl_chain_unset(c, NFTNL_CHAIN_NAME);
                nftnl_chain_unset(c, NFTNL_CHAIN_TABLE);
                nftnl_chain_nlmsg_build_payload(nlh, c);
                nftnl_chain_free(c);
        } else {
                struct nftnl_rule *rl = nbd_fw_new_rule("");
                if (!rl)
                        return -ENOMEM;
                nftnl_rule_unset(rl, NFTNL_RULE_CHAIN);
                nftnl_rule_nlmsg_build_payload(nlh, rl);
                nftnl_rule_free(rl);
        }
        if (mnl_socket_sendto(t->fw->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        /* Read to its end even when interrupted (a commit on a lane or on
         * the loop can interrupt it), else the next request reads its rest
         * as the answer. */
        r = nbd_nfsock_read_answer(t->fw->nl, buf, sizeof(answer_buf), seq, t->cb, t->data);
        return r == -ENOENT ? 0 : r; /* no table: no owners */
}

/* One dump of chains or rules of our table. A missing table is empty. A
 * dump the kernel interrupted (NLM_F_DUMP_INTR) is read again from the
 * start, after restart() has forgotten what the callbacks collected: else
 * the chains and rules read before the interruption would count twice.
 * -EAGAIN: it kept changing (the client may ask again). */
static int dump(struct nbd_fw *fw, uint16_t type, mnl_cb_t cb, void (*restart)(void *data),
                void *data)
{
        struct table_dump t = {fw, type, cb, restart, data, false};
        int r;

        if (type == NFT_MSG_GETRULE)
                nbd_stat_inc_shared(NBD_STAT_NFT_RULE_DUMPS);
        r = nbd_nfsock_dump_tries(dump_once, &t);

        return r < 0 ? r : 0;
}

static void restart_chains(void *data)
{
        struct chain_dump *d = data;

        nbd_fw_owners_free(&d->owners);
        d->err = 0;
}

int nbd_fw_read_owners(struct nbd_fw *fw, struct nbd_fw_owners *ret)
{
        struct chain_dump d = {0};
        int r;

        /* On the loop or the firewall's lane: the tests' proof of a read
         * that did not need the chains. */
        nbd_stat_inc_shared(NBD_STAT_NFT_CHAIN_DUMPS);
        r = dump(fw, NFT_MSG_GETCHAIN, on_chain, restart_chains, &d);

        if (r == 0)
                r = d.err;
        if (r < 0) {
                nbd_fw_owners_free(&d.owners);
                return r;
        }
        *ret = d.owners;
        return 0;
}

/* One owner's base chain, asked for by name: its comment says whose. */
struct base_read {
        struct nbd_fw_owner_state o;
        bool seen;
};

static int on_base_chain(const struct nlmsghdr *nlh, void *data)
{
        struct base_read *b = data;
        const struct nlattr *tb[NFTA_CHAIN_MAX + 1] = {0};

        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), chain_attr_cb, tb) < 0)
                return MNL_CB_OK;
        b->seen = true;
        read_comment(&b->o, tb[NFTA_CHAIN_USERDATA]);
        return MNL_CB_OK;
}

/* GETCHAIN of one chain of our table (no dump): 0, -ENOENT when it or the
 * table is missing, or -errno. */
static int get_chain(struct nbd_fw *fw, const char *name, struct base_read *b)
{
        char req[MNL_NLMSG_HDRLEN + 256] = {0}; /* zeroed: padding goes too */
        uint32_t seq = ++fw->seq;
        struct nlmsghdr *nlh =
                nftnl_nlmsg_build_hdr(req, NFT_MSG_GETCHAIN, NFPROTO_NETDEV, NLM_F_ACK, seq);

        mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, NBD_FW_TABLE);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, name);
        if (mnl_socket_sendto(fw->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        /* The chain, then the ack; or the error alone. */
        return nbd_nfsock_read_answer(fw->nl, answer_buf, sizeof(answer_buf), seq, on_base_chain,
                                      b);
}

int nbd_fw_read_creator(struct nbd_fw *fw, const char *owner, struct nbd_fw_owner_info *ret,
                        struct nbd_err *e)
{
        static const char *const bases[] = {"from", "to"};
        struct base_read b = {0};
        char name[NBD_FW_OWNER_MAX + 8];
        int r = -ENOENT;

        /* Either base chain has the comment; one alone left (the other
         * deleted by hand) still makes the owner someone's. */
        for (size_t i = 0; r == -ENOENT && i < sizeof(bases) / sizeof(bases[0]); i++) {
                snprintf(name, sizeof(name), "%s/%s", owner, bases[i]);
                r = get_chain(fw, name, &b);
        }
        if (r == 0 && !b.seen)
                r = -ENOENT;
        if (r == -ENOENT)
                return r;
        if (r < 0)
                return nbd_fw_read_failed(e, r, false);
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->owner, sizeof(ret->owner), "%s", owner);
        snprintf(ret->ifname, sizeof(ret->ifname), "%s", b.o.ifname);
        snprintf(ret->hash, sizeof(ret->hash), "%s", b.o.hash);
        ret->rules = b.o.rules;
        ret->uid = b.o.uid;
        return 0;
}

static int table_use_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **use = data;

        if (mnl_attr_get_type(attr) == NFTA_TABLE_USE && mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
                *use = attr;
        return MNL_CB_OK;
}

static int on_table(const struct nlmsghdr *nlh, void *data)
{
        const struct nlattr *use = NULL;
        uint32_t *ret = data;

        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), table_use_cb, &use) < 0 || !use) {
                errno = EPROTO;
                return MNL_CB_ERROR;
        }
        *ret = ntohl(mnl_attr_get_u32(use));
        return MNL_CB_OK;
}

/* GETTABLE or GETSET (no dump) of our table on nl, its answer read to the
 * end: 0, -ENOENT when it is missing, or -errno. */
static int get_one(struct mnl_socket *nl, uint32_t *seqp, uint16_t type, const char *set,
                   mnl_cb_t cb, void *data)
{
        char req[MNL_NLMSG_HDRLEN + 256] = {0}; /* zeroed: padding goes too */
        uint32_t seq = ++*seqp;
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(req, type, NFPROTO_NETDEV, NLM_F_ACK, seq);

        if (set) {
                mnl_attr_put_strz(nlh, NFTA_SET_TABLE, NBD_FW_TABLE);
                mnl_attr_put_strz(nlh, NFTA_SET_NAME, set);
        } else {
                mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, NBD_FW_TABLE);
        }
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        return nbd_nfsock_read_answer(nl, answer_buf, sizeof(answer_buf), seq, cb, data);
}

int nbd_fw_table_empty_on(struct mnl_socket *nl, uint32_t *seq, bool *ret)
{
        uint32_t use = UINT32_MAX;
        int r = get_one(nl, seq, NFT_MSG_GETTABLE, NULL, on_table, &use);

        if (r < 0)
                return r;
        if (use == UINT32_MAX)
                return -EPROTO;
        /* The kernel counts the table's chains, sets, objects and flowtables
         * in one number: one thing left is empty only if it is the shared
         * set, which no rule can use without a chain. */
        if (use == 1) {
                r = get_one(nl, seq, NFT_MSG_GETSET, NBD_FW_SET_SAME_BYTE, NULL, NULL);
                if (r < 0 && r != -ENOENT)
                        return r;
                *ret = r == 0;
                return 0;
        }
        *ret = use == 0;
        return 0;
}

static int gen_attr_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **id = data;

        if (mnl_attr_get_type(attr) == NFTA_GEN_ID && mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
                *id = attr;
        return MNL_CB_OK;
}

static int on_gen(const struct nlmsghdr *nlh, void *data)
{
        const struct nlattr *id = NULL;
        uint32_t *gen = data;

        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), gen_attr_cb, &id) < 0 || !id)
                return MNL_CB_ERROR;
        *gen = ntohl(mnl_attr_get_u32(id));
        return MNL_CB_OK;
}

int nbd_fw_read_gen_on(struct mnl_socket *nl, uint32_t *seqp, uint32_t *ret)
{
        char buf[MNL_SOCKET_BUFFER_SIZE];
        uint32_t seq = ++*seqp, portid = mnl_socket_get_portid(nl), gen = 0;
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETGEN, AF_UNSPEC, 0, seq);
        ssize_t n;

        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        /* One NEWGEN comes back (no ack was asked for). */
        n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
        if (n < 0)
                return -errno;
        errno = 0;
        if (mnl_cb_run(buf, (size_t)n, seq, portid, on_gen, &gen) < 0)
                return errno ? -errno : -EIO;
        *ret = gen;
        return 0;
}

int nbd_fw_read_gen(struct nbd_fw *fw, uint32_t *ret)
{
        return nbd_fw_read_gen_on(fw->nl, &fw->seq, ret);
}

int nbd_fw_current_gen(struct nbd_fw *fw, uint32_t *ret)
{
        /* Asked before the drain: a send that takes the monitor out and
         * back between the two is then seen at the next check. */
        bool heard = fw->mon && nbd_fw_monitor_heard(&fw->mon_epoch);
        uint32_t gen;
        int r;

        nbd_fw_monitor_drain(fw);
        /* Without a monitor (a lane's handle), or while it is out of its
         * group for one of our sends (or has been since the last check, or
         * could not join again), nothing would tell the cached generation
         * that another commit came: read it, so a re-read after a dump sees
         * a commit made during it. */
        if (!heard || !fw->gen_known) {
                r = nbd_fw_read_gen(fw, &gen);
                if (r < 0)
                        return r;
                fw->gen = gen;
                fw->gen_known = true;
        }
        *ret = fw->gen;
        return 0;
}

/* A failed read of the table, or of its rules: out of memory says so as
 * every out of memory does, other errors name the errno. */
int nbd_fw_read_failed(struct nbd_err *e, int r, bool rules)
{
        const char *what = rules ? "the rules of table" : "table";

        if (r == -ENOMEM)
                return nbd_err_set(e, r, "out of memory reading %s %s", what, NBD_FW_TABLE);
        return nbd_err_set(e, r, "cannot read %s %s: %s", what, NBD_FW_TABLE,
                           nbd_nfsock_strerror(r));
}

/* How list_owners() reads the owners when the mark does not hold. */
enum list_how {
        LIST_COUNTED, /* a chain dump, and the rules counted */
        LIST_CLAIMED, /* a chain dump; rules as the comments claim */
        LIST_MARKED_ONLY, /* none: -ESTALE */
};

static int list_owners(struct nbd_fw *fw, enum list_how how, nbd_fw_owner_fn fn, void *data,
                       struct nbd_err *e);

int nbd_fw_list(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e)
{
        return list_owners(fw, LIST_COUNTED, fn, data, e);
}

int nbd_fw_list_creators(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e)
{
        return list_owners(fw, LIST_CLAIMED, fn, data, e);
}

int nbd_fw_list_creators_marked(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data,
                                struct nbd_err *e)
{
        return list_owners(fw, LIST_MARKED_ONLY, fn, data, e);
}

static int list_owners(struct nbd_fw *fw, enum list_how how, nbd_fw_owner_fn fn, void *data,
                       struct nbd_err *e)
{
        struct nbd_fw_owners owners = {0};
        const bool count = how == LIST_COUNTED;
        uint32_t gen = 0;
        bool intact = false;
        /* The summary, when the mark holds, says all a listing says. */
        int r = nbd_fw_read_summary(fw, &owners, &gen, &intact);

        if (r == 0 && !intact && how == LIST_MARKED_ONLY) {
                nbd_fw_owners_free(&owners);
                return -ESTALE; /* nothing said: the caller asks otherwise */
        }
        if (r == 0 && !intact)
                r = nbd_fw_read_owners(fw, &owners);
        if (r < 0)
                return nbd_fw_read_failed(e, r, false);
        if (!intact)
                r = nbd_fw_current_gen(fw, &gen);
        if (r < 0) {
                nbd_fw_owners_free(&owners);
                return nbd_err_set(e, r, "cannot read the ruleset generation: %s", strerror(-r));
        }
        /* Count what is really there, not what the comment says, unless
         * nobody has changed anything since our last commit marked it. */
        intact = owners.marked && owners.mark == gen;
        if (!intact && count && (r = nbd_fw_count_rules(fw, &owners)) < 0)
                nbd_fw_read_failed(e, r, true);
        for (struct nbd_fw_owner_state *o = owners.list; o && r == 0; o = o->next) {
                struct nbd_fw_owner_info info = {.rules = intact || !count ? o->rules
                                                                           : o->kernel_rules};
                if (!o->has_base)
                        continue;
                snprintf(info.owner, sizeof(info.owner), "%s", o->owner);
                snprintf(info.ifname, sizeof(info.ifname), "%s", o->ifname);
                snprintf(info.hash, sizeof(info.hash), "%s", o->hash);
                info.uid = o->uid;
                r = fn(&info, data);
                if (r == -ENOMEM)
                        nbd_err_oom(e, "listing the owners");
                else if (r < 0)
                        nbd_err_set(e, r, "listing owner %s: %s", o->owner, strerror(-r));
        }
        nbd_fw_owners_free(&owners);
        return r;
}

/* ---- every rule with its counters and text (FirewallList counters) ---- */

struct rule_rec {
        char *chain;
        unsigned index;
        uint64_t packets, bytes;
        char text[NBD_FW_TEXT_STORED_MAX + 1];
};

struct rule_dump {
        struct rule_rec *v;
        size_t n, cap;
        int err;
};

static void rule_dump_clear(struct rule_dump *d)
{
        for (size_t i = 0; i < d->n; i++)
                free(d->v[i].chain);
        d->n = 0;
}

static void restart_rules(void *data)
{
        struct rule_dump *d = data;

        rule_dump_clear(d);
        d->err = 0;
}

static int rule_comment_cb(const struct nftnl_udata *attr, void *data)
{
        struct rule_rec *rec = data;

        if (nftnl_udata_type(attr) == NFTNL_UDATA_RULE_COMMENT && nftnl_udata_len(attr) > 0)
                snprintf(rec->text, sizeof(rec->text), "%.*s", (int)nftnl_udata_len(attr),
                         (const char *)nftnl_udata_get(attr));
        return MNL_CB_OK;
}

/* The counter's figures; a jump says where it goes when the rule has no
 * text of its own (the compiler gives its jumps none). */
static int rule_expr_cb(struct nftnl_expr *e, void *data)
{
        struct rule_rec *rec = data;
        const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);

        if (name && strcmp(name, "counter") == 0) {
                rec->packets = nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_PACKETS);
                rec->bytes = nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_BYTES);
        } else if (name && strcmp(name, "immediate") == 0 && !rec->text[0] &&
                   nftnl_expr_is_set(e, NFTNL_EXPR_IMM_CHAIN)) {
                const char *to = nftnl_expr_get_str(e, NFTNL_EXPR_IMM_CHAIN);
                const char *group = to ? strrchr(to, '/') : NULL;
                snprintf(rec->text, sizeof(rec->text), "jump %s", group ? group + 1 : to);
        }
        return MNL_CB_OK;
}

static int on_rule_full(const struct nlmsghdr *nlh, void *data)
{
        struct rule_dump *d = data;
        struct nftnl_rule *nr = nftnl_rule_alloc();
        struct rule_rec rec = {0};
        const char *chain;
        const void *ud;
        uint32_t len = 0;

        /* A rule left out would be a rule whose counters are not shown:
         * out of memory fails the listing. */
        if (!nr) {
                d->err = -ENOMEM;
                goto out;
        }
        errno = 0;
        if (nftnl_rule_nlmsg_parse(nlh, nr) < 0) {
                if (errno == ENOMEM)
                        d->err = -ENOMEM;
                goto out;
        }
        chain = nftnl_rule_get_str(nr, NFTNL_RULE_CHAIN);
        if (!chain || !strchr(chain, '/'))
                goto out; /* not one of ours */
        ud = nftnl_rule_get_data(nr, NFTNL_RULE_USERDATA, &len);
        if (ud)
                nbd_fw_udata_parse(ud, len, rule_comment_cb, &rec);
        nftnl_expr_foreach(nr, rule_expr_cb, &rec);
        /* The kernel dumps a chain's rules together and in order. */
        rec.index = d->n && strcmp(d->v[d->n - 1].chain, chain) == 0 ? d->v[d->n - 1].index + 1 : 0;
        if (d->n == d->cap) {
                size_t cap = d->cap ? 2 * d->cap : 64;
                struct rule_rec *grown = realloc(d->v, cap * sizeof(*grown));
                if (!grown) {
                        d->err = -ENOMEM;
                        goto out;
                }
                d->v = grown;
                d->cap = cap;
        }
        rec.chain = strdup(chain);
        if (!rec.chain) {
                d->err = -ENOMEM;
                goto out;
        }
        d->v[d->n++] = rec;
out:
        if (nr)
                nftnl_rule_free(nr);
        return MNL_CB_OK;
}

/* A chain's name as OWNER/DIR[/GROUP] into info; false when it is not. */
static bool split_chain(const char *chain, struct nbd_fw_rule_info *info)
{
        const char *s1 = strchr(chain, '/'), *dir, *s2;
        size_t dlen;

        if (!s1 || (size_t)(s1 - chain) > NBD_FW_OWNER_MAX)
                return false;
        dir = s1 + 1;
        s2 = strchr(dir, '/');
        dlen = s2 ? (size_t)(s2 - dir) : strlen(dir);
        if (dlen == 4 && strncmp(dir, "from", 4) == 0)
                info->dir = NBD_FW_DIR_FROM;
        else if (dlen == 2 && strncmp(dir, "to", 2) == 0)
                info->dir = NBD_FW_DIR_TO;
        else
                return false;
        if (s2 && strlen(s2 + 1) > NBD_FW_GROUP_MAX)
                return false;
        memcpy(info->owner, chain, (size_t)(s1 - chain));
        info->owner[s1 - chain] = '\0';
        snprintf(info->group, sizeof(info->group), "%s", s2 ? s2 + 1 : "");
        return true;
}

/* One chain's rules, added to d (nbd_nfsock_dump_tries: a try forgets
 * what an interrupted one added, from mark on). */
struct chain_rules {
        struct nbd_fw *fw;
        const char *chain;
        struct rule_dump *d;
        size_t mark;
};

static int chain_rules_once(void *data)
{
        struct chain_rules *c = data;

        while (c->d->n > c->mark)
                free(c->d->v[--c->d->n].chain);
        c->d->err = 0;
        return dump_chain_rules(c->fw, c->chain, on_rule_full, c->d);
}

/* The rules of uid's owners, chain by chain, into d. */
static int rules_of_uid(struct nbd_fw *fw, uid_t uid, struct rule_dump *d)
{
        struct nbd_fw_owners owners = {0};
        int r = nbd_fw_read_owners(fw, &owners);

        for (struct nbd_fw_owner_state *o = owners.list; r == 0 && o; o = o->next)
                for (size_t i = 0; r == 0 && o->uid == uid && i < o->n_chains; i++) {
                        struct chain_rules c = {fw, o->chains[i], d, d->n};
                        r = nbd_nfsock_dump_tries(chain_rules_once, &c);
                        if (r == 0)
                                r = d->err;
                }
        nbd_fw_owners_free(&owners);
        return r;
}

int nbd_fw_list_rules(struct nbd_fw *fw, const uid_t *only, nbd_fw_rule_fn fn, void *data,
                      struct nbd_err *e)
{
        struct rule_dump d = {0};
        int r = only ? rules_of_uid(fw, *only, &d)
                     : dump(fw, NFT_MSG_GETRULE, on_rule_full, restart_rules, &d);

        if (r == 0)
                r = d.err;
        if (r < 0)
                nbd_fw_read_failed(e, r, true);
        for (size_t i = 0; r == 0 && i < d.n; i++) {
                struct nbd_fw_rule_info info = {
                        .index = d.v[i].index,
                        .packets = d.v[i].packets,
                        .bytes = d.v[i].bytes,
                        .text = d.v[i].text,
                };
                if (!split_chain(d.v[i].chain, &info))
                        continue;
                r = fn(&info, data);
                if (r == -ENOMEM)
                        nbd_err_oom(e, "listing the rules");
                else if (r < 0)
                        nbd_err_set(e, r, "listing the rules of owner %s: %s", info.owner,
                                    strerror(-r));
        }
        rule_dump_clear(&d);
        free(d.v);
        return r;
}
