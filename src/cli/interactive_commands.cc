#include "cli/interactive_commands.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agent/shell_server.h"
#include "cli/api_client.h"
#include "cli/format.h"

namespace gpool::cli {

namespace {

// How often the client asks again while nothing happens (a job waiting to start, a log without
// new output). The API has no push for logs; a poll costs one small request.
constexpr std::chrono::milliseconds kPollInterval{200};
// How soon to ask again for a piece of a log on another server that gpoold is fetching from
// that server's agent (one round trip on the agent's connection).
constexpr std::chrono::milliseconds kRelayRetry{20};

std::atomic<int> g_interrupts{0};

extern "C" void onInterrupt(int) {
  g_interrupts.fetch_add(1);
}

// Counts SIGINTs (Ctrl-C) instead of dying from them, for as long as it lives.
class InterruptCounter {
 public:
  InterruptCounter() {
    g_interrupts = 0;
    struct sigaction sa {};
    sa.sa_handler = onInterrupt;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_);
  }
  ~InterruptCounter() { ::sigaction(SIGINT, &old_, nullptr); }
  int count() const { return g_interrupts.load(); }

 private:
  struct sigaction old_ {};
};

Result<api::Job> fetchJob(ApiClient& api, uint64_t id) {
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get("/v1/jobs/" + std::to_string(id)));
  api::Job job;
  GPOOL_RETURN_IF_ERROR(api::fromJson(answer, &job, "gpoold's job"));
  return job;
}

const api::Allocation* allocationOf(const api::Job& job, uint32_t task) {
  for (const api::Allocation& a : job.allocations) {
    if (a.task == task) return &a;
  }
  return nullptr;
}

std::string pendingLine(const api::Job& job) {
  return "gpool: job " + api::formatJobId(job) + " is pending (" +
         (job.reason.empty() ? std::string("waiting") : terminalSafe(job.reason)) + ")";
}

// One stream of one task, read by offsets.
struct LogCursor {
  uint64_t id = 0;
  uint32_t task = 0;
  bool stderr_stream = false;
  uint64_t offset = 0;
  bool complete = false;
  // gpoold is fetching the piece from the agent of the task's server: ask again shortly.
  bool pending = false;
  std::string data;  // what the last read returned
  std::string state;
  uint32_t attempt = 0;  // a requeued job's run, from 1; 0: the latest
  // gpool run: the log is on another server (no output here; the job's end still counts).
  bool elsewhere = false;
  // gpool run: why the last read failed because the task's server had no agent connected
  // (asked again until the job ends); empty after a read that worked.
  std::string unreachable;
  // gpool run with labels: the start of a line whose end has not been read yet.
  std::string partial;
};

// Reads the next piece; FailedPrecondition while the task has no log yet.
Status readNext(ApiClient& api, LogCursor* c) {
  GPOOL_ASSIGN_OR_RETURN(
      json chunk,
      api.get("/v1/jobs/" + std::to_string(c->id) + "/log?task=" + std::to_string(c->task) +
              "&stream=" + (c->stderr_stream ? "stderr" : "stdout") +
              "&offset=" + std::to_string(c->offset) +
              (c->attempt == 0 ? std::string() : "&attempt=" + std::to_string(c->attempt))));
  c->data = chunk.value("data", "");
  c->offset = chunk.value("next_offset", c->offset);
  c->complete = chunk.value("complete", false);
  c->pending = chunk.value("pending", false);
  c->state = chunk.value("state", "");
  c->attempt = chunk.value("attempt", c->attempt);
  return Status::ok();
}

void writeOut(FILE* f, const std::string& data) {
  if (data.empty()) return;
  std::fwrite(data.data(), 1, data.size(), f);
  std::fflush(f);
}

// Writes what cursor `c` read last to `f`. With a `label` (gpool run of a multi-task job), as
// `srun --label` does: every line starts with the label ("0: ", " 3: "), and a line is written
// only once its end was read (so lines of different tasks do not interleave); when the stream is
// complete, an unfinished last line is written with a newline added.
void writeLabelled(FILE* f, LogCursor* c, const std::string& label) {
  if (label.empty()) {
    writeOut(f, c->data);
    return;
  }
  c->partial += c->data;
  std::string lines;
  size_t start = 0;
  for (size_t eol; (eol = c->partial.find('\n', start)) != std::string::npos; start = eol + 1)
    lines += label + c->partial.substr(start, eol + 1 - start);
  c->partial.erase(0, start);
  if (c->complete && !c->partial.empty()) {
    lines += label + c->partial + "\n";
    c->partial.clear();
  }
  writeOut(f, lines);
}

// The exit code a finished job gives its `gpool run`: the job's own (gpoold records the highest
// of its tasks' exit codes), else 1 for a failure.
int exitCodeOfJob(const api::Job& job) {
  if (job.state == api::JobState::kCompleted) return 0;
  if (job.exit_code && *job.exit_code > 0) return *job.exit_code;
  return 1;
}

// ---------------------------------------------------------------- shell

// Becomes `user` (root entering another user's job): groups, gid, uid.
Status becomeUser(const json& user) {
  uid_t uid = user.value("uid", 0u);
  gid_t gid = user.value("gid", 0u);
  std::vector<gid_t> groups;
  if (user.contains("groups") && user["groups"].is_array()) {
    for (const json& g : user["groups"])
      groups.push_back(g.get<gid_t>());
  }
  if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) {
    return Status::permissionDenied("cannot switch to user " + user.value("name", "?") + ": " +
                                    std::strerror(errno));
  }
  return Status::ok();
}

// In the process that becomes the shell: asks the agent to adopt this process into the task,
// takes on the task's user, environment and directory, and execs. Returns only on failure.
Status enterAndExec(const std::string& socket, const std::string& task_name,
                    const std::vector<std::string>& command, bool announce,
                    const std::string& job_text, const std::string& node) {
  GPOOL_ASSIGN_OR_RETURN(json reply, agent::requestShellAdoption(socket, task_name));
  json user = reply.value("user", json::object());
  uid_t uid = user.value("uid", 0u);
  if (::geteuid() == 0 && uid != 0) GPOOL_RETURN_IF_ERROR(becomeUser(user));
  std::map<std::string, std::string> env;
  if (reply.contains("env") && reply["env"].is_object()) {
    for (auto it = reply["env"].begin(); it != reply["env"].end(); ++it) {
      if (it.value().is_string()) env[it.key()] = it.value().get<std::string>();
    }
  }
  std::vector<std::string> argv = command;
  if (argv.empty()) {
    std::string shell = env.count("SHELL") ? env["SHELL"] : user.value("shell", "");
    if (shell.empty()) shell = "/bin/sh";
    argv = {shell};
  }
  std::string dir = reply.value("working_dir", "");
  if (dir.empty() || ::chdir(dir.c_str()) != 0) {
    std::string home = user.value("home", "/");
    if (::chdir(home.c_str()) != 0) (void)!::chdir("/");
  }
  if (announce) {
    std::fprintf(stderr, "gpool: entering job %s on %s%s; exit the shell to leave\n",
                 job_text.c_str(), node.c_str(),
                 reply.value("cgroup", false) ? "" : " (this agent runs tasks without cgroups)");
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env)
    env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> cargv;
  for (std::string& a : argv)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // PATH of the task's environment, as a login into the allocation would see it.
  std::string program = argv[0];
  if (program.find('/') == std::string::npos) {
    std::string path = env.count("PATH") ? env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string candidate = path.substr(start, end - start) + "/" + program;
      if (::access(candidate.c_str(), X_OK) == 0) {
        program = candidate;
        break;
      }
      start = end + 1;
    }
  }
  ::execve(program.c_str(), cargv.data(), envp.data());
  return Status::notFound("cannot run " + argv[0] + " in job " + job_text + ": " +
                          std::strerror(errno));
}

// Waits until job `id` runs and its task `task` was reported started by its agent (its
// allocation names the shell socket). Error when the job ends first.
Result<api::Job> waitUntilEnterable(ApiClient& api, uint64_t id, uint32_t task,
                                    std::chrono::milliseconds patience, bool verbose) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  bool said_pending = false;
  while (true) {
    GPOOL_ASSIGN_OR_RETURN(api::Job job, fetchJob(api, id));
    if (api::isFinished(job.state)) {
      return Status::failedPrecondition("job " + api::formatJobId(job) + " has ended (" +
                                        std::string(api::jobStateName(job.state)) +
                                        "): there is nothing to enter");
    }
    const api::Allocation* alloc = allocationOf(job, task);
    if (job.state == api::JobState::kRunning && alloc && !alloc->shell_socket.empty()) return job;
    if (std::chrono::steady_clock::now() >= deadline) {
      if (job.state == api::JobState::kPending) {
        return Status::failedPrecondition("job " + api::formatJobId(job) +
                                          " is not running yet (PENDING, " + job.reason +
                                          "): enter it once it runs (gpool queue shows when)");
      }
      if (alloc == nullptr) {
        return Status::invalidArgument("job " + api::formatJobId(job) + " has no task " +
                                       std::to_string(task));
      }
      return Status::failedPrecondition(
          "job " + api::formatJobId(job) + " task " + std::to_string(task) + " on " + alloc->node +
          " has not been reported started by its agent (or the agent offers no shell socket)");
    }
    if (verbose && job.state == api::JobState::kPending && !said_pending) {
      std::fprintf(stderr, "%s; waiting for it to start\n", pendingLine(job).c_str());
      said_pending = true;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

// The ssh hint for a job on another server.
Status elsewhere(const api::Job& job, const api::Allocation& alloc, const Status& why) {
  return Status::failedPrecondition("job " + api::formatJobId(job) + " runs on " + alloc.node +
                                    ", not on this machine (" + why.message() +
                                    "): log in there with `ssh " + alloc.node +
                                    "` (gpool-adopt puts an SSH login into your running job)");
}

}  // namespace

// ---------------------------------------------------------------- logs

Status runLogs(const GlobalOptions& global, const LogsArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(JobRef ref, parseJobRef(a.job));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(uint64_t id, resolve(api, ref));
  LogCursor c;
  c.id = id;
  c.task = a.task;
  c.stderr_stream = a.stderr_stream;
  c.attempt = a.attempt;
  std::string all;  // for --json
  bool said_pending = false;
  while (true) {
    Status s = readNext(api, &c);
    if (!s.isOk()) {
      if (s.code() != StatusCode::kFailedPrecondition || !a.follow) return s;
      // Not started yet: -f waits for it.
      GPOOL_ASSIGN_OR_RETURN(api::Job job, fetchJob(api, id));
      if (!said_pending && job.state == api::JobState::kPending) {
        std::fprintf(stderr, "%s; waiting for it to start\n", pendingLine(job).c_str());
        said_pending = true;
      }
      std::this_thread::sleep_for(kPollInterval);
      continue;
    }
    if (global.json) {
      all += c.data;
    } else {
      writeOut(a.stderr_stream ? stderr : stdout, c.data);
    }
    if (c.complete) break;
    if (c.pending) {
      std::this_thread::sleep_for(kRelayRetry);
      continue;
    }
    if (c.data.empty()) {
      if (!a.follow) break;  // everything written so far
      std::this_thread::sleep_for(kPollInterval);
    }
  }
  if (global.json) {
    printJson(json{{"id", id},
                   {"task", a.task},
                   {"stream", a.stderr_stream ? "stderr" : "stdout"},
                   {"state", c.state},
                   {"attempt", c.attempt},
                   {"complete", c.complete},
                   {"data", all}});
  }
  return Status::ok();
}

// ---------------------------------------------------------------- run

Status runForeground(const GlobalOptions& global, const SubmitPlan& plan, int* exit_code) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::string target = "/v1/jobs";
  if (!plan.group.empty()) target += "?group=" + net::percentEncode(plan.group);
  InterruptCounter interrupts;
  GPOOL_ASSIGN_OR_RETURN(json answer, api.post(target, api::toJson(plan.spec).dump()));
  if (!answer.contains("ids") || !answer["ids"].is_array() || answer["ids"].empty()) {
    return Status::internal("gpoold's answer names no job ids: " + answer.dump());
  }
  uint64_t id = answer["ids"][0].get<uint64_t>();
  std::fprintf(stderr, "gpool: job %llu submitted\n", static_cast<unsigned long long>(id));
  // Every task's stdout and stderr; with more than one task each line is labelled with the
  // task's rank, right-aligned to the widest rank, as `srun --label` does.
  const uint32_t tasks = std::max<uint32_t>(1, plan.spec.tasks);
  const size_t width = std::to_string(tasks - 1).size();
  std::vector<LogCursor> cursors;
  std::vector<std::string> labels;  // one per cursor; empty: no label
  for (uint32_t t = 0; t < tasks; ++t) {
    for (bool stderr_stream : {false, true}) {
      LogCursor c;
      c.id = id;
      c.task = t;
      c.stderr_stream = stderr_stream;
      cursors.push_back(std::move(c));
      std::string rank = std::to_string(t);
      labels.push_back(tasks == 1 ? "" : std::string(width - rank.size(), ' ') + rank + ": ");
    }
  }
  int seen_interrupts = 0;
  bool said_pending = false;
  while (true) {
    int n = interrupts.count();
    if (n > seen_interrupts) {
      if (seen_interrupts == 0) {
        std::fprintf(stderr,
                     "\ngpool: cancelling job %llu (press Ctrl-C again to leave without "
                     "waiting)\n",
                     static_cast<unsigned long long>(id));
        Result<json> cancelled = api.post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
        if (!cancelled.ok() && cancelled.status().code() != StatusCode::kFailedPrecondition) {
          std::fprintf(stderr, "gpool: cannot cancel job %llu: %s\n",
                       static_cast<unsigned long long>(id), cancelled.status().message().c_str());
        }
      }
      if (n >= 2) {
        std::fprintf(stderr,
                     "gpool: leaving without waiting; job %llu is being cancelled (gpool show "
                     "%llu)\n",
                     static_cast<unsigned long long>(id), static_cast<unsigned long long>(id));
        *exit_code = 130;
        return Status::ok();
      }
      seen_interrupts = n;
    }
    bool progressed = false;
    bool relaying = false;  // a piece is being fetched from another server's agent
    bool done = true;       // every stream read to its end, or on another server
    for (size_t i = 0; i < cursors.size(); ++i) {
      LogCursor* c = &cursors[i];
      if (c->complete || c->elsewhere) continue;
      Status s = readNext(api, c);
      if (s.isOk()) {
        c->unreachable.clear();
        writeLabelled(c->stderr_stream ? stderr : stdout, c, labels[i]);
        progressed = progressed || !c->data.empty();
        relaying = relaying || c->pending;
        done = done && c->complete;
        continue;
      }
      if (s.code() == StatusCode::kNotFound) {
        // The log is on another server: no output here, but the exit code still comes. Said
        // once per task (its stdout and stderr are on the same server).
        c->elsewhere = true;
        if (!c->stderr_stream) std::fprintf(stderr, "gpool: %s\n", s.message().c_str());
        continue;
      }
      done = false;
      // The task's server has no agent connected (or gpoold is gone: fetchJob says so next):
      // ask again; the agent may be back before the job ends.
      if (s.code() == StatusCode::kUnavailable) {
        c->unreachable = s.message();
        continue;
      }
    }
    GPOOL_ASSIGN_OR_RETURN(api::Job job, fetchJob(api, id));
    if (api::isFinished(job.state) && !done) {
      // Ended while a task's server could not be reached: its output cannot come any more.
      for (LogCursor& c : cursors) {
        if (c.complete || c.elsewhere || c.unreachable.empty()) continue;
        c.elsewhere = true;
        if (!c.stderr_stream) {
          std::fprintf(stderr, "gpool: %s (its output is not shown)\n", c.unreachable.c_str());
        }
      }
    }
    if (job.state == api::JobState::kPending && !said_pending) {
      std::fprintf(stderr, "%s; waiting for it to start\n", pendingLine(job).c_str());
      said_pending = true;
    }
    if (api::isFinished(job.state) && done) {
      if (job.state == api::JobState::kCancelled && seen_interrupts > 0) {
        std::fprintf(stderr, "gpool: job %llu cancelled\n", static_cast<unsigned long long>(id));
        *exit_code = 130;
      } else {
        if (job.state != api::JobState::kCompleted) {
          std::fprintf(stderr, "gpool: job %llu ended %s%s%s\n",
                       static_cast<unsigned long long>(id),
                       std::string(api::jobStateName(job.state)).c_str(),
                       job.reason.empty() ? "" : ": ", terminalSafe(job.reason).c_str());
        }
        *exit_code = exitCodeOfJob(job);
      }
      return Status::ok();
    }
    if (!progressed) std::this_thread::sleep_for(relaying ? kRelayRetry : kPollInterval);
  }
}

// ---------------------------------------------------------------- shell

Status runShell(const GlobalOptions& global, const std::string& job_text, uint32_t task,
                const std::vector<std::string>& command, bool fork_and_wait, int* exit_code) {
  GPOOL_RETURN_IF_ERROR(
      requireLocal(global, fork_and_wait ? "alloc" : "shell",
                   "the shell joins the job through the gpool-agent of the server it runs on"));
  GPOOL_ASSIGN_OR_RETURN(JobRef ref, parseJobRef(job_text));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(uint64_t id, resolve(api, ref));
  GPOOL_ASSIGN_OR_RETURN(api::Job job, fetchJob(api, id));
  if (::geteuid() != 0 && job.uid != ::geteuid()) {
    return Status::permissionDenied("job " + job_text + " belongs to " + job.user +
                                    "; only its owner or root may enter it");
  }
  if (job.state != api::JobState::kRunning) {
    return Status::failedPrecondition(
        "job " + job_text + " is " + std::string(api::jobStateName(job.state)) +
        (job.reason.empty() ? "" : " (" + job.reason + ")") +
        ", not running: only a running job can be entered" +
        (job.state == api::JobState::kPending ? " (wait until gpool queue shows it R)" : ""));
  }
  if (allocationOf(job, task) == nullptr) {
    return Status::invalidArgument("--task: job " + job_text + " has no task " +
                                   std::to_string(task));
  }
  // A job placed a moment ago may not be reported started by its agent yet.
  GPOOL_ASSIGN_OR_RETURN(job, waitUntilEnterable(api, id, task, std::chrono::seconds(10), false));
  const api::Allocation alloc = *allocationOf(job, task);
  const std::string task_name = std::to_string(id) + "." + std::to_string(task);
  bool announce = command.empty() && ::isatty(STDIN_FILENO);
  if (!job.spec.image.empty()) {
    // A container job: the command (default: the image's /bin/sh, the user's login shell may
    // not be in the image) runs inside its container through podman exec, which the agent
    // starts on this process's terminal; this process stays outside the job and waits.
    const std::vector<std::string> argv =
        command.empty() ? std::vector<std::string>{"/bin/sh"} : command;
    if (announce) {
      std::fprintf(stderr,
                   "gpool: entering the container of job %s on %s; exit the shell to "
                   "leave\n",
                   job_text.c_str(), alloc.node.c_str());
    }
    Result<int> code = agent::requestContainerExec(alloc.shell_socket, task_name, argv,
                                                   ::isatty(STDIN_FILENO) != 0);
    if (!code.ok()) {
      const Status& s = code.status();
      if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kNotFound) {
        return elsewhere(job, alloc, s);
      }
      return s;
    }
    *exit_code = *code;
    return Status::ok();
  }
  if (!fork_and_wait) {
    Status s = enterAndExec(alloc.shell_socket, task_name, command, announce, job_text, alloc.node);
    if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kNotFound) {
      return elsewhere(job, alloc, s);
    }
    return s;
  }
  // gpool alloc: the shell runs in a child (adopted into the job); this process stays outside
  // the job's cgroup so that it survives the job and can release it.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return Status::ioError("pipe failed");
  pid_t pid = ::fork();
  if (pid < 0) return Status::ioError("fork failed");
  if (pid == 0) {
    ::close(report[0]);
    ::signal(SIGINT, SIG_DFL);
    Status s = enterAndExec(alloc.shell_socket, task_name, command, announce, job_text, alloc.node);
    if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kNotFound) {
      s = elsewhere(job, alloc, s);
    }
    std::string text = std::to_string(exitCodeFor(s.code())) + " " + s.message();
    (void)!::write(report[1], text.data(), text.size());
    ::_exit(127);
  }
  ::close(report[1]);
  // While the shell runs, Ctrl-C belongs to it.
  struct sigaction ignore {
  }, old_int{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  // An interactive shell took the terminal's foreground; take it back to print.
  if (::isatty(STDIN_FILENO)) {
    ::signal(SIGTTOU, SIG_IGN);
    (void)::tcsetpgrp(STDIN_FILENO, ::getpgrp());
    ::signal(SIGTTOU, SIG_DFL);
  }
  char buf[2048];
  ssize_t n = ::read(report[0], buf, sizeof(buf));
  ::close(report[0]);
  if (n > 0) {
    std::string text(buf, static_cast<size_t>(n));
    size_t space = text.find(' ');
    int code = std::atoi(text.substr(0, space).c_str());
    StatusCode sc = StatusCode::kInternal;
    for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
      if (exitCodeFor(static_cast<StatusCode>(c)) == code) {
        sc = static_cast<StatusCode>(c);
        break;
      }
    }
    return Status(sc, space == std::string::npos ? text : text.substr(space + 1));
  }
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return Status::ok();
}

// ---------------------------------------------------------------- alloc

Status runAlloc(const GlobalOptions& global, const SubmitPlan& plan, int* exit_code) {
  // Checked before submitting: an allocation nobody can enter would only hold GPUs.
  GPOOL_RETURN_IF_ERROR(requireLocal(
      global, "alloc", "its shell joins the job through the gpool-agent of the server it runs on"));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::string target = "/v1/jobs";
  if (!plan.group.empty()) target += "?group=" + net::percentEncode(plan.group);
  GPOOL_ASSIGN_OR_RETURN(json answer, api.post(target, api::toJson(plan.spec).dump()));
  if (!answer.contains("ids") || !answer["ids"].is_array() || answer["ids"].empty()) {
    return Status::internal("gpoold's answer names no job ids: " + answer.dump());
  }
  uint64_t id = answer["ids"][0].get<uint64_t>();
  const std::string id_text = std::to_string(id);
  std::fprintf(stderr, "gpool: allocation %s submitted\n", id_text.c_str());
  auto release = [&] {
    Result<json> r = api.post("/v1/jobs/" + id_text + "/cancel", "");
    if (r.ok()) {
      std::fprintf(stderr, "gpool: allocation %s released\n", id_text.c_str());
    } else if (r.status().code() != StatusCode::kFailedPrecondition) {
      std::fprintf(stderr, "gpool: cannot release allocation %s: %s (gpool cancel %s)\n",
                   id_text.c_str(), r.status().message().c_str(), id_text.c_str());
    }
  };
  Result<api::Job> job = [&]() -> Result<api::Job> {
    InterruptCounter interrupts;
    bool said_pending = false;
    while (true) {
      if (interrupts.count() > 0) {
        std::fprintf(stderr, "\ngpool: interrupted; cancelling allocation %s\n", id_text.c_str());
        return Status::aborted("allocation " + id_text + " cancelled before it started");
      }
      GPOOL_ASSIGN_OR_RETURN(api::Job j, fetchJob(api, id));
      if (api::isFinished(j.state)) {
        return Status::failedPrecondition("allocation " + id_text + " ended before it could be " +
                                          "entered: " + std::string(api::jobStateName(j.state)) +
                                          (j.reason.empty() ? "" : " (" + j.reason + ")"));
      }
      const api::Allocation* a = allocationOf(j, 0);
      if (j.state == api::JobState::kRunning && a && !a->shell_socket.empty()) return j;
      if (j.state == api::JobState::kPending && !said_pending) {
        std::fprintf(stderr, "%s; waiting for resources (Ctrl-C cancels)\n",
                     pendingLine(j).c_str());
        said_pending = true;
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }();
  if (!job.ok()) {
    release();
    return job.status();
  }
  std::fprintf(stderr, "gpool: allocation %s runs on %s\n", id_text.c_str(),
               job->allocations.empty() ? "?" : job->allocations[0].node.c_str());
  Status s = runShell(global, id_text, 0, {}, true, exit_code);
  release();
  return s;
}

void registerInteractiveCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global) {
  // ---- logs
  auto logs_args = std::make_shared<LogsArgs>();
  auto* logs = app.add_subcommand("logs", "Print a job's output; -f follows it until the job ends");
  logs->add_option("job", logs_args->job, "job id: 42, or 42_3 for an array element")->required();
  logs->add_option("--task", logs_args->task, "the task's rank (default 0)");
  logs->add_flag("--stderr", logs_args->stderr_stream, "the task's stderr instead of stdout");
  logs->add_option("--attempt", logs_args->attempt,
                   "which run of a requeued job, from 1 (default: the latest)")
      ->check(CLI::Range(1, 1000000));
  logs->add_flag("-f,--follow", logs_args->follow,
                 "wait for the job to start, then keep printing until it ends");
  logs->callback(reporting([global, logs_args] { return runLogs(*global, *logs_args); }));

  // ---- shell
  auto shell_job = std::make_shared<std::string>();
  auto shell_task = std::make_shared<uint32_t>(0);
  auto shell_command = std::make_shared<std::vector<std::string>>();
  auto* shell = app.add_subcommand(
      "shell", "Enter a running job: your shell (or CMD) inside its cgroup with its environment");
  shell->add_option("job", *shell_job, "job id: 42, or 42_3 for an array element")->required();
  shell->add_option("cmd", *shell_command, "a command to run instead of your shell (after --)");
  shell->add_option("--task", *shell_task, "the task to enter (default 0)");
  shell->footer(
      "Usage: gpool shell JOB [-- CMD [ARGS...]]\n"
      "Only the job's owner (or root) may enter it, on the server it runs on; for a job on "
      "another server, `ssh SERVER` (gpool-adopt puts the login into the job).");
  shell->callback([global, shell_job, shell_task, shell_command] {
    // A bare job's shell replaces this process; a container job's command runs elsewhere
    // (podman exec) and its exit code is this process's.
    int code = 0;
    reporting(
        [&] { return runShell(*global, *shell_job, *shell_task, *shell_command, false, &code); })();
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace gpool::cli
