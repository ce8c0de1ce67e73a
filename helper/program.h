// SPDX-License-Identifier: LGPL-2.1-or-later
/* Supervised programs: long-running children (dnsmasq, radvd) the helper
 * starts, watches and stops, and finds again after a restart.
 *
 * Each runs in a session of its own (setsid: it leads its own process
 * group), with stdin and stdout on /dev/null and stderr on the helper's own
 * or a configured file. The helper holds a pidfd for it in the event loop's
 * epoll: its exit wakes the loop, which kills what is left of its process
 * group while the leader is still a zombie (its id cannot be reused then)
 * and reaps it with waitid(P_PIDFD). Nothing here blocks: a stop sends
 * SIGTERM and arms a timer for SIGKILL.
 *
 * Each running program has a pid file of the helper's own in the program
 * directory (ID.pid: the pid, its start time from field 22 of
 * /proc/PID/stat, the caller's uid, the file that runs, the path asked for,
 * the tag and the argv, NUL-separated). At start-up, nbd_programs_init()
 * adopts each program whose pid is alive with the same start time and
 * whose /proc/PID/exe is that file; other pid files are stale and removed.
 * An adopted program is not the helper's child: its exit is seen through
 * its pidfd, but its status is not (init reaps it).
 *
 * All state is the loop thread's. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "loop.h"

#define NBD_PROGRAM_DEFAULT_DIR "/run/netbroker/programs"
#define NBD_PROGRAM_DEFAULT_GRACE_MS 5000
#define NBD_PROGRAM_MAX_GRACE_MS 60000

struct nbd_program_spec {
        const char *path; /* as asked for (on program_allow) */
        const char *file; /* what runs: path's realpath, checked at start-up */
        char *const *argv; /* NULL-terminated; argv[0] is path */
        char *const *envp; /* NULL-terminated */
        const char *tag; /* "" for none */
        uid_t uid; /* the caller it runs for (counted per uid, not run as) */
        const char *log_path; /* stderr goes there (appended); NULL: the helper's */
};

struct nbd_program_info {
        uint64_t id;
        pid_t pid;
        char *path, *file, *tag;
        char **argv; /* NULL-terminated */
        uid_t uid;
        bool running, adopted, stopping;
        bool status_unknown; /* exited while adopted: no status to read */
        int exit_code, signal;
        /* The interface it served that went away, for which the helper
         * stopped it (nbd_programs_link_gone); "" for none. */
        char gone_link[IFNAMSIZ];
};

struct nbd_program;

/* Start-up: remember the loop and the pid-file directory (made 0700 if
 * missing), and adopt the programs its pid files name. Returns 0 or -errno
 * (the directory cannot be made; -EPERM: it is not a directory of the
 * helper's uid that no one else may write, so its pid files could be
 * anyone's); a pid file that cannot be read is removed with a warning. */
int nbd_programs_init(struct nbd_loop *l, const char *dir);
/* Shutdown: stop watching (the programs go on running, their pid files
 * stay for the next helper) and free the list. */
void nbd_programs_shutdown(void);

/* The running program of uid with the same path, tag and argv, or NULL. */
struct nbd_program *nbd_program_find_same(const struct nbd_program_spec *s);
/* Start one. Returns 0 and *ret, or -errno with e set; nothing is left
 * running on error. */
int nbd_program_start(const struct nbd_program_spec *s, struct nbd_program **ret,
                      struct nbd_err *e);

struct nbd_program *nbd_program_by_id(uint64_t id);
/* Programs in ascending id: NULL gives the first. */
struct nbd_program *nbd_program_next(struct nbd_program *prev);
const struct nbd_program_info *nbd_program_info(const struct nbd_program *p);

/* A stop waiter: fn(data) runs from the loop once the program has exited
 * (and, stopped, is gone from the list). */
struct nbd_program_waiter {
        void (*fn)(void *data);
        void *data;
        struct nbd_program_waiter *next;
};
/* Stop a running program: SIGTERM to its process group, SIGKILL after
 * grace_ms; w (the caller's, kept until it runs or is cancelled) is told
 * when it has gone. Once exited, it leaves the list. */
void nbd_program_stop(struct nbd_program *p, unsigned grace_ms, struct nbd_program_waiter *w);
/* Forget w (its owner goes away first); the stop goes on. */
void nbd_program_cancel_wait(struct nbd_program_waiter *w);
/* An exited program leaves the list (ProgramStop on it). */
void nbd_program_forget(struct nbd_program *p);

/* Whether i serves interface name: an argument --interface=IF[,IF...]
 * (dnsmasq's) names it. */
bool nbd_program_serves(const struct nbd_program_info *i, const char *name);

/* Interface `name` went away (deleted by anyone, its veth peer deleted, a
 * tap's last fd closed, moved to another namespace, renamed: link.c's
 * nbd_links_on_gone_now). Each running program of a caller other than
 * root that serves it is stopped as nbd_program_stop() stops it, and the
 * reason logged: it could only serve the next interface of that name,
 * which may be anyone's (dnsmasq's --bind-dynamic binds it as soon as it
 * has an address). Unlike a ProgramStop, it stays listed once exited,
 * gone_link set, until its caller's ProgramStop. Signals and logs only:
 * safe in the middle of a netlink read. */
void nbd_programs_link_gone(const char *name);
/* Before an interface is made (link.c's nbd_links_before_create): the
 * programs stopped for a gone interface that still run get SIGKILL, and
 * are waited for, up to a second, so that none can serve what the create
 * makes. 0, or -EBUSY (e set) when one still runs then. */
int nbd_programs_fence(struct nbd_err *e);
/* Start-up: an adopted program of a caller other than root whose
 * interface went while no helper ran, or is another uid's now (made for
 * it since), is stopped as nbd_programs_link_gone() stops it. owner_of
 * is link.h's nbd_link_owner over links. */
void nbd_programs_sweep_links(int (*owner_of)(void *links, const char *name, uid_t *ret),
                              void *links);

/* Running programs, all and of uid (they hold uid's spawn slots). */
unsigned nbd_programs_running(void);
unsigned nbd_programs_running_of(uid_t uid);
