#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "net/auth.h"
#include "net/router.h"
#include "store/store.h"

// Bearer tokens of the TLS listener, kept in the store only as hashes (net/auth.h):
//   - users' API tokens ("gpt.<id>.<secret>"): the request runs as the token's owner, with the
//     role of the owner's user record, exactly as for a Unix-socket peer of that name;
//   - agents' join tokens ("join.<id>.<secret>", admin-made, one-time or reusable, with an
//     expiry): open only /v1/agent, where the first hello turns them into a node credential;
//   - node credentials ("node.<id>.<secret>"): open only /v1/agent, for their own node.
// Routes (docs/openapi.json; docs/admin-guide.md):
//   POST /v1/tokens          create one for yourself (admins: for anyone); the text is in the
//                            answer once and never again
//   GET  /v1/tokens          your own tokens (admins: every token, join tokens and node
//                            credentials included)
//   DELETE /v1/tokens/{id}   revoke one of yours (admins: any)
//   POST /v1/join-tokens     admins: a join token for agents
// Creation, revocation and joins are audit events in the store (create_token, revoke_token,
// join_node).
namespace gpool::controller {

inline constexpr std::string_view kJoinTokenKind = "join";
inline constexpr std::string_view kNodeTokenKind = "node";
// The roles a verified join token / node credential carries in net::PeerIdentity::roles. REST
// routes refuse them (callerFor); only /v1/agent accepts them.
inline constexpr std::string_view kAgentJoinRole = "agent-join";
inline constexpr std::string_view kAgentNodeRole = "agent-node";

// Checks bearer tokens against the store: unknown, malformed, revoked or expired tokens (and
// used-up one-time join tokens) are kUnauthenticated naming which. Records last_used at most
// once a minute per token, so that a busy client does not turn every request into a write.
//
// Thread-safety: `verify` may be called from any thread (the server's I/O threads).
class StoreTokenVerifier final : public net::TokenVerifier {
 public:
  // `store` and `clock` must outlive the verifier.
  StoreTokenVerifier(store::Store& store, Clock& clock);
  Result<net::TokenIdentity> verify(std::string_view token) override;

 private:
  store::Store& store_;
  Clock& clock_;
  std::mutex mu_;
  std::map<int64_t, TimePoint> touched_;  // GUARDED_BY(mu_): last last_used write per token
};

// A fresh node credential for `node` (store record and token text). kInternal if the random
// source fails.
struct NewNodeCredential {
  store::TokenRecord record;
  std::string token;
};
Result<NewNodeCredential> makeNodeCredential(const std::string& node, TimePoint now);

// The id of the store record behind a verified token (net::PeerIdentity::token_id).
Result<int64_t> tokenRecordId(std::string_view token_id);

}  // namespace gpool::controller
