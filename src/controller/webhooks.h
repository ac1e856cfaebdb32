#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "controller/alerts.h"
#include "controller/metrics.h"

// Delivers alert changes to webhooks with Alertmanager's payload (docs/alerts.md), so that
// anything that takes Alertmanager's webhook (chat bridges, paging services, a site's own
// receiver) takes gpoold's alerts.
//
// The engine only enqueues (a short lock, never I/O): the controller is never held up by a slow
// or dead receiver. Each webhook has its own queue, delivered in order by `pump` (gpoold runs it
// on a thread of its own): a failed delivery is retried after a backoff that doubles from
// `initial_backoff` up to `max_backoff`, measured on the injected clock; the queue keeps at most
// `max_queued` notifications (the oldest are dropped and counted). Failures are visible: the
// log, `status()` (GET /v1/alerts/webhooks) and the metrics.
namespace gpool::controller {

struct WebhookConfig {
  std::string url;           // http://host:port/path or https://host:port/path
  std::string bearer_token;  // sent as Authorization: Bearer; empty: none
};

struct WebhookOptions {
  Micros timeout{std::chrono::seconds(5)};  // per delivery
  Micros initial_backoff{std::chrono::seconds(1)};
  Micros max_backoff{std::chrono::minutes(5)};
  size_t max_queued = 1000;
  // gpoold's address for people (the dashboard), for externalURL and generatorURL.
  std::string external_url;
};

struct WebhookTarget {
  bool tls = false;
  std::string host;
  int port = 0;
  std::string path;
};
// "http://host[:port]/path" (default port 80, https 443). InvalidArgument naming what is wrong.
Result<WebhookTarget> parseWebhookUrl(std::string_view url);

// One webhook's state, for GET /v1/alerts/webhooks and the metrics.
struct WebhookStatus {
  std::string url;
  size_t queued = 0;
  uint64_t delivered = 0;
  uint64_t failed_attempts = 0;
  uint64_t dropped = 0;
  std::string last_error;  // empty when the last attempt succeeded
  std::optional<TimePoint> last_error_at;
  std::optional<TimePoint> last_delivered_at;
};

// The Alertmanager webhook body (version 4) for one change.
nlohmann::json alertmanagerPayload(const AlertChange& change, const std::string& external_url);

// Thread-safety: `enqueue`, `status` and `writeMetrics` from any thread; `pump` from one thread
// at a time (the sender's, or a test's).
class WebhookSender {
 public:
  // Targets must have been checked with parseWebhookUrl (bad ones are skipped with a log line).
  WebhookSender(std::vector<WebhookConfig> webhooks, Clock& clock, WebhookOptions options = {});
  ~WebhookSender();

  // Queues `change` for every webhook (fired and resolved; acknowledgements are not sent).
  void enqueue(const AlertChange& change);

  // Delivers, for every webhook whose next attempt is due, its queued notifications in order
  // until one fails (then it backs off). Returns how many were delivered.
  size_t pump();

  // Runs pump every `every` on a thread of its own.
  void start(std::chrono::milliseconds every = std::chrono::milliseconds(200));
  void stop();

  std::vector<WebhookStatus> status() const;
  void writeMetrics(PromWriter& out) const;

 private:
  struct Hook;
  Clock& clock_;
  WebhookOptions options_;
  std::vector<std::unique_ptr<Hook>> hooks_;
  mutable std::mutex mu_;  // queues and counters; never held during a delivery
  std::mutex pump_mu_;     // one pump at a time
  std::jthread thread_;
};

}  // namespace gpool::controller
