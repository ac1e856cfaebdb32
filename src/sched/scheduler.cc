#include "sched/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "common/units.h"
#include "sched/pass.h"

namespace gpool::sched {

std::string_view queueOrderName(QueueOrder order) {
  switch (order) {
    case QueueOrder::kMultifactor: return "fairshare";
    case QueueOrder::kFifo: return "fifo";
    case QueueOrder::kShortestJobFirst: return "sjf";
    case QueueOrder::kLeastAttainedService: return "las";
  }
  return "unknown";
}

Result<QueueOrder> parseQueueOrder(std::string_view text) {
  if (text == "fairshare" || text == "multifactor") return QueueOrder::kMultifactor;
  if (text == "fifo") return QueueOrder::kFifo;
  if (text == "sjf") return QueueOrder::kShortestJobFirst;
  if (text == "las" || text == "tiresias") return QueueOrder::kLeastAttainedService;
  return Status::invalidArgument("unknown queue order '" + std::string(text) +
                                 "': expected fifo, sjf, las or fairshare");
}

std::string_view queueReasonName(QueueReason reason) {
  switch (reason) {
    case QueueReason::kNone: return "None";
    case QueueReason::kResources: return "Resources";
    case QueueReason::kPriority: return "Priority";
    case QueueReason::kDependency: return "Dependency";
    case QueueReason::kQosMaxGpuPerUser: return "QOSMaxGpuPerUser";
    case QueueReason::kAssocMaxGpuPerUser: return "AssocMaxGpuPerUser";
    case QueueReason::kGroupQuota: return "GroupQuota";
    case QueueReason::kBadConstraints: return "BadConstraints";
    case QueueReason::kInvalidQos: return "InvalidQOS";
    case QueueReason::kJobArrayTaskLimit: return "JobArrayTaskLimit";
    case QueueReason::kAssocMaxComputePerUser: return "AssocMaxComputePerUser";
    case QueueReason::kGroupComputeQuota: return "GroupComputeQuota";
    case QueueReason::kJobHeldUser: return "JobHeldUser";
    case QueueReason::kJobHeldAdmin: return "JobHeldAdmin";
    case QueueReason::kAssocGrpGpuHours: return "AssocGrpGpuHours";
    case QueueReason::kGpusUnhealthy: return "GpusUnhealthy";
  }
  return "Unknown";
}

std::string_view idleActionName(IdleAction action) {
  switch (action) {
    case IdleAction::kFlag: return "flag";
    case IdleAction::kWarn: return "warn";
    case IdleAction::kPreempt: return "preempt";
  }
  return "unknown";
}

size_t lasQueue(const SchedulerConfig& config, double attained_gpu_seconds) {
  size_t q = 0;
  while (q < config.las_thresholds_gpu_s.size() &&
         attained_gpu_seconds >= config.las_thresholds_gpu_s[q]) {
    ++q;
  }
  return q;
}

namespace internal {

int64_t secondsBetween(TimePoint from, TimePoint to) {
  return std::chrono::duration_cast<std::chrono::seconds>(to - from).count();
}

std::string fmtDouble(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string shapeKey(const PlacementRequest& r) {
  const TaskRequest& t = r.task;
  std::string k = std::to_string(t.gpus) + ',' + std::to_string(t.gpu_memory_mib) + ',' +
                  std::to_string(t.gpu_compute) + ',' + std::to_string(t.cpu_millis) + ',' +
                  std::to_string(t.ram_mib) + ',' + std::to_string(r.tasks) + ',' +
                  std::to_string(static_cast<int>(r.scope)) + ',' + std::to_string(r.nodes);
  const Constraints& c = t.constraints;
  if (!c.gpu_models.empty() || c.min_compute_capability || c.min_cuda || c.min_gpu_memory_mib ||
      !c.node_labels.empty()) {
    k += '|' + std::to_string(c.min_compute_capability) + ',' + std::to_string(c.min_cuda) + ',' +
         std::to_string(c.min_gpu_memory_mib);
    for (const auto& m : c.gpu_models)
      k += ',' + m;
    for (const auto& [key, value] : c.node_labels)
      k += ',' + key + '=' + value;
  }
  return k;
}

TaskAllocation clampToFree(const ClusterState& cluster, const TaskAllocation& alloc) {
  TaskAllocation out = alloc;
  if (alloc.node >= cluster.size()) return out;
  const Node& n = cluster.node(alloc.node);
  out.cpu_millis = std::min(out.cpu_millis, n.cpu_free_millis);
  out.ram_mib = std::min(out.ram_mib, n.ram_free_mib);
  for (GpuSlice& s : out.gpus) {
    if (s.gpu_index >= n.gpus.size()) continue;
    const Gpu& g = n.gpus[s.gpu_index];
    s.memory_mib = std::min(s.memory_mib, g.memory_free_mib);
    s.compute = std::min(s.compute, g.compute_free);
  }
  return out;
}

bool applyAll(ClusterState& cluster, const std::vector<TaskAllocation>& tasks) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!cluster.apply(tasks[i]).isOk()) {
      for (size_t j = 0; j < i; ++j)
        (void)cluster.release(tasks[j]);
      return false;
    }
  }
  return true;
}

void applyClamped(ClusterState& cluster, const std::vector<TaskAllocation>& tasks) {
  for (const TaskAllocation& t : tasks)
    (void)cluster.apply(clampToFree(cluster, t));
}

void releaseAll(ClusterState& cluster, const std::vector<TaskAllocation>& tasks) {
  for (const TaskAllocation& t : tasks)
    (void)cluster.release(t);
}

Decisions Pass::run() {
  prepare();
  idleReclaim();
  const std::vector<size_t> order = queueOrder();
  holdClaims(order);
  out_.pending.reserve(order.size());
  for (size_t i : order) {
    if (!infos_[i].decided) schedule(infos_[i]);
  }
  out_.reservations = std::move(reservations_);
  return std::move(out_);
}

void Pass::pend(const Info& info, QueueReason reason, std::string detail) {
  out_.pending.push_back({info.job->id, reason, info.key, std::move(detail)});
}

PlacementResult Pass::tryPlace(const ClusterState& cluster, const PlacementRequest& request,
                               std::unordered_map<std::string, Cached>& cache, bool use_cache) {
  std::string key;
  if (use_cache) {
    key = shapeKey(request);
    auto it = cache.find(key);
    if (it != cache.end()) {
      ++out_.stats.cache_hits;
      PlacementResult r;
      r.reason = it->second.reason;
      r.explanation = it->second.explanation;
      return r;
    }
  }
  ++out_.stats.place_calls;
  PlacementResult r = place(cluster, request, policy_, random_);
  if (!r.placed && use_cache) cache.emplace(std::move(key), Cached{r.reason, r.explanation});
  return r;
}

void Pass::start(Info& info, std::vector<TaskAllocation> alloc, bool backfilled,
                 const std::string& placement_explanation) {
  const Job& j = *info.job;
  info.decided = true;
  for (const TaskAllocation& a : alloc)
    policy_.notePlaced(work_, j.request.task, a);
  applyClamped(masked_, alloc);
  free_compute_ -= std::min(free_compute_, info.compute);
  uint64_t quota = 0;
  auto g = cfg_.groups.find(j.group);
  if (g != cfg_.groups.end()) quota = g->second.quota;
  uint64_t& gh = group_held_[j.group];
  bool borrowed = gh + info.demand > quota;
  gh += info.demand;
  user_held_[j.user] += info.demand;
  user_qos_held_[j.user + '\n' + j.qos] += info.demand;
  user_compute_held_[j.user] += info.compute;
  group_compute_held_[j.group] += info.compute;
  if (j.array_id != 0) ++array_running_[j.array_id];
  started_.emplace_back(now_ + std::chrono::seconds(timeLimit(j)), alloc);

  StartDecision d;
  d.job = j.id;
  d.borrowed = borrowed;
  d.backfilled = backfilled;
  d.priority = info.key;
  d.explanation = priorityText(info) + "; " + placement_explanation;
  if (backfilled) {
    d.explanation += "; backfilled without delaying the reservation of job " +
                     std::to_string(reservations_.front().job);
  }
  if (borrowed && g != cfg_.groups.end()) {
    d.explanation += "; beyond group " + j.group + "'s guaranteed " +
                     formatGpuCount(static_cast<uint32_t>(quota)) +
                     " GPUs: borrowed idle capacity, reclaimable";
  }
  d.allocation = std::move(alloc);
  out_.starts.push_back(std::move(d));
}

QueueReason Pass::poolReason(const Info& info, std::string* detail) {
  const Job& j = *info.job;
  auto [it, inserted] =
      pool_reason_.try_emplace(shapeKey(j.request), QueueReason::kResources, std::string());
  if (!inserted) {
    *detail = it->second.second;
    return it->second.first;
  }
  // Would it fit now if every GPU were healthy? Then the unhealthy GPUs are what it waits for.
  if (unhealthy_gpus_ > 0) {
    ClusterState healthy = work_;
    for (size_t n = 0; n < healthy.size(); ++n) {
      const Node& node = healthy.node(n);
      if (std::none_of(node.gpus.begin(), node.gpus.end(), [](const Gpu& g) { return !g.healthy; }))
        continue;
      for (Gpu& g : healthy.mutableNode(n).gpus)
        g.healthy = true;
    }
    ++out_.stats.place_calls;
    PlacementResult r = place(healthy, j.request, policy_, random_);
    if (r.placed) {
      std::string gpus;
      for (const TaskAllocation& t : r.tasks) {
        const Node& node = work_.node(t.node);
        for (const GpuSlice& s : t.gpus) {
          const Gpu& g = node.gpus[s.gpu_index];
          if (g.healthy) continue;
          if (!gpus.empty()) gpus += "; ";
          gpus += node.name + " GPU " + std::to_string(g.index);
          if (!g.health_reason.empty()) gpus += " (" + g.health_reason + ")";
        }
      }
      it->second = {QueueReason::kGpusUnhealthy,
                    "it would fit now on unhealthy GPUs, which get no work: " + gpus};
      *detail = it->second.second;
      return it->second.first;
    }
  }
  // Would it fit on the pool with nothing running? If not, waiting never helps.
  if (!empty_) {
    empty_ = std::make_unique<ClusterState>(work_);
    for (size_t n = 0; n < empty_->size(); ++n) {
      Node& node = empty_->mutableNode(n);
      node.schedulable = true;  // a drained server may come back
      node.cpu_free_millis = node.cpu_total_millis;
      node.ram_free_mib = node.ram_total_mib;
      for (Gpu& g : node.gpus) {
        g.memory_free_mib = g.memory_total_mib;
        g.compute_free = 1000;
      }
    }
  }
  ++out_.stats.place_calls;
  PlacementResult r = place(*empty_, j.request, policy_, random_);
  if (!r.placed) {
    it->second = {QueueReason::kBadConstraints,
                  "no set of servers of the pool can ever run it, even with nothing else "
                  "running: " +
                      r.explanation};
  }
  *detail = it->second.second;
  return it->second.first;
}

void Pass::schedule(Info& info) {
  const Job& j = *info.job;
  std::string why;
  if (dependencyNeverMet(j, &why)) {
    out_.cancels.push_back({j.id, "DependencyNeverSatisfied", why});
    return;
  }
  QueueReason reason = eligibility(info, &why);
  if (reason != QueueReason::kNone) return pend(info, reason, std::move(why));
  if (blocked_) return pend(info, QueueReason::kPriority, "behind a blocked higher-priority job");

  PlacementResult r;
  if (info.compute > free_compute_) {
    r.reason = PendingReason::kResources;
    r.explanation = "needs " + formatGpuCount(static_cast<uint32_t>(info.compute)) +
                    " GPUs of compute, " + formatGpuCount(static_cast<uint32_t>(free_compute_)) +
                    " free";
  } else {
    r = tryPlace(work_, j.request, cache_work_, true);
  }
  if (r.placed) {
    if (reservations_.empty()) {
      if (applyAll(work_, r.tasks)) return start(info, std::move(r.tasks), false, r.explanation);
      return pend(info, QueueReason::kResources,
                  "placement could not be applied: " + r.explanation);
    }
    if (backfill(info, r)) return;
    return pend(info, QueueReason::kPriority,
                "would delay the reservation of job " + std::to_string(reservations_.front().job));
  }
  if (r.reason == PendingReason::kInvalid) {
    return pend(info, QueueReason::kBadConstraints, r.explanation);
  }
  std::string pool_detail;
  QueueReason pool = poolReason(info, &pool_detail);
  if (pool == QueueReason::kBadConstraints) {
    return pend(info, pool, r.reason == PendingReason::kConstraint ? r.explanation : pool_detail);
  }
  std::string detail = pool == QueueReason::kGpusUnhealthy ? pool_detail : r.explanation;
  bool handled = tryPreempt(info, &detail);
  if (!handled) handled = reserve(info, &detail);
  if (!cfg_.backfill.enabled) blocked_ = true;
  (void)handled;
  pend(info, pool == QueueReason::kGpusUnhealthy ? pool : QueueReason::kResources,
       std::move(detail));
}

}  // namespace internal

Decisions SchedulerPass::run(const ClusterState& snapshot, const std::vector<Job>& jobs,
                             const UsageLedger& usage, const SchedulerConfig& config, TimePoint now,
                             Random& random) {
  internal::Pass pass(policy_, snapshot, jobs, usage, config, now, random);
  return pass.run();
}

}  // namespace gpool::sched
