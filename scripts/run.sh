#!/usr/bin/env bash
# The README's run command: installs the Debian packages, builds gpool (release) and runs the
# main job that exists today. Extra arguments are passed to `gpool`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
GPOOL=build/release/src/cli/gpool
if [ $# -gt 0 ]; then exec "$GPOOL" "$@"; fi
"$GPOOL" version
