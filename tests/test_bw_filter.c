// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bandwidth limits and the firewall together, with real traffic, on a tap
 * and on a macvtap, each direction limited in turn, clean-traffic on.
 *
 * The test plays the guest through the interface's fd: what it writes
 * there is what the guest sends, what it reads is what the guest receives.
 * The host side is a pair of packet sockets: on the tap itself (a receiver
 * bound to ETH_P_IP is served after the ingress hooks, the firewall's and
 * the policer's, so it counts only what the filter and the limit let
 * through),
 * or on the far end of the veth the macvtap sits on.
 *
 * Two things are checked for each combination:
 *   (a) the filter holds whatever the limit: UDP from an address the guest
 *       does not own never reaches the host, frames of a type the filter
 *       refuses never reach the guest, and the good ones of each do;
 *   (b) the limit applies in the direction it names (inbound: to the
 *       guest): a second of 1000-byte frames as fast as they go, the rate
 *       the receiver counts over that second and half a second more, with
 *       margins a busy two-core machine keeps (limit 1 Mbit/s: the limited
 *       way below 3 Mbit/s, the other above 20);
 * and what is in place is read back with tc(8), nft(8) and BandwidthShow.
 * Every test runs in a network namespace of its own. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

#define HOST_MAC "52:54:00:00:00:01"
#define GUEST_MAC "52:54:00:00:00:02"
#define HOST_IP "10.0.0.1"
#define GUEST_IP "10.0.0.2"
#define SPOOF_IP "10.0.0.66"
#define ETH_P_NBTEST 0x88b5 /* IEEE local experimental: clean-traffic drops it */

/* 128 kB/s: 1.05 Mbit/s. */
#define LIMIT_KBS 128
#define LIMITED_MAX_BPS 3e6
#define FREE_MIN_BPS 20e6

struct lab {
        nb_conn *c;
        const char *ifname; /* the guest's interface */
        bool macvtap;
        int guest; /* its fd: the guest's end */
        int host_tx; /* sends toward the guest */
        int host_rx; /* receives IPv4 from the guest */
};

/* ---- the helper ---- */

static void bw_set(struct lab *l, const nb_rate *in, const nb_rate *out)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_bandwidth_set(b, l->ifname, in, out), 0);
        nb_results_free(tu_submit_ok(l->c, b));
}

static void bw_clear(struct lab *l)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_bandwidth_clear(b, l->ifname), 0);
        nb_results_free(tu_submit_ok(l->c, b));
}

/* Owner "vm"'s clean-traffic; true when an ensure found it in place. */
static bool clean_traffic_mode(struct lab *l, nb_fw_mode mode)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_batch *b = nb_batch_new();
        bool same = false;
        nb_results *res;

        ck_assert_int_eq(
                nb_fw_add_clean_traffic(rs, GUEST_MAC, (const char *const[]){GUEST_IP, NULL}), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vm", l->ifname, rs, mode), 0);
        res = tu_submit_ok(l->c, b);
        ck_assert_int_eq(nb_result_firewall(res, 0, NULL, &same, NULL), 0);
        nb_results_free(res);
        nb_fw_ruleset_free(rs);
        return same;
}

static void clean_traffic_on(struct lab *l)
{
        clean_traffic_mode(l, NB_FW_REPLACE);
}

/* ---- the lab ---- */

static int packet_socket(const char *dev, int proto)
{
        struct sockaddr_ll sa = {.sll_family = AF_PACKET, .sll_protocol = htons((uint16_t)proto)};
        int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons((uint16_t)proto));
        int big = 64 << 20;

        sa.sll_ifindex = (int)if_nametoindex(dev);
        ck_assert_msg(fd >= 0 && sa.sll_ifindex > 0, "packet socket on %s: %s", dev,
                      strerror(errno));
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
        return fd;
}

static int take_guest_fd(nb_results *res)
{
        int fd = nb_result_take_fd(res, 0, 0);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
        return fd;
}

/* A tap vt0 made by the helper: the host's end is vt0 itself. */
static void tap_up(struct lab *l)
{
        nb_batch *b;
        nb_results *res;

        tu_private_netns();
        l->c = tu_spawn(TU_ALLOW);
        l->ifname = "vt0";
        l->macvtap = false;
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_tap_create(b, "vt0", NULL), 0);
        ck_assert_int_eq(
                nb_batch_link_set(b, "vt0",
                                  &(nb_link_change){.size = sizeof(nb_link_change), .up = 1}),
                0);
        res = tu_submit_ok(l->c, b);
        l->guest = take_guest_fd(res);
        nb_results_free(res);
        l->host_tx = packet_socket("vt0", 0);
        l->host_rx = packet_socket("vt0", ETH_P_IP);
}

/* A macvtap mvt0 (bridge mode) on the veth p0: the host's end is p1. */
static void macvtap_up(struct lab *l)
{
        nb_batch *b;
        nb_results *res;

        tu_private_netns();
        free(tu_sh("ip link add p0 type veth peer name p1 address %s && ip link set p0 up && "
                   "ip link set p1 up",
                   HOST_MAC));
        l->c = tu_spawn(TU_ALLOW);
        l->ifname = "mvt0";
        l->macvtap = true;
        b = nb_batch_new();
        ck_assert_int_eq(
                nb_batch_macvtap_create(b, "mvt0", "p0", NB_MACVLAN_BRIDGE, GUEST_MAC, false), 0);
        ck_assert_int_eq(
                nb_batch_link_set(b, "mvt0",
                                  &(nb_link_change){.size = sizeof(nb_link_change), .up = 1}),
                0);
        res = tu_submit_ok(l->c, b);
        l->guest = take_guest_fd(res);
        nb_results_free(res);
        l->host_tx = packet_socket("p1", 0);
        l->host_rx = packet_socket("p1", ETH_P_IP);
}

static void lab_down(struct lab *l)
{
        close(l->guest);
        close(l->host_tx);
        close(l->host_rx);
        nb_close(l->c);
}

/* ---- frames ---- */

static void parse_mac(const char *s, uint8_t *mac)
{
        unsigned b[6];

        ck_assert_int_eq(sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]),
                         6);
        for (int i = 0; i < 6; i++)
                mac[i] = (uint8_t)b[i];
}

static void put16(uint8_t *p, unsigned v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

/* An Ethernet frame of len bytes (at least 60) whose payload starts with
 * marker: IPv4/UDP from saddr to daddr when type is ETH_P_IP (a correct
 * header checksum, no UDP one), else just the marker after the header. */
static size_t frame(uint8_t *f, size_t len, const char *dst, const char *src, unsigned type,
                    const char *saddr, const char *daddr, const char *marker)
{
        uint8_t *ip = f + 14;
        uint32_t sum = 0;

        memset(f, 0, len);
        parse_mac(dst, f);
        parse_mac(src, f + 6);
        put16(f + 12, type);
        if (type != ETH_P_IP) {
                memcpy(f + 14, marker, strlen(marker));
                return len;
        }
        ip[0] = 0x45;
        put16(ip + 2, (unsigned)(len - 14));
        ip[8] = 64;
        ip[9] = 17; /* UDP */
        ck_assert_int_eq(inet_pton(AF_INET, saddr, ip + 12), 1);
        ck_assert_int_eq(inet_pton(AF_INET, daddr, ip + 16), 1);
        for (int i = 0; i < 20; i += 2)
                sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
        while (sum >> 16)
                sum = (sum & 0xffff) + (sum >> 16);
        put16(ip + 10, ~sum & 0xffff);
        put16(ip + 20, 40000);
        put16(ip + 22, 9);
        put16(ip + 24, (unsigned)(len - 34));
        memcpy(ip + 28, marker, strlen(marker));
        return len;
}

static bool has_marker(const uint8_t *f, size_t n, const char *marker)
{
        return memmem(f, n < 96 ? n : 96, marker, strlen(marker)) != NULL;
}

/* Frames carrying marker a (in *ret_a) and b (in *ret_b) that fd
 * receives until ms pass without one. */
static void count2(int fd, const char *a, unsigned *ret_a, const char *b, unsigned *ret_b,
                   unsigned ms)
{
        uint8_t buf[2048];
        struct pollfd p = {.fd = fd, .events = POLLIN};

        *ret_a = *ret_b = 0;
        while (poll(&p, 1, (int)ms) > 0) {
                ssize_t len = read(fd, buf, sizeof(buf));
                if (len > 0 && has_marker(buf, (size_t)len, a))
                        (*ret_a)++;
                else if (len > 0 && has_marker(buf, (size_t)len, b))
                        (*ret_b)++;
        }
}

static void drain(int fd)
{
        unsigned a, b;

        count2(fd, "\x01never", &a, "\x01never", &b, 20);
}

static void send_n(int fd, const uint8_t *f, size_t len, int n)
{
        for (int i = 0; i < n; i++) {
                ssize_t w = write(fd, f, len);
                /* A packet socket on a tap hears of a drop at its egress
                 * hook (the to-guest chain) as ENOBUFS. */
                ck_assert_msg(w == (ssize_t)len || (w < 0 && errno == ENOBUFS), "write: %zd (%s)",
                              w, strerror(errno));
        }
}

/* ---- (a): the filter holds ---- */

/* From the guest: UDP from an address it does not own, and from its own;
 * to the guest: frames of a type clean-traffic drops, and IPv4. With
 * filtered false (no rules yet), shows that every probe arrives, so a zero
 * later means the filter. */
static void assert_filter_holds(struct lab *l, bool filtered, const char *what)
{
        uint8_t f[100];
        unsigned spoofed, good, odd, in;

        drain(l->host_rx);
        drain(l->guest);
        for (int i = 0; i < 10; i++) {
                frame(f, sizeof(f), HOST_MAC, GUEST_MAC, ETH_P_IP, SPOOF_IP, HOST_IP, "nb-spoof");
                send_n(l->guest, f, sizeof(f), 1);
                frame(f, sizeof(f), HOST_MAC, GUEST_MAC, ETH_P_IP, GUEST_IP, HOST_IP, "nb-good");
                send_n(l->guest, f, sizeof(f), 1);
                frame(f, sizeof(f), GUEST_MAC, HOST_MAC, ETH_P_NBTEST, NULL, NULL, "nb-odd");
                send_n(l->host_tx, f, sizeof(f), 1);
                frame(f, sizeof(f), GUEST_MAC, HOST_MAC, ETH_P_IP, HOST_IP, GUEST_IP, "nb-in");
                send_n(l->host_tx, f, sizeof(f), 1);
        }
        count2(l->host_rx, "nb-spoof", &spoofed, "nb-good", &good, 300);
        count2(l->guest, "nb-odd", &odd, "nb-in", &in, 300);
        printf("bw-filter: %s %s: from the guest, spoofed %u/10 and own %u/10 arrived; to it, "
               "of a refused type %u/10 and IPv4 %u/10\n",
               l->ifname, what, spoofed, good, odd, in);
        fflush(stdout);
        if (filtered) {
                ck_assert_msg(spoofed == 0, "%s %s: %u spoofed frames reached the host", l->ifname,
                              what, spoofed);
                ck_assert_msg(odd == 0, "%s %s: %u frames the filter refuses reached the guest",
                              l->ifname, what, odd);
        } else {
                ck_assert_msg(spoofed == 10 && odd == 10, "%s %s: the probes do not arrive",
                              l->ifname, what);
        }
        ck_assert_msg(good == 10, "%s %s: %u/10 good frames reached the host", l->ifname, what,
                      good);
        ck_assert_msg(in == 10, "%s %s: %u/10 IPv4 frames reached the guest", l->ifname, what, in);
}

/* ---- (b): the limit's direction ---- */

struct counter {
        int fd;
        const char *marker;
        atomic_bool stop;
        uint64_t bytes;
};

static void *count_bytes(void *arg)
{
        struct counter *c = arg;
        uint8_t buf[2048];
        struct pollfd p = {.fd = c->fd, .events = POLLIN};

        while (!atomic_load(&c->stop)) {
                if (poll(&p, 1, 20) <= 0)
                        continue;
                for (;;) {
                        ssize_t len = read(c->fd, buf, sizeof(buf));
                        if (len <= 0)
                                break;
                        if (has_marker(buf, (size_t)len, c->marker))
                                c->bytes += (uint64_t)len;
                }
        }
        return NULL;
}

/* Bits per second that arrive at rx while tx sends 1000-byte frames as fast
 * as it can for 1 s, counted over that second and 0.5 s after it. */
static double rate(int tx, int rx, const uint8_t *f, size_t len, const char *marker)
{
        struct counter c = {.fd = rx, .marker = marker};
        pthread_t t;
        uint64_t t0, end;

        drain(rx);
        ck_assert_int_eq(pthread_create(&t, NULL, count_bytes, &c), 0);
        t0 = tu_now_us();
        end = t0 + 1000000;
        while (tu_now_us() < end)
                for (int i = 0; i < 32; i++)
                        (void)!write(tx, f, len); /* a full queue drops: that is the point */
        usleep(500000);
        atomic_store(&c.stop, true);
        pthread_join(t, NULL);
        return (double)c.bytes * 8 / ((double)(tu_now_us() - t0) / 1e6);
}

static void rates(struct lab *l, double *ret_in, double *ret_out)
{
        uint8_t f[1000];

        frame(f, sizeof(f), GUEST_MAC, HOST_MAC, ETH_P_IP, HOST_IP, GUEST_IP, "nb-rate-in");
        *ret_in = rate(l->host_tx, l->guest, f, sizeof(f), "nb-rate-in");
        frame(f, sizeof(f), HOST_MAC, GUEST_MAC, ETH_P_IP, GUEST_IP, HOST_IP, "nb-rate-out");
        *ret_out = rate(l->guest, l->host_rx, f, sizeof(f), "nb-rate-out");
}

static void assert_limited(const struct lab *l, const char *what, double limited, double free_bps)
{
        printf("bw-filter: %s %s limited to %.2f Mbit/s: that way %.2f Mbit/s, the other %.2f "
               "Mbit/s\n",
               l->ifname, what, LIMIT_KBS * 1024 * 8 / 1e6, limited / 1e6, free_bps / 1e6);
        fflush(stdout);
        ck_assert_msg(limited < LIMITED_MAX_BPS, "%s: %s limited, that way ran at %.2f Mbit/s",
                      l->ifname, what, limited / 1e6);
        ck_assert_msg(free_bps > FREE_MIN_BPS,
                      "%s: %s limited, the other way ran at %.2f Mbit/s only", l->ifname, what,
                      free_bps / 1e6);
}

/* ---- what is in place ---- */

/* Whether a direction's limit is the root htb of the interface (its
 * egress) or the policer of what enters it. */
static bool shaped(const struct lab *l, bool inbound)
{
        return inbound != l->macvtap; /* a tap's inbound, a macvtap's outbound */
}

/* tc's count of bytes the root htb of dev sent. */
static long long root_htb_bytes(const char *dev)
{
        char *out = tu_sh("python3 '" TU_PY("tc_json.py") "' qdisc %s "
                                                          "\"[q['bytes'] for q in d if "
                                                          "q.get('root') and q['kind'] == 'htb']\"",
                          dev);
        long long n = -1;

        sscanf(out, "[%lld]", &n);
        free(out);
        return n;
}

/* The policer of what enters the interface: netbroker_bw's chain, after
 * the firewall's, dropping what is over the limit; or no chain at all.
 * Never an IFB, nor a tc redirect or police (they would run before the
 * firewall, or take frames past other ports' chains). */
static void assert_policer(const struct lab *l, bool present)
{
        char want[160], chain[32], *text;

        snprintf(chain, sizeof(chain), "nbbw%s", tu_link_get(l->ifname, "ifindex"));
        text = tu_sh("nft list chain netdev netbroker_bw %s 2>&1 || true", chain);
        if (!present) {
                ck_assert_msg(strstr(text, "No such file"), "a policer chain stayed: %s", text);
                free(text);
        } else {
                snprintf(want, sizeof(want), "type filter hook ingress device \"%s\" priority 100;",
                         l->ifname);
                ck_assert_msg(strstr(text, want), "no '%s' in:\n%s", want, text);
                snprintf(want, sizeof(want), "limit rate over %u kbytes/second", LIMIT_KBS);
                ck_assert_msg(strstr(text, want) && strstr(text, "drop"),
                              "no '%s ... drop' in:\n%s", want, text);
                free(text);
        }
        text = tu_sh("tc filter show dev %s ingress; ip -br link | grep '^nbifb' || true",
                     l->ifname);
        ck_assert_msg(!strstr(text, "mirred") && !strstr(text, "police") && !strstr(text, "nbifb"),
                      "a tc redirect, tc police or IFB on %s: %s", l->ifname, text);
        free(text);
}

static void assert_shown(const struct lab *l, bool inbound)
{
        nb_batch *b = nb_batch_new();
        const char *in_mech, *out_mech;
        bool has_in, has_out;
        nb_rate in = NB_RATE_INIT, out = NB_RATE_INIT;
        nb_results *res;

        ck_assert_int_eq(nb_batch_bandwidth_show(b, l->ifname), 0);
        res = tu_submit_ok(l->c, b);
        ck_assert_int_eq(nb_result_bandwidth_show(res, 0, &has_in, &in, &has_out, &out), 0);
        ck_assert_int_eq(nb_result_bandwidth_show_mechanisms(res, 0, &in_mech, &out_mech), 0);
        ck_assert_msg(has_in == inbound && has_out == !inbound,
                      "%s: BandwidthShow has inbound %d, outbound %d", l->ifname, has_in, has_out);
        ck_assert_uint_eq(inbound ? in.average : out.average, LIMIT_KBS);
        /* The policer on the way that enters the interface. */
        if (!shaped(l, inbound))
                ck_assert_str_eq(inbound ? in_mech : out_mech, "nft-limit");
        else
                ck_assert_msg(strncmp(inbound ? in_mech : out_mech, "htb", 3) == 0,
                              "mechanism '%s'", inbound ? in_mech : out_mech);
        ck_assert_str_eq(inbound ? out_mech : in_mech, "");
        nb_results_free(res);
}

/* ---- the tests ---- */

static void each_way(struct lab *l)
{
        const nb_rate lim = {.size = sizeof(nb_rate), .average = LIMIT_KBS};
        double in, out;

        /* Without rules the probes arrive, limit or not. */
        bw_set(l, NULL, &lim);
        assert_filter_holds(l, false, "no filter, outbound limit");
        bw_clear(l);
        clean_traffic_on(l);
        assert_filter_holds(l, true, "filter, no limit");
        for (int inbound = 0; inbound < 2; inbound++) {
                const char *what = inbound ? "inbound" : "outbound";
                long long before;
                bw_set(l, inbound ? &lim : NULL, inbound ? NULL : &lim);
                before = shaped(l, inbound) ? root_htb_bytes(l->ifname) : 0;
                assert_filter_holds(l, true,
                                    inbound ? "filter, inbound limit" : "filter, outbound limit");
                rates(l, &in, &out);
                assert_limited(l, what, inbound ? in : out, inbound ? out : in);
                assert_policer(l, !shaped(l, inbound));
                assert_shown(l, inbound);
                /* The shaping was on the interface when this way is its egress. */
                if (shaped(l, inbound))
                        ck_assert_msg(root_htb_bytes(l->ifname) > before + 100000,
                                      "%s: the htb of %s sent %lld bytes, then %lld", what,
                                      l->ifname, before, root_htb_bytes(l->ifname));
        }
        bw_clear(l);
        assert_policer(l, false);
        rates(l, &in, &out);
        printf("bw-filter: %s no limit: inbound %.2f Mbit/s, outbound %.2f Mbit/s\n", l->ifname,
               in / 1e6, out / 1e6);
        ck_assert(in > FREE_MIN_BPS && out > FREE_MIN_BPS);
}

/* A tap: inbound is its egress (the root htb), outbound its ingress,
 * policed after the firewall's chains. The outbound limit used to be a
 * tc redirect, before those chains: spoofed frames passed; then a fwd to
 * an IFB, whose frames skipped other ports' egress chains. */
START_TEST(test_tap_filter_holds_and_each_limit_applies_its_way)
{
        struct lab l;

        tap_up(&l);
        each_way(&l);
        lab_down(&l);
}
END_TEST

/* A macvtap: the other way round (what the guest sends leaves through its
 * egress), as libvirt has it for <interface type='direct'>. The limits
 * used to be swapped, and the inbound one bypassed the to-guest chain. */
START_TEST(test_macvtap_filter_holds_and_each_limit_applies_its_way)
{
        struct lab l;

        macvtap_up(&l);
        each_way(&l);
        lab_down(&l);
}
END_TEST

/* ---- a limited guest and another guest's filter ---- */

#define A_MAC "52:54:00:00:00:0a"
#define B_MAC "52:54:00:00:00:0b"
#define A_IP "10.0.0.10"
#define B_IP "10.0.0.11"

/* A tap made by the helper, up, on bridge br0; its guest's fd. */
static int bridged_tap(nb_conn *c, const char *name)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        int fd;

        ck_assert_int_eq(nb_batch_tap_create(b, name, NULL), 0);
        ck_assert_int_eq(
                nb_batch_link_set(b, name,
                                  &(nb_link_change){.size = sizeof(nb_link_change), .up = 1}),
                0);
        res = tu_submit_ok(c, b);
        fd = take_guest_fd(res);
        nb_results_free(res);
        free(tu_sh("ip link set %s master br0", name));
        return fd;
}

/* Guest A sends guest B, through the bridge, 10 frames of a type B's
 * clean-traffic refuses and 10 IPv4 ones; how many of each B got. */
static void a_to_b(int a, int b, unsigned *ret_odd, unsigned *ret_ip)
{
        uint8_t f[100];

        drain(b);
        for (int i = 0; i < 10; i++) {
                frame(f, sizeof(f), B_MAC, A_MAC, ETH_P_NBTEST, NULL, NULL, "nb-a-odd");
                send_n(a, f, sizeof(f), 1);
                frame(f, sizeof(f), B_MAC, A_MAC, ETH_P_IP, A_IP, B_IP, "nb-a-ip");
                send_n(a, f, sizeof(f), 1);
        }
        count2(b, "nb-a-odd", ret_odd, "nb-a-ip", ret_ip, 300);
}

/* What A sends B must meet B's to-guest chain (vb's egress hook) whatever
 * limit A has. An outbound limit through an IFB broke this: the IFB hands
 * frames back with nf_skip_egress set, the bridge forwards them to vb, and
 * vb's egress hook is skipped. */
START_TEST(test_a_limited_guest_does_not_pass_another_guests_filter)
{
        const nb_rate lim = {.size = sizeof(nb_rate), .average = LIMIT_KBS};
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        unsigned odd, ip;
        nb_batch *b;
        nb_conn *c;
        int ga, gb;

        tu_private_netns();
        c = tu_spawn(TU_ALLOW);
        free(tu_sh("ip link add br0 type bridge && ip link set br0 up"));
        ga = bridged_tap(c, "va0");
        gb = bridged_tap(c, "vb0");
        /* Without B's filter, A's frames of both kinds arrive. */
        a_to_b(ga, gb, &odd, &ip);
        ck_assert_msg(odd == 10 && ip == 10, "no filter: %u/10 odd and %u/10 IPv4 arrived", odd,
                      ip);
        b = nb_batch_new();
        ck_assert_int_eq(nb_fw_add_clean_traffic(rs, B_MAC, (const char *const[]){B_IP, NULL}), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, "vmb", "vb0", rs, NB_FW_REPLACE), 0);
        nb_results_free(tu_submit_ok(c, b));
        nb_fw_ruleset_free(rs);
        for (int limited = 0; limited < 2; limited++) {
                if (limited) {
                        b = nb_batch_new();
                        ck_assert_int_eq(nb_batch_bandwidth_set(b, "va0", NULL, &lim), 0);
                        nb_results_free(tu_submit_ok(c, b));
                }
                a_to_b(ga, gb, &odd, &ip);
                printf("bw-filter: A %s, B's filter on: %u/10 refused and %u/10 IPv4 frames "
                       "reached B\n",
                       limited ? "with an outbound limit" : "unlimited", odd, ip);
                fflush(stdout);
                ck_assert_msg(odd == 0, "A %s: %u frames B's filter refuses reached B",
                              limited ? "limited" : "unlimited", odd);
                ck_assert_msg(ip == 10, "A %s: %u/10 IPv4 frames reached B",
                              limited ? "limited" : "unlimited", ip);
        }
        close(ga);
        close(gb);
        nb_close(c);
}
END_TEST

/* ---- a firewall reload ---- */

/* What the daemon's event callback heard: "family:table;" in order. */
static void on_event(nb_conn *c, const nb_event *ev, void *opaque)
{
        char *heard = opaque;
        size_t len = strlen(heard);

        (void)c;
        snprintf(heard + len, 256 - len, "%d:%s;", ev->family, ev->table);
}

/* Dispatch as an event loop does until `want` was heard, 5 s at most. */
static void await_heard(struct lab *l, const char *heard, const char *want)
{
        for (int i = 0; i < 50 && strcmp(heard, want) != 0; i++) {
                struct pollfd p = {.fd = nb_conn_fd(l->c), .events = POLLIN};
                if (poll(&p, 1, 100) > 0)
                        ck_assert_int_ge(nb_conn_dispatch(l->c), 0);
        }
        ck_assert_msg(strcmp(heard, want) == 0, "%s: heard '%s', not '%s'", l->ifname, heard, want);
}

/* `nft flush ruleset` (a firewall service's reload) takes the filter and
 * the policer with it: the guest is unfiltered and unlimited, and the
 * daemon hears of both tables through its event loop. Put back as the
 * daemon would (ensure, the limit again), both hold again. The helper's
 * own deletion of its table (the last owner removed) is no event. */
static void flush_and_put_back(struct lab *l)
{
        const nb_rate lim = {.size = sizeof(nb_rate), .average = LIMIT_KBS};
        const bool in = !shaped(l, true); /* the way the policer limits */
        char heard[256] = "";
        double rin, rout;

        ck_assert(nb_conn_has_feature(l->c, "events"));
        ck_assert_int_eq(nb_conn_on_event(l->c, on_event, heard), 0);
        clean_traffic_on(l);
        bw_set(l, in ? &lim : NULL, in ? NULL : &lim);
        assert_filter_holds(l, true, "filter and policer");
        assert_policer(l, true);

        free(tu_sh("nft flush ruleset"));
        await_heard(l, heard, "5:netbroker;5:netbroker_bw;");
        assert_filter_holds(l, false, "after nft flush ruleset");
        assert_policer(l, false);

        /* What the daemon does on hearing it. */
        ck_assert_msg(!clean_traffic_mode(l, NB_FW_ENSURE), "ensure found the flushed owner");
        bw_set(l, in ? &lim : NULL, in ? NULL : &lim);
        assert_filter_holds(l, true, "put back");
        assert_policer(l, true);
        rates(l, &rin, &rout);
        assert_limited(l, in ? "inbound" : "outbound", in ? rin : rout, in ? rout : rin);

        /* Ours is no event: the last owner removed drops the table. */
        heard[0] = '\0';
        {
                nb_batch *b = nb_batch_new();
                ck_assert_int_eq(nb_batch_firewall_remove(b, "vm"), 0);
                nb_results_free(tu_submit_ok(l->c, b));
        }
        bw_clear(l);
        usleep(300000);
        ck_assert_int_ge(nb_conn_dispatch(l->c), 0);
        ck_assert_msg(heard[0] == '\0', "heard '%s' of the helper's own deletion", heard);
        ck_assert_uint_eq(tu_stat(l->c, "events_sent"), 2);
}

START_TEST(test_tap_filter_and_limit_flushed_are_heard_of_and_put_back)
{
        struct lab l;

        tap_up(&l);
        flush_and_put_back(&l);
        lab_down(&l);
}
END_TEST

START_TEST(test_macvtap_filter_and_limit_flushed_are_heard_of_and_put_back)
{
        struct lab l;

        macvtap_up(&l);
        flush_and_put_back(&l);
        lab_down(&l);
}
END_TEST

Suite *bw_filter_suite(void)
{
        Suite *s = suite_create("bw-filter");
        TCase *tc = tcase_create("bw-filter");

        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_tap_filter_holds_and_each_limit_applies_its_way);
        tcase_add_test(tc, test_macvtap_filter_holds_and_each_limit_applies_its_way);
        tcase_add_test(tc, test_a_limited_guest_does_not_pass_another_guests_filter);
        tcase_add_test(tc, test_tap_filter_and_limit_flushed_are_heard_of_and_put_back);
        tcase_add_test(tc, test_macvtap_filter_and_limit_flushed_are_heard_of_and_put_back);
        suite_add_tcase(s, tc);
        return s;
}
