// `gpool sim dynamic`: the dynamic replay (sim/dynamic_replay.h) of a job trace per queue policy
// and for exclusive vs sliced GPUs, from the command line: table or JSON lines, and plots.

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/sim_command.h"
#include "common/units.h"
#include "sim/dynamic_replay.h"
#include "sim/dynamic_report.h"
#include "sim/dynamic_trace.h"
#include "sim/sim_report.h"

namespace gpool::cli {
namespace {

using sim::buildDynamicCluster;
using sim::dynamicJsonLine;
using sim::DynamicOptions;
using sim::DynamicResult;
using sim::DynJob;
using sim::formatDynamicTable;
using sim::jctCdfSvg;
using sim::queueSvg;
using sim::runDynamic;
using sim::utilisationSvg;
using sim::writeFile;

struct DynamicArgs {
  SimTraceArgs selection{"philly"};
  std::string nodes;
  std::string policy = "all";
  std::string mode = "both";
  std::string interval = "60s";
  double limit_factor = 1.0;
  std::string half_life = "1d";
  std::string placement = "gpool";
  uint64_t seed = 42;
  std::string svg_dir;
  bool json = false;
  bool no_progress = false;
};

constexpr std::string_view kCommand = "gpool sim dynamic";

[[noreturn]] void fail(const Status& status) {
  simFail(kCommand, status);
}

int64_t durationOrFail(const std::string& text, const char* what) {
  return simDurationOrFail(kCommand, text, what);
}

// A one-line bar on stderr, only on a terminal.
class Progress {
 public:
  Progress(std::string label, bool enabled) : label_(std::move(label)), enabled_(enabled) {}
  void update(double fraction) {
    if (!enabled_) return;
    int width = 30;
    int filled = static_cast<int>(fraction * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar += std::string(static_cast<size_t>(width - filled), '.');
    std::fprintf(stderr, "\r%-28s [%s] %3d%%", label_.c_str(), bar.c_str(),
                 static_cast<int>(fraction * 100));
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r%-70s\r", "");
    drawn_ = false;
  }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
};

void runDynamicCommand(const DynamicArgs& a) {
  std::string trace;
  std::vector<DynJob> jobs = loadSimJobsOrFail(kCommand, a.selection, "philly or openb", &trace);
  std::string nodes = a.nodes;
  if (nodes.empty()) {
    nodes = a.selection.workload == "philly"
                ? std::string("64x8")
                : defaultTraceDir() + "/alibaba-gpu-v2023/openb_node_list_gpu_node.csv";
  }
  auto cluster = buildDynamicCluster(nodes);
  if (!cluster.ok()) fail(cluster.status());

  std::vector<sched::QueueOrder> orders;
  for (const std::string& name :
       splitCommaList(a.policy == "all" ? "fifo,sjf,las,fairshare" : a.policy)) {
    auto o = sched::parseQueueOrder(name);
    if (!o.ok()) fail(o.status());
    orders.push_back(*o);
  }
  std::vector<bool> modes;
  if (a.mode == "both" || a.mode == "exclusive") modes.push_back(true);
  if (a.mode == "both" || a.mode == "sliced") modes.push_back(false);
  if (modes.empty()) fail(Status::invalidArgument("--mode must be sliced, exclusive or both"));

  std::string name = std::filesystem::path(trace).stem().string();
  if (!a.json) {
    std::printf("%zu jobs from %s on %zu servers / %llu GPUs\n", jobs.size(), trace.c_str(),
                cluster->size(), static_cast<unsigned long long>(cluster->gpuCount()));
  }
  bool show = !a.no_progress && ::isatty(2);
  std::vector<DynamicResult> results;
  for (sched::QueueOrder order : orders) {
    for (bool exclusive : modes) {
      DynamicOptions opt;
      opt.order = order;
      opt.exclusive = exclusive;
      opt.interval_s = std::max<int64_t>(1, durationOrFail(a.interval, "--interval"));
      opt.limit_factor = a.limit_factor;
      opt.half_life_s = durationOrFail(a.half_life, "--half-life");
      opt.placement = a.placement;
      opt.seed = a.seed;
      Progress bar(
          std::string(sched::queueOrderName(order)) + (exclusive ? " exclusive" : " sliced"), show);
      opt.progress = [&bar](double f) { bar.update(f); };
      auto r = runDynamic(jobs, *cluster, opt, name);
      bar.finish();
      if (!r.ok()) fail(r.status());
      if (a.json) {
        std::printf("%s\n", dynamicJsonLine(*r).c_str());
        std::fflush(stdout);
      }
      results.push_back(std::move(*r));
    }
  }
  if (!a.json) std::printf("%s", formatDynamicTable(results).c_str());
  if (!a.svg_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.svg_dir, ec);
    if (ec) fail(Status::ioError("cannot create " + a.svg_dir + ": " + ec.message()));
    std::string title = name + " on " + nodes.substr(nodes.find_last_of('/') + 1);
    for (const auto& [file, svg] : std::vector<std::pair<std::string, std::string>>{
             {"utilisation.svg", utilisationSvg(results, "GPU allocation over time: " + title)},
             {"queue.svg", queueSvg(results, "Queue length over time: " + title)},
             {"jct_cdf.svg", jctCdfSvg(results, "JCT CDF: " + title)}}) {
      Status s = writeFile(a.svg_dir + "/" + file, svg);
      if (!s.isOk()) fail(s);
    }
    if (!a.json)
      std::printf("plots written to %s/{utilisation,queue,jct_cdf}.svg\n", a.svg_dir.c_str());
  }
}

}  // namespace

void registerSimDynamicCommand(CLI::App& sim) {
  auto a = std::make_shared<DynamicArgs>();
  auto* cmd = sim.add_subcommand(
      "dynamic",
      "Dynamic replay: jobs arrive and leave over time, wait in the queue; JCT, queueing delay, "
      "GPU utilisation and fairness per queue policy, exclusive vs sliced GPUs");
  cmd->add_option("--workload", a->selection.workload,
                  "philly (job trace, whole GPUs) or openb (pods "
                  "with creation/deletion times, GPU slices)")
      ->capture_default_str();
  cmd->add_option("--trace", a->selection.trace,
                  "Trace file (default: bundled pollux-osdi21/philly.csv or "
                  "alibaba-gpu-v2023/openb_pod_list_default.csv)");
  cmd->add_option(
      "--nodes", a->nodes,
      "Cluster: NxG[:MODEL[:MEM_GIB[:CORES]]][,...] such as 64x8, or an openb node list CSV "
      "(default: 64x8 for philly, the openb GPU node list for openb)");
  cmd->add_option("--policy", a->policy,
                  "Queue policy: fifo, sjf, las, fairshare, a comma list, "
                  "or all")
      ->capture_default_str();
  cmd->add_option("--mode", a->mode,
                  "sliced, exclusive (requests rounded up to whole GPUs) or "
                  "both")
      ->capture_default_str();
  addSimWindowOptions(cmd, a->selection);
  cmd->add_option("--interval", a->interval, "Scheduling period")->capture_default_str();
  cmd->add_option("--limit-factor", a->limit_factor,
                  "Time limit given to backfill = run time x this")
      ->capture_default_str();
  cmd->add_option("--half-life", a->half_life, "Usage half-life for fair-share")
      ->capture_default_str();
  cmd->add_option("--placement", a->placement, "Placement policy (gpool, FGD, BestFit, ...)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Random seed for placement ties")->capture_default_str();
  cmd->add_option("--svg-dir", a->svg_dir,
                  "Write utilisation.svg, queue.svg and jct_cdf.svg into this folder");
  cmd->add_flag("--json", a->json, "One JSON object per line per (policy, mode)");
  cmd->add_flag("--no-progress", a->no_progress, "No progress bar on stderr");
  cmd->callback([a] { runDynamicCommand(*a); });
}

}  // namespace gpool::cli
