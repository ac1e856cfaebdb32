// Drives the gpoold binary: start-up over a fresh SQLite file, clean stop on SIGTERM, one-pass
// mode, and configuration errors. No sleeps: the test blocks on the daemon's "ready" line and on
// waitpid.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "controller/controller_fixture.h"
#include "store/api_codec.h"

namespace gpool::controller {
namespace {

const std::string kGpoold = std::string(GPOOL_BINARY_DIR) + "/src/controller/gpoold";

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;  // the child's stdout
};

Child spawn(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kGpoold.c_str()));
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kGpoold.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  return Child{pid, fdopen(fds[0], "r")};
}

int waitExit(Child& child) {
  int status = 0;
  waitpid(child.pid, &status, 0);
  if (child.out) fclose(child.out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string readLine(FILE* f) {
  char buf[512];
  if (!fgets(buf, sizeof buf, f)) return "";
  std::string line(buf);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

class GpooldTest : public ::testing::Test {
 protected:
  std::string writeConfig(const std::string& extra = "") {
    std::string path = dir_.path() + "/gpoold.toml";
    std::ofstream(path) << "[controller]\nstore = \"" << db_ << "\"\n"
                        << "sqlite_synchronous = \"NORMAL\"\n"
                        << extra << "[log]\nlevel = \"warn\"\n";
    return path;
  }
  testing::TempDir dir_;
  std::string db_ = dir_.path() + "/gpool.db";
};

TEST_F(GpooldTest, StartsOpensTheStoreAndStopsOnSigterm) {
  Child child = spawn({"--config", writeConfig()});
  ASSERT_GT(child.pid, 0);
  EXPECT_EQ(readLine(child.out), "ready");
  EXPECT_TRUE(std::filesystem::exists(db_));
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

TEST_F(GpooldTest, OncePlacesWhatTheStoreHolds) {
  {
    auto store = testing::openStore(db_);
    ASSERT_TRUE(store::saveApiNode(*store, testing::makeNode("gpu-01", 2)).isOk());
    ASSERT_TRUE(store::submitApiJob(*store, "alice", 1001, "ml", testing::makeSpec(1000),
                                    fromUnixSeconds(1'700'000'000))
                    .ok());
  }
  Child child = spawn({"--config", writeConfig(), "--once"});
  EXPECT_EQ(readLine(child.out), "pass: started=1 pending=0 nodes=1");
  EXPECT_EQ(waitExit(child), 0);
  auto store = testing::openStore(db_);
  auto running = store->jobsInStates({"RUNNING"});
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->size(), 1u);
}

TEST_F(GpooldTest, BadConfigurationExitsWithTwo) {
  Child child = spawn({"--config", writeConfig("node_down_afterr = \"90s\"\n"), "--once"});
  EXPECT_EQ(waitExit(child), 2);
  Child missing = spawn({"--config", dir_.path() + "/nope.toml", "--once"});
  EXPECT_EQ(waitExit(missing), 2);
}

}  // namespace
}  // namespace gpool::controller
