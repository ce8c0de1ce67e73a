#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every test, as ctest runs them (labels: tests/CMakeLists.txt, README):
# install the dependencies, then per build configure, build and run its
# labels. The plain build runs everything but the sanitizers and fuzzers
# (the unit and kernel suites, allocation failures, stress, valgrind, lint,
# man pages, an install with a program built against it, the bench in
# --quick mode); the ASan+UBSan build its Check tests again; the clang
# build the libFuzzer harnesses. Ends with one line: "N passed, N failed",
# counting Check's individual checks from its TAP logs and every other test
# from ctest's JUnit report (tests/py/ctest_count.py).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bash scripts/deps.sh || exit 1

#      dir         labels                                                     cmake options
builds=("build      ^(unit|kernel|alloc|stress|valgrind|lint|man|install|bench-quick)$ -DNB_WERROR=ON"
  "build-asan ^sanitizer$ -DNB_WERROR=ON -DNB_SANITIZE=ON -DNB_BENCH=OFF"
  "build-fuzz ^fuzz$      -DCMAKE_C_COMPILER=clang -DNB_FUZZ=ON -DNB_TESTS=OFF -DNB_BENCH=OFF -DNB_FUZZ_SECONDS=${NB_FUZZ_SECONDS:-60}")
# The fuzz build makes only the harnesses (and what they link).
fuzz_targets=(--target fuzz-frame fuzz-request fuzz-dispatch)

ran=()
failed=()
for b in "${builds[@]}"; do
  read -r dir labels opts <<<"$b"
  t0=$SECONDS
  targets=()
  jobs=1
  # The fuzzers share the machine: each runs for NB_FUZZ_SECONDS of wall
  # time, all three at once (the others run one at a time: the kernel
  # suites measure and wait on the kernel).
  [ "$dir" = build-fuzz ] && targets=("${fuzz_targets[@]}") && jobs=3
  echo "== $dir: configure and build"
  # shellcheck disable=SC2086
  if ! { cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo $opts >/dev/null &&
    cmake --build "$dir" -j"$(nproc)" "${targets[@]}" >/dev/null; }; then
    failed+=(--failed "$dir: configure and build")
    continue
  fi
  rm -rf "$dir/check-logs" "$dir/ctest-junit.xml" && mkdir -p "$dir/check-logs"
  echo "== $dir: ctest -L '$labels'"
  # The helpers' audit lines (one per change: thousands in the stress
  # tests) are left out of the log; test_hostile.c checks their content.
  (cd "$dir" && ctest -j"$jobs" --output-on-failure -V -L "$labels" --output-junit "$PWD/ctest-junit.xml") 2>&1 |
    grep -v -E -e '^([0-9]+: )?netbrokerd\[notice\] (main: signal 15|audit: uid=)'
  ran+=("$dir")
  echo "-- $dir: $((SECONDS - t0)) s"
done

echo
echo "all tests: $((SECONDS / 60)) min $((SECONDS % 60)) s"
python3 tests/py/ctest_count.py "${failed[@]}" "${ran[@]}"
