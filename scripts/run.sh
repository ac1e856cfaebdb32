#!/usr/bin/env bash
# The README's run command: installs the Debian packages, builds gpool (release preset) and runs
# the main job that exists today: the scheduler on the published FGD experiment (openb trace,
# 1,213 servers, 10 seeds), printed side by side with the paper's figures and drawn to
# out/fgd-alloc.svg. With arguments, runs `gpool ARGS...` instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
GPOOL=build/release/src/cli/gpool
if [ $# -gt 0 ]; then exec "$GPOOL" "$@"; fi
mkdir -p out
"$GPOOL" version
exec "$GPOOL" sim fgd --compare --seeds 42-51 --threads "$(nproc)" \
  --svg out/fgd-alloc.svg --frag-svg out/fgd-frag.svg
