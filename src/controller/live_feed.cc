#include "controller/live_feed.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "controller/api_routes.h"

namespace gpool::controller {

namespace {

using nlohmann::json;

constexpr int32_t kPage = 1000;
const std::vector<std::string> kTopics = {"alerts", "jobs", "nodes", "summary"};

struct WatchQuery {
  std::vector<std::string> topics;  // sorted, distinct
  std::optional<int64_t> after_event;
};

Result<WatchQuery> parseWatchQuery(const net::Request& req) {
  WatchQuery q;
  std::set<std::string> topics;
  bool topics_given = false;
  for (const auto& [key, value] : req.query) {
    if (key == "topics") {
      topics_given = true;
      for (std::string& t : net::splitTopics(value)) {
        if (std::find(kTopics.begin(), kTopics.end(), t) == kTopics.end()) {
          return Status::invalidArgument("topics: unknown topic '" + t +
                                         "' (expected alerts, jobs, nodes, summary)");
        }
        topics.insert(std::move(t));
      }
    } else if (key == "after_event") {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || v < 0) {
        return Status::invalidArgument("after_event: '" + value +
                                       "' is not a non-negative integer (the seq of the last "
                                       "event received)");
      }
      q.after_event = v;
    } else {
      return Status::invalidArgument("query parameter '" + key +
                                     "' is not known here (expected topics, after_event)");
    }
  }
  if (!topics_given) topics.insert(kTopics.begin(), kTopics.end());
  if (topics.empty())
    return Status::invalidArgument("topics: empty (expected alerts, jobs, nodes, summary)");
  q.topics.assign(topics.begin(), topics.end());
  return q;
}

// A job event's hub scope: its owner and group, which the connection's filter checks.
std::string scopeOf(const store::JobEvent& e) {
  return e.user + '\n' + e.group;
}

JobOwner ownerOfScope(std::string_view scope) {
  size_t nl = scope.find('\n');
  if (nl == std::string_view::npos) return JobOwner{std::string(scope), ""};
  return JobOwner{std::string(scope.substr(0, nl)), std::string(scope.substr(nl + 1))};
}

bool maySee(const Caller& caller, const store::JobEvent& e) {
  return checkJobAction(caller, JobAction::kShow, JobOwner{e.user, e.group}).isOk();
}

std::string eventText(const store::JobEvent& e) {
  json nodes = json::array();
  if (!e.placement_json.empty()) {
    json placement = json::parse(e.placement_json, nullptr, /*allow_exceptions=*/false);
    std::set<std::string> seen;
    if (placement.is_array()) {
      for (const json& a : placement) {
        if (!a.is_object() || !a.contains("node") || !a["node"].is_string()) continue;
        std::string node = a["node"].get<std::string>();
        if (seen.insert(node).second) nodes.push_back(node);
      }
    }
  }
  return json{{"seq", e.seq},
              {"job_id", e.job_id},
              {"time_us", toUnixMicros(e.time)},
              {"from_state", e.fromStateName()},
              {"to_state", api::jobStateName(e.to_state)},
              {"reason", e.reason},
              {"user", e.user},
              {"group", e.group},
              {"nodes", std::move(nodes)}}
      .dump();
}

}  // namespace

LiveFeed::LiveFeed(store::Store& store, NodeRegistry& registry, LiveFeedOptions options)
    : store_(store), registry_(registry), options_(options) {}

LiveFeed::~LiveFeed() {
  stop();
}

Status LiveFeed::start() {
  GPOOL_ASSIGN_OR_RETURN(int64_t last, store_.lastJobEventSeq());
  {
    std::lock_guard lock(mu_);
    if (started_) return Status::failedPrecondition("the live feed is already started");
    started_ = true;
    published_seq_ = last;
  }
  store_.setJobEventListener([this] { wake(); });
  registry_.setChangeListener([this](const NodeChange& c) { onNodeChange(c); });
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
  return Status::ok();
}

void LiveFeed::stop() {
  {
    std::lock_guard lock(mu_);
    if (!started_) return;
    started_ = false;
  }
  store_.setJobEventListener({});
  registry_.setChangeListener({});
  thread_.request_stop();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LiveFeed::publishAlert(const std::string& data_json, const std::string& user) {
  hub_.publish("alerts", data_json, user);
}

int64_t LiveFeed::publishedSeq() const {
  std::lock_guard lock(mu_);
  return published_seq_;
}

void LiveFeed::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

void LiveFeed::onNodeChange(const NodeChange& c) {
  hub_.publish(
      "nodes",
      json{{"node", c.node}, {"change", c.change}, {"state", c.state}, {"reason", c.reason}}
          .dump());
  {
    std::lock_guard lock(mu_);
    summary_dirty_ = true;
  }
  cv_.notify_one();
}

Status LiveFeed::addRoute(net::Router& router, CallerFor caller_for) {
  if (!caller_for) {
    caller_for = [this](const net::Request& req) { return callerFor(store_, req.peer); };
  }
  auto accept = [caller_for](const net::Request& req) -> Status {
    GPOOL_RETURN_IF_ERROR(parseWatchQuery(req).status());
    return caller_for(req).status();
  };
  net::WebSocketHandler h = hub_.handler(accept);
  h.on_open = [this, caller_for](const net::WebSocketConnectionPtr& conn) {
    Result<WatchQuery> q = parseWatchQuery(conn->request());
    Result<Caller> caller = q.ok() ? caller_for(conn->request()) : Result<Caller>(q.status());
    if (!caller.ok()) {
      // accept() checked both; this is a store failure between the two.
      conn->close(net::kCloseInternal, caller.status().message());
      return;
    }
    // Registered without topics: nothing reaches the connection until the publishing thread
    // has replayed what it missed and subscribes it (goLive).
    Caller who = *caller;
    hub_.setFilter(conn, [who](std::string_view topic, std::string_view scope) {
      if (topic == "alerts") return who.role != Role::kUser || scope == who.user;
      if (topic != "jobs") return true;
      return checkJobAction(who, JobAction::kShow, ownerOfScope(scope)).isOk();
    });
    {
      std::lock_guard lock(mu_);
      pending_.push_back(Pending{conn, q->topics, q->after_event, std::move(who)});
    }
    cv_.notify_one();
  };
  return router.addWebSocket("/v1/watch", std::move(h));
}

void LiveFeed::run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::vector<Pending> pending;
    {
      std::unique_lock lock(mu_);
      auto deadline = std::chrono::steady_clock::now() + options_.poll_interval;
      if (summary_dirty_)
        deadline = std::min(deadline, last_summary_at_ + options_.summary_interval);
      cv_.wait_until(lock, stop, deadline, [&] { return woken_ || !pending_.empty(); });
      woken_ = false;
      pending.swap(pending_);
    }
    if (stop.stop_requested()) break;
    publishNewEvents();
    for (const Pending& p : pending)
      goLive(p);
    publishSummaryIfDue();
  }
}

void LiveFeed::publishNewEvents() {
  int64_t after = publishedSeq();
  bool any = false;
  while (true) {
    Result<std::vector<store::JobEvent>> page = store_.jobEventsAfter(after, kPage);
    if (!page.ok()) {
      spdlog::warn("live feed: cannot read job events after {}: {}", after,
                   page.status().toString());
      return;
    }
    for (const store::JobEvent& e : *page) {
      hub_.publish("jobs", eventText(e), scopeOf(e));
      after = e.seq;
      any = true;
    }
    {
      std::lock_guard lock(mu_);
      published_seq_ = after;
      if (any) summary_dirty_ = true;
    }
    if (page->size() < static_cast<size_t>(kPage)) return;
  }
}

void LiveFeed::goLive(const Pending& p) {
  const bool jobs = std::find(p.topics.begin(), p.topics.end(), "jobs") != p.topics.end();
  const int64_t upto = publishedSeq();
  if (jobs && p.after_event && *p.after_event < upto) {
    int64_t from = *p.after_event;
    if (upto - from > options_.max_replay_events) {
      p.conn->close(kCloseResumeTooOld, "after_event " + std::to_string(from) + " is " +
                                            std::to_string(upto - from) +
                                            " events behind; list the jobs instead");
      return;
    }
    while (from < upto) {
      Result<std::vector<store::JobEvent>> page = store_.jobEventsAfter(from, kPage);
      if (!page.ok()) {
        p.conn->close(net::kCloseInternal, "cannot read job events: " + page.status().message());
        return;
      }
      if (page->empty()) break;
      for (const store::JobEvent& e : *page) {
        if (e.seq > upto) break;
        from = e.seq;
        if (!maySee(p.caller, e)) continue;
        // A full queue drops the connection (slow consumer); the client resumes again later.
        if (!p.conn->send(net::EventHub::message("jobs", eventText(e)))) return;
      }
      if (page->back().seq > upto) break;
    }
  }
  if (!hub_.subscribeExisting(p.conn->id(), p.topics)) return;  // closed meanwhile
  p.conn->send(json{{"subscribed", hub_.topicsOf(p.conn->id())}, {"last_event", upto}}.dump());
  if (std::find(p.topics.begin(), p.topics.end(), "summary") != p.topics.end()) {
    Result<std::string> summary = summaryText();
    if (summary.ok()) p.conn->send(net::EventHub::message("summary", *summary));
  }
}

Result<std::string> LiveFeed::summaryText() {
  GPOOL_ASSIGN_OR_RETURN(json summary, poolSummary(store_, registry_));
  return summary.dump();
}

void LiveFeed::publishSummaryIfDue() {
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    if (!summary_dirty_ || now < last_summary_at_ + options_.summary_interval) return;
    summary_dirty_ = false;
  }
  if (hub_.subscriberCount("summary") == 0) {
    last_summary_.clear();
    return;
  }
  last_summary_at_ = now;
  Result<std::string> summary = summaryText();
  if (!summary.ok()) {
    spdlog::warn("live feed: cannot compute the summary: {}", summary.status().toString());
    return;
  }
  if (*summary == last_summary_) return;
  last_summary_ = *summary;
  hub_.publish("summary", *summary);
}

}  // namespace gpool::controller
