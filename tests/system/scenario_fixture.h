#pragma once

// The fixture of the system scenarios (scenarios_test.cc, defect_scenarios_test.cc): a Pool per
// scenario, the figures it records (Figures, printed and appended to $GPOOL_SYSTEM_FIGURES), and
// the waits and plans the scenarios share. RequeueScenario: requeueable jobs on h0 whose agent is
// then cut off by a fault.
//
// Timings of the short profile: lease 3 s, heartbeat 1 s, node_down_after 5 s; outages are
// chosen against them (an outage longer than node_down_after makes a node DOWN). Waits poll
// with deadlines; the only sleeps are the faults' own durations.
//
// A scenario of a defect that is not fixed on main yet calls knownDefect() first: its failures
// are then caught and reported as an expected failure naming the defect (result "xfail"), so
// CI stays green while the scenario still shows the defect; a scenario so marked that passes
// says "XPASS" (the fix landed: remove the mark). GPOOL_SYSTEM_NO_XFAIL=1 disregards the marks.
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "system/checker.h"
#include "system/harness.h"

namespace gpool::system_test {

class SystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    figures_.scenario = name_;
    started_ = std::chrono::steady_clock::now();
  }

  void TearDown() override {
    std::string result = HasFailure() ? "FAIL" : "pass";
    if (xfail_reporter_) {
      xfail_reporter_.reset();  // failures from here on are reported as usual
      int failures = 0;
      for (int i = 0; i < xfail_failures_.size(); ++i) {
        const ::testing::TestPartResult& f = xfail_failures_.GetTestPartResult(i);
        if (!f.failed()) continue;
        ++failures;
        std::printf("[system] expected failure (%s): %s:%d: %s\n", xfail_defect_.c_str(),
                    f.file_name() ? f.file_name() : "?", f.line_number(), f.message());
      }
      if (failures > 0) {
        std::printf("[system] %s: XFAIL, %d failure(s) of a known defect not fixed on main: %s\n",
                    name_.c_str(), failures, xfail_defect_.c_str());
        if (!HasFailure()) result = "xfail";
      } else {
        std::printf("[system] %s: XPASS: it holds now; is %s fixed? Remove knownDefect().\n",
                    name_.c_str(), xfail_defect_.c_str());
        if (!HasFailure()) result = "XPASS";
      }
      std::fflush(stdout);
      if (failures > 0 && pool_ && !HasFailure()) {
        std::printf("[system] gpoold log tail:\n%s\n", pool_->gpoold().logTail(30).c_str());
      }
    }
    if (pool_ || standalone_) {
      figures_.values["result"] = result;
      if (!xfail_defect_.empty()) figures_.values["known_defect"] = xfail_defect_;
      figures_.values["faults"] = faults_;
      // Nodes gpoold declared lost (scheduling_loop.cc), whether a fault meant it or not.
      if (pool_) figures_.values["nodes_down"] = pool_->gpooldLogLines("is DOWN (not responding)");
      figures_.values["seconds"] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      if (!notes_.empty()) figures_.values["notes"] = notes_;
      figures_.record();
      if (HasFailure() && pool_) {
        std::printf("[system] gpoold log tail:\n%s\n", pool_->gpoold().logTail(30).c_str());
      }
    }
    pool_.reset();
  }

  // Marks this scenario as showing `defect` (issue 19), not fixed on main yet: see the top of
  // this file. Call first. A pool that does not start is not the defect: startPool() reports
  // that as a failure still.
  void knownDefect(const std::string& defect) {
    xfail_defect_ = defect;
    const char* off = std::getenv("GPOOL_SYSTEM_NO_XFAIL");
    if (off != nullptr && *off != '\0' && std::string(off) != "0") {
      std::printf("[system] %s shows %s; GPOOL_SYSTEM_NO_XFAIL: its failures count\n",
                  name_.c_str(), defect.c_str());
      return;
    }
    xfail_reporter_ = std::make_unique<::testing::ScopedFakeTestPartResultReporter>(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &xfail_failures_);
  }

  void startPool(PoolOptions options = {}) {
    Result<std::unique_ptr<Pool>> p = Pool::start(name_, options);
    if (!p.ok()) xfail_reporter_.reset();  // the harness failed, not the scenario
    ASSERT_TRUE(p.ok()) << p.status().toString();
    pool_ = std::move(*p);
    figures_.network = pool_->network().isolated() ? "netns" : "loopback";
  }

  // `n` jobs named <prefix>-<i>.
  std::vector<JobPlan> plans(const std::string& prefix, int n, int64_t run_ms, int exit_code = 0,
                             int64_t gpus_milli = 1000, bool preemptible = false,
                             const std::string& node = "") {
    std::vector<JobPlan> out;
    for (int i = 0; i < n; ++i) {
      JobPlan p;
      p.tag = prefix + "-" + std::to_string(i);
      p.run_ms = run_ms;
      p.exit_code = exit_code;
      p.gpus_milli = gpus_milli;
      p.preemptible = preemptible;
      p.node = node;
      out.push_back(p);
    }
    return out;
  }

  static void append(std::vector<Submission>* to, const std::vector<Submission>& from) {
    to->insert(to->end(), from.begin(), from.end());
  }

  // Every acknowledged submission of `subs` has a run that started (its task wrote its start).
  bool allStarted(const std::vector<Submission>& subs,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    return waitFor(
        [&] {
          std::set<std::string> started;
          for (const TaskRun& r : pool_->runs())
            started.insert(r.tag);
          for (const Submission& s : subs) {
            if (s.outcome == "ack" && !started.count(s.tag)) return false;
          }
          return true;
        },
        timeout, std::chrono::milliseconds(50));
  }

  // Every run of `subs` has written its end (exit or signal).
  bool allEnded(const std::vector<Submission>& subs,
                std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    std::set<std::string> tags;
    for (const Submission& s : subs)
      tags.insert(s.tag);
    return waitFor(
        [&] {
          size_t ended = 0;
          for (const TaskRun& r : pool_->runs()) {
            if (tags.count(r.tag) && r.ended()) ++ended;
          }
          return ended >= tags.size();
        },
        timeout, std::chrono::milliseconds(50));
  }

  int acked(const std::vector<Submission>& subs) {
    return static_cast<int>(std::count_if(subs.begin(), subs.end(),
                                          [](const Submission& s) { return s.outcome == "ack"; }));
  }

  Status adminPost(const std::string& target, const std::string& body = "{}") {
    Result<net::Response> r = pool_->request(net::Method::kPost, target, body);
    if (!r.ok()) return r.status();
    if (r->status >= 300) {
      return Status::internal("POST " + target + " answered " + std::to_string(r->status) + ": " +
                              r->body);
    }
    return Status::ok();
  }

  // Waits for `node`'s agent to say hello after `mark`; the seconds from `since_us` to it.
  double recoverySeconds(const std::string& node, uint64_t mark, int64_t since_us,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::optional<int64_t> hello;
    waitFor(
        [&] {
          hello = pool_->helloAfter(node, mark);
          return hello.has_value();
        },
        timeout, std::chrono::milliseconds(20));
    if (!hello) return -1;
    return static_cast<double>(*hello - since_us) / 1e6;
  }

  CheckResult judge(const std::vector<Submission>& subs, CheckOptions options = {}) {
    CheckResult r = pool_->check(subs, options);
    addCheck(&figures_, r);
    std::printf("[system] %s: %s\n", name_.c_str(), r.summary().c_str());
    return r;
  }

  std::string name_;
  std::unique_ptr<Pool> pool_;
  Figures figures_;
  int faults_ = 0;
  std::string notes_;
  bool standalone_ = false;  // a scenario without a Pool that records figures anyway
  std::chrono::steady_clock::time_point started_;
  // knownDefect(): the failures caught while it holds.
  std::string xfail_defect_;
  ::testing::TestPartResultArray xfail_failures_;
  std::unique_ptr<::testing::ScopedFakeTestPartResultReporter> xfail_reporter_;
};

// Requeueable jobs on h0, whose agent is then made unreachable by `fault` for longer than
// node_down_after; `heal` ends the fault (or does nothing: lost for good). The jobs must run
// again on h1, and never in two places at once.
class RequeueScenario : public SystemTest {
 protected:
  void run(const std::function<void()>& fault, const std::function<void()>& heal,
           bool with_keep_running) {
    ASSERT_NO_FATAL_FAILURE(startPool());
    // h1 takes no work until the jobs run on h0.
    ASSERT_TRUE(adminPost("/v1/nodes/h1/drain", R"({"reason":"system test"})").isOk());
    std::vector<JobPlan> jobs = plans("requeue", 4, 8000, 0, 1000, true);
    if (with_keep_running) {
      for (const JobPlan& p : plans("keep", 2, 8000, 0, 1000, false, "h0"))
        jobs.push_back(p);
    }
    std::vector<Submission> subs = pool_->submit(jobs, 2);
    ASSERT_EQ(acked(subs), static_cast<int>(jobs.size()));
    ASSERT_TRUE(allStarted(subs));
    for (const TaskRun& r : pool_->runs())
      ASSERT_EQ(r.host, "h0") << r.tag;
    ASSERT_TRUE(adminPost("/v1/nodes/h1/resume").isOk());

    const int64_t fault_at = realNowUs();
    fault();
    ++faults_;
    // The requeued jobs start again on h1.
    int64_t restarted_at = 0;
    EXPECT_TRUE(waitFor(
        [&] {
          int on_h1 = 0;
          for (const TaskRun& r : pool_->runs()) {
            if (r.host == "h1") {
              ++on_h1;
              restarted_at = std::max(restarted_at, r.start_us);
            }
          }
          return on_h1 >= 4;
        },
        std::chrono::seconds(60)));
    if (restarted_at > 0) {
      figures_.values["requeued_after_s"] = static_cast<double>(restarted_at - fault_at) / 1e6;
    }
    heal();
    ASSERT_TRUE(pool_->waitAllFinished(std::chrono::seconds(90)).isOk());
    // Every old run has ended too before judging (tasks left running are a finding of their own).
    waitFor(
        [&] {
          for (const TaskRun& r : pool_->runs()) {
            if (!r.ended() && r.last_us + 2'000'000 > realNowUs()) return false;
          }
          return true;
        },
        std::chrono::seconds(30));
    CheckResult r = judge(subs);
    EXPECT_EQ(r.double_run_s, 0) << r.summary();
    EXPECT_TRUE(r.ok()) << r.summary();
    for (int i = 0; i < 4; ++i) {
      const std::string tag = "requeue-" + std::to_string(i);
      EXPECT_TRUE(std::any_of(subs.begin(), subs.end(), [&](const Submission& s) {
        return s.tag == tag && s.outcome == "ack";
      }));
    }
    EXPECT_EQ(r.final_states["COMPLETED"], 4) << r.summary();
    // The records carry the agent's attempts (GPOOL_ATTEMPT): the requeue is the next one, so
    // the checker told it from a double run above.
    for (const TaskRun& run : pool_->runs()) {
      if (run.tag.rfind("requeue-", 0) != 0) continue;
      EXPECT_EQ(run.attempt, run.host == "h0" ? 1 : 2) << run.tag << " on " << run.host;
    }
  }
};

}  // namespace gpool::system_test
