// SPDX-License-Identifier: LGPL-2.1-or-later
/* The shared set's check; see fw_same_byte.h. */
#include "fw_same_byte.h"

#include <arpa/inet.h> /* first: <linux/netfilter.h> defers to its in.h */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/set.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <string.h>

#include "log.h"
#include "netlink.h"
#include "nfsock.h"

NBD_LOG_CATEGORY(firewall);

struct seen {
        struct nbd_fw *fw; /* read through its socket */
        uint8_t byte[256 / 8];
        unsigned n; /* distinct pairs (b . b) */
        bool other; /* anything else */
};

static int on_elem(struct nftnl_set_elem *el, void *data)
{
        struct seen *s = data;
        uint32_t len = 0;
        const uint8_t *k = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &len);
        static const uint8_t zero[3];

        /* Two 1-byte integers, each padded to a 4-byte register. */
        if (!k || len != 8 || k[0] != k[4] || memcmp(k + 1, zero, 3) || memcmp(k + 5, zero, 3)) {
                s->other = true;
                return 0;
        }
        if (!(s->byte[k[0] / 8] & 1u << (k[0] % 8))) {
                s->byte[k[0] / 8] |= (uint8_t)(1u << (k[0] % 8));
                s->n++;
        }
        return 0;
}

static int on_msg(const struct nlmsghdr *nlh, void *data)
{
        struct nftnl_set *set = nftnl_set_alloc();
        int r = MNL_CB_OK;

        if (!set)
                return MNL_CB_ERROR;
        if (nftnl_set_elems_nlmsg_parse(nlh, set) < 0 ||
            nftnl_set_elem_foreach(set, on_elem, data) < 0)
                r = MNL_CB_ERROR;
        nftnl_set_free(set);
        return r;
}

/* One dump of the set's elements into the struct seen at data, through
 * its fw's socket, from nothing seen: 0, -ENOENT (no table or set),
 * -EINTR (interrupted: read again) or -errno. */
static int dump_once(void *data)
{
        static _Thread_local char buf[65536]; /* the loop and the firewall lane */
        struct seen *s = data;
        struct nbd_fw *fw = s->fw;
        uint32_t seq = ++fw->seq;
        struct nftnl_set *set = nftnl_set_alloc();
        struct nlmsghdr *nlh;

        if (!set)
                return -ENOMEM;
        *s = (struct seen){.fw = fw};
        nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_NETDEV, NLM_F_DUMP, seq);
        if (nftnl_set_set_str(set, NFTNL_SET_TABLE, NBD_FW_TABLE) < 0 ||
            nftnl_set_set_str(set, NFTNL_SET_NAME, NBD_FW_SET_SAME_BYTE) < 0) {
                nftnl_set_free(set);
                return -ENOMEM;
        }
        nftnl_set_elems_nlmsg_build_payload(nlh, set);
        nftnl_set_free(set);
        if (mnl_socket_sendto(fw->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nbd_netlink_sent_nf(1);
        return nbd_nfsock_read_answer(fw->nl, buf, sizeof(buf), seq, on_msg, s);
}

int nbd_fw_same_byte_read(struct nbd_fw *fw, bool *ret)
{
        struct seen s = {.fw = fw};
        int r = nbd_nfsock_dump_tries(dump_once, &s);

        if (r == -ENOENT) {
                *ret = true;
                return 0;
        }
        if (r < 0)
                return r;
        *ret = !s.other && s.n == 256;
        return 0;
}

int nbd_fw_same_byte_ensure(struct nbd_fw *fw, const struct nbd_fw_owners *owners, uint32_t gen,
                            struct nbd_fw_items *it, size_t owner_idx)
{
        size_t mark = it->n;
        bool ours = true;
        int r = 0;

        /* Nobody has committed since our last commit: it is what we wrote. */
        if (!(owners->marked && owners->mark == gen))
                r = nbd_fw_same_byte_read(fw, &ours);
        if (r == 0 && !ours)
                r = nbd_fw_items_push(
                        it, (struct nbd_fw_item){NBD_FW_ITEM_SETFLUSH, NULL, NULL, owner_idx});
        if (r == 0 && !ours)
                r = nbd_fw_items_push(
                        it, (struct nbd_fw_item){NBD_FW_ITEM_SETELEMS, NULL, NULL, owner_idx});
        if (r < 0) {
                nbd_fw_items_clear(it, mark);
                return r;
        }
        if (!ours)
                nbd_notice("set %s holds what the helper did not write: made again",
                           NBD_FW_SET_SAME_BYTE);
        return 0;
}
