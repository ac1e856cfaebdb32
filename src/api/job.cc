#include "api/job.h"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include "api/json_reader.h"

namespace gpool::api {

namespace {

using nlohmann::json;

struct StateNames {
  JobState state;
  std::string_view name;
  std::string_view code;
};

constexpr std::array<StateNames, 10> kJobStates{{
    {JobState::kPending, "PENDING", "PD"},
    {JobState::kRunning, "RUNNING", "R"},
    {JobState::kCompleting, "COMPLETING", "CG"},
    {JobState::kCompleted, "COMPLETED", "CD"},
    {JobState::kFailed, "FAILED", "F"},
    {JobState::kCancelled, "CANCELLED", "CA"},
    {JobState::kTimeout, "TIMEOUT", "TO"},
    {JobState::kPreempted, "PREEMPTED", "PR"},
    {JobState::kNodeFail, "NODE_FAIL", "NF"},
    {JobState::kOutOfMemory, "OUT_OF_MEMORY", "OOM"},
}};

constexpr size_t kStateCount = kJobStates.size();

// The one table of legal job state transitions: kLegal[from][to]. Rows and columns follow the
// order of JobState.
constexpr std::array<std::array<bool, kStateCount>, kStateCount> kLegal = [] {
  std::array<std::array<bool, kStateCount>, kStateCount> t{};
  auto allow = [&t](JobState from, JobState to) {
    t[static_cast<size_t>(from)][static_cast<size_t>(to)] = true;
  };
  allow(JobState::kPending, JobState::kRunning);
  allow(JobState::kPending, JobState::kCancelled);
  // A job that can never start (e.g. its dependency failed, or launching failed).
  allow(JobState::kPending, JobState::kFailed);
  for (JobState from : {JobState::kRunning, JobState::kCompleting}) {
    for (JobState to :
         {JobState::kCompleted, JobState::kFailed, JobState::kCancelled, JobState::kTimeout,
          JobState::kPreempted, JobState::kNodeFail, JobState::kOutOfMemory}) {
      allow(from, to);
    }
  }
  allow(JobState::kRunning, JobState::kCompleting);
  // Requeue.
  allow(JobState::kPreempted, JobState::kPending);
  allow(JobState::kNodeFail, JobState::kPending);
  return t;
}();

}  // namespace

std::string_view jobStateName(JobState state) {
  for (const StateNames& s : kJobStates) {
    if (s.state == state) return s.name;
  }
  return "?";
}

std::string_view jobStateCode(JobState state) {
  for (const StateNames& s : kJobStates) {
    if (s.state == state) return s.code;
  }
  return "?";
}

Result<JobState> parseJobState(std::string_view text) {
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  auto iequals = [&](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
  };
  for (const StateNames& s : kJobStates) {
    if (iequals(text, s.name) || iequals(text, s.code)) return s.state;
  }
  return Status::invalidArgument("unknown job state '" + std::string(text) +
                                 "' (expected a name such as PENDING or RUNNING, or a short code "
                                 "such as PD, R, CG, CD, F, CA, TO, PR, NF, OOM)");
}

bool isFinished(JobState state) {
  switch (state) {
    case JobState::kPending:
    case JobState::kRunning:
    case JobState::kCompleting: return false;
    default: return true;
  }
}

bool holdsResources(JobState state) {
  return state == JobState::kRunning || state == JobState::kCompleting;
}

Status checkJobTransition(JobState from, JobState to) {
  if (kLegal[static_cast<size_t>(from)][static_cast<size_t>(to)]) return Status::ok();
  return Status::failedPrecondition("illegal job state transition " +
                                    std::string(jobStateName(from)) + " -> " +
                                    std::string(jobStateName(to)));
}

std::string formatJobId(const Job& job) {
  if (job.array_job_id && job.array_index) {
    return std::to_string(*job.array_job_id) + "_" + std::to_string(*job.array_index);
  }
  return std::to_string(job.id);
}

Status applyJobTransition(Job* job, JobState to, TimePoint now, std::string_view reason) {
  Status legal = checkJobTransition(job->state, to);
  if (!legal.isOk()) return legal.withContext("job " + formatJobId(*job));
  // Timestamps never run backwards even if the clock did.
  TimePoint at = std::max(now, job->submit_time);
  if (to == JobState::kPending) {
    ++job->requeue_count;
    job->start_time.reset();
    job->end_time.reset();
    job->allocations.clear();
    job->exit_code.reset();
  } else if (to == JobState::kRunning) {
    job->start_time = at;
    job->end_time.reset();
  } else if (isFinished(to)) {
    if (job->start_time) at = std::max(at, *job->start_time);
    job->end_time = at;
  }
  job->state = to;
  job->reason = std::string(reason);
  return Status::ok();
}

json toJson(const Job& job) {
  json allocations = json::array();
  for (const Allocation& a : job.allocations)
    allocations.push_back(toJson(a));
  json j{{"id", job.id},
         {"spec", toJson(job.spec)},
         {"user", job.user},
         {"uid", job.uid},
         {"group", job.group},
         {"state", jobStateName(job.state)},
         {"reason", job.reason},
         {"submit_time_us", toUnixMicros(job.submit_time)},
         {"allocations", std::move(allocations)},
         {"requeue_count", job.requeue_count}};
  if (job.start_time) j["start_time_us"] = toUnixMicros(*job.start_time);
  if (job.end_time) j["end_time_us"] = toUnixMicros(*job.end_time);
  if (job.exit_code) j["exit_code"] = *job.exit_code;
  if (job.array_job_id) j["array_job_id"] = *job.array_job_id;
  if (job.array_index) j["array_index"] = *job.array_index;
  if (!job.reason_detail.empty()) j["reason_detail"] = job.reason_detail;
  if (job.expected_start) j["expected_start_us"] = toUnixMicros(*job.expected_start);
  return j;
}

namespace {

// A member `"key":` of a compact object; keys here are plain ASCII, never escaped.
void appendKey(std::string& out, std::string_view key) {
  out += '"';
  out += key;
  out += "\":";
}

void appendInteger(std::string& out, std::string_view key, int64_t value) {
  appendKey(out, key);
  out += std::to_string(value);
  out += ',';
}

// Escaped as dumpJson escapes (invalid UTF-8 replaced), so the bytes match toJson's.
void appendString(std::string& out, std::string_view key, std::string_view value) {
  appendKey(out, key);
  appendJsonString(out, value);
  out += ',';
}

}  // namespace

std::string toJsonText(const Job& job, std::string_view spec_text) {
  // Members in the order nlohmann's object (a std::map) dumps them: sorted by key. Any member
  // added to toJson(Job) must be added here in its place; tests/api/job_test.cc compares the two
  // for a job with every optional member set.
  std::string out;
  out.reserve(256 + spec_text.size());
  out += "{\"allocations\":[";
  for (size_t i = 0; i < job.allocations.size(); ++i) {
    if (i > 0) out += ',';
    out += dumpJson(toJson(job.allocations[i]));
  }
  out += "],";
  if (job.array_index) appendInteger(out, "array_index", *job.array_index);
  if (job.array_job_id) appendInteger(out, "array_job_id", static_cast<int64_t>(*job.array_job_id));
  if (job.end_time) appendInteger(out, "end_time_us", toUnixMicros(*job.end_time));
  if (job.exit_code) appendInteger(out, "exit_code", *job.exit_code);
  if (job.expected_start) {
    appendInteger(out, "expected_start_us", toUnixMicros(*job.expected_start));
  }
  appendString(out, "group", job.group);
  appendInteger(out, "id", static_cast<int64_t>(job.id));
  appendString(out, "reason", job.reason);
  if (!job.reason_detail.empty()) appendString(out, "reason_detail", job.reason_detail);
  appendInteger(out, "requeue_count", job.requeue_count);
  appendKey(out, "spec");
  out += spec_text;
  out += ',';
  if (job.start_time) appendInteger(out, "start_time_us", toUnixMicros(*job.start_time));
  appendString(out, "state", jobStateName(job.state));
  appendInteger(out, "submit_time_us", toUnixMicros(job.submit_time));
  appendInteger(out, "uid", job.uid);
  appendKey(out, "user");
  appendJsonString(out, job.user);
  out += '}';
  return out;
}

Status fromJson(const json& j, Job* out, std::string_view path) {
  ObjectReader r(j, path);
  r.integer("id", &out->id, Presence::kRequired, uint64_t{1}, static_cast<uint64_t>(INT64_MAX));
  r.object("spec", &out->spec, Presence::kRequired);
  r.string("user", &out->user, Presence::kRequired);
  r.integer("uid", &out->uid, Presence::kRequired, 0u, 4'294'967'294u);
  r.string("group", &out->group);
  r.parsed("state", &out->state, &parseJobState, Presence::kRequired);
  r.string("reason", &out->reason);
  r.time("submit_time_us", &out->submit_time, Presence::kRequired);
  r.optionalTime("start_time_us", &out->start_time);
  r.optionalTime("end_time_us", &out->end_time);
  r.objectList("allocations", &out->allocations, Presence::kOptional, kMaxTasksPerJob);
  r.optionalInteger("exit_code", &out->exit_code, INT32_MIN, INT32_MAX);
  r.optionalInteger("array_job_id", &out->array_job_id, uint64_t{1},
                    static_cast<uint64_t>(INT64_MAX));
  r.optionalInteger("array_index", &out->array_index, 0u, kMaxArrayIndex);
  r.integer("requeue_count", &out->requeue_count, Presence::kOptional, 0u, 1'000'000u);
  r.string("reason_detail", &out->reason_detail);
  r.optionalTime("expected_start_us", &out->expected_start);
  if (r.ok()) {
    r.check(!out->user.empty(), "user", "must not be empty");
    r.check(out->array_job_id.has_value() == out->array_index.has_value(), "array_index",
            "array_job_id and array_index come together");
    const JobState state = out->state;
    const std::string name(jobStateName(state));
    if (state == JobState::kPending) {
      r.check(!out->start_time, "start_time_us", "a PENDING job has not started");
      r.check(!out->end_time, "end_time_us", "a PENDING job has not ended");
    }
    if (holdsResources(state)) {
      r.check(out->start_time.has_value(), "start_time_us", "a " + name + " job has a start time");
      r.check(!out->end_time, "end_time_us", "a " + name + " job has not ended");
    }
    if (isFinished(state)) {
      r.check(out->end_time.has_value(), "end_time_us", "a " + name + " job has an end time");
    }
    r.check(!out->exit_code || isFinished(state) || state == JobState::kCompleting, "exit_code",
            "a " + name + " job has no exit code yet");
    r.check(!out->start_time || *out->start_time >= out->submit_time, "start_time_us",
            "is before submit_time_us");
    r.check(!out->end_time || *out->end_time >= out->submit_time, "end_time_us",
            "is before submit_time_us");
    r.check(!out->end_time || !out->start_time || *out->end_time >= *out->start_time, "end_time_us",
            "is before start_time_us");
    std::set<uint32_t> tasks;
    for (size_t i = 0; i < out->allocations.size(); ++i) {
      const uint32_t task = out->allocations[i].task;
      std::string key = "allocations[" + std::to_string(i) + "].task";
      r.check(task < out->spec.tasks, key,
              "task " + std::to_string(task) + " is not below the job's task count " +
                  std::to_string(out->spec.tasks));
      r.check(tasks.insert(task).second, key, "task " + std::to_string(task) + " is listed twice");
    }
  }
  return r.finish();
}

}  // namespace gpool::api
