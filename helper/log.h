// SPDX-License-Identifier: LGPL-2.1-or-later
/* Logging with per-file categories (seeds/004: libvirt's 2014 fix).
 *
 * Each .c file declares NBD_LOG_CATEGORY(name). Whether a message is emitted
 * is decided by two integer compares against the category's cached level: no
 * lock, no formatting, no call when the level is off. The cache is refreshed
 * when the global serial changes (after the configuration is (re)read).
 * Building with -DNB_LOG_NO_DEBUG removes debug messages at compile time; the
 * bench uses it to show that a disabled message costs next to nothing. */
#pragma once

#include <stdbool.h>

enum nbd_log_level {
        NBD_LOG_ERR = 3,
        NBD_LOG_WARNING = 4,
        NBD_LOG_NOTICE = 5,
        NBD_LOG_INFO = 6,
        NBD_LOG_DEBUG = 7,
};

struct nbd_log_category {
        const char *name;
        unsigned serial;
        int level;
};

extern unsigned nbd_log_serial;

/* Returns the category's level after re-reading the configuration. */
int nbd_log_refresh(struct nbd_log_category *cat);

void nbd_log_emit(const struct nbd_log_category *cat, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* From here on, lines are written by a thread of their own, from a bounded
 * ring: a log reader that stops reading no longer stops the caller (the
 * event loop). When the ring is full a line is dropped and counted
 * (log_lines_dropped; audit lines have a reserve of their own and
 * log_audit_lines_dropped), and so are other lines until the thread has
 * written half the ring; then one line says how many were dropped, before
 * the next. Until then, and without the thread, lines are
 * written at once. Call it after the capability drop (a thread takes the
 * sets of its creator) and after unshare() (which refuses a process with
 * threads). Never log in a forked child once it has run: the ring's lock
 * may be held by a thread the child does not have. 0 or -errno (no
 * thread: lines are still written at once). */
int nbd_log_start(void);
/* Writes what the ring holds, waiting at most a second (a reader that
 * stopped reading must not keep the helper from exiting), and from then
 * on lines are written at once again. Registered with atexit() by
 * nbd_log_start(); a second call does nothing. */
void nbd_log_stop(void);

/* level: the default for categories without a filter. filters: "name:level
 * name:level ..." or NULL. Returns 0 or -EINVAL for an unknown level name. */
int nbd_log_configure(int level, const char *filters, bool syslog_output);
int nbd_log_parse_level(const char *s);
/* 0, or -EINVAL when a word of "name:level name:level" is not one. */
int nbd_log_filters_check(const char *filters);

/* stderr is the stream systemd connected to the journal ($JOURNAL_STREAM
 * names it), looked at once, at the first log line or nbd_log_configure(). */
bool nbd_log_stderr_is_journal(void);
/* "<3>" for NBD_LOG_ERR and so on when stderr is the journal, else "":
 * what goes before a line written to stderr so that journald files it at
 * its priority. */
const char *nbd_log_prefix(int level);

#define NBD_LOG_CATEGORY(n)                                                                        \
        static struct nbd_log_category nbd_log_cat_ __attribute__((unused)) = {#n, 0, 0}

#define nbd_log(lvl, ...)                                                                          \
        do {                                                                                       \
                int nbd_l_ = nbd_log_cat_.serial == nbd_log_serial                                 \
                                     ? nbd_log_cat_.level                                          \
                                     : nbd_log_refresh(&nbd_log_cat_);                             \
                if ((lvl) <= nbd_l_)                                                               \
                        nbd_log_emit(&nbd_log_cat_, (lvl), __VA_ARGS__);                           \
        } while (0)

#define nbd_error(...) nbd_log(NBD_LOG_ERR, __VA_ARGS__) /* not nbd_err: that is err.h's type */
#define nbd_warn(...) nbd_log(NBD_LOG_WARNING, __VA_ARGS__)
#define nbd_notice(...) nbd_log(NBD_LOG_NOTICE, __VA_ARGS__)
#define nbd_info(...) nbd_log(NBD_LOG_INFO, __VA_ARGS__)
#ifdef NBD_LOG_NO_DEBUG
#define nbd_debug(...)                                                                             \
        do {                                                                                       \
        } while (0)
#else
#define nbd_debug(...) nbd_log(NBD_LOG_DEBUG, __VA_ARGS__)
#endif
