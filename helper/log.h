/* Logging with per-file categories (seeds/004: libvirt's 2014 fix).
 *
 * Each .c file declares NB_LOG_CATEGORY(name). Whether a message is emitted
 * is decided by two integer compares against the category's cached level: no
 * lock, no formatting, no call when the level is off. The cache is refreshed
 * when the global serial changes (after the configuration is (re)read).
 * Building with -DNB_LOG_NO_DEBUG removes debug messages at compile time; the
 * bench uses it to show that a disabled message costs next to nothing. */
#pragma once

#include <stdbool.h>

enum nb_log_level {
        NB_LOG_ERR = 3,
        NB_LOG_WARNING = 4,
        NB_LOG_NOTICE = 5,
        NB_LOG_INFO = 6,
        NB_LOG_DEBUG = 7,
};

struct nb_log_category {
        const char *name;
        unsigned serial;
        int level;
};

extern unsigned nb_log_serial;

/* Returns the category's level after re-reading the configuration. */
int nb_log_refresh(struct nb_log_category *cat);

void nb_log_emit(const struct nb_log_category *cat, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* level: the default for categories without a filter. filters: "name:level
 * name:level ..." or NULL. Returns 0 or -EINVAL for an unknown level name. */
int nb_log_configure(int level, const char *filters, bool syslog_output);
int nb_log_parse_level(const char *s);

#define NB_LOG_CATEGORY(n)                                                                         \
        static struct nb_log_category nb_log_cat_ __attribute__((unused)) = {#n, 0, 0}

#define nb_log(lvl, ...)                                                                           \
        do {                                                                                       \
                int nb_l_ = nb_log_cat_.serial == nb_log_serial ? nb_log_cat_.level                \
                                                                : nb_log_refresh(&nb_log_cat_);    \
                if ((lvl) <= nb_l_)                                                                \
                        nb_log_emit(&nb_log_cat_, (lvl), __VA_ARGS__);                             \
        } while (0)

#define nb_err(...) nb_log(NB_LOG_ERR, __VA_ARGS__)
#define nb_warn(...) nb_log(NB_LOG_WARNING, __VA_ARGS__)
#define nb_notice(...) nb_log(NB_LOG_NOTICE, __VA_ARGS__)
#define nb_info(...) nb_log(NB_LOG_INFO, __VA_ARGS__)
#ifdef NB_LOG_NO_DEBUG
#define nb_debug(...)                                                                              \
        do {                                                                                       \
        } while (0)
#else
#define nb_debug(...) nb_log(NB_LOG_DEBUG, __VA_ARGS__)
#endif
