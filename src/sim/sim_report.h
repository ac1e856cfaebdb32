#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/fgd_replay.h"

// Output of the FGD-mode simulator: a terminal table, one JSON object per line, an SVG plot of
// allocation vs arrived load, and the side-by-side comparison with the published numbers.
namespace gpool::sim {

// "Workload  Policy  seeds  80 90 95 100 110 120 130  std@130  frag@100  failed".
std::string formatTable(const std::vector<PolicyResult>& results);

// One line: {"workload":..,"policy":..,"seeds":N,"alloc_pct":{"80":..,...},
// "alloc_std_at_130":..,"frag_pct":{...},"failed_pods":..}.
std::string toJsonLine(const PolicyResult& result);

// A line chart of mean allocation % (y) against arrived % (x, 0..130) per policy, with the
// ideal y = min(x, 100) as a dashed reference. Written without any plotting dependency.
std::string allocationSvg(const std::vector<PolicyResult>& results, const std::string& title);
// Grouped bars of mean fragmentation (% of capacity) at the report levels, per policy.
std::string fragmentationSvg(const std::vector<PolicyResult>& results, const std::string& title);

Status writeFile(const std::string& path, const std::string& content);

// The published means (summary_mean_over_seeds.csv): workload, policy (without the "06-"
// prefix), mean allocation at the report levels.
struct PublishedRow {
  std::string workload;
  std::string policy;
  std::vector<double> alloc;  // kReportLevels order
};
Result<std::vector<PublishedRow>> readPublishedSummary(const std::string& path);

// One line per result: published and measured allocation at 100% and 130% with the
// difference; `ok_out` is set when at least one result has a published row and every result
// that has one is within `tolerance_pp` at both levels.
std::string formatComparison(const std::vector<PolicyResult>& results,
                             const std::vector<PublishedRow>& published, double tolerance_pp,
                             bool* ok_out);

// The variants table (`gpool sim fgd --variants`), in Markdown: one row per workload (in the
// order of `results`), per policy its mean allocation % at 100% and 130% arrived, then the
// published FGD means where `published` has them, and gpool minus FGD (ours) at both levels
// when both ran. A last line counts the workloads where gpool is at or above FGD at both.
std::string formatVariantsTable(const std::vector<PolicyResult>& results,
                                const std::vector<PublishedRow>& published);
// The same as a dot plot: one row per workload, x = allocation %, one colour per policy,
// filled dots at 100% arrived and rings at 130%.
std::string variantsSvg(const std::vector<PolicyResult>& results, const std::string& title);

// A one-line progress bar on stderr, redrawn in place ("[#####.....] 12/70 runs").
class ProgressBar {
 public:
  explicit ProgressBar(std::string label, bool enabled)
      : label_(std::move(label)), enabled_(enabled) {}
  void update(size_t done, size_t total);
  void finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace gpool::sim
