#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every test, as ctest runs them (labels: tests/CMakeLists.txt, README):
# install the dependencies, then per build configure, build and run its
# labels. Every build has -DNB_WERROR=ON (off by default, for packagers) and
# must build with no warning at all (its build log is searched too):
#   build          RelWithDebInfo, /usr/local: everything
#                  but the sanitizers and fuzzers (unit and kernel suites,
#                  allocation failures, stress, valgrind, lint, man pages,
#                  hardening, an install checked and a program built against it,
#                  the bench in --quick mode)
#   build-asan     ASan+UBSan: the Check tests again
#   build-release  Release (-O3), prefix /opt/nb with an absolute libdir, the
#                  bench installed: unit, hardening, install
#   build-deb      as Debian's debhelper configures a package: dpkg-buildflags
#                  with hardening=+all (CPPFLAGS into CFLAGS), build type None,
#                  prefix /usr, the multiarch libdir: hardening, install
#   build-fuzz     clang: the libFuzzer harnesses
# Time: the plain build is made first, the test guest beside it; while its
# tests run (mostly waiting on the kernel, one at a time), the other trees
# are built beside them at the lowest CPU priority, then their tests run in
# turn.
# Ends with one line: "N passed, N failed", counting Check's individual
# checks from its TAP logs and every other test from ctest's JUnit report
# (tests/py/ctest_count.py).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bash scripts/deps.sh || exit 1
# The test guest's kernel package may be downloaded (tests/guest/build.sh:
# a packager's offline build leaves it unset, and guest-vlan-* skip).
export NB_GUEST_DOWNLOAD=1

# What debhelper (dh_auto_configure, cmake) gives a package's build.
deb_flags() {
  eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
  echo "-DCMAKE_C_FLAGS=$CFLAGS $CPPFLAGS"
  echo "-DCMAKE_EXE_LINKER_FLAGS=$LDFLAGS"
  echo "-DCMAKE_SHARED_LINKER_FLAGS=$LDFLAGS"
  echo "-DCMAKE_MODULE_LINKER_FLAGS=$LDFLAGS"
  echo "-DCMAKE_BUILD_TYPE=None"
  echo "-DCMAKE_INSTALL_PREFIX=/usr"
  echo "-DCMAKE_INSTALL_LIBDIR=lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
  echo "-DCMAKE_INSTALL_SYSCONFDIR=/etc"
  echo "-DCMAKE_INSTALL_LOCALSTATEDIR=/var"
  echo "-DCMAKE_INSTALL_RUNSTATEDIR=/run"
}

declare -A labels opts
order=(build build-asan build-release build-deb build-fuzz)
labels[build]='^(unit|kernel|alloc|stress|valgrind|lint|man|install|hardening|bench-quick)$'
opts[build]='-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNB_TEST_HOOKS=ON'
labels[build-asan]='^sanitizer$'
opts[build-asan]='-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNB_SANITIZE=ON -DNB_BENCH=OFF -DNB_TEST_HOOKS=ON'
labels[build-release]='^(unit|hardening|install)$'
# The installed bench reads its data from the prefix: not the bench-quick tree.
opts[build-release]='-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/opt/nb -DCMAKE_INSTALL_LIBDIR=/opt/nb/lib64 -DNB_INSTALL_BENCH=ON'
labels[build-deb]='^(hardening|install)$'
opts[build-deb]='-DNB_BENCH=OFF' # and deb_flags
labels[build-fuzz]='^fuzz$'
opts[build-fuzz]="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DNB_FUZZ=ON -DNB_TESTS=OFF -DNB_BENCH=OFF -DNB_FUZZ_SECONDS=${NB_FUZZ_SECONDS:-30}"

# make_tree DIR: configure and build DIR (log in DIR/nb-build.log) with
# $jobs compilers; fails on an error or on any warning in the log.
jobs=$(nproc)
make_tree() {
  local dir=$1 t0=$SECONDS args=() targets=()
  read -ra args <<<"${opts[$dir]}"
  # The fuzz build makes only the harnesses (and what they link).
  [ "$dir" = build-fuzz ] && targets=(--target fuzz-frame fuzz-request fuzz-dispatch)
  if [ "$dir" = build-deb ]; then
    mapfile -t deb < <(deb_flags)
    args+=("${deb[@]}")
  fi
  local log=$dir/nb-build.log
  rm -f "$dir/.nb-built" && mkdir -p "$dir"
  {
    cmake -S . -B "$dir" -DNB_WERROR=ON "${args[@]}" &&
      cmake --build "$dir" -j"$jobs" "${targets[@]}"
  } >"$log" 2>&1
  local rc=$? warnings
  warnings=$(grep -c -i -E 'warning[: ]' "$log")
  echo "-- $dir: configured and built in $((SECONDS - t0)) s, exit $rc, $warnings warnings (log: $log)"
  if [ $rc -ne 0 ] || [ "$warnings" -ne 0 ]; then
    grep -i -E -B2 -A4 'warning[: ]|error' "$log" | head -n 60
    return 1
  fi
  touch "$dir/.nb-built"
}

# run_tests DIR: its labels under ctest.
run_tests() {
  local dir=$1 t0=$SECONDS jobs=2
  # The fuzzers share the machine: each runs for NB_FUZZ_SECONDS of wall
  # time, all three at once. The others two at a time: most kernel suites
  # wait on the kernel; those that measure are RUN_SERIAL
  # (tests/CMakeLists.txt) and run alone.
  [ "$dir" = build-fuzz ] && jobs=3
  rm -rf "$dir/check-logs" "$dir/ctest-junit.xml" && mkdir -p "$dir/check-logs"
  echo "== $dir: ctest -L '${labels[$dir]}'"
  # The helpers' audit lines (one per change: thousands in the stress
  # tests) are left out of the log; test_hostile.c checks their content.
  (cd "$dir" && ctest -j"$jobs" --output-on-failure -V -L "${labels[$dir]}" --output-junit "$PWD/ctest-junit.xml") 2>&1 |
    grep -v -E -e '^([0-9]+: )?netbrokerd\[notice\] (main: signal 15|audit: uid=)'
  echo "-- $dir: tests in $((SECONDS - t0)) s"
}

ran=()
failed=()
# The test guest (a kernel package downloaded, a busybox initramfs) is made
# beside the plain build; guest-vlan-* then find it ready in build/tests/guest
# (tests/guest/build.sh keeps it) and still check it is current.
guest_out=$(mktemp)
nice -n 19 bash tests/guest/build.sh build/tests/guest >"$guest_out" 2>&1 &
guest=$!
echo "== build: configure and build"
if make_tree build; then
  wait "$guest" # its test builds it again if this failed, and says why
  cat "$guest_out"
  # The other trees, one after the other, beside the plain tests and below
  # them in CPU priority.
  # What they print waits for the plain tests' log to end.
  builder_out=$(mktemp)
  (
    # One compiler: one core stays with the tests, which measure latencies.
    renice -n 19 -p "$BASHPID" >/dev/null
    jobs=1
    for dir in "${order[@]:1}"; do make_tree "$dir"; done
  ) >"$builder_out" 2>&1 &
  builder=$!
  run_tests build
  ran+=(build)
  echo "== the other builds (made beside the plain tests)"
  wait "$builder"
  cat "$builder_out" && rm -f "$builder_out"
else
  failed+=(--failed "build: configure and build")
  wait "$guest"
  for dir in "${order[@]:1}"; do make_tree "$dir"; done
fi
for dir in "${order[@]:1}"; do
  if [ -e "$dir/.nb-built" ]; then
    run_tests "$dir"
    ran+=("$dir")
  else
    failed+=(--failed "$dir: configure and build")
  fi
done

rm -f "$guest_out"
echo
echo "all tests: $((SECONDS / 60)) min $((SECONDS % 60)) s"
python3 tests/py/ctest_count.py "${failed[@]}" "${ran[@]}"
