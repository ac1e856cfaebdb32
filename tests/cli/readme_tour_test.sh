#!/usr/bin/env bash
# The README's "A short tour", run as printed there: the commands are read from README.md itself
# (the ```sh block under "## A short tour"), with `build/release/` pointed at the build under
# test, in the source folder as the README assumes, and each must exit 0. A pool started by the
# tour lives in a temporary GPOOL_UP_DIR and is stopped even when a command fails.
#
# A line is left out only when it matches SKIPPED below, each with its reason; any other line
# added to the tour is run by this test.
#
# usage: readme_tour_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail

source_dir=$1
build_dir=$2
readme=$source_dir/README.md

# pattern (extended regex) => the exit code it must have when the tour runs as root, and why
AS_ROOT='
 submit  => 4 => gpoold refuses root'"'"'s jobs at submission (docs/security.md); as any other user it exits 0
'

# pattern (extended regex) => why the test does not run it
SKIPPED='
--variants => runs every openb workload x policy (~13 min): bench territory, not a test
sim dynamic => replays a trace for minutes; tests/sim covers the simulator
gpool-gpu-probe +(#|$) => reads NVML from a real GPU: tests/gpu/ runs it on a GPU machine
controller_bench => minutes at 1,000 nodes and 100k jobs: a benchmark, not a test
^cmake --build => builds the release preset; the tour runs against the build under test
'

work=$(mktemp -d /tmp/gpool-tour-XXXXXX)
# As /var/lib/gpool/up is for root's real pool: the demo users must reach the socket inside it.
chmod 755 "$work"
export GPOOL_UP_DIR=$work/pool
gpool_bin=$build_dir/src/cli/gpool
cleanup() {
  if [ -f "$GPOOL_UP_DIR/pool.json" ]; then
    "$gpool_bin" down --timeout 10 >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT

tour=$(awk '/^## A short tour/ { in_tour = 1 }
            in_tour && /^```sh/ { in_block = 1; next }
            in_block && /^```/ { exit }
            in_block { print }' "$readme")
if [ -z "$tour" ]; then
  echo "readme_tour_test: no \`\`\`sh block under '## A short tour' in $readme" >&2
  exit 1
fi

script=$work/tour.sh
: >"$script"
ran=0
skipped=0
while IFS= read -r line; do
  command=${line%%#*}
  if [ -z "${command// /}" ]; then continue; fi  # a comment-only line
  reason=""
  while IFS= read -r rule; do
    [ -z "$rule" ] && continue
    pattern=${rule%% => *}
    if [[ "$line" =~ $pattern ]]; then reason=${rule#* => }; fi
  done <<<"$SKIPPED"
  if [ -n "$reason" ]; then
    echo "skipped: $line"
    echo "         ($reason)"
    skipped=$((skipped + 1))
    continue
  fi
  command_line=${line//build\/release\//$build_dir/}
  want=""
  if [ "$(id -u)" = 0 ]; then
    while IFS= read -r rule; do
      [ -z "$rule" ] && continue
      pattern=${rule%% => *}
      if [[ "$line" =~ $pattern ]]; then want=${rule#* => }; want=${want%% => *}; fi
    done <<<"$AS_ROOT"
  fi
  if [ -n "$want" ]; then
    # Run it, and require its documented refusal instead of success.
    printf '%s\n' "rc=0; ${command_line%%#*} || rc=\$?; [ \"\$rc\" = $want ] || { echo \"expected exit $want as root, got \$rc\" >&2; false; }" >>"$script"
  else
    printf '%s\n' "$command_line" >>"$script"
  fi
  ran=$((ran + 1))
done <<<"$tour"

echo "running $ran tour commands ($skipped skipped) from $readme"
cd "$source_dir" || exit 1
# -e: the first failing command ends the tour; the ERR trap names it.
bash -e -o pipefail -c "trap 'echo \"readme_tour_test: FAILED (exit \$?): \$BASH_COMMAND\" >&2' ERR
PS4='+ tour\$ '
set -x
source '$script'" 2>&1 | tee "$work/tour.out"
rc=${PIPESTATUS[0]}
[ "$rc" -ne 0 ] && exit "$rc"
echo "readme_tour_test: all $ran commands exited 0"

# What the tour promises besides exit codes: the demo's jobs reach the pool (all but the one
# meant to exceed its quota) and `gpool queue --all` lists them.
fail=0
refused=$(grep -v '^ *too-big ' "$work/tour.out" | grep 'not submitted')
if [ -n "$refused" ]; then
  echo "readme_tour_test: FAILED: gpool up --demo did not submit every demo job:" >&2
  echo "$refused" >&2
  fail=1
fi
demo_jobs=$(sed -n '/gpool queue --all$/,/^+/p' "$work/tour.out" | grep -c 'gpool-demo-')
if [ "$demo_jobs" -lt 5 ]; then
  echo "readme_tour_test: FAILED: gpool queue --all listed $demo_jobs demo jobs, expected >= 5" >&2
  fail=1
fi
exit "$fail"
