#include "cli/api_client.h"

#include <pwd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <iostream>
#include <vector>

#include "api/json_reader.h"

namespace gpool::cli {

using nlohmann::json;

ApiClient::ApiClient(std::string socket)
    : socket_(std::move(socket)), http_(net::ClientEndpoint::unixSocket(socket_)) {}

Result<json> ApiClient::call(net::Method method, const std::string& target, std::string body) {
  Result<net::Response> r = http_.request(method, target, std::move(body));
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kUnavailable) {
      return Status::unavailable(
          "cannot reach gpoold at unix:" + socket_ + " (" + r.status().message() +
          "): is it running? Start it with `systemctl start gpoold` (or `gpoold --config "
          "FILE` with controller.socket set), or point --socket or GPOOL_SOCKET at its socket");
    }
    return r.status().withContext("gpoold at unix:" + socket_);
  }
  Result<json> parsed = api::parseJsonText(r->body, "gpoold's answer");
  if (r->status >= 400) {
    if (parsed.ok() && parsed->is_object() && parsed->contains("error") &&
        (*parsed)["error"].is_object()) {
      const json& e = (*parsed)["error"];
      std::string code = e.value("code", "internal");
      std::string message = e.value("message", "");
      return Status(codeFromName(code), message);
    }
    return Status::internal("gpoold answered HTTP " + std::to_string(r->status) + ": " + r->body);
  }
  return parsed;
}

StatusCode codeFromName(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (statusCodeName(static_cast<StatusCode>(c)) == name) return static_cast<StatusCode>(c);
  }
  return StatusCode::kInternal;
}

std::string currentUser() {
  uid_t uid = geteuid();
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) return pw.pw_name;
  return "#" + std::to_string(uid);  // what the controller calls a uid without a passwd entry
}

void printJson(const json& j) {
  std::cout << api::dumpJson(j, 2) << "\n";
}

std::function<void()> reporting(std::function<Status()> body) {
  return [body = std::move(body)] {
    Status s = body();
    if (s.isOk()) return;
    std::cerr << "gpool: " << s.message() << "\n";
    throw CLI::RuntimeError(exitCodeFor(s.code()));
  };
}

}  // namespace gpool::cli
