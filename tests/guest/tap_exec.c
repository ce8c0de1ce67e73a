// SPDX-License-Identifier: LGPL-2.1-or-later
/* guest-tap-exec: make a guest's interface through netbrokerd, as a
 * libvirt-like daemon does, and run QEMU on its fd. The guest VLAN test
 * (tests/py/guest_vlan.py) starts its guest with it.
 *
 * usage: guest-tap-exec HELPER tap NAME -- PROGRAM [ARG...]
 *        guest-tap-exec HELPER macvtap NAME PARENT MAC -- PROGRAM [ARG...]
 *
 * Spawns HELPER, sends one TapCreate (vnet headers, not persistent) or
 * MacvtapCreate (bridge mode, vnet headers), closes the connection and
 * execs PROGRAM with the interface's fd open under its own number: every
 * "@FD@" in an ARG is replaced by that number. The interface lives as long
 * as PROGRAM holds the fd (a tap) or until it is deleted (a macvtap).
 * Exit status (when nothing was exec'd): 1 the helper refused the op, 2
 * usage, 3 the helper could not be reached, 127 PROGRAM could not be run. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netbroker.h"

/* ARG with every "@FD@" replaced by fd (a new string), or NULL. */
static char *subst_fd(const char *arg, int fd)
{
        char num[16], *out, *o;
        const char *p;
        size_t n = 0;

        snprintf(num, sizeof(num), "%d", fd);
        for (p = arg; (p = strstr(p, "@FD@")); p += 4)
                n++;
        out = malloc(strlen(arg) + n * strlen(num) + 1);
        if (!out)
                return NULL;
        for (o = out, p = arg; *p;) {
                if (strncmp(p, "@FD@", 4) == 0) {
                        o = stpcpy(o, num);
                        p += 4;
                } else {
                        *o++ = *p++;
                }
        }
        *o = '\0';
        return out;
}

static int make_link(const char *helper, char **spec, int nspec, int *ret_fd)
{
        nb_tap_opts o = {.size = sizeof(nb_tap_opts), .vnet_hdr = true};
        nb_conn *c = NULL;
        nb_batch *b = NULL;
        nb_results *res = NULL;
        int r, ret = 3;

        r = nb_spawn(helper, NULL, &c);
        if (r < 0) {
                fprintf(stderr, "guest-tap-exec: spawn %s: %s %s\n", helper, strerror(-r),
                        nb_last_error());
                goto out;
        }
        ret = 1;
        b = nb_batch_new();
        if (!b)
                goto out;
        if (nspec == 2 && strcmp(spec[0], "tap") == 0)
                r = nb_batch_tap_create(b, spec[1], &o);
        else if (nspec == 4 && strcmp(spec[0], "macvtap") == 0)
                r = nb_batch_macvtap_create(b, spec[1], spec[2], NB_MACVLAN_BRIDGE, spec[3], true);
        else
                r = -EINVAL;
        if (r < 0) {
                fprintf(stderr, "guest-tap-exec: %s %s: %s\n", spec[0], nspec > 1 ? spec[1] : "",
                        strerror(-r));
                ret = 2;
                goto out;
        }
        r = nb_submit(c, b, &res);
        if (r < 0) {
                fprintf(stderr, "guest-tap-exec: submit: %s %s\n", strerror(-r), nb_conn_error(c));
                ret = 3;
                goto out;
        }
        if (nb_result_status(res, 0) < 0) {
                fprintf(stderr, "guest-tap-exec: %s %s: %s: %s\n", spec[0], spec[1],
                        strerror(-nb_result_status(res, 0)), nb_result_message(res, 0));
                goto out;
        }
        *ret_fd = nb_result_take_fd(res, 0, 0);
        ret = *ret_fd >= 0 ? 0 : 1;
out:
        nb_results_free(res);
        nb_batch_free(b);
        if (c)
                nb_close(c);
        return ret;
}

int main(int argc, char **argv)
{
        int dash = 0, fd = -1, r;

        for (int i = 1; i < argc && !dash; i++)
                if (strcmp(argv[i], "--") == 0)
                        dash = i;
        if (argc < 5 || dash < 4 || dash + 1 >= argc) {
                fprintf(stderr, "usage: guest-tap-exec HELPER tap NAME -- PROGRAM [ARG...]\n"
                                "       guest-tap-exec HELPER macvtap NAME PARENT MAC -- "
                                "PROGRAM [ARG...]\n");
                return 2;
        }
        r = make_link(argv[1], &argv[2], dash - 2, &fd);
        if (r)
                return r;
        if (fcntl(fd, F_SETFD, 0) < 0) {
                perror("guest-tap-exec: fcntl");
                return 1;
        }
        for (int i = dash + 1; i < argc; i++) {
                argv[i] = subst_fd(argv[i], fd);
                if (!argv[i]) {
                        fprintf(stderr, "guest-tap-exec: out of memory\n");
                        return 1;
                }
        }
        fprintf(stderr, "guest-tap-exec: %s %s, fd %d\n", argv[2], argv[3], fd);
        execvp(argv[dash + 1], &argv[dash + 1]);
        fprintf(stderr, "guest-tap-exec: %s: %s\n", argv[dash + 1], strerror(errno));
        return 127;
}
