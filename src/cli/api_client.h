#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "net/client.h"
#include "net/http.h"

// What every command that talks to gpoold shares (client, admin, interactive commands): the REST
// client over the controller's Unix socket or its TLS listener, JSON printing, the caller's Unix
// name, job references and listing, and turning a failed command into its exit code. Internal to
// gpool_cli.
namespace gpool::cli {

using nlohmann::json;

// The page size the CLI asks for when it lists everything.
constexpr int kPageSize = 1000;

struct GlobalOptions;

// Where the global options point: the controller's Unix socket (identity from the kernel), or
// with --server its TLS listener with a bearer token. The one place that turns --socket,
// --server, --ca and the token (--token-file, $GPOOL_TOKEN, ~/.config/gpool/token) into an
// endpoint; ApiClient and the WebSocket commands (watch, queue --watch) use it.
struct ControllerTarget {
  net::ClientEndpoint endpoint;
  // The other controllers of a highly available pool (--socket or --server as a comma-separated
  // list, docs/ha.md), tried in turn when `endpoint` cannot be reached or is a standby.
  std::vector<net::ClientEndpoint> alternates;
  // Where the token came from ("$GPOOL_TOKEN" or the file), for messages; empty for the socket.
  std::string token_source;
};

// Errors: InvalidArgument for a --server that is not HOST:PORT or an unreadable --token-file;
// PermissionDenied for a token file that group or others may read (as ssh refuses such keys);
// Unauthenticated when --server is given and no token is found (the message says how to make
// one).
Result<ControllerTarget> controllerTarget(const GlobalOptions& global);

// ~/.config/gpool/token ($HOME, else the passwd entry's home); empty when no home is known.
std::string defaultTokenFile();

// Reads a token file: the first line, blanks trimmed. PermissionDenied when group or others
// have any access to it (chmod 600 fixes it), InvalidArgument when it is empty, IoError when
// it cannot be read.
Result<std::string> readTokenFile(const std::string& path);

// A 401 over TLS (`message`: gpoold's reason) as Unauthenticated naming the server, where the
// token came from and how to get another.
Status refusedToken(const ControllerTarget& target, std::string_view message);

// The REST API of gpoold: 2xx bodies as JSON, error bodies as the Status they carry (code and
// message from {"error": {...}}). An unreachable controller is Unavailable with a message saying
// how to start gpoold or point --socket at it (over TLS: naming HOST:PORT, and --ca when the
// server's certificate was not accepted); a token the server refuses (401) is Unauthenticated
// naming where the token came from.
//
// With several controllers (a highly available pool, docs/ha.md) a request that one of them
// certainly did not act on goes to another: a refused connection, or a 503 from a standby
// (which names the leader: that one is next) or from a deposed leader (its write was refused
// in the database). When a whole round finds no leader (a takeover under way) it waits, 200 ms
// doubling up to 2 s, and tries again for up to kFindLeaderFor; then the last answer stands.
// A connection lost or timed out mid-request is not retried: that controller may have acted.
//
// Thread-safety: one thread at a time (it keeps one connection).
class ApiClient {
 public:
  // How long a request looks for a leader among several controllers: beyond a takeover (the
  // lease, 6 s by default, plus a standby's poll and its rebuild; docs/ha.md).
  static constexpr std::chrono::seconds kFindLeaderFor{20};

  explicit ApiClient(ControllerTarget target);
  // The client for what the global options name (see controllerTarget for the errors). Every
  // command that talks to gpoold builds its client here.
  static Result<ApiClient> connect(const GlobalOptions& global);

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
  bool remote() const { return !target_.endpoint.isUnix(); }
  // Who gpoold takes the caller for: the local user over the socket; over TLS the token's
  // owner (GET /v1/account), who need not have the same name here.
  Result<std::string> callerName();

 private:
  // Sends the request; with several controllers (HA), follows the leader (see call()).
  Result<net::Response> requestLeader(net::Method method, const std::string& target,
                                      const std::string& body);
  // Makes controllers_[i] the one requests go to.
  void useController(size_t i);

  ControllerTarget target_;  // target_.endpoint: the controller requests go to now
  std::vector<net::ClientEndpoint> controllers_;  // endpoint + alternates, in the list's order
  size_t at_ = 0;                                 // index of target_.endpoint in controllers_
  std::unique_ptr<net::HttpClient> http_;         // a pointer so that ApiClient can move
};

// InvalidArgument when --server is set: `command` needs the controller's machine (its local
// files or processes); the message says where to run it instead.
Status requireLocal(const GlobalOptions& global, std::string_view command, std::string_view why);

// The StatusCode named `name` ("not_found"); kInternal for an unknown name.
StatusCode codeFromName(std::string_view name);

// The effective user's name, or "#UID" without a passwd entry (what gpoold calls such a peer).
std::string currentUser();

// Prints `j` indented by 2, with a newline, on stdout.
void printJson(const nlohmann::json& j);

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

// The wall clock, for ages and elapsed times shown to users.
TimePoint now();

// The query suffix selecting jobs not yet ended (PENDING, RUNNING, COMPLETING).
std::string activeStatesQuery();

// A CLI11 callback that runs `body`; a failure prints "gpool: <message>" on stderr and ends the
// parse with CLI::RuntimeError carrying exitCodeFor(code) (docs/cli-exit-codes.md).
std::function<void()> reporting(std::function<Status()> body);

}  // namespace gpool::cli
