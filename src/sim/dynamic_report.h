#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/dynamic_replay.h"

// Output of `gpool sim dynamic`: a terminal table, one JSON object per line, and SVG plots
// (written by hand: no plotting library).
namespace gpool::sim {

// One row per (policy, mode) with JCT, queueing delay, utilisation and fairness.
std::string formatDynamicTable(const std::vector<DynamicResult>& results);

// One line of JSON (no trailing newline) with the keys documented in docs/scheduler-policy.md:
// workload, policy, mode, placement, jobs, finished, skipped, unfinished, jct_avg_s, jct_p50_s,
// jct_p99_s, queue_avg_s, queue_p50_s, queue_p95_s, queue_p99_s, util_pct, used_pct, jain_fairness,
// groups, preemptions, passes, pass_ms_avg, makespan_s, wall_s.
std::string dynamicJsonLine(const DynamicResult& result);

// Line charts over simulated time (hours): GPU allocation %, queue length; and the JCT CDF
// (log-scaled seconds). One line per result.
std::string utilisationSvg(const std::vector<DynamicResult>& results, const std::string& title);
std::string queueSvg(const std::vector<DynamicResult>& results, const std::string& title);
std::string jctCdfSvg(const std::vector<DynamicResult>& results, const std::string& title);

// One line of a chart: (x, y) points in drawing order and a legend label.
struct ChartSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

// A line chart as a standalone SVG document: axes with 6 ticks each (y from 0), one polyline per
// series, a legend on the right; `log_x` draws x on a log10 scale (points with x <= 0 dropped).
std::string lineChartSvg(const std::string& title, const std::string& xlabel,
                         const std::string& ylabel, const std::vector<ChartSeries>& series,
                         bool log_x);

// "1h 02m", "3.2d": a short human form of a duration in seconds.
std::string humanSeconds(double seconds);

// `s` padded with spaces to `width` columns, on the left (`right`-aligned) or the right; a longer
// `s` is returned as it is.
std::string padToWidth(const std::string& s, size_t width, bool right = true);

// `s` as a JSON string literal, quotes included (", \ and control characters escaped).
std::string jsonString(const std::string& s);

}  // namespace gpool::sim
