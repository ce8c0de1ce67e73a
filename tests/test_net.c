// SPDX-License-Identifier: LGPL-2.1-or-later
/* Network owners against the real kernel, with real traffic.
 *
 * The world: the test's own namespace is the "host", with the helper, the
 * bridge nbr0 (192.168.100.1/24) and vo0 (10.9.0.1/24) toward the
 * "outside" namespace (oeth0, 10.9.0.2/24, routed to the guests' subnet
 * through the host); the "guest" namespace hangs on the bridge (geth0,
 * 192.168.100.2/24, default route through the host). The host forwards
 * IPv4. Without a network owner everything passes unchanged: each test
 * says what its rules change, and checks the world before where it
 * matters.
 *
 * libvirt's side (tests/net/libvirt-*.nft): the rulesets libvirt's
 * network driver (src/network/network_nftables.c) installs for the same
 * network, written out by hand from its source; the same probes go
 * through both and must get the same verdicts. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

#define BR "nbr0"
#define SUBNET "192.168.100.0/24"
#define GUEST "192.168.100.2"
#define HOST_OUT "10.9.0.1"
#define OUTSIDE "10.9.0.2"
#define FIXTURES NB_TEST_PY_DIR "/../net"

struct world {
        nb_conn *c;
        int guest, out; /* namespaces */
        char guest_path[64], out_path[64];
};

/* The world with a helper of config (TU_ALLOW and more) and a guest
 * whose address is given (static) or is left to DHCP (!static_guest: geth0
 * up without an address or route). */
static void world_up_with(struct world *w, const char *config, bool static_guest)
{
        tu_private_netns();
        w->c = tu_spawn(config);
        w->guest = tu_new_netns_fd();
        w->out = tu_new_netns_fd();
        snprintf(w->guest_path, sizeof(w->guest_path), "/proc/%d/fd/%d", (int)getpid(), w->guest);
        snprintf(w->out_path, sizeof(w->out_path), "/proc/%d/fd/%d", (int)getpid(), w->out);
        free(tu_sh("ip link set lo up && ip link add " BR " type bridge && "
                   "ip addr add 192.168.100.1/24 dev " BR " && ip link set " BR " up"));
        free(tu_sh("ip link add vg0 type veth peer name geth0 netns %s && "
                   "ip link set vg0 master " BR " up",
                   w->guest_path));
        if (static_guest)
                free(tu_sh("nsenter --net=%s sh -c 'ip link set lo up && ip addr add " GUEST
                           "/24 dev geth0 && ip link set geth0 up && ip route add default via "
                           "192.168.100.1'",
                           w->guest_path));
        else
                free(tu_sh("nsenter --net=%s sh -c 'ip link set lo up && ip link set geth0 up'",
                           w->guest_path));
        free(tu_sh("ip link add vo0 type veth peer name oeth0 netns %s && "
                   "ip addr add " HOST_OUT "/24 dev vo0 && ip link set vo0 up",
                   w->out_path));
        free(tu_sh("nsenter --net=%s sh -c 'ip link set lo up && ip addr add " OUTSIDE
                   "/24 dev oeth0 && ip link set oeth0 up && ip route add " SUBNET " via " HOST_OUT
                   "'",
                   w->out_path));
        free(tu_sh("sysctl -qw net.ipv4.ip_forward=1"));
}

static void world_up(struct world *w)
{
        world_up_with(w, TU_ALLOW, true);
}

static void world_down(struct world *w)
{
        nb_close(w->c);
        close(w->guest);
        close(w->out);
}

/* ---- traffic ---- */

/* A socket of the family of address `like` in namespace ns (-1: the
 * host's). */
static int socket_in(int ns, const char *like, int type)
{
        int here = -1, fd;

        if (ns >= 0) {
                here = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
                ck_assert_int_ge(here, 0);
                ck_assert_msg(setns(ns, CLONE_NEWNET) == 0, "setns: %s", strerror(errno));
        }
        fd = socket(strchr(like, ':') ? AF_INET6 : AF_INET, type | SOCK_CLOEXEC, 0);
        if (ns >= 0) {
                ck_assert_msg(setns(here, CLONE_NEWNET) == 0, "setns back: %s", strerror(errno));
                close(here);
        }
        ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
        return fd;
}

/* addr:port, IPv4 or IPv6 (the address says which), and its length. */
static socklen_t sa_of(const char *addr, unsigned port, struct sockaddr_storage *ret)
{
        struct sockaddr_in *in = (struct sockaddr_in *)ret;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ret;

        memset(ret, 0, sizeof(*ret));
        if (strchr(addr, ':')) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t)port);
                ck_assert_int_eq(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1);
                return sizeof(*in6);
        }
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        ck_assert_int_eq(inet_pton(AF_INET, addr, &in->sin_addr), 1);
        return sizeof(*in);
}

/* What a TCP connection from namespace `from` to dst:dport, with a
 * listener on `lport` in namespace `to`, came to: whether it was
 * accepted, and the peer address and port the listener saw. */
struct seen {
        bool ok;
        int err; /* the connect's, when not ok */
        char peer[INET6_ADDRSTRLEN];
        unsigned peer_port;
};

static struct seen tcp_probe_from(int from, int to, unsigned lport, const char *dst, unsigned dport,
                                  const char *saddr, unsigned sport)
{
        bool v6 = strchr(dst, ':');
        struct sockaddr_storage any, d, peer;
        socklen_t any_len = sa_of(v6 ? "::" : "0.0.0.0", lport, &any),
                  d_len = sa_of(dst, dport, &d);
        socklen_t len;
        struct seen s = {0};
        struct pollfd p;
        int l = socket_in(to, dst, SOCK_STREAM), a;
        int c = socket_in(from, dst, SOCK_STREAM | SOCK_NONBLOCK);
        int one = 1, err = 0;

        ck_assert_int_eq(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
        ck_assert_int_eq(bind(l, (struct sockaddr *)&any, any_len), 0);
        ck_assert_int_eq(listen(l, 4), 0);
        if (sport || saddr) {
                struct sockaddr_storage src;
                socklen_t src_len = sa_of(saddr ? saddr : v6 ? "::" : "0.0.0.0", sport, &src);
                ck_assert_int_eq(setsockopt(c, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
                ck_assert_int_eq(bind(c, (struct sockaddr *)&src, src_len), 0);
        }
        if (connect(c, (struct sockaddr *)&d, d_len) < 0 && errno != EINPROGRESS)
                err = errno;
        p = (struct pollfd){.fd = c, .events = POLLOUT};
        if (!err && poll(&p, 1, 3000) != 1)
                err = ETIMEDOUT;
        len = sizeof(err);
        if (!err)
                getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len);
        s.err = err;
        p = (struct pollfd){.fd = l, .events = POLLIN};
        if (!err && poll(&p, 1, 2000) == 1) {
                len = sizeof(peer);
                a = accept(l, (struct sockaddr *)&peer, &len);
                ck_assert_int_ge(a, 0);
                if (v6) {
                        struct sockaddr_in6 *p6 = (struct sockaddr_in6 *)&peer;
                        inet_ntop(AF_INET6, &p6->sin6_addr, s.peer, sizeof(s.peer));
                        s.peer_port = ntohs(p6->sin6_port);
                } else {
                        struct sockaddr_in *p4 = (struct sockaddr_in *)&peer;
                        inet_ntop(AF_INET, &p4->sin_addr, s.peer, sizeof(s.peer));
                        s.peer_port = ntohs(p4->sin_port);
                }
                s.ok = true;
                close(a);
        }
        close(c);
        close(l);
        return s;
}

static struct seen tcp_probe(int from, int to, unsigned lport, const char *dst, unsigned dport,
                             unsigned sport)
{
        return tcp_probe_from(from, to, lport, dst, dport, NULL, sport);
}

/* ---- the kernel's ruleset generation (NFT_MSG_GETGEN): every commit
 * in the namespace bumps it, so an unchanged one means nothing was
 * written. ---- */

static uint32_t nft_gen(void)
{
        struct {
                struct nlmsghdr h;
                struct nfgenmsg g;
        } req = {{sizeof(req), NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETGEN, NLM_F_REQUEST, 1, 0},
                 {AF_UNSPEC, NFNETLINK_V0, 0}};
        char buf[4096];
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        ssize_t n;

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(send(fd, &req, sizeof(req), 0), (ssize_t)sizeof(req));
        n = recv(fd, buf, sizeof(buf), 0);
        close(fd);
        ck_assert(NLMSG_OK(h, n) && h->nlmsg_type != NLMSG_ERROR);
        for (struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(h) + sizeof(struct nfgenmsg));
             (char *)a + sizeof(*a) <= (char *)h + h->nlmsg_len;
             a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len))) {
                if (a->nla_len < sizeof(*a))
                        break;
                if ((a->nla_type & NLA_TYPE_MASK) == NFTA_GEN_ID) {
                        uint32_t v;
                        memcpy(&v, (char *)a + NLA_HDRLEN, 4);
                        return ntohl(v);
                }
        }
        ck_abort_msg("no NFTA_GEN_ID in the GETGEN answer");
        return 0;
}

/* ---- the network ---- */

static const char *const subnets[] = {SUBNET};

static nb_net_spec spec_of(nb_net_mode mode, const nb_net_forward *const *fwd, size_t n_fwd,
                           nb_fw_mode fw_mode)
{
        nb_net_spec s = NB_NET_SPEC_INIT;

        s.bridge = BR;
        s.subnets = subnets;
        s.n_subnets = 1;
        s.mode = mode;
        s.forwards = fwd;
        s.n_forwards = n_fwd;
        s.fw_mode = fw_mode;
        return s;
}

static void apply(nb_conn *c, const char *owner, const nb_net_spec *s, bool *ret_unchanged,
                  unsigned *ret_rules)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        bool unchanged;
        unsigned rules;

        ck_assert_int_eq(nb_batch_net_apply(b, owner, s), 0);
        res = tu_submit_ok(c, b);
        ck_assert_int_eq(nb_result_net(res, 0, NULL, &unchanged, &rules), 0);
        if (ret_unchanged)
                *ret_unchanged = unchanged;
        if (ret_rules)
                *ret_rules = rules;
        nb_results_free(res);
}

static void remove_net(nb_conn *c, const char *owner)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_net_remove(b, owner), 0);
        nb_results_free(tu_submit_ok(c, b));
}

/* ---- nat, route, isolated, with real traffic ---- */

START_TEST(test_nat_guest_reaches_outside_as_the_host_and_outside_cannot_reach_in)
{
        struct world w;
        nb_net_spec s;
        struct seen out, in, low;

        world_up(&w);
        /* Before: forwarded unchanged, both ways. */
        out = tcp_probe(w.guest, w.out, 7001, OUTSIDE, 7001, 0);
        ck_assert_msg(out.ok && strcmp(out.peer, GUEST) == 0, "before: %d %s", out.err, out.peer);
        s = spec_of(NB_NET_NAT, NULL, 0, NB_FW_REPLACE);
        apply(w.c, "nat0", &s, NULL, NULL);
        out = tcp_probe(w.guest, w.out, 7002, OUTSIDE, 7002, 0);
        ck_assert_msg(out.ok, "guest to outside: %s", strerror(out.err));
        ck_assert_str_eq(out.peer, HOST_OUT); /* masqueraded */
        /* libvirt's port range: a guest's port below 1024 is not kept. */
        low = tcp_probe(w.guest, w.out, 7003, OUTSIDE, 7003, 900);
        ck_assert_msg(low.ok, "guest from port 900: %s", strerror(low.err));
        ck_assert_str_eq(low.peer, HOST_OUT);
        ck_assert_uint_ge(low.peer_port, 1024);
        /* A new connection from outside is rejected (guest_input). */
        in = tcp_probe(w.out, w.guest, 7004, GUEST, 7004, 0);
        ck_assert_msg(!in.ok, "outside reached the guest through nat");
        ck_assert_int_eq(in.err, ECONNREFUSED); /* reject, not a silent drop */
        world_down(&w);
}
END_TEST

START_TEST(test_nat_port_range_is_the_one_asked_for)
{
        struct world w;
        nb_net_spec s;
        struct seen low;

        world_up(&w);
        s = spec_of(NB_NET_NAT, NULL, 0, NB_FW_REPLACE);
        s.nat_port_min = 20000;
        s.nat_port_max = 20010;
        apply(w.c, "nat0", &s, NULL, NULL);
        low = tcp_probe(w.guest, w.out, 7005, OUTSIDE, 7005, 900);
        ck_assert_msg(low.ok, "guest from port 900: %s", strerror(low.err));
        ck_assert_msg(low.peer_port >= 20000 && low.peer_port <= 20010, "source port %u",
                      low.peer_port);
        world_down(&w);
}
END_TEST

START_TEST(test_route_keeps_the_guest_address_both_ways)
{
        struct world w;
        nb_net_spec s;
        struct seen out, in;

        world_up(&w);
        s = spec_of(NB_NET_ROUTE, NULL, 0, NB_FW_REPLACE);
        apply(w.c, "route0", &s, NULL, NULL);
        out = tcp_probe(w.guest, w.out, 7011, OUTSIDE, 7011, 900);
        ck_assert_msg(out.ok, "guest to outside: %s", strerror(out.err));
        ck_assert_str_eq(out.peer, GUEST);
        ck_assert_uint_eq(out.peer_port, 900);
        in = tcp_probe(w.out, w.guest, 7012, GUEST, 7012, 0);
        ck_assert_msg(in.ok, "outside to guest: %s", strerror(in.err));
        ck_assert_str_eq(in.peer, OUTSIDE);
        world_down(&w);
}
END_TEST

START_TEST(test_isolated_stops_both_ways_and_open_changes_nothing)
{
        struct world w;
        nb_net_spec s;
        struct seen out, in;
        unsigned rules;

        world_up(&w);
        s = spec_of(NB_NET_ISOLATED, NULL, 0, NB_FW_REPLACE);
        apply(w.c, "iso0", &s, NULL, NULL);
        out = tcp_probe(w.guest, w.out, 7021, OUTSIDE, 7021, 0);
        in = tcp_probe(w.out, w.guest, 7022, GUEST, 7022, 0);
        ck_assert_msg(!out.ok && !in.ok, "isolated: out %d in %d", out.ok, in.ok);
        ck_assert_int_eq(out.err, ECONNREFUSED);
        ck_assert_int_eq(in.err, ECONNREFUSED);
        /* open: libvirt installs nothing; the owner is there, with no rule. */
        s = spec_of(NB_NET_OPEN, NULL, 0, NB_FW_REPLACE);
        apply(w.c, "iso0", &s, NULL, &rules);
        ck_assert_uint_eq(rules, 0);
        out = tcp_probe(w.guest, w.out, 7023, OUTSIDE, 7023, 0);
        in = tcp_probe(w.out, w.guest, 7024, GUEST, 7024, 0);
        ck_assert_msg(out.ok && in.ok, "open: out %s, in %s", strerror(out.err), strerror(in.err));
        ck_assert_str_eq(out.peer, GUEST);
        world_down(&w);
}
END_TEST

/* ---- port forwards ---- */

START_TEST(test_port_forward_reaches_the_guest_from_outside_and_from_the_host)
{
        struct world w;
        nb_net_forward f = NB_NET_FORWARD_INIT;
        const nb_net_forward *fp[] = {&f};
        nb_net_spec s;
        struct seen before, in, local;

        world_up(&w);
        before = tcp_probe(w.out, w.guest, 80, HOST_OUT, 8080, 0);
        ck_assert_msg(!before.ok, "the host answered on 8080 before any forward");
        f.protocol = "tcp";
        f.outside_port = 8080;
        f.guest_address = GUEST;
        f.guest_port = 80;
        s = spec_of(NB_NET_NAT, fp, 1, NB_FW_REPLACE);
        apply(w.c, "pf0", &s, NULL, NULL);
        in = tcp_probe(w.out, w.guest, 80, HOST_OUT, 8080, 0);
        ck_assert_msg(in.ok, "outside to host:8080: %s", strerror(in.err));
        ck_assert_str_eq(in.peer, OUTSIDE); /* DNAT only: the source stays */
        /* From the host itself (netavark's OUTPUT rule). */
        local = tcp_probe(-1, w.guest, 80, HOST_OUT, 8080, 0);
        ck_assert_msg(local.ok, "host to its own :8080: %s", strerror(local.err));
        /* An outside address of another host's: not forwarded. */
        f.outside_address = "10.9.0.99";
        s = spec_of(NB_NET_NAT, fp, 1, NB_FW_REPLACE);
        apply(w.c, "pf0", &s, NULL, NULL);
        in = tcp_probe(w.out, w.guest, 80, HOST_OUT, 8080, 0);
        ck_assert_msg(!in.ok, "forwarded although the outside address differs");
        world_down(&w);
}
END_TEST

/* ---- ensure, the batch's one transaction, listing, removal ---- */

static size_t list_nets(nb_conn *c, char *buf, size_t size)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        size_t n, used = 0;

        ck_assert_int_eq(nb_batch_net_list(b), 0);
        res = tu_submit_ok(c, b);
        n = nb_result_net_owner_count(res, 0);
        buf[0] = 0;
        for (size_t k = 0; k < n; k++) {
                nb_net_owner o = NB_NET_OWNER_INIT;
                ck_assert_int_eq(nb_result_net_owner_at(res, 0, k, &o), 0);
                used += (size_t)snprintf(buf + used, size - used, "%s %s %s %u\n", o.owner,
                                         o.bridge, o.mode, o.rules);
        }
        nb_results_free(res);
        return n;
}

START_TEST(test_ensure_of_an_unchanged_network_writes_nothing_and_a_change_rewrites_it)
{
        struct world w;
        nb_net_forward f = NB_NET_FORWARD_INIT;
        const nb_net_forward *fp[] = {&f};
        nb_net_spec s;
        bool unchanged;
        unsigned rules, rules2;
        uint32_t gen;
        char list[512], *ruleset;

        world_up(&w);
        f.protocol = "udp";
        f.outside_port = 5353;
        f.guest_address = GUEST;
        s = spec_of(NB_NET_NAT, fp, 1, NB_FW_ENSURE);
        apply(w.c, "ens0", &s, &unchanged, &rules);
        ck_assert(!unchanged);
        /* A restart of the daemon and of its helper. */
        nb_close(w.c);
        w.c = tu_spawn(TU_ALLOW);
        gen = nft_gen();
        apply(w.c, "ens0", &s, &unchanged, &rules2);
        ck_assert_msg(unchanged, "ensure rewrote an unchanged network");
        ck_assert_uint_eq(rules2, rules);
        ck_assert_uint_eq(nft_gen(), gen);
        /* A change: written. */
        f.guest_port = 53;
        apply(w.c, "ens0", &s, &unchanged, NULL);
        ck_assert(!unchanged);
        ck_assert_uint_eq(nft_gen(), gen + 1);
        /* A chain deleted behind the helper's back: ensure puts it back. */
        free(tu_sh("nft delete chain inet netbroker_net ens0/output"));
        apply(w.c, "ens0", &s, &unchanged, NULL);
        ck_assert_msg(!unchanged, "ensure missed a deleted chain");
        ruleset = tu_sh("nft list chain inet netbroker_net ens0/output");
        ck_assert_ptr_nonnull(strstr(ruleset, "dnat ip to 192.168.100.2:53"));
        free(ruleset);
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), 1);
        ck_assert_msg(strncmp(list, "ens0 nbr0 nat ", 14) == 0, "list: %s", list);
        ck_assert_uint_eq((unsigned)atoi(list + 14), rules);
        /* Removal removes every chain. */
        remove_net(w.c, "ens0");
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), 0);
        ruleset = tu_sh("nft list table inet netbroker_net");
        ck_assert_ptr_null(strstr(ruleset, "chain"));
        free(ruleset);
        world_down(&w);
}
END_TEST

START_TEST(test_networks_of_one_batch_are_one_transaction_and_a_refused_one_changes_nothing)
{
        struct world w;
        nb_net_spec s = spec_of(NB_NET_NAT, NULL, 0, NB_FW_REPLACE), bad;
        static const char *const bad_subnets[] = {"300.1.2.0/24"};
        nb_results *res = NULL;
        nb_batch *b;
        char list[256];
        uint32_t gen;

        world_up(&w);
        gen = nft_gen();
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_apply(b, "one0", &s), 0);
        ck_assert_int_eq(nb_batch_net_apply(b, "two0", &s), 0);
        nb_results_free(tu_submit_ok(w.c, b));
        ck_assert_uint_eq(nft_gen(), gen + 1);
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), 2);
        /* A bad subnet in the second op: refused before anything is sent. */
        bad = s;
        bad.subnets = bad_subnets;
        gen = nft_gen();
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_remove(b, "one0"), 0);
        ck_assert_int_eq(nb_batch_net_apply(b, "three0", &bad), 0);
        ck_assert_int_eq(nb_submit(w.c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 1), -EINVAL);
        ck_assert_ptr_nonnull(strstr(nb_result_message(res, 1), "subnet '300.1.2.0/24'"));
        nb_results_free(res);
        nb_batch_free(b);
        ck_assert_uint_eq(nft_gen(), gen);
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), 2);
        world_down(&w);
}
END_TEST

/* ---- guests' and networks' owners of one request: one transaction ---- */

/* Whether the ruleset has a chain whose name starts with prefix ("g1/"). */
static bool has_chain(const char *prefix)
{
        char *rs = tu_sh("nft list ruleset");
        char quoted[64];
        bool found;

        snprintf(quoted, sizeof(quoted), "chain %s", prefix);
        found = strstr(rs, quoted) != NULL;
        if (!found) {
                snprintf(quoted, sizeof(quoted), "chain \"%s", prefix);
                found = strstr(rs, quoted) != NULL;
        }
        free(rs);
        return found;
}

/* FirewallList's entry for owner: 1 a network's (on bridge), 0 a guest's,
 * -1 not listed. */
static int fw_listed(nb_conn *c, const char *owner, const char *ifname)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        const char *o, *i;
        int found = -1;

        ck_assert_int_eq(nb_batch_firewall_list(b), 0);
        res = tu_submit_ok(c, b);
        for (size_t k = 0; nb_result_fw_owner_at(res, 0, k, &o, &i, NULL, NULL) == 0; k++)
                if (strcmp(o, owner) == 0) {
                        ck_assert_str_eq(i, ifname);
                        found = nb_result_fw_owner_is_network(res, 0, k);
                }
        ck_assert(!nb_result_fw_owner_is_network(res, 0, nb_result_fw_owner_count(res, 0)));
        nb_results_free(res);
        return found;
}

/* Both kinds, in either order, commit once; the kernel's refusal of either
 * kind's part (a chain the commit must delete is the target of someone
 * else's jump: EBUSY) leaves both as they were, and names the part. */
START_TEST(test_guests_and_networks_of_one_request_are_one_transaction)
{
        struct world w;
        nb_net_spec s = spec_of(NB_NET_NAT, NULL, 0, NB_FW_REPLACE);
        nb_results *res = NULL;
        char list[512];
        nb_batch *b;
        uint32_t gen;

        world_up(&w);
        free(tu_sh("for i in 1 2 3; do ip link add vx$i type veth peer name vy$i; done"));

        /* A guest's owner, then a network's. */
        gen = nft_gen();
        b = nb_batch_new();
        tu_clean_traffic(b, "g1", "vx1");
        ck_assert_int_eq(nb_batch_net_apply(b, "n1", &s), 0);
        nb_results_free(tu_submit_ok(w.c, b));
        ck_assert_uint_eq(nft_gen(), gen + 1);
        ck_assert(has_chain("g1/"));
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), 1);

        /* A network's, then a guest's. */
        gen = nft_gen();
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_apply(b, "n2", &s), 0);
        tu_clean_traffic(b, "g2", "vx2");
        nb_results_free(tu_submit_ok(w.c, b));
        ck_assert_uint_eq(nft_gen(), gen + 1);
        ck_assert(has_chain("g2/"));
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), 2);
        /* FirewallList lists both kinds, the networks' flagged. */
        ck_assert_int_eq(fw_listed(w.c, "g1", "vx1"), 0);
        ck_assert_int_eq(fw_listed(w.c, "g2", "vx2"), 0);
        ck_assert_int_eq(fw_listed(w.c, "n1", BR), 1);
        ck_assert_int_eq(fw_listed(w.c, "n2", BR), 1);

        /* Interleaved, the kinds' last ops next to each other: once. */
        gen = nft_gen();
        b = nb_batch_new();
        tu_clean_traffic(b, "g1", "vx1");
        ck_assert_int_eq(nb_batch_net_apply(b, "n1", &s), 0);
        tu_clean_traffic(b, "g2", "vx2");
        ck_assert_int_eq(nb_batch_net_apply(b, "n2", &s), 0);
        nb_results_free(tu_submit_ok(w.c, b));
        ck_assert_uint_eq(nft_gen(), gen + 1);

        /* Another op between the kinds' last ops (it might be a LinkSet
         * that brings the guest's tap up: the filter must be in place by
         * then): each kind commits at its own last op, as alone. */
        gen = nft_gen();
        b = nb_batch_new();
        tu_clean_traffic(b, "g1", "vx1");
        ck_assert_int_eq(nb_batch_ping(b), 0);
        ck_assert_int_eq(nb_batch_net_apply(b, "n1", &s), 0);
        nb_results_free(tu_submit_ok(w.c, b));
        ck_assert_uint_eq(nft_gen(), gen + 2);

        /* The networks' part refused: n3's old chain is another's jump
         * target. The guest's owner of the same request is not made. */
        free(tu_sh("nft 'add chain inet netbroker_net n3/forward; add chain inet netbroker_net "
                   "other; add rule inet netbroker_net other jump n3/forward'"));
        gen = nft_gen();
        b = nb_batch_new();
        tu_clean_traffic(b, "g3", "vx3");
        ck_assert_int_eq(nb_batch_net_apply(b, "n3", &s), 0);
        ck_assert_int_eq(nb_submit(w.c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), -EBUSY);
        ck_assert_int_eq(nb_result_status(res, 1), -EBUSY);
        ck_assert_msg(strstr(nb_result_message(res, 1), "a network owner's rules"), "%s",
                      nb_result_message(res, 1));
        nb_results_free(res);
        nb_batch_free(b);
        ck_assert_uint_eq(nft_gen(), gen);
        ck_assert(!has_chain("g3/"));
        free(tu_sh("nft 'delete table inet netbroker_net'"));
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), 0);

        /* The guests' part refused, the guest's op last: g1's chain is
         * another's jump target, and g1 cannot go. n4 is not made. */
        apply(w.c, "n1", &s, NULL, NULL);
        free(tu_sh("nft 'add chain netdev netbroker other; add rule netdev netbroker other jump "
                   "g1/from/mac'"));
        gen = nft_gen();
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_apply(b, "n4", &s), 0);
        ck_assert_int_eq(nb_batch_firewall_remove(b, "g1"), 0);
        ck_assert_int_eq(nb_submit(w.c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 0), -EBUSY);
        ck_assert_int_eq(nb_result_status(res, 1), -EBUSY);
        ck_assert_msg(strstr(nb_result_message(res, 1), "owner g1"), "%s",
                      nb_result_message(res, 1));
        nb_results_free(res);
        nb_batch_free(b);
        ck_assert_uint_eq(nft_gen(), gen);
        ck_assert(has_chain("g1/"));
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), 1);
        ck_assert_ptr_null(strstr(list, "n4 "));
        world_down(&w);
}
END_TEST

/* A network commit the kernel refuses after its op ended (sent with the
 * guests' commit, or alone, by a later firewall op) is a failure of that
 * op: a batch without CONTINUE_ON_ERROR stops there and undoes what ran,
 * as if the op had failed on its own. The bridge of a batch whose last op
 * was a FirewallRemove of an owner gone already stayed (the op said 0). */
START_TEST(test_a_network_commit_refused_after_its_op_ended_undoes_the_batch)
{
        static const char *const why[] = {"alone, from a firewall op that queued nothing",
                                          "with a guest's, at its last firewall op",
                                          "with a guest's, at a later firewall op"};
        struct world w;
        nb_net_spec s = spec_of(NB_NET_NAT, NULL, 0, NB_FW_REPLACE);
        nb_results *res = NULL;
        nb_batch *b;

        world_up(&w);
        free(tu_sh("ip link add vx1 type veth peer name vy1"));
        for (int k = 0; k < 3; k++) {
                /* n3's old chain is another's jump target: its replace is
                 * refused (EBUSY). */
                free(tu_sh("nft 'add table inet netbroker_net; add chain inet netbroker_net "
                           "n3/forward; add chain inet netbroker_net other; add rule inet "
                           "netbroker_net other jump n3/forward'"));
                b = nb_batch_new();
                ck_assert_int_eq(nb_batch_bridge_create(b, "nbxb0"), 0);
                ck_assert_int_eq(nb_batch_net_apply(b, "n3", &s), 0);
                if (k > 0)
                        tu_clean_traffic(b, "g1", "vx1");
                if (k != 1)
                        ck_assert_int_eq(nb_batch_firewall_remove(b, "gone0"), 0);
                ck_assert_int_eq(nb_submit(w.c, b, &res), 0);
                ck_assert_msg(nb_result_status(res, 1) == -EBUSY, "%s: op 1: %d %s", why[k],
                              nb_result_status(res, 1), nb_result_message(res, 1));
                ck_assert_msg(nb_result_status(res, 0) == -ECANCELED &&
                                      strstr(nb_result_message(res, 0), "undone: op 1 failed"),
                              "%s: op 0: %d %s", why[k], nb_result_status(res, 0),
                              nb_result_message(res, 0));
                ck_assert_msg(!tu_link_exists("nbxb0"), "%s: the bridge stayed", why[k]);
                ck_assert_msg(!has_chain("g1/"), "%s: the guest's owner was made", why[k]);
                nb_results_free(res);
                nb_batch_free(b);
                free(tu_sh("nft 'delete table inet netbroker_net'"));
        }
        world_down(&w);
}
END_TEST

/* A batch larger than a netlink socket's default send buffer (212,992
 * bytes): 64 networks of 8 port forwards each, ~700 kB of nftables
 * messages, in one sendmsg() and one transaction. The commit's socket
 * failed it with EMSGSIZE (from 23 networks of 2 forwards) before it sized
 * its send buffer to the batch. */
START_TEST(test_a_batch_of_networks_larger_than_a_socket_buffer_is_one_transaction)
{
        enum { NETS = 64, FWDS = 8 };
        static nb_net_forward f[NETS][FWDS];
        const nb_net_forward *fp[NETS][FWDS];
        nb_net_spec s[NETS];
        struct world w;
        char owner[16], list[8192];
        nb_batch *b;
        uint32_t gen;

        world_up(&w);
        gen = nft_gen();
        b = nb_batch_new();
        for (int i = 0; i < NETS; i++) {
                for (int k = 0; k < FWDS; k++) {
                        f[i][k] = (nb_net_forward)NB_NET_FORWARD_INIT;
                        f[i][k].protocol = k % 2 ? "udp" : "tcp";
                        f[i][k].outside_port = 20000 + (unsigned)(i * FWDS + k);
                        f[i][k].guest_address = GUEST;
                        f[i][k].guest_port = 80;
                        fp[i][k] = &f[i][k];
                }
                s[i] = spec_of(NB_NET_NAT, fp[i], FWDS, NB_FW_REPLACE);
                snprintf(owner, sizeof(owner), "big%d", i);
                ck_assert_int_eq(nb_batch_net_apply(b, owner, &s[i]), 0);
        }
        nb_results_free(tu_submit_ok(w.c, b));
        ck_assert_uint_eq(nft_gen(), gen + 1);
        ck_assert_uint_eq(list_nets(w.c, list, sizeof(list)), NETS);
        world_down(&w);
}
END_TEST

/* ---- the kernel's limit of base chains a hook ---- */

/* The kernel takes at most 1,024 functions on a hook (MAX_HOOK_COUNT),
 * and refuses the base chain past them (E2BIG) inside the commit, after
 * the whole batch was sent (a 1.2 MB sendmsg took 6 s on the loop). With
 * someone else's 1,022 forward chains (an inet table's take a place in
 * IPv4's hook and IPv6's), two isolated networks (a forward chain each)
 * fill the hook, and the kernel takes them; a third, or a replace of one
 * of the two (its old chain holds its place until the commit), is refused
 * by the helper before it sends anything, saying the limit, and the
 * ruleset is as it was. (Sent, the kernel refused them with "Argument list
 * too long" and no word of the limit.) */
START_TEST(test_a_network_past_the_kernels_base_chains_a_hook_is_refused_before_sending)
{
        nb_net_spec s = spec_of(NB_NET_ISOLATED, NULL, 0, NB_FW_REPLACE);
        char *before, *after;
        nb_results *res = NULL;
        nb_batch *b;
        nb_conn *c;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        free(tu_sh("(echo 'table inet filler {'; i=0; while [ $i -lt 1022 ]; do "
                   "echo \"chain c$i { type filter hook forward priority 0; }\"; i=$((i+1)); "
                   "done; echo '}') | nft -f -"));
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_apply(b, "hk0", &s), 0);
        ck_assert_int_eq(nb_batch_net_apply(b, "hk1", &s), 0);
        nb_results_free(tu_submit_ok(c, b));
        before = tu_sh("nft -j list ruleset");
        for (int k = 0; k < 2; k++) {
                const char *owner = k ? "hk0" : "hk2";
                b = nb_batch_new();
                ck_assert_int_eq(nb_batch_net_apply(b, owner, &s), 0);
                ck_assert_int_eq(nb_submit(c, b, &res), 0);
                ck_assert_msg(nb_result_status(res, 0) == -E2BIG, "%s: %d %s", owner,
                              nb_result_status(res, 0), nb_result_message(res, 0));
                ck_assert_msg(strstr(nb_result_message(res, 0),
                                     "its forward chain would be base chain 1025 of the IPv4 "
                                     "forward hook, and the kernel allows 1024 a hook"),
                              "%s: %s", owner, nb_result_message(res, 0));
                nb_results_free(res);
                nb_batch_free(b);
                after = tu_sh("nft -j list ruleset");
                ck_assert_msg(strcmp(before, after) == 0, "%s: the ruleset changed", owner);
                free(after);
        }
        /* In a batch, the op past the limit fails and the batch with it. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_remove(b, "hk1"), 0);
        ck_assert_int_eq(nb_batch_net_apply(b, "hk3", &s), 0);
        ck_assert_int_eq(nb_submit(c, b, &res), 0);
        ck_assert_int_eq(nb_result_status(res, 1), -E2BIG);
        ck_assert_int_eq(nb_result_status(res, 0), -ECANCELED);
        nb_results_free(res);
        nb_batch_free(b);
        after = tu_sh("nft -j list ruleset");
        ck_assert_msg(strcmp(before, after) == 0, "the batch changed the ruleset");
        free(after);
        free(before);
        nb_close(c);
}
END_TEST

/* ---- the same verdicts as libvirt's own rules ---- */

#define SPOOFED "192.168.200.2" /* a guest address outside the subnet */
#define N_PROBES 4

/* One family's addresses for the probes. */
struct probe_addrs {
        const char *outside, *guest, *spoofed;
};
static const struct probe_addrs v4_addrs = {OUTSIDE, GUEST, SPOOFED};

/* The probes, through whatever rules are in place; ports from base on. */
static void probe_all(const struct world *w, const struct probe_addrs *a, unsigned base,
                      struct seen out[N_PROBES])
{
        out[0] = tcp_probe(w->guest, w->out, base, a->outside, base, 0);
        out[1] = tcp_probe(w->guest, w->out, base + 1, a->outside, base + 1, 900 + base % 100);
        out[2] = tcp_probe(w->out, w->guest, base + 2, a->guest, base + 2, 0);
        out[3] = tcp_probe_from(w->guest, w->out, base + 3, a->outside, base + 3, a->spoofed, 0);
}

static const char *const probe_names[N_PROBES] = {
        "guest to outside",
        "guest to outside from a port below 1024",
        "outside to guest (new connection)",
        "guest to outside from an address outside the subnet",
};

/* Same verdict, same source address seen, the same answer to "was the
 * source port below 1024 kept". */
static void assert_same(const char *mode, const struct seen *lv, const struct seen *nb)
{
        for (int i = 0; i < N_PROBES; i++) {
                ck_assert_msg(lv[i].ok == nb[i].ok, "%s, %s: libvirt %s, netbroker %s", mode,
                              probe_names[i], lv[i].ok ? "passes" : strerror(lv[i].err),
                              nb[i].ok ? "passes" : strerror(nb[i].err));
                if (!lv[i].ok) {
                        ck_assert_msg(lv[i].err == nb[i].err, "%s, %s: libvirt %s, netbroker %s",
                                      mode, probe_names[i], strerror(lv[i].err),
                                      strerror(nb[i].err));
                        continue;
                }
                ck_assert_msg(strcmp(lv[i].peer, nb[i].peer) == 0,
                              "%s, %s: libvirt's seen from %s, netbroker's from %s", mode,
                              probe_names[i], lv[i].peer, nb[i].peer);
                ck_assert_msg((lv[i].peer_port < 1024) == (nb[i].peer_port < 1024),
                              "%s, %s: source port %u with libvirt's, %u with netbroker's", mode,
                              probe_names[i], lv[i].peer_port, nb[i].peer_port);
        }
}

START_TEST(test_nat_route_isolated_give_the_verdicts_libvirts_own_rules_give)
{
        static const struct {
                const char *name, *fixture;
                nb_net_mode mode;
                bool want[N_PROBES]; /* what libvirt's rules do: the probes mean something */
        } modes[] = {
                {"nat", FIXTURES "/libvirt-nat.nft", NB_NET_NAT, {true, true, false, false}},
                {"route", FIXTURES "/libvirt-route.nft", NB_NET_ROUTE, {true, true, true, false}},
                {"isolated",
                 FIXTURES "/libvirt-isolated.nft",
                 NB_NET_ISOLATED,
                 {false, false, false, false}},
        };
        struct world w;

        world_up(&w);
        /* Routed both ways, so that only a rule can stop it (and the
         * host's reject reaches the guest). */
        free(tu_sh("nsenter --net=%s ip addr add " SPOOFED "/32 dev geth0", w.guest_path));
        free(tu_sh("ip route add " SPOOFED "/32 dev " BR));
        free(tu_sh("nsenter --net=%s ip route add " SPOOFED "/32 via " HOST_OUT, w.out_path));
        for (size_t m = 0; m < sizeof(modes) / sizeof(*modes); m++) {
                struct seen lv[N_PROBES], nb[N_PROBES];
                nb_net_spec s = spec_of(modes[m].mode, NULL, 0, NB_FW_REPLACE);
                unsigned base = 7100 + (unsigned)m * 20;
                free(tu_sh("nft -f %s", modes[m].fixture));
                probe_all(&w, &v4_addrs, base, lv);
                free(tu_sh("nft delete table ip libvirt_network"));
                for (int i = 0; i < N_PROBES; i++)
                        ck_assert_msg(lv[i].ok == modes[m].want[i], "%s, libvirt's rules: %s %s",
                                      modes[m].name, probe_names[i],
                                      lv[i].ok ? "passes" : strerror(lv[i].err));
                apply(w.c, "lv0", &s, NULL, NULL);
                probe_all(&w, &v4_addrs, base + 10, nb);
                remove_net(w.c, "lv0");
                assert_same(modes[m].name, lv, nb);
        }
        world_down(&w);
}
END_TEST

/* The same with an IPv6 subnet beside the IPv4 one: libvirt's ip6 table
 * (tests/net/libvirt-*-dual.nft) against the owner's IPv6 rules, with
 * IPv6 probes, and the IPv4 probes again (an IPv6 subnet changes nothing
 * for IPv4). IPv6 of a nat network is routed, as libvirt's default, or
 * masqueraded with nat_ipv6 (<nat ipv6='yes'/>); an IPv4-only network
 * with ipv6_nogw (<network ipv6='yes'>) has libvirt's ip6 rejects. */
#define SUBNET6 "fd00:100::/64"
#define GUEST6 "fd00:100::2"
#define HOST_OUT6 "fd00:9::1"
#define OUTSIDE6 "fd00:9::2"
#define SPOOFED6 "fd00:200::2"

static const struct probe_addrs v6_addrs = {OUTSIDE6, GUEST6, SPOOFED6};

/* The world's IPv6: the same shape as its IPv4 (nodad: usable at once),
 * the spoofed address routed both ways as SPOOFED is. */
static void world_v6(const struct world *w)
{
        free(tu_sh("sysctl -qw net.ipv6.conf.all.forwarding=1 && "
                   "ip -6 addr add fd00:100::1/64 dev " BR " nodad && "
                   "ip -6 addr add " HOST_OUT6 "/64 dev vo0 nodad && "
                   "ip -6 route add " SPOOFED6 "/128 dev " BR));
        free(tu_sh("nsenter --net=%s sh -c 'ip -6 addr add " GUEST6 "/64 dev geth0 nodad && "
                   "ip -6 addr add " SPOOFED6 "/128 dev geth0 nodad && "
                   "ip -6 route add default via fd00:100::1'",
                   w->guest_path));
        free(tu_sh("nsenter --net=%s sh -c 'ip -6 addr add " OUTSIDE6 "/64 dev oeth0 nodad && "
                   "ip -6 route add " SUBNET6 " via " HOST_OUT6 " && "
                   "ip -6 route add " SPOOFED6 "/128 via " HOST_OUT6 "'",
                   w->out_path));
}

START_TEST(test_dual_stack_networks_give_the_verdicts_libvirts_own_rules_give)
{
        static const char *const dual[] = {SUBNET, SUBNET6};
        static const struct {
                const char *name, *fixture;
                nb_net_mode mode;
                bool want4[N_PROBES], want6[N_PROBES]; /* libvirt's verdicts */
                bool nat_ipv6, ipv6_nogw, v4_only;
        } modes[] = {
                {.name = "nat",
                 .fixture = FIXTURES "/libvirt-nat-dual.nft",
                 .mode = NB_NET_NAT,
                 .want4 = {true, true, false, false},
                 .want6 = {true, true, true, false}},
                {.name = "nat, <nat ipv6='yes'/>",
                 .fixture = FIXTURES "/libvirt-nat-ipv6-dual.nft",
                 .mode = NB_NET_NAT,
                 .want4 = {true, true, false, false},
                 .want6 = {true, true, false, false},
                 .nat_ipv6 = true},
                /* No IPv6 subnet, <network ipv6='yes'>: IPv6 from and to the
                 * bridge rejected (the guests' IPv6 addresses are in no
                 * subnet of the network's). */
                {.name = "nat, IPv4 only, <network ipv6='yes'>",
                 .fixture = FIXTURES "/libvirt-nat-ipv6nogw.nft",
                 .mode = NB_NET_NAT,
                 .want4 = {true, true, false, false},
                 .want6 = {false, false, false, false},
                 .ipv6_nogw = true,
                 .v4_only = true},
                {.name = "route",
                 .fixture = FIXTURES "/libvirt-route-dual.nft",
                 .mode = NB_NET_ROUTE,
                 .want4 = {true, true, true, false},
                 .want6 = {true, true, true, false}},
                {.name = "isolated",
                 .fixture = FIXTURES "/libvirt-isolated-dual.nft",
                 .mode = NB_NET_ISOLATED,
                 .want4 = {false, false, false, false},
                 .want6 = {false, false, false, false}},
        };
        struct world w;

        world_up(&w);
        world_v6(&w);
        free(tu_sh("nsenter --net=%s ip addr add " SPOOFED "/32 dev geth0", w.guest_path));
        free(tu_sh("ip route add " SPOOFED "/32 dev " BR));
        free(tu_sh("nsenter --net=%s ip route add " SPOOFED "/32 via " HOST_OUT, w.out_path));
        for (size_t m = 0; m < sizeof(modes) / sizeof(*modes); m++) {
                struct seen lv4[N_PROBES], nb4[N_PROBES], lv6[N_PROBES], nb6[N_PROBES];
                nb_net_spec s = spec_of(modes[m].mode, NULL, 0, NB_FW_REPLACE);
                unsigned base = 7300 + (unsigned)m * 40;
                char name[64];
                s.subnets = dual;
                s.n_subnets = modes[m].v4_only ? 1 : 2;
                s.nat_ipv6 = modes[m].nat_ipv6;
                s.ipv6_nogw = modes[m].ipv6_nogw;
                free(tu_sh("nft -f %s", modes[m].fixture));
                probe_all(&w, &v4_addrs, base, lv4);
                probe_all(&w, &v6_addrs, base + 10, lv6);
                free(tu_sh("nft delete table ip libvirt_network && "
                           "nft delete table ip6 libvirt_network"));
                for (int i = 0; i < N_PROBES; i++) {
                        ck_assert_msg(lv4[i].ok == modes[m].want4[i], "%s, libvirt's rules: %s %s",
                                      modes[m].name, probe_names[i],
                                      lv4[i].ok ? "passes" : strerror(lv4[i].err));
                        ck_assert_msg(lv6[i].ok == modes[m].want6[i],
                                      "%s, libvirt's rules, IPv6: %s %s", modes[m].name,
                                      probe_names[i], lv6[i].ok ? "passes" : strerror(lv6[i].err));
                }
                apply(w.c, "lv0", &s, NULL, NULL);
                probe_all(&w, &v4_addrs, base + 20, nb4);
                probe_all(&w, &v6_addrs, base + 30, nb6);
                remove_net(w.c, "lv0");
                assert_same(modes[m].name, lv4, nb4);
                snprintf(name, sizeof(name), "%s, IPv6", modes[m].name);
                assert_same(name, lv6, nb6);
        }
        world_down(&w);
}
END_TEST

/* netbrokerctl net create --nat-ipv6 reaches the helper: the IPv6 subnet
 * of a nat network is masqueraded, and a route network with it is
 * refused with the helper's reason; --ipv6-nogw gives an IPv4 network
 * IPv6 rules. */
START_TEST(test_ctl_net_create_nat_ipv6_and_ipv6_nogw_reach_the_rules)
{
        char *conf = tu_config(TU_ALLOW), *out = NULL, *chain;
        const char *argv[] = {NB_TEST_CTL, "--spawn",  NB_TEST_HELPER, "--config",   conf,
                              "--json",    "net",      "create",       "n6",         "--bridge",
                              BR,          "--subnet", SUBNET6,        "--nat-ipv6", NULL,
                              NULL,        NULL};

        tu_private_netns();
        free(tu_sh("ip link add " BR " type bridge"));
        ck_assert_int_eq(tu_run(argv, &out), 0);
        free(out);
        chain = tu_sh("nft list chain inet netbroker_net n6/postrouting");
        ck_assert_msg(strstr(chain, "ip6 daddr ff02::/16") && strstr(chain, "masquerade"), "%s",
                      chain);
        free(chain);
        argv[14] = "--mode";
        argv[15] = "route";
        ck_assert_int_eq(tu_run(argv, &out), 1);
        ck_assert_msg(strstr(out, "nat_ipv6 is for nat mode"), "%s", out);
        free(out);
        /* --ipv6-nogw: an IPv4 network gets IPv6's cross and rejects. */
        argv[8] = "n4";
        argv[12] = SUBNET;
        argv[13] = "--ipv6-nogw";
        argv[14] = NULL;
        ck_assert_int_eq(tu_run(argv, &out), 0);
        free(out);
        chain = tu_sh("nft list chain inet netbroker_net n4/forward");
        ck_assert_msg(strstr(chain, "meta nfproto ipv6"), "%s", chain);
        free(chain);
        free(conf);
}
END_TEST

/* ---- policy: deny by default ---- */

static int as_nobody(const char *sock, const char *owner, const char *bridge, nb_net_mode mode,
                     unsigned port, char *msg, size_t size)
{
        int pfd[2];
        pid_t pid;
        struct {
                int status;
                char msg[256];
        } r = {0};

        ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                nb_conn *c = NULL;
                nb_batch *b = nb_batch_new();
                nb_results *res = NULL;
                nb_net_forward f = NB_NET_FORWARD_INIT;
                const nb_net_forward *fp[] = {&f};
                nb_net_spec s = spec_of(mode, fp, port ? 1 : 0, NB_FW_REPLACE);
                f.protocol = "tcp";
                f.outside_port = port;
                f.guest_address = GUEST;
                s.bridge = bridge;
                if (setgid(65534) < 0 || setuid(65534) < 0)
                        r.status = -errno;
                if (!r.status)
                        r.status = nb_connect(sock, &c);
                /* A bridge of its own, as it makes one (uid-marked). */
                if (!r.status && strncmp(bridge, "nbu", 3) == 0 && !tu_link_exists(bridge))
                        nb_batch_bridge_create(b, bridge);
                if (!r.status)
                        nb_batch_net_apply(b, owner, &s);
                if (!r.status && (r.status = nb_submit(c, b, &res)) == 0) {
                        size_t last = nb_results_count(res) - 1;
                        r.status = nb_result_status(res, last);
                        snprintf(r.msg, sizeof(r.msg), "%s", nb_result_message(res, last));
                }
                if (write(pfd[1], &r, sizeof(r)) != sizeof(r))
                        _exit(1);
                _exit(0);
        }
        close(pfd[1]);
        ck_assert_int_eq(read(pfd[0], &r, sizeof(r)), (ssize_t)sizeof(r));
        close(pfd[0]);
        waitpid(pid, NULL, 0);
        snprintf(msg, size, "%s", r.msg);
        return r.status;
}

START_TEST(test_only_root_or_a_granted_caller_on_its_own_bridge_may_make_a_network)
{
        struct tu_helper none, granted;
        char msg[256];
        nb_conn *rc;
        nb_batch *b;
        int r;

        tu_private_netns();
        free(tu_sh("ip link add " BR " type bridge"));
        tu_helper_start(&none, TU_ALLOW "policy_dir = /nonexistent/nbtest-policy.d\n"
                                        "allow_uid = 0 65534\n");
        ck_assert_int_eq(chmod(none.sock, 0666), 0);
        r = as_nobody(none.sock, "n0", BR, NB_NET_ISOLATED, 0, msg, sizeof(msg));
        ck_assert_int_eq(r, -EPERM);
        ck_assert_msg(strstr(msg, "may not run net_apply"), "%s", msg);
        tu_helper_stop(&none);

        tu_helper_start(&granted, TU_ALLOW "policy_dir = /nonexistent/nbtest-policy.d\n"
                                           "allow_uid = 0 65534\n"
                                           "[policy uid 65534]\n"
                                           "ops = bridge_create net_apply net_remove\n"
                                           "name_prefixes = nbu\n");
        ck_assert_int_eq(chmod(granted.sock, 0666), 0);
        /* root's bridge: not the caller's. */
        r = as_nobody(granted.sock, "n0", BR, NB_NET_ISOLATED, 0, msg, sizeof(msg));
        ck_assert_int_eq(r, -EPERM);
        ck_assert_msg(strstr(msg, "does not own interface " BR), "%s", msg);
        /* Its own bridge: a filter of its own, but no port forward (any
         * port: it takes the host's) and no nat or route (their rules
         * match subnets, not the bridge). */
        r = as_nobody(granted.sock, "n1", "nbu0", NB_NET_NAT, 8080, msg, sizeof(msg));
        ck_assert_int_eq(r, -EPERM);
        ck_assert_msg(strstr(msg, "may not forward ports"), "%s", msg);
        r = as_nobody(granted.sock, "n1", "nbu0", NB_NET_NAT, 0, msg, sizeof(msg));
        ck_assert_int_eq(r, -EPERM);
        ck_assert_msg(strstr(msg, "may not make a nat or route network"), "%s", msg);
        r = as_nobody(granted.sock, "n1", "nbu0", NB_NET_ROUTE, 0, msg, sizeof(msg));
        ck_assert_int_eq(r, -EPERM);
        r = as_nobody(granted.sock, "n1", "nbu0", NB_NET_ISOLATED, 0, msg, sizeof(msg));
        ck_assert_msg(r == 0, "granted caller on its own bridge: %s", msg);
        /* Root's owner of the same name is not the caller's to replace. */
        ck_assert_int_eq(nb_connect(granted.sock, &rc), 0);
        b = nb_batch_new();
        {
                nb_net_spec s = spec_of(NB_NET_NAT, NULL, 0, NB_FW_REPLACE);
                ck_assert_int_eq(nb_batch_net_apply(b, "root0", &s), 0);
        }
        nb_results_free(tu_submit_ok(rc, b));
        nb_close(rc);
        r = as_nobody(granted.sock, "root0", "nbu0", NB_NET_ISOLATED, 0, msg, sizeof(msg));
        ck_assert_int_eq(r, -EPERM);
        ck_assert_msg(strstr(msg, "does not own network owner root0"), "%s", msg);
        tu_helper_stop(&granted);
}
END_TEST

/* ---- end to end: a NAT network with DHCP, as libvirt would run it ---- */

#define DNSMASQ "/usr/sbin/dnsmasq"

/* The programs listed with tag (their pid, running, signal): how many. */
static size_t programs_of(nb_conn *c, const char *tag, nb_program_info *ret)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        size_t n;

        ck_assert_int_eq(nb_batch_program_list(b, tag), 0);
        res = tu_submit_ok(c, b);
        n = nb_result_program_count(res, 0);
        if (n) {
                nb_program_info p = NB_PROGRAM_INFO_INIT;
                ck_assert_int_eq(nb_result_program_at(res, 0, n - 1, &p), 0);
                p.path = p.tag = NULL; /* they die with res */
                p.argv = NULL;
                *ret = p;
        }
        nb_results_free(res);
        return n;
}

/* dnsmasq for the network, tagged with its name: its pid, existing. */
static int start_dnsmasq(nb_conn *c, const char *leases, bool *ret_existing)
{
        const char *argv[] = {DNSMASQ,
                              "--keep-in-foreground",
                              "--conf-file=/dev/null",
                              "--user=root",
                              "--group=",
                              "--interface=" BR,
                              "--bind-interfaces",
                              "--except-interface=lo",
                              "--dhcp-range=" GUEST "," GUEST ",1h",
                              "--port=0",
                              leases,
                              "--pid-file=",
                              "--log-facility=-",
                              NULL};
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_batch *b = nb_batch_new();
        nb_results *res;
        int pid = 0;

        o.argv = argv;
        o.tag = "e2e";
        ck_assert_int_eq(nb_batch_program_start(b, DNSMASQ, &o), 0);
        res = tu_submit_ok(c, b);
        ck_assert_int_eq(nb_result_program(res, 0, NULL, &pid, ret_existing), 0);
        nb_results_free(res);
        ck_assert_int_gt(pid, 0);
        return pid;
}

/* Issue 16's test, in one: a NAT network with a port forward and the
 * dnsmasq the helper supervises; the guest gets its address by DHCP,
 * reaches the outside as the host, is reached through the port forward;
 * dnsmasq killed is reported with its signal; a restart of the helper
 * writes nothing (ensure) and adopts the dnsmasq that runs instead of
 * starting a second; isolated stops both ways; removing the network stops
 * its dnsmasq. */
START_TEST(test_nat_network_with_dhcp_end_to_end)
{
        struct world w;
        nb_net_forward f = NB_NET_FORWARD_INIT;
        const nb_net_forward *fp[] = {&f};
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        char *conf, *dir, leases[PATH_MAX + 32], *out;
        nb_net_spec s;
        struct seen seen;
        bool unchanged, existing;
        int pid, pid2;
        uint32_t gen;

        if (access(DNSMASQ, X_OK) != 0 || access("/bin/busybox", X_OK) != 0)
                ck_abort_msg(DNSMASQ " or /bin/busybox is missing (dnsmasq-base, "
                                     "busybox-static: scripts/deps.sh)");
        ck_assert_int_ge(asprintf(&dir, "/tmp/nbtest-e2e-%d", (int)getpid()), 0);
        free(tu_sh("rm -rf %s && mkdir -p %s/programs", dir, dir));
        ck_assert_int_ge(asprintf(&conf,
                                  TU_ALLOW "fd_limit = 96\nprogram_allow = " DNSMASQ
                                           "\nprogram_dir = %s/programs\n",
                                  dir),
                         0);
        snprintf(leases, sizeof(leases), "--dhcp-leasefile=%s/leases", dir);
        world_up_with(&w, conf, false);
        /* The helper has no CAP_NET_BIND_SERVICE: port 67 is opened here. */
        free(tu_sh("sysctl -qw net.ipv4.ip_unprivileged_port_start=0"));

        f.protocol = "tcp";
        f.outside_port = 8080;
        f.guest_address = GUEST;
        f.guest_port = 80;
        s = spec_of(NB_NET_NAT, fp, 1, NB_FW_ENSURE);
        apply(w.c, "e2e", &s, &unchanged, NULL);
        ck_assert(!unchanged);
        pid = start_dnsmasq(w.c, leases, &existing);
        ck_assert(!existing);

        /* The guest's address and route come from dnsmasq. */
        free(tu_sh("printf '#!/bin/sh\\n[ \"$1\" = bound ] || exit 0\\nip addr add $ip/24 dev "
                   "$interface && ip route add default via $router && echo $ip > %s/lease\\n' > "
                   "%s/script && chmod 755 %s/script",
                   dir, dir, dir));
        free(tu_sh("nsenter --net=%s busybox udhcpc -i geth0 -n -q -t 10 -T 1 -s %s/script "
                   ">/dev/null 2>&1",
                   w.guest_path, dir));
        out = tu_sh("cat %s/lease", dir);
        ck_assert_msg(strcmp(out, GUEST "\n") == 0, "lease: '%s'", out);
        free(out);
        printf("net e2e: the guest got " GUEST " from dnsmasq (pid %d)\n", pid);

        /* Out through masquerade; in through the port forward. */
        seen = tcp_probe(w.guest, w.out, 7101, OUTSIDE, 7101, 0);
        ck_assert_msg(seen.ok, "guest to outside: %s", strerror(seen.err));
        ck_assert_str_eq(seen.peer, HOST_OUT);
        seen = tcp_probe(w.out, w.guest, 80, HOST_OUT, 8080, 0);
        ck_assert_msg(seen.ok, "outside to host:8080: %s", strerror(seen.err));
        ck_assert_str_eq(seen.peer, OUTSIDE);

        /* dnsmasq killed from outside: reported, with its signal. */
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        for (int i = 0; i < 200 && programs_of(w.c, "e2e", &p) && p.running; i++)
                usleep(10000);
        ck_assert_int_eq(p.pid, pid);
        ck_assert(!p.running);
        ck_assert_int_eq(p.signal, SIGKILL);
        pid = start_dnsmasq(w.c, leases, &existing);
        ck_assert(!existing);

        /* The daemon and its helper restart: nothing written, the running
         * dnsmasq adopted, not a second one started. */
        nb_close(w.c);
        w.c = tu_spawn(conf);
        gen = nft_gen();
        apply(w.c, "e2e", &s, &unchanged, NULL);
        ck_assert_msg(unchanged, "ensure rewrote an unchanged network");
        ck_assert_uint_eq(nft_gen(), gen);
        pid2 = start_dnsmasq(w.c, leases, &existing);
        ck_assert(existing);
        ck_assert_int_eq(pid2, pid);
        ck_assert_uint_eq(programs_of(w.c, "e2e", &p), 1);
        ck_assert(p.adopted && p.running);
        ck_assert_uint_eq(tu_stat(w.c, "programs_started"), 0);

        /* Isolated: neither way. */
        s = spec_of(NB_NET_ISOLATED, NULL, 0, NB_FW_ENSURE);
        apply(w.c, "e2e", &s, &unchanged, NULL);
        ck_assert(!unchanged);
        seen = tcp_probe(w.guest, w.out, 7102, OUTSIDE, 7102, 0);
        ck_assert_msg(!seen.ok, "isolated: the guest reached the outside");
        seen = tcp_probe(w.out, w.guest, 80, HOST_OUT, 8080, 0);
        ck_assert_msg(!seen.ok, "isolated: the port forward still reaches the guest");

        /* Removed: its dnsmasq goes with it. */
        remove_net(w.c, "e2e");
        ck_assert(!tu_process_alive(pid));
        ck_assert_uint_eq(programs_of(w.c, "e2e", &p), 0);
        world_down(&w);
        free(tu_sh("rm -rf %s", dir));
        free(conf);
        free(dir);
}
END_TEST

Suite *net_suite(void)
{
        Suite *s = suite_create("net");
        TCase *t = tcase_create("net");

        tcase_set_timeout(t, 120);
        tcase_add_test(t, test_nat_guest_reaches_outside_as_the_host_and_outside_cannot_reach_in);
        tcase_add_test(t, test_nat_port_range_is_the_one_asked_for);
        tcase_add_test(t, test_route_keeps_the_guest_address_both_ways);
        tcase_add_test(t, test_isolated_stops_both_ways_and_open_changes_nothing);
        tcase_add_test(t, test_port_forward_reaches_the_guest_from_outside_and_from_the_host);
        tcase_add_test(t,
                       test_ensure_of_an_unchanged_network_writes_nothing_and_a_change_rewrites_it);
        tcase_add_test(
                t,
                test_networks_of_one_batch_are_one_transaction_and_a_refused_one_changes_nothing);
        tcase_add_test(t, test_a_batch_of_networks_larger_than_a_socket_buffer_is_one_transaction);
        tcase_add_test(t, test_only_root_or_a_granted_caller_on_its_own_bridge_may_make_a_network);
        tcase_add_test(t, test_nat_route_isolated_give_the_verdicts_libvirts_own_rules_give);
        tcase_add_test(t, test_dual_stack_networks_give_the_verdicts_libvirts_own_rules_give);
        tcase_add_test(t, test_ctl_net_create_nat_ipv6_and_ipv6_nogw_reach_the_rules);
        tcase_add_test(t, test_guests_and_networks_of_one_request_are_one_transaction);
        tcase_add_test(t, test_a_network_commit_refused_after_its_op_ended_undoes_the_batch);
        tcase_add_test(t, test_nat_network_with_dhcp_end_to_end);
        tcase_add_test(
                t, test_a_network_past_the_kernels_base_chains_a_hook_is_refused_before_sending);
        suite_add_tcase(s, t);
        return s;
}
