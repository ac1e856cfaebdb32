#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "gpu/nvml_api.h"

namespace gpool::gpu {

// The NVML entry points gpool calls, resolved from libnvidia-ml at run time. Members that the
// loaded library lacks stay null (only those marked required in nvml_library.cc must exist);
// callers test them before use and treat a null one as "not supported".
struct NvmlFunctions {
  nvmlReturn_t (*init)() = nullptr;  // nvmlInit_v2, else nvmlInit
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*errorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*systemGetDriverVersion)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*systemGetCudaDriverVersion)(int*) = nullptr;                     // _v2, else plain
  nvmlReturn_t (*deviceGetCount)(unsigned int*) = nullptr;                        // _v2, else plain
  nvmlReturn_t (*deviceGetHandleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;  // _v2, plain
  nvmlReturn_t (*deviceGetHandleByUUID)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*deviceGetUUID)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*deviceGetName)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*deviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;  // _v3, else _v2
  nvmlReturn_t (*deviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*deviceGetCudaComputeCapability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*deviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*deviceGetTemperature)(nvmlDevice_t, nvmlTemperatureSensors_t,
                                       unsigned int*) = nullptr;
  nvmlReturn_t (*deviceGetPowerUsage)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*deviceGetClockInfo)(nvmlDevice_t, nvmlClockType_t, unsigned int*) = nullptr;
  nvmlReturn_t (*deviceGetTotalEccErrors)(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
                                          unsigned long long*) = nullptr;
  nvmlReturn_t (*deviceGetTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t,
                                                  nvmlGpuTopologyLevel_t*) = nullptr;
  nvmlReturn_t (*deviceGetNvLinkState)(nvmlDevice_t, unsigned int, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*deviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int,
                                               nvmlPciInfo_t*) = nullptr;  // _v2 only
  nvmlReturn_t (*deviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int*) = nullptr;
  nvmlReturn_t (*deviceGetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*deviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*deviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int,
                                                  nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*deviceGetGpuInstanceId)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*deviceGetComputeInstanceId)(nvmlDevice_t, unsigned int*) = nullptr;
  // _v3, else _v2 (same struct); the unversioned one fills the shorter v1 struct.
  nvmlReturn_t (*deviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned int*,
                                                   nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*deviceGetComputeRunningProcessesV1)(nvmlDevice_t, unsigned int*,
                                                     nvmlProcessInfo_v1_t*) = nullptr;
  nvmlReturn_t (*eventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*deviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*eventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;  // _v2
  nvmlReturn_t (*eventSetFree)(nvmlEventSet_t) = nullptr;
};

// NvmlLibrary loads libnvidia-ml at run time, following Mesos's nvml.cpp: dlopen, a fixed table
// of symbols resolved with dlsym (the versioned `_v2`/`_v3` names first, then explicitly the
// older name where the signature is compatible; never by guessing suffixes), nvmlInit once, and
// the first error cached, so a node without a driver fails fast and the same way every time.
//
// Binaries never link NVML: on a machine without the driver `load()` simply returns Unavailable
// with the reason (dlerror's text), and nothing else changes.
//
// Thread-safety: `load()` may race from several threads (std::call_once); after a successful
// load, `functions()` is immutable and NVML itself is thread-safe.
class NvmlLibrary {
 public:
  static constexpr char kDefaultPath[] = "libnvidia-ml.so.1";

  // `path` is what dlopen gets: a soname searched the usual way, or a file (tests use a fake).
  explicit NvmlLibrary(std::string path = kDefaultPath);
  // Calls nvmlShutdown and dlclose if the load succeeded.
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // Loads, resolves and initialises on the first call; returns that first outcome on every
  // later call. Unavailable when the library is missing or NVML cannot initialise (no driver,
  // no GPU), Unimplemented when a required symbol is missing.
  Status load();
  bool isAvailable() { return load().isOk(); }

  // REQUIRES: load() returned OK.
  const NvmlFunctions& functions() const { return fns_; }

  // The Status for an NVML return code, e.g. Unavailable("nvmlDeviceGetUUID failed: GPU is
  // lost (NVML error 15)"). OK for NVML_SUCCESS.
  Status toStatus(nvmlReturn_t rc, std::string_view call) const;

  // (wanted name, name resolved or "" when absent) for every entry of the table, for
  // diagnostics (`gpool-gpu-probe --verbose`) and tests.
  const std::vector<std::pair<std::string, std::string>>& resolvedSymbols() const {
    return resolved_;
  }

  const std::string& path() const { return path_; }

 private:
  Status loadOnce();

  const std::string path_;
  std::once_flag once_;
  Status status_;           // written once inside call_once
  void* handle_ = nullptr;  // dlopen handle
  bool initialised_ = false;
  NvmlFunctions fns_;
  std::vector<std::pair<std::string, std::string>> resolved_;
};

// The process-wide library at the default path; never destroyed (shutting NVML down from a
// static destructor races other threads at exit).
NvmlLibrary& defaultNvmlLibrary();

// The StatusCode that `rc` maps to.
StatusCode nvmlStatusCode(nvmlReturn_t rc);

}  // namespace gpool::gpu
