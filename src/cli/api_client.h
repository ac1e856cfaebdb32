#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job.h"
#include "api/json_reader.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "net/client.h"
#include "net/http.h"

// What the client commands share (client_commands.cc, interactive_commands.cc): the REST client
// over the controller's Unix socket, job references, listing, and error reporting. Internal to
// gpool_cli.
namespace gpool::cli {

using nlohmann::json;

constexpr int kPageSize = 1000;

// The StatusCode named `name` ("not_found"); kInternal for an unknown name.
StatusCode codeFromName(std::string_view name);

// The name of the calling user (effective uid), or "#<uid>" without a passwd entry.
std::string currentUser();

// The REST API over the controller's Unix socket: 2xx bodies as JSON, error bodies as Status.
// Thread-safety: one thread at a time.
class ApiClient {
 public:
  explicit ApiClient(std::string socket)
      : socket_(std::move(socket)), http_(net::ClientEndpoint::unixSocket(socket_)) {}

  Result<json> call(net::Method method, const std::string& target, std::string body = {}) {
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
  Result<json> get(const std::string& target) { return call(net::Method::kGet, target); }
  Result<json> post(const std::string& target, std::string body) {
    return call(net::Method::kPost, target, std::move(body));
  }

 private:
  std::string socket_;
  net::HttpClient http_;
};

void printJson(const json& j);

// A job id as users write it: "42", or "42_3" for element 3 of array 42.
struct JobRef {
  uint64_t id = 0;
  std::optional<uint32_t> array_index;
  std::string text;
};

// InvalidArgument naming `text` when it is not a job id.
Result<JobRef> parseJobRef(const std::string& text);

// The jobs of one page of GET /v1/jobs; their JSON also goes to `raw` when given.
Result<std::vector<api::Job>> jobsFrom(const json& page, std::vector<json>* raw);

// Every job matching `query` (without after/limit), following next_after to the end.
Result<std::vector<api::Job>> listAll(ApiClient& api, const std::string& query,
                                      std::vector<json>* raw);

// The job id of `ref`: itself, or the element of an array found by listing from the array's
// id on (the elements of an array get consecutive ids in one transaction).
Result<uint64_t> resolve(ApiClient& api, const JobRef& ref);

TimePoint now();

std::string activeStatesQuery();

// Runs `body`; a failure is printed and becomes the process exit code.
template <typename F>
std::function<void()> reporting(F body) {
  return [body] {
    Status s = body();
    if (s.isOk()) return;
    std::cerr << "gpool: " << s.message() << "\n";
    throw CLI::RuntimeError(exitCodeFor(s.code()));
  };
}

}  // namespace gpool::cli
