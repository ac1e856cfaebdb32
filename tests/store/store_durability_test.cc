#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "store/postgres_store.h"
#include "store/sqlite_store.h"
#include "store/store_test_fixture.h"

namespace gpool::store::testing {
namespace {

NewJob minimalJob(const std::string& user) {
  NewJob j;
  j.user = user;
  j.group = "g";
  j.gpu_thousandths = 1000;
  j.spec_json = "{}";
  return j;
}

size_t countJobs(Store& store) {
  auto all = store.jobsInStates({});
  EXPECT_TRUE(all.ok()) << all.status().toString();
  return all.ok() ? all->size() : 0;
}

using DurabilityTest = StoreTest;

TEST_P(DurabilityTest, MigratesFromEmptyAndReopensWithoutLosingData) {
  auto version = store().schemaVersion();
  ASSERT_TRUE(version.ok()) << version.status().toString();
  EXPECT_EQ(*version, kSchemaVersion);
  auto ids = store().submitJobs({minimalJob("a"), minimalJob("b")}, at(0));
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(store().upsertNode({"n1", "IDLE", "{}", at(1)}).isOk());
  reopen();
  version = store().schemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kSchemaVersion);
  EXPECT_EQ(countJobs(store()), 2u);
  auto node = store().getNode("n1");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->last_heartbeat, at(1));
  // Ids continue after a restart; none is reused.
  auto more = store().submitJobs({minimalJob("c")}, at(2));
  ASSERT_TRUE(more.ok());
  EXPECT_GT(more->at(0), ids->at(1));
}

// A database left at version 1 by an older binary is upgraded on open, keeping its rows.
TEST_P(DurabilityTest, UpgradesAnOlderSchemaKeepingItsData) {
  auto ids = store().submitJobs({minimalJob("old")}, at(0));
  ASSERT_TRUE(ids.ok());
  // Turn the database back into what version 1 wrote.
  ASSERT_TRUE(
      store()
          .execForTest(
              "ALTER TABLE jobs DROP COLUMN uid; ALTER TABLE jobs DROP COLUMN "
              "hold; DROP INDEX api_tokens_node; ALTER TABLE api_tokens DROP "
              "COLUMN kind; ALTER TABLE api_tokens DROP COLUMN public_id; ALTER "
              "TABLE api_tokens DROP COLUMN node_name; ALTER TABLE api_tokens "
              "DROP COLUMN reusable; ALTER TABLE api_tokens DROP COLUMN uses; "
              "ALTER TABLE api_tokens DROP COLUMN last_used; DROP TABLE task_telemetry; DROP TABLE "
              "alert_events; DROP TABLE alerts; DROP TABLE gpu_holds; DROP TABLE "
              "store_incarnation; ALTER TABLE jobs DROP COLUMN incarnation; DROP TABLE "
              "job_attempts; DROP TABLE job_idle; UPDATE "
              "schema_version SET version = 1 WHERE id = 1")
          .isOk());
  reopen();
  auto version = store().schemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kSchemaVersion);
  auto got = store().getJob(ids->at(0));
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_EQ(got->user, "old");
  EXPECT_EQ(got->uid, 0u);
  EXPECT_EQ(got->incarnation, 0);
  EXPECT_EQ(store().currentIncarnation(), 0);
  NewJob j = minimalJob("new");
  j.uid = 4242;
  auto more = store().submitJobs({j}, at(1));
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(store().getJob(more->at(0))->uid, 4242u);
  EXPECT_EQ(store().getJob(more->at(0))->hold, "");
}

// The alert engine's alerts and the GPU holds, on both backends: an alert fires, is
// acknowledged once, resolves once, with its history; a hold is kept and cleared with an audit
// event.
TEST_P(DurabilityTest, AlertsAndGpuHoldsKeepTheirHistory) {
  AlertRecord a;
  a.rule = "gpu_too_hot";
  a.fingerprint = "00ff00ff00ff00ff";
  a.severity = "critical";
  a.labels_json = R"({"Hostname":"gpu-01","gpu":"0"})";
  a.summary = "GPU 0 of gpu-01 is at 92 C";
  a.started = at(0);
  auto id = store().fireAlert(a);
  ASSERT_TRUE(id.ok()) << id.status().toString();
  EXPECT_TRUE(store().ackAlert(*id, "root", at(1)).isOk());
  EXPECT_EQ(store().ackAlert(*id, "root", at(2)).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store().resolveAlert(*id, at(3), "clear").isOk());
  EXPECT_EQ(store().resolveAlert(*id, at(4), "clear").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().resolveAlert(999, at(4), "").code(), StatusCode::kNotFound);
  auto second = store().fireAlert(a);
  ASSERT_TRUE(second.ok());
  auto firing = store().listAlerts({"firing", 0, 10});
  ASSERT_TRUE(firing.ok());
  ASSERT_EQ(firing->size(), 1u);
  EXPECT_EQ((*firing)[0].id, *second);
  auto all = store().listAlerts({"", 0, 10});
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, *second);  // newest first
  EXPECT_EQ(store().listAlerts({"", *second, 10})->size(), 1u);
  auto got = store().getAlert(*id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, "resolved");
  EXPECT_EQ(got->acked_by, "root");
  ASSERT_TRUE(got->resolved.has_value());
  auto events = store().alertEvents(*id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].event, "fired");
  EXPECT_EQ((*events)[1].event, "acked");
  EXPECT_EQ((*events)[2].event, "resolved");

  ASSERT_TRUE(store().holdGpu({"GPU-1", "gpu-01", "XID 79", at(5)}).isOk());
  ASSERT_TRUE(store().holdGpu({"GPU-1", "gpu-01", "again", at(6)}).isOk());  // kept as was
  auto holds = store().listGpuHolds();
  ASSERT_TRUE(holds.ok());
  ASSERT_EQ(holds->size(), 1u);
  EXPECT_EQ((*holds)[0].reason, "XID 79");
  reopen();
  EXPECT_EQ(store().listGpuHolds()->size(), 1u);
  EXPECT_TRUE(store().clearGpuHold("GPU-1", "root", at(7)).isOk());
  EXPECT_EQ(store().clearGpuHold("GPU-1", "root", at(8)).code(), StatusCode::kNotFound);
  EXPECT_TRUE(store().listGpuHolds()->empty());
  auto audit = store().auditEvents(0, 100);
  ASSERT_TRUE(audit.ok());
  ASSERT_FALSE(audit->empty());
  EXPECT_EQ(audit->back().action, "gpu clear");
}

TEST_P(DurabilityTest, RefusesAStoreWrittenByANewerBinary) {
  ASSERT_TRUE(store().execForTest("UPDATE schema_version SET version = 99 WHERE id = 1").isOk());
  store_.reset();
  auto reopened = openStore();
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(reopened.status().message().find("newer"), std::string::npos)
      << reopened.status().message();
  // It left the database alone.
  ASSERT_TRUE(openStore().status().code() == StatusCode::kFailedPrecondition);
}

TEST_P(DurabilityTest, EachMigrationHasAVersionAndSql) {
  auto migrations =
      migrationsFor(backend() == Backend::kSqlite ? Dialect::kSqlite : Dialect::kPostgres);
  ASSERT_EQ(static_cast<int32_t>(migrations.size()), kSchemaVersion);
  for (size_t i = 0; i < migrations.size(); ++i) {
    EXPECT_EQ(migrations[i].version, static_cast<int32_t>(i + 1));
    EXPECT_FALSE(migrations[i].sql.empty());
    EXPECT_EQ(migrations[i].sql.find('{'), std::string::npos) << "unexpanded placeholder";
  }
}

TEST_P(DurabilityTest, InjectedFailureMidTransactionLeavesNothingHalfWritten) {
  // A batch of 5 jobs is 10 statements (job + event each); fail the 7th.
  store().failStatementForTest(7);
  auto ids = store().submitJobs(
      {minimalJob("a"), minimalJob("a"), minimalJob("a"), minimalJob("a"), minimalJob("a")}, at(0));
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), StatusCode::kIoError);
  EXPECT_EQ(countJobs(store()), 0u);

  auto one = store().submitJobs({minimalJob("b")}, at(1));
  ASSERT_TRUE(one.ok());
  int64_t id = one->at(0);
  ASSERT_TRUE(store().recordPlacement(id, "{}", at(2), "placed").ok());
  ASSERT_TRUE(store().recordStart(id, 1, at(3), at(3)).isOk());
  // recordEnd: load, update state, event, end time, usage. Fail at the usage row: the state
  // change and its event written before it must be rolled back too.
  store().failStatementForTest(5);
  EXPECT_EQ(store().recordEnd(id, api::JobState::kFailed, 1, at(4000), "exit 1").code(),
            StatusCode::kIoError);
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kRunning);
  EXPECT_FALSE(got->end_time.has_value());
  EXPECT_EQ(store().jobEvents(id)->size(), 3u);
  EXPECT_TRUE(store().usageOfJob(id)->empty());
  // And the same call succeeds once the fault is gone.
  ASSERT_TRUE(store().recordEnd(id, api::JobState::kFailed, 1, at(4000), "exit 1").isOk());
  EXPECT_EQ(store().jobEvents(id)->size(), 4u);
  EXPECT_EQ(store().usageOfJob(id)->size(), 1u);

  // A quota change and its audit row go together as well.
  ASSERT_TRUE(store().upsertUser({"carl", 1001, "user", "{}"}).isOk());
  store().failStatementForTest(3);
  EXPECT_FALSE(
      store().setQuota({QuotaSubject::kUser, "carl", R"({"gpus":2})", at(5)}, "root").isOk());
  EXPECT_EQ(store().getQuota(QuotaSubject::kUser, "carl").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store().auditEvents(0, 10)->empty());
}

TEST_P(DurabilityTest, ConcurrentWritersLoseNothing) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::vector<std::vector<int64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto r = store().submitJobs({minimalJob("user" + std::to_string(t))}, at(i));
        if (r.ok()) ids[t].push_back(r->at(0));
      }
    });
  }
  for (auto& th : threads)
    th.join();
  std::set<int64_t> all;
  for (const auto& v : ids) {
    EXPECT_EQ(v.size(), static_cast<size_t>(kPerThread));
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(countJobs(store()), all.size());
}

// Concurrent writes may share one transaction (SQLite's group commit); a failing one must
// not take the others down with it, nor leave anything of itself behind.
TEST_P(DurabilityTest, ConcurrentWritersFailIndependently) {
  constexpr int kThreads = 8;
  std::atomic<int> created{0};
  std::atomic<int> duplicates{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        TokenRecord token;
        token.user = "u" + std::to_string(t);
        // Threads t and t + 4 race for the same hash in every round.
        token.hash = "hash-" + std::to_string(round) + "-" + std::to_string(t % 4);
        token.created = at(round);
        auto r = store().createToken(token, "admin");
        if (r.ok()) {
          ++created;
        } else if (r.status().code() == StatusCode::kAlreadyExists) {
          ++duplicates;
        }
        ASSERT_TRUE(store().submitJobs({minimalJob(token.user)}, at(round)).ok());
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(created.load(), 40);
  EXPECT_EQ(duplicates.load(), 40);
  size_t tokens = 0;
  for (int t = 0; t < kThreads; ++t)
    tokens += store().listTokens("u" + std::to_string(t))->size();
  EXPECT_EQ(tokens, 40u);
  EXPECT_EQ(countJobs(store()), 80u);
}

TEST_P(DurabilityTest, ConcurrentPlacementsOfOneJobExactlyOneWins) {
  for (int round = 0; round < 5; ++round) {
    auto ids = store().submitJobs({minimalJob("z")}, at(round));
    ASSERT_TRUE(ids.ok());
    int64_t id = ids->at(0);
    std::atomic<int> wins{0};
    std::atomic<int> refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        auto r = store().recordPlacement(id, "{\"node\":\"n" + std::to_string(t) + "\"}", at(round),
                                         "placed");
        if (r.ok()) {
          ++wins;
        } else if (r.status().code() == StatusCode::kFailedPrecondition) {
          ++refused;
        }
      });
    }
    for (auto& th : threads)
      th.join();
    EXPECT_EQ(wins.load(), 1);
    EXPECT_EQ(refused.load(), 3);
    auto got = store().getJob(id);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->epoch, 1);
    EXPECT_EQ(store().jobEvents(id)->size(), 2u);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DurabilityTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), backendName);

// SQLite only: the embedded store must keep every acknowledged commit when the controller is
// killed at an arbitrary point. A child process submits jobs one by one and reports each id
// once submitJobs returned; the parent kills it with SIGKILL mid-stream and checks the file.
TEST(SqliteCrashTest, AcknowledgedSubmissionsSurviveSigkill) {
  char tmpl[] = "/tmp/gpool-store-crash-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/gpool.db";
  {
    auto created = SqliteStore::open(path);
    ASSERT_TRUE(created.ok()) << created.status().toString();
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    auto store = SqliteStore::open(path);
    if (!store.ok()) _exit(2);
    for (int i = 0;; ++i) {
      auto ids = (*store)->submitJobs({minimalJob("crash")}, at(i));
      if (!ids.ok()) _exit(3);
      int64_t id = ids->at(0);
      if (write(fds[1], &id, sizeof(id)) != sizeof(id)) _exit(4);
    }
  }
  close(fds[1]);
  std::vector<int64_t> acked;
  while (acked.size() < 60) {
    int64_t id = 0;
    ssize_t n = read(fds[0], &id, sizeof(id));
    ASSERT_EQ(n, static_cast<ssize_t>(sizeof(id)));
    acked.push_back(id);
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  // Drain what the child acknowledged between the last read and its death.
  int64_t id = 0;
  while (read(fds[0], &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id)))
    acked.push_back(id);
  close(fds[0]);

  auto store = SqliteStore::open(path);
  ASSERT_TRUE(store.ok()) << store.status().toString();
  auto all = (*store)->jobsInStates({});
  ASSERT_TRUE(all.ok());
  std::set<int64_t> present;
  for (const auto& j : all.value()) {
    present.insert(j.id);
    // Never a job without its submission event.
    EXPECT_EQ((*store)->jobEvents(j.id)->size(), 1u) << "job " << j.id;
  }
  for (int64_t a : acked)
    EXPECT_TRUE(present.count(a)) << "acknowledged job " << a << " lost";
  // At most the one submission in flight at the kill may exist beyond the acknowledged ones.
  EXPECT_LE(present.size(), acked.size() + 1);
  store->reset();
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

TEST(SqliteStoreTest, RejectsABadSynchronousSetting) {
  char tmpl[] = "/tmp/gpool-store-opt-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  SqliteOptions options;
  options.synchronous = "OFF";
  auto s = SqliteStore::open(std::string(tmpl) + "/x.db", options);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  auto bad = SqliteStore::open("/nonexistent-dir/x.db");
  EXPECT_EQ(bad.status().code(), StatusCode::kIoError);
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

TEST(PostgresStoreTest, UnreachableServerIsUnavailable) {
  char tmpl[] = "/tmp/gpool-store-nopg-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  auto s = PostgresStore::open({"host=" + std::string(tmpl) + " port=5999 dbname=x", 2});
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(PostgresStore::open({"", 1}).status().code(), StatusCode::kInvalidArgument);
  rmdir(tmpl);
}

}  // namespace
}  // namespace gpool::store::testing
