#pragma once

#include <cstdint>

#include "vgpu/shm_layout.h"

namespace gpool::vgpu {

// The compute-share limiter. Launches spend a budget of GPU busy time (tokens_ns in the task's
// region); one process of the task (the controller, elected by lease) refills it once per
// control period from measured utilisation. The step is normalised: the budget is busy time
// (share x period) and the cost of a launch is the measured busy time per launch, so the loop
// reaches its target in about one period on any GPU; nothing scales with the SM count.

// Hot path: true when a launch may go now (and charges it), false when the task is over budget.
// Lock-free: two relaxed loads and, when throttled or limited, one fetch_sub. No syscalls.
inline bool tryAcquireLaunch(ShmHeader* h) {
  if (h->allowed_permille.load(std::memory_order_relaxed) >= 1000) return true;
  if (h->tokens_ns.load(std::memory_order_relaxed) <= 0) return false;
  h->tokens_ns.fetch_sub(h->cost_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return true;
}

// One period's measurements, as the controller sees them.
struct ControlInput {
  std::uint32_t share_permille = 1000;
  SharePolicy policy = SharePolicy::kWorkConserving;
  std::int64_t period_ns = 0;  // length of the measured period
  double task_util = 0;        // busy fraction of the GPU used by this task's processes
  double device_util = 0;      // busy fraction of the GPU used by everyone
  std::uint64_t launches = 0;  // launches this task made in the period
};

struct ControlState {
  double cap = 1.0;         // current allowed fraction (>= share)
  double cost_ns = 100000;  // estimated busy time per launch
  bool initialised = false;
};

struct ControlOutput {
  std::uint32_t allowed_permille = 1000;
  std::int64_t refill_ns = 0;  // budget to add for the next period
  std::int64_t burst_ns = 0;   // tokens are clamped to at most this
  std::int64_t cost_ns = 0;
};

// Tuning: work-conserving tasks grow into idle time above this margin and fall back to their
// share as soon as the GPU is busy; a GPU whose other users are below kAloneBelow counts as idle.
inline constexpr double kIdleMargin = 0.05;
inline constexpr double kGrowGain = 1.0;
inline constexpr double kAloneBelow = 0.01;

// The control law (pure; unit-tested). See docs/vgpu.md.
ControlOutput controlStep(const ControlInput& in, ControlState* state);

// Applies `out` to the region: publishes cap and cost, refills tokens (clamped to the burst).
void applyControl(ShmHeader* h, const ControlOutput& out);

}  // namespace gpool::vgpu
