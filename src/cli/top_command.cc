#include "cli/top_command.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "cli/api_client.h"
#include "cli/format.h"
#include "common/status.h"
#include "net/client.h"

namespace gpool::cli {

namespace {

using nlohmann::json;

struct TopArgs {
  double interval_s = 2;
  bool once = false;
};

Result<json> fetchGpus(ApiClient& api) {
  GPOOL_ASSIGN_OR_RETURN(json body, api.get("/v1/gpus"));
  if (!body.contains("gpus") || !body["gpus"].is_array()) {
    return Status::internal("gpoold's GPU list has no 'gpus' array");
  }
  return body;
}

// "[#####.....]" for used/total, `width` characters inside the brackets.
std::string bar(double used, double total, int width) {
  int filled = total > 0 ? static_cast<int>(used / total * width + 0.5) : 0;
  filled = std::clamp(filled, 0, width);
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(width - filled), '.') + "]";
}

std::string pad(std::string s, size_t width, bool right = false) {
  if (s.size() > width) s = s.substr(0, width);
  std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

std::string gib(double mib) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", mib / 1024.0);
  return buf;
}

// "alice:42 .25" for each tenant; whole GPUs without the share.
std::string tenantsText(const json& tenants) {
  std::string out;
  for (const json& t : tenants) {
    if (!out.empty()) out += " ";
    out += t.value("user", "?") + ":" + std::to_string(t.value("job_id", int64_t{0}));
    uint32_t milli = t.value("compute_milli", 1000u);
    if (!t.value("exclusive", true) || milli < 1000) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "(%.2f)", milli / 1000.0);
      out += buf;
    }
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string formatTop(const json& answer, int width) {
  width = std::max(width, 40);
  std::string out;
  size_t total = 0, busy = 0, unhealthy = 0;
  bool simulated = false;
  for (const json& g : answer["gpus"]) {
    ++total;
    if (!g.value("tenants", json::array()).empty()) ++busy;
    if (g.value("health", "healthy") == "unhealthy") ++unhealthy;
    simulated = simulated || g.value("simulated", false);
  }
  out += "gpool top: " + std::to_string(total) + " GPUs, " + std::to_string(busy) + " in use, " +
         std::to_string(unhealthy) + " unhealthy" + (simulated ? " (simulated)" : "") + "\n";
  // 58 columns before the tenants, so that 80 leave them 22 (a user:job or two).
  std::string header = pad("NODE", 10) + " " + pad("GPU", 3, true) + " " + pad("MODEL", 9) + " " +
                       pad("UTIL", 4, true) + " " + pad("MEMORY GiB", 18) + " " +
                       pad("TEMP", 4, true) + " " + pad("POWER", 5, true) + " TENANTS";
  out += header.substr(0, static_cast<size_t>(width)) + "\n";
  for (const json& g : answer["gpus"]) {
    const json& t = g.contains("telemetry") ? g["telemetry"] : json();
    bool have = t.is_object();
    std::string model = g.value("model", "");
    for (const char* drop : {"NVIDIA ", " (simulated)", "-SXM4", "-PCIE"}) {
      size_t at = model.find(drop);
      if (at != std::string::npos) model.erase(at, std::string(drop).size());
    }
    double total_mib = have ? t.value("memory_total_mib", 0.0) : g.value("memory_mib", 0.0);
    double used_mib = have ? t.value("memory_used_mib", 0.0) : 0.0;
    std::string util = have ? std::to_string(t.value("utilization_pct", 0)) + "%" : "-";
    std::string mem =
        bar(used_mib, total_mib, 6) + " " +
        pad(gib(used_mib) + "/" + std::to_string(static_cast<int>(total_mib / 1024)), 9, true);
    std::string temp = have ? std::to_string(t.value("temperature_c", 0)) + "C" : "-";
    std::string power =
        have ? std::to_string(static_cast<int>(t.value("power_w", 0.0))) + "W" : "-";
    std::string tenants = tenantsText(g.value("tenants", json::array()));
    std::string health = g.value("health", "healthy");
    if (health != "healthy") {
      std::string reason = g.value("health_reason", "");
      tenants = health + (reason.empty() ? "" : ": " + reason) + " " + tenants;
    }
    if (g.value("simulated", false)) tenants += " simulated";
    std::string line = pad(g.value("node", ""), 10) + " " +
                       pad(std::to_string(g.value("index", 0)), 3, true) + " " + pad(model, 9) +
                       " " + pad(util, 4, true) + " " + mem + " " + pad(temp, 4, true) + " " +
                       pad(power, 5, true) + " " + tenants;
    out += terminalSafe(line).substr(0, static_cast<size_t>(width)) + "\n";
  }
  if (total == 0) out += "No GPUs registered yet (start gpool-agent on a GPU server)\n";
  return out;
}

namespace {

int terminalWidth() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// Puts stdin in non-canonical, no-echo mode for the live view and restores it on destruction.
class RawInput {
 public:
  RawInput() {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawInput() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

Status runTop(const GlobalOptions& global, const TopArgs& args) {
  if (args.interval_s < 0.1 || args.interval_s > 3600) {
    return Status::invalidArgument("--interval: must be between 0.1 and 3600 seconds");
  }
  bool live = !args.once && !global.json && ::isatty(STDOUT_FILENO) && ::isatty(STDIN_FILENO);
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  if (!live) {
    GPOOL_ASSIGN_OR_RETURN(json answer, fetchGpus(api));
    if (global.json) {
      std::cout << api::dumpJson(answer, 2) << "\n";
    } else {
      std::cout << formatTop(answer, 1000);
    }
    return Status::ok();
  }
  RawInput raw;
  // The alternate screen, cursor hidden; each frame homes the cursor and overwrites the lines,
  // clearing only what is left at each line's end and below (no flicker of a full clear).
  std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;
  Status result;
  while (true) {
    Result<json> answer = fetchGpus(api);
    std::string frame;
    if (answer.ok()) {
      frame = formatTop(*answer, terminalWidth());
    } else {
      frame = "gpool top: " + answer.status().message() + "\n";
    }
    frame += "(q to quit, refresh every " + std::to_string(args.interval_s).substr(0, 4) + " s)\n";
    std::string painted = "\x1b[H";
    size_t start = 0;
    while (start < frame.size()) {
      size_t end = frame.find('\n', start);
      if (end == std::string::npos) end = frame.size();
      painted += frame.substr(start, end - start) + "\x1b[K\r\n";
      start = end + 1;
    }
    painted += "\x1b[J";
    std::cout << painted << std::flush;
    pollfd pfd{STDIN_FILENO, POLLIN, 0};
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(args.interval_s * 1000));
    bool quit = false;
    while (!quit) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      int n = ::poll(&pfd, 1, static_cast<int>(left.count()));
      if (n <= 0) continue;
      char c = 0;
      if (::read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q' || c == 3)) quit = true;
    }
    if (quit) break;
  }
  std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
  return result;
}

}  // namespace

void registerTopCommand(CLI::App& app, std::shared_ptr<GlobalOptions> global) {
  auto args = std::make_shared<TopArgs>();
  auto* top = app.add_subcommand(
      "top", "Live view of every GPU in the pool with its tenants (q quits), like nvitop");
  top->add_option("--interval", args->interval_s, "seconds between refreshes (default 2)");
  top->add_flag("--once", args->once, "print the view once as plain text and exit");
  top->callback([global, args] {
    Status s = runTop(*global, *args);
    if (s.isOk()) return;
    std::cerr << "gpool: " << s.message() << "\n";
    throw CLI::RuntimeError(exitCodeFor(s.code()));
  });
}

}  // namespace gpool::cli
