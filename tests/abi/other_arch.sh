#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# other_arch.sh CHECK BASELINE LIBRARY HEADERS_DIR SUPPRESSIONS: the abi check
# of LIBRARY against a copy of BASELINE that names another architecture (one
# no machine has, so the test means the same on every machine) skips: exit
# 77 with a message naming both architectures, where abidiff alone reports
# "ELF architecture changed" and the check failed on every machine but
# amd64, for which abi/ holds the release's dump.
set -uo pipefail
check=$1 baseline=$2 lib=$3 headers=$4 suppr=$5
other=elf-netbroker-test-arch
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

sed "1s/architecture='[^']*'/architecture='$other'/" "$baseline" >"$tmp/other.abi"
if ! grep -q "architecture='$other'" "$tmp/other.abi"; then
  echo "FAIL: $baseline has no architecture attribute to change" >&2
  exit 1
fi
out=$("$check" "$tmp/other.abi" "$lib" "$headers" "$suppr" 2>&1)
rc=$?
printf '%s\n' "--- baseline of $other (exit $rc):" "$out"
# Without debug info the check skips before it looks at architectures.
if [ "$rc" -eq 77 ] && grep -q 'no debug info' <<<"$out"; then
  exit 77
fi
lib_arch=$(abidw --no-corpus-path "$lib" | sed -n "1s/^<abi-corpus [^>]*architecture='\([^']*\)'.*/\1/p")
if [ "$rc" -ne 77 ] || ! grep -q -- "$other" <<<"$out" || ! grep -q -- "$lib_arch" <<<"$out"; then
  echo "FAIL: want exit 77 and both '$other' and '$lib_arch' in the message" >&2
  exit 1
fi
