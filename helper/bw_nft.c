// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bandwidth's policer on what enters an interface, as an nftables chain;
 * see bw_nft.h. */
#include "bw_nft.h"

#include <arpa/inet.h> /* first: <linux/netfilter.h> defers to its in.h */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <limits.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bandwidth.h"
#include "fw_compile.h" /* NBD_FW_UDATA_CHAIN_COMMENT: nft shows our comment */
#include "fw_summary.h"
#include "lane.h" /* nbd_test_hold_point */
#include "log.h"
#include "nfsock.h"
#include "netlink.h"
#include "stats.h"

NBD_LOG_CATEGORY(bandwidth);

#define PROBE_TABLE "netbroker_bw_probe"
#define MSG_ROOM 1024 /* one message of ours fits, with room to spare */

/* The socket is a kept one (nfsock.h), taken for each operation: the
 * loop's, or on a copy for the firewall's lane (nbd_bw_nft_lane_copy) the
 * lane's. */
struct nbd_bw_nft {
        struct mnl_socket *nl; /* during an operation only */
        uint32_t seq;
        char missing[160]; /* "" when the limit expression works */
        bool no_socket; /* no nfnetlink at all: no chain of ours can be there */
        bool lane; /* a copy for the firewall's lane: its socket */
};

/* ---- messages: a batch in a buffer that grows ---- */

struct msgs {
        char *buf;
        size_t len, cap;
        uint32_t seq, first; /* next sequence number; the first of the batch */
        bool oom;
};

/* Room for one more message at the end; NULL (and m->oom) when out of
 * memory. */
static char *room(struct msgs *m)
{
        if (m->oom)
                return NULL;
        if (m->cap - m->len < MSG_ROOM) {
                size_t cap = m->cap ? 2 * m->cap : 8 * MSG_ROOM;
                char *grown = realloc(m->buf, cap);
                if (!grown) {
                        m->oom = true;
                        return NULL;
                }
                memset(grown + m->cap, 0, cap - m->cap);
                m->buf = grown;
                m->cap = cap;
        }
        return m->buf + m->len;
}

static void added(struct msgs *m, const struct nlmsghdr *nlh)
{
        m->len += MNL_ALIGN(nlh->nlmsg_len);
        m->seq++;
}

static void batch_begin(struct msgs *m, uint32_t seq)
{
        char *p = room(m);

        m->seq = seq;
        if (p)
                added(m, nftnl_batch_begin(p, m->seq));
        m->first = m->seq;
}

static void batch_end(struct msgs *m)
{
        char *p = room(m);

        if (p)
                added(m, nftnl_batch_end(p, m->seq));
}

/* The firewall's generation mark, read before a commit: carried across
 * it when it holds (fw_summary.h). A failed read leaves it to go, as any
 * commit not the firewall's makes it. */
struct mark_carry {
        bool holds;
        uint32_t gen;
};

static void mark_read(struct nbd_bw_nft *n, struct mark_carry *mc)
{
        if (nbd_fw_mark_holds(n->nl, &n->seq, &mc->holds, &mc->gen) < 0)
                mc->holds = false;
}

static void put_mark_carry(struct msgs *m, const struct mark_carry *mc)
{
        _Static_assert(NBD_FW_MARK_CARRY_ROOM <= MSG_ROOM, "a carry message fits in MSG_ROOM");

        for (unsigned i = 0; mc->holds && i < NBD_FW_MARK_CARRY_MSGS; i++) {
                char *p = room(m);
                struct nlmsghdr *nlh = p ? nbd_fw_mark_carry_msg(p, i, mc->gen, m->seq) : NULL;
                if (!nlh) {
                        m->oom = true;
                        return;
                }
                added(m, nlh);
        }
}

static int send_batch(struct mnl_socket *nl, const struct msgs *m, uint32_t *ret_seq);

/* End m, with the mark carried when mc says it holds, and send it: 0 or
 * -errno (-ENOMEM: m->oom). Refused with the carry (the mark's chain gone
 * meanwhile, with the guests' last owner; or the batch's own error), it is
 * sent again without: the kernel took none of it. */
static int end_and_send(struct nbd_bw_nft *n, struct msgs *m, const struct mark_carry *mc,
                        uint32_t *ret_seq)
{
        size_t at = m->len;
        uint32_t seq_at = m->seq;
        int r;

        put_mark_carry(m, mc);
        batch_end(m);
        n->seq = m->seq;
        if (m->oom)
                return -ENOMEM;
        if (mc->holds)
                nbd_test_hold_point("MARK_CARRY"); /* tests: a commit between */
        r = send_batch(n->nl, m, ret_seq);
        if (r < 0 && mc->holds) {
                m->len = at;
                m->seq = seq_at;
                batch_end(m);
                r = send_batch(n->nl, m, ret_seq);
        }
        return r;
}

static void put_table(struct msgs *m, uint16_t type, const char *name, uint16_t flags)
{
        struct nftnl_table *t = nftnl_table_alloc();
        char *p = room(m);
        struct nlmsghdr *nlh;

        if (!t || !p || nftnl_table_set_str(t, NFTNL_TABLE_NAME, name) < 0) {
                m->oom = true;
        } else {
                nlh = nftnl_table_nlmsg_build_hdr(p, type, NFPROTO_NETDEV, flags | NLM_F_ACK,
                                                  m->seq);
                nftnl_table_nlmsg_build_payload(nlh, t);
                added(m, nlh);
        }
        if (t)
                nftnl_table_free(t);
}

static void put_chain(struct msgs *m, uint16_t type, struct nftnl_chain *c, uint16_t flags)
{
        char *p = room(m);
        struct nlmsghdr *nlh;

        if (!c || !p) {
                m->oom = true;
        } else {
                nlh = nftnl_chain_nlmsg_build_hdr(p, type, NFPROTO_NETDEV, flags | NLM_F_ACK,
                                                  m->seq);
                nftnl_chain_nlmsg_build_payload(nlh, c);
                added(m, nlh);
        }
        if (c)
                nftnl_chain_free(c);
}

static void put_rule(struct msgs *m, struct nftnl_rule *r)
{
        char *p = room(m);
        struct nlmsghdr *nlh;

        if (!r || !p) {
                m->oom = true;
        } else {
                nlh = nftnl_rule_nlmsg_build_hdr(p, NFT_MSG_NEWRULE, NFPROTO_NETDEV,
                                                 NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, m->seq);
                nftnl_rule_nlmsg_build_payload(nlh, r);
                added(m, nlh);
        }
        if (r)
                nftnl_rule_free(r);
}

/* ---- objects ---- */

static struct nftnl_chain *chain_named(const char *table, const char *name)
{
        struct nftnl_chain *c = nftnl_chain_alloc();

        if (c && (nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table) < 0 ||
                  nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name) < 0)) {
                nftnl_chain_free(c);
                c = NULL;
        }
        return c;
}

static int set_comment(struct nftnl_chain *c, const char *text)
{
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        int r = -ENOMEM;

        if (u && nftnl_udata_put_strz(u, NBD_FW_UDATA_CHAIN_COMMENT, text) &&
            nftnl_chain_set_data(c, NFTNL_CHAIN_USERDATA, nftnl_udata_buf_data(u),
                                 nftnl_udata_buf_len(u)) == 0)
                r = 0;
        if (u)
                nftnl_udata_buf_free(u);
        return r;
}

/* The base chain: ifname's ingress, after the firewall's chains. */
static struct nftnl_chain *base_chain(const char *name, const char *ifname)
{
        struct nftnl_chain *c = chain_named(NBD_BW_NFT_TABLE, name);
        char comment[64];

        if (!c)
                return NULL;
        snprintf(comment, sizeof(comment), "netbroker bandwidth %s", ifname);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_NETDEV_INGRESS);
        nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, NBD_BW_NFT_PRIO);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
        if (nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter") < 0 ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_DEV, ifname) < 0 || set_comment(c, comment) < 0) {
                nftnl_chain_free(c);
                return NULL;
        }
        return c;
}

/* `limit rate over RATE bytes/second burst BURST bytes drop`: limit
 * (bytes, inverted) then an immediate drop verdict, as nft makes it. */
static struct nftnl_rule *police_rule(const char *table, const char *chain,
                                      const struct nbd_bw_police *p)
{
        struct nftnl_rule *r = nftnl_rule_alloc();
        struct nftnl_expr *lim = nftnl_expr_alloc("limit"), *imm = nftnl_expr_alloc("immediate");

        if (!r || !lim || !imm || nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table) < 0 ||
            nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain) < 0)
                goto fail;
        nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_NETDEV);
        nftnl_expr_set_u64(lim, NFTNL_EXPR_LIMIT_RATE, p->rate);
        nftnl_expr_set_u64(lim, NFTNL_EXPR_LIMIT_UNIT, 1); /* per second */
        nftnl_expr_set_u32(lim, NFTNL_EXPR_LIMIT_BURST, p->burst);
        nftnl_expr_set_u32(lim, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKT_BYTES);
        nftnl_expr_set_u32(lim, NFTNL_EXPR_LIMIT_FLAGS, NFT_LIMIT_F_INV);
        nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_VERDICT, NF_DROP);
        nftnl_rule_add_expr(r, lim);
        nftnl_rule_add_expr(r, imm);
        return r;
fail:
        if (lim)
                nftnl_expr_free(lim);
        if (imm)
                nftnl_expr_free(imm);
        if (r)
                nftnl_rule_free(r);
        return NULL;
}

static void chain_name(int ifindex, char name[IFNAMSIZ])
{
        snprintf(name, IFNAMSIZ, NBD_BW_NFT_PREFIX "%u", (unsigned)ifindex);
}

void nbd_bw_nft_rate(const struct nbd_bw_police *p, struct nbd_bw_rate *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (!p->rate)
                return;
        ret->average = (uint32_t)(p->rate / 1024);
        ret->burst = (uint32_t)((p->rate + p->burst + 1023) / 1024);
}

/* ---- the kernel ---- */

/* The loop's kept socket (nfsock.h: a socket closed after each
 * operation made the loop wait for an RCU grace period). */
static int open_socket(struct mnl_socket **ret)
{
        return nbd_nfsock_get(ret);
}

int nbd_bw_nft_take_acks(struct nbd_bw_nft_acks *a, const void *buf, size_t len)
{
        int left = len > INT_MAX ? INT_MAX : (int)len;

        for (const struct nlmsghdr *h = buf; mnl_nlmsg_ok(h, left); h = mnl_nlmsg_next(h, &left)) {
                const struct nlmsgerr *ack = mnl_nlmsg_get_payload(h);
                if (h->nlmsg_type != NLMSG_ERROR || !mnl_nlmsg_portid_ok(h, a->portid) ||
                    h->nlmsg_len < mnl_nlmsg_size(sizeof(*ack)))
                        continue;
                /* A batch refused whole is one error, for its begin. */
                if (h->nlmsg_seq == a->first - 1 && ack->error)
                        return ack->error < 0 ? ack->error : -EPROTO;
                if (h->nlmsg_seq < a->first || h->nlmsg_seq >= a->end)
                        continue;
                a->got++;
                if (ack->error && !a->err) {
                        a->err = ack->error < 0 ? ack->error : -EPROTO;
                        a->err_seq = h->nlmsg_seq;
                }
        }
        return 0;
}

/* Send a batch and read the answer to each of its messages (every one
 * asks for an ack): 0, or the first error the kernel sent (-errno) with
 * the sequence number of its message in *ret_seq. An answer that is not
 * for this socket or this batch is skipped; one that is missing is an
 * error (-ENOBUFS when the kernel said it dropped some, else -EPROTO):
 * it may have been the error. The kernel handles the whole batch inside
 * sendmsg(), so every answer is queued when it returns. */
static int send_batch(struct mnl_socket *nl, const struct msgs *m, uint32_t *ret_seq)
{
        /* One a thread: the loop (a gone interface's prune) and the
         * firewall's lane (a limit's policer) both send batches. */
        static _Thread_local char buf[16384];
        struct nbd_bw_nft_acks a = {
                .portid = mnl_socket_get_portid(nl), .first = m->first, .end = m->seq - 1};
        unsigned expected = a.end - a.first; /* without begin and end */
        int r = 0;

        if (mnl_socket_sendto(nl, m->buf, m->len) < 0)
                return -errno;
        nbd_netlink_sent_nf(expected + 2);
        while (r == 0 && a.got < expected) {
                ssize_t n = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == ENOBUFS)
                        r = -ENOBUFS;
                else if (n <= 0)
                        r = -EPROTO; /* nothing more: an answer is missing */
                else
                        r = nbd_bw_nft_take_acks(&a, buf, (size_t)n);
        }
        if (r == 0 && a.err && ret_seq)
                *ret_seq = a.err_seq;
        return r < 0 ? r : a.err;
}

/* ---- reading: a dump of the table's chains, or of one chain's rules ---- */

struct chain_seen {
        int ifindex; /* from the name nbbwN (or an older helper's nbifbN) */
        bool old; /* nbifbN: an older helper's fwd to an IFB */
        char dev[IFNAMSIZ];
        bool ingress_at_prio; /* our hook and priority */
};

struct chain_list {
        struct chain_seen *v;
        size_t n;
        int err;
};

static bool parse_prefixed(const char *name, const char *prefix, int *ret)
{
        size_t plen = strlen(prefix);
        unsigned long v;
        char *end;

        if (!name || strncmp(name, prefix, plen) != 0 || !name[plen])
                return false;
        errno = 0;
        v = strtoul(name + plen, &end, 10);
        if (*end || errno || v == 0 || v > INT_MAX)
                return false;
        *ret = (int)v;
        return true;
}

static bool parse_name(const char *name, int *ret, bool *ret_old)
{
        *ret_old = parse_prefixed(name, NBD_BW_IFB_PREFIX, ret);
        return *ret_old || parse_prefixed(name, NBD_BW_NFT_PREFIX, ret);
}

static void name_of(const struct chain_seen *s, char name[IFNAMSIZ])
{
        snprintf(name, IFNAMSIZ, "%s%u", s->old ? NBD_BW_IFB_PREFIX : NBD_BW_NFT_PREFIX,
                 (unsigned)s->ifindex);
}

static int on_chain(const struct nlmsghdr *nlh, void *data)
{
        struct chain_list *l = data;
        struct nftnl_chain *c = nftnl_chain_alloc();
        struct chain_seen s = {0}, *grown;
        const char *dev;

        if (!c) {
                l->err = -ENOMEM;
                goto out;
        }
        errno = 0;
        if (nftnl_chain_nlmsg_parse(nlh, c) < 0) {
                /* A chain of ours left out would be left behind. */
                l->err = errno == ENOMEM ? -ENOMEM : -EIO;
                goto out;
        }
        if (!parse_name(nftnl_chain_get_str(c, NFTNL_CHAIN_NAME), &s.ifindex, &s.old))
                goto out; /* not one of ours */
        dev = nftnl_chain_is_set(c, NFTNL_CHAIN_DEV) ? nftnl_chain_get_str(c, NFTNL_CHAIN_DEV) : "";
        snprintf(s.dev, sizeof(s.dev), "%s", dev ? dev : "");
        s.ingress_at_prio = nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM) &&
                            nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM) == NF_NETDEV_INGRESS &&
                            nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO) == NBD_BW_NFT_PRIO;
        /* Sent twice: the dump was resumed after a commit elsewhere moved
         * the kernel's count (fw_table.c's on_chain): read it again. */
        for (size_t i = 0; i < l->n; i++)
                if (l->v[i].ifindex == s.ifindex && l->v[i].old == s.old) {
                        nftnl_chain_free(c);
                        errno = EINTR;
                        return MNL_CB_ERROR;
                }
        grown = realloc(l->v, (l->n + 1) * sizeof(*grown));
        if (!grown) {
                l->err = -ENOMEM;
                goto out;
        }
        l->v = grown;
        l->v[l->n++] = s;
out:
        if (c)
                nftnl_chain_free(c);
        return MNL_CB_OK;
}

/* One rule of ours: a policer (limit, drop) or an older helper's `fwd to`
 * (immediate data, fwd); anything else is `other`. */
struct rule_seen {
        struct nbd_bw_police police;
        uint32_t imm;
        bool has_limit, has_drop, has_imm, has_fwd, other;
};

static void on_limit(struct nftnl_expr *e, struct rule_seen *f)
{
        if (f->has_limit || nftnl_expr_get_u32(e, NFTNL_EXPR_LIMIT_TYPE) != NFT_LIMIT_PKT_BYTES ||
            nftnl_expr_get_u32(e, NFTNL_EXPR_LIMIT_FLAGS) != NFT_LIMIT_F_INV ||
            nftnl_expr_get_u64(e, NFTNL_EXPR_LIMIT_UNIT) != 1) {
                f->other = true;
                return;
        }
        f->police.rate = nftnl_expr_get_u64(e, NFTNL_EXPR_LIMIT_RATE);
        f->police.burst = nftnl_expr_get_u32(e, NFTNL_EXPR_LIMIT_BURST);
        f->has_limit = true;
}

static int on_expr(struct nftnl_expr *e, void *data)
{
        struct rule_seen *f = data;
        const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
        uint32_t len = 0;
        const void *v;

        if (name && strcmp(name, "limit") == 0) {
                on_limit(e, f);
        } else if (name && strcmp(name, "immediate") == 0 && f->has_limit && !f->has_drop &&
                   nftnl_expr_is_set(e, NFTNL_EXPR_IMM_VERDICT) &&
                   nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_VERDICT) == NF_DROP) {
                f->has_drop = true;
        } else if (name && strcmp(name, "immediate") == 0 && !f->has_imm &&
                   (v = nftnl_expr_get(e, NFTNL_EXPR_IMM_DATA, &len)) && len == sizeof(uint32_t)) {
                memcpy(&f->imm, v, sizeof(f->imm));
                f->has_imm = true;
        } else if (name && strcmp(name, "fwd") == 0 && f->has_imm) {
                f->has_fwd = true;
        } else {
                f->other = true;
        }
        return 0;
}

struct rule_list {
        unsigned n;
        struct nbd_bw_police police; /* the only rule's policer, rate 0 if none */
        int fwd; /* the only rule's fwd target, 0 if it is no fwd */
        int err;
};

static int on_rule(const struct nlmsghdr *nlh, void *data)
{
        struct rule_list *l = data;
        struct nftnl_rule *r = nftnl_rule_alloc();
        struct rule_seen f = {0};

        if (!r) {
                l->err = -ENOMEM;
                goto out;
        }
        errno = 0;
        if (nftnl_rule_nlmsg_parse(nlh, r) < 0) {
                l->err = errno == ENOMEM ? -ENOMEM : -EIO;
                goto out;
        }
        nftnl_expr_foreach(r, on_expr, &f);
        memset(&l->police, 0, sizeof(l->police));
        if (f.has_limit && f.has_drop && !f.has_imm && !f.other)
                l->police = f.police;
        l->fwd = f.has_fwd && !f.has_limit && !f.other ? (int)f.imm : 0;
        l->n++;
out:
        if (r)
                nftnl_rule_free(r);
        return MNL_CB_OK;
}

/* A dump of the table's chains (chain and one NULL), one chain (one: a
 * get, not a dump), or one chain's rules (chain). A table or chain that is
 * not there is an empty answer; -EINTR an interrupted dump (read to its
 * end: ask again). */

static int dump(struct mnl_socket *nl, uint32_t seq, const char *chain, const char *one,
                mnl_cb_t cb, void *data)
{
        /* Zeroed: the message builders leave attribute padding as they
         * find it, and it is sent (valgrind: uninitialised bytes). */
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh;
        int r;

        memset(buf, 0, sizeof(buf));

        if (chain) {
                struct nftnl_rule *ru = nftnl_rule_alloc();
                if (!ru || nftnl_rule_set_str(ru, NFTNL_RULE_TABLE, NBD_BW_NFT_TABLE) < 0 ||
                    nftnl_rule_set_str(ru, NFTNL_RULE_CHAIN, chain) < 0) {
                        if (ru)
                                nftnl_rule_free(ru);
                        return -ENOMEM;
                }
                nlh = nftnl_rule_nlmsg_build_hdr(buf, NFT_MSG_GETRULE, NFPROTO_NETDEV, NLM_F_DUMP,
                                                 seq);
                nftnl_rule_nlmsg_build_payload(nlh, ru);
                nftnl_rule_free(ru);
        } else {
                struct nftnl_chain *c = nftnl_chain_alloc();
                if (!c || nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NBD_BW_NFT_TABLE) < 0 ||
                    (one && nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, one) < 0)) {
                        if (c)
                                nftnl_chain_free(c);
                        return -ENOMEM;
                }
                nlh = nftnl_chain_nlmsg_build_hdr(buf, NFT_MSG_GETCHAIN, NFPROTO_NETDEV,
                                                  one ? NLM_F_ACK : NLM_F_DUMP, seq);
                nftnl_chain_nlmsg_build_payload(nlh, c);
                nftnl_chain_free(c);
        }
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        /* A get answers with the chain and an ack, or an error. Read into
         * room for the largest datagram the shared socket may bring, to
         * its end even when interrupted: one buffer a thread, for the loop
         * (a gone interface's prune) and the firewall's lane (a limit's
         * policer) both read. Shared, the loop's answer overwrote the
         * lane's before it was parsed, and the lane waited for an answer
         * it had been given: the helper's stress-load test hung. */
        static _Thread_local char in[NBD_NFSOCK_DUMP_BUF];
        r = nbd_nfsock_read_answer(nl, in, sizeof(in), seq, cb, data);
        return r == -ENOENT ? 0 : r;
}

/* All our chains: a dump of the table. */
static int table_use_cb(const struct nlattr *attr, void *data)
{
        if (mnl_attr_get_type(attr) == NFTA_TABLE_USE && mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
                *(uint32_t *)data = ntohl(mnl_attr_get_u32(attr));
        return MNL_CB_OK;
}

static int on_table(const struct nlmsghdr *nlh, void *data)
{
        mnl_attr_parse(nlh, sizeof(struct nfgenmsg), table_use_cb, data);
        return MNL_CB_OK;
}

/* How many chains our table has (0 when it is not there), from one
 * GETTABLE: 0 or -errno. */
static int table_chains(struct mnl_socket *nl, uint32_t seq, uint32_t *ret)
{
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nftnl_table *t = nftnl_table_alloc();
        uint32_t portid = mnl_socket_get_portid(nl), use = 0;
        struct nlmsghdr *nlh;
        int r;

        if (!t || nftnl_table_set_str(t, NFTNL_TABLE_NAME, NBD_BW_NFT_TABLE) < 0) {
                if (t)
                        nftnl_table_free(t);
                return -ENOMEM;
        }
        memset(buf, 0, sizeof(buf)); /* see dump() */
        nlh = nftnl_table_nlmsg_build_hdr(buf, NFT_MSG_GETTABLE, NFPROTO_NETDEV, NLM_F_ACK, seq);
        nftnl_table_nlmsg_build_payload(nlh, t);
        nftnl_table_free(t);
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        do {
                ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                r = mnl_cb_run(buf, (size_t)n, seq, portid, on_table, &use);
        } while (r > MNL_CB_STOP);
        if (r < 0 && errno != ENOENT)
                return -errno;
        *ret = r < 0 ? 0 : use;
        return 0;
}

/* A dump of the table's chains (read_chains) or of one chain's rules
 * (rules_of), each try from nothing (nbd_nfsock_dump_tries). */
struct chains_read {
        struct mnl_socket *nl;
        uint32_t *seq;
        struct chain_list l;
};

static int chains_once(void *data)
{
        struct chains_read *d = data;

        free(d->l.v);
        d->l = (struct chain_list){0};
        return dump(d->nl, (*d->seq)++, NULL, NULL, on_chain, &d->l);
}

struct rules_read {
        struct mnl_socket *nl;
        uint32_t *seq;
        const char *chain;
        struct rule_list rules;
};

static int rules_once(void *data)
{
        struct rules_read *d = data;

        d->rules = (struct rule_list){0};
        return dump(d->nl, (*d->seq)++, d->chain, NULL, on_rule, &d->rules);
}

/* Every chain of our table. A chain dump walks every chain of the netdev
 * family, the firewall's tens of thousands included, again for each
 * message (3 s of the helper's start-up with 4,096 guests' filters): asked
 * first whether the table has any (loop-free reads, issue 14). */
static int read_chains(struct mnl_socket *nl, uint32_t *seq, struct chain_list *ret)
{
        struct chains_read d = {nl, seq, {0}};
        uint32_t use = 0;
        int r = table_chains(nl, (*seq)++, &use);

        if (r == 0 && use == 0) {
                *ret = d.l;
                return 0;
        }
        nbd_stat_inc_shared(NBD_STAT_NFT_CHAIN_DUMPS);
        /* Any commit in the namespace (a firewall lane's, while this runs
         * on the loop) may interrupt a dump: it is read again. */
        r = nbd_nfsock_dump_tries(chains_once, &d);
        if (r == 0 && d.l.err)
                r = d.l.err;
        if (r < 0) {
                free(d.l.v);
                return r;
        }
        *ret = d.l;
        return 0;
}

/* The chains of ifindex: ours (nbbwN) and an older helper's (nbifbN),
 * each read by name (a GET), so the cost does not grow with the table. */
static int read_ifindex_chains(struct mnl_socket *nl, uint32_t *seq, int ifindex,
                               struct chain_list *ret)
{
        const struct chain_seen names[2] = {{.ifindex = ifindex},
                                            {.ifindex = ifindex, .old = true}};
        struct chain_list l = {0};
        char name[IFNAMSIZ];
        int r = 0;

        for (size_t i = 0; r == 0 && i < 2; i++) {
                name_of(&names[i], name);
                r = dump(nl, (*seq)++, NULL, name, on_chain, &l);
                if (r == 0 && l.err)
                        r = l.err;
        }
        if (r < 0) {
                free(l.v);
                return r;
        }
        *ret = l;
        return 0;
}

/* The rules of chain s, read when it hooks ifname's ingress at our
 * priority (else none: it polices nothing of ifname's). */
static int rules_of(struct mnl_socket *nl, uint32_t *seq, const struct chain_seen *s,
                    const char *ifname, struct rule_list *ret)
{
        struct rule_list rules = {0};
        char name[IFNAMSIZ];
        int r = 0;

        if (s->ingress_at_prio && strcmp(s->dev, ifname) == 0) {
                struct rules_read d = {nl, seq, name, {0}};
                name_of(s, name);
                r = nbd_nfsock_dump_tries(rules_once, &d);
                if (r == 0 && d.rules.err)
                        r = d.rules.err;
                rules = d.rules;
        }
        if (r == 0)
                *ret = rules;
        return r;
}

/* What the chains of ifindex do on ifname (nbd_bw_nft_peek). */
static int read_ifindex(struct mnl_socket *nl, uint32_t *seq, int ifindex, const char *ifname,
                        struct nbd_bw_police *ret_police, int *ret_fwd)
{
        struct chain_list l = {0};
        struct nbd_bw_police police = {0};
        int fwd = 0, r = read_ifindex_chains(nl, seq, ifindex, &l);

        for (size_t i = 0; r == 0 && i < l.n; i++) {
                struct rule_list rules = {0};
                r = rules_of(nl, seq, &l.v[i], ifname, &rules);
                if (r < 0 || rules.n != 1)
                        continue;
                if (l.v[i].old)
                        fwd = rules.fwd;
                else
                        police = rules.police;
        }
        free(l.v);
        if (r < 0)
                return r;
        *ret_police = police;
        *ret_fwd = fwd;
        return 0;
}

/* ---- the probe ---- */

/* A batch that makes a table, a regular chain and a policer in it, then
 * deletes a table that is not there: the kernel aborts it whole, and
 * answers for the rule on its own. -ENOMEM, or 0 with n->missing set when
 * the limit expression cannot be used. */
static int probe(struct nbd_bw_nft *n)
{
        const struct nbd_bw_police p = {.rate = 1 << 20, .burst = 1 << 16};
        struct msgs m = {0};
        uint32_t err_seq = 0, rule_seq;
        int r;

        batch_begin(&m, n->seq);
        put_table(&m, NFT_MSG_NEWTABLE, PROBE_TABLE, NLM_F_CREATE);
        put_chain(&m, NFT_MSG_NEWCHAIN, chain_named(PROBE_TABLE, "probe"), NLM_F_CREATE);
        rule_seq = m.seq;
        put_rule(&m, police_rule(PROBE_TABLE, "probe", &p));
        put_table(&m, NFT_MSG_DELTABLE, PROBE_TABLE "_absent", 0);
        batch_end(&m);
        n->seq = m.seq;
        if (m.oom) {
                free(m.buf);
                return -ENOMEM;
        }
        r = send_batch(n->nl, &m, &err_seq);
        free(m.buf);
        if (r == -ENOENT && err_seq == rule_seq + 1)
                return 0; /* only the deliberate error: limit is there */
        if (r == 0) {
                /* Nothing failed, so it was committed: take it away. */
                struct msgs d = {0};
                batch_begin(&d, n->seq);
                put_table(&d, NFT_MSG_DELTABLE, PROBE_TABLE, 0);
                batch_end(&d);
                n->seq = d.seq;
                if (!d.oom)
                        send_batch(n->nl, &d, NULL);
                free(d.buf);
                return 0;
        }
        snprintf(n->missing, sizeof(n->missing), "%s (%s)",
                 err_seq == rule_seq ? "the kernel has no nftables limit expression in bytes"
                                     : "nftables refused a probe of its limit expression",
                 strerror(-r));
        return 0;
}

int nbd_bw_nft_open(struct nbd_bw_nft **ret)
{
        struct nbd_bw_nft *n = calloc(1, sizeof(*n));
        int r;

        if (!n)
                return -ENOMEM;
        n->seq = (uint32_t)time(NULL);
        r = open_socket(&n->nl);
        if (r == 0)
                r = probe(n) < 0 ? -ENOMEM : 0;
        else
                snprintf(n->missing, sizeof(n->missing), "no nfnetlink socket (%s)", strerror(-r));
        n->no_socket = r < 0 && r != -ENOMEM;
        n->nl = NULL; /* the loop's, kept */
        if (r == -ENOMEM) {
                free(n);
                return r;
        }
        *ret = n;
        return 0;
}

void nbd_bw_nft_close(struct nbd_bw_nft *n)
{
        free(n);
}

int nbd_bw_nft_lane_copy(const struct nbd_bw_nft *n, struct nbd_bw_nft **ret)
{
        struct nbd_bw_nft *c = malloc(sizeof(*c));

        if (!c)
                return -ENOMEM;
        *c = *n;
        c->nl = NULL;
        c->lane = true;
        *ret = c;
        return 0;
}

/* The socket for one operation. */
static int use(struct nbd_bw_nft *n, struct nbd_err *e)
{
        int r = n->lane ? nbd_nfsock_lane_get(&n->nl) : open_socket(&n->nl);

        if (r < 0)
                nbd_err_set(e, r, "cannot open an nfnetlink socket: %s", strerror(-r));
        return r;
}

static void done(struct nbd_bw_nft *n)
{
        n->nl = NULL; /* kept (nfsock.h) */
}

const char *nbd_bw_nft_missing(const struct nbd_bw_nft *n)
{
        return n->missing[0] ? n->missing : NULL;
}

/* ---- changing ---- */

/* The chain of ifindex that is in place: ours (not an older helper's),
 * hooked on ifname, with one rule that polices at p; then *ret_in_place.
 * The chains of ifindex are in *ret (to replace them). */
static int in_place(struct nbd_bw_nft *n, int ifindex, const char *ifname,
                    const struct nbd_bw_police *p, struct chain_list *ret, bool *ret_in_place)
{
        struct chain_list l = {0};
        bool ok = false;
        unsigned count = 0;
        int r = read_ifindex_chains(n->nl, &n->seq, ifindex, &l);

        for (size_t i = 0; r == 0 && i < l.n; i++) {
                struct rule_list rules = {0};
                if (l.v[i].ifindex != ifindex)
                        continue;
                count++;
                if (l.v[i].old)
                        continue;
                r = rules_of(n->nl, &n->seq, &l.v[i], ifname, &rules);
                ok = r == 0 && rules.n == 1 && rules.police.rate == p->rate &&
                     rules.police.burst == p->burst;
        }
        if (r < 0) {
                free(l.v);
                return r;
        }
        *ret = l;
        *ret_in_place = ok && count == 1;
        return 0;
}

int nbd_bw_nft_set(struct nbd_bw_nft *n, int ifindex, const char *ifname,
                   const struct nbd_bw_police *p, struct nbd_err *e)
{
        struct chain_list have = {0};
        struct mark_carry mc = {0};
        struct msgs m = {0};
        char name[IFNAMSIZ];
        bool done_already = false;
        int r;

        if (nbd_bw_nft_missing(n)) {
                return nbd_err_set(e, -EOPNOTSUPP, "cannot police what enters %s: %s", ifname,
                                   n->missing);
        }
        r = use(n, e);
        if (r < 0)
                return r;
        r = in_place(n, ifindex, ifname, p, &have, &done_already);
        if (r < 0) {
                nbd_err_set(e, r, "cannot read table netdev %s: %s", NBD_BW_NFT_TABLE,
                            nbd_nfsock_strerror(r));
                goto out;
        }
        if (done_already)
                goto out; /* nothing is written */
        mark_read(n, &mc);
        batch_begin(&m, n->seq);
        put_table(&m, NFT_MSG_NEWTABLE, NBD_BW_NFT_TABLE, NLM_F_CREATE);
        /* The old chains go and the new comes in one transaction. */
        for (size_t i = 0; i < have.n; i++) {
                if (have.v[i].ifindex != ifindex)
                        continue;
                name_of(&have.v[i], name);
                put_chain(&m, NFT_MSG_DELCHAIN, chain_named(NBD_BW_NFT_TABLE, name), 0);
        }
        chain_name(ifindex, name);
        put_chain(&m, NFT_MSG_NEWCHAIN, base_chain(name, ifname), NLM_F_CREATE | NLM_F_EXCL);
        put_rule(&m, police_rule(NBD_BW_NFT_TABLE, name, p));
        r = end_and_send(n, &m, &mc, NULL);
        if (m.oom)
                r = nbd_err_oom(e, "building the policer");
        else if (r < 0)
                nbd_err_set(e, r, "cannot police what enters %s with nftables (chain %s): %s",
                            ifname, name, strerror(-r));
out:
        free(have.v);
        free(m.buf);
        done(n);
        return r;
}

/* Delete the chains of ifindexes[n] that exist (a delete of one that does
 * not would fail the whole batch). */
static int delete_chains(struct nbd_bw_nft *n, const struct chain_list *have, const bool *doomed,
                         unsigned *ret_n, struct nbd_err *e)
{
        struct mark_carry mc = {0};
        struct msgs m = {0};
        char name[IFNAMSIZ];
        unsigned count = 0;
        int r = 0;

        for (size_t i = 0; i < have->n && !count; i++)
                count += doomed[i];
        if (!count) {
                if (ret_n)
                        *ret_n = 0;
                return 0;
        }
        mark_read(n, &mc);
        count = 0;
        batch_begin(&m, n->seq);
        for (size_t i = 0; i < have->n; i++) {
                if (!doomed[i])
                        continue;
                name_of(&have->v[i], name);
                put_chain(&m, NFT_MSG_DELCHAIN, chain_named(NBD_BW_NFT_TABLE, name), 0);
                count++;
        }
        r = end_and_send(n, &m, &mc, NULL);
        if (m.oom)
                r = nbd_err_oom(e, "deleting bandwidth chains");
        else if (r < 0)
                nbd_err_set(e, r, "cannot delete %u bandwidth chain(s): %s", count, strerror(-r));
        free(m.buf);
        if (r == 0 && ret_n)
                *ret_n = count;
        return r;
}

/* Delete those of our chains (ifindex > 0: only that one's) stale picks. */
static int prune(struct nbd_bw_nft *n, int ifindex, nbd_bw_nft_stale_fn stale, void *data,
                 unsigned *ret_n, struct nbd_err *e)
{
        struct chain_list l = {0};
        bool *doomed = NULL;
        int r;

        if (n->no_socket)
                return 0; /* nftables is not there: neither are our chains */
        r = use(n, e);
        if (r < 0)
                return r;
        r = ifindex > 0 ? read_ifindex_chains(n->nl, &n->seq, ifindex, &l)
                        : read_chains(n->nl, &n->seq, &l);
        if (r < 0) {
                nbd_err_set(e, r, "cannot read table netdev %s: %s", NBD_BW_NFT_TABLE,
                            nbd_nfsock_strerror(r));
                goto out;
        }
        doomed = calloc(l.n ? l.n : 1, sizeof(*doomed));
        if (!doomed) {
                r = nbd_err_oom(e, "deleting bandwidth chains");
                goto out;
        }
        for (size_t i = 0; i < l.n; i++)
                doomed[i] = stale(l.v[i].ifindex, l.v[i].dev, l.v[i].old, data);
        r = delete_chains(n, &l, doomed, ret_n, e);
out:
        free(doomed);
        free(l.v);
        done(n);
        return r;
}

int nbd_bw_nft_prune(struct nbd_bw_nft *n, nbd_bw_nft_stale_fn stale, void *data, unsigned *ret_n,
                     struct nbd_err *e)
{
        return prune(n, 0, stale, data, ret_n, e);
}

int nbd_bw_nft_prune_ifindexes(struct nbd_bw_nft *n, const int *ifindexes, size_t count,
                               unsigned *ret_n, struct nbd_err *e)
{
        struct chain_list all = {0};
        bool *doomed = NULL;
        int r = 0;

        if (n->no_socket || count == 0)
                return 0;
        r = use(n, e);
        if (r < 0)
                return r;
        /* Each interface's chains by name: a chain dump would walk every
         * chain of the netdev family, the firewall's thousands included,
         * once per message. */
        for (size_t i = 0; r == 0 && i < count; i++) {
                struct chain_list l = {0};
                struct chain_seen *grown;

                r = read_ifindex_chains(n->nl, &n->seq, ifindexes[i], &l);
                if (r < 0) {
                        nbd_err_set(e, r, "cannot read table netdev %s: %s", NBD_BW_NFT_TABLE,
                                    nbd_nfsock_strerror(r));
                        break;
                }
                grown = l.n ? realloc(all.v, (all.n + l.n) * sizeof(*all.v)) : all.v;
                if (l.n && !grown) {
                        free(l.v);
                        r = nbd_err_oom(e, "deleting bandwidth chains");
                        break;
                }
                all.v = grown;
                if (l.n) /* l.v may be NULL (memcpy's arguments must not) */
                        memcpy(all.v + all.n, l.v, l.n * sizeof(*l.v));
                all.n += l.n;
                free(l.v);
        }
        if (r == 0 && all.n) {
                doomed = malloc(all.n * sizeof(*doomed));
                if (!doomed)
                        r = nbd_err_oom(e, "deleting bandwidth chains");
        }
        if (r == 0 && all.n) {
                for (size_t i = 0; i < all.n; i++)
                        doomed[i] = true;
                r = delete_chains(n, &all, doomed, ret_n, e);
        } else if (r == 0 && ret_n) {
                *ret_n = 0;
        }
        free(doomed);
        free(all.v);
        done(n);
        return r;
}

static bool is_ifindex(int ifindex, const char *dev, bool old, void *data)
{
        (void)dev;
        (void)old;
        return ifindex == *(const int *)data;
}

int nbd_bw_nft_clear(struct nbd_bw_nft *n, int ifindex, struct nbd_err *e)
{
        return prune(n, ifindex, is_ifindex, &ifindex, NULL, e);
}

int nbd_bw_nft_peek(int ifindex, const char *ifname, struct nbd_bw_police *ret_police, int *ret_fwd,
                    struct nbd_err *e)
{
        struct mnl_socket *nl = NULL;
        uint32_t seq = (uint32_t)time(NULL);
        int r = nbd_nfsock_lane_get(&nl);

        if (r == 0)
                r = read_ifindex(nl, &seq, ifindex, ifname, ret_police, ret_fwd);
        if (r < 0)
                nbd_err_set(e, r, "cannot read table netdev %s: %s", NBD_BW_NFT_TABLE,
                            nbd_nfsock_strerror(r));
        return r;
}
