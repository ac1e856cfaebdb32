// `gpool usage`: GPU-hours by user or group over a period, as a table or CSV.
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

struct UsageArgs {
  std::string by = "user";
  std::string from;
  std::string to;
  bool csv = false;
  bool mine = false;
};

// One CSV field (RFC 4180): quoted when it holds a comma, a quote, CR or LF; quotes doubled.
std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

Status runUsage(const GlobalOptions& global, const UsageArgs& a) {
  if (a.by != "user" && a.by != "group") {
    return Status::invalidArgument("--by: '" + a.by + "' is not one of user, group");
  }
  if (a.csv && global.json) return Status::invalidArgument("--csv and --json exclude each other");
  std::string query = "?by=" + a.by;
  if (!a.from.empty()) query += "&from=" + net::percentEncode(a.from);
  if (!a.to.empty()) query += "&to=" + net::percentEncode(a.to);
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> got = api.get("/v1/usage" + query);
  if (!got.ok()) {
    Status s = got.status();
    if (s.code() == StatusCode::kInvalidArgument) {
      std::string m = s.message();
      if (m.rfind("from:", 0) == 0 || m.rfind("to:", 0) == 0) m = "--" + m;
      return Status::invalidArgument(m);
    }
    return s;
  }
  json answer = *got;
  json account;
  if (a.mine) {
    GPOOL_ASSIGN_OR_RETURN(account, accountOf(api));
    std::set<std::string> mine;
    if (a.by == "user") {
      mine.insert(account.value("user", ""));
    } else {
      for (const json& g : account.value("groups", json::array()))
        mine.insert(g.get<std::string>());
    }
    json kept = json::array();
    for (const json& row : answer["rows"]) {
      if (mine.count(row.value("key", ""))) kept.push_back(row);
    }
    answer["rows"] = kept;
  }
  if (global.json) {
    if (a.mine) answer["fair_share"] = account.value("fair_share", json());
    printJson(answer);
    return Status::ok();
  }
  std::string from = utcTime(answer.value("from_us", int64_t{0}));
  std::string to = utcTime(answer.value("to_us", int64_t{0}));
  if (a.csv) {
    std::cout << a.by << ",gpu_hours,jobs,from,to\r\n";
    for (const json& row : answer["rows"]) {
      char hours[64];
      std::snprintf(hours, sizeof hours, "%.6f", row.value("gpu_hours", 0.0));
      std::cout << csvField(row.value("key", "")) << "," << hours << ","
                << row.value("jobs", int64_t{0}) << "," << csvField(from + "Z") << ","
                << csvField(to + "Z") << "\r\n";
    }
    return Status::ok();
  }
  std::cout << "GPU-hours by " << a.by << " (slices counted by their share), " << from << " to "
            << to << " UTC\n";
  std::vector<std::vector<std::string>> rows;
  double total = 0;
  int64_t jobs = 0;
  for (const json& row : answer["rows"]) {
    double h = row.value("gpu_hours", 0.0);
    int64_t n = row.value("jobs", int64_t{0});
    total += h;
    jobs += n;
    rows.push_back({row.value("key", ""), hoursText(h), std::to_string(n)});
  }
  if (rows.empty()) {
    std::cout << "No GPU use in this period\n";
  } else {
    if (rows.size() > 1) rows.push_back({"TOTAL", hoursText(total), std::to_string(jobs)});
    std::string upper = a.by == "user" ? "USER" : "GROUP";
    std::cout << formatTable({upper, "GPU-HOURS", "JOBS"}, rows,
                             {Align::kLeft, Align::kRight, Align::kRight});
  }
  if (a.mine && account.contains("fair_share") && account["fair_share"].is_object()) {
    const json& fs = account["fair_share"];
    std::cout << "Fair share: decayed usage " << hoursText(fs.value("user_gpu_hours", 0.0))
              << " GPU-hours (half-life "
              << formatDuration(fs.value("half_life_seconds", int64_t{0})) << ")\n";
  }
  return Status::ok();
}

}  // namespace

void registerUsageCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- usage
  auto usage_args = std::make_shared<UsageArgs>();
  auto* usage = app.add_subcommand(
      "usage", "GPU-hours by user or group over a period (slices count by their share)");
  usage->add_option("--by", usage_args->by, "user (default) or group");
  usage
      ->add_option("--from", usage_args->from,
                   "start: YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or Unix seconds, UTC (default: 30 "
                   "days before --to)")
      ->type_name("DATE");
  usage->add_option("--to", usage_args->to, "end, same forms (default: now)")->type_name("DATE");
  usage->add_flag("--csv", usage_args->csv, "CSV with a header row (RFC 4180)");
  usage->add_flag("--mine", usage_args->mine, "only yours (or your groups'), with your fair share");
  usage->footer(kFooter);
  usage->callback(reporting([global, usage_args] { return runUsage(*global, *usage_args); }));
}

}  // namespace gpool::cli::admin
