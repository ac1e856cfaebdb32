// Plain-data parts of the launcher: TaskLaunch/TaskStatus JSON, validation, the task's
// environment, device rules and the cgroup layout parser.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "agent/cgroup.h"
#include "agent/device_filter.h"
#include "agent/supervisor.h"
#include "agent/task_environment.h"
#include "agent/task_launch.h"

namespace gpool::agent {
namespace {

TaskLaunch sampleLaunch() {
  TaskLaunch l;
  l.job_id = "j42";
  l.task_index = 3;
  l.attempt = 2;
  l.argv = {"python3", "train.py", "--lr", "0.1"};
  l.env = {{"FOO", "bar"}, {"CUDA_VISIBLE_DEVICES", "0"}, {"LD_PRELOAD", "/usr/lib/libx.so"}};
  l.working_dir = "/data/proj";
  l.user = "alice";
  l.uid = 1001;
  l.cpu_millicores = 4500;
  l.memory_mib = 16384;
  l.gpus = {{"GPU-aaaa", 0}};
  l.slice = SliceQuota{8192, 250, "/usr/lib/gpool/libgpool-vgpu.so", "/dev/shm/gpool-j42"};
  l.rendezvous = {"10.0.0.5", 29500, 16, 8, 0, 1};
  l.time_limit_ms = 3'600'000;
  l.grace_ms = 10'000;
  return l;
}

UnixUser sampleUser() {
  UnixUser u;
  u.name = "alice";
  u.uid = 1001;
  u.gid = 1001;
  u.home = "/home/alice";
  u.shell = "/bin/bash";
  return u;
}

TEST(TaskLaunchTest, JsonRoundTripKeepsEveryField) {
  TaskLaunch l = sampleLaunch();
  auto back = taskLaunchFromJson(toJson(l));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->taskName(), "j42.3");
  EXPECT_EQ(back->attempt, 2u);
  EXPECT_EQ(back->argv, l.argv);
  EXPECT_EQ(back->env, l.env);
  EXPECT_EQ(back->uid, std::optional<uid_t>(1001));
  EXPECT_FALSE(back->gid.has_value());
  EXPECT_EQ(back->memory_mib, 16384u);
  ASSERT_EQ(back->gpus.size(), 1u);
  EXPECT_EQ(back->gpus[0].minor, 0);
  ASSERT_TRUE(back->slice.has_value());
  EXPECT_EQ(back->slice->compute, 250u);
  EXPECT_EQ(back->slice->shm_path, "/dev/shm/gpool-j42");
  EXPECT_EQ(back->rendezvous.master_port, 29500);
  EXPECT_EQ(back->rendezvous.node_rank, 1u);
  EXPECT_EQ(back->time_limit_ms, 3'600'000);
  EXPECT_EQ(back->grace_ms, 10'000);
}

TEST(TaskLaunchTest, MalformedJsonIsInvalidArgument) {
  auto r = taskLaunchFromJson("{\"job_id\": 5}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(TaskLaunchTest, ValidateNamesTheBadField) {
  TaskLaunch l = sampleLaunch();
  EXPECT_TRUE(l.validate().isOk());
  l.job_id = "../etc";
  EXPECT_NE(l.validate().message().find("job id"), std::string::npos);
  l = sampleLaunch();
  l.argv.clear();
  EXPECT_NE(l.validate().message().find("no program"), std::string::npos);
  l = sampleLaunch();
  l.user.clear();
  EXPECT_NE(l.validate().message().find("no user"), std::string::npos);
  l = sampleLaunch();
  l.gpus.push_back({"GPU-bbbb", 1});
  EXPECT_NE(l.validate().message().find("slice"), std::string::npos);
  l = sampleLaunch();
  l.env["A=B"] = "x";
  EXPECT_FALSE(l.validate().isOk());
}

TEST(TaskStatusTest, JsonRoundTripAndStateNames) {
  TaskStatus s;
  s.state = TaskState::kOutOfMemory;
  s.supervisor_pid = 77;
  s.supervisor_start_ticks = 123456;
  s.task_pid = 78;
  s.exit_code = -1;
  s.signal = 9;
  s.reason = "oom";
  auto back = taskStatusFromJson(toJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, TaskState::kOutOfMemory);
  EXPECT_EQ(back->supervisor_start_ticks, 123456u);
  EXPECT_EQ(back->signal, 9);
  EXPECT_EQ(taskStateName(TaskState::kOutOfMemory), "OUT_OF_MEMORY");
  EXPECT_EQ(*parseTaskState("NODE_FAIL"), TaskState::kNodeFail);
  EXPECT_FALSE(parseTaskState("DONE").ok());
  EXPECT_FALSE(isTerminal(TaskState::kRunning));
  EXPECT_TRUE(isTerminal(TaskState::kTimeout));
}

TEST(TaskEnvironmentTest, GpoolVariablesOverrideTheUsersAndPreloadComesFirst) {
  auto env = buildTaskEnvironment(sampleLaunch(), sampleUser(), "/var/lib/gpool/tasks/j42.3");
  EXPECT_EQ(env["USER"], "alice");
  EXPECT_EQ(env["HOME"], "/home/alice");
  EXPECT_EQ(env["FOO"], "bar");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-aaaa");  // the user's "0" does not win
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(env["GPOOL_JOB_ID"], "j42");
  EXPECT_EQ(env["GPOOL_TASK_INDEX"], "3");
  EXPECT_EQ(env["GPOOL_ATTEMPT"], "2");
  EXPECT_EQ(env["GPOOL_GPUS"], "GPU-aaaa");
  EXPECT_EQ(env["GPOOL_GPU_MEMORY_MIB"], "8192");
  EXPECT_EQ(env["GPOOL_GPU_COMPUTE"], "250");
  EXPECT_EQ(env["GPOOL_VGPU_REGIONS"], "/dev/shm/gpool-j42");
  EXPECT_EQ(env["LD_PRELOAD"], "/usr/lib/gpool/libgpool-vgpu.so:/usr/lib/libx.so");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.5");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["WORLD_SIZE"], "16");
  EXPECT_EQ(env["RANK"], "8");
  EXPECT_EQ(env["LOCAL_RANK"], "0");
  EXPECT_EQ(env["NODE_RANK"], "1");
  EXPECT_EQ(env["GPOOL_TASK_DIR"], "/var/lib/gpool/tasks/j42.3");
}

TEST(TaskEnvironmentTest, WholeGpusAndCpuOnlyTasks) {
  TaskLaunch l = sampleLaunch();
  l.slice.reset();
  l.gpus = {{"GPU-aaaa", 0}, {"GPU-bbbb", 1}};
  l.rendezvous = {};
  l.env["GPOOL_GPU_MEMORY_MIB"] = "999999";  // a user cannot fake a slice size
  auto env = buildTaskEnvironment(l, sampleUser(), "/t");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-aaaa,GPU-bbbb");
  EXPECT_EQ(env["GPOOL_GPU_COMPUTE"], "1000");
  EXPECT_EQ(env.count("GPOOL_GPU_MEMORY_MIB"), 0u);
  EXPECT_EQ(env.count("GPOOL_VGPU_REGIONS"), 0u);
  EXPECT_EQ(env["LD_PRELOAD"], "/usr/lib/libx.so");  // the user's own preload stays
  EXPECT_EQ(env.count("MASTER_ADDR"), 0u);
  EXPECT_EQ(env.count("WORLD_SIZE"), 0u);

  l.gpus.clear();
  env = buildTaskEnvironment(l, sampleUser(), "/t");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");  // hides every GPU from CUDA
  EXPECT_EQ(env.count("GPOOL_GPU_COMPUTE"), 0u);
}

// GPOOL_ATTEMPT is gpool's: a user's own never shows, and a launch that does not say its attempt
// (written before attempts were) exports none rather than a made-up one.
TEST(TaskEnvironmentTest, TheAttemptIsTheLaunchsOnly) {
  TaskLaunch l = sampleLaunch();
  l.env["GPOOL_ATTEMPT"] = "7";
  EXPECT_EQ(buildTaskEnvironment(l, sampleUser(), "/t")["GPOOL_ATTEMPT"], "2");
  l.attempt = 0;
  EXPECT_EQ(buildTaskEnvironment(l, sampleUser(), "/t").count("GPOOL_ATTEMPT"), 0u);
  nlohmann::json old = nlohmann::json::parse(toJson(sampleLaunch()));
  ASSERT_EQ(old.erase("attempt"), 1u);
  auto back = taskLaunchFromJson(old.dump());
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->attempt, 0u);
}

TEST(DeviceRuleTest, ParsesAndPrintsTheV1Syntax) {
  auto r = parseDeviceRule("c 195:0 rw");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->major, 195);
  EXPECT_EQ(r->minor, 0);
  EXPECT_EQ(r->toV1(), "c 195:0 rw");
  auto any = parseDeviceRule("c 231:* rwm");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->minor, kAnyDevice);
  EXPECT_EQ(any->toV1(), "c 231:* rwm");
  EXPECT_FALSE(parseDeviceRule("c 195 rw").ok());
  EXPECT_FALSE(parseDeviceRule("x 1:2 rw").ok());
  EXPECT_FALSE(parseDeviceRule("c 1:2 rwx").ok());
}

TEST(DeviceRuleTest, GpuRulesAllowOnlyOwnMinorsPlusControlDevices) {
  std::string devices =
      "Character devices:\n  1 mem\n195 nvidia-frontend\n 510 nvidia-uvm\n 511 nvidia-uvm-tools\n"
      "\nBlock devices:\n  8 sd\n";
  std::vector<int64_t> uvm = charMajorsNamed(devices, "nvidia-uvm");
  EXPECT_EQ(uvm, (std::vector<int64_t>{510, 511}));
  std::vector<std::string> v1;
  for (const DeviceRule& r : gpuDeviceRules({2, 5}, uvm))
    v1.push_back(r.toV1());
  EXPECT_EQ(v1, (std::vector<std::string>{"c 195:255 rw", "c 195:254 rw", "c 195:2 rw",
                                          "c 195:5 rw", "c 510:* rw", "c 511:* rw"}));
  EXPECT_TRUE(gpuDeviceRules({}, uvm).empty());
}

TEST(DeviceRuleTest, BpfProgramHasOneBlockPerRuleAndDeniesByDefault) {
  std::vector<DeviceRule> rules = {{'c', 195, 0, "rw"}, {'a', kAnyDevice, kAnyDevice, "rwm"}};
  std::vector<bpf_insn> prog = buildDeviceProgram(rules);
  // Prologue (6) + rule 1: type (1), access (3), major (1), minor (1), allow (2) = 8 +
  // rule 2: allow (2) + the default deny (2).
  ASSERT_EQ(prog.size(), 6u + 8u + 2u + 2u);
  EXPECT_EQ(prog.back().code, BPF_JMP | BPF_EXIT);
  EXPECT_EQ(prog[prog.size() - 2].imm, 0);  // default: deny
  // The first rule's type test jumps over its whole block to the second rule.
  EXPECT_EQ(prog[6].code, BPF_JMP | BPF_JNE | BPF_K);
  EXPECT_EQ(prog[6].imm, BPF_DEVCG_DEV_CHAR);
  EXPECT_EQ(prog[6].off, 7);
}

TEST(CgroupLayoutTest, DetectsHybridV1AndV2FromMountInfo) {
  std::string hybrid =
      "30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "32 25 0:28 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
      "33 25 0:29 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
      "34 25 0:30 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  CgroupLayout h = CgroupLayout::fromMountInfo(hybrid);
  EXPECT_EQ(h.mode, CgroupMode::kHybrid);
  EXPECT_EQ(h.unified, "/sys/fs/cgroup/unified");
  EXPECT_EQ(h.v1_mounts.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(h.v1_mounts.count("pids"), 0u);

  CgroupLayout v1 = CgroupLayout::fromMountInfo(
      "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "35 25 0:31 / /sys/fs/cgroup/pids rw shared:9 - cgroup cgroup rw,pids\n");
  EXPECT_EQ(v1.mode, CgroupMode::kV1);
  EXPECT_EQ(v1.v1_mounts.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(v1.v1_mounts.at("pids"), "/sys/fs/cgroup/pids");

  CgroupLayout v2 = CgroupLayout::fromMountInfo(
      "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n");
  EXPECT_EQ(v2.mode, CgroupMode::kV2);
  EXPECT_EQ(v2.unified, "/sys/fs/cgroup");
  EXPECT_EQ(CgroupLayout::fromMountInfo("").mode, CgroupMode::kNone);
}

TEST(SupervisorOptionsTest, JsonRoundTrip) {
  SupervisorOptions o;
  o.cgroup_parent = "gpool/tasks";
  o.device_filter = DeviceFilterKind::kBpf;
  o.extra_device_rules = {{'c', 231, kAnyDevice, "rw"}};
  o.allow_root = true;
  auto back = supervisorOptionsFromJson(toJson(o));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->cgroup_parent, "gpool/tasks");
  EXPECT_EQ(back->device_filter, DeviceFilterKind::kBpf);
  ASSERT_EQ(back->extra_device_rules.size(), 1u);
  EXPECT_EQ(back->extra_device_rules[0].toV1(), "c 231:* rw");
  EXPECT_TRUE(back->allow_root);
}

}  // namespace
}  // namespace gpool::agent
