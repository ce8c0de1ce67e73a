/* The commands libvirt's nwfilter ebiptables driver ran for one guest
 * interface with clean-traffic and no-promisc, as of 2018 (the version of
 * src/nwfilter/nwfilter_ebiptables_driver.c with virFirewall, before the
 * nftables rework), when there was no firewalld: one ebtables, iptables or
 * ip6tables process per command.
 *
 * The filters, from libvirt's src/nwfilter/xml/ (chain, priority):
 *   clean-traffic (root): no-mac-spoofing, no-ip-spoofing, accept IPv4 out
 *     (-650), allow-incoming-ipv4, no-arp-spoofing, accept ARP inout
 *     (-500), no-other-l2-traffic, qemu-announce-self
 *   no-mac-spoofing (mac, -800): out: return if source MAC is $MAC; drop
 *   no-ip-spoofing (ipv4-ip, -710): out: return UDP from 0.0.0.0 (100);
 *     return from $IP (500); drop (1000)
 *   allow-incoming-ipv4 (ipv4, -700): in: accept
 *   no-arp-spoofing: no-arp-mac-spoofing (arp-mac, -520): out: return if
 *     the ARP sender MAC is $MAC (350), drop (1000); no-arp-ip-spoofing
 *     (arp-ip, -510): out: return if the ARP sender IP is $IP (400), drop
 *   no-other-l2-traffic (root): inout: drop (1000)
 *   qemu-announce-self (root): out: accept ether type 0x835 (500);
 *     qemu-announce-self-rarp (rarp, -400): accept qemu's RARP announce out
 *     and in (500); no-other-rarp-traffic (rarp): inout: drop (1000)
 * no-promisc is not one of libvirt's filters; the 2018 report's setup had
 * its own. Here, as a filter of chain mac: in: return if the destination
 * is $MAC, broadcast or multicast; drop.
 * libvirt's 'out' is from the guest (chains libvirt-I-<if>, I-<if>-<chain>,
 * their temporary names J...), 'in' is to the guest (O..., temporary P...).
 *
 * What one instantiation runs (virNWFilterInstantiate in
 * nwfilter_gentech_driver.c, at VM start and again for every running VM when
 * libvirtd restarts, qemuProcessReconnect): techdriver->applyNewRules, then
 * techdriver->tearOldRules. virFirewall prepends --concurrent to ebtables
 * and -w to ip(6)tables when they support it. Commands added by a query
 * callback (ebtables -L, then -F/-X/-E for each "-j X-..." line it prints)
 * run at the end of their transaction (virFirewallApplyGroup walks a list
 * that grows). Every ebtables rule here is an Ethernet-layer rule (<mac>,
 * <ip>, <arp>, <rarp> and rules without protocol;
 * virNWFilterRuleIsProtocolEthernet), so applyNewRules creates no iptables
 * chains (its iptablesCreateBaseChainsFW and FI-/FO-/HI- chains are under
 * haveIptables); tearOldRules runs its iptables and ip6tables part
 * unconditionally, and those commands fail, as they did then.
 *
 * The list is computed for the state the commands find (START: nothing of
 * the guest exists; RESTART: the chains of the previous instantiation do),
 * which is what libvirt's query callbacks would have found; the bench checks
 * every query's output against it (struct rs_cmd, jumps). */
#include "restart.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

void rs_guest_init(struct rs_guest *g, unsigned index)
{
        *g = (struct rs_guest){.index = index};
        snprintf(g->ifname, sizeof(g->ifname), "vnet%u", index % 100000u);
        snprintf(g->mac, sizeof(g->mac), "52:54:00:%02x:%02x:%02x", (index >> 16) & 0xffu,
                 (index >> 8) & 0xffu, index & 0xffu);
        snprintf(g->ip, sizeof(g->ip), "10.%u.%u.%u", 1u + (index / 250u / 250u) % 250u,
                 (index / 250u) % 250u, index % 250u + 2u);
}

/* ---- building commands ---- */

static const char *const tool_prefix[RS_N_TOOLS] = {
        [RS_EBTABLES] = "ebtables --concurrent -t nat ",
        [RS_IPTABLES] = "iptables -w ",
        [RS_IP6TABLES] = "ip6tables -w ",
};

static int add_v(struct rs_cmdlist *l, enum rs_tool tool, enum rs_expect expect, int jumps,
                 const char *prefixes, const char *fmt, va_list ap)
{
        struct rs_cmd *c;
        char line[512];
        size_t k = 0, plen = strlen(tool_prefix[tool]);
        char *save = NULL;
        int n;

        memcpy(line, tool_prefix[tool], plen);
        n = vsnprintf(line + plen, sizeof(line) - plen, fmt, ap);
        if (n < 0 || (size_t)n >= sizeof(line) - plen)
                return -E2BIG;
        if (l->n == l->cap) {
                size_t ncap = l->cap ? l->cap * 2 : 256;
                struct rs_cmd *p = realloc(l->v, ncap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                l->v = p;
                l->cap = ncap;
        }
        c = &l->v[l->n];
        *c = (struct rs_cmd){.tool = tool, .expect = expect, .jumps = jumps};
        if (prefixes)
                snprintf(c->jump_prefixes, sizeof(c->jump_prefixes), "%s", prefixes);
        c->buf = strdup(line);
        if (!c->buf)
                return -ENOMEM;
        /* No argument has a space in it: split on spaces. */
        for (char *t = strtok_r(c->buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                if (k + 1 >= RS_MAX_ARGS) {
                        free(c->buf);
                        return -E2BIG;
                }
                c->argv[k++] = t;
        }
        c->argv[k] = NULL;
        l->n++;
        return 0;
}

/* A command whose output nobody reads. */
static int add(struct rs_cmdlist *l, enum rs_tool tool, enum rs_expect expect, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int add(struct rs_cmdlist *l, enum rs_tool tool, enum rs_expect expect, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = add_v(l, tool, expect, -1, NULL, fmt, ap);
        va_end(ap);
        return r;
}

/* An ebtables -L whose output a query callback reads. */
static int query(struct rs_cmdlist *l, enum rs_expect expect, int jumps, const char *prefixes,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int query(struct rs_cmdlist *l, enum rs_expect expect, int jumps, const char *prefixes,
                 const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = add_v(l, RS_EBTABLES, expect, jumps, prefixes, fmt, ap);
        va_end(ap);
        return r;
}

void rs_cmdlist_clear(struct rs_cmdlist *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i].buf);
        free(l->v);
        *l = (struct rs_cmdlist){0};
}

int rs_count_jumps(const struct rs_cmd *c, const char *out, size_t len)
{
        const char *p = out, *end = out + len;
        int n = 0;

        /* ebtablesRemoveSubChainsQuery and ebtablesRenameTmpSubAndRootChainsQuery:
         * strstr(line, "-j "), then a prefix letter followed by '-'. */
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *eol = nl ? nl : end;
                const char *j = p;

                for (; j + 3 < eol; j++)
                        if (memcmp(j, "-j ", 3) == 0)
                                break;
                if (j + 4 < eol && j[4] == '-' && strchr(c->jump_prefixes, j[3]) && j[3])
                        n++;
                p = eol + 1;
        }
        return n;
}

void rs_cmd_print(const struct rs_cmd *c, FILE *f)
{
        for (size_t i = 0; c->argv[i]; i++)
                fprintf(f, "%s%s", i ? " " : "", c->argv[i]);
}

/* ---- the filters ---- */

enum dir {
        D_OUT = 1, /* libvirt's 'out': from the guest, chains I/J */
        D_IN = 2, /* libvirt's 'in': to the guest, chains O/P */
        D_INOUT = 3,
};

/* The sub-chains, in the order ebiptablesApplyNewRules creates them: by
 * chain priority (ebtablesSubChainInstSort), the incoming set (J) before
 * the outgoing one (P) at equal priority. `proto` is the -p of the jump
 * from the root chain (ebtablesCreateTmpSubChainFW: from the chain name's
 * prefix; none for mac). */
static const struct subchain {
        const char *name;
        int priority;
        enum dir dir;
        const char *proto;
} subchains[] = {
        {"mac", -800, D_OUT, NULL},         {"mac", -800, D_IN, NULL},
        {"ipv4-ip", -710, D_OUT, "0x0800"}, {"ipv4", -700, D_IN, "0x0800"},
        {"arp-mac", -520, D_OUT, "0x0806"}, {"arp-ip", -510, D_OUT, "0x0806"},
        {"rarp", -400, D_OUT, "0x8035"},    {"rarp", -400, D_IN, "0x8035"},
};
#define N_SUBCHAINS (sizeof(subchains) / sizeof(*subchains))

/* Every rule of the filters, in the order libvirt walks them (filterrefs
 * depth first). `chain` NULL is the root chain. `args` is what
 * ebtablesCreateRuleInstance prints after "-A <chain>" (Ethernet header
 * first, then -p and the protocol's fields, then -j); $MAC and $IP are the
 * filter's variables. */
static const struct rule {
        const char *chain;
        int priority;
        enum dir dir;
        const char *args;
} rules[] = {
        /* no-mac-spoofing */
        {"mac", 500, D_OUT, "-s $MAC -j RETURN"},
        {"mac", 500, D_OUT, "-j DROP"},
        /* no-ip-spoofing */
        {"ipv4-ip", 100, D_OUT, "-p ipv4 --ip-source 0.0.0.0 --ip-protocol 17 -j RETURN"},
        {"ipv4-ip", 500, D_OUT, "-p ipv4 --ip-source $IP -j RETURN"},
        {"ipv4-ip", 1000, D_OUT, "-j DROP"},
        /* clean-traffic: IPv4 from the guest */
        {NULL, -650, D_OUT, "-p 0x800 -j ACCEPT"},
        /* allow-incoming-ipv4 */
        {"ipv4", 500, D_IN, "-j ACCEPT"},
        /* no-arp-spoofing: no-arp-mac-spoofing, no-arp-ip-spoofing */
        {"arp-mac", 350, D_OUT, "-p 0x806 --arp-mac-src $MAC -j RETURN"},
        {"arp-mac", 1000, D_OUT, "-j DROP"},
        {"arp-ip", 400, D_OUT, "-p 0x806 --arp-ip-src $IP/32 -j RETURN"},
        {"arp-ip", 1000, D_OUT, "-j DROP"},
        /* clean-traffic: other ARP */
        {NULL, -500, D_INOUT, "-p 0x806 -j ACCEPT"},
        /* no-other-l2-traffic */
        {NULL, 1000, D_INOUT, "-j DROP"},
        /* qemu-announce-self, qemu-announce-self-rarp, no-other-rarp-traffic */
        {NULL, 500, D_OUT, "-p 0x835 -j ACCEPT"},
        {"rarp", 500, D_OUT,
         "-s $MAC -d ff:ff:ff:ff:ff:ff -p 0x8035 --arp-opcode 3 --arp-ip-src 0.0.0.0/32 "
         "--arp-ip-dst 0.0.0.0/32 --arp-mac-src $MAC --arp-mac-dst $MAC -j ACCEPT"},
        {"rarp", 500, D_IN,
         "-d ff:ff:ff:ff:ff:ff -p 0x8035 --arp-opcode 3 --arp-ip-src 0.0.0.0/32 "
         "--arp-ip-dst 0.0.0.0/32 --arp-mac-src $MAC --arp-mac-dst $MAC -j ACCEPT"},
        {"rarp", 1000, D_INOUT, "-j DROP"},
        /* no-promisc */
        {"mac", 500, D_IN, "-d $MAC -j RETURN"},
        {"mac", 500, D_IN, "-d ff:ff:ff:ff:ff:ff -j RETURN"},
        {"mac", 500, D_IN, "-d 01:00:00:00:00:00/01:00:00:00:00:00 -j RETURN"},
        {"mac", 500, D_IN, "-j DROP"},
};
#define N_RULES (sizeof(rules) / sizeof(*rules))

/* virNWFilterRuleInstSort: root-chain rules first, then by priority (glibc's
 * qsort is a merge sort: equal priorities keep the filters' order). */
static bool rule_before(const struct rule *a, const struct rule *b)
{
        if (!a->chain != !b->chain)
                return !a->chain;
        return a->priority < b->priority;
}

static void sorted_rules(const struct rule **out)
{
        for (size_t i = 0; i < N_RULES; i++) {
                size_t k = i;
                for (; k > 0 && rule_before(&rules[i], out[k - 1]); k--)
                        out[k] = out[k - 1];
                out[k] = &rules[i];
        }
}

/* "-s $MAC -j RETURN" with the guest's values. */
static int expand(const struct rs_guest *g, const char *args, char *buf, size_t len)
{
        size_t o = 0;

        for (const char *p = args; *p;) {
                const char *val = NULL;
                size_t skip = 0, vlen;

                if (strncmp(p, "$MAC", 4) == 0)
                        val = g->mac, skip = 4;
                else if (strncmp(p, "$IP", 3) == 0)
                        val = g->ip, skip = 3;
                if (!val) {
                        if (o + 1 >= len)
                                return -E2BIG;
                        buf[o++] = *p++;
                        continue;
                }
                vlen = strlen(val);
                if (o + vlen >= len)
                        return -E2BIG;
                memcpy(buf + o, val, vlen);
                o += vlen;
                p += skip;
        }
        buf[o] = '\0';
        return 0;
}

/* ---- ebiptablesApplyNewRules ---- */

static char dir_prefix(enum dir d, bool temporary)
{
        if (d == D_OUT)
                return temporary ? 'J' : 'I';
        return temporary ? 'P' : 'O';
}

/* ebtablesCreateTmpSubChainFW */
static int create_tmp_subchain(struct rs_cmdlist *l, const char *x, const struct subchain *s)
{
        char p = dir_prefix(s->dir, true);
        int r;

        /* virFirewallAddRuleFull(..., ignoreErrors = true, ...): the chain
         * is not there, -F and -X fail. */
        r = add(l, RS_EBTABLES, RS_EXPECT_FAIL, "-F %c-%s-%s", p, x, s->name);
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_EXPECT_FAIL, "-X %c-%s-%s", p, x, s->name);
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_MUST_SUCCEED, "-N %c-%s-%s", p, x, s->name);
        if (r == 0 && s->proto)
                r = add(l, RS_EBTABLES, RS_MUST_SUCCEED, "-A libvirt-%c-%s -p %s -j %c-%s-%s", p, x,
                        s->proto, p, x, s->name);
        else if (r == 0)
                r = add(l, RS_EBTABLES, RS_MUST_SUCCEED, "-A libvirt-%c-%s -j %c-%s-%s", p, x, p, x,
                        s->name);
        return r;
}

/* ebtablesCreateRuleInstance, once per direction (ebiptablesCreateRuleInstance:
 * 'out' and 'inout' go to the J chain, 'in' and 'inout' to the P chain). */
static int rule_commands(struct rs_cmdlist *l, const struct rs_guest *g, const struct rule *ru)
{
        static const enum dir dirs[] = {D_OUT, D_IN};
        char args[256], chain[48];
        int r = expand(g, ru->args, args, sizeof(args));

        for (size_t i = 0; i < 2 && r == 0; i++) {
                char p = dir_prefix(dirs[i], true);
                if (!(ru->dir & dirs[i]))
                        continue;
                if (ru->chain)
                        snprintf(chain, sizeof(chain), "%c-%s-%s", p, g->ifname, ru->chain);
                else
                        snprintf(chain, sizeof(chain), "libvirt-%c-%s", p, g->ifname);
                r = add(l, RS_EBTABLES, RS_MUST_SUCCEED, "-A %s %s", chain, args);
        }
        return r;
}

static int apply_new_rules(struct rs_cmdlist *l, const struct rs_guest *g)
{
        const struct rule *order[N_RULES];
        const char *x = g->ifname;
        size_t j = 0;
        int r;

        /* Transaction 1, errors ignored: whatever temporary chains a failed
         * earlier run left (none here). ebtablesUnlinkTmpRootChainFW in and
         * out, ebtablesRemoveTmpSubChainsFW (its queries find no chain),
         * ebtablesRemoveTmpRootChainFW in and out. */
        r = add(l, RS_EBTABLES, RS_EXPECT_FAIL, "-D PREROUTING -i %s -j libvirt-J-%s", x, x);
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_EXPECT_FAIL, "-D POSTROUTING -o %s -j libvirt-P-%s", x,
                        x);
        if (r == 0)
                r = query(l, RS_EXPECT_FAIL, 0, "JP", "-L libvirt-J-%s", x);
        if (r == 0)
                r = query(l, RS_EXPECT_FAIL, 0, "JP", "-L libvirt-P-%s", x);
        for (const char *p = "JP"; *p && r == 0; p++) {
                r = add(l, RS_EBTABLES, RS_EXPECT_FAIL, "-F libvirt-%c-%s", *p, x);
                if (r == 0)
                        r = add(l, RS_EBTABLES, RS_EXPECT_FAIL, "-X libvirt-%c-%s", *p, x);
        }

        /* Transaction 2: ebtablesCreateTmpRootChainFW in and out, then the
         * rules in virNWFilterRuleInstSort order with each sub-chain created
         * (ebtablesCreateTmpSubChainFW) before the first rule whose priority
         * is not below the chain's; then ebtablesLinkTmpRootChainFW. */
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_MUST_SUCCEED, "-N libvirt-J-%s", x);
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_MUST_SUCCEED, "-N libvirt-P-%s", x);
        sorted_rules(order);
        for (size_t i = 0; i < N_RULES && r == 0; i++) {
                while (j < N_SUBCHAINS && subchains[j].priority <= order[i]->priority && r == 0)
                        r = create_tmp_subchain(l, x, &subchains[j++]);
                if (r == 0)
                        r = rule_commands(l, g, order[i]);
        }
        while (j < N_SUBCHAINS && r == 0)
                r = create_tmp_subchain(l, x, &subchains[j++]);
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_MUST_SUCCEED, "-A PREROUTING -i %s -j libvirt-J-%s", x,
                        x);
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_MUST_SUCCEED, "-A POSTROUTING -o %s -j libvirt-P-%s", x,
                        x);
        return r;
}

/* ---- ebiptablesTearOldRules: one transaction, errors ignored ---- */

/* iptablesUnlinkRootChainsFW, iptablesRemoveRootChainsFW and
 * iptablesRenameTmpRootChainsFW for one layer: none of the chains exists. */
static int tear_old_ip(struct rs_cmdlist *l, enum rs_tool t, const char *x)
{
        static const char *const root[] = {"FO", "FI", "HI"}, *const tmp[] = {"FP", "FJ", "HJ"};
        const enum rs_expect f = RS_EXPECT_FAIL;
        int r;

        r = add(l, t, f, "-D libvirt-out -m physdev --physdev-is-bridged --physdev-out %s -g FO-%s",
                x, x);
        /* "Previous versions of libvirt may have created a rule with the
         * --physdev-is-bridged missing" */
        if (r == 0)
                r = add(l, t, f, "-D libvirt-out -m physdev --physdev-out %s -g FO-%s", x, x);
        if (r == 0)
                r = add(l, t, f, "-D libvirt-in -m physdev --physdev-in %s -g FI-%s", x, x);
        if (r == 0)
                r = add(l, t, f, "-D libvirt-host-in -m physdev --physdev-in %s -g HI-%s", x, x);
        for (size_t i = 0; i < 3 && r == 0; i++) {
                r = add(l, t, f, "-F %s-%s", root[i], x);
                if (r == 0)
                        r = add(l, t, f, "-X %s-%s", root[i], x);
        }
        for (size_t i = 0; i < 3 && r == 0; i++)
                r = add(l, t, f, "-E %s-%s %s-%s", tmp[i], x, root[i], x);
        return r;
}

static int tear_old_rules(struct rs_cmdlist *l, const struct rs_guest *g, enum rs_phase phase)
{
        const bool old = phase == RS_RESTART; /* the previous instantiation's chains exist */
        const enum rs_expect e_old = old ? RS_EXPECT_OK : RS_EXPECT_FAIL;
        const char *x = g->ifname;
        int n_in = 0, n_out = 0, r;

        for (size_t i = 0; i < N_SUBCHAINS; i++) {
                if (subchains[i].dir == D_OUT)
                        n_in++;
                else
                        n_out++;
        }
        r = tear_old_ip(l, RS_IPTABLES, x);
        if (r == 0)
                r = tear_old_ip(l, RS_IP6TABLES, x);

        /* ebtablesUnlinkRootChainFW in and out */
        if (r == 0)
                r = add(l, RS_EBTABLES, e_old, "-D PREROUTING -i %s -j libvirt-I-%s", x, x);
        if (r == 0)
                r = add(l, RS_EBTABLES, e_old, "-D POSTROUTING -o %s -j libvirt-O-%s", x, x);
        /* ebtablesRemoveSubChainsFW: list the old root chains; the callback
         * (ebtablesRemoveSubChainsQuery) adds -L, -F, -X for every I-/O-
         * chain they jump to, run at the end of the transaction. */
        if (r == 0)
                r = query(l, e_old, old ? n_in : 0, "IO", "-L libvirt-I-%s", x);
        if (r == 0)
                r = query(l, e_old, old ? n_out : 0, "IO", "-L libvirt-O-%s", x);
        /* ebtablesRemoveRootChainFW in and out */
        for (const char *p = "IO"; *p && r == 0; p++) {
                r = add(l, RS_EBTABLES, e_old, "-F libvirt-%c-%s", *p, x);
                if (r == 0)
                        r = add(l, RS_EBTABLES, e_old, "-X libvirt-%c-%s", *p, x);
        }
        /* ebtablesRenameTmpSubAndRootChainsFW: list the new (temporary)
         * root chains, whose callback renames each J-/P- sub-chain; then
         * ebtablesRenameTmpRootChainFW in and out. */
        if (r == 0)
                r = query(l, RS_EXPECT_OK, n_in, "JP", "-L libvirt-J-%s", x);
        if (r == 0)
                r = query(l, RS_EXPECT_OK, n_out, "JP", "-L libvirt-P-%s", x);
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_EXPECT_OK, "-E libvirt-J-%s libvirt-I-%s", x, x);
        if (r == 0)
                r = add(l, RS_EBTABLES, RS_EXPECT_OK, "-E libvirt-P-%s libvirt-O-%s", x, x);

        /* The callbacks' commands, in the order the queries ran. First the
         * old sub-chains (RESTART only): ebtablesRemoveSubChainsQuery. */
        for (size_t pass = 0; pass < 2 && old; pass++)
                for (size_t i = 0; i < N_SUBCHAINS && r == 0; i++) {
                        const struct subchain *s = &subchains[i];
                        char p = dir_prefix(s->dir, false);
                        if ((pass == 0) != (s->dir == D_OUT))
                                continue;
                        r = query(l, RS_EXPECT_OK, 0, "IO", "-L %c-%s-%s", p, x, s->name);
                        if (r == 0)
                                r = add(l, RS_EBTABLES, RS_EXPECT_OK, "-F %c-%s-%s", p, x, s->name);
                        if (r == 0)
                                r = add(l, RS_EBTABLES, RS_EXPECT_OK, "-X %c-%s-%s", p, x, s->name);
                }
        /* Then ebtablesRenameTmpSubAndRootChainsQuery for each new sub-chain:
         * list it, flush and delete the final name (gone by now), rename. */
        for (size_t pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < N_SUBCHAINS && r == 0; i++) {
                        const struct subchain *s = &subchains[i];
                        char tp = dir_prefix(s->dir, true), p = dir_prefix(s->dir, false);
                        if ((pass == 0) != (s->dir == D_OUT))
                                continue;
                        r = query(l, RS_EXPECT_OK, 0, "JP", "-L %c-%s-%s", tp, x, s->name);
                        if (r == 0)
                                r = add(l, RS_EBTABLES, RS_EXPECT_FAIL, "-F %c-%s-%s", p, x,
                                        s->name);
                        if (r == 0)
                                r = add(l, RS_EBTABLES, RS_EXPECT_FAIL, "-X %c-%s-%s", p, x,
                                        s->name);
                        if (r == 0)
                                r = add(l, RS_EBTABLES, RS_EXPECT_OK, "-E %c-%s-%s %c-%s-%s", tp, x,
                                        s->name, p, x, s->name);
                }
        return r;
}

int rs_cmds_instantiate(struct rs_cmdlist *l, const struct rs_guest *g, enum rs_phase phase)
{
        int r = apply_new_rules(l, g);

        if (r == 0)
                r = tear_old_rules(l, g, phase);
        return r;
}

/* ---- N: the same filters as one nftables file ----
 *
 * What netbrokerd installs for no-promisc + clean-traffic (helper/firewall.c,
 * read back with `nft list table netdev netbroker`), written in nft's
 * language: a netdev table; for each tap a base chain at its ingress hook
 * (from the guest) and one at its egress hook (to the guest), each jumping
 * to one regular chain per filter group, in the groups' order; RETURN leaves
 * a group. Same chains, same rules, same matches: C and N differ only in how
 * the rules reach the kernel. */
int rs_nft_write(FILE *f, const struct rs_guest *guests, size_t n)
{
        static const char *const from[] = {"no-mac-spoofing", "no-ip-spoofing", "no-arp-spoofing",
                                           "clean-traffic", "no-other-l2-traffic"};
        static const char *const to[] = {"no-promisc", "clean-traffic", "no-other-l2-traffic"};

        fprintf(f, "table netdev " RS_NFT_TABLE " {\n");
        for (size_t i = 0; i < n; i++) {
                const struct rs_guest *g = &guests[i];
                const char *x = g->ifname;

                fprintf(f,
                        "\tchain %s-to-no-promisc {\n"
                        "\t\tether daddr %s return\n"
                        "\t\tether daddr & 01:00:00:00:00:00 == 01:00:00:00:00:00 return\n"
                        "\t\tdrop\n\t}\n",
                        x, g->mac);
                fprintf(f,
                        "\tchain %s-from-no-mac-spoofing {\n"
                        "\t\tether saddr %s return\n"
                        "\t\tdrop\n\t}\n",
                        x, g->mac);
                fprintf(f,
                        "\tchain %s-from-no-ip-spoofing {\n"
                        "\t\tip saddr 0.0.0.0 udp sport 68 udp dport 67 return\n"
                        "\t\tip saddr %s return\n"
                        "\t\tmeta protocol ip drop\n\t}\n",
                        x, g->ip);
                fprintf(f,
                        "\tchain %s-from-no-arp-spoofing {\n"
                        "\t\tarp saddr ether != %s drop\n"
                        "\t\tarp operation request arp saddr ip %s return\n"
                        "\t\tarp operation reply arp saddr ip %s return\n"
                        "\t\tmeta protocol arp drop\n\t}\n",
                        x, g->mac, g->ip, g->ip);
                fprintf(f,
                        "\tchain %s-from-clean-traffic {\n"
                        "\t\tmeta protocol ip accept\n"
                        "\t\tmeta protocol arp accept\n"
                        "\t\tmeta protocol 0x0835 accept\n"
                        "\t\tmeta protocol 0x8035 ether saddr %s ether daddr ff:ff:ff:ff:ff:ff "
                        "accept\n\t}\n",
                        x, g->mac);
                fprintf(f,
                        "\tchain %s-to-clean-traffic {\n"
                        "\t\tmeta protocol ip accept\n"
                        "\t\tmeta protocol arp accept\n"
                        "\t\tmeta protocol 0x8035 ether daddr ff:ff:ff:ff:ff:ff accept\n\t}\n",
                        x);
                fprintf(f, "\tchain %s-from-no-other-l2-traffic {\n\t\tdrop\n\t}\n", x);
                fprintf(f, "\tchain %s-to-no-other-l2-traffic {\n\t\tdrop\n\t}\n", x);
                fprintf(f,
                        "\tchain %s-from {\n"
                        "\t\tcomment \"%s %s\"\n"
                        "\t\ttype filter hook ingress device \"%s\" priority filter; policy "
                        "accept;\n",
                        x, x, g->mac, x);
                for (size_t k = 0; k < sizeof(from) / sizeof(*from); k++)
                        fprintf(f, "\t\tjump %s-from-%s\n", x, from[k]);
                fprintf(f,
                        "\t}\n\tchain %s-to {\n"
                        "\t\tcomment \"%s %s\"\n"
                        "\t\ttype filter hook egress device \"%s\" priority filter; policy "
                        "accept;\n",
                        x, x, g->mac, x);
                for (size_t k = 0; k < sizeof(to) / sizeof(*to); k++)
                        fprintf(f, "\t\tjump %s-to-%s\n", x, to[k]);
                fprintf(f, "\t}\n");
        }
        fprintf(f, "}\n");
        return ferror(f) ? -EIO : 0;
}
