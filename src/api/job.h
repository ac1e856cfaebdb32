#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "api/allocation.h"
#include "api/job_spec.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"

// A submitted job and its life cycle. The legal state changes live in one table in job.cc;
// `checkJobTransition` and `applyJobTransition` are the only ways to change a job's state.
//
// Thread-safety: plain values without shared state; every function here is re-entrant and may
// be called from any thread on objects no other thread is writing.
namespace gpool::api {

// Slurm's job states, with their short codes.
enum class JobState {
  kPending,      // PD: waiting for resources, priority, a dependency or a requeue
  kRunning,      // R
  kCompleting,   // CG: ending; its processes are being stopped and resources released
  kCompleted,    // CD: exited 0
  kFailed,       // F: exited non-zero or could not start
  kCancelled,    // CA: cancelled by the user or an admin
  kTimeout,      // TO: ran past its time limit
  kPreempted,    // PR: stopped to make room for other work; may be requeued
  kNodeFail,     // NF: its node failed; may be requeued
  kOutOfMemory,  // OOM: killed for exceeding its RAM or GPU memory
};

// "PENDING", "RUNNING", ...
std::string_view jobStateName(JobState state);
// "PD", "R", "CG", "CD", "F", "CA", "TO", "PR", "NF", "OOM".
std::string_view jobStateCode(JobState state);
// Accepts a name or a short code, case-insensitively ("pending", "PD", "oom").
Result<JobState> parseJobState(std::string_view text);

// True when no further transition is possible except a requeue (PREEMPTED, NODE_FAIL) or
// none at all (COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY).
bool isFinished(JobState state);
// True while the job holds resources (RUNNING, COMPLETING).
bool holdsResources(JobState state);

// The transition table:
//   PENDING    -> RUNNING, CANCELLED, FAILED
//   RUNNING    -> COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL,
//                 OUT_OF_MEMORY
//   COMPLETING -> COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY
//   PREEMPTED  -> PENDING (requeue)
//   NODE_FAIL  -> PENDING (requeue)
// Everything else, staying in the same state included, is illegal: FailedPrecondition
// "illegal job state transition RUNNING -> PENDING".
Status checkJobTransition(JobState from, JobState to);

struct Job {
  uint64_t id = 0;  // > 0
  JobSpec spec;
  std::string user;  // the submitting Unix user; the job runs as this user
  uint32_t uid = 0;
  std::string group;  // the group whose quota is charged; may be empty
  JobState state = JobState::kPending;
  std::string reason;  // why it is pending or how it ended ("Resources", "Priority", ...)
  TimePoint submit_time{};
  std::optional<TimePoint> start_time;  // set on entering RUNNING
  std::optional<TimePoint> end_time;    // set on entering a finished state
  std::vector<Allocation> allocations;  // one per task while it holds resources
  std::optional<int32_t> exit_code;
  // For an element of a job array: the array's job id and this element's index.
  std::optional<uint64_t> array_job_id;
  std::optional<uint32_t> array_index;
  uint32_t requeue_count = 0;
  // For a PENDING job, from the scheduler's last pass (not stored): what it waits for in words
  // ("needs 4 GPUs of compute, 2 free; reserved to start in 00:06:40"), and when it is expected
  // to start when a reservation holds resources for it (what squeue --start shows).
  std::string reason_detail;
  std::optional<TimePoint> expected_start;
  bool operator==(const Job&) const = default;
};

// Changes `job->state` to `to` if the table allows it, and keeps the timestamps consistent:
// RUNNING sets start_time; a finished state sets end_time; a requeue to PENDING clears
// start/end time, allocations and exit code and counts the requeue. `reason` replaces
// `job->reason`. On an illegal transition `job` is unchanged and the error names the job id,
// from and to.
Status applyJobTransition(Job* job, JobState to, TimePoint now, std::string_view reason = "");

// "12" or, for an array element, "12_3" (Slurm's form).
std::string formatJobId(const Job& job);

nlohmann::json toJson(const Job& job);
// dumpJson(toJson(job)) written directly, with `spec_text` in place of the encoded job.spec:
// the same bytes when `spec_text` is dumpJson(toJson(job.spec)). A list page serves stored jobs
// this way (store::apiJobJsonText), because building the document tree and dumping it cost
// about 20 us per job. The caller vouches that `spec_text` is one JSON object.
std::string toJsonText(const Job& job, std::string_view spec_text);
// Also checks that the timestamps and fields fit the state (e.g. a RUNNING job has a
// start_time, an array index comes with an array job id).
Status fromJson(const nlohmann::json& j, Job* out, std::string_view path = "job");

}  // namespace gpool::api
