#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace CLI {
class App;
}

// `gpool up` / `gpool down`: a whole pool on this machine, for trying gpool out and for tests.
// `up` starts one gpoold (SQLite store and Unix socket in a data directory) and one gpool-agent
// per server, on the real GPUs when NVML finds some and otherwise on simulated ones (by default
// 2 servers of 8 A100s, labelled "simulated" everywhere), waits until every server has joined,
// and records the processes in <dir>/pool.json; `up --demo` also submits a mix of jobs. `down`
// cancels what still runs, stops the agents, then the controller. docs/gpool-up.md.
namespace gpool::cli {

// Adds `up` and `down` to `app`. Failures are reported on stderr and end the command through
// CLI11's exit path (CLI::RuntimeError carrying the exit code of docs/cli-exit-codes.md).
void registerUpCommands(CLI::App& app);

// The pool's data directory: $GPOOL_UP_DIR, else /var/lib/gpool/up for root, else
// $XDG_DATA_HOME/gpool/up, else $HOME/.local/share/gpool/up.
std::string defaultUpDir();

// Finds one of gpool's programs ("gpoold", "gpool-agent", "gpool-supervisor", "libgpool-vgpu.so")
// beside the running `gpool` (an installed layout), in the build tree's folders next to it, or
// on $PATH (programs only). NotFound names every place looked at.
Result<std::string> findGpoolFile(const std::string& name);

// Where the simulated servers' GPU fixture comes from: $GPOOL_FIXTURE_DIR, the installed
// share/gpool/fixtures, or the source tree this binary was built from.
Result<std::string> findFixture(const std::string& file_name);

}  // namespace gpool::cli
