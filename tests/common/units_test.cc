#include "common/units.h"

#include <gtest/gtest.h>

#include <string>

namespace gpool {
namespace {

::testing::AssertionResult failsWith(const Result<uint64_t>& r, const std::string& needle) {
  if (r.ok()) return ::testing::AssertionFailure() << "parsed to " << *r;
  if (r.status().code() != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "wrong code: " << r.status().toString();
  }
  if (r.status().message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message '" << r.status().message() << "' lacks '" << needle << "'";
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
Result<uint64_t> widen(const Result<T>& r) {
  if (!r.ok()) return r.status();
  return static_cast<uint64_t>(*r);
}

TEST(MemoryTest, ParsesUnits) {
  EXPECT_EQ(*parseMemoryMiB("24G"), 24u * 1024);
  EXPECT_EQ(*parseMemoryMiB("512M"), 512u);
  EXPECT_EQ(*parseMemoryMiB("512"), 512u);
  EXPECT_EQ(*parseMemoryMiB("1.5G"), 1536u);
  EXPECT_EQ(*parseMemoryMiB("40GiB"), 40u * 1024);
  EXPECT_EQ(*parseMemoryMiB("80gb"), 80u * 1024);
  EXPECT_EQ(*parseMemoryMiB("2T"), 2u * 1024 * 1024);
  EXPECT_EQ(*parseMemoryMiB(" 16 G "), 16u * 1024);
  EXPECT_EQ(*parseMemoryMiB("0"), 0u);
}

TEST(MemoryTest, RejectsMalformed) {
  EXPECT_TRUE(failsWith(parseMemoryMiB(""), "not a number"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("G"), "not a number"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("24X"), "unknown unit 'X'"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("-1G"), "unknown unit"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("1.2.3G"), "not a number"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("0.0001G"), "precision"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("0.3M"), "whole number of MiB"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("2000T"), "too large"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("99999999999999999999G"), "too large"));
  EXPECT_TRUE(failsWith(parseMemoryMiB("1."), "ends with '.'"));
}

TEST(MemoryTest, FormatsShortestExactForm) {
  EXPECT_EQ(formatMemoryMiB(24 * 1024), "24G");
  EXPECT_EQ(formatMemoryMiB(1536), "1536M");
  EXPECT_EQ(formatMemoryMiB(2 * 1024 * 1024), "2T");
  EXPECT_EQ(formatMemoryMiB(0), "0M");
  for (uint64_t v : {1ull, 1024ull, 1536ull, 81920ull, 1048576ull}) {
    EXPECT_EQ(*parseMemoryMiB(formatMemoryMiB(v)), v);
  }
}

TEST(ComputeShareTest, ParsesFractionsAndPercent) {
  EXPECT_EQ(*parseComputeShare("0.25"), 250u);
  EXPECT_EQ(*parseComputeShare("25%"), 250u);
  EXPECT_EQ(*parseComputeShare("12.5%"), 125u);
  EXPECT_EQ(*parseComputeShare("1"), 1000u);
  EXPECT_EQ(*parseComputeShare("100%"), 1000u);
  EXPECT_EQ(*parseComputeShare("0.001"), 1u);
}

TEST(ComputeShareTest, RejectsOutOfRange) {
  EXPECT_TRUE(failsWith(widen(parseComputeShare("0")), "out of range"));
  EXPECT_TRUE(failsWith(widen(parseComputeShare("0%")), "out of range"));
  EXPECT_TRUE(failsWith(widen(parseComputeShare("1.5")), "out of range"));
  EXPECT_TRUE(failsWith(widen(parseComputeShare("150%")), "out of range"));
  EXPECT_TRUE(failsWith(widen(parseComputeShare("-0.5")), "negative"));
  EXPECT_TRUE(failsWith(widen(parseComputeShare("0.0005")), "precision"));
  EXPECT_TRUE(failsWith(widen(parseComputeShare("abc")), "not a number"));
  EXPECT_TRUE(failsWith(widen(parseComputeShare("%")), "empty"));
  EXPECT_EQ(formatComputeShare(250), "25%");
  EXPECT_EQ(formatComputeShare(125), "12.5%");
}

TEST(GpuCountTest, WholeOrOneSlice) {
  EXPECT_EQ(*parseGpuCount("2"), 2000u);
  EXPECT_EQ(*parseGpuCount("0.25"), 250u);
  EXPECT_EQ(*parseGpuCount("1"), 1000u);
  EXPECT_EQ(*parseGpuCount("8.0"), 8000u);
  EXPECT_TRUE(failsWith(widen(parseGpuCount("1.5")), "mixes whole GPUs"));
  EXPECT_TRUE(failsWith(widen(parseGpuCount("0")), "zero"));
  EXPECT_TRUE(failsWith(widen(parseGpuCount("2000")), "too large"));
  EXPECT_TRUE(failsWith(widen(parseGpuCount("two")), "not a number"));
  EXPECT_EQ(formatGpuCount(2000), "2");
  EXPECT_EQ(formatGpuCount(250), "0.25");
}

TEST(CpuTest, CoresAndMillicores) {
  EXPECT_EQ(*parseCpuMillis("8"), 8000u);
  EXPECT_EQ(*parseCpuMillis("0.5"), 500u);
  EXPECT_EQ(*parseCpuMillis("500m"), 500u);
  EXPECT_TRUE(failsWith(parseCpuMillis("0"), "zero"));
  EXPECT_TRUE(failsWith(parseCpuMillis("0.0001"), "precision"));
  EXPECT_TRUE(failsWith(parseCpuMillis("1.5m"), "precision"));
  EXPECT_TRUE(failsWith(parseCpuMillis("8 cores"), "not a number"));
  EXPECT_EQ(formatCpuMillis(8000), "8");
  EXPECT_EQ(formatCpuMillis(500), "0.5");
}

TEST(DurationTest, SlurmForms) {
  EXPECT_EQ(*parseDuration("90"), 90 * 60);         // minutes
  EXPECT_EQ(*parseDuration("05:30"), 5 * 60 + 30);  // mm:ss
  EXPECT_EQ(*parseDuration("02:00:00"), 7200);      // hh:mm:ss
  EXPECT_EQ(*parseDuration("1-00"), 86400);         // d-hh
  EXPECT_EQ(*parseDuration("1-02:30"), 86400 + 2 * 3600 + 30 * 60);
  EXPECT_EQ(*parseDuration("2-12:00:05"), 2 * 86400 + 12 * 3600 + 5);
  EXPECT_EQ(*parseDuration("48:00:00"), 48 * 3600);  // leading field may exceed its clock range
}

TEST(DurationTest, SuffixedForms) {
  EXPECT_EQ(*parseDuration("90m"), 5400);
  EXPECT_EQ(*parseDuration("2h"), 7200);
  EXPECT_EQ(*parseDuration("30s"), 30);
  EXPECT_EQ(*parseDuration("1d12h"), 36 * 3600);
  EXPECT_EQ(*parseDuration("1h30m"), 5400);
  EXPECT_EQ(*parseDuration("0s"), 0);
}

TEST(DurationTest, RejectsMalformed) {
  auto f = [](const char* s, const char* needle) {
    return failsWith(widen(parseDuration(s)), needle);
  };
  EXPECT_TRUE(f("", "empty"));
  EXPECT_TRUE(f("-5m", "negative"));
  EXPECT_TRUE(f("5x", "unknown unit 'x'"));
  EXPECT_TRUE(f("m", "malformed"));
  EXPECT_TRUE(f("30m2h", "out of order"));
  EXPECT_TRUE(f("1h1h", "out of order"));
  EXPECT_TRUE(f("1:2:3:4", "malformed"));
  EXPECT_TRUE(f("10:61", "out of range"));
  EXPECT_TRUE(f("1-25:00", "out of range"));
  EXPECT_TRUE(f("1:60:00", "out of range"));
  EXPECT_TRUE(f("a-01:00", "day count"));
  EXPECT_TRUE(f("400d", "too long"));
  EXPECT_TRUE(f("366-00:00:00", "too long"));
  EXPECT_TRUE(f("1::2", "malformed"));
  EXPECT_TRUE(f("5 m", "unknown unit ' '"));
}

TEST(DurationTest, FormatsSlurmStyle) {
  EXPECT_EQ(formatDuration(0), "00:00:00");
  EXPECT_EQ(formatDuration(300), "00:05:00");
  EXPECT_EQ(formatDuration(86400 + 7200 + 5), "1-02:00:05");
  EXPECT_EQ(formatDuration(-3), "00:00:00");
  for (int64_t v : {0ll, 59ll, 3600ll, 86399ll, 86400ll, 200000ll}) {
    EXPECT_EQ(*parseDuration(formatDuration(v)), v) << v;
  }
}

}  // namespace
}  // namespace gpool
