#include "sim/dynamic_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sim/openb_trace.h"

namespace gpool::sim {
namespace {

std::vector<std::string> splitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

// A job of more than a century, or a time stamp more than ~140 million years from the epoch,
// is a corrupt line, not a trace.
constexpr int64_t kMaxTraceDurationSeconds = int64_t{100} * 365 * 86400;
constexpr int64_t kMaxTraceTimeSeconds = int64_t{1} << 52;

template <typename T>
bool parseNumber(const std::string& s, T* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
int64_t daysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

Result<std::vector<std::string>> readLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::ioError("cannot open trace file " + path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line))
    lines.push_back(std::move(line));
  return lines;
}

std::vector<DynJob> applyFilter(std::vector<DynJob> jobs, const TraceFilter& f) {
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const DynJob& a, const DynJob& b) { return a.submit_s < b.submit_s; });
  if (jobs.empty()) return jobs;
  const int64_t origin = jobs.front().submit_s;
  std::vector<DynJob> out;
  size_t seen = 0;
  for (DynJob& j : jobs) {
    int64_t t = j.submit_s - origin;
    if (t < f.window_start_s) continue;
    if (f.window_end_s >= 0 && t >= f.window_end_s) break;
    if (f.sample_every > 1 && (seen++ % f.sample_every) != 0) continue;
    j.submit_s = t;
    out.push_back(std::move(j));
    if (f.max_jobs > 0 && out.size() >= f.max_jobs) break;
  }
  if (!out.empty()) {
    const int64_t first = out.front().submit_s;
    for (DynJob& j : out)
      j.submit_s -= first;
  }
  return out;
}

}  // namespace

Result<int64_t> parseTimestamp(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%d %d:%d:%d%c", &y, &mo, &d, &h, &mi, &s, &tail) != 6 ||
      mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) {
    return Status::invalidArgument("bad timestamp '" + text + "': expected YYYY-MM-DD hh:mm:ss");
  }
  return daysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
         mi * 60 + s;
}

Result<std::vector<DynJob>> readPhillyJobs(const std::string& path, const TraceFilter& filter) {
  GPOOL_ASSIGN_OR_RETURN(auto lines, readLines(path));
  if (lines.empty() || lines[0].rfind("timestamp,duration,num_gpus", 0) != 0) {
    return Status::invalidArgument(path + ": expected header timestamp,duration,num_gpus,...");
  }
  std::vector<DynJob> jobs;
  jobs.reserve(lines.size());
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    auto f = splitCsv(lines[i]);
    auto bad = [&](const std::string& what) {
      return Status::invalidArgument(path + ":" + std::to_string(i + 1) + ": " + what);
    };
    if (f.size() < 5) return bad("expected 5 columns");
    auto ts = parseTimestamp(f[0]);
    if (!ts.ok()) return bad(ts.status().message());
    double duration = 0;
    uint32_t gpus = 0;
    if (!parseNumber(f[1], &duration)) return bad("bad duration '" + f[1] + "'");
    if (!parseNumber(f[2], &gpus)) return bad("bad num_gpus '" + f[2] + "'");
    // from_chars reads "inf" and "nan", and a huge duration does not fit the int64 seconds the
    // replay counts in: both are refused rather than converted (undefined behaviour).
    if (!std::isfinite(duration) || duration > kMaxTraceDurationSeconds) {
      return bad("duration '" + f[1] + "' is not a number of seconds up to " +
                 std::to_string(kMaxTraceDurationSeconds));
    }
    if (gpus == 0 || duration <= 0) continue;
    DynJob j;
    j.id = i;
    j.submit_s = *ts;
    j.duration_s = std::max<int64_t>(1, static_cast<int64_t>(duration + 0.5));
    j.num_gpus = gpus;
    j.gpu_milli = 1000;
    j.group = f[4];
    j.user = f[4];
    jobs.push_back(std::move(j));
  }
  return applyFilter(std::move(jobs), filter);
}

Result<std::vector<DynJob>> readOpenbJobs(const std::string& path, const TraceFilter& filter) {
  GPOOL_ASSIGN_OR_RETURN(auto lines, readLines(path));
  if (lines.empty()) return Status::invalidArgument(path + ": empty pod list");
  auto header = splitCsv(lines[0]);
  auto col = [&](const std::string& name) -> int {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int c_cpu = col("cpu_milli"), c_mem = col("memory_mib"), c_ngpu = col("num_gpu"),
            c_milli = col("gpu_milli"), c_qos = col("qos"), c_create = col("creation_time"),
            c_delete = col("deletion_time");
  if (c_cpu < 0 || c_mem < 0 || c_ngpu < 0 || c_milli < 0 || c_create < 0 || c_delete < 0) {
    return Status::invalidArgument(
        path +
        ": expected columns cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,"
        "deletion_time");
  }
  std::vector<DynJob> jobs;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    auto f = splitCsv(lines[i]);
    if (f.size() != header.size()) {
      return Status::invalidArgument(path + ":" + std::to_string(i + 1) + ": expected " +
                                     std::to_string(header.size()) + " columns");
    }
    DynJob j;
    int64_t created = 0, deleted = 0;
    bool ok = parseNumber(f[c_cpu], &j.cpu_millis) && parseNumber(f[c_mem], &j.ram_mib) &&
              parseNumber(f[c_ngpu], &j.num_gpus) && parseNumber(f[c_milli], &j.gpu_milli) &&
              parseNumber(f[c_create], &created) && parseNumber(f[c_delete], &deleted);
    if (!ok) return Status::invalidArgument(path + ":" + std::to_string(i + 1) + ": bad number");
    // Bounded so that deletion - creation (and the replay's submit + duration) cannot overflow.
    if (created < -kMaxTraceTimeSeconds || created > kMaxTraceTimeSeconds ||
        deleted < -kMaxTraceTimeSeconds || deleted > kMaxTraceTimeSeconds) {
      return Status::invalidArgument(path + ":" + std::to_string(i + 1) +
                                     ": creation_time/deletion_time beyond +-" +
                                     std::to_string(kMaxTraceTimeSeconds) + " s");
    }
    if (j.num_gpus == 0 || j.gpu_milli == 0 || deleted <= created) continue;
    if (j.num_gpus > 1) j.gpu_milli = 1000;  // multi-GPU pods take whole GPUs
    j.gpu_milli = std::min<uint32_t>(j.gpu_milli, 1000);
    j.id = i;
    j.submit_s = created;
    j.duration_s = deleted - created;
    j.group = c_qos >= 0 && !f[c_qos].empty() ? f[c_qos] : "default";
    j.user = j.group;
    jobs.push_back(std::move(j));
  }
  return applyFilter(std::move(jobs), filter);
}

Result<sched::ClusterState> buildDynamicCluster(const std::string& spec) {
  sched::ClusterState cluster;
  uint64_t total_gpus = 0;
  // Checked before anything is built: a spec such as "100000000x8" must not allocate first.
  auto checkSize = [&](uint64_t count, uint64_t gpus, const std::string& where) -> Status {
    total_gpus += count * gpus;
    if (gpus > kMaxGpusPerServer || count > kMaxClusterGpus || total_gpus > kMaxClusterGpus) {
      return Status::invalidArgument(where + ": at most " + std::to_string(kMaxGpusPerServer) +
                                     " GPUs per server and " + std::to_string(kMaxClusterGpus) +
                                     " in all");
    }
    return Status::ok();
  };
  auto addNodes = [&](uint32_t count, uint32_t gpus, const std::string& model, uint64_t mem_mib,
                      uint64_t cpu, uint64_t ram, const std::string& prefix) {
    for (uint32_t i = 0; i < count; ++i) {
      sched::Node n;
      n.name = prefix + std::to_string(cluster.size());
      n.cpu_total_millis = n.cpu_free_millis = cpu;
      n.ram_total_mib = n.ram_free_mib = ram;
      for (uint32_t g = 0; g < gpus; ++g) {
        sched::Gpu gpu;
        gpu.index = g;
        gpu.model = model;
        gpu.memory_total_mib = gpu.memory_free_mib = mem_mib;
        n.gpus.push_back(gpu);
      }
      cluster.addNode(std::move(n));
    }
  };
  if (spec.find(".csv") != std::string::npos) {
    GPOOL_ASSIGN_OR_RETURN(auto lines, readLines(spec));
    for (size_t i = 1; i < lines.size(); ++i) {
      if (lines[i].empty()) continue;
      auto f = splitCsv(lines[i]);
      uint64_t cpu = 0, mem = 0;
      uint32_t gpus = 0;
      if (f.size() < 5 || !parseNumber(f[1], &cpu) || !parseNumber(f[2], &mem) ||
          !parseNumber(f[3], &gpus)) {
        return Status::invalidArgument(spec + ":" + std::to_string(i + 1) +
                                       ": expected sn,cpu_milli,memory_mib,gpu,model");
      }
      if (gpus == 0) continue;
      GPOOL_RETURN_IF_ERROR(checkSize(1, gpus, spec + ":" + std::to_string(i + 1)));
      addNodes(1, gpus, f[4], 32 * 1024, cpu, mem, "node-");
    }
  } else {
    std::stringstream ss(spec);
    std::string part;
    while (std::getline(ss, part, ',')) {
      uint32_t count = 0, gpus = 0, mem_gib = 32, cores = 64;
      std::string model = "V100";
      auto colon = part.find(':');
      std::string dims = part.substr(0, colon);
      auto x = dims.find('x');
      if (x == std::string::npos || !parseNumber(dims.substr(0, x), &count) ||
          !parseNumber(dims.substr(x + 1), &gpus) || count == 0 || gpus == 0) {
        return Status::invalidArgument(
            "bad node group '" + part +
            "': expected NxG[:MODEL[:MEM_GIB[:CORES]]], e.g. 8x8 or 4x8:A100:80");
      }
      if (colon != std::string::npos) {
        std::string rest = part.substr(colon + 1);
        auto c2 = rest.find(':');
        model = rest.substr(0, c2);
        if (c2 != std::string::npos) {
          std::string tail = rest.substr(c2 + 1);
          auto c3 = tail.find(':');
          if (!parseNumber(tail.substr(0, c3), &mem_gib) ||
              (c3 != std::string::npos && !parseNumber(tail.substr(c3 + 1), &cores))) {
            return Status::invalidArgument("bad GPU memory or cores in '" + part + "'");
          }
        }
      }
      GPOOL_RETURN_IF_ERROR(checkSize(count, gpus, "node group '" + part + "'"));
      addNodes(count, gpus, model, uint64_t{mem_gib} * 1024, uint64_t{cores} * 1000,
               uint64_t{cores} * 8 * 1024, "n");
    }
  }
  if (cluster.size() == 0) return Status::invalidArgument("no GPU servers in '" + spec + "'");
  return cluster;
}

}  // namespace gpool::sim
