/* Scenario "restart": libvirt's per-guest firewall commands (restart_cmds.txt)
 * and the same filters as one nftables file (N). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum rs_tool { RS_EBTABLES, RS_IPTABLES, RS_IP6TABLES, RS_N_TOOLS };

#define RS_MAX_ARGS 32

enum rs_expect {
        RS_MUST_SUCCEED, /* libvirt's transaction fails (and rolls back) otherwise */
        RS_EXPECT_OK, /* errors ignored by libvirt; succeeds in the state we model */
        RS_EXPECT_FAIL, /* errors ignored by libvirt; fails in the state we model */
};

struct rs_cmd {
        enum rs_tool tool;
        char *argv[RS_MAX_ARGS]; /* NULL-terminated; argv[0] is the tool's name */
        char *buf; /* owns the strings of argv */
        enum rs_expect expect;
        /* A query (ebtables -L): the lines "-j X-..." (X in jump_prefixes)
         * its output must have; -1: not a query. */
        int jumps;
        char jump_prefixes[3];
};

struct rs_cmdlist {
        struct rs_cmd *v;
        size_t n, cap;
};

struct rs_guest {
        unsigned index;
        char ifname[16]; /* vnetN */
        char mac[18]; /* 52:54:00:xx:xx:xx */
        char ip[16]; /* 10.x.y.z */
};

/* START: the first instantiation on a host without any of the guest's
 * chains (VM start). RESTART: the same again while the chains of the
 * previous instantiation are in place (libvirtd restart). */
enum rs_phase { RS_START, RS_RESTART };

void rs_guest_init(struct rs_guest *g, unsigned index);
/* Append the commands of one instantiation of clean-traffic + no-promisc
 * on g's tap. Returns 0 or -ENOMEM. */
int rs_cmds_instantiate(struct rs_cmdlist *l, const struct rs_guest *g, enum rs_phase phase);
void rs_cmdlist_clear(struct rs_cmdlist *l);
/* Lines of `out` that libvirt's query callback would follow: "-j X-..."
 * with X in c->jump_prefixes. */
int rs_count_jumps(const struct rs_cmd *c, const char *out, size_t len);
/* Print a command, for error messages. */
void rs_cmd_print(const struct rs_cmd *c, FILE *f);

/* The reference ruleset: the same filters for the guests as one nftables
 * file (netdev family, one ingress and one egress chain per tap). */
#define RS_NFT_TABLE "nbbench"
int rs_nft_write(FILE *f, const struct rs_guest *guests, size_t n);
