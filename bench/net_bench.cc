// net_bench: requests per second and p50/p99 latency of a trivial JSON handler under N
// concurrent keep-alive clients (default 64), over the Unix socket and over TLS, against a
// baseline of the same clients doing the same request/response exchange on a raw Unix-socket
// echo server (no HTTP parsing, no routing, no TLS) in the same run. The issue's target is
// p99 < 20 ms for list/show under 64 concurrent clients.
//
// Usage: net_bench [--clients N] [--seconds S] [--server-threads T]

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "common/clock.h"
#include "net/client.h"
#include "net/server.h"

namespace {

using gpool::bench::drive;
using gpool::bench::Figures;
using namespace gpool::net;

constexpr char kBody[] =
    R"({"id":"42","user":"alice","state":"RUNNING","gpus":1,"partition":"default",)"
    R"("submit_time":"2026-12-02T15:00:00Z","time_limit":"01:00:00","reason":"None"})";

// The raw baseline: a thread-per-connection Unix-socket server that answers each
// request-sized message with a response-sized message, without parsing anything.
class RawEchoServer {
 public:
  RawEchoServer(std::string path, size_t request_size, std::string response)
      : path_(std::move(path)), request_size_(request_size), response_(std::move(response)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    ::unlink(path_.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 1024) != 0) {
      std::perror("raw echo server");
      std::exit(1);
    }
    acceptor_ = std::thread([this] {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        workers_.emplace_back([this, c] {
          std::vector<char> buf(request_size_);
          for (;;) {
            size_t got = 0;
            while (got < request_size_) {
              ssize_t n = ::read(c, buf.data() + got, request_size_ - got);
              if (n <= 0) {
                ::close(c);
                return;
              }
              got += static_cast<size_t>(n);
            }
            if (::write(c, response_.data(), response_.size()) < 0) break;
          }
          ::close(c);
        });
      }
    });
  }
  ~RawEchoServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    for (auto& w : workers_)
      w.join();
    ::unlink(path_.c_str());
  }

 private:
  std::string path_;
  size_t request_size_;
  std::string response_;
  int fd_ = -1;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

std::function<bool()> rawClient(const std::string& path, const std::string& request,
                                size_t response_size) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return [] { return false; };
  }
  auto buf = std::make_shared<std::vector<char>>(response_size);
  auto holder = std::shared_ptr<int>(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
  return [holder, request, buf, response_size] {
    if (::write(*holder, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
      return false;
    }
    size_t got = 0;
    while (got < response_size) {
      ssize_t n = ::read(*holder, buf->data() + got, response_size - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  };
}

bool makeCerts(const std::string& dir) {
  std::ofstream(dir + "/make.sh")
      << "set -e\ncd \"$1\"\n"
         "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
         "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj '/CN=bench CA'\n"
         "openssl req $K -keyout server.key -out server.csr -subj '/CN=localhost'\n"
         "printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf\n"
         "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
         "-out server.pem -days 2 -extfile ext.cnf\n";
  std::string cmd = "sh '" + dir + "/make.sh' '" + dir + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int clients = 64;
  double seconds = 3.0;
  int server_threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--clients") clients = std::atoi(argv[i + 1]);
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    if (a == "--server-threads") server_threads = std::atoi(argv[i + 1]);
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpool-net-bench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return 1;
  const std::string dir = tmpl;
  if (!makeCerts(dir)) {
    std::fprintf(stderr, "net_bench: openssl failed making certificates\n");
    return 1;
  }

  Router router;
  (void)router.add(Method::kGet, "/v1/jobs/{id}", [](const Request& req) {
    std::string body = kBody;
    body.replace(body.find("42"), 2, req.pathParam("id"));
    return Response::json(200, std::move(body));
  });
  InMemoryTokenStore tokens;
  auto token = tokens.issue("alice");
  ServerOptions options;
  options.unix_socket_path = dir + "/api.sock";
  options.tcp_port = 0;
  options.tls_cert_file = dir + "/server.pem";
  options.tls_key_file = dir + "/server.key";
  options.token_verifier = &tokens;
  options.threads = server_threads;
  Server server(options, std::move(router));
  if (gpool::Status s = server.start(); !s.isOk()) {
    std::fprintf(stderr, "net_bench: %s\n", s.toString().c_str());
    return 1;
  }

  // Measure one real exchange so the baseline moves the same number of bytes.
  HttpClient probe(ClientEndpoint::unixSocket(options.unix_socket_path));
  auto sample = probe.get("/v1/jobs/42");
  if (!sample.ok()) {
    std::fprintf(stderr, "net_bench: %s\n", sample.status().toString().c_str());
    return 1;
  }
  const std::string raw_request =
      "GET /v1/jobs/42 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: gpool-client\r\n\r\n";
  const size_t response_size = sample->body.size() + 150;  // body plus typical headers
  RawEchoServer raw(dir + "/raw.sock", raw_request.size(), std::string(response_size, 'r'));

  std::printf("net_bench: %d keep-alive clients, %.1f s per run, %d server I/O threads, %u CPUs\n",
              clients, seconds, server_threads, std::thread::hardware_concurrency());
  std::vector<Figures> results;
  results.push_back(drive("raw unix echo (baseline)", clients, seconds, [&] {
    return rawClient(dir + "/raw.sock", raw_request, response_size);
  }));
  results.push_back(drive("http over unix socket", clients, seconds, [&] {
    auto c = std::make_shared<HttpClient>(ClientEndpoint::unixSocket(options.unix_socket_path));
    return std::function<bool()>([c] {
      auto r = c->get("/v1/jobs/42");
      return r.ok() && r->status == 200;
    });
  }));
  results.push_back(drive("https (TLS 1.3, bearer token)", clients, seconds, [&] {
    auto c = std::make_shared<HttpClient>(
        ClientEndpoint::tls("127.0.0.1", server.tcpPort(), dir + "/ca.pem", token->token));
    return std::function<bool()>([c] {
      auto r = c->get("/v1/jobs/42");
      return r.ok() && r->status == 200;
    });
  }));
  server.stop();

  const Figures& base = results[0];
  std::printf("%-32s %10s %8s %10s %9s %9s %12s\n", "transport", "requests", "errors", "req/s",
              "p50 ms", "p99 ms", "rps/baseline");
  for (const Figures& f : results) {
    std::printf("%-32s %10lu %8lu %10.0f %9.3f %9.3f %12.3f\n", f.name.c_str(),
                static_cast<unsigned long>(f.requests), static_cast<unsigned long>(f.errors),
                f.rps(), f.p50_ms, f.p99_ms, base.rps() > 0 ? f.rps() / base.rps() : 0.0);
  }
  bool met = results[1].p99_ms < 20.0 && results[2].p99_ms < 20.0;
  std::printf("target p99 < 20 ms under %d clients: %s (unix %.3f ms, tls %.3f ms)\n", clients,
              met ? "met" : "NOT met", results[1].p99_ms, results[2].p99_ms);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
