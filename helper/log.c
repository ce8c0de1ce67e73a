// SPDX-License-Identifier: LGPL-2.1-or-later
/* Log output and level resolution; see log.h for the cost model. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

unsigned nbd_log_serial = 1;

static int default_level = NBD_LOG_NOTICE;
static char filters[512];
static bool use_syslog;

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
static int validate_filters(const char *f)
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
        if (f && validate_filters(f) < 0)
                return -EINVAL;
        default_level = level;
        snprintf(filters, sizeof(filters), "%s", f ? f : "");
        if (syslog_output && !use_syslog)
                openlog("netbrokerd", LOG_PID, LOG_DAEMON);
        use_syslog = syslog_output;
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
                fprintf(stderr, "netbrokerd[%s] %s: %s\n", level_names[level], cat->name, msg);
        errno = saved;
}
