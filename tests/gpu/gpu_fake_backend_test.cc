#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "common/clock.h"
#include "gpu/backend_factory.h"
#include "gpu/fake_backend.h"
#include "gpu/fake_fixture.h"
#include "gpu_test_util.h"

namespace gpool::gpu {
namespace {

using std::chrono::seconds;
using testing::fixturePath;

std::unique_ptr<FakeBackend> load(const std::string& name, const Clock& clock,
                                  std::string_view node = "") {
  auto backend = FakeBackend::fromFile(fixturePath(name), clock, node);
  EXPECT_TRUE(backend.ok()) << backend.status().toString();
  return backend.ok() ? std::move(backend).value() : nullptr;
}

TEST(FakeFixtureTest, EveryShippedFixtureParses) {
  int count = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures")) {
    if (entry.path().extension() != ".json") continue;
    auto fixture = loadFakeFixture(entry.path().string());
    EXPECT_TRUE(fixture.ok()) << entry.path() << ": " << fixture.status().toString();
    if (fixture.ok()) {
      EXPECT_FALSE(fixture->description.empty()) << entry.path();
      EXPECT_FALSE(fixture->gpus.empty()) << entry.path();
    }
    ++count;
  }
  EXPECT_GE(count, 4);
}

TEST(FakeBackendTest, A100NodeIsEightSimulatedGpusWithNvLinkAllToAll) {
  SimClock clock;
  auto backend = load("8x-a100-sxm4-80gb-nvlink.json", clock);
  ASSERT_NE(backend, nullptr);
  EXPECT_TRUE(backend->simulated());
  EXPECT_EQ(backend->name(), "fake");
  auto inv = backend->inventory();
  ASSERT_TRUE(inv.ok()) << inv.status().toString();
  EXPECT_TRUE(inv->simulated);
  EXPECT_EQ(inv->backend, "fake");
  EXPECT_EQ(inv->driver_version, "550.54.15");
  EXPECT_EQ(inv->cuda_driver_version, "12.4");
  ASSERT_EQ(inv->gpus.size(), 8u);
  std::set<std::string> uuids;
  for (uint32_t i = 0; i < 8; ++i) {
    const GpuInfo& gpu = inv->gpus[i];
    EXPECT_EQ(gpu.index, i);
    EXPECT_EQ(gpu.model, "NVIDIA A100-SXM4-80GB (simulated)");
    EXPECT_TRUE(gpu.simulated);
    EXPECT_EQ(gpu.memory_total_mib, 81920u);
    EXPECT_EQ(gpu.compute_capability_major, 8);
    EXPECT_EQ(gpu.compute_capability_minor, 0);
    EXPECT_FALSE(gpu.mig_enabled);
    EXPECT_EQ(gpu.uuid.rfind("GPU-", 0), 0u) << gpu.uuid;
    uuids.insert(gpu.uuid);
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(inv->gpus[2].pci_bus_id, "00000000:47:00.0");
  ASSERT_EQ(inv->links.size(), 28u);  // 8 choose 2
  for (const GpuLink& link : inv->links) {
    EXPECT_EQ(link.level, TopologyLevel::kNvLink);
    EXPECT_EQ(link.nvlink_count, 12u);
  }
  EXPECT_EQ(topologyLevelName(inv->linkBetween(7, 3)->level, inv->linkBetween(7, 3)->nvlink_count),
            "NV12");
}

TEST(FakeBackendTest, A6000NodeHasNvLinkPairsAndPcieBetweenSockets) {
  SimClock clock;
  auto backend = load("8x-rtx-a6000-pcie-pairs.json", clock);
  ASSERT_NE(backend, nullptr);
  auto inv = backend->inventory();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus.size(), 8u);
  EXPECT_EQ(inv->linkBetween(0, 1)->level, TopologyLevel::kNvLink);
  EXPECT_EQ(inv->linkBetween(1, 0)->nvlink_count, 4u);
  EXPECT_EQ(inv->linkBetween(6, 7)->level, TopologyLevel::kNvLink);
  EXPECT_EQ(inv->linkBetween(0, 2)->level, TopologyLevel::kNode);
  EXPECT_EQ(inv->linkBetween(5, 7)->level, TopologyLevel::kNode);
  EXPECT_EQ(inv->linkBetween(3, 4)->level, TopologyLevel::kSys);
  EXPECT_EQ(inv->linkBetween(1, 2), inv->linkBetween(2, 1));
  auto sample = backend->sample();
  ASSERT_TRUE(sample.ok());
  EXPECT_FALSE(sample->gpus[0].ecc_corrected.has_value()) << "ECC is off in this fixture";
}

TEST(FakeBackendTest, H100NodeReportsMigInstances) {
  SimClock clock;
  auto backend = load("2x-h100-mig.json", clock);
  ASSERT_NE(backend, nullptr);
  auto inv = backend->inventory();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_TRUE(inv->gpus[0].mig_enabled);
  ASSERT_EQ(inv->gpus[0].mig_instances.size(), 2u);
  EXPECT_EQ(inv->gpus[0].mig_instances[1].profile, "3g.40gb");
  EXPECT_EQ(inv->gpus[0].mig_instances[1].memory_mib, 40192u);
  ASSERT_EQ(inv->gpus[1].mig_instances.size(), 7u);
  std::set<std::string> uuids;
  for (const GpuInfo& gpu : inv->gpus) {
    for (const MigInstance& mig : gpu.mig_instances) {
      EXPECT_EQ(mig.uuid.rfind("MIG-", 0), 0u);
      uuids.insert(mig.uuid);
    }
  }
  EXPECT_EQ(uuids.size(), 9u);
  EXPECT_EQ(inv->gpus[1].compute_capability_major, 9);
  EXPECT_EQ(inv->linkBetween(0, 1)->nvlink_count, 18u);
}

TEST(FakeBackendTest, NodeNameSaltsGeneratedUuidsDeterministically) {
  SimClock clock;
  auto a1 = load("8x-a100-sxm4-80gb-nvlink.json", clock, "node-a");
  auto a2 = load("8x-a100-sxm4-80gb-nvlink.json", clock, "node-a");
  auto b = load("8x-a100-sxm4-80gb-nvlink.json", clock, "node-b");
  ASSERT_TRUE(a1 && a2 && b);
  auto ia1 = a1->inventory();
  auto ia2 = a2->inventory();
  auto ib = b->inventory();
  EXPECT_EQ(ia1->gpus[3].uuid, ia2->gpus[3].uuid);
  EXPECT_NE(ia1->gpus[3].uuid, ib->gpus[3].uuid);
}

TEST(FakeBackendTest, ScriptPlaysOverSimulatedTime) {
  SimClock clock;
  auto backend = load("4x-a100-faults.json", clock);
  ASSERT_NE(backend, nullptr);
  const std::string gpu0 = backend->fixture().gpus[0].uuid;
  const std::string gpu3 = backend->fixture().gpus[3].uuid;

  auto s0 = backend->sample();
  ASSERT_TRUE(s0.ok());
  EXPECT_TRUE(s0->simulated);
  EXPECT_EQ(s0->taken_at, clock.now());
  ASSERT_EQ(s0->gpus.size(), 4u);
  EXPECT_TRUE(s0->gpus[0].processes.empty());
  EXPECT_EQ(s0->gpus[0].utilization_pct, 5u);
  EXPECT_EQ(s0->gpus[0].memory_used_mib, 0u);
  EXPECT_EQ(s0->gpus[2].ecc_uncorrected, 0u);

  clock.advance(seconds(2));  // step 2: a process appears on GPU 0
  EXPECT_EQ(backend->currentStep(), 2);
  auto s2 = backend->sample();
  ASSERT_EQ(s2->gpus[0].processes.size(), 1u);
  EXPECT_EQ(s2->gpus[0].processes[0], (GpuProcess{31337, 6144}));
  EXPECT_EQ(s2->gpus[0].memory_used_mib, 6144u);
  EXPECT_EQ(backend->processes(gpu0)->size(), 1u);

  clock.advance(seconds(2));  // step 4: XID 79 on GPU 3, reported once
  auto s4 = backend->sample();
  EXPECT_EQ(s4->gpus[3].xid_errors, std::vector<uint32_t>{79});
  auto s4b = backend->sample();
  EXPECT_TRUE(s4b->gpus[3].xid_errors.empty());

  clock.advance(seconds(1));  // step 5: GPU 3 is gone
  auto inv5 = backend->inventory();
  EXPECT_EQ(inv5->gpus.size(), 3u);
  EXPECT_EQ(inv5->findGpu(gpu3), nullptr);
  EXPECT_EQ(inv5->links.size(), 3u);
  EXPECT_EQ(backend->sample()->gpus.size(), 3u);
  EXPECT_EQ(backend->processes(gpu3).status().code(), StatusCode::kNotFound);

  clock.advance(seconds(3));  // steps 6-8: ECC on GPU 2, GPU 1 overheats
  auto s8 = backend->sample();
  EXPECT_EQ(s8->gpus[2].ecc_uncorrected, 2u);
  EXPECT_EQ(s8->gpus[2].ecc_corrected, 12u);
  EXPECT_EQ(s8->gpus[1].temperature_c, 94);
  EXPECT_DOUBLE_EQ(s8->gpus[1].power_w, 395);

  clock.advance(seconds(1));  // step 9: the process exits, leaving memory behind
  auto s9 = backend->sample();
  EXPECT_TRUE(s9->gpus[0].processes.empty());
  EXPECT_EQ(s9->gpus[0].memory_used_mib, 3000u);
}

TEST(FakeBackendTest, KillProcessRecordsTheKillAndRemovesTheProcess) {
  SimClock clock;
  auto backend = load("8x-a100-sxm4-80gb-nvlink.json", clock);
  ASSERT_NE(backend, nullptr);
  const std::string uuid = backend->inventory()->gpus[5].uuid;
  ASSERT_TRUE(backend->startProcess(uuid, 777, 1024).isOk());
  ASSERT_TRUE(backend->startProcess(uuid, 778, 512).isOk());
  EXPECT_EQ(backend->sample()->gpus[5].memory_used_mib, 1536u);

  clock.advance(seconds(3));
  EXPECT_TRUE(backend->killProcess(uuid, 777).isOk());
  EXPECT_EQ(backend->killProcess(uuid, 777).code(), StatusCode::kNotFound);
  EXPECT_EQ(backend->killProcess("GPU-nope", 778).code(), StatusCode::kNotFound);
  EXPECT_EQ(backend->killProcess(backend->inventory()->gpus[4].uuid, 778).code(),
            StatusCode::kNotFound)
      << "a pid on another GPU must not be killed";
  auto kills = backend->kills();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].uuid, uuid);
  EXPECT_EQ(kills[0].pid, 777);
  EXPECT_EQ(kills[0].at, clock.now());
  EXPECT_EQ(*backend->processes(uuid), (std::vector<GpuProcess>{{778, 512}}));
  EXPECT_TRUE(backend->exitProcess(uuid, 778).isOk());
  EXPECT_TRUE(backend->processes(uuid)->empty());
  EXPECT_EQ(backend->startProcess("GPU-nope", 1, 1).code(), StatusCode::kNotFound);
}

TEST(FakeBackendTest, StructFixtureNeedsNoFile) {
  FakeFixture fixture;
  FakeGpuSpec gpu;
  gpu.uuid = "GPU-11111111-2222-3333-4444-555555555555";
  gpu.pci_bus_id = "00000000:3B:00.0";
  gpu.model = "Tesla T4";
  gpu.memory_total_mib = 15360;
  gpu.compute_capability_major = 7;
  gpu.compute_capability_minor = 5;
  fixture.gpus.push_back(gpu);
  fixture.initial = {1, 2, 3, 40, 70.5, 585, 5000};
  FakeEvent xid;
  xid.step = 1;
  xid.gpu = 0;
  xid.kind = FakeEventKind::kXid;
  xid.xid = 48;
  fixture.events.push_back(xid);
  SimClock clock;
  FakeBackend backend(fixture, clock);
  auto s = backend.sample();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->gpus[0].memory_used_mib, 3u);
  EXPECT_EQ(s->gpus[0].sm_clock_mhz, 585u);
  EXPECT_EQ(s->gpus[0].memory_clock_mhz, 5000u);
  clock.advance(seconds(1));
  EXPECT_EQ(backend.sample()->gpus[0].xid_errors, std::vector<uint32_t>{48});
  EXPECT_EQ(backend.inventory()->gpus[0].model, "Tesla T4 (simulated)");
}

struct BadFixture {
  const char* json;
  const char* expected_in_message;
};

TEST(FakeFixtureTest, ErrorsNameTheOffendingField) {
  const BadFixture cases[] = {
      {"{", "not valid JSON"},
      {R"({"gpus": []})", "gpus: expected a non-empty array"},
      {R"({"gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "8"}]})",
       "gpus[0].compute_capability"},
      {R"({"gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "8.0", "colour": 1}]})",
       "unknown field 'colour'"},
      {R"({"gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "8.0"}],
           "topology": {"links": [{"gpus": [0, 3], "level": "NV4"}]}})",
       "topology.links[0].gpus[1]: GPU 3 does not exist"},
      {R"({"gpus": [{"count": 2, "model": "X", "memory_mib": 1, "compute_capability": "8.0"}],
           "topology": {"links": [{"gpus": [0, 1], "level": "NVL"}]}})",
       "unknown topology level 'NVL'"},
      {R"({"gpus": [{"model": "X", "memory_mib": 100, "compute_capability": "8.0",
            "mig": {"enabled": true, "instances": [{"profile": "1g", "memory_mib": 60, "count": 2}]}}]})",
       "instances need 120 MiB"},
      {R"({"gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "8.0"}],
           "script": [{"step": 1, "gpu": 0, "xid": 79, "disappear": true}]})",
       "script[0]: needs exactly one of"},
      {R"({"gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "8.0"}],
           "script": [{"step": 1, "gpu": 0, "set": {"utilization_pct": 101}}]})",
       "script[0].set.utilization_pct"},
  };
  for (const BadFixture& c : cases) {
    auto fixture = parseFakeFixture(c.json);
    ASSERT_FALSE(fixture.ok()) << c.json;
    EXPECT_EQ(fixture.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(fixture.status().message().find(c.expected_in_message), std::string::npos)
        << fixture.status().message();
  }
  auto missing = loadFakeFixture("/nonexistent/fixture.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(TopologyLevelTest, NamesRoundTrip) {
  for (const char* name : {"X", "NV1", "NV12", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS"}) {
    uint32_t links = 0;
    auto level = parseTopologyLevel(name, &links);
    ASSERT_TRUE(level.ok()) << name;
    EXPECT_EQ(topologyLevelName(*level, links), name);
  }
  uint32_t links = 0;
  EXPECT_FALSE(parseTopologyLevel("NV0", &links).ok());
  EXPECT_FALSE(parseTopologyLevel("NV", &links).ok());
  EXPECT_FALSE(parseTopologyLevel("pix", &links).ok());
}

}  // namespace
}  // namespace gpool::gpu

namespace gpool::gpu {
namespace {

TEST(GpuBackendFactoryTest, FixtureGivesTheSimulatedFake) {
  SimClock clock;
  GpuBackendOptions options;
  options.fake_fixture = testing::fixturePath("2x-h100-mig.json");
  options.node_name = "gpu-node-7";
  auto backend = makeGpuBackend(options, clock);
  ASSERT_TRUE(backend.ok()) << backend.status().toString();
  EXPECT_EQ((*backend)->name(), "fake");
  EXPECT_TRUE((*backend)->simulated());
  auto salted = (*backend)->inventory();
  SimClock other;
  auto unsalted = FakeBackend::fromFile(options.fake_fixture, other);
  EXPECT_NE(salted->gpus[0].uuid, (*unsalted)->inventory()->gpus[0].uuid);

  options.fake_fixture = "/nonexistent.json";
  EXPECT_EQ(makeGpuBackend(options, clock).status().code(), StatusCode::kNotFound);
}

TEST(GpuBackendFactoryTest, WithoutNvmlTheReasonIsGiven) {
  SimClock clock;
  GpuBackendOptions options;
  options.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  auto backend = makeGpuBackend(options, clock);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(backend.status().message().find("cannot load NVML"), std::string::npos);
}

}  // namespace
}  // namespace gpool::gpu
