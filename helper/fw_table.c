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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_compile.h"
#include "fw_text.h"
#include "netlink.h"

/* ---- reading the table back ---- */

void nbd_fw_owners_free(struct nbd_fw_owner_state *o)
{
        while (o) {
                struct nbd_fw_owner_state *next = o->next;
                for (size_t i = 0; i < o->n_chains; i++)
                        free(o->chains[i]);
                free(o->chains);
                free(o->chain_rules);
                free(o);
                o = next;
        }
}

struct nbd_fw_owner_state *nbd_fw_owner_find(struct nbd_fw_owner_state *list, const char *owner)
{
        for (; list; list = list->next)
                if (strcmp(list->owner, owner) == 0)
                        return list;
        return NULL;
}

static int comment_cb(const struct nftnl_udata *attr, void *data)
{
        const char **out = data;

        if (nftnl_udata_type(attr) == NBD_FW_UDATA_CHAIN_COMMENT && nftnl_udata_len(attr) > 0)
                *out = nftnl_udata_get(attr);
        return MNL_CB_OK;
}

struct chain_dump {
        struct nbd_fw_owner_state *owners;
        int err;
};

static int on_chain(const struct nlmsghdr *nlh, void *data)
{
        struct chain_dump *d = data;
        struct nftnl_chain *c = nftnl_chain_alloc();
        const char *name, *slash, *comment = NULL;
        struct nbd_fw_owner_state *o;
        char owner[NBD_FW_OWNER_MAX + 1];
        uint32_t len = 0;
        const void *ud;
        char **chains, *copy;

        /* A chain of ours left out of the list would be left behind when
         * its owner is replaced or removed: out of memory fails the dump. */
        if (!c) {
                d->err = -ENOMEM;
                goto out;
        }
        errno = 0;
        if (nftnl_chain_nlmsg_parse(nlh, c) < 0) {
                if (errno == ENOMEM)
                        d->err = -ENOMEM;
                goto out;
        }
        name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
        slash = name ? strchr(name, '/') : NULL;
        if (!slash || (size_t)(slash - name) > NBD_FW_OWNER_MAX)
                goto out; /* not one of ours: never touched */
        memcpy(owner, name, (size_t)(slash - name));
        owner[slash - name] = '\0';
        o = nbd_fw_owner_find(d->owners, owner);
        if (!o) {
                o = calloc(1, sizeof(*o));
                if (!o) {
                        d->err = -ENOMEM;
                        goto out;
                }
                strcpy(o->owner, owner);
                o->next = d->owners;
                d->owners = o;
        }
        chains = realloc(o->chains, (o->n_chains + 1) * sizeof(*chains));
        if (chains)
                o->chains = chains;
        copy = chains ? strdup(name) : NULL;
        if (!copy) {
                d->err = -ENOMEM;
                goto out;
        }
        if (!strchr(slash + 1, '/')) {
                /* A base chain: first in the list (deleted before the group
                 * chains its rules jump to), and it has the comment. */
                memmove(o->chains + 1, o->chains, o->n_chains * sizeof(*chains));
                o->chains[0] = copy;
                o->has_base = true;
                ud = nftnl_chain_get_data(c, NFTNL_CHAIN_USERDATA, &len);
                /* "uid=N" came later: a comment without it was written
                 * for root, when only root could ask. */
                if (ud && nftnl_udata_parse(ud, len, comment_cb, &comment) >= 0 && comment)
                        sscanf(comment, "netbroker %32s %15s %u uid=%u", o->hash, o->ifname,
                               &o->rules, &o->uid);
        } else {
                o->chains[o->n_chains] = copy;
        }
        o->n_chains++;
out:
        if (c)
                nftnl_chain_free(c);
        return MNL_CB_OK;
}

struct rule_count {
        struct nbd_fw_owner_state *owners;
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

        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), rule_attr_cb, tb) < 0 ||
            !tb[NFTA_RULE_CHAIN])
                return MNL_CB_OK;
        chain = mnl_attr_get_str(tb[NFTA_RULE_CHAIN]);
        slash = strchr(chain, '/');
        if (!slash)
                return MNL_CB_OK;
        for (struct nbd_fw_owner_state *o = d->owners; o; o = o->next) {
                if (strlen(o->owner) != (size_t)(slash - chain) ||
                    strncmp(o->owner, chain, (size_t)(slash - chain)))
                        continue;
                for (size_t i = 0; i < o->n_chains; i++)
                        if (strcmp(o->chains[i], chain) == 0 && o->chain_rules)
                                o->chain_rules[i]++;
                /* The owner's rules have counters (root groups' rules in
                 * the base chains too; jumps have none). Rules in group
                 * chains made before counters existed count as well. */
                if (strchr(slash + 1, '/') || has_counter(tb[NFTA_RULE_EXPRESSIONS]))
                        o->kernel_rules++;
                break;
        }
        return MNL_CB_OK;
}

static void restart_count(void *data)
{
        struct rule_count *rc = data;

        for (struct nbd_fw_owner_state *o = rc->owners; o; o = o->next) {
                o->kernel_rules = 0;
                memset(o->chain_rules, 0,
                       (o->n_chains ? o->n_chains : 1) * sizeof(*o->chain_rules));
        }
}

int nbd_fw_count_rules(struct nbd_fw *fw, struct nbd_fw_owner_state *owners)
{
        struct rule_count rc = {owners};

        for (struct nbd_fw_owner_state *o = owners; o; o = o->next) {
                o->kernel_rules = 0;
                free(o->chain_rules);
                o->chain_rules = calloc(o->n_chains ? o->n_chains : 1, sizeof(*o->chain_rules));
                if (!o->chain_rules)
                        return -ENOMEM;
        }
        return dump(fw, NFT_MSG_GETRULE, on_rule, restart_count, &rc);
}

/* Read what is left of dump seq, up to its NLMSG_DONE (or error). */
static void drain_dump(struct nbd_fw *fw, char *buf, size_t size, uint32_t seq)
{
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(fw->nl, buf, size);
                if (n <= 0)
                        return;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, (int)n);
                     h = mnl_nlmsg_next(h, (int *)&n))
                        if (h->nlmsg_seq == seq &&
                            (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR))
                                return;
        }
}

/* One dump of chains or rules of our table. A missing table is empty. A
 * dump the kernel interrupted (NLM_F_DUMP_INTR) is read again from the
 * start, after restart() has forgotten what the callbacks collected: else
 * the chains and rules read before the interruption would count twice. */
static int dump(struct nbd_fw *fw, uint16_t type, mnl_cb_t cb, void (*restart)(void *data),
                void *data)
{
        static char buf[65536];
        uint32_t portid = mnl_socket_get_portid(fw->nl);
        int r = -EINTR;

        for (int attempt = 0; attempt < 5 && r == -EINTR; attempt++) {
                uint32_t seq = ++fw->seq;
                struct nlmsghdr *nlh =
                        nftnl_nlmsg_build_hdr(buf, type, NFPROTO_NETDEV, NLM_F_DUMP, seq);
                ssize_t n;

                if (attempt > 0)
                        restart(data);
                if (type == NFT_MSG_GETCHAIN) {
                        struct nftnl_chain *c = nbd_fw_new_chain("");
                        if (!c)
                                return -ENOMEM;
                        nftnl_chain_unset(c, NFTNL_CHAIN_NAME);
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
                if (mnl_socket_sendto(fw->nl, nlh, nlh->nlmsg_len) < 0)
                        return -errno;
                nbd_netlink_sent_nf(1);
                do {
                        n = mnl_socket_recvfrom(fw->nl, buf, sizeof(buf));
                        if (n < 0) {
                                r = -errno;
                                break;
                        }
                        r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
                        if (r < 0)
                                r = -errno;
                } while (r > 0);
                /* The rest of an interrupted dump is still coming: read it
                 * out, else the next request reads it as its answer. (A
                 * commit on the firewall's lane can interrupt a dump.) */
                if (r == -EINTR)
                        drain_dump(fw, buf, sizeof(buf), seq);
                if (r == -ENOENT)
                        r = 0; /* no table: no owners */
        }
        return r < 0 ? r : 0;
}

static void restart_chains(void *data)
{
        struct chain_dump *d = data;

        nbd_fw_owners_free(d->owners);
        d->owners = NULL;
        d->err = 0;
}

int nbd_fw_read_owners(struct nbd_fw *fw, struct nbd_fw_owner_state **ret)
{
        struct chain_dump d = {0};
        int r = dump(fw, NFT_MSG_GETCHAIN, on_chain, restart_chains, &d);

        if (r == 0)
                r = d.err;
        if (r < 0) {
                nbd_fw_owners_free(d.owners);
                return r;
        }
        *ret = d.owners;
        return 0;
}

/* A failed read of the table, or of its rules: out of memory says so as
 * every out of memory does, other errors name the errno. */
int nbd_fw_read_failed(struct nbd_err *e, int r, bool rules)
{
        const char *what = rules ? "the rules of table" : "table";

        if (r == -ENOMEM)
                return nbd_err_set(e, r, "out of memory reading %s %s", what, NBD_FW_TABLE);
        return nbd_err_set(e, r, "cannot read %s %s: %s", what, NBD_FW_TABLE, strerror(-r));
}

int nbd_fw_list(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, struct nbd_err *e)
{
        struct nbd_fw_owner_state *owners = NULL;
        int r = nbd_fw_read_owners(fw, &owners);

        if (r < 0)
                return nbd_fw_read_failed(e, r, false);
        /* Count what is really there, not what the comment says. */
        r = nbd_fw_count_rules(fw, owners);
        if (r < 0)
                nbd_fw_read_failed(e, r, true);
        for (struct nbd_fw_owner_state *o = owners; o && r == 0; o = o->next) {
                struct nbd_fw_owner_info info = {.rules = o->kernel_rules};
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
        nbd_fw_owners_free(owners);
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
                nftnl_udata_parse(ud, len, rule_comment_cb, &rec);
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

int nbd_fw_list_rules(struct nbd_fw *fw, nbd_fw_rule_fn fn, void *data, struct nbd_err *e)
{
        struct rule_dump d = {0};
        int r = dump(fw, NFT_MSG_GETRULE, on_rule_full, restart_rules, &d);

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
