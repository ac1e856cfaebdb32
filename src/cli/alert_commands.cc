// `gpool alerts [show ID|ack ID]`: gpoold's firing alerts and their history.
#include <time.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
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

// "2026-12-07 03:51" in local time, or "-" for null.
std::string alertTime(const json& us) {
  if (!us.is_number_integer()) return "-";
  std::time_t secs = static_cast<std::time_t>(us.get<int64_t>() / 1'000'000);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string alertWhere(const json& labels) {
  std::string where;
  for (const char* key : {"Hostname", "gpu", "hpc_job", "pid", "reason"}) {
    if (!labels.contains(key) || labels[key].get<std::string>().empty()) continue;
    std::string v = labels[key].get<std::string>();
    if (std::string(key) == "gpu") {
      where += "/GPU " + v;
    } else if (std::string(key) == "hpc_job") {
      where += (where.empty() ? "" : " ") + std::string("job ") + v;
    } else if (std::string(key) == "pid") {
      where += " pid " + v;
    } else {
      where += (where.empty() ? "" : " ") + v;
    }
  }
  return where.empty() ? "pool" : where;
}

Status runAlertsList(const GlobalOptions& global, bool all, int64_t limit) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::string target = std::string("/v1/alerts?state=") + (all ? "all" : "firing") +
                       "&limit=" + std::to_string(limit);
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get(target));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  const json& alerts = answer["alerts"];
  if (alerts.empty()) {
    std::cout << (all ? "No alerts.\n" : "No alert is firing (gpool alerts --all: history).\n");
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& a : alerts) {
    std::string acked = a["acked_by"].is_string() ? a["acked_by"].get<std::string>() : "-";
    rows.push_back({std::to_string(a.value("id", int64_t{0})), a.value("state", ""),
                    a.value("severity", ""), a.value("alertname", ""), alertWhere(a["labels"]),
                    alertTime(a["started_us"]), alertTime(a["resolved_us"]), acked,
                    a.value("summary", "")});
  }
  std::cout << formatTable(
      {"ID", "STATE", "SEVERITY", "ALERT", "WHERE", "SINCE", "RESOLVED", "ACKED", "SUMMARY"}, rows,
      {Align::kRight});
  if (answer["next_before"].is_number_integer()) {
    std::cout << "(more: gpool alerts --all --limit N)\n";
  }
  return Status::ok();
}

Status runAlertsShow(const GlobalOptions& global, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.get("/v1/alerts/" + std::to_string(id));
  if (!answer.ok()) return explainDenied(answer.status(), "alerts show", "the admin role");
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  const json& a = *answer;
  std::cout << "Alert " << a.value("id", int64_t{0}) << ": " << a.value("alertname", "") << " ("
            << a.value("severity", "") << ", " << a.value("state", "") << ")\n"
            << "  " << a.value("summary", "") << "\n";
  for (const auto& [k, v] : a["labels"].items()) {
    if (k != "alertname" && k != "severity")
      std::cout << "  " << k << "=" << v.get<std::string>() << "\n";
  }
  for (const json& e : a["events"]) {
    std::cout << "  " << alertTime(e["time_us"]) << "  " << e.value("event", "") << " by "
              << e.value("actor", "")
              << (e.value("detail", "").empty() ? "" : ": " + e.value("detail", "")) << "\n";
  }
  return Status::ok();
}

Status runAlertsAck(const GlobalOptions& global, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.post("/v1/alerts/" + std::to_string(id) + "/ack", "");
  if (!answer.ok()) {
    Status s = answer.status();
    if (s.code() == StatusCode::kNotFound) {
      return Status::notFound("alert " + std::to_string(id) +
                              " does not exist (gpool alerts --all)");
    }
    return explainDenied(s, "alerts ack", kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << "Alert " << id << " (" << answer->value("alertname", "") << ") acknowledged; it "
            << (answer->value("state", "") == "firing" ? "keeps firing until its condition clears"
                                                       : "is resolved")
            << "\n";
  return Status::ok();
}

}  // namespace

void registerAlertCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- alerts
  {
    auto all = std::make_shared<bool>(false);
    auto limit = std::make_shared<int64_t>(100);
    auto* alerts = app.add_subcommand(
        "alerts", "gpoold's alerts: firing ones (--all: history); show ID; ack ID (admins)");
    alerts->add_flag("--all", *all, "every alert, resolved ones too, newest first");
    alerts->add_option("--limit", *limit, "at most this many (1..10000, default 100)")
        ->check(CLI::Range(1, 10000));
    alerts->footer(kFooter);
    alerts->callback(reporting([global, all, limit, alerts] {
      if (!alerts->get_subcommands().empty()) return Status::ok();
      return runAlertsList(*global, *all, *limit);
    }));
    auto show_id = std::make_shared<int64_t>(0);
    auto* show = alerts->add_subcommand("show", "One alert with its history");
    show->add_option("ID", *show_id, "the alert's id (gpool alerts)")->required();
    show->footer(kFooter);
    show->callback(reporting([global, show_id] { return runAlertsShow(*global, *show_id); }));
    auto ack_id = std::make_shared<int64_t>(0);
    auto* ack = alerts->add_subcommand(
        "ack", "Acknowledge an alert (admins); it keeps firing until its condition clears");
    ack->add_option("ID", *ack_id, "the alert's id (gpool alerts)")->required();
    ack->footer(kFooter);
    ack->callback(reporting([global, ack_id] { return runAlertsAck(*global, *ack_id); }));
  }
}

}  // namespace gpool::cli::admin
