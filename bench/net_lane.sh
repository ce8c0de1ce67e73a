#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Another client's worst Ping while the network table is read (a uid's
# NetList) and committed (root's replace of every network, one request):
# bench/net_lane.c, in a network namespace of its own (gone when it ends).
#   bash bench/net_lane.sh BUILD_DIR [NETWORKS [FORWARDS [ROUNDS [REPLACED]]]]
set -euo pipefail
build=$(realpath "${1:?usage: net_lane.sh BUILD_DIR [NETWORKS [FORWARDS [ROUNDS [REPLACED]]]]}")
shift
src=$(dirname "$(realpath "$0")")
bin=$(mktemp /tmp/nb-net-lane-XXXXXX)
trap 'rm -f "$bin"' EXIT
cc -O2 -std=gnu11 -o "$bin" "$src/net_lane.c" -I"$src/../client" -I"$build" \
        -L"$build" -Wl,-rpath,"$build" -lnetbroker -lpthread
# NB_HELPER: another netbrokerd (an older build, for a before/after).
unshare -n "$bin" "${NB_HELPER:-$build/netbrokerd}" "$@"
