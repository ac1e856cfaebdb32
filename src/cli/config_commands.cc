// `gpool config check FILE`: a configuration file checked with the daemon's own reader.
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

#include "agent/agent_config.h"
#include "api/user.h"
#include "cli/admin_common.h"
#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "cli/format.h"
#include "common/status.h"
#include "common/units.h"
#include "controller/controller_config.h"

namespace gpool::cli::admin {

namespace {

using nlohmann::json;

Status runConfigCheck(const GlobalOptions& global, const std::string& file,
                      const std::string& kind) {
  // Each daemon's own reader, so the check accepts exactly what the daemon does.
  Status read;
  if (kind == "gpoold") {
    read = controller::readControllerSettings(file).status();
  } else if (kind == "agent") {
    read = agent::readAgentSettings(file).status();
  } else {
    return Status::invalidArgument("--kind: '" + kind + "' is not one of gpoold, agent");
  }
  std::vector<std::string> errors;
  if (!read.isOk()) {
    if (read.code() != StatusCode::kInvalidArgument) return read;
    std::stringstream ss(read.message());
    std::string line;
    while (std::getline(ss, line)) {
      if (!line.empty()) errors.push_back(line);
    }
  }
  if (global.json) {
    printJson(json{{"file", file}, {"kind", kind}, {"ok", errors.empty()}, {"errors", errors}});
  } else if (errors.empty()) {
    std::cout << "OK: " << file << " is a valid " << (kind == "agent" ? "gpool-agent" : kind)
              << " configuration\n";
  } else {
    for (const std::string& e : errors)
      std::cerr << e << "\n";
  }
  if (errors.empty()) return Status::ok();
  return Status::invalidArgument(file + ": " + std::to_string(errors.size()) +
                                 (errors.size() == 1 ? " problem" : " problems") +
                                 " (fix the keys named above; docs/config.md)");
}

}  // namespace

void registerConfigCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- config check
  auto* config = app.add_subcommand("config", "Configuration files");
  config->require_subcommand(1);
  config->footer(kFooter);
  auto config_file = std::make_shared<std::string>();
  auto config_kind = std::make_shared<std::string>("gpoold");
  auto* check = config->add_subcommand(
      "check",
      "Check a configuration file as the daemon would read it: OK, or every problem "
      "with file:line and key");
  check
      ->add_option("FILE", *config_file,
                   "the file (e.g. /etc/gpool/gpoold.toml, /etc/gpool/gpool-agent.toml)")
      ->required();
  check->add_option("--kind", *config_kind,
                    "gpoold (default) or agent (gpool-agent --config's file)");
  check->footer(kFooter);
  check->callback(reporting([global, config_file, config_kind] {
    return runConfigCheck(*global, *config_file, *config_kind);
  }));
}

}  // namespace gpool::cli::admin
