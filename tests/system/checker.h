#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "system/records.h"

// The system tests' checker: proves from the tasks' own records (records.h), what the clients
// were told (submissions) and the controller's final view of every job that
//   1. no job ran in two places at any moment (double-run seconds, from the runs' intervals);
//   2. every acknowledged job is there exactly once, none that was refused is, and its final
//      state matches what its tasks did (COMPLETED: its last run exited 0; FAILED with code N:
//      its last run exited N; CANCELLED/TIMEOUT/PREEMPTED: its last run did not end by itself
//      or it never ran; RUNNING: its last run is still running);
//   3. the job's recorded start and end are its last run's own within a stated tolerance, and
//      the GPU time the controller charged (GET /v1/usage) is what the runs used, within that
//      tolerance per run.
//
// A run's interval is [start, last record]: it surely ran then, so the double run it finds is
// a lower bound, short of the truth by at most one tick per run. A run counts as ended once it
// wrote its end, or when it has written nothing for `silent_after_us` (killed).
//
// Attempts (the runs' GPOOL_ATTEMPT, from 1 = the job's requeues + 1): a requeue is a run of
// the next attempt after the previous one has ended. So, where the runs carry attempts, the
// checker also finds a job that ran twice without overlapping (a second run of one attempt:
// one assignment started twice), a run of an attempt the controller never made (beyond its
// requeues + 1) or of an older attempt after a newer one started, and a final state taken from an
// older attempt than the job's last; a job's last run is its highest attempt's (the latest of
// those). Runs written without attempts (attempt -1) are ordered by their start and judged on
// overlaps only.
//
// Pure functions over values; thread-compatible.
namespace gpool::system_test {

// What a client was told about one submission.
struct Submission {
  std::string tag;      // the job's name, unique per submission
  std::string outcome;  // "ack" (201 with an id), "refused" (an error answer or no
                        // connection), "unknown" (no answer: it may or may not exist)
  int64_t id = 0;       // with "ack"
  int64_t sent_us = 0;
  int64_t latency_us = 0;
  std::string detail;  // the refusal's status and message
};

// The controller's final view of a job (GET /v1/jobs).
struct ControllerJob {
  int64_t id = 0;
  std::string name;
  std::string state;
  std::optional<int> exit_code;
  int64_t submit_us = 0;
  std::optional<int64_t> start_us;
  std::optional<int64_t> end_us;
  int requeues = 0;
  double gpus = 0;                 // GPUs per task (spec.resources.gpus_milli / 1000)
  std::vector<std::string> nodes;  // of its allocations
};

struct CheckOptions {
  // Recorded start/end vs the task's own: the agent notices an end at its next tick (1 s).
  int64_t time_tolerance_us = 1'500'000;
  int64_t silent_after_us = 1'000'000;  // no record for this long: the run has ended
  int64_t now_us = 0;                   // when the check runs (CLOCK_REALTIME)
  // Tags of jobs whose runs were deliberately left out of the state check (e.g. jobs that
  // predate a restore from backup); they still count for double runs.
  std::vector<std::string> ignore_state_of;
  // The GPU-seconds the controller charged for these jobs (their user's row of /v1/usage);
  // unset: usage is not compared. Not compared either when a job ended NODE_FAIL (a
  // keep-running task goes on uncharged, by design), was requeued (its attempt on a lost node
  // is charged until the node is declared lost) or some were ignored.
  std::optional<double> usage_gpu_s;
};

struct CheckResult {
  int submitted = 0;
  int acked = 0;
  int refused = 0;
  int unknown = 0;
  int runs = 0;
  double double_run_s = 0;  // summed over jobs: seconds during which two runs of a job overlapped
  int double_run_jobs = 0;
  // Of double_run_jobs: two runs of one attempt at once / of different attempts at once (a
  // requeue that started before the previous attempt ended). A job may count in both.
  int same_attempt_overlaps = 0;
  int attempt_overlaps = 0;
  int reruns = 0;  // one attempt run twice, one after the other (no requeue between)
  // A run of an attempt beyond the job's requeues + 1, or one that started after a newer
  // attempt of its task had started.
  int attempt_mismatch = 0;
  int lost = 0;             // acknowledged but absent
  int duplicated = 0;       // one submission present twice
  int refused_present = 0;  // refused, yet present
  int stuck_running = 0;    // RUNNING (or COMPLETING) while its last run has ended
  int state_mismatch = 0;   // final state does not match what its tasks did
  int id_mismatch = 0;      // a run's GPOOL_JOB_ID differs from its job's id
  int time_mismatch = 0;    // start/end beyond the tolerance
  double max_time_error_s = 0;
  // Usage: what the controller charged and what the runs used, in GPU-seconds (-1: not compared).
  double usage_gpu_s = -1;
  double task_gpu_s = -1;
  int usage_mismatch = 0;
  int unfinished = 0;  // PENDING, RUNNING or COMPLETING at the end
  std::map<std::string, int> final_states;
  std::vector<std::string> problems;  // one line per finding (the first 50)

  bool ok() const {
    return double_run_s == 0 && reruns == 0 && attempt_mismatch == 0 && lost == 0 &&
           duplicated == 0 && refused_present == 0 && stuck_running == 0 && state_mismatch == 0 &&
           id_mismatch == 0 && time_mismatch == 0 && usage_mismatch == 0;
  }
  std::string summary() const;
};

CheckResult check(const std::vector<Submission>& submissions,
                  const std::vector<ControllerJob>& jobs, const std::vector<TaskRun>& runs,
                  const CheckOptions& options);

// Seconds during which at least two of `intervals` ([begin, end) in microseconds) overlap.
double overlapSeconds(std::vector<std::pair<int64_t, int64_t>> intervals);

// The p-th percentile (0..100) of `values` by nearest rank; 0 when empty.
double percentile(std::vector<double> values, double p);

}  // namespace gpool::system_test
