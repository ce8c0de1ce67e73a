// SPDX-License-Identifier: LGPL-2.1-or-later
/* Log output and level resolution; see log.h for the cost model.
 *
 * Every line carries its priority. Through syslog it is syslog's; on
 * stderr it is a "<N>" prefix (sd-daemon(3)'s SD_ERR and its kind) when
 * stderr is the journal, as systemd says it is: $JOURNAL_STREAM names the
 * device and inode of the stream it connected us to. journald then files
 * the line at that priority, so `journalctl -p err` finds the errors. On a
 * terminal, a pipe or a file the prefix would be noise: none there. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

unsigned nbd_log_serial = 1;

static int default_level = NBD_LOG_NOTICE;
static char filters[512];
static bool use_syslog;
static int stderr_journal = -1; /* -1: not looked at yet */

static const char *const level_names[] = {
        [NBD_LOG_ERR] = "error", [NBD_LOG_WARNING] = "warning", [NBD_LOG_NOTICE] = "notice",
        [NBD_LOG_INFO] = "info", [NBD_LOG_DEBUG] = "debug",
};

int nbd_log_parse_level(const char *s)
{
        for (int i = NBD_LOG_ERR; i <= NBD_LOG_DEBUG; i++)
                if (strcmp(s, level_names[i]) == 0)
                        return i;
        return -EINVAL;
}

/* Checks every "name:level" word of a filter string. */
int nbd_log_filters_check(const char *f)
{
        char buf[sizeof(filters)], *save = NULL;

        if (strlen(f) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, f);
        for (char *w = strtok_r(buf, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
                char *colon = strchr(w, ':');
                if (!colon || colon == w || nbd_log_parse_level(colon + 1) < 0)
                        return -EINVAL;
        }
        return 0;
}

int nbd_log_configure(int level, const char *f, bool syslog_output)
{
        if (level < NBD_LOG_ERR || level > NBD_LOG_DEBUG)
                return -EINVAL;
        if (f && nbd_log_filters_check(f) < 0)
                return -EINVAL;
        default_level = level;
        snprintf(filters, sizeof(filters), "%s", f ? f : "");
        if (syslog_output && !use_syslog)
                openlog("netbrokerd", LOG_PID, LOG_DAEMON);
        use_syslog = syslog_output;
        /* Looked at here, on the main thread before any lane thread logs,
         * and never again: stderr does not change after start-up. */
        (void)nbd_log_stderr_is_journal();
        nbd_log_serial++;
        return 0;
}

int nbd_log_refresh(struct nbd_log_category *cat)
{
        size_t n = strlen(cat->name);
        int level = default_level;

        for (const char *p = filters; (p = strstr(p, cat->name)); p += n) {
                bool starts_word = p == filters || p[-1] == ' ' || p[-1] == ',' || p[-1] == '\t';
                if (starts_word && p[n] == ':') {
                        char name[16];
                        size_t len = strcspn(p + n + 1, " ,\t");
                        if (len < sizeof(name)) {
                                memcpy(name, p + n + 1, len);
                                name[len] = '\0';
                                level = nbd_log_parse_level(name);
                        }
                }
        }
        cat->level = level;
        cat->serial = nbd_log_serial;
        return level;
}

/* $JOURNAL_STREAM is "DEVICE:INODE" of the stream journald gave us; it is
 * inherited, so it counts only while stderr is still that stream. Decided
 * at the first call. */
bool nbd_log_stderr_is_journal(void)
{
        const char *js = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        int end = 0;

        if (stderr_journal >= 0)
                return stderr_journal;
        stderr_journal = js && sscanf(js, "%llu:%llu%n", &dev, &ino, &end) == 2 &&
                         js[end] == '\0' && fstat(STDERR_FILENO, &st) == 0 &&
                         (unsigned long long)st.st_dev == dev &&
                         (unsigned long long)st.st_ino == ino;
        return stderr_journal;
}

const char *nbd_log_prefix(int level)
{
        static const char *const prefixes[] = {
                [NBD_LOG_ERR] = SD_ERR,       [NBD_LOG_WARNING] = SD_WARNING,
                [NBD_LOG_NOTICE] = SD_NOTICE, [NBD_LOG_INFO] = SD_INFO,
                [NBD_LOG_DEBUG] = SD_DEBUG,
        };

        if (level < NBD_LOG_ERR || level > NBD_LOG_DEBUG || !nbd_log_stderr_is_journal())
                return "";
        return prefixes[level];
}

void nbd_log_emit(const struct nbd_log_category *cat, int level, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        int saved = errno;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (use_syslog)
                syslog(level, "%s: %s", cat->name, msg);
        else
                fprintf(stderr, "%snetbrokerd[%s] %s: %s\n", nbd_log_prefix(level),
                        level_names[level], cat->name, msg);
        errno = saved;
}
