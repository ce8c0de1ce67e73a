// SPDX-License-Identifier: LGPL-2.1-or-later
/* The compiled rules of one owner as text, for tests: what the kernel
 * would be sent, read back through libnftnl's parser. Only tests link it;
 * netbrokerd has no use for it. */
#include "fw_render.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_compile.h"

int nbd_fw_render(const struct nbd_fw_owner_spec *s, char **ret_text, struct nbd_err *e)
{
        char hash[NBD_FW_HASH_HEX], buf[MNL_SOCKET_BUFFER_SIZE], line[4096];
        struct nbd_fw_items it = {0};
        unsigned rules;
        size_t len = 0;
        char *text = NULL;
        FILE *f = open_memstream(&text, &len);
        int r = -ENOMEM;

        if (f) {
                nbd_fw_model_hash(s, hash, &rules);
                r = nbd_fw_compile_owner(s, 0, &it, hash, rules, e);
        } else {
                nbd_err_oom(e, "rendering the rules");
        }

        for (size_t i = 0; r == 0 && i < it.n; i++) {
                struct nftnl_rule *back;
                struct nlmsghdr *nlh;

                /* The shared set is a constant of the compiler's. */
                if (it.v[i].kind == NBD_FW_ITEM_SET || it.v[i].kind == NBD_FW_ITEM_SETELEMS) {
                        fprintf(f, "%s %s\n", it.v[i].kind == NBD_FW_ITEM_SET ? "set" : "elements",
                                NBD_FW_SET_SAME_BYTE);
                        continue;
                }
                if (it.v[i].kind == NBD_FW_ITEM_CHAIN) {
                        fprintf(f, "chain %s\n",
                                nftnl_chain_get_str(it.v[i].chain, NFTNL_CHAIN_NAME));
                        continue;
                }
                /* The rule's text (fw_text.h) is derived from the model and
                 * tested on its own: the expressions only. (Unset here, not
                 * on the copy parsed back: libnftnl prints a rule's
                 * userdata by its length, which unset leaves.) */
                nftnl_rule_unset(it.v[i].rule, NFTNL_RULE_USERDATA);
                /* Through the netlink encoding and back, as the kernel gets it. */
                nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWRULE, NFPROTO_NETDEV, 0, 0);
                nftnl_rule_nlmsg_build_payload(nlh, it.v[i].rule);
                back = nftnl_rule_alloc();
                if (!back) {
                        r = nbd_err_oom(e, "rendering the rules");
                } else if ((errno = 0, nftnl_rule_nlmsg_parse(nlh, back) < 0)) {
                        r = errno == ENOMEM
                                    ? nbd_err_oom(e, "parsing back a compiled rule")
                                    : nbd_err_set(e, -EINVAL,
                                                  "libnftnl cannot parse back a compiled rule");
                } else {
                        /* One line per rule: the expressions, without the
                         * "family table chain" line libnftnl starts with. */
                        char *p = line, *nl;
                        nftnl_rule_snprintf(line, sizeof(line), back, NFTNL_OUTPUT_DEFAULT, 0);
                        if ((nl = strchr(p, '\n')))
                                p = nl + 1;
                        fputs("  ", f);
                        for (bool space = true; *p; p++) {
                                bool ws = *p == ' ' || *p == '\n';
                                if (!ws || !space)
                                        fputc(ws ? ' ' : *p, f);
                                space = ws;
                        }
                        fputc('\n', f);
                }
                if (back) /* libnftnl's free functions do not take NULL */
                        nftnl_rule_free(back);
        }
        nbd_fw_items_clear(&it, 0);
        free(it.v);
        /* A memstream that could not grow has lost what was written. */
        if (f) {
                bool lost = ferror(f);
                if (fclose(f) != 0)
                        lost = true;
                if (lost && r == 0)
                        r = nbd_err_oom(e, "rendering the rules");
        }
        if (r < 0) {
                free(text);
                return r;
        }
        *ret_text = text;
        return 0;
}
