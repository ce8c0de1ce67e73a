#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Regenerate abi/libnetbroker.so.<soversion>.abi, the ABI of the library as
# released, which the abi tests (ctest -L abi) compare every build with.
# Run it when a release is made, and after merging branches that add to the
# release's version node, then commit the file. It builds the library in
# DIR (default: build-abi) with debug info (abidw reads the types from
# DWARF), with the public header only deciding which types count.
#   scripts/abi-baseline.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-abi}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNB_TESTS=OFF -DNB_BENCH=OFF >/dev/null
cmake --build "$dir" --target netbroker -j2 >/dev/null
lib=$(readlink -f "$dir"/libnetbroker.so)
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
out=abi/$soname.abi
# Paths relative to the checkout (BUILD/ for the build tree), so that the
# file is the same from any checkout. The locations stay: abidiff
# --headers-dir needs them to tell public types (client/netbroker.h) from
# private ones (without them, or without their line numbers, abidiff 2.2
# filters a field inserted into a public struct out as private), so the
# file changes with every edit of the header that moves lines. The licence
# line goes inside the root element: abidiff refuses a file that does not
# start with it.
abidw --no-corpus-path --no-comp-dir-path --drop-undefined-syms "$lib" |
  sed -e "s|path='$PWD/|path='|g" -e "s|path='$(readlink -f "$dir")/|path='BUILD/|g" \
    -e "1a\\  <!-- SPDX-License-Identifier: LGPL-2.1-or-later -->" >"$out.tmp"
mv "$out.tmp" "$out"
echo "abi-baseline: $out ($(grep -c '<elf-symbol ' "$out") symbols) from $lib"
