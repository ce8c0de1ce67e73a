#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 14, loop audit finding 2 (scripts/bw-beside-fw.c says what it
# measures): a helper from BUILD, listening in a network namespace of its
# own, N guests, ROUNDS replaces, each with another client's BandwidthSets
# and a third one's Pings beside it. As root; the namespace goes with it.
#   bash scripts/bw-beside-fw.sh BUILD N ROUNDS [GAP_MS]
set -euo pipefail
build=$(realpath "${1:?BUILD}") n=${2:?N} rounds=${3:?ROUNDS} gap=${4:-0}
src=$(dirname "$(realpath "$0")")/..
work=$(mktemp -d /tmp/bw-beside-fw.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/prog" "$src/scripts/bw-beside-fw.c" -I"$src/client" -L"$build" \
	-Wl,-rpath,"$build" -lnetbroker -lpthread
: > "$work/conf"
unshare -n bash -c '
	set -euo pipefail
	ip link set lo up
	"$1/netbrokerd" --listen "$2/sock" --config "$2/conf" 2> "$2/log" &
	pid=$!
	trap "kill $pid; wait $pid || true" EXIT
	for i in $(seq 500); do [ -S "$2/sock" ] && break; sleep 0.02; done
	"$2/prog" "$2/sock" "$3" "$4" "$5"
' bw-beside-fw "$build" "$work" "$n" "$rounds" "$gap"
