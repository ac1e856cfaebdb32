#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "api/job_spec.h"
#include "api/user.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "controller/agent_gateway.h"
#include "controller/node_registry.h"
#include "controller/permissions.h"
#include "store/store.h"

// The job operations behind the API: submit, list, show, cancel, requeue. Each change is one
// store transaction; every action is checked against the caller's role (permissions.h) first.
namespace gpool::controller {

// What the scheduler's last pass said about a pending job (api::Job::reason_detail and
// expected_start).
struct PendingInsight {
  std::string detail;
  std::optional<TimePoint> expected_start;
};

// A pending job's minimum CUDA version (--min-cuda), as the last scheduling pass saw it: the
// alert engine compares it with the servers' drivers (the cuda_below_need rule).
struct PendingCudaNeed {
  int64_t job_id = 0;
  std::string user;
  uint32_t min_cuda = 0;  // major * 100 + minor
};

// What the service tells the scheduling loop (SchedulingLoop implements it).
class JobListener {
 public:
  virtual ~JobListener() = default;
  // The last pass's words about pending job `id`; nullopt when it has none. Called from the
  // API's threads.
  virtual std::optional<PendingInsight> pendingInsight(int64_t id) const {
    (void)id;
    return std::nullopt;
  }
  // New pending work: run a pass soon.
  virtual void jobsChanged() = 0;
  // A job that held resources was cancelled in the store: stop its tasks on their agents.
  virtual void runningJobCancelled(const store::JobRecord& before) = 0;
};

struct SubmitRequest {
  api::JobSpec spec;
  std::string user;  // empty: the caller
  uint32_t uid = 0;  // used when `user` is the caller's name; else the caller's uid
  std::string group;
};

// Thread-safety: all methods may be called concurrently (the store serialises writes).
// What JobService::readLog returns.
struct LogChunk {
  std::string data;          // the bytes read (possibly empty)
  uint64_t offset = 0;       // where `data` starts
  uint64_t next_offset = 0;  // where the next read starts
  uint64_t size = 0;         // the file's size when read
  std::string path;          // the file, on the task's node
  std::string node;
  api::JobState state = api::JobState::kPending;  // the job's state when read
  // True when nothing more will come: the job has ended and everything was read.
  bool complete = false;
  // True while the task's agent is asked for the piece (the log is on another server): no data
  // yet, ask again with the same offset shortly.
  bool pending = false;
  // Which attempt of the job was read (from 1) and how many it has had; for an earlier attempt
  // `state` is how that attempt ended (PREEMPTED, NODE_FAIL, ...).
  uint32_t attempt = 1;
  uint32_t attempts = 1;
};

struct JobServiceOptions {
  // The QoS of a job that names none (the scheduling loop's default level: the first
  // configured one; gpoold configures none, so "normal").
  std::string default_qos = "normal";
  // The QoS levels of the configuration; with the store's, the names a job may ask for.
  std::vector<std::string> configured_qos = {"normal"};
  // Where the logs of tasks on other servers are read (gpoold: the AgentLink); null: only logs
  // on the controller's machine are readable. Must outlive the service.
  LogRelay* log_relay = nullptr;
  // Who may run jobs (gpoold's controller.allow_root_jobs and min_job_uid): a job whose user
  // is root is refused at submission unless allow_root_jobs; any other uid below min_job_uid
  // too. Agents refuse root's tasks on their own unless they allow them as well.
  bool allow_root_jobs = false;
  uint32_t min_job_uid = 1;
};

class JobService {
 public:
  // All references must outlive the service; `listener` may be null.
  JobService(store::Store& store, const NodeRegistry& registry, Clock& clock, JobListener* listener,
             JobServiceOptions options = {});

  // Validates the spec (api rules, then against the registered pool: more GPUs per task than
  // any server has, GPU memory above the largest GPU, unknown GPU models, more nodes than the
  // pool has, a gang no set of servers can hold, ... are InvalidArgument naming the field,
  // e.g. "job.resources.gpus: ..."), checks dependencies name existing jobs, applies the limits
  // the store holds (see applyLimits), expands an array and stores everything in one
  // transaction. Returns the new ids, ascending. The pool checks are skipped while no node is
  // registered (a controller may start before its agents).
  //
  // The job's group is the one asked for, which must exist (InvalidArgument naming `group`)
  // and have the job's user among its members (PermissionDenied; an admin may charge any
  // group); without one, the user's
  // default group (the first of their record's groups), or none for a user without groups.
  // The job's QoS must be a configured or stored level (InvalidArgument naming `job.qos`);
  // without one, the user's default QoS, else the pool's default.
  Result<std::vector<int64_t>> submit(const Caller& caller, const SubmitRequest& request);

  // The per-job limits of the job's QoS level and of `user`'s and `group`'s quotas, as Slurm
  // applies a QoS's or association's MaxWall: a time limit above the QoS's `max_wall_time` or a
  // quota's `max_run_time` is InvalidArgument naming `job.time_limit`, the limit and whose it
  // is; a job without a time limit gets the smallest of them. A task's GPU memory above a
  // quota's `max_memory_per_task` (`gpool quota --max-gpu-mem`) is InvalidArgument naming
  // `job.resources.gpu_memory`; a task that does not say its memory is counted with the largest
  // GPU of the pool (what a whole GPU or a slice of one may hold), and not at all while no node
  // is registered. Per-user totals (max_gpus, max_compute, gpu_hours) are the scheduler's.
  // Errors: the store's, InvalidArgument for a stored quota that does not parse.
  Status applyLimits(const std::string& user, const std::string& group, api::JobSpec* spec);

  // Jobs matching `filter`, keyset paged. A user sees only their own jobs (asking for another
  // user's is PermissionDenied); a group admin sees their own and their groups' jobs; an admin
  // everything. InvalidArgument for a limit outside [1, store::kMaxPageSize].
  Result<store::JobPage> list(const Caller& caller, store::JobFilter filter);

  // The job; a pending one with the scheduler's words about it (JobListener::pendingInsight).
  Result<api::Job> show(const Caller& caller, int64_t id);
  // The scheduler's words about a pending job, for lists (no permission check: the caller
  // listed the job).
  std::optional<PendingInsight> insightOf(const store::JobRecord& record) const;
  Result<std::vector<store::JobEvent>> events(const Caller& caller, int64_t id);

  // A piece of one task's output log, read from the file the agent reported (docs/cli.md,
  // "gpool logs"): at most `max_bytes` from `offset`. Only the job's owner, the admin of its
  // group or an admin (JobAction::kReadLog). InvalidArgument for a task the job does not have;
  // FailedPrecondition while the job has not started (no log yet). A log that is not on this
  // machine is read through the log relay: `pending` until the task's agent answers
  // (Unavailable when its agent is not connected); without a relay it is NotFound, naming the
  // server and the path. `attempt` picks one run of a requeued job (from 1; 0: the latest);
  // InvalidArgument for an attempt the job has not had. An earlier attempt's log is read
  // through its agent, which keeps it until the task's directory is removed (task_retention).
  Result<LogChunk> readLog(const Caller& caller, int64_t id, uint32_t task, bool stderr_stream,
                           uint64_t offset, uint64_t max_bytes, uint32_t attempt = 0);

  // PENDING, RUNNING or COMPLETING -> CANCELLED. A running job's tasks are stopped through the
  // listener. FailedPrecondition when the job has already ended.
  Status cancel(const Caller& caller, int64_t id);

  // PREEMPTED or NODE_FAIL -> PENDING (a new attempt; the next placement gets a new epoch).
  Status requeue(const Caller& caller, int64_t id);

  // Holds a PENDING job: it stays PENDING and is not placed until released (Slurm's hold).
  // Its reason becomes JobHeldAdmin when an admin or the job's group admin holds it, else
  // JobHeldUser. FailedPrecondition when the job is not PENDING or is already held.
  Status hold(const Caller& caller, int64_t id);
  // Releases a held job. An admin hold is released only by an admin or the job's group admin
  // (PermissionDenied for its owner). FailedPrecondition when the job is not held.
  Status release(const Caller& caller, int64_t id);

  // An admin's change to a PENDING job: its time limit (seconds, checked by the api's rules)
  // and/or its priority (added to the computed one; Slurm's negative nice), each applied when
  // set. PermissionDenied for non-admins, FailedPrecondition when the job is not PENDING.
  Status update(const Caller& caller, int64_t id, std::optional<int64_t> time_limit_seconds,
                std::optional<int32_t> priority);

 private:
  Result<store::JobRecord> loadChecked(const Caller& caller, int64_t id, JobAction action);
  Status checkAgainstPool(const api::JobSpec& spec) const;
  // The job's group and QoS as described at submit().
  Result<std::string> resolveGroup(const Caller& caller, const std::string& user,
                                   const std::string& asked,
                                   const std::optional<api::User>& record);
  Status resolveQos(const std::optional<api::User>& record, api::JobSpec* spec);
  Status checkDependencies(const api::JobSpec& spec);

  store::Store& store_;
  const NodeRegistry& registry_;
  Clock& clock_;
  JobListener* listener_;
  JobServiceOptions options_;
};

}  // namespace gpool::controller
