#include "sched/limits.h"

#include <algorithm>
#include <cmath>

namespace gpool::sched {

std::unordered_map<std::string, uint64_t> computeDeservedShares(
    const std::vector<GroupDemand>& demands,
    const std::unordered_map<std::string, GroupPolicy>& policies, uint64_t capacity) {
  struct Entry {
    std::string group;
    uint64_t demand;
    double weight;
    uint64_t deserved;
  };
  std::vector<Entry> entries;
  entries.reserve(demands.size());
  uint64_t left = capacity;
  for (const GroupDemand& d : demands) {
    auto it = policies.find(d.group);
    uint64_t quota = it == policies.end() ? 0 : it->second.quota;
    double weight = it == policies.end() ? 1.0 : std::max(0.0, it->second.over_quota_weight);
    uint64_t demand = d.allocated + d.pending;
    uint64_t first = std::min({quota, demand, left});
    left -= first;
    entries.push_back({d.group, demand, weight, first});
  }
  // Water filling of what is left, by weight, in whole thousandths.
  while (left > 0) {
    double total_weight = 0;
    for (const Entry& e : entries) {
      if (e.deserved < e.demand) total_weight += e.weight;
    }
    if (total_weight <= 0) break;
    uint64_t handed = 0;
    for (Entry& e : entries) {
      if (e.deserved >= e.demand || e.weight <= 0) continue;
      auto portion =
          static_cast<uint64_t>(std::floor(static_cast<double>(left) * e.weight / total_weight));
      portion = std::max<uint64_t>(portion, 1);
      portion = std::min({portion, e.demand - e.deserved, left - handed});
      e.deserved += portion;
      handed += portion;
      if (handed == left) break;
    }
    if (handed == 0) break;
    left -= handed;
  }
  std::unordered_map<std::string, uint64_t> result;
  for (const Entry& e : entries)
    result[e.group] = e.deserved;
  return result;
}

}  // namespace gpool::sched
