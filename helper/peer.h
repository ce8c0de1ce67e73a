// SPDX-License-Identifier: LGPL-2.1-or-later
/* Who is on the other end of a connection, as the kernel says: never what a
 * message claims. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Supplementary groups kept per peer; a peer in more is judged on the first
 * NBD_PEER_MAX_GROUPS the kernel reports (a group grant it misses is a
 * refusal, never a grant it should not have). */
#define NBD_PEER_MAX_GROUPS 64

struct nbd_peer {
        uid_t uid;
        gid_t gid;
        pid_t pid;
        gid_t groups[NBD_PEER_MAX_GROUPS]; /* supplementary (SO_PEERGROUPS) */
        size_t n_groups;
};

/* SO_PEERCRED and SO_PEERGROUPS of a connected AF_UNIX socket. Returns 0 or
 * -errno; *ret is untouched on failure. A kernel without SO_PEERGROUPS
 * (before 4.13) gives the effective gid alone. */
int nbd_peer_from_socket(int fd, struct nbd_peer *ret);

static inline bool nbd_peer_is_root(const struct nbd_peer *p)
{
        return p->uid == 0;
}

/* The effective gid or one of the supplementary groups is g. */
bool nbd_peer_in_group(const struct nbd_peer *p, gid_t g);
