#include "protocol/agent_protocol.h"

#include <limits>
#include <set>

#include "api/json_reader.h"
#include "api/node.h"
#include "common/base64.h"
#include "common/container_spec.h"

namespace gpool::protocol {

using api::ObjectReader;
using api::Presence;
using nlohmann::json;

namespace {

constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr uint32_t kMaxTaskIndex = 1'000'000;

// A body or envelope object taken as it is; its own decoder checks its fields.
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

std::string join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

// Takes the number `key` out of the object `j` (a copy the caller owns), so that an
// ObjectReader over the rest checks the other fields; the reader has no fractional numbers.
Status takeNumber(json& j, const char* key, double* out, std::string_view path) {
  if (!j.is_object()) return Status::ok();  // the reader reports the type
  auto it = j.find(key);
  if (it == j.end()) return Status::ok();
  if (it->is_null()) {
    j.erase(it);
    return Status::ok();
  }
  if (!it->is_number()) {
    return Status::invalidArgument(join(path, key) + ": expected a number, got " +
                                   std::string(api::jsonTypeName(*it)));
  }
  *out = it->get<double>();
  j.erase(it);
  return Status::ok();
}

// Takes an array of integers in [0, max] out of `j` (as takeNumber).
Status takeIntegerList(json& j, const char* key, std::vector<uint32_t>* out, uint32_t max,
                       std::string_view path) {
  if (!j.is_object()) return Status::ok();
  auto it = j.find(key);
  if (it == j.end()) return Status::ok();
  if (!it->is_null()) {
    if (!it->is_array()) {
      return Status::invalidArgument(join(path, key) + ": expected an array, got " +
                                     std::string(api::jsonTypeName(*it)));
    }
    for (const json& e : *it) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > int64_t{max}) {
        return Status::invalidArgument(join(path, key) + ": expected integers from 0 to " +
                                       std::to_string(max));
      }
      out->push_back(e.get<uint32_t>());
    }
  }
  j.erase(it);
  return Status::ok();
}

void readTaskEntryFields(ObjectReader& r, TaskEntry* out);

}  // namespace

// ---- envelope

Result<Envelope> decodeEnvelope(const json& msg) {
  if (msg.is_object()) {
    auto v = msg.find("v");
    if (v != msg.end() && v->is_number_integer()) {
      bool newer = v->is_number_unsigned() ? v->get<uint64_t>() > uint64_t{kVersion}
                                           : v->get<int64_t>() > int64_t{kVersion};
      if (newer) {
        return Status::failedPrecondition("v: protocol version " + v->dump() +
                                          " is not supported (this side speaks " +
                                          std::to_string(kVersion) + ")");
      }
    }
  }
  Envelope e;
  RawObject body;
  ObjectReader r(msg, "");
  r.integer("v", &e.v, Presence::kRequired, 1, kVersion);
  r.string("type", &e.type, Presence::kRequired);
  r.integer("seq", &e.seq, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("ack", &e.ack, Presence::kOptional, int64_t{0}, kMaxI64);
  r.object("body", &body, Presence::kRequired);
  GPOOL_RETURN_IF_ERROR(r.finish());
  e.body = std::move(body.value);
  return e;
}

json encodeEnvelope(std::string_view type, int64_t seq, int64_t ack, json body) {
  return json{
      {"v", kVersion}, {"type", type}, {"seq", seq}, {"ack", ack}, {"body", std::move(body)}};
}

int64_t peekSeq(const json& msg) {
  if (!msg.is_object()) return 0;
  auto it = msg.find("seq");
  if (it == msg.end() || !it->is_number_integer()) return 0;
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(kMaxI64)) return 0;
  return it->get<int64_t>();
}

// ---- identifiers

Status fromJson(const json& j, Assignment* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("job_id", &out->job_id, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("task", &out->task, Presence::kRequired, uint32_t{0}, kMaxTaskIndex);
  r.integer("attempt", &out->attempt, Presence::kOptional, int32_t{0},
            std::numeric_limits<int32_t>::max());
  r.integer("lease_epoch", &out->lease_epoch, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("incarnation", &out->incarnation, Presence::kOptional, int64_t{0}, kMaxI64);
  return r.finish();
}

json toJson(const Assignment& a) {
  json j{{"job_id", a.job_id},
         {"task", a.task},
         {"attempt", a.attempt},
         {"lease_epoch", a.lease_epoch}};
  if (a.incarnation != 0) j["incarnation"] = a.incarnation;
  return j;
}

std::string taskName(int64_t job_id, uint32_t task) {
  return std::to_string(job_id) + "." + std::to_string(task);
}

std::string taskName(const Assignment& a) {
  return taskName(a.job_id, a.task);
}

// ---- hello

Status fromJson(const json& j, SliceEnforcement* out, std::string_view path) {
  ObjectReader r(j, path);
  r.boolean("interposer", &out->interposer, Presence::kRequired);
  r.boolean("backstop", &out->backstop, Presence::kRequired);
  r.string("detail", &out->detail);
  return r.finish();
}

json toJson(const SliceEnforcement& s) {
  return json{{"interposer", s.interposer}, {"backstop", s.backstop}, {"detail", s.detail}};
}

Status fromJson(const json& j, NodeInfo* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("name", &out->name, Presence::kRequired);
  r.string("hostname", &out->hostname);
  r.stringMap("labels", &out->labels);
  r.integer("cpu_millis", &out->cpu_millis, Presence::kRequired, uint64_t{0}, uint64_t{1} << 32);
  r.integer("ram_mib", &out->ram_mib, Presence::kRequired, uint64_t{0}, uint64_t{1} << 40);
  r.string("agent_version", &out->agent_version);
  r.string("os", &out->os);
  r.string("cgroup", &out->cgroup);
  if (r.has("slices")) {
    out->slices.emplace();
    r.object("slices", &*out->slices);
  }
  return r.finish();
}

json toJson(const NodeInfo& n) {
  json j{{"name", n.name},       {"hostname", n.hostname},
         {"labels", n.labels},   {"cpu_millis", n.cpu_millis},
         {"ram_mib", n.ram_mib}, {"agent_version", n.agent_version},
         {"os", n.os},           {"cgroup", n.cgroup}};
  if (n.slices) j["slices"] = toJson(*n.slices);
  return j;
}

Status fromJson(const json& j, MigInstance* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("uuid", &out->uuid);
  r.string("profile", &out->profile);
  r.integer("gpu_instance_id", &out->gpu_instance_id, Presence::kOptional, uint64_t{0},
            uint64_t{1} << 32);
  r.integer("compute_instance_id", &out->compute_instance_id, Presence::kOptional, uint64_t{0},
            uint64_t{1} << 32);
  r.integer("memory_mib", &out->memory_mib, Presence::kOptional, uint64_t{0}, uint64_t{1} << 40);
  return r.finish();
}

Status fromJson(const json& j, GpuInfo* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("uuid", &out->uuid, Presence::kRequired);
  r.check(!out->uuid.empty() || !r.ok(), "uuid", "must not be empty");
  r.integer("index", &out->index, Presence::kRequired, uint32_t{0}, uint32_t{1023});
  r.string("pci_bus_id", &out->pci_bus_id);
  r.string("model", &out->model, Presence::kRequired);
  r.integer("memory_total_mib", &out->memory_total_mib, Presence::kRequired, uint64_t{0},
            uint64_t{1} << 40);
  r.string("compute_capability", &out->compute_capability);
  const std::string& cc = out->compute_capability;
  if (r.ok() && !cc.empty() && cc != "0.0") {
    Result<api::ComputeCapability> parsed = api::parseComputeCapability(cc);
    if (!parsed.ok()) r.fail("compute_capability", parsed.status().message());
  }
  r.boolean("mig_enabled", &out->mig_enabled);
  r.objectList("mig_instances", &out->mig_instances);
  r.boolean("simulated", &out->simulated);
  return r.finish();
}

Status fromJson(const json& j, GpuLinkInfo* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("gpu_a", &out->gpu_a, Presence::kRequired, uint32_t{0}, uint32_t{1023});
  r.integer("gpu_b", &out->gpu_b, Presence::kRequired, uint32_t{0}, uint32_t{1023});
  r.string("level", &out->level, Presence::kRequired);
  r.integer("nvlink_count", &out->nvlink_count, Presence::kOptional, uint32_t{0}, uint32_t{64});
  if (r.ok() && out->level != "X" && out->level.rfind("NV", 0) != 0) {
    Result<api::PcieLevel> level = api::parsePcieLevel(out->level);
    if (!level.ok()) r.fail("level", level.status().message());
  }
  return r.finish();
}

Status fromJson(const json& j, Inventory* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("backend", &out->backend);
  r.boolean("simulated", &out->simulated);
  r.string("driver_version", &out->driver_version);
  r.string("cuda_driver_version", &out->cuda_driver_version);
  r.objectList("gpus", &out->gpus, Presence::kRequired, 1024);
  r.objectList("links", &out->links);
  GPOOL_RETURN_IF_ERROR(r.finish());
  std::set<uint32_t> indexes;
  for (const GpuInfo& g : out->gpus) {
    if (!indexes.insert(g.index).second) {
      return Status::invalidArgument(join(path, "gpus") + ": index " + std::to_string(g.index) +
                                     " appears twice");
    }
  }
  for (size_t i = 0; i < out->links.size(); ++i) {
    const GpuLinkInfo& l = out->links[i];
    if (!indexes.count(l.gpu_a) || !indexes.count(l.gpu_b)) {
      return Status::invalidArgument(join(path, "links") + "[" + std::to_string(i) +
                                     "]: names a GPU index not in gpus");
    }
  }
  return Status::ok();
}

json toJson(const Inventory& inventory) {
  json gpus = json::array();
  for (const GpuInfo& g : inventory.gpus) {
    json mig = json::array();
    for (const MigInstance& m : g.mig_instances) {
      mig.push_back({{"uuid", m.uuid},
                     {"profile", m.profile},
                     {"gpu_instance_id", m.gpu_instance_id},
                     {"compute_instance_id", m.compute_instance_id},
                     {"memory_mib", m.memory_mib}});
    }
    gpus.push_back({{"uuid", g.uuid},
                    {"index", g.index},
                    {"pci_bus_id", g.pci_bus_id},
                    {"model", g.model},
                    {"memory_total_mib", g.memory_total_mib},
                    {"compute_capability", g.compute_capability},
                    {"mig_enabled", g.mig_enabled},
                    {"mig_instances", std::move(mig)},
                    {"simulated", g.simulated}});
  }
  json links = json::array();
  for (const GpuLinkInfo& l : inventory.links) {
    links.push_back({{"gpu_a", l.gpu_a},
                     {"gpu_b", l.gpu_b},
                     {"level", l.level},
                     {"nvlink_count", l.nvlink_count}});
  }
  return json{{"backend", inventory.backend},
              {"simulated", inventory.simulated},
              {"driver_version", inventory.driver_version},
              {"cuda_driver_version", inventory.cuda_driver_version},
              {"gpus", std::move(gpus)},
              {"links", std::move(links)}};
}

std::string_view taskPhaseName(TaskPhase phase) {
  switch (phase) {
    case TaskPhase::kStarting: return "starting";
    case TaskPhase::kRunning: return "running";
    case TaskPhase::kExited: return "exited";
  }
  return "?";
}

namespace {

Result<TaskPhase> parseTaskPhase(std::string_view text) {
  if (text == "starting") return TaskPhase::kStarting;
  if (text == "running") return TaskPhase::kRunning;
  if (text == "exited") return TaskPhase::kExited;
  return Status::invalidArgument("expected starting, running or exited");
}

}  // namespace

Status fromJson(const json& j, TaskReport* out, std::string_view path) {
  ObjectReader r(j, path);
  r.optionalObject("assignment", &out->assignment);
  r.string("name", &out->name);
  r.parsed("state", &out->state, &parseTaskPhase, Presence::kRequired);
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

json toJson(const TaskReport& t) {
  json j{{"state", taskPhaseName(t.state)},
         {"final_state", t.final_state},
         {"pid", t.pid},
         {"started_at_us", t.started_at_us}};
  if (t.assignment) j["assignment"] = toJson(*t.assignment);
  if (!t.name.empty()) j["name"] = t.name;
  if (!t.log_paths.empty()) j["log_paths"] = t.log_paths;
  if (!t.shell_socket.empty()) j["shell_socket"] = t.shell_socket;
  if (t.state == TaskPhase::kExited) {
    j["ended_at_us"] = t.ended_at_us;
    j["exit_code"] = t.exit_code;
    j["signal"] = t.signal;
    j["oom_killed"] = t.oom_killed;
    j["timed_out"] = t.timed_out;
    j["cancelled"] = t.cancelled;
    if (!t.reason.empty()) j["reason"] = t.reason;
  }
  if (!t.stop_reason.empty()) j["stop_reason"] = t.stop_reason;
  return j;
}

Status fromJson(const json& j, Hello* out, std::string_view path) {
  ObjectReader r(j, path);
  r.object("node", &out->node, Presence::kRequired);
  r.object("gpus", &out->gpus, Presence::kRequired);
  r.objectList("tasks", &out->tasks);
  r.integer("last_node_epoch", &out->last_node_epoch, Presence::kOptional, int64_t{0}, kMaxI64);
  return r.finish();
}

json toJson(const Hello& m) {
  json tasks = json::array();
  for (const TaskReport& t : m.tasks)
    tasks.push_back(toJson(t));
  return json{{"node", toJson(m.node)},
              {"gpus", toJson(m.gpus)},
              {"tasks", std::move(tasks)},
              {"last_node_epoch", m.last_node_epoch}};
}

// ---- heartbeat, task_update

Status fromJson(const json& j, Heartbeat* out, std::string_view path) {
  std::optional<RawObject> telemetry;
  ObjectReader r(j, path);
  r.integer("time_us", &out->time_us, Presence::kOptional, int64_t{0}, kMaxI64);
  r.boolean("lease_ok", &out->lease_ok);
  r.optionalObject("telemetry", &telemetry);
  return r.finish();
}

json toJson(const Heartbeat& m) {
  return json{{"time_us", m.time_us}, {"lease_ok", m.lease_ok}};
}

Status fromJson(const json& j, TaskUpdate* out, std::string_view path) {
  GPOOL_RETURN_IF_ERROR(fromJson(j, &out->report, path));
  if (!out->report.assignment) {
    return Status::invalidArgument(join(path, "assignment") + ": required field is missing");
  }
  return Status::ok();
}

json toJson(const TaskUpdate& m) {
  return toJson(m.report);
}

// ---- telemetry, health

Status fromJson(const json& j, GpuProcessSample* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("pid", &out->pid, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("used_mib", &out->used_mib, Presence::kOptional, uint64_t{0}, uint64_t{1} << 40);
  r.optionalInteger("job_id", &out->job_id, int64_t{0}, kMaxI64);
  r.optionalInteger("task", &out->task, uint32_t{0}, kMaxTaskIndex);
  return r.finish();
}

Status fromJson(const json& j, SliceUsageSample* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("job_id", &out->job_id, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("task", &out->task, Presence::kRequired, uint32_t{0}, kMaxTaskIndex);
  r.integer("compute_used_permille", &out->compute_used_permille, Presence::kOptional, uint32_t{0},
            uint32_t{1000});
  r.integer("kernel_launches", &out->kernel_launches, Presence::kOptional, uint64_t{0},
            uint64_t{1} << 62);
  r.optionalInteger("since_last_launch_us", &out->since_last_launch_us, int64_t{0}, kMaxI64);
  return r.finish();
}

Status fromJson(const json& in, GpuSample* out, std::string_view path) {
  json j = in;
  GPOOL_RETURN_IF_ERROR(takeNumber(j, "power_w", &out->power_w, path));
  GPOOL_RETURN_IF_ERROR(takeIntegerList(j, "xid_errors", &out->xid_errors, 100'000, path));
  ObjectReader r(j, path);
  r.string("uuid", &out->uuid, Presence::kRequired);
  r.check(!out->uuid.empty() || !r.ok(), "uuid", "must not be empty");
  r.integer("index", &out->index, Presence::kOptional, uint32_t{0}, uint32_t{1023});
  r.integer("utilization_pct", &out->utilization_pct, Presence::kOptional, uint32_t{0},
            uint32_t{100});
  r.integer("memory_utilization_pct", &out->memory_utilization_pct, Presence::kOptional,
            uint32_t{0}, uint32_t{100});
  r.integer("memory_used_mib", &out->memory_used_mib, Presence::kOptional, uint64_t{0},
            uint64_t{1} << 40);
  r.integer("memory_total_mib", &out->memory_total_mib, Presence::kOptional, uint64_t{0},
            uint64_t{1} << 40);
  r.integer("temperature_c", &out->temperature_c, Presence::kOptional, int32_t{-273},
            int32_t{1000});
  r.integer("sm_clock_mhz", &out->sm_clock_mhz, Presence::kOptional, uint32_t{0},
            uint32_t{100'000});
  r.integer("memory_clock_mhz", &out->memory_clock_mhz, Presence::kOptional, uint32_t{0},
            uint32_t{100'000});
  r.optionalInteger("ecc_corrected", &out->ecc_corrected, uint64_t{0}, uint64_t{1} << 62);
  r.optionalInteger("ecc_uncorrected", &out->ecc_uncorrected, uint64_t{0}, uint64_t{1} << 62);
  r.objectList("processes", &out->processes, Presence::kOptional, 4096);
  r.objectList("slices", &out->slices, Presence::kOptional, 4096);
  return r.finish();
}

json toJson(const GpuSample& g) {
  json processes = json::array();
  for (const GpuProcessSample& p : g.processes) {
    json e{{"pid", p.pid}, {"used_mib", p.used_mib}};
    if (p.job_id) e["job_id"] = *p.job_id;
    if (p.task) e["task"] = *p.task;
    processes.push_back(std::move(e));
  }
  json out{{"uuid", g.uuid},
           {"index", g.index},
           {"utilization_pct", g.utilization_pct},
           {"memory_utilization_pct", g.memory_utilization_pct},
           {"memory_used_mib", g.memory_used_mib},
           {"memory_total_mib", g.memory_total_mib},
           {"temperature_c", g.temperature_c},
           {"power_w", g.power_w},
           {"sm_clock_mhz", g.sm_clock_mhz},
           {"memory_clock_mhz", g.memory_clock_mhz},
           {"ecc_corrected", g.ecc_corrected ? json(*g.ecc_corrected) : json(nullptr)},
           {"ecc_uncorrected", g.ecc_uncorrected ? json(*g.ecc_uncorrected) : json(nullptr)},
           {"xid_errors", g.xid_errors},
           {"processes", std::move(processes)}};
  // Written only when a slice task under the interposer holds this GPU.
  if (!g.slices.empty()) {
    json slices = json::array();
    for (const SliceUsageSample& s : g.slices) {
      json e{{"job_id", s.job_id},
             {"task", s.task},
             {"compute_used_permille", s.compute_used_permille},
             {"kernel_launches", s.kernel_launches}};
      if (s.since_last_launch_us) e["since_last_launch_us"] = *s.since_last_launch_us;
      slices.push_back(std::move(e));
    }
    out["slices"] = std::move(slices);
  }
  return out;
}

Status fromJson(const json& j, Telemetry* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("taken_at_us", &out->taken_at_us, Presence::kOptional, int64_t{0}, kMaxI64);
  r.boolean("simulated", &out->simulated);
  r.objectList("gpus", &out->gpus, Presence::kRequired, 1024);
  return r.finish();
}

json toJson(const Telemetry& m) {
  json gpus = json::array();
  for (const GpuSample& g : m.gpus)
    gpus.push_back(toJson(g));
  return json{{"taken_at_us", m.taken_at_us}, {"simulated", m.simulated}, {"gpus", gpus}};
}

Status fromJson(const json& j, Finding* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("check", &out->check, Presence::kRequired);
  r.string("severity", &out->severity);
  r.string("gpu_uuid", &out->gpu_uuid);
  r.integer("pid", &out->pid, Presence::kOptional, int64_t{0}, kMaxI64);
  r.integer("used_mib", &out->used_mib, Presence::kOptional, int64_t{0}, kMaxI64);
  r.boolean("unhealthy", &out->unhealthy);
  r.string("message", &out->message);
  r.string("action", &out->action);
  r.string("user", &out->user);
  return r.finish();
}

json toJson(const Finding& f) {
  json j{{"check", f.check},    {"severity", f.severity}, {"gpu_uuid", f.gpu_uuid},
         {"pid", f.pid},        {"used_mib", f.used_mib}, {"unhealthy", f.unhealthy},
         {"message", f.message}};
  if (!f.action.empty()) j["action"] = f.action;
  if (!f.user.empty()) j["user"] = f.user;
  return j;
}

Status fromJson(const json& j, Health* out, std::string_view path) {
  ObjectReader r(j, path);
  r.objectList("findings", &out->findings, Presence::kRequired, 100'000);
  r.integer("time_us", &out->time_us, Presence::kOptional, int64_t{0}, kMaxI64);
  return r.finish();
}

json toJson(const Health& m) {
  json findings = json::array();
  for (const Finding& f : m.findings)
    findings.push_back(toJson(f));
  return json{{"findings", std::move(findings)}, {"time_us", m.time_us}};
}

// ---- log_data, error

Status fromJson(const json& j, LogData* out, std::string_view path) {
  std::string data;
  ObjectReader r(j, path);
  r.integer("request", &out->request, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("job_id", &out->job_id, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("task", &out->task, Presence::kRequired, uint32_t{0},
            std::numeric_limits<uint32_t>::max());
  r.integer("lease_epoch", &out->lease_epoch, Presence::kOptional, int64_t{0}, kMaxI64);
  r.string("stream", &out->stream, Presence::kRequired);
  r.check(out->stream == "stdout" || out->stream == "stderr" || !r.ok(), "stream",
          "expected stdout or stderr");
  r.integer("offset", &out->offset, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("size", &out->size, Presence::kOptional, int64_t{0}, kMaxI64);
  r.boolean("found", &out->found);
  r.string("data", &data);
  r.string("error", &out->error);
  GPOOL_RETURN_IF_ERROR(r.finish());
  Result<std::string> bytes = base64Decode(data);
  if (!bytes.ok())
    return Status::invalidArgument(join(path, "data") + ": " + bytes.status().message());
  if (static_cast<int64_t>(bytes->size()) > kMaxLogReadBytes) {
    return Status::invalidArgument(join(path, "data") + ": " + std::to_string(bytes->size()) +
                                   " bytes, more than the " + std::to_string(kMaxLogReadBytes) +
                                   " a read may return");
  }
  out->data = std::move(*bytes);
  return Status::ok();
}

json toJson(const LogData& m) {
  json j{{"request", m.request},         {"job_id", m.job_id}, {"task", m.task},
         {"lease_epoch", m.lease_epoch}, {"stream", m.stream}, {"offset", m.offset}};
  // A piece when the log was found; else "found": false, or the error alone.
  if (m.found) {
    j["found"] = true;
    j["size"] = m.size;
    j["data"] = base64Encode(m.data);
  } else if (m.error.empty()) {
    j["found"] = false;
  }
  if (!m.error.empty()) j["error"] = m.error;
  return j;
}

Status fromJson(const json& j, Error* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("code", &out->code, Presence::kRequired);
  r.string("message", &out->message);
  r.integer("in_reply_to", &out->in_reply_to, Presence::kOptional, int64_t{0}, kMaxI64);
  return r.finish();
}

json toJson(const Error& m) {
  return json{{"code", m.code}, {"message", m.message}, {"in_reply_to", m.in_reply_to}};
}

// ---- welcome

Status fromJson(const json& j, LeaseTerms* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("duration_s", &out->duration_s, Presence::kRequired, int64_t{1}, int64_t{86400});
  r.optionalInteger("renew_every_s", &out->renew_every_s, int64_t{1}, int64_t{86400});
  r.optionalInteger("fence_grace_s", &out->fence_grace_s, int64_t{0}, int64_t{3600});
  return r.finish();
}

Status fromJson(const json& j, WelcomeConfig* out, std::string_view path) {
  ObjectReader r(j, path);
  r.optionalInteger("heartbeat_interval_s", &out->heartbeat_interval_s, int64_t{1}, int64_t{3600});
  r.optionalInteger("telemetry_interval_s", &out->telemetry_interval_s, int64_t{1}, int64_t{3600});
  r.optionalString("stray_policy", &out->stray_policy);
  r.optionalInteger("stray_grace_s", &out->stray_grace_s, int64_t{0}, int64_t{86'400});
  if (out->stray_policy) {
    r.check(*out->stray_policy == "report" || *out->stray_policy == "kill", "stray_policy",
            "expected \"report\" or \"kill\"");
  }
  return r.finish();
}

Status fromJson(const json& j, Welcome* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("node_epoch", &out->node_epoch, Presence::kRequired, int64_t{0}, kMaxI64);
  r.string("node_credential", &out->node_credential);
  r.optionalObject("lease", &out->lease);
  r.optionalObject("config", &out->config);
  return r.finish();
}

json toJson(const Welcome& m) {
  json j{{"node_epoch", m.node_epoch}};
  if (!m.node_credential.empty()) j["node_credential"] = m.node_credential;
  if (m.lease) {
    json lease{{"duration_s", m.lease->duration_s}};
    if (m.lease->renew_every_s) lease["renew_every_s"] = *m.lease->renew_every_s;
    if (m.lease->fence_grace_s) lease["fence_grace_s"] = *m.lease->fence_grace_s;
    j["lease"] = std::move(lease);
  }
  if (m.config) {
    json config = json::object();
    if (m.config->heartbeat_interval_s)
      config["heartbeat_interval_s"] = *m.config->heartbeat_interval_s;
    if (m.config->telemetry_interval_s)
      config["telemetry_interval_s"] = *m.config->telemetry_interval_s;
    if (m.config->stray_policy) config["stray_policy"] = *m.config->stray_policy;
    if (m.config->stray_grace_s) config["stray_grace_s"] = *m.config->stray_grace_s;
    j["config"] = std::move(config);
  }
  return j;
}

// ---- task entries

Status fromJson(const json& j, SliceTerms* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("memory_mib", &out->memory_mib, Presence::kRequired, uint64_t{1}, uint64_t{1} << 40);
  r.integer("compute_milli", &out->compute_milli, Presence::kRequired, uint32_t{1}, uint32_t{1000});
  return r.finish();
}

Status fromJson(const json& j, RendezvousTerms* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("master_addr", &out->master_addr);
  r.integer("master_port", &out->master_port, Presence::kOptional, uint16_t{0}, uint16_t{65535});
  r.integer("world_size", &out->world_size, Presence::kOptional, uint32_t{0}, uint32_t{1u << 20});
  r.integer("rank", &out->rank, Presence::kOptional, uint32_t{0}, uint32_t{1u << 20});
  r.integer("local_rank", &out->local_rank, Presence::kOptional, uint32_t{0}, uint32_t{1u << 20});
  r.integer("node_rank", &out->node_rank, Presence::kOptional, uint32_t{0}, uint32_t{1u << 20});
  return r.finish();
}

Status fromJson(const json& j, Launch* out, std::string_view path) {
  ObjectReader r(j, path);
  r.stringList("argv", &out->argv, Presence::kRequired);
  r.check(!out->argv.empty() || !r.ok(), "argv", "must not be empty");
  r.stringMap("env", &out->env);
  r.string("working_dir", &out->working_dir);
  r.string("user", &out->user, Presence::kRequired);
  r.optionalInteger("uid", &out->uid, uint32_t{0}, uint32_t{0xfffffffe});
  r.optionalInteger("gid", &out->gid, uint32_t{0}, uint32_t{0xfffffffe});
  r.integer("cpus_milli", &out->cpus_milli, Presence::kOptional, uint64_t{0}, uint64_t{1} << 32);
  r.integer("memory_mib", &out->memory_mib, Presence::kOptional, uint64_t{0}, uint64_t{1} << 40);
  r.integer("pids_max", &out->pids_max, Presence::kOptional, uint64_t{0}, uint64_t{1} << 32);
  r.stringList("gpus", &out->gpus);
  r.optionalObject("slice", &out->slice);
  if (out->slice) {
    r.check(out->gpus.size() == 1, "slice", "a slice needs exactly one GPU in gpus");
  }
  r.optionalObject("rendezvous", &out->rendezvous);
  r.integer("time_limit_seconds", &out->time_limit_seconds, Presence::kOptional, int64_t{0},
            int64_t{10} * 365 * 86400);
  r.optionalInteger("grace_seconds", &out->grace_seconds, int64_t{0}, int64_t{86400});
  r.string("image", &out->image);
  r.stringList("mounts", &out->mounts);
  r.string("project_dir", &out->project_dir);
  r.optionalInteger("project_gid", &out->project_gid, uint32_t{0}, uint32_t{0xfffffffe});
  r.check(out->project_dir.empty() || (out->project_dir.front() == '/' && out->project_gid),
          "project_dir", "must be absolute and come with project_gid");
  if (r.ok() && !out->image.empty()) {
    Status image = checkImageName(out->image);
    r.check(image.isOk(), "image", image.message());
  }
  for (const std::string& m : out->mounts) {
    if (!r.ok()) break;
    Result<BindMount> mount = parseBindMount(m);
    r.check(mount.ok(), "mounts", mount.ok() ? "" : mount.status().message());
  }
  r.check(out->mounts.empty() || !out->image.empty() || !r.ok(), "mounts", "need an image");
  return r.finish();
}

json toJson(const Launch& l) {
  json j{{"argv", l.argv}, {"user", l.user}};
  if (l.uid) j["uid"] = *l.uid;
  if (l.gid) j["gid"] = *l.gid;
  if (!l.env.empty()) j["env"] = l.env;
  if (!l.working_dir.empty()) j["working_dir"] = l.working_dir;
  if (l.cpus_milli != 0) j["cpus_milli"] = l.cpus_milli;
  if (l.memory_mib != 0) j["memory_mib"] = l.memory_mib;
  if (l.pids_max != 0) j["pids_max"] = l.pids_max;
  if (!l.gpus.empty()) j["gpus"] = l.gpus;
  if (l.slice) {
    j["slice"] =
        json{{"memory_mib", l.slice->memory_mib}, {"compute_milli", l.slice->compute_milli}};
  }
  if (l.rendezvous) {
    const RendezvousTerms& r = *l.rendezvous;
    j["rendezvous"] = json{{"master_addr", r.master_addr}, {"master_port", r.master_port},
                           {"world_size", r.world_size},   {"rank", r.rank},
                           {"local_rank", r.local_rank},   {"node_rank", r.node_rank}};
  }
  if (l.time_limit_seconds > 0) j["time_limit_seconds"] = l.time_limit_seconds;
  if (l.grace_seconds) j["grace_seconds"] = *l.grace_seconds;
  if (!l.image.empty()) j["image"] = l.image;
  if (!l.mounts.empty()) j["mounts"] = l.mounts;
  if (!l.project_dir.empty()) j["project_dir"] = l.project_dir;
  if (l.project_gid) j["project_gid"] = *l.project_gid;
  return j;
}

namespace {

void readTaskEntryFields(ObjectReader& r, TaskEntry* out) {
  r.object("assignment", &out->assignment, Presence::kRequired);
  r.boolean("requeueable", &out->requeueable);
  r.object("launch", &out->launch, Presence::kRequired);
}

}  // namespace

Status fromJson(const json& j, TaskEntry* out, std::string_view path) {
  ObjectReader r(j, path);
  readTaskEntryFields(r, out);
  return r.finish();
}

json toJson(const TaskEntry& e) {
  return json{{"assignment", toJson(e.assignment)},
              {"requeueable", e.requeueable},
              {"launch", toJson(e.launch)}};
}

Status fromJson(const json& j, DesiredState* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("node_epoch", &out->node_epoch, Presence::kRequired, int64_t{0}, kMaxI64);
  r.objectList("tasks", &out->tasks, Presence::kRequired);
  r.boolean("drain", &out->drain);
  return r.finish();
}

json toJson(const DesiredState& m) {
  json tasks = json::array();
  for (const TaskEntry& e : m.tasks)
    tasks.push_back(toJson(e));
  return json{{"node_epoch", m.node_epoch}, {"tasks", std::move(tasks)}, {"drain", m.drain}};
}

Status fromJson(const json& j, Assign* out, std::string_view path) {
  ObjectReader r(j, path);
  r.optionalInteger("node_epoch", &out->node_epoch, int64_t{0}, kMaxI64);
  readTaskEntryFields(r, &out->entry);
  return r.finish();
}

json toJson(const Assign& m) {
  json j = toJson(m.entry);
  if (m.node_epoch) j["node_epoch"] = *m.node_epoch;
  return j;
}

// ---- cancel, read_log, lease

Status fromJson(const json& j, Cancel* out, std::string_view path) {
  ObjectReader r(j, path);
  r.object("assignment", &out->assignment, Presence::kRequired);
  r.string("signal", &out->signal);
  r.optionalInteger("grace_s", &out->grace_s, int64_t{0}, int64_t{86400});
  r.string("reason", &out->reason);
  r.check(out->signal == "TERM", "signal", "only TERM is supported");
  r.check(out->reason == "cancelled" || out->reason == "preempted" || out->reason == "timeout" ||
              out->reason == "node_fail",
          "reason", "expected cancelled, preempted, timeout or node_fail");
  return r.finish();
}

json toJson(const Cancel& m) {
  json j{{"assignment", toJson(m.assignment)}, {"signal", m.signal}, {"reason", m.reason}};
  if (m.grace_s) j["grace_s"] = *m.grace_s;
  return j;
}

Status fromJson(const json& j, ReadLog* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("request", &out->request, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("job_id", &out->job_id, Presence::kRequired, int64_t{1}, kMaxI64);
  r.integer("task", &out->task, Presence::kRequired, uint32_t{0},
            std::numeric_limits<uint32_t>::max());
  r.integer("lease_epoch", &out->lease_epoch, Presence::kRequired, int64_t{0}, kMaxI64);
  r.string("stream", &out->stream, Presence::kRequired);
  r.integer("offset", &out->offset, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("max_bytes", &out->max_bytes, Presence::kRequired, int64_t{1}, kMaxLogReadBytes);
  r.integer("incarnation", &out->incarnation, Presence::kOptional, int64_t{0}, kMaxI64);
  r.check(out->stream == "stdout" || out->stream == "stderr" || !r.ok(), "stream",
          "expected stdout or stderr");
  return r.finish();
}

json toJson(const ReadLog& m) {
  json j{{"request", m.request},         {"job_id", m.job_id}, {"task", m.task},
         {"lease_epoch", m.lease_epoch}, {"stream", m.stream}, {"offset", m.offset},
         {"max_bytes", m.max_bytes}};
  if (m.incarnation != 0) j["incarnation"] = m.incarnation;
  return j;
}

Status fromJson(const json& j, TaskAck* out, std::string_view path) {
  ObjectReader r(j, path);
  r.object("assignment", &out->assignment, Presence::kRequired);
  r.parsed("state", &out->state, &parseTaskPhase, Presence::kRequired);
  return r.finish();
}

json toJson(const TaskAck& m) {
  return json{{"assignment", toJson(m.assignment)}, {"state", taskPhaseName(m.state)}};
}

Status fromJson(const json& j, Lease* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("node_epoch", &out->node_epoch, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("valid_until", &out->valid_until_us, Presence::kRequired, int64_t{0}, kMaxI64);
  r.integer("renews", &out->renews, Presence::kRequired, int64_t{1}, kMaxI64);
  return r.finish();
}

json toJson(const Lease& m) {
  return json{
      {"node_epoch", m.node_epoch}, {"valid_until", m.valid_until_us}, {"renews", m.renews}};
}

}  // namespace gpool::protocol
