// `gpool top` against a real local pool (`gpool up --simulate --demo`): --once and --json, and
// the live view driven in a tmux pane (waits until capture-pane shows the GPUs and a running
// job's tenant, presses q, checks the exit status). Polls with deadlines; no sleeps for
// synchronisation beyond the polling interval.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "common/clock.h"

namespace gpool::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::kGpool;
using testing::Output;
using testing::readFile;

// Runs a shell command line and returns its stdout.
std::string shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    out.append(buf, n);
  ::pclose(p);
  return out;
}

class TopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpool-top-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::string out_tmpl = (fs::temp_directory_path() / "gpool-top-out-XXXXXX").string();
    ASSERT_NE(mkdtemp(out_tmpl.data()), nullptr);
    out_dir_ = out_tmpl;
    tmux_ = "tmux -L gpool-top-" + std::to_string(::getpid());
  }
  void TearDown() override {
    shell(tmux_ + " kill-server 2>/dev/null");
    if (fs::exists(dir_ + "/pool.json")) gpool({"down", "--dir", dir_, "--timeout", "10"});
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::remove_all(out_dir_, ec);
  }
  Output gpool(const std::vector<std::string>& args) {
    return testing::runProgram(kGpool, args, out_dir_);
  }

  // Polls `check` every 100 ms until it holds or `seconds` pass.
  template <typename F>
  bool waitUntil(F check, int seconds = 60) {
    auto deadline = realClock().monotonic() + std::chrono::seconds(seconds);
    while (realClock().monotonic() < deadline) {
      if (check()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return check();
  }

  std::string dir_;
  std::string out_dir_;
  std::string tmux_;
};

TEST_F(TopTest, ShowsEveryGpuWithTelemetryAndTenantsOnceLiveAndAsJson) {
  if (shell("command -v tmux").empty()) GTEST_SKIP() << "tmux is not installed";
  Output up =
      gpool({"up", "--dir", dir_, "--servers", "2", "--simulate", "--demo", "--timeout", "60"});
  ASSERT_EQ(up.rc, 0) << up.out << up.err;
  std::string socket = dir_ + "/gpoold.sock";

  // --once: 16 simulated GPUs; wait until the agents' telemetry and a running tenant show.
  std::string once;
  ASSERT_TRUE(waitUntil([&] {
    Output o = gpool({"--socket", socket, "top", "--once"});
    once = o.out;
    return o.rc == 0 && once.find("gpool-demo-alice:1") != std::string::npos &&
           once.find('%') != std::string::npos;
  })) << once;
  EXPECT_NE(once.find("16 GPUs"), std::string::npos) << once;
  EXPECT_NE(once.find("simulated"), std::string::npos) << once;
  EXPECT_NE(once.find("sim-node-2"), std::string::npos) << once;

  Output j = gpool({"--socket", socket, "--json", "top"});
  ASSERT_EQ(j.rc, 0) << j.err;
  json answer = json::parse(j.out, nullptr, false);
  ASSERT_TRUE(answer.contains("gpus")) << j.out;
  EXPECT_EQ(answer["gpus"].size(), 16u);

  Output bad = gpool({"--socket", socket, "top", "--interval", "0"});
  EXPECT_EQ(bad.rc, 2) << bad.err;  // invalid_argument (docs/cli-exit-codes.md)
  EXPECT_NE(bad.err.find("--interval"), std::string::npos) << bad.err;

  // Live in an 80-column tmux pane; its exit status goes to a file.
  std::string rc_file = out_dir_ + "/top.rc";
  std::string command = std::string(kGpool) + " --socket " + socket +
                        " top --interval 0.5; echo $? > " + rc_file + "; sleep 60";
  ASSERT_EQ(std::system((tmux_ + " new-session -d -s top -x 80 -y 30 '" + command + "'").c_str()),
            0);
  std::string screen;
  ASSERT_TRUE(waitUntil([&] {
    screen = shell(tmux_ + " capture-pane -p -t top");
    return screen.find("sim-node-1") != std::string::npos &&
           screen.find("gpool-demo-alice:1") != std::string::npos &&
           screen.find("q to quit") != std::string::npos;
  })) << screen;
  for (const std::string& line : {std::string("NODE"), std::string("TENANTS")})
    EXPECT_NE(screen.find(line), std::string::npos) << screen;
  ASSERT_EQ(std::system((tmux_ + " send-keys -t top q").c_str()), 0);
  ASSERT_TRUE(waitUntil([&] { return fs::exists(rc_file) && !readFile(rc_file).empty(); }, 20));
  EXPECT_EQ(readFile(rc_file), "0\n");
}

}  // namespace
}  // namespace gpool::cli
