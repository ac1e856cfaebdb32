#include "gpu/nvml_library.h"

#include <dlfcn.h>

namespace gpool::gpu {

StatusCode nvmlStatusCode(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS: return StatusCode::kOk;
    case NVML_ERROR_UNINITIALIZED: return StatusCode::kFailedPrecondition;
    case NVML_ERROR_INVALID_ARGUMENT: return StatusCode::kInvalidArgument;
    case NVML_ERROR_NOT_SUPPORTED: return StatusCode::kUnimplemented;
    case NVML_ERROR_NO_PERMISSION: return StatusCode::kPermissionDenied;
    case NVML_ERROR_ALREADY_INITIALIZED: return StatusCode::kFailedPrecondition;
    case NVML_ERROR_NOT_FOUND: return StatusCode::kNotFound;
    case NVML_ERROR_INSUFFICIENT_SIZE: return StatusCode::kOutOfRange;
    case NVML_ERROR_INSUFFICIENT_POWER: return StatusCode::kUnavailable;
    case NVML_ERROR_DRIVER_NOT_LOADED: return StatusCode::kUnavailable;
    case NVML_ERROR_TIMEOUT: return StatusCode::kDeadlineExceeded;
    case NVML_ERROR_IRQ_ISSUE: return StatusCode::kUnavailable;
    case NVML_ERROR_LIBRARY_NOT_FOUND: return StatusCode::kUnavailable;
    case NVML_ERROR_FUNCTION_NOT_FOUND: return StatusCode::kUnimplemented;
    case NVML_ERROR_CORRUPTED_INFOROM: return StatusCode::kInternal;
    case NVML_ERROR_GPU_IS_LOST: return StatusCode::kUnavailable;
    case NVML_ERROR_RESET_REQUIRED: return StatusCode::kUnavailable;
    case NVML_ERROR_OPERATING_SYSTEM: return StatusCode::kIoError;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return StatusCode::kFailedPrecondition;
    case NVML_ERROR_IN_USE: return StatusCode::kAborted;
    case NVML_ERROR_MEMORY: return StatusCode::kResourceExhausted;
    case NVML_ERROR_NO_DATA: return StatusCode::kNotFound;
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return StatusCode::kUnimplemented;
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return StatusCode::kResourceExhausted;
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return StatusCode::kUnimplemented;
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return StatusCode::kFailedPrecondition;
    case NVML_ERROR_DEPRECATED: return StatusCode::kUnimplemented;
    case NVML_ERROR_NOT_READY: return StatusCode::kUnavailable;
    case NVML_ERROR_GPU_NOT_FOUND: return StatusCode::kNotFound;
    case NVML_ERROR_INVALID_STATE: return StatusCode::kFailedPrecondition;
    case NVML_ERROR_UNKNOWN: return StatusCode::kInternal;
  }
  return StatusCode::kInternal;
}

NvmlLibrary::NvmlLibrary(std::string path) : path_(std::move(path)) {}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_ && fns_.shutdown) fns_.shutdown();
  if (handle_) ::dlclose(handle_);
}

Status NvmlLibrary::load() {
  std::call_once(once_, [this] { status_ = loadOnce(); });
  return status_;
}

Status NvmlLibrary::toStatus(nvmlReturn_t rc, std::string_view call) const {
  if (rc == NVML_SUCCESS) return Status::ok();
  std::string text = fns_.errorString ? fns_.errorString(rc) : "";
  if (text.empty()) text = "unknown error";
  return Status(nvmlStatusCode(rc), std::string(call) + " failed: " + text + " (NVML error " +
                                        std::to_string(static_cast<int>(rc)) + ")");
}

namespace {

template <typename Fn>
void resolve(void* handle, std::vector<std::pair<std::string, std::string>>& resolved, Fn& out,
             const char* name, const char* fallback = nullptr) {
  const char* found = nullptr;
  void* symbol = ::dlsym(handle, name);
  if (symbol) {
    found = name;
  } else if (fallback && (symbol = ::dlsym(handle, fallback)) != nullptr) {
    found = fallback;
  }
  out = reinterpret_cast<Fn>(symbol);
  resolved.emplace_back(name, found ? found : "");
}

}  // namespace

Status NvmlLibrary::loadOnce() {
  // RTLD_LOCAL keeps NVML's symbols out of the global namespace (a preloaded interposer must
  // not bind to them by accident); RTLD_NOW surfaces a broken install here, not mid-call.
  handle_ = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* error = ::dlerror();
    return Status::unavailable(
        "cannot load NVML from '" + path_ +
        "' (is the NVIDIA driver installed?): " + (error ? error : "unknown dlopen error"));
  }
  NvmlFunctions& f = fns_;
  auto& r = resolved_;
  resolve(handle_, r, f.init, "nvmlInit_v2", "nvmlInit");
  resolve(handle_, r, f.shutdown, "nvmlShutdown");
  resolve(handle_, r, f.errorString, "nvmlErrorString");
  resolve(handle_, r, f.systemGetDriverVersion, "nvmlSystemGetDriverVersion");
  resolve(handle_, r, f.systemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion_v2",
          "nvmlSystemGetCudaDriverVersion");
  resolve(handle_, r, f.deviceGetCount, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  resolve(handle_, r, f.deviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2",
          "nvmlDeviceGetHandleByIndex");
  resolve(handle_, r, f.deviceGetHandleByUUID, "nvmlDeviceGetHandleByUUID");
  resolve(handle_, r, f.deviceGetUUID, "nvmlDeviceGetUUID");
  resolve(handle_, r, f.deviceGetName, "nvmlDeviceGetName");
  // The unversioned nvmlDeviceGetPciInfo fills an older, shorter struct: no fallback to it.
  resolve(handle_, r, f.deviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
  resolve(handle_, r, f.deviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
  resolve(handle_, r, f.deviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability");
  resolve(handle_, r, f.deviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates");
  resolve(handle_, r, f.deviceGetTemperature, "nvmlDeviceGetTemperature");
  resolve(handle_, r, f.deviceGetPowerUsage, "nvmlDeviceGetPowerUsage");
  resolve(handle_, r, f.deviceGetClockInfo, "nvmlDeviceGetClockInfo");
  resolve(handle_, r, f.deviceGetTotalEccErrors, "nvmlDeviceGetTotalEccErrors");
  resolve(handle_, r, f.deviceGetTopologyCommonAncestor, "nvmlDeviceGetTopologyCommonAncestor");
  resolve(handle_, r, f.deviceGetNvLinkState, "nvmlDeviceGetNvLinkState");
  resolve(handle_, r, f.deviceGetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  resolve(handle_, r, f.deviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType");
  resolve(handle_, r, f.deviceGetMigMode, "nvmlDeviceGetMigMode");
  resolve(handle_, r, f.deviceGetMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount");
  resolve(handle_, r, f.deviceGetMigDeviceHandleByIndex, "nvmlDeviceGetMigDeviceHandleByIndex");
  resolve(handle_, r, f.deviceGetGpuInstanceId, "nvmlDeviceGetGpuInstanceId");
  resolve(handle_, r, f.deviceGetComputeInstanceId, "nvmlDeviceGetComputeInstanceId");
  resolve(handle_, r, f.deviceGetComputeRunningProcesses, "nvmlDeviceGetComputeRunningProcesses_v3",
          "nvmlDeviceGetComputeRunningProcesses_v2");
  resolve(handle_, r, f.deviceGetComputeRunningProcessesV1, "nvmlDeviceGetComputeRunningProcesses");
  resolve(handle_, r, f.eventSetCreate, "nvmlEventSetCreate");
  resolve(handle_, r, f.deviceRegisterEvents, "nvmlDeviceRegisterEvents");
  resolve(handle_, r, f.eventSetWait, "nvmlEventSetWait_v2", "nvmlEventSetWait");
  resolve(handle_, r, f.eventSetFree, "nvmlEventSetFree");

  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", f.init != nullptr},
      {"nvmlShutdown", f.shutdown != nullptr},
      {"nvmlErrorString", f.errorString != nullptr},
      {"nvmlSystemGetDriverVersion", f.systemGetDriverVersion != nullptr},
      {"nvmlDeviceGetCount_v2", f.deviceGetCount != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", f.deviceGetHandleByIndex != nullptr},
      {"nvmlDeviceGetUUID", f.deviceGetUUID != nullptr},
      {"nvmlDeviceGetName", f.deviceGetName != nullptr},
      {"nvmlDeviceGetMemoryInfo", f.deviceGetMemoryInfo != nullptr},
  };
  for (const auto& [name, present] : required) {
    if (!present) {
      return Status::unimplemented("NVML at '" + path_ + "' lacks the required symbol " + name +
                                   " (driver too old?)");
    }
  }
  nvmlReturn_t rc = f.init();
  if (rc != NVML_SUCCESS) {
    Status s = toStatus(rc, r[0].second);
    // Whatever the code, a failed init means NVML cannot serve this node now.
    return Status::unavailable(s.message());
  }
  initialised_ = true;
  return Status::ok();
}

NvmlLibrary& defaultNvmlLibrary() {
  static NvmlLibrary* const kLibrary = new NvmlLibrary();
  return *kLibrary;
}

}  // namespace gpool::gpu
