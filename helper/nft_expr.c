// SPDX-License-Identifier: LGPL-2.1-or-later
/* See nft_expr.h. */
#include "nft_expr.h"

#include <errno.h>
#include <libnftnl/expr.h>
#include <libnftnl/udata.h>
#include <linux/netfilter/nf_tables.h>

int nbd_nft_add(struct nftnl_rule *r, struct nftnl_expr *e)
{
        if (!e)
                return -ENOMEM;
        nftnl_rule_add_expr(r, e);
        return 0;
}

int nbd_nft_payload(struct nftnl_rule *r, uint32_t reg, uint32_t base, uint32_t off, uint32_t len)
{
        struct nftnl_expr *e = nftnl_expr_alloc("payload");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
        return nbd_nft_add(r, e);
}

int nbd_nft_meta(struct nftnl_rule *r, uint32_t key)
{
        struct nftnl_expr *e = nftnl_expr_alloc("meta");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
        return nbd_nft_add(r, e);
}

int nbd_nft_mask(struct nftnl_rule *r, const void *mask, uint32_t len)
{
        struct nftnl_expr *e;
        uint8_t zero[16] = {0};

        if (len > sizeof(zero))
                return -EINVAL;
        e = nftnl_expr_alloc("bitwise");
        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
        nftnl_expr_set_data(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
        nftnl_expr_set_data(e, NFTNL_EXPR_BITWISE_XOR, zero, len);
        return nbd_nft_add(r, e);
}

int nbd_nft_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
        struct nftnl_expr *e = nftnl_expr_alloc("cmp");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        nftnl_expr_set_data(e, NFTNL_EXPR_CMP_DATA, data, len);
        return nbd_nft_add(r, e);
}

int nbd_nft_counter(struct nftnl_rule *r)
{
        return nbd_nft_add(r, nftnl_expr_alloc("counter"));
}

int nbd_nft_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
        struct nftnl_expr *e = nftnl_expr_alloc("immediate");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
        /* A jump whose chain was not copied would go to no chain. */
        if (chain && nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain) < 0) {
                nftnl_expr_free(e);
                return -ENOMEM;
        }
        return nbd_nft_add(r, e);
}

int nbd_nft_reject(struct nftnl_rule *r)
{
        struct nftnl_expr *e = nftnl_expr_alloc("reject");

        if (!e)
                return -ENOMEM;
        nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
        nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, NFT_REJECT_ICMPX_PORT_UNREACH);
        return nbd_nft_add(r, e);
}

int nbd_nft_chain_comment(struct nftnl_chain *c, const char *text)
{
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        int r = 0;

        if (!u)
                return -ENOMEM;
        if (!nftnl_udata_put_strz(u, 0, text))
                r = -E2BIG;
        else if (nftnl_chain_set_data(c, NFTNL_CHAIN_USERDATA, nftnl_udata_buf_data(u),
                                      nftnl_udata_buf_len(u)) < 0)
                r = -ENOMEM;
        nftnl_udata_buf_free(u);
        return r;
}
