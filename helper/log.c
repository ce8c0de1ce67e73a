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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

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

/* ---- the log thread (issue 14) ----
 *
 * A write to stderr or to syslog's socket blocks when its reader does not
 * read (a stalled journal, a parent that stopped reading the pipe), and a
 * blocked loop stops every client. So once nbd_log_start() has run, a line
 * is formatted where it is logged and put in a ring of records; one thread
 * writes them, in order. A full ring drops the line and counts it
 * (log_lines_dropped), and other lines after it until the writer has
 * emptied half the ring; then a line saying how many were dropped goes
 * first, where they were. Audit lines (category "audit") go on meanwhile
 * and may also use the last AUDIT_RESERVE bytes, which no other line may:
 * a flood of other lines cannot crowd them out, and when even they are
 * dropped the note is at error priority and names them
 * (log_audit_lines_dropped). Before the thread exists (start-up), after
 * nbd_log_stop(), and without the thread, lines are written at once, as
 * they always were. The thread holds no fd; nothing logs in a forked
 * child (child_start.c makes system calls only), where the ring's lock
 * could be held by a thread the child does not have. */

#define RING_SIZE (128 * 1024)
#define AUDIT_RESERVE (32 * 1024)
#define LINE_MAX_LEN 1280 /* a 1,023-byte message, its prefix and name */
#define FLUSH_MS 1000

enum rec_kind { REC_PAD, REC_STDERR, REC_SYSLOG };

/* A record's header; its text follows, and the next record starts at the
 * next multiple of 4. A record never wraps: the space left at the ring's
 * end when one does not fit there is a REC_PAD. */
struct rec {
        uint16_t len;
        uint8_t level;
        uint8_t kind;
};

static struct {
        pthread_mutex_t mu;
        pthread_cond_t more; /* a record was put, or stopping */
        pthread_cond_t drained; /* the ring is empty and nothing is being written */
        pthread_t thread;
        bool running; /* lines go through the ring */
        bool stopping;
        bool writing; /* the thread writes a record it took */
        bool abandoned; /* stopped before it drained: see nbd_log_stop() */
        bool dropping; /* since a line was dropped, until the note is put */
        size_t head, tail; /* bytes put and taken, ever: head - tail are in the ring */
        unsigned long dropped, dropped_audit; /* since the last note */
        _Alignas(4) char ring[RING_SIZE];
} q = {
        .mu = PTHREAD_MUTEX_INITIALIZER,
        .more = PTHREAD_COND_INITIALIZER,
        .drained = PTHREAD_COND_INITIALIZER,
};

static size_t rec_size(size_t len)
{
        return (sizeof(struct rec) + len + 3) & ~(size_t)3;
}

/* Under q.mu. 0, or -ENOBUFS when the record does not fit in what its
 * kind may use. */
static int ring_put(enum rec_kind kind, int level, const char *text, size_t len, bool audit)
{
        size_t at = q.head % RING_SIZE, need = rec_size(len), pad = 0;
        size_t limit = audit ? RING_SIZE : RING_SIZE - AUDIT_RESERVE;
        bool was_empty = q.head == q.tail;
        struct rec h = {.len = (uint16_t)len, .level = (uint8_t)level, .kind = (uint8_t)kind};

        if (at + need > RING_SIZE)
                pad = RING_SIZE - at;
        if (q.head - q.tail + pad + need > limit)
                return -ENOBUFS;
        if (pad) {
                struct rec p = {.len = (uint16_t)(pad - sizeof(p)), .kind = REC_PAD};
                memcpy(q.ring + at, &p, sizeof(p));
                q.head += pad;
                at = 0;
        }
        memcpy(q.ring + at, &h, sizeof(h));
        memcpy(q.ring + at + sizeof(h), text, len);
        q.head += need;
        /* The thread waits only for an empty ring: one wake-up a burst. */
        if (was_empty)
                pthread_cond_signal(&q.more);
        return 0;
}

/* One whole line on stderr. wait: on EAGAIN (a stderr someone made
 * non-blocking), wait for room, as only the log thread may; the loop
 * drops the line instead. */
static void write_all(const char *p, size_t n, bool wait)
{
        while (n > 0) {
                ssize_t w = write(STDERR_FILENO, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0 && errno == EAGAIN && wait) {
                        struct pollfd pfd = {.fd = STDERR_FILENO, .events = POLLOUT};
                        poll(&pfd, 1, -1);
                        continue;
                }
                if (w <= 0)
                        return; /* nowhere left to say it */
                p += w;
                n -= (size_t)w;
        }
}

static void write_rec(enum rec_kind kind, int level, const char *text, size_t len, bool wait)
{
        if (kind == REC_SYSLOG)
                syslog(level, "%.*s", (int)len, text);
        else
                write_all(text, len, wait);
}

/* The line as its sink takes it: with the journal's prefix and a newline
 * for stderr, "category: message" for syslog (which adds the rest). */
static size_t format_line(enum rec_kind kind, int level, const char *cat, const char *msg,
                          char *out, size_t size)
{
        int n = kind == REC_SYSLOG ? snprintf(out, size, "%s: %s", cat, msg)
                                   : snprintf(out, size, "%snetbrokerd[%s] %s: %s\n",
                                              nbd_log_prefix(level), level_names[level], cat, msg);

        if (n < 0)
                return 0;
        if ((size_t)n >= size) { /* cut: still one line */
                n = (int)size - 1;
                if (kind == REC_STDERR)
                        out[n - 1] = '\n';
        }
        return (size_t)n;
}

/* Under q.mu: the line that says what was dropped since the last one;
 * its length. */
static size_t drop_note(enum rec_kind kind, int *ret_level, char *line, size_t size)
{
        char msg[256];

        if (q.dropped_audit) {
                *ret_level = NBD_LOG_ERR;
                snprintf(msg, sizeof(msg),
                         "%lu log lines were dropped, %lu of them audit lines: the log's reader "
                         "did not keep up (log_lines_dropped, log_audit_lines_dropped)",
                         q.dropped, q.dropped_audit);
        } else {
                *ret_level = NBD_LOG_WARNING;
                snprintf(msg, sizeof(msg),
                         "%lu log lines were dropped: the log's reader did not keep up "
                         "(log_lines_dropped)",
                         q.dropped);
        }
        return format_line(kind, *ret_level, "log", msg, line, size);
}

/* Under q.mu: the note put before the next line, once the ring has room
 * again. */
static int put_drop_note(enum rec_kind kind)
{
        char line[512];
        int level;
        size_t len = drop_note(kind, &level, line, sizeof(line));

        if (ring_put(kind, level, line, len, true) < 0)
                return -ENOBUFS;
        q.dropped = q.dropped_audit = 0;
        return 0;
}

/* Under q.mu. */
static void count_drop(bool audit)
{
        q.dropped++;
        nbd_stat_inc_shared(NBD_STAT_LOG_LINES_DROPPED);
        if (audit) {
                q.dropped_audit++;
                nbd_stat_inc_shared(NBD_STAT_LOG_AUDIT_LINES_DROPPED);
        }
}

/* Under q.mu. Once a line was dropped, other lines are dropped until the
 * writer has emptied the ring to half (one note for a stall, not one for
 * every line that found room); audit lines go on into what is left. The
 * note then goes first. */
static void put_line(enum rec_kind kind, int level, const char *line, size_t len, bool audit)
{
        if (q.dropping && q.head - q.tail <= RING_SIZE / 2 && put_drop_note(kind) == 0)
                q.dropping = false;
        if (q.dropping && !audit) {
                count_drop(false);
                return;
        }
        if (ring_put(kind, level, line, len, audit) < 0) {
                q.dropping = true;
                count_drop(audit);
        }
}

static void *log_main(void *arg)
{
        char line[LINE_MAX_LEN];

        (void)arg;
        pthread_mutex_lock(&q.mu);
        for (;;) {
                struct rec h;
                size_t at;

                while (q.head == q.tail && !q.stopping)
                        pthread_cond_wait(&q.more, &q.mu);
                if (q.head == q.tail)
                        break;
                at = q.tail % RING_SIZE;
                memcpy(&h, q.ring + at, sizeof(h));
                if (h.kind != REC_PAD)
                        memcpy(line, q.ring + at + sizeof(h), h.len);
                q.tail += h.kind == REC_PAD ? sizeof(h) + h.len : rec_size(h.len);
                if (h.kind == REC_PAD)
                        continue;
                q.writing = true;
                pthread_mutex_unlock(&q.mu);
                write_rec((enum rec_kind)h.kind, h.level, line, h.len, true);
                pthread_mutex_lock(&q.mu);
                q.writing = false;
                if (q.head == q.tail)
                        pthread_cond_broadcast(&q.drained);
        }
        pthread_cond_broadcast(&q.drained);
        pthread_mutex_unlock(&q.mu);
        return NULL;
}

int nbd_log_start(void)
{
        static bool atexit_set;
        sigset_t all, old;
        int r;

        pthread_mutex_lock(&q.mu);
        if (q.running) {
                pthread_mutex_unlock(&q.mu);
                return 0;
        }
        q.stopping = false;
        /* Every signal blocked in it: SIGTERM is the loop's signalfd's. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&q.thread, NULL, log_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r == 0) {
                pthread_setname_np(q.thread, "nbd-log");
                q.running = true;
        }
        pthread_mutex_unlock(&q.mu);
        /* exit() from anywhere flushes too (registered once). */
        if (r == 0 && !atexit_set)
                atexit_set = atexit(nbd_log_stop) == 0;
        return r;
}

void nbd_log_stop(void)
{
        struct timespec deadline;
        char note[512];
        size_t len = 0;
        int level;
        bool done;

        pthread_mutex_lock(&q.mu);
        if (!q.running) {
                pthread_mutex_unlock(&q.mu);
                return;
        }
        q.stopping = true;
        pthread_cond_signal(&q.more);
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += FLUSH_MS / 1000;
        deadline.tv_nsec += (FLUSH_MS % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000L;
        }
        while ((q.head != q.tail || q.writing) &&
               pthread_cond_timedwait(&q.drained, &q.mu, &deadline) == 0)
                ;
        done = q.head == q.tail && !q.writing;
        q.running = false;
        /* Not drained in time: the reader is stalled and the process is
         * about to exit. The thread, blocked in its write, goes with it;
         * what is logged from now on is dropped, or it would block the
         * exit as the write does. */
        q.abandoned = !done;
        if (done && q.dropping) {
                len = drop_note(use_syslog ? REC_SYSLOG : REC_STDERR, &level, note, sizeof(note));
                q.dropping = false;
                q.dropped = q.dropped_audit = 0;
        }
        pthread_mutex_unlock(&q.mu);
        if (!done)
                return;
        pthread_join(q.thread, NULL);
        /* Dropped lines no line came after: said last. */
        if (len)
                write_rec(use_syslog ? REC_SYSLOG : REC_STDERR, level, note, len, false);
}

void nbd_log_emit(const struct nbd_log_category *cat, int level, const char *fmt, ...)
{
        /* The audit trail's lines, which other lines cannot crowd out. */
        const bool audit = strcmp(cat->name, "audit") == 0;
        const enum rec_kind kind = use_syslog ? REC_SYSLOG : REC_STDERR;
        char msg[1024], line[LINE_MAX_LEN];
        size_t len;
        va_list ap;
        int saved = errno;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        len = format_line(kind, level, cat->name, msg, line, sizeof(line));
        pthread_mutex_lock(&q.mu);
        if (q.abandoned) {
                count_drop(audit);
                pthread_mutex_unlock(&q.mu);
        } else if (!q.running) {
                pthread_mutex_unlock(&q.mu);
                write_rec(kind, level, line, len, false);
        } else {
                put_line(kind, level, line, len, audit);
                pthread_mutex_unlock(&q.mu);
        }
        errno = saved;
}
