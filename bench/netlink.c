/* Devices by name, and this process's own rtnetlink socket (names' K, A
 * and A1 create their macvtaps themselves). */
#include "bench.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>

#include <netlink/errno.h>
#include <netlink/netlink.h>

#include "netlink.h" /* helper/netlink.h: libnl's codes as errnos, the helper's one map */

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
        int r = sk ? nbd_netlink_nle_errno(nl_connect(sk, NETLINK_ROUTE)) : -ENOMEM;

        if (r < 0) {
                bench_log("netbroker-bench: %scannot open rtnetlink: %s\n", who, strerror(-r));
                nl_socket_free(sk);
                return r;
        }
        *ret = sk;
        return 0;
}

int bench_expect_devices(const char *who, const char *prefix, unsigned want)
{
        int have = bench_count_devices(prefix);

        if (have == (int)want)
                return 0;
        bench_log("netbroker-bench: %s%d %s devices, expected %u\n", who, have, prefix, want);
        return have < 0 ? have : -EPROTO;
}
