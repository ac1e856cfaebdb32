#!/usr/bin/env bash
# The system tests (tests/system; docs/reliability.md): the pool run as a distributed system,
# each host in its own network namespace, faults injected, a checker over the tasks' own records.
#
#   scripts/system-tests.sh           the short profile, as CI runs it (ctest -L system)
#   scripts/system-tests.sh --full    the long profile: larger scenarios and the load of
#                                     200 agents / 50,000 jobs from 100 clients
#   scripts/system-tests.sh --full --filter 'SystemTest.Load*'   one scenario (gtest filter)
#
# Builds what the scenarios run (release preset unless --preset), runs them one after another
# (not in parallel: the figures are timings) and prints every scenario's figures as a table
# (jobs, faults injected, double-run seconds, lost jobs, recovery times, latency percentiles).
# Needs root for network namespaces, tmpfs mounts and the test user; without root the scenarios
# run over loopback and those that need root say why they skip. Exit status: the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=short
preset=ci-release
filter='SystemTest.*:RequeueScenario.*:DownScenario.*'
while [ $# -gt 0 ]; do
  case "$1" in
    --full) profile=full ;;
    --preset) preset=$2; shift ;;
    --filter) filter=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "system-tests: unknown argument '$1' (--full, --preset NAME, --filter PATTERN)" >&2
       exit 2 ;;
  esac
  shift
done

build=build/$preset
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target system_test gpool-system-helper gpool gpoold \
  gpool-agent gpool-supervisor

figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
export GPOOL_SYSTEM_PROFILE=$profile GPOOL_SYSTEM_FIGURES=$figures
echo "== system tests, $profile profile, $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%M:%SZ) =="
set +e
"$build/tests/system/system_test" --gtest_filter="$filter"
rc=$?
set -e
echo
echo "== figures ($profile profile) =="
"$build/tests/system/gpool-system-helper" table "$figures"
exit $rc
