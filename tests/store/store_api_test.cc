#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/allocation.h"
#include "api/job_spec.h"
#include "api/json_reader.h"
#include "store/api_codec.h"
#include "store/store_test_fixture.h"

namespace gpool::store::testing {
namespace {

api::JobSpec sampleSpec() {
  api::JobSpec spec;
  spec.name = "train";
  spec.command = {"python", "train.py", "--lr", "3e-4"};
  spec.env = {{"WANDB_MODE", "offline"}};
  spec.resources.gpus_milli = 500;
  spec.tasks = 2;
  spec.time_limit_seconds = 3600;
  return spec;
}

api::Gpu sampleGpu(uint32_t i) {
  api::Gpu g;
  g.uuid = "GPU-0000000" + std::to_string(i);
  g.index = i;
  g.model = "NVIDIA A100-SXM4-80GB";
  g.memory_mib = 80 * 1024;
  g.compute_capability = {8, 0};
  g.driver_version = "535.104.05";
  g.cuda_version = "12.2";
  g.simulated = true;
  return g;
}

using ApiCodecTest = StoreTest;

TEST_P(ApiCodecTest, JobRoundTripsThroughTheStore) {
  const api::JobSpec spec = sampleSpec();
  auto ids = submitApiJob(store(), "alice", 1001, "vision", spec, at(0));
  ASSERT_TRUE(ids.ok()) << ids.status().toString();
  ASSERT_EQ(ids->size(), 1u);
  auto job = loadApiJob(store(), ids->at(0));
  ASSERT_TRUE(job.ok()) << job.status().toString();
  EXPECT_EQ(job->id, static_cast<uint64_t>(ids->at(0)));
  EXPECT_EQ(job->spec, spec);
  EXPECT_EQ(job->user, "alice");
  EXPECT_EQ(job->uid, 1001u);
  EXPECT_EQ(job->group, "vision");
  EXPECT_EQ(job->state, api::JobState::kPending);
  EXPECT_EQ(job->submit_time, at(0));
  EXPECT_TRUE(job->allocations.empty());
  // Accounting counts both tasks' slices.
  EXPECT_EQ(store().getJob(ids->at(0))->gpu_thousandths, 1000u);

  std::vector<api::Allocation> allocations(2);
  for (uint32_t t = 0; t < 2; ++t) {
    allocations[t].task = t;
    allocations[t].node = "gpu-01";
    allocations[t].slices = {api::Slice{"GPU-00000000", 40 * 1024, 500, false}};
    allocations[t].cpus_milli = 4000;
    allocations[t].ram_mib = 16 * 1024;
  }
  allocations[1].slices[0].gpu_uuid = "GPU-00000001";
  ASSERT_TRUE(
      store().recordPlacement(ids->at(0), placementJsonFor(allocations), at(5), "placed").ok());
  job = loadApiJob(store(), ids->at(0));
  ASSERT_TRUE(job.ok()) << job.status().toString();
  EXPECT_EQ(job->state, api::JobState::kRunning);
  EXPECT_EQ(job->allocations, allocations);
  EXPECT_EQ(job->start_time, at(5));
  // What the store hands back satisfies the api's own invariants.
  api::Job reparsed;
  EXPECT_TRUE(api::fromJson(api::toJson(*job), &reparsed).isOk());
  EXPECT_EQ(reparsed, *job);
}

TEST_P(ApiCodecTest, ArraySubmissionBecomesOneArray) {
  api::JobSpec spec = sampleSpec();
  auto array = api::parseArraySpec("0-6:2%2");
  ASSERT_TRUE(array.ok()) << array.status().toString();
  spec.array = *array;
  auto ids = submitApiJob(store(), "bob", 1002, "ml", spec, at(0));
  ASSERT_TRUE(ids.ok()) << ids.status().toString();
  ASSERT_EQ(ids->size(), 4u);
  for (size_t i = 0; i < ids->size(); ++i) {
    auto job = loadApiJob(store(), ids->at(i));
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->array_job_id, static_cast<uint64_t>(ids->at(0)));
    EXPECT_EQ(job->array_index, static_cast<uint32_t>(2 * i));
    EXPECT_EQ(api::formatJobId(*job), std::to_string(ids->at(0)) + "_" + std::to_string(2 * i));
  }
}

// A list serves each job as apiJobJsonText writes it, splicing the stored spec in as stored: the
// bytes must be exactly what show writes (strict decode, then encode) for every kind of row.
TEST_P(ApiCodecTest, ListTextIsWhatShowWrites) {
  api::JobSpec spec = sampleSpec();
  spec.name = "q\"uote \\ \"spec\":null \u00e9t\u00e9 \U0001F680";
  spec.env["ODD"] = "{\"spec\":null}";
  auto array = api::parseArraySpec("0-2");
  ASSERT_TRUE(array.ok());
  spec.array = *array;
  auto ids = submitApiJob(store(), "dora", 1004, "ml", spec, at(0));
  ASSERT_TRUE(ids.ok()) << ids.status().toString();
  auto plain = submitApiJob(store(), "dora", 1004, "", sampleSpec(), at(1));
  ASSERT_TRUE(plain.ok());
  std::vector<api::Allocation> allocations(2);
  for (uint32_t t = 0; t < 2; ++t) {
    allocations[t].task = t;
    allocations[t].node = "gpu-01";
    allocations[t].slices = {api::Slice{"GPU-0000000" + std::to_string(t), 1024, 500, false}};
  }
  ASSERT_TRUE(
      store().recordPlacement(ids->at(1), placementJsonFor(allocations), at(5), "placed").ok());
  ASSERT_TRUE(
      store().recordPlacement(plain->at(0), placementJsonFor(allocations), at(5), "p").ok());
  ASSERT_TRUE(
      store().recordEnd(plain->at(0), api::JobState::kFailed, 3, at(9), "exit \"3\"").isOk());
  JobFilter filter;
  filter.user = "dora";
  auto page = store().listJobs(filter);
  ASSERT_TRUE(page.ok()) << page.status().toString();
  ASSERT_EQ(page->jobs.size(), 4u);
  for (const JobRecord& record : page->jobs) {
    auto job = apiJobFrom(record);
    ASSERT_TRUE(job.ok()) << job.status().toString();
    auto text = apiJobJsonText(record);
    ASSERT_TRUE(text.ok()) << text.status().toString();
    EXPECT_EQ(*text, api::dumpJson(api::toJson(*job))) << "job " << record.id;
  }
}

TEST_P(ApiCodecTest, NodeWithItsGpusRoundTrips) {
  api::Node node;
  node.name = "gpu-01.lab";
  node.labels = {{"rack", "r1"}};
  node.cpus_milli = 64'000;
  node.ram_mib = 512 * 1024;
  node.state = api::NodeState::kMixed;
  node.gpus = {sampleGpu(0), sampleGpu(1)};
  node.gpus[0].links = {{"GPU-00000001", 12, api::PcieLevel::kPxb}};
  node.gpus[1].links = {{"GPU-00000000", 12, api::PcieLevel::kPxb}};
  node.last_seen = at(7);
  ASSERT_TRUE(saveApiNode(store(), node).isOk());
  auto loaded = loadApiNode(store(), "gpu-01.lab");
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ(*loaded, node);

  // A re-registration without GPU 1 drops it, in the same transaction as the node update.
  node.gpus.pop_back();
  node.gpus[0].links.clear();
  node.state = api::NodeState::kIdle;
  ASSERT_TRUE(saveApiNode(store(), node).isOk());
  loaded = loadApiNode(store(), "gpu-01.lab");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(*loaded, node);
  EXPECT_EQ(store().listGpus("")->size(), 1u);
}

TEST_P(ApiCodecTest, UsersGroupsQuotasAndQos) {
  api::User user;
  user.name = "alice";
  user.uid = 1001;
  user.groups = {"vision"};
  user.role = api::Role::kGroupAdmin;
  api::Quota quota;
  quota.max_gpus_milli = 2000;
  quota.gpu_hours = 500;
  user.quota = quota;  // ignored by saveApiUser: quotas have their own table
  ASSERT_TRUE(saveApiUser(store(), user).isOk());
  auto loaded = loadApiUser(store(), "alice");
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_FALSE(loaded->quota.has_value());
  ASSERT_TRUE(saveApiQuota(store(), QuotaSubject::kUser, "alice", quota, "root", at(1)).isOk());
  loaded = loadApiUser(store(), "alice");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(*loaded, user);

  api::Group group;
  group.name = "vision";
  group.gid = 2000;
  group.project_dir = "/srv/projects/vision";
  ASSERT_TRUE(saveApiGroup(store(), group).isOk());
  api::Quota group_quota;
  group_quota.guaranteed_gpus_milli = 4000;
  ASSERT_TRUE(
      saveApiQuota(store(), QuotaSubject::kGroup, "vision", group_quota, "root", at(2)).isOk());
  group.quota = group_quota;
  auto loaded_group = loadApiGroup(store(), "vision");
  ASSERT_TRUE(loaded_group.ok()) << loaded_group.status().toString();
  EXPECT_EQ(*loaded_group, group);

  api::Qos high;
  high.name = "high";
  high.priority = 1000;
  high.grace_time_seconds = 120;
  api::Qos low;
  low.name = "low";
  low.preemptible = true;
  ASSERT_TRUE(saveApiQos(store(), low).isOk());
  ASSERT_TRUE(saveApiQos(store(), high).isOk());
  auto qos = loadApiQos(store());
  ASSERT_TRUE(qos.ok()) << qos.status().toString();
  ASSERT_EQ(qos->size(), 2u);
  EXPECT_EQ(qos->at(0), high);
  EXPECT_EQ(qos->at(1), low);
}

TEST_P(ApiCodecTest, ACorruptRowIsAnInternalErrorNotACrash) {
  auto ids = submitApiJob(store(), "carol", 1003, "ml", sampleSpec(), at(0));
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(store().execForTest("UPDATE jobs SET spec_json = '{\"name\": 12'").isOk());
  // A list page checks the text it splices in is one JSON object.
  for (const char* bad : {"'{\"name\": 12'", "'[1]'", "'{} {}'", "''"}) {
    ASSERT_TRUE(store().execForTest(std::string("UPDATE jobs SET spec_json = ") + bad).isOk());
    auto text = apiJobJsonText(*store().getJob(ids->at(0)));
    EXPECT_EQ(text.status().code(), StatusCode::kInternal) << bad;
  }
  auto job = loadApiJob(store(), ids->at(0));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInternal);
  EXPECT_NE(job.status().message().find("job " + std::to_string(ids->at(0))), std::string::npos);
  ASSERT_TRUE(store().execForTest("UPDATE jobs SET spec_json = '{\"tasks\": 0}'").isOk());
  job = loadApiJob(store(), ids->at(0));
  EXPECT_EQ(job.status().code(), StatusCode::kInternal);
  ASSERT_TRUE(store().execForTest("UPDATE jobs SET state = 'SLEEPING'").isOk());
  EXPECT_EQ(loadApiJob(store(), ids->at(0)).status().code(), StatusCode::kInternal);
}

INSTANTIATE_TEST_SUITE_P(Backends, ApiCodecTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), backendName);

}  // namespace
}  // namespace gpool::store::testing
