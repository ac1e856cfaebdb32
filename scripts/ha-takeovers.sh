#!/usr/bin/env bash
# The takeover figures of docs/ha.md: two gpoold with [ha] on one PostgreSQL server and a real
# agent; the leader SIGKILLed N times (default 20) under steady `gpool submit`s and a running
# job, each time started again as a standby (tests/controller/agent_e2e_test.cc,
# HaTakeoverProfileTest.RepeatedTakeoversUnderLoad). Prints p50/max of the time from the
# SIGKILL to the new leader's `ready` and to the end of a job submitted right after it, and
# checks that every acknowledged submission is there once, nothing ran twice and the running
# job never stopped.
#
#   scripts/ha-takeovers.sh [--takeovers N] [--lease 6s] [--preset ci-release]
#
# Needs root (the test user runs the jobs) and PostgreSQL's server (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

takeovers=20
lease=6s
preset=ci-release
while [ $# -gt 0 ]; do
  case "$1" in
    --takeovers) takeovers=$2; shift ;;
    --lease) lease=$2; shift ;;
    --preset) preset=$2; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "ha-takeovers: unknown argument '$1' (--takeovers N, --lease DURATION, --preset NAME)" >&2
       exit 2 ;;
  esac
  shift
done

cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target agent_e2e_test gpoold gpool-agent gpool-supervisor gpool
GPOOL_HA_TAKEOVERS=$takeovers GPOOL_HA_LEASE=$lease \
  "build/$preset/tests/controller/agent_e2e_test" \
  --gtest_filter=HaTakeoverProfileTest.RepeatedTakeoversUnderLoad
