/* Shared by the test suites: starting the helper under test, raw protocol
 * access, and /proc inspection. */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "codec.h"
#include "netbroker.h"

/* Write a config file with the given body (plus nothing else); returns its
 * path (static buffer per call site is not needed: caller frees). */
char *tu_config(const char *body);

/* A helper listening on a fresh socket path. */
struct tu_helper {
        pid_t pid;
        char sock[108];
        char *config;
};
void tu_helper_start(struct tu_helper *h, const char *config_body);
void tu_helper_stop(struct tu_helper *h);

/* Raw protocol: connect, send a frame, receive one ServerMessage. */
int tu_raw_connect(const char *sock);
int tu_raw_send(int fd, const void *body, size_t len, const int *fds, size_t nfds);
int tu_raw_send_msg(int fd, const ProtobufCMessage *m, const int *fds, size_t nfds);
/* Returns NULL on EOF or error; *ret_eof says it was a clean EOF. */
Netbroker__ServerMessage *tu_raw_recv(int fd, int *ret_err);
/* Hello exchange; asserts success. */
void tu_raw_hello(int fd);

/* Open fds of a process (by counting /proc/PID/fd). */
int tu_fd_count(pid_t pid);
/* Children of pid in state Z (zombies). */
int tu_zombies_of(pid_t pid);
/* pid exists and is not a zombie. */
bool tu_process_alive(pid_t pid);
/* All direct children of pid. */
int tu_children_of(pid_t pid);
/* Read a whole small file into a static buffer. */
const char *tu_read_file(const char *path);

/* A spawned connection with the given config body. */
nb_conn *tu_spawn(const char *config_body);

uint64_t tu_now_us(void);

/* The allow-list every test config starts from. */
#define TU_ALLOW                                                                                   \
        "exec_allow = /bin/true /bin/false /bin/echo /bin/sh /bin/cat /bin/sleep /usr/bin/env "    \
        "/bin/ls\n"
