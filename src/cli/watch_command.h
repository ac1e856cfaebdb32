#pragma once

#include <memory>

#include "cli/client_commands.h"

namespace CLI {
class App;
}

// `gpool watch`: prints gpoold's live updates (GET /v1/watch, docs/controller.md "Live
// updates") as lines, or as JSON lines with --json, until interrupted or --count job events.
namespace gpool::cli {

void registerWatchCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global);

}  // namespace gpool::cli
