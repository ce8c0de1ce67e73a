#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Another client's worst Ping while LinkList, AddrList, BandwidthShow and
# AddrDelete read the whole namespace: bench/dump_lane.c, in a network
# namespace of its own (gone when it ends) with TAPS taps of ADDRS IPv4
# addresses each.
#   bash bench/dump_lane.sh BUILD_DIR [TAPS [ADDRS [ROUNDS]]]   (4096 4 7)
set -euo pipefail
build=$(realpath "${1:?usage: dump_lane.sh BUILD_DIR [TAPS [ADDRS [ROUNDS]]]}")
taps=${2:-4096} addrs=${3:-4} rounds=${4:-7}
src=$(dirname "$(realpath "$0")")
bin=$(mktemp /tmp/nb-dump-lane-XXXXXX)
trap 'rm -f "$bin"' EXIT
cc -O2 -std=gnu11 -o "$bin" "$src/dump_lane.c" -I"$src/../client" -I"$build" \
        -L"$build" -Wl,-rpath,"$build" -lnetbroker -lpthread
# NB_HELPER: another netbrokerd (an older build, for a before/after).
unshare -n bash -c '
for ((i = 0; i < $1; i++)); do
        echo "tuntap add dt$i mode tap"
        for ((k = 0; k < $2; k++)); do
                echo "addr add 10.$((k + 1)).$((i / 256)).$((i % 256))/32 dev dt$i"
        done
done | ip -batch -
echo "$1 taps, $(ip -o addr | wc -l) addresses, $3 rounds, medians:"
exec "$4" "$5" "$3"' _ "$taps" "$addrs" "$rounds" "$bin" "${NB_HELPER:-$build/netbrokerd}"
