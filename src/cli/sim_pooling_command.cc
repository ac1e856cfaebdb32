// `gpool sim pooling`: the claim pooling exists for (sim/pooling.h), from the command line.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/sim_command.h"
#include "sim/dynamic_trace.h"
#include "sim/pooling.h"
#include "sim/sim_report.h"

namespace gpool::cli {
namespace {

using sim::DynJob;
using sim::formatPoolingTable;
using sim::poolingDelaySvg;
using sim::poolingJsonLines;
using sim::PoolingOptions;
using sim::poolingShareSvg;
using sim::ProgressBar;
using sim::runPooling;
using sim::writeFile;

struct PoolingArgs {
  SimTraceArgs selection{"openb"};
  std::string server = "8:V100:32:96";
  uint32_t min_servers = 1;
  uint32_t max_servers = 8;
  uint32_t reference = 0;
  std::string exclusive_policy = "fifo";
  std::string pooled_policy = "fairshare";
  std::string interval = "60s";
  std::string placement = "gpool";
  uint64_t seed = 42;
  std::string svg_dir;
  bool json = false;
  bool no_progress = false;
};

constexpr std::string_view kCommand = "gpool sim pooling";

[[noreturn]] void fail(const Status& status) {
  simFail(kCommand, status);
}

template <typename T>
T orFail(Result<T> r, const char* what) {
  if (!r.ok()) fail(r.status().withContext(what));
  return std::move(*r);
}

void runPoolingCommand(const PoolingArgs& a) {
  std::string trace;
  std::vector<DynJob> jobs = loadSimJobsOrFail(kCommand, a.selection, "openb or philly", &trace);

  PoolingOptions opt;
  opt.server = a.server;
  opt.min_servers = a.min_servers;
  opt.max_servers = a.max_servers;
  opt.reference_servers = a.reference;
  opt.exclusive_order = orFail(sched::parseQueueOrder(a.exclusive_policy), "--exclusive-policy");
  opt.pooled_order = orFail(sched::parseQueueOrder(a.pooled_policy), "--policy");
  opt.interval_s = std::max<int64_t>(1, simDurationOrFail(kCommand, a.interval, "--interval"));
  opt.placement = a.placement;
  opt.seed = a.seed;
  ProgressBar bar("pool sizes", !a.no_progress && ::isatty(2) != 0);
  opt.progress = [&bar](size_t done, size_t total) { bar.update(done, total); };
  std::string name = std::filesystem::path(trace).stem().string();
  auto result = runPooling(jobs, opt, name);
  bar.finish();
  if (!result.ok()) fail(result.status());
  if (a.json) {
    std::printf("%s", poolingJsonLines(*result).c_str());
  } else {
    std::printf("%zu jobs from %s\n%s", jobs.size(), trace.c_str(),
                formatPoolingTable(*result).c_str());
  }
  if (!a.svg_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.svg_dir, ec);
    if (ec) fail(Status::ioError("cannot create " + a.svg_dir + ": " + ec.message()));
    for (const auto& [file, svg] : std::vector<std::pair<std::string, std::string>>{
             {"pooling_share.svg", poolingShareSvg(*result, 0)},
             {"pooling_delay.svg", poolingDelaySvg(*result)}}) {
      Status s = writeFile(a.svg_dir + "/" + file, svg);
      if (!s.isOk()) fail(s);
    }
    if (!a.json) {
      std::printf("plots written to %s/{pooling_share,pooling_delay}.svg\n", a.svg_dir.c_str());
    }
  }
}

}  // namespace

void registerSimPoolingCommand(CLI::App& sim) {
  auto a = std::make_shared<PoolingArgs>();
  auto* cmd = sim.add_subcommand(
      "pooling",
      "The pooling claim: the same jobs on exclusive whole GPUs (first come, first served) and on "
      "gpool (slices, fair-share, backfill), on pools of --min-servers..--max-servers; GPU share "
      "held and used, queueing delay, and the smallest pool keeping the exclusive way's delays");
  cmd->add_option("--workload", a->selection.workload,
                  "openb (pods with fractional GPUs) or philly (jobs of whole GPUs)")
      ->capture_default_str();
  cmd->add_option("--trace", a->selection.trace,
                  "Trace file (default: bundled alibaba-gpu-v2023/openb_pod_list_default.csv or "
                  "pollux-osdi21/philly.csv)");
  cmd->add_option("--server", a->server, "One server: G[:MODEL[:MEM_GIB[:CORES]]]")
      ->capture_default_str();
  cmd->add_option("--min-servers", a->min_servers, "Smallest pool tried")->capture_default_str();
  cmd->add_option("--max-servers", a->max_servers, "Largest pool tried")->capture_default_str();
  cmd->add_option("--reference", a->reference,
                  "The pool the team has today (servers): the exclusive way's delays on it are "
                  "the target (default: --max-servers)");
  cmd->add_option("--exclusive-policy", a->exclusive_policy,
                  "Queue order of the exclusive way (fifo, sjf, las, fairshare)")
      ->capture_default_str();
  cmd->add_option("--policy", a->pooled_policy, "Queue order of gpool's way")
      ->capture_default_str();
  addSimWindowOptions(cmd, a->selection);
  cmd->add_option("--interval", a->interval, "Scheduling period")->capture_default_str();
  cmd->add_option("--placement", a->placement, "Placement policy of gpool's way")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Random seed for placement ties")->capture_default_str();
  cmd->add_option("--svg-dir", a->svg_dir,
                  "Write pooling_share.svg and pooling_delay.svg into this folder");
  cmd->add_flag("--json", a->json, "One JSON object per replay and line, then a summary line");
  cmd->add_flag("--no-progress", a->no_progress, "No progress bar on stderr");
  cmd->callback([a] { runPoolingCommand(*a); });
}

}  // namespace gpool::cli
