// Runs the hand-checked placement scenarios in tests/sched/scenarios/placement_*.txt.
//
// Format, one statement per line ('#' starts a comment):
//   node NAME cpu=CORES ram=SIZE gpus=N model=M cc=NN gpumem=SIZE [labels=k:v,...]
//        [datasets=a,b] [nvlink=0-1-2,4-5] [pcie=0-1,2-3] [unschedulable]
//   use NODE gpu=I compute=THOUSANDTHS mem=SIZE      (pre-allocate part of a GPU)
//   policy NAME
//   job [tasks=N] [scope=single|multi] [nodes=N] gpus=COUNT [gpumem=SIZE] [compute=THOUSANDTHS]
//       [cpu=CORES] [ram=SIZE] [models=a,b] [mincc=NN] [mingpumem=SIZE] [labels=k:v]
//       [datasets=a,b]
//   expect placed NODE[,NODE per task] [gpus=I,J] [compute=C] [mem=SIZE]
//        (a NODE may be "a|b" for either; gpus/compute/mem are checked on every task)
//   expect pending REASON [constraint,...]
// A placed job is applied to the pool, so later jobs see it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/random.h"
#include "common/units.h"
#include "sched/policies.h"

namespace gpool::sched {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, sep)) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

class Scenario {
 public:
  explicit Scenario(std::string path) : path_(std::move(path)) {}

  void run() {
    std::ifstream in(path_);
    ASSERT_TRUE(in) << "cannot open " << path_;
    std::string line;
    while (std::getline(in, line)) {
      ++line_;
      auto hash = line.find('#');
      if (hash != std::string::npos) line.resize(hash);
      std::vector<std::string> words = split(line, ' ');
      if (words.empty()) continue;
      std::map<std::string, std::string> kv;
      std::vector<std::string> bare;
      for (size_t i = 1; i < words.size(); ++i) {
        auto eq = words[i].find('=');
        if (eq == std::string::npos) {
          bare.push_back(words[i]);
        } else {
          kv[words[i].substr(0, eq)] = words[i].substr(eq + 1);
        }
      }
      SCOPED_TRACE(path_ + ":" + std::to_string(line_) + ": " + line);
      if (words[0] == "node") {
        addNode(bare.at(0), kv, bare);
      } else if (words[0] == "use") {
        use(bare.at(0), kv);
      } else if (words[0] == "policy") {
        auto p = makePolicy(bare.at(0), nullptr);
        ASSERT_TRUE(p.ok()) << p.status().toString();
        policy_ = std::move(p).value();
      } else if (words[0] == "job") {
        job(kv);
      } else if (words[0] == "expect") {
        expect(bare, kv);
      } else {
        FAIL() << "unknown statement " << words[0];
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(checks_, 0) << path_ << " checks nothing";
  }

 private:
  uint64_t mem(const std::string& text) {
    auto v = parseMemoryMiB(text);
    EXPECT_TRUE(v.ok()) << text;
    return v.valueOr(0);
  }
  uint64_t cpu(const std::string& text) {
    auto v = parseCpuMillis(text);
    EXPECT_TRUE(v.ok()) << text;
    return v.valueOr(0);
  }

  void addNode(const std::string& name, std::map<std::string, std::string>& kv,
               const std::vector<std::string>& bare) {
    Node n;
    n.name = name;
    n.cpu_total_millis = n.cpu_free_millis = cpu(kv["cpu"]);
    n.ram_total_mib = n.ram_free_mib = mem(kv["ram"]);
    n.schedulable = std::find(bare.begin(), bare.end(), "unschedulable") == bare.end();
    for (const auto& l : split(kv["labels"], ',')) {
      auto c = l.find(':');
      n.labels[l.substr(0, c)] = l.substr(c + 1);
    }
    n.datasets = split(kv["datasets"], ',');
    size_t count = std::stoul(kv["gpus"]);
    for (size_t i = 0; i < count; ++i) {
      Gpu g;
      g.model = kv["model"];
      g.compute_capability = kv.count("cc") ? std::stoul(kv["cc"]) : 0;
      g.memory_total_mib = g.memory_free_mib = kv.count("gpumem") ? mem(kv["gpumem"]) : 0;
      n.gpus.push_back(g);
    }
    if (kv.count("nvlink") || kv.count("pcie")) {
      n.links.assign(count * count, LinkLevel::kCrossSocket);
      for (const auto& [key, level] :
           {std::pair<std::string, LinkLevel>{"pcie", LinkLevel::kPcieSwitch},
            {"nvlink", LinkLevel::kNvLink}}) {
        for (const auto& group : split(kv[key], ',')) {
          auto ids = split(group, '-');
          for (const auto& a : ids) {
            for (const auto& b : ids) {
              if (a != b) n.links[std::stoul(a) * count + std::stoul(b)] = level;
            }
          }
        }
      }
    }
    cluster_.addNode(std::move(n));
  }

  void use(const std::string& node, std::map<std::string, std::string>& kv) {
    auto idx = cluster_.findNode(node);
    ASSERT_TRUE(idx.has_value()) << node;
    TaskAllocation a;
    a.node = *idx;
    a.gpus.push_back({static_cast<uint32_t>(std::stoul(kv["gpu"])), mem(kv["mem"]),
                      static_cast<uint32_t>(std::stoul(kv["compute"]))});
    ASSERT_TRUE(cluster_.apply(a).isOk());
  }

  void job(std::map<std::string, std::string>& kv) {
    PlacementRequest r;
    r.job = "line" + std::to_string(line_);
    r.tasks = kv.count("tasks") ? static_cast<uint32_t>(std::stoul(kv["tasks"])) : 1;
    r.scope = kv["scope"] == "single" ? GangScope::kSingleServer : GangScope::kMultiServer;
    if (kv.count("nodes")) r.nodes = static_cast<uint32_t>(std::stoul(kv["nodes"]));
    auto g = parseGpuCount(kv.count("gpus") ? kv["gpus"] : "0");
    if (kv["gpus"] == "0" || !kv.count("gpus")) {
      r.task.gpus = 0;
    } else {
      ASSERT_TRUE(g.ok()) << kv["gpus"];
      r.task.gpus = *g;
    }
    if (kv.count("gpumem")) r.task.gpu_memory_mib = mem(kv["gpumem"]);
    if (kv.count("compute")) r.task.gpu_compute = static_cast<uint32_t>(std::stoul(kv["compute"]));
    if (kv.count("cpu")) r.task.cpu_millis = cpu(kv["cpu"]);
    if (kv.count("ram")) r.task.ram_mib = mem(kv["ram"]);
    r.task.constraints.gpu_models = split(kv["models"], ',');
    if (kv.count("mincc")) r.task.constraints.min_compute_capability = std::stoul(kv["mincc"]);
    if (kv.count("mingpumem")) r.task.constraints.min_gpu_memory_mib = mem(kv["mingpumem"]);
    for (const auto& l : split(kv["labels"], ',')) {
      auto c = l.find(':');
      r.task.constraints.node_labels[l.substr(0, c)] = l.substr(c + 1);
    }
    r.task.constraints.datasets = split(kv["datasets"], ',');
    ASSERT_TRUE(policy_) << "no policy before job";
    last_ = place(cluster_, r, *policy_, random_);
    last_request_ = r;
    if (last_.placed) {
      for (const auto& t : last_.tasks) {
        ASSERT_TRUE(cluster_.apply(t).isOk());
        policy_->notePlaced(cluster_, r.task, t);
      }
    }
  }

  void expect(const std::vector<std::string>& bare, std::map<std::string, std::string>& kv) {
    ++checks_;
    ASSERT_FALSE(bare.empty());
    if (bare[0] == "placed") {
      ASSERT_TRUE(last_.placed) << last_.explanation;
      EXPECT_FALSE(last_.explanation.empty());
      auto nodes = split(bare.at(1), ',');
      ASSERT_EQ(nodes.size(), last_.tasks.size()) << last_.explanation;
      for (size_t t = 0; t < nodes.size(); ++t) {
        const TaskAllocation& a = last_.tasks[t];
        auto options = split(nodes[t], '|');
        EXPECT_NE(std::find(options.begin(), options.end(), cluster_.node(a.node).name),
                  options.end())
            << "task " << t << " went to " << cluster_.node(a.node).name << ": "
            << last_.explanation;
        if (kv.count("gpus")) {
          std::vector<uint32_t> want;
          for (const auto& g : split(kv["gpus"], ','))
            want.push_back(std::stoul(g));
          std::vector<uint32_t> got;
          for (const auto& s : a.gpus)
            got.push_back(s.gpu_index);
          EXPECT_EQ(got, want) << last_.explanation;
        }
        for (const auto& s : a.gpus) {
          if (kv.count("compute")) {
            EXPECT_EQ(s.compute, std::stoul(kv["compute"]));
          }
          if (kv.count("mem")) {
            EXPECT_EQ(s.memory_mib, mem(kv["mem"]));
          }
        }
        EXPECT_EQ(a.cpu_millis, last_request_.task.cpu_millis);
        EXPECT_EQ(a.ram_mib, last_request_.task.ram_mib);
      }
    } else if (bare[0] == "pending") {
      ASSERT_FALSE(last_.placed) << last_.explanation;
      EXPECT_TRUE(last_.tasks.empty());
      EXPECT_EQ(pendingReasonName(last_.reason), bare.at(1)) << last_.explanation;
      if (bare.size() > 2) {
        auto want = split(bare[2], ',');
        std::set<std::string> w(want.begin(), want.end());
        std::set<std::string> g(last_.unsatisfiable.begin(), last_.unsatisfiable.end());
        EXPECT_EQ(g, w) << last_.explanation;
      }
      EXPECT_NE(last_.explanation.find(last_request_.job), std::string::npos);
    } else {
      FAIL() << "unknown expectation " << bare[0];
    }
  }

  std::string path_;
  size_t line_ = 0;
  int checks_ = 0;
  ClusterState cluster_;
  std::unique_ptr<PlacementPolicy> policy_;
  SeededRandom random_{7};
  PlacementResult last_;
  PlacementRequest last_request_;
};

std::vector<std::string> scenarioFiles() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(GPOOL_SOURCE_DIR) +
                                                           "/tests/sched/scenarios")) {
    std::string name = e.path().filename().string();
    if (name.rfind("placement_", 0) == 0 && e.path().extension() == ".txt") {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PlacementScenario, AllScenarioFilesPass) {
  auto files = scenarioFiles();
  ASSERT_GE(files.size(), 6u);
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    Scenario(f).run();
  }
}

}  // namespace
}  // namespace gpool::sched
