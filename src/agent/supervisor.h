#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "agent/cgroup.h"
#include "agent/device_filter.h"
#include "agent/unix_user.h"
#include "common/result.h"

// The per-task supervisor (the `gpool-supervisor` executable). The launcher starts it detached
// (double fork + setsid) so that it outlives the agent; it sets up the task's cgroup, starts the
// task as its user with its environment and log files, enforces the time limit, obeys stop
// commands, and records every transition in <task dir>/status.json. Files in the task dir:
//   launch.json    the TaskLaunch (written by the launcher)
//   options.json   SupervisorOptions (written by the launcher)
//   user.json      the task's resolved Unix user (written by the launcher, which has warm NSS
//                  caches and refuses bad users before anything starts)
//   status.json    TaskStatus, rewritten durably at each transition (written by the supervisor)
//   control.json   the last stop command {"action": "cancel|preempt|fence", "grace_ms": N}
//                  (written by the launcher, then SIGUSR1 to the supervisor)
//   environ        the task's environment, one KEY=value per line (for interactive adoption)
//   stdout.log, stderr.log, supervisor.log
namespace gpool::agent {

// How the agent's configuration shapes each task. Stored as options.json.
struct SupervisorOptions {
  bool use_cgroups = true;
  std::string cgroup_parent = "gpool";  // relative to each hierarchy's root
  bool filter_devices = true;
  DeviceFilterKind device_filter = DeviceFilterKind::kAuto;
  std::vector<DeviceRule> extra_device_rules;  // e.g. InfiniBand (c 231:* rw) for NCCL
  bool allow_root = false;                     // may tasks run as uid 0
  // Containerised tasks (docs/containers.md): Podman, the OCI runtime it uses ("runc" or
  // "crun", chosen by the agent at start, see chooseContainerRuntime) and the directory of
  // the GPU device nodes (/dev; the simulated GPUs' nodes in tests).
  std::string podman = "/usr/bin/podman";
  std::string container_runtime = "runc";
  std::string gpu_device_dir = "/dev";
  // Where image archives are loaded from on first use ("" for nowhere): see ensureImage.
  std::string image_dir;
  // The mode of a group project directory the supervisor creates (setgid: files in it belong
  // to the group).
  mode_t project_dir_mode = 02770;
};

std::string toJson(const SupervisorOptions& options);
Result<SupervisorOptions> supervisorOptionsFromJson(std::string_view json);

std::string toJson(const UnixUser& user);
Result<UnixUser> unixUserFromJson(std::string_view json);

// The supervisor's main: runs the task in `task_dir` to its end. `ready_fd` (or -1) receives
// "ok <task pid>\n" once the task runs, or "error <message>\n" when it could not be started;
// it is closed afterwards. Returns the process exit code (0 when the task's end was recorded).
int runSupervisor(const std::string& task_dir, int ready_fd);

// The devices a task may open: base devices, its own GPUs (with nvidia-uvm majors read from
// /proc/devices) and `extra`.
std::vector<DeviceRule> taskDeviceRules(const std::vector<int32_t>& gpu_minors,
                                        const std::vector<DeviceRule>& extra);

}  // namespace gpool::agent
