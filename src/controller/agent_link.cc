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

using api::ObjectReader;
using api::Presence;
using nlohmann::json;

struct AgentLink::Session {
  net::WebSocketConnectionPtr conn;
  std::string node;  // empty until hello
  int64_t node_epoch = 0;
  int64_t seq_out = 0;      // guarded by AgentLink::mu_
  int64_t last_seq_in = 0;  // guarded by AgentLink::mu_
};

// One task as an agent reports it, in `hello.tasks` and in `task_update`.
struct AgentLink::TaskReport {
  std::optional<int64_t> job_id;  // no assignment: a task the agent cannot match
  uint32_t task = 0;
  int32_t attempt = 0;
  int64_t lease_epoch = 0;
  std::string state;  // starting, running, exited
  std::string final_state;
  int64_t pid = 0;
  int64_t exit_code = -1;
  int64_t signal = 0;
  bool oom_killed = false;
  bool timed_out = false;
  bool cancelled = false;
  std::string reason;                  // the agent's words for an exited task's end
  std::vector<std::string> log_paths;  // [stdout, stderr] on the node
  std::string shell_socket;            // the agent's socket for `gpool shell`
};

namespace {

constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

// ---- decoding (strict: unknown fields are errors naming their path)

struct Envelope {
  int64_t v = 0;
  std::string type;
  int64_t seq = 0;
  int64_t ack = 0;
  json body;
};

struct RawObject {
  json value;
};
Status fromJson(const json& j, RawObject* out, std::string_view path) {
  if (!j.is_object()) {
    return Status::invalidArgument(std::string(path) + ": expected an object, got " +
                                   std::string(api::jsonTypeName(j)));
  }
  out->value = j;
  return Status::ok();
}

struct AssignmentJson {
  int64_t job_id = 0;
  uint32_t task = 0;
  int32_t attempt = 0;
  int64_t lease_epoch = 0;
};
Status fromJson(const json& j, AssignmentJson* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("job_id", &out->job_id, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("task", &out->task, Presence::kRequired, uint32_t{0}, uint32_t{1'000'000});
  r.integer("attempt", &out->attempt, Presence::kOptional, int32_t{0},
            std::numeric_limits<int32_t>::max());
  r.integer("lease_epoch", &out->lease_epoch, Presence::kRequired, int64_t{1}, kMaxI64);
  return r.finish();
}

struct ReportJson {
  std::optional<AssignmentJson> assignment;
  std::string name;
  std::string state;
  std::string final_state;
  int64_t pid = 0;
  int64_t started_at_us = 0;
  int64_t ended_at_us = 0;
  int64_t exit_code = -1;
  int64_t signal = 0;
  bool oom_killed = false;
  bool timed_out = false;
  bool cancelled = false;
  std::string reason;
  std::string stop_reason;
  std::vector<std::string> log_paths;
  std::string shell_socket;
};
Status fromJson(const json& j, ReportJson* out, std::string_view path) {
  ObjectReader r(j, path);
  r.optionalObject("assignment", &out->assignment);
  r.string("name", &out->name);
  r.string("state", &out->state, Presence::kRequired);
  r.check(out->state == "starting" || out->state == "running" || out->state == "exited", "state",
          "expected starting, running or exited");
  r.string("final_state", &out->final_state);
  r.integer("pid", &out->pid, Presence::kOptional, int64_t{0}, kMaxI64);
  r.integer("started_at_us", &out->started_at_us, Presence::kOptional, int64_t{0}, kMaxI64);
  r.integer("ended_at_us", &out->ended_at_us, Presence::kOptional, int64_t{0}, kMaxI64);
  r.integer("exit_code", &out->exit_code, Presence::kOptional, int64_t{-1}, int64_t{255});
  r.integer("signal", &out->signal, Presence::kOptional, int64_t{0}, int64_t{128});
  r.boolean("oom_killed", &out->oom_killed);
  r.boolean("timed_out", &out->timed_out);
  r.boolean("cancelled", &out->cancelled);
  r.string("reason", &out->reason);
  r.string("stop_reason", &out->stop_reason);
  r.stringList("log_paths", &out->log_paths);
  r.check(out->log_paths.empty() || out->log_paths.size() == 2, "log_paths",
          "expected [stdout, stderr]");
  r.string("shell_socket", &out->shell_socket);
  return r.finish();
}

// What a task report says, for applyReport. `t.assignment` must be set. A template because
// AgentLink::TaskReport is private: only AgentLink's members may name it (as the argument).
template <typename TaskReport>
TaskReport taskReportFrom(const ReportJson& t) {
  TaskReport report;
  report.job_id = t.assignment->job_id;
  report.task = t.assignment->task;
  report.attempt = t.assignment->attempt;
  report.lease_epoch = t.assignment->lease_epoch;
  report.state = t.state;
  report.final_state = t.final_state;
  report.pid = t.pid;
  report.exit_code = t.exit_code;
  report.signal = t.signal;
  report.oom_killed = t.oom_killed;
  report.timed_out = t.timed_out;
  report.cancelled = t.cancelled;
  report.reason = t.reason;
  report.log_paths = t.log_paths;
  report.shell_socket = t.shell_socket;
  return report;
}

struct MigJson {};
Status fromJson(const json& j, MigJson*, std::string_view path) {
  std::string s;
  uint64_t n = 0;
  ObjectReader r(j, path);
  r.string("uuid", &s);
  r.string("profile", &s);
  r.integer("gpu_instance_id", &n, Presence::kOptional, uint64_t{0}, uint64_t{1} << 32);
  r.integer("compute_instance_id", &n, Presence::kOptional, uint64_t{0}, uint64_t{1} << 32);
  r.integer("memory_mib", &n, Presence::kOptional, uint64_t{0}, uint64_t{1} << 40);
  return r.finish();
}

struct GpuJson {
  api::Gpu gpu;
};
Status fromJson(const json& j, GpuJson* out, std::string_view path) {
  api::Gpu& g = out->gpu;
  ObjectReader r(j, path);
  r.string("uuid", &g.uuid, Presence::kRequired);
  r.check(!g.uuid.empty() || !r.ok(), "uuid", "must not be empty");
  r.integer("index", &g.index, Presence::kRequired, uint32_t{0}, uint32_t{1023});
  r.string("pci_bus_id", &g.pci_bus_id);
  r.string("model", &g.model, Presence::kRequired);
  r.integer("memory_total_mib", &g.memory_mib, Presence::kRequired, uint64_t{0}, uint64_t{1} << 40);
  std::string cc;
  r.string("compute_capability", &cc);
  if (r.ok() && !cc.empty() && cc != "0.0") {
    Result<api::ComputeCapability> parsed = api::parseComputeCapability(cc);
    if (parsed.ok()) {
      g.compute_capability = *parsed;
    } else {
      r.fail("compute_capability", parsed.status().message());
    }
  }
  bool mig = false;
  r.boolean("mig_enabled", &mig);
  g.mig_mode = mig ? api::MigMode::kEnabled : api::MigMode::kDisabled;
  std::vector<MigJson> instances;
  r.objectList("mig_instances", &instances);
  r.boolean("simulated", &g.simulated);
  return r.finish();
}

struct LinkJson {
  uint32_t gpu_a = 0;
  uint32_t gpu_b = 0;
  std::string level;
  uint32_t nvlink_count = 0;
};
Status fromJson(const json& j, LinkJson* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("gpu_a", &out->gpu_a, Presence::kRequired, uint32_t{0}, uint32_t{1023});
  r.integer("gpu_b", &out->gpu_b, Presence::kRequired, uint32_t{0}, uint32_t{1023});
  r.string("level", &out->level, Presence::kRequired);
  r.integer("nvlink_count", &out->nvlink_count, Presence::kOptional, uint32_t{0}, uint32_t{64});
  return r.finish();
}

// hello.gpus: the agent's inventory (gpu::toJson(Inventory)).
struct InventoryJson {
  std::vector<api::Gpu> gpus;
};
Status fromJson(const json& j, InventoryJson* out, std::string_view path) {
  ObjectReader r(j, path);
  std::string text;
  bool flag = false;
  r.string("backend", &text);
  r.boolean("simulated", &flag);
  std::string driver;
  std::string cuda;
  r.string("driver_version", &driver);
  r.string("cuda_driver_version", &cuda);
  std::vector<GpuJson> gpus;
  r.objectList("gpus", &gpus, Presence::kRequired, 1024);
  std::vector<LinkJson> links;
  r.objectList("links", &links);
  GPOOL_RETURN_IF_ERROR(r.finish());
  std::map<uint32_t, size_t> by_index;
  for (GpuJson& g : gpus) {
    g.gpu.driver_version = driver;
    g.gpu.cuda_version = cuda;
    if (!by_index.emplace(g.gpu.index, out->gpus.size()).second) {
      return Status::invalidArgument(std::string(path) + ".gpus: index " +
                                     std::to_string(g.gpu.index) + " appears twice");
    }
    out->gpus.push_back(std::move(g.gpu));
  }
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkJson& l = links[i];
    std::string where = std::string(path) + ".links[" + std::to_string(i) + "]";
    auto a = by_index.find(l.gpu_a);
    auto b = by_index.find(l.gpu_b);
    if (a == by_index.end() || b == by_index.end()) {
      return Status::invalidArgument(where + ": names a GPU index not in gpus");
    }
    if (l.gpu_a == l.gpu_b || l.level == "X") continue;
    api::GpuLink link;
    if (l.level.rfind("NV", 0) == 0) {
      link.nvlinks = l.nvlink_count;
    } else {
      Result<api::PcieLevel> level = api::parsePcieLevel(l.level);
      if (!level.ok())
        return Status::invalidArgument(where + ".level: " + level.status().message());
      link.pcie = *level;
    }
    api::GpuLink back = link;
    link.peer_uuid = out->gpus[b->second].uuid;
    back.peer_uuid = out->gpus[a->second].uuid;
    out->gpus[a->second].links.push_back(std::move(link));
    out->gpus[b->second].links.push_back(std::move(back));
  }
  return Status::ok();
}

struct NodeJson {
  api::Node node;
  std::string hostname;  // how the other servers reach it (a multi-task job's MASTER_ADDR)
};
Status fromJson(const json& j, NodeJson* out, std::string_view path) {
  api::Node& n = out->node;
  ObjectReader r(j, path);
  std::string text;
  r.string("name", &n.name, Presence::kRequired);
  r.string("hostname", &out->hostname);
  r.stringMap("labels", &n.labels);
  r.integer("cpu_millis", &n.cpus_milli, Presence::kRequired, uint64_t{0}, uint64_t{1} << 32);
  r.integer("ram_mib", &n.ram_mib, Presence::kRequired, uint64_t{0}, uint64_t{1} << 40);
  r.string("agent_version", &text);
  r.string("os", &text);
  r.string("cgroup", &text);
  GPOOL_RETURN_IF_ERROR(r.finish());
  Status name = api::validateNodeName(n.name);
  if (!name.isOk()) return Status::invalidArgument(std::string(path) + ".name: " + name.message());
  return Status::ok();
}

// ---- telemetry and health (gpu::toJson(TelemetrySample), gpu::toJson(Finding))

// Takes the number `key` out of the object `j` (a copy), so that an ObjectReader over the
// rest checks the other fields; the reader has no reader for fractional numbers.
Status takeNumber(json& j, const char* key, double* out, std::string_view path) {
  if (!j.is_object()) return Status::ok();  // the reader reports the type
  auto it = j.find(key);
  if (it == j.end()) return Status::ok();
  if (it->is_null()) {
    j.erase(it);
    return Status::ok();
  }
  if (!it->is_number()) {
    return Status::invalidArgument(std::string(path) + "." + key + ": expected a number, got " +
                                   std::string(api::jsonTypeName(*it)));
  }
  *out = it->get<double>();
  j.erase(it);
  return Status::ok();
}

struct ProcessJson {
  GpuProcessUse use;
};
Status fromJson(const json& j, ProcessJson* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("pid", &out->use.pid, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("used_mib", &out->use.used_mib, Presence::kOptional, uint64_t{0}, uint64_t{1} << 40);
  r.optionalInteger("job_id", &out->use.job_id, int64_t{0}, kMaxI64);
  r.optionalInteger("task", &out->use.task, uint32_t{0}, uint32_t{1'000'000});
  return r.finish();
}

struct GpuSampleJson {
  GpuReading reading;
};
Status fromJson(const json& in, GpuSampleJson* out, std::string_view path) {
  GpuReading& g = out->reading;
  json j = in;
  GPOOL_RETURN_IF_ERROR(takeNumber(j, "power_w", &g.power_w, path));
  // xid_errors by hand too: the reader has no integer lists.
  if (j.is_object()) {
    auto x = j.find("xid_errors");
    if (x != j.end() && !x->is_null()) {
      if (!x->is_array()) {
        return Status::invalidArgument(std::string(path) + ".xid_errors: expected an array");
      }
      for (const json& e : *x) {
        if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > 100'000) {
          return Status::invalidArgument(std::string(path) +
                                         ".xid_errors: expected XID numbers (integers)");
        }
        g.xid_errors.push_back(e.get<uint32_t>());
      }
    }
    if (x != j.end()) j.erase(x);
  }
  ObjectReader r(j, path);
  r.string("uuid", &g.uuid, Presence::kRequired);
  r.check(!g.uuid.empty() || !r.ok(), "uuid", "must not be empty");
  r.integer("index", &g.index, Presence::kOptional, uint32_t{0}, uint32_t{1023});
  r.integer("utilization_pct", &g.utilization_pct, Presence::kOptional, uint32_t{0}, uint32_t{100});
  r.integer("memory_utilization_pct", &g.memory_utilization_pct, Presence::kOptional, uint32_t{0},
            uint32_t{100});
  r.integer("memory_used_mib", &g.memory_used_mib, Presence::kOptional, uint64_t{0},
            uint64_t{1} << 40);
  r.integer("memory_total_mib", &g.memory_total_mib, Presence::kOptional, uint64_t{0},
            uint64_t{1} << 40);
  r.integer("temperature_c", &g.temperature_c, Presence::kOptional, int32_t{-273}, int32_t{1000});
  r.integer("sm_clock_mhz", &g.sm_clock_mhz, Presence::kOptional, uint32_t{0}, uint32_t{100'000});
  r.integer("memory_clock_mhz", &g.memory_clock_mhz, Presence::kOptional, uint32_t{0},
            uint32_t{100'000});
  r.optionalInteger("ecc_corrected", &g.ecc_corrected, uint64_t{0}, uint64_t{1} << 62);
  r.optionalInteger("ecc_uncorrected", &g.ecc_uncorrected, uint64_t{0}, uint64_t{1} << 62);
  std::vector<ProcessJson> processes;
  r.objectList("processes", &processes, Presence::kOptional, 4096);
  for (ProcessJson& p : processes)
    g.processes.push_back(p.use);
  return r.finish();
}

struct TelemetryJson {
  int64_t taken_at_us = 0;
  bool simulated = false;
  std::vector<GpuReading> gpus;
};
Status fromJson(const json& j, TelemetryJson* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("taken_at_us", &out->taken_at_us, Presence::kOptional, int64_t{0}, kMaxI64);
  r.boolean("simulated", &out->simulated);
  std::vector<GpuSampleJson> gpus;
  r.objectList("gpus", &gpus, Presence::kRequired, 1024);
  for (GpuSampleJson& g : gpus) {
    g.reading.simulated = out->simulated;
    out->gpus.push_back(std::move(g.reading));
  }
  return r.finish();
}

struct FindingJson {
  std::string check;
  std::string severity;
  std::string gpu_uuid;
  bool unhealthy = false;
  std::string message;
};
Status fromJson(const json& j, FindingJson* out, std::string_view path) {
  ObjectReader r(j, path);
  int64_t n = 0;
  std::string text;
  r.string("check", &out->check, Presence::kRequired);
  r.string("severity", &out->severity);
  r.string("gpu_uuid", &out->gpu_uuid);
  r.integer("pid", &n, Presence::kOptional, int64_t{0}, kMaxI64);
  r.integer("used_mib", &n, Presence::kOptional, int64_t{0}, kMaxI64);
  r.boolean("unhealthy", &out->unhealthy);
  r.string("message", &out->message);
  r.string("action", &text);
  return r.finish();
}

// ---- encoding

json assignmentJson(int64_t job_id, uint32_t task, int32_t attempt, int64_t lease_epoch) {
  return json{
      {"job_id", job_id}, {"task", task}, {"attempt", attempt}, {"lease_epoch", lease_epoch}};
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

json taskEntryJson(const TaskAssignment& a,
                   const std::function<std::string(const std::string&)>& address_of) {
  const api::JobSpec& spec = a.spec;
  // An interactive allocation without a command holds its resources until cancelled or its
  // time limit: its task only waits (users enter it with `gpool shell`).
  std::vector<std::string> argv = spec.command;
  if (argv.empty() && spec.interactive) argv = {"/bin/sleep", "infinity"};
  json launch{{"argv", argv}, {"user", a.user}, {"uid", a.uid}};
  if (!spec.env.empty()) launch["env"] = spec.env;
  if (!spec.working_dir.empty()) launch["working_dir"] = spec.working_dir;
  if (a.allocation.cpus_milli != 0) launch["cpus_milli"] = a.allocation.cpus_milli;
  if (a.allocation.ram_mib != 0) launch["memory_mib"] = a.allocation.ram_mib;
  std::vector<std::string> gpus = a.allocation.gpuUuids();
  if (!gpus.empty()) launch["gpus"] = gpus;
  // A shared slice of one GPU is enforced by the interposer; whole GPUs need nothing.
  if (a.allocation.slices.size() == 1 && !a.allocation.slices[0].exclusive) {
    const api::Slice& s = a.allocation.slices[0];
    launch["slice"] = json{{"memory_mib", s.memory_mib}, {"compute_milli", s.compute_milli}};
  }
  if (std::optional<TaskRendezvous> r =
          rendezvousFor(a.job_id, a.task, a.task_nodes, a.allocation.rendezvous_port, address_of)) {
    launch["rendezvous"] = json{{"master_addr", r->master_addr}, {"master_port", r->master_port},
                                {"world_size", r->world_size},   {"rank", r->rank},
                                {"local_rank", r->local_rank},   {"node_rank", r->node_rank}};
  }
  if (spec.time_limit_seconds > 0) launch["time_limit_seconds"] = spec.time_limit_seconds;
  if (a.grace_s) launch["grace_seconds"] = *a.grace_s;
  return json{{"assignment", assignmentJson(a.job_id, a.task, a.attempt, a.lease_epoch)},
              {"requeueable", spec.preemptible},
              {"launch", std::move(launch)}};
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
  return router.addWebSocket("/v1/agent", std::move(handler));
}

void AgentLink::onOpen(const net::WebSocketConnectionPtr& conn) {
  auto session = std::make_shared<Session>();
  session->conn = conn;
  std::lock_guard lock(mu_);
  sessions_[conn->id()] = std::move(session);
}

void AgentLink::onClose(const net::WebSocketConnectionPtr& conn) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(conn->id());
  if (it == sessions_.end()) return;
  SessionPtr session = it->second;
  sessions_.erase(it);
  if (!session->node.empty()) {
    auto n = by_node_.find(session->node);
    if (n != by_node_.end() && n->second == session) {
      by_node_.erase(n);
      spdlog::info("agent of node {} disconnected", session->node);
    }
  }
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

void AgentLink::send(const SessionPtr& session, std::string_view type, json body) {
  // The number and the queueing under one lock, so that messages leave in sequence order.
  std::lock_guard lock(mu_);
  json msg{{"v", kAgentProtocolVersion},
           {"type", type},
           {"seq", ++session->seq_out},
           {"ack", session->last_seq_in},
           {"body", std::move(body)}};
  (void)session->conn->send(api::dumpJson(msg));
}

void AgentLink::sendError(const SessionPtr& session, std::string_view code,
                          std::string_view message, int64_t in_reply_to) {
  send(session, "error", json{{"code", code}, {"message", message}, {"in_reply_to", in_reply_to}});
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
  int64_t seq = 0;
  if (msg.is_object() && msg.contains("seq") && msg["seq"].is_number_integer()) {
    seq = msg["seq"].get<int64_t>();
  }
  // The version first: a newer peer's frames may not decode as ours.
  if (msg.is_object() && msg.contains("v") && msg["v"].is_number_integer() &&
      msg["v"].get<int64_t>() > kAgentProtocolVersion) {
    std::string why = "protocol version " + std::to_string(msg["v"].get<int64_t>()) +
                      " is not supported (this controller speaks " +
                      std::to_string(kAgentProtocolVersion) + ")";
    spdlog::warn("agent connection {}: {}", conn->id(), why);
    conn->close(kCloseUnsupportedVersion, why);
    return;
  }
  Envelope env;
  RawObject body;
  ObjectReader r(msg, "");
  r.integer("v", &env.v, Presence::kRequired, int64_t{1}, kMaxI64);
  r.string("type", &env.type, Presence::kRequired);
  r.integer("seq", &env.seq, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("ack", &env.ack, Presence::kOptional, int64_t{0}, kMaxI64);
  r.object("body", &body, Presence::kRequired);
  if (Status s = r.finish(); !s.isOk()) {
    sendError(session, "invalid_argument", s.message(), seq);
    return;
  }
  env.body = std::move(body.value);
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
  Status s;
  if (env.type == "hello") {
    s = onHello(session, env.body, env.seq);
  } else if (env.type == "heartbeat") {
    s = onHeartbeat(session, env.body);
  } else if (env.type == "task_update") {
    s = onTaskUpdate(session, env.body);
  } else if (env.type == "telemetry") {
    s = onTelemetry(session, env.body);
  } else if (env.type == "health") {
    s = onHealth(session, env.body);
  } else if (env.type == "log_data") {
    s = onLogData(session, env.body);
  } else if (env.type == "error") {
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

Status AgentLink::onHello(const SessionPtr& session, const json& body, int64_t) {
  NodeJson node;
  InventoryJson inventory;
  std::vector<ReportJson> tasks;
  int64_t last_epoch = 0;
  ObjectReader r(body, "");
  r.object("node", &node, Presence::kRequired);
  r.object("gpus", &inventory, Presence::kRequired);
  r.objectList("tasks", &tasks);
  r.integer("last_node_epoch", &last_epoch, Presence::kOptional, int64_t{0}, kMaxI64);
  GPOOL_RETURN_IF_ERROR(r.finish());
  if (!session->node.empty() && session->node != node.node.name) {
    return Status::invalidArgument("node.name: this connection said hello as '" + session->node +
                                   "'");
  }
  node.node.gpus = std::move(inventory.gpus);
  std::string name = node.node.name;
  const std::string hostname = node.hostname.empty() ? name : node.hostname;
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
  Result<int64_t> epoch = registry_.registerNode(std::move(node.node));
  if (!epoch.ok()) {
    spdlog::error("cannot register node {}: {}", name, epoch.status().toString());
    return Status::internal("cannot register the node: " + epoch.status().message());
  }
  spdlog::info("agent of node {} said hello (node epoch {}, {} tasks reported)", name, *epoch,
               tasks.size());
  // The welcome goes out before the connection serves the node, so that no assign overtakes it.
  json welcome{{"node_epoch", *epoch},
               {"lease",
                {{"duration_s", options_.lease_duration_s},
                 {"renew_every_s", options_.heartbeat_interval_s}}},
               {"config",
                {{"heartbeat_interval_s", options_.heartbeat_interval_s},
                 {"telemetry_interval_s", options_.telemetry_interval_s}}}};
  if (!credential.empty()) welcome["node_credential"] = credential;
  send(session, "welcome", std::move(welcome));
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
  for (const ReportJson& t : tasks) {
    if (!t.assignment) continue;
    applyReport(session, taskReportFrom<TaskReport>(t));
  }
  // The loop runs a pass soon: the node's resources are back.
  if (loop_) loop_->jobsChanged();
  Result<json> desired = desiredTasks(name, *epoch);
  if (!desired.ok()) {
    // The store failed: without the full state the agent must not reconcile (it would stop
    // everything); it reconnects and says hello again.
    spdlog::error("node {}: cannot read its desired state: {}", name, desired.status().toString());
    session->conn->close(net::kCloseInternal, "cannot read the desired state");
    return Status::ok();
  }
  send(session, "desired_state",
       json{{"node_epoch", *epoch}, {"tasks", std::move(*desired)}, {"drain", false}});
  return Status::ok();
}

Result<json> AgentLink::desiredTasks(const std::string& node, int64_t node_epoch) {
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::JobRecord> running,
                         store_.jobsInStates({"RUNNING", "COMPLETING"}));
  // The grace at the time limit, as the assign carried it (the QoS level's grace_time).
  std::map<std::string, int64_t> graces;
  if (loop_ != nullptr && !running.empty()) {
    GPOOL_ASSIGN_OR_RETURN(graces, loop_->timeLimitGraces());
  }
  json out = json::array();
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
      t.node = node;
      t.node_epoch = node_epoch;
      t.user = record.user;
      t.uid = record.uid;
      t.spec = job->spec;
      t.allocation = a;
      t.task_nodes = task_nodes;
      if (auto g = graces.find(job->spec.qos); g != graces.end()) t.grace_s = g->second;
      out.push_back(taskEntryJson(t, [this](const std::string& n) { return addressOf(n); }));
    }
  }
  return out;
}

Status AgentLink::onHeartbeat(const SessionPtr& session, const json& body) {
  int64_t time_us = 0;
  bool lease_ok = false;
  std::optional<RawObject> telemetry;
  ObjectReader r(body, "");
  r.integer("time_us", &time_us, Presence::kOptional, int64_t{0}, kMaxI64);
  r.boolean("lease_ok", &lease_ok);
  r.optionalObject("telemetry", &telemetry);
  GPOOL_RETURN_IF_ERROR(r.finish());
  Status s = registry_.heartbeat(session->node);
  if (!s.isOk()) {
    // DOWN (or forgotten): its tasks may have been moved; only a new hello reconciles.
    spdlog::warn("node {}: heartbeat refused ({}); closing so that it says hello again",
                 session->node, s.toString());
    session->conn->close(kCloseNodeDown, s.message());
    return Status::ok();
  }
  TimePoint until = clock_.now() + std::chrono::seconds(options_.lease_duration_s);
  send(session, "lease",
       json{{"node_epoch", session->node_epoch}, {"valid_until", toUnixMicros(until)}});
  return Status::ok();
}

Status AgentLink::onTaskUpdate(const SessionPtr& session, const json& body) {
  ReportJson t;
  GPOOL_RETURN_IF_ERROR(fromJson(body, &t, ""));
  if (!t.assignment) return Status::invalidArgument("assignment: required field is missing");
  applyReport(session, taskReportFrom<TaskReport>(t));
  return Status::ok();
}

void AgentLink::recordTaskFiles(int64_t job_id, const TaskReport& report, const std::string& what) {
  // Where its output goes and how to enter it: `gpool logs` and `gpool shell` read them from
  // the job's allocation.
  if (report.log_paths.size() != 2 && report.shell_socket.empty()) return;
  store::TaskFiles files;
  if (report.log_paths.size() == 2) {
    files.stdout_log = report.log_paths[0];
    files.stderr_log = report.log_paths[1];
  }
  files.shell_socket = report.shell_socket;
  Status s = store_.recordTaskFiles(job_id, report.lease_epoch, report.task, files);
  if (!s.isOk()) spdlog::info("{}: task files not recorded: {}", what, s.toString());
}

Result<std::map<std::string, std::vector<GpuTenant>>> AgentLink::tenantsOf(
    const std::string& node) {
  std::lock_guard lock(tenants_mu_);
  Micros mono = clock_.monotonic();
  if (!tenants_read_at_ || mono - *tenants_read_at_ >= std::chrono::seconds(1)) {
    GPOOL_ASSIGN_OR_RETURN(std::vector<store::JobRecord> running,
                           store_.jobsInStates({"RUNNING", "COMPLETING"}));
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

Status AgentLink::onTelemetry(const SessionPtr& session, const json& body) {
  TelemetryJson sample;
  GPOOL_RETURN_IF_ERROR(fromJson(body, &sample, ""));
  if (telemetry_ == nullptr) return Status::ok();
  // The controller's clock, not the agent's: histories of all nodes share one time line.
  TimePoint now = clock_.now();
  Result<std::map<std::string, std::vector<GpuTenant>>> tenants = tenantsOf(session->node);
  if (!tenants.ok()) {
    spdlog::warn("node {}: telemetry without attribution (store: {})", session->node,
                 tenants.status().toString());
    tenants = std::map<std::string, std::vector<GpuTenant>>{};
  }
  telemetry_->ingest(session->node, now, sample.gpus, *tenants);
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

Status AgentLink::onHealth(const SessionPtr& session, const json& body) {
  std::vector<FindingJson> findings;
  int64_t time_us = 0;
  ObjectReader r(body, "");
  r.objectList("findings", &findings, Presence::kRequired, 100'000);
  r.integer("time_us", &time_us, Presence::kOptional, int64_t{0}, kMaxI64);
  GPOOL_RETURN_IF_ERROR(r.finish());
  // Per GPU: unhealthy when a finding says so; degraded for other warnings about the GPU
  // itself (process and memory hygiene findings leave it as it is: the kill policy acts).
  std::map<std::string, std::pair<api::GpuHealth, std::string>> health;
  std::string node_reason;  // findings about the server itself
  for (const FindingJson& f : findings) {
    if (f.gpu_uuid.empty()) {
      if (f.severity == "info" && !f.unhealthy) continue;
      if (!node_reason.empty()) node_reason += "; ";
      node_reason += f.message.empty() ? f.check : f.message;
      continue;
    }
    if (f.check == "stray_process" || f.check == "dead_task_process" ||
        f.check == "leaked_memory") {
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
  Result<bool> changed = registry_.setGpuHealth(session->node, health, node_reason);
  if (!changed.ok()) {
    spdlog::error("node {}: cannot record GPU health: {}", session->node,
                  changed.status().toString());
    return Status::internal("cannot record the GPU health: " + changed.status().message());
  }
  if (*changed) {
    for (const auto& [uuid, h] : health) {
      spdlog::warn("node {} GPU {}: {} ({})", session->node, uuid, api::gpuHealthName(h.first),
                   h.second);
    }
    if (!node_reason.empty()) spdlog::warn("node {}: {}", session->node, node_reason);
    if (health.empty()) spdlog::info("node {}: every GPU healthy again", session->node);
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
  json body;
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
    body = json{{"request", read.request_id},
                {"job_id", request.job_id},
                {"task", request.task},
                {"lease_epoch", request.lease_epoch},
                {"stream", request.stderr_stream ? "stderr" : "stdout"},
                {"offset", request.offset},
                {"max_bytes", std::min(request.max_bytes, kMaxRelayedLogBytes)}};
  }
  send(session, "read_log", std::move(body));
  return std::optional<RemoteLogPiece>();
}

Status AgentLink::onLogData(const SessionPtr& session, const json& body) {
  int64_t request_id = 0;
  int64_t job_id = 0;
  int64_t task = 0;
  std::string stream;
  int64_t offset = 0;
  int64_t size = 0;
  bool found = false;
  std::string data;
  std::string error;
  int64_t lease_epoch = 0;
  ObjectReader r(body, "");
  r.integer("request", &request_id, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("job_id", &job_id, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("task", &task, Presence::kRequired, int64_t{0},
            int64_t{std::numeric_limits<uint32_t>::max()});
  r.integer("lease_epoch", &lease_epoch, Presence::kOptional, int64_t{0}, kMaxI64);
  r.string("stream", &stream, Presence::kRequired);
  r.integer("offset", &offset, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("size", &size, Presence::kOptional, int64_t{0}, kMaxI64);
  r.boolean("found", &found);
  r.string("data", &data);
  r.string("error", &error);
  r.check(stream == "stdout" || stream == "stderr", "stream", "expected stdout or stderr");
  GPOOL_RETURN_IF_ERROR(r.finish());
  Result<std::string> bytes = base64Decode(data);
  if (!bytes.ok()) return Status::invalidArgument("data: " + bytes.status().message());
  if (bytes->size() > kMaxRelayedLogBytes) {
    return Status::invalidArgument("data: " + std::to_string(bytes->size()) +
                                   " bytes, more than the " + std::to_string(kMaxRelayedLogBytes) +
                                   " a read may return");
  }
  std::lock_guard lock(logs_mu_);
  auto it = log_reads_.find(LogKey{job_id, static_cast<uint32_t>(task), stream == "stderr",
                                   static_cast<uint64_t>(offset)});
  // Only the answer to the request sent to this node counts; a late answer to an expired or
  // repeated request, or one from another node, is dropped.
  if (it == log_reads_.end() || it->second.request_id != request_id ||
      it->second.node != session->node || it->second.answered) {
    return Status::ok();
  }
  LogRead& read = it->second;
  read.answered = true;
  read.changed_at = clock_.monotonic();
  if (!error.empty()) {
    read.answer = Status::failedPrecondition("the agent of node " + session->node + ": " + error);
  } else {
    read.answer = RemoteLogPiece{found, static_cast<uint64_t>(size), std::move(*bytes)};
  }
  return Status::ok();
}

void AgentLink::applyReport(const SessionPtr& session, const TaskReport& report) {
  if (!report.job_id || loop_ == nullptr) return;
  int64_t job_id = *report.job_id;
  std::string what = "job " + std::to_string(job_id) + " task " + std::to_string(report.task) +
                     " (epoch " + std::to_string(report.lease_epoch) + ") on " + session->node;
  // Only the current assignment of this task to this node counts (fencing).
  Result<store::JobRecord> record = store_.getJob(job_id);
  bool current = false;
  bool live = false;
  if (record.ok()) {
    live = record->state == "RUNNING" || record->state == "COMPLETING";
    Result<api::Job> job = store::apiJobFrom(*record);
    if (job.ok() && record->epoch == report.lease_epoch) {
      for (const api::Allocation& a : job->allocations) {
        if (a.task == report.task && a.node == session->node) current = true;
      }
    }
  } else if (record.status().code() != StatusCode::kNotFound) {
    spdlog::error("{}: cannot read the job: {}", what, record.status().toString());
    return;  // the next hello reports it again
  }
  if (!current || !live) {
    // Stale or no longer wanted: record nothing; a task still running must stop (the agent
    // stops only this attempt, never a newer one).
    if (report.state != "exited") {
      spdlog::info("{}: not a current assignment; telling the agent to stop it", what);
      send(session, "cancel",
           json{{"assignment",
                 assignmentJson(job_id, report.task, report.attempt, report.lease_epoch)},
                {"signal", "TERM"},
                {"reason", "cancelled"}});
    }
    return;
  }
  if (report.state == "running") {
    bool first = false;
    bool first_of_task = false;
    {
      std::lock_guard lock(mu_);
      if (report.pid > 0) task_pids_[{job_id, report.task}] = report.pid;
      first = started_.insert({job_id, report.lease_epoch}).second;
      first_of_task = files_recorded_.insert({job_id, report.lease_epoch, report.task}).second;
    }
    if (first) {
      Status s = loop_->taskStarted(job_id, report.lease_epoch);
      if (!s.isOk()) spdlog::info("{}: start not recorded: {}", what, s.toString());
    }
    // Each task's own logs (not only the first task's): `gpool run` and `gpool logs --task K`.
    if (first_of_task) recordTaskFiles(job_id, report, what);
    return;
  }
  if (report.state != "exited") return;
  // A short task may be reported only once it exited: its logs must still be findable.
  recordTaskFiles(job_id, report, what);
  {
    std::lock_guard lock(mu_);
    started_.erase({job_id, report.lease_epoch});
    files_recorded_.erase({job_id, report.lease_epoch, report.task});
    task_pids_.erase({job_id, report.task});
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
  Status s =
      loop_->taskEnded(job_id, report.task, report.lease_epoch, code, outcome, report.reason);
  if (s.isOk()) {
    spdlog::info("{}: ended ({}, exit code {})", what, report.final_state, code);
  } else if (s.code() == StatusCode::kFailedPrecondition) {
    spdlog::debug("{}: end already recorded: {}", what, s.toString());
  } else {
    spdlog::error("{}: cannot record its end: {}", what, s.toString());
  }
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
  json entry = taskEntryJson(a, [this](const std::string& n) { return addressOf(n); });
  {
    std::lock_guard lock(mu_);
    entry["node_epoch"] = session->node_epoch;
  }
  send(session, "assign", std::move(entry));
}

void AgentLink::cancel(const std::string& node, int64_t job_id, uint32_t task, int64_t lease_epoch,
                       int64_t grace_s, const std::string& reason) {
  SessionPtr session = current(node);
  if (!session) {
    spdlog::info("cancel job {} task {} on {}: node not connected; its next hello stops it", job_id,
                 task, node);
    return;
  }
  json body{{"assignment", json{{"job_id", job_id}, {"task", task}, {"lease_epoch", lease_epoch}}},
            {"signal", "TERM"},
            {"reason", reason}};
  if (grace_s >= 0) body["grace_s"] = grace_s;
  send(session, "cancel", std::move(body));
}

}  // namespace gpool::controller
