// `gpool qos list|add|set|remove`: the quality-of-service levels through gpoold's /v1/qos.
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

struct QosArgs {
  std::string name;
  std::map<std::string, std::string> values;  // by API field
  bool preemptible = false;
  bool no_preemptible = false;
};

struct QosFlag {
  const char* flag;
  const char* field;
  const char* canonical;
  const char* help;
  bool integer;
  // The word that unsets the field in `qos set` ("none": no limit; "default": the controller's
  // configured value); nullptr: it cannot be unset.
  const char* unset_word;
};
const std::vector<QosFlag>& qosFlags() {
  static const std::vector<QosFlag> flags = {
      {"priority", "priority", "priority", "higher goes first, 0 to 1000000", true, nullptr},
      {"description", "description", "description", "what the level is for", false, nullptr},
      {"max-gpus-per-user", "max_gpus_per_user", "max_gpus_per_user_milli",
       "GPUs one user may hold in this QoS (none: no limit)", false, "none"},
      {"max-wall-time", "max_wall_time", "max_wall_time_seconds",
       "longest time limit, also the default (2d; none: no limit)", false, "none"},
      {"grace-time", "grace_time", "grace_time_seconds",
       "between the preemption or time-limit signal and the kill (60s; 0: killed at once; "
       "default: gpoold's preempt_grace, as when not given)",
       false, "default"},
  };
  return flags;
}

std::vector<FieldFlag> qosFields() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const QosFlag& f : qosFlags())
      n.push_back(std::string("--") + f.flag);
    return n;
  }();
  std::vector<FieldFlag> out;
  for (size_t i = 0; i < qosFlags().size(); ++i)
    out.push_back({qosFlags()[i].field, names[i]});
  out.push_back({"preemptible", "--preemptible"});
  out.push_back({"name", "QOS"});
  return out;
}

Result<json> qosList(ApiClient& api) {
  return api.get("/v1/qos");
}

Status runQosList(const GlobalOptions& global) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, qosList(api));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& j : answer.value("qos", json::array())) {
    api::Qos q;
    GPOOL_RETURN_IF_ERROR(api::fromJson(j, &q, "gpoold's qos"));
    rows.push_back({q.name, std::to_string(q.priority), q.preemptible ? "yes" : "no",
                    q.max_gpus_per_user_milli ? gpuAmount(*q.max_gpus_per_user_milli) : "-",
                    q.max_wall_time_seconds ? formatDuration(*q.max_wall_time_seconds) : "-",
                    q.grace_time_seconds ? formatDuration(*q.grace_time_seconds) : "default",
                    q.description.empty() ? "-" : q.description});
  }
  if (rows.empty()) {
    std::cout << "No QoS levels (add one with `gpool qos add NAME --priority N`)\n";
    return Status::ok();
  }
  std::cout << formatTable(
      {"QOS", "PRIORITY", "PREEMPTIBLE", "MAX_GPUS/USER", "MAX_WALL", "GRACE", "DESCRIPTION"}, rows,
      {Align::kLeft, Align::kRight, Align::kLeft, Align::kRight, Align::kRight, Align::kRight});
  return Status::ok();
}

Status runQosWrite(const GlobalOptions& global, const QosArgs& a, bool add) {
  const std::string command = add ? "qos add" : "qos set";
  if (a.name.empty()) return Status::invalidArgument("QOS: give the QoS level's name");
  if (a.preemptible && a.no_preemptible) {
    return Status::invalidArgument("--preemptible and --no-preemptible exclude each other");
  }
  if (!add && a.values.empty() && !a.preemptible && !a.no_preemptible) {
    return Status::invalidArgument(
        "nothing to change: give --priority, --description, --preemptible, --no-preemptible, "
        "--max-gpus-per-user, --max-wall-time or --grace-time");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json all, qosList(api));
  json qos;
  for (const json& q : all.value("qos", json::array())) {
    if (q.value("name", "") == a.name) qos = q;
  }
  if (add && !qos.is_null()) {
    return Status::alreadyExists("QoS '" + a.name + "' already exists (change it with `gpool qos " +
                                 "set " + a.name + " ...`)");
  }
  if (!add && qos.is_null()) {
    return Status::notFound("QoS '" + a.name + "' does not exist (add it with `gpool qos add " +
                            a.name + " ...`)");
  }
  if (add) qos = json{{"name", a.name}};
  for (const QosFlag& f : qosFlags()) {
    auto it = a.values.find(f.field);
    if (it == a.values.end()) continue;
    qos.erase(f.canonical);
    qos.erase(f.field);
    if (f.unset_word != nullptr && it->second == f.unset_word) continue;  // left unset
    if (it->second == "none") {
      return Status::invalidArgument(
          std::string("--") + f.flag + ": 'none' is not allowed here (give a value" +
          (f.unset_word != nullptr ? std::string(", or '") + f.unset_word + "'" : "") + ")");
    }
    if (f.integer) {
      GPOOL_ASSIGN_OR_RETURN(uint32_t v, parseUint32(it->second, std::string("--") + f.flag));
      qos[f.field] = v;
    } else {
      qos[f.field] = it->second;
    }
  }
  if (a.preemptible) qos["preemptible"] = true;
  if (a.no_preemptible) qos["preemptible"] = false;
  Result<json> answer = api.put("/v1/qos/" + pathName(a.name), qos.dump());
  if (!answer.ok()) {
    return explainDenied(withFlagNames(answer.status(), "qos", qosFields()), command, kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << (add ? "Added" : "Changed") << " QoS " << a.name << "\n";
  return Status::ok();
}

Status runQosRemove(const GlobalOptions& global, const std::string& name) {
  if (name.empty()) return Status::invalidArgument("QOS: give the QoS level's name");
  return removeThing(global, "/v1/qos/" + pathName(name), "QoS " + name, "qos remove", kAdminRole);
}

}  // namespace

void registerQosCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- qos
  auto* qos = app.add_subcommand("qos", "Quality-of-service levels: priority, limits, preemption");
  qos->require_subcommand(1);
  qos->footer(kFooter);
  {
    auto* list = qos->add_subcommand("list", "List the QoS levels");
    list->footer(kFooter);
    list->callback(reporting([global] { return runQosList(*global); }));
    for (bool add : {true, false}) {
      auto args = std::make_shared<QosArgs>();
      auto* cmd = qos->add_subcommand(add ? "add" : "set",
                                      add ? "Add a QoS level (admins)"
                                          : "Change a QoS level; the rest keeps its values "
                                            "(admins)");
      cmd->add_option("QOS", args->name, "the level's name")->required();
      for (const QosFlag& f : qosFlags()) {
        std::string field = f.field;
        cmd->add_option_function<std::string>(
               std::string("--") + f.flag,
               [args, field](const std::string& v) { args->values[field] = v; }, f.help)
            ->type_name("VALUE");
      }
      cmd->add_flag("--preemptible", args->preemptible,
                    "its jobs may be preempted for higher-priority work");
      if (!add) cmd->add_flag("--no-preemptible", args->no_preemptible, "not preemptible");
      cmd->footer(kFooter);
      cmd->callback(reporting([global, args, add] { return runQosWrite(*global, *args, add); }));
    }
    addNamedCommand(*qos, "remove", "Remove a QoS level (admins)", "QOS", "the level's name",
                    [global](const std::string& name) { return runQosRemove(*global, name); });
  }
}

}  // namespace gpool::cli::admin
