// The first step of a pass: what every job holds and asks for, its priority, and the order in
// which pending jobs are considered (see pass.h).
#include <algorithm>
#include <unordered_set>

#include "sched/pass.h"

namespace gpool::sched::internal {

void Pass::prepare() {
  capacity_ = work_.gpuCount() * 1000;
  free_compute_ = work_.gpuComputeFree();
  for (const Node& n : work_.nodes()) {
    unhealthy_gpus_ += static_cast<size_t>(
        std::count_if(n.gpus.begin(), n.gpus.end(), [](const Gpu& g) { return !g.healthy; }));
  }
  std::unordered_map<std::string, const QosLevel*> qos_by_name;
  for (const QosLevel& q : cfg_.qos_levels)
    qos_by_name.emplace(q.name, &q);
  std::unordered_map<std::string, double> qos_factor;
  for (const QosLevel& q : cfg_.qos_levels)
    qos_factor[q.name] = qosFactor(q, cfg_.qos_levels);

  infos_.resize(jobs_.size());
  by_id_.reserve(jobs_.size());
  std::vector<Association> assocs;
  std::unordered_set<std::string> seen_assoc;
  std::unordered_map<std::string, GroupDemand> demand;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const Job& j = jobs_[i];
    Info& info = infos_[i];
    info.job = &j;
    info.demand = gpuDemand(j);
    info.compute = computeDemand(j);
    auto q = qos_by_name.find(j.qos);
    info.qos = q == qos_by_name.end() ? nullptr : q->second;
    by_id_.emplace(j.id, i);
    std::string key = associationKey(j.group, j.user);
    if (seen_assoc.insert(key).second) assocs.push_back({j.group, j.user});
    GroupDemand& d = demand[j.group];
    d.group = j.group;
    if (j.state == JobState::kRunning) {
      ++out_.stats.running;
      if (j.array_id != 0) ++array_running_[j.array_id];
      if (j.preempt_deadline) {
        group_leaving_[j.group] += info.demand;
        leaving_.push_back(i);
      }
      user_held_[j.user] += info.demand;
      group_held_[j.group] += info.demand;
      user_qos_held_[j.user + '\n' + j.qos] += info.demand;
      user_compute_held_[j.user] += info.compute;
      group_compute_held_[j.group] += info.compute;
      d.allocated += info.demand;
    } else {
      ++out_.stats.pending;
      // Held jobs and jobs waiting for others ask for nothing yet (deserved shares).
      if (j.hold == Hold::kNone && dependenciesMet(j)) d.pending += info.demand;
    }
  }
  std::vector<GroupDemand> demands;
  demands.reserve(demand.size());
  for (auto& [g, d] : demand)
    demands.push_back(d);
  std::sort(demands.begin(), demands.end(),
            [](const GroupDemand& a, const GroupDemand& b) { return a.group < b.group; });
  deserved_ = computeDeservedShares(demands, cfg_.groups, capacity_);
  markBorrowed();

  std::unordered_map<std::string, double> fairshare;
  if (cfg_.order == QueueOrder::kMultifactor) {
    fairshare = computeFairTree(assocs, cfg_.fairshare, usage_, now_);
  }
  for (Info& info : infos_) {
    const Job& j = *info.job;
    double submit_s = static_cast<double>(toUnixMicros(j.submit_time)) / 1e6;
    switch (cfg_.order) {
      case QueueOrder::kMultifactor: {
        double fs = fairshare[associationKey(j.group, j.user)];
        double qf = info.qos ? qos_factor[info.qos->name] : 0.0;
        int64_t waited = j.state == JobState::kPending ? secondsBetween(j.submit_time, now_) : 0;
        info.factors =
            computePriority(cfg_.weights, fs, qf, waited, info.demand, capacity_, j.nice);
        info.key = info.factors.total;
        break;
      }
      case QueueOrder::kFifo: info.key = -submit_s; break;
      case QueueOrder::kShortestJobFirst: {
        int64_t d = j.expected_duration_s > 0 ? j.expected_duration_s : timeLimit(j);
        info.key = -static_cast<double>(d);
        break;
      }
      case QueueOrder::kLeastAttainedService:
        info.key = -static_cast<double>(lasQueue(cfg_, j.attained_gpu_seconds));
        break;
    }
  }
}

// Pending jobs, most important first; ties by submit time, then id.
std::vector<size_t> Pass::queueOrder() const {
  std::vector<size_t> order;
  order.reserve(out_.stats.pending);
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (infos_[i].job->state == JobState::kPending) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Info& x = infos_[a];
    const Info& y = infos_[b];
    if (x.key != y.key) return x.key > y.key;
    if (x.job->submit_time != y.job->submit_time) return x.job->submit_time < y.job->submit_time;
    return x.job->id < y.job->id;
  });
  return order;
}

std::string Pass::priorityText(const Info& info) const {
  if (cfg_.order != QueueOrder::kMultifactor) {
    return std::string("queue order ") + std::string(queueOrderName(cfg_.order));
  }
  const PriorityFactors& f = info.factors;
  return "priority " + fmtDouble(f.total, 1) + " (fairshare " + fmtDouble(f.fairshare, 2) +
         ", qos " + fmtDouble(f.qos, 2) + ", age " + fmtDouble(f.age, 2) + ", size " +
         fmtDouble(f.job_size, 2) + (f.nice != 0 ? ", nice " + fmtDouble(f.nice, 0) : "") + ")";
}

}  // namespace gpool::sched::internal
