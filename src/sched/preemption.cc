// Evictions (see pass.h): idle reclaim, preemption of less important preemptible work, and
// reclaim of capacity a group borrowed beyond its guarantee.
#include <algorithm>
#include <limits>

#include "common/units.h"
#include "sched/pass.h"

namespace gpool::sched::internal {

void Pass::noteLeaving(size_t index) {
  const Job& j = jobs_[index];
  victims_.insert(j.id);
  leaving_.push_back(index);
  group_leaving_[j.group] += gpuDemand(j);
}

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

// Simulate-before-evict: victims are released on a scratch copy, and the eviction is decided
// only if the job then really fits there.
bool Pass::tryPreempt(Info& info, std::string* detail) {
  const PreemptionConfig& pc = cfg_.preemption;
  const Job& p = *info.job;
  if (!pc.enabled) return false;
  // Two ways to evict, each with its own protections (KAI: preempt within priority, reclaim
  // across groups): by priority, once the job waited delay_s; by reclaim, once it waited
  // reclaim_delay_s and while its group stays within its deserved share.
  const int64_t waited = secondsBetween(p.submit_time, now_);
  const bool may_preempt = !info.qos || info.qos->can_preempt;
  const bool priority_ok = may_preempt && waited >= pc.delay_s;
  // Work already leaving no longer counts for its group: reclaim looks at what will remain.
  auto remaining = [&](const std::string& group) {
    uint64_t held = group_held_[group];
    uint64_t gone = group_leaving_[group];
    return held > gone ? held - gone : 0;
  };
  const uint64_t p_group_held = remaining(p.group);
  const uint64_t p_deserved = deserved_[p.group];
  const bool below_share = pc.reclaim && p_group_held + info.demand <= p_deserved;
  const bool reclaim_ok = below_share && waited >= pc.reclaim_delay_s;
  if (!priority_ok && !reclaim_ok) {
    int64_t wait = std::numeric_limits<int64_t>::max();
    if (may_preempt) wait = pc.delay_s - waited;
    if (below_share) wait = std::min(wait, pc.reclaim_delay_s - waited);
    if (wait != std::numeric_limits<int64_t>::max())
      *detail += "; may preempt in " + formatDuration(wait);
    return false;
  }
  if (out_.stats.preempt_attempts >= pc.max_attempts_per_pass) return false;
  std::string key =
      shapeKey(p.request) + '#' + p.group + (priority_ok ? "#p" : "") + (reclaim_ok ? "#r" : "");
  if (!p.victims.empty()) key += '#' + std::to_string(p.id);  // its own exclusions
  if (preempt_failed_.count(key)) return false;
  ++out_.stats.preempt_attempts;

  // Work already being evicted may be enough: then wait for it instead of evicting more, and
  // reserve what it will free, so that no lower job takes it meanwhile.
  if (!leaving_.empty()) {
    // Released in the order of jobs_, as a scan of every job would.
    std::vector<size_t> leaving = leaving_;
    std::sort(leaving.begin(), leaving.end());
    ClusterState scratch = work_;
    TimePoint until = now_;
    for (size_t i : leaving) {
      const Job& j = jobs_[i];
      releaseAll(scratch, j.allocation);
      until = std::max(until, j.preempt_deadline ? *j.preempt_deadline
                                                 : now_ + std::chrono::seconds(graceOf(j)));
    }
    // What is reserved for earlier preemptors is theirs.
    for (const ReservationDecision& r : reservations_)
      applyClamped(scratch, r.allocation);
    PlacementResult wait = place(scratch, p.request, policy_, random_);
    if (wait.placed) {
      for (size_t i : leaving)
        claimed_.insert(jobs_[i].id);
      *detail += "; waiting for " + std::to_string(leaving.size()) + " preempted job(s) to leave";
      applyClamped(masked_, wait.tasks);
      earliest_reservation_ = std::min(earliest_reservation_, until);
      reservations_.push_back({p.id, until, wait.tasks});
      *detail += "; reserved to start in " + formatDuration(secondsBetween(now_, until));
      return true;
    }
  }

  struct Candidate {
    const Job* job;
    bool reclaim;
    double key;
    double lost;  // GPU-seconds of work lost if it has no checkpoint
  };
  if (!evictable_built_) {
    evictable_built_ = true;
    const int64_t min_run = std::min(pc.min_run_time_s, pc.reclaim_min_run_time_s);
    for (size_t i = 0; i < infos_.size(); ++i) {
      const Job& j = *infos_[i].job;
      if (j.state == JobState::kRunning && secondsBetween(j.start_time, now_) >= min_run) {
        evictable_.push_back(i);
      }
    }
  }
  std::vector<Candidate> cands;
  for (size_t i : evictable_) {
    const Info& v = infos_[i];
    const Job& j = *v.job;
    if (preempting(j)) continue;
    // A job already evicted for this one is never chosen again for it.
    if (std::find(p.victims.begin(), p.victims.end(), j.id) != p.victims.end()) continue;
    const int64_t ran = secondsBetween(j.start_time, now_);
    bool preemptible = j.preemptible || (v.qos && v.qos->preemptible);
    bool by_priority = priority_ok && preemptible && info.key > v.key && ran >= pc.min_run_time_s;
    // Reclaim never takes a group below its deserved share, so the two groups cannot swap
    // places and reclaim back and forth (KAI: reclaim must not invert their order).
    bool reclaim = reclaim_ok && v.borrowed && j.group != p.group &&
                   ran >= pc.reclaim_min_run_time_s &&
                   remaining(j.group) >= deserved_[j.group] + v.demand;
    if (!by_priority && !reclaim) continue;
    double lost = static_cast<double>(v.compute) / 1000.0 * static_cast<double>(ran);
    cands.push_back({&j, reclaim, v.key, lost});
  }
  if (cands.empty()) {
    preempt_failed_.insert(key);
    return false;
  }
  // Least disturbing first: reclaimable borrowed work, then the least important, then the least
  // work lost, then the newest.
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.reclaim != b.reclaim) return a.reclaim;
    if (a.key != b.key) return a.key < b.key;
    if (a.lost != b.lost) return a.lost < b.lost;
    return a.job->id > b.job->id;
  });

  ClusterState scratch = work_;
  std::vector<const Candidate*> chosen;
  uint64_t freed = 0;
  PlacementResult fit;
  std::unordered_map<std::string, uint64_t> taken;  // reclaimed per group in this attempt
  for (const Candidate& c : cands) {
    if (c.reclaim) {
      const std::string& g = c.job->group;
      uint64_t d = gpuDemand(*c.job);
      if (remaining(g) < deserved_[g] + taken[g] + d) continue;
      taken[g] += d;
    }
    releaseAll(scratch, c.job->allocation);
    chosen.push_back(&c);
    freed += computeDemand(*c.job);
    if (free_compute_ + freed < info.compute) continue;
    ++out_.stats.place_calls;
    fit = place(scratch, p.request, policy_, random_);
    if (fit.placed) break;
  }
  if (!fit.placed) {
    preempt_failed_.insert(key);
    return false;
  }
  // Drop victims that turned out unnecessary, most disturbing first.
  for (size_t i = chosen.size(); i-- > 0;) {
    if (chosen.size() == 1) break;
    if (!applyAll(scratch, chosen[i]->job->allocation)) continue;
    ++out_.stats.place_calls;
    PlacementResult without = place(scratch, p.request, policy_, random_);
    if (without.placed) {
      fit = std::move(without);
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      releaseAll(scratch, chosen[i]->job->allocation);
    }
  }
  std::string names;
  int64_t grace_s = 0;  // the longest of the victims': the preemptor starts after it
  for (const Candidate* c : chosen) {
    noteLeaving(static_cast<size_t>(c->job - jobs_.data()));
    claimed_.insert(c->job->id);
    std::string why = c->reclaim
                          ? "reclaimed for job " + std::to_string(p.id) + " of group " + p.group +
                                " (below its share)"
                          : "preempted for job " + std::to_string(p.id) + " (higher priority)";
    const int64_t grace = graceOf(*c->job);
    grace_s = std::max(grace_s, grace);
    out_.preemptions.push_back({c->job->id, p.id, grace, why});
    if (!names.empty()) names += ", ";
    names += std::to_string(c->job->id);
  }
  TimePoint at = now_ + std::chrono::seconds(grace_s);
  applyClamped(masked_, fit.tasks);
  earliest_reservation_ = std::min(earliest_reservation_, at);
  reservations_.push_back({p.id, at, fit.tasks, /*claim=*/true});
  *detail += "; preempting job(s) " + names + ", starts after their grace period of " +
             formatDuration(grace_s);
  return true;
}

}  // namespace gpool::sched::internal
