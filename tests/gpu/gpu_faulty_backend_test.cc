#include <gtest/gtest.h>

#include <chrono>

#include "common/clock.h"
#include "gpu/fake_backend.h"
#include "gpu/faulty_backend.h"
#include "gpu_test_util.h"

namespace gpool::gpu {
namespace {

using testing::fixturePath;

class FaultyBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fake = FakeBackend::fromFile(fixturePath("8x-a100-sxm4-80gb-nvlink.json"), clock_);
    ASSERT_TRUE(fake.ok()) << fake.status().toString();
    fake_ = std::move(fake).value();
  }

  // Delays advance the simulated clock instead of sleeping.
  FaultyOptions options(uint64_t seed) {
    FaultyOptions o;
    o.seed = seed;
    o.delay = [this](Micros d) { clock_.advance(d); };
    return o;
  }

  SimClock clock_;
  std::unique_ptr<FakeBackend> fake_;
};

TEST_F(FaultyBackendTest, ForwardsEverythingWhenNoFaultIsConfigured) {
  FaultyBackend faulty(*fake_, options(1));
  EXPECT_EQ(faulty.name(), "fake");
  EXPECT_TRUE(faulty.simulated());
  auto inv = faulty.inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(*inv, *fake_->inventory());
  const std::string uuid = inv->gpus[0].uuid;
  ASSERT_TRUE(fake_->startProcess(uuid, 42, 100).isOk());
  EXPECT_EQ(faulty.processes(uuid)->size(), 1u);
  EXPECT_EQ(faulty.sample()->gpus.size(), 8u);
  EXPECT_TRUE(faulty.killProcess(uuid, 42).isOk());
  EXPECT_EQ(fake_->kills().size(), 1u);
  EXPECT_EQ(faulty.injectedErrors(), 0u);
}

TEST_F(FaultyBackendTest, FailNextFailsExactlyThatManyCallsOfThatOperation) {
  FaultyBackend faulty(*fake_, options(1));
  faulty.failNext(GpuOperation::kSample, Status::unavailable("GPU is lost"), 2);
  EXPECT_TRUE(faulty.inventory().ok()) << "other operations are untouched";
  auto first = faulty.sample();
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(first.status().message(), "GPU is lost");
  EXPECT_FALSE(faulty.sample().ok());
  EXPECT_TRUE(faulty.sample().ok());
  EXPECT_EQ(faulty.injectedErrors(), 2u);

  faulty.failNext(GpuOperation::kKillProcess, Status::permissionDenied("EPERM"));
  EXPECT_EQ(faulty.killProcess("GPU-x", 1).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(fake_->kills().empty()) << "an injected failure must not reach the target";
}

TEST_F(FaultyBackendTest, RandomFailuresAreSeededAndReplayExactly) {
  auto run = [&](uint64_t seed) {
    FaultyOptions o = options(seed);
    o.error_probability = 0.3;
    o.error_code = StatusCode::kDeadlineExceeded;
    FaultyBackend faulty(*fake_, o);
    std::vector<bool> failed;
    for (int i = 0; i < 200; ++i) {
      auto s = faulty.sample();
      if (!s.ok()) {
        EXPECT_EQ(s.status().code(), StatusCode::kDeadlineExceeded);
        EXPECT_NE(s.status().message().find("injected"), std::string::npos);
      }
      failed.push_back(!s.ok());
    }
    EXPECT_EQ(faulty.injectedErrors(),
              static_cast<uint64_t>(std::count(failed.begin(), failed.end(), true)));
    return failed;
  };
  auto a = run(7);
  auto b = run(7);
  auto c = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto failures = std::count(a.begin(), a.end(), true);
  EXPECT_GT(failures, 30);  // expected 60 of 200
  EXPECT_LT(failures, 90);
}

TEST_F(FaultyBackendTest, LatencyGoesThroughTheDelayHook) {
  FaultyOptions o = options(3);
  o.max_latency = Micros(50'000);
  FaultyBackend faulty(*fake_, o);
  const Micros before = clock_.monotonic();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(faulty.sample().ok());
  const Micros spent = clock_.monotonic() - before;
  EXPECT_EQ(spent, faulty.injectedLatency());
  EXPECT_GT(spent.count(), 0);
  EXPECT_LE(spent.count(), 20 * 50'000);
}

}  // namespace
}  // namespace gpool::gpu
