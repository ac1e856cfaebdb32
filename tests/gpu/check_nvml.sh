#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU: builds gpool-gpu-probe, runs it against the real
# driver (NVML loaded at run time) and prints what it found: inventory, topology, MIG,
# telemetry, processes, health findings, the NVML symbols resolved, and the CPU cost of one
# telemetry sample of every GPU. Without a GPU or driver it says so and exits 0 (skipped).
#
# Usage: tests/gpu/check_nvml.sh [build-dir]   (default build/gpu-check)
# Exit: 0 passed or skipped, 1 the probe failed on a machine that has a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir="${1:-build/gpu-check}"

have_gpu=0
if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then have_gpu=1; fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi
if [ "$have_gpu" -eq 0 ]; then
  echo "check_nvml: SKIPPED: no NVIDIA GPU on this machine (no /dev/nvidia*, no working nvidia-smi)"
  exit 0
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then
  echo "check_nvml: note: libnvidia-ml.so.1 is not in the ldconfig cache; relying on the loader path"
fi

echo "== building gpool-gpu-probe in $build_dir =="
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPOOL_BUILD_TESTS=OFF \
  -DGPOOL_BUILD_BENCH=OFF >/dev/null
cmake --build "$build_dir" --target gpool-gpu-probe -j "$(nproc)"
probe="$build_dir/src/gpu/gpool-gpu-probe"

if command -v nvidia-smi >/dev/null 2>&1; then
  echo "== nvidia-smi -L (for comparison) =="
  nvidia-smi -L || true
fi

echo "== gpool-gpu-probe (real NVML) =="
set +e
"$probe" --verbose --samples 200
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "check_nvml: FAILED: gpool-gpu-probe exited with $rc on a machine with a GPU"
  exit 1
fi

echo "== gpool-gpu-probe --json =="
json=$("$probe" --json)
echo "$json"
# The real driver must never be labelled simulated, and must report at least one GPU.
if echo "$json" | grep -q '"simulated": true'; then
  echo "check_nvml: FAILED: real NVML output is labelled simulated"
  exit 1
fi
if ! echo "$json" | grep -q '"uuid": "GPU-'; then
  echo "check_nvml: FAILED: no GPU UUID in the inventory"
  exit 1
fi
echo "check_nvml: PASSED"
