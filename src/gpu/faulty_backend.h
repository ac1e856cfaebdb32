#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "common/clock.h"
#include "common/random.h"
#include "gpu/gpu_backend.h"

namespace gpool::gpu {

enum class GpuOperation { kInventory, kSample, kProcesses, kKillProcess };

struct FaultyOptions {
  // Seeds the choice of which calls fail and how long each is delayed: a run replays exactly.
  uint64_t seed = 1;
  // Each call fails with this probability, in [0, 1].
  double error_probability = 0;
  // The code random failures carry.
  StatusCode error_code = StatusCode::kUnavailable;
  // Each call is delayed by a uniform amount in [0, max_latency] before it is forwarded.
  Micros max_latency{0};
  // Carries out a delay. Default: sleeps the calling thread. Tests pass one that advances a
  // SimClock instead, so no real time passes.
  std::function<void(Micros)> delay;
};

// FaultyBackend forwards every call to a target backend (as LevelDB's EnvWrapper does) and
// injects failures and latency on the way: random ones drawn from a seeded generator, and
// scripted ones queued with `failNext` (like SpecialEnv's flags). Injected errors say
// "injected" in their message.
//
// Thread-safety: safe to call concurrently if the target is; the injection state is guarded
// by an internal mutex, the forwarded call runs outside it.
class FaultyBackend final : public GpuBackend {
 public:
  // `target` is not owned and must outlive this wrapper.
  FaultyBackend(GpuBackend& target, FaultyOptions options);

  // The next `times` calls of `op` fail with `error` (which must not be OK), before any random
  // failure is drawn.
  void failNext(GpuOperation op, Status error, int times = 1);

  uint64_t injectedErrors() const;
  Micros injectedLatency() const;

  // gpu::GpuBackend
  std::string_view name() const override { return target_.name(); }
  bool simulated() const override { return target_.simulated(); }
  Result<Inventory> inventory() override;
  Result<TelemetrySample> sample() override;
  Result<std::vector<GpuProcess>> processes(std::string_view uuid) override;
  Status killProcess(std::string_view uuid, int pid) override;

 private:
  // Applies the delay and returns the error to inject for `op`, or OK to forward the call.
  Status before(GpuOperation op);

  GpuBackend& target_;
  FaultyOptions options_;

  mutable std::mutex mu_;
  SeededRandom random_;                         // GUARDED_BY(mu_)
  std::array<std::deque<Status>, 4> scripted_;  // GUARDED_BY(mu_), by GpuOperation
  uint64_t injected_errors_ = 0;                // GUARDED_BY(mu_)
  Micros injected_latency_{0};                  // GUARDED_BY(mu_)
};

}  // namespace gpool::gpu
