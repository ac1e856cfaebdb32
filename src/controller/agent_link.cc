#include "controller/agent_link.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "api/job.h"
#include "api/json_reader.h"
#include "api/node.h"
#include "common/base64.h"
#include "controller/api_tokens.h"
#include "store/api_codec.h"

namespace gpool::controller {

using nlohmann::json;

struct AgentLink::Session {
  net::WebSocketConnectionPtr conn;
  std::string node;  // empty until hello
  int64_t node_epoch = 0;
  int64_t seq_out = 0;      // guarded by AgentLink::mu_
  int64_t last_seq_in = 0;  // guarded by AgentLink::mu_
};

namespace {

// The node of a hello as the registry keeps it: its GPUs, each with its links to the others
// (both directions, by UUID). The decoder has checked every value, so parsing cannot fail here.
api::Node apiNodeFrom(const protocol::Hello& hello) {
  api::Node n;
  n.name = hello.node.name;
  n.labels = hello.node.labels;
  n.cpus_milli = hello.node.cpu_millis;
  n.ram_mib = hello.node.ram_mib;
  // An agent that does not say how it enforces slices is taken not to.
  n.slices = hello.node.slices
                 ? api::SliceEnforcement{hello.node.slices->interposer, hello.node.slices->backstop,
                                         hello.node.slices->detail}
                 : api::SliceEnforcement{false, false, "the agent does not say"};
  std::map<uint32_t, size_t> by_index;
  for (const protocol::GpuInfo& g : hello.gpus.gpus) {
    api::Gpu gpu;
    gpu.uuid = g.uuid;
    gpu.index = g.index;
    gpu.pci_bus_id = g.pci_bus_id;
    gpu.model = g.model;
    gpu.memory_mib = g.memory_total_mib;
    if (!g.compute_capability.empty() && g.compute_capability != "0.0") {
      gpu.compute_capability =
          api::parseComputeCapability(g.compute_capability).valueOr(api::ComputeCapability{});
    }
    gpu.mig_mode = g.mig_enabled ? api::MigMode::kEnabled : api::MigMode::kDisabled;
    gpu.simulated = g.simulated;
    gpu.driver_version = hello.gpus.driver_version;
    gpu.cuda_version = hello.gpus.cuda_driver_version;
    by_index.emplace(g.index, n.gpus.size());
    n.gpus.push_back(std::move(gpu));
  }
  for (const protocol::GpuLinkInfo& l : hello.gpus.links) {
    if (l.gpu_a == l.gpu_b || l.level == "X") continue;
    api::GpuLink link;
    if (l.level.rfind("NV", 0) == 0) {
      link.nvlinks = l.nvlink_count;
    } else {
      link.pcie = api::parsePcieLevel(l.level).valueOr(link.pcie);
    }
    api::GpuLink back = link;
    api::Gpu& a = n.gpus[by_index.at(l.gpu_a)];
    api::Gpu& b = n.gpus[by_index.at(l.gpu_b)];
    link.peer_uuid = b.uuid;
    back.peer_uuid = a.uuid;
    a.links.push_back(std::move(link));
    b.links.push_back(std::move(back));
  }
  return n;
}

// A telemetry frame's GPUs as the TelemetryHistory takes them, received at `now`.
std::vector<GpuReading> readingsFrom(const protocol::Telemetry& t, TimePoint now) {
  std::vector<GpuReading> out;
  out.reserve(t.gpus.size());
  for (const protocol::GpuSample& g : t.gpus) {
    GpuReading r;
    r.uuid = g.uuid;
    r.index = g.index;
    r.simulated = t.simulated;
    r.utilization_pct = g.utilization_pct;
    r.memory_utilization_pct = g.memory_utilization_pct;
    r.memory_used_mib = g.memory_used_mib;
    r.memory_total_mib = g.memory_total_mib;
    r.temperature_c = g.temperature_c;
    r.power_w = g.power_w;
    r.sm_clock_mhz = g.sm_clock_mhz;
    r.memory_clock_mhz = g.memory_clock_mhz;
    r.ecc_corrected = g.ecc_corrected;
    r.ecc_uncorrected = g.ecc_uncorrected;
    r.xid_errors = g.xid_errors;
    for (const protocol::GpuProcessSample& p : g.processes)
      r.processes.push_back(GpuProcessUse{p.pid, p.used_mib, p.job_id, p.task});
    for (const protocol::SliceUsageSample& u : g.slices) {
      SliceUse use{u.job_id, u.task, u.compute_used_permille, u.kernel_launches, std::nullopt};
      // The agent says how long ago; the controller's clock says when.
      if (u.since_last_launch_us) use.last_launch_at = now - Micros(*u.since_last_launch_us);
      r.slices.push_back(use);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::optional<TaskRendezvous> rendezvousFor(
    int64_t job_id, uint32_t task, const std::vector<std::string>& task_nodes, uint32_t port,
    const std::function<std::string(const std::string&)>& address_of) {
  if (task_nodes.size() < 2 || task >= task_nodes.size()) return std::nullopt;
  TaskRendezvous r;
  r.master_addr = address_of ? address_of(task_nodes[0]) : task_nodes[0];
  r.master_port = port != 0 ? port : rendezvousPreferredPort(job_id);
  r.world_size = static_cast<uint32_t>(task_nodes.size());
  r.rank = task;
  std::vector<std::string> servers;  // in the order of their first task
  for (uint32_t t = 0; t <= task; ++t) {
    const std::string& node = task_nodes[t];
    if (std::find(servers.begin(), servers.end(), node) == servers.end()) servers.push_back(node);
    if (t < task && node == task_nodes[task]) ++r.local_rank;
  }
  r.node_rank = static_cast<uint32_t>(std::find(servers.begin(), servers.end(), task_nodes[task]) -
                                      servers.begin());
  return r;
}

protocol::TaskEntry taskEntryFor(const TaskAssignment& a,
                                 const std::function<std::string(const std::string&)>& address_of) {
  const api::JobSpec& spec = a.spec;
  protocol::TaskEntry e;
  e.assignment = protocol::Assignment{a.job_id, a.task, a.attempt, a.lease_epoch, a.incarnation};
  e.requeueable = spec.preemptible;
  protocol::Launch& l = e.launch;
  // An interactive allocation without a command holds its resources until cancelled or its
  // time limit: its task only waits (users enter it with `gpool shell`).
  l.argv = spec.command;
  if (l.argv.empty() && spec.interactive) l.argv = {"/bin/sleep", "infinity"};
  l.user = a.user;
  l.uid = a.uid;
  l.env = spec.env;
  if (a.array_job_id && a.array_index) {
    l.env["GPOOL_ARRAY_JOB_ID"] = std::to_string(*a.array_job_id);
    l.env["GPOOL_ARRAY_TASK_ID"] = std::to_string(*a.array_index);
  }
  l.working_dir = spec.working_dir;
  l.cpus_milli = a.allocation.cpus_milli;
  l.memory_mib = a.allocation.ram_mib;
  l.gpus = a.allocation.gpuUuids();
  // A shared slice of one GPU is enforced by the interposer; whole GPUs need nothing.
  if (a.allocation.slices.size() == 1 && !a.allocation.slices[0].exclusive) {
    const api::Slice& s = a.allocation.slices[0];
    l.slice = protocol::SliceTerms{s.memory_mib, s.compute_milli};
  }
  if (std::optional<TaskRendezvous> r =
          rendezvousFor(a.job_id, a.task, a.task_nodes, a.allocation.rendezvous_port, address_of)) {
    l.rendezvous = protocol::RendezvousTerms{r->master_addr, static_cast<uint16_t>(r->master_port),
                                             r->world_size,  r->rank,
                                             r->local_rank,  r->node_rank};
  }
  l.time_limit_seconds = spec.time_limit_seconds > 0 ? spec.time_limit_seconds : 0;
  l.grace_seconds = a.grace_s;
  l.image = spec.image;
  l.mounts = spec.mounts;
  l.project_dir = a.project_dir;
  if (!a.project_dir.empty()) l.project_gid = a.project_gid;
  return e;
}

json taskEntryJson(const TaskAssignment& a,
                   const std::function<std::string(const std::string&)>& address_of) {
  return protocol::toJson(taskEntryFor(a, address_of));
}

AgentLink::AgentLink(store::Store& store, NodeRegistry& registry, Clock& clock,
                     AgentLinkOptions options)
    : store_(store), registry_(registry), clock_(clock), options_(options) {}

AgentLink::~AgentLink() = default;

namespace {

bool hasRole(const net::PeerIdentity& peer, std::string_view role) {
  return std::find(peer.roles.begin(), peer.roles.end(), role) != peer.roles.end();
}

bool hasAgentRole(const net::PeerIdentity& peer) {
  return hasRole(peer, kAgentJoinRole) || hasRole(peer, kAgentNodeRole);
}

}  // namespace

void AgentLink::attach(SchedulingLoop& loop) {
  loop_ = &loop;
}

void AgentLink::attachTelemetry(TelemetryHistory& telemetry) {
  telemetry_ = &telemetry;
}

Status AgentLink::acceptPeer(const net::Request& request) const {
  const net::PeerIdentity& peer = request.peer;
  if (peer.kind == net::PeerIdentity::Kind::kToken) {
    // TLS agents: a join token (first connection) or the node credential it was given.
    if (hasAgentRole(peer)) return Status::ok();
    return Status::permissionDenied(
        "/v1/agent: needs an agent join token or a node credential, not a user's API token");
  }
  if (peer.kind != net::PeerIdentity::Kind::kUnixPeer) {
    return Status::unauthenticated("/v1/agent: needs an agent join token or node credential");
  }
  if (peer.uid != 0 && peer.uid != options_.own_uid) {
    return Status::permissionDenied("/v1/agent: uid " + std::to_string(peer.uid) +
                                    " may not act as an agent (only root or uid " +
                                    std::to_string(options_.own_uid) + ")");
  }
  return Status::ok();
}

Status AgentLink::addRoute(net::Router& router) {
  net::WebSocketHandler handler;
  handler.accept = [this](const net::Request& request) { return acceptPeer(request); };
  handler.on_open = [this](const net::WebSocketConnectionPtr& conn) { onOpen(conn); };
  handler.on_message = [this](const net::WebSocketConnectionPtr& conn, std::string text) {
    onMessage(conn, text);
  };
  handler.on_close = [this](const net::WebSocketConnectionPtr& conn, uint16_t, const std::string&) {
    onClose(conn);
  };
  // An agent's connection stops counting against its address's connection limit once
  // upgraded: users of the same node cannot crowd it out.
  return router.addWebSocket("/v1/agent", std::move(handler),
                             net::RouteOptions{.exempt_from_limits = true});
}

void AgentLink::onOpen(const net::WebSocketConnectionPtr& conn) {
  auto session = std::make_shared<Session>();
  session->conn = conn;
  std::lock_guard lock(mu_);
  sessions_[conn->id()] = std::move(session);
}

void AgentLink::onClose(const net::WebSocketConnectionPtr& conn) {
  SessionPtr session;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(conn->id());
    if (it == sessions_.end()) return;
    session = it->second;
    sessions_.erase(it);
    if (session->node.empty()) return;
    auto n = by_node_.find(session->node);
    if (n != by_node_.end() && n->second == session) {
      by_node_.erase(n);
      spdlog::info("agent of node {} disconnected; the node gets no new work until it is back",
                   session->node);
    }
  }
  // Outside mu_ (the registry is never called with it held). A newer connection of the node
  // has registered under its own id, which this leaves alone.
  registry_.agentDisconnected(session->node, conn->id());
}

AgentLink::SessionPtr AgentLink::sessionFor(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

AgentLink::SessionPtr AgentLink::current(const std::string& node) const {
  std::lock_guard lock(mu_);
  auto it = by_node_.find(node);
  return it == by_node_.end() ? nullptr : it->second;
}

bool AgentLink::connected(const std::string& node) const {
  return current(node) != nullptr;
}

size_t AgentLink::connectedCount() const {
  std::lock_guard lock(mu_);
  return by_node_.size();
}

std::map<std::string, std::vector<HealthFinding>> AgentLink::healthFindings() const {
  std::lock_guard lock(findings_mu_);
  return findings_;
}

void AgentLink::disconnect(const std::string& node, const std::string& why) {
  SessionPtr session = current(node);
  if (!session) return;
  spdlog::warn("node {}: closing its agent's connection: {}", node, why);
  session->conn->close(kCloseForbidden, why);
}

void AgentLink::sendFrame(const SessionPtr& session, std::string_view type, json body) {
  // The number and the queueing under one lock, so that messages leave in sequence order.
  std::lock_guard lock(mu_);
  json msg =
      protocol::encodeEnvelope(type, ++session->seq_out, session->last_seq_in, std::move(body));
  (void)session->conn->send(api::dumpJson(msg));
}

void AgentLink::sendError(const SessionPtr& session, std::string_view code,
                          std::string_view message, int64_t in_reply_to) {
  send(session, protocol::Error{std::string(code), std::string(message), in_reply_to});
}

void AgentLink::onMessage(const net::WebSocketConnectionPtr& conn, const std::string& text) {
  SessionPtr session = sessionFor(conn->id());
  if (!session) return;
  Result<json> parsed = api::parseJsonText(text, "message");
  if (!parsed.ok()) {
    sendError(session, "invalid_argument", parsed.status().message(), 0);
    return;
  }
  const json& msg = *parsed;
  Result<protocol::Envelope> decoded = protocol::decodeEnvelope(msg);
  if (!decoded.ok()) {
    // A newer peer's frames may not decode as ours: the version is checked first.
    if (decoded.status().code() == StatusCode::kFailedPrecondition) {
      spdlog::warn("agent connection {}: {}", conn->id(), decoded.status().message());
      conn->close(kCloseUnsupportedVersion, decoded.status().message());
      return;
    }
    sendError(session, "invalid_argument", decoded.status().message(), protocol::peekSeq(msg));
    return;
  }
  protocol::Envelope& env = *decoded;
  {
    std::lock_guard lock(mu_);
    session->last_seq_in = std::max(session->last_seq_in, env.seq);
  }
  if (env.type != "hello" && env.type != "error") {
    if (session->node.empty()) {
      sendError(session, "failed_precondition", "type: '" + env.type + "' before hello", env.seq);
      return;
    }
    if (current(session->node) != session) return;  // taken over: this connection is closing
  }
  // Decodes the body as an M and hands it on; a decoding error is returned as it is.
  auto dispatch = [&]<typename M>(Status (AgentLink::*on)(const SessionPtr&, const M&)) {
    Result<M> m = protocol::decodeBody<M>(env.body);
    if (!m.ok()) return m.status();
    return (this->*on)(session, *m);
  };
  Status s;
  if (env.type == protocol::Hello::kType) {
    s = dispatch(&AgentLink::onHello);
  } else if (env.type == protocol::Heartbeat::kType) {
    // The lease that answers names the heartbeat (the agent counts it from its sending).
    Result<protocol::Heartbeat> m = protocol::decodeBody<protocol::Heartbeat>(env.body);
    s = m.ok() ? onHeartbeat(session, *m, env.seq) : m.status();
  } else if (env.type == protocol::TaskUpdate::kType) {
    s = dispatch(&AgentLink::onTaskUpdate);
  } else if (env.type == protocol::Telemetry::kType) {
    s = dispatch(&AgentLink::onTelemetry);
  } else if (env.type == protocol::Health::kType) {
    s = dispatch(&AgentLink::onHealth);
  } else if (env.type == protocol::LogData::kType) {
    s = dispatch(&AgentLink::onLogData);
  } else if (env.type == protocol::Error::kType) {
    spdlog::warn("agent of node {} reports an error: {}",
                 session->node.empty() ? "?" : session->node, api::dumpJson(env.body));
    return;
  } else {
    sendError(session, "unimplemented", "type: unknown message type '" + env.type + "'", env.seq);
    return;
  }
  if (!s.isOk()) {
    std::string code = s.code() == StatusCode::kInvalidArgument      ? "invalid_argument"
                       : s.code() == StatusCode::kFailedPrecondition ? "failed_precondition"
                                                                     : "internal";
    sendError(session, code, "body." + s.message(), env.seq);
  }
}

Status AgentLink::onHello(const SessionPtr& session, const protocol::Hello& hello) {
  if (Status valid = api::validateNodeName(hello.node.name); !valid.isOk()) {
    return Status::invalidArgument("node.name: " + valid.message());
  }
  if (!session->node.empty() && session->node != hello.node.name) {
    return Status::invalidArgument("node.name: this connection said hello as '" + session->node +
                                   "'");
  }
  api::Node node = apiNodeFrom(hello);
  std::string name = node.name;
  // An inventory that lists a GPU twice or claims another node's GPU is refused before anything
  // changes (a join token stays unused): an error naming the GPU, then close 4003.
  auto refuse = [&](const Status& why) {
    spdlog::warn("agent connection {}: hello as {} refused: {}", session->conn->id(), name,
                 why.toString());
    sendError(
        session,
        why.code() == StatusCode::kFailedPrecondition ? "failed_precondition" : "invalid_argument",
        "body." + why.message(), 0);
    session->conn->close(kCloseForbidden, why.message());
    return Status::ok();
  };
  if (Status inventory = registry_.checkInventory(node); !inventory.isOk()) {
    return refuse(inventory);
  }
  const std::string hostname = hello.node.hostname.empty() ? name : hello.node.hostname;
  // TLS agents: a node credential speaks only for its node; a join token is exchanged for a
  // node credential on the connection's first hello (one transaction in the store).
  std::string credential;
  const net::PeerIdentity& peer = session->conn->request().peer;
  if (peer.kind == net::PeerIdentity::Kind::kToken && session->node.empty()) {
    if (hasRole(peer, kAgentNodeRole) && peer.user != name) {
      std::string why = "this node credential is for node '" + peer.user + "', not '" + name + "'";
      spdlog::warn("agent connection {}: {}", session->conn->id(), why);
      session->conn->close(kCloseForbidden, why);
      return Status::ok();
    }
    if (hasRole(peer, kAgentJoinRole)) {
      Result<int64_t> join_id = tokenRecordId(peer.token_id);
      Result<NewNodeCredential> made = makeNodeCredential(name, clock_.now());
      Status joined = !join_id.ok() ? join_id.status() : made.status();
      if (joined.isOk()) {
        joined = store_.joinNode(*join_id, made->record, clock_.now()).status();
      }
      if (!joined.isOk()) {
        spdlog::warn("node {} may not join: {}", name, joined.toString());
        session->conn->close(kCloseForbidden, joined.message());
        return Status::ok();
      }
      spdlog::info("node {} joined with join token {}; node credential issued", name,
                   peer.token_id);
      credential = made->token;
    }
  }
  // A store restored from a backup may be behind what the agents ran: its next job ids must
  // not be ids of jobs whose tasks the agents still report (their results and logs would look
  // like the new jobs'). Before the node is registered, so before it can take new work.
  int64_t highest_reported = 0;
  for (const protocol::TaskReport& t : hello.tasks) {
    if (t.assignment) highest_reported = std::max(highest_reported, t.assignment->job_id);
  }
  if (highest_reported > 0) {
    Result<bool> moved = store_.reserveJobIdsThrough(highest_reported);
    if (!moved.ok()) {
      spdlog::error("node {}: {}", name, moved.status().toString());
    } else if (*moved) {
      spdlog::warn(
          "node {} reports job {}, which this store never gave out (restored from a backup?): "
          "new job ids continue above it",
          name, highest_reported);
    }
  }
  Result<int64_t> epoch = registry_.registerNode(std::move(node), session->conn->id());
  if (!epoch.ok() && (epoch.status().code() == StatusCode::kInvalidArgument ||
                      epoch.status().code() == StatusCode::kFailedPrecondition)) {
    return refuse(epoch.status());  // another agent's hello raced this one for a GPU
  }
  if (!epoch.ok()) {
    spdlog::error("cannot register node {}: {}", name, epoch.status().toString());
    return Status::internal("cannot register the node: " + epoch.status().message());
  }
  spdlog::info("agent of node {} said hello (node epoch {}, {} tasks reported)", name, *epoch,
               hello.tasks.size());
  // The welcome goes out before the connection serves the node, so that no assign overtakes it.
  protocol::Welcome welcome;
  welcome.node_epoch = *epoch;
  welcome.node_credential = credential;
  welcome.lease = protocol::LeaseTerms{options_.lease_duration_s, options_.heartbeat_interval_s,
                                       options_.fence_grace_s};
  welcome.config =
      protocol::WelcomeConfig{options_.heartbeat_interval_s, options_.telemetry_interval_s,
                              options_.stray_policy, options_.stray_grace_s};
  send(session, welcome);
  SessionPtr older;
  {
    std::lock_guard lock(mu_);
    session->node = name;
    session->node_epoch = *epoch;
    hostnames_[name] = hostname;
    SessionPtr& slot = by_node_[name];
    if (slot && slot != session) older = slot;
    slot = session;
  }
  if (older) {
    spdlog::warn("node {}: a new agent connection takes over from connection {}", name,
                 older->conn->id());
    older->conn->close(kCloseTakenOver, "another connection for node " + name + " took over");
  }
  // What the agent runs first (a task that ended while we were apart ends its job here), then
  // what it should run.
  for (const protocol::TaskReport& t : hello.tasks) {
    if (t.assignment) applyReport(session, t);
  }
  // The loop runs a pass soon: the node's resources are back.
  if (loop_) loop_->jobsChanged();
  Result<std::vector<protocol::TaskEntry>> desired = desiredTasks(name, *epoch);
  if (!desired.ok()) {
    // The store failed: without the full state the agent must not reconcile (it would stop
    // everything); it reconnects and says hello again.
    spdlog::error("node {}: cannot read its desired state: {}", name, desired.status().toString());
    session->conn->close(net::kCloseInternal, "cannot read the desired state");
    return Status::ok();
  }
  send(session, protocol::DesiredState{*epoch, std::move(*desired), false});
  return Status::ok();
}

Result<std::vector<protocol::TaskEntry>> AgentLink::desiredTasks(const std::string& node,
                                                                 int64_t node_epoch) {
  GPOOL_ASSIGN_OR_RETURN(
      std::vector<store::JobRecord> running,
      store_.jobsInStates({api::JobState::kRunning, api::JobState::kCompleting}));
  // The grace at the time limit, as the assign carried it (the QoS level's grace_time).
  std::map<std::string, int64_t> graces;
  if (loop_ != nullptr && !running.empty()) {
    GPOOL_ASSIGN_OR_RETURN(graces, loop_->timeLimitGraces());
  }
  std::vector<protocol::TaskEntry> out;
  for (const store::JobRecord& record : running) {
    Result<api::Job> job = store::apiJobFrom(record);
    if (!job.ok()) {
      spdlog::error("job {}: cannot decode it: {}", record.id, job.status().toString());
      continue;
    }
    std::vector<std::string> task_nodes = taskNodesOf(job->allocations);
    for (const api::Allocation& a : job->allocations) {
      if (a.node != node) continue;
      TaskAssignment t;
      t.job_id = record.id;
      t.task = a.task;
      t.attempt = record.requeue_count;
      t.lease_epoch = record.epoch;
      t.incarnation = record.incarnation;
      t.node = node;
      t.node_epoch = node_epoch;
      t.user = record.user;
      t.uid = record.uid;
      t.array_job_id = record.array_parent;
      t.array_index = record.array_index;
      t.spec = job->spec;
      t.allocation = a;
      t.task_nodes = task_nodes;
      if (auto g = graces.find(job->spec.qos); g != graces.end()) t.grace_s = g->second;
      addGroupProject(store_, record.group, &t);
      out.push_back(taskEntryFor(t, [this](const std::string& n) { return addressOf(n); }));
    }
  }
  return out;
}

Status AgentLink::onHeartbeat(const SessionPtr& session, const protocol::Heartbeat&, int64_t seq) {
  Status s = registry_.heartbeat(session->node);
  if (!s.isOk()) {
    // DOWN (or forgotten): its tasks may have been moved; only a new hello reconciles.
    spdlog::warn("node {}: heartbeat refused ({}); closing so that it says hello again",
                 session->node, s.toString());
    session->conn->close(kCloseNodeDown, s.message());
    return Status::ok();
  }
  TimePoint until = clock_.now() + std::chrono::seconds(options_.lease_duration_s);
  send(session, protocol::Lease{session->node_epoch, toUnixMicros(until), seq});
  return Status::ok();
}

Status AgentLink::onTaskUpdate(const SessionPtr& session, const protocol::TaskUpdate& update) {
  applyReport(session, update.report);
  return Status::ok();
}

bool AgentLink::recordTaskFiles(int64_t job_id, const protocol::TaskReport& report,
                                const std::string& what) {
  // Where its output goes and how to enter it: `gpool logs` and `gpool shell` read them from
  // the job's allocation.
  if (report.log_paths.size() != 2 && report.shell_socket.empty()) return true;
  store::TaskFiles files;
  if (report.log_paths.size() == 2) {
    files.stdout_log = report.log_paths[0];
    files.stderr_log = report.log_paths[1];
  }
  files.shell_socket = report.shell_socket;
  Status s = store_.recordTaskFiles(job_id, report.assignment->lease_epoch, report.assignment->task,
                                    files);
  if (!s.isOk()) spdlog::info("{}: task files not recorded: {}", what, s.toString());
  return s.isOk() || s.code() == StatusCode::kFailedPrecondition ||
         s.code() == StatusCode::kNotFound;
}

Result<std::map<std::string, std::vector<GpuTenant>>> AgentLink::tenantsOf(
    const std::string& node) {
  std::lock_guard lock(tenants_mu_);
  Micros mono = clock_.monotonic();
  if (!tenants_read_at_ || mono - *tenants_read_at_ >= std::chrono::seconds(1)) {
    GPOOL_ASSIGN_OR_RETURN(
        std::vector<store::JobRecord> running,
        store_.jobsInStates({api::JobState::kRunning, api::JobState::kCompleting}));
    std::map<std::pair<int64_t, uint32_t>, int64_t> pids;
    {
      std::lock_guard pid_lock(mu_);
      pids = task_pids_;
    }
    tenants_.clear();
    for (const store::JobRecord& record : running) {
      Result<api::Job> job = store::apiJobFrom(record);
      if (!job.ok()) continue;
      for (const api::Allocation& a : job->allocations) {
        for (const api::Slice& slice : a.slices) {
          GpuTenant t;
          t.job_id = record.id;
          t.task = a.task;
          t.compute_milli = slice.compute_milli;
          t.exclusive = slice.exclusive;
          t.user = record.user;
          t.group = record.group;
          if (!slice.exclusive) t.memory_mib = slice.memory_mib;
          auto pid = pids.find({record.id, a.task});
          if (pid != pids.end()) t.pid = pid->second;
          tenants_[a.node][slice.gpu_uuid].push_back(t);
        }
      }
    }
    tenants_read_at_ = mono;
  }
  auto it = tenants_.find(node);
  if (it == tenants_.end()) return std::map<std::string, std::vector<GpuTenant>>{};
  return it->second;
}

Status AgentLink::onTelemetry(const SessionPtr& session, const protocol::Telemetry& sample) {
  if (telemetry_ == nullptr) return Status::ok();
  // The controller's clock, not the agent's: histories of all nodes share one time line.
  TimePoint now = clock_.now();
  Result<std::map<std::string, std::vector<GpuTenant>>> tenants = tenantsOf(session->node);
  if (!tenants.ok()) {
    spdlog::warn("node {}: telemetry without attribution (store: {})", session->node,
                 tenants.status().toString());
    tenants = std::map<std::string, std::vector<GpuTenant>>{};
  }
  telemetry_->ingest(session->node, now, readingsFrom(sample, now), *tenants);
  FinishedMinutes minutes = telemetry_->takeFinishedMinutes(now);
  if (!minutes.gpus.empty()) {
    Status s = store_.recordTelemetry(minutes.gpus);
    if (!s.isOk())
      spdlog::warn("cannot store {} GPU telemetry minutes: {}", minutes.gpus.size(), s.toString());
  }
  if (!minutes.tasks.empty()) {
    Status s = store_.recordTaskTelemetry(minutes.tasks);
    if (!s.isOk()) {
      spdlog::warn("cannot store {} task telemetry minutes: {}", minutes.tasks.size(),
                   s.toString());
    }
  }
  bool prune = false;
  {
    std::lock_guard lock(tenants_mu_);
    Micros mono = clock_.monotonic();
    if (!pruned_at_ || mono - *pruned_at_ >= options_.telemetry_prune_every) {
      pruned_at_ = mono;
      prune = true;
    }
  }
  if (prune) {
    Status s = store_.pruneTelemetry(now, options_.telemetry_retention);
    if (!s.isOk()) spdlog::warn("cannot prune the telemetry history: {}", s.toString());
  }
  return Status::ok();
}

Status AgentLink::onHealth(const SessionPtr& session, const protocol::Health& m) {
  std::vector<HealthFinding> kept;
  for (const protocol::Finding& f : m.findings) {
    kept.push_back({f.check, f.severity, f.gpu_uuid, f.pid,
                    static_cast<uint64_t>(std::max<int64_t>(0, f.used_mib)), f.unhealthy, f.message,
                    f.action, f.user});
  }
  std::vector<HealthFinding> killed;
  {
    // Kept for the alert engine (strays, memory left behind, lost GPUs) and for a GPU clear.
    std::lock_guard lock(findings_mu_);
    std::vector<HealthFinding>& before = findings_[session->node];
    // A kill is in the frame of the sample that did it and possibly in a later one (the agent
    // sends its findings again after a reconnect): audited when it first appears.
    auto isKill = [](const HealthFinding& f) {
      return f.action == "killed" && (f.check == "stray_process" || f.check == "dead_task_process");
    };
    for (const HealthFinding& f : kept) {
      if (!isKill(f)) continue;
      bool seen = std::any_of(before.begin(), before.end(), [&](const HealthFinding& b) {
        return isKill(b) && b.gpu_uuid == f.gpu_uuid && b.pid == f.pid;
      });
      if (!seen) killed.push_back(f);
    }
    before = kept;
  }
  for (const HealthFinding& f : killed)
    auditKill(session->node, f);
  // An XID of the fatal kinds, or a GPU gone from the bus, holds the GPU out of scheduling
  // until an admin clears it: the agent reports an XID only in the sample that saw it, and a
  // GPU that fell off the bus may come back looking healthy.
  for (const HealthFinding& f : kept) {
    bool fatal = (f.check == "xid" && f.unhealthy) || f.check == "gpu_missing";
    if (!fatal || f.gpu_uuid.empty()) continue;
    Result<bool> held = registry_.holdGpu(session->node, f.gpu_uuid, f.message);
    if (!held.ok()) {
      spdlog::error("node {}: cannot hold GPU {}: {}", session->node, f.gpu_uuid,
                    held.status().toString());
    } else if (*held) {
      spdlog::warn("node {} GPU {} held out of scheduling until `gpool gpu clear`: {}",
                   session->node, f.gpu_uuid, f.message);
    }
  }
  return applyHealth(session->node, kept);
}

void AgentLink::auditKill(const std::string& node, const HealthFinding& f) {
  std::optional<uint32_t> index;
  for (const api::Node& n : registry_.nodes()) {
    if (n.name != node) continue;
    for (const api::Gpu& g : n.gpus) {
      if (g.uuid == f.gpu_uuid) index = g.index;
    }
  }
  json detail{{"node", node},        {"gpu_uuid", f.gpu_uuid}, {"pid", f.pid},
              {"user", f.user},      {"used_mib", f.used_mib}, {"check", f.check},
              {"message", f.message}};
  if (index) detail["gpu"] = *index;
  store::AuditEvent event;
  event.time = clock_.now();
  event.actor = "agent:" + node;
  event.action = "kill_stray_process";
  event.subject =
      node + "/" + (index ? std::to_string(*index) : f.gpu_uuid) + " pid " + std::to_string(f.pid);
  event.detail = detail.dump();
  spdlog::warn("node {}: the agent killed process {} (user {}) holding {} MiB on GPU {}", node,
               f.pid, f.user.empty() ? "unknown" : f.user, f.used_mib,
               index ? std::to_string(*index) : f.gpu_uuid);
  // The kill happened whatever the store says; a lost record is logged, not retried.
  if (Status s = store_.recordAuditEvent(event); !s.isOk()) {
    spdlog::error("node {}: cannot audit the kill of process {}: {}", node, f.pid, s.toString());
  }
}

Status AgentLink::reapplyHealth(const std::string& node) {
  std::vector<HealthFinding> kept;
  {
    std::lock_guard lock(findings_mu_);
    auto it = findings_.find(node);
    if (it != findings_.end()) kept = it->second;
  }
  return applyHealth(node, kept);
}

Status AgentLink::applyHealth(const std::string& node, const std::vector<HealthFinding>& findings) {
  // Per GPU: unhealthy when a finding says so; degraded for other warnings about the GPU
  // itself (process and memory hygiene findings leave it as it is: the kill policy and the
  // slice backstop act).
  std::map<std::string, std::pair<api::GpuHealth, std::string>> health;
  std::string node_reason;  // findings about the server itself
  for (const HealthFinding& f : findings) {
    if (f.gpu_uuid.empty()) {
      if (f.severity == "info" && !f.unhealthy) continue;
      if (!node_reason.empty()) node_reason += "; ";
      node_reason += f.message.empty() ? f.check : f.message;
      continue;
    }
    if (f.check == "stray_process" || f.check == "dead_task_process" ||
        f.check == "leaked_memory" || f.check == "slice_over_quota") {
      continue;
    }
    bool bad = f.unhealthy;
    if (!bad && f.severity == "info") continue;
    auto& [state, reason] = health[f.gpu_uuid];
    api::GpuHealth level = bad ? api::GpuHealth::kUnhealthy : api::GpuHealth::kDegraded;
    std::string what = f.message.empty() ? f.check : f.message;
    if (level > state) {
      state = level;
      reason = what;
    } else if (level == state) {
      reason += "; " + what;
    }
  }
  Result<bool> changed = registry_.setGpuHealth(node, health, node_reason);
  if (!changed.ok()) {
    spdlog::error("node {}: cannot record GPU health: {}", node, changed.status().toString());
    return Status::internal("cannot record the GPU health: " + changed.status().message());
  }
  if (*changed) {
    for (const auto& [uuid, h] : health) {
      spdlog::warn("node {} GPU {}: {} ({})", node, uuid, api::gpuHealthName(h.first), h.second);
    }
    if (!node_reason.empty()) spdlog::warn("node {}: {}", node, node_reason);
    if (health.empty()) spdlog::info("node {}: the agent reports every GPU healthy", node);
    if (loop_) loop_->jobsChanged();
  }
  return Status::ok();
}

Result<std::optional<RemoteLogPiece>> AgentLink::readRemoteLog(const RemoteLogRequest& request) {
  const LogKey key{request.job_id, request.task, request.stderr_stream, request.offset};
  const std::string what =
      "the log of job " + std::to_string(request.job_id) + " task " + std::to_string(request.task);
  const Micros mono = clock_.monotonic();
  SessionPtr session = current(request.node);
  protocol::ReadLog read_log;
  {
    std::lock_guard lock(logs_mu_);
    auto it = log_reads_.find(key);
    if (it != log_reads_.end() && it->second.lease_epoch != request.lease_epoch) {
      log_reads_.erase(it);  // asked for another attempt's log
      it = log_reads_.end();
    }
    if (it != log_reads_.end() && it->second.answered) {
      Result<RemoteLogPiece> answer = std::move(it->second.answer);
      log_reads_.erase(it);
      if (!answer.ok()) return answer.status();
      if (answer->data.size() > request.max_bytes) answer->data.resize(request.max_bytes);
      return std::optional<RemoteLogPiece>(std::move(*answer));
    }
    if (!session) {
      if (it != log_reads_.end()) log_reads_.erase(it);
      return Status::unavailable(what + " is on node " + request.node +
                                 ", whose agent is not connected: try again once it is back");
    }
    if (it != log_reads_.end() && it->second.connection == session->conn->id() &&
        mono - it->second.changed_at < kRelayedLogExpiry) {
      return std::optional<RemoteLogPiece>();  // on its way
    }
    // Drop what nobody took or nobody answered in time, then make room.
    for (auto e = log_reads_.begin(); e != log_reads_.end();) {
      e = mono - e->second.changed_at >= kRelayedLogExpiry ? log_reads_.erase(e) : std::next(e);
    }
    if (log_reads_.size() >= kMaxRelayedLogReads && log_reads_.find(key) == log_reads_.end()) {
      return Status::unavailable(what + ": " + std::to_string(kMaxRelayedLogReads) +
                                 " log reads already wait for agents; try again shortly");
    }
    LogRead& read = log_reads_[key];
    read = LogRead{};
    read.request_id = ++next_log_request_;
    read.node = request.node;
    read.connection = session->conn->id();
    read.lease_epoch = request.lease_epoch;
    read.changed_at = mono;
    read_log.request = read.request_id;
    read_log.job_id = request.job_id;
    read_log.task = request.task;
    read_log.lease_epoch = request.lease_epoch;
    read_log.incarnation = request.incarnation;
    read_log.stream = request.stderr_stream ? "stderr" : "stdout";
    read_log.offset = static_cast<int64_t>(request.offset);
    read_log.max_bytes = static_cast<int64_t>(std::min(request.max_bytes, kMaxRelayedLogBytes));
  }
  send(session, read_log);
  return std::optional<RemoteLogPiece>();
}

Status AgentLink::onLogData(const SessionPtr& session, const protocol::LogData& m) {
  std::lock_guard lock(logs_mu_);
  auto it = log_reads_.find(
      LogKey{m.job_id, m.task, m.stream == "stderr", static_cast<uint64_t>(m.offset)});
  // Only the answer to the request sent to this node counts; a late answer to an expired or
  // repeated request, or one from another node, is dropped.
  if (it == log_reads_.end() || it->second.request_id != m.request ||
      it->second.node != session->node || it->second.answered) {
    return Status::ok();
  }
  LogRead& read = it->second;
  read.answered = true;
  read.changed_at = clock_.monotonic();
  if (!m.error.empty()) {
    read.answer = Status::failedPrecondition("the agent of node " + session->node + ": " + m.error);
  } else {
    read.answer = RemoteLogPiece{m.found, static_cast<uint64_t>(m.size), m.data};
  }
  return Status::ok();
}

void AgentLink::applyReport(const SessionPtr& session, const protocol::TaskReport& report) {
  if (!report.assignment || loop_ == nullptr) return;
  // Acknowledged only once applied for good (committed, or nothing to record): the agent
  // re-sends the report until then, so a store that cannot write loses none.
  if (settleReport(session, report)) {
    send(session, protocol::TaskAck{*report.assignment, report.state});
  }
}

void AgentLink::noteUnknownTask(const std::string& node, const protocol::TaskReport& report,
                                const Result<store::JobRecord>& record) {
  const protocol::Assignment& a = *report.assignment;
  const TimePoint now = clock_.now();
  const bool ended = report.state == protocol::TaskPhase::kExited;
  UnknownTask noted;
  bool first = false;
  {
    std::lock_guard lock(unknown_mu_);
    for (auto it = unknown_.begin(); it != unknown_.end();) {
      const bool old = it->second.ended_at && now - *it->second.ended_at > std::chrono::hours(24);
      it = old ? unknown_.erase(it) : std::next(it);
    }
    auto [it, added] =
        unknown_.try_emplace(UnknownKey{node, a.job_id, a.task, a.incarnation, a.lease_epoch});
    UnknownTask& t = it->second;
    if (added) {
      t.node = node;
      t.job_id = a.job_id;
      t.task = a.task;
      t.lease_epoch = a.lease_epoch;
      t.incarnation = a.incarnation;
      if (record.ok()) {
        t.user = record->user;
        t.job_state = std::string(api::jobStateName(record->state));
      }
      t.seen_at = now;
    }
    if (report.pid > 0) t.pid = report.pid;
    first = added;
    if (ended && !t.ended_at) {
      t.ended_at = now;
      first = true;  // its end is news too
    }
    noted = t;
  }
  if (!first) return;
  spdlog::warn("{}", describeUnknownTask(noted));
  // A job the restored store has PENDING ran after the backup: its owner reads in the job's
  // events why that run left no trace (the job runs again, as the store has it waiting).
  if (record.ok() && record->state == api::JobState::kPending && !noted.ended_at) {
    Status s = store_.setJobReason(a.job_id, api::JobState::kPending, now,
                                   "an earlier run of this job on " + node +
                                       " (store incarnation " + std::to_string(a.incarnation) +
                                       ", epoch " + std::to_string(a.lease_epoch) +
                                       ") is unknown to the restored controller: told to stop");
    if (!s.isOk()) spdlog::info("job {}: event not recorded: {}", a.job_id, s.toString());
  }
}

std::vector<UnknownTask> AgentLink::unknownTasks() const {
  std::lock_guard lock(unknown_mu_);
  std::vector<UnknownTask> out;
  out.reserve(unknown_.size());
  for (const auto& [key, t] : unknown_)
    out.push_back(t);
  return out;
}

bool AgentLink::settleReport(const SessionPtr& session, const protocol::TaskReport& report) {
  const protocol::Assignment& assignment = *report.assignment;
  const int64_t job_id = assignment.job_id;
  const uint32_t task = assignment.task;
  const int64_t lease_epoch = assignment.lease_epoch;
  std::string what = "job " + std::to_string(job_id) + " task " + std::to_string(task) +
                     " (epoch " + std::to_string(lease_epoch) + ", incarnation " +
                     std::to_string(assignment.incarnation) + ") on " + session->node;
  // Only the current assignment of this task to this node counts (fencing): the same epoch
  // under the same store incarnation, so that a task from before a restore of the store, whose
  // job id and epoch the restored store may have given to another job, never counts as its.
  Result<store::JobRecord> record = store_.getJob(job_id);
  bool current = false;
  bool live = false;
  if (record.ok()) {
    live = api::holdsResources(record->state);
    Result<api::Job> job = store::apiJobFrom(*record);
    if (job.ok() && record->epoch == lease_epoch && record->incarnation == assignment.incarnation) {
      for (const api::Allocation& a : job->allocations) {
        if (a.task == task && a.node == session->node) current = true;
      }
    }
  } else if (record.status().code() != StatusCode::kNotFound) {
    spdlog::error("{}: cannot read the job: {}", what, record.status().toString());
    return false;  // the agent sends it again
  }
  if (!current || !live) {
    // A placement later than the store's own (or of a job it has none of): the store went back
    // to a backup taken before it. Shown to admins (docs/admin-guide.md, "Tasks unknown to the
    // restored controller"), and stopped like any stale task.
    const bool unknown = !record.ok() || std::pair(assignment.incarnation, lease_epoch) >
                                             std::pair(record->incarnation, record->epoch);
    if (unknown) noteUnknownTask(session->node, report, record);
    // Stale or no longer wanted: record nothing; a task still running must stop (the agent
    // stops only this attempt, never a newer one).
    if (report.state != protocol::TaskPhase::kExited) {
      spdlog::info("{}: not a current assignment; telling the agent to stop it", what);
      send(session, protocol::Cancel{assignment, "TERM", std::nullopt, "cancelled"});
    }
    return true;
  }
  if (report.state == protocol::TaskPhase::kRunning) {
    bool first = false;
    bool first_of_task = false;
    {
      std::lock_guard lock(mu_);
      if (report.pid > 0) task_pids_[{job_id, task}] = report.pid;
      first = started_.insert({job_id, lease_epoch}).second;
      first_of_task = files_recorded_.insert({job_id, lease_epoch, task}).second;
    }
    bool settled = true;
    if (first) {
      std::optional<TimePoint> started;
      if (report.started_at_us > 0) started = fromUnixMicros(report.started_at_us);
      Status s = loop_->taskStarted(job_id, lease_epoch, started);
      if (!s.isOk()) spdlog::info("{}: start not recorded: {}", what, s.toString());
      // Not written (the store cannot write): taken again when the agent re-sends it.
      if (!s.isOk() && s.code() != StatusCode::kFailedPrecondition) {
        std::lock_guard lock(mu_);
        started_.erase({job_id, lease_epoch});
        settled = false;
      }
    }
    // Each task's own logs (not only the first task's): `gpool run` and `gpool logs --task K`.
    if (first_of_task && !recordTaskFiles(job_id, report, what)) {
      std::lock_guard lock(mu_);
      files_recorded_.erase({job_id, lease_epoch, task});
    }
    return settled;
  }
  if (report.state != protocol::TaskPhase::kExited) return true;
  // A short task may be reported only once it exited: its logs must still be findable.
  (void)recordTaskFiles(job_id, report, what);
  bool start_seen = false;
  {
    std::lock_guard lock(mu_);
    start_seen = started_.erase({job_id, lease_epoch}) > 0;
    files_recorded_.erase({job_id, lease_epoch, task});
    task_pids_.erase({job_id, task});
  }
  // A task that ended before this process saw it run (it was short, or ended while the agent
  // or gpoold was away): its run still began when its supervisor says.
  if (!start_seen && report.started_at_us > 0) {
    Status s = loop_->taskStarted(job_id, lease_epoch, fromUnixMicros(report.started_at_us));
    if (!s.isOk()) spdlog::debug("{}: start not recorded: {}", what, s.toString());
  }
  TaskOutcome outcome = TaskOutcome::kExited;
  if (report.oom_killed) {
    outcome = TaskOutcome::kOomKilled;
  } else if (report.timed_out) {
    outcome = TaskOutcome::kTimedOut;
  } else if (report.cancelled) {
    outcome = TaskOutcome::kCancelled;
  }
  // A signal counts as the shell does (128 + signal); a task that never ran has -1.
  int32_t code = report.signal != 0 ? static_cast<int32_t>(128 + report.signal)
                                    : static_cast<int32_t>(report.exit_code);
  std::optional<TimePoint> ended;
  if (report.ended_at_us > 0) ended = fromUnixMicros(report.ended_at_us);
  bool job_ended = false;
  Status s =
      loop_->taskEnded(job_id, task, lease_epoch, code, outcome, report.reason, ended, &job_ended);
  if (s.isOk()) {
    spdlog::info("{}: ended ({}, exit code {})", what, report.final_state, code);
    // A task of a job whose other tasks still run is only kept in memory: it is acknowledged
    // once the job's end is committed (a later sending finds the job no longer running).
    return job_ended;
  }
  if (s.code() == StatusCode::kFailedPrecondition) {
    spdlog::debug("{}: end already recorded: {}", what, s.toString());
    return true;
  }
  spdlog::error("{}: cannot record its end ({}); the agent sends it again until it is recorded",
                what, s.toString());
  return false;
}

std::string AgentLink::addressOf(const std::string& node) const {
  std::lock_guard lock(mu_);
  auto it = hostnames_.find(node);
  return it == hostnames_.end() ? node : it->second;
}

void AgentLink::assign(const TaskAssignment& a) {
  SessionPtr session = current(a.node);
  if (!session) {
    spdlog::info("assign job {} task {} to {}: node not connected; its next hello gets it",
                 a.job_id, a.task, a.node);
    return;
  }
  protocol::Assign m;
  m.entry = taskEntryFor(a, [this](const std::string& n) { return addressOf(n); });
  {
    std::lock_guard lock(mu_);
    m.node_epoch = session->node_epoch;
  }
  send(session, m);
}

void AgentLink::cancel(const std::string& node, int64_t job_id, uint32_t task, int64_t lease_epoch,
                       int64_t grace_s, const std::string& reason) {
  SessionPtr session = current(node);
  if (!session) {
    spdlog::info("cancel job {} task {} on {}: node not connected; its next hello stops it", job_id,
                 task, node);
    return;
  }
  protocol::Cancel m;
  m.assignment = protocol::Assignment{job_id, task, 0, lease_epoch};
  m.reason = reason;
  if (grace_s >= 0) m.grace_s = grace_s;
  send(session, m);
}

}  // namespace gpool::controller
