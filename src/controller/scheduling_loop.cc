#include "controller/scheduling_loop.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <spdlog/spdlog.h>

#include "api/gpu_model.h"
#include "api/job.h"
#include "api/json_reader.h"
#include "api/user.h"
#include "common/units.h"
#include "controller/accounting.h"
#include "store/api_codec.h"

namespace gpool::controller {

namespace {

// An agent's reason for a task's end is kept with the job up to this size (a launch error can
// quote a long path or message).
constexpr size_t kMaxEndReasonBytes = 512;

// "2026-12-07 10:00:00 UTC": a time in a reason users read, whatever their time zone.
std::string utcText(TimePoint t) {
  std::time_t secs = static_cast<std::time_t>(toUnixMicros(t) / 1'000'000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// "every GPU at 0 %", "every GPU at or below 5 %".
std::string idleWords(double threshold_pct) {
  if (threshold_pct <= 0) return "every GPU at 0 %";
  char buf[48];
  std::snprintf(buf, sizeof buf, "every GPU at or below %g %%", threshold_pct);
  return buf;
}

sched::Node schedNodeFor(const api::Node& node) {
  sched::Node out;
  out.name = node.name;
  out.labels = node.labels;
  out.cpu_total_millis = out.cpu_free_millis = node.cpus_milli;
  out.ram_total_mib = out.ram_free_mib = node.ram_mib;
  out.schedulable = api::isSchedulable(node.state);
  out.enforces_slices = !node.slices || node.slices->enforced();
  for (const api::Gpu& gpu : node.gpus) {
    sched::Gpu g;
    g.index = gpu.index;
    g.uuid = gpu.uuid;
    g.model = gpu.model;
    g.compute_capability = gpu.compute_capability.major * 10 + gpu.compute_capability.minor;
    g.cuda_version = api::cudaVersionNumber(gpu.cuda_version);
    g.memory_total_mib = g.memory_free_mib = gpu.memory_mib;
    g.healthy = gpu.health != api::GpuHealth::kUnhealthy;
    if (!g.healthy) g.health_reason = gpu.health_reason;
    out.gpus.push_back(std::move(g));
  }
  std::sort(out.gpus.begin(), out.gpus.end(),
            [](const sched::Gpu& a, const sched::Gpu& b) { return a.index < b.index; });
  return out;
}

sched::PlacementRequest requestFor(int64_t id, const api::JobSpec& spec) {
  sched::PlacementRequest req;
  req.job = std::to_string(id);
  req.tasks = spec.tasks;
  req.scope = spec.nodes == 1 ? sched::GangScope::kSingleServer : sched::GangScope::kMultiServer;
  if (spec.nodes > 1) req.nodes = spec.nodes;
  sched::TaskRequest& t = req.task;
  t.gpus = spec.resources.gpus_milli;
  t.gpu_memory_mib = spec.resources.gpu_memory_mib;
  t.gpu_compute = spec.resources.gpu_compute_milli;
  t.cpu_millis = spec.resources.cpus_milli;
  t.ram_mib = spec.resources.ram_mib;
  const api::Constraints& c = spec.constraints;
  t.constraints.gpu_models = c.gpu_models;
  if (c.min_compute_capability) {
    t.constraints.min_compute_capability =
        c.min_compute_capability->major * 10 + c.min_compute_capability->minor;
  }
  if (c.min_cuda) t.constraints.min_cuda = c.min_cuda->major * 100 + c.min_cuda->minor;
  t.constraints.min_gpu_memory_mib = c.min_gpu_memory_mib;
  t.constraints.node_labels = c.node_labels;
  t.constraints.datasets = c.datasets;
  return req;
}

// The api allocations (by node name and GPU UUID) of a pass's decision (by indices).
std::vector<api::Allocation> apiAllocationsFor(const std::vector<sched::TaskAllocation>& tasks,
                                               const sched::ClusterState& cluster,
                                               const api::JobSpec& spec) {
  std::vector<api::Allocation> out;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const sched::TaskAllocation& t = tasks[i];
    const sched::Node& node = cluster.node(t.node);
    api::Allocation a;
    a.task = static_cast<uint32_t>(i);
    a.node = node.name;
    a.cpus_milli = t.cpu_millis;
    a.ram_mib = t.ram_mib;
    for (const sched::GpuSlice& s : t.gpus) {
      const sched::Gpu& gpu = node.gpus[s.gpu_index];
      api::PerGpuNeed need = api::perGpuNeed(spec.resources, gpu.memory_total_mib);
      api::Slice slice;
      slice.gpu_uuid = gpu.uuid;
      slice.exclusive = need.exclusive;
      slice.memory_mib = s.memory_mib != 0 ? s.memory_mib : need.memory_mib;
      slice.compute_milli = need.exclusive ? 1000 : std::max<uint32_t>(1, s.compute);
      a.slices.push_back(std::move(slice));
    }
    out.push_back(std::move(a));
  }
  return out;
}

// A running job's allocations in the snapshot's terms; nullopt when a node or GPU it holds is
// no longer registered (it then holds nothing the pass can see).
std::optional<std::vector<sched::TaskAllocation>> schedAllocationsFor(
    const std::vector<api::Allocation>& allocations, const sched::ClusterState& cluster) {
  std::vector<sched::TaskAllocation> out;
  for (const api::Allocation& a : allocations) {
    std::optional<size_t> node = cluster.findNode(a.node);
    if (!node) return std::nullopt;
    sched::TaskAllocation t;
    t.node = *node;
    t.cpu_millis = a.cpus_milli;
    t.ram_mib = a.ram_mib;
    const sched::Node& n = cluster.node(*node);
    for (const api::Slice& s : a.slices) {
      auto it = std::find_if(n.gpus.begin(), n.gpus.end(),
                             [&](const sched::Gpu& g) { return g.uuid == s.gpu_uuid; });
      if (it == n.gpus.end()) return std::nullopt;
      t.gpus.push_back(sched::GpuSlice{static_cast<uint32_t>(it - n.gpus.begin()),
                                       s.exclusive ? it->memory_total_mib : s.memory_mib,
                                       s.compute_milli});
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Where a job another one depends on stands; the pass decides what that means for the
// dependent (sched::DependencyState).
sched::DependencyState dependencyStateOf(api::JobState state) {
  switch (state) {
    case api::JobState::kCompleted: return sched::DependencyState::kSucceeded;
    case api::JobState::kPreempted:
    case api::JobState::kNodeFail: return sched::DependencyState::kRequeueable;
    case api::JobState::kFailed:
    case api::JobState::kCancelled:
    case api::JobState::kTimeout:
    case api::JobState::kOutOfMemory: return sched::DependencyState::kFailed;
    default: return sched::DependencyState::kOpen;
  }
}

sched::DependencyKind dependencyKindOf(api::DependencyKind kind) {
  switch (kind) {
    case api::DependencyKind::kAfterOk: return sched::DependencyKind::kAfterOk;
    case api::DependencyKind::kAfterNotOk: return sched::DependencyKind::kAfterNotOk;
    case api::DependencyKind::kAfterAny: return sched::DependencyKind::kAfterAny;
  }
  return sched::DependencyKind::kAfterOk;
}

}  // namespace

namespace {

// The configured QoS levels with the store's over them (a stored level of a configured name
// replaces it but keeps whom it may preempt).
Status mergeStoredQos(store::Store& store, sched::SchedulerConfig& cfg) {
  GPOOL_ASSIGN_OR_RETURN(std::vector<api::Qos> levels, store::loadApiQos(store));
  for (const api::Qos& q : levels) {
    sched::QosLevel level;
    level.name = q.name;
    level.priority = q.priority;
    level.preemptible = q.preemptible;
    level.max_gpus_per_user = q.max_gpus_per_user_milli.value_or(0);
    level.grace_s = q.grace_time_seconds;
    auto same = std::find_if(cfg.qos_levels.begin(), cfg.qos_levels.end(),
                             [&](const sched::QosLevel& l) { return l.name == q.name; });
    if (same != cfg.qos_levels.end()) {
      level.can_preempt = same->can_preempt;
      *same = level;
    } else {
      cfg.qos_levels.push_back(level);
    }
  }
  return Status::ok();
}

std::string defaultQos(const sched::SchedulerConfig& configured) {
  return configured.qos_levels.empty() ? std::string("normal") : configured.qos_levels.front().name;
}

// Every level's grace by name, and the default level's also under "".
std::map<std::string, int64_t> qosGraces(const sched::SchedulerConfig& cfg,
                                         const std::string& default_qos) {
  std::map<std::string, int64_t> graces;
  for (const sched::QosLevel& level : cfg.qos_levels) {
    if (!level.grace_s) continue;
    graces[level.name] = *level.grace_s;
    if (level.name == default_qos) graces[""] = *level.grace_s;
  }
  return graces;
}

}  // namespace

Result<StorePolicy> readStorePolicy(store::Store& store, const sched::SchedulerConfig& base,
                                    TimePoint now, const std::vector<store::JobRecord>& jobs) {
  StorePolicy policy;
  sched::SchedulerConfig& cfg = policy.config;
  cfg = base;
  GPOOL_RETURN_IF_ERROR(mergeStoredQos(store, cfg));
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::QuotaRecord> quotas, store.listQuotas());
  // GPU-hours used, by (is_group, period) then name: one usage query per pair, as sites tend to
  // give every quota the same period.
  std::map<std::pair<bool, int64_t>, std::map<std::string, double>> used;
  for (const store::QuotaRecord& r : quotas) {
    const bool is_group = r.subject == store::QuotaSubject::kGroup;
    const std::string where = std::string(is_group ? "group " : "user ") + r.name + "'s quota";
    GPOOL_ASSIGN_OR_RETURN(nlohmann::json j, api::parseJsonText(r.limits_json, where));
    api::Quota quota;
    GPOOL_RETURN_IF_ERROR(api::fromJson(j, &quota, where));
    // The api's max_gpus 0 forbids GPUs, where the library's 0 means no cap: one thousandth
    // of a GPU is below any slice a job can ask for, so nothing with a GPU fits under it.
    // The same for max_compute.
    auto capOf = [](const std::optional<uint64_t>& limit) {
      return limit ? std::max<uint64_t>(*limit, 1) : uint64_t{0};
    };
    if (is_group) {
      sched::GroupPolicy& group = cfg.groups[r.name];
      group.max_gpus = capOf(quota.max_gpus_milli);
      group.max_compute = capOf(quota.max_compute_milli);
      group.quota = quota.guaranteed_gpus_milli;
      cfg.fairshare.group_shares[r.name] = quota.priority_weight;
    } else {
      sched::UserPolicy& user = cfg.users[r.name];
      user.max_gpus = capOf(quota.max_gpus_milli);
      user.max_compute = capOf(quota.max_compute_milli);
      cfg.fairshare.user_shares[r.name] = quota.priority_weight;
    }
    if (!quota.gpu_hours) continue;
    if (is_group) {
      cfg.groups[r.name].gpu_hours = static_cast<double>(*quota.gpu_hours);
    } else {
      cfg.users[r.name].gpu_hours = static_cast<double>(*quota.gpu_hours);
    }
    auto key = std::make_pair(is_group, quota.period_seconds);
    auto it = used.find(key);
    if (it == used.end()) {
      GPOOL_ASSIGN_OR_RETURN(
          std::vector<store::UsageRow> rows,
          usageSoFar(store, is_group ? store::UsageGrouping::kGroup : store::UsageGrouping::kUser,
                     now - std::chrono::seconds(quota.period_seconds), now, &jobs));
      std::map<std::string, double> by_name;
      for (const store::UsageRow& row : rows)
        by_name[row.key] = row.gpu_hours;
      it = used.emplace(key, std::move(by_name)).first;
    }
    auto u = it->second.find(r.name);
    double hours = u == it->second.end() ? 0.0 : u->second;
    if (is_group) {
      cfg.groups[r.name].gpu_hours_used = hours;
    } else {
      cfg.users[r.name].gpu_hours_used = hours;
    }
  }
  return policy;
}

SchedulingLoop::SchedulingLoop(store::Store& store, NodeRegistry& registry, AgentGateway& gateway,
                               Clock& clock, LoopOptions options)
    : store_(store),
      registry_(registry),
      gateway_(gateway),
      clock_(clock),
      options_(std::move(options)),
      ledger_(options_.usage_half_life_s),
      random_(options_.seed),
      policy_(std::make_unique<sched::BestFitPolicy>()) {}

Status SchedulingLoop::recover() {
  std::lock_guard lock(mu_);
  int64_t lookback_s =
      std::min<int64_t>(4 * std::max<int64_t>(options_.usage_half_life_s, 0), 90 * 24 * 3600);
  return rebuildLedger(store_, ledger_, clock_.now(), std::chrono::seconds(lookback_s),
                       std::chrono::hours(24));
}

Result<IdleAction> parseIdleAction(std::string_view text) {
  if (text == "auto") return IdleAction::kAuto;
  if (text == "requeue") return IdleAction::kRequeue;
  if (text == "end") return IdleAction::kEnd;
  if (text == "warn") return IdleAction::kWarn;
  return Status::invalidArgument("'" + std::string(text) +
                                 "' is not an idle action (auto, requeue, end, warn)");
}

IdleAction SchedulingLoop::idleActionOf(const std::string& qos, bool preemptible) const {
  auto q = options_.idle.qos_actions.find(qos);
  IdleAction a = q == options_.idle.qos_actions.end() ? options_.idle.action : q->second;
  if (a == IdleAction::kAuto) a = preemptible ? IdleAction::kRequeue : IdleAction::kEnd;
  return a;
}

Status SchedulingLoop::trackIdle(const store::JobRecord& record,
                                 const std::map<int64_t, bool>& idle_now, bool preemptible,
                                 const std::string& qos, sched::Job& sj, TimePoint now) {
  auto seen = idle_now.find(record.id);
  const bool idle = seen != idle_now.end() && seen->second;
  auto it = idle_.find(record.id);
  auto stored = stored_idle_->find(record.id);
  if (!idle) {
    // Seen busy: the stored idle time goes. No reading yet (after a restart, before the
    // agents' telemetry): it stays for the first reading to decide.
    if (seen != idle_now.end() && stored != stored_idle_->end()) {
      GPOOL_RETURN_IF_ERROR(store_.setJobIdleSince(record.id, std::nullopt));
      stored_idle_->erase(stored);
    }
    if (it == idle_.end()) return Status::ok();
    const bool warned = it->second.warned;
    const int64_t idle_s =
        std::chrono::duration_cast<std::chrono::seconds>(now - it->second.since).count();
    idle_.erase(it);
    if (!warned) return Status::ok();
    // Unflagged where the user reads the flag: the job's reason and an event.
    Status s = store_.setJobReason(
        record.id, api::JobState::kRunning, now,
        "GPU use seen again after " + formatDuration(idle_s) + " idle: idle reclaim called off");
    if (!s.isOk() && s.code() != StatusCode::kFailedPrecondition) return s;
    return Status::ok();
  }
  if (it == idle_.end()) {
    // Idle since the store says (before a gpoold restart), else from now on. A flag written
    // before a restart is kept (no second warning).
    TimePoint since = now;
    if (stored != stored_idle_->end() && stored->second <= now) {
      since = stored->second;
    } else {
      GPOOL_RETURN_IF_ERROR(store_.setJobIdleSince(record.id, now));
      (*stored_idle_)[record.id] = now;
    }
    it =
        idle_.emplace(record.id, Idle{since, record.reason.rfind(kIdleReasonPrefix, 0) == 0}).first;
  }
  sj.idle_since = it->second.since;
  sj.idle_warned = it->second.warned;
  it->second.action = idleActionOf(qos, preemptible);
  sj.idle_reclaimable = it->second.action != IdleAction::kWarn;
  return Status::ok();
}

Status SchedulingLoop::failJobsOnDownNodes(PassReport& report) {
  std::set<std::string> down;
  std::map<std::string, std::string> gpu_names;  // UUID -> "GPU <index> of <node>"
  for (const api::Node& node : registry_.nodes()) {
    if (node.state == api::NodeState::kDown) down.insert(node.name);
    for (const api::Gpu& g : node.gpus)
      gpu_names[g.uuid] = "GPU " + std::to_string(g.index) + " of " + node.name;
  }
  // GPUs held after a fatal fault (an XID of the fatal kinds, a GPU lost from the bus) fail the
  // jobs running on them like a lost node does: the work there is gone or cannot be trusted.
  const std::map<std::string, std::string> failed_gpus = registry_.heldGpus();
  if (down.empty() && failed_gpus.empty()) return Status::ok();
  GPOOL_ASSIGN_OR_RETURN(
      std::vector<store::JobRecord> running,
      store_.jobsInStates({api::JobState::kRunning, api::JobState::kCompleting}));
  TimePoint now = clock_.now();
  for (const store::JobRecord& record : running) {
    GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
    std::string lost;
    std::string failed_gpu;
    for (const api::Allocation& a : job.allocations) {
      if (down.count(a.node)) lost = a.node;
      for (const api::Slice& s : a.slices) {
        auto f = failed_gpus.find(s.gpu_uuid);
        if (f != failed_gpus.end() && failed_gpu.empty()) {
          auto name = gpu_names.find(s.gpu_uuid);
          failed_gpu =
              (name == gpu_names.end() ? s.gpu_uuid : name->second) + " failed: " + f->second;
        }
      }
    }
    if (lost.empty() && failed_gpu.empty()) continue;
    std::string reason = lost.empty() ? failed_gpu : "node " + lost + " not responding";
    Status moved = store_.transitionJob(
        store::JobTransition{record.id, {record.state}, api::JobState::kNodeFail, now, reason});
    if (moved.code() == StatusCode::kFailedPrecondition) continue;  // ended meanwhile
    GPOOL_RETURN_IF_ERROR(moved);
    ++report.node_failed;
    ended_.erase(record.id);
    preempting_.erase(record.id);
    reclaiming_.erase(record.id);
    // Tasks on nodes still up must stop: the job restarts elsewhere or not at all. Tasks on the
    // DOWN node are fenced by their agent's expired lease.
    for (const api::Allocation& a : job.allocations) {
      if (!down.count(a.node)) {
        gateway_.cancel(a.node, record.id, a.task, record.epoch, 0, "node_fail");
      }
    }
    if (job.spec.preemptible) {
      GPOOL_RETURN_IF_ERROR(store_.transitionJob(
          store::JobTransition{record.id,
                               {api::JobState::kNodeFail},
                               api::JobState::kPending,
                               now,
                               lost.empty() ? "requeued after GPU failure (" + failed_gpu + ")"
                                            : "requeued after node failure"}));
    }
  }
  return Status::ok();
}

Status SchedulingLoop::persistStart(
    const sched::StartDecision& start, const store::JobRecord& record,
    const sched::ClusterState& cluster,
    const std::function<std::optional<int64_t>(const std::string&)>& grace_of,
    std::map<std::string, std::set<uint32_t>>& rendezvous_ports, PassReport& report) {
  GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
  std::vector<api::Allocation> allocations = apiAllocationsFor(start.allocation, cluster, job.spec);
  const std::vector<std::string> task_nodes = taskNodesOf(allocations);
  if (task_nodes.size() >= 2) {
    // torchrun's MASTER_PORT on the server of task 0: the first one from the job's preferred
    // port that no running job with its task 0 there holds (wrapping within the range).
    std::set<uint32_t>& taken = rendezvous_ports[task_nodes[0]];
    const uint32_t preferred = rendezvousPreferredPort(record.id);
    uint32_t port = preferred;
    for (uint32_t k = 0; k < kRendezvousPorts && taken.count(port); ++k) {
      port = kRendezvousBasePort + (preferred - kRendezvousBasePort + k + 1) % kRendezvousPorts;
    }
    taken.insert(port);
    for (api::Allocation& a : allocations)
      a.rendezvous_port = port;
  }
  Result<int64_t> epoch =
      store_.recordPlacement(record.id, store::placementJsonFor(allocations), clock_.now(),
                             start.backfilled ? "backfilled" : "placed");
  if (!epoch.ok()) {
    // Cancelled between the snapshot and now: nothing to start.
    if (epoch.status().code() == StatusCode::kFailedPrecondition) return Status::ok();
    return epoch.status();
  }
  ++report.started;
  for (const api::Allocation& a : allocations) {
    TaskAssignment assignment;
    assignment.job_id = record.id;
    assignment.task = a.task;
    assignment.attempt = record.requeue_count;
    assignment.lease_epoch = *epoch;
    assignment.incarnation = store_.currentIncarnation();
    assignment.node = a.node;
    assignment.node_epoch = registry_.nodeEpoch(a.node);
    assignment.user = record.user;
    assignment.uid = record.uid;
    assignment.array_job_id = record.array_parent;
    assignment.array_index = record.array_index;
    assignment.spec = job.spec;
    assignment.allocation = a;
    assignment.grace_s = grace_of(job.spec.qos);
    assignment.task_nodes = task_nodes;
    addGroupProject(store_, record.group, &assignment);
    gateway_.assign(assignment);
  }
  return Status::ok();
}

// The input of one pass, built by snapshotPool and snapshotJobs. `by_id` points into `records`.
struct SchedulingLoop::PassInput {
  TimePoint now{};
  sched::ClusterState cluster;
  std::set<std::string> pool_models;  // the GPU models of the registered nodes
  std::vector<store::JobRecord> records;
  std::unordered_map<int64_t, const store::JobRecord*> by_id;
  std::map<std::string, std::set<uint32_t>> rendezvous_ports;  // see persistStart
  std::vector<sched::Job> jobs;
  std::string default_qos;
  StorePolicy policy;
};

Result<PassReport> SchedulingLoop::runOnce() {
  {
    std::lock_guard wake(wake_mu_);
    dirty_ = false;
  }
  std::lock_guard lock(mu_);
  PassReport report;
  GPOOL_ASSIGN_OR_RETURN(report.lost_nodes, registry_.expireSilent());
  for (const std::string& name : report.lost_nodes)
    spdlog::warn("node {} is DOWN (not responding)", name);
  GPOOL_RETURN_IF_ERROR(failJobsOnDownNodes(report));

  PassInput in;
  in.now = clock_.now();
  snapshotPool(in);
  GPOOL_RETURN_IF_ERROR(snapshotJobs(in));
  sched::SchedulerPass pass(*policy_);
  sched::Decisions decisions =
      pass.run(in.cluster, in.jobs, ledger_, in.policy.config, in.now, random_);
  GPOOL_RETURN_IF_ERROR(applyDecisions(in, decisions, report));
  return report;
}

void SchedulingLoop::snapshotPool(PassInput& in) const {
  for (const api::Node& node : registry_.nodes()) {
    sched::Node n = schedNodeFor(node);
    // A node whose agent is not connected gets no new work: nothing there could start it, and
    // it would sit RUNNING on paper until the node went DOWN (issue 19, defect 2).
    if (options_.require_connected_agents && !registry_.agentConnected(node.name)) {
      n.schedulable = false;
    }
    in.cluster.addNode(std::move(n));
    for (const api::Gpu& gpu : node.gpus)
      in.pool_models.insert(gpu.model);
  }
}

Status SchedulingLoop::snapshotJobs(PassInput& in) {
  // The pool's models each requested list of names means, once per pass.
  std::map<std::vector<std::string>, std::vector<std::string>> model_names;

  GPOOL_ASSIGN_OR_RETURN(in.records,
                         store_.jobsInStates({api::JobState::kPending, api::JobState::kRunning,
                                              api::JobState::kCompleting}));
  in.jobs.reserve(in.records.size());
  in.default_qos = defaultQos(options_.scheduler);
  GPOOL_ASSIGN_OR_RETURN(in.policy,
                         readStorePolicy(store_, options_.scheduler, in.now, in.records));
  ++spec_pass_;
  std::map<int64_t, bool> idle_now;
  if (options_.idle.enabled) {
    if (!stored_idle_) {
      Result<std::map<int64_t, TimePoint>> stored = store_.jobsIdleSince();
      if (!stored.ok()) return stored.status();
      stored_idle_ = std::move(*stored);
    }
    if (options_.idle.jobs_idle) idle_now = options_.idle.jobs_idle();
    // Flag after `after`, warn at once (the flag is the warning), stop `grace` later.
    sched::IdleReclaimConfig& idle = in.policy.config.idle;
    idle.enabled = true;
    idle.flag_after_s = idle.warn_after_s = options_.idle.after_s;
    idle.preempt_after_s = options_.idle.after_s + options_.idle.grace_s;
    idle.preempt = true;
  }
  std::set<int64_t> running;  // the RUNNING jobs this pass saw, for idle_'s upkeep
  for (const store::JobRecord& record : in.records) {
    in.by_id[record.id] = &record;
    GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobWithoutSpec(record));
    GPOOL_ASSIGN_OR_RETURN(const SpecSummary* spec, specOf(record));
    sched::Job sj;
    sj.id = static_cast<sched::JobId>(record.id);
    sj.user = record.user;
    sj.group = record.group;
    sj.qos = spec->qos.empty() ? in.default_qos : spec->qos;
    sj.submit_time = record.submit_time;
    sj.time_limit_s = spec->time_limit_seconds;
    sj.preemptible = spec->preemptible;
    sj.nice = -int64_t{record.priority};  // an admin's priority change (PATCH /v1/jobs/{id})
    sj.request = spec->request;
    // GPU models as the user named them ("A100") become the pool's models they name.
    if (std::vector<std::string>& models = sj.request.task.constraints.gpu_models;
        !models.empty()) {
      auto known = model_names.find(models);
      if (known == model_names.end()) {
        std::vector<std::string> matched = api::matchingGpuModels(models, in.pool_models);
        known = model_names.emplace(models, matched.empty() ? models : matched).first;
      }
      models = known->second;
    }
    if (record.array_parent && spec->array_max_parallel) {
      sj.array_id = static_cast<sched::JobId>(*record.array_parent);
      sj.array_limit = *spec->array_max_parallel;
    }
    if (record.state != api::JobState::kPending) {
      const std::vector<std::string> nodes = taskNodesOf(job.allocations);
      if (nodes.size() >= 2 && !job.allocations.empty()) {
        uint32_t port = job.allocations[0].rendezvous_port;
        in.rendezvous_ports[nodes[0]].insert(port != 0 ? port : rendezvousPreferredPort(record.id));
      }
      auto allocs = schedAllocationsFor(job.allocations, in.cluster);
      if (!allocs) continue;  // on a node not registered (yet): invisible to this pass
      bool applied = true;
      for (const sched::TaskAllocation& t : *allocs) {
        if (!in.cluster.apply(t).isOk()) applied = false;
      }
      if (!applied) spdlog::error("job {}: its placement does not fit its nodes", record.id);
      sj.state = sched::JobState::kRunning;
      sj.allocation = std::move(*allocs);
      sj.start_time = record.start_time.value_or(in.now);
      auto p = preempting_.find(record.id);
      if (p != preempting_.end()) sj.preempt_deadline = p->second.deadline;
      if (options_.idle.enabled && record.state == api::JobState::kRunning) {
        running.insert(record.id);
        GPOOL_RETURN_IF_ERROR(trackIdle(record, idle_now, sj.preemptible, sj.qos, sj, in.now));
      }
      in.jobs.push_back(std::move(sj));
      continue;
    }
    // What the pass needs to decide holds and dependencies (it decides; sched::Job).
    sj.hold = record.hold.empty()      ? sched::Hold::kNone
              : record.hold == "admin" ? sched::Hold::kAdmin
                                       : sched::Hold::kUser;
    for (const api::Dependency& dep : spec->dependencies) {
      sched::Dependency d{dep.job_id, dependencyKindOf(dep.kind), sched::DependencyState::kOpen};
      auto known = in.by_id.find(static_cast<int64_t>(dep.job_id));
      if (known == in.by_id.end()) {
        Result<store::JobRecord> other = store_.getJob(static_cast<int64_t>(dep.job_id));
        if (other.ok()) {
          d.state = dependencyStateOf(other->state);
        } else if (other.status().code() == StatusCode::kNotFound) {
          d.state = sched::DependencyState::kUnknown;
        } else {
          return other.status();
        }
      }
      sj.dependencies.push_back(d);
    }
    auto claim = claims_.find(record.id);
    if (claim != claims_.end()) sj.victims = claim->second;
    in.jobs.push_back(std::move(sj));
  }
  // Jobs no longer running (ended, requeued) start a new idle count if they run again.
  std::erase_if(idle_, [&running](const auto& entry) { return !running.count(entry.first); });
  if (stored_idle_) {
    // Their stored idle time goes too (a job this pass saw RUNNING keeps its row, also when
    // its node was not registered yet).
    std::set<int64_t> in_running;
    for (const store::JobRecord& record : in.records) {
      if (record.state == api::JobState::kRunning) in_running.insert(record.id);
    }
    for (auto it = stored_idle_->begin(); it != stored_idle_->end();) {
      if (in_running.count(it->first)) {
        ++it;
        continue;
      }
      GPOOL_RETURN_IF_ERROR(store_.setJobIdleSince(it->first, std::nullopt));
      it = stored_idle_->erase(it);
    }
  }
  // Specs of jobs this pass did not see (ended, held) are not kept.
  std::erase_if(spec_summaries_,
                [this](const auto& entry) { return entry.second.pass != spec_pass_; });

  return Status::ok();
}

Status SchedulingLoop::applyDecisions(PassInput& in, const sched::Decisions& decisions,
                                      PassReport& report) {
  // A store QoS level's grace_time is also its jobs' grace at their time limit.
  const std::map<std::string, int64_t> qos_grace = qosGraces(in.policy.config, in.default_qos);
  auto graceOf = [&](const std::string& qos) -> std::optional<int64_t> {
    auto g = qos_grace.find(qos);
    return g == qos_grace.end() ? std::nullopt : std::optional<int64_t>(g->second);
  };
  for (const sched::StartDecision& start : decisions.starts) {
    GPOOL_RETURN_IF_ERROR(persistStart(start, *in.by_id.at(static_cast<int64_t>(start.job)),
                                       in.cluster, graceOf, in.rendezvous_ports, report));
  }
  // A preemptor's claim lasts while it pends: dropped once it started or left the queue.
  std::set<int64_t> still_pending;
  for (const sched::PendingDecision& p : decisions.pending)
    still_pending.insert(static_cast<int64_t>(p.job));
  std::erase_if(claims_, [&](const auto& entry) { return !still_pending.count(entry.first); });
  GPOOL_RETURN_IF_ERROR(applyIdleDecisions(in, decisions.idle));
  GPOOL_RETURN_IF_ERROR(applyPreemptions(in, decisions.preemptions, report));
  for (const sched::CancelDecision& c : decisions.cancels) {
    spdlog::info("job {}: cancelled, {}: {}", c.job, c.reason, c.detail);
    Status s = store_.recordEnd(static_cast<int64_t>(c.job), api::JobState::kCancelled,
                                std::nullopt, in.now, c.reason);
    if (!s.isOk() && s.code() != StatusCode::kFailedPrecondition) return s;
  }
  publishInsight(in, decisions);
  return persistPendingReasons(in, decisions.pending, report);
}

Status SchedulingLoop::applyIdleDecisions(const PassInput& in,
                                          const std::vector<sched::IdleDecision>& idle) {
  for (const sched::IdleDecision& d : idle) {
    const store::JobRecord& record = *in.by_id.at(static_cast<int64_t>(d.job));
    auto it = idle_.find(record.id);
    if (it == idle_.end()) continue;
    const IdleAction action = it->second.action;
    if (d.action == sched::IdleAction::kWarn) {
      // The flag: the job's reason says it is idle and what happens when (gpool show), as an
      // event (the live feed, gpool watch). The AllocationIdle alert comes from the rules.
      const TimePoint at =
          it->second.since + std::chrono::seconds(options_.idle.after_s + options_.idle.grace_s);
      std::string reason = kIdleReasonPrefix + idleWords(options_.idle.threshold_pct) + " since " +
                           utcText(it->second.since) + " (" + formatDuration(d.idle_s) + "); ";
      switch (action) {
        case IdleAction::kRequeue: reason += "requeued at " + utcText(at) + " unless used"; break;
        case IdleAction::kEnd: reason += "ended at " + utcText(at) + " unless used"; break;
        default: reason += "not reclaimed (its QoS only warns)"; break;
      }
      Status s = store_.setJobReason(record.id, api::JobState::kRunning, in.now, reason);
      if (s.code() == StatusCode::kFailedPrecondition) continue;  // ended meanwhile
      GPOOL_RETURN_IF_ERROR(s);
      it->second.warned = true;
      spdlog::info("job {} of {} flagged idle: {}", record.id, record.user, reason);
    } else if (d.action == sched::IdleAction::kPreempt) {
      const bool requeue = action == IdleAction::kRequeue;
      reclaiming_[record.id] = {requeue, "idle reclaim: " + idleWords(options_.idle.threshold_pct) +
                                             " for " + formatDuration(d.idle_s) +
                                             (requeue ? ", requeued" : ", ended")};
      spdlog::info("job {} of {} reclaimed: idle for {}, {}", record.id, record.user,
                   formatDuration(d.idle_s), requeue ? "requeued" : "ended");
    }
  }
  return Status::ok();
}

Status SchedulingLoop::applyPreemptions(const PassInput& in,
                                        const std::vector<sched::PreemptDecision>& preemptions,
                                        PassReport& report) {
  for (const sched::PreemptDecision& p : preemptions) {
    const store::JobRecord& record = *in.by_id.at(static_cast<int64_t>(p.job));
    preempting_[record.id] = Leaving{in.now + std::chrono::seconds(p.grace_s), p.reason};
    if (p.for_job != 0) claims_[static_cast<int64_t>(p.for_job)].push_back(p.job);
    ++report.preempted;
    GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
    for (const api::Allocation& a : job.allocations)
      gateway_.cancel(a.node, record.id, a.task, record.epoch, p.grace_s, "preempted");
  }
  return Status::ok();
}

void SchedulingLoop::publishInsight(const PassInput& in, const sched::Decisions& decisions) {
  std::unordered_map<int64_t, PendingInsight> insight;
  insight.reserve(decisions.pending.size());
  std::vector<PendingCudaNeed> cuda_needs;
  for (const sched::PendingDecision& p : decisions.pending) {
    insight[static_cast<int64_t>(p.job)].detail = p.detail;
    const store::JobRecord& record = *in.by_id.at(static_cast<int64_t>(p.job));
    Result<const SpecSummary*> spec = specOf(record);  // decoded earlier in this pass
    if (spec.ok() && (*spec)->request.task.constraints.min_cuda > 0) {
      cuda_needs.push_back({record.id, record.user, (*spec)->request.task.constraints.min_cuda});
    }
  }
  for (const sched::ReservationDecision& r : decisions.reservations)
    insight[static_cast<int64_t>(r.job)].expected_start = r.start;
  std::sort(cuda_needs.begin(), cuda_needs.end(),
            [](const PendingCudaNeed& a, const PendingCudaNeed& b) { return a.job_id < b.job_id; });
  std::lock_guard hold(insight_mu_);
  insight_ = std::move(insight);
  cuda_needs_ = std::move(cuda_needs);
}

Status SchedulingLoop::persistPendingReasons(const PassInput& in,
                                             const std::vector<sched::PendingDecision>& pending,
                                             PassReport& report) {
  for (const sched::PendingDecision& p : pending) {
    ++report.pending;
    const store::JobRecord& record = *in.by_id.at(static_cast<int64_t>(p.job));
    std::string reason(sched::queueReasonName(p.reason));
    // A hold's reason is the hold's own (setJobHold wrote it).
    if (record.reason == reason || p.reason == sched::QueueReason::kJobHeldUser ||
        p.reason == sched::QueueReason::kJobHeldAdmin) {
      continue;  // persisted already: no event per pass
    }
    Status s = store_.setJobReason(record.id, api::JobState::kPending, in.now, reason);
    if (!s.isOk() && s.code() != StatusCode::kFailedPrecondition) return s;
  }
  return Status::ok();
}

Status SchedulingLoop::taskStarted(int64_t job_id, int64_t lease_epoch,
                                   std::optional<TimePoint> started) {
  std::lock_guard lock(mu_);
  const TimePoint now = clock_.now();
  return store_.recordStart(job_id, lease_epoch, started.value_or(now), now);
}

Status SchedulingLoop::taskEnded(int64_t job_id, uint32_t task, int64_t lease_epoch,
                                 int32_t exit_code, TaskOutcome outcome, std::string_view why,
                                 std::optional<TimePoint> ended, bool* job_ended) {
  if (job_ended != nullptr) *job_ended = false;
  std::unique_lock lock(mu_);
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, store_.getJob(job_id));
  if (record.epoch != lease_epoch) {
    return Status::failedPrecondition("job " + std::to_string(job_id) + ": stale lease epoch " +
                                      std::to_string(lease_epoch) + " (current " +
                                      std::to_string(record.epoch) + ")");
  }
  if (!api::holdsResources(record.state)) {
    return Status::failedPrecondition("job " + std::to_string(job_id) + " is " +
                                      std::string(api::jobStateName(record.state)) +
                                      ", not running");
  }
  GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
  if (task >= job.spec.tasks) {
    return Status::invalidArgument("job " + std::to_string(job_id) + ": no task " +
                                   std::to_string(task));
  }
  auto& tasks = ended_[job_id];
  tasks[task] = Ended{outcome, exit_code, std::string(why), ended};
  if (tasks.size() < job.spec.tasks) return Status::ok();

  // Every task ended: the job's final state is the worst of its tasks'.
  api::JobState state = api::JobState::kCompleted;
  std::optional<int32_t> code = 0;
  const Ended* decider = nullptr;  // the first task that set `state`
  uint32_t decider_index = 0;
  for (const auto& [index, e] : tasks) {
    api::JobState before = state;
    if (e.outcome == TaskOutcome::kOomKilled)
      state = api::JobState::kOutOfMemory;
    else if (e.outcome == TaskOutcome::kTimedOut && state != api::JobState::kOutOfMemory)
      state = api::JobState::kTimeout;
    else if (e.outcome == TaskOutcome::kCancelled && state == api::JobState::kCompleted)
      state = api::JobState::kCancelled;
    else if (e.exit_code != 0 && state == api::JobState::kCompleted)
      state = api::JobState::kFailed;
    if (state != before) {
      decider = &e;
      decider_index = index;
    }
    // The job's exit code is the highest non-zero one of its tasks' (as srun returns), so a
    // script sees a failure of any task whatever their order.
    if (e.exit_code != 0 && (*code == 0 || e.exit_code > *code)) code = e.exit_code;
  }
  std::string reason;
  if (state != api::JobState::kCompleted) {
    reason = api::jobStateName(state);
    if (decider != nullptr && !decider->why.empty()) {
      reason = decider->why.substr(0, kMaxEndReasonBytes);
      if (job.spec.tasks > 1) reason = "task " + std::to_string(decider_index) + ": " + reason;
    }
  }
  // The job ended when its last task did, by the tasks' own records: a report that arrives
  // late (the agent or gpoold was away) does not stretch the run or its usage.
  const TimePoint report_time = clock_.now();
  std::optional<TimePoint> last_end;
  for (const auto& [index, e] : tasks) {
    if (!e.at) {
      last_end = report_time;
      break;
    }
    last_end = std::max(last_end.value_or(*e.at), *e.at);
  }
  TimePoint now = std::min(last_end.value_or(report_time), report_time);
  if (record.start_time) now = std::max(now, *record.start_time);
  Status s;
  bool preempted = false;
  if (auto leaving = preempting_.find(job_id); leaving != preempting_.end()) {
    preempted = true;
    const std::string decided =
        leaving->second.reason.empty() ? "preempted" : leaving->second.reason;
    // Idle reclaim says whether the job comes back (requeue) or ends, and why.
    auto reclaim = reclaiming_.find(job_id);
    if (reclaim != reclaiming_.end()) {
      s = store_.recordPreemption(job_id, reclaim->second.requeue, now, reclaim->second.reason);
    } else {
      s = store_.recordPreemption(job_id, /*requeue=*/true, now, decided);
    }
  } else {
    s = store_.recordEnd(job_id, state, code, now, reason);
  }
  // Failed: the tasks' ends (and the preemption or reclaim under way) stay for the report's
  // next sending.
  GPOOL_RETURN_IF_ERROR(s);
  ended_.erase(job_id);
  if (preempted) {
    preempting_.erase(job_id);
    reclaiming_.erase(job_id);
  }
  if (job_ended != nullptr) *job_ended = true;
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> usage, store_.usageOfJob(job_id));
  if (!usage.empty()) {
    auto last = std::max_element(usage.begin(), usage.end(),
                                 [](const auto& a, const auto& b) { return a.end < b.end; });
    chargeRun(ledger_, *last);
  }
  lock.unlock();
  jobsChanged();
  return Status::ok();
}

std::optional<PendingInsight> SchedulingLoop::pendingInsight(int64_t id) const {
  std::lock_guard hold(insight_mu_);
  auto it = insight_.find(id);
  if (it == insight_.end()) return std::nullopt;
  return it->second;
}

std::vector<PendingCudaNeed> SchedulingLoop::pendingCudaNeeds() const {
  std::lock_guard hold(insight_mu_);
  return cuda_needs_;
}

void SchedulingLoop::jobsChanged() {
  {
    std::lock_guard wake(wake_mu_);
    dirty_ = true;
  }
  wake_cv_.notify_all();
}

void SchedulingLoop::runningJobCancelled(const store::JobRecord& before) {
  Result<api::Job> job = store::apiJobFrom(before);
  if (!job.ok()) {
    spdlog::error("job {}: cannot read its placement: {}", before.id, job.status().toString());
    return;
  }
  {
    std::lock_guard lock(mu_);
    ended_.erase(before.id);
    preempting_.erase(before.id);
    reclaiming_.erase(before.id);
  }
  for (const api::Allocation& a : job->allocations) {
    gateway_.cancel(a.node, before.id, a.task, before.epoch, options_.scheduler.preemption.grace_s,
                    "cancelled");
  }
}

Micros SchedulingLoop::tick(bool* event_pending) {
  Micros now = clock_.monotonic();
  bool due;
  {
    std::lock_guard wake(wake_mu_);
    Micros gap = std::max(options_.min_gap, last_end_ - last_start_);
    due = !ticked_ || now >= last_start_ + options_.interval || (dirty_ && now >= last_end_ + gap);
  }
  if (due) {
    Result<PassReport> report = runOnce();
    if (!report.ok()) {
      spdlog::error("scheduling pass failed: {}", report.status().toString());
    } else if (report->started || report->preempted || report->node_failed) {
      spdlog::info("pass: {} started, {} pending, {} preempted, {} moved off DOWN nodes",
                   report->started, report->pending, report->preempted, report->node_failed);
    }
    Micros end = clock_.monotonic();
    if (options_.on_pass) options_.on_pass(end - now);
    std::lock_guard wake(wake_mu_);
    ticked_ = true;
    last_start_ = now;
    last_end_ = end;
    ++passes_;
    now = end;
  }
  std::lock_guard wake(wake_mu_);
  Micros next = last_start_ + options_.interval;
  if (dirty_)
    next = std::min(next, last_end_ + std::max(options_.min_gap, last_end_ - last_start_));
  if (event_pending) *event_pending = dirty_;
  return std::max(Micros{0}, next - now);
}

uint64_t SchedulingLoop::passesRun() const {
  std::lock_guard wake(wake_mu_);
  return passes_;
}

void SchedulingLoop::runUntilStopped(std::stop_token stop) {
  while (!stop.stop_requested()) {
    bool event_pending = false;
    Micros wait = tick(&event_pending);
    if (wait <= Micros{0}) continue;
    std::unique_lock wake(wake_mu_);
    // An event already waiting for its gap does not cut the wait short; a new one may (tick
    // then decides whether its gap has passed).
    wake_cv_.wait_for(wake, stop, wait, [&] { return !event_pending && dirty_; });
  }
}

Result<const SchedulingLoop::SpecSummary*> SchedulingLoop::specOf(const store::JobRecord& record) {
  const size_t hash = std::hash<std::string_view>{}(record.spec_json);
  auto it = spec_summaries_.find(record.id);
  if (it == spec_summaries_.end() || it->second.text_hash != hash ||
      it->second.text_size != record.spec_json.size()) {
    GPOOL_ASSIGN_OR_RETURN(api::JobSpec spec, store::apiJobSpecFrom(record));
    SpecSummary summary;
    summary.text_hash = hash;
    summary.text_size = record.spec_json.size();
    summary.qos = spec.qos;
    summary.time_limit_seconds = spec.time_limit_seconds;
    summary.preemptible = spec.preemptible;
    if (spec.array) summary.array_max_parallel = spec.array->max_parallel;
    summary.dependencies = std::move(spec.dependencies);
    summary.request = requestFor(record.id, spec);
    it = spec_summaries_.insert_or_assign(record.id, std::move(summary)).first;
  }
  it->second.pass = spec_pass_;
  return &it->second;
}

Result<std::map<std::string, int64_t>> SchedulingLoop::timeLimitGraces() {
  // Only immutable options and the (thread-safe) store: no need for the pass mutex.
  sched::SchedulerConfig cfg = options_.scheduler;
  GPOOL_RETURN_IF_ERROR(mergeStoredQos(store_, cfg));
  return qosGraces(cfg, defaultQos(options_.scheduler));
}

double SchedulingLoop::userUsage(const std::string& user) const {
  std::lock_guard lock(mu_);
  return ledger_.userUsage(user, clock_.now());
}

double SchedulingLoop::groupUsage(const std::string& group) const {
  std::lock_guard lock(mu_);
  return ledger_.groupUsage(group, clock_.now());
}

}  // namespace gpool::controller
