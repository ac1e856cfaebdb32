#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/job.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"

// The controller's durable state: jobs and their event history, nodes, GPUs, users, groups,
// quotas, QoS levels, API tokens, usage records and telemetry history.
//
// The store keeps each domain object's full description as JSON text (written and read by the
// api layer, never interpreted here) next to the few columns that are indexed or that the
// store itself needs (owner, state, times, GPU share for accounting). Two implementations share
// one SQL layer: SqliteStore (sqlite_store.h, the embedded default) and PostgresStore
// (postgres_store.h). Schema, migrations and durability choices: docs/store.md.
namespace gpool::store {

// Job states are api::JobState values; the store keeps them as the api's names ("PENDING",
// "RUNNING", ...) in its jobs.state column and event rows, mapped in one place (sql_store.cc).
// The store does not own the state machine (api/job.h does): it refuses every change the api's
// transition table does not allow, and enforces that each transition starts from the state the
// caller expects, atomically, so that two writers can never both move the same job.

struct NewJob {
  std::string user;
  uint32_t uid = 0;
  std::string group;
  std::string spec_json;  // the api's JobSpec, as JSON text
  // GPUs the job holds while it runs, in thousandths (units.h); usage is counted from it.
  uint32_t gpu_thousandths = 0;
  int32_t priority = 0;
  // For array elements: the array's job id, which is the id of its first element (Slurm's
  // ArrayJobId; the first element names itself). -1 means "the first job of this batch",
  // which lets one submitJobs call create a whole array.
  std::optional<int64_t> array_parent;
  std::optional<int32_t> array_index;
};

struct JobRecord {
  int64_t id = 0;
  std::string user;
  uint32_t uid = 0;
  std::string group;
  api::JobState state = api::JobState::kPending;
  std::string spec_json;
  uint32_t gpu_thousandths = 0;
  int32_t priority = 0;
  std::optional<int64_t> array_parent;
  std::optional<int32_t> array_index;
  TimePoint submit_time{};
  // Set on entering RUNNING, moved to the task's own start by recordStart, cleared by a
  // requeue.
  std::optional<TimePoint> start_time;
  std::optional<TimePoint> end_time;
  std::string placement_json;  // where the job runs; empty while it has no placement
  // Fencing epoch: incremented by every placement, so an agent holding an older assignment
  // can be told it no longer owns the job.
  int64_t epoch = 0;
  std::optional<int32_t> exit_code;
  std::string reason;  // the reason of the latest transition (pending reason, failure cause)
  int32_t requeue_count = 0;
  // A held job stays PENDING and is not placed (Slurm's hold): "" (not held), "user" (held by
  // its owner; JobHeldUser) or "admin" (held by an administrator; JobHeldAdmin). Version 3.
  std::string hold;
  // The store incarnation (Store::beginIncarnation) the current placement was made under; with
  // the id and the epoch it identifies the running attempt across the pool's whole life, so
  // that a report of a task from before a restore is never taken for this job's. 0 for jobs
  // placed before version 8 (or by a store never given an incarnation). Version 8.
  int64_t incarnation = 0;
};

struct PendingReasonCount {
  std::string reason;
  int64_t jobs = 0;
  TimePoint oldest_submit{};
};

// One alert of gpoold's alert engine (docs/alerts.md): fired when its rule's condition held
// long enough, resolved when it cleared long enough. `fingerprint` identifies what it is about
// (rule and labels), so that a restarted controller finds the alerts still firing.
struct AlertRecord {
  int64_t id = 0;
  std::string rule;         // "gpu_too_hot", ...
  std::string fingerprint;  // stable per (rule, labels)
  std::string severity;     // "warning" or "critical"
  std::string labels_json;  // a JSON object of strings
  std::string summary;      // for people
  std::string state;        // "firing" or "resolved"
  TimePoint started{};
  std::optional<TimePoint> resolved;
  std::string acked_by;  // empty until acknowledged
  std::optional<TimePoint> acked;
};

// What happened to an alert: "fired", "resolved", "acked".
struct AlertEvent {
  int64_t seq = 0;
  int64_t alert_id = 0;
  TimePoint time{};
  std::string event;
  std::string actor;  // "gpoold" or the acknowledging user
  std::string detail;
};

// A GPU held out of scheduling after a fatal fault (an XID of the fatal kinds) until an admin
// clears it (`gpool gpu clear NODE/GPU`).
struct GpuHold {
  std::string uuid;
  std::string node;
  std::string reason;
  TimePoint since{};
};

struct AlertFilter {
  std::string state;      // "firing", "resolved"; empty: both
  int64_t before_id = 0;  // newest first: only ids below this; 0: from the newest
  int32_t limit = 100;    // 1..10000
};

struct JobEvent {
  // Increases with every event in the store, in commit order: an event committed after another
  // has a higher seq (what lets live-update clients resume with "events after N").
  int64_t seq = 0;
  int64_t job_id = 0;
  TimePoint time{};
  std::optional<api::JobState> from_state;  // absent for the submission
  api::JobState to_state = api::JobState::kPending;
  // from_state's name as the API shows it: "" for the submission.
  std::string_view fromStateName() const {
    return from_state ? api::jobStateName(*from_state) : std::string_view();
  }
  std::string reason;
  // Filled by jobEventsAfter only (empty from jobEvents): the job's owner and group, and its
  // placement when the events are read (not necessarily the one at the event's time).
  std::string user;
  std::string group;
  std::string placement_json;
};

// One earlier attempt of a requeued job: the placement a requeue cleared, kept so that the
// attempt's output can still be found (gpool logs --attempt N). Version 9.
struct JobAttempt {
  int64_t job_id = 0;
  int32_t attempt = 0;  // 1 for the first run; the job's current attempt is requeue_count + 1
  int64_t epoch = 0;    // the fencing epoch it ran under
  int64_t incarnation = 0;
  api::JobState state = api::JobState::kPreempted;  // how it ended: the state it was requeued from
  std::string placement_json;  // as JobRecord::placement_json was when it ended
  std::optional<TimePoint> start_time;
  std::optional<TimePoint> end_time;
};

// Filters of listJobs. Empty fields match everything.
struct JobFilter {
  std::optional<std::string> user;
  std::optional<std::string> group;
  std::vector<api::JobState> states;
  std::optional<int64_t> array_parent;
  // Keyset paging: only jobs with an id greater than `after_id` (0 = from the start). Ids
  // only grow, so a page boundary never moves when jobs are submitted between two pages.
  int64_t after_id = 0;
  int32_t limit = 100;  // 1..kMaxPageSize
};
inline constexpr int32_t kMaxPageSize = 10'000;

struct JobPage {
  std::vector<JobRecord> jobs;  // ascending id
  // Pass as `after_id` for the next page; nullopt when this page was the last.
  std::optional<int64_t> next_after_id;
};

// A general transition, for the lifecycle's less common moves (COMPLETING, NODE_FAIL, a
// requeue). The job must be in one of `from_states`, and the move legal in the api's table.
struct JobTransition {
  int64_t job_id = 0;
  std::vector<api::JobState> from_states;  // the job must be in one of these
  api::JobState to_state = api::JobState::kPending;
  TimePoint time{};
  std::string reason;
};

// An admin's change to a PENDING job (PATCH /v1/jobs/{id}): its spec (time limit) and priority.
// Paths on the task's node that the agent reports (api::Allocation's fields of the same names).
struct TaskFiles {
  std::string stdout_log;
  std::string stderr_log;
  std::string shell_socket;
};

struct JobUpdate {
  int64_t job_id = 0;
  std::string spec_json;
  int32_t priority = 0;
  TimePoint time{};
  std::string reason;  // for the event; the job's own reason is left alone
};

struct NodeRecord {
  std::string name;
  std::string state;      // IDLE, MIXED, ALLOCATED, DRAINING, DRAINED, DOWN
  std::string info_json;  // the api's Node description
  std::optional<TimePoint> last_heartbeat;
};

struct GpuRecord {
  std::string uuid;
  std::string node;  // must name an existing node
  int32_t index = 0;
  std::string model;
  uint64_t memory_mib = 0;
  std::string info_json;
};

struct UserRecord {
  std::string name;
  std::optional<int64_t> uid;
  std::string role;  // "user", "group-admin", "admin" (api::roleName)
  std::string info_json;
};

struct GroupRecord {
  std::string name;
  std::optional<int64_t> gid;
  std::string info_json;
};

// An admin's change to the catalog that writes several records (a group and its members'
// user records, where membership lives), applied by Store::writeCatalog in one transaction: all
// of it or none of it.
struct CatalogWrites {
  struct UserUpdate {
    UserRecord record;
    // The info_json the record must still hold when the change is applied (the change was
    // computed from it); another writer in between makes the whole change Aborted.
    std::string expected_info_json;
  };
  std::vector<GroupRecord> create_groups;  // AlreadyExists when one exists
  std::vector<GroupRecord> update_groups;  // NotFound when one does not exist
  std::vector<std::string> delete_groups;  // with their quotas; NotFound when one does not exist
  std::vector<UserUpdate> update_users;    // NotFound when one does not exist
};

enum class QuotaSubject { kUser, kGroup };

struct QuotaRecord {
  QuotaSubject subject = QuotaSubject::kUser;
  std::string name;         // the user's or group's name
  std::string limits_json;  // the api's Quota
  TimePoint updated{};
};

// A change to something other than a job (quota changes), written in the same transaction.
struct AuditEvent {
  int64_t seq = 0;
  TimePoint time{};
  std::string actor;
  std::string action;   // e.g. "set_quota"
  std::string subject;  // e.g. "user:alice"
  std::string detail;   // the new value, as JSON text
};

struct QosRecord {
  std::string name;
  int32_t priority = 0;
  std::string info_json;
};

// API tokens are stored only as hashes; the token itself is shown once to its owner. One table
// holds the three kinds of bearer token (net/auth.h): users' API tokens, agents' join tokens
// and the per-node credentials handed out on join.
inline constexpr const char* kTokenKindUser = "user";
inline constexpr const char* kTokenKindJoin = "join";
inline constexpr const char* kTokenKindNode = "node";

struct TokenRecord {
  int64_t id = 0;    // assigned by createToken
  std::string user;  // the owner (user tokens), the creating admin (join tokens), the node name
  std::string hash;  // hex digest; unique
  std::string description;  // the token's name, chosen by its creator
  TimePoint created{};
  std::optional<TimePoint> expires;
  std::optional<TimePoint> revoked;
  // Version 4.
  std::string kind = kTokenKindUser;
  std::string public_id;  // the id part of the token text (net/auth.h), shown in listings
  std::string node;       // kind "node": the node it authenticates; kind "join": the only
                          // node it admits (empty: any new name)
  bool reusable = false;  // kind "join": admits any number of nodes until it expires
  int64_t uses = 0;       // kind "join": nodes admitted so far
  std::optional<TimePoint> last_used;  // updated at most once a minute (touchToken)
};

// One closed interval of GPU use by one job. GPU-hours are counted by slice: a job holding
// 250 thousandths for an hour used 0.25 GPU-hours.
struct UsageRecord {
  int64_t job_id = 0;
  std::string user;
  std::string group;
  uint32_t gpu_thousandths = 0;
  TimePoint start{};
  TimePoint end{};
};

enum class UsageGrouping { kUser, kGroup };

struct UsageRow {
  std::string key;  // user or group name
  double gpu_hours = 0;
  int64_t jobs = 0;  // distinct jobs with use in the period
};

// One telemetry sample of one GPU. `job_id` names the job on the GPU when there is exactly one.
struct TelemetrySample {
  std::string gpu_uuid;
  std::optional<int64_t> job_id;
  TimePoint time{};
  double util_percent = 0;
  double memory_used_mib = 0;
  double temperature_c = 0;
  double power_w = 0;
};

// One one-minute average of one task of a job (the controller's attribution of its GPUs' readings
// to it: see controller/telemetry_history.h). Unlike TelemetrySample it is kept for tasks that
// share a GPU too.
struct TaskTelemetrySample {
  int64_t job_id = 0;
  uint32_t task = 0;
  std::string node;
  TimePoint time{};
  double util_percent = 0;
  double memory_used_mib = 0;
  double temperature_c = 0;
  double power_w = 0;
};

// Telemetry is kept at three resolutions (see pruneTelemetry); queries read the finest that
// covers the period asked for.
enum class TelemetryResolution { kRaw, kFiveMinutes, kHourly };

struct TelemetryRetention {
  Micros raw{std::chrono::hours(1)};            // raw samples (about one a minute)
  Micros five_minutes{std::chrono::hours(24)};  // 5-minute averages
  Micros hourly{std::chrono::hours(24 * 90)};   // hourly averages
};

// Store is the controller's persistence interface.
//
// Durability: every mutating call is one transaction. When it returns OK, its effects and the
// event rows written with it are durable (committed and synced to disk as configured; the
// defaults survive a process crash and, for SQLite with synchronous=FULL, a power loss). When it
// returns an error, nothing of it was written.
//
// Thread-safety: all methods may be called from any thread concurrently. SqliteStore runs one
// call at a time (one writer); PostgresStore runs up to its pool size at once.
//
// Errors: NotFound for a missing id or name, FailedPrecondition for a transition from a state
// the job is not in, AlreadyExists for a duplicate unique key, InvalidArgument for bad
// arguments, Unavailable / IoError when the database fails.
class Store {
 public:
  virtual ~Store() = default;

  // Schema version of the open database (equals kSchemaVersion after open).
  virtual Result<int32_t> schemaVersion() = 0;

  // ---- incarnation (docs/store.md): which life of the pool placements belong to
  // Starts a new incarnation: stores max(the stored one + 1, `now` in Unix microseconds) and
  // returns it. gpoold calls it once at every start, so that a store restored from a backup
  // (whose stored incarnation went back with it) still places under a number no earlier run
  // used, as long as the wall clock has not gone back past the earlier starts.
  virtual Result<int64_t> beginIncarnation(TimePoint now) = 0;
  // The incarnation placements are recorded under now (read on open, then the latest begun).
  virtual int64_t currentIncarnation() const = 0;
  // Makes every job id the store hands out from now on greater than `id` (a restored store
  // must not reuse the ids of jobs that agents still report). Returns whether it had to move
  // the id sequence. Never lowers it.
  virtual Result<bool> reserveJobIdsThrough(int64_t id) = 0;

  // ---- jobs
  // Inserts the jobs in PENDING with one "submitted" event each, all in one transaction, and
  // returns their ids in order (ascending). See NewJob::array_parent for arrays.
  virtual Result<std::vector<int64_t>> submitJobs(const std::vector<NewJob>& jobs,
                                                  TimePoint now) = 0;
  virtual Result<JobRecord> getJob(int64_t id) = 0;
  virtual Result<JobPage> listJobs(const JobFilter& filter) = 0;
  // Events of one job, oldest first.
  virtual Result<std::vector<JobEvent>> jobEvents(int64_t job_id) = 0;
  // The earlier attempts of a job (those a requeue ended), oldest first; empty for a job never
  // requeued. NotFound for an unknown job.
  virtual Result<std::vector<JobAttempt>> jobAttempts(int64_t job_id) = 0;
  // Events of all jobs with seq > `after_seq`, ascending seq, at most `limit`
  // (1..kMaxPageSize; InvalidArgument otherwise), with user, group and placement filled.
  // Because seq order is commit order (JobEvent::seq), reading again after the last seq
  // returned never misses an event that commits later: the tail a live feed needs.
  virtual Result<std::vector<JobEvent>> jobEventsAfter(int64_t after_seq, int32_t limit) = 0;
  // The highest job event seq, 0 when there is none.
  virtual Result<int64_t> lastJobEventSeq() = 0;
  // Called after every committed transaction that wrote job events, on the committing thread
  // and outside any store lock; it must return quickly (wake a reader, not read itself). One
  // listener; an empty function removes it. Set it before concurrent writes start, or accept
  // that a write racing with the change may call the previous one.
  virtual void setJobEventListener(std::function<void()> listener) = 0;

  // PENDING -> RUNNING: stores the placement, sets start_time to `now`, increments the fencing
  // epoch, records currentIncarnation() as the job's incarnation; returns the new epoch.
  // FailedPrecondition for a held job (setJobHold).
  virtual Result<int64_t> recordPlacement(int64_t job_id, const std::string& placement_json,
                                          TimePoint now, const std::string& reason) = 0;
  // The agent reported a task of the job started at `started` (its supervisor's record) and
  // the report arrived at `now`: moves start_time to `started`, kept within [the placement,
  // `now`] (RUNNING stays RUNNING; a "started" event at that time records it). Idempotent: a
  // run's start is recorded once; a later report (a restarted controller or agent, another
  // task of the job) only moves start_time to an earlier task start and adds no event. `epoch`
  // must equal the job's current epoch (fencing), else FailedPrecondition.
  virtual Status recordStart(int64_t job_id, int64_t epoch, TimePoint started, TimePoint now) = 0;
  // The agent reported where task `task` of the running job writes its output and where its
  // shell socket is: stores them in that task's allocation of the placement (placement_json;
  // no event). Idempotent. FailedPrecondition unless the job is RUNNING or COMPLETING at
  // `epoch`; NotFound when the placement has no allocation for `task`.
  virtual Status recordTaskFiles(int64_t job_id, int64_t epoch, uint32_t task,
                                 const TaskFiles& files) = 0;
  // RUNNING or COMPLETING (or PENDING, for a cancel) -> `end_state` (a terminal state). Writes
  // the usage record of the run in the same transaction when the job had started.
  virtual Status recordEnd(int64_t job_id, api::JobState end_state,
                           std::optional<int32_t> exit_code, TimePoint now,
                           const std::string& reason) = 0;
  // RUNNING or COMPLETING -> PREEMPTED, recording the usage so far; with `requeue` also
  // PREEMPTED -> PENDING (a second event), clearing placement, times and exit code and counting
  // the requeue. One transaction either way.
  virtual Status recordPreemption(int64_t job_id, bool requeue, TimePoint now,
                                  const std::string& reason) = 0;
  // Sets or clears (`hold` empty) the hold of a PENDING job, with `reason` as its reason and a
  // PENDING -> PENDING event, in one transaction. NotFound for an unknown job,
  // FailedPrecondition when the job is not PENDING. recordPlacement refuses a held job.
  virtual Status setJobHold(int64_t job_id, const std::string& hold, TimePoint now,
                            const std::string& reason) = 0;
  // Records a new reason for a job that stays in `state` (why a PENDING job waits, a RUNNING
  // job's idle flag) with a `state` -> `state` event, in one transaction: no transition. NotFound
  // for an unknown job, FailedPrecondition when it is not in `state`.
  virtual Status setJobReason(int64_t job_id, api::JobState state, TimePoint now,
                              const std::string& reason) = 0;
  // Replaces the spec and priority of a PENDING job and writes a PENDING -> PENDING event, in
  // one transaction. NotFound for an unknown job, FailedPrecondition when it is not PENDING.
  virtual Status updateJob(const JobUpdate& update) = 0;
  // Moving to a terminal state sets end_time and writes the usage record; moving to PENDING
  // from another state is a requeue (placement, times and exit code cleared, requeue counted).
  // Every state change of the store (this one, recordPlacement, recordEnd, recordPreemption)
  // must be legal in api/job.h's table (api::checkJobTransition): FailedPrecondition
  // "job N: illegal job state transition FROM -> TO" otherwise, and nothing is written.
  virtual Status transitionJob(const JobTransition& transition) = 0;
  // Jobs in any of `states` (all states when empty), for rebuilding the controller's view on
  // restart. Ascending id.
  virtual Result<std::vector<JobRecord>> jobsInStates(const std::vector<api::JobState>& states) = 0;
  // How many jobs are in each state (states without jobs are absent), ordered by state name.
  virtual Result<std::vector<std::pair<api::JobState, int64_t>>> countJobsByState() = 0;
  // PENDING jobs by their pending reason (the reason of their latest transition), with the
  // submit time of the oldest; ordered by reason. For gpoold's metrics.
  virtual Result<std::vector<PendingReasonCount>> pendingByReason() = 0;

  // ---- alerts
  // Stores a new firing alert and its "fired" event in one transaction; returns its id.
  virtual Result<int64_t> fireAlert(const AlertRecord& alert) = 0;
  // Firing -> resolved at `when`, with a "resolved" event. NotFound for an unknown id,
  // FailedPrecondition when it is not firing.
  virtual Status resolveAlert(int64_t id, TimePoint when, const std::string& detail) = 0;
  // Records who acknowledged the alert, with an "acked" event. NotFound for an unknown id,
  // FailedPrecondition when already acknowledged.
  virtual Status ackAlert(int64_t id, const std::string& actor, TimePoint when) = 0;
  virtual Result<AlertRecord> getAlert(int64_t id) = 0;
  // Newest first.
  virtual Result<std::vector<AlertRecord>> listAlerts(const AlertFilter& filter) = 0;
  // Oldest first.
  virtual Result<std::vector<AlertEvent>> alertEvents(int64_t alert_id) = 0;

  // ---- GPU holds
  // Holds `hold.uuid` (a hold already there keeps its reason and time).
  virtual Status holdGpu(const GpuHold& hold) = 0;
  // Removes the hold with an audit event ("gpu clear" by `actor`) in one transaction. NotFound
  // when the GPU is not held.
  virtual Status clearGpuHold(const std::string& uuid, const std::string& actor,
                              TimePoint when) = 0;
  virtual Result<std::vector<GpuHold>> listGpuHolds() = 0;

  // ---- idle reclaim
  // Since when a RUNNING job's GPUs have been idle (controller idle reclaim), so that the idle
  // time survives a controller restart. `since` nullopt forgets it; a job without a row is not
  // known to be idle.
  virtual Status setJobIdleSince(int64_t job_id, std::optional<TimePoint> since) = 0;
  // Every job's idle-since, by job id.
  virtual Result<std::map<int64_t, TimePoint>> jobsIdleSince() = 0;

  // ---- nodes and GPUs
  virtual Status upsertNode(const NodeRecord& node) = 0;
  virtual Result<NodeRecord> getNode(const std::string& name) = 0;
  virtual Result<std::vector<NodeRecord>> listNodes() = 0;
  // Removes the node and its GPUs.
  virtual Status deleteNode(const std::string& name) = 0;
  // An admin removes a node: in one transaction the node, its GPUs, and its agent's node
  // credentials (revoked, each with a "revoke_token" audit event naming `actor`) and a
  // "remove_node" audit event. NotFound when the node does not exist.
  virtual Status removeNode(const std::string& name, TimePoint now, const std::string& actor) = 0;
  virtual Status upsertGpu(const GpuRecord& gpu) = 0;
  // A node's registration in one transaction: upserts the node and exactly `gpus` (each must
  // name this node); GPUs of the node not in `gpus` are removed.
  virtual Status registerNode(const NodeRecord& node, const std::vector<GpuRecord>& gpus) = 0;
  // GPUs of one node, or of all nodes when `node` is empty; ordered by node, index.
  virtual Result<std::vector<GpuRecord>> listGpus(const std::string& node) = 0;

  // ---- users, groups, quotas, QoS
  virtual Status upsertUser(const UserRecord& user) = 0;
  virtual Result<UserRecord> getUser(const std::string& name) = 0;
  virtual Result<std::vector<UserRecord>> listUsers() = 0;
  virtual Status upsertGroup(const GroupRecord& group) = 0;
  virtual Result<GroupRecord> getGroup(const std::string& name) = 0;
  virtual Result<std::vector<GroupRecord>> listGroups() = 0;
  // Remove a user or group together with its quota row, in one transaction (jobs keep the
  // name they were submitted under). NotFound when it does not exist.
  virtual Status deleteUser(const std::string& name) = 0;
  virtual Status deleteGroup(const std::string& name) = 0;
  // Applies `writes` in one transaction, in the order groups created, groups updated, users
  // updated, groups deleted; the first write that fails (see CatalogWrites) undoes them all and
  // is the result.
  virtual Status writeCatalog(const CatalogWrites& writes) = 0;
  // Sets (replaces) a quota and writes an audit event naming `actor`, in one transaction. The
  // user or group must exist.
  virtual Status setQuota(const QuotaRecord& quota, const std::string& actor) = 0;
  virtual Result<QuotaRecord> getQuota(QuotaSubject subject, const std::string& name) = 0;
  virtual Result<std::vector<QuotaRecord>> listQuotas() = 0;
  // Removes a quota and writes a "delete_quota" audit event naming `actor`, in one
  // transaction. NotFound when no quota is set.
  virtual Status deleteQuota(QuotaSubject subject, const std::string& name,
                             const std::string& actor, TimePoint now) = 0;
  // Audit events with seq > `after_seq`, oldest first, at most `limit` (1..kMaxPageSize).
  virtual Result<std::vector<AuditEvent>> auditEvents(int64_t after_seq, int32_t limit) = 0;
  // Appends one audit event of something done outside the store (an agent's kill of a stray
  // process); `event.seq` is ignored (the store numbers it). InvalidArgument when `actor` or
  // `action` is empty.
  virtual Status recordAuditEvent(const AuditEvent& event) = 0;
  virtual Status upsertQos(const QosRecord& qos) = 0;
  virtual Result<std::vector<QosRecord>> listQos() = 0;
  // NotFound when no such QoS exists.
  virtual Status deleteQos(const std::string& name) = 0;

  // ---- API tokens
  // Returns the new token's id and writes a "create_token" audit event naming `actor`, in one
  // transaction. AlreadyExists when the hash is already stored.
  virtual Result<int64_t> createToken(const TokenRecord& token, const std::string& actor) = 0;
  // The token with this hash, revoked or not (the caller checks `revoked` and `expires`).
  virtual Result<TokenRecord> findToken(const std::string& hash) = 0;
  // NotFound for an unknown id.
  virtual Result<TokenRecord> getToken(int64_t id) = 0;
  // Sets `revoked` (the first revocation's time stays) and writes a "revoke_token" audit event
  // naming `actor`, in one transaction. NotFound for an unknown id.
  virtual Status revokeToken(int64_t id, TimePoint now, const std::string& actor) = 0;
  // The tokens of `user` (every token when `user` is empty), ascending id.
  virtual Result<std::vector<TokenRecord>> listTokens(const std::string& user) = 0;
  // Records that the token was used at `now` (last_used). NotFound for an unknown id.
  virtual Status touchToken(int64_t id, TimePoint now) = 0;
  // An agent joins with join token `join_token_id` as node `credential.node`: in one
  // transaction checks the join token (kind "join", not revoked, not expired at `now`, unused
  // unless reusable), counts the use, stores `credential` (kind "node") and writes a
  // "join_node" audit event. Returns the credential's id. FailedPrecondition naming what is
  // wrong with the join token. A join token without a node (TokenRecord::node) admits new
  // names only: AlreadyExists when the node is registered or holds a credential that is not
  // revoked. One bound to a node by an admin admits that node only, existing or not, and
  // revokes the node's earlier credentials in the same transaction.
  virtual Result<int64_t> joinNode(int64_t join_token_id, const TokenRecord& credential,
                                   TimePoint now) = 0;

  // ---- accounting
  virtual Result<std::vector<UsageRecord>> usageOfJob(int64_t job_id) = 0;
  // GPU-hours per user or group over [from, to), counting only the part of each record that
  // lies inside the period. Ordered by key.
  virtual Result<std::vector<UsageRow>> usageReport(UsageGrouping grouping, TimePoint from,
                                                    TimePoint to) = 0;

  // ---- telemetry history
  virtual Status recordTelemetry(const std::vector<TelemetrySample>& samples) = 0;
  // Samples of one GPU in [from, to) at `resolution` (averages carry the bucket's start time and
  // the job only when one job held the GPU for the whole bucket). Ascending time.
  virtual Result<std::vector<TelemetrySample>> gpuTelemetry(const std::string& gpu_uuid,
                                                            TelemetryResolution resolution,
                                                            TimePoint from, TimePoint to) = 0;
  // Samples of one job (all its GPUs) in [from, to) at `resolution`, ascending time, then GPU.
  // Averages count only buckets in which the job held the GPU alone.
  virtual Result<std::vector<TelemetrySample>> jobTelemetry(int64_t job_id,
                                                            TelemetryResolution resolution,
                                                            TimePoint from, TimePoint to) = 0;
  virtual Status recordTaskTelemetry(const std::vector<TaskTelemetrySample>& samples) = 0;
  // Samples of every task of one job in [from, to) at `resolution`, ordered by task, then time
  // (averages carry the bucket's start time).
  virtual Result<std::vector<TaskTelemetrySample>> taskTelemetry(int64_t job_id,
                                                                 TelemetryResolution resolution,
                                                                 TimePoint from, TimePoint to) = 0;
  // Downsamples and bounds the history of GPUs and of tasks alike: raw samples older than
  // `retention.raw` are folded into 5-minute averages, those older than
  // `retention.five_minutes` into hourly ones, and hourly ones older than `retention.hourly`
  // are deleted. One transaction; idempotent.
  virtual Status pruneTelemetry(TimePoint now, const TelemetryRetention& retention) = 0;

  // ---- test hooks
  // Makes the `n`-th SQL statement from now (1 = the next one) fail with an IoError, so tests
  // can check that a failure inside a transaction leaves nothing half-written. 0 disables.
  virtual void failStatementForTest(int n) = 0;
};

using StorePtr = std::unique_ptr<Store>;

// The schema version this binary writes. A store with a newer version is refused on open.
inline constexpr int32_t kSchemaVersion = 10;

}  // namespace gpool::store
