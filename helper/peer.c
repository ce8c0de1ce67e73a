// SPDX-License-Identifier: LGPL-2.1-or-later
/* Peer credentials; see peer.h. */
#include "peer.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

int nbd_peer_from_socket(int fd, struct nbd_peer *ret)
{
        struct nbd_peer p = {0};
        struct ucred cred;
        socklen_t len = sizeof(cred);
        gid_t groups[NBD_PEER_MAX_GROUPS];

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        if (len != sizeof(cred))
                return -EACCES;
        p.uid = cred.uid;
        p.gid = cred.gid;
        p.pid = cred.pid;
        len = sizeof(groups);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0) {
                p.n_groups = len / sizeof(gid_t);
        } else if (errno == ERANGE) {
                /* More groups than we keep: the kernel fills none, so ask
                 * for all of them in a buffer that fits. Rare enough that
                 * a second call is fine; judged on the first ones. */
                gid_t big[65536 / sizeof(gid_t)];
                socklen_t blen = len <= sizeof(big) ? len : sizeof(big);
                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, big, &blen) == 0) {
                        memcpy(groups, big, sizeof(groups));
                        p.n_groups = NBD_PEER_MAX_GROUPS;
                }
        } else if (errno != ENOPROTOOPT) {
                return -errno;
        }
        memcpy(p.groups, groups, p.n_groups * sizeof(gid_t));
        *ret = p;
        return 0;
}

bool nbd_peer_in_group(const struct nbd_peer *p, gid_t g)
{
        if (p->gid == g)
                return true;
        for (size_t i = 0; i < p->n_groups; i++)
                if (p->groups[i] == g)
                        return true;
        return false;
}
