#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/status.h"

// The controller <-> agent protocol of docs/agent-protocol.md, once for both sides: plain
// message structs and their one JSON encoder and strict decoder. gpoold (src/controller/
// agent_link.cc) and gpool-agent (src/agent/agent.cc) both speak through this module, so the
// two ends cannot drift apart; tests, the fuzz targets and the system-test harness can build
// and read every frame without a daemon or root.
//
// Encoding: `nlohmann::json toJson(const M&)` writes a message body (or a part of one);
// `encodeMessage(m, seq, ack)` wraps a body in its envelope. Decoding: `Status fromJson(const
// nlohmann::json&, M*, std::string_view path)` reads one strictly (found by argument-dependent
// lookup, so api::ObjectReader nests them): unknown fields, wrong types and out-of-range values
// are InvalidArgument naming their path ("tasks[2].launch.uid: ..."); `decodeBody<M>` reads a
// whole body. Encoding a struct and decoding the result gives back an equal struct (tests/
// protocol/agent_protocol_test.cc checks every message).
//
// Pure functions over values; no I/O, no clock, no globals. Nothing throws. Thread-safe.
namespace gpool::protocol {

// The version this build speaks (`v` of every envelope).
inline constexpr int kVersion = 1;

// The most log bytes one `read_log` may ask for and one `log_data` may carry.
inline constexpr int64_t kMaxLogReadBytes = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Envelope: {"v": 1, "type": "...", "seq": N, "ack": N, "body": {...}}

struct Envelope {
  int v = kVersion;
  std::string type;
  int64_t seq = 0;
  int64_t ack = 0;
  nlohmann::json body = nlohmann::json::object();
};

// Reads an envelope strictly. A version above kVersion is FailedPrecondition naming both
// versions, checked before anything else (a newer peer's frames may not decode as ours); other
// problems are InvalidArgument naming the field ("seq: expected an integer", "body: required
// field is missing").
Result<Envelope> decodeEnvelope(const nlohmann::json& msg);

nlohmann::json encodeEnvelope(std::string_view type, int64_t seq, int64_t ack, nlohmann::json body);

// The `seq` of a frame that may not decode (for the `in_reply_to` of an error answer); 0 when
// absent or not an integer.
int64_t peekSeq(const nlohmann::json& msg);

// ---------------------------------------------------------------------------------------------
// Identifiers

// The fencing identity of one attempt of one task: (job_id, task) names the task, `attempt`
// counts its requeues, `lease_epoch` is the fencing token (strictly increasing per task), and
// `incarnation` is the store incarnation the attempt was placed under (docs/store.md): a job id
// names one job only within the pool's life since a restore, so two assignments are the same
// attempt only when all of them are equal. On the wire `attempt` and `incarnation` are
// optional (0; an incarnation of 0 is written by stores from before incarnations).
struct Assignment {
  int64_t job_id = 0;
  uint32_t task = 0;
  int32_t attempt = 0;
  int64_t lease_epoch = 0;  // >= 1 on the wire
  int64_t incarnation = 0;

  bool operator==(const Assignment&) const = default;
};
Status fromJson(const nlohmann::json& j, Assignment* out, std::string_view path);
nlohmann::json toJson(const Assignment& a);
// "<job_id>.<task>": the launcher's task name on the node.
std::string taskName(const Assignment& a);
std::string taskName(int64_t job_id, uint32_t task);

// ---------------------------------------------------------------------------------------------
// Agent -> controller

// hello.node
// hello.node.slices: how the node holds GPU slices to their limits (docs/agent.md, "Slice
// enforcement"). A node enforces them when both are true; gpoold places slices only there.
struct SliceEnforcement {
  bool interposer = false;  // an interposer is configured and a process preloaded with it starts
  bool backstop = false;    // the agent ends slice tasks holding more than their quota
  std::string detail;       // for people: the interposer's path, or why it is not usable

  bool operator==(const SliceEnforcement&) const = default;
};
Status fromJson(const nlohmann::json& j, SliceEnforcement* out, std::string_view path);
nlohmann::json toJson(const SliceEnforcement& s);

struct NodeInfo {
  std::string name;      // required; the controller checks it as a node name
  std::string hostname;  // how the other servers reach it (a multi-task job's MASTER_ADDR)
  std::map<std::string, std::string> labels;
  uint64_t cpu_millis = 0;
  uint64_t ram_mib = 0;
  std::string agent_version;
  std::string os;
  std::string cgroup;
  // Absent from an agent older than the field: gpoold counts such a node as not enforcing.
  std::optional<SliceEnforcement> slices;

  bool operator==(const NodeInfo&) const = default;
};
Status fromJson(const nlohmann::json& j, NodeInfo* out, std::string_view path);
nlohmann::json toJson(const NodeInfo& n);

// hello.gpus: the node's inventory, as gpu::toJson(Inventory) has always written it.
struct MigInstance {
  std::string uuid;
  std::string profile;
  uint64_t gpu_instance_id = 0;
  uint64_t compute_instance_id = 0;
  uint64_t memory_mib = 0;

  bool operator==(const MigInstance&) const = default;
};
Status fromJson(const nlohmann::json& j, MigInstance* out, std::string_view path);
struct GpuInfo {
  std::string uuid;  // required, not empty
  uint32_t index = 0;
  std::string pci_bus_id;
  std::string model;
  uint64_t memory_total_mib = 0;
  std::string compute_capability;  // "8.0"; "" and "0.0" mean unknown; else it must parse
  bool mig_enabled = false;
  std::vector<MigInstance> mig_instances;
  bool simulated = false;

  bool operator==(const GpuInfo&) const = default;
};
Status fromJson(const nlohmann::json& j, GpuInfo* out, std::string_view path);
struct GpuLinkInfo {
  uint32_t gpu_a = 0;  // GPU indexes (GpuInfo::index), both in the inventory
  uint32_t gpu_b = 0;
  std::string level;  // "X" (itself), "NV<n>", or a PCIe level ("PIX", "PXB", "PHB", "SYS", ...)
  uint32_t nvlink_count = 0;

  bool operator==(const GpuLinkInfo&) const = default;
};
Status fromJson(const nlohmann::json& j, GpuLinkInfo* out, std::string_view path);
struct Inventory {
  std::string backend;
  bool simulated = false;
  std::string driver_version;
  std::string cuda_driver_version;
  std::vector<GpuInfo> gpus;  // at most 1024, indexes distinct
  std::vector<GpuLinkInfo> links;

  bool operator==(const Inventory&) const = default;
};
Status fromJson(const nlohmann::json& j, Inventory* out, std::string_view path);
nlohmann::json toJson(const Inventory& inventory);

enum class TaskPhase { kStarting, kRunning, kExited };
std::string_view taskPhaseName(TaskPhase phase);  // "starting", "running", "exited"

// A task as the agent reports it: each entry of `hello.tasks`, and the body of `task_update`.
// The end fields are encoded only for an exited task.
struct TaskReport {
  std::optional<Assignment> assignment;  // none: a task found without its assignment file
  std::string name;                      // "<job>.<task>" in hello; not sent in task_update
  TaskPhase state = TaskPhase::kStarting;
  std::string final_state;  // the launcher's word: RUNNING, COMPLETED, FAILED, ...
  int64_t pid = 0;
  int64_t started_at_us = 0;
  std::vector<std::string> log_paths;  // [stdout, stderr] on the node, or none
  std::string shell_socket;            // the agent's socket for `gpool shell`; "" none
  // Once exited:
  int64_t ended_at_us = 0;
  int64_t exit_code = -1;  // -1: it did not exit normally
  int64_t signal = 0;
  bool oom_killed = false;
  bool timed_out = false;
  bool cancelled = false;
  std::string reason;       // the agent's words for the end; "" none
  std::string stop_reason;  // cancelled, preempted, timeout, fenced: when the agent stopped it

  bool operator==(const TaskReport&) const = default;
};
Status fromJson(const nlohmann::json& j, TaskReport* out, std::string_view path);
nlohmann::json toJson(const TaskReport& report);

struct Hello {
  static constexpr std::string_view kType = "hello";
  NodeInfo node;
  Inventory gpus;
  std::vector<TaskReport> tasks;
  int64_t last_node_epoch = 0;

  bool operator==(const Hello&) const = default;
};
Status fromJson(const nlohmann::json& j, Hello* out, std::string_view path);
nlohmann::json toJson(const Hello& m);

struct Heartbeat {
  static constexpr std::string_view kType = "heartbeat";
  int64_t time_us = 0;
  bool lease_ok = false;  // the agent's view of its lease
  // An optional `telemetry` object is accepted and ignored (reserved; telemetry has its own
  // message).

  bool operator==(const Heartbeat&) const = default;
};
Status fromJson(const nlohmann::json& j, Heartbeat* out, std::string_view path);
nlohmann::json toJson(const Heartbeat& m);

// task_update: one report; its assignment is required.
struct TaskUpdate {
  static constexpr std::string_view kType = "task_update";
  TaskReport report;

  bool operator==(const TaskUpdate&) const = default;
};
Status fromJson(const nlohmann::json& j, TaskUpdate* out, std::string_view path);
nlohmann::json toJson(const TaskUpdate& m);

// telemetry (gpu::toJson(TelemetrySample), processes of running tasks tagged with their task).
struct GpuProcessSample {
  int64_t pid = 0;
  uint64_t used_mib = 0;
  std::optional<int64_t> job_id;
  std::optional<uint32_t> task;

  bool operator==(const GpuProcessSample&) const = default;
};
Status fromJson(const nlohmann::json& j, GpuProcessSample* out, std::string_view path);
// What the interposer's region of one slice task on this GPU says (docs/vgpu-shm.md): the
// share of the GPU's compute the task used over the last control period, its kernel (and
// graph) launches so far, and how long ago the agent last saw that count grow (none: no launch
// seen yet). A duration, not a time: agent and controller clocks need not agree.
struct SliceUsageSample {
  int64_t job_id = 0;
  uint32_t task = 0;
  uint32_t compute_used_permille = 0;  // of the whole GPU, 0..1000
  uint64_t kernel_launches = 0;
  std::optional<int64_t> since_last_launch_us;

  bool operator==(const SliceUsageSample&) const = default;
};
Status fromJson(const nlohmann::json& j, SliceUsageSample* out, std::string_view path);
struct GpuSample {
  std::string uuid;  // required, not empty
  uint32_t index = 0;
  uint32_t utilization_pct = 0;
  uint32_t memory_utilization_pct = 0;
  uint64_t memory_used_mib = 0;
  uint64_t memory_total_mib = 0;
  int32_t temperature_c = 0;
  double power_w = 0;
  uint32_t sm_clock_mhz = 0;
  uint32_t memory_clock_mhz = 0;
  std::optional<uint64_t> ecc_corrected;  // none: the GPU does not count (null on the wire)
  std::optional<uint64_t> ecc_uncorrected;
  std::vector<uint32_t> xid_errors;  // XIDs since the previous sample
  std::vector<GpuProcessSample> processes;
  std::vector<SliceUsageSample> slices;  // slice tasks under the interposer on this GPU

  bool operator==(const GpuSample&) const = default;
};
Status fromJson(const nlohmann::json& j, GpuSample* out, std::string_view path);
nlohmann::json toJson(const GpuSample& g);
struct Telemetry {
  static constexpr std::string_view kType = "telemetry";
  int64_t taken_at_us = 0;
  bool simulated = false;
  std::vector<GpuSample> gpus;

  bool operator==(const Telemetry&) const = default;
};
Status fromJson(const nlohmann::json& j, Telemetry* out, std::string_view path);
nlohmann::json toJson(const Telemetry& m);

// health (gpu::toJson(Finding) plus the action the agent took).
struct Finding {
  std::string check;  // required
  std::string severity;
  std::string gpu_uuid;  // "": about the server itself
  int64_t pid = 0;
  int64_t used_mib = 0;
  bool unhealthy = false;
  std::string message;
  std::string action;  // "reported", "killed", "kill failed: ..."; "" none
  std::string user;    // a process finding: who runs it ("#<uid>" without a name; "" unknown)

  bool operator==(const Finding&) const = default;
};
Status fromJson(const nlohmann::json& j, Finding* out, std::string_view path);
nlohmann::json toJson(const Finding& f);

struct Health {
  static constexpr std::string_view kType = "health";
  std::vector<Finding> findings;  // at most 100,000
  int64_t time_us = 0;

  bool operator==(const Health&) const = default;
};
Status fromJson(const nlohmann::json& j, Health* out, std::string_view path);
nlohmann::json toJson(const Health& m);

// log_data: the answer to one read_log. `data` holds the bytes (base64 on the wire, at most
// kMaxLogReadBytes); `error` set means the log could not be served.
struct LogData {
  static constexpr std::string_view kType = "log_data";
  int64_t request = 0;
  int64_t job_id = 0;
  uint32_t task = 0;
  int64_t lease_epoch = 0;
  std::string stream;  // "stdout" or "stderr"
  int64_t offset = 0;
  bool found = false;
  int64_t size = 0;
  std::string data;
  std::string error;

  bool operator==(const LogData&) const = default;
};
Status fromJson(const nlohmann::json& j, LogData* out, std::string_view path);
nlohmann::json toJson(const LogData& m);

// error: either side, about a frame it received.
struct Error {
  static constexpr std::string_view kType = "error";
  std::string code;  // invalid_argument, unimplemented, failed_precondition, stale_epoch, ...
  std::string message;
  int64_t in_reply_to = 0;  // the seq of the frame; 0 when unknown

  bool operator==(const Error&) const = default;
};
Status fromJson(const nlohmann::json& j, Error* out, std::string_view path);
nlohmann::json toJson(const Error& m);

// ---------------------------------------------------------------------------------------------
// Controller -> agent

struct LeaseTerms {
  int64_t duration_s = 60;
  std::optional<int64_t> renew_every_s;
  // How long a fenced task gets between SIGTERM at the lease's end and SIGKILL; none: the
  // agent's default. The controller counts it in before it runs a lost node's work elsewhere.
  std::optional<int64_t> fence_grace_s;

  bool operator==(const LeaseTerms&) const = default;
};
Status fromJson(const nlohmann::json& j, LeaseTerms* out, std::string_view path);
struct WelcomeConfig {
  std::optional<int64_t> heartbeat_interval_s;
  std::optional<int64_t> telemetry_interval_s;
  std::optional<std::string> stray_policy;  // "report" or "kill"
  // How long a stray lasts before the policy acts on it (the agent's default: 30 s).
  std::optional<int64_t> stray_grace_s;

  bool operator==(const WelcomeConfig&) const = default;
};
Status fromJson(const nlohmann::json& j, WelcomeConfig* out, std::string_view path);

struct Welcome {
  static constexpr std::string_view kType = "welcome";
  int64_t node_epoch = 0;
  std::string node_credential;  // a TLS node's first join only; "" none
  std::optional<LeaseTerms> lease;
  std::optional<WelcomeConfig> config;

  bool operator==(const Welcome&) const = default;
};
Status fromJson(const nlohmann::json& j, Welcome* out, std::string_view path);
nlohmann::json toJson(const Welcome& m);

struct SliceTerms {
  uint64_t memory_mib = 0;
  uint32_t compute_milli = 0;

  bool operator==(const SliceTerms&) const = default;
};
Status fromJson(const nlohmann::json& j, SliceTerms* out, std::string_view path);
struct RendezvousTerms {
  std::string master_addr;
  uint16_t master_port = 0;
  uint32_t world_size = 0;
  uint32_t rank = 0;
  uint32_t local_rank = 0;
  uint32_t node_rank = 0;

  bool operator==(const RendezvousTerms&) const = default;
};
Status fromJson(const nlohmann::json& j, RendezvousTerms* out, std::string_view path);
// What to run: `launch` of a task entry. Absent numbers are 0 (none / the agent's default).
struct Launch {
  std::vector<std::string> argv;  // required, not empty
  std::map<std::string, std::string> env;
  std::string working_dir;
  std::string user;  // required
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  uint64_t cpus_milli = 0;
  uint64_t memory_mib = 0;
  uint64_t pids_max = 0;
  std::vector<std::string> gpus;    // UUIDs; the agent resolves them against its inventory
  std::optional<SliceTerms> slice;  // a shared slice of exactly one GPU
  std::optional<RendezvousTerms> rendezvous;
  int64_t time_limit_seconds = 0;
  std::optional<int64_t> grace_seconds;  // none: the agent's default
  // A containerised task (docs/containers.md): its image, and bind mounts "SRC:DST[:ro]".
  // Empty image: a bare task.
  std::string image;
  std::vector<std::string> mounts;
  // The job's group's project directory (created by the agent, owned by project_gid).
  std::string project_dir;
  std::optional<uint32_t> project_gid;

  bool operator==(const Launch&) const = default;
};
Status fromJson(const nlohmann::json& j, Launch* out, std::string_view path);
nlohmann::json toJson(const Launch& l);
// One entry of `desired_state.tasks`, and the body of `assign`.
struct TaskEntry {
  Assignment assignment;
  bool requeueable = false;
  Launch launch;

  bool operator==(const TaskEntry&) const = default;
};
Status fromJson(const nlohmann::json& j, TaskEntry* out, std::string_view path);
nlohmann::json toJson(const TaskEntry& e);

struct DesiredState {
  static constexpr std::string_view kType = "desired_state";
  int64_t node_epoch = 0;
  std::vector<TaskEntry> tasks;
  bool drain = false;

  bool operator==(const DesiredState&) const = default;
};
Status fromJson(const nlohmann::json& j, DesiredState* out, std::string_view path);
nlohmann::json toJson(const DesiredState& m);

// assign: one task entry plus the node epoch it was sent under, side by side in one object.
struct Assign {
  static constexpr std::string_view kType = "assign";
  std::optional<int64_t> node_epoch;
  TaskEntry entry;

  bool operator==(const Assign&) const = default;
};
Status fromJson(const nlohmann::json& j, Assign* out, std::string_view path);
nlohmann::json toJson(const Assign& m);

struct Cancel {
  static constexpr std::string_view kType = "cancel";
  Assignment assignment;  // the attempt stopped; never a newer one
  std::string signal = "TERM";
  std::optional<int64_t> grace_s;    // none: the agent's default
  std::string reason = "cancelled";  // cancelled, preempted, timeout, node_fail

  bool operator==(const Cancel&) const = default;
};
Status fromJson(const nlohmann::json& j, Cancel* out, std::string_view path);
nlohmann::json toJson(const Cancel& m);

struct ReadLog {
  static constexpr std::string_view kType = "read_log";
  int64_t request = 0;  // an id the answer repeats
  int64_t job_id = 0;
  uint32_t task = 0;
  int64_t lease_epoch = 0;  // the attempt whose log is wanted
  std::string stream;       // "stdout" or "stderr"
  int64_t offset = 0;
  int64_t max_bytes = 0;    // 1 .. kMaxLogReadBytes
  int64_t incarnation = 0;  // the attempt's store incarnation; 0: not said (any)

  bool operator==(const ReadLog&) const = default;
};
Status fromJson(const nlohmann::json& j, ReadLog* out, std::string_view path);
nlohmann::json toJson(const ReadLog& m);

// task_ack: the controller has applied one task report (a `task_update`, or a task of
// `hello`) for good: committed to its store, or found to need nothing recorded (a stale or no
// longer current assignment, an end recorded already). The agent re-sends a task's latest
// report until the ack for its assignment and state arrives (docs/agent-protocol.md).
struct TaskAck {
  static constexpr std::string_view kType = "task_ack";
  Assignment assignment;  // as the report carried it
  TaskPhase state = TaskPhase::kRunning;

  bool operator==(const TaskAck&) const = default;
};
Status fromJson(const nlohmann::json& j, TaskAck* out, std::string_view path);
nlohmann::json toJson(const TaskAck& m);

struct Lease {
  static constexpr std::string_view kType = "lease";
  int64_t node_epoch = 0;
  int64_t valid_until_us = 0;  // the controller's clock, informational for the agent
  // The `seq` of the heartbeat this answers: the agent counts the renewed lease from when it
  // sent that heartbeat.
  int64_t renews = 0;

  bool operator==(const Lease&) const = default;
};
Status fromJson(const nlohmann::json& j, Lease* out, std::string_view path);
nlohmann::json toJson(const Lease& m);

// ---------------------------------------------------------------------------------------------
// Whole messages

// The frame of message `m` with sequence number `seq` and acknowledgement `ack`.
template <typename M>
nlohmann::json encodeMessage(const M& m, int64_t seq, int64_t ack) {
  return encodeEnvelope(M::kType, seq, ack, toJson(m));
}

// Reads the body of a message of type M strictly; errors name fields relative to the body
// ("node.name: ..."); callers prefix "body." when they answer with an error frame.
template <typename M>
Result<M> decodeBody(const nlohmann::json& body) {
  M m;
  Status s = fromJson(body, &m, "");
  if (!s.isOk()) return s;
  return m;
}

}  // namespace gpool::protocol
