/* Connections: accept, check the peer, read frames, decode, hand requests to
 * dispatch.c, queue replies. The only file that knows both sockets and the
 * wire format. */
#pragma once

#include <stdbool.h>

#include "config.h"
#include "loop.h"

struct nb_server;

struct nb_links;

/* links may be NULL: the interface ops are then not offered. */
struct nb_fw;
struct nb_bw;
/* links, fw may be NULL: those ops are then not offered. */
struct nb_fw_gone;
int nb_server_new(const struct nb_config *cfg, struct nb_loop *loop, struct nb_links *links,
                  struct nb_fw *fw, struct nb_fw_gone *fw_gone, struct nb_bw *bw,
                  struct nb_server **ret);
void nb_server_free(struct nb_server *s);

/* A listening socket (systemd's or our own). */
int nb_server_add_listener(struct nb_server *s, int fd);

/* An already connected socket (the client library's socketpair). The helper
 * exits once every adopted connection has closed and no listener exists. */
int nb_server_adopt(struct nb_server *s, int fd);

/* True once the server has nothing left to serve. */
bool nb_server_done(const struct nb_server *s);

/* Close every connection and stop listening (SIGTERM). */
void nb_server_shutdown(struct nb_server *s);

struct nb_dispatch_ctx;
const struct nb_dispatch_ctx *nb_server_dispatch_ctx(const struct nb_server *s);
