#!/usr/bin/env bash
# Checks libgpool-vgpu.so on a machine with a real NVIDIA GPU (it cannot run in CI, which has
# none; without a GPU and driver it says so and exits 0). It builds the interposer, then:
#   1. a driver-API program under a memory quota: OOM point, cuMemGetInfo, cuDeviceTotalMem;
#   2. PyTorch (if installed) under the quota: torch.cuda.mem_get_info and the OOM point;
#   3. two processes at 30% / 70% compute shares: throughput of each;
#   4. the overhead per launch, allocation and query against running without the interposer.
# Prints every figure; finishes within 5 minutes. Usage: tests/gpu/check_vgpu.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)

libcuda=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')
if ! command -v nvidia-smi >/dev/null 2>&1 || [ -z "$libcuda" ] || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "check_vgpu: SKIP: no NVIDIA GPU or driver here (nvidia-smi or libcuda.so.1 missing)"
  exit 0
fi
nvidia-smi -L | head -1

build=${1:-build/check-vgpu}
cuda_inc=${CUDA_INCLUDE:-/usr/local/cuda/include}
echo "== building the interposer in $build (g++ only: a GPU machine need not have gpool's deps)"
mkdir -p "$build"
cxx="g++ -std=c++20 -O2 -fPIC -Isrc -isystem $cuda_inc"
core="src/common/status.cc src/vgpu/proc_table.cc src/vgpu/shm_region.cc src/vgpu/limiter.cc
      src/vgpu/alloc_table.cc"
$cxx -shared -fvisibility=hidden -fvisibility-inlines-hidden -fno-exceptions \
  src/vgpu/shim/runtime.cc src/vgpu/shim/hooks.cc $core \
  -Wl,--version-script=src/vgpu/shim/exports.map -Wl,-z,nodelete -ldl -lpthread \
  -o "$build/libgpool-vgpu.so" || exit 1
$cxx src/vgpu/region_tool.cc $core -o "$build/gpool-vgpu-region" || exit 1
shim="$build/libgpool-vgpu.so"
region_tool="$build/gpool-vgpu-region"
driver="$build/vgpu_check_driver"
g++ -std=c++17 -O2 -isystem "$cuda_inc" tests/gpu/vgpu_check_driver.cc "$libcuda" \
  -o "$driver" || exit 1

work=$(mktemp -d /tmp/gpool-check-vgpu-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
quota_mib=4096

echo "== 1. driver API under a ${quota_mib} MiB quota"
"$region_tool" create "$work/mem" "$quota_mib" 1000 wc 0 || exit 1
out=$(GPOOL_VGPU_REGIONS="$work/mem" LD_PRELOAD="$shim" timeout 60 "$driver" oom 64)
echo "$out"
total=$(awk '/mem_get_info_total_mib/{print $2}' <<<"$out")
alloc=$(awk '/allocated_mib/{print $2}' <<<"$out")
stop=$(awk '/stop_error/{print $2}' <<<"$out")
[ "$total" = "$quota_mib" ] || { echo "FAIL: cuMemGetInfo total $total != quota $quota_mib"; fail=1; }
[ "$stop" = "CUDA_ERROR_OUT_OF_MEMORY" ] || { echo "FAIL: stopped with $stop"; fail=1; }
[ -n "$alloc" ] && [ "$alloc" -le "$quota_mib" ] && [ "$alloc" -ge $((quota_mib - 1024)) ] ||
  { echo "FAIL: allocated $alloc MiB under a $quota_mib MiB quota"; fail=1; }
"$region_tool" show "$work/mem" | head -4

echo "== 2. PyTorch under a ${quota_mib} MiB quota"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  "$region_tool" create "$work/torch" "$quota_mib" 1000 wc 0 || exit 1
  GPOOL_VGPU_REGIONS="$work/torch" LD_PRELOAD="$shim" timeout 120 python3 - "$quota_mib" <<'PY'
import sys, torch
quota = int(sys.argv[1]) << 20
free, total = torch.cuda.mem_get_info()
print(f"torch_mem_get_info_total_mib {total >> 20}")
print(f"torch_mem_get_info_free_mib {free >> 20}")
blocks = []
try:
    while True:
        blocks.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError:
    pass
print(f"torch_allocated_mib {len(blocks) * 256}")
ok = total == quota and len(blocks) * (256 << 20) <= quota
del blocks
torch.cuda.empty_cache()
print("torch_check", "ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
  [ $? -eq 0 ] || fail=1
else
  echo "PyTorch with CUDA not installed: skipped"
fi

echo "== 3. two processes at 30% and 70% (10 s, 5 ms kernels)"
alone=$(timeout 60 "$driver" spin 5 5 | awk '/kernels_per_s/{print $2}')
echo "alone_kernels_per_s $alone"
"$region_tool" create "$work/a" 1000000 300 wc 0 100000 || exit 1
"$region_tool" create "$work/b" 1000000 700 wc 0 100000 || exit 1
GPOOL_VGPU_REGIONS="$work/a" LD_PRELOAD="$shim" timeout 60 "$driver" spin 5 10 >"$work/a.out" &
pa=$!
GPOOL_VGPU_REGIONS="$work/b" LD_PRELOAD="$shim" timeout 60 "$driver" spin 5 10 >"$work/b.out" &
pb=$!
wait $pa $pb
ka=$(awk '/kernels_per_s/{print $2}' "$work/a.out")
kb=$(awk '/kernels_per_s/{print $2}' "$work/b.out")
echo "share30_kernels_per_s $ka"
echo "share70_kernels_per_s $kb"
awk -v a="$ka" -v b="$kb" -v s="$alone" 'BEGIN {
  if (a + b == 0) { print "FAIL: no throughput"; exit 1 }
  printf "share30_fraction %.3f (target 0.30 +/- 0.05)\nshare70_fraction %.3f\n", a/(a+b), b/(a+b)
  printf "combined_vs_alone %.3f\n", (a+b)/s
  exit (a/(a+b) > 0.25 && a/(a+b) < 0.35) ? 0 : 1 }' || fail=1
"$region_tool" show "$work/a" | sed -n '5,9p'

echo "== 4. overhead against running without the interposer"
"$region_tool" create "$work/ovh" 1000000 1000 wc 0 || exit 1
plain=$(timeout 60 "$driver" overhead 200000)
hooked=$(GPOOL_VGPU_REGIONS="$work/ovh" LD_PRELOAD="$shim" timeout 60 "$driver" overhead 200000)
paste <(echo "$plain") <(echo "$hooked") | awk '{
  printf "%-16s plain %9.1f ns  interposed %9.1f ns  added %8.1f ns\n", $1, $2, $4, $4 - $2 }'

echo "check_vgpu: $(( $(date +%s) - start )) s, $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
