#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "gpu/fake_backend.h"
#include "gpu/health.h"
#include "gpu_test_util.h"

namespace gpool::gpu {
namespace {

using std::chrono::seconds;
using testing::fixturePath;

const Finding* find(const std::vector<Finding>& findings, std::string_view check,
                    std::string_view uuid = {}) {
  for (const Finding& f : findings) {
    if (f.check == check && (uuid.empty() || f.gpu_uuid == uuid)) return &f;
  }
  return nullptr;
}

std::string describe(const std::vector<Finding>& findings) {
  std::string out;
  for (const Finding& f : findings)
    out += f.check + ": " + f.message + "\n";
  return out;
}

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fake = FakeBackend::fromFile(fixturePath("4x-a100-faults.json"), clock_);
    ASSERT_TRUE(fake.ok()) << fake.status().toString();
    fake_ = std::move(fake).value();
    for (const FakeGpuSpec& gpu : fake_->fixture().gpus)
      uuids_.push_back(gpu.uuid);
    config_.expected_gpu_count = 4;
    config_.expected_uuids = uuids_;
  }

  std::vector<Finding> check() {
    auto inv = fake_->inventory();
    auto sample = fake_->sample();
    EXPECT_TRUE(inv.ok() && sample.ok());
    return checkHealth(*inv, *sample, config_);
  }

  SimClock clock_;
  std::unique_ptr<FakeBackend> fake_;
  std::vector<std::string> uuids_;
  HealthConfig config_;
};

TEST_F(HealthTest, HealthyNodeHasNoFindings) {
  auto findings = check();
  EXPECT_TRUE(findings.empty()) << describe(findings);
}

TEST_F(HealthTest, ScriptedFaultsBecomeFindings) {
  clock_.advance(seconds(4));
  auto at4 = check();
  const Finding* xid = find(at4, "xid", uuids_[3]);
  ASSERT_NE(xid, nullptr) << describe(at4);
  EXPECT_EQ(xid->severity, Severity::kCritical);
  EXPECT_TRUE(xid->unhealthy);
  EXPECT_NE(xid->message.find("XID 79 (GPU has fallen off the bus)"), std::string::npos);

  clock_.advance(seconds(1));
  auto at5 = check();
  const Finding* missing = find(at5, "gpu_missing", uuids_[3]);
  ASSERT_NE(missing, nullptr) << describe(at5);
  EXPECT_TRUE(missing->unhealthy);
  const Finding* count = find(at5, "gpu_count");
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count->message, "the node reports 3 GPUs, 4 are configured");
  EXPECT_EQ(find(at5, "xid"), nullptr) << "an XID is reported once";

  clock_.advance(seconds(3));
  auto at8 = check();
  const Finding* ecc = find(at8, "ecc_uncorrected", uuids_[2]);
  ASSERT_NE(ecc, nullptr) << describe(at8);
  EXPECT_TRUE(ecc->unhealthy);
  EXPECT_EQ(find(at8, "ecc_corrected"), nullptr) << "12 corrected errors are below the limit";
  const Finding* hot = find(at8, "too_hot", uuids_[1]);
  ASSERT_NE(hot, nullptr);
  EXPECT_EQ(hot->severity, Severity::kCritical);
  EXPECT_TRUE(hot->unhealthy);
  EXPECT_NE(hot->message.find("94 C"), std::string::npos);

  config_.max_ecc_corrected = 10;
  config_.max_temperature_c = 95;
  auto relaxed = check();
  EXPECT_NE(find(relaxed, "ecc_corrected", uuids_[2]), nullptr);
  ASSERT_NE(find(relaxed, "too_hot", uuids_[1]), nullptr);
  EXPECT_EQ(find(relaxed, "too_hot", uuids_[1])->severity, Severity::kWarning);
  EXPECT_FALSE(find(relaxed, "too_hot", uuids_[1])->unhealthy);
}

TEST_F(HealthTest, ApplicationXidsAreWarningsThatKeepTheGpu) {
  Inventory inv = *fake_->inventory();
  TelemetrySample sample = *fake_->sample();
  sample.gpus[0].xid_errors = {13, 48};
  auto findings = checkHealth(inv, sample, config_);
  ASSERT_EQ(findings.size(), 2u) << describe(findings);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_FALSE(findings[0].unhealthy);
  EXPECT_EQ(findings[1].severity, Severity::kCritical);
  EXPECT_TRUE(findings[1].unhealthy);
  EXPECT_NE(findings[1].message.find("double-bit ECC"), std::string::npos);
}

TEST_F(HealthTest, VersionsDifferingFromThePoolAreReported) {
  config_.pool_driver_version = "535.129.03";
  config_.pool_cuda_driver_version = "12.2";
  EXPECT_TRUE(check().empty());
  config_.pool_driver_version = "550.54.15";
  config_.pool_cuda_driver_version = "12.4";
  auto findings = check();
  ASSERT_NE(find(findings, "driver_mismatch"), nullptr) << describe(findings);
  EXPECT_EQ(find(findings, "driver_mismatch")->message,
            "driver 535.129.03 differs from the pool's 550.54.15");
  EXPECT_NE(find(findings, "cuda_mismatch"), nullptr);
  EXPECT_FALSE(find(findings, "cuda_mismatch")->unhealthy);
}

TEST_F(HealthTest, JobNeedsAreCheckedAgainstDriverAndComputeCapability) {
  Inventory inv = *fake_->inventory();  // driver 535.129.03, CUDA 12.2, CC 8.0
  EXPECT_TRUE(checkJobNeeds(inv, {"12.2", "535.104", 8, 0}).empty());
  EXPECT_TRUE(checkJobNeeds(inv, {}).empty());
  auto findings = checkJobNeeds(inv, {"12.4", "550", 9, 0});
  EXPECT_NE(find(findings, "cuda_too_old"), nullptr) << describe(findings);
  EXPECT_NE(find(findings, "driver_too_old"), nullptr);
  EXPECT_EQ(std::count_if(findings.begin(), findings.end(),
                          [](const Finding& f) { return f.check == "compute_capability"; }),
            4);
}

TEST(StrayTrackerTest, OnlyProcessesStrayForTheWholeGracePeriodAreDue) {
  auto stray = [](std::string uuid, int pid) {
    Finding f;
    f.check = "stray_process";
    f.gpu_uuid = std::move(uuid);
    f.pid = pid;
    return f;
  };
  Finding leak;
  leak.check = "leaked_memory";
  leak.gpu_uuid = "GPU-a";
  SimClock clock;
  StrayTracker tracker(std::chrono::seconds(30));
  EXPECT_TRUE(tracker.update({stray("GPU-a", 1), leak}, clock.now()).empty());
  clock.advance(seconds(20));
  EXPECT_TRUE(tracker.update({stray("GPU-a", 1), stray("GPU-b", 1)}, clock.now()).empty());
  clock.advance(seconds(10));
  auto due = tracker.update({stray("GPU-a", 1), stray("GPU-b", 1)}, clock.now());
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].gpu_uuid, "GPU-a");
  clock.advance(seconds(5));
  EXPECT_TRUE(tracker.update({stray("GPU-b", 1)}, clock.now()).empty()) << "GPU-b: 15 s";
  clock.advance(seconds(1));
  EXPECT_TRUE(tracker.update({stray("GPU-a", 1)}, clock.now()).empty())
      << "GPU-a's process was gone for one check: it starts over";
  clock.advance(seconds(30));
  EXPECT_EQ(tracker.update({stray("GPU-a", 1)}, clock.now()).size(), 1u);
}

TEST(CommonVersionsTest, MajorityWinsAndTiesGoToTheNewer) {
  auto node = [](std::string driver, std::string cuda, size_t gpus) {
    Inventory inv;
    inv.driver_version = std::move(driver);
    inv.cuda_driver_version = std::move(cuda);
    inv.gpus.resize(gpus);
    return inv;
  };
  PoolVersions v = commonVersions({node("550.54.15", "12.4", 8), node("535.129.03", "12.2", 8),
                                   node("550.54.15", "12.4", 2), node("470.1", "11.4", 0)});
  EXPECT_EQ(v.driver_version, "550.54.15");
  EXPECT_EQ(v.cuda_driver_version, "12.4");
  v = commonVersions({node("535.129.03", "12.2", 1), node("550.54.15", "12.4", 1)});
  EXPECT_EQ(v.driver_version, "550.54.15");
  EXPECT_TRUE(commonVersions({}).driver_version.empty());
}

TEST(CompareVersionsTest, ComparesNumerically) {
  EXPECT_EQ(compareVersions("535.129.03", "535.129.3"), 0);
  EXPECT_LT(compareVersions("535.54", "535.129.03"), 0);
  EXPECT_GT(compareVersions("12.10", "12.9"), 0);
  EXPECT_EQ(compareVersions("12", "12.0"), 0);
  EXPECT_LT(compareVersions("12.2", "12.2.1"), 0);
  EXPECT_LT(compareVersions("", "1"), 0);
  EXPECT_NE(compareVersions("550.a", "550.b"), 0);
}

TEST_F(HealthTest, StrayAndDeadTaskProcessesAndLeftMemoryAreFound) {
  ASSERT_TRUE(fake_->startProcess(uuids_[1], 100, 2000).isOk());  // a task's
  ASSERT_TRUE(fake_->startProcess(uuids_[1], 101, 300).isOk());   // an ended task's
  ASSERT_TRUE(fake_->startProcess(uuids_[2], 102, 700).isOk());   // nobody's
  clock_.advance(seconds(2));  // the fixture's own stray process 31337 on GPU 0
  GpuOwnership ownership;
  ownership.task_pids[uuids_[1]] = {100};
  ownership.dead_task_pids[uuids_[1]] = {101};
  ownership.task_pids[uuids_[2]] = {100};  // pid 100 belongs to a task, but not on GPU 2

  auto findings = findStrayProcesses(*fake_->sample(), ownership);
  ASSERT_EQ(findings.size(), 3u) << describe(findings);
  const Finding* stray0 = find(findings, "stray_process", uuids_[0]);
  ASSERT_NE(stray0, nullptr);
  EXPECT_EQ(stray0->pid, 31337);
  EXPECT_EQ(stray0->used_mib, 6144u);
  EXPECT_FALSE(stray0->unhealthy);
  const Finding* dead = find(findings, "dead_task_process", uuids_[1]);
  ASSERT_NE(dead, nullptr);
  EXPECT_EQ(dead->pid, 101);
  EXPECT_EQ(find(findings, "stray_process", uuids_[2])->pid, 102);

  auto outcomes = killStrayProcesses(*fake_, findings);
  ASSERT_EQ(outcomes.size(), 3u);
  for (const KillOutcome& o : outcomes)
    EXPECT_TRUE(o.status.isOk()) << o.status.toString();
  EXPECT_EQ(fake_->kills().size(), 3u);
  EXPECT_TRUE(findStrayProcesses(*fake_->sample(), ownership).empty());
  EXPECT_EQ(fake_->processes(uuids_[1])->size(), 1u) << "the live task's process survives";
  // A stale finding (process already gone) is refused rather than killing a reused pid.
  auto again = killStrayProcesses(*fake_, findings);
  EXPECT_EQ(again[0].status.code(), StatusCode::kNotFound);

  clock_.advance(seconds(7));  // step 9: memory left behind on GPU 0 with no process
  auto leaked = findStrayProcesses(*fake_->sample(), ownership);
  const Finding* memory = find(leaked, "leaked_memory", uuids_[0]);
  ASSERT_NE(memory, nullptr) << describe(leaked);
  EXPECT_EQ(memory->used_mib, 3000u);
  EXPECT_TRUE(findStrayProcesses(*fake_->sample(), ownership, {.leaked_memory_threshold_mib = 4096})
                  .empty());
}

}  // namespace
}  // namespace gpool::gpu
