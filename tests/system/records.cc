#include "system/records.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/status.h"

namespace gpool::system_test {
namespace {

namespace fs = std::filesystem;

bool toInt(const std::string& text, int64_t* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

Result<TaskRun> parseRun(const std::string& text, const std::string& file) {
  TaskRun run;
  run.file = file;
  bool started = false;
  size_t line_no = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;  // torn last line: the task died writing it
    std::string line = text.substr(at, nl - at);
    at = nl + 1;
    ++line_no;
    auto bad = [&](const std::string& why) {
      return Status::invalidArgument(file + ":" + std::to_string(line_no) + ": " + why + ": '" +
                                     line + "'");
    };
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    std::map<std::string, std::string> fields;
    std::string word;
    while (words >> word) {
      size_t eq = word.find('=');
      if (eq == std::string::npos) return bad("expected key=value");
      fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    auto number = [&](const std::string& key, int64_t* out) {
      auto it = fields.find(key);
      return it != fields.end() && toInt(it->second, out);
    };
    int64_t t = 0;
    if (!number("t", &t)) return bad("no time t=");
    if (kind == "start") {
      if (started) return bad("a second start");
      int64_t task = 0;
      int64_t attempt = 0;
      if (!number("job", &run.job_id) || !number("task", &task) || !number("attempt", &attempt) ||
          !number("pid", &run.pid) || !fields.count("tag") || !fields.count("host")) {
        return bad("start needs tag, job, task, attempt, host and pid");
      }
      run.tag = fields["tag"];
      run.host = fields["host"];
      run.task = static_cast<int>(task);
      run.attempt = static_cast<int>(attempt);
      run.start_us = t;
      started = true;
    } else if (!started) {
      return bad("a record before start");
    } else if (run.ended()) {
      return bad("a record after end");
    } else if (kind == "tick") {
      ++run.ticks;
    } else if (kind == "end") {
      int64_t code = 0;
      if (number("exit", &code)) {
        run.exit_code = static_cast<int>(code);
      } else if (number("signal", &code)) {
        run.signal = static_cast<int>(code);
      } else {
        return bad("end needs exit= or signal=");
      }
      run.end_us = t;
    } else {
      return bad("unknown record");
    }
    run.last_us = t;
  }
  if (!started) return Status::notFound(file + ": no start record (yet)");
  return run;
}

Result<std::vector<TaskRun>> readRuns(const std::string& root) {
  std::vector<TaskRun> runs;
  std::error_code ec;
  if (!fs::exists(root, ec)) return runs;
  for (const fs::directory_entry& host : fs::directory_iterator(root, ec)) {
    if (!host.is_directory()) continue;
    for (const fs::directory_entry& f : fs::directory_iterator(host.path(), ec)) {
      if (f.path().extension() != ".rec") continue;
      std::ifstream in(f.path());
      std::stringstream text;
      text << in.rdbuf();
      Result<TaskRun> run = parseRun(text.str(), f.path().string());
      if (run.status().code() == StatusCode::kNotFound) continue;  // created, not yet written
      if (!run.ok()) return run.status();
      runs.push_back(std::move(*run));
    }
  }
  if (ec) return Status::ioError("cannot read " + root + ": " + ec.message());
  return runs;
}

}  // namespace gpool::system_test
