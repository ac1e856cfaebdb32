// Reservations (see pass.h): a preemptor's claim on what the jobs evicted for it free, and the
// reservation of the top blocked job at its shadow time (Slurm's backfill reservation).
#include <algorithm>

#include "common/units.h"
#include "sched/pass.h"

namespace gpool::sched::internal {

// Before the queue walk, each pending job with victims leaving or gone takes what they free,
// in queue order: it starts at once if everything it needs is free, and otherwise the free
// part is taken out of the pool so that no other job (its requeued victims included) is
// placed there meanwhile. Without this the first victim to leave frees part of what the
// preemptor needs, a lower job (often that very victim, requeued) takes it, and the preemptor
// preempts again: a livelock.
void Pass::holdClaims(const std::vector<size_t>& order) {
  for (size_t i : order) {
    Info& info = infos_[i];
    const Job& p = *info.job;
    if (p.victims.empty()) continue;
    std::string why;
    if (dependencyNeverMet(p, &why) || eligibility(info, &why) != QueueReason::kNone) continue;
    std::vector<size_t> leaving;
    TimePoint until = now_;
    std::string names;
    for (JobId v : p.victims) {
      auto it = by_id_.find(v);
      if (it == by_id_.end()) continue;
      const Job& victim = jobs_[it->second];
      // Gone (ended, or requeued and pending), or running again: nothing more to wait for.
      if (victim.state != JobState::kRunning || !victim.preempt_deadline) continue;
      leaving.push_back(it->second);
      claimed_.insert(v);
      until = std::max(until, *victim.preempt_deadline);
      if (!names.empty()) names += ", ";
      names += std::to_string(v);
    }
    std::sort(leaving.begin(), leaving.end());
    ClusterState scratch = work_;
    for (size_t v : leaving)
      releaseAll(scratch, jobs_[v].allocation);
    ++out_.stats.place_calls;
    PlacementResult fit = place(scratch, p.request, policy_, random_);
    // The claim no longer makes room (a server left, say): the job queues as any other.
    if (!fit.placed) continue;
    if (applyAll(work_, fit.tasks)) {
      start(info, std::move(fit.tasks), false,
            "on what the jobs preempted for it freed; " + fit.explanation);
      continue;
    }
    applyClamped(work_, fit.tasks);
    applyClamped(masked_, fit.tasks);
    free_compute_ = work_.gpuComputeFree();
    earliest_reservation_ = std::min(earliest_reservation_, until);
    reservations_.push_back({p.id, until, fit.tasks, /*claim=*/true});
    info.decided = true;
    pend(info, QueueReason::kResources,
         "waiting for job(s) " + names + ", preempted for it, to leave (within " +
             formatDuration(secondsBetween(now_, until)) +
             "); what they free is reserved for it; reserved to start in " +
             formatDuration(secondsBetween(now_, until)));
  }
}

// Finds when the job could start if running jobs end at their time limits (the shadow time),
// and reserves the resources it would get then.
bool Pass::reserve(Info& info, std::string* detail) {
  if (!cfg_.backfill.enabled || reservations_.size() >= cfg_.backfill.max_reservations) {
    return false;
  }
  std::vector<std::pair<TimePoint, const std::vector<TaskAllocation>*>> ends;
  for (const Job& j : jobs_) {
    if (j.state != JobState::kRunning || claimed_.count(j.id)) continue;
    TimePoint end = j.start_time + std::chrono::seconds(timeLimit(j));
    if (j.preempt_deadline) end = std::min(end, *j.preempt_deadline);
    if (victims_.count(j.id)) end = std::min(end, now_ + std::chrono::seconds(graceOf(j)));
    ends.emplace_back(std::max(end, now_), &j.allocation);
  }
  for (const auto& [end, alloc] : started_)
    ends.emplace_back(end, &alloc);
  if (ends.empty()) return false;
  std::stable_sort(ends.begin(), ends.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  // One scratch copy for every probe: moving from k released end times to k' releases the
  // next ones or re-applies, newest first, what was released (each release either succeeds or
  // changes nothing, so undoing the successful ones restores the state exactly).
  ClusterState scratch = masked_;
  size_t released = 0;
  std::vector<std::pair<size_t, const TaskAllocation*>> undo;
  auto probe = [&](size_t k, PlacementResult* r) {
    for (; released < k; ++released) {
      for (const TaskAllocation& a : *ends[released].second) {
        if (scratch.release(a).isOk()) undo.emplace_back(released, &a);
      }
    }
    while (released > k) {
      --released;
      while (!undo.empty() && undo.back().first == released) {
        (void)scratch.apply(*undo.back().second);
        undo.pop_back();
      }
    }
    ++out_.stats.place_calls;
    *r = place(scratch, info.job->request, policy_, random_);
    return r->placed;
  };
  PlacementResult best;
  if (!probe(ends.size(), &best)) return false;
  // Releasing more never hurts, so the first k that fits is found by bisection.
  size_t lo = 1, hi = ends.size();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    PlacementResult r;
    if (probe(mid, &r)) {
      hi = mid;
      best = std::move(r);
    } else {
      lo = mid + 1;
    }
  }
  TimePoint at = ends[hi - 1].first;
  applyClamped(masked_, best.tasks);
  earliest_reservation_ = std::min(earliest_reservation_, at);
  reservations_.push_back({info.job->id, at, best.tasks});
  *detail += "; reserved to start in " + formatDuration(secondsBetween(now_, at));
  return true;
}

}  // namespace gpool::sched::internal
