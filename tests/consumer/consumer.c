/* A program outside the tree: built only from what `cmake --install` put in
 * a prefix, found through pkg-config. It spawns the installed helper, pings
 * it and runs `ip -V` through it. */
#include <netbroker.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
        const char *ip_argv[] = {"ip", "-V", NULL};
        nb_conn *c = NULL;
        nb_batch *b = nb_batch_new();
        nb_results *res = NULL;
        nb_exec_result e;
        int r;

        r = nb_spawn(NULL, NULL, &c); /* NETBROKERD names the installed helper */
        if (r < 0) {
                fprintf(stderr, "consumer: nb_spawn: %s: %s\n", strerror(-r), nb_last_error());
                return 1;
        }
        nb_batch_ping(b);
        nb_batch_exec(b, "/usr/sbin/ip", ip_argv, NULL, NULL, 0, 0);
        r = nb_submit(c, b, &res);
        if (r < 0 || nb_results_first_error(res) != -1 || nb_result_exec(res, 1, &e) < 0) {
                fprintf(stderr, "consumer: submit failed: %s\n",
                        r < 0 ? strerror(-r)
                              : nb_result_message(res, (size_t)nb_results_first_error(res)));
                return 1;
        }
        printf("consumer: helper answered; ip -V said: %.*s", (int)e.out_len, e.out);
        nb_results_free(res);
        nb_batch_free(b);
        nb_close(c);
        return 0;
}
