// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerctl's output: one JSON shape for every command, success
 * {"ok":true,...} and failure {"ok":false,"error":{"errno":N,"name":"ENAME",
 * "message":"..."}}, and one text form for errors on stderr,
 * "netbrokerctl: CMD: message (ENAME)". Usage texts come from the command
 * table, so --help, usage errors and the man page's synopsis agree. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), 0 if there is
 * none. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
        size_t n;
        uint32_t cp;

        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                n = 2, cp = p[0] & 0x1f;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                n = 3, cp = p[0] & 0x0f;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                n = 4, cp = p[0] & 0x07;
        else
                return 0;
        if (left < n)
                return 0;
        for (size_t k = 1; k < n; k++) {
                if ((p[k] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[k] & 0x3f);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
                return 0;
        return n;
}

void json_strn(const void *data, size_t len)
{
        const unsigned char *p = data;

        putchar('"');
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = p[i];
                if (ch == '"' || ch == '\\')
                        printf("\\%c", ch);
                else if (ch == '\n')
                        fputs("\\n", stdout);
                else if (ch == '\t')
                        fputs("\\t", stdout);
                else if (ch < 0x20 || ch == 0x7f)
                        printf("\\u%04x", ch);
                else if (ch < 0x80)
                        putchar(ch);
                else {
                        /* Exec output is any bytes, and may be cut inside
                         * a character at its cap: a whole UTF-8 sequence
                         * is copied, any other byte becomes the code
                         * point of its value, so the JSON stays valid. */
                        size_t n = utf8_len(p + i, len - i);
                        if (n) {
                                fwrite(p + i, 1, n, stdout);
                                i += n - 1;
                        } else {
                                printf("\\u%04x", ch);
                        }
                }
        }
        putchar('"');
}

void json_str(const char *s)
{
        json_strn(s, strlen(s));
}

void json_kv(const char *key, const char *value, bool first)
{
        printf("%s\"%s\":", first ? "" : ",", key);
        json_str(value);
}

/* "EPERM" for EPERM; glibc knows every name. */
static const char *errno_name(int err)
{
        const char *n = strerrorname_np(err);

        return n ? n : "EUNKNOWN";
}

void json_error_member(int err, const char *message)
{
        printf("\"error\":{\"errno\":%d,\"name\":\"%s\",\"message\":", err, errno_name(err));
        json_str(message && message[0] ? message : strerror(err));
        putchar('}');
}

void json_ok_begin(void)
{
        fputs("{\"ok\":true", stdout);
}

void ctl_usage(FILE *f, const struct command *cmd, const char *path)
{
        if (!cmd->sub) {
                fprintf(f, "usage: netbrokerctl [OPTIONS] %s%s%s\n  %s\n", path,
                        cmd->args[0] ? " " : "", cmd->args, cmd->summary);
                if (cmd->details)
                        fputs(cmd->details, f);
                return;
        }
        fprintf(f, "usage: netbrokerctl [OPTIONS] %s SUBCOMMAND [ARGS]\n  %s\nsubcommands:\n", path,
                cmd->summary);
        for (size_t i = 0; i < cmd->n_sub; i++) {
                const struct command *s = &cmd->sub[i];
                fprintf(f, "  %s %s%s%s\n      %s\n", path, s->name, s->args[0] ? " " : "", s->args,
                        s->summary);
        }
        fprintf(f, "'netbrokerctl %s SUBCOMMAND --help' for more.\n", path);
}

static void fail_v(struct ctl *c, int err, const char *fmt, va_list ap)
{
        char msg[1024];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        if (c->json) {
                fputs("{\"ok\":false,", stdout);
                json_error_member(err, msg);
                puts("}");
        } else {
                fprintf(stderr, "netbrokerctl: %s%s%s (%s)\n", c->cmd_name,
                        c->cmd_name[0] ? ": " : "", msg, errno_name(err));
        }
}

int ctl_usage_error(struct ctl *c, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        fail_v(c, EINVAL, fmt, ap);
        va_end(ap);
        if (c->cmd)
                ctl_usage(stderr, c->cmd, c->cmd_name);
        return EXIT_USAGE;
}

int ctl_fail(struct ctl *c, int exit_status, int err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        fail_v(c, err, fmt, ap);
        va_end(ap);
        return exit_status;
}

int ctl_op_failed(struct ctl *c, const nb_results *res, size_t i)
{
        int st = nb_result_status(res, i);
        const char *msg = nb_result_message(res, i);
        size_t n = strlen(c->cmd_name);

        if (st == 0)
                return 0;
        /* The helper names the op as we do ("link delete: no interface
         * x"): once is enough. */
        if (strncmp(msg, c->cmd_name, n) == 0 && strncmp(msg + n, ": ", 2) == 0)
                msg += n + 2;
        return ctl_fail(c, EXIT_OP_FAILED, -st, "%s", msg[0] ? msg : strerror(-st));
}

int ctl_parse_uint(const char *s, unsigned min, unsigned max, unsigned *ret)
{
        char *end;
        unsigned long v;

        if (!isdigit((unsigned char)s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (*end || errno || v < min || v > max)
                return -ERANGE;
        *ret = (unsigned)v;
        return 0;
}

int ctl_read_file(const char *path, char **ret, size_t *ret_len)
{
        FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
        char *buf = NULL;
        size_t len = 0, cap = 0;
        int r = 0;

        if (!f)
                return -errno;
        for (;;) {
                if (cap - len < 65536) {
                        char *p = realloc(buf, cap + 65536);
                        if (!p) {
                                r = -ENOMEM;
                                goto out;
                        }
                        buf = p;
                        cap += 65536;
                }
                size_t n = fread(buf + len, 1, cap - len, f);
                len += n;
                if (n == 0)
                        break;
        }
        /* A directory opens but does not read: say so, not "empty". */
        if (ferror(f))
                r = errno ? -errno : -EIO;
out:
        if (f != stdin)
                fclose(f);
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

int ctl_bad_input(struct ctl *c, const char *fallback)
{
        const char *why = nb_last_error();

        /* The library's sentence names the argument and why; it is set by
         * the building call that refused (netbroker.h, nb_last_error). */
        return ctl_usage_error(c, "%s", why[0] ? why : fallback);
}
