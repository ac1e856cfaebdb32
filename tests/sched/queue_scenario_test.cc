// Runs every hand-checked scenario in tests/sched/scenarios/queue_*.txt through one scheduling
// pass and compares the decisions with the scenario's `expect` lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/random.h"
#include "sched/queue_scenario.h"
#include "sched/test_policy.h"

namespace gpool::sched::testing {
namespace {

std::vector<std::string> scenarioFiles() {
  std::vector<std::string> out;
  std::filesystem::path dir = std::filesystem::path(GPOOL_SOURCE_DIR) / "tests/sched/scenarios";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.rfind("queue_", 0) == 0 && e.path().extension() == ".txt") {
      out.push_back(e.path().stem().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

class QueueScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(QueueScenario, DecisionsMatchExpectations) {
  std::string path =
      std::string(GPOOL_SOURCE_DIR) + "/tests/sched/scenarios/" + GetParam() + ".txt";
  auto scenario = loadScenario(path);
  ASSERT_TRUE(scenario.ok()) << scenario.status().toString();
  ASSERT_FALSE(scenario->expectations.empty()) << "a scenario must expect something";
  FirstFitPolicy policy;
  SchedulerPass pass(policy);
  SeededRandom random(42);
  Decisions d = pass.run(scenario->cluster, scenario->jobs, scenario->usage, scenario->config,
                         scenario->now, random);
  std::string dump;
  for (const auto& s : d.starts)
    dump += "  start " + std::to_string(s.job) + ": " + s.explanation + "\n";
  for (const auto& p : d.preemptions) {
    dump += "  preempt " + std::to_string(p.job) + ": " + p.reason + "\n";
  }
  for (const auto& p : d.pending) {
    dump += "  pending " + std::to_string(p.job) + " " + std::string(queueReasonName(p.reason)) +
            ": " + p.detail + "\n";
  }
  for (const std::string& e : checkExpectations(*scenario, d))
    ADD_FAILURE() << e << "\n" << dump;
}

INSTANTIATE_TEST_SUITE_P(Files, QueueScenario, ::testing::ValuesIn(scenarioFiles()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param;
                         });

TEST(QueueScenarioReader, RejectsUnknownDirectivesWithTheLine) {
  auto s = parseScenario("node n1 4\nfrobnicate 3\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("line 2"), std::string::npos);
}

}  // namespace
}  // namespace gpool::sched::testing
