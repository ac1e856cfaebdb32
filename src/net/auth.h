#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "net/http.h"

namespace gpool::net {

// API tokens.
//
// A token is "<kind>.<id>.<secret>": `kind` is a short label ("gpt" for user API tokens, "join"
// for agent join tokens, ...), `id` is 16 lower-case hex characters (8 random bytes) that is
// stored in the clear and makes the lookup O(1), and `secret` is 32 random bytes in base64url
// without padding (43 characters). Only `hashApiToken(id, secret)` is ever stored, so a leak of
// the store does not leak usable tokens; comparison is constant-time. Randomness comes from
// OpenSSL's RAND_bytes, not gpool::Random: tokens must be unpredictable, not reproducible.
inline constexpr std::string_view kUserTokenKind = "gpt";

struct TokenParts {
  std::string kind;
  std::string id;
  std::string secret;
};

// Splits a presented token. kUnauthenticated (never naming the secret) if it is malformed.
Result<TokenParts> parseApiToken(std::string_view token);

struct NewApiToken {
  std::string id;
  std::string token;  // the full token: shown to its owner once, never stored
  std::string hash;   // what the store keeps
};

// A fresh random token of `kind` (letters and digits only). kInternal if the system's random
// source fails.
Result<NewApiToken> generateApiToken(std::string_view kind = kUserTokenKind);

// Lower-case hex SHA-256 of "<id>:<secret>". Binding the id into the hash means a stored hash
// cannot be moved to another id.
std::string hashApiToken(std::string_view id, std::string_view secret);

// Constant-time comparison of two equal-length strings (false if the lengths differ).
bool constantTimeEquals(std::string_view a, std::string_view b);

// Who a verified token belongs to.
struct TokenIdentity {
  std::string user;
  std::string token_id;
  std::vector<std::string> roles;
};

// Checks bearer tokens for the TLS listener. The controller implements it over its store; tests
// use InMemoryTokenStore.
//
// Thread-safety: `verify` is called concurrently from the server's I/O threads and must be
// thread-safe. It runs on an I/O thread, so it should answer quickly (an indexed lookup).
class TokenVerifier {
 public:
  virtual ~TokenVerifier() = default;
  // The identity for `token`, or kUnauthenticated with a message that names the problem
  // ("malformed", "unknown token id", "token revoked", "token expired") and never the secret.
  virtual Result<TokenIdentity> verify(std::string_view token) = 0;
};

// A TokenVerifier that keeps hashed tokens in memory. Thread-safe.
class InMemoryTokenStore final : public TokenVerifier {
 public:
  // Creates a token for `user`; returns it in full (the only time the secret exists).
  Result<NewApiToken> issue(std::string_view user, std::vector<std::string> roles = {},
                            std::string_view kind = kUserTokenKind);
  // Adds an already-hashed token (as a store would load it).
  void addHashed(std::string id, std::string hash, TokenIdentity identity);
  // Revokes a token by id; kNotFound if there is no such token. Later `verify` calls fail.
  Status revoke(std::string_view token_id);
  size_t size() const;

  // TokenVerifier
  Result<TokenIdentity> verify(std::string_view token) override;

 private:
  struct Entry {
    std::string hash;
    TokenIdentity identity;
    bool revoked = false;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> by_id_;  // GUARDED_BY(mu_)
};

// The bearer token of an Authorization header value ("Bearer <token>", scheme case-insensitive),
// or kUnauthenticated naming what is wrong with the header.
Result<std::string> bearerTokenFromHeader(std::string_view header_value);

// The user name for `uid` from the password database (getpwuid_r), or "#<uid>" if it has none.
std::string userNameForUid(uint32_t uid);
// The uid of user `name` in the password database (getpwnam_r), or nullopt if there is none.
std::optional<uint32_t> uidForUserName(const std::string& name);

}  // namespace gpool::net
