#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "sched/usage.h"

namespace gpool::sched {

// One association of the fair-share tree: a user inside a group (Slurm's user association under
// an account). A user may appear under several groups.
struct Association {
  std::string group;
  std::string user;
};

// Shares of the tree: root -> groups -> users. A group or user that is not listed has 1 share.
struct FairShareConfig {
  std::unordered_map<std::string, double> group_shares;
  // Keyed by user name; the same shares apply under every group the user belongs to.
  std::unordered_map<std::string, double> user_shares;
};

// Key of an association in the maps below ("group/user").
std::string associationKey(std::string_view group, std::string_view user);

// Slurm's Fair Tree: among siblings, each node gets a level fairshare LF = S / U, where S is its
// shares divided by the siblings' shares and U its decayed usage divided by the siblings' usage
// (LF is infinite for a node without usage among siblings with usage). The tree is sorted by LF
// at each level and walked depth-first; the user at rank r (0-based) of N gets the factor
// (N - r) / N, so the least served user gets 1 and the most served 1/N. Ties share a rank.
//
// Returns the factor in (0, 1] for every association, keyed by associationKey(). Pure: the result
// depends only on the arguments. Cost O(A log A) for A associations.
std::unordered_map<std::string, double> computeFairTree(const std::vector<Association>& assocs,
                                                        const FairShareConfig& config,
                                                        const UsageLedger& usage, TimePoint now);

}  // namespace gpool::sched
