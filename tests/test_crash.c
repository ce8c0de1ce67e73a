// SPDX-License-Identifier: LGPL-2.1-or-later
/* Crash recovery: the helper is SIGKILLed at a random moment while it works
 * through a big batch, NB_CRASH_ROUNDS times (default 30), in turns:
 *
 *   firewall    100 owners on 100 veths, FirewallApply replace, switching
 *               between two rulesets A and B (B has one group more)
 *   interfaces  20 veths "kv%d", a guest (tap cgNN with filters and
 *               limits), 20 taps "kt%d", 20 macvtaps "kmt%d"
 *
 * The delay is uniform between 0 and 1.3 times what the batch takes
 * without a kill, so most kills land inside it and some after it. Each
 * round then asserts what a daemon relies on: the call failed within 2 s
 * of the kill (or had its reply), the next call started a new helper and
 * worked, the firewall holds all 100 owners at A or all at B (one nftables
 * transaction per batch), the name allocator of the new helper says
 * exactly what `ip link` says and hands out a name nobody has, and a
 * daemon's clean-up of the guest works when done twice. */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stress.h"
#include "testutil.h"

#define OWNERS 100
#define IFACES 20 /* of each kind */
#define PROMPT_US 2000000

/* The caller's line goes into the message: many places submit. */
#define submit(c, b) submit_at(c, b, __LINE__)
#define submit_ok(c, b) submit_ok_at(c, b, __LINE__)

static nb_results *submit_at(nb_conn *c, nb_batch *b, int line)
{
        nb_results *res = NULL;
        int r = nb_submit(c, b, &res);

        ck_assert_msg(r == 0, "line %d: nb_submit: %s (%s)", line, strerror(-r), nb_conn_error(c));
        return res;
}

static nb_results *submit_ok_at(nb_conn *c, nb_batch *b, int line)
{
        nb_results *res = submit_at(c, b, line);
        long bad = nb_results_first_error(res);

        ck_assert_msg(bad < 0, "line %d: op %ld failed: %s (%s)", line, bad,
                      bad < 0 ? "" : strerror(-nb_result_status(res, (size_t)bad)),
                      bad < 0 ? "" : nb_result_message(res, (size_t)bad));
        return res;
}

/* One Ping; it must work (respawning the helper if need be). */
#define ping_ok(c) ping_ok_at(c, __LINE__)
static void ping_ok_at(nb_conn *c, int line)
{
        nb_batch *b = nb_batch_new();

        nb_batch_ping(b);
        nb_results_free(submit_ok_at(c, b, line));
        nb_batch_free(b);
}

/* ---- killing ---- */

struct killer {
        pthread_t thread;
        pid_t pid;
        unsigned delay_us;
        uint64_t killed_at;
};

static void *killer_main(void *p)
{
        struct killer *k = p;

        usleep(k->delay_us);
        /* Stamped before the kill: taken after it, a preemption of this
         * thread (milliseconds on two busy cores) made a call that failed
         * because of the kill look as if it failed before it. */
        k->killed_at = tu_now_us();
        kill(k->pid, SIGKILL);
        return NULL;
}

struct outcome {
        bool replied; /* the reply came before the kill */
        uint64_t fail_us; /* else: how long after the kill the call failed */
        uint64_t batch_us; /* from the call to its return */
        pid_t old_pid;
};

/* Submit b while another thread kills the helper after a random delay of
 * 0..max_delay_us. Returns the results when the reply came first. */
static nb_results *submit_and_kill(nb_conn *c, nb_batch *b, unsigned max_delay_us, unsigned *seed,
                                   struct outcome *o)
{
        struct killer k = {.pid = nb_conn_helper_pid(c)};
        nb_results *res = NULL;
        uint64_t t0, t1;
        int r;

        ck_assert_int_gt(k.pid, 0);
        k.delay_us = (unsigned)(rand_r(seed) % (max_delay_us + 1));
        memset(o, 0, sizeof(*o));
        o->old_pid = k.pid;
        t0 = tu_now_us();
        ck_assert_int_eq(pthread_create(&k.thread, NULL, killer_main, &k), 0);
        r = nb_submit(c, b, &res);
        t1 = tu_now_us();
        pthread_join(k.thread, NULL);
        o->batch_us = t1 - t0;
        if (r == 0) {
                o->replied = true;
                /* A reply that came only after the kill was sent before it. */
                return res;
        }
        ck_assert_msg(r == -ECONNRESET, "a killed helper's call: %s (%s)", strerror(-r),
                      nb_conn_error(c));
        ck_assert_msg(t1 >= k.killed_at, "the call failed (%s) %" PRIu64 " us before the kill",
                      nb_conn_error(c), k.killed_at - t1);
        o->fail_us = t1 - k.killed_at;
        ck_assert_msg(o->fail_us < PROMPT_US, "the call failed %" PRIu64 " ms after the kill",
                      o->fail_us / 1000);
        return NULL;
}

/* The call after a kill starts a new helper and works. */
static void next_call_respawns(nb_conn *c, pid_t old)
{
        pid_t now;

        /* When the reply came first, the kill may still be under way: a
         * request written to a helper that is dying, not dead, is in
         * flight, and fails as such. The next call is the one after. */
        for (int i = 0; i < 400 && tu_process_alive(old); i++)
                usleep(5000);
        ping_ok(c);
        now = nb_conn_helper_pid(c);
        ck_assert_int_gt(now, 0);
        ck_assert_int_ne(now, old);
        ck_assert(!tu_process_alive(old));
}

/* ---- the firewall of 100 owners ---- */

/* Guest i's filters; B adds a group, so its chains and rules differ from
 * A's in number, not only in content. */
static nb_fw_ruleset *owner_ruleset(int i, bool gen_b)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        char mac[18], ip[32];

        snprintf(mac, sizeof(mac), "52:54:00:02:%02x:%02x", (i >> 8) & 0xff, i & 0xff);
        snprintf(ip, sizeof(ip), "10.2.%d.%d", (i / 200) & 0xff, i % 200 + 1);
        ck_assert_int_eq(nb_fw_add_no_promisc(rs, mac), 0);
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, mac, (const char *const[]){ip, NULL}), 0);
        if (gen_b)
                ck_assert_int_eq(nb_fw_add_allow_dhcp(rs, NULL), 0);
        return rs;
}

static nb_batch *owners_batch(bool gen_b)
{
        nb_batch *b = nb_batch_new();

        for (int i = 0; i < OWNERS; i++) {
                nb_fw_ruleset *rs = owner_ruleset(i, gen_b);
                char name[IFNAMSIZ];
                snprintf(name, sizeof(name), "fw%03d", i);
                ck_assert_int_eq(nb_batch_firewall_apply(b, name, name, rs, NB_FW_REPLACE), 0);
                nb_fw_ruleset_free(rs);
        }
        return b;
}

/* Per owner in our table: its chains and rules from `nft -j`, and the
 * hashes in its base chains' comments from the text listing (nft 1.0's
 * JSON leaves chain comments out). One line "OWNER CHAINS RULES HASHES". */
/* Per owner in our table: its chains, rules and the hashes in its base
 * chains' comments, read by tests/py/nft_owners.py. */
struct owner_sig {
        unsigned chains, rules;
        char hash[40];
};

/* The state of fw000..fw099 (zeroed when absent); returns how many other
 * owners there are. */
static int read_owners(struct owner_sig sig[OWNERS])
{
        char *out, *save = NULL;
        int others = 0;

        memset(sig, 0, OWNERS * sizeof(*sig));
        ck_assert_int_eq(
                tu_run((const char *const[]){"/usr/bin/python3", TU_PY("nft_owners.py"), NULL},
                       &out),
                0);
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char owner[80], hashes[200];
                unsigned chains, rules;
                int i;
                ck_assert_int_eq(sscanf(line, "%79s %u %u %199s", owner, &chains, &rules, hashes),
                                 4);
                if (sscanf(owner, "fw%3d", &i) != 1 || i < 0 || i >= OWNERS || strlen(owner) != 5) {
                        others++;
                        continue;
                }
                sig[i].chains = chains;
                sig[i].rules = rules;
                /* Both base chains carry one hash: a comma means two. */
                snprintf(sig[i].hash, sizeof(sig[i].hash), "%.39s", hashes);
        }
        free(out);
        return others;
}

static bool sig_eq(const struct owner_sig *a, const struct owner_sig *b)
{
        return a->chains == b->chains && a->rules == b->rules && strcmp(a->hash, b->hash) == 0;
}

/* 'A' or 'B' when every owner is wholly at that generation, else fails. */
static char firewall_generation(const struct owner_sig a[OWNERS], const struct owner_sig b[OWNERS])
{
        struct owner_sig now[OWNERS];
        int at_a = 0, at_b = 0;

        ck_assert_int_eq(read_owners(now), 0);
        for (int i = 0; i < OWNERS; i++) {
                at_a += sig_eq(&now[i], &a[i]);
                at_b += sig_eq(&now[i], &b[i]);
        }
        ck_assert_msg(at_a == OWNERS || at_b == OWNERS,
                      "the firewall is half old, half new: %d owners at A, %d at B (fw000: %u "
                      "chains %u rules %s)",
                      at_a, at_b, now[0].chains, now[0].rules, now[0].hash);
        return at_a == OWNERS ? 'A' : 'B';
}

/* Apply a generation without a kill; its signature as nft shows it. */
static uint64_t calibrate_owners(nb_conn *c, nb_batch *b, struct owner_sig sig[OWNERS])
{
        uint64_t t0 = tu_now_us(), us;
        nb_results *res = submit_ok(c, b);

        us = tu_now_us() - t0;
        ck_assert_int_eq(read_owners(sig), 0);
        for (int i = 0; i < OWNERS; i++) {
                const char *h;
                bool same;
                unsigned rules;
                ck_assert_int_eq(nb_result_firewall(res, (size_t)i, &h, &same, &rules), 0);
                ck_assert_msg(strcmp(sig[i].hash, h) == 0, "fw%03d: nft has %s, apply said %s", i,
                              sig[i].hash, h);
                ck_assert_uint_gt(sig[i].chains, 0);
        }
        nb_results_free(res);
        return us;
}

/* ---- interfaces and the name allocator ---- */

/* "prefix:number" for a name the allocator counts (names.c: a prefix, then
 * a decimal number without leading zeros, at most 65535), or false. */
static bool split_name(const char *name, char *out, size_t len)
{
        size_t n = strlen(name), i = n;
        unsigned long v;

        while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
                i--;
        if (i == 0 || i == n || (name[i] == '0' && i + 1 < n))
                return false;
        v = strtoul(name + i, NULL, 10);
        if (v > 65535)
                return false;
        snprintf(out, len, "%.*s:%lu", (int)i, name, v);
        return true;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted "prefix:number" lines, one string. */
static char *join_sorted(char **v, size_t n)
{
        size_t len = 0;
        char *out = NULL;
        FILE *f = open_memstream(&out, &len);

        qsort(v, n, sizeof(*v), cmp_str);
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%s\n", v[i]);
                free(v[i]);
        }
        fclose(f);
        free(v);
        return out;
}

static char *names_from_ip(void)
{
        char *names = tu_link_names(), *save = NULL;
        char **v = calloc(4096, sizeof(*v));
        size_t n = 0;

        for (char *name = strtok_r(names, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
                char s[40];
                if (split_name(name, s, sizeof(s)) && n < 4096)
                        v[n++] = strdup(s);
        }
        free(names);
        return join_sorted(v, n);
}

static char *names_from_helper(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        char **v = calloc(4096, sizeof(*v));
        size_t n = 0;

        nb_batch_names_dump(b);
        res = submit_ok(c, b);
        nb_batch_free(b);
        for (size_t k = 0; k < nb_result_names_count(res, 0); k++) {
                const char *prefix;
                const uint32_t *used;
                size_t n_used;
                unsigned cursor;
                ck_assert_int_eq(nb_result_names_at(res, 0, k, &prefix, &used, &n_used, &cursor),
                                 0);
                for (size_t j = 0; j < n_used && n < 4096; j++)
                        ck_assert_int_ge(asprintf(&v[n++], "%s:%u", prefix, used[j]), 0);
        }
        nb_results_free(res);
        return join_sorted(v, n);
}

static void allocator_agrees_with_ip(nb_conn *c)
{
        char *ip = names_from_ip(), *helper = names_from_helper(c);

        ck_assert_msg(strcmp(ip, helper) == 0, "ip link:\n%s\nthe allocator:\n%s", ip, helper);
        free(ip);
        free(helper);
}

static bool has_name(const char *names, const char *name)
{
        char needle[IFNAMSIZ + 2];

        snprintf(needle, sizeof(needle), "\n%s\n", name);
        return strstr(names, needle) != NULL;
}

static void template_gets_a_free_name(nb_conn *c)
{
        char *before = tu_link_names(), *grown;
        nb_batch *b = nb_batch_new();
        nb_results *res;

        /* tu_link_names() puts a newline before each name; one after the
         * last makes every name findable as "\nNAME\n". */
        ck_assert_int_ge(asprintf(&grown, "%s\n", before), 0);
        nb_batch_tap_create(b, "kt%d",
                            &(nb_tap_opts){.size = sizeof(nb_tap_opts), .persist = true});
        nb_batch_macvtap_create(b, "kmt%d", "p0", NB_MACVLAN_BRIDGE, NULL, false);
        res = submit_ok(c, b);
        nb_batch_free(b);
        for (size_t i = 0; i < 2; i++) {
                const char *name = nb_result_ifname(res, i);
                ck_assert_msg(!has_name(grown, name), "%s was handed out, but exists", name);
                ck_assert_msg(tu_link_exists(name), "%s was made, ip link has no such device",
                              name);
        }
        nb_results_free(res);
        free(before);
        free(grown);
}

static nb_rate guest_in = {.size = sizeof(nb_rate), .average = 1024, .burst = 64};
static nb_rate guest_out = {.size = sizeof(nb_rate), .average = 512, .burst = 64};

static nb_batch *interfaces_batch(int round, bool outbound)
{
        nb_batch *b = nb_batch_new();
        char name[IFNAMSIZ], peer[IFNAMSIZ];
        nb_fw_ruleset *rs = owner_ruleset(200 + round, false);

        for (int k = 0; k < IFACES; k++) {
                snprintf(peer, sizeof(peer), "kq%02d_%02d", round % 100, k);
                ck_assert_int_eq(nb_batch_veth_create(b, "kv%d", peer, -1), 0);
        }
        snprintf(name, sizeof(name), "cg%02d", round % 100);
        ck_assert_int_eq(
                nb_batch_tap_create(b, name,
                                    &(nb_tap_opts){.size = sizeof(nb_tap_opts), .persist = true}),
                0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, name, name, rs, NB_FW_REPLACE), 0);
        ck_assert_int_eq(nb_batch_bandwidth_set(b, name, &guest_in, outbound ? &guest_out : NULL),
                         0);
        for (int k = 0; k < IFACES; k++)
                ck_assert_int_eq(nb_batch_tap_create(b, "kt%d",
                                                     &(nb_tap_opts){.size = sizeof(nb_tap_opts),
                                                                    .persist = k % 2 == 1}),
                                 0);
        for (int k = 0; k < IFACES; k++)
                ck_assert_int_eq(
                        nb_batch_macvtap_create(b, "kmt%d", "p0", NB_MACVLAN_BRIDGE, NULL, false),
                        0);
        nb_fw_ruleset_free(rs);
        return b;
}

/* What a daemon does for a guest that is gone, each step on its own so
 * one missing piece does not stop the rest: delete its link, remove its
 * firewall owner, clear its bandwidth. Each status must be success or the
 * documented "not there": -ENODEV for a missing interface, -ENOENT for an
 * owner without rules. */
enum { STEP_LINK, STEP_FW, STEP_BW, STEPS };
static const char *const step_names[STEPS] = {"link delete", "firewall remove", "bandwidth clear"};

struct cleanup_counts {
        unsigned ok[STEPS], gone[STEPS];
};

static void cleanup_step(nb_conn *c, nb_batch *b, int step, int gone, struct cleanup_counts *n)
{
        nb_results *res = submit(c, b);
        int st = nb_result_status(res, 0);

        ck_assert_msg(st == 0 || st == gone, "clean-up %s: %s (%s)", step_names[step],
                      strerror(-st), nb_result_message(res, 0));
        if (st == 0)
                n->ok[step]++;
        else
                n->gone[step]++;
        nb_results_free(res);
        nb_batch_free(b);
}

static void guest_cleanup(nb_conn *c, const char *name, struct cleanup_counts *n)
{
        nb_batch *b;

        b = nb_batch_new();
        nb_batch_link_delete(b, name);
        cleanup_step(c, b, STEP_LINK, -ENODEV, n);
        b = nb_batch_new();
        nb_batch_firewall_remove(b, name);
        cleanup_step(c, b, STEP_FW, -ENOENT, n);
        b = nb_batch_new();
        nb_batch_bandwidth_clear(b, name);
        cleanup_step(c, b, STEP_BW, -ENODEV, n);
}

/* No trace of the guest: no link, no owner, no policer chain of netbroker's
 * (nbbwN in table netdev netbroker_bw, or an older helper's IFB). */
static uint64_t policer_linger_max_us;

static bool policer_left(char **ret_names, char **ret_ruleset)
{
        *ret_names = tu_link_names();
        *ret_ruleset = tu_sh("nft -j list table netdev netbroker_bw 2>/dev/null");
        return strstr(*ret_names, "\nnbifb") || strstr(*ret_ruleset, "\"name\": \"nbbw");
}

static void guest_is_gone(const char *name)
{
        char *names, *ruleset, *s;
        struct owner_sig sig[OWNERS];
        uint64_t t0 = tu_now_us();
        bool left;

        names = tu_link_names();
        ck_assert_msg(!has_name(names, name) && !tu_link_exists(name), "%s is still there", name);
        free(names);
        /* The policer chain of an interface that went is deleted when the
         * helper takes in the link notification, which may come after the
         * reply to the LinkDelete: give it a moment (seconds on a loaded
         * machine). */
        while ((left = policer_left(&names, &ruleset)) && tu_now_us() - t0 < 10000000) {
                free(names);
                free(ruleset);
                usleep(10000);
        }
        ck_assert_msg(!left, "a policer outlived its guest by 10 s:%s\n%s", names, ruleset);
        free(names);
        free(ruleset);
        if (tu_now_us() - t0 > policer_linger_max_us)
                policer_linger_max_us = tu_now_us() - t0;
        ck_assert_int_eq(read_owners(sig), 0);
        s = tu_sh("tc -j qdisc show");
        ck_assert_msg(!strstr(s, "\"dev\":\"nbifb"), "qdiscs of an IFB left: %s", s);
        free(s);
}

/* Delete what the interface rounds made (veths take their peers along). */
static void delete_round_devices(nb_conn *c)
{
        char *names = tu_link_names(), *save = NULL, *after;
        nb_batch *b = nb_batch_new();

        nb_batch_set_flags(b, NB_BATCH_CONTINUE_ON_ERROR);
        for (char *name = strtok_r(names, "\n", &save); name; name = strtok_r(NULL, "\n", &save))
                if (strncmp(name, "kv", 2) == 0 || strncmp(name, "kt", 2) == 0 ||
                    strncmp(name, "kmt", 3) == 0)
                        nb_batch_link_delete(b, name);
        if (nb_batch_size(b) > 0)
                nb_results_free(submit_ok(c, b));
        nb_batch_free(b);
        free(names);
        after = tu_link_names();
        ck_assert_msg(!strstr(after, "\nkv") && !strstr(after, "\nkt") && !strstr(after, "\nkq") &&
                              !strstr(after, "\nkmt"),
                      "round devices left: %s", after);
        free(after);
}

static bool outbound_available(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        const char *out = "";
        nb_results *res;
        bool ok;

        nb_batch_stats(b);
        res = submit_ok(c, b);
        nb_result_stat_setting(res, 0, "bandwidth_outbound", &out);
        /* "nft-limit" today ("ifb" from an older helper); "none: ..." when
         * the kernel has neither. */
        ok = strncmp(out, "none", 4) != 0 && out[0] != '\0';
        nb_results_free(res);
        nb_batch_free(b);
        return ok;
}

/* ---- the tests ---- */

#define CRASH_ALLOW TU_ALLOW

START_TEST(test_helper_killed_while_idle_next_call_respawns_and_works)
{
        nb_conn *c;
        pid_t old;

        tu_private_netns();
        c = tu_spawn(CRASH_ALLOW);
        ping_ok(c);
        old = nb_conn_helper_pid(c);
        ck_assert_int_eq(kill(old, SIGKILL), 0);
        /* Dead (a zombie until the library reaps it): its end is closed. */
        for (int i = 0; i < 200 && tu_process_alive(old); i++)
                usleep(5000);
        ck_assert(!tu_process_alive(old));
        next_call_respawns(c, old);
        nb_close(c);
}
END_TEST

struct crash_totals {
        unsigned rounds, replied, failed, old_state, new_state, respawned;
        uint64_t max_fail_us, sum_fail_us;
        struct cleanup_counts first, second;
};

static void note_outcome(struct crash_totals *t, const struct outcome *o)
{
        t->rounds++;
        if (o->replied) {
                t->replied++;
                return;
        }
        t->failed++;
        t->sum_fail_us += o->fail_us;
        if (o->fail_us > t->max_fail_us)
                t->max_fail_us = o->fail_us;
}

START_TEST(test_sigkill_during_firewall_and_interface_batches_30_times)
{
        unsigned rounds = stress_env_seconds("NB_CRASH_ROUNDS", 30), seed = 0x6e62 + 1;
        struct owner_sig *sig_a = calloc(OWNERS, sizeof(*sig_a)),
                         *sig_b = calloc(OWNERS, sizeof(*sig_b));
        struct crash_totals fw = {0}, ifc = {0};
        nb_batch *batch_a, *batch_b, *b;
        uint64_t fw_us, if_us, t0 = tu_now_us();
        struct cleanup_counts ignored = {0};
        unsigned deleted_while_down = 0, policer_while_down = 0;
        char gen;
        bool outbound;
        nb_conn *c;

        tu_private_netns();
        tu_veth("p0", "p1"); /* the macvtaps' parent */
        tu_veths("fw", OWNERS);
        c = tu_spawn(CRASH_ALLOW);
        outbound = outbound_available(c);

        /* What each generation looks like, and how long a batch takes. */
        batch_a = owners_batch(false);
        batch_b = owners_batch(true);
        calibrate_owners(c, batch_a, sig_a);
        fw_us = calibrate_owners(c, batch_b, sig_b);
        for (int i = 0; i < OWNERS; i++)
                ck_assert_msg(sig_a[i].chains != sig_b[i].chains &&
                                      sig_a[i].rules != sig_b[i].rules,
                              "A and B look alike");
        gen = firewall_generation(sig_a, sig_b);
        ck_assert_int_eq(gen, 'B');
        b = interfaces_batch(99, outbound);
        {
                uint64_t t = tu_now_us();
                nb_results *res = submit_ok(c, b);
                if_us = tu_now_us() - t;
                /* Not timed: closing the plain taps' fds deletes them. */
                nb_results_free(res);
        }
        nb_batch_free(b);
        guest_cleanup(c, "cg99", &ignored);
        guest_is_gone("cg99");
        delete_round_devices(c);
        allocator_agrees_with_ip(c);

        for (unsigned r = 0; r < rounds; r++) {
                struct outcome o;
                nb_results *res;
                if (r % 2 == 0) {
                        char want = gen == 'A' ? 'B' : 'A';
                        res = submit_and_kill(c, want == 'A' ? batch_a : batch_b,
                                              (unsigned)(fw_us * 13 / 10), &seed, &o);
                        note_outcome(&fw, &o);
                        if (res) {
                                ck_assert_int_eq(nb_results_first_error(res), -1);
                                nb_results_free(res);
                        }
                        next_call_respawns(c, o.old_pid);
                        fw.respawned++;
                        gen = firewall_generation(sig_a, sig_b);
                        if (o.replied)
                                ck_assert_msg(gen == want, "round %u: replied, but not applied", r);
                        if (gen == want)
                                fw.new_state++;
                        else
                                fw.old_state++;
                } else {
                        char guest[IFNAMSIZ];
                        snprintf(guest, sizeof(guest), "cg%02d", (int)(r % 100));
                        b = interfaces_batch((int)r, outbound);
                        res = submit_and_kill(c, b, (unsigned)(if_us * 13 / 10), &seed, &o);
                        nb_batch_free(b);
                        note_outcome(&ifc, &o);
                        if (res) {
                                ck_assert_int_eq(nb_results_first_error(res), -1);
                                nb_results_free(res); /* closes the tap fds */
                        }
                        /* Now and then the guest's tap goes while no helper
                         * runs (the daemon or an admin removed it): the new
                         * helper must find and remove its policer by itself. */
                        if (!o.replied && r % 4 == 3 && tu_link_exists(guest)) {
                                char *names, *ruleset;
                                policer_while_down += policer_left(&names, &ruleset);
                                free(names);
                                free(ruleset);
                                free(tu_sh("ip link del %s", guest));
                                deleted_while_down++;
                        }
                        next_call_respawns(c, o.old_pid);
                        ifc.respawned++;
                        allocator_agrees_with_ip(c);
                        template_gets_a_free_name(c);
                        guest_cleanup(c, guest, &ifc.first);
                        guest_cleanup(c, guest, &ifc.second);
                        guest_is_gone(guest);
                        delete_round_devices(c);
                        allocator_agrees_with_ip(c);
                        /* The firewall rounds' owners were not touched. */
                        ck_assert_int_eq(firewall_generation(sig_a, sig_b), gen);
                }
        }
        ck_assert_int_eq(tu_zombies_of(getpid()), 0);

        printf("crash: %u kills in %.1f s (firewall batch %.1f ms, interface batch %.1f ms "
               "without a kill)\n",
               fw.rounds + ifc.rounds, (double)(tu_now_us() - t0) / 1e6, (double)fw_us / 1000,
               (double)if_us / 1000);
        printf("crash: firewall: %u killed mid-call (then %u entirely old, %u entirely new), %u "
               "replied first; never half\n",
               fw.failed, fw.old_state, fw.new_state - fw.replied, fw.replied);
        printf("crash: interfaces: %u killed mid-call, %u replied first; allocator = ip link "
               "after each, a template got a free name each time\n",
               ifc.failed, ifc.replied);
        printf("crash: failed calls returned after the kill in %.1f ms on average, at most "
               "%.1f ms (firewall), %.1f ms (interfaces); %u of %u next calls respawned the helper "
               "and worked\n",
               fw.failed + ifc.failed ? (double)(fw.sum_fail_us + ifc.sum_fail_us) /
                                                (fw.failed + ifc.failed) / 1000
                                      : 0.0,
               (double)fw.max_fail_us / 1000, (double)ifc.max_fail_us / 1000,
               fw.respawned + ifc.respawned, fw.rounds + ifc.rounds);
        printf("crash: outbound limits %s\n",
               outbound ? "set in every interface round" : "not available on this kernel");
        printf("crash: a guest's tap deleted while no helper ran: %u times, %u with a policer, "
               "which the new helper removed; a policer outlived its guest's clean-up by %.0f ms "
               "at most\n",
               deleted_while_down, policer_while_down, (double)policer_linger_max_us / 1000);
        for (int k = 0; k < STEPS; k++)
                printf("crash: guest clean-up, %s: first pass %u ok, %u already gone; second "
                       "pass %u ok, %u already gone\n",
                       step_names[k], ifc.first.ok[k], ifc.first.gone[k], ifc.second.ok[k],
                       ifc.second.gone[k]);
        fflush(stdout);

        nb_batch_free(batch_a);
        nb_batch_free(batch_b);
        free(sig_a);
        free(sig_b);
        nb_close(c);
}
END_TEST

Suite *crash_suite(void)
{
        Suite *s = suite_create("crash");
        TCase *tc = tcase_create("crash");

        tcase_set_timeout(tc, 600); /* a sanitized build is slower */
        tcase_add_test(tc, test_helper_killed_while_idle_next_call_respawns_and_works);
        tcase_add_test(tc, test_sigkill_during_firewall_and_interface_batches_30_times);
        suite_add_tcase(s, tc);
        return s;
}
