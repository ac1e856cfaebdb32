#include "net/http.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpool::net {
namespace {

TEST(HttpTest, ParseTargetDecodesPathAndQuery) {
  std::string path;
  std::multimap<std::string, std::string> query;
  ASSERT_TRUE(parseTarget("/v1/jobs/a%20b?state=R&state=PD&user=al+ice&flag", &path, &query));
  EXPECT_EQ(path, "/v1/jobs/a b");
  EXPECT_EQ(query.count("state"), 2u);
  EXPECT_EQ(query.find("user")->second, "al ice");
  EXPECT_EQ(query.find("flag")->second, "");
}

TEST(HttpTest, ParseTargetRejectsBadTargets) {
  std::string path;
  std::multimap<std::string, std::string> query;
  EXPECT_EQ(parseTarget("v1/jobs", &path, &query).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parseTarget("/v1/%zz", &path, &query).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parseTarget("/v1/%4", &path, &query).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parseTarget("/v1/a%2Fb", &path, &query).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parseTarget("/v1?x=%", &path, &query).code(), StatusCode::kInvalidArgument);
}

TEST(HttpTest, PercentEncodeRoundTrips) {
  std::string raw = "job name/with spaces&=?%";
  std::string enc = percentEncode(raw);
  EXPECT_EQ(enc.find_first_of(" /&=?"), std::string::npos);
  auto dec = percentDecode(enc, false);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(*dec, raw);
}

TEST(HttpTest, RequestAccessors) {
  Request r;
  r.query.emplace("a", "1");
  r.query.emplace("a", "2");
  r.headers["content-type"] = "application/json";
  r.path_params["id"] = "7";
  EXPECT_EQ(r.queryParam("a"), "1");
  EXPECT_EQ(r.queryParams("a"), (std::vector<std::string>{"1", "2"}));
  EXPECT_FALSE(r.queryParam("b").has_value());
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.pathParam("id"), "7");
  EXPECT_EQ(r.pathParam("nope"), "");
}

TEST(HttpTest, ErrorResponseMapsStatusToHttpAndJsonBody) {
  Response r = Response::error(Status::notFound("job 42 does not exist"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("content-type"), "application/json");
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["error"]["code"], "not_found");
  EXPECT_EQ(j["error"]["message"], "job 42 does not exist");

  EXPECT_EQ(Response::error(Status::permissionDenied("x")).status, 403);
  EXPECT_EQ(Response::error(Status::unauthenticated("x")).status, 401);
  EXPECT_EQ(Response::error(Status::invalidArgument("x")).status, 400);
  EXPECT_EQ(Response::error(Status::internal("x")).status, 500);
}

TEST(HttpTest, ErrorBodyEscapesAndSurvivesInvalidUtf8) {
  std::string body = errorBody("invalid_argument", "field \"name\"\n bad \xff");
  auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["error"]["code"], "invalid_argument");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("field \"name\""), std::string::npos);
}

TEST(HttpTest, SetHeaderReplacesCaseInsensitively) {
  Response r = Response::json(200, "{}");
  r.setHeader("content-type", "text/plain");
  EXPECT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.header("Content-Type"), "text/plain");
}

TEST(HttpTest, MethodNames) {
  EXPECT_EQ(methodFromName("PATCH"), Method::kPatch);
  EXPECT_EQ(methodFromName("get"), Method::kOther);  // methods are case-sensitive
  EXPECT_EQ(methodFromName("BREW"), Method::kOther);
  EXPECT_EQ(methodName(Method::kDelete), "DELETE");
}

}  // namespace
}  // namespace gpool::net
