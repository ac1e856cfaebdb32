// `gpool account [quota]`: who the caller is to the pool, their quotas, use and fair share.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/user.h"
#include "cli/admin_common.h"
#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "cli/format.h"
#include "common/status.h"
#include "common/units.h"

namespace gpool::cli::admin {

namespace {

using nlohmann::json;

std::string usedOf(const json& used, const api::Quota& q) {
  std::vector<std::string> parts;
  if (used.is_object()) {
    parts.push_back("gpus " + used.value("gpus", std::string("0")) +
                    (q.max_gpus_milli ? "/" + gpuAmount(*q.max_gpus_milli) : ""));
    parts.push_back("gpu_hours " + hoursText(used.value("gpu_hours", 0.0)) +
                    (q.gpu_hours ? "/" + hoursLimitText(*q.gpu_hours) : "") + " in the last " +
                    formatDuration(q.period_seconds));
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? ", " : "") + parts[i];
  return out;
}

Status printQuotas(const json& account) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::vector<std::string>> use;
  for (const json& q : account.value("quotas", json::array())) {
    GPOOL_ASSIGN_OR_RETURN(api::Quota limits, quotaFrom(q));
    rows.push_back(quotaRow(q.value("subject", ""), q.value("name", ""), limits));
    const json& used = q.contains("used") ? q["used"] : json();
    use.push_back({q.value("subject", ""), q.value("name", ""),
                   used.value("gpus", std::string("0")) +
                       (limits.max_gpus_milli ? "/" + gpuAmount(*limits.max_gpus_milli) : ""),
                   hoursText(used.value("gpu_hours", 0.0)) +
                       (limits.gpu_hours ? "/" + hoursLimitText(*limits.gpu_hours) : "")});
  }
  if (rows.empty()) {
    std::cout << "No quota applies to you: no limits beyond the pool's capacity and QoS\n";
    return Status::ok();
  }
  std::cout << formatTable(quotaHeader(), rows, kQuotaAlign) << "\n";
  std::cout << formatTable({"SUBJECT", "NAME", "GPUS(now/max)", "GPU_HOURS(period/max)"}, use,
                           {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight});
  return Status::ok();
}

}  // namespace

Status runAccount(const GlobalOptions& global, bool quota_only) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json account, accountOf(api));
  if (global.json) {
    printJson(quota_only ? json{{"user", account.value("user", "")},
                                {"quotas", account.value("quotas", json::array())}}
                         : account);
    return Status::ok();
  }
  if (quota_only) return printQuotas(account);
  std::vector<std::string> groups, admin_of;
  for (const json& g : account.value("groups", json::array()))
    groups.push_back(g.get<std::string>());
  for (const json& g : account.value("admin_groups", json::array()))
    admin_of.push_back(g.get<std::string>());
  const json& now = account.contains("use") ? account["use"] : json();
  std::vector<std::pair<std::string, std::string>> f = {
      {"User", account.value("user", "") + " (uid " +
                   std::to_string(account.value("uid", int64_t{0})) + ")"},
      {"Role", account.value("role", "user") +
                   (account.value("has_record", false) ? "" : " (no user record)")},
      {"Groups", joined(groups)},
      {"GroupAdminOf", joined(admin_of)},
      {"DefaultQoS", account.value("default_qos", std::string()).empty()
                         ? "(the pool's default)"
                         : account.value("default_qos", std::string())},
      {"Jobs", std::to_string(now.value("running_jobs", int64_t{0})) + " running, " +
                   std::to_string(now.value("pending_jobs", int64_t{0})) + " pending"},
      {"GPUsHeld", now.value("gpus", std::string("0"))},
  };
  for (const json& q : account.value("quotas", json::array())) {
    GPOOL_ASSIGN_OR_RETURN(api::Quota limits, quotaFrom(q));
    f.push_back({"Quota(" + q.value("subject", "") + " " + q.value("name", "") + ")",
                 quotaSummary(limits)});
    f.push_back({"Used(" + q.value("subject", "") + " " + q.value("name", "") + ")",
                 usedOf(q.contains("used") ? q["used"] : json(), limits)});
  }
  if (account.value("quotas", json::array()).empty()) f.push_back({"Quota", "none"});
  if (account.contains("fair_share") && account["fair_share"].is_object()) {
    const json& fs = account["fair_share"];
    f.push_back({"FairShare", "decayed usage " + hoursText(fs.value("user_gpu_hours", 0.0)) +
                                  " GPU-hours (half-life " +
                                  formatDuration(fs.value("half_life_seconds", int64_t{0})) + ")"});
  }
  std::cout << formatFields(f);
  return Status::ok();
}

void registerAccountCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- account
  auto* account = app.add_subcommand(
      "account", "Who you are to the pool: user, groups, role, quotas, use, fair share");
  account->require_subcommand(0, 1);
  account->footer(kFooter);
  auto* account_quota = account->add_subcommand("quota", "Your quotas and what you use of them");
  account_quota->footer(kFooter);
  account_quota->callback(reporting([global] { return runAccount(*global, true); }));
  account->callback(reporting([global, account]() -> Status {
    if (!account->get_subcommands().empty()) return Status::ok();
    return runAccount(*global, false);
  }));
}

}  // namespace gpool::cli::admin
