#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/container_spec.h"
#include "common/result.h"

// The plain data the launcher works from. The agent turns an assignment from the controller
// into a TaskLaunch; the launcher, the supervisor and the state directory know nothing else
// about jobs. Everything here is serialisable to JSON (launch.json in the task's state
// directory) so that a supervisor started detached can read it back.
namespace gpool::agent {

// One GPU given to a task, as plain data (the GPU backends live elsewhere).
struct TaskGpu {
  std::string uuid;    // "GPU-8f3c...", used for CUDA_VISIBLE_DEVICES
  int32_t minor = -1;  // the device minor: /dev/nvidia<minor> is char 195:<minor>
};

// torchrun/NCCL rendezvous for multi-GPU and multi-server tasks. When `world_size` is 0 no
// rendezvous variables are set.
struct Rendezvous {
  std::string master_addr;
  uint16_t master_port = 0;
  uint32_t world_size = 0;  // WORLD_SIZE: processes (ranks) in the whole job
  uint32_t rank = 0;        // RANK of this task's first process
  uint32_t local_rank = 0;  // LOCAL_RANK on this server
  uint32_t node_rank = 0;   // NODE_RANK: index of this server in the job
};

// A shared slice of one GPU. Present only for slices; whole GPUs leave it empty.
struct SliceQuota {
  uint64_t memory_mib = 0;  // device memory quota
  uint32_t compute = 0;     // compute share in thousandths (1000 = the whole GPU)
  std::string interposer;   // absolute path of libgpool-vgpu.so, preloaded into the task
  std::string shm_path;     // the interposer's shared-memory region, prepared by the agent
};

// A task that runs inside an OCI container through Podman (docs/containers.md): in the task's
// own cgroup with the same limits, as its user, with only its GPUs, its environment, its
// working directory mounted (and a slice's interposer preloaded read-only).
struct ContainerSpec {
  std::string image;              // a local image's name, or an absolute root filesystem dir
  std::vector<BindMount> mounts;  // the user's mounts, besides the working directory
};

struct TaskLaunch {
  std::string job_id;       // [A-Za-z0-9_.-]+, at most 64 characters
  uint32_t task_index = 0;  // the task's index within its job
  // Which run of the task this is, numbered from 1 like `gpool logs --attempt` (the job's
  // requeues + 1); $GPOOL_ATTEMPT. 0: not said (a launch written before attempts were).
  uint32_t attempt = 0;

  std::vector<std::string> argv;           // argv[0] is looked up on PATH if not absolute
  std::map<std::string, std::string> env;  // the user's environment at submission
  std::string working_dir;                 // empty: the user's home directory

  std::string user;          // Unix user name; the task runs as this user
  std::optional<uid_t> uid;  // when set, must match the user's uid in the passwd database
  std::optional<gid_t> gid;  // when set, the primary group; otherwise the user's own

  uint64_t cpu_millicores = 0;  // 0: no CPU limit
  uint64_t memory_mib = 0;      // 0: no RAM limit
  uint64_t pids_max = 0;        // 0: no process-count limit

  std::vector<TaskGpu> gpus;
  std::optional<SliceQuota> slice;
  std::optional<ContainerSpec> container;  // absent: a bare task
  // The job's group's shared project directory: created (root:project_gid, setgid, the
  // agent's project_dir_mode) by the supervisor when missing, $GPOOL_PROJECT_DIR, mounted into
  // containers; the task gets project_gid as a supplementary group. Empty: none.
  std::string project_dir;
  gid_t project_gid = 0;
  Rendezvous rendezvous;

  int64_t time_limit_ms = 0;  // 0: none. SIGTERM at the limit, SIGKILL after the grace period
  int64_t grace_ms = 30'000;  // grace period for the time limit and for cancel/preempt

  // The node's lease file (lease_file.h). When set, the supervisor stops the task (SIGTERM,
  // SIGKILL after the lease's fence grace) once the lease ends without renewal, even with the
  // agent gone; it refuses to start the task when it cannot read the file. Empty: the task
  // outlives the lease (a job that is never requeued elsewhere).
  std::string lease_file;

  std::string stdout_path;  // empty: <task dir>/stdout.log
  std::string stderr_path;  // empty: <task dir>/stderr.log; equal to stdout_path: merged

  // The name of the task's state directory and cgroup: "<job_id>.<task_index>".
  std::string taskName() const;
  // InvalidArgument naming the offending field when the launch cannot be started.
  Status validate() const;
};

std::string toJson(const TaskLaunch& launch);
Result<TaskLaunch> taskLaunchFromJson(std::string_view json);

// Slurm's vocabulary for where a task is. Terminal states are the ones after kRunning.
enum class TaskState {
  kStarting,  // the supervisor is setting the task up
  kRunning,
  kCompleted,    // exit code 0
  kFailed,       // non-zero exit, killed by a signal, or could not be started
  kCancelled,    // stopped by a cancel command
  kPreempted,    // stopped by a preempt command
  kTimeout,      // stopped at its time limit
  kOutOfMemory,  // the kernel's OOM killer killed a process of the task's cgroup
  kNodeFail,     // the supervisor died without recording an end (e.g. the server rebooted)
};

std::string_view taskStateName(TaskState state);  // "RUNNING", "OUT_OF_MEMORY", ...
Result<TaskState> parseTaskState(std::string_view name);
bool isTerminal(TaskState state);

// Why a running task is being stopped; decides the terminal state it ends in. kOutOfMemory: the
// agent's slice backstop found the task holding more GPU memory than its quota.
enum class StopReason { kCancel, kPreempt, kFence, kOutOfMemory };

// The durable record of one task: <task dir>/status.json, rewritten at every transition with
// write-temp + fsync + rename so that a reader sees either the old or the new record, never a
// torn one.
struct TaskStatus {
  TaskState state = TaskState::kStarting;
  pid_t supervisor_pid = 0;
  uint64_t supervisor_start_ticks = 0;  // /proc/<pid>/stat field 22, guards against pid reuse
  pid_t task_pid = 0;
  int64_t started_at_us = 0;  // Unix microseconds; 0 while not started
  int64_t ended_at_us = 0;    // Unix microseconds; 0 while not ended
  int exit_code = -1;         // the exit status when the task exited normally
  int signal = 0;             // the signal that killed the task, 0 when it exited
  std::string reason;         // human-readable detail for failures and stops
};

std::string toJson(const TaskStatus& status);
Result<TaskStatus> taskStatusFromJson(std::string_view json);

// The end record: a file of kEndRecordBytes that the supervisor writes (zeros) and syncs before
// its task starts, and overwrites in place with the task's final TaskStatus (JSON, then NUL
// padding) when the task ends, before status.json. Overwriting written blocks needs no new
// space, so the exit status survives a full disk (on file systems that overwrite in place:
// ext4, xfs, tmpfs; not copy-on-write ones such as btrfs).
inline constexpr const char* kEndRecordFile = "end.record";
inline constexpr size_t kEndRecordBytes = 4096;
// The status in an end record's contents; NotFound while it holds none (zeros).
Result<TaskStatus> taskStatusFromEndRecord(std::string_view contents);

}  // namespace gpool::agent
