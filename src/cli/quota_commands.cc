// `gpool quota list|show|set|remove` and `quota --mine`: the quotas of users and groups through
// gpoold's /v1/quotas.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
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

struct QuotaArgs {
  std::string user;
  std::string group;
  bool mine = false;
  // Limit flags given to `quota set`, by the API's field name.
  std::map<std::string, std::string> limits;
};

struct LimitFlag {
  const char* flag;       // without "--"
  const char* field;      // the API's shorthand key
  const char* canonical;  // the key gpoold answers with
  const char* help;
  bool integer;    // sent as a JSON integer
  bool clearable;  // "none" removes the limit
};
const std::vector<LimitFlag>& limitFlags() {
  static const std::vector<LimitFlag> flags = {
      {"max-gpus", "max_gpus", "max_gpus_milli",
       "GPUs held at once, slices counted (4, 1.5; none: no limit)", false, true},
      {"gpu-hours", "gpu_hours", "gpu_hours", "GPU-hours per period (100, 0.5; none: no limit)",
       false, true},
      {"period", "gpu_hours_period", "gpu_hours_period_seconds",
       "the GPU-hour period (30d, 7d; default 30 days)", false, false},
      {"max-gpu-mem", "max_memory_per_task", "max_memory_per_task_mib",
       "GPU memory per task (40G; none: no limit)", false, true},
      {"max-compute", "max_compute", "max_compute_milli",
       "compute shares held at once, in GPUs (2.5; none: no limit)", false, true},
      {"max-run-time", "max_run_time", "max_run_time_seconds",
       "longest run of one job (2d, 12h; none: no limit)", false, true},
      {"priority-weight", "priority_weight", "priority_weight",
       "fair-share weight, 0 to 1000000 (default 1)", true, false},
      {"guaranteed-gpus", "guaranteed_gpus", "guaranteed_gpus_milli",
       "GPUs guaranteed (others may borrow them; default 0)", false, false},
  };
  return flags;
}

std::vector<FieldFlag> quotaFields() {
  // The flags with their "--", built once and kept alive for the string_views.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const LimitFlag& f : limitFlags())
      n.push_back(std::string("--") + f.flag);
    return n;
  }();
  std::vector<FieldFlag> out;
  for (size_t i = 0; i < names.size(); ++i)
    out.push_back({limitFlags()[i].field, names[i]});
  return out;
}

// The subject of a quota command: exactly one of --user and --group.
Result<std::pair<std::string, std::string>> quotaSubject(const QuotaArgs& a) {
  if (a.user.empty() == a.group.empty()) {
    return Status::invalidArgument("whose quota? give exactly one of --user NAME and --group NAME");
  }
  if (!a.user.empty()) {
    GPOOL_RETURN_IF_ERROR(validName(a.user, "user name", "--user"));
    return std::make_pair(std::string("user"), a.user);
  }
  GPOOL_RETURN_IF_ERROR(validName(a.group, "group name", "--group"));
  return std::make_pair(std::string("group"), a.group);
}

Status runQuotaList(const GlobalOptions& global, const QuotaArgs& a) {
  if (!a.user.empty() && !a.group.empty()) {
    return Status::invalidArgument("give at most one of --user and --group");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get("/v1/quotas"));
  json kept = json::array();
  for (const json& q : answer.value("quotas", json::array())) {
    std::string subject = q.value("subject", "");
    std::string name = q.value("name", "");
    if (!a.user.empty() && (subject != "user" || name != a.user)) continue;
    if (!a.group.empty() && (subject != "group" || name != a.group)) continue;
    kept.push_back(q);
  }
  if (global.json) {
    printJson(json{{"quotas", kept}});
    return Status::ok();
  }
  if (kept.empty()) {
    std::cout << "No quotas (set one with `gpool quota set --user NAME --max-gpus N`)\n";
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& q : kept) {
    GPOOL_ASSIGN_OR_RETURN(api::Quota limits, quotaFrom(q));
    rows.push_back(quotaRow(q.value("subject", ""), q.value("name", ""), limits));
  }
  std::cout << formatTable(quotaHeader(), rows, kQuotaAlign);
  return Status::ok();
}

Status runQuotaShow(const GlobalOptions& global, const QuotaArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(auto subject, quotaSubject(a));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.get("/v1/quotas/" + subject.first + "/" + pathName(subject.second));
  if (!answer.ok() && answer.status().code() == StatusCode::kNotFound) {
    return Status::notFound(subject.first + " '" + subject.second +
                            "' has no quota (set one with `gpool quota set --" + subject.first +
                            " " + subject.second + " ...`)");
  }
  if (!answer.ok()) return explainDenied(answer.status(), "quota show", kQuotaRole);
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  GPOOL_ASSIGN_OR_RETURN(api::Quota limits, quotaFrom(*answer));
  std::cout << formatTable(quotaHeader(), {quotaRow(subject.first, subject.second, limits)},
                           kQuotaAlign);
  return Status::ok();
}

Status runQuotaSet(const GlobalOptions& global, const QuotaArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(auto subject, quotaSubject(a));
  if (a.limits.empty()) {
    std::string names;
    for (const LimitFlag& f : limitFlags())
      names += std::string(names.empty() ? "" : ", ") + "--" + f.flag;
    return Status::invalidArgument("nothing to set: give one or more of " + names);
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::string target = "/v1/quotas/" + subject.first + "/" + pathName(subject.second);
  // Flags change the limits they name; the others keep their values.
  json limits = json::object();
  Result<json> existing = api.get(target);
  if (existing.ok()) {
    limits = existing->value("limits", json::object());
  } else if (existing.status().code() != StatusCode::kNotFound) {
    return explainDenied(existing.status(), "quota set", kQuotaRole);
  }
  for (const LimitFlag& f : limitFlags()) {
    auto it = a.limits.find(f.field);
    if (it == a.limits.end()) continue;
    limits.erase(f.canonical);
    limits.erase(f.field);
    if (it->second == "none") {
      if (!f.clearable) {
        return Status::invalidArgument(std::string("--") + f.flag +
                                       ": 'none' is not allowed here (give a value)");
      }
      continue;
    }
    if (std::string_view(f.field) == "gpu_hours") {
      // Fractions of a GPU-hour are fine (a small lab's 0.5); sent as a JSON number.
      Result<uint64_t> milli =
          parseScaledDecimal(it->second, 3, uint64_t{1'000'000'000'000}, "GPU-hours");
      if (!milli.ok()) {
        return Status::invalidArgument("--gpu-hours: '" + it->second +
                                       "' is not a number of GPU-hours (e.g. 100 or 0.5, at most "
                                       "3 decimals; or none)");
      }
      limits[f.field] = static_cast<double>(*milli) / 1000.0;
    } else if (f.integer) {
      uint64_t v = 0;
      const std::string& t = it->second;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (t.empty() || ec != std::errc() || p != t.data() + t.size()) {
        return Status::invalidArgument(std::string("--") + f.flag + ": '" + t +
                                       "' is not a non-negative integer" +
                                       (f.clearable ? " (or none)" : ""));
      }
      limits[f.field] = v;
    } else {
      limits[f.field] = it->second;
    }
  }
  Result<json> answer = api.put(target, limits.dump());
  if (!answer.ok() && answer.status().code() == StatusCode::kNotFound) {
    return Status::notFound(subject.first + " '" + subject.second + "' does not exist: add it " +
                            "first (`gpool " + subject.first + " add " + subject.second + "`)");
  }
  if (!answer.ok()) {
    return explainDenied(withFlagNames(answer.status(), "quota", quotaFields()), "quota set",
                         kQuotaRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  GPOOL_ASSIGN_OR_RETURN(api::Quota q, quotaFrom(*answer));
  std::cout << "Set the quota of " << subject.first << " " << subject.second << ": "
            << quotaSummary(q) << "\n";
  return Status::ok();
}

Status runQuotaRemove(const GlobalOptions& global, const QuotaArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(auto subject, quotaSubject(a));
  return removeThing(global, "/v1/quotas/" + subject.first + "/" + pathName(subject.second),
                     "the quota of " + subject.first + " " + subject.second, "quota remove",
                     kQuotaRole);
}

}  // namespace

void registerQuotaCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- quota
  auto quota_args = std::make_shared<QuotaArgs>();
  auto* quota =
      app.add_subcommand("quota", "Quotas of users and groups; --mine: yours and your use");
  quota->require_subcommand(0, 1);
  quota->add_flag("--mine", quota_args->mine, "your quotas and what you use of them");
  quota->footer(kFooter);
  {
    auto subject = [](CLI::App* cmd, QuotaArgs& a) {
      cmd->add_option("--user", a.user, "a user's quota")->type_name("USER");
      cmd->add_option("--group", a.group, "a group's quota")->type_name("GROUP");
    };
    auto list_args = std::make_shared<QuotaArgs>();
    auto* list = quota->add_subcommand("list", "List the quotas you may see");
    subject(list, *list_args);
    list->footer(kFooter);
    list->callback(reporting([global, list_args] { return runQuotaList(*global, *list_args); }));

    auto show_args = std::make_shared<QuotaArgs>();
    auto* show = quota->add_subcommand("show", "Show one quota");
    subject(show, *show_args);
    show->footer(kFooter);
    show->callback(reporting([global, show_args] { return runQuotaShow(*global, *show_args); }));

    auto set_args = std::make_shared<QuotaArgs>();
    auto* set = quota->add_subcommand(
        "set",
        "Set a quota's limits; the others keep their values (admins; group admins for "
        "their groups)");
    subject(set, *set_args);
    for (const LimitFlag& f : limitFlags()) {
      std::string field = f.field;
      set->add_option_function<std::string>(
             std::string("--") + f.flag,
             [set_args, field](const std::string& v) { set_args->limits[field] = v; }, f.help)
          ->type_name("VALUE");
    }
    set->footer(kFooter);
    set->callback(reporting([global, set_args] { return runQuotaSet(*global, *set_args); }));

    auto rm_args = std::make_shared<QuotaArgs>();
    auto* rm = quota->add_subcommand("remove", "Remove a quota (same rights as set)");
    subject(rm, *rm_args);
    rm->footer(kFooter);
    rm->callback(reporting([global, rm_args] { return runQuotaRemove(*global, *rm_args); }));
  }
  quota->callback(reporting([global, quota_args, quota]() -> Status {
    if (!quota->get_subcommands().empty()) {
      if (quota_args->mine) {
        return Status::invalidArgument("--mine goes alone: gpool quota --mine");
      }
      return Status::ok();
    }
    if (!quota_args->mine) {
      return Status::invalidArgument(
          "give a command (list, show, set, remove) or --mine (gpool quota --help)");
    }
    return runAccount(*global, true);
  }));
}

}  // namespace gpool::cli::admin
