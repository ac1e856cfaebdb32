#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (docs/fuzzing.md), building them first (preset fuzz).
#
#   scripts/fuzz.sh TARGET [--minutes N | --seconds N] [-- LIBFUZZER_FLAGS...]
#       one target for a while (default 10 minutes)
#   scripts/fuzz.sh --all --budget SECONDS
#       every target, SECONDS of wall time in all, as many at once as there are CPUs (CI);
#       with a fixed seed, so that a CI run tries the same inputs in the same order as the last
#       one (finding new crashes is the job of long runs, which draw a new seed each time)
#   scripts/fuzz.sh --list
#
# Inputs that found new coverage are kept in build/fuzz/corpus-work/TARGET/ (reused by the next
# run, not committed); the committed seeds (tests/fuzz/corpus/TARGET/) and regression inputs
# (tests/fuzz/regressions/TARGET/) are read too. Each run prints its figures: executions,
# coverage (edges and features), corpus size. A crash, leak, hang (one input over 10 s) or
# runaway memory (2 GiB) fails the run; the input is saved under build/fuzz/artifacts/TARGET/
# and printed in base64, so that it can be recreated from a CI log and kept as a regression
# input once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(http_router agent_protocol json_models config sim_traces vgpu_region)

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

# The longest input worth trying per target (libFuzzer's -max_len), a little above the largest
# seed: longer inputs mostly repeat what shorter ones cover, and cost time.
max_len() {
  case "$1" in
    http_router) echo 4096 ;;
    vgpu_region) echo 1024 ;;
    json_models) echo 4096 ;;
    *) echo 8192 ;;
  esac
}

build() {
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$(nproc)" "$@"
}

# run_target TARGET SECONDS [FLAGS...]: runs one target, prints its figures; returns its status.
run_target() {
  local target=$1 seconds=$2
  shift 2
  local bin=build/fuzz/tests/fuzz/fuzz_$target
  local work=build/fuzz/corpus-work/$target
  local artifacts=build/fuzz/artifacts/$target
  local log=build/fuzz/logs/$target.log
  mkdir -p "$work" "$artifacts" build/fuzz/logs
  local dirs=("$work")
  for d in "tests/fuzz/corpus/$target" "tests/fuzz/regressions/$target"; do
    if [ -d "$d" ]; then dirs+=("$d"); fi
  done
  local dict=()
  if [ -f "tests/fuzz/$target.dict" ]; then dict=("-dict=tests/fuzz/$target.dict"); fi
  local rc=0
  # -entropic=0: clang 14's entropic schedule spent 56% of agent_protocol's time updating
  # feature frequencies; without it the targets ran 2.5-4.5x the executions per second and
  # reached as many features in the same number of runs.
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -entropic=0 \
    -max_len="$(max_len "$target")" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dict[@]}" "$@" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  # libFuzzer's last status line ("#N DONE cov: C ft: F corp: I/S ...") and final stats.
  local status runs cov ft corp
  status=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)
  cov=$(sed -nE 's/.* cov: ([0-9]+) .*/\1/p' <<<"$status")
  ft=$(sed -nE 's/.* ft: ([0-9]+) .*/\1/p' <<<"$status")
  corp=$(sed -nE 's/.* corp: ([0-9]+\/[0-9]+[a-zA-Z]*) .*/\1/p' <<<"$status")
  printf 'fuzz %-14s %9s executions in %3s s (%s/s), coverage %s edges, %s features, corpus %s\n' \
    "$target" "${runs:-?}" "$seconds" "$(( ${runs:-0} / (seconds > 0 ? seconds : 1) ))" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz $target FAILED (exit $rc); the end of its log ($log):"
    grep -vE '^(#[0-9]+|INFO:|\s*$)' "$log" | tail -60
    local crash
    crash=$(ls -t "$artifacts"/* 2>/dev/null | head -1 || true)
    if [ -n "$crash" ]; then
      echo "input: $crash (base64: $(base64 -w0 "$crash"))"
      echo "once fixed, keep it: cp $crash tests/fuzz/regressions/$target/<what-it-broke>"
    fi
  fi
  return "$rc"
}

case "${1:-}" in
  "" | -h | --help) usage ;;
  --list)
    printf '%s\n' "${TARGETS[@]}"
    exit 0
    ;;
  --all)
    [ "${2:-}" = "--budget" ] && [ -n "${3:-}" ] || usage
    budget=$3
    build
    jobs=$(nproc)
    # Rounds of `jobs` targets at once share the budget.
    rounds=$(( (${#TARGETS[@]} + jobs - 1) / jobs ))
    seconds=$(( budget / rounds ))
    echo "fuzzing ${#TARGETS[@]} targets, $seconds s each, $jobs at a time"
    export -f run_target max_len
    # -seed=1: a CI gate must not fail on a crash that an earlier run, on the same code, did
    # not reach (the 2026-12-07 CI run failed on a sim_traces input no run had drawn before).
    printf '%s\n' "${TARGETS[@]}" |
      xargs -P "$jobs" -I{} bash -c 'run_target "$1" "$2" -seed=1' _ {} "$seconds"
    ;;
  *)
    target=$1
    shift
    seconds=600
    while [ $# -gt 0 ]; do
      case "$1" in
        --minutes) seconds=$(( $2 * 60 )); shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --) shift; break ;;
        *) usage ;;
      esac
    done
    if [ ! -f "tests/fuzz/${target}_fuzz.cc" ]; then
      echo "fuzz.sh: no target '$target' (scripts/fuzz.sh --list)"
      exit 2
    fi
    build --target "fuzz_$target"
    run_target "$target" "$seconds" "$@"
    ;;
esac
