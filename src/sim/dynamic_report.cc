#include "sim/dynamic_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

namespace gpool::sim {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string general(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string xmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};

using Series = ChartSeries;

// A minimal line chart: axes with ticks, one polyline per series, a legend.
std::string lineChart(const std::string& title, const std::string& xlabel,
                      const std::string& ylabel, const std::vector<Series>& series, bool log_x) {
  const double W = 760, H = 420, L = 70, R = 180, T = 40, B = 50;
  double xmin = std::numeric_limits<double>::max(), xmax = std::numeric_limits<double>::lowest();
  double ymin = 0, ymax = 0;
  for (const Series& s : series) {
    for (auto [x, y] : s.points) {
      if (log_x && x <= 0) continue;
      double xv = log_x ? std::log10(x) : x;
      xmin = std::min(xmin, xv);
      xmax = std::max(xmax, xv);
      ymax = std::max(ymax, y);
    }
  }
  if (xmin > xmax) xmin = 0, xmax = 1;
  if (xmax == xmin) xmax = xmin + 1;
  if (ymax <= ymin) ymax = ymin + 1;
  ymax *= 1.05;
  auto px = [&](double x) { return L + (x - xmin) / (xmax - xmin) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - ymin) / (ymax - ymin) * (H - T - B); };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(W, 0) +
                    "\" height=\"" + fixed(H, 0) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fixed(W / 2, 0) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
         xmlEscape(title) + "</text>\n";
  svg += "<line x1=\"" + fixed(L, 1) + "\" y1=\"" + fixed(H - B, 1) + "\" x2=\"" + fixed(W - R, 1) +
         "\" y2=\"" + fixed(H - B, 1) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + fixed(L, 1) + "\" y1=\"" + fixed(T, 1) + "\" x2=\"" + fixed(L, 1) +
         "\" y2=\"" + fixed(H - B, 1) + "\" stroke=\"black\"/>\n";
  for (int k = 0; k <= 5; ++k) {
    double xv = xmin + (xmax - xmin) * k / 5.0;
    double yv = ymin + (ymax - ymin) * k / 5.0;
    std::string xl = log_x ? humanSeconds(std::pow(10.0, xv)) : general(xv, 4);
    svg += "<text x=\"" + fixed(px(xv), 1) + "\" y=\"" + fixed(H - B + 16, 1) +
           "\" text-anchor=\"middle\">" + xmlEscape(xl) + "</text>\n";
    svg += "<text x=\"" + fixed(L - 6, 1) + "\" y=\"" + fixed(py(yv) + 4, 1) +
           "\" text-anchor=\"end\">" + general(yv, 4) + "</text>\n";
    svg += "<line x1=\"" + fixed(L, 1) + "\" y1=\"" + fixed(py(yv), 1) + "\" x2=\"" +
           fixed(W - R, 1) + "\" y2=\"" + fixed(py(yv), 1) + "\" stroke=\"#eee\"/>\n";
  }
  svg += "<text x=\"" + fixed((L + W - R) / 2, 1) + "\" y=\"" + fixed(H - 12, 1) +
         "\" text-anchor=\"middle\">" + xmlEscape(xlabel) + "</text>\n";
  svg += "<text transform=\"translate(16," + fixed((T + H - B) / 2, 1) +
         ") rotate(-90)\" text-anchor=\"middle\">" + xmlEscape(ylabel) + "</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    std::string pts;
    for (auto [x, y] : series[i].points) {
      if (log_x && x <= 0) continue;
      double xv = log_x ? std::log10(x) : x;
      pts += fixed(px(xv), 1) + "," + fixed(py(y), 1) + " ";
    }
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(color) +
           "\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
    double ly = T + 16 + 18 * static_cast<double>(i);
    svg += "<line x1=\"" + fixed(W - R + 10, 1) + "\" y1=\"" + fixed(ly - 4, 1) + "\" x2=\"" +
           fixed(W - R + 30, 1) + "\" y2=\"" + fixed(ly - 4, 1) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + fixed(W - R + 35, 1) + "\" y=\"" + fixed(ly, 1) + "\">" +
           xmlEscape(series[i].label) + "</text>\n";
  }
  return svg + "</svg>\n";
}

std::vector<Series> timeSeries(const std::vector<DynamicResult>& results,
                               const std::function<double(const TimelinePoint&)>& value) {
  std::vector<Series> out;
  for (const DynamicResult& r : results) {
    Series s;
    s.label = r.policy + " " + r.mode;
    for (const TimelinePoint& p : r.timeline) {
      s.points.emplace_back(static_cast<double>(p.t) / 3600.0, value(p));
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string padToWidth(const std::string& s, size_t width, bool right) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string lineChartSvg(const std::string& title, const std::string& xlabel,
                         const std::string& ylabel, const std::vector<ChartSeries>& series,
                         bool log_x) {
  return lineChart(title, xlabel, ylabel, series, log_x);
}

std::string humanSeconds(double s) {
  if (s < 120) return fixed(s, 0) + "s";
  if (s < 7200) return fixed(s / 60, 0) + "m";
  if (s < 172800) return fixed(s / 3600, 1) + "h";
  return fixed(s / 86400, 1) + "d";
}

std::string formatDynamicTable(const std::vector<DynamicResult>& results) {
  std::string out;
  if (results.empty()) return out;
  out += "workload " + results[0].workload + ", placement " + results[0].placement + "\n";
  out += padToWidth("policy", 10, false) + padToWidth("mode", 10, false) + padToWidth("jobs", 7) +
         padToWidth("done", 7) + padToWidth("avg JCT", 9) + padToWidth("p50 JCT", 9) +
         padToWidth("p99 JCT", 9) + padToWidth("avg wait", 9) + padToWidth("p50 wait", 9) +
         padToWidth("p99 wait", 9) + padToWidth("alloc%", 8) + padToWidth("used%", 7) +
         padToWidth("Jain", 6) + padToWidth("preempt", 8) + padToWidth("wall", 7) + "\n";
  for (const DynamicResult& r : results) {
    out += padToWidth(r.policy, 10, false) + padToWidth(r.mode, 10, false) +
           padToWidth(std::to_string(r.jobs), 7) + padToWidth(std::to_string(r.finished), 7) +
           padToWidth(humanSeconds(r.jct_avg_s), 9) + padToWidth(humanSeconds(r.jct_p50_s), 9) +
           padToWidth(humanSeconds(r.jct_p99_s), 9) + padToWidth(humanSeconds(r.queue_avg_s), 9) +
           padToWidth(humanSeconds(r.queue_p50_s), 9) + padToWidth(humanSeconds(r.queue_p99_s), 9) +
           padToWidth(fixed(r.alloc_pct, 1), 8) + padToWidth(fixed(r.used_pct, 1), 7) +
           padToWidth(fixed(r.jain, 3), 6) + padToWidth(std::to_string(r.preemptions), 8) +
           padToWidth(fixed(r.wall_s, 1) + "s", 7) + "\n";
  }
  const DynamicResult& f = results[0];
  out +=
      "JCT = finish - submit; wait = JCT - run time; alloc% = GPU compute allocated, used% = "
      "compute asked for, both time-averaged over the arrival window; Jain over " +
      std::to_string(f.groups) + " groups of mean(run time / JCT)";
  if (f.skipped) out += "; " + std::to_string(f.skipped) + " jobs larger than the cluster skipped";
  out += "\n";
  return out;
}

std::string dynamicJsonLine(const DynamicResult& r) {
  auto num = [](double v) { return std::isfinite(v) ? general(v, 6) : std::string("null"); };
  std::string s = "{";
  s += "\"workload\":" + jsonString(r.workload);
  s += ",\"policy\":" + jsonString(r.policy);
  s += ",\"mode\":" + jsonString(r.mode);
  s += ",\"placement\":" + jsonString(r.placement);
  s += ",\"jobs\":" + std::to_string(r.jobs);
  s += ",\"finished\":" + std::to_string(r.finished);
  s += ",\"skipped\":" + std::to_string(r.skipped);
  s += ",\"unfinished\":" + std::to_string(r.unfinished);
  s += ",\"jct_avg_s\":" + num(r.jct_avg_s);
  s += ",\"jct_p50_s\":" + num(r.jct_p50_s);
  s += ",\"jct_p99_s\":" + num(r.jct_p99_s);
  s += ",\"queue_avg_s\":" + num(r.queue_avg_s);
  s += ",\"queue_p50_s\":" + num(r.queue_p50_s);
  s += ",\"queue_p95_s\":" + num(r.queue_p95_s);
  s += ",\"queue_p99_s\":" + num(r.queue_p99_s);
  s += ",\"util_pct\":" + num(r.alloc_pct);
  s += ",\"used_pct\":" + num(r.used_pct);
  s += ",\"jain_fairness\":" + num(r.jain);
  s += ",\"groups\":" + std::to_string(r.groups);
  s += ",\"preemptions\":" + std::to_string(r.preemptions);
  s += ",\"passes\":" + std::to_string(r.passes);
  s += ",\"pass_ms_avg\":" + num(r.pass_ms_avg);
  s += ",\"makespan_s\":" + std::to_string(r.makespan_s);
  s += ",\"wall_s\":" + num(r.wall_s);
  return s + "}";
}

std::string utilisationSvg(const std::vector<DynamicResult>& results, const std::string& title) {
  return lineChart(title, "simulated time (hours)", "GPU allocation (%)",
                   timeSeries(results, [](const TimelinePoint& p) { return p.alloc_pct; }), false);
}

std::string queueSvg(const std::vector<DynamicResult>& results, const std::string& title) {
  return lineChart(
      title, "simulated time (hours)", "pending jobs",
      timeSeries(results, [](const TimelinePoint& p) { return static_cast<double>(p.queue); }),
      false);
}

std::string jctCdfSvg(const std::vector<DynamicResult>& results, const std::string& title) {
  std::vector<Series> series;
  for (const DynamicResult& r : results) {
    Series s;
    s.label = r.policy + " " + r.mode;
    const size_t n = r.jcts.size();
    const size_t step = std::max<size_t>(1, n / 400);
    for (size_t i = 0; i < n; i += step) {
      s.points.emplace_back(r.jcts[i], 100.0 * static_cast<double>(i + 1) / static_cast<double>(n));
    }
    if (n) s.points.emplace_back(r.jcts.back(), 100.0);
    series.push_back(std::move(s));
  }
  return lineChart(title, "job completion time (log scale)", "jobs finished (%)", series, true);
}

}  // namespace gpool::sim
