#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/client_commands.h"
#include "cli/submit_options.h"
#include "common/status.h"

namespace CLI {
class App;
}

// The commands that follow or enter a job (docs/cli.md): logs, run, alloc, shell.
namespace gpool::cli {

struct LogsArgs {
  std::string job;
  uint32_t task = 0;
  bool stderr_stream = false;
  bool follow = false;
  uint32_t attempt = 0;  // which run of a requeued job, from 1; 0: the latest
};

// gpool logs: prints the task's log; with `follow`, waits for the job to start and keeps
// printing until it ends.
Status runLogs(const GlobalOptions& global, const LogsArgs& a);

// gpool run: submits `plan`, waits for the job to start, streams every task's stdout and
// stderr (with more than one task, each line labelled with its task's rank as `srun --label`
// does: "0: ..."), and returns the job's exit code (the highest of its tasks') in
// `*exit_code`. SIGINT cancels the job (a second SIGINT leaves without waiting for the end).
Status runForeground(const GlobalOptions& global, const SubmitPlan& plan, int* exit_code);

// gpool shell: enters running job `job` (its task `task`) through its node agent's shell
// socket and execs `command` (default: the user's shell) there. Returns only on failure or
// when `fork_and_wait` is set (gpool alloc), then with the command's exit code in *exit_code.
Status runShell(const GlobalOptions& global, const std::string& job, uint32_t task,
                const std::vector<std::string>& command, bool fork_and_wait, int* exit_code);

// gpool alloc: submits the interactive allocation `plan`, waits until it runs, enters it as
// gpool shell does, and cancels it when the shell exits (exit code of the shell).
Status runAlloc(const GlobalOptions& global, const SubmitPlan& plan, int* exit_code);

// Registers logs and shell (run and alloc share submit's flags; client_commands.cc registers
// them).
void registerInteractiveCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global);

}  // namespace gpool::cli
