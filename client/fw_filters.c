// SPDX-License-Identifier: LGPL-2.1-or-later
/* libvirt's stock network filters (its src/nwfilter/xml/, all 24 of them),
 * as data and one expander, and the nb_fw_add_* builders on top of them.
 *
 * How libvirt's ebtables driver turns a filter into rules, and how this
 * file mirrors it:
 *
 * - A filter names a chain ("root" when it names none). Every rule of the
 *   filter goes into that chain; filters naming the same chain share it.
 *   Here a chain is a group of that name (nb_fw_group_ex selects it again
 *   for the next filter), "root" being the root group, whose rules sit in
 *   the owner's base chain itself.
 * - A chain other than root is entered from the base chain through a jump
 *   that matches the protocol its name starts with ("mac" every frame,
 *   "stp" frames to 01:80:c2:00:00:00, "vlan" 0x8100, "arp" 0x0806, "rarp"
 *   0x8035, "ipv4" 0x0800, "ipv6" 0x86dd; "arp-ip" is an arp chain): the
 *   group's guard. The jump sits at the chain's priority (the filter's, or
 *   the default of its protocol: stp -810, mac -800, vlan -750, ipv4 -700,
 *   ipv6 -600, arp -500, rarp -400; root 0).
 * - A rule has a priority (500 when the XML gives none); a chain's rules run
 *   in priority order, equal ones in the order they were instantiated. In
 *   the base chain the root rules and the jumps are ordered by priority
 *   together, a jump before a root rule of the same priority (libvirt
 *   creates a chain's jump before any rule whose priority is not lower).
 *   The helper sorts; this file only gives every rule and group its
 *   priority, so the order of calls does not matter.
 * - Direction "out" is what the guest sends (NB_FW_FROM_GUEST), "in" what
 *   it receives (NB_FW_TO_GUEST), "inout" a rule for each: the one for
 *   what the guest sends with source and destination swapped
 *   (nb_fw_rule_reverse(), libvirt's reverse; no stock inout rule names an
 *   address or a port today, so the table's rules are unchanged by it).
 * - A filterref instantiates the referenced filter in place, with the same
 *   variables. A rule using a variable with several values becomes one
 *   rule per value (per combination of values when it uses several
 *   variables, the first one it uses varying fastest, as libvirt's
 *   iterator does); a rule identical to one already in its group is not
 *   added again, so a filter referenced twice is there once.
 * - A variable a rule uses must be given: libvirt refuses to instantiate a
 *   filter with an unresolved variable (it would learn IP first, which
 *   netbroker does not do), and so does nb_fw_add_filter(). A variable
 *   given with no values makes the rules using it vanish (the builders'
 *   empty address list); each of them accepts or returns, so that is
 *   stricter, never wider.
 *
 * The rules are written with the matches libvirt's driver gives them: an
 * <ip> or <mac protocolid> rule has its ether type, a rule with no protocol
 * has none (the group's guard restricts it, as libvirt's chain does). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fw_ruleset.h"
#include "internal.h"
#include "mac.h"

#define ET_IPV4 0x0800
#define ET_ARP 0x0806
#define ET_RARP 0x8035
#define ET_IPV6 0x86dd
#define ET_VLAN 0x8100
/* What QEMU's announce-self sent before it used RARP. */
#define ET_QEMU_ANNOUNCE 0x0835
#define PROTO_UDP 17
#define RARP_REQUEST_REVERSE 3

#define BROADCAST_MAC "ff:ff:ff:ff:ff:ff"
/* The group bit: multicast, broadcast included. */
#define MULTICAST_MAC "01:00:00:00:00:00/01:00:00:00:00:00"
#define STP_MAC "01:80:c2:00:00:00"

/* libvirt's default rule priority, and the priorities of its chains. */
#define PRIO_RULE 500
#define PRIO_ROOT 0
#define PRIO_MAC (-800)
#define PRIO_IPV4 (-700)
#define PRIO_IPV6 (-600)
#define PRIO_ARP (-500)
#define PRIO_RARP (-400)

#define OUT 1u /* from the guest */
#define IN 2u /* to the guest */
#define INOUT (OUT | IN)

/* One entry of a filter, in the filter's order: a rule (dirs set; string
 * matches may be "$VARIABLE"), or a reference to another filter. */
struct tmpl {
        const char *ref;
        unsigned dirs;
        nb_fw_rule r;
};

struct stock {
        const char *name;
        const char *chain;
        int16_t priority; /* the chain's */
        const struct tmpl *t; /* ends with an entry with neither ref nor dirs */
};

#define REF(f)                                                                                     \
        {                                                                                          \
                .ref = (f)                                                                         \
        }
#define RULE(d, v, p, ...)                                                                         \
        {                                                                                          \
                .dirs = (d), .r = {.verdict = (v), .priority = (p), __VA_ARGS__ }                  \
        }
#define END                                                                                        \
        {                                                                                          \
                0                                                                                  \
        }
#define ACCEPT NB_FW_ACCEPT
#define DROP NB_FW_DROP
#define RETURN NB_FW_RETURN

/* The filters, as libvirt ships them (each entry says what its XML says;
 * libvirt's own comments explain the why). */
static const struct stock stock[] = {
        {"allow-arp", "arp", PRIO_ARP, (const struct tmpl[]){RULE(INOUT, ACCEPT, 500), END}},
        {"allow-dhcp", "ipv4", PRIO_IPV4,
         (const struct tmpl[]){RULE(OUT, ACCEPT, 100, .ether_type = ET_IPV4, .ip_src = "0.0.0.0",
                                    .ip_dst = "255.255.255.255", .l4_proto = PROTO_UDP,
                                    .sport_min = 68, .dport_min = 67),
                               RULE(IN, ACCEPT, 100, .ether_type = ET_IPV4, .l4_proto = PROTO_UDP,
                                    .sport_min = 67, .dport_min = 68),
                               END}},
        {"allow-dhcp-server", "ipv4", PRIO_IPV4,
         (const struct tmpl[]){RULE(OUT, ACCEPT, 100, .ether_type = ET_IPV4, .ip_src = "0.0.0.0",
                                    .ip_dst = "255.255.255.255", .l4_proto = PROTO_UDP,
                                    .sport_min = 68, .dport_min = 67),
                               RULE(IN, ACCEPT, 100, .ether_type = ET_IPV4, .ip_src = "$DHCPSERVER",
                                    .l4_proto = PROTO_UDP, .sport_min = 67, .dport_min = 68),
                               END}},
        {"allow-dhcpv6", "ipv6", PRIO_IPV6,
         (const struct tmpl[]){RULE(OUT, ACCEPT, 100, .ether_type = ET_IPV6, .ip_src = "fe80::/10",
                                    .ip_dst = "ff02::1:2", .l4_proto = PROTO_UDP, .sport_min = 546,
                                    .dport_min = 547),
                               RULE(IN, ACCEPT, 100, .ether_type = ET_IPV6, .l4_proto = PROTO_UDP,
                                    .sport_min = 547, .dport_min = 546),
                               END}},
        {"allow-dhcpv6-server", "ipv6", PRIO_IPV6,
         (const struct tmpl[]){RULE(OUT, ACCEPT, 100, .ether_type = ET_IPV6, .ip_src = "fe80::/10",
                                    .ip_dst = "ff02::1:2", .l4_proto = PROTO_UDP, .sport_min = 546,
                                    .dport_min = 547),
                               RULE(IN, ACCEPT, 100, .ether_type = ET_IPV6, .ip_src = "$DHCPSERVER",
                                    .l4_proto = PROTO_UDP, .sport_min = 547, .dport_min = 546),
                               END}},
        {"allow-incoming-ipv4", "ipv4", PRIO_IPV4,
         (const struct tmpl[]){RULE(IN, ACCEPT, 500), END}},
        {"allow-incoming-ipv6", "ipv6", PRIO_IPV6,
         (const struct tmpl[]){RULE(IN, ACCEPT, 500), END}},
        {"allow-ipv4", "ipv4", PRIO_IPV4, (const struct tmpl[]){RULE(INOUT, ACCEPT, 500), END}},
        {"allow-ipv6", "ipv6", PRIO_IPV6, (const struct tmpl[]){RULE(INOUT, ACCEPT, 500), END}},
        {"clean-traffic", "root", PRIO_ROOT,
         (const struct tmpl[]){REF("no-mac-spoofing"), REF("no-ip-spoofing"),
                               RULE(OUT, ACCEPT, -650, .ether_type = ET_IPV4),
                               REF("allow-incoming-ipv4"), REF("no-arp-spoofing"),
                               RULE(INOUT, ACCEPT, -500, .ether_type = ET_ARP),
                               REF("no-other-l2-traffic"), REF("qemu-announce-self"), END}},
        /* libvirt's current XML; releases up to 9.x referenced
         * qemu-announce-self instead of qemu-announce-self-rarp. */
        {"clean-traffic-gateway", "root", PRIO_ROOT,
         (const struct tmpl[]){REF("no-mac-spoofing"), REF("no-ip-spoofing"),
                               REF("no-arp-spoofing"),
                               RULE(INOUT, ACCEPT, -500, .ether_type = ET_ARP),
                               RULE(IN, ACCEPT, 500, .ether_src = "$GATEWAY_MAC"),
                               RULE(OUT, ACCEPT, 500, .ether_dst = "$GATEWAY_MAC"),
                               /* Debian 12's libvirt (9.0) refers to qemu-announce-self
                                * here; later libvirt to qemu-announce-self-rarp. We
                                * follow what the distribution ships. */
                               REF("no-other-l2-traffic"), REF("qemu-announce-self"), END}},
        {"no-arp-ip-spoofing", "arp-ip", -510,
         (const struct tmpl[]){RULE(OUT, RETURN, 400, .ether_type = ET_ARP, .arp_sender_ip = "$IP"),
                               RULE(OUT, DROP, 1000), END}},
        {"no-arp-mac-spoofing", "arp-mac", -520,
         (const struct tmpl[]){
                 RULE(OUT, RETURN, 350, .ether_type = ET_ARP, .arp_sender_mac = "$MAC"),
                 RULE(OUT, DROP, 1000), END}},
        {"no-arp-spoofing", "root", PRIO_ROOT,
         (const struct tmpl[]){REF("no-arp-mac-spoofing"), REF("no-arp-ip-spoofing"), END}},
        {"no-ip-multicast", "ipv4", PRIO_IPV4,
         (const struct tmpl[]){RULE(OUT, DROP, 500, .ether_type = ET_IPV4, .ip_dst = "224.0.0.0/4"),
                               END}},
        {"no-ip-spoofing", "ipv4-ip", -710,
         (const struct tmpl[]){RULE(OUT, RETURN, 100, .ether_type = ET_IPV4, .ip_src = "0.0.0.0",
                                    .l4_proto = PROTO_UDP),
                               RULE(OUT, RETURN, 500, .ether_type = ET_IPV4, .ip_src = "$IP"),
                               RULE(OUT, DROP, 1000), END}},
        {"no-ipv6-multicast", "ipv6", PRIO_IPV6,
         (const struct tmpl[]){RULE(OUT, DROP, 500, .ether_type = ET_IPV6, .ip_dst = "ff00::/8"),
                               END}},
        {"no-ipv6-spoofing", "ipv6-ip", -610,
         (const struct tmpl[]){RULE(OUT, RETURN, 100, .ether_type = ET_IPV6, .ip_src = "fe80::/10",
                                    .l4_proto = PROTO_UDP),
                               RULE(OUT, RETURN, 500, .ether_type = ET_IPV6, .ip_src = "$IPV6"),
                               RULE(OUT, DROP, 1000), END}},
        {"no-mac-broadcast", "ipv4", PRIO_IPV4,
         (const struct tmpl[]){RULE(OUT, DROP, 500, .ether_dst = BROADCAST_MAC), END}},
        {"no-mac-spoofing", "mac", PRIO_MAC,
         (const struct tmpl[]){RULE(OUT, RETURN, 500, .ether_src = "$MAC"), RULE(OUT, DROP, 500),
                               END}},
        {"no-other-l2-traffic", "root", PRIO_ROOT,
         (const struct tmpl[]){RULE(INOUT, DROP, 1000), END}},
        {"no-other-rarp-traffic", "rarp", PRIO_RARP,
         (const struct tmpl[]){RULE(INOUT, DROP, 1000), END}},
        {"qemu-announce-self", "root", PRIO_ROOT,
         (const struct tmpl[]){RULE(OUT, ACCEPT, 500, .ether_type = ET_QEMU_ANNOUNCE),
                               REF("qemu-announce-self-rarp"), REF("no-other-rarp-traffic"), END}},
        {"qemu-announce-self-rarp", "rarp", PRIO_RARP,
         (const struct tmpl[]){RULE(OUT, ACCEPT, 500, .ether_type = ET_RARP,
                                    .arp_op = RARP_REQUEST_REVERSE, .ether_src = "$MAC",
                                    .ether_dst = BROADCAST_MAC, .arp_sender_mac = "$MAC",
                                    .arp_target_mac = "$MAC", .arp_sender_ip = "0.0.0.0",
                                    .arp_target_ip = "0.0.0.0"),
                               RULE(IN, ACCEPT, 500, .ether_type = ET_RARP,
                                    .arp_op = RARP_REQUEST_REVERSE, .ether_dst = BROADCAST_MAC,
                                    .arp_sender_mac = "$MAC", .arp_target_mac = "$MAC",
                                    .arp_sender_ip = "0.0.0.0", .arp_target_ip = "0.0.0.0"),
                               END}},
};

#define N_STOCK (sizeof(stock) / sizeof(*stock))

/* netbroker's own, not libvirt's (its src/nwfilter/xml/ has no no-promisc;
 * this is the filter of the 2018 report libvirt users ran, in chain mac):
 * to the guest, frames to its MAC and multicast (broadcast included) go on,
 * any other frame, which only a promiscuous guest would take, is dropped.
 * In chain mac at -800 it runs before every accept of the stock filters,
 * whatever the order of calls. Not listed by nb_fw_filter_names(). */
static const struct stock no_promisc = {
        "no-promisc", "mac", PRIO_MAC,
        (const struct tmpl[]){RULE(IN, RETURN, 500, .ether_dst = "$MAC"),
                              RULE(IN, RETURN, 500, .ether_dst = MULTICAST_MAC),
                              RULE(IN, DROP, 500), END}};

static const struct stock *stock_find(const char *name)
{
        for (size_t i = 0; i < N_STOCK; i++)
                if (strcmp(stock[i].name, name) == 0)
                        return &stock[i];
        return NULL;
}

NB_EXPORT const char *const *nb_fw_filter_names(void)
{
        /* The table's names, in its order (test_fw_filters.c checks that
         * each is there); constant, so any thread may read it. */
        static const char *const names[] = {
                "allow-arp",
                "allow-dhcp",
                "allow-dhcp-server",
                "allow-dhcpv6",
                "allow-dhcpv6-server",
                "allow-incoming-ipv4",
                "allow-incoming-ipv6",
                "allow-ipv4",
                "allow-ipv6",
                "clean-traffic",
                "clean-traffic-gateway",
                "no-arp-ip-spoofing",
                "no-arp-mac-spoofing",
                "no-arp-spoofing",
                "no-ip-multicast",
                "no-ip-spoofing",
                "no-ipv6-multicast",
                "no-ipv6-spoofing",
                "no-mac-broadcast",
                "no-mac-spoofing",
                "no-other-l2-traffic",
                "no-other-rarp-traffic",
                "qemu-announce-self",
                "qemu-announce-self-rarp",
                NULL,
        };
        _Static_assert(sizeof(names) / sizeof(*names) == N_STOCK + 1, "one name per filter");

        return names;
}

/* ---- variables ---- */

/* The string matches a template may put a variable into, and what the
 * value must be there. */
enum kind { K_MAC, K_IPV4, K_IP_OF_RULE };

static const struct {
        size_t off;
        enum kind kind;
} str_fields[] = {
        {offsetof(nb_fw_rule, ether_src), K_MAC},
        {offsetof(nb_fw_rule, ether_dst), K_MAC},
        {offsetof(nb_fw_rule, arp_sender_mac), K_MAC},
        {offsetof(nb_fw_rule, arp_target_mac), K_MAC},
        {offsetof(nb_fw_rule, arp_sender_ip), K_IPV4},
        {offsetof(nb_fw_rule, arp_target_ip), K_IPV4},
        {offsetof(nb_fw_rule, ip_src), K_IP_OF_RULE},
        {offsetof(nb_fw_rule, ip_dst), K_IP_OF_RULE},
};

#define N_FIELDS (sizeof(str_fields) / sizeof(*str_fields))
#define MAX_RULE_VARS N_FIELDS

static const char **field(nb_fw_rule *r, size_t i)
{
        return (const char **)((char *)r + str_fields[i].off);
}

static const char *field_c(const nb_fw_rule *r, size_t i)
{
        return *(const char *const *)((const char *)r + str_fields[i].off);
}

/* "aa:bb:cc:dd:ee:ff", nothing else: a variable names one MAC. */
static bool mac_ok(const char *s)
{
        uint8_t m[6];

        return s && nbp_mac_parse(s, m) == 0;
}

/* An address of the family, or a prefix "ADDR/N". */
static bool ip_ok(const char *s, int family)
{
        char buf[INET6_ADDRSTRLEN];
        unsigned char a[16];
        const char *slash;
        size_t len;
        unsigned max = family == AF_INET ? 32 : 128, n = 0;

        if (!s)
                return false;
        slash = strchr(s, '/');
        len = slash ? (size_t)(slash - s) : strlen(s);
        if (len >= sizeof(buf))
                return false;
        memcpy(buf, s, len);
        buf[len] = '\0';
        if (inet_pton(family, buf, a) != 1)
                return false;
        if (!slash)
                return true;
        if (!slash[1] || strlen(slash + 1) > 3)
                return false;
        for (const char *p = slash + 1; *p; p++) {
                if (!isdigit((unsigned char)*p))
                        return false;
                n = n * 10 + (unsigned)(*p - '0');
        }
        return n <= max;
}

static bool value_ok(const nb_fw_rule *t, size_t f, const char *v)
{
        switch (str_fields[f].kind) {
        case K_MAC:
                return mac_ok(v);
        case K_IPV4:
                return ip_ok(v, AF_INET);
        case K_IP_OF_RULE:
                return ip_ok(v, t->ether_type == ET_IPV6 ? AF_INET6 : AF_INET);
        }
        return false;
}

/* libvirt's variable names: letters, digits and '_'. */
static bool var_name_ok(const char *s)
{
        size_t n = 0;

        if (!s)
                return false;
        for (; s[n]; n++)
                if (!isalnum((unsigned char)s[n]) && s[n] != '_')
                        return false;
        return n >= 1 && n <= 64;
}

/* The caller's variables: each named once, with a value list; the IP
 * learning controls libvirt takes are accepted with libvirt's values and
 * ignored (netbroker learns nothing: IP must be given). */
static int vars_ok(const char *who, const nb_fw_var *vars, size_t n)
{
        if (n && !vars)
                return nb_bad_arg(EINVAL, who, "%zu variables given, and no array", n);
        for (size_t i = 0; i < n; i++) {
                if (!var_name_ok(vars[i].name))
                        return nb_bad_arg(EINVAL, who,
                                          "variable %zu: its name %s is not 1 to 64 letters, "
                                          "digits or _",
                                          i, NB_Q(vars[i].name));
                if (!vars[i].values)
                        return nb_bad_arg(EINVAL, who, "variable %zu: no values array", i);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(vars[i].name, vars[j].name) == 0)
                                return nb_bad_arg(EINVAL, who, "variable %s is given twice",
                                                  vars[i].name);
                if (strcmp(vars[i].name, "CTRL_IP_LEARNING") == 0) {
                        const char *v = vars[i].values[0];
                        if (!v || vars[i].values[1] ||
                            (strcasecmp(v, "any") && strcasecmp(v, "dhcp") &&
                             strcasecmp(v, "none")))
                                return nb_bad_arg(EINVAL, who,
                                                  "CTRL_IP_LEARNING must be one of any, dhcp "
                                                  "or none");
                }
        }
        return 0;
}

static const char *kind_text(enum kind k)
{
        return k == K_MAC    ? "a MAC address"
               : k == K_IPV4 ? "an IPv4 address or prefix"
                             : "an address or prefix of the rule's IP family";
}

static const nb_fw_var *var_find(const nb_fw_var *vars, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(vars[i].name, name) == 0)
                        return &vars[i];
        return NULL;
}

/* A rule's variables, in the order it first uses them. */
struct rule_vars {
        const nb_fw_var *v[MAX_RULE_VARS];
        size_t n;
};

/* Find and check every variable template t uses: each must be given, each
 * of its values valid where t uses it. */
static int rule_vars(const char *who, const nb_fw_rule *t, const nb_fw_var *vars, size_t n_vars,
                     struct rule_vars *ret)
{
        struct rule_vars rv = {.n = 0};

        for (size_t f = 0; f < N_FIELDS; f++) {
                const char *s = field_c(t, f);
                const nb_fw_var *v;
                bool seen = false;

                if (!s || s[0] != '$')
                        continue;
                v = var_find(vars, n_vars, s + 1);
                if (!v)
                        /* libvirt: unresolvable variable. It would learn
                         * an IP; netbroker learns none. */
                        return nb_bad_arg(EINVAL, who,
                                          "variable %s is not given (it is used; netbroker "
                                          "learns no address: give its value)",
                                          s + 1);
                for (size_t k = 0; v->values[k]; k++)
                        if (!value_ok(t, f, v->values[k]))
                                return nb_bad_arg(EINVAL, who, "%s=%s is not %s", v->name,
                                                  NB_Q(v->values[k]),
                                                  kind_text(str_fields[f].kind));
                for (size_t k = 0; k < rv.n; k++)
                        seen = seen || rv.v[k] == v;
                if (!seen)
                        rv.v[rv.n++] = v;
        }
        *ret = rv;
        return 0;
}

/* ---- expansion ---- */

/* A group's options for libvirt's chain `chain` at `priority`; guard
 * receives the jump's match. */
static void chain_opts(const char *chain, int16_t priority, nb_fw_group_opts *o, nb_fw_rule *guard)
{
        static const struct {
                const char *prefix;
                uint16_t ether_type;
                const char *ether_dst;
        } protos[] = {
                {"mac", 0, NULL},        {"stp", 0, STP_MAC},     {"vlan", ET_VLAN, NULL},
                {"arp", ET_ARP, NULL},   {"rarp", ET_RARP, NULL}, {"ipv4", ET_IPV4, NULL},
                {"ipv6", ET_IPV6, NULL},
        };

        *guard = (nb_fw_rule)NB_FW_RULE_INIT;
        *o = (nb_fw_group_opts){.size = sizeof(*o), .priority = priority};
        if (strcmp(chain, "root") == 0) {
                o->root = true;
                return;
        }
        for (size_t i = 0; i < sizeof(protos) / sizeof(*protos); i++)
                if (strncmp(chain, protos[i].prefix, strlen(protos[i].prefix)) == 0) {
                        if (protos[i].ether_type || protos[i].ether_dst) {
                                guard->ether_type = protos[i].ether_type;
                                guard->ether_dst = protos[i].ether_dst;
                                o->guard = guard;
                        }
                        return;
                }
}

/* Add template t of filter f for every combination of its variables'
 * values, in each of its directions. */
static int add_rule(nb_fw_ruleset *rs, const struct stock *f, const struct tmpl *t,
                    const struct rule_vars *rv)
{
        size_t idx[MAX_RULE_VARS] = {0};
        nb_fw_group_opts o;
        nb_fw_rule guard;
        int r;

        for (size_t k = 0; k < rv->n; k++)
                if (!rv->v[k]->values[0])
                        return 0; /* a variable with no values: no rule */
        chain_opts(f->chain, f->priority, &o, &guard);
        r = nb_fw_group_ex(rs, strcmp(f->chain, "root") == 0 ? "root" : f->chain, &o);
        if (r < 0)
                return r;
        for (;;) {
                nb_fw_rule rule = t->r;
                size_t k;

                for (size_t fi = 0; fi < N_FIELDS; fi++) {
                        const char **s = field(&rule, fi);
                        if (!*s || (*s)[0] != '$')
                                continue;
                        for (k = 0; strcmp(rv->v[k]->name, *s + 1) != 0; k++)
                                ;
                        *s = rv->v[k]->values[idx[k]];
                }
                for (unsigned d = OUT; d <= IN; d <<= 1) {
                        if (!(t->dirs & d))
                                continue;
                        nb_fw_rule one = rule;
                        one.direction = d == OUT ? NB_FW_FROM_GUEST : NB_FW_TO_GUEST;
                        if (d == OUT && t->dirs == INOUT)
                                nb_fw_rule_reverse(&one);
                        r = nb_fw_rule_add_once(rs, &one);
                        if (r < 0)
                                return r;
                }
                /* Next combination: the first variable varies fastest. */
                for (k = 0; k < rv->n; k++) {
                        if (rv->v[k]->values[++idx[k]])
                                break;
                        idx[k] = 0;
                }
                if (k == rv->n)
                        return 0;
        }
}

/* Walk filter f and what it references, in order. With rs NULL, only
 * check (names and variables); else add. Stock filters nest 3 deep. */
static int walk(const char *who, nb_fw_ruleset *rs, const struct stock *f, const nb_fw_var *vars,
                size_t n_vars, unsigned depth)
{
        int r = 0;

        if (depth > 8)
                return -ELOOP; /* the table is acyclic; a guard for edits to it */
        for (const struct tmpl *t = f->t; r == 0 && (t->ref || t->dirs); t++) {
                /* Set by rule_vars() when it returns 0; gcc cannot see
                 * that through nb_bad_arg()'s return. */
                struct rule_vars rv = {.n = 0};

                if (t->ref) {
                        const struct stock *g = stock_find(t->ref);
                        r = g ? walk(who, rs, g, vars, n_vars, depth + 1) : -ENOENT;
                        continue;
                }
                r = rule_vars(who, &t->r, vars, n_vars, &rv);
                if (r == 0 && rs)
                        r = add_rule(rs, f, t, &rv);
        }
        return r;
}

/* Check everything, then add; on failure take back all that was added,
 * rules appended to groups that were there included. who: the public
 * function, which bad input's message names. */
static int instantiate(const char *who, nb_fw_ruleset *rs, const struct stock *f,
                       const nb_fw_var *vars, size_t n_vars)
{
        struct nb_fw_mark mark;
        int r = vars_ok(who, vars, n_vars);

        if (r == 0)
                r = walk(who, NULL, f, vars, n_vars, 0);
        if (r < 0)
                return r;
        r = nb_fw_mark_take(rs, &mark);
        if (r < 0)
                return r;
        r = walk(who, rs, f, vars, n_vars, 0);
        if (r < 0)
                nb_fw_mark_rollback(rs, &mark);
        else
                /* A rule the caller adds next goes where it would have
                 * gone without the filter, never into the filter's last
                 * chain (which only some frames enter). */
                nb_fw_mark_restore_group(rs, &mark);
        nb_fw_mark_release(&mark);
        return r;
}

/* The caller's variables in this library's nb_fw_var: the array's stride
 * is its first element's size, which every element must carry. */
static int vars_in(const char *who, const nb_fw_var *vars, size_t n, nb_fw_var **ret)
{
        nb_fw_var *mine;
        size_t stride;
        int r;

        *ret = NULL;
        if (n == 0)
                return 0;
        if (!vars)
                return nb_bad_arg(EINVAL, who, "vars is NULL and n_vars is %zu", n);
        stride = vars[0].size;
        mine = calloc(n, sizeof(*mine));
        if (!mine)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const nb_fw_var *v = (const void *)((const char *)vars + i * stride);
                char arg[32];

                snprintf(arg, sizeof(arg), "vars[%zu]", i);
                if (v->size != stride) {
                        free(mine);
                        return nb_bad_arg(EINVAL, who,
                                          "%s: size %zu is not vars[0]'s %zu: make each with "
                                          "NB_FW_VAR()",
                                          arg, v->size, stride);
                }
                /* NB_FW_VAR() is nb_fw_var's initialiser (no _INIT). */
                if (v->size == 0 || v->size < NB_FW_VAR_SIZE_0) {
                        free(mine);
                        return nb_bad_arg(EINVAL, who, "%s: size %zu: make each with NB_FW_VAR()",
                                          arg, v->size);
                }
                r = NB_ARG_IN(who, arg, &mine[i], v, NB_FW_VAR);
                if (r < 0) {
                        free(mine);
                        return r;
                }
        }
        *ret = mine;
        return 0;
}

NB_EXPORT int nb_fw_add_filter(nb_fw_ruleset *rs, const char *filter, const nb_fw_var *vars,
                               size_t n_vars)
{
        const struct stock *f;
        nb_fw_var *mine;
        int r;

        if (!rs || !filter)
                return nb_bad_arg(EINVAL, __func__, "%s is NULL", rs ? "filter" : "rs");
        f = stock_find(filter);
        if (!f)
                return -ENOENT;
        r = vars_in(__func__, vars, n_vars, &mine);
        if (r < 0)
                return r;
        r = instantiate(__func__, rs, f, mine, n_vars);
        free(mine);
        return r;
}

/* ---- the builders ----
 *
 * Each is its stock filter with MAC, IP or DHCPSERVER set from its
 * arguments (NULL ips: an empty list). What they did before libvirt's
 * priorities came is in the notes of the tests that changed with them. */

static const char *const no_values[] = {NULL};

static const char *const *or_none(const char *const *ips)
{
        return ips ? ips : no_values;
}

/* The ruleset and MAC arguments of builder who. */
static int mac_check(const char *who, const nb_fw_ruleset *rs, const char *mac)
{
        if (!rs)
                return nb_bad_arg(EINVAL, who, "rs is NULL");
        if (!mac_ok(mac))
                return nb_bad_arg(EINVAL, who, "mac %s is not a MAC address (aa:bb:cc:dd:ee:ff)",
                                  NB_Q(mac));
        return 0;
}

/* The ips argument of builder who (NULL: none): IPv4 addresses or
 * prefixes, which is what each filter taking them checks where it uses
 * them; checked here first to name the argument the caller gave. */
static int ips_check(const char *who, const char *const *ips)
{
        for (size_t i = 0; ips && ips[i]; i++)
                if (!ip_ok(ips[i], AF_INET))
                        return nb_bad_arg(EINVAL, who,
                                          "ips[%zu] %s is not an IPv4 address or prefix", i,
                                          NB_Q(ips[i]));
        return 0;
}

NB_EXPORT int nb_fw_add_no_mac_spoofing(nb_fw_ruleset *rs, const char *mac)
{
        const char *const m[] = {mac, NULL};
        const nb_fw_var v[] = {NB_FW_VAR("MAC", m)};
        int r;

        if ((r = mac_check(__func__, rs, mac)) < 0)
                return r;
        return instantiate(__func__, rs, stock_find("no-mac-spoofing"), v, 1);
}

NB_EXPORT int nb_fw_add_no_ip_spoofing(nb_fw_ruleset *rs, const char *const *ips)
{
        const nb_fw_var v[] = {NB_FW_VAR("IP", or_none(ips))};
        int r;

        if (!rs)
                return nb_bad_arg(EINVAL, __func__, "rs is NULL");
        if ((r = ips_check(__func__, ips)) < 0)
                return r;
        return instantiate(__func__, rs, stock_find("no-ip-spoofing"), v, 1);
}

NB_EXPORT int nb_fw_add_no_arp_spoofing(nb_fw_ruleset *rs, const char *mac, const char *const *ips)
{
        const char *const m[] = {mac, NULL};
        const nb_fw_var v[] = {NB_FW_VAR("MAC", m), NB_FW_VAR("IP", or_none(ips))};
        int r;

        if ((r = mac_check(__func__, rs, mac)) < 0 || (r = ips_check(__func__, ips)) < 0)
                return r;
        return instantiate(__func__, rs, stock_find("no-arp-spoofing"), v, 2);
}

NB_EXPORT int nb_fw_add_no_promisc(nb_fw_ruleset *rs, const char *mac)
{
        const char *const m[] = {mac, NULL};
        const nb_fw_var v[] = {NB_FW_VAR("MAC", m)};
        int r;

        if ((r = mac_check(__func__, rs, mac)) < 0)
                return r;
        return instantiate(__func__, rs, &no_promisc, v, 1);
}

NB_EXPORT int nb_fw_add_allow_dhcp(nb_fw_ruleset *rs, const char *dhcp_server)
{
        const char *const s[] = {dhcp_server, NULL};
        const nb_fw_var v[] = {NB_FW_VAR("DHCPSERVER", s)};

        if (!rs)
                return nb_bad_arg(EINVAL, __func__, "rs is NULL");
        if (dhcp_server && !ip_ok(dhcp_server, AF_INET))
                return nb_bad_arg(EINVAL, __func__,
                                  "dhcp_server %s is not an IPv4 address or prefix",
                                  NB_Q(dhcp_server));
        if (!dhcp_server)
                return instantiate(__func__, rs, stock_find("allow-dhcp"), NULL, 0);
        return instantiate(__func__, rs, stock_find("allow-dhcp-server"), v, 1);
}

NB_EXPORT int nb_fw_add_allow_arp(nb_fw_ruleset *rs)
{
        if (!rs)
                return nb_bad_arg(EINVAL, __func__, "rs is NULL");
        return instantiate(__func__, rs, stock_find("allow-arp"), NULL, 0);
}

NB_EXPORT int nb_fw_add_clean_traffic(nb_fw_ruleset *rs, const char *mac, const char *const *ips)
{
        const char *const m[] = {mac, NULL};
        const nb_fw_var v[] = {NB_FW_VAR("MAC", m), NB_FW_VAR("IP", or_none(ips))};
        int r;

        if ((r = mac_check(__func__, rs, mac)) < 0 || (r = ips_check(__func__, ips)) < 0)
                return r;
        return instantiate(__func__, rs, stock_find("clean-traffic"), v, 2);
}
