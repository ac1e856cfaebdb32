#include "agent/agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "agent/cgroup.h"
#include "agent/sys_util.h"
#include "agent/unix_user.h"
#include "api/json_reader.h"
#include "common/units.h"
#include "gpu/gpu_types.h"
#include "vgpu/shm_region.h"

namespace gpool::agent {

using nlohmann::json;
using protocol::Assignment;
using protocol::TaskEntry;

namespace {

constexpr const char* kAgentVersion = "0.1.0";

protocol::TaskPhase phaseOf(TaskState s) {
  if (s == TaskState::kStarting) return protocol::TaskPhase::kStarting;
  if (s == TaskState::kRunning) return protocol::TaskPhase::kRunning;
  return protocol::TaskPhase::kExited;
}

// The inventory as `hello.gpus` carries it.
protocol::Inventory inventoryMessage(const gpu::Inventory& inventory) {
  protocol::Inventory out;
  out.backend = inventory.backend;
  out.simulated = inventory.simulated;
  out.driver_version = inventory.driver_version;
  out.cuda_driver_version = inventory.cuda_driver_version;
  for (const gpu::GpuInfo& g : inventory.gpus) {
    protocol::GpuInfo m;
    m.uuid = g.uuid;
    m.index = g.index;
    m.pci_bus_id = g.pci_bus_id;
    m.model = g.model;
    m.memory_total_mib = g.memory_total_mib;
    m.compute_capability = std::to_string(g.compute_capability_major) + "." +
                           std::to_string(g.compute_capability_minor);
    m.mig_enabled = g.mig_enabled;
    for (const gpu::MigInstance& mi : g.mig_instances) {
      m.mig_instances.push_back(protocol::MigInstance{mi.uuid, mi.profile, mi.gpu_instance_id,
                                                      mi.compute_instance_id, mi.memory_mib});
    }
    m.simulated = g.simulated;
    out.gpus.push_back(std::move(m));
  }
  for (const gpu::GpuLink& l : inventory.links) {
    out.links.push_back(protocol::GpuLinkInfo{
        l.gpu_a, l.gpu_b, gpu::topologyLevelName(l.level, l.nvlink_count), l.nvlink_count});
  }
  return out;
}

protocol::Telemetry telemetryMessage(const gpu::TelemetrySample& sample) {
  protocol::Telemetry out;
  out.taken_at_us = toUnixMicros(sample.taken_at);
  out.simulated = sample.simulated;
  for (const gpu::GpuTelemetry& t : sample.gpus) {
    protocol::GpuSample g;
    g.uuid = t.uuid;
    g.index = t.index;
    g.utilization_pct = t.utilization_pct;
    g.memory_utilization_pct = t.memory_utilization_pct;
    g.memory_used_mib = t.memory_used_mib;
    g.memory_total_mib = t.memory_total_mib;
    g.temperature_c = t.temperature_c;
    g.power_w = t.power_w;
    g.sm_clock_mhz = t.sm_clock_mhz;
    g.memory_clock_mhz = t.memory_clock_mhz;
    g.ecc_corrected = t.ecc_corrected;
    g.ecc_uncorrected = t.ecc_uncorrected;
    g.xid_errors = t.xid_errors;
    for (const gpu::GpuProcess& p : t.processes)
      g.processes.push_back(protocol::GpuProcessSample{p.pid, p.used_mib, {}, {}});
    out.gpus.push_back(std::move(g));
  }
  return out;
}

// The directory holding a slice task's vgpu regions (docs/vgpu-shm.md, "Files and access"):
// only the task's user and root may reach its files. It belongs to the agent (mode 0700), so the
// task can neither list it nor replace the limits file in it, and the task's user gets search
// permission through an ACL. On a filesystem without ACLs the directory is given to the task's
// user instead: still private to that user, but then the task could swap its own limits file
// for another (as it could unset LD_PRELOAD); the agent's backstop holds either way.
// `user` is null when the agent is not root: its tasks then run as the agent's own user.
Status makeRegionDir(const std::string& dir, const UnixUser* user) {
  GPOOL_RETURN_IF_ERROR(removeTree(dir));  // a stale one of an earlier attempt
  if (::mkdir(dir.c_str(), 0700) != 0) return errnoStatus("cannot create", dir, errno);
  if (user == nullptr) return Status::ok();
  if (!grantSearchToUser(dir, user->uid).isOk() &&
      ::chown(dir.c_str(), user->uid, user->gid) != 0) {
    Status s = errnoStatus("cannot give " + user->name + " access to", dir, errno);
    (void)removeTree(dir);
    return s;
  }
  return Status::ok();
}

// Deletes a region's files and, when it is the last one there, its task directory.
void removeRegion(const std::string& path) {
  vgpu::ShmRegion::remove(path);
  ::rmdir(path.substr(0, path.rfind('/')).c_str());
}

// What the launcher runs for `entry`; its GPUs are resolved against the inventory by the caller.
TaskLaunch taskLaunchFrom(const TaskEntry& entry) {
  const protocol::Launch& in = entry.launch;
  TaskLaunch l;
  l.job_id = std::to_string(entry.assignment.job_id);
  l.task_index = entry.assignment.task;
  // The wire counts requeues from 0; a task sees its attempt as users do, from 1.
  l.attempt = static_cast<uint32_t>(std::max(0, entry.assignment.attempt)) + 1;
  l.argv = in.argv;
  l.env = in.env;
  l.working_dir = in.working_dir;
  l.user = in.user;
  if (in.uid) l.uid = *in.uid;
  if (in.gid) l.gid = *in.gid;
  l.cpu_millicores = in.cpus_milli;
  l.memory_mib = in.memory_mib;
  l.pids_max = in.pids_max;
  if (in.slice) {
    l.slice = SliceQuota{};
    l.slice->memory_mib = in.slice->memory_mib;
    l.slice->compute = in.slice->compute_milli;
  }
  if (in.rendezvous) {
    const protocol::RendezvousTerms& r = *in.rendezvous;
    l.rendezvous =
        Rendezvous{r.master_addr, r.master_port, r.world_size, r.rank, r.local_rank, r.node_rank};
  }
  l.time_limit_ms = in.time_limit_seconds * 1000;
  if (in.grace_seconds) l.grace_ms = *in.grace_seconds * 1000;
  l.project_dir = in.project_dir;
  l.project_gid = in.project_gid.value_or(0);
  if (!in.image.empty()) {
    l.container = ContainerSpec{};
    l.container->image = in.image;
    // The protocol's reader checked each mount: none fails here.
    for (const std::string& m : in.mounts) {
      if (Result<BindMount> mount = parseBindMount(m); mount.ok()) {
        l.container->mounts.push_back(*mount);
      }
    }
  }
  return l;
}

protocol::Finding findingMessage(const gpu::Finding& f) {
  protocol::Finding out;
  out.check = f.check;
  out.severity = std::string(gpu::severityName(f.severity));
  out.gpu_uuid = f.gpu_uuid;
  out.pid = f.pid;
  out.used_mib = static_cast<int64_t>(f.used_mib);
  out.unhealthy = f.unhealthy;
  out.message = f.message;
  return out;
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
         {"regions", t.regions},
         {"gpus", t.gpus},
         {"slice_quota_mib", t.slice_quota_mib},
         {"sim", {{"share", t.sim_share}, {"load", t.sim_load}, {"memory_mib", t.sim_memory_mib}}}};
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
  if (options_.lease_file.empty()) options_.lease_file = options_.state_dir + "/lease";
  // Before any task: a restarted agent keeps the lease its predecessor granted, so the
  // supervisors of running tasks go on enforcing it until this agent renews it.
  GPOOL_ASSIGN_OR_RETURN(LeaseFile lease_file, LeaseFile::create(options_.lease_file));
  lease_file_ = std::move(lease_file);
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
        if (j.contains("gpus") && j["gpus"].is_array()) {
          for (const json& g : j["gpus"])
            if (g.is_string()) t.gpus.push_back(g.get<std::string>());
        }
        t.slice_quota_mib = j.value("slice_quota_mib", uint64_t{0});
        if (j.contains("sim") && j["sim"].is_object()) {
          t.sim_share = j["sim"].value("share", 1.0);
          t.sim_load = j["sim"].value("load", 1.0);
          t.sim_memory_mib = j["sim"].value("memory_mib", uint64_t{0});
        }
      }
    }
    t.reported = t.info.status.state;
    // An ended task without its assignment is never reported (nothing to match it to): only
    // the retention keeps it.
    if (!t.has_assignment && isTerminal(t.info.status.state))
      t.end_acknowledged = clock_.monotonic();
    std::string name = t.info.name;
    tasks_.emplace(name, std::move(t));
  }
  return Status::ok();
}

void Agent::sendError(std::string_view code, std::string_view message, int64_t in_reply_to) {
  send(protocol::Error{std::string(code), std::string(message), in_reply_to});
}

std::vector<json> Agent::takeOutbox() {
  std::vector<json> out;
  out.swap(outbox_);
  return out;
}

protocol::TaskReport Agent::taskReport(const Tracked& t) const {
  const TaskStatus& s = t.info.status;
  protocol::TaskReport r;
  r.name = t.info.name;
  if (t.has_assignment) r.assignment = t.assignment;
  r.state = phaseOf(s.state);
  r.final_state = std::string(taskStateName(s.state));
  r.pid = s.task_pid;
  r.started_at_us = s.started_at_us;
  r.log_paths = {launcher_.taskDir(t.info.name) + "/stdout.log",
                 launcher_.taskDir(t.info.name) + "/stderr.log"};
  r.shell_socket = options_.shell_socket;
  if (isTerminal(s.state)) {
    r.ended_at_us = s.ended_at_us;
    r.exit_code = s.exit_code;
    r.signal = s.signal;
    r.oom_killed = s.state == TaskState::kOutOfMemory;
    r.timed_out = s.state == TaskState::kTimeout;
    r.cancelled = s.state == TaskState::kCancelled || s.state == TaskState::kPreempted;
    r.reason = s.reason;
  }
  return r;
}

protocol::SliceEnforcement Agent::sliceEnforcement() const {
  protocol::SliceEnforcement s;
  // Checked at every hello: an interposer installed or fixed later counts after a reconnect.
  const std::string problem = preloadProblem(options_.interposer_path);
  s.interposer = problem.empty();
  s.backstop = options_.slice_backstop == AgentOptions::Backstop::kEnd;
  s.detail =
      s.interposer ? "interposer " + options_.interposer_path : "interposer not usable: " + problem;
  s.detail += s.backstop ? "; backstop ends tasks over their quota"
                         : "; backstop only reports (--slice-backstop report)";
  return s;
}

json Agent::helloMessage() {
  seq_out_ = 0;
  last_seq_in_ = 0;
  hello_sent_ = clock_.monotonic();
  heartbeats_sent_.clear();
  // Level-triggered: a new connection gets telemetry and the health findings again at the next
  // tick (the controller starts every GPU of a (re)registered node healthy).
  last_telemetry_.reset();
  last_findings_.clear();
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
  protocol::Hello hello;
  hello.node.name = options_.node_name;
  hello.node.hostname = hostname;
  hello.node.labels = options_.labels;
  hello.node.cpu_millis = cpu;
  hello.node.ram_mib = ram;
  hello.node.agent_version = kAgentVersion;
  hello.node.os = std::string(u.sysname) + " " + u.release;
  hello.node.cgroup = layout.ok() ? std::string(cgroupModeName(layout->mode)) : "unknown";
  hello.node.slices = sliceEnforcement();
  hello.gpus = inventoryMessage(inventory_);
  const Micros sent = clock_.monotonic();
  for (auto& [name, t] : tasks_) {
    hello.tasks.push_back(taskReport(t));
    // The hello carries every report again; each is owed its ack on this connection.
    t.reported = t.info.status.state;
    t.awaiting_ack = t.has_assignment;
    t.sent_at = sent;
  }
  hello.last_node_epoch = node_epoch_;
  return protocol::encodeMessage(hello, ++seq_out_, 0);
}

namespace {

// Decodes `body` as an M and hands it to `on`; a decoding error is returned as it is.
template <typename M, typename F>
Status dispatch(const json& body, F&& on) {
  Result<M> m = protocol::decodeBody<M>(body);
  if (!m.ok()) return m.status();
  return on(std::move(*m));
}

}  // namespace

void Agent::handle(const json& msg) {
  Result<protocol::Envelope> env = protocol::decodeEnvelope(msg);
  if (!env.ok()) {
    const char* code = env.status().code() == StatusCode::kFailedPrecondition
                           ? "unsupported_version"
                           : "invalid_argument";
    sendError(code, env.status().message(), protocol::peekSeq(msg));
    return;
  }
  last_seq_in_ = std::max(last_seq_in_, env->seq);
  const int64_t seq = env->seq;
  const std::string& type = env->type;
  Status s;
  if (type == protocol::Welcome::kType) {
    s = dispatch<protocol::Welcome>(env->body, [&](auto m) { return onWelcome(m); });
  } else if (type == protocol::DesiredState::kType) {
    s = dispatch<protocol::DesiredState>(env->body,
                                         [&](auto m) { return onDesiredState(std::move(m), seq); });
  } else if (type == protocol::Assign::kType) {
    s = dispatch<protocol::Assign>(env->body, [&](auto m) { return onAssign(std::move(m), seq); });
  } else if (type == protocol::Cancel::kType) {
    s = dispatch<protocol::Cancel>(env->body, [&](auto m) { return onCancel(m, seq); });
  } else if (type == protocol::Lease::kType) {
    s = dispatch<protocol::Lease>(env->body, [&](auto m) { return onLease(m); });
  } else if (type == protocol::TaskAck::kType) {
    s = dispatch<protocol::TaskAck>(env->body, [&](auto m) { return onTaskAck(m); });
  } else if (type == protocol::ReadLog::kType) {
    s = dispatch<protocol::ReadLog>(env->body, [&](auto m) { return onReadLog(m); });
  } else if (type == protocol::Error::kType) {
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

Status Agent::onWelcome(const protocol::Welcome& m) {
  GPOOL_RETURN_IF_ERROR(acceptNodeEpoch(m.node_epoch));
  if (!m.node_credential.empty()) node_credential_ = m.node_credential;
  if (m.lease && Micros(m.lease->duration_s * 1'000'000) != options_.lease) {
    options_.lease = Micros(m.lease->duration_s * 1'000'000);
    fence_ = std::make_unique<Fence>(clock_, options_.lease);
  }
  if (m.lease && m.lease->fence_grace_s) {
    options_.fence_grace = Micros(*m.lease->fence_grace_s * 1'000'000);
  }
  if (m.config) {
    if (m.config->heartbeat_interval_s)
      options_.heartbeat_interval = Micros(*m.config->heartbeat_interval_s * 1'000'000);
    if (m.config->telemetry_interval_s)
      options_.telemetry_interval = Micros(*m.config->telemetry_interval_s * 1'000'000);
    if (m.config->stray_policy) options_.kill_strays = *m.config->stray_policy == "kill";
    if (m.config->stray_grace_s) {
      options_.stray_grace = Micros(*m.config->stray_grace_s * 1'000'000);
      strays_.setGrace(options_.stray_grace);
    }
  }
  // The welcome answers this connection's hello: the lease runs from when that left.
  fence_->recordContact(hello_sent_);
  fenced_ = false;
  publishLease();
  return Status::ok();
}

Status Agent::onLease(const protocol::Lease& m) {
  GPOOL_RETURN_IF_ERROR(acceptNodeEpoch(m.node_epoch));
  // The lease runs on our own monotonic clock from when the renewed heartbeat left (skew cannot
  // extend it, nor can a delayed answer); valid_until is the controller's view, informational.
  auto sent = heartbeats_sent_.find(m.renews);
  if (sent == heartbeats_sent_.end()) {
    return Status::invalidArgument("renews: heartbeat " + std::to_string(m.renews) +
                                   " was not sent on this connection, or was answered already");
  }
  fence_->recordContact(sent->second);
  heartbeats_sent_.erase(heartbeats_sent_.begin(), std::next(sent));
  fenced_ = false;
  publishLease();
  return Status::ok();
}

void Agent::publishLease() {
  if (!lease_file_) return;
  LeaseFile::Terms terms;
  terms.expires_boot_us = bootTimeMicros() + fence_->remaining().count();
  terms.fence_grace_ms = options_.fence_grace.count() / 1000;
  lease_file_->renew(terms);
}

Status Agent::onDesiredState(protocol::DesiredState m, int64_t seq) {
  GPOOL_RETURN_IF_ERROR(acceptNodeEpoch(m.node_epoch));
  std::set<std::string> desired;
  for (const TaskEntry& e : m.tasks)
    desired.insert(protocol::taskName(e.assignment));
  // Stop what is not desired first, so that its resources are free for the new starts.
  for (auto& [name, t] : tasks_) {
    if (desired.count(name) || isTerminal(t.info.status.state) || t.stopping) continue;
    stopTask(t, StopReason::kCancel, "cancelled", std::nullopt);
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = desired.count(it->first) ? std::next(it) : pending_.erase(it);
  }
  for (TaskEntry& e : m.tasks)
    reconcileEntry(std::move(e), seq);
  return Status::ok();
}

Status Agent::onAssign(protocol::Assign m, int64_t seq) {
  if (m.node_epoch) GPOOL_RETURN_IF_ERROR(acceptNodeEpoch(*m.node_epoch));
  reconcileEntry(std::move(m.entry), seq);
  return Status::ok();
}

Status Agent::onCancel(const protocol::Cancel& m, int64_t seq) {
  const Assignment& a = m.assignment;
  std::string name = protocol::taskName(a);
  pending_.erase(name);
  auto it = tasks_.find(name);
  if (it == tasks_.end()) return Status::ok();  // nothing here: idempotent
  Tracked& t = it->second;
  // A cancel naming another store incarnation is about another job that had this id (before
  // or after a restore of the store): not this task.
  if (t.has_assignment && a.incarnation != 0 && a.incarnation != t.assignment.incarnation) {
    return Status::ok();
  }
  if (t.has_assignment && a.lease_epoch < t.assignment.lease_epoch) {
    sendError("stale_epoch",
              "body.assignment.lease_epoch: " + std::to_string(a.lease_epoch) +
                  " is older than the task's " + std::to_string(t.assignment.lease_epoch),
              seq);
    return Status::ok();
  }
  if (isTerminal(t.info.status.state) || t.stopping) return Status::ok();
  std::optional<int64_t> grace;
  if (m.grace_s) grace = *m.grace_s * 1000;
  stopTask(t, m.reason == "cancelled" ? StopReason::kCancel : StopReason::kPreempt, m.reason,
           grace);
  return Status::ok();
}

Status Agent::onTaskAck(const protocol::TaskAck& m) {
  auto it = tasks_.find(protocol::taskName(m.assignment));
  // An ack of an attempt replaced since, or of a state reported before the latest, settles
  // nothing: the latest report is still owed its own.
  if (it == tasks_.end() || !it->second.has_assignment) return Status::ok();
  Tracked& t = it->second;
  if (t.assignment != m.assignment || m.state != phaseOf(t.reported)) return Status::ok();
  t.awaiting_ack = false;
  // Its end is in the controller's store: from now on its directory may go once the
  // retention has passed (removeRetiredTasks); an earlier acknowledgement keeps its time.
  if (m.state == protocol::TaskPhase::kExited && !t.end_acknowledged) {
    t.end_acknowledged = clock_.monotonic();
  }
  return Status::ok();
}

void Agent::resendUnacked() {
  const Micros mono = clock_.monotonic();
  for (auto& [name, t] : tasks_) {
    if (!t.has_assignment || !t.awaiting_ack || t.reported != t.info.status.state) continue;
    if (mono - t.sent_at < options_.heartbeat_interval) continue;
    reportTask(t);
  }
}

Status Agent::onReadLog(const protocol::ReadLog& m) {
  protocol::LogData answer;
  answer.request = m.request;
  answer.job_id = m.job_id;
  answer.task = m.task;
  answer.lease_epoch = m.lease_epoch;
  answer.stream = m.stream;
  answer.offset = m.offset;
  const std::string name = protocol::taskName(m.job_id, m.task);
  // The task's directory holds the log of its latest attempt here only.
  auto it = tasks_.find(name);
  if (it != tasks_.end() && it->second.has_assignment && m.incarnation != 0 &&
      it->second.assignment.incarnation != m.incarnation) {
    answer.error = "the log of job " + std::to_string(m.job_id) + " task " +
                   std::to_string(m.task) + " of store incarnation " +
                   std::to_string(m.incarnation) + " is not here: this node's task " + name +
                   " belongs to incarnation " + std::to_string(it->second.assignment.incarnation) +
                   " (another job that had the same id)";
    send(answer);
    return Status::ok();
  }
  // The name is built from two integers, so the path stays inside the state directory; the
  // last component is not followed if the task replaced its log with a link.
  std::string path = launcher_.taskDir(name) + "/" + m.stream + ".log";
  if (it != tasks_.end() && it->second.has_assignment &&
      it->second.assignment.lease_epoch != m.lease_epoch) {
    // An earlier attempt: kept aside when the later one started here (Launcher::keepAttempt).
    path = launcher_.attemptDir(name, m.lease_epoch) + "/" + m.stream + ".log";
    struct stat kept {};
    if (m.lease_epoch > it->second.assignment.lease_epoch || ::lstat(path.c_str(), &kept) != 0) {
      answer.error = "the log of job " + std::to_string(m.job_id) + " task " +
                     std::to_string(m.task) + " under lease epoch " +
                     std::to_string(m.lease_epoch) + " is gone: epoch " +
                     std::to_string(it->second.assignment.lease_epoch) + " ran here since";
      send(answer);
      return Status::ok();
    }
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    if (err != ENOENT) answer.error = "cannot open " + path + ": " + std::strerror(err);
    send(answer);
    return Status::ok();
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    answer.error = path + " is not a regular file";
  } else {
    auto size = static_cast<int64_t>(st.st_size);
    if (m.offset < size) {
      answer.data.resize(static_cast<size_t>(std::min(m.max_bytes, size - m.offset)));
      ssize_t got =
          ::pread(fd, answer.data.data(), answer.data.size(), static_cast<off_t>(m.offset));
      if (got < 0) {
        answer.error = "cannot read " + path + ": " + std::strerror(errno);
        got = 0;
      }
      answer.data.resize(static_cast<size_t>(got));
    }
    answer.found = true;
    answer.size = size;
  }
  ::close(fd);
  send(answer);
  return Status::ok();
}

void Agent::reconcileEntry(TaskEntry entry, int64_t seq) {
  std::string name = protocol::taskName(entry.assignment);
  auto it = tasks_.find(name);
  if (it != tasks_.end() && it->second.has_assignment) {
    Tracked& t = it->second;
    int64_t ours = t.assignment.lease_epoch;
    int64_t theirs = entry.assignment.lease_epoch;
    // Another store incarnation: the same id names another job (the store was restored from a
    // backup). Its epochs do not compare with ours; the controller's word is the current one,
    // so the task here is replaced as by a newer attempt, and its recorded end is never
    // reported as the new one's.
    const bool other_job = t.assignment.incarnation != entry.assignment.incarnation;
    if (other_job) {
      ours = 0;
      theirs = 1;
    }
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
  // An ended earlier attempt of the same task: its record has been reported; make room. Its
  // directory (its output) is kept aside for `read_log` of its epoch (gpool logs --attempt),
  // unless it was another job's (another store incarnation), whose kept attempts go with it.
  auto old = tasks_.find(name);
  if (old != tasks_.end()) {
    const Tracked& o = old->second;
    const bool same_job = o.has_assignment && o.assignment.incarnation == t.assignment.incarnation;
    if (!same_job || o.assignment.lease_epoch >= t.assignment.lease_epoch ||
        !launcher_.keepAttempt(name, o.assignment.lease_epoch).isOk()) {
      (void)launcher_.remove(name);
    }
    if (!same_job) (void)launcher_.removeAttempts(name);
    tasks_.erase(old);
  }
  TaskLaunch launch = taskLaunchFrom(entry);
  // A demo job on simulated GPUs may say how busy it is: GPOOL_SIM_LOAD (percent of its share,
  // default 100) and GPOOL_SIM_MEMORY (e.g. 20G).
  if (launch.slice) t.sim_share = std::clamp(launch.slice->compute / 1000.0, 0.001, 1.0);
  if (auto it = launch.env.find("GPOOL_SIM_LOAD"); it != launch.env.end()) {
    char* end = nullptr;
    double pct = std::strtod(it->second.c_str(), &end);
    if (end != it->second.c_str()) t.sim_load = std::clamp(pct / 100.0, 0.0, 1.0);
  }
  if (auto it = launch.env.find("GPOOL_SIM_MEMORY"); it != launch.env.end()) {
    if (Result<uint64_t> mib = parseMemoryMiB(it->second); mib.ok()) t.sim_memory_mib = *mib;
  }
  if (t.sim_memory_mib == 0 && launch.slice) t.sim_memory_mib = launch.slice->memory_mib * 7 / 10;
  // The supervisor enforces the lease itself for the tasks it fences: they stop even if this
  // agent dies or stops, before the controller may run them elsewhere.
  if (entry.requeueable || options_.fence_all_tasks) launch.lease_file = options_.lease_file;
  for (const std::string& uuid : entry.launch.gpus) {
    const gpu::GpuInfo* g = inventory_.findGpu(uuid);
    if (g == nullptr) return fail(Status::invalidArgument("gpus: no GPU " + uuid + " here"));
    // The device minor: NVML's minor number equals the index on every driver we target.
    launch.gpus.push_back(TaskGpu{uuid, static_cast<int32_t>(g->index)});
    t.gpus.push_back(uuid);
  }
  if (launch.slice) {
    const gpu::GpuInfo* g = inventory_.findGpu(entry.launch.gpus[0]);
    if (options_.vgpu_dir.empty()) {
      return fail(Status::failedPrecondition("slice: the agent has no vgpu_dir configured"));
    }
    Status made = makeDirs(options_.vgpu_dir, 0755);
    if (!made.isOk()) return fail(made);
    // The task's user owns the usage part and may enter the region's directory; the limits
    // stay the agent's. An agent that is not root runs tasks as itself.
    std::optional<UnixUser> owner;
    if (::geteuid() == 0) {
      Result<UnixUser> user = lookupUnixUser(launch.user);
      if (!user.ok()) return fail(user.status());
      owner = std::move(user).value();
    }
    const std::string dir = options_.vgpu_dir + "/" + name;
    Status dir_made = makeRegionDir(dir, owner ? &*owner : nullptr);
    if (!dir_made.isOk()) return fail(dir_made);
    vgpu::RegionConfig rc;
    rc.quota_bytes = launch.slice->memory_mib * 1024 * 1024;
    rc.share_permille = launch.slice->compute;
    rc.device_index = 0;  // the slice's GPU is CUDA device 0 inside the task
    rc.device_uuid = g->uuid;
    if (owner) {
      rc.usage_uid = owner->uid;
      rc.usage_gid = launch.gid.value_or(owner->gid);
    }
    std::string path = dir + "/gpu" + std::to_string(g->index);
    auto region = vgpu::ShmRegion::create(path, rc);
    if (!region.ok()) {
      (void)removeTree(dir);
      return fail(region.status());
    }
    launch.slice->shm_path = path;
    launch.slice->interposer = options_.interposer_path;
    t.regions.push_back(path);
    t.slice_quota_mib = launch.slice->memory_mib;
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
                     std::optional<int64_t> grace_ms, const std::string& detail) {
  Status s = launcher_.stop(t.info.name, reason, grace_ms, detail);
  if (s.isOk() || s.code() == StatusCode::kFailedPrecondition) {
    t.stopping = reason;
    t.stop_reason = std::move(why);
  }
}

void Agent::reportTask(Tracked& t) {
  if (!t.has_assignment) return;  // nothing the controller can match it to
  protocol::TaskUpdate update{taskReport(t)};
  update.report.name.clear();  // the assignment names it
  if (t.stopping && isTerminal(t.info.status.state)) update.report.stop_reason = t.stop_reason;
  send(update);
  t.reported = t.info.status.state;
  t.reported_once = true;
  t.awaiting_ack = true;
  t.sent_at = clock_.monotonic();
  if (isTerminal(t.info.status.state)) {
    for (const std::string& path : t.regions)
      removeRegion(path);
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

std::vector<std::string> Agent::unfinishedTaskDirs() const {
  std::vector<std::string> dirs;
  for (const auto& [name, t] : tasks_) {
    if (isTerminal(t.info.status.state) && t.reported_once) continue;  // as refreshTasks skips
    dirs.push_back(launcher_.taskDir(name));
  }
  return dirs;
}

void Agent::removeRetiredTasks() {
  constexpr size_t kMaxRemovalsPerTick = 256;
  std::vector<std::pair<Micros, std::string>> retired;  // (acknowledged at, name)
  for (const auto& [name, t] : tasks_) {
    if (t.end_acknowledged && isTerminal(t.info.status.state) && !pending_.count(name)) {
      retired.emplace_back(*t.end_acknowledged, name);
    }
  }
  if (retired.empty()) return;
  std::sort(retired.begin(), retired.end());
  const Micros now = clock_.monotonic();
  const size_t excess = retired.size() > options_.max_retained_tasks
                            ? retired.size() - options_.max_retained_tasks
                            : 0;
  size_t removed = 0;
  for (size_t i = 0; i < retired.size() && removed < kMaxRemovalsPerTick; ++i) {
    const auto& [acknowledged, name] = retired[i];
    if (i >= excess && now - acknowledged < options_.task_retention) break;  // sorted: none left
    Status s = launcher_.remove(name);
    if (!s.isOk() && s.code() != StatusCode::kNotFound) continue;  // tried again next tick
    // The task's earlier attempts here go with its latest one.
    (void)launcher_.removeAttempts(name);
    ::unlink(assignmentPath(name).c_str());
    tasks_.erase(name);
    ++removed;
  }
}

void Agent::fenceTasks() {
  if (!fence_->expired()) return;
  std::vector<Fence::RunningTask> running;
  for (const auto& [name, t] : tasks_) {
    if (!isTerminal(t.info.status.state) && !t.stopping) {
      running.push_back({name, t.requeueable || options_.fence_all_tasks});
    }
  }
  for (const std::string& name : fence_->tasksToStop(running)) {
    stopTask(tasks_.at(name), StopReason::kFence, "fenced", options_.fence_grace.count() / 1000);
  }
  fenced_ = true;
}

void Agent::simulateTenants(gpu::TelemetrySample& sample) {
  for (gpu::GpuTelemetry& g : sample.gpus) {
    double busy = 0;  // the GPU's utilisation in [0, 1]
    for (const auto& [name, t] : tasks_) {
      if (!t.has_assignment || isTerminal(t.info.status.state) || t.info.status.task_pid <= 0) {
        continue;
      }
      if (std::find(t.gpus.begin(), t.gpus.end(), g.uuid) == t.gpus.end()) continue;
      double load = t.sim_load;
      uint64_t memory = t.sim_memory_mib;
      if (memory == 0) memory = g.memory_total_mib * 7 / 10;
      // A task that ran CUDA under the interposer: its region says what it really does.
      for (const std::string& path : t.regions) {
        auto region = vgpu::ShmRegion::open(path);
        if (!region.ok()) continue;
        const vgpu::ShmHeader* h = region->header();
        if (h->launches_total.load() == 0 && region->usedBytes() == 0) continue;
        uint32_t share = std::max<uint32_t>(1, region->limits()->share_permille.load());
        load = std::min(1.0, h->measured_permille.load() / static_cast<double>(share));
        memory = region->usedBytes() / (1024 * 1024);
      }
      busy += t.sim_share * load;
      g.processes.push_back({t.info.status.task_pid, memory});
      g.memory_used_mib = std::min(g.memory_total_mib, g.memory_used_mib + memory);
    }
    busy = std::min(busy, 1.0);
    // Power and heat follow the load: ~20 % of the board's limit when idle (what the fixture
    // reports, if lower), the limit at full load; 0.45 C per % over the idle temperature, or
    // what the fixture's script says if that is hotter (an injected overheating).
    const std::string& model = inventory_.findGpu(g.uuid) ? inventory_.findGpu(g.uuid)->model : "";
    double tdp = model.find("H100") != std::string::npos   ? 700
                 : model.find("A100") != std::string::npos ? 400
                                                           : 300;
    double idle_w = std::min(g.power_w, tdp * 0.2);
    g.utilization_pct = static_cast<uint32_t>(std::lround(busy * 100));
    g.memory_utilization_pct = static_cast<uint32_t>(std::lround(busy * 40));
    g.power_w = idle_w + (tdp - idle_w) * busy;
    g.temperature_c = std::max(g.temperature_c, static_cast<int32_t>(std::lround(32 + 45 * busy)));
  }
}

void Agent::addSliceUsage(protocol::Telemetry& telemetry) {
  const Micros mono = clock_.monotonic();
  // The interposer's control loop holds a lease on CLOCK_MONOTONIC (the host's, not the
  // agent's injected clock): once it lapsed, no process of the task runs the loop and the last
  // measured share is stale.
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t host_mono_us = static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
  for (auto& [name, t] : tasks_) {
    if (!t.has_assignment || t.regions.empty() || t.gpus.empty() ||
        isTerminal(t.info.status.state)) {
      continue;
    }
    auto gpu = std::find_if(telemetry.gpus.begin(), telemetry.gpus.end(),
                            [&](const protocol::GpuSample& g) { return g.uuid == t.gpus[0]; });
    if (gpu == telemetry.gpus.end()) continue;
    protocol::SliceUsageSample use;
    use.job_id = t.assignment.job_id;
    use.task = t.assignment.task;
    bool read = false;
    for (const std::string& path : t.regions) {
      auto region = vgpu::ShmRegion::open(path);
      if (!region.ok()) continue;  // not created yet, or removed: nothing to say
      read = true;
      const vgpu::ShmHeader* h = region->header();
      // Exited processes' launches are in launches_total, live ones' in their slots. The task
      // can write any number there: the sum saturates below what the protocol accepts.
      auto add = [](uint64_t a, uint64_t b) {
        constexpr uint64_t kMax = uint64_t{1} << 62;
        return std::min(kMax, std::min(a, kMax) + std::min(b, kMax));
      };
      use.kernel_launches =
          add(use.kernel_launches, h->launches_total.load(std::memory_order_relaxed));
      for (const vgpu::ShmSlot& slot : h->slots) {
        if (slot.pid.load(std::memory_order_relaxed) != 0) {
          use.kernel_launches =
              add(use.kernel_launches, slot.launches.load(std::memory_order_relaxed));
        }
      }
      if (h->controller_lease_until_us.load(std::memory_order_relaxed) >= host_mono_us) {
        use.compute_used_permille +=
            std::min<uint32_t>(1000, h->measured_permille.load(std::memory_order_relaxed));
      }
    }
    if (!read) continue;
    use.compute_used_permille = std::min<uint32_t>(use.compute_used_permille, 1000);
    // A process exiting adds its slot's count to the total before freeing the slot: read
    // between the two, the sum counts that process twice (and the exit shows as a launch), then
    // dips back; only a count above the largest seen is a launch.
    if (use.kernel_launches > t.launches_seen) {
      t.launches_seen = use.kernel_launches;
      t.last_launch_seen = mono;
    }
    if (t.last_launch_seen) use.since_last_launch_us = (mono - *t.last_launch_seen).count();
    gpu->slices.push_back(use);
  }
}

void Agent::sampleAndCheck(TimePoint now) {
  auto inventory = backend_.inventory();
  if (inventory.ok()) inventory_ = *inventory;
  auto sample = backend_.sample();
  std::vector<protocol::Finding> findings;
  if (!sample.ok()) {
    protocol::Finding f;
    f.check = "backend_error";
    f.severity = "critical";
    f.message = sample.status().toString();
    findings.push_back(std::move(f));
  } else {
    // The processes the backend measured; simulateTenants appends made-up ones after them,
    // which the backstop must not act on.
    std::vector<size_t> measured;
    for (const gpu::GpuTelemetry& g : sample->gpus)
      measured.push_back(g.processes.size());
    if (sample->simulated) simulateTenants(*sample);
    protocol::Telemetry telemetry = telemetryMessage(*sample);
    for (const gpu::Finding& f : gpu::checkHealth(inventory_, *sample, options_.health))
      findings.push_back(findingMessage(f));
    // A GPU process belongs to a task when it descends from the task's process, or, while the
    // task runs, from its supervisor: a container's processes hang under Podman's conmon,
    // which the supervisor adopts, not under the `podman run` it started, and they must count
    // against the slice's quota instead of being killed as strays on its GPU. Processes of
    // running tasks are tagged with their job and task in the telemetry, so that the
    // controller attributes a shared GPU's memory to its tenants.
    gpu::GpuOwnership own;
    std::map<std::string, uint64_t> held;  // slice task -> MiB its processes hold on its GPU
    for (size_t gi = 0; gi < sample->gpus.size(); ++gi) {
      const gpu::GpuTelemetry& g = sample->gpus[gi];
      for (size_t pi = 0; pi < g.processes.size(); ++pi) {
        const gpu::GpuProcess& p = g.processes[pi];
        for (const auto& [name, t] : tasks_) {
          if (t.info.status.task_pid <= 0) continue;
          bool ended = isTerminal(t.info.status.state);
          // An ended task's supervisor is gone and its pid may be another process's now.
          const bool under_supervisor = !ended && t.info.status.supervisor_pid > 0 &&
                                        descendsFrom(p.pid, t.info.status.supervisor_pid);
          if (!under_supervisor && !descendsFrom(p.pid, t.info.status.task_pid)) continue;
          auto& set = ended ? own.dead_task_pids : own.task_pids;
          set[g.uuid].insert(p.pid);
          if (!ended && t.has_assignment) {
            protocol::GpuProcessSample& entry = telemetry.gpus[gi].processes[pi];
            entry.job_id = t.assignment.job_id;
            entry.task = t.assignment.task;
          }
          if (!ended && t.slice_quota_mib > 0 && pi < measured[gi] && !t.gpus.empty() &&
              t.gpus[0] == g.uuid) {
            held[name] += p.used_mib;
          }
        }
      }
    }
    addSliceUsage(telemetry);
    send(telemetry);
    std::vector<gpu::Finding> hygiene = gpu::findStrayProcesses(*sample, own, options_.hygiene);
    // Who runs each process found, read before any is killed (then it is gone).
    std::map<int, std::string> users;
    for (const gpu::Finding& f : hygiene) {
      if (f.pid > 0 && !users.count(f.pid)) users[f.pid] = processUserName(f.pid);
    }
    std::vector<gpu::Finding> lasting = strays_.update(hygiene, now);
    // The backstop kills what stays unowned on a running slice's GPU even when strays are only
    // reported elsewhere: such a process may be a task's own that escaped its process tree.
    std::set<std::string> slice_gpus;
    if (options_.slice_backstop == AgentOptions::Backstop::kEnd) {
      for (const auto& [name, t] : tasks_) {
        if (t.slice_quota_mib > 0 && !t.gpus.empty() && !isTerminal(t.info.status.state)) {
          slice_gpus.insert(t.gpus[0]);
        }
      }
    }
    std::vector<gpu::Finding> to_kill;
    for (const gpu::Finding& f : lasting) {
      if (options_.kill_strays || slice_gpus.count(f.gpu_uuid)) to_kill.push_back(f);
    }
    std::map<std::pair<std::string, int>, std::string> actions;
    if (!to_kill.empty()) {
      for (const gpu::KillOutcome& k : gpu::killStrayProcesses(backend_, to_kill)) {
        actions[{k.gpu_uuid, k.pid}] = k.status.isOk() || k.status.code() == StatusCode::kNotFound
                                           ? "killed"
                                           : "kill failed: " + k.status.toString();
      }
    }
    for (const gpu::Finding& f : hygiene) {
      protocol::Finding m = findingMessage(f);
      auto a = actions.find({f.gpu_uuid, f.pid});
      if (a != actions.end()) {
        m.action = a->second;
      } else if (f.pid != 0) {
        m.action = "reported";
      }
      if (f.pid > 0) m.user = users[f.pid];
      findings.push_back(std::move(m));
    }
    sliceBackstop(held, &findings);
  }
  if (findings != last_findings_) {
    last_findings_ = findings;
    send(protocol::Health{std::move(findings), toUnixMicros(now)});
  }
}

void Agent::sliceBackstop(const std::map<std::string, uint64_t>& held,
                          std::vector<protocol::Finding>* findings) {
  for (const auto& [name, mib] : held) {
    Tracked& t = tasks_.at(name);
    const uint64_t tolerance = std::max(options_.backstop_tolerance_mib,
                                        t.slice_quota_mib * options_.backstop_tolerance_pct / 100);
    if (mib <= t.slice_quota_mib + tolerance) continue;
    const gpu::GpuInfo* g = inventory_.findGpu(t.gpus[0]);
    const std::string gpu_name =
        "GPU " + (g != nullptr ? std::to_string(g->index) + " (" + g->uuid + ")" : t.gpus[0]);
    const std::string reason = "GPU memory over the slice's quota: the task's processes held " +
                               std::to_string(mib) + " MiB on " + gpu_name + ", its quota is " +
                               std::to_string(t.slice_quota_mib) + " MiB (tolerance " +
                               std::to_string(tolerance) + " MiB)";
    protocol::Finding f;
    f.check = "slice_over_quota";
    f.severity = "warning";
    f.gpu_uuid = t.gpus[0];
    f.used_mib = static_cast<int64_t>(mib);
    f.message = "task " + name + ": " + reason;
    if (options_.slice_backstop == AgentOptions::Backstop::kEnd) {
      if (!t.stopping) {
        stopTask(t, StopReason::kOutOfMemory, "out_of_memory", std::nullopt,
                 reason + "; ended by the agent's backstop");
      }
      f.action = "ended the task OUT_OF_MEMORY";
    } else {
      f.action = "reported";
    }
    findings->push_back(std::move(f));
  }
}

void Agent::writeJobMapping() {
  if (options_.hpc_job_mapping_dir.empty()) return;
  std::map<uint32_t, std::set<int64_t>> jobs;
  for (const auto& [name, t] : tasks_) {
    if (!t.has_assignment || isTerminal(t.info.status.state)) continue;
    for (const std::string& uuid : t.gpus) {
      if (const gpu::GpuInfo* g = inventory_.findGpu(uuid))
        jobs[g->index].insert(t.assignment.job_id);
    }
  }
  std::map<uint32_t, std::string> want;
  for (const auto& [index, ids] : jobs) {
    std::string text;
    for (int64_t id : ids)
      text += std::to_string(id) + "\n";
    want[index] = std::move(text);
  }
  if (want == job_mapping_) return;
  if (!makeDirs(options_.hpc_job_mapping_dir, 0755).isOk()) return;  // tried again next tick
  std::map<uint32_t, std::string> written;
  for (const auto& [index, text] : want) {
    std::string path = options_.hpc_job_mapping_dir + "/" + std::to_string(index);
    auto old = job_mapping_.find(index);
    if (old != job_mapping_.end() && old->second == text) {
      written[index] = text;
      continue;
    }
    // Written whole, then renamed: dcgm-exporter never reads half a file.
    std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << text;
      if (!out) continue;
    }
    if (std::rename(tmp.c_str(), path.c_str()) == 0) written[index] = text;
  }
  for (const auto& [index, text] : job_mapping_) {
    if (want.count(index)) continue;
    std::string path = options_.hpc_job_mapping_dir + "/" + std::to_string(index);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) written[index] = text;  // retried
  }
  job_mapping_ = std::move(written);
}

void Agent::tick() {
  TimePoint now = clock_.now();
  Micros mono = clock_.monotonic();
  refreshTasks();
  resendUnacked();
  fenceTasks();
  removeRetiredTasks();
  writeJobMapping();
  if (!last_heartbeat_ || mono - *last_heartbeat_ >= options_.heartbeat_interval) {
    last_heartbeat_ = mono;
    // Its seq is the next one; the `lease` that answers it names it (`renews`).
    heartbeats_sent_[seq_out_ + 1] = mono;
    while (heartbeats_sent_.size() > 64)
      heartbeats_sent_.erase(heartbeats_sent_.begin());  // never answered: lost
    send(protocol::Heartbeat{toUnixMicros(now), fence_->mayStartWork()});
  }
  if (!last_telemetry_ || mono - *last_telemetry_ >= options_.telemetry_interval) {
    last_telemetry_ = mono;
    sampleAndCheck(now);
  }
}

}  // namespace gpool::agent
