#pragma once

#include <string>

namespace CLI {
class App;
}

// `gpool sim`: trace-driven simulation with the very scheduler library the controller runs.
namespace gpool::sim {

// Adds `sim` and its `fgd` subcommand to `app`. Other simulator modes add themselves to the
// returned `sim` subcommand (e.g. `gpool sim dynamic`). Usage errors and failures are reported
// on stderr and end the process through CLI11's exit path (CLI::RuntimeError).
CLI::App* registerSimCommands(CLI::App& app);

// Where the bundled traces live: $GPOOL_DATA_DIR, else ./data/traces when it exists, else the
// source tree's data/traces this binary was built from.
std::string defaultTraceDir();

// Adds `scenario` under `sim`: a policy scenario replayed on a virtual clock (scenario.h).
void registerScenarioCommand(CLI::App& sim);

}  // namespace gpool::sim
