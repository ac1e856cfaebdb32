#include "sim/openb_trace.h"

#include <charconv>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

namespace gpool::sim {

namespace {

std::vector<std::string> splitCsvLine(const std::string& line) {
  // The openb files have no quoted fields; commas separate, a trailing '\r' is dropped.
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

bool parseU64(const std::string& s, uint64_t* out) {
  if (s.empty()) {
    *out = 0;
    return true;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

struct Table {
  std::map<std::string, size_t> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> lines;
};

Result<Table> readTable(const std::string& path, const std::vector<std::string>& required) {
  std::ifstream in(path);
  if (!in) return Status::ioError("cannot open trace file " + path);
  Table t;
  std::string line;
  if (!std::getline(in, line)) return Status::invalidArgument(path + ": empty file");
  auto header = splitCsvLine(line);
  for (size_t i = 0; i < header.size(); ++i)
    t.columns[header[i]] = i;
  for (const auto& r : required) {
    if (!t.columns.count(r)) {
      return Status::invalidArgument(path + ":1: header lacks column '" + r + "'");
    }
  }
  size_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    t.rows.push_back(splitCsvLine(line));
    t.lines.push_back(lineno);
  }
  return t;
}

const std::string& field(const Table& t, size_t row, const std::string& column) {
  static const std::string kEmpty;
  auto it = t.columns.find(column);
  if (it == t.columns.end() || it->second >= t.rows[row].size()) return kEmpty;
  return t.rows[row][it->second];
}

Status badValue(const std::string& path, size_t line, const std::string& column,
                const std::string& value) {
  return Status::invalidArgument(path + ":" + std::to_string(line) + ": column " + column +
                                 " has '" + value + "', expected a non-negative integer");
}

}  // namespace

sched::TaskRequest OpenbPod::toTask() const {
  sched::TaskRequest t;
  t.cpu_millis = cpu_millis;
  t.ram_mib = memory_mib;
  if (num_gpu == 0 || gpu_milli == 0) {
    t.gpus = 0;
  } else if (num_gpu == 1 && gpu_milli < 1000) {
    t.gpus = gpu_milli;
  } else {
    t.gpus = num_gpu * 1000;
  }
  t.constraints.gpu_models = gpu_models;
  return t;
}

Result<std::vector<OpenbNode>> readOpenbNodes(const std::string& path) {
  GPOOL_ASSIGN_OR_RETURN(Table t, readTable(path, {"sn", "cpu_milli", "memory_mib", "gpu"}));
  std::vector<OpenbNode> out;
  uint64_t total_gpus = 0;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    OpenbNode n;
    n.name = field(t, r, "sn");
    uint64_t gpus = 0;
    for (const auto& [col, dst] : {std::pair<const char*, uint64_t*>{"cpu_milli", &n.cpu_millis},
                                   {"memory_mib", &n.memory_mib},
                                   {"gpu", &gpus}}) {
      if (!parseU64(field(t, r, col), dst))
        return badValue(path, t.lines[r], col, field(t, r, col));
    }
    total_gpus += gpus;
    if (gpus > kMaxGpusPerServer || total_gpus > kMaxClusterGpus) {
      return Status::invalidArgument(path + ":" + std::to_string(t.lines[r]) +
                                     ": gpu must be <= " + std::to_string(kMaxGpusPerServer) +
                                     " per node and <= " + std::to_string(kMaxClusterGpus) +
                                     " in all");
    }
    n.gpus = static_cast<uint32_t>(gpus);
    n.model = field(t, r, "model");
    out.push_back(std::move(n));
  }
  return out;
}

Result<std::vector<OpenbPod>> readOpenbPods(const std::string& path) {
  GPOOL_ASSIGN_OR_RETURN(
      Table t, readTable(path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}));
  std::vector<OpenbPod> out;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    OpenbPod p;
    p.name = field(t, r, "name");
    uint64_t num = 0, milli = 0;
    for (const auto& [col, dst] : {std::pair<const char*, uint64_t*>{"cpu_milli", &p.cpu_millis},
                                   {"memory_mib", &p.memory_mib},
                                   {"num_gpu", &num},
                                   {"gpu_milli", &milli}}) {
      if (!parseU64(field(t, r, col), dst))
        return badValue(path, t.lines[r], col, field(t, r, col));
    }
    if (milli > 1000 || num > 1024) {
      return Status::invalidArgument(path + ":" + std::to_string(t.lines[r]) +
                                     ": gpu_milli must be <= 1000 and num_gpu <= 1024");
    }
    p.num_gpu = static_cast<uint32_t>(num);
    p.gpu_milli = static_cast<uint32_t>(milli);
    std::string spec = field(t, r, "gpu_spec");
    std::stringstream ss(spec);
    std::string m;
    while (std::getline(ss, m, '|')) {
      if (!m.empty()) p.gpu_models.push_back(m);
    }
    out.push_back(std::move(p));
  }
  return out;
}

sched::ClusterState buildCluster(const std::vector<OpenbNode>& nodes) {
  sched::ClusterState cluster;
  for (const OpenbNode& n : nodes) {
    sched::Node node;
    node.name = n.name;
    node.cpu_total_millis = node.cpu_free_millis = n.cpu_millis;
    node.ram_total_mib = node.ram_free_mib = n.memory_mib;
    for (uint32_t i = 0; i < n.gpus; ++i) {
      sched::Gpu g;
      g.index = i;
      g.model = n.model;
      node.gpus.push_back(g);
    }
    cluster.addNode(std::move(node));
  }
  return cluster;
}

std::vector<sched::TaskShape> shapeCounts(const std::vector<OpenbPod>& pods) {
  std::vector<sched::TaskShape> shapes;
  std::map<std::tuple<uint64_t, uint32_t, uint32_t, std::vector<std::string>>, size_t> index;
  for (const OpenbPod& p : pods) {
    uint32_t count = p.gpu_milli == 0 ? 0 : p.num_gpu;
    uint32_t milli = count == 0 ? 0 : p.gpu_milli;
    // A CPU-only pod has no GPU type (the published converter writes the type annotation only
    // for GPU pods).
    std::vector<std::string> models = count == 0 ? std::vector<std::string>{} : p.gpu_models;
    auto key = std::make_tuple(p.cpu_millis, count, milli, models);
    auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, shapes.size());
      sched::TaskShape s;
      s.cpu_millis = p.cpu_millis;
      s.gpu_count = count;
      s.gpu_milli = milli;
      s.gpu_models = std::move(models);
      s.weight = 1;
      shapes.push_back(std::move(s));
    } else {
      shapes[it->second].weight += 1;
    }
  }
  return shapes;
}

}  // namespace gpool::sim
