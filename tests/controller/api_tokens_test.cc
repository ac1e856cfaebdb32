// The store-backed token verifier with an injected clock: issue, use, revoke, expire; agent
// credentials are refused by the REST routes.
#include "controller/api_tokens.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "controller/api_fixture.h"

namespace gpool::controller::testing {
namespace {

using net::Method;

class ApiTokensTest : public ApiTest {
 protected:
  // Creates a token as `as` with `body`; returns the token text.
  std::string create(const std::string& as, const std::string& body) {
    auto r = call(as, Method::kPost, "/v1/tokens", body);
    EXPECT_EQ(r.status, 201) << r.body;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    return j.is_object() ? j.value("token", "") : "";
  }
};

TEST_F(ApiTokensTest, VerifiesUntilRevokedOrExpired) {
  StoreTokenVerifier verifier(*store_, clock_);
  std::string token = create("alice", R"({"name":"laptop","expires_in":"2h"})");
  ASSERT_EQ(token.rfind("gpt.", 0), 0u) << token;
  auto id = verifier.verify(token);
  ASSERT_TRUE(id.ok()) << id.status().toString();
  EXPECT_EQ(id->user, "alice");
  EXPECT_TRUE(id->roles.empty());
  // Only the hash is stored; the listing shows the token without its text, with last_used.
  auto listed = call("alice", Method::kGet, "/v1/tokens");
  ASSERT_EQ(listed.status, 200);
  auto list = nlohmann::json::parse(listed.body)["tokens"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_FALSE(list[0].contains("token"));
  EXPECT_EQ(list[0]["name"], "laptop");
  EXPECT_TRUE(list[0].contains("last_used_us"));
  EXPECT_EQ(listed.body.find(token.substr(token.rfind('.') + 1)), std::string::npos);
  // A wrong secret for a real id is unknown.
  std::string forged = token.substr(0, token.rfind('.') + 1) + std::string(43, 'A');
  EXPECT_EQ(verifier.verify(forged).status().code(), StatusCode::kUnauthenticated);

  clock_.advance(std::chrono::hours(2));
  auto expired = verifier.verify(token);
  EXPECT_EQ(expired.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(expired.status().message().find("expired"), std::string::npos);

  std::string other = create("alice", "");
  ASSERT_TRUE(verifier.verify(other).ok());
  int64_t other_id = list[0]["id"].get<int64_t>() + 1;
  EXPECT_EQ(call("bob", Method::kDelete, "/v1/tokens/" + std::to_string(other_id)).status, 403);
  EXPECT_EQ(call("alice", Method::kDelete, "/v1/tokens/" + std::to_string(other_id)).status, 200);
  auto revoked = verifier.verify(other);
  EXPECT_EQ(revoked.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(revoked.status().message().find("revoked"), std::string::npos);
  EXPECT_EQ(call("alice", Method::kDelete, "/v1/tokens/999").status, 404);
}

TEST_F(ApiTokensTest, BadInputNamesTheField) {
  auto r = call("alice", Method::kPost, "/v1/tokens", R"({"expires_in":"soon"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("body.expires_in"), std::string::npos) << r.body;
  r = call("alice", Method::kPost, "/v1/tokens", R"({"nmae":"x"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("body.nmae"), std::string::npos) << r.body;
  r = call("root", Method::kPost, "/v1/join-tokens", R"({"reusable":"yes"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("body.reusable"), std::string::npos) << r.body;
}

TEST_F(ApiTokensTest, JoinTokensOpenNoRestRoute) {
  StoreTokenVerifier verifier(*store_, clock_);
  auto r = call("root", Method::kPost, "/v1/join-tokens", R"({"expires_in":"1h"})");
  ASSERT_EQ(r.status, 201) << r.body;
  std::string join = nlohmann::json::parse(r.body)["token"];
  ASSERT_EQ(join.rfind("join.", 0), 0u);
  auto id = verifier.verify(join);
  ASSERT_TRUE(id.ok()) << id.status().toString();
  ASSERT_EQ(id->roles.size(), 1u);
  EXPECT_EQ(id->roles[0], kAgentJoinRole);
  net::PeerIdentity peer;
  peer.kind = net::PeerIdentity::Kind::kToken;
  peer.user = id->user;
  peer.roles = id->roles;
  EXPECT_EQ(callerFor(*store_, peer).status().code(), StatusCode::kPermissionDenied);
  // A join token's default life is an hour.
  clock_.advance(std::chrono::hours(1));
  EXPECT_EQ(verifier.verify(join).status().code(), StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace gpool::controller::testing
