#pragma once

#include "sched/placement.h"

namespace gpool::sched::testing {

// First fit: the lowest-numbered node wins, so hand-checked scenarios have one right answer.
class FirstFitPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "FirstFit"; }
  double score(const ClusterState&, const TaskRequest&, const TaskAllocation& c) override {
    return -static_cast<double>(c.node);
  }
};

}  // namespace gpool::sched::testing
