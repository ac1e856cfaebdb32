// gpool-system-helper: the programs the system tests run besides gpool's own.
//
//   gpool-system-helper task --records ROOT --tag TAG [--run-ms N] [--tick-ms T] [--exit C]
//                            [--term-delay-ms D]
//     The system tests' task (records.h): writes its start, a tick every T ms and its end to
//     ROOT/<host>/<job>.<task>.<pid>.rec, runs N ms (0: until signalled), exits C. On SIGTERM
//     it goes on ticking for D ms (a job saving a checkpoint; default 0), then writes
//     `end ... signal=15` and dies of the signal, as a program without a handler.
//
//   gpool-system-helper submit --socket S --plan FILE --out FILE [--clients C] [--interval-ms I]
//     A client: submits every job of FILE (one JobSpec as JSON per line) over gpoold's Unix
//     socket, from C threads, each waiting I ms between its submissions, and appends one line per
//     submission to --out as it learns the outcome. S may list several controllers' sockets
//     (S1,S2: high availability): a submission goes on to the next, or to the leader a standby
//     names, only when the one asked certainly did nothing (connection refused, or 503 from a
//     standby or a deposed leader), as `gpool` does, for up to 20 s. The outcomes:
//       ack <tag> <id> <sent_us> <latency_us>
//       refused <tag> <sent_us> <latency_us> <http status or "connect"> [retry-after=N] <message>
//       unknown <tag> <sent_us> <latency_us> <message>
//     Runs as whoever starts it: gpoold identifies the user by the socket's peer credentials.
//
//   gpool-system-helper table FILE
//     Prints the scenarios' figures of FILE (one JSON object per line, written by the system
//     tests) as a table.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/client.h"

namespace {

using nlohmann::json;

int64_t nowUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

const char* argValue(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

// ---------------------------------------------------------------- task

int g_record_fd = -1;

void writeAll(int fd, const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the records' disk is the test's own; nothing sensible to do
    done += static_cast<size_t>(n);
  }
}

// The server this task runs on: the system tests' agents keep their state in
// <run>/hosts/<host>/agent, `gpool up`'s in <dir>/agents/<host>; the task's directory lies below.
std::string hostOf(const std::string& task_dir) {
  for (const std::string marker : {"/hosts/", "/agents/"}) {
    size_t at = task_dir.rfind(marker);
    if (at == std::string::npos) continue;
    size_t begin = at + marker.size();
    size_t end = task_dir.find('/', begin);
    return task_dir.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
  return "unknown";
}

int runTask(int argc, char** argv) {
  const std::string root = argValue(argc, argv, "--records", "");
  const std::string tag = argValue(argc, argv, "--tag", "");
  const long run_ms = std::atol(argValue(argc, argv, "--run-ms", "0"));
  const long tick_ms = std::max(1L, std::atol(argValue(argc, argv, "--tick-ms", "100")));
  const int exit_code = std::atoi(argValue(argc, argv, "--exit", "0"));
  const long term_delay_ms = std::atol(argValue(argc, argv, "--term-delay-ms", "0"));
  if (root.empty() || tag.empty()) {
    std::fprintf(stderr, "task: --records and --tag are required\n");
    return 2;
  }
  const char* job = std::getenv("GPOOL_JOB_ID");
  const char* task = std::getenv("GPOOL_TASK_INDEX");
  const char* attempt = std::getenv("GPOOL_ATTEMPT");
  const char* task_dir = std::getenv("GPOOL_TASK_DIR");
  const std::string host = hostOf(task_dir ? task_dir : "");
  const std::string dir = root + "/" + host;
  ::mkdir(dir.c_str(), 0777);  // may exist; made by the harness for its hosts
  const std::string path = dir + "/" + (job ? job : "0") + "." + (task ? task : "0") + "." +
                           std::to_string(::getpid()) + ".rec";
  g_record_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (g_record_fd < 0) {
    std::fprintf(stderr, "task: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
    return 2;
  }
  // SIGTERM is taken synchronously between ticks, so its end record is written whole.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigaddset(&term, SIGINT);
  ::sigprocmask(SIG_BLOCK, &term, nullptr);

  const int64_t start = nowUs();
  writeAll(g_record_fd,
           "start tag=" + tag + " job=" + (job ? job : "0") + " task=" + (task ? task : "0") +
               " attempt=" + (attempt ? attempt : "-1") + " host=" + host +
               " pid=" + std::to_string(::getpid()) + " t=" + std::to_string(start) + "\n");
  std::printf("task %s (job %s) on %s\n", tag.c_str(), job ? job : "?", host.c_str());
  std::fflush(stdout);
  int got = 0;         // the signal taken, once one was
  int64_t die_at = 0;  // with `got`: when to die of it
  for (;;) {
    const int64_t now = nowUs();
    if (got != 0 && now >= die_at) {
      writeAll(g_record_fd,
               "end t=" + std::to_string(nowUs()) + " signal=" + std::to_string(got) + "\n");
      ::signal(got, SIG_DFL);
      ::sigprocmask(SIG_UNBLOCK, &term, nullptr);
      ::raise(got);
      return 128 + got;
    }
    if (got == 0 && run_ms > 0 && now - start >= run_ms * 1000) break;
    int64_t wait_us = tick_ms * 1000;
    if (got != 0) {
      wait_us = std::min<int64_t>(wait_us, die_at - now);
    } else if (run_ms > 0) {
      wait_us = std::min<int64_t>(wait_us, start + run_ms * 1000 - now);
    }
    timespec ts{static_cast<time_t>(wait_us / 1'000'000),
                static_cast<long>((wait_us % 1'000'000) * 1000)};
    siginfo_t info{};
    int sig = ::sigtimedwait(&term, &info, &ts);
    if ((sig == SIGTERM || sig == SIGINT) && got == 0) {
      got = sig;
      die_at = nowUs() + term_delay_ms * 1000;
      continue;
    }
    if (nowUs() < die_at || (got == 0 && (run_ms == 0 || nowUs() - start < run_ms * 1000))) {
      writeAll(g_record_fd, "tick t=" + std::to_string(nowUs()) + "\n");
    }
  }
  writeAll(g_record_fd,
           "end t=" + std::to_string(nowUs()) + " exit=" + std::to_string(exit_code) + "\n");
  return exit_code;
}

// ---------------------------------------------------------------- submit

// POST /v1/jobs to whichever of several controllers leads (docs/ha.md), or to the one.
class LeaderClient {
 public:
  explicit LeaderClient(const std::string& sockets) {
    size_t from = 0;
    while (from <= sockets.size()) {
      size_t comma = sockets.find(',', from);
      if (comma == std::string::npos) comma = sockets.size();
      if (comma > from) {
        endpoints_.push_back(
            gpool::net::ClientEndpoint::unixSocket(sockets.substr(from, comma - from)));
      }
      from = comma + 1;
    }
    for (const auto& e : endpoints_)
      clients_.push_back(std::make_unique<gpool::net::HttpClient>(e, std::chrono::seconds(20)));
  }

  gpool::Result<gpool::net::Response> post(const std::string& body) {
    auto r = once(body);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto pause = std::chrono::milliseconds(200);
    for (size_t tried = 1; clients_.size() > 1; ++tried) {
      const bool refused = !r.ok() && r.status().message().rfind("cannot connect to", 0) == 0;
      std::string leader;
      bool not_leading = false;
      if (r.ok() && r->status == 503) {
        leader = gpool::net::namedLeader(r->status, r->header("Gpool-Leader"), r->body);
        not_leading = !leader.empty() || r->body.find("standby") != std::string::npos ||
                      r->body.find("not the leader") != std::string::npos;
      }
      if ((!refused && !not_leading) || std::chrono::steady_clock::now() >= deadline) break;
      size_t next = gpool::net::findEndpoint(endpoints_, leader);
      if (next == std::string::npos || next == at_) next = (at_ + 1) % clients_.size();
      if (tried % clients_.size() == 0) {
        // A whole round without a leader: a takeover is under way.
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(2000));
      }
      at_ = next;
      r = once(body);
    }
    return r;
  }

 private:
  gpool::Result<gpool::net::Response> once(const std::string& body) {
    auto r = clients_[at_]->post("/v1/jobs", body);
    if (!r.ok()) clients_[at_]->close();
    return r;
  }

  std::vector<gpool::net::ClientEndpoint> endpoints_;
  std::vector<std::unique_ptr<gpool::net::HttpClient>> clients_;
  size_t at_ = 0;
};

int runSubmit(int argc, char** argv) {
  const std::string socket = argValue(argc, argv, "--socket", "");
  const std::string plan_path = argValue(argc, argv, "--plan", "");
  const std::string out_path = argValue(argc, argv, "--out", "");
  const int clients = std::max(1, std::atoi(argValue(argc, argv, "--clients", "1")));
  const int interval_ms = std::max(0, std::atoi(argValue(argc, argv, "--interval-ms", "0")));
  if (socket.empty() || plan_path.empty() || out_path.empty()) {
    std::fprintf(stderr, "submit: --socket, --plan and --out are required\n");
    return 2;
  }
  std::vector<std::string> plan;
  {
    std::ifstream in(plan_path);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) plan.push_back(line);
    }
  }
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) {
    std::fprintf(stderr, "submit: cannot open %s: %s\n", out_path.c_str(), std::strerror(errno));
    return 2;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      LeaderClient client(socket);
      for (size_t i = next++; i < plan.size(); i = next++) {
        json spec = json::parse(plan[i], nullptr, false);
        const std::string tag = spec.is_object() ? spec.value("name", "?") : "?";
        const int64_t sent = nowUs();
        auto r = client.post(plan[i]);
        const int64_t latency = nowUs() - sent;
        std::string line;
        if (!r.ok()) {
          // No answer: refused when the connection could not be made (nothing was sent),
          // unknown when it broke after the request went out.
          const std::string msg = r.status().message();
          const bool not_sent = msg.find("connect") != std::string::npos;
          line = std::string(not_sent ? "refused " : "unknown ") + tag + " " +
                 std::to_string(sent) + " " + std::to_string(latency) +
                 (not_sent ? " connect " : " ") + msg;
        } else if (r->status == 201) {
          json body = json::parse(r->body, nullptr, false);
          int64_t id = 0;
          if (body.is_object() && body.contains("ids") && !body["ids"].empty()) {
            id = body["ids"][0].get<int64_t>();
          }
          line = "ack " + tag + " " + std::to_string(id) + " " + std::to_string(sent) + " " +
                 std::to_string(latency);
        } else {
          // A refusal for now (503) says when to try again: kept before the answer's body.
          const std::optional<std::string> retry = r->header("Retry-After");
          line = "refused " + tag + " " + std::to_string(sent) + " " + std::to_string(latency) +
                 " " + std::to_string(r->status) + " " +
                 (retry ? "retry-after=" + *retry + " " : std::string()) + r->body;
        }
        for (char& ch : line) {
          if (ch == '\n' || ch == '\r') ch = ' ';
        }
        writeAll(out, line + "\n");
        if (interval_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
      }
    });
  }
  for (std::thread& t : threads)
    t.join();
  ::close(out);
  return 0;
}

// ---------------------------------------------------------------- table

std::string cell(const json& row, const char* key, int decimals = -1) {
  if (!row.contains(key) || row[key].is_null()) return "-";
  const json& v = row[key];
  if (v.is_number_float() && decimals >= 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v.get<double>());
    return buf;
  }
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {  // {"COMPLETED": 49976, "NODE_FAIL": 24}
    std::string out;
    for (const auto& [state, count] : v.items())
      out += (out.empty() ? "" : ", ") + state + " " + count.dump();
    return out.empty() ? "-" : out;
  }
  return v.dump();
}

int runTable(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "table: give the figures file\n");
    return 2;
  }
  std::ifstream in(argv[2]);
  std::vector<json> rows;
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object()) rows.push_back(j);
  }
  struct Column {
    const char* title;
    const char* key;
    int decimals;
  };
  const Column columns[] = {
      {"scenario", "scenario", -1},
      {"result", "result", -1},
      {"network", "network", -1},
      {"jobs", "jobs", -1},
      {"acked", "acked", -1},
      {"faults", "faults", -1},
      {"nodes down", "nodes_down", -1},
      {"double-run s", "double_run_s", 3},
      {"reruns", "reruns", -1},
      {"lost", "lost", -1},
      {"stuck", "stuck_running", -1},
      {"state errs", "state_mismatch", -1},
      {"time errs", "time_mismatch", -1},
      {"max time err s", "max_time_error_s", 3},
      {"recovery s", "recovery_s", 2},
      {"takeover s", "takeover_s", 2},
      {"jobs/s", "jobs_per_s", 1},
      {"API p50 ms", "api_p50_ms", 1},
      {"API p99 ms", "api_p99_ms", 1},
      {"sched p50 ms", "sched_p50_ms", 1},
      {"sched p99 ms", "sched_p99_ms", 1},
      {"seconds", "seconds", 1},
  };
  std::string header = "|";
  std::string rule = "|";
  for (const Column& c : columns) {
    header += " " + std::string(c.title) + " |";
    rule += " --- |";
  }
  std::printf("%s\n%s\n", header.c_str(), rule.c_str());
  for (const json& row : rows) {
    std::string text = "|";
    for (const Column& c : columns)
      text += " " + cell(row, c.key, c.decimals) + " |";
    std::printf("%s\n", text.c_str());
  }
  for (const json& row : rows) {
    if (row.contains("notes") && row["notes"].is_string() &&
        !row["notes"].get<std::string>().empty()) {
      std::printf("\n%s: %s", row.value("scenario", "?").c_str(),
                  row["notes"].get<std::string>().c_str());
    }
  }
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "task") return runTask(argc, argv);
  if (mode == "submit") return runSubmit(argc, argv);
  if (mode == "table") return runTable(argc, argv);
  std::fprintf(stderr, "usage: gpool-system-helper task|submit|table ... (see its source)\n");
  return 2;
}
