// SPDX-License-Identifier: LGPL-2.1-or-later
/* The arguments a caller other than root may give a supervised program.
 *
 * A supervised program runs as uid 0 with the helper's capabilities and
 * whatever arguments its caller gives: dnsmasq's --conf-script and
 * --dhcp-script run a file of the caller's choosing, --pid-file and
 * --dhcp-leasefile write any file, --conf-file reads one. So for a caller
 * other than root the arguments are checked against a fixed allow-list per
 * program, keyed by the name of the file that runs (dnsmasq, radvd): long
 * options only, each either a flag or --name=VALUE with its value checked,
 * and options a program must have to stay supervised and off the system's
 * files. A program without such a list takes no arguments from that
 * caller. netbrokerd(8), SUPERVISED PROGRAMS, lists them. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* Is ifname an interface of the caller's (made for it, or made by an
 * earlier op of its batch)? 0, or -errno with e set. */
typedef int (*nbd_program_owned_fn)(void *data, const char *ifname, struct nbd_err *e);

/* argv[1] .. argv[n_argv - 1] (argv[0] is the program's name, checked by
 * nbd_exec_check_args) for the program whose file is `file`, given by
 * uid: 0, or -EPERM (or owned's error) with e set. */
int nbd_program_args_check(const char *file, char *const *argv, size_t n_argv, uid_t uid,
                           nbd_program_owned_fn owned, void *data, struct nbd_err *e);

/* Every byte of argv[0 .. n_argv - 1] and env[0 .. n_env - 1] given by a
 * caller other than root is printable ASCII (0x20-0x7e): a program echoes
 * its arguments on its standard error, which is the helper's log, and a
 * newline there would start a line that reads as the helper's own (an
 * audit line), an escape sequence would rewrite a terminal. 0, or -EPERM
 * with e set. */
int nbd_program_bytes_check(char *const *argv, size_t n_argv, char *const *env, size_t n_env,
                            uid_t uid, struct nbd_err *e);
