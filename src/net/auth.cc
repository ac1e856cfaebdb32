#include "net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pwd.h>
#include <unistd.h>

#include <cctype>

#include "common/base64.h"

namespace gpool::net {
namespace {

constexpr size_t kIdBytes = 8;
constexpr size_t kSecretBytes = 32;

std::string toHex(const unsigned char* data, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 15]);
  }
  return out;
}

bool isBase64Url(std::string_view s) {
  for (unsigned char c : s) {
    if (!std::isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

bool isLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

Result<TokenParts> parseApiToken(std::string_view token) {
  size_t a = token.find('.');
  size_t b = a == std::string_view::npos ? a : token.find('.', a + 1);
  if (a == std::string_view::npos || b == std::string_view::npos) {
    return Status::unauthenticated("malformed API token: expected <kind>.<id>.<secret>");
  }
  TokenParts p{std::string(token.substr(0, a)), std::string(token.substr(a + 1, b - a - 1)),
               std::string(token.substr(b + 1))};
  if (p.kind.empty() || p.id.size() != kIdBytes * 2 || !isLowerHex(p.id) || p.secret.size() != 43 ||
      !isBase64Url(p.secret) || !isBase64Url(p.kind)) {
    return Status::unauthenticated("malformed API token: expected <kind>.<id>.<secret>");
  }
  return p;
}

Result<NewApiToken> generateApiToken(std::string_view kind) {
  if (kind.empty() || !isBase64Url(kind) || kind.find('_') != std::string_view::npos ||
      kind.find('-') != std::string_view::npos) {
    return Status::invalidArgument("token kind must be letters and digits");
  }
  unsigned char id[kIdBytes];
  unsigned char secret[kSecretBytes];
  if (RAND_bytes(id, sizeof(id)) != 1 || RAND_bytes(secret, sizeof(secret)) != 1) {
    return Status::internal("RAND_bytes failed: no secure random source for API tokens");
  }
  NewApiToken t;
  t.id = toHex(id, sizeof(id));
  std::string secret_b64 =
      base64UrlEncode(std::string_view(reinterpret_cast<const char*>(secret), sizeof(secret)));
  t.token = std::string(kind) + "." + t.id + "." + secret_b64;
  t.hash = hashApiToken(t.id, secret_b64);
  OPENSSL_cleanse(secret, sizeof(secret));
  return t;
}

std::string hashApiToken(std::string_view id, std::string_view secret) {
  std::string input;
  input.reserve(id.size() + 1 + secret.size());
  input.append(id).push_back(':');
  input.append(secret);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), digest, &len, EVP_sha256(), nullptr);
  OPENSSL_cleanse(input.data(), input.size());
  return toHex(digest, len);
}

bool constantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<NewApiToken> InMemoryTokenStore::issue(std::string_view user, std::vector<std::string> roles,
                                              std::string_view kind) {
  GPOOL_ASSIGN_OR_RETURN(NewApiToken t, generateApiToken(kind));
  addHashed(t.id, t.hash, TokenIdentity{std::string(user), t.id, std::move(roles)});
  return t;
}

void InMemoryTokenStore::addHashed(std::string id, std::string hash, TokenIdentity identity) {
  std::lock_guard<std::mutex> lock(mu_);
  identity.token_id = id;
  by_id_[std::move(id)] = Entry{std::move(hash), std::move(identity), false};
}

Status InMemoryTokenStore::revoke(std::string_view token_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(std::string(token_id));
  if (it == by_id_.end()) {
    return Status::notFound("no API token with id '" + std::string(token_id) + "'");
  }
  it->second.revoked = true;
  return Status::ok();
}

size_t InMemoryTokenStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_id_.size();
}

Result<TokenIdentity> InMemoryTokenStore::verify(std::string_view token) {
  GPOOL_ASSIGN_OR_RETURN(TokenParts parts, parseApiToken(token));
  std::string hash = hashApiToken(parts.id, parts.secret);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(parts.id);
  if (it == by_id_.end()) return Status::unauthenticated("unknown API token id " + parts.id);
  if (!constantTimeEquals(it->second.hash, hash)) {
    return Status::unauthenticated("wrong secret for API token " + parts.id);
  }
  if (it->second.revoked) return Status::unauthenticated("API token " + parts.id + " is revoked");
  return it->second.identity;
}

Result<std::string> bearerTokenFromHeader(std::string_view value) {
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size()) {
    return Status::unauthenticated("Authorization header must be 'Bearer <token>'");
  }
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) {
      return Status::unauthenticated("Authorization header must be 'Bearer <token>'");
    }
  }
  std::string_view token = value.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ')
    token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ')
    token.remove_suffix(1);
  if (token.empty()) return Status::unauthenticated("Authorization header has an empty token");
  return std::string(token);
}

std::string userNameForUid(uint32_t uid) {
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::string buf(size > 0 ? static_cast<size_t>(size) : 16384, '\0');
  struct passwd pw;
  struct passwd* result = nullptr;
  for (int attempt = 0; attempt < 4; ++attempt) {
    int rc = getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &result);
    if (rc == ERANGE) {
      buf.resize(buf.size() * 4);
      continue;
    }
    if (rc == 0 && result != nullptr) return std::string(result->pw_name);
    break;
  }
  return "#" + std::to_string(uid);
}

std::optional<uint32_t> uidForUserName(const std::string& name) {
  if (name.empty()) return std::nullopt;
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::string buf(size > 0 ? static_cast<size_t>(size) : 16384, '\0');
  struct passwd pw;
  struct passwd* result = nullptr;
  for (int attempt = 0; attempt < 4; ++attempt) {
    int rc = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &result);
    if (rc == ERANGE) {
      buf.resize(buf.size() * 4);
      continue;
    }
    if (rc == 0 && result != nullptr) return static_cast<uint32_t>(result->pw_uid);
    break;
  }
  return std::nullopt;
}

}  // namespace gpool::net
