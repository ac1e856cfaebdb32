// `gpool admin backup | verify | restore` and gpoold's backup timer, through the real binaries:
// a backup taken while clients submit holds every job acknowledged before it and restores to
// it; ids issued after the backup are never issued again; a restore under a running gpoold and
// a damaged backup are refused with the store unchanged. No sleeps: the daemon's `ready` line,
// waitpid, and polls with deadlines.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "cli/gpoold_cli_fixture.h"
#include "store/backup.h"

namespace gpool::cli {
namespace {

using nlohmann::json;
using testing::Output;
namespace fs = std::filesystem;

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class BackupCliTest : public testing::GpooldCliTest {
 protected:
  // `gpool admin ...` with this test's gpoold configuration.
  Output admin(std::vector<std::string> args) {
    args.insert(args.begin(), "admin");
    args.push_back("--config");
    args.push_back(config_);
    return gpool(args);
  }

  // `gpool submit`; `out_dir` takes its output files (runProgram's dir/stdout, dir/stderr), so
  // that clients on other threads do not read each other's answers.
  std::optional<int64_t> submit(const std::string& out_dir = "") {
    Output out =
        out_dir.empty()
            ? gpool({"submit", "--json", "--", "true"})
            : testing::runProgram(testing::kGpool,
                                  {"--socket", socket_, "submit", "--json", "--", "true"}, out_dir);
    if (out.rc != 0) return std::nullopt;
    return json::parse(out.out).at("ids").at(0).get<int64_t>();
  }

  bool known(int64_t id) { return gpool({"show", std::to_string(id)}).rc == 0; }

  void SetUp() override { config_ = writeConfig(); }

  std::string config_;
};

// The first "done when": a backup taken during steady submissions restores to a state
// where every job acknowledged before the backup is present, and no id is issued twice.
TEST_F(BackupCliTest, BackupDuringSubmissionsRestoresEveryAcknowledgedJobAndReusesNoId) {
  startDaemon();
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::set<int64_t> acked;
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c) {
    const std::string out_dir = dir_.path() + "/client" + std::to_string(c);
    fs::create_directories(out_dir);
    clients.emplace_back([&, out_dir] {
      while (!stop.load()) {
        std::optional<int64_t> id = submit(out_dir);
        if (!id) continue;
        std::lock_guard lock(mu);
        acked.insert(*id);
      }
    });
  }
  auto count = [&] {
    std::lock_guard lock(mu);
    return acked.size();
  };
  auto reach = [&](size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (count() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return count() >= n;
  };
  ASSERT_TRUE(reach(20));
  std::set<int64_t> before;
  {
    std::lock_guard lock(mu);
    before = acked;
  }
  const std::string backup = dir_.path() + "/pool.backup";
  Output taken = admin({"backup", backup});
  const size_t at_end = count();
  ASSERT_TRUE(reach(at_end + 5));  // submissions went on beside it
  stop = true;
  for (auto& t : clients)
    t.join();
  ASSERT_EQ(taken.rc, 0) << taken.err;
  EXPECT_TRUE(mentions(taken.out, "Backup written: " + backup)) << taken.out;
  EXPECT_TRUE(mentions(taken.out, "SHA-256")) << taken.out;
  const int64_t highest = *acked.rbegin();

  Output verified = gpool({"--json", "admin", "verify", backup});
  ASSERT_EQ(verified.rc, 0) << verified.err;
  json summary = json::parse(verified.out);
  EXPECT_TRUE(summary.at("ok").get<bool>());
  const int64_t in_backup = summary.at("jobs").get<int64_t>();
  EXPECT_GE(in_backup, static_cast<int64_t>(before.size()));
  EXPECT_LT(in_backup, static_cast<int64_t>(acked.size()));
  EXPECT_EQ(summary.at("jobs_by_state").at("PENDING").get<int64_t>(), in_backup);

  ASSERT_EQ(gpoold_.stop(), 0);
  Output restored = admin({"restore", backup});
  ASSERT_EQ(restored.rc, 0) << restored.err;
  EXPECT_TRUE(mentions(restored.out, "kept aside    " + db_ + ".before-restore-")) << restored.out;
  startDaemon();
  for (int64_t id : before)
    EXPECT_TRUE(known(id)) << "job " << id << " was acknowledged before the backup";
  const int64_t last_restored = summary.at("max_job_id").get<int64_t>();
  EXPECT_FALSE(known(last_restored + 1)) << "a job submitted after the backup came back";
  std::optional<int64_t> fresh = submit();
  ASSERT_TRUE(fresh);
  EXPECT_GT(*fresh, highest) << "the restored store issued an id that was already issued";
}

// Restore while gpoold runs is refused (gpoold holds the store's lock); the store is unchanged.
// A damaged backup is refused with its fault named and the store unchanged too.
TEST_F(BackupCliTest, RestoreIsRefusedUnderARunningGpooldAndForADamagedBackup) {
  startDaemon();
  std::optional<int64_t> first = submit();
  ASSERT_TRUE(first);
  const std::string backup = dir_.path() + "/pool.backup";
  ASSERT_EQ(admin({"backup", backup}).rc, 0);
  std::optional<int64_t> second = submit();
  ASSERT_TRUE(second);

  Output refused = admin({"restore", backup});
  EXPECT_EQ(refused.rc, 5) << refused.out << refused.err;
  EXPECT_TRUE(mentions(refused.err, "gpoold is running on store '" + db_ + "'")) << refused.err;
  EXPECT_TRUE(known(*second)) << "the store changed under the running gpoold";
  ASSERT_EQ(gpoold_.stop(), 0);

  std::string data = testing::readFile(backup);
  const std::string cut = dir_.path() + "/cut.backup";
  std::ofstream(cut, std::ios::binary) << data.substr(0, data.size() / 2);
  Output truncated = admin({"restore", cut});
  EXPECT_EQ(truncated.rc, 2) << truncated.out << truncated.err;
  EXPECT_TRUE(mentions(truncated.err, "backup '" + cut + "': truncated")) << truncated.err;
  Output verify = gpool({"admin", "verify", cut});
  EXPECT_EQ(verify.rc, 2);
  EXPECT_TRUE(mentions(verify.err, "missing")) << verify.err;
  for (const auto& e : fs::directory_iterator(dir_.path())) {
    EXPECT_FALSE(mentions(e.path().filename().string(), "before-restore"))
        << "a refused restore moved the store: " << e.path();
  }
  startDaemon();
  EXPECT_TRUE(known(*second));
}

// gpoold's timer writes a backup every backup.interval into backup.dir and keeps the newest
// backup.keep; each one verifies.
TEST_F(BackupCliTest, GpooldTimerWritesAndRotatesBackups) {
  const std::string dir = dir_.path() + "/backups";
  fs::create_directories(dir);
  controller_extra_ += "[backup]\ndir = \"" + dir + "\"\ninterval = \"1s\"\nkeep = 2\n";
  config_ = writeConfig();
  ASSERT_EQ(gpoold_.start(config_), "");
  ASSERT_TRUE(submit());
  std::set<std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  size_t most = 0;
  while (seen.size() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> now = store::timerBackups(dir);
    most = std::max(most, now.size());
    seen.insert(now.begin(), now.end());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(seen.size(), 4u) << "the timer wrote fewer than 4 backups in 60 s";
  // A new backup is written before the oldest is removed, so a look in between may see 3.
  EXPECT_LE(most, 3u);
  ASSERT_EQ(gpoold_.stop(), 0);
  std::vector<std::string> left = store::timerBackups(dir);
  EXPECT_EQ(left.size(), 2u) << "backup.keep = 2";
  ASSERT_FALSE(left.empty());
  Output verify = gpool({"admin", "verify", left.back()});
  EXPECT_EQ(verify.rc, 0) << verify.err;
  EXPECT_TRUE(mentions(verify.out, "jobs          1 (PENDING 1)")) << verify.out;

  // backup.dir with a PostgreSQL store is refused by name.
  const std::string bad =
      testing::writeGpooldConfig(dir_.path() + "/bad.toml", "host=/nowhere dbname=gpool", socket_,
                                 "[backup]\ndir = \"" + dir + "\"\n");
  Output check = gpool({"config", "check", bad});
  EXPECT_EQ(check.rc, 2);
  EXPECT_TRUE(mentions(check.err, "the backup timer copies a SQLite store")) << check.err;
}

}  // namespace
}  // namespace gpool::cli
