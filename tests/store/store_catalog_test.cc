#include <gtest/gtest.h>

#include "store/store_test_fixture.h"

namespace gpool::store::testing {
namespace {

using CatalogTest = StoreTest;

TEST_P(CatalogTest, NodesAndGpus) {
  ASSERT_TRUE(store().upsertNode({"node-b", "IDLE", R"({"cpus":64})", at(1)}).isOk());
  ASSERT_TRUE(store().upsertNode({"node-a", "DOWN", "{}", std::nullopt}).isOk());
  ASSERT_TRUE(store().upsertNode({"node-b", "DRAINING", R"({"cpus":64})", at(9)}).isOk());
  auto nodes = store().listNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ(nodes->at(0).name, "node-a");
  EXPECT_FALSE(nodes->at(0).last_heartbeat.has_value());
  EXPECT_EQ(nodes->at(1).state, "DRAINING");
  EXPECT_EQ(nodes->at(1).last_heartbeat, at(9));
  EXPECT_EQ(store().getNode("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store().upsertNode({"", "IDLE", "{}", std::nullopt}).code(),
            StatusCode::kInvalidArgument);

  ASSERT_TRUE(store().upsertGpu({"GPU-b1", "node-b", 1, "H100", 81559, "{}"}).isOk());
  ASSERT_TRUE(store().upsertGpu({"GPU-b0", "node-b", 0, "H100", 81559, "{}"}).isOk());
  ASSERT_TRUE(store().upsertGpu({"GPU-a0", "node-a", 0, "A100", 40960, "{}"}).isOk());
  EXPECT_EQ(store().upsertGpu({"GPU-x", "ghost", 0, "A100", 1, "{}"}).code(),
            StatusCode::kNotFound);
  auto gpus = store().listGpus("node-b");
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ(gpus->at(0).uuid, "GPU-b0");
  EXPECT_EQ(gpus->at(0).memory_mib, 81559u);
  EXPECT_EQ(store().listGpus("")->size(), 3u);

  ASSERT_TRUE(store().deleteNode("node-b").isOk());
  EXPECT_EQ(store().listGpus("")->size(), 1u);
  EXPECT_EQ(store().deleteNode("node-b").code(), StatusCode::kNotFound);
}

TEST_P(CatalogTest, UsersGroupsAndQuotasWithAudit) {
  EXPECT_EQ(store().setQuota({QuotaSubject::kUser, "alice", "{}", at(0)}, "root").code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(store().upsertUser({"alice", 1000, "user", R"({"email":"a@x"})"}).isOk());
  ASSERT_TRUE(store().upsertUser({"root", 0, "admin", "{}"}).isOk());
  ASSERT_TRUE(store().upsertUser({"alice", 1000, "group-admin", "{}"}).isOk());
  ASSERT_TRUE(store().upsertGroup({"gpu", 999, "{}"}).isOk());
  auto alice = store().getUser("alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->role, "group-admin");
  EXPECT_EQ(alice->uid, 1000);
  EXPECT_EQ(store().listUsers()->size(), 2u);
  EXPECT_EQ(store().getUser("bob").status().code(), StatusCode::kNotFound);
  auto group = store().getGroup("gpu");
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->gid, 999);
  EXPECT_EQ(store().listGroups()->size(), 1u);

  ASSERT_TRUE(
      store().setQuota({QuotaSubject::kUser, "alice", R"({"max_gpus":2})", at(1)}, "root").isOk());
  ASSERT_TRUE(
      store().setQuota({QuotaSubject::kUser, "alice", R"({"max_gpus":4})", at(2)}, "root").isOk());
  ASSERT_TRUE(store()
                  .setQuota({QuotaSubject::kGroup, "gpu", R"({"gpu_hours":100})", at(3)}, "root")
                  .isOk());
  EXPECT_EQ(store().setQuota({QuotaSubject::kGroup, "alice", "{}", at(3)}, "root").code(),
            StatusCode::kNotFound);
  auto q = store().getQuota(QuotaSubject::kUser, "alice");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->limits_json, R"({"max_gpus":4})");
  EXPECT_EQ(q->updated, at(2));
  EXPECT_EQ(store().listQuotas()->size(), 2u);

  auto audit = store().auditEvents(0, 100);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 3u);
  EXPECT_EQ(audit->at(0).actor, "root");
  EXPECT_EQ(audit->at(0).action, "set_quota");
  EXPECT_EQ(audit->at(0).subject, "user:alice");
  EXPECT_EQ(audit->at(1).detail, R"({"max_gpus":4})");
  EXPECT_EQ(audit->at(2).subject, "group:gpu");
  auto after = store().auditEvents(audit->at(1).seq, 100);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 1u);
}

TEST_P(CatalogTest, Qos) {
  ASSERT_TRUE(store().upsertQos({"normal", 0, "{}"}).isOk());
  ASSERT_TRUE(store().upsertQos({"high", 100, R"({"preempt":["normal"]})"}).isOk());
  ASSERT_TRUE(store().upsertQos({"high", 200, R"({"preempt":["normal"]})"}).isOk());
  auto all = store().listQos();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(all->at(0).name, "high");
  EXPECT_EQ(all->at(0).priority, 200);
}

// Deleting a user or group takes its quota with it; deleting a quota is audited.
TEST_P(CatalogTest, DeletesUsersGroupsQuotasAndQos) {
  ASSERT_TRUE(store().upsertUser({"alice", 1000, "user", "{}"}).isOk());
  ASSERT_TRUE(store().upsertGroup({"gpu", 999, "{}"}).isOk());
  ASSERT_TRUE(store().upsertQos({"high", 100, "{}"}).isOk());
  ASSERT_TRUE(store().setQuota({QuotaSubject::kUser, "alice", "{}", at(1)}, "root").isOk());
  ASSERT_TRUE(store().setQuota({QuotaSubject::kGroup, "gpu", "{}", at(1)}, "root").isOk());

  ASSERT_TRUE(store().deleteQuota(QuotaSubject::kGroup, "gpu", "root", at(2)).isOk());
  EXPECT_EQ(store().deleteQuota(QuotaSubject::kGroup, "gpu", "root", at(2)).code(),
            StatusCode::kNotFound);
  auto audit = store().auditEvents(0, 100);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 3u);
  EXPECT_EQ(audit->back().action, "delete_quota");
  EXPECT_EQ(audit->back().subject, "group:gpu");

  ASSERT_TRUE(store().deleteUser("alice").isOk());
  EXPECT_EQ(store().getUser("alice").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store().getQuota(QuotaSubject::kUser, "alice").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store().deleteUser("alice").code(), StatusCode::kNotFound);
  ASSERT_TRUE(store().deleteGroup("gpu").isOk());
  EXPECT_EQ(store().deleteGroup("gpu").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store().listGroups()->empty());
  ASSERT_TRUE(store().deleteQos("high").isOk());
  EXPECT_EQ(store().deleteQos("high").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store().listQos()->empty());
}

TEST_P(CatalogTest, ApiTokensAreFoundByHashAndRevocable) {
  TokenRecord t;
  t.user = "alice";
  t.hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  t.description = "laptop";
  t.created = at(0);
  t.expires = at(86400);
  auto id = store().createToken(t, "admin");
  ASSERT_TRUE(id.ok()) << id.status().toString();
  EXPECT_EQ(store().createToken(t, "admin").status().code(), StatusCode::kAlreadyExists);
  t.hash = "other";
  t.expires.reset();
  auto id2 = store().createToken(t, "admin");
  ASSERT_TRUE(id2.ok());
  EXPECT_NE(*id, *id2);

  auto found =
      store().findToken("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->id, *id);
  EXPECT_EQ(found->user, "alice");
  EXPECT_EQ(found->expires, at(86400));
  EXPECT_FALSE(found->revoked.has_value());
  EXPECT_EQ(store().findToken("missing").status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(store().revokeToken(*id, at(50), "alice").isOk());
  // Revoking twice keeps the first time.
  ASSERT_TRUE(store().revokeToken(*id, at(60), "alice").isOk());
  found = store().findToken("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->revoked, at(50));
  EXPECT_EQ(store().revokeToken(999999, at(60), "alice").code(), StatusCode::kNotFound);
  EXPECT_EQ(store().listTokens("alice")->size(), 2u);
  EXPECT_TRUE(store().listTokens("bob")->empty());
  EXPECT_EQ(found->kind, "user");
  EXPECT_FALSE(found->last_used.has_value());
  ASSERT_TRUE(store().touchToken(*id2, at(70)).isOk());
  EXPECT_EQ(store().getToken(*id2)->last_used, at(70));
  EXPECT_EQ(store().getToken(999999).status().code(), StatusCode::kNotFound);
  // Creation and revocation are audited (never with the hash).
  auto audit = store().auditEvents(0, 100);
  ASSERT_TRUE(audit.ok());
  int created = 0, revoked = 0;
  for (const AuditEvent& e : *audit) {
    if (e.action == "create_token") ++created;
    if (e.action == "revoke_token") ++revoked;
    EXPECT_EQ(e.detail.find(t.hash), std::string::npos);
  }
  EXPECT_EQ(created, 2);
  EXPECT_EQ(revoked, 2);
}

TEST_P(CatalogTest, JoinTokensAdmitNodesOnceAndNodeCredentialsAreUnique) {
  TokenRecord join;
  join.kind = kTokenKindJoin;
  join.user = "root";
  join.hash = "join-hash";
  join.public_id = "00112233aabbccdd";
  join.created = at(0);
  join.expires = at(3600);
  auto join_id = store().createToken(join, "root");
  ASSERT_TRUE(join_id.ok()) << join_id.status().toString();
  auto cred = [](const std::string& node, const std::string& hash) {
    TokenRecord c;
    c.kind = kTokenKindNode;
    c.user = node;
    c.node = node;
    c.hash = hash;
    c.created = at(10);
    return c;
  };
  auto first = store().joinNode(*join_id, cred("gpu-01", "h1"), at(10));
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_EQ(store().getToken(*first)->node, "gpu-01");
  EXPECT_EQ(store().getToken(*join_id)->uses, 1);
  // One-time: a second node is refused.
  EXPECT_EQ(store().joinNode(*join_id, cred("gpu-02", "h2"), at(20)).status().code(),
            StatusCode::kFailedPrecondition);

  join.hash = "join-hash-2";
  join.reusable = true;
  auto reusable = store().createToken(join, "root");
  ASSERT_TRUE(reusable.ok());
  ASSERT_TRUE(store().joinNode(*reusable, cred("gpu-02", "h2"), at(20)).ok());
  // A node that has joined cannot join again while its credential stands ...
  EXPECT_EQ(store().joinNode(*reusable, cred("gpu-01", "h3"), at(30)).status().code(),
            StatusCode::kAlreadyExists);
  // ... but can once it is revoked.
  ASSERT_TRUE(store().revokeToken(*first, at(40), "root").isOk());
  EXPECT_TRUE(store().joinNode(*reusable, cred("gpu-01", "h3"), at(40)).ok());
  // Expired and revoked join tokens admit nobody.
  EXPECT_EQ(store().joinNode(*reusable, cred("gpu-03", "h4"), at(3600)).status().code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store().revokeToken(*reusable, at(50), "root").isOk());
  EXPECT_EQ(store().joinNode(*reusable, cred("gpu-03", "h4"), at(60)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().listTokens("").value().size(), 5u);
}

INSTANTIATE_TEST_SUITE_P(Backends, CatalogTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), backendName);

}  // namespace
}  // namespace gpool::store::testing
