// SPDX-License-Identifier: LGPL-2.1-or-later
/* Supervised programs (ProgramStart, ProgramStop, ProgramList) through a
 * real helper: its own session, exits reported with their signal, stops
 * that leave no zombie and no process group, the allow-list, who may stop
 * what, the spawn share, adoption after a helper restart and refusal of a
 * pid file whose pid is another process now, and dnsmasq giving a DHCP
 * lease across a bridge to a client in a second namespace. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tests.h"

#define SLEEP "/bin/sleep"
#define USER_A 4711
#define USER_B 4712

/* A fresh pid-file directory per test; removed with its files at the end. */
static char prog_dir[PATH_MAX];

static char *config_with(const char *extra)
{
        static unsigned seq;
        char *body;

        snprintf(prog_dir, sizeof(prog_dir), "/tmp/nbtest-programs-%d-%u", (int)getpid(), seq++);
        ck_assert_int_ge(asprintf(&body,
                                  "fd_limit = 96\n"
                                  "program_allow = " SLEEP " /bin/sh\n"
                                  "program_dir = %s\n"
                                  "%s",
                                  prog_dir, extra),
                         0);
        return body;
}

static void remove_prog_dir(void)
{
        free(tu_sh("rm -rf '%s'", prog_dir));
}

/* Start `sleep SECONDS` with tag; returns its id and pid. */
static uint64_t start_sleep(nb_conn *c, const char *tag, const char *seconds, int *ret_pid,
                            bool *ret_existing)
{
        const char *argv[] = {SLEEP, seconds, NULL};
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_batch *b = nb_batch_new();
        nb_results *res;
        uint64_t id = 0;

        o.argv = argv;
        o.tag = tag;
        ck_assert_int_eq(nb_batch_program_start(b, SLEEP, &o), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "start: %s", nb_result_message(res, 0));
        ck_assert_int_eq(nb_result_program(res, 0, &id, ret_pid, ret_existing), 0);
        nb_results_free(res);
        ck_assert_uint_gt(id, 0);
        return id;
}

/* The listing's entry for id (false: not listed). */
static bool find_listed(nb_conn *c, uint64_t id, nb_program_info *ret)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        bool found = false;

        ck_assert_int_eq(nb_batch_program_list(b, NULL), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        for (size_t k = 0; k < nb_result_program_count(res, 0) && !found; k++) {
                nb_program_info p = NB_PROGRAM_INFO_INIT;
                ck_assert_int_eq(nb_result_program_at(res, 0, k, &p), 0);
                if (p.id == id) {
                        found = true;
                        /* Strings die with res: keep the numbers only,
                         * and the gone interface's name, copied. */
                        static char gone[16];
                        snprintf(gone, sizeof(gone), "%s", p.gone_interface);
                        p.path = p.tag = NULL;
                        p.argv = NULL;
                        p.gone_interface = gone;
                        *ret = p;
                }
        }
        nb_results_free(res);
        return found;
}

static size_t listed_count(nb_conn *c)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        size_t n;

        ck_assert_int_eq(nb_batch_program_list(b, NULL), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        n = nb_result_program_count(res, 0);
        nb_results_free(res);
        return n;
}

/* Stop by id (or tag); returns the result (status, message) for checks. */
static nb_results *stop(nb_conn *c, uint64_t id, const char *tag)
{
        nb_batch *b = nb_batch_new();

        ck_assert_int_eq(nb_batch_program_stop(b, id, tag, 2000), 0);
        return tu_submit(c, b);
}

/* Field n (1-based) of /proc/PID/stat, after the command name. */
static long stat_field(pid_t pid, int n)
{
        char path[64];
        const char *s;
        long v = -1;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        s = strrchr(tu_read_file(path), ')');
        ck_assert_ptr_nonnull(s);
        s += 2; /* field 3 */
        for (int i = 3; i < n; i++)
                s = strchr(s, ' ') + 1;
        sscanf(s, "%ld", &v);
        return v;
}

/* /proc/PID/exe of pid ("" if it cannot be read). */
static const char *exe_of(pid_t pid)
{
        static char buf[PATH_MAX];
        char path[64];
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
        n = readlink(path, buf, sizeof(buf) - 1);
        buf[n < 0 ? 0 : n] = '\0';
        return buf;
}

/* A live (not zombie) process is in process group pgid. Zombies do not
 * count: the group's orphans are reaped by init, whenever it does. */
static bool group_exists(pid_t pgid)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        bool found = false;

        ck_assert_ptr_nonnull(d);
        while (!found && (e = readdir(d))) {
                char path[300], buf[1024], *s;
                int fd, pgrp = 0;
                ssize_t n;
                char state = 0;
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (n <= 0)
                        continue;
                buf[n] = '\0';
                s = strrchr(buf, ')');
                if (s && sscanf(s + 2, "%c %*d %d", &state, &pgrp) == 2)
                        found = pgrp == pgid && state != 'Z' && state != 'X';
        }
        closedir(d);
        return found;
}

static const char *fd_target(pid_t pid, int fd)
{
        static char buf[PATH_MAX];
        char path[64];
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
        n = readlink(path, buf, sizeof(buf) - 1);
        buf[n < 0 ? 0 : n] = '\0';
        return buf;
}

START_TEST(test_program_runs_in_its_own_session_and_stop_leaves_nothing)
{
        struct tu_helper h;
        char *conf = config_with("");
        char pidfile[PATH_MAX + 32];
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        nb_conn *c;
        nb_results *res;
        unsigned stopped = 0;
        uint64_t id;
        int pid;

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        id = start_sleep(c, "net1", "1000", &pid, NULL);
        ck_assert(find_listed(c, id, &p));
        ck_assert(p.running);
        ck_assert_int_eq(p.pid, pid);
        ck_assert_uint_eq(p.uid, 0);
        /* Its own session and process group (fields 5 pgrp, 6 session). */
        ck_assert_int_eq(stat_field(pid, 5), pid);
        ck_assert_int_eq(stat_field(pid, 6), pid);
        ck_assert_str_eq(fd_target(pid, 0), "/dev/null");
        ck_assert_str_eq(fd_target(pid, 1), "/dev/null");
        snprintf(pidfile, sizeof(pidfile), "%s/%llu.pid", prog_dir, (unsigned long long)id);
        ck_assert_int_eq(access(pidfile, F_OK), 0);
        ck_assert_uint_eq(tu_stat(c, "programs_started"), 1);

        res = stop(c, id, NULL);
        ck_assert_msg(nb_result_status(res, 0) == 0, "%s", nb_result_message(res, 0));
        ck_assert_int_eq(nb_result_program_stopped(res, 0, &stopped, NULL), 0);
        ck_assert_uint_eq(stopped, 1);
        nb_results_free(res);
        /* Answered once it is gone: reaped (no zombie), its group gone, its
         * pid file gone, and no longer listed. */
        ck_assert(!tu_process_alive(pid));
        ck_assert_int_eq(tu_zombies_of(h.pid), 0);
        ck_assert(!group_exists(pid));
        ck_assert_int_ne(access(pidfile, F_OK), 0);
        ck_assert(!find_listed(c, id, &p));
        nb_close(c);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* The leader ends on SIGTERM; a child it left in its group ignores
 * SIGTERM: the stop still leaves no process of the group. */
START_TEST(test_stop_takes_the_programs_whole_process_group)
{
        struct tu_helper h;
        char *conf = config_with("");
        const char *argv[] = {"/bin/sh", "-c", "(trap '' TERM; exec " SLEEP " 1004) & wait", NULL};
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_batch *b;
        nb_results *res;
        nb_conn *c;
        uint64_t id = 0;
        int pid = 0;

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        o.argv = argv;
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_program_start(b, "/bin/sh", &o), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "%s", nb_result_message(res, 0));
        ck_assert_int_eq(nb_result_program(res, 0, &id, &pid, NULL), 0);
        nb_results_free(res);
        /* The child is there (the group has two processes). */
        for (int i = 0; i < 100 && tu_children_of(pid) == 0; i++)
                usleep(10000);
        ck_assert_int_eq(tu_children_of(pid), 1);
        res = stop(c, id, NULL);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        nb_results_free(res);
        for (int i = 0; i < 100 && group_exists(pid); i++)
                usleep(10000);
        ck_assert_msg(!group_exists(pid), "a process of the program's group outlived its stop");
        nb_close(c);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

START_TEST(test_program_killed_from_outside_is_reported_with_its_signal)
{
        struct tu_helper h;
        char *conf = config_with("");
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        unsigned had_exited = 0;
        nb_results *res;
        nb_conn *c;
        uint64_t id;
        int pid;

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        id = start_sleep(c, "", "1000", &pid, NULL);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        for (int i = 0; i < 200 && find_listed(c, id, &p) && p.running; i++)
                usleep(10000);
        ck_assert(find_listed(c, id, &p));
        ck_assert_msg(!p.running, "still listed running after SIGKILL");
        ck_assert_int_eq(p.signal, SIGKILL);
        ck_assert(!p.status_unknown);
        ck_assert_uint_eq(tu_stat(c, "programs_exited"), 1);
        ck_assert_int_eq(tu_zombies_of(h.pid), 0);
        /* Its slot is free: listed, but not counted as running. */
        res = stop(c, id, NULL);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert(strstr(nb_result_message(res, 0), "had exited already"));
        ck_assert_int_eq(nb_result_program_stopped(res, 0, NULL, &had_exited), 0);
        ck_assert_uint_eq(had_exited, 1);
        nb_results_free(res);
        ck_assert_uint_eq(listed_count(c), 0);
        /* An unknown id is a success that says so. */
        res = stop(c, 999, NULL);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        ck_assert(strstr(nb_result_message(res, 0), "nothing to stop"));
        nb_results_free(res);
        nb_close(c);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

START_TEST(test_program_not_on_program_allow_is_refused)
{
        struct tu_helper h;
        /* On exec_allow is not on program_allow: the lists are separate. */
        char *conf = config_with("exec_allow = /bin/true\n");
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_batch *b;
        nb_results *res;
        nb_conn *c;

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_program_start(b, "/bin/true", &o), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), -EPERM);
        ck_assert_msg(strstr(nb_result_message(res, 0), "/bin/true is not on program_allow"), "%s",
                      nb_result_message(res, 0));
        ck_assert_int_eq(nb_result_program(res, 0, NULL, NULL, NULL), -ENODATA);
        nb_results_free(res);
        /* A stop's grace is bounded: a stopping program holds its slot. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_program_stop(b, 0, "any", 60001), 0);
        res = tu_submit(c, b);
        ck_assert_int_eq(nb_result_status(res, 0), -EINVAL);
        ck_assert_msg(strstr(nb_result_message(res, 0), "over the maximum of 60000 ms"), "%s",
                      nb_result_message(res, 0));
        nb_results_free(res);
        ck_assert_int_eq(tu_children_of(h.pid), 0);
        ck_assert_uint_eq(tu_stat(c, "programs_started"), 0);
        nb_close(c);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* ---- other callers: a forked client with another uid ---- */

enum as_what {
        AS_START,
        AS_START_OTHER,
        AS_STOP_ID,
        AS_STOP_TAG,
        AS_LIST,
        AS_EXEC,
        AS_START_ARGV,
        AS_DELETE_NBU0,
        AS_VETH,
        AS_DELETE_LINK,
};

/* What AS_START_ARGV starts: path with argv, after creating bridge (when
 * set) in the same batch; the reply is the start's (the bridge's when
 * path is NULL: the bridge alone). */
static struct {
        const char *bridge, *path;
        const char *const *argv;
        const char *link, *peer; /* AS_VETH makes link and peer; AS_DELETE_LINK deletes link */
} as_argv;

struct as_reply {
        int status;
        uint64_t id;
        unsigned n; /* listed, or stopped */
        char msg[256];
};

static void as_run(nb_conn *c, enum as_what what, uint64_t id, struct as_reply *r)
{
        const char *argv[] = {SLEEP, what == AS_START_OTHER ? "1002" : "1001", NULL};
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        size_t at = 0;

        o.argv = argv;
        o.tag = "user";
        if (what == AS_START_ARGV) {
                if (as_argv.bridge && ++at)
                        nb_batch_bridge_create(b, as_argv.bridge);
                o.argv = as_argv.argv;
                if (as_argv.path)
                        nb_batch_program_start(b, as_argv.path, &o);
                else
                        at = 0;
        } else if (what == AS_START || what == AS_START_OTHER)
                nb_batch_program_start(b, SLEEP, &o);
        else if (what == AS_STOP_ID)
                nb_batch_program_stop(b, id, NULL, 2000);
        else if (what == AS_STOP_TAG)
                nb_batch_program_stop(b, 0, "user", 2000);
        else if (what == AS_LIST)
                nb_batch_program_list(b, NULL);
        else if (what == AS_DELETE_NBU0)
                nb_batch_link_delete(b, "nbu0");
        else if (what == AS_VETH)
                nb_batch_veth_create(b, as_argv.link, as_argv.peer, -1);
        else if (what == AS_DELETE_LINK)
                nb_batch_link_delete(b, as_argv.link);
        else
                nb_batch_exec(b, "/bin/true", NULL, NULL, NULL, 0, 0);
        r->status = nb_submit(c, b, &res);
        if (r->status == 0) {
                r->status = nb_result_status(res, at);
                snprintf(r->msg, sizeof(r->msg), "%s", nb_result_message(res, at));
                nb_result_program(res, at, &r->id, NULL, NULL);
                nb_result_program_stopped(res, 0, &r->n, NULL);
                if (what == AS_LIST)
                        r->n = (unsigned)nb_result_program_count(res, 0);
        }
        nb_results_free(res);
        nb_batch_free(b);
}

/* One op as uid, in a child process. */
static struct as_reply as_uid(const struct tu_helper *h, uid_t uid, enum as_what what, uint64_t id)
{
        struct as_reply r = {.status = -EIO};
        int fds[2], status;
        pid_t pid;

        ck_assert_int_eq(chmod(h->sock, 0666), 0);
        ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                nb_conn *c = NULL;
                close(fds[0]);
                if (setgid(uid) < 0 || setuid(uid) < 0 || nb_connect(h->sock, &c) < 0)
                        _exit(1);
                as_run(c, what, id, &r);
                nb_close(c);
                _exit(write(fds[1], &r, sizeof(r)) == sizeof(r) ? 0 : 1);
        }
        close(fds[1]);
        ck_assert_int_eq(read(fds[0], &r, sizeof(r)), sizeof(r));
        close(fds[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return r;
}

/* sleep needs its argument, which a caller other than root gives only
 * with program_args = any (its arguments are tested apart, below). */
#define USERS_POLICY                                                                               \
        "exec_allow = /bin/true\n"                                                                 \
        "[policy uid 4711]\n"                                                                      \
        "ops = program_start program_stop exec\n"                                                  \
        "programs = " SLEEP "\n"                                                                   \
        "program_args = any\n"                                                                     \
        "exec = /bin/true\n"                                                                       \
        "[policy uid 4712]\n"                                                                      \
        "ops = program_start program_stop\n"                                                       \
        "programs = " SLEEP "\n"                                                                   \
        "program_args = any\n"

START_TEST(test_other_unprivileged_caller_cannot_stop_or_see_it)
{
        struct tu_helper h;
        char *conf = config_with(USERS_POLICY);
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        struct as_reply r;
        nb_conn *root;
        uint64_t id;

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &root), 0);
        r = as_uid(&h, USER_A, AS_START, 0);
        ck_assert_msg(r.status == 0, "%s", r.msg);
        id = r.id;
        r = as_uid(&h, USER_B, AS_STOP_ID, id);
        ck_assert_int_eq(r.status, -EPERM);
        ck_assert_msg(strstr(r.msg, "started by uid 4711"), "%s", r.msg);
        /* By tag: B's own programs only, and it has none. */
        r = as_uid(&h, USER_B, AS_STOP_TAG, 0);
        ck_assert_int_eq(r.status, 0);
        ck_assert_uint_eq(r.n, 0);
        r = as_uid(&h, USER_B, AS_LIST, 0);
        ck_assert_int_eq(r.status, 0);
        ck_assert_uint_eq(r.n, 0);
        r = as_uid(&h, USER_A, AS_LIST, 0);
        ck_assert_uint_eq(r.n, 1);
        /* Root sees it, still running, as A's. */
        ck_assert(find_listed(root, id, &p));
        ck_assert(p.running);
        ck_assert_uint_eq(p.uid, USER_A);
        r = as_uid(&h, USER_A, AS_STOP_ID, id);
        ck_assert_msg(r.status == 0 && r.n == 1, "%d %s", r.status, r.msg);
        ck_assert(!find_listed(root, id, &p));
        nb_close(root);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* max_programs_per_uid (1 by default) for a non-root caller; the same
 * start again is the program that runs, not a second one. */
START_TEST(test_programs_per_uid_are_limited_and_a_repeated_start_is_the_same)
{
        struct tu_helper h;
        char *conf = config_with(USERS_POLICY);
        struct as_reply r;
        uint64_t id;

        tu_helper_start(&h, conf);
        r = as_uid(&h, USER_A, AS_START, 0);
        ck_assert_msg(r.status == 0, "%s", r.msg);
        id = r.id;
        r = as_uid(&h, USER_A, AS_START, 0);
        ck_assert_msg(r.status == 0, "%s", r.msg);
        ck_assert_uint_eq(r.id, id);
        r = as_uid(&h, USER_A, AS_START_OTHER, 0);
        ck_assert_int_eq(r.status, -EAGAIN);
        ck_assert_msg(strstr(r.msg, "max_programs_per_uid"), "%s", r.msg);
        r = as_uid(&h, USER_A, AS_STOP_ID, id);
        ck_assert_int_eq(r.status, 0);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* Security review LOW 8: admitted uids could take every max_programs slot
 * and root's ProgramStart then failed. With max_programs = 2 and the
 * default root_reserved_programs (1), the second uid's start is refused
 * (EAGAIN, naming the key) and root's still runs. */
START_TEST(test_other_uids_leave_root_its_reserved_program_slot)
{
        struct tu_helper h;
        char *conf = config_with("max_programs = 2\n" USERS_POLICY);
        struct as_reply r;
        nb_conn *root;
        uint64_t a, mine;
        nb_batch *b;

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &root), 0);
        r = as_uid(&h, USER_A, AS_START, 0);
        ck_assert_msg(r.status == 0, "%s", r.msg);
        a = r.id;
        r = as_uid(&h, USER_B, AS_START, 0);
        ck_assert_int_eq(r.status, -EAGAIN);
        ck_assert_msg(strstr(r.msg, "1 programs run already and 1 of max_programs (2) are "
                                    "root's (root_reserved_programs)"),
                      "%s", r.msg);
        mine = start_sleep(root, "root", "1000", NULL, NULL);
        r = as_uid(&h, USER_A, AS_STOP_ID, a);
        ck_assert_int_eq(r.status, 0);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_program_stop(b, mine, NULL, 2000), 0);
        nb_results_free(tu_submit_ok(root, b));
        nb_close(root);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* With max_spawns_per_uid = 1, one running program is the whole share:
 * the caller's Exec is refused (EAGAIN) until the program stops. */
START_TEST(test_exec_is_refused_while_a_program_holds_the_only_slot)
{
        struct tu_helper h;
        char *conf = config_with("max_spawns_per_uid = 1\n" USERS_POLICY);
        struct as_reply r;
        uint64_t id;

        tu_helper_start(&h, conf);
        r = as_uid(&h, USER_A, AS_START, 0);
        ck_assert_msg(r.status == 0, "%s", r.msg);
        id = r.id;
        r = as_uid(&h, USER_A, AS_EXEC, 0);
        ck_assert_int_eq(r.status, -EAGAIN);
        ck_assert_msg(strstr(r.msg, "max_spawns_per_uid"), "%s", r.msg);
        r = as_uid(&h, USER_A, AS_STOP_ID, id);
        ck_assert_int_eq(r.status, 0);
        r = as_uid(&h, USER_A, AS_EXEC, 0);
        ck_assert_msg(r.status == 0, "exec after the stop: %s", r.msg);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

static void kill_helper(struct tu_helper *h)
{
        int status;

        ck_assert_int_eq(kill(h->pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(h->pid, &status, 0), h->pid);
        unlink(h->sock);
        free(h->config);
}

START_TEST(test_program_is_adopted_after_a_helper_restart_not_started_twice)
{
        struct tu_helper h;
        char *conf = config_with("");
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        bool existing = false;
        nb_results *res;
        nb_conn *c;
        uint64_t id, again;
        int pid, pid2;

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        id = start_sleep(c, "net1", "1000", &pid, NULL);
        nb_close(c);
        kill_helper(&h);
        ck_assert(tu_process_alive(pid));

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        ck_assert(find_listed(c, id, &p));
        ck_assert(p.running);
        ck_assert(p.adopted);
        ck_assert_int_eq(p.pid, pid);
        ck_assert_uint_eq(tu_stat(c, "programs_adopted"), 1);
        again = start_sleep(c, "net1", "1000", &pid2, &existing);
        ck_assert_uint_eq(again, id);
        ck_assert_int_eq(pid2, pid);
        ck_assert(existing);
        ck_assert_uint_eq(tu_stat(c, "programs_started"), 0);
        /* Another tag is another program. */
        again = start_sleep(c, "net2", "1000", &pid2, &existing);
        ck_assert_uint_ne(again, id);
        ck_assert(!existing);
        res = stop(c, 0, "net2");
        nb_results_free(res);
        /* Stopping the adopted one: it goes (init reaps it). */
        res = stop(c, id, NULL);
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        nb_results_free(res);
        ck_assert(!tu_process_alive(pid));
        ck_assert_uint_eq(listed_count(c), 0);
        nb_close(c);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* The program's file replaced while it runs (a package upgrade): its exe
 * reads "PATH (deleted)", and it is still adopted, not started twice. */
START_TEST(test_a_program_whose_file_was_replaced_is_still_adopted)
{
        char dir[64], prog[80], *conf;
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        struct tu_helper h;
        bool existing = false;
        uint64_t id, again;
        nb_results *res;
        nb_batch *b;
        nb_conn *c;
        int pid, pid2;

        /* A directory only root may write (the allow-list checks it). */
        snprintf(dir, sizeof(dir), "/run/nbtest-upgrade-%d", (int)getpid());
        snprintf(prog, sizeof(prog), "%s/sleep", dir);
        free(tu_sh("mkdir -m 0755 '%s' && cp " SLEEP " '%s'", dir, prog));
        snprintf(prog_dir, sizeof(prog_dir), "%s/programs", dir);
        ck_assert_int_ge(asprintf(&conf, "fd_limit = 96\nprogram_allow = %s\nprogram_dir = %s\n",
                                  prog, prog_dir),
                         0);
        o.argv = (const char *const[]){prog, "60", NULL}; /* outlives the test only if it fails */
        o.tag = "upg";
        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_program_start(b, prog, &o), 0);
        res = tu_submit_ok(c, b);
        ck_assert_int_eq(nb_result_program(res, 0, &id, &pid, NULL), 0);
        nb_results_free(res);
        nb_close(c);
        kill_helper(&h);

        /* The upgrade: a new file renamed over the old one. */
        free(tu_sh("cp " SLEEP " '%s.new' && mv '%s.new' '%s'", prog, prog, prog));
        free(tu_sh("readlink /proc/%d/exe | grep -q ' (deleted)$'", pid));

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        ck_assert(find_listed(c, id, &p));
        ck_assert(p.running && p.adopted);
        ck_assert_int_eq(p.pid, pid);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_program_start(b, prog, &o), 0);
        res = tu_submit_ok(c, b);
        ck_assert_int_eq(nb_result_program(res, 0, &again, &pid2, &existing), 0);
        nb_results_free(res);
        ck_assert_uint_eq(again, id);
        ck_assert_int_eq(pid2, pid);
        ck_assert(existing);
        nb_results_free(stop(c, id, NULL));
        ck_assert(!tu_process_alive(pid));
        nb_close(c);
        tu_helper_stop(&h);
        free(tu_sh("rm -rf '%s'", dir));
        free(conf);
}
END_TEST

/* A pid file whose pid is now another process (the number was reused) is
 * not adopted, and that process is left alone: one with a different start
 * time (same program), one with the right start time but another exe. */
START_TEST(test_pid_file_of_an_unrelated_process_is_not_adopted)
{
        struct tu_helper h;
        char *conf = config_with("");
        char path[PATH_MAX + 32], body[512];
        /* Without capabilities, as the helper's own programs: the helper
         * may read its /proc/PID/exe then, so only the checks tell. */
        char *const argv[] = {(char *)"/usr/bin/setpriv",
                              (char *)"--bounding-set=-all",
                              (char *)"--",
                              (char *)SLEEP,
                              (char *)"1003",
                              NULL};
        nb_conn *c;
        pid_t other;
        int fd, n;
        long start;

        /* The directory exists once a helper ran. */
        tu_helper_start(&h, conf);
        tu_helper_stop(&h);
        ck_assert_int_eq(posix_spawn(&other, argv[0], NULL, NULL, argv, NULL), 0);
        for (int i = 0; i < 100 && strcmp(exe_of(other), "/usr/bin/sleep") != 0; i++)
                usleep(10000);
        ck_assert_str_eq(exe_of(other), "/usr/bin/sleep");
        start = stat_field(other, 22);
        /* 1: sleep, as recorded, but started at another time. */
        snprintf(path, sizeof(path), "%s/1.pid", prog_dir);
        n = snprintf(body, sizeof(body),
                     "netbroker-program-1%c%d%c%ld%c0%c/usr/bin/sleep%c" SLEEP "%cnet%c" SLEEP
                     "%c1003%c",
                     0, (int)other, 0, start + 1, 0, 0, 0, 0, 0, 0, 0);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_eq(write(fd, body, (size_t)n), n);
        close(fd);
        /* 2: the right start time, but the process runs another file. */
        snprintf(path, sizeof(path), "%s/2.pid", prog_dir);
        n = snprintf(body, sizeof(body),
                     "netbroker-program-1%c%d%c%ld%c0%c/usr/sbin/dnsmasq%c" SLEEP "%cnet%c" SLEEP
                     "%c1003%c",
                     0, (int)other, 0, start, 0, 0, 0, 0, 0, 0, 0);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_eq(write(fd, body, (size_t)n), n);
        close(fd);

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        ck_assert_uint_eq(listed_count(c), 0);
        ck_assert_uint_eq(tu_stat(c, "programs_adopted"), 0);
        snprintf(path, sizeof(path), "%s/1.pid", prog_dir);
        ck_assert_int_ne(access(path, F_OK), 0);
        snprintf(path, sizeof(path), "%s/2.pid", prog_dir);
        ck_assert_int_ne(access(path, F_OK), 0);
        ck_assert(tu_process_alive(other));
        nb_close(c);
        tu_helper_stop(&h);
        kill(other, SIGKILL);
        waitpid(other, NULL, 0);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* program_dir is uid 4711's (a configuration that put it somewhere others
 * may write): its forged pid file names a root process the helper never
 * started, as uid 4711's program tagged "user". Before, the helper adopted
 * it and uid 4711's ProgramStop by tag killed root's process. Now the
 * directory is refused at start-up: nothing adopted, no program starts
 * (EOPNOTSUPP), root's process runs on. */
START_TEST(test_pid_files_in_a_directory_others_may_write_are_not_trusted)
{
        struct tu_helper h;
        char *conf = config_with(USERS_POLICY);
        char path[PATH_MAX + 32], body[512];
        char *const argv[] = {(char *)"/usr/bin/setpriv",
                              (char *)"--bounding-set=-all",
                              (char *)"--",
                              (char *)SLEEP,
                              (char *)"1004",
                              NULL};
        struct as_reply r;
        pid_t other;
        int fd, n;

        ck_assert_int_eq(mkdir(prog_dir, 0755), 0);
        ck_assert_int_eq(chown(prog_dir, USER_A, USER_A), 0);
        ck_assert_int_eq(posix_spawn(&other, argv[0], NULL, NULL, argv, NULL), 0);
        for (int i = 0; i < 100 && strcmp(exe_of(other), "/usr/bin/sleep") != 0; i++)
                usleep(10000);
        ck_assert_str_eq(exe_of(other), "/usr/bin/sleep");
        snprintf(path, sizeof(path), "%s/1.pid", prog_dir);
        n = snprintf(body, sizeof(body),
                     "netbroker-program-1%c%d%c%ld%c%d%c/usr/bin/sleep%c" SLEEP "%cuser%c" SLEEP
                     "%c1004%c",
                     0, (int)other, 0, stat_field(other, 22), 0, USER_A, 0, 0, 0, 0, 0, 0);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_eq(write(fd, body, (size_t)n), n);
        close(fd);
        ck_assert_int_eq(chown(path, USER_A, USER_A), 0);

        tu_helper_start(&h, conf);
        r = as_uid(&h, USER_A, AS_STOP_TAG, 0);
        printf("forged pid file: uid 4711 stops tag 'user': %d (%u stopped) %s\n", r.status, r.n,
               r.msg);
        ck_assert_uint_eq(r.n, 0);
        usleep(100000);
        ck_assert(tu_process_alive(other));
        r = as_uid(&h, USER_A, AS_START, 0);
        ck_assert_int_eq(r.status, -EOPNOTSUPP);
        tu_helper_stop(&h);
        kill(other, SIGKILL);
        waitpid(other, NULL, 0);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* A start whose pid file would be over what a restarted helper reads
 * (256 KiB) is refused: before, it ran, and after a restart its pid file
 * was taken as stale and removed, leaving it running, unsupervised and
 * counted against no one. sleep sums its arguments, and reads 100,000
 * leading zeros as nothing (the kernel takes at most 128 KiB per
 * argument, 3 of them here). */
START_TEST(test_program_whose_pid_file_would_be_too_long_is_refused)
{
        struct tu_helper h;
        char *conf = config_with(""), *secs = malloc(100005), *zero = malloc(100001);
        const char *argv[] = {SLEEP, secs, zero, zero, NULL};
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_batch *b;
        nb_results *res;
        nb_conn *c;

        ck_assert(secs && zero);
        memset(secs, '0', 100000);
        strcpy(secs + 100000, "1000");
        memset(zero, '0', 100000);
        zero[100000] = '\0';
        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        o.argv = argv;
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_program_start(b, SLEEP, &o), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == -E2BIG, "%d %s", nb_result_status(res, 0),
                      nb_result_message(res, 0));
        ck_assert_msg(strstr(nb_result_message(res, 0), "a pid file holds at most 262144"), "%s",
                      nb_result_message(res, 0));
        nb_results_free(res);
        ck_assert_uint_eq(tu_stat(c, "programs_started"), 0);
        ck_assert_int_eq(tu_children_of(h.pid), 0);
        nb_close(c);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(secs);
        free(zero);
        free(conf);
}
END_TEST

/* ---- a network's programs go with its owner ---- */

static void net_batch_ok(nb_conn *c, nb_batch *b, size_t expect_ok)
{
        nb_results *res = tu_submit(c, b);

        for (size_t i = 0; i < expect_ok; i++)
                ck_assert_msg(nb_result_status(res, i) == 0, "op %zu: %s", i,
                              nb_result_message(res, i));
        nb_results_free(res);
}

static size_t nets_named(nb_conn *c, const char *owner)
{
        nb_batch *b = nb_batch_new();
        nb_results *res;
        size_t n = 0;

        ck_assert_int_eq(nb_batch_net_list(b), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "%s", nb_result_message(res, 0));
        for (size_t k = 0; k < nb_result_net_owner_count(res, 0); k++) {
                nb_net_owner o = NB_NET_OWNER_INIT;
                ck_assert_int_eq(nb_result_net_owner_at(res, 0, k, &o), 0);
                n += strcmp(o.owner, owner) == 0;
        }
        nb_results_free(res);
        return n;
}

/* NetRemove of network "user" stops root's program tagged "user" (root
 * removes it), not root's program of another tag, not uid 4711's program
 * that is tagged "user" too (a tag is not a capability); a NetRemove that
 * does not go through stops nothing. */
START_TEST(test_removing_a_network_stops_its_callers_programs_of_its_tag_only)
{
        static const char *const subnets[] = {"10.66.0.0/24"};
        struct tu_helper h;
        char *conf = config_with(USERS_POLICY);
        nb_net_spec spec = NB_NET_SPEC_INIT;
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        struct as_reply r;
        nb_results *res;
        nb_batch *b;
        nb_conn *c;
        uint64_t mine, other, theirs;
        int mine_pid, other_pid;

        tu_private_netns();
        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        spec.bridge = "nbpbr0"; /* root's rules may come before their bridge */
        spec.subnets = subnets;
        spec.n_subnets = 1;
        spec.mode = NB_NET_ISOLATED;
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_apply(b, "user", &spec), 0);
        net_batch_ok(c, b, 1);
        mine = start_sleep(c, "user", "1000", &mine_pid, NULL);
        other = start_sleep(c, "user2", "1000", &other_pid, NULL);
        r = as_uid(&h, USER_A, AS_START, 0);
        ck_assert_msg(r.status == 0, "%s", r.msg);
        theirs = r.id;

        /* Refused: the batch's second removal finds no such network, so
         * the first is not committed either, and nothing stops. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_remove(b, "user"), 0);
        ck_assert_int_eq(nb_batch_net_remove(b, "nosuchnet"), 0);
        res = tu_submit(c, b);
        ck_assert_int_ne(nb_result_status(res, 0), 0);
        ck_assert_int_eq(nb_result_status(res, 1), -ENOENT);
        nb_results_free(res);
        ck_assert_uint_eq(nets_named(c, "user"), 1);
        ck_assert(tu_process_alive(mine_pid));
        ck_assert(find_listed(c, mine, &p) && p.running);

        /* Removed: the reply comes once root's "user" program is gone. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_net_remove(b, "user"), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "%s", nb_result_message(res, 0));
        ck_assert(!tu_process_alive(mine_pid));
        ck_assert_msg(strstr(nb_result_message(res, 0), "program"), "%s",
                      nb_result_message(res, 0));
        nb_results_free(res);
        ck_assert_uint_eq(nets_named(c, "user"), 0);
        ck_assert(!find_listed(c, mine, &p));
        ck_assert(tu_process_alive(other_pid));
        ck_assert(find_listed(c, other, &p) && p.running);
        ck_assert(find_listed(c, theirs, &p));
        ck_assert(p.running);
        ck_assert_uint_eq(p.uid, USER_A);
        ck_assert(tu_process_alive(p.pid));

        nb_results_free(stop(c, other, NULL));
        nb_results_free(stop(c, theirs, NULL));
        ck_assert_uint_eq(listed_count(c), 0);
        nb_close(c);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* A guest's owner in the same request: one transaction (fw_join.h), sent
 * on the firewall's lane; the reply still waits until the removed
 * network's program is gone, whichever kind's op comes last. */
static void fw_owner(nb_batch *b, const char *owner)
{
        nb_fw_ruleset *rs = nb_fw_ruleset_new();

        ck_assert_ptr_nonnull(rs);
        ck_assert_int_eq(nb_fw_add_no_promisc(rs, "52:54:00:00:00:02"), 0);
        ck_assert_int_eq(nb_batch_firewall_apply(b, owner, "nbpv0", rs, NB_FW_REPLACE), 0);
        nb_fw_ruleset_free(rs);
}

START_TEST(test_a_network_removed_with_a_guests_owner_stops_its_programs_before_the_reply)
{
        static const char *const subnets[] = {"10.67.0.0/24"};
        struct tu_helper h;
        char *conf = config_with(USERS_POLICY);
        nb_net_spec spec = NB_NET_SPEC_INIT;
        nb_results *res;
        nb_batch *b;
        nb_conn *c;
        int pid;

        tu_private_netns();
        free(tu_sh("ip link add nbpv0 type veth peer name nbpv1"));
        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        spec.bridge = "nbpbr1";
        spec.subnets = subnets;
        spec.n_subnets = 1;
        spec.mode = NB_NET_ISOLATED;
        b = nb_batch_new();
        fw_owner(b, "gjoint");
        nb_results_free(tu_submit_ok(c, b));
        for (int fw_last = 1; fw_last >= 0; fw_last--) {
                b = nb_batch_new();
                ck_assert_int_eq(nb_batch_net_apply(b, "joint", &spec), 0);
                net_batch_ok(c, b, 1);
                start_sleep(c, "joint", "1000", &pid, NULL);
                b = nb_batch_new();
                if (!fw_last)
                        fw_owner(b, "gjoint");
                ck_assert_int_eq(nb_batch_net_remove(b, "joint"), 0);
                if (fw_last)
                        ck_assert_int_eq(nb_batch_firewall_remove(b, "gjoint"), 0);
                res = tu_submit(c, b);
                for (size_t i = 0; i < 2; i++)
                        ck_assert_msg(nb_result_status(res, i) == 0, "op %zu: %s", i,
                                      nb_result_message(res, i));
                ck_assert_msg(!tu_process_alive(pid), "the reply came before pid %d was gone", pid);
                ck_assert_msg(strstr(nb_result_message(res, fw_last ? 0 : 1), "program"), "%s",
                              nb_result_message(res, fw_last ? 0 : 1));
                nb_results_free(res);
                ck_assert_uint_eq(nets_named(c, "joint"), 0);
                if (fw_last) {
                        /* The next round removes gjoint: it exists. */
                        b = nb_batch_new();
                        fw_owner(b, "gjoint");
                        nb_results_free(tu_submit_ok(c, b));
                }
        }
        ck_assert_uint_eq(listed_count(c), 0);
        nb_close(c);
        tu_helper_stop(&h);
        remove_prog_dir();
        free(conf);
}
END_TEST

/* ---- dnsmasq: a lease across a bridge ---- */

#define DNSMASQ "/usr/sbin/dnsmasq"

/* A child in a network namespace of its own that waits for a byte on fd,
 * then runs cmd there with sh. */
static pid_t ns_child(int go_fd, const char *cmd)
{
        pid_t pid = fork();
        char c;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (unshare(CLONE_NEWNET) < 0 || read(go_fd, &c, 1) != 1)
                        _exit(98);
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(99);
        }
        return pid;
}

START_TEST(test_dnsmasq_gives_a_dhcp_lease_to_a_client_in_another_namespace)
{
        struct tu_helper h;
        char *conf, *dir, *cmd, lease[PATH_MAX], leases[PATH_MAX], *out;
        const char *argv[16];
        nb_program_opts o = NB_PROGRAM_OPTS_INIT;
        nb_batch *b;
        nb_results *res;
        nb_conn *c;
        int go[2], status;
        pid_t guest;

        if (access(DNSMASQ, X_OK) != 0 || access("/bin/busybox", X_OK) != 0) {
                printf("dnsmasq DHCP test: %s or /bin/busybox missing (apt-get install "
                       "dnsmasq-base busybox-static): not run\n",
                       DNSMASQ);
                ck_abort_msg("dnsmasq-base or busybox-static is not installed (scripts/deps.sh)");
        }
        ck_assert_int_ge(asprintf(&dir, "/tmp/nbtest-dhcp-%d", (int)getpid()), 0);
        free(tu_sh("rm -rf %s && mkdir -p %s", dir, dir));
        snprintf(lease, sizeof(lease), "%s/lease", dir);
        snprintf(leases, sizeof(leases), "%s/dnsmasq.leases", dir);
        /* The helper holds no CAP_NET_BIND_SERVICE (nor SETUID/SETGID, so
         * dnsmasq keeps root: --user=root, --group= empty): in this
         * namespace port 67 is open to it. */
        free(tu_sh("sysctl -qw net.ipv4.ip_unprivileged_port_start=0 && ip link set lo up && "
                   "ip link add nbdbr0 type bridge && ip addr add 10.77.0.1/24 dev nbdbr0 && "
                   "ip link set nbdbr0 up && ip link add nbdh0 type veth peer name nbdg0 && "
                   "ip link set nbdh0 master nbdbr0 up"));
        free(tu_sh("printf '#!/bin/sh\\n[ \"$1\" = bound ] && echo \"$ip\" > %s\\nexit 0\\n' > "
                   "%s/script && chmod 755 %s/script",
                   lease, dir, dir));
        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        ck_assert_int_ge(asprintf(&cmd,
                                  "ip link set lo up && ip link set nbdg0 up && "
                                  "exec busybox udhcpc -i nbdg0 -n -q -t 5 -T 1 -s %s/script",
                                  dir),
                         0);
        guest = ns_child(go[0], cmd);
        close(go[0]);
        usleep(100000);
        free(tu_sh("ip link set nbdg0 netns %d", (int)guest));

        ck_assert_int_ge(asprintf(&conf,
                                  "fd_limit = 96\nprogram_allow = " DNSMASQ "\nprogram_dir = "
                                  "%s/programs\n",
                                  dir),
                         0);
        snprintf(prog_dir, sizeof(prog_dir), "%s/programs", dir);
        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &c), 0);
        {
                static char lf[PATH_MAX + 32];
                size_t n = 0;
                snprintf(lf, sizeof(lf), "--dhcp-leasefile=%s", leases);
                argv[n++] = DNSMASQ;
                argv[n++] = "--keep-in-foreground";
                argv[n++] = "--conf-file=/dev/null";
                argv[n++] = "--user=root";
                argv[n++] = "--group=";
                argv[n++] = "--interface=nbdbr0";
                argv[n++] = "--bind-interfaces";
                argv[n++] = "--except-interface=lo";
                argv[n++] = "--dhcp-range=10.77.0.10,10.77.0.20,1h";
                argv[n++] = "--port=0";
                argv[n++] = lf;
                argv[n++] = "--pid-file=";
                argv[n++] = "--log-facility=-";
                argv[n] = NULL;
        }
        o.argv = argv;
        o.tag = "nbdnet";
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_program_start(b, DNSMASQ, &o), 0);
        res = tu_submit(c, b);
        ck_assert_msg(nb_result_status(res, 0) == 0, "%s", nb_result_message(res, 0));
        nb_results_free(res);
        usleep(300000);
        ck_assert_int_eq(write(go[1], "g", 1), 1);
        close(go[1]);
        ck_assert_int_eq(waitpid(guest, &status, 0), guest);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "udhcpc got no lease (status %d)", status);
        out = tu_sh("cat %s", lease);
        printf("dnsmasq DHCP test: the guest namespace got %s", out);
        ck_assert_msg(strncmp(out, "10.77.0.", 8) == 0, "lease '%s'", out);
        free(out);
        out = tu_sh("cat %s", leases);
        ck_assert_msg(strstr(out, "10.77.0."), "dnsmasq's lease file: '%s'", out);
        free(out);
        res = stop(c, 0, "nbdnet");
        ck_assert_int_eq(nb_result_status(res, 0), 0);
        nb_results_free(res);
        nb_close(c);
        tu_helper_stop(&h);
        /* nbdh0 went with its peer's namespace. */
        free(tu_sh("ip link del nbdbr0; rm -rf %s", dir));
        free(cmd);
        free(conf);
        free(dir);
}
END_TEST

/* ---- what a caller other than root may give a program ---- */

/* What dnsmasq needs on a bridge of the caller's: the arguments a caller
 * other than root may give (netbrokerd(8), SUPERVISED PROGRAMS). */
#define USER_DNSMASQ                                                                               \
        DNSMASQ, "--keep-in-foreground", "--conf-file=/dev/null", "--pid-file", "--leasefile-ro",  \
                "--bind-dynamic", "--interface=nbu0", "--port=0", "--user=root", "--group="

/* Each runs or writes something as root, or serves where the caller owns
 * nothing, or leaves supervision; ARGV_DIR is the caller's directory. */
#define ARGV_DIR "/tmp/nbtest-argv"
static const char *const hostile_argv[][16] = {
        {USER_DNSMASQ, "--conf-script=" ARGV_DIR "/evil.sh", NULL},
        {USER_DNSMASQ, "--dhcp-script=" ARGV_DIR "/evil.sh", NULL},
        {USER_DNSMASQ, "--dhcp-luascript=" ARGV_DIR "/evil.lua", NULL},
        {USER_DNSMASQ, "--conf-dir=" ARGV_DIR, NULL},
        {USER_DNSMASQ, "--conf-file=/etc/shadow", NULL},
        {USER_DNSMASQ, "-C", "/etc/shadow", NULL},
        {USER_DNSMASQ, "--pid-file=" ARGV_DIR "/victim", NULL},
        {USER_DNSMASQ, "--dhcp-leasefile=" ARGV_DIR "/victim", NULL},
        {USER_DNSMASQ, "--log-facility=" ARGV_DIR "/victim", NULL},
        {USER_DNSMASQ, "--dumpfile=" ARGV_DIR "/victim", NULL},
        {USER_DNSMASQ, "--enable-tftp", "--tftp-root=/", NULL},
        {USER_DNSMASQ, "--nftset=/example.com/4#inet#netbroker#s", NULL},
        {USER_DNSMASQ, "--interface=lo", NULL},
        {USER_DNSMASQ, "--listen-address=127.0.0.1", NULL},
        {USER_DNSMASQ, "--interface", "lo", NULL},
        /* A pattern: dnsmasq, as root, would serve every nbu*, anyone's. */
        {USER_DNSMASQ, "--interface=nbu0,nbu*", NULL},
        {USER_DNSMASQ, "--", "--conf-script=" ARGV_DIR "/evil.sh", NULL},
        /* Without these it forks away from supervision, or writes the
         * system's pid and lease files, or listens on every interface. */
        {DNSMASQ, "--conf-file=/dev/null", "--pid-file", "--leasefile-ro", "--bind-interfaces",
         "--interface=nbu0", "--port=0", NULL},
        {DNSMASQ, "--keep-in-foreground", "--leasefile-ro", "--bind-interfaces", "--interface=nbu0",
         "--port=0", NULL},
        {DNSMASQ, "--keep-in-foreground", "--pid-file", "--bind-interfaces", "--interface=nbu0",
         "--port=0", NULL},
        {DNSMASQ, "--keep-in-foreground", "--pid-file", "--leasefile-ro", "--interface=nbu0",
         "--port=0", NULL},
        {DNSMASQ, "--keep-in-foreground", "--pid-file", "--leasefile-ro", "--bind-interfaces",
         "--port=0", NULL},
        /* A program without argument rules takes none from such a caller. */
        {SLEEP, "1000", NULL},
        /* 555 MB of cache as root (dnsmasq takes up to 5,000,000). */
        {USER_DNSMASQ, "--cache-size=100000000", NULL},
        /* dnsmasq echoes the value on the helper's standard error: a line
         * of its own that reads as the helper's audit. */
        {USER_DNSMASQ,
         "--group=\nnetbrokerd[notice] audit: uid=0 pid=1 op=link_delete object=eth0 status=0 "
         "result=done",
         NULL},
        /* A C1 control (CSI), and an escape: a terminal's. */
        {USER_DNSMASQ,
         "--domain=\xc2\x9b"
         "2J",
         NULL},
        {USER_DNSMASQ, "--domain=\x1b[2J", NULL},
};

#define ARGV_POLICY                                                                                \
        "program_allow = " DNSMASQ "\n"                                                            \
        "[policy uid 4711]\n"                                                                      \
        "ops = program_start program_stop bridge_create link_delete\n"                             \
        "name_prefixes = nbu\n"                                                                    \
        "programs = " DNSMASQ " " SLEEP "\n"

/* A caller other than root whose policy grants dnsmasq: before, each of
 * hostile_argv started (evil.sh wrote "0": uid 0 ran the caller's
 * script). Now each is refused with EPERM naming what, nothing starts,
 * no file is written, and the arguments dnsmasq needs on the caller's own
 * bridge are accepted. */
START_TEST(test_user_program_arguments_cannot_run_or_write_anything_as_root)
{
        static const char *const good[] = {USER_DNSMASQ, NULL};
        struct tu_helper h;
        char *conf = config_with(ARGV_POLICY), *victim;
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        struct as_reply r;
        nb_conn *root;
        uint64_t id;

        if (access(DNSMASQ, X_OK) != 0)
                ck_abort_msg("dnsmasq-base is not installed (scripts/deps.sh)");
        tu_private_netns();
        free(tu_sh("rm -rf " ARGV_DIR " && mkdir " ARGV_DIR " && "
                   "printf '#!/bin/sh\\nid -u > " ARGV_DIR "/pwned\\n' > " ARGV_DIR
                   "/evil.sh && chmod 777 " ARGV_DIR " && "
                   "chmod 755 " ARGV_DIR "/evil.sh && echo intact > " ARGV_DIR "/victim && "
                   "chown 4711 " ARGV_DIR " " ARGV_DIR "/evil.sh"));
        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &root), 0);
        as_argv.bridge = "nbu0";
        as_argv.path = NULL;
        r = as_uid(&h, USER_A, AS_START_ARGV, 0);
        ck_assert_msg(r.status == 0, "bridge: %d %s", r.status, r.msg);
        for (size_t i = 0; i < sizeof(hostile_argv) / sizeof(*hostile_argv); i++) {
                as_argv.bridge = NULL;
                as_argv.path = hostile_argv[i][0];
                as_argv.argv = hostile_argv[i];
                r = as_uid(&h, USER_A, AS_START_ARGV, 0);
                printf("program arguments: case %zu: %d %s\n", i, r.status, r.msg);
                ck_assert_msg(r.status == -EPERM, "case %zu: %d %s", i, r.status, r.msg);
                ck_assert_msg(strstr(r.msg, "uid 4711 may not"), "case %zu: %s", i, r.msg);
        }
        /* Nor can the caller make an interface whose name is a pattern,
         * which it would own (before: a bridge "nbu*" was made, and its
         * dnsmasq on --interface=nbu* served root's nbu interfaces too),
         * nor one of bytes that are no printable ASCII. */
        for (size_t i = 0; i < 3; i++) {
                static const char *const bad[] = {"nbu*", "nbu[0]",
                                                  "nbu\xc2\x9b"
                                                  "2J"};
                as_argv.bridge = bad[i];
                as_argv.path = NULL;
                r = as_uid(&h, USER_A, AS_START_ARGV, 0);
                printf("program arguments: a bridge named '%s': %d %s\n", i < 2 ? bad[i] : "(C1)",
                       r.status, r.msg);
                ck_assert_msg(r.status == -EINVAL && strstr(r.msg, "printable ASCII"), "%d %s",
                              r.status, r.msg);
        }
        usleep(200000);
        ck_assert_uint_eq(tu_stat(root, "programs_started"), 0);
        ck_assert_int_eq(tu_children_of(h.pid), 0);
        ck_assert_int_ne(access(ARGV_DIR "/pwned", F_OK), 0);
        victim = tu_sh("cat " ARGV_DIR "/victim");
        ck_assert_str_eq(victim, "intact\n");
        free(victim);

        /* What dnsmasq needs, on the caller's bridge. */
        as_argv.bridge = NULL;
        as_argv.path = DNSMASQ;
        as_argv.argv = good;
        free(tu_sh("ip addr add 10.78.0.1/24 dev nbu0 && ip link set nbu0 up"));
        r = as_uid(&h, USER_A, AS_START_ARGV, 0);
        ck_assert_msg(r.status == 0, "%d %s", r.status, r.msg);
        id = r.id;
        usleep(300000);
        ck_assert(find_listed(root, id, &p));
        ck_assert_msg(p.running, "dnsmasq exited: %d", p.exit_code);
        /* Its interface stays while the program serves it: deleted, the
         * next nbu0 (root's) would be served by it (--bind-dynamic). */
        r = as_uid(&h, USER_A, AS_DELETE_NBU0, 0);
        ck_assert_int_eq(r.status, -EBUSY);
        ck_assert_msg(strstr(r.msg, "serves nbu0: stop it first"), "%s", r.msg);
        r = as_uid(&h, USER_A, AS_STOP_ID, id);
        ck_assert_msg(r.status == 0, "%d %s", r.status, r.msg);
        r = as_uid(&h, USER_A, AS_DELETE_NBU0, 0);
        ck_assert_msg(r.status == 0, "%d %s", r.status, r.msg);
        nb_close(root);
        tu_helper_stop(&h);
        free(tu_sh("rm -rf " ARGV_DIR));
        remove_prog_dir();
        free(conf);
}
END_TEST

/* ---- a program's interface that goes ---- */

#define GONE_DIR "/tmp/nbtest-gone"
/* Stands in for dnsmasq: it "serves" the interface its --interface=
 * names as long as it runs (it notes the ifindex of whatever has that
 * name, every 50 ms), and ignores SIGTERM, as a program busy elsewhere
 * may for a while: only SIGKILL ends it. */
static const char *const gone_argv[] = {
        "/bin/sh",
        "-c",
        "trap '' TERM; i=${1#--interface=}; while :; do ip -o link show dev \"$i\" 2>/dev/null "
        "| cut -d: -f1 >> " GONE_DIR "/seen; sleep 0.05; done",
        "fake-dnsmasq",
        "--interface=nbf0",
        NULL};

#define GONE_POLICY                                                                                \
        "[policy uid 4711]\n"                                                                      \
        "ops = program_start program_stop veth_create link_delete\n"                               \
        "name_prefixes = nbf\n"                                                                    \
        "programs = /bin/sh\n"                                                                     \
        "program_args = any\n"

/* Whether every ifindex the fake noted is `ifindex` (and it noted one). */
static bool only_served(const char *ifindex)
{
        char *seen = tu_sh("sort -u " GONE_DIR "/seen | grep -v '^$' | tr '\\n' ' '"), want[32];
        bool only;

        snprintf(want, sizeof(want), "%s ", ifindex);
        only = strcmp(seen, want) == 0;
        if (!only)
                printf("the program served ifindexes '%s', not only %s\n", seen, ifindex);
        free(seen);
        return only;
}

/* A helper with GONE_POLICY, and uid 4711's veth nbf0/nbf1 with the fake
 * serving nbf0 (it has noted nbf0 once); the program's id and listing. */
static uint64_t start_gone_program(struct tu_helper *h, const char *conf, nb_program_info *p)
{
        struct as_reply r;
        nb_conn *root;

        tu_private_netns();
        free(tu_sh("rm -rf " GONE_DIR " && mkdir " GONE_DIR));
        tu_helper_start(h, conf);
        as_argv.link = "nbf0";
        as_argv.peer = "nbf1";
        r = as_uid(h, USER_A, AS_VETH, 0);
        ck_assert_msg(r.status == 0, "veth: %d %s", r.status, r.msg);
        as_argv.bridge = NULL;
        as_argv.path = "/bin/sh";
        as_argv.argv = gone_argv;
        r = as_uid(h, USER_A, AS_START_ARGV, 0);
        ck_assert_msg(r.status == 0, "start: %d %s", r.status, r.msg);
        for (int i = 0; i < 100 && access(GONE_DIR "/seen", F_OK) != 0; i++)
                usleep(20000);
        ck_assert_int_eq(nb_connect(h->sock, &root), 0);
        ck_assert(find_listed(root, r.id, p) && p->running);
        nb_close(root);
        return r.id;
}

/* What the gone tests leave. */
static void end_gone_program(struct tu_helper *h, char *conf)
{
        tu_helper_stop(h);
        free(tu_sh("rm -rf " GONE_DIR));
        remove_prog_dir();
        free(conf);
}

/* uid 4711's program serves its veth end nbf0; the guard refuses to
 * delete nbf0, but deleting the peer nbf1 takes nbf0 with it. Before, the
 * program ran on, and served root's nbf0 made next (the review's F4:
 * uid 1001's root-run dnsmasq bound root's 10.78.0.1). Now the helper
 * stops it as the interface goes (logged, counted, listed exited with
 * gone_link), and root's create of nbf0 right after the deletion's reply
 * comes only once it is dead (SIGKILL, its SIGTERM being ignored): the
 * new nbf0 is never served. */
START_TEST(test_a_program_whose_interface_goes_is_stopped_before_the_name_comes_back)
{
        char *conf = config_with(GONE_POLICY), *first, *out;
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        struct tu_helper h;
        struct as_reply r;
        nb_batch *b;
        nb_conn *root;
        uint64_t id;
        int pid = 0;

        id = start_gone_program(&h, conf, &p);
        pid = p.pid;
        ck_assert_int_eq(nb_connect(h.sock, &root), 0);
        first = tu_sh("ip -o link show dev nbf0 | cut -d: -f1 | tr -d '\\n'");
        ck_assert(only_served(first));

        r = as_uid(&h, USER_A, AS_DELETE_LINK, 0);
        ck_assert_int_eq(r.status, -EBUSY);
        as_argv.link = "nbf1";
        r = as_uid(&h, USER_A, AS_DELETE_LINK, 0);
        ck_assert_msg(r.status == 0, "delete the peer: %d %s", r.status, r.msg);
        /* Root makes the name again at once. */
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_bridge_create(b, "nbf0"), 0);
        nb_results_free(tu_submit_ok(root, b));
        ck_assert_msg(!tu_process_alive(pid),
                      "uid 4711's program (pid %d) runs on after root "
                      "made nbf0 again",
                      pid);
        usleep(300000);
        ck_assert(only_served(first));
        ck_assert_uint_eq(tu_stat(root, "programs_link_gone"), 1);
        /* Listed, exited, until its caller stops it. */
        ck_assert(find_listed(root, id, &p));
        ck_assert(!p.running);
        ck_assert_int_eq(p.signal, SIGKILL);
        ck_assert_str_eq(p.gone_interface, "nbf0"); /* why it stopped */
        out = tu_sh("%s --socket %s --json program list", NB_TEST_CTL, h.sock);
        ck_assert_msg(strstr(out, "\"gone_interface\":\"nbf0\""), "%s", out);
        free(out);
        out = tu_sh("%s --socket %s program list", NB_TEST_CTL, h.sock);
        ck_assert_msg(strstr(out, "(stopped by the helper: interface nbf0 went away)"), "%s", out);
        free(out);
        r = as_uid(&h, USER_A, AS_LIST, 0);
        ck_assert_uint_eq(r.n, 1);
        r = as_uid(&h, USER_A, AS_STOP_ID, id);
        ck_assert_msg(r.status == 0, "%d %s", r.status, r.msg);
        ck_assert(!find_listed(root, id, &p));

        free(first);
        nb_close(root);
        end_gone_program(&h, conf);
}
END_TEST

/* The same when the helper read no notification of it: stopped (SIGSTOP)
 * while thousands of link changes come (its monitor socket overflows), then
 * the peer goes and root makes nbf0 again outside the helper. Before, the
 * rebuild that follows lost notifications took the new nbf0 for the old
 * one, and the program served it as long as it ran. Now the rebuild tells
 * what went meanwhile (a name gone, or another ifindex's now), and the
 * program is stopped, dead by the time root's next create answers. */
START_TEST(test_a_program_whose_interface_went_while_notifications_were_lost_is_stopped)
{
        char *conf = config_with(GONE_POLICY), *out;
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        struct tu_helper h;
        nb_batch *b;
        nb_conn *root;
        uint64_t id;

        id = start_gone_program(&h, conf, &p);
        ck_assert_int_eq(nb_connect(h.sock, &root), 0);

        ck_assert_int_eq(kill(h.pid, SIGSTOP), 0);
        /* The socket full first (20000 changes of one bridge's alias: as
         * many devices would hold the rtnl lock for a minute when the
         * namespace goes), so the deletion's notification is lost. */
        out = tu_sh("ip link add nbfz type bridge && ip link set nbfz up && for i in $(seq 0 "
                    "19999); do echo link set "
                    "nbfz alias a$i; done | ip -batch - && ip link del nbf1 && "
                    "ip link add nbf0 type bridge && echo ok");
        ck_assert_str_eq(out, "ok\n");
        free(out);
        ck_assert_int_eq(kill(h.pid, SIGCONT), 0);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_bridge_create(b, "nbf9"), 0);
        nb_results_free(tu_submit_ok(root, b));
        ck_assert_msg(!tu_process_alive(p.pid),
                      "uid 4711's program (pid %d) runs on, on root's nbf0", p.pid);
        ck_assert_uint_eq(tu_stat(root, "programs_link_gone"), 1);
        /* Dead at the reply; the loop reaps it right after. */
        for (int i = 0; i < 50 && find_listed(root, id, &p) && p.running; i++)
                usleep(20000);
        ck_assert(find_listed(root, id, &p) && !p.running);

        nb_close(root);
        end_gone_program(&h, conf);
}
END_TEST

/* An adopted program whose interface went while no helper ran: the peer
 * of uid 4711's served nbf0 is deleted between two helpers, and root then
 * makes nbf0 through the new one. Before, the new helper adopted the
 * program and it served root's nbf0. Now the start-up stops it, and
 * root's create answers once it is dead. */
START_TEST(test_an_adopted_program_whose_interface_went_meanwhile_is_stopped)
{
        char *conf = config_with(GONE_POLICY);
        nb_program_info p = NB_PROGRAM_INFO_INIT;
        struct tu_helper h;
        nb_batch *b;
        nb_conn *root;
        uint64_t id;
        int pid;

        id = start_gone_program(&h, conf, &p);
        pid = p.pid;
        kill_helper(&h);
        ck_assert(tu_process_alive(pid));
        free(tu_sh("ip link del nbf1"));

        tu_helper_start(&h, conf);
        ck_assert_int_eq(nb_connect(h.sock, &root), 0);
        ck_assert_uint_eq(tu_stat(root, "programs_adopted"), 1);
        ck_assert_uint_eq(tu_stat(root, "programs_link_gone"), 1);
        b = nb_batch_new();
        ck_assert_int_eq(nb_batch_bridge_create(b, "nbf0"), 0);
        nb_results_free(tu_submit_ok(root, b));
        ck_assert_msg(!tu_process_alive(pid), "uid 4711's adopted program (pid %d) runs on", pid);
        for (int i = 0; i < 50 && find_listed(root, id, &p) && p.running; i++)
                usleep(20000);
        ck_assert(find_listed(root, id, &p) && !p.running);
        ck_assert_str_eq(p.gone_interface, "nbf0");

        nb_close(root);
        end_gone_program(&h, conf);
}
END_TEST

Suite *program_suite(void)
{
        Suite *s = suite_create("program");
        TCase *tc = tcase_create("program");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_program_runs_in_its_own_session_and_stop_leaves_nothing);
        tcase_add_test(tc, test_stop_takes_the_programs_whole_process_group);
        tcase_add_test(tc, test_program_killed_from_outside_is_reported_with_its_signal);
        tcase_add_test(tc, test_program_not_on_program_allow_is_refused);
        tcase_add_test(tc, test_other_unprivileged_caller_cannot_stop_or_see_it);
        tcase_add_test(tc, test_programs_per_uid_are_limited_and_a_repeated_start_is_the_same);
        tcase_add_test(tc, test_other_uids_leave_root_its_reserved_program_slot);
        tcase_add_test(tc, test_exec_is_refused_while_a_program_holds_the_only_slot);
        tcase_add_test(tc, test_program_is_adopted_after_a_helper_restart_not_started_twice);
        tcase_add_test(tc, test_pid_file_of_an_unrelated_process_is_not_adopted);
        tcase_add_test(tc, test_a_program_whose_file_was_replaced_is_still_adopted);
        tcase_add_test(tc, test_dnsmasq_gives_a_dhcp_lease_to_a_client_in_another_namespace);
        tcase_add_test(tc, test_removing_a_network_stops_its_callers_programs_of_its_tag_only);
        tcase_add_test(
                tc, test_a_network_removed_with_a_guests_owner_stops_its_programs_before_the_reply);
        tcase_add_test(tc, test_pid_files_in_a_directory_others_may_write_are_not_trusted);
        tcase_add_test(tc, test_program_whose_pid_file_would_be_too_long_is_refused);
        tcase_add_test(tc, test_user_program_arguments_cannot_run_or_write_anything_as_root);
        tcase_add_test(tc,
                       test_a_program_whose_interface_goes_is_stopped_before_the_name_comes_back);
        tcase_add_test(
                tc, test_a_program_whose_interface_went_while_notifications_were_lost_is_stopped);
        tcase_add_test(tc, test_an_adopted_program_whose_interface_went_meanwhile_is_stopped);
        suite_add_tcase(s, tc);
        return s;
}
