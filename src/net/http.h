#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/status.h"

// The transport's own request/response vocabulary. Nothing here depends on Boost.Beast, so
// handlers, the controller and the tests compile without its headers; the server and client
// (server.cc, client.cc) translate between these types and Beast's.
namespace gpool::net {

enum class Method { kGet, kHead, kPost, kPut, kPatch, kDelete, kOptions, kOther };

// "GET", "POST", ...; "OTHER" for kOther.
std::string_view methodName(Method method);
// The Method for an HTTP method token; kOther for anything unknown (the router answers 405).
Method methodFromName(std::string_view name);

// Who sent a request, as established by the listener that received it: never by a header the
// client chose. Unix-socket peers are identified by the kernel (SO_PEERCRED); TLS peers by a
// verified bearer token.
struct PeerIdentity {
  enum class Kind {
    kAnonymous,  // TLS request without a token (only routes marked allow_anonymous see these)
    kUnixPeer,   // uid/gid/pid from the kernel; `user` from the password database
    kToken,      // a verified API token; `user` and `token_id` from the TokenVerifier
  };
  Kind kind = Kind::kAnonymous;
  uint32_t uid = 0;                // kUnixPeer only
  uint32_t gid = 0;                // kUnixPeer only
  int32_t pid = 0;                 // kUnixPeer only
  std::string user;                // empty for kAnonymous; "#<uid>" when a uid has no passwd entry
  std::string token_id;            // kToken only: the public id of the token used
  std::vector<std::string> roles;  // kToken only: what the verifier attached (may be empty)

  bool authenticated() const { return kind != Kind::kAnonymous; }
};

// One parsed HTTP request, as handed to a handler. Header names are lower-cased; repeated
// headers are joined with ", ". Path and query are percent-decoded.
struct Request {
  Method method = Method::kGet;
  std::string method_name;                         // the token as received, e.g. "PATCH"
  std::string target;                              // raw request target: "/v1/jobs?state=R"
  std::string path;                                // decoded path without the query: "/v1/jobs"
  std::multimap<std::string, std::string> query;   // decoded; repeated keys kept in order
  std::map<std::string, std::string> headers;      // lower-case names
  std::map<std::string, std::string> path_params;  // from the route pattern: {"id": "42"}
  std::string body;
  PeerIdentity peer;
  std::string request_id;  // unique per request; echoed as X-Request-Id and in 500 logs

  // The first value of query parameter `name`, if present.
  std::optional<std::string> queryParam(std::string_view name) const;
  // Every value of query parameter `name`, in order.
  std::vector<std::string> queryParams(std::string_view name) const;
  // The value of header `name` (any case), if present.
  std::optional<std::string> header(std::string_view name) const;
  // The value of path parameter `name`; empty if the route has none of that name.
  std::string pathParam(std::string_view name) const;
};

// What a handler returns. The server adds Content-Length, Date-free framing and keep-alive
// headers; a non-empty body without a Content-Type header is sent as application/json.
struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // A JSON response; `json_body` must already be serialised JSON.
  static Response json(int status, std::string json_body);
  static Response text(int status, std::string body);
  // The JSON error body for a non-OK `status`, with httpStatusFor(status.code()).
  static Response error(const Status& status);
  // A transport-level error that has no StatusCode of its own (405, 413, 431, ...).
  static Response error(int http_status, std::string_view code, std::string_view message);

  // The value of header `name` (any case), if set.
  std::optional<std::string> header(std::string_view name) const;
  void setHeader(std::string name, std::string value);
};

// {"error": {"code": "<code>", "message": "<message>"}}, JSON-escaped.
std::string errorBody(std::string_view code, std::string_view message);

// Splits a request target into a decoded path and decoded query parameters. Fails with
// kInvalidArgument (naming the problem) when the target does not start with '/' or has a bad
// percent escape.
Status parseTarget(std::string_view target, std::string* path,
                   std::multimap<std::string, std::string>* query);

// Percent-decodes `in`; when `plus_is_space` ('+' in query strings) '+' becomes ' '.
Result<std::string> percentDecode(std::string_view in, bool plus_is_space);
// Percent-encodes everything but unreserved characters (RFC 3986), for building targets.
std::string percentEncode(std::string_view in);

}  // namespace gpool::net
