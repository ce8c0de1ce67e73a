// SPDX-License-Identifier: LGPL-2.1-or-later
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
/* The helper binary under test: $NB_TEST_HELPER when set, else the build's. */
const char *tu_helper_path(void);
void tu_helper_start(struct tu_helper *h, const char *config_body);
void tu_helper_stop(struct tu_helper *h);
/* Returns once helper pid is at rest: its start-up sweep of the firewall
 * table, on the firewall's lane while the loop serves, is done (it sends
 * netlink messages and holds fds a test would count as its own). Both
 * tu_helper_start() and tu_spawn() wait so; a test holding a lane on
 * purpose (NETBROKERD_TEST_HOLD_*) is not waited for. */
void tu_helper_at_rest(pid_t pid);

/* Raw protocol: connect, send a frame, receive one ServerMessage. */
int tu_raw_connect(const char *sock);
int tu_raw_try_connect(const char *sock);
int tu_raw_send(int fd, const void *body, size_t len, const int *fds, size_t nfds);
int tu_raw_send_msg(int fd, const ProtobufCMessage *m, const int *fds, size_t nfds);
/* Returns NULL on EOF or error; *ret_eof says it was a clean EOF. */
Netbroker__ServerMessage *tu_raw_recv(int fd, int *ret_err);
/* Hello exchange; asserts success. */
void tu_raw_hello(int fd);
/* The same, asking for events (an older client's Hello does not). */
void tu_raw_hello_events(int fd, bool events);
/* The next message is an Error with `status` whose message holds `needle`,
 * then the connection ends in an orderly EOF. */
void tu_raw_expect_error_and_close(int fd, int status, const char *needle);
/* The same, but the end may also be ECONNRESET: the helper closed with our
 * frame still unread in its socket (the kernel then resets: the Error came
 * first). */
void tu_raw_expect_error_and_close_or_reset(int fd, int status, const char *needle);

/* Open fds of a process (by counting /proc/PID/fd). */
int tu_fd_count(pid_t pid);
/* The fd count of pid once it is `expected` (closing is asynchronous), or
 * where it stayed after about `ms` milliseconds. */
int tu_fd_count_settled(pid_t pid, int expected, unsigned ms);
/* pid's netlink sockets of protocol (NETLINK_ROUTE, NETLINK_NETFILTER...). */
int tu_netlink_sockets(pid_t pid, int protocol);
/* Of those, the ones in multicast group `group` (1 to 32; 0: any). */
int tu_netlink_sockets_in(pid_t pid, int protocol, unsigned group);
/* pid's netlink sockets of protocol: their inodes, ascending, into
 * inodes[cap] (more fail the test); how many. */
size_t tu_netlink_inodes(pid_t pid, int protocol, unsigned long *inodes, size_t cap);
/* What the kernel could not queue on them (a full socket), all together. */
unsigned long tu_netlink_drops(pid_t pid, int protocol);
/* Asserts that the fd count of pid comes to `expected` within `ms`. */
void tu_assert_fd_count_settles(pid_t pid, int expected, unsigned ms);
/* Children of pid in state Z (zombies). */
int tu_zombies_of(pid_t pid);
/* pid exists and is not a zombie. */
bool tu_process_alive(pid_t pid);
/* All direct children of pid. */
int tu_children_of(pid_t pid);
/* The helper's counter `name` (Stats), asserted to be there. */
uint64_t tu_stat(nb_conn *c, const char *name);

/* Read a whole small file into a static buffer. */
const char *tu_read_file(const char *path);

/* A spawned connection with the given config body. */
nb_conn *tu_spawn(const char *config_body);
/* Spawns `helper` with the given config body, which must fail with
 * `expected` (-errno); what the helper wrote to its stderr, where it
 * explains itself, goes into buf (NUL-terminated; there must be some). */
void tu_spawn_expect_failure(const char *helper, const char *config_body, int expected, char *buf,
                             size_t size);
/* Run one Exec op (stdin `in` when not NULL); returns the results, which
 * the caller frees. */
nb_results *tu_exec1(nb_conn *c, const char *path, const char *const *argv, const char *const *env,
                     const char *in, unsigned timeout_ms);

/* Submit and free the batch; the helper must have answered (the ops may
 * have failed). The caller frees the results. */
nb_results *tu_submit(nb_conn *c, nb_batch *b);
/* tu_submit, and every op must have worked. */
nb_results *tu_submit_ok(nb_conn *c, nb_batch *b);
/* A FirewallApply (replace) into b: clean-traffic for MAC 52:54:00:00:00:01
 * and IP 192.168.100.50, owner on ifname. */
void tu_clean_traffic(nb_batch *b, const char *owner, const char *ifname);
/* Op i's status is `status` and (needle not NULL) its message says needle. */
void tu_assert_status(const nb_results *res, size_t i, int status, const char *needle);

uint64_t tu_now_us(void);

/* ---- network namespaces and the real tools ---- */

/* Move the calling (forked) test into a network namespace of its own, with
 * /usr/sbin and /sbin on PATH for ip(8). Call it first, before spawning the
 * helper, so the helper lives there too. */
void tu_private_netns(void);
/* A new, empty network namespace that the caller does not enter: an fd of
 * it (O_CLOEXEC). The namespace lives as long as the fd. */
int tu_new_netns_fd(void);

/* Run argv[0] (looked up in PATH) with stdin on /dev/null and stderr shared;
 * its stdout goes to *out (malloc'd, NUL-terminated) when out is not NULL.
 * Returns its exit status, or 128 + the signal that ended it. */
int tu_run(const char *const argv[], char **out);
/* `sh -c CMD` (printf format), which must exit 0; returns its stdout
 * (caller frees). */
char *tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* text (a helper's log) with each line after "| ", for a failure message:
 * scripts/test.sh drops the helpers' audit lines from what CI shows, and
 * a message quoting them would come out empty. Caller frees. */
char *tu_log_quote(const char *text);

/* What `ip -d -s -j link show dev DEV` says at a dotted path into its one
 * object ("mtu", "linkinfo.info_data.mode", "stats64.rx.packets"): a string
 * as it is, anything else as JSON ("true", "1500", "[\"UP\", ...]"),
 * TU_ABSENT when the path is not there, NULL when there is no such device.
 * netns: a path to open as the namespace to look in (nsenter --net=), or
 * NULL for ours. The string stays valid for the next 15 calls. */
#define TU_ABSENT "(absent)"
const char *tu_link_get_ns(const char *netns, const char *dev, const char *path);
const char *tu_link_get(const char *dev, const char *path);
bool tu_link_exists(const char *dev);
/* Every interface name in this namespace from `ip -j link show`, one per
 * line, with a newline before the first as well: search for "\nNAME\n".
 * Caller frees. */
char *tu_link_names(void);
/* `ip -d -j link show` as it is, to compare the whole picture before and
 * after. Caller frees. */
char *tu_links_snapshot(void);
/* `ip link add NAME type veth peer name PEER`, asserted to work. */
void tu_veth(const char *name, const char *peer);
/* n veth pairs PREFIX%03d / PREFIXp%03d in one `ip -batch`. */
void tu_veths(const char *prefix, int n);

/* A test binary's main: skips (exit 77, saying why) unless root (why_root
 * says what for) and able to move into a private network namespace, so
 * nothing the helper or a program it runs does can touch the host's network,
 * then runs the suites (a NULL-terminated list of constructors), or only the
 * test case argv[1] when given. Returns the exit status. */
int tu_main_in_netns(const char *prog, const char *why_root, int argc, char **argv,
                     Suite *(*const suites[])(void));

/* The path of a helper script in tests/py/ (each says what it does and
 * its arguments: python3 tests/py/NAME --help). NB_TEST_PY_DIR is the
 * source tree's tests/py, set by tests/CMakeLists.txt. */
#define TU_PY(name) NB_TEST_PY_DIR "/" name

/* The allow-list every test config starts from. */
#define TU_ALLOW                                                                                   \
        "exec_allow = /bin/true /bin/false /bin/echo /bin/sh /bin/cat /bin/sleep /usr/bin/env "    \
        "/bin/ls\n"
