// SPDX-License-Identifier: LGPL-2.1-or-later
/* libnetbroker: the client side of netbrokerd.
 *
 * A daemon spawns the helper once (nb_spawn) or connects to a running one
 * (nb_connect), builds batches of ops (nb_batch_*), and submits them
 * (nb_submit), which blocks until the helper's reply. One connection may be
 * used by many threads at once: each nb_submit gets its own reply.
 *
 * Conventions: functions that can fail return 0 or a negative errno value;
 * outputs are written only on success; every free function accepts NULL.
 * Per-op statuses are 0 or a negative errno value as well.
 *
 * ABI: every public struct, whether the caller fills it or the library
 * does, starts with `size_t size`, which the caller sets to sizeof the
 * struct as its header has it: use the NB_*_INIT macro (or a designated
 * initializer with .size = sizeof(type)), never {0}. New fields are only
 * ever added at the end, and a new field's zero value means what the
 * struct meant without it. So a program built against an older header
 * keeps working with a newer library (which reads the fields that fit in
 * `size` and takes the rest as zero, and writes only those), and one built
 * against a newer header works with an older library as long as it leaves
 * the fields that library does not know at zero. A size of 0, below the
 * struct's first released size, or larger than the library knows with a
 * non-zero byte past what it knows is refused with -EINVAL (-E2BIG for
 * the last), as the kernel's copy_struct_from_user() does. In an array (the
 * vars of nb_fw_add_filter()) every element carries the same size, which
 * is the array's stride. Opaque objects (nb_conn, nb_batch, nb_results,
 * nb_fw_ruleset) grow freely. A size field rather than opaque objects with
 * setters: these are plain data that callers fill with designated
 * initializers, as for clone3() and openat2(), so one rule covers all ten
 * with no allocation and no setter per field. The library's soname changes only when this
 * cannot be kept; libnetbroker(3), VERSIONS AND ABI, has the policy.
 */
#ifndef NETBROKER_H
#define NETBROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nb_conn nb_conn;
typedef struct nb_batch nb_batch;
typedef struct nb_results nb_results;

/* ---- versions ----
 *
 * The version of this header; nb_version() is the library's, at run time.
 * Both are NB_VERSION_ENCODE(major, minor, micro). NB_VERSION_CHECK(a, b, c)
 * is true when this header is version a.b.c or later (for #if). */
#define NB_VERSION_MAJOR 0
#define NB_VERSION_MINOR 2
#define NB_VERSION_MICRO 0
/* No casts: #if cannot evaluate them. */
#define NB_VERSION_ENCODE(major, minor, micro) (((major) << 16) | ((minor) << 8) | (micro))
#define NB_VERSION_NUMBER NB_VERSION_ENCODE(NB_VERSION_MAJOR, NB_VERSION_MINOR, NB_VERSION_MICRO)
#define NB_VERSION_CHECK(major, minor, micro)                                                      \
        (NB_VERSION_NUMBER >= NB_VERSION_ENCODE(major, minor, micro))

/* The library's own version, NB_VERSION_ENCODE(major, minor, micro): what
 * the program runs with, which may be newer than what it was built with. */
unsigned nb_version(void);

/* ---- connections ---- */

typedef struct nb_spawn_opts {
        size_t size; /* sizeof(nb_spawn_opts): NB_SPAWN_OPTS_INIT */
        /* Configuration file for the helper, or NULL for its default. */
        const char *config_path;
        /* Log level for the helper ("error" ... "debug"), or NULL. */
        const char *log_level;
        /* ---- connect deadlines (0.2) ----
         * How long the helper has to answer Hello, in ms: 0 is
         * NB_HELLO_TIMEOUT_MS_DEFAULT, < 0 none. A helper that has not
         * answered by then is killed (through a pidfd: a recycled pid is
         * never signalled) and reaped, and nb_spawn() returns -ETIMEDOUT.
         * It bounds the Hello of every later respawn too, when the submit
         * that respawns has no deadline of its own. */
        int hello_timeout_ms;
} nb_spawn_opts;
#define NB_SPAWN_OPTS_INIT                                                                         \
        {                                                                                          \
                .size = sizeof(nb_spawn_opts)                                                      \
        }

/* Start netbrokerd on a socketpair and say Hello. helper_path NULL means the
 * NETBROKERD environment variable (ignored in secure-execution mode: a
 * setuid, setgid or file-capability program), else the installed helper.
 * The helper gets exactly fds 0-2 (stdin and stdout on /dev/null, stderr
 * shared for its logs) and its end of the socketpair. If the helper dies,
 * the next nb_submit() starts a new one.
 * Returns 0, or -ENOENT/-EACCES (helper not found or not executable),
 * -EPROTO/-EPROTONOSUPPORT (the helper refused the Hello), -ECONNRESET
 * (it exited at once, e.g. on a bad config: it says why on stderr),
 * -ENOMEM, -EINVAL/-E2BIG (opts->size, see "ABI" above). nb_last_error()
 * has the helper's message. */
int nb_spawn(const char *helper_path, const nb_spawn_opts *opts, nb_conn **ret);

/* Connect to a helper listening on a unix socket (systemd's or --listen)
 * and say Hello. If the connection breaks, the next nb_submit() reconnects.
 * Returns 0 or -errno (-ENOENT, -ECONNREFUSED, -EACCES when the helper
 * refused this uid, -EUSERS when this uid has too many connections);
 * nb_last_error() has the helper's message. */
int nb_connect(const char *socket_path, nb_conn **ret);

/* ---- connect deadlines ----
 * nb_connect() and nb_spawn() wait NB_HELLO_TIMEOUT_MS_DEFAULT at most for
 * the connection and the helper's Hello (a listening socket nobody serves,
 * a stopped or hung helper), then fail with -ETIMEDOUT. nb_connect_timeout()
 * is nb_connect() with another bound: timeout_ms > 0 that many ms, 0 the
 * default, < 0 none. The bound also applies to the Hello of a reconnection
 * made by a submit that has no deadline of its own. */
#define NB_HELLO_TIMEOUT_MS_DEFAULT 30000
int nb_connect_timeout(const char *socket_path, int timeout_ms, nb_conn **ret);

/* This thread's last error message, a sentence, never NULL. Written by:
 * - nb_spawn(), nb_connect(), nb_connect_timeout(), every time: why they
 *   failed, "" after a success;
 * - the calls that build batches and rulesets (nb_batch_*(), nb_ref(),
 *   nb_ref_peer(), nb_fw_group(), nb_fw_group_ex(), nb_fw_rule_add(),
 *   nb_fw_add_filter(), nb_fw_add_*()) and nb_fw_ensure(), only when they
 *   refuse their input (-EINVAL, -E2BIG, -ERANGE): the function, the
 *   argument and why, such as "nb_batch_tap_create: name 'abcdefghijklmnop'
 *   is 16 bytes; at most 15". Their successes and other failures (-ENOMEM,
 *   -ENOENT, -EEXIST, ...) leave it as it was: read it right after the
 *   call that failed.
 * Printable ASCII only: a caller's bytes outside it are shown as \xNN.
 * Valid until this thread's next call of one of these. */
const char *nb_last_error(void);

/* Close the connection; a spawned helper exits and is reaped. Callbacks of
 * requests not yet called back run first (nb_callback). From inside a
 * callback of this connection the close is finished later, by the
 * nb_conn_dispatch() running the callback ("timeouts and event loops"). */
void nb_close(nb_conn *conn);

/* fork(). A connection belongs to the process that made it (nb_spawn(),
 * nb_connect()). A child of fork() inherits its socket, its helper and
 * nb_conn_fd()'s epoll set, all still the parent's: a child that sent on it
 * would take the parent's replies and, on a deadline, kill the parent's
 * helper. In another process, nb_submit(), nb_submit_timeout(),
 * nb_submit_async(), nb_conn_dispatch(), nb_cancel() and nb_conn_fd() fail
 * with -ECHILD (as sd-bus does; -EBADF is nb_submit()'s "fds were lost") and
 * touch nothing, as do nb_conn_on_event(), nb_conn_limit() and
 * nb_conn_helper_version(); nb_conn_has_feature() says false,
 * nb_conn_helper_pid() 0, nb_conn_next_timeout() -1, nb_conn_error() says why.
 * None takes the connection's lock there (a thread of the parent may have held
 * it at the fork, and none is left to let it go). nb_close() there frees the
 * child's copy and closes its copies of the fds, and nothing else: no callback
 * runs (the requests are the parent's), the helper is not signalled or waited
 * for, the socket is not shut down. The parent's connection goes on. A child
 * that needs the helper makes a connection of its own. The parent's nb_close()
 * shuts the socket down: the helper sees its end, and is waited for, also
 * while a child that has not exec'd or exited yet holds a copy. */

/* The helper's feature list from Hello includes `name` (an op name such as
 * "exec"). */
bool nb_conn_has_feature(nb_conn *conn, const char *name);

/* Why the last call on this connection failed ("" if nothing failed yet):
 * the helper's own message where it sent one. The string is this thread's
 * copy, valid until its next nb_conn_error() call. */
const char *nb_conn_error(nb_conn *conn);

/* The pid of a spawned helper (0 for nb_connect connections, when none is
 * running, or in a child of fork(): see nb_close()). */
int nb_conn_helper_pid(nb_conn *conn);

/* The version of the helper this connection talks to, as its Hello gave
 * it (NB_VERSION_ENCODE(major, minor, micro)). Returns 0, or -ENODATA when
 * the helper did not say (its Hello's software is not "netbrokerd X.Y.Z"),
 * -EINVAL for a NULL argument, -ECHILD in a child of fork() (nb_close()).
 * After a reconnect it is the new helper's. */
int nb_conn_helper_version(nb_conn *conn, unsigned *ret);

/* The helper's limits, from its Hello: a request over one of them is
 * refused (nb_submit() checks the first three itself). */
typedef enum nb_limit {
        NB_LIMIT_REQUEST_BYTES = 0, /* max_frame: an encoded request's size */
        NB_LIMIT_OPS = 1, /* max_ops: ops in one request */
        NB_LIMIT_REQUEST_FDS = 2, /* max_fds_per_frame: fds one request carries */
        NB_LIMIT_REPLY_BYTES = 3, /* max_reply: a reply's size (Exec output is cut) */
        NB_LIMIT_REQUESTS_IN_FLIGHT = 4, /* max_requests_per_connection */
        NB_LIMIT_FW_RULES = 5, /* firewall rules in one request, for this caller */
        NB_LIMIT_EXEC_RUNNING = 6, /* max_spawns_per_uid: this uid's Execs at once */
        NB_LIMIT_EXEC_OUTPUT = 7, /* exec_output_cap: bytes kept of stdout, of stderr */
        NB_LIMIT_EXEC_TIMEOUT_MS = 8, /* exec_timeout_max_ms: the longest timeout_ms */
        NB_LIMIT_EXEC_ARGS = 9, /* max_args: argv entries, and env entries */
} nb_limit;

/* One of the helper's limits. Returns 0, -ENODATA when the helper did not
 * announce it (an older helper), -EINVAL for a NULL argument or a limit
 * this library does not know, -ECHILD in a child of fork() (nb_close()). */
int nb_conn_limit(nb_conn *conn, nb_limit limit, uint64_t *ret);

/* ---- batches ---- */

/* Run every op even after one fails or is refused (default: a refused op
 * stops the whole batch before anything runs, and the ops after a failed
 * one report -ECANCELED). For clean-ups: a gone tap does not keep its
 * firewall from being removed. */
#define NB_BATCH_CONTINUE_ON_ERROR 1u

nb_batch *nb_batch_new(void);
void nb_batch_free(nb_batch *batch);
void nb_batch_set_flags(nb_batch *batch, unsigned flags);
size_t nb_batch_size(const nb_batch *batch);

/* Each nb_batch_* adds one op and returns 0, or -EINVAL / -ENOMEM at once
 * (nothing is added then). */
int nb_batch_ping(nb_batch *batch);
int nb_batch_stats(nb_batch *batch);

/* Run `path` (absolute; it must be on the helper's allow-list) with argv
 * (NULL-terminated, argv[0] included; NULL means { path }), extra
 * environment entries "KEY=VALUE" (NULL-terminated or NULL; added to the
 * helper's fixed default of PATH and LC_ALL=C; LD_* and other loader
 * variables are refused), stdin bytes, and a timeout in milliseconds (0: the
 * helper's default). The op's status is 0 when the program exited 0, -EIO
 * when it exited non-zero or was killed by a signal, -ETIMEDOUT when the
 * helper killed it at the timeout, -EPERM when the program or an environment
 * variable is refused; see nb_result_exec() for the details. */
int nb_batch_exec(nb_batch *batch, const char *path, const char *const *argv,
                  const char *const *envp, const void *stdin_data, size_t stdin_len,
                  unsigned timeout_ms);

/* ---- interfaces ----
 *
 * A create op's name is either a plain interface name (1-15 bytes, no '/',
 * ':' or white space) or a template: a prefix followed by "%d" and nothing
 * else ("vnet%d"), for which the helper picks the next free number. Names
 * are handed out next-fit: a name freed a moment ago is not reused at once.
 * If an op of a batch fails, the interfaces made and the changes done by
 * the ops before it are undone (their status becomes -ECANCELED), unless
 * NB_BATCH_CONTINUE_ON_ERROR is set; a LinkDelete is never undone. */

typedef enum nb_macvlan_mode {
        NB_MACVLAN_BRIDGE = 0,
        NB_MACVLAN_VEPA = 1,
        NB_MACVLAN_PRIVATE = 2,
        NB_MACVLAN_PASSTHRU = 3,
} nb_macvlan_mode;

typedef struct nb_tap_opts {
        size_t size; /* sizeof(nb_tap_opts): NB_TAP_OPTS_INIT */
        bool vnet_hdr; /* IFF_VNET_HDR */
        unsigned queues; /* >1: IFF_MULTI_QUEUE, one fd per queue (at most 16) */
        bool persist; /* the device outlives its fds */
        bool set_owner; /* then uid and gid own the device */
        unsigned uid, gid;
} nb_tap_opts;
#define NB_TAP_OPTS_INIT                                                                           \
        {                                                                                          \
                .size = sizeof(nb_tap_opts)                                                        \
        }

/* A tap (IFF_TAP | IFF_NO_PI, never attached to an existing device). The
 * result carries its ifname, ifindex and one fd per queue. opts may be NULL. */
int nb_batch_tap_create(nb_batch *batch, const char *name, const nb_tap_opts *opts);

/* A macvtap on parent; the result carries one fd, its /dev/tapN character
 * device, opened read-write (made without udev). mac NULL: a random one. */
int nb_batch_macvtap_create(nb_batch *batch, const char *name, const char *parent,
                            nb_macvlan_mode mode, const char *mac, bool vnet_hdr);
int nb_batch_macvlan_create(nb_batch *batch, const char *name, const char *parent,
                            nb_macvlan_mode mode, const char *mac);

/* A veth pair. peer_netns_fd >= 0: an fd of a network namespace (e.g. from
 * /run/netns/NAME or /proc/PID/ns/net) to move the peer into; the batch
 * keeps its own copy, so the caller may close it. The peer needs a name. */
int nb_batch_veth_create(nb_batch *batch, const char *name, const char *peer, int peer_netns_fd);
int nb_batch_bridge_create(nb_batch *batch, const char *name);

typedef struct nb_link_change {
        size_t size; /* sizeof(nb_link_change): NB_LINK_CHANGE_INIT */
        int up; /* -1 unchanged, 0 down, 1 up */
        unsigned mtu; /* 0 unchanged */
        const char *mac; /* NULL unchanged */
        const char *master; /* bridge to attach to; NULL unchanged */
        bool nomaster; /* detach from its bridge */
} nb_link_change;
/* Changes nothing until a field is set (up -1: unchanged). */
#define NB_LINK_CHANGE_INIT                                                                        \
        {                                                                                          \
                .size = sizeof(nb_link_change), .up = -1                                           \
        }

int nb_batch_link_set(nb_batch *batch, const char *name, const nb_link_change *change);
int nb_batch_link_delete(nb_batch *batch, const char *name);
/* The helper's name allocator: each prefix's used suffixes and cursor. */
int nb_batch_names_dump(nb_batch *batch);

/* ---- virtual networks, part 1: addresses, routes, sysctls ----
 *
 * Addresses and routes of the helper's namespace, and a few sysctls a
 * virtual network needs. Like the interface ops they are undone when a
 * later op of the batch fails, and a caller that is not root names only
 * interfaces made for it (and sees only theirs in a listing). */

typedef struct nb_addr_opts {
        size_t size; /* sizeof(nb_addr_opts): NB_ADDR_OPTS_INIT */
        const char *broadcast; /* IPv4 only; NULL: none */
        bool noprefixroute; /* no route for the address's prefix */
} nb_addr_opts;
#define NB_ADDR_OPTS_INIT                                                                          \
        {                                                                                          \
                .size = sizeof(nb_addr_opts)                                                       \
        }

/* address "10.0.0.1" or "fd00::1", prefix_len 0-32 or 0-128; opts may be
 * NULL. An address the interface has already: -EEXIST. */
int nb_batch_addr_add(nb_batch *batch, const char *ifname, const char *address, unsigned prefix_len,
                      const nb_addr_opts *opts);
/* An address that is not there is a success whose message says so. */
int nb_batch_addr_delete(nb_batch *batch, const char *ifname, const char *address,
                         unsigned prefix_len);
/* ifname NULL: every interface the caller may see. */
int nb_batch_addr_list(nb_batch *batch, const char *ifname);

/* A route, given to RouteAdd and RouteDelete and read back from RouteList
 * (strings then valid until nb_results_free()). */
typedef struct nb_route {
        size_t size; /* sizeof(nb_route): NB_ROUTE_INIT */
        const char *destination; /* NULL or "": the default route (prefix_len 0) */
        unsigned prefix_len;
        const char *gateway; /* NULL: none */
        const char *ifname; /* NULL: none (root only) */
        unsigned metric; /* 0: the kernel's */
        unsigned table; /* 0: main */
        bool ipv6; /* a default route without a gateway: IPv6 */
} nb_route;
#define NB_ROUTE_INIT                                                                              \
        {                                                                                          \
                .size = sizeof(nb_route)                                                           \
        }
int nb_batch_route_add(nb_batch *batch, const nb_route *route);
int nb_batch_route_delete(nb_batch *batch, const nb_route *route);
/* The unicast routes of table (0: main); ifname NULL: of every interface
 * the caller may see. */
int nb_batch_route_list(nb_batch *batch, const char *ifname, unsigned table);

/* One of a fixed allow-list: with an ifname "ipv6.disable_ipv6",
 * "ipv6.accept_ra" (0-2), "ipv6.forwarding"; with ifname NULL (root only)
 * "ipv4.forwarding", "ipv6.forwarding". nb_result_sysctl_old() gives the
 * value before. */
int nb_batch_sysctl_set(nb_batch *batch, const char *ifname, const char *name, unsigned value);

/* A bridge's options and a bridge port's flags, as libvirt sets them.
 * Each field is -1 (unchanged), 0 (off) or 1 (on); forward_delay_cs is
 * -1 or centiseconds (0-3000; 200-3000 while STP is on). A flag the
 * kernel does not report for the interface fails the op (EOPNOTSUPP). */
typedef struct nb_bridge_opts {
        size_t size; /* sizeof(nb_bridge_opts): NB_BRIDGE_OPTS_INIT */
        int stp; /* the bridge's */
        int forward_delay_cs;
        int isolated; /* the port's */
        int learning;
        int unicast_flood;
        int multicast_flood;
        int broadcast_flood;
} nb_bridge_opts;
#define NB_BRIDGE_OPTS_INIT                                                                        \
        {                                                                                          \
                .size = sizeof(nb_bridge_opts), .stp = -1, .forward_delay_cs = -1, .isolated = -1, \
                .learning = -1, .unicast_flood = -1, .multicast_flood = -1, .broadcast_flood = -1  \
        }
int nb_batch_bridge_opt_set(nb_batch *batch, const char *ifname, const nb_bridge_opts *opts);

/* ---- firewall ----
 *
 * An owner (a guest's interface name, say "vnet12") has rules for one
 * interface, in groups. Groups are evaluated in order: ACCEPT, DROP or
 * REJECT decide the packet for this owner; RETURN leaves the group and goes
 * on with the next (libvirt's filter chains); a packet no rule decides is
 * accepted. The helper keeps every owner in its own nftables chains in the
 * table "netbroker" (netdev family) with a content hash beside them, and all
 * firewall ops of one batch go to the kernel in one transaction, applied at
 * the position of the batch's last firewall op: all of them or none.
 * FirewallApply in NB_FW_ENSURE mode writes nothing when the kernel already
 * has the same rules for the owner (after a daemon or helper restart). */

typedef enum nb_fw_direction {
        NB_FW_FROM_GUEST = 0, /* the interface's ingress: what the guest sends */
        NB_FW_TO_GUEST = 1, /* the interface's egress: what the guest receives */
} nb_fw_direction;

typedef enum nb_fw_verdict {
        NB_FW_ACCEPT = 0,
        NB_FW_DROP = 1,
        NB_FW_REJECT = 2, /* port unreachable for IP, else drop; only where traffic enters the
                             interface: from the guest on a tap, to it on a macvtap */
        NB_FW_RETURN = 3, /* leave this group, go on with the next */
} nb_fw_verdict;

typedef enum nb_fw_mode {
        NB_FW_REPLACE = 0,
        NB_FW_ENSURE = 1,
} nb_fw_mode;

/* One rule. One with nothing but its size set matches everything (from
 * the guest) and accepts. Every match that is set must hold; each *_not negates its match.
 * MACs: "aa:bb:cc:dd:ee:ff" or "MAC/MASK"; IPs: "10.0.0.5", "10.0.0.0/24",
 * "10.0.0.5-10.0.0.9", "fe80::1", "fe80::/64" (an IP match implies its
 * family). ether_type is the type on the wire, as ebtables' -p: a tagged
 * frame is 0x8100 whatever it carries ("any VLAN" is ether_type 0x8100), so
 * an IPv4 rule never matches a tagged frame. ARP fields imply ARP unless
 * ether_type is 0x8035 (RARP); as ebtables' arp match, MAC fields hold only
 * for Ethernet with 6-byte addresses, IP fields only for IPv4 with 4-byte
 * ones. NB_FW_RULE_INIT is that rule. */
typedef struct nb_fw_rule {
        size_t size; /* sizeof(nb_fw_rule): NB_FW_RULE_INIT */
        nb_fw_direction direction;
        nb_fw_verdict verdict;
        const char *ether_src;
        bool ether_src_not;
        const char *ether_dst;
        bool ether_dst_not;
        uint16_t ether_type; /* 0 any; 0x0800, 0x0806, 0x86dd, ... */
        bool ether_type_not;
        bool has_vlan_id;
        uint16_t vlan_id;
        uint16_t arp_op; /* 0 any; 1 request, 2 reply (implies ARP) */
        bool arp_op_not;
        const char *arp_sender_mac;
        bool arp_sender_mac_not;
        const char *arp_sender_ip;
        bool arp_sender_ip_not;
        const char *arp_target_ip;
        bool arp_target_ip_not;
        const char *ip_src;
        bool ip_src_not;
        const char *ip_dst;
        bool ip_dst_not;
        uint8_t l4_proto; /* 0 any; 6 tcp, 17 udp, 1 icmp, 58 icmpv6 */
        uint16_t sport_min, sport_max; /* max 0: max = min; need tcp, udp or sctp */
        uint16_t dport_min, dport_max;
        bool has_icmp_type;
        uint8_t icmp_type;
        /* Added for libvirt's rule model (netbroker-protocol(7) has each
         * field's exact meaning). */
        int16_t priority; /* -1000..1000; equal priorities keep their order */
        bool l4_proto_not, sport_not, dport_not, vlan_id_not;
        uint16_t vlan_encap; /* 0 any: the type inside an 802.1Q tag */
        bool vlan_encap_not;
        uint16_t arp_htype; /* 0 any; 1 Ethernet */
        bool arp_htype_not;
        uint16_t arp_ptype; /* 0 any; 0x0800 IPv4 */
        bool arp_ptype_not;
        const char *arp_target_mac;
        bool arp_target_mac_not;
        bool arp_gratuitous, arp_gratuitous_not; /* sender IP == target IP */
        bool has_dscp;
        uint8_t dscp; /* 0-63, IPv4 */
        bool dscp_not;
        bool has_icmp_code; /* needs has_icmp_type */
        uint8_t icmp_code;
        bool icmp_not; /* negates type and code together */
        uint8_t tcp_flags_mask, tcp_flags; /* (flags & mask) == tcp_flags */
        bool tcp_flags_not;
        const char *comment; /* up to 256 bytes, kept with the rule */
} nb_fw_rule;
#define NB_FW_RULE_INIT                                                                            \
        {                                                                                          \
                .size = sizeof(nb_fw_rule)                                                         \
        }

/* TCP flag bits for tcp_flags and tcp_flags_mask. */
#define NB_TCP_FIN 0x01
#define NB_TCP_SYN 0x02
#define NB_TCP_RST 0x04
#define NB_TCP_PSH 0x08
#define NB_TCP_ACK 0x10
#define NB_TCP_URG 0x20
#define NB_TCP_ECE 0x40
#define NB_TCP_CWR 0x80

typedef struct nb_fw_ruleset nb_fw_ruleset;

nb_fw_ruleset *nb_fw_ruleset_new(void);
void nb_fw_ruleset_free(nb_fw_ruleset *rs);
/* Start a new group (name: [A-Za-z0-9_-], 1-32 bytes, unique in the
 * ruleset); the following rules go into it. Returns 0, -EINVAL, -EEXIST. */
int nb_fw_group(nb_fw_ruleset *rs, const char *name);
/* A group with libvirt's chain semantics: it is entered, at its priority
 * among the other groups' jumps and the root groups' rules, only for frames
 * the guard's matches hold for (NULL: every frame); a root group's rules go
 * into the owner's base chain itself (libvirt's root chain). Selects the
 * group if it exists with the same options (so that several filters can add
 * to one chain, as libvirt's filterref does), else starts it. Returns 0,
 * -EINVAL, -EEXIST (there with other options), -ENOMEM. */
typedef struct nb_fw_group_opts {
        size_t size; /* sizeof(nb_fw_group_opts): NB_FW_GROUP_OPTS_INIT */
        int16_t priority; /* -1000..1000 */
        bool root;
        const nb_fw_rule *guard;
} nb_fw_group_opts;
#define NB_FW_GROUP_OPTS_INIT                                                                      \
        {                                                                                          \
                .size = sizeof(nb_fw_group_opts)                                                   \
        }
int nb_fw_group_ex(nb_fw_ruleset *rs, const char *name, const nb_fw_group_opts *opts);

/* libvirt's stock filters by name ("clean-traffic", "no-arp-spoofing", ...,
 * all 24 of them: nb_fw_filter_names()), with their filterrefs, chains,
 * priorities and variables (MAC, IP, IPV6, DHCPSERVER, GATEWAY_MAC; a
 * variable with several values gives one rule per value, as libvirt
 * iterates it). Each of libvirt's chains is a group of its name ("mac",
 * "ipv4-ip", "arp-mac", ..., "root" the root group): filters add to the
 * chains they share, and a rule already there is not added again. Any
 * order of calls gives libvirt's result. Every variable a filter uses must
 * be given (netbroker learns no IP); one given with no values drops the
 * rules that use it; others are ignored (CTRL_IP_LEARNING must be any, dhcp
 * or none). Returns 0, -EINVAL (a variable missing, or a value that is not
 * valid where it is used: nb_last_error() names it), -ENOENT (no such
 * filter), -EEXIST (a group of a chain's name is there with other options),
 * -ENOMEM; nothing added on failure. */
typedef struct nb_fw_var {
        size_t size; /* sizeof(nb_fw_var), the same in every element */
        const char *name; /* "MAC", "IP", ... */
        const char *const *values; /* NULL-terminated */
} nb_fw_var;
/* One variable: NB_FW_VAR("MAC", macs). */
#define NB_FW_VAR(var_name, var_values)                                                            \
        {                                                                                          \
                .size = sizeof(nb_fw_var), .name = (var_name), .values = (var_values)              \
        }
int nb_fw_add_filter(nb_fw_ruleset *rs, const char *filter, const nb_fw_var *vars, size_t n_vars);
/* The filters nb_fw_add_filter() knows, NULL-terminated. */
const char *const *nb_fw_filter_names(void);
/* Add a rule to the current group: the last one nb_fw_group() or
 * nb_fw_group_ex() started or selected (a group "rules" is started if there
 * is none). The stock filters leave the current group as they found it, so
 * a rule added after one never lands in the filter's chains. Strings are
 * copied. Returns 0, -EINVAL (checked fully by the helper), -ENOMEM. */
int nb_fw_rule_add(nb_fw_ruleset *rs, const nb_fw_rule *rule);

/* libvirt's stock filters of the same names, through nb_fw_add_filter()
 * with MAC = mac ("aa:bb:cc:dd:ee:ff") and IP = ips (IPv4 addresses or
 * prefixes, NULL-terminated; NULL or empty: the guest may send no IPv4 but
 * UDP from 0.0.0.0, and no ARP). They carry libvirt's priorities, so the
 * order of calls does not matter, and adding one twice adds it once.
 * Return 0, -EINVAL (bad MAC or address), -EEXIST (a group named as one of
 * the filter's chains is there with other options), -ENOMEM; on failure
 * nothing is added. */
int nb_fw_add_no_mac_spoofing(nb_fw_ruleset *rs, const char *mac);
int nb_fw_add_no_ip_spoofing(nb_fw_ruleset *rs, const char *const *ips);
/* Sender MAC and sender IP checked, whatever the opcode (chains arp-mac and
 * arp-ip). */
int nb_fw_add_no_arp_spoofing(nb_fw_ruleset *rs, const char *mac, const char *const *ips);
/* netbroker's own (libvirt ships none): to the guest, only frames to its
 * MAC and multicast (broadcast included) pass; in chain mac (-800), before
 * every accept of the stock filters. */
int nb_fw_add_no_promisc(nb_fw_ruleset *rs, const char *mac);
/* dhcp_server: the only server the guest may take an answer from
 * (allow-dhcp-server), or NULL (allow-dhcp). */
int nb_fw_add_allow_dhcp(nb_fw_ruleset *rs, const char *dhcp_server);
int nb_fw_add_allow_arp(nb_fw_ruleset *rs);
/* clean-traffic: no-mac-spoofing, no-ip-spoofing, IPv4 out accepted,
 * allow-incoming-ipv4, no-arp-spoofing, ARP accepted both ways,
 * no-other-l2-traffic (the rest dropped, IPv6 and tagged frames included)
 * and qemu-announce-self. */
int nb_fw_add_clean_traffic(nb_fw_ruleset *rs, const char *mac, const char *const *ips);

/* Install (or ensure) owner's rules on ifname. The ruleset is copied. */
int nb_batch_firewall_apply(nb_batch *batch, const char *owner, const char *ifname,
                            const nb_fw_ruleset *rs, nb_fw_mode mode);
/* Remove owner's rules (-ENOENT in the result if it has none). */
int nb_batch_firewall_remove(nb_batch *batch, const char *owner);
/* The owners in the kernel, read back: owner, interface, hash, rules. */
int nb_batch_firewall_list(nb_batch *batch);
/* The same, with every rule's packet and byte counters and its text. */
int nb_batch_firewall_list_counters(nb_batch *batch);

/* ---- firewall: ensure by hash (issue 14) ----
 *
 * An ensure that sends no rules: per owner only its interface and the
 * content hash an earlier apply returned (nb_result_firewall()), which the
 * daemon keeps (libvirt: in the domain's status). The helper answers from
 * what it already reads for ensure, writes nothing, and says per owner
 * whether it is in place with that hash; the rules are then sent only for
 * the owners that are not (stale: absent, another hash or interface, or
 * changed in the kernel by someone else). A hash is a claim about the
 * caller's own owner only: a wrong one keeps that owner's old rules, and
 * an owner of another caller is refused (-EPERM) as for an apply. Needs a
 * helper with the feature "firewall_ensure_hash" (nb_conn_has_feature());
 * an older one answers the op -EOPNOTSUPP. */

/* Is owner in place on ifname with content hash `hash` (32 lowercase hex
 * digits)? The result: nb_result_firewall() (the hash and rule count
 * installed, "" and 0 when none; unchanged when in place) and
 * nb_result_firewall_stale(). Nothing is written. -EINVAL for a bad owner,
 * interface or hash. Part of the batch's firewall transaction. */
int nb_batch_firewall_ensure_hash(nb_batch *batch, const char *owner, const char *ifname,
                                  const char *hash);
/* nb_batch_firewall_ensure_hash(): whether op i found the owner stale (its
 * rules must be sent). Returns 0, -ENODATA (op i has no firewall result:
 * refused or not run) or -ERANGE. */
int nb_result_firewall_stale(const nb_results *res, size_t i, bool *ret_stale);

/* One owner for nb_fw_ensure(). In an array, every element's size is the
 * same (the stride). */
typedef struct nb_fw_ensure_owner {
        size_t size; /* sizeof(nb_fw_ensure_owner): NB_FW_ENSURE_OWNER_INIT */
        const char *owner;
        const char *ifname;
        /* The hash an earlier apply of these rules returned; NULL or "":
         * not known (the rules are sent, in ensure mode). */
        const char *hash;
} nb_fw_ensure_owner;
#define NB_FW_ENSURE_OWNER_INIT                                                                    \
        {                                                                                          \
                .size = sizeof(nb_fw_ensure_owner)                                                 \
        }

/* Fill rs (empty) with the rules of owners[k]; 0, or -errno to stop
 * nb_fw_ensure() (nothing of the second request is sent). */
typedef int (*nb_fw_rules_fn)(size_t k, nb_fw_ruleset *rs, void *data);

/* Ensure n owners by hash, in at most two requests: one of
 * nb_batch_firewall_ensure_hash() for every owner with a hash, then one
 * FirewallApply in NB_FW_ENSURE mode, with the rules rules(k, rs, data)
 * builds, for every owner found stale or without a hash (one transaction
 * for them all). *ret has n results, owner k's at k: the ensure-by-hash
 * result of an owner in place, or the apply's of one that was sent (its
 * new hash in nb_result_firewall()); when the first request is refused
 * (an op's status is not 0: another caller's owner, a bad hash, a gone
 * interface), *ret is its reply and nothing more is sent, as for one
 * batch. Returns 0 when the helper answered, or -EINVAL (bad arguments,
 * n 0), -ENOMEM, rules()'s error, or nb_submit()'s, with *ret untouched. */
int nb_fw_ensure(nb_conn *conn, const nb_fw_ensure_owner *owners, size_t n, nb_fw_rules_fn rules,
                 void *data, nb_results **ret);

/* ---- bandwidth ----
 *
 * libvirt's <bandwidth>, in its units: kB means 1024 bytes. Inbound is
 * traffic toward the guest, outbound traffic from it: on a tap the
 * interface's egress and ingress, on a macvtap the other way round (its
 * guest sends through its egress), as libvirt has them for direct
 * interfaces. The helper builds the objects itself and removes only what
 * it made: for the egress an HTB at the root (it shapes: average, peak,
 * burst); for the ingress an nftables chain after the firewall's chains
 * that polices (drops what is over the limit), so a limit never takes
 * frames past the guest's filter or another guest's. As libvirt's tc
 * police there, the policer honours average and burst and ignores peak
 * (accepted, read back as 0); its bucket is the burst, without one a
 * second of the average, and never below 64 kB nor one second of the
 * average (nftables' limit keeps that much); floor is inbound only. No
 * IFB is made; one an older helper left is removed. */

typedef struct nb_rate {
        size_t size; /* sizeof(nb_rate): NB_RATE_INIT */
        unsigned average; /* kB/s; 1 to 100 Gbit/s */
        unsigned peak; /* kB/s, not below average; 0: the average */
        unsigned burst; /* kB at peak speed; 0: 10 ms of the average, at least 2 kB
                           (a policer: its bucket, see above) */
        unsigned floor; /* kB/s guaranteed, not above average; inbound only */
} nb_rate;
#define NB_RATE_INIT                                                                               \
        {                                                                                          \
                .size = sizeof(nb_rate)                                                            \
        }

/* Limit ifname each way; NULL (or a rate whose fields but size are all zero) means no limit that
 * way, and a limit netbroker had there before is removed. Idempotent, and a
 * change of rates takes effect in place (no instant without a limit). The
 * op fails with -EINVAL for a bad rate (zero average with other fields,
 * over 100 Gbit/s, peak below average, burst over 1 GiB, floor outbound), -ENODEV
 * for a missing interface, -EOPNOTSUPP when the kernel cannot limit what
 * enters the interface (a tap's outbound, a macvtap's inbound) without
 * bypassing the firewall (no nftables limit in bytes), -EBUSY when the
 * interface's root qdisc is someone else's (not netbroker's htb 4e42:, nor
 * an older helper's htb 1: on an interface netbroker made: netbrokerd(8));
 * nothing is changed then. Returns 0, -EINVAL (NULL batch or bad name),
 * -ENOMEM. */
int nb_batch_bandwidth_set(nb_batch *batch, const char *ifname, const nb_rate *in,
                           const nb_rate *out);
/* Remove every limit netbroker put on ifname, and nothing else; none there
 * is a success, and so is an interface already gone (status 0, a message
 * that says so). */
int nb_batch_bandwidth_clear(nb_batch *batch, const char *ifname);
/* The limits in force on ifname, as the helper reads them back from the
 * kernel (nb_result_bandwidth_show). A caller that is not root may read only
 * interfaces it owns (-EPERM). */
int nb_batch_bandwidth_show(nb_batch *batch, const char *ifname);

/* ---- reading interfaces back ---- */

/* The interfaces of the helper's namespace (name NULL), or only `name`
 * (-ENODEV in the result when there is none), read from the kernel by the
 * helper (nb_result_link_count, nb_result_link_at). A caller that is not
 * root sees only the interfaces marked as made for it. */
int nb_batch_link_list(nb_batch *batch, const char *name);

/* ---- a VM start in one batch: op references, macvtap queues ----
 *
 * A name made from a template ("vnet%d") is known only when its op has run.
 * So that create, attach, filter and limit are one batch (all or nothing),
 * a later op may name the interface an EARLIER op of the same batch made
 * by a reference: "op:K" (K the op's index in the batch, from 0: the value
 * nb_batch_size() had before the create op was added), "op:K:peer" for a
 * veth's peer. No interface can be called that (the kernel refuses ':' in
 * a name). A reference is taken wherever an op names an existing
 * interface: nb_batch_link_set()'s name and master, nb_batch_link_delete(),
 * the parent of nb_batch_macvtap_create() and nb_batch_macvlan_create(),
 * nb_batch_firewall_apply()'s ifname (not its owner), nb_batch_bandwidth_*()
 * and nb_batch_link_list(). The helper puts the made name in its place
 * before the op runs, and checks the op, policy included, on that name as
 * if the caller had written it. The op's status is -EINVAL (and nothing
 * runs) for a reference to itself or a later op, to an op that makes no
 * interface here, or to an op that was refused; -EINVAL when it runs for
 * one to an op that failed (with NB_BATCH_CONTINUE_ON_ERROR). If any op
 * fails, what the ops before it made and changed is undone, as always. */
#define NB_REF_MAX 32 /* room for any reference, with its '\0' */

/* Write "op:K" (nb_ref) or "op:K:peer" (nb_ref_peer) for op index op into
 * buf (len bytes; NB_REF_MAX is enough). Returns 0, -EINVAL for a NULL
 * buf, -ERANGE when it does not fit (buf is then untouched). */
int nb_ref(size_t op, char *buf, size_t len);
int nb_ref_peer(size_t op, char *buf, size_t len);

/* nb_batch_macvtap_create() with QEMU's multiqueue: the result carries one
 * fd per queue (each an open of the macvtap's character device: the tap
 * driver adds a queue per open), in order (nb_result_fd_count,
 * nb_result_take_fd). queues 0 or 1: one. At most 16: -EINVAL here above
 * that, and the helper refuses more with -EINVAL too. The fds are sent as
 * the op makes them and count against the connection's fds in flight. */
int nb_batch_macvtap_create_queues(nb_batch *batch, const char *name, const char *parent,
                                   nb_macvlan_mode mode, const char *mac, bool vnet_hdr,
                                   unsigned queues);
/* ---- supervised programs ----
 *
 * A long-running program (dnsmasq, radvd) from the helper's program_allow,
 * started in a session of its own, stdin and stdout on /dev/null, stderr
 * to the helper's log or its program_log. It must stay in the foreground
 * (dnsmasq -k, radvd -n). It holds one of the caller's spawn slots while
 * it runs; the helper reports its exit (nb_result_program_at) and adopts
 * it again after a restart of its own. Only its caller, or root, may list
 * or stop it. */
typedef struct nb_program_opts {
        size_t size; /* set by the caller: NB_PROGRAM_OPTS_INIT */
        const char *const *argv; /* NULL-terminated, argv[0] included; NULL: { path } */
        const char *const *env; /* KEY=VALUE over the fixed environment (exec_env_allow) */
        const char *tag; /* an owner tag (a network's name); NULL: none */
} nb_program_opts;
#define NB_PROGRAM_OPTS_INIT                                                                       \
        {                                                                                          \
                .size = sizeof(nb_program_opts)                                                    \
        }
/* Start path (nb_result_program: its id and pid). A start with the same
 * path, tag and argv as a program of the caller's that runs returns that
 * one (existing). In the result: -EPERM (not on program_allow, or the
 * policy), -EINVAL (argv, env, tag: a sentence says which), -EAGAIN (the
 * caller's share: max_programs_per_uid, max_spawns_per_uid, max_programs).
 * Returns 0, -EINVAL (NULL batch or path, a relative path, env entry not
 * KEY=VALUE), -ENOMEM. */
int nb_batch_program_start(nb_batch *batch, const char *path, const nb_program_opts *opts);
/* Stop program id, or (id 0) every program of tag: SIGTERM to its process
 * group, SIGKILL after grace_ms (0: 5000). The result comes once each has
 * exited (nb_result_program_stopped); one that had exited, or an unknown
 * id, is a success that says so. Another caller's program: -EPERM. */
int nb_batch_program_stop(nb_batch *batch, uint64_t id, const char *tag, unsigned grace_ms);
/* The caller's programs (root: all), or only those of tag (NULL: all). */
int nb_batch_program_list(nb_batch *batch, const char *tag);

/* ---- submitting ---- */

/* Send the batch and wait for its reply. Returns 0 when the helper answered
 * (each op's own status is in the results), or: -ECONNRESET when the helper
 * died or closed the connection during the call (the next call respawns or
 * reconnects; a helper found dead before anything was sent is replaced by
 * this call, which then sends the batch to the new one), -EMSGSIZE when
 * the batch encodes to more than the helper's max_frame, -E2BIG when it has
 * more ops than its max_ops (both checked before sending, from the limits
 * the helper gave in Hello), -EPROTO or another -errno on a protocol
 * failure. nb_conn_error() says why. The batch can be submitted again. */
int nb_submit(nb_conn *conn, const nb_batch *batch, nb_results **ret);

/* ---- timeouts and event loops ----
 *
 * nb_submit() waits without a deadline, as it always did: a batch may
 * rightly take long (a commit of 100,000 rules, an Exec with its own
 * timeout), and a deadline resets the connection (below), so none is
 * imposed on callers who did not ask for one. A caller that must not hang
 * on a stopped helper passes one: nb_submit_timeout() or nb_submit_async().
 *
 * Deadlines. timeout_ms < 0 means none; otherwise the request fails with
 * -ETIMEDOUT when its reply has not come timeout_ms after the submit. A
 * helper that does not answer in time is taken as stuck, and the
 * connection is reset: every other request in flight on it fails with
 * -ECONNRESET (not -ETIMEDOUT: only the request whose deadline passed says
 * so), none is sent again (the helper may have run it), replies that come
 * later are dropped and fds that came with them closed. A helper spawned
 * by nb_spawn() is killed (SIGKILL: a stopped process does not exit on
 * EOF) and reaped; one reached by nb_connect() is left alone, only our
 * connection is closed. The next submit spawns a new helper or connects
 * again, its Hello bounded by that submit's deadline (-ETIMEDOUT when a
 * stopped helper's socket accepts but nobody answers). nb_conn_error()
 * says which request timed out.
 *
 * Event loops. nb_conn_fd() is one fd for the connection's whole life (it
 * stays the same across resets and reconnects): watch it for readability
 * only (POLLIN, virEventAddHandle's VIR_EVENT_HANDLE_READABLE), never for
 * writability. When a large request is queued that the socket did not
 * take at once, the library itself waits for the socket to become
 * writable, and nb_conn_fd() turns readable then. When it is readable, or
 * nb_conn_next_timeout() milliseconds have passed, call
 * nb_conn_dispatch(): it never blocks (except to reconnect, see
 * nb_submit_async()), writes and reads what the socket allows, fails what
 * passed its deadline, and runs the callbacks of the requests that are
 * done. A submit whose deadline is earlier than every other in flight
 * turns nb_conn_fd() readable too, so that a loop waiting with no timer or
 * a later one (the submit came from another thread) wakes: its dispatch
 * then has nothing to do (it returns 0), and it re-arms its timer from
 * nb_conn_next_timeout().
 *
 * Threads. Every function here may be called from any thread, also while
 * other threads use nb_submit() on the same connection; replies are filed
 * under their requests whoever reads them. Callbacks run only inside
 * nb_conn_dispatch(), in the thread that calls it, without any lock of the
 * library held: a callback may call nb_submit_async(), nb_cancel(),
 * nb_submit_timeout(), nb_conn_dispatch() or nb_close() on the same
 * connection.
 *
 * nb_close() from a callback. The nb_conn_dispatch() running the callback
 * finishes the close before it returns, once the callbacks it had to run
 * have run (requests done before the close get their results), as
 * nb_close() does: every request still in flight is called back with
 * -ECANCELED, after them, then conn is freed. Until then conn stays valid
 * for those callbacks, which may free what their opaque pointers hold;
 * submits on it fail with -ECANCELED (nothing is sent any more, no new
 * helper is spawned) and a second nb_close() does nothing. The
 * nb_conn_dispatch() that finishes the close counts those callbacks too. */

/* nb_submit() with a deadline: -ETIMEDOUT when the reply has not come
 * within timeout_ms (< 0: none); the connection is reset then (above). */
int nb_submit_timeout(nb_conn *conn, const nb_batch *batch, int timeout_ms, nb_results **ret);

/* Called once per request, from nb_conn_dispatch() (or nb_close()). status
 * is 0 with the results in res, which the callback owns (free them with
 * nb_results_free(); fds not taken are closed then), or a negative errno
 * with res NULL: -ETIMEDOUT (its deadline passed), -ECANCELED (nb_cancel()
 * or nb_close()), -ECONNRESET (the helper died, or the connection was reset
 * for another request's deadline), -EPROTO, -EBADF as nb_submit(). fds of a
 * request that failed are closed before the callback runs. */
typedef void (*nb_callback)(nb_conn *conn, uint64_t id, int status, nb_results *res, void *opaque);

/* Send the batch and return at once; cb(conn, id, ...) runs later from
 * nb_conn_dispatch(), exactly once. *ret_id (may be NULL) gets the
 * request's id, unique on the connection. The batch can be freed or
 * submitted again at once. Fails, without calling cb, as nb_submit() does
 * before sending: -EINVAL, -E2BIG, -EMSGSIZE, or when a new connection
 * cannot be made (-ETIMEDOUT when its Hello does not come before the
 * deadline). If the connection was lost, this call makes the new one and
 * waits for its Hello: it blocks then, up to the request's deadline. When
 * another thread runs nb_conn_dispatch(), cb may run there before this
 * call returns. */
int nb_submit_async(nb_conn *conn, const nb_batch *batch, int timeout_ms, nb_callback cb,
                    void *opaque, uint64_t *ret_id);

/* The fd an event loop watches for POLLIN (see above). The connection owns
 * it: do not read or close it. -ECHILD in a child of fork() (see
 * nb_close()). */
int nb_conn_fd(nb_conn *conn);

/* Milliseconds until the earliest deadline of a request in flight: 0 when
 * one has passed, -1 when there is none (virEventAddTimeout's convention).
 * Call it again after every nb_conn_dispatch() and submit; a submit from
 * another thread that makes it earlier turns nb_conn_fd() readable. */
int nb_conn_next_timeout(nb_conn *conn);

/* Without blocking: send and receive what the socket allows, fail requests
 * past their deadline, and run the callbacks of the requests that are done.
 * Returns how many callbacks ran, or -EINVAL, -ECHILD (in a child of
 * fork(), see nb_close()). */
int nb_conn_dispatch(nb_conn *conn);

/* Cancel the asynchronous request `id`: its callback runs once, with
 * -ECANCELED, from the next nb_conn_dispatch() (nb_conn_fd() turns
 * readable); its reply, when it comes, is dropped and its fds closed. A
 * reply that came but was not yet handed to the callback is dropped the
 * same way. The helper is not told: what the batch does, it does. Returns
 * 0, or -ENOENT when `id` is unknown, already cancelled, already called
 * back, or already failed (its callback runs with that status). */
int nb_cancel(nb_conn *conn, uint64_t id);

/* ---- events ----
 *
 * Someone else deleting one of the helper's nftables tables (`nft flush
 * ruleset`, a firewall service's reload) removes what the daemon installed
 * there: every guest's filter (table "netbroker", family netdev), the
 * virtual networks' NAT and filters ("netbroker_net", inet), the outbound
 * bandwidth policers ("netbroker_bw", netdev). The helper keeps no copy to
 * rebuild from (the daemon owns the policy): it tells the connections that
 * may write to the table (root; other uids granted firewall_apply, net_apply
 * or bandwidth_set), and the daemon installs it again: nb_fw_ensure() or a
 * FirewallApply of every owner, each network's NetApply, each limit's
 * BandwidthSet, as libvirt does after firewalld's reload signal.
 *
 * The callback runs from nb_conn_dispatch(), as request callbacks do
 * (nb_conn_fd() turns readable when an event comes), in the order the
 * events came; a connection whose socket nobody reads hears late, from its
 * next call. While an event of a table waits undelivered, another of the
 * same table is not added (the helper does the same for a client that does
 * not read): one event may stand for several deletions. An event that
 * comes while no callback is set is dropped, and none runs once nb_close()
 * was called (from a callback: its dispatch runs no event callback after
 * it). Helpers before 0.2 send none; nb_conn_has_feature(conn, "events")
 * is true for those that do. */

typedef enum nb_event_kind {
        NB_EVENT_TABLE_DELETED = 1,
} nb_event_kind;

typedef struct nb_event {
        nb_event_kind kind;
        /* NB_EVENT_TABLE_DELETED: the table's nftables family (NFPROTO_NETDEV,
         * 5, or NFPROTO_INET, 1) and name. */
        int family;
        const char *table;
} nb_event;

/* ev and what it points to are valid during the call only. */
typedef void (*nb_event_callback)(nb_conn *conn, const nb_event *ev, void *opaque);

/* Set the connection's event callback (cb NULL: none; events waiting
 * undelivered are dropped then). Returns 0, -EINVAL, or -ECHILD (in a child
 * of fork(), see nb_close()). */
int nb_conn_on_event(nb_conn *conn, nb_event_callback cb, void *opaque);

/* ---- results ---- */

size_t nb_results_count(const nb_results *res);
/* 0 or -errno of op i. */
int nb_result_status(const nb_results *res, size_t i);
/* The helper's message for op i ("" when there is none). */
const char *nb_result_message(const nb_results *res, size_t i);
/* Index of the first op whose status is not 0, or -1. */
long nb_results_first_error(const nb_results *res);
/* The op that failed the batch, whose message says why: the first whose
 * status is neither 0 nor -ECANCELED (the ops undone, or not run, because
 * of it say -ECANCELED and name it), else the first failure; -1 when none
 * failed. nb_results_first_error() is often an undone op before it. */
long nb_results_failed_op(const nb_results *res);

typedef struct nb_exec_result {
        size_t size; /* set by the caller: NB_EXEC_RESULT_INIT */
        int exit_code; /* when signal == 0 */
        int signal; /* signal that ended the program, or 0 */
        bool timed_out;
        const uint8_t *out; /* stdout bytes (not NUL-terminated) */
        size_t out_len;
        bool out_truncated;
        const uint8_t *err; /* stderr bytes */
        size_t err_len;
        bool err_truncated;
        uint64_t duration_us;
} nb_exec_result;
#define NB_EXEC_RESULT_INIT                                                                        \
        {                                                                                          \
                .size = sizeof(nb_exec_result)                                                     \
        }

/* Fill *ret for an Exec op that ran. Returns 0, or -ENODATA when op i has no
 * Exec result (it was refused or not run), -ERANGE for a bad index. The
 * pointers stay valid until nb_results_free(). */
int nb_result_exec(const nb_results *res, size_t i, nb_exec_result *ret);

/* Stats counters of a Stats op: the value of counter `name`. Returns 0,
 * -ENODATA (no Stats result at i), -ENOENT (no such counter). */
int nb_result_stat(const nb_results *res, size_t i, const char *name, uint64_t *ret);
/* The k-th counter of a Stats op, for listing them all. Returns 0, -ENODATA
 * (no Stats result at i) or -ERANGE (no such op or counter). */
int nb_result_stat_at(const nb_results *res, size_t i, size_t k, const char **ret_name,
                      uint64_t *ret_value);

/* Stats settings that are not numbers: the value of setting `name`
 * ("bandwidth_inbound", "bandwidth_outbound": the mechanisms the helper
 * uses). Returns 0, -ENODATA (no Stats result at i), -ENOENT. */
int nb_result_stat_setting(const nb_results *res, size_t i, const char *name, const char **ret);
/* The k-th setting, for listing them all. 0, -ENODATA or -ERANGE. */
int nb_result_stat_setting_at(const nb_results *res, size_t i, size_t k, const char **ret_name,
                              const char **ret_value);

/* BandwidthSet: the mechanism in place each way ("htb", "nft-limit", ...;
 * "" for no limit). Returns 0, -ENODATA (op i has no such result: refused
 * or not run) or -ERANGE. */
int nb_result_bandwidth(const nb_results *res, size_t i, const char **ret_in, const char **ret_out);

/* BandwidthShow: the limits each way, in nb_batch_bandwidth_set's units
 * (peak 0: the average, and for a policer; burst as the kernel keeps it,
 * in kB, a policer's bucket; floor is not
 * kept by the kernel and reads 0), and whether there is one each way
 * (false: "none", the rate's fields but size are zeroed). ret_* may be NULL. Returns 0,
 * -ENODATA (op i has no such result) or -ERANGE. */
int nb_result_bandwidth_show(const nb_results *res, size_t i, bool *ret_has_in, nb_rate *ret_in,
                             bool *ret_has_out, nb_rate *ret_out);
/* BandwidthShow: the mechanism in place each way ("htb+fq_codel",
 * "nft-limit", ...; "" for none; "ifb+htb", "tc-mirred+ifb+htb" and
 * "htb (older helper)" for what an older helper left, until a set, a clear
 * or a restart replaces it). Returns 0, -ENODATA or -ERANGE. */
int nb_result_bandwidth_show_mechanisms(const nb_results *res, size_t i, const char **ret_in,
                                        const char **ret_out);

typedef enum nb_link_kind {
        NB_LINK_KIND_OTHER = 0,
        NB_LINK_KIND_TAP = 1,
        NB_LINK_KIND_MACVTAP = 2,
        NB_LINK_KIND_MACVLAN = 3,
        NB_LINK_KIND_VETH = 4,
        NB_LINK_KIND_BRIDGE = 5,
        NB_LINK_KIND_IFB = 6,
} nb_link_kind;

/* One interface of a LinkList result; strings valid until
 * nb_results_free(). */
typedef struct nb_link_info {
        size_t size; /* set by the caller: NB_LINK_INFO_INIT */
        const char *name;
        int ifindex;
        nb_link_kind kind;
        const char *kind_name; /* the kernel's kind ("tun", "veth", ...; "" none) */
        const char *mac; /* "aa:bb:cc:dd:ee:ff", "" without one */
        unsigned mtu;
        bool up;
        const char *master; /* its bridge, "" for none */
        bool has_owner; /* marked "netbroker:uid=N" by the helper */
        unsigned owner_uid; /* N, with has_owner */
        bool made_by_helper; /* the helper made it (an owner mark, or its IFB) */
} nb_link_info;
#define NB_LINK_INFO_INIT                                                                          \
        {                                                                                          \
                .size = sizeof(nb_link_info)                                                       \
        }

/* LinkList: how many interfaces (ascending ifindex), and the k-th. Returns
 * 0, -ENODATA or -ERANGE. */
size_t nb_result_link_count(const nb_results *res, size_t i);
int nb_result_link_at(const nb_results *res, size_t i, size_t k, nb_link_info *ret);
/* The name of a kind ("tap", "macvtap", ..., "other"). */
const char *nb_link_kind_name(nb_link_kind kind);

/* The interface op i created or changed ("" if none), its ifindex (0 if
 * none), and a veth's peer. */
const char *nb_result_ifname(const nb_results *res, size_t i);
int nb_result_ifindex(const nb_results *res, size_t i);
const char *nb_result_peer_ifname(const nb_results *res, size_t i);

/* NamesDump: the number of prefixes, and the k-th prefix with its used
 * suffixes (ascending) and cursor. Returns 0, -ENODATA or -ERANGE. */
size_t nb_result_names_count(const nb_results *res, size_t i);
int nb_result_names_at(const nb_results *res, size_t i, size_t k, const char **ret_prefix,
                       const uint32_t **ret_used, size_t *ret_n_used, unsigned *ret_cursor);

/* FirewallApply: the owner's content hash (hex), whether ensure found it in
 * place and wrote nothing, and its rule count now. Returns 0 or -ENODATA. */
int nb_result_firewall(const nb_results *res, size_t i, const char **ret_hash, bool *ret_unchanged,
                       unsigned *ret_rules);
/* FirewallList: how many owners, and the k-th. Returns 0, -ENODATA or -ERANGE. */
size_t nb_result_fw_owner_count(const nb_results *res, size_t i);
int nb_result_fw_owner_at(const nb_results *res, size_t i, size_t k, const char **ret_owner,
                          const char **ret_ifname, const char **ret_hash, unsigned *ret_rules);
/* Whether owner k is a network's (NetApply; its ifname is the bridge), not
 * a guest's; false when there is no such owner. Network owners come after
 * the guests' and have no counters. */
bool nb_result_fw_owner_is_network(const nb_results *res, size_t i, size_t k);
/* With nb_batch_firewall_list_counters(): the rules of owner k, each with
 * its group ("" for the base chain's own rules), direction, position in its
 * chain, counters and text (libvirt's terms). Strings live as long as res. */
typedef struct nb_fw_counter {
        size_t size; /* set by the caller: NB_FW_COUNTER_INIT */
        const char *group;
        nb_fw_direction direction;
        unsigned index;
        uint64_t packets, bytes;
        const char *text;
} nb_fw_counter;
#define NB_FW_COUNTER_INIT                                                                         \
        {                                                                                          \
                .size = sizeof(nb_fw_counter)                                                      \
        }
size_t nb_result_fw_counter_count(const nb_results *res, size_t i, size_t k);
int nb_result_fw_counter_at(const nb_results *res, size_t i, size_t k, size_t j,
                            nb_fw_counter *ret);

/* ---- virtual networks, part 1: results ---- */

/* One address of an AddrList result; strings valid until nb_results_free(). */
typedef struct nb_addr_info {
        size_t size; /* set by the caller: NB_ADDR_INFO_INIT */
        const char *ifname;
        int ifindex;
        const char *address;
        unsigned prefix_len;
        const char *broadcast; /* "" for none */
        bool noprefixroute;
        unsigned scope; /* 0 global, 253 link, 254 host */
} nb_addr_info;
#define NB_ADDR_INFO_INIT                                                                          \
        {                                                                                          \
                .size = sizeof(nb_addr_info)                                                       \
        }
/* AddrList and RouteList: how many, and the k-th. 0, -ENODATA or -ERANGE. */
size_t nb_result_addr_count(const nb_results *res, size_t i);
int nb_result_addr_at(const nb_results *res, size_t i, size_t k, nb_addr_info *ret);
size_t nb_result_route_count(const nb_results *res, size_t i);
int nb_result_route_at(const nb_results *res, size_t i, size_t k, nb_route *ret);
/* SysctlSet: the value before the op. 0, -ENODATA or -ERANGE. */
int nb_result_sysctl_old(const nb_results *res, size_t i, unsigned *ret);
/* ProgramStart: the program's id and pid, and whether it ran already.
 * Returns 0 or -ENODATA (any pointer may be NULL). */
int nb_result_program(const nb_results *res, size_t i, uint64_t *ret_id, int *ret_pid,
                      bool *ret_existing);
/* ProgramStop: how many it ended, and how many had ended before. */
int nb_result_program_stopped(const nb_results *res, size_t i, unsigned *ret_stopped,
                              unsigned *ret_had_exited);
/* One program of a ProgramList result; strings valid until
 * nb_results_free(). */
typedef struct nb_program_info {
        size_t size; /* set by the caller: NB_PROGRAM_INFO_INIT */
        uint64_t id;
        int pid;
        const char *path;
        const char *tag;
        unsigned uid; /* who started it */
        bool running;
        int exit_code; /* once exited, with signal 0 */
        int signal; /* the signal that ended it, or 0 */
        bool adopted; /* found running at the helper's start-up */
        bool status_unknown; /* an adopted program exited: no status */
        size_t argc;
        char *const *argv;
        /* 0.2: "", or the interface it served (its --interface=) that went
         * away, or was made again for another uid, while it ran: the
         * helper stopped it for that (a caller other than root's). */
        const char *gone_interface;
} nb_program_info;
#define NB_PROGRAM_INFO_INIT                                                                       \
        {                                                                                          \
                .size = sizeof(nb_program_info)                                                    \
        }
/* ProgramList: how many (ascending id), and the k-th. Returns 0, -ENODATA
 * or -ERANGE. */
size_t nb_result_program_count(const nb_results *res, size_t i);
int nb_result_program_at(const nb_results *res, size_t i, size_t k, nb_program_info *ret);

/* File descriptors returned for op i (created devices): how many, and take
 * the k-th (the caller owns it afterwards). Returns the fd, -ERANGE, or
 * -EBADF when it was already taken. */
size_t nb_result_fd_count(const nb_results *res, size_t i);
int nb_result_take_fd(nb_results *res, size_t i, size_t k);

/* ---- virtual networks: network firewall owners ----
 *
 * A network owner is the firewall of one virtual network, as libvirt's
 * network driver installs it for <forward mode='nat|route|open'/> and an
 * isolated network (no <forward>), with port forwards as netavark's: the
 * forward filter (guests out, replies in, guests to each other, the rest
 * of the bridge's traffic rejected), masquerade for nat, DNAT for port
 * forwards, in the helper's table "inet netbroker_net". The ops of a batch
 * go to the kernel in one transaction at its last network op; ensure
 * writes nothing for a network whose rules are in place with the same
 * content hash. Root may; others only what a [policy] section grants
 * (net_apply, net_remove) on a bridge they own (netbrokerd(8), NETWORKS).
 */
typedef enum nb_net_mode {
        NB_NET_NAT = 0,
        NB_NET_ROUTE = 1,
        NB_NET_OPEN = 2,
        NB_NET_ISOLATED = 3,
} nb_net_mode;

/* outside_port on the host (outside_address, or any of the host's own
 * addresses when NULL) goes to guest_address:guest_port (0: outside_port). */
typedef struct nb_net_forward {
        size_t size; /* sizeof(nb_net_forward): NB_NET_FORWARD_INIT */
        const char *protocol; /* "tcp" or "udp" */
        const char *outside_address; /* NULL: any address of the host's */
        unsigned outside_port;
        const char *guest_address; /* inside one of the subnets */
        unsigned guest_port;
} nb_net_forward;
#define NB_NET_FORWARD_INIT                                                                        \
        {                                                                                          \
                .size = sizeof(nb_net_forward)                                                     \
        }

typedef struct nb_net_spec {
        size_t size; /* sizeof(nb_net_spec): NB_NET_SPEC_INIT */
        const char *bridge;
        const char *const *subnets; /* "ADDR/PREFIX", IPv4 or IPv6; at most 8 */
        size_t n_subnets;
        nb_net_mode mode;
        const char *forward_dev; /* NULL: any outgoing device */
        unsigned nat_port_min, nat_port_max; /* 0 0: 1024-65535 */
        const nb_net_forward *const *forwards; /* at most 64 */
        size_t n_forwards;
        nb_fw_mode fw_mode; /* NB_FW_ENSURE: nothing written when unchanged */
        /* libvirt fidelity: nat mode masquerades the IPv6 subnets too, as
         * libvirt's <nat ipv6='yes'/> (false: they are routed) */
        bool nat_ipv6;
        /* libvirt's <network ipv6='yes'> without an IPv6 address: IPv6
         * between the bridge's guests only, forwarding to and from it
         * rejected (without it and without an IPv6 subnet: no IPv6 rules) */
        bool ipv6_nogw;
} nb_net_spec;
#define NB_NET_SPEC_INIT                                                                           \
        {                                                                                          \
                .size = sizeof(nb_net_spec)                                                        \
        }

/* Install (or ensure) owner's network rules. Returns 0, -EINVAL (NULL or
 * a bad struct), -ENOMEM; the helper checks the rest. */
int nb_batch_net_apply(nb_batch *batch, const char *owner, const nb_net_spec *spec);
/* Remove every rule of owner (-ENOENT in the result if it has none). */
int nb_batch_net_remove(nb_batch *batch, const char *owner);
/* The network owners in the kernel, read back. */
int nb_batch_net_list(nb_batch *batch);
/* NetApply: the content hash (hex), whether ensure found it in place and
 * wrote nothing, its rule count. Returns 0, -ENODATA or -ERANGE. */
int nb_result_net(const nb_results *res, size_t i, const char **ret_hash, bool *ret_unchanged,
                  unsigned *ret_rules);
typedef struct nb_net_owner {
        size_t size; /* set by the caller: NB_NET_OWNER_INIT */
        const char *owner, *bridge, *hash;
        const char *mode; /* "nat", "route", "open", "isolated" */
        unsigned rules;
} nb_net_owner;
#define NB_NET_OWNER_INIT                                                                          \
        {                                                                                          \
                .size = sizeof(nb_net_owner)                                                       \
        }
/* NetList: how many owners, and the k-th (strings live as long as res).
 * Returns 0, -ENODATA or -ERANGE. */
size_t nb_result_net_owner_count(const nb_results *res, size_t i);
int nb_result_net_owner_at(const nb_results *res, size_t i, size_t k, nb_net_owner *ret);

/* Frees the results and closes every fd nobody took. */
void nb_results_free(nb_results *res);

#ifdef __cplusplus
}
#endif

#endif
