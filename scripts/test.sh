#!/usr/bin/env bash
# Every test: install, build (normal and ASan+UBSan), run both suites in each
# build, the unit, protocol and limits tests under valgrind, the
# allocation-failure test and the fuzzers, check the man pages, install into
# a scratch prefix and build a
# program against it, and run the bench in --quick mode so it never rots.
# Ends with one line: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0
failed=0
failures=()

step() { # name, command...
  local name=$1 t0=$SECONDS
  shift
  echo "== $name"
  if "$@"; then
    echo "-- $name: ok ($((SECONDS - t0)) s)"
  else
    echo "-- $name: FAILED ($((SECONDS - t0)) s)"
    failures+=("$name")
    failed=$((failed + 1))
    return 1
  fi
}

# A Check binary (or a command running one, such as valgrind): its own
# counts go into the total; a failing exit status with every check passed
# (valgrind's or ASan's verdict at exit) counts as one more failure.
check_suite() { # name, command...
  local name=$1 log t0=$SECONDS
  shift
  log=$(mktemp)
  echo "== $name"
  # The helpers' audit lines (one per change: thousands in the stress
  # tests) are left out of the log; test_hostile.c checks their content.
  "$@" 2>&1 | grep -v -e '^netbrokerd\[notice\] main: signal 15' \
    -e '^netbrokerd\[notice\] audit: uid=' | tee "$log"
  local rc=${PIPESTATUS[0]}
  echo "-- $name: $((SECONDS - t0)) s"
  local line
  line=$(grep -E '^[0-9]+%: Checks: ' "$log" | tail -n 1)
  rm -f "$log"
  if [[ $line =~ Checks:\ ([0-9]+),\ Failures:\ ([0-9]+),\ Errors:\ ([0-9]+) ]]; then
    local n=${BASH_REMATCH[1]} f=$((BASH_REMATCH[2] + BASH_REMATCH[3]))
    passed=$((passed + n - f))
    failed=$((failed + f))
    [ "$f" -gt 0 ] && failures+=("$name")
    if [ "$f" -eq 0 ] && [ "$rc" -ne 0 ]; then
      echo "-- $name: every check passed, but it exited with status $rc"
      failed=$((failed + 1))
      failures+=("$name")
    fi
  else
    echo "-- $name: no result line (crashed?)"
    failed=$((failed + 1))
    failures+=("$name")
  fi
  return "$rc"
}

single() { # a one-shot check counted as one test
  if step "$@"; then passed=$((passed + 1)); fi
}

bash scripts/deps.sh || exit 1
bash scripts/build.sh build -DNB_WERROR=ON || exit 1
bash scripts/build.sh build-asan -DNB_WERROR=ON -DNB_SANITIZE=ON -DNB_BENCH=OFF || exit 1

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

check_suite "unit" build/tests/test-unit
check_suite "helper" build/tests/test-helper
check_suite "unit (asan+ubsan)" build-asan/tests/test-unit
# The conformance table (iperf3 at 8-512 Mbit/s, about 80 s) measures the
# kernel's shaping, which a sanitizer does not change: the plain build runs it.
CK_EXCLUDE_TAGS=rate check_suite "helper (asan+ubsan)" build-asan/tests/test-helper

# valgrind memcheck: any definite or indirect leak, or any error, fails.
# Check forks a process per test unless CK_FORK=no; the forked children
# of a few tests (setuid peers) are not checked.
vg=(valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite,indirect
  --error-exitcode=1 --child-silent-after-fork=yes --suppressions=scripts/valgrind.supp)
vg_start=$SECONDS
# The unit tests (frames-rlimit needs the kernel to enforce a fd limit,
# which valgrind emulates), and the protocol and limits tests with the
# test process, libnetbroker included, under valgrind.
CK_FORK=no CK_EXCLUDE_TAGS=rlimit check_suite "unit (valgrind)" "${vg[@]}" build/tests/test-unit
CK_FORK=no CK_RUN_SUITE=protocol check_suite "protocol (valgrind)" \
  "${vg[@]}" build/tests/test-helper
CK_FORK=no CK_RUN_SUITE=limits check_suite "limits (valgrind)" "${vg[@]}" build/tests/test-helper

# The helper itself under valgrind, one log per helper process, for the
# tests that run no program (valgrind 3.19 has no pidfd_open, so Exec
# fails under it; see scripts/valgrind-helper.sh).
vg_logs=$(mktemp -d)
vg_helper() { # CK_* settings...
  env "$@" NB_TEST_HELPER="$PWD/scripts/valgrind-helper.sh" \
    NB_VALGRIND_HELPER="$PWD/build/netbrokerd" NB_VALGRIND_LOGDIR="$vg_logs" \
    build/tests/test-helper
}
check_suite "protocol, helper under valgrind" vg_helper CK_RUN_SUITE=protocol CK_RUN_CASE=protocol
check_suite "access, helper under valgrind" vg_helper CK_RUN_SUITE=protocol CK_RUN_CASE=access
check_suite "limits, helper under valgrind" vg_helper CK_RUN_SUITE=limits CK_EXCLUDE_TAGS=exec
helper_logs_clean() { # every helper ended with no leak and no error
  local n=0 bad=0 f
  for f in "$vg_logs"/helper.*.log; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    if ! grep -q 'ERROR SUMMARY: 0 errors' "$f"; then
      cat "$f"
      bad=$((bad + 1))
    fi
  done
  echo "$n helper processes ran under valgrind; $bad had a leak or an error"
  [ "$n" -gt 0 ] && [ "$bad" -eq 0 ]
}
single "helpers under valgrind: no leak, no error" helper_logs_clean
rm -rf "$vg_logs"
echo "valgrind: $((SECONDS - vg_start)) s"
# Every allocation of a representative request failed in turn (tests/test_alloc.c).
check_suite "alloc" build/tests/test-alloc
check_suite "alloc (asan+ubsan)" build-asan/tests/test-alloc
# The firewall against the kernel, each of its allocations (libc's and
# libnftnl's) failed in turn (tests/test_fw_alloc.c).
check_suite "fw-alloc" build/tests/test-fw-alloc
check_suite "fw-alloc (asan+ubsan)" build-asan/tests/test-fw-alloc

# Load (64 threads for NB_LOAD_SECONDS, 60) and 50 SIGKILLs of the helper:
# about 2 min, and its figures (req/s, Ping p50/p99) go into the log. The
# sanitized run looks for memory errors under 64 threads, not for figures,
# and its helper's RSS is ASan's quarantine: 20 s of load (~1,800 requests)
# is enough there, and keeps it to about 1.5 min.
check_suite "stress" build/tests/test-stress
NB_LOAD_SECONDS=20 check_suite "stress (asan+ubsan)" build-asan/tests/test-stress

# libFuzzer (clang, ASan+UBSan), each harness for NB_FUZZ_SECONDS (60) from
# its seed corpus (tests/fuzz/README.md). A crash fails the step; its input
# is left in build-fuzz/ to be added to the corpus once the bug is fixed.
fuzz_build() {
  local log
  log=$(mktemp)
  cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DNB_FUZZ=ON -DNB_TESTS=OFF -DNB_BENCH=OFF >"$log" 2>&1 &&
    cmake --build build-fuzz -j"$(nproc)" --target fuzz-frame fuzz-request fuzz-dispatch \
      >>"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || tail -n 40 "$log"
  rm -f "$log"
  return $rc
}
fuzz_run() { # harness
  local h=$1 work log rc
  work=$(mktemp -d)
  log=$(mktemp)
  # New inputs go to the scratch directory; the committed corpus is read only.
  build-fuzz/tests/fuzz/fuzz-"$h" -max_total_time="${NB_FUZZ_SECONDS:-60}" -print_final_stats=1 \
    -artifact_prefix="build-fuzz/$h-" "$work" "tests/fuzz/corpus/$h" >"$log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || tail -n 60 "$log"
  awk -v h="$h" '/^stat::number_of_executed_units:/ {n = $2}
    /^stat::average_exec_per_sec:/ {s = $2}
    END {printf "fuzz-%s: %s executions, %s exec/s\n", h, n, s}' "$log"
  rm -rf "$work" "$log"
  return $rc
}
if single "fuzzers build (clang, libFuzzer, ASan+UBSan)" fuzz_build; then
  for h in frame request dispatch; do
    single "fuzz-$h for ${NB_FUZZ_SECONDS:-60} s: no crash" fuzz_run "$h"
  done
fi

formatting() {
  git ls-files '*.c' '*.h' | xargs clang-format --dry-run -Werror
}
single "sources follow .clang-format" formatting

man_pages() {
  local out rc=0
  for m in man/*.[0-9]; do
    out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$m" 2>&1 >/dev/null)
    if [ -n "$out" ]; then
      echo "$m: $out"
      rc=1
    fi
  done
  return $rc
}
single "man pages render without warnings" man_pages

install_and_consume() {
  local prefix
  prefix=$(mktemp -d)
  cmake --install build --prefix "$prefix" >/dev/null || return 1
  bash tests/consumer/build.sh "$prefix"
  local rc=$?
  rm -rf "$prefix"
  return $rc
}
single "install and build a program against it" install_and_consume

# Every scenario at a small size in one run (under a minute), so the bench
# never rots: it must run, its JSON parse, every scenario end without error
# and give ratios, and the chart be a PNG. Timings are not checked.
bench_all_quick() {
  local out png rc
  png=$(mktemp --suffix=.png)
  # The helpers' audit lines (the baseline's thousands of Execs) stay out.
  out=$(NETBROKERD_LOG_LEVEL=warning build/bench/netbroker-bench all --quick --json --png "$png")
  rc=$?
  echo "$out" | PNG="$png" python3 -c '
import json, math, os, sys
d = json.load(sys.stdin)
runs = d["runs"]
assert len(runs) >= 5, "only %d scenarios ran" % len(runs)
for run in runs:
    name = run["label"]
    assert run["error"] is None, "%s failed: %s" % (name, run["error"])
    ratios = d["scenarios"][name]["ratios"]
    assert ratios, "%s: no ratios" % name
    assert all(v is not None and math.isfinite(v) and v > 0 for v in ratios.values()), name
    lines = [s for s in d["summary"] if s["scenario"] == name]
    assert lines and all(s["ratio"] > 0 for s in lines), "%s: no summary ratio" % name
    print("%-10s %5.1f s  %s" % (name, run["elapsed_s"], ", ".join(
        "%s %.3g" % (s["what"], s["ratio"]) for s in lines)))
print("all --quick: %.1f s" % d["elapsed_s"])
with open(os.environ["PNG"], "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n", "the chart is not a PNG"
' || rc=1
  rm -f "$png"
  return "$rc"
}
single "bench all --quick runs, its JSON has ratios for every scenario" bench_all_quick

echo
if [ "${#failures[@]}" -gt 0 ]; then
  echo "failed: ${failures[*]}"
fi
echo "all tests: $((SECONDS / 60)) min $((SECONDS % 60)) s"
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
