#include "agent/task_launch.h"

#include <nlohmann/json.hpp>

#include <array>
#include <utility>

namespace gpool::agent {
namespace {

using nlohmann::json;

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

constexpr std::array<std::pair<TaskState, std::string_view>, 9> kStateNames = {{
    {TaskState::kStarting, "STARTING"},
    {TaskState::kRunning, "RUNNING"},
    {TaskState::kCompleted, "COMPLETED"},
    {TaskState::kFailed, "FAILED"},
    {TaskState::kCancelled, "CANCELLED"},
    {TaskState::kPreempted, "PREEMPTED"},
    {TaskState::kTimeout, "TIMEOUT"},
    {TaskState::kOutOfMemory, "OUT_OF_MEMORY"},
    {TaskState::kNodeFail, "NODE_FAIL"},
}};

}  // namespace

std::string TaskLaunch::taskName() const {
  return job_id + "." + std::to_string(task_index);
}

Status TaskLaunch::validate() const {
  if (job_id.empty() || job_id.size() > 64) {
    return Status::invalidArgument("job id must have 1 to 64 characters, got '" + job_id + "'");
  }
  for (char c : job_id) {
    if (!isNameChar(c)) {
      return Status::invalidArgument("job id '" + job_id +
                                     "' may only contain letters, digits, '_', '.' and '-'");
    }
  }
  if (job_id == "." || job_id == "..") return Status::invalidArgument("job id may not be a dot");
  if (argv.empty() || argv[0].empty()) {
    return Status::invalidArgument("task " + taskName() + " has no program to run");
  }
  if (user.empty()) return Status::invalidArgument("task " + taskName() + " names no user");
  for (const auto& [key, value] : env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return Status::invalidArgument("task " + taskName() + " has an invalid environment name '" +
                                     key + "'");
    }
  }
  for (const TaskGpu& gpu : gpus) {
    if (gpu.uuid.empty() || gpu.minor < 0 || gpu.minor > 254) {
      return Status::invalidArgument("task " + taskName() + " has a GPU without uuid or minor '" +
                                     gpu.uuid + "'");
    }
  }
  if (slice && gpus.size() != 1) {
    return Status::invalidArgument("task " + taskName() + " has a slice but " +
                                   std::to_string(gpus.size()) + " GPUs; a slice is of one GPU");
  }
  if (container) {
    if (Status st = checkImageName(container->image); !st.isOk()) {
      return st.withContext("task " + taskName());
    }
  }
  if (time_limit_ms < 0 || grace_ms < 0) {
    return Status::invalidArgument("task " + taskName() + " has a negative time limit or grace");
  }
  return Status::ok();
}

std::string toJson(const TaskLaunch& l) {
  json gpus = json::array();
  for (const TaskGpu& g : l.gpus)
    gpus.push_back({{"uuid", g.uuid}, {"minor", g.minor}});
  json j = {
      {"job_id", l.job_id},
      {"task_index", l.task_index},
      {"attempt", l.attempt},
      {"argv", l.argv},
      {"env", l.env},
      {"working_dir", l.working_dir},
      {"user", l.user},
      {"cpu_millicores", l.cpu_millicores},
      {"memory_mib", l.memory_mib},
      {"pids_max", l.pids_max},
      {"gpus", gpus},
      {"rendezvous",
       {{"master_addr", l.rendezvous.master_addr},
        {"master_port", l.rendezvous.master_port},
        {"world_size", l.rendezvous.world_size},
        {"rank", l.rendezvous.rank},
        {"local_rank", l.rendezvous.local_rank},
        {"node_rank", l.rendezvous.node_rank}}},
      {"time_limit_ms", l.time_limit_ms},
      {"grace_ms", l.grace_ms},
      {"lease_file", l.lease_file},
      {"project_dir", l.project_dir},
      {"project_gid", l.project_gid},
      {"stdout_path", l.stdout_path},
      {"stderr_path", l.stderr_path},
  };
  if (l.uid) j["uid"] = *l.uid;
  if (l.gid) j["gid"] = *l.gid;
  if (l.slice) {
    j["slice"] = {{"memory_mib", l.slice->memory_mib},
                  {"compute", l.slice->compute},
                  {"interposer", l.slice->interposer},
                  {"shm_path", l.slice->shm_path}};
  }
  if (l.container) {
    json mounts = json::array();
    for (const BindMount& m : l.container->mounts)
      mounts.push_back(formatBindMount(m));
    j["container"] = {{"image", l.container->image}, {"mounts", mounts}};
  }
  return j.dump(2);
}

Result<TaskLaunch> taskLaunchFromJson(std::string_view text) {
  try {
    json j = json::parse(text);
    TaskLaunch l;
    l.job_id = j.at("job_id").get<std::string>();
    l.task_index = j.at("task_index").get<uint32_t>();
    l.attempt = j.value("attempt", uint32_t{0});
    l.argv = j.at("argv").get<std::vector<std::string>>();
    l.env = j.value("env", std::map<std::string, std::string>{});
    l.working_dir = j.value("working_dir", "");
    l.user = j.at("user").get<std::string>();
    if (j.contains("uid")) l.uid = j["uid"].get<uid_t>();
    if (j.contains("gid")) l.gid = j["gid"].get<gid_t>();
    l.cpu_millicores = j.value("cpu_millicores", uint64_t{0});
    l.memory_mib = j.value("memory_mib", uint64_t{0});
    l.pids_max = j.value("pids_max", uint64_t{0});
    for (const json& g : j.value("gpus", json::array())) {
      l.gpus.push_back({g.at("uuid").get<std::string>(), g.at("minor").get<int32_t>()});
    }
    if (j.contains("slice")) {
      const json& s = j["slice"];
      l.slice = SliceQuota{s.value("memory_mib", uint64_t{0}), s.value("compute", uint32_t{0}),
                           s.value("interposer", ""), s.value("shm_path", "")};
    }
    if (j.contains("container")) {
      const json& c = j["container"];
      l.container = ContainerSpec{};
      l.container->image = c.at("image").get<std::string>();
      for (const json& m : c.value("mounts", json::array())) {
        GPOOL_ASSIGN_OR_RETURN(BindMount mount, parseBindMount(m.get<std::string>()));
        l.container->mounts.push_back(std::move(mount));
      }
    }
    if (j.contains("rendezvous")) {
      const json& r = j["rendezvous"];
      l.rendezvous.master_addr = r.value("master_addr", "");
      l.rendezvous.master_port = r.value("master_port", uint16_t{0});
      l.rendezvous.world_size = r.value("world_size", uint32_t{0});
      l.rendezvous.rank = r.value("rank", uint32_t{0});
      l.rendezvous.local_rank = r.value("local_rank", uint32_t{0});
      l.rendezvous.node_rank = r.value("node_rank", uint32_t{0});
    }
    l.time_limit_ms = j.value("time_limit_ms", int64_t{0});
    l.grace_ms = j.value("grace_ms", int64_t{30'000});
    l.lease_file = j.value("lease_file", "");
    l.project_dir = j.value("project_dir", "");
    l.project_gid = j.value("project_gid", gid_t{0});
    l.stdout_path = j.value("stdout_path", "");
    l.stderr_path = j.value("stderr_path", "");
    return l;
  } catch (const json::exception& e) {
    return Status::invalidArgument(std::string("task launch JSON is malformed: ") + e.what());
  }
}

std::string_view taskStateName(TaskState state) {
  for (const auto& [s, name] : kStateNames) {
    if (s == state) return name;
  }
  return "UNKNOWN";
}

Result<TaskState> parseTaskState(std::string_view name) {
  for (const auto& [s, n] : kStateNames) {
    if (n == name) return s;
  }
  return Status::invalidArgument("unknown task state '" + std::string(name) + "'");
}

bool isTerminal(TaskState state) {
  return state != TaskState::kStarting && state != TaskState::kRunning;
}

std::string toJson(const TaskStatus& s) {
  json j = {
      {"state", std::string(taskStateName(s.state))},
      {"supervisor_pid", s.supervisor_pid},
      {"supervisor_start_ticks", s.supervisor_start_ticks},
      {"task_pid", s.task_pid},
      {"started_at_us", s.started_at_us},
      {"ended_at_us", s.ended_at_us},
      {"exit_code", s.exit_code},
      {"signal", s.signal},
      {"reason", s.reason},
  };
  return j.dump(2);
}

Result<TaskStatus> taskStatusFromJson(std::string_view text) {
  try {
    json j = json::parse(text);
    TaskStatus s;
    GPOOL_ASSIGN_OR_RETURN(s.state, parseTaskState(j.at("state").get<std::string>()));
    s.supervisor_pid = j.value("supervisor_pid", pid_t{0});
    s.supervisor_start_ticks = j.value("supervisor_start_ticks", uint64_t{0});
    s.task_pid = j.value("task_pid", pid_t{0});
    s.started_at_us = j.value("started_at_us", int64_t{0});
    s.ended_at_us = j.value("ended_at_us", int64_t{0});
    s.exit_code = j.value("exit_code", -1);
    s.signal = j.value("signal", 0);
    s.reason = j.value("reason", "");
    return s;
  } catch (const json::exception& e) {
    return Status::invalidArgument(std::string("task status JSON is malformed: ") + e.what());
  }
}

Result<TaskStatus> taskStatusFromEndRecord(std::string_view contents) {
  size_t end = contents.find('\0');
  if (end != std::string_view::npos) contents = contents.substr(0, end);
  if (contents.find_first_not_of(" \n") == std::string_view::npos) {
    return Status::notFound("the end record holds no end yet");
  }
  GPOOL_ASSIGN_OR_RETURN(TaskStatus status, taskStatusFromJson(contents));
  if (!isTerminal(status.state)) {
    return Status::invalidArgument("the end record holds a task that has not ended");
  }
  return status;
}

}  // namespace gpool::agent
