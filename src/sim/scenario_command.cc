// `gpool sim scenario FILE`: a policy scenario (sim/scenario.h) replayed through the scheduler
// library on a virtual clock; prints the trace line of every wait.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "sim/scenario.h"
#include "sim/sim_command.h"

namespace gpool::sim {

void registerScenarioCommand(CLI::App& sim) {
  auto file = std::make_shared<std::string>();
  auto* cmd = sim.add_subcommand(
      "scenario",
      "Replay a policy scenario (pool, policy, users, submissions and waits; "
      "docs/scheduler-policy.md) through the scheduler gpoold runs, on a virtual clock; prints "
      "what every wait saw: job states, starts, preemptions");
  cmd->add_option("FILE", *file, "The scenario (e.g. data/scenarios/preemption.txt)")->required();
  cmd->callback([file] {
    Result<Scenario> s = loadScenario(*file);
    Result<std::vector<std::string>> trace =
        s.ok() ? replayScenario(*s) : Result<std::vector<std::string>>(s.status());
    if (!trace.ok()) {
      std::fprintf(stderr, "gpool sim scenario: %s\n", trace.status().message().c_str());
      throw CLI::RuntimeError(exitCodeFor(trace.status().code()));
    }
    size_t wait = 0;
    for (const std::string& line : *trace)
      std::printf("wait %zu: %s\n", ++wait, line.c_str());
  });
}

}  // namespace gpool::sim
