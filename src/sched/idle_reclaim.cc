// Idle reclaim (see pass.h): running allocations whose GPUs stayed idle are flagged, warned
// and, when their QoS allows it, evicted with their grace period, before any pending job is
// considered (so that what they free can go to the queue in the same pass).
#include "common/units.h"
#include "sched/pass.h"

namespace gpool::sched::internal {

void Pass::idleReclaim() {
  if (!cfg_.idle.enabled) return;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const Job& j = jobs_[i];
    if (j.state != JobState::kRunning || !j.idle_since || j.preempt_deadline) continue;
    int64_t idle_s = secondsBetween(*j.idle_since, now_);
    if (cfg_.idle.preempt && j.idle_reclaimable && idle_s >= cfg_.idle.preempt_after_s &&
        j.idle_warned) {
      out_.idle.push_back({j.id, IdleAction::kPreempt, idle_s});
      out_.preemptions.push_back(
          {j.id, 0, graceOf(j), "GPU allocation idle for " + formatDuration(idle_s)});
      noteLeaving(i);
    } else if (idle_s >= cfg_.idle.warn_after_s && !j.idle_warned) {
      out_.idle.push_back({j.id, IdleAction::kWarn, idle_s});
    } else if (idle_s >= cfg_.idle.flag_after_s) {
      out_.idle.push_back({j.id, IdleAction::kFlag, idle_s});
    }
  }
}

}  // namespace gpool::sched::internal
