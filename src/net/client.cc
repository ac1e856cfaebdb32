#include "net/client.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cmath>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>

#include "common/random.h"

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
using TcpStream = beast::tcp_stream;
using UnixStream = beast::basic_stream<Local, Executor, beast::unlimited_rate_policy>;
using TlsStream = beast::ssl_stream<TcpStream>;

// What one read of a response may take off the socket. Beast reads max(512, the buffer's free
// capacity) bytes at a time, and its body parser empties the buffer as it goes, so an empty
// buffer read a 35 KB page of jobs in ~70 recv calls; with this reserved, in one or two.
constexpr size_t kReadBufferBytes = 64 * 1024;

auto awaitEc(error_code& ec) {
  return asio::redirect_error(asio::use_awaitable, ec);
}

Status transportError(const ClientEndpoint& ep, std::string_view what, const error_code& ec) {
  if (ec == beast::error::timeout) {
    return Status::deadlineExceeded(fmt::format("{} {}: timed out", what, ep.describe()));
  }
  return Status::unavailable(fmt::format("{} {}: {}", what, ep.describe(), ec.message()));
}

Status makeTlsContext(const ClientEndpoint& ep, std::unique_ptr<ssl::context>* out) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  error_code ec;
  if (ep.ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
  } else {
    ctx->load_verify_file(ep.ca_file, ec);
  }
  if (ec) {
    return Status::invalidArgument("cannot load CA file '" + ep.ca_file + "': " + ec.message());
  }
  ctx->set_verify_mode(ssl::verify_peer);
  *out = std::move(ctx);
  return Status::ok();
}

// Connects `stream` (an unconnected UnixStream or TlsStream) to the endpoint, including the
// TLS handshake with certificate and host name verification.
asio::awaitable<Status> connectStream(UnixStream& stream, const ClientEndpoint& ep,
                                      std::chrono::milliseconds timeout) {
  error_code ec;
  stream.expires_after(timeout);
  co_await stream.async_connect(Local::endpoint(ep.unix_socket_path), awaitEc(ec));
  if (ec) co_return transportError(ep, "cannot connect to", ec);
  co_return Status::ok();
}

asio::awaitable<Status> connectStream(TcpStream& stream, const ClientEndpoint& ep,
                                      std::chrono::milliseconds timeout) {
  error_code ec;
  Tcp::resolver resolver(co_await asio::this_coro::executor);
  const std::string port = std::to_string(ep.port);
  auto results = co_await resolver.async_resolve(ep.host, port, awaitEc(ec));
  if (ec) co_return transportError(ep, "cannot resolve", ec);
  stream.expires_after(timeout);
  co_await stream.async_connect(results, awaitEc(ec));
  if (ec) co_return transportError(ep, "cannot connect to", ec);
  stream.socket().set_option(Tcp::no_delay(true), ec);
  co_return Status::ok();
}

asio::awaitable<Status> connectStream(TlsStream& stream, const ClientEndpoint& ep,
                                      std::chrono::milliseconds timeout) {
  error_code ec;
  Tcp::resolver resolver(co_await asio::this_coro::executor);
  // Named arguments, not temporaries: GCC 12 destroys temporaries in a co_await operand twice.
  const std::string port = std::to_string(ep.port);
  auto results = co_await resolver.async_resolve(ep.host, port, awaitEc(ec));
  if (ec) co_return transportError(ep, "cannot resolve", ec);
  beast::get_lowest_layer(stream).expires_after(timeout);
  co_await beast::get_lowest_layer(stream).async_connect(results, awaitEc(ec));
  if (ec) co_return transportError(ep, "cannot connect to", ec);
  beast::get_lowest_layer(stream).socket().set_option(Tcp::no_delay(true), ec);
  const std::string& name = ep.server_name.empty() ? ep.host : ep.server_name;
  if (!SSL_set_tlsext_host_name(stream.native_handle(), name.c_str())) {
    co_return Status::unavailable("cannot set TLS server name '" + name + "'");
  }
  stream.set_verify_callback(ssl::host_name_verification(name));
  beast::get_lowest_layer(stream).expires_after(timeout);
  co_await stream.async_handshake(ssl::stream_base::client, awaitEc(ec));
  if (ec) co_return transportError(ep, "TLS handshake with", ec);
  co_return Status::ok();
}

// Runs `op` to completion on `ioc` from the calling thread.
template <class T>
T runSync(asio::io_context& ioc, asio::awaitable<T> op) {
  std::optional<T> result;
  std::exception_ptr error;
  // co_spawn needs a default-constructible result; Result<T> is not, so the value goes out
  // through `result` instead.
  auto wrapper = [&result](asio::awaitable<T> inner) -> asio::awaitable<void> {
    result.emplace(co_await std::move(inner));
  };
  asio::co_spawn(ioc, wrapper(std::move(op)), [&](std::exception_ptr e) { error = e; });
  ioc.restart();
  ioc.run();
  if (error || !result) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return T(Status::internal(std::string("HTTP client: ") + e.what()));
    }
    return T(Status::internal("HTTP client: operation did not complete"));
  }
  return std::move(*result);
}

}  // namespace

ClientEndpoint ClientEndpoint::unixSocket(std::string path) {
  ClientEndpoint ep;
  ep.unix_socket_path = std::move(path);
  return ep;
}

ClientEndpoint ClientEndpoint::tls(std::string host, int port, std::string ca_file,
                                   std::string bearer_token) {
  ClientEndpoint ep;
  ep.host = std::move(host);
  ep.port = port;
  ep.ca_file = std::move(ca_file);
  ep.bearer_token = std::move(bearer_token);
  return ep;
}

ClientEndpoint ClientEndpoint::http(std::string host, int port) {
  ClientEndpoint ep;
  ep.host = std::move(host);
  ep.port = port;
  ep.plain_http = true;
  return ep;
}

std::string ClientEndpoint::describe() const {
  if (isUnix()) return "unix:" + unix_socket_path;
  return host + ":" + std::to_string(port);
}

std::string namedLeader(int status, const std::optional<std::string>& leader_header,
                        std::string_view body) {
  if (status != 503) return "";
  if (leader_header && !leader_header->empty()) return *leader_header;
  // The error message of Leadership::notLeading, inside the JSON error body.
  constexpr std::string_view kMarker = "the leader is at ";
  size_t at = body.find(kMarker);
  if (at == std::string_view::npos) return "";
  at += kMarker.size();
  size_t end = body.find_first_of("\" \t\r\n", at);
  return std::string(body.substr(at, end == std::string_view::npos ? end : end - at));
}

size_t findEndpoint(const std::vector<ClientEndpoint>& endpoints, std::string_view address) {
  if (address.empty()) return std::string_view::npos;
  std::string_view host_port = address;
  if (size_t scheme = host_port.find("://"); scheme != std::string_view::npos) {
    host_port.remove_prefix(scheme + 3);
  }
  while (!host_port.empty() && host_port.back() == '/')
    host_port.remove_suffix(1);
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const ClientEndpoint& e = endpoints[i];
    if (e.isUnix() ? e.unix_socket_path == address
                   : host_port == e.host + ":" + std::to_string(e.port)) {
      return i;
    }
  }
  return std::string_view::npos;
}

// ---------------------------------------------------------------------------------------------
// HttpClient

class HttpClient::Impl {
 public:
  Impl(ClientEndpoint ep, std::chrono::milliseconds timeout)
      : ep_(std::move(ep)), timeout_(timeout) {}

  Result<Response> request(Method method, std::string_view target, std::string body,
                           std::vector<std::pair<std::string, std::string>> headers) {
    http::request<http::string_body> req;
    req.method_string(std::string(methodName(method)));
    req.target(std::string(target));
    req.version(11);
    req.set(http::field::host, ep_.isUnix() ? std::string("localhost") : ep_.host);
    req.set(http::field::user_agent, "gpool-client");
    bool has_type = false;
    for (auto& [k, v] : headers) {
      if (beast::iequals(k, "content-type")) has_type = true;
      req.set(k, v);
    }
    if (!ep_.isUnix() && !ep_.plain_http && !ep_.bearer_token.empty()) {
      req.set(http::field::authorization, "Bearer " + ep_.bearer_token);
    }
    if (!body.empty() && !has_type) req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.keep_alive(true);
    req.prepare_payload();
    return runSync<Result<Response>>(ioc_, roundTrip(std::move(req)));
  }

  void close() {
    unix_.reset();
    tls_.reset();
    tcp_.reset();
  }

  uint64_t connections_opened_ = 0;

 private:
  template <class Stream>
  asio::awaitable<Result<Response>> exchange(Stream& stream, http::request<http::string_body>& req,
                                             bool* nothing_received) {
    error_code ec;
    beast::get_lowest_layer(stream).expires_after(timeout_);
    co_await http::async_write(stream, req, awaitEc(ec));
    const error_code write_ec = ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    beast::get_lowest_layer(stream).expires_after(timeout_);
    // Even when the write failed: a server that refuses a request before reading all of it
    // (a connection limit, a body too large) answers and closes, and its answer may be waiting
    // here while the rest of the request met a closed socket. Without it the caller could not
    // tell whether the request was taken.
    co_await http::async_read(stream, buffer_, parser, awaitEc(ec));
    if (write_ec) {
      if (ec) co_return transportError(ep_, "cannot send request to", write_ec);
    } else if (ec) {
      *nothing_received = !parser.got_some();
      co_return transportError(ep_, "no response from", ec);
    }
    auto& msg = parser.get();
    Response r;
    r.status = static_cast<int>(msg.result_int());
    for (const auto& f : msg)
      r.headers.emplace_back(f.name_string(), f.value());
    r.body = std::move(msg.body());
    if (!msg.keep_alive()) close();
    co_return r;
  }

  asio::awaitable<Status> connect() {
    buffer_.clear();
    buffer_.reserve(kReadBufferBytes);
    ++connections_opened_;
    if (ep_.isUnix()) {
      unix_.emplace(ioc_);
      Status s = co_await connectStream(*unix_, ep_, timeout_);
      if (!s.isOk()) unix_.reset();
      co_return s;
    }
    if (ep_.plain_http) {
      tcp_.emplace(ioc_);
      Status s = co_await connectStream(*tcp_, ep_, timeout_);
      if (!s.isOk()) tcp_.reset();
      co_return s;
    }
    if (!tls_ctx_) {
      Status made = makeTlsContext(ep_, &tls_ctx_);
      if (!made.isOk()) co_return made;
    }
    tls_.emplace(ioc_, *tls_ctx_);
    Status s = co_await connectStream(*tls_, ep_, timeout_);
    if (!s.isOk()) tls_.reset();
    co_return s;
  }

  asio::awaitable<Result<Response>> roundTrip(http::request<http::string_body> req) {
    // A kept connection may have been closed by the server meanwhile (idle timeout, restart):
    // if nothing at all came back on it, the request was not processed, so retry once on a
    // fresh connection.
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool reused = unix_.has_value() || tls_.has_value() || tcp_.has_value();
      if (!reused) {
        Status s = co_await connect();
        if (!s.isOk()) co_return s;
      }
      bool nothing_received = false;
      // Not a conditional expression: GCC 12 destroys temporaries of a co_await inside ?:
      // twice.
      std::optional<Result<Response>> r;
      if (unix_) {
        r.emplace(co_await exchange(*unix_, req, &nothing_received));
      } else if (tcp_) {
        r.emplace(co_await exchange(*tcp_, req, &nothing_received));
      } else {
        r.emplace(co_await exchange(*tls_, req, &nothing_received));
      }
      if (r->ok()) co_return std::move(*r);
      close();
      if (!(reused && (nothing_received || r->status().code() == StatusCode::kUnavailable))) {
        co_return std::move(*r);
      }
    }
    co_return Status::unavailable("connection to " + ep_.describe() + " failed twice");
  }

  ClientEndpoint ep_;
  std::chrono::milliseconds timeout_;
  asio::io_context ioc_;
  std::unique_ptr<ssl::context> tls_ctx_;
  beast::flat_buffer buffer_;
  std::optional<UnixStream> unix_;
  std::optional<TlsStream> tls_;
  std::optional<TcpStream> tcp_;
};

HttpClient::HttpClient(ClientEndpoint endpoint, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(std::move(endpoint), timeout)) {}

HttpClient::~HttpClient() = default;

Result<Response> HttpClient::request(Method method, std::string_view target, std::string body,
                                     std::vector<std::pair<std::string, std::string>> headers) {
  return impl_->request(method, target, std::move(body), std::move(headers));
}

void HttpClient::close() {
  impl_->close();
}

uint64_t HttpClient::connectionsOpened() const {
  return impl_->connections_opened_;
}

// ---------------------------------------------------------------------------------------------
// WebSocketClient

class WebSocketClient::Impl : public std::enable_shared_from_this<WebSocketClient::Impl> {
 public:
  explicit Impl(WebSocketClientOptions options)
      : options_(std::move(options)),
        random_(options_.seed),
        signal_(ioc_),
        backoff_timer_(ioc_),
        done_timer_(ioc_),
        force_timer_(ioc_) {}

  void setBearerToken(std::string token) {
    std::lock_guard<std::mutex> lock(mu_);
    options_.endpoint.bearer_token = std::move(token);
  }

  void start() {
    if (thread_.joinable()) return;
    asio::co_spawn(ioc_, loop(), asio::detached);
    thread_ = std::thread([this] { ioc_.run(); });
  }

  void stop() {
    if (!thread_.joinable()) return;
    asio::post(ioc_, [this] {
      stopping_ = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        closing_ = true;
      }
      signal_.cancel();
      backoff_timer_.cancel();
      bool is_connected;
      {
        std::lock_guard<std::mutex> lock(mu_);
        is_connected = connected_;
      }
      // A connection in progress is cut; an open one gets a close handshake from the writer.
      if (!is_connected && cancel_connect_) cancel_connect_();
      // The close handshake is bounded; past that, the thread stops regardless.
      force_timer_.expires_after(options_.connect_timeout);
      force_timer_.async_wait([this](error_code ec) {
        if (!ec) ioc_.stop();
      });
    });
    thread_.join();
  }

  bool send(std::string message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_ || closing_) return false;
    queue_.push_back(std::move(message));
    asio::post(ioc_, [this] { signal_.cancel(); });
    return true;
  }

  bool connected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return connected_;
  }

  std::atomic<uint64_t> connect_count_{0};

 private:
  std::chrono::milliseconds nextBackoff(int attempt) {
    double base = static_cast<double>(options_.initial_backoff.count()) *
                  std::pow(2.0, std::min(attempt, 30));
    base = std::min(base, static_cast<double>(options_.max_backoff.count()));
    double factor = 1.0 + options_.jitter * (2.0 * random_.uniformReal() - 1.0);
    return std::chrono::milliseconds(static_cast<int64_t>(base * factor));
  }

  template <class Stream>
  asio::awaitable<void> writer(websocket::stream<Stream>& ws) {
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
        co_await ws.async_write(asio::buffer(m), awaitEc(ec));
        if (ec) {
          write_failed = true;
          break;
        }
      }
      if (write_failed) break;
    }
    if (!write_failed && !read_done_) {
      co_await ws.async_close(websocket::close_code::normal, awaitEc(ec));
    }
    writer_done_ = true;
    done_timer_.cancel();
  }

  // One connection: handshake, then read until it ends. Returns why it ended.
  template <class Stream>
  asio::awaitable<Status> session(websocket::stream<Stream>& ws) {
    error_code ec;
    auto& lowest = beast::get_lowest_layer(ws);
    cancel_connect_ = [&lowest] { lowest.cancel(); };
    Status s = co_await connectStream(ws.next_layer(), options_.endpoint, options_.connect_timeout);
    if (!s.isOk()) co_return s;
    if (stopping_) co_return Status::unavailable("client stopped");
    lowest.expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = options_.connect_timeout;
    t.idle_timeout = options_.idle_timeout;
    t.keep_alive_pings = true;
    ws.set_option(t);
    ws.read_message_max(options_.max_message_bytes);
    std::string token;
    if (!options_.endpoint.isUnix()) {
      std::lock_guard<std::mutex> lock(mu_);
      token = options_.endpoint.bearer_token;
    }
    ws.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
      req.set(http::field::user_agent, "gpool-client");
      if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    }));
    websocket::response_type res;
    std::string host = options_.endpoint.isUnix() ? "localhost" : options_.endpoint.host;
    co_await ws.async_handshake(res, host, options_.target, awaitEc(ec));
    if (ec) {
      if (ec == websocket::error::upgrade_declined) {
        int status = static_cast<int>(res.result_int());
        auto header = res.find("Gpool-Leader");
        leader_hint_ = namedLeader(status,
                                   header == res.end()
                                       ? std::nullopt
                                       : std::optional<std::string>(std::string(header->value())),
                                   res.body());
        std::string msg =
            fmt::format("WebSocket upgrade to {}{} refused with HTTP {}: {}",
                        options_.endpoint.describe(), options_.target, status, res.body());
        if (status == 401) co_return Status::unauthenticated(msg);
        if (status == 403) co_return Status::permissionDenied(msg);
        if (status == 404) co_return Status::notFound(msg);
        co_return Status::unavailable(msg);
      }
      co_return transportError(options_.endpoint, "WebSocket handshake with", ec);
    }
    cancel_connect_ = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      connected_ = true;
      closing_ = stopping_;
      queue_.clear();
    }
    read_done_ = false;
    writer_done_ = false;
    connect_count_.fetch_add(1);
    if (options_.on_connect) options_.on_connect();
    asio::co_spawn(ioc_, writer(ws), asio::detached);
    beast::flat_buffer buf;
    for (;;) {
      co_await ws.async_read(buf, awaitEc(ec));
      if (ec) break;
      if (options_.on_message) options_.on_message(beast::buffers_to_string(buf.data()));
      buf.consume(buf.size());
    }
    read_done_ = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      connected_ = false;
      queue_.clear();
    }
    signal_.cancel();
    if (!writer_done_) {
      error_code ignored;
      done_timer_.expires_at(asio::steady_timer::time_point::max());
      co_await done_timer_.async_wait(awaitEc(ignored));
    }
    if (ec == websocket::error::closed) {
      co_return Status::unavailable(fmt::format("connection closed by server (code {}: {})",
                                                static_cast<int>(ws.reason().code),
                                                ws.reason().reason.c_str()));
    }
    co_return transportError(options_.endpoint, "connection lost to", ec);
  }

  asio::awaitable<void> loop() {
    // Failed attempts since the last connection; the backoff grows once per round over all the
    // addresses (endpoint + alternates), so that a standby's 503 does not slow the way to the
    // leader.
    int failures = 0;
    all_endpoints_.push_back(options_.endpoint);
    all_endpoints_.insert(all_endpoints_.end(), options_.alternates.begin(),
                          options_.alternates.end());
    ssl::context* ctx = nullptr;
    if (!options_.endpoint.isUnix()) {
      Status s = makeTlsContext(options_.endpoint, &tls_ctx_);
      if (!s.isOk()) {
        if (options_.on_disconnect) options_.on_disconnect(s);
        co_return;
      }
      ctx = tls_ctx_.get();
    }
    while (!stopping_) {
      Status why;
      leader_hint_.clear();
      uint64_t before = connect_count_.load();
      if (options_.endpoint.isUnix()) {
        websocket::stream<UnixStream> ws(ioc_);
        why = co_await session(ws);
      } else {
        websocket::stream<TlsStream> ws(ioc_, *ctx);
        why = co_await session(ws);
      }
      cancel_connect_ = nullptr;
      if (connect_count_.load() != before) failures = 0;
      if (stopping_) break;
      if (options_.on_disconnect) options_.on_disconnect(why);
      if (all_endpoints_.size() > 1) nextEndpoint();
      int round = failures++ / static_cast<int>(all_endpoints_.size());
      error_code ec;
      backoff_timer_.expires_after(nextBackoff(round));
      co_await backoff_timer_.async_wait(awaitEc(ec));
    }
    force_timer_.cancel();
  }

  // Moves to the leader the last refusal named when it is another of the addresses, else to
  // the next one; keeps the bearer token (it may have been swapped since the start).
  void nextEndpoint() {
    size_t next = findEndpoint(all_endpoints_, leader_hint_);
    if (next == std::string_view::npos || next == endpoint_index_) {
      next = (endpoint_index_ + 1) % all_endpoints_.size();
    }
    endpoint_index_ = next;
    std::lock_guard<std::mutex> lock(mu_);
    std::string token = std::move(options_.endpoint.bearer_token);
    options_.endpoint = all_endpoints_[endpoint_index_];
    options_.endpoint.bearer_token = std::move(token);
  }

  WebSocketClientOptions options_;
  std::vector<ClientEndpoint> all_endpoints_;  // I/O thread only (set at the loop's start)
  size_t endpoint_index_ = 0;                  // I/O thread only
  std::string leader_hint_;                    // I/O thread only: the last refusal's leader
  SeededRandom random_;
  asio::io_context ioc_;
  asio::steady_timer signal_;
  asio::steady_timer backoff_timer_;
  asio::steady_timer done_timer_;
  asio::steady_timer force_timer_;
  std::unique_ptr<ssl::context> tls_ctx_;
  std::function<void()> cancel_connect_;  // I/O thread only
  bool stopping_ = false;                 // I/O thread only
  bool read_done_ = false;                // I/O thread only
  bool writer_done_ = false;              // I/O thread only
  mutable std::mutex mu_;
  std::deque<std::string> queue_;  // GUARDED_BY(mu_)
  bool connected_ = false;         // GUARDED_BY(mu_)
  bool closing_ = false;           // GUARDED_BY(mu_)
  std::thread thread_;
};

WebSocketClient::WebSocketClient(WebSocketClientOptions options)
    : impl_(std::make_shared<Impl>(std::move(options))) {}

WebSocketClient::~WebSocketClient() {
  impl_->stop();
}

void WebSocketClient::start() {
  impl_->start();
}

void WebSocketClient::stop() {
  impl_->stop();
}

bool WebSocketClient::send(std::string message) {
  return impl_->send(std::move(message));
}

bool WebSocketClient::connected() const {
  return impl_->connected();
}

uint64_t WebSocketClient::connectCount() const {
  return impl_->connect_count_.load();
}

void WebSocketClient::setBearerToken(std::string token) {
  impl_->setBearerToken(std::move(token));
}

}  // namespace gpool::net
