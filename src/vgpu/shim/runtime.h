#pragma once

// Internal to libgpool-vgpu.so: process-wide state of the interposer. Nothing here is exported
// (the library is built with hidden visibility and a version script).

#include <cuda.h>
#include <cudaTypedefs.h>

// cuda.h renames cuGetProcAddress to cuGetProcAddress_v2; the interposer names both ABIs itself.
#undef cuGetProcAddress

#include <atomic>
#include <cstdint>

#include "vgpu/alloc_table.h"
#include "vgpu/nvml_abi.h"
#include "vgpu/shm_region.h"

namespace gpool::vgpu::shim {

inline constexpr int kMaxRegions = 16;

// The real driver entry points the hooks forward to, typed by the PFN typedefs of the exact ABI
// each hook implements. Resolved once in init() from libcuda.so.1 with libc's dlsym.
struct RealCuda {
  PFN_cuGetProcAddress_v11030 cuGetProcAddress;
  PFN_cuGetProcAddress_v12000 cuGetProcAddress_v2;
  PFN_cuCtxGetDevice_v2000 cuCtxGetDevice;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
  PFN_cuCtxCreate_v3020 cuCtxCreate_v2;
  PFN_cuCtxCreate_v11040 cuCtxCreate_v3;
  PFN_cuCtxCreate_v12050 cuCtxCreate_v4;
  PFN_cuMemGetInfo_v3020 cuMemGetInfo_v2;
  PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem_v2;
  PFN_cuMemAlloc_v3020 cuMemAlloc_v2;
  PFN_cuMemAllocPitch_v3020 cuMemAllocPitch_v2;
  PFN_cuMemAllocManaged_v6000 cuMemAllocManaged;
  PFN_cuMemFree_v3020 cuMemFree_v2;
  PFN_cuMemCreate_v10020 cuMemCreate;
  PFN_cuMemRelease_v10020 cuMemRelease;
  PFN_cuMemAllocAsync_v11020 cuMemAllocAsync;
  PFN_cuMemAllocAsync_v11020_ptsz cuMemAllocAsync_ptsz;
  PFN_cuMemAllocFromPoolAsync_v11020 cuMemAllocFromPoolAsync;
  PFN_cuMemAllocFromPoolAsync_v11020_ptsz cuMemAllocFromPoolAsync_ptsz;
  PFN_cuMemFreeAsync_v11020 cuMemFreeAsync;
  PFN_cuMemFreeAsync_v11020_ptsz cuMemFreeAsync_ptsz;
  PFN_cuArrayCreate_v3020 cuArrayCreate_v2;
  PFN_cuArray3DCreate_v3020 cuArray3DCreate_v2;
  PFN_cuArrayDestroy_v2000 cuArrayDestroy;
  PFN_cuArrayGetMemoryRequirements_v11060 cuArrayGetMemoryRequirements;
  PFN_cuMipmappedArrayCreate_v5000 cuMipmappedArrayCreate;
  PFN_cuMipmappedArrayDestroy_v5000 cuMipmappedArrayDestroy;
  PFN_cuMipmappedArrayGetMemoryRequirements_v11060 cuMipmappedArrayGetMemoryRequirements;
  PFN_cuGraphAddMemAllocNode_v11040 cuGraphAddMemAllocNode;
  PFN_cuGraphDestroy_v10000 cuGraphDestroy;
  PFN_cuLaunchKernel_v4000 cuLaunchKernel;
  PFN_cuLaunchKernel_v7000_ptsz cuLaunchKernel_ptsz;
  PFN_cuLaunchKernelEx_v11060 cuLaunchKernelEx;
  PFN_cuLaunchKernelEx_v11060_ptsz cuLaunchKernelEx_ptsz;
  PFN_cuLaunchCooperativeKernel_v9000 cuLaunchCooperativeKernel;
  PFN_cuLaunchCooperativeKernel_v9000_ptsz cuLaunchCooperativeKernel_ptsz;
  PFN_cuGraphLaunch_v10000 cuGraphLaunch;
  PFN_cuGraphLaunch_v10000_ptsz cuGraphLaunch_ptsz;
};

using NvmlGetMemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using NvmlGetMemoryInfoV2Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
using NvmlGetIndexFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using NvmlGetUuidFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using NvmlInitFn = nvmlReturn_t (*)();
using NvmlGetHandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using NvmlGetHandleByUuidFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using NvmlProcessUtilFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*,
                                           unsigned int*, unsigned long long);
using NvmlRunningProcsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);

struct RealNvml {
  NvmlInitFn nvmlInit_v2;
  NvmlGetMemoryInfoFn nvmlDeviceGetMemoryInfo;
  NvmlGetMemoryInfoV2Fn nvmlDeviceGetMemoryInfo_v2;
  NvmlGetIndexFn nvmlDeviceGetIndex;
  NvmlGetUuidFn nvmlDeviceGetUUID;
  NvmlGetHandleByIndexFn nvmlDeviceGetHandleByIndex_v2;
  NvmlGetHandleByUuidFn nvmlDeviceGetHandleByUUID;
  NvmlProcessUtilFn nvmlDeviceGetProcessUtilization;
  NvmlRunningProcsFn nvmlDeviceGetComputeRunningProcesses_v3;
};

// A task's region on one device plus this process's slot in it.
struct Region {
  ShmRegion* shm = nullptr;
  ShmHeader* header = nullptr;        // usage part
  const ShmLimits* limits = nullptr;  // limits part (read-only)
  std::atomic<int> slot{-1};          // attached lazily; -1 after fork
  std::atomic<bool> context_charged{false};
};

struct Runtime {
  RealCuda cuda{};
  RealNvml nvml{};
  void* libcuda = nullptr;
  void* libnvml = nullptr;
  int region_count = 0;
  Region regions[kMaxRegions];
  AllocationTable allocations;
  std::atomic<bool> watcher_started{false};
};

// Process-wide runtime, initialised on first use (thread-safe; reads the environment once).
Runtime& rt();

// libc's dlsym, never the hook.
using DlsymFn = void* (*)(void*, const char*);
DlsymFn realDlsym();

// The region governing CUDA device `device`, or null when that device is not limited.
Region* regionFor(int device);
// The region for the calling thread's current context (one call to the driver when several
// regions exist, none when there is one).
Region* regionForCurrent();
// This process's slot in `r`, attaching on first use; -1 when the region is full.
int slotOf(Region* r);
// Starts the control/reconciliation thread once per process (after fork: once per child).
void ensureWatcher();
// Blocks while the task is over its compute budget (the throttled path; not the hot path).
void waitForBudget(Region* r);

// Looks up the hook exported under `symbol` (exact ABI name); null when not hooked.
void* findHook(const char* symbol);

}  // namespace gpool::vgpu::shim
