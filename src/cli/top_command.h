#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli/client_commands.h"

namespace CLI {
class App;
}

// `gpool top`: every GPU of the pool with its tenants, like nvitop across servers (docs/cli.md).
// Live in a terminal (redrawn every --interval seconds with ANSI escapes, q quits), or once as
// plain text (--once, or when stdout is not a terminal) or JSON (--json: GET /v1/gpus as is).
namespace gpool::cli {

// The view of one /v1/gpus answer, `width` columns wide (at least 80 is assumed; narrower
// terminals get lines cut). Simulated GPUs say "simulated". Pure, for tests.
std::string formatTop(const nlohmann::json& gpus, int width);

// Adds `top` to `app`.
void registerTopCommand(CLI::App& app, std::shared_ptr<GlobalOptions> global);

}  // namespace gpool::cli
