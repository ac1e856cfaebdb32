// Whether a pending job may be placed at all in this pass: holds, dependencies, array limits,
// QoS, GPU-hours and the caps on what a user, a group or a QoS holds at once (see pass.h).
#include "common/units.h"
#include "sched/pass.h"

namespace gpool::sched::internal {

namespace {

std::string_view kindName(DependencyKind kind) {
  switch (kind) {
    case DependencyKind::kAfterOk: return "afterok";
    case DependencyKind::kAfterNotOk: return "afternotok";
    case DependencyKind::kAfterAny: return "afterany";
  }
  return "?";
}

// Met, open (wait), or never met.
enum class DepOutcome { kMet, kOpen, kNever };

DepOutcome outcomeOf(const Dependency& d) {
  switch (d.state) {
    case DependencyState::kOpen: return DepOutcome::kOpen;
    case DependencyState::kUnknown: return DepOutcome::kNever;
    case DependencyState::kSucceeded:
      return d.kind == DependencyKind::kAfterNotOk ? DepOutcome::kNever : DepOutcome::kMet;
    case DependencyState::kFailed:
      return d.kind == DependencyKind::kAfterOk ? DepOutcome::kNever : DepOutcome::kMet;
    case DependencyState::kRequeueable:
      return d.kind == DependencyKind::kAfterOk ? DepOutcome::kOpen : DepOutcome::kMet;
  }
  return DepOutcome::kOpen;
}

std::string hoursText(double h) {
  return fmtDouble(h, 2);
}

}  // namespace

bool dependenciesMet(const Job& job) {
  for (const Dependency& d : job.dependencies) {
    if (outcomeOf(d) != DepOutcome::kMet) return false;
  }
  return true;
}

bool Pass::dependencyNeverMet(const Job& job, std::string* detail) const {
  for (const Dependency& d : job.dependencies) {
    if (outcomeOf(d) != DepOutcome::kNever) continue;
    const char* how = d.state == DependencyState::kUnknown     ? " does not exist"
                      : d.state == DependencyState::kSucceeded ? " succeeded"
                                                               : " failed";
    *detail = "job " + std::to_string(d.job) + how + " (" + std::string(kindName(d.kind)) + ")";
    return true;
  }
  return false;
}

QueueReason Pass::eligibility(const Info& info, std::string* detail) const {
  const Job& j = *info.job;
  if (j.hold != Hold::kNone) {
    *detail = j.hold == Hold::kAdmin ? "held by an administrator" : "held by its owner";
    return j.hold == Hold::kAdmin ? QueueReason::kJobHeldAdmin : QueueReason::kJobHeldUser;
  }
  for (const Dependency& d : j.dependencies) {
    DepOutcome o = outcomeOf(d);
    if (o == DepOutcome::kMet) continue;
    *detail = "waits for job " + std::to_string(d.job) + " (" + std::string(kindName(d.kind)) + ")";
    return QueueReason::kDependency;
  }
  if (j.array_id != 0 && j.array_limit != 0) {
    auto running = array_running_.find(j.array_id);
    if (running != array_running_.end() && running->second >= j.array_limit) {
      *detail = "array " + std::to_string(j.array_id) + " already runs " +
                std::to_string(running->second) + " elements, its limit";
      return QueueReason::kJobArrayTaskLimit;
    }
  }
  if (!info.qos) {
    *detail = "unknown QoS '" + j.qos + "'";
    return QueueReason::kInvalidQos;
  }
  // GPU-hours per period (Slurm's GrpTRESMins): the job waits; running work goes on.
  auto u = cfg_.users.find(j.user);
  if (u != cfg_.users.end() && u->second.gpu_hours &&
      u->second.gpu_hours_used >= *u->second.gpu_hours) {
    *detail = "user " + j.user + " used " + hoursText(u->second.gpu_hours_used) + " of " +
              hoursText(*u->second.gpu_hours) + " GPU-hours of the quota's period";
    return QueueReason::kAssocGrpGpuHours;
  }
  auto g = cfg_.groups.find(j.group);
  if (g != cfg_.groups.end() && g->second.gpu_hours &&
      g->second.gpu_hours_used >= *g->second.gpu_hours) {
    *detail = "group " + j.group + " used " + hoursText(g->second.gpu_hours_used) + " of " +
              hoursText(*g->second.gpu_hours) + " GPU-hours of the quota's period";
    return QueueReason::kAssocGrpGpuHours;
  }
  QueueReason cap;
  *detail = capReason(info, &cap);
  return cap;
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

}  // namespace gpool::sched::internal
