// SPDX-License-Identifier: LGPL-2.1-or-later
/* Op references without a kernel (helper/opref.c): what "op:K" may point
 * at, what it stands for in validation and when it runs, and the library's
 * nb_ref() that writes one. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "netbroker.h"
#include "opref.h"
#include "tests_unit.h"

/* A request: tap "vnet%d", bridge "br7", veth "v%d"/"vp" here, veth
 * "w%d"/"wp" with its peer elsewhere, ping, link set. */
struct req {
        Netbroker__TapCreate tap;
        Netbroker__BridgeCreate br;
        Netbroker__VethCreate veth, away;
        Netbroker__Ping ping;
        Netbroker__LinkSet set;
        Netbroker__Op op[6];
        Netbroker__Op *ops[6];
};

static void req_init(struct req *q)
{
        netbroker__tap_create__init(&q->tap);
        q->tap.name = "vnet%d";
        netbroker__bridge_create__init(&q->br);
        q->br.name = "br7";
        netbroker__veth_create__init(&q->veth);
        q->veth.name = "v%d";
        q->veth.peer_name = "vp";
        netbroker__veth_create__init(&q->away);
        q->away.name = "w%d";
        q->away.peer_name = "wp";
        q->away.has_peer_netns = true;
        netbroker__ping__init(&q->ping);
        netbroker__link_set__init(&q->set);
        q->set.name = "op:0";
        q->set.master = "op:1";
        for (size_t i = 0; i < 6; i++) {
                netbroker__op__init(&q->op[i]);
                q->ops[i] = &q->op[i];
        }
        q->op[0].op_case = NETBROKER__OP__OP_TAP_CREATE;
        q->op[0].tap_create = &q->tap;
        q->op[1].op_case = NETBROKER__OP__OP_BRIDGE_CREATE;
        q->op[1].bridge_create = &q->br;
        q->op[2].op_case = NETBROKER__OP__OP_VETH_CREATE;
        q->op[2].veth_create = &q->veth;
        q->op[3].op_case = NETBROKER__OP__OP_VETH_CREATE;
        q->op[3].veth_create = &q->away;
        q->op[4].op_case = NETBROKER__OP__OP_PING;
        q->op[4].ping = &q->ping;
        q->op[5].op_case = NETBROKER__OP__OP_LINK_SET;
        q->op[5].link_set = &q->set;
}

/* nbd_opref_check of s in op 5: its status, and the stand-in in *out. */
static int check(struct req *q, const bool *refused, const char *s, const char **out)
{
        Netbroker__Result res = NETBROKER__RESULT__INIT;
        int r;

        *out = NULL;
        r = nbd_opref_check(q->ops, 5, refused, s, out, &res);
        ck_assert_int_eq(r, -(int)res.status);
        if (res.message != protobuf_c_empty_string)
                free(res.message);
        return r;
}

START_TEST(test_opref_stands_for_an_explicit_name_or_itself_for_a_template)
{
        struct req q;
        const char *s;

        req_init(&q);
        ck_assert_int_eq(check(&q, NULL, "op:0", &s), 0);
        ck_assert_str_eq(s, "op:0"); /* a template: known when it has run */
        ck_assert_int_eq(check(&q, NULL, "op:1", &s), 0);
        ck_assert_str_eq(s, "br7");
        ck_assert_int_eq(check(&q, NULL, "op:2:peer", &s), 0);
        ck_assert_str_eq(s, "vp");
        ck_assert_int_eq(check(&q, NULL, "op:3", &s), 0);
}
END_TEST

START_TEST(test_opref_refusals)
{
        static const char *const bad[] = {
                "op:",   "op:x",      "op:01",
                "op:-1", "op:1:",     "op:1:peerx",
                "op:5",  "op:6",      "op:99999999999999999999999",
                "op:4",  "op:0:peer", "op:3:peer",
                "op:1 ",
        };
        bool refused[6] = {[1] = true};
        struct req q;
        const char *s;

        req_init(&q);
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
                ck_assert_msg(check(&q, NULL, bad[i], &s) == -EINVAL && !s, "%s was taken", bad[i]);
        ck_assert_int_eq(check(&q, refused, "op:1", &s), -EINVAL);
        ck_assert_int_eq(check(&q, refused, "op:0", &s), 0);
        /* Forward to an op that does make an interface: still refused. */
        {
                Netbroker__Result res = NETBROKER__RESULT__INIT;

                ck_assert_int_eq(nbd_opref_check(q.ops, 2, NULL, "op:3", &s, &res), -EINVAL);
                ck_assert_ptr_nonnull(strstr(res.message, "goes back to an earlier op"));
                free(res.message);
        }
}
END_TEST

START_TEST(test_opref_resolves_to_the_results_name_only_after_success)
{
        Netbroker__Result r[3], res = NETBROKER__RESULT__INIT;
        Netbroker__Result *results[3] = {&r[0], &r[1], &r[2]};
        const char *name = NULL;

        for (size_t i = 0; i < 3; i++)
                netbroker__result__init(&r[i]);
        r[0].ifname = "vnet4";
        r[0].peer_ifname = "vp";
        r[1].status = EEXIST;
        ck_assert_int_eq(nbd_opref_resolve(results, 2, "op:0", &name, &res), 0);
        ck_assert_str_eq(name, "vnet4");
        ck_assert_int_eq(nbd_opref_resolve(results, 2, "op:0:peer", &name, &res), 0);
        ck_assert_str_eq(name, "vp");
        ck_assert_int_eq(nbd_opref_resolve(results, 2, "op:1", &name, &res), -EINVAL);
        ck_assert_ptr_nonnull(strstr(res.message, "op 1 failed"));
        free(res.message);
        res.message = (char *)protobuf_c_empty_string;
        ck_assert_int_eq(nbd_opref_resolve(results, 2, "op:2", &name, &res), -EINVAL);
        free(res.message);
        ck_assert_str_eq(name, "vp"); /* untouched on failure */
}
END_TEST

START_TEST(test_nb_ref_writes_what_the_helper_reads)
{
        char buf[NB_REF_MAX], small[5] = "keep";
        struct req q;
        const char *s;

        req_init(&q);
        ck_assert_int_eq(nb_ref(2, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "op:2");
        ck_assert(nbd_opref_is(buf));
        ck_assert_int_eq(check(&q, NULL, buf, &s), 0);
        ck_assert_int_eq(nb_ref_peer(2, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "op:2:peer");
        ck_assert_int_eq(check(&q, NULL, buf, &s), 0);
        ck_assert_int_eq(nb_ref((size_t)-1, buf, sizeof(buf)), 0);
        ck_assert_int_eq(nb_ref(10, small, sizeof(small)), -ERANGE);
        ck_assert_str_eq(small, "keep");
        ck_assert_int_eq(nb_ref(1, NULL, 8), -EINVAL);
}
END_TEST

TCase *opref_tcase(void)
{
        TCase *tc = tcase_create("opref");

        tcase_add_test(tc, test_opref_stands_for_an_explicit_name_or_itself_for_a_template);
        tcase_add_test(tc, test_opref_refusals);
        tcase_add_test(tc, test_opref_resolves_to_the_results_name_only_after_success);
        tcase_add_test(tc, test_nb_ref_writes_what_the_helper_reads);
        return tc;
}
