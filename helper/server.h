// SPDX-License-Identifier: LGPL-2.1-or-later
/* Connections: accept, check the peer, read frames, decode, hand requests to
 * dispatch.c, queue replies. The only file that knows both sockets and the
 * wire format. */
#pragma once

#include <stdbool.h>

#include "config.h"
#include "loop.h"

struct nbd_server;

struct nbd_backend;
struct nbd_links;

/* links may be NULL: the interface ops are then not offered. */
struct nbd_fw;
struct nbd_bw;
/* links, fw may be NULL: those ops are then not offered. be (backend.h) is
 * the kernel half they were opened with, for the dispatcher. */
struct nbd_fw_gone;
int nbd_server_new(const struct nbd_config *cfg, struct nbd_loop *loop,
                   const struct nbd_backend *be, struct nbd_links *links, struct nbd_fw *fw,
                   struct nbd_fw_gone *fw_gone, struct nbd_bw *bw, struct nbd_server **ret);
void nbd_server_free(struct nbd_server *s);

/* A listening socket (systemd's or our own). */
int nbd_server_add_listener(struct nbd_server *s, int fd);

/* An already connected socket (the client library's socketpair). The helper
 * exits once every adopted connection has closed and no listener exists. */
int nbd_server_adopt(struct nbd_server *s, int fd);

/* A configuration read again (SIGHUP), in force from the next decision:
 * admission of the next connection, validation of the next request, and
 * the checks an op makes when it runs; limits a connection took at accept
 * (max_frame, max_fds_per_frame) stay. Called from the loop, never from a
 * job; the caller frees the old configuration afterwards. */
void nbd_server_set_config(struct nbd_server *s, const struct nbd_config *cfg);

/* True once the server has nothing left to serve. */
bool nbd_server_done(const struct nbd_server *s);

/* Descriptors clients gave that the closer (closer.h) has not closed yet:
 * what a caller that counts the process's fds (the fuzz harness) waits for
 * before it counts. The helper itself never waits for them. */
unsigned nbd_server_closing(const struct nbd_server *s);

/* Close every connection and stop listening (SIGTERM). */
void nbd_server_shutdown(struct nbd_server *s);

/* fn(data) runs when each request's job ends, before its reply (see
 * nbd_dispatch_on_job_end): the capabilities' own end-of-job work. */
int nbd_server_on_job_end(struct nbd_server *s, void (*fn)(void *data), void *data);

struct nbd_dispatch_ctx;
const struct nbd_dispatch_ctx *nbd_server_dispatch_ctx(const struct nbd_server *s);

/* The lanes blocking kernel calls run on (nbd_dispatch_set_lanes). */
struct nbd_lane;
void nbd_server_set_lanes(struct nbd_server *s, struct nbd_lane *fw, struct nbd_lane *links);
/* Loop-free decode (issue 14): the lanes large frames are decoded on,
 * other callers' and root's (NULL: on the loop). See server.c's
 * DECODE_ON_LANE_MIN. */
void nbd_server_set_decode_lanes(struct nbd_server *s, struct nbd_lane *decode,
                                 struct nbd_lane *decode_root);
