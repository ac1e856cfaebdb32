#include "agent/agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "agent/cgroup.h"
#include "agent/sys_util.h"
#include "api/json_reader.h"
#include "common/base64.h"
#include "gpu/gpu_json.h"
#include "vgpu/shm_region.h"

namespace gpool::agent {

using nlohmann::json;
using protocol::Assignment;
using protocol::TaskEntry;

namespace {

constexpr const char* kAgentVersion = "0.1.0";

std::string stateWord(TaskState s) {
  if (s == TaskState::kStarting) return "starting";
  if (s == TaskState::kRunning) return "running";
  return "exited";
}

// The parent pid of `pid` from /proc, 0 when unknown.
int parentPid(int pid) {
  auto read = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (!read.ok()) return 0;
  const std::string& text = *read;
  size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string state;
  int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// Whether `pid` is `root` or one of its descendants (a task's GPU process is often a child of
// the process the supervisor started).
bool descendsFrom(int pid, int root) {
  for (int i = 0; i < 64 && pid > 1; ++i) {
    if (pid == root) return true;
    pid = parentPid(pid);
  }
  return false;
}

}  // namespace

Agent::Agent(AgentOptions options, gpu::GpuBackend& backend, Launcher& launcher, const Clock& clock)
    : options_(std::move(options)),
      backend_(backend),
      launcher_(launcher),
      clock_(clock),
      fence_(std::make_unique<Fence>(clock, options_.lease)),
      strays_(options_.stray_grace) {}

std::string Agent::assignmentPath(const std::string& name) const {
  return options_.state_dir + "/" + name + ".assignment.json";
}

Status Agent::writeAssignment(const Tracked& t) const {
  json j{{"assignment", protocol::toJson(t.assignment)},
         {"requeueable", t.requeueable},
         {"regions", t.regions}};
  std::string path = assignmentPath(t.info.name);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump();
    if (!out) return Status::ioError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::ioError("cannot rename " + tmp + " to " + path);
  }
  return Status::ok();
}

Status Agent::start() {
  if (options_.node_name.empty()) return Status::invalidArgument("node_name: must not be empty");
  if (options_.state_dir.empty()) return Status::invalidArgument("state_dir: must not be empty");
  GPOOL_RETURN_IF_ERROR(makeDirs(options_.state_dir, 0700));
  GPOOL_ASSIGN_OR_RETURN(inventory_, backend_.inventory());
  for (const gpu::GpuInfo& g : inventory_.gpus)
    initial_uuids_.push_back(g.uuid);
  if (options_.health.expected_uuids.empty()) options_.health.expected_uuids = initial_uuids_;
  GPOOL_ASSIGN_OR_RETURN(std::vector<TaskInfo> found, launcher_.adoptAll());
  for (TaskInfo& info : found) {
    Tracked t;
    t.info = std::move(info);
    auto text = readFile(assignmentPath(t.info.name));
    if (text.ok()) {
      json j = json::parse(*text, nullptr, false);
      if (j.is_object() && j.contains("assignment") &&
          protocol::fromJson(j["assignment"], &t.assignment, "assignment").isOk()) {
        t.has_assignment = true;
        t.requeueable = j.value("requeueable", false);
        if (j.contains("regions") && j["regions"].is_array()) {
          for (const json& r : j["regions"])
            if (r.is_string()) t.regions.push_back(r.get<std::string>());
        }
      }
    }
    t.reported = t.info.status.state;
    std::string name = t.info.name;
    tasks_.emplace(name, std::move(t));
  }
  return Status::ok();
}

void Agent::send(std::string_view type, json body) {
  outbox_.push_back(protocol::encodeEnvelope(type, ++seq_out_, last_seq_in_, std::move(body)));
}

void Agent::sendError(std::string_view code, std::string_view message, int64_t in_reply_to) {
  send("error", json{{"code", code}, {"message", message}, {"in_reply_to", in_reply_to}});
}

std::vector<json> Agent::takeOutbox() {
  std::vector<json> out;
  out.swap(outbox_);
  return out;
}

json Agent::taskJson(const Tracked& t) const {
  const TaskStatus& s = t.info.status;
  json j{{"name", t.info.name},
         {"assignment", t.has_assignment ? protocol::toJson(t.assignment) : json(nullptr)},
         {"state", stateWord(s.state)},
         {"final_state", taskStateName(s.state)},
         {"pid", s.task_pid},
         {"started_at_us", s.started_at_us},
         {"log_paths",
          {launcher_.taskDir(t.info.name) + "/stdout.log",
           launcher_.taskDir(t.info.name) + "/stderr.log"}}};
  if (!options_.shell_socket.empty()) j["shell_socket"] = options_.shell_socket;
  if (isTerminal(s.state)) {
    j["ended_at_us"] = s.ended_at_us;
    j["exit_code"] = s.exit_code;
    j["signal"] = s.signal;
    j["oom_killed"] = s.state == TaskState::kOutOfMemory;
    j["timed_out"] = s.state == TaskState::kTimeout;
    j["cancelled"] = s.state == TaskState::kCancelled || s.state == TaskState::kPreempted;
    if (!s.reason.empty()) j["reason"] = s.reason;
  }
  return j;
}

json Agent::helloMessage() {
  seq_out_ = 0;
  last_seq_in_ = 0;
  // Level-triggered: a new connection gets telemetry and the health findings again at the next
  // tick (the controller starts every GPU of a (re)registered node healthy).
  last_telemetry_.reset();
  last_findings_ = json::array();
  utsname u{};
  ::uname(&u);
  std::string hostname = options_.hostname;
  if (hostname.empty()) hostname = u.nodename;
  uint64_t cpu = options_.cpu_millis;
  if (cpu == 0) cpu = static_cast<uint64_t>(::sysconf(_SC_NPROCESSORS_ONLN)) * 1000;
  uint64_t ram = options_.ram_mib;
  if (ram == 0) {
    ram = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
          static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) / (1024 * 1024);
  }
  auto layout = CgroupLayout::detect();
  json node{{"name", options_.node_name},
            {"hostname", hostname},
            {"labels", options_.labels},
            {"cpu_millis", cpu},
            {"ram_mib", ram},
            {"agent_version", kAgentVersion},
            {"os", std::string(u.sysname) + " " + u.release},
            {"cgroup", layout.ok() ? std::string(cgroupModeName(layout->mode)) : "unknown"}};
  json tasks = json::array();
  for (const auto& [name, t] : tasks_)
    tasks.push_back(taskJson(t));
  json body{{"node", node},
            {"gpus", gpu::toJson(inventory_)},
            {"tasks", tasks},
            {"last_node_epoch", node_epoch_}};
  return protocol::encodeEnvelope("hello", ++seq_out_, 0, std::move(body));
}

void Agent::handle(const json& msg) {
  Result<protocol::Envelope> env = protocol::decodeEnvelope(msg);
  if (!env.ok()) {
    int64_t seq = msg.is_object() && msg.contains("seq") && msg["seq"].is_number_integer()
                      ? msg["seq"].get<int64_t>()
                      : 0;
    const char* code = env.status().code() == StatusCode::kFailedPrecondition
                           ? "unsupported_version"
                           : "invalid_argument";
    sendError(code, env.status().message(), seq);
    return;
  }
  last_seq_in_ = std::max(last_seq_in_, env->seq);
  Status s;
  if (env->type == "welcome") {
    s = onWelcome(env->body);
  } else if (env->type == "desired_state") {
    s = onDesiredState(env->body, env->seq);
  } else if (env->type == "assign") {
    s = onAssign(env->body, env->seq);
  } else if (env->type == "cancel") {
    s = onCancel(env->body, env->seq);
  } else if (env->type == "lease") {
    s = onLease(env->body);
  } else if (env->type == "read_log") {
    s = onReadLog(env->body);
  } else if (env->type == "error") {
    return;  // the controller's complaint; nothing to answer
  } else {
    sendError("unimplemented", "type: unknown message type '" + env->type + "'", env->seq);
    return;
  }
  if (!s.isOk()) {
    std::string code =
        s.code() == StatusCode::kFailedPrecondition ? "stale_epoch" : "invalid_argument";
    sendError(code, "body." + s.message(), env->seq);
  }
}

Status Agent::acceptNodeEpoch(int64_t epoch) {
  if (epoch < node_epoch_) {
    return Status::failedPrecondition("node_epoch: " + std::to_string(epoch) +
                                      " is older than the latest seen (" +
                                      std::to_string(node_epoch_) + ")");
  }
  node_epoch_ = epoch;
  return Status::ok();
}

namespace {

struct WelcomeLease {
  int64_t duration_s = 0;
  int64_t renew_every_s = 0;
};
Status fromJson(const json& j, WelcomeLease* out, std::string_view path) {
  api::ObjectReader r(j, path);
  r.integer("duration_s", &out->duration_s, api::Presence::kRequired, int64_t{1}, int64_t{86400});
  r.integer("renew_every_s", &out->renew_every_s, api::Presence::kOptional, int64_t{1},
            int64_t{86400});
  return r.finish();
}

struct WelcomeConfig {
  std::optional<int64_t> heartbeat_interval_s;
  std::optional<int64_t> telemetry_interval_s;
  std::optional<std::string> stray_policy;
};
Status fromJson(const json& j, WelcomeConfig* out, std::string_view path) {
  api::ObjectReader r(j, path);
  r.optionalInteger("heartbeat_interval_s", &out->heartbeat_interval_s, int64_t{1}, int64_t{3600});
  r.optionalInteger("telemetry_interval_s", &out->telemetry_interval_s, int64_t{1}, int64_t{3600});
  r.optionalString("stray_policy", &out->stray_policy);
  if (out->stray_policy) {
    r.check(*out->stray_policy == "report" || *out->stray_policy == "kill", "stray_policy",
            "expected \"report\" or \"kill\"");
  }
  return r.finish();
}

}  // namespace

Status Agent::onWelcome(const json& body) {
  int64_t epoch = 0;
  std::string credential;
  std::optional<WelcomeLease> lease;
  std::optional<WelcomeConfig> config;
  api::ObjectReader r(body, "");
  r.integer("node_epoch", &epoch, api::Presence::kRequired, int64_t{0},
            std::numeric_limits<int64_t>::max());
  r.string("node_credential", &credential);
  r.optionalObject("lease", &lease);
  r.optionalObject("config", &config);
  GPOOL_RETURN_IF_ERROR(r.finish());
  GPOOL_RETURN_IF_ERROR(acceptNodeEpoch(epoch));
  if (!credential.empty()) node_credential_ = std::move(credential);
  if (lease && Micros(lease->duration_s * 1'000'000) != options_.lease) {
    options_.lease = Micros(lease->duration_s * 1'000'000);
    fence_ = std::make_unique<Fence>(clock_, options_.lease);
  }
  if (config) {
    if (config->heartbeat_interval_s)
      options_.heartbeat_interval = Micros(*config->heartbeat_interval_s * 1'000'000);
    if (config->telemetry_interval_s)
      options_.telemetry_interval = Micros(*config->telemetry_interval_s * 1'000'000);
    if (config->stray_policy) options_.kill_strays = *config->stray_policy == "kill";
  }
  fence_->recordContact();
  fenced_ = false;
  return Status::ok();
}

Status Agent::onLease(const json& body) {
  int64_t epoch = 0;
  TimePoint valid_until;
  api::ObjectReader r(body, "");
  r.integer("node_epoch", &epoch, api::Presence::kRequired, int64_t{0},
            std::numeric_limits<int64_t>::max());
  r.time("valid_until", &valid_until, api::Presence::kRequired);
  GPOOL_RETURN_IF_ERROR(r.finish());
  GPOOL_RETURN_IF_ERROR(acceptNodeEpoch(epoch));
  // The lease runs on our own monotonic clock (skew cannot extend it); valid_until is the
  // controller's view, informational here.
  fence_->recordContact();
  fenced_ = false;
  return Status::ok();
}

Status Agent::onDesiredState(const json& body, int64_t seq) {
  int64_t epoch = 0;
  bool drain = false;
  std::vector<TaskEntry> entries;
  api::ObjectReader r(body, "");
  r.integer("node_epoch", &epoch, api::Presence::kRequired, int64_t{0},
            std::numeric_limits<int64_t>::max());
  r.objectList("tasks", &entries, api::Presence::kRequired);
  r.boolean("drain", &drain);
  GPOOL_RETURN_IF_ERROR(r.finish());
  GPOOL_RETURN_IF_ERROR(acceptNodeEpoch(epoch));
  std::set<std::string> desired;
  for (const TaskEntry& e : entries)
    desired.insert(protocol::taskName(e.assignment));
  // Stop what is not desired first, so that its resources are free for the new starts.
  for (auto& [name, t] : tasks_) {
    if (desired.count(name) || isTerminal(t.info.status.state) || t.stopping) continue;
    stopTask(t, StopReason::kCancel, "cancelled", std::nullopt);
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = desired.count(it->first) ? std::next(it) : pending_.erase(it);
  }
  for (TaskEntry& e : entries)
    reconcileEntry(std::move(e), seq);
  return Status::ok();
}

Status Agent::onAssign(const json& body, int64_t seq) {
  json entry_json = body;
  if (entry_json.is_object() && entry_json.contains("node_epoch")) {
    const json& e = entry_json["node_epoch"];
    if (!e.is_number_integer()) return Status::invalidArgument("node_epoch: expected an integer");
    GPOOL_RETURN_IF_ERROR(acceptNodeEpoch(e.get<int64_t>()));
    entry_json.erase("node_epoch");
  }
  TaskEntry entry;
  GPOOL_RETURN_IF_ERROR(protocol::fromJson(entry_json, &entry, ""));
  reconcileEntry(std::move(entry), seq);
  return Status::ok();
}

Status Agent::onCancel(const json& body, int64_t seq) {
  Assignment a;
  std::string signal = "TERM";
  int64_t grace_s = -1;
  std::string reason = "cancelled";
  api::ObjectReader r(body, "");
  r.object("assignment", &a, api::Presence::kRequired);
  r.string("signal", &signal);
  r.integer("grace_s", &grace_s, api::Presence::kOptional, int64_t{0}, int64_t{86400});
  r.string("reason", &reason);
  r.check(signal == "TERM", "signal", "only TERM is supported");
  r.check(reason == "cancelled" || reason == "preempted" || reason == "timeout" ||
              reason == "node_fail",
          "reason", "expected cancelled, preempted, timeout or node_fail");
  GPOOL_RETURN_IF_ERROR(r.finish());
  std::string name = protocol::taskName(a);
  pending_.erase(name);
  auto it = tasks_.find(name);
  if (it == tasks_.end()) return Status::ok();  // nothing here: idempotent
  Tracked& t = it->second;
  if (t.has_assignment && a.lease_epoch < t.assignment.lease_epoch) {
    sendError("stale_epoch",
              "body.assignment.lease_epoch: " + std::to_string(a.lease_epoch) +
                  " is older than the task's " + std::to_string(t.assignment.lease_epoch),
              seq);
    return Status::ok();
  }
  if (isTerminal(t.info.status.state) || t.stopping) return Status::ok();
  std::optional<int64_t> grace;
  if (grace_s >= 0) grace = grace_s * 1000;
  stopTask(t, reason == "cancelled" ? StopReason::kCancel : StopReason::kPreempt, reason, grace);
  return Status::ok();
}

Status Agent::onReadLog(const json& body) {
  // What one answer may carry: the controller asks for at most this much (agent_link.h).
  constexpr int64_t kMaxRead = 1 << 20;
  int64_t request = 0;
  int64_t job_id = 0;
  int64_t task = 0;
  int64_t lease_epoch = 0;
  std::string stream;
  int64_t offset = 0;
  int64_t max_bytes = 0;
  api::ObjectReader r(body, "");
  r.integer("request", &request, api::Presence::kRequired, int64_t{1},
            std::numeric_limits<int64_t>::max());
  r.integer("job_id", &job_id, api::Presence::kRequired, int64_t{1},
            std::numeric_limits<int64_t>::max());
  r.integer("task", &task, api::Presence::kRequired, int64_t{0},
            int64_t{std::numeric_limits<uint32_t>::max()});
  r.integer("lease_epoch", &lease_epoch, api::Presence::kRequired, int64_t{0},
            std::numeric_limits<int64_t>::max());
  r.string("stream", &stream, api::Presence::kRequired);
  r.integer("offset", &offset, api::Presence::kRequired, int64_t{0},
            std::numeric_limits<int64_t>::max());
  r.integer("max_bytes", &max_bytes, api::Presence::kRequired, int64_t{1}, kMaxRead);
  r.check(stream == "stdout" || stream == "stderr", "stream", "expected stdout or stderr");
  GPOOL_RETURN_IF_ERROR(r.finish());
  json answer{{"request", request},         {"job_id", job_id}, {"task", task},
              {"lease_epoch", lease_epoch}, {"stream", stream}, {"offset", offset}};
  Assignment a;
  a.job_id = job_id;
  a.task = static_cast<uint32_t>(task);
  const std::string name = protocol::taskName(a);
  // The task's directory holds the log of its latest attempt here only.
  auto it = tasks_.find(name);
  if (it != tasks_.end() && it->second.has_assignment &&
      it->second.assignment.lease_epoch != lease_epoch) {
    answer["error"] = "the log of job " + std::to_string(job_id) + " task " + std::to_string(task) +
                      " under lease epoch " + std::to_string(lease_epoch) + " is gone: epoch " +
                      std::to_string(it->second.assignment.lease_epoch) + " ran here since";
    send("log_data", std::move(answer));
    return Status::ok();
  }
  // The name is built from two integers, so the path stays inside the state directory; the
  // last component is not followed if the task replaced its log with a link.
  const std::string path = launcher_.taskDir(name) + "/" + stream + ".log";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      answer["found"] = false;
    } else {
      answer["error"] = "cannot open " + path + ": " + std::strerror(err);
    }
    send("log_data", std::move(answer));
    return Status::ok();
  }
  struct stat st {};
  std::string bytes;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    answer["error"] = path + " is not a regular file";
  } else {
    auto size = static_cast<int64_t>(st.st_size);
    if (offset < size) {
      bytes.resize(static_cast<size_t>(std::min(max_bytes, size - offset)));
      ssize_t got = ::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
      if (got < 0) {
        answer["error"] = "cannot read " + path + ": " + std::strerror(errno);
        got = 0;
      }
      bytes.resize(static_cast<size_t>(got));
    }
    answer["found"] = true;
    answer["size"] = size;
    answer["data"] = base64Encode(bytes);
  }
  ::close(fd);
  send("log_data", std::move(answer));
  return Status::ok();
}

void Agent::reconcileEntry(TaskEntry entry, int64_t seq) {
  std::string name = protocol::taskName(entry.assignment);
  auto it = tasks_.find(name);
  if (it != tasks_.end() && it->second.has_assignment) {
    Tracked& t = it->second;
    int64_t ours = t.assignment.lease_epoch;
    int64_t theirs = entry.assignment.lease_epoch;
    if (theirs < ours) {
      sendError("stale_epoch",
                "assignment.lease_epoch: " + std::to_string(theirs) + " for task " + name +
                    " is older than the one this agent runs (" + std::to_string(ours) + ")",
                seq);
      return;
    }
    if (theirs == ours) {
      // Keep it and re-report its state (a recorded exit is reported again).
      reportTask(t);
      return;
    }
    // A newer attempt: the old one must end first; the new one starts once it has.
    if (!isTerminal(t.info.status.state)) {
      if (!t.stopping) stopTask(t, StopReason::kPreempt, "preempted", std::nullopt);
      pending_[name] = std::move(entry);
      return;
    }
  } else if (it != tasks_.end() && !isTerminal(it->second.info.status.state)) {
    // A running task without a recorded assignment: adopt it under this one.
    it->second.assignment = entry.assignment;
    it->second.has_assignment = true;
    it->second.requeueable = entry.requeueable;
    (void)writeAssignment(it->second);
    reportTask(it->second);
    return;
  }
  startTask(std::move(entry));
}

void Agent::startTask(TaskEntry entry) {
  std::string name = protocol::taskName(entry.assignment);
  if (!fence_->mayStartWork()) {
    pending_[name] = std::move(entry);  // starts once the lease holds again
    return;
  }
  pending_.erase(name);
  Tracked t;
  t.assignment = entry.assignment;
  t.has_assignment = true;
  t.requeueable = entry.requeueable;
  t.info.name = name;
  auto fail = [&](const Status& why) {
    t.info.status.state = TaskState::kFailed;
    t.info.status.reason = why.toString();
    t.info.status.ended_at_us = toUnixMicros(clock_.now());
    t.reported = TaskState::kStarting;
    t.reported_once = false;
    Tracked& placed = tasks_.insert_or_assign(name, std::move(t)).first->second;
    reportTask(placed);
  };
  // An ended earlier attempt of the same task: its record has been reported; make room.
  auto old = tasks_.find(name);
  if (old != tasks_.end()) {
    (void)launcher_.remove(name);
    tasks_.erase(old);
  }
  TaskLaunch& launch = entry.launch;
  for (const std::string& uuid : entry.gpu_uuids) {
    const gpu::GpuInfo* g = inventory_.findGpu(uuid);
    if (g == nullptr) return fail(Status::invalidArgument("gpus: no GPU " + uuid + " here"));
    // The device minor: NVML's minor number equals the index on every driver we target.
    launch.gpus.push_back(TaskGpu{uuid, static_cast<int32_t>(g->index)});
  }
  if (launch.slice) {
    const gpu::GpuInfo* g = inventory_.findGpu(entry.gpu_uuids[0]);
    if (options_.vgpu_dir.empty()) {
      return fail(Status::failedPrecondition("slice: the agent has no vgpu_dir configured"));
    }
    Status made = makeDirs(options_.vgpu_dir, 0755);
    if (!made.isOk()) return fail(made);
    vgpu::RegionConfig rc;
    rc.quota_bytes = launch.slice->memory_mib * 1024 * 1024;
    rc.share_permille = launch.slice->compute;
    rc.device_index = 0;  // the slice's GPU is CUDA device 0 inside the task
    rc.device_uuid = g->uuid;
    std::string path = options_.vgpu_dir + "/" + name + ".gpu" + std::to_string(g->index);
    auto region = vgpu::ShmRegion::create(path, rc);
    if (!region.ok()) return fail(region.status());
    // Tasks run as their user and must map the region read-write.
    (void)::chmod(path.c_str(), 0666);
    launch.slice->shm_path = path;
    launch.slice->interposer = options_.interposer_path;
    t.regions.push_back(path);
  }
  Status written = writeAssignment(t);
  if (!written.isOk()) return fail(written);
  Result<TaskInfo> info = launcher_.launch(launch);
  if (!info.ok()) {
    // The launcher recorded FAILED when it got as far as the state directory.
    auto recorded = launcher_.info(name);
    if (recorded.ok()) {
      t.info = *recorded;
      Tracked& placed = tasks_.insert_or_assign(name, std::move(t)).first->second;
      reportTask(placed);
      return;
    }
    return fail(info.status());
  }
  t.info = *info;
  Tracked& placed = tasks_.insert_or_assign(name, std::move(t)).first->second;
  reportTask(placed);
}

void Agent::stopTask(Tracked& t, StopReason reason, std::string why,
                     std::optional<int64_t> grace_ms) {
  Status s = launcher_.stop(t.info.name, reason, grace_ms);
  if (s.isOk() || s.code() == StatusCode::kFailedPrecondition) {
    t.stopping = reason;
    t.stop_reason = std::move(why);
  }
}

void Agent::reportTask(Tracked& t) {
  if (!t.has_assignment) return;  // nothing the controller can match it to
  json body{{"assignment", protocol::toJson(t.assignment)}};
  body.update(taskJson(t));
  body.erase("name");
  if (t.stopping && isTerminal(t.info.status.state)) body["stop_reason"] = t.stop_reason;
  send("task_update", std::move(body));
  t.reported = t.info.status.state;
  t.reported_once = true;
  if (isTerminal(t.info.status.state)) {
    for (const std::string& path : t.regions)
      ::unlink(path.c_str());
    t.regions.clear();
  }
}

void Agent::refreshTasks() {
  for (auto& [name, t] : tasks_) {
    if (isTerminal(t.info.status.state) && t.reported_once) continue;
    auto info = launcher_.info(name);
    if (!info.ok()) continue;  // retried on the next tick
    t.info = *info;
    if (!t.reported_once || t.info.status.state != t.reported) reportTask(t);
  }
  // Newer attempts waiting for their predecessor to end.
  std::vector<std::string> ready;
  for (const auto& [name, entry] : pending_) {
    auto it = tasks_.find(name);
    if (it == tasks_.end() || isTerminal(it->second.info.status.state)) ready.push_back(name);
  }
  for (const std::string& name : ready) {
    if (!fence_->mayStartWork()) break;
    TaskEntry entry = std::move(pending_[name]);
    pending_.erase(name);
    startTask(std::move(entry));
  }
}

void Agent::fenceTasks() {
  if (!fence_->expired()) return;
  std::vector<Fence::RunningTask> running;
  for (const auto& [name, t] : tasks_) {
    if (!isTerminal(t.info.status.state) && !t.stopping) running.push_back({name, t.requeueable});
  }
  for (const std::string& name : fence_->tasksToStop(running))
    stopTask(tasks_.at(name), StopReason::kFence, "fenced", std::nullopt);
  fenced_ = true;
}

void Agent::sampleAndCheck(TimePoint now) {
  auto inventory = backend_.inventory();
  if (inventory.ok()) inventory_ = *inventory;
  auto sample = backend_.sample();
  json findings = json::array();
  if (!sample.ok()) {
    findings.push_back(json{{"check", "backend_error"},
                            {"severity", "critical"},
                            {"message", sample.status().toString()}});
  } else {
    json telemetry = gpu::toJson(*sample);
    for (const gpu::Finding& f : gpu::checkHealth(inventory_, *sample, options_.health))
      findings.push_back(gpu::toJson(f));
    // A GPU process belongs to a task when it descends from the task's process. Processes of
    // running tasks are tagged with their job and task in the telemetry, so that the
    // controller attributes a shared GPU's memory to its tenants.
    gpu::GpuOwnership own;
    for (size_t gi = 0; gi < sample->gpus.size(); ++gi) {
      const gpu::GpuTelemetry& g = sample->gpus[gi];
      for (size_t pi = 0; pi < g.processes.size(); ++pi) {
        const gpu::GpuProcess& p = g.processes[pi];
        for (const auto& [name, t] : tasks_) {
          if (t.info.status.task_pid <= 0) continue;
          if (!descendsFrom(p.pid, t.info.status.task_pid)) continue;
          bool ended = isTerminal(t.info.status.state);
          auto& set = ended ? own.dead_task_pids : own.task_pids;
          set[g.uuid].insert(p.pid);
          if (!ended && t.has_assignment) {
            json& entry = telemetry["gpus"][gi]["processes"][pi];
            entry["job_id"] = t.assignment.job_id;
            entry["task"] = t.assignment.task;
          }
        }
      }
    }
    send("telemetry", std::move(telemetry));
    std::vector<gpu::Finding> hygiene = gpu::findStrayProcesses(*sample, own, options_.hygiene);
    std::vector<gpu::Finding> lasting = strays_.update(hygiene, now);
    std::map<std::pair<std::string, int>, std::string> actions;
    if (options_.kill_strays) {
      for (const gpu::KillOutcome& k : gpu::killStrayProcesses(backend_, lasting)) {
        actions[{k.gpu_uuid, k.pid}] = k.status.isOk() || k.status.code() == StatusCode::kNotFound
                                           ? "killed"
                                           : "kill failed: " + k.status.toString();
      }
    }
    for (const gpu::Finding& f : hygiene) {
      json j = gpu::toJson(f);
      auto a = actions.find({f.gpu_uuid, f.pid});
      if (a != actions.end()) {
        j["action"] = a->second;
      } else if (f.pid != 0) {
        j["action"] = "reported";
      }
      findings.push_back(std::move(j));
    }
  }
  if (findings != last_findings_) {
    last_findings_ = findings;
    send("health", json{{"findings", findings}, {"time_us", toUnixMicros(now)}});
  }
}

void Agent::tick() {
  TimePoint now = clock_.now();
  Micros mono = clock_.monotonic();
  refreshTasks();
  fenceTasks();
  if (!last_heartbeat_ || mono - *last_heartbeat_ >= options_.heartbeat_interval) {
    last_heartbeat_ = mono;
    send("heartbeat", json{{"time_us", toUnixMicros(now)}, {"lease_ok", fence_->mayStartWork()}});
  }
  if (!last_telemetry_ || mono - *last_telemetry_ >= options_.telemetry_interval) {
    last_telemetry_ = mono;
    sampleAndCheck(now);
  }
}

}  // namespace gpool::agent
