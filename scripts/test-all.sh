#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the Debian packages, checks formatting,
# builds with warnings as errors and runs every test, then builds the libraries, the daemons and
# their tests under ASan+UBSan (all but the `gpool` CLI, whose tests ran in the first phase) and
# runs those again, then builds and runs the tests of the threaded parts under TSan, and last
# builds the libFuzzer targets (clang), fuzzes each for a bounded time and runs every kept
# regression input (docs/fuzzing.md). CTest's summary line closes the run. This is the README's
# test command and what CI runs.
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

# ThreadSanitizer on the threaded parts only (tests labelled `tsan`: the HTTP/WebSocket server
# and clients, the event hub): a whole TSan build would cost as much again as the ASan one.
phase "TSan build of the threaded parts, warnings as errors"
cmake --preset ci-tsan >/dev/null
cmake --build --preset ci-tsan -j "$jobs" --target gpool_tsan_tests
set +e
phase "TSan tests"
ctest --preset ci-tsan -L tsan
tsan_rc=$?
set -e

# The fuzz targets (clang, libFuzzer + ASan/UBSan): about 2 minutes of fuzzing in all, with each
# target's figures, then every seed and kept regression input once under CTest.
phase "fuzz build (clang, libFuzzer + ASan/UBSan)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
set +e
phase "fuzzing, 120 s in all"
scripts/fuzz.sh --all --budget 120
fuzz_rc=$?
phase "fuzz regression inputs"
ctest --preset fuzz
fuzz_ctest_rc=$?
set -e

if [ "$release_rc" -ne 0 ]; then
  echo "release suite failed:"
  grep -E 'tests passed|Failed|\*\*\*' "$release_log" | tail -20
fi
rm -f "$release_log"
if [ "$asan_rc" -ne 0 ]; then
  echo "ASan+UBSan suite failed (its summary is above the TSan phase)"
fi
if [ "$fuzz_rc" -ne 0 ]; then
  echo "fuzzing found a crash (its input is printed in base64 above the regression phase)"
fi
[ "$release_rc" -eq 0 ] && [ "$asan_rc" -eq 0 ] && [ "$tsan_rc" -eq 0 ] &&
  [ "$fuzz_rc" -eq 0 ] && [ "$fuzz_ctest_rc" -eq 0 ]
