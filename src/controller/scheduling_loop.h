#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/random.h"
#include "common/result.h"
#include "common/status.h"
#include "controller/agent_gateway.h"
#include "controller/job_service.h"
#include "controller/node_registry.h"
#include "sched/policies.h"
#include "sched/scheduler.h"
#include "sched/usage.h"
#include "store/store.h"

// The controller's scheduling loop: on events (submit, task end, node change) and on a timer,
// it takes a snapshot (registered nodes + running and pending jobs from the store), runs one
// sched::SchedulerPass, persists the decisions (placements with a new fencing epoch, pending
// reasons) and hands the assignments to the AgentGateway. It also applies what agents report
// (task started / ended, fenced by epoch) and what the node registry finds (lost nodes: their
// jobs go to NODE_FAIL, or back to PENDING when the job is preemptible, i.e. restartable).
namespace gpool::controller {

// What idle reclaim does with a job whose GPUs stayed idle for `after` + `grace`.
enum class IdleAction : uint8_t {
  kAuto,     // requeue a preemptible (restartable) job, end any other
  kRequeue,  // stopped and queued again (PREEMPTED, then PENDING)
  kEnd,      // stopped for good (PREEMPTED)
  kWarn,     // only flagged and warned: it keeps its GPUs
};
// "auto", "requeue", "end", "warn".
Result<IdleAction> parseIdleAction(std::string_view text);

// Idle reclaim (docs/controller.md, "Idle reclaim"): a RUNNING job whose every GPU stayed idle
// (at most the caller's threshold) for `after_s` is flagged: an event on the job whose reason
// says so (`gpool show`, the live feed) and, from the alert rules, AllocationIdle. Still idle
// `grace_s` later, it is stopped (SIGTERM, its QoS grace, SIGKILL) and requeued or ended per
// its QoS's action. A job seen busy again is unflagged (another event). Interactive allocations
// are jobs like any other here. The idle clock is the loop's Clock; since when a job is idle is
// kept in the store (Store::setJobIdleSince), so a gpoold restart does not start the count again
// (if the first reading after it still finds the job idle; a flag in the job's reason is kept).
struct IdleReclaimOptions {
  bool enabled = false;
  int64_t after_s = 2 * 3600;
  int64_t grace_s = 3600;
  IdleAction action = IdleAction::kAuto;
  // The utilisation (%) at or below which a GPU counts as idle; `jobs_idle` applies it, the
  // reasons quote it.
  double threshold_pct = 0;
  // Per QoS name, replacing `action` for the jobs of that QoS.
  std::map<std::string, IdleAction> qos_actions;
  // For each job holding a GPU: whether it is idle now (controller::jobsIdle over the latest
  // telemetry). A job absent counts as not idle. Called once per pass, on the loop's thread,
  // outside no lock of the caller's; must be cheap.
  std::function<std::map<int64_t, bool>()> jobs_idle;
};

// The reason a flagged job carries while it is idle starts with this.
inline constexpr const char* kIdleReasonPrefix = "Idle: ";

struct LoopOptions {
  sched::SchedulerConfig scheduler;
  uint64_t seed = 1;
  // Fair-share decay half-life (Slurm's PriorityDecayHalfLife).
  int64_t usage_half_life_s = 7 * 24 * 3600;
  // The timer: a pass starts at least this often (runUntilStopped / tick only).
  Micros interval{std::chrono::seconds(10)};
  // Event-triggered passes start at least max(min_gap, the last pass's duration) after the last
  // pass ended, so a burst of submissions (each one an event) costs a few passes over the
  // pending queue instead of one per submission, and the loop spends at most half its time in
  // passes. An event after a quiet spell still starts a pass at once.
  // 50 ms: with 250 ms, 200 one-GPU `true` jobs on 8 GPUs ran at 22.7 jobs/s, with 50 ms at
  // 37.7 jobs/s (bench/vs_slurm.sh, issue 24); the pass itself adapts the gap when it is slow.
  Micros min_gap{std::chrono::milliseconds(50)};
  // Called after each pass that tick() runs, with its duration (monotonic), on the loop's
  // thread and outside its locks; must return quickly (gpoold's metrics).
  std::function<void(Micros took)> on_pass;
  // Place work only on nodes whose agent is connected (NodeRegistry::agentConnected). Off only
  // for `gpoold --once`, a pass with no agent link at all: what it places starts when each
  // node's agent next says hello (its desired state).
  bool require_connected_agents = true;
  IdleReclaimOptions idle;
};

// The policy one pass runs with: `base` (gpoold's configuration) plus what admins keep in the
// store, so that a `gpool qos` or `gpool quota` change applies at the next pass. A store QoS
// level (priority, preemptible, GPUs per user) replaces a configured one of the same name. A
// user's quota gives their GPU cap (AssocMaxGpuPerUser) and fair-share weight; a group's its GPU
// cap (GroupQuota), guaranteed GPUs and fair-share weight; `max_compute` the user's or group's
// compute cap (AssocMaxComputePerUser, GroupComputeQuota). The api's max_gpus (max_compute) 0
// forbids GPUs. A store QoS level's grace_time is its preemption grace (sched::QosLevel). A
// quota's `gpu_hours` and the GPU-hours its user or group used within its period (as of `now`:
// ended runs, and running ones so far) are the policy's gpu_hours and gpu_hours_used; the pass
// holds their pending jobs back with AssocGrpGpuHours; running jobs go on. The per-job limits
// (max_run_time, max_wall_time, max_memory_per_task) are checked at submission
// (JobService::applyLimits).
struct StorePolicy {
  sched::SchedulerConfig config;
};

// Reads the QoS levels and quotas once, and the usage once per distinct quota period. The GPU-hours
// of a period are the ended runs' (usage records) plus, for each RUNNING or COMPLETING job among
// `jobs` (other states are skipped), its GPUs times the part of its run so far that lies in the
// period, as Slurm's GrpTRESMins counts running jobs: one long job cannot outrun a quota until it
// ends. Errors: the store's, or InvalidArgument for a stored quota that does not parse.
Result<StorePolicy> readStorePolicy(store::Store& store, const sched::SchedulerConfig& base,
                                    TimePoint now, const std::vector<store::JobRecord>& jobs = {});

// The pending reason of a job whose user or group used up the GPU-hours of its quota in the
// quota's period (Slurm's AssocGrp*Minutes family).
inline constexpr const char* kGpuHoursReason = "AssocGrpGpuHours";

// What one pass did, for logs and tests.
struct PassReport {
  size_t started = 0;
  size_t pending = 0;
  size_t preempted = 0;
  size_t node_failed = 0;  // jobs moved off DOWN nodes
  std::vector<std::string> lost_nodes;
};

// How a task ended, as an agent reports it.
enum class TaskOutcome { kExited, kOomKilled, kTimedOut, kCancelled };

// Thread-safety: every public method may be called from any thread; passes and reports are
// serialised by one mutex, so the store sees one writer of job placements at a time.
class SchedulingLoop final : public JobListener {
 public:
  // All references must outlive the loop.
  SchedulingLoop(store::Store& store, NodeRegistry& registry, AgentGateway& gateway, Clock& clock,
                 LoopOptions options);

  // After a restart: rebuilds decayed usage from the store's usage records (4 half-lives, in
  // daily buckets, capped at 90 days).
  Status recover();

  // One pass (what the timer and events trigger). Errors are store failures; a job whose state
  // changed under the pass (cancelled meanwhile) is skipped, not an error.
  Result<PassReport> runOnce();

  // An agent reports a task's processes started at `started` (its supervisor's record; unset:
  // now). The job's start is its first task's, recorded once (a report repeated after a restart
  // changes nothing). FailedPrecondition for a stale epoch: the agent must kill the task.
  Status taskStarted(int64_t job_id, int64_t lease_epoch,
                     std::optional<TimePoint> started = std::nullopt);
  // An agent reports a task ended. When every task of the job has ended the job moves to its
  // final state (COMPLETED, FAILED for a non-zero exit, OUT_OF_MEMORY, TIMEOUT, CANCELLED; a job
  // being preempted goes through PREEMPTED back to PENDING). FailedPrecondition for a stale
  // epoch or a job that is no longer running: reported twice, nothing is recorded twice.
  // `why` is the agent's words for the task's end ("exited with 3", "cgroup ...: no cpu
  // controller ..."): the reason of a job that did not complete is that of the task that
  // decided its state ("task K: " before it for a job of several tasks), or its state when
  // the agent said nothing.
  // `ended` is when the task ended by its supervisor's record (unset: now): the job ends when
  // its last task did (kept within [its start, now]), however late the report arrives, and
  // its usage covers that run.
  // `job_ended` (optional) tells whether this call committed the job's end; when it returns OK
  // without it, the end of this task is only kept in memory until the job's last task ends.
  // When the store cannot commit the job's end, the error is returned and every task's end is
  // kept, so that the same report again (the agent re-sends it until acknowledged) retries the
  // commit: nothing reported is lost to a store that cannot write.
  Status taskEnded(int64_t job_id, uint32_t task, int64_t lease_epoch, int32_t exit_code,
                   TaskOutcome outcome, std::string_view why = {},
                   std::optional<TimePoint> ended = std::nullopt, bool* job_ended = nullptr);

  // JobListener: wake the loop; stop a cancelled job's tasks; what the last pass said about a
  // pending job (its detail, and its reservation's start).
  void jobsChanged() override;
  void runningJobCancelled(const store::JobRecord& before) override;
  std::optional<PendingInsight> pendingInsight(int64_t id) const override;
  // The pending jobs with a --min-cuda, as the last pass saw them (ascending job id). Any thread.
  std::vector<PendingCudaNeed> pendingCudaNeeds() const;

  // Runs passes on events and every `interval` until `stop` is requested (gpoold's thread):
  // tick(), then a wait for what it returns or for an event. Errors of a pass are logged and the
  // loop goes on.
  void runUntilStopped(std::stop_token stop);

  // One step of runUntilStopped, driven by the clock's monotonic time: runs a pass when one is
  // due (the first call; `interval` since the last pass started; or an event since the last pass
  // and the gap, see LoopOptions::min_gap, has passed) and returns how long to wait before the
  // next step. `*event_pending` (may be null) tells whether an event is already waiting for its
  // gap, so the caller must not treat it as new. Tests call it with a SimClock.
  Micros tick(bool* event_pending = nullptr);
  // Passes run by tick() so far.
  uint64_t passesRun() const;

  // The grace (seconds from SIGTERM to SIGKILL at the time limit) of every QoS level that has
  // one, by name, the default level also under "": the store's levels over the configured ones,
  // as a pass sees them. For the full desired state an agent gets when it (re)connects. Errors:
  // the store's.
  Result<std::map<std::string, int64_t>> timeLimitGraces();

  // Decayed usage (billed GPU-seconds) the fair-share factor reads.
  double userUsage(const std::string& user) const;
  double groupUsage(const std::string& group) const;

 private:
  // One pass (runOnce) in its steps: failJobsOnDownNodes, snapshotPool, snapshotJobs, the
  // scheduler library's pass (sched::SchedulerPass, which decides), then applyDecisions. All
  // under mu_. Errors: the store's (the pass stops there; the next one starts over).
  struct PassInput;  // scheduling_loop.cc
  Status failJobsOnDownNodes(PassReport& report);
  // The registered nodes as the scheduler's pool, and their GPU models. A node whose agent is
  // not connected is not schedulable (LoopOptions::require_connected_agents).
  void snapshotPool(PassInput& in) const;
  // The PENDING, RUNNING and COMPLETING jobs as the scheduler sees them, with the store's policy
  // (QoS levels, quotas, GPU-hours used). Running ones are applied to the pool and their idle
  // time tracked; pending ones carry their holds, dependencies and preemptor claims. Specs of
  // jobs not seen are dropped from spec_summaries_.
  Status snapshotJobs(PassInput& in);
  // Carries out the pass's decisions, in this order: starts (persistStart), claims' upkeep,
  // idle flags and reclaims, preemptions, cancels of jobs whose dependencies can never be met,
  // the pending details and expected starts (pendingInsight), and changed pending reasons.
  Status applyDecisions(PassInput& in, const sched::Decisions& decisions, PassReport& report);
  // Flags an idle job (its reason, an event) or marks it reclaimed (reclaiming_).
  Status applyIdleDecisions(const PassInput& in, const std::vector<sched::IdleDecision>& idle);
  // Stops each victim's tasks with its grace (gateway_.cancel), remembers when it leaves
  // (preempting_) and for whom (claims_).
  Status applyPreemptions(const PassInput& in,
                          const std::vector<sched::PreemptDecision>& preemptions,
                          PassReport& report);
  // What pendingInsight and pendingCudaNeeds answer until the next pass.
  void publishInsight(const PassInput& in, const sched::Decisions& decisions);
  // Writes a pending job's reason when it changed (one event per change, none per pass).
  Status persistPendingReasons(const PassInput& in,
                               const std::vector<sched::PendingDecision>& pending,
                               PassReport& report);
  // `grace_of(spec.qos)`: the job's QoS grace_time (SIGTERM to SIGKILL at the time limit);
  // nullopt: the agent's default.
  // `rendezvous_ports`: by server, the MASTER_PORTs of the running jobs of several tasks whose
  // task 0 is there; a job of several tasks started here takes the first free one from its
  // preferred port and adds it.
  Status persistStart(const sched::StartDecision& start, const store::JobRecord& record,
                      const sched::ClusterState& cluster,
                      const std::function<std::optional<int64_t>(const std::string&)>& grace_of,
                      std::map<std::string, std::set<uint32_t>>& rendezvous_ports,
                      PassReport& report);

  store::Store& store_;
  NodeRegistry& registry_;
  AgentGateway& gateway_;
  Clock& clock_;
  LoopOptions options_;

  mutable std::mutex mu_;  // one pass or report at a time
  sched::UsageLedger ledger_;
  SeededRandom random_;
  std::unique_ptr<sched::PlacementPolicy> policy_;
  // Tasks reported ended per running job (job id -> task -> outcome, exit code).
  struct Ended {
    TaskOutcome outcome = TaskOutcome::kExited;
    int32_t exit_code = 0;
    std::string why;
    std::optional<TimePoint> at;
  };
  std::map<int64_t, std::map<uint32_t, Ended>> ended_;
  // Jobs told to stop for preemption: by when they leave, and the pass's reason, which their
  // PREEMPTED event records ("preempted for job 7 (higher priority)").
  struct Leaving {
    TimePoint deadline;
    std::string reason;
  };
  std::map<int64_t, Leaving> preempting_;
  // Pending preemptors and the jobs evicted for them (sched::Job::victims), until they start
  // or leave the queue. Kept in memory: after a restart a preemptor whose victims are still
  // leaving queues as any other job.
  std::map<int64_t, std::vector<sched::JobId>> claims_;
  // Idle reclaim: RUNNING jobs idle now, since when and whether flagged (warned).
  struct Idle {
    TimePoint since{};
    bool warned = false;
    IdleAction action = IdleAction::kWarn;  // what its QoS says, resolved (never kAuto)
  };
  std::map<int64_t, Idle> idle_;
  // The idle-since the store holds (Store::jobsIdleSince), read at the first pass, then kept
  // equal to it: a job idle before a restart keeps its idle time.
  std::optional<std::map<int64_t, TimePoint>> stored_idle_;
  // Jobs among preempting_ stopped by idle reclaim: requeued or ended, and the reason.
  struct Reclaim {
    bool requeue = false;
    std::string reason;
  };
  std::map<int64_t, Reclaim> reclaiming_;
  // Flags, unflags and tells the pass (sj) about one RUNNING job's idleness.
  Status trackIdle(const store::JobRecord& record, const std::map<int64_t, bool>& idle_now,
                   bool preemptible, const std::string& qos, sched::Job& sj, TimePoint now);
  IdleAction idleActionOf(const std::string& qos, bool preemptible) const;
  // What a pass needs of a job's spec, decoded once: with a hash of the stored text it came from
  // (a changed text, e.g. PATCH of the time limit, is decoded again). Decoding every pending
  // job's spec at every pass took 44% of a pass over 100,000 pending jobs; keeping whole
  // JobSpecs instead cost ~1.1 KB a job. Holds the jobs of the last pass only; touched only by
  // passes (under mu_).
  struct SpecSummary {
    size_t text_hash = 0;
    size_t text_size = 0;
    uint64_t pass = 0;  // the last pass that used it
    std::string qos;
    int64_t time_limit_seconds = 0;
    bool preemptible = false;
    std::optional<uint32_t> array_max_parallel;  // set for an array job
    std::vector<api::Dependency> dependencies;
    sched::PlacementRequest request;
  };
  std::unordered_map<int64_t, SpecSummary> spec_summaries_;
  uint64_t spec_pass_ = 0;
  // The summary of `record`'s spec from spec_summaries_, decoded and kept when missing or
  // changed, and marked used by pass `spec_pass_`. The pointer stays valid until entries are
  // erased.
  Result<const SpecSummary*> specOf(const store::JobRecord& record);

  // The last pass's pending details and expected starts, read by the API's threads.
  mutable std::mutex insight_mu_;
  std::unordered_map<int64_t, PendingInsight> insight_;  // GUARDED_BY(insight_mu_)
  std::vector<PendingCudaNeed> cuda_needs_;              // GUARDED_BY(insight_mu_)

  mutable std::mutex wake_mu_;
  std::condition_variable_any wake_cv_;
  bool dirty_ = true;
  // tick()'s pacing, in the clock's monotonic time. GUARDED_BY(wake_mu_).
  bool ticked_ = false;
  Micros last_start_{0};
  Micros last_end_{0};
  uint64_t passes_ = 0;
};

}  // namespace gpool::controller
