#include "net/http.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace gpool::net {
namespace {

std::string toLower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view methodName(Method method) {
  switch (method) {
    case Method::kGet: return "GET";
    case Method::kHead: return "HEAD";
    case Method::kPost: return "POST";
    case Method::kPut: return "PUT";
    case Method::kPatch: return "PATCH";
    case Method::kDelete: return "DELETE";
    case Method::kOptions: return "OPTIONS";
    case Method::kOther: return "OTHER";
  }
  return "OTHER";
}

Method methodFromName(std::string_view name) {
  static constexpr std::pair<std::string_view, Method> kMethods[] = {
      {"GET", Method::kGet},         {"HEAD", Method::kHead},   {"POST", Method::kPost},
      {"PUT", Method::kPut},         {"PATCH", Method::kPatch}, {"DELETE", Method::kDelete},
      {"OPTIONS", Method::kOptions},
  };
  for (const auto& [n, m] : kMethods) {
    if (n == name) return m;
  }
  return Method::kOther;
}

std::optional<std::string> Request::queryParam(std::string_view name) const {
  auto it = query.find(std::string(name));
  if (it == query.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Request::queryParams(std::string_view name) const {
  std::vector<std::string> out;
  auto [lo, hi] = query.equal_range(std::string(name));
  for (auto it = lo; it != hi; ++it)
    out.push_back(it->second);
  return out;
}

std::optional<std::string> Request::header(std::string_view name) const {
  auto it = headers.find(toLower(name));
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

std::string Request::pathParam(std::string_view name) const {
  auto it = path_params.find(std::string(name));
  return it == path_params.end() ? std::string() : it->second;
}

Response Response::json(int status, std::string json_body) {
  Response r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = std::move(json_body);
  return r;
}

Response Response::text(int status, std::string body) {
  Response r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  r.body = std::move(body);
  return r;
}

Response Response::error(const Status& status) {
  if (status.isOk()) {
    return error(500, "internal", "an error response was built from an OK status");
  }
  return error(httpStatusFor(status.code()), statusCodeName(status.code()), status.message());
}

Response Response::error(int http_status, std::string_view code, std::string_view message) {
  return json(http_status, errorBody(code, message));
}

std::optional<std::string> Response::header(std::string_view name) const {
  std::string lower = toLower(name);
  for (const auto& [k, v] : headers) {
    if (toLower(k) == lower) return v;
  }
  return std::nullopt;
}

void Response::setHeader(std::string name, std::string value) {
  std::string lower = toLower(name);
  for (auto& [k, v] : headers) {
    if (toLower(k) == lower) {
      v = std::move(value);
      return;
    }
  }
  headers.emplace_back(std::move(name), std::move(value));
}

std::string errorBody(std::string_view code, std::string_view message) {
  nlohmann::json j;
  j["error"]["code"] = std::string(code);
  j["error"]["message"] = std::string(message);
  // `replace` keeps a handler's invalid UTF-8 from turning an error into an exception.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::string> percentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) {
        return Status::invalidArgument("truncated percent escape in request target");
      }
      int hi = hexValue(in[i + 1]);
      int lo = hexValue(in[i + 2]);
      if (hi < 0 || lo < 0) {
        return Status::invalidArgument("bad percent escape in request target");
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string percentEncode(std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Status parseTarget(std::string_view target, std::string* path,
                   std::multimap<std::string, std::string>* query) {
  if (target.empty() || target.front() != '/') {
    return Status::invalidArgument("request target must start with '/'");
  }
  size_t q = target.find('?');
  std::string_view raw_path = target.substr(0, q);
  // Decoding the whole path at once would turn an escaped '/' into a separator; the router
  // matches decoded segments, which is what users expect for ids, so an encoded '/' inside a
  // segment is rejected rather than silently re-split.
  if (raw_path.find("%2F") != std::string_view::npos ||
      raw_path.find("%2f") != std::string_view::npos) {
    return Status::invalidArgument("encoded '/' in request path");
  }
  GPOOL_ASSIGN_OR_RETURN(*path, percentDecode(raw_path, false));
  query->clear();
  if (q == std::string_view::npos) return Status::ok();
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string_view k = pair.substr(0, eq);
    std::string_view v = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    GPOOL_ASSIGN_OR_RETURN(std::string key, percentDecode(k, true));
    GPOOL_ASSIGN_OR_RETURN(std::string value, percentDecode(v, true));
    query->emplace(std::move(key), std::move(value));
  }
  return Status::ok();
}

}  // namespace gpool::net
