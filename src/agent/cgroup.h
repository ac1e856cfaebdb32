#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/device_filter.h"
#include "common/result.h"

// The cgroups of tasks. The host decides the flavour: pure cgroup v2 (unified), v1, or a hybrid
// (v1 controllers plus a v2 tree without controllers, as on this project's CI containers).
// Layout (see docs/launcher.md):
//   v2:      <unified>/<parent>/<task>                 cpu.max, memory.max, pids.max, BPF
//   v1:      <ctrl mount>/<parent>/<task> for cpu, memory, devices, pids (each as mounted)
//   hybrid:  the v1 groups above plus <unified>/<parent>/<task> for membership, cgroup.kill
//            and (when chosen) the BPF device filter
namespace gpool::agent {

enum class CgroupMode { kNone, kV1, kV2, kHybrid };
std::string_view cgroupModeName(CgroupMode mode);

// Where the hierarchies are mounted. Detected from /proc/self/mountinfo.
struct CgroupLayout {
  CgroupMode mode = CgroupMode::kNone;
  std::string unified;                           // cgroup2 mount point, "" if none
  std::map<std::string, std::string> v1_mounts;  // controller ("cpu", "memory", ...) -> mount
  std::vector<std::string> all_mounts;  // every cgroup and cgroup2 mount point (cpuset, ...)

  // Parses a mountinfo text (exposed for tests). Never fails: no cgroup mounts is kNone.
  static CgroupLayout fromMountInfo(const std::string& mountinfo);
  static Result<CgroupLayout> detect();
  // True when the v2 tree can carry `controller` (listed in its root's cgroup.controllers).
  bool v2HasController(const std::string& controller) const;
};

enum class DeviceFilterKind {
  kAuto,          // the v1 devices controller when mounted, else BPF on v2
  kV1Controller,  // devices.deny/devices.allow
  kBpf,           // BPF_PROG_TYPE_CGROUP_DEVICE on the v2 group
  kNone,          // no device filtering (tests and hosts that cannot filter)
};

struct CgroupLimits {
  uint64_t cpu_millicores = 0;  // 0: unlimited
  uint64_t memory_mib = 0;      // 0: unlimited; swap is limited to the same total
  uint64_t pids_max = 0;        // 0: unlimited
  // Device whitelist; applied only when `filter_devices` is true.
  bool filter_devices = false;
  DeviceFilterKind device_filter = DeviceFilterKind::kAuto;
  std::vector<DeviceRule> device_rules;
};

// The cgroup(s) of one task. A value type holding paths; creating and destroying touch the
// file system. Not thread-safe; each task's supervisor owns its TaskCgroup.
class TaskCgroup {
 public:
  // Creates the groups for `name` under `parent` (a relative path such as "gpool") and applies
  // `limits`. Fails when a limit cannot be applied (a task never runs unconstrained by
  // accident); removes what it created on failure.
  static Result<TaskCgroup> create(const CgroupLayout& layout, const std::string& parent,
                                   const std::string& name, const CgroupLimits& limits);
  // The groups of an existing task (for adoption into it and for clean-up); no checks.
  static TaskCgroup open(const CgroupLayout& layout, const std::string& parent,
                         const std::string& name);

  // Moves process `pid` into every group of the task; with `skip_unified`, into all but the v2
  // group (for a process created inside it with clone3(CLONE_INTO_CGROUP)).
  Status addProcess(pid_t pid, bool skip_unified = false) const;
  // The processes in the task's groups and the groups below them (a container runtime's,
  // e.g. Podman's libpod-<id> and conmon): membership from v2 if present and the v1 groups.
  std::vector<pid_t> processes() const;
  bool empty() const { return processes().empty(); }
  // Sends `sig` to every process of the task; SIGKILL uses cgroup.kill where available.
  void signalAll(int sig) const;
  // The number of OOM kills in the task's memory group (memory.events / memory.oom_control;
  // on v1 the most counted in the group or one below it, where a container's kills land).
  uint64_t oomKills() const;
  // On v1: an eventfd (non-blocking, close-on-exec; the caller owns it) that counts the times
  // the task's memory group ran out of memory, registered through cgroup.event_control on
  // memory.oom_control. A container's OOM kill is counted in the runtime's own group below the
  // task's, which the runtime removes when the container ends: this count survives it. -1 on
  // v2 (memory.events counts the kills of the groups below) and when it cannot be set up.
  int openOomEventFd() const;
  // Kills whatever is left and removes the groups (and any below them). Waits (bounded, ~2 s)
  // for the kernel to let the groups go.
  Status destroy() const;
  // Removes <mount>/<parent>/<name> and the groups below it in every hierarchy of `layout`,
  // including those the task itself does not use (cpuset, blkio, freezer, name=systemd), where
  // a container runtime's --cgroup-parent creates them. Empty groups only: call it once the
  // task's processes are gone. The first group that stays busy is Unavailable.
  static Status removeEverywhere(const CgroupLayout& layout, const std::string& parent,
                                 const std::string& name);

  // Every directory of the task, for tests and diagnostics.
  const std::vector<std::string>& dirs() const { return dirs_; }
  // The v2 directory ("" when the host has no v2 tree).
  const std::string& unifiedDir() const { return unified_dir_; }
  const std::string& memoryDir() const { return memory_dir_; }

 private:
  std::vector<std::string> dirs_;
  std::string unified_dir_;
  std::string memory_dir_;  // v2 dir in pure v2, v1 memory group otherwise
  bool memory_is_v2_ = false;
};

}  // namespace gpool::agent
