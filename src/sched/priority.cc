#include "sched/priority.h"

#include <algorithm>

namespace gpool::sched {

PriorityFactors computePriority(const PriorityWeights& w, double fairshare, double qos_factor,
                                int64_t waited_s, uint64_t gpus, uint64_t capacity, int64_t nice) {
  PriorityFactors f;
  f.fairshare = std::clamp(fairshare, 0.0, 1.0);
  f.qos = std::clamp(qos_factor, 0.0, 1.0);
  if (w.max_age_s > 0) {
    f.age = std::clamp(static_cast<double>(waited_s) / static_cast<double>(w.max_age_s), 0.0, 1.0);
  }
  double size = capacity > 0 ? std::min(1.0, static_cast<double>(gpus) / capacity) : 0.0;
  f.job_size = w.favor_small ? 1.0 - size : size;
  f.nice = static_cast<double>(nice);
  f.total =
      w.fairshare * f.fairshare + w.qos * f.qos + w.age * f.age + w.job_size * f.job_size - f.nice;
  return f;
}

double qosFactor(const QosLevel& level, const std::vector<QosLevel>& levels) {
  uint32_t top = 0;
  for (const QosLevel& l : levels)
    top = std::max(top, l.priority);
  return top == 0 ? 0.0 : static_cast<double>(level.priority) / top;
}

}  // namespace gpool::sched
