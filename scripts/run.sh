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
cmake --build --preset release -j "$(nproc)"
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
