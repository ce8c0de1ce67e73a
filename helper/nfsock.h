// SPDX-License-Identifier: LGPL-2.1-or-later
/* The loop's nfnetlink socket for the calls that open none of their own:
 * bandwidth's table (bw_nft.c) and the network owners' transactions
 * (fw_net_kernel.c). Made at its first need and kept, because closing an
 * nfnetlink socket makes nf_tables finish destroying what the last commit
 * in the namespace replaced or deleted first: an RCU grace period under
 * its commit mutex (nft_rcv_nl_event), 13-29 ms here, which a socket
 * opened and closed for each operation made the loop, and every client
 * with it, wait. The firewall's lane keeps one of its own (fw_kernel.c).
 * On the loop only. */
#pragma once

#include <libmnl/libmnl.h>
#include <stdbool.h>

/* What a dump is read into on a shared socket: the kernel makes a dump's
 * datagrams as large as the largest read the socket has had (up to 32
 * KiB), and one read into less is cut (libmnl: ENOSPC). */
#define NBD_NFSOCK_DUMP_BUF 65536

/* The socket, made if need be (bound, a 4 MiB receive buffer, short
 * acks: NETLINK_CAP_ACK) and emptied of what an earlier call left unread
 * (an abandoned dump is read to its end). 0 or -errno. The caller does
 * not close it. */
int nbd_nfsock_get(struct mnl_socket **ret);
/* Read nfnetlink socket fd until it is empty (a dump left running is read
 * to its end: the kernel makes its messages as they are read): true, or
 * false when a read failed otherwise (a dump the kernel could not go on
 * with may still be running, and the next would be refused: the socket
 * is best closed). Any thread, on a socket of its own. */
bool nbd_nfsock_drain(int fd);
/* At shutdown: closed. */
void nbd_nfsock_close(void);
