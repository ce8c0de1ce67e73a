// SPDX-License-Identifier: LGPL-2.1-or-later
/* netbrokerd as a systemd service, without systemd as PID 1: the notify
 * protocol read from a datagram socket the test owns (what systemd would
 * read at NOTIFY_SOCKET), SIGHUP reloads good and bad, sockets handed over
 * as systemd hands them (LISTEN_FDS, LISTEN_PID), the journal's priority
 * prefixes ($JOURNAL_STREAM), the configuration errors that stop start-up,
 * with --check-config, and an op the unit's sandbox could break. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "testutil.h"

/* A datagram socket standing in for systemd's notification socket. */
struct notify {
        int fd;
        char path[108];
};

static void notify_open(struct notify *n)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct timeval tv = {.tv_sec = 10};

        snprintf(n->path, sizeof(n->path), "/tmp/nbtest-notify-%d.sock", (int)getpid());
        unlink(n->path);
        strcpy(sa.sun_path, n->path);
        n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(n->fd, 0);
        ck_assert_int_eq(bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(setsockopt(n->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
}

static void notify_close(struct notify *n)
{
        close(n->fd);
        unlink(n->path);
}

/* The next notification, which must contain each of the needles (one per
 * line of it, "KEY=" alone matches any value). */
static void notify_expect(struct notify *n, const char *a, const char *b)
{
        char buf[1024];
        ssize_t len = recv(n->fd, buf, sizeof(buf) - 1, 0);

        ck_assert_msg(len > 0, "no notification (waiting for %s): %s", a, strerror(errno));
        buf[len] = '\0';
        ck_assert_msg(strstr(buf, a), "expected %s in notification '%s'", a, buf);
        ck_assert_msg(!b || strstr(buf, b), "expected %s in notification '%s'", b, buf);
}

/* No notification waits (the helper said nothing more). */
static void notify_expect_none(struct notify *n)
{
        char buf[256];

        ck_assert_int_lt(recv(n->fd, buf, sizeof(buf), MSG_DONTWAIT), 0);
}

/* A helper run as systemd would run it: env holds "NAME=value" entries to
 * set (NULL ends it), stderr goes to the file err (appended), fd3 >= 0 is
 * passed as fd 3 with LISTEN_FDS=1 and LISTEN_PID of the helper. */
struct run {
        const char *const *argv;
        const char *const *env;
        const char *err;
        int fd3;
        uid_t uid; /* 0: root */
};

static pid_t start(const struct run *r)
{
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int efd = open(r->err, O_WRONLY | O_CREAT | O_APPEND, 0600);
                char lp[32];
                if (efd < 0 || dup2(efd, 2) < 0)
                        _exit(126);
                for (size_t i = 0; r->env && r->env[i]; i++)
                        putenv((char *)r->env[i]);
                if (r->fd3 >= 0) {
                        if (dup2(r->fd3, 3) < 0)
                                _exit(126);
                        snprintf(lp, sizeof(lp), "%d", (int)getpid());
                        setenv("LISTEN_FDS", "1", 1);
                        setenv("LISTEN_PID", lp, 1);
                }
                if (r->uid && (setgroups(0, NULL) < 0 || setresgid(r->uid, r->uid, r->uid) < 0 ||
                               setresuid(r->uid, r->uid, r->uid) < 0))
                        _exit(126);
                execv(r->argv[0], (char *const *)r->argv);
                _exit(127);
        }
        return pid;
}

static int exit_status(pid_t pid)
{
        int status;

        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "helper died of signal %d", WTERMSIG(status));
        return WEXITSTATUS(status);
}

static char *err_file(void)
{
        char *p = strdup("/tmp/nbtest-err-XXXXXX");
        int fd = mkstemp(p);

        ck_assert_int_ge(fd, 0);
        close(fd);
        return p;
}

/* The whole file (static buffer). */
static const char *slurp(const char *path)
{
        return tu_read_file(path);
}

/* path holds needle, polled for up to 5 s: a running helper's lines are
 * written by its log thread, after what the loop did next (log.h). */
static bool eventually_has(const char *path, const char *needle)
{
        for (int i = 0; i < 500; i++) {
                if (strstr(slurp(path), needle))
                        return true;
                usleep(10000);
        }
        return false;
}

/* Rewrite a config file in place, as an editor would before SIGHUP. */
static void rewrite(const char *path, const char *body)
{
        FILE *f = fopen(path, "w");

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fputs(body, f) >= 0, 1);
        ck_assert_int_eq(fclose(f), 0);
}

/* A helper on --listen with NOTIFY_SOCKET at n, ready (READY=1 read). */
struct served {
        pid_t pid;
        char sock[108];
        char *conf, *err;
};

static void serve_start(struct served *s, struct notify *n, const char *body, const char *journal)
{
        char env_notify[160], env_journal[64];
        const char *env[3] = {env_notify, NULL, NULL};
        struct stat st;

        s->conf = tu_config(body);
        s->err = err_file();
        snprintf(s->sock, sizeof(s->sock), "/tmp/nbtest-sd-%d.sock", (int)getpid());
        unlink(s->sock);
        snprintf(env_notify, sizeof(env_notify), "NOTIFY_SOCKET=%s", n->path);
        if (journal) {
                /* The stream systemd would have connected to the journal:
                 * here the file stderr goes to. */
                ck_assert_int_eq(stat(s->err, &st), 0);
                snprintf(env_journal, sizeof(env_journal), "JOURNAL_STREAM=%llu:%llu",
                         (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
                env[1] = env_journal;
        }
        const char *argv[] = {tu_helper_path(), "--config", s->conf, "--listen", s->sock, NULL};
        s->pid = start(&(struct run){.argv = argv, .env = env, .err = s->err, .fd3 = -1});
        notify_expect(n, "READY=1", NULL);
}

static void serve_stop(struct served *s, struct notify *n)
{
        kill(s->pid, SIGTERM);
        notify_expect(n, "STOPPING=1", NULL);
        ck_assert_int_eq(exit_status(s->pid), 0);
        unlink(s->sock);
        unlink(s->err);
        free(s->err);
        free(s->conf);
}

/* Exec of path on c: its status. */
static int exec_status(nb_conn *c, const char *path)
{
        const char *argv[] = {path, "hi", NULL};
        nb_results *res = tu_exec1(c, path, argv, NULL, NULL, 5000);
        int st = nb_result_status(res, 0);

        nb_results_free(res);
        return st;
}

START_TEST(test_notify_says_ready_reloading_and_stopping)
{
        struct notify n;
        struct served s;

        notify_open(&n);
        serve_start(&s, &n, TU_ALLOW, NULL);
        notify_expect_none(&n);
        kill(s.pid, SIGHUP);
        /* systemd 253+ matches a reload by MONOTONIC_USEC. */
        notify_expect(&n, "RELOADING=1", "MONOTONIC_USEC=");
        notify_expect(&n, "READY=1", NULL);
        ck_assert(tu_process_alive(s.pid));
        serve_stop(&s, &n);
        notify_close(&n);
}
END_TEST

START_TEST(test_spawned_helper_notifies_nobody)
{
        struct notify n;
        nb_conn *c;

        notify_open(&n);
        /* A daemon under systemd spawns the helper with its own
         * NOTIFY_SOCKET in the environment: the helper must not speak for
         * that daemon. */
        setenv("NOTIFY_SOCKET", n.path, 1);
        c = tu_spawn(TU_ALLOW);
        ck_assert_int_eq(exec_status(c, "/bin/true"), 0);
        nb_close(c);
        unsetenv("NOTIFY_SOCKET");
        usleep(100000);
        notify_expect_none(&n);
        notify_close(&n);
}
END_TEST

START_TEST(test_reload_takes_new_rules_on_an_open_connection)
{
        struct notify n;
        struct served s;
        nb_conn *c;

        notify_open(&n);
        serve_start(&s, &n, "exec_allow = /bin/true\n", NULL);
        ck_assert_int_eq(nb_connect(s.sock, &c), 0);
        ck_assert_int_eq(exec_status(c, "/bin/echo"), -EPERM);
        rewrite(s.conf, "exec_allow = /bin/true /bin/echo\n");
        kill(s.pid, SIGHUP);
        notify_expect(&n, "RELOADING=1", NULL);
        notify_expect(&n, "READY=1", "STATUS=Serving");
        /* The connection opened before the reload gets the new allow-list
         * at its next request. */
        ck_assert_int_eq(exec_status(c, "/bin/echo"), 0);
        /* And a rule taken away is gone for it too. */
        rewrite(s.conf, "exec_allow = /bin/echo\n");
        kill(s.pid, SIGHUP);
        notify_expect(&n, "RELOADING=1", NULL);
        notify_expect(&n, "READY=1", NULL);
        ck_assert_int_eq(exec_status(c, "/bin/true"), -EPERM);
        nb_close(c);
        ck_assert_msg(eventually_has(s.err, "reloaded"), "stderr: %s", slurp(s.err));
        serve_stop(&s, &n);
        notify_close(&n);
}
END_TEST

/* As uid 65534 on a connection of its own: Exec of path with argument
 * arg; its status into *status (shared). */
static pid_t nobody_exec(const char *sock, const char *path, const char *arg, int *status)
{
        pid_t child = fork();

        ck_assert_int_ge(child, 0);
        if (child == 0) {
                nb_conn *c = NULL;
                if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0 ||
                    nb_connect(sock, &c) != 0)
                        _exit(10);
                const char *argv[] = {path, arg, NULL};
                nb_results *res = tu_exec1(c, path, argv, NULL, NULL, 5000);
                *status = nb_result_status(res, 0);
                _exit(0);
        }
        return child;
}

/* A reload that takes a program off a uid's 'exec' refuses its Exec that
 * waited for a spawn slot meanwhile (validated before the reload, run
 * after it), as it refuses one taken off exec_allow. */
START_TEST(test_reload_refuses_a_waiting_exec_the_policy_no_longer_grants)
{
        static const char *const conf[] = {
                "exec_allow = /bin/sleep /bin/true\nmax_spawns_per_uid = 2\nmax_spawns = "
                "3\nroot_reserved_spawns = 2\n"
                "policy_dir = /nonexistent/nbtest-policy.d\n[policy uid 65534]\nops = exec\n"
                "exec = /bin/sleep /bin/true\n",
                "exec_allow = /bin/sleep /bin/true\nmax_spawns_per_uid = 2\nmax_spawns = "
                "3\nroot_reserved_spawns = 2\n"
                "policy_dir = /nonexistent/nbtest-policy.d\n[policy uid 65534]\nops = exec\n"
                "exec = /bin/sleep\n"};
        int *st = mmap(NULL, 2 * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
        struct notify n;
        struct served s;
        pid_t sleeper, waiter;
        nb_conn *root;
        int w;

        ck_assert_ptr_ne(st, MAP_FAILED);
        st[0] = st[1] = 1;
        notify_open(&n);
        serve_start(&s, &n, conf[0], NULL);
        ck_assert_int_eq(chmod(s.sock, 0666), 0);
        ck_assert_int_eq(nb_connect(s.sock, &root), 0);
        /* The one slot left to callers other than root taken (sleep 1 s),
         * then /bin/true waits for it. */
        sleeper = nobody_exec(s.sock, "/bin/sleep", "1", &st[0]);
        for (int i = 0; i < 500 && tu_stat(root, "spawns") < 1; i++)
                usleep(2000);
        ck_assert_uint_eq(tu_stat(root, "spawns"), 1);
        waiter = nobody_exec(s.sock, "/bin/true", "x", &st[1]);
        for (int i = 0; i < 500 && tu_stat(root, "ops_exec") < 2; i++)
                usleep(2000);
        ck_assert_uint_eq(tu_stat(root, "ops_exec"), 2);
        ck_assert_uint_eq(tu_stat(root, "spawns"), 1);
        rewrite(s.conf, conf[1]);
        kill(s.pid, SIGHUP);
        notify_expect(&n, "RELOADING=1", NULL);
        notify_expect(&n, "READY=1", NULL);
        ck_assert_int_eq(waitpid(waiter, &w, 0), waiter);
        ck_assert_int_eq(waitpid(sleeper, &w, 0), sleeper);
        ck_assert_int_eq(st[0], 0);
        ck_assert_msg(st[1] == -EPERM, "the waiting /bin/true: status %d", st[1]);
        ck_assert_uint_eq(tu_stat(root, "spawns"), 1);
        nb_close(root);
        munmap(st, 2 * sizeof(int));
        serve_stop(&s, &n);
        notify_close(&n);
}
END_TEST

static int ping(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        int r = b ? nb_batch_ping(b) : -ENOMEM;

        if (r == 0)
                r = nb_submit(c, b, &res);
        if (r == 0)
                r = nb_result_status(res, 0);
        nb_results_free(res);
        nb_batch_free(b);
        return r;
}

/* Admission is decided at accept: a reload that no longer admits a uid
 * leaves its open connection working and refuses its next one. */
START_TEST(test_reload_changes_admission_for_new_connections_only)
{
        struct notify n;
        struct served s;
        int to_child[2], to_parent[2], status;
        char byte = 0;
        pid_t child;

        notify_open(&n);
        serve_start(&s, &n, TU_ALLOW "allow_uid = 0 65534\n", NULL);
        ck_assert_int_eq(chmod(s.sock, 0666), 0);
        ck_assert_int_eq(pipe(to_child), 0);
        ck_assert_int_eq(pipe(to_parent), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                nb_conn *c = NULL, *again = NULL;
                if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                if (nb_connect(s.sock, &c) != 0 || ping(c) != 0)
                        _exit(11);
                if (write(to_parent[1], &byte, 1) != 1 || read(to_child[0], &byte, 1) != 1)
                        _exit(12);
                if (ping(c) != 0)
                        _exit(13); /* the open connection stays */
                if (nb_connect(s.sock, &again) != -EACCES)
                        _exit(14); /* a new one is refused */
                nb_close(c);
                _exit(0);
        }
        ck_assert_int_eq(read(to_parent[0], &byte, 1), 1);
        rewrite(s.conf, TU_ALLOW "allow_uid = 0\n");
        kill(s.pid, SIGHUP);
        notify_expect(&n, "RELOADING=1", NULL);
        notify_expect(&n, "READY=1", "STATUS=Serving");
        ck_assert_int_eq(write(to_child[1], &byte, 1), 1);
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d",
                      WEXITSTATUS(status));
        close(to_child[0]);
        close(to_child[1]);
        close(to_parent[0]);
        close(to_parent[1]);
        serve_stop(&s, &n);
        notify_close(&n);
}
END_TEST

START_TEST(test_bad_reload_keeps_the_old_configuration)
{
        static const char *const bad[] = {
                "exec_allow = /bin/true\nthis is no key\n", /* syntax */
                "exec_allow = /bin/true\nmax_spawns = 0\n", /* range */
                "exec_allow = /bin/true\nfd_limit = 128\n", /* start-up only */
                "exec_allow = /bin/true\nlog_filters = server:loud\n",
                "exec_allow = /bin/true\n[policy uid 1000]\nops = exec\nexec = /bin/echo\n",
        };
        struct notify n;
        struct served s;
        nb_conn *c;

        notify_open(&n);
        serve_start(&s, &n, "exec_allow = /bin/true /bin/echo\n", "journal");
        ck_assert_int_eq(nb_connect(s.sock, &c), 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                rewrite(s.conf, bad[i]);
                kill(s.pid, SIGHUP);
                notify_expect(&n, "RELOADING=1", NULL);
                notify_expect(&n, "READY=1", "the last reload was refused");
                /* Still the old allow-list: echo runs. */
                ck_assert_int_eq(exec_status(c, "/bin/echo"), 0);
        }
        nb_close(c);
        /* Each refusal is an error line at the journal's error priority. */
        ck_assert_msg(eventually_has(s.err, "<3>netbrokerd[error] main: reload refused"),
                      "stderr: %s", slurp(s.err));
        ck_assert_msg(eventually_has(s.err, "fd_limit changes only at start-up"), "stderr: %s",
                      slurp(s.err));
        serve_stop(&s, &n);
        notify_close(&n);
}
END_TEST

START_TEST(test_log_lines_carry_priorities_only_for_the_journal)
{
        char *err = err_file(), *other = err_file(), env_journal[64];
        const char *env[2] = {env_journal, NULL};
        char *conf = tu_config("max_spawns = 0\n");
        const char *argv[] = {tu_helper_path(), "--check-config", "--config", conf, NULL};
        struct stat st;

        /* stderr is the journal: every line starts with its priority. */
        ck_assert_int_eq(stat(err, &st), 0);
        snprintf(env_journal, sizeof(env_journal), "JOURNAL_STREAM=%llu:%llu",
                 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
        ck_assert_int_eq(exit_status(start(&(struct run){argv, env, err, -1, 0})), 1);
        ck_assert_msg(strncmp(slurp(err), "<3>netbrokerd[error]", 20) == 0, "stderr: %s",
                      slurp(err));
        /* JOURNAL_STREAM inherited, stderr elsewhere (a terminal, a pipe,
         * another file): no prefix. */
        ck_assert_int_eq(exit_status(start(&(struct run){argv, env, other, -1, 0})), 1);
        ck_assert_msg(strncmp(slurp(other), "netbrokerd[error]", 17) == 0, "stderr: %s",
                      slurp(other));
        unlink(err);
        unlink(other);
        free(err);
        free(other);
        free(conf);
}
END_TEST

START_TEST(test_connected_socket_from_systemd_is_refused)
{
        char *err = err_file(), *conf = tu_config(TU_ALLOW);
        const char *argv[] = {tu_helper_path(), "--config", conf, NULL};
        int sv[2];

        /* What a .socket unit with Accept=yes hands over: one connection. */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        ck_assert_int_eq(exit_status(start(&(struct run){.argv = argv, .err = err, .fd3 = sv[0]})),
                         1);
        ck_assert_msg(strstr(slurp(err), "is a connected socket, not a listening one") &&
                              strstr(slurp(err), "Accept=yes"),
                      "stderr: %s", slurp(err));
        close(sv[0]);
        close(sv[1]);
        unlink(err);
        free(err);
        free(conf);
}
END_TEST

START_TEST(test_listening_socket_from_systemd_is_served)
{
        char *err = err_file(), *conf = tu_config(TU_ALLOW), path[108];
        const char *argv[] = {tu_helper_path(), "--config", conf, NULL};
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        nb_conn *c = NULL;
        pid_t pid;

        snprintf(path, sizeof(path), "/tmp/nbtest-sdl-%d.sock", (int)getpid());
        unlink(path);
        strcpy(sa.sun_path, path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(fd, 8), 0);
        pid = start(&(struct run){.argv = argv, .err = err, .fd3 = fd});
        close(fd);
        ck_assert_int_eq(nb_connect(path, &c), 0);
        ck_assert_int_eq(exec_status(c, "/bin/true"), 0);
        nb_close(c);
        kill(pid, SIGTERM);
        ck_assert_int_eq(exit_status(pid), 0);
        unlink(path);
        unlink(err);
        free(err);
        free(conf);
}
END_TEST

/* The unit gives no CAP_SETPCAP, so the helper cannot shrink its bounding
 * set (CAP_SYS_ADMIN stays in it): a program it runs must still hold the
 * network capabilities and no more (not the helper's CAP_MKNOD, nor its
 * permitted CAP_SETUID/CAP_SETGID), its own capability sets narrowed before
 * its exec and NO_NEW_PRIVS capping what the exec gives. */
START_TEST(test_without_setpcap_programs_get_only_the_network_capabilities)
{
        struct notify n;
        struct served s;
        nb_conn *c;
        const char *argv[] = {"/bin/cat", "/proc/self/status", NULL};
        const unsigned long long two = 1ull << 12 | 1ull << 13; /* NET_ADMIN, NET_RAW */
        unsigned long long prm = ~0ull, eff = ~0ull, bnd = 0;
        nb_results *res;
        nb_exec_result e = NB_EXEC_RESULT_INIT;
        char out[4096];
        const char *p;

        notify_open(&n);
        /* As systemd would start it: the bounding set without CAP_SETPCAP. */
        ck_assert_int_eq(prctl(PR_CAPBSET_DROP, CAP_SETPCAP, 0, 0, 0), 0);
        serve_start(&s, &n, TU_ALLOW, NULL);
        ck_assert_int_eq(nb_connect(s.sock, &c), 0);
        res = tu_exec1(c, "/bin/cat", argv, NULL, NULL, 5000);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert_int_eq(nb_result_exec(res, 0, &e), 0);
        ck_assert_uint_lt(e.out_len, sizeof(out));
        memcpy(out, e.out, e.out_len);
        out[e.out_len] = '\0';
        p = strstr(out, "CapPrm:");
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(sscanf(p, "CapPrm: %llx CapEff: %llx CapBnd: %llx", &prm, &eff, &bnd), 3);
        ck_assert_msg(prm == two && eff == two, "CapPrm %llx CapEff %llx", prm, eff);
        /* The bounding set was left as given: the test means something. */
        ck_assert_msg(bnd & 1ull << 21, "CapBnd %llx has no CAP_SYS_ADMIN", bnd);
        nb_results_free(res);
        nb_close(c);
        serve_stop(&s, &n);
        notify_close(&n);
}
END_TEST

/* ---- the unit's sandbox ---- */

#define MAX_RW 16

/* The unit as built: whether it sets ProtectKernelTunables=yes, and its
 * ReadWritePaths= under /proc/sys (a "-" or "+" prefix taken off), for
 * the test below to apply as systemd would. */
struct unit_sandbox {
        bool protect_tunables;
        char *rw[MAX_RW];
        size_t n_rw;
};

static void unit_sandbox_read(struct unit_sandbox *u)
{
        char *text = strdup(slurp(NB_UNIT_FILE)), *save = NULL;

        ck_assert_ptr_nonnull(text);
        *u = (struct unit_sandbox){0};
        for (char *ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
                char *save2 = NULL;

                if (!strcmp(ln, "ProtectKernelTunables=yes"))
                        u->protect_tunables = true;
                if (strncmp(ln, "ReadWritePaths=", 15))
                        continue;
                for (char *p = strtok_r(ln + 15, " ", &save2); p; p = strtok_r(NULL, " ", &save2)) {
                        p += strspn(p, "-+");
                        if (strncmp(p, "/proc/sys", 9) || (p[9] && p[9] != '/'))
                                continue;
                        ck_assert_uint_lt(u->n_rw, MAX_RW);
                        u->rw[u->n_rw++] = strdup(p);
                }
        }
        free(text);
}

static void unit_sandbox_free(struct unit_sandbox *u)
{
        for (size_t i = 0; i < u->n_rw; i++)
                free(u->rw[i]);
}

static unsigned read_flag(int fd)
{
        char buf[16] = "";

        return pread(fd, buf, sizeof(buf) - 1, 0) > 0 ? (unsigned)atoi(buf) : 99;
}

/* In a child: a mount namespace of its own with /proc/sys as u has it,
 * then a network namespace of its own, a helper spawned there with conf,
 * and sysctl_set ipv4.forwarding to the value it does not hold. systemd
 * 252 (src/core/namespace.c) binds each ReadWritePaths= entry on itself,
 * binds /proc/sys on itself for ProtectKernelTunables=, then remounts
 * /proc/sys read-only recursively, passing by the mounts of the other
 * entries: here the remount of the one /proc/sys mount does the same.
 * The network namespace comes after the mounts, so the write must land in
 * the helper's namespace, not in the one the mounts were made in, and a
 * mount on a path below /proc/sys/net would not be seen there. The
 * child's exit status: 0 when the value was written where it belongs, the
 * op's errno when it failed, 100 and up for the harness. */
static int sysctl_set_in_sandbox(const struct unit_sandbox *u, bool with_rw, const char *conf)
{
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                nb_spawn_opts o = {.size = sizeof(nb_spawn_opts), .config_path = conf};
                const char *fwd = "/proc/sys/net/ipv4/ip_forward";
                nb_conn *c = NULL;
                nb_results *res = NULL;
                nb_batch *b;
                unsigned want, was;
                int outer, inner, st;

                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
                        _exit(100);
                if (u->protect_tunables) {
                        for (size_t i = 0; with_rw && i < u->n_rw; i++)
                                if (mount(u->rw[i], u->rw[i], NULL, MS_BIND | MS_REC, NULL))
                                        _exit(101);
                        if (mount("/proc/sys", "/proc/sys", NULL, MS_BIND | MS_REC, NULL) ||
                            mount(NULL, "/proc/sys", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL))
                                _exit(102);
                }
                outer = open(fwd, O_RDONLY | O_CLOEXEC);
                if (outer < 0 || unshare(CLONE_NEWNET) < 0)
                        _exit(103);
                inner = open(fwd, O_RDONLY | O_CLOEXEC);
                if (inner < 0)
                        _exit(104);
                want = !read_flag(inner);
                was = read_flag(outer);
                if (nb_spawn(tu_helper_path(), &o, &c) < 0)
                        _exit(105);
                b = nb_batch_new();
                if (!b || nb_batch_sysctl_set(b, NULL, "ipv4.forwarding", want) < 0 ||
                    nb_submit(c, b, &res) < 0)
                        _exit(106);
                st = nb_result_status(res, 0);
                if (st < 0) {
                        fprintf(stderr, "sysctl_set: %s\n", nb_result_message(res, 0));
                        _exit(-st < 100 ? -st : 107);
                }
                if (read_flag(inner) != want)
                        _exit(108);
                if (read_flag(outer) != was)
                        _exit(109); /* the namespace of the mounts, not the helper's */
                nb_results_free(res);
                nb_batch_free(b);
                nb_close(c);
                _exit(0);
        }
        return exit_status(pid);
}

/* sysctl_set (man netbrokerd: ADDRESSES, ROUTES AND SYSCTLS) under the
 * unit's ProtectKernelTunables=yes, which makes /proc/sys read-only: its
 * ReadWritePaths=/proc/sys/net keeps the op working, in the namespace the
 * helper is in. Without them the same write fails with EROFS, so the
 * emulated sandbox is in force. */
START_TEST(test_sysctl_set_works_in_the_units_sandbox)
{
        struct unit_sandbox u;
        char *conf = tu_config(TU_ALLOW);

        unit_sandbox_read(&u);
        ck_assert_msg(u.protect_tunables, "%s: no ProtectKernelTunables=yes", NB_UNIT_FILE);
        ck_assert_int_eq(sysctl_set_in_sandbox(&u, true, conf), 0);
        ck_assert_int_eq(sysctl_set_in_sandbox(&u, false, conf), EROFS);
        unit_sandbox_free(&u);
        unlink(conf);
        free(conf);
}
END_TEST

/* Start-up with a configuration that cannot be used: exit 1 and a
 * sentence naming it, before any socket is served. */
static void expect_startup_refused(const char *conf, uid_t uid, const char *needle)
{
        char *err = err_file(), sock[108];
        const char *argv[] = {tu_helper_path(), "--config", conf, "--listen", sock, NULL};

        snprintf(sock, sizeof(sock), "/tmp/nbtest-sdr-%d.sock", (int)getpid());
        chmod(err, 0666);
        ck_assert_int_eq(
                exit_status(start(&(struct run){.argv = argv, .err = err, .fd3 = -1, .uid = uid})),
                1);
        ck_assert_msg(strstr(slurp(err), needle), "expected '%s' in stderr: %s", needle,
                      slurp(err));
        unlink(sock);
        unlink(err);
        free(err);
}

START_TEST(test_config_that_is_a_directory_stops_startup)
{
        char dir[] = "/tmp/nbtest-confdir-XXXXXX";

        ck_assert_ptr_nonnull(mkdtemp(dir));
        expect_startup_refused(dir, 0, "Is a directory");
        rmdir(dir);
}
END_TEST

START_TEST(test_config_that_is_a_fifo_stops_startup_at_once)
{
        char dir[] = "/tmp/nbtest-fifo-XXXXXX", fifo[64];

        /* Opened for reading, a FIFO with no writer would hold start-up
         * forever. */
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(fifo, sizeof(fifo), "%s/netbrokerd.conf", dir);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        expect_startup_refused(fifo, 0, "not a regular file");
        unlink(fifo);
        rmdir(dir);
}
END_TEST

/* The same for a FIFO among the policy files: read at start-up, and at a
 * reload on the loop, where it would hold every client. */
START_TEST(test_policy_file_that_is_a_fifo_stops_startup_at_once)
{
        char dir[] = "/tmp/nbtest-pfifo-XXXXXX", fifo[64], text[256];
        char *conf;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(fifo, sizeof(fifo), "%s/10-x.conf", dir);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        snprintf(text, sizeof(text), TU_ALLOW "policy_dir = %s\n", dir);
        conf = tu_config(text);
        expect_startup_refused(conf, 0, "10-x.conf: not a regular file");
        unlink(fifo);
        rmdir(dir);
        free(conf);
}
END_TEST

START_TEST(test_unreadable_config_stops_startup)
{
        char *conf = tu_config(TU_ALLOW);

        /* Root reads any file (CAP_DAC_OVERRIDE): a helper started as
         * another uid meets the permission check. */
        ck_assert_int_eq(chmod(conf, 0), 0);
        expect_startup_refused(conf, 65534, "Permission denied");
        free(conf);
}
END_TEST

START_TEST(test_config_syntax_error_stops_startup)
{
        char *conf = tu_config(TU_ALLOW "max_spawns 3\n");

        expect_startup_refused(conf, 0, ":2: expected 'key = value'");
        free(conf);
}
END_TEST

START_TEST(test_check_config_says_valid_or_not_and_touches_nothing)
{
        char *err = err_file(), *good = tu_config(TU_ALLOW), *bad = tu_config("bogus = 1\n");
        char sock[108];
        const char *argv[] = {
                tu_helper_path(), "--check-config", "--config", NULL, "--listen", sock, NULL};
        struct run r = {.argv = argv, .err = err, .fd3 = -1};

        snprintf(sock, sizeof(sock), "/tmp/nbtest-sdc-%d.sock", (int)getpid());
        unlink(sock);
        chmod(err, 0666);
        chmod(good, 0644);
        chmod(bad, 0644);
        argv[3] = good;
        ck_assert_int_eq(exit_status(start(&r)), 0);
        argv[3] = bad;
        ck_assert_int_eq(exit_status(start(&r)), 1);
        ck_assert_msg(strstr(slurp(err), ":1: bogus: unknown key"), "stderr: %s", slurp(err));
        /* Nothing was bound, and no privilege is needed to check. */
        ck_assert_int_ne(access(sock, F_OK), 0);
        r.uid = 65534;
        argv[3] = good;
        ck_assert_int_eq(exit_status(start(&r)), 0);
        argv[3] = "/nonexistent/netbrokerd.conf";
        ck_assert_int_eq(exit_status(start(&r)), 1);
        unlink(err);
        free(err);
        free(good);
        free(bad);
}
END_TEST

Suite *systemd_suite(void)
{
        Suite *s = suite_create("systemd");
        TCase *notify = tcase_create("notify");
        TCase *sockets = tcase_create("sockets");
        TCase *config = tcase_create("config");
        TCase *sandbox = tcase_create("sandbox");

        /* Each test starts the helper a few times: seconds under ASan or
         * valgrind on a loaded machine. */
        tcase_set_timeout(notify, 60);
        tcase_set_timeout(sockets, 60);
        tcase_set_timeout(config, 60);
        tcase_set_timeout(sandbox, 60);
        tcase_add_test(notify, test_notify_says_ready_reloading_and_stopping);
        tcase_add_test(notify, test_spawned_helper_notifies_nobody);
        tcase_add_test(notify, test_reload_takes_new_rules_on_an_open_connection);
        tcase_add_test(notify, test_reload_refuses_a_waiting_exec_the_policy_no_longer_grants);
        tcase_add_test(notify, test_reload_changes_admission_for_new_connections_only);
        tcase_add_test(notify, test_bad_reload_keeps_the_old_configuration);
        tcase_add_test(notify, test_log_lines_carry_priorities_only_for_the_journal);
        tcase_add_test(sockets, test_connected_socket_from_systemd_is_refused);
        tcase_add_test(sockets, test_listening_socket_from_systemd_is_served);
        tcase_add_test(sockets, test_without_setpcap_programs_get_only_the_network_capabilities);
        tcase_add_test(config, test_config_that_is_a_directory_stops_startup);
        tcase_add_test(config, test_config_that_is_a_fifo_stops_startup_at_once);
        tcase_add_test(config, test_policy_file_that_is_a_fifo_stops_startup_at_once);
        tcase_add_test(config, test_unreadable_config_stops_startup);
        tcase_add_test(config, test_config_syntax_error_stops_startup);
        tcase_add_test(config, test_check_config_says_valid_or_not_and_touches_nothing);
        suite_add_tcase(s, notify);
        suite_add_tcase(s, sockets);
        suite_add_tcase(s, config);
        tcase_add_test(sandbox, test_sysctl_set_works_in_the_units_sandbox);
        suite_add_tcase(s, sandbox);
        return s;
}
