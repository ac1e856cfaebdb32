#include "agent/fence.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gpool::agent {
namespace {

using std::chrono::seconds;

TEST(FenceTest, NoNewWorkBeforeFirstContact) {
  SimClock clock;
  Fence fence(clock, seconds(60));
  EXPECT_FALSE(fence.mayStartWork());
  EXPECT_FALSE(fence.expired());
  fence.recordContact();
  EXPECT_TRUE(fence.mayStartWork());
}

TEST(FenceTest, LeaseExpiryStopsNewWorkAndRequeueableTasksOnly) {
  SimClock clock;
  Fence fence(clock, seconds(60));
  fence.recordContact();
  std::vector<Fence::RunningTask> running = {{"j1.0", true}, {"j2.0", false}, {"j3.1", true}};

  clock.advance(seconds(59));
  EXPECT_TRUE(fence.mayStartWork());
  EXPECT_TRUE(fence.tasksToStop(running).empty());
  EXPECT_EQ(fence.remaining(), seconds(1));

  clock.advance(seconds(1));
  EXPECT_TRUE(fence.expired());
  EXPECT_FALSE(fence.mayStartWork());
  EXPECT_EQ(fence.tasksToStop(running), (std::vector<std::string>{"j1.0", "j3.1"}));
  EXPECT_EQ(fence.remaining(), seconds(0));

  // Contact again: the lease is renewed and nothing more is stopped.
  fence.recordContact();
  EXPECT_TRUE(fence.mayStartWork());
  EXPECT_TRUE(fence.tasksToStop(running).empty());
}

TEST(FenceTest, RestartedAgentGetsOneLeaseToReconnect) {
  SimClock clock;
  Fence fence(clock, seconds(30));
  std::vector<Fence::RunningTask> adopted = {{"j1.0", true}};
  clock.advance(seconds(29));
  EXPECT_TRUE(fence.tasksToStop(adopted).empty());
  clock.advance(seconds(1));
  EXPECT_EQ(fence.tasksToStop(adopted), (std::vector<std::string>{"j1.0"}));
}

}  // namespace
}  // namespace gpool::agent
