#include "sched/usage.h"

#include <cmath>

namespace gpool::sched {

double BillingWeights::weightFor(std::string_view model) const {
  if (!per_model.empty()) {
    auto it = per_model.find(std::string(model));
    if (it != per_model.end()) return it->second;
  }
  return default_weight;
}

double UsageLedger::decayFactor(double seconds) const {
  if (half_life_s_ <= 0 || seconds <= 0) return 1.0;
  return std::exp2(-seconds / static_cast<double>(half_life_s_));
}

double UsageLedger::valueAt(const Account& a, TimePoint now) const {
  double dt = static_cast<double>((now - a.at).count()) / 1e6;
  return a.value * decayFactor(dt);
}

void UsageLedger::add(std::unordered_map<std::string, Account>& map, std::string_view key,
                      double billed, TimePoint now) {
  auto [it, inserted] = map.try_emplace(std::string(key));
  Account& a = it->second;
  if (inserted) {
    a.at = now;
  } else if (now > a.at) {
    a.value = valueAt(a, now);
    a.at = now;
  }
  a.value += billed;
}

void UsageLedger::charge(std::string_view user, std::string_view group, uint32_t gpu_thousandths,
                         std::string_view model, double seconds, TimePoint now,
                         const BillingWeights& weights) {
  if (seconds <= 0 || gpu_thousandths == 0) return;
  double gpus = static_cast<double>(gpu_thousandths) / 1000.0;
  // Usage spread evenly over [now - seconds, now] decays to the integral of the decay curve, not
  // to its value at the end: this keeps a long job charged in one step equal to the same job
  // charged every minute.
  double integral = seconds;
  if (half_life_s_ > 0) {
    double lambda = std::log(2.0) / static_cast<double>(half_life_s_);
    integral = -std::expm1(-lambda * seconds) / lambda;
  }
  chargeBilled(user, group, gpus * integral * weights.weightFor(model), now);
}

void UsageLedger::chargeBilled(std::string_view user, std::string_view group, double billed,
                               TimePoint now) {
  if (!user.empty()) add(users_, user, billed, now);
  if (!group.empty()) add(groups_, group, billed, now);
}

double UsageLedger::userUsage(std::string_view user, TimePoint now) const {
  auto it = users_.find(std::string(user));
  return it == users_.end() ? 0.0 : valueAt(it->second, now);
}

double UsageLedger::groupUsage(std::string_view group, TimePoint now) const {
  auto it = groups_.find(std::string(group));
  return it == groups_.end() ? 0.0 : valueAt(it->second, now);
}

}  // namespace gpool::sched
