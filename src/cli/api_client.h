#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/status.h"
#include "net/client.h"
#include "net/http.h"

// What every command that talks to gpoold shares: the REST client over the controller's Unix
// socket, JSON printing, the caller's Unix name, and turning a failed command into its exit code.
namespace gpool::cli {

// The REST API over the controller's Unix socket: 2xx bodies as JSON, error bodies as the Status
// they carry (code and message from {"error": {...}}). An unreachable socket is Unavailable with
// a message saying how to start gpoold or point --socket at it.
//
// Thread-safety: one thread at a time (it keeps one connection).
class ApiClient {
 public:
  explicit ApiClient(std::string socket);

  Result<nlohmann::json> call(net::Method method, const std::string& target, std::string body = {});
  Result<nlohmann::json> get(const std::string& target) { return call(net::Method::kGet, target); }
  Result<nlohmann::json> post(const std::string& target, std::string body) {
    return call(net::Method::kPost, target, std::move(body));
  }
  Result<nlohmann::json> put(const std::string& target, std::string body) {
    return call(net::Method::kPut, target, std::move(body));
  }
  Result<nlohmann::json> del(const std::string& target) {
    return call(net::Method::kDelete, target);
  }

 private:
  std::string socket_;
  net::HttpClient http_;
};

// The StatusCode named `name` ("not_found"); kInternal for an unknown name.
StatusCode codeFromName(std::string_view name);

// The effective user's name, or "#UID" without a passwd entry (what gpoold calls such a peer).
std::string currentUser();

// Prints `j` indented by 2, with a newline, on stdout.
void printJson(const nlohmann::json& j);

// A CLI11 callback that runs `body`; a failure prints "gpool: <message>" on stderr and ends the
// parse with CLI::RuntimeError carrying exitCodeFor(code) (docs/cli-exit-codes.md).
std::function<void()> reporting(std::function<Status()> body);

}  // namespace gpool::cli
