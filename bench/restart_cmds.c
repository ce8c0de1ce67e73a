/* libvirt's per-guest commands, read from restart_cmds.txt (what each
 * column means is said there), and the same filters as one nftables file. */
#include "restart.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

void rs_guest_init(struct rs_guest *g, unsigned i)
{
        snprintf(g->ifname, sizeof(g->ifname), "vnet%u", i % 100000u);
        snprintf(g->mac, sizeof(g->mac), "52:54:00:%02x:%02x:%02x", (i >> 16) & 0xffu,
                 (i >> 8) & 0xffu, i & 0xffu);
        snprintf(g->ip, sizeof(g->ip), "10.%u.%u.%u", 1u + (i / 250u / 250u) % 250u,
                 (i / 250u) % 250u, i % 250u + 2u);
}

/* "-s $MAC -j RETURN" with the guest's values. */
static int expand(const struct rs_guest *g, const char *args, size_t n, char *buf, size_t len)
{
        const char *const var[3] = {"$MAC", "$IP", "$X"}, *val[3] = {g->mac, g->ip, g->ifname};
        size_t o = 0;

        for (const char *p = args; p < args + n;) {
                int k = 0;
                while (k < 3 && strncmp(p, var[k], strlen(var[k])) != 0)
                        k++;
                if (o + (k < 3 ? strlen(val[k]) : 1) >= len)
                        return -E2BIG;
                if (k < 3) {
                        memcpy(buf + o, val[k], strlen(val[k]));
                        o += strlen(val[k]);
                        p += strlen(var[k]);
                } else {
                        buf[o++] = *p++;
                }
        }
        buf[o] = '\0';
        return 0;
}

/* One line of the table for g in `phase` ("FO 0/5 IO ebtables ..."), into
 * l's next command. */
static int add_line(struct rs_cmdlist *l, const struct rs_guest *g, enum rs_phase phase,
                    const char *line, size_t n)
{
        char e = line[phase == RS_START ? 0 : 1], jumps[16], pfx[3], *save = NULL, *cmd;
        struct rs_cmd *c = &l->v[l->n];
        size_t k = 0;

        if (e == '-')
                return 0;
        if (l->n >= RS_MAX_CMDS)
                return -E2BIG;
        *c = (struct rs_cmd){.expect = e == 'M'   ? RS_MUST_SUCCEED
                                       : e == 'O' ? RS_EXPECT_OK
                                                  : RS_EXPECT_FAIL,
                             .jumps = -1};
        if (expand(g, line, n, c->buf, sizeof(c->buf)) < 0 ||
            sscanf(c->buf, "%*s %15s %2s", jumps, pfx) != 2 ||
            (strcmp(jumps, "-") != 0 && !strchr(jumps, '/')))
                return -EINVAL;
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
        c->tool = strcmp(c->argv[0], "ebtables") == 0   ? RS_EBTABLES
                  : strcmp(c->argv[0], "iptables") == 0 ? RS_IPTABLES
                                                        : RS_IP6TABLES;
        l->n++;
        return 0;
}

int rs_cmds_instantiate(struct rs_cmdlist *l, const struct rs_guest *g, enum rs_phase phase)
{
        static char *table; /* the file, read once; its lines stay in it */
        FILE *f;
        long size = 0;
        int r = 0;

        if (!table && !(f = fopen(NB_BENCH_RESTART_CMDS, "re")))
                r = -errno;
        else if (!table) {
                if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
                    fseek(f, 0, SEEK_SET) != 0)
                        r = -errno;
                else if (!(table = calloc(1, (size_t)size + 1)))
                        r = -ENOMEM;
                else if (fread(table, 1, (size_t)size, f) != (size_t)size)
                        r = -EIO;
                fclose(f);
        }
        if (r < 0)
                bench_log("netbroker-bench: restart: %s: %s\n", NB_BENCH_RESTART_CMDS,
                          strerror(-r));
        l->n = 0;
        for (const char *p = table; r == 0 && *p;) {
                size_t n = strcspn(p, "\n");
                if (n && p[0] != '#')
                        r = add_line(l, g, phase, p, n);
                p += n + (p[n] == '\n');
        }
        return r;
}

/* ebtablesRemoveSubChainsQuery and ebtablesRenameTmpSubAndRootChainsQuery
 * follow a line with "-j ", then a prefix letter and '-'. */
int rs_count_jumps(const struct rs_cmd *c, const char *out)
{
        int n = 0;

        for (const char *p = out; (p = strstr(p, "-j ")); p += 3)
                n += p[3] && strchr(c->jump_prefixes, p[3]) && p[4] == '-';
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

        fprintf(f, "table netdev nbbench {\n");
        for (size_t i = 0; i < n && r == 0; i++) {
                r = expand(&guests[i], nft_guest, sizeof(nft_guest) - 1, buf, sizeof(buf));
                if (r == 0)
                        fputs(buf, f);
        }
        fprintf(f, "}\n");
        return r < 0 ? r : ferror(f) ? -EIO : 0;
}
