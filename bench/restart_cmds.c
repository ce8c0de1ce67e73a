/* libvirt's per-guest commands, read from restart_cmds.txt (what each
 * column means is said there). */
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
