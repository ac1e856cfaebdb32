#include "net/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace gpool::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using boost::system::error_code;
using Executor = asio::any_io_executor;
using Tcp = asio::ip::tcp;
using Local = asio::local::stream_protocol;
// Unix and plain-TCP connections share one stream type, so that every HTTP and WebSocket
// session is compiled for two stream types (plain and TLS), not three: Beast's sessions are most
// of this file's compile time. Whether a plain connection's peers need a token is a flag.
using Generic = asio::generic::stream_protocol;
using PlainStream = beast::basic_stream<Generic, Executor, beast::unlimited_rate_policy>;
using TlsStream = beast::ssl_stream<PlainStream>;

constexpr auto kAwait = asio::use_awaitable;

// What an idle connection reads when its next request starts: the read that ends the idle wait.
constexpr size_t kFirstReadBytes = 4096;

// A 503 for a connection refused by a connection limit, written straight to its socket: the
// request was not read, so nothing was changed, and the client may try again (exit 7 for
// `gpool`, like every refusal "for now"; docs/cli-exit-codes.md).
std::string refusalResponse(const std::string& why) {
  std::string body = errorBody("unavailable", why);
  return fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nServer: gpoold\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\nRetry-After: 5\r\nConnection: close\r\n\r\n{}",
      body.size(), body);
}

// How long a refused connection stays open after its answer, reading and discarding what its
// client still sends, so that the client reads the answer rather than a broken pipe.
constexpr std::chrono::milliseconds kRefusalDrain{1000};
// Refused connections held open for that at once, at most (each holds a descriptor from the
// reserve); beyond, a refused connection is answered best-effort and closed at once.
constexpr size_t kMaxDrainingRefusals = 64;

auto awaitEc(error_code& ec) {
  return asio::redirect_error(kAwait, ec);
}

// Errors after which a request could not be parsed; all get a 400 except the limits.
bool isParseError(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_version).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

// Per-connection control shared between the connection's coroutine (on its strand) and `stop`.
// Every field except `executor` is touched only on the connection's strand.
struct SessionControl {
  Executor executor;
  bool idle = false;  // waiting for the next request on a keep-alive connection
  // Asks the connection to end: when idle (or `force`), at once; otherwise after the request in
  // progress.
  std::function<void(bool force)> on_stop;
};

// The connection limits' counts (ServerOptions::max_connections*). Thread-safe.
class ConnectionLimits {
 public:
  // Limits of 0 mean none.
  void configure(size_t per_user, size_t per_address, size_t total) {
    per_user_ = per_user;
    per_address_ = per_address;
    total_ = total;
  }
  size_t total() const { return total_; }

  // Takes a place for a connection of `key` ("uid N" on the Unix socket, "address A" on TCP),
  // or says in *why which limit refuses it. Privileged peers are never refused and not counted.
  bool admit(const std::string& key, bool unix_peer, bool privileged, std::string* why) {
    if (privileged) return true;
    std::lock_guard<std::mutex> lock(mu_);
    size_t& mine = open_by_peer_[key];
    const size_t per_peer = unix_peer ? per_user_ : per_address_;
    if (per_peer > 0 && mine >= per_peer) {
      *why = fmt::format("too many connections from {}: {} open, the limit is {} ({})", key, mine,
                         per_peer,
                         unix_peer ? "max_connections_per_user" : "max_connections_per_address");
      return false;
    }
    if (total_ > 0 && open_ >= total_) {
      if (mine == 0) open_by_peer_.erase(key);
      *why = fmt::format(
          "the server has {} connections open, its limit for unprivileged peers "
          "(max_connections); try again shortly",
          open_);
      return false;
    }
    ++mine;
    ++open_;
    return true;
  }
  void release(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_by_peer_.find(key);
    if (it == open_by_peer_.end()) return;
    if (--it->second == 0) open_by_peer_.erase(it);
    --open_;
  }

 private:
  size_t per_user_ = 0;
  size_t per_address_ = 0;
  size_t total_ = 0;
  std::mutex mu_;
  std::map<std::string, size_t> open_by_peer_;  // GUARDED_BY(mu_)
  size_t open_ = 0;                             // GUARDED_BY(mu_)
};

// A connection's place in the ConnectionLimits, given back when the connection ends (or is
// exempted). Move-only; owned by the connection's coroutine.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  ConnectionSlot(ConnectionLimits* limits, std::string key)
      : limits_(limits), key_(std::move(key)) {}
  ConnectionSlot(ConnectionSlot&& other) noexcept
      : limits_(std::exchange(other.limits_, nullptr)), key_(std::move(other.key_)) {}
  ConnectionSlot& operator=(ConnectionSlot&& other) noexcept {
    if (this != &other) {
      release();
      limits_ = std::exchange(other.limits_, nullptr);
      key_ = std::move(other.key_);
    }
    return *this;
  }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  ~ConnectionSlot() { release(); }
  // Gives the place back now (the connection goes on, no longer counted).
  void release() {
    if (limits_ != nullptr) std::exchange(limits_, nullptr)->release(key_);
  }

 private:
  ConnectionLimits* limits_ = nullptr;  // null: holds no place (privileged, or released)
  std::string key_;
};

class Server::Impl : public std::enable_shared_from_this<Server::Impl> {
 public:
  Impl(ServerOptions options, Router router)
      : options_(std::move(options)), router_(std::move(router)) {
    start_seconds_ = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  }

  ~Impl() {
    stop();
    // Sessions that never ran (e.g. accepted just before stop) stay registered and hold
    // executors of ioc_. ioc_ is declared after sessions_ and so destroyed before it; release
    // them now, outside the lock, while ioc_ is still alive (ASan caught the use after free).
    std::map<SessionControl*, std::shared_ptr<SessionControl>> leftover;
    {
      std::lock_guard<std::mutex> lock(sessions_mu_);
      leftover.swap(sessions_);
    }
    leftover.clear();
  }

  Status start();
  void stop();

  // Takes a place in limits_ for a new connection: a slot holding it, or nullopt when a limit
  // refuses it (then the refusal is counted and `socket` is taken: a non-TLS peer is answered
  // 503 by answerRefusal, a TLS peer closed).
  template <class Socket>
  std::optional<ConnectionSlot> admit(Socket& socket, const std::string& key, bool unix_peer,
                                      bool privileged, bool tls);
  // Answers a refused connection `answer`, half-closes it and reads what its client still
  // sends for up to kRefusalDrain before closing, so that a client still writing its request
  // (a large body) reads the answer instead of failing its write on a closed socket.
  asio::awaitable<void> answerRefusal(PlainStream stream, std::string answer);
  // At most one warning a second per `what` (accept errors and refusals come in floods).
  void warnRateLimited(const std::string& what, const std::string& message);
  // The spare descriptor (spare_fd_), opened if it is not held; false when no descriptor is
  // free for it. Accept loops run only while it is held, so that a connection never takes the
  // place the spare needs.
  bool holdSpare();
  // The accept loop ran out of file descriptors: closes the spare, takes the next waiting
  // connection with its place, and returns it when its peer is privileged (a Unix peer with uid
  // 0 or the server's own); anyone else is closed (counted as refused) and -1 returned. Takes
  // the spare again where it can. *nothing_waiting is set when no connection was waiting: the
  // kernel's accept fails for want of a descriptor before it looks at the queue, so the caller
  // must then wait for the listener to become readable instead of accepting again (a loop).
  int acceptWithSpare(int listen_fd, bool unix_listener, bool* nothing_waiting);
  // Admits and serves an accepted Unix-socket connection (peer credentials, limits).
  void serveUnix(Local::socket socket);

  // `token_auth`: the peers prove who they are with a bearer token (TLS and plain-HTTP TCP),
  // not by the kernel's peer credentials (Unix socket, given as `peer`).
  template <class Stream>
  asio::awaitable<void> runHttpSession(std::shared_ptr<SessionControl> ctl, Stream stream,
                                       PeerIdentity peer, bool token_auth, ConnectionSlot slot);
  template <class Stream>
  asio::awaitable<void> runWebSocket(std::shared_ptr<SessionControl> ctl, Stream stream,
                                     http::request<http::string_body> upgrade, Request req,
                                     const Router::Route* route);
  asio::awaitable<void> acceptUnix();
  // Accepts on a TCP listener (TLS or loopback HTTP) until it is closed, and hands each
  // connection, on its own strand and with Nagle off, to `serve`. `what` names the listener in
  // warnings.
  asio::awaitable<void> acceptTcp(Tcp::acceptor& acceptor, std::string what, bool tls,
                                  std::function<void(Tcp::socket, ConnectionSlot)> serve);
  asio::awaitable<void> runTlsConnection(Tcp::socket socket, ConnectionSlot slot);

  // Builds our Request from Beast's, authenticates it and runs the route. Never throws.
  Response dispatch(Request& req, const Router::Match& match, bool tls);
  // dispatch() on the blocking pool; the caller's coroutine resumes on its own strand.
  asio::awaitable<Response> dispatchOnBlockingPool(Request& req, const Router::Match& match,
                                                   bool tls);
  asio::awaitable<Response> dispatchHere(Request& req, const Router::Match& match, bool tls);
  // `tls` stands for every token listener (TLS and plain HTTP). For a WebSocket upgrade
  // (`upgrade`) without an Authorization header, the token may come as the query parameter
  // `access_token`, since a browser's WebSocket cannot set headers; it is removed from the query
  // before the route sees it.
  Status authenticate(Request& req, bool tls, const Router::Route* route, bool upgrade = false);
  // Fills `req` from a parsed message of `peer` (a new request id, lower-cased headers) and
  // decodes its target; the Status is the target's (a bad percent escape, no leading '/').
  Status prepareRequest(const http::request<http::string_body>& msg, const PeerIdentity& peer,
                        Request* req);
  // For an upgrade request on a WebSocket route: authenticates it and runs the route's accept
  // callback. OK when the connection may become a WebSocket. Never throws.
  Status acceptUpgrade(Request& req, const Router::Match& match, bool tls);
  std::string nextRequestId() {
    uint64_t n = request_counter_.fetch_add(1) + 1;
    return fmt::format("{:x}-{}", start_seconds_, n);
  }

  // Counts the connection as open for its lifetime (RAII inside the coroutine frame).
  struct SessionGuard {
    Impl* impl;
    std::shared_ptr<SessionControl> ctl;
    ~SessionGuard() {
      ctl->on_stop = nullptr;
      impl->unregisterSession(ctl.get());
    }
  };

  Status startListeners();
  Result<std::unique_ptr<Tcp::acceptor>> listenTcp(const std::string& host, int port);

  std::shared_ptr<SessionControl> registerSession(Executor ex) {
    auto ctl = std::make_shared<SessionControl>();
    ctl->executor = ex;
    std::lock_guard<std::mutex> lock(sessions_mu_);
    sessions_[ctl.get()] = ctl;
    return ctl;
  }
  void unregisterSession(SessionControl* ctl) {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    sessions_.erase(ctl);
    sessions_cv_.notify_all();
  }

  ServerOptions options_;
  Router router_;
  uint64_t start_seconds_ = 0;
  std::atomic<uint64_t> request_counter_{0};
  std::atomic<uint64_t> requests_served_{0};
  std::atomic<uint64_t> handler_exceptions_{0};
  std::atomic<uint64_t> ws_counter_{0};
  std::atomic<uint64_t> connections_refused_{0};
  // Refused connections answerRefusal holds open now (at most kMaxDrainingRefusals).
  std::atomic<size_t> refusals_draining_{0};
  ConnectionLimits limits_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  bool stopped_ = false;
  int tcp_port_ = -1;
  int http_port_ = -1;

  // Rate limit of warnRateLimited: last warning time and warnings suppressed since, per kind.
  std::mutex warned_mu_;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, uint64_t>>
      warned_;  // GUARDED_BY(warned_mu_)
  // A descriptor kept open (on /dev/null) to be closed when accept fails for want of
  // descriptors; touched only on accept_strand_.
  int spare_fd_ = -1;

  std::mutex sessions_mu_;
  std::condition_variable sessions_cv_;
  std::map<SessionControl*, std::shared_ptr<SessionControl>> sessions_;  // GUARDED_BY

  std::unique_ptr<ssl::context> ssl_ctx_;
  std::vector<std::thread> threads_;
  // Runs the handlers of blocking routes; null when ServerOptions::blocking_threads is 0.
  // Joined by stop() while the I/O threads still run, so that every handler's completion
  // reaches its connection.
  std::unique_ptr<asio::thread_pool> blocking_pool_;
  // Declared last so that it is destroyed first: destroying it destroys suspended connection
  // coroutines, whose cleanup still touches the members above.
  asio::io_context ioc_;
  asio::strand<asio::io_context::executor_type> accept_strand_{asio::make_strand(ioc_)};
  std::unique_ptr<Local::acceptor> unix_acceptor_;
  std::unique_ptr<Tcp::acceptor> tcp_acceptor_;
  std::unique_ptr<Tcp::acceptor> http_acceptor_;
};

namespace {

// WebSocket connection ids are process-wide, not per server, so that one EventHub (keyed by
// id) can serve connections of several servers.
uint64_t nextWebSocketId() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1) + 1;
}

void fillRequest(const http::request<http::string_body>& msg, Request* req) {
  req->method_name = std::string(msg.method_string());
  req->method = methodFromName(req->method_name);
  req->target = std::string(msg.target());
  for (const auto& field : msg) {
    std::string name(field.name_string());
    for (char& c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto [it, inserted] = req->headers.emplace(name, std::string(field.value()));
    if (!inserted) {
      it->second += ", ";
      it->second += std::string(field.value());
    }
  }
}

// The answer to a request that could not be read (`ec` set): 413 and 431 for the limits, 400 for
// a malformed request; nothing (nullopt) when the peer closed, timed out or reset, or the server
// stops. Shared by connections and Server::answerBytes.
std::optional<Response> readErrorResponse(const error_code& ec, const ServerOptions& options) {
  if (ec == http::error::body_limit) {
    return Response::error(
        413, "payload_too_large",
        fmt::format("request body is larger than the limit of {} bytes", options.max_body_bytes));
  }
  if (ec == http::error::header_limit) {
    return Response::error(431, "headers_too_large",
                           fmt::format("request headers are larger than the limit of {} bytes",
                                       options.max_header_bytes));
  }
  if (isParseError(ec)) {
    return Response::error(400, "invalid_argument", "malformed HTTP request: " + ec.message());
  }
  return std::nullopt;
}

http::response<http::string_body> toBeast(Response resp, unsigned version, bool keep_alive,
                                          const std::string& request_id) {
  http::response<http::string_body> res{static_cast<http::status>(resp.status), version};
  for (auto& [k, v] : resp.headers)
    res.set(k, v);
  if (!resp.body.empty() && res.find(http::field::content_type) == res.end()) {
    res.set(http::field::content_type, "application/json");
  }
  res.set(http::field::server, "gpoold");
  if (!request_id.empty()) res.set("X-Request-Id", request_id);
  res.body() = std::move(resp.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

// Reads and discards what the client still sends (up to a deadline and a byte cap) after an
// error response, so that closing the socket does not reset the connection before the client
// has read that response (e.g. a 413 while it is still sending its body).
template <class Stream>
asio::awaitable<void> drainInput(Stream& stream, std::chrono::milliseconds limit) {
  beast::get_lowest_layer(stream).expires_after(limit);
  std::vector<char> sink(64 << 10);
  size_t total = 0;
  error_code ec;
  while (total < (256u << 20)) {
    size_t n = co_await stream.async_read_some(asio::buffer(sink), awaitEc(ec));
    if (ec) break;
    total += n;
  }
}

template <class Stream>
asio::awaitable<void> closeStream(Stream& stream, std::chrono::milliseconds limit) {
  error_code ec;
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    beast::get_lowest_layer(stream).expires_after(limit);
    co_await stream.async_shutdown(awaitEc(ec));
  }
  beast::get_lowest_layer(stream).socket().shutdown(asio::socket_base::shutdown_both, ec);
  beast::get_lowest_layer(stream).close();
}

}  // namespace

Status Server::Impl::authenticate(Request& req, bool tls, const Router::Route* route,
                                  bool upgrade) {
  if (!tls) return Status::ok();  // Unix peers: the kernel already told us who they are.
  auto auth = req.header("authorization");
  std::optional<std::string> query_token;
  if (!auth && upgrade) {
    query_token = req.queryParam("access_token");
    req.query.erase("access_token");
  }
  if (auth || query_token) {
    std::string token;
    if (auth) {
      GPOOL_ASSIGN_OR_RETURN(token, bearerTokenFromHeader(*auth));
    } else {
      token = *query_token;
    }
    Result<TokenIdentity> id = options_.token_verifier->verify(token);
    if (!id.ok()) return id.status();
    req.peer.kind = PeerIdentity::Kind::kToken;
    req.peer.user = id->user;
    req.peer.token_id = id->token_id;
    req.peer.roles = id->roles;
    return Status::ok();
  }
  if (route != nullptr && !route->options.allow_anonymous) {
    return Status::unauthenticated("missing 'Authorization: Bearer <token>' header");
  }
  return Status::ok();
}

Status Server::Impl::prepareRequest(const http::request<http::string_body>& msg,
                                    const PeerIdentity& peer, Request* req) {
  req->peer = peer;
  req->request_id = nextRequestId();
  fillRequest(msg, req);
  return parseTarget(req->target, &req->path, &req->query);
}

Status Server::Impl::acceptUpgrade(Request& req, const Router::Match& match, bool tls) {
  Status auth = authenticate(req, tls, match.route, /*upgrade=*/true);
  if (auth.isOk() && match.route->websocket.accept) {
    try {
      auth = match.route->websocket.accept(req);
    } catch (const std::exception& e) {
      auth = Status::internal(std::string("WebSocket accept callback threw: ") + e.what());
    }
  }
  return auth;
}

Response Server::Impl::dispatch(Request& req, const Router::Match& match, bool tls) {
  const Router::Route* route = match.kind == Router::Match::Kind::kFound ? match.route : nullptr;
  Status auth = authenticate(req, tls, route);
  if (!auth.isOk()) {
    Response r = Response::error(auth);
    r.setHeader("WWW-Authenticate", "Bearer");
    return r;
  }
  if (match.kind == Router::Match::Kind::kNotFound) {
    return Response::error(404, "not_found", "no route for " + req.path);
  }
  if (match.kind == Router::Match::Kind::kMethodNotAllowed) {
    Response r = Response::error(405, "method_not_allowed",
                                 "method " + req.method_name + " is not allowed on " + req.path +
                                     " (allowed: " + match.allow + ")");
    r.setHeader("Allow", match.allow);
    return r;
  }
  req.path_params = match.params;
  try {
    return route->handler(req);
  } catch (const std::exception& e) {
    handler_exceptions_.fetch_add(1);
    spdlog::error("request {} {} {} (user '{}'): handler threw: {}", req.request_id,
                  req.method_name, req.path, req.peer.user, e.what());
  } catch (...) {
    handler_exceptions_.fetch_add(1);
    spdlog::error("request {} {} {} (user '{}'): handler threw a non-standard exception",
                  req.request_id, req.method_name, req.path, req.peer.user);
  }
  return Response::error(
      500, "internal",
      "internal error; the server log has details under request id " + req.request_id);
}

asio::awaitable<Response> Server::Impl::dispatchHere(Request& req, const Router::Match& match,
                                                     bool tls) {
  co_return dispatch(req, match, tls);
}

asio::awaitable<Response> Server::Impl::dispatchOnBlockingPool(Request& req,
                                                               const Router::Match& match,
                                                               bool tls) {
  // A named awaitable, not a temporary: GCC 12 destroys temporaries in a co_await operand twice.
  asio::awaitable<Response> work = dispatchHere(req, match, tls);
  co_return co_await asio::co_spawn(blocking_pool_->get_executor(), std::move(work),
                                    asio::use_awaitable);
}

template <class Stream>
asio::awaitable<void> Server::Impl::runHttpSession(std::shared_ptr<SessionControl> ctl,
                                                   Stream stream, PeerIdentity peer,
                                                   bool token_auth, ConnectionSlot slot) {
  SessionGuard guard{this, ctl};
  const bool tls = token_auth;
  ctl->on_stop = [&stream, ctl_raw = ctl.get()](bool force) {
    if (ctl_raw->idle || force) beast::get_lowest_layer(stream).cancel();
  };
  beast::flat_buffer buffer;
  bool close_gracefully = true;
  try {
    for (;;) {
      if (stopping_.load()) break;
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
      parser.body_limit(options_.max_body_bytes);
      error_code ec;
      if (buffer.size() == 0) {
        // Between requests: wait up to idle_timeout for the first byte of the next one.
        beast::get_lowest_layer(stream).expires_after(options_.idle_timeout);
        ctl->idle = true;
        size_t n = co_await stream.async_read_some(buffer.prepare(kFirstReadBytes), awaitEc(ec));
        ctl->idle = false;
        if (ec) {
          // EOF, idle timeout, reset or shutdown: nothing to answer.
          close_gracefully = false;
          break;
        }
        buffer.commit(n);
      }
      // One deadline for the whole request, headers and body, from its first byte: a client
      // that drips bytes (slowloris) is cut after read_timeout however it paces them.
      beast::get_lowest_layer(stream).expires_after(options_.read_timeout);
      co_await http::async_read_header(stream, buffer, parser, awaitEc(ec));
      if (!ec && !parser.is_done()) {
        co_await http::async_read(stream, buffer, parser, awaitEc(ec));
      }
      std::optional<Response> early;
      if (ec) {
        early = readErrorResponse(ec, options_);
        if (!early) {
          // EOF, timeout, reset or shutdown: nothing to answer.
          close_gracefully = false;
          break;
        }
      }
      if (early) {
        auto res = toBeast(std::move(*early), 11, false, nextRequestId());
        beast::get_lowest_layer(stream).expires_after(options_.read_timeout);
        co_await http::async_write(stream, res, awaitEc(ec));
        if (!ec) {
          // Half-close first where the stream allows it, so that a client waiting for the end
          // of the response sees EOF at once and closes its side.
          if constexpr (!std::is_same_v<Stream, TlsStream>) {
            beast::get_lowest_layer(stream).socket().shutdown(asio::socket_base::shutdown_send, ec);
          }
          co_await drainInput(stream, std::chrono::milliseconds(1000));
        }
        close_gracefully = false;
        break;
      }

      http::request<http::string_body> msg = parser.release();
      Request req;
      Status target_ok = prepareRequest(msg, peer, &req);
      const bool upgrade = websocket::is_upgrade(msg);
      Response resp;
      Router::Match match;
      if (!target_ok.isOk()) {
        resp = Response::error(target_ok);
      } else {
        match = router_.match(req.method, req.path, upgrade);
        if (upgrade && match.kind == Router::Match::Kind::kFound) {
          Status auth = acceptUpgrade(req, match, tls);
          if (auth.isOk()) {
            req.path_params = match.params;
            requests_served_.fetch_add(1);
            if (match.route->options.exempt_from_limits) slot.release();
            co_await runWebSocket(ctl, std::move(stream), std::move(msg), std::move(req),
                                  match.route);
            co_return;
          }
          resp = Response::error(auth);
          if (auth.code() == StatusCode::kUnauthenticated) {
            resp.setHeader("WWW-Authenticate", "Bearer");
          }
        } else {
          req.body = std::move(msg.body());
          if (blocking_pool_ && match.kind == Router::Match::Kind::kFound &&
              match.route->options.blocking) {
            resp = co_await dispatchOnBlockingPool(req, match, tls);
          } else {
            resp = dispatch(req, match, tls);
          }
        }
      }
      const bool keep_alive = msg.keep_alive() && !stopping_.load();
      auto res = toBeast(std::move(resp), msg.version(), keep_alive, req.request_id);
      beast::get_lowest_layer(stream).expires_after(options_.read_timeout);
      co_await http::async_write(stream, res, awaitEc(ec));
      requests_served_.fetch_add(1);
      if (ec) {
        close_gracefully = false;
        break;
      }
      if (!keep_alive) break;
    }
    if (close_gracefully) co_await closeStream(stream, std::chrono::milliseconds(1000));
  } catch (const std::exception& e) {
    spdlog::warn("connection of '{}' ended by an error: {}", peer.user, e.what());
  }
  error_code ignored;
  beast::get_lowest_layer(stream).socket().close(ignored);
}

namespace {

// The server side of one WebSocket connection. See WebSocketConnection for the contract.
template <class Stream>
class WsConnection final : public WebSocketConnection,
                           public std::enable_shared_from_this<WsConnection<Stream>> {
 public:
  WsConnection(Stream&& stream, Request request, uint64_t id, const ServerOptions& options)
      : ws_(std::move(stream)),
        request_(std::move(request)),
        id_(id),
        options_(options),
        signal_(ws_.get_executor()),
        kill_timer_(ws_.get_executor()),
        done_timer_(ws_.get_executor()) {}

  // WebSocketConnection
  bool send(std::string message) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return false;
    if (queue_.size() >= options_.ws_max_queued_messages) {
      beginCloseLocked(kClosePolicy,
                       fmt::format("slow consumer: {} messages queued", queue_.size()), true);
      return false;
    }
    queue_.push_back(std::move(message));
    wake();
    return true;
  }
  void close(uint16_t code, std::string reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    beginCloseLocked(code, std::move(reason), false);
  }
  const Request& request() const override { return request_; }
  uint64_t id() const override { return id_; }
  size_t queuedMessages() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

  // REQUIRES: mu_ is held.
  void beginCloseLocked(uint16_t code, std::string reason, bool drop) {
    closing_ = true;
    close_code_ = code;
    close_reason_ = std::move(reason);
    if (drop) {
      queue_.clear();  // a dropped client gets no more data, only the close frame
      dropped_ = true;
    }
    auto self = this->shared_from_this();
    asio::post(ws_.get_executor(), [self] {
      self->signal_.cancel();
      // A write may be blocked on a client that reads nothing: cut the socket if the close
      // handshake does not finish in time.
      self->kill_timer_.expires_after(self->options_.ws_close_timeout);
      self->kill_timer_.async_wait([self](error_code ec) {
        if (!ec) beast::get_lowest_layer(self->ws_).close();
      });
    });
  }

  void wake() {
    auto self = this->shared_from_this();
    asio::post(ws_.get_executor(), [self] { self->signal_.cancel(); });
  }

  asio::awaitable<void> writer() {
    auto self = this->shared_from_this();
    error_code ec;
    bool write_failed = false;
    for (;;) {
      std::deque<std::string> batch;
      bool closing;
      {
        std::lock_guard<std::mutex> lock(mu_);
        batch.swap(queue_);
        closing = closing_;
      }
      if (batch.empty()) {
        if (closing || read_done_) break;
        signal_.expires_at(asio::steady_timer::time_point::max());
        co_await signal_.async_wait(awaitEc(ec));
        continue;
      }
      for (std::string& m : batch) {
        co_await ws_.async_write(asio::buffer(m), awaitEc(ec));
        if (ec) {
          write_failed = true;
          break;
        }
        std::lock_guard<std::mutex> lock(mu_);
        if (dropped_) break;
      }
      if (write_failed) break;
    }
    if (!write_failed && !read_done_) {
      uint16_t code;
      std::string reason;
      {
        std::lock_guard<std::mutex> lock(mu_);
        code = close_code_;
        reason = close_reason_;
      }
      // Close reasons are limited to 123 bytes by the protocol.
      if (reason.size() > 120) reason.resize(120);
      co_await ws_.async_close(
          websocket::close_reason(static_cast<websocket::close_code>(code), reason), awaitEc(ec));
    }
    writer_done_ = true;
    done_timer_.cancel();
  }

  asio::awaitable<void> run(const WebSocketHandler& handler) {
    auto self = this->shared_from_this();
    auto safe_call = [&](auto&& fn) {
      try {
        fn();
      } catch (const std::exception& e) {
        spdlog::error("WebSocket {} on {}: handler threw: {}", id_, request_.path, e.what());
        close(kCloseInternal, "internal error");
      } catch (...) {
        spdlog::error("WebSocket {} on {}: handler threw", id_, request_.path);
        close(kCloseInternal, "internal error");
      }
    };
    if (handler.on_open) safe_call([&] { handler.on_open(self); });
    asio::co_spawn(ws_.get_executor(), writer(), asio::detached);
    beast::flat_buffer buf;
    error_code ec;
    for (;;) {
      co_await ws_.async_read(buf, awaitEc(ec));
      if (ec) break;
      std::string msg = beast::buffers_to_string(buf.data());
      buf.consume(buf.size());
      if (handler.on_message) safe_call([&] { handler.on_message(self, std::move(msg)); });
    }
    read_done_ = true;
    uint16_t code;
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_) {
        code = close_code_;
        reason = close_reason_;
      } else if (ec == websocket::error::closed) {
        code = ws_.reason().code;
        reason = std::string(ws_.reason().reason.c_str());
      } else {
        code = 1006;
        reason = "connection lost: " + ec.message();
      }
      closing_ = true;
    }
    signal_.cancel();
    if (!writer_done_) {
      done_timer_.expires_at(asio::steady_timer::time_point::max());
      co_await done_timer_.async_wait(awaitEc(ec));
    }
    kill_timer_.cancel();
    if (handler.on_close) safe_call([&] { handler.on_close(self, code, reason); });
    beast::get_lowest_layer(ws_).close();
  }

  websocket::stream<Stream> ws_;

 private:
  Request request_;
  uint64_t id_;
  const ServerOptions options_;
  asio::steady_timer signal_;
  asio::steady_timer kill_timer_;
  asio::steady_timer done_timer_;
  mutable std::mutex mu_;
  std::deque<std::string> queue_;  // GUARDED_BY(mu_)
  bool closing_ = false;           // GUARDED_BY(mu_)
  bool dropped_ = false;           // GUARDED_BY(mu_)
  uint16_t close_code_ = kCloseNormal;
  std::string close_reason_;
  // Strand-only state.
  bool read_done_ = false;
  bool writer_done_ = false;
};

}  // namespace

template <class Stream>
asio::awaitable<void> Server::Impl::runWebSocket(std::shared_ptr<SessionControl> ctl, Stream stream,
                                                 http::request<http::string_body> upgrade,
                                                 Request req, const Router::Route* route) {
  beast::get_lowest_layer(stream).expires_never();
  auto conn = std::make_shared<WsConnection<Stream>>(std::move(stream), std::move(req),
                                                     nextWebSocketId(), options_);
  ws_counter_.fetch_add(1);
  auto& ws = conn->ws_;
  websocket::stream_base::timeout t{};
  t.handshake_timeout = options_.read_timeout;
  t.idle_timeout = options_.ws_ping_interval * 2;
  t.keep_alive_pings = true;
  ws.set_option(t);
  ws.read_message_max(options_.ws_max_message_bytes);
  ws.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "gpoold"); }));
  error_code ec;
  co_await ws.async_accept(upgrade, awaitEc(ec));
  if (ec) co_return;
  std::weak_ptr<WsConnection<Stream>> weak = conn;
  ctl->on_stop = [weak](bool force) {
    auto c = weak.lock();
    if (!c) return;
    if (force) {
      beast::get_lowest_layer(c->ws_).close();
    } else {
      c->close(kCloseGoingAway, "server shutting down");
    }
  };
  if (stopping_.load()) conn->close(kCloseGoingAway, "server shutting down");
  co_await conn->run(route->websocket);
}

template <class Socket>
std::optional<ConnectionSlot> Server::Impl::admit(Socket& socket, const std::string& key,
                                                  bool unix_peer, bool privileged, bool tls) {
  std::string why;
  if (!limits_.admit(key, unix_peer, privileged, &why)) {
    connections_refused_.fetch_add(1);
    warnRateLimited("refused", "connection refused: " + why);
    // TLS peers are closed unanswered: answering would take a handshake per refusal.
    if (tls) return std::nullopt;
    std::string answer = refusalResponse(why);
    const size_t cap = std::min(kMaxDrainingRefusals, options_.reserved_fds / 2);
    if (refusals_draining_.fetch_add(1) < cap) {
      Executor strand = socket.get_executor();
      asio::co_spawn(
          strand, answerRefusal(PlainStream(Generic::socket(std::move(socket))), std::move(answer)),
          asio::detached);
      return std::nullopt;
    }
    refusals_draining_.fetch_sub(1);
    // Too many held open already: best effort, without waiting (a fresh connection's send
    // buffer takes this whole); a client still writing may miss it.
    const int fd = socket.native_handle();
    (void)!::send(fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    return std::nullopt;
  }
  if (privileged) return ConnectionSlot();
  return ConnectionSlot(&limits_, key);
}

asio::awaitable<void> Server::Impl::answerRefusal(PlainStream stream, std::string answer) {
  struct Release {
    std::atomic<size_t>* draining;
    ~Release() { draining->fetch_sub(1); }
  } release{&refusals_draining_};
  error_code ec;
  // The answer goes first, before the request is read: the client reads it once it has sent
  // its request (or at once, when it waits for an answer before its body).
  stream.expires_after(kRefusalDrain);
  co_await asio::async_write(stream, asio::buffer(answer), awaitEc(ec));
  if (ec) co_return;
  // Half-close, so that the client sees the answer end, then take what it still sends.
  stream.socket().shutdown(asio::socket_base::shutdown_send, ec);
  co_await drainInput(stream, kRefusalDrain);
}

void Server::Impl::warnRateLimited(const std::string& what, const std::string& message) {
  uint64_t suppressed = 0;
  {
    std::lock_guard<std::mutex> lock(warned_mu_);
    auto now = std::chrono::steady_clock::now();
    auto& [last, count] = warned_[what];
    if (last.time_since_epoch().count() != 0 && now - last < std::chrono::seconds(1)) {
      ++count;
      return;
    }
    last = now;
    suppressed = std::exchange(count, 0);
  }
  if (suppressed > 0) {
    spdlog::warn("{} (and {} more like it in the last second)", message, suppressed);
  } else {
    spdlog::warn("{}", message);
  }
}

bool Server::Impl::holdSpare() {
  if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  return spare_fd_ >= 0;
}

int Server::Impl::acceptWithSpare(int listen_fd, bool unix_listener, bool* nothing_waiting) {
  *nothing_waiting = false;
  if (!holdSpare()) return -1;
  ::close(std::exchange(spare_fd_, -1));
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) *nothing_waiting = errno == EAGAIN || errno == EWOULDBLOCK;
  if (fd >= 0) {
    // Only a privileged Unix peer is worth the descriptor; anyone else is closed before the
    // spare is taken again, so that the spare is back for the next waiting connection.
    struct ucred cred {};
    socklen_t len = sizeof(cred);
    const bool privileged = unix_listener &&
                            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
                            (cred.uid == 0 || cred.uid == ::geteuid());
    if (!privileged) {
      ::close(fd);
      connections_refused_.fetch_add(1);
      fd = -1;
    }
  }
  // Fails when a privileged connection took the spare's place: holdSpare() retries before the
  // next accept.
  holdSpare();
  return fd;
}

void Server::Impl::serveUnix(Local::socket socket) {
  PeerIdentity peer;
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    warnRateLimited("peercred", "SO_PEERCRED on " + options_.unix_socket_path +
                                    " failed; dropping the connection");
    return;
  }
  // Root and the server's own user (local agents, the operator's tools) are never refused.
  const bool privileged = cred.uid == 0 || cred.uid == ::geteuid();
  std::optional<ConnectionSlot> slot = admit(socket, "uid " + std::to_string(cred.uid),
                                             /*unix_peer=*/true, privileged, /*tls=*/false);
  if (!slot) return;  // answered and closed by admit
  peer.kind = PeerIdentity::Kind::kUnixPeer;
  peer.uid = cred.uid;
  peer.gid = cred.gid;
  peer.pid = cred.pid;
  peer.user = userNameForUid(cred.uid);
  Executor strand = socket.get_executor();
  auto ctl = registerSession(strand);
  asio::co_spawn(strand,
                 runHttpSession(ctl, PlainStream(Generic::socket(std::move(socket))),
                                std::move(peer), /*token_auth=*/false, std::move(*slot)),
                 asio::detached);
}

namespace {

bool outOfDescriptors(const error_code& ec) {
  return ec == asio::error::no_descriptors ||
         ec == error_code(ENFILE, boost::system::system_category());
}

}  // namespace

asio::awaitable<void> Server::Impl::acceptUnix() {
  for (;;) {
    error_code ec;
    if (!holdSpare()) {
      // At the open-file limit with the spare in use (a privileged connection took it): wait
      // for a descriptor to come free rather than let an accept take the spare's place.
      warnRateLimited("accept-unix", "accept on " + options_.unix_socket_path +
                                         " paused: out of file descriptors");
      asio::steady_timer pause(ioc_, std::chrono::milliseconds(50));
      co_await pause.async_wait(awaitEc(ec));
      if (stopping_.load()) co_return;
      continue;
    }
    Executor strand = asio::make_strand(ioc_);
    Local::socket socket(strand);
    co_await unix_acceptor_->async_accept(socket, awaitEc(ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || stopping_.load()) co_return;
      if (outOfDescriptors(ec)) {
        // Out of descriptors: take the next waiting connection with the spare one; root's is
        // served, anyone else's closed, so that root is not stuck behind a flood in the listen
        // queue.
        warnRateLimited("accept-unix",
                        "accept on " + options_.unix_socket_path +
                            ": out of file descriptors; serving only root and the server's own "
                            "user until some close");
        bool nothing_waiting = false;
        int fd = acceptWithSpare(unix_acceptor_->native_handle(), /*unix_listener=*/true,
                                 &nothing_waiting);
        if (fd >= 0) {
          Local::socket taken(asio::make_strand(ioc_));
          taken.assign(Local(), fd, ec);
          if (ec) {
            ::close(fd);
          } else {
            serveUnix(std::move(taken));
          }
        }
        if (nothing_waiting) {
          co_await unix_acceptor_->async_wait(Local::acceptor::wait_read, awaitEc(ec));
          if (ec == asio::error::operation_aborted || stopping_.load()) co_return;
        }
        continue;
      }
      warnRateLimited("accept-unix",
                      "accept on " + options_.unix_socket_path + " failed: " + ec.message());
      asio::steady_timer pause(ioc_, std::chrono::milliseconds(50));
      co_await pause.async_wait(awaitEc(ec));
      continue;
    }
    serveUnix(std::move(socket));
  }
}

asio::awaitable<void> Server::Impl::runTlsConnection(Tcp::socket socket, ConnectionSlot slot) {
  auto ctl = registerSession(socket.get_executor());
  TlsStream stream(PlainStream(Generic::socket(std::move(socket))), *ssl_ctx_);
  {
    SessionGuard guard{this, ctl};
    ctl->on_stop = [&stream](bool force) {
      if (force) beast::get_lowest_layer(stream).cancel();
    };
    if (stopping_.load()) co_return;
    error_code ec;
    beast::get_lowest_layer(stream).expires_after(options_.read_timeout);
    co_await stream.async_handshake(ssl::stream_base::server, awaitEc(ec));
    if (ec) {
      spdlog::debug("TLS handshake failed: {}", ec.message());
      co_return;
    }
    // The HTTP session registers itself again; this outer registration only covered the
    // handshake.
  }
  auto ctl2 = registerSession(ctl->executor);
  // A named argument, not a temporary: GCC 12 destroys temporaries in a co_await operand twice.
  PeerIdentity anonymous;
  co_await runHttpSession(ctl2, std::move(stream), std::move(anonymous), /*token_auth=*/true,
                          std::move(slot));
}

asio::awaitable<void> Server::Impl::acceptTcp(
    Tcp::acceptor& acceptor, std::string what, bool tls,
    std::function<void(Tcp::socket, ConnectionSlot)> serve) {
  for (;;) {
    error_code ec;
    if (!holdSpare()) {
      warnRateLimited("accept-" + what, "accept on " + what + " paused: out of file descriptors");
      asio::steady_timer pause(ioc_, std::chrono::milliseconds(50));
      co_await pause.async_wait(awaitEc(ec));
      if (stopping_.load()) co_return;
      continue;
    }
    Tcp::socket socket(asio::make_strand(ioc_));
    co_await acceptor.async_accept(socket, awaitEc(ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || stopping_.load()) co_return;
      if (outOfDescriptors(ec)) {
        // Out of descriptors: a TCP peer is not known before its request, so the next waiting
        // connection is taken with the spare descriptor and closed rather than left hanging.
        warnRateLimited("accept-" + what, "accept on " + what +
                                              ": out of file descriptors; closing new "
                                              "connections until some close");
        bool nothing_waiting = false;
        (void)acceptWithSpare(acceptor.native_handle(), /*unix_listener=*/false, &nothing_waiting);
        if (nothing_waiting) {
          co_await acceptor.async_wait(Tcp::acceptor::wait_read, awaitEc(ec));
          if (ec == asio::error::operation_aborted || stopping_.load()) co_return;
        }
        continue;
      }
      warnRateLimited("accept-" + what, "accept on " + what + " failed: " + ec.message());
      asio::steady_timer pause(ioc_, std::chrono::milliseconds(50));
      co_await pause.async_wait(awaitEc(ec));
      continue;
    }
    Tcp::endpoint remote = socket.remote_endpoint(ec);
    if (ec) continue;  // already gone
    std::optional<ConnectionSlot> slot = admit(socket, "address " + remote.address().to_string(),
                                               /*unix_peer=*/false, /*privileged=*/false, tls);
    if (!slot) continue;
    socket.set_option(Tcp::no_delay(true), ec);
    serve(std::move(socket), std::move(*slot));
  }
}

Status Server::Impl::start() {
  if (started_ || stopped_) return Status::failedPrecondition("server already started");
  Status s = startListeners();
  if (!s.isOk()) {
    // Leave nothing half-open: a failed start releases whatever it bound.
    error_code ec;
    if (unix_acceptor_) {
      unix_acceptor_->close(ec);
      unix_acceptor_.reset();
      ::unlink(options_.unix_socket_path.c_str());
    }
    if (tcp_acceptor_) {
      tcp_acceptor_->close(ec);
      tcp_acceptor_.reset();
    }
    if (http_acceptor_) {
      http_acceptor_->close(ec);
      http_acceptor_.reset();
    }
    ssl_ctx_.reset();
    return s;
  }
  size_t total = options_.max_connections;
  struct rlimit files {};
  if (total == 0 && ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    // Leave reserved_fds for privileged peers and for the rest of the process (store, logs).
    const auto soft = static_cast<size_t>(files.rlim_cur);
    total = soft > 2 * options_.reserved_fds ? soft - options_.reserved_fds : soft / 2;
  }
  limits_.configure(options_.max_connections_per_user, options_.max_connections_per_address, total);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (unix_acceptor_) asio::co_spawn(accept_strand_, acceptUnix(), asio::detached);
  if (tcp_acceptor_) {
    asio::co_spawn(accept_strand_,
                   acceptTcp(*tcp_acceptor_, "TLS port " + std::to_string(tcp_port_),
                             /*tls=*/true,
                             [this](Tcp::socket socket, ConnectionSlot slot) {
                               Executor strand = socket.get_executor();
                               asio::co_spawn(strand,
                                              runTlsConnection(std::move(socket), std::move(slot)),
                                              asio::detached);
                             }),
                   asio::detached);
  }
  if (http_acceptor_) {
    asio::co_spawn(
        accept_strand_,
        acceptTcp(*http_acceptor_, "HTTP port " + std::to_string(http_port_), /*tls=*/false,
                  [this](Tcp::socket socket, ConnectionSlot slot) {
                    Executor strand = socket.get_executor();
                    auto ctl = registerSession(strand);
                    asio::co_spawn(
                        strand,
                        runHttpSession(ctl, PlainStream(Generic::socket(std::move(socket))),
                                       PeerIdentity{}, /*token_auth=*/true, std::move(slot)),
                        asio::detached);
                  }),
        asio::detached);
  }
  started_ = true;
  if (options_.blocking_threads > 0) {
    blocking_pool_ = std::make_unique<asio::thread_pool>(options_.blocking_threads);
  }
  for (int i = 0; i < options_.threads; ++i) {
    threads_.emplace_back([this] {
      for (;;) {
        try {
          ioc_.run();
          return;
        } catch (const std::exception& e) {
          // Handlers catch their own errors; this is a last line so that one bug cannot take
          // an I/O thread down with it.
          spdlog::error("server I/O thread caught: {}", e.what());
        }
      }
    });
  }
  return Status::ok();
}

Status Server::Impl::startListeners() {
  if (options_.unix_socket_path.empty() && options_.tcp_port < 0 && options_.http_port < 0) {
    return Status::invalidArgument(
        "server has no listener: set unix_socket_path, tcp_port or http_port");
  }
  if (options_.threads < 1) return Status::invalidArgument("server threads must be >= 1");
  if (options_.blocking_threads < 0) {
    return Status::invalidArgument("server blocking_threads must be >= 0");
  }
  error_code ec;
  if (!options_.unix_socket_path.empty()) {
    const std::string& path = options_.unix_socket_path;
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
      return Status::invalidArgument("Unix socket path '" + path + "' is too long");
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        return Status::ioError("'" + path + "' exists and is not a socket");
      }
      Local::socket probe(ioc_);
      probe.connect(Local::endpoint(path), ec);
      if (!ec) return Status::ioError("Unix socket '" + path + "' is in use by a live server");
      ::unlink(path.c_str());  // stale socket of a dead server
    }
    unix_acceptor_ = std::make_unique<Local::acceptor>(accept_strand_);
    unix_acceptor_->open(Local(), ec);
    if (!ec) unix_acceptor_->bind(Local::endpoint(path), ec);
    if (!ec) unix_acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      unix_acceptor_.reset();
      return Status::ioError("cannot listen on Unix socket '" + path + "': " + ec.message());
    }
    ::chmod(path.c_str(), static_cast<mode_t>(options_.unix_socket_mode));
  }
  if (options_.tcp_port >= 0) {
    if (options_.token_verifier == nullptr) {
      return Status::invalidArgument("a TCP listener needs a token_verifier");
    }
    if (options_.tls_cert_file.empty() || options_.tls_key_file.empty()) {
      return Status::invalidArgument("a TCP listener needs tls_cert_file and tls_key_file");
    }
    ssl_ctx_ = std::make_unique<ssl::context>(ssl::context::tls_server);
    SSL_CTX_set_min_proto_version(ssl_ctx_->native_handle(), TLS1_2_VERSION);
    ssl_ctx_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                          ssl::context::no_sslv3 | ssl::context::single_dh_use);
    ssl_ctx_->use_certificate_chain_file(options_.tls_cert_file, ec);
    if (ec) {
      return Status::invalidArgument("cannot load TLS certificate '" + options_.tls_cert_file +
                                     "': " + ec.message());
    }
    ssl_ctx_->use_private_key_file(options_.tls_key_file, ssl::context::pem, ec);
    if (ec) {
      return Status::invalidArgument("cannot load TLS key '" + options_.tls_key_file +
                                     "': " + ec.message());
    }
    if (SSL_CTX_check_private_key(ssl_ctx_->native_handle()) != 1) {
      return Status::invalidArgument("TLS key '" + options_.tls_key_file +
                                     "' does not match certificate '" + options_.tls_cert_file +
                                     "'");
    }
    GPOOL_ASSIGN_OR_RETURN(tcp_acceptor_, listenTcp(options_.tcp_host, options_.tcp_port));
    tcp_port_ = tcp_acceptor_->local_endpoint().port();
  }
  if (options_.http_port >= 0) {
    if (options_.token_verifier == nullptr) {
      return Status::invalidArgument("an HTTP listener needs a token_verifier");
    }
    GPOOL_ASSIGN_OR_RETURN(http_acceptor_, listenTcp(options_.http_host, options_.http_port));
    http_port_ = http_acceptor_->local_endpoint().port();
  }
  return Status::ok();
}

Result<std::unique_ptr<Tcp::acceptor>> Server::Impl::listenTcp(const std::string& host, int port) {
  error_code ec;
  Tcp::resolver resolver(ioc_);
  auto results = resolver.resolve(host, std::to_string(port), Tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return Status::invalidArgument("cannot resolve listen address '" + host +
                                   "': " + (ec ? ec.message() : "no address"));
  }
  Tcp::endpoint ep = results.begin()->endpoint();
  auto acceptor = std::make_unique<Tcp::acceptor>(accept_strand_);
  acceptor->open(ep.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(ep, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::ioError("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                           ec.message());
  }
  return acceptor;
}

void Server::Impl::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  asio::post(accept_strand_, [this] {
    error_code ec;
    if (unix_acceptor_) unix_acceptor_->close(ec);
    if (tcp_acceptor_) tcp_acceptor_->close(ec);
    if (http_acceptor_) http_acceptor_->close(ec);
  });
  // First ask every connection to finish (idle ones close at once), then cut the ones still
  // open after the grace period, so that every connection coroutine ends (and WebSocket
  // on_close callbacks run) before the io_context stops.
  for (bool force : {false, true}) {
    {
      std::lock_guard<std::mutex> lock(sessions_mu_);
      for (auto& [raw, ctl] : sessions_) {
        asio::post(ctl->executor, [ctl = ctl, force] {
          if (ctl->on_stop) ctl->on_stop(force);
        });
      }
    }
    std::unique_lock<std::mutex> lock(sessions_mu_);
    auto limit = force ? std::chrono::milliseconds(1000) : options_.shutdown_grace;
    sessions_cv_.wait_for(lock, limit, [this] { return sessions_.empty(); });
  }
  // A blocking handler still running finishes, and its answer is handed to its (cut)
  // connection, before the I/O threads stop.
  if (blocking_pool_) blocking_pool_->join();
  ioc_.stop();
  for (std::thread& t : threads_)
    t.join();
  threads_.clear();
  if (!options_.unix_socket_path.empty() && unix_acceptor_) {
    ::unlink(options_.unix_socket_path.c_str());
  }
  if (spare_fd_ >= 0) ::close(std::exchange(spare_fd_, -1));
}

std::vector<Response> Server::answerBytes(std::string_view bytes, const PeerIdentity& peer,
                                          bool token_auth) {
  Impl& impl = *impl_;
  std::vector<Response> responses;
  while (!bytes.empty()) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(impl.options_.max_header_bytes));
    parser.body_limit(impl.options_.max_body_bytes);
    parser.eager(true);
    error_code ec;
    // The parser takes the whole header in one piece, then the body in as many as it likes.
    while (!ec && !parser.is_done()) {
      const size_t used =
          bytes.empty() ? 0 : parser.put(asio::buffer(bytes.data(), bytes.size()), ec);
      bytes.remove_prefix(used);
      if (ec == http::error::need_more) ec = {};
      if (!ec && used == 0) {
        // Nothing left, or only part of a header: the peer sent no more (end_of_stream or
        // partial_message, which get no answer).
        parser.put_eof(ec);
        break;
      }
    }
    if (ec || !parser.is_done()) {
      if (std::optional<Response> early = readErrorResponse(ec, impl.options_)) {
        responses.push_back(std::move(*early));
      }
      break;
    }
    http::request<http::string_body> msg = parser.release();
    Request req;
    Status target_ok = impl.prepareRequest(msg, peer, &req);
    if (!target_ok.isOk()) {
      responses.push_back(Response::error(target_ok));
    } else {
      const bool upgrade = websocket::is_upgrade(msg);
      Router::Match match = impl.router_.match(req.method, req.path, upgrade);
      if (upgrade && match.kind == Router::Match::Kind::kFound) {
        Status auth = impl.acceptUpgrade(req, match, token_auth);
        if (auth.isOk()) {
          responses.push_back(Response::text(101, ""));
          break;
        }
        Response r = Response::error(auth);
        if (auth.code() == StatusCode::kUnauthenticated) r.setHeader("WWW-Authenticate", "Bearer");
        responses.push_back(std::move(r));
      } else {
        req.body = std::move(msg.body());
        responses.push_back(impl.dispatch(req, match, token_auth));
      }
    }
    impl.requests_served_.fetch_add(1);
    if (!msg.keep_alive()) break;
  }
  return responses;
}

Server::Server(ServerOptions options, Router router)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(router))) {}

Server::~Server() {
  impl_->stop();
}

Status Server::start() {
  return impl_->start();
}

void Server::stop() {
  impl_->stop();
}

int Server::tcpPort() const {
  return impl_->tcp_port_;
}

int Server::httpPort() const {
  return impl_->http_port_;
}

const std::string& Server::unixSocketPath() const {
  return impl_->options_.unix_socket_path;
}

uint64_t Server::requestsServed() const {
  return impl_->requests_served_.load();
}

uint64_t Server::handlerExceptions() const {
  return impl_->handler_exceptions_.load();
}

size_t Server::openConnections() const {
  std::lock_guard<std::mutex> lock(impl_->sessions_mu_);
  return impl_->sessions_.size();
}

uint64_t Server::connectionsRefused() const {
  return impl_->connections_refused_.load();
}

size_t Server::connectionLimit() const {
  return impl_->limits_.total();
}

}  // namespace gpool::net
