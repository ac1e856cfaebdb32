#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the Debian packages, checks formatting,
# builds with warnings as errors and runs every test, then builds the libraries, the daemons and
# their tests under ASan+UBSan (all but the `gpool` CLI, whose tests ran in the first phase) and
# runs those again.
# CTest's summary line closes the run. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
phase() { echo "== $1 (at $((SECONDS - start)) s) =="; }

phase "dependencies"
scripts/install-deps.sh
phase "format check"
scripts/format-check.sh

jobs=$(nproc)
phase "release build, warnings as errors"
cmake --preset ci-release >/dev/null
cmake --build --preset ci-release -j "$jobs"
release_log=$(mktemp)
set +e
phase "release tests"
ctest --preset ci-release 2>&1 | tee "$release_log"
release_rc=${PIPESTATUS[0]}
set -e

phase "ASan+UBSan build, warnings as errors"
cmake --preset ci-asan >/dev/null
cmake --build --preset ci-asan -j "$jobs"
set +e
phase "ASan+UBSan tests"
ctest --preset ci-asan -LE "no_sanitizer|slow"
asan_rc=$?
set -e

if [ "$release_rc" -ne 0 ]; then
  echo "release suite failed:"
  grep -E 'tests passed|Failed|\*\*\*' "$release_log" | tail -20
fi
rm -f "$release_log"
[ "$release_rc" -eq 0 ] && [ "$asan_rc" -eq 0 ]
