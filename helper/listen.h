// SPDX-License-Identifier: LGPL-2.1-or-later
/* --listen's socket: who may connect to it. The default, 0700 with the
 * helper's group, admits root alone; --listen-mode and --listen-group open
 * it to a group (a session daemon's, as systemd's SocketMode= and
 * SocketGroup= do for netbrokerd.socket). Whoever connects is still
 * admitted by the configuration's allow lists and policy: the socket's
 * permissions are the first gate, not the only one. */
#pragma once

#include <sys/types.h>

#include "err.h"

struct nbd_listen_opts {
        mode_t mode; /* 0: 0700 */
        gid_t gid; /* (gid_t)-1: the helper's */
};

/* "0660": the permission bits of a socket (read-write for its owner, no
 * execute nor special bits); 0 or -EINVAL with e saying why. */
int nbd_listen_parse_mode(const char *s, mode_t *ret, struct nbd_err *e);
/* A group name, or a number; 0 or -EINVAL / -ENOENT with e saying why. */
int nbd_listen_parse_group(const char *s, gid_t *ret, struct nbd_err *e);

/* Bind and listen at path with o's permissions, set as the socket is made
 * (its mode through the umask, never wider for an instant; its group
 * before listen(), so no client connects before). A mode or group other
 * than the default needs path's directory to be root's and writable by
 * root alone: else another user could put something else at path between
 * the bind and the chown. Returns the listening fd or -errno with e set. */
int nbd_listen_on(const char *path, const struct nbd_listen_opts *o, struct nbd_err *e);
