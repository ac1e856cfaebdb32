#include "api/node.h"

#include <gtest/gtest.h>

#include "api/allocation.h"
#include "test_util.h"

namespace gpool::api::testing {
namespace {

using nlohmann::json;

Gpu sampleGpu(int i) {
  Gpu g;
  g.uuid = "GPU-0000000" + std::to_string(i);
  g.index = static_cast<uint32_t>(i);
  g.pci_bus_id = "00000000:3B:00." + std::to_string(i);
  g.model = "NVIDIA A100-SXM4-80GB";
  g.memory_mib = 80 * 1024;
  g.compute_capability = {8, 0};
  g.driver_version = "535.104.05";
  g.cuda_version = "12.2";
  g.mig_mode = MigMode::kDisabled;
  return g;
}

Node sampleNode() {
  Node n;
  n.name = "gpu-01.lab";
  n.labels = {{"rack", "r1"}, {"fabric/ib", "hdr"}};
  n.cpus_milli = 64'000;
  n.ram_mib = 512 * 1024;
  n.state = NodeState::kMixed;
  n.gpus = {sampleGpu(0), sampleGpu(1)};
  n.gpus[0].links = {{"GPU-00000001", 12, PcieLevel::kPxb}};
  n.gpus[1].links = {{"GPU-00000000", 12, PcieLevel::kPxb}};
  n.gpus[1].health = GpuHealth::kDegraded;
  n.gpus[1].health_reason = "temperature 91C";
  n.last_seen = fromUnixSeconds(1'700'000'123);
  return n;
}

TEST(ComputeCapabilityTest, ParsesFormatsAndOrders) {
  EXPECT_EQ(*parseComputeCapability("8.0"), (ComputeCapability{8, 0}));
  EXPECT_EQ(*parseComputeCapability("12.1"), (ComputeCapability{12, 1}));
  EXPECT_EQ(formatComputeCapability({9, 0}), "9.0");
  EXPECT_LT((ComputeCapability{7, 5}), (ComputeCapability{8, 0}));
  EXPECT_LT((ComputeCapability{8, 0}), (ComputeCapability{8, 6}));
  for (const char* bad : {"", "8", "8.", ".8", "8.10", "0.5", "a.b", "123.1", "8.0.1", "-8.0"}) {
    EXPECT_TRUE(failsWith(parseComputeCapability(bad).status(), "compute capability")) << bad;
  }
}

TEST(NodeStateTest, NamesParseBack) {
  for (NodeState s : {NodeState::kIdle, NodeState::kMixed, NodeState::kAllocated,
                      NodeState::kDraining, NodeState::kDrained, NodeState::kDown}) {
    EXPECT_EQ(*parseNodeState(nodeStateName(s)), s);
  }
  EXPECT_EQ(nodeStateName(NodeState::kDraining), "DRAINING");
  EXPECT_EQ(*parseNodeState("drained"), NodeState::kDrained);
  EXPECT_TRUE(failsWith(parseNodeState("UP").status(), "unknown node state 'UP'"));
  EXPECT_TRUE(isSchedulable(NodeState::kIdle));
  EXPECT_TRUE(isSchedulable(NodeState::kMixed));
  EXPECT_FALSE(isSchedulable(NodeState::kDraining));
  EXPECT_FALSE(isSchedulable(NodeState::kDown));
}

TEST(NodeJsonTest, RoundTrips) {
  EXPECT_TRUE(roundTrips(sampleNode()));
  Node minimal;
  minimal.name = "n";
  minimal.cpus_milli = 1;
  EXPECT_TRUE(roundTrips(minimal));
  Gpu simulated = sampleGpu(3);
  simulated.simulated = true;
  simulated.pci_bus_id.clear();
  EXPECT_TRUE(roundTrips(simulated));
}

TEST(NodeJsonTest, WritesCanonicalKeys) {
  json j = toJson(sampleNode());
  EXPECT_EQ(j.at("cpus_milli"), 64000);
  EXPECT_EQ(j.at("ram_mib"), 512 * 1024);
  EXPECT_EQ(j.at("state"), "MIXED");
  EXPECT_EQ(j.at("gpus").at(0).at("memory_mib"), 80 * 1024);
  EXPECT_EQ(j.at("gpus").at(0).at("compute_capability"), "8.0");
  EXPECT_EQ(j.at("gpus").at(0).at("links").at(0).at("pcie"), "PXB");
  EXPECT_EQ(j.at("last_seen_us"), int64_t{1'700'000'123'000'000});
}

TEST(NodeJsonTest, AcceptsShorthand) {
  Node n;
  ASSERT_TRUE(decode(J(R"({"name":"a","cpus":"32","ram":"256G","gpus":[{"uuid":"GPU-1",
      "index":0,"model":"H100","memory":"80G","compute_capability":"9.0"}]})"),
                     &n)
                  .isOk());
  EXPECT_EQ(n.cpus_milli, 32000u);
  EXPECT_EQ(n.ram_mib, 256u * 1024);
  EXPECT_EQ(n.state, NodeState::kIdle);
  ASSERT_EQ(n.gpus.size(), 1u);
  EXPECT_EQ(n.gpus[0].memory_mib, 80u * 1024);
  EXPECT_EQ(n.gpus[0].health, GpuHealth::kHealthy);
}

TEST(NodeJsonTest, RejectsMalformed) {
  auto node = [](const std::string& extra, const std::string& gpus = "[]") {
    return decode<Node>(J(R"({"name":"a","cpus":"8","ram":"1G","gpus":)" + gpus + extra + "}"));
  };
  const std::string gpu = R"({"uuid":"GPU-1","index":0,"model":"H100","memory":"80G",
      "compute_capability":"9.0")";
  EXPECT_TRUE(node("").isOk());
  EXPECT_TRUE(failsWith(node(R"(,"state":"UP")"), "node.state: unknown node state 'UP'"));
  EXPECT_TRUE(failsWith(decode<Node>(J(R"({"name":"a b","cpus":"8","ram":"1G"})")),
                        "node.name: node name 'a b' may only contain"));
  EXPECT_TRUE(failsWith(decode<Node>(J(R"({"name":"","cpus":"8","ram":"1G"})")),
                        "node.name: node name is empty"));
  EXPECT_TRUE(failsWith(decode<Node>(J(R"({"name":"a","cpus":"0","ram":"1G"})")),
                        "node.cpus: CPU count '0' is zero"));
  EXPECT_TRUE(failsWith(decode<Node>(J(R"({"name":"a","ram":"1G"})")),
                        "node.cpus: required field is missing (give 'cpus' or 'cpus_milli')"));
  EXPECT_TRUE(failsWith(node(R"(,"labels":{"bad key":"v"})"), "node.labels: label key"));
  EXPECT_TRUE(failsWith(decode<Gpu>(J(R"({"uuid":"G","index":0,"model":"m",
      "memory":"80Q","compute_capability":"9.0"})")),
                        "gpu.memory: memory size '80Q' has unknown unit 'Q'"));
  EXPECT_TRUE(failsWith(node("", "[" + gpu + R"(,"mig_mode":"on"}])"),
                        "node.gpus[0].mig_mode: unknown MIG mode 'on'"));
  EXPECT_TRUE(failsWith(node("", "[" + gpu + R"(,"healthy":true}])"),
                        "node.gpus[0].healthy: unknown field (did you mean 'health'?)"));
  EXPECT_TRUE(failsWith(node("", "[" + gpu + "}," + gpu + "}]"),
                        "node.gpus[1].uuid: GPU 'GPU-1' is listed twice"));
  EXPECT_TRUE(failsWith(node("", "[" + gpu + R"(,"links":[{"peer_uuid":"GPU-9"}]}])"),
                        "node.gpus[0].links[0].peer_uuid: peer 'GPU-9' is not a GPU of this"));
  EXPECT_TRUE(failsWith(node("", "[" + gpu + R"(,"links":[{"peer_uuid":"GPU-1"}]}])"),
                        "a GPU cannot link to itself"));
  EXPECT_TRUE(failsWith(node("", "[" + gpu + R"(,"links":[{"peer_uuid":"GPU-2","pcie":"X"}]}])"),
                        "node.gpus[0].links[0].pcie: unknown PCIe level 'X'"));
  EXPECT_TRUE(failsWith(decode<Gpu>(J(R"({"uuid":"GPU 1","index":0,"model":"m",
      "memory":"1G","compute_capability":"9.0"})")),
                        "gpu.uuid: uuid 'GPU 1' contains a space"));
  EXPECT_TRUE(failsWith(decode<Gpu>(J(R"({"uuid":"G","index":1024,"model":"m",
      "memory":"1G","compute_capability":"9.0"})")),
                        "gpu.index: is out of range [0, 1023]"));
  EXPECT_TRUE(failsWith(decode<Gpu>(J(R"({"uuid":"G","index":0,"model":"m",
      "memory":"0M","compute_capability":"9.0"})")),
                        "gpu.memory: must be > 0"));
  EXPECT_TRUE(failsWith(decode<Gpu>(J(R"({"uuid":"G","index":0,"model":"m",
      "memory":"1G","compute_capability":"9"})")),
                        "gpu.compute_capability: compute capability '9' is not of the form"));
}

TEST(NodeTest, FindGpu) {
  Node n = sampleNode();
  ASSERT_NE(n.findGpu("GPU-00000001"), nullptr);
  EXPECT_EQ(n.findGpu("GPU-00000001")->index, 1u);
  EXPECT_EQ(n.findGpu("GPU-x"), nullptr);
}

TEST(AllocationJsonTest, RoundTripsAndValidates) {
  Allocation a;
  a.task = 3;
  a.node = "gpu-01";
  a.slices = {{"GPU-1", 10 * 1024, 250, false}, {"GPU-2", 80 * 1024, 1000, true}};
  a.cpus_milli = 4000;
  a.ram_mib = 32 * 1024;
  EXPECT_TRUE(roundTrips(a));
  EXPECT_EQ(a.gpuUuids(), (std::vector<std::string>{"GPU-1", "GPU-2"}));
  json j = toJson(a);
  EXPECT_EQ(j.at("slices").at(0).at("compute_milli"), 250);
  EXPECT_EQ(j.at("slices").at(0).at("memory_mib"), 10 * 1024);

  EXPECT_TRUE(failsWith(decode<Allocation>(J(R"({"task":0,"node":"n","slices":[
      {"gpu_uuid":"G","memory":"1G","compute":"25%"},
      {"gpu_uuid":"G","memory":"1G","compute":"25%"}]})")),
                        "allocation.slices[1].gpu_uuid: GPU 'G' is listed twice"));
  EXPECT_TRUE(failsWith(decode<Allocation>(J(R"({"task":0,"node":"n","slices":[
      {"gpu_uuid":"G","memory":"1G","compute":"0.5","exclusive":true}]})")),
                        "allocation.slices[0].compute: an exclusive slice holds the whole GPU"));
  EXPECT_TRUE(failsWith(decode<Allocation>(J(R"({"task":0,"node":"n","slices":[
      {"gpu_uuid":"G","memory":"1G","compute":"120%"}]})")),
                        "allocation.slices[0].compute: compute share '120%' is out of range"));
  EXPECT_TRUE(failsWith(decode<Allocation>(J(R"({"task":0,"node":"n","slices":[
      {"gpu_uuid":"G","memory":"1G","compute_milli":0}]})")),
                        "allocation.slices[0].compute_milli: is out of range [1, 1000]"));
  EXPECT_TRUE(failsWith(decode<Allocation>(J(R"({"node":"n"})")),
                        "allocation.task: required field is missing"));
}

}  // namespace
}  // namespace gpool::api::testing
