// Issue 25: the controller's high availability (docs/ha.md) in the system harness. Two gpoold
// with [ha] in the controller's namespace on one PostgreSQL server, TLS agents in their own
// namespaces that know both controllers, a client (the test user) that knows both sockets, and
// faults on the leader: SIGKILL, or its way to the database cut while its agents and clients
// still reach it. The checker proves that nothing ran twice and nothing acknowledged was lost.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "system/scenario_fixture.h"

namespace gpool::system_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class HaScenario : public SystemTest {
 protected:
  // The [ha] lease of the scenarios: short, so that a takeover fits the short profile.
  static constexpr int kHaLeaseMs = 2000;

  static PoolOptions haOptions() {
    PoolOptions o;
    o.controllers = 2;
    o.ha_lease = std::to_string(kHaLeaseMs / 1000) + "s";
    return o;
  }

  struct Takeover {
    double lead_s = -1;    // from the fault to the new leader's taking the lease
    double agents_s = -1;  // from the fault to the last agent's hello to the new leader
  };

  // Waits until controller `to` takes the lease and every agent says hello to it (both after
  // `mark` in its log); the seconds from `since_us` to each.
  Takeover awaitTakeover(int to, uint64_t mark, int64_t since_us) {
    Takeover t;
    std::optional<int64_t> led;
    waitFor(
        [&] {
          led = pool_->ledAfter(to, mark);
          return led.has_value();
        },
        seconds(30), milliseconds(20));
    if (!led) return t;
    t.lead_s = static_cast<double>(*led - since_us) / 1e6;
    for (int i = 0; i < pool_->agents(); ++i) {
      std::optional<int64_t> hello;
      waitFor(
          [&] {
            hello = pool_->helloAfter(pool_->node(i), mark, to);
            return hello.has_value();
          },
          seconds(30), milliseconds(20));
      if (!hello) return t;
      t.agents_s = std::max(t.agents_s, static_cast<double>(*hello - since_us) / 1e6);
    }
    return t;
  }

  // Long jobs that must run once, through every takeover, then a client submitting steadily
  // through both controllers. Returns the long jobs' submissions.
  std::vector<Submission> startLoad(int64_t long_ms, int steady, int interval_ms,
                                    std::unique_ptr<Daemon>* client) {
    std::vector<Submission> subs = pool_->submit(plans("long", 4, long_ms));
    EXPECT_EQ(acked(subs), 4);
    EXPECT_TRUE(allStarted(subs));
    *client =
        pool_->submitInBackground(plans("steady", steady, 1000, 0, 250), 1, interval_ms, "steady");
    EXPECT_TRUE(waitFor([&] { return pool_->submissions("steady").size() >= 5; }, seconds(30)));
    return subs;
  }

  // The client done, every job finished: the checker, every job COMPLETED, the long jobs one
  // run each, which ran from before `first_fault_us` until after `last_back_us` (through every
  // takeover, not just before or after them).
  void finishAndJudge(std::vector<Submission> subs, Daemon* client, int64_t first_fault_us,
                      int64_t last_back_us) {
    EXPECT_EQ(client->wait(seconds(180)), 0) << client->logTail();
    append(&subs, pool_->submissions("steady"));
    ASSERT_TRUE(pool_->waitAllFinished(seconds(120)).isOk());
    CheckResult r = judge(subs);
    EXPECT_TRUE(r.ok()) << r.summary();
    EXPECT_EQ(r.final_states["COMPLETED"], r.acked) << r.summary();
    // A submission that found no leader within the client's 20 s would be refused (not lost);
    // the takeovers here are shorter, so none may be. (One in flight when its controller died
    // is "unknown": the checker allows it either way.)
    for (const Submission& s : subs)
      EXPECT_NE(s.outcome, "refused") << s.tag << ": " << s.detail;
    std::map<std::string, int> runs_of;
    for (const TaskRun& run : pool_->runs()) {
      ++runs_of[run.tag];
      if (run.tag.rfind("long-", 0) != 0) continue;
      EXPECT_LT(run.start_us, first_fault_us) << run.tag << " started after the first fault";
      EXPECT_GT(run.last_us, last_back_us) << run.tag << " ended before the agents were back";
    }
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(runs_of["long-" + std::to_string(i)], 1) << "long-" << i << " ran again";
  }

  static double median(std::vector<double> v) {
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

// (a) The leader SIGKILLed under steady submissions and running jobs (1 takeover in the short
// profile, 5 in the long one), each time started again as a standby. The standby leads within
// the lease plus a poll, the agents follow it, the client's submissions go on, every
// acknowledged job is there once and ran once, and the long jobs keep their one run.
TEST_F(HaScenario, LeaderKilledUnderSubmissionsAndRunningJobs) {
  ASSERT_NO_FATAL_FAILURE(startPool(haOptions()));
  ASSERT_EQ(pool_->leader(), 0);
  const int takeovers = fullProfile() ? 5 : 1;
  std::unique_ptr<Daemon> client;
  std::vector<Submission> subs =
      startLoad(6000 + takeovers * 6000, fullProfile() ? 200 : 40, 150, &client);
  ASSERT_FALSE(HasFailure());

  std::vector<double> lead, agents;
  int64_t first_fault_us = 0;
  int64_t last_back_us = 0;
  for (int k = 0; k < takeovers; ++k) {
    const int old = pool_->leader();
    ASSERT_GE(old, 0) << "no controller leads before takeover " << k;
    const int next = 1 - old;
    const uint64_t mark = pool_->gpooldLogMark(next);
    const int64_t killed = realNowUs();
    if (k == 0) first_fault_us = killed;
    ASSERT_TRUE(pool_->controller(old).kill().isOk());
    ++faults_;
    const Takeover t = awaitTakeover(next, mark, killed);
    ASSERT_GE(t.lead_s, 0) << "controller " << next << " did not take over:\n"
                           << pool_->controller(next).logTail();
    ASSERT_GE(t.agents_s, 0) << "the agents did not follow controller " << next;
    std::printf(
        "[system] takeover %d: controller %d leads %.2f s after the SIGKILL, agents back "
        "at %.2f s\n",
        k + 1, next, t.lead_s, t.agents_s);
    lead.push_back(t.lead_s);
    agents.push_back(t.agents_s);
    last_back_us = killed + static_cast<int64_t>(t.agents_s * 1e6);
    // Within the lease plus a standby's poll (docs/ha.md, "Timing"), with room for a loaded
    // machine; the issue asks for 10 s with the default 6 s lease.
    EXPECT_LT(t.lead_s, kHaLeaseMs / 1000.0 + 3.0);
    // The dead leader back as a standby.
    ASSERT_TRUE(pool_->startController(old).isOk());
  }
  figures_.values["takeovers"] = takeovers;
  figures_.values["takeover_p50_s"] = median(lead);
  figures_.values["takeover_max_s"] = *std::max_element(lead.begin(), lead.end());
  figures_.values["agents_back_max_s"] = *std::max_element(agents.begin(), agents.end());
  // The table's columns (scripts/system-tests.sh): the slowest takeover and agents' return.
  figures_.values["takeover_s"] = figures_.values["takeover_max_s"];
  figures_.values["recovery_s"] = figures_.values["agents_back_max_s"];
  ASSERT_NO_FATAL_FAILURE(finishAndJudge(subs, client.get(), first_fault_us, last_back_us));
}

// (b) The leader cut from the database (every packet between it and PostgreSQL dropped) but
// not from its agents or clients. It must stop acting: once no renewal of its lease has
// succeeded for a whole lease it exits (deposed), even though its renewal is still waiting for
// an answer that never comes, and whatever write it still tries is refused in the database
// (the fencing token). The standby takes over, the agents leave the old leader and follow, and
// the checker finds nothing run twice and nothing acknowledged lost. The cut heals after the
// takeover and the old leader comes back as a standby.
TEST_F(HaScenario, LeaderCutFromTheDatabaseButNotFromItsAgents) {
  ASSERT_NO_FATAL_FAILURE(startPool(haOptions()));
  if (!pool_->network().canCutDatabase()) {
    GTEST_SKIP() << "needs network namespaces and nft to cut one controller from the database ("
                 << pool_->network().describe() << ")";
  }
  ASSERT_EQ(pool_->leader(), 0);
  std::unique_ptr<Daemon> client;
  std::vector<Submission> subs = startLoad(12000, fullProfile() ? 200 : 40, 150, &client);
  ASSERT_FALSE(HasFailure());

  const uint64_t mark = pool_->gpooldLogMark(1);
  const int64_t cut = realNowUs();
  ASSERT_TRUE(pool_->network().cutDatabase(pool_->databaseAddress(0)).isOk());
  ++faults_;
  // It stops by itself, well before the cut heals: a lease, plus its deadline's own wait.
  const int rc = pool_->controller(0).wait(seconds(kHaLeaseMs / 1000 + 8));
  const double stopped_s = static_cast<double>(realNowUs() - cut) / 1e6;
  EXPECT_EQ(rc, 1) << "the leader cut from the database did not stop (exit status " << rc
                   << ", -1: still running " << stopped_s << " s after the cut):\n"
                   << pool_->controller(0).logTail();
  if (rc == -1) {
    (void)pool_->controller(0).kill();  // so that the rest can show what else went wrong
  } else {
    EXPECT_EQ(pool_->gpooldLogLines("deposed: "), 1) << pool_->controller(0).logTail();
  }
  const Takeover t = awaitTakeover(1, mark, cut);
  ASSERT_GE(t.lead_s, 0) << "controller 1 did not take over:\n" << pool_->controller(1).logTail();
  ASSERT_GE(t.agents_s, 0) << "the agents did not follow controller 1";
  std::printf(
      "[system] leader cut from the database: it exited %.2f s after the cut; controller "
      "1 leads at %.2f s, agents back at %.2f s\n",
      stopped_s, t.lead_s, t.agents_s);
  figures_.values["deposed_s"] = stopped_s;
  figures_.values["takeover_s"] = t.lead_s;
  figures_.values["agents_back_s"] = t.agents_s;
  figures_.values["recovery_s"] = t.agents_s;  // the table's column
  // The standby cannot lead before the lease lapses on the database's clock, and should lead
  // within the lease, a poll and an idle transaction's timeout (docs/ha.md).
  EXPECT_LT(t.lead_s, 2 * kHaLeaseMs / 1000.0 + 3.0);

  ASSERT_TRUE(pool_->network().healDatabase().isOk());
  ASSERT_TRUE(pool_->startController(0).isOk());
  ASSERT_NO_FATAL_FAILURE(
      finishAndJudge(subs, client.get(), cut, cut + static_cast<int64_t>(t.agents_s * 1e6)));
}

}  // namespace
}  // namespace gpool::system_test
