#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpool::sched {

// Policy of one group (a team, a project, a Philly virtual cluster). GPU amounts are in
// thousandths of a GPU (units.h), so a quota of 2500 is two and a half GPUs.
struct GroupPolicy {
  // Guaranteed GPUs: work within the quota is never reclaimed by other groups.
  uint64_t quota = 0;
  // How idle capacity beyond every group's quota is split among groups that want more
  // (KAI's overQuotaWeight). 0 means the group never gets a share of it by right; it may still
  // borrow capacity nobody else asks for, and that work is always reclaimable.
  double over_quota_weight = 1;
  // Hard cap on the group's GPUs at once; 0 = none. Jobs beyond it pend with GroupQuota.
  uint64_t max_gpus = 0;
  // Cap on each member's GPUs at once; 0 = none (AssocMaxGpuPerUser).
  uint64_t max_gpus_per_user = 0;
  // Hard cap on the group's GPU compute at once, in thousandths of a GPU as computeDemand
  // counts it (a whole GPU 1000, a slice its compute share); 0 = none. Jobs beyond it pend
  // with GroupComputeQuota.
  uint64_t max_compute = 0;
  // GPU-hours the group may use per accounting period (Slurm's GrpTRESMins); unset: no limit.
  std::optional<double> gpu_hours;
  // GPU-hours used in the current period, ended and running work counted (the caller keeps
  // the accounting). At or above `gpu_hours`, the group's pending jobs wait with
  // AssocGrpGpuHours; running jobs go on.
  double gpu_hours_used = 0;
};

// Policy of one user across all groups.
struct UserPolicy {
  // Cap on the user's GPUs at once, overriding the group's per-user cap when set; 0 = none.
  uint64_t max_gpus = 0;
  // Cap on the user's GPU compute at once (as GroupPolicy::max_compute); 0 = none. Jobs beyond
  // it pend with AssocMaxComputePerUser.
  uint64_t max_compute = 0;
  // As GroupPolicy::gpu_hours and gpu_hours_used, for the user's own use.
  std::optional<double> gpu_hours;
  double gpu_hours_used = 0;
};

// Demand and allocation of one group, the input of the fair-share split.
struct GroupDemand {
  std::string group;
  uint64_t allocated = 0;  // GPUs held by running jobs
  uint64_t pending = 0;    // GPUs asked for by pending jobs
};

// Deserved share of each group (KAI's fair share): first each group gets min(quota, demand);
// then the capacity left is split among groups with unmet demand by over_quota_weight, each capped
// at its demand, repeating until the capacity or the demand runs out (water filling). Groups not
// in `policies` have quota 0 and weight 1. Deterministic; O(G^2) in the worst case for G groups.
//
// A group holding more than its deserved share is "saturated" and its work beyond its quota is
// what reclaim takes back first (highest allocated/deserved first).
std::unordered_map<std::string, uint64_t> computeDeservedShares(
    const std::vector<GroupDemand>& demands,
    const std::unordered_map<std::string, GroupPolicy>& policies, uint64_t capacity);

}  // namespace gpool::sched
