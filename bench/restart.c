/* Scenario "restart": N guests' firewalls (clean-traffic + no-promisc) at VM
 * start and at a daemon restart, libvirt's commands (restart_cmds.txt) by
 * A, A2, B against one FirewallApply batch (C) and its ensure after a helper
 * restart (D); N is one nft -f of the same rules. netbroker-bench(1) says
 * how the passes take turns and how --sample fills the untimed guests. */
#include "bench.h"
#include "restart.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "netbroker.h"

#define MAX_GUESTS BENCH_RESTART_MAX_GUESTS
#define OUT_CAP (64u * 1024)

enum method { M_N, M_C, M_D, M_A, M_AR, M_A2, M_A2R, M_B, M_BR, N_METHODS };

static const char *const method_names[N_METHODS] = {
        [M_N] = "N",   [M_C] = "C",     [M_D] = "D", [M_A] = "A",   [M_AR] = "Ar",
        [M_A2] = "A2", [M_A2R] = "A2r", [M_B] = "B", [M_BR] = "Br",
};

/* A, A2, B: one sample per guest; N, C, D: one per repetition. */
struct outcome {
        bool ran;
        uint64_t mismatches;
        uint64_t commits, changes;
        double wall_us; /* A, A2, B: the sum of the per-guest times */
        struct bench_samples per_guest; /* A, A2, B: us per guest */
        struct bench_samples reps; /* N, C, D: us per repetition */
};

struct tools {
        const char *path[RS_N_TOOLS];
        const char *nft;
        const char *eb_save, *eb_restore; /* only with --sample */
};

struct ctx {
        const struct bench_opts *o;
        struct bench_ctx b; /* the fat parent and the helper */
        const char *allow[RS_N_TOOLS + 1]; /* the helper's programs */
        struct tools tools;
        struct rs_nftmon mon;
        struct rs_guest *guests;
        unsigned n;
        unsigned timed; /* the last `timed` guests are timed; the others are filled */
        char *tmpl; /* ebtables-save after guest 0's start, for filling */
        struct outcome out[N_METHODS];
        char *fw_hash[MAX_GUESTS]; /* C's hashes, for D */
        char d_check[160];
        bool d_ok, have_fw;
};

/* ---- running a program from the fat parent ---- */

/* An untimed command (reset, checks): must exit 0. */
static int run_quiet(struct ctx *c, char *const *argv, char *out, size_t cap, size_t *len)
{
        return bench_run_quiet(&c->b.fp, "restart: ", argv[0][0] == '/' ? argv[0] : c->tools.nft,
                               argv, -1, out, cap, len);
}

/* ---- the helper ---- */

/* The helper's counters of what it sent the kernel: fw_transactions,
 * fw_owners_written, fw_rules_written. */
static bool counts_writes(const char *name)
{
        return strncmp(name, "fw_", 3) == 0 &&
               (strstr(name, "written") || strcmp(name, "fw_transactions") == 0);
}

/* "fw_rules_written +0, fw_owners_unchanged +100": the firewall counters
 * that moved, and those that count writes even when they did not. Returns
 * whether a write counter moved. */
static bool fw_deltas(const struct bench_stats *a, const struct bench_stats *b, char *buf,
                      size_t len)
{
        bool wrote = false;
        size_t o = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < b->n; i++) {
                uint64_t x = 0;
                const char *nm = b->name[i];
                if (strncmp(nm, "fw_", 3) != 0)
                        continue;
                (void)bench_stat_get(a, nm, &x);
                wrote |= counts_writes(nm) && b->v[i] != x;
                if ((b->v[i] != x || counts_writes(nm)) && o < len)
                        o += (size_t)snprintf(buf + o, len - o, "%s%s +%llu", o ? ", " : "", nm,
                                              (unsigned long long)(b->v[i] - x));
        }
        return wrote;
}

/* ---- resetting the namespace's ruleset ---- */

static int reset(struct ctx *c)
{
        char *argv[] = {"nft", "flush", "ruleset", NULL};
        char out[1024];
        int r = run_quiet(c, argv, out, sizeof(out), NULL);

        /* What the flush itself produced is nobody's. */
        if (r == 0)
                r = rs_nftmon_drain(&c->mon);
        return r;
}

/* What the kernel said since `mark` (c->mon as it was after a drain), added
 * to o's counts. */
static int kernel_since(struct ctx *c, const struct rs_nftmon *mark, struct outcome *o)
{
        int r = rs_nftmon_drain(&c->mon);

        if (r == 0) {
                o->commits += c->mon.commits - mark->commits;
                o->changes += c->mon.changes - mark->changes;
        }
        return r;
}

/* ---- A, A2, B: the commands ---- */

struct cmd_run {
        bool ok;
        char out[OUT_CAP];
        size_t len;
};

/* What fits of data (NULL when there was none) after cr's output. */
static void append(struct cmd_run *cr, const void *data, size_t len)
{
        size_t k = len < OUT_CAP - 1 - cr->len ? len : OUT_CAP - 1 - cr->len;

        if (k)
                memcpy(cr->out + cr->len, data, k);
        cr->len += k;
        cr->out[cr->len] = '\0';
}

static int exec_helper(struct ctx *c, const struct rs_cmd *cmd, struct cmd_run *cr)
{
        nb_results *res = NULL;
        nb_exec_result er;
        nb_batch *b = nb_batch_new();
        int r, st;

        if (!b)
                return -ENOMEM;
        r = nb_batch_exec(b, c->tools.path[cmd->tool], (const char *const *)cmd->argv, NULL, NULL,
                          0, 0);
        if (r == 0)
                r = nb_submit(c->b.conn, b, &res);
        if (r < 0) {
                bench_log("netbroker-bench: restart: B: submit failed: %s (%s)\n", strerror(-r),
                          nb_conn_error(c->b.conn));
                goto out;
        }
        st = nb_result_status(res, 0);
        if (nb_result_exec(res, 0, &er) < 0 || (st != 0 && st != -EIO) || er.signal ||
            er.timed_out) {
                bench_log("netbroker-bench: restart: B: Exec status %d (%s) \"%s\"\n", st,
                          strerror(st < 0 ? -st : st), nb_result_message(res, 0));
                r = st < 0 ? st : -EIO;
                goto out;
        }
        cr->ok = st == 0 && er.exit_code == 0;
        /* libvirt's query callbacks read stdout; stderr after it for errors. */
        cr->len = 0;
        append(cr, er.out, er.out_len);
        append(cr, er.err, er.err_len);
out:
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

static int exec_cmd(struct ctx *c, enum method m, const struct rs_cmd *cmd, struct cmd_run *cr)
{
        int st, r;

        if (m == M_B || m == M_BR)
                return exec_helper(c, cmd, cr);
        r = bench_fork_exec(
                &c->b.fp, m == M_A2 || m == M_A2R ? BENCH_CLOSE_RANGE : BENCH_CLOSE_LOOP, 0,
                c->tools.path[cmd->tool], cmd->argv, cr->out, sizeof(cr->out), &cr->len, &st);
        if (r < 0)
                return r;
        if (WIFSIGNALED(st)) {
                bench_log("netbroker-bench: restart: %s killed by signal %d\n", cmd->argv[0],
                          WTERMSIG(st));
                return -EIO;
        }
        cr->ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        return 0;
}

/* Check a command's outcome against the list: a command libvirt would not
 * ignore must succeed, a query must list the chains the list expects. */
static int check_cmd(enum method m, const struct rs_cmd *cmd, const struct cmd_run *cr,
                     struct outcome *o)
{
        int jumps;

        if (cmd->expect == RS_MUST_SUCCEED && !cr->ok) {
                bench_log("netbroker-bench: restart: %s: this command failed, libvirt would have "
                          "rolled back:\n  ",
                          method_names[m]);
                rs_cmd_print(cmd, stderr);
                bench_log("\n  its output: %s\n", cr->out);
                return -EIO;
        }
        if ((cmd->expect == RS_EXPECT_OK && !cr->ok) || (cmd->expect == RS_EXPECT_FAIL && cr->ok)) {
                if (o->mismatches++ < 3) {
                        bench_log("netbroker-bench: restart: %s: expected to %s: ", method_names[m],
                                  cmd->expect == RS_EXPECT_OK ? "succeed" : "fail");
                        rs_cmd_print(cmd, stderr);
                        bench_log("\n  its output: %s\n", cr->out);
                }
        }
        if (cmd->jumps < 0)
                return 0;
        jumps = cr->ok ? rs_count_jumps(cmd, cr->out, cr->len) : 0;
        if (jumps != cmd->jumps) {
                bench_log("netbroker-bench: restart: %s: the query found %d chains to follow, "
                          "the command list has %d:\n  ",
                          method_names[m], jumps, cmd->jumps);
                rs_cmd_print(cmd, stderr);
                bench_log("\n  its output: %s\n", cr->out);
                return -EPROTO;
        }
        return 0;
}

static struct cmd_run cmd_run_buf; /* 64 KiB: not on the stack */

/* One guest's commands by one method, timed alone; its counts, time and
 * notifications go to that method's outcome. */
static int run_guest(struct ctx *c, enum method m, unsigned g, enum rs_phase phase)
{
        struct outcome *o = &c->out[m];
        struct rs_cmdlist l = {0};
        struct rs_nftmon mark;
        uint64_t t0;
        double us;
        int r;

        /* Building the list is libvirt's in-memory work: not timed. */
        r = rs_cmds_instantiate(&l, &c->guests[g], phase);
        if (r == 0)
                r = rs_nftmon_drain(&c->mon);
        mark = c->mon;
        t0 = bench_now_ns();
        for (size_t i = 0; i < l.n && r == 0; i++) {
                r = exec_cmd(c, m, &l.v[i], &cmd_run_buf);
                if (r == 0)
                        r = check_cmd(m, &l.v[i], &cmd_run_buf, o);
        }
        us = (double)(bench_now_ns() - t0) / 1000.0;
        rs_cmdlist_clear(&l);
        if (r == 0)
                r = bench_samples_add(&o->per_guest, us);
        if (r == 0)
                r = kernel_since(c, &mark, o);
        if (r < 0)
                return r;
        o->wall_us += us;
        o->ran = true;
        return 0;
}

/* After a start or a restart: every guest has its 2 root and 8 sub-chains
 * under their final names in ebtables' nat table, jumped to from
 * PREROUTING/POSTROUTING, and no temporary chain is left. */
static char listing[4u << 20];

static int check_ebtables(struct ctx *c, const char *after)
{
        char *argv[] = {(char *)c->tools.path[RS_EBTABLES], "-t", "nat", "-L", NULL};
        unsigned chains = 0, tmp = 0, links = 0;
        size_t len;
        int r = run_quiet(c, argv, listing, sizeof(listing), &len);

        if (r < 0)
                return r;
        for (char *p = listing; (p = strstr(p, "Bridge chain: ")); p++) {
                const char *name = p + strlen("Bridge chain: ");
                chains++;
                if (strncmp(name, "libvirt-J-", 10) == 0 || strncmp(name, "libvirt-P-", 10) == 0 ||
                    ((name[0] == 'J' || name[0] == 'P') && name[1] == '-'))
                        tmp++;
        }
        for (char *p = listing; (p = strstr(p, " -j libvirt-")); p++)
                links++;
        /* PREROUTING, OUTPUT, POSTROUTING + 10 per guest */
        if (chains != 3 + 10 * c->n || tmp || links != 2 * c->n) {
                bench_log("netbroker-bench: restart: after %s: %u chains (expected %u), %u "
                          "temporary, %u links (expected %u)\n",
                          after, chains, 3 + 10 * c->n, tmp, links, 2 * c->n);
                return -EPROTO;
        }
        return 0;
}

/* ---- filling: the guests that are not timed (--sample) ---- */

/* The rules libvirt's commands leave for guest 0, from ebtables-save, kept
 * to be written again for other guests. */
static int make_template(struct ctx *c)
{
        /* All tables: this ebtables-save takes no -t; the nat one is used. */
        char *save[] = {(char *)c->tools.eb_save, NULL};
        struct outcome scratch = {0};
        struct rs_cmdlist l = {0};
        size_t len;
        int r = reset(c);

        if (r == 0)
                r = rs_cmds_instantiate(&l, &c->guests[0], RS_START);
        /* Through the helper: the quickest of the three, and not timed. */
        for (size_t i = 0; i < l.n && r == 0; i++) {
                r = exec_cmd(c, M_B, &l.v[i], &cmd_run_buf);
                if (r == 0)
                        r = check_cmd(M_B, &l.v[i], &cmd_run_buf, &scratch);
        }
        rs_cmdlist_clear(&l);
        if (r == 0)
                r = run_quiet(c, save, listing, sizeof(listing), &len);
        if (r == 0 && !(c->tmpl = strdup(listing)))
                r = -ENOMEM;
        if (r == 0)
                r = reset(c);
        return r;
}

/* `line` with guest 0's name, MAC and IP replaced by g's. */
static void write_for_guest(FILE *f, const char *line, size_t len, const struct rs_guest *t,
                            const struct rs_guest *g)
{
        const char *from[3] = {t->ifname, t->mac, t->ip}, *to[3] = {g->ifname, g->mac, g->ip};

        for (size_t i = 0; i < len;) {
                int k = 0;
                while (k < 3 && strncmp(line + i, from[k], strlen(from[k])) != 0)
                        k++;
                if (k < 3) {
                        fputs(to[k], f);
                        i += strlen(from[k]);
                } else {
                        fputc(line[i++], f);
                }
        }
        fputc('\n', f);
}

static bool is_base_chain(const char *line)
{
        return strncmp(line, ":PREROUTING ", 12) == 0 || strncmp(line, ":OUTPUT ", 8) == 0 ||
               strncmp(line, ":POSTROUTING ", 13) == 0;
}

/* ebtables-restore input for guests 0..n-timed-1: every chain first, then
 * every rule, since a jump needs its target declared. */
static int write_fill(struct ctx *c, FILE *f)
{
        struct rs_guest t;

        rs_guest_init(&t, 0);
        fputs("*nat\n:PREROUTING ACCEPT\n:OUTPUT ACCEPT\n:POSTROUTING ACCEPT\n", f);
        for (int pass = 0; pass < 2; pass++)
                for (unsigned g = 0; g < c->n - c->timed; g++) {
                        bool nat = false;
                        for (const char *p = c->tmpl; *p;) {
                                size_t len = strcspn(p, "\n");
                                bool want = pass == 0 ? p[0] == ':' && !is_base_chain(p)
                                                      : strncmp(p, "-A ", 3) == 0;
                                if (p[0] == '*')
                                        nat = strncmp(p, "*nat\n", 5) == 0;
                                else if (nat && want)
                                        write_for_guest(f, p, len, &t, &c->guests[g]);
                                p += len + (p[len] == '\n');
                        }
                }
        return ferror(f) ? -EIO : 0;
}

static int fill(struct ctx *c)
{
        char *argv[] = {"ebtables-restore", NULL};
        FILE *f;
        int r;

        if (c->timed == c->n)
                return 0;
        f = tmpfile();
        if (!f)
                return -errno;
        r = write_fill(c, f);
        if (r == 0 && (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0))
                r = -errno;
        if (r == 0)
                r = bench_run_quiet(&c->b.fp, "restart: ", c->tools.eb_restore, argv, fileno(f),
                                    listing, sizeof(listing), NULL);
        fclose(f);
        /* What the fill produced is nobody's. */
        if (r == 0)
                r = rs_nftmon_drain(&c->mon);
        return r;
}

/* ---- A, A2, B: the passes ---- */

static const enum method starts[] = {M_A, M_A2, M_B}, restarts[] = {M_AR, M_A2R, M_BR};
#define N_LIBVIRT (sizeof(starts) / sizeof(*starts))

static double mean_s(const struct outcome *o)
{
        return o->per_guest.n ? o->wall_us / o->per_guest.n / 1e6 : 0;
}

static void progress(const struct ctx *c, const char *what, unsigned done)
{
        unsigned step = c->timed / 5 ? c->timed / 5 : 1;
        double total = 0;

        for (int m = M_A; m < N_METHODS; m++)
                total += c->out[m].wall_us;
        if (done % step == 0 || done == c->timed)
                bench_log("restart: %s %u/%u guests, %.0f s so far (A %.1f s, A2 %.1f s, B %.1f s "
                          "per guest)\n",
                          what, done, c->timed, total / 1e6, mean_s(&c->out[M_A]),
                          mean_s(&c->out[M_A2]), mean_s(&c->out[M_B]));
}

/* One start pass: every timed guest started by one method, the method
 * moving on with the guest and with the pass. */
static int start_pass(struct ctx *c, unsigned pass)
{
        char what[32];
        int r = reset(c);

        if (r == 0)
                r = fill(c);
        for (unsigned j = 0; j < c->timed && r == 0; j++) {
                r = run_guest(c, starts[(j + pass) % N_LIBVIRT], c->n - c->timed + j, RS_START);
                if (r == 0) {
                        snprintf(what, sizeof(what), "start pass %u/%zu:", pass + 1, N_LIBVIRT);
                        progress(c, what, j + 1);
                }
        }
        if (r == 0) {
                snprintf(what, sizeof(what), "start pass %u", pass + 1);
                r = check_ebtables(c, what);
        }
        return r;
}

/* Every timed guest restarted by each method in turn, the first moving on
 * with the guest. */
static int restart_all(struct ctx *c)
{
        int r = 0;

        for (unsigned j = 0; j < c->timed && r == 0; j++) {
                for (unsigned k = 0; k < N_LIBVIRT && r == 0; k++)
                        r = run_guest(c, restarts[(j + k) % N_LIBVIRT], c->n - c->timed + j,
                                      RS_RESTART);
                if (r == 0)
                        progress(c, "restarts:", j + 1);
        }
        if (r == 0)
                r = check_ebtables(c, "the restarts");
        return r;
}

static int run_broker_rep(struct ctx *c);

static int run_libvirt(struct ctx *c)
{
        int r = 0;

        for (unsigned p = 0; p < N_LIBVIRT && r == 0; p++) {
                r = start_pass(c, p);
                /* Not after the last pass: the restarts need its rules. */
                if (r == 0 && p + 1 < N_LIBVIRT)
                        r = run_broker_rep(c);
        }
        if (r == 0)
                r = restart_all(c);
        return r;
}

/* ---- N ---- */

static int run_nft_file(struct ctx *c)
{
        struct outcome *o = &c->out[M_N];
        char path[] = "/tmp/netbroker-bench-nft.XXXXXX";
        char *argv[] = {"nft", "-f", path, NULL};
        struct rs_nftmon mark;
        uint64_t t0;
        int fd, r;
        long size;
        FILE *f;

        fd = mkstemp(path);
        if (fd < 0)
                return -errno;
        f = fdopen(fd, "w");
        if (!f) {
                r = -errno;
                close(fd);
                unlink(path);
                return r;
        }
        r = rs_nft_write(f, c->guests, c->n);
        size = ftell(f);
        if (fclose(f) != 0 && r == 0)
                r = -errno;
        if (r == 0)
                r = reset(c);
        mark = c->mon;
        if (r == 0) {
                t0 = bench_now_ns();
                r = bench_run_quiet(&c->b.fp, "restart: N: ", c->tools.nft, argv, -1,
                                    cmd_run_buf.out, sizeof(cmd_run_buf.out), NULL);
                o->wall_us = (double)(bench_now_ns() - t0) / 1000.0;
        }
        unlink(path);
        o->commits = o->changes = 0;
        if (r == 0)
                r = kernel_since(c, &mark, o);
        if (r == 0)
                r = bench_samples_add(&o->reps, o->wall_us);
        o->ran = r == 0;
        bench_log("restart: N   %u guests, nft -f of %ld bytes: %.2f ms\n", c->n, size,
                  o->wall_us / 1000.0);
        return r;
}

/* ---- C and D ---- */

static int build_fw_batch(struct ctx *c, nb_fw_mode mode, nb_batch **ret)
{
        nb_batch *b = nb_batch_new();
        int r = b ? 0 : -ENOMEM;

        for (unsigned g = 0; g < c->n && r == 0; g++) {
                const struct rs_guest *gu = &c->guests[g];
                const char *ips[] = {gu->ip, NULL};
                nb_fw_ruleset *rs = nb_fw_ruleset_new();

                if (!rs) {
                        r = -ENOMEM;
                        break;
                }
                /* no-promisc first: clean-traffic accepts IPv4 and ARP to the
                 * guest, no-promisc after it would see nothing (libvirt's
                 * chain priorities put its mac chain first too). */
                r = nb_fw_add_no_promisc(rs, gu->mac);
                if (r == 0)
                        r = nb_fw_add_clean_traffic(rs, gu->mac, ips);
                if (r == 0)
                        r = nb_batch_firewall_apply(b, gu->ifname, gu->ifname, rs, mode);
                nb_fw_ruleset_free(rs);
        }
        if (r < 0) {
                bench_log("netbroker-bench: restart: cannot build the FirewallApply batch: %s\n",
                          strerror(-r));
                nb_batch_free(b);
                return r;
        }
        *ret = b;
        return 0;
}

/* One request of N FirewallApply ops, timed from building it to the reply. */
static int run_fw(struct ctx *c, enum method m)
{
        const nb_fw_mode mode = m == M_C ? NB_FW_REPLACE : NB_FW_ENSURE;
        struct outcome *o = &c->out[m];
        struct bench_stats s0 = {0}, s1 = {0};
        nb_results *res = NULL;
        nb_batch *b = NULL;
        struct rs_nftmon mark;
        uint64_t t0, t1;
        unsigned unchanged = 0;
        char deltas[160];
        bool wrote;
        int r;

        r = bench_helper_stats(c->b.conn, "", &s0);
        if (r < 0)
                return r;
        r = rs_nftmon_drain(&c->mon);
        if (r < 0)
                return r;
        mark = c->mon;
        t0 = t1 = bench_now_ns();
        r = build_fw_batch(c, mode, &b);
        if (r == 0)
                r = bench_submit_all(c->b.conn, b, c->n,
                                     m == M_C ? "restart: C: " : "restart: D: ", &t1, &res);
        o->wall_us = (double)(t1 - t0) / 1000.0;
        if (r < 0)
                goto out;
        for (unsigned g = 0; g < c->n; g++) {
                const char *hash;
                bool same;
                unsigned n_rules;

                r = nb_result_firewall(res, g, &hash, &same, &n_rules);
                if (r < 0) {
                        bench_log("netbroker-bench: restart: %s: op %u (%s): no firewall result\n",
                                  method_names[m], g, c->guests[g].ifname);
                        goto out;
                }
                unchanged += same;
                if (m == M_C) {
                        free(c->fw_hash[g]);
                        c->fw_hash[g] = strdup(hash);
                } else if (!c->fw_hash[g] || strcmp(c->fw_hash[g], hash) != 0) {
                        bench_log("netbroker-bench: restart: D: %s: hash %s, C had %s\n",
                                  c->guests[g].ifname, hash,
                                  c->fw_hash[g] ? c->fw_hash[g] : "none");
                        c->d_ok = false;
                }
        }
        o->commits = o->changes = 0;
        r = kernel_since(c, &mark, o);
        if (r == 0)
                r = bench_helper_stats(c->b.conn, "", &s1);
        if (r == 0)
                r = bench_samples_add(&o->reps, o->wall_us);
        if (r < 0)
                goto out;
        o->ran = true;
        wrote = fw_deltas(&s0, &s1, deltas, sizeof(deltas));
        bench_log("restart: %-3s %u guests, one request: %.2f ms (%s)\n", method_names[m], c->n,
                  o->wall_us / 1000.0, deltas);
        /* D writes nothing: by its results, the helper's write counters and
         * the kernel's notifications. */
        if (m == M_D && (unchanged != c->n || wrote || o->commits || o->changes))
                c->d_ok = false;
        snprintf(c->d_check, sizeof(c->d_check),
                 "D check %s: %u/%u owners unchanged, helper write counters %s, kernel: %llu "
                 "commits, %llu changes",
                 c->d_ok ? "passed" : "FAILED", unchanged, c->n, wrote ? "MOVED" : "unmoved",
                 (unsigned long long)o->commits, (unsigned long long)o->changes);
        if (!c->d_ok) {
                bench_log("netbroker-bench: restart: %s\n", c->d_check);
                r = -EPROTO;
        }
out:
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

static int fw_list_count(struct ctx *c, size_t *ret)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int r = b ? nb_batch_firewall_list(b) : -ENOMEM;

        if (r == 0)
                r = nb_submit(c->b.conn, b, &res);
        if (r == 0)
                r = nb_result_status(res, 0);
        if (r == 0)
                *ret = nb_result_fw_owner_count(res, 0);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

static int run_c_and_d(struct ctx *c)
{
        size_t owners = 0;
        int r = reset(c);

        if (r == 0)
                r = run_fw(c, M_C);
        if (r == 0)
                r = fw_list_count(c, &owners);
        if (r == 0 && owners != c->n) {
                bench_log("netbroker-bench: restart: FirewallList after C: %zu owners, not %u\n",
                          owners, c->n);
                r = -EPROTO;
        }
        if (r < 0)
                return r;
        /* The daemon restarts: its connection goes, the helper exits; the
         * next daemon spawns a new one. */
        bench_broker_stop(c->b.conn);
        c->b.conn = NULL;
        r = bench_broker_start(c->o->helper, c->allow, &c->b.conn);
        if (r < 0)
                return r;
        return run_fw(c, M_D);
}

/* N, C and D a few times more: between the start passes and at the end,
 * so that they share the passes' drift. Each takes milliseconds, where a
 * pass takes minutes: several at a time cost nothing and steady their
 * medians. */
#define BROKER_REPS 5

static int run_broker_rep(struct ctx *c)
{
        int r = 0;

        for (int i = 0; i < BROKER_REPS && r == 0; i++) {
                r = run_nft_file(c);
                if (r == 0 && c->have_fw)
                        r = run_c_and_d(c);
        }
        return r;
}

/* ---- setup ---- */

static int find_tools(struct tools *t)
{
        static const char *const names[RS_N_TOOLS] = {[RS_EBTABLES] = "ebtables",
                                                      [RS_IPTABLES] = "iptables",
                                                      [RS_IP6TABLES] = "ip6tables"};

        for (int i = 0; i < RS_N_TOOLS; i++) {
                t->path[i] = bench_find_tool(names[i]);
                if (!t->path[i]) {
                        bench_log("netbroker-bench: restart: %s not found\n", names[i]);
                        return -ENOENT;
                }
        }
        t->nft = bench_find_tool("nft");
        if (!t->nft) {
                bench_log("netbroker-bench: restart: nft not found\n");
                return -ENOENT;
        }
        return 0;
}

/* The guests' taps, made by the helper, persistent: they outlive the fds. */
static int make_taps(struct ctx *c)
{
        const nb_tap_opts opts = {.persist = true};
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int r = b ? 0 : -ENOMEM;

        for (unsigned g = 0; g < c->n && r == 0; g++)
                r = nb_batch_tap_create(b, c->guests[g].ifname, &opts);
        if (r == 0)
                r = bench_submit_all(c->b.conn, b, c->n, "restart: TapCreate: ", NULL, &res);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* The programs' pages into the page cache, the kernel's modules loaded. */
static int warm_up(struct ctx *c)
{
        char *eb[] = {(char *)c->tools.path[RS_EBTABLES], "-t", "nat", "-L", NULL};
        char *ip4[] = {(char *)c->tools.path[RS_IPTABLES], "-w", "-n", "-L", NULL};
        char *ip6[] = {(char *)c->tools.path[RS_IP6TABLES], "-w", "-n", "-L", NULL};
        char *nft[] = {"nft", "list", "ruleset", NULL};
        char **all[] = {eb, ip4, ip6, nft};
        int r = 0;

        for (size_t i = 0; i < 4 && r == 0; i++)
                r = run_quiet(c, all[i], listing, sizeof(listing), NULL);
        return r;
}

/* ---- the report ---- */

static bool is_batch(enum method m)
{
        return m == M_N || m == M_C || m == M_D;
}

/* Per guest: A, A2, B the guests' own times; N, C, D each repetition / N. */
static int per_guest(const struct ctx *c, enum method m, struct bench_summary *ret)
{
        const struct outcome *o = &c->out[m];
        int k;

        if (!is_batch(m))
                return bench_samples_summarize(&o->per_guest, ret);
        k = bench_samples_summarize(&o->reps, ret);
        if (k == 0)
                bench_summary_per(ret, c->n);
        return k;
}

static int add_results(struct ctx *c, struct bench_report *r)
{
        static const struct bench_pair pairs[] = {
                {M_A, M_C, "A/C"},  {M_A2, M_C, "A2/C"}, {M_B, M_C, "B/C"},
                {M_N, M_C, "N/C"},  {M_AR, M_D, "A/D"},  {M_A2R, M_D, "A2/D"},
                {M_BR, M_D, "B/D"}, {M_A, M_N, "A/N"},   {M_AR, M_A, "Ar/A"},
        };
        static const enum method row_order[] = {M_A, M_AR, M_A2, M_A2R, M_B, M_BR, M_N, M_C, M_D};
        struct bench_summary s[N_METHODS] = {0};
        double med[N_METHODS];
        char what[56];
        int k = 0;

        for (size_t i = 0; i < N_METHODS && k == 0; i++) {
                enum method m = row_order[i];
                if (!c->out[m].ran)
                        continue;
                k = per_guest(c, m, &s[m]);
                if (k == 0)
                        k = bench_report_add_row(r, method_names[m],
                                                 m == M_AR || m == M_A2R || m == M_BR || m == M_D
                                                         ? "restart per guest"
                                                         : "start per guest",
                                                 &s[m], c->out[M_A].ran ? &s[M_A] : NULL);
        }
        for (int m = 0; m < N_METHODS; m++)
                med[m] = c->out[m].ran ? s[m].median_us : 0;
        if (k == 0)
                k = bench_report_pairs(r, pairs, sizeof(pairs) / sizeof(*pairs), med, NULL);
        if (k == 0 && c->out[M_A].ran && c->out[M_C].ran) {
                snprintf(what, sizeof(what), "VM start, per guest, N=%u", c->n);
                k = bench_report_add_compare(r, what, "A", &s[M_A], "A2", &s[M_A2], "C", &s[M_C]);
        }
        if (k == 0 && c->out[M_AR].ran && c->out[M_D].ran) {
                snprintf(what, sizeof(what), "daemon restart, per guest, N=%u", c->n);
                k = bench_report_add_compare(r, what, "Ar", &s[M_AR], "A2r", &s[M_A2R], "D",
                                             &s[M_D]);
        }
        if (k == 0)
                k = bench_report_add_note(
                        r, "%s", c->have_fw ? c->d_check : "C, D: the helper has no firewall");
        return k;
}

/* ---- the scenario ---- */

/* The tools, the notification socket, then the fat parent and the helper
 * (bench_ctx_start), and the guests' taps. */
static int setup(struct ctx *c, struct bench_report *r)
{
        int k = find_tools(&c->tools);

        if (k == 0 && c->timed < c->n) {
                c->tools.eb_save = bench_find_tool("ebtables-save");
                c->tools.eb_restore = bench_find_tool("ebtables-restore");
                if (!c->tools.eb_save || !c->tools.eb_restore) {
                        bench_log("netbroker-bench: restart: --sample needs ebtables-save and "
                                  "ebtables-restore\n");
                        k = -ENOENT;
                }
        }
        if (k < 0)
                return k;
        for (int t = 0; t < RS_N_TOOLS; t++)
                c->allow[t] = c->tools.path[t];
        k = rs_nftmon_open(&c->mon);
        if (k < 0) {
                bench_log("netbroker-bench: restart: cannot listen to nftables notifications: "
                          "%s\n",
                          strerror(-k));
                return k;
        }
        k = bench_ctx_start(&c->b, c->o, r, true, c->allow, NULL);
        if (k < 0)
                return k;
        if (!nb_conn_has_feature(c->b.conn, "tap_create") ||
            !nb_conn_has_feature(c->b.conn, "stats")) {
                bench_log("netbroker-bench: restart: the helper offers no tap_create or stats\n");
                return -EOPNOTSUPP;
        }
        c->have_fw = nb_conn_has_feature(c->b.conn, "firewall_apply") &&
                     nb_conn_has_feature(c->b.conn, "firewall_list");
        bench_log("restart: %u guests (taps vnet0..vnet%u), %u timed\n", c->n, c->n - 1, c->timed);
        k = make_taps(c);
        if (k == 0)
                k = warm_up(c);
        if (k == 0 && c->timed < c->n)
                k = make_template(c);
        return k;
}

int bench_restart(const struct bench_opts *o, struct bench_report *r)
{
        struct ctx *c = calloc(1, sizeof(*c));
        int k;

        if (!c)
                return -ENOMEM;
        c->o = o;
        c->mon.fd = -1;
        c->n = o->guests ? o->guests : o->quick ? 1 : 100;
        c->timed = o->sample && o->sample < c->n ? o->sample : c->n;
        c->d_ok = true;
        r->title = "N guests' firewalls (clean-traffic + no-promisc) at VM start and daemon "
                   "restart";
        if (c->n > MAX_GUESTS) {
                bench_log("netbroker-bench: restart: at most %u guests\n", MAX_GUESTS);
                free(c);
                return -ERANGE;
        }
        c->guests = calloc(c->n, sizeof(*c->guests));
        for (unsigned g = 0; g < c->n && c->guests; g++)
                rs_guest_init(&c->guests[g], g);
        k = c->guests ? setup(c, r) : -ENOMEM;
        if (k == 0)
                k = run_broker_rep(c);
        if (k == 0)
                k = run_libvirt(c);
        if (k == 0)
                k = run_broker_rep(c);
        if (k == 0)
                k = add_results(c, r);
        /* Leave an empty ruleset behind. */
        if (c->b.conn)
                (void)reset(c);
        bench_ctx_stop(&c->b);
        rs_nftmon_close(&c->mon);
        for (int m = 0; m < N_METHODS; m++) {
                bench_samples_clear(&c->out[m].per_guest);
                bench_samples_clear(&c->out[m].reps);
        }
        free(c->tmpl);
        for (unsigned g = 0; g < MAX_GUESTS; g++)
                free(c->fw_hash[g]);
        free(c->guests);
        free(c);
        return k;
}
