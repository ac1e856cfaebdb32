// The exported hooks of libgpool-vgpu.so. Each implements exactly one driver ABI (named by its
// exported symbol) and forwards to the same ABI in the real driver. Memory hooks reserve against
// the task's quota before calling the driver and roll back when the driver fails; launch hooks
// pass the compute limiter first. See docs/vgpu.md.

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstring>

#include "vgpu/limiter.h"
#include "vgpu/proc_table.h"
#include "vgpu/shim/runtime.h"

#define GPOOL_EXPORT extern "C" __attribute__((visibility("default")))

using gpool::vgpu::AllocRecord;
using gpool::vgpu::ProcLookup;
using gpool::vgpu::resolveProc;
using gpool::vgpu::ShmHeader;
using gpool::vgpu::ShmLimits;
using gpool::vgpu::tryAcquireLaunch;
namespace shim = gpool::vgpu::shim;
using shim::Region;
using shim::rt;

namespace {

enum AllocKind : std::uint32_t {
  kLinear = 1,
  kManaged,
  kVmm,
  kAsync,
  kArray,
  kMipmapped,
  kGraph,
};

// Keys of the allocation table: device addresses and handles live in one map, so handle kinds
// that could collide with addresses get a tag in the top bits.
std::uint64_t handleKey(std::uint32_t kind, std::uint64_t handle) {
  return handle ^ (static_cast<std::uint64_t>(kind) << 56);
}

std::uint64_t alignUp(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) / a * a;
}

// Reserves `bytes` in `r` for this process. False: over quota (or no free slot: fail closed).
bool reserve(Region* r, std::uint64_t bytes) {
  const int slot = shim::slotOf(r);
  return slot >= 0 && r->shm->reserve(slot, bytes);
}

void release(Region* r, std::uint64_t bytes) {
  const int slot = r->slot.load(std::memory_order_acquire);
  if (slot >= 0) r->shm->release(slot, bytes);
}

// Adjusts a reservation made from an estimate to the driver's actual size. False when growing it
// would exceed the quota (the caller then undoes the allocation).
bool adjust(Region* r, std::uint64_t estimated, std::uint64_t actual) {
  if (actual > estimated) return reserve(r, actual - estimated);
  release(r, estimated - actual);
  return true;
}

void chargeContextOnce(int device) {
  Region* r = shim::regionFor(device);
  if (r == nullptr || r->context_charged.exchange(true)) return;
  const std::uint64_t bytes = r->limits->context_bytes.load(std::memory_order_relaxed);
  // The context exists already; a quota smaller than it must not break the program, so this
  // charge may exceed the quota (further allocations then fail with OUT_OF_MEMORY).
  const int slot = shim::slotOf(r);
  if (slot >= 0 && bytes > 0 && !r->shm->reserve(slot, bytes)) r->shm->forceReserve(slot, bytes);
}

void recordAllocation(std::uint64_t key, std::uint64_t bytes, std::uint32_t kind, Region* r) {
  rt().allocations.insert(
      key, AllocRecord{bytes, kind, static_cast<std::uint32_t>(r - &rt().regions[0])});
}

// Removes the record for `key` before the driver frees it (so the address cannot be reused and
// re-recorded in between); `restore` puts it back when the driver refuses.
struct PendingFree {
  std::uint64_t key = 0;
  AllocRecord rec{};
  bool found = false;
  explicit PendingFree(std::uint64_t k) : key(k) { found = rt().allocations.erase(key, &rec); }
  void finish(CUresult rc) {
    if (!found) return;
    if (rc != CUDA_SUCCESS) {
      rt().allocations.insert(key, rec);
      return;
    }
    Region* r = shim::regionFor(static_cast<int>(rec.device));
    if (r != nullptr) release(r, rec.bytes);
  }
};

inline void onLaunch(Region* r) {
  const int slot = shim::slotOf(r);
  if (slot >= 0) r->header->slots[slot].launches.fetch_add(1, std::memory_order_relaxed);
  if (!tryAcquireLaunch(r->header)) shim::waitForBudget(r);
  if (!rt().watcher_started.load(std::memory_order_relaxed)) shim::ensureWatcher();
}

// The driver's entry point for this hook; when it has none (an older driver, or no driver at
// all) the hook answers as a missing entry point would.
#define REAL_OR_FAIL(fn)                                                                \
  auto real_fn = rt().cuda.fn;                                                          \
  if (real_fn == nullptr) {                                                             \
    return rt().libcuda != nullptr ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_NOT_INITIALIZED; \
  }

template <typename Alloc>
CUresult linearAlloc(CUdeviceptr* dptr, std::uint64_t bytes, std::uint32_t kind, Region* r,
                     Alloc&& alloc) {
  if (r == nullptr) return alloc();
  if (!reserve(r, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = alloc();
  if (rc != CUDA_SUCCESS) {
    release(r, bytes);
    return rc;
  }
  recordAllocation(*dptr, bytes, kind, r);
  return rc;
}

}  // namespace

// --- contexts -------------------------------------------------------------------------------

GPOOL_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  REAL_OR_FAIL(cuDevicePrimaryCtxRetain);
  CUresult rc = real_fn(pctx, dev);
  if (rc == CUDA_SUCCESS) chargeContextOnce(dev);
  return rc;
}

GPOOL_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  REAL_OR_FAIL(cuCtxCreate_v2);
  CUresult rc = real_fn(pctx, flags, dev);
  if (rc == CUDA_SUCCESS) chargeContextOnce(dev);
  return rc;
}

GPOOL_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int n,
                                     unsigned int flags, CUdevice dev) {
  REAL_OR_FAIL(cuCtxCreate_v3);
  CUresult rc = real_fn(pctx, params, n, flags, dev);
  if (rc == CUDA_SUCCESS) chargeContextOnce(dev);
  return rc;
}

GPOOL_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                                     CUdevice dev) {
  REAL_OR_FAIL(cuCtxCreate_v4);
  CUresult rc = real_fn(pctx, params, flags, dev);
  if (rc == CUDA_SUCCESS) chargeContextOnce(dev);
  return rc;
}

// --- queries --------------------------------------------------------------------------------

GPOOL_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  REAL_OR_FAIL(cuMemGetInfo_v2);
  CUresult rc = real_fn(free_bytes, total_bytes);
  Region* r = shim::regionForCurrent();
  if (rc != CUDA_SUCCESS || r == nullptr || free_bytes == nullptr || total_bytes == nullptr) {
    return rc;
  }
  // The task sees its quota; usage above it (a context larger than the quota) reads as no free
  // memory, never as an error (HAMi#1370).
  const std::uint64_t total = std::min<std::uint64_t>(r->shm->quotaBytes(), *total_bytes);
  const std::uint64_t used = r->shm->usedBytes();
  const std::uint64_t free_quota = used >= total ? 0 : total - used;
  *total_bytes = total;
  *free_bytes = std::min<std::uint64_t>(free_quota, *free_bytes);
  return rc;
}

GPOOL_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  REAL_OR_FAIL(cuDeviceTotalMem_v2);
  CUresult rc = real_fn(bytes, dev);
  Region* r = shim::regionFor(dev);
  if (rc == CUDA_SUCCESS && r != nullptr && bytes != nullptr) {
    *bytes = std::min<std::uint64_t>(r->shm->quotaBytes(), *bytes);
  }
  return rc;
}

// --- linear, managed and stream-ordered memory ------------------------------------------------

GPOOL_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  REAL_OR_FAIL(cuMemAlloc_v2);
  if (dptr == nullptr || bytes == 0) return real_fn(dptr, bytes);
  return linearAlloc(dptr, bytes, kLinear, shim::regionForCurrent(),
                     [&] { return real_fn(dptr, bytes); });
}

GPOOL_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  REAL_OR_FAIL(cuMemAllocManaged);
  if (dptr == nullptr || bytes == 0) return real_fn(dptr, bytes, flags);
  // Managed memory can migrate to the device in full: counted at its full size.
  return linearAlloc(dptr, bytes, kManaged, shim::regionForCurrent(),
                     [&] { return real_fn(dptr, bytes, flags); });
}

GPOOL_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                         size_t height, unsigned int element_size) {
  REAL_OR_FAIL(cuMemAllocPitch_v2);
  Region* r = shim::regionForCurrent();
  if (r == nullptr || dptr == nullptr || pitch == nullptr || width == 0 || height == 0) {
    return real_fn(dptr, pitch, width, height, element_size);
  }
  // Reserve with the usual 512-byte row alignment, then correct to the driver's pitch.
  const std::uint64_t estimate = alignUp(width, 512) * height;
  if (!reserve(r, estimate)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real_fn(dptr, pitch, width, height, element_size);
  if (rc != CUDA_SUCCESS) {
    release(r, estimate);
    return rc;
  }
  const std::uint64_t actual = static_cast<std::uint64_t>(*pitch) * height;
  if (!adjust(r, estimate, actual)) {
    rt().cuda.cuMemFree_v2(*dptr);
    release(r, estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  recordAllocation(*dptr, actual, kLinear, r);
  return rc;
}

GPOOL_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REAL_OR_FAIL(cuMemFree_v2);
  PendingFree pending(dptr);
  CUresult rc = real_fn(dptr);
  pending.finish(rc);
  return rc;
}

GPOOL_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  REAL_OR_FAIL(cuMemAllocAsync);
  if (dptr == nullptr || bytes == 0) return real_fn(dptr, bytes, stream);
  return linearAlloc(dptr, bytes, kAsync, shim::regionForCurrent(),
                     [&] { return real_fn(dptr, bytes, stream); });
}

GPOOL_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  REAL_OR_FAIL(cuMemAllocAsync_ptsz);
  if (dptr == nullptr || bytes == 0) return real_fn(dptr, bytes, stream);
  return linearAlloc(dptr, bytes, kAsync, shim::regionForCurrent(),
                     [&] { return real_fn(dptr, bytes, stream); });
}

GPOOL_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                              CUstream stream) {
  REAL_OR_FAIL(cuMemAllocFromPoolAsync);
  if (dptr == nullptr || bytes == 0) return real_fn(dptr, bytes, pool, stream);
  return linearAlloc(dptr, bytes, kAsync, shim::regionForCurrent(),
                     [&] { return real_fn(dptr, bytes, pool, stream); });
}

GPOOL_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                   CUmemoryPool pool, CUstream stream) {
  REAL_OR_FAIL(cuMemAllocFromPoolAsync_ptsz);
  if (dptr == nullptr || bytes == 0) return real_fn(dptr, bytes, pool, stream);
  return linearAlloc(dptr, bytes, kAsync, shim::regionForCurrent(),
                     [&] { return real_fn(dptr, bytes, pool, stream); });
}

GPOOL_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  REAL_OR_FAIL(cuMemFreeAsync);
  PendingFree pending(dptr);
  CUresult rc = real_fn(dptr, stream);
  pending.finish(rc);
  return rc;
}

GPOOL_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  REAL_OR_FAIL(cuMemFreeAsync_ptsz);
  PendingFree pending(dptr);
  CUresult rc = real_fn(dptr, stream);
  pending.finish(rc);
  return rc;
}

// --- virtual memory management ----------------------------------------------------------------

GPOOL_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                  const CUmemAllocationProp* prop, unsigned long long flags) {
  REAL_OR_FAIL(cuMemCreate);
  // Only device-located physical memory counts; host locations (NCCL's cuMem host buffers)
  // pass through untouched, whatever their id (HAMi pain point 2).
  Region* r = nullptr;
  if (handle != nullptr && prop != nullptr && size > 0 &&
      prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    r = shim::regionFor(prop->location.id);
  }
  if (r == nullptr) return real_fn(handle, size, prop, flags);
  if (!reserve(r, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real_fn(handle, size, prop, flags);
  if (rc != CUDA_SUCCESS) {
    release(r, size);
    return rc;
  }
  recordAllocation(handleKey(kVmm, *handle), size, kVmm, r);
  return rc;
}

GPOOL_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  REAL_OR_FAIL(cuMemRelease);
  PendingFree pending(handleKey(kVmm, handle));
  CUresult rc = real_fn(handle);
  pending.finish(rc);
  return rc;
}

// --- arrays -----------------------------------------------------------------------------------

namespace {

std::uint64_t formatBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 8;  // unknown or block-compressed formats: over-estimate, then correct
  }
}

std::uint64_t estimate3d(std::size_t w, std::size_t h, std::size_t d, unsigned channels,
                         CUarray_format f) {
  return std::max<std::uint64_t>(w, 1) * std::max<std::uint64_t>(h, 1) *
         std::max<std::uint64_t>(d, 1) * std::max(channels, 1u) * formatBytes(f);
}

// Reserves an estimate, creates the array, then corrects the charge to the driver's own memory
// requirement (cuArrayGetMemoryRequirements) when the driver offers it.
template <typename Handle, typename Create, typename Requirements, typename Destroy>
CUresult createArray(Handle* out, std::uint64_t estimate, std::uint32_t kind, Create&& create,
                     Requirements requirements, Destroy destroy) {
  Region* r = shim::regionForCurrent();
  if (r == nullptr || out == nullptr) return create();
  if (!reserve(r, estimate)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = create();
  if (rc != CUDA_SUCCESS) {
    release(r, estimate);
    return rc;
  }
  std::uint64_t actual = estimate;
  CUdevice dev = static_cast<CUdevice>(r - &rt().regions[0]);
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  if (requirements != nullptr && requirements(&req, *out, dev) == CUDA_SUCCESS && req.size > 0) {
    actual = req.size;
  }
  if (!adjust(r, estimate, actual)) {
    destroy(*out);
    release(r, estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  recordAllocation(handleKey(kind, reinterpret_cast<std::uint64_t>(*out)), actual, kind, r);
  return rc;
}

}  // namespace

GPOOL_EXPORT CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  REAL_OR_FAIL(cuArrayCreate_v2);
  if (desc == nullptr) return real_fn(array, desc);
  return createArray(
      array, estimate3d(desc->Width, desc->Height, 1, desc->NumChannels, desc->Format), kArray,
      [&] { return real_fn(array, desc); }, rt().cuda.cuArrayGetMemoryRequirements,
      rt().cuda.cuArrayDestroy);
}

GPOOL_EXPORT CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  REAL_OR_FAIL(cuArray3DCreate_v2);
  if (desc == nullptr) return real_fn(array, desc);
  return createArray(
      array, estimate3d(desc->Width, desc->Height, desc->Depth, desc->NumChannels, desc->Format),
      kArray, [&] { return real_fn(array, desc); }, rt().cuda.cuArrayGetMemoryRequirements,
      rt().cuda.cuArrayDestroy);
}

GPOOL_EXPORT CUresult cuArrayDestroy(CUarray array) {
  REAL_OR_FAIL(cuArrayDestroy);
  PendingFree pending(handleKey(kArray, reinterpret_cast<std::uint64_t>(array)));
  CUresult rc = real_fn(array);
  pending.finish(rc);
  return rc;
}

GPOOL_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* array,
                                             const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                             unsigned int levels) {
  REAL_OR_FAIL(cuMipmappedArrayCreate);
  if (desc == nullptr) return real_fn(array, desc, levels);
  // A full mip chain is at most 4/3 (2D) or 8/7 (3D) of level 0: 4/3 bounds both.
  const std::uint64_t estimate =
      estimate3d(desc->Width, desc->Height, desc->Depth, desc->NumChannels, desc->Format) * 4 / 3;
  return createArray(
      array, estimate, kMipmapped, [&] { return real_fn(array, desc, levels); },
      rt().cuda.cuMipmappedArrayGetMemoryRequirements, rt().cuda.cuMipmappedArrayDestroy);
}

GPOOL_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  REAL_OR_FAIL(cuMipmappedArrayDestroy);
  PendingFree pending(handleKey(kMipmapped, reinterpret_cast<std::uint64_t>(array)));
  CUresult rc = real_fn(array);
  pending.finish(rc);
  return rc;
}

// --- graph memory nodes -------------------------------------------------------------------------

GPOOL_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph,
                                             const CUgraphNode* deps, size_t ndeps,
                                             CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  REAL_OR_FAIL(cuGraphAddMemAllocNode);
  Region* r = nullptr;
  if (params != nullptr && params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    r = shim::regionFor(params->poolProps.location.id);
  }
  if (r == nullptr || graph == nullptr) return real_fn(node, graph, deps, ndeps, params);
  // Charged from the moment the node exists until the graph is destroyed: an upper bound of what
  // the graph's memory pool can hold for it.
  const std::uint64_t bytes = params->bytesize;
  if (!reserve(r, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real_fn(node, graph, deps, ndeps, params);
  if (rc != CUDA_SUCCESS) {
    release(r, bytes);
    return rc;
  }
  const std::uint64_t key = handleKey(kGraph, reinterpret_cast<std::uint64_t>(graph));
  AllocRecord prev{};
  const std::uint64_t total = bytes + (rt().allocations.erase(key, &prev) ? prev.bytes : 0);
  recordAllocation(key, total, kGraph, r);
  return rc;
}

GPOOL_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
  REAL_OR_FAIL(cuGraphDestroy);
  PendingFree pending(handleKey(kGraph, reinterpret_cast<std::uint64_t>(graph)));
  CUresult rc = real_fn(graph);
  pending.finish(rc);
  return rc;
}

// --- launches -----------------------------------------------------------------------------------

GPOOL_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                     CUstream stream, void** params, void** extra) {
  REAL_OR_FAIL(cuLaunchKernel);
  if (Region* r = shim::regionForCurrent()) onLaunch(r);
  return real_fn(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

GPOOL_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                          CUstream stream, void** params, void** extra) {
  REAL_OR_FAIL(cuLaunchKernel_ptsz);
  if (Region* r = shim::regionForCurrent()) onLaunch(r);
  return real_fn(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

GPOOL_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                       void** extra) {
  REAL_OR_FAIL(cuLaunchKernelEx);
  if (Region* r = shim::regionForCurrent()) onLaunch(r);
  return real_fn(config, f, params, extra);
}

GPOOL_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                            void** params, void** extra) {
  REAL_OR_FAIL(cuLaunchKernelEx_ptsz);
  if (Region* r = shim::regionForCurrent()) onLaunch(r);
  return real_fn(config, f, params, extra);
}

GPOOL_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                unsigned bx, unsigned by, unsigned bz,
                                                unsigned shmem, CUstream stream, void** params) {
  REAL_OR_FAIL(cuLaunchCooperativeKernel);
  if (Region* r = shim::regionForCurrent()) onLaunch(r);
  return real_fn(f, gx, gy, gz, bx, by, bz, shmem, stream, params);
}

GPOOL_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                     unsigned gz, unsigned bx, unsigned by,
                                                     unsigned bz, unsigned shmem, CUstream stream,
                                                     void** params) {
  REAL_OR_FAIL(cuLaunchCooperativeKernel_ptsz);
  if (Region* r = shim::regionForCurrent()) onLaunch(r);
  return real_fn(f, gx, gy, gz, bx, by, bz, shmem, stream, params);
}

GPOOL_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  REAL_OR_FAIL(cuGraphLaunch);
  if (Region* r = shim::regionForCurrent()) onLaunch(r);
  return real_fn(exec, stream);
}

GPOOL_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  REAL_OR_FAIL(cuGraphLaunch_ptsz);
  if (Region* r = shim::regionForCurrent()) onLaunch(r);
  return real_fn(exec, stream);
}

// --- NVML ---------------------------------------------------------------------------------------

namespace {

Region* regionForNvml(nvmlDevice_t device) {
  shim::Runtime& r = rt();
  if (r.region_count == 0) return nullptr;
  char uuid[96] = {};
  const bool have_uuid = r.nvml.nvmlDeviceGetUUID != nullptr &&
                         r.nvml.nvmlDeviceGetUUID(device, uuid, sizeof(uuid)) == NVML_SUCCESS;
  unsigned int index = 0;
  const bool have_index = r.nvml.nvmlDeviceGetIndex != nullptr &&
                          r.nvml.nvmlDeviceGetIndex(device, &index) == NVML_SUCCESS;
  for (int i = 0; i < r.region_count; ++i) {
    const ShmLimits* h = r.regions[i].limits;
    if (h == nullptr) continue;
    if (h->device_uuid[0] != '\0' ? (have_uuid && std::strcmp(h->device_uuid, uuid) == 0)
                                  : (have_index && index == h->device_index)) {
      return &r.regions[i];
    }
  }
  return nullptr;
}

void virtualise(Region* reg, unsigned long long* total, unsigned long long* used,
                unsigned long long* free_bytes) {
  const unsigned long long t = std::min<unsigned long long>(reg->shm->quotaBytes(), *total);
  const unsigned long long u = std::min<unsigned long long>(reg->shm->usedBytes(), t);
  *total = t;
  *used = u;
  *free_bytes = t - u;
}

}  // namespace

GPOOL_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  auto real_fn = rt().nvml.nvmlDeviceGetMemoryInfo;
  if (real_fn == nullptr) {
    // Regions absent: NVML was never loaded by us; forward to whatever the program would get.
    real_fn = reinterpret_cast<shim::NvmlGetMemoryInfoFn>(
        shim::realDlsym()(RTLD_NEXT, "nvmlDeviceGetMemoryInfo"));
    if (real_fn == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  }
  nvmlReturn_t rc = real_fn(device, memory);
  if (rc != NVML_SUCCESS || memory == nullptr) return rc;
  if (Region* reg = regionForNvml(device)) {
    virtualise(reg, &memory->total, &memory->used, &memory->free);
  }
  return rc;
}

GPOOL_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  auto real_fn = rt().nvml.nvmlDeviceGetMemoryInfo_v2;
  if (real_fn == nullptr) {
    real_fn = reinterpret_cast<shim::NvmlGetMemoryInfoV2Fn>(
        shim::realDlsym()(RTLD_NEXT, "nvmlDeviceGetMemoryInfo_v2"));
    if (real_fn == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  }
  nvmlReturn_t rc = real_fn(device, memory);
  if (rc != NVML_SUCCESS || memory == nullptr) return rc;
  if (Region* reg = regionForNvml(device)) {
    virtualise(reg, &memory->total, &memory->used, &memory->free);
    memory->reserved = 0;
  }
  return rc;
}

// --- entry-point lookup: cuGetProcAddress and dlsym ----------------------------------------------

GPOOL_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                          cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* status) {
  REAL_OR_FAIL(cuGetProcAddress_v2);
  CUresult rc = real_fn(symbol, pfn, cuda_version, flags, status);
  if (rc != CUDA_SUCCESS || symbol == nullptr || pfn == nullptr || *pfn == nullptr) return rc;
  // The driver found the symbol; the generated table names the exact ABI it returned, and only
  // if we hook that ABI do we substitute our hook. Everything else (cuGetExportTable included)
  // passes through untouched.
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  gpool::vgpu::ProcResolution res = resolveProc(symbol, cuda_version, per_thread);
  if (res.lookup == ProcLookup::kFound) {
    if (void* hook = shim::findHook(res.entry->symbol)) *pfn = hook;
  }
  return rc;
}

// cuda.h maps the name cuGetProcAddress to cuGetProcAddress_v2; this is the 11.3 ABI.
#undef cuGetProcAddress
GPOOL_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                       cuuint64_t flags) {
  REAL_OR_FAIL(cuGetProcAddress);
  CUresult rc = real_fn(symbol, pfn, cuda_version, flags);
  if (rc != CUDA_SUCCESS || symbol == nullptr || pfn == nullptr || *pfn == nullptr) return rc;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  gpool::vgpu::ProcResolution res = resolveProc(symbol, cuda_version, per_thread);
  if (res.lookup == ProcLookup::kFound) {
    if (void* hook = shim::findHook(res.entry->symbol)) *pfn = hook;
  }
  return rc;
}

namespace {

// dlsym(RTLD_NEXT, ...) means "after the object that called dlsym", which glibc derives from the
// return address; calling libc's dlsym from here would make that object us. glibc >= 2.34 no
// longer exports _dl_sym (which took the caller explicitly), so the search is done by hand: walk
// the link map after the caller's object and take the first object that defines the symbol.
void* nextAfter(const void* caller, const char* name) {
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(caller, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return nullptr;
  }
  for (link_map* l = map->l_next; l != nullptr; l = l->l_next) {
    void* h = ::dlopen(l->l_name[0] != '\0' ? l->l_name : nullptr, RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) continue;
    void* sym = shim::realDlsym()(h, name);
    ::dlclose(h);
    if (sym == nullptr) continue;
    Dl_info where{};
    if (::dladdr(sym, &where) != 0 && where.dli_fbase == reinterpret_cast<void*>(l->l_addr)) {
      return sym;
    }
    if (::dladdr(sym, &where) != 0 && where.dli_fname != nullptr &&
        std::strcmp(where.dli_fname, l->l_name) == 0) {
      return sym;
    }
  }
  return nullptr;
}

}  // namespace

GPOOL_EXPORT void* dlsym(void* handle, const char* name) {
  shim::DlsymFn real = shim::realDlsym();
  if (real == nullptr) return nullptr;
  if (handle == RTLD_NEXT) return nextAfter(__builtin_return_address(0), name);
  void* sym = real(handle, name);
  if (sym == nullptr) return sym;
  // Only driver and NVML names are ours; everything else is untouched and costs one compare.
  if ((name[0] == 'c' && name[1] == 'u') || std::strncmp(name, "nvml", 4) == 0) {
    if (void* hook = shim::findHook(name)) return hook;
  }
  return sym;
}

namespace gpool::vgpu::shim {

struct HookEntry {
  const char* symbol;
  void* fn;
};

#define HOOK(name) \
  { #name, reinterpret_cast < void*>(&::name) }
const HookEntry kHooks[] = {
    HOOK(cuArray3DCreate_v2),
    HOOK(cuArrayCreate_v2),
    HOOK(cuArrayDestroy),
    HOOK(cuCtxCreate_v2),
    HOOK(cuCtxCreate_v3),
    HOOK(cuCtxCreate_v4),
    HOOK(cuDevicePrimaryCtxRetain),
    HOOK(cuDeviceTotalMem_v2),
    HOOK(cuGetProcAddress),
    HOOK(cuGetProcAddress_v2),
    HOOK(cuGraphAddMemAllocNode),
    HOOK(cuGraphDestroy),
    HOOK(cuGraphLaunch),
    HOOK(cuGraphLaunch_ptsz),
    HOOK(cuLaunchCooperativeKernel),
    HOOK(cuLaunchCooperativeKernel_ptsz),
    HOOK(cuLaunchKernel),
    HOOK(cuLaunchKernelEx),
    HOOK(cuLaunchKernelEx_ptsz),
    HOOK(cuLaunchKernel_ptsz),
    HOOK(cuMemAllocAsync),
    HOOK(cuMemAllocAsync_ptsz),
    HOOK(cuMemAllocFromPoolAsync),
    HOOK(cuMemAllocFromPoolAsync_ptsz),
    HOOK(cuMemAllocManaged),
    HOOK(cuMemAllocPitch_v2),
    HOOK(cuMemAlloc_v2),
    HOOK(cuMemCreate),
    HOOK(cuMemFreeAsync),
    HOOK(cuMemFreeAsync_ptsz),
    HOOK(cuMemFree_v2),
    HOOK(cuMemGetInfo_v2),
    HOOK(cuMemRelease),
    HOOK(cuMipmappedArrayCreate),
    HOOK(cuMipmappedArrayDestroy),
    HOOK(nvmlDeviceGetMemoryInfo),
    HOOK(nvmlDeviceGetMemoryInfo_v2),
};
#undef HOOK

void* findHook(const char* symbol) {
  for (const HookEntry& h : kHooks) {
    if (std::strcmp(h.symbol, symbol) == 0) return h.fn;
  }
  return nullptr;
}

}  // namespace gpool::vgpu::shim
