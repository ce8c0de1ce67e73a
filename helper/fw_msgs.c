// SPDX-License-Identifier: LGPL-2.1-or-later
#include "fw_msgs.h"

#include <errno.h>
#include <linux/netlink.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Room for one more message at the end: doubling, so that a buffer of
 * tens of megabytes grows a few dozen times (glibc moves a block it
 * mmap()ed with mremap(), without copying; one on the heap, below its
 * dynamic mmap threshold, is copied). */
static int reserve(struct nbd_fw_msgs *m)
{
        size_t ncap = m->cap ? m->cap : 4 * NBD_FW_ITEM_MSG_MAX;
        char *p;

        if (m->cap - m->len >= NBD_FW_ITEM_MSG_MAX)
                return 0;
        while (ncap - m->len < NBD_FW_ITEM_MSG_MAX)
                ncap *= 2;
        p = realloc(m->buf, ncap);
        if (!p)
                return -ENOMEM;
        m->buf = p;
        m->cap = ncap;
        return 0;
}

static int reserve_index(struct nbd_fw_msgs *m)
{
        size_t ncap = m->cap_v ? 2 * m->cap_v : 256;
        struct nbd_fw_msg *p;

        if (m->n < m->cap_v)
                return 0;
        p = realloc(m->v, ncap * sizeof(*p));
        if (!p)
                return -ENOMEM;
        m->v = p;
        m->cap_v = ncap;
        return 0;
}

int nbd_fw_msgs_add(struct nbd_fw_msgs *m, const struct nbd_fw_items *it)
{
        size_t mark = m->n;
        int r = 0;

        for (size_t i = 0; i < it->n && r == 0; i++) {
                r = reserve(m);
                if (r == 0)
                        r = reserve_index(m);
                if (r == 0 && !m->scratch && !(m->scratch = calloc(1, NBD_FW_ITEM_MSG_MAX)))
                        r = -ENOMEM;
                if (r == 0)
                        r = nbd_fw_item_build(m->scratch, &it->v[i], 0, false);
                if (r == 0) {
                        size_t len = NLMSG_ALIGN(((struct nlmsghdr *)m->scratch)->nlmsg_len);
                        /* The model bounds a message far below the room
                         * (a rule, a chain, the set's 256 elements): past
                         * it, memory is already overwritten. */
                        if (len > NBD_FW_ITEM_MSG_MAX)
                                abort();
                        memcpy(m->buf + m->len, m->scratch, len);
                        /* libnftnl leaves some attributes' padding as it
                         * was: zero again, so no byte the kernel gets is
                         * left over from another message. */
                        memset(m->scratch, 0, len);
                        m->v[m->n++] = (struct nbd_fw_msg){.off = m->len, .owner = it->v[i].owner};
                        m->len += len;
                }
        }
        if (r < 0)
                nbd_fw_msgs_truncate(m, mark);
        return r;
}

void nbd_fw_msgs_truncate(struct nbd_fw_msgs *m, size_t n)
{
        if (n >= m->n)
                return;
        m->len = m->v[n].off;
        m->n = n;
}

void nbd_fw_msgs_number(struct nbd_fw_msgs *m, uint32_t first, bool ack_last, struct iovec *ret)
{
        for (size_t i = 0; i < m->n; i++) {
                struct nlmsghdr *h = (struct nlmsghdr *)(m->buf + m->v[i].off);
                h->nlmsg_seq = first + (uint32_t)i;
                if (ack_last && i + 1 == m->n)
                        h->nlmsg_flags |= NLM_F_ACK;
                else
                        h->nlmsg_flags &= (uint16_t)~NLM_F_ACK;
        }
        *ret = (struct iovec){.iov_base = m->buf, .iov_len = m->len};
}

void nbd_fw_msgs_free(struct nbd_fw_msgs *m)
{
        free(m->buf);
        free(m->v);
        free(m->scratch);
        *m = (struct nbd_fw_msgs){0};
}
