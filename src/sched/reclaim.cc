// Reclaim (see pass.h): which running work is borrowed beyond its group's guarantee, and the
// rules by which a group below its deserved share takes it back (KAI's reclaim). The eviction
// itself is preemption.cc's, shared with preemption by priority.
#include <algorithm>

#include "sched/pass.h"

namespace gpool::sched::internal {

// A group's guaranteed quota covers its running jobs in the order they started (ties by id);
// the work beyond it is borrowed and stays reclaimable. Deciding it here from what runs, rather
// than remembering a flag per job, makes it follow quota changes and survive restarts.
void Pass::markBorrowed() {
  std::unordered_map<std::string, std::vector<size_t>> running;
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (infos_[i].job->state == JobState::kRunning) running[infos_[i].job->group].push_back(i);
  }
  for (auto& [group, members] : running) {
    auto g = cfg_.groups.find(group);
    const uint64_t quota = g == cfg_.groups.end() ? 0 : g->second.quota;
    std::sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      const Job& x = *infos_[a].job;
      const Job& y = *infos_[b].job;
      if (x.start_time != y.start_time) return x.start_time < y.start_time;
      return x.id < y.id;
    });
    uint64_t held = 0;
    for (size_t i : members) {
      held += infos_[i].demand;
      infos_[i].borrowed = held > quota;
    }
  }
}

uint64_t Pass::remainingHeld(const std::string& group) {
  uint64_t held = group_held_[group];
  uint64_t gone = group_leaving_[group];
  return held > gone ? held - gone : 0;
}

bool Pass::belowShare(const Info& info) {
  const Job& p = *info.job;
  return cfg_.preemption.reclaim && remainingHeld(p.group) + info.demand <= deserved_[p.group];
}

// Reclaim never takes a group below its deserved share, so the two groups cannot swap places and
// reclaim back and forth (KAI: reclaim must not invert their order).
bool Pass::mayReclaimFrom(const Info& victim, const Job& preemptor, int64_t ran_s) {
  const Job& j = *victim.job;
  return victim.borrowed && j.group != preemptor.group &&
         ran_s >= cfg_.preemption.reclaim_min_run_time_s &&
         remainingHeld(j.group) >= deserved_[j.group] + victim.demand;
}

}  // namespace gpool::sched::internal
