#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/fence.h"
#include "agent/launcher.h"
#include "agent/lease_file.h"
#include "common/clock.h"
#include "common/result.h"
#include "gpu/gpu_backend.h"
#include "gpu/health.h"
#include "protocol/agent_protocol.h"

namespace gpool::agent {

// What the agent reports about its node and how it behaves; `welcome` may override the
// intervals, the stray policy and the lease.
struct AgentOptions {
  std::string node_name;  // required
  std::string hostname;   // empty: gethostname()
  std::map<std::string, std::string> labels;
  uint64_t cpu_millis = 0;  // 0: the online CPUs
  uint64_t ram_mib = 0;     // 0: the physical memory
  // Assignments (lease epochs, requeue policy) of the launcher's tasks, one small JSON file
  // per task, so that a restarted agent reports its tasks under the right epoch.
  std::string state_dir;
  // Where the vgpu regions of shared-slice tasks are created, and the interposer to preload.
  std::string vgpu_dir;
  std::string interposer_path;
  // DCGM's HPC job mapping directory (dcgm-exporter's --hpc-job-mapping-dir): the agent keeps
  // one file per GPU index there whose lines are the ids of the gpool jobs on that GPU, and
  // removes the file when none is; empty: not written.
  std::string hpc_job_mapping_dir;
  // The ShellServer's socket (`gpool shell`), reported with every task; empty: none.
  std::string shell_socket;
  Micros lease{60'000'000};
  // The node's lease file (lease_file.h) that the supervisors of fenced tasks watch; empty:
  // `<state_dir>/lease`. Renewed on every contact with the controller.
  std::string lease_file;
  // Between SIGTERM at the lease's end and SIGKILL, for fenced tasks; `welcome` may override
  // it (lease.fence_grace_s), since the controller counts it in before requeueing elsewhere.
  Micros fence_grace{5'000'000};
  // Which tasks the lease fences (the agent and, without it, each task's supervisor): the
  // requeueable ones (false), or every task (true). A task that is not fenced keeps running
  // when the node is cut off; the controller then never starts it elsewhere (NODE_FAIL).
  bool fence_all_tasks = false;
  // How long the directory of an ended task (its logs, for `gpool logs`) is kept once the
  // controller has acknowledged the task's end, counted from that acknowledgement (after an
  // agent restart, from the acknowledgement of the re-reported end); then it is removed.
  Micros task_retention{std::chrono::hours(24)};
  // At most this many ended, acknowledged task directories are kept: beyond it the oldest
  // acknowledged go first, whatever the retention. Bounds the state directory's disk use and
  // what the agent reads and lists in `hello` after a restart.
  size_t max_retained_tasks = 10'000;
  Micros heartbeat_interval{5'000'000};
  Micros telemetry_interval{10'000'000};
  // How long a process must stay unowned on a GPU before the kill policy acts on it.
  Micros stray_grace{30'000'000};
  bool kill_strays = false;
  // The slice backstop (docs/agent.md, "Slice backstop"), which no task can unset: the GPU
  // memory the processes of a slice task hold on its GPU (as NVML reports them) may exceed the
  // slice's quota by max(backstop_tolerance_mib, quota * backstop_tolerance_pct / 100) (the
  // driver's per-process context and page rounding); beyond that the task is ended
  // OUT_OF_MEMORY (kEnd) or only reported (kReport). A process on a slice's GPU that belongs to no
  // running task is killed after stray_grace (kEnd) or reported, whatever kill_strays says.
  enum class Backstop { kEnd, kReport };
  Backstop slice_backstop = Backstop::kEnd;
  uint64_t backstop_tolerance_mib = 256;
  uint32_t backstop_tolerance_pct = 10;
  gpu::HealthConfig health;
  gpu::HygieneConfig hygiene;
};

// The node agent's core, without transport (docs/agent.md). It speaks docs/agent-protocol.md
// as JSON values: the transport feeds every frame received to `handle`, calls `tick` about once
// a second, and sends what `takeOutbox` returns, in order. After every (re)connect the
// transport sends `helloMessage()` first.
//
// Task reports are delivered at least once: each is sent again every heartbeat interval until
// the controller acknowledges it (`task_ack`, after its commit), so an end reported while the
// controller's store could not write is recorded once it can.
//
// Reconciliation is level-triggered: a `desired_state` lists every task that should run here;
// tasks missing here are started, tasks not listed (or listed under a newer lease epoch) are
// stopped, the rest are kept and their state re-reported. The launcher's state directory is
// the truth about tasks, so a new Agent over the same directories picks up the running tasks
// (re-adoption) and re-reports exits.
//
// Errors: bad messages are answered with an `error` message in the outbox naming the field;
// launcher and backend failures are reported (task_update FAILED, health findings) and retried
// on the next tick; nothing throws.
//
// Thread-safety: none. One owner thread calls every method. `handle` blocks while a task
// starts (the launcher waits for the task to run: milliseconds for a bare task, a few hundred
// for a container, up to 20 s more when its image is first loaded from the node's image
// directory, docs/containers.md).
class Agent {
 public:
  // `backend`, `launcher` and `clock` must outlive the agent.
  Agent(AgentOptions options, gpu::GpuBackend& backend, Launcher& launcher, const Clock& clock);

  // Reads the inventory and re-adopts every task of the launcher. Call once, before anything
  // else.
  Status start();

  // The `hello` for a new connection (also resets the per-connection sequence numbers).
  nlohmann::json helloMessage();
  // How this node enforces slices, as the hello reports it (probes the interposer).
  protocol::SliceEnforcement sliceEnforcement() const;

  // Takes one message from the controller; the answers and task updates go to the outbox.
  void handle(const nlohmann::json& msg);

  // Periodic work at the clock's time: task state changes (task_update), self-fencing, pending
  // starts, heartbeat, telemetry, health and stray processes (health). The transport calls it
  // at least once a second, and also as soon as a task's directory changes (unfinishedTaskDirs).
  void tick();

  // The state directories of the tasks whose state may still change (not ended, or their end
  // not yet reported). The transport watches them (TaskDirWatcher) and ticks as soon as a
  // supervisor writes there, so that a task's start and end are reported without waiting for
  // the next periodic tick.
  std::vector<std::string> unfinishedTaskDirs() const;

  // The messages to send, oldest first; empties the outbox.
  std::vector<nlohmann::json> takeOutbox();

  // The node credential of the latest `welcome` that carried one (a TLS agent's first join),
  // handed out once: the caller stores it and uses it for later connections.
  std::string takeNodeCredential() { return std::exchange(node_credential_, {}); }
  // The latest node epoch seen (0 before any welcome).
  int64_t nodeEpoch() const { return node_epoch_; }
  bool leaseOk() const { return fence_->mayStartWork(); }

 private:
  struct Tracked {
    protocol::Assignment assignment;
    bool has_assignment = false;  // false for a task found without its assignment file
    bool requeueable = false;
    TaskState reported = TaskState::kStarting;  // the last state sent upstream
    bool reported_once = false;
    // The last report is not acknowledged yet (`task_ack`): it is sent again every heartbeat
    // interval from `sent_at` (monotonic) until it is, on this connection or the next.
    bool awaiting_ack = false;
    Micros sent_at{0};
    std::optional<StopReason> stopping;
    std::string stop_reason;  // "cancelled", "preempted", "timeout", "fenced"
    TaskInfo info;
    // When the controller acknowledged the task's end (`task_ack` of its exit: the end is
    // committed to its store), monotonic; unset until then. The retention counts from it.
    std::optional<Micros> end_acknowledged;
    std::vector<std::string> regions;  // vgpu region files to delete at the end
    std::vector<std::string> gpus;     // the UUIDs of its GPUs
    uint64_t slice_quota_mib = 0;      // a slice's memory quota on gpus[0]; 0: not a slice
    // What it does on simulated GPUs (simulateTenants): its compute share of each GPU, how
    // busy it keeps it and the memory it holds, from its slice and its declared load
    // (GPOOL_SIM_LOAD, GPOOL_SIM_MEMORY in its environment).
    double sim_share = 1.0;
    double sim_load = 1.0;
    uint64_t sim_memory_mib = 0;  // 0: 70 % of its slice's memory (whole GPU: of the GPU's)
    // Its regions' kernel launch count at the largest seen, and when (monotonic) the agent
    // first saw it there: the last launch as far as the telemetry interval can tell.
    uint64_t launches_seen = 0;
    std::optional<Micros> last_launch_seen;
  };

  // Queues one message with the next sequence number.
  template <typename M>
  void send(const M& m) {
    outbox_.push_back(protocol::encodeMessage(m, ++seq_out_, last_seq_in_));
  }
  void sendError(std::string_view code, std::string_view message, int64_t in_reply_to);

  Status onWelcome(const protocol::Welcome& m);
  Status onDesiredState(protocol::DesiredState m, int64_t seq);
  Status onAssign(protocol::Assign m, int64_t seq);
  Status onCancel(const protocol::Cancel& m, int64_t seq);
  Status onLease(const protocol::Lease& m);
  Status onTaskAck(const protocol::TaskAck& m);
  // Sends again every report not acknowledged within a heartbeat interval.
  void resendUnacked();
  // `read_log`: answers `log_data` with a piece of one of this node's task logs.
  Status onReadLog(const protocol::ReadLog& m);
  // Checks and records the node epoch of a message; FailedPrecondition for an older one.
  Status acceptNodeEpoch(int64_t epoch);

  // Starts, keeps or replaces the task of `entry`. Stale epochs are answered with an error.
  void reconcileEntry(protocol::TaskEntry entry, int64_t seq);
  // Launches now when the lease allows, else queues it in pending_.
  void startTask(protocol::TaskEntry entry);
  // Stops task `t`; `why` is the stop reason reported upstream ("cancelled", ...), `detail` the
  // task's end reason when it is not the supervisor's own.
  void stopTask(Tracked& t, StopReason reason, std::string why, std::optional<int64_t> grace_ms,
                const std::string& detail = "");
  // Reads the launcher's status of every task and reports changes.
  void refreshTasks();
  void reportTask(Tracked& t);
  protocol::TaskReport taskReport(const Tracked& t) const;

  void fenceTasks();
  // Removes the directories (and assignment files) of ended tasks whose end was acknowledged
  // longer than task_retention ago, and of the oldest acknowledged beyond max_retained_tasks;
  // at most kMaxRemovalsPerTick per call, so that a backlog does not stall the agent.
  void removeRetiredTasks();
  // On simulated GPUs the telemetry follows the tasks that run there (docs/gpu-backends.md):
  // utilisation, memory, power and temperature from their interposer regions where they have
  // used the GPU, else from their declared load; each task shows as a process on its GPUs.
  void simulateTenants(gpu::TelemetrySample& sample);
  // Rewrites the HPC job mapping files that changed (hpc_job_mapping_dir).
  void writeJobMapping();
  // Writes the lease as the fence now counts it into the lease file, for the supervisors.
  void publishLease();
  void sampleAndCheck(TimePoint now);
  // Adds to `telemetry` what the interposer's regions of the running slice tasks say: compute
  // used, launches, time since the last launch (docs/metrics.md, "Slices").
  void addSliceUsage(protocol::Telemetry& telemetry);
  // The slice backstop over one sample: `held` is the GPU memory (MiB) the processes of each
  // slice task hold on its GPU, as the backend measured it. Ends (or reports) the tasks over
  // their quota plus tolerance; findings go to `findings`.
  void sliceBackstop(const std::map<std::string, uint64_t>& held,
                     std::vector<protocol::Finding>* findings);

  Status writeAssignment(const Tracked& t) const;
  std::string assignmentPath(const std::string& name) const;

  AgentOptions options_;
  std::string node_credential_;
  gpu::GpuBackend& backend_;
  Launcher& launcher_;
  const Clock& clock_;
  std::unique_ptr<Fence> fence_;
  std::optional<LeaseFile> lease_file_;  // open from start()
  // When this connection's hello left, and each heartbeat not answered yet (by seq): a renewal
  // counts from when the message it answers was sent (monotonic).
  Micros hello_sent_{0};
  std::map<int64_t, Micros> heartbeats_sent_;
  gpu::StrayTracker strays_;

  gpu::Inventory inventory_;
  std::vector<std::string> initial_uuids_;
  std::map<std::string, Tracked> tasks_;                // by task name
  std::map<std::string, protocol::TaskEntry> pending_;  // desired, not started (fenced)
  int64_t node_epoch_ = 0;
  int64_t seq_out_ = 0;
  int64_t last_seq_in_ = 0;
  std::vector<nlohmann::json> outbox_;
  std::optional<Micros> last_heartbeat_;
  std::optional<Micros> last_telemetry_;
  std::vector<protocol::Finding> last_findings_;  // the latest `health` sent
  bool fenced_ = false;
  std::map<uint32_t, std::string> job_mapping_;  // GPU index -> file content written
};

}  // namespace gpool::agent
