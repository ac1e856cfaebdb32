#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "agent/supervisor.h"
#include "agent/task_launch.h"
#include "agent/unix_user.h"
#include "common/result.h"

// Containerised tasks (docs/containers.md): what the supervisor runs for a launch with a
// ContainerSpec. The task's process is `podman run` (root, outside the task's cgroups, so that
// Podman's own memory is not charged to the task); the container itself goes below the task's
// cgroup (--cgroup-parent, host cgroup namespace, cgroupfs manager), so it has the task's CPU,
// RAM and device limits, and runs as the task's user with no capabilities.
//
// Thread-safety: free functions without shared state. The ones that start processes block
// until those end.
namespace gpool::agent {

// The container's name: "gpool-<job>.<index>-<hash of the task directory>". Job ids are unique
// per pool only: the task directory tells apart the pools (or simulated agents) of one machine,
// whose containers share Podman's store. One name per task: a rerun replaces a stale one.
std::string containerName(const TaskLaunch& launch, const std::string& task_dir);

// Everything podmanRunCommand needs besides the launch.
struct ContainerContext {
  std::string task_dir;     // the task's state directory (env file and ld.so.preload go there)
  std::string work_dir;     // the task's working directory, mounted at the same path
  std::string cgroup_path;  // the task's group below each hierarchy's root, e.g. "/gpool/7.0"
  // The GPU device nodes the container gets: its GPUs' nvidia<minor> plus the control
  // devices (nvidiactl, nvidia-uvm, nvidia-uvm-tools) that exist in this directory.
  std::string gpu_device_dir = "/dev";
};

// podman's argv (argv[0] is options.podman) for `launch`, and writes the files it names in
// the task directory: `container.env` (0600, the task's environment, one KEY=value a line)
// and, for a slice, `ld.so.preload` (the interposer, mounted read-only over the container's
// /etc/ld.so.preload so that unsetting LD_PRELOAD does not unload it). InvalidArgument when a
// variable's value holds a newline (Podman's env file cannot carry it).
Result<std::vector<std::string>> podmanRunCommand(const TaskLaunch& launch, const UnixUser& user,
                                                  const std::map<std::string, std::string>& env,
                                                  const SupervisorOptions& options,
                                                  const ContainerContext& context);

// The environment podman itself runs with (never the user's: a user's HOME would point root's
// Podman at the user's containers.conf).
std::vector<std::string> podmanEnvironment();

// Makes sure `image` is in this node's Podman store, loading it on first use from the node's
// image directory (docs/containers.md, "The node's image cache"): when Podman does not know
// the name and `options.image_dir` holds its archive (imageArchivePath), `podman load` reads
// it and the image is tagged with the name the job gave; later tasks find it in the store
// and load nothing. Loads are serialised per machine (a file lock), so tasks starting together
// load an archive once. Returns what was done: "" when nothing was loaded (a cached image or a
// root filesystem directory), else a line for the supervisor's log ("image X loaded from F in
// N ms"). FailedPrecondition naming the image when it is neither in the store nor in the
// directory, or a root filesystem directory does not exist; naming the image and the archive
// when Podman cannot load it (not an OCI or Docker archive) or tag it, or the load takes more
// than 20 s (the agent waits 30 s for a task's start). Blocks while Podman runs.
Result<std::string> ensureImage(const SupervisorOptions& options, const std::string& image);

// The archive `image` is loaded from: "<image_dir>/<name>/<tag>.tar", where <name> is the
// image's name without a leading "localhost/" and <tag> its tag ("latest" when it has none),
// e.g. "<image_dir>/pytorch/24.05.tar" for localhost/pytorch:24.05 (Podman refuses ':' in an
// archive's file name). "" when `image_dir` is empty or the name or tag holds anything but
// letters, digits, '.', '_' and '-' or starts with '.' (a registry path, or a name that would
// leave the directory).
std::string imageArchivePath(const std::string& image_dir, const std::string& image);

// PermissionDenied naming the first of `paths` that `user` cannot reach (the bind mounts and
// working directory: Podman mounts them as root, so the user's own access is checked first,
// in a child process that switched to the user).
Status checkUserReaches(const UnixUser& user, const std::vector<std::string>& paths);

// Removes the task's container if it is still there (`podman rm --force --ignore`): after a
// SIGKILL, Podman may not have cleaned up. OK when there was none.
Status removeContainer(const SupervisorOptions& options, const std::string& name);

// The devices an OCI runtime allows every container by default beyond the task's base rules
// (/dev/net/tun, c 10:200). The container's device group is below the task's, and a v1 child
// may not allow what its parent denies: without these the runtime's start fails with EPERM.
std::vector<DeviceRule> containerRuntimeDeviceRules();

// "runc" or "crun": the OCI runtime that works on this host. crun refuses hosts with cgroup v1
// controllers next to the v2 tree ("cgroups in hybrid mode not supported"), so a host with v1
// controllers gets runc when installed; a pure v2 host prefers crun. `forced` ("runc", "crun")
// skips the choice. FailedPrecondition when neither is installed (or the forced one is not).
Result<std::string> chooseContainerRuntime(const std::string& forced);

}  // namespace gpool::agent
