#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# check.sh BASELINE LIBRARY HEADERS_DIR SUPPRESSIONS: abidiff of LIBRARY
# against the released ABI in BASELINE, counting only the types defined in
# HEADERS_DIR (the directory of the netbroker.h LIBRARY was built with;
# the opaque structs of the private headers beside it are suppressed). Exits 0 when LIBRARY keeps the release's ABI (added functions and
# structs grown at their end allowed, abi/libnetbroker.abignore), 1 with
# abidiff's report when it does not, 77 when LIBRARY has no debug info to
# compare types with (a build without -g) or when BASELINE was dumped on
# another architecture than LIBRARY's (abidiff can only report that).
set -uo pipefail
baseline=$1 lib=$2 headers=$3 suppr=$4

# Not grep -q: it stops reading, readelf dies of SIGPIPE, and pipefail
# made that 'no debug info' (the check skipped itself in a CI run).
if ! readelf -S "$lib" | grep '\.debug_info' >/dev/null; then
  echo "abi check: $lib has no debug info (built without -g): nothing to compare types with" >&2
  exit 77
fi
# The release's dump is of one architecture (abi/ holds x86_64's):
# abidiff of it against a library of another reports "ELF architecture
# changed" (exit 12), which is no ABI change of ours. Both names are
# abigail's (the architecture attribute of abidw's dump, which takes a
# fraction of a second), so they compare as strings. A library abidw
# cannot read goes on to abidiff, which then fails saying why.
arch_of() { sed -n "1s/^<abi-corpus [^>]*architecture='\([^']*\)'.*/\1/p"; }
base_arch=$(arch_of <"$baseline")
lib_arch=$(abidw --no-corpus-path "$lib" 2>/dev/null | arch_of)
if [ -n "$base_arch" ] && [ -n "$lib_arch" ] && [ "$base_arch" != "$lib_arch" ]; then
  machine=$(readelf -h "$lib" | sed -n 's/^ *Machine: *//p')
  echo "abi check: skipped: $baseline is the ABI of $base_arch and" \
    "$lib is built for $lib_arch ($machine): the baseline holds only for $base_arch" >&2
  exit 77
fi
out=$(abidiff --no-added-syms --suppressions "$suppr" --hd2 "$headers" "$baseline" "$lib" 2>&1)
rc=$?
echo "$out"
# abidiff's exit status is a bit field: 1 error, 2 usage, 4 ABI change,
# 8 incompatible change. Under this policy every reported change breaks.
if [ $((rc & 3)) -ne 0 ]; then
  echo "abi check: abidiff failed (exit $rc)" >&2
  exit 2
fi
if [ "$rc" -ne 0 ]; then
  echo "abi check: $lib breaks the ABI of $baseline (abidiff exit $rc)" >&2
  exit 1
fi
echo "abi check: $lib keeps the ABI of $baseline"
