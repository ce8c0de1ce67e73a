// SPDX-License-Identifier: LGPL-2.1-or-later
/* Requests as libnetbroker builds them: the seed corpus of the fuzzers
 * (gen_corpus.c) and the representative batch of the allocation-failure
 * test are made from these, so both start from what a real client sends.
 * Names refer to fake_kernel.h's starting world (eth0, br0, vnet0,
 * macvtap0, fail0, owner guest0). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* libnetbroker's nb_batch; its header is not included here, because its
 * names clash with the helper's (tests include both sides). */
struct nb_batch;

/* Fill b; netns_fd is a network namespace fd for a veth peer, or -1. */
typedef int (*nbt_build_fn)(struct nb_batch *b, int netns_fd);

struct nbt_request {
        const char *name;
        nbt_build_fn build;
};

/* One request per op (1..16, in the order of proto/netbroker.proto's Op),
 * then mixed ones: every op in one batch, failures, undo, refusals. */
extern const struct nbt_request nbt_requests[];
extern const size_t nbt_n_requests;

/* Every op kind in one batch, each expected to succeed on the fake; and
 * the same without its Exec, so that it runs to the end inside
 * nb_job_start. */
int nbt_build_every_op(struct nb_batch *b, int netns_fd);
int nbt_build_every_op_but_exec(struct nb_batch *b, int netns_fd);
/* One TapCreate the fake kernel refuses with EPERM ("eperm0"). */
int nbt_build_eperm_tap(struct nb_batch *b, int netns_fd);
/* A BridgeOptSet the fake kernel refuses half-way: fail0's delay taken,
 * then STP on refused (EIO). */
int nbt_build_half_bridge_opt(struct nb_batch *b, int netns_fd);
/* LinkList (all, then vnet0) and BandwidthShow of vnet0. */
int nbt_build_shows(struct nb_batch *b, int netns_fd);
/* Two FirewallApply and a FirewallRemove, with CONTINUE_ON_ERROR. */
int nbt_build_firewall_continue(struct nb_batch *b, int netns_fd);
/* A TapCreate, a FirewallApply of an owner the fake refuses at commit
 * ("failg1"), and the FirewallRemove of an owner that is gone already:
 * the last queues nothing, so the commit is sent after every op ended. */
int nbt_build_late_commit_failure(struct nb_batch *b, int netns_fd);
/* A TapCreate and two FirewallApply, the first of an owner the fake
 * refuses ("failg1"): the last commits, and its commit fails. */
int nbt_build_last_op_commit_failure(struct nb_batch *b, int netns_fd);
/* FirewallList with every rule's counters (the fake's owner guest0 has
 * three). */
int nbt_build_fw_counters(struct nb_batch *b, int netns_fd);

/* The body of a ClientMessage carrying b's request with this id, or of a
 * Hello; malloc'ed. Return 0 or -errno. */
int nbt_pack_request(const struct nb_batch *b, uint64_t id, uint8_t **ret, size_t *ret_len);
int nbt_pack_hello(uint8_t **ret, size_t *ret_len);

/* A packed request built by `build`, with its op count and copies of the
 * fds it goes with (at most 4; the caller closes them). */
struct nbt_packed {
        uint8_t *body;
        size_t len, n_ops;
        int fds[4];
        size_t nfds;
};
int nbt_pack(nbt_build_fn build, uint64_t id, int netns_fd, struct nbt_packed *ret);
