#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Configure and build into DIR (default: build) with any extra cmake options.
set -euo pipefail
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)" >/dev/null
echo "build: $dir ok"
