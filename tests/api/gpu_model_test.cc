// GPU models as users name them (issue 21: `--gpu-model A100` matched nothing; only the full
// name with " (simulated)" did).
#include "api/gpu_model.h"

#include <gtest/gtest.h>

namespace gpool::api {
namespace {

const char* kA100 = "NVIDIA A100-SXM4-80GB (simulated)";
const char* kA6000 = "NVIDIA RTX A6000";

TEST(GpuModelTest, FamilyMemoryAndFullNamesMatchInAnyCase) {
  for (const char* name : {"A100", "a100", "A100-80GB", "a100-sxm4-80gb", "A100-SXM4-80GB",
                           "NVIDIA A100-SXM4-80GB", kA100}) {
    EXPECT_TRUE(gpuModelMatches(name, kA100)) << name;
  }
  for (const char* name : {"A6000", "RTX A6000", "rtx-a6000", "NVIDIA RTX A6000"})
    EXPECT_TRUE(gpuModelMatches(name, kA6000)) << name;
}

TEST(GpuModelTest, WordsMatchWholeAndInOrder) {
  EXPECT_FALSE(gpuModelMatches("A10", kA100));        // not a prefix of a word
  EXPECT_FALSE(gpuModelMatches("A100-40GB", kA100));  // another variant
  EXPECT_FALSE(gpuModelMatches("80GB-A100", kA100));  // out of order
  EXPECT_FALSE(gpuModelMatches("H100", kA100));
  EXPECT_FALSE(gpuModelMatches("", kA100));
  EXPECT_FALSE(gpuModelMatches("simulated", kA100));  // never needed, never enough
  EXPECT_EQ(gpuModelWords(kA100), (std::vector<std::string>{"a100", "sxm4", "80gb"}));
}

TEST(GpuModelTest, NamesListedForAModelEachNameIt) {
  EXPECT_EQ(gpuModelNames(kA100),
            (std::vector<std::string>{"A100", "A100-80GB", "A100-SXM4-80GB"}));
  EXPECT_EQ(gpuModelNames(kA6000), (std::vector<std::string>{"A6000", "RTX A6000"}));
  for (const char* model : {kA100, kA6000, "Tesla V100-PCIE-32GB", "T4"}) {
    for (const std::string& name : gpuModelNames(model))
      EXPECT_TRUE(gpuModelMatches(name, model)) << name << " for " << model;
  }
}

TEST(GpuModelTest, MatchingModelsOfAPool) {
  const std::set<std::string> pool = {kA100, kA6000, "NVIDIA A100-SXM4-40GB"};
  EXPECT_EQ(matchingGpuModels({"A100"}, pool).size(), 2u);
  EXPECT_EQ(matchingGpuModels({"a100-80gb"}, pool), (std::vector<std::string>{kA100}));
  EXPECT_EQ(matchingGpuModels({"H100", "A6000"}, pool), (std::vector<std::string>{kA6000}));
  EXPECT_TRUE(matchingGpuModels({"H100"}, pool).empty());
}

}  // namespace
}  // namespace gpool::api
