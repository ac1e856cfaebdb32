#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "gpu/fake_fixture.h"
#include "gpu/gpu_backend.h"

namespace gpool::gpu {

// FakeBackend plays a `FakeFixture`: the GPUs it describes, with telemetry that follows the
// fixture's script as `clock` advances (step k of the script applies once k * step_length has
// passed since construction). It lets the agent, the scheduler's tests and `gpool up` run on
// machines without GPUs.
//
// Everything it reports is marked simulated: `Inventory::simulated` and `GpuInfo::simulated`
// are true and model names end in " (simulated)".
//
// Processes come from the script or from `startProcess`; `killProcess` removes the process and
// records the kill (see `kills`) instead of signalling anything.
//
// Limitations: telemetry changes in steps, never in between; a GPU that disappeared keeps its
// index, so indices of the remaining GPUs do not shift as they may with a real driver.
//
// Thread-safety: all methods may be called concurrently.
class FakeBackend final : public GpuBackend {
 public:
  // `clock` must outlive the backend.
  FakeBackend(FakeFixture fixture, const Clock& clock);

  // Loads a JSON fixture (see `loadFakeFixture`).
  static Result<std::unique_ptr<FakeBackend>> fromFile(const std::string& path, const Clock& clock,
                                                       std::string_view node_name = "");

  // gpu::GpuBackend
  std::string_view name() const override { return "fake"; }
  bool simulated() const override { return true; }
  Result<Inventory> inventory() override;
  Result<TelemetrySample> sample() override;
  Result<std::vector<GpuProcess>> processes(std::string_view uuid) override;
  Status killProcess(std::string_view uuid, int pid) override;

  // Adds a process on GPU `uuid`, as if a program had opened a context there (used by agent
  // tests for stray processes). NotFound if the GPU is unknown or gone.
  Status startProcess(std::string_view uuid, int pid, uint64_t used_mib);
  // Removes a process as if it had exited; NotFound if it was not there.
  Status exitProcess(std::string_view uuid, int pid);

  struct Kill {
    std::string uuid;
    int pid = 0;
    TimePoint at;
  };
  // Every successful killProcess call, oldest first.
  std::vector<Kill> kills() const;

  // The script step the clock is at now.
  int64_t currentStep() const;

  const FakeFixture& fixture() const { return fixture_; }

 private:
  struct GpuState {
    bool present = true;
    TelemetryChange values;  // every field set
    uint64_t ecc_corrected = 0;
    uint64_t ecc_uncorrected = 0;
    std::vector<uint32_t> pending_xids;
    std::vector<GpuProcess> processes;
  };

  // Applies every scripted event due by now.
  // REQUIRES: mu_ is held
  void advanceLocked();
  void applyLocked(const FakeEvent& event, GpuState& gpu);
  // REQUIRES: mu_ is held
  GpuState* findLocked(std::string_view uuid);

  const FakeFixture fixture_;
  const Clock& clock_;
  const Micros start_;

  mutable std::mutex mu_;
  size_t next_event_ = 0;       // GUARDED_BY(mu_)
  std::vector<GpuState> gpus_;  // GUARDED_BY(mu_), one per fixture GPU
  std::vector<Kill> kills_;     // GUARDED_BY(mu_)
};

}  // namespace gpool::gpu
