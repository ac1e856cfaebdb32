#include "sim/sim_report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace gpool::sim {

namespace {

__attribute__((format(printf, 1, 2))) std::string fmt(const char* format, ...) {
  char buf[128];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt("\\u%04x", static_cast<unsigned char>(c));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string xmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

const char* kColors[] = {"#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c",
                         "#9467bd", "#d62728", "#17becf", "#8c564b"};

}  // namespace

std::string formatTable(const std::vector<PolicyResult>& results) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-32s %-14s %5s", "WORKLOAD", "POLICY", "SEEDS");
  out << line;
  for (int l : kReportLevels) {
    std::snprintf(line, sizeof(line), " %6s", (std::to_string(l) + "%").c_str());
    out << line;
  }
  out << "  STD@130 FRAG@100  FAILED\n";
  for (const auto& r : results) {
    std::snprintf(line, sizeof(line), "%-32s %-14s %5zu", r.workload.c_str(), r.policy.c_str(),
                  r.runs.size());
    out << line;
    for (int l : kReportLevels)
      out << fmt(" %6.2f", r.meanAlloc(l));
    size_t i100 = static_cast<size_t>(std::find(kReportLevels.begin(), kReportLevels.end(), 100) -
                                      kReportLevels.begin());
    out << fmt("  %7.2f", r.stdAlloc(130)) << fmt(" %8.2f", r.meanFrag(i100))
        << fmt(" %7.0f", r.meanFailed()) << "\n";
  }
  return out.str();
}

std::string toJsonLine(const PolicyResult& r) {
  std::ostringstream out;
  out << "{\"workload\":\"" << jsonEscape(r.workload) << "\",\"policy\":\"" << jsonEscape(r.policy)
      << "\",\"seeds\":" << r.runs.size() << ",\"alloc_pct\":{";
  for (size_t i = 0; i < kReportLevels.size(); ++i) {
    out << (i ? "," : "") << "\"" << kReportLevels[i]
        << "\":" << fmt("%.4f", r.meanAlloc(kReportLevels[i]));
  }
  out << "},\"alloc_std_at_130\":" << fmt("%.4f", r.stdAlloc(130)) << ",\"frag_pct\":{";
  for (size_t i = 0; i < kReportLevels.size(); ++i) {
    out << (i ? "," : "") << "\"" << kReportLevels[i] << "\":" << fmt("%.4f", r.meanFrag(i));
  }
  out << "},\"failed_pods\":" << fmt("%.1f", r.meanFailed()) << ",\"seed_list\":[";
  for (size_t i = 0; i < r.runs.size(); ++i)
    out << (i ? "," : "") << r.runs[i].seed;
  out << "]}";
  return out.str();
}

std::string allocationSvg(const std::vector<PolicyResult>& results, const std::string& title) {
  const double w = 760, h = 480, left = 60, right = 170, top = 40, bottom = 50;
  const double pw = w - left - right, ph = h - top - bottom;
  auto x = [&](double v) { return left + v / kMaxLevel * pw; };
  auto y = [&](double v) { return top + ph - v / 100.0 * ph; };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << left << "\" y=\"24\" font-size=\"15\">" << xmlEscape(title) << "</text>\n";
  for (int v = 0; v <= 100; v += 20) {
    s << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << y(v) << "\" y2=\""
      << y(v) << "\" stroke=\"#ddd\"/>\n";
    s << "<text x=\"" << left - 8 << "\" y=\"" << y(v) + 4 << "\" text-anchor=\"end\">" << v
      << "</text>\n";
  }
  for (int v = 0; v <= kMaxLevel; v += 10) {
    s << "<text x=\"" << x(v) << "\" y=\"" << top + ph + 18 << "\" text-anchor=\"middle\">" << v
      << "</text>\n";
  }
  s << "<text x=\"" << left + pw / 2 << "\" y=\"" << h - 10
    << "\" text-anchor=\"middle\">arrived GPU request (% of capacity)</text>\n";
  s << "<text transform=\"translate(16," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">GPU allocation (%)</text>\n";
  s << "<polyline fill=\"none\" stroke=\"#000\" stroke-dasharray=\"4,4\" points=\"" << x(0) << ","
    << y(0) << " " << x(100) << "," << y(100) << " " << x(kMaxLevel) << "," << y(100) << "\"/>\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.6\" points=\"";
    for (int l = 0; l <= kMaxLevel; ++l) {
      s << fmt("%.1f", x(l)) << "," << fmt("%.1f", y(results[i].meanAlloc(l))) << " ";
    }
    s << "\"/>\n";
    double ly = top + 14 + 18.0 * static_cast<double>(i);
    s << "<line x1=\"" << left + pw + 12 << "\" x2=\"" << left + pw + 32 << "\" y1=\"" << ly - 4
      << "\" y2=\"" << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
    s << "<text x=\"" << left + pw + 38 << "\" y=\"" << ly << "\">" << xmlEscape(results[i].policy)
      << fmt(" %.2f%%", results[i].meanAlloc(kMaxLevel)) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

std::string fragmentationSvg(const std::vector<PolicyResult>& results, const std::string& title) {
  const double w = 760, h = 420, left = 60, right = 170, top = 40, bottom = 50;
  const double pw = w - left - right, ph = h - top - bottom;
  double max_v = 1;
  for (const auto& r : results) {
    for (size_t i = 0; i < kReportLevels.size(); ++i)
      max_v = std::max(max_v, r.meanFrag(i));
  }
  max_v = std::ceil(max_v / 5) * 5;
  auto y = [&](double v) { return top + ph - v / max_v * ph; };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << left << "\" y=\"24\" font-size=\"15\">" << xmlEscape(title) << "</text>\n";
  for (double v = 0; v <= max_v + 1e-9; v += max_v / 5) {
    s << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << y(v) << "\" y2=\""
      << y(v) << "\" stroke=\"#ddd\"/>\n";
    s << "<text x=\"" << left - 8 << "\" y=\"" << y(v) + 4 << "\" text-anchor=\"end\">"
      << fmt("%.0f", v) << "</text>\n";
  }
  const double group = pw / static_cast<double>(kReportLevels.size());
  const double bar = group * 0.8 / static_cast<double>(std::max<size_t>(results.size(), 1));
  for (size_t l = 0; l < kReportLevels.size(); ++l) {
    double gx = left + group * static_cast<double>(l) + group * 0.1;
    s << "<text x=\"" << gx + group * 0.4 << "\" y=\"" << top + ph + 18
      << "\" text-anchor=\"middle\">" << kReportLevels[l] << "%</text>\n";
    for (size_t i = 0; i < results.size(); ++i) {
      double v = results[i].meanFrag(l);
      s << "<rect x=\"" << fmt("%.1f", gx + bar * static_cast<double>(i)) << "\" y=\""
        << fmt("%.1f", y(v)) << "\" width=\"" << fmt("%.1f", bar) << "\" height=\""
        << fmt("%.1f", top + ph - y(v)) << "\" fill=\""
        << kColors[i % (sizeof(kColors) / sizeof(kColors[0]))] << "\"/>\n";
    }
  }
  s << "<text x=\"" << left + pw / 2 << "\" y=\"" << h - 10
    << "\" text-anchor=\"middle\">arrived GPU request (% of capacity)</text>\n";
  s << "<text transform=\"translate(16," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">fragmented GPU (% of capacity)</text>\n";
  for (size_t i = 0; i < results.size(); ++i) {
    double ly = top + 14 + 18.0 * static_cast<double>(i);
    s << "<rect x=\"" << left + pw + 12 << "\" y=\"" << ly - 10
      << "\" width=\"14\" height=\"10\" fill=\""
      << kColors[i % (sizeof(kColors) / sizeof(kColors[0]))] << "\"/>\n";
    s << "<text x=\"" << left + pw + 32 << "\" y=\"" << ly << "\">" << xmlEscape(results[i].policy)
      << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

Status writeFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::ioError("cannot write " + path);
  out << content;
  if (!out) return Status::ioError("write failed for " + path);
  return Status::ok();
}

Result<std::vector<PublishedRow>> readPublishedSummary(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::ioError("cannot open published summary " + path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  {
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ','))
      header.push_back(c);
  }
  std::vector<size_t> cols;
  for (int l : kReportLevels) {
    auto it = std::find(header.begin(), header.end(), "alloc_pct_at_" + std::to_string(l));
    if (it == header.end()) {
      return Status::invalidArgument(path + ": header lacks alloc_pct_at_" + std::to_string(l));
    }
    cols.push_back(static_cast<size_t>(it - header.begin()));
  }
  std::vector<PublishedRow> out;
  size_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ','))
      f.push_back(c);
    if (f.size() < header.size()) {
      return Status::invalidArgument(path + ":" + std::to_string(lineno) + ": short row");
    }
    PublishedRow row;
    row.workload = f[0];
    row.policy = f[1];
    size_t dash = row.policy.find('-');
    if (dash != std::string::npos) row.policy = row.policy.substr(dash + 1);
    try {
      for (size_t col : cols)
        row.alloc.push_back(std::stod(f[col]));
    } catch (const std::exception&) {
      return Status::invalidArgument(path + ":" + std::to_string(lineno) + ": bad number");
    }
    out.push_back(std::move(row));
  }
  return out;
}

namespace {

// Workloads and policies of `results` in first-seen order, and the result for a pair.
struct VariantGrid {
  std::vector<std::string> workloads, policies;
  const PolicyResult* at(const std::vector<PolicyResult>& results, const std::string& w,
                         const std::string& p) const {
    for (const PolicyResult& r : results) {
      if (r.workload == w && r.policy == p) return &r;
    }
    return nullptr;
  }
};

VariantGrid gridOf(const std::vector<PolicyResult>& results) {
  VariantGrid g;
  for (const PolicyResult& r : results) {
    if (std::find(g.workloads.begin(), g.workloads.end(), r.workload) == g.workloads.end()) {
      g.workloads.push_back(r.workload);
    }
    if (std::find(g.policies.begin(), g.policies.end(), r.policy) == g.policies.end()) {
      g.policies.push_back(r.policy);
    }
  }
  return g;
}

std::string shortWorkload(const std::string& w) {
  const std::string prefix = "openb_pod_list_";
  return w.rfind(prefix, 0) == 0 ? w.substr(prefix.size()) : w;
}

}  // namespace

std::string formatVariantsTable(const std::vector<PolicyResult>& results,
                                const std::vector<PublishedRow>& published) {
  VariantGrid g = gridOf(results);
  const size_t i100 = static_cast<size_t>(
      std::find(kReportLevels.begin(), kReportLevels.end(), 100) - kReportLevels.begin());
  const size_t i130 = kReportLevels.size() - 1;
  const bool has_pair =
      std::find(g.policies.begin(), g.policies.end(), "gpool") != g.policies.end() &&
      std::find(g.policies.begin(), g.policies.end(), "FGD") != g.policies.end();
  std::ostringstream out;
  out << "| workload (seeds) |";
  for (const std::string& p : g.policies)
    out << " " << p << " 100% | " << p << " 130% |";
  out << " published FGD 100% | published FGD 130% |";
  if (has_pair) out << " gpool - FGD 100% | gpool - FGD 130% |";
  out << "\n|---|";
  size_t cols = 2 * g.policies.size() + 2 + (has_pair ? 2 : 0);
  for (size_t c = 0; c < cols; ++c)
    out << "---|";
  out << "\n";
  size_t at_or_above = 0, pairs = 0;
  for (const std::string& w : g.workloads) {
    size_t seeds = 0;
    for (const std::string& p : g.policies) {
      if (const PolicyResult* r = g.at(results, w, p)) seeds = std::max(seeds, r->runs.size());
    }
    out << "| " << shortWorkload(w) << " (" << seeds << ") |";
    for (const std::string& p : g.policies) {
      const PolicyResult* r = g.at(results, w, p);
      if (r == nullptr) {
        out << " - | - |";
      } else {
        out << fmt(" %.2f | %.2f |", r->meanAlloc(100), r->meanAlloc(130));
      }
    }
    const PublishedRow* pub = nullptr;
    for (const PublishedRow& row : published) {
      if (row.workload == w && row.policy == "FGD") pub = &row;
    }
    if (pub != nullptr) {
      out << fmt(" %.2f | %.2f |", pub->alloc[i100], pub->alloc[i130]);
    } else {
      out << " - | - |";
    }
    if (has_pair) {
      const PolicyResult* mine = g.at(results, w, "gpool");
      const PolicyResult* fgd = g.at(results, w, "FGD");
      if (mine != nullptr && fgd != nullptr) {
        double d100 = mine->meanAlloc(100) - fgd->meanAlloc(100);
        double d130 = mine->meanAlloc(130) - fgd->meanAlloc(130);
        ++pairs;
        if (d100 >= 0 && d130 >= 0) ++at_or_above;
        out << fmt(" %+.2f | %+.2f |", d100, d130);
      } else {
        out << " - | - |";
      }
    }
    out << "\n";
  }
  if (has_pair) {
    out << "\ngpool at or above FGD at both 100% and 130% on " << at_or_above << " of " << pairs
        << " workloads\n";
  }
  return out.str();
}

std::string variantsSvg(const std::vector<PolicyResult>& results, const std::string& title) {
  VariantGrid g = gridOf(results);
  double lo = 100;
  for (const PolicyResult& r : results)
    lo = std::min({lo, r.meanAlloc(100), r.meanAlloc(130)});
  lo = std::floor(lo / 5.0) * 5.0;
  const double row_h = 18, left = 120, right = 150, top = 50, bottom = 46, w = 820;
  const double h = top + bottom + row_h * static_cast<double>(g.workloads.size());
  const double pw = w - left - right;
  auto x = [&](double v) { return left + (v - lo) / (100.0 - lo) * pw; };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << left << "\" y=\"24\" font-size=\"15\">" << xmlEscape(title) << "</text>\n";
  for (double v = lo; v <= 100.0 + 1e-9; v += 5) {
    s << "<line x1=\"" << fmt("%.1f", x(v)) << "\" x2=\"" << fmt("%.1f", x(v)) << "\" y1=\""
      << top - 6 << "\" y2=\"" << h - bottom << "\" stroke=\"#ddd\"/>\n";
    s << "<text x=\"" << fmt("%.1f", x(v)) << "\" y=\"" << h - bottom + 16
      << "\" text-anchor=\"middle\">" << fmt("%.0f", v) << "</text>\n";
  }
  s << "<text x=\"" << left + pw / 2 << "\" y=\"" << h - 10
    << "\" text-anchor=\"middle\">GPU allocation (%): filled at 100% arrived, ring at "
       "130%</text>\n";
  for (size_t wi = 0; wi < g.workloads.size(); ++wi) {
    double cy = top + row_h * (static_cast<double>(wi) + 0.5);
    s << "<text x=\"" << left - 8 << "\" y=\"" << fmt("%.1f", cy + 4) << "\" text-anchor=\"end\">"
      << xmlEscape(shortWorkload(g.workloads[wi])) << "</text>\n";
    for (size_t pi = 0; pi < g.policies.size(); ++pi) {
      const PolicyResult* r = g.at(results, g.workloads[wi], g.policies[pi]);
      if (r == nullptr) continue;
      const char* color = kColors[pi % (sizeof(kColors) / sizeof(kColors[0]))];
      s << "<circle cx=\"" << fmt("%.1f", x(r->meanAlloc(100))) << "\" cy=\"" << fmt("%.1f", cy)
        << "\" r=\"3.5\" fill=\"" << color << "\"/>\n";
      s << "<circle cx=\"" << fmt("%.1f", x(r->meanAlloc(130))) << "\" cy=\"" << fmt("%.1f", cy)
        << "\" r=\"4.5\" fill=\"none\" stroke=\"" << color << "\"/>\n";
    }
  }
  for (size_t pi = 0; pi < g.policies.size(); ++pi) {
    const char* color = kColors[pi % (sizeof(kColors) / sizeof(kColors[0]))];
    double ly = top + 18.0 * static_cast<double>(pi);
    s << "<circle cx=\"" << left + pw + 20 << "\" cy=\"" << ly - 4 << "\" r=\"4\" fill=\"" << color
      << "\"/>\n";
    s << "<text x=\"" << left + pw + 30 << "\" y=\"" << ly << "\">" << xmlEscape(g.policies[pi])
      << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

std::string formatComparison(const std::vector<PolicyResult>& results,
                             const std::vector<PublishedRow>& published, double tolerance_pp,
                             bool* ok_out) {
  std::ostringstream out;
  bool ok = true;
  size_t compared = 0;
  char line[512];
  std::snprintf(line, sizeof(line), "%-28s %-14s %5s | %-23s | %-23s | %s\n", "WORKLOAD", "POLICY",
                "SEEDS", "alloc% @100: pub   ours", "alloc% @130: pub   ours", "WITHIN");
  out << line;
  size_t i100 = static_cast<size_t>(std::find(kReportLevels.begin(), kReportLevels.end(), 100) -
                                    kReportLevels.begin());
  size_t i130 = kReportLevels.size() - 1;
  for (const auto& r : results) {
    const PublishedRow* pub = nullptr;
    for (const auto& p : published) {
      if (p.workload == r.workload && p.policy == r.policy) pub = &p;
    }
    double m100 = r.meanAlloc(100), m130 = r.meanAlloc(130);
    if (!pub) {
      std::snprintf(line, sizeof(line),
                    "%-28s %-14s %5zu |    -    %6.2f         |    -    %6.2f         | %s\n",
                    r.workload.c_str(), r.policy.c_str(), r.runs.size(), m100, m130,
                    "(not published)");
      out << line;
      continue;
    }
    double d100 = m100 - pub->alloc[i100], d130 = m130 - pub->alloc[i130];
    bool within = std::fabs(d100) <= tolerance_pp && std::fabs(d130) <= tolerance_pp;
    ok = ok && within;
    ++compared;
    std::snprintf(line, sizeof(line),
                  "%-28s %-14s %5zu | %6.2f %6.2f (%+5.2f) | %6.2f %6.2f (%+5.2f) | %s\n",
                  r.workload.c_str(), r.policy.c_str(), r.runs.size(), pub->alloc[i100], m100, d100,
                  pub->alloc[i130], m130, d130, within ? "yes" : "NO");
    out << line;
  }
  std::snprintf(line, sizeof(line), "%zu published results compared, tolerance %.2f pp: %s\n",
                compared, tolerance_pp, compared > 0 && ok ? "all within" : "NOT all within");
  out << line;
  if (ok_out) *ok_out = compared > 0 && ok;
  return out.str();
}

void ProgressBar::update(size_t done, size_t total) {
  if (!enabled_ || total == 0) return;
  const size_t width = 30;
  size_t filled = done * width / total;
  std::string bar(filled, '#');
  bar.append(width - filled, '.');
  std::fprintf(stderr, "\r%s [%s] %zu/%zu runs", label_.c_str(), bar.c_str(), done, total);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) {
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace gpool::sim
