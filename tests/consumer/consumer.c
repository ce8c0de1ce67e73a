// SPDX-License-Identifier: LGPL-2.1-or-later
/* A program outside the tree: built only from what `cmake --install` put in
 * a prefix, found through pkg-config. It spawns the installed helper, pings
 * it, runs `ip -V` through it and creates a tap, whose fd it checks is a
 * tun device named as the result says. */
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netbroker.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void)
{
        const char *ip_argv[] = {"ip", "-V", NULL};
        nb_conn *c = NULL;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_exec_result e = NB_EXEC_RESULT_INIT;
        struct ifreq ifr;
        int r, fd;

        r = nb_spawn(NULL, NULL, &c); /* NETBROKERD names the installed helper */
        if (r < 0) {
                fprintf(stderr, "consumer: nb_spawn: %s: %s\n", strerror(-r), nb_last_error());
                return 1;
        }
        nb_batch_ping(b);
        nb_batch_exec(b, "/usr/sbin/ip", ip_argv, NULL, NULL, 0, 0);
        nb_batch_tap_create(b, "cons%d", NULL);
        r = nb_submit(c, b, &res);
        if (r < 0 || nb_results_first_error(res) != -1 || nb_result_exec(res, 1, &e) < 0) {
                fprintf(stderr, "consumer: submit failed: %s\n",
                        r < 0 ? strerror(-r)
                              : nb_result_message(res, (size_t)nb_results_first_error(res)));
                return 1;
        }
        printf("consumer: helper answered; ip -V said: %.*s", (int)e.out_len, e.out);
        fd = nb_result_take_fd(res, 2, 0);
        memset(&ifr, 0, sizeof(ifr));
        if (fd < 0 || ioctl(fd, TUNGETIFF, &ifr) < 0 ||
            strcmp(ifr.ifr_name, nb_result_ifname(res, 2)) != 0) {
                fprintf(stderr, "consumer: the tap fd is not %s\n", nb_result_ifname(res, 2));
                return 1;
        }
        printf("consumer: tap %s made, its fd is the tun device\n", ifr.ifr_name);
        close(fd);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
        return 0;
}
