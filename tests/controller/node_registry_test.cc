#include "controller/node_registry.h"

#include <gtest/gtest.h>

#include "controller/controller_fixture.h"

namespace gpool::controller {
namespace {

using testing::makeNode;

class NodeRegistryTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  std::unique_ptr<store::SqliteStore> store_ = testing::openStore(dir_.path() + "/db");
  SimClock clock_;
  NodeRegistryOptions options_{std::chrono::seconds(90)};
};

TEST_F(NodeRegistryTest, RegisterStoresNodeAndGpus) {
  NodeRegistry reg(*store_, clock_, options_);
  auto epoch = reg.registerNode(makeNode("gpu-01", 4));
  ASSERT_TRUE(epoch.ok()) << epoch.status().toString();
  auto gpus = store_->listGpus("gpu-01");
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->size(), 4u);
  auto node = reg.node("gpu-01");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->state, api::NodeState::kIdle);
  EXPECT_EQ(reg.nodeEpoch("gpu-01"), *epoch);
  // Re-registering (an agent reconnecting) gives a strictly larger epoch, even at the same time.
  auto again = reg.registerNode(makeNode("gpu-01", 4));
  ASSERT_TRUE(again.ok());
  EXPECT_GT(*again, *epoch);
}

// A GPU held after a fatal XID stays unhealthy whatever its agent reports later, when its
// node re-registers, and across a controller restart, until an admin clears it (audited).
TEST_F(NodeRegistryTest, HeldGpuStaysUnhealthyUntilCleared) {
  NodeRegistry reg(*store_, clock_, options_);
  ASSERT_TRUE(reg.registerNode(makeNode("gpu-01", 2)).ok());
  auto held = reg.holdGpu("gpu-01", "GPU-gpu-01-1", "GPU 1 reported XID 79 (fallen off the bus)");
  ASSERT_TRUE(held.ok()) << held.status().toString();
  EXPECT_TRUE(*held);
  EXPECT_FALSE(*reg.holdGpu("gpu-01", "GPU-gpu-01-1", "again"));  // once
  auto gpu1 = [](const NodeRegistry& r) { return r.node("gpu-01")->gpus[1]; };
  EXPECT_EQ(gpu1(reg).health, api::GpuHealth::kUnhealthy);
  EXPECT_NE(gpu1(reg).health_reason.find("XID 79"), std::string::npos);
  EXPECT_NE(gpu1(reg).health_reason.find("gpool gpu clear gpu-01/1"), std::string::npos);
  // The agent's next report says nothing about it; it reconnects: still held.
  ASSERT_TRUE(reg.setGpuHealth("gpu-01", {}).ok());
  EXPECT_EQ(gpu1(reg).health, api::GpuHealth::kUnhealthy);
  ASSERT_TRUE(reg.registerNode(makeNode("gpu-01", 2)).ok());
  EXPECT_EQ(gpu1(reg).health, api::GpuHealth::kUnhealthy);
  EXPECT_EQ(reg.node("gpu-01")->gpus[0].health, api::GpuHealth::kHealthy);
  // A restarted controller knows the hold.
  NodeRegistry restarted(*store_, clock_, options_);
  ASSERT_TRUE(restarted.load().isOk());
  EXPECT_EQ(gpu1(restarted).health, api::GpuHealth::kUnhealthy);
  // Clearing: unknown GPU, a GPU not held, then the held one.
  EXPECT_EQ(restarted.clearGpuHold("gpu-01", 7, "root").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(restarted.clearGpuHold("gpu-01", 0, "root").status().code(),
            StatusCode::kFailedPrecondition);
  auto cleared = restarted.clearGpuHold("gpu-01", 1, "root");
  ASSERT_TRUE(cleared.ok()) << cleared.status().toString();
  EXPECT_EQ(*cleared, "GPU-gpu-01-1");
  EXPECT_EQ(gpu1(restarted).health, api::GpuHealth::kHealthy);
  EXPECT_TRUE(store_->listGpuHolds()->empty());
  auto audit = store_->auditEvents(0, 100);
  ASSERT_TRUE(audit.ok());
  ASSERT_FALSE(audit->empty());
  EXPECT_EQ(audit->back().action, "gpu clear");
  EXPECT_EQ(audit->back().actor, "root");
  EXPECT_EQ(audit->back().subject, "GPU-gpu-01-1");
}

TEST_F(NodeRegistryTest, RejectsBadName) {
  NodeRegistry reg(*store_, clock_, options_);
  EXPECT_EQ(reg.registerNode(makeNode("bad name!", 1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.heartbeat("nobody").code(), StatusCode::kNotFound);
}

TEST_F(NodeRegistryTest, SilentNodeGoesDownOnceAndHeartbeatsKeepOthersUp) {
  NodeRegistry reg(*store_, clock_, options_);
  ASSERT_TRUE(reg.registerNode(makeNode("a", 1)).ok());
  ASSERT_TRUE(reg.registerNode(makeNode("b", 1)).ok());
  clock_.advance(std::chrono::seconds(60));
  ASSERT_TRUE(reg.heartbeat("b").isOk());
  auto lost = reg.expireSilent();
  ASSERT_TRUE(lost.ok());
  EXPECT_TRUE(lost->empty());  // 60 s < 90 s
  clock_.advance(std::chrono::seconds(31));
  lost = reg.expireSilent();
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(*lost, std::vector<std::string>{"a"});
  EXPECT_EQ(reg.node("a")->state, api::NodeState::kDown);
  EXPECT_EQ(reg.node("b")->state, api::NodeState::kIdle);
  // Reported once only; the DOWN state is durable.
  EXPECT_TRUE(reg.expireSilent()->empty());
  EXPECT_EQ(store_->getNode("a")->state, "DOWN");
  // A DOWN node's heartbeats are refused until it says hello again.
  EXPECT_EQ(reg.heartbeat("a").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(reg.registerNode(makeNode("a", 1)).ok());
  EXPECT_EQ(reg.node("a")->state, api::NodeState::kIdle);
}

// Issue 19, defect 1: going DOWN is what lets the loop run a node's jobs elsewhere, so it waits
// for the node's last lease to have certainly ended (lease + fence grace + margin), even when
// node_down_after is shorter; also after a controller restart (counted from the load).
TEST_F(NodeRegistryTest, NodeGoesDownOnlyOnceItsLastLeaseHasCertainlyEnded) {
  NodeRegistryOptions options;
  options.down_after = std::chrono::seconds(15);
  options.lease_ends_after = std::chrono::seconds(10 + 5 + 2);
  NodeRegistry reg(*store_, clock_, options);
  ASSERT_TRUE(reg.registerNode(makeNode("a", 1)).ok());
  clock_.advance(std::chrono::seconds(4));
  ASSERT_TRUE(reg.heartbeat("a").isOk());  // the last lease: granted at 4 s
  clock_.advance(std::chrono::seconds(16));
  EXPECT_TRUE(reg.expireSilent()->empty());  // 16 s silent: past node_down_after only
  clock_.advance(std::chrono::seconds(1));
  EXPECT_TRUE(reg.expireSilent()->empty());  // 17 s: the lease may just be ending
  clock_.advance(std::chrono::microseconds(1));
  EXPECT_EQ(*reg.expireSilent(), std::vector<std::string>{"a"});

  ASSERT_TRUE(reg.registerNode(makeNode("b", 1)).ok());
  NodeRegistry restarted(*store_, clock_, options);
  clock_.advance(std::chrono::seconds(10));
  ASSERT_TRUE(restarted.load().isOk());  // b's last lease came from the old process
  clock_.advance(std::chrono::seconds(17));
  EXPECT_TRUE(restarted.expireSilent()->empty());
  clock_.advance(std::chrono::seconds(1));
  EXPECT_EQ(*restarted.expireSilent(), std::vector<std::string>{"b"});
}

// Issue 19, defect 2: the registry knows whose agent is connected; a replaced connection's close
// does not disconnect the newer one, and after a restart nobody is connected until a hello.
TEST_F(NodeRegistryTest, KnowsWhichAgentsAreConnected) {
  NodeRegistry reg(*store_, clock_, options_);
  ASSERT_TRUE(reg.registerNode(makeNode("a", 1), /*connection=*/7).ok());
  EXPECT_TRUE(reg.agentConnected("a"));
  ASSERT_TRUE(reg.registerNode(makeNode("a", 1), /*connection=*/9).ok());  // a newer connection
  reg.agentDisconnected("a", 7);                                           // the old one closes
  EXPECT_TRUE(reg.agentConnected("a"));
  reg.agentDisconnected("a", 9);
  EXPECT_FALSE(reg.agentConnected("a"));
  EXPECT_FALSE(reg.agentConnected("nobody"));
  ASSERT_TRUE(reg.registerNode(makeNode("b", 1)).ok());  // no connection tracked: connected
  EXPECT_TRUE(reg.agentConnected("b"));
  NodeRegistry restarted(*store_, clock_, options_);
  ASSERT_TRUE(restarted.load().isOk());
  EXPECT_FALSE(restarted.agentConnected("b"));
}

TEST_F(NodeRegistryTest, DrainSurvivesReconnectAndRestart) {
  {
    NodeRegistry reg(*store_, clock_, options_);
    ASSERT_TRUE(reg.registerNode(makeNode("a", 2)).ok());
    ASSERT_TRUE(reg.drain("a", "maintenance").isOk());
    ASSERT_TRUE(reg.registerNode(makeNode("a", 2)).ok());
    EXPECT_EQ(reg.node("a")->state, api::NodeState::kDraining);
  }
  NodeRegistry restarted(*store_, clock_, options_);
  ASSERT_TRUE(restarted.load().isOk());
  auto node = restarted.node("a");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->state, api::NodeState::kDraining);
  EXPECT_EQ(node->state_reason, "maintenance");
  EXPECT_EQ(node->gpus.size(), 2u);
  ASSERT_TRUE(restarted.resume("a").isOk());
  EXPECT_EQ(restarted.node("a")->state, api::NodeState::kIdle);
  // After a restart every node gets a full down_after to reconnect.
  clock_.advance(std::chrono::seconds(89));
  EXPECT_TRUE(restarted.expireSilent()->empty());
}

}  // namespace
}  // namespace gpool::controller
