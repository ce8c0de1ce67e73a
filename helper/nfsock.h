// SPDX-License-Identifier: LGPL-2.1-or-later
/* Kept nfnetlink sockets. Closing an nfnetlink socket makes nf_tables
 * finish destroying what the last commit in the namespace replaced or
 * deleted first: an RCU grace period under its commit mutex
 * (nft_rcv_nl_event), 13-29 ms here, which a socket opened and closed for
 * each operation made every reply wait. So the helper keeps two, each
 * made at its first need: the loop's, for the calls that open none of
 * their own (bandwidth's table, bw_nft.c; the network owners'
 * transactions, fw_net_kernel.c), and the firewall lane's (fw_kernel.c).
 * A kept socket is used by one thread at a time. */
#pragma once

#include <libmnl/libmnl.h>

/* What a dump is read into on a kept socket: the kernel makes a dump's
 * datagrams as large as the largest read the socket has had (up to 32
 * KiB), and one read into less is cut (libmnl: ENOSPC). */
#define NBD_NFSOCK_DUMP_BUF 65536

/* A kept socket: zero-initialised, none yet. */
struct nbd_nfsock {
        struct mnl_socket *nl;
};

/* k's socket, made if need be (bound, connected to the kernel alone, a
 * 4 MiB receive buffer, short acks: NETLINK_CAP_ACK) and emptied of what an earlier call left
 * unread (an abandoned dump is read to its end, as the kernel makes its messages while they are
 * read; one that cannot be read out costs a new socket, and that once the close's wait). 0 or
 * -errno. Not closed by the caller, and not kept by it past the call that took it: the next take
 * may make a new one. */
int nbd_nfsock_take(struct nbd_nfsock *k, struct mnl_socket **ret);
/* k's socket closed (at shutdown). */
void nbd_nfsock_drop(struct nbd_nfsock *k);

/* How often a reader asks again for a dump that came back interrupted
 * before it gives up with -EAGAIN ("the ruleset kept changing"). Every
 * commit in the namespace interrupts a dump under way, and another
 * client's bandwidth changes, back to back, interrupted a 20-guest chain
 * dump one time in five: five tries failed one replace in 500; 20 tries,
 * on a 2-core machine busy with other tests, one in some 2,400. */
#define NBD_NFSOCK_DUMP_TRIES 40

/* once(data), asked again while it returns -EINTR (a dump interrupted by
 * a commit), at most NBD_NFSOCK_DUMP_TRIES times: its result, or -EAGAIN
 * when every try was interrupted ("the ruleset kept changing": the client
 * may ask again). once sends its dumps and reads them from the start, and
 * forgets what an interrupted try collected first. */
int nbd_nfsock_dump_tries(int (*once)(void *data), void *data);
/* What a reader's r (-errno) says: for -EAGAIN, that the ruleset kept
 * changing (nbd_nfsock_dump_tries), else strerror(-r). */
const char *nbd_nfsock_strerror(int r);

/* The answer to request seq on nl read to its end into buf[size], cb (as
 * for mnl_cb_run) called on each of its messages: a dump up to its DONE, a
 * request with NLM_F_ACK up to its ack or error (not for a request
 * without: its answer has no end to wait for). Read to the end whatever
 * happens, so the next request on nl does not take the rest for its own
 * answer; messages of other requests are skipped. Returns 0; -EINTR when
 * the kernel flagged the dump as interrupted by a change (NLM_F_DUMP_INTR:
 * cb saw only the messages before the flag; ask again, from the start);
 * the kernel's -errno (-ENOENT: no such table...); the callback's failure
 * (MNL_CB_ERROR: -errno, or -EIO; cb is not called again; MNL_CB_STOP
 * counts as MNL_CB_OK); or a read's
 * -errno (-ENOSPC: a datagram did not fit; the answer's rest is left). */
int nbd_nfsock_read_answer(struct mnl_socket *nl, char *buf, size_t size, uint32_t seq, mnl_cb_t cb,
                           void *data);

/* The loop's (on the loop only): nbd_nfsock_take() of it, and its drop. */
int nbd_nfsock_get(struct mnl_socket **ret);
void nbd_nfsock_close(void);
/* The firewall lane's: every nftables call made on that lane goes through
 * it (the firewall's commits and reads, fw_kernel.c; bandwidth's policers,
 * bw_nft.c), and so does the same call made on the loop when there is no
 * lane: one thread at a time, in the lane's order. Dropped at shutdown,
 * after the lanes stopped (fw_kernel.c's close). */
int nbd_nfsock_lane_get(struct mnl_socket **ret);
void nbd_nfsock_lane_close(void);
