// SPDX-License-Identifier: LGPL-2.1-or-later
/* restart's floor: the helper's replace transaction sent by a minimal
 * libmnl program. The table the helper's replace left (on an empty
 * ruleset: what its transaction created) is dumped once into libnftnl
 * objects; each run then sends them as one nfnetlink batch, the table,
 * every chain and every rule, acked at the last message only, as the
 * helper sends its own (fw_kernel.c), and reads the acks. What the
 * helper adds on top (the request, the model, the compile, the read of the
 * table) is what the ratio C/F shows. */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

struct bench_nft_table {
        char name[32];
        struct nftnl_chain **chains;
        struct nftnl_rule **rules;
        size_t n_chains, n_rules, cap_chains, cap_rules;
        bool keep; /* a dump that keeps the objects, or one that counts them */
};

static int push(void ***v, size_t *n, size_t *cap, void *x)
{
        void **p = *n < *cap ? *v : realloc(*v, (*cap ? 2 * *cap : 256) * sizeof(*p));

        if (!p)
                return -ENOMEM;
        *cap = *n < *cap ? *cap : *cap ? 2 * *cap : 256;
        *v = p;
        (*v)[(*n)++] = x;
        return 0;
}

/* A chain as the kernel dumps it, made a chain to create: no handle, no
 * use count, no counters, no flags the kernel sets itself. */
static int on_chain(const struct nlmsghdr *nlh, void *data)
{
        static const uint16_t drop[] = {NFTNL_CHAIN_HANDLE, NFTNL_CHAIN_USE, NFTNL_CHAIN_FLAGS,
                                        NFTNL_CHAIN_BYTES, NFTNL_CHAIN_PACKETS};
        struct bench_nft_table *t = data;
        struct nftnl_chain *c = t->keep ? nftnl_chain_alloc() : NULL;

        if (!t->keep) {
                t->n_chains++;
                return MNL_CB_OK;
        }
        if (!c || nftnl_chain_nlmsg_parse(nlh, c) < 0 ||
            push((void ***)&t->chains, &t->n_chains, &t->cap_chains, c) < 0) {
                if (c)
                        nftnl_chain_free(c);
                return MNL_CB_ERROR;
        }
        for (size_t i = 0; i < BENCH_N(drop); i++)
                nftnl_chain_unset(c, drop[i]);
        return MNL_CB_OK;
}

static int on_rule(const struct nlmsghdr *nlh, void *data)
{
        struct bench_nft_table *t = data;
        struct nftnl_rule *r = t->keep ? nftnl_rule_alloc() : NULL;

        if (!t->keep) {
                t->n_rules++;
                return MNL_CB_OK;
        }
        if (!r || nftnl_rule_nlmsg_parse(nlh, r) < 0 ||
            push((void ***)&t->rules, &t->n_rules, &t->cap_rules, r) < 0) {
                if (r)
                        nftnl_rule_free(r);
                return MNL_CB_ERROR;
        }
        /* A handle would make the NEWRULE a replace, a position (the
         * previous rule's handle, which the dump gives) an insert after a
         * rule the new table does not have: appended, in dump order. */
        nftnl_rule_unset(r, NFTNL_RULE_HANDLE);
        nftnl_rule_unset(r, NFTNL_RULE_POSITION);
        return MNL_CB_OK;
}

static int open_nl(struct mnl_socket **ret)
{
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        int big = 64 << 20;

        if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                int r = -errno;
                if (nl)
                        mnl_socket_close(nl);
                return r;
        }
        setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
        *ret = nl;
        return 0;
}

/* Every chain, then every rule, of table t->name. */
static int dump(struct bench_nft_table *t)
{
        static char buf[1 << 20];
        struct mnl_socket *nl = NULL;
        uint32_t seq = (uint32_t)time(NULL);
        int r = open_nl(&nl);

        for (int k = 0; k < 2 && r == 0; k++, seq++) {
                struct nlmsghdr *nlh =
                        nftnl_nlmsg_build_hdr(buf, k ? NFT_MSG_GETRULE : NFT_MSG_GETCHAIN,
                                              NFPROTO_NETDEV, NLM_F_DUMP, seq);
                struct nftnl_chain *c = k ? NULL : nftnl_chain_alloc();
                struct nftnl_rule *ru = k ? nftnl_rule_alloc() : NULL;
                ssize_t n;
                if (!c && !ru) {
                        r = -ENOMEM;
                        break;
                }
                if (c) {
                        nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, t->name);
                        nftnl_chain_nlmsg_build_payload(nlh, c);
                        nftnl_chain_free(c);
                } else {
                        nftnl_rule_set_str(ru, NFTNL_RULE_TABLE, t->name);
                        nftnl_rule_nlmsg_build_payload(nlh, ru);
                        nftnl_rule_free(ru);
                }
                if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                        r = -errno;
                /* MNL_CB_OK: more to come; MNL_CB_STOP: the end of the dump. */
                for (bool more = r == 0; more;) {
                        int cb =
                                (n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) < 0
                                        ? -1
                                        : mnl_cb_run(buf, (size_t)n, seq, mnl_socket_get_portid(nl),
                                                     k ? on_rule : on_chain, t);
                        if (cb < 0)
                                r = errno ? -errno : -EIO;
                        more = cb > 0;
                }
        }
        if (nl)
                mnl_socket_close(nl);
        return r;
}

void bench_nft_free(struct bench_nft_table *t)
{
        for (size_t i = 0; t && i < t->n_chains && t->keep; i++)
                nftnl_chain_free(t->chains[i]);
        for (size_t i = 0; t && i < t->n_rules && t->keep; i++)
                nftnl_rule_free(t->rules[i]);
        if (t) {
                free(t->chains);
                free(t->rules);
        }
        free(t);
}

int bench_nft_capture(const char *table, bool keep, struct bench_nft_table **ret)
{
        struct bench_nft_table *t = calloc(1, sizeof(*t));
        int r = t ? 0 : -ENOMEM;

        if (t) {
                snprintf(t->name, sizeof(t->name), "%s", table);
                t->keep = keep;
                r = dump(t);
        }
        if (r < 0) {
                bench_log("netbroker-bench: cannot dump nftables table %s: %s\n", table,
                          strerror(-r));
                bench_nft_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

void bench_nft_counts(const struct bench_nft_table *t, size_t *ret_chains, size_t *ret_rules)
{
        *ret_chains = t->n_chains;
        *ret_rules = t->n_rules;
}

/* The batch: begin, the table, every chain, every rule (the last acked),
 * end; NULL when out of memory. */
static struct nftnl_batch *build(const struct bench_nft_table *t, uint32_t seq, uint32_t *ret_last)
{
        struct nftnl_batch *b = nftnl_batch_alloc(32 * 4096, 64 * 1024);
        struct nftnl_table *tb = nftnl_table_alloc();
        size_t n = t->n_chains + t->n_rules;
        struct nlmsghdr *nlh;
        bool ok = b && tb;

        if (ok) {
                nftnl_batch_begin(nftnl_batch_buffer(b), seq++);
                ok = nftnl_batch_update(b) == 0;
                nftnl_table_set_str(tb, NFTNL_TABLE_NAME, t->name);
        }
        if (ok) {
                nlh = nftnl_table_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWTABLE,
                                                  NFPROTO_NETDEV, NLM_F_CREATE, seq++);
                nftnl_table_nlmsg_build_payload(nlh, tb);
                ok = nftnl_batch_update(b) == 0;
        }
        for (size_t i = 0; i < n && ok; i++, seq++) {
                uint16_t ack = i + 1 == n ? NLM_F_ACK : 0;
                if (i < t->n_chains) {
                        nlh = nftnl_chain_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWCHAIN,
                                                          NFPROTO_NETDEV,
                                                          ack | NLM_F_CREATE | NLM_F_EXCL, seq);
                        nftnl_chain_nlmsg_build_payload(nlh, t->chains[i]);
                } else {
                        nlh = nftnl_rule_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWRULE,
                                                         NFPROTO_NETDEV,
                                                         ack | NLM_F_CREATE | NLM_F_APPEND, seq);
                        nftnl_rule_nlmsg_build_payload(nlh, t->rules[i - t->n_chains]);
                }
                ok = nftnl_batch_update(b) == 0;
        }
        if (ok) {
                *ret_last = seq - 1;
                nftnl_batch_end(nftnl_batch_buffer(b), seq);
                ok = nftnl_batch_update(b) == 0;
        }
        if (tb)
                nftnl_table_free(tb);
        if (!ok && b)
                nftnl_batch_free(b);
        return ok ? b : NULL;
}

/* Every ack queued by the time sendmsg() returned: the first error, or 0
 * once the last message's ack is in. */
static int read_acks(struct mnl_socket *nl, uint32_t last, uint32_t *ret_seq)
{
        static char buf[1 << 16];
        bool acked = false;
        ssize_t n;

        while ((n = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), MSG_DONTWAIT)) != 0) {
                int len = (int)n;
                if (n < 0 && (errno == EINTR || errno == ENOBUFS))
                        continue;
                if (n < 0)
                        break;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, len);
                     h = mnl_nlmsg_next(h, &len)) {
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                        if (h->nlmsg_type == NLMSG_ERROR && e->error) {
                                *ret_seq = h->nlmsg_seq;
                                return e->error;
                        }
                        acked |= h->nlmsg_type == NLMSG_ERROR && h->nlmsg_seq == last;
                }
        }
        return acked ? 0 : -EIO;
}

int bench_nft_send(const struct bench_nft_table *t, double *ret_us)
{
        struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
        struct msghdr msg = {.msg_name = &snl, .msg_namelen = sizeof(snl)};
        struct mnl_socket *nl = NULL;
        struct nftnl_batch *b = NULL;
        struct iovec *iov = NULL;
        uint32_t last = 0, bad = 0, first = (uint32_t)time(NULL);
        uint64_t t0;
        int r = open_nl(&nl), n_iov = 0, total = 65536;

        /* The socket is the program's: not timed, as the helper's is open. */
        t0 = bench_now_ns();
        if (r == 0 && !(b = build(t, first, &last)))
                r = -ENOMEM;
        if (r == 0 && !(iov = calloc((size_t)(n_iov = nftnl_batch_iovec_len(b)), sizeof(*iov))))
                r = -ENOMEM;
        if (r == 0) {
                nftnl_batch_iovec(b, iov, (uint32_t)n_iov);
                for (int i = 0; i < n_iov; i++)
                        total += (int)iov[i].iov_len;
                setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_SNDBUFFORCE, &total,
                           sizeof(total));
                msg.msg_iov = iov;
                msg.msg_iovlen = (size_t)n_iov;
                r = sendmsg(mnl_socket_get_fd(nl), &msg, 0) < 0 ? -errno : 0;
        }
        if (r == 0)
                r = read_acks(nl, last, &bad);
        if (r == 0)
                *ret_us = (double)(bench_now_ns() - t0) / 1000.0;
        else
                bench_log("netbroker-bench: the floor's transaction (%zu chains, %zu rules): %s "
                          "(at message %ld, the table's is 0)\n",
                          t->n_chains, t->n_rules, strerror(-r),
                          bad ? (long)(bad - first - 1) : -1L);
        if (r < 0 && bad > first + 1) {
                /* What the kernel refused, in nft's words. */
                size_t i = bad - first - 2;
                char buf[1024];
                if (i < t->n_chains)
                        nftnl_chain_snprintf(buf, sizeof(buf), t->chains[i], NFTNL_OUTPUT_DEFAULT,
                                             0);
                else if (i - t->n_chains < t->n_rules)
                        nftnl_rule_snprintf(buf, sizeof(buf), t->rules[i - t->n_chains],
                                            NFTNL_OUTPUT_DEFAULT, 0);
                else
                        buf[0] = '\0';
                bench_log("netbroker-bench: refused: %s\n", buf);
        }
        free(iov);
        if (b)
                nftnl_batch_free(b);
        if (nl)
                mnl_socket_close(nl);
        return r;
}
