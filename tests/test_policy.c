// SPDX-License-Identifier: LGPL-2.1-or-later
/* The policy and ownership against the real kernel, from the other side:
 * callers of other uids (an agent process that drops to them) talk to a
 * helper run by root, and what they may and may not change is checked with
 * the real tools (ip -d -j link, nft -j list ruleset): a refusal leaves
 * both exactly as they were. Each test runs in a network namespace of its
 * own. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

/* Never the host's /etc/netbroker/policy.d. */
#define NO_DIR "policy_dir = /nonexistent/nbtest-policy.d\n"
#define NOBODY 65534 /* uid A */
#define OTHER 65533 /* uid B */
#define GROUP 4243 /* a supplementary group with a section of its own */

/* ---- an agent: a process of another uid that talks to a helper ---- */

enum act {
        A_PING,
        A_STATS,
        A_NAMES,
        A_FW_LIST,
        A_TAP,
        A_BRIDGE,
        A_VETH,
        A_MACVLAN,
        A_MACVTAP,
        A_SET,
        A_BW_SET,
        A_BW_CLEAR,
        A_FW_APPLY,
        A_FW_REMOVE,
        A_EXEC,
        A_DELETE,
        A_FW_COUNTERS,
        A_SYSCTL,
        A_RA,
        A_QUIT,
};

#define NETNS_HERE -1
#define NETNS_OWN -2 /* the agent's own network namespace */

struct cmd {
        enum act act;
        char a[64]; /* the interface (the program for A_EXEC) */
        char b[64]; /* peer, parent, master or firewall owner */
        int mode;
        bool persist, set_owner;
        unsigned uid, gid;
        int netns; /* A_VETH: NETNS_HERE, NETNS_OWN, or an fd the agent inherited */
        char mac[18]; /* A_SET: "" unchanged */
        unsigned mtu; /* A_SET: 0 unchanged */
        bool nomaster; /* A_SET: leave its bridge */
        unsigned value; /* A_SYSCTL: a of b */
};

struct reply {
        int status; /* the op's 0 or -errno; nb_submit's failure otherwise */
        char msg[512];
        char list[512]; /* A_FW_LIST: " owner owner ... "; A_FW_COUNTERS: " owner:rules ... "
                           (or owner:none, when it has no rule counted) */
};

struct agent {
        pid_t pid;
        int sock;
};

static void list_owners(const nb_results *res, char *out, size_t len, bool counters)
{
        size_t at = 0;

        snprintf(out, len, " ");
        for (size_t k = 0; k < nb_result_fw_owner_count(res, 0); k++) {
                const char *owner, *ifname, *hash;
                unsigned rules;
                if (nb_result_fw_owner_at(res, 0, k, &owner, &ifname, &hash, &rules) < 0)
                        continue;
                at = strlen(out);
                if (counters)
                        snprintf(out + at, len - at, "%s:%s ", owner,
                                 nb_result_fw_counter_count(res, 0, k) ? "rules" : "none");
                else
                        snprintf(out + at, len - at, "%s ", owner);
        }
}

static void build(nb_batch *b, const struct cmd *m, int own_netns)
{
        nb_tap_opts t = {.size = sizeof(nb_tap_opts),
                         .persist = m->persist,
                         .set_owner = m->set_owner,
                         .uid = m->uid,
                         .gid = m->gid};
        nb_link_change ch = {.size = sizeof(nb_link_change),
                             .up = 1,
                             .mtu = m->mtu,
                             .mac = m->mac[0] ? m->mac : NULL,
                             .master = m->b[0] ? m->b : NULL,
                             .nomaster = m->nomaster};
        nb_rate rate = {.size = sizeof(nb_rate), .average = 1000};
        nb_fw_ruleset *rs;

        switch (m->act) {
        case A_PING:
                nb_batch_ping(b);
                break;
        case A_STATS:
                nb_batch_stats(b);
                break;
        case A_NAMES:
                nb_batch_names_dump(b);
                break;
        case A_FW_LIST:
                nb_batch_firewall_list(b);
                break;
        case A_FW_COUNTERS:
                nb_batch_firewall_list_counters(b);
                break;
        case A_TAP:
                nb_batch_tap_create(b, m->a, &t);
                break;
        case A_BRIDGE:
                nb_batch_bridge_create(b, m->a);
                break;
        case A_VETH:
                nb_batch_veth_create(b, m->a, m->b, m->netns == NETNS_OWN ? own_netns : m->netns);
                break;
        case A_MACVLAN:
                nb_batch_macvlan_create(b, m->a, m->b, (nb_macvlan_mode)m->mode, NULL);
                break;
        case A_MACVTAP:
                nb_batch_macvtap_create(b, m->a, m->b, (nb_macvlan_mode)m->mode, NULL, false);
                break;
        case A_SET:
                nb_batch_link_set(b, m->a, &ch);
                break;
        case A_BW_SET:
                nb_batch_bandwidth_set(b, m->a, &rate, &rate);
                break;
        case A_BW_CLEAR:
                nb_batch_bandwidth_clear(b, m->a);
                break;
        case A_FW_APPLY:
                rs = nb_fw_ruleset_new();
                nb_fw_add_no_mac_spoofing(rs, "52:54:00:12:34:56");
                nb_batch_firewall_apply(b, m->b, m->a, rs, NB_FW_REPLACE);
                nb_fw_ruleset_free(rs);
                break;
        case A_FW_REMOVE:
                nb_batch_firewall_remove(b, m->b);
                break;
        case A_EXEC:
                nb_batch_exec(b, m->a, NULL, NULL, NULL, 0, 0);
                break;
        case A_DELETE:
                nb_batch_link_delete(b, m->a);
                break;
        case A_SYSCTL:
                nb_batch_sysctl_set(b, m->a, m->b, m->value);
                break;
        case A_RA: /* its tap, up (in bridge b) */
                nb_batch_tap_create(b, m->a, &t);
                nb_batch_link_set(b, m->a, &ch);
                break;
        case A_QUIT:
                break;
        }
}

/* ---- Router Advertisements ---- */

#define RA_LEN (14 + 40 + 16 + 8 + 32 + 32)

/* The security review's Router Advertisement (F5) from
 * fe80::5054:ff:fe12:3456 to ff02::1: a default router for 1800 s, the
 * prefix 2000::/3 on-link, and 2001:db8:5::/64 on-link and for SLAAC. */
static void ra_frame(uint8_t f[RA_LEN])
{
        static const uint8_t mac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
        uint8_t *ip = f + 14, *icmp = ip + 40, *o = icmp + 16, ph[40] = {0};
        const size_t len = RA_LEN - 14 - 40;
        uint32_t sum = 0;

        memset(f, 0, RA_LEN);
        memcpy(f, "\x33\x33\x00\x00\x00\x01", 6);
        memcpy(f + 6, mac, 6);
        f[12] = 0x86;
        f[13] = 0xdd;
        ip[0] = 0x60;
        ip[5] = (uint8_t)len;
        ip[6] = 58;
        ip[7] = 255;
        inet_pton(AF_INET6, "fe80::5054:ff:fe12:3456", ip + 8);
        inet_pton(AF_INET6, "ff02::1", ip + 24);
        icmp[0] = 134;
        icmp[4] = 64;
        icmp[6] = 0x07; /* router lifetime 1800 s */
        icmp[7] = 0x08;
        o[0] = 1; /* source link-layer address */
        o[1] = 1;
        memcpy(o + 2, mac, 6);
        o += 8;
        for (int i = 0; i < 2; i++, o += 32) {
                o[0] = 3; /* prefix information */
                o[1] = 4;
                o[2] = i ? 64 : 3;
                o[3] = i ? 0xc0 : 0x80; /* on-link, and autonomous */
                o[6] = 0x51; /* valid 86400 s */
                o[7] = 0x80;
                o[10] = 0x38; /* preferred 14400 s */
                o[11] = 0x40;
                inet_pton(AF_INET6, i ? "2001:db8:5::" : "2000::", o + 16);
        }
        memcpy(ph, ip + 8, 32);
        ph[35] = (uint8_t)len;
        ph[39] = 58;
        for (int i = 0; i < 40; i += 2)
                sum += (uint32_t)(ph[i] << 8 | ph[i + 1]);
        for (size_t i = 0; i < len; i += 2)
                sum += (uint32_t)(icmp[i] << 8 | icmp[i + 1]);
        while (sum >> 16)
                sum = (sum & 0xffff) + (sum >> 16);
        icmp[2] = (uint8_t)(~sum >> 8);
        icmp[3] = (uint8_t)~sum;
}

/* The Router Advertisement into a tap's fd, ten times over 2 s. 0, or
 * -errno. */
static int write_ras(int fd)
{
        uint8_t f[RA_LEN];

        ra_frame(f);
        for (int i = 0; i < 10; i++) {
                if (write(fd, f, sizeof(f)) != (ssize_t)sizeof(f))
                        return -errno;
                usleep(200000);
        }
        return 0;
}

/* The taps an agent wrote into: held until it quits, so that what the
 * kernel made of its frames stays to be seen. */
static int ra_taps[8];
static unsigned n_ra_taps;

static void run_cmd(nb_conn *c, const struct cmd *m, int own_netns, struct reply *r)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;

        memset(r, 0, sizeof(*r));
        build(b, m, own_netns);
        r->status = nb_submit(c, b, &res);
        if (r->status == 0 && m->act == A_RA) {
                long bad = nb_results_first_error(res);
                int fd = bad < 0 ? nb_result_take_fd(res, 0, 0) : -EIO;

                r->status = bad >= 0 ? nb_result_status(res, (size_t)bad) : fd < 0 ? fd : 0;
                snprintf(r->msg, sizeof(r->msg), "%s",
                         bad >= 0 ? nb_result_message(res, (size_t)bad) : "");
                if (fd >= 0 && n_ra_taps == sizeof(ra_taps) / sizeof(*ra_taps)) {
                        close(fd);
                        r->status = -ENOSPC;
                } else if (fd >= 0) {
                        ra_taps[n_ra_taps++] = fd;
                        r->status = write_ras(fd);
                }
        } else if (r->status == 0) {
                r->status = nb_result_status(res, 0);
                snprintf(r->msg, sizeof(r->msg), "%s", nb_result_message(res, 0));
                if (m->act == A_FW_LIST || m->act == A_FW_COUNTERS)
                        list_owners(res, r->list, sizeof(r->list), m->act == A_FW_COUNTERS);
        } else {
                snprintf(r->msg, sizeof(r->msg), "%s", nb_conn_error(c));
        }
        nb_results_free(res);
        nb_batch_free(b);
}

static void agent_main(int sock, const char *path, uid_t uid, gid_t gid, const gid_t *groups,
                       size_t n, bool own_netns)
{
        struct reply r = {0};
        nb_conn *c = NULL;
        struct cmd m;
        int own = -1;

        if (setgroups(n, groups) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
                r.status = -errno;
        /* A user namespace of its own, and in it a network namespace it
         * owns, as rootless containers make them. */
        if (r.status == 0 && own_netns && unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
                r.status = -errno;
        if (r.status == 0 && own_netns &&
            (own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
                r.status = -errno;
        if (r.status == 0)
                r.status = nb_connect(path, &c);
        snprintf(r.msg, sizeof(r.msg), "%s", r.status ? nb_last_error() : "");
        if (send(sock, &r, sizeof(r), 0) != sizeof(r) || r.status)
                _exit(1);
        while (recv(sock, &m, sizeof(m), 0) == sizeof(m) && m.act != A_QUIT) {
                run_cmd(c, &m, own, &r);
                if (send(sock, &r, sizeof(r), 0) != sizeof(r))
                        break;
        }
        nb_close(c);
        _exit(0);
}

static void agent_start_ex(struct agent *a, const struct tu_helper *h, uid_t uid, gid_t gid,
                           const gid_t *groups, size_t n, bool own_netns)
{
        struct reply r;
        int sv[2];

        ck_assert_int_eq(chmod(h->sock, 0666), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        a->pid = fork();
        ck_assert_int_ge(a->pid, 0);
        if (a->pid == 0) {
                close(sv[0]);
                agent_main(sv[1], h->sock, uid, gid, groups, n, own_netns);
        }
        close(sv[1]);
        a->sock = sv[0];
        ck_assert_int_eq(recv(a->sock, &r, sizeof(r), 0), sizeof(r));
        ck_assert_msg(r.status == 0, "uid %u cannot connect: %s (%s)", (unsigned)uid,
                      strerror(-r.status), r.msg);
}

static void agent_start(struct agent *a, const struct tu_helper *h, uid_t uid)
{
        agent_start_ex(a, h, uid, uid == 0 ? 0 : uid, NULL, 0, false);
}

static struct reply agent_do(struct agent *a, const struct cmd *m)
{
        struct reply r;

        ck_assert_int_eq(send(a->sock, m, sizeof(*m), 0), sizeof(*m));
        ck_assert_int_eq(recv(a->sock, &r, sizeof(r), 0), sizeof(r));
        return r;
}

static void agent_stop(struct agent *a)
{
        struct cmd q = {.act = A_QUIT};
        int status;

        ck_assert_int_eq(send(a->sock, &q, sizeof(q), 0), sizeof(q));
        ck_assert_int_eq(waitpid(a->pid, &status, 0), a->pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "agent status %d", status);
        close(a->sock);
}

static struct cmd op(enum act act, const char *a, const char *b)
{
        struct cmd m = {.act = act, .netns = NETNS_HERE};

        snprintf(m.a, sizeof(m.a), "%s", a ? a : "");
        snprintf(m.b, sizeof(m.b), "%s", b ? b : "");
        return m;
}

static struct cmd tap(const char *name, bool persist, bool set_owner, unsigned uid, unsigned gid)
{
        struct cmd m = op(A_TAP, name, NULL);

        m.persist = persist;
        m.set_owner = set_owner;
        m.uid = uid;
        m.gid = gid;
        return m;
}

static struct cmd macv(enum act act, const char *name, const char *parent, nb_macvlan_mode mode)
{
        struct cmd m = op(act, name, parent);

        m.mode = (int)mode;
        return m;
}

static struct cmd veth_into(const char *name, const char *peer, int netns)
{
        struct cmd m = op(A_VETH, name, peer);

        m.netns = netns;
        return m;
}

/* ---- the world as the real tools see it ---- */

/* Every link (ip -d -j link show, without the bridges' running timers) and
 * the whole nftables ruleset, in one text. */
/* Every link and the whole nftables ruleset, in one text
 * (tests/py/world.py). */
static char *world(void)
{
        char *out;

        ck_assert_int_eq(
                tu_run((const char *const[]){"/usr/bin/python3", TU_PY("world.py"), NULL}, &out),
                0);
        return out;
}

/* Devices settle (operstate, carrier) a moment after a change: wait until
 * two looks agree. */
static char *settled_world(void)
{
        char *w = world();

        for (int i = 0; i < 40; i++) {
                char *again;
                usleep(50000);
                again = world();
                if (strcmp(w, again) == 0) {
                        free(again);
                        return w;
                }
                free(w);
                w = again;
        }
        ck_abort_msg("the links did not settle");
        return w;
}

static void expect_ok(struct agent *a, const struct cmd *m)
{
        struct reply r = agent_do(a, m);

        ck_assert_msg(r.status == 0, "op %d on %s %s: %s (%s)", m->act, m->a, m->b,
                      strerror(-r.status), r.msg);
}

/* Refused with err, the message holds needle, and nothing changed. */
static void expect_refused(struct agent *a, const struct cmd *m, int err, const char *needle)
{
        char *before = settled_world(), *after;
        struct reply r = agent_do(a, m);

        ck_assert_msg(r.status == -err, "op %d on %s %s: status %d (%s), wanted %d", m->act, m->a,
                      m->b, r.status, r.msg, -err);
        ck_assert_msg(strstr(r.msg, needle), "op %d on %s %s: message '%s' lacks '%s'", m->act,
                      m->a, m->b, r.msg, needle);
        after = world();
        /* Check cannot carry a world in its message (check_pack's limit). */
        if (strcmp(before, after) != 0)
                fprintf(stderr, "world before:\n%s\nworld after:\n%s\n", before, after);
        ck_assert_msg(strcmp(before, after) == 0, "op %d on %s %s was refused but changed (above)",
                      m->act, m->a, m->b);
        free(before);
        free(after);
}

static void assert_alias(const char *dev, const char *want)
{
        const char *got = tu_link_get(dev, "ifalias");

        ck_assert_msg(got, "no interface %s", dev);
        ck_assert_msg(strcmp(got, want) == 0, "%s: ifalias '%s', wanted '%s'", dev, got, want);
}

/* `bridge -j fdb show` has mac on dev. */
static bool fdb_has(const char *mac, const char *dev)
{
        char *out = tu_sh("bridge -j fdb show"), needle[96];
        bool has;

        snprintf(needle, sizeof(needle), "\"mac\":\"%s\",\"ifname\":\"%s\"", mac, dev);
        has = strstr(out, needle) != NULL;
        free(out);
        return has;
}

static nb_conn *root_conn(const struct tu_helper *h)
{
        nb_conn *c = NULL;

        ck_assert_int_eq(nb_connect(h->sock, &c), 0);
        return c;
}

/* One batch as root, every op of which must work. */
static void root_batch(nb_conn *c, nb_batch *b)
{
        nb_results *res = NULL;
        long bad;

        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        bad = nb_results_first_error(res);
        ck_assert_msg(bad < 0, "root's op %ld: %s", bad,
                      bad < 0 ? "" : nb_result_message(res, (size_t)bad));
        nb_results_free(res);
        nb_batch_free(b);
}

/* ---- the coverage matrix ---- */

enum { C_ROOT, C_GRANTED, C_NONE, C_GROUP, N_CLASSES };

static const char *const class_names[N_CLASSES] = {
        "root",
        "uid 65534, policy",
        "uid 65534, no policy",
        "uid 65533 by group 4243",
};

/* Each op as a caller of each class runs it: on what it made itself, and
 * (the class without a policy) on root's. 0: allowed, else the errno. */
static const struct {
        const char *op;
        enum act act;
        int want[N_CLASSES];
} matrix[] = {
        {"ping", A_PING, {0, 0, 0, 0}},
        {"stats", A_STATS, {0, 0, 0, 0}},
        {"names_dump", A_NAMES, {0, 0, 0, 0}},
        {"firewall_list", A_FW_LIST, {0, 0, 0, 0}},
        {"tap_create", A_TAP, {0, 0, EPERM, 0}},
        {"bridge_create", A_BRIDGE, {0, 0, EPERM, EPERM}},
        {"veth_create", A_VETH, {0, 0, EPERM, EPERM}},
        {"macvlan_create", A_MACVLAN, {0, 0, EPERM, EPERM}},
        {"macvtap_create", A_MACVTAP, {0, 0, EPERM, EPERM}},
        {"link_set", A_SET, {0, 0, EPERM, 0}},
        {"bandwidth_set", A_BW_SET, {0, 0, EPERM, 0}},
        {"bandwidth_clear", A_BW_CLEAR, {0, 0, EPERM, 0}},
        {"firewall_apply", A_FW_APPLY, {0, 0, EPERM, 0}},
        {"firewall_remove", A_FW_REMOVE, {0, 0, EPERM, 0}},
        {"exec", A_EXEC, {0, 0, EPERM, EPERM}},
        {"link_delete", A_DELETE, {0, 0, EPERM, 0}},
};
#define N_MATRIX (sizeof(matrix) / sizeof(*matrix))

static struct cmd matrix_cmd(size_t row, int cls, unsigned uid, unsigned gid)
{
        static const char *const prefix[N_CLASSES] = {"pvr", "pvn", "pvn", "pvg"};
        const char *p = prefix[cls];
        char n[5][32], master[32];
        struct cmd m;

        snprintf(n[0], sizeof(n[0]), "%stap", p);
        snprintf(n[1], sizeof(n[1]), "%sbr", p);
        snprintf(n[2], sizeof(n[2]), "%sfw", p);
        snprintf(n[3], sizeof(n[3]), "%sv", p);
        snprintf(n[4], sizeof(n[4]), "%svp", p);
        /* Its own bridge where it may make one, else the listed one. */
        snprintf(master, sizeof(master), "%s", cls == C_ROOT || cls == C_GRANTED ? n[1] : "pvlbr0");
        /* Without a policy: root's interface and owner, which exist. */
        if (cls == C_NONE) {
                snprintf(n[0], sizeof(n[0]), "pvset0");
                snprintf(n[2], sizeof(n[2]), "pvkeep");
        }
        switch (matrix[row].act) {
        case A_TAP:
                return tap(n[0], true, true, uid, gid);
        case A_BRIDGE:
                return op(A_BRIDGE, n[1], NULL);
        case A_VETH:
                return op(A_VETH, n[3], n[4]);
        case A_MACVLAN:
                snprintf(n[3], sizeof(n[3]), "%smvl", p);
                return macv(A_MACVLAN, n[3], "pvup0", NB_MACVLAN_BRIDGE);
        case A_MACVTAP:
                snprintf(n[3], sizeof(n[3]), "%smvt", p);
                return macv(A_MACVTAP, n[3], "pvup0", NB_MACVLAN_BRIDGE);
        case A_SET:
                return op(A_SET, n[0], master);
        case A_FW_APPLY:
                return op(A_FW_APPLY, n[0], n[2]);
        case A_FW_REMOVE:
                return op(A_FW_REMOVE, NULL, n[2]);
        case A_EXEC:
                return op(A_EXEC, "/bin/true", NULL);
        default:
                m = op(matrix[row].act, n[0], NULL);
                return m;
        }
}

static const char matrix_policy[] =
        "[policy uid 65534]\n"
        "ops = tap_create macvtap_create macvlan_create veth_create bridge_create link_set "
        "link_delete firewall_apply firewall_remove bandwidth_set bandwidth_clear exec\n"
        "bridges = pvlbr0\n"
        "parents = pvup0\n"
        "name_prefixes = pvn\n"
        "exec = /bin/true\n"
        "[policy gid 4243]\n"
        "ops = tap_create link_set link_delete firewall_apply firewall_remove bandwidth_set "
        "bandwidth_clear\n"
        "bridges = pvlbr0\n"
        "name_prefixes = pvg\n";

static void print_matrix(void)
{
        printf("\npolicy coverage: op x caller (0 allowed, else refused with that errno)\n");
        printf("%-16s", "op");
        for (int c = 0; c < N_CLASSES; c++)
                printf(" | %-24s", class_names[c]);
        printf("\n");
        for (size_t i = 0; i < N_MATRIX; i++) {
                printf("%-16s", matrix[i].op);
                for (int c = 0; c < N_CLASSES; c++)
                        printf(" | %-24s", matrix[i].want[c] ? "EPERM (nothing changed)" : "0");
                printf("\n");
        }
        fflush(stdout);
}

/* Every op, as each class of caller; a refusal is EPERM, says which uid
 * and op, and changes no link and no rule. */
START_TEST(test_every_op_by_every_class_of_caller_is_allowed_or_refused_as_the_policy_says)
{
        static const gid_t group[] = {GROUP};
        struct tu_helper with, without;
        struct agent agents[N_CLASSES];
        char conf[2048];
        nb_conn *rc;
        nb_batch *b;
        nb_fw_ruleset *rs;

        tu_private_netns();
        tu_veth("pvup0", "pvup0p");
        snprintf(conf, sizeof(conf), TU_ALLOW NO_DIR "allow_uid = 0\n%s", matrix_policy);
        tu_helper_start(&with, conf);
        tu_helper_start(&without, TU_ALLOW NO_DIR "allow_uid = 0 65534\n");
        /* Root's: the listed bridge, an interface and an owner on it. */
        rc = root_conn(&with);
        b = nb_batch_new();
        rs = nb_fw_ruleset_new();
        nb_fw_add_allow_arp(rs);
        nb_batch_bridge_create(b, "pvlbr0");
        nb_batch_veth_create(b, "pvset0", "pvset0p", -1);
        nb_batch_firewall_apply(b, "pvkeep", "pvset0", rs, NB_FW_REPLACE);
        root_batch(rc, b);
        nb_fw_ruleset_free(rs);
        agent_start(&agents[C_ROOT], &with, 0);
        agent_start(&agents[C_GRANTED], &with, NOBODY);
        agent_start(&agents[C_NONE], &without, NOBODY);
        agent_start_ex(&agents[C_GROUP], &with, OTHER, OTHER, group, 1, false);
        for (int c = 0; c < N_CLASSES; c++) {
                unsigned uid = c == C_ROOT ? 0 : c == C_GROUP ? OTHER : NOBODY;
                for (size_t i = 0; i < N_MATRIX; i++) {
                        struct cmd m = matrix_cmd(i, c, uid, uid);
                        char needle[96];
                        snprintf(needle, sizeof(needle), "policy: uid %u may not run %s", uid,
                                 matrix[i].op);
                        if (matrix[i].want[c])
                                expect_refused(&agents[c], &m, matrix[i].want[c], needle);
                        else
                                expect_ok(&agents[c], &m);
                }
        }
        for (int c = 0; c < N_CLASSES; c++)
                agent_stop(&agents[c]);
        /* Root's are all still there. */
        ck_assert(tu_link_exists("pvset0"));
        ck_assert(tu_link_exists("pvlbr0"));
        print_matrix();
        nb_close(rc);
        tu_helper_stop(&without);
        tu_helper_stop(&with);
}
END_TEST

/* ---- ownership ---- */

/* uid A (65534) and uid B (65533) with the same grants, under their own
 * name prefixes. */
static const char owners_policy[] =
        "[policy uid 65534]\n"
        "ops = tap_create bridge_create veth_create link_set link_delete firewall_apply "
        "firewall_remove bandwidth_set bandwidth_clear\n"
        "name_prefixes = pva\n"
        "[policy uid 65533]\n"
        "ops = tap_create bridge_create veth_create link_set link_delete firewall_apply "
        "firewall_remove bandwidth_set bandwidth_clear\n"
        "name_prefixes = pvb\n";

static void start_owners_helper(struct tu_helper *h, const char *extra)
{
        char conf[4096];

        snprintf(conf, sizeof(conf), TU_ALLOW NO_DIR "%s%s", owners_policy, extra ? extra : "");
        tu_helper_start(h, conf);
}

/* A changes nothing of B's or root's: not their interfaces, not their
 * limits, not their firewall owners; FirewallList shows each its own. */
START_TEST(test_a_uid_cannot_touch_another_uids_tap_or_roots_veth_and_bridge)
{
        struct tu_helper h;
        struct agent a, bb;
        struct reply r;
        nb_fw_ruleset *rs;
        nb_batch *b;
        nb_conn *rc;

        tu_private_netns();
        tu_veth("pvup0", "pvup0p"); /* made by someone else: no mark at all */
        start_owners_helper(&h, NULL);
        rc = root_conn(&h);
        b = nb_batch_new();
        rs = nb_fw_ruleset_new();
        nb_fw_add_allow_arp(rs);
        nb_batch_veth_create(b, "pvroot0", "pvroot0p", -1);
        nb_batch_bridge_create(b, "pvrootbr");
        nb_batch_firewall_apply(b, "pvrootfw", "pvroot0", rs, NB_FW_REPLACE);
        root_batch(rc, b);
        nb_fw_ruleset_free(rs);
        agent_start(&a, &h, NOBODY);
        agent_start(&bb, &h, OTHER);
        /* B's tap with a limit and an owner; A's own tap with an owner. */
        expect_ok(&bb, (struct cmd[]){tap("pvb0", true, true, OTHER, OTHER)});
        expect_ok(&bb, (struct cmd[]){op(A_BW_SET, "pvb0", NULL)});
        expect_ok(&bb, (struct cmd[]){op(A_FW_APPLY, "pvb0", "pvbfw")});
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){op(A_FW_APPLY, "pva0", "pvafw")});
        /* The kernel keeps who made what. */
        assert_alias("pvb0", "netbroker:uid=65533");
        assert_alias("pva0", "netbroker:uid=65534");
        assert_alias("pvroot0", "netbroker:uid=0");
        assert_alias("pvroot0p", "netbroker:uid=0");
        assert_alias("pvrootbr", "netbroker:uid=0");
        ck_assert_str_eq(tu_link_get("pvup0", "ifalias"), TU_ABSENT);
        /* B's tap. */
        expect_refused(&a, (struct cmd[]){op(A_SET, "pvb0", NULL)}, EPERM,
                       "policy: uid 65534 does not own interface pvb0");
        expect_refused(&a, (struct cmd[]){op(A_DELETE, "pvb0", NULL)}, EPERM,
                       "policy: uid 65534 does not own interface pvb0");
        expect_refused(&a, (struct cmd[]){op(A_BW_SET, "pvb0", NULL)}, EPERM,
                       "policy: uid 65534 does not own interface pvb0");
        expect_refused(&a, (struct cmd[]){op(A_BW_CLEAR, "pvb0", NULL)}, EPERM,
                       "policy: uid 65534 does not own interface pvb0");
        expect_refused(&a, (struct cmd[]){op(A_FW_APPLY, "pvb0", "pvanew")}, EPERM,
                       "policy: uid 65534 does not own interface pvb0");
        /* B's and root's firewall owners, even on A's own tap. */
        expect_refused(&a, (struct cmd[]){op(A_FW_REMOVE, NULL, "pvbfw")}, EPERM,
                       "policy: uid 65534 does not own firewall owner pvbfw (it is another "
                       "caller's)");
        expect_refused(&a, (struct cmd[]){op(A_FW_REMOVE, NULL, "pvrootfw")}, EPERM,
                       "does not own firewall owner pvrootfw (it is another caller's)");
        expect_refused(&a, (struct cmd[]){op(A_FW_APPLY, "pva0", "pvbfw")}, EPERM,
                       "does not own firewall owner pvbfw");
        /* Root's veth, bridge, and an interface nobody marked. */
        expect_refused(&a, (struct cmd[]){op(A_SET, "pvroot0", NULL)}, EPERM,
                       "does not own interface pvroot0");
        expect_refused(&a, (struct cmd[]){op(A_DELETE, "pvroot0p", NULL)}, EPERM,
                       "does not own interface pvroot0p");
        expect_refused(&a, (struct cmd[]){op(A_DELETE, "pvrootbr", NULL)}, EPERM,
                       "does not own interface pvrootbr");
        expect_refused(&a, (struct cmd[]){op(A_SET, "pvup0", NULL)}, EPERM,
                       "does not own interface pvup0");
        expect_refused(&a, (struct cmd[]){op(A_BW_SET, "pvroot0", NULL)}, EPERM,
                       "does not own interface pvroot0");
        /* Each sees its own owners only; root sees all. */
        r = agent_do(&a, (struct cmd[]){op(A_FW_LIST, NULL, NULL)});
        ck_assert_int_eq(r.status, 0);
        ck_assert_str_eq(r.list, " pvafw ");
        r = agent_do(&bb, (struct cmd[]){op(A_FW_LIST, NULL, NULL)});
        ck_assert_int_eq(r.status, 0);
        ck_assert_str_eq(r.list, " pvbfw ");
        /* And the counters of their own owners' rules only. */
        r = agent_do(&a, (struct cmd[]){op(A_FW_COUNTERS, NULL, NULL)});
        ck_assert_int_eq(r.status, 0);
        ck_assert_str_eq(r.list, " pvafw:rules ");
        r = agent_do(&bb, (struct cmd[]){op(A_FW_COUNTERS, NULL, NULL)});
        ck_assert_int_eq(r.status, 0);
        ck_assert_str_eq(r.list, " pvbfw:rules ");
        /* What is its own, each may change and remove. */
        expect_ok(&bb, (struct cmd[]){op(A_BW_CLEAR, "pvb0", NULL)});
        expect_ok(&bb, (struct cmd[]){op(A_FW_REMOVE, NULL, "pvbfw")});
        expect_ok(&bb, (struct cmd[]){op(A_DELETE, "pvb0", NULL)});
        ck_assert(!tu_link_exists("pvb0"));
        expect_ok(&a, (struct cmd[]){op(A_FW_REMOVE, NULL, "pvafw")});
        agent_stop(&a);
        agent_stop(&bb);
        ck_assert(tu_link_exists("pvroot0") && tu_link_exists("pvrootbr"));
        nb_close(rc);
        tu_helper_stop(&h);
}
END_TEST

/* ---- idempotent clean-up (issue 15) ----
 * What is already gone is a success that says so, for a caller that may
 * manage the name: a LinkDelete of a name in its name_prefixes, a
 * FirewallRemove of an owner nobody has. A name outside its prefixes (an
 * IFB's too) is refused as an existing interface not its own is, so the
 * answer tells it nothing of others' names; a caller whose policy lacks
 * the op is refused though nothing is there. */
START_TEST(test_clean_up_of_what_is_gone_succeeds_only_for_whom_may_manage_it)
{
        struct tu_helper h;
        struct agent a, cc;
        struct reply r;

        tu_private_netns();
        start_owners_helper(&h, "[policy uid 65532]\nops = tap_create\nname_prefixes = pvc\n");
        agent_start(&a, &h, NOBODY);
        agent_start(&cc, &h, 65532);
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){op(A_DELETE, "pva0", NULL)});
        ck_assert(!tu_link_exists("pva0"));
        r = agent_do(&a, (struct cmd[]){op(A_DELETE, "pva0", NULL)});
        ck_assert_msg(r.status == 0 && strstr(r.msg, "pva0 is already gone"), "%d %s", r.status,
                      r.msg);
        r = agent_do(&a, (struct cmd[]){op(A_DELETE, "pva7", NULL)});
        ck_assert_msg(r.status == 0 && strstr(r.msg, "pva7 is already gone"), "%d %s", r.status,
                      r.msg);
        r = agent_do(&a, (struct cmd[]){op(A_FW_REMOVE, NULL, "pvagone")});
        ck_assert_msg(r.status == 0 && strstr(r.msg, "owner pvagone is already gone"), "%d %s",
                      r.status, r.msg);
        /* Outside its prefixes: one answer, whether the name exists or not. */
        tu_veth("zzx0", "zzx0p");
        expect_refused(&a, (struct cmd[]){op(A_DELETE, "zzx0", NULL)}, EPERM,
                       "policy: uid 65534 does not own interface zzx0");
        expect_refused(&a, (struct cmd[]){op(A_DELETE, "zzy0", NULL)}, EPERM,
                       "policy: uid 65534 does not own interface zzy0");
        expect_refused(&a, (struct cmd[]){op(A_DELETE, "nbifb77", NULL)}, EPERM,
                       "policy: uid 65534 does not own interface nbifb77");
        /* Its policy grants neither op: refused, though nothing is there. */
        expect_refused(&cc, (struct cmd[]){op(A_DELETE, "pvc0", NULL)}, EPERM,
                       "policy: uid 65532 may not run link_delete");
        expect_refused(&cc, (struct cmd[]){op(A_FW_REMOVE, NULL, "pvcgone")}, EPERM,
                       "policy: uid 65532 may not run firewall_remove");
        agent_stop(&a);
        agent_stop(&cc);
        tu_helper_stop(&h);
}
END_TEST

/* The firewall comment records the creator's uid; a comment of an older
 * helper (no uid=) counts as root's. */
START_TEST(test_firewall_owner_comment_records_its_creator)
{
        struct tu_helper h;
        struct agent a;
        char *out;

        tu_private_netns();
        start_owners_helper(&h, NULL);
        agent_start(&a, &h, NOBODY);
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){op(A_FW_APPLY, "pva0", "pvafw")});
        out = tu_sh("nft list chain netdev netbroker pvafw/from");
        ck_assert_msg(strstr(out, " uid=65534\""), "%s", out);
        free(out);
        /* An owner written the old way, without uid=: root's. */
        free(tu_sh("nft add chain netdev netbroker 'pvaold/from' '{ comment \"netbroker "
                   "0123456789abcdef0123456789abcdef pva0 0\"; }'"));
        expect_refused(&a, (struct cmd[]){op(A_FW_REMOVE, NULL, "pvaold")}, EPERM,
                       "pvaold (it is another caller's)");
        agent_stop(&a);
        tu_helper_stop(&h);
}
END_TEST

START_TEST(test_interfaces_join_only_listed_bridges_or_their_own)
{
        struct tu_helper h;
        struct agent a, bb;
        nb_batch *b;
        nb_conn *rc;

        tu_private_netns();
        /* A's section lists pvlisted; root makes it and pvother. */
        tu_helper_start(&h, TU_ALLOW NO_DIR "[policy uid 65534]\n"
                                            "ops = tap_create bridge_create link_set\n"
                                            "bridges = pvlisted\n"
                                            "name_prefixes = pva\n"
                                            "[policy uid 65533]\n"
                                            "ops = bridge_create\n"
                                            "name_prefixes = pvb\n");
        rc = root_conn(&h);
        b = nb_batch_new();
        nb_batch_bridge_create(b, "pvlisted");
        nb_batch_bridge_create(b, "pvother");
        root_batch(rc, b);
        agent_start(&a, &h, NOBODY);
        agent_start(&bb, &h, OTHER);
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){op(A_BRIDGE, "pvabr", NULL)});
        expect_ok(&bb, (struct cmd[]){op(A_BRIDGE, "pvbbr", NULL)});
        expect_refused(&a, (struct cmd[]){op(A_SET, "pva0", "pvother")}, EPERM,
                       "policy: uid 65534 may not attach pva0 to pvother (not in 'bridges' of "
                       "[policy uid 65534]");
        expect_refused(&a, (struct cmd[]){op(A_SET, "pva0", "pvbbr")}, EPERM,
                       "may not attach pva0 to pvbbr");
        ck_assert_str_eq(tu_link_get("pva0", "master"), TU_ABSENT);
        expect_ok(&a, (struct cmd[]){op(A_SET, "pva0", "pvlisted")});
        ck_assert_str_eq(tu_link_get("pva0", "master"), "pvlisted");
        expect_ok(&a, (struct cmd[]){op(A_SET, "pva0", "pvabr")});
        ck_assert_str_eq(tu_link_get("pva0", "master"), "pvabr");
        agent_stop(&a);
        agent_stop(&bb);
        nb_close(rc);
        tu_helper_stop(&h);
}
END_TEST

/* A LinkSet the kernel refuses part-way (its own veth cannot be a master;
 * do_setlink() has set the MAC and the MTU by then) changes nothing: the
 * helper puts back what the kernel took, and the op says the kernel's
 * errno. Before, the MAC and the MTU stayed. */
START_TEST(test_a_link_set_the_kernel_refuses_part_way_changes_nothing)
{
        struct tu_helper h;
        struct agent a;
        struct cmd set = op(A_SET, "pvabr", "pvav0");
        struct reply r;
        char mac[32], *before, *after;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW NO_DIR "[policy uid 65534]\n"
                                            "ops = bridge_create veth_create link_set\n"
                                            "name_prefixes = pva\n");
        agent_start(&a, &h, NOBODY);
        expect_ok(&a, (struct cmd[]){op(A_BRIDGE, "pvabr", NULL)});
        expect_ok(&a, (struct cmd[]){op(A_VETH, "pvav0", "pvav1")});
        /* A device's first time up gives it its qdisc, which stays (A_SET
         * brings it up): once up before, the links show the op alone. */
        free(tu_sh("ip link set pvabr up && ip link set pvabr down"));
        snprintf(mac, sizeof(mac), "%s", tu_link_get("pvabr", "address"));
        before = tu_sh("ip -j link show");
        snprintf(set.mac, sizeof(set.mac), "52:54:00:de:ad:01");
        set.mtu = 1280;
        r = agent_do(&a, &set);
        ck_assert_msg(r.status == -EOPNOTSUPP, "status %d (%s)", r.status, r.msg);
        ck_assert_msg(strstr(r.msg, "link set: cannot change pvabr: Operation not supported"), "%s",
                      r.msg);
        ck_assert_str_eq(tu_link_get("pvabr", "address"), mac);
        ck_assert_str_eq(tu_link_get("pvabr", "mtu"), "1500");
        ck_assert_str_eq(tu_link_get("pvabr", "master"), TU_ABSENT);
        /* Flags, MTU, address and master of every link as they were. (Not
         * the bridge's STP id: the kernel keeps the address it took as one
         * set by hand, which no request undoes; see netbrokerd(8).) */
        after = tu_sh("ip -j link show");
        if (strcmp(before, after) != 0)
                fprintf(stderr, "links before:\n%s\nlinks after:\n%s\n", before, after);
        ck_assert_msg(strcmp(before, after) == 0, "the links changed (above)");
        free(before);
        free(after);
        agent_stop(&a);
        tu_helper_stop(&h);
}
END_TEST

/* A bridge reports its ports with AF_BRIDGE messages of the link types,
 * RTM_DELLINK when one leaves it: neither the owner a port carries nor the
 * policer of its outbound limit is lost by joining or leaving a bridge. */
START_TEST(test_owner_and_limit_of_an_interface_survive_joining_and_leaving_a_bridge)
{
        struct tu_helper h;
        struct agent a;
        char chain[16], *has;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW NO_DIR "[policy uid 65534]\n"
                                            "ops = tap_create bridge_create link_set link_delete "
                                            "bandwidth_set\n"
                                            "name_prefixes = pva\n");
        agent_start(&a, &h, NOBODY);
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){op(A_BRIDGE, "pvabr", NULL)});
        expect_ok(&a, (struct cmd[]){op(A_BW_SET, "pva0", NULL)});
        snprintf(chain, sizeof(chain), "nbbw%s", tu_link_get("pva0", "ifindex"));
        has = tu_sh("nft list chain netdev netbroker_bw %s >/dev/null 2>&1 && echo yes", chain);
        ck_assert_str_eq(has, "yes\n");
        free(has);
        expect_ok(&a, (struct cmd[]){op(A_SET, "pva0", "pvabr")});
        /* Still its own: it may change it again. */
        expect_ok(&a, (struct cmd[]){op(A_SET, "pva0", "pvabr")});
        free(tu_sh("ip link set pva0 nomaster"));
        usleep(100000);
        expect_ok(&a, (struct cmd[]){op(A_SET, "pva0", NULL)});
        has = tu_sh("nft list chain netdev netbroker_bw %s >/dev/null 2>&1 && echo yes", chain);
        ck_assert_msg(strcmp(has, "yes\n") == 0, "%s went when pva0 left its bridge", chain);
        free(has);
        expect_ok(&a, (struct cmd[]){op(A_DELETE, "pva0", NULL)});
        agent_stop(&a);
        tu_helper_stop(&h);
}
END_TEST

/* ---- a port of root's bridge ---- */

#define PORT_POLICY                                                                                \
        TU_ALLOW NO_DIR "[policy uid 65534]\n"                                                     \
                        "ops = tap_create link_set\n"                                              \
                        "bridges = pvlisted pvempty pvhand\n"                                      \
                        "name_prefixes = pva\n"

/* Root's bridge pvlisted with root's port pvr0 (02:..:10, so the bridge's
 * address too) whose guest end pvr0p (02:..:20) has spoken: the bridge
 * learned it on pvr0. */
static void roots_bridge_with_a_guest(void)
{
        free(tu_sh("ip link add pvlisted type bridge && "
                   "ip link add pvr0 type veth peer name pvr0p && "
                   "ip link set pvr0 address 02:00:00:00:00:10 && "
                   "ip link set pvr0p address 02:00:00:00:00:20 && "
                   "ip link set pvr0 master pvlisted && ip link set pvlisted up && "
                   "ip link set pvr0 up && ip link set pvr0p up"));
        /* Its IPv6 duplicate address detection and MLD report, from
         * 02:..:20 through pvr0. */
        for (int i = 0; i < 50 && !fdb_has("02:00:00:00:00:20", "pvr0"); i++)
                usleep(100000);
        ck_assert_msg(fdb_has("02:00:00:00:00:20", "pvr0"), "pvlisted did not learn pvr0p");
        ck_assert_str_eq(tu_link_get("pvlisted", "address"), "02:00:00:00:00:10");
}

static struct cmd set_port(const char *name, const char *master, const char *mac, unsigned mtu)
{
        struct cmd m = op(A_SET, name, master);

        snprintf(m.mac, sizeof(m.mac), "%s", mac ? mac : "");
        m.mtu = mtu;
        return m;
}

/* A caller's port in root's bridge with the address of root's guest (or
 * of the bridge itself) would be a local, permanent entry of the bridge,
 * which wins over the learned one: the host's traffic to that guest would
 * go to the caller's tap. Refused on joining and on a port's change, and
 * the bridge's forwarding database still has the guest behind pvr0. */
START_TEST(test_a_port_of_roots_bridge_takes_no_address_the_bridge_knows)
{
        struct tu_helper h;
        struct agent a;

        tu_private_netns();
        tu_helper_start(&h, PORT_POLICY);
        roots_bridge_with_a_guest();
        agent_start(&a, &h, NOBODY);
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_refused(&a, (struct cmd[]){set_port("pva0", "pvlisted", "02:00:00:00:00:20", 0)},
                       EPERM,
                       "may not give pva0 the address 02:00:00:00:00:20 in bridge pvlisted, not "
                       "its own: the bridge knows it already");
        expect_refused(&a, (struct cmd[]){set_port("pva0", "pvlisted", "02:00:00:00:00:10", 0)},
                       EPERM, "the bridge knows it already");
        ck_assert_str_eq(tu_link_get("pva0", "master"), TU_ABSENT);
        ck_assert(fdb_has("02:00:00:00:00:20", "pvr0") && !fdb_has("02:00:00:00:00:20", "pva0"));
        /* An address of its own joins, and the port may not take the
         * guest's afterwards either. */
        expect_ok(&a, (struct cmd[]){set_port("pva0", "pvlisted", "02:00:00:00:00:30", 0)});
        ck_assert_str_eq(tu_link_get("pva0", "master"), "pvlisted");
        expect_refused(&a, (struct cmd[]){set_port("pva0", NULL, "02:00:00:00:00:20", 0)}, EPERM,
                       "the bridge knows it already");
        ck_assert(fdb_has("02:00:00:00:00:20", "pvr0") && !fdb_has("02:00:00:00:00:20", "pva0"));
        ck_assert_str_eq(tu_link_get("pva0", "address"), "02:00:00:00:00:30");
        agent_stop(&a);
        tu_helper_stop(&h);
}
END_TEST

/* A bridge takes its lowest port's MTU and, unless its address was set by
 * hand, its lowest port's address: a caller's port may lower neither, nor
 * become the address of root's bridge. A bridge without ports has its
 * address pinned (set again by hand) before the caller's port joins it;
 * one whose address was set by hand takes any address of a port. */
START_TEST(test_a_port_of_roots_bridge_changes_neither_its_mtu_nor_its_address)
{
        struct tu_helper h;
        struct agent a;
        char empty_mac[32];

        tu_private_netns();
        tu_helper_start(&h, PORT_POLICY);
        roots_bridge_with_a_guest();
        agent_start(&a, &h, NOBODY);
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){set_port("pva0", NULL, "02:00:00:00:00:30", 1400)});
        expect_refused(&a, (struct cmd[]){set_port("pva0", "pvlisted", NULL, 0)}, EPERM,
                       "may not give pva0 an MTU of 1400 in bridge pvlisted, not its own, whose "
                       "MTU is 1500");
        expect_refused(&a, (struct cmd[]){set_port("pva0", "pvlisted", "02:00:00:00:00:05", 1500)},
                       EPERM, "the bridge takes its lowest port's address");
        ck_assert_str_eq(tu_link_get("pvlisted", "address"), "02:00:00:00:00:10");
        expect_ok(&a, (struct cmd[]){set_port("pva0", "pvlisted", NULL, 1500)});
        expect_refused(&a, (struct cmd[]){set_port("pva0", NULL, NULL, 1400)}, EPERM,
                       "may not give pva0 an MTU of 1400 in bridge pvlisted");
        expect_refused(&a, (struct cmd[]){set_port("pva0", NULL, "02:00:00:00:00:05", 0)}, EPERM,
                       "the bridge takes its lowest port's address");
        ck_assert_str_eq(tu_link_get("pvlisted", "mtu"), "1500");
        ck_assert_str_eq(tu_link_get("pvlisted", "address"), "02:00:00:00:00:10");
        /* Above the bridge's: its own. */
        expect_ok(&a, (struct cmd[]){set_port("pva0", NULL, "02:00:00:00:00:31", 9000)});
        ck_assert_str_eq(tu_link_get("pvlisted", "address"), "02:00:00:00:00:10");

        /* Without ports: pinned, then the port's lower address is not the
         * bridge's. */
        free(tu_sh("ip link add pvempty type bridge && ip link set pvempty up"));
        snprintf(empty_mac, sizeof(empty_mac), "%s", tu_link_get("pvempty", "address"));
        expect_ok(&a, (struct cmd[]){tap("pva1", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){set_port("pva1", "pvempty", "02:00:00:00:00:01", 0)});
        ck_assert_str_eq(tu_link_get("pva1", "master"), "pvempty");
        ck_assert_str_eq(tu_link_get("pvempty", "address"), empty_mac);

        /* Set by hand: it stays whatever its ports' addresses. */
        free(tu_sh("ip link add pvhand type bridge && ip link set pvhand address "
                   "02:00:00:00:00:40 && ip link add pvr1 type veth peer name pvr1p && "
                   "ip link set pvr1 address 02:00:00:00:00:50 && ip link set pvr1 master "
                   "pvhand && ip link set pvhand up && ip link set pvr1 up"));
        expect_ok(&a, (struct cmd[]){tap("pva2", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){set_port("pva2", "pvhand", "02:00:00:00:00:06", 0)});
        ck_assert_str_eq(tu_link_get("pvhand", "address"), "02:00:00:00:00:40");
        agent_stop(&a);
        tu_helper_stop(&h);
}
END_TEST

/* passthru hands the whole uplink to the caller: only when named, and
 * only on a listed parent. */
START_TEST(test_passthru_macvtap_only_when_granted_and_only_on_listed_parents)
{
        struct tu_helper h;
        struct agent a, bb;

        tu_private_netns();
        tu_veth("pvup0", "pvup0p");
        tu_veth("pvup1", "pvup1p");
        tu_veth("pvup2", "pvup2p");
        tu_helper_start(&h, TU_ALLOW NO_DIR "[policy uid 65534]\n"
                                            "ops = macvtap_create macvlan_create\n"
                                            "parents = pvup0\n"
                                            "name_prefixes = pva\n"
                                            "[policy uid 65533]\n"
                                            "ops = macvtap_create\n"
                                            "parents = pvup2\n"
                                            "macvlan_modes = passthru\n"
                                            "name_prefixes = pvb\n");
        agent_start(&a, &h, NOBODY);
        agent_start(&bb, &h, OTHER);
        expect_refused(&a, (struct cmd[]){macv(A_MACVTAP, "pva0", "pvup0", NB_MACVLAN_PASSTHRU)},
                       EPERM,
                       "policy: uid 65534 may not make a macvtap in mode passthru (not in "
                       "'macvlan_modes' of [policy uid 65534])");
        expect_refused(&a, (struct cmd[]){macv(A_MACVTAP, "pva0", "pvup1", NB_MACVLAN_BRIDGE)},
                       EPERM,
                       "policy: uid 65534 may not make a macvtap on pvup1 (not in 'parents'");
        expect_refused(&a, (struct cmd[]){macv(A_MACVLAN, "pva1", "pvup2", NB_MACVLAN_VEPA)}, EPERM,
                       "may not make a macvlan on pvup2");
        expect_refused(&bb, (struct cmd[]){macv(A_MACVTAP, "pvb0", "pvup2", NB_MACVLAN_BRIDGE)},
                       EPERM, "mode bridge (not in 'macvlan_modes'");
        expect_ok(&a, (struct cmd[]){macv(A_MACVTAP, "pva0", "pvup0", NB_MACVLAN_VEPA)});
        ck_assert_str_eq(tu_link_get("pva0", "linkinfo.info_data.mode"), "vepa");
        expect_ok(&bb, (struct cmd[]){macv(A_MACVTAP, "pvb0", "pvup2", NB_MACVLAN_PASSTHRU)});
        ck_assert_str_eq(tu_link_get("pvb0", "linkinfo.info_data.mode"), "passthru");
        assert_alias("pvb0", "netbroker:uid=65533");
        agent_stop(&a);
        agent_stop(&bb);
        tu_helper_stop(&h);
}
END_TEST

/* A persistent tap outlives the caller, and its owner may open it: only
 * for the caller's own uid and one of its groups. */
START_TEST(test_persistent_or_owned_tap_only_for_the_callers_own_uid_and_groups)
{
        static const gid_t group[] = {GROUP};
        struct tu_helper h;
        struct agent a, g;

        tu_private_netns();
        start_owners_helper(&h, "[policy gid 4243]\nops = tap_create\nname_prefixes = pvg\n");
        agent_start(&a, &h, NOBODY);
        agent_start_ex(&g, &h, 4000, 4000, group, 1, false);
        expect_refused(&a, (struct cmd[]){tap("pva0", true, true, 0, 0)}, EPERM,
                       "policy: uid 65534 may give a tap only to itself (owner uid 65534 and one "
                       "of its groups), not to 0:0");
        expect_refused(&a, (struct cmd[]){tap("pva0", true, false, 0, 0)}, EPERM,
                       "may make a persistent tap only with itself as its owner");
        expect_refused(&a, (struct cmd[]){tap("pva0", false, true, NOBODY, 0)}, EPERM,
                       "not to 65534:0");
        expect_refused(&a, (struct cmd[]){tap("pva0", true, true, OTHER, NOBODY)}, EPERM,
                       "not to 65533:65534");
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        ck_assert_str_eq(tu_link_get("pva0", "linkinfo.info_data.user"), "nobody");
        assert_alias("pva0", "netbroker:uid=65534");
        /* A supplementary group is one of its groups. */
        expect_ok(&g, (struct cmd[]){tap("pvg0", true, true, 4000, GROUP)});
        ck_assert_str_eq(tu_link_get("pvg0", "linkinfo.info_data.group"), "4243");
        agent_stop(&a);
        agent_stop(&g);
        tu_helper_stop(&h);
}
END_TEST

/* A veth peer goes only into a network namespace whose user namespace the
 * caller owns, and only with 'netns = own'. */
START_TEST(test_veth_peer_only_into_a_namespace_the_caller_owns)
{
        struct tu_helper h;
        struct agent a, own, bb;
        char path[64], *out;
        int roots;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW NO_DIR "[policy uid 65534]\n"
                                            "ops = veth_create\n"
                                            "name_prefixes = pva\n"
                                            "netns = own\n"
                                            "[policy uid 65533]\n"
                                            "ops = veth_create\n"
                                            "name_prefixes = pvb\n");
        /* Root's namespace: the agents inherit the fd. */
        roots = tu_new_netns_fd();
        agent_start(&a, &h, NOBODY);
        agent_start_ex(&own, &h, NOBODY, NOBODY, NULL, 0, true);
        agent_start_ex(&bb, &h, OTHER, OTHER, NULL, 0, true);
        expect_refused(&a, (struct cmd[]){veth_into("pva0", "eth0", roots)}, EPERM,
                       "policy: uid 65534 does not own the network namespace of fd 0 (its user "
                       "namespace belongs to uid 0)");
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), roots);
        out = tu_sh("nsenter --net=%s ip -j link show", path);
        ck_assert_msg(!strstr(out, "eth0"), "%s", out);
        free(out);
        expect_refused(&bb, (struct cmd[]){veth_into("pvb0", "eth0", NETNS_OWN)}, EPERM,
                       "policy: uid 65533 may not move a veth peer into another network namespace "
                       "(no 'netns = own' in [policy uid 65533])");
        expect_ok(&own, (struct cmd[]){veth_into("pva0", "eth0", NETNS_OWN)});
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)own.pid);
        ck_assert_str_eq(tu_link_get_ns(path, "eth0", "linkinfo.info_kind"), "veth");
        assert_alias("pva0", "netbroker:uid=65534");
        agent_stop(&a);
        agent_stop(&own);
        agent_stop(&bb);
        close(roots);
        tu_helper_stop(&h);
}
END_TEST

/* A helper started later reads every owner back from the kernel, and
 * counts them against max_devices. */
START_TEST(test_ownership_survives_a_helper_restart)
{
        struct tu_helper h;
        struct agent a, bb;
        char conf[4096];

        tu_private_netns();
        snprintf(conf, sizeof(conf),
                 TU_ALLOW NO_DIR "%s"
                                 "[policy uid 65533]\n"
                                 "ops = tap_create link_set\n"
                                 "name_prefixes = pvb\n",
                 "[policy uid 65534]\n"
                 "ops = tap_create bridge_create link_set link_delete\n"
                 "name_prefixes = pva\n"
                 "max_devices = 2\n");
        tu_helper_start(&h, conf);
        agent_start(&a, &h, NOBODY);
        agent_start(&bb, &h, OTHER);
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){op(A_BRIDGE, "pvabr", NULL)});
        expect_ok(&bb, (struct cmd[]){tap("pvb0", true, true, OTHER, OTHER)});
        agent_stop(&a);
        agent_stop(&bb);
        tu_helper_stop(&h);
        tu_helper_start(&h, conf);
        agent_start(&a, &h, NOBODY);
        expect_ok(&a, (struct cmd[]){op(A_SET, "pva0", "pvabr")});
        ck_assert_str_eq(tu_link_get("pva0", "master"), "pvabr");
        expect_refused(&a, (struct cmd[]){op(A_SET, "pvb0", NULL)}, EPERM,
                       "does not own interface pvb0");
        expect_refused(&a, (struct cmd[]){tap("pva1", true, true, NOBODY, NOBODY)}, EDQUOT,
                       "policy: uid 65534 may own at most 2 interfaces (max_devices of [policy "
                       "uid 65534]): it owns 2, and this batch would make 1 more");
        assert_alias("pva0", "netbroker:uid=65534");
        assert_alias("pvb0", "netbroker:uid=65533");
        agent_stop(&a);
        tu_helper_stop(&h);
}
END_TEST

/* Names start with a granted prefix; what a caller owns plus what its
 * batch makes stays within max_devices (a veth here is two). */
START_TEST(test_names_and_device_count_stay_within_the_policy)
{
        struct tu_helper h;
        struct agent a;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW NO_DIR "[policy uid 65534]\n"
                                            "ops = tap_create veth_create link_delete\n"
                                            "name_prefixes = pva pvx\n"
                                            "max_devices = 3\n");
        agent_start(&a, &h, NOBODY);
        expect_refused(&a, (struct cmd[]){tap("vnet%d", false, false, 0, 0)}, EPERM,
                       "policy: uid 65534 may not create interface vnet%d (it starts with none of "
                       "'name_prefixes' of [policy uid 65534]: pva pvx)");
        expect_refused(&a, (struct cmd[]){op(A_VETH, "pva0", "peer0")}, EPERM,
                       "may not create interface peer0");
        expect_ok(&a, (struct cmd[]){op(A_VETH, "pva0", "pvx0")});
        expect_ok(&a, (struct cmd[]){tap("pva%d", true, true, NOBODY, NOBODY)});
        expect_refused(&a, (struct cmd[]){tap("pva%d", true, true, NOBODY, NOBODY)}, EDQUOT,
                       "it owns 3, and this batch would make 1 more");
        expect_ok(&a, (struct cmd[]){op(A_DELETE, "pva1", NULL)});
        expect_ok(&a, (struct cmd[]){tap("pva%d", true, true, NOBODY, NOBODY)});
        agent_stop(&a);
        tu_helper_stop(&h);
}
END_TEST

/* Granting Exec of a program is per program: on exec_allow is not enough. */
START_TEST(test_exec_runs_only_the_programs_the_policy_names)
{
        struct tu_helper h;
        struct agent a, root;
        struct reply r;

        tu_private_netns();
        tu_helper_start(&h, TU_ALLOW NO_DIR "[policy uid 65534]\n"
                                            "ops = exec\n"
                                            "exec = /bin/true\n");
        agent_start(&a, &h, NOBODY);
        agent_start(&root, &h, 0);
        expect_refused(&a, (struct cmd[]){op(A_EXEC, "/bin/sh", NULL)}, EPERM,
                       "policy: uid 65534 may not run /bin/sh (not in 'exec' of [policy uid "
                       "65534])");
        expect_ok(&a, (struct cmd[]){op(A_EXEC, "/bin/true", NULL)});
        r = agent_do(&root, (struct cmd[]){op(A_EXEC, "/bin/false", NULL)});
        ck_assert_msg(r.status == -EIO, "%s", r.msg); /* it ran, and said no */
        agent_stop(&a);
        agent_stop(&root);
        tu_helper_stop(&h);
}
END_TEST

/* ---- the IFBs' mark ---- */

/* At start-up the sweep deletes IFBs that carry the helper's mark and
 * shape nothing any more, and nothing else: not a foreign nbifb99, not a
 * foreign device in the link group the helper deletes IFBs by. */
START_TEST(test_sweep_and_flush_delete_only_ifbs_the_helper_marked)
{
        struct tu_helper h;
        nb_conn *c;
        nb_batch *b;
        nb_rate rate = {.size = sizeof(nb_rate), .average = 1000};
        char ifb[16];
        int ifindex;

        tu_private_netns();
        free(tu_sh("ip link add nbifb99 type ifb"));
        tu_veth("pvforeign", "pvforeignp");
        free(tu_sh("ip link set pvforeign group 0x4e424446"));
        /* What a helper killed at the wrong moment leaves behind. */
        free(tu_sh("ip link add nbifb98 type ifb && ip link set nbifb98 alias netbroker:ifb"));
        free(tu_sh("ip link add nbifb97 type ifb && ip link set nbifb97 alias netbroker:ifb "
                   "group 0x4e424446"));
        tu_helper_start(&h, TU_ALLOW NO_DIR);
        ck_assert(tu_link_exists("nbifb99"));
        ck_assert_str_eq(tu_link_get("pvforeign", "group"), "1312965702");
        ck_assert(!tu_link_exists("nbifb98"));
        ck_assert(!tu_link_exists("nbifb97"));
        /* A clear deletes an older helper's IFB (a set makes none); the
         * stranger in the group stays. */
        tu_veth("pvlim", "pvlimp");
        ifindex = atoi(tu_link_get("pvlim", "ifindex"));
        snprintf(ifb, sizeof(ifb), "nbifb%d", ifindex);
        c = root_conn(&h);
        b = nb_batch_new();
        nb_batch_bandwidth_set(b, "pvlim", &rate, &rate);
        root_batch(c, b);
        ck_assert(!tu_link_exists(ifb));
        free(tu_sh("ip link add %s type ifb && ip link set %s alias netbroker:ifb", ifb, ifb));
        assert_alias(ifb, "netbroker:ifb");
        b = nb_batch_new();
        nb_batch_bandwidth_clear(b, "pvlim");
        root_batch(c, b);
        ck_assert(!tu_link_exists(ifb));
        ck_assert(tu_link_exists("pvforeign"));
        ck_assert(tu_link_exists("nbifb99"));
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST

/* An interface named like an older helper's IFB of another and made by
 * someone else is never taken for it (its maker would read that
 * interface's traffic), nor deleted: a limit makes no IFB any more. */
START_TEST(test_a_device_named_like_an_ifb_is_not_used_as_one)
{
        struct tu_helper h;
        nb_conn *c;
        nb_batch *b;
        nb_results *res = NULL;
        nb_rate rate = {.size = sizeof(nb_rate), .average = 1000};
        char qdisc[32], tap[16];
        int ifindex;

        tu_private_netns();
        tu_veth("pvlim", "pvlimp");
        ifindex = atoi(tu_link_get("pvlim", "ifindex"));
        snprintf(tap, sizeof(tap), "nbifb%d", ifindex);
        free(tu_sh("ip tuntap add dev %s mode tap", tap));
        snprintf(qdisc, sizeof(qdisc), "%s", tu_link_get("pvlim", "qdisc"));
        tu_helper_start(&h, TU_ALLOW NO_DIR);
        c = root_conn(&h);
        b = nb_batch_new();
        nb_batch_bandwidth_set(b, "pvlim", NULL, &rate);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_msg(nb_result_status(res, 0) == 0, "%s", nb_result_message(res, 0));
        ck_assert_str_eq(tu_link_get("pvlim", "qdisc"), qdisc);
        nb_results_free(res);
        nb_batch_free(b);
        b = nb_batch_new();
        nb_batch_bandwidth_clear(b, "pvlim");
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        nb_results_free(res);
        nb_batch_free(b);
        ck_assert_str_eq(tu_link_get(tap, "linkinfo.info_kind"), "tun");
        nb_close(c);
        tu_helper_stop(&h);
}
END_TEST

/* ---- a uid's interfaces change none of the host's routes (review F5) ----
 * Its interfaces are the host's own: a Router Advertisement it writes into
 * its tap would install a default route, on-link prefixes and an address
 * for the whole host, which only root may add. */

static const char ra_policy[] = TU_ALLOW NO_DIR
        "[policy uid 65534]\n"
        "ops = tap_create bridge_create veth_create macvlan_create macvtap_create link_set "
        "sysctl_set\n"
        "parents = pvup0 pvsmall0\n"
        "name_prefixes = pva\n"
        "netns = own\n";

/* A host that takes Router Advertisements, as the kernel's defaults
 * make one: not forwarding, and new interfaces accept them. In the
 * test's own namespace. */
static void take_router_advertisements(void)
{
        free(tu_sh("sysctl -qw net.ipv6.conf.all.forwarding=0 net.ipv6.conf.default.accept_ra=1 "
                   "net.ipv6.conf.default.autoconf=1 net.ipv6.conf.default.accept_redirects=1"));
}

/* What the RA of ra_frame() made on dev: its routes and global addresses
 * (caller frees). */
static char *ipv6_of(const char *dev)
{
        return tu_sh("ip -6 -j route show dev %s; ip -6 -j addr show dev %s scope global", dev,
                     dev);
}

static bool has_ra_routes(const char *text)
{
        return strstr(text, "\"default\"") || strstr(text, "2000::/3") ||
               strstr(text, "2001:db8:5:");
}

/* Within 3 s, dev has the default route, the prefixes and the address. */
static void expect_ra_taken(const char *dev)
{
        char *ip = NULL;

        for (int i = 0; i < 60; i++, usleep(50000)) {
                free(ip);
                ip = ipv6_of(dev);
                if (strstr(ip, "\"default\"") && strstr(ip, "2000::/3") &&
                    strstr(ip, "2001:db8:5:"))
                        break;
        }
        ck_assert_msg(strstr(ip, "\"default\"") && strstr(ip, "2000::/3") &&
                              strstr(ip, "2001:db8:5:"),
                      "root's %s did not take the Router Advertisement: %s", dev, ip);
        free(ip);
}

static void expect_no_ra_routes(const char *dev)
{
        char *ip = ipv6_of(dev);

        ck_assert_msg(!has_ra_routes(ip),
                      "uid 65534's Router Advertisement through %s changed the host: %s", dev, ip);
        free(ip);
}

START_TEST(test_router_advertisements_through_a_uids_tap_or_bridge_change_no_route)
{
        struct tu_helper h;
        struct agent a;
        nb_link_change up = NB_LINK_CHANGE_INIT, port = NB_LINK_CHANGE_INIT;
        nb_results *res;
        nb_batch *b;
        nb_conn *rc;

        tu_private_netns();
        take_router_advertisements();
        tu_helper_start(&h, ra_policy);
        agent_start(&a, &h, NOBODY);
        /* Its tap, and a tap in its own bridge: each up, the RA written
         * into it ten times over 2 s (held until the agent stops). */
        expect_ok(&a, (struct cmd[]){op(A_BRIDGE, "pvabr", NULL)});
        expect_ok(&a, (struct cmd[]){op(A_SET, "pvabr", NULL)});
        expect_ok(&a, (struct cmd[]){op(A_RA, "pva0", NULL)});
        expect_ok(&a, (struct cmd[]){op(A_RA, "pva1", "pvabr")});
        /* The same frames through root's: its policy, the kernel's
         * defaults, so the frames are ones the kernel takes. */
        rc = root_conn(&h);
        up.up = 1;
        port.up = 1;
        port.master = "pvrbr";
        b = nb_batch_new();
        nb_batch_tap_create(b, "pvr0", NULL);
        nb_batch_link_set(b, "pvr0", &up);
        nb_batch_bridge_create(b, "pvrbr");
        nb_batch_link_set(b, "pvrbr", &up);
        nb_batch_tap_create(b, "pvr1", NULL);
        nb_batch_link_set(b, "pvr1", &port);
        res = tu_submit_ok(rc, b);
        ck_assert_int_eq(write_ras(nb_result_take_fd(res, 0, 0)), 0);
        ck_assert_int_eq(write_ras(nb_result_take_fd(res, 4, 0)), 0);
        expect_ra_taken("pvr0");
        expect_ra_taken("pvrbr");
        /* Long after the kernel took root's, nothing of the caller's. */
        expect_no_ra_routes("pva0");
        expect_no_ra_routes("pva1");
        expect_no_ra_routes("pvabr");
        agent_stop(&a);
        nb_results_free(res);
        nb_close(rc);
        tu_helper_stop(&h);
}
END_TEST

static unsigned conf_of(const char *dev, const char *leaf)
{
        char path[128];
        unsigned v = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/%s", dev, leaf);
        f = fopen(path, "re");
        ck_assert_msg(f && fscanf(f, "%u", &v) == 1, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        return v;
}

static void expect_locked(const char *dev)
{
        static const char *const leaves[] = {"accept_ra", "autoconf", "accept_redirects"};

        for (size_t i = 0; i < sizeof(leaves) / sizeof(*leaves); i++)
                ck_assert_msg(conf_of(dev, leaves[i]) == 0, "%s of uid 65534's %s is %u", leaves[i],
                              dev, conf_of(dev, leaves[i]));
}

static struct cmd mtu_of(const char *dev, unsigned mtu)
{
        struct cmd m = op(A_SET, dev, NULL);

        m.mtu = mtu;
        return m;
}

static struct cmd sysctl_cmd(const char *dev, const char *name, unsigned value)
{
        struct cmd m = op(A_SYSCTL, dev, name);

        m.value = value;
        return m;
}

/* Every kind of interface a uid makes takes no Router Advertisement, no
 * autoconf address and no Redirect, and keeps it so: sysctl_set turns
 * accept_ra off only, and no MTU below 1280 (the kernel drops the
 * interface's IPv6 settings there, and gives it its defaults back above).
 * Root's are as the kernel's defaults make them, and root may change
 * them. */
START_TEST(test_every_interface_a_uid_makes_keeps_router_advertisements_off)
{
        static const char *const devs[] = {"pva0",  "pvabr", "pvav0", "pvav1",
                                           "pvaw0", "pvam0", "pvat0"};
        struct tu_helper h;
        struct agent a;
        nb_batch *b;
        nb_conn *rc;

        tu_private_netns();
        take_router_advertisements();
        tu_veth("pvup0", "pvup0p");
        tu_veth("pvsmall0", "pvsmall0p");
        free(tu_sh("ip link set pvsmall0 mtu 1000"));
        tu_helper_start(&h, ra_policy);
        agent_start_ex(&a, &h, NOBODY, NOBODY, NULL, 0, true);
        expect_ok(&a, (struct cmd[]){tap("pva0", true, true, NOBODY, NOBODY)});
        expect_ok(&a, (struct cmd[]){op(A_BRIDGE, "pvabr", NULL)});
        expect_ok(&a, (struct cmd[]){op(A_VETH, "pvav0", "pvav1")});
        expect_ok(&a, (struct cmd[]){veth_into("pvaw0", "eth0", NETNS_OWN)});
        expect_ok(&a, (struct cmd[]){macv(A_MACVLAN, "pvam0", "pvup0", NB_MACVLAN_BRIDGE)});
        expect_ok(&a, (struct cmd[]){macv(A_MACVTAP, "pvat0", "pvup0", NB_MACVLAN_BRIDGE)});
        for (size_t i = 0; i < sizeof(devs) / sizeof(*devs); i++)
                expect_locked(devs[i]);
        /* Root's: the kernel's defaults. */
        rc = root_conn(&h);
        b = nb_batch_new();
        nb_batch_tap_create(b, "pvr0",
                            &(nb_tap_opts){.size = sizeof(nb_tap_opts), .persist = true});
        root_batch(rc, b);
        ck_assert_uint_eq(conf_of("pvr0", "accept_ra"), 1);
        ck_assert_uint_eq(conf_of("pvr0", "autoconf"), 1);
        ck_assert_uint_eq(conf_of("pvr0", "accept_redirects"), 1);

        /* accept_ra: 0 only, for the caller. */
        expect_refused(&a, (struct cmd[]){sysctl_cmd("pva0", "ipv6.accept_ra", 2)}, EPERM,
                       "sysctl set: policy: uid 65534 may set ipv6.accept_ra on pva0 to 0 only, "
                       "not 2");
        expect_refused(&a, (struct cmd[]){sysctl_cmd("pvabr", "ipv6.accept_ra", 1)}, EPERM,
                       "may set ipv6.accept_ra on pvabr to 0 only, not 1");
        expect_ok(&a, (struct cmd[]){sysctl_cmd("pva0", "ipv6.accept_ra", 0)});
        /* disable_ipv6 and forwarding keep the interface's settings. */
        expect_ok(&a, (struct cmd[]){sysctl_cmd("pva0", "ipv6.disable_ipv6", 1)});
        expect_ok(&a, (struct cmd[]){sysctl_cmd("pva0", "ipv6.disable_ipv6", 0)});
        expect_ok(&a, (struct cmd[]){sysctl_cmd("pva0", "ipv6.forwarding", 1)});
        expect_ok(&a, (struct cmd[]){sysctl_cmd("pva0", "ipv6.forwarding", 0)});
        expect_locked("pva0");
        /* Root's sysctl_set as before, on whatever interface. */
        b = nb_batch_new();
        nb_batch_sysctl_set(b, "pva0", "ipv6.accept_ra", 2);
        nb_batch_sysctl_set(b, "pvr0", "ipv6.accept_ra", 2);
        root_batch(rc, b);
        ck_assert_uint_eq(conf_of("pva0", "accept_ra"), 2);
        ck_assert_uint_eq(conf_of("pvr0", "accept_ra"), 2);
        free(tu_sh("echo 0 > /proc/sys/net/ipv6/conf/pva0/accept_ra"));

        /* No MTU below 1280: back above it, the interface would have the
         * kernel's defaults. */
        expect_refused(&a, (struct cmd[]){mtu_of("pva0", 1000)}, EPERM,
                       "link set: policy: uid 65534 may not set the MTU of pva0 below 1280 (to "
                       "1000)");
        expect_ok(&a, (struct cmd[]){mtu_of("pva0", 1400)});
        expect_locked("pva0");
        /* Nor an interface born below it (its parent's MTU), made and
         * deleted again. */
        expect_refused(&a, (struct cmd[]){macv(A_MACVLAN, "pvas0", "pvsmall0", NB_MACVLAN_BRIDGE)},
                       EPERM,
                       "policy: uid 65534 may not have pvas0: the kernel keeps no IPv6 settings "
                       "for pvas0 (its MTU is below 1280)");
        /* Nor one its parent took below it: its MTU stays. */
        free(tu_sh("ip link set pvup0 mtu 1000 && ip link set pvup0 mtu 1500"));
        ck_assert_str_eq(tu_link_get("pvam0", "mtu"), "1000");
        expect_refused(&a, (struct cmd[]){mtu_of("pvam0", 1500)}, EPERM,
                       "link set: policy: uid 65534 may not change the MTU of pvam0: the kernel "
                       "keeps no IPv6 settings for pvam0");
        /* Nor a bridge of its own whose MTU follows its ports: a port root
         * took below 1280 took the bridge along; the port leaving would
         * raise the bridge's MTU, and give it the defaults (the review). */
        expect_ok(&a, (struct cmd[]){op(A_SET, "pva0", "pvabr")});
        free(tu_sh("ip link set pva0 mtu 1000"));
        ck_assert_str_eq(tu_link_get("pvabr", "mtu"), "1000");
        {
                struct cmd leave = op(A_SET, "pva0", NULL);
                leave.nomaster = true;
                expect_refused(&a, &leave, EPERM,
                               "link set: policy: uid 65534 may not change the ports of pvabr: "
                               "the kernel keeps no IPv6 settings for pvabr");
        }
        ck_assert_msg(access("/proc/sys/net/ipv6/conf/pvabr/accept_ra", F_OK) != 0 ||
                              conf_of("pvabr", "accept_ra") == 0,
                      "pvabr takes router advertisements again");
        agent_stop(&a);
        nb_close(rc);
        tu_helper_stop(&h);
}
END_TEST

Suite *policy_suite(void)
{
        Suite *s = suite_create("policy");
        TCase *matrix_case = tcase_create("policy-matrix"),
              *owners = tcase_create("policy-ownership"), *ifbs = tcase_create("policy-ifb"),
              *ra = tcase_create("policy-ra"), *ports = tcase_create("policy-bridge-port");

        tcase_set_timeout(matrix_case, 240);
        tcase_set_timeout(owners, 120);
        tcase_set_timeout(ifbs, 60);
        tcase_set_timeout(ra, 120);
        tcase_set_timeout(ports, 60);
        tcase_add_test(
                matrix_case,
                test_every_op_by_every_class_of_caller_is_allowed_or_refused_as_the_policy_says);
        tcase_add_test(owners, test_a_uid_cannot_touch_another_uids_tap_or_roots_veth_and_bridge);
        tcase_add_test(owners, test_firewall_owner_comment_records_its_creator);
        tcase_add_test(owners, test_clean_up_of_what_is_gone_succeeds_only_for_whom_may_manage_it);
        tcase_add_test(owners, test_interfaces_join_only_listed_bridges_or_their_own);
        tcase_add_test(owners, test_a_link_set_the_kernel_refuses_part_way_changes_nothing);
        tcase_add_test(owners,
                       test_owner_and_limit_of_an_interface_survive_joining_and_leaving_a_bridge);
        tcase_add_test(owners, test_passthru_macvtap_only_when_granted_and_only_on_listed_parents);
        tcase_add_test(owners,
                       test_persistent_or_owned_tap_only_for_the_callers_own_uid_and_groups);
        tcase_add_test(owners, test_veth_peer_only_into_a_namespace_the_caller_owns);
        tcase_add_test(owners, test_ownership_survives_a_helper_restart);
        tcase_add_test(owners, test_names_and_device_count_stay_within_the_policy);
        tcase_add_test(owners, test_exec_runs_only_the_programs_the_policy_names);
        tcase_add_test(ifbs, test_sweep_and_flush_delete_only_ifbs_the_helper_marked);
        tcase_add_test(ifbs, test_a_device_named_like_an_ifb_is_not_used_as_one);
        suite_add_tcase(s, matrix_case);
        suite_add_tcase(s, owners);
        tcase_add_test(ra, test_router_advertisements_through_a_uids_tap_or_bridge_change_no_route);
        tcase_add_test(ra, test_every_interface_a_uid_makes_keeps_router_advertisements_off);
        suite_add_tcase(s, ifbs);
        suite_add_tcase(s, ra);
        tcase_add_test(ports, test_a_port_of_roots_bridge_takes_no_address_the_bridge_knows);
        tcase_add_test(ports, test_a_port_of_roots_bridge_changes_neither_its_mtu_nor_its_address);
        suite_add_tcase(s, ports);
        return s;
}
