#include "sched/fairshare.h"

#include <algorithm>
#include <limits>
#include <map>

namespace gpool::sched {

std::string associationKey(std::string_view group, std::string_view user) {
  std::string key;
  key.reserve(group.size() + user.size() + 1);
  key.append(group).push_back('/');
  key.append(user);
  return key;
}

namespace {

double sharesOf(const std::unordered_map<std::string, double>& map, const std::string& name) {
  auto it = map.find(name);
  return it == map.end() ? 1.0 : std::max(0.0, it->second);
}

struct Node {
  std::string name;
  double shares = 1;
  double usage = 0;
  double lf = 0;
};

// Computes LF for siblings and sorts them best served last. Ties keep name order so that the
// result does not depend on hash-map iteration order.
void rankSiblings(std::vector<Node>& nodes) {
  double total_shares = 0;
  double total_usage = 0;
  for (const Node& n : nodes) {
    total_shares += n.shares;
    total_usage += n.usage;
  }
  for (Node& n : nodes) {
    double s = total_shares > 0 ? n.shares / total_shares : 0;
    double u = total_usage > 0 ? n.usage / total_usage : 0;
    if (u <= 0) {
      n.lf = s > 0 ? std::numeric_limits<double>::infinity() : 0;
    } else {
      n.lf = s / u;
    }
  }
  std::stable_sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) {
    if (a.lf != b.lf) return a.lf > b.lf;
    return a.name < b.name;
  });
}

}  // namespace

std::unordered_map<std::string, double> computeFairTree(const std::vector<Association>& assocs,
                                                        const FairShareConfig& config,
                                                        const UsageLedger& usage, TimePoint now) {
  // group -> users, ordered so the walk is deterministic.
  std::map<std::string, std::vector<std::string>> tree;
  for (const Association& a : assocs)
    tree[a.group].push_back(a.user);

  std::vector<Node> groups;
  groups.reserve(tree.size());
  for (auto& [group, users] : tree) {
    std::sort(users.begin(), users.end());
    users.erase(std::unique(users.begin(), users.end()), users.end());
    groups.push_back({group, sharesOf(config.group_shares, group), usage.groupUsage(group, now)});
  }
  rankSiblings(groups);

  // Depth-first walk; ties (equal LF at both levels) share a rank.
  struct Ranked {
    std::string key;
    double group_lf;
    double user_lf;
  };
  std::vector<Ranked> order;
  order.reserve(assocs.size());
  for (const Node& g : groups) {
    std::vector<Node> users;
    for (const std::string& u : tree[g.name]) {
      users.push_back({u, sharesOf(config.user_shares, u), usage.userUsage(u, now)});
    }
    rankSiblings(users);
    for (const Node& u : users)
      order.push_back({associationKey(g.name, u.name), g.lf, u.lf});
  }

  std::unordered_map<std::string, double> result;
  const double n = static_cast<double>(order.size());
  size_t rank = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 &&
        (order[i].group_lf != order[i - 1].group_lf || order[i].user_lf != order[i - 1].user_lf)) {
      rank = i;
    }
    result[order[i].key] = (n - static_cast<double>(rank)) / n;
  }
  return result;
}

}  // namespace gpool::sched
