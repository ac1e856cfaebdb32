#include "vgpu/limiter.h"

#include <algorithm>
#include <cmath>

namespace gpool::vgpu {

ControlOutput controlStep(const ControlInput& in, ControlState* state) {
  const double share = std::clamp(in.share_permille / 1000.0, 0.001, 1.0);
  if (!state->initialised) {
    state->cap = share;
    state->initialised = true;
  }
  // Busy time per launch, smoothed. Only periods with both launches and busy time inform it.
  if (in.launches > 0 && in.task_util > 0 && in.period_ns > 0) {
    const double measured =
        in.task_util * static_cast<double>(in.period_ns) / static_cast<double>(in.launches);
    state->cost_ns = 0.5 * state->cost_ns + 0.5 * measured;
  }
  const double others = std::max(0.0, in.device_util - in.task_util);
  if (in.policy == SharePolicy::kStrict) {
    state->cap = share;
  } else if (others < kAloneBelow) {
    state->cap = 1.0;  // nobody else wants the GPU: use all of it
  } else {
    const double idle = std::max(0.0, 1.0 - in.device_util);
    if (idle > kIdleMargin) {
      state->cap = std::min(1.0, state->cap + kGrowGain * (idle - kIdleMargin));
    } else {
      state->cap = share;  // contended: fall back to the entitlement at once
    }
    state->cap = std::max(state->cap, share);
  }
  ControlOutput out;
  out.allowed_permille = static_cast<std::uint32_t>(std::lround(state->cap * 1000.0));
  out.refill_ns = static_cast<std::int64_t>(state->cap * static_cast<double>(in.period_ns));
  out.burst_ns = out.refill_ns;
  out.cost_ns = std::max<std::int64_t>(1000, static_cast<std::int64_t>(state->cost_ns));
  return out;
}

void applyControl(ShmHeader* h, const ControlOutput& out) {
  h->cost_ns.store(out.cost_ns, std::memory_order_relaxed);
  h->allowed_permille.store(out.allowed_permille, std::memory_order_relaxed);
  std::int64_t cur = h->tokens_ns.load(std::memory_order_relaxed);
  for (;;) {
    // Every process of the task can write the budget: add without overflowing.
    std::int64_t sum = 0;
    if (__builtin_add_overflow(cur, out.refill_ns, &sum)) {
      sum = out.refill_ns > 0 ? INT64_MAX : INT64_MIN;
    }
    const std::int64_t next = std::min(sum, out.burst_ns);
    if (h->tokens_ns.compare_exchange_weak(cur, next, std::memory_order_relaxed)) break;
  }
}

}  // namespace gpool::vgpu
