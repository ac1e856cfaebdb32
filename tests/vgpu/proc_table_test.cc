#include "vgpu/proc_table.h"

#include <gtest/gtest.h>

#include <string>

namespace gpool::vgpu {
namespace {

std::string symbolFor(const char* name, int version, bool per_thread) {
  ProcResolution r = resolveProc(name, version, per_thread);
  return r.lookup == ProcLookup::kFound ? r.entry->symbol : "";
}

TEST(ProcTableTest, ResolvesTheExactAbiForTheRequestedVersion) {
  EXPECT_EQ(symbolFor("cuMemAlloc", 2000, false), "cuMemAlloc");
  EXPECT_EQ(symbolFor("cuMemAlloc", 3020, false), "cuMemAlloc_v2");
  EXPECT_EQ(symbolFor("cuMemAlloc", 12000, false), "cuMemAlloc_v2");
  // The case HAMi-core's newest-suffix-first probing gets wrong (core#57, #320).
  EXPECT_EQ(symbolFor("cuCtxCreate", 11000, false), "cuCtxCreate_v2");
  EXPECT_EQ(symbolFor("cuCtxCreate", 11040, false), "cuCtxCreate_v3");
  EXPECT_EQ(symbolFor("cuCtxCreate", 12080, false), "cuCtxCreate_v4");
  EXPECT_EQ(symbolFor("cuGetProcAddress", 11030, false), "cuGetProcAddress");
  EXPECT_EQ(symbolFor("cuGetProcAddress", 12000, false), "cuGetProcAddress_v2");
}

TEST(ProcTableTest, PerThreadFlagSelectsPtdsVariantsOnlyWhereTheyExist) {
  EXPECT_EQ(symbolFor("cuLaunchKernel", 12000, true), "cuLaunchKernel_ptsz");
  EXPECT_EQ(symbolFor("cuLaunchKernel", 12000, false), "cuLaunchKernel");
  EXPECT_EQ(symbolFor("cuMemcpyHtoD", 12000, true), "cuMemcpyHtoD_v2_ptds");
  EXPECT_EQ(symbolFor("cuMemAlloc", 12000, true), "cuMemAlloc_v2");  // no ptds variant
  EXPECT_EQ(symbolFor("cuStreamGetCaptureInfo", 11030, true), "cuStreamGetCaptureInfo_v2_ptsz");
}

TEST(ProcTableTest, UnknownNamesAndTooOldVersionsAreReported) {
  EXPECT_EQ(resolveProc("cuNoSuchFunction", 13000, false).lookup, ProcLookup::kUnknownName);
  EXPECT_EQ(resolveProc("cuMemAllocAsync", 11000, false).lookup, ProcLookup::kVersionNotSufficient);
  EXPECT_EQ(resolveProc("cuMemAllocAsync", 11020, false).lookup, ProcLookup::kFound);
}

TEST(ProcTableTest, TableIsSortedAndGeneratedFromTheInstalledHeaders) {
  std::size_t n = 0;
  const ProcEntry* t = procTable(&n);
  ASSERT_GT(n, 500u);
  for (std::size_t i = 1; i < n; ++i) {
    ASSERT_LE(std::string(t[i - 1].name), std::string(t[i].name)) << i;
  }
  EXPECT_GE(procTableCudaVersion(), 12000);
}

}  // namespace
}  // namespace gpool::vgpu
