#include "system/checker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

namespace gpool::system_test {
namespace {

bool terminal(const std::string& state) {
  return state != "PENDING" && state != "RUNNING" && state != "COMPLETING";
}

std::string formatSeconds(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(us) / 1e6);
  return buf;
}

}  // namespace

double overlapSeconds(std::vector<std::pair<int64_t, int64_t>> intervals) {
  // Sweep: +1 at each begin, -1 at each end; time with two or more open counts.
  std::vector<std::pair<int64_t, int>> events;
  for (const auto& [b, e] : intervals) {
    if (e <= b) continue;
    events.emplace_back(b, +1);
    events.emplace_back(e, -1);
  }
  std::sort(events.begin(), events.end());  // at equal times, ends (-1) before begins
  int open = 0;
  int64_t since = 0;
  int64_t total = 0;
  for (const auto& [t, delta] : events) {
    if (open >= 2) total += t - since;
    open += delta;
    since = t;
  }
  return static_cast<double>(total) / 1e6;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

std::string CheckResult::summary() const {
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "%d submitted (%d acked, %d refused, %d unknown), %d runs; double run %.3f s "
                "(%d jobs: %d one attempt twice, %d two attempts); reruns %d, attempt mismatches "
                "%d; lost %d, duplicated %d, refused-but-present %d, stuck RUNNING %d, "
                "state mismatches %d, id mismatches %d, time mismatches %d (max error %.3f s), "
                "usage %.1f GPU-s charged / %.1f used (%d mismatch), unfinished %d",
                submitted, acked, refused, unknown, runs, double_run_s, double_run_jobs,
                same_attempt_overlaps, attempt_overlaps, reruns, attempt_mismatch, lost, duplicated,
                refused_present, stuck_running, state_mismatch, id_mismatch, time_mismatch,
                max_time_error_s, usage_gpu_s, task_gpu_s, usage_mismatch, unfinished);
  std::string out = buf;
  for (const std::string& p : problems)
    out += "\n  " + p;
  return out;
}

CheckResult check(const std::vector<Submission>& submissions,
                  const std::vector<ControllerJob>& jobs, const std::vector<TaskRun>& runs,
                  const CheckOptions& options) {
  CheckResult r;
  auto problem = [&r](const std::string& text) {
    if (r.problems.size() < 50) r.problems.push_back(text);
  };
  const std::set<std::string> ignored(options.ignore_state_of.begin(),
                                      options.ignore_state_of.end());

  // Runs per (tag, task), ordered by start.
  std::map<std::pair<std::string, int>, std::vector<const TaskRun*>> by_task;
  for (const TaskRun& run : runs)
    by_task[{run.tag, run.task}].push_back(&run);
  r.runs = static_cast<int>(runs.size());
  auto has_ended = [&](const TaskRun& run) {
    return run.ended() || run.last_us + options.silent_after_us < options.now_us;
  };

  // 1. No job ran in two places at any moment, nor one attempt twice.
  for (auto& [key, list] : by_task) {
    // A requeue is the next attempt: where every run says its attempt, runs are ordered by it.
    const bool numbered =
        std::all_of(list.begin(), list.end(), [](const TaskRun* run) { return run->attempt >= 1; });
    std::sort(list.begin(), list.end(), [numbered](const TaskRun* a, const TaskRun* b) {
      if (numbered && a->attempt != b->attempt) return a->attempt < b->attempt;
      return a->start_us < b->start_us;
    });
    auto where = [&](const TaskRun& run) {
      return run.host + "/pid " + std::to_string(run.pid) +
             (numbered ? " attempt " + std::to_string(run.attempt) : std::string()) + " [" +
             formatSeconds(run.start_us - list.front()->start_us) + ", " +
             formatSeconds(run.last_us - list.front()->start_us) + "]";
    };
    std::vector<std::pair<int64_t, int64_t>> intervals;
    for (const TaskRun* run : list)
      intervals.emplace_back(run->start_us, run->last_us);
    double overlap = overlapSeconds(intervals);
    // Which runs overlapped: two of one attempt (one assignment started twice) or of two
    // attempts (a requeue started before the attempt it replaces ended).
    bool same = false;
    bool across = false;
    const TaskRun* rerun = nullptr;  // a later run of the attempt before it, not overlapping
    const TaskRun* stale = nullptr;  // an attempt started after a newer one had
    const TaskRun* newer = nullptr;
    for (size_t i = 0; numbered && i < list.size(); ++i) {
      for (size_t k = i + 1; k < list.size(); ++k) {
        const TaskRun& a = *list[i];  // a.attempt <= b.attempt
        const TaskRun& b = *list[k];
        if (std::max(a.start_us, b.start_us) < std::min(a.last_us, b.last_us)) {
          (a.attempt == b.attempt ? same : across) = true;
        } else if (a.attempt == b.attempt && rerun == nullptr) {
          rerun = &b;
        }
        if (a.attempt < b.attempt && a.start_us > b.start_us && stale == nullptr) {
          stale = &a;
          newer = &b;
        }
      }
    }
    if (overlap > 0) {
      r.double_run_s += overlap;
      ++r.double_run_jobs;
      if (same) ++r.same_attempt_overlaps;
      if (across) ++r.attempt_overlaps;
      std::string how = same && across ? " (one attempt twice, and two attempts, at once)"
                        : same         ? " (one attempt twice at once)"
                        : across       ? " (two attempts at once)"
                                       : "";
      std::string places;
      for (const TaskRun* run : list)
        places += " " + where(*run);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3f", overlap);
      problem("double run: " + key.first + " task " + std::to_string(key.second) + " ran " + buf +
              " s in two places" + how + ":" + places);
    }
    // Jobs restored from a backup may run an attempt again by design (options.ignore_state_of).
    if (rerun != nullptr && !ignored.count(key.first)) {
      ++r.reruns;
      std::string runs_of;
      for (const TaskRun* run : list) {
        if (run->attempt == rerun->attempt) runs_of += " " + where(*run);
      }
      problem("ran twice: " + key.first + " task " + std::to_string(key.second) + " attempt " +
              std::to_string(rerun->attempt) + " ran again with no requeue between:" + runs_of);
    }
    // A replaced attempt's assignment applied after its replacement's (a stale lease).
    if (stale != nullptr && !ignored.count(key.first)) {
      ++r.attempt_mismatch;
      problem("stale attempt: " + key.first + " task " + std::to_string(key.second) + " started " +
              where(*stale) + " after " + where(*newer));
    }
  }

  // 2. Every acknowledged job exactly once; no refused one; final states match the runs.
  std::unordered_map<std::string, std::vector<const ControllerJob*>> by_name;
  for (const ControllerJob& j : jobs)
    by_name[j.name].push_back(&j);
  std::set<std::string> seen_tags;
  for (const Submission& s : submissions) {
    ++r.submitted;
    if (!seen_tags.insert(s.tag).second) {
      problem("the test submitted " + s.tag + " twice (its names must be unique)");
    }
    auto found = by_name.find(s.tag);
    const size_t present = found == by_name.end() ? 0 : found->second.size();
    if (s.outcome == "ack") {
      ++r.acked;
      if (present == 0) {
        ++r.lost;
        problem("lost: " + s.tag + " (acknowledged as job " + std::to_string(s.id) +
                ") is not in the controller");
      } else if (found->second.front()->id != s.id && present == 1) {
        ++r.id_mismatch;
        problem(s.tag + " was acknowledged as job " + std::to_string(s.id) +
                " but the controller has it as job " + std::to_string(found->second[0]->id));
      }
    } else if (s.outcome == "refused") {
      ++r.refused;
      if (present > 0) {
        ++r.refused_present;
        problem("refused yet present: " + s.tag + " (" + s.detail + ") is job " +
                std::to_string(found->second.front()->id));
      }
    } else {
      ++r.unknown;
    }
    if (present > 1) {
      ++r.duplicated;
      problem("duplicated: " + s.tag + " is " + std::to_string(present) + " jobs");
    }
  }

  for (const ControllerJob& j : jobs) {
    ++r.final_states[j.state];
    if (!terminal(j.state)) ++r.unfinished;
    if (ignored.count(j.name)) continue;
    const std::string who = "job " + std::to_string(j.id) + " (" + j.name + ", " + j.state + ")";
    // Task 0 stands for the job (the system tests' jobs have one task each).
    auto it = by_task.find({j.name, 0});
    const TaskRun* last = nullptr;
    // The attempt the job is on: its requeues + 1 (GPOOL_ATTEMPT's numbering).
    const int current = j.requeues + 1;
    if (it != by_task.end()) {
      for (const TaskRun* run : it->second) {
        if (run->job_id != j.id) {
          ++r.id_mismatch;
          problem(who + ": a run on " + run->host + " (pid " + std::to_string(run->pid) +
                  ") was started as job " + std::to_string(run->job_id));
        }
        if (run->attempt > current) {
          ++r.attempt_mismatch;
          problem(who + ": a run on " + run->host + " (pid " + std::to_string(run->pid) +
                  ") is attempt " + std::to_string(run->attempt) + ", but the job was requeued " +
                  std::to_string(j.requeues) + " time(s): its last attempt is " +
                  std::to_string(current));
        }
      }
      last = it->second.back();  // its highest attempt's latest run
    }
    // A final state is its last attempt's: an older attempt's end is not the job's.
    const bool of_current = last == nullptr || last->attempt < 1 || last->attempt == current;
    bool matches = true;
    std::string did = "never ran";
    if (last != nullptr) {
      if (!of_current) {
        did = "its last run was attempt " + std::to_string(last->attempt) + " of " +
              std::to_string(current) + ", which " +
              (last->exit_code ? "exited " + std::to_string(*last->exit_code) : "did not exit");
      } else if (last->exit_code) {
        did = "its last run exited " + std::to_string(*last->exit_code);
      } else if (last->signal) {
        did = "its last run ended on signal " + std::to_string(*last->signal);
      } else if (has_ended(*last)) {
        did = "its last run stopped writing (killed)";
      } else {
        did = "its last run is running";
      }
    }
    const bool running = last != nullptr && !has_ended(*last);
    if (j.state == "COMPLETED") {
      matches = last != nullptr && of_current && last->exit_code == 0;
    } else if (j.state == "FAILED") {
      matches = last != nullptr && of_current && last->exit_code.has_value() &&
                *last->exit_code != 0 && (!j.exit_code || *j.exit_code == *last->exit_code);
    } else if (j.state == "CANCELLED" || j.state == "TIMEOUT" || j.state == "PREEMPTED") {
      matches = last == nullptr || (!last->exit_code && !running);
    } else if (j.state == "RUNNING" || j.state == "COMPLETING") {
      if (last != nullptr && has_ended(*last)) {
        ++r.stuck_running;
        problem("stuck: " + who + " while " + did + " " +
                formatSeconds(options.now_us - last->last_us) + " ago");
        continue;
      }
    }
    // NODE_FAIL, OUT_OF_MEMORY and PENDING make no claim about the runs checked here.
    if (!matches) {
      ++r.state_mismatch;
      std::string code = j.exit_code ? " exit " + std::to_string(*j.exit_code) : "";
      problem("state: " + who + code + " but " + did);
    }
    // 3. Times: the job's start and end are its last run's own.
    if (last != nullptr && j.start_us && (j.state != "PENDING")) {
      int64_t err = std::llabs(*j.start_us - last->start_us);
      r.max_time_error_s = std::max(r.max_time_error_s, static_cast<double>(err) / 1e6);
      if (err > options.time_tolerance_us) {
        ++r.time_mismatch;
        problem("start time: " + who + " recorded " + formatSeconds(*j.start_us - last->start_us) +
                " from its run's own start");
      }
    }
    // NODE_FAIL is declared by the controller when a node is lost; a keep-running task may go
    // on past it (docs/agent-protocol.md), so its end is not the task's.
    if (last != nullptr && j.end_us && terminal(j.state) && j.state != "NODE_FAIL" &&
        has_ended(*last)) {
      // A killed run's end lies between its last record and silent_after later.
      const int64_t own = last->end_us.value_or(last->last_us);
      const int64_t slack = last->ended() ? 0 : options.silent_after_us;
      int64_t err = *j.end_us - own;
      if (err > 0) err = std::max<int64_t>(0, err - slack);
      err = std::llabs(err);
      r.max_time_error_s = std::max(r.max_time_error_s, static_cast<double>(err) / 1e6);
      if (err > options.time_tolerance_us) {
        ++r.time_mismatch;
        problem("end time: " + who + " recorded " + formatSeconds(*j.end_us - own) +
                " from its run's own end");
      }
    }
  }
  // 4. Usage: the GPU time charged is the GPU time the runs used.
  if (options.usage_gpu_s) {
    bool comparable = ignored.empty();
    double used = 0;
    double allowed = 0;
    for (const ControllerJob& j : jobs) {
      // The controller charges a lost node's attempt until it declares the node lost: it
      // cannot know when a task there really stopped.
      if (j.state == "NODE_FAIL" || j.requeues > 0) comparable = false;
      auto it = by_task.find({j.name, 0});
      if (it == by_task.end()) continue;
      for (const TaskRun* run : it->second) {
        const int64_t end = run->end_us.value_or(run->last_us);
        used += static_cast<double>(end - run->start_us) / 1e6 * j.gpus;
        allowed += static_cast<double>(options.time_tolerance_us) / 1e6 * j.gpus;
      }
    }
    if (comparable) {
      r.usage_gpu_s = *options.usage_gpu_s;
      r.task_gpu_s = used;
      if (std::abs(r.usage_gpu_s - used) > allowed + 1e-6) {
        ++r.usage_mismatch;
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "usage: %.1f GPU-seconds charged, the runs used %.1f (tolerance %.1f)",
                      r.usage_gpu_s, used, allowed);
        problem(buf);
      }
    }
  }
  return r;
}

}  // namespace gpool::system_test
