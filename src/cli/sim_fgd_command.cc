// `gpool sim fgd`: the FGD-mode replay (sim/fgd_replay.h) from the command line, with its
// table, JSON lines, plots and the comparison against the published means.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/sim_command.h"
#include "sched/policies.h"
#include "sim/fgd_replay.h"
#include "sim/sim_report.h"

namespace gpool::cli {

namespace {

using sim::allocationSvg;
using sim::FgdOptions;
using sim::formatComparison;
using sim::formatTable;
using sim::formatVariantsTable;
using sim::fragmentationSvg;
using sim::loadWorkload;
using sim::parseSeeds;
using sim::PolicyResult;
using sim::ProgressBar;
using sim::PublishedRow;
using sim::readOpenbNodes;
using sim::readPublishedSummary;
using sim::runPolicies;
using sim::toJsonLine;
using sim::variantsSvg;
using sim::writeFile;

struct FgdArgs {
  std::string pods;
  std::string nodes;
  std::string policy = "all";
  std::string seeds = "42-51";
  std::string published;
  std::string svg;
  std::string frag_svg;
  double tune = 1.3;
  unsigned threads = 2;
  double tolerance = 0.5;
  bool json = false;
  bool compare = false;
  bool variants = false;
  bool no_progress = false;
};

[[noreturn]] void fail(const Status& status) {
  simFail("gpool sim", status);
}

std::vector<std::string> policyList(const std::string& text) {
  if (text == "all") return sched::policyNames();
  return splitCommaList(text);
}

// The pod lists of the published experiment families, in the paper's order.
std::vector<std::string> variantFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("openb_pod_list_", 0) == 0 && e.path().extension() == ".csv") {
      out.push_back(e.path().string());
    }
  }
  auto rank = [](const std::string& path) {
    std::string n = std::filesystem::path(path).stem().string();
    if (n.find("default") != std::string::npos) return 0;
    if (n.find("_cpu") != std::string::npos) return 1;
    if (n.find("gpushare") != std::string::npos) return 2;
    if (n.find("gpuspec") != std::string::npos) return 3;
    if (n.find("multigpu") != std::string::npos) return 4;
    return 5;
  };
  std::sort(out.begin(), out.end(), [&](const std::string& a, const std::string& b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a < b;
  });
  return out;
}

void runFgd(const FgdArgs& a) {
  std::string data = defaultTraceDir();
  std::string nodes_path =
      a.nodes.empty() ? data + "/alibaba-gpu-v2023/openb_node_list_gpu_node.csv" : a.nodes;
  std::string pods_path =
      a.pods.empty() ? data + "/alibaba-gpu-v2023/openb_pod_list_default.csv" : a.pods;
  auto nodes = readOpenbNodes(nodes_path);
  if (!nodes.ok()) fail(nodes.status());
  auto seeds = parseSeeds(a.seeds);
  if (!seeds.ok()) fail(seeds.status());
  std::vector<std::string> policies = policyList(a.policy);
  if (a.compare && a.policy == "all") {
    policies.assign(sched::policyNames().begin(), sched::policyNames().end());
  }
  std::vector<std::string> files;
  if (a.variants) {
    files = variantFiles(std::filesystem::path(pods_path).parent_path().string());
    if (files.empty()) fail(Status::notFound("no openb_pod_list_*.csv next to " + pods_path));
  } else {
    files.push_back(pods_path);
  }
  std::vector<PolicyResult> all;
  bool show_progress = !a.no_progress && ::isatty(2) != 0;
  for (size_t f = 0; f < files.size(); ++f) {
    auto workload = loadWorkload(files[f]);
    if (!workload.ok()) fail(workload.status());
    std::string label = workload->name;
    if (files.size() > 1) {
      label = "[" + std::to_string(f + 1) + "/" + std::to_string(files.size()) + "] " + label;
    }
    ProgressBar bar(label, show_progress);
    FgdOptions options;
    options.tune = a.tune;
    options.threads = a.threads;
    options.progress = [&bar](size_t done, size_t total) { bar.update(done, total); };
    auto results = runPolicies(*nodes, *workload, policies, *seeds, options);
    bar.finish();
    if (!results.ok()) fail(results.status());
    for (auto& r : *results) {
      if (a.json) {
        std::printf("%s\n", toJsonLine(r).c_str());
        std::fflush(stdout);
      }
      all.push_back(std::move(r));
    }
  }
  std::vector<PublishedRow> published;
  if (a.compare || a.variants) {
    std::string pub_path =
        a.published.empty() ? data + "/fgd-atc23-openb/summary_mean_over_seeds.csv" : a.published;
    auto rows = readPublishedSummary(pub_path);
    if (!rows.ok()) fail(rows.status());
    published = std::move(*rows);
  }
  if (a.variants) {
    // Per workload and policy at 100% and 130% (the long per-level table would be 23 x 7 rows).
    std::fprintf(a.json ? stderr : stdout, "%s", formatVariantsTable(all, published).c_str());
  } else if (!a.json) {
    std::printf("%s", formatTable(all).c_str());
  }
  if (!a.svg.empty()) {
    std::string svg = a.variants ? variantsSvg(all, "GPU allocation per openb workload and policy")
                                 : allocationSvg(all, "GPU allocation vs arrived load: " +
                                                          (files.size() == 1 ? all.front().workload
                                                                             : std::string("all")));
    Status s = writeFile(a.svg, svg);
    if (!s.isOk()) fail(s);
  }
  if (!a.frag_svg.empty()) {
    Status s = writeFile(a.frag_svg, fragmentationSvg(all, "FGD fragmentation"));
    if (!s.isOk()) fail(s);
  }
  if (a.compare) {
    bool ok = false;
    std::string text = formatComparison(all, published, a.tolerance, &ok);
    std::fprintf(a.json ? stderr : stdout, "\n%s", text.c_str());
    if (!ok) throw CLI::RuntimeError(1);
  }
}

}  // namespace

void registerSimFgdCommand(CLI::App& sim) {
  auto args = std::make_shared<FgdArgs>();
  auto* fgd = sim.add_subcommand(
      "fgd",
      "FGD-mode replay (ATC'23): arrival-only, shuffled per seed, topped up to --tune x GPU "
      "capacity; allocation % at arrived 80..130% per policy");
  fgd->add_option("--pods", args->pods, "Pod list CSV (default: bundled openb_pod_list_default)");
  fgd->add_option("--nodes", args->nodes,
                  "Node list CSV (default: bundled openb_node_list_gpu_node, 1,213 nodes)");
  fgd->add_option("--policy", args->policy,
                  "Policy name, comma list, or all (Random, DotProd, GpuClustering, GpuPacking, "
                  "BestFit, FGD, gpool)")
      ->capture_default_str();
  fgd->add_option("--seeds", args->seeds, "Seeds, e.g. 42-51 or 42,43")->capture_default_str();
  fgd->add_option("--tune", args->tune, "Top-up target, x GPU capacity")->capture_default_str();
  fgd->add_option("--threads", args->threads, "Worker threads (runs are split by seed)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  fgd->add_flag("--json", args->json, "One JSON object per line per (workload, policy)");
  fgd->add_option("--svg", args->svg, "Write allocation vs arrived load plot (SVG) here");
  fgd->add_option("--frag-svg", args->frag_svg, "Write the fragmentation bar chart (SVG) here");
  fgd->add_flag("--compare", args->compare,
                "Print the published means (17 workloads x 6 policies) side by side (exit code 1 "
                "if a published policy is off by more than --tolerance at 100% or 130%)");
  fgd->add_option("--published", args->published,
                  "Published summary CSV (default: bundled fgd-atc23-openb/"
                  "summary_mean_over_seeds.csv)");
  fgd->add_option("--tolerance", args->tolerance, "Comparison tolerance, percentage points")
      ->capture_default_str();
  fgd->add_flag("--variants", args->variants,
                "Run every openb_pod_list_*.csv next to --pods (cpu*, gpushare*, gpuspec*, "
                "multigpu*): one Markdown table of alloc % at 100% and 130% per workload and "
                "policy, with the published FGD and gpool - FGD; --svg draws it as a dot plot");
  fgd->add_flag("--no-progress", args->no_progress, "No progress bar on stderr");
  fgd->callback([args] { runFgd(*args); });
}

}  // namespace gpool::cli
