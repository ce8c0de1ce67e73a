#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The main job: install, build, and run the demo in a private network
# namespace (the demo moves itself into one; the host's network is never
# touched).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh build
exec build/examples/netbroker-demo "$@"
