// SPDX-License-Identifier: LGPL-2.1-or-later
/* Shared by the hostile-client suites (test_hostile.c as root,
 * test_hostile_user.c as an admitted uid with a policy). */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "testutil.h"

long th_rss_kib(pid_t pid);
/* How much an attack may grow the helper: max_connection_memory (32 MiB)
 * and the allocator's slack; a sanitized helper also keeps freed memory in
 * ASan's quarantine (256 MiB at most), so there the bound only tells a
 * budget from none (the old helper grew by 130 MiB unsanitized). */
#if defined(__SANITIZE_ADDRESS__)
#define TH_GROWTH_MAX_KIB (160L * 1024)
#else
#define TH_GROWTH_MAX_KIB (48L * 1024)
#endif
/* One Ping round trip on an open raw connection, in microseconds. */
uint64_t th_ping_us(int fd, uint64_t id);
/* The longest Ping a good client (root, its own connection) sees over ms
 * milliseconds, one Ping every 5 ms. */
uint64_t th_worst_ping_us(const struct tu_helper *h, unsigned ms);
/* What an attack did to the helper, for the log. */
void th_report(const char *attack, const struct tu_helper *h, int fds_before, long rss_before,
               long rss_peak, uint64_t worst_ping);
/* A Ping on a new connection is answered (and the helper is alive). */
void th_assert_serves(const struct tu_helper *h);
/* Requests on a raw connection, as an attacker writes them. */
void th_send_request(int fd, uint64_t id, Netbroker__Op **ops, size_t n, const int *fds,
                     size_t nfds);
/* Three taps from tap_template and two macvtaps from macvtap_template on
 * parent: six frames back (five of fds, then the reply). */
void th_send_fd_request(int fd, const char *parent, const char *tap_template,
                        const char *macvtap_template);
void th_send_exec_request(int fd, uint64_t id);
/* Start a helper whose stderr (its log, at notice level whatever
 * NETBROKERD_LOG_LEVEL says) goes to a new file; its path is written to
 * log_path (at least 32 bytes). */
void th_helper_start_logged(struct tu_helper *h, const char *config_body, char *log_path);
/* test_hostile_close.c: descriptors whose close a client makes wait. */
struct Suite;
void hostile_add_close_tests(struct Suite *s);
