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
  fence.recordContact(clock.monotonic());
  EXPECT_TRUE(fence.mayStartWork());
}

TEST(FenceTest, LeaseExpiryStopsNewWorkAndRequeueableTasksOnly) {
  SimClock clock;
  Fence fence(clock, seconds(60));
  fence.recordContact(clock.monotonic());
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
  fence.recordContact(clock.monotonic());
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

// The lease runs from when the renewed message left, not from when its answer arrived: an
// answer that took 20 s to arrive (an agent stopped with SIGSTOP, a congested link) leaves 40 s
// of a 60 s lease, as the controller counts it.
TEST(FenceTest, LeaseCountsFromWhenTheRenewedMessageWasSent) {
  SimClock clock;
  Fence fence(clock, seconds(60));
  Micros sent = clock.monotonic();
  clock.advance(seconds(20));
  fence.recordContact(sent);
  EXPECT_EQ(fence.remaining(), seconds(40));
  // A late answer to an even older heartbeat does not move the lease back...
  fence.recordContact(sent - Micros(seconds(5)));
  EXPECT_EQ(fence.remaining(), seconds(40));
  // ...and one to a newer heartbeat moves it on.
  fence.recordContact(sent + Micros(seconds(10)));
  EXPECT_EQ(fence.remaining(), seconds(50));
  clock.advance(seconds(50));
  EXPECT_TRUE(fence.expired());
}

}  // namespace
}  // namespace gpool::agent
