// SPDX-License-Identifier: LGPL-2.1-or-later
/* A model rule in libvirt's terms; see fw_text.h for the line's form. */
#include "fw_text.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libnftnl/udata.h>
#include <linux/netfilter/nf_tables.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* An snprintf() that goes on: n counts what the whole would take. */
struct out {
        char *buf;
        size_t len, n;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
        size_t room = o->n < o->len ? o->len - o->n : 0;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vsnprintf(room ? o->buf + o->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k > 0)
                o->n += (size_t)k;
}

/* " name='[!]value'" */
__attribute__((format(printf, 4, 5))) static void attr(struct out *o, const char *name, bool neg,
                                                       const char *fmt, ...)
{
        char v[64];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(v, sizeof(v), fmt, ap);
        va_end(ap);
        put(o, " %s='%s%s'", name, neg ? "!" : "", v);
}

static const char *name_of(const char *const *names, size_t n, uint32_t v)
{
        return v < n ? names[v] : NULL;
}

/* protocolid, encap-protocol: libvirt's names where it has them. */
static void ether_type_attr(struct out *o, const char *name, const struct nbd_fw_num *t)
{
        const char *s = t->v == 0x0800   ? "ipv4"
                        : t->v == 0x86dd ? "ipv6"
                        : t->v == 0x0806 ? "arp"
                        : t->v == 0x8035 ? "rarp"
                                         : NULL;

        if (s)
                attr(o, name, t->neg, "%s", s);
        else
                attr(o, name, t->neg, "0x%04x", t->v);
}

static bool all_ones(const uint8_t *m, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (m[i] != 0xff)
                        return false;
        return true;
}

static void mac_attrs(struct out *o, const char *addr_name, const char *mask_name,
                      const struct nbd_fw_mac *m)
{
        const uint8_t *a = m->addr, *k = m->mask;

        if (!m->set)
                return;
        attr(o, addr_name, m->neg, "%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4],
             a[5]);
        if (!all_ones(k, 6))
                attr(o, mask_name, false, "%02x:%02x:%02x:%02x:%02x:%02x", k[0], k[1], k[2], k[3],
                     k[4], k[5]);
}

/* The prefix length of a mask, or -1 when it is not a prefix. */
static int prefix_len(const uint8_t *m, size_t len)
{
        int bits = 0;
        size_t i = 0;

        for (; i < len && m[i] == 0xff; i++)
                bits += 8;
        if (i < len) {
                uint8_t b = m[i++];
                while (b & 0x80) {
                        bits++;
                        b = (uint8_t)(b << 1);
                }
                if (b)
                        return -1;
        }
        for (; i < len; i++)
                if (m[i])
                        return -1;
        return bits;
}

struct ip_names {
        const char *addr, *mask, *from, *to;
};

static void ip_attrs(struct out *o, const struct ip_names *n, const struct nbd_fw_ip *ip)
{
        int af = ip->family == 4 ? AF_INET : AF_INET6;
        size_t len = ip->family == 4 ? 4 : 16;
        char a[INET6_ADDRSTRLEN], m[INET6_ADDRSTRLEN];
        int bits;

        if (!ip->set || !inet_ntop(af, ip->addr, a, sizeof(a)) ||
            !inet_ntop(af, ip->mask, m, sizeof(m)))
                return;
        if (ip->is_range) {
                attr(o, n->from, ip->neg, "%s", a);
                attr(o, n->to, false, "%s", m);
                return;
        }
        attr(o, n->addr, ip->neg, "%s", a);
        bits = prefix_len(ip->mask, len);
        if (bits < 0)
                attr(o, n->mask, false, "%s", m);
        else if ((size_t)bits != len * 8)
                attr(o, n->mask, false, "%d", bits);
}

static void port_attrs(struct out *o, const char *start, const char *end, const uint16_t p[2],
                       bool neg)
{
        if (!p[0])
                return;
        attr(o, start, neg, "%u", p[0]);
        if (p[1] && p[1] != p[0])
                attr(o, end, false, "%u", p[1]);
}

static void flag_names(char *b, size_t len, uint8_t v)
{
        static const char *const names[] = {"FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"};
        size_t n = 0;

        b[0] = '\0';
        if (!v) {
                snprintf(b, len, "NONE");
                return;
        }
        for (int i = 0; i < 8; i++)
                if (v & (1u << i) && n < len)
                        n += (size_t)snprintf(b + n, len - n, "%s%s", n ? "," : "", names[i]);
}

enum element { E_NONE, E_MAC, E_VLAN, E_ARP, E_RARP, E_IP, E_IPV6, E_IP_ANY };

/* The element libvirt would write the rule with, and the ether type it
 * implies (0: none). */
static enum element element_of(const struct nbd_fw_rule *r, uint32_t *ret_type)
{
        bool et = r->ether_type.set && !r->ether_type.neg;
        uint32_t t = et ? r->ether_type.v : 0;
        bool arp = r->arp_op.set || r->arp_sha.set || r->arp_tha.set || r->arp_spa.set ||
                   r->arp_tpa.set || r->arp_htype.set || r->arp_ptype.set || r->arp_gratuitous.set;
        bool ip = r->ip_src.set || r->ip_dst.set || r->l4proto.set || r->sport[0] || r->dport[0] ||
                  r->has_icmp_type || r->dscp.set || r->tcp_flags_mask;
        int family = r->ip_src.set        ? r->ip_src.family
                     : r->ip_dst.set      ? r->ip_dst.family
                     : t == 0x0800        ? 4
                     : t == 0x86dd        ? 6
                     : r->dscp.set        ? 4
                     : !r->l4proto.set    ? 0
                     : r->l4proto.v == 1  ? 4
                     : r->l4proto.v == 58 ? 6
                                          : 0;

        if (arp || t == 0x0806 || t == 0x8035) {
                *ret_type = t == 0x8035 ? 0x8035 : 0x0806;
                return t == 0x8035 ? E_RARP : E_ARP;
        }
        if (ip || t == 0x0800 || t == 0x86dd) {
                *ret_type = family == 4 ? 0x0800 : family == 6 ? 0x86dd : 0;
                return family == 4 ? E_IP : family == 6 ? E_IPV6 : E_IP_ANY;
        }
        if (r->vlan_id.set || r->vlan_encap.set || t == 0x8100) {
                *ret_type = 0x8100;
                return E_VLAN;
        }
        *ret_type = 0;
        return r->ether_src.set || r->ether_dst.set || r->ether_type.set ? E_MAC : E_NONE;
}

static void arp_attrs(struct out *o, const struct nbd_fw_rule *r)
{
        static const char *const ops[] = {NULL,
                                          "Request",
                                          "Reply",
                                          "Request_Reverse",
                                          "Reply_Reverse",
                                          "DRARP_Request",
                                          "DRARP_Reply",
                                          "DRARP_Error",
                                          "InARP_Request",
                                          "ARP_NAK"};
        static const struct ip_names spa = {"arpsrcipaddr", "arpsrcipmask", "arpsrcipfrom",
                                            "arpsrcipto"};
        static const struct ip_names tpa = {"arpdstipaddr", "arpdstipmask", "arpdstipfrom",
                                            "arpdstipto"};
        const char *op = name_of(ops, sizeof(ops) / sizeof(*ops), r->arp_op.v);

        if (r->arp_htype.set)
                attr(o, "hwtype", r->arp_htype.neg, "%u", r->arp_htype.v);
        if (r->arp_ptype.set)
                attr(o, "protocoltype", r->arp_ptype.neg, "0x%04x", r->arp_ptype.v);
        if (r->arp_op.set && op)
                attr(o, "opcode", r->arp_op.neg, "%s", op);
        else if (r->arp_op.set)
                attr(o, "opcode", r->arp_op.neg, "%u", r->arp_op.v);
        mac_attrs(o, "arpsrcmacaddr", "arpsrcmacmask", &r->arp_sha);
        mac_attrs(o, "arpdstmacaddr", "arpdstmacmask", &r->arp_tha);
        ip_attrs(o, &spa, &r->arp_spa);
        ip_attrs(o, &tpa, &r->arp_tpa);
        /* No value of its own to negate ('!true' is false to libvirt,
         * which then leaves the match out): negated, as libvirt writes it. */
        if (r->arp_gratuitous.set && r->arp_gratuitous.neg)
                put(o, " match='no' gratuitous='true'");
        else if (r->arp_gratuitous.set)
                attr(o, "gratuitous", false, "true");
}

static void ip_rule_attrs(struct out *o, const struct nbd_fw_rule *r)
{
        static const struct {
                uint32_t v;
                const char *name;
        } protos[] = {{1, "icmp"}, {2, "igmp"},    {6, "tcp"},    {17, "udp"},     {50, "esp"},
                      {51, "ah"},  {58, "icmpv6"}, {132, "sctp"}, {136, "udplite"}};
        static const struct ip_names src = {"srcipaddr", "srcipmask", "srcipfrom", "srcipto"};
        static const struct ip_names dst = {"dstipaddr", "dstipmask", "dstipfrom", "dstipto"};
        char set[48], mask[48];

        ip_attrs(o, &src, &r->ip_src);
        ip_attrs(o, &dst, &r->ip_dst);
        if (r->l4proto.set) {
                const char *name = NULL;
                for (size_t i = 0; i < sizeof(protos) / sizeof(*protos); i++)
                        if (protos[i].v == r->l4proto.v)
                                name = protos[i].name;
                if (name)
                        attr(o, "protocol", r->l4proto.neg, "%s", name);
                else
                        attr(o, "protocol", r->l4proto.neg, "%u", r->l4proto.v);
        }
        port_attrs(o, "srcportstart", "srcportend", r->sport, r->sport_neg);
        port_attrs(o, "dstportstart", "dstportend", r->dport, r->dport_neg);
        if (r->dscp.set)
                attr(o, "dscp", r->dscp.neg, "%u", r->dscp.v);
        if (r->has_icmp_type)
                attr(o, "type", r->icmp_neg, "%u", r->icmp_type);
        if (r->has_icmp_type && r->has_icmp_code)
                attr(o, "code", false, "%u", r->icmp_code);
        if (r->tcp_flags_mask) {
                flag_names(mask, sizeof(mask), r->tcp_flags_mask);
                flag_names(set, sizeof(set), r->tcp_flags);
                attr(o, "flags", r->tcp_flags_neg, "%s/%s", mask, set);
        }
}

/* Everything but the comment: "out drop priority='5' ip srcipaddr=...". */
static void render_rule(struct out *o, const struct nbd_fw_rule *r)
{
        static const char *const verdicts[] = {"accept", "drop", "reject", "return"};
        static const char *const elements[] = {
                [E_NONE] = NULL,   [E_MAC] = "mac", [E_VLAN] = "vlan", [E_ARP] = "arp",
                [E_RARP] = "rarp", [E_IP] = "ip",   [E_IPV6] = "ipv6", [E_IP_ANY] = "ip/ipv6"};
        const char *v = name_of(verdicts, 4, r->verdict);
        uint32_t implied;
        enum element el = element_of(r, &implied);

        put(o, "%s %s", r->dir == NBD_FW_DIR_TO ? "in" : "out", v ? v : "?");
        if (r->priority)
                attr(o, "priority", false, "%d", r->priority);
        if (el != E_NONE)
                put(o, " %s", elements[el]);
        mac_attrs(o, "srcmacaddr", "srcmacmask", &r->ether_src);
        mac_attrs(o, "dstmacaddr", "dstmacmask", &r->ether_dst);
        if (r->ether_type.set && (r->ether_type.neg || r->ether_type.v != implied))
                ether_type_attr(o, "protocolid", &r->ether_type);
        if (r->vlan_id.set)
                attr(o, "vlanid", r->vlan_id.neg, "%u", r->vlan_id.v);
        if (r->vlan_encap.set)
                ether_type_attr(o, "encap-protocol", &r->vlan_encap);
        arp_attrs(o, r);
        ip_rule_attrs(o, r);
}

/* "comment='...'" of the comment's first take bytes, with "..." when that
 * is not all of it. */
static void render_comment(struct out *o, const char *c, size_t take)
{
        size_t len = strlen(c);

        put(o, "comment='");
        for (size_t i = 0; i < take && i < len; i++) {
                unsigned char ch = (unsigned char)c[i];
                if (ch == '\'' || ch == '\\')
                        put(o, "\\%c", ch);
                else if (ch < 0x20 || ch == 0x7f)
                        put(o, "\\x%02x", ch);
                else
                        put(o, "%c", ch);
        }
        put(o, "%s'", take < len ? "..." : "");
}

int nbd_fw_rule_text(const struct nbd_fw_rule *r, char *buf, size_t len)
{
        struct out o = {buf, len, 0};

        if (len)
                buf[0] = '\0';
        if (r->comment[0]) {
                render_comment(&o, r->comment, sizeof(r->comment));
                put(&o, " ");
        }
        render_rule(&o, r);
        return (int)o.n;
}

/* com (nc bytes), a blank when there is a comment, rule's first nr bytes,
 * tail; the caller has made sure it fits. */
static size_t join(char *buf, const char *com, size_t nc, const char *rule, size_t nr,
                   const char *tail)
{
        size_t n = 0;

        memcpy(buf, com, nc);
        n += nc;
        if (nc)
                buf[n++] = ' ';
        memcpy(buf + n, rule, nr);
        n += nr;
        memcpy(buf + n, tail, strlen(tail) + 1);
        return n + strlen(tail);
}

size_t nbd_fw_rule_text_stored(const struct nbd_fw_rule *r, char buf[NBD_FW_TEXT_STORED_MAX + 1])
{
        static const char more[] = " ...";
        const size_t max = NBD_FW_TEXT_STORED_MAX;
        char rule[4096], com[4 * NBD_FW_COMMENT_MAX + 32];
        struct out ro = {rule, sizeof(rule), 0}, co = {com, sizeof(com), 0};
        size_t head, room, cut, take;

        com[0] = '\0';
        render_rule(&ro, r);
        if (r->comment[0])
                render_comment(&co, r->comment, sizeof(r->comment));
        if (co.n + (co.n ? 1 : 0) + ro.n <= max)
                return join(buf, com, co.n, rule, ro.n, "");
        /* The direction and action always stay: "out drop". */
        head = strcspn(rule, " ");
        head += rule[head] ? 1 + strcspn(rule + head + 1, " ") : 0;
        /* The comment first, cut (at a character's start) only as far as
         * the direction and action need. */
        take = strlen(r->comment);
        while (co.n && co.n + 1 + head + sizeof(more) - 1 > max && take > 0) {
                do
                        take--;
                while (take > 0 && ((unsigned char)r->comment[take] & 0xc0) == 0x80);
                co.n = 0;
                render_comment(&co, r->comment, take);
        }
        room = max - (co.n ? co.n + 1 : 0);
        /* Then whole attributes, as many as fit before " ...". */
        cut = head;
        for (size_t i = head; i < ro.n && rule[i]; i++)
                if (rule[i] == ' ' && i + sizeof(more) - 1 <= room)
                        cut = i;
        if (ro.n <= room)
                cut = ro.n;
        return join(buf, com, co.n, rule, cut, cut < ro.n ? more : "");
}

int nbd_fw_rule_udata(struct nftnl_rule *nr, const struct nbd_fw_rule *r)
{
        char text[NBD_FW_TEXT_STORED_MAX + 1];
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        int ret = 0;

        if (!u)
                return -ENOMEM;
        nbd_fw_rule_text_stored(r, text);
        /* Sized to fit: a false here would be a bug in the sizes. */
        if (!nftnl_udata_put_strz(u, NFTNL_UDATA_RULE_COMMENT, text))
                ret = -E2BIG;
        else if (nftnl_rule_set_data(nr, NFTNL_RULE_USERDATA, nftnl_udata_buf_data(u),
                                     nftnl_udata_buf_len(u)) < 0)
                ret = -ENOMEM;
        nftnl_udata_buf_free(u);
        return ret;
}
