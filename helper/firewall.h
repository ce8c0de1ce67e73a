/* The firewall: owners' rules compiled to nftables with libnftnl, every
 * change of a batch in one nfnetlink transaction (libmnl), and the content
 * hash kept in the kernel beside the rules. Knows nothing of the wire format.
 *
 * Layout, in the table "netbroker" (netdev family, so it works the same for
 * taps on a bridge, macvtaps and routed taps):
 *   chain "OWNER/from"  what the guest sends: the ingress hook of its tap,
 *                       the egress hook of its macvtap
 *   chain "OWNER/to"    what the guest receives: the other hook
 *   chain "OWNER/from/GROUP", "OWNER/to/GROUP"  one regular chain per group
 *                       and direction; the base chain jumps to them in order,
 *                       so RETURN leaves a group as in libvirt's filters.
 * Both base chains carry the comment "netbroker <hash> <ifname> <rules>
 * uid=<uid>": the hash lives and dies with the rules (nft flush ruleset
 * removes both), and so does the uid whose request made them, the owner's
 * creator (a comment without one, from before, counts as uid 0).
 * A replace deletes the owner's chains and adds the new ones in the same
 * transaction: the old hook filters until the new rules take over at
 * commit, so there is no instant without filtering. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop.h"

#define NBD_FW_TABLE "netbroker"
#define NBD_FW_OWNER_MAX 64
#define NBD_FW_GROUP_MAX 32
#define NBD_FW_HASH_HEX 33 /* 128 bits in hex, and a NUL */
#define NBD_FW_ERRLEN 256

enum nbd_fw_dir { NBD_FW_DIR_FROM, NBD_FW_DIR_TO };
enum nbd_fw_verdict { NBD_FW_V_ACCEPT, NBD_FW_V_DROP, NBD_FW_V_REJECT, NBD_FW_V_RETURN };

struct nbd_fw_mac {
        bool set, neg;
        uint8_t addr[6], mask[6];
};

struct nbd_fw_ip {
        bool set, neg;
        int family; /* 4 or 6 */
        uint8_t addr[16], mask[16];
};

struct nbd_fw_num {
        bool set, neg;
        uint32_t v;
};

/* One rule, parsed and checked (nbd_fw_rule_check) before compiling. */
struct nbd_fw_rule {
        enum nbd_fw_dir dir;
        enum nbd_fw_verdict verdict;
        struct nbd_fw_mac ether_src, ether_dst, arp_sha;
        struct nbd_fw_num ether_type, vlan_id, arp_op;
        struct nbd_fw_ip arp_spa, arp_tpa, ip_src, ip_dst;
        uint8_t l4proto;
        uint16_t sport[2], dport[2]; /* [0] = 0: any */
        bool has_icmp_type;
        uint8_t icmp_type;
};

struct nbd_fw_group {
        char name[NBD_FW_GROUP_MAX + 1];
        struct nbd_fw_rule *rules;
        size_t n_rules;
};

struct nbd_fw_owner_spec {
        const char *owner;
        const char *ifname;
        /* The guest's traffic leaves through the interface's egress (a
         * macvtap); on a tap it enters through its ingress. */
        bool reversed;
        const struct nbd_fw_group *groups;
        size_t n_groups;
        bool ensure;
        uid_t uid; /* whose request: recorded as the creator */
        bool own_only; /* -EPERM when the owner exists for another uid */
};

struct nbd_fw;
struct nbd_fw_txn;

int nbd_fw_open(struct nbd_loop *loop, struct nbd_fw **ret);
void nbd_fw_close(struct nbd_fw *fw);

/* Parse helpers for the model (0 or -EINVAL). */
int nbd_fw_parse_mac(const char *s, struct nbd_fw_mac *ret);
int nbd_fw_parse_ip(const char *s, struct nbd_fw_ip *ret);
bool nbd_fw_owner_valid(const char *owner);
bool nbd_fw_group_valid(const char *name);
/* Rules that are well-formed but cannot work (a port without tcp/udp, an
 * ARP match on IPv6, reject on egress, ...): 0, or -EINVAL with a sentence. */
int nbd_fw_rule_check(const struct nbd_fw_rule *r, bool reversed, char *err);

/* A transaction: starts from one read of the table (for ensure and for
 * knowing what to delete), collects applies and removes, and commits them
 * all in one nfnetlink batch. */
int nbd_fw_txn_begin(struct nbd_fw *fw, struct nbd_fw_txn **ret, char *err);

struct nbd_fw_applied {
        char hash[NBD_FW_HASH_HEX];
        bool unchanged; /* ensure: already in place, nothing queued */
        unsigned rules;
};

int nbd_fw_txn_apply(struct nbd_fw_txn *t, const struct nbd_fw_owner_spec *s,
                     struct nbd_fw_applied *ret, char *err);
/* -ENOENT when the owner has no rules; -EPERM when only_for is given and
 * the owner was made for another uid. */
int nbd_fw_txn_remove(struct nbd_fw_txn *t, const char *owner, const uid_t *only_for, char *err);
/* Send everything queued as one transaction and read every ack. Nothing to
 * send is a success that writes nothing. */
int nbd_fw_txn_commit(struct nbd_fw_txn *t, char *err);
void nbd_fw_txn_free(struct nbd_fw_txn *t);

/* The owners in the kernel. */
struct nbd_fw_owner_info {
        char owner[NBD_FW_OWNER_MAX + 1];
        char ifname[IFNAMSIZ];
        char hash[NBD_FW_HASH_HEX];
        unsigned rules;
        uid_t uid; /* its creator */
};
typedef int (*nbd_fw_owner_fn)(const struct nbd_fw_owner_info *o, void *data);
int nbd_fw_list(struct nbd_fw *fw, nbd_fw_owner_fn fn, void *data, char *err);

/* Compile one owner and write every chain and rule as libnftnl prints it,
 * after a round trip through the netlink encoding and libnftnl's parser
 * (what the kernel would be sent, read back). For tests and debugging. */
int nbd_fw_render(const struct nbd_fw_owner_spec *s, char **ret_text, char *err);

/* Compile one owner and hash it, without the kernel (unit tests): the hash,
 * and the number of rules it makes. */
int nbd_fw_hash(const struct nbd_fw_owner_spec *s, char hash[NBD_FW_HASH_HEX], unsigned *ret_rules,
                char *err);
