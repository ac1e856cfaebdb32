#include "controller/webhooks.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <ctime>

#include <spdlog/spdlog.h>

#include "net/client.h"

namespace gpool::controller {

namespace {

using nlohmann::json;

std::string rfc3339(TimePoint t) {
  int64_t us = toUnixMicros(t);
  std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06lldZ", static_cast<long long>(us % 1'000'000));
  return std::string(buf) + frac;
}

}  // namespace

Result<WebhookTarget> parseWebhookUrl(std::string_view url) {
  WebhookTarget t;
  std::string_view rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
    t.port = 80;
  } else if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
    t.tls = true;
    t.port = 443;
  } else {
    return Status::invalidArgument("'" + std::string(url) + "' is not an http:// or https:// URL");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  t.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']') == std::string_view::npos) {
    std::string_view port = authority.substr(colon + 1);
    int p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      return Status::invalidArgument("'" + std::string(url) + "': bad port '" + std::string(port) +
                                     "'");
    }
    t.port = p;
    authority = authority.substr(0, colon);
  }
  if (authority.size() > 2 && authority.front() == '[' && authority.back() == ']') {
    authority = authority.substr(1, authority.size() - 2);
  }
  if (authority.empty()) {
    return Status::invalidArgument("'" + std::string(url) + "' names no host");
  }
  t.host = std::string(authority);
  return t;
}

json alertmanagerPayload(const AlertChange& change, const std::string& external_url) {
  const store::AlertRecord& a = change.alert;
  const bool resolved = change.kind == AlertChange::Kind::kResolved;
  json labels = json::object();
  for (const auto& [k, v] : change.labels)
    labels[k] = v;
  json annotations = {{"summary", a.summary},
                      {"description", change.description},
                      {"alert_id", std::to_string(a.id)}};
  json alert = {{"status", resolved ? "resolved" : "firing"},
                {"labels", labels},
                {"annotations", annotations},
                {"startsAt", rfc3339(a.started)},
                {"endsAt", resolved && a.resolved ? rfc3339(*a.resolved)
                                                  : std::string("0001-01-01T00:00:00Z")},
                {"generatorURL", external_url + "/v1/alerts/" + std::to_string(a.id)},
                {"fingerprint", a.fingerprint}};
  return {{"version", "4"},
          {"groupKey", "{}:{alertname=\"" + change.alertname + "\"}"},
          {"truncatedAlerts", 0},
          {"status", resolved ? "resolved" : "firing"},
          {"receiver", "gpool"},
          {"groupLabels", {{"alertname", change.alertname}}},
          {"commonLabels", labels},
          {"commonAnnotations", annotations},
          {"externalURL", external_url},
          {"alerts", json::array({alert})}};
}

struct WebhookSender::Hook {
  WebhookConfig config;
  WebhookTarget target;
  std::unique_ptr<net::HttpClient> client;  // used by pump only
  std::deque<std::string> queue;            // bodies, oldest first
  Micros next_attempt{0};                   // monotonic
  Micros backoff{0};
  WebhookStatus status;
};

WebhookSender::WebhookSender(std::vector<WebhookConfig> webhooks, Clock& clock,
                             WebhookOptions options)
    : clock_(clock), options_(std::move(options)) {
  for (WebhookConfig& w : webhooks) {
    Result<WebhookTarget> t = parseWebhookUrl(w.url);
    if (!t.ok()) {
      spdlog::error("alerts: webhook skipped: {}", t.status().message());
      continue;
    }
    auto hook = std::make_unique<Hook>();
    hook->target = *t;
    net::ClientEndpoint ep = t->tls ? net::ClientEndpoint::tls(t->host, t->port, "", "")
                                    : net::ClientEndpoint::http(t->host, t->port);
    auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.timeout);
    hook->client = std::make_unique<net::HttpClient>(ep, timeout);
    hook->status.url = w.url;
    hook->config = std::move(w);
    hooks_.push_back(std::move(hook));
  }
}

WebhookSender::~WebhookSender() {
  stop();
}

void WebhookSender::enqueue(const AlertChange& change) {
  if (change.kind == AlertChange::Kind::kAcked || hooks_.empty()) return;
  std::string body = alertmanagerPayload(change, options_.external_url).dump();
  std::lock_guard lock(mu_);
  for (auto& h : hooks_) {
    if (h->queue.size() >= options_.max_queued) {
      h->queue.pop_front();
      ++h->status.dropped;
    }
    h->queue.push_back(body);
  }
}

size_t WebhookSender::pump() {
  std::lock_guard pump_lock(pump_mu_);
  size_t delivered = 0;
  for (auto& h : hooks_) {
    while (true) {
      std::string body;
      {
        std::lock_guard lock(mu_);
        if (h->queue.empty() || clock_.monotonic() < h->next_attempt) break;
        body = h->queue.front();
      }
      std::vector<std::pair<std::string, std::string>> headers = {
          {"Content-Type", "application/json"}};
      if (!h->config.bearer_token.empty()) {
        headers.emplace_back("Authorization", "Bearer " + h->config.bearer_token);
      }
      Result<net::Response> r =
          h->client->request(net::Method::kPost, h->target.path, body, headers);
      std::string error;
      if (!r.ok()) {
        error = r.status().message();
      } else if (r->status < 200 || r->status >= 300) {
        error = "answered HTTP " + std::to_string(r->status);
      }
      std::lock_guard lock(mu_);
      if (error.empty()) {
        // The queue may have dropped its head meanwhile (overflow): pop only what was sent.
        if (!h->queue.empty() && h->queue.front() == body) h->queue.pop_front();
        ++h->status.delivered;
        h->status.last_delivered_at = clock_.now();
        h->status.last_error.clear();
        h->backoff = Micros(0);
        ++delivered;
        continue;
      }
      h->client->close();
      ++h->status.failed_attempts;
      h->backoff = h->backoff == Micros(0) ? options_.initial_backoff
                                           : std::min(options_.max_backoff, h->backoff * 2);
      h->next_attempt = clock_.monotonic() + h->backoff;
      bool first = h->status.last_error.empty();
      h->status.last_error = error;
      h->status.last_error_at = clock_.now();
      if (first) {
        spdlog::warn("alerts: webhook {} failed: {}; retrying with backoff ({} queued)",
                     h->config.url, error, h->queue.size());
      }
      break;
    }
  }
  return delivered;
}

void WebhookSender::start(std::chrono::milliseconds every) {
  if (thread_.joinable() || hooks_.empty()) return;
  thread_ = std::jthread([this, every](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    while (!stop.stop_requested()) {
      pump();
      std::unique_lock lock(mu);
      cv.wait_for(lock, stop, every, [] { return false; });
    }
  });
}

void WebhookSender::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

std::vector<WebhookStatus> WebhookSender::status() const {
  std::lock_guard lock(mu_);
  std::vector<WebhookStatus> out;
  for (const auto& h : hooks_) {
    WebhookStatus s = h->status;
    s.queued = h->queue.size();
    out.push_back(std::move(s));
  }
  return out;
}

void WebhookSender::writeMetrics(PromWriter& out) const {
  std::vector<WebhookStatus> all = status();
  out.family("gpool_webhook_deliveries_total", "counter",
             "Alert notifications delivered to each webhook.");
  for (const WebhookStatus& s : all)
    out.sample("gpool_webhook_deliveries_total", {{"url", s.url}}, double(s.delivered));
  out.family("gpool_webhook_failures_total", "counter",
             "Failed delivery attempts per webhook (each is retried with backoff).");
  for (const WebhookStatus& s : all)
    out.sample("gpool_webhook_failures_total", {{"url", s.url}}, double(s.failed_attempts));
  out.family("gpool_webhook_queued", "gauge", "Notifications waiting for each webhook.");
  for (const WebhookStatus& s : all)
    out.sample("gpool_webhook_queued", {{"url", s.url}}, double(s.queued));
  out.family("gpool_webhook_dropped_total", "counter",
             "Notifications dropped because a webhook's queue was full.");
  for (const WebhookStatus& s : all)
    out.sample("gpool_webhook_dropped_total", {{"url", s.url}}, double(s.dropped));
}

}  // namespace gpool::controller
