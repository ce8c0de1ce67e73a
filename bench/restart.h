/* Scenario "restart": libvirt's per-guest firewall commands (restart_cmds.txt). */
#pragma once

#include <stddef.h>
#include <stdio.h>

enum rs_tool { RS_EBTABLES, RS_IPTABLES, RS_IP6TABLES, RS_N_TOOLS };

#define RS_MAX_ARGS 32
#define RS_MAX_CMDS 256

enum rs_expect {
        RS_MUST_SUCCEED, /* libvirt's transaction fails (and rolls back) otherwise */
        RS_EXPECT_OK, /* errors ignored by libvirt; succeeds in the state we model */
        RS_EXPECT_FAIL, /* errors ignored by libvirt; fails in the state we model */
};

struct rs_cmd {
        enum rs_tool tool;
        char *argv[RS_MAX_ARGS]; /* NULL-terminated, in buf; argv[0] is the tool's name */
        char buf[512];
        enum rs_expect expect;
        /* A query (ebtables -L): the lines "-j X-..." (X in jump_prefixes)
         * its output must have; -1: not a query. */
        int jumps;
        char jump_prefixes[3];
};

struct rs_cmdlist {
        struct rs_cmd v[RS_MAX_CMDS];
        size_t n;
};

struct rs_guest {
        char ifname[16]; /* vnetN */
        char mac[18]; /* 52:54:00:xx:xx:xx */
        char ip[16]; /* 10.x.y.z */
};

/* START: the first instantiation on a host without any of the guest's
 * chains (VM start). RESTART: the same again while the chains of the
 * previous instantiation are in place (libvirtd restart). */
enum rs_phase { RS_START, RS_RESTART };

void rs_guest_init(struct rs_guest *g, unsigned index);
/* l's commands: one instantiation of clean-traffic + no-promisc on g's tap. */
int rs_cmds_instantiate(struct rs_cmdlist *l, const struct rs_guest *g, enum rs_phase phase);
/* Lines of `out` that libvirt's query callback would follow: "-j X-..."
 * with X in c->jump_prefixes. */
int rs_count_jumps(const struct rs_cmd *c, const char *out);
void rs_cmd_print(const struct rs_cmd *c, FILE *f);
