/* The firewall's table as the kernel holds it: our owners, their chains
 * and the comment their base chains carry, read with a dump. Shared by the
 * kernel side only (fw_table.c reads, fw_kernel.c's transactions use what
 * was read); callers see fw_kernel.h. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "fw_kernel.h"
#include "fw_model.h"
#include "loop.h"

struct nbd_fw {
        struct mnl_socket *nl; /* requests and dumps */
        struct mnl_socket *mon; /* NFNLGRP_NFTABLES: our table being deleted */
        struct nbd_loop *loop;
        struct nbd_watch monw;
        uint32_t seq;
};

struct nbd_fw_owner_state {
        char owner[NBD_FW_OWNER_MAX + 1];
        char ifname[IFNAMSIZ];
        char hash[NBD_FW_HASH_HEX];
        unsigned rules;
        unsigned uid; /* its creator, from the comment (0 when it names none) */
        bool has_base;
        char **chains; /* base chains first, then group chains */
        unsigned *chain_rules; /* rules in each chain, when counted */
        size_t n_chains;
        unsigned kernel_rules; /* rules in its group chains, when counted */
        bool touched; /* an op of this transaction queued a change */
        struct nbd_fw_owner_state *next;
};

void nbd_fw_owners_free(struct nbd_fw_owner_state *o);
struct nbd_fw_owner_state *nbd_fw_owner_find(struct nbd_fw_owner_state *list, const char *owner);
/* Our owners as their chains show them: 0, or -errno with *ret untouched. */
int nbd_fw_read_owners(struct nbd_fw *fw, struct nbd_fw_owner_state **ret);
/* Count the rules in each of the owners' chains (what ensure compares):
 * 0 or -errno. */
int nbd_fw_count_rules(struct nbd_fw *fw, struct nbd_fw_owner_state *owners);
/* Fill e for a failed nbd_fw_read_owners (rules false) or
 * nbd_fw_count_rules (rules true); returns r. */
int nbd_fw_read_failed(struct nbd_err *e, int r, bool rules);
