#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "controller/controller_fixture.h"

// The fixture of the CLI tests that run the real `gpool` against one real gpoold over its Unix
// socket: a temporary directory with the SQLite store, the socket and gpool's output files. A
// test seeds the store first if it needs to (controller::testing::openStore(db_)), then calls
// startDaemon(); TearDown stops the daemon and expects a clean exit. Needs the test binary to
// link tests/controller/controller_fixture.cc.
namespace gpool::cli::testing {

class GpooldCliTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (gpoold_.running()) {
      EXPECT_EQ(gpoold_.stop(), 0);
    }
  }

  std::string writeConfig() {
    return writeGpooldConfig(dir_.path() + "/gpoold.toml", db_, socket_, controller_extra_);
  }

  void startDaemon() { ASSERT_EQ(gpoold_.start(writeConfig()), ""); }

  // `gpool --socket <the daemon's socket> args...` as this process's user.
  Output gpool(std::vector<std::string> args, const RunAs& as = {}) {
    args.insert(args.begin(), {"--socket", socket_});
    return runProgram(kGpool, args, dir_.path(), {}, as);
  }

  controller::testing::TempDir dir_;
  std::string db_ = dir_.path() + "/gpool.db";
  std::string socket_ = dir_.path() + "/gpoold.sock";
  // Lines added to gpoold's [controller] table. The CLI tests run as root and submit jobs that
  // no agent runs, so their pool allows root's jobs (refused by default:
  // GpoolCliTest.RootsSubmissionIsRefusedWithExitFour clears this).
  std::string controller_extra_ = "allow_root_jobs = true\n";
  GpooldProcess gpoold_;
};

}  // namespace gpool::cli::testing
