// SPDX-License-Identifier: LGPL-2.1-or-later
/* Unit tests: no privileges, no helper process. Framing, configuration,
 * logging and the decode budget, each on the real code. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netlink/errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec.h"
#include "config.h"
#include "config_load.h"
#include "frame.h"
#include "ifmap.h"
#include "log.h"
#include "names.h"
#include "netlink.h"
#include "stats.h"
#include "testutil.h"
#include "tests_unit.h"
#include "trust.h"

NBD_LOG_CATEGORY(unittest);

static void nonblocking_pair(int sv[2])
{
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
}

static int frame_with(const char *body, struct nbp_frame_out **ret)
{
        int r = nbp_frame_out_new(strlen(body), ret);

        if (r == 0)
                memcpy((*ret)->buf + NBP_FRAME_HEADER_SIZE, body, strlen(body));
        return r;
}

START_TEST(test_frame_reassembled_from_one_byte_writes)
{
        int sv[2];
        struct nbp_frame_out *f;
        struct nbp_frame_reader rd;
        uint8_t *body;
        size_t len, nfds;
        int fds[NBP_FRAME_MAX_FDS];
        bool trunc;

        nonblocking_pair(sv);
        ck_assert_int_eq(frame_with("hello, frames", &f), 0);
        nbp_frame_reader_init(&rd, 1024, 4);
        /* Feed the frame one byte at a time: the reader must report "not yet"
         * until the last byte and never read ahead. */
        for (size_t i = 0; i < f->len; i++) {
                ck_assert_int_eq(write(sv[0], f->buf + i, 1), 1);
                int r = nbp_frame_read(sv[1], &rd);
                ck_assert_int_eq(r, i + 1 == f->len ? 1 : 0);
        }
        nbp_frame_reader_take(&rd, &body, &len, fds, &nfds, &trunc);
        ck_assert_uint_eq(len, strlen("hello, frames"));
        ck_assert_mem_eq(body, "hello, frames", len);
        ck_assert_uint_eq(nfds, 0);
        ck_assert(!trunc);
        ck_assert(!nbp_frame_reader_busy(&rd));
        free(body);
        nbp_frame_out_free(f);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_frame_writer_resumes_after_eagain)
{
        int sv[2], sndbuf = 4096;
        struct nbp_frame_out *f;
        struct nbp_frame_reader rd;
        size_t big = 1u << 20;
        int r, rounds = 0;

        nonblocking_pair(sv);
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        ck_assert_int_eq(nbp_frame_out_new(big, &f), 0);
        for (size_t i = 0; i < big; i++)
                f->buf[NBP_FRAME_HEADER_SIZE + i] = (uint8_t)(i * 7);
        nbp_frame_reader_init(&rd, big, 4);
        /* Alternate partial writes and partial reads until both are done. */
        do {
                r = nbp_frame_write(sv[0], f);
                ck_assert_int_ge(r, 0);
                int rr = nbp_frame_read(sv[1], &rd);
                ck_assert_int_ge(rr, 0);
                rounds++;
                if (r == 1 && rr == 1)
                        break;
        } while (rounds < 100000);
        ck_assert_int_gt(rounds, 2);
        ck_assert_uint_eq(rd.got, big);
        ck_assert_mem_eq(rd.body, f->buf + NBP_FRAME_HEADER_SIZE, big);
        nbp_frame_reader_reset(&rd);
        nbp_frame_out_free(f);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_frame_over_cap_is_refused_before_allocation)
{
        int sv[2];
        struct nbp_frame_reader rd;
        uint8_t hdr[4] = {0x00, 0x00, 0x04, 0x01}; /* 1025 */

        nonblocking_pair(sv);
        nbp_frame_reader_init(&rd, 1024, 4);
        ck_assert_int_eq(write(sv[0], hdr, 4), 4);
        ck_assert_int_eq(nbp_frame_read(sv[1], &rd), -EMSGSIZE);
        ck_assert_uint_eq(rd.oversize, 1025);
        ck_assert_ptr_null(rd.body);
        nbp_frame_reader_reset(&rd);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_frame_carries_fds_close_on_exec)
{
        int sv[2], p[2];
        struct nbp_frame_out *f;
        struct nbp_frame_reader rd;
        uint8_t *body;
        size_t len, nfds;
        int fds[NBP_FRAME_MAX_FDS];
        bool trunc;
        int before = tu_fd_count(getpid());

        nonblocking_pair(sv);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(frame_with("x", &f), 0);
        f->fds[f->nfds++] = dup(p[1]);
        ck_assert_int_eq(nbp_frame_write(sv[0], f), 1);
        ck_assert_int_eq(f->nfds, 0); /* sent fds are closed by the sender */
        nbp_frame_reader_init(&rd, 16, 4);
        ck_assert_int_eq(nbp_frame_read(sv[1], &rd), 1);
        nbp_frame_reader_take(&rd, &body, &len, fds, &nfds, &trunc);
        ck_assert_uint_eq(nfds, 1);
        ck_assert(!trunc);
        ck_assert_int_eq(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        /* It is the pipe: a byte written through it arrives. */
        ck_assert_int_eq(write(fds[0], "z", 1), 1);
        char c;
        ck_assert_int_eq(read(p[0], &c, 1), 1);
        ck_assert_int_eq(c, 'z');
        close(fds[0]);
        free(body);
        nbp_frame_out_free(f);
        close(p[0]);
        close(p[1]);
        close(sv[0]);
        close(sv[1]);
        ck_assert_int_eq(tu_fd_count(getpid()), before);
}
END_TEST

START_TEST(test_frame_fds_over_reader_cap_are_closed_and_flagged)
{
        int sv[2];
        struct nbp_frame_out *f;
        struct nbp_frame_reader rd;
        uint8_t *body;
        size_t len, nfds;
        int fds[NBP_FRAME_MAX_FDS];
        bool trunc;
        int before;

        nonblocking_pair(sv);
        before = tu_fd_count(getpid());
        ck_assert_int_eq(frame_with("y", &f), 0);
        for (int i = 0; i < 5; i++)
                f->fds[f->nfds++] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(nbp_frame_write(sv[0], f), 1);
        nbp_frame_reader_init(&rd, 16, 2);
        ck_assert_int_eq(nbp_frame_read(sv[1], &rd), 1);
        nbp_frame_reader_take(&rd, &body, &len, fds, &nfds, &trunc);
        ck_assert(trunc);
        ck_assert_uint_eq(nfds, 2);
        nbp_close_fds(fds, nfds);
        free(body);
        nbp_frame_out_free(f);
        ck_assert_int_eq(tu_fd_count(getpid()), before);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/* The receiver is at its fd limit: the kernel installs what fits, sets
 * MSG_CTRUNC, and the reader must flag the frame. Every fd that arrived is
 * closed again, so the fd counts on both sides end where they started. */
START_TEST(test_frame_ctrunc_at_fd_limit_leaves_no_fd_behind)
{
        int sv[2];
        pid_t child;
        int status;

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                struct nbp_frame_reader rd;
                uint8_t *body;
                size_t len, nfds;
                int fds[NBP_FRAME_MAX_FDS], fill[512], nfill = 0;
                bool trunc;
                int before, r;
                struct rlimit rl;

                close(sv[0]);
                /* Leave room for exactly two more fds. */
                before = tu_fd_count(getpid());
                rl.rlim_cur = rl.rlim_max = (rlim_t)before + 16;
                setrlimit(RLIMIT_NOFILE, &rl);
                while (nfill < 512 && (fill[nfill] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
                        nfill++;
                close(fill[--nfill]);
                close(fill[--nfill]);
                before = tu_fd_count(getpid());
                nbp_frame_reader_init(&rd, 16, NBP_FRAME_MAX_FDS);
                do
                        r = nbp_frame_read(sv[1], &rd);
                while (r == 0);
                if (r != 1)
                        _exit(10);
                nbp_frame_reader_take(&rd, &body, &len, fds, &nfds, &trunc);
                if (!trunc)
                        _exit(11);
                if (nfds > 2)
                        _exit(12);
                nbp_close_fds(fds, nfds);
                free(body);
                _exit(tu_fd_count(getpid()) == before ? 0 : 13);
        }
        close(sv[1]);
        int before = tu_fd_count(getpid());
        struct nbp_frame_out *f;
        ck_assert_int_eq(frame_with("many fds", &f), 0);
        for (int i = 0; i < 8; i++)
                f->fds[f->nfds++] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(tu_fd_count(getpid()), before + 8);
        int r;
        do
                r = nbp_frame_write(sv[0], f);
        while (r == 0);
        ck_assert_int_eq(r, 1);
        nbp_frame_out_free(f);
        ck_assert_int_eq(tu_fd_count(getpid()), before);
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "receiver status %d",
                      WEXITSTATUS(status));
        close(sv[0]);
}
END_TEST

START_TEST(test_frame_eof_inside_frame_is_connreset)
{
        int sv[2];
        struct nbp_frame_reader rd;
        uint8_t partial[6] = {0, 0, 0, 10, 'a', 'b'};

        nonblocking_pair(sv);
        nbp_frame_reader_init(&rd, 1024, 4);
        ck_assert_int_eq(write(sv[0], partial, sizeof(partial)), (ssize_t)sizeof(partial));
        close(sv[0]);
        ck_assert_int_eq(nbp_frame_read(sv[1], &rd), -ECONNRESET);
        nbp_frame_reader_reset(&rd);
        ck_assert_int_eq(nbp_frame_read(sv[1], &rd), -EPIPE);
        close(sv[1]);
}
END_TEST

START_TEST(test_frame_write_to_closed_peer_is_epipe_not_sigpipe)
{
        int sv[2];
        struct nbp_frame_out *f;

        signal(SIGPIPE, SIG_DFL);
        nonblocking_pair(sv);
        close(sv[1]);
        ck_assert_int_eq(frame_with("nobody listens", &f), 0);
        ck_assert_int_eq(nbp_frame_write(sv[0], f), -EPIPE);
        nbp_frame_out_free(f);
        close(sv[0]);
}
END_TEST

/* ---- config ---- */

static int load(const char *body, struct nbd_config *c, char *err, size_t errlen)
{
        return tu_config_load(body, c, err, errlen);
}

START_TEST(test_config_bad_line_is_reported_with_its_number)
{
        struct nbd_config c;
        char err[256];

        ck_assert_int_lt(
                load("# comment\nfd_limit = 64\n\nmax_spawns = lots\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":4: max_spawns") != NULL, "error was: %s", err);
        nbd_config_free(&c);
        ck_assert_int_lt(load("fd_limit = 64\nno_such_key = 1\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":2: no_such_key: unknown key") != NULL, "error was: %s", err);
        nbd_config_free(&c);
        ck_assert_int_lt(load("just words\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":1: expected 'key = value'") != NULL, "error was: %s", err);
        nbd_config_free(&c);
        ck_assert_int_lt(load("exec_allow = relative/path\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":1: exec_allow") != NULL, "error was: %s", err);
        nbd_config_free(&c);
}
END_TEST

struct nbd_peer tu_peer(uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
        struct nbd_peer p = {.uid = uid, .gid = gid, .pid = 1, .n_groups = n};

        if (n)
                memcpy(p.groups, groups, n * sizeof(*groups));
        return p;
}

static bool admitted(const struct nbd_config *c, uid_t uid, gid_t gid)
{
        struct nbd_peer p = tu_peer(uid, gid, NULL, 0);

        return nbd_config_peer_allowed(c, &p);
}

START_TEST(test_config_defaults_allow_root_only_and_64_fds)
{
        struct nbd_config c;

        nbd_config_defaults(&c);
        ck_assert_uint_eq(c.fd_limit, 64);
        ck_assert_uint_eq(c.max_frame, 16u << 20);
        ck_assert(admitted(&c, 0, 0));
        ck_assert(!admitted(&c, 1000, 1000));
        ck_assert(!nbd_config_exec_allowed(&c, "/bin/sh"));
        /* Only tools that exist are on the default list. */
        for (size_t i = 0; i < c.n_exec_allow; i++)
                ck_assert_int_eq(access(c.exec_allow[i], X_OK), 0);
        nbd_config_free(&c);
}
END_TEST

/* The man page's "allow_gid = 990" is written for the members of group
 * 990: a member by supplementary group is one (SO_PEERGROUPS), and a peer in
 * no listed group is not. */
START_TEST(test_config_gid_admits_members_by_supplementary_group)
{
        const gid_t member[] = {24, 990, 1000}, other[] = {24, 27};
        struct nbd_config c;
        struct nbd_peer p;
        char err[256];

        ck_assert_int_eq(load("allow_gid = 990\n", &c, err, sizeof(err)), 0);
        p = tu_peer(65534, 65534, member, 3);
        ck_assert(nbd_config_peer_allowed(&c, &p));
        p = tu_peer(65534, 990, NULL, 0);
        ck_assert(nbd_config_peer_allowed(&c, &p));
        p = tu_peer(65534, 65534, other, 2);
        ck_assert(!nbd_config_peer_allowed(&c, &p));
        nbd_config_free(&c);
}
END_TEST

START_TEST(test_config_lists_replace_defaults_and_accumulate)
{
        struct nbd_config c;
        char err[256];

        ck_assert_int_eq(load("allow_uid = 1000 1001\nallow_uid = 1002\nallow_gid = 50\n"
                              "exec_allow = /bin/true\nexec_allow = /bin/false\n",
                              &c, err, sizeof(err)),
                         0);
        ck_assert(!admitted(&c, 0, 0)); /* root no longer listed */
        ck_assert(admitted(&c, 1002, 7));
        ck_assert(admitted(&c, 4242, 50));
        ck_assert(nbd_config_exec_allowed(&c, "/bin/true"));
        ck_assert(nbd_config_exec_allowed(&c, "/bin/false"));
        ck_assert(!nbd_config_exec_allowed(&c, "/usr/sbin/iptables-restore"));
        ck_assert_uint_eq(c.n_exec_allow, 2);
        nbd_config_free(&c);
}
END_TEST

/* exec_env_allow: empty by default, a list key like exec_allow, names
 * checked; the loader's variables, the tools' plugin directories and PATH
 * are refused at the line that names them, whatever the operator says. */
START_TEST(test_config_exec_env_allow_is_an_allow_list_without_loader_variables)
{
        static const char *const refused[] = {
                "LD_PRELOAD",
                "LD_LIBRARY_PATH",
                "LD_ANYTHING",
                "MALLOC_CHECK_",
                "GCONV_PATH",
                "GLIBC_TUNABLES",
                "LOCPATH",
                "NLSPATH",
                "IP_LIB_DIR",
                "TC_LIB_DIR",
                "XTABLES_LIBDIR",
                "PATH",
                "BASH_ENV",
                "ENV",
                /* Found by an outside review: libxtables' other names for
                 * its plugin directory, bash's option and trace variables,
                 * and interpreters' code paths. */
                "IPTABLES_LIB_DIR",
                "IP6TABLES_LIB_DIR",
                "SHELLOPTS",
                "BASHOPTS",
                "PS4",
                "OPENSSL_CONF",
                "PYTHONPATH",
                "PERL5OPT",
        };
        static const char *const malformed[] = {"1FOO", "FOO=BAR", "FOO-BAR", "FÖÖ", "A.B"};
        struct nbd_config c;
        char err[256], body[128], want[128];

        nbd_config_defaults(&c);
        ck_assert_uint_eq(c.n_exec_env_allow, 0);
        ck_assert(!nbd_config_env_allowed(&c, "LC_ALL", 6));
        nbd_config_free(&c);

        ck_assert_int_eq(load("exec_env_allow = XTABLES_LOCKFILE _X1\nexec_env_allow = LC_ALL\n",
                              &c, err, sizeof(err)),
                         0);
        ck_assert(nbd_config_env_allowed(&c, "XTABLES_LOCKFILE", 16));
        ck_assert(nbd_config_env_allowed(&c, "_X1", 3));
        ck_assert(nbd_config_env_allowed(&c, "LC_ALL=C", 6)); /* only the name's bytes count */
        ck_assert(!nbd_config_env_allowed(&c, "LC_AL", 5));
        ck_assert(!nbd_config_env_allowed(&c, "XTABLES_LOCKFILEX", 17));
        ck_assert(!nbd_config_env_allowed(&c, "FOO", 3));
        nbd_config_free(&c);

        for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++) {
                snprintf(body, sizeof(body), "# env\nexec_env_allow = FOO %s BAR\n", refused[i]);
                snprintf(want, sizeof(want), ":2: exec_env_allow: %s may never be allowed",
                         refused[i]);
                ck_assert_msg(load(body, &c, err, sizeof(err)) < 0, "%s was allowed", refused[i]);
                ck_assert_msg(strstr(err, want), "error was: %s", err);
                nbd_config_free(&c);
        }
        for (size_t i = 0; i < sizeof(malformed) / sizeof(*malformed); i++) {
                snprintf(body, sizeof(body), "exec_env_allow = %s\n", malformed[i]);
                ck_assert_msg(load(body, &c, err, sizeof(err)) == -EINVAL, "%s was taken",
                              malformed[i]);
                ck_assert_msg(strstr(err, ":1: exec_env_allow: '"), "error was: %s", err);
                ck_assert_msg(strstr(err, "is not a variable name"), "error was: %s", err);
                nbd_config_free(&c);
        }
}
END_TEST

/* A program somewhere anyone may write (here /tmp, mode 1777) is not safe
 * for root to run: named in the file it stops the load at its line, as a
 * default it is left off and the rest stay. Programs that pass resolve to
 * their realpath, which is what Exec runs. No privileges needed: /tmp
 * fails the check whoever owns the file. */
START_TEST(test_config_programs_must_be_safe_for_root_and_resolve_to_their_realpath)
{
        char dir[] = "/tmp/nbtest-trust-XXXXXX", prog[64], body[128], real[PATH_MAX];
        struct nbd_config c;
        char err[512], *path;
        struct nbd_err e = {0};
        size_t n_defaults;
        int fd;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(prog, sizeof(prog), "%s/prog", dir);
        fd = open(prog, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
        ck_assert_int_ge(fd, 0);
        close(fd);

        snprintf(body, sizeof(body), "# programs\nexec_allow = /bin/true %s\n", prog);
        ck_assert_int_lt(load(body, &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":2: exec_allow: ") && strstr(err, prog) &&
                              strstr(err, "not safe to run as root") &&
                              strstr(err, "writable by its group or others"),
                      "error was: %s", err);
        nbd_config_free(&c);

        ck_assert_int_lt(load("exec_allow = /nonexistent/nbtest\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, ":1: exec_allow: /nonexistent/nbtest: cannot resolve it"),
                      "error was: %s", err);
        nbd_config_free(&c);

        /* The same program among the defaults is dropped, the others stay. */
        nbd_config_defaults(&c);
        n_defaults = 0; /* those that pass here, wherever this runs */
        for (size_t i = 0; i < c.n_exec_allow; i++) {
                char *r = NULL;
                if (nbd_trust_program(c.exec_allow[i], &r, &e) == 0)
                        n_defaults++;
                free(r);
        }
        c.exec_allow[c.n_exec_allow++] = strdup(prog);
        path = tu_config("log_level = error\n");
        ck_assert_int_eq(nbd_config_load(&c, path, true, &e), 0);
        free(path);
        ck_assert(!nbd_config_exec_allowed(&c, prog));
        ck_assert_uint_eq(c.n_exec_allow, n_defaults);
        for (size_t i = 0; i < c.n_exec_allow; i++)
                ck_assert_msg(nbd_config_exec_allowed(&c, c.exec_allow[i]), "%s", c.exec_allow[i]);
        nbd_config_free(&c);

        /* /bin/true runs as the file it resolves to (/usr/bin/true where
         * /bin is a symlink). */
        ck_assert_int_eq(load("exec_allow = /bin/true\n", &c, err, sizeof(err)), 0);
        ck_assert_ptr_nonnull(realpath("/bin/true", real));
        ck_assert_str_eq(nbd_config_exec_file(&c, "/bin/true"), real);
        ck_assert_ptr_null(nbd_config_exec_file(&c, "/usr/bin/true"));
        nbd_config_free(&c);

        unlink(prog);
        rmdir(dir);
}
END_TEST

START_TEST(test_config_fd_limit_must_fit_connections_and_spawns)
{
        struct nbd_config c;
        char err[256];

        ck_assert_int_lt(load("fd_limit = 32\n", &c, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "fd_limit is too small") != NULL, "error was: %s", err);
        nbd_config_free(&c);
        ck_assert_int_eq(load("fd_limit = 32\nmax_connections = 4\nmax_connections_per_uid = "
                              "4\nmax_spawns = 2\n",
                              &c, err, sizeof(err)),
                         0);
        nbd_config_free(&c);
}
END_TEST

START_TEST(test_config_missing_file_is_an_error_only_when_required)
{
        struct nbd_config c;
        struct nbd_err err = {0};

        nbd_config_defaults(&c);
        ck_assert_int_eq(nbd_config_load(&c, "/nonexistent/nb.conf", false, &err), 0);
        ck_assert_int_eq(nbd_config_load(&c, "/nonexistent/nb.conf", true, &err), -ENOENT);
        ck_assert_int_eq(err.code, -ENOENT);
        ck_assert_str_eq(err.msg, "/nonexistent/nb.conf: No such file or directory");
        nbd_config_free(&c);
}
END_TEST

/* ---- log ---- */

static int formatted;

static int side_effect(void)
{
        return ++formatted;
}

START_TEST(test_log_disabled_message_evaluates_nothing)
{
        ck_assert_int_eq(nbd_log_configure(NBD_LOG_ERR, NULL, false), 0);
        formatted = 0;
        for (int i = 0; i < 1000; i++)
                nbd_info("value %d", side_effect());
        ck_assert_int_eq(formatted, 0);
        ck_assert_int_eq(nbd_log_configure(NBD_LOG_ERR, "unittest:info", false), 0);
        nbd_info("value %d", side_effect());
        ck_assert_int_eq(formatted, 1);
}
END_TEST

START_TEST(test_log_filters_set_one_category)
{
        struct nbd_log_category other = {"server", 0, 0}, mine = {"spawn", 0, 0};

        ck_assert_int_eq(nbd_log_configure(NBD_LOG_WARNING, "spawn:debug", false), 0);
        ck_assert_int_eq(nbd_log_refresh(&mine), NBD_LOG_DEBUG);
        ck_assert_int_eq(nbd_log_refresh(&other), NBD_LOG_WARNING);
        ck_assert_int_lt(nbd_log_configure(NBD_LOG_WARNING, "spawn:loud", false), 0);
        ck_assert_int_lt(nbd_log_configure(NBD_LOG_WARNING, "nocolon", false), 0);
}
END_TEST

/* The read end of a pipe, read into text until EOF. */
struct pipe_text {
        int fd;
        char *text;
        size_t len;
};

static void *pipe_text_read(void *arg)
{
        struct pipe_text *pt = arg;
        char buf[65536];
        ssize_t n;

        while ((n = read(pt->fd, buf, sizeof(buf))) > 0) {
                pt->text = realloc(pt->text, pt->len + (size_t)n + 1);
                memcpy(pt->text + pt->len, buf, (size_t)n);
                pt->len += (size_t)n;
                pt->text[pt->len] = '\0';
        }
        return NULL;
}

/* stderr is a pipe of one page that nobody reads while 2,000 lines of
 * one category are logged, then 20 audit lines: the log thread's ring
 * drops what the others do not leave room for, and the audit lines go
 * into the reserve no other line may take. Once the pipe is read, at
 * nbd_log_stop(), every audit line is written, after the flood's lines
 * in the order logged, and a warning says how many lines were dropped:
 * as many as log_lines_dropped counted, none of them audit lines. */
START_TEST(test_log_audit_lines_keep_a_reserve_that_other_lines_cannot_take)
{
        struct nbd_log_category flood = {"unittest", 0, 0}, audit = {"audit", 0, 0};
        uint64_t before = nbd_stats[NBD_STAT_LOG_LINES_DROPPED], dropped;
        uint64_t audit_before = nbd_stats[NBD_STAT_LOG_AUDIT_LINES_DROPPED];
        struct pipe_text pt = {0};
        char want[128];
        const char *at, *note;
        pthread_t reader;
        int p[2], saved;
        long last = -1;

        ck_assert_int_eq(nbd_log_configure(NBD_LOG_NOTICE, NULL, false), 0);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
        fflush(stderr);
        saved = dup(2);
        ck_assert_int_eq(dup2(p[1], 2), 2);
        close(p[1]);
        ck_assert_int_eq(nbd_log_start(), 0);
        for (int i = 0; i < 2000; i++)
                nbd_log_emit(&flood, NBD_LOG_NOTICE, "flood line %d %0200d", i, 0);
        for (int i = 0; i < 20; i++)
                nbd_log_emit(&audit, NBD_LOG_NOTICE, "uid=0 op=test object=a%d", i);
        dropped = nbd_stats[NBD_STAT_LOG_LINES_DROPPED] - before;
        pt.fd = p[0];
        pthread_create(&reader, NULL, pipe_text_read, &pt);
        nbd_log_stop();
        dup2(saved, 2); /* the pipe's last write end: the reader sees EOF */
        close(saved);
        pthread_join(reader, NULL);
        close(p[0]);
        ck_assert_uint_gt(dropped, 0);
        ck_assert_uint_eq(nbd_stats[NBD_STAT_LOG_AUDIT_LINES_DROPPED], audit_before);
        ck_assert_ptr_nonnull(pt.text);
        for (int i = 0; i < 20; i++) {
                snprintf(want, sizeof(want), "netbrokerd[notice] audit: uid=0 op=test object=a%d\n",
                         i);
                ck_assert_msg(strstr(pt.text, want), "no '%s'", want);
        }
        for (at = strstr(pt.text, "flood line "); at; at = strstr(at + 1, "flood line ")) {
                long n = strtol(at + 11, NULL, 10);
                ck_assert_msg(n > last, "flood line %ld after %ld", n, last);
                last = n;
        }
        ck_assert(strstr(pt.text, "flood line 0 "));
        ck_assert_msg(strstr(pt.text, "object=a0\n") > strstr(pt.text, "flood line 0 "),
                      "the audit lines came before the flood's");
        snprintf(want, sizeof(want),
                 "netbrokerd[warning] log: %llu log lines were dropped: the log's reader did not "
                 "keep up (log_lines_dropped)\n",
                 (unsigned long long)dropped);
        note = strstr(pt.text, want);
        ck_assert_msg(note, "no '%s'", want);
        ck_assert_msg(note > strstr(pt.text, "object=a19\n"), "the note is not where they were");
        free(pt.text);
}
END_TEST

/* ---- codec ---- */

START_TEST(test_decode_budget_refuses_a_tree_larger_than_allowed)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1000];
        Netbroker__Ping ping = NETBROKER__PING__INIT;
        struct nbp_pb_budget b;
        uint8_t *buf;
        size_t len;
        Netbroker__ClientMessage *out;

        op.op_case = NETBROKER__OP__OP_PING;
        op.ping = &ping;
        for (int i = 0; i < 1000; i++)
                ops[i] = &op;
        req.n_ops = 1000;
        req.ops = ops;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        len = netbroker__client_message__get_packed_size(&m);
        buf = malloc(len);
        netbroker__client_message__pack(&m, buf);
        /* 1000 ops in ~4 KB of frame decode to far more than 16 KB. */
        nbp_pb_budget_init(&b, 16 * 1024);
        out = netbroker__client_message__unpack(&b.allocator, len, buf);
        ck_assert_ptr_null(out);
        ck_assert_uint_eq(b.used, 0); /* everything taken was given back */
        /* Why, for the helper's error: the budget, not a bad message. */
        ck_assert(b.over && !b.oom);
        nbp_pb_budget_release(&b);
        ck_assert(!b.over);
        /* Bytes that are no message: refused with the budget untouched. */
        out = netbroker__client_message__unpack(&b.allocator, 4,
                                                (const uint8_t[]){0xff, 0xff, 0xff, 0xff});
        ck_assert_ptr_null(out);
        ck_assert(!b.over && !b.oom);
        nbp_pb_budget_release(&b);
        nbp_pb_budget_init(&b, 1u << 20);
        out = netbroker__client_message__unpack(&b.allocator, len, buf);
        ck_assert_ptr_nonnull(out);
        ck_assert(!b.over);
        ck_assert_uint_eq(out->request->n_ops, 1000);
        netbroker__client_message__free_unpacked(out, &b.allocator);
        ck_assert_uint_eq(b.used, 0);
        nbp_pb_budget_release(&b);
        free(buf);
}
END_TEST

START_TEST(test_decode_fails_cleanly_at_every_allocation)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Request req = NETBROKER__REQUEST__INIT;
        Netbroker__Op op = NETBROKER__OP__INIT, *ops[1] = {&op};
        Netbroker__Exec e = NETBROKER__EXEC__INIT;
        char *argv[] = {(char *)"iptables-restore", (char *)"-w"};
        struct nbp_pb_budget b;
        uint8_t buf[512];
        size_t len, n = 1;

        e.path = (char *)"/usr/sbin/iptables-restore";
        e.argv = argv;
        e.n_argv = 2;
        op.op_case = NETBROKER__OP__OP_EXEC;
        op.exec = &e;
        req.ops = ops;
        req.n_ops = 1;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_REQUEST;
        m.request = &req;
        len = netbroker__client_message__pack(&m, buf);
        /* Fail the 1st, 2nd, ... allocation until decoding no longer fails:
         * each failure must give back everything it took. */
        for (;; n++) {
                nbp_pb_budget_init(&b, 1u << 20);
                b.fail_at = n;
                Netbroker__ClientMessage *out =
                        netbroker__client_message__unpack(&b.allocator, len, buf);
                if (out) {
                        netbroker__client_message__free_unpacked(out, &b.allocator);
                        ck_assert_uint_eq(b.used, 0);
                        nbp_pb_budget_release(&b);
                        break;
                }
                ck_assert_uint_eq(b.used, 0);
                nbp_pb_budget_release(&b);
                ck_assert_uint_lt(n, 100);
        }
        ck_assert_uint_gt(n, 3);
}
END_TEST

/* ---- name allocator (no kernel: the bitmaps are fed by hand) ---- */

static void alloc_is(struct nbd_names *n, const char *prefix, const char *want)
{
        char name[IFNAMSIZ];

        ck_assert_int_eq(nbd_names_allocate(n, prefix, name), 0);
        ck_assert_str_eq(name, want);
}

START_TEST(test_names_next_fit_does_not_reuse_a_just_freed_name)
{
        struct nbd_names *n;

        ck_assert_int_eq(nbd_names_new(&n), 0);
        alloc_is(n, "vnet", "vnet0");
        alloc_is(n, "vnet", "vnet1");
        nbd_names_mark(n, "vnet0", false); /* vnet0 deleted */
        alloc_is(n, "vnet", "vnet2"); /* lowest-free would say vnet0 */
        nbd_names_mark(n, "vnet2", false);
        alloc_is(n, "vnet", "vnet3");
        nbd_names_free(n);
}
END_TEST

START_TEST(test_names_made_by_others_are_skipped)
{
        struct nbd_names *n;

        ck_assert_int_eq(nbd_names_new(&n), 0);
        nbd_names_mark(n, "macvtap0", true);
        nbd_names_mark(n, "macvtap1", true);
        nbd_names_mark(n, "macvtap3", true); /* ip link add ... macvtap3 */
        alloc_is(n, "macvtap", "macvtap2");
        alloc_is(n, "macvtap", "macvtap4");
        /* A name with a leading zero or another prefix is not ours. */
        nbd_names_mark(n, "macvtap05", true);
        nbd_names_mark(n, "macvtapx6", true);
        alloc_is(n, "macvtap", "macvtap5");
        alloc_is(n, "macvtap", "macvtap6");
        nbd_names_free(n);
}
END_TEST

START_TEST(test_names_wrap_around_and_exhaustion)
{
        struct nbd_names *n;
        char name[IFNAMSIZ];
        const char *prefix = "abcdefghijklmn"; /* 14 bytes: room for one digit */

        ck_assert_int_eq(nbd_names_new(&n), 0);
        ck_assert_uint_eq(nbd_names_max_suffix(prefix), 9);
        for (int i = 0; i < 10; i++)
                ck_assert_int_eq(nbd_names_allocate(n, prefix, name), 0);
        ck_assert_str_eq(name, "abcdefghijklmn9");
        ck_assert_int_eq(nbd_names_allocate(n, prefix, name), -ENOSPC);
        nbd_names_mark(n, "abcdefghijklmn3", false);
        nbd_names_mark(n, "abcdefghijklmn7", false);
        /* The cursor is past 9: it wraps and finds 3 first, then 7. */
        alloc_is(n, prefix, "abcdefghijklmn3");
        alloc_is(n, prefix, "abcdefghijklmn7");
        ck_assert_int_eq(nbd_names_allocate(n, prefix, name), -ENOSPC);
        nbd_names_free(n);
}
END_TEST

START_TEST(test_names_rebuild_keeps_the_cursor)
{
        struct nbd_names *n;

        ck_assert_int_eq(nbd_names_new(&n), 0);
        for (int i = 0; i < 5; i++) {
                char name[IFNAMSIZ];
                ck_assert_int_eq(nbd_names_allocate(n, "vnet", name), 0);
        }
        /* A rebuild from a dump that shows only vnet1 still does not send the
         * next allocation back to vnet0. */
        nbd_names_clear(n);
        nbd_names_mark(n, "vnet1", true);
        alloc_is(n, "vnet", "vnet5");
        nbd_names_free(n);
}
END_TEST

START_TEST(test_names_large_suffixes_cross_bitmap_words)
{
        struct nbd_names *n;

        ck_assert_int_eq(nbd_names_new(&n), 0);
        for (int i = 0; i < 200; i++) {
                char name[IFNAMSIZ];
                snprintf(name, sizeof(name), "veth%d", i);
                nbd_names_mark(n, name, true);
        }
        nbd_names_mark(n, "veth130", false);
        alloc_is(n, "veth", "veth130");
        alloc_is(n, "veth", "veth200");
        nbd_names_free(n);
}
END_TEST

static int count_prefixes(const char *prefix, const unsigned *used, size_t n_used, unsigned cursor,
                          void *data)
{
        int *seen = data;

        if (strcmp(prefix, "vnet") == 0) {
                ck_assert_uint_eq(n_used, 2);
                ck_assert_uint_eq(used[0], 0);
                ck_assert_uint_eq(used[1], 70);
                ck_assert_uint_eq(cursor, 1);
                (*seen)++;
        }
        return 0;
}

START_TEST(test_names_dump_lists_used_suffixes_in_order)
{
        struct nbd_names *n;
        int seen = 0;

        ck_assert_int_eq(nbd_names_new(&n), 0);
        nbd_names_mark(n, "vnet70", true);
        alloc_is(n, "vnet", "vnet0");
        ck_assert_int_eq(nbd_names_foreach(n, count_prefixes, &seen), 0);
        ck_assert_int_eq(seen, 1);
        nbd_names_free(n);
}
END_TEST

START_TEST(test_template_is_a_prefix_and_percent_d_only)
{
        char prefix[IFNAMSIZ];

        ck_assert_int_eq(nbd_template_parse("vnet%d", prefix), 0);
        ck_assert_str_eq(prefix, "vnet");
        ck_assert_int_eq(nbd_template_parse("abcdefghijklmn%d", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("abcdefghijklmno%d", prefix),
                         0); /* no room for a digit */
        ck_assert_int_lt(nbd_template_parse("%d", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("vnet%s", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("vnet%x", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("vn%det%d", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("vnet%d%d", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("vnet%%d", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("vnet1%d", prefix), 0); /* vnet1 + 2 = vnet12 */
        ck_assert_int_lt(nbd_template_parse("a/b%d", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("a b%d", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("vnet%d ", prefix), 0);
        ck_assert_int_lt(nbd_template_parse("vnet%n", prefix), 0);
}
END_TEST

START_TEST(test_ifname_valid_as_the_kernel_says)
{
        ck_assert(nbd_ifname_valid("eth0"));
        ck_assert(nbd_ifname_valid("abcdefghijklmno")); /* 15 */
        ck_assert(!nbd_ifname_valid("abcdefghijklmnop")); /* 16: never truncated */
        ck_assert(!nbd_ifname_valid(""));
        ck_assert(!nbd_ifname_valid("."));
        /* Control bytes reach logs and terminals (an outside review made a
         * tap named "atk\x1b[31mX"): refused, though the kernel takes them. */
        ck_assert(!nbd_ifname_valid("atk\x1b[31mX"));
        ck_assert(!nbd_ifname_valid("atk\x01"));
        ck_assert(!nbd_ifname_valid("atk\x7f"));
        ck_assert(!nbd_ifname_valid(".."));
        ck_assert(nbd_ifname_valid("..."));
        /* Printable ASCII without patterns or lists (program arguments). */
        ck_assert(nbd_ifname_valid("br-lan.100_a~"));
        ck_assert(!nbd_ifname_valid("vnet*"));
        ck_assert(!nbd_ifname_valid("vnet?"));
        ck_assert(!nbd_ifname_valid("vnet[0]"));
        ck_assert(!nbd_ifname_valid("vnet0,eth0"));
        ck_assert(!nbd_ifname_valid("vnet\xff\xfe"));
        ck_assert(!nbd_ifname_valid("vnet\xc2\x9b"
                                    "2J")); /* C1 CSI */
        ck_assert(!nbd_ifname_valid("vn\xc3\xa9t"));
        ck_assert(!nbd_ifname_valid("a/b"));
        ck_assert(!nbd_ifname_valid("a:b"));
        ck_assert(!nbd_ifname_valid("a b"));
        ck_assert(!nbd_ifname_valid("a\tb"));
        ck_assert(!nbd_ifname_valid("a\nb"));
}
END_TEST

/* The one libnl-to-errno map: each code the errno libnl made it from
 * (NLE_OBJ_NOTFOUND, libnl's own, ENOENT: the kernel's ENODEV comes
 * through the ack), either sign, and the kernel's errno first. */
START_TEST(test_netlink_maps_libnl_codes_to_errno)
{
        static const struct {
                int nle, err;
        } map[] = {
                {0, 0},
                {NLE_NOMEM, ENOMEM},
                {NLE_EXIST, EEXIST},
                {NLE_OBJ_NOTFOUND, ENOENT},
                {NLE_NODEV, ENODEV},
                {NLE_INVAL, EINVAL},
                {NLE_MISSING_ATTR, EINVAL},
                {NLE_PERM, EPERM},
                {NLE_NOACCESS, EACCES},
                {NLE_BUSY, EBUSY},
                {NLE_RANGE, ERANGE},
                {NLE_OPNOTSUPP, EOPNOTSUPP},
                {NLE_AGAIN, EAGAIN},
                {NLE_MSGSIZE, EMSGSIZE},
                {NLE_DUMP_INTR, EINTR},
                {NLE_INTR, EINTR},
                {NLE_AF_NOSUPPORT, EAFNOSUPPORT},
                {NLE_FAILURE, EIO},
                {NLE_SEQ_MISMATCH, EIO},
        };
        struct nbd_netlink nl = {0};

        for (size_t i = 0; i < sizeof(map) / sizeof(*map); i++) {
                ck_assert_int_eq(nbd_netlink_nle_errno(-map[i].nle), -map[i].err);
                ck_assert_int_eq(nbd_netlink_nle_errno(map[i].nle), -map[i].err);
                ck_assert_int_eq(nbd_netlink_errno(&nl, -map[i].nle), -map[i].err);
        }
        /* The kernel said ENODEV, libnl made it NLE_OBJ_NOTFOUND: ENODEV. */
        nl.kernel_errno = ENODEV;
        ck_assert_int_eq(nbd_netlink_errno(&nl, -NLE_OBJ_NOTFOUND), -ENODEV);
        /* EADDRINUSE, folded into NLE_EXIST by libnl, stays itself. */
        nl.kernel_errno = EADDRINUSE;
        ck_assert_int_eq(nbd_netlink_errno(&nl, -NLE_EXIST), -EADDRINUSE);
        ck_assert_int_eq(nbd_netlink_errno(&nl, 0), 0);
}
END_TEST

/* The interface map (ifmap.c): a rename drops the old name, a delete the
 * entry, owner marks and the macvtap flag stick to the name. */
START_TEST(test_ifmap_follows_renames_deletes_and_owners)
{
        struct nbd_ifmap m = {0};
        const struct nbd_ifnode *n;

        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "p0"), 0);
        ck_assert_ptr_null(nbd_ifmap_get(&m, "p0"));
        nbd_ifmap_note_kind(&m, "p0", 7, true, 1);
        nbd_ifmap_set_owner(&m, "p0", true, 1000);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "p0"), 7);
        n = nbd_ifmap_get(&m, "p0");
        ck_assert(n->macvtap && n->owned && n->owner == 1000);
        nbd_ifmap_note(&m, "p0", 7, true); /* -1: what is known stays */
        ck_assert(nbd_ifmap_get(&m, "p0")->macvtap);
        nbd_ifmap_note(&m, "p1", 7, true); /* renamed */
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "p0"), 0);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "p1"), 7);
        ck_assert_uint_eq(m.n, 1);
        for (int i = 1; i <= 1000; i++) {
                char name[IFNAMSIZ];

                snprintf(name, sizeof(name), "v%d", i);
                nbd_ifmap_note(&m, name, 100 + i, true);
        }
        ck_assert_uint_eq(m.n, 1001);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "v999"), 1099);
        nbd_ifmap_set_owner(&m, "v5", false, 1000);
        ck_assert(!nbd_ifmap_get(&m, "v5")->owned);
        nbd_ifmap_note(&m, "v5", 105, false);
        ck_assert_ptr_null(nbd_ifmap_get(&m, "v5"));
        ck_assert_uint_eq(m.n, 1000);
        nbd_ifmap_free(&m);
        ck_assert_uint_eq(m.n, 0);
}
END_TEST

/* Entries of the map holding ifindex (a walk of every bucket by name). */
static unsigned ifmap_entries_of(const struct nbd_ifmap *m, int ifindex)
{
        unsigned k = 0;

        for (size_t b = 0; b < m->n_buckets; b++)
                for (const struct nbd_ifnode *n = m->buckets[b]; n; n = n->next)
                        k += n->ifindex == ifindex;
        return k;
}

/* One entry per ifindex, whatever order the notifications come in: "a"
 * (5) renamed to "b" while the map still has the "b" (6) that was deleted
 * (its RTM_DELLINK not read yet, or read before a rebuild's dump) moves
 * "b" to 5 and drops "a"; the late deletion of 6 then drops nothing. A
 * deletion drops its ifindex's entry, not a newer device of the same name
 * (our create notes it before the old one's RTM_DELLINK is read). */
START_TEST(test_ifmap_keeps_one_entry_per_ifindex)
{
        struct nbd_ifmap m = {0};

        nbd_ifmap_note(&m, "a", 5, true);
        nbd_ifmap_note(&m, "b", 6, true);
        nbd_ifmap_note(&m, "b", 5, true); /* a renamed to b; b(6) gone */
        ck_assert_uint_eq(ifmap_entries_of(&m, 5), 1);
        ck_assert_ptr_null(nbd_ifmap_get(&m, "a"));
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "b"), 5);
        ck_assert_str_eq(nbd_ifmap_name_of(&m, 5), "b");
        ck_assert_ptr_null(nbd_ifmap_name_of(&m, 6));
        ck_assert_uint_eq(m.n, 1);
        nbd_ifmap_note(&m, "b", 6, false); /* the late RTM_DELLINK of 6 */
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "b"), 5);
        ck_assert_uint_eq(m.n, 1);
        /* tap0 (7) deleted by someone, ours made as tap0 (8) and noted. */
        nbd_ifmap_note(&m, "tap0", 7, true);
        nbd_ifmap_note(&m, "tap0", 8, true);
        nbd_ifmap_note(&m, "tap0", 7, false);
        ck_assert_int_eq(nbd_ifmap_ifindex(&m, "tap0"), 8);
        ck_assert_uint_eq(ifmap_entries_of(&m, 8), 1);
        ck_assert_uint_eq(m.n, 2);
        nbd_ifmap_note(&m, "tap0", 8, false);
        ck_assert_ptr_null(nbd_ifmap_get(&m, "tap0"));
        ck_assert_uint_eq(m.n, 1);
        nbd_ifmap_free(&m);
}
END_TEST

static Suite *unit_suite(void)
{
        Suite *s = suite_create("unit");
        TCase *frames = tcase_create("frames"), *config = tcase_create("config");
        TCase *logging = tcase_create("log"), *codec = tcase_create("codec");
        TCase *names = tcase_create("names"), *netlink = tcase_create("netlink");
        /* Apart: it needs the kernel to enforce the fd limit it sets, and
         * valgrind emulates setrlimit(RLIMIT_NOFILE) instead (test.sh runs
         * this binary under valgrind without the "rlimit" tag). */
        TCase *rlimit = tcase_create("frames-rlimit");

        tcase_add_test(frames, test_frame_reassembled_from_one_byte_writes);
        tcase_add_test(frames, test_frame_writer_resumes_after_eagain);
        tcase_add_test(frames, test_frame_over_cap_is_refused_before_allocation);
        tcase_add_test(frames, test_frame_carries_fds_close_on_exec);
        tcase_add_test(frames, test_frame_fds_over_reader_cap_are_closed_and_flagged);
        tcase_set_tags(rlimit, "rlimit");
        tcase_add_test(rlimit, test_frame_ctrunc_at_fd_limit_leaves_no_fd_behind);
        tcase_add_test(frames, test_frame_eof_inside_frame_is_connreset);
        tcase_add_test(frames, test_frame_write_to_closed_peer_is_epipe_not_sigpipe);
        tcase_add_test(config, test_config_bad_line_is_reported_with_its_number);
        tcase_add_test(config, test_config_defaults_allow_root_only_and_64_fds);
        tcase_add_test(config, test_config_lists_replace_defaults_and_accumulate);
        tcase_add_test(config, test_config_gid_admits_members_by_supplementary_group);
        tcase_add_test(config,
                       test_config_exec_env_allow_is_an_allow_list_without_loader_variables);
        tcase_add_test(config,
                       test_config_programs_must_be_safe_for_root_and_resolve_to_their_realpath);
        tcase_add_test(config, test_config_fd_limit_must_fit_connections_and_spawns);
        tcase_add_test(config, test_config_missing_file_is_an_error_only_when_required);
        tcase_add_test(logging, test_log_disabled_message_evaluates_nothing);
        tcase_add_test(logging, test_log_filters_set_one_category);
        tcase_add_test(logging, test_log_audit_lines_keep_a_reserve_that_other_lines_cannot_take);
        tcase_add_test(codec, test_decode_budget_refuses_a_tree_larger_than_allowed);
        tcase_add_test(codec, test_decode_fails_cleanly_at_every_allocation);
        tcase_add_test(names, test_names_next_fit_does_not_reuse_a_just_freed_name);
        tcase_add_test(names, test_names_made_by_others_are_skipped);
        tcase_add_test(names, test_names_wrap_around_and_exhaustion);
        tcase_add_test(names, test_names_rebuild_keeps_the_cursor);
        tcase_add_test(names, test_names_large_suffixes_cross_bitmap_words);
        tcase_add_test(names, test_names_dump_lists_used_suffixes_in_order);
        tcase_add_test(names, test_template_is_a_prefix_and_percent_d_only);
        tcase_add_test(names, test_ifname_valid_as_the_kernel_says);
        tcase_add_test(netlink, test_netlink_maps_libnl_codes_to_errno);
        tcase_add_test(netlink, test_ifmap_follows_renames_deletes_and_owners);
        tcase_add_test(netlink, test_ifmap_keeps_one_entry_per_ifindex);
        suite_add_tcase(s, names);
        suite_add_tcase(s, netlink);
        suite_add_tcase(s, fw_unit_tcase());
        suite_add_tcase(s, mac_tcase());
        suite_add_tcase(s, names_scale_tcase());
        suite_add_tcase(s, frames);
        suite_add_tcase(s, rlimit);
        suite_add_tcase(s, config);
        suite_add_tcase(s, logging);
        suite_add_tcase(s, codec);
        suite_add_tcase(s, fw_client_tcase());
        suite_add_tcase(s, fw_filters_tcase());
        suite_add_tcase(s, fw_text_tcase());
        suite_add_tcase(s, fwfile_tcase());
        suite_add_tcase(s, policy_unit_tcase());
        suite_add_tcase(s, abi_tcase());
        suite_add_tcase(s, opref_tcase());
        suite_add_tcase(s, fw_net_unit_tcase()); /* virtual networks */
        suite_add_tcase(s, uevent_unit_tcase()); /* a macvtap's device number (issue 14) */
        suite_add_tcase(s, fw_msgs_unit_tcase()); /* messages encoded as queued (issue 14) */
        suite_add_tcase(s, lib_einval_tcase()); /* bad input says why (nb_last_error) */
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(unit_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
