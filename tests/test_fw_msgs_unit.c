// SPDX-License-Identifier: LGPL-2.1-or-later
/* A transaction's messages (helper/fw_msgs.h, issue 14): encoded when an
 * owner is queued, so that its libnftnl objects can go at once, and
 * numbered in place when the batch is sent. */
#include <check.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_compile.h"
#include "fw_model.h"
#include "fw_msgs.h"
#include "tests_unit.h"

static struct nbd_fw_rule rules[2];
static struct nbd_fw_group group = {.name = "g", .rules = rules, .n_rules = 2};

/* An owner with a group chain per direction: chains, jumps and rules. */
static void compile(const char *owner, size_t idx, struct nbd_fw_items *it)
{
        struct nbd_fw_owner_spec s = {
                .owner = owner, .ifname = owner, .groups = &group, .n_groups = 1};
        char hash[NBD_FW_HASH_HEX];
        struct nbd_err err;
        unsigned n;

        memset(rules, 0, sizeof(rules));
        rules[0].dir = NBD_FW_DIR_FROM;
        rules[0].verdict = NBD_FW_V_DROP;
        ck_assert_int_eq(nbd_fw_parse_mac("52:54:00:00:00:01", &rules[0].ether_src), 0);
        rules[0].ether_src.neg = true;
        rules[1].dir = NBD_FW_DIR_TO;
        rules[1].verdict = NBD_FW_V_ACCEPT;
        nbd_fw_model_hash(&s, hash, &n);
        ck_assert_msg(nbd_fw_compile_owner(&s, idx, it, hash, n, &err) == 0, "compile: %s",
                      err.msg);
        ck_assert_uint_gt(it->n, 4);
}

static void items_free(struct nbd_fw_items *it)
{
        nbd_fw_items_clear(it, 0);
        free(it->v);
        memset(it, 0, sizeof(*it));
}

static const struct nlmsghdr *msg_at(const struct nbd_fw_msgs *m, size_t i)
{
        return (const struct nlmsghdr *)(m->buf + m->v[i].off);
}

START_TEST(test_each_item_is_one_message_byte_for_byte_and_outlives_its_objects)
{
        struct nbd_fw_items it = {0};
        struct nbd_fw_msgs m = {0};
        static char want[NBD_FW_ITEM_MSG_MAX];
        size_t n, rules_seen = 0;

        compile("vnet0", 3, &it);
        ck_assert_int_eq(nbd_fw_msgs_add(&m, &it), 0);
        n = it.n;
        ck_assert_uint_eq(m.n, n);
        /* Each is what the compiler builds for its item. */
        for (size_t i = 0; i < n; i++) {
                const struct nlmsghdr *h = msg_at(&m, i);
                /* Into zeroes: libnftnl leaves some padding unwritten (the
                 * last byte of a chain's message here), and the messages'
                 * must not hold another message's bytes: without the
                 * scratch's zeroing, message 2 differs from this build. */
                memset(want, 0, sizeof(want));
                ck_assert_int_eq(nbd_fw_item_build(want, &it.v[i], 0, false), 0);
                ck_assert_uint_eq(h->nlmsg_len, ((struct nlmsghdr *)want)->nlmsg_len);
                ck_assert_msg(memcmp(h, want, h->nlmsg_len) == 0, "message %zu differs", i);
                ck_assert_uint_eq(m.v[i].owner, 3);
                ck_assert_uint_eq(m.v[i].off % NLMSG_ALIGNTO, 0);
        }
        /* The objects go; the messages stay whole and read back. */
        items_free(&it);
        for (size_t i = 0; i < n; i++) {
                const struct nlmsghdr *h = msg_at(&m, i);
                struct nftnl_rule *r;
                if ((h->nlmsg_type & 0xff) != NFT_MSG_NEWRULE)
                        continue;
                r = nftnl_rule_alloc();
                ck_assert_ptr_nonnull(r);
                ck_assert_int_eq(nftnl_rule_nlmsg_parse(h, r), 0);
                ck_assert_msg(strncmp(nftnl_rule_get_str(r, NFTNL_RULE_CHAIN), "vnet0/", 6) == 0,
                              "rule of chain %s", nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
                nftnl_rule_free(r);
                rules_seen++;
        }
        ck_assert_uint_gt(rules_seen, 0);
        nbd_fw_msgs_free(&m);
}
END_TEST

START_TEST(test_messages_are_numbered_in_place_and_only_the_last_asks_for_an_ack)
{
        struct nbd_fw_items it = {0};
        struct nbd_fw_msgs m = {0};
        struct iovec iov;

        compile("vnet0", 0, &it);
        ck_assert_int_eq(nbd_fw_msgs_add(&m, &it), 0);
        items_free(&it);
        nbd_fw_msgs_number(&m, 1000, true, &iov);
        ck_assert_ptr_eq(iov.iov_base, m.buf);
        ck_assert_uint_eq(iov.iov_len, m.len);
        for (size_t i = 0; i < m.n; i++) {
                const struct nlmsghdr *h = msg_at(&m, i);
                ck_assert_uint_eq(h->nlmsg_seq, 1000 + i);
                ck_assert_int_eq(!!(h->nlmsg_flags & NLM_F_ACK), i + 1 == m.n);
                ck_assert(h->nlmsg_flags & NLM_F_REQUEST);
        }
        /* Numbered again (a later send; joined messages after them): no ack. */
        nbd_fw_msgs_number(&m, 7, false, &iov);
        for (size_t i = 0; i < m.n; i++) {
                ck_assert_uint_eq(msg_at(&m, i)->nlmsg_seq, 7 + i);
                ck_assert(!(msg_at(&m, i)->nlmsg_flags & NLM_F_ACK));
        }
        /* The messages walk as one stream, as the kernel reads them. */
        {
                int left = (int)iov.iov_len;
                size_t k = 0;
                for (const struct nlmsghdr *h = iov.iov_base; NLMSG_OK(h, left);
                     h = NLMSG_NEXT(h, left))
                        k++;
                ck_assert_uint_eq(k, m.n);
                ck_assert_int_eq(left, 0);
        }
        nbd_fw_msgs_free(&m);
}
END_TEST

START_TEST(test_a_truncated_op_leaves_the_messages_before_it_as_they_were)
{
        struct nbd_fw_items a = {0}, b = {0};
        struct nbd_fw_msgs m = {0};
        size_t n_a, len_a, len_b;
        char *copy, *copy_b;

        compile("vnet0", 0, &a);
        compile("vnet1", 1, &b);
        ck_assert_int_eq(nbd_fw_msgs_add(&m, &a), 0);
        n_a = m.n;
        len_a = m.len;
        copy = malloc(len_a);
        ck_assert_ptr_nonnull(copy);
        memcpy(copy, m.buf, len_a);
        ck_assert_int_eq(nbd_fw_msgs_add(&m, &b), 0);
        ck_assert_uint_eq(m.n, n_a + b.n);
        ck_assert_uint_eq(m.v[n_a].owner, 1);
        len_b = m.len;
        copy_b = malloc(len_b);
        ck_assert_ptr_nonnull(copy_b);
        memcpy(copy_b, m.buf, len_b);
        /* A failed op's messages go, and only they. */
        nbd_fw_msgs_truncate(&m, n_a);
        ck_assert_uint_eq(m.n, n_a);
        ck_assert_uint_eq(m.len, len_a);
        ck_assert(memcmp(m.buf, copy, len_a) == 0);
        /* Past the end: nothing changes. */
        nbd_fw_msgs_truncate(&m, n_a + 5);
        ck_assert_uint_eq(m.n, n_a);
        /* Added again, they come out the same, byte for byte. */
        ck_assert_int_eq(nbd_fw_msgs_add(&m, &b), 0);
        ck_assert_uint_eq(m.n, n_a + b.n);
        ck_assert_uint_eq(m.len, len_b);
        ck_assert(memcmp(m.buf, copy_b, len_b) == 0);
        free(copy);
        free(copy_b);
        items_free(&a);
        items_free(&b);
        nbd_fw_msgs_free(&m);
}
END_TEST

START_TEST(test_a_buffer_of_hundreds_of_owners_grows_and_keeps_every_message)
{
        struct nbd_fw_msgs m = {0};
        size_t per = 0;

        /* Past several doublings of the buffer and of the index. */
        for (size_t o = 0; o < 300; o++) {
                struct nbd_fw_items it = {0};
                char name[16];
                snprintf(name, sizeof(name), "vnet%zu", o);
                compile(name, o, &it);
                per = it.n;
                ck_assert_int_eq(nbd_fw_msgs_add(&m, &it), 0);
                items_free(&it);
        }
        ck_assert_uint_eq(m.n, 300 * per);
        ck_assert_uint_gt(m.cap, 4 * NBD_FW_ITEM_MSG_MAX);
        for (size_t i = 0; i < m.n; i++) {
                const struct nlmsghdr *h = msg_at(&m, i);
                ck_assert_uint_eq(m.v[i].owner, i / per);
                ck_assert_uint_le(m.v[i].off + h->nlmsg_len, m.len);
                ck_assert_uint_eq(h->nlmsg_type >> 8, NFNL_SUBSYS_NFTABLES);
        }
        nbd_fw_msgs_free(&m);
        ck_assert_ptr_null(m.buf);
        ck_assert_uint_eq(m.n, 0);
}
END_TEST

TCase *fw_msgs_unit_tcase(void)
{
        TCase *tc = tcase_create("fw_msgs");

        tcase_add_test(tc, test_each_item_is_one_message_byte_for_byte_and_outlives_its_objects);
        tcase_add_test(tc, test_messages_are_numbered_in_place_and_only_the_last_asks_for_an_ack);
        tcase_add_test(tc, test_a_truncated_op_leaves_the_messages_before_it_as_they_were);
        tcase_add_test(tc, test_a_buffer_of_hundreds_of_owners_grows_and_keeps_every_message);
        return tc;
}
