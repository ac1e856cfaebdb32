// `gpool sim`: the subcommand group, and the pieces its modes share (failing, the bundled
// traces' folder, the job trace selection).
#include "cli/sim_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/units.h"

namespace gpool::cli {

std::string defaultTraceDir() {
  if (const char* env = std::getenv("GPOOL_DATA_DIR"); env && *env) return env;
  std::error_code ec;
  if (std::filesystem::is_directory("data/traces/alibaba-gpu-v2023", ec)) return "data/traces";
  // Installed (the Debian package): <prefix>/bin/gpool, <prefix>/share/gpool/traces.
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path installed = exe.parent_path() / "../share/gpool/traces";
    if (std::filesystem::is_directory(installed, ec)) return installed.lexically_normal().string();
  }
#ifdef GPOOL_SOURCE_DATA_DIR
  return GPOOL_SOURCE_DATA_DIR;
#else
  return "data/traces";
#endif
}

void simFail(std::string_view command, const std::string& text, StatusCode code) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(command.size()), command.data(),
               text.c_str());
  throw CLI::RuntimeError(exitCodeFor(code));
}

void simFail(std::string_view command, const Status& status) {
  simFail(command, status.toString(), status.code());
}

int64_t simDurationOrFail(std::string_view command, const std::string& text, const char* what) {
  auto d = parseDuration(text);
  if (!d.ok()) simFail(command, d.status().withContext(what));
  return *d;
}

std::vector<std::string> splitCommaList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

void addSimWindowOptions(CLI::App* cmd, SimTraceArgs& args) {
  cmd->add_option("--window-start", args.window_start,
                  "Skip jobs submitted earlier than this after the trace start (e.g. 56d)")
      ->capture_default_str();
  cmd->add_option("--window", args.window_length,
                  "Only jobs submitted within this long after --window-start (e.g. 7d)");
  cmd->add_option("--max-jobs", args.max_jobs, "At most this many jobs (0 = all)");
  cmd->add_option("--sample", args.sample, "Keep every Nth job of the window");
}

std::vector<sim::DynJob> loadSimJobsOrFail(std::string_view command, const SimTraceArgs& args,
                                           std::string_view expected, std::string* trace_out) {
  auto duration = [&](const std::string& text, const char* what) {
    return simDurationOrFail(command, text, what);
  };
  sim::TraceFilter filter;
  filter.window_start_s = duration(args.window_start, "--window-start");
  if (!args.window_length.empty()) {
    filter.window_end_s = filter.window_start_s + duration(args.window_length, "--window");
  }
  filter.max_jobs = args.max_jobs;
  filter.sample_every = std::max<size_t>(1, args.sample);

  std::string data = defaultTraceDir();
  std::string trace = args.trace;
  Result<std::vector<sim::DynJob>> jobs = Status::invalidArgument(
      "unknown --workload '" + args.workload + "': expected " + std::string(expected));
  if (args.workload == "philly") {
    if (trace.empty()) trace = data + "/pollux-osdi21/philly.csv";
    jobs = sim::readPhillyJobs(trace, filter);
  } else if (args.workload == "openb") {
    if (trace.empty()) trace = data + "/alibaba-gpu-v2023/openb_pod_list_default.csv";
    jobs = sim::readOpenbJobs(trace, filter);
  }
  if (!jobs.ok()) simFail(command, jobs.status());
  if (jobs->empty()) {
    simFail(command, Status::invalidArgument("no jobs in the selected window of " + trace));
  }
  *trace_out = trace;
  return std::move(*jobs);
}

CLI::App* registerSimCommands(CLI::App& app) {
  auto* sim = app.add_subcommand("sim", "Replay cluster traces through gpool's scheduler");
  sim->require_subcommand(1);
  registerSimFgdCommand(*sim);
  registerSimDynamicCommand(*sim);
  registerSimPoolingCommand(*sim);
  registerSimScenarioCommand(*sim);
  return sim;
}

}  // namespace gpool::cli
