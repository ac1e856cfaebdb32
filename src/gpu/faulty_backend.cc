#include "gpu/faulty_backend.h"

#include <thread>

namespace gpool::gpu {

namespace {
const char* operationName(GpuOperation op) {
  switch (op) {
    case GpuOperation::kInventory: return "inventory";
    case GpuOperation::kSample: return "sample";
    case GpuOperation::kProcesses: return "processes";
    case GpuOperation::kKillProcess: return "killProcess";
  }
  return "?";
}
}  // namespace

FaultyBackend::FaultyBackend(GpuBackend& target, FaultyOptions options)
    : target_(target), options_(std::move(options)), random_(options_.seed) {
  if (!options_.delay) {
    options_.delay = [](Micros d) { std::this_thread::sleep_for(d); };
  }
}

void FaultyBackend::failNext(GpuOperation op, Status error, int times) {
  if (error.isOk()) error = Status::internal("failNext was given an OK status");
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < times; ++i)
    scripted_[static_cast<size_t>(op)].push_back(error);
}

uint64_t FaultyBackend::injectedErrors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return injected_errors_;
}

Micros FaultyBackend::injectedLatency() const {
  std::lock_guard<std::mutex> lock(mu_);
  return injected_latency_;
}

Status FaultyBackend::before(GpuOperation op) {
  Micros delay{0};
  Status error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.max_latency.count() > 0) {
      delay = Micros(static_cast<int64_t>(
          random_.uniform(static_cast<uint64_t>(options_.max_latency.count()) + 1)));
      injected_latency_ += delay;
    }
    auto& queue = scripted_[static_cast<size_t>(op)];
    if (!queue.empty()) {
      error = std::move(queue.front());
      queue.pop_front();
    } else if (options_.error_probability > 0 &&
               random_.uniformReal() < options_.error_probability) {
      error = Status(options_.error_code,
                     std::string("injected failure of GPU backend ") + operationName(op));
    }
    if (!error.isOk()) ++injected_errors_;
  }
  // Outside the lock: a delay that sleeps must not hold up other callers.
  if (delay.count() > 0) options_.delay(delay);
  return error;
}

Result<Inventory> FaultyBackend::inventory() {
  GPOOL_RETURN_IF_ERROR(before(GpuOperation::kInventory));
  return target_.inventory();
}

Result<TelemetrySample> FaultyBackend::sample() {
  GPOOL_RETURN_IF_ERROR(before(GpuOperation::kSample));
  return target_.sample();
}

Result<std::vector<GpuProcess>> FaultyBackend::processes(std::string_view uuid) {
  GPOOL_RETURN_IF_ERROR(before(GpuOperation::kProcesses));
  return target_.processes(uuid);
}

Status FaultyBackend::killProcess(std::string_view uuid, int pid) {
  GPOOL_RETURN_IF_ERROR(before(GpuOperation::kKillProcess));
  return target_.killProcess(uuid, pid);
}

}  // namespace gpool::gpu
