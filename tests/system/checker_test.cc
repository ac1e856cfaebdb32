// The checker and the record format on made-up records: each guarantee it judges is broken on
// purpose here and must be reported, so a scenario that passes means something.
#include "system/checker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "system/records.h"

namespace gpool::system_test {
namespace {

constexpr int64_t kS = 1'000'000;  // one second in microseconds
constexpr int64_t kT0 = 1'800'000'000LL * kS;

TaskRun run(const std::string& tag, int64_t job, const std::string& host, int64_t start_s,
            int64_t last_s, std::optional<int> exit_code) {
  TaskRun r;
  r.tag = tag;
  r.job_id = job;
  r.host = host;
  r.pid = 1000 + job;
  r.start_us = kT0 + start_s * kS;
  r.last_us = kT0 + last_s * kS;
  if (exit_code) {
    r.end_us = r.last_us;
    r.exit_code = exit_code;
  }
  return r;
}

ControllerJob job(int64_t id, const std::string& name, const std::string& state, int64_t start_s,
                  std::optional<int64_t> end_s, std::optional<int> exit_code = std::nullopt) {
  ControllerJob j;
  j.id = id;
  j.name = name;
  j.state = state;
  j.start_us = kT0 + start_s * kS;
  if (end_s) j.end_us = kT0 + *end_s * kS;
  j.exit_code = exit_code;
  return j;
}

Submission ack(const std::string& tag, int64_t id) {
  Submission s;
  s.tag = tag;
  s.outcome = "ack";
  s.id = id;
  return s;
}

CheckOptions at(int64_t now_s) {
  CheckOptions o;
  o.now_us = kT0 + now_s * kS;
  return o;
}

TEST(CheckerTest, AConsistentHistoryPasses) {
  std::vector<Submission> subs{ack("a", 1), ack("b", 2)};
  Submission refused;
  refused.tag = "c";
  refused.outcome = "refused";
  subs.push_back(refused);
  std::vector<ControllerJob> jobs{job(1, "a", "COMPLETED", 0, 5, 0),
                                  job(2, "b", "FAILED", 1, 4, 3)};
  // b was requeued once: its first run ended before the second started.
  std::vector<TaskRun> runs{run("a", 1, "h0", 0, 5, 0), run("b", 2, "h0", -3, -1, std::nullopt),
                            run("b", 2, "h1", 1, 4, 3)};
  CheckResult r = check(subs, jobs, runs, at(100));
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(r.acked, 2);
  EXPECT_EQ(r.refused, 1);
  EXPECT_EQ(r.runs, 3);
  EXPECT_EQ(r.double_run_s, 0);
  EXPECT_EQ(r.final_states["COMPLETED"], 1);
}

TEST(CheckerTest, TwoRunsOfOneJobAtOnceAreADoubleRun) {
  // As in the trial: the old attempt keeps ticking on h0 while the requeued one runs on h1.
  std::vector<TaskRun> runs{run("p", 1, "h0", 0, 62, std::nullopt), run("p", 1, "h1", 14, 30, 0)};
  CheckResult r = check({ack("p", 1)}, {job(1, "p", "COMPLETED", 14, 30, 0)}, runs, at(100));
  EXPECT_FALSE(r.ok());
  EXPECT_DOUBLE_EQ(r.double_run_s, 16.0);
  EXPECT_EQ(r.double_run_jobs, 1);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems[0].find("double run: p task 0 ran 16.000 s in two places"),
            std::string::npos)
      << r.problems[0];
  // Touching intervals (one ends as the next starts) are not a double run.
  std::vector<TaskRun> handover{run("q", 2, "h0", 0, 10, std::nullopt),
                                run("q", 2, "h1", 10, 20, 0)};
  EXPECT_EQ(
      check({ack("q", 2)}, {job(2, "q", "COMPLETED", 10, 20, 0)}, handover, at(100)).double_run_s,
      0);
}

TaskRun attempt(TaskRun r, int number) {
  r.attempt = number;
  return r;
}

ControllerJob requeued(ControllerJob j, int requeues) {
  j.requeues = requeues;
  return j;
}

// With the attempts the agent gives its tasks (GPOOL_ATTEMPT), "ran twice" is told from a
// requeue: two runs of one attempt (at once, or one after the other) and two attempts at once
// are findings; the next attempt after the previous one ended is a requeue.
TEST(CheckerTest, AttemptsTellARequeueFromADoubleRun) {
  // One attempt started twice, the runs overlapping by 10 s.
  CheckResult same = check({ack("p", 1)}, {job(1, "p", "COMPLETED", 10, 30, 0)},
                           {attempt(run("p", 1, "h0", 0, 20, std::nullopt), 1),
                            attempt(run("p", 1, "h1", 10, 30, 0), 1)},
                           at(100));
  EXPECT_FALSE(same.ok());
  EXPECT_DOUBLE_EQ(same.double_run_s, 10.0);
  EXPECT_EQ(same.same_attempt_overlaps, 1);
  EXPECT_EQ(same.attempt_overlaps, 0);
  ASSERT_FALSE(same.problems.empty());
  EXPECT_NE(same.problems[0].find("ran 10.000 s in two places (one attempt twice at once): "
                                  "h0/pid 1001 attempt 1 [0.000 s, 20.000 s] h1/pid 1001 "
                                  "attempt 1 [10.000 s, 30.000 s]"),
            std::string::npos)
      << same.problems[0];

  // The requeued attempt started while the first still ran.
  CheckResult two = check({ack("q", 2)}, {requeued(job(2, "q", "COMPLETED", 10, 30, 0), 1)},
                          {attempt(run("q", 2, "h0", 0, 20, std::nullopt), 1),
                           attempt(run("q", 2, "h1", 10, 30, 0), 2)},
                          at(100));
  EXPECT_FALSE(two.ok());
  EXPECT_DOUBLE_EQ(two.double_run_s, 10.0);
  EXPECT_EQ(two.same_attempt_overlaps, 0);
  EXPECT_EQ(two.attempt_overlaps, 1);
  ASSERT_FALSE(two.problems.empty());
  EXPECT_NE(two.problems[0].find("(two attempts at once)"), std::string::npos) << two.problems[0];

  // A clean requeue: attempt 1 killed at 10 s, attempt 2 from 12 s on another server.
  CheckResult clean = check({ack("c", 3)}, {requeued(job(3, "c", "COMPLETED", 12, 30, 0), 1)},
                            {attempt(run("c", 3, "h0", 0, 10, std::nullopt), 1),
                             attempt(run("c", 3, "h1", 12, 30, 0), 2)},
                            at(100));
  EXPECT_TRUE(clean.ok()) << clean.summary();
  EXPECT_EQ(clean.double_run_s, 0);
  EXPECT_EQ(clean.reruns, 0);

  // One attempt run again after it ended, with no requeue: the job ran twice. Without attempts
  // the same records read as a requeue.
  std::vector<TaskRun> again{attempt(run("r", 4, "h0", 0, 10, 0), 1),
                             attempt(run("r", 4, "h1", 20, 30, 0), 1)};
  CheckResult rerun = check({ack("r", 4)}, {job(4, "r", "COMPLETED", 20, 30, 0)}, again, at(100));
  EXPECT_FALSE(rerun.ok());
  EXPECT_EQ(rerun.double_run_s, 0);
  EXPECT_EQ(rerun.reruns, 1);
  ASSERT_FALSE(rerun.problems.empty());
  EXPECT_NE(rerun.problems[0].find("ran twice: r task 0 attempt 1 ran again with no requeue"),
            std::string::npos)
      << rerun.problems[0];
  for (TaskRun& run : again)
    run.attempt = -1;
  EXPECT_TRUE(check({ack("r", 4)}, {job(4, "r", "COMPLETED", 20, 30, 0)}, again, at(100)).ok());
  // ...unless the job was restored from a backup (its state deliberately not judged).
  CheckOptions restored = at(100);
  restored.ignore_state_of = {"r"};
  EXPECT_EQ(
      check({ack("r", 4)}, {job(4, "r", "COMPLETED", 20, 30, 0)},
            {attempt(run("r", 4, "h0", 0, 10, 0), 1), attempt(run("r", 4, "h1", 20, 30, 0), 1)},
            restored)
          .reruns,
      0);
}

TEST(CheckerTest, AttemptsMustBeTheControllersAndInOrder) {
  // A run of attempt 2 of a job the controller never requeued.
  CheckResult beyond = check({ack("a", 1)}, {job(1, "a", "COMPLETED", 0, 10, 0)},
                             {attempt(run("a", 1, "h0", 0, 10, 0), 2)}, at(100));
  EXPECT_EQ(beyond.attempt_mismatch, 1) << beyond.summary();
  EXPECT_FALSE(beyond.ok());
  // The replaced attempt 1 started after attempt 2 had (a stale assignment applied).
  CheckResult stale = check({ack("b", 2)}, {requeued(job(2, "b", "COMPLETED", 0, 10, 0), 1)},
                            {attempt(run("b", 2, "h1", 0, 10, 0), 2),
                             attempt(run("b", 2, "h0", 20, 25, std::nullopt), 1)},
                            at(100));
  EXPECT_EQ(stale.attempt_mismatch, 1) << stale.summary();
  EXPECT_EQ(stale.double_run_s, 0);
  EXPECT_EQ(stale.state_mismatch, 0) << stale.summary();  // its last attempt, 2, exited 0
  // The job is on attempt 2 but its result is attempt 1's: attempt 2 never ran.
  CheckResult old_end = check({ack("c", 3)}, {requeued(job(3, "c", "COMPLETED", 0, 10, 0), 1)},
                              {attempt(run("c", 3, "h0", 0, 10, 0), 1)}, at(100));
  EXPECT_EQ(old_end.state_mismatch, 1) << old_end.summary();
  ASSERT_FALSE(old_end.problems.empty());
  EXPECT_NE(old_end.problems[0].find("but its last run was attempt 1 of 2, which exited 0"),
            std::string::npos)
      << old_end.problems[0];
}

TEST(CheckerTest, OverlapCountsTimeWithTwoOrMoreRunsOnce) {
  EXPECT_DOUBLE_EQ(overlapSeconds({{0, 10 * kS}, {5 * kS, 20 * kS}, {6 * kS, 7 * kS}}), 5.0);
  EXPECT_DOUBLE_EQ(overlapSeconds({{0, kS}, {2 * kS, 3 * kS}}), 0.0);
  EXPECT_DOUBLE_EQ(overlapSeconds({}), 0.0);
}

TEST(CheckerTest, LostDuplicatedAndRefusedButPresentJobsAreFound) {
  Submission refused;
  refused.tag = "r";
  refused.outcome = "refused";
  refused.detail = "503";
  std::vector<ControllerJob> jobs{job(2, "b", "COMPLETED", 0, 1, 0),
                                  job(3, "b", "COMPLETED", 0, 1, 0),
                                  job(4, "r", "COMPLETED", 0, 1, 0)};
  std::vector<TaskRun> runs{run("b", 2, "h0", 0, 1, 0), run("r", 4, "h0", 0, 1, 0)};
  CheckResult r = check({ack("a", 1), ack("b", 2), refused}, jobs, runs, at(100));
  EXPECT_EQ(r.lost, 1);
  EXPECT_EQ(r.duplicated, 1);
  EXPECT_EQ(r.refused_present, 1);
  EXPECT_FALSE(r.ok());
}

TEST(CheckerTest, FinalStatesMustMatchWhatTheTasksDid) {
  // The restore-from-backup defect: job 2 is FAILED exit 7 though its run exited 0.
  CheckResult wrong_exit = check({ack("new", 2)}, {job(2, "new", "FAILED", 0, 1, 7)},
                                 {run("new", 2, "h0", 0, 1, 0)}, at(100));
  EXPECT_EQ(wrong_exit.state_mismatch, 1) << wrong_exit.summary();
  // ...or it never ran at all.
  CheckResult never_ran = check({ack("new", 2)}, {job(2, "new", "FAILED", 0, 1, 7)}, {}, at(100));
  EXPECT_EQ(never_ran.state_mismatch, 1);
  // Exit codes must be the task's (the disk-full defect: exit 4 became -1).
  CheckResult lost_code = check({ack("x", 5)}, {job(5, "x", "FAILED", 0, 1, -1)},
                                {run("x", 5, "h0", 0, 1, 4)}, at(100));
  EXPECT_EQ(lost_code.state_mismatch, 1);
  // COMPLETED while the run failed; CANCELLED while it exited by itself.
  EXPECT_EQ(check({ack("y", 6)}, {job(6, "y", "COMPLETED", 0, 1, 0)}, {run("y", 6, "h0", 0, 1, 2)},
                  at(100))
                .state_mismatch,
            1);
  EXPECT_EQ(
      check({ack("z", 7)}, {job(7, "z", "CANCELLED", 0, 1)}, {run("z", 7, "h0", 0, 1, 0)}, at(100))
          .state_mismatch,
      1);
  // A run that took SIGTERM matches CANCELLED.
  TaskRun term = run("w", 8, "h0", 0, 1, std::nullopt);
  term.end_us = term.last_us;
  term.signal = 15;
  EXPECT_TRUE(check({ack("w", 8)}, {job(8, "w", "CANCELLED", 0, 1)}, {term}, at(100)).ok());
  // A run started under another job id than the one the controller gave its submission.
  CheckResult other_id = check({ack("v", 9)}, {job(9, "v", "COMPLETED", 0, 1, 0)},
                               {run("v", 3, "h0", 0, 1, 0)}, at(100));
  EXPECT_EQ(other_id.id_mismatch, 1);
}

TEST(CheckerTest, RunningAfterTheTaskEndedIsStuck) {
  // The store-full defect: the task exited 4 at 10 s; the job is still RUNNING at 600 s.
  CheckResult r = check({ack("s", 1)}, {job(1, "s", "RUNNING", 0, std::nullopt)},
                        {run("s", 1, "h0", 0, 10, 4)}, at(600));
  EXPECT_EQ(r.stuck_running, 1);
  EXPECT_EQ(r.unfinished, 1);
  EXPECT_FALSE(r.ok());
  // Still running and still writing: not stuck.
  CheckResult live = check({ack("s", 1)}, {job(1, "s", "RUNNING", 0, std::nullopt)},
                           {run("s", 1, "h0", 0, 600, std::nullopt)}, at(600));
  EXPECT_EQ(live.stuck_running, 0);
  EXPECT_TRUE(live.ok()) << live.summary();
}

TEST(CheckerTest, RecordedTimesMustBeTheTasksOwnWithinTheTolerance) {
  // A controller restart rewrote the start (+13.6 s); an end recorded at the reconnect (+10 s).
  CheckResult start = check({ack("a", 1)}, {job(1, "a", "COMPLETED", 14, 60, 0)},
                            {run("a", 1, "h0", 0, 60, 0)}, at(100));
  EXPECT_EQ(start.time_mismatch, 1);
  EXPECT_DOUBLE_EQ(start.max_time_error_s, 14.0);
  CheckResult end = check({ack("b", 2)}, {job(2, "b", "FAILED", 0, 15, 3)},
                          {run("b", 2, "h0", 0, 5, 3)}, at(100));
  EXPECT_EQ(end.time_mismatch, 1);
  // Within the tolerance (1.5 s by default): fine.
  ControllerJob close = job(3, "c", "COMPLETED", 0, 5, 0);
  *close.start_us += 400'000;
  *close.end_us += 900'000;
  EXPECT_TRUE(check({ack("c", 3)}, {close}, {run("c", 3, "h0", 0, 5, 0)}, at(100)).ok());
  // A killed run (no end record) ended somewhere after its last tick: up to silent_after later.
  CheckResult killed = check({ack("d", 4)}, {job(4, "d", "CANCELLED", 0, 6)},
                             {run("d", 4, "h0", 0, 5, std::nullopt)}, at(100));
  EXPECT_EQ(killed.time_mismatch, 0) << killed.summary();
}

TEST(CheckerTest, GpuTimeChargedMustBeWhatTheRunsUsed) {
  // Two runs of 10 s on 2 GPUs: 40 GPU-seconds; 2 runs x 2 GPUs x 1.5 s of tolerance.
  ControllerJob a = job(1, "a", "COMPLETED", 0, 10, 0);
  a.gpus = 2;
  ControllerJob b = job(2, "b", "COMPLETED", 20, 30, 0);
  b.gpus = 2;
  std::vector<TaskRun> runs{run("a", 1, "h0", 0, 10, 0), run("b", 2, "h0", 20, 30, 0)};
  CheckOptions o = at(100);
  o.usage_gpu_s = 45;
  CheckResult fine = check({ack("a", 1), ack("b", 2)}, {a, b}, runs, o);
  EXPECT_TRUE(fine.ok()) << fine.summary();
  EXPECT_DOUBLE_EQ(fine.task_gpu_s, 40);
  // The trial's restart charged 45.8 s of a 60 s run on one GPU.
  ControllerJob c = job(3, "c", "COMPLETED", 0, 60, 0);
  c.gpus = 1;
  CheckOptions restart = at(100);
  restart.usage_gpu_s = 45.8;
  CheckResult cut = check({ack("c", 3)}, {c}, {run("c", 3, "h0", 0, 60, 0)}, restart);
  EXPECT_EQ(cut.usage_mismatch, 1) << cut.summary();
  EXPECT_FALSE(cut.ok());
  // A NODE_FAIL job's keep-running task goes on uncharged by design: not compared.
  ControllerJob d = job(4, "d", "NODE_FAIL", 0, 5);
  d.gpus = 1;
  CheckResult node_fail = check({ack("d", 4)}, {d}, {run("d", 4, "h0", 0, 60, 0)}, restart);
  EXPECT_EQ(node_fail.usage_mismatch, 0);
  EXPECT_EQ(node_fail.usage_gpu_s, -1);
  // Nor a requeued one's first attempt, charged until its node was declared lost.
  ControllerJob e = job(5, "e", "COMPLETED", 20, 30, 0);
  e.gpus = 1;
  e.requeues = 1;
  CheckResult requeued =
      check({ack("e", 5)}, {e},
            {run("e", 5, "h0", 0, 3, std::nullopt), run("e", 5, "h1", 20, 30, 0)}, restart);
  EXPECT_EQ(requeued.usage_gpu_s, -1);
  EXPECT_TRUE(requeued.ok()) << requeued.summary();
}

TEST(RecordsTest, ParsesARunAndIgnoresATornLastLine) {
  const std::string text =
      "start tag=t1 job=12 task=0 attempt=-1 host=h1 pid=77 t=100\n"
      "tick t=200\n"
      "tick t=300\n"
      "end t=350 exit=4\n";
  Result<TaskRun> r = parseRun(text, "f.rec");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->tag, "t1");
  EXPECT_EQ(r->job_id, 12);
  EXPECT_EQ(r->host, "h1");
  EXPECT_EQ(r->pid, 77);
  EXPECT_EQ(r->start_us, 100);
  EXPECT_EQ(r->last_us, 350);
  EXPECT_EQ(r->ticks, 2);
  EXPECT_EQ(r->exit_code, 4);
  Result<TaskRun> torn = parseRun(
      "start tag=t1 job=12 task=0 attempt=2 host=h1 pid=77 t=100\ntick t=200\ntick t=3", "g.rec");
  ASSERT_TRUE(torn.ok());
  EXPECT_EQ(torn->last_us, 200);
  EXPECT_EQ(torn->attempt, 2);
  EXPECT_FALSE(torn->ended());
  Result<TaskRun> term =
      parseRun("start tag=t job=1 task=0 attempt=-1 host=h pid=1 t=1\nend t=5 signal=15\n", "x");
  ASSERT_TRUE(term.ok());
  EXPECT_EQ(term->signal, 15);
}

TEST(RecordsTest, MalformedRecordsAreErrorsNamingFileAndLine) {
  for (const std::string& text :
       {std::string("tick t=1\n"),
        std::string("start tag=a job=x task=0 attempt=1 host=h pid=1 t=1\n"),
        std::string(
            "start tag=a job=1 task=0 attempt=1 host=h pid=1 t=1\nend t=2 exit=0\ntick t=3\n"),
        std::string("start tag=a job=1 task=0 attempt=1 host=h pid=1 t=1\nbogus t=2\n")}) {
    Result<TaskRun> r = parseRun(text, "bad.rec");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message().rfind("bad.rec:", 0), 0u) << r.status().message();
  }
  EXPECT_EQ(parseRun("", "empty.rec").status().code(), StatusCode::kNotFound);
}

TEST(CheckerTest, PercentileByNearestRank) {
  EXPECT_EQ(percentile({}, 50), 0);
  EXPECT_EQ(percentile({5, 1, 3}, 50), 3);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i)
    hundred.push_back(i);
  EXPECT_EQ(percentile(hundred, 99), 99);
  EXPECT_EQ(percentile(hundred, 100), 100);
}

}  // namespace
}  // namespace gpool::system_test
