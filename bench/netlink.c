/* This process's own netlink, for the scenarios that create devices
 * themselves (names, bandwidth): libnl's errors as errnos, and devices by
 * name. */
#include "bench.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>

#include <netlink/errno.h>
#include <netlink/netlink.h>

#include "netlink.h" /* helper/netlink.h */

int bench_nl_errno(int nlerr)
{
        return nbd_netlink_nle_errno(nlerr); /* the helper's one map */
}

int bench_count_devices(const char *prefix)
{
        struct if_nameindex *all = if_nameindex(), *d;
        size_t plen = strlen(prefix);
        int n = 0;

        if (!all)
                return -errno;
        for (d = all; d->if_index; d++) {
                const char *tail = d->if_name + plen;
                if (strncmp(d->if_name, prefix, plen) == 0 && *tail &&
                    strspn(tail, "0123456789") == strlen(tail))
                        n++;
        }
        if_freenameindex(all);
        return n;
}

int bench_nl_open(const char *who, struct nl_sock **ret)
{
        struct nl_sock *sk = nl_socket_alloc();
        int r = sk ? bench_nl_errno(nl_connect(sk, NETLINK_ROUTE)) : -ENOMEM;

        if (r < 0) {
                bench_log("netbroker-bench: %scannot open rtnetlink: %s\n", who, strerror(-r));
                nl_socket_free(sk);
                return r;
        }
        *ret = sk;
        return 0;
}
