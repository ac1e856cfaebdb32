// `gpool sim scenario FILE`: a policy scenario (sim/scenario.h) replayed through the scheduler
// library on a virtual clock; prints the trace line of every wait.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/sim_command.h"
#include "sim/scenario.h"

namespace gpool::cli {

void registerSimScenarioCommand(CLI::App& sim) {
  auto file = std::make_shared<std::string>();
  auto* cmd = sim.add_subcommand(
      "scenario",
      "Replay a policy scenario (pool, policy, users, submissions and waits; "
      "docs/scheduler-policy.md) through the scheduler gpoold runs, on a virtual clock; prints "
      "what every wait saw: job states, starts, preemptions");
  cmd->add_option("FILE", *file, "The scenario (e.g. data/scenarios/preemption.txt)")->required();
  cmd->callback([file] {
    Result<sim::Scenario> s = sim::loadScenario(*file);
    Result<std::vector<std::string>> trace =
        s.ok() ? sim::replayScenario(*s) : Result<std::vector<std::string>>(s.status());
    if (!trace.ok()) {
      simFail("gpool sim scenario", trace.status().message(), trace.status().code());
    }
    size_t wait = 0;
    for (const std::string& line : *trace)
      std::printf("wait %zu: %s\n", ++wait, line.c_str());
  });
}

}  // namespace gpool::cli
