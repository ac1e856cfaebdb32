#include "cli/watch_command.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "cli/format.h"
#include "common/status.h"
#include "net/client.h"

namespace gpool::cli {

namespace {

using nlohmann::json;

struct WatchArgs {
  std::string topics = "jobs,alerts";
  int64_t after = -1;  // -1: live from now
  int64_t count = 0;   // 0: until interrupted
};

// One line for a message: job events as "seq job from -> to (reason) user nodes", node changes
// and summaries shortly; the live marker is not printed.
std::string lineFor(const json& m) {
  std::string topic = m.value("topic", "");
  const json& d = m.contains("data") ? m["data"] : json();
  if (topic == "jobs") {
    std::string nodes;
    for (const json& n : d.value("nodes", json::array()))
      nodes += (nodes.empty() ? "" : ",") + n.get<std::string>();
    std::string from = d.value("from_state", "");
    return "#" + std::to_string(d.value("seq", int64_t{0})) + " job " +
           std::to_string(d.value("job_id", int64_t{0})) + " " + (from.empty() ? "-" : from) +
           " -> " + d.value("to_state", "") + " (" + d.value("reason", "") + ") user " +
           d.value("user", "") + (nodes.empty() ? "" : " on " + nodes);
  }
  if (topic == "alerts") {
    return "alert " + std::to_string(d.value("id", int64_t{0})) + " " + d.value("change", "") +
           " " + d.value("alertname", "") + " " + d.value("severity", "") + ": " +
           d.value("summary", "");
  }
  if (topic == "nodes") {
    return "node " + d.value("node", "") + " " + d.value("change", "") + " " +
           d.value("state", "") +
           (d.value("reason", "").empty() ? "" : " (" + d.value("reason", "") + ")");
  }
  return topic + " " + d.dump();
}

Status runWatch(const GlobalOptions& global, const WatchArgs& a) {
  std::string target = "/v1/watch?topics=" + a.topics;
  if (a.after >= 0) target += "&after_event=" + std::to_string(a.after);
  std::mutex mu;
  std::condition_variable cv;
  int64_t job_events = 0;
  bool ended = false;
  Status why;
  net::WebSocketClientOptions o;
  GPOOL_ASSIGN_OR_RETURN(ControllerTarget controller, controllerTarget(global));
  o.endpoint = controller.endpoint;
  o.alternates = controller.alternates;
  o.target = target;
  o.on_message = [&](std::string text) {
    json m = json::parse(text, nullptr, false);
    if (!m.is_object() || m.contains("subscribed")) return;
    if (m.contains("error")) {
      std::lock_guard lock(mu);
      why = Status::invalidArgument(m["error"].value("message", text));
      ended = true;
      cv.notify_all();
      return;
    }
    std::lock_guard lock(mu);
    if (ended) return;  // --count reached: nothing more
    std::string line = global.json ? m.dump() : terminalSafe(lineFor(m));
    std::fprintf(stdout, "%s\n", line.c_str());
    std::fflush(stdout);
    if (m.value("topic", "") == "jobs") ++job_events;
    if (a.count > 0 && job_events >= a.count) {
      ended = true;
      cv.notify_all();
    }
  };
  o.on_disconnect = [&](const Status& s) {
    std::lock_guard lock(mu);
    // The client would reconnect (and resume nothing): a watch ends with the connection.
    why = s.isOk() ? Status::unavailable("gpoold closed the connection")
                   : Status(s.code(),
                            "gpoold at " + controller.endpoint.describe() + ": " + s.message());
    if (s.code() == StatusCode::kUnauthenticated && !controller.endpoint.isUnix()) {
      // The refused upgrade carries gpoold's JSON error; its message says why (revoked...).
      std::string m = s.message();
      size_t brace = m.find('{');
      json e = brace == std::string::npos ? json() : json::parse(m.substr(brace), nullptr, false);
      if (e.is_object() && e.contains("error") && e["error"].is_object()) {
        m = e["error"].value("message", m);
      }
      why = refusedToken(controller, m);
    }
    ended = true;
    cv.notify_all();
  };
  net::WebSocketClient client(o);
  client.start();
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return ended; });
  }
  client.stop();
  if (a.count > 0 && job_events >= a.count) return Status::ok();
  return why;
}

}  // namespace

void registerWatchCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global) {
  auto args = std::make_shared<WatchArgs>();
  auto* watch = app.add_subcommand(
      "watch", "Print live updates from gpoold: job events (yours, or what your role may see)");
  watch
      ->add_option("--topics", args->topics,
                   "comma-separated: jobs, alerts, nodes, summary (default jobs,alerts)")
      ->capture_default_str();
  watch->add_option("--after", args->after,
                    "replay the job events after this seq first (the last one you saw)");
  watch->add_option("--count", args->count, "stop after this many job events");
  watch->callback([global, args] {
    Status s = runWatch(*global, *args);
    if (s.isOk()) return;
    std::cerr << "gpool: " << s.message() << "\n";
    throw CLI::RuntimeError(exitCodeFor(s.code()));
  });
}

}  // namespace gpool::cli
