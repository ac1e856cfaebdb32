#include "net/router.h"

#include <set>

namespace gpool::net {
namespace {

std::vector<std::string_view> splitPath(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool isParam(std::string_view seg) {
  return seg.size() >= 2 && seg.front() == '{' && seg.back() == '}';
}

}  // namespace

Status Router::add(Method method, std::string_view pattern, Handler handler, RouteOptions options) {
  if (!handler) return Status::invalidArgument("route " + std::string(pattern) + ": no handler");
  Route r;
  r.method = method;
  r.pattern = std::string(pattern);
  r.handler = std::move(handler);
  r.options = options;
  return addRoute(std::move(r));
}

Status Router::addWebSocket(std::string_view pattern, WebSocketHandler handler,
                            RouteOptions options) {
  Route r;
  r.method = Method::kGet;
  r.pattern = std::string(pattern);
  r.websocket = std::move(handler);
  r.is_websocket = true;
  r.options = options;
  return addRoute(std::move(r));
}

Status Router::addRoute(Route route) {
  const std::string& pattern = route.pattern;
  if (pattern.empty() || pattern.front() != '/') {
    return Status::invalidArgument("route pattern '" + pattern + "' must start with '/'");
  }
  std::set<std::string> names;
  for (std::string_view seg : splitPath(pattern)) {
    bool has_brace =
        seg.find('{') != std::string_view::npos || seg.find('}') != std::string_view::npos;
    if (has_brace && !isParam(seg)) {
      return Status::invalidArgument("route pattern '" + pattern + "': segment '" +
                                     std::string(seg) + "' must be a literal or {name}");
    }
    if (isParam(seg)) {
      std::string name(seg.substr(1, seg.size() - 2));
      if (name.empty() || name.find_first_of("{}") != std::string::npos) {
        return Status::invalidArgument("route pattern '" + pattern + "': bad parameter name");
      }
      if (!names.insert(name).second) {
        return Status::invalidArgument("route pattern '" + pattern + "': parameter '" + name +
                                       "' appears twice");
      }
    }
    route.segments.emplace_back(seg);
  }
  auto shape = [](const std::vector<std::string>& segs) {
    std::vector<std::string> out;
    for (const std::string& s : segs)
      out.push_back(isParam(s) ? std::string("{}") : s);
    return out;
  };
  for (const Route& r : routes_) {
    if (r.method == route.method && r.is_websocket == route.is_websocket &&
        shape(r.segments) == shape(route.segments)) {
      return Status::alreadyExists("route " + std::string(methodName(route.method)) + " " +
                                   pattern + " is already registered");
    }
  }
  routes_.push_back(std::move(route));
  return Status::ok();
}

Router::Match Router::match(Method method, std::string_view path, bool websocket_upgrade) const {
  std::vector<std::string_view> segs = splitPath(path);
  Match best;
  int best_score = -1;
  std::set<Method> allowed;
  for (const Route& r : routes_) {
    if (r.is_websocket != websocket_upgrade) continue;
    if (r.segments.size() != segs.size()) continue;
    int score = 0;
    bool ok = true;
    for (size_t i = 0; i < segs.size() && ok; ++i) {
      if (isParam(r.segments[i])) continue;
      if (r.segments[i] != segs[i]) ok = false;
      ++score;
    }
    if (!ok) continue;
    allowed.insert(r.method);
    if (r.method != method || score <= best_score) continue;
    best_score = score;
    best.kind = Match::Kind::kFound;
    best.route = &r;
  }
  if (best.route == nullptr) {
    if (allowed.empty()) return Match{};
    Match m;
    m.kind = Match::Kind::kMethodNotAllowed;
    for (Method a : allowed) {
      if (!m.allow.empty()) m.allow += ", ";
      m.allow += methodName(a);
    }
    return m;
  }
  for (size_t i = 0; i < segs.size(); ++i) {
    const std::string& seg = best.route->segments[i];
    if (isParam(seg)) best.params[seg.substr(1, seg.size() - 2)] = std::string(segs[i]);
  }
  return best;
}

}  // namespace gpool::net
