// Eviction for a blocked pending job (see pass.h): by priority (less important preemptible work)
// or by reclaim (capacity another group borrowed beyond its guarantee; reclaim.cc has its rules).
// tryPreempt runs the steps in order: may it evict at all yet, is work already leaving enough,
// which running jobs may go, the least disturbing set that makes it fit (simulate before evict),
// and the eviction with the reservation of what the victims free.
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

bool Pass::tryPreempt(Info& info, std::string* detail) {
  const PreemptionConfig& pc = cfg_.preemption;
  const Job& p = *info.job;
  if (!pc.enabled) return false;
  const EvictionRights rights = evictionRights(info, detail);
  if (!rights.priority && !rights.reclaim) return false;
  if (out_.stats.preempt_attempts >= pc.max_attempts_per_pass) return false;
  std::string key = shapeKey(p.request) + '#' + p.group + (rights.priority ? "#p" : "") +
                    (rights.reclaim ? "#r" : "");
  if (!p.victims.empty()) key += '#' + std::to_string(p.id);  // its own exclusions
  if (preempt_failed_.count(key)) return false;
  ++out_.stats.preempt_attempts;

  if (waitForLeaving(info, detail)) return true;
  const std::vector<Candidate> candidates = victimCandidates(info, rights);
  std::vector<const Candidate*> chosen;
  PlacementResult fit;
  if (candidates.empty() || !chooseVictims(info, candidates, &chosen, &fit)) {
    preempt_failed_.insert(key);
    return false;
  }
  evict(info, chosen, fit, detail);
  return true;
}

// Two ways to evict, each with its own protections (KAI: preempt within priority, reclaim across
// groups): by priority, once the job waited delay_s; by reclaim, once it waited reclaim_delay_s
// and while its group stays within its deserved share.
Pass::EvictionRights Pass::evictionRights(const Info& info, std::string* detail) {
  const PreemptionConfig& pc = cfg_.preemption;
  const Job& p = *info.job;
  const int64_t waited = secondsBetween(p.submit_time, now_);
  const bool may_preempt = !info.qos || info.qos->can_preempt;
  EvictionRights rights;
  rights.priority = may_preempt && waited >= pc.delay_s;
  const bool below_share = belowShare(info);
  rights.reclaim = below_share && waited >= pc.reclaim_delay_s;
  if (!rights.priority && !rights.reclaim) {
    int64_t wait = std::numeric_limits<int64_t>::max();
    if (may_preempt) wait = pc.delay_s - waited;
    if (below_share) wait = std::min(wait, pc.reclaim_delay_s - waited);
    if (wait != std::numeric_limits<int64_t>::max())
      *detail += "; may preempt in " + formatDuration(wait);
  }
  return rights;
}

// Work already being evicted may be enough: then wait for it instead of evicting more, and
// reserve what it will free, so that no lower job takes it meanwhile.
bool Pass::waitForLeaving(const Info& info, std::string* detail) {
  if (leaving_.empty()) return false;
  const Job& p = *info.job;
  // Released in the order of jobs_, as a scan of every job would.
  std::vector<size_t> leaving = leaving_;
  std::sort(leaving.begin(), leaving.end());
  ClusterState scratch = work_;
  TimePoint until = now_;
  for (size_t i : leaving) {
    const Job& j = jobs_[i];
    releaseAll(scratch, j.allocation);
    until = std::max(
        until, j.preempt_deadline ? *j.preempt_deadline : now_ + std::chrono::seconds(graceOf(j)));
  }
  // What is reserved for earlier preemptors is theirs.
  for (const ReservationDecision& r : reservations_)
    applyClamped(scratch, r.allocation);
  PlacementResult wait = place(scratch, p.request, policy_, random_);
  if (!wait.placed) return false;
  for (size_t i : leaving)
    claimed_.insert(jobs_[i].id);
  *detail += "; waiting for " + std::to_string(leaving.size()) + " preempted job(s) to leave";
  applyClamped(masked_, wait.tasks);
  earliest_reservation_ = std::min(earliest_reservation_, until);
  reservations_.push_back({p.id, until, wait.tasks});
  *detail += "; reserved to start in " + formatDuration(secondsBetween(now_, until));
  return true;
}

std::vector<Pass::Candidate> Pass::victimCandidates(const Info& info, EvictionRights rights) {
  const PreemptionConfig& pc = cfg_.preemption;
  const Job& p = *info.job;
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
    bool by_priority =
        rights.priority && preemptible && info.key > v.key && ran >= pc.min_run_time_s;
    bool reclaim = rights.reclaim && mayReclaimFrom(v, p, ran);
    if (!by_priority && !reclaim) continue;
    double lost = static_cast<double>(v.compute) / 1000.0 * static_cast<double>(ran);
    cands.push_back({&j, reclaim, v.key, lost});
  }
  // Least disturbing first: reclaimable borrowed work, then the least important, then the least
  // work lost, then the newest.
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.reclaim != b.reclaim) return a.reclaim;
    if (a.key != b.key) return a.key < b.key;
    if (a.lost != b.lost) return a.lost < b.lost;
    return a.job->id > b.job->id;
  });
  return cands;
}

// Simulate-before-evict: victims are released on a scratch copy, and the eviction is decided
// only if the job then really fits there.
bool Pass::chooseVictims(const Info& info, const std::vector<Candidate>& candidates,
                         std::vector<const Candidate*>* chosen, PlacementResult* fit) {
  const Job& p = *info.job;
  ClusterState scratch = work_;
  uint64_t freed = 0;
  std::unordered_map<std::string, uint64_t> taken;  // reclaimed per group in this attempt
  for (const Candidate& c : candidates) {
    if (c.reclaim) {
      const std::string& g = c.job->group;
      uint64_t d = gpuDemand(*c.job);
      if (remainingHeld(g) < deserved_[g] + taken[g] + d) continue;
      taken[g] += d;
    }
    releaseAll(scratch, c.job->allocation);
    chosen->push_back(&c);
    freed += computeDemand(*c.job);
    if (free_compute_ + freed < info.compute) continue;
    ++out_.stats.place_calls;
    *fit = place(scratch, p.request, policy_, random_);
    if (fit->placed) break;
  }
  if (!fit->placed) return false;
  // Drop victims that turned out unnecessary, most disturbing first.
  for (size_t i = chosen->size(); i-- > 0;) {
    if (chosen->size() == 1) break;
    if (!applyAll(scratch, (*chosen)[i]->job->allocation)) continue;
    ++out_.stats.place_calls;
    PlacementResult without = place(scratch, p.request, policy_, random_);
    if (without.placed) {
      *fit = std::move(without);
      chosen->erase(chosen->begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      releaseAll(scratch, (*chosen)[i]->job->allocation);
    }
  }
  return true;
}

void Pass::evict(const Info& info, const std::vector<const Candidate*>& chosen,
                 const PlacementResult& fit, std::string* detail) {
  const Job& p = *info.job;
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
}

}  // namespace gpool::sched::internal
