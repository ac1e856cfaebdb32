#include "net/event_hub.h"

#include <nlohmann/json.hpp>

namespace gpool::net {

std::vector<std::string> splitTopics(std::string_view csv) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= csv.size()) {
    size_t j = csv.find(',', i);
    if (j == std::string_view::npos) j = csv.size();
    if (j > i) out.emplace_back(csv.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

WebSocketHandler EventHub::handler(std::function<Status(const Request&)> accept) {
  WebSocketHandler h;
  h.accept = std::move(accept);
  h.on_open = [this](const WebSocketConnectionPtr& conn) {
    std::vector<std::string> topics;
    for (const std::string& csv : conn->request().queryParams("topics")) {
      for (std::string& t : splitTopics(csv))
        topics.push_back(std::move(t));
    }
    subscribe(conn, topics);
  };
  h.on_message = [this](const WebSocketConnectionPtr& conn, std::string message) {
    onMessage(conn, message);
  };
  h.on_close = [this](const WebSocketConnectionPtr& conn, uint16_t, const std::string&) {
    remove(conn->id());
  };
  return h;
}

void EventHub::onMessage(const WebSocketConnectionPtr& conn, const std::string& message) {
  auto reply_error = [&](std::string_view text) {
    conn->send(errorBody("invalid_argument", text));
  };
  nlohmann::json j = nlohmann::json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    reply_error("event subscription message must be a JSON object");
    return;
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "subscribe" && key != "unsubscribe") {
      reply_error("unknown field '" + key + "' (expected subscribe or unsubscribe)");
      return;
    }
    if (!value.is_array()) {
      reply_error("field '" + key + "' must be an array of topic names");
      return;
    }
    std::vector<std::string> topics;
    for (const auto& t : value) {
      if (!t.is_string()) {
        reply_error("field '" + key + "' must be an array of topic names");
        return;
      }
      topics.push_back(t.get<std::string>());
    }
    if (key == "subscribe") {
      subscribe(conn, topics);
    } else {
      unsubscribe(conn->id(), topics);
    }
  }
  // Acknowledge with the resulting set, so a client knows from when on it receives a topic.
  conn->send(nlohmann::json{{"subscribed", topicsOf(conn->id())}}.dump());
}

void EventHub::subscribe(const WebSocketConnectionPtr& conn,
                         const std::vector<std::string>& topics) {
  std::lock_guard<std::mutex> lock(mu_);
  Subscriber& s = subscribers_[conn->id()];
  s.conn = conn;
  s.topics.insert(topics.begin(), topics.end());
}

bool EventHub::subscribeExisting(uint64_t conn_id, const std::vector<std::string>& topics) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = subscribers_.find(conn_id);
  if (it == subscribers_.end()) return false;
  it->second.topics.insert(topics.begin(), topics.end());
  return true;
}

void EventHub::setFilter(const WebSocketConnectionPtr& conn, Filter filter) {
  std::lock_guard<std::mutex> lock(mu_);
  Subscriber& s = subscribers_[conn->id()];
  s.conn = conn;
  s.filter = std::move(filter);
}

std::vector<std::string> EventHub::topicsOf(uint64_t conn_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = subscribers_.find(conn_id);
  if (it == subscribers_.end()) return {};
  return {it->second.topics.begin(), it->second.topics.end()};
}

std::string EventHub::message(std::string_view topic, std::string_view data_json) {
  return "{\"topic\":" + nlohmann::json(std::string(topic)).dump() +
         ",\"data\":" + std::string(data_json) + "}";
}

void EventHub::unsubscribe(uint64_t conn_id, const std::vector<std::string>& topics) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = subscribers_.find(conn_id);
  if (it == subscribers_.end()) return;
  for (const std::string& t : topics)
    it->second.topics.erase(t);
}

void EventHub::remove(uint64_t conn_id) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(conn_id);
}

size_t EventHub::publish(std::string_view topic, std::string_view data_json,
                         std::string_view scope) {
  std::string text = message(topic, data_json);
  std::vector<WebSocketConnectionPtr> targets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key(topic);
    for (const auto& [id, s] : subscribers_) {
      if (!s.topics.count(key) && !s.topics.count("*")) continue;
      if (s.filter && !s.filter(topic, scope)) continue;
      targets.push_back(s.conn);
    }
  }
  // Sending outside the lock: `send` may close the connection, whose on_close re-enters the
  // hub through `remove`.
  size_t delivered = 0;
  std::vector<uint64_t> failed;
  for (const WebSocketConnectionPtr& c : targets) {
    if (c->send(text)) {
      ++delivered;
    } else {
      failed.push_back(c->id());
    }
  }
  if (!failed.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t id : failed) {
      if (subscribers_.erase(id)) ++dropped_;
    }
  }
  return delivered;
}

size_t EventHub::connectionCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subscribers_.size();
}

size_t EventHub::subscriberCount(std::string_view topic) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, s] : subscribers_) {
    if (s.topics.count(std::string(topic)) || s.topics.count("*")) ++n;
  }
  return n;
}

uint64_t EventHub::droppedCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace gpool::net
