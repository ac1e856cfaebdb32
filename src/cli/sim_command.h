#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "sim/dynamic_trace.h"

namespace CLI {
class App;
}

// `gpool sim`: trace-driven simulation with the very scheduler library the controller runs. The
// replays live in src/sim (a library: no argument parsing, no command output); the commands
// here parse the flags, call it and print. One file per mode: sim_fgd_command.cc,
// sim_dynamic_command.cc, sim_pooling_command.cc, sim_scenario_command.cc.
namespace gpool::cli {

// Adds `sim` and its modes (fgd, dynamic, pooling, scenario) to `app`. Usage errors and failures
// are reported on stderr and end the process through CLI11's exit path (CLI::RuntimeError).
CLI::App* registerSimCommands(CLI::App& app);

// The modes, each added under the `sim` subcommand by registerSimCommands.
void registerSimFgdCommand(CLI::App& sim);
void registerSimDynamicCommand(CLI::App& sim);
void registerSimPoolingCommand(CLI::App& sim);
void registerSimScenarioCommand(CLI::App& sim);

// Where the bundled traces live: $GPOOL_DATA_DIR, else ./data/traces when it holds the openb
// traces, else the installed <prefix>/share/gpool/traces, else the source tree's data/traces
// this binary was built from.
std::string defaultTraceDir();

// Prints "<command>: <text>" on stderr and ends the command with exitCodeFor(code)
// (docs/cli-exit-codes.md) through CLI::RuntimeError. `command` is e.g. "gpool sim dynamic".
[[noreturn]] void simFail(std::string_view command, const std::string& text, StatusCode code);
// The same with the status's full text (code name and message).
[[noreturn]] void simFail(std::string_view command, const Status& status);

// The seconds of a duration flag ("90s", "7d"; common/units.h); a bad one ends the command
// through simFail naming the flag `what`.
int64_t simDurationOrFail(std::string_view command, const std::string& text, const char* what);

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> splitCommaList(const std::string& text);

// The job trace selection shared by the dynamic modes (--workload, --trace, --window-start,
// --window, --max-jobs, --sample).
struct SimTraceArgs {
  explicit SimTraceArgs(std::string default_workload) : workload(std::move(default_workload)) {}

  std::string workload;
  std::string trace;  // empty: the bundled trace of `workload`
  std::string window_start = "0s";
  std::string window_length;  // empty: to the end of the trace
  size_t max_jobs = 0;
  size_t sample = 1;
};

// Adds --window-start, --window, --max-jobs and --sample, kept in `args`, to `cmd`.
void addSimWindowOptions(CLI::App* cmd, SimTraceArgs& args);

// Reads the jobs `args` selects from the philly or openb trace (the bundled one under
// defaultTraceDir() when args.trace is empty; `*trace_out` gets the path read). Any failure,
// an unknown workload (the message lists `expected`, e.g. "philly or openb") or an empty
// selection ends the command through simFail(command, ...).
std::vector<sim::DynJob> loadSimJobsOrFail(std::string_view command, const SimTraceArgs& args,
                                           std::string_view expected, std::string* trace_out);

}  // namespace gpool::cli
