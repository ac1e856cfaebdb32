#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "controller/agent_gateway.h"
#include "controller/alerts.h"
#include "controller/node_registry.h"
#include "controller/scheduling_loop.h"
#include "controller/telemetry_history.h"
#include "net/router.h"
#include "net/websocket.h"
#include "protocol/agent_protocol.h"
#include "store/store.h"

// The controller's end of docs/agent-protocol.md: the `/v1/agent` WebSocket route and the
// AgentGateway the scheduling loop sends `assign` / `cancel` through. Frames are encoded and
// decoded by the protocol module (src/protocol/agent_protocol.h) that the agent uses too.
//
// Per connection: the agent's `hello` registers its node and GPUs with the NodeRegistry (a new
// node epoch), applies the tasks it reports, and is answered with `welcome` (node epoch, lease,
// heartbeat interval) and a full `desired_state` (every task the store says runs on the node,
// under its current lease epoch). `task_update` reports move jobs through the SchedulingLoop
// (running -> taskStarted, exited -> taskEnded); a report under a stale epoch changes nothing
// and a still running stale task is told to stop (`cancel`). Each report (of task_update and
// of hello) is answered with `task_ack` once settled: committed, or needing nothing recorded;
// one the store could not write is not, and the agent sends it again. `heartbeat` renews the node
// in the registry and is answered with `lease`. `telemetry` frames go to the TelemetryHistory (when
// attached), attributed to the tasks the store places on each GPU, and its finished minutes to
// the store (pruned every `telemetry_prune_every`); `health` findings set each GPU's health in
// the NodeRegistry (an unhealthy GPU receives no new work; a GPU without findings is healthy
// again) and wake the scheduling loop.
// Bad frames are answered with `error` naming the field; a higher protocol version closes the
// connection with 4001; a newer connection for the same node closes the older with 4009.
//
// Delivery: `assign` / `cancel` go to the node's current connection, if any; when the node is
// not connected nothing is queued, because the next `hello` gets the full desired state from
// the store (level-triggered).
//
// Thread-safety: the WebSocket callbacks run on the server's I/O threads (one at a time per
// connection, several connections concurrently); `assign` and `cancel` come from the
// scheduling loop's thread and API threads. Every method may be called from any thread: one
// mutex guards the connection table and each connection's sequence numbers, and is never held
// while calling into the SchedulingLoop or the NodeRegistry (the loop calls `assign` with its
// own lock held). Sending never blocks (net::WebSocketConnection::send queues).
namespace gpool::controller {

struct AgentLinkOptions {
  // The lease granted in `welcome` and renewed by every heartbeat answer; must be shorter than
  // the registry's down_after.
  int64_t lease_duration_s = 60;
  // The heartbeat interval the agents are told to use (also the lease's renew_every_s).
  int64_t heartbeat_interval_s = 5;
  // The lease's fence grace (welcome.lease.fence_grace_s): SIGTERM at the lease's end, SIGKILL
  // this much later, for the tasks the lease fences.
  int64_t fence_grace_s = 5;
  // Unix-socket peers allowed to open /v1/agent besides uid 0: gpoold's own uid.
  uint32_t own_uid = 0;
  // The telemetry interval the agents are told to use.
  int64_t telemetry_interval_s = 10;
  // What the agents do with stray GPU processes: "report" or "kill" (welcome's config).
  std::string stray_policy = "report";
  // How long a stray lasts before that policy acts (welcome's config).
  int64_t stray_grace_s = 30;
  // How long the stored telemetry history is kept (store::pruneTelemetry), and how often it is
  // pruned.
  store::TelemetryRetention telemetry_retention;
  Micros telemetry_prune_every{std::chrono::minutes(10)};
};

// Close codes of docs/agent-protocol.md.
inline constexpr uint16_t kCloseUnsupportedVersion = 4001;
inline constexpr uint16_t kCloseForbidden = 4003;  // node credential for another node; join refused
inline constexpr uint16_t kCloseTakenOver = 4009;
inline constexpr uint16_t kCloseNodeDown = 4010;

// Log reads relayed to agents (LogRelay): at most this many wait for an answer or to be taken
// at once (each answer holds at most kMaxRelayedLogBytes), and an answer not taken, or a
// request not answered, within kRelayedLogExpiry is dropped (the next ask sends it again).
inline constexpr size_t kMaxRelayedLogReads = 64;
inline constexpr uint64_t kMaxRelayedLogBytes = protocol::kMaxLogReadBytes;
inline constexpr Micros kRelayedLogExpiry{std::chrono::seconds(30)};

class AgentLink final : public AgentGateway, public LogRelay {
 public:
  // `store`, `registry` and `clock` must outlive the link. Call attach() before serving.
  AgentLink(store::Store& store, NodeRegistry& registry, Clock& clock, AgentLinkOptions options);
  ~AgentLink() override;

  // The loop that task reports go to (it takes this gateway in its constructor, hence the
  // separate step). Must be called before the route serves its first connection; `loop` must
  // outlive the server.
  void attach(SchedulingLoop& loop);
  // Where `telemetry` frames go; without it they are accepted and dropped. Call before serving;
  // `telemetry` must outlive the server.
  void attachTelemetry(TelemetryHistory& telemetry);

  // Adds `/v1/agent` to `router`. Unix-socket peers other than uid 0 and own_uid are refused
  // (403 before the upgrade); token (TLS) peers need a join token or a node credential
  // (api_tokens.h): the first hello with a join token gets a node credential in `welcome`.
  Status addRoute(net::Router& router);

  // AgentGateway.
  void assign(const TaskAssignment& assignment) override;
  void cancel(const std::string& node, int64_t job_id, uint32_t task, int64_t lease_epoch,
              int64_t grace_s, const std::string& reason) override;

  // LogRelay: sends `read_log` to the node's current connection; `log_data` answers it.
  Result<std::optional<RemoteLogPiece>> readRemoteLog(const RemoteLogRequest& request) override;

  // Nodes with a connection that said hello (for tests and the nodes view).
  bool connected(const std::string& node) const;
  // How many nodes have a connection that said hello (metrics).
  size_t connectedCount() const;
  // The findings of every node's latest `health` message, by node (the alert engine's input).
  std::map<std::string, std::vector<HealthFinding>> healthFindings() const;
  // The tasks agents reported that the store never placed (UnknownTask; after a restore from a
  // backup), those still running and those stopped within the last day; the alert engine's
  // input. Thread-safe.
  std::vector<UnknownTask> unknownTasks() const;
  // Sets the health of `node`'s GPUs from its agent's latest findings again (after an admin
  // cleared a hold: the GPU takes what its agent reports now).
  Status reapplyHealth(const std::string& node);
  // Closes the connection of `node`'s agent, if any, with 4003 and `why` (an admin removed the
  // node). Thread-safe.
  void disconnect(const std::string& node, const std::string& why);

  // The entries of a `desired_state` for `node`: every task of a RUNNING or COMPLETING job
  // placed there, with its launch description. Store errors are returned.
  Result<std::vector<protocol::TaskEntry>> desiredTasks(const std::string& node,
                                                        int64_t node_epoch);

  // The address a node's peers reach it by: the hostname of its last hello, else its name.
  // Thread-safe.
  std::string addressOf(const std::string& node) const;

 private:
  struct Session;
  using SessionPtr = std::shared_ptr<Session>;

  Status acceptPeer(const net::Request& request) const;
  void onOpen(const net::WebSocketConnectionPtr& conn);
  void onMessage(const net::WebSocketConnectionPtr& conn, const std::string& text);
  void onClose(const net::WebSocketConnectionPtr& conn);

  SessionPtr sessionFor(uint64_t id) const;
  // Encodes and queues one message on `session` with the next sequence number.
  template <typename M>
  void send(const SessionPtr& session, const M& m) {
    sendFrame(session, M::kType, protocol::toJson(m));
  }
  void sendFrame(const SessionPtr& session, std::string_view type, nlohmann::json body);
  void sendError(const SessionPtr& session, std::string_view code, std::string_view message,
                 int64_t in_reply_to);
  // The session currently serving `node`, or null.
  SessionPtr current(const std::string& node) const;

  Status onHello(const SessionPtr& session, const protocol::Hello& m);
  Status onHeartbeat(const SessionPtr& session, const protocol::Heartbeat& m, int64_t seq);
  Status onTaskUpdate(const SessionPtr& session, const protocol::TaskUpdate& m);
  Status onTelemetry(const SessionPtr& session, const protocol::Telemetry& m);
  Status onHealth(const SessionPtr& session, const protocol::Health& m);
  // Writes the audit event (and a log line) of a process the agent of `node` killed.
  void auditKill(const std::string& node, const HealthFinding& f);
  Status onLogData(const SessionPtr& session, const protocol::LogData& m);
  // The registry's GPU health from a node's findings (onHealth, reapplyHealth).
  Status applyHealth(const std::string& node, const std::vector<HealthFinding>& findings);
  // The tasks holding each GPU of `node`, from the store's running jobs (read at most once a
  // second for all nodes together).
  Result<std::map<std::string, std::vector<GpuTenant>>> tenantsOf(const std::string& node);

  // Applies one reported task (from hello or task_update) to the loop and acknowledges it
  // (`task_ack`) once it is settled; a report without an assignment changes nothing.
  void applyReport(const SessionPtr& session, const protocol::TaskReport& report);
  // applyReport's work: true when the report is settled for good (committed to the store, or
  // nothing to record: stale, no longer current, an end recorded already), false when the
  // store failed or, for a task of a job whose other tasks run on, its end is only in memory.
  // REQUIRES: report.assignment is set.
  bool settleReport(const SessionPtr& session, const protocol::TaskReport& report);
  // Stores the report's log paths and shell socket in the task's allocation (best effort);
  // false when the store could not write them (tried again at the next report).
  // REQUIRES: report.assignment is set.
  bool recordTaskFiles(int64_t job_id, const protocol::TaskReport& report, const std::string& what);

  store::Store& store_;
  NodeRegistry& registry_;
  Clock& clock_;
  AgentLinkOptions options_;
  SchedulingLoop* loop_ = nullptr;
  TelemetryHistory* telemetry_ = nullptr;

  mutable std::mutex mu_;
  std::map<uint64_t, SessionPtr> sessions_;        // by connection id
  std::map<std::string, std::string> hostnames_;   // each node's hostname from its last hello
  std::map<std::string, SessionPtr> by_node_;      // the connection serving each node
  std::set<std::pair<int64_t, int64_t>> started_;  // (job, epoch) reported running
  // (job, epoch, task) whose files (logs, shell socket) were recorded: every task of a
  // multi-task job has its own, recorded on its first `running` report.
  std::set<std::tuple<int64_t, int64_t, uint32_t>> files_recorded_;
  std::map<std::pair<int64_t, uint32_t>, int64_t> task_pids_;  // (job, task) -> reported pid

  // tenantsOf's cache: by node, by GPU; refreshed when older than a second (monotonic).
  std::mutex tenants_mu_;
  std::optional<Micros> tenants_read_at_;
  std::map<std::string, std::map<std::string, std::vector<GpuTenant>>> tenants_;
  // When the stored telemetry was last pruned (monotonic); guarded by tenants_mu_.
  std::optional<Micros> pruned_at_;

  mutable std::mutex findings_mu_;
  std::map<std::string, std::vector<HealthFinding>> findings_;

  // unknownTasks(): by (node, job, task, incarnation, epoch). Entries stopped more than a day
  // ago are dropped when another is added.
  using UnknownKey = std::tuple<std::string, int64_t, uint32_t, int64_t, int64_t>;
  mutable std::mutex unknown_mu_;
  std::map<UnknownKey, UnknownTask> unknown_;
  // Records (or updates) a report of a task the store never placed; logs it at warning level
  // the first time and when it ends.
  void noteUnknownTask(const std::string& node, const protocol::TaskReport& report,
                       const Result<store::JobRecord>& record);

  // Relayed log reads, by (job, task, stderr, offset): the request on its way or its answer.
  struct LogRead {
    int64_t request_id = 0;
    std::string node;
    uint64_t connection = 0;  // the connection it was sent on: a reconnected agent never answers
    int64_t lease_epoch = 0;
    Micros changed_at{0};  // monotonic: when sent, then when answered
    bool answered = false;
    Result<RemoteLogPiece> answer = RemoteLogPiece{};
  };
  using LogKey = std::tuple<int64_t, uint32_t, bool, uint64_t>;
  std::mutex logs_mu_;  // never held while sending (send takes mu_)
  std::map<LogKey, LogRead> log_reads_;
  int64_t next_log_request_ = 0;
};

// The torchrun/NCCL rendezvous of one task of a multi-task job (the agent sets MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK and NODE_RANK from it).
struct TaskRendezvous {
  std::string master_addr;  // the server of task 0, as addressOf names it
  uint32_t master_port = 0;
  uint32_t world_size = 0;  // the job's tasks
  uint32_t rank = 0;        // the task's index
  uint32_t local_rank = 0;  // its place among the job's tasks on its own server
  uint32_t node_rank = 0;   // its server's place among the job's servers, in task order
};

// The rendezvous of task `task` of job `job_id` whose tasks run on `task_nodes` (by task index);
// nullopt for a job of one task or a task outside the list. `port`: the job's stored port, 0 for
// rendezvousPreferredPort. `address_of` maps a server's name to the address its peers reach it
// by (its hostname); null: the name itself.
std::optional<TaskRendezvous> rendezvousFor(
    int64_t job_id, uint32_t task, const std::vector<std::string>& task_nodes, uint32_t port = 0,
    const std::function<std::string(const std::string&)>& address_of = nullptr);

// The task entry of `desired_state` / `assign` for one assignment (docs/agent-protocol.md).
// `address_of` as for rendezvousFor.
protocol::TaskEntry taskEntryFor(
    const TaskAssignment& assignment,
    const std::function<std::string(const std::string&)>& address_of = nullptr);
// taskEntryFor as JSON.
nlohmann::json taskEntryJson(
    const TaskAssignment& assignment,
    const std::function<std::string(const std::string&)>& address_of = nullptr);

}  // namespace gpool::controller
