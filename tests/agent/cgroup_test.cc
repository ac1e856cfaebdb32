// Real cgroups on this machine: limits land in the kernel's files, processes join, device
// filters (v1 controller and cgroup v2 eBPF) deny another GPU's device node. Skipped with the
// reason when the machine does not allow creating cgroups.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "agent/cgroup.h"
#include "agent/supervisor.h"
#include "agent_test_util.h"

namespace gpool::agent {
namespace {

using testing::TempDir;

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto layout = CgroupLayout::detect();
    ASSERT_TRUE(layout.ok());
    layout_ = *layout;
    std::string why = testing::cgroupSkipReason(layout_);
    if (!why.empty()) GTEST_SKIP() << why;
    parent_ = testing::uniqueCgroupParent();
  }
  void TearDown() override {
    if (!parent_.empty()) testing::removeCgroupParent(layout_, parent_);
  }

  // Forks a child that joins `cg` and opens `path`; returns the open's errno (0 on success).
  int openInCgroup(const TaskCgroup& cg, const std::string& path) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      int err = 0;
      if (!cg.addProcess(::getpid()).isOk()) {
        err = -1;
      } else {
        int fd = ::open(path.c_str(), O_RDWR);
        err = fd >= 0 ? 0 : errno;
      }
      (void)!::write(fds[1], &err, sizeof(err));
      ::_exit(0);
    }
    ::close(fds[1]);
    int err = -2;
    EXPECT_EQ(::read(fds[0], &err, sizeof(err)), static_cast<ssize_t>(sizeof(err)));
    ::close(fds[0]);
    ::waitpid(pid, nullptr, 0);
    return err;
  }

  CgroupLayout layout_;
  std::string parent_;
};

TEST_F(CgroupTest, LimitsAreWrittenAndProcessesJoin) {
  CgroupLimits limits;
  limits.cpu_millicores = 1500;
  limits.memory_mib = 300;
  limits.pids_max = 64;
  auto cg = TaskCgroup::create(layout_, parent_, "job1.0", limits);
  ASSERT_TRUE(cg.ok()) << cg.status().toString();
  if (layout_.v1_mounts.count("cpu")) {
    std::string d = layout_.v1_mounts.at("cpu") + "/" + parent_ + "/job1.0";
    EXPECT_EQ(testing::readOr(d + "/cpu.cfs_quota_us"), "150000\n");
    EXPECT_EQ(testing::readOr(d + "/cpu.cfs_period_us"), "100000\n");
  } else {
    EXPECT_EQ(testing::readOr(cg->unifiedDir() + "/cpu.max"), "150000 100000\n");
  }
  std::string mem = testing::readOr(cg->memoryDir() + (layout_.v1_mounts.count("memory")
                                                           ? "/memory.limit_in_bytes"
                                                           : "/memory.max"));
  EXPECT_EQ(mem, std::to_string(300ull << 20) + "\n");
  std::string pids_dir = layout_.v1_mounts.count("pids")
                             ? layout_.v1_mounts.at("pids") + "/" + parent_ + "/job1.0"
                             : cg->unifiedDir();
  EXPECT_EQ(testing::readOr(pids_dir + "/pids.max"), "64\n");

  pid_t child = ::fork();
  if (child == 0) {
    for (;;)
      ::pause();
  }
  ASSERT_TRUE(cg->addProcess(child).isOk());
  EXPECT_EQ(cg->processes(), std::vector<pid_t>{child});
  std::string self_cgroups = testing::readOr("/proc/" + std::to_string(child) + "/cgroup");
  EXPECT_NE(self_cgroups.find(parent_ + "/job1.0"), std::string::npos) << self_cgroups;
  EXPECT_EQ(cg->oomKills(), 0u);

  // destroy() kills what is left and removes every directory.
  ASSERT_TRUE(cg->destroy().isOk());
  int ws = 0;
  ASSERT_EQ(::waitpid(child, &ws, 0), child);
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
  for (const std::string& dir : cg->dirs()) {
    struct stat st;
    EXPECT_NE(::stat(dir.c_str(), &st), 0) << dir << " still exists";
  }
}

// The pure cgroup v2 code path, exercised on this host's v2 tree by pretending it is the only
// hierarchy: the group is created, the BPF device filter applies, SIGKILL goes through
// cgroup.kill, and a limit the v2 tree cannot carry fails the creation with a clear error.
TEST_F(CgroupTest, PureV2LayoutOnTheUnifiedTree) {
  if (layout_.unified.empty()) GTEST_SKIP() << "no cgroup v2 tree on this host";
  CgroupLayout v2;
  v2.mode = CgroupMode::kV2;
  v2.unified = layout_.unified;
  TempDir tmp;
  std::string other = tmp.file("nvidia1");
  ASSERT_EQ(::mknod(other.c_str(), S_IFCHR | 0666, makedev(195, 1)), 0);

  CgroupLimits limits;
  limits.filter_devices = true;
  limits.device_rules = taskDeviceRules({0}, {});  // kAuto picks BPF: no v1 devices here
  auto cg = TaskCgroup::create(v2, parent_, "v2job.0", limits);
  ASSERT_TRUE(cg.ok()) << cg.status().toString();
  EXPECT_EQ(cg->dirs(), std::vector<std::string>{layout_.unified + "/" + parent_ + "/v2job.0"});
  EXPECT_EQ(openInCgroup(*cg, other), EPERM);

  pid_t child = ::fork();
  if (child == 0) {
    for (;;)
      ::pause();
  }
  ASSERT_TRUE(cg->addProcess(child).isOk());
  EXPECT_EQ(cg->processes(), std::vector<pid_t>{child});
  ASSERT_TRUE(cg->destroy().isOk());
  int ws = 0;
  ASSERT_EQ(::waitpid(child, &ws, 0), child);
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);

  if (!v2.v2HasController("memory")) {
    CgroupLimits memory;
    memory.memory_mib = 64;
    auto fails = TaskCgroup::create(v2, parent_, "v2mem.0", memory);
    ASSERT_FALSE(fails.ok());
    EXPECT_NE(fails.status().message().find("memory.max"), std::string::npos)
        << fails.status().toString();
    struct stat st;
    EXPECT_NE(::stat((layout_.unified + "/" + parent_ + "/v2mem.0").c_str(), &st), 0)
        << "a failed creation removes its group";
  }
}

// Fake GPU device nodes: /dev/nvidia0 and /dev/nvidia1 as char 195:0 and 195:1. With no
// driver behind major 195 an allowed open fails with ENXIO; a denied one fails with EPERM
// before the driver is even looked up.
class DeviceFilterTest : public CgroupTest,
                         public ::testing::WithParamInterface<DeviceFilterKind> {};

TEST_P(DeviceFilterTest, TaskCannotOpenAnotherGpusDeviceFile) {
  DeviceFilterKind kind = GetParam();
  if (kind == DeviceFilterKind::kV1Controller && !layout_.v1_mounts.count("devices")) {
    GTEST_SKIP() << "no cgroup v1 devices controller on this host";
  }
  if (kind == DeviceFilterKind::kBpf && layout_.unified.empty()) {
    GTEST_SKIP() << "no cgroup v2 tree on this host for the eBPF device filter";
  }
  TempDir tmp;
  std::string own = tmp.file("nvidia0"), other = tmp.file("nvidia1");
  ASSERT_EQ(::mknod(own.c_str(), S_IFCHR | 0666, makedev(195, 0)), 0) << std::strerror(errno);
  ASSERT_EQ(::mknod(other.c_str(), S_IFCHR | 0666, makedev(195, 1)), 0);

  CgroupLimits limits;
  limits.filter_devices = true;
  limits.device_filter = kind;
  limits.device_rules = taskDeviceRules({0}, {});
  auto cg = TaskCgroup::create(layout_, parent_, "gpujob.0", limits);
  ASSERT_TRUE(cg.ok()) << cg.status().toString();

  EXPECT_EQ(openInCgroup(*cg, own), ENXIO);    // passes the filter, no driver behind it
  EXPECT_EQ(openInCgroup(*cg, other), EPERM);  // denied by the filter
  EXPECT_EQ(openInCgroup(*cg, "/dev/null"), 0);
  ASSERT_TRUE(cg->destroy().isOk());
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeviceFilterTest,
                         ::testing::Values(DeviceFilterKind::kV1Controller, DeviceFilterKind::kBpf),
                         [](const auto& param_info) {
                           return param_info.param == DeviceFilterKind::kBpf ? "Bpf" : "V1";
                         });

}  // namespace
}  // namespace gpool::agent
