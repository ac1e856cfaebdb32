#include "net/auth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

namespace gpool::net {
namespace {

TEST(AuthTest, GeneratedTokensHaveTheDocumentedShape) {
  auto t = generateApiToken();
  ASSERT_TRUE(t.ok());
  auto parts = parseApiToken(t->token);
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  EXPECT_EQ(parts->kind, "gpt");
  EXPECT_EQ(parts->id, t->id);
  EXPECT_EQ(parts->id.size(), 16u);
  EXPECT_EQ(parts->secret.size(), 43u);  // 32 bytes in unpadded base64url
  EXPECT_EQ(t->hash, hashApiToken(parts->id, parts->secret));
  EXPECT_EQ(t->hash.size(), 64u);
  EXPECT_EQ(t->hash.find(parts->secret), std::string::npos);
}

TEST(AuthTest, TokensAreDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto t = generateApiToken("join");
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(seen.insert(t->token).second);
    EXPECT_EQ(t->token.rfind("join.", 0), 0u);
  }
  EXPECT_FALSE(generateApiToken("bad.kind").ok());
}

TEST(AuthTest, HashBindsTheId) {
  EXPECT_NE(hashApiToken("0000000000000001", "s"), hashApiToken("0000000000000002", "s"));
  // Known answer: SHA-256("a:b").
  EXPECT_EQ(hashApiToken("a", "b"),
            "6783a31eabf68ccc0660f935c0826282bdd2241f3a80a9f2d10d59aea9ebb5d8");
}

TEST(AuthTest, MalformedTokensAreRejected) {
  for (const char* bad : {"", "abc", "gpt.123.x", "gpt..", "gpt.0123456789abcdeg.AAAA",
                          "gpt.0123456789ABCDEF.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}) {
    EXPECT_EQ(parseApiToken(bad).status().code(), StatusCode::kUnauthenticated) << bad;
  }
}

TEST(AuthTest, InMemoryStoreVerifiesAndRevokes) {
  InMemoryTokenStore store;
  auto t = store.issue("alice", {"admin"});
  ASSERT_TRUE(t.ok());
  auto id = store.verify(t->token);
  ASSERT_TRUE(id.ok()) << id.status().toString();
  EXPECT_EQ(id->user, "alice");
  EXPECT_EQ(id->token_id, t->id);
  EXPECT_EQ(id->roles, std::vector<std::string>{"admin"});

  // Same id, wrong secret.
  std::string forged = t->token;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  auto bad = store.verify(forged);
  EXPECT_EQ(bad.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(bad.status().message().find(t->token.substr(t->token.rfind('.') + 1)),
            std::string::npos);  // never echoes the secret

  auto other = generateApiToken();
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(store.verify(other->token).status().code(), StatusCode::kUnauthenticated);

  ASSERT_TRUE(store.revoke(t->id));
  EXPECT_EQ(store.verify(t->token).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(store.revoke("ffffffffffffffff").code(), StatusCode::kNotFound);
}

TEST(AuthTest, StoreLoadsHashedTokens) {
  auto t = generateApiToken();
  ASSERT_TRUE(t.ok());
  InMemoryTokenStore store;
  store.addHashed(t->id, t->hash, TokenIdentity{"bob", "", {}});
  auto id = store.verify(t->token);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->user, "bob");
  EXPECT_EQ(id->token_id, t->id);
}

TEST(AuthTest, StoreIsThreadSafe) {
  InMemoryTokenStore store;
  auto t = store.issue("alice");
  ASSERT_TRUE(t.ok());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        if (store.verify(t->token).ok()) ok.fetch_add(1);
        (void)store.issue("x");
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(ok.load(), 800);
  EXPECT_EQ(store.size(), 801u);
}

TEST(AuthTest, BearerHeader) {
  EXPECT_EQ(*bearerTokenFromHeader("Bearer abc"), "abc");
  EXPECT_EQ(*bearerTokenFromHeader("bearer   abc "), "abc");
  EXPECT_EQ(bearerTokenFromHeader("Basic abc").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(bearerTokenFromHeader("Bearer ").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(bearerTokenFromHeader("Bearer    ").status().code(), StatusCode::kUnauthenticated);
}

TEST(AuthTest, UserNameForUid) {
  EXPECT_EQ(userNameForUid(0), "root");
  EXPECT_EQ(userNameForUid(4'000'000'000u), "#4000000000");
}

}  // namespace
}  // namespace gpool::net
