#include "net/router.h"

#include <gtest/gtest.h>

namespace gpool::net {
namespace {

Handler named(std::string name) {
  return [name](const Request&) { return Response::text(200, name); };
}

TEST(RouterTest, MatchesLiteralsAndParameters) {
  Router r;
  ASSERT_TRUE(r.add(Method::kGet, "/v1/jobs", named("list")));
  ASSERT_TRUE(r.add(Method::kGet, "/v1/jobs/{id}", named("show")));
  ASSERT_TRUE(r.add(Method::kGet, "/v1/jobs/{id}/events/{seq}", named("event")));

  auto m = r.match(Method::kGet, "/v1/jobs/42/events/7", false);
  ASSERT_EQ(m.kind, Router::Match::Kind::kFound);
  EXPECT_EQ(m.route->handler(Request{}).body, "event");
  EXPECT_EQ(m.params.at("id"), "42");
  EXPECT_EQ(m.params.at("seq"), "7");

  m = r.match(Method::kGet, "/v1/jobs/", false);  // trailing slash ignored
  ASSERT_EQ(m.kind, Router::Match::Kind::kFound);
  EXPECT_EQ(m.route->handler(Request{}).body, "list");

  EXPECT_EQ(r.match(Method::kGet, "/v1/nodes", false).kind, Router::Match::Kind::kNotFound);
  EXPECT_EQ(r.match(Method::kGet, "/v1/jobs/1/2", false).kind, Router::Match::Kind::kNotFound);
}

TEST(RouterTest, LiteralBeatsParameter) {
  Router r;
  ASSERT_TRUE(r.add(Method::kGet, "/v1/jobs/{id}", named("show")));
  ASSERT_TRUE(r.add(Method::kGet, "/v1/jobs/summary", named("summary")));
  auto m = r.match(Method::kGet, "/v1/jobs/summary", false);
  ASSERT_EQ(m.kind, Router::Match::Kind::kFound);
  EXPECT_EQ(m.route->handler(Request{}).body, "summary");
  m = r.match(Method::kGet, "/v1/jobs/17", false);
  EXPECT_EQ(m.route->handler(Request{}).body, "show");
}

TEST(RouterTest, WrongMethodListsAllowedMethods) {
  Router r;
  ASSERT_TRUE(r.add(Method::kGet, "/v1/jobs/{id}", named("show")));
  ASSERT_TRUE(r.add(Method::kDelete, "/v1/jobs/{id}", named("cancel")));
  auto m = r.match(Method::kPost, "/v1/jobs/3", false);
  EXPECT_EQ(m.kind, Router::Match::Kind::kMethodNotAllowed);
  EXPECT_EQ(m.allow, "GET, DELETE");
  EXPECT_EQ(r.match(Method::kOther, "/v1/jobs/3", false).kind,
            Router::Match::Kind::kMethodNotAllowed);
}

TEST(RouterTest, WebSocketRoutesAreSeparate) {
  Router r;
  ASSERT_TRUE(r.add(Method::kGet, "/v1/events", named("http")));
  ASSERT_TRUE(r.addWebSocket("/v1/events", WebSocketHandler{}));
  auto m = r.match(Method::kGet, "/v1/events", true);
  ASSERT_EQ(m.kind, Router::Match::Kind::kFound);
  EXPECT_TRUE(m.route->is_websocket);
  m = r.match(Method::kGet, "/v1/events", false);
  ASSERT_EQ(m.kind, Router::Match::Kind::kFound);
  EXPECT_FALSE(m.route->is_websocket);
}

TEST(RouterTest, RejectsBadPatternsAndDuplicates) {
  Router r;
  EXPECT_EQ(r.add(Method::kGet, "v1/jobs", named("x")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.add(Method::kGet, "/v1/{}", named("x")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.add(Method::kGet, "/v1/{id", named("x")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.add(Method::kGet, "/v1/a{id}", named("x")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.add(Method::kGet, "/v1/{id}/{id}", named("x")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.add(Method::kGet, "/v1/x", Handler{}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.add(Method::kGet, "/v1/{a}", named("x")));
  EXPECT_EQ(r.add(Method::kGet, "/v1/{b}", named("y")).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(r.add(Method::kPost, "/v1/{b}", named("y")));
  EXPECT_EQ(r.size(), 2u);
}

}  // namespace
}  // namespace gpool::net
