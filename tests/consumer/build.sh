#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build tests/consumer/consumer.c against an installed prefix with
# pkg-config alone, then run it (in a private network namespace).
set -euo pipefail
prefix=$1
here=$(cd "$(dirname "$0")" && pwd)
pc=$(dirname "$(find "$prefix" -name netbroker.pc | head -n 1)")
export PKG_CONFIG_PATH=$pc
flags=$(pkg-config --define-prefix --cflags --libs netbroker)
helper=$(pkg-config --define-prefix --variable=helper netbroker)
libdir=$(pkg-config --define-prefix --variable=libdir netbroker)
out=$(mktemp -d)
# shellcheck disable=SC2086
cc -std=gnu11 -Wall -Wextra -Werror -o "$out/consumer" "$here/consumer.c" $flags
for f in "$prefix"/share/man/man*/*; do test -s "$f"; done
ls "$prefix"/lib/systemd/system/netbrokerd.socket "$prefix"/lib/systemd/system/netbrokerd.service >/dev/null
NETBROKERD=$helper LD_LIBRARY_PATH=$libdir unshare --net "$out/consumer"
rm -rf "$out"
