#include "sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_set>

#include "common/units.h"

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

namespace {

int64_t secondsBetween(TimePoint from, TimePoint to) {
  return std::chrono::duration_cast<std::chrono::seconds>(to - from).count();
}

std::string fmtDouble(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A key that identifies every request with the same placement outcome on the same cluster, so a
// failure is remembered for the rest of the pass (free resources only shrink during a pass).
std::string shapeKey(const PlacementRequest& r) {
  const TaskRequest& t = r.task;
  std::string k = std::to_string(t.gpus) + ',' + std::to_string(t.gpu_memory_mib) + ',' +
                  std::to_string(t.gpu_compute) + ',' + std::to_string(t.cpu_millis) + ',' +
                  std::to_string(t.ram_mib) + ',' + std::to_string(r.tasks) + ',' +
                  std::to_string(static_cast<int>(r.scope)) + ',' + std::to_string(r.nodes);
  const Constraints& c = t.constraints;
  if (!c.gpu_models.empty() || c.min_compute_capability || c.min_gpu_memory_mib ||
      !c.node_labels.empty()) {
    k +=
        '|' + std::to_string(c.min_compute_capability) + ',' + std::to_string(c.min_gpu_memory_mib);
    for (const auto& m : c.gpu_models)
      k += ',' + m;
    for (const auto& [key, value] : c.node_labels)
      k += ',' + key + '=' + value;
  }
  return k;
}

// Clamps `alloc` to what is free on its node, so that applying it takes exactly the part of a
// reservation that is free now (the rest is still held by running jobs).
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

// Applies every task or none.
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

struct Cached {
  PendingReason reason;
  std::string explanation;
};

// The state of one pass. Kept in one object so the steps share it without long argument lists.
class Pass {
 public:
  Pass(PlacementPolicy& policy, const ClusterState& snapshot, const std::vector<Job>& jobs,
       const UsageLedger& usage, const SchedulerConfig& config, TimePoint now, Random& random)
      : policy_(policy),
        jobs_(jobs),
        usage_(usage),
        cfg_(config),
        now_(now),
        random_(random),
        work_(snapshot),
        masked_(snapshot) {}

  Decisions run();

 private:
  struct Info {
    const Job* job = nullptr;
    double key = 0;  // larger = more important
    PriorityFactors factors;
    const QosLevel* qos = nullptr;
    uint64_t demand = 0;   // GPU thousandths
    uint64_t compute = 0;  // compute thousandths
  };

  void prepare();
  void idleReclaim();
  void schedule(Info& info);
  PlacementResult tryPlace(const ClusterState& cluster, const PlacementRequest& request,
                           std::unordered_map<std::string, Cached>& cache, bool use_cache);
  void start(Info& info, std::vector<TaskAllocation> alloc, bool backfilled,
             const std::string& placement_explanation);
  bool tryPreempt(Info& info, std::string* detail);
  bool reserve(Info& info, std::string* detail);
  int64_t timeLimit(const Job& job) const {
    return job.time_limit_s > 0 ? job.time_limit_s : cfg_.backfill.default_time_limit_s;
  }
  std::string capReason(const Info& info, QueueReason* reason) const;
  // The preemption grace of a job: its QoS level's, else the configured one.
  int64_t graceOf(const Job& job) const {
    const Info& info = infos_[static_cast<size_t>(&job - jobs_.data())];
    return info.qos && info.qos->grace_s ? *info.qos->grace_s : cfg_.preemption.grace_s;
  }
  std::string priorityText(const Info& info) const;
  // Whether some server could run one task of the request if it were empty (cached per shape).
  bool staticallyFeasible(const PlacementRequest& request) {
    auto [it, inserted] = static_ok_.try_emplace(shapeKey(request), false);
    if (inserted) {
      for (const Node& n : work_.nodes()) {
        if (staticMismatch(n, request.task).empty()) {
          it->second = true;
          break;
        }
      }
    }
    return it->second;
  }
  bool preempting(const Job& j) const {
    return j.preempt_deadline.has_value() || victims_.count(j.id) > 0;
  }

  PlacementPolicy& policy_;
  const std::vector<Job>& jobs_;
  const UsageLedger& usage_;
  const SchedulerConfig& cfg_;
  TimePoint now_;
  Random& random_;

  ClusterState work_;    // what is free now, minus this pass's starts
  ClusterState masked_;  // work_ minus the reserved resources: where long backfill may go
  uint64_t free_compute_ = 0;
  uint64_t capacity_ = 0;

  std::vector<Info> infos_;
  std::unordered_map<JobId, size_t> by_id_;
  std::unordered_map<std::string, uint64_t> user_held_, group_held_, user_qos_held_;
  // GPU compute (computeDemand) held per user and group, for the compute caps.
  std::unordered_map<std::string, uint64_t> user_compute_held_, group_compute_held_;
  std::unordered_map<std::string, uint64_t> deserved_;
  // GPUs of jobs already told to leave (earlier passes or this one), per group.
  std::unordered_map<std::string, uint64_t> group_leaving_;
  std::unordered_map<std::string, Cached> cache_work_, cache_masked_;
  std::unordered_set<std::string> preempt_failed_;
  std::unordered_map<std::string, bool> static_ok_;
  std::unordered_set<JobId> victims_;
  // Running elements per job array (Job::array_id), counting those started in this pass.
  std::unordered_map<JobId, uint32_t> array_running_;
  // Indices into jobs_ of the running jobs that are leaving (a preemption deadline, or chosen
  // as victims in this pass), so preemption attempts need not scan every job.
  std::vector<size_t> leaving_;
  // Indices into infos_ of the running jobs past the minimum run time (built on the first
  // preemption attempt): the only possible victims.
  std::vector<size_t> evictable_;
  bool evictable_built_ = false;
  // Jobs started in this pass, with their expected ends (for reservations).
  std::vector<std::pair<TimePoint, std::vector<TaskAllocation>>> started_;
  std::vector<ReservationDecision> reservations_;
  TimePoint earliest_reservation_ = TimePoint::max();
  bool blocked_ = false;  // without backfill: a job is blocked and everything behind it waits
  Decisions out_;
};

void Pass::prepare() {
  capacity_ = work_.gpuCount() * 1000;
  free_compute_ = work_.gpuComputeFree();
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
      d.pending += info.demand;
    }
  }
  std::vector<GroupDemand> demands;
  demands.reserve(demand.size());
  for (auto& [g, d] : demand)
    demands.push_back(d);
  std::sort(demands.begin(), demands.end(),
            [](const GroupDemand& a, const GroupDemand& b) { return a.group < b.group; });
  deserved_ = computeDeservedShares(demands, cfg_.groups, capacity_);

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

std::string Pass::priorityText(const Info& info) const {
  if (cfg_.order != QueueOrder::kMultifactor) {
    return std::string("queue order ") + std::string(queueOrderName(cfg_.order));
  }
  const PriorityFactors& f = info.factors;
  return "priority " + fmtDouble(f.total, 1) + " (fairshare " + fmtDouble(f.fairshare, 2) +
         ", qos " + fmtDouble(f.qos, 2) + ", age " + fmtDouble(f.age, 2) + ", size " +
         fmtDouble(f.job_size, 2) + (f.nice != 0 ? ", nice " + fmtDouble(f.nice, 0) : "") + ")";
}

void Pass::idleReclaim() {
  if (!cfg_.idle.enabled) return;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const Job& j = jobs_[i];
    if (j.state != JobState::kRunning || !j.idle_since || j.preempt_deadline) continue;
    int64_t idle_s = secondsBetween(*j.idle_since, now_);
    if (cfg_.idle.preempt && idle_s >= cfg_.idle.preempt_after_s && j.idle_warned) {
      out_.idle.push_back({j.id, IdleAction::kPreempt, idle_s});
      out_.preemptions.push_back(
          {j.id, 0, graceOf(j), "GPU allocation idle for " + formatDuration(idle_s)});
      victims_.insert(j.id);
      leaving_.push_back(i);
      group_leaving_[j.group] += gpuDemand(j);
    } else if (idle_s >= cfg_.idle.warn_after_s && !j.idle_warned) {
      out_.idle.push_back({j.id, IdleAction::kWarn, idle_s});
    } else if (idle_s >= cfg_.idle.flag_after_s) {
      out_.idle.push_back({j.id, IdleAction::kFlag, idle_s});
    }
  }
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

std::string Pass::capReason(const Info& info, QueueReason* reason) const {
  const Job& j = *info.job;
  auto held = [](const std::unordered_map<std::string, uint64_t>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? uint64_t{0} : it->second;
  };
  if (info.qos && info.qos->max_gpus_per_user > 0) {
    uint64_t h = held(user_qos_held_, j.user + '\n' + j.qos);
    if (h + info.demand > info.qos->max_gpus_per_user) {
      *reason = QueueReason::kQosMaxGpuPerUser;
      return "user " + j.user + " holds " + formatGpuCount(static_cast<uint32_t>(h)) +
             " GPUs in QoS " + j.qos + ", cap " +
             formatGpuCount(static_cast<uint32_t>(info.qos->max_gpus_per_user));
    }
  }
  uint64_t user_cap = 0;
  auto g = cfg_.groups.find(j.group);
  if (g != cfg_.groups.end()) user_cap = g->second.max_gpus_per_user;
  auto u = cfg_.users.find(j.user);
  if (u != cfg_.users.end() && u->second.max_gpus > 0) user_cap = u->second.max_gpus;
  if (user_cap > 0) {
    uint64_t h = held(user_held_, j.user);
    if (h + info.demand > user_cap) {
      *reason = QueueReason::kAssocMaxGpuPerUser;
      return "user " + j.user + " holds " + formatGpuCount(static_cast<uint32_t>(h)) +
             " GPUs, cap " + formatGpuCount(static_cast<uint32_t>(user_cap));
    }
  }
  if (g != cfg_.groups.end() && g->second.max_gpus > 0) {
    uint64_t h = held(group_held_, j.group);
    if (h + info.demand > g->second.max_gpus) {
      *reason = QueueReason::kGroupQuota;
      return "group " + j.group + " holds " + formatGpuCount(static_cast<uint32_t>(h)) +
             " GPUs, cap " + formatGpuCount(static_cast<uint32_t>(g->second.max_gpus));
    }
  }
  // Compute caps count what computeDemand counts: a slice by its compute share.
  auto computeText = [](uint64_t thousandths) {
    return formatGpuCount(static_cast<uint32_t>(thousandths));
  };
  if (u != cfg_.users.end() && u->second.max_compute > 0) {
    uint64_t h = held(user_compute_held_, j.user);
    if (h + info.compute > u->second.max_compute) {
      *reason = QueueReason::kAssocMaxComputePerUser;
      return "user " + j.user + " holds " + computeText(h) + " GPUs of compute, cap " +
             computeText(u->second.max_compute);
    }
  }
  if (g != cfg_.groups.end() && g->second.max_compute > 0) {
    uint64_t h = held(group_compute_held_, j.group);
    if (h + info.compute > g->second.max_compute) {
      *reason = QueueReason::kGroupComputeQuota;
      return "group " + j.group + " holds " + computeText(h) + " GPUs of compute, cap " +
             computeText(g->second.max_compute);
    }
  }
  *reason = QueueReason::kNone;
  return {};
}

void Pass::start(Info& info, std::vector<TaskAllocation> alloc, bool backfilled,
                 const std::string& placement_explanation) {
  const Job& j = *info.job;
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

// Simulate-before-evict: victims are released on a scratch copy, and the eviction is decided
// only if the job then really fits there.
bool Pass::tryPreempt(Info& info, std::string* detail) {
  const PreemptionConfig& pc = cfg_.preemption;
  const Job& p = *info.job;
  if (!pc.enabled || (info.qos && !info.qos->can_preempt)) return false;
  int64_t waited = secondsBetween(p.submit_time, now_);
  if (waited < pc.delay_s) {
    *detail += "; may preempt in " + formatDuration(pc.delay_s - waited);
    return false;
  }
  if (out_.stats.preempt_attempts >= pc.max_attempts_per_pass) return false;
  std::string key = shapeKey(p.request) + '#' + p.group;
  if (preempt_failed_.count(key)) return false;
  ++out_.stats.preempt_attempts;

  // Work already being evicted may be enough: then wait for it instead of evicting more.
  if (!leaving_.empty()) {
    // Released in the order of jobs_, as a scan of every job would.
    std::vector<size_t> leaving = leaving_;
    std::sort(leaving.begin(), leaving.end());
    ClusterState scratch = work_;
    for (size_t i : leaving)
      releaseAll(scratch, jobs_[i].allocation);
    // What is reserved for earlier preemptors is theirs.
    for (const ReservationDecision& r : reservations_)
      applyClamped(scratch, r.allocation);
    if (place(scratch, p.request, policy_, random_).placed) {
      *detail += "; waiting for " + std::to_string(leaving.size()) + " preempted job(s) to leave";
      return true;
    }
  }

  // Work already leaving no longer counts for its group: reclaim looks at what will remain.
  auto remaining = [&](const std::string& group) {
    uint64_t held = group_held_[group];
    uint64_t gone = group_leaving_[group];
    return held > gone ? held - gone : 0;
  };
  const uint64_t p_group_held = remaining(p.group);
  const uint64_t p_deserved = deserved_[p.group];
  struct Candidate {
    const Job* job;
    bool reclaim;
    double key;
    double lost;  // GPU-seconds of work lost if it has no checkpoint
  };
  if (!evictable_built_) {
    evictable_built_ = true;
    for (size_t i = 0; i < infos_.size(); ++i) {
      const Job& j = *infos_[i].job;
      if (j.state == JobState::kRunning &&
          secondsBetween(j.start_time, now_) >= pc.min_run_time_s) {
        evictable_.push_back(i);
      }
    }
  }
  std::vector<Candidate> cands;
  for (size_t i : evictable_) {
    const Info& v = infos_[i];
    const Job& j = *v.job;
    if (preempting(j)) continue;
    bool preemptible = j.preemptible || (v.qos && v.qos->preemptible);
    bool by_priority = preemptible && info.key > v.key;
    // Reclaim never takes a group below its deserved share, so the two groups cannot swap
    // places and reclaim back and forth (KAI: reclaim must not invert their order).
    bool reclaim = pc.reclaim && j.borrowed && j.group != p.group &&
                   remaining(j.group) >= deserved_[j.group] + v.demand &&
                   p_group_held + info.demand <= p_deserved;
    if (!by_priority && !reclaim) continue;
    double lost = static_cast<double>(v.compute) / 1000.0 *
                  static_cast<double>(secondsBetween(j.start_time, now_));
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
    victims_.insert(c->job->id);
    leaving_.push_back(static_cast<size_t>(c->job - jobs_.data()));
    group_leaving_[c->job->group] += gpuDemand(*c->job);
    std::string why = c->reclaim ? "reclaimed for group " + p.group + " (below its share)"
                                 : "preempted by higher-priority job " + std::to_string(p.id);
    const int64_t grace = graceOf(*c->job);
    grace_s = std::max(grace_s, grace);
    out_.preemptions.push_back({c->job->id, p.id, grace, why});
    if (!names.empty()) names += ", ";
    names += std::to_string(c->job->id);
  }
  TimePoint at = now_ + std::chrono::seconds(grace_s);
  applyClamped(masked_, fit.tasks);
  earliest_reservation_ = std::min(earliest_reservation_, at);
  reservations_.push_back({p.id, at, fit.tasks});
  *detail += "; preempting job(s) " + names + ", starts after their grace period of " +
             formatDuration(grace_s);
  return true;
}

// Finds when the job could start if running jobs end at their time limits (the shadow time),
// and reserves the resources it would get then.
bool Pass::reserve(Info& info, std::string* detail) {
  if (!cfg_.backfill.enabled || reservations_.size() >= cfg_.backfill.max_reservations) {
    return false;
  }
  std::vector<std::pair<TimePoint, const std::vector<TaskAllocation>*>> ends;
  for (const Job& j : jobs_) {
    if (j.state != JobState::kRunning) continue;
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

void Pass::schedule(Info& info) {
  const Job& j = *info.job;
  auto pend = [&](QueueReason reason, std::string detail) {
    out_.pending.push_back({j.id, reason, info.key, std::move(detail)});
  };
  for (JobId dep : j.dependencies) {
    if (by_id_.count(dep))
      return pend(QueueReason::kDependency, "waits for job " + std::to_string(dep));
  }
  if (j.array_id != 0 && j.array_limit != 0) {
    auto running = array_running_.find(j.array_id);
    if (running != array_running_.end() && running->second >= j.array_limit) {
      return pend(QueueReason::kJobArrayTaskLimit,
                  "array " + std::to_string(j.array_id) + " already runs " +
                      std::to_string(running->second) + " elements, its limit");
    }
  }
  if (!info.qos) return pend(QueueReason::kInvalidQos, "unknown QoS '" + j.qos + "'");
  QueueReason cap;
  std::string cap_detail = capReason(info, &cap);
  if (cap != QueueReason::kNone) return pend(cap, cap_detail);
  if (blocked_) return pend(QueueReason::kPriority, "behind a blocked higher-priority job");

  PlacementResult r;
  if (info.compute > free_compute_ && !staticallyFeasible(j.request)) {
    return pend(QueueReason::kBadConstraints, "no server of the pool can ever run it");
  }
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
      return pend(QueueReason::kResources, "placement could not be applied: " + r.explanation);
    }
    if (now_ + std::chrono::seconds(timeLimit(j)) <= earliest_reservation_) {
      if (applyAll(work_, r.tasks)) return start(info, std::move(r.tasks), true, r.explanation);
    }
    PlacementResult m = tryPlace(masked_, j.request, cache_masked_, true);
    if (m.placed && applyAll(work_, m.tasks)) {
      return start(info, std::move(m.tasks), true, m.explanation);
    }
    return pend(QueueReason::kPriority,
                "would delay the reservation of job " + std::to_string(reservations_.front().job));
  }
  if (r.reason == PendingReason::kInvalid || r.reason == PendingReason::kConstraint) {
    return pend(QueueReason::kBadConstraints, r.explanation);
  }
  std::string detail = r.explanation;
  bool handled = tryPreempt(info, &detail);
  if (!handled) handled = reserve(info, &detail);
  if (!cfg_.backfill.enabled) blocked_ = true;
  (void)handled;
  pend(QueueReason::kResources, std::move(detail));
}

Decisions Pass::run() {
  prepare();
  idleReclaim();
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
  out_.pending.reserve(order.size());
  for (size_t i : order)
    schedule(infos_[i]);
  out_.reservations = std::move(reservations_);
  return std::move(out_);
}

}  // namespace

Decisions SchedulerPass::run(const ClusterState& snapshot, const std::vector<Job>& jobs,
                             const UsageLedger& usage, const SchedulerConfig& config, TimePoint now,
                             Random& random) {
  Pass pass(policy_, snapshot, jobs, usage, config, now, random);
  return pass.run();
}

}  // namespace gpool::sched
