#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "gpu_test_util.h"

namespace gpool::gpu {
namespace {

using testing::fixturePath;

struct ProbeRun {
  int exit_code = -1;
  std::string out;
};

// Runs gpool-gpu-probe with `args` (shell words) and collects stdout.
ProbeRun probe(const std::string& env, const std::string& args) {
  std::string command = env + " '" GPOOL_GPU_PROBE "' " + args + " 2>/dev/null";
  ProbeRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    run.out.append(buffer, n);
  int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(GpuProbeTest, FakeFixtureIsPrintedAndLabelledSimulated) {
  ProbeRun table = probe("", "--fake '" + fixturePath("8x-a100-sxm4-80gb-nvlink.json") + "'");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("SIMULATED GPUs"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("NVIDIA A100-SXM4-80GB (simulated)"), std::string::npos);
  EXPECT_NE(table.out.find("NV12"), std::string::npos);

  ProbeRun json = probe("", "--json --fake '" + fixturePath("2x-h100-mig.json") + "'");
  ASSERT_EQ(json.exit_code, 0);
  auto doc = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << json.out;
  EXPECT_EQ(doc["inventory"]["simulated"], true);
  EXPECT_EQ(doc["inventory"]["backend"], "fake");
  EXPECT_EQ(doc["inventory"]["gpus"].size(), 2u);
  EXPECT_EQ(doc["inventory"]["gpus"][1]["mig_instances"].size(), 7u);
  EXPECT_EQ(doc["inventory"]["gpus"][0]["compute_capability"], "9.0");
  EXPECT_EQ(doc["inventory"]["links"][0]["level"], "NV18");
  EXPECT_EQ(doc["telemetry"]["simulated"], true);
  EXPECT_EQ(doc["telemetry"]["gpus"][0]["temperature_c"], 29);
}

TEST(GpuProbeTest, AtStepPlaysTheFixtureScript) {
  ProbeRun json =
      probe("", "--json --at-step 8 --fake '" + fixturePath("4x-a100-faults.json") + "'");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  auto doc = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << json.out;
  EXPECT_EQ(doc["inventory"]["gpus"].size(), 3u) << "GPU 3 fell off the bus at step 5";
  EXPECT_EQ(doc["telemetry"]["gpus"][1]["temperature_c"], 94);
  bool hot = false;
  bool ecc = false;
  for (const auto& f : doc["findings"]) {
    hot = hot || (f["check"] == "too_hot" && f["unhealthy"] == true);
    ecc = ecc || f["check"] == "ecc_uncorrected";
  }
  EXPECT_TRUE(hot && ecc) << doc["findings"].dump();
}

TEST(GpuProbeTest, ReadsNvmlThroughTheFakeLibrary) {
  ProbeRun json =
      probe("GPOOL_FAKE_NVML_FIXTURE='" + fixturePath("8x-rtx-a6000-pcie-pairs.json") + "'",
            "--json -v --nvml-library '" GPOOL_FAKE_NVML_LIB "'");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  auto doc = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << json.out;
  EXPECT_EQ(doc["inventory"]["backend"], "nvml");
  EXPECT_EQ(doc["inventory"]["gpus"].size(), 8u);
  EXPECT_EQ(doc["inventory"]["driver_version"], "535.129.03");
  EXPECT_EQ(doc["inventory"]["cuda_driver_version"], "12.2");
  EXPECT_EQ(doc["nvml_symbols"]["nvmlInit_v2"], "nvmlInit_v2");
  EXPECT_EQ(doc["telemetry"]["gpus"][3]["ecc_corrected"], nullptr);
}

TEST(GpuProbeTest, ExplainsWhyThereIsNoNvml) {
  ProbeRun missing = probe("", "--nvml-library /nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(missing.exit_code, 7);  // Unavailable
  ProbeRun bad = probe("", "--fake /nonexistent.json");
  EXPECT_EQ(bad.exit_code, 3);  // NotFound
}

}  // namespace
}  // namespace gpool::gpu
