// `gpool drain`, `resume`, `node remove` and `gpu clear`: an admin's hold on servers and GPUs.
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

Status runGpuClear(const GlobalOptions& global, const std::string& target) {
  size_t slash = target.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == target.size()) {
    return Status::invalidArgument(
        "NODE/GPU: expected a node and a GPU index, e.g. gpu-01/3, got '" + target + "'");
  }
  std::string node = target.substr(0, slash);
  std::string index = target.substr(slash + 1);
  if (index.find_first_not_of("0123456789") != std::string::npos) {
    return Status::invalidArgument("NODE/GPU: '" + index + "' is not a GPU index (gpool nodes)");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.post("/v1/nodes/" + pathName(node) + "/gpus/" + index + "/clear", "");
  if (!answer.ok()) return explainDenied(answer.status(), "gpu clear", kAdminRole);
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::string health = "?";
  for (const json& g : (*answer)["gpus"]) {
    if (std::to_string(g.value("index", -1)) == index) health = g.value("health", "?");
  }
  std::cout << "GPU " << index << " of " << node << " is no longer held; it is " << health
            << " (as its agent reports it)\n";
  return Status::ok();
}

Status runDrain(const GlobalOptions& global, const std::string& node, const std::string& reason) {
  if (reason.find_first_not_of(" \t") == std::string::npos) {
    return Status::invalidArgument("--reason: say why the node is drained (gpool drain " + node +
                                   " --reason \"disk replacement\"); it shows in `gpool nodes`");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer =
      api.post("/v1/nodes/" + pathName(node) + "/drain", json{{"reason", reason}}.dump());
  if (!answer.ok()) {
    Status s = answer.status();
    if (s.code() == StatusCode::kNotFound) {
      return Status::notFound("node '" + node + "' is not registered (see `gpool nodes`)");
    }
    return explainDenied(withFlagNames(s, "body", {{"reason", "--reason"}}), "drain", kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << "Node " << node << " " << answer->value("state", "?") << " (" << reason
            << "): running jobs finish, nothing new starts there; `gpool resume " << node
            << "` ends it\n";
  return Status::ok();
}

Status runResume(const GlobalOptions& global, const std::string& node) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.post("/v1/nodes/" + pathName(node) + "/resume", "");
  if (!answer.ok()) {
    Status s = answer.status();
    if (s.code() == StatusCode::kNotFound) {
      return Status::notFound("node '" + node + "' is not registered (see `gpool nodes`)");
    }
    return explainDenied(s, "resume", kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << "Node " << node << " " << answer->value("state", "?") << "\n";
  return Status::ok();
}

// An admin takes a server out of the pool: its record, its GPUs (their UUIDs are free for
// another node again) and its agent's credentials, in one transaction.
Status runNodeRemove(const GlobalOptions& global, const std::string& node) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.del("/v1/nodes/" + pathName(node));
  if (!answer.ok()) return explainDenied(answer.status(), "node remove", kAdminRole);
  if (global.json) {
    printJson(*answer);
  } else {
    std::cout << "Removed node " << node
              << " (its GPUs and its agent's credentials; an agent joins again with a new join "
                 "token)\n";
  }
  return Status::ok();
}

}  // namespace

void registerNodeCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- gpu clear
  {
    auto target = std::make_shared<std::string>();
    auto* gpu = app.add_subcommand("gpu", "GPUs: clear a GPU held after a fatal error (admins)");
    gpu->require_subcommand(1);
    auto* clear = gpu->add_subcommand(
        "clear", "Return a GPU held out of scheduling after a fatal XID (admins)");
    clear->add_option("NODE/GPU", *target, "the node and the GPU's index, e.g. gpu-01/3")
        ->required();
    clear->footer(kFooter);
    clear->callback(reporting([global, target] { return runGpuClear(*global, *target); }));
  }

  // ---- drain / resume
  auto drain_node = std::make_shared<std::string>();
  auto drain_reason = std::make_shared<std::string>();
  auto* drain = app.add_subcommand(
      "drain", "Drain a server (admins): running jobs finish, nothing new starts there");
  drain->add_option("NODE", *drain_node, "the node's name (gpool nodes)")->required();
  drain->add_option("--reason", *drain_reason, "why (shows in gpool nodes); required")
      ->type_name("TEXT");
  drain->footer(kFooter);
  drain->callback(reporting([global, drain_node, drain_reason] {
    return runDrain(*global, *drain_node, *drain_reason);
  }));

  // ---- node remove
  auto* node = app.add_subcommand("node", "Remove a server from the pool (admins)");
  node->require_subcommand(1);
  node->footer(kFooter);
  {
    auto name = std::make_shared<std::string>();
    auto* remove = node->add_subcommand("remove",
                                        "Remove a server: its record, GPUs and agent credentials "
                                        "(admins; nothing may run there)");
    remove->add_option("NODE", *name, "the node's name (gpool nodes)")->required();
    remove->footer(kFooter);
    remove->callback(reporting([global, name] { return runNodeRemove(*global, *name); }));
  }

  auto resume_node = std::make_shared<std::string>();
  auto* resume = app.add_subcommand("resume", "Resume a drained server (admins)");
  resume->add_option("NODE", *resume_node, "the node's name")->required();
  resume->footer(kFooter);
  resume->callback(reporting([global, resume_node] { return runResume(*global, *resume_node); }));
}

}  // namespace gpool::cli::admin
