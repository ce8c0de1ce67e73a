// SPDX-License-Identifier: LGPL-2.1-or-later
/* Requests for the corpus and the allocation-failure test; see requests.h. */
#include "requests.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "internal.h"

#define MAC "52:54:00:12:34:56"

static const char *const guest_ips[] = {"192.168.122.12", NULL};

/* A guest's standard filters, as libvirt's daemon would ask for them. */
static int add_guest_firewall(nb_batch *b, const char *owner, const char *ifname, nb_fw_mode mode)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        int r = rs ? 0 : -ENOMEM;

        if (r == 0)
                r = nb_fw_add_no_promisc(rs, MAC);
        if (r == 0)
                r = nb_fw_add_clean_traffic(rs, MAC, guest_ips);
        if (r == 0)
                r = nb_fw_add_allow_dhcp(rs, "192.168.122.1");
        if (r == 0)
                r = nb_batch_firewall_apply(b, owner, ifname, rs, mode);
        nb_fw_ruleset_free(rs);
        return r;
}

/* libvirt's fields (issue 13): priorities, a guarded group, a root group,
 * RARP, VLAN encapsulation, DSCP, ICMP code, TCP flags, ranges, negations
 * and a comment. */
static int add_libvirt_fields(nb_fw_ruleset *rs)
{
        const nb_fw_rule guard = {.size = sizeof(nb_fw_rule), .ether_type = 0x86dd};
        nb_fw_rule v6 = {.size = sizeof(nb_fw_rule),
                         .verdict = NB_FW_DROP,
                         .priority = -10,
                         .ether_type = 0x86dd,
                         .l4_proto = 17,
                         .l4_proto_not = true,
                         .comment = "not udp"};
        nb_fw_rule tcp = {.size = sizeof(nb_fw_rule),
                          .verdict = NB_FW_RETURN,
                          .ip_src = "10.0.0.1-10.0.0.9",
                          .has_dscp = true,
                          .dscp = 46,
                          .dscp_not = true,
                          .l4_proto = 6,
                          .dport_min = 1,
                          .dport_max = 1023,
                          .dport_not = true,
                          .tcp_flags_mask = 0x12,
                          .tcp_flags = 0x02};
        nb_fw_rule icmp = {.size = sizeof(nb_fw_rule),
                           .verdict = NB_FW_DROP,
                           .ether_type = 0x0800,
                           .l4_proto = 1,
                           .has_icmp_type = true,
                           .icmp_type = 3,
                           .has_icmp_code = true,
                           .icmp_code = 4,
                           .icmp_not = true};
        nb_fw_rule rarp = {.size = sizeof(nb_fw_rule),
                           .verdict = NB_FW_ACCEPT,
                           .priority = -500,
                           .ether_type = 0x8035,
                           .arp_op = 3,
                           .arp_htype = 1,
                           .arp_ptype = 0x0800,
                           .arp_target_mac = MAC,
                           .arp_target_mac_not = true};
        nb_fw_rule vlan = {.size = sizeof(nb_fw_rule),
                           .direction = NB_FW_TO_GUEST,
                           .verdict = NB_FW_DROP,
                           .has_vlan_id = true,
                           .vlan_id = 7,
                           .vlan_id_not = true,
                           .vlan_encap = 0x0806};
        int r = nb_fw_group_ex(rs, "ipv6",
                               &(nb_fw_group_opts){.size = sizeof(nb_fw_group_opts),
                                                   .priority = -300,
                                                   .guard = &guard});

        if (r == 0)
                r = nb_fw_rule_add(rs, &v6);
        if (r == 0)
                r = nb_fw_group_ex(rs, "root",
                                   &(nb_fw_group_opts){.size = sizeof(nb_fw_group_opts),
                                                       .priority = 0,
                                                       .root = true});
        if (r == 0)
                r = nb_fw_rule_add(rs, &rarp);
        if (r == 0)
                r = nb_fw_rule_add(rs, &vlan);
        if (r == 0)
                r = nb_fw_group_ex(
                        rs, "ipv4",
                        &(nb_fw_group_opts){.size = sizeof(nb_fw_group_opts), .priority = 100});
        if (r == 0)
                r = nb_fw_rule_add(rs, &tcp);
        if (r == 0)
                r = nb_fw_rule_add(rs, &icmp);
        return r;
}

/* Rules that use every match the protocol has. */
static int add_rich_firewall(nb_batch *b, const char *owner, const char *ifname)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();
        nb_fw_rule tcp = {.size = sizeof(nb_fw_rule),
                          .direction = NB_FW_FROM_GUEST,
                          .verdict = NB_FW_REJECT,
                          .ether_src = MAC,
                          .ip_src = "10.0.0.0/8",
                          .ip_src_not = true,
                          .l4_proto = 6,
                          .sport_min = 1024,
                          .sport_max = 65535,
                          .dport_min = 22};
        nb_fw_rule v6 = {.size = sizeof(nb_fw_rule),
                         .direction = NB_FW_TO_GUEST,
                         .verdict = NB_FW_DROP,
                         .ether_dst = "ff:ff:ff:00:00:00/ff:ff:ff:00:00:00",
                         .ip_dst = "fe80::/64",
                         .l4_proto = 58,
                         .has_icmp_type = true,
                         .icmp_type = 135};
        nb_fw_rule arp = {.size = sizeof(nb_fw_rule),
                          .direction = NB_FW_FROM_GUEST,
                          .verdict = NB_FW_RETURN,
                          .arp_op = 1,
                          .arp_sender_mac = MAC,
                          .arp_sender_ip = "192.168.122.12",
                          .arp_target_ip = "192.168.122.0/24",
                          .arp_target_ip_not = true};
        nb_fw_rule vlan = {.size = sizeof(nb_fw_rule),
                           .direction = NB_FW_TO_GUEST,
                           .verdict = NB_FW_ACCEPT,
                           .has_vlan_id = true,
                           .vlan_id = 42,
                           .ether_type = 0x0800,
                           .ether_type_not = true};
        int r = rs ? 0 : -ENOMEM;

        if (r == 0)
                r = nb_fw_group(rs, "rich");
        if (r == 0)
                r = nb_fw_rule_add(rs, &tcp);
        if (r == 0)
                r = nb_fw_rule_add(rs, &v6);
        if (r == 0)
                r = nb_fw_group(rs, "arp-and-vlan");
        if (r == 0)
                r = nb_fw_rule_add(rs, &arp);
        if (r == 0)
                r = nb_fw_rule_add(rs, &vlan);
        if (r == 0)
                r = add_libvirt_fields(rs);
        if (r == 0)
                r = nb_batch_firewall_apply(b, owner, ifname, rs, NB_FW_REPLACE);
        nb_fw_ruleset_free(rs);
        return r;
}

static const char *const exec_argv[] = {"cat", "-", NULL};
static const char *const exec_env[] = {"FOO=bar", "LC_ALL=C.UTF-8", NULL};
static const char exec_stdin[] = "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n";

static int op_ping(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_ping(b);
}

static int op_stats(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_stats(b);
}

static int op_exec(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_exec(b, "/bin/cat", exec_argv, exec_env, exec_stdin, sizeof(exec_stdin) - 1,
                             5000);
}

static int op_tap(nb_batch *b, int fd)
{
        nb_tap_opts o = {.size = sizeof(nb_tap_opts),
                         .vnet_hdr = true,
                         .queues = 2,
                         .set_owner = true,
                         .uid = 107,
                         .gid = 107};

        (void)fd;
        return nb_batch_tap_create(b, "vnet%d", &o);
}

static int op_macvtap(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_macvtap_create(b, "macvtap%d", "eth0", NB_MACVLAN_BRIDGE, MAC, true);
}

static int op_macvlan(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_macvlan_create(b, "macvlan%d", "eth0", NB_MACVLAN_VEPA, NULL);
}

static int op_veth(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_veth_create(b, "veth-a", "veth-b", -1);
}

static int op_bridge(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_bridge_create(b, "nbbr0");
}

static int op_link_set(nb_batch *b, int fd)
{
        nb_link_change c = {.size = sizeof(nb_link_change),
                            .up = 1,
                            .mtu = 9000,
                            .mac = "52:54:00:aa:bb:cc",
                            .master = "br0"};

        (void)fd;
        return nb_batch_link_set(b, "vnet0", &c);
}

static int op_link_delete(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_link_delete(b, "macvtap0");
}

static int op_names(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_names_dump(b);
}

static int op_fw_apply(nb_batch *b, int fd)
{
        (void)fd;
        return add_guest_firewall(b, "guest1", "macvtap0", NB_FW_ENSURE);
}

static int op_fw_remove(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_firewall_remove(b, "guest0");
}

static int op_fw_list(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_firewall_list(b);
}

int nbt_build_fw_counters(nb_batch *b, int netns_fd)
{
        (void)netns_fd;
        return nb_batch_firewall_list_counters(b);
}

static int op_bw_set(nb_batch *b, int fd)
{
        nb_rate in = {
                .size = sizeof(nb_rate), .average = 1000, .peak = 2000, .burst = 256, .floor = 500};
        nb_rate out = {.size = sizeof(nb_rate), .average = 8000};

        (void)fd;
        return nb_batch_bandwidth_set(b, "vnet0", &in, &out);
}

static int op_bw_clear(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_bandwidth_clear(b, "vnet0");
}

/* with_exec: an Exec parks the job until its program ends; without, the
 * whole batch runs inside nb_job_start. */
static int every_op(nb_batch *b, int netns_fd, bool with_exec)
{
        nb_link_change c = {.size = sizeof(nb_link_change),
                            .up = 1,
                            .mtu = 1400,
                            .mac = "52:54:00:aa:bb:cc",
                            .master = "nbbr0"};
        nb_link_change c0 = {.size = sizeof(nb_link_change), .up = 0, .mtu = 4000, .master = "br0"};
        nb_rate in = {.size = sizeof(nb_rate), .average = 1000, .peak = 2000, .burst = 64},
                out = {.size = sizeof(nb_rate), .average = 500};
        nb_rate in0 = {.size = sizeof(nb_rate), .average = 2000};
        int r = 0;

        r = r ?: nb_batch_ping(b);
        r = r ?: nb_batch_stats(b);
        if (with_exec)
                r = r ?: op_exec(b, -1);
        r = r ?: op_tap(b, -1);
        r = r ?: op_macvtap(b, -1);
        r = r ?: op_macvlan(b, -1);
        r = r ?: nb_batch_veth_create(b, "veth-a", "veth-b", -1);
        if (netns_fd >= 0)
                r = r ?: nb_batch_veth_create(b, "veth-c", "eth0", netns_fd);
        r = r ?: nb_batch_bridge_create(b, "nbbr0");
        r = r ?: nb_batch_bridge_create(b, "nbgone0");
        r = r ?: nb_batch_link_set(b, "veth-a", &c);
        /* Changes to interfaces that were there before: undone on failure. */
        r = r ?: nb_batch_link_set(b, "vnet0", &c0);
        r = r ?: nb_batch_link_delete(b, "nbgone0");
        r = r ?: nb_batch_names_dump(b);
        r = r ?: nb_batch_bandwidth_set(b, "veth-a", &in, &out);
        r = r ?: nb_batch_bandwidth_set(b, "macvtap0", &in0, NULL);
        r = r ?: nb_batch_bandwidth_clear(b, "vnet0");
        r = r ?: nb_batch_firewall_list(b);
        r = r ?: add_guest_firewall(b, "guest1", "veth-a", NB_FW_REPLACE);
        r = r ?: add_rich_firewall(b, "guest2", "vnet0");
        r = r ?: nb_batch_firewall_remove(b, "guest0");
        return r;
}

int nbt_build_every_op(nb_batch *b, int netns_fd)
{
        return every_op(b, netns_fd, true);
}

int nbt_build_every_op_but_exec(nb_batch *b, int netns_fd)
{
        return every_op(b, netns_fd, false);
}

int nbt_build_eperm_tap(nb_batch *b, int netns_fd)
{
        (void)netns_fd;
        return nb_batch_tap_create(b, "eperm0", NULL);
}

/* BridgeOptSet of a delay and STP on, on fail0: the fake takes the delay,
 * then refuses STP (EIO). */
int nbt_build_half_bridge_opt(nb_batch *b, int netns_fd)
{
        nb_bridge_opts o = NB_BRIDGE_OPTS_INIT;

        (void)netns_fd;
        o.stp = 1;
        o.forward_delay_cs = 400;
        return nb_batch_bridge_opt_set(b, "fail0", &o);
}

/* The reading ops over the fake kernel's world: every interface, one, and
 * the limits on vnet0 (in and out). */
int nbt_build_shows(nb_batch *b, int netns_fd)
{
        int r = 0;

        (void)netns_fd;
        r = r ?: nb_batch_link_list(b, NULL);
        r = r ?: nb_batch_link_list(b, "vnet0");
        r = r ?: nb_batch_bandwidth_show(b, "vnet0");
        return r;
}

/* Firewall ops that go on after a failure: each op's status must agree
 * with what the transaction commits. */
int nbt_build_firewall_continue(nb_batch *b, int netns_fd)
{
        int r = 0;

        (void)netns_fd;
        nb_batch_set_flags(b, NB_BATCH_CONTINUE_ON_ERROR);
        r = r ?: add_guest_firewall(b, "guest1", "vnet0", NB_FW_REPLACE);
        r = r ?: add_rich_firewall(b, "guest2", "vnet0");
        r = r ?: nb_batch_firewall_remove(b, "guest0");
        return r;
}

int nbt_build_late_commit_failure(nb_batch *b, int netns_fd)
{
        int r = 0;

        r = r ?: op_tap(b, netns_fd);
        r = r ?: add_guest_firewall(b, "failg1", "vnet0", NB_FW_REPLACE);
        r = r ?: nb_batch_firewall_remove(b, "gone0");
        return r;
}

int nbt_build_last_op_commit_failure(nb_batch *b, int netns_fd)
{
        int r = 0;

        r = r ?: op_tap(b, netns_fd);
        r = r ?: add_guest_firewall(b, "failg1", "vnet0", NB_FW_REPLACE);
        r = r ?: add_guest_firewall(b, "guest2", "vnet0", NB_FW_REPLACE);
        return r;
}

/* A later op fails: everything before it is undone. */
static int rollback(nb_batch *b, int fd)
{
        nb_rate in = {.size = sizeof(nb_rate), .average = 100};
        nb_link_change c = {.size = sizeof(nb_link_change), .up = 0, .mtu = 1280};
        int r = 0;

        (void)fd;
        r = r ?: op_tap(b, -1);
        r = r ?: nb_batch_veth_create(b, "veth-a", "veth-b", -1);
        r = r ?: nb_batch_link_set(b, "vnet0", &c);
        r = r ?: nb_batch_bandwidth_set(b, "veth-a", &in, NULL);
        r = r ?: add_guest_firewall(b, "guest1", "veth-a", NB_FW_REPLACE);
        r = r ?: nb_batch_link_set(b, "fail0", &c);
        r = r ?: nb_batch_ping(b);
        return r;
}

/* Failures everywhere, and the batch goes on. */
static int continue_on_error(nb_batch *b, int fd)
{
        const char *const argv[] = {"false", NULL};
        nb_rate in = {.size = sizeof(nb_rate), .average = 100};
        int r = 0;

        (void)fd;
        nb_batch_set_flags(b, NB_BATCH_CONTINUE_ON_ERROR);
        r = r ?: nb_batch_tap_create(b, "fail%d", NULL);
        r = r ?: nb_batch_exec(b, "/bin/false", argv, NULL, NULL, 0, 0);
        r = r ?: nb_batch_exec(b, "/bin/sleep", NULL, NULL, NULL, 0, 100);
        r = r ?: nb_batch_exec(b, "/usr/sbin/missing", NULL, NULL, NULL, 0, 0);
        r = r ?: nb_batch_bandwidth_set(b, "fail0", &in, NULL);
        r = r ?: nb_batch_bandwidth_clear(b, "fail0");
        r = r ?: nb_batch_link_delete(b, "fail0");
        r = r ?: nb_batch_firewall_remove(b, "nobody");
        r = r ?: add_guest_firewall(b, "fail-owner", "vnet0", NB_FW_REPLACE);
        r = r ?: nb_batch_bridge_create(b, "nbbr0");
        return r;
}

/* Refused in validation: op 3 names an interface nobody has. */
static int refused(nb_batch *b, int fd)
{
        nb_link_change c = {.size = sizeof(nb_link_change), .up = 1};
        int r = 0;

        (void)fd;
        r = r ?: nb_batch_ping(b);
        r = r ?: nb_batch_tap_create(b, "vnet%d", NULL);
        r = r ?: nb_batch_link_set(b, "nosuch0", &c);
        return r;
}

/* A veth whose peer goes into another namespace: the request carries an fd. */
static int veth_netns(nb_batch *b, int fd)
{
        return nb_batch_veth_create(b, "veth%d", "eth0", fd);
}

/* Many creates from templates: the name allocator's next-fit cursor. */
static int many_macvtaps(nb_batch *b, int fd)
{
        int r = 0;

        (void)fd;
        for (int i = 0; i < 12 && r == 0; i++)
                r = nb_batch_macvtap_create(b, "macvtap%d", "eth0", NB_MACVLAN_BRIDGE, NULL, false);
        r = r ?: nb_batch_link_delete(b, "macvtap0");
        r = r ?: nb_batch_names_dump(b);
        return r;
}

static int exec_outputs(nb_batch *b, int fd)
{
        char big[300];
        int r = 0;

        (void)fd;
        memset(big, 'x', sizeof(big));
        r = r ?: nb_batch_exec(b, "/bin/cat", NULL, NULL, big, sizeof(big), 0);
        r = r ?: nb_batch_exec(b, "/bin/true", NULL, NULL, NULL, 0, 0);
        r = r ?: nb_batch_exec(b, "/bin/cat", NULL, NULL, big, sizeof(big), 0);
        r = r ?: nb_batch_stats(b);
        return r;
}

static int op_link_list(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_link_list(b, NULL);
}

static int op_bw_show(nb_batch *b, int fd)
{
        (void)fd;
        return nb_batch_bandwidth_show(b, "vnet0");
}

static int firewall_rich(nb_batch *b, int fd)
{
        (void)fd;
        return add_rich_firewall(b, "guest2", "vnet0");
}

const struct nbt_request nbt_requests[] = {
        {"op01-ping", op_ping},
        {"op02-stats", op_stats},
        {"op03-exec", op_exec},
        {"op04-tap-create", op_tap},
        {"op05-macvtap-create", op_macvtap},
        {"op06-macvlan-create", op_macvlan},
        {"op07-veth-create", op_veth},
        {"op08-bridge-create", op_bridge},
        {"op09-link-set", op_link_set},
        {"op10-link-delete", op_link_delete},
        {"op11-names-dump", op_names},
        {"op12-firewall-apply", op_fw_apply},
        {"op13-firewall-remove", op_fw_remove},
        {"op14-firewall-list", op_fw_list},
        {"op15-bandwidth-set", op_bw_set},
        {"op16-bandwidth-clear", op_bw_clear},
        {"every-op", nbt_build_every_op},
        {"rollback", rollback},
        {"continue-on-error", continue_on_error},
        {"refused", refused},
        {"veth-netns", veth_netns},
        {"many-macvtaps", many_macvtaps},
        {"exec-outputs", exec_outputs},
        {"firewall-rich", firewall_rich},
        {"firewall-continue", nbt_build_firewall_continue},
        /* Last, so the seeds above keep their request ids. */
        {"op17-link-list", op_link_list},
        {"op18-bandwidth-show", op_bw_show},
        {"shows", nbt_build_shows},
        {"op19-firewall-list-counters", nbt_build_fw_counters},
};
const size_t nbt_n_requests = sizeof(nbt_requests) / sizeof(*nbt_requests);

static int pack(const Netbroker__ClientMessage *m, uint8_t **ret, size_t *ret_len)
{
        size_t len = protobuf_c_message_get_packed_size(&m->base);
        uint8_t *buf = malloc(len ? len : 1);

        if (!buf)
                return -ENOMEM;
        protobuf_c_message_pack(&m->base, buf);
        *ret = buf;
        *ret_len = len;
        return 0;
}

int nbt_pack_request(const nb_batch *b, uint64_t id, uint8_t **ret, size_t *ret_len)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = b->req;

        req.id = id;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        return pack(&m, ret, ret_len);
}

int nbt_pack_hello(uint8_t **ret, size_t *ret_len)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Hello h = NETBROKER__HELLO__INIT;

        h.version = NBP_PROTOCOL_VERSION;
        h.software = (char *)"netbroker-fuzz";
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_HELLO;
        m.hello = &h;
        return pack(&m, ret, ret_len);
}

int nbt_pack(nbt_build_fn build, uint64_t id, int netns_fd, struct nbt_packed *ret)
{
        nb_batch *b = nb_batch_new();
        struct nbt_packed p = {0};
        int r = b ? build(b, netns_fd) : -ENOMEM;

        if (r == 0 && b->nfds > sizeof(p.fds) / sizeof(*p.fds))
                r = -E2BIG;
        if (r == 0)
                r = nbt_pack_request(b, id, &p.body, &p.len);
        for (size_t i = 0; r == 0 && i < b->nfds; i++) {
                p.fds[p.nfds] = fcntl(b->fds[i], F_DUPFD_CLOEXEC, 0);
                if (p.fds[p.nfds] < 0)
                        r = -errno;
                else
                        p.nfds++;
        }
        if (r == 0) {
                p.n_ops = b->req.n_ops;
                *ret = p;
        } else {
                free(p.body);
                for (size_t i = 0; i < p.nfds; i++)
                        close(p.fds[i]);
        }
        nb_batch_free(b);
        return r;
}
