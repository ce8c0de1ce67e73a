#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# netbrokerd under valgrind memcheck, for the tests: NB_TEST_HELPER=this
# script runs every helper a test starts through it (tests/CMakeLists.txt,
# the *-helper-valgrind tests).
#   NB_VALGRIND_HELPER  the real netbrokerd binary
#   NB_VALGRIND_LOGDIR  one log per helper process: helper.PID.log
# Two more uses, as the ctest fixture around those tests:
#   valgrind-helper.sh --reset DIR   empties DIR (the logs of a former run)
#   valgrind-helper.sh --check DIR   fails unless at least one helper ran and
#                                    every log in DIR shows no leak, no error
#
# Two things valgrind 3.19 (Debian 12) needs:
# * The helper lowers RLIMIT_NOFILE, soft and hard, to its fd_limit.
#   valgrind emulates that call and allows it only when the hard limit
#   asked for equals the soft limit the process started with (valgrind
#   keeps the fds above it for itself). So the soft limit is set to the
#   config's fd_limit here, and the helper's own setrlimit then succeeds.
# * It does not know pidfd_open (syscall 434): Exec fails with ENOSYS
#   under valgrind, so only tests that run no program can use this.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

case ${1:-} in
--reset)
  rm -rf "${2:?--reset DIR}"
  mkdir -p "$2"
  exit 0
  ;;
--check)
  n=0 bad=0
  for f in "${2:?--check DIR}"/helper.*.log; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    if ! grep -q 'ERROR SUMMARY: 0 errors' "$f"; then
      cat "$f"
      bad=$((bad + 1))
    fi
  done
  echo "$n helper processes ran under valgrind; $bad had a leak or an error"
  if [ "$n" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
    # The suites that start them skipped (they need root): so does this.
    echo "valgrind-helper: skipped: needs root (the suites that run the helper skipped)"
    exit 77
  fi
  [ "$n" -gt 0 ] && [ "$bad" -eq 0 ]
  exit
  ;;
esac

helper=${NB_VALGRIND_HELPER:?NB_VALGRIND_HELPER: the netbrokerd binary}
logdir=${NB_VALGRIND_LOGDIR:?NB_VALGRIND_LOGDIR: a directory for the logs}

fd_limit=64 # helper/config.c's default
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  if [ "${args[i]}" = --config ] && [ -r "${args[i + 1]}" ]; then
    v=$(sed -n 's/^[[:space:]]*fd_limit[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "${args[i + 1]}" | tail -n 1)
    [ -n "$v" ] && fd_limit=$v
  fi
done
ulimit -S -n "$fd_limit"

exec valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite,indirect \
  --error-exitcode=99 --trace-children=no --suppressions="$here/valgrind.supp" \
  --log-file="$logdir/helper.%p.log" "$helper" "$@"
