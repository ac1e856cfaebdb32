#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpool::net::testing {

// A directory made by mkdtemp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A throwaway CA and a server certificate for "localhost", 127.0.0.1 and `extra_ips` signed by
// it, plus a second, unrelated CA; made by the `openssl` command.
struct TestCerts {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string other_ca_file;
};
Status makeTestCerts(const std::string& dir, TestCerts* out,
                     const std::vector<std::string>& extra_ips = {});

// Condition-variable waiting for tests: state changes call `notify`, the test thread waits
// for a predicate (with a generous timeout so a bug fails instead of hanging).
class Waiter {
 public:
  void notify() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  // Runs `fn` under the waiter's lock, then notifies.
  void update(const std::function<void()>& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    fn();
    cv_.notify_all();
  }
  bool waitFor(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, pred);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// Connects to a Unix socket, writes `data`, reads until the peer closes; returns what was read.
std::string rawUnixExchange(const std::string& path, const std::string& data);
// A connected Unix-socket fd (or -1).
int rawUnixConnect(const std::string& path);

}  // namespace gpool::net::testing
