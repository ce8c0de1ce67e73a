/* Bandwidth's redirect to an IFB as an nftables chain; see bw_nft.h. */
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
#include "log.h"
#include "netlink.h"

NBD_LOG_CATEGORY(bandwidth);

#define PROBE_TABLE "netbroker_bw_probe"
#define MSG_ROOM 1024 /* one message of ours fits, with room to spare */

/* The socket is opened for each operation and closed after it: the helper
 * has few fds (RLIMIT_NOFILE 64 by default), and bandwidth changes are
 * rare. */
struct nbd_bw_nft {
        struct mnl_socket *nl; /* during an operation only */
        uint32_t seq;
        char missing[160]; /* "" when fwd works */
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

/* `fwd to` the device of index ifb: immediate reg 1 <ifb>; fwd sreg_dev 1
 * (what nft makes of `fwd to "nbifbN"`). */
static struct nftnl_rule *fwd_rule(const char *table, const char *chain, int ifb)
{
        struct nftnl_rule *r = nftnl_rule_alloc();
        struct nftnl_expr *imm = nftnl_expr_alloc("immediate"), *fwd = nftnl_expr_alloc("fwd");
        uint32_t dev = (uint32_t)ifb;

        if (!r || !imm || !fwd || nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table) < 0 ||
            nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain) < 0 ||
            nftnl_expr_set(imm, NFTNL_EXPR_IMM_DATA, &dev, sizeof(dev)) < 0)
                goto fail;
        nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_NETDEV);
        nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
        nftnl_expr_set_u32(fwd, NFTNL_EXPR_FWD_SREG_DEV, NFT_REG_1);
        nftnl_rule_add_expr(r, imm);
        nftnl_rule_add_expr(r, fwd);
        return r;
fail:
        if (imm)
                nftnl_expr_free(imm);
        if (fwd)
                nftnl_expr_free(fwd);
        if (r)
                nftnl_rule_free(r);
        return NULL;
}

static void chain_name(int ifindex, char name[IFNAMSIZ])
{
        snprintf(name, IFNAMSIZ, NBD_BW_IFB_NAME_FMT, (unsigned)ifindex);
}

/* ---- the kernel ---- */

static int open_socket(struct mnl_socket **ret)
{
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        int r;

        if (!nl)
                return -errno;
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                r = -errno;
                mnl_socket_close(nl);
                return r;
        }
        *ret = nl;
        return 0;
}

/* Send a batch and read every answer: 0, or the first error the kernel
 * sent (-errno) with the sequence number of its message in *ret_seq. The
 * kernel handles the whole batch inside sendmsg(), so every answer is
 * queued when it returns. */
static int send_batch(struct mnl_socket *nl, const struct msgs *m, uint32_t *ret_seq)
{
        static char buf[16384];
        int first_err = 0;
        unsigned n_msgs = m->seq - m->first - 1; /* without begin and end */

        if (mnl_socket_sendto(nl, m->buf, m->len) < 0)
                return -errno;
        nbd_netlink_sent_nf(n_msgs + 2);
        for (;;) {
                ssize_t n = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), MSG_DONTWAIT);
                int left = (int)n;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left);
                     h = mnl_nlmsg_next(h, &left)) {
                        const struct nlmsgerr *ack = mnl_nlmsg_get_payload(h);
                        if (h->nlmsg_type == NLMSG_ERROR && ack->error && !first_err) {
                                first_err = ack->error;
                                if (ret_seq)
                                        *ret_seq = h->nlmsg_seq;
                        }
                }
        }
        return first_err;
}

/* ---- reading: a dump of the table's chains, or of one chain's rules ---- */

struct chain_seen {
        int ifindex; /* from the name nbifbN */
        char dev[IFNAMSIZ];
        bool ingress_at_prio; /* our hook and priority */
};

struct chain_list {
        struct chain_seen *v;
        size_t n;
        int err;
};

static bool parse_name(const char *name, int *ret)
{
        size_t plen = strlen(NBD_BW_IFB_PREFIX);
        unsigned long v;
        char *end;

        if (!name || strncmp(name, NBD_BW_IFB_PREFIX, plen) != 0 || !name[plen])
                return false;
        errno = 0;
        v = strtoul(name + plen, &end, 10);
        if (*end || errno || v == 0 || v > INT_MAX)
                return false;
        *ret = (int)v;
        return true;
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
        if (!parse_name(nftnl_chain_get_str(c, NFTNL_CHAIN_NAME), &s.ifindex))
                goto out; /* not one of ours */
        dev = nftnl_chain_is_set(c, NFTNL_CHAIN_DEV) ? nftnl_chain_get_str(c, NFTNL_CHAIN_DEV) : "";
        snprintf(s.dev, sizeof(s.dev), "%s", dev ? dev : "");
        s.ingress_at_prio = nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM) &&
                            nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM) == NF_NETDEV_INGRESS &&
                            nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO) == NBD_BW_NFT_PRIO;
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

/* The target of a `fwd to` rule: immediate data then fwd. */
struct fwd_seen {
        uint32_t imm;
        bool has_imm, has_fwd, other;
};

static int on_expr(struct nftnl_expr *e, void *data)
{
        struct fwd_seen *f = data;
        const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
        uint32_t len = 0;
        const void *v;

        if (name && strcmp(name, "immediate") == 0 && !f->has_imm &&
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
        int target; /* the only rule's fwd target, 0 if it is no fwd */
        int err;
};

static int on_rule(const struct nlmsghdr *nlh, void *data)
{
        struct rule_list *l = data;
        struct nftnl_rule *r = nftnl_rule_alloc();
        struct fwd_seen f = {0};

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
        l->target = f.has_fwd && !f.other ? (int)f.imm : 0;
        l->n++;
out:
        if (r)
                nftnl_rule_free(r);
        return MNL_CB_OK;
}

/* A dump of the table's chains (chain and one NULL), one chain (one: a
 * get, not a dump), or one chain's rules (chain). A table or chain that is
 * not there is an empty answer. */
static int dump(struct mnl_socket *nl, uint32_t seq, const char *chain, const char *one,
                mnl_cb_t cb, void *data)
{
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh;
        uint32_t portid = mnl_socket_get_portid(nl);
        int r;

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
        /* A get answers with the chain and an ack, or an error. */
        do {
                ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
        } while (r > MNL_CB_STOP);
        if (r < 0)
                return errno == ENOENT ? 0 : -errno;
        return 0;
}

/* Our chains (one: only that one). */
static int read_chains(struct mnl_socket *nl, uint32_t seq, const char *one, struct chain_list *ret)
{
        struct chain_list l = {0};
        int r = dump(nl, seq, NULL, one, on_chain, &l);

        if (r == 0 && l.err)
                r = l.err;
        if (r < 0) {
                free(l.v);
                return r;
        }
        *ret = l;
        return 0;
}

static const struct chain_seen *find_chain(const struct chain_list *l, int ifindex)
{
        for (size_t i = 0; i < l->n; i++)
                if (l->v[i].ifindex == ifindex)
                        return &l->v[i];
        return NULL;
}

/* The chain of ifindex as it is: *ret_found, and *ret_ifb the target of
 * its one rule when it hooks ifname's ingress at our priority (else 0). */
static int read_one(struct mnl_socket *nl, uint32_t *seq, int ifindex, const char *ifname,
                    bool *ret_found, int *ret_ifb)
{
        struct chain_list l = {0};
        struct rule_list rules = {0};
        const struct chain_seen *s;
        char name[IFNAMSIZ];
        int r;

        chain_name(ifindex, name);
        r = read_chains(nl, (*seq)++, name, &l);
        if (r < 0)
                return r;
        s = find_chain(&l, ifindex);
        *ret_found = s != NULL;
        *ret_ifb = 0;
        if (s && s->ingress_at_prio && strcmp(s->dev, ifname) == 0) {
                r = dump(nl, (*seq)++, name, NULL, on_rule, &rules);
                if (r == 0 && rules.err)
                        r = rules.err;
                if (r == 0 && rules.n == 1)
                        *ret_ifb = rules.target;
        }
        free(l.v);
        return r;
}

/* ---- the probe ---- */

/* A batch that makes a table, a regular chain and a fwd rule in it, then
 * deletes a table that is not there: the kernel aborts it whole, and
 * answers for the rule on its own. -ENOMEM, or 0 with n->missing set when
 * fwd cannot be used. */
static int probe(struct nbd_bw_nft *n)
{
        struct msgs m = {0};
        uint32_t err_seq = 0, rule_seq;
        int r;

        batch_begin(&m, n->seq);
        put_table(&m, NFT_MSG_NEWTABLE, PROBE_TABLE, NLM_F_CREATE);
        put_chain(&m, NFT_MSG_NEWCHAIN, chain_named(PROBE_TABLE, "probe"), NLM_F_CREATE);
        rule_seq = m.seq;
        put_rule(&m, fwd_rule(PROBE_TABLE, "probe", 1));
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
                return 0; /* only the deliberate error: fwd is there */
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
                 err_seq == rule_seq ? "the kernel has no nftables fwd expression"
                                     : "nftables refused a probe of fwd",
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
        if (n->nl)
                mnl_socket_close(n->nl);
        n->nl = NULL;
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

/* The socket for one operation. */
static int use(struct nbd_bw_nft *n, struct nbd_err *e)
{
        int r = open_socket(&n->nl);

        if (r < 0)
                nbd_err_set(e, r, "cannot open an nfnetlink socket: %s", strerror(-r));
        return r;
}

static void done(struct nbd_bw_nft *n)
{
        if (n->nl)
                mnl_socket_close(n->nl);
        n->nl = NULL;
}

const char *nbd_bw_nft_missing(const struct nbd_bw_nft *n)
{
        return n->missing[0] ? n->missing : NULL;
}

/* ---- changing ---- */

int nbd_bw_nft_set(struct nbd_bw_nft *n, int ifindex, const char *ifname, int ifb,
                   struct nbd_err *e)
{
        struct msgs m = {0};
        char name[IFNAMSIZ];
        bool found = false;
        int target = 0, r;

        if (nbd_bw_nft_missing(n)) {
                return nbd_err_set(e, -EOPNOTSUPP, "cannot redirect what enters %s to an IFB: %s",
                                   ifname, n->missing);
        }
        chain_name(ifindex, name);
        r = use(n, e);
        if (r < 0)
                return r;
        r = read_one(n->nl, &n->seq, ifindex, ifname, &found, &target);
        if (r < 0) {
                nbd_err_set(e, r, "cannot read table netdev %s: %s", NBD_BW_NFT_TABLE,
                            strerror(-r));
                goto out;
        }
        if (found && target == ifb)
                goto out; /* in place: nothing is written */
        batch_begin(&m, n->seq);
        put_table(&m, NFT_MSG_NEWTABLE, NBD_BW_NFT_TABLE, NLM_F_CREATE);
        /* The old chain goes and the new comes in one transaction. */
        if (found)
                put_chain(&m, NFT_MSG_DELCHAIN, chain_named(NBD_BW_NFT_TABLE, name), 0);
        put_chain(&m, NFT_MSG_NEWCHAIN, base_chain(name, ifname), NLM_F_CREATE | NLM_F_EXCL);
        put_rule(&m, fwd_rule(NBD_BW_NFT_TABLE, name, ifb));
        batch_end(&m);
        n->seq = m.seq;
        if (m.oom)
                r = nbd_err_oom(e, "building the redirect to the IFB");
        else if ((r = send_batch(n->nl, &m, NULL)) < 0)
                nbd_err_set(e, r, "cannot redirect what enters %s to %s with nftables: %s", ifname,
                            name, strerror(-r));
out:
        free(m.buf);
        done(n);
        return r;
}

/* Delete the chains of ifindexes[n] that exist (a delete of one that does
 * not would fail the whole batch). */
static int delete_chains(struct nbd_bw_nft *n, const struct chain_list *have, const bool *doomed,
                         unsigned *ret_n, struct nbd_err *e)
{
        struct msgs m = {0};
        char name[IFNAMSIZ];
        unsigned count = 0;
        int r = 0;

        batch_begin(&m, n->seq);
        for (size_t i = 0; i < have->n; i++) {
                if (!doomed[i])
                        continue;
                chain_name(have->v[i].ifindex, name);
                put_chain(&m, NFT_MSG_DELCHAIN, chain_named(NBD_BW_NFT_TABLE, name), 0);
                count++;
        }
        batch_end(&m);
        n->seq = m.seq;
        if (count && m.oom)
                r = nbd_err_oom(e, "deleting redirects to IFBs");
        else if (count && (r = send_batch(n->nl, &m, NULL)) < 0)
                nbd_err_set(e, r, "cannot delete %u redirect(s) to IFBs: %s", count, strerror(-r));
        free(m.buf);
        if (r == 0 && ret_n)
                *ret_n = count;
        return r;
}

/* Delete those of our chains (one: only that one) stale picks. */
static int prune(struct nbd_bw_nft *n, const char *one, nbd_bw_nft_stale_fn stale, void *data,
                 unsigned *ret_n, struct nbd_err *e)
{
        struct chain_list l = {0};
        bool *doomed = NULL;
        int r;

        if (nbd_bw_nft_missing(n))
                return 0; /* no redirect was ever made here */
        r = use(n, e);
        if (r < 0)
                return r;
        r = read_chains(n->nl, n->seq++, one, &l);
        if (r < 0) {
                nbd_err_set(e, r, "cannot read table netdev %s: %s", NBD_BW_NFT_TABLE,
                            strerror(-r));
                goto out;
        }
        doomed = calloc(l.n ? l.n : 1, sizeof(*doomed));
        if (!doomed) {
                r = nbd_err_oom(e, "deleting redirects to IFBs");
                goto out;
        }
        for (size_t i = 0; i < l.n; i++)
                doomed[i] = stale(l.v[i].ifindex, l.v[i].dev, data);
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
        return prune(n, NULL, stale, data, ret_n, e);
}

static bool is_ifindex(int ifindex, const char *dev, void *data)
{
        (void)dev;
        return ifindex == *(const int *)data;
}

int nbd_bw_nft_clear(struct nbd_bw_nft *n, int ifindex, struct nbd_err *e)
{
        char name[IFNAMSIZ];

        chain_name(ifindex, name);
        return prune(n, name, is_ifindex, &ifindex, NULL, e);
}

int nbd_bw_nft_peek(int ifindex, const char *ifname, int *ret_ifb, struct nbd_err *e)
{
        struct mnl_socket *nl = NULL;
        uint32_t seq = (uint32_t)time(NULL);
        bool found = false;
        int r = open_socket(&nl);

        if (r == 0)
                r = read_one(nl, &seq, ifindex, ifname, &found, ret_ifb);
        if (nl)
                mnl_socket_close(nl);
        if (r < 0)
                nbd_err_set(e, r, "cannot read table netdev %s: %s", NBD_BW_NFT_TABLE,
                            strerror(-r));
        return r;
}
