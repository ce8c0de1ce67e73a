#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# catches.sh CHECK BASELINE SUPPR REMOVED DIR INSERTED DIR COMPATIBLE DIR
# (each library with the directory of the netbroker.h it was built with): the
# abi check fails, with abidiff's own report naming the change, for a
# library missing nb_conn_limit and for one with a field inserted into
# nb_tap_opts, and passes one with a function added to the node and a
# field appended to nb_fw_rule (tests/abi/CMakeLists.txt builds them).
set -uo pipefail
check=$1 baseline=$2 suppr=$3
fail=0

# expect NAME LIB HEADERS_DIR RC NEEDLE: the check's exit status and a line of
# its report.
expect() {
  local out rc
  out=$("$check" "$baseline" "$2" "$3" "$suppr" 2>&1)
  rc=$?
  printf '%s\n' "--- $1 (exit $rc):" "$out"
  [ "$rc" -eq 77 ] && exit 77
  if [ "$rc" -ne "$4" ] || ! grep -q -- "$5" <<<"$out"; then
    echo "FAIL: $1: want exit $4 and '$5' in the report" >&2
    fail=1
  fi
}

expect "nb_conn_limit removed" "$4" "$5" 1 "\[D\] 'function int nb_conn_limit("
expect "field inserted into nb_tap_opts" "$6" "$7" 1 "'unsigned int abi_test_inserted', at offset"
expect "function added, field appended" "$8" "$9" 0 "keeps the ABI"
exit $fail
