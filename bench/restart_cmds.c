/* libvirt's per-guest commands, read from restart_cmds.txt (what each
 * column means is said there), and the same filters as one nftables file. */
#include "restart.h"

#include <errno.h>
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

/* The file, read once; its lines stay in it. */
static char *table;

static int load_table(void)
{
        FILE *f;
        long size = 0;
        int r = 0;

        if (table)
                return 0;
        f = fopen(NB_BENCH_RESTART_CMDS, "re");
        if (!f) {
                r = -errno;
                bench_log("netbroker-bench: restart: %s: %s\n", NB_BENCH_RESTART_CMDS,
                          strerror(-r));
                return r;
        }
        if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
                r = -errno;
        if (r == 0 && !(table = calloc(1, (size_t)size + 1)))
                r = -ENOMEM;
        if (r == 0 && fread(table, 1, (size_t)size, f) != (size_t)size)
                r = -EIO;
        fclose(f);
        return r;
}

/* "-s $MAC -j RETURN" with the guest's values. */
static int expand(const struct rs_guest *g, const char *args, size_t n, char *buf, size_t len)
{
        size_t o = 0;

        for (const char *p = args; p < args + n;) {
                const char *val = NULL;
                size_t skip = 0, vlen;

                if (strncmp(p, "$MAC", 4) == 0)
                        val = g->mac, skip = 4;
                else if (strncmp(p, "$IP", 3) == 0)
                        val = g->ip, skip = 3;
                else if (strncmp(p, "$X", 2) == 0)
                        val = g->ifname, skip = 2;
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

static enum rs_tool tool_of(const char *argv0)
{
        if (strcmp(argv0, "ebtables") == 0)
                return RS_EBTABLES;
        return strcmp(argv0, "iptables") == 0 ? RS_IPTABLES : RS_IP6TABLES;
}

/* One line of the table for g in `phase`: "FO 0/5 IO ebtables ...". */
static int add_line(struct rs_cmdlist *l, const struct rs_guest *g, enum rs_phase phase,
                    const char *line, size_t n)
{
        char e = line[phase == RS_START ? 0 : 1], jumps[16], pfx[3];
        char *save = NULL, *cmd;
        struct rs_cmd *c;
        size_t k = 0;
        int r;

        if (e == '-')
                return 0;
        c = bench_grow(l->v, &l->cap, l->n, sizeof(*c));
        if (!c)
                return -ENOMEM;
        l->v = c;
        c = &l->v[l->n];
        *c = (struct rs_cmd){.expect = e == 'M'   ? RS_MUST_SUCCEED
                                       : e == 'O' ? RS_EXPECT_OK
                                                  : RS_EXPECT_FAIL,
                             .jumps = -1};
        c->buf = malloc(512);
        if (!c->buf)
                return -ENOMEM;
        r = expand(g, line, n, c->buf, 512);
        if (r == 0 && (sscanf(c->buf, "%*s %15s %2s", jumps, pfx) != 2 ||
                       (strcmp(jumps, "-") != 0 && !strchr(jumps, '/'))))
                r = -EINVAL;
        if (r < 0) {
                free(c->buf);
                return r;
        }
        if (strcmp(jumps, "-") != 0) {
                c->jumps = atoi(phase == RS_START ? jumps : strchr(jumps, '/') + 1);
                snprintf(c->jump_prefixes, sizeof(c->jump_prefixes), "%s", pfx);
        }
        cmd = c->buf;
        for (int i = 0; i < 3; i++)
                cmd += strcspn(cmd, " ") + 1;
        for (char *t = strtok_r(cmd, " ", &save); t && k + 1 < RS_MAX_ARGS;
             t = strtok_r(NULL, " ", &save))
                c->argv[k++] = t;
        c->argv[k] = NULL;
        c->tool = tool_of(c->argv[0]);
        l->n++;
        return 0;
}

int rs_cmds_instantiate(struct rs_cmdlist *l, const struct rs_guest *g, enum rs_phase phase)
{
        int r = load_table();

        for (const char *p = table; r == 0 && p && *p;) {
                size_t n = strcspn(p, "\n");
                if (n && p[0] != '#')
                        r = add_line(l, g, phase, p, n);
                p += n + (p[n] == '\n');
        }
        return r;
}

void rs_cmdlist_clear(struct rs_cmdlist *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i].buf);
        free(l->v);
        *l = (struct rs_cmdlist){0};
}

/* ebtablesRemoveSubChainsQuery and ebtablesRenameTmpSubAndRootChainsQuery
 * follow a line with "-j ", then a prefix letter and '-'. */
int rs_count_jumps(const struct rs_cmd *c, const char *out, size_t len)
{
        const char *p = out, *end = out + len;
        int n = 0;

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

/* N: what netbrokerd installs for no-promisc + clean-traffic, in nft's
 * language, so that C and N differ only in how the rules reach the kernel. */
static const char nft_guest[] =
        "\tchain $X-to-no-promisc {\n"
        "\t\tether daddr $MAC return\n"
        "\t\tether daddr & 01:00:00:00:00:00 == 01:00:00:00:00:00 return\n"
        "\t\tdrop\n\t}\n"
        "\tchain $X-from-no-mac-spoofing {\n\t\tether saddr $MAC return\n\t\tdrop\n\t}\n"
        "\tchain $X-from-no-ip-spoofing {\n"
        "\t\tip saddr 0.0.0.0 udp sport 68 udp dport 67 return\n"
        "\t\tip saddr $IP return\n"
        "\t\tmeta protocol ip drop\n\t}\n"
        "\tchain $X-from-no-arp-spoofing {\n"
        "\t\tarp saddr ether != $MAC drop\n"
        "\t\tarp operation request arp saddr ip $IP return\n"
        "\t\tarp operation reply arp saddr ip $IP return\n"
        "\t\tmeta protocol arp drop\n\t}\n"
        "\tchain $X-from-clean-traffic {\n"
        "\t\tmeta protocol ip accept\n\t\tmeta protocol arp accept\n"
        "\t\tmeta protocol 0x0835 accept\n"
        "\t\tmeta protocol 0x8035 ether saddr $MAC ether daddr ff:ff:ff:ff:ff:ff accept\n\t}\n"
        "\tchain $X-to-clean-traffic {\n"
        "\t\tmeta protocol ip accept\n\t\tmeta protocol arp accept\n"
        "\t\tmeta protocol 0x8035 ether daddr ff:ff:ff:ff:ff:ff accept\n\t}\n"
        "\tchain $X-from-no-other-l2-traffic {\n\t\tdrop\n\t}\n"
        "\tchain $X-to-no-other-l2-traffic {\n\t\tdrop\n\t}\n"
        "\tchain $X-from {\n\t\tcomment \"$X $MAC\"\n"
        "\t\ttype filter hook ingress device \"$X\" priority filter; policy accept;\n"
        "\t\tjump $X-from-no-mac-spoofing\n\t\tjump $X-from-no-ip-spoofing\n"
        "\t\tjump $X-from-no-arp-spoofing\n\t\tjump $X-from-clean-traffic\n"
        "\t\tjump $X-from-no-other-l2-traffic\n\t}\n"
        "\tchain $X-to {\n\t\tcomment \"$X $MAC\"\n"
        "\t\ttype filter hook egress device \"$X\" priority filter; policy accept;\n"
        "\t\tjump $X-to-no-promisc\n\t\tjump $X-to-clean-traffic\n"
        "\t\tjump $X-to-no-other-l2-traffic\n\t}\n";

int rs_nft_write(FILE *f, const struct rs_guest *guests, size_t n)
{
        char buf[4096];
        int r = 0;

        fprintf(f, "table netdev " RS_NFT_TABLE " {\n");
        for (size_t i = 0; i < n && r == 0; i++) {
                r = expand(&guests[i], nft_guest, sizeof(nft_guest) - 1, buf, sizeof(buf));
                if (r == 0)
                        fputs(buf, f);
        }
        fprintf(f, "}\n");
        return r < 0 ? r : ferror(f) ? -EIO : 0;
}
