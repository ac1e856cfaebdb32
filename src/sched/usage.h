#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/clock.h"

namespace gpool::sched {

// Billing weights per GPU model: how many "billed GPU-seconds" one second of a whole GPU of that
// model costs (Slurm's TRESBillingWeights for gres/gpu). A model that is not listed costs
// `default_weight`. Model names are matched exactly.
struct BillingWeights {
  double default_weight = 1.0;
  std::unordered_map<std::string, double> per_model;

  double weightFor(std::string_view model) const;
};

// Usage of GPUs per user and per group, decayed exponentially with a configurable half-life
// (Slurm's PriorityDecayHalfLife, KAI's time-based fair share): a GPU-second used `h` seconds
// ago counts 0.5^(h / half_life). Values are billed GPU-seconds (GPU count x seconds x billing
// weight).
//
// Decay is applied lazily: each account stores its value at the time of its last update, so
// charging and reading are O(1) and need no periodic sweep. Times must not go backwards per
// account; a charge dated before the last update is treated as happening at the last update.
//
// Thread-safety: none; the caller serialises access (the controller's scheduling loop owns it).
class UsageLedger {
 public:
  // `half_life_s` <= 0 disables decay (usage accumulates forever).
  explicit UsageLedger(int64_t half_life_s = 7 * 24 * 3600) : half_life_s_(half_life_s) {}

  int64_t halfLifeSeconds() const { return half_life_s_; }

  // Charges `gpu_thousandths` (1000 = one whole GPU, 250 = a quarter slice) of GPU model `model`
  // used for `seconds` ending at `now` to `user` and to `group`.
  void charge(std::string_view user, std::string_view group, uint32_t gpu_thousandths,
              std::string_view model, double seconds, TimePoint now, const BillingWeights& weights);

  // Adds `billed` GPU-seconds to the accounts directly (already weighted).
  void chargeBilled(std::string_view user, std::string_view group, double billed, TimePoint now);

  // Decayed usage at `now`; 0 for an unknown account.
  double userUsage(std::string_view user, TimePoint now) const;
  double groupUsage(std::string_view group, TimePoint now) const;

  // The factor by which a value decays over `seconds` (1 when decay is disabled).
  double decayFactor(double seconds) const;

  // Every known account, for reports and for the fair-share tree.
  template <typename F>
  void forEachUser(TimePoint now, F&& f) const {
    for (const auto& [name, acct] : users_)
      f(name, valueAt(acct, now));
  }
  template <typename F>
  void forEachGroup(TimePoint now, F&& f) const {
    for (const auto& [name, acct] : groups_)
      f(name, valueAt(acct, now));
  }

 private:
  struct Account {
    double value = 0;
    TimePoint at{};
  };
  double valueAt(const Account& a, TimePoint now) const;
  void add(std::unordered_map<std::string, Account>& map, std::string_view key, double billed,
           TimePoint now);

  int64_t half_life_s_;
  std::unordered_map<std::string, Account> users_;
  std::unordered_map<std::string, Account> groups_;
};

}  // namespace gpool::sched
