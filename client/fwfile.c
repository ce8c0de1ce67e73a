// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading the fw text format (see fwfile.h) into a batch. Errors name the
 * file and line at once; what needs the kernel's view (does the interface
 * exist, is this rule compilable) is left to the helper. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwfile.h"
#include "mac.h"

#define MAX_WORDS 256

struct parse {
        struct fwfile *f;
        nb_batch *batch;
        unsigned line;
        /* the owner being read, added to the batch when the next begins */
        char *owner;
        char *ifname;
        nb_fw_mode mode;
        unsigned owner_line;
        nb_fw_ruleset *rs;
        unsigned *owner_lines; /* beside f->owners, for "already at line N" */
};

__attribute__((format(printf, 2, 3))) static int fail(struct parse *p, const char *fmt, ...)
{
        struct fwfile *f = p->f;
        va_list ap;
        int n;

        n = snprintf(f->err, sizeof(f->err), "%s:%u: ", f->name, p->line);
        va_start(ap, fmt);
        if (n > 0 && (size_t)n < sizeof(f->err))
                vsnprintf(f->err + n, sizeof(f->err) - (size_t)n, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static int oom(struct parse *p)
{
        snprintf(p->f->err, sizeof(p->f->err), "%s: out of memory", p->f->name);
        return -ENOMEM;
}

/* ---- values ---- */

struct sym {
        const char *name;
        unsigned long value;
};

static const struct sym ether_types[] = {{"ipv4", 0x0800}, {"arp", 0x0806},  {"ipv6", 0x86dd},
                                         {"rarp", 0x8035}, {"vlan", 0x8100}, {NULL, 0}};
static const struct sym arp_ops[] = {{"request", 1}, {"reply", 2}, {NULL, 0}};
static const struct sym arp_ptypes[] = {{"ipv4", 0x0800}, {NULL, 0}};
static const struct sym tcp_flag_names[] = {{"FIN", NB_TCP_FIN},
                                            {"SYN", NB_TCP_SYN},
                                            {"RST", NB_TCP_RST},
                                            {"PSH", NB_TCP_PSH},
                                            {"ACK", NB_TCP_ACK},
                                            {"URG", NB_TCP_URG},
                                            {"ECE", NB_TCP_ECE},
                                            {"CWR", NB_TCP_CWR},
                                            {"ALL", 0x3f},
                                            {"NONE", 0},
                                            {NULL, 0}};
static const struct sym protos[] = {{"icmp", 1},   {"tcp", 6},     {"udp", 17},
                                    {"sctp", 132}, {"icmpv6", 58}, {NULL, 0}};

/* A decimal or 0x-hex number in [min, max], or one of syms. */
static bool number(const char *s, const struct sym *syms, unsigned long min, unsigned long max,
                   unsigned long *ret)
{
        bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
        const char *digits = hex ? s + 2 : s;
        unsigned long v;
        char *end;

        for (; syms && syms->name; syms++)
                if (strcmp(s, syms->name) == 0) {
                        *ret = syms->value;
                        return true;
                }
        /* strtoul alone would take "-1", " 1" and "+1". */
        if (!(hex ? isxdigit((unsigned char)digits[0]) : isdigit((unsigned char)digits[0])))
                return false;
        errno = 0;
        v = strtoul(digits, &end, hex ? 16 : 10);
        if (errno || *end || v < min || v > max)
                return false;
        *ret = v;
        return true;
}

static bool plain_mac(const char *s, size_t len)
{
        uint8_t m[6];

        return nbp_mac_parse_n(s, len, m) == 0;
}

/* MAC, or MAC/MASK where mask_ok. */
static bool mac(const char *s, bool mask_ok)
{
        const char *slash = strchr(s, '/');

        if (!slash)
                return plain_mac(s, strlen(s));
        return mask_ok && plain_mac(s, (size_t)(slash - s)) &&
               plain_mac(slash + 1, strlen(slash + 1));
}

/* An IPv4 or IPv6 address, or a prefix ADDR/LEN where prefix_ok; its
 * family (AF_INET, AF_INET6) or 0 when it is neither. */
static int addr_family(const char *s, size_t len, bool prefix_ok)
{
        const char *slash = memchr(s, '/', len);
        size_t alen = slash ? (size_t)(slash - s) : len;
        char buf[INET6_ADDRSTRLEN], num[8];
        unsigned char a[16];
        unsigned long plen;
        int family;

        if (alen >= sizeof(buf) || (slash && !prefix_ok))
                return 0;
        memcpy(buf, s, alen);
        buf[alen] = '\0';
        family = strchr(buf, ':') ? AF_INET6 : AF_INET;
        if (inet_pton(family, buf, a) != 1)
                return 0;
        if (!slash)
                return family;
        if (len - alen - 1 >= sizeof(num))
                return 0;
        memcpy(num, slash + 1, len - alen - 1);
        num[len - alen - 1] = '\0';
        return number(num, NULL, 0, family == AF_INET ? 32 : 128, &plen) ? family : 0;
}

static bool addr(const char *s, bool prefix_ok)
{
        return addr_family(s, strlen(s), prefix_ok) != 0;
}

/* ADDR[/LEN], or a range A-B of one family (IPv6 addresses hold no '-'). */
static bool addr_or_range(const char *s)
{
        const char *dash = strchr(s, '-');
        int f;

        if (!dash)
                return addr(s, true);
        f = addr_family(s, (size_t)(dash - s), false);
        return f && f == addr_family(dash + 1, strlen(dash + 1), false);
}

/* P or P-Q, 1-65535, P <= Q. A single port leaves max 0, as the API
 * says, so equal rules read from a file or built in code encode alike. */
static bool ports(const char *s, uint16_t *ret_min, uint16_t *ret_max)
{
        const char *dash = strchr(s, '-');
        char buf[8];
        unsigned long lo, hi;

        if (!dash) {
                if (!number(s, NULL, 1, 65535, &lo))
                        return false;
                hi = 0;
        } else {
                if ((size_t)(dash - s) >= sizeof(buf))
                        return false;
                memcpy(buf, s, (size_t)(dash - s));
                buf[dash - s] = '\0';
                if (!number(buf, NULL, 1, 65535, &lo) || !number(dash + 1, NULL, 1, 65535, &hi) ||
                    hi < lo)
                        return false;
        }
        *ret_min = (uint16_t)lo;
        *ret_max = (uint16_t)hi;
        return true;
}

/* ---- rule matches ---- */

enum match {
        M_ETHER_SRC,
        M_ETHER_DST,
        M_ETHER_TYPE,
        M_VLAN,
        M_ARP_OP,
        M_ARP_SENDER_MAC,
        M_ARP_SENDER_IP,
        M_ARP_TARGET_IP,
        M_IP_SRC,
        M_IP_DST,
        M_PROTO,
        M_SPORT,
        M_DPORT,
        M_ICMP_TYPE,
        M_PRIORITY,
        M_VLAN_ENCAP,
        M_ARP_HTYPE,
        M_ARP_PTYPE,
        M_ARP_TARGET_MAC,
        M_ARP_GRATUITOUS,
        M_DSCP,
        M_ICMP_CODE,
        M_TCP_FLAGS,
        M_COMMENT,
        M_COUNT
};

static const struct {
        const char *name;
        bool negatable;
        const char *value; /* what the value should be, for messages */
} matches[M_COUNT] = {
        [M_ETHER_SRC] = {"ether-src", true, "a MAC or MAC/MASK"},
        [M_ETHER_DST] = {"ether-dst", true, "a MAC or MAC/MASK"},
        [M_ETHER_TYPE] = {"ether-type", true, "1-65535 or ipv4, arp, ipv6, rarp, vlan"},
        [M_VLAN] = {"vlan", true, "0-4095"},
        [M_ARP_OP] = {"arp-op", true, "1-65535 or request, reply"},
        [M_ARP_SENDER_MAC] = {"arp-sender-mac", true, "a MAC"},
        [M_ARP_SENDER_IP] = {"arp-sender-ip", true, "an IPv4 address or prefix"},
        [M_ARP_TARGET_IP] = {"arp-target-ip", true, "an IPv4 address or prefix"},
        [M_IP_SRC] = {"ip-src", true, "an IP address, prefix or range A-B"},
        [M_IP_DST] = {"ip-dst", true, "an IP address, prefix or range A-B"},
        [M_PROTO] = {"proto", true, "1-255 or tcp, udp, sctp, icmp, icmpv6"},
        [M_SPORT] = {"sport", true, "a port (1-65535) or a range P-Q"},
        [M_DPORT] = {"dport", true, "a port (1-65535) or a range P-Q"},
        [M_ICMP_TYPE] = {"icmp-type", true, "0-255"},
        [M_PRIORITY] = {"priority", false, "-1000 to 1000"},
        [M_VLAN_ENCAP] = {"vlan-encap", true, "1-65535 or ipv4, arp, ipv6, rarp, vlan"},
        [M_ARP_HTYPE] = {"arp-htype", true, "1-65535"},
        [M_ARP_PTYPE] = {"arp-ptype", true, "1-65535 or ipv4"},
        [M_ARP_TARGET_MAC] = {"arp-target-mac", true, "a MAC"},
        [M_ARP_GRATUITOUS] = {"arp-gratuitous", true, "true"},
        [M_DSCP] = {"dscp", true, "0-63"},
        [M_ICMP_CODE] = {"icmp-code", false, "0-255"},
        [M_TCP_FLAGS] = {"tcp-flags", true,
                         "MASK/SET, each FIN,SYN,RST,PSH,ACK,URG,ECE,CWR, ALL, NONE or 0-255"},
        [M_COMMENT] = {"comment", false, "a text of up to 256 bytes"},
};

/* -1000..1000, decimal. */
static bool priority(const char *s, int16_t *ret)
{
        bool neg = s[0] == '-';
        unsigned long v;

        if (!number(neg ? s + 1 : s, NULL, 0, 1000, &v))
                return false;
        *ret = (int16_t)(neg ? -(long)v : (long)v);
        return true;
}

/* One side of MASK/SET: names joined by ',', or a number. */
static bool flag_set(const char *s, size_t len, uint8_t *ret)
{
        char buf[64];
        unsigned long v = 0, one;
        char *save = NULL;

        if (len == 0 || len >= sizeof(buf))
                return false;
        memcpy(buf, s, len);
        buf[len] = '\0';
        if (isdigit((unsigned char)buf[0]))
                return number(buf, NULL, 0, 255, &one) && (*ret = (uint8_t)one, true);
        for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                /* Names only: no number is in [256, 0]. */
                if (!number(w, tcp_flag_names, 256, 0, &one))
                        return false;
                v |= one;
        }
        *ret = (uint8_t)v;
        return true;
}

static bool tcp_flags(const char *s, uint8_t *ret_mask, uint8_t *ret_set)
{
        const char *slash = strchr(s, '/');

        return slash && flag_set(s, (size_t)(slash - s), ret_mask) &&
               flag_set(slash + 1, strlen(slash + 1), ret_set) && (*ret_set & ~*ret_mask) == 0 &&
               *ret_mask;
}

/* Set match m of r from val; false when val is not what m takes. The
 * strings point into the line, which outlives r (nb_fw_rule_add copies). */
static bool set_match(nb_fw_rule *r, enum match m, bool neg, const char *val)
{
        unsigned long n;

        switch (m) {
        case M_ETHER_SRC:
                r->ether_src = val;
                r->ether_src_not = neg;
                return mac(val, true);
        case M_ETHER_DST:
                r->ether_dst = val;
                r->ether_dst_not = neg;
                return mac(val, true);
        case M_ETHER_TYPE:
                if (!number(val, ether_types, 1, 0xffff, &n))
                        return false;
                r->ether_type = (uint16_t)n;
                r->ether_type_not = neg;
                return true;
        case M_VLAN:
                if (!number(val, NULL, 0, 4095, &n))
                        return false;
                r->has_vlan_id = true;
                r->vlan_id = (uint16_t)n;
                r->vlan_id_not = neg;
                return true;
        case M_ARP_OP:
                if (!number(val, arp_ops, 1, 0xffff, &n))
                        return false;
                r->arp_op = (uint16_t)n;
                r->arp_op_not = neg;
                return true;
        case M_ARP_SENDER_MAC:
                r->arp_sender_mac = val;
                r->arp_sender_mac_not = neg;
                return mac(val, false);
        case M_ARP_SENDER_IP:
                r->arp_sender_ip = val;
                r->arp_sender_ip_not = neg;
                return !strchr(val, ':') && addr(val, true);
        case M_ARP_TARGET_IP:
                r->arp_target_ip = val;
                r->arp_target_ip_not = neg;
                return !strchr(val, ':') && addr(val, true);
        case M_IP_SRC:
                r->ip_src = val;
                r->ip_src_not = neg;
                return addr_or_range(val);
        case M_IP_DST:
                r->ip_dst = val;
                r->ip_dst_not = neg;
                return addr_or_range(val);
        case M_PROTO:
                if (!number(val, protos, 1, 255, &n))
                        return false;
                r->l4_proto = (uint8_t)n;
                r->l4_proto_not = neg;
                return true;
        case M_SPORT:
                r->sport_not = neg;
                return ports(val, &r->sport_min, &r->sport_max);
        case M_DPORT:
                r->dport_not = neg;
                return ports(val, &r->dport_min, &r->dport_max);
        case M_ICMP_TYPE:
                if (!number(val, NULL, 0, 255, &n))
                        return false;
                r->has_icmp_type = true;
                r->icmp_type = (uint8_t)n;
                r->icmp_not = neg;
                return true;
        case M_PRIORITY:
                return priority(val, &r->priority);
        case M_VLAN_ENCAP:
                if (!number(val, ether_types, 1, 0xffff, &n))
                        return false;
                r->vlan_encap = (uint16_t)n;
                r->vlan_encap_not = neg;
                return true;
        case M_ARP_HTYPE:
                if (!number(val, NULL, 1, 0xffff, &n))
                        return false;
                r->arp_htype = (uint16_t)n;
                r->arp_htype_not = neg;
                return true;
        case M_ARP_PTYPE:
                if (!number(val, arp_ptypes, 1, 0xffff, &n))
                        return false;
                r->arp_ptype = (uint16_t)n;
                r->arp_ptype_not = neg;
                return true;
        case M_ARP_TARGET_MAC:
                r->arp_target_mac = val;
                r->arp_target_mac_not = neg;
                return mac(val, false);
        case M_ARP_GRATUITOUS:
                r->arp_gratuitous = true;
                r->arp_gratuitous_not = neg;
                return strcmp(val, "true") == 0;
        case M_DSCP:
                if (!number(val, NULL, 0, 63, &n))
                        return false;
                r->has_dscp = true;
                r->dscp = (uint8_t)n;
                r->dscp_not = neg;
                return true;
        case M_ICMP_CODE:
                if (!number(val, NULL, 0, 255, &n))
                        return false;
                r->has_icmp_code = true;
                r->icmp_code = (uint8_t)n;
                return true;
        case M_TCP_FLAGS:
                r->tcp_flags_not = neg;
                return tcp_flags(val, &r->tcp_flags_mask, &r->tcp_flags);
        case M_COMMENT:
                r->comment = val;
                return strlen(val) <= 256;
        case M_COUNT:
                break;
        }
        return false;
}

/* ---- statements ---- */

static int need_owner(struct parse *p, const char *what)
{
        return p->owner ? 0 : fail(p, "'%s' before any 'owner' line", what);
}

/* The library's owner syntax, checked here too so the error names the
 * line at once rather than when the owner is added to the batch. */
static bool owner_name_ok(const char *s)
{
        size_t n = 0;

        for (; s[n]; n++)
                if (!isalnum((unsigned char)s[n]) && !strchr("_.:@-", s[n]))
                        return false;
        return n >= 1 && n <= 64;
}

/* Add the owner being read to the batch; the batch has its own copy of the
 * ruleset, so it goes at once. */
static int flush_owner(struct parse *p)
{
        struct fwfile *f = p->f;
        char **o;
        unsigned *l;
        int r;

        if (!p->owner)
                return 0;
        o = realloc(f->owners, (f->n_owners + 1) * sizeof(*o));
        if (o)
                f->owners = o;
        l = realloc(p->owner_lines, (f->n_owners + 1) * sizeof(*l));
        if (l)
                p->owner_lines = l;
        if (!o || !l)
                return oom(p);
        r = nb_batch_firewall_apply(p->batch, p->owner, p->ifname, p->rs,
                                    f->force_ensure ? NB_FW_ENSURE : p->mode);
        if (r == -EINVAL) {
                p->line = p->owner_line;
                return fail(p, "owner '%s' on '%s' refused", p->owner, p->ifname);
        }
        if (r < 0)
                return oom(p);
        f->owners[f->n_owners] = p->owner;
        p->owner_lines[f->n_owners++] = p->owner_line;
        p->owner = NULL;
        free(p->ifname);
        p->ifname = NULL;
        nb_fw_ruleset_free(p->rs);
        p->rs = NULL;
        return 0;
}

static int st_owner(struct parse *p, int argc, char **argv)
{
        const char *ifname;
        nb_fw_mode mode = NB_FW_REPLACE;
        int i = 2, r;

        if (argc < 2)
                return fail(p, "usage: owner NAME [on IFNAME] [replace|ensure]");
        if (!owner_name_ok(argv[1]))
                return fail(p, "bad owner name '%s' ([A-Za-z0-9_.:@-], 1-64 bytes)", argv[1]);
        ifname = argv[1];
        if (i < argc && strcmp(argv[i], "on") == 0) {
                if (i + 1 >= argc)
                        return fail(p, "'on' needs an interface name");
                ifname = argv[i + 1];
                i += 2;
        }
        if (strlen(ifname) > 15)
                return fail(p, "interface name '%s' longer than 15 bytes", ifname);
        if (i < argc && strcmp(argv[i], "replace") == 0)
                i++;
        else if (i < argc && strcmp(argv[i], "ensure") == 0) {
                mode = NB_FW_ENSURE;
                i++;
        }
        if (i < argc)
                return fail(p, "unexpected '%s' (usage: owner NAME [on IFNAME] [replace|ensure])",
                            argv[i]);
        for (size_t k = 0; k < p->f->n_owners; k++)
                if (strcmp(p->f->owners[k], argv[1]) == 0)
                        return fail(p, "owner '%s' already defined at line %u", argv[1],
                                    p->owner_lines[k]);
        if (p->owner && strcmp(p->owner, argv[1]) == 0)
                return fail(p, "owner '%s' already defined at line %u", argv[1], p->owner_line);
        r = flush_owner(p);
        if (r < 0)
                return r;
        p->owner = strdup(argv[1]);
        p->ifname = strdup(ifname);
        p->rs = nb_fw_ruleset_new();
        if (!p->owner || !p->ifname || !p->rs)
                return oom(p);
        p->mode = mode;
        p->owner_line = p->line;
        return 0;
}

/* MATCH... from argv[i] on into r. */
static int parse_matches(struct parse *p, int argc, char **argv, int i, nb_fw_rule *r)
{
        uint32_t seen = 0;

        while (i < argc) {
                enum match m = 0;
                bool neg = false;

                while (m < M_COUNT && strcmp(argv[i], matches[m].name) != 0)
                        m++;
                if (m == M_COUNT)
                        return fail(p, "unknown match '%s'", argv[i]);
                if (seen & (1u << m))
                        return fail(p, "'%s' given twice", matches[m].name);
                seen |= 1u << m;
                i++;
                if (i < argc && strcmp(argv[i], "!") == 0) {
                        if (!matches[m].negatable)
                                return fail(p, "'%s' cannot be negated", matches[m].name);
                        neg = true;
                        i++;
                }
                if (i >= argc)
                        return fail(p, "'%s' needs a value: %s", matches[m].name, matches[m].value);
                if (!set_match(r, m, neg, argv[i]))
                        return fail(p, "%s '%s': not %s", matches[m].name, argv[i],
                                    matches[m].value);
                i++;
        }
        return 0;
}

static int st_rule(struct parse *p, int argc, char **argv)
{
        nb_fw_rule rule = NB_FW_RULE_INIT;
        int r = need_owner(p, "rule");

        if (r < 0)
                return r;
        if (argc < 3)
                return fail(p, "usage: rule from|to accept|drop|reject|return [MATCH...]");
        if (strcmp(argv[1], "from") == 0)
                rule.direction = NB_FW_FROM_GUEST;
        else if (strcmp(argv[1], "to") == 0)
                rule.direction = NB_FW_TO_GUEST;
        else
                return fail(p, "direction '%s': 'from' or 'to'", argv[1]);
        if (strcmp(argv[2], "accept") == 0)
                rule.verdict = NB_FW_ACCEPT;
        else if (strcmp(argv[2], "drop") == 0)
                rule.verdict = NB_FW_DROP;
        else if (strcmp(argv[2], "reject") == 0)
                rule.verdict = NB_FW_REJECT;
        else if (strcmp(argv[2], "return") == 0)
                rule.verdict = NB_FW_RETURN;
        else
                return fail(p, "verdict '%s': accept, drop, reject or return", argv[2]);
        r = parse_matches(p, argc, argv, 3, &rule);
        if (r < 0)
                return r;
        r = nb_fw_rule_add(p->rs, &rule);
        if (r == -EINVAL)
                return fail(p, "rule refused");
        return r < 0 ? oom(p) : 0;
}

/* group NAME [priority P] [root] [guard MATCH...] */
static int st_group(struct parse *p, int argc, char **argv)
{
        nb_fw_group_opts o = NB_FW_GROUP_OPTS_INIT;
        nb_fw_rule guard = NB_FW_RULE_INIT;
        bool ex = false;
        int i = 2, r = need_owner(p, "group");

        if (r < 0)
                return r;
        if (argc < 2)
                return fail(p, "usage: group NAME [priority P] [root] [guard MATCH...]");
        for (; i < argc && !o.guard; i++) {
                ex = true;
                if (strcmp(argv[i], "priority") == 0) {
                        if (i + 1 >= argc || !priority(argv[i + 1], &o.priority))
                                return fail(p, "group priority: -1000 to 1000");
                        i++;
                } else if (strcmp(argv[i], "root") == 0) {
                        o.root = true;
                } else if (strcmp(argv[i], "guard") == 0) {
                        r = parse_matches(p, argc, argv, i + 1, &guard);
                        if (r < 0)
                                return r;
                        o.guard = &guard;
                } else {
                        return fail(p,
                                    "unexpected '%s' (usage: group NAME [priority P] [root] "
                                    "[guard MATCH...])",
                                    argv[i]);
                }
        }
        /* A plain group is new; one with options may be selected again
         * with the same options (libvirt's filterref into one chain). */
        r = ex ? nb_fw_group_ex(p->rs, argv[1], &o) : nb_fw_group(p->rs, argv[1]);
        if (r == -EINVAL)
                return fail(p, "bad group name '%s' ([A-Za-z0-9_-], 1-32 bytes) or guard", argv[1]);
        if (r == -EEXIST)
                return fail(p, "group '%s' already defined for owner '%s'%s", argv[1], p->owner,
                            ex ? " with other options" : "");
        return r < 0 ? oom(p) : 0;
}

/* filter NAME VAR=VALUE...: libvirt's stock filter by name; a variable
 * given again, or with values joined by ',', has several values. */
static int filter_vars(struct parse *p, const char *name, int nargs, char **args)
{
        nb_fw_var vars[MAX_WORDS];
        const char *vals[2 * MAX_WORDS];
        const size_t cap = sizeof(vals) / sizeof(*vals);
        size_t n_vars = 0, n_vals = 0;
        int r;

        /* Values by variable, each list NULL-terminated, in vals: every
         * write, the end marks included, is bounded by cap (a variable
         * with no value still takes a slot for its end mark). */
        for (int a = 0; a < nargs; a++) {
                char *eq = strchr(args[a], '=');
                if (!eq || eq == args[a])
                        return fail(p, "filter %s: '%s' is not VAR=VALUE", name, args[a]);
                *eq = '\0';
        }
        for (int a = 0; a < nargs; a++) {
                bool seen = false;
                for (size_t v = 0; v < n_vars && !seen; v++)
                        seen = strcmp(vars[v].name, args[a]) == 0;
                if (seen)
                        continue;
                vars[n_vars].size = sizeof(nb_fw_var);
                vars[n_vars].name = args[a];
                vars[n_vars++].values = vals + n_vals;
                for (int b = a; b < nargs; b++) {
                        char *save = NULL;
                        if (strcmp(args[b], args[a]) != 0)
                                continue;
                        for (char *v = strtok_r(args[b] + strlen(args[b]) + 1, ",", &save); v;
                             v = strtok_r(NULL, ",", &save)) {
                                if (n_vals + 2 >= cap)
                                        return fail(p, "filter %s: more than %zu values", name,
                                                    cap - 2);
                                vals[n_vals++] = v;
                        }
                }
                if (n_vals >= cap)
                        return fail(p, "filter %s: more than %zu values and variables", name,
                                    cap - 2);
                vals[n_vals++] = NULL;
        }
        r = nb_fw_add_filter(p->rs, name, vars, n_vars);
        if (r == -ENOENT)
                return fail(p,
                            "unknown filter '%s' (usage: filter NAME [VAR=VALUE...], "
                            "or one of the forms in fwfile.h)",
                            name);
        if (r == -EINVAL) {
                /* The library's message names the function; the file's
                 * reader wrote a filter line, not that call. */
                const char *why = nb_last_error();
                const char *me = "nb_fw_add_filter: ";
                return fail(p, "filter %s: %s", name,
                            strncmp(why, me, strlen(me)) == 0 ? why + strlen(me) : why);
        }
        if (r == -EEXIST)
                return fail(p, "filter %s: owner '%s' already has a group of that name", name,
                            p->owner);
        return r < 0 ? oom(p) : 0;
}

static bool old_filter_form(const char *name, int nargs, char **args)
{
        static const char *const names[] = {"no-mac-spoofing", "no-ip-spoofing", "no-arp-spoofing",
                                            "no-promisc",      "allow-dhcp",     "allow-arp",
                                            "clean-traffic"};
        bool known = false;

        for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
                known |= strcmp(name, names[i]) == 0;
        for (int a = 0; known && a < nargs; a++)
                if (strchr(args[a], '='))
                        return false;
        return known;
}

static int st_filter(struct parse *p, int argc, char **argv)
{
        const char *const *args = (const char *const *)argv + 2;
        int nargs = argc - 2, r = need_owner(p, "filter");
        const char *name = argc > 1 ? argv[1] : "";

        if (r < 0)
                return r;
        if (argc < 2)
                return fail(p, "usage: filter NAME [VAR=VALUE...]");
        if (!old_filter_form(name, nargs, argv + 2))
                return filter_vars(p, name, nargs, argv + 2);
        if (strcmp(name, "no-mac-spoofing") == 0 && nargs == 1)
                r = nb_fw_add_no_mac_spoofing(p->rs, args[0]);
        else if (strcmp(name, "no-ip-spoofing") == 0)
                r = nb_fw_add_no_ip_spoofing(p->rs, args);
        else if (strcmp(name, "no-arp-spoofing") == 0 && nargs >= 1)
                r = nb_fw_add_no_arp_spoofing(p->rs, args[0], args + 1);
        else if (strcmp(name, "no-promisc") == 0 && nargs == 1)
                r = nb_fw_add_no_promisc(p->rs, args[0]);
        else if (strcmp(name, "allow-dhcp") == 0 && nargs <= 1)
                r = nb_fw_add_allow_dhcp(p->rs, nargs ? args[0] : NULL);
        else if (strcmp(name, "allow-arp") == 0 && nargs == 0)
                r = nb_fw_add_allow_arp(p->rs);
        else if (strcmp(name, "clean-traffic") == 0 && nargs >= 1)
                r = nb_fw_add_clean_traffic(p->rs, args[0], args + 1);
        else
                return fail(p, "usage: filter no-mac-spoofing MAC | no-ip-spoofing [IPV4...] | "
                               "no-arp-spoofing MAC [IPV4...] | no-promisc MAC | "
                               "allow-dhcp [SERVER] | allow-arp | clean-traffic MAC [IPV4...]");
        if (r == -EINVAL)
                return fail(p, "filter %s: bad MAC or IPv4 address", name);
        if (r == -EEXIST)
                return fail(p, "filter %s: owner '%s' already has a group of that name", name,
                            p->owner);
        return r < 0 ? oom(p) : 0;
}

static const struct {
        const char *name;
        int (*fn)(struct parse *p, int argc, char **argv);
} statements[] = {
        {"owner", st_owner},
        {"group", st_group},
        {"rule", st_rule},
        {"filter", st_filter},
};

/* Split line (modified in place) into words, NULL-terminated. A word in
 * double quotes may hold blanks and '#'; \" and \\ stand for " and \ in
 * it. '#' elsewhere starts a comment. */
static int split(struct parse *p, char *line, char **argv, int *ret_argc)
{
        char *in = line;
        int argc = 0;

        for (;;) {
                char *out;
                while (*in && strchr(" \t\r\v\f", *in))
                        in++;
                if (!*in || *in == '#')
                        break;
                if (argc == MAX_WORDS)
                        return fail(p, "more than %d words on one line", MAX_WORDS);
                out = argv[argc++] = in;
                if (*in == '"') {
                        for (in++; *in && *in != '"'; in++) {
                                if (*in == '\\' && (in[1] == '"' || in[1] == '\\'))
                                        in++;
                                *out++ = *in;
                        }
                        if (*in != '"')
                                return fail(p, "a quote is not closed");
                        in++;
                        if (*in && !strchr(" \t\r\v\f#", *in))
                                return fail(p, "a blank must follow a closing quote");
                } else {
                        while (*in && !strchr(" \t\r\v\f#", *in))
                                *out++ = *in++;
                }
                if (*in == '#')
                        *in = '\0';
                else if (*in)
                        in++;
                *out = '\0';
        }
        argv[argc] = NULL;
        *ret_argc = argc;
        return 0;
}

static int parse_line(struct parse *p, char *line)
{
        char *argv[MAX_WORDS + 1];
        int argc = 0, r;

        r = split(p, line, argv, &argc);
        if (r < 0 || argc == 0)
                return r;
        for (size_t i = 0; i < sizeof(statements) / sizeof(*statements); i++)
                if (strcmp(argv[0], statements[i].name) == 0)
                        return statements[i].fn(p, argc, argv);
        return fail(p, "unknown statement '%s' (owner, group, rule or filter)", argv[0]);
}

int fwfile_parse(struct fwfile *f, const char *text, size_t len, nb_batch *batch)
{
        struct parse p = {.f = f, .batch = batch};
        char *line = NULL;
        size_t pos = 0;
        int r = 0;

        f->err[0] = '\0';
        while (r == 0 && pos < len) {
                const char *nl = memchr(text + pos, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
                p.line++;
                if (memchr(text + pos, '\0', n)) {
                        r = fail(&p, "NUL byte");
                        break;
                }
                line = strndup(text + pos, n);
                if (!line) {
                        r = oom(&p);
                        break;
                }
                r = parse_line(&p, line);
                free(line);
                pos += n + 1;
        }
        if (r == 0)
                r = flush_owner(&p);
        if (r == 0 && f->n_owners == 0) {
                snprintf(f->err, sizeof(f->err), "%s: no 'owner' in the file", f->name);
                r = -EINVAL;
        }
        free(p.owner);
        free(p.ifname);
        nb_fw_ruleset_free(p.rs);
        free(p.owner_lines);
        return r < 0 ? r : (int)f->n_owners;
}

void fwfile_done(struct fwfile *f)
{
        for (size_t i = 0; i < f->n_owners; i++)
                free(f->owners[i]);
        free(f->owners);
        f->owners = NULL;
        f->n_owners = 0;
}
