// SPDX-License-Identifier: LGPL-2.1-or-later
/* The summary of our owners beside the generation mark; see fw_summary.h. */
#include "fw_summary.h"

#include <arpa/inet.h> /* first: <linux/netfilter.h> defers to its in.h */
#include <errno.h>
#include <inttypes.h>
#include <libmnl/libmnl.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_compile.h"
#include "netlink.h"
#include "nfsock.h"

/* The key: a number (1, 2, ...), the owner's name is in the comment. Of
 * nft's type "mark" (src/datatype.h: TYPE_MARK): `nft list ruleset` shows
 * it, and `nft -f` reads that back, where a string key of 64 bytes has no
 * type nft can name. */
#define KEY_LEN sizeof(uint32_t)
#define TYPE_MARK 19
/* Elements per NEWSETELEM: their list is one attribute, of 64 KiB at most. */
#define ELEMS_PER_MSG 128

/* ---- reading ---- */

static int comment_cb(const struct nftnl_udata *attr, void *data)
{
        char *text = data;

        if (nftnl_udata_type(attr) == NFTNL_UDATA_SET_ELEM_COMMENT && nftnl_udata_len(attr) > 0)
                snprintf(text, NFT_USERDATA_MAXLEN + 1, "%.*s",
                         (int)strnlen(nftnl_udata_get(attr), nftnl_udata_len(attr)),
                         (const char *)nftnl_udata_get(attr));
        return MNL_CB_OK;
}

static int userdata_cb(const struct nlattr *attr, void *data)
{
        if (mnl_attr_get_type(attr) == NFTA_CHAIN_USERDATA)
                *(const struct nlattr **)data = attr;
        return MNL_CB_OK;
}

/* The mark chain's answer to its GETCHAIN. Nothing is allocated: a
 * callback that failed would leave the ack unread, for the next request
 * to take as its answer. */
static int on_mark(const struct nlmsghdr *nlh, void *data)
{
        struct nbd_fw_owners *o = data;
        const struct nlattr *ud = NULL;
        char text[NFT_USERDATA_MAXLEN + 1] = "";

        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), userdata_cb, &ud) >= 0 && ud)
                /* The chain's comment has the type of an element's (0). */
                nbd_fw_udata_parse(mnl_attr_get_payload(ud), mnl_attr_get_payload_len(ud),
                                   comment_cb, text);
        o->marked = sscanf(text, "netbroker generation %" SCNu32, &o->mark) == 1;
        return MNL_CB_OK;
}

/* The mark's chain, asked for by name (no dump): 0 with o->marked false
 * when there is none. */
static int read_mark_on(struct mnl_socket *nl, uint32_t *seqp, struct nbd_fw_owners *o)
{
        char buf[MNL_SOCKET_BUFFER_SIZE];
        /* Zeroed: the attributes' padding goes to the kernel too. */
        char req[MNL_NLMSG_HDRLEN + 128] = {0};
        uint32_t seq = ++*seqp, portid = mnl_socket_get_portid(nl);
        struct nlmsghdr *nlh =
                nftnl_nlmsg_build_hdr(req, NFT_MSG_GETCHAIN, NBD_FW_GEN_FAMILY, NLM_F_ACK, seq);
        ssize_t n;
        int r;

        mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, NBD_FW_GEN_TABLE);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, NBD_FW_GEN_CHAIN);
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        o->marked = false;
        do {
                n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                r = mnl_cb_run(buf, (size_t)n, seq, portid, on_mark, o);
        } while (r > 0);
        if (r < 0 && errno == ENOENT)
                return 0; /* no mark (no table, no chain) */
        return r < 0 ? -errno : 0;
}

static int read_mark(struct nbd_fw *fw, struct nbd_fw_owners *o)
{
        return read_mark_on(fw->nl, &fw->seq, o);
}

int nbd_fw_mark_holds(struct mnl_socket *nl, uint32_t *seq, bool *ret_holds, uint32_t *ret_gen)
{
        struct nbd_fw_owners mark = {0};
        uint32_t gen;
        /* The mark first: a commit between the two reads moves the
         * generation past the mark, and the answer is no. */
        int r = read_mark_on(nl, seq, &mark);

        /* No mark (none written yet, or no arp family): no more to ask. */
        if (r == 0 && mark.marked)
                r = nbd_fw_read_gen_on(nl, seq, &gen);
        if (r < 0)
                return r;
        *ret_holds = mark.marked && mark.mark == gen;
        *ret_gen = gen;
        return 0;
}

/* The mark's chain deleted and made again saying gen + 1 (a chain's
 * comment cannot be changed in place). Nothing is made when missing: a
 * chain gone since the read (the table dropped with the guests' last
 * owner) fails the batch, which is sent again without these. */
struct nlmsghdr *nbd_fw_mark_carry_msg(char *buf, unsigned i, uint32_t gen, uint32_t seq)
{
        struct nftnl_udata_buf *u = NULL;
        struct nlmsghdr *nlh;
        char text[64];

        if (i >= NBD_FW_MARK_CARRY_MSGS)
                return NULL;
        nlh = nftnl_nlmsg_build_hdr(
                buf, i == 0 ? NFT_MSG_DELCHAIN : NFT_MSG_NEWCHAIN, NBD_FW_GEN_FAMILY,
                i == 0 ? NLM_F_ACK : NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK, seq);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, NBD_FW_GEN_TABLE);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, NBD_FW_GEN_CHAIN);
        if (i == 0)
                return nlh;
        snprintf(text, sizeof(text), "netbroker generation %" PRIu32, gen + 1);
        u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        if (!u || !nftnl_udata_put_strz(u, NBD_FW_UDATA_CHAIN_COMMENT, text)) {
                nftnl_udata_buf_free(u);
                return NULL;
        }
        mnl_attr_put(nlh, NFTA_CHAIN_USERDATA, nftnl_udata_buf_len(u), nftnl_udata_buf_data(u));
        nftnl_udata_buf_free(u);
        return nlh;
}

struct elem_dump {
        struct nbd_fw *fw; /* read through its socket */
        struct nbd_fw_owners owners;
        bool bad; /* an element that is not ours: the summary is not used */
        int err;
};

static int elem_attr_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **tb = data;
        uint16_t type = mnl_attr_get_type(attr);

        if (type <= NFTA_SET_ELEM_MAX)
                tb[type] = attr;
        return MNL_CB_OK;
}

/* One element into d's owners. */
static void read_elem(struct elem_dump *d, const struct nlattr *elem)
{
        const struct nlattr *tb[NFTA_SET_ELEM_MAX + 1] = {0}, *key = NULL, *a;
        char text[NFT_USERDATA_MAXLEN + 1] = "";
        struct nbd_fw_owner_state *o;

        if (mnl_attr_parse_nested(elem, elem_attr_cb, tb) < 0 || !tb[NFTA_SET_ELEM_USERDATA] ||
            !tb[NFTA_SET_ELEM_KEY]) {
                d->bad = true;
                return;
        }
        nbd_fw_udata_parse(mnl_attr_get_payload(tb[NFTA_SET_ELEM_USERDATA]),
                           mnl_attr_get_payload_len(tb[NFTA_SET_ELEM_USERDATA]), comment_cb, text);
        o = calloc(1, sizeof(*o));
        if (!o) {
                d->err = -ENOMEM;
                return;
        }
        /* "netbroker OWNER HASH IFNAME RULES uid=UID" */
        if (sscanf(text, "netbroker %64s %32s %15s %u uid=%u", o->owner, o->hash, o->ifname,
                   &o->rules, &o->uid) != 5 ||
            !nbd_fw_owner_valid(o->owner) || nbd_fw_owner_find(&d->owners, o->owner)) {
                free(o);
                d->bad = true;
                return;
        }
        mnl_attr_for_each_nested(a, tb[NFTA_SET_ELEM_KEY])
        {
                if (mnl_attr_get_type(a) == NFTA_DATA_VALUE &&
                    mnl_attr_get_payload_len(a) == sizeof(uint32_t))
                        key = a;
        }
        if (!key) {
                free(o);
                d->bad = true;
                return;
        }
        o->age = ntohl(mnl_attr_get_u32(key));
        o->has_base = true;
        if (nbd_fw_owners_add(&d->owners, o) < 0) {
                free(o);
                d->err = -ENOMEM;
        }
}

static int list_attr_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **tb = data;

        if (mnl_attr_get_type(attr) == NFTA_SET_ELEM_LIST_ELEMENTS &&
            mnl_attr_validate(attr, MNL_TYPE_NESTED) == 0)
                *tb = attr;
        return MNL_CB_OK;
}

static int on_elems(const struct nlmsghdr *nlh, void *data)
{
        struct elem_dump *d = data;
        const struct nlattr *list = NULL, *e;

        if (d->err < 0 || mnl_attr_parse(nlh, sizeof(struct nfgenmsg), list_attr_cb, &list) < 0 ||
            !list)
                return MNL_CB_OK;
        mnl_attr_for_each_nested(e, list)
        {
                if (d->err < 0)
                        break;
                read_elem(d, e);
        }
        return MNL_CB_OK;
}

/* One dump of the set's elements into the elem_dump at data, from none:
 * 0, -EINTR (interrupted: read again) or -errno. */
static int dump_elems(void *data)
{
        static _Thread_local char buf[65536]; /* the loop (creator checks) and the firewall lane */
        struct elem_dump *d = data;
        struct nbd_fw *fw = d->fw;
        uint32_t seq = ++fw->seq;
        struct nlmsghdr *nlh =
                nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NBD_FW_GEN_FAMILY, NLM_F_DUMP, seq);

        nbd_fw_owners_free(&d->owners);
        d->bad = false;
        d->err = 0;
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, NBD_FW_GEN_TABLE);
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, NBD_FW_SUMMARY_SET);
        if (mnl_socket_sendto(fw->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        return nbd_nfsock_read_answer(fw->nl, buf, sizeof(buf), seq, on_elems, d);
}

/* Every element of the set into d (its fw set): 0 (with d->bad when there
 * is no set), or -errno. */
static int read_elems(struct elem_dump *d)
{
        int r = nbd_nfsock_dump_tries(dump_elems, d);

        if (r == -ENOENT) {
                d->bad = true; /* no table or no set: a mark from before summaries */
                r = 0;
        }
        return r < 0 ? r : d->err;
}

static int by_age(const void *a, const void *b)
{
        const struct nbd_fw_owner_state *x = *(struct nbd_fw_owner_state *const *)a,
                                        *y = *(struct nbd_fw_owner_state *const *)b;

        return x->age < y->age ? -1 : x->age > y->age;
}

/* The list newest first, as a chain dump makes it (a listing's order). */
static int sort_by_age(struct nbd_fw_owners *owners)
{
        struct nbd_fw_owner_state **v = calloc(owners->n + 1, sizeof(*v)), *o;
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (o = owners->list; o; o = o->next)
                v[n++] = o;
        qsort(v, n, sizeof(*v), by_age);
        owners->list = NULL;
        for (size_t i = 0; i < n; i++) {
                v[i]->next = owners->list;
                owners->list = v[i];
        }
        free(v);
        return 0;
}

int nbd_fw_read_summary(struct nbd_fw *fw, struct nbd_fw_owners *ret, uint32_t *ret_gen,
                        bool *ret_trusted)
{
        struct elem_dump d = {0};
        struct nbd_fw_owners mark = {0};
        uint32_t gen = 0;
        int r;

        *ret_trusted = false;
        if (!fw->can_mark)
                return 0;
        r = read_mark(fw, &mark);
        if (r < 0 || !mark.marked)
                return r;
        /* Cheap before the dump: a mark already passed needs no elements. */
        if ((r = nbd_fw_current_gen(fw, &gen)) < 0 || gen != mark.mark)
                return r;
        d.fw = fw;
        r = read_elems(&d);
        /* Read after the elements: a commit since the mark, even one made
         * while they were being read, makes the generation another. */
        if (r == 0 && !d.bad)
                r = sort_by_age(&d.owners);
        if (r == 0 && !d.bad)
                r = nbd_fw_current_gen(fw, &gen);
        if (r < 0 || d.bad || gen != mark.mark) {
                nbd_fw_owners_free(&d.owners);
                return r;
        }
        d.owners.marked = true;
        d.owners.mark = mark.mark;
        *ret = d.owners;
        *ret_gen = gen;
        *ret_trusted = true;
        return 0;
}

/* ---- writing ---- */

static struct nftnl_set *new_set(void)
{
        struct nftnl_set *s = nftnl_set_alloc();

        if (s && (nftnl_set_set_str(s, NFTNL_SET_TABLE, NBD_FW_GEN_TABLE) < 0 ||
                  nftnl_set_set_str(s, NFTNL_SET_NAME, NBD_FW_SUMMARY_SET) < 0)) {
                nftnl_set_free(s);
                return NULL;
        }
        if (s)
                nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NBD_FW_GEN_FAMILY);
        return s;
}

static struct nftnl_set_elem *new_elem(const struct nbd_fw_summary_entry *e, uint32_t key)
{
        struct nftnl_set_elem *el = nftnl_set_elem_alloc();
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        char text[NFT_USERDATA_MAXLEN];
        bool ok;

        snprintf(text, sizeof(text), "netbroker %s %s %s %u uid=%u", e->owner, e->hash, e->ifname,
                 e->rules, (unsigned)e->uid);
        ok = el && u && nftnl_udata_put_strz(u, NFTNL_UDATA_SET_ELEM_COMMENT, text) &&
             nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, &key, sizeof(key)) == 0 &&
             nftnl_set_elem_set(el, NFTNL_SET_ELEM_USERDATA, nftnl_udata_buf_data(u),
                                nftnl_udata_buf_len(u)) == 0;
        if (u)
                nftnl_udata_buf_free(u);
        if (!ok && el) {
                nftnl_set_elem_free(el);
                el = NULL;
        }
        return el;
}

/* Elements v[0..n) in one NEWSETELEM, keyed first, first + 1, ... (in
 * network order, as nft reads a mark without a byte order of its own) */
static int put_elems(struct nftnl_batch *b, uint32_t seq, const struct nbd_fw_summary_entry *v,
                     size_t n, uint32_t first)
{
        struct nftnl_set *s = new_set();
        struct nlmsghdr *nlh;
        int r = -ENOMEM;

        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct nftnl_set_elem *el = new_elem(&v[i], htonl(first + (uint32_t)i));
                if (!el)
                        goto out;
                nftnl_set_elem_add(s, el);
        }
        nlh = nftnl_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWSETELEM, NBD_FW_GEN_FAMILY,
                                    NLM_F_CREATE, seq);
        nftnl_set_elems_nlmsg_build_payload(nlh, s);
        r = nftnl_batch_update(b) < 0 ? -ENOMEM : 0;
out:
        nftnl_set_free(s);
        return r;
}

int nbd_fw_summary_put(struct nftnl_batch *b, uint32_t *seq, const struct nbd_fw_summary_entry *v,
                       size_t n)
{
        struct nftnl_set *s = new_set();
        struct nlmsghdr *nlh;
        int r = -ENOMEM;

        if (!s)
                return -ENOMEM;
        /* The kernel wants an id for a set made in a transaction. */
        nftnl_set_set_u32(s, NFTNL_SET_ID, 1);
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, 0);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, TYPE_MARK);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, KEY_LEN);
        nlh = nftnl_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_NEWSET, NBD_FW_GEN_FAMILY,
                                    NLM_F_CREATE, (*seq)++);
        nftnl_set_nlmsg_build_payload(nlh, s);
        if (nftnl_batch_update(b) < 0)
                goto out;
        r = 0;
        for (size_t i = 0; r == 0 && i < n; i += ELEMS_PER_MSG)
                r = put_elems(b, (*seq)++, v + i, n - i < ELEMS_PER_MSG ? n - i : ELEMS_PER_MSG,
                              (uint32_t)i + 1);
out:
        nftnl_set_free(s);
        return r;
}
