#!/usr/bin/env bash
# The README's run command: installs the Debian packages, builds gpool (release preset) and
# brings up a whole pool on this machine with demo jobs (`gpool up --demo`: gpoold and one agent
# per server; simulated GPUs, labelled so, when NVML finds none), then shows its servers and its
# queue. Stop it with `build/release/src/cli/gpool down`. With arguments, runs `gpool ARGS...`
# instead (e.g. `scripts/run.sh sim fgd --compare`, the published FGD experiment).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
# Only what `gpool up --demo` runs (the CLI, the daemons, the supervisor, the interposer): the
# tests and benchmarks are the test command's; `cmake --build --preset release` builds them all.
cmake --build --preset release -j "$(nproc)" \
  --target gpool gpoold gpool-agent gpool-supervisor gpool_vgpu
GPOOL=build/release/src/cli/gpool
if [ $# -gt 0 ]; then exec "$GPOOL" "$@"; fi
"$GPOOL" version
"$GPOOL" up --demo
socket=$("$GPOOL" up --status | sed -n 's/.*socket \(.*\)$/\1/p' | head -1)
export GPOOL_SOCKET="$socket"
echo
echo "\$ gpool nodes"
"$GPOOL" nodes
echo
echo "\$ gpool queue --all"
"$GPOOL" queue --all
echo
echo "The pool keeps running. Try: export GPOOL_SOCKET=$socket; $GPOOL queue --all"
echo "Stop it with: $GPOOL down"
