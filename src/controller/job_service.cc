#include "controller/job_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "api/gpu_model.h"
#include "api/text.h"
#include "api/user.h"
#include "common/units.h"
#include "store/api_codec.h"

namespace gpool::controller {

namespace {

Status bad(std::string_view field, const std::string& why) {
  return Status::invalidArgument("job." + std::string(field) + ": " + why);
}

std::string mib(uint64_t v) {
  return std::to_string(v) + " MiB";
}

std::string joinedModels(const std::vector<std::string>& models) {
  std::string out;
  for (size_t i = 0; i < models.size(); ++i)
    out += (i ? ", " : "") + models[i];
  return out;
}

}  // namespace

JobService::JobService(store::Store& store, const NodeRegistry& registry, Clock& clock,
                       JobListener* listener, JobServiceOptions options)
    : store_(store),
      registry_(registry),
      clock_(clock),
      listener_(listener),
      options_(std::move(options)) {}

namespace {

// One limit and whose it is, for the message: "QoS high's max_wall_time 1-00:00:00".
struct Limit {
  int64_t value = 0;
  std::string whose;  // "QoS high's max_wall_time", "user alice's quota max_run_time"
};

}  // namespace

Status JobService::applyLimits(const std::string& user, const std::string& group,
                               api::JobSpec* spec) {
  std::vector<Limit> time_limits;  // max_wall_time and max_run_time that apply
  const std::string qos = spec->qos.empty() ? options_.default_qos : spec->qos;
  GPOOL_ASSIGN_OR_RETURN(std::vector<api::Qos> levels, store::loadApiQos(store_));
  for (const api::Qos& level : levels) {
    if (level.name == qos && level.max_wall_time_seconds) {
      time_limits.push_back({*level.max_wall_time_seconds, "QoS " + qos + "'s max_wall_time"});
    }
  }
  std::vector<std::pair<std::string, api::Quota>> quotas;  // whose, quota
  GPOOL_ASSIGN_OR_RETURN(std::optional<api::Quota> mine,
                         store::loadApiQuota(store_, store::QuotaSubject::kUser, user));
  if (mine) quotas.emplace_back("user " + user + "'s quota", *mine);
  if (!group.empty()) {
    GPOOL_ASSIGN_OR_RETURN(std::optional<api::Quota> ours,
                           store::loadApiQuota(store_, store::QuotaSubject::kGroup, group));
    if (ours) quotas.emplace_back("group " + group + "'s quota", *ours);
  }
  for (const auto& [whose, quota] : quotas) {
    if (quota.max_run_time_seconds) {
      time_limits.push_back({*quota.max_run_time_seconds, whose + " max_run_time"});
    }
  }
  if (!time_limits.empty()) {
    const Limit& least =
        *std::min_element(time_limits.begin(), time_limits.end(),
                          [](const Limit& a, const Limit& b) { return a.value < b.value; });
    if (least.value == 0) {
      return bad("time_limit", least.whose + " is 0: no job may run (ask an admin)");
    }
    if (spec->time_limit_seconds == 0) {
      spec->time_limit_seconds = least.value;  // Slurm: a job without --time gets MaxWall
    } else {
      for (const Limit& l : time_limits) {
        if (spec->time_limit_seconds > l.value) {
          return bad("time_limit", formatDuration(spec->time_limit_seconds) + " is above " +
                                       l.whose + " " + formatDuration(l.value) +
                                       "; ask for at most that (--time)");
        }
      }
    }
  }

  // GPU memory per task (max_gpu_mem) bounds what a task takes of shared GPUs: its slices'
  // memory quotas, or whole GPUs asked for with --gpu-mem (shared slices of that size). A whole
  // GPU without --gpu-mem is the task's alone: it is counted by max_gpus, not by its memory,
  // so the limit never refuses it (issue 21: a 40G limit refused every whole 80G GPU).
  const api::TaskResources& res = spec->resources;
  if (res.gpus_milli == 0) return Status::ok();
  if (res.gpus_milli >= 1000 && res.gpu_memory_mib == 0) return Status::ok();
  uint64_t per_gpu = res.gpu_memory_mib;
  if (per_gpu == 0) {
    std::shared_ptr<const PoolSummary> pool = registry_.poolSummary();
    if (pool->nodes == 0) return Status::ok();
    per_gpu = api::perGpuNeed(res, pool->max_gpu_memory_mib).memory_mib;
  }
  const uint64_t gpus = res.gpus_milli >= 1000 ? res.gpus_milli / 1000 : 1;
  const uint64_t task_mib = per_gpu * gpus;
  for (const auto& [whose, quota] : quotas) {
    if (quota.max_memory_per_task_mib && task_mib > *quota.max_memory_per_task_mib) {
      std::string asked = formatMemoryMiB(task_mib) + " of GPU memory per task";
      if (res.gpu_memory_mib == 0) asked += " (the slice's share of the pool's largest GPU)";
      return bad("resources.gpu_memory", asked + " is above " + whose + " max_gpu_mem " +
                                             formatMemoryMiB(*quota.max_memory_per_task_mib) +
                                             "; ask for less with --gpu-mem (per GPU)");
    }
  }
  return Status::ok();
}

Status JobService::checkAgainstPool(const api::JobSpec& spec) const {
  // The registry's cached summary: a submission no longer copies every node.
  std::shared_ptr<const PoolSummary> pool = registry_.poolSummary();
  if (pool->nodes == 0) return Status::ok();
  const api::TaskResources& res = spec.resources;
  const api::Constraints& c = spec.constraints;
  const size_t max_gpus = pool->max_gpus;
  const uint64_t max_gpu_memory = pool->max_gpu_memory_mib;
  const uint64_t max_cpus = pool->max_cpus_milli;
  const uint64_t max_ram = pool->max_ram_mib;
  const std::set<std::string>& models = pool->gpu_models;
  const api::ComputeCapability& max_cc = pool->max_compute_capability;
  uint32_t whole = res.gpus_milli >= 1000 ? res.gpus_milli / 1000 : 0;
  if (res.gpus_milli > 0 && max_gpus == 0) {
    return bad("resources.gpus", "the pool has no GPUs");
  }
  if (whole > max_gpus) {
    return bad("resources.gpus", std::to_string(whole) +
                                     " GPUs per task, but the largest server "
                                     "has " +
                                     std::to_string(max_gpus));
  }
  if (spec.nodes == 1 && uint64_t{whole} * spec.tasks > max_gpus) {
    return bad("tasks", std::to_string(spec.tasks) + " tasks of " + std::to_string(whole) +
                            " GPUs on one node, but the largest server has " +
                            std::to_string(max_gpus));
  }
  if (whole > 0 && spec.tasks > 1 && spec.nodes != 1) {
    // A gang spread over servers: over exactly N of them as evenly as Slurm spreads it (the
    // first tasks % N get one task more), or over as many as it takes. Counted on the servers'
    // GPUs alone; constraints are the scheduler's (BadConstraints).
    const std::vector<size_t>& gpus = pool->gpus_per_node;  // largest first
    if (spec.nodes > 1) {
      const uint32_t base = spec.tasks / spec.nodes;
      const uint32_t extra = spec.tasks % spec.nodes;
      for (uint32_t i = 0; i < spec.nodes && i < gpus.size(); ++i) {
        const uint64_t need = uint64_t{whole} * (base + (i < extra ? 1 : 0));
        if (gpus[i] < need) {
          return bad("tasks", std::to_string(spec.tasks) + " tasks of " + std::to_string(whole) +
                                  " GPUs over exactly " + std::to_string(spec.nodes) +
                                  " nodes need " + std::to_string(need) +
                                  " GPUs on a server, but the pool's " + std::to_string(i + 1) +
                                  (i == 0   ? "st"
                                   : i == 1 ? "nd"
                                   : i == 2 ? "rd"
                                            : "th") +
                                  " largest server has " + std::to_string(gpus[i]) +
                                  "; ask for more nodes or fewer GPUs per task");
        }
      }
    } else {
      uint64_t fit = 0;
      for (size_t g : gpus)
        fit += g / whole;
      if (fit < spec.tasks) {
        return bad("tasks", std::to_string(spec.tasks) + " tasks of " + std::to_string(whole) +
                                " GPUs, but the pool's servers hold at most " +
                                std::to_string(fit) + " such tasks at once");
      }
    }
  }
  if (res.gpu_memory_mib > max_gpu_memory) {
    return bad("resources.gpu_memory", mib(res.gpu_memory_mib) +
                                           " per GPU, but the largest GPU "
                                           "has " +
                                           mib(max_gpu_memory));
  }
  if (c.min_gpu_memory_mib > max_gpu_memory) {
    return bad("constraints.min_gpu_memory", mib(c.min_gpu_memory_mib) +
                                                 ", but the largest GPU "
                                                 "has " +
                                                 mib(max_gpu_memory));
  }
  if (!c.gpu_models.empty() && api::matchingGpuModels(c.gpu_models, models).empty()) {
    // Models are matched as users name them (api/gpu_model.h); say which names the pool has.
    std::string known;
    for (const std::string& m : models) {
      const std::vector<std::string> names = api::gpuModelNames(m);
      known += (known.empty() ? "" : "; ") + (names.empty() ? m : names.front());
      for (size_t i = 1; i < names.size(); ++i)
        known += (i == 1 ? " (or " : ", ") + names[i] + (i + 1 == names.size() ? ")" : "");
    }
    return bad("constraints.gpu_models",
               "no GPU of the pool is " + std::string(c.gpu_models.size() > 1 ? "any of " : "a ") +
                   joinedModels(c.gpu_models) + "; the pool has " + known +
                   " (gpool nodes --models lists them)");
  }
  if (c.min_compute_capability && *c.min_compute_capability > max_cc) {
    return bad("constraints.min_compute_capability",
               api::formatComputeCapability(*c.min_compute_capability) +
                   ", but the best GPU of the pool has " + api::formatComputeCapability(max_cc));
  }
  if (res.cpus_milli > max_cpus) {
    return bad("resources.cpus", std::to_string(res.cpus_milli) +
                                     " millicores per task, but the "
                                     "largest server has " +
                                     std::to_string(max_cpus));
  }
  if (res.ram_mib > max_ram) {
    return bad("resources.ram",
               mib(res.ram_mib) + " per task, but the largest server has " + mib(max_ram));
  }
  if (spec.nodes > pool->nodes) {
    return bad("nodes", std::to_string(spec.nodes) + " nodes, but the pool has " +
                            std::to_string(pool->nodes));
  }
  for (const auto& [key, value] : c.node_labels) {
    if (pool->labels.count({key, value}) == 0)
      return bad("constraints.node_labels", "no node has label " + key + "=" + value);
  }
  return Status::ok();
}

Status JobService::checkDependencies(const api::JobSpec& spec) {
  for (size_t i = 0; i < spec.dependencies.size(); ++i) {
    uint64_t dep = spec.dependencies[i].job_id;
    Result<store::JobRecord> record = store_.getJob(static_cast<int64_t>(dep));
    if (!record.ok()) {
      if (record.status().code() == StatusCode::kNotFound) {
        return bad("dependencies[" + std::to_string(i) + "]",
                   "job " + std::to_string(dep) + " does not exist");
      }
      return record.status();
    }
  }
  return Status::ok();
}

Result<std::string> JobService::resolveGroup(const Caller& caller, const std::string& user,
                                             const std::string& asked,
                                             const std::optional<api::User>& record) {
  if (asked.empty()) {
    // The user's default group, so that its quota binds whoever leaves --group out.
    return record && !record->groups.empty() ? record->groups.front() : std::string();
  }
  Result<store::GroupRecord> group = store_.getGroup(asked);
  if (!group.ok()) {
    if (group.status().code() != StatusCode::kNotFound) return group.status();
    return Status::invalidArgument("group: there is no group '" + asked +
                                   "' (gpool group list shows the groups)");
  }
  const bool member = record && std::find(record->groups.begin(), record->groups.end(), asked) !=
                                    record->groups.end();
  // An admin may charge any group (an explicit decision); everyone else only their own.
  if (!member && caller.role != Role::kAdmin) {
    std::string theirs = "no groups";
    if (record && !record->groups.empty()) {
      theirs = "the groups ";
      for (size_t i = 0; i < record->groups.size(); ++i)
        theirs += (i ? ", " : "") + record->groups[i];
    }
    return Status::permissionDenied("group: user '" + user + "' is not a member of group '" +
                                    asked + "' (they have " + theirs +
                                    "); its quota is charged only for its members");
  }
  return asked;
}

Status JobService::resolveQos(const std::optional<api::User>& record, api::JobSpec* spec) {
  if (spec->qos.empty()) {
    if (record && !record->default_qos.empty()) spec->qos = record->default_qos;
    return Status::ok();
  }
  std::vector<std::string> names = options_.configured_qos;
  GPOOL_ASSIGN_OR_RETURN(std::vector<api::Qos> levels, store::loadApiQos(store_));
  for (const api::Qos& level : levels) {
    if (std::find(names.begin(), names.end(), level.name) == names.end())
      names.push_back(level.name);
  }
  if (std::find(names.begin(), names.end(), spec->qos) != names.end()) return Status::ok();
  std::string known;
  for (size_t i = 0; i < names.size(); ++i)
    known += (i ? ", " : "") + names[i];
  return bad("qos", "there is no QoS level '" + spec->qos + "' (the levels are " + known +
                        "; gpool qos list shows them)");
}

Result<std::vector<int64_t>> JobService::submit(const Caller& caller,
                                                const SubmitRequest& request) {
  std::string user = request.user.empty() ? caller.user : request.user;
  GPOOL_RETURN_IF_ERROR(api::validateJobSpec(request.spec));
  // Checked here, on what is submitted from now on, not in validateJobSpec: jobs stored before
  // the rule must still decode.
  GPOOL_RETURN_IF_ERROR(api::validateDisplayText(request.spec.name, "job.name"));
  std::optional<api::User> record;
  Result<api::User> loaded = store::loadApiUser(store_, user);
  if (loaded.ok()) {
    record = std::move(*loaded);
  } else if (loaded.status().code() != StatusCode::kNotFound) {
    return loaded.status();
  }
  GPOOL_ASSIGN_OR_RETURN(std::string group, resolveGroup(caller, user, request.group, record));
  GPOOL_RETURN_IF_ERROR(checkSubmit(caller, user, group));
  api::JobSpec spec = request.spec;
  GPOOL_RETURN_IF_ERROR(resolveQos(record, &spec));
  GPOOL_RETURN_IF_ERROR(checkAgainstPool(spec));
  GPOOL_RETURN_IF_ERROR(checkDependencies(spec));
  GPOOL_RETURN_IF_ERROR(applyLimits(user, group, &spec));
  uint32_t uid = user == caller.user ? caller.uid : request.uid;
  // Refused here, with the reason, rather than placed and then failed by the agent.
  if (uid == 0 && !options_.allow_root_jobs) {
    return Status::permissionDenied(
        "user '" + user +
        "' has uid 0: this pool does not run jobs as root (controller.allow_root_jobs); submit "
        "as an ordinary user");
  }
  if (uid != 0 && uid < options_.min_job_uid) {
    return Status::permissionDenied(
        "user '" + user + "' has uid " + std::to_string(uid) + ", below this pool's min_job_uid " +
        std::to_string(options_.min_job_uid) + ": system accounts may not run jobs");
  }
  GPOOL_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                         store::submitApiJob(store_, user, uid, group, spec, clock_.now()));
  if (listener_) listener_->jobsChanged();
  return ids;
}

Result<store::JobPage> JobService::list(const Caller& caller, store::JobFilter filter) {
  if (filter.limit < 1 || filter.limit > store::kMaxPageSize) {
    return Status::invalidArgument("limit: must be in [1, " + std::to_string(store::kMaxPageSize) +
                                   "], got " + std::to_string(filter.limit));
  }
  if (filter.after_id < 0) {
    return Status::invalidArgument("after: must be >= 0, got " + std::to_string(filter.after_id));
  }
  switch (caller.role) {
    case Role::kAdmin: break;
    case Role::kUser:
      if (filter.user && *filter.user != caller.user) {
        return Status::permissionDenied("user '" + caller.user + "' may not list jobs of user '" +
                                        *filter.user + "'");
      }
      filter.user = caller.user;
      break;
    case Role::kGroupAdmin: {
      bool own = filter.user && *filter.user == caller.user;
      bool group_ok =
          filter.group && std::find(caller.admin_groups.begin(), caller.admin_groups.end(),
                                    *filter.group) != caller.admin_groups.end();
      if (!own && !group_ok) {
        if (!filter.user && !filter.group) {
          filter.user = caller.user;  // nothing asked: their own jobs
        } else {
          return Status::permissionDenied("group admin '" + caller.user +
                                          "' may list only their own jobs or those of groups "
                                          "they administer");
        }
      }
      break;
    }
  }
  return store_.listJobs(filter);
}

Result<store::JobRecord> JobService::loadChecked(const Caller& caller, int64_t id,
                                                 JobAction action) {
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, store_.getJob(id));
  GPOOL_RETURN_IF_ERROR(checkJobAction(caller, action, JobOwner{record.user, record.group}));
  return record;
}

Result<api::Job> JobService::show(const Caller& caller, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, loadChecked(caller, id, JobAction::kShow));
  GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
  if (std::optional<PendingInsight> insight = insightOf(record)) {
    job.reason_detail = std::move(insight->detail);
    job.expected_start = insight->expected_start;
  }
  return job;
}

std::optional<PendingInsight> JobService::insightOf(const store::JobRecord& record) const {
  if (listener_ == nullptr || record.state != api::JobState::kPending) return std::nullopt;
  return listener_->pendingInsight(record.id);
}

Result<std::vector<store::JobEvent>> JobService::events(const Caller& caller, int64_t id) {
  GPOOL_RETURN_IF_ERROR(loadChecked(caller, id, JobAction::kShow).status());
  return store_.jobEvents(id);
}

namespace {

// Sets where the next read starts and whether the log is complete, once `chunk->data` holds
// what was read from `chunk->offset` of a file of `chunk->size` bytes. A UTF-8 sequence cut by
// the end of the chunk is left for the next read (the JSON answer would replace its bytes),
// unless it is the end of a finished log.
void endChunk(api::JobState state, LogChunk* chunk) {
  std::string& data = chunk->data;
  size_t keep = data.size();
  for (size_t back = 1; back <= 3 && back <= data.size(); ++back) {
    auto c = static_cast<unsigned char>(data[data.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    if (need > back) keep = data.size() - back;
    break;
  }
  bool at_end = chunk->offset + data.size() >= chunk->size;
  if (!(at_end && api::isFinished(state))) data.resize(keep);
  chunk->next_offset = chunk->offset + data.size();
  // Finished, and read to the end: the file no longer grows (the task's processes are gone).
  chunk->complete = api::isFinished(state) && chunk->next_offset >= chunk->size;
}

}  // namespace

Result<LogChunk> JobService::readLog(const Caller& caller, int64_t id, uint32_t task,
                                     bool stderr_stream, uint64_t offset, uint64_t max_bytes,
                                     uint32_t attempt) {
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, loadChecked(caller, id, JobAction::kReadLog));
  GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
  const std::string what = "job " + std::to_string(id);
  if (task >= job.spec.tasks) {
    return Status::invalidArgument("task: " + what + " has " + std::to_string(job.spec.tasks) +
                                   " task(s), numbered from 0; there is no task " +
                                   std::to_string(task));
  }
  // Attempts are numbered from 1; the job's current one is requeue_count + 1 and earlier ones
  // are in the store's job_attempts (each requeue keeps the placement it ends).
  const uint32_t attempts = job.requeue_count + 1;
  if (attempt == 0) attempt = attempts;
  if (attempt > attempts) {
    return Status::invalidArgument("attempt: " + what + " has had " + std::to_string(attempts) +
                                   " attempt(s), numbered from 1; there is no attempt " +
                                   std::to_string(attempt));
  }
  LogChunk chunk;
  chunk.state = job.state;
  chunk.offset = offset;
  chunk.next_offset = offset;
  chunk.attempt = attempt;
  chunk.attempts = attempts;
  // An earlier attempt: its placement as the requeue left it, its epoch and incarnation (the
  // agent keeps its log under that epoch), and how it ended.
  const bool earlier = attempt < attempts;
  int64_t epoch = record.epoch;
  int64_t incarnation = record.incarnation;
  if (earlier) {
    GPOOL_ASSIGN_OR_RETURN(std::vector<store::JobAttempt> kept, store_.jobAttempts(id));
    const store::JobAttempt* found = nullptr;
    for (const store::JobAttempt& a : kept) {
      if (a.attempt == static_cast<int32_t>(attempt)) found = &a;
    }
    if (found == nullptr) {
      // Requeued before the store kept attempts (schema version 9): where it ran is unknown.
      return Status::notFound("attempt: " + what + " attempt " + std::to_string(attempt) +
                              " ran before gpoold kept earlier attempts; its log is unknown");
    }
    chunk.state = found->state;
    epoch = found->epoch;
    incarnation = found->incarnation;
    GPOOL_ASSIGN_OR_RETURN(job.allocations,
                           store::apiAllocationsFrom(found->placement_json,
                                                     what + " attempt " + std::to_string(attempt)));
  }
  const api::JobState state = chunk.state;
  const api::Allocation* alloc = nullptr;
  for (const api::Allocation& a : job.allocations) {
    if (a.task == task) alloc = &a;
  }
  const std::string& path =
      alloc == nullptr ? std::string() : (stderr_stream ? alloc->stderr_log : alloc->stdout_log);
  if (path.empty()) {
    if (api::isFinished(state)) {
      // Ended without ever running here (cancelled while pending, failed to start): no output.
      chunk.complete = true;
      return chunk;
    }
    return Status::failedPrecondition(what + " task " + std::to_string(task) + " is " +
                                      std::string(api::jobStateName(state)) +
                                      " and has no log yet: wait until it runs");
  }
  chunk.path = path;
  chunk.node = alloc->node;
  // The agent writes the log on the task's node; the controller reads it directly when they
  // share the machine (gpool up, or a shared file system), else through the node's agent.
  // An earlier attempt's log is read through its agent only: when a later attempt of the task
  // ran on the same node, the agent moved the earlier one's files away from `path` (which now
  // holds the later attempt's output).
  int fd = earlier ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = earlier ? ENOENT : errno;
    if (err == ENOENT) {
      // The task's directory is here but holds no log: it never wrote one (failed to start).
      struct stat dir_st {};
      std::string dir = path.substr(0, path.find_last_of('/'));
      if (!earlier && !dir.empty() && ::stat(dir.c_str(), &dir_st) == 0) {
        chunk.complete = api::isFinished(state);
        return chunk;
      }
    }
    // Not here, or here but the task user's (gpoold runs as its own user; the log belongs to
    // the task's user, mode 0640): the task's agent reads it.
    const bool relayable = err == ENOENT || err == EACCES || err == EPERM;
    if (!relayable || (options_.log_relay == nullptr && err != ENOENT)) {
      return Status::ioError("cannot open the log " + path + ": " + std::strerror(err));
    }
    if (options_.log_relay == nullptr) {
      return Status::notFound("the log of " + what + " task " + std::to_string(task) + " (" + path +
                              ") is not on the controller's machine: the task ran on " +
                              alloc->node + "; read it there (ssh " + alloc->node + " tail -f " +
                              path + ")");
    }
    RemoteLogRequest request{alloc->node,   id,     task,      epoch,
                             stderr_stream, offset, max_bytes, incarnation};
    GPOOL_ASSIGN_OR_RETURN(std::optional<RemoteLogPiece> piece,
                           options_.log_relay->readRemoteLog(request));
    if (!piece) {
      chunk.pending = true;
      return chunk;
    }
    if (!piece->found) {
      chunk.complete = api::isFinished(state);
      return chunk;
    }
    chunk.size = piece->size;
    chunk.data = std::move(piece->data);
    endChunk(state, &chunk);
    return chunk;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::ioError("the log " + path + " is not a regular file");
  }
  chunk.size = static_cast<uint64_t>(st.st_size);
  if (offset < chunk.size) {
    uint64_t n = std::min<uint64_t>(max_bytes, chunk.size - offset);
    chunk.data.resize(n);
    ssize_t got = ::pread(fd, chunk.data.data(), n, static_cast<off_t>(offset));
    if (got < 0) {
      int err = errno;
      ::close(fd);
      return Status::ioError("cannot read the log " + path + ": " + std::strerror(err));
    }
    chunk.data.resize(static_cast<size_t>(got));
  }
  ::close(fd);
  endChunk(state, &chunk);
  return chunk;
}

Status JobService::cancel(const Caller& caller, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, loadChecked(caller, id, JobAction::kCancel));
  const api::JobState state = record.state;
  GPOOL_RETURN_IF_ERROR(api::checkJobTransition(state, api::JobState::kCancelled)
                            .withContext("job " + std::to_string(id)));
  // The store re-checks the state inside its transaction, so a job that ended meanwhile is
  // FailedPrecondition rather than cancelled twice.
  GPOOL_RETURN_IF_ERROR(store_.recordEnd(id, api::JobState::kCancelled, std::nullopt, clock_.now(),
                                         "cancelled by " + caller.user));
  if (listener_) {
    if (api::holdsResources(state)) listener_->runningJobCancelled(record);
    listener_->jobsChanged();
  }
  return Status::ok();
}

Status JobService::requeue(const Caller& caller, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, loadChecked(caller, id, JobAction::kRequeue));
  GPOOL_RETURN_IF_ERROR(api::checkJobTransition(record.state, api::JobState::kPending)
                            .withContext("job " + std::to_string(id)));
  GPOOL_RETURN_IF_ERROR(store_.transitionJob(store::JobTransition{
      id, {record.state}, api::JobState::kPending, clock_.now(), "requeued by " + caller.user}));
  if (listener_) listener_->jobsChanged();
  return Status::ok();
}

Status JobService::hold(const Caller& caller, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, loadChecked(caller, id, JobAction::kHold));
  if (record.state != api::JobState::kPending) {
    return Status::failedPrecondition("job " + std::to_string(id) + " is " +
                                      std::string(api::jobStateName(record.state)) +
                                      ": only PENDING jobs can be held");
  }
  if (!record.hold.empty()) {
    return Status::failedPrecondition("job " + std::to_string(id) + " is already held (" +
                                      record.reason + ")");
  }
  bool admin = actsAsAdminFor(caller, JobOwner{record.user, record.group});
  return store_.setJobHold(id, admin ? "admin" : "user", clock_.now(),
                           admin ? "JobHeldAdmin" : "JobHeldUser");
}

Status JobService::release(const Caller& caller, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, loadChecked(caller, id, JobAction::kRelease));
  if (record.hold.empty()) {
    return Status::failedPrecondition("job " + std::to_string(id) + " is not held");
  }
  if (record.hold == "admin" && !actsAsAdminFor(caller, JobOwner{record.user, record.group})) {
    return Status::permissionDenied("job " + std::to_string(id) +
                                    " was held by an administrator; only an admin or the "
                                    "group's admin may release it");
  }
  GPOOL_RETURN_IF_ERROR(store_.setJobHold(id, "", clock_.now(), "released by " + caller.user));
  if (listener_) listener_->jobsChanged();
  return Status::ok();
}

Status JobService::update(const Caller& caller, int64_t id,
                          std::optional<int64_t> time_limit_seconds,
                          std::optional<int32_t> priority) {
  GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "update job " + std::to_string(id)));
  GPOOL_ASSIGN_OR_RETURN(store::JobRecord record, store_.getJob(id));
  if (record.state != api::JobState::kPending) {
    return Status::failedPrecondition("job " + std::to_string(id) + " is " +
                                      std::string(api::jobStateName(record.state)) +
                                      ": only PENDING jobs can be updated");
  }
  GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
  std::string reason;
  if (time_limit_seconds) {
    job.spec.time_limit_seconds = *time_limit_seconds;
    GPOOL_RETURN_IF_ERROR(api::validateJobSpec(job.spec));
    reason = "time limit set to " + std::to_string(*time_limit_seconds) + " s";
  }
  if (priority) {
    reason +=
        (reason.empty() ? "" : ", ") + std::string("priority set to ") + std::to_string(*priority);
  }
  reason += " by " + caller.user;
  GPOOL_RETURN_IF_ERROR(store_.updateJob(store::JobUpdate{
      id, api::toJson(job.spec).dump(), priority.value_or(record.priority), clock_.now(), reason}));
  if (listener_) listener_->jobsChanged();
  return Status::ok();
}

}  // namespace gpool::controller
