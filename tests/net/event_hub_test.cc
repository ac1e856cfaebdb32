#include "net/event_hub.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpool::net {
namespace {

// A connection that records what it is sent and refuses once `capacity` messages are held, as
// the server's bounded queue does.
class FakeConnection : public WebSocketConnection {
 public:
  FakeConnection(uint64_t id, std::string target, size_t capacity = 100)
      : id_(id), capacity_(capacity) {
    std::string path;
    (void)parseTarget(target, &path, &request_.query);
    request_.path = path;
  }
  bool send(std::string message) override {
    if (closed_ || sent.size() >= capacity_) {
      closed_ = true;
      return false;
    }
    sent.push_back(std::move(message));
    return true;
  }
  void close(uint16_t, std::string) override { closed_ = true; }
  const Request& request() const override { return request_; }
  uint64_t id() const override { return id_; }
  size_t queuedMessages() const override { return sent.size(); }

  std::vector<std::string> sent;

 private:
  uint64_t id_;
  size_t capacity_;
  bool closed_ = false;
  Request request_;
};

TEST(EventHubTest, DeliversByTopicWithEnvelope) {
  EventHub hub;
  WebSocketHandler h = hub.handler();
  auto a = std::make_shared<FakeConnection>(1, "/v1/events?topics=jobs,nodes");
  auto b = std::make_shared<FakeConnection>(2, "/v1/events?topics=gpus");
  auto all = std::make_shared<FakeConnection>(3, "/v1/events?topics=*");
  h.on_open(a);
  h.on_open(b);
  h.on_open(all);
  EXPECT_EQ(hub.connectionCount(), 3u);
  EXPECT_EQ(hub.subscriberCount("jobs"), 2u);

  EXPECT_EQ(hub.publish("jobs", R"({"id":1})"), 2u);
  ASSERT_EQ(a->sent.size(), 1u);
  EXPECT_TRUE(b->sent.empty());
  auto j = nlohmann::json::parse(a->sent[0]);
  EXPECT_EQ(j["topic"], "jobs");
  EXPECT_EQ(j["data"]["id"], 1);
  EXPECT_EQ(all->sent.size(), 1u);
}

TEST(EventHubTest, ClientMessagesChangeSubscriptions) {
  EventHub hub;
  WebSocketHandler h = hub.handler();
  auto a = std::make_shared<FakeConnection>(1, "/v1/events");
  h.on_open(a);
  EXPECT_EQ(hub.publish("jobs", "1"), 0u);
  h.on_message(a, R"({"subscribe": ["jobs", "nodes"]})");
  ASSERT_EQ(a->sent.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(a->sent[0])["subscribed"],
            nlohmann::json::array({"jobs", "nodes"}));
  EXPECT_EQ(hub.publish("jobs", "2"), 1u);
  h.on_message(a, R"({"unsubscribe": ["jobs"]})");
  EXPECT_EQ(nlohmann::json::parse(a->sent[2])["subscribed"], nlohmann::json::array({"nodes"}));
  EXPECT_EQ(hub.publish("jobs", "3"), 0u);
  EXPECT_EQ(hub.publish("nodes", "4"), 1u);
  ASSERT_EQ(a->sent.size(), 4u);

  h.on_message(a, "not json");
  h.on_message(a, R"({"subscribe": "jobs"})");
  h.on_message(a, R"({"frobnicate": []})");
  ASSERT_EQ(a->sent.size(), 7u);
  auto err = nlohmann::json::parse(a->sent[6]);
  EXPECT_EQ(err["error"]["code"], "invalid_argument");
  EXPECT_NE(err["error"]["message"].get<std::string>().find("frobnicate"), std::string::npos);
  EXPECT_EQ(hub.connectionCount(), 1u);  // bad messages do not drop the client
}

TEST(EventHubTest, FullConnectionsAreDroppedOthersKeepReceiving) {
  EventHub hub;
  WebSocketHandler h = hub.handler();
  auto slow = std::make_shared<FakeConnection>(1, "/v1/events?topics=jobs", 3);
  auto fast = std::make_shared<FakeConnection>(2, "/v1/events?topics=jobs", 1000);
  h.on_open(slow);
  h.on_open(fast);
  for (int i = 0; i < 10; ++i)
    hub.publish("jobs", std::to_string(i));
  EXPECT_EQ(slow->sent.size(), 3u);
  EXPECT_EQ(fast->sent.size(), 10u);
  EXPECT_EQ(hub.droppedCount(), 1u);
  EXPECT_EQ(hub.connectionCount(), 1u);
}

TEST(EventHubTest, CloseForgetsConnection) {
  EventHub hub;
  WebSocketHandler h = hub.handler();
  auto a = std::make_shared<FakeConnection>(1, "/v1/events?topics=jobs");
  h.on_open(a);
  h.on_close(a, kCloseNormal, "bye");
  EXPECT_EQ(hub.connectionCount(), 0u);
  EXPECT_EQ(hub.publish("jobs", "1"), 0u);
}

TEST(EventHubTest, FiltersDecidePerConnectionByScope) {
  EventHub hub;
  WebSocketHandler h = hub.handler();
  auto alice = std::make_shared<FakeConnection>(1, "/v1/watch?topics=jobs,nodes");
  auto admin = std::make_shared<FakeConnection>(2, "/v1/watch?topics=jobs");
  h.on_open(alice);
  h.on_open(admin);
  // alice sees only events scoped to her on "jobs"; other topics pass whatever their scope.
  hub.setFilter(alice, [](std::string_view topic, std::string_view scope) {
    return topic != "jobs" || scope == "alice";
  });
  EXPECT_EQ(hub.publish("jobs", "1", "alice"), 2u);
  EXPECT_EQ(hub.publish("jobs", "2", "bob"), 1u);
  EXPECT_EQ(hub.publish("nodes", "3"), 1u);
  ASSERT_EQ(alice->sent.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(alice->sent[0])["data"], 1);
  EXPECT_EQ(nlohmann::json::parse(alice->sent[1])["data"], 3);
  EXPECT_EQ(admin->sent.size(), 2u);
  // Clearing the filter lets everything through again.
  hub.setFilter(alice, {});
  EXPECT_EQ(hub.publish("jobs", "4", "bob"), 2u);
  EXPECT_EQ(alice->sent.back(), EventHub::message("jobs", "4"));
}

TEST(EventHubTest, SubscribeExistingDoesNotResurrectAClosedConnection) {
  EventHub hub;
  WebSocketHandler h = hub.handler();
  auto a = std::make_shared<FakeConnection>(1, "/v1/watch?topics=nodes");
  h.on_open(a);
  EXPECT_TRUE(hub.subscribeExisting(1, {"jobs"}));
  EXPECT_EQ(hub.topicsOf(1), (std::vector<std::string>{"jobs", "nodes"}));
  h.on_close(a, kCloseNormal, "bye");
  EXPECT_FALSE(hub.subscribeExisting(1, {"jobs"}));
  EXPECT_EQ(hub.connectionCount(), 0u);
  EXPECT_TRUE(hub.topicsOf(1).empty());
}

TEST(EventHubTest, SplitTopics) {
  EXPECT_EQ(splitTopics("a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(splitTopics("").empty());
}

}  // namespace
}  // namespace gpool::net
