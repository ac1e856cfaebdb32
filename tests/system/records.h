#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

// What the system tests' tasks write about themselves, and what the harness reads back.
//
// Every task of a system test is `gpool-system-helper task` (system_helper.cc). It appends its
// own records to one file per run, <records root>/<host>/<job>.<task>.<pid>.rec, where <host> is
// the server it runs on (the agent's state directory is <run>/hosts/<host>/agent, which the task
// finds through GPOOL_TASK_DIR). Lines, written with one write(2) each:
//
//   start tag=<submission name> job=<GPOOL_JOB_ID> task=<i> attempt=<a> host=<h> pid=<p> t=<us>
//   tick t=<us>                      every tick (100 ms unless told otherwise)
//   end t=<us> exit=<code>           when it ends by itself
//   end t=<us> signal=<n>            when it ends on SIGTERM (cancel, preemption, fencing)
//
// Times are CLOCK_REALTIME in microseconds: every host of a test shares this machine's clock.
// A task killed with SIGKILL has no end line; its last tick bounds its run from below. The
// attempt is GPOOL_ATTEMPT where the agent sets it, else -1 (the checker then orders a job's
// runs by their start).
//
// Thread-compatible value types and functions; readRuns reads files only.
namespace gpool::system_test {

struct TaskRun {
  std::string file;
  std::string tag;  // the submission's unique name (the job's name)
  std::string host;
  int64_t job_id = 0;
  int task = 0;
  int attempt = -1;
  int64_t pid = 0;
  int64_t start_us = 0;
  int64_t last_us = 0;  // the time of its last record: it surely ran until then
  std::optional<int64_t> end_us;
  std::optional<int> exit_code;  // with end_us: it exited with this code
  std::optional<int> signal;     // with end_us: it ended on this signal
  int ticks = 0;

  bool ended() const { return end_us.has_value(); }
};

// Parses one record file's text. A last line without its newline (a task killed while writing)
// is ignored; anything else malformed is InvalidArgument naming the file and line.
Result<TaskRun> parseRun(const std::string& text, const std::string& file);

// Every run under `root` (<root>/<host>/*.rec), in no particular order.
Result<std::vector<TaskRun>> readRuns(const std::string& root);

}  // namespace gpool::system_test
