#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sched/policies.h"
#include "sim/fgd_replay.h"
#include "sim/sim_report.h"

namespace gpool::sim {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpool-fgd-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << content;
    return p;
  }

 private:
  std::string path_;
};

const char* kNodes =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n0,32000,131072,4,A\n"
    "n1,32000,131072,4,A\n"
    "n2,16000,65536,2,B\n"
    "n3,8000,65536,0,\n";

const char* kPods =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "p0,4000,8192,1,500,,LS,Running,0,1,0\n"
    "p1,4000,8192,1,1000,,LS,Running,0,1,0\n"
    "p2,2000,4096,0,0,,BE,Running,0,1,0\n"
    "p3,8000,16384,2,1000,A,LS,Running,0,1,0\n"
    "p4,2000,4096,1,250,B|A,LS,Running,0,1,0\r\n"
    "p5,4000,8192,1,700,,LS,Running,0,1,0\n";

TEST(OpenbTrace, ReadsNodesAndPods) {
  TempDir dir;
  auto nodes = readOpenbNodes(dir.write("nodes.csv", kNodes));
  ASSERT_TRUE(nodes.ok()) << nodes.status().toString();
  ASSERT_EQ(nodes->size(), 4u);
  EXPECT_EQ((*nodes)[2].model, "B");
  EXPECT_EQ((*nodes)[2].gpus, 2u);
  EXPECT_EQ((*nodes)[3].gpus, 0u);
  auto pods = readOpenbPods(dir.write("pods.csv", kPods));
  ASSERT_TRUE(pods.ok()) << pods.status().toString();
  ASSERT_EQ(pods->size(), 6u);
  EXPECT_EQ((*pods)[4].gpu_models, (std::vector<std::string>{"B", "A"}));
  EXPECT_EQ((*pods)[0].toTask().gpus, 500u);
  EXPECT_EQ((*pods)[3].toTask().gpus, 2000u);
  EXPECT_EQ((*pods)[2].toTask().gpus, 0u);
  EXPECT_EQ((*pods)[3].gpuRequestMilli(), 2000u);
  sched::ClusterState c = buildCluster(*nodes);
  EXPECT_EQ(c.gpuCount(), 10u);
  EXPECT_EQ(c.node(0).cpu_total_millis, 32000u);
}

TEST(OpenbTrace, ErrorsNameFileAndLine) {
  TempDir dir;
  auto bad = readOpenbPods(dir.write("bad.csv",
                                     "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                                     "a,1,1,1,100\n"
                                     "b,x,1,1,100\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.csv:3"), std::string::npos) << bad.status().message();
  auto missing = readOpenbNodes(dir.write("h.csv", "sn,cpu_milli\n"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("memory_mib"), std::string::npos);
  EXPECT_EQ(readOpenbNodes("/nonexistent/x.csv").status().code(), StatusCode::kIoError);
}

// A node with more GPUs than any server has, or more GPUs in all than the simulator builds, is
// refused (a 2^32 + 1 once read as 1 GPU, and 4 billion GPUs as a pool to build).
TEST(OpenbTrace, RefusesNodeListsBeyondTheLimits) {
  TempDir dir;
  const std::string header = "sn,cpu_milli,memory_mib,gpu,model\n";
  for (const char* row : {"n,64000,262144,1025,V100\n", "n,64000,262144,4294967297,V100\n"}) {
    auto nodes = readOpenbNodes(dir.write("big.csv", header + row));
    ASSERT_FALSE(nodes.ok()) << row;
    EXPECT_NE(nodes.status().message().find("big.csv:2: gpu must be <= 1024"), std::string::npos)
        << nodes.status().message();
  }
  std::string many = header;
  for (int i = 0; i < 98; ++i)
    many += "n" + std::to_string(i) + ",64000,262144,1024,V100\n";
  auto all = readOpenbNodes(dir.write("many.csv", many));
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("many.csv:99"), std::string::npos)
      << all.status().message();
}

TEST(FgdReplay, ParseSeeds) {
  EXPECT_EQ(*parseSeeds("42-45"), (std::vector<uint64_t>{42, 43, 44, 45}));
  EXPECT_EQ(*parseSeeds("7"), (std::vector<uint64_t>{7}));
  EXPECT_EQ(*parseSeeds("1,5-6"), (std::vector<uint64_t>{1, 5, 6}));
  for (const char* bad : {"", "a", "5-3", "1,,2", "4x"}) {
    EXPECT_FALSE(parseSeeds(bad).ok()) << bad;
  }
}

TEST(FgdReplay, SeedRunIsDeterministicAndConsistent) {
  TempDir dir;
  auto nodes = *readOpenbNodes(dir.write("nodes.csv", kNodes));
  auto w = loadWorkload(dir.write("tiny.csv", kPods));
  ASSERT_TRUE(w.ok()) << w.status().toString();
  EXPECT_EQ(w->name, "tiny");
  for (const auto& policy : sched::policyNames()) {
    auto a = runSeed(nodes, *w, policy, 42, 1.3);
    auto b = runSeed(nodes, *w, policy, 42, 1.3);
    ASSERT_TRUE(a.ok()) << policy;
    EXPECT_EQ(a->alloc_pct, b->alloc_pct) << policy;
    ASSERT_EQ(a->alloc_pct.size(), static_cast<size_t>(kMaxLevel + 1));
    for (int k = 1; k <= kMaxLevel; ++k) {
      // Allocation never decreases (arrival only) and never exceeds what has arrived.
      EXPECT_GE(a->alloc_pct[k], a->alloc_pct[k - 1]) << policy;
      EXPECT_LE(a->alloc_pct[k], 100.0 + 1e-9) << policy;
    }
    // The top-up reaches 1.3x: at least ceil(13 GPUs / max 2 per pod) pods arrived.
    EXPECT_GE(a->pods, 7u) << policy;
    EXPECT_GT(a->alloc_pct[kMaxLevel], 0.0) << policy;
  }
  EXPECT_FALSE(runSeed(nodes, *w, "NoSuchPolicy", 1, 1.3).ok());
}

TEST(FgdReplay, ResultsDoNotDependOnThreadCount) {
  TempDir dir;
  auto nodes = *readOpenbNodes(dir.write("nodes.csv", kNodes));
  auto w = *loadWorkload(dir.write("tiny.csv", kPods));
  std::vector<std::string> policies = {"Random", "FGD", "gpool"};
  std::vector<uint64_t> seeds = {1, 2, 3};
  FgdOptions one;
  one.threads = 1;
  size_t calls = 0;
  one.progress = [&calls](size_t done, size_t total) {
    ++calls;
    EXPECT_LE(done, total);
  };
  FgdOptions two;
  two.threads = 2;
  auto a = runPolicies(nodes, w, policies, seeds, one);
  auto b = runPolicies(nodes, w, policies, seeds, two);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(calls, policies.size() * seeds.size());
  ASSERT_EQ(a->size(), 3u);
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].policy, policies[i]);
    for (int level : kReportLevels)
      EXPECT_EQ((*a)[i].meanAlloc(level), (*b)[i].meanAlloc(level));
  }
}

TEST(FgdReport, JsonTableSvgAndComparison) {
  PolicyResult r;
  r.workload = "openb_pod_list_default";
  r.policy = "FGD";
  for (uint64_t seed : {42u, 43u}) {
    SeedRun run;
    run.seed = seed;
    run.alloc_pct.assign(kMaxLevel + 1, 0);
    for (int k = 0; k <= kMaxLevel; ++k)
      run.alloc_pct[k] = std::min(k, 95) + (seed - 42) * 0.2;
    run.frag_pct.assign(kReportLevels.size(), 5.0);
    r.runs.push_back(run);
  }
  std::string json = toJsonLine(r);
  for (const char* key : {"\"workload\":\"openb_pod_list_default\"", "\"policy\":\"FGD\"",
                          "\"seeds\":2", "\"alloc_pct\":{\"80\":80.1000", "\"130\":95.1000"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  EXPECT_EQ(json.find('\n'), std::string::npos);
  std::string table = formatTable({r});
  EXPECT_NE(table.find("FGD"), std::string::npos);
  EXPECT_NE(table.find("95.10"), std::string::npos);
  std::string svg = allocationSvg({r}, "t<1>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("t&lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(fragmentationSvg({r}, "f").find("<rect"), std::string::npos);

  TempDir dir;
  auto pub = readPublishedSummary(
      dir.write("s.csv",
                "workload,sc_policy,n_seeds,alloc_pct_at_80,alloc_pct_at_90,alloc_pct_at_95,"
                "alloc_pct_at_100,alloc_pct_at_110,alloc_pct_at_120,alloc_pct_at_130\n"
                "openb_pod_list_default,06-FGD,10,80,90,95,95.4,95,95,95.3\n"));
  ASSERT_TRUE(pub.ok()) << pub.status().toString();
  bool ok = false;
  std::string cmp = formatComparison({r}, *pub, 0.5, &ok);
  EXPECT_TRUE(ok) << cmp;  // 95.10 vs 95.4 and 95.3
  EXPECT_NE(cmp.find("95.40"), std::string::npos) << cmp;
  formatComparison({r}, *pub, 0.1, &ok);
  EXPECT_FALSE(ok);
}

// `gpool sim fgd --variants` on two small workloads: the table has one row per workload, per
// policy the mean allocation at 100% and 130%, the published FGD where the summary has it, and
// gpool - FGD computed from the two columns.
TEST(FgdReport, VariantsTableAndSvgOnSmallWorkloads) {
  TempDir dir;
  auto nodes = *readOpenbNodes(dir.write("nodes.csv", kNodes));
  std::vector<PolicyResult> all;
  for (const char* name : {"openb_pod_list_tiny", "openb_pod_list_tiny2"}) {
    auto w = loadWorkload(dir.write(std::string(name) + ".csv", kPods));
    ASSERT_TRUE(w.ok()) << w.status().toString();
    auto results = runPolicies(nodes, *w, {"FGD", "gpool"}, {42, 43}, FgdOptions{});
    ASSERT_TRUE(results.ok()) << results.status().toString();
    for (auto& r : *results)
      all.push_back(std::move(r));
  }
  ASSERT_EQ(all.size(), 4u);
  std::vector<PublishedRow> published(1);
  published[0].workload = "openb_pod_list_tiny";
  published[0].policy = "FGD";
  published[0].alloc = {1, 2, 3, 41.25, 5, 6, 47.5};
  std::string table = formatVariantsTable(all, published);
  EXPECT_NE(table.find("| workload (seeds) | FGD 100% | FGD 130% | gpool 100% | gpool 130% | "
                       "published FGD 100% | published FGD 130% | gpool - FGD 100% | gpool - "
                       "FGD 130% |"),
            std::string::npos)
      << table;
  auto cell = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return std::string(buf);
  };
  auto signedCell = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.2f", v);
    return std::string(buf);
  };
  const PolicyResult& fgd = all[0];
  const PolicyResult& mine = all[1];
  std::string row = "| tiny (2) | " + cell(fgd.meanAlloc(100)) + " | " + cell(fgd.meanAlloc(130)) +
                    " | " + cell(mine.meanAlloc(100)) + " | " + cell(mine.meanAlloc(130)) +
                    " | 41.25 | 47.50 | " + signedCell(mine.meanAlloc(100) - fgd.meanAlloc(100)) +
                    " | " + signedCell(mine.meanAlloc(130) - fgd.meanAlloc(130)) + " |";
  EXPECT_NE(table.find(row), std::string::npos) << row << "\nin\n" << table;
  EXPECT_NE(table.find("| tiny2 (2) | "), std::string::npos) << table;
  EXPECT_NE(table.find(" - | - |"), std::string::npos) << table;  // tiny2 is not published
  EXPECT_NE(table.find(" of 2 workloads"), std::string::npos) << table;

  // Hand-made means: gpool 0.5 above FGD at 100% and 0.25 below at 130%.
  auto flat = [](const std::string& policy, double at100, double at130) {
    PolicyResult r;
    r.workload = "openb_pod_list_hand";
    r.policy = policy;
    SeedRun run;
    run.alloc_pct.assign(kMaxLevel + 1, 0);
    run.alloc_pct[100] = at100;
    run.alloc_pct[130] = at130;
    r.runs.push_back(run);
    return r;
  };
  std::string hand = formatVariantsTable({flat("FGD", 95.0, 96.0), flat("gpool", 95.5, 95.75)}, {});
  EXPECT_NE(hand.find("| hand (1) | 95.00 | 96.00 | 95.50 | 95.75 | - | - | +0.50 | -0.25 |"),
            std::string::npos)
      << hand;
  EXPECT_NE(hand.find("at or above FGD at both 100% and 130% on 0 of 1 workloads"),
            std::string::npos)
      << hand;

  std::string svg = variantsSvg(all, "variants");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  size_t circles = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1))
    ++circles;
  EXPECT_EQ(circles, 2u * 2u * 2u + 2u);  // (workload, policy) x (100%, 130%) + legend
  EXPECT_NE(svg.find(">tiny2<"), std::string::npos);
}

}  // namespace
}  // namespace gpool::sim
